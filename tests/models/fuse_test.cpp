// tl-fuse's passes on every model: each pass alone and all of them leave outputs within
// fp32 tolerance of ONNX Runtime's, in both kernel families; the fused ops against a CPU
// reference (Eigen) on random shapes; greedy generation unchanged; the CLI's errors.
#include <Eigen/Dense>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "check/reference_check.h"
#include "cli/test_support.h"
#include "fuse/fuse.h"
#include "graph/graph.h"
#include "lm/causal_lm.h"
#include "onnx/model_io.h"
#include "runtime/executor.h"
#include "sample/sampler.h"
#include "shape/shape_inference.h"

namespace tl {
namespace {

using test::runTool;

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
  for (const auto& d : test::modelDirs())
    for (std::vector<std::string> p : {std::vector<std::string>{"rmsnorm"}, {"dead-nodes"}, {}}) out.push_back({d, p});
  return out;
}

class FuseModels : public ::testing::TestWithParam<FuseCase> {};

TEST_P(FuseModels, MatchesReferenceOutputs) {
  const auto& c = GetParam();
  Model model = loadModel((c.dir / "model.onnx").string());
  const auto results = runFusePasses(model, c.passes);
  // Every RMSNorm chain of these exports is proven: each norm of each layer, and the
  // final one (gpt2 has LayerNormalization instead).
  const bool rms = c.dir.filename().string().rfind("gpt2", 0) != 0;
  for (const auto& r : results)
    if (r.pass == "rmsnorm") {
      EXPECT_EQ(r.rewrites, rms ? (c.dir.filename().string().rfind("bytellama", 0) == 0 ? 9 : 5) : 0);
      EXPECT_TRUE(r.nearMisses.empty()) << r.nearMisses.front();
    }
  if (rms && (c.passes.empty() || c.passes[0] == "rmsnorm")) {
    EXPECT_EQ(opCounts(model.proto.graph()).count("ReduceMean"), 0u);
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
  Device device(selectDevice(""), false);
  for (int64_t H : {1, 7, 64, 100, 300, 2048}) {
    Model m;
    m.proto.set_ir_version(8);
    m.proto.add_opset_import()->set_version(17);
    auto* tlOpset = m.proto.add_opset_import();
    tlOpset->set_domain("tl");
    tlOpset->set_version(1);
    auto* g = m.proto.mutable_graph();
    for (const char* name : {"x", "scale"}) {
      auto* in = g->add_input();
      in->set_name(name);
      auto* tt = in->mutable_type()->mutable_tensor_type();
      tt->set_elem_type(onnx::TensorProto::FLOAT);
      if (std::string(name) == "x") tt->mutable_shape()->add_dim()->set_dim_param("R");
      tt->mutable_shape()->add_dim()->set_dim_value(H);
    }
    auto* n = g->add_node();
    n->set_op_type("RMSNorm");
    n->set_domain("tl");
    n->add_input("x");
    n->add_input("scale");
    n->add_output("y");
    auto* eps = n->add_attribute();
    eps->set_name("epsilon");
    eps->set_type(onnx::AttributeProto::FLOAT);
    eps->set_f(1e-5f);
    g->add_output()->set_name("y");
    Graph graph(m.proto.graph());
    ShapeAnalysis analysis = inferShapes(m, graph);
    for (bool gpuKernels : {false, true}) {
      device.setGpuKernels(gpuKernels);
      Executor ex(device, m, graph, analysis);
      for (int64_t R : {1, 3, 17}) {
        Mat x(R, H), s(1, H);
        for (int64_t i = 0; i < x.size(); ++i) x.data()[i] = normal(rng);
        for (int64_t i = 0; i < s.size(); ++i) s.data()[i] = normal(rng);
        auto tensor = [](const char* name, const Mat& v, std::vector<int64_t> dims) {
          Tensor t;
          t.name = name;
          t.dtype = DType::Float;
          t.dims = std::move(dims);
          t.bytes.resize(static_cast<size_t>(v.size()) * 4);
          std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
          return t;
        };
        auto got = ex.run({tensor("x", x, {R, H}), tensor("scale", s, {H})});
        const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
        Eigen::ArrayXf inv = (x.array().square().rowwise().mean() + 1e-5f).rsqrt();
        Mat want = (x.array().colwise() * inv).rowwise() * s.row(0).array();
        for (int64_t i = 0; i < want.size(); ++i)
          ASSERT_NEAR(y[i], want.data()[i], 1e-5f * (1 + std::fabs(want.data()[i])))
              << "H " << H << " R " << R << " gpu " << gpuKernels << " at " << i;
      }
    }
  }
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

TEST(TlFuseCli, ListsPassesReportsNearMissesAndRefusesUnknownPasses) {
  auto r = runTool("tl-fuse", "--list-passes");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("rmsnorm\t"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("dead-nodes\t"), std::string::npos) << r.out;
  const std::string llama = (test::sharedModels() / "llama-past/model.onnx").string();
  r = runTool("tl-fuse", llama + " --passes rmsnorm,bogus -o /dev/null");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_EQ(r.err, "tl-fuse: error: " + llama + ": unknown pass 'bogus' (passes: rmsnorm, dead-nodes)\n");
  r = runTool("tl-fuse", llama + " --emit text");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("rmsnorm: 5 rewritten"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| ReduceMean | 5 | 0 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("| tl.RMSNorm | 0 | 5 |"), std::string::npos) << r.out;
  // An exponent of 3 is no RMSNorm: left alone, and -v says why.
  Model m = loadModel(llama);
  for (auto& n : *m.proto.mutable_graph()->mutable_node()) {
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
  // A file that is no model: one line, exit 1.
  const auto junk = test::tempDir("fuse_junk") / "junk.onnx";
  test::writeFile(junk, "not a model");
  r = runTool("tl-fuse", junk.string() + " -o /dev/null");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_EQ(r.err.rfind("tl-fuse: error: " + junk.string() + ": ", 0), 0u) << r.err;
}

}  // namespace
}  // namespace tl
