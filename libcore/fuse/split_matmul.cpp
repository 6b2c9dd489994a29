// split-matmul: a projection whose output is only cut into column ranges (Phi-3's qkv and
// gate_up: Slices or a Split of the last axis) writes those ranges as its outputs:
//   y = MatMul(a, W); q = Slice(y, 0, Nq); k = Slice(y, Nq, Nq + Nk); ...
//     =>  q, k, .. = tl.MatMul(a, W) with split [Nq, Nk, ..]      (tl.MatMul, tl.QMatMul likewise)
// The ranges must tile [0, N) in at most three pieces. A Shape of y (exports compute the
// cut points from it) is rebuilt from a's shape, so the graph stays whole.
#include <algorithm>

#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"

namespace tl {
namespace {

struct Piece {
  int64_t begin, end;
  std::string output;
};

struct Cut {
  std::vector<Piece> pieces;
  std::vector<size_t> cutters, shapes;  // the Slices/Split, and Shape readers of y
};

std::string cuts(const PatternContext& c, const std::string& y, int64_t N, Cut& cut) {
  const auto& yd = c.dims(y);
  const int64_t rank = static_cast<int64_t>(yd.size());
  for (size_t i : c.graph.consumers(y)) {
    const auto& r = c.graph.node(i);
    if (isOp(&r, "Shape") && !findAttr(r, "start") && !findAttr(r, "end")) {
      cut.shapes.push_back(i);
      continue;
    }
    const auto last = [&](int64_t a) { return a == -1 || a == rank - 1; };
    if (isOp(&r, "Slice")) {
      auto in = [&](int k) { return r.input_size() > k ? r.input(k) : std::string(); };
      const auto starts = c.ints(in(1)), ends = c.ints(in(2));
      const auto axes = in(3).empty() ? std::optional<std::vector<int64_t>>(std::vector<int64_t>{0}) : c.ints(in(3));
      const auto steps = in(4).empty() ? std::optional<std::vector<int64_t>>(std::vector<int64_t>{1}) : c.ints(in(4));
      if (!starts || !ends || !axes || !steps || starts->size() != 1 || ends->size() != 1 || axes->size() != 1 ||
          steps->size() != 1 || !last((*axes)[0]) || (*steps)[0] != 1)
        return "a Slice of it is not a constant step-1 range of the last axis";
      int64_t b = (*starts)[0], e = std::min((*ends)[0], N);
      if (b < 0) b += N;
      if (e < 0) e += N;
      cut.pieces.push_back({b, e, r.output(0)});
      cut.cutters.push_back(i);
      continue;
    }
    if (isOp(&r, "Split") && last(attrInt(r, "axis").value_or(0))) {
      int64_t at = 0;
      for (const auto& o : r.output()) {
        const auto& od = c.dims(o);
        if (od.empty() || !od.back().isConst()) return "a Split of it has no constant widths";
        cut.pieces.push_back({at, at + *od.back().constValue(), o});
        at += *od.back().constValue();
      }
      cut.cutters.push_back(i);
      continue;
    }
    return "it is read by a " + r.op_type() + ", not only cut into column ranges";
  }
  std::sort(cut.pieces.begin(), cut.pieces.end(), [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
  int64_t at = 0;
  for (const auto& p : cut.pieces) {
    if (p.begin != at || p.end <= p.begin) return "its ranges do not tile [0, N) one after another";
    at = p.end;
  }
  if (at != N || cut.pieces.size() < 2 || cut.pieces.size() > 3) return "its ranges are not 2 or 3 pieces covering [0, N)";
  return "";
}

std::string match(const PatternContext& c, size_t mm, Rewrite& r, std::vector<onnx::TensorProto>& constants) {
  const auto& n = c.graph.node(mm);
  const int64_t N = projectionWidth(c.graph, n);
  if (N == 0) return "";
  const std::string y = n.output(0);
  if (c.outputs.count(y)) return "";
  bool cutting = false;  // a projection no Slice or Split reads is none of this pass's business
  for (size_t i : c.graph.consumers(y)) cutting = cutting || isOp(&c.graph.node(i), "Slice") || isOp(&c.graph.node(i), "Split");
  if (!cutting) return "";
  Cut cut;
  if (std::string why = cuts(c, y, N, cut); !why.empty()) return why;
  if (cut.cutters.empty()) return "";
  r.fused = n;
  r.fused.set_domain("tl");
  r.fused.clear_output();
  std::vector<int64_t> widths;
  for (const auto& p : cut.pieces) {
    r.fused.add_output(p.output);
    widths.push_back(p.end - p.begin);
  }
  addAttr(r.fused, "split", widths);
  r.remove = cut.cutters;
  r.remove.push_back(mm);  // the projection last: the fused node takes its place
  // Shape(y) = Concat(Shape(a)[:-1], [N]), folded by tl-shape as before.
  for (size_t s : cut.shapes) {
    const auto& sh = c.graph.node(s);
    const std::string base = sh.output(0) + "/tl.split";
    auto constant = [&](const std::string& name, int64_t v) {
      onnx::TensorProto t;
      t.set_name(name);
      t.set_data_type(onnx::TensorProto::INT64);
      t.add_dims(1);
      t.add_int64_data(v);
      constants.push_back(t);
      return name;
    };
    onnx::NodeProto shapeA, lead, cat;
    shapeA.set_op_type("Shape");
    shapeA.set_name(base + "/Shape");
    shapeA.add_input(n.input(0));
    shapeA.add_output(base + "/a");
    lead.set_op_type("Slice");
    lead.set_name(base + "/Slice");
    for (const auto& in : {base + "/a", constant(base + "/zero", 0), constant(base + "/minus1", -1)}) lead.add_input(in);
    lead.add_output(base + "/lead");
    cat.set_op_type("Concat");
    cat.set_name(base + "/Concat");
    cat.add_input(base + "/lead");
    cat.add_input(constant(base + "/N", N));
    cat.add_output(sh.output(0));
    addAttr(cat, "axis", int64_t{0});
    for (auto* node : {&shapeA, &lead, &cat}) r.before.push_back(*node);
    r.remove.insert(r.remove.begin(), s);
  }
  return "";
}

}  // namespace

PassResult splitMatMuls(Model& model) {
  PassResult result;
  std::vector<Rewrite> rewrites;
  std::vector<onnx::TensorProto> constants;
  {
    Graph graph(model.proto.graph());
    const ShapeAnalysis analysis = inferShapes(model, graph);
    PatternContext c(model, graph, analysis);
    for (size_t i = 0; i < graph.nodeCount(); ++i) {
      Rewrite r;
      const std::string why = match(c, i, r, constants);
      if (!why.empty()) result.nearMisses.push_back("node '" + graph.nodeName(i) + "' (" + graph.node(i).op_type() + "): " + why);
      if (why.empty() && !r.remove.empty()) rewrites.push_back(std::move(r));
    }
  }
  result.rewrites = static_cast<int>(rewrites.size());
  applyRewrites(model, std::move(rewrites));  // the rebuilt Shapes just before the projection, after a
  for (auto& t : constants) *model.proto.mutable_graph()->add_initializer() = std::move(t);
  return result;
}

}  // namespace tl
