// The conv family: Conv, 1-3 spatial dims, an item per output element (conv_f32).
#include "runtime/lower/lower.h"

namespace tl {
namespace {

// Conv: spatial dims, kernel, strides, dilations and begin pads padded to 3 (SAME padding
// split as ONNX says: the odd pixel at the end for SAME_UPPER, at the start for SAME_LOWER).
void convOp(const LowerNode& n) {
  requireFloatInputs(n);
  const Dims &x = n.shape(n.in(0)), &w = n.shape(n.in(1)), &y = n.shape(n.out(0));
  const size_t k = x.size() - 2;
  auto ints = [&](const char* name, int64_t fill, size_t count) {
    return tl::attrInts(n.proto, name).value_or(Dims(count, fill));
  };
  const Dims strides = ints("strides", 1, k), dil = ints("dilations", 1, k), pads = ints("pads", 0, 2 * k);
  const std::string autoPad = n.attrString("auto_pad", "NOTSET");
  auto four = [](const Dims& v, size_t from, size_t count, int64_t fill) {
    cl_int4 r = {{static_cast<cl_int>(fill), static_cast<cl_int>(fill), static_cast<cl_int>(fill), static_cast<cl_int>(fill)}};
    for (size_t i = 0; i < count; ++i) r.s[i] = static_cast<cl_int>(v[from + i]);
    return r;
  };
  Dims begin(k, 0);
  for (size_t i = 0; i < k; ++i) {
    if (autoPad == "NOTSET") begin[i] = pads[i];
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      const int64_t total = std::max<int64_t>(0, (y[2 + i] - 1) * strides[i] + dil[i] * (w[2 + i] - 1) + 1 - x[2 + i]);
      begin[i] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
    }
  }
  const int64_t count = elementCount(y);
  Launch l = n.launch("conv_f32");
  l.mem(n.in(0)).mem(n.in(1));
  if (n.hasIn(2)) l.mem(n.in(2)); else l.nullMem();
  l.mem(n.out(0)).i32(count).i32(x[1]).i32(w[0]).i32(n.attrInt("group", 1));
  const cl_int4 in = four(x, 2, k, 1), out = four(y, 2, k, 1), ker = four(w, 2, k, 1);
  const cl_int4 st = four(strides, 0, k, 1), di = four(dil, 0, k, 1), pb = four(begin, 0, k, 0);
  for (const cl_int4* v : {&in, &out, &ker, &st, &di, &pb}) l.raw(v, sizeof(cl_int4));
  l.i32(n.hasIn(2) ? 1 : 0).run1d(count);
}

}  // namespace

const Lowerings& convLowerings() {
  static const Lowerings table = {{"Conv", convOp}};
  return table;
}

}  // namespace tl
