// attention: scaled dot-product attention as transformers' eager path exports it,
//   s = MatMul(q, Transpose(k', perm swapping the last two axes))   (q and k^T each possibly
//       multiplied by constants first: SDPA's decomposition scales both by sqrt(scale))
//   [s = Mul or Div by constants (the scale)]  [s = c * Tanh(s / c) (soft-capping)]
//   [s = Add(s, mask)]   p = Softmax(s, last axis)   [Cast to float ...]   o = MatMul(p, v')
// where k' and v' are the cache tensors k, v [B, Hkv, T, D] themselves, or their
// repeat_kv for grouped-query attention: a view adding an axis of 1 after the heads
// ([B, Hkv, 1, T, D]), Expand to n copies, Reshape to [B, Hkv*n, T, D]. It becomes
// o = tl.Attention(q, k, v[, mask]) reading k and v once per kv head. Transposes between
// the heads and the sequence are absorbed into the kernel's strides: one that alone reads
// o (out_bshd: it writes [B, S, H, Dv]), and those that alone make q, k or v from the
// projections' [B, S, H, D] (q_bshd, k_bthd, v_bthd).
// Every intermediate must be read by the pattern alone; shapes are proven, not assumed.
#include <algorithm>
#include <cmath>

#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"

namespace tl {
namespace {

constexpr int64_t kMaxHeadDim = 256;  // the kernels' per-item output registers (kernels/attention.cl)

struct Attn {
  std::string q, k, v, mask;
  bool qBshd = false, kBthd = false, vBthd = false;  // read through the exporter's Transpose
  double scale = 1, softcap = 0;
  std::vector<size_t> nodes;
};

// [B, X, Y, D] as [B, Y, X, D] when `swap` (the layout a Transpose(0,2,1,3) would give).
std::vector<SymExpr> logical(std::vector<SymExpr> d, bool swap) {
  if (swap && d.size() == 4) std::swap(d[1], d[2]);
  return d;
}

// x itself, or the input of a Transpose(0,2,1,3) that only `x`'s reader reads (swapped).
std::string throughTranspose(const PatternContext& c, const std::string& x, Attn& a, bool& swapped) {
  size_t i;
  const onnx::NodeProto* t = c.producer(x, "Transpose", &i);
  if (!t || !hasPerm(*t, {0, 2, 1, 3}) || !c.onlyReader(x)) return x;
  swapped = true;
  a.nodes.push_back(i);
  return t->input(0);
}

// The cache tensor behind k' (itself, or the input of its repeat_kv), and why not ("" if found).
std::string kvSource(const PatternContext& c, const std::string& kp, Attn& a, std::string& kv) {
  kv = kp;
  size_t iR, iE, iU;
  const onnx::NodeProto* reshape = c.producer(kp, "Reshape", &iR);
  if (!reshape) return "";
  const onnx::NodeProto* expand = c.producer(reshape->input(0), "Expand", &iE);
  if (!expand || !c.onlyReader(expand->output(0))) return "";  // a plain reshape of k: not repeat_kv
  const int u = c.graph.producer(expand->input(0));
  if (u < 0) return "the repeat_kv Expand reads no node";
  iU = static_cast<size_t>(u);
  const auto& un = c.graph.node(iU);
  if (!(isOp(&un, "Unsqueeze") || isOp(&un, "Reshape")) || !c.onlyReader(un.output(0)))
    return "the repeat_kv Expand does not read a view of the cache alone";
  const auto& src = c.dims(un.input(0));
  const auto& one = c.dims(un.output(0));
  const auto& rep = c.dims(expand->output(0));
  const auto& out = c.dims(kp);
  if (src.size() != 4 || one.size() != 5 || rep.size() != 5 || out.size() != 4) return "repeat_kv has unexpected ranks";
  const bool shapes = c.same(one[0], src[0]) && c.same(one[1], src[1]) && c.same(one[2], SymExpr(1)) &&
                      c.same(one[3], src[2]) && c.same(one[4], src[3]) && c.same(rep[0], src[0]) &&
                      c.same(rep[1], src[1]) && c.same(rep[3], src[2]) && c.same(rep[4], src[3]) &&
                      c.same(out[0], src[0]) && c.same(out[1], src[1] * rep[2]) && c.same(out[2], src[2]) &&
                      c.same(out[3], src[3]);
  if (!shapes) return "repeat_kv's shapes are not [B,Hkv,T,D] -> [B,Hkv,1,T,D] -> [B,Hkv,n,T,D] -> [B,Hkv*n,T,D]";
  kv = un.input(0);
  a.nodes.insert(a.nodes.end(), {iU, iE, iR});
  return "";
}

// Constant factors of s (Mul or Div by one-element constants), applied in `factor`.
std::string stripScale(const PatternContext& c, std::string& s, double& factor, Attn& a) {
  for (;;) {
    const int p = c.graph.producer(s);
    if (p < 0) return "";
    const auto& n = c.graph.node(static_cast<size_t>(p));
    const bool mul = isOp(&n, "Mul"), div = isOp(&n, "Div");
    if (!(mul || div) || n.input_size() != 2 || !c.onlyReader(n.output(0))) return "";
    std::optional<double> k = c.scalar(n.input(1));
    std::string rest = n.input(0);
    if (!k && mul) {
      k = c.scalar(n.input(0));
      rest = n.input(1);
    }
    if (!k) return "";
    if (div && *k == 0) return "the scores are divided by zero";
    factor *= div ? 1 / *k : *k;
    s = rest;
    a.nodes.push_back(static_cast<size_t>(p));
  }
}

// Soft-capping y = c * tanh(x / c) (or x * (1/c)): strips it from s, setting a.softcap.
void stripSoftcap(const PatternContext& c, std::string& s, Attn& a) {
  size_t iM, iT;
  const onnx::NodeProto* mul = c.producer(s, "Mul", &iM);
  if (!mul || mul->input_size() != 2 || !c.onlyReader(s)) return;
  for (int side : {0, 1}) {
    const auto cap = c.scalar(mul->input(1 - side));
    const onnx::NodeProto* tanh = c.producer(mul->input(side), "Tanh", &iT);
    if (!cap || *cap <= 0 || !tanh || !c.onlyReader(tanh->output(0))) continue;
    std::string inner = tanh->input(0);
    double factor = 1;
    Attn probe;
    stripScale(c, inner, factor, probe);
    if (probe.nodes.size() != 1 || std::fabs(factor * *cap - 1) > 1e-6) continue;
    a.softcap = *cap;
    a.nodes.insert(a.nodes.end(), {iM, iT, probe.nodes[0]});
    s = inner;
    return;
  }
}

std::string match(const PatternContext& c, size_t softmax, Rewrite& r) {
  const auto& sm = c.graph.node(softmax);
  const auto& sd = c.dims(sm.input(0));
  if (sd.size() != 4 || c.analysis.at(sm.input(0)).dtype != DType::Float) return "its input is not float32 of rank 4";
  const auto axis = attrInt(sm, "axis");
  if (axis ? (*axis != -1 && *axis != 3) : onnxOpset(c.model.proto) < 13) return "it is not over the last axis";
  if (!c.onlyReader(sm.input(0))) return "its input has other readers";
  Attn a;
  a.nodes.push_back(softmax);
  std::string s = sm.input(0);

  // Back from the Softmax: mask, soft-capping, scale, the q.k MatMul.
  if (const onnx::NodeProto* add = c.producer(s, "Add")) {
    size_t iAdd = static_cast<size_t>(c.graph.producer(s));
    for (int side : {0, 1}) {
      const std::string x = add->input(side), m = add->input(1 - side);
      if (c.producer(x, "MatMul") || c.producer(x, "Mul") || c.producer(x, "Div")) {
        a.mask = m;
        s = x;
        a.nodes.push_back(iAdd);
        break;
      }
    }
    if (a.mask.empty()) return "the Add before it adds no scores";
    if (!c.onlyReader(s)) return "the scores have other readers";
    const auto& md = c.dims(a.mask);
    if (c.analysis.at(a.mask).dtype != DType::Float || md.size() > 4) return "the mask is not float32 of rank <= 4";
    for (size_t i = 0; i < md.size(); ++i) {
      const auto& sdim = sd[4 - md.size() + i];
      if (!c.same(md[i], SymExpr(1)) && !c.same(md[i], sdim)) return "the mask does not broadcast to the scores";
    }
    for (size_t i = 0; i < 4; ++i)
      if (!c.same(c.dims(s)[i], sd[i])) return "the mask broadcasts the scores to another shape";
  }
  stripSoftcap(c, s, a);
  if (std::string why = stripScale(c, s, a.scale, a); !why.empty()) return why;
  size_t iQK;
  const onnx::NodeProto* qk = c.producer(s, "MatMul", &iQK);
  if (!qk) return "the scores are not a MatMul (after mask, soft-capping and scale)";
  a.nodes.push_back(iQK);
  // SDPA's decomposition scales q and k^T by sqrt(scale) each, before the MatMul.
  std::string qs = qk->input(0), kts = qk->input(1);
  if (!c.onlyReader(qs) || !c.onlyReader(kts)) return "q or k^T has other readers";
  if (std::string why = stripScale(c, qs, a.scale, a); !why.empty()) return why;
  if (std::string why = stripScale(c, kts, a.scale, a); !why.empty()) return why;
  size_t iKT;
  const onnx::NodeProto* kt = c.producer(kts, "Transpose", &iKT);
  if (!kt || !c.onlyReader(kt->output(0))) return "the scores' right side is not a Transpose read by them alone";
  a.nodes.push_back(iKT);
  if (hasPerm(*kt, {0, 1, 3, 2})) {
    if (std::string why = kvSource(c, kt->input(0), a, a.k); !why.empty()) return "k: " + why;
    if (a.k == kt->input(0)) a.k = throughTranspose(c, a.k, a, a.kBthd);
  } else if (hasPerm(*kt, {0, 2, 3, 1})) {  // k [B, T, H, D] transposed in one go (GPT-2 without a cache)
    a.k = kt->input(0);
    a.kBthd = true;
  } else {
    return "the scores' right side is a Transpose by neither (0,1,3,2) nor (0,2,3,1)";
  }
  a.q = throughTranspose(c, qs, a, a.qBshd);

  // Forward from the Softmax: SDPA's Where(IsNaN(p), 0, p) (a row with every key masked
  // gives 0, not NaN), Casts to float, the p.v MatMul, an output Transpose.
  std::string p = sm.output(0);
  size_t i;
  bool zeroRows = false;
  if (const auto& readers = c.graph.consumers(p); readers.size() == 2 && !c.outputs.count(p)) {
    size_t iNan = readers[0], iWhere = readers[1];
    if (!isOp(&c.graph.node(iNan), "IsNaN")) std::swap(iNan, iWhere);
    const auto &isnan = c.graph.node(iNan), &where = c.graph.node(iWhere);
    if (isOp(&isnan, "IsNaN") && isOp(&where, "Where") && where.input_size() == 3 && where.input(0) == isnan.output(0) &&
        where.input(2) == p && c.onlyReader(isnan.output(0)) && c.scalar(where.input(1)) == 0.0 &&
        c.sameDims(where.output(0), p)) {
      a.nodes.insert(a.nodes.end(), {iNan, iWhere});
      p = where.output(0);
      zeroRows = true;
    }
  }
  const onnx::NodeProto* n = c.onlyReader(p, &i);
  while (isOp(n, "Cast") && c.analysis.at(n->output(0)).dtype == DType::Float) {
    a.nodes.push_back(i);
    p = n->output(0);
    n = c.onlyReader(p, &i);
  }
  if (!isOp(n, "MatMul") || n->input(0) != p) return "the probabilities are not the left side of a MatMul read by them alone";
  a.nodes.push_back(i);
  const onnx::NodeProto* pv = n;
  if (std::string why = kvSource(c, pv->input(1), a, a.v); !why.empty()) return "v: " + why;
  if (a.v == pv->input(1)) a.v = throughTranspose(c, a.v, a, a.vBthd);
  std::string out = pv->output(0);
  bool bshd = false;
  const onnx::NodeProto* t = c.onlyReader(out, &i);
  if (isOp(t, "Transpose") && hasPerm(*t, {0, 2, 1, 3})) {
    a.nodes.push_back(i);
    out = t->output(0);
    bshd = true;
  }

  // q [B,H,S,D], k [B,Hkv,T,D], v [B,Hkv,T,Dv], H a multiple of Hkv.
  const auto qd = logical(c.dims(a.q), a.qBshd), kd = logical(c.dims(a.k), a.kBthd), vd = logical(c.dims(a.v), a.vBthd);
  for (const auto& t : {a.q, a.k, a.v})
    if (c.analysis.at(t).dtype != DType::Float) return "q, k or v is not float32";
  if (qd.size() != 4 || kd.size() != 4 || vd.size() != 4) return "q, k or v is not of rank 4";
  if (!c.same(qd[0], kd[0]) || !c.same(qd[0], vd[0]) || !c.same(kd[1], vd[1]) || !c.same(kd[2], vd[2]) ||
      !c.same(qd[3], kd[3]))
    return "q, k and v do not agree on batch, kv heads, length or head size";
  const auto H = qd[1].constValue(), Hkv = kd[1].constValue(), D = qd[3].constValue(), Dv = vd[3].constValue();
  if (!H || !Hkv || !D || !Dv || *Hkv == 0 || *H % *Hkv) return "the head counts are not constants with H a multiple of Hkv";
  if (*Dv > kMaxHeadDim) return "the head size is over the kernels' limit of " + std::to_string(kMaxHeadDim);
  for (size_t d = 0; d < 4; ++d)
    if (!c.same(sd[d], d == 3 ? kd[2] : qd[d])) return "the scores are not [B, H, S, T]";

  std::vector<std::string> inputs = {a.q, a.k, a.v};
  if (!a.mask.empty()) inputs.push_back(a.mask);
  std::sort(a.nodes.begin(), a.nodes.end());
  r.remove = a.nodes;
  r.fused = tlNode("Attention", pv->name(), inputs, out);
  addAttr(r.fused, "scale", static_cast<float>(a.scale));
  if (a.softcap > 0) addAttr(r.fused, "softcap", static_cast<float>(a.softcap));
  for (auto [name, on] : {std::pair{"q_bshd", a.qBshd}, {"k_bthd", a.kBthd}, {"v_bthd", a.vBthd}, {"out_bshd", bshd},
                          {"zero_masked_rows", zeroRows}})
    if (on) addAttr(r.fused, name, int64_t{1});
  return "";
}

}  // namespace

PassResult fuseAttention(Model& model) { return runPattern(model, "Softmax", match); }

}  // namespace tl
