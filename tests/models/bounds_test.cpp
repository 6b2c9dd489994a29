// Kernels that read and write only within their tensors. On the default device these
// are value tests against the host at ragged edges (no dim a multiple of a tile). Under
// Oclgrind (ctest's kernel_bounds, docs/testing.md) every tensor has a buffer of its own
// exact size, and the simulator names any access past one: a kernel that reads a row or
// a scale too many gives right values everywhere else (the extra load feeds nothing
// stored), so only a checker of every access sees it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <random>

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
  if (std::getenv("TL_EXPECT_EXACT_BUFFERS")) ASSERT_TRUE(ex.device().info().exactBuffers) << "not on Oclgrind";
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
// byte), N = 9 and M = 1, 5 and 17, in both families: each column's scales and offsets
// end at the buffer's end for the last one.
TEST(KernelBounds, QuantizedProductsAtRaggedEdges) {
  const int64_t K = 37, N = 9;
  const auto w = randomFloats(static_cast<size_t>(K * N), 3);
  for (auto s : {QuantScheme::E0M4, QuantScheme::Int4, QuantScheme::Q8, QuantScheme::W4A8, QuantScheme::Q3H}) {
    Model model = matmulModel(w.data(), K, N);
    QuantOptions opt;
    opt.scheme = s;
    opt.group = 16;
    opt.quantizeLmHead = true;
    ASSERT_EQ(quantizeModel(model, opt, false).size(), 1u);
    const auto deq = dequantize(quantize(w.data(), K, N, s, 16));
    test::onBothFamilies(model, [&](Executor& ex, bool gpu) {
      expectCheckedDevice(ex);
      for (int64_t M : {1, 5, 17}) {
        auto x = randomFloats(static_cast<size_t>(M * K), static_cast<unsigned>(M));
        const auto got = ex.run({makeTensor("x", DType::Float, {M, K}, x.data())});
        ASSERT_EQ(got[0].dims, (std::vector<int64_t>{M, N}));
        const auto y = got[0].toDouble();
        for (int64_t r = 0; r < M; ++r) {
          if (s == QuantScheme::W4A8) {  // activations to int8 per row, as the kernel does
            float amax = 0;
            for (int64_t k = 0; k < K; ++k) amax = std::max(amax, std::fabs(x[static_cast<size_t>(r * K + k)]));
            const float sc = amax > 0 ? amax / 127.0f : 1.0f;
            for (int64_t k = 0; k < K; ++k) x[static_cast<size_t>(r * K + k)] = std::nearbyint(x[static_cast<size_t>(r * K + k)] / sc) * sc;
          }
          for (int64_t n = 0; n < N; ++n) {
            double want = 0;
            for (int64_t k = 0; k < K; ++k) want += double(x[static_cast<size_t>(r * K + k)]) * deq[static_cast<size_t>(k * N + n)];
            ASSERT_NEAR(y[static_cast<size_t>(r * N + n)], want, 1e-4) << schemeName(s) << " M=" << M << " row " << r
                                                                        << " column " << n << " gpu " << gpu;
          }
        }
      }
    });
  }
}

}  // namespace
}  // namespace tl
