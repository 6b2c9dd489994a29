// concat-pair: two independent Concats of two inputs each along the same axis (a layer's
// KV cache: Concat(past_k, k) and Concat(past_v, v)) become one tl.Concat: one launch.
// The pair goes where the later one was, so the earlier one's readers must come after it;
// neither may read the other's output.
#include <map>
#include <tuple>

#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"

namespace tl {

PassResult pairConcats(Model& model) {
  PassResult result;
  std::vector<Rewrite> rewrites;
  {
    Graph graph(model.proto.graph());
    const ShapeAnalysis analysis = inferShapes(model, graph);
    std::map<std::tuple<int64_t, size_t, int>, std::vector<size_t>> byKind;  // (axis, rank, dtype), tensor ops only
    for (size_t i = 0; i < graph.nodeCount(); ++i) {
      const auto& n = graph.node(i);
      if (!isOp(&n, "Concat") || n.input_size() != 2 || n.input(0).empty() || n.input(1).empty()) continue;
      if (analysis.nodeClass[i] != NodeClass::Tensor) continue;
      const auto& out = analysis.at(n.output(0));
      int64_t axis = attrInt(n, "axis").value_or(0);
      if (axis < 0) axis += static_cast<int64_t>(out.dims.size());
      byKind[{axis, out.dims.size(), static_cast<int>(out.dtype)}].push_back(i);
    }
    for (const auto& [kind, nodes] : byKind) {
      for (size_t j = 0; j + 1 < nodes.size();) {
        const auto &a = graph.node(nodes[j]), &b = graph.node(nodes[j + 1]);
        if (!readOnlyAfter(graph, a.output(0), nodes[j + 1])) {  // b reading a is such a read too; try b next
          result.nearMisses.push_back("node '" + graph.nodeName(nodes[j]) + "' (Concat): its output is read before '" +
                                      graph.nodeName(nodes[j + 1]) + "', the next Concat like it");
          ++j;
          continue;
        }
        Rewrite r;
        r.remove = {nodes[j], nodes[j + 1]};
        j += 2;
        r.fused = tlNode("Concat", a.name() + "+" + b.name(), {a.input(0), a.input(1), b.input(0), b.input(1)}, a.output(0));
        r.fused.add_output(b.output(0));
        addAttr(r.fused, "axis", std::get<0>(kind));
        rewrites.push_back(std::move(r));
      }
    }
  }
  result.rewrites = static_cast<int>(rewrites.size());
  applyRewrites(model, std::move(rewrites));
  return result;
}

}  // namespace tl
