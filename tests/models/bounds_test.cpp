// Kernels that read and write only within their tensors. On the default device these
// are value tests against the host at ragged edges (no dim a multiple of a tile). Under
// Oclgrind (ctest's kernel_bounds, docs/testing.md) every tensor has a buffer of its own
// exact size, and the simulator names any access past one: a kernel that reads a row or
// a scale too many gives right values everywhere else (the extra load feeds nothing
// stored), so only a checker of every access sees it.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <random>

#include "cli/error.h"
#include "cli/test_support.h"
#include "graph/graph.h"
#include "quant/quantize_model.h"
#include "runtime/executor.h"
#include "shape/shape_inference.h"

namespace tl {
namespace {

std::vector<float> randomFloats(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

// Under `ctest -R kernel_bounds` the run must be on Oclgrind's exact buffers, or the
// checker would have nothing to see.
void expectCheckedDevice(Executor& ex) {
  if (std::getenv("TL_EXPECT_EXACT_BUFFERS")) {
    ASSERT_TRUE(ex.device().info().exactBuffers) << "not on Oclgrind";
  }
}

// [2, M, K] x [K, N] with M = 17, K = 19, N = 18: the GPU family's 16 x 16 tiles
// (matmul_f32) end a row and a column past a tile, the CPU family's 4 x 4 blocks past a
// block.
TEST(KernelBounds, FloatProductsAtRaggedEdges) {
  const int64_t B = 2, M = 17, K = 19, N = 18;
  const auto a = randomFloats(static_cast<size_t>(B * M * K), 1), b = randomFloats(static_cast<size_t>(K * N), 2);
  Model m = test::oneNodeModel("MatMul", {{"a", {"2", "17", "19"}}, {"b", {"19", "18"}}}, 0, "");
  test::onBothFamilies(m, [&](Executor& ex, bool gpu) {
    expectCheckedDevice(ex);
    const auto got = ex.run({test::floats("a", a, {B, M, K}), test::floats("b", b, {K, N})});
    ASSERT_EQ(got[0].dims, (std::vector<int64_t>{B, M, N}));
    const auto y = got[0].toDouble();
    for (int64_t i = 0; i < B * M; ++i)
      for (int64_t n = 0; n < N; ++n) {
        double want = 0;
        for (int64_t k = 0; k < K; ++k) want += double(a[static_cast<size_t>(i * K + k)]) * b[static_cast<size_t>(k * N + n)];
        ASSERT_NEAR(y[static_cast<size_t>(i * N + n)], want, 1e-5) << "row " << i << " column " << n << " gpu " << gpu;
      }
  });
}

// tl.QMatMul of every scheme at K = 37 (a ragged last group of 5 and a half-filled last
// byte) and K = 40 (whole words of codes: the CPU family's qgemv_cpu_* and the GPU's
// gemv rows, which K = 37 leaves to the column kernels), N = 9 and M = 1, 5 and 17, in
// both families: each column's scales and offsets end at the buffer's end for the last one.
// Again in the GPU family with the tensor-core tiles built (emulated where no NVIDIA device
// is: their ragged tiles under Oclgrind too). Launches that round A (fp16 on the tensor
// cores, int8 rows) are held to 4e-3 of the largest output, as in MatMulExtras.
TEST(KernelBounds, QuantizedProductsAtRaggedEdges) {
  const int64_t N = 9;
  for (const int64_t K : {37, 40}) {
    const auto w = randomFloats(static_cast<size_t>(K * N), 3);
    for (auto s : {QuantScheme::E0M4, QuantScheme::Int4, QuantScheme::Q8, QuantScheme::W4A8, QuantScheme::Q3H}) {
      Model model = matmulModel(w.data(), K, N);
      QuantOptions opt;
      opt.scheme = s;
      opt.group = 16;
      opt.quantizeLmHead = true;
      ASSERT_EQ(quantizeModel(model, opt, false).size(), 1u);
      const auto deq = dequantize(quantize(w.data(), K, N, s, 16));
      const auto check = [&](Executor& ex, bool gpu) {
        expectCheckedDevice(ex);
        for (int64_t M : {1, 5, 17}) {
          auto x = randomFloats(static_cast<size_t>(M * K), static_cast<unsigned>(M));
          const auto got = ex.run({makeTensor("x", DType::Float, {M, K}, x.data())});
          ASSERT_EQ(got[0].dims, (std::vector<int64_t>{M, N}));
          const auto y = got[0].toDouble();
          if (s == QuantScheme::W4A8) test::roundRowsToInt8(x.data(), M, K);
          std::vector<double> want(static_cast<size_t>(M * N));
          for (int64_t r = 0; r < M; ++r)
            for (int64_t n = 0; n < N; ++n)
              for (int64_t k = 0; k < K; ++k)
                want[static_cast<size_t>(r * N + n)] += double(x[static_cast<size_t>(r * K + k)]) * deq[static_cast<size_t>(k * N + n)];
          double largest = 1;
          for (double v : want) largest = std::max(largest, std::abs(v));
          const double tolerance = test::roundsActivations(ex.explain()) ? 4e-3 * largest : 1e-4;
          for (size_t i = 0; i < want.size(); ++i)
            ASSERT_NEAR(y[i], want[i], tolerance) << schemeName(s) << " K=" << K << " M=" << M << " row " << i / N << " column "
                                                  << i % N << " gpu " << gpu << " " << ex.explain().back().kernel;
        }
      };
      test::onBothFamilies(model, check);
      test::onEmulatedTensorCores(model, check);
    }
  }
}

// tl.Attention, grouped-query (4 heads over 2 of 64), with a float mask: a decode row over
// 300 keys (split and merged), 17 rows over 37 keys and two batches of 3 rows over 9; and
// causal (no mask: each row sees the keys up to its own position) at 17 rows over 17 and
// 5 over 40; in both families, against double.
TEST(KernelBounds, AttentionAtRaggedEdges) {
  const int64_t H = 4, Hkv = 2, D = 64;
  for (bool causal : {false, true}) {
    std::vector<std::pair<std::string, std::vector<std::string>>> in = {
        {"q", {"B", "4", "S", "64"}}, {"k", {"B", "2", "T", "64"}}, {"v", {"B", "2", "T", "64"}}};
    if (!causal) in.push_back({"mask", {"B", "1", "S", "T"}});
    Model m = test::oneNodeModel("Attention", in);
    test::setAttr(m, "scale", 0.125f);
    if (causal) test::setAttr(m, "causal", int64_t{1});
    test::onBothFamilies(m, [&](Executor& ex, bool gpu) {
      expectCheckedDevice(ex);
      const std::vector<std::array<int64_t, 3>> shapes =
          causal ? std::vector<std::array<int64_t, 3>>{{1, 17, 17}, {1, 5, 40}} : std::vector<std::array<int64_t, 3>>{{1, 1, 300}, {1, 17, 37}, {2, 3, 9}};
      for (auto [B, S, T] : shapes) {
        const auto q = randomFloats(static_cast<size_t>(B * H * S * D), 4), k = randomFloats(static_cast<size_t>(B * Hkv * T * D), 5),
                   v = randomFloats(static_cast<size_t>(B * Hkv * T * D), 6);
        auto mask = randomFloats(static_cast<size_t>(B * S * T), 7);
        for (size_t i = 0; i < mask.size(); ++i)  // every third key masked, but each row's first
          if (i % 3 == 1 && i % static_cast<size_t>(T) != 0) mask[i] = -INFINITY;
        std::vector<Tensor> feed = {test::floats("q", q, {B, H, S, D}), test::floats("k", k, {B, Hkv, T, D}),
                                    test::floats("v", v, {B, Hkv, T, D})};
        if (!causal) feed.push_back(test::floats("mask", mask, {B, 1, S, T}));
        const auto y = ex.run(feed)[0].toDouble();
        // NVIDIA's tensor-core rows take fp16 products (AttentionKernel.CausalPrefillMatchesReference)
        const double tol = ex.kernels().tensorCores() ? 1e-2 : 1e-5;
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < H; ++h)
            for (int64_t s = 0; s < S; ++s) {
              const size_t kv = static_cast<size_t>((b * Hkv + h / (H / Hkv)) * T * D), row = static_cast<size_t>(((b * H + h) * S + s) * D);
              const int64_t seen = causal ? T - S + s + 1 : T;
              std::vector<double> p(static_cast<size_t>(seen));
              double mx = -INFINITY, sum = 0;
              for (int64_t t = 0; t < seen; ++t) {
                double dot = 0;
                for (int64_t e = 0; e < D; ++e) dot += double(q[row + static_cast<size_t>(e)]) * k[kv + static_cast<size_t>(t * D + e)];
                p[static_cast<size_t>(t)] = dot * 0.125 + (causal ? 0.0 : mask[static_cast<size_t>((b * S + s) * T + t)]);
                mx = std::max(mx, p[static_cast<size_t>(t)]);
              }
              for (auto& x : p) sum += x = std::exp(x - mx);
              for (int64_t e = 0; e < D; ++e) {
                double want = 0;
                for (int64_t t = 0; t < seen; ++t) want += p[static_cast<size_t>(t)] / sum * v[kv + static_cast<size_t>(t * D + e)];
                ASSERT_NEAR(y[row + static_cast<size_t>(e)], want, tol * (1 + std::fabs(want)))
                    << "causal " << causal << " B " << B << " S " << S << " T " << T << " gpu " << gpu << " at b " << b
                    << " h " << h << " s " << s << " d " << e;
              }
            }
      }
    });
  }
}

// Guard bytes (TL_GUARD_BYTES, DeviceInfo::guardBytes): past each buffer's end a fill
// that every synchronized run checks, for devices without Oclgrind. A run within its
// buffers leaves the guards whole; a byte changed just past a tensor's end (here by the
// host, as a kernel writing one element too many would) is named with the tensor.
TEST(GuardBytes, AWritePastATensorIsNamed) {
  Model m = test::oneNodeModel("Add", {{"a", {"3", "5"}}, {"b", {"3", "5"}}}, 0, "");
  Graph graph(m.proto.graph());
  ShapeAnalysis analysis = inferShapes(m, graph);
  DeviceInfo info = selectDevice("");
  if (info.exactBuffers) GTEST_SKIP() << "Oclgrind: guards are off, the simulator checks each access";
  info.guardBytes = 64;
  Device device(info, false);
  Executor ex(device, m, graph, analysis);
  const auto a = randomFloats(15, 1), b = randomFloats(15, 2);
  auto out = ex.run({test::floats("a", a, {3, 5}), test::floats("b", b, {3, 5})}, {"y"});
  ASSERT_EQ(out.size(), 1u);
  const float* y = reinterpret_cast<const float*>(out[0].bytes.data());
  for (size_t i = 0; i < 15; ++i) EXPECT_EQ(y[i], a[i] + b[i]) << i;
  EXPECT_NO_THROW(ex.checkGuards());
  const cl_uchar one = 1;  // byte 60, the first past y's 15 floats
  ASSERT_EQ(clEnqueueFillBuffer(device.queue(), ex.buffer("y"), &one, 1, 60, 1, 0, nullptr, nullptr), CL_SUCCESS);
  try {
    ex.checkGuards();
    ADD_FAILURE() << "a changed guard byte passed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::Device);
    EXPECT_STREQ(e.what(),
                 "a kernel wrote past the end of tensor 'y' (60 bytes): its byte 60, in the guard, is 1 where 165 was written "
                 "(TL_GUARD_BYTES)");
  }
}

// Scratch that kernels leave at zero when they finish (the split-K rows' tile counters,
// kernels/gemm.cl) is zero when made and when grown, and kept as the kernels left it
// otherwise. Growth decides, not the handle: a buffer released and another made can get
// the old one's handle back (on an H200 the split-K rows then summed 300 rows after 64
// over stale counters, now and then).
TEST(ZeroedScratch, ZeroWhenMadeAndWhenGrown) {
  Model m = test::oneNodeModel("Add", {{"a", {"3", "5"}}, {"b", {"3", "5"}}}, 0, "");
  Graph graph(m.proto.graph());
  ShapeAnalysis analysis = inferShapes(m, graph);
  Device device(selectDevice(""), false);
  Executor ex(device, m, graph, analysis);
  const cl_uchar dirty = 0xab;
  auto bytesOf = [&](size_t n) {
    std::vector<cl_uchar> v(n, 1);
    EXPECT_EQ(clEnqueueReadBuffer(device.queue(), ex.buffer("#counters"), CL_TRUE, 0, n, v.data(), 0, nullptr, nullptr),
              CL_SUCCESS);
    return v;
  };
  for (size_t bytes : {64, 72, 200, 4096, 4100}) {
    ex.zeroedScratch("#counters", bytes);
    const auto made = bytesOf(bytes);
    EXPECT_EQ(std::count(made.begin(), made.end(), 0), static_cast<long>(bytes)) << bytes << " bytes, after growing";
    ASSERT_EQ(clEnqueueFillBuffer(device.queue(), ex.buffer("#counters"), &dirty, 1, 0, bytes, 0, nullptr, nullptr),
              CL_SUCCESS);
    ex.zeroedScratch("#counters", bytes);  // no growth: what the kernels left stays
    const auto kept = bytesOf(bytes);
    EXPECT_EQ(std::count(kept.begin(), kept.end(), dirty), static_cast<long>(bytes)) << bytes << " bytes, not grown";
  }
}

}  // namespace
}  // namespace tl
