// merge-matmul: projections that read the same activation (q/k/v; gate/up) become one
// MatMul whose columns are split among their outputs, so one kernel reads the
// activation once and writes every output:
//   MatMul(a, W_i), W_i constant float [K, N_i]        =>  tl.MatMul(a, [W_0 | W_1 | ..]) split N_i
//   tl.QMatMul(a, qweight_i, qscale_i, qoffset_i), one scheme, group and K
//                                                      =>  tl.QMatMul(a, rows of each stacked) split N_i
// Biases (matmul-bias's epilogues) are stacked too, zeros for a member without one.
// At most three merge (the kernels' outputs); the merged node takes the first one's place,
// where a is already computed. The old weights are left for dead-nodes.
#include <map>
#include <optional>

#include "cli/error.h"
#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"
#include "graph/tl_ops.h"
#include "tensor/tensor.h"

namespace tl {
namespace {

constexpr size_t kMaxOutputs = 3;

// `rows` of each tensor, one after another: [sum rows, width] (a weight's columns are rows
// here when `interleave` is false; for a float [K, N_i] weight, row k of each in turn).
onnx::TensorProto stack(const std::vector<Tensor>& parts, const std::string& name, bool interleave) {
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(static_cast<int32_t>(parts[0].dtype));  // DType values are ONNX's
  std::string bytes;
  if (interleave) {  // [K, N_i] -> [K, sum N_i]
    const int64_t K = parts[0].dims[0];
    int64_t N = 0;
    for (const auto& p : parts) N += p.dims[1];
    for (int64_t k = 0; k < K; ++k)
      for (const auto& p : parts) {
        const size_t row = p.bytes.size() / static_cast<size_t>(K);
        bytes.append(reinterpret_cast<const char*>(p.bytes.data()) + k * row, row);
      }
    t.add_dims(K);
    t.add_dims(N);
  } else {  // [N_i, w] -> [sum N_i, w]
    int64_t rows = 0;
    for (const auto& p : parts) {
      bytes.append(reinterpret_cast<const char*>(p.bytes.data()), p.bytes.size());
      rows += p.dims[0];
    }
    t.add_dims(rows);
    t.add_dims(parts[0].dims[1]);
  }
  t.set_raw_data(std::move(bytes));
  return t;
}

std::string freshName(const Graph& graph, const std::string& base, std::set<std::string>& taken) {
  std::string name = base;
  for (int i = 1; graph.initializer(name) || graph.producer(name) >= 0 || taken.count(name); ++i)
    name = base + "_" + std::to_string(i);
  taken.insert(name);
  return name;
}

// What merges with what: the activation, and for QMatMul everything its codes depend on.
std::string mergeKey(const Graph& graph, const onnx::NodeProto& n) {
  auto constant = [&](int i) { return n.input_size() > i && constantOf(graph, n.input(i)); };
  if (n.output_size() != 1 || findAttr(n, "split") || findAttr(n, "transB") || hasMatMulExtras(n)) return "";
  const bool tlMatMul = n.domain() == "tl" && n.op_type() == "MatMul" && (n.input_size() == 2 || constant(2));
  if ((isOp(&n, "MatMul") && n.input_size() == 2) || tlMatMul) {
    const auto* w = constant(1) ? constantOf(graph, n.input(1)) : nullptr;
    if (w && w->dims_size() == 2 && w->data_type() == onnx::TensorProto::FLOAT) return n.input(0) + "\nfloat";
  }
  if (n.domain() == "tl" && n.op_type() == "QMatMul" && constant(1) && constant(2) && constant(3) &&
      (n.input_size() == 4 || constant(4)))
    return n.input(0) + "\n" + attrString(n, "scheme").value_or("") + "/" +
           std::to_string(attrInt(n, "group").value_or(0)) + "/" + std::to_string(attrInt(n, "K").value_or(0));
  return "";
}

// The members' biases (tl.MatMul input 2, tl.QMatMul input 4) side by side, zeros for
// members without one; nothing when none has one.
std::optional<onnx::TensorProto> stackBiases(const Graph& graph, const Model& model, const std::vector<size_t>& part,
                                             int input, const std::vector<int64_t>& widths, const std::string& name) {
  std::string bytes;
  bool any = false;
  for (size_t j = 0; j < part.size(); ++j) {
    const auto& n = graph.node(part[j]);
    if (n.input_size() > input && !n.input(input).empty()) {
      any = true;
      const Tensor b = readTensor(*constantOf(graph, n.input(input)), model.baseDir);
      bytes.append(reinterpret_cast<const char*>(b.bytes.data()), b.bytes.size());
    } else {
      bytes.append(static_cast<size_t>(widths[j]) * 4, '\0');
    }
  }
  if (!any) return std::nullopt;
  onnx::TensorProto t;
  t.set_name(name);
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(static_cast<int64_t>(bytes.size() / 4));
  t.set_raw_data(std::move(bytes));
  return t;
}

}  // namespace

PassResult mergeMatMuls(Model& model) {
  PassResult result;
  std::vector<Rewrite> rewrites;
  std::vector<onnx::TensorProto> weights;
  {
    Graph graph(model.proto.graph());
    std::map<std::string, std::vector<size_t>> groups;
    std::vector<std::string> keys;  // in graph order, so merges are reproducible
    for (size_t i = 0; i < graph.nodeCount(); ++i) {
      const std::string key = mergeKey(graph, graph.node(i));
      if (key.empty()) continue;
      if (groups[key].empty()) keys.push_back(key);
      groups[key].push_back(i);
    }
    std::set<std::string> taken;
    for (const auto& key : keys) {
      const auto& members = groups[key];
      // Chunks of at most three, as even as possible (4 -> 2 + 2).
      const size_t chunks = (members.size() + kMaxOutputs - 1) / kMaxOutputs;
      for (size_t c = 0, at = 0; c < chunks && members.size() > 1; ++c) {
        const size_t size = (members.size() - at) / (chunks - c);
        std::vector<size_t> part(members.begin() + static_cast<long>(at), members.begin() + static_cast<long>(at + size));
        at += size;
        if (part.size() < 2) continue;
        const auto& first = graph.node(part[0]);
        const bool quantized = first.op_type() == "QMatMul";
        Rewrite r;
        r.fused.set_domain("tl");
        r.fused.set_op_type(quantized ? "QMatMul" : "MatMul");
        r.fused.set_name(first.name() + "/tl.merged");
        r.fused.add_input(first.input(0));
        const int inputs = quantized ? 3 : 1;
        for (int k = 1; k <= inputs; ++k) {
          std::vector<Tensor> parts;
          for (size_t i : part) parts.push_back(readTensor(*constantOf(graph, graph.node(i).input(k)), model.baseDir));
          const std::string name = freshName(graph, first.input(k) + ".merged", taken);
          weights.push_back(stack(parts, name, !quantized));
          r.fused.add_input(name);
        }
        int64_t N = 0;
        std::vector<int64_t> widths;
        for (size_t i : part) {
          const auto& n = graph.node(i);
          r.fused.add_output(n.output(0));
          const int64_t width =
              quantized ? attrInt(n, "N").value_or(0) : constantOf(graph, n.input(1))->dims(1);
          widths.push_back(width);
          N += width;
        }
        addAttr(r.fused, "split", widths);
        const int biasInput = quantized ? 4 : 2;
        if (auto b = stackBiases(graph, model, part, biasInput, widths, freshName(graph, first.output(0) + ".bias", taken))) {
          r.fused.add_input(b->name());
          weights.push_back(std::move(*b));
        }
        if (quantized) {
          for (const auto& a : first.attribute()) *r.fused.add_attribute() = a;
          for (auto& a : *r.fused.mutable_attribute())
            if (a.name() == "N") a.set_i(N);
        }
        r.remove.assign(part.rbegin(), part.rend());  // the first member last: the merged node goes there
        rewrites.push_back(std::move(r));
      }
    }
  }  // the graph views the proto: done with it before the rewrite
  result.rewrites = static_cast<int>(rewrites.size());
  applyRewrites(model, std::move(rewrites));
  for (auto& w : weights) *model.proto.mutable_graph()->add_initializer() = std::move(w);
  return result;
}

}  // namespace tl
