// tl-fuse's passes: graph rewrites into ops of the `tl` domain, each a small object with
// a name that proves its pattern on the graph (shapes through tl-shape's expressions,
// constants by value) and rewrites only what it proved. A pattern it cannot prove is
// left alone and, for -v, reported as a near miss naming the node and the reason.
//
// Passes so far (the rest of issue 9 comes pass by pass):
//   rmsnorm     Pow(x, 2) -> ReduceMean(last axis) -> Add(eps) -> Sqrt -> Reciprocal or
//               Div(1, .) -> Mul(x, .) [-> Cast to float] -> Mul(scale)  =>  tl.RMSNorm
//   rope        Slice halves of x -> Concat(Neg(second), first) -> Add(Mul(x, cos), Mul(., sin))
//               =>  tl.RoPE (rotate-half)
//   rope-pair   tl.RoPE(q, cos, sin), tl.RoPE(k, cos, sin)  =>  tl.RoPE(q, cos, sin, k) -> q', k'
//   swiglu      Mul(Mul(g, Sigmoid(g)), u)  =>  tl.SwiGLU
//   attention   MatMul(q, Transpose(k')) [-> Mul/Div scale] [-> c tanh(./c)] [-> Add mask] -> Softmax
//               [-> Cast] -> MatMul(., v') [-> Transpose(0,2,1,3)], k'/v' the caches or their
//               repeat_kv (Unsqueeze, Expand, Reshape)  =>  tl.Attention
//   causal-mask tl.Attention's mask Where(t <= s + T - S and key_mask[b, t] != 0, 0, -big), proven with the
//               index algebra  =>  causal = 1, key_mask input, mask_value
//   residual-norm  Add(a, b) [-> Cast] -> tl.RMSNorm  =>  tl.RMSNorm(a, scale, b) -> y, a + b
//   transpose-matmul  MatMul(a, Transpose(W)), W a matrix  =>  tl.MatMul(a, W), transB = 1
//   matmul-bias  Add(MatMul(a, W), b), b constant [N]  =>  tl.MatMul(a, W, b) (tl.QMatMul likewise)
//   split-matmul  Slices/Split of MatMul(a, W)'s last axis  =>  tl.MatMul(a, W) with split outputs
//   merge-matmul  MatMul(a, W_i) / tl.QMatMul(a, ..) sharing a  =>  one tl.MatMul / tl.QMatMul with
//               its columns split among the outputs (`split`)
//   gelu        0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) or 0.5 x (1 + erf(x / sqrt 2))  =>  tl.Gelu
//   geglu       Mul(tl.Gelu(g) or Gelu(g), u)  =>  tl.GeGLU
//   concat-pair Concat(a0, a1), Concat(b0, b1), one axis  =>  tl.Concat(a0, a1, b0, b1) -> both
//   rope-positions tl.RoPE(x, Cos(Concat(f, f)), Sin(..)), f = Transpose(MatMul(inv_freq, float(pos)))  =>
//               tl.RoPE(x, pos, inv_freq), positions = 1: the tables computed in the kernel
//   rope-bshd   tl.RoPE(Transpose(q [B,S,H,D], 0,2,1,3), ..)  =>  tl.RoPE(q, ..), x_bshd = 1 (k, v: x2_bshd,
//               x3_bshd): the prefill's head/sequence copies absorbed into the RoPE's reads
//   elementwise a DAG of float elementwise ops of one output shape  =>  tl.Elementwise (generated kernel)
//   no-ops      Identity, mask-less Dropout, same-type Cast, same-shape Expand/Reshape, identity
//               Transpose: readers read the input
//   fold-constants  a node whose inputs are all constants, evaluated exactly on the host  =>  an initializer
//   cse         identical nodes (op, inputs, attributes) computed once
//   dead-nodes  nodes whose outputs nothing reads, and initializers no node reads
//   merge-attention  tl.QMatMul reading a tl.Attention's output alone, through views  =>
//               merge_attention = 1: its decode GEMV may merge the attention's splits
#pragma once

#include <map>
#include <string>
#include <vector>

#include "onnx/model_io.h"

namespace tl {

struct PassResult {
  std::string pass;
  int rewrites = 0;                     // patterns rewritten (nodes removed, for dead-nodes; marked, for merge-attention)
  const char* counts = "rewritten";     // what `rewrites` counts, as the report says it
  std::vector<std::string> nearMisses;  // "node 'X': why it was left alone"
};

struct FusePass {
  std::string name, summary;
  PassResult (*run)(Model& model);
};

// Every pass, in the order a full run applies them.
const std::vector<FusePass>& fusePasses();

// Runs the named passes in order (all of them when `names` is empty). Throws
// tl::Error (bad input) naming an unknown pass before anything runs.
std::vector<PassResult> runFusePasses(Model& model, const std::vector<std::string>& names);

// Node count per operator ("tl.RMSNorm" for other domains), for --emit text.
std::map<std::string, int> opCounts(const onnx::GraphProto& graph);

// The passes, one file each (libcore/fuse/*.cpp).
PassResult fuseRmsNorm(Model& model);
PassResult fuseRope(Model& model);
PassResult pairRopes(Model& model);
PassResult fuseSwiGlu(Model& model);
PassResult fuseAttention(Model& model);
PassResult fuseCausalMask(Model& model);
PassResult fuseResidualNorm(Model& model);
PassResult foldTransposeIntoMatMul(Model& model);
PassResult fuseMatMulBias(Model& model);
PassResult splitMatMuls(Model& model);
PassResult mergeMatMuls(Model& model);
PassResult fuseMatMulGlu(Model& model);
PassResult fuseNormMatMul(Model& model);
PassResult fuseGelu(Model& model);
PassResult fuseGeGlu(Model& model);
PassResult pairConcats(Model& model);
PassResult fuseRopeCache(Model& model);
PassResult fuseRopePositions(Model& model);
PassResult foldRopeTransposes(Model& model);
PassResult fuseElementwise(Model& model);
PassResult removeNoOps(Model& model);
PassResult mergeSlices(Model& model);
PassResult foldConstants(Model& model);
// One Slice range equal to slicing [s1, e1) and then [s2, e2) of that (steps of 1,
// non-negative indices; ONNX clamps each range to the length it slices).
std::pair<int64_t, int64_t> composeSliceRanges(int64_t s1, int64_t e1, int64_t s2, int64_t e2);
PassResult eliminateCommonSubexpressions(Model& model);
PassResult removeDeadNodes(Model& model);
PassResult markAttentionMerges(Model& model);

}  // namespace tl
