#include "ops/host_eval.h"

#include <cmath>
#include <cstring>
#include <functional>
#include <string>

#include "cli/error.h"
#include "graph/attributes.h"

namespace tl {
namespace {

using Dims = std::vector<int64_t>;

bool byteSized(DType t) { return t == DType::Bool || t == DType::Int32 || t == DType::Int64 || t == DType::Float; }
bool integral(DType t) { return t == DType::Bool || t == DType::Int32 || t == DType::Int64; }
size_t width(DType t) { return dtypeBits(t) / 8; }

// For each element of `out` in order, the input element at sum(index[d] * stride[d]).
std::vector<int64_t> walk(const Dims& out, const Dims& stride) {
  const int64_t n = elementCount(out);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  Dims at(out.size(), 0);
  int64_t src = 0;
  for (int64_t o = 0; o < n; ++o) {
    idx[o] = src;
    for (size_t d = out.size(); d-- > 0;) {  // odometer over the output's index
      if (++at[d] < out[d]) {
        src += stride[d];
        break;
      }
      src -= stride[d] * (out[d] - 1);
      at[d] = 0;
    }
  }
  return idx;
}

// For each element of `out`, the element of `in` that numpy broadcasting reads.
std::vector<int64_t> broadcastIndex(const Dims& in, const Dims& out) {
  if (in.size() > out.size()) throw Error("an operand of rank " + std::to_string(in.size()) + " does not broadcast to rank " + std::to_string(out.size()));
  const size_t off = out.size() - in.size();
  Dims stride(out.size(), 0);
  const Dims cs = contiguousStrides(in);
  for (size_t i = 0; i < in.size(); ++i) {
    if (in[i] != 1 && in[i] != out[off + i]) throw Error("shape " + std::to_string(in[i]) + " does not broadcast to " + std::to_string(out[off + i]));
    stride[off + i] = in[i] == 1 ? 0 : cs[i];
  }
  return walk(out, stride);
}

Tensor blank(const Dims& dims, DType t) {
  Tensor out;
  out.dtype = t;
  out.dims = dims;
  out.bytes.assign(static_cast<size_t>(elementCount(dims)) * width(t), 0);
  return out;
}

void storeInt(Tensor& t, int64_t i, int64_t v) {
  switch (t.dtype) {
    case DType::Float: { float x = static_cast<float>(v); std::memcpy(&t.bytes[i * 4], &x, 4); break; }
    case DType::Int64: std::memcpy(&t.bytes[i * 8], &v, 8); break;
    case DType::Int32: { int32_t x = static_cast<int32_t>(v); std::memcpy(&t.bytes[i * 4], &x, 4); break; }
    default: t.bytes[i] = v != 0; break;
  }
}

// Elementwise ops over broadcast operands; integers compute in int64, floats in double
// (exact for comparisons of float32 values).
Tensor elementwise(const std::string& op, const std::vector<const Tensor*>& in, const Dims& outDims, DType outType) {
  Tensor out = blank(outDims, outType);
  const int64_t n = elementCount(outDims);
  bool allInt = true;
  for (auto* t : in) allInt = allInt && integral(t->dtype);
  std::vector<std::vector<int64_t>> idx, ints;
  std::vector<std::vector<double>> reals;
  for (auto* t : in) {
    idx.push_back(broadcastIndex(t->dims, outDims));
    if (allInt) ints.push_back(t->toInt64()); else reals.push_back(t->toDouble());
  }
  for (int64_t o = 0; o < n; ++o) {
    if (allInt) {
      const int64_t a = ints[0][idx[0][o]], b = in.size() > 1 ? ints[1][idx[1][o]] : 0;
      int64_t r;
      if (op == "Add") r = a + b;
      else if (op == "Sub") r = a - b;
      else if (op == "Mul") r = a * b;
      else if (op == "Equal") r = a == b;
      else if (op == "Less") r = a < b;
      else if (op == "LessOrEqual") r = a <= b;
      else if (op == "Greater") r = a > b;
      else if (op == "GreaterOrEqual") r = a >= b;
      else if (op == "And") r = a && b;
      else if (op == "Or") r = a || b;
      else if (op == "Xor") r = (a != 0) != (b != 0);
      else if (op == "Not") r = !a;
      else throw Error("no host evaluation of " + op);
      storeInt(out, o, r);
    } else {
      const double a = reals[0][idx[0][o]], b = in.size() > 1 ? reals[1][idx[1][o]] : 0;
      bool r;
      if (op == "Equal") r = a == b;
      else if (op == "Less") r = a < b;
      else if (op == "LessOrEqual") r = a <= b;
      else if (op == "Greater") r = a > b;
      else if (op == "GreaterOrEqual") r = a >= b;
      else throw Error("no host evaluation of " + op + " on floats");
      storeInt(out, o, r);
    }
  }
  return out;
}

Tensor cast(const Tensor& in, const Dims& outDims, DType outType) {
  Tensor out = blank(outDims, outType);
  const int64_t n = in.numel();
  if (integral(in.dtype)) {
    const auto v = in.toInt64();
    for (int64_t i = 0; i < n; ++i) storeInt(out, i, v[i]);
  } else {
    const auto v = in.toDouble();  // float to integer truncates toward zero, as ONNX's Cast
    for (int64_t i = 0; i < n; ++i) {
      if (outType == DType::Bool) {
        out.bytes[i] = v[i] != 0;
      } else if (outType == DType::Float) {
        const float f = static_cast<float>(v[i]);
        std::memcpy(&out.bytes[i * 4], &f, 4);
      } else {
        storeInt(out, i, static_cast<int64_t>(std::trunc(v[i])));
      }
    }
  }
  return out;
}

// out[o] = src[pick(o)] element by element, as raw bytes (data movement is exact).
Tensor gatherBytes(const Tensor& src, const Dims& outDims, const std::function<int64_t(int64_t)>& pick) {
  Tensor out = blank(outDims, src.dtype);
  const size_t w = width(src.dtype);
  const int64_t n = elementCount(outDims);
  for (int64_t o = 0; o < n; ++o) std::memcpy(&out.bytes[o * w], &src.bytes[pick(o) * w], w);
  return out;
}

int64_t axisOf(const onnx::NodeProto& node, int64_t rank, int64_t fallback) {
  int64_t a = attrInt(node, "axis").value_or(fallback);
  if (a < 0) a += rank;
  if (a < 0 || a >= rank) throw Error("axis out of range");
  return a;
}

}  // namespace

bool hostEvaluable(const onnx::NodeProto& node, const DTypeOf& dtype) {
  const OpInfo* op = findOp(node);
  if (!op || op->host == Host::None || node.output_size() != 1) return false;
  const DType out = dtype(node.output(0));
  if (!byteSized(out)) return false;
  for (const auto& in : node.input())
    if (!in.empty() && !byteSized(dtype(in))) return false;
  // Float arithmetic stays on the device: its rounding there is the kernels' business.
  if (op->host == Host::Integer) return out == DType::Int64 || out == DType::Int32;
  return true;
}

Tensor evaluateOnHost(const onnx::NodeProto& node, const std::vector<const Tensor*>& in, const Dims& outDims,
                      DType outType) {
  const std::string& op = node.op_type();
  auto need = [&](size_t i) -> const Tensor& {
    if (i >= in.size() || !in[i]) throw Error(op + " needs input " + std::to_string(i));
    return *in[i];
  };
  if (const OpInfo* info = findOp(node); info && info->view == View::Always) {  // the same elements
    Tensor out = need(0);
    out.dims = outDims;
    return out;
  }
  if (op == "Cast") return cast(need(0), outDims, outType);
  if (op == "Transpose") {  // output axis k walks input axis perm[k]
    const Tensor& x = need(0);
    const size_t rank = x.dims.size();
    std::vector<int64_t> perm(rank);
    for (size_t k = 0; k < rank; ++k) perm[k] = static_cast<int64_t>(rank - 1 - k);
    if (auto p = attrInts(node, "perm")) perm = *p;
    if (perm.size() != rank) throw Error("Transpose's perm has " + std::to_string(perm.size()) + " axes for rank " + std::to_string(rank));
    const Dims is = contiguousStrides(x.dims);
    Dims stride(rank);
    for (size_t k = 0; k < rank; ++k) stride[k] = is.at(static_cast<size_t>(perm[k]));
    const auto idx = walk(outDims, stride);
    return gatherBytes(x, outDims, [&](int64_t o) { return idx[o]; });
  }
  if (op == "Expand") {
    const auto idx = broadcastIndex(need(0).dims, outDims);
    return gatherBytes(need(0), outDims, [&](int64_t o) { return idx[o]; });
  }
  if (op == "Where") {
    const auto c = need(0).toInt64();
    const auto ic = broadcastIndex(need(0).dims, outDims), ix = broadcastIndex(need(1).dims, outDims),
               iy = broadcastIndex(need(2).dims, outDims);
    Tensor out = blank(outDims, outType);
    const size_t w = width(outType);
    for (int64_t o = 0; o < elementCount(outDims); ++o) {
      const Tensor& from = c[ic[o]] ? *in[1] : *in[2];
      std::memcpy(&out.bytes[o * w], &from.bytes[(c[ic[o]] ? ix[o] : iy[o]) * w], w);
    }
    return out;
  }
  if (op == "Gather") {
    const Tensor& data = need(0);
    const auto indices = need(1).toInt64();
    const int64_t rank = static_cast<int64_t>(data.dims.size());
    const int64_t axis = axisOf(node, rank, 0);
    const int64_t inner = elementsAfter(data.dims, static_cast<size_t>(axis));
    const int64_t len = data.dims[axis], count = static_cast<int64_t>(indices.size());
    return gatherBytes(data, outDims, [&](int64_t o) {
      const int64_t r = o % inner, k = (o / inner) % count, q = o / inner / count;
      int64_t j = indices[k];
      if (j < 0) j += len;
      if (j < 0 || j >= len) throw Error("Gather index " + std::to_string(indices[k]) + " is outside [0, " + std::to_string(len) + ")");
      return (q * len + j) * inner + r;
    });
  }
  if (op == "Concat") {
    const int64_t rank = static_cast<int64_t>(outDims.size());
    const int64_t axis = axisOf(node, rank, 0);
    const int64_t inner = elementsAfter(outDims, static_cast<size_t>(axis));
    Tensor out = blank(outDims, outType);
    const size_t w = width(outType);
    int64_t outer = 1;
    for (int64_t d = 0; d < axis; ++d) outer *= outDims[d];
    int64_t at = 0;  // elements of the output's axis run written so far
    for (const Tensor* t : in) {
      if (!t) continue;
      const int64_t run = t->dims[axis] * inner;
      for (int64_t q = 0; q < outer; ++q)
        std::memcpy(&out.bytes[(q * outDims[axis] * inner + at) * w], &t->bytes[q * run * w], run * w);
      at += run;
    }
    return out;
  }
  if (op == "ConstantOfShape") {
    Tensor out = blank(outDims, outType);
    if (const auto* a = findAttr(node, "value")) {
      const Tensor v = readTensor(a->t(), {});
      const size_t w = width(outType);
      for (int64_t o = 0; o < elementCount(outDims); ++o) std::memcpy(&out.bytes[o * w], v.bytes.data(), w);
    }
    return out;
  }
  if (op == "Range") {
    const int64_t start = need(0).toInt64().at(0), delta = need(2).toInt64().at(0);
    Tensor out = blank(outDims, outType);
    for (int64_t o = 0; o < elementCount(outDims); ++o) storeInt(out, o, start + o * delta);
    return out;
  }
  std::vector<const Tensor*> operands;
  for (size_t i = 0; i < in.size(); ++i) operands.push_back(&need(i));
  return elementwise(op, operands, outDims, outType);
}

}  // namespace tl
