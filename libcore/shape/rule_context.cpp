#include "shape/rule_context.h"

#include <algorithm>

#include "cli/error.h"
#include "graph/attributes.h"

namespace tl {

RuleContext::RuleContext(ShapeAnalysis& analysis, const Graph& graph, size_t nodeIndex, int64_t opset)
    : analysis_(analysis), graph_(graph), index_(nodeIndex), node_(&graph.node(nodeIndex)), opset_(opset) {}

const TensorShape& RuleContext::input(size_t i) const {
  if (!hasInput(i)) fail("required input " + std::to_string(i) + " is missing");
  return analysis_.at(node_->input(static_cast<int>(i)));
}

const onnx::AttributeProto* RuleContext::attr(const char* name) const { return findAttr(*node_, name); }

std::optional<int64_t> RuleContext::attrInt(const char* name) const { return tl::attrInt(*node_, name); }

int64_t RuleContext::attrInt(const char* name, int64_t fallback) const { return attrInt(name).value_or(fallback); }

std::optional<std::vector<int64_t>> RuleContext::attrInts(const char* name) const { return tl::attrInts(*node_, name); }

const std::vector<SymExpr>* RuleContext::value(size_t i) const {
  if (!hasInput(i)) return nullptr;
  const auto& t = input(i);
  return t.value ? &*t.value : nullptr;
}

const std::vector<SymExpr>& RuleContext::requireValue(size_t i, const char* what) const {
  const auto* v = value(i);
  if (!v)
    fail(std::string(what) + " (input '" + node_->input(static_cast<int>(i)) +
         "') is not computable from shapes and constants");
  return *v;
}

std::vector<int64_t> RuleContext::requireConstInts(size_t i, const char* what) const {
  std::vector<int64_t> out;
  for (const auto& e : requireValue(i, what)) {
    auto c = e.constValue();
    if (!c) fail(std::string(what) + " must be constant, but is " + e.str());
    out.push_back(*c);
  }
  return out;
}

SymExpr RuleContext::unify(const SymExpr& a, const SymExpr& b) {
  auto& table = analysis_.symbols;
  SymExpr ra = table.resolve(a), rb = table.resolve(b);
  if (ra == rb) return ra;
  try {
    table.unify(ra, rb, "node '" + graph_.nodeName(index_) + "' (" + node_->op_type() + ")");
  } catch (const Error& e) {
    fail(e.what());
  }
  return table.resolve(ra);
}

std::vector<SymExpr> RuleContext::broadcast(const std::vector<std::vector<SymExpr>>& shapes) {
  size_t r = 0;
  for (const auto& s : shapes) r = std::max(r, s.size());
  std::vector<SymExpr> out(r, SymExpr(1));
  for (const auto& s : shapes) {
    const size_t off = r - s.size();
    for (size_t i = 0; i < s.size(); ++i) {
      SymExpr d = resolve(s[i]);
      SymExpr& o = out[off + i];
      if (d == SymExpr(1)) continue;
      if (o == SymExpr(1)) {
        o = d;
      } else if (o != d) {
        if (o.isConst() && d.isConst())
          fail("cannot broadcast " + str(s) + ": dimension " + d.str() + " against " + o.str());
        o = unify(o, d);
      }
    }
  }
  return out;
}

size_t RuleContext::axis(int64_t a, size_t rank) const {
  const int64_t r = static_cast<int64_t>(rank);
  if (a < -r || a >= r) fail("axis " + std::to_string(a) + " is out of range for rank " + std::to_string(rank));
  return static_cast<size_t>(a < 0 ? a + r : a);
}

void RuleContext::setOutput(size_t i, DType dtype, std::vector<SymExpr> dims,
                            std::optional<std::vector<SymExpr>> value) {
  if (!hasOutput(i)) return;
  for (auto& d : dims) {
    d = resolve(d);
    if (auto c = d.constValue(); c && *c < 0) fail("output dimension is negative: " + str(dims));
  }
  if (value) {
    auto n = constDims(dims);
    int64_t count = 1;
    if (n)
      for (auto x : *n) count *= x;
    if (!n || count > kMaxValueElements || static_cast<int64_t>(value->size()) != count) value.reset();
  }
  TensorShape t;
  t.dtype = dtype;
  t.dims = std::move(dims);
  t.value = std::move(value);
  t.producer = static_cast<int>(index_);
  t.cls = t.value ? TensorClass::Shape : TensorClass::Tensor;
  const std::string& name = node_->output(static_cast<int>(i));
  analysis_.tensors[name] = std::move(t);
  analysis_.order.push_back(name);
}

void RuleContext::setIotaAxis(size_t i, int axis) {
  if (hasOutput(i)) analysis_.tensors.at(node_->output(static_cast<int>(i))).iotaAxis = axis;
}

void RuleContext::setIndexAxes(size_t i, std::vector<int> axes) {
  if (hasOutput(i)) analysis_.tensors.at(node_->output(static_cast<int>(i))).indexAxes = std::move(axes);
}

bool RuleContext::isFreeSymbol(const SymExpr& e) const {
  SymExpr r = resolve(e);
  if (!r.isSymbol()) return false;
  const auto free = analysis_.symbols.freeSymbols();
  return std::find(free.begin(), free.end(), r.symbolName()) != free.end();
}

void RuleContext::readsWholeAxis(const SymExpr& extent, const SymExpr& count, const std::string& what) {
  SymExpr d = resolve(extent), n = resolve(count);
  if (d == n || !isFreeSymbol(d) || n.symbols().count(d.symbolName())) return;
  try {
    analysis_.symbols.unify(d, n, "node '" + graph_.nodeName(index_) + "' (" + node_->op_type() + ") reads " + what +
                                      " at exactly 0.." + n.str() + " - 1");
  } catch (const Error& e) {
    fail(e.what());
  }
}

void RuleContext::assume(const SymExpr& a, const SymExpr& b, const std::string& why) {
  try {
    analysis_.symbols.unify(a, b, "assumed: node '" + graph_.nodeName(index_) + "' (" + node_->op_type() + ") " + why);
  } catch (const Error& e) {
    fail(e.what());
  }
  analysis_.notes.push_back("assumed " + a.str() + " = " + b.str() + " at node '" + graph_.nodeName(index_) +
                            "': " + why);
}

void RuleContext::fail(const std::string& message) const { throw Error(message); }

std::optional<std::vector<int64_t>> constDims(const std::vector<SymExpr>& dims) {
  std::vector<int64_t> out;
  for (const auto& d : dims) {
    auto c = d.constValue();
    if (!c) return std::nullopt;
    out.push_back(*c);
  }
  return out;
}

}  // namespace tl
