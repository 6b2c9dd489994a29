// rmsnorm: the chain every exporter writes for RMSNorm (TorchScript and dynamo alike,
// Llama, Qwen2, Mistral, Phi-3, Gemma's (1 + w) scale):
//   x2 = Pow(x, 2); m = ReduceMean(x2, last axis, keepdims); v = Add(m, eps); s = Sqrt(v)
//   r = Reciprocal(s) | Div(1, s); n = Mul(x, r) [-> Cast to float]; y = Mul(n, scale)
// becomes y = tl.RMSNorm(x, scale, epsilon). Every intermediate must be read by the
// chain alone, the constants must have the values named, and scale must be [H].
#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"

namespace tl {
namespace {

// Why the ReduceMean at `mean` does not end an RMSNorm chain (empty: it does, and `r` holds it).
std::string match(const PatternContext& c, size_t mean, Rewrite& r) {
  const auto& red = c.graph.node(mean);
  size_t iPow, iAdd, iSqrt, iInv, iMul, iNext;
  const onnx::NodeProto* pow = c.producer(red.input(0), "Pow", &iPow);
  if (!pow) return "its input is not a Pow";
  if (c.scalar(pow->input(1)) != 2.0) return "the Pow's exponent is not the constant 2";
  const std::string x = pow->input(0);
  const auto& xs = c.analysis.at(x);
  if (xs.dtype != DType::Float || xs.dims.empty()) return "x is not a float32 tensor of rank >= 1";
  const int64_t rank = static_cast<int64_t>(xs.dims.size());
  std::vector<int64_t> axes = attrInts(red, "axes").value_or(std::vector<int64_t>{});
  if (red.input_size() > 1 && !red.input(1).empty()) {
    auto v = c.ints(red.input(1));
    if (!v) return "its axes are not constant";
    axes = *v;
  }
  if (axes.size() != 1 || (axes[0] != -1 && axes[0] != rank - 1)) return "it does not reduce the last axis alone";
  if (attrInt(red, "keepdims").value_or(1) != 1) return "keepdims is 0";
  if (!c.onlyReader(pow->output(0))) return "the Pow's output has other readers";
  const onnx::NodeProto* add = c.onlyReader(red.output(0), &iAdd);
  if (!isOp(add, "Add")) return "its output goes to more than an Add";
  const auto eps = c.scalar(otherInput(*add, red.output(0)));
  if (!eps || !(*eps >= 0)) return "the Add's eps is not a non-negative constant";
  const onnx::NodeProto* sq = c.onlyReader(add->output(0), &iSqrt);
  if (!isOp(sq, "Sqrt")) return "the Add is not followed by a Sqrt alone";
  const onnx::NodeProto* inv = c.onlyReader(sq->output(0), &iInv);
  if (!(isOp(inv, "Reciprocal") || (isOp(inv, "Div") && inv->input(1) == sq->output(0) && c.scalar(inv->input(0)) == 1.0)))
    return "the Sqrt is not followed by Reciprocal or Div(1, .) alone";
  const onnx::NodeProto* mul = c.onlyReader(inv->output(0), &iMul);
  if (!isOp(mul, "Mul") || otherInput(*mul, inv->output(0)) != x) return "the reciprocal is not multiplied by x alone";
  std::string normed = mul->output(0);
  r.remove = {iPow, mean, iAdd, iSqrt, iInv, iMul};
  const onnx::NodeProto* next = c.onlyReader(normed, &iNext);
  if (isOp(next, "Cast") && attrInt(*next, "to").value_or(0) == onnx::TensorProto::FLOAT) {
    r.remove.push_back(iNext);
    normed = next->output(0);
    next = c.onlyReader(normed, &iNext);
  }
  if (!isOp(next, "Mul")) return "the normalized x is not scaled by a Mul alone";
  const std::string scale = otherInput(*next, normed);
  if (scale.empty()) return "the scale Mul does not multiply the normalized x by another tensor";
  const auto& s = c.analysis.at(scale);
  if (s.dtype != DType::Float || s.dims.size() != 1 || !c.same(s.dims[0], xs.dims.back()))
    return "the scale is not a float32 [" + xs.dims.back().str() + "]";
  r.remove.push_back(iNext);
  r.fused = tlNode("RMSNorm", next->name(), {x, scale}, next->output(0));
  addAttr(r.fused, "epsilon", static_cast<float>(*eps));
  return "";
}

}  // namespace

PassResult fuseRmsNorm(Model& model) { return runPattern(model, "ReduceMean", match); }

}  // namespace tl
