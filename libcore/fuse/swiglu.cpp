// swiglu, geglu: the gated MLP activations. SwiGLU (Llama, Qwen2, Mistral, Phi-3),
//   y = Mul(Mul(g, Sigmoid(g)), u)      (SiLU(g) times the up projection)
// becomes y = tl.SwiGLU(g, u). g and u must have the same shape (no broadcast), and the
// Sigmoid and the SiLU product must be read by the pattern alone. GeGLU (Gemma):
//   y = Mul(Gelu(g), u), Gelu a tl.Gelu (the gelu pass's) or ONNX Gelu, either form,
// becomes y = tl.GeGLU(g, u) with the Gelu's `approximate`.
#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"

namespace tl {
namespace {

std::string match(const PatternContext& c, size_t sigmoid, Rewrite& r) {
  const auto& sg = c.graph.node(sigmoid);
  const std::string g = sg.input(0);
  size_t iSilu, iGate;
  const onnx::NodeProto* silu = c.onlyReader(sg.output(0), &iSilu);
  if (!isOp(silu, "Mul") || otherInput(*silu, sg.output(0)) != g) return "it is not multiplied by its own input alone";
  const onnx::NodeProto* gate = c.onlyReader(silu->output(0), &iGate);
  if (!isOp(gate, "Mul")) return "the SiLU is not multiplied alone (no gate)";
  const std::string u = otherInput(*gate, silu->output(0));
  if (u.empty()) return "the gate Mul does not multiply the SiLU by another tensor";
  const auto& gs = c.analysis.at(g);
  const auto& us = c.analysis.at(u);
  if (gs.dtype != DType::Float || us.dtype != DType::Float) return "g or u is not float32";
  if (!c.sameDims(g, u)) return "g and u differ in shape";
  r.remove = {sigmoid, iSilu, iGate};
  r.fused = tlNode("SwiGLU", gate->name(), {g, u}, gate->output(0));
  return "";
}

// Why the GELU at `gelu` (tl.Gelu or ONNX Gelu) does not start a GeGLU.
std::string matchGeGlu(const PatternContext& c, size_t gelu, Rewrite& r) {
  const auto& gn = c.graph.node(gelu);
  const std::string g = gn.input(0);
  size_t iGate;
  const onnx::NodeProto* gate = c.onlyReader(gn.output(0), &iGate);
  if (!isOp(gate, "Mul")) return "";  // a plain GELU (gpt2, ViT): nothing to gate
  const std::string u = otherInput(*gate, gn.output(0));
  if (u.empty()) return "the gate Mul does not multiply the GELU by another tensor";
  if (c.analysis.at(g).dtype != DType::Float || c.analysis.at(u).dtype != DType::Float) return "g or u is not float32";
  if (!c.sameDims(g, u)) return "g and u differ in shape";
  r.remove = {gelu, iGate};
  r.fused = tlNode("GeGLU", gate->name(), {g, u}, gate->output(0));
  addAttr(r.fused, "approximate", attrString(gn, "approximate").value_or("none"));
  return "";
}

}  // namespace

PassResult fuseSwiGlu(Model& model) { return runPattern(model, "Sigmoid", match); }

PassResult fuseGeGlu(Model& model) {
  PassResult r = runPattern(model, "tl.Gelu", matchGeGlu);
  absorb(r, runPattern(model, "Gelu", matchGeGlu));
  return r;
}

}  // namespace tl
