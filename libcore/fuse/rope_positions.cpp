// rope-positions: a tl.RoPE whose cos and sin tables the export builds from the position
// ids, as transformers' rotary embedding does,
//   f = Transpose(MatMul(Expand(inv_freq [1, R/2, 1]), Cast<float>(Unsqueeze(pos [B, N], 1))), (0,2,1))
//   cos = [Mul(] Cos(Concat(f, f, last axis)) [, c)] , sin likewise, then Unsqueezes,
// computes them itself: input 1 becomes the position ids (Unsqueezed as the tables were,
// the last axis 1) and input 2 inv_freq, with `positions = 1` and the scales as attributes.
// The kernel runs the graph's own ops (an fp32 product, cos or sin, a multiply), so the
// tables are neither computed nor read each step. Anything else stays as it is.
#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"

namespace tl {
namespace {

struct Table {
  std::string pos, invFreq, concat;  // the position ids, the inv_freq constant, Concat(f, f)
  std::vector<std::vector<int64_t>> unsqueeze;  // the Unsqueezes' axes from [B, N, R] to the table RoPE reads, in order
  double scale = 1;
};

const onnx::NodeProto* producerOf(const PatternContext& c, const std::string& t) {
  const int p = c.graph.producer(t);
  return p < 0 ? nullptr : &c.graph.node(static_cast<size_t>(p));
}

// `t`, or what it is a Cast of when the Cast keeps the type (TorchScript's .float() on floats).
std::string uncast(const PatternContext& c, std::string t) {
  for (const onnx::NodeProto* n = producerOf(c, t);
       isOp(n, "Cast") && c.analysis.at(n->input(0)).dtype == c.analysis.at(n->output(0)).dtype; n = producerOf(c, t))
    t = n->input(0);
  return t;
}

// The table behind `t` (RoPE's input) made with `trig` ("Cos" or "Sin"); "" or why not.
std::string trace(const PatternContext& c, std::string t, const char* trig, Table& out) {
  std::vector<std::vector<int64_t>> axes;  // the Unsqueezes, outermost first
  for (const onnx::NodeProto* n = producerOf(c, t); isOp(n, "Unsqueeze"); n = producerOf(c, t)) {
    const auto a = n->input_size() > 1 ? c.ints(n->input(1)) : attrInts(*n, "axes");
    if (!a) return "an Unsqueeze of the table has no constant axes";
    axes.insert(axes.begin(), *a);
    t = n->input(0);
  }
  out.unsqueeze = axes;
  const onnx::NodeProto* n = producerOf(c, uncast(c, t));
  if (isOp(n, "Mul")) {
    const int side = c.scalar(n->input(1)) ? 0 : 1;  // the side that is not the constant
    const auto k = c.scalar(n->input(1 - side));
    if (!k) return "the table is multiplied by what is no constant";
    out.scale = *k;
    n = producerOf(c, n->input(side));
  }
  if (!isOp(n, trig)) return std::string("the table is no ") + trig;
  const onnx::NodeProto* cat = producerOf(c, n->input(0));
  if (!isOp(cat, "Concat") || cat->input_size() != 2 || cat->input(0) != cat->input(1)) return "the angles are no Concat(f, f)";
  const auto& cd = c.dims(cat->output(0));
  const auto axis = attrInt(*cat, "axis");
  if (!axis || (*axis != -1 && *axis != static_cast<int64_t>(cd.size()) - 1)) return "the angles' Concat is not on the last axis";
  out.concat = cat->output(0);
  const onnx::NodeProto* tr = producerOf(c, cat->input(0));
  const auto perm = tr ? attrInts(*tr, "perm") : std::nullopt;
  if (!isOp(tr, "Transpose") || perm != std::vector<int64_t>{0, 2, 1}) return "the angles are no Transpose(0,2,1)";
  const onnx::NodeProto* mm = producerOf(c, tr->input(0));
  if (!isOp(mm, "MatMul")) return "the angles are no MatMul";
  const onnx::NodeProto* ex = producerOf(c, uncast(c, mm->input(0)));
  const std::string freq = isOp(ex, "Expand") ? uncast(c, ex->input(0)) : uncast(c, mm->input(0));
  const auto* f = constantOf(c.graph, freq);
  if (!f || f->data_type() != onnx::TensorProto::FLOAT || f->dims_size() != 3 || f->dims(0) != 1 || f->dims(2) != 1)
    return "the frequencies are no constant float [1, R/2, 1]";
  const onnx::NodeProto* cast = producerOf(c, uncast(c, mm->input(1)));
  if (!isOp(cast, "Cast") || attrInt(*cast, "to") != onnx::TensorProto::FLOAT) return "the positions are not cast to float";
  const onnx::NodeProto* un = producerOf(c, cast->input(0));
  const auto ua = un && un->input_size() > 1 ? c.ints(un->input(1)) : std::nullopt;
  if (!isOp(un, "Unsqueeze") || ua != std::vector<int64_t>{1}) return "the positions are no Unsqueeze(pos, 1)";
  const auto& pd = c.dims(un->input(0));
  if (pd.size() != 2 || !isInteger(c.analysis.at(un->input(0)).dtype)) return "the positions are no integer [B, N]";
  out.pos = un->input(0);
  out.invFreq = freq;
  return "";
}

std::string match(const PatternContext& c, size_t i, Rewrite& r) {
  const auto& n = c.graph.node(i);
  if (attrInt(n, "positions").value_or(0)) return "";
  Table cos, sin;
  if (std::string why = trace(c, n.input(1), "Cos", cos); !why.empty()) return "cos: " + why;
  if (std::string why = trace(c, n.input(2), "Sin", sin); !why.empty()) return "sin: " + why;
  if (cos.concat != sin.concat || cos.unsqueeze != sin.unsqueeze) return "cos and sin are not of one angle table";
  const auto& x = c.dims(n.input(0));
  const int64_t rot = attrInt(n, "rotary_dim").value_or(x.back().constValue().value_or(0));
  const auto width = c.dims(cos.concat).back().constValue();
  if (!width || *width != rot) return "the tables are not rotary_dim wide";
  // [B, N] -> [B, N, 1] -> the tables' Unsqueezes: broadcast like them, one position a row.
  std::string posIn = cos.pos;
  std::vector<std::vector<int64_t>> steps = {{2}};
  steps.insert(steps.end(), cos.unsqueeze.begin(), cos.unsqueeze.end());
  for (size_t k = 0; k < steps.size(); ++k) {
    const std::string base = n.name() + "/positions" + std::to_string(k);
    const onnx::NodeProto axes = constantNode(base + "/axes", steps[k]);
    onnx::NodeProto u;
    u.set_op_type("Unsqueeze");
    u.set_name(base);
    u.add_input(posIn);
    u.add_input(axes.output(0));
    u.add_output(base + "/out");
    posIn = u.output(0);
    r.early.push_back(axes);
    r.early.push_back(u);
  }
  // Right after the position ids are made (the graph's start for an input), not before
  // this RoPE: the lowering lets a projection take a RoPE's work only where the tables'
  // producer comes before it, which layer 0's could not.
  r.earlyAt = static_cast<size_t>(c.graph.producer(cos.pos) + 1);
  onnx::NodeProto rope = n;
  rope.set_input(1, posIn);
  rope.set_input(2, cos.invFreq);
  addAttr(rope, "positions", int64_t{1});
  addAttr(rope, "cos_scale", static_cast<float>(cos.scale));
  addAttr(rope, "sin_scale", static_cast<float>(sin.scale));
  r.remove = {i};
  r.fused = rope;
  return "";
}

}  // namespace

PassResult fuseRopePositions(Model& model) { return runPattern(model, "tl.RoPE", match); }

}  // namespace tl
