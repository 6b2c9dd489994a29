#include "graph/tl_ops.h"

#include "cli/error.h"
#include "graph/attributes.h"

namespace tl {

bool isTlMatMul(const onnx::NodeProto& node) {
  return node.domain() == "tl" && (node.op_type() == "MatMul" || node.op_type() == "QMatMul");
}

int matmulInput(const onnx::NodeProto& node, MatMulInput which) {
  return (node.op_type() == "QMatMul" ? 4 : 2) + static_cast<int>(which);
}

std::string matmulOptional(const onnx::NodeProto& node, MatMulInput which) {
  const int i = matmulInput(node, which);
  return i < node.input_size() ? node.input(i) : std::string();
}

int gluKind(const onnx::NodeProto& node) {
  const std::string glu = attrString(node, "glu").value_or("");
  if (glu.empty()) return 0;
  if (glu == "silu") return 1;
  if (glu == "gelu") return 2;
  if (glu == "gelu_tanh") return 3;
  throw Error("node '" + node.name() + "': glu '" + glu + "' is none of silu, gelu, gelu_tanh", ExitCode::BadInput);
}

bool hasMatMulExtras(const onnx::NodeProto& node) {
  return !matmulOptional(node, MatMulInput::Residual).empty() || !matmulOptional(node, MatMulInput::NormScale).empty() ||
         findAttr(node, "glu");
}

}  // namespace tl
