// Every quantized kernel against a CPU reference (Eigen) of the same dequantized
// math, on random shapes with ragged last groups and M = 1, 2, 4, 7, 64, 300.
#include <Eigen/Dense>
#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "graph/graph.h"
#include "onnx/model_io.h"
#include "quant/quantize_model.h"
#include "runtime/executor.h"
#include "shape/shape_inference.h"

namespace tl {
namespace {

using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

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
  Executor ex(device, model, graph, analysis);
  for (int64_t M : {1, 2, 4, 7, 64, 300}) {
    Mat x(M, c.K);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = u(rng);
    auto got = ex.run({makeTensor("x", DType::Float, {M, c.K}, x.data())});
    ASSERT_EQ(got[0].dims, (std::vector<int64_t>{M, c.N}));
    Mat xa = x;
    if (c.scheme == QuantScheme::W4A8) {  // activations to int8 per row, as the kernel does
      for (int64_t m = 0; m < M; ++m) {
        float s = xa.row(m).cwiseAbs().maxCoeff() / 127.0f;
        if (s == 0) s = 1;
        for (int64_t k = 0; k < c.K; ++k) xa(m, k) = std::nearbyint(xa(m, k) / s) * s;
      }
    }
    Mat want = xa * wq;
    auto g = got[0].toDouble();
    double maxErr = 0, maxRef = 0;
    for (int64_t i = 0; i < want.size(); ++i) {
      maxErr = std::max(maxErr, std::fabs(g[static_cast<size_t>(i)] - want.data()[i]));
      maxRef = std::max(maxRef, double(std::fabs(want.data()[i])));
    }
    EXPECT_LT(maxErr, 1e-4 * std::max(1.0, maxRef)) << schemeName(c.scheme) << " M=" << M << " K=" << c.K << " N=" << c.N;
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
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Schemes, QMatMulKernel, ::testing::ValuesIn(cases()), [](const auto& info) {
  return std::string(info.param.gpuKernels ? "gpu_" : "cpu_") + schemeName(info.param.scheme) + "_K" +
         std::to_string(info.param.K) + "_N" + std::to_string(info.param.N) + "_g" + std::to_string(info.param.group);
});

}  // namespace
}  // namespace tl
