// dead-nodes: what no graph output depends on. Rewrites leave their patterns' constants
// behind (eps, exponents); this pass removes them, and any node the exporter left unread.
#include <set>

#include "fuse/fuse.h"
#include "graph/graph.h"

namespace tl {

PassResult removeDeadNodes(Model& model) {
  std::vector<bool> live(static_cast<size_t>(model.proto.graph().node_size()), false);
  std::set<std::string> needed;
  {
    // Backwards from the outputs through the producers: a node lives when an output of
    // it is needed, and then its inputs (and what its subgraphs read) are needed too.
    Graph graph(model.proto.graph());
    std::vector<std::string> todo;
    for (const auto& o : graph.proto().output()) todo.push_back(o.name());
    while (!todo.empty()) {
      const std::string t = todo.back();
      todo.pop_back();
      if (!needed.insert(t).second) continue;
      const int p = graph.producer(t);
      if (p < 0 || live[static_cast<size_t>(p)]) continue;
      live[static_cast<size_t>(p)] = true;
      const auto& n = graph.node(static_cast<size_t>(p));
      todo.insert(todo.end(), n.input().begin(), n.input().end());
      for (const auto& a : n.attribute())
        if (a.has_g())
          for (const auto& sub : a.g().node()) todo.insert(todo.end(), sub.input().begin(), sub.input().end());
    }
  }
  auto* g = model.proto.mutable_graph();
  PassResult r;
  r.counts = "removed";
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int i = 0; i < g->node_size(); ++i) {
    if (live[static_cast<size_t>(i)]) {
      *kept.Add() = g->node(i);
    } else {
      ++r.rewrites;
    }
  }
  g->mutable_node()->Swap(&kept);
  // An initializer that is also a graph input (older IRs) stays: removing it would
  // turn a default into a required input.
  for (const auto& in : g->input()) needed.insert(in.name());
  google::protobuf::RepeatedPtrField<onnx::TensorProto> inits;
  for (auto& t : *g->mutable_initializer()) {
    if (needed.count(t.name())) {
      *inits.Add() = t;
    } else {
      ++r.rewrites;
    }
  }
  g->mutable_initializer()->Swap(&inits);
  return r;
}

}  // namespace tl
