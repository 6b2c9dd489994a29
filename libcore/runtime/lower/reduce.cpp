// The reduce family: Reduce* over any axes, ArgMax and ArgMin. One kernel per op and dtype,
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
  int64_t inner = 1;
  for (size_t i = k + 1; i < d.size(); ++i) inner *= d[i];
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

}  // namespace

const Lowerings& reduceLowerings() {
  static const Lowerings table = [] {
    Lowerings t;
    for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
                           "ReduceL2"})
      t[op] = reduceOp;
    t["ArgMax"] = argExtremeOp;
    t["ArgMin"] = argExtremeOp;
    return t;
  }();
  return table;
}

}  // namespace tl
