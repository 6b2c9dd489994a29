// dead-nodes: what no graph output depends on. Rewrites leave their patterns' constants
// behind (eps, exponents); this pass removes them, and any node the exporter left unread.
#include <set>

#include "fuse/fuse.h"

namespace tl {

PassResult removeDeadNodes(Model& model) {
  auto* g = model.proto.mutable_graph();
  std::set<std::string> needed;
  for (const auto& o : g->output()) needed.insert(o.name());
  // Backwards from the outputs: a node lives when one of its outputs is needed.
  std::vector<bool> live(static_cast<size_t>(g->node_size()), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (int i = g->node_size() - 1; i >= 0; --i) {
      if (live[i]) continue;
      for (const auto& out : g->node(i).output())
        if (needed.count(out)) live[i] = true;
      if (!live[i]) continue;
      changed = true;
      for (const auto& in : g->node(i).input()) needed.insert(in);
      for (const auto& a : g->node(i).attribute())  // subgraphs read outer names too
        if (a.has_g())
          for (const auto& n : a.g().node())
            for (const auto& in : n.input()) needed.insert(in);
    }
  }
  PassResult r;
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  for (int i = 0; i < g->node_size(); ++i) {
    if (live[i]) {
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
