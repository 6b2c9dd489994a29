// fold-constants: a tensor-computing node whose every input is a constant (an
// initializer, a Constant node, a shape value tl-shape folded, or a node folded before it)
// becomes an initializer holding its output (MNN III.C), evaluated once here instead of on
// every run. Only ops whose host evaluation is exact fold (the op table's host column,
// ops/host_eval.h: integer arithmetic, comparisons, logic, casts and data movement,
// Transpose included), so the folded bytes are the ones a kernel would have written;
// float arithmetic stays, as its rounding is the kernels'. Views stay (they run nothing, and folding one would copy its
// constant), as do outputs over kMaxElements elements (a folded copy of a large weight
// would grow the model) and graph outputs.
#include <algorithm>
#include <unordered_map>

#include "cli/error.h"
#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "ops/host_eval.h"
#include "tensor/tensor.h"

namespace tl {
namespace {

constexpr int64_t kMaxElements = 1 << 20;

// The constant value of `t` when it has one small enough to fold with (nullptr otherwise).
const Tensor* constantValue(const Model& model, const Graph& graph, const ShapeAnalysis& a, const std::string& t,
                            std::unordered_map<std::string, Tensor>& known) {
  if (auto k = known.find(t); k != known.end()) return &k->second;
  const auto& info = a.at(t);
  if (info.value) {  // a shape value tl-shape folded: int64 once every element is a constant
    std::vector<int64_t> v;
    for (const auto& e : *info.value) {
      const auto c = a.symbols.resolve(e).constValue();
      if (!c) return nullptr;
      v.push_back(*c);
    }
    std::vector<int64_t> dims;
    for (const auto& d : info.dims) {
      const auto c = a.symbols.resolve(d).constValue();
      if (!c) return nullptr;
      dims.push_back(*c);
    }
    if (info.dtype != DType::Int64) return nullptr;
    return &(known[t] = makeTensor(t, DType::Int64, dims, v.data()));
  }
  const onnx::TensorProto* c = constantOf(graph, t);
  if (!c) return nullptr;
  int64_t n = 1;
  for (auto d : c->dims()) n *= d;
  if (n > kMaxElements) return nullptr;
  return &(known[t] = readTensor(*c, model.baseDir));
}

}  // namespace

PassResult foldConstants(Model& model) {
  PassResult result;
  std::unordered_map<std::string, Tensor> known;
  std::vector<size_t> folded;
  {
    Graph graph(model.proto.graph());
    const ShapeAnalysis a = inferShapes(model, graph);
    PatternContext c(model, graph, a);
    for (size_t i : graph.topoOrder()) {
      const auto& n = graph.node(i);
      if (a.nodeClass[i] != NodeClass::Tensor || isOp(&n, "Constant") || n.output_size() != 1 || c.outputs.count(n.output(0)))
        continue;
      if (!hostEvaluable(n, a.dtypeOf()) || isView(n, a.dtypeOf())) continue;  // a view runs nothing: folding it copies a constant
      std::vector<int64_t> dims;
      bool ok = true;
      for (const auto& d : a.at(n.output(0)).dims) {
        const auto v = a.symbols.resolve(d).constValue();
        ok = ok && v;
        if (v) dims.push_back(*v);
      }
      if (!ok || elementCount(dims) > kMaxElements) continue;
      std::vector<const Tensor*> in;
      for (const auto& name : n.input()) {
        const Tensor* v = name.empty() ? nullptr : constantValue(model, graph, a, name, known);
        ok = ok && (name.empty() || v);
        in.push_back(v);
      }
      if (!ok) continue;
      try {
        Tensor out = evaluateOnHost(n, in, dims, a.at(n.output(0)).dtype);
        out.name = n.output(0);
        known[n.output(0)] = std::move(out);
        folded.push_back(i);
      } catch (const Error& e) {
        result.nearMisses.push_back("node '" + graph.nodeName(i) + "' (" + n.op_type() + "): " + e.what());
      }
    }
  }  // the graph views the proto: done with it before the rewrite
  if (folded.empty()) return result;
  std::sort(folded.begin(), folded.end());  // found in topological order, removed in file order
  auto* g = model.proto.mutable_graph();
  for (size_t i : folded) {
    const Tensor& t = known.at(g->node(static_cast<int>(i)).output(0));
    auto* init = g->add_initializer();
    init->set_name(t.name);
    init->set_data_type(static_cast<int32_t>(t.dtype));
    for (auto d : t.dims) init->add_dims(d);
    init->set_raw_data(std::string(reinterpret_cast<const char*>(t.bytes.data()), t.bytes.size()));
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  size_t next = 0;
  for (int i = 0; i < g->node_size(); ++i) {
    if (next < folded.size() && static_cast<size_t>(i) == folded[next]) {
      ++next;
      continue;
    }
    *nodes.Add() = g->node(i);
  }
  g->mutable_node()->Swap(&nodes);
  result.rewrites = static_cast<int>(folded.size());
  return result;
}

}  // namespace tl
