// residual-norm: the residual Add before a norm joins the norm's kernel, as ONNX Runtime's
// SkipSimplifiedLayerNormalization does:
//   s = Add(a, b) [-> Cast to float ...];  y = tl.RMSNorm(s, scale)
// becomes y, s = tl.RMSNorm(a, scale, b): one pass over a and b writes the sum (the next
// residual) and the normalized row. a and b must have s's shape (no broadcast), the
// Casts must be read by the chain alone, and the scale must exist where the Add is,
// which is where the fused node goes.
#include "fuse/fuse.h"
#include "fuse/pattern.h"

namespace tl {
namespace {

std::string match(const PatternContext& c, size_t norm, Rewrite& r) {
  const auto& nn = c.graph.node(norm);
  if (nn.input_size() != 2 || nn.output_size() != 1) return "it already has a residual or a second output";
  const std::string s = nn.input(0);
  std::vector<size_t> chain = {norm};
  std::string t = s;
  int p = c.graph.producer(t);
  while (p >= 0 && isOp(&c.graph.node(static_cast<size_t>(p)), "Cast") &&
         c.analysis.at(c.graph.node(static_cast<size_t>(p)).input(0)).dtype == DType::Float) {
    chain.push_back(static_cast<size_t>(p));
    t = c.graph.node(static_cast<size_t>(p)).input(0);
    if (!c.onlyReader(t)) return "a Cast before it reads a tensor others read too";
    p = c.graph.producer(t);
  }
  if (p < 0 || !isOp(&c.graph.node(static_cast<size_t>(p)), "Add")) return "its input is no Add";
  const auto& add = c.graph.node(static_cast<size_t>(p));
  if (t != s && !c.onlyReader(t)) return "the Add's sum is read besides the Casts";
  if (add.input_size() != 2 || !c.sameDims(add.input(0), t) || !c.sameDims(add.input(1), t))
    return "the Add broadcasts";
  for (const auto& in : add.input())
    if (c.analysis.at(in).dtype != DType::Float) return "the Add is not float32";
  const int scale = c.graph.producer(nn.input(1));
  if (scale > p) return "the scale is computed after the Add";
  chain.push_back(static_cast<size_t>(p));
  r.remove = chain;  // the Add last: the fused node takes its place
  r.fused = nn;
  r.fused.set_name(nn.name() + "+residual");
  r.fused.set_input(0, add.input(0));
  r.fused.add_input(add.input(1));
  r.fused.add_output(s);
  return "";
}

}  // namespace

PassResult fuseResidualNorm(Model& model) { return runPattern(model, "tl.RMSNorm", match); }

}  // namespace tl
