// transpose-matmul: a MatMul by a transposed 2-D matrix reads it through strides instead:
//   MatMul(a, Transpose(W, perm = [1, 0]))  =>  tl.MatMul(a, W) with transB = 1
// The dynamo exports of tied-embedding models (Gemma, GPT-2) write the lm_head this way:
// a copy of the whole [vocab, hidden] table every step, gone. The Transpose must be read
// by the MatMul alone.
#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"

namespace tl {
namespace {

std::string match(const PatternContext& c, size_t mm, Rewrite& r) {
  const auto& n = c.graph.node(mm);
  size_t iT;
  const onnx::NodeProto* t = n.input_size() == 2 ? c.producer(n.input(1), "Transpose", &iT) : nullptr;
  if (!t) return "";
  const auto* perm = findAttr(*t, "perm");
  const auto& w = c.dims(t->input(0));
  if (w.size() != 2) return "";  // batched (attention's k^T): the attention pass's business
  if (perm && (perm->ints_size() != 2 || perm->ints(0) != 1 || perm->ints(1) != 0)) return "the Transpose is no matrix transpose";
  if (c.analysis.at(t->input(0)).dtype != DType::Float || c.analysis.at(n.input(0)).dtype != DType::Float)
    return "it is not float32";
  if (c.dims(n.input(0)).empty() || !w[0].isConst()) return "the left side is a scalar or N is not constant";
  if (!c.onlyReader(t->output(0))) return "the Transpose has other readers";
  r.remove = {iT, mm};
  r.fused = tlNode("MatMul", n.name(), {n.input(0), t->input(0)}, n.output(0));
  addAttr(r.fused, "transB", int64_t{1});
  return "";
}

}  // namespace

PassResult foldTransposeIntoMatMul(Model& model) { return runPattern(model, "MatMul", match); }

}  // namespace tl
