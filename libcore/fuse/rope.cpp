// rope: rotate-half rotary embedding, as Llama-family exports write it on q and k:
//   a = Slice(x, 0, D/2); b = Slice(x, D/2, end) on the last axis; r = Concat(Neg(b), a)
//   y = Add(Mul(x, cos), Mul(r, sin))
// becomes y = tl.RoPE(x, cos, sin). Partial rotary (Phi-3 rotates a Slice of each head
// and concatenates the rest) fuses too: x is then that Slice. The slices must be proven
// halves of a constant even D, and every intermediate read by the pattern alone. Then a
// partial rotary's Slices of x and the Concat that re-joins it become the tl.RoPE's
// rotary_dim: it rotates the first rotary_dim of each head and copies the rest.
#include <algorithm>
#include <map>

#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"

namespace tl {

PassResult absorbPartialRotary(Model& model);

namespace {

// [start, end) of a Slice over the last axis with step 1, when constant; else nullopt.
std::optional<std::pair<int64_t, int64_t>> lastAxisRange(const PatternContext& c, const onnx::NodeProto& s, int64_t rank) {
  auto in = [&](int i) { return s.input_size() > i ? s.input(i) : std::string(); };
  const auto starts = c.ints(in(1)), ends = c.ints(in(2));
  const auto axes = in(3).empty() ? std::optional<std::vector<int64_t>>(std::vector<int64_t>{0}) : c.ints(in(3));
  const auto steps = in(4).empty() ? std::optional<std::vector<int64_t>>(std::vector<int64_t>{1}) : c.ints(in(4));
  if (!starts || !ends || !axes || !steps || starts->size() != 1 || ends->size() != 1 || axes->size() != 1 ||
      steps->size() != 1)
    return std::nullopt;
  if ((*axes)[0] != -1 && (*axes)[0] != rank - 1) return std::nullopt;
  if ((*steps)[0] != 1) return std::nullopt;
  return std::make_pair((*starts)[0], (*ends)[0]);
}

// Why the Neg at `neg` is not the rotate-half of a RoPE (empty: it is, and `r` holds it).
std::string match(const PatternContext& c, size_t neg, Rewrite& r) {
  const auto& ng = c.graph.node(neg);
  size_t iB, iA, iCat, iMulSin, iAdd, iMulCos;
  const onnx::NodeProto* b = c.producer(ng.input(0), "Slice", &iB);
  if (!b) return "its input is not a Slice";
  const std::string x = b->input(0);
  const auto& xs = c.analysis.at(x);
  if (xs.dtype != DType::Float || xs.dims.empty() || !xs.dims.back().isConst())
    return "x is not float32 with a constant last dimension";
  const int64_t rank = static_cast<int64_t>(xs.dims.size()), D = *xs.dims.back().constValue();
  if (D % 2) return "x's last dimension is odd";
  const onnx::NodeProto* cat = c.onlyReader(ng.output(0), &iCat);
  if (!c.onlyReader(b->output(0))) return "the second half's Slice has other readers";
  if (!isOp(cat, "Concat") || cat->input_size() != 2 || cat->input(0) != ng.output(0))
    return "it is not the first input of a two-input Concat";
  const int64_t axis = attrInt(*cat, "axis").value_or(0);
  if (axis != -1 && axis != rank - 1) return "the Concat is not on the last axis";
  const onnx::NodeProto* a = c.producer(cat->input(1), "Slice", &iA);
  if (!a || a->input(0) != x || !c.onlyReader(a->output(0))) return "the Concat's second input is not a Slice of x alone";
  const auto ra = lastAxisRange(c, *a, rank), rb = lastAxisRange(c, *b, rank);
  if (!ra || !rb) return "the Slices are not constant step-1 ranges of the last axis";
  const int64_t h = D / 2;
  if (ra->first != 0 || ra->second != h || rb->first != h || rb->second < D)
    return "the Slices are not the halves [0, D/2) and [D/2, D)";
  const onnx::NodeProto* mulSin = c.onlyReader(cat->output(0), &iMulSin);
  if (!isOp(mulSin, "Mul")) return "the rotated x is not multiplied alone";
  const std::string sin = otherInput(*mulSin, cat->output(0));
  const onnx::NodeProto* add = c.onlyReader(mulSin->output(0), &iAdd);
  if (sin.empty() || !isOp(add, "Add")) return "the rotated product is not added alone";
  const onnx::NodeProto* mulCos = c.producer(otherInput(*add, mulSin->output(0)), "Mul", &iMulCos);
  if (!mulCos || !c.onlyReader(mulCos->output(0))) return "the Add's other input is not a Mul read by it alone";
  const std::string cos = otherInput(*mulCos, x);
  if (cos.empty()) return "the Add's other Mul does not multiply x";
  // cos and sin must broadcast to x without growing it.
  for (const auto& t : {add->output(0), mulSin->output(0), mulCos->output(0)})
    if (!c.sameDims(t, x)) return "cos or sin broadcasts x to another shape";
  for (const auto& t : {cos, sin})
    if (c.analysis.at(t).dtype != DType::Float) return "cos or sin is not float32";
  r.remove = {iA, iB, neg, iCat, iMulSin, iMulCos, iAdd};
  r.fused = tlNode("RoPE", add->name(), {x, cos, sin}, add->output(0));
  return "";
}

}  // namespace

PassResult fuseRope(Model& model) {
  PassResult r = runPattern(model, "Neg", match);
  if (r.rewrites == 0) return r;
  // The rotate-half's Shape of x is dead now; gone, x's Slice is read by the RoPE alone.
  removeDeadNodes(model);
  PassResult partial = absorbPartialRotary(model);  // counted with the RoPEs it extends
  r.nearMisses.insert(r.nearMisses.end(), partial.nearMisses.begin(), partial.nearMisses.end());
  return r;
}

}  // namespace tl

namespace tl {

// rope-pair: the tl.RoPEs that share cos and sin (q and k of a layer) become one node with
// two inputs and two outputs: one launch. The pair goes where the later one was, so the
// earlier one's readers must all come after it.
PassResult pairRopes(Model& model) {
  PassResult result;
  std::vector<Rewrite> rewrites;
  {
    Graph graph(model.proto.graph());
    std::map<std::pair<std::string, std::string>, std::vector<size_t>> byTables;
    for (size_t i = 0; i < graph.nodeCount(); ++i) {
      const auto& n = graph.node(i);
      if (isAnchor(n, "tl.RoPE") && n.input_size() == 3 && n.output_size() == 1)
        byTables[{n.input(1), n.input(2)}].push_back(i);
    }
    for (const auto& [tables, nodes] : byTables) {
      for (size_t j = 0; j + 1 < nodes.size(); j += 2) {
        const auto &a = graph.node(nodes[j]), &b = graph.node(nodes[j + 1]);
        if (!readOnlyAfter(graph, a.output(0), nodes[j + 1])) {
          result.nearMisses.push_back("node '" + graph.nodeName(nodes[j]) + "' (tl.RoPE): its output is read before '" +
                                      graph.nodeName(nodes[j + 1]) + "', the RoPE it would pair with");
          continue;
        }
        Rewrite r;
        r.remove = {nodes[j], nodes[j + 1]};
        r.fused = a;
        r.fused.set_name(a.name() + "+" + b.name());
        r.fused.add_input(b.input(0));
        r.fused.add_output(b.output(0));
        rewrites.push_back(std::move(r));
      }
    }
  }
  result.rewrites = static_cast<int>(rewrites.size());
  applyRewrites(model, std::move(rewrites));
  return result;
}

}  // namespace tl

namespace tl {
namespace {

// Why the tl.RoPE at `rope` is not partial rotary (empty: it is, and `r` holds it):
//   x_rot = Slice(X, 0, r); x_pass = Slice(X, r, D) on the last axis;
//   Y = Concat(tl.RoPE(x_rot, cos, sin), x_pass)   =>   Y = tl.RoPE(X, cos, sin), rotary_dim = r
std::string matchPartial(const PatternContext& c, size_t rope, Rewrite& r) {
  const auto& rn = c.graph.node(rope);
  if (rn.input_size() != 3 || rn.output_size() != 1 || findAttr(rn, "rotary_dim")) return "";
  size_t iRot, iPass, iCat;
  const onnx::NodeProto* rot = c.producer(rn.input(0), "Slice", &iRot);
  if (!rot) return "";  // a full rotary
  const std::string X = rot->input(0);
  const auto& xd = c.dims(X);
  if (xd.empty() || !xd.back().isConst()) return "the sliced tensor's last dimension is not constant";
  const int64_t rank = static_cast<int64_t>(xd.size()), D = *xd.back().constValue();
  const auto rr = lastAxisRange(c, *rot, rank);
  if (!rr || rr->first != 0 || rr->second > D || !c.onlyReader(rot->output(0)))
    return "x is not a leading Slice [0, r) of the last axis read by it alone";
  const int64_t R = rr->second;
  const onnx::NodeProto* cat = c.onlyReader(rn.output(0), &iCat);
  if (!isOp(cat, "Concat") || cat->input_size() != 2 || cat->input(0) != rn.output(0)) return "";  // not re-joined
  const int64_t axis = attrInt(*cat, "axis").value_or(0);
  if (axis != -1 && axis != rank - 1) return "the Concat after it is not on the last axis";
  const onnx::NodeProto* pass = c.producer(cat->input(1), "Slice", &iPass);
  const auto pr = pass ? lastAxisRange(c, *pass, rank) : std::nullopt;
  if (!pass || pass->input(0) != X || !pr || pr->first != R || pr->second < D || !c.onlyReader(pass->output(0)))
    return "the Concat's other input is not the rest [r, D) of the same tensor";
  r.remove = {iRot, iPass, rope, iCat};
  std::sort(r.remove.begin(), r.remove.end());
  r.fused = rn;
  r.fused.set_input(0, X);
  r.fused.set_output(0, cat->output(0));
  addAttr(r.fused, "rotary_dim", R);
  return "";
}

}  // namespace

// Phi-3's partial rotary: the Slices around a tl.RoPE and the Concat after it join it.
PassResult absorbPartialRotary(Model& model) { return runPattern(model, "tl.RoPE", matchPartial); }

}  // namespace tl
