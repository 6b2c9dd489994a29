// swiglu: the gated MLP activation of Llama, Qwen2, Mistral and Phi-3 exports,
//   y = Mul(Mul(g, Sigmoid(g)), u)      (SiLU(g) times the up projection)
// becomes y = tl.SwiGLU(g, u). g and u must have the same shape (no broadcast), and the
// Sigmoid and the SiLU product must be read by the pattern alone.
#include "fuse/fuse.h"
#include "fuse/pattern.h"

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

}  // namespace

PassResult fuseSwiGlu(Model& model) { return runPattern(model, "Sigmoid", match); }

}  // namespace tl
