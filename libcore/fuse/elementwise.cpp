// elementwise: a DAG of float32 unary/binary elementwise ops becomes one tl.Elementwise,
// whose `program` tl-run compiles into one kernel (docs/ops.md has the format):
//   Mul(x, Sigmoid(Mul(x, 1.702)))   =>   tl.Elementwise(x), program "t0=mul(x0,1.702);t1=sigmoid(t0);t2=mul(x0,t1)"
// A group grows back from a node through producers of the same output shape whose every
// reader is in the group (no intermediate is needed elsewhere, none is recomputed at a
// bigger shape); inputs may broadcast. One-element constants become literals.
#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"
#include "onnx/model_io.h"
#include "tensor/tensor.h"

namespace tl {
namespace {

const std::map<std::string, std::string>& opNames() {
  static const std::map<std::string, std::string> names = {
      {"Add", "add"},   {"Sub", "sub"},         {"Mul", "mul"}, {"Div", "div"},   {"Neg", "neg"},
      {"Sqrt", "sqrt"}, {"Reciprocal", "recip"}, {"Exp", "exp"}, {"Log", "log"},   {"Tanh", "tanh"},
      {"Erf", "erf"},   {"Sigmoid", "sigmoid"}, {"Relu", "relu"}, {"Abs", "abs"}, {"Sin", "sin"},
      {"Cos", "cos"}};
  return names;
}

bool candidate(const PatternContext& c, const onnx::NodeProto& n) {
  if (!isOnnxDomain(n.domain()) || !opNames().count(n.op_type())) return false;
  if (n.output_size() != 1 || c.analysis.at(n.output(0)).dtype != DType::Float) return false;
  const size_t arity = n.op_type() == "Add" || n.op_type() == "Sub" || n.op_type() == "Mul" || n.op_type() == "Div" ? 2 : 1;
  if (static_cast<size_t>(n.input_size()) != arity) return false;
  for (const auto& in : n.input())
    if (in.empty() || c.analysis.at(in).dtype != DType::Float) return false;
  return true;
}

}  // namespace

PassResult fuseElementwise(Model& model) {
  PassResult result;
  std::vector<Rewrite> rewrites;
  {
    Graph graph(model.proto.graph());
    const ShapeAnalysis analysis = inferShapes(model, graph);
    PatternContext c(model, graph, analysis);
    std::set<size_t> taken;
    const auto& order = graph.topoOrder();
    std::vector<size_t> position(graph.nodeCount());  // each node's place in `order`
    for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      const size_t root = *it;
      const auto& rn = graph.node(root);
      if (taken.count(root) || analysis.nodeClass[root] != NodeClass::Tensor || !candidate(c, rn)) continue;
      std::set<size_t> group = {root};
      for (bool grew = true; grew;) {  // until no producer can join
        grew = false;
        for (size_t g : std::set<size_t>(group)) {
          for (const auto& in : graph.node(g).input()) {
            const int p = graph.producer(in);
            if (p < 0 || group.count(static_cast<size_t>(p)) || taken.count(static_cast<size_t>(p))) continue;
            const auto& pn = graph.node(static_cast<size_t>(p));
            if (analysis.nodeClass[static_cast<size_t>(p)] != NodeClass::Tensor || !candidate(c, pn)) continue;
            if (c.outputs.count(in) || !c.sameDims(in, rn.output(0))) continue;
            bool inside = true;
            for (size_t r : graph.consumers(in)) inside = inside && group.count(r);
            if (!inside) continue;
            group.insert(static_cast<size_t>(p));
            grew = true;
          }
        }
      }
      if (group.size() < 2) continue;
      taken.insert(group.begin(), group.end());
      // The program, in topological order: inputs x0.., temporaries t0.., literals.
      std::vector<size_t> nodes(group.begin(), group.end());
      std::sort(nodes.begin(), nodes.end(), [&](size_t a, size_t b) { return position[a] < position[b]; });
      std::map<std::string, std::string> operand;
      std::vector<std::string> inputs;
      std::string program;
      for (size_t i = 0; i < nodes.size(); ++i) {
        const auto& n = graph.node(nodes[i]);
        std::string args;
        for (const auto& in : n.input()) {
          if (!operand.count(in)) {
            const auto* k = constantOf(graph, in);
            const bool scalar = k && std::all_of(k->dims().begin(), k->dims().end(), [](int64_t d) { return d == 1; });
            if (scalar) {
              char lit[32];
              std::snprintf(lit, sizeof lit, "%.9g", readTensor(*k, model.baseDir).toDouble()[0]);
              operand[in] = lit;
            } else {
              operand[in] = "x" + std::to_string(inputs.size());
              inputs.push_back(in);
            }
          }
          args += (args.empty() ? "" : ",") + operand.at(in);
        }
        operand[n.output(0)] = "t" + std::to_string(i);
        program += (program.empty() ? "" : ";") + operand[n.output(0)] + "=" + opNames().at(n.op_type()) + "(" + args + ")";
      }
      if (inputs.empty() || inputs.size() > 8) {
        result.nearMisses.push_back("node '" + graph.nodeName(root) + "' (" + rn.op_type() +
                                    "): its elementwise group reads " + std::to_string(inputs.size()) +
                                    " tensors (1 to 8 fit a kernel)");
        continue;
      }
      Rewrite r;
      r.remove = nodes;
      std::sort(r.remove.begin(), r.remove.end());  // the root last: everything else feeds it
      r.fused = tlNode("Elementwise", rn.name(), inputs, rn.output(0));
      addAttr(r.fused, "program", program);
      rewrites.push_back(std::move(r));
    }
  }
  result.rewrites = static_cast<int>(rewrites.size());
  applyRewrites(model, std::move(rewrites));
  return result;
}

}  // namespace tl
