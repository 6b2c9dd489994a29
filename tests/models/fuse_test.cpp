// tl-fuse's passes on every model: each pass alone and all of them leave outputs within
// fp32 tolerance of ONNX Runtime's, in both kernel families; the fused ops against a CPU
// reference (Eigen) on random shapes; greedy generation unchanged; the CLI's errors.
#include <Eigen/Dense>
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <cmath>
#include <cstring>
#include <algorithm>
#include <functional>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "check/reference_check.h"
#include "cli/error.h"
#include "cli/test_support.h"
#include "fuse/fuse.h"
#include "graph/attributes.h"
#include "graph/graph.h"
#include "graph/tl_ops.h"
#include "lm/causal_lm.h"
#include "onnx/model_io.h"
#include "plan/kv_cache.h"
#include "plan/memory_plan.h"
#include "quant/quantize_model.h"
#include "runtime/executor.h"
#include "sample/sampler.h"
#include "shape/shape_inference.h"

namespace tl {
namespace {

using test::addInitializer;
using test::floats;
using test::oneNodeModel;
using test::onBothFamilies;
using test::refusalOf;
using test::runTool;
using test::setAttr;

struct FuseCase {
  std::filesystem::path dir;
  std::vector<std::string> passes;  // empty: all
};

std::string caseName(const FuseCase& c) {
  std::string p = c.passes.empty() ? "all" : c.passes[0];
  for (auto& ch : p)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return test::modelTestName(c.dir) + "_" + p;
}

std::vector<FuseCase> cases() {
  std::vector<FuseCase> out;
  for (const auto& d : test::modelDirs()) {
    for (const auto& p : fusePasses()) out.push_back({d, {p.name}});  // each pass alone
    out.push_back({d, {}});                                             // all of them
  }
  return out;
}

class FuseModels : public ::testing::TestWithParam<FuseCase> {};

TEST_P(FuseModels, MatchesReferenceOutputs) {
  const auto& c = GetParam();
  Model model = loadModel((c.dir / "model.onnx").string());
  // One per tanh-form GELU (gpt2, Gemma's TorchScript export), one per erf-form (ViT).
  const auto gelus = opCounts(model.proto.graph())["Tanh"] + opCounts(model.proto.graph())["Erf"];
  const auto results = runFusePasses(model, c.passes);
  // Every RMSNorm chain, rotary embedding, SiLU gate and attention of these exports is proven: two
  // norms, q and k, and one MLP per layer, and the final norm. gpt2 has LayerNormalization
  // and learned positions instead, and Gemma a GELU gate. bytellama has 4 layers, the others 2.
  const std::string name = c.dir.filename().string();
  const bool encoder = name.rfind("clip", 0) == 0 || name == "vit";
  const bool llamaLike = name.rfind("gpt2", 0) != 0 && !encoder, silu = llamaLike && name.rfind("gemma", 0) != 0;
  const int layers = name.rfind("bytellama", 0) == 0 ? 4 : 2;
  for (const auto& r : results) {
    int want = -1;  // dead-nodes: whatever the exporter left
    if (r.pass == "rmsnorm") want = llamaLike ? 2 * layers + 1 : 0;
    if (r.pass == "rope") want = llamaLike ? 2 * layers : 0;
    if (r.pass == "swiglu") want = silu ? layers : 0;
    if (r.pass == "gelu") want = gelus;
    // Gemma's gate: after gelu (TorchScript) or on the dynamo export's own Gelu.
    const bool dynamo = c.dir.string().find("dynamo") != std::string::npos;
    if (r.pass == "geglu") want = name.rfind("gemma", 0) == 0 && (c.passes.empty() || dynamo) ? layers : 0;
    if (r.pass == "attention") want = layers;
    // q/k/v and gate/up; gpt2 and Phi-3 export both as one projection already.
    // After rmsnorm, every norm after a residual: two per layer (the last the final norm);
    // the first layer's input norm reads the embedding, the one near miss. Alone it finds no tl.RMSNorm.
    if (r.pass == "residual-norm") want = llamaLike && c.passes.empty() ? 2 * layers : 0;
    // After rope, q and k of every layer rotate in one node (Phi-3's TorchScript partial
    // rotary too, once its Slices and Concat joined the RoPE).
    if (r.pass == "rope-pair") want = llamaLike && c.passes.empty() ? layers : 0;
    // Qwen2's q/k/v biases; the encoders' every projection (q, k, v, out, fc1, fc2).
    const bool qwen2 = name.rfind("qwen2", 0) == 0;
    if (r.pass == "matmul-bias") want = qwen2 ? 3 * layers : encoder ? 6 * layers : 0;
    // Phi-3's qkv and gate_up projections, each cut into column ranges.
    if (r.pass == "split-matmul") want = name.rfind("phi3", 0) == 0 ? 2 * layers : 0;
    // The dynamo exports' tied lm_head: MatMul(h, Transpose(embedding)).
    if (r.pass == "transpose-matmul") want = dynamo && (name.rfind("gemma", 0) == 0 || name.rfind("gpt2", 0) == 0) ? 1 : 0;
    // After the others, every layer's k and v cache Concats, in one launch (alone, it also
    // meets the rotate-half Concats, whatever pairs of them it finds).
    if (r.pass == "concat-pair") want = !c.passes.empty() ? -1 : name.find("-past") != std::string::npos ? layers : 0;
    // After rope-pair and concat-pair, every layer's k rotation and cache append in one node;
    // gpt2's cache Concats have no RoPE to join: its near misses, one a layer.
    const bool cached = c.passes.empty() && name.find("-past") != std::string::npos;
    if (r.pass == "rope-cache") {
      want = cached && llamaLike ? layers : 0;
      if (cached && name.rfind("gpt2", 0) == 0) {
        EXPECT_EQ(r.rewrites, 0);
        EXPECT_EQ(static_cast<int>(r.nearMisses.size()), layers);
        continue;
      }
    }
    if (r.pass == "merge-matmul") want = encoder ? layers : llamaLike && name.rfind("phi3", 0) != 0 ? 2 * layers : 0;
    if (want < 0) continue;
    EXPECT_EQ(r.rewrites, want) << r.pass;
    if (r.pass == "residual-norm" && want > 0) {
      EXPECT_EQ(r.nearMisses.size(), 1u);
      continue;
    }
    if (r.pass == "matmul-bias" && llamaLike && !c.passes.empty()) {
      // Alone: the residual Adds after o and down (and Gemma's tanh-GELU Add) add no bias.
      EXPECT_GE(static_cast<int>(r.nearMisses.size()), 2 * layers);
      for (const auto& m : r.nearMisses) EXPECT_NE(m.find("is not a constant float"), std::string::npos) << m;
      continue;
    }
    if (r.pass == "swiglu" && name.rfind("clip", 0) == 0) {  // CLIP's quick_gelu, x * sigmoid(1.702 x)
      EXPECT_EQ(static_cast<int>(r.nearMisses.size()), layers);
      continue;
    }
    EXPECT_TRUE(r.nearMisses.empty()) << r.pass << ": " << r.nearMisses.front();
  }
  const auto ops = opCounts(model.proto.graph());
  const bool all = c.passes.empty();
  if (llamaLike && (all || c.passes[0] == "rmsnorm")) {
    EXPECT_EQ(ops.count("ReduceMean"), 0u);
  }
  if (llamaLike && (all || c.passes[0] == "rope")) {
    EXPECT_EQ(ops.count("Neg"), 0u);
  }
  if (silu && (all || c.passes[0] == "swiglu")) {
    EXPECT_EQ(ops.count("Sigmoid"), 0u);
  }
  if (all || c.passes[0] == "attention") {
    EXPECT_EQ(ops.count("Softmax"), 0u);
  }
  if (name.rfind("clip", 0) == 0 && (all || c.passes[0] == "elementwise")) {
    EXPECT_EQ(ops.count("Sigmoid"), 0u);  // quick_gelu, x * sigmoid(1.702 x): one generated kernel
  }
  if (all || c.passes[0] == "gelu") {
    EXPECT_EQ(ops.count("Tanh"), 0u);
    EXPECT_EQ(ops.count("Erf"), 0u);
  }
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  Device device(selectDevice(""), false);
  for (bool gpuKernels : {false, true}) {
    device.setGpuKernels(gpuKernels);
    Executor ex(device, model, graph, analysis);
    for (const auto& set : loadDataSets(c.dir)) {
      std::vector<std::string> names;
      for (const auto& t : set.outputs) names.push_back(t.name);
      auto got = ex.run(set.inputs, names);
      ASSERT_EQ(got.size(), set.outputs.size());
      for (size_t j = 0; j < got.size(); ++j) {
        auto cmp = compareTensors(got[j], set.outputs[j], 1e-4, 1e-3);
        EXPECT_TRUE(cmp.pass()) << set.dir << " " << cmp.name << " gpu " << gpuKernels << ": max abs " << cmp.maxAbs;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllModels, FuseModels, ::testing::ValuesIn(cases()),
                         [](const auto& info) { return caseName(info.param); });

// tl.RMSNorm alone against y = x / sqrt(mean(x^2) + eps) * scale in Eigen.
TEST(RmsNormKernel, MatchesEigenOnRandomShapes) {
  using Mat = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 1.5f);
  for (int64_t H : {1, 7, 64, 100, 300, 2048}) {
    Model m = oneNodeModel("RMSNorm", {{"x", {"R", std::to_string(H)}}, {"scale", {std::to_string(H)}}}, 1e-5f);
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      for (int64_t R : {1, 3, 17}) {
        Mat x(R, H), s(1, H);
        for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
        for (int64_t i = 0; i < s.size(); ++i) s.data()[i] = normal(rng);
        auto got = ex.run({floats("x", {x.data(), x.data() + x.size()}, {R, H}), floats("scale", {s.data(), s.data() + H}, {H})});
        const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
        Eigen::ArrayXf inv = (x.array().square().rowwise().mean() + 1e-5f).rsqrt();
        Mat want = (x.array().colwise() * inv).rowwise() * s.row(0).array();
        for (int64_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(y[i], want.data()[i], 1e-5f * (1 + std::fabs(want.data()[i])))
              << "H " << H << " R " << R << " gpu " << gpu << " at " << i;
      }
    });
  }
}

// tl.RMSNorm with a residual: y = rmsnorm(x + r) * scale, and the sum x + r as output 1.
TEST(RmsNormKernel, ResidualAddedAndSumWritten) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal;
  for (int64_t H : {5, 64, 300}) {
    const std::string h = std::to_string(H);
    Model m = oneNodeModel("RMSNorm", {{"x", {"R", h}}, {"scale", {h}}, {"r", {"R", h}}}, 1e-6f);
    m.proto.mutable_graph()->mutable_node(0)->add_output("sum");
    m.proto.mutable_graph()->add_output()->set_name("sum");
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      const int64_t R = 3;
      std::vector<float> x(static_cast<size_t>(R * H)), r(x.size()), sc(static_cast<size_t>(H));
      for (auto* v : {&x, &r, &sc})
        for (auto& f : *v) f = normal(rng);
      auto got = ex.run({floats("x", x, {R, H}), floats("scale", sc, {H}), floats("r", r, {R, H})}, {"y", "sum"});
      const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
      const float* sum = reinterpret_cast<const float*>(got[1].bytes.data());
      for (int64_t i = 0; i < R; ++i) {
        double ss = 0;
        for (int64_t j = 0; j < H; ++j) ss += double(x[i * H + j] + r[i * H + j]) * (x[i * H + j] + r[i * H + j]);
        const double inv = 1 / std::sqrt(ss / H + 1e-6);
        for (int64_t j = 0; j < H; ++j) {
          const float v = x[i * H + j] + r[i * H + j];
          ASSERT_EQ(sum[i * H + j], v) << "gpu " << gpu;
          const double want = v * inv * sc[j];
          ASSERT_NEAR(y[i * H + j], want, 1e-5 * (1 + std::fabs(want))) << "H " << H << " gpu " << gpu;
        }
      }
    });
  }
}

// tl.RoPE alone against x * cos + rotate_half(x) * sin, cos and sin [B, 1, N, D]
// broadcast over the heads of x [B, H, N, D].
TEST(RopeKernel, MatchesReferenceOnRandomShapes) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (int64_t D : {2, 16, 64, 96}) {
    const std::string d = std::to_string(D);
    Model m = oneNodeModel("RoPE", {{"x", {"B", "H", "N", d}}, {"cos", {"B", "1", "N", d}}, {"sin", {"B", "1", "N", d}}});
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      for (auto [B, H, N] : {std::array<int64_t, 3>{1, 1, 1}, {2, 3, 5}, {1, 4, 33}}) {
        std::vector<float> x(static_cast<size_t>(B * H * N * D)), c(static_cast<size_t>(B * N * D)), s(c.size());
        for (auto* v : {&x, &c, &s})
          for (auto& f : *v) f = normal(rng);
        auto got = ex.run({floats("x", x, {B, H, N, D}), floats("cos", c, {B, 1, N, D}), floats("sin", s, {B, 1, N, D})});
        const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
        for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
          const int64_t k = i % D, n = i / D % N, b = i / (D * N * H), cs = (b * N + n) * D + k;
          const float rot = k < D / 2 ? -x[i + D / 2] : x[i - D / 2];
          const float want = x[i] * c[cs] + rot * s[cs];  // the device may fuse it into one fma
          ASSERT_NEAR(y[i], want, 1e-6f * (1 + std::fabs(want))) << "D " << D << " gpu " << gpu << " at " << i;
        }
      }
    });
  }
}

// tl.RoPE of q and k in one launch (k with fewer heads) equals each rotated alone.
TEST(RopeKernel, PairRotatesBothInputs) {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal;
  const int64_t B = 2, N = 3, D = 8, Hq = 4, Hk = 2;
  Model m = oneNodeModel("RoPE", {{"q", {"B", "4", "N", "8"}}, {"cos", {"B", "1", "N", "8"}}, {"sin", {"B", "1", "N", "8"}},
                                  {"k", {"B", "2", "N", "8"}}});
  m.proto.mutable_graph()->mutable_node(0)->add_output("k2");
  m.proto.mutable_graph()->add_output()->set_name("k2");
  onBothFamilies(m, [&](Executor& ex, bool gpu) {
    std::vector<float> q(static_cast<size_t>(B * Hq * N * D)), k(static_cast<size_t>(B * Hk * N * D)),
        c(static_cast<size_t>(B * N * D)), sn(c.size());
    for (auto* v : {&q, &k, &c, &sn})
      for (auto& f : *v) f = normal(rng);
    auto got = ex.run({floats("q", q, {B, Hq, N, D}), floats("cos", c, {B, 1, N, D}), floats("sin", sn, {B, 1, N, D}),
                       floats("k", k, {B, Hk, N, D})},
                      {"y", "k2"});
    for (int t = 0; t < 2; ++t) {
      const auto& x = t ? k : q;
      const int64_t H = t ? Hk : Hq;
      const float* y = reinterpret_cast<const float*>(got[static_cast<size_t>(t)].bytes.data());
      for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
        const int64_t d = i % D, n = i / D % N, b = i / (D * N * H), cs = (b * N + n) * D + d;
        const float rot = d < D / 2 ? -x[i + D / 2] : x[i - D / 2];
        ASSERT_NEAR(y[i], x[i] * c[cs] + rot * sn[cs], 1e-6f * (1 + std::fabs(x[i]))) << "tensor " << t << " gpu " << gpu;
      }
    }
  });
}

// tl.RoPE with cache_axis: q rotated; k rotated and appended to past_k; v appended to past_v
// (axis 2 of [B, H, T, D]), against the same math on the host; and with q, k and v stored
// [B, N, H, D] (rope-bshd's x_bshd, x2_bshd, x3_bshd), the same outputs; and with tables of
// one angle a position (cos and sin [B, 1, N, 1], broadcast along the head's dims).
TEST(RopeKernel, CacheAppendsRotatedKAndV) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal;
  const int64_t B = 2, N = 3, P = 5, D = 8, Hq = 4, Hk = 2;
  for (auto [bshd, TD] : {std::pair<bool, int64_t>{false, 8}, {true, 8}, {false, 1}}) {
    auto dims = [&](const char* H) { return bshd ? std::vector<std::string>{"B", "N", H, "8"} : std::vector<std::string>{"B", H, "N", "8"}; };
    Model m = oneNodeModel("RoPE", {{"q", dims("4")}, {"cos", {"B", "1", "N", std::to_string(TD)}}, {"sin", {"B", "1", "N", std::to_string(TD)}},
                                    {"k", dims("2")}, {"pk", {"B", "2", "P", "8"}}, {"pv", {"B", "2", "P", "8"}},
                                    {"v", dims("2")}});
    auto* node = m.proto.mutable_graph()->mutable_node(0);
    for (const char* o : {"K", "V"}) {
      node->add_output(o);
      m.proto.mutable_graph()->add_output()->set_name(o);
    }
    setAttr(m, "cache_axis", int64_t{2});
    if (bshd)
      for (const char* f : {"x_bshd", "x2_bshd", "x3_bshd"}) setAttr(m, f, int64_t{1});
    // x [B, H, N, D] as the model's input `name` stores it
    auto stored = [&](const char* name, const std::vector<float>& x, int64_t H) {
      if (!bshd) return floats(name, x, {B, H, N, D});
      std::vector<float> t(x.size());
      for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
        const int64_t d = i % D, n = i / D % N, h = i / (D * N) % H, b = i / (D * N * H);
        t[static_cast<size_t>(((b * N + n) * H + h) * D + d)] = x[static_cast<size_t>(i)];
      }
      return floats(name, t, {B, N, H, D});
    };
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      std::vector<float> q(static_cast<size_t>(B * Hq * N * D)), k(static_cast<size_t>(B * Hk * N * D)), v(k.size()),
          pk(static_cast<size_t>(B * Hk * P * D)), pv(pk.size()), c(static_cast<size_t>(B * N * TD)), sn(c.size());
      for (auto* x : {&q, &k, &v, &pk, &pv, &c, &sn})
        for (auto& f : *x) f = normal(rng);
      auto got = ex.run({stored("q", q, Hq), floats("cos", c, {B, 1, N, TD}), floats("sin", sn, {B, 1, N, TD}),
                         stored("k", k, Hk), floats("pk", pk, {B, Hk, P, D}), floats("pv", pv, {B, Hk, P, D}),
                         stored("v", v, Hk)},
                        {"y", "K", "V"});
      auto rope = [&](const std::vector<float>& x, int64_t H, int64_t i) {
        const int64_t d = i % D, n = i / D % N, b = i / (D * N * H), cs = (b * N + n) * TD + d % TD;
        const float rot = d < D / 2 ? -x[i + D / 2] : x[i - D / 2];
        return x[i] * c[cs] + rot * sn[cs];
      };
      ASSERT_EQ(got[0].dims, (std::vector<int64_t>{B, Hq, N, D}));
      const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
      for (int64_t i = 0; i < static_cast<int64_t>(q.size()); ++i)
        ASSERT_NEAR(y[i], rope(q, Hq, i), 1e-5f) << "gpu " << gpu << " bshd " << bshd << " tables " << TD;
      ASSERT_EQ(got[1].dims, (std::vector<int64_t>{B, Hk, P + N, D}));
      for (int t = 1; t <= 2; ++t) {
        const float* cat = reinterpret_cast<const float*>(got[static_cast<size_t>(t)].bytes.data());
        const auto& past = t == 1 ? pk : pv;
        const auto& fresh = t == 1 ? k : v;
        for (int64_t i = 0; i < B * Hk * (P + N) * D; ++i) {
          const int64_t d = i % D, r = i / D % (P + N), bh = i / (D * (P + N));
          const float want = r < P ? past[(bh * P + r) * D + d]
                                   : (t == 1 ? rope(k, Hk, (bh * N + r - P) * D + d) : fresh[(bh * N + r - P) * D + d]);
          ASSERT_NEAR(cat[i], want, 1e-5f) << "output " << t << " gpu " << gpu << " bshd " << bshd << " at " << i;
        }
      }
    });
  }
}

// tl.RoPE with rotary_dim: the first r dims of each head rotate (cos, sin [.., r]), the rest pass.
TEST(RopeKernel, PartialRotaryPassesTheRestThrough) {
  std::mt19937 rng(19);
  std::normal_distribution<float> normal;
  const int64_t B = 1, H = 2, N = 3, D = 12, R = 8;
  Model m = oneNodeModel("RoPE", {{"x", {"B", "2", "N", "12"}}, {"cos", {"B", "1", "N", "8"}}, {"sin", {"B", "1", "N", "8"}}});
  setAttr(m, "rotary_dim", R);
  onBothFamilies(m, [&](Executor& ex, bool gpu) {
    std::vector<float> x(static_cast<size_t>(B * H * N * D)), c(static_cast<size_t>(B * N * R)), sn(c.size());
    for (auto* v : {&x, &c, &sn})
      for (auto& f : *v) f = normal(rng);
    auto got = ex.run({floats("x", x, {B, H, N, D}), floats("cos", c, {B, 1, N, R}), floats("sin", sn, {B, 1, N, R})});
    const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
    for (int64_t i = 0; i < static_cast<int64_t>(x.size()); ++i) {
      const int64_t d = i % D, n = i / D % N, cs = n * R + d;
      if (d >= R) {
        ASSERT_EQ(y[i], x[i]) << "gpu " << gpu << " at " << i;
        continue;
      }
      const float rot = d < R / 2 ? -x[i + R / 2] : x[i - R / 2];
      ASSERT_NEAR(y[i], x[i] * c[cs] + rot * sn[cs], 1e-6f * (1 + std::fabs(x[i]))) << "gpu " << gpu << " at " << i;
    }
  });
}

// tl.SwiGLU alone against silu(g) * u.
TEST(SwiGluKernel, MatchesReference) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  Model m = oneNodeModel("SwiGLU", {{"g", {"R", "37"}}, {"u", {"R", "37"}}});
  onBothFamilies(m, [&](Executor& ex, bool gpu) {
    for (int64_t R : {1, 5}) {
      std::vector<float> g(static_cast<size_t>(R * 37)), u(g.size());
      for (auto* v : {&g, &u})
        for (auto& f : *v) f = normal(rng);
      auto got = ex.run({floats("g", g, {R, 37}), floats("u", u, {R, 37})});
      const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
      for (size_t i = 0; i < g.size(); ++i) {
        const float want = g[i] / (1.0f + std::exp(-g[i])) * u[i];
        ASSERT_NEAR(y[i], want, 1e-5f * (1 + std::fabs(want))) << "gpu " << gpu << " at " << i;
      }
    }
  });
}

// One query row of softmax(q k^T * scale [soft-capped] + bias) v in double: the attention
// tests' reference. q(e), k(t, e) and v(t, e) read the operands over T keys (D wide, Dv
// values); bias(t) is the mask's addend, -inf hiding key t.
template <class Q, class K, class V, class Bias>
std::vector<double> attentionRow(int64_t T, int64_t D, int64_t Dv, double scale, double softcap, Q q, K k, V v, Bias bias) {
  std::vector<double> p(static_cast<size_t>(T));
  double mx = -INFINITY, sum = 0;
  for (int64_t t = 0; t < T; ++t) {
    double dot = 0;
    for (int64_t e = 0; e < D; ++e) dot += double(q(e)) * k(t, e);
    double x = dot * scale;
    if (softcap > 0) x = softcap * std::tanh(x / softcap);
    mx = std::max(mx, p[static_cast<size_t>(t)] = x + bias(t));
  }
  for (auto& x : p) sum += x = std::exp(x - mx);
  std::vector<double> out(static_cast<size_t>(Dv), 0.0);
  for (int64_t e = 0; e < Dv; ++e)
    for (int64_t t = 0; t < T; ++t) out[static_cast<size_t>(e)] += p[static_cast<size_t>(t)] / sum * v(t, e);
  return out;
}
// ... of a query row q [D] over contiguous rows k [T][D] and v [T][Dv], not capped.
template <class Bias>
std::vector<double> attentionRow(int64_t T, int64_t D, int64_t Dv, double scale, const float* q, const float* k, const float* v,
                                 Bias bias) {
  return attentionRow(
      T, D, Dv, scale, 0, [&](int64_t e) { return q[e]; }, [&](int64_t t, int64_t e) { return k[t * D + e]; },
      [&](int64_t t, int64_t e) { return v[t * Dv + e]; }, bias);
}

// tl.Attention alone against softmax(q k^T * scale [capped] + mask) v in double, over
// grouped-query head counts, transposed operands, the scale left to its default (1), a
// broadcast mask with masked keys, and cache lengths long enough that the GPU family
// splits the keys of a decode row, reads a kv head's rows together (over 256 keys), and
// takes two blocks of keys in one split (33000 keys in at most 512 splits for 2 kv heads),
// also for several positions per head.
TEST(AttentionKernel, MatchesReferenceOnRandomShapes) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  struct Case {
    int64_t H, Hkv, D, Dv;
    bool qT, kT, vT, oT;
    float softcap;
    bool scaled = true;  // false: no scale attribute, which means 1 (docs/ops.md)
  };
  for (const Case& cs : {Case{4, 2, 16, 16, false, false, false, false, 0}, Case{3, 3, 7, 5, true, true, true, true, 0},
                         Case{8, 1, 64, 64, false, false, false, true, 30}, Case{2, 2, 256, 256, false, true, false, false, 0},
                         Case{4, 2, 128, 128, false, false, false, false, 0}, Case{2, 2, 128, 128, false, false, false, false, 0},
                         Case{3, 3, 64, 64, false, false, false, false, 0}, Case{2, 1, 32, 32, false, false, false, false, 0, false}}) {
    auto dims = [](bool t, const std::string& heads, const std::string& rows, int64_t size) {
      std::vector<std::string> d = {"B", heads, rows, std::to_string(size)};
      if (t) std::swap(d[1], d[2]);
      return d;
    };
    Model m = oneNodeModel("Attention", {{"q", dims(cs.qT, std::to_string(cs.H), "S", cs.D)},
                                         {"k", dims(cs.kT, std::to_string(cs.Hkv), "T", cs.D)},
                                         {"v", dims(cs.vT, std::to_string(cs.Hkv), "T", cs.Dv)},
                                         {"mask", {"B", "1", "S", "T"}}});
    const float scale = cs.scaled ? 1.0f / std::sqrt(static_cast<float>(cs.D)) : 1.0f;
    if (cs.scaled) setAttr(m, "scale", scale);
    if (cs.softcap > 0) setAttr(m, "softcap", cs.softcap);
    if (cs.qT) setAttr(m, "q_bshd", int64_t{1});
    if (cs.kT) setAttr(m, "k_bthd", int64_t{1});
    if (cs.vT) setAttr(m, "v_bthd", int64_t{1});
    if (cs.oT) setAttr(m, "out_bshd", int64_t{1});
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      for (auto [B, S, T] : {std::array<int64_t, 3>{1, 1, 1}, {2, 3, 9}, {1, 1, 700}, {1, 2, 200}, {1, 3, 300}, {1, 1, 33000}, {1, 5, 130}}) {
        // Element (b, head, row, i) of an operand stored [B, heads, rows, n], or [B, rows, heads, n] when transposed.
        auto at = [](const std::vector<float>& x, bool t, int64_t heads, int64_t rows, int64_t n, int64_t b, int64_t h,
                     int64_t r, int64_t i) {
          return t ? x[static_cast<size_t>(((b * rows + r) * heads + h) * n + i)]
                   : x[static_cast<size_t>(((b * heads + h) * rows + r) * n + i)];
        };
        std::vector<float> q(static_cast<size_t>(B * cs.H * S * cs.D)), k(static_cast<size_t>(B * cs.Hkv * T * cs.D)),
            v(static_cast<size_t>(B * cs.Hkv * T * cs.Dv)), mask(static_cast<size_t>(B * S * T));
        for (auto* x : {&q, &k, &v})
          for (auto& f : *x) f = normal(rng);
        for (size_t i = 0; i < mask.size(); ++i) mask[i] = i % 3 == 1 ? -INFINITY : normal(rng);
        for (int64_t b = 0; b < B; ++b)  // every row keeps a key
          for (int64_t s = 0; s < S; ++s) mask[static_cast<size_t>((b * S + s) * T)] = 0;
        auto shape = [&](bool t, int64_t heads, int64_t rows, int64_t n) {
          return t ? std::vector<int64_t>{B, rows, heads, n} : std::vector<int64_t>{B, heads, rows, n};
        };
        auto got = ex.run({floats("q", q, shape(cs.qT, cs.H, S, cs.D)), floats("k", k, shape(cs.kT, cs.Hkv, T, cs.D)),
                           floats("v", v, shape(cs.vT, cs.Hkv, T, cs.Dv)), floats("mask", mask, {B, 1, S, T})});
        const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < cs.H; ++h)
            for (int64_t s = 0; s < S; ++s) {
              const int64_t g = h / (cs.H / cs.Hkv);
              const auto want = attentionRow(
                  T, cs.D, cs.Dv, scale, cs.softcap, [&](int64_t e) { return at(q, cs.qT, cs.H, S, cs.D, b, h, s, e); },
                  [&](int64_t t, int64_t e) { return at(k, cs.kT, cs.Hkv, T, cs.D, b, g, t, e); },
                  [&](int64_t t, int64_t e) { return at(v, cs.vT, cs.Hkv, T, cs.Dv, b, g, t, e); },
                  [&](int64_t t) { return mask[static_cast<size_t>((b * S + s) * T + t)]; });
              for (int64_t d = 0; d < cs.Dv; ++d) {
                const int64_t o = cs.oT ? ((b * S + s) * cs.H + h) * cs.Dv + d : ((b * cs.H + h) * S + s) * cs.Dv + d;
                ASSERT_NEAR(y[o], want[d], 1e-5 * (1 + std::fabs(want[d])))
                    << "H " << cs.H << " Hkv " << cs.Hkv << " D " << cs.D << " S " << S << " T " << T << " gpu " << gpu
                    << " at b " << b << " h " << h << " s " << s << " d " << d;
              }
            }
      }
    });
  }
}

// Causal attention with no float mask (the causal attribute) at head sizes 64 and 128,
// grouped-query or not, prefill rows past one work-group's query rows and over a past,
// against double-precision loops, on the executors `families` makes of each model: the
// GPU family takes its prefill rows (on NVIDIA the tensor-core ones, whose products are
// fp16: hence 1e-2, where a row left out is off by about 1), the CPU family its own.
using Families = std::function<void(Model&, const std::function<void(Executor&, bool)>&)>;
void expectCausalPrefill(const Families& families) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (auto [H, Hkv, D] : {std::array<int64_t, 3>{4, 2, 64}, {2, 2, 128}, {8, 1, 64}}) {
    const std::string h = std::to_string(H), hkv = std::to_string(Hkv), d = std::to_string(D);
    Model m = oneNodeModel("Attention", {{"q", {"B", h, "S", d}}, {"k", {"B", hkv, "T", d}}, {"v", {"B", hkv, "T", d}}});
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    setAttr(m, "scale", scale);
    setAttr(m, "causal", int64_t{1});
    families(m, [&](Executor& ex, bool gpu) {
      for (auto [B, S, T] : {std::array<int64_t, 3>{1, 5, 5}, {1, 150, 150}, {2, 130, 200}}) {
        std::vector<float> q(static_cast<size_t>(B * H * S * D)), k(static_cast<size_t>(B * Hkv * T * D)), v(k.size());
        for (auto* x : {&q, &k, &v})
          for (auto& f : *x) f = normal(rng);
        const auto got = ex.run({floats("q", q, {B, H, S, D}), floats("k", k, {B, Hkv, T, D}), floats("v", v, {B, Hkv, T, D})});
        const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
        for (int64_t b = 0; b < B; ++b)
          for (int64_t hh = 0; hh < H; ++hh)
            for (int64_t s = 0; s < S; ++s) {
              const int64_t g = hh / (H / Hkv), seen = T - S + s + 1;  // keys up to its own position
              const float* qr = &q[static_cast<size_t>(((b * H + hh) * S + s) * D)];
              const size_t kv = static_cast<size_t>((b * Hkv + g) * T * D);
              const auto want = attentionRow(seen, D, D, scale, qr, &k[kv], &v[kv], [](int64_t) { return 0.0; });
              for (int64_t e = 0; e < D; ++e)
                ASSERT_NEAR(y[((b * H + hh) * S + s) * D + e], want[e], 1e-2)
                    << "H " << H << " Hkv " << Hkv << " D " << D << " B " << B << " S " << S << " T " << T << " gpu " << gpu
                    << " at b " << b << " h " << hh << " s " << s << " d " << e;
            }
      }
    });
  }
}

TEST(AttentionKernel, CausalPrefillMatchesReference) {
  expectCausalPrefill([](Model& m, const std::function<void(Executor&, bool)>& check) { onBothFamilies(m, check); });
}

// ... through the tensor-core attention on any device, its PTX emulated
// (Device::setMmaEmulation), so that its tiles' index arithmetic (heads of a group staged
// together, the causal edge, ragged key tiles) is checked without an NVIDIA device.
TEST(AttentionKernel, EmulatedTensorCoresCausalPrefill) {
  expectCausalPrefill([](Model& m, const std::function<void(Executor&, bool)>& check) {
    test::onEmulatedTensorCores(m, [&](Executor& ex, bool gpu) {
      ASSERT_TRUE(ex.kernels().has("attention_mma_d64") && ex.kernels().has("attention_mma_d128"));
      check(ex, gpu);
      const auto launches = ex.explain();
      EXPECT_TRUE(std::any_of(launches.begin(), launches.end(),
                              [](const Executor::LaunchNote& l) { return l.kernel.rfind("attention_mma_", 0) == 0; }));
    });
  });
}

// Plans `model` as tl-plan does with in-place caches of `type` (up to 256 tokens, batches
// of 2), returning the cache plan.
KvPlan planInPlace(Model& model, KvType type) {
  const KvPlan kv = planKvCache(model, KvLayout::Sequence, 1, type);
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  PlanOptions opt;
  opt.maxSeq = 256;
  opt.batch = 2;
  for (const auto& p : kv.pairs) opt.outside.insert(p.present);
  annotatePlan(model.proto, planMemory(graph, analysis, opt));
  annotateKvPlan(model.proto, kv);
  return kv;
}

// A prefill over in-place caches: a tl.RoPE (position ids, q, k and v stored [B, H, S, D]
// or, with rope-bshd's flags, [B, S, H, D]) and a causal tl.Attention, caches of each
// element type, against double loops: the output (fp16 products and caches: 2e-2) and the
// caches read back. In the CPU family, the GPU family, whose Flash rows (heads up to 64)
// do the RoPE's work (tl-plan's in_attention: no RoPE launch), and the GPU family with the
// tensor cores emulated (Device::setMmaEmulation), whose rows leave it to rope_kv_f32
// (attention.cpp's joinedRope says why). Two runs a case with new values; over a past and
// without one, batches of two.
TEST(AttentionKernel, PrefillOverInPlaceCachesMatchesReference) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal;
  struct Case {
    int64_t H, Hkv, D;
    bool bshd;
    KvType type;
  };
  for (const Case& cs : {Case{4, 2, 64, false, KvType::F16}, Case{2, 2, 128, true, KvType::F16},
                         Case{8, 1, 64, true, KvType::Q8}, Case{4, 1, 128, false, KvType::F32}}) {
    const std::string H = std::to_string(cs.H), Hkv = std::to_string(cs.Hkv), D = std::to_string(cs.D);
    auto dims = [&](const std::string& heads) {
      return cs.bshd ? "[B, S, " + heads + ", " + D + "]" : "[B, " + heads + ", S, " + D + "]";
    };
    std::string freq;  // inv_freq, as the exporters' rotary embedding
    for (int64_t i = 0; i < cs.D / 2; ++i)
      freq += (i ? ", " : "") +
              std::to_string(std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(cs.D)));
    const std::string bits = cs.bshd ? ", x_bshd = 1, x2_bshd = 1, x3_bshd = 1" : "";
    const std::string text = "<ir_version: 8, opset_import: [\"\" : 17, \"tl\" : 1]>\ng (float" + dims(H) + " xq, float" +
                             dims(Hkv) + " xk, float" + dims(Hkv) + " xv, int64[B, 1, S, 1] pos, float[B, " + Hkv + ", P, " + D +
                             "] past_k, float[B, " + Hkv + ", P, " + D + "] past_v) => (float[B, " + H + ", S, " + D +
                             "] y, float[B, " + Hkv + ", T, " + D + "] present_k, float[B, " + Hkv + ", T, " + D +
                             "] present_v) <float[" + std::to_string(cs.D / 2) + "] inv_freq = {" + freq +
                             "}> {\n  q, present_k, present_v = tl.RoPE <cache_axis = 2, positions = 1" + bits +
                             "> (xq, pos, inv_freq, xk, past_k, past_v, xv)\n  y = tl.Attention <causal = 1, scale = " +
                             std::to_string(1.0 / std::sqrt(static_cast<double>(cs.D))) + "> (q, present_k, present_v)\n}\n";
    Model model;
    const auto status = onnx::OnnxParser::Parse(model.proto, text.c_str());
    ASSERT_TRUE(status.IsOK()) << status.ErrorMessage() << "\n" << text;
    for (auto& o : *model.proto.mutable_graph()->mutable_output()) o.mutable_type()->mutable_tensor_type()->clear_shape();
    const KvPlan kv = planInPlace(model, cs.type);
    ASSERT_TRUE(kv.notInPlace.empty()) << kv.notInPlace;
    ASSERT_EQ(kv.ropesInAttention, 1);
    const double scale = 1.0 / std::sqrt(static_cast<double>(cs.D)), tol = cs.type == KvType::Q8 ? 5e-2 : 2e-2;
    for (int family = 0; family < 3; ++family) {  // CPU, GPU, GPU with the tensor cores emulated
      Graph graph(model.proto.graph());
      ShapeAnalysis analysis = inferShapes(model, graph);
      Device device(selectDevice(""), false);
      device.setGpuKernels(family > 0);
      if (family == 2) device.setMmaEmulation(true);
      Executor ex(device, model, graph, analysis);
      for (auto [B, S, P] : {std::array<int64_t, 3>{1, 150, 0}, {2, 70, 40}, {1, 150, 0}}) {
        const int64_t T = P + S, Dm = cs.D, mid = Dm / 2;
        // Element (b, h, s, d) of an input stored as dims() says.
        auto at = [&](const std::vector<float>& x, int64_t heads, int64_t b, int64_t h, int64_t s, int64_t d) {
          const int64_t e = cs.bshd ? ((b * S + s) * heads + h) * Dm + d : ((b * heads + h) * S + s) * Dm + d;
          return static_cast<double>(x[static_cast<size_t>(e)]);
        };
        std::vector<float> xq(static_cast<size_t>(B * cs.H * S * Dm)), xk(static_cast<size_t>(B * cs.Hkv * S * Dm)), xv(xk.size()),
            pk(static_cast<size_t>(B * cs.Hkv * P * Dm)), pv(pk.size());
        for (auto* x : {&xq, &xk, &xv, &pk, &pv})
          for (auto& f : *x) f = normal(rng);
        std::vector<int64_t> pos(static_cast<size_t>(B * S));
        for (int64_t b = 0; b < B; ++b)
          for (int64_t s = 0; s < S; ++s) pos[static_cast<size_t>(b * S + s)] = P + s + 3 * b;  // each batch its own
        auto rotated = [&](const std::vector<float>& x, int64_t heads, int64_t b, int64_t h, int64_t s, int64_t d) {
          const double a = static_cast<double>(pos[static_cast<size_t>(b * S + s)]) *
                           std::pow(10000.0, -2.0 * static_cast<double>(d % mid) / static_cast<double>(Dm));
          const double partner = d < mid ? -at(x, heads, b, h, s, d + mid) : at(x, heads, b, h, s, d - mid);
          return at(x, heads, b, h, s, d) * std::cos(a) + partner * std::sin(a);
        };
        auto io = [&](int64_t heads) {
          return cs.bshd ? std::vector<int64_t>{B, S, heads, Dm} : std::vector<int64_t>{B, heads, S, Dm};
        };
        const auto got = ex.run({floats("xq", xq, io(cs.H)), floats("xk", xk, io(cs.Hkv)), floats("xv", xv, io(cs.Hkv)),
                                 makeTensor("pos", DType::Int64, {B, 1, S, 1}, pos.data()),
                                 floats("past_k", pk, {B, cs.Hkv, P, Dm}), floats("past_v", pv, {B, cs.Hkv, P, Dm})});
        ASSERT_EQ(got.size(), 3u);
        const auto y = got[0].toDouble(), ck = got[1].toDouble(), cv = got[2].toDouble();
        ASSERT_EQ(ck.size(), static_cast<size_t>(B * cs.Hkv * T * Dm));
        std::vector<double> K(ck.size()), V(cv.size());  // the caches as they should be
        for (int64_t b = 0; b < B; ++b)
          for (int64_t g = 0; g < cs.Hkv; ++g)
            for (int64_t t = 0; t < T; ++t)
              for (int64_t d = 0; d < Dm; ++d) {
                const size_t e = static_cast<size_t>(((b * cs.Hkv + g) * T + t) * Dm + d);
                const size_t pe = static_cast<size_t>(((b * cs.Hkv + g) * P + t) * Dm + d);
                K[e] = t < P ? pk[pe] : rotated(xk, cs.Hkv, b, g, t - P, d);
                V[e] = t < P ? pv[pe] : at(xv, cs.Hkv, b, g, t - P, d);
                ASSERT_NEAR(ck[e], K[e], tol * (1 + std::fabs(K[e])))
                    << "k cache, family " << family << " at b " << b << " g " << g << " t " << t << " d " << d;
                ASSERT_NEAR(cv[e], V[e], tol * (1 + std::fabs(V[e])))
                    << "v cache, family " << family << " at b " << b << " g " << g << " t " << t << " d " << d;
              }
        for (int64_t b = 0; b < B; ++b)
          for (int64_t h = 0; h < cs.H; ++h)
            for (int64_t s = 0; s < S; ++s) {
              const int64_t g = h / (cs.H / cs.Hkv);
              std::vector<double> qr(static_cast<size_t>(Dm));
              for (int64_t d = 0; d < Dm; ++d) qr[static_cast<size_t>(d)] = rotated(xq, cs.H, b, h, s, d);
              const size_t kv0 = static_cast<size_t>((b * cs.Hkv + g) * T * Dm);
              const auto want = attentionRow(
                  P + s + 1, Dm, Dm, scale, 0, [&](int64_t e) { return qr[static_cast<size_t>(e)]; },
                  [&](int64_t t, int64_t e) { return K[kv0 + static_cast<size_t>(t * Dm + e)]; },
                  [&](int64_t t, int64_t e) { return V[kv0 + static_cast<size_t>(t * Dm + e)]; }, [](int64_t) { return 0.0; });
              for (int64_t d = 0; d < Dm; ++d)
                ASSERT_NEAR(y[static_cast<size_t>(((b * cs.H + h) * S + s) * Dm + d)], want[static_cast<size_t>(d)], tol)
                    << "family " << family << " H " << cs.H << " D " << Dm << " B " << B << " S " << S << " P " << P << " at b " << b
                    << " h " << h << " s " << s << " d " << d;
            }
        const auto launches = ex.explain();
        auto launched = [&](const char* prefix) {
          return std::any_of(launches.begin(), launches.end(),
                             [&](const Executor::LaunchNote& l) { return l.kernel.rfind(prefix, 0) == 0; });
        };
        const bool tensorCores = launched("attention_mma_"), rope = launched("rope_");
        // (On NVIDIA the GPU family takes the tensor cores unemulated.)
        EXPECT_EQ(tensorCores, family == 2 || (family == 1 && ex.kernels().tensorCores())) << "family " << family;
        EXPECT_EQ(rope, tensorCores || family == 0 || Dm > 64) << "family " << family << " D " << Dm;
      }
    }
  }
}

// The q/k/v projection's RoPE epilogue (matmul.cpp's kRope rows, kernels/gemm.cl's
// rope_pair_store, ROPE_Q8_TILE and the tensor cores' MMA_ROPE_STORE): x times three
// weights (e0m4, q8, q3h or float, merged by tl-fuse into one tl.QMatMul or tl.MatMul of
// three outputs), viewed [B, S, H, D], then a tl.RoPE over in-place caches (f16, f32, q8)
// and a causal tl.Attention, in the GPU family with the tensor cores emulated
// (Device::setMmaEmulation: the codes' int8 tiles' store does it, --gemm f16's in-tile
// tiles', the float weights' fp32 tiles') and with them off (the portable tiles' store, where the flash
// attention, heads up to 64, does not): heads of 64 (a 64-wide tile holds one) and 128
// (the pairs of dims 0-31 with 64-95 in one, 32-63 with 96-127 in the next), cos and sin
// from positions or as tables (HF's, graph inputs), batches of two, over a past and
// without, and 3 rows (the GEMVs: the RoPE apart). Against the same model with the
// projection's q also a graph output, where attention.cpp's ropeForGemm leaves the RoPE
// its own launch (rope_kv_f32, which the test above checks against double loops): the
// same products, so the attention's output and the caches equal up to fp32's rounding
// order.
TEST(AttentionKernel, RopeEpilogueOfTheQkvGemm) {
  std::mt19937 rng(23);
  std::normal_distribution<float> normal(0.0f, 0.1f);
  constexpr int64_t K = 256;
  struct Case {
    int64_t H, Hkv, D;
    KvType type;
    std::string scheme;  // "float": unquantized
    bool tables;         // the RoPE reads cos and sin tables, graph inputs
    bool f16;            // A not rounded to int8 (--gemm f16): the in-tile tensor-core rows
    int64_t group = 128;  // (32: the int8 tiles' rows for groups within a stage)
  };
  for (const Case& cs : {Case{4, 2, 64, KvType::F16, "e0m4", false, false}, Case{2, 1, 128, KvType::F32, "e0m4", false, false},
                         Case{2, 1, 128, KvType::F32, "float", false, false}, Case{2, 1, 128, KvType::F16, "e0m4", true, false},
                         Case{2, 1, 128, KvType::F32, "q3h", false, false}, Case{2, 1, 128, KvType::F32, "float", false, true},
                         Case{4, 2, 64, KvType::F16, "e0m4", false, true}, Case{2, 1, 128, KvType::Q8, "e0m4", false, false},
                         Case{2, 1, 128, KvType::Q8, "q8", false, false}, Case{2, 1, 128, KvType::Q8, "float", false, true},
                         Case{2, 1, 128, KvType::F32, "int4", false, false, 32}}) {
    const bool quantized = cs.scheme != "float";
    const std::string H = std::to_string(cs.H), Hkv = std::to_string(cs.Hkv), D = std::to_string(cs.D);
    std::string freq;
    std::vector<double> inv(static_cast<size_t>(cs.D / 2));
    for (int64_t i = 0; i < cs.D / 2; ++i) {
      inv[static_cast<size_t>(i)] = std::pow(10000.0, -2.0 * static_cast<double>(i) / static_cast<double>(cs.D));
      freq += (i ? ", " : "") + std::to_string(inv[static_cast<size_t>(i)]);
    }
    const std::string text =
        "<ir_version: 8, opset_import: [\"\" : 17, \"tl\" : 1]>\ng (float[B, S, " + std::to_string(K) + "] x, " +
        (cs.tables ? "float[B, 1, S, " + D + "] cosv, float[B, 1, S, " + D + "] sinv" : "int64[B, 1, S, 1] pos") +
        ", float[B, " + Hkv + ", P, " + D + "] past_k, float[B, " + Hkv + ", P, " + D + "] past_v) => (float[B, " + H +
        ", S, " + D + "] y, float[B, " + Hkv + ", T, " + D + "] present_k, float[B, " + Hkv + ", T, " + D +
        "] present_v) <float[" + std::to_string(cs.D / 2) + "] inv_freq = {" + freq + "}, int64[4] qs = {0, 0, " + H +
        ", " + D + "}, int64[4] ks = {0, 0, " + Hkv + ", " + D +
        "}> {\n  xq = MatMul(x, wq)\n  xk = MatMul(x, wk)\n  xv = MatMul(x, wv)\n  q4 = Reshape(xq, qs)\n"
        "  k4 = Reshape(xk, ks)\n  v4 = Reshape(xv, ks)\n  q, present_k, present_v = tl.RoPE <cache_axis = 2, " +
        (cs.tables ? "x_bshd = 1, x2_bshd = 1, x3_bshd = 1> (q4, cosv, sinv, "
                   : "positions = 1, x_bshd = 1, x2_bshd = 1, x3_bshd = 1> (q4, pos, inv_freq, ") +
        "k4, past_k, past_v, v4)\n  y = tl.Attention <causal = 1, scale = 0.125> (q, present_k, present_v)\n}\n";
    Model base;
    const auto status = onnx::OnnxParser::Parse(base.proto, text.c_str());
    ASSERT_TRUE(status.IsOK()) << status.ErrorMessage() << "\n" << text;
    for (auto& o : *base.proto.mutable_graph()->mutable_output()) o.mutable_type()->mutable_tensor_type()->clear_shape();
    for (auto [name, heads] : {std::pair<const char*, int64_t>{"wq", cs.H}, {"wk", cs.Hkv}, {"wv", cs.Hkv}}) {
      std::vector<float> w(static_cast<size_t>(K * heads * cs.D));
      for (auto& f : w) f = normal(rng);
      addInitializer(base, name, {K, heads * cs.D}, w.data(), w.size());
    }
    if (quantized) {
      QuantOptions opt;
      opt.scheme = parseScheme(cs.scheme);
      opt.group = cs.group;
      quantizeModel(base, opt, false);
    }
    runFusePasses(base, {});
    // The model planned as it is and with q exposed.
    auto planned = [&](bool exposeQ) {
      Model m = base;
      if (exposeQ) {
        std::string q;
        for (const auto& n : m.proto.graph().node())
          if ((n.op_type() == "QMatMul" || n.op_type() == "MatMul") && n.output_size() == 3) q = n.output(0);
        EXPECT_FALSE(q.empty()) << "no merged q/k/v projection";
        m.proto.mutable_graph()->add_output()->set_name(q);
      }
      EXPECT_TRUE(planInPlace(m, cs.type).notInPlace.empty());
      return m;
    };
    Model models[2] = {planned(false), planned(true)};
    struct Run {
      Graph graph;
      ShapeAnalysis analysis;
      Device device;
      Executor ex;
      static Device& family(Device& d, bool tensorCores, bool f16) {
        d.setGpuKernels(true);
        d.setMmaEmulation(tensorCores);
        d.setTensorCores(tensorCores);
        d.setInt8Activations(!f16);
        return d;
      }
      Run(Model& m, bool tensorCores, bool f16)
          : graph(m.proto.graph()), analysis(inferShapes(m, graph)), device(selectDevice(""), false),
            ex(family(device, tensorCores, f16), m, graph, analysis) {}
    };
    for (bool tensorCores : {true, false}) {
      Run fused(models[0], tensorCores, cs.f16), apart(models[1], tensorCores, cs.f16);
      // (128-row tiles from 129 rows, 64-row ones below)
      for (auto [B, S, P] : {std::array<int64_t, 3>{1, 150, 0}, {2, 70, 40}, {1, 100, 20}, {1, 3, 0}}) {
        std::vector<float> x(static_cast<size_t>(B * S * K)), pk(static_cast<size_t>(B * cs.Hkv * P * cs.D)), pv(pk.size());
        for (auto* v : {&x, &pk, &pv})
          for (auto& f : *v) f = normal(rng) * 10;
        std::vector<int64_t> pos(static_cast<size_t>(B * S));
        for (int64_t b = 0; b < B; ++b)
          for (int64_t s = 0; s < S; ++s) pos[static_cast<size_t>(b * S + s)] = P + s + 3 * b;
        std::vector<Tensor> in = {floats("x", x, {B, S, K}), floats("past_k", pk, {B, cs.Hkv, P, cs.D}),
                                  floats("past_v", pv, {B, cs.Hkv, P, cs.D})};
        if (cs.tables) {  // the tables HF's rotary embedding makes: each frequency twice
          std::vector<float> c(static_cast<size_t>(B * S * cs.D)), sn(c.size());
          for (size_t i = 0; i < c.size(); ++i) {
            const double a = static_cast<double>(pos[i / static_cast<size_t>(cs.D)]) *
                             inv[i % static_cast<size_t>(cs.D) % inv.size()];
            c[i] = static_cast<float>(std::cos(a)), sn[i] = static_cast<float>(std::sin(a));
          }
          in.push_back(floats("cosv", c, {B, 1, S, cs.D}));
          in.push_back(floats("sinv", sn, {B, 1, S, cs.D}));
        } else {
          in.push_back(makeTensor("pos", DType::Int64, {B, 1, S, 1}, pos.data()));
        }
        const auto want = apart.ex.run(in), got = fused.ex.run(in);
        const char* names[] = {"y", "present_k", "present_v"};
        for (size_t o = 0; o < 3; ++o) {
          const auto w = want[o].toDouble(), g = got[o].toDouble();
          ASSERT_EQ(g.size(), w.size()) << names[o];
          // (8-bit caches: a rare code may round the other way, one step of its block; a block
          // scaled otherwise would move most of its values)
          double step = 0;
          for (double v : w) step = std::max(step, cs.type == KvType::Q8 ? std::fabs(v) / 127 : 0.0);
          size_t off = 0;
          for (size_t i = 0; i < g.size(); ++i) off += std::fabs(g[i] - w[i]) > 1e-4 * (1 + std::fabs(w[i]));
          EXPECT_LE(off, g.size() / 1000) << names[o] << ", " << kvTypeName(cs.type);
          for (size_t i = 0; i < g.size(); ++i)
            ASSERT_NEAR(g[i], w[i], 1e-4 * (1 + std::fabs(w[i])) + step)
                << names[o] << ", " << cs.scheme << (cs.f16 ? " f16" : "") << (cs.tables ? " tables" : "")
                << (tensorCores ? ", tensor cores" : ", portable") << ", D " << cs.D << " "
                << kvTypeName(cs.type) << " B " << B << " S " << S << " P " << P << " at " << i;
        }
        auto kernels = [](Executor& ex) {
          std::set<std::string> k;
          for (const auto& l : ex.explain()) k.insert(l.kernel);
          return k;
        };
        auto any = [](const std::set<std::string>& k, const char* part) {
          return std::any_of(k.begin(), k.end(), [&](const std::string& n) { return n.find(part) != std::string::npos; });
        };
        const auto f = kernels(fused.ex), a = kernels(apart.ex);
        // (more than 4 rows take the tiles; the flash attention does the RoPE's work itself)
        const bool rows = S > 4, flash = !tensorCores && cs.D <= 64;
        const std::string where = cs.scheme + (cs.f16 ? " f16, " : ", ") + (cs.tables ? "tables, " : "") +
                                  (tensorCores ? "tensor cores" : "portable") + ", D " + D + ", S " + std::to_string(S);
        const bool epilogue = rows && !flash;
        EXPECT_EQ(any(f, "_rope_"), epilogue) << where;
        EXPECT_EQ(f.count("rope_kv_f32"), epilogue || (rows && flash) ? 0u : 1u) << where;
        EXPECT_EQ(a.count("rope_kv_f32"), rows && flash ? 0u : 1u) << where;
        EXPECT_FALSE(any(a, "_rope_")) << where;
        if (tensorCores) {
          EXPECT_EQ(any(f, "attention_mma_"), rows) << where;
          // (the in-tile rows where A is not rounded to int8, else the int8 rows)
          if (rows && cs.f16) {
            EXPECT_TRUE(any(f, "_mma_rope_")) << where;
          }
          if (rows && !cs.f16 && quantized) {
            EXPECT_TRUE(f.count((cs.group < 128 ? "qgemm64_mma_i8_ragged_rope_" : "qgemm64_mma_i8_rope_") + cs.scheme))
                << where << ", group " << cs.group;
          }
        }
      }
    }
  }
}

// The key mask in each integer width tl.Attention takes (docs/ops.md: int64, int32, bool,
// uint8): key t of batch b hidden where the mask's element is 0, any other value showing
// it (3 here, 1 for bool), each batch with its own zeros, against double loops in both
// families. The exports' attention_mask is int64: no model test reaches the others.
TEST(AttentionKernel, KeyMaskOfEachIntegerWidth) {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  const int64_t B = 2, H = 2, S = 3, T = 40, D = 16;
  auto visible = [](int64_t b, int64_t t) { return (t + 2 * b) % 5 != 2; };  // key 0 of each batch shows
  for (DType type : {DType::Int64, DType::Int32, DType::Bool, DType::UInt8}) {
    Model m = oneNodeModel("Attention", {{"q", {"B", "2", "S", "16"}}, {"k", {"B", "2", "T", "16"}},
                                         {"v", {"B", "2", "T", "16"}}, {"km", {"B", "T"}}});
    auto* g = m.proto.mutable_graph();
    g->mutable_input(3)->mutable_type()->mutable_tensor_type()->set_elem_type(static_cast<int32_t>(type));
    g->mutable_node(0)->set_input(3, "");
    g->mutable_node(0)->add_input("km");
    setAttr(m, "scale", 0.25f);
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      std::vector<float> q(static_cast<size_t>(B * H * S * D)), k(static_cast<size_t>(B * H * T * D)), v(k.size());
      for (auto* x : {&q, &k, &v})
        for (auto& f : *x) f = normal(rng);
      std::vector<int64_t> i64(static_cast<size_t>(B * T));
      std::vector<int32_t> i32(i64.size());
      std::vector<uint8_t> u8(i64.size());
      for (int64_t b = 0; b < B; ++b)
        for (int64_t t = 0; t < T; ++t) {
          const size_t e = static_cast<size_t>(b * T + t);
          i64[e] = i32[e] = visible(b, t) ? 3 : 0;
          u8[e] = visible(b, t) ? (type == DType::Bool ? 1 : 3) : 0;
        }
      const void* km = type == DType::Int64 ? static_cast<const void*>(i64.data())
                       : type == DType::Int32 ? static_cast<const void*>(i32.data())
                                              : static_cast<const void*>(u8.data());
      const auto got = ex.run({floats("q", q, {B, H, S, D}), floats("k", k, {B, H, T, D}), floats("v", v, {B, H, T, D}),
                               makeTensor("km", type, {B, T}, km)});
      const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
      for (int64_t b = 0; b < B; ++b)
        for (int64_t h = 0; h < H; ++h)
          for (int64_t s = 0; s < S; ++s) {
            const float* qr = &q[static_cast<size_t>(((b * H + h) * S + s) * D)];
            const size_t kv = static_cast<size_t>((b * H + h) * T * D);
            const auto want = attentionRow(T, D, D, 0.25, qr, &k[kv], &v[kv], [&](int64_t t) { return visible(b, t) ? 0.0 : -INFINITY; });
            for (int64_t e = 0; e < D; ++e)
              ASSERT_NEAR(y[((b * H + h) * S + s) * D + e], want[e], 1e-5 * (1 + std::fabs(want[e])))
                  << dtypeName(type) << " gpu " << gpu << " at b " << b << " h " << h << " s " << s << " d " << e;
          }
    });
  }
}

// The GPU family's attention for shapes no other row takes (heads 7 wide here) spreads
// long keys over about 128 work-groups: 3 rows over 700 keys in 6 splits (one per 128
// keys), merged by attention_combine_f32; over 100 keys one split, nothing to merge.
TEST(AttentionKernel, OtherShapesSplitLongKeys) {
  Model m = oneNodeModel("Attention", {{"q", {"1", "3", "1", "7"}}, {"k", {"1", "3", "T", "7"}}, {"v", {"1", "3", "T", "5"}}});
  setAttr(m, "scale", 0.4f);
  Graph graph(m.proto.graph());
  ShapeAnalysis analysis = inferShapes(m, graph);
  Device device(selectDevice(""), false);
  device.setGpuKernels(true);
  Executor ex(device, m, graph, analysis);
  for (auto [T, merges] : {std::pair<int64_t, int64_t>{700, 1}, {100, 0}}) {
    const std::vector<float> q(21, 0.5f), k(static_cast<size_t>(3 * T * 7), 0.25f), v(static_cast<size_t>(3 * T * 5), 1.0f);
    const auto got = ex.run({floats("q", q, {1, 3, 1, 7}), floats("k", k, {1, 3, T, 7}), floats("v", v, {1, 3, T, 5})});
    const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
    for (int i = 0; i < 15; ++i) EXPECT_FLOAT_EQ(y[i], 1.0f) << "T " << T;  // every value 1: so is their average
    int64_t combines = 0;
    for (const auto& l : ex.explain()) combines += l.kernel == "attention_combine_f32";
    EXPECT_EQ(combines, merges) << "T " << T;
  }
}

// Concat runs up to four inputs per launch: six inputs of different lengths along a
// middle axis (one empty, as a first step's past) land where they belong.
TEST(ConcatKernel, ManyInputsInFewLaunches) {
  const std::vector<int64_t> lengths = {3, 0, 1, 5, 2, 4};
  std::vector<std::pair<std::string, std::vector<std::string>>> inputs;
  for (size_t j = 0; j < lengths.size(); ++j) inputs.push_back({"x" + std::to_string(j), {"2", "L" + std::to_string(j), "3"}});
  Model m = oneNodeModel("Concat", inputs, 0, "");
  setAttr(m, "axis", int64_t{1});
  onBothFamilies(m, [&](Executor& ex, bool gpu) {
    std::vector<Tensor> feeds;
    std::vector<std::vector<float>> data;
    for (size_t j = 0; j < lengths.size(); ++j) {
      data.emplace_back(static_cast<size_t>(2 * lengths[j] * 3));
      for (size_t e = 0; e < data[j].size(); ++e) data[j][e] = static_cast<float>(100 * j + e);
      feeds.push_back(floats(("x" + std::to_string(j)).c_str(), data[j], {2, lengths[j], 3}));
    }
    auto got = ex.run(feeds);
    const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
    const int64_t total = 15;
    ASSERT_EQ(got[0].dims, (std::vector<int64_t>{2, total, 3}));
    for (int64_t o = 0, i = 0; o < 2; ++o)
      for (size_t j = 0; j < lengths.size(); ++j)
        for (int64_t r = 0; r < lengths[j]; ++r)
          for (int64_t c = 0; c < 3; ++c, ++i) ASSERT_EQ(y[i], data[j][static_cast<size_t>((o * lengths[j] + r) * 3 + c)]) << "gpu " << gpu << " at " << i;
  });
}

// The stages compose in either order: quantizing a fused model (merged q/k/v and gate/up
// become one tl.QMatMul with split) gives the logits of fusing a quantized one, and a
// merged projection's codes are those of its parts, so both agree to the last bits.
TEST(FuseQuantize, EitherOrderSameLogits) {
  const auto dir = test::sourceDir() / "models/bytellama-past";
  QuantOptions q;
  q.scheme = QuantScheme::E0M4;
  Model fusedFirst = loadModel((dir / "model.onnx").string()), quantFirst = fusedFirst;
  runFusePasses(fusedFirst, {});
  quantizeModel(fusedFirst, q, false);
  quantizeModel(quantFirst, q, false);
  runFusePasses(quantFirst, {});
  EXPECT_EQ(opCounts(fusedFirst.proto.graph())["tl.QMatMul"], 16);  // 4 layers: q/k/v, o, gate/up, down
  EXPECT_EQ(opCounts(quantFirst.proto.graph())["tl.QMatMul"], 16);
  const auto set = loadDataSets(dir).at(0);
  std::vector<std::vector<float>> logits;
  for (Model* m : {&fusedFirst, &quantFirst}) {
    Graph graph(m->proto.graph());
    ShapeAnalysis analysis = inferShapes(*m, graph);
    Device device(selectDevice(""), false);
    Executor ex(device, *m, graph, analysis);
    auto got = ex.run(set.inputs, {"logits"});
    const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
    logits.emplace_back(y, y + got[0].bytes.size() / 4);
  }
  ASSERT_EQ(logits[0].size(), logits[1].size());
  for (size_t i = 0; i < logits[0].size(); ++i) ASSERT_NEAR(logits[0][i], logits[1][i], 1e-5f) << i;
}

// GELU in double precision, in its erf form ("none") or its tanh form ("tanh").
double geluOf(double x, const std::string& form) {
  return form == "tanh" ? 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x)))
                        : 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}

// tl.GeGLU alone against gelu(g) * u, in both of GELU's forms.
TEST(GeGluKernel, MatchesReference) {
  std::mt19937 rng(17);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (const char* form : {"none", "tanh"}) {
    Model m = oneNodeModel("GeGLU", {{"g", {"R", "19"}}, {"u", {"R", "19"}}});
    setAttr(m, "approximate", std::string(form));
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      std::vector<float> g(57), u(57);
      for (auto* v : {&g, &u})
        for (auto& f : *v) f = normal(rng);
      auto got = ex.run({floats("g", g, {3, 19}), floats("u", u, {3, 19})});
      const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
      for (size_t i = 0; i < g.size(); ++i) {
        const double gelu = geluOf(g[i], form);
        ASSERT_NEAR(y[i], gelu * u[i], 1e-5 * (1 + std::fabs(gelu * u[i]))) << form << " gpu " << gpu << " at " << i;
      }
    });
  }
}

// tl.Gelu alone in both of its forms, against each form's formula at 1e-5: the two differ
// by up to about 5e-4 here, so a Gelu run in the other form fails.
TEST(GeluKernel, EachFormMatchesItsFormula) {
  std::vector<float> x(41);
  for (size_t i = 0; i < x.size(); ++i) x[i] = -4.0f + 0.2f * static_cast<float>(i);
  for (const char* form : {"none", "tanh"}) {
    Model m = oneNodeModel("Gelu", {{"x", {"41"}}});
    setAttr(m, "approximate", std::string(form));
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      auto got = ex.run({floats("x", x, {41})});
      const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
      for (size_t i = 0; i < x.size(); ++i) {
        ASSERT_NEAR(y[i], geluOf(x[i], form), 1e-5) << form << " gpu " << gpu << " at x = " << x[i];
      }
    });
  }
}

// Issue 9's budget: a fused decode step runs at most 10 kernels per decoder layer for the
// Llama, Qwen2, Mistral, Gemma and Phi-3 exports of both exporters. A layer kernel is one
// whose node lies on a data path (not through Shape) from the first projection (layer 0's
// q/k/v, its input norm inside) to the node writing the logits, that one excluded; the
// embedding, the mask and the rotary tables lie before it or off it. (The norms are no
// boundary: norm-matmul folds them into the projections.)
TEST(FuseKernelsPerLayer, AtMostTenPerDecodeStep) {
  for (const auto& dir : test::modelDirs()) {
    const std::string name = dir.filename().string();
    if (name.find("-past") == std::string::npos || name.rfind("gpt2", 0) == 0 || name.rfind("bytellama", 0) == 0) continue;
    Model model = loadModel((dir / "model.onnx").string());
    runFusePasses(model, {});
    Graph graph(model.proto.graph());
    ShapeAnalysis analysis = inferShapes(model, graph);
    const auto order = graph.topoOrder();
    const auto first = std::find_if(order.begin(), order.end(), [&](size_t i) { return isTlMatMul(graph.node(i)); });
    ASSERT_NE(first, order.end()) << dir;
    const int logits = graph.producer(model.proto.graph().output(0).name());
    ASSERT_GE(logits, 0) << dir;
    // Forward from the first projection, backward from the logits.
    auto reach = [&](size_t start, bool forward) {
      std::set<size_t> seen = {start};
      std::vector<size_t> todo = {start};
      while (!todo.empty()) {
        const auto& n = graph.node(todo.back());
        todo.pop_back();
        std::vector<size_t> next;
        if (forward) {
          for (const auto& o : n.output())
            for (size_t c : graph.consumers(o))
              if (graph.node(c).op_type() != "Shape") next.push_back(c);
        } else {
          for (const auto& in : n.input())
            if (graph.producer(in) >= 0) next.push_back(static_cast<size_t>(graph.producer(in)));
        }
        for (size_t x : next)
          if (seen.insert(x).second) todo.push_back(x);
      }
      return seen;
    };
    const auto from = reach(*first, true), to = reach(static_cast<size_t>(logits), false);
    std::set<std::string> layerNodes;
    for (size_t i : from)
      if (to.count(i) && i != static_cast<size_t>(logits)) layerNodes.insert(graph.nodeName(i));
    Device device(selectDevice(""), true);
    Executor ex(device, model, graph, analysis);
    CausalLm lm(ex, graph, analysis);
    lm.step({1, 2, 3});
    lm.step({4});
    int kernels = 0, inLayers = 0;
    for (const auto& t : ex.profile()) {
      if (t.op == "CacheCarry") continue;
      ++kernels;
      inLayers += layerNodes.count(t.node) ? 1 : 0;
    }
    const int layers = 2;
    EXPECT_LE(inLayers, 10 * layers) << dir << ": " << inLayers << " of the step's " << kernels << " kernels in its layers";
    EXPECT_GE(inLayers, 6 * layers) << dir << ": the attribution lost the layers' kernels";  // norms, projections, attention
  }
}

// tl.Elementwise: a program with a literal, a unary op and broadcast inputs, generated
// into one kernel, against the same arithmetic on the host.
TEST(ElementwiseKernel, GeneratedProgramMatchesReference) {
  Model m = oneNodeModel("Elementwise", {{"a", {"R", "5"}}, {"b", {"5"}}, {"c", {"R", "1"}}});
  setAttr(m, "program", std::string("t0=mul(x0,1.702);t1=sigmoid(t0);t2=mul(x0,t1);t3=sub(t2,x1);t4=div(t3,x2);t5=tanh(t4)"));
  std::mt19937 rng(23);
  std::normal_distribution<float> normal;
  onBothFamilies(m, [&](Executor& ex, bool gpu) {
    const int64_t R = 3;
    std::vector<float> a(15), b(5), c(3);
    for (auto* v : {&a, &b, &c})
      for (auto& f : *v) f = normal(rng) + 2.0f;
    auto got = ex.run({floats("a", a, {R, 5}), floats("b", b, {5}), floats("c", c, {R, 1})});
    ASSERT_EQ(got[0].dims, (std::vector<int64_t>{R, 5}));
    const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
    for (int64_t r = 0; r < R; ++r)
      for (int64_t j = 0; j < 5; ++j) {
        const double x = a[r * 5 + j], want = std::tanh((x / (1 + std::exp(-1.702 * x)) - b[j]) / c[r]);
        ASSERT_NEAR(y[r * 5 + j], want, 1e-5) << "gpu " << gpu << " at " << r << "," << j;
      }
  });
}

// A literal is a float32 constant in any of C's spellings (docs/ops.md; tl-fuse writes
// "1.70200002", a hand-written program may write ".1" or "1e-1"), computed in float as the
// unfused Mul computes it: x * 0.1f to the bit, where a literal left double would round
// x * 0.1 once, from a product of more bits.
TEST(ElementwiseKernel, LiteralsAreFloats) {
  Model m = oneNodeModel("Elementwise", {{"a", {"N"}}});
  setAttr(m, "program", std::string("t0=mul(x0,.1);t1=mul(t0,1e-1)"));
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> uniform(-1000.0f, 1000.0f);
  std::vector<float> a(4096);
  for (auto& f : a) f = uniform(rng);
  onBothFamilies(m, [&](Executor& ex, bool gpu) {
    auto got = ex.run({floats("a", a, {static_cast<int64_t>(a.size())})});
    const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
    for (size_t i = 0; i < a.size(); ++i) {
      const float t0 = a[i] * 0.1f, want = t0 * 0.1f;
      ASSERT_EQ(y[i], want) << "gpu " << gpu << " at " << i << " of x = " << a[i];
    }
  });
}

// A program tl-run cannot read is one error naming the node, before anything runs.
TEST(ElementwiseKernel, BadProgramIsAnError) {
  Model m = oneNodeModel("Elementwise", {{"a", {"4"}}});
  setAttr(m, "program", std::string("t0=bogus(x0)"));
  const std::string refused = refusalOf(m);
  EXPECT_NE(refused.find("tl.Elementwise: unknown op 'bogus'"), std::string::npos) << "refused with: '" << refused << "'";
}

// `graph` (ONNX text) through the attention pass alone, which must fuse it once: its
// tl.Attention node, or nullptr.
const onnx::NodeProto* fuseOneAttention(Model& m, const char* graph) {
  EXPECT_TRUE(onnx::OnnxParser::Parse(m.proto, graph).IsOK());
  const auto r = runFusePasses(m, {"attention"});
  EXPECT_EQ(r.size(), 1u);
  if (r.size() != 1) return nullptr;
  EXPECT_EQ(r[0].rewrites, 1) << (r[0].nearMisses.empty() ? "" : r[0].nearMisses[0]);
  for (const auto& n : m.proto.graph().node())
    if (n.op_type() == "Attention") return &n;
  return nullptr;
}

// k' made by a plain Reshape (no repeat_kv's Expand before it) is the cache itself: the
// attention is fused reading the Reshape's output as k.
TEST(FuseAttention, PlainReshapeOfKIsTheCacheItself) {
  Model m;
  const onnx::NodeProto* attention = fuseOneAttention(m, R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 2, S, 8] q, float[1, 2, T, 2, 4] kin, float[1, 2, T, 8] v) => (float[1, 2, S, 8] o) {
  shape = Constant <value = int64[4] {1, 2, -1, 8}> ()
  k = Reshape (kin, shape)
  kt = Transpose <perm = [0, 1, 3, 2]> (k)
  s = MatMul (q, kt)
  p = Softmax <axis = -1> (s)
  o = MatMul (p, v)
}
)ONNX");
  ASSERT_NE(attention, nullptr);
  EXPECT_EQ(attention->input(1), "k");
}

// The scores' constant factors, each a Mul (the constant on either side) or a Div, in a
// chain, multiply into the fused node's scale: s / 4 is 0.25, 0.5 * s is 0.5, and
// (s * 0.5) / 4 is 0.125. Gemma 2's soft-capped scores, c * tanh(s / c) before the
// Softmax, become its softcap (the kernels apply it: AttentionKernel), not a plain
// attention.
TEST(FuseAttention, ScoreFactorsBecomeScaleAndSoftcap) {
  const char* head = R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 2, S, 8] q, float[1, 2, T, 8] k, float[1, 2, T, 8] v) => (float[1, 2, S, 8] o) {
  four = Constant <value = float {4.0}> ()
  half = Constant <value = float {0.5}> ()
  inv = Constant <value = float {0.02}> ()
  cap = Constant <value = float {50.0}> ()
  kt = Transpose <perm = [0, 1, 3, 2]> (k)
  s = MatMul (q, kt)
)ONNX";
  const char* tail = "  p = Softmax <axis = -1> (y)\n  o = MatMul (p, v)\n}\n";
  struct Case {
    const char* scaling;
    const char* attribute;
    float value;
  };
  for (const Case& c : {Case{"  y = Div (s, four)\n", "scale", 0.25f}, Case{"  y = Mul (half, s)\n", "scale", 0.5f},
                        Case{"  x = Mul (s, half)\n  y = Div (x, four)\n", "scale", 0.125f},
                        Case{"  x = Mul (s, inv)\n  t = Tanh (x)\n  y = Mul (t, cap)\n", "softcap", 50.0f}}) {
    Model m;
    const onnx::NodeProto* attention = fuseOneAttention(m, (std::string(head) + c.scaling + tail).c_str());
    ASSERT_NE(attention, nullptr) << c.scaling;
    const auto* a = findAttr(*attention, c.attribute);
    ASSERT_NE(a, nullptr) << c.scaling;
    EXPECT_FLOAT_EQ(a->f(), c.value) << c.scaling;
  }
}

// Near misses no bundled graph reaches, each a graph that matches its pattern up to one
// check: the pass leaves it alone and says why.
TEST(FuseNearMisses, EachSaysWhy) {
  struct Case {
    const char* pass;
    std::string graph;
    const char* says;
  };
  // the attention pattern past k' (kt): the scores, their softmax, the output
  const std::string scores = "  s = MatMul (q, kt)\n  p = Softmax <axis = -1> (s)\n  o = MatMul (p, v)\n}\n";
  const Case cases[] = {
      {"attention", R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 2, S, 8] q, float[1, 2, 8, T] k, float[1, 2, T, 8] v) => (float[1, 2, S, 8] o) {
  kt = Transpose <perm = [0, 1, 2, 3]> (k)
)ONNX" + scores,
       "the scores' right side is a Transpose by neither (0,1,3,2) nor (0,2,3,1)"},
      // repeat_kv tiling the kv heads (head h reads kv head h % 2, an Unsqueeze at axis 1):
      // its last views look like repeat_kv's, its first do not
      {"attention", R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 4, S, 8] q, float[1, 2, T, 8] k, float[1, 4, T, 8] v) => (float[1, 4, S, 8] o) {
  one = Constant <value = int64[1] {1}> ()
  k1 = Unsqueeze (k, one)
  reps = Constant <value = int64[5] {1, 2, 1, 1, 1}> ()
  k2 = Expand (k1, reps)
  heads = Constant <value = int64[4] {1, 4, -1, 8}> ()
  kp = Reshape (k2, heads)
  kt = Transpose <perm = [0, 1, 3, 2]> (kp)
)ONNX" + scores,
       "repeat_kv's shapes are not [B,Hkv,T,D] -> [B,Hkv,1,T,D] -> [B,Hkv,n,T,D] -> [B,Hkv*n,T,D]"},
      {"residual-norm", R"ONNX(
<ir_version: 8, opset_import: ["" : 17, "tl" : 1]>
g (float[N, 8] x, float[1, 8] r, float[8] w) => (float[N, 8] y) {
  s = Add (x, r)
  y = tl.RMSNorm <epsilon = 0.00001> (s, w)
}
)ONNX",
       "the Add broadcasts"},
      {"norm-matmul", R"ONNX(
<ir_version: 8, opset_import: ["" : 17, "tl" : 1]>
g (float[N, 8] x, float[8] w, float[8, 4] m) => (float[N, 8] y, float[N, 4] z) {
  y = tl.RMSNorm <epsilon = 0.00001> (x, w)
  z = MatMul (y, m)
}
)ONNX",
       "its output is a graph output"},
      {"rmsnorm", R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 8] x, float[1, 8] w) => (float[N, 8] y) {
  two = Constant <value = float {2.0}> ()
  eps = Constant <value = float {0.00001}> ()
  sq = Pow (x, two)
  ms = ReduceMean <axes = [-1], keepdims = 1> (sq)
  se = Add (ms, eps)
  rt = Sqrt (se)
  inv = Reciprocal (rt)
  xn = Mul (x, inv)
  y = Mul (xn, w)
}
)ONNX",
       "the scale is not a float32 [8]"},
      // two Concats of one kind, the second reading the first: one node cannot be both
      {"concat-pair", R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 2, 3, 8] x, float[1, 2, 4, 8] y, float[1, 2, 5, 8] z) => (float[1, 2, 12, 8] b) {
  a = Concat <axis = 2> (x, y)
  b = Concat <axis = 2> (a, z)
}
)ONNX",
       "its output is read before"},
  };
  // split-matmul: a projection cut along its last axis, one piece by a step of 2
  const std::string split = std::string(R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 2] a, float[N, 1] b) {
  w = Constant <value = float[4, 4] {)ONNX") + "0.5, -1, 2, 0.25, 1, 1, -0.5, 3, 0, 2, 1, -1, 0.75, 0, -2, 1" + R"ONNX(}> ()
  zero = Constant <value = int64[1] {0}> ()
  two = Constant <value = int64[1] {2}> ()
  four = Constant <value = int64[1] {4}> ()
  last = Constant <value = int64[1] {-1}> ()
  y = MatMul (x, w)
  a = Slice (y, zero, two, last)
  b = Slice (y, two, four, last, two)
}
)ONNX";
  std::vector<Case> all(std::begin(cases), std::end(cases));
  all.push_back({"split-matmul", split, "a Slice of it is not a constant step-1 range of the last axis"});
  for (const auto& cs : all) {
    Model m;
    ASSERT_TRUE(onnx::OnnxParser::Parse(m.proto, cs.graph.c_str()).IsOK()) << cs.pass;
    const auto r = runFusePasses(m, {cs.pass});
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].rewrites, 0) << cs.pass;
    std::string misses;
    for (const auto& n : r[0].nearMisses) misses += n + "\n";
    EXPECT_NE(misses.find(cs.says), std::string::npos) << cs.pass << ": " << misses;
  }
}

// A tl.MatMul whose W is stored transposed (transB: [N, K], as tl-fuse writes a tied LM
// head) is no projection for matmul-bias: its W's second dim is K, not the width N that a
// bias of N would be checked against, so the pass neither fuses the Add nor reports it as
// a near miss (of a "[K] bias").
TEST(FuseMatMulBias, TransposedProjectionIsLeftAlone) {
  Model m;
  ASSERT_TRUE(onnx::OnnxParser::Parse(m.proto, R"ONNX(
<ir_version: 8, opset_import: ["" : 17, "tl" : 1]>
g (float[N, 4] x) => (float[N, 6] y) <float[6, 4] w = {1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 1, 1, 0, 0, 0, 0, 1, 1}, float[6] b = {1, 2, 3, 4, 5, 6}> {
  p = tl.MatMul <transB = 1> (x, w)
  y = Add (p, b)
}
)ONNX").IsOK());
  const auto r = runFusePasses(m, {"matmul-bias"});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].rewrites, 0);
  EXPECT_TRUE(r[0].nearMisses.empty()) << r[0].nearMisses.front();
}

// A projection that is the graph's first node (node 0) takes its gated unit like any
// other: the GLU becomes its epilogue, its split goes.
TEST(FuseMatMulGlu, ProjectionThatIsTheFirstNode) {
  Model m;
  const char* graph = R"ONNX(
<ir_version: 8, opset_import: ["" : 17, "tl" : 1]>
g (float[N, 4] x) => (float[N, 2] y) <float[4, 4] w = {0.5, -1, 2, 0.25, 1, 1, -0.5, 3, 0, 2, 1, -1, 0.75, 0, -2, 1}> {
  gate, up = tl.MatMul <split = [2, 2]> (x, w)
  y = tl.SwiGLU (gate, up)
}
)ONNX";
  const auto status = onnx::OnnxParser::Parse(m.proto, graph);
  ASSERT_TRUE(status.IsOK()) << status.ErrorMessage();
  const auto r = runFusePasses(m, {"matmul-glu"});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].rewrites, 1) << (r[0].nearMisses.empty() ? "" : r[0].nearMisses[0]);
  ASSERT_EQ(m.proto.graph().node_size(), 1);
  const auto& n = m.proto.graph().node(0);
  EXPECT_EQ(n.op_type(), "MatMul");
  EXPECT_EQ(attrString(n, "glu").value_or(""), "silu");
  EXPECT_FALSE(attrInts(n, "split"));
  ASSERT_EQ(n.output_size(), 1);
  EXPECT_EQ(n.output(0), "y");
}

// A residual RMSNorm whose sum output is left out ("", as ONNX omits an optional output)
// still hands its residual to the projection before it: that projection then writes the
// sum under its own output's name, which the normalizing projection reads.
TEST(FuseNormMatMul, ResidualWithItsSumLeftOut) {
  Model m;
  const char* graph = R"ONNX(
<ir_version: 8, opset_import: ["" : 17, "tl" : 1]>
g (float[N, 4] a, float[N, 4] r) => (float[N, 4] z) <float[4, 4] w1 = {0.5, -1, 2, 0.25, 1, 1, -0.5, 3, 0, 2, 1, -1, 0.75, 0, -2, 1}, float[4] scale = {1, 0.5, 2, 1}, float[4, 4] w2 = {1, 0, 0.5, -1, 2, 1, 0, 0.25, -0.5, 1, 1, 0, 0, 3, -1, 1}> {
  x = tl.MatMul (a, w1)
  y, sum = tl.RMSNorm <epsilon = 0.00001> (x, scale, r)
  z = tl.MatMul (y, w2)
}
)ONNX";
  const auto status = onnx::OnnxParser::Parse(m.proto, graph);
  ASSERT_TRUE(status.IsOK()) << status.ErrorMessage();
  m.proto.mutable_graph()->mutable_node(1)->set_output(1, "");
  const auto r = runFusePasses(m, {"norm-matmul"});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].rewrites, 1) << (r[0].nearMisses.empty() ? "" : r[0].nearMisses[0]);
  ASSERT_EQ(m.proto.graph().node_size(), 2);
  const auto& first = m.proto.graph().node(0);
  const auto& second = m.proto.graph().node(1);
  EXPECT_EQ(first.output(0), "x");
  EXPECT_EQ(matmulOptional(first, MatMulInput::Residual), "r");
  EXPECT_EQ(second.input(0), "x");
  EXPECT_EQ(matmulOptional(second, MatMulInput::NormScale), "scale");
}

// A match whose removed nodes make a tensor read elsewhere is left alone: here the scale
// hides the scores' second reader from the attention pattern's own checks (the scores
// MatMul was removed and its reader read nothing; FuseGolden.PerturbedGraphs found it).
TEST(FuseAttention, ScoresReadElsewhereAreKept) {
  Model m;
  ASSERT_TRUE(onnx::OnnxParser::Parse(m.proto, R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 2, S, 8] q, float[1, 2, T, 8] k, float[1, 2, T, 8] v) => (float[1, 2, S, 8] o, float[1, 2, S, T] s) {
  scale = Constant <value = float {0.35}> ()
  kt = Transpose <perm = [0, 1, 3, 2]> (k)
  s = MatMul (q, kt)
  x = Mul (s, scale)
  p = Softmax <axis = -1> (x)
  o = MatMul (p, v)
}
)ONNX").IsOK());
  const auto r = runFusePasses(m, {"attention"});
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].rewrites, 0);
  ASSERT_EQ(r[0].nearMisses.size(), 1u);
  EXPECT_NE(r[0].nearMisses[0].find("'s', which it would remove, is a graph output"), std::string::npos) << r[0].nearMisses[0];
}

// The Softmax must be over the scores' last axis: given as -1 or 3, or, with no axis
// attribute, from opset 13 on (before it flattened from axis 1). Fused there; elsewhere
// (axis 2, no axis at opset 12) a near miss.
TEST(FuseAttention, SoftmaxDefaultAxisByOpset) {
  for (const auto& [opset, axis, fused] : std::vector<std::tuple<int, std::string, bool>>{
           {12, "", false}, {13, "", true}, {17, " <axis = 3>", true}, {17, " <axis = -1>", true}, {17, " <axis = 2>", false}}) {
    Model m;
    const std::string graph = "<ir_version: 8, opset_import: [\"\" : " + std::to_string(opset) + R"ONNX(]>
g (float[1, 2, S, 8] q, float[1, 2, T, 8] k, float[1, 2, T, 8] v) => (float[1, 2, S, 8] o) {
  kt = Transpose <perm = [0, 1, 3, 2]> (k)
  s = MatMul (q, kt)
  p = Softmax)ONNX" + axis + R"ONNX( (s)
  o = MatMul (p, v)
}
)ONNX";
    ASSERT_TRUE(onnx::OnnxParser::Parse(m.proto, graph.c_str()).IsOK()) << graph;
    const auto r = runFusePasses(m, {"attention"});
    ASSERT_EQ(r.size(), 1u);
    EXPECT_EQ(r[0].rewrites, fused ? 1 : 0) << "opset " << opset << axis;
    if (!fused) {
      ASSERT_EQ(r[0].nearMisses.size(), 1u);
      EXPECT_NE(r[0].nearMisses[0].find("it is not over the last axis"), std::string::npos) << r[0].nearMisses[0];
    }
  }
}

// A tl.RoPE that already rotates part of its input (rotary_dim) is not absorbed again by
// the Slices around it: partial rotary of a partial rotary is two rotary dims, not one.
// (The rope pass looks for partial rotary once it has fused a rotate-half: z's here.)
TEST(FuseRope, PartialRotaryAbsorbedOnce) {
  Model m;
  ASSERT_TRUE(onnx::OnnxParser::Parse(m.proto, R"ONNX(
<ir_version: 8, opset_import: ["" : 17, "tl" : 1]>
g (float[1, 2, N, 16] x, float[N, 4] cos, float[N, 4] sin, float[1, 2, N, 4] z) => (float[1, 2, N, 16] y, float[1, 2, N, 4] w) {
  zero = Constant <value = int64[1] {0}> ()
  two = Constant <value = int64[1] {2}> ()
  four = Constant <value = int64[1] {4}> ()
  eight = Constant <value = int64[1] {8}> ()
  end = Constant <value = int64[1] {16}> ()
  last = Constant <value = int64[1] {-1}> ()
  xr = Slice (x, zero, eight, last)
  xp = Slice (x, eight, end, last)
  yr = tl.RoPE <rotary_dim = 4> (xr, cos, sin)
  y = Concat <axis = -1> (yr, xp)
  z1 = Slice (z, zero, two, last)
  z2 = Slice (z, two, four, last)
  zn = Neg (z2)
  zh = Concat <axis = -1> (zn, z1)
  zc = Mul (z, cos)
  zs = Mul (zh, sin)
  w = Add (zc, zs)
}
)ONNX").IsOK());
  ASSERT_EQ(runFusePasses(m, {"rope"})[0].rewrites, 1);
  const onnx::NodeProto* rope = nullptr;
  for (const auto& n : m.proto.graph().node())
    if (n.op_type() == "RoPE" && n.input(0) != "z") rope = &n;
  ASSERT_NE(rope, nullptr);
  EXPECT_EQ(rope->input(0), "xr");
  int dims = 0;
  for (const auto& a : rope->attribute()) dims += a.name() == "rotary_dim";
  EXPECT_EQ(dims, 1);
}

// GPT-2's MLP computes GELU's tanh form: each fused tl.Gelu says so (approximate =
// "tanh"), or the kernel would compute the erf form, within --check's tolerance on the
// tiny model's small activations but not on a real model's.
TEST(FuseGelu, TanhFormKeepsItsApproximation) {
  Model model = loadModel((test::sharedModels() / "gpt2-past/model.onnx").string());
  runFusePasses(model, {"gelu"});
  int tanh = 0, gelus = 0;
  for (const auto& n : model.proto.graph().node()) {
    if (n.op_type() != "Gelu" || n.domain() != "tl") continue;
    ++gelus;
    tanh += attrString(n, "approximate").value_or("none") == "tanh";
  }
  EXPECT_EQ(gelus, 2);  // one a layer
  EXPECT_EQ(tanh, gelus);
}

// Greedy generation from the fused bytellama equals the unfused, byte for byte.
TEST(FuseGenerate, BytellamaGreedyUnchanged) {
  auto generate = [](Model& model) {
    Graph graph(model.proto.graph());
    ShapeAnalysis analysis = inferShapes(model, graph);
    Device device(selectDevice(""), false);
    Executor ex(device, model, graph, analysis);
    CausalLm lm(ex, graph, analysis);
    Sampler sampler(SamplingOptions{});
    auto logits = lm.step({'d', 'e', 'f', ' '});
    std::string out;
    for (int i = 0; i < 200; ++i) {
      const int64_t t = sampler.sample(logits);
      out += static_cast<char>(t);
      if (i + 1 < 200) logits = lm.step({t});
    }
    return out;
  };
  const auto path = test::sourceDir() / "models/bytellama-past/model.onnx";
  Model plain = loadModel(path.string()), fused = loadModel(path.string());
  runFusePasses(fused, {});
  EXPECT_EQ(generate(fused), generate(plain));
}

// A fused model imports tl's domain (its nodes' ops, docs/ops.md) once, at version 1, and
// keeps the default domain's import as it was; fusing it again adds none.
TEST(FuseOpsets, TlDomainImportedOnce) {
  const auto path = test::sharedModels() / "llama-past/model.onnx";
  Model m = loadModel(path.string());
  std::map<std::string, int64_t> before;
  for (const auto& o : m.proto.opset_import()) before[o.domain()] = o.version();
  ASSERT_FALSE(before.count("tl"));
  for (int round = 0; round < 2; ++round) {
    runFusePasses(m, {});
    std::map<std::string, int> count;
    for (const auto& o : m.proto.opset_import()) {
      ++count[o.domain()];
      EXPECT_EQ(o.version(), o.domain() == "tl" ? 1 : before.at(o.domain())) << "'" << o.domain() << "'";
    }
    EXPECT_EQ(count["tl"], 1) << "round " << round;
    EXPECT_EQ(count[""], 1) << "round " << round;
    EXPECT_EQ(count.size(), before.size() + 1) << "round " << round;
  }
}

TEST(TlFuseCli, ListsPassesReportsNearMissesAndRefusesUnknownPasses) {
  auto r = runTool("tl-fuse", "--list-passes");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("rmsnorm\t"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rope\t"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dead-nodes\t"), std::string::npos) << r.out;
  const std::string llama = (test::sharedModels() / "llama-past/model.onnx").string();
  r = runTool("tl-fuse", llama + " --passes rmsnorm,bogus -o /dev/null");
  EXPECT_EQ(r.exitCode, 1);
  std::string all;
  for (const auto& p : fusePasses()) all += (all.empty() ? "" : ", ") + p.name;
  EXPECT_EQ(r.err, "tl-fuse: error: " + llama + ": unknown pass 'bogus' (passes: " + all + ")\n");
  r = runTool("tl-fuse", llama + " --emit text");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("rmsnorm: 5 rewritten"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| ReduceMean | 5 | 0 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("norm-matmul: 5 rewritten"), std::string::npos) << r.out;  // every norm into a projection
  EXPECT_EQ(r.out.find("| tl.RMSNorm |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tl.MatMul | 0 | 9 |"), std::string::npos) << r.out;  // q/k/v, o, gate/up, down; lm_head
  // An exponent of 3 is no RMSNorm, a softmax over the heads no attention, rotary angles
  // that are no Concat(f, f) no RoPE table: left alone, and -v says why.
  Model m = loadModel(llama);
  {
    auto* g = m.proto.mutable_graph();
    std::string angles;
    for (const auto& n : g->node())
      if (n.op_type() == "Cos") angles = n.input(0);
    for (auto& n : *g->mutable_node())
      if (n.output(0) == angles && n.op_type() == "Concat" && n.input_size() == 2) {
        auto* neg = g->add_node();
        neg->set_op_type("Neg");
        neg->set_name("negated_angles");
        neg->add_input(n.input(1));
        neg->add_output("negated_angles_output");
        n.set_input(1, "negated_angles_output");
      }
  }
  for (auto& n : *m.proto.mutable_graph()->mutable_node()) {
    if (n.op_type() == "Softmax" && n.name() == "/m/model/layers.0/self_attn/Softmax") n.mutable_attribute(0)->set_i(1);
    if (n.op_type() != "Constant" || n.output(0) != "/m/model/layers.0/input_layernorm/Constant_output_0") continue;
    auto* t = n.mutable_attribute(0)->mutable_t();
    const float three = 3.0f;
    t->set_raw_data(std::string(reinterpret_cast<const char*>(&three), 4));
  }
  const auto edited = test::tempDir("fuse_near_miss") / "m.onnx";
  test::writeFile(edited, m.proto.SerializeAsString());
  r = runTool("tl-fuse", edited.string() + " --emit text -v");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("rmsnorm: 4 rewritten, 1 near misses"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("near miss: node '/m/model/layers.0/input_layernorm/ReduceMean' (ReduceMean): the Pow's "
                       "exponent is not the constant 2"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("attention: 1 rewritten, 1 near misses"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rope-positions: 0 rewritten, 2 near misses"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(tl.RoPE): cos: the angles are no Concat(f, f)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("near miss: node '/m/model/layers.0/self_attn/Softmax' (Softmax): it is not over the last axis"),
            std::string::npos)
      << r.out;
  // A file that is no model: one line, exit 1.
  const auto junk = test::tempDir("fuse_junk") / "junk.onnx";
  test::writeFile(junk, "not a model");
  r = runTool("tl-fuse", junk.string() + " -o /dev/null");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_EQ(r.err.rfind("tl-fuse: error: " + junk.string() + ": ", 0), 0u) << r.err;
}

}  // namespace
}  // namespace tl

namespace tl {
namespace {

// composeSliceRanges against slicing twice, for every small range and length (ONNX
// clamps each range to what it slices; INT64_MAX is "to the end").
TEST(MergeSlices, ComposedRangeSelectsTheSameElements) {
  const int64_t big = std::numeric_limits<int64_t>::max();
  auto pick = [](int64_t len, int64_t s, int64_t e) {
    std::pair<int64_t, int64_t> r{std::min(s, len), std::min(e, len)};
    if (r.second < r.first) r.second = r.first;
    return r;
  };
  std::vector<int64_t> values{0, 1, 2, 3, 5, 7, big};
  for (int64_t d = 0; d <= 6; ++d)
    for (int64_t s1 : values)
      for (int64_t e1 : values)
        for (int64_t s2 : values)
          for (int64_t e2 : values) {
            const auto a = pick(d, s1, e1);
            const auto b = pick(a.second - a.first, s2, e2);
            const int64_t want = b.second - b.first, wantFrom = a.first + b.first;
            const auto [s, e] = composeSliceRanges(s1, e1, s2, e2);
            const auto m = pick(d, s, e);
            ASSERT_EQ(m.second - m.first, want) << d << " " << s1 << " " << e1 << " " << s2 << " " << e2;
            if (want) {
              ASSERT_EQ(m.first, wantFrom);
            }
          }
}

// Three Slices (two of one axis, one of another) become one, and the result is the same.
TEST(MergeSlices, ChainBecomesOneSliceWithTheSameOutput) {
  Model m;
  m.displayName = "slices";
  auto& g = *m.proto.mutable_graph();
  m.proto.set_ir_version(8);
  m.proto.add_opset_import()->set_version(17);
  auto* x = g.add_input();
  x->set_name("x");
  x->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  for (auto d : {2, 10, 8}) x->mutable_type()->mutable_tensor_type()->mutable_shape()->add_dim()->set_dim_value(d);
  g.add_output()->set_name("y");
  auto ints = [&](const std::string& name, std::vector<int64_t> v) {
    auto* t = g.add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (auto e : v) t->add_int64_data(e);
  };
  auto slice = [&](const std::string& in, const std::string& out, const std::string& p) {
    auto* n = g.add_node();
    n->set_op_type("Slice");
    n->set_name(out + "_node");
    for (const auto& i : {in, p + "s", p + "e", p + "a"}) n->add_input(i);
    n->add_output(out);
  };
  ints("p1s", {2}), ints("p1e", {9}), ints("p1a", {1});
  ints("p2s", {1}), ints("p2e", {5}), ints("p2a", {-2});
  ints("p3s", {3}), ints("p3e", {100}), ints("p3a", {2});
  slice("x", "a", "p1"), slice("a", "b", "p2"), slice("b", "y", "p3");
  std::vector<float> data(160);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i);
  auto run = [&](Model& model) {
    Graph graph(model.proto.graph());
    ShapeAnalysis analysis = inferShapes(model, graph);
    Device device(selectDevice(""), false);
    Executor ex(device, model, graph, analysis);
    return ex.run({test::floats("x", data, {2, 10, 8})})[0];
  };
  const Tensor want = run(m);
  const auto results = runFusePasses(m, {"merge-slices", "dead-nodes"});
  EXPECT_EQ(results[0].rewrites, 2);
  EXPECT_EQ(opCounts(m.proto.graph())["Slice"], 1);
  const Tensor got = run(m);
  EXPECT_EQ(got.dims, (std::vector<int64_t>{2, 4, 5}));
  EXPECT_EQ(got.dims, want.dims);
  EXPECT_EQ(got.bytes, want.bytes);
}

// Slice(Slice(x)) over x, both with the same starts, ends and axes: the named constants,
// and `runtime` (if any) x's second dim, known only at run time, instead of a constant.
Model twoSlices(const std::vector<std::pair<std::string, int64_t>>& constants, const std::string& runtime) {
  Model m = test::oneNodeModel("Identity", {{"x", {"4", runtime.empty() ? "9" : "n"}}}, 0, "");
  auto& g = *m.proto.mutable_graph();
  g.mutable_node(0)->set_op_type("Slice");
  g.mutable_node(0)->set_output(0, "a");
  for (const auto& name : {"s", "e", "ax"}) {
    if (name == runtime) {
      auto* shape = g.add_node();
      shape->set_op_type("Shape");
      shape->add_input("x");
      shape->add_output(name);
      auto* start = shape->add_attribute();
      start->set_name("start");
      start->set_type(onnx::AttributeProto::INT);
      start->set_i(1);
    } else {
      auto* t = g.add_initializer();
      t->set_name(name);
      t->set_data_type(onnx::TensorProto::INT64);
      t->add_dims(1);
      for (const auto& [c, v] : constants)
        if (c == name) t->add_int64_data(v);
    }
    g.mutable_node(0)->add_input(name);
  }
  auto* outer = g.add_node();
  *outer = g.node(0);
  outer->set_name("outer");
  outer->set_input(0, "a");
  outer->set_output(0, "y");
  if (!runtime.empty()) g.mutable_node()->SwapElements(0, 1);  // the Shape first
  return m;
}

// Negative indices on one axis are not composed: a near miss, the graph unchanged.
TEST(MergeSlices, NegativeIndicesOfOneAxisAreANearMiss) {
  Model m = twoSlices({{"s", 1}, {"e", -1}, {"ax", 1}}, "");
  const auto r = runFusePasses(m, {"merge-slices"});
  EXPECT_EQ(r[0].rewrites, 0);
  ASSERT_EQ(r[0].nearMisses.size(), 1u);
  EXPECT_NE(r[0].nearMisses[0].find("negative index"), std::string::npos) << r[0].nearMisses[0];
}

// Starts or ends known only at run time (the other one constant): not composed, and said so.
TEST(MergeSlices, RuntimeStartsOrEndsAreANearMiss) {
  for (const std::string runtime : {"s", "e"}) {
    Model m = twoSlices({{"s", 1}, {"e", 5}, {"ax", 1}}, runtime);
    const auto r = runFusePasses(m, {"merge-slices"});
    EXPECT_EQ(r[0].rewrites, 0) << runtime;
    ASSERT_EQ(r[0].nearMisses.size(), 1u) << runtime;
    EXPECT_NE(r[0].nearMisses[0].find("not constant"), std::string::npos) << r[0].nearMisses[0];
  }
}

// fold-constants folds what is exact on the host over constants too large for tl-shape to
// hold as values (a Transpose, a Cast, a Where, integer arithmetic), and leaves float
// arithmetic and views alone; the folded model computes what the unfolded one does.
TEST(FoldConstants, ExactOpsOfConstantsBecomeInitializers) {
  std::string w, i;
  for (int e = 0; e < 2000; ++e) {
    w += (e ? ", " : "") + std::to_string((e * 37 % 101) * 0.25 - 12);
    i += (e ? ", " : "") + std::to_string(e % 7 - 3);
  }
  Model m;
  const std::string text = R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[40, 50] x) => (float[40, 50] y) <float[50, 40] w = {)ONNX" + w + R"ONNX(}, int64[50, 40] i = {)ONNX" + i + R"ONNX(}> {
  wt = Transpose <perm = [1, 0]> (w)
  two = Constant <value = int64 {2}> ()
  i2 = Mul (i, two)
  neg = Less (i2, two)
  picked = Where (neg, i, i2)
  fi = Cast <to = 1> (picked)
  fit = Transpose <perm = [1, 0]> (fi)
  half = Constant <value = float {0.5}> ()
  scaled = Mul (wt, half)
  shape = Constant <value = int64[2] {40, 50}> ()
  view = Reshape (w, shape)
  s = Add (scaled, view)
  s2 = Add (s, fit)
  y = Add (x, s2)
}
)ONNX";
  const auto status = onnx::OnnxParser::Parse(m.proto, text.c_str());
  ASSERT_TRUE(status.IsOK()) << status.ErrorMessage();
  Model folded = m;
  const auto r = runFusePasses(folded, {"fold-constants", "dead-nodes"});
  EXPECT_EQ(r[0].rewrites, 6);  // wt, i2, neg, picked, fi, fit; not the float Mul or the Reshape view
  std::set<std::string> ops;
  for (const auto& n : folded.proto.graph().node()) ops.insert(n.op_type());
  EXPECT_FALSE(ops.count("Transpose") || ops.count("Less") || ops.count("Where") || ops.count("Cast"));
  EXPECT_TRUE(ops.count("Reshape") && ops.count("Mul"));
  std::vector<float> x(2000);
  for (size_t e = 0; e < x.size(); ++e) x[e] = static_cast<float>(e % 13) - 6.5f;
  std::vector<std::vector<uint8_t>> outs;
  for (Model* model : {&m, &folded})
    onBothFamilies(*model, [&](Executor& ex, bool) { outs.push_back(ex.run({floats("x", x, {40, 50})})[0].bytes); });
  ASSERT_EQ(outs.size(), 6u);  // two models, each in onBothFamilies' three runs
  for (size_t k = 1; k < outs.size(); ++k) EXPECT_EQ(outs[k], outs[0]) << k;
}

// fold-constants leaves an output over 2^20 elements a node (a folded copy of a large weight
// would grow the model), of inputs within the limit, and folds one of exactly 2^20: Concat
// of two 1024 x 512 initializers folds, of two 1024 x 513 stays.
TEST(FoldConstants, OutputsOverTheLimitStayNodes) {
  for (int64_t cols : {512, 513}) {
    Model m = test::oneNodeModel("Add", {{"x", {"1024", std::to_string(2 * cols)}}}, 0, "");
    auto& g = *m.proto.mutable_graph();
    g.mutable_node(0)->add_input("ww");
    auto* w = g.add_initializer();
    w->set_name("w");
    w->set_data_type(onnx::TensorProto::FLOAT);
    w->add_dims(1024);
    w->add_dims(cols);
    w->set_raw_data(std::string(static_cast<size_t>(1024 * cols * 4), '\0'));
    auto* concat = g.add_node();
    concat->set_op_type("Concat");
    concat->add_input("w");
    concat->add_input("w");
    concat->add_output("ww");
    auto* axis = concat->add_attribute();
    axis->set_name("axis");
    axis->set_type(onnx::AttributeProto::INT);
    axis->set_i(1);
    g.mutable_node()->SwapElements(0, 1);  // the Concat first
    const auto r = runFusePasses(m, {"fold-constants"});
    EXPECT_EQ(r[0].rewrites, cols == 512 ? 1 : 0) << cols;
  }
}

}  // namespace
}  // namespace tl
