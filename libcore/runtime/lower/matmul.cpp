// The matmul family: MatMul, Gemm, tl.MatMul (float weights) and tl.QMatMul (quantized),
// each a table of variants below. The decode variants (GEMVs) apply a tl op's RMSNorm
// prologue and GLU epilogue themselves; the others run those in steps through scratch
// (matmulInSteps).
#include <algorithm>
#include <functional>

#include "graph/tl_ops.h"
#include "runtime/kernel_library.h"
#include "runtime/lower/lower.h"

namespace tl {
namespace {

// A (Q)MatMul's outputs and what its kernel adds as it stores them (kernels/common.cl's
// SPLIT_ARGS): the tensors C, C1, C2 with their widths (one output is the plain case),
// the bias and the residual ("" for none).
struct MatMulOut {
  std::vector<std::string> outs;
  Dims widths;
  std::string bias, residual;
  bool widthsOf(int64_t m) const {
    return std::all_of(widths.begin(), widths.end(), [m](int64_t w) { return w % m == 0; });
  }
};

void setOutputs(Launch& l, const MatMulOut& o) {
  l.mem(o.outs[0]);
  if (o.outs.size() > 1) l.mem(o.outs[1]); else l.nullMem();
  if (o.outs.size() > 2) l.mem(o.outs[2]); else l.nullMem();
  l.i32(o.widths[0]).i32(o.widths.size() > 1 ? o.widths[1] : 0);
  if (o.bias.empty()) l.nullMem(); else l.mem(o.bias);
  if (o.residual.empty()) l.nullMem(); else l.mem(o.residual);
}

// A tl.MatMul's or tl.QMatMul's outputs (`split`, or the one output of N columns, N / 2
// with a GLU), bias and residual.
MatMulOut matmulOutputs(const LowerNode& n, int64_t N) {
  MatMulOut o;
  for (int i = 0; i < n.proto.output_size(); ++i) o.outs.push_back(n.out(static_cast<size_t>(i)));
  o.widths = {gluKind(n.proto) ? N / 2 : N};
  if (const auto* s = n.attr("split")) o.widths.assign(s->ints().begin(), s->ints().end());
  if (o.outs.size() > 3 || o.widths.size() != o.outs.size())
    throw Error("a split MatMul needs one width per output, at most 3", ExitCode::BadInput);
  o.bias = matmulOptional(n.proto, MatMulInput::Bias);
  o.residual = matmulOptional(n.proto, MatMulInput::Residual);
  return o;
}

// The norm's arguments: its scale or null, its epsilon. `normed`: A comes normed
// (normHandoff, prep_f16): no scale to apply in the kernel.
void setNormArgs(Launch& l, const LowerNode& n, bool normed = false) {
  const std::string scale = matmulOptional(n.proto, MatMulInput::NormScale);
  if (scale.empty() || normed) l.nullMem(); else l.mem(scale);
  l.f32(n.attrFloat("norm_epsilon", 1e-5f));
}
// The decode kernels' GEMV_ARGS (kernels/common.cl): the norm's, then the GLU kind.
void setGemvArgs(Launch& l, const LowerNode& n, bool normed = false) {
  setNormArgs(l, n, normed);
  l.i32(gluKind(n.proto));
}

// Runs a (Q)MatMul whose kernel lacks the node's RMSNorm prologue or GLU epilogue in
// steps: the norm of A's rows into scratch, the product into two halves in scratch, the
// GLU of those. `product(a, outputs)` enqueues the kernel; only it runs when the node has
// neither.
void matmulInSteps(const LowerNode& n, std::string a, int64_t M, int64_t K, int64_t N, MatMulOut o,
                   const std::function<void(const std::string&, const MatMulOut&)>& product,
                   const std::function<bool(const std::string&)>& glued = nullptr) {
  const std::string scale = matmulOptional(n.proto, MatMulInput::NormScale);
  if (!scale.empty()) {
    const std::string normed = n.proto.name() + "#normed";
    n.ex.scratch(normed, static_cast<size_t>(M * K) * 4);
    rmsNorm(n, a, "", scale, normed, "", M, K, n.attrFloat("norm_epsilon", 1e-5f));
    a = normed;
  }
  const int kind = gluKind(n.proto);
  if (!kind) return product(a, o);
  if (glued && glued(a)) return;  // a product kernel that applies the GLU as it stores
  MatMulOut halves = o;
  halves.outs = {n.proto.name() + "#gate", n.proto.name() + "#up"};
  halves.widths = {N / 2, N / 2};
  for (const auto& h : halves.outs) n.ex.scratch(h, static_cast<size_t>(M * N / 2) * 4);
  product(a, halves);
  glu(n, halves.outs[0], halves.outs[1], o.outs[0], M * N / 2, kind);
}

// A tl.MatMul or tl.QMatMul of one output, no residual, over rows of one sequence, whose
// coming runs need only the last R of its M rows (Executor::keepLastRows: a causal LM's
// logits): A's last rows go to a stand-in, the node is lowered on it into another, and
// those rows are copied to their place, the ones before left unwritten. False where the
// node does not qualify or R covers M (a decode step: nothing extra launched).
bool lowerLastRows(const LowerNode& n, void (*lower)(const LowerNode&)) {
  const int64_t R = n.ex.lastRowsKept(n.out(0));
  if (R <= 0 || n.proto.output_size() != 1 || !matmulOptional(n.proto, MatMulInput::Residual).empty()) return false;
  const Dims& a = n.shape(n.in(0));
  const Dims& c = n.shape(n.out(0));
  if (a.size() < 2 || c.size() != a.size() || a[a.size() - 2] * a.back() != elementCount(a)) return false;
  const int64_t M = a[a.size() - 2], K = a.back(), N = c.back();
  if (M <= R || c[c.size() - 2] != M) return false;
  const std::string in = n.proto.name() + "#last_rows", out = n.proto.name() + "#last_rows_out";
  Dims ad = a, cd = c;
  ad[ad.size() - 2] = cd[cd.size() - 2] = R;
  n.ex.scratchTensor(in, ad);
  n.ex.scratchTensor(out, cd);
  copyRegion(n, n.in(0), in, {R * K}, (M - R) * K, {1}, 0, {1});
  onnx::NodeProto rows = n.proto;
  rows.set_input(0, in);
  rows.set_output(0, out);
  lower(LowerNode{n.ex, n.index, rows});
  copyRegion(n, out, n.out(0), {R * N}, 0, {1}, (M - R) * N, {1});
  return true;
}

// ---- float products: MatMul, Gemm, and tl.MatMul off its decode kernels ----

struct MatMulCase {
  bool gpu, transB;
  int64_t M, N, batch;
  const MatMulOut* out;
};
constexpr size_t up16(int64_t x) { return static_cast<size_t>((x + 15) / 16 * 16); }
const Variant<MatMulCase> kMatMul[] = {
    {"matmul_f32", [](const MatMulCase& c) { return c.gpu && c.M >= 16; },
     [](const MatMulCase& c) { return grid(up16(c.N), up16(c.M), static_cast<size_t>(c.batch), 16, 16); },
     "GPU, 16 rows or more: 16x16 tiles through local memory"},
    {"matmul_1x8_f32",
     [](const MatMulCase& c) { return !c.gpu && !c.transB && c.M < 4 && c.out->widthsOf(8); },
     [](const MatMulCase& c) { return grid(up16(c.N / 8), static_cast<size_t>(c.M), static_cast<size_t>(c.batch), 16, 1); },
     "CPU, under 4 rows: 8 columns of one row per item"},
    {"matmul_4x4_f32", [](const MatMulCase& c) { return !c.gpu && !c.transB && c.out->widthsOf(4); },
     [](const MatMulCase& c) {
       return grid(up16(c.N / 4), static_cast<size_t>((c.M + 3) / 4), static_cast<size_t>(c.batch), 16, 1);
     },
     "CPU, B's rows contiguous: 4x4 register blocks"},
    {"matmul_rows_f32", [](const MatMulCase&) { return true; },
     [](const MatMulCase& c) { return grid(up16(c.N), static_cast<size_t>(c.M), static_cast<size_t>(c.batch), 16, 1); },
     "one output per item (any layout)"},
};
// A tl.MatMul's product with its GLU epilogue (no residual: the GLU's output takes none).
const Variant<MatMulCase> kGluMatMul[] = {
    {"matmul_glu_f32", [](const MatMulCase& c) { return c.gpu && c.M >= 16 && c.out->residual.empty(); },
     [](const MatMulCase& c) { return grid(up16(c.N / 2), up16(c.M), static_cast<size_t>(c.batch), 16, 16); },
     "GPU, 16 rows or more, a GLU: 16x16 tiles of the gate's and the up's columns, gated as stored"},
    {"matmul_4x4_glu_f32",
     [](const MatMulCase& c) { return !c.gpu && !c.transB && c.M >= 4 && c.out->widthsOf(4) && c.out->residual.empty(); },
     [](const MatMulCase& c) { return grid(up16(c.N / 8), static_cast<size_t>((c.M + 3) / 4), static_cast<size_t>(c.batch), 16, 1); },
     "CPU, 4 rows or more, a GLU: 4x4 blocks of the gate's and the up's columns, gated as stored"},
};

// A float product through kMatMul's rows; with a GLU kind, through kGluMatMul's (its
// outputs then the GLU's, half B's columns wide), returning false where none fits.
bool matmul(const LowerNode& n, const std::string& a, Dims ad, const std::string& b, Dims bd, const MatMulOut& o,
            bool transA, bool transB, int glu = 0) {
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  int64_t M = transA ? ad[ad.size() - 1] : ad[ad.size() - 2];
  int64_t K = transA ? ad[ad.size() - 2] : ad[ad.size() - 1];
  int64_t N = transB ? bd[bd.size() - 2] : bd[bd.size() - 1];
  Dims ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  size_t r = std::max(ab.size(), bb.size());
  Dims batch(r, 1);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i + ab.size() >= r ? ab[i + ab.size() - r] : 1;
    int64_t y = i + bb.size() >= r ? bb[i + bb.size() - r] : 1;
    batch[i] = std::max(x, y);
  }
  // Batch strides in elements of whole matrices, 0 where broadcast.
  auto batchStrides = [&](const Dims& bdims, int64_t matrix) {
    Dims s = broadcastStrides(bdims, batch);
    for (auto& x : s) x *= matrix;
    return s;
  };
  const int64_t aRows = ad[ad.size() - 2], aCols = ad[ad.size() - 1];
  const int64_t bRows = bd[bd.size() - 2], bCols = bd[bd.size() - 1];
  const MatMulCase c{n.gpu(), transB, M, N, elementCount(batch), &o};
  const Variant<MatMulCase>* v = glu ? findVariant(kGluMatMul, c, n) : &chooseVariant(kMatMul, c, n);
  if (!v) return false;
  Launch l = launchVariant(n, *v);
  l.mem(a).mem(b);
  setOutputs(l, o);
  l.i32(M)
      .i32(N)
      .i32(K)
      .i32(transA ? 1 : aCols)
      .i32(transA ? aCols : 1)
      .i32(transB ? 1 : bCols)
      .i32(transB ? bCols : 1)
      .vec(pad8(batch, 1))
      .vec(pad8(batchStrides(ab, aRows * aCols), 0))
      .vec(pad8(batchStrides(bb, bRows * bCols), 0));
  if (glu) l.i32(glu);
  l.run(v->geometry(c));
  return true;
}

void matmulOp(const LowerNode& n) {
  if (n.dtype(n.in(0)) != DType::Float) throw Error("MatMul has kernels for float32 only", ExitCode::BadInput);
  const Dims& b = n.shape(n.in(1));
  matmul(n, n.in(0), n.shape(n.in(0)), n.in(1), b, {{n.out(0)}, {b.size() == 1 ? 1 : b.back()}, "", ""}, false, false);
}

void gemmOp(const LowerNode& n) {
  if (n.attrFloat("alpha", 1.0f) != 1.0f || n.attrFloat("beta", 1.0f) != 1.0f)
    throw Error("Gemm with alpha or beta other than 1 has no kernel", ExitCode::BadInput);
  const bool transB = n.attrInt("transB", 0) != 0;
  const Dims& b = n.shape(n.in(1));
  const int64_t N = transB ? b[0] : b[1];
  // A bias of N values is the kernel's epilogue; any other C broadcast is an add after.
  const bool epilogue = n.hasIn(2) && elementCount(n.shape(n.in(2))) == N && !n.shape(n.in(2)).empty() &&
                        n.shape(n.in(2)).back() == N && n.shape(n.in(2)).size() <= 2 && n.dtype(n.in(2)) == DType::Float;
  matmul(n, n.in(0), n.shape(n.in(0)), n.in(1), b, {{n.out(0)}, {N}, epilogue ? n.in(2) : "", ""},
         n.attrInt("transA", 0) != 0, transB);
  if (n.hasIn(2) && !epilogue) binary(n, "add", n.out(0), n.in(2), n.out(0));  // each element reads then writes itself
}

// ---- tl.MatMul's decode kernels: the norm and GLU inside ----

struct GemvCase {
  bool gpu, transB;
  int glu;
  int64_t M, N;
  const MatMulOut* out;
  int64_t width() const { return glu ? N / 2 : N; }
};
// gemv_f32: 4 columns per item, 64 items by FGEMV_KS (kernels/matmul.cl) splits of K.
Geometry gemvF32(const GemvCase& c) {
  return grid(static_cast<size_t>((c.width() / 4 + 63) / 64 * 64), 16, 1, 64, 16);
}
bool gpuGemv(const GemvCase& c) { return c.gpu && c.M <= kGpuDecodeRows && !c.transB && c.N % (c.glu ? 8 : 4) == 0; }
// A row's mode, bits: its kernel merges the attention's splits; it applies the node's norm
// and GLU itself (GEMV_ARGS); it reads both operands in fp16, made first by one launch
// (prep_f16_<scheme>: the weights dequantized into a scratch shared by the nodes of one
// weight shape, A's rows normed into one shared by the nodes of one width); it can
// hand an RMSNorm on or take one handed (HAND_ARGS: normHandoff); it splits K where its
// tiles are few (KSPLIT_ARGS: QCase::kSlice); it rounds A to int8 itself before its tiles
// (into one scratch per width: kernels/gemm.cl's i8_rows_in_launch); it does the RoPE's
// work in its store (ROPE_EPI_ARGS: ropeEpilogueArgs); it is a TASK_KERNEL (Launch::task).
constexpr int kMerges = 1, kNative = 2, kHalves = 4, kHands = 8, kSplitK = 16, kInt8Rows = 32, kRope = 64, kTask = 128;
const Variant<GemvCase> kWeightGemv[] = {
    {"gemv_f32_m1", [](const GemvCase& c) { return gpuGemv(c) && c.M == 1; }, gemvF32,
     "GPU decode, one row: 4 columns an item, the norm and GLU inside"},
    {"gemv_f32", gpuGemv, gemvF32, "GPU decode, up to 4 rows: 4 columns an item, the norm and GLU inside"},
    // PoCL deals a launch's groups out among its threads in chunks, and an item walking K
    // for 8 columns read half a cache line a row: bytellama's qkv took 54 µs in 4 groups of
    // 16 such items, 13-22 µs in items of 32 columns; 64 was faster still over the whole
    // step (docs/tl-bench.md, session 9).
    {"gemv_rows8_f32",
     [](const GemvCase& c) {
       return !c.gpu && c.M <= kCpuDecodeRows && !c.transB && c.width() % 8 == 0 && c.out->widthsOf(8);
     },
     [](const GemvCase& c) { return grid(static_cast<size_t>((c.width() / 8 + 7) / 8), static_cast<size_t>(c.M), 1, 1, 1); },
     "CPU decode: 64 columns of a row per work-group, the norm and GLU inside", kTask},
};

// ---- tl.QMatMul ----

// F32: tl.MatMul's float weights [K, N] through the prefill tiles (floatCase), one more
// form of W for kernels/gemm.cl.
enum class Scheme { E0m4, Int4, Q8, Q3h, W4a8, F32 };
Scheme schemeOf(const LowerNode& n) {
  const std::string s = n.attrString("scheme", "");
  if (s == "e0m4") return Scheme::E0m4;
  if (s == "int4") return Scheme::Int4;
  if (s == "q8") return Scheme::Q8;
  if (s == "q3h") return Scheme::Q3h;
  if (s == "w4a8") return Scheme::W4a8;
  throw Error("tl.QMatMul has no kernels for scheme '" + s + "'", ExitCode::BadInput);
}

struct QCase {
  Scheme scheme;
  bool gpu = false, merged = false, norm = false;  // norm: the node's RMSNorm prologue
  bool int8 = false;  // A may be rounded to int8 (Device::int8Activations)
  bool halvesOk = true;  // the fp16 weights' rows may be taken (Device::halvesRows)
  bool handed = false;  // ... handed to it by the GEMV that writes its A (normHandoff)
  bool rope = false;  // its q, k and v go to a tl.RoPE over in-place caches (ropeForGemm)
  bool kvQ8 = false;  // the plan's caches are 8-bit (Executor::kvType)
  int glu = 0;
  int64_t M = 0, N = 0, K = 0, G = 0, rowBytes = 0, computeUnits = 0;
  int64_t seq = 0;  // A's rows per batch row: 1 at a decode step of a batch of sequences
  // CPUs: rows a decode GEMV takes (each row's sums as a row alone has them, so that a
  // sequence decoded in a batch gets the tokens it would alone: lm/batch.h).
  bool cpuDecode() const { return !gpu && (M <= kCpuDecodeRows || seq == 1); }
  // GPU decode: a work-group per 4 columns (M <= 4, groups of a multiple of 8 weights).
  bool gemv() const { return gpu && M <= kGpuDecodeRows && G % 8 == 0; }
  // ... reading 16-level codes 32 at a time (e0m4, int4).
  bool gemv16() const {
    return gemv() && (scheme == Scheme::E0m4 || scheme == Scheme::Int4) && K % 32 == 0 && G % 32 == 0;
  }
  // One row over wide weights: 8 columns a work-group (kernels/qmatmul.cl's QGEMV_WIDE)
  // where 4 would launch over 16 groups per compute unit; fewer groups left the H100 idle.
  bool wide() const { return gemv16() && M == 1 && N / 4 > 16 * computeUnits; }
  // ... or with A rounded to int8 a block of 32 and the codes' products by dp4a
  // (qgemv_wide_i8_*, NVIDIA), over wide weights and from K = 4096 (where 8 columns a
  // group still make enough groups): H200, Llama-2-7B's one-row GEMVs 6-23% faster,
  // TinyLlama's 2-9% (docs/tl-bench.md). Not merging the attention's splits.
  bool int8Gemv() const { return int8 && gemv16() && M == 1 && !merged && (wide() || K >= 4096); }
  // ... 16 columns a work-group where that makes 4 a compute unit (qgemv_wide16_i8_*:
  // A rounded, and the norm's weights read, once for twice the columns; H200, TinyLlama's
  // and Llama-2-7B's gate/up and 7B's QKV 9-38% faster, fewer groups slower).
  bool int8Gemv16() const { return int8Gemv() && N / 16 >= 4 * computeUnits; }
  // Prefill through kernels/gemm.cl's tiles and tasks.
  bool tiled() const { return coded() && (gpu ? M > kGpuDecodeRows : !cpuDecode()); }
  // What gemm.cl's kernels read: chunks of 8 codes that share a scale, code rows its
  // whole-word loads may read (dequant.cl's LOAD).
  bool coded() const {
    const int64_t align = scheme == Scheme::Q8 ? 8 : scheme == Scheme::Q3h ? 1 : 4;
    return K % 8 == 0 && G % 8 == 0 && rowBytes % align == 0 && scheme != Scheme::W4a8;
  }
  bool gemm() const { return gpu && tiled(); }
  // Whether the prefill rows here may take a tl.RoPE's work (ropeForGemm): the GPU tiles,
  // or the CPU tasks (their 16 pairs of columns hold no 8-bit cache's block of 32 dims).
  bool ropeRows() const { return gpu ? gemm() : tiled() && !kvQ8; }
  // ... in 128 x 128 tiles where they occupy three quarters of the compute units, else 64 x
  // 64 (4 x 4 an item: 44-46% of the fp32 peak where the 128s ran 52-62% on an H200, so a
  // few idle units cost less than the smaller tiles).
  int64_t tiles128() const { return static_cast<int64_t>(up(M, 128) * up(N, 128)); }
  bool gemm128() const { return gemm() && tiles128() * 4 >= computeUnits * 3; }
  // The tensor-core tiles: 128 x 128 past 128 rows where they make at least half as many
  // work-groups as the device has compute units. H100 (132 units), e0m4, M = 1024: 2048 x
  // 2048 0.104 -> 0.083 ms, 5632 x 2048 0.255 -> 0.199 in 128 tiles where 64 were taken;
  // at M = 128, TinyLlama's 2048 x 11264 in 88 tiles of 128 lost to 352 of 64 (pp128
  // 18,067 -> 16,470 tok/s; docs/tl-bench.md).
  bool mma128() const { return gemm() && M > 128 && tiles128() * 2 >= computeUnits; }
  // ... and from kHalvesRows rows, over the weights dequantized once into fp16 first: each
  // weight is then read by M / 128 tiles as halves, not dequantized by each. H100, e0m4,
  // M = 256, the 128-tile shapes of TinyLlama, Qwen2-0.5B and Llama-2-7B: 2048 x 11264
  // 0.161 -> 0.117 ms, 896 x 9728 0.082 -> 0.060, 4096 x 12288 0.304 -> 0.220, 4096 x
  // 22016 0.454 -> 0.420; at 128 rows the in-tile tiles win at three of those four
  // (docs/tl-bench.md). Where A may be rounded to int8, codes the int8 rows take (below)
  // take them at every row count instead.
  static constexpr int64_t kHalvesRows = 256;
  bool halves() const { return halvesOk && mma128() && M >= kHalvesRows && !int8Codes() && scheme != Scheme::F32; }
  // Codes of uniform levels times A rounded to int8 (qgemm64_mma_i8_*, A's int8 rows made in the
  // same launch): Llama-2-7B's four GEMMs at 128 rows 612 -> 468 µs on an
  // H100 (its 4 layers' pp128 37.6k -> 50.9k tok/s), A's int8 steps per 32 k costing
  // 1.2-1.5% of the largest output against the portable path where the fp16 rows cost
  // 0.03% (docs/tl-bench.md). The tiles take 128 k a stage in one group, from 16-byte aligned
  // code rows; A's step is one a stage (kInt8Block), its products scaled once a stage, not
  // each 32 k: H200, Llama-2-7B's shapes at 128 rows 1.31-1.45x faster, the error from A's
  // rounding about twice as large where a few channels are 30 times the rest (1.0% -> 2.0%
  // rms of the output, against the 4-bit weights' own ~10%; docs/tl-bench.md). From 256
  // rows too, one launch a GEMM where the fp16 operands took two: H200, e0m4 fused and
  // planned, pp1024 TinyLlama-1.1B dims 55,982 -> 68,034 tok/s, Qwen2-0.5B 95,780 ->
  // 114,271, Llama-2-7B 12,428 -> 14,314 (docs/tl-bench.md).
  // q8's bytes likewise (s8 x s8) and q3h's pairs (decoded into bytes as the tiles stage
  // them), from 256 rows too, and K a multiple of 64 (the last block's second half zeros):
  // one launch a GEMM where prep_f16 + qgemm_mma_f16 took two, for launch parity; not yet
  // the faster at 1024 rows (H200, Llama-2-7B's shapes, d502d78 with one work-group a
  // compute unit: q8 0.241-0.577 ms against prep + f16's 0.194-0.482, q3h 0.312-0.796;
  // faster than the in-tile fp16 rows at 128; docs/tl-bench.md).
  static constexpr int64_t kInt8Block = 128;  // kernels/gemm.cl's I8_KS
  // Groups of 32 or 64 too, their sums scaled as each ends within a stage (A's step still
  // one a 128 k): with K not a multiple of 128, rows of their own (qgemm64_mma_i8_ragged_*),
  // so that the others keep their stage loop's products back to back and no K checks
  // (kernels/gemm.cl's QGEMM_I8: e0m4's 125 registers in clang's PTX where one kernel for
  // both took 138, two 256-item work-groups a compute unit, not one; NVIDIA's compiler: 94).
  bool int8Codes() const {
    const bool cpAsync = scheme != Scheme::Q3h;  // (the others' code rows come by 16-byte cp.async)
    const bool groups = G % kInt8Block == 0 || G == 32 || G == 64;
    return int8 && gemm() && scheme != Scheme::F32 && K % 64 == 0 && groups && (!cpAsync || rowBytes % 16 == 0);
  }
  int64_t int8Blocks() const { return (K + kInt8Block - 1) / kInt8Block; }  // (A's steps a row)
  bool int8Rows() const { return int8Codes() && !halves(); }
  bool int8Ragged() const { return G < kInt8Block || K % kInt8Block != 0; }
  // The in-tile tensor-core rows (qgemm_mma_*, qgemm64_mma_*) split K where their tiles
  // are fewer than the compute units (kernels/gemm.cl's KSPLIT_ARGS): up to kMaxSlices
  // slices of at least kMinSlice k, until tiles x slices reach kSplitWaves work-groups a
  // unit. H100, e0m4, pp128: TinyLlama-1.1B dims 17,474 -> 23,454 tok/s, Qwen2-0.5B 22,817
  // -> 34,553, Llama-2-7B's 4 layers 35,842 -> 38,950; 128-wide tiles split from 65 rows
  // instead were slower (20,657, 24,722, 36,159); splitting up to twice the units' tiles cost
  // Qwen2's pp1024 3% (docs/tl-bench.md). The k of one slice, a multiple of 64 (K itself
  // when unsplit), and how many there are.
  static constexpr int64_t kMaxSlices = 8, kMinSlice = 256, kSplitWaves = 2;
  int64_t mmaTile() const { return mma128() && !int8Rows() ? 128 : 64; }
  int64_t mmaTiles() const { return static_cast<int64_t>(up(M, mmaTile()) * up(N, mmaTile())); }
  int64_t kSlice() const {
    const int64_t tiles = mmaTiles();
    if (tiles >= computeUnits) return K;
    const int64_t want = std::min({kMaxSlices, (kSplitWaves * computeUnits + tiles - 1) / tiles, K / kMinSlice});
    const int64_t step = int8Rows() ? 128 : 64;  // (the int8 tiles' stage)
    return want <= 1 ? K : static_cast<int64_t>(up(static_cast<int64_t>(up(K, want)), step) * step);
  }
  int64_t kSlices() const { return K > kSlice() ? static_cast<int64_t>(up(K, kSlice())) : 1; }
  // KP's floats (kernels/gemm.cl's KSPLIT_GATHER): per tile and slice, 256 items' sums and
  // their rows' sums of squares.
  int64_t kPartials() const {
    const int64_t T = mmaTile(), per = (T / 32) * (T / 32) * 4 + T / 64;
    return mmaTiles() * kSlices() * per * 256;
  }
};
// Cols weight columns per work-group of 64 items (with a GLU Cols / 2 gates and their ups).
template <int64_t Cols> Geometry wideGeometry(const QCase& c) {
  return grid((c.glu ? up(c.N / 2, Cols / 2) : up(c.N, Cols)) * 64, 1, 1, 64, 1);
}
// 4 weight columns per work-group (2 and their up columns with a GLU), of 64 items
// (kernels/qmatmul.cl's GEMV_WG) or, one row without a norm, 128 (GEMV16_WG).
template <size_t Items> Geometry gemvColumns(const QCase& c) {
  return grid((c.glu ? up(c.N / 2, 2) : up(c.N, 4)) * Items, 1, 1, Items, 1);
}
constexpr auto gemvGeometry = gemvColumns<64>;
constexpr auto gemv16PlainGeometry = gemvColumns<128>;
Geometry w4a8GemvGeometry(const QCase& c) { return grid(up(c.N, 4) * 64, 1, 1, 64, 1); }
Geometry tilesGeometry(const QCase& c) { return grid(up(c.N, 64) * 16, up(c.M, 64) * 16, 1, 16, 16); }
Geometry cols4Geometry(const QCase& c) { return grid(up(c.N, 64) * 64, up(c.M, 4), 1, 64, 1); }
Geometry cols8Geometry(const QCase& c) { return grid(up(c.N, 64) * 64, up(c.M, 8), 1, 64, 1); }
constexpr int64_t kCpuGemmRows = 132;  // kernels/gemm.cl's CPU_MB
Geometry cpuGemmGeometry(const QCase& c) {  // kCpuGemmRows rows x 32 weight columns per task
  return grid(c.glu ? up(c.N / 2, 16) : up(c.N, 32), up(c.M, kCpuGemmRows), 1, 1, 1);
}
Geometry cpuGemmRopeGeometry(const QCase& c) {  // ... 16 rotated pairs of columns per task
  return grid(up(c.N / 2, 16), up(c.M, kCpuGemmRows), 1, 1, 1);
}
// A CPU decode GEMV takes a task per kCpuTaskWork weights at most (lower.h).
int64_t cpuGemvTasks(const QCase& c, int64_t most) { return std::min(most, std::max<int64_t>(1, c.K * c.N / kCpuTaskWork)); }
Geometry cpuGemvGeometry(const QCase& c) {  // a task per 8 columns (4 gates and their ups), or fewer taking several
  return grid(static_cast<size_t>(cpuGemvTasks(c, static_cast<int64_t>(c.glu ? up(c.N / 2, 4) : up(c.N, 8)))), 1, 1, 1, 1);
}
// ... through int8 activations: each task rounds A's row itself, then takes every
// tasks-th block of 8 columns; up to kCpuI8Tasks a core (x rounded that many times a node:
// with 8 a core, bytellama's GEMVs were 10-45% slower than with 2).
constexpr int64_t kCpuI8Tasks = 2, kCpuI8MaxK = 8192;  // kernels/gemm.cl's CPU_I8_MAXK
Geometry cpuI8Geometry(const QCase& c) {
  const int64_t blocks = static_cast<int64_t>(c.glu ? up(c.N / 2, 4) : up(c.N, 8));
  return grid(static_cast<size_t>(cpuGemvTasks(c, std::min(blocks, kCpuI8Tasks * std::max<int64_t>(c.computeUnits, 1)))), 1, 1,
              1, 1);
}
constexpr size_t kGemmWg = 256;  // kernels/gemm.cl's GEMM_WG
template <int64_t T> Geometry gemmGeometry(const QCase& c) {  // a T x T tile of weight columns per work-group
  return grid(up(c.N, T) * kGemmWg, up(c.M, T), 1, kGemmWg, 1);
}
template <int64_t T> Geometry splitGeometry(const QCase& c) {  // ... and a slice of K
  return grid(up(c.N, T) * kGemmWg, up(c.M, T), static_cast<size_t>(c.kSlices()), kGemmWg, 1);
}

template <Scheme S> bool mergedWide(const QCase& c) { return c.scheme == S && c.merged && c.wide(); }
template <Scheme S> bool mergedOneRow(const QCase& c) { return c.scheme == S && c.merged && !c.wide() && c.gemv16() && c.M == 1; }
template <Scheme S> bool wide(const QCase& c) { return c.scheme == S && c.wide(); }
template <Scheme S> bool int8Gemv(const QCase& c) { return c.scheme == S && c.int8Gemv(); }
template <Scheme S> bool int8Gemv16(const QCase& c) { return c.scheme == S && c.int8Gemv16(); }
template <Scheme S> bool gemv16Plain(const QCase& c) {
  return c.scheme == S && c.gemv16() && c.M == 1 && (!c.norm || c.handed);
}
template <Scheme S> bool gemv16Normed(const QCase& c) {
  return c.scheme == S && c.gemv16() && c.M == 1 && c.norm && !c.handed;
}
template <Scheme S> bool gemv16(const QCase& c) { return c.scheme == S && c.gemv16(); }
template <Scheme S> bool gemvOneRow(const QCase& c) { return c.scheme == S && c.gemv() && c.M == 1; }
template <Scheme S> bool gemv(const QCase& c) { return c.scheme == S && c.gemv(); }
template <Scheme S> bool gemm128(const QCase& c) { return c.scheme == S && c.gemm128(); }
template <Scheme S> bool mma128(const QCase& c) { return c.scheme == S && c.mma128(); }
bool mmaHalves(const QCase& c) { return c.halves(); }
// Float weights on the tensor cores (rounded to fp16) only where A may not be rounded
// either (--gemm f16): auto keeps an fp32 model's products exact.
bool floatMma128(const QCase& c) { return c.scheme == Scheme::F32 && !c.int8 && c.mma128(); }
bool floatMma64(const QCase& c) { return c.scheme == Scheme::F32 && !c.int8 && c.gemm(); }
template <Scheme S> bool mma128Rope(const QCase& c) { return c.rope && mma128<S>(c); }
bool floatMma128Rope(const QCase& c) { return c.rope && floatMma128(c); }
bool floatMma64Rope(const QCase& c) { return c.rope && floatMma64(c); }
template <Scheme S> bool int8Rows(const QCase& c) { return c.scheme == S && c.int8Rows() && !c.int8Ragged(); }
template <Scheme S> bool int8Rope(const QCase& c) { return c.rope && int8Rows<S>(c); }
template <Scheme S> bool int8RaggedRows(const QCase& c) { return c.scheme == S && c.int8Rows() && c.int8Ragged(); }
template <Scheme S> bool int8RaggedRope(const QCase& c) { return c.rope && int8RaggedRows<S>(c); }
template <Scheme S> bool gemm64(const QCase& c) { return c.scheme == S && c.gemm(); }
template <Scheme S> bool gemm128Rope(const QCase& c) { return c.rope && gemm128<S>(c); }
template <Scheme S> bool gemm64Rope(const QCase& c) { return c.rope && gemm64<S>(c); }
template <Scheme S> bool cpuGemm(const QCase& c) { return c.scheme == S && !c.gpu && c.tiled(); }
template <Scheme S> bool cpuGemmRope(const QCase& c) { return c.rope && cpuGemm<S>(c) && c.ropeRows(); }
template <Scheme S> bool cpuGemv(const QCase& c) { return c.scheme == S && c.cpuDecode() && c.coded(); }
// 16-level codes through int8 activations (kernels/gemm.cl's QGEMV_CPU_I8: built where
// the CPU has AVX2), up to K = 8192: on this machine's PoCL (tl-bench --kernels, e0m4)
// 256 x 768 12.5 -> 7.5 µs, 256 x 1376 20.8 -> 12.3, 4096 x 4096 443 -> 246-267, 4096 x
// 11008 1,585 -> 1,027-1,038, 8192 x 2048 489-510 -> 311-326, where 11008 x 4096 went
// 1,297-1,387 -> 1,504-1,911 (docs/tl-bench.md); A's rounding costs 1.4-2.6e-3 of the
// largest output (scripts/cpu_gemv_lab.c). --gemm f16 keeps A in fp32 there.
template <Scheme S> bool cpuI8Gemv(const QCase& c) {
  return cpuGemv<S>(c) && c.int8 && c.K % 16 == 0 && c.G % 64 == 0 && c.K <= kCpuI8MaxK;
}
template <Scheme S> bool tiles(const QCase& c) { return c.scheme == S && c.gpu; }
template <Scheme S> bool cols4(const QCase& c) { return c.scheme == S && c.cpuDecode(); }  // fewer registers: faster decode
template <Scheme S> bool cols8(const QCase& c) { return c.scheme == S && !c.gpu; }

constexpr auto E0m4 = Scheme::E0m4, Int4 = Scheme::Int4, Q8 = Scheme::Q8, Q3h = Scheme::Q3h, W4a8 = Scheme::W4a8,
               F32 = Scheme::F32;
const char* const kMergedWhy = "one decode row, merging the attention's splits as it reads them (merge_attention)";
const char* const kWideWhy = "one decode row over wide weights: 8 columns a work-group";
const char* const kWideInt8Why =
    "one decode row, 8 columns a work-group, A rounded to int8 per 32 k and multiplied by the codes 4 at a time";
const char* const kWide16Int8Why =
    "one decode row, 16 columns a work-group (4 or more a compute unit), A rounded to int8 per 32 k and multiplied by the "
    "codes 4 at a time";
const char* const kGemv16PlainWhy = "one decode row without a norm: 32 codes at a time in 128-wide groups, the GLU inside";
const char* const kHandedWhy =
    "one decode row, its RMSNorm handed on by the GEMV that wrote A (A times the norm's weights, the sums of squares)";
const char* const kGemv16NormWhy = "one decode row with a norm: 32 codes at a time, the norm compiled in, the GLU inside";
const char* const kGemv16Why = "decode, up to 4 rows: 32 codes at a time, the norm and GLU inside";
const char* const kGemvOneWhy = "one decode row: a work-group per 4 columns, the norm and GLU inside";
const char* const kGemvWhy = "decode, up to 4 rows: a work-group per 4 columns, the norm and GLU inside";
const char* const kW4a8GemvWhy = "decode: a work-group per 4 columns over int8 rows";
const char* const kMmaWhy = "GPU prefill, NVIDIA tensor cores: 128 x 128 tiles of f16 products, the norm and GLU inside";
const char* const kMmaHalvesWhy =
    "GPU prefill from 256 rows, NVIDIA tensor cores, A in fp16: the weights dequantized once and A's rows normed into "
    "fp16, then "
    "128 x 128 tiles of f16 products fed by cp.async, the GLU inside";
const char* const kMmaInt8Why =
    "GPU prefill, NVIDIA tensor cores: A's rows rounded to int8 per 128 k in the same launch, then 64 x 64 "
    "tiles of int8 x code products, the norm and the GLU inside";
const char* const kMmaInt8RaggedWhy =
    "GPU prefill, NVIDIA tensor cores: the int8 tiles (A rounded in the same launch) for groups of 32 or 64 or K "
    "not a multiple of 128, each group's sums scaled as it ends, the norm and the GLU inside";
const char* const kMmaInt8RaggedRopeWhy =
    "GPU prefill, NVIDIA tensor cores: the int8 tiles for groups of 32 or 64 or K not a multiple of 128, their "
    "store doing the RoPE's work: q rotated, k and v into the in-place caches";
const char* const kMmaInt8RopeWhy =
    "GPU prefill, NVIDIA tensor cores: the int8 tiles (A rounded in the same launch), their store doing the RoPE's "
    "work: q rotated, k and v into the in-place caches";
const char* const kMmaRopeWhy =
    "GPU prefill, NVIDIA tensor cores: the in-tile rows (128s, or 64s up to 128 rows or where 128s are too few), their "
    "store doing the RoPE's work: q rotated, k and v into the in-place caches";
const char* const kMma64Why =
    "GPU prefill, NVIDIA tensor cores: 64 x 64 tiles (up to 128 rows, or too few 128s for the device), the norm and GLU inside";
const char* const kGemmWhy = "GPU prefill: 128 x 128 fp32 tiles, 8 x 8 per item, the norm and GLU inside";
const char* const kGemmRopeWhy =
    "GPU prefill: the fp32 tiles (128s, or 64s where 128s would leave a quarter of the device idle), their store doing "
    "the RoPE's work: q rotated, k and v into the in-place caches";
const char* const kGemm64Why = "GPU prefill: 64 x 64 fp32 tiles (128s would leave a quarter of the device idle), the norm and GLU inside";
const char* const kCpuGemmWhy = "CPU prefill: 132 x 32 tasks, each code dequantized once a task, 12 x 32 (AVX-512) or 6 x 16 sums in registers, the norm and GLU inside";
const char* const kFloatMmaWhy =
    "GPU prefill, float weights, --gemm f16: NVIDIA tensor cores, 128 x 128 tiles of f16 products, the norm and GLU "
    "inside";
const char* const kFloatMma64Why =
    "GPU prefill, float weights, --gemm f16: NVIDIA tensor cores, 64 x 64 tiles (up to 128 rows, or too few 128s), "
    "the norm and GLU inside";
const char* const kFloatGemmWhy = "GPU prefill, float weights: the 128 x 128 fp32 tiles of the codes' rows, the norm and GLU inside";
const char* const kFloatGemm64Why =
    "GPU prefill, float weights: 64 x 64 fp32 tiles (128s would leave a quarter of the device idle), the norm and GLU inside";
const char* const kCpuGemmRopeWhy =
    "CPU prefill: 132 x 32 tasks (16 pairs of columns), the norm inside, q and k rotated and the caches appended in its store (the RoPE's work)";
const char* const kFloatCpuGemmWhy =
    "CPU prefill, float weights: 132 x 32 tasks, each weight packed once a task, the codes' register tiles, the norm and GLU inside";
const char* const kCpuGemvWhy =
    "CPU decode: 8 columns a pass, a task each (or one for few weights), codes along k 8 at a time, the norm and GLU inside";
const char* const kCpuI8GemvWhy =
    "CPU decode (AVX2): A rounded to int8 a block of 32 by each task, the codes times it 32 at a time (pmaddubsw), "
    "the norm and GLU inside";
const char* const kTilesWhy = "GPU, more rows: dequantizing 64x64 tiles";
const char* const kCols4Why = "CPU decode: a column and 4 rows per item";
const char* const kCols8Why = "CPU: a column and 8 rows per item";
const Variant<QCase> kQMatMul[] = {
    {"qgemv_wide_merge_e0m4", mergedWide<E0m4>, wideGeometry<8>, kMergedWhy, kMerges | kNative | kHands},
    {"qgemv_wide_merge_int4", mergedWide<Int4>, wideGeometry<8>, kMergedWhy, kMerges | kNative | kHands},
    {"qgemv16_merge_e0m4_m1", mergedOneRow<E0m4>, gemv16PlainGeometry, kMergedWhy, kMerges | kNative | kHands},
    {"qgemv16_merge_int4_m1", mergedOneRow<Int4>, gemv16PlainGeometry, kMergedWhy, kMerges | kNative | kHands},
    {"qgemv_wide16_i8_e0m4", int8Gemv16<E0m4>, wideGeometry<16>, kWide16Int8Why, kNative | kHands},
    {"qgemv_wide16_i8_int4", int8Gemv16<Int4>, wideGeometry<16>, kWide16Int8Why, kNative | kHands},
    {"qgemv_wide_i8_e0m4", int8Gemv<E0m4>, wideGeometry<8>, kWideInt8Why, kNative | kHands},
    {"qgemv_wide_i8_int4", int8Gemv<Int4>, wideGeometry<8>, kWideInt8Why, kNative | kHands},
    {"qgemv_wide_e0m4", wide<E0m4>, wideGeometry<8>, kWideWhy, kNative | kHands},
    {"qgemv_wide_int4", wide<Int4>, wideGeometry<8>, kWideWhy, kNative | kHands},
    {"qgemv16_plain_e0m4_m1", gemv16Plain<E0m4>, gemv16PlainGeometry, kGemv16PlainWhy, kNative | kHands},
    {"qgemv16_plain_int4_m1", gemv16Plain<Int4>, gemv16PlainGeometry, kGemv16PlainWhy, kNative | kHands},
    {"qgemv16_norm_e0m4_m1", gemv16Normed<E0m4>, gemvGeometry, kGemv16NormWhy, kNative | kHands},
    {"qgemv16_norm_int4_m1", gemv16Normed<Int4>, gemvGeometry, kGemv16NormWhy, kNative | kHands},
    {"qgemv16_e0m4", gemv16<E0m4>, gemvGeometry, kGemv16Why, kNative},
    {"qgemv16_int4", gemv16<Int4>, gemvGeometry, kGemv16Why, kNative},
    {"qgemv_e0m4_m1", gemvOneRow<E0m4>, gemvGeometry, kGemvOneWhy, kNative},
    {"qgemv_int4_m1", gemvOneRow<Int4>, gemvGeometry, kGemvOneWhy, kNative},
    {"qgemv_q8_m1", gemvOneRow<Q8>, gemvGeometry, kGemvOneWhy, kNative},
    {"qgemv_q3h_m1", gemvOneRow<Q3h>, gemvGeometry, kGemvOneWhy, kNative},
    {"qgemv_w4a8_m1", gemvOneRow<W4a8>, w4a8GemvGeometry, kW4a8GemvWhy},
    {"qgemv_e0m4", gemv<E0m4>, gemvGeometry, kGemvWhy, kNative},
    {"qgemv_int4", gemv<Int4>, gemvGeometry, kGemvWhy, kNative},
    {"qgemv_q8", gemv<Q8>, gemvGeometry, kGemvWhy, kNative},
    {"qgemv_q3h", gemv<Q3h>, gemvGeometry, kGemvWhy, kNative},
    {"qgemv_w4a8", gemv<W4a8>, w4a8GemvGeometry, kW4a8GemvWhy},
    {"qgemm_mma_f16", mmaHalves, gemmGeometry<128>, kMmaHalvesWhy, kNative | kHalves},
    {"qgemm64_mma_i8_rope_e0m4", int8Rope<E0m4>, splitGeometry<64>, kMmaInt8RopeWhy, kNative | kSplitK | kInt8Rows | kRope},
    {"qgemm64_mma_i8_rope_int4", int8Rope<Int4>, splitGeometry<64>, kMmaInt8RopeWhy, kNative | kSplitK | kInt8Rows | kRope},
    {"qgemm64_mma_i8_rope_q8", int8Rope<Q8>, splitGeometry<64>, kMmaInt8RopeWhy, kNative | kSplitK | kInt8Rows | kRope},
    {"qgemm64_mma_i8_rope_q3h", int8Rope<Q3h>, splitGeometry<64>, kMmaInt8RopeWhy, kNative | kSplitK | kInt8Rows | kRope},
    {"qgemm64_mma_i8_e0m4", int8Rows<E0m4>, splitGeometry<64>, kMmaInt8Why, kNative | kSplitK | kInt8Rows},
    {"qgemm64_mma_i8_int4", int8Rows<Int4>, splitGeometry<64>, kMmaInt8Why, kNative | kSplitK | kInt8Rows},
    {"qgemm64_mma_i8_q8", int8Rows<Q8>, splitGeometry<64>, kMmaInt8Why, kNative | kSplitK | kInt8Rows},
    {"qgemm64_mma_i8_q3h", int8Rows<Q3h>, splitGeometry<64>, kMmaInt8Why, kNative | kSplitK | kInt8Rows},
    {"qgemm64_mma_i8_ragged_rope_e0m4", int8RaggedRope<E0m4>, splitGeometry<64>, kMmaInt8RaggedRopeWhy, kNative | kSplitK | kInt8Rows | kRope},
    {"qgemm64_mma_i8_ragged_rope_int4", int8RaggedRope<Int4>, splitGeometry<64>, kMmaInt8RaggedRopeWhy, kNative | kSplitK | kInt8Rows | kRope},
    {"qgemm64_mma_i8_ragged_rope_q8", int8RaggedRope<Q8>, splitGeometry<64>, kMmaInt8RaggedRopeWhy, kNative | kSplitK | kInt8Rows | kRope},
    {"qgemm64_mma_i8_ragged_rope_q3h", int8RaggedRope<Q3h>, splitGeometry<64>, kMmaInt8RaggedRopeWhy, kNative | kSplitK | kInt8Rows | kRope},
    {"qgemm64_mma_i8_ragged_e0m4", int8RaggedRows<E0m4>, splitGeometry<64>, kMmaInt8RaggedWhy, kNative | kSplitK | kInt8Rows},
    {"qgemm64_mma_i8_ragged_int4", int8RaggedRows<Int4>, splitGeometry<64>, kMmaInt8RaggedWhy, kNative | kSplitK | kInt8Rows},
    {"qgemm64_mma_i8_ragged_q8", int8RaggedRows<Q8>, splitGeometry<64>, kMmaInt8RaggedWhy, kNative | kSplitK | kInt8Rows},
    {"qgemm64_mma_i8_ragged_q3h", int8RaggedRows<Q3h>, splitGeometry<64>, kMmaInt8RaggedWhy, kNative | kSplitK | kInt8Rows},
    {"qgemm_mma_rope_e0m4", mma128Rope<E0m4>, splitGeometry<128>, kMmaRopeWhy, kNative | kSplitK | kRope},
    {"qgemm64_mma_rope_e0m4", gemm64Rope<E0m4>, splitGeometry<64>, kMmaRopeWhy, kNative | kSplitK | kRope},
    {"qgemm_mma_rope_int4", mma128Rope<Int4>, splitGeometry<128>, kMmaRopeWhy, kNative | kSplitK | kRope},
    {"qgemm64_mma_rope_int4", gemm64Rope<Int4>, splitGeometry<64>, kMmaRopeWhy, kNative | kSplitK | kRope},
    {"qgemm_mma_rope_q8", mma128Rope<Q8>, splitGeometry<128>, kMmaRopeWhy, kNative | kSplitK | kRope},
    {"qgemm64_mma_rope_q8", gemm64Rope<Q8>, splitGeometry<64>, kMmaRopeWhy, kNative | kSplitK | kRope},
    {"qgemm_mma_rope_q3h", mma128Rope<Q3h>, splitGeometry<128>, kMmaRopeWhy, kNative | kSplitK | kRope},
    {"qgemm64_mma_rope_q3h", gemm64Rope<Q3h>, splitGeometry<64>, kMmaRopeWhy, kNative | kSplitK | kRope},
    {"gemm_mma_rope_f32", floatMma128Rope, splitGeometry<128>, kMmaRopeWhy, kNative | kSplitK | kRope},
    {"gemm64_mma_rope_f32", floatMma64Rope, splitGeometry<64>, kMmaRopeWhy, kNative | kSplitK | kRope},
    {"qgemm_mma_e0m4", mma128<E0m4>, splitGeometry<128>, kMmaWhy, kNative | kSplitK},
    {"qgemm64_mma_e0m4", gemm64<E0m4>, splitGeometry<64>, kMma64Why, kNative | kSplitK},
    {"qgemm_mma_int4", mma128<Int4>, splitGeometry<128>, kMmaWhy, kNative | kSplitK},
    {"qgemm64_mma_int4", gemm64<Int4>, splitGeometry<64>, kMma64Why, kNative | kSplitK},
    {"qgemm_mma_q8", mma128<Q8>, splitGeometry<128>, kMmaWhy, kNative | kSplitK},
    {"qgemm64_mma_q8", gemm64<Q8>, splitGeometry<64>, kMma64Why, kNative | kSplitK},
    {"qgemm_mma_q3h", mma128<Q3h>, splitGeometry<128>, kMmaWhy, kNative | kSplitK},
    {"qgemm64_mma_q3h", gemm64<Q3h>, splitGeometry<64>, kMma64Why, kNative | kSplitK},
    {"gemm_mma_f32", floatMma128, splitGeometry<128>, kFloatMmaWhy, kNative | kSplitK},
    {"gemm64_mma_f32", floatMma64, splitGeometry<64>, kFloatMma64Why, kNative | kSplitK},
    {"qgemm_rope_e0m4", gemm128Rope<E0m4>, gemmGeometry<128>, kGemmRopeWhy, kNative | kRope},
    {"qgemm64_rope_e0m4", gemm64Rope<E0m4>, gemmGeometry<64>, kGemmRopeWhy, kNative | kRope},
    {"qgemm_rope_int4", gemm128Rope<Int4>, gemmGeometry<128>, kGemmRopeWhy, kNative | kRope},
    {"qgemm64_rope_int4", gemm64Rope<Int4>, gemmGeometry<64>, kGemmRopeWhy, kNative | kRope},
    {"qgemm_rope_q8", gemm128Rope<Q8>, gemmGeometry<128>, kGemmRopeWhy, kNative | kRope},
    {"qgemm64_rope_q8", gemm64Rope<Q8>, gemmGeometry<64>, kGemmRopeWhy, kNative | kRope},
    {"qgemm_rope_q3h", gemm128Rope<Q3h>, gemmGeometry<128>, kGemmRopeWhy, kNative | kRope},
    {"qgemm64_rope_q3h", gemm64Rope<Q3h>, gemmGeometry<64>, kGemmRopeWhy, kNative | kRope},
    {"gemm_rope_f32", gemm128Rope<F32>, gemmGeometry<128>, kGemmRopeWhy, kNative | kRope},
    {"gemm64_rope_f32", gemm64Rope<F32>, gemmGeometry<64>, kGemmRopeWhy, kNative | kRope},
    {"qgemm_e0m4", gemm128<E0m4>, gemmGeometry<128>, kGemmWhy, kNative},
    {"qgemm64_e0m4", gemm64<E0m4>, gemmGeometry<64>, kGemm64Why, kNative},
    {"qgemm_int4", gemm128<Int4>, gemmGeometry<128>, kGemmWhy, kNative},
    {"qgemm64_int4", gemm64<Int4>, gemmGeometry<64>, kGemm64Why, kNative},
    {"qgemm_q8", gemm128<Q8>, gemmGeometry<128>, kGemmWhy, kNative},
    {"qgemm64_q8", gemm64<Q8>, gemmGeometry<64>, kGemm64Why, kNative},
    {"qgemm_q3h", gemm128<Q3h>, gemmGeometry<128>, kGemmWhy, kNative},
    {"qgemm64_q3h", gemm64<Q3h>, gemmGeometry<64>, kGemm64Why, kNative},
    {"gemm_f32", gemm128<F32>, gemmGeometry<128>, kFloatGemmWhy, kNative},
    {"gemm64_f32", gemm64<F32>, gemmGeometry<64>, kFloatGemm64Why, kNative},
    {"qgemv_cpu_i8_e0m4", cpuI8Gemv<E0m4>, cpuI8Geometry, kCpuI8GemvWhy, kNative | kTask},
    {"qgemv_cpu_i8_int4", cpuI8Gemv<Int4>, cpuI8Geometry, kCpuI8GemvWhy, kNative | kTask},
    {"qgemv_cpu_e0m4", cpuGemv<E0m4>, cpuGemvGeometry, kCpuGemvWhy, kNative | kTask},
    {"qgemv_cpu_int4", cpuGemv<Int4>, cpuGemvGeometry, kCpuGemvWhy, kNative | kTask},
    {"qgemv_cpu_q8", cpuGemv<Q8>, cpuGemvGeometry, kCpuGemvWhy, kNative | kTask},
    {"qgemv_cpu_q3h", cpuGemv<Q3h>, cpuGemvGeometry, kCpuGemvWhy, kNative | kTask},
    {"qgemm_cpu_rope_e0m4", cpuGemmRope<E0m4>, cpuGemmRopeGeometry, kCpuGemmRopeWhy, kNative | kRope},
    {"qgemm_cpu_rope_int4", cpuGemmRope<Int4>, cpuGemmRopeGeometry, kCpuGemmRopeWhy, kNative | kRope},
    {"qgemm_cpu_rope_q8", cpuGemmRope<Q8>, cpuGemmRopeGeometry, kCpuGemmRopeWhy, kNative | kRope},
    {"qgemm_cpu_rope_q3h", cpuGemmRope<Q3h>, cpuGemmRopeGeometry, kCpuGemmRopeWhy, kNative | kRope},
    {"gemm_cpu_rope_f32", cpuGemmRope<F32>, cpuGemmRopeGeometry, kCpuGemmRopeWhy, kNative | kRope},
    {"qgemm_cpu_e0m4", cpuGemm<E0m4>, cpuGemmGeometry, kCpuGemmWhy, kNative},
    {"qgemm_cpu_int4", cpuGemm<Int4>, cpuGemmGeometry, kCpuGemmWhy, kNative},
    {"qgemm_cpu_q8", cpuGemm<Q8>, cpuGemmGeometry, kCpuGemmWhy, kNative},
    {"qgemm_cpu_q3h", cpuGemm<Q3h>, cpuGemmGeometry, kCpuGemmWhy, kNative},
    {"gemm_cpu_f32", cpuGemm<F32>, cpuGemmGeometry, kFloatCpuGemmWhy, kNative},
    {"qmatmul_tiles_e0m4", tiles<E0m4>, tilesGeometry, kTilesWhy},
    {"qmatmul_tiles_int4", tiles<Int4>, tilesGeometry, kTilesWhy},
    {"qmatmul_tiles_q8", tiles<Q8>, tilesGeometry, kTilesWhy},
    {"qmatmul_tiles_q3h", tiles<Q3h>, tilesGeometry, kTilesWhy},
    {"qmatmul_tiles_w4a8", tiles<W4a8>, tilesGeometry, kTilesWhy},
    {"qgemv_cols_e0m4", cols4<E0m4>, cols4Geometry, kCols4Why},
    {"qgemv_cols_int4", cols4<Int4>, cols4Geometry, kCols4Why},
    {"qgemv_cols_q8", cols4<Q8>, cols4Geometry, kCols4Why},
    {"qgemv_cols_q3h", cols4<Q3h>, cols4Geometry, kCols4Why},
    {"qmatmul_cols_e0m4", cols8<E0m4>, cols8Geometry, kCols8Why},
    {"qmatmul_cols_int4", cols8<Int4>, cols8Geometry, kCols8Why},
    {"qmatmul_cols_q8", cols8<Q8>, cols8Geometry, kCols8Why},
    {"qmatmul_cols_q3h", cols8<Q3h>, cols8Geometry, kCols8Why},
    {"qmatmul_cols_w4a8", cols8<W4a8>, cols8Geometry, kCols8Why},
};
constexpr int64_t kMergeSplits = 4;  // kernels/qmatmul.cl's MERGE_SPLITS: every work-group reads them all

// The case of a node of A [..., K] times W of `scheme`.
QCase caseOf(const LowerNode& n, Scheme scheme, int64_t K, int64_t N, int64_t G, int64_t rowBytes) {
  QCase c{scheme};
  c.K = K, c.N = N, c.G = G, c.rowBytes = rowBytes;
  c.M = elementCount(n.shape(n.in(0))) / std::max<int64_t>(c.K, 1);
  const Dims& a = n.shape(n.in(0));
  c.seq = a.size() >= 3 ? a[a.size() - 2] : c.M;
  c.gpu = n.gpu();
  c.glu = gluKind(n.proto);
  c.norm = !matmulOptional(n.proto, MatMulInput::NormScale).empty();
  c.computeUnits = static_cast<int64_t>(n.ex.device().info().computeUnits);
  c.int8 = n.ex.device().int8Activations();
  c.halvesOk = n.ex.device().halvesRows();
  c.kvQ8 = n.ex.kvType() == KvType::Q8;
  return c;
}
QCase qcase(const LowerNode& n) {
  return caseOf(n, schemeOf(n), n.attrInt("K", 0), n.attrInt("N", 0), n.attrInt("group", 0), n.shape(n.in(1)).at(1));
}
// A tl.MatMul's, for the tiles' float rows: W [K, N] (not transB: they read a column's k N
// apart, each column 4 bytes after the last), no groups (8: the tiles' chunk).
std::optional<QCase> floatCase(const LowerNode& n) {
  const Dims& w = n.shape(n.in(1));
  if (n.attrInt("transB", 0) || w.size() != 2) return std::nullopt;
  return caseOf(n, Scheme::F32, w[0], w[1], 8, 4);
}
bool isQMatMul(const onnx::NodeProto& p) { return p.domain() == "tl" && p.op_type() == "QMatMul"; }
// The case of a node the prefill tiles may take: a tl.QMatMul, or a tl.MatMul's floatCase.
std::optional<QCase> tiledCase(const LowerNode& n) {
  if (isQMatMul(n.proto)) return qcase(n);
  if (n.proto.domain() == "tl" && n.proto.op_type() == "MatMul") return floatCase(n);
  return std::nullopt;
}

// Whether the node merges the attention's splits at this binding: tl-fuse marked the pair
// (merge_attention), the norm is not in the way, the row is a one-row 16-level GEMV, and
// the attention takes a variant whose splits such a GEMV reads.
std::optional<MergedSplits> merged(const LowerNode& n, const QCase& c) {
  if (!n.attrInt("merge_attention", 0) || c.norm || !c.gemv16() || c.M != 1) return std::nullopt;
  auto splits = mergedSplits(n, kMergeSplits, c.K);
  if (!splits) return std::nullopt;
  QCase m = c;
  m.merged = true;
  const auto* v = findVariant(kQMatMul, m, n);
  if (!v || !(v->mode & kMerges)) return std::nullopt;  // no merging kernel built here
  return splits;
}

// An RMSNorm handed from one one-row GEMV to the next (kernels/qmatmul.cl's HAND_ARGS):
// the GEMV that writes a tensor (the residual stream, its sum inside) also writes it times
// the norm's weights and its work-groups' sums of squares, so that the one normed GEMV
// reading it takes a plain row: one stream of A, where its loop read A and the norm's
// weights. The scratch between them and what they share.
struct NormHandoff {
  std::string xn, squares;  // the reader's A; the writer's work-groups' sums of squares
  int64_t parts = 0;        // ... how many
  std::string scale;        // the norm's weights
};
bool normed(const onnx::NodeProto& p) { return isQMatMul(p) && !matmulOptional(p, MatMulInput::NormScale).empty(); }
// The handoff to `reader`, when at this binding it and the node writing its A both take
// one-row rows that hand (kHands), the writer computes all of A alone (one output, no
// GLU), and no other normed GEMV reads A. Both nodes ask it, so they agree.
std::optional<NormHandoff> normHandoff(const LowerNode& reader) {
  if (!normed(reader.proto)) return std::nullopt;
  QCase r = qcase(reader);
  const Graph& g = reader.ex.graph();
  const int w = g.producer(reader.in(0));
  if (r.M != 1 || !r.gpu || w < 0) return std::nullopt;
  const LowerNode writer = reader.at(static_cast<size_t>(w));
  if (!isQMatMul(writer.proto) || writer.proto.output_size() != 1 || writer.attr("split")) return std::nullopt;
  QCase c = qcase(writer);
  if (c.norm || c.glu || c.M != 1 || c.N != r.K) return std::nullopt;
  const auto& readers = g.consumers(reader.in(0));
  if (std::count_if(readers.begin(), readers.end(), [&](size_t i) { return normed(g.node(i)); }) != 1)
    return std::nullopt;
  c.merged = merged(writer, c).has_value();
  r.handed = true;
  const auto* wv = findVariant(kQMatMul, c, writer);
  const auto* rv = findVariant(kQMatMul, r, reader);
  if (!wv || !rv || !(wv->mode & kHands) || !(rv->mode & kHands)) return std::nullopt;
  const Geometry geo = wv->geometry(c);
  return NormHandoff{reader.in(0) + "#normed", reader.in(0) + "#squares",
                     static_cast<int64_t>(geo.global[0] / geo.local[0]),
                     matmulOptional(reader.proto, MatMulInput::NormScale)};
}
// The handoff `writer` makes, if any.
std::optional<NormHandoff> handedOn(const LowerNode& writer) {
  for (size_t i : writer.ex.graph().consumers(writer.out(0))) {
    const LowerNode reader = writer.at(i);
    if (normed(reader.proto) && reader.in(0) == writer.out(0)) return normHandoff(reader);
  }
  return std::nullopt;
}
// Its scratch, the same from either side.
void handoffScratch(const LowerNode& n, const NormHandoff& h, int64_t width) {
  n.ex.scratch(h.xn, static_cast<size_t>(width) * 4);
  n.ex.scratch(h.squares, static_cast<size_t>(h.parts) * 4);
}

// The scratch the fp16 rows dequantize into: one per weight shape, so that nodes share
// it (one at a time: the queue is in order) and none grows it under a launch already set up.
std::string halvesScratch(const LowerNode& n, const QCase& c) {
  const std::string key = "#fp16-weights-" + std::to_string(c.K) + "x" + std::to_string(c.N);
  n.ex.scratch(key, static_cast<size_t>(c.K * c.N) * 2);
  return key;
}

// The most rows any QMatMul of A's width K has at this binding: the scratch A's rows go
// into (as halves, or int8) is one per width, shared like the weights' (the queue is in
// order), and sized so that no node grows it under a launch already set up.
int64_t rowsOfWidth(const LowerNode& n, const QCase& c) {
  const Graph& g = n.ex.graph();
  int64_t rows = c.M;
  for (size_t i = 0; i < g.nodeCount(); ++i) {
    if (!isQMatMul(g.node(i))) continue;
    const LowerNode o = n.at(i);
    if (o.attrInt("K", 0) == c.K) rows = std::max(rows, elementCount(o.shape(o.in(0))) / c.K);
  }
  return rows;
}
std::string rowsScratch(const LowerNode& n, const QCase& c) {
  const std::string key = "#fp16-rows-" + std::to_string(c.K);
  n.ex.scratch(key, static_cast<size_t>(rowsOfWidth(n, c) * c.K) * 2);
  return key;
}
// ... as int8 (the int8 tiles make them in their own launch: kernels/gemm.cl's
// i8_rows_in_launch), with each 128 k's step, its sum, its 4 sums of 32 k and its sum of squares:
// [K / 128 rounded up][rows rounded up to 4] floats of each; `stride`: this node's rows
// rounded up to 4, where its blocks' steps, sums and squares stand apart; `claims`: the launch's three counts
// (kernels/common.cl's claim_first), shared by all nodes (zero before a launch and after it).
struct Int8Rows {
  std::string codes, steps, claims;
  int64_t stride = 0;
};
Int8Rows int8Scratch(const LowerNode& n, const QCase& c) {
  const Int8Rows keys{"#int8-rows-" + std::to_string(c.K), "#int8-steps-" + std::to_string(c.K), "#int8-claims",
                      (c.M + 3) / 4 * 4};
  const int64_t rows = rowsOfWidth(n, c), padded = (rows + 3) / 4 * 4;
  n.ex.scratch(keys.codes, static_cast<size_t>(rows * c.K));
  n.ex.scratch(keys.steps, static_cast<size_t>(7 * c.int8Blocks() * padded) * 4);
  n.ex.zeroedScratch(keys.claims, 3 * 4);
  return keys;
}

// The split-K rows' scratch (kernels/gemm.cl's KSPLIT_ARGS): partial sums and tile
// counters, one of each shared by all nodes (the queue is in order; the counters start at
// zero and each launch leaves them so), sized for the most any QMatMul needs at this binding.
std::pair<std::string, std::string> splitScratch(const LowerNode& n) {
  const Graph& g = n.ex.graph();
  int64_t partials = 0, tiles = 0;
  for (size_t i = 0; i < g.nodeCount(); ++i) {
    const LowerNode o = n.at(i);
    const auto c = tiledCase(o);
    const auto* v = c ? findVariant(kQMatMul, *c, o) : nullptr;
    if (!v || !(v->mode & kSplitK) || c->kSlices() < 2) continue;
    partials = std::max(partials, c->kPartials());
    tiles = std::max(tiles, c->mmaTiles());
  }
  const std::pair<std::string, std::string> keys{"#ksplit-partials", "#ksplit-counters"};
  n.ex.scratch(keys.first, static_cast<size_t>(partials) * 4);
  n.ex.zeroedScratch(keys.second, static_cast<size_t>(tiles) * 4);
  return keys;
}

// A split-K row's KSPLIT_ARGS: the k of a slice, the scratch where there are several.
void setSplitArgs(const LowerNode& n, const QCase& c, Launch& l) {
  l.i32(c.kSlice());
  if (c.kSlices() > 1) {
    const auto [partials, counters] = splitScratch(n);
    l.mem(partials).mem(counters);
  } else {
    l.nullMem().nullMem();
  }
}

// tl.QMatMul: A [..., K] x quantized [K, N] (docs/ops.md has the table). W4A8 first
// quantizes A's rows to int8; the fp16 rows first make both operands fp16.
void qmatmulOp(const LowerNode& n) {
  if (lowerLastRows(n, qmatmulOp)) return;
  QCase c = qcase(n);
  const auto splits = merged(n, c);
  c.merged = splits.has_value();
  const auto taken = normHandoff(n), given = handedOn(n);
  c.handed = taken.has_value();
  if (taken) handoffScratch(n, *taken, c.K);
  if (given) handoffScratch(n, *given, c.N);
  const int rope = c.ropeRows() ? ropeForGemm(n) : -1;  // (the prefill rows alone take it)
  c.rope = rope >= 0;
  const auto& v = chooseVariant(kQMatMul, c, n);
  const int64_t groups = n.shape(n.in(2)).at(1);
  const bool w4a8 = c.scheme == Scheme::W4a8, native = v.mode & kNative;
  const auto product = [&](const std::string& a, const MatMulOut& o) {
    Int8Rows rows8;
    Launch l = n.launch(v.kernel, taken ? kHandedWhy : v.why);
    if (w4a8) {
      const std::string qa = n.proto.name() + "#int8", rs = n.proto.name() + "#rowscale";
      n.ex.scratch(qa, static_cast<size_t>(c.M * c.K));
      n.ex.scratch(rs, static_cast<size_t>(c.M * 4));
      n.launch("quantize_rows_i8", "W4A8: A's rows to int8 first")
          .mem(a)
          .mem(qa)
          .mem(rs)
          .i32(c.M)
          .i32(c.K)
          .run3d(static_cast<size_t>(c.M) * 64, 1, 1, 64, 1);
      l.mem(qa).mem(rs).mem(n.in(1)).mem(n.in(2));
    } else if (v.mode & kHalves) {
      const std::string halves = halvesScratch(n, c), rows = rowsScratch(n, c);
      const auto wgroups = static_cast<int64_t>(up(c.N * c.K / 8, kGemmWg));
      Launch prep = n.launch("prep_f16_" + n.attrString("scheme", ""),
                             "the weights and A's normed rows into fp16 for the tiles that follow");
      prep.mem(n.in(1)).mem(n.in(2)).mem(n.in(3)).mem(halves);
      prep.i32(c.N).i32(c.K).i32(c.G).i32(c.rowBytes).i32(groups).i32(wgroups).mem(a).mem(rows);
      setNormArgs(prep, n);
      prep.run(grid(static_cast<size_t>(wgroups + c.M) * kGemmWg, 1, 1, kGemmWg, 1));
      l.mem(rows).mem(halves).mem(n.in(2)).mem(n.in(3));
    } else if (v.mode & kInt8Rows) {
      rows8 = int8Scratch(n, c);
      l.mem(a).mem(rows8.codes).mem(n.in(1)).mem(n.in(2)).mem(n.in(3));
    } else {
      l.mem(a).mem(n.in(1)).mem(n.in(2)).mem(n.in(3));
    }
    setOutputs(l, o);
    l.i32(c.M).i32(c.N).i32(c.K).i32(c.G).i32(c.rowBytes).i32(groups);
    if (native) setGemvArgs(l, n, c.handed || (v.mode & kHalves));  // (prep_f16_* normed A)
    if (v.mode & kHands) {
      if (taken) l.mem(taken->squares).i32(taken->parts); else l.nullMem().i32(0);
      if (given) {
        l.mem(given->xn).mem(given->scale).mem(given->squares);
      } else {
        l.nullMem().nullMem().nullMem();
      }
    }
    if (splits) l.mem(splits->part).i32(splits->splits).i32(splits->Dv).i32(splits->zeroRows);
    if (v.mode & kSplitK) setSplitArgs(n, c, l);
    if (v.mode & kInt8Rows) l.mem(rows8.steps).i32(rows8.stride).mem(rows8.claims);
    if (v.mode & kRope) ropeEpilogueArgs(n, rope, l);
    if (v.mode & kTask) l.task(c.M * c.K * c.N, true);  // (a task takes every tasks-th block)
    l.run(v.geometry(c));
  };
  const MatMulOut o = matmulOutputs(n, c.N);
  if (taken) return product(taken->xn, o);
  if (native) return product(n.in(0), o);
  matmulInSteps(n, n.in(0), c.M, c.K, c.N, o, product);
}

// tl.MatMul (docs/ops.md): A [..., K] x W [K, N] with N's columns split among the outputs:
// decode through kWeightGemv's rows, prefill through the codes' tiles (kQMatMul's F32 rows)
// where they fit, else the float products in steps.
void tlMatmulOp(const LowerNode& n) {
  if (lowerLastRows(n, tlMatmulOp)) return;
  requireFloatInputs(n);
  const Dims& w = n.shape(n.in(1));
  const bool transB = n.attrInt("transB", 0) != 0;  // W stored [N, K]
  const int64_t K = transB ? w[1] : w[0], N = transB ? w[0] : w[1];
  const int64_t M = elementCount(n.shape(n.in(0))) / std::max<int64_t>(K, 1);
  const MatMulOut o = matmulOutputs(n, N);
  const GemvCase c{n.gpu(), transB, gluKind(n.proto), M, N, &o};
  if (const auto* v = findVariant(kWeightGemv, c, n)) {
    Launch l = launchVariant(n, *v);
    l.mem(n.in(0)).mem(n.in(1));
    setOutputs(l, o);
    l.i32(M).i32(N).i32(K);
    setGemvArgs(l, n);
    if (v->mode & kTask) l.task(M * K * N, false);  // (a task a block of 64 columns)
    return l.run(v->geometry(c));
  }
  if (const auto f = floatCase(n)) {
    QCase fc = *f;
    const int rope = fc.ropeRows() ? ropeForGemm(n) : -1;
    fc.rope = rope >= 0;
    if (const auto* v = findVariant(kQMatMul, fc, n)) {
      Launch l = launchVariant(n, *v);
      l.mem(n.in(0)).mem(n.in(1)).nullMem().nullMem();  // (no scales, no offsets)
      setOutputs(l, o);
      l.i32(M).i32(N).i32(K).i32(fc.G).i32(fc.rowBytes).i32(1);
      setGemvArgs(l, n);
      if (v->mode & kSplitK) setSplitArgs(n, fc, l);
      if (v->mode & kRope) ropeEpilogueArgs(n, rope, l);
      return l.run(v->geometry(fc));
    }
  }
  matmulInSteps(
      n, n.in(0), M, K, N, o,
      [&](const std::string& a, const MatMulOut& out) { matmul(n, a, {M, K}, n.in(1), w, out, false, transB); },
      [&](const std::string& a) { return matmul(n, a, {M, K}, n.in(1), w, o, false, transB, c.glu); });
}

}  // namespace

bool mergesAttention(const LowerNode& qmatmul) { return merged(qmatmul, qcase(qmatmul)).has_value(); }

bool gemmTakesRope(const LowerNode& gemm) {
  auto c = tiledCase(gemm);
  if (!c) return false;
  c->rope = true;  // (the caller asks ropeForGemm too)
  const auto* v = findVariant(kQMatMul, *c, gemm);
  return v && (v->mode & kRope);
}

std::string prefillGemmPath(const Device& device) {
  if (!device.info().isGpu) return kCpuGemmWhy;
  std::string why;
  if (probeTensorCores(device, &why)) return kMmaWhy;
  return std::string(kGemmWhy) + " (tensor cores: " + why + ")";
}

const Lowerings& matmulLowerings() {
  static const Lowerings table = {
      {"MatMul", matmulOp},
      {"Gemm", gemmOp},
      {"tl.MatMul", tlMatmulOp},
      {"tl.QMatMul", qmatmulOp},
  };
  return table;
}

}  // namespace tl
