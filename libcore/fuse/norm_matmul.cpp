// norm-matmul: an RMSNorm read by one projection becomes that projection's prologue (it
// normalizes the rows it reads anyway), and the residual Add the norm carried becomes the
// epilogue of the projection that wrote the norm's input:
//   x = (Q)MatMul(a, W1);  y, s = tl.RMSNorm(x, scale, r);  z = (Q)MatMul(y, W2)
//     =>  s = (Q)MatMul(a, W1, residual r);  z = (Q)MatMul(s, W2, norm scale)
// Without a residual only the second step applies. A plain MatMul by a constant float
// matrix becomes a tl.MatMul to take part. x must be read by the norm alone, and r be
// computed before the first projection, which stays where it is. Shapes of y (exports
// compute reshapes from them) read the norm's input instead, which has y's shape.
#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"
#include "graph/tl_ops.h"

namespace tl {
namespace {

// `node` as a tl.MatMul or tl.QMatMul, a plain MatMul by a constant float matrix becoming
// one; nullopt for anything else.
std::optional<onnx::NodeProto> asTlMatMul(const Graph& graph, const onnx::NodeProto& node) {
  if (isTlMatMul(node)) return node;
  if (!isOp(&node, "MatMul") || projectionWidth(graph, node) == 0) return std::nullopt;
  onnx::NodeProto n = node;
  n.set_domain("tl");
  return n;
}

void setOptional(onnx::NodeProto& n, MatMulInput which, const std::string& tensor) {
  const int slot = matmulInput(n, which);
  while (n.input_size() <= slot) n.add_input("");
  n.set_input(slot, tensor);
}

std::string match(const PatternContext& c, size_t norm, Rewrite& r) {
  const auto& nn = c.graph.node(norm);
  const std::string y = nn.output(0);
  if (c.outputs.count(y)) return "its output is a graph output";
  std::vector<size_t> readers, shapes;
  for (size_t i : c.graph.consumers(y)) (isOp(&c.graph.node(i), "Shape") ? shapes : readers).push_back(i);
  if (readers.size() != 1) return "its output is read by " + std::to_string(readers.size()) + " nodes besides Shapes";
  const size_t readerIndex = readers[0];
  auto reader = asTlMatMul(c.graph, c.graph.node(readerIndex));
  if (!reader || reader->input(0) != y) return "its reader is no projection of it";
  if (!matmulOptional(*reader, MatMulInput::NormScale).empty()) return "its reader already normalizes";
  std::string a = nn.input(0);
  if (nn.input_size() > 2 && !nn.input(2).empty()) {  // the residual sum moves to the epilogue of a producer
    std::string fail = "neither residual operand comes from a projection read by the norm alone";
    for (int side : {0, 2}) {
      const std::string x = nn.input(side), res = nn.input(2 - side);
      const int p = c.graph.producer(x);
      if (p < 0 || !c.onlyReader(x)) continue;
      auto producer = asTlMatMul(c.graph, c.graph.node(static_cast<size_t>(p)));
      if (!producer || projectionWidth(c.graph, *producer) == 0) continue;  // unsplit, no extras
      if (c.graph.producer(res) > p) {
        fail = "the residual is computed after the projection";
        continue;
      }
      a = nn.output_size() > 1 && !nn.output(1).empty() ? nn.output(1) : x;
      producer->set_name(producer->name() + "+residual");
      setOptional(*producer, MatMulInput::Residual, res);
      producer->set_output(0, a);
      r.edits.emplace_back(static_cast<size_t>(p), *producer);
      fail.clear();
      break;
    }
    if (!fail.empty()) return fail;
  }
  for (size_t sh : shapes) {
    r.edits.emplace_back(sh, c.graph.node(sh));
    r.edits.back().second.set_input(0, a);
  }
  r.remove = {norm, readerIndex};  // the reader last: the fused node takes its place
  r.fused = *reader;
  r.fused.set_name(reader->name() + "+norm");
  r.fused.set_input(0, a);
  setOptional(r.fused, MatMulInput::NormScale, nn.input(1));
  addAttr(r.fused, "norm_epsilon", attrFloat(nn, "epsilon").value_or(1e-5f));
  return "";
}

}  // namespace

PassResult fuseNormMatMul(Model& model) { return runPattern(model, "tl.RMSNorm", match); }

}  // namespace tl
