// Every quantized kernel against a CPU reference (Eigen) of the same dequantized
// math, on random shapes with ragged last groups and M = 1, 2, 4, 7, 64, 300; and the
// MatMuls' RMSNorm prologue, residual and GLU epilogues against the unfused math.
#include <Eigen/Dense>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <tuple>

#include "graph/attributes.h"
#include "graph/graph.h"
#include "cli/test_support.h"
#include "onnx/model_io.h"
#include "quant/quantize_model.h"
#include "runtime/executor.h"
#include "runtime/kernel_library.h"
#include "shape/shape_inference.h"

namespace tl {
namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using test::addInitializer;

// What NVIDIA's int8 rows (the tensor cores' qgemm64_mma_i8_*: blocks of 128 k; the one-row
// qgemv_wide_i8_*: of 32) compute from A's rows xa and the codes of q: each block of a row
// rounded to int8 on its own grid times the codes' levels' steps (w - o', o' a group's
// base: e0m4 2 s + o, int4 o), plus the bases times the exact rows. wq: q dequantized.
Mat int8RowsProduct(const Mat& xa, const QuantizedMatrix& q, const Mat& wq, int64_t block) {
  Mat base(q.K, q.N), rounded = xa;
  for (int64_t k = 0; k < q.K; ++k)
    for (int64_t n = 0; n < q.N; ++n) {
      const size_t g = static_cast<size_t>(n * q.groups() + k / q.group);
      base(k, n) = q.scheme == QuantScheme::E0M4 ? 2 * q.scale[g] + q.offset[g] : q.offset[g];
    }
  test::roundRowsToInt8(rounded.data(), xa.rows(), xa.cols(), block);
  return rounded * (wq - base) + xa * base;
}
bool int8Rows(const std::vector<Executor::LaunchNote>& launches) {
  for (const auto& l : launches)
    if (l.kernel.find("_i8_") != std::string::npos) return true;
  return false;
}
// ... the block those launches round A by: the tensor-core tiles' 128, the one-row rows' 32.
int64_t int8Block(const std::vector<Executor::LaunchNote>& launches) {
  for (const auto& l : launches)
    if (l.kernel.rfind("qgemm64_mma_i8_", 0) == 0) return 128;
  return 32;
}

struct Case {
  QuantScheme scheme;
  int64_t K, N, group;
  bool gpuKernels;  // the work-group variants (GEMV, tiled matmul), forced on PoCL too
};

class QMatMulKernel : public ::testing::TestWithParam<Case> {};

TEST_P(QMatMulKernel, MatchesDequantizedReference) {
  const Case c = GetParam();
  std::mt19937 rng(static_cast<unsigned>(c.K * 131 + c.N * 7 + static_cast<int>(c.scheme)));
  std::normal_distribution<float> normal(0.0f, 0.05f);
  Mat w(c.K, c.N);
  for (int64_t i = 0; i < w.size(); ++i) w.data()[i] = normal(rng);
  Model model = matmulModel(w.data(), c.K, c.N);
  QuantOptions opt;
  opt.scheme = c.scheme;
  opt.group = c.group;
  opt.quantizeLmHead = true;
  ASSERT_EQ(quantizeModel(model, opt, false).size(), 1u);
  // The reference weights are the dequantization of the very codes the model holds.
  const QuantizedMatrix q = quantize(w.data(), c.K, c.N, c.scheme, c.group);
  auto deq = dequantize(q);
  Eigen::Map<Mat> wq(deq.data(), c.K, c.N);

  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  Device device(selectDevice(""), false);
  device.setGpuKernels(c.gpuKernels);
  // The CPU family's register tiles at the device's vector width, and at 8 where that is
  // wider (AVX-512 hosts build the AVX2 tiles too).
  std::vector<int> widths = {device.vectorWidth()};
  if (!c.gpuKernels && device.vectorWidth() > 8) widths.push_back(8);
  for (int width : widths) {
    device.setVectorWidth(width);
    Executor ex(device, model, graph, analysis);
    for (int64_t M : {1, 2, 4, 7, 64, 300}) {
      Mat x(M, c.K);
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = u(rng);
      auto got = ex.run({makeTensor("x", DType::Float, {M, c.K}, x.data())});
      ASSERT_EQ(got[0].dims, (std::vector<int64_t>{M, c.N}));
      Mat xa = x;
      if (c.scheme == QuantScheme::W4A8) test::roundRowsToInt8(xa.data(), M, c.K);
      const auto launches = ex.explain();
      const Mat want = int8Rows(launches) ? int8RowsProduct(xa, q, wq, int8Block(launches)) : Mat(xa * wq);
      auto g = got[0].toDouble();
      double maxErr = 0, maxRef = 0;
      for (int64_t i = 0; i < want.size(); ++i) {
        maxErr = std::max(maxErr, std::fabs(g[static_cast<size_t>(i)] - want.data()[i]));
        maxRef = std::max(maxRef, double(std::fabs(want.data()[i])));
      }
      // NVIDIA's tensor-core rows take A in f16 (2.7e-4 to 3.5e-4 of the largest output
      // against the fp32 path, docs/tl-bench.md) or in int8 (emulated above); every other
      // row is fp32 throughout.
      const double tol = c.gpuKernels && ex.kernels().tensorCores() ? 1e-3 : 1e-4;
      EXPECT_LT(maxErr, tol * std::max(1.0, maxRef)) << schemeName(c.scheme) << " M=" << M << " K=" << c.K << " N=" << c.N
                                                      << " vector width " << width;
    }
  }
}

std::vector<Case> cases() {
  std::vector<Case> out;
  for (bool gpu : {false, true}) {
    for (auto s : {QuantScheme::E0M4, QuantScheme::Int4, QuantScheme::Q8, QuantScheme::W4A8, QuantScheme::Q3H}) {
      out.push_back({s, 256, 48, 128, gpu});
      out.push_back({s, 688, 40, 128, gpu});  // bytellama's down_proj K: ragged last group of 48
      out.push_back({s, 100, 33, 32, gpu});   // ragged group of 4, odd N
      out.push_back({s, 37, 8, 16, gpu});     // odd K: a half-filled last byte / pair
      out.push_back({s, 100, 20, 12, gpu});   // groups not a multiple of 8: steps start mid-word
      out.push_back({s, 64, 16400, 32, gpu});  // wide: one row takes qgemv_wide_* (up to 256 compute units)
      out.push_back({s, 4096, 24, 128, gpu});  // a block for every item of qgemv16_plain_*_m1's 128-wide groups
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Schemes, QMatMulKernel, ::testing::ValuesIn(cases()), [](const auto& info) {
  return std::string(info.param.gpuKernels ? "gpu_" : "cpu_") + schemeName(info.param.scheme) + "_K" +
         std::to_string(info.param.K) + "_N" + std::to_string(info.param.N) + "_g" + std::to_string(info.param.group);
});

// tl.MatMul / tl.QMatMul with what tl-fuse's norm-matmul and matmul-glu give them
// (docs/ops.md): y = glu(rmsnorm(x) W + bias), or rmsnorm(x) W + bias + r, against that
// math on the host, float and quantized (the reference uses the dequantized codes), in
// both kernel families: the GPU decode kernels normalize and gate in place, the others in
// steps through scratch. K = 256 takes the 32-code decode kernel, K = 204 the 8-code one
// with a tail, K = 4096 a one-row 32-code kernel with 128 blocks (without a norm every
// item of qgemv16_plain_*_m1's 128-wide group holds one; with a norm qgemv16_norm_*_m1's 64
// items hold two each, and their sums of squares); N = 4104 one row through
// the wide kernel (devices of up to 64 compute units);
// K = 203 (float only) the float decode kernel's k past its runs of 4. M = 64: a float GLU
// runs inside the product's kernel (matmul_glu_f32 on GPUs, matmul_4x4_glu_f32 on CPUs),
// no glu_f32 after it; a quantized one (K % 8 == 0) is one launch of the prefill GEMM
// (kernels/gemm.cl) in either family, norm, GLU, bias and residual inside.
struct Extras {
  bool norm, residual, bias;
  std::string glu;
};

// One node of `scheme` with extras `e` at K x N, run at each of `rows` in the families
// `gpus` (false: CPU, true: GPU) against the unfused math. Kernels on tensor cores (an
// `_mma_` launch: fp16 operands) and the int8 rows (`_i8_`, against A rounded as they
// round it) are held to 4e-3 of the largest output, the rest to 1e-4.
// `kernel`: the last launch the GPU family must make where that kernel is built, if given;
// `setup`: what to set on the device first, if given.
void expectUnfusedMath(const char* scheme, int64_t K, int64_t N, const Extras& e, const std::vector<int64_t>& rows,
                       const std::vector<bool>& gpus, const char* kernel = nullptr,
                       const std::function<void(Device&)>& setup = nullptr, int64_t group = 128) {
  std::mt19937 rng(static_cast<unsigned>(K + N));
  std::normal_distribution<float> normal(0.0f, 0.05f);
  Mat w(K, N);
  for (int64_t i = 0; i < w.size(); ++i) w.data()[i] = normal(rng);
  std::vector<float> bias(static_cast<size_t>(N)), scale(static_cast<size_t>(K));
  for (auto& b : bias) b = 10 * normal(rng);
  for (auto& v : scale) v = 1 + 10 * normal(rng);
  const int64_t width = e.glu.empty() ? N : N / 2;
  std::vector<std::pair<std::string, std::vector<std::string>>> inputs = {{"x", {"M", std::to_string(K)}}};
  if (e.residual) inputs.push_back({"r", {"M", std::to_string(width)}});
  if (e.norm) inputs.push_back({"scale", {std::to_string(K)}});
  Model model = test::oneNodeModel("MatMul", inputs);
  auto* node = model.proto.mutable_graph()->mutable_node(0);
  node->clear_input();
  for (const char* in : {"x", "W", e.bias ? "bias" : "", e.residual ? "r" : "", e.norm ? "scale" : ""}) node->add_input(in);
  while (node->input(node->input_size() - 1).empty()) node->mutable_input()->RemoveLast();
  if (e.norm) addAttr(*node, "norm_epsilon", 1e-5f);
  if (!e.glu.empty()) addAttr(*node, "glu", e.glu);
  addInitializer(model, "W", {K, N}, w.data(), static_cast<size_t>(w.size()));
  if (e.bias) addInitializer(model, "bias", {N}, bias.data(), bias.size());
  Mat wq = w;
  const bool quantized = std::string(scheme) != "float";
  QuantOptions opt;
  QuantizedMatrix q;
  if (quantized) {
    opt.scheme = parseScheme(scheme);
    opt.group = group;
    opt.quantizeLmHead = true;
    ASSERT_EQ(quantizeModel(model, opt, false).size(), 1u);
    q = quantize(w.data(), K, N, opt.scheme, opt.group);
    auto deq = dequantize(q);
    wq = Eigen::Map<Mat>(deq.data(), K, N);
  }
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  Device device(selectDevice(""), false);
  if (setup) setup(device);
  for (bool gpu : gpus) {
    device.setGpuKernels(gpu);
    Executor ex(device, model, graph, analysis);
    int64_t mostRows = 0;
    for (int64_t M : rows) {
      mostRows = std::max(mostRows, M);
      Mat x(M, K), r(M, width);
      std::uniform_real_distribution<float> u(-1.0f, 1.0f);
      for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = u(rng);
      for (int64_t i = 0; i < r.size(); ++i) r.data()[i] = u(rng);
      std::vector<Tensor> feed = {makeTensor("x", DType::Float, {M, K}, x.data())};
      if (e.residual) feed.push_back(makeTensor("r", DType::Float, {M, width}, r.data()));
      if (e.norm) feed.push_back(makeTensor("scale", DType::Float, {K}, scale.data()));
      auto got = ex.run(feed);
      ASSERT_EQ(got[0].dims, (std::vector<int64_t>{M, width}));
      const auto launches = ex.explain();
      const bool rounded = test::roundsActivations(launches);
      if (M > (gpu ? kGpuDecodeRows : kCpuDecodeRows) && !quantized && K % 8 == 0 && (gpu || !device.info().isGpu)) {
        // float weights through the codes' prefill tiles (gemm_*f32 on GPUs, gemm_cpu_f32
        // on CPUs): the norm and the GLU inside, one launch
        ASSERT_EQ(launches.size(), 1u) << launches.back().kernel;
        const std::string& k = launches[0].kernel;
        EXPECT_TRUE(gpu ? k.rfind("gemm", 0) == 0 && k.find("_cpu_") == std::string::npos : k == "gemm_cpu_f32") << k;
      } else if (M >= 16 && !quantized && !e.glu.empty()) {  // the GLU inside the product's kernel
        std::vector<std::string> kernels;
        for (const auto& l : launches) kernels.push_back(l.kernel);
        const char* glued = gpu ? "matmul_glu_f32" : "matmul_4x4_glu_f32";
        EXPECT_NE(std::find(kernels.begin(), kernels.end(), glued), kernels.end()) << glued;
        EXPECT_EQ(std::find(kernels.begin(), kernels.end(), "glu_f32"), kernels.end());
      }
      if (kernel && gpu && ex.kernels().has(kernel)) {  // (built where the tensor cores are)
        EXPECT_EQ(launches.back().kernel, kernel);
      }
      if (kernel && gpu && std::string(kernel).find("_i8_") != std::string::npos && ex.kernels().tensorCores()) {
        // Both int8 families need NVIDIA's PTX: a main program that failed to build with it
        // (and fell back to the portable one) would leave out the one-row rows silently.
        EXPECT_TRUE(ex.kernels().has(kernel)) << kernel;
      }
      if (M >= 16 && quantized && K % 8 == 0 && opt.scheme != QuantScheme::W4A8 && (gpu || !device.info().isGpu)) {
        // the prefill GEMM (qgemm_* on GPUs, qgemm_cpu_* on CPUs; a GPU builds no CPU
        // family's) applies the norm and the GLU itself: one launch (the int8 tiles
        // rounding A themselves first), or from 256 rows on tensor cores, where the int8
        // tiles do not take the codes, two: prep_f16_* (the weights and the normed rows
        // into fp16), then qgemm_mma_f16
        ASSERT_FALSE(launches.empty());
        if (launches.size() == 2) {
          EXPECT_EQ(launches[0].kernel.rfind("prep_", 0), 0u) << launches[0].kernel;
        }
        const bool prepped = launches.back().kernel == "qgemm_mma_f16";
        ASSERT_EQ(launches.size(), prepped ? 2u : 1u) << scheme;
        EXPECT_EQ(launches.back().kernel.rfind("qgemm", 0), 0u) << launches.back().kernel;
      }
      if (int8Rows(launches)) {
        // The int8 rows' scratch is a byte a code and six floats a 128 k (its step, the sums
        // of its 32 k, its sum of squares: 6/512 of A's fp32 bytes): with the rest (the output, the residual, any
        // split's partials) the node's memory besides its weights stays within 8 times A's
        // and the output's fp32 bytes (at most 3.8 times on an H200).
        const size_t bytes = static_cast<size_t>(mostRows * (K + N)) * 4;
        EXPECT_LT(ex.memoryUse({}).activations, 8 * bytes) << scheme << " K=" << K << " M=" << M;
      }
      Mat xa = x;
      for (int64_t m = 0; m < M && e.norm; ++m) {
        const float inv = 1.0f / std::sqrt(xa.row(m).squaredNorm() / K + 1e-5f);
        for (int64_t k = 0; k < K; ++k) xa(m, k) *= inv * scale[static_cast<size_t>(k)];
      }
      if (opt.scheme == QuantScheme::W4A8 && quantized) test::roundRowsToInt8(xa.data(), M, K);
      Mat p = int8Rows(launches) ? int8RowsProduct(xa, q, wq, int8Block(launches)) : Mat(xa * wq);
      for (int64_t m = 0; m < M && e.bias; ++m)
        for (int64_t n = 0; n < N; ++n) p(m, n) += bias[static_cast<size_t>(n)];
      Mat want(M, width);
      for (int64_t m = 0; m < M; ++m)
        for (int64_t j = 0; j < width; ++j) {
          const double g = p(m, j);
          double v = g + (e.residual ? r(m, j) : 0.0);
          if (e.glu == "silu") v = g / (1 + std::exp(-g)) * p(m, j + width);
          if (e.glu == "gelu") v = 0.5 * g * (1 + std::erf(g / std::sqrt(2.0))) * p(m, j + width);
          if (e.glu == "gelu_tanh")
            v = 0.5 * g * (1 + std::tanh(0.7978845608028654 * (g + 0.044715 * g * g * g))) * p(m, j + width);
          want(m, j) = static_cast<float>(v);
        }
      auto y = got[0].toDouble();
      double maxErr = 0, maxRef = 0;
      for (int64_t i = 0; i < want.size(); ++i) {
        maxErr = std::max(maxErr, std::fabs(y[static_cast<size_t>(i)] - want.data()[i]));
        maxRef = std::max(maxRef, double(std::fabs(want.data()[i])));
      }
      EXPECT_LT(maxErr, (rounded ? 4e-3 : 1e-4) * std::max(1.0, maxRef))
          << scheme << " K=" << K << " M=" << M << " gpu " << gpu << " norm " << e.norm << " residual " << e.residual
          << " bias " << e.bias << " glu '" << e.glu << "' " << launches.back().kernel;
    }
  }
}

TEST(MatMulExtras, MatchUnfusedMath) {
  const std::vector<Extras> extras = {
      {true, true, true, ""}, {true, false, true, "silu"}, {false, false, false, "gelu_tanh"}, {true, false, false, "gelu"}};
  for (auto [K, N] : {std::pair<int64_t, int64_t>{256, 48}, {204, 48}, {4096, 24}, {256, 4104}, {203, 48}})
    for (const auto& e : extras)
      for (const char* scheme : {"float", "e0m4", "q8", "w4a8"}) {
        // The wide shape is for the wide kernel (e0m4, int4). On the H100, w4a8 over it met an
        // activation whose int8 rounding the GPU's norm and division took the other way.
        if (N > 48 && (std::string(scheme) == "q8" || std::string(scheme) == "w4a8")) continue;
        if (K % 4 && std::string(scheme) != "float") continue;
        // K = 4096 is for the 32-code kernels; w4a8's int8 rows there round a tie or two
        // unlike the host's emulation, past this test's 1e-4.
        if (K == 4096 && std::string(scheme) == "w4a8") continue;
        expectUnfusedMath(scheme, K, N, e, {1, 3, 7, 64}, {false, true});
      }
  // The CPU prefill GEMM's tasks: 100 rows are two tasks of 96 rows (the second of 4), and K
  // = 136 a block whose norm sums end on 8 values, not 16.
  for (const auto& e : extras)
    for (const char* scheme : {"float", "e0m4", "q8"}) expectUnfusedMath(scheme, 136, 48, e, {100}, {false});
}

// The portable GPU tiles where local memory holds one slice of 16 k, not two (kernels/
// gemm.cl's GEMM_BUFS; a GPU of 32 KB, as many mobile GPUs are; tensor cores off): ragged
// 128-wide tiles (N = 4200 over 300 rows: 99 tiles, enough for 132 compute units too) and
// one 64-wide tile (64 rows, N = 48), with a norm and a GLU. PoCL puts barriers at a
// loop's ends itself, so there it checks the single buffer's indexing; a GPU, its barrier.
TEST(MatMulExtras, OneSliceTilesMatchUnfusedMath) {
  const auto small = [](Device& d) {
    d.setLocalMemory(32 << 10);
    d.setTensorCores(false);
  };
  for (const Extras& e : {Extras{true, true, true, ""}, Extras{true, false, false, "silu"}}) {
    expectUnfusedMath("e0m4", 136, 4200, e, {300}, {true}, "qgemm_e0m4", small);
    expectUnfusedMath("e0m4", 136, 48, e, {64}, {true}, "qgemm64_e0m4", small);
  }
}

// The GPU family's prefill rows from 256 rows: on NVIDIA's tensor cores prep_f16_* makes
// the weights and the normed rows fp16 and qgemm_mma_f16's cp.async tiles multiply them
// (enough 128-wide tiles for half of 132 compute units: N = 2048 at M = 600, 2816 at M =
// 300; K = 520 and those M leave ragged tiles and a ragged last slice of k); elsewhere the
// portable tiles.
TEST(MatMulExtras, ManyRowsMatchUnfusedMath) {
  for (const Extras& e : {Extras{true, true, true, ""}, Extras{true, false, false, "silu"}, Extras{false, true, false, ""}})
    for (const char* scheme : {"e0m4", "q8"}) {
      expectUnfusedMath(scheme, 520, 2048, e, {600}, {true}, "qgemm_mma_f16");
      expectUnfusedMath(scheme, 520, 2816, e, {300}, {true}, "qgemm_mma_f16");
    }
}

// Few tiles over a long K: on NVIDIA's tensor cores the in-tile rows split K (matmul.cpp's
// QCase::kSlice), each tile's last work-group adding the slices' sums in order. K = 2056
// leaves a ragged last slice, N = 200 ragged tiles; one executor runs M = 100, 64 and 100
// again, so a launch finds the tile counters as the one before left them (at zero). 64-row
// tiles up to 128 rows; from 129 rows to 255, 128 x 128 tiles where 66 of them fill half
// the H100.
TEST(MatMulExtras, SplitKMatchesUnfusedMath) {
  for (const Extras& e : {Extras{true, true, true, ""}, Extras{true, false, false, "silu"}})
    for (const char* scheme : {"e0m4", "q8"}) {
      expectUnfusedMath(scheme, 2056, 200, e, {100, 64, 100}, {true}, (std::string("qgemm64_mma_") + scheme).c_str());
      expectUnfusedMath(scheme, 1032, 4224, e, {200}, {true}, (std::string("qgemm_mma_") + scheme).c_str());
    }
  // Float weights on them with --gemm f16 (under auto the fp32 tiles take them).
  const auto f16 = [](Device& d) { d.setInt8Activations(false); };
  for (const Extras& e : {Extras{true, true, true, ""}, Extras{true, false, false, "silu"}}) {
    expectUnfusedMath("float", 2056, 200, e, {100, 64, 100}, {true}, "gemm64_mma_f32", f16);
    expectUnfusedMath("float", 1032, 4224, e, {200}, {true}, "gemm_mma_f32", f16);
  }
}

// Below 256 rows, 16-level codes on NVIDIA's tensor cores take the int8 rows
// (qgemm64_mma_i8_*: first, in the same launch, each 128 k of the rows times the norm's
// weights rounded to int8): 7, 64 and 200 rows (ragged and whole 64-row tiles), and over
// K = 4096 with 4 tiles, K split in 8 (two executors' runs: the tile and piece counters back
// at zero). One row at K = 4096 takes the
// one-row int8 rows (qgemv_wide_i8_*: each item rounds its block of 32 itself), 200
// columns (the last group's ragged), and over 8,712 columns (or more: 4 work-groups of 16 a
// compute unit) their 16-column form (qgemv_wide16_i8_*, the last group's ragged).
// Elsewhere other rows; all against the unfused math (for the int8 rows, A rounded as they
// round it).
TEST(MatMulExtras, Int8RowsMatchUnfusedMath) {
  for (const Extras& e : {Extras{true, true, true, ""}, Extras{true, false, false, "silu"}, Extras{false, false, true, ""}})
    for (const std::string scheme : {"e0m4", "int4", "q8", "q3h"}) {
      const std::string kernel = "qgemm64_mma_i8_" + scheme, gemv = "qgemv_wide_i8_" + scheme;
      expectUnfusedMath(scheme.c_str(), 256, 48, e, {7, 64, 200}, {true}, kernel.c_str());
      expectUnfusedMath(scheme.c_str(), 4096, 200, e, {64, 64}, {true}, kernel.c_str());
      expectUnfusedMath(scheme.c_str(), 320, 48, e, {300}, {true}, ("qgemm64_mma_i8_ragged_" + scheme).c_str());  // K % 128 == 64
      for (int64_t group : {32, 64})  // groups ending within a stage: the ragged rows
        expectUnfusedMath(scheme.c_str(), 320, 48, e, {70}, {true}, ("qgemm64_mma_i8_ragged_" + scheme).c_str(), nullptr, group);
      if (scheme == "e0m4" || scheme == "int4") {
        expectUnfusedMath(scheme.c_str(), 4096, 200, e, {1}, {true}, gemv.c_str());
        const int64_t wide16 = std::max<int64_t>(8712, 64 * static_cast<int64_t>(selectDevice("").computeUnits) + 8);
        expectUnfusedMath(scheme.c_str(), 256, wide16, e, {1}, {true}, ("qgemv_wide16_i8_" + scheme).c_str());
      }
    }
}

// The tensor-core rows on any device, their PTX emulated (Device::setMmaEmulation:
// kernels/mma.cl's TL_MMA_EMU computes each form from the PTX ISA's fragment layouts), so
// that the tiles' index arithmetic is checked without an NVIDIA device: the int8 rows (7
// and 64 rows; K = 1024 in one tile, split in 4 on PoCL's 2 compute units), the in-tile
// 64 x 64 rows (K = 2056 split, a ragged last slice) and 128 x 128 (200 rows, ragged), and
// from 256 rows the int8 rows again (300 rows, K a multiple of 128) or, where K is not,
// the fp16 weights' (qgemm_mma_f16).
TEST(MatMulExtras, EmulatedTensorCoresMatchUnfusedMath) {
  const auto emulate = [](Device& d) { d.setMmaEmulation(true); };
  {
    Device device(selectDevice(""), false);
    // Where the PTX is real (NVIDIA), the other tests run these tiles, and the tile each
    // shape takes follows the device's multiprocessor count.
    if (device.info().platformName.find("NVIDIA") != std::string::npos) GTEST_SKIP() << "tensor cores are real here";
    emulate(device);
    KernelLibrary lib(device);
    for (const char* k : {"qgemm64_mma_i8_e0m4", "qgemm64_mma_e0m4", "qgemm_mma_int4", "qgemm_mma_f16"})
      ASSERT_TRUE(lib.has(k)) << k;
  }
  for (const Extras& e : {Extras{true, true, true, ""}, Extras{true, false, false, "silu"}})
    for (const std::string scheme : {"e0m4", "int4", "q8", "q3h"}) {
      expectUnfusedMath(scheme.c_str(), 256, 48, e, {7, 64}, {true}, ("qgemm64_mma_i8_" + scheme).c_str(), emulate);
      expectUnfusedMath(scheme.c_str(), 320, 48, e, {70}, {true}, ("qgemm64_mma_i8_ragged_" + scheme).c_str(), emulate);
      expectUnfusedMath(scheme.c_str(), 320, 48, e, {70}, {true}, ("qgemm64_mma_i8_ragged_" + scheme).c_str(), emulate, 32);
      expectUnfusedMath(scheme.c_str(), 256, 48, e, {7}, {true}, ("qgemm64_mma_i8_ragged_" + scheme).c_str(), emulate, 64);
      expectUnfusedMath(scheme.c_str(), 1024, 48, e, {64}, {true}, ("qgemm64_mma_i8_" + scheme).c_str(), emulate);
      expectUnfusedMath(scheme.c_str(), 2056, 48, e, {64}, {true}, ("qgemm64_mma_" + scheme).c_str(), emulate);
      expectUnfusedMath(scheme.c_str(), 264, 264, e, {200}, {true}, ("qgemm_mma_" + scheme).c_str(), emulate);
      expectUnfusedMath(scheme.c_str(), 136, 264, e, {256}, {true}, "qgemm_mma_f16", emulate);
      expectUnfusedMath(scheme.c_str(), 256, 264, e, {300}, {true}, ("qgemm64_mma_i8_" + scheme).c_str(), emulate);
    }
  // From 256 rows with the fp16 weights' rows off (Device::setHalvesRows, tl-bench
  // --kernels' in-tile row): the in-tile rows.
  const auto inTile = [&](Device& d) {
    emulate(d);
    d.setHalvesRows(false);
  };
  for (const Extras& e : {Extras{true, true, true, ""}, Extras{true, false, false, "silu"}})
    expectUnfusedMath("q3h", 136, 264, e, {256}, {true}, "qgemm_mma_q3h", inTile);
  // Float weights on them where A is not rounded to int8 (--gemm f16): 64 x 64 tiles, K
  // split, and 128 x 128 tiles; under auto the fp32 tiles (gemm_f32, exact).
  const auto f16 = [&](Device& d) {
    emulate(d);
    d.setInt8Activations(false);
  };
  for (const Extras& e : {Extras{true, true, true, ""}, Extras{true, false, false, "silu"}}) {
    expectUnfusedMath("float", 2056, 48, e, {64}, {true}, "gemm64_mma_f32", f16);
    expectUnfusedMath("float", 264, 264, e, {200}, {true}, "gemm_mma_f32", f16);
    expectUnfusedMath("float", 264, 264, e, {200}, {true}, "gemm_f32", emulate);
  }
}

// Two e0m4 one-row GEMVs in a row, the first adding a residual, the second normalizing its
// input (a layer's down projection, then the next layer's QKV or gate/up): on GPUs the
// first hands the norm on to the second (matmul.cpp's normHandoff: its outputs times the
// norm's weights and its work-groups' sums of squares), through the one-row rows (128
// wide), the wide rows (4096 wide, a GLU after) and, K = 4096 into the first, NVIDIA's
// one-row int8 rows handing it on. The GPU family's output equals the CPU family's, which
// keeps the norm in the second GEMV.
TEST(MatMulExtras, NormHandedBetweenOneRowGemvs) {
  for (auto [K, width, N2, glu] : {std::tuple<int64_t, int64_t, int64_t, const char*>{256, 128, 96, ""},
                                   {256, 4096, 4104, "silu"}, {4096, 128, 96, ""}}) {
    Model model = test::oneNodeModel("MatMul", {{"x", {"M", std::to_string(K)}}, {"r", {"M", std::to_string(width)}}});
    auto* g = model.proto.mutable_graph();
    auto* first = g->mutable_node(0);
    first->clear_input();
    for (const char* in : {"x", "W1", "", "r"}) first->add_input(in);
    auto* second = g->add_node();
    second->set_op_type("MatMul");
    second->set_domain(first->domain());
    for (const char* in : {"y", "W2", "", "", "scale"}) second->add_input(in);
    second->add_output("z");
    addAttr(*second, "norm_epsilon", 1e-5f);
    if (*glu) addAttr(*second, "glu", std::string(glu));
    g->mutable_output(0)->set_name("z");
    std::mt19937 rng(static_cast<unsigned>(width));
    std::normal_distribution<float> normal(0.0f, 0.05f);
    auto initializer = [&](const char* name, std::vector<int64_t> dims) {
      std::vector<float> v(static_cast<size_t>(dims[0] * (dims.size() > 1 ? dims[1] : 1)));
      for (auto& x : v) x = dims.size() > 1 ? normal(rng) : 1 + 10 * normal(rng);
      addInitializer(model, name, dims, v.data(), v.size());
    };
    initializer("W1", {K, width});
    initializer("W2", {width, N2});
    initializer("scale", {width});
    QuantOptions opt;
    opt.scheme = QuantScheme::E0M4;
    opt.quantizeLmHead = true;
    ASSERT_EQ(quantizeModel(model, opt, false).size(), 2u);
    Graph graph(model.proto.graph());
    ShapeAnalysis analysis = inferShapes(model, graph);
    Device device(selectDevice(""), false);
    std::vector<float> x(static_cast<size_t>(K)), r(static_cast<size_t>(width));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (auto& v : x) v = u(rng);
    for (auto& v : r) v = u(rng);
    std::vector<double> out[2];
    bool int8 = false;
    for (bool gpu : {false, true}) {
      device.setGpuKernels(gpu);
      Executor ex(device, model, graph, analysis);
      for (int step = 0; step < 2; ++step)  // the second run replays the first's launches
        out[gpu] = ex.run({makeTensor("x", DType::Float, {1, K}, x.data()), makeTensor("r", DType::Float, {1, width}, r.data())})[0].toDouble();
      const auto launches = ex.explain();
      int64_t handed = 0;
      for (const auto& l : launches) handed += l.why.find("RMSNorm handed on") != std::string::npos;
      int8 |= int8Rows(launches);
      EXPECT_EQ(handed, gpu ? 1 : 0) << "K " << K << " width " << width;
    }
    ASSERT_EQ(out[0].size(), out[1].size());
    double maxErr = 0, maxRef = 0;
    for (size_t i = 0; i < out[0].size(); ++i) {
      maxErr = std::max(maxErr, std::fabs(out[1][i] - out[0][i]));
      maxRef = std::max(maxRef, std::fabs(out[0][i]));
    }
    // NVIDIA's one-row int8 rows (K = 4096 here) round A to int8: 1.2% of the largest
    // output on an H200 against the CPU family's fp32.
    EXPECT_LT(maxErr, (int8 ? 2e-2 : 1e-4) * std::max(1.0, maxRef)) << "K " << K << " width " << width;
  }
}

}  // namespace
}  // namespace tl
