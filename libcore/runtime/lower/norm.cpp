// The norm family: tl.RMSNorm, LayerNormalization, Softmax and LogSoftmax, each a row
// at a time. Variants: a work-group per row on GPUs (kernels/reduce.cl's RED_WG of 64,
// NORM_WG of 256 for RMSNorm), an item per row on CPUs.
#include <algorithm>

#include "runtime/lower/lower.h"

namespace tl {
namespace {

struct RowCase {
  bool gpu;
  int64_t rows;
};
bool onGpu(const RowCase& c) { return c.gpu; }
bool always(const RowCase&) { return true; }
Geometry groupOf64(const RowCase& c) { return items(c.rows * 64); }
Geometry groupOf256(const RowCase& c) { return grid(static_cast<size_t>(c.rows) * 256, 1, 1, 256, 1); }
Geometry itemPerRow(const RowCase& c) { return items(c.rows); }

const Variant<RowCase> kRmsNorm[] = {
    {"rmsnorm_f32_wg", onGpu, groupOf256, "GPU: a work-group of 256 per row"},
    {"rmsnorm_f32", always, itemPerRow, "CPU: an item per row"},
};
const Variant<RowCase> kLayerNorm[] = {
    {"layernorm_f32_wg", onGpu, groupOf64, "GPU: a work-group of 64 per row"},
    {"layernorm_f32", always, itemPerRow, "CPU: an item per row"},
};
const Variant<RowCase> kSoftmax[] = {
    {"softmax_f32_wg", onGpu, groupOf64, "GPU: a work-group of 64 per row"},
    {"softmax_f32", always, itemPerRow, "CPU: an item per row"},
};

template <size_t N>
std::pair<Launch, Geometry> rowLaunch(const LowerNode& n, const Variant<RowCase> (&rows)[N], int64_t count) {
  const RowCase c{n.gpu(), count};
  const auto& v = chooseVariant(rows, c, n);
  return {n.launch(v.kernel, v.why), v.geometry(c)};
}

void softmaxOp(const LowerNode& n) {
  const Dims& d = n.shape(n.in(0));
  size_t k = n.axis(n.attrInt("axis", -1), d.size());
  const int64_t inner = elementsAfter(d, k);
  int64_t rows = elementCount(d) / std::max<int64_t>(d[k], 1);
  auto [l, g] = rowLaunch(n, kSoftmax, rows);
  l.mem(n.in(0)).mem(n.out(0)).i32(rows).i32(d[k]).i32(inner).i32(n.proto.op_type() == "LogSoftmax" ? 1 : 0).run(g);
}

void layerNormOp(const LowerNode& n) {
  const Dims& d = n.shape(n.in(0));
  size_t k = n.axis(n.attrInt("axis", -1), d.size());
  int64_t cols = 1;
  for (size_t i = k; i < d.size(); ++i) cols *= d[i];
  if (elementCount(n.shape(n.in(1))) != cols || (n.hasIn(2) && elementCount(n.shape(n.in(2))) != cols))
    throw Error("LayerNormalization with broadcast scale or bias has no kernel", ExitCode::BadInput);
  int64_t rows = elementCount(d) / std::max<int64_t>(cols, 1);
  const bool stats = n.hasOut(1) && n.hasOut(2);
  if (n.hasOut(1) != n.hasOut(2)) throw Error("LayerNormalization needs both or neither statistics outputs", ExitCode::BadInput);
  auto [l, g] = rowLaunch(n, kLayerNorm, rows);
  l.mem(n.in(0)).mem(n.in(1));
  if (n.hasIn(2)) l.mem(n.in(2)); else l.nullMem();
  l.mem(n.out(0));
  if (stats) l.mem(n.out(1)).mem(n.out(2)); else l.nullMem().nullMem();
  l.i32(rows).i32(cols).f32(n.attrFloat("epsilon", 1e-5f)).i32(n.hasIn(2) ? 1 : 0).i32(stats ? 1 : 0).run(g);
}

// tl.RMSNorm (docs/ops.md): rows of the trailing dim, scaled; with a residual input, of
// x + residual, which output 1 (when present) receives.
void rmsNormOp(const LowerNode& n) {
  requireFloatInputs(n);
  const Dims& d = n.shape(n.in(0));
  const int64_t cols = d.empty() ? 1 : d.back(), rows = elementCount(d) / std::max<int64_t>(cols, 1);
  rmsNorm(n, n.in(0), n.hasIn(2) ? n.in(2) : "", n.in(1), n.out(0), n.hasOut(1) ? n.out(1) : "", rows, cols,
          n.attrFloat("epsilon", 1e-5f));
}

}  // namespace

void rmsNorm(const LowerNode& n, const std::string& x, const std::string& residual, const std::string& scale,
             const std::string& y, const std::string& sum, int64_t rows, int64_t cols, float eps) {
  auto [l, g] = rowLaunch(n, kRmsNorm, rows);
  l.mem(x);
  if (!residual.empty()) l.mem(residual); else l.nullMem();
  l.mem(scale).mem(y);
  if (!sum.empty()) l.mem(sum); else l.nullMem();
  l.i32(rows).i32(cols).f32(eps).i32(residual.empty() ? 0 : 1).i32(sum.empty() ? 0 : 1).run(g);
}

const Lowerings& normLowerings() {
  static const Lowerings table = {
      {"tl.RMSNorm", rmsNormOp},
      {"LayerNormalization", layerNormOp},
      {"Softmax", softmaxOp},
      {"LogSoftmax", softmaxOp},
  };
  return table;
}

}  // namespace tl
