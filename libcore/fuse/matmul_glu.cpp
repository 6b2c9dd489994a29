// matmul-glu: a gated unit reading the two halves of one projection becomes that
// projection's epilogue, so the gate and up columns never reach memory:
//   g, u = (Q)MatMul(a, [W_gate | W_up]) split (I, I);  y = tl.SwiGLU(g, u)
//     =>  y = (Q)MatMul(a, [W_gate | W_up]) glu "silu"
// (tl.GeGLU: "gelu", or "gelu_tanh" for its tanh form). merge-matmul and split-matmul
// write such projections. g must be the first half, and both halves read by the unit alone.
#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"
#include "graph/tl_ops.h"

namespace tl {
namespace {

std::string match(const PatternContext& c, size_t unit, Rewrite& r) {
  const auto& gn = c.graph.node(unit);
  const int p = c.graph.producer(gn.input(0));
  if (p < 0 || !isTlMatMul(c.graph.node(static_cast<size_t>(p)))) return "";  // no projection: nothing to try
  const auto& mm = c.graph.node(static_cast<size_t>(p));
  const auto split = attrInts(mm, "split");
  if (!split || split->size() != 2 || (*split)[0] != (*split)[1] || mm.output_size() != 2)
    return "its gate comes from a MatMul not split in two equal halves";
  if (mm.output(0) != gn.input(0) || mm.output(1) != gn.input(1)) return "the gate is not the MatMul's first half";
  if (hasMatMulExtras(mm)) return "the MatMul already has a residual, norm or GLU";
  if (!c.onlyReader(gn.input(0)) || !c.onlyReader(gn.input(1))) return "a half is read besides the gated unit";
  r.remove = {static_cast<size_t>(p), unit};  // the unit last: the fused node takes its place
  r.fused = mm;
  r.fused.set_name(mm.name() + "+glu");
  r.fused.clear_output();
  r.fused.add_output(gn.output(0));
  auto* attrs = r.fused.mutable_attribute();
  for (int i = attrs->size(); i-- > 0;)
    if (attrs->Get(i).name() == "split") attrs->DeleteSubrange(i, 1);
  const bool swi = gn.op_type() == "SwiGLU";
  addAttr(r.fused, "glu", std::string(swi ? "silu" : attrString(gn, "approximate").value_or("none") == "tanh" ? "gelu_tanh" : "gelu"));
  return "";
}

}  // namespace

PassResult fuseMatMulGlu(Model& model) {
  PassResult r = runPattern(model, "tl.SwiGLU", match);
  absorb(r, runPattern(model, "tl.GeGLU", match));
  return r;
}

}  // namespace tl
