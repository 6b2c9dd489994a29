#include "shape/rules.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <numeric>

#include "cli/error.h"
#include "graph/tl_ops.h"
#include "tensor/tensor.h"

namespace tl {
namespace {

using Values = std::vector<SymExpr>;
using MaybeValues = std::optional<Values>;
// Elementwise on known values; nullopt when an element cannot be decided.
using BinaryFn = std::function<std::optional<SymExpr>(const SymExpr&, const SymExpr&)>;
using UnaryFn = std::function<std::optional<SymExpr>(const SymExpr&)>;

constexpr int64_t kEndOfAxis = int64_t(1) << 31;  // slice bounds at least this large mean "to the end"

// For each element of `out`, the element of `in` it reads under numpy broadcasting.
std::vector<int64_t> broadcastSource(const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  const size_t off = out.size() - in.size();
  const auto inStrides = contiguousStrides(in);
  const auto outStrides = contiguousStrides(out);
  std::vector<int64_t> src(static_cast<size_t>(elementCount(out)));
  for (int64_t k = 0; k < elementCount(out); ++k) {
    int64_t rem = k, idx = 0;
    for (size_t d = 0; d < out.size(); ++d) {
      int64_t coord = rem / outStrides[d];
      rem %= outStrides[d];
      if (d >= off && in[d - off] != 1) idx += coord * inStrides[d - off];
    }
    src[static_cast<size_t>(k)] = idx;
  }
  return src;
}

bool smallEnough(const std::vector<int64_t>& dims) { return elementCount(dims) <= kMaxValueElements; }

// Elementwise values of several broadcast inputs, when all are known.
MaybeValues broadcastValues(RuleContext& c, const std::vector<size_t>& inputs, const std::vector<SymExpr>& outDims,
                            const std::function<std::optional<SymExpr>(const std::vector<SymExpr>&)>& fn) {
  auto out = constDims(outDims);
  if (!out || !smallEnough(*out)) return std::nullopt;
  std::vector<std::vector<int64_t>> sources;
  for (size_t i : inputs) {
    if (!c.value(i)) return std::nullopt;
    auto d = constDims(c.input(i).dims);
    if (!d) return std::nullopt;
    sources.push_back(broadcastSource(*d, *out));
  }
  Values result;
  std::vector<SymExpr> args(inputs.size());
  for (int64_t k = 0; k < elementCount(*out); ++k) {
    for (size_t j = 0; j < inputs.size(); ++j) args[j] = (*c.value(inputs[j]))[sources[j][k]];
    auto v = fn(args);
    if (!v) return std::nullopt;
    result.push_back(*v);
  }
  return result;
}

std::optional<int64_t> truthOf(const SymExpr& e) {
  if (auto v = e.constValue()) return *v != 0;
  if (provablyPositive(e) || provablyPositive(-e)) return 1;
  return std::nullopt;
}

DType outDType(RuleContext& c, const std::string& op) {
  static const char* boolOps[] = {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual",
                                  "And", "Or", "Xor", "Not", "IsNaN", "IsInf"};
  for (const char* b : boolOps)
    if (op == b) return DType::Bool;
  return c.input(0).dtype;
}

std::optional<SymExpr> intPow(const SymExpr& a, const SymExpr& b) {
  auto x = a.constValue(), y = b.constValue();
  if (!y || *y < 0 || *y > 62) return std::nullopt;
  if (!x && *y > 4) return std::nullopt;
  SymExpr r(1);
  for (int64_t i = 0; i < *y; ++i) r = r * a;
  return r;
}

BinaryFn binaryFn(RuleContext& c, const std::string& op) {
  const bool isInt = isInteger(c.input(0).dtype);
  if (op == "Add" || op == "Sum") return [](const SymExpr& a, const SymExpr& b) { return a + b; };
  if (op == "Sub") return [](const SymExpr& a, const SymExpr& b) { return a - b; };
  if (op == "Mul") return [](const SymExpr& a, const SymExpr& b) { return a * b; };
  if (op == "Max") return [](const SymExpr& a, const SymExpr& b) { return max(a, b); };
  if (op == "Min") return [](const SymExpr& a, const SymExpr& b) { return min(a, b); };
  if (op == "Pow") return intPow;
  if (op == "Div") {
    return [isInt](const SymExpr& a, const SymExpr& b) -> std::optional<SymExpr> {
      auto x = a.constValue(), y = b.constValue();
      if (y && *y == 0) return std::nullopt;
      if (isInt) {
        if (x && y) return SymExpr(*x / *y);  // C semantics, as ONNX Runtime
        if (provablyNonNegative(a) && provablyPositive(b)) return floorDiv(a, b);
        return std::nullopt;
      }
      return exactDiv(a, b);  // float values are tracked only while they stay integers
    };
  }
  if (op == "Mod") {
    const bool fmod = c.attrInt("fmod", 0) != 0;
    return [fmod](const SymExpr& a, const SymExpr& b) -> std::optional<SymExpr> {
      auto x = a.constValue(), y = b.constValue();
      if (y && *y == 0) return std::nullopt;
      if (!fmod) return mod(a, b);
      if (x && y) return SymExpr(*x % *y);
      if (provablyNonNegative(a) && provablyPositive(b)) return mod(a, b);
      return std::nullopt;
    };
  }
  auto cmp = [](std::initializer_list<Order> yes, std::initializer_list<Order> no) -> BinaryFn {
    std::vector<Order> y(yes), n(no);
    return [y, n](const SymExpr& a, const SymExpr& b) -> std::optional<SymExpr> {
      Order o = compare(a, b);
      if (std::find(y.begin(), y.end(), o) != y.end()) return SymExpr(1);
      if (std::find(n.begin(), n.end(), o) != n.end()) return SymExpr(0);
      return std::nullopt;
    };
  };
  if (op == "Equal") return cmp({Order::Equal}, {Order::Less, Order::Greater});
  if (op == "Less") return cmp({Order::Less}, {Order::Equal, Order::Greater, Order::GreaterEqual});
  if (op == "LessOrEqual") return cmp({Order::Less, Order::Equal, Order::LessEqual}, {Order::Greater});
  if (op == "Greater") return cmp({Order::Greater}, {Order::Equal, Order::Less, Order::LessEqual});
  if (op == "GreaterOrEqual") return cmp({Order::Greater, Order::Equal, Order::GreaterEqual}, {Order::Less});
  auto logic = [](const std::function<bool(bool, bool)>& f) -> BinaryFn {
    return [f](const SymExpr& a, const SymExpr& b) -> std::optional<SymExpr> {
      auto x = truthOf(a), y = truthOf(b);
      if (!x || !y) return std::nullopt;
      return SymExpr(f(*x != 0, *y != 0) ? 1 : 0);
    };
  };
  if (op == "And") return logic([](bool a, bool b) { return a && b; });
  if (op == "Or") return logic([](bool a, bool b) { return a || b; });
  if (op == "Xor") return logic([](bool a, bool b) { return a != b; });
  return nullptr;  // values not tracked (BitShift, PRelu, ...)
}

void broadcastingRule(RuleContext& c) {
  const std::string& op = c.node().op_type();
  std::vector<std::vector<SymExpr>> shapes;
  std::vector<size_t> inputs;
  for (size_t i = 0; i < c.numInputs(); ++i) {
    if (!c.hasInput(i)) continue;
    shapes.push_back(c.input(i).dims);
    inputs.push_back(i);
  }
  if (inputs.empty()) c.fail("needs at least one input");
  auto dims = c.broadcast(shapes);
  MaybeValues value;
  if (BinaryFn fn = binaryFn(c, op)) {
    value = broadcastValues(c, inputs, dims, [&](const std::vector<SymExpr>& args) -> std::optional<SymExpr> {
      std::optional<SymExpr> acc = args[0];
      for (size_t j = 1; j < args.size() && acc; ++j) acc = fn(*acc, args[j]);
      return acc;
    });
  }
  c.setOutput(0, outDType(c, op), dims, value);
}

UnaryFn unaryFn(RuleContext& c, const std::string& op) {
  if (op == "Identity" || op == "Floor" || op == "Ceil" || op == "Round")
    return [](const SymExpr& a) { return a; };
  if (op == "Neg") return [](const SymExpr& a) { return -a; };
  if (op == "Abs") {
    return [](const SymExpr& a) -> std::optional<SymExpr> {
      if (provablyNonNegative(a)) return a;
      if (provablyNonNegative(-a)) return -a;
      return std::nullopt;
    };
  }
  if (op == "Not") {
    return [](const SymExpr& a) -> std::optional<SymExpr> {
      auto t = truthOf(a);
      if (!t) return std::nullopt;
      return SymExpr(*t ? 0 : 1);
    };
  }
  if (op == "Sign") {
    return [](const SymExpr& a) -> std::optional<SymExpr> {
      if (a == SymExpr(0)) return SymExpr(0);
      if (provablyPositive(a)) return SymExpr(1);
      if (provablyPositive(-a)) return SymExpr(-1);
      return std::nullopt;
    };
  }
  return nullptr;
}

MaybeValues mapValues(RuleContext& c, size_t input, const UnaryFn& fn) {
  const auto* v = c.value(input);
  if (!v || !fn) return std::nullopt;
  Values out;
  for (const auto& e : *v) {
    auto r = fn(e);
    if (!r) return std::nullopt;
    out.push_back(*r);
  }
  return out;
}

void unaryRule(RuleContext& c) {
  const std::string& op = c.node().op_type();
  const auto& in = c.input(0);
  c.setOutput(0, outDType(c, op), in.dims, mapValues(c, 0, unaryFn(c, op)));
  if (op == "Dropout") c.setOutput(1, DType::Bool, in.dims);
}

void castRule(RuleContext& c) {
  auto to = c.attrInt("to");
  if (!to) c.fail("attribute 'to' is missing");
  DType target = dtypeFromOnnx(static_cast<int32_t>(*to));
  UnaryFn fn;
  if (target == DType::Bool) {
    fn = [](const SymExpr& a) -> std::optional<SymExpr> {
      auto t = truthOf(a);
      if (!t) return std::nullopt;
      return SymExpr(*t);
    };
  } else if (isInteger(target) || isFloating(target)) {
    fn = [](const SymExpr& a) { return a; };  // values are integers, exact in both
  }
  c.setOutput(0, target, c.input(0).dims, mapValues(c, 0, fn));
  if (isInteger(target)) c.setIotaAxis(0, c.input(0).iotaAxis);
}

void castLikeRule(RuleContext& c) {
  c.setOutput(0, c.input(1).dtype, c.input(0).dims, c.value(0) ? MaybeValues(*c.value(0)) : std::nullopt);
}

void whereRule(RuleContext& c) {
  auto dims = c.broadcast({c.input(0).dims, c.input(1).dims, c.input(2).dims});
  auto value = broadcastValues(c, {0, 1, 2}, dims, [](const std::vector<SymExpr>& a) -> std::optional<SymExpr> {
    auto t = truthOf(a[0]);
    if (!t) return std::nullopt;
    return *t ? a[1] : a[2];
  });
  c.setOutput(0, c.input(1).dtype, dims, value);
}

// ---- shape-producing ops ----------------------------------------------------------------

void shapeRule(RuleContext& c) {
  const auto& dims = c.input(0).dims;
  const int64_t r = static_cast<int64_t>(dims.size());
  int64_t start = c.attrInt("start", 0), end = c.attrInt("end", r);
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  Values v;
  for (int64_t i = start; i < end; ++i) v.push_back(dims[static_cast<size_t>(i)]);
  c.setOutput(0, DType::Int64, {SymExpr(static_cast<int64_t>(v.size()))}, v);
}

void sizeRule(RuleContext& c) { c.setOutput(0, DType::Int64, {}, Values{product(c.input(0).dims)}); }

// ---- reshaping ops ----------------------------------------------------------------------

MaybeValues passValue(RuleContext& c, size_t i) {
  const auto* v = c.value(i);
  return v ? MaybeValues(*v) : std::nullopt;
}

// A -1 the symbols do not divide, as in mask.view(batch, -1) on a mask [s43, s53]
// declared apart from input_ids [s72, s70]: if equating a free input dimension with
// the target entry at the same position makes the division exact, assume that
// (recorded and reported as an assumption, never silently).
std::optional<SymExpr> divideByKeepingAxes(RuleContext& c, const std::vector<SymExpr>& in,
                                           const std::vector<SymExpr>& out, const std::vector<SymExpr>& target,
                                           int inferAt, const SymExpr& total, const SymExpr& known) {
  for (size_t j = 0; j < std::min(in.size(), out.size()); ++j) {
    if (static_cast<int>(j) == inferAt || !c.isFreeSymbol(in[j]) || out[j].isConst()) continue;
    SymExpr d = c.resolve(in[j]), t = c.resolve(out[j]);
    if (d == t || t.symbols().count(d.symbolName())) continue;
    if (!exactDiv(total.substitute({{d.symbolName(), t}}), known.substitute({{d.symbolName(), t}}))) continue;
    c.assume(d, t, "reshape " + str(in) + " to " + str(target) + " keeps axis " + std::to_string(j));
    return exactDiv(c.resolve(total), c.resolve(known));
  }
  return std::nullopt;
}

void reshapeRule(RuleContext& c) {
  const auto& in = c.input(0).dims;
  std::vector<int64_t> attrShape;
  Values target;
  if (c.opset() < 5) {
    auto s = c.attrInts("shape");
    if (!s) c.fail("attribute 'shape' is missing");
    for (auto x : *s) target.push_back(x);
  } else {
    target = c.requireValue(1, "target shape");
  }
  const bool allowZero = c.attrInt("allowzero", 0) != 0;
  std::vector<SymExpr> out;
  int inferAt = -1;
  for (size_t i = 0; i < target.size(); ++i) {
    const SymExpr& t = target[i];
    auto k = t.constValue();
    if (k && *k == -1) {
      if (inferAt >= 0) c.fail("target shape " + str(target) + " has two -1");
      inferAt = static_cast<int>(i);
      out.push_back(SymExpr(1));
    } else if (k && *k == 0 && !allowZero) {
      if (i >= in.size()) c.fail("target shape " + str(target) + " copies dimension " + std::to_string(i) +
                                 " (0) but the input has rank " + std::to_string(in.size()));
      out.push_back(in[i]);
    } else if (k && *k < 0) {
      c.fail("target shape " + str(target) + " has a negative dimension");
    } else {
      out.push_back(t);
    }
  }
  const SymExpr total = c.resolve(product(in));
  if (inferAt >= 0) {
    SymExpr known = c.resolve(product(out));
    if (known == SymExpr(0)) c.fail("target shape " + str(target) + " has a 0 beside -1");
    auto q = exactDiv(total, known);
    if (!q) q = divideByKeepingAxes(c, in, out, target, inferAt, total, known);
    if (!q) {
      if (total.isConst() && known.isConst())
        c.fail("target shape " + str(target) + " does not divide the input's " + total.str() + " elements");
      c.fail("cannot prove that target shape " + str(target) + " divides the input " + str(in));
    }
    out[static_cast<size_t>(inferAt)] = *q;
  } else {
    SymExpr want = c.resolve(product(out));
    if (want != total) {
      if ((want - total).isConst())
        c.fail("target shape " + str(target) + " has " + want.str() + " elements, the input " + str(in) + " has " +
               total.str());
      c.unify(want, total);
    }
  }
  c.setOutput(0, c.input(0).dtype, out, passValue(c, 0));
}

void flattenRule(RuleContext& c) {
  const auto& in = c.input(0).dims;
  const int64_t r = static_cast<int64_t>(in.size());
  int64_t a = c.attrInt("axis", 1);
  if (a < -r || a > r) c.fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(r));
  if (a < 0) a += r;
  std::vector<SymExpr> head(in.begin(), in.begin() + a), tail(in.begin() + a, in.end());
  c.setOutput(0, c.input(0).dtype, {product(head), product(tail)}, passValue(c, 0));
}

std::vector<int64_t> axesArg(RuleContext& c, int sinceOpset, size_t inputIndex, bool* present) {
  *present = true;
  if (c.opset() >= sinceOpset) {
    if (c.hasInput(inputIndex)) return c.requireConstInts(inputIndex, "axes");
  } else if (auto a = c.attrInts("axes")) {
    return *a;
  }
  *present = false;
  return {};
}

void squeezeRule(RuleContext& c) {
  const auto& in = c.input(0).dims;
  bool given;
  auto axes = axesArg(c, 13, 1, &given);
  std::vector<bool> drop(in.size(), false);
  if (!given) {
    for (size_t i = 0; i < in.size(); ++i) {
      if (!in[i].isConst()) c.fail("cannot tell whether dimension " + in[i].str() + " is 1 (give axes)");
      drop[i] = in[i] == SymExpr(1);
    }
  }
  for (auto a : axes) {
    size_t k = c.axis(a, in.size());
    if (in[k].isConst() && in[k] != SymExpr(1))
      c.fail("cannot squeeze axis " + std::to_string(a) + " of size " + in[k].str());
    if (!in[k].isConst()) c.unify(in[k], SymExpr(1));
    drop[k] = true;
  }
  std::vector<SymExpr> out;
  for (size_t i = 0; i < in.size(); ++i)
    if (!drop[i]) out.push_back(in[i]);
  c.setOutput(0, c.input(0).dtype, out, passValue(c, 0));
}

void unsqueezeRule(RuleContext& c) {
  const auto& in = c.input(0).dims;
  bool given;
  auto axes = axesArg(c, 13, 1, &given);
  if (!given) c.fail("axes are missing");
  const size_t r = in.size() + axes.size();
  std::vector<bool> isNew(r, false);
  for (auto a : axes) {
    size_t k = c.axis(a, r);
    if (isNew[k]) c.fail("axis " + std::to_string(a) + " is repeated");
    isNew[k] = true;
  }
  std::vector<SymExpr> out;
  std::vector<int> newIndex(in.size());
  size_t j = 0;
  for (size_t i = 0; i < r; ++i) {
    if (!isNew[i]) newIndex[j] = static_cast<int>(i);
    out.push_back(isNew[i] ? SymExpr(1) : in[j++]);
  }
  c.setOutput(0, c.input(0).dtype, out, passValue(c, 0));
  if (int a = c.input(0).iotaAxis; a >= 0) c.setIotaAxis(0, newIndex[static_cast<size_t>(a)]);
}

// Reorders known values: out element k reads in element source[k].
MaybeValues gatherValues(RuleContext& c, size_t input, const std::vector<int64_t>& source) {
  const auto* v = c.value(input);
  if (!v) return std::nullopt;
  Values out;
  out.reserve(source.size());
  for (auto s : source) out.push_back((*v)[static_cast<size_t>(s)]);
  return out;
}

void transposeRule(RuleContext& c) {
  const auto& in = c.input(0).dims;
  std::vector<int64_t> perm;
  if (auto p = c.attrInts("perm")) {
    perm = *p;
  } else {
    for (size_t i = in.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  if (perm.size() != in.size()) c.fail("perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(in.size()));
  std::vector<bool> seen(in.size(), false);
  std::vector<SymExpr> out;
  for (auto p : perm) {
    size_t k = c.axis(p, in.size());
    if (seen[k]) c.fail("perm repeats axis " + std::to_string(p));
    seen[k] = true;
    out.push_back(in[k]);
  }
  MaybeValues value;
  auto cd = constDims(in);
  if (c.value(0) && cd) {
    auto inStrides = contiguousStrides(*cd);
    std::vector<int64_t> outDims;
    for (auto p : perm) outDims.push_back((*cd)[c.axis(p, in.size())]);
    auto outStrides = contiguousStrides(outDims);
    std::vector<int64_t> src;
    for (int64_t k = 0; k < elementCount(outDims); ++k) {
      int64_t rem = k, idx = 0;
      for (size_t d = 0; d < outDims.size(); ++d) {
        idx += (rem / outStrides[d]) * inStrides[c.axis(perm[d], in.size())];
        rem %= outStrides[d];
      }
      src.push_back(idx);
    }
    value = gatherValues(c, 0, src);
  }
  c.setOutput(0, c.input(0).dtype, out, value);
}

void concatRule(RuleContext& c) {
  auto a = c.attrInt("axis");
  if (!a) c.fail("attribute 'axis' is missing");
  std::vector<size_t> ins;
  for (size_t i = 0; i < c.numInputs(); ++i)
    if (c.hasInput(i)) ins.push_back(i);
  if (ins.empty()) c.fail("needs at least one input");
  std::vector<SymExpr> out = c.input(ins[0]).dims;
  const size_t k = c.axis(*a, out.size());
  out[k] = SymExpr(0);
  for (size_t i : ins) {
    const auto& d = c.input(i).dims;
    if (d.size() != out.size())
      c.fail("input '" + c.node().input(static_cast<int>(i)) + "' has rank " + std::to_string(d.size()) +
             ", expected " + std::to_string(out.size()));
    for (size_t j = 0; j < d.size(); ++j) {
      if (j == k) {
        out[j] = out[j] + d[j];
      } else if (c.resolve(out[j]) != c.resolve(d[j])) {
        if (out[j].isConst() && d[j].isConst())
          c.fail("inputs differ in dimension " + std::to_string(j) + ": " + out[j].str() + " vs " + d[j].str());
        out[j] = c.unify(out[j], d[j]);
      }
    }
  }
  MaybeValues value;
  bool allKnown = true;
  for (size_t i : ins) allKnown = allKnown && c.value(i) && constDims(c.input(i).dims);
  if (allKnown) {
    int64_t outer = 1;
    for (size_t j = 0; j < k; ++j) outer *= *c.input(ins[0]).dims[j].constValue();
    Values v;
    for (int64_t o = 0; o < outer; ++o) {
      for (size_t i : ins) {
        auto d = *constDims(c.input(i).dims);
        int64_t chunk = 1;
        for (size_t j = k; j < d.size(); ++j) chunk *= d[j];
        const auto& src = *c.value(i);
        v.insert(v.end(), src.begin() + o * chunk, src.begin() + (o + 1) * chunk);
      }
    }
    value = std::move(v);
  }
  c.setOutput(0, c.input(ins[0]).dtype, out, value);
  // Coordinates stacked on a last axis of width 1 form an index tuple.
  if (k + 1 == out.size()) {
    std::vector<int> axes;
    for (size_t i : ins) {
      const auto& t = c.input(i);
      if (t.iotaAxis < 0 || t.iotaAxis == static_cast<int>(k) || t.dims[k] != SymExpr(1)) return;
      axes.push_back(t.iotaAxis);
    }
    c.setIndexAxes(0, axes);
  }
}

void splitRule(RuleContext& c) {
  const auto& in = c.input(0).dims;
  const size_t k = c.axis(c.attrInt("axis", 0), in.size());
  const SymExpr dim = in[k];
  const size_t n = c.numOutputs();
  std::vector<SymExpr> sizes;
  if (c.opset() >= 13 && c.hasInput(1)) {
    for (const auto& e : c.requireValue(1, "split sizes")) sizes.push_back(e);
  } else if (auto s = c.attrInts("split"); s && c.opset() < 13) {
    for (auto x : *s) sizes.push_back(x);
  } else {
    auto parts = c.attrInt("num_outputs");
    const int64_t m = parts ? *parts : static_cast<int64_t>(n);
    if (m <= 0) c.fail("num_outputs must be positive");
    if (static_cast<size_t>(m) != n) c.fail("num_outputs is " + std::to_string(m) + " but the node has " + std::to_string(n) + " outputs");
    SymExpr chunk = ceilDiv(dim, SymExpr(m));
    if (!parts && !exactDiv(dim, SymExpr(m))) {
      if (dim.isConst()) c.fail("cannot split dimension " + dim.str() + " into " + std::to_string(m) + " equal parts");
      c.fail("cannot prove that dimension " + dim.str() + " splits into " + std::to_string(m) + " equal parts");
    }
    for (int64_t i = 0; i + 1 < m; ++i) sizes.push_back(chunk);
    sizes.push_back(dim - chunk * SymExpr(m - 1));
  }
  if (sizes.size() != n)
    c.fail("split gives " + std::to_string(sizes.size()) + " sizes for " + std::to_string(n) + " outputs");
  SymExpr total(0);
  for (const auto& s : sizes) total = total + s;
  if (c.resolve(total) != c.resolve(dim)) {
    if ((total - dim).isConst()) c.fail("split sizes " + str(sizes) + " do not add up to dimension " + dim.str());
    c.unify(total, dim);
  }
  const auto* v = c.value(0);
  int64_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    std::vector<SymExpr> out = in;
    out[k] = sizes[i];
    MaybeValues value;
    auto sz = sizes[i].constValue();
    if (v && in.size() == 1 && sz) {
      value = Values(v->begin() + offset, v->begin() + offset + *sz);
      offset += *sz;
    }
    c.setOutput(i, c.input(0).dtype, out, value);
  }
}

// The constant term of an expression (0 when it has none).
int64_t constantTerm(const SymExpr& e) {
  for (const auto& t : e.terms())
    if (t.factors.empty()) return t.coef;
  return 0;
}

// Normalizes one slice bound per the ONNX rules (negative counts from the end, clamped).
SymExpr sliceBound(RuleContext& c, const SymExpr& x, const SymExpr& dim, bool isEnd, int64_t step) {
  SymExpr v = x;
  if (auto k = x.constValue()) {
    if (*k >= kEndOfAxis) return step > 0 ? dim : (isEnd ? dim - SymExpr(1) : dim - SymExpr(1));
    if (*k <= -kEndOfAxis) return step > 0 ? SymExpr(0) : (isEnd ? SymExpr(-1) : SymExpr(0));
    if (*k < 0) v = dim + x;
  } else if (provablyNonNegative(x)) {
    v = x;
  } else if (provablyPositive(-x)) {
    v = dim + x;
  } else if (const int64_t k = constantTerm(x); k > 0 && provablyPositive(SymExpr(k) - x)) {
    // k - e for a length e: a table of k rows read from row k - e on (MPT's ALiBi bias of
    // max_seq_len rows), which the model defines only where e <= k, recorded as a bound
    // as CLIP's 77 positions are (a run past it is refused, naming it).
    const SymExpr e = SymExpr(k) - x;
    c.unify(min(SymExpr(k), e), e);
    v = x;
  } else {
    c.fail("cannot tell the sign of slice bound " + x.str());
  }
  if (step > 0) return min(max(v, SymExpr(0)), dim);
  return isEnd ? min(max(v, SymExpr(-1)), dim - SymExpr(1)) : min(max(v, SymExpr(0)), dim - SymExpr(1));
}

void sliceRule(RuleContext& c) {
  const auto& in = c.input(0).dims;
  Values starts, ends;
  std::vector<int64_t> axes, steps;
  if (c.opset() < 10) {
    for (auto x : c.attrInts("starts").value_or(std::vector<int64_t>{})) starts.push_back(x);
    for (auto x : c.attrInts("ends").value_or(std::vector<int64_t>{})) ends.push_back(x);
    if (auto a = c.attrInts("axes")) axes = *a;
  } else {
    starts = c.requireValue(1, "starts");
    ends = c.requireValue(2, "ends");
    if (c.hasInput(3)) axes = c.requireConstInts(3, "axes");
    if (c.hasInput(4)) steps = c.requireConstInts(4, "steps");
  }
  if (starts.size() != ends.size()) c.fail("starts and ends differ in length");
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  if (axes.size() != starts.size() || steps.size() != starts.size())
    c.fail("starts, ends, axes and steps differ in length");
  std::vector<SymExpr> out = in;
  std::vector<SymExpr> first(in.size(), SymExpr(0));
  std::vector<int64_t> stride(in.size(), 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t k = c.axis(axes[i], in.size());
    const int64_t step = steps[i];
    if (step == 0) c.fail("slice step is 0");
    SymExpr s = sliceBound(c, c.resolve(starts[i]), in[k], false, step);
    SymExpr e = sliceBound(c, c.resolve(ends[i]), in[k], true, step);
    SymExpr len = step > 0 ? ceilDiv(e - s, SymExpr(step)) : ceilDiv(s - e, SymExpr(-step));
    out[k] = max(len, SymExpr(0));
    first[k] = s;
    stride[k] = step;
  }
  MaybeValues value;
  auto inDims = constDims(in);
  auto outDims = constDims(out);
  auto firstC = constDims(first);
  if (c.value(0) && inDims && outDims && firstC) {
    auto inStrides = contiguousStrides(*inDims), outStrides = contiguousStrides(*outDims);
    std::vector<int64_t> src;
    for (int64_t k = 0; k < elementCount(*outDims); ++k) {
      int64_t rem = k, idx = 0;
      for (size_t d = 0; d < outDims->size(); ++d) {
        idx += ((*firstC)[d] + (rem / outStrides[d]) * stride[d]) * inStrides[d];
        rem %= outStrides[d];
      }
      src.push_back(idx);
    }
    value = gatherValues(c, 0, src);
  }
  c.setOutput(0, c.input(0).dtype, out, value);
}

void gatherRule(RuleContext& c) {
  const auto& data = c.input(0).dims;
  const auto& idx = c.input(1).dims;
  const size_t k = c.axis(c.attrInt("axis", 0), data.size());
  std::vector<SymExpr> out(data.begin(), data.begin() + static_cast<long>(k));
  out.insert(out.end(), idx.begin(), idx.end());
  out.insert(out.end(), data.begin() + static_cast<long>(k) + 1, data.end());
  MaybeValues value;
  auto dataDims = constDims(data);
  auto idxDims = constDims(idx);
  if (c.value(0) && c.value(1) && dataDims && idxDims) {
    std::vector<int64_t> indices;
    const int64_t n = (*dataDims)[k];
    for (const auto& e : *c.value(1)) {
      auto i = e.constValue();
      if (!i) break;
      if (*i < -n || *i >= n) c.fail("index " + std::to_string(*i) + " is out of range for dimension " + std::to_string(n));
      indices.push_back(*i < 0 ? *i + n : *i);
    }
    if (indices.size() == c.value(1)->size()) {
      int64_t outer = 1;
      for (size_t j = 0; j < k; ++j) outer *= (*dataDims)[j];
      const int64_t inner = elementsAfter(*dataDims, k);
      std::vector<int64_t> src;
      for (int64_t o = 0; o < outer; ++o)
        for (auto i : indices)
          for (int64_t in = 0; in < inner; ++in) src.push_back((o * n + i) * inner + in);
      value = gatherValues(c, 0, src);
    }
  }
  c.setOutput(0, c.input(0).dtype, out, value);
  if (int a = c.input(1).iotaAxis; a >= 0)
    c.readsWholeAxis(data[k], idx[static_cast<size_t>(a)],
                     "axis " + std::to_string(k) + " of '" + c.node().input(0) + "'");
}

void gatherElementsRule(RuleContext& c) {
  if (c.rank(0) != c.rank(1)) c.fail("data and indices differ in rank");
  c.axis(c.attrInt("axis", 0), c.rank(0));
  c.setOutput(0, c.input(0).dtype, c.input(1).dims);
}

void gatherNDRule(RuleContext& c) {
  const auto& data = c.input(0).dims;
  const auto& idx = c.input(1).dims;
  const int64_t b = c.attrInt("batch_dims", 0);
  if (idx.empty()) c.fail("indices must have rank >= 1");
  auto m = idx.back().constValue();
  if (!m) c.fail("the last dimension of indices must be constant, not " + idx.back().str());
  if (b < 0 || static_cast<size_t>(b + *m) > data.size()) c.fail("indices address more dimensions than data has");
  for (int64_t i = 0; i < b; ++i) c.unify(data[static_cast<size_t>(i)], idx[static_cast<size_t>(i)]);
  std::vector<SymExpr> out(idx.begin(), idx.end() - 1);
  out.insert(out.end(), data.begin() + b + *m, data.end());
  c.setOutput(0, c.input(0).dtype, out);
  const auto& tuple = c.input(1).indexAxes;
  if (b == 0 && static_cast<int64_t>(tuple.size()) == *m)
    for (size_t j = 0; j < tuple.size(); ++j)
      c.readsWholeAxis(data[j], idx[static_cast<size_t>(tuple[j])],
                       "axis " + std::to_string(j) + " of '" + c.node().input(0) + "'");
}

void scatterRule(RuleContext& c) { c.setOutput(0, c.input(0).dtype, c.input(0).dims); }

void expandRule(RuleContext& c) {
  const auto& target = c.requireValue(1, "target shape");
  auto dims = c.broadcast({c.input(0).dims, target});
  auto value = broadcastValues(c, {0}, dims, [](const std::vector<SymExpr>& a) { return a[0]; });
  c.setOutput(0, c.input(0).dtype, dims, value);
  if (int a = c.input(0).iotaAxis; a >= 0) c.setIotaAxis(0, a + static_cast<int>(dims.size() - c.rank(0)));
}

void tileRule(RuleContext& c) {
  const auto& in = c.input(0).dims;
  const auto& reps = c.requireValue(1, "repeats");
  if (reps.size() != in.size()) c.fail("repeats has " + std::to_string(reps.size()) + " entries for rank " + std::to_string(in.size()));
  std::vector<SymExpr> out;
  for (size_t i = 0; i < in.size(); ++i) out.push_back(in[i] * reps[i]);
  c.setOutput(0, c.input(0).dtype, out);
}

void padRule(RuleContext& c) {
  const auto& in = c.input(0).dims;
  Values pads;
  if (c.opset() < 11) {
    for (auto x : c.attrInts("pads").value_or(std::vector<int64_t>{})) pads.push_back(x);
  } else {
    pads = c.requireValue(1, "pads");
  }
  std::vector<int64_t> axes;
  if (c.opset() >= 18 && c.hasInput(3)) {
    axes = c.requireConstInts(3, "axes");
  } else {
    for (size_t i = 0; i < in.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  }
  if (pads.size() != 2 * axes.size()) c.fail("pads has " + std::to_string(pads.size()) + " entries for " + std::to_string(axes.size()) + " axes");
  std::vector<SymExpr> out = in;
  for (size_t i = 0; i < axes.size(); ++i) {
    size_t k = c.axis(axes[i], in.size());
    out[k] = out[k] + pads[i] + pads[i + axes.size()];
  }
  c.setOutput(0, c.input(0).dtype, out);
}

void rangeRule(RuleContext& c) {
  const SymExpr start = c.requireValue(0, "start").at(0);
  const SymExpr limit = c.requireValue(1, "limit").at(0);
  const SymExpr delta = c.requireValue(2, "delta").at(0);
  auto d = delta.constValue();
  if (!d) c.fail("delta must be constant, not " + delta.str());
  if (*d == 0) c.fail("delta is 0");
  SymExpr n = max(ceilDiv(limit - start, SymExpr(*d)), SymExpr(0));
  MaybeValues value;
  if (auto k = n.constValue(); k && *k <= kMaxValueElements) {
    Values v;
    for (int64_t i = 0; i < *k; ++i) v.push_back(start + SymExpr(i * *d));
    value = std::move(v);
  }
  c.setOutput(0, c.input(0).dtype, {n}, value);
  if (start == SymExpr(0) && *d == 1) c.setIotaAxis(0, 0);
}

// ---- linear algebra and reductions ------------------------------------------------------

void matmulRule(RuleContext& c) {
  auto a = c.input(0).dims, b = c.input(1).dims;
  if (a.empty() || b.empty()) c.fail("MatMul inputs must have rank >= 1");
  const bool aVec = a.size() == 1, bVec = b.size() == 1;
  if (aVec) a.insert(a.begin(), SymExpr(1));
  if (bVec) b.push_back(SymExpr(1));
  SymExpr ka = a.back(), kb = b[b.size() - 2];
  if (c.resolve(ka) != c.resolve(kb)) {
    if (ka.isConst() && kb.isConst()) c.fail("inner dimensions differ: " + str(c.input(0).dims) + " x " + str(c.input(1).dims));
    c.unify(ka, kb);
  }
  std::vector<SymExpr> batchA(a.begin(), a.end() - 2), batchB(b.begin(), b.end() - 2);
  auto out = c.broadcast({batchA, batchB});
  if (!aVec) out.push_back(a[a.size() - 2]);
  if (!bVec) out.push_back(b.back());
  const std::string& op = c.node().op_type();
  DType dt = op == "MatMulInteger" ? DType::Int32 : c.input(0).dtype;
  c.setOutput(0, dt, out);
}

void gemmRule(RuleContext& c) {
  auto a = c.input(0).dims, b = c.input(1).dims;
  if (a.size() != 2 || b.size() != 2) c.fail("Gemm inputs must be 2-D");
  if (c.attrInt("transA", 0)) std::swap(a[0], a[1]);
  if (c.attrInt("transB", 0)) std::swap(b[0], b[1]);
  if (c.resolve(a[1]) != c.resolve(b[0])) {
    if (a[1].isConst() && b[0].isConst()) c.fail("inner dimensions differ: " + a[1].str() + " vs " + b[0].str());
    c.unify(a[1], b[0]);
  }
  std::vector<SymExpr> out{a[0], b[1]};
  if (c.hasInput(2)) {
    auto bc = c.broadcast({out, c.input(2).dims});
    if (bc.size() != 2) c.fail("C does not broadcast to [M, N]");
  }
  c.setOutput(0, c.input(0).dtype, out);
}

void reduceRule(RuleContext& c) {
  const std::string& op = c.node().op_type();
  const auto& in = c.input(0).dims;
  const int since = op == "ReduceSum" ? 13 : 18;
  bool given;
  auto axes = axesArg(c, since, 1, &given);
  const bool keep = c.attrInt("keepdims", 1) != 0;
  const bool noop = c.attrInt("noop_with_empty_axes", 0) != 0;
  std::vector<bool> reduce(in.size(), axes.empty() && !noop);
  for (auto a : axes) reduce[c.axis(a, in.size())] = true;
  std::vector<SymExpr> out;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!reduce[i]) {
      out.push_back(in[i]);
    } else if (keep) {
      out.push_back(SymExpr(1));
    }
  }
  MaybeValues value;
  const auto* v = c.value(0);
  const bool all = std::all_of(reduce.begin(), reduce.end(), [](bool r) { return r; });
  if (v && all && !v->empty()) {
    SymExpr acc = (*v)[0];
    bool ok = true;
    for (size_t i = 1; i < v->size(); ++i) {
      if (op == "ReduceProd") acc = acc * (*v)[i];
      else if (op == "ReduceSum") acc = acc + (*v)[i];
      else if (op == "ReduceMax") acc = max(acc, (*v)[i]);
      else if (op == "ReduceMin") acc = min(acc, (*v)[i]);
      else ok = false;
    }
    if (ok && (op == "ReduceProd" || op == "ReduceSum" || op == "ReduceMax" || op == "ReduceMin")) value = Values{acc};
  }
  c.setOutput(0, c.input(0).dtype, out, value);
}

void argReduceRule(RuleContext& c) {
  const auto& in = c.input(0).dims;
  const size_t k = c.axis(c.attrInt("axis", 0), in.size());
  std::vector<SymExpr> out = in;
  if (c.attrInt("keepdims", 1)) {
    out[k] = SymExpr(1);
  } else {
    out.erase(out.begin() + static_cast<long>(k));
  }
  c.setOutput(0, DType::Int64, out);
}

void topKRule(RuleContext& c) {
  const auto& in = c.input(0).dims;
  const size_t k = c.axis(c.attrInt("axis", -1), in.size());
  std::vector<SymExpr> out = in;
  if (c.opset() >= 10) {
    out[k] = c.requireValue(1, "k").at(0);
  } else {
    out[k] = SymExpr(c.attrInt("k", 1));
  }
  c.setOutput(0, c.input(0).dtype, out);
  c.setOutput(1, DType::Int64, out);
}

// OneHot: the indices' dims with the depth (a value) inserted at the axis; the values' dtype.
// Its value where the indices and depth are constants and the values known: TorchScript's
// repeat_interleave makes Tile's repeats as a OneHot of shapes (a mixture of experts'
// tokens repeated per expert), which a run computes from nothing but those.
void oneHotRule(RuleContext& c) {
  std::vector<SymExpr> out = c.input(0).dims;
  const size_t k = c.axis(c.attrInt("axis", -1), out.size() + 1);
  const SymExpr depth = c.requireValue(1, "depth").at(0);
  out.insert(out.begin() + static_cast<std::ptrdiff_t>(k), depth);
  MaybeValues value;
  const auto* idx = c.value(0);
  const auto* onOff = c.value(2);
  const auto dims = constDims(out);
  if (idx && onOff && onOff->size() == 2 && depth.isConst() && dims &&
      std::all_of(idx->begin(), idx->end(), [](const SymExpr& e) { return e.isConst(); })) {
    const int64_t d = *depth.constValue();
    const int64_t inner = elementsAfter(*dims, k);
    value.emplace();
    for (int64_t o = 0; o < elementCount(*dims); ++o) {
      int64_t j = *(*idx)[static_cast<size_t>(o / (inner * d) * inner + o % inner)].constValue();
      if (j < 0) j += d;
      value->push_back((*onOff)[j == o / inner % d ? 1 : 0]);
    }
  }
  c.setOutput(0, c.input(2).dtype, out, value);
}

void layerNormRule(RuleContext& c) {
  const auto& in = c.input(0).dims;
  const size_t k = c.axis(c.attrInt("axis", -1), in.size());
  c.setOutput(0, c.input(0).dtype, in);
  std::vector<SymExpr> stat = in;
  for (size_t i = k; i < stat.size(); ++i) stat[i] = SymExpr(1);
  DType st = dtypeFromOnnx(static_cast<int32_t>(c.attrInt("stash_type", 1)));
  c.setOutput(1, st, stat);
  c.setOutput(2, st, stat);
}

// A (Q)MatMul's outputs: with `split`, output i gets split[i] of the N columns; with
// `glu`, the one output [..., N / 2]; else the one output [..., N]. Checks the optional
// inputs (graph/tl_ops.h): the bias [N], the residual like the output (unsplit), the
// norm scale [K].
void setMatMulOutputs(RuleContext& c, std::vector<SymExpr> out, int64_t n) {
  const auto& node = c.node();
  const auto slot = [&](MatMulInput which) { return static_cast<size_t>(matmulInput(node, which)); };
  if (c.hasInput(slot(MatMulInput::Bias))) {  // the bias epilogue: N values
    const auto& b = c.input(slot(MatMulInput::Bias)).dims;
    if (b.size() != 1) c.fail("a (Q)MatMul's bias must be 1-D [N]");
    c.unify(b[0], SymExpr(n));
  }
  if (c.hasInput(slot(MatMulInput::NormScale))) {
    const auto& s = c.input(slot(MatMulInput::NormScale)).dims;
    if (s.size() != 1) c.fail("a (Q)MatMul's norm scale must be 1-D [K]");
    c.unify(s[0], out.back());
  }
  const int glu = gluKind(node);
  if (glu && (n % 2 || c.attr("split"))) c.fail("a (Q)MatMul's glu needs an even N and no split");
  std::vector<int64_t> widths = c.attrInts("split").value_or(std::vector<int64_t>{glu ? n / 2 : n});
  int64_t sum = 0;
  for (auto w : widths) sum += w;
  if (widths.size() != c.numOutputs() || widths.size() > 3 || sum != (glu ? n / 2 : n))
    c.fail("split must give each of at most 3 outputs its width, summing to N = " + std::to_string(n));
  for (size_t i = 0; i < widths.size(); ++i) {
    out.back() = SymExpr(widths[i]);
    c.setOutput(i, c.input(0).dtype, out);
  }
  if (c.hasInput(slot(MatMulInput::Residual))) {
    const auto& r = c.input(slot(MatMulInput::Residual)).dims;
    if (widths.size() != 1 || r.size() != out.size()) c.fail("a (Q)MatMul's residual must be shaped like its one output");
    for (size_t i = 0; i < r.size(); ++i) c.unify(r[i], out[i]);
  }
}

// tl.QMatMul (docs/ops.md): A [..., K] times a quantized K x N weight.
void qmatmulRule(RuleContext& c) {
  auto k = c.attrInt("K"), n = c.attrInt("N");
  if (!k || !n) c.fail("tl.QMatMul needs attributes K and N");
  auto out = c.input(0).dims;
  if (out.empty()) c.fail("tl.QMatMul input must have rank >= 1");
  if (c.resolve(out.back()) != SymExpr(*k)) {
    if (out.back().isConst()) c.fail("inner dimension " + out.back().str() + " is not K = " + std::to_string(*k));
    c.unify(out.back(), SymExpr(*k));
  }
  setMatMulOutputs(c, out, *n);
}

// tl.MatMul (docs/ops.md, written by tl-fuse): A [..., K] times W [K, N] (stored [N, K] with
// transB), the columns split among the outputs.
void tlMatmulRule(RuleContext& c) {
  auto out = c.input(0).dims;
  auto w = c.input(1).dims;
  if (c.attrInt("transB", 0) && w.size() == 2) std::swap(w[0], w[1]);  // W stored [N, K]
  if (out.empty() || w.size() != 2 || !w[1].isConst()) c.fail("tl.MatMul needs A of rank >= 1 and W [K, N], N constant");
  c.unify(out.back(), w[0]);
  setMatMulOutputs(c, out, *w[1].constValue());
}

// tl.RMSNorm (docs/ops.md, written by tl-fuse): x [..., H] and scale [H] [and a residual
// like x, added first] -> [..., H] [and the sum].
void rmsNormRule(RuleContext& c) {
  const auto& x = c.input(0).dims;
  const auto& scale = c.input(1).dims;
  if (x.empty()) c.fail("tl.RMSNorm input must have rank >= 1");
  if (scale.size() != 1) c.fail("tl.RMSNorm scale must have rank 1, not " + std::to_string(scale.size()));
  c.unify(x.back(), scale[0]);
  if (c.hasInput(2)) {  // the residual added to x first
    const auto& r = c.input(2).dims;
    if (r.size() != x.size()) c.fail("tl.RMSNorm's residual must have x's shape");
    for (size_t i = 0; i < x.size(); ++i) c.unify(x[i], r[i]);
  }
  c.setOutput(0, c.input(0).dtype, x);
  if (c.hasOutput(1)) c.setOutput(1, c.input(0).dtype, x);  // x + residual
}

// tl.RoPE (docs/ops.md, written by tl-fuse): x and cos, sin broadcast to it -> x's shape
// (and a second x, rotated alike, -> its shape). x, x2 and x3 with x_bshd, x2_bshd and
// x3_bshd are read as their Transpose(0,2,1,3): the outputs are [B, H, S, D].
void ropeRule(RuleContext& c) {
  auto logical = [&](int i, const char* flag) {
    std::vector<SymExpr> d = c.input(i).dims;
    if (c.attrInt(flag, 0)) {
      if (d.size() != 4) c.fail(std::string("tl.RoPE's ") + flag + " input must be of rank 4");
      std::swap(d[1], d[2]);
    }
    return d;
  };
  const auto x = logical(0, "x_bshd");
  if (x.empty() || !x.back().isConst() || *x.back().constValue() % 2)
    c.fail("tl.RoPE needs x whose last dimension is a constant even number");
  const int64_t rot = c.attrInt("rotary_dim", *x.back().constValue());
  if (rot <= 0 || rot % 2 || rot > *x.back().constValue()) c.fail("tl.RoPE's rotary_dim must be even and at most x's last dimension");
  for (int i : {1, 2})
    if (c.input(i).dims.size() > x.size()) c.fail("tl.RoPE's cos and sin must broadcast to x");
  c.setOutput(0, c.input(0).dtype, x);
  if (!c.hasInput(3)) return;
  const auto x2 = logical(3, "x2_bshd");  // a second tensor rotated alike (k beside q)
  if (x2.size() != x.size()) c.fail("tl.RoPE's second input must have x's rank");
  c.unify(x2.back(), x.back());
  if (!c.attr("cache_axis")) return c.setOutput(1, c.input(3).dtype, x2);
  // With cache_axis: outputs 1 and 2 are Concat(past2, rope(x2)) and Concat(past3, x3) on it.
  if (c.numInputs() != 7 || c.numOutputs() != 3) c.fail("tl.RoPE with cache_axis takes 7 inputs and gives 3 outputs");
  const size_t k = c.axis(c.attrInt("cache_axis", 0), x2.size());
  if (k + 1 >= x2.size()) c.fail("tl.RoPE's cache_axis must come before the last axis");
  for (auto [past, fresh, out] : {std::array<size_t, 3>{4, 3, 1}, std::array<size_t, 3>{5, 6, 2}}) {
    const auto& a = c.input(past).dims;
    const auto b = logical(static_cast<int>(fresh), fresh == 3 ? "x2_bshd" : "x3_bshd");
    if (a.size() != x2.size() || b.size() != x2.size()) c.fail("tl.RoPE's caches and new entries must have x2's rank");
    std::vector<SymExpr> cat = a;
    for (size_t i = 0; i < a.size(); ++i)
      if (i != k) cat[i] = c.unify(a[i], b[i]);
    cat[k] = a[k] + b[k];
    c.setOutput(out, c.input(past).dtype, cat);
  }
}

// tl.SwiGLU and tl.GeGLU (docs/ops.md, written by tl-fuse): g and u of one shape -> that shape.
void swigluRule(RuleContext& c) {
  const auto& g = c.input(0).dims;
  const auto& u = c.input(1).dims;
  if (g.size() != u.size()) c.fail("tl." + c.node().op_type() + " needs g and u of one shape");
  for (size_t i = 0; i < g.size(); ++i) c.unify(g[i], u[i]);
  c.setOutput(0, c.input(0).dtype, g);
}

// tl.Attention (docs/ops.md, written by tl-fuse): q [B,H,S,D], k [B,Hkv,T,D], v [B,Hkv,T,Dv]
// (q_bshd, k_bthd, v_bthd: axes 1 and 2 swapped), mask broadcast to [B,H,S,T], key_mask [B,T] ->
// [B,H,S,Dv] ([B,S,H,Dv] with out_bshd).
void attentionRule(RuleContext& c) {
  auto dims = [&](size_t i, const char* swapped) {
    auto d = c.input(i).dims;
    if (d.size() != 4) c.fail("tl.Attention needs q, k and v of rank 4");
    if (c.attrInt(swapped, 0)) std::swap(d[1], d[2]);
    return d;
  };
  const auto q = dims(0, "q_bshd"), k = dims(1, "k_bthd"), v = dims(2, "v_bthd");
  c.unify(q[0], k[0]);
  c.unify(q[0], v[0]);
  c.unify(k[1], v[1]);
  c.unify(k[2], v[2]);
  c.unify(q[3], k[3]);
  const auto H = c.resolve(q[1]).constValue(), Hkv = c.resolve(k[1]).constValue();
  if (!H || !Hkv || *Hkv == 0 || *H % *Hkv) c.fail("tl.Attention needs constant head counts, q's a multiple of k's");
  if (c.hasInput(3)) {
    const auto& m = c.input(3).dims;
    const std::vector<SymExpr> scores = {q[0], q[1], q[2], k[2]};
    if (m.size() > 4) c.fail("tl.Attention's mask must broadcast to [B, H, S, T]");
    for (size_t i = 0; i < m.size(); ++i) {
      const SymExpr& s = scores[4 - m.size() + i];
      if (c.resolve(m[i]) != SymExpr(1)) c.unify(m[i], s);
    }
  }
  if (c.hasInput(4)) {  // key_mask [B or 1, T]
    const auto& m = c.input(4).dims;
    if (m.size() != 2) c.fail("tl.Attention's key_mask must be [B, T]");
    if (c.resolve(m[0]) != SymExpr(1)) c.unify(m[0], q[0]);
    c.unify(m[1], k[2]);
  }
  if (c.attrInt("out_bshd", 0)) {
    c.setOutput(0, c.input(0).dtype, {q[0], q[2], q[1], v[3]});
  } else {
    c.setOutput(0, c.input(0).dtype, {q[0], q[1], q[2], v[3]});
  }
}

// Conv (N-d, 1 to 3 spatial dims): X [N, C, D...] and W [M, C/group, K...] -> [N, M, O...],
// O = floor((D + pads - dilation (K - 1) - 1) / stride) + 1; SAME padding gives ceil(D / stride).
void convRule(RuleContext& c) {
  const auto& x = c.input(0).dims;
  const auto& w = c.input(1).dims;
  const size_t k = x.size() < 3 ? 0 : x.size() - 2;
  if (k < 1 || k > 3 || w.size() != x.size()) c.fail("Conv needs X [N, C, D...] and W [M, C/group, K...] with 1 to 3 spatial dims");
  const int64_t group = c.attrInt("group", 1);
  auto kernel = constDims(std::vector<SymExpr>(w.begin() + 2, w.end()));
  if (!kernel) c.fail("Conv needs a weight of constant spatial shape");
  c.unify(x[1], w[1] * SymExpr(group));
  auto ints = [&](const char* name, int64_t fill, size_t n) {
    auto v = c.attrInts(name).value_or(std::vector<int64_t>(n, fill));
    if (v.size() != n) c.fail(std::string("Conv's ") + name + " must have " + std::to_string(n) + " values");
    return v;
  };
  const auto strides = ints("strides", 1, k), dilations = ints("dilations", 1, k), pads = ints("pads", 0, 2 * k);
  const auto* ap = c.attr("auto_pad");
  const std::string autoPad = ap ? ap->s() : "NOTSET";
  std::vector<SymExpr> out = {x[0], w[0]};
  for (size_t i = 0; i < k; ++i) {
    const SymExpr d = x[2 + i];
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      out.push_back(ceilDiv(d, SymExpr(strides[i])));
    } else if (autoPad == "NOTSET" || autoPad == "VALID") {
      const int64_t p = autoPad == "VALID" ? 0 : pads[i] + pads[k + i];
      out.push_back(floorDiv(d + SymExpr(p - dilations[i] * ((*kernel)[i] - 1) - 1), SymExpr(strides[i])) + SymExpr(1));
    } else {
      c.fail("Conv's auto_pad '" + autoPad + "' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER");
    }
  }
  if (c.hasInput(2) && c.input(2).dims.size() == 1) c.unify(c.input(2).dims[0], w[0]);
  c.setOutput(0, c.input(0).dtype, out);
}

// tl.Concat (docs/ops.md, written by tl-fuse) and tl.KvAppend (written by tl-plan):
// (a0, a1[, b0, b1]) -> (Concat(a0, a1)[, Concat(b0, b1)]) along `axis`, each as ONNX Concat.
void concatPairRule(RuleContext& c) {
  const std::string op = "tl." + c.node().op_type();
  const size_t pairs = c.numOutputs();
  if (c.numInputs() != 2 * pairs || pairs < (op == "tl.Concat" ? 2u : 1u) || pairs > 2)
    c.fail(op + (op == "tl.Concat" ? " takes two pairs of inputs and gives two outputs" : " takes one or two pairs of inputs, an output each"));
  const auto axis = c.attrInt("axis");
  if (!axis) c.fail("attribute 'axis' is missing");  // as ONNX Concat: no default
  for (size_t j = 0; j < pairs; ++j) {
    const auto &a = c.input(2 * j).dims, &b = c.input(2 * j + 1).dims;
    if (a.size() != b.size() || a.empty()) c.fail(op + "'s pair " + std::to_string(j) + " differs in rank");
    const size_t k = c.axis(*axis, a.size());
    std::vector<SymExpr> out = a;
    for (size_t i = 0; i < a.size(); ++i)
      if (i != k) out[i] = c.unify(a[i], b[i]);
    out[k] = a[k] + b[k];
    c.setOutput(j, c.input(2 * j).dtype, out);
  }
}

// tl.Elementwise (docs/ops.md, written by tl-fuse): float inputs broadcast to the output.
void elementwiseRule(RuleContext& c) {
  std::vector<std::vector<SymExpr>> shapes;
  for (size_t i = 0; i < c.numInputs(); ++i) shapes.push_back(c.input(i).dims);
  if (shapes.empty()) c.fail("tl.Elementwise needs inputs");
  c.setOutput(0, DType::Float, c.broadcast(shapes));
}

void sameAsInputRule(RuleContext& c) {
  // Normalizations and ops whose only output mirrors input 0 (Softmax, CumSum, Trilu, Clip, ...).
  c.setOutput(0, c.input(0).dtype, c.input(0).dims);
}

// Constant and ConstantOfShape read tensors from attributes; values are taken only
// from inline data (a tensor big enough to be stored externally is no shape tensor).

std::optional<Tensor> inlineTensor(const onnx::TensorProto& t) {
  if (t.data_location() == onnx::TensorProto::EXTERNAL) return std::nullopt;
  return readTensor(t, {});
}

MaybeValues tensorValues(const Tensor& t) {
  if (t.numel() > kMaxValueElements) return std::nullopt;
  if (isInteger(t.dtype) || t.dtype == DType::Bool) {
    Values v;
    for (auto x : t.toInt64()) v.push_back(x);
    return v;
  }
  if (isFloating(t.dtype)) {
    Values v;
    for (double x : t.toDouble()) {
      if (!(std::fabs(x) < 9.0e15) || std::floor(x) != x) return std::nullopt;  // integers only
      v.push_back(static_cast<int64_t>(x));
    }
    return v;
  }
  return std::nullopt;
}

void constantRuleImpl(RuleContext& c) {
  const auto& attrs = c.node().attribute();
  if (attrs.size() != 1) c.fail("Constant needs exactly one value attribute");
  const auto& a = attrs[0];
  const std::string& n = a.name();
  if (n == "value") {
    std::vector<SymExpr> dims;
    for (auto d : a.t().dims()) dims.push_back(d);
    auto t = inlineTensor(a.t());
    c.setOutput(0, dtypeFromOnnx(a.t().data_type()), dims, t ? tensorValues(*t) : std::nullopt);
  } else if (n == "value_int") {
    c.setOutput(0, DType::Int64, {}, Values{a.i()});
  } else if (n == "value_ints") {
    Values v(a.ints().begin(), a.ints().end());
    c.setOutput(0, DType::Int64, {SymExpr(a.ints_size())}, v);
  } else if (n == "value_float") {
    Tensor t{"", DType::Double, {}, {}};
    double x = a.f();
    t.bytes.resize(8);
    std::memcpy(t.bytes.data(), &x, 8);
    c.setOutput(0, DType::Float, {}, tensorValues(t));
  } else if (n == "value_floats") {
    c.setOutput(0, DType::Float, {SymExpr(a.floats_size())});
  } else {
    c.fail("Constant attribute '" + n + "' is not supported");
  }
}

void constantOfShapeRuleImpl(RuleContext& c) {
  const auto& shape = c.requireValue(0, "shape");
  DType dt = DType::Float;
  MaybeValues fill = Values{SymExpr(0)};
  if (const auto* a = c.attr("value")) {
    dt = dtypeFromOnnx(a->t().data_type());
    auto t = inlineTensor(a->t());
    fill = t ? tensorValues(*t) : std::nullopt;
    if (fill && fill->size() != 1) c.fail("value must hold one element");
  }
  MaybeValues value;
  auto dims = constDims(shape);
  if (fill && dims && elementCount(*dims) <= kMaxValueElements) value = Values(static_cast<size_t>(elementCount(*dims)), (*fill)[0]);
  c.setOutput(0, dt, shape, value);
}

// The rules by the names the op table (ops/op_table.cpp) uses.
const std::map<std::string, ShapeRule>& registry() {
  static const std::map<std::string, ShapeRule> rules = {
      {"broadcast", broadcastingRule},
      {"unary", unaryRule},
      {"same-as-input", sameAsInputRule},
      {"reduce", reduceRule},
      {"cast", castRule},
      {"cast-like", castLikeRule},
      {"where", whereRule},
      {"shape", shapeRule},
      {"size", sizeRule},
      {"constant", constantRuleImpl},
      {"constant-of-shape", constantOfShapeRuleImpl},
      {"reshape", reshapeRule},
      {"flatten", flattenRule},
      {"squeeze", squeezeRule},
      {"unsqueeze", unsqueezeRule},
      {"transpose", transposeRule},
      {"concat", concatRule},
      {"split", splitRule},
      {"slice", sliceRule},
      {"gather", gatherRule},
      {"gather-elements", gatherElementsRule},
      {"gather-nd", gatherNDRule},
      {"scatter", scatterRule},
      {"expand", expandRule},
      {"tile", tileRule},
      {"pad", padRule},
      {"range", rangeRule},
      {"matmul", matmulRule},
      {"gemm", gemmRule},
      {"conv", convRule},
      {"arg-reduce", argReduceRule},
      {"topk", topKRule},
      {"one-hot", oneHotRule},
      {"layer-norm", layerNormRule},
      {"qmatmul", qmatmulRule},
      {"tl-matmul", tlMatmulRule},
      {"rms-norm", rmsNormRule},
      {"rope", ropeRule},
      {"glu", swigluRule},  // g and u of one shape: SwiGLU, GeGLU
      {"attention", attentionRule},
      {"concat-pair", concatPairRule},
      {"elementwise", elementwiseRule},
  };
  return rules;
}

}  // namespace

ShapeRule findShapeRule(const std::string& domain, const std::string& opType) {
  const OpInfo* op = findOp(domain, opType);
  return op ? shapeRuleNamed(op->shape) : nullptr;
}

ShapeRule shapeRuleNamed(const std::string& name) {
  const auto it = registry().find(name);
  return it == registry().end() ? nullptr : it->second;
}

std::vector<std::string> shapeRuleNames() {
  std::vector<std::string> out;
  for (const auto& [name, rule] : registry()) out.push_back(name);
  return out;
}

}  // namespace tl
