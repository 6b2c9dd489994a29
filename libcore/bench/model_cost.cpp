#include "bench/model_cost.h"

#include <map>
#include <set>

#include "cli/error.h"
#include "ops/op_table.h"
#include "tensor/tensor.h"

namespace tl {
namespace {

double protoBytes(const onnx::TensorProto& t) {
  double n = 1;
  for (auto d : t.dims()) n *= static_cast<double>(d);
  return n * dtypeBits(dtypeFromOnnx(t.data_type())) / 8;
}

// Constants read by tensor ops, with their size: initializers and Constant nodes.
std::map<std::string, double> deviceConstants(const Graph& graph, const ShapeAnalysis& analysis) {
  std::map<std::string, double> all;
  for (const auto& t : graph.proto().initializer()) all[t.name()] = protoBytes(t);
  for (size_t i = 0; i < graph.nodeCount(); ++i) {
    const auto& n = graph.node(i);
    if (n.op_type() == "Constant" && n.attribute_size() == 1 && n.attribute(0).has_t())
      all[n.output(0)] = protoBytes(n.attribute(0).t());
  }
  std::map<std::string, double> read;
  for (const auto& [name, bytes] : all)
    for (size_t c : graph.consumers(name))
      if (analysis.nodeClass[c] == NodeClass::Tensor) read[name] = bytes;
  return read;
}

double tensorBytes(const ShapeAnalysis& analysis, const std::string& name, const SymbolValues& binding) {
  const auto& t = analysis.at(name);
  return static_cast<double>(elementCount(evaluateDims(t.dims, binding))) * dtypeBits(t.dtype) / 8;
}

}  // namespace

double modelWeightBytes(const Graph& graph, const ShapeAnalysis& analysis) {
  double sum = 0;
  for (const auto& [name, bytes] : deviceConstants(graph, analysis)) sum += bytes;
  return sum;
}

RunCost runCost(const Graph& graph, const ShapeAnalysis& analysis, const SymbolValues& binding,
                const std::vector<CachePair>& caches) {
  RunCost cost;
  auto dims = [&](const std::string& t) { return evaluateDims(analysis.at(t).dims, binding); };
  for (const auto& [name, bytes] : deviceConstants(graph, analysis)) {
    // A table that only Gathers read (embeddings) costs the rows they gather.
    double gathered = 0;
    bool onlyGathered = true;
    for (size_t c : graph.consumers(name)) {
      const auto& n = graph.node(c);
      if (analysis.nodeClass[c] != NodeClass::Tensor) continue;
      if (n.op_type() == "Gather" && n.input(0) == name && n.input(1) != name) {
        gathered += tensorBytes(analysis, n.output(0), binding);
      } else {
        onlyGathered = false;
      }
    }
    cost.weightBytes += onlyGathered ? std::min(gathered, bytes) : bytes;
  }
  std::set<std::string> counted;
  for (size_t i = 0; i < graph.nodeCount(); ++i) {
    if (analysis.nodeClass[i] != NodeClass::Tensor) continue;
    cost.flops += opCost(CostNode{graph.node(i), dims, analysis.dtypeOf(), &counted}).flops;
  }
  for (const auto& c : caches) {
    const double scale = c.elementBytes > 0 ? c.elementBytes * 8 / dtypeBits(analysis.at(c.output).dtype) : 1.0;
    const double in = scale * tensorBytes(analysis, c.input, binding), out = scale * tensorBytes(analysis, c.output, binding);
    cost.cacheReadBytes += out;
    cost.cacheWrittenBytes += out - in;
  }
  return cost;
}

}  // namespace tl
