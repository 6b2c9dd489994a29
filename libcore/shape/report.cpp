#include "shape/report.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace tl {
namespace {

// Substitutes the bound symbols; expressions over unbound ones stay symbolic.
std::string show(const std::vector<SymExpr>& xs, const std::map<std::string, SymExpr>* sub) {
  if (!sub) return str(xs);
  std::vector<SymExpr> ys;
  for (const auto& x : xs) ys.push_back(x.substitute(*sub));
  return str(ys);
}

std::string producerOf(const Graph& g, const TensorShape& t) {
  if (t.producer < 0) return t.cls == TensorClass::Input ? "<input>" : "<initializer>";
  return g.node(static_cast<size_t>(t.producer)).op_type() + " '" + g.nodeName(static_cast<size_t>(t.producer)) + "'";
}

}  // namespace

std::string renderShapeReport(const Graph& g, const ShapeAnalysis& a, const std::string& title,
                              const SymbolValues* bindings) {
  std::ostringstream os;
  std::map<std::string, SymExpr> sub;
  if (bindings) {
    for (const auto& [k, v] : *bindings) sub[k] = SymExpr(v);
    // Eliminated symbols follow from the free ones.
    for (const auto& r : a.symbols.relations()) sub.emplace(r.symbol, r.value.substitute(sub));
  }
  const auto* subp = bindings ? &sub : nullptr;

  os << "# " << title << "\n";
  if (bindings) {
    os << "# bound:";
    for (const auto& [k, v] : *bindings) os << " " << k << "=" << v;
    os << "\n";
  }
  os << "# tensor  dtype  shape  producer  class  [= value]\n";
  for (const auto& name : a.order) {
    const auto& t = a.at(name);
    os << name << "  " << dtypeName(t.dtype) << "  " << show(t.dims, subp) << "  " << producerOf(g, t) << "  "
       << className(t.cls);
    if (t.value && t.cls == TensorClass::Shape) os << "  = " << show(*t.value, subp);
    os << "\n";
  }

  os << "\nsymbols:\n";
  for (const auto& s : a.symbols.freeSymbols()) {
    os << "  " << s;
    if (bindings && bindings->count(s)) os << " = " << bindings->at(s);
    os << "  (free; first seen: " << a.symbols.origin(s) << ")\n";
  }
  for (const auto& r : a.symbols.relations()) {
    os << "  " << r.symbol << " = " << r.value.str();
    if (bindings) os << " = " << r.value.substitute(sub).str();
    os << "  (" << r.evidence << ")\n";
  }
  for (const auto& b : a.symbols.bounds())
    os << "  " << b.expr.str() << " <= " << b.limit << "  (bound: the model is defined only there; " << b.evidence << ")\n";

  std::map<std::string, std::map<std::string, size_t>> byClass;
  size_t counts[3] = {0, 0, 0};
  for (size_t i = 0; i < g.nodeCount(); ++i) {
    NodeClass c = a.nodeClass[i];
    ++counts[static_cast<int>(c)];
    ++byClass[className(c)][g.node(i).op_type()];
  }
  os << "\nsummary:\n";
  os << "  nodes: " << g.nodeCount() << " (shape-computing, folded: " << counts[static_cast<int>(NodeClass::Shape)]
     << "; tensor-computing: " << counts[static_cast<int>(NodeClass::Tensor)]
     << "; constant: " << counts[static_cast<int>(NodeClass::Constant)] << ")\n";
  for (const auto& [cls, ops] : byClass) {
    std::vector<std::pair<std::string, size_t>> sorted(ops.begin(), ops.end());
    std::sort(sorted.begin(), sorted.end(), [](const auto& x, const auto& y) {
      return x.second != y.second ? x.second > y.second : x.first < y.first;
    });
    os << "  " << cls << " ops:";
    for (const auto& [op, n] : sorted) os << " " << op << " " << n << ";";
    os << "\n";
  }
  os << "  tensor ops computed from shapes and constants only: " << a.shapeOnlyTensorOps << "\n";
  os << "  shape ops left to execute at inference: " << a.shapeOpsLeft << "\n";
  std::string free;
  for (const auto& s : a.symbols.freeSymbols()) free += (free.empty() ? "" : ", ") + s;
  os << "  free symbols: " << (free.empty() ? "none" : free) << "\n";
  os << "  invented symbols: " << a.inventedSymbols.size() << "\n";
  for (const auto& s : a.inventedSymbols) os << "    " << s << "\n";
  for (const auto& n : a.notes) os << "  note: " << n << "\n";
  return os.str();
}

}  // namespace tl
