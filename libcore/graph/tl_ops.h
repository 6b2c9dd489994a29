// The layouts of tl-domain nodes that several stages read (docs/ops.md): where a
// tl.MatMul's or tl.QMatMul's optional inputs sit, and what its `glu` means.
#pragma once

#include <string>

#include <onnx/onnx_pb.h>

namespace tl {

// tl.MatMul or tl.QMatMul.
bool isTlMatMul(const onnx::NodeProto& node);

// Their optional inputs follow the weight's own (A, W for tl.MatMul; A, codes, scales,
// offsets for tl.QMatMul): the bias [N], the residual (like the output), the RMSNorm
// scale [K] that A's rows are normalized with first. Returns the input's index.
enum class MatMulInput { Bias = 0, Residual = 1, NormScale = 2 };
int matmulInput(const onnx::NodeProto& node, MatMulInput which);
// The named optional input, or "" when absent.
std::string matmulOptional(const onnx::NodeProto& node, MatMulInput which);

// The `glu` attribute as kernels/common.cl's glu_gate kind: 0 none, 1 "silu", 2 "gelu",
// 3 "gelu_tanh". Throws tl::Error for another value.
int gluKind(const onnx::NodeProto& node);

// Whether the node does more than multiply and add a bias: a residual, a norm or a GLU
// (the passes that split, merge or re-bias projections leave those alone).
bool hasMatMulExtras(const onnx::NodeProto& node);

}  // namespace tl
