// matmul-bias: the bias Add after a projection becomes the MatMul's epilogue:
//   y = Add(MatMul(a, W), b)        =>  y = tl.MatMul(a, W, b)
//   y = Add(tl.QMatMul(a, ..), b)   =>  y = tl.QMatMul(a, .., b)
// W constant float [K, N] (or a tl.QMatMul/tl.MatMul of one output and no bias yet), b a
// constant float [N], the product read by the Add alone, and the Add broadcasting nothing.
#include "fuse/fuse.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"

namespace tl {
namespace {

std::string match(const PatternContext& c, size_t add, Rewrite& r) {
  const auto& an = c.graph.node(add);
  if (an.input_size() != 2) return "it does not have two inputs";
  for (int side : {0, 1}) {
    const std::string y = an.input(side), b = an.input(1 - side);
    const int p = c.graph.producer(y);
    if (p < 0) continue;
    const auto& mm = c.graph.node(static_cast<size_t>(p));
    const int64_t N = projectionWidth(c.graph, mm);
    const bool biased = mm.input_size() > (mm.op_type() == "QMatMul" ? 4 : 2);  // an epilogue already
    if (N == 0 || biased) continue;
    const auto* bias = constantOf(c.graph, b);
    if (!bias || bias->dims_size() != 1 || bias->dims(0) != N || bias->data_type() != onnx::TensorProto::FLOAT)
      return "the other input is not a constant float [" + std::to_string(N) + "] bias";
    if (!c.onlyReader(y)) return "the product has other readers";
    if (!c.sameDims(an.output(0), y)) return "the Add broadcasts the product";
    r.remove = {add, static_cast<size_t>(p)};  // the MatMul last: the fused node takes its place
    r.fused = mm;
    r.fused.set_domain("tl");
    r.fused.set_name(mm.name() + "+bias");
    r.fused.add_input(b);
    r.fused.set_output(0, an.output(0));
    return "";
  }
  return "";  // no projection beside it: a plain Add
}

}  // namespace

PassResult fuseMatMulBias(Model& model) { return runPattern(model, "Add", match); }

}  // namespace tl
