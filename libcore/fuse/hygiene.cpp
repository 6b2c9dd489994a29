// Graph hygiene (MNN's III.C, ONNX Runtime's basic level):
//   no-ops  a node whose output is its input unchanged: Identity, Dropout without a mask,
//           Cast to the same type, Expand/Reshape to the same shape, Transpose by the
//           identity permutation, Concat of one input. Its readers read its input instead. (tl-run already
//           runs most as views; gone, they cost no lookup and no graph node.)
//   cse     nodes of one op, inputs and attributes computed once: the later copies'
//           readers read the first one's outputs.
// Neither touches a node that writes a graph output, or one whose result is random.
#include <map>
#include <set>

#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"
#include "onnx/model_io.h"

namespace tl {
namespace {

// Replaces every read of each key by its value (a chain resolves to its end).
void rewire(onnx::GraphProto& g, const std::map<std::string, std::string>& to) {
  auto resolve = [&](std::string t) {
    for (auto it = to.find(t); it != to.end(); it = to.find(t)) t = it->second;
    return t;
  };
  for (auto& n : *g.mutable_node())
    for (auto& in : *n.mutable_input())
      if (!in.empty() && to.count(in)) in = resolve(in);
}

// Tensors that subgraphs (If/Loop bodies) read from the outer graph: rewire() does not
// reach into them, so the nodes writing these stay.
std::set<std::string> readBySubgraphs(const onnx::GraphProto& g) {
  std::set<std::string> names;
  for (const auto& n : g.node())
    for (const auto& a : n.attribute())
      if (a.has_g())
        for (const auto& sub : a.g().node()) names.insert(sub.input().begin(), sub.input().end());
  return names;
}

void dropNodes(onnx::GraphProto& g, const std::set<size_t>& drop) {
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i = 0; i < g.node_size(); ++i)
    if (!drop.count(static_cast<size_t>(i))) *nodes.Add() = g.node(i);
  g.mutable_node()->Swap(&nodes);
}

}  // namespace

PassResult removeNoOps(Model& model) {
  PassResult result;
  std::map<std::string, std::string> to;
  std::set<size_t> drop;
  {
    Graph graph(model.proto.graph());
    const ShapeAnalysis analysis = inferShapes(model, graph);
    PatternContext c(model, graph, analysis);
    const auto inner = readBySubgraphs(model.proto.graph());
    for (size_t i = 0; i < graph.nodeCount(); ++i) {
      const auto& n = graph.node(i);
      if (!isOnnxDomain(n.domain()) || n.input_size() < 1 || n.output_size() < 1) continue;
      const std::string& in = n.input(0);
      const std::string& out = n.output(0);
      if (in.empty() || out.empty() || c.outputs.count(out) || inner.count(out) ||
          analysis.nodeClass[i] != NodeClass::Tensor)
        continue;
      const std::string& op = n.op_type();
      bool noop = false;
      if (op == "Identity") noop = true;
      if (op == "Dropout") noop = (n.output_size() == 1 || n.output(1).empty()) && (n.input_size() < 3 || n.input(2).empty());
      if (op == "Cast") noop = analysis.at(in).dtype == analysis.at(out).dtype;
      if (op == "Expand" || op == "Reshape") noop = c.sameDims(in, out);
      if (op == "Concat") noop = n.input_size() == 1;
      if (op == "Transpose") {
        const auto* p = findAttr(n, "perm");
        noop = p != nullptr;
        for (int k = 0; p && k < p->ints_size(); ++k) noop = noop && p->ints(k) == k;
      }
      if (!noop) continue;
      to[out] = in;
      drop.insert(i);
    }
  }
  rewire(*model.proto.mutable_graph(), to);
  dropNodes(*model.proto.mutable_graph(), drop);
  result.rewrites = static_cast<int>(drop.size());
  return result;
}

PassResult eliminateCommonSubexpressions(Model& model) {
  PassResult result;
  std::map<std::string, std::string> to;
  std::set<size_t> drop;
  {
    Graph graph(model.proto.graph());
    std::set<std::string> outputs = readBySubgraphs(model.proto.graph());  // kept, as graph outputs are
    for (const auto& o : graph.proto().output()) outputs.insert(o.name());
    std::map<std::string, size_t> seen;  // a node's key -> the first node with it
    for (size_t i : graph.topoOrder()) {
      const auto& n = graph.node(i);
      if (n.op_type().find("Random") != std::string::npos || n.output_size() == 0) continue;
      bool writesOutput = false;
      for (const auto& o : n.output()) writesOutput = writesOutput || outputs.count(o);
      if (writesOutput) continue;
      // The key: op, inputs as they read after earlier merges, attributes, output count.
      onnx::NodeProto k;
      k.set_domain(n.domain());
      k.set_op_type(n.op_type());
      for (const auto& in : n.input()) k.add_input(to.count(in) ? to.at(in) : in);
      for (const auto& a : n.attribute()) *k.add_attribute() = a;
      k.add_output(std::to_string(n.output_size()));
      std::string key;
      k.SerializeToString(&key);
      auto [it, fresh] = seen.emplace(key, i);
      if (fresh) continue;
      const auto& first = graph.node(it->second);
      for (int o = 0; o < n.output_size(); ++o)
        if (!n.output(o).empty()) to[n.output(o)] = first.output(o);
      drop.insert(i);
    }
  }
  rewire(*model.proto.mutable_graph(), to);
  dropNodes(*model.proto.mutable_graph(), drop);
  result.rewrites = static_cast<int>(drop.size());
  return result;
}

}  // namespace tl
