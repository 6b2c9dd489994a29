// The reduce family: Reduce* over any axes, ArgMax, ArgMin, CumSum and TopK. One kernel per op and dtype,
// named after them; reductions have a work-group variant on GPUs.
#include "runtime/lower/lower.h"

namespace tl {
namespace {

void reduceOp(const LowerNode& n) {
  const Dims& d = n.shape(n.in(0));
  Dims axes;
  if (const auto* a = n.attr("axes")) axes.assign(a->ints().begin(), a->ints().end());
  if (n.hasIn(1)) axes = n.ex.value(n.in(1));
  std::vector<bool> reduce(d.size(), axes.empty() && !n.attrInt("noop_with_empty_axes", 0));
  for (auto a : axes) reduce[n.axis(a, d.size())] = true;
  Dims is = contiguousStrides(d), od, os, rd, rs;
  for (size_t i = 0; i < d.size(); ++i) {
    (reduce[i] ? rd : od).push_back(d[i]);
    (reduce[i] ? rs : os).push_back(is[i]);
  }
  int64_t outCount = elementCount(od), redCount = elementCount(rd);
  // kernels/reduce.cl's REDUCE(name, ...) makes name (an item per output, CPUs) and name_wg
  // (a work-group of 64 per output, GPUs) for each op and dtype.
  const std::string kernel = lowerCase(n.proto.op_type()) + "_" + typeSuffix(n.dtype(n.in(0)));
  const bool wg = n.gpu();
  n.launch(wg ? kernel + "_wg" : kernel, wg ? "GPU: a work-group of 64 per output" : "CPU: an item per output")
      .mem(n.in(0))
      .mem(n.out(0))
      .i32(outCount)
      .vec(pad8(od, 1))
      .vec(pad8(os, 0))
      .i32(redCount)
      .vec(pad8(rd, 1))
      .vec(pad8(rs, 0))
      .run1d(wg ? outCount * 64 : outCount);
}

void argExtremeOp(const LowerNode& n) {
  const Dims& d = n.shape(n.in(0));
  const size_t k = n.axis(n.attrInt("axis", 0), d.size());
  const int64_t inner = elementsAfter(d, k);
  const int64_t count = elementCount(n.shape(n.out(0)));
  if (d[k] == 0) throw Error(n.proto.op_type() + " over an empty axis", ExitCode::BadInput);
  n.launch(lowerCase(n.proto.op_type()) + "_" + typeSuffix(n.dtype(n.in(0))))
      .mem(n.in(0))
      .mem(n.out(0))
      .i32(count)
      .i32(d[k])
      .i32(inner)
      .i32(n.attrInt("select_last_index", 0))
      .run1d(count);
}

// CumSum: an item a line along the axis (its second input, a scalar), which it sums in turn.
void cumSumOp(const LowerNode& n) {
  const Dims& d = n.shape(n.in(0));
  if (d.empty()) throw Error("CumSum of a scalar: ONNX asks for rank 1 or more", ExitCode::BadInput);
  const size_t k = n.axis(n.ex.value(n.in(1)).at(0), d.size());
  const int64_t inner = elementsAfter(d, k);
  const int64_t lines = elementCount(d) / std::max<int64_t>(d[k], 1);
  n.launch(std::string("cumsum_") + typeSuffix(n.dtype(n.in(0))))
      .mem(n.in(0))
      .mem(n.out(0))
      .i32(d[k] ? lines : 0)
      .i32(d[k])
      .i32(inner)
      .i32(n.attrInt("exclusive", 0))
      .i32(n.attrInt("reverse", 0))
      .run1d(d[k] ? lines : 0);
}

// TopK: an item a line, its k picks in order (sorted or not, ONNX allows the order).
void topKOp(const LowerNode& n) {
  if (n.dtype(n.in(0)) != DType::Float) throw Error(std::string("TopK over ") + dtypeName(n.dtype(n.in(0))) + " has no kernel (float only)", ExitCode::BadInput);
  const Dims& d = n.shape(n.in(0));
  const size_t a = n.axis(n.attrInt("axis", -1), d.size());
  const int64_t k = n.shape(n.out(0))[a];
  if (k > d[a]) throw Error("TopK's k of " + std::to_string(k) + " is over its axis of " + std::to_string(d[a]), ExitCode::BadInput);
  const int64_t inner = elementsAfter(d, a);
  const int64_t lines = d[a] && k ? elementCount(d) / d[a] : 0;
  n.launch("topk_f32")
      .mem(n.in(0))
      .mem(n.out(0))
      .mem(n.out(1))
      .i32(lines)
      .i32(d[a])
      .i32(inner)
      .i32(k)
      .i32(n.attrInt("largest", 1))
      .run1d(lines);
}

}  // namespace

const Lowerings& reduceLowerings() {
  static const Lowerings table = [] {
    Lowerings t;
    for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
                           "ReduceL2"})
      t[op] = reduceOp;
    t["ArgMax"] = argExtremeOp;
    t["ArgMin"] = argExtremeOp;
    t["CumSum"] = cumSumOp;
    t["TopK"] = topKOp;
    return t;
  }();
  return table;
}

}  // namespace tl
