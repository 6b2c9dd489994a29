// rope-bshd: the exporter's Transpose(0,2,1,3) that turns a projection's [B, S, H, D] into
// the heads' [B, H, S, D] before the rotation, read by the tl.RoPE alone, is absorbed into
// the RoPE's reads: it takes the [B, S, H, D] tensor (x_bshd, x2_bshd, x3_bshd for q, k
// and v) and writes what it wrote before. At decode (S = 1) those Transposes are views; at
// prefill each was a copy kernel, three a layer.
//   q', K, V = tl.RoPE(Transpose(q), pos, f, Transpose(k), past_k, past_v, Transpose(v))
//     =>  q', K, V = tl.RoPE(q, pos, f, k, past_k, past_v, v) x_bshd x2_bshd x3_bshd
#include <algorithm>

#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"

namespace tl {
namespace {

std::string match(const PatternContext& c, size_t at, Rewrite& r) {
  const auto& rope = c.graph.node(at);
  r.fused = rope;
  for (auto [input, flag] : {std::pair{0, "x_bshd"}, {3, "x2_bshd"}, {6, "x3_bshd"}}) {
    if (input >= rope.input_size() || rope.input(input).empty() || findAttr(rope, flag)) continue;
    size_t t;
    const onnx::NodeProto* tr = c.producer(rope.input(input), "Transpose", &t);
    if (!tr || !hasPerm(*tr, {0, 2, 1, 3}) || !c.onlyReader(rope.input(input))) continue;
    r.remove.push_back(t);
    r.fused.set_input(input, tr->input(0));
    addAttr(r.fused, flag, int64_t{1});
  }
  if (r.remove.empty()) return "";  // nothing to absorb: no start
  std::sort(r.remove.begin(), r.remove.end());
  r.remove.push_back(at);  // the RoPE last: the fused node takes its place
  return "";
}

}  // namespace

PassResult foldRopeTransposes(Model& model) { return runPattern(model, "tl.RoPE", match); }

}  // namespace tl
