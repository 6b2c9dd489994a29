// merge-slices (MNN's III.C): Slice(Slice(x)) with constant parameters -> one Slice.
// Slices of different axes join; two slices of one axis compose when both step by 1
// over non-negative indices (composeSliceRanges). The inner Slice must feed only the
// outer one. A chain merges pairwise until nothing is left to merge.
#include <algorithm>
#include <array>
#include <limits>
#include <map>

#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"

namespace tl {

std::pair<int64_t, int64_t> composeSliceRanges(int64_t s1, int64_t e1, int64_t s2, int64_t e2) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  auto add = [&](int64_t a, int64_t b) { return a > kMax - b ? kMax : a + b; };
  return {add(s1, s2), std::min(e1, add(s1, e2))};
}

namespace {

struct SliceParams {
  std::map<int64_t, std::array<int64_t, 3>> byAxis;  // axis -> start, end, step
};

// The constant parameters of an opset-10+ Slice, by normalized axis; "" when known.
std::string params(const PatternContext& c, const onnx::NodeProto& n, int64_t rank, SliceParams* p) {
  if (n.input_size() < 3) return "Slice without starts and ends inputs (opset 1)";
  const auto starts = c.ints(n.input(1)), ends = c.ints(n.input(2));
  if (!starts || !ends || starts->size() != ends->size()) return "starts or ends are not constant";
  std::vector<int64_t> axes(starts->size()), steps(starts->size(), 1);
  for (size_t i = 0; i < axes.size(); ++i) axes[i] = static_cast<int64_t>(i);
  if (n.input_size() > 3 && !n.input(3).empty()) {
    auto a = c.ints(n.input(3));
    if (!a || a->size() != axes.size()) return "axes are not constant";
    axes = *a;
  }
  if (n.input_size() > 4 && !n.input(4).empty()) {
    auto s = c.ints(n.input(4));
    if (!s || s->size() != axes.size()) return "steps are not constant";
    steps = *s;
  }
  for (size_t i = 0; i < axes.size(); ++i) {
    const int64_t axis = axes[i] < 0 ? axes[i] + rank : axes[i];
    if (axis < 0 || axis >= rank || p->byAxis.count(axis)) return "an axis out of range or repeated";
    p->byAxis[axis] = {(*starts)[i], (*ends)[i], steps[i]};
  }
  return "";
}

std::string matchSlices(const PatternContext& c, size_t outerIndex, Rewrite& r) {
  const auto& outer = c.graph.node(outerIndex);
  if (!isOp(&outer, "Slice") || outer.input(0).empty()) return "";
  size_t innerIndex;
  const auto* inner = c.producer(outer.input(0), "Slice", &innerIndex);
  if (!inner || inner->input(0).empty()) return "";
  if (c.onlyReader(inner->output(0)) != &outer || c.outputs.count(inner->output(0)))
    return "the inner Slice '" + c.graph.nodeName(innerIndex) + "' has other readers";
  const int64_t rank = static_cast<int64_t>(c.dims(inner->input(0)).size());
  SliceParams a, b;
  if (auto why = params(c, *inner, rank, &a); !why.empty()) return "inner Slice: " + why;
  if (auto why = params(c, outer, rank, &b); !why.empty()) return why;
  for (const auto& [axis, v] : b.byAxis) {
    auto it = a.byAxis.find(axis);
    if (it == a.byAxis.end()) {
      a.byAxis[axis] = v;
      continue;
    }
    const auto& u = it->second;
    if (u[2] != 1 || v[2] != 1 || u[0] < 0 || u[1] < 0 || v[0] < 0 || v[1] < 0)
      return "both slice axis " + std::to_string(axis) + " with a step or a negative index";
    const auto [s, e] = composeSliceRanges(u[0], u[1], v[0], v[1]);
    it->second = {s, e, 1};
  }
  std::vector<int64_t> starts, ends, axes, steps;
  for (const auto& [axis, v] : a.byAxis) {
    axes.push_back(axis);
    starts.push_back(v[0]);
    ends.push_back(v[1]);
    steps.push_back(v[2]);
  }
  const std::string base = outer.output(0) + "/tl.slice/";
  r.before = {constantNode(base + "starts", starts), constantNode(base + "ends", ends),
              constantNode(base + "axes", axes), constantNode(base + "steps", steps)};
  r.fused = outer;
  r.fused.clear_input();
  for (const auto& in : {inner->input(0), base + "starts", base + "ends", base + "axes", base + "steps"})
    r.fused.add_input(in);
  r.remove = {innerIndex, outerIndex};
  return "";
}

}  // namespace

PassResult mergeSlices(Model& model) {
  PassResult result;
  for (;;) {
    PassResult round = runPattern(model, "Slice", matchSlices);
    result.rewrites += round.rewrites;
    if (round.rewrites == 0) {
      result.nearMisses = round.nearMisses;
      return result;
    }
  }
}

}  // namespace tl
