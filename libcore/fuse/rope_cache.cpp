// rope-cache: the k and v cache Concats (concat-pair's tl.Concat) join the RoPE of q and k
// (rope-pair's tl.RoPE) that wrote their new k, so a decoder layer's rotation and cache
// append are one launch:
//   q', k' = tl.RoPE(q, cos, sin, k);  K, V = tl.Concat(past_k, k', past_v, v) on axis a
//     =>  q', K, V = tl.RoPE(q, cos, sin, k, past_k, past_v, v) cache_axis a
// k' must be read by the Concat alone, and q' only after it (the fused node takes the
// Concat's place). Either pair of the Concat may hold k'.
#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"

namespace tl {
namespace {

std::string match(const PatternContext& c, size_t concat, Rewrite& r) {
  const auto& cn = c.graph.node(concat);
  if (cn.input_size() != 4 || cn.output_size() != 2) return "";
  for (int pair : {0, 1}) {
    const std::string fresh = cn.input(2 * pair + 1);
    const int p = c.graph.producer(fresh);
    if (p < 0 || !isAnchor(c.graph.node(static_cast<size_t>(p)), "tl.RoPE")) continue;
    const auto& rope = c.graph.node(static_cast<size_t>(p));
    if (rope.input_size() != 4 || rope.output_size() != 2 || rope.output(1) != fresh || findAttr(rope, "cache_axis"))
      return "the new k comes from a RoPE that is not a q/k pair";
    if (!c.onlyReader(fresh)) return "the rotated k is read besides the Concat";
    if (!readOnlyAfter(c.graph, rope.output(0), concat)) return "the rotated q is read before the Concat";
    const int64_t rank = static_cast<int64_t>(c.dims(fresh).size());
    int64_t axis = attrInt(cn, "axis").value_or(0);
    if (axis < 0) axis += rank;
    if (axis + 1 >= rank) return "the cache grows along the head's last axis";
    r.remove = {static_cast<size_t>(p), concat};  // the Concat last: the fused node takes its place
    r.fused = rope;
    r.fused.set_name(rope.name() + "+cache");
    for (const auto& in : {cn.input(2 * pair), cn.input(2 * (1 - pair)), cn.input(2 * (1 - pair) + 1)}) r.fused.add_input(in);
    r.fused.set_output(1, cn.output(pair));
    r.fused.add_output(cn.output(1 - pair));
    addAttr(r.fused, "cache_axis", axis);
    return "";
  }
  return "no pair's new entries come from a tl.RoPE";
}

}  // namespace

PassResult fuseRopeCache(Model& model) { return runPattern(model, "tl.Concat", match); }

}  // namespace tl
