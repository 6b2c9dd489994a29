#include "fuse/index_algebra.h"

#include "graph/attributes.h"
#include "onnx/model_io.h"
#include "tensor/tensor.h"

namespace tl {
namespace {

Affine constant(const SymExpr& c) {
  Affine a;
  a.constant = c;
  return a;
}

Affine variable(int v) {
  Affine a;
  a.coef[v] = SymExpr(1);
  return a;
}

Affine plus(const Affine& x, const Affine& y, int64_t sign = 1) {
  Affine r = x;
  r.constant = r.constant + SymExpr(sign) * y.constant;
  for (const auto& [v, c] : y.coef) {
    SymExpr sum = r.coef.count(v) ? r.coef[v] + SymExpr(sign) * c : SymExpr(sign) * c;
    if (sum == SymExpr(0)) r.coef.erase(v); else r.coef[v] = sum;
  }
  return r;
}

Affine times(const Affine& x, const SymExpr& k) {
  if (k == SymExpr(0)) return Affine{};
  Affine r;
  r.constant = x.constant * k;
  for (const auto& [v, c] : x.coef) r.coef[v] = c * k;
  return r;
}

std::string str(const Affine& a) {
  std::string s;
  for (const auto& [v, c] : a.coef) s += (s.empty() ? "" : " + ") + (c == SymExpr(1) ? "" : "(" + c.str() + ")*") + "i" + std::to_string(v);
  if (a.constant != SymExpr(0) || s.empty()) s += (s.empty() ? "" : " + ") + a.constant.str();
  return s;
}

IndexTermPtr make(IndexTerm t) { return std::make_shared<const IndexTerm>(std::move(t)); }

IndexTermPtr intTerm(const Affine& a) {
  IndexTerm t;
  t.kind = IndexKind::Int;
  t.a = a;
  return make(std::move(t));
}

IndexTermPtr boolTerm(bool v) {
  IndexTerm t;
  t.kind = IndexKind::Bool;
  t.truth = v;
  return make(std::move(t));
}

IndexTermPtr realTerm(double v) {
  IndexTerm t;
  t.kind = IndexKind::Real;
  t.real = v;
  return make(std::move(t));
}

IndexTermPtr node(IndexKind kind, std::vector<IndexTermPtr> args) {
  IndexTerm t;
  t.kind = kind;
  t.args = std::move(args);
  return make(std::move(t));
}

// a <= 0, decided at once when a is a constant.
IndexTermPtr le(const Affine& a) {
  if (!a.hasVars() && a.constant.isConst()) return boolTerm(*a.constant.constValue() <= 0);
  IndexTerm t;
  t.kind = IndexKind::Le;
  t.a = a;
  return make(std::move(t));
}

// The variable of each axis that has one (size other than 1), in order.
std::vector<int> varAxes(const std::vector<SymExpr>& dims) {
  std::vector<int> out;
  for (size_t k = 0; k < dims.size(); ++k)
    if (dims[k] != SymExpr(1)) out.push_back(static_cast<int>(k));
  return out;
}

// Numpy broadcasting of an operand of `in` dims into `out` dims.
std::vector<std::optional<Affine>> broadcastMap(const std::vector<SymExpr>& in, const std::vector<SymExpr>& out) {
  std::vector<std::optional<Affine>> m(in.size());
  for (size_t k = 0; k < in.size(); ++k)
    if (in[k] != SymExpr(1)) m[k] = variable(static_cast<int>(k + out.size() - in.size()));
  return m;
}

std::vector<SymExpr> rowMajorStrides(const std::vector<SymExpr>& dims) {
  std::vector<SymExpr> s(dims.size(), SymExpr(1));
  for (size_t k = dims.size(); k-- > 1;) s[k - 1] = s[k] * dims[k];
  return s;
}

}  // namespace

std::string str(const IndexTermPtr& t) {
  auto list = [&](const char* sep) {
    std::string s;
    for (const auto& a : t->args) s += (s.empty() ? "" : sep) + str(a);
    return "(" + s + ")";
  };
  switch (t->kind) {
    case IndexKind::Int: return str(t->a);
    case IndexKind::Real: return std::to_string(t->real);
    case IndexKind::Bool: return t->truth ? "true" : "false";
    case IndexKind::Load: {
      std::string s;
      for (const auto& a : t->idx) s += (s.empty() ? "" : ", ") + str(a);
      return t->input + "[" + s + "]";
    }
    case IndexKind::Le: return "(" + str(t->a) + " <= 0)";
    case IndexKind::NonZero: return "(" + str(t->args[0]) + " != 0)";
    case IndexKind::And: return list(" and ");
    case IndexKind::Or: return list(" or ");
    case IndexKind::Not: return "not " + str(t->args[0]);
    case IndexKind::Where: return "where" + list(", ");
    case IndexKind::Piece: return "piece(i" + std::to_string(t->var) + ")" + list(", ");
    case IndexKind::Linear: return "flat(" + str(t->args[0]) + " at " + str(t->a) + ")";
  }
  return "?";
}

bool IndexAlgebra::alwaysNonPositive(const Affine& a, const std::vector<SymExpr>& extents) const {
  SymExpr most = resolve(a.constant);
  for (const auto& [v, c] : a.coef) {
    const SymExpr k = resolve(c);
    if (provablyNonNegative(k)) {
      most = most + k * (resolve(extents.at(static_cast<size_t>(v))) - SymExpr(1));
    } else if (!provablyNonNegative(-k)) {
      return false;
    }
  }
  return provablyNonNegative(-most);
}

IndexTermPtr IndexAlgebra::substitute(const IndexTermPtr& t, const std::vector<std::optional<Affine>>& map,
                                 const std::vector<SymExpr>& extents, std::string* why) const {
  auto affine = [&](const Affine& a) {
    Affine r = constant(a.constant);
    for (const auto& [v, c] : a.coef)
      if (static_cast<size_t>(v) < map.size() && map[static_cast<size_t>(v)]) r = plus(r, times(*map[static_cast<size_t>(v)], c));
    return r;
  };
  switch (t->kind) {
    case IndexKind::Int: return intTerm(affine(t->a));
    case IndexKind::Real:
    case IndexKind::Bool: return t;
    case IndexKind::Le: return le(affine(t->a));
    case IndexKind::Load: {
      IndexTerm r = *t;
      for (auto& a : r.idx) a = affine(a);
      return make(std::move(r));
    }
    case IndexKind::Piece: {
      const auto& m = static_cast<size_t>(t->var) < map.size() ? map[static_cast<size_t>(t->var)] : std::nullopt;
      const Affine chosen = m ? *m : Affine{};
      if (!chosen.hasVars()) {
        const auto k = resolve(chosen.constant).constValue();
        if (!k || *k < 0 || *k >= static_cast<int64_t>(t->args.size())) {
          *why = "a Concat's piece " + chosen.constant.str() + " is not one of its " + std::to_string(t->args.size());
          return nullptr;
        }
        return substitute(t->args[static_cast<size_t>(*k)], map, extents, why);
      }
      if (chosen.coef.size() != 1 || chosen.coef.begin()->second != SymExpr(1) || chosen.constant != SymExpr(0)) {
        *why = "a Concat's pieces are chosen by " + str(chosen);
        return nullptr;
      }
      IndexTerm r = *t;
      r.var = chosen.coef.begin()->first;
      for (auto& a : r.args)
        if (!(a = substitute(a, map, extents, why))) return nullptr;
      return make(std::move(r));
    }
    case IndexKind::Linear: {
      const Affine at = affine(t->a);
      // The row-major position `at` as one index per axis of dims: each variable's
      // coefficient is the stride of the one axis it indexes, within that axis's size.
      // One axis of size other than 1 takes the whole position when it provably fits.
      const auto strides = rowMajorStrides(t->dims);
      const auto axes = varAxes(t->dims);
      std::vector<std::optional<Affine>> inner(t->dims.size());
      bool ok = true;
      if (axes.size() == 1) {
        const size_t k = static_cast<size_t>(axes[0]);
        ok = alwaysNonPositive(times(at, SymExpr(-1)), extents) &&
             alwaysNonPositive(plus(at, constant(SymExpr(1) - t->dims[k]), 1), extents);
        inner[k] = at;
      } else {
        ok = resolve(at.constant) == SymExpr(0);
        for (const auto& [v, c] : at.coef) {
          bool placed = false;
          for (int k : axes) {
            const size_t ks = static_cast<size_t>(k);
            if (inner[ks] || resolve(strides[ks]) != resolve(c)) continue;
            const Order o = compare(resolve(extents.at(static_cast<size_t>(v))), resolve(t->dims[ks]));
            if (o != Order::Less && o != Order::Equal && o != Order::LessEqual) continue;
            inner[ks] = variable(v);
            placed = true;
            break;
          }
          ok = ok && placed;
        }
      }
      if (ok) return substitute(t->args[0], inner, extents, why);
      IndexTerm r = *t;  // not yet an index per axis: kept until a later view decides it
      r.a = at;
      return make(std::move(r));
    }
    default: {
      IndexTerm r = *t;
      for (auto& a : r.args)
        if (!(a = substitute(a, map, extents, why))) return nullptr;
      return make(std::move(r));
    }
  }
}

std::optional<IndexValue> IndexAlgebra::value(const std::string& tensor, std::string* why) {
  if (auto it = memo_.find(tensor); it != memo_.end()) return it->second;
  auto v = compute(tensor, why);
  if (v) memo_[tensor] = *v;
  return v;
}

std::optional<IndexValue> IndexAlgebra::compute(const std::string& tensor, std::string* why) {
  if (!c_.analysis.tensors.count(tensor)) {
    *why = "tensor '" + tensor + "' has no shape";
    return std::nullopt;
  }
  const auto& info = c_.analysis.at(tensor);
  IndexValue out;
  for (const auto& d : info.dims) out.dims.push_back(resolve(d));
  const auto fail = [&](const std::string& reason) -> std::optional<IndexValue> {
    *why = reason;
    return std::nullopt;
  };
  const bool real = isFloating(info.dtype), truth = info.dtype == DType::Bool;
  const auto scalarTerm = [&](double x) { return real ? realTerm(x) : truth ? boolTerm(x != 0) : intTerm(constant(SymExpr(static_cast<int64_t>(x)))); };

  if (info.cls == TensorClass::Input) {
    IndexTerm t;
    t.kind = IndexKind::Load;
    t.input = tensor;
    t.idx.resize(out.dims.size());
    for (int k : varAxes(out.dims)) t.idx[static_cast<size_t>(k)] = variable(k);
    out.term = make(std::move(t));
    return out;
  }
  if (info.value) {  // folded by tl-shape: one value, or the same one everywhere
    if (info.value->empty()) return fail("'" + tensor + "' holds no values");
    const SymExpr v = resolve((*info.value)[0]);
    for (const auto& e : *info.value)
      if (resolve(e) != v) return fail("'" + tensor + "' holds " + std::to_string(info.value->size()) + " different shape values");
    if (real || truth) {
      if (!v.isConst()) return fail("'" + tensor + "' is a non-constant shape value of a float or bool type");
      out.term = scalarTerm(static_cast<double>(*v.constValue()));
    } else {
      out.term = intTerm(constant(v));
    }
    return out;
  }
  if (const auto* init = constantOf(c_.graph, tensor)) {
    const Tensor t = readTensor(*init, c_.model.baseDir);
    const auto values = t.toDouble();
    if (values.empty()) return fail("'" + tensor + "' is an empty constant");
    for (double x : values)
      if (x != values[0]) return fail("'" + tensor + "' is a constant of several values");
    out.term = scalarTerm(values[0]);
    return out;
  }
  const int p = c_.graph.producer(tensor);
  if (p < 0) return fail("'" + tensor + "' has no producer");
  const auto& n = c_.graph.node(static_cast<size_t>(p));
  const std::string where = "node '" + c_.graph.nodeName(static_cast<size_t>(p)) + "' (" + n.op_type() + ")";
  if (!isOnnxDomain(n.domain())) return fail(where + " is no ONNX op");
  const std::string& op = n.op_type();
  // An input's term over this node's output variables, numpy-broadcast.
  auto operand = [&](int i) -> IndexTermPtr {
    auto v = value(n.input(i), why);
    if (!v) return nullptr;
    return substitute(v->term, broadcastMap(v->dims, out.dims), out.dims, why);
  };

  if (op == "Identity" || op == "Unsqueeze" || op == "Squeeze" || op == "Reshape" || op == "Flatten") {
    auto v = value(n.input(0), why);
    if (!v) return std::nullopt;
    const auto from = varAxes(v->dims), to = varAxes(out.dims);
    bool same = from.size() == to.size();
    for (size_t m = 0; same && m < from.size(); ++m) same = v->dims[static_cast<size_t>(from[m])] == out.dims[static_cast<size_t>(to[m])];
    if (same) {
      std::vector<std::optional<Affine>> map(v->dims.size());
      for (size_t m = 0; m < from.size(); ++m) map[static_cast<size_t>(from[m])] = variable(to[m]);
      out.term = substitute(v->term, map, out.dims, why);
    } else {  // the row-major position is what a reshape keeps
      IndexTerm t;
      t.kind = IndexKind::Linear;
      t.dims = v->dims;
      t.args = {v->term};
      const auto strides = rowMajorStrides(out.dims);
      for (int k : to) t.a = plus(t.a, times(variable(k), strides[static_cast<size_t>(k)]));
      std::vector<std::optional<Affine>> identity(out.dims.size());
      for (int k : to) identity[static_cast<size_t>(k)] = variable(k);
      out.term = substitute(make(std::move(t)), identity, out.dims, why);
    }
    if (!out.term) return std::nullopt;
    return out;
  }
  if (op == "Expand") {
    if (!(out.term = operand(0))) return std::nullopt;
    return out;
  }
  if (op == "Cast") {
    auto v = value(n.input(0), why);
    if (!v) return std::nullopt;
    const DType from = c_.analysis.at(n.input(0)).dtype;
    if (!(out.term = substitute(v->term, broadcastMap(v->dims, out.dims), out.dims, why))) return std::nullopt;
    if (from == info.dtype || (isInteger(from) && isInteger(info.dtype))) return out;
    if (truth && isInteger(from)) {
      out.term = node(IndexKind::NonZero, {out.term});
      return out;
    }
    if (real && out.term->kind == IndexKind::Int && !out.term->a.hasVars() && out.term->a.constant.isConst()) {
      out.term = realTerm(static_cast<double>(*out.term->a.constant.constValue()));
      return out;
    }
    return fail(where + " casts " + dtypeName(from) + " to " + dtypeName(info.dtype));
  }
  if (op == "ConstantOfShape") {
    double x = 0;
    if (const auto* a = findAttr(n, "value")) x = readTensor(a->t(), {}).toDouble().at(0);
    out.term = scalarTerm(x);
    return out;
  }
  if (op == "Range") {
    const auto& start = c_.analysis.at(n.input(0)).value;
    const auto& delta = c_.analysis.at(n.input(2)).value;
    if (real || truth || !start || !delta || start->size() != 1 || delta->size() != 1 || out.dims.size() != 1)
      return fail(where + " is not an integer Range of shape values");
    out.term = intTerm(plus(constant(resolve((*start)[0])), times(variable(0), resolve((*delta)[0]))));
    if (out.dims[0] == SymExpr(1)) out.term = intTerm(constant(resolve((*start)[0])));
    return out;
  }
  if (op == "Add" || op == "Sub" || op == "Mul") {
    IndexTermPtr a = operand(0), b = a ? operand(1) : nullptr;
    if (!b) return std::nullopt;
    if (a->kind != IndexKind::Int || b->kind != IndexKind::Int) return fail(where + " is not integer arithmetic of indices");
    if (op == "Mul") {
      if (a->a.hasVars() && b->a.hasVars()) return fail(where + " multiplies two indices");
      out.term = a->a.hasVars() ? intTerm(times(a->a, b->a.constant)) : intTerm(times(b->a, a->a.constant));
    } else {
      out.term = intTerm(plus(a->a, b->a, op == "Add" ? 1 : -1));
    }
    return out;
  }
  if (op == "Less" || op == "LessOrEqual" || op == "Greater" || op == "GreaterOrEqual" || op == "Equal") {
    IndexTermPtr a = operand(0), b = a ? operand(1) : nullptr;
    if (!b) return std::nullopt;
    if (op == "Equal" && a->kind != IndexKind::Int) std::swap(a, b);
    if (op == "Equal" && a->kind == IndexKind::Int && !a->a.hasVars() && resolve(a->a.constant) == SymExpr(0) &&
        b->kind == IndexKind::Load) {
      out.term = node(IndexKind::Not, {node(IndexKind::NonZero, {b})});  // x == 0
      return out;
    }
    if (a->kind != IndexKind::Int || b->kind != IndexKind::Int) return fail(where + " compares what is not an index");
    const Affine d = plus(a->a, b->a, -1);  // a - b
    const Affine one = constant(SymExpr(1));
    if (op == "LessOrEqual") out.term = le(d);
    if (op == "Less") out.term = le(plus(d, one));
    if (op == "GreaterOrEqual") out.term = le(times(d, SymExpr(-1)));
    if (op == "Greater") out.term = le(plus(times(d, SymExpr(-1)), one));
    if (op == "Equal") out.term = node(IndexKind::And, {le(d), le(times(d, SymExpr(-1)))});
    return out;
  }
  if (op == "And" || op == "Or") {
    IndexTermPtr a = operand(0), b = a ? operand(1) : nullptr;
    if (!b) return std::nullopt;
    out.term = node(op == "And" ? IndexKind::And : IndexKind::Or, {a, b});
    return out;
  }
  if (op == "Not") {
    if (!(out.term = operand(0))) return std::nullopt;
    out.term = node(IndexKind::Not, {out.term});
    return out;
  }
  if (op == "Where") {
    IndexTermPtr c = operand(0), x = c ? operand(1) : nullptr, y = x ? operand(2) : nullptr;
    if (!y) return std::nullopt;
    out.term = node(IndexKind::Where, {c, x, y});
    return out;
  }
  if (op == "Gather") {
    auto data = value(n.input(0), why);
    auto index = data ? value(n.input(1), why) : std::nullopt;
    if (!index) return std::nullopt;
    const int64_t rank = static_cast<int64_t>(data->dims.size()), ri = static_cast<int64_t>(index->dims.size());
    int64_t axis = attrInt(n, "axis").value_or(0);
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank) return fail(where + " gathers along axis " + std::to_string(axis));
    std::vector<std::optional<Affine>> imap(index->dims.size());
    for (int k : varAxes(index->dims)) imap[static_cast<size_t>(k)] = variable(static_cast<int>(axis + k));
    IndexTermPtr at = substitute(index->term, imap, out.dims, why);
    if (!at) return std::nullopt;
    if (at->kind != IndexKind::Int) return fail(where + " gathers at indices that are not affine: " + str(at));
    if (!alwaysNonPositive(times(at->a, SymExpr(-1)), out.dims))
      return fail(where + " may gather at a negative index " + str(at->a));
    std::vector<std::optional<Affine>> dmap(data->dims.size());
    for (int k : varAxes(data->dims)) {
      if (k < axis) dmap[static_cast<size_t>(k)] = variable(k);
      if (k > axis) dmap[static_cast<size_t>(k)] = variable(static_cast<int>(k - 1 + ri));
    }
    dmap[static_cast<size_t>(axis)] = at->a;
    if (!(out.term = substitute(data->term, dmap, out.dims, why))) return std::nullopt;
    return out;
  }
  if (op == "GatherND") {
    if (attrInt(n, "batch_dims").value_or(0) != 0) return fail(where + " has batch_dims");
    auto data = value(n.input(0), why);
    auto index = data ? value(n.input(1), why) : std::nullopt;
    if (!index) return std::nullopt;
    const size_t ri = index->dims.size();
    const auto K = ri ? index->dims.back().constValue() : std::nullopt;
    if (!K || *K < 1 || static_cast<size_t>(*K) > data->dims.size()) return fail(where + " has no constant index width");
    std::vector<std::optional<Affine>> dmap(data->dims.size());
    for (int64_t k = 0; k < *K; ++k) {
      std::vector<std::optional<Affine>> imap(ri);
      for (int m : varAxes(index->dims)) imap[static_cast<size_t>(m)] = m + 1 == static_cast<int>(ri) ? constant(SymExpr(k)) : variable(m);
      IndexTermPtr at = substitute(index->term, imap, out.dims, why);
      if (!at) return std::nullopt;
      if (at->kind != IndexKind::Int) return fail(where + " gathers at indices that are not affine: " + str(at));
      if (!alwaysNonPositive(times(at->a, SymExpr(-1)), out.dims))
        return fail(where + " may gather at a negative index " + str(at->a));
      dmap[static_cast<size_t>(k)] = at->a;
    }
    for (int k : varAxes(data->dims))
      if (k >= *K) dmap[static_cast<size_t>(k)] = variable(static_cast<int>(ri - 1 + static_cast<size_t>(k - *K)));
    if (!(out.term = substitute(data->term, dmap, out.dims, why))) return std::nullopt;
    return out;
  }
  if (op == "Concat") {
    int64_t axis = attrInt(n, "axis").value_or(0);
    if (axis < 0) axis += static_cast<int64_t>(out.dims.size());
    IndexTerm t;
    t.kind = IndexKind::Piece;
    t.var = static_cast<int>(axis);
    for (int i = 0; i < n.input_size(); ++i) {
      auto v = value(n.input(i), why);
      if (!v) return std::nullopt;
      if (v->dims.size() != out.dims.size() || v->dims[static_cast<size_t>(axis)] != SymExpr(1))
        return fail(where + " joins pieces longer than one element");
      std::vector<std::optional<Affine>> map(v->dims.size());
      for (int k : varAxes(v->dims)) map[static_cast<size_t>(k)] = variable(k);
      IndexTermPtr part = substitute(v->term, map, out.dims, why);
      if (!part) return std::nullopt;
      t.args.push_back(part);
    }
    out.term = t.args.size() == 1 ? t.args[0] : make(std::move(t));
    return out;
  }
  return fail(where + " has no rule in the index algebra");
}

}  // namespace tl
