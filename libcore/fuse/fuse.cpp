#include "fuse/fuse.h"

#include "cli/error.h"
#include "ops/op_table.h"

namespace tl {

const std::vector<FusePass>& fusePasses() {
  static const std::vector<FusePass> passes = {
      {"rmsnorm", "RMSNorm chains (Pow, ReduceMean, Add eps, Sqrt, reciprocal, Mul, Mul scale) -> tl.RMSNorm",
       fuseRmsNorm},
      {"rope", "rotate-half rotary embedding (Slice halves, Neg, Concat, Mul cos, Mul sin, Add) -> tl.RoPE", fuseRope},
      {"rope-pair", "tl.RoPEs sharing cos and sin (q and k) -> one tl.RoPE with two inputs and outputs", pairRopes},
      {"swiglu", "SiLU-gated MLP activation (Sigmoid, Mul by its input, Mul by up) -> tl.SwiGLU", fuseSwiGlu},
      {"gelu", "GELU's tanh (cube, 0.044715, sqrt(2/pi), Tanh) and erf (x / sqrt 2, Erf) forms, 1 +, 0.5 x -> tl.Gelu", fuseGelu},
      {"geglu", "GELU-gated MLP activation (tl.Gelu or Gelu, Mul by up) -> tl.GeGLU", fuseGeGlu},
      {"attention",
       "MatMul(q, k^T), scale, soft-cap, mask Add, Softmax, MatMul(p, v), with repeat_kv and an output Transpose -> "
       "tl.Attention",
       fuseAttention},
      {"causal-mask",
       "a tl.Attention's float mask proven causal and/or key padding (Where(C, 0, -big)) -> its causal attribute and "
       "key_mask input",
       fuseCausalMask},
      {"residual-norm", "the residual Add (and same-type Casts) before a tl.RMSNorm -> its residual input", fuseResidualNorm},
      {"transpose-matmul", "MatMul(a, Transpose(W)) of a matrix W -> tl.MatMul(a, W) reading W transposed", foldTransposeIntoMatMul},
      {"matmul-bias", "the bias Add after a MatMul by a constant (or a tl.QMatMul) -> its epilogue", fuseMatMulBias},
      {"split-matmul", "a projection read only by Slices/Split of its last axis -> one whose columns split among those outputs",
       splitMatMuls},
      {"merge-matmul",
       "MatMuls (float, or tl.QMatMul of one scheme) reading the same activation -> one whose columns split among "
       "their outputs",
       mergeMatMuls},
      {"matmul-glu", "tl.SwiGLU/tl.GeGLU of a projection's two halves -> the projection's GLU epilogue", fuseMatMulGlu},
      {"norm-matmul",
       "a tl.RMSNorm read by one projection -> its prologue; the norm's residual Add -> the epilogue of the projection "
       "writing its input",
       fuseNormMatMul},
      {"concat-pair", "two independent two-input Concats on one axis (a layer's k and v cache) -> one tl.Concat",
       pairConcats},
      {"rope-cache", "a tl.Concat of the k and v caches whose new k a q/k tl.RoPE wrote -> that RoPE, appending both",
       fuseRopeCache},
      {"rope-positions",
       "a tl.RoPE whose cos and sin tables come from the position ids (inv_freq x positions, Concat(f, f), Cos/Sin "
       "[x scale]) -> one that computes them from the ids itself",
       fuseRopePositions},
      {"rope-bshd",
       "the Transpose(0,2,1,3)s making a tl.RoPE's q, k or v [B, H, S, D] from the projections' [B, S, H, D] -> read "
       "through its strides (x_bshd, x2_bshd, x3_bshd): no copy kernels at prefill",
       foldRopeTransposes},
      {"elementwise", "a DAG of float unary/binary elementwise ops (one output shape) -> one tl.Elementwise kernel",
       fuseElementwise},
      {"no-ops", "Identity, Dropout without mask, same-type Cast, same-shape Expand/Reshape, identity Transpose, one-input "
                 "Concat -> "
                 "their readers read their input",
       removeNoOps},
      {"merge-slices", "Slice(Slice(x)) with constant parameters -> one Slice (other axes, or steps of 1 on one axis)",
       mergeSlices},
      {"fold-constants",
       "a node of constant inputs whose host evaluation is exact (integers, logic, casts, data movement) -> an "
       "initializer of its output",
       foldConstants},
      {"cse", "nodes of one op, inputs and attributes -> computed once", eliminateCommonSubexpressions},
      {"dead-nodes", "remove nodes whose outputs nothing reads, and unread initializers", removeDeadNodes},
      {"merge-attention",
       "a tl.QMatMul reading a tl.Attention's output alone (through views, no norm) -> merge_attention = 1: a one-row "
       "decode GEMV merges the attention's splits as it reads them, and the attention launches no combine",
       markAttentionMerges},
  };
  return passes;
}

std::vector<PassResult> runFusePasses(Model& model, const std::vector<std::string>& names) {
  std::vector<const FusePass*> todo;
  for (const auto& name : names) {
    const FusePass* found = nullptr;
    for (const auto& p : fusePasses())
      if (p.name == name) found = &p;
    if (!found) {
      std::string all;
      for (const auto& p : fusePasses()) all += (all.empty() ? "" : ", ") + p.name;
      throw Error("unknown pass '" + name + "' (passes: " + all + ")");
    }
    todo.push_back(found);
  }
  if (names.empty())
    for (const auto& p : fusePasses()) todo.push_back(&p);
  std::vector<PassResult> results;
  for (const FusePass* p : todo) {
    PassResult r = p->run(model);
    r.pass = p->name;
    results.push_back(std::move(r));
  }
  return results;
}

std::map<std::string, int> opCounts(const onnx::GraphProto& graph) {
  std::map<std::string, int> counts;
  for (const auto& n : graph.node()) {
    ++counts[opKey(n)];
  }
  return counts;
}

}  // namespace tl
