// merge-attention: a tl.QMatMul whose A is a tl.Attention's output, through views alone,
// read by nothing else and no graph output, and that has no norm prologue, is marked
// `merge_attention = 1`: at a decode step whose attention splits its keys in 2 to 4, its
// one-row GEMV merges the splits as it reads them and the attention launches no combine
// (runtime/lower/matmul.cpp and attention.cpp read the mark; a launch fewer a layer, where
// a decode step's host time on the H100 is about 10 µs a launch).
#include <algorithm>
#include <set>

#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"
#include "graph/tl_ops.h"

namespace tl {

PassResult markAttentionMerges(Model& model) {
  PassResult result;
  result.counts = "marked";
  std::vector<int> marked;
  {
    Graph graph(model.proto.graph());
    const ShapeAnalysis analysis = inferShapes(model, graph);
    std::set<std::string> outputs;
    for (const auto& o : graph.proto().output()) outputs.insert(o.name());
    for (size_t i = 0; i < graph.nodeCount(); ++i) {
      const auto& n = graph.node(i);
      if (!isAnchor(n, "tl.QMatMul") || attrInt(n, "merge_attention").value_or(0)) continue;
      const ViewChain a = producerThroughViews(graph, n.input(0), analysis.dtypeOf());
      if (a.producer < 0 || !isAnchor(graph.node(static_cast<size_t>(a.producer)), "tl.Attention") ||
          graph.node(static_cast<size_t>(a.producer)).output(0) != a.tensors.back())
        continue;
      const bool alone = std::all_of(a.tensors.begin(), a.tensors.end(), [&](const std::string& t) {
        return graph.consumers(t).size() == 1 && !outputs.count(t);
      });
      if (!alone) {
        result.nearMisses.push_back("node '" + graph.nodeName(i) + "' (tl.QMatMul): the attention output it reads is read by others too");
      } else if (!matmulOptional(n, MatMulInput::NormScale).empty()) {
        result.nearMisses.push_back("node '" + graph.nodeName(i) + "' (tl.QMatMul): its norm prologue reads A before a merge could");
      } else {
        marked.push_back(static_cast<int>(i));
      }
    }
  }
  for (int i : marked) addAttr(*model.proto.mutable_graph()->mutable_node(i), "merge_attention", int64_t{1});
  result.rewrites = static_cast<int>(marked.size());
  return result;
}

}  // namespace tl
