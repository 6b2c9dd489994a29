// causal-mask: a tl.Attention's float mask that is provably `Where(C, 0, m)` with m a
// large negative constant (-inf, or the float minimum exporters use) and C a conjunction of
//   key t <= query row s + (T - S)        (causal: row s sits at position T - S + s), and
//   key_mask[b, t] != 0                   (padding: a graph input [B or 1, T])
// becomes attributes `causal` and `mask_value` and the input `key_mask` (docs/ops.md):
// the kernel tests both per score and the exporter's mask chain (Range, comparisons, the
// padding gather, a [B, 1, S, T] float tensor rebuilt every step) is no longer run or read.
// The mask is read with the index algebra (fuse/index_algebra.h), for every value of the
// symbols; conditions that hold for every index (t >= 0) are dropped; any other condition,
// or a mask of another form, is a near miss that leaves the float mask in place.
#include <cmath>

#include "fuse/fuse.h"
#include "fuse/index_algebra.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"

namespace tl {
namespace {

constexpr int kB = 0, kS = 2, kT = 3;  // the score variables: [B, H, S, T]

struct MaskForm {
  bool causal = false;
  std::string keyMask;
};

// Adds the conditions of `t` (negated when `negate`) to `form`; says why not ("" if all are read).
std::string conditions(const IndexAlgebra& alg, const IndexTermPtr& t, bool negate, const std::vector<SymExpr>& scores,
                       MaskForm& form) {
  switch (t->kind) {
    case IndexKind::Bool:
      return t->truth != negate ? "" : "the mask hides every key";
    case IndexKind::Not:
      return conditions(alg, t->args[0], !negate, scores, form);
    case IndexKind::And:
    case IndexKind::Or:
      if ((t->kind == IndexKind::Or) != negate) return "the mask keeps a key when either of two conditions holds: " + str(t);
      for (const auto& a : t->args)
        if (std::string why = conditions(alg, a, negate, scores, form); !why.empty()) return why;
      return "";
    case IndexKind::Le: {
      Affine a = t->a;  // a <= 0, or when negated a >= 1: 1 - a <= 0
      if (negate) {
        for (auto& [v, c] : a.coef) c = -c;
        a.constant = SymExpr(1) - a.constant;
      }
      if (alg.alwaysNonPositive(a, scores)) return "";
      // t - s - (T - S) <= 0
      const bool causal = a.coef.size() == 2 && a.coef.count(kT) && a.coef.count(kS) &&
                          alg.resolve(a.coef.at(kT)) == SymExpr(1) && alg.resolve(a.coef.at(kS)) == SymExpr(-1) &&
                          alg.resolve(a.constant) == alg.resolve(scores[kS] - scores[kT]);
      if (!causal) return "the mask tests " + str(t) + ", which is not causal";
      form.causal = true;
      return "";
    }
    case IndexKind::NonZero:
    case IndexKind::Load: {
      const IndexTermPtr load = t->kind == IndexKind::NonZero ? t->args[0] : t;
      if (negate || load->kind != IndexKind::Load) return "the mask tests " + str(t);
      const auto& idx = load->idx;
      auto isVar = [&](const Affine& a, int v) {
        return a.coef.size() == 1 && a.coef.count(v) && alg.resolve(a.coef.at(v)) == SymExpr(1) && alg.resolve(a.constant) == SymExpr(0);
      };
      const bool batch = idx.size() == 2 && (isVar(idx[0], kB) || (!idx[0].hasVars() && alg.resolve(idx[0].constant) == SymExpr(0)));
      if (!batch || !isVar(idx[1], kT)) return "the mask reads input '" + load->input + "' at " + str(load) + ", not at [b, key]";
      if (!form.keyMask.empty() && form.keyMask != load->input) return "the mask reads two key masks";
      form.keyMask = load->input;
      return "";
    }
    default:
      return "the mask's condition " + str(t) + " is not read here";
  }
}

std::string match(const PatternContext& c, size_t i, Rewrite& r) {
  const auto& n = c.graph.node(i);
  if (n.input_size() < 4 || n.input(3).empty()) return "";  // no float mask
  IndexAlgebra alg(c);
  auto dims = [&](size_t k, const char* swapped) {
    auto d = c.dims(n.input(static_cast<int>(k)));
    if (d.size() == 4 && attrInt(n, swapped).value_or(0)) std::swap(d[1], d[2]);
    for (auto& e : d) e = alg.resolve(e);
    return d;
  };
  const auto q = dims(0, "q_bshd"), k = dims(1, "k_bthd");
  if (q.size() != 4 || k.size() != 4) return "q or k is not of rank 4";
  const std::vector<SymExpr> scores = {q[0], q[1], q[2], k[2]};
  std::string why;
  auto mask = alg.value(n.input(3), &why);
  if (!mask) return "the mask is not read: " + why;
  if (mask->dims.size() > 4) return "the mask has rank " + std::to_string(mask->dims.size());
  std::vector<std::optional<Affine>> map(mask->dims.size());
  for (size_t a = 0; a < mask->dims.size(); ++a) {
    const size_t s = a + 4 - mask->dims.size();
    if (mask->dims[a] == SymExpr(1)) continue;
    if (mask->dims[a] != scores[s]) return "the mask does not broadcast to the scores";
    Affine v;
    v.coef[static_cast<int>(s)] = SymExpr(1);
    map[a] = v;
  }
  IndexTermPtr t = alg.substitute(mask->term, map, scores, &why);
  if (!t) return "the mask is not read: " + why;
  if (t->kind != IndexKind::Where || t->args[1]->kind != IndexKind::Real || t->args[2]->kind != IndexKind::Real)
    return "the mask is not Where(condition, constant, constant): " + str(t);
  const double x = t->args[1]->real, y = t->args[2]->real;
  const bool keepWhenTrue = x == 0 && y <= -1e30, keepWhenFalse = y == 0 && x <= -1e30;
  if (!keepWhenTrue && !keepWhenFalse) return "the mask's values are not 0 and a large negative constant";
  MaskForm form;
  if (std::string w = conditions(alg, t->args[0], keepWhenFalse, scores, form); !w.empty()) return w;
  if (!form.keyMask.empty()) {
    const auto& km = c.dims(form.keyMask);
    const DType kt = c.analysis.at(form.keyMask).dtype;
    if (kt != DType::Int64 && kt != DType::Int32 && kt != DType::Bool && kt != DType::UInt8)
      return "the key mask '" + form.keyMask + "' is of dtype " + dtypeName(kt);
    if (km.size() != 2 || alg.resolve(km[1]) != scores[kT]) return "the key mask is not [B, T]";
  }
  onnx::NodeProto a = n;
  a.set_input(3, "");
  if (!form.keyMask.empty()) {
    while (a.input_size() < 5) a.add_input("");
    a.set_input(4, form.keyMask);
  }
  while (a.input_size() > 3 && a.input(a.input_size() - 1).empty()) a.mutable_input()->RemoveLast();
  if (form.causal) addAttr(a, "causal", int64_t{1});
  addAttr(a, "mask_value", static_cast<float>(keepWhenTrue ? y : x));
  r.remove = {i};
  r.fused = a;
  return "";
}

}  // namespace

PassResult fuseCausalMask(Model& model) { return runPattern(model, "tl.Attention", match); }

}  // namespace tl
