// The movement family: Transpose, Expand, Slice, Split (strided copies), Concat and
// tl.Concat, Gather and GatherND, Range, ConstantOfShape's fill, Trilu; and which of them
// are views at a run's shapes. One kernel per op and element size, named after them
// (kernels/copy.cl: COPY(b32, ...) makes copy_b32): no variants to choose between.
#include <algorithm>
#include <cstring>

#include "runtime/lower/lower.h"

namespace tl {

void copyRegion(const LowerNode& n, const std::string& src, const std::string& dst, Dims dims, int64_t inOff,
                Dims inStrides, int64_t outOff, Dims outStrides) {
  collapse(dims, {&inStrides, &outStrides});
  n.launch(std::string("copy_") + sizeSuffix(n.dtype(src)))
      .mem(src)
      .mem(dst)
      .i32(elementCount(dims))
      .vec(pad8(dims, 1))
      .i32(inOff)
      .vec(pad8(inStrides, 0))
      .i32(outOff)
      .vec(pad8(outStrides, 0))
      .run1d(elementCount(dims));
}

namespace {

void transposeOp(const LowerNode& n) {
  const Dims& in = n.shape(n.in(0));
  Dims perm;
  if (const auto* p = n.attr("perm")) {
    perm.assign(p->ints().begin(), p->ints().end());
  } else {
    for (size_t i = in.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  Dims is = contiguousStrides(in), strides;
  for (auto p : perm) strides.push_back(is[n.axis(p, in.size())]);
  const Dims& o = n.shape(n.out(0));
  copyRegion(n, n.in(0), n.out(0), o, 0, strides, 0, contiguousStrides(o));
}

void expandOp(const LowerNode& n) {
  const Dims& o = n.shape(n.out(0));
  copyRegion(n, n.in(0), n.out(0), o, 0, broadcastStrides(n.shape(n.in(0)), o), 0, contiguousStrides(o));
}

// Tile: each axis k as (repeat, in_k) of the output; element (r, j) reads the input's j.
void tileOp(const LowerNode& n) {
  const Dims& in = n.shape(n.in(0));
  const Dims& o = n.shape(n.out(0));
  const Dims is = contiguousStrides(in), os = contiguousStrides(o);
  Dims dims, inStrides, outStrides;
  for (size_t k = 0; k < in.size(); ++k) {
    dims.insert(dims.end(), {in[k] ? o[k] / in[k] : 0, in[k]});
    inStrides.insert(inStrides.end(), {0, is[k]});
    outStrides.insert(outStrides.end(), {in[k] * os[k], os[k]});
  }
  copyRegion(n, n.in(0), n.out(0), dims, 0, inStrides, 0, outStrides);
}

// A Slice at this run's shapes: the input element its first output element reads, and
// the input strides of its output axes.
int64_t sliceLayout(const onnx::NodeProto& n, const Executor& ex, Dims* strides) {
  const Dims& in = ex.shape(n.input(0));
  const Dims& starts = ex.value(n.input(1));
  const auto optional = [&](int i) { return n.input_size() > i && !n.input(i).empty() ? ex.value(n.input(i)) : Dims{}; };
  Dims axes = optional(3), steps = optional(4);
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  Dims first(in.size(), 0), step(in.size(), 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t k = axisIndex(axes[i], in.size());
    int64_t d = in[k], s = starts[i];
    if (s < 0) s += d;
    s = steps[i] > 0 ? std::clamp<int64_t>(s, 0, d) : std::clamp<int64_t>(s, 0, d - 1);
    first[k] = s;
    step[k] = steps[i];
  }
  const Dims is = contiguousStrides(in);
  strides->assign(in.size(), 0);
  int64_t off = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    off += first[k] * is[k];
    (*strides)[k] = step[k] * is[k];
  }
  return off;
}

void sliceOp(const LowerNode& n) {
  Dims strides;
  const int64_t off = sliceLayout(n.proto, n.ex, &strides);
  const Dims& o = n.shape(n.out(0));
  copyRegion(n, n.in(0), n.out(0), o, off, strides, 0, contiguousStrides(o));
}

void splitOp(const LowerNode& n) {
  const Dims& in = n.shape(n.in(0));
  size_t k = n.axis(n.attrInt("axis", 0), in.size());
  Dims is = contiguousStrides(in);
  int64_t at = 0;
  for (int i = 0; i < n.proto.output_size(); ++i) {
    if (n.out(i).empty()) continue;
    const Dims& d = n.shape(n.out(i));
    copyRegion(n, n.in(0), n.out(i), d, at * is[k], is, 0, contiguousStrides(d));
    at += d[k];
  }
}

void gatherOp(const LowerNode& n) {
  if (n.dtype(n.in(1)) != DType::Int64) throw Error("Gather indices must be int64", ExitCode::BadInput);
  const Dims& data = n.shape(n.in(0));
  size_t k = n.axis(n.attrInt("axis", 0), data.size());
  const int64_t inner = elementsAfter(data, k);
  const int64_t rows = inner ? elementCount(n.shape(n.out(0))) / inner : 0;  // (outer, index) pairs
  n.launch(std::string("gather_") + sizeSuffix(n.dtype(n.in(0))))
      .mem(n.in(0))
      .mem(n.in(1))
      .mem(n.out(0))
      .i32(elementCount(n.shape(n.in(1))))
      .i32(data[k])
      .i32(inner)
      .run(grid(static_cast<size_t>((inner + 63) / 64 * 64), static_cast<size_t>(rows), 1, 64, 1));
}

// GatherElements: an item an output element (the indices' shape), data's strides with the
// axis's left out and the index times it added.
void gatherElementsOp(const LowerNode& n) {
  if (n.dtype(n.in(1)) != DType::Int64) throw Error("GatherElements indices must be int64", ExitCode::BadInput);
  const Dims& data = n.shape(n.in(0));
  const Dims& idx = n.shape(n.in(1));
  const size_t k = n.axis(n.attrInt("axis", 0), data.size());
  Dims ds = contiguousStrides(data);
  const int64_t axisStride = ds[k];
  ds[k] = 0;
  const int64_t c = elementCount(idx);
  n.launch(std::string("gather_elements_") + sizeSuffix(n.dtype(n.in(0))))
      .mem(n.in(0))
      .mem(n.in(1))
      .mem(n.out(0))
      .i32(c)
      .vec(pad8(idx, 1))
      .vec(pad8(ds, 0))
      .i32(data[k])
      .i32(axisStride)
      .run1d(c);
}

// OneHot: an item an output element, its axis coordinate against its line's index.
void oneHotOp(const LowerNode& n) {
  if (n.dtype(n.in(0)) != DType::Int64) throw Error("OneHot indices must be int64", ExitCode::BadInput);
  const Dims& o = n.shape(n.out(0));
  const size_t k = n.axis(n.attrInt("axis", -1), o.size());
  const int64_t inner = elementsAfter(o, k);
  const int64_t c = elementCount(o);
  n.launch(std::string("one_hot_") + sizeSuffix(n.dtype(n.out(0))))
      .mem(n.in(0))
      .mem(n.in(2))
      .mem(n.out(0))
      .i32(c)
      .i32(o[k])
      .i32(inner)
      .run1d(c);
}

void gatherNDOp(const LowerNode& n) {
  if (n.attrInt("batch_dims", 0) != 0) throw Error("GatherND with batch_dims has no kernel", ExitCode::BadInput);
  if (n.dtype(n.in(1)) != DType::Int64) throw Error("GatherND indices must be int64", ExitCode::BadInput);
  const Dims& data = n.shape(n.in(0));
  const Dims& idx = n.shape(n.in(1));
  int64_t m = idx.back();
  int64_t inner = 1;
  for (size_t i = static_cast<size_t>(m); i < data.size(); ++i) inner *= data[i];
  Dims ds = contiguousStrides(data);
  Dims head(data.begin(), data.begin() + m), headStrides(ds.begin(), ds.begin() + m);
  // The kernel reads dims[j], strides[j] for j < m: pad on the right here.
  cl_int8 dv, sv;
  for (int i = 0; i < 8; ++i) {
    dv.s[i] = i < m ? static_cast<cl_int>(head[i]) : 1;
    sv.s[i] = i < m ? static_cast<cl_int>(headStrides[i]) : 0;
  }
  int64_t c = elementCount(n.shape(n.out(0)));
  n.launch(std::string("gathernd_") + sizeSuffix(n.dtype(n.in(0))))
      .mem(n.in(0))
      .mem(n.in(1))
      .mem(n.out(0))
      .i32(c)
      .i32(m)
      .i32(inner)
      .vec(dv)
      .vec(sv)
      .run1d(c);
}

void rangeOp(const LowerNode& n) {
  DType t = n.dtype(n.out(0));
  int64_t c = elementCount(n.shape(n.out(0)));
  int64_t start = n.ex.value(n.in(0)).at(0), delta = n.ex.value(n.in(2)).at(0);
  Launch l = n.launch(std::string("range_") + typeSuffix(t));
  l.mem(n.out(0)).i32(c);
  if (t == DType::Int64) l.i64(start).i64(delta);
  else if (t == DType::Int32) l.i32(start).i32(delta);
  else l.f32(static_cast<float>(start)).f32(static_cast<float>(delta));
  l.run1d(c);
}

void constantOfShapeOp(const LowerNode& n) {
  DType t = n.dtype(n.out(0));
  uint8_t bytes[8] = {0};
  if (const auto* a = n.attr("value")) {
    Tensor v = readTensor(a->t(), {});
    std::memcpy(bytes, v.bytes.data(), std::min<size_t>(v.bytes.size(), 8));
  }
  int64_t c = elementCount(n.shape(n.out(0)));
  n.launch(std::string("fill_") + sizeSuffix(t)).mem(n.out(0)).i32(c).raw(bytes, dtypeBits(t) / 8).run1d(c);
}

void triluOp(const LowerNode& n) {
  const Dims& d = n.shape(n.in(0));
  int64_t k = n.hasIn(1) ? n.ex.value(n.in(1)).at(0) : 0;
  int64_t c = elementCount(d);
  n.launch(std::string("trilu_") + sizeSuffix(n.dtype(n.in(0))))
      .mem(n.in(0))
      .mem(n.out(0))
      .i32(c)
      .i32(d[d.size() - 2])
      .i32(d[d.size() - 1])
      .i32(k)
      .i32(n.attrInt("upper", 1))
      .run1d(c);
}

}  // namespace

// Up to four inputs per launch (one for a KV cache's Concat(past, new)).
void concatOp(const LowerNode& n) {
  const Dims& o = n.shape(n.out(0));
  const size_t k = n.axis(n.attrInt("axis", 0), o.size());
  const int64_t inner = elementsAfter(o, k);
  const int64_t outer = elementCount(o) / std::max<int64_t>(o[k] * inner, 1);
  std::vector<std::string> ins;
  for (int i = 0; i < n.proto.input_size(); ++i)
    if (!n.in(i).empty() && n.shape(n.in(i))[k] > 0) ins.push_back(n.in(i));
  int64_t at = 0;
  for (size_t first = 0; first < ins.size(); first += 4) {
    Launch l = n.launch(std::string("concat_") + sizeSuffix(n.dtype(n.out(0))));
    Dims rows;
    for (size_t j = first; j < first + 4; ++j) {
      if (j < ins.size()) {
        l.mem(ins[j]);
        rows.push_back(n.shape(ins[j])[k]);
      } else {
        l.nullMem();
        rows.push_back(0);
      }
    }
    const int64_t chunk = rows[0] + rows[1] + rows[2] + rows[3], count = outer * chunk * inner;
    l.mem(n.out(0)).i32(count).i32(inner).i32(o[k]).i32(at).i32(rows[0]).i32(rows[1]).i32(rows[2]).i32(rows[3]);
    l.run1d(count);
    at += chunk;
  }
}

// tl.Concat (docs/ops.md): two two-input Concats along one axis, in one launch.
void concatPairOp(const LowerNode& n) {
  const size_t k = n.axis(n.attrInt("axis", 0), n.shape(n.out(0)).size());
  Launch l = n.launch(std::string("concat_pair_") + sizeSuffix(n.dtype(n.out(0))));
  int64_t total = 0;
  for (size_t j = 0; j < 2; ++j) {
    const Dims& o = n.shape(n.out(j));
    const int64_t inner = elementsAfter(o, k);
    const int64_t count = elementCount(o);
    l.mem(n.in(2 * j)).mem(n.in(2 * j + 1)).mem(n.out(j)).i32(count).i32(inner).i32(o[k]).i32(n.shape(n.in(2 * j))[k]);
    total += count;
  }
  l.run1d(total);
}


const Lowerings& movementLowerings() {
  static const Lowerings table = {
      {"Transpose", transposeOp}, {"Expand", expandOp},   {"Slice", sliceOp},
      {"Concat", concatOp},       {"Split", splitOp},     {"Gather", gatherOp},
      {"GatherND", gatherNDOp},   {"Range", rangeOp},     {"ConstantOfShape", constantOfShapeOp},
      {"Trilu", triluOp},         {"tl.Concat", concatPairOp}, {"Tile", tileOp},
      {"GatherElements", gatherElementsOp}, {"OneHot", oneHotOp},
  };
  return table;
}

int64_t sliceRunOffset(const onnx::NodeProto& n, const Executor& ex) {
  if (!isOnnxDomain(n.domain()) || n.op_type() != "Slice" || n.input_size() < 1 || n.output_size() != 1)
    return -1;
  Dims strides;
  const int64_t off = sliceLayout(n, ex, &strides);
  const Dims& out = ex.shape(n.output(0));
  const Dims os = contiguousStrides(out);
  for (size_t k = 0; k < out.size(); ++k)
    if (out[k] > 1 && strides[k] != os[k]) return -1;
  return off;
}

bool isRunView(const onnx::NodeProto& n, const Executor& ex) {
  if (!isOnnxDomain(n.domain()) || n.input_size() < 1 || n.output_size() != 1) return false;
  const bool expand = n.op_type() == "Expand", slice = n.op_type() == "Slice";
  if (!expand && !slice && n.op_type() != "Transpose") return false;  // before any lookup: every step asks every node
  const Dims& in = ex.shape(n.input(0));
  if (expand) return in == ex.shape(n.output(0));
  if (slice) return sliceRunOffset(n, ex) == 0;  // a prefix of its input
  Dims order;  // the input axes that are not 1, in output order
  const auto* p = findAttr(n, "perm");
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t a = p ? p->ints(static_cast<int>(i)) : static_cast<int64_t>(in.size() - 1 - i);
    const size_t axis = axisIndex(a, in.size());
    if (axis < in.size() && in[axis] != 1) order.push_back(static_cast<int64_t>(axis));
  }
  return std::is_sorted(order.begin(), order.end());
}

}  // namespace tl
