// Quantized models against their peers. tl-quant --format ort writes int4 as com.microsoft.MatMulNBits: ONNX Runtime
// (onnxruntime-node, installed by scripts/setup.sh) must compute what tl-run computes
// from the same codes written as tl.QMatMul.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <set>

#include "check/reference_check.h"
#include "cli/error.h"
#include "cli/test_support.h"
#include "graph/graph.h"
#include "lm/causal_lm.h"
#include "onnx/model_io.h"
#include "quant/quantize_model.h"
#include "runtime/executor.h"
#include "shape/shape_inference.h"

namespace tl {
namespace {

TEST(OrtPeer, MatMulNBitsArtifactMatchesTlRun) {
  const auto ortDir = test::sourceDir() / "tests/ort";
  ASSERT_TRUE(std::filesystem::exists(ortDir / "node_modules/onnxruntime-node"))
      << "onnxruntime-node is missing: run scripts/setup.sh";
  const auto dir = test::tempDir("ort_peer");
  const std::string model = (test::sourceDir() / "models/bytellama-past/model.onnx").string();
  for (const char* fmt : {"ort", "tl"}) {  // the lm_head in float in both (--format ort keeps it)
    auto r = test::runTool("tl-quant", model + " --scheme int4 --group 64 --lm-head-scheme float --format " +
                                           std::string(fmt) + " -o " + (dir / (std::string(fmt) + ".onnx")).string());
    ASSERT_EQ(r.exitCode, 0) << r.err;
  }
  // A prompt of 24 bytes with an empty cache.
  const std::string prompt = "def fibonacci(n):\n    if";
  std::ofstream js(dir / "inputs.json");
  const int64_t n = static_cast<int64_t>(prompt.size());
  auto ints = [&](const char* name, const std::vector<int64_t>& v) {
    js << "{\"name\": \"" << name << "\", \"dtype\": \"int64\", \"dims\": [1, " << v.size() << "], \"data\": [";
    for (size_t i = 0; i < v.size(); ++i) js << (i ? "," : "") << v[i];
    js << "]}";
  };
  std::vector<int64_t> ids(prompt.begin(), prompt.end()), ones(static_cast<size_t>(n), 1), pos;
  for (int64_t i = 0; i < n; ++i) pos.push_back(i);
  js << "[";
  ints("input_ids", ids);
  js << ",";
  ints("attention_mask", ones);
  js << ",";
  ints("position_ids", pos);
  for (int l = 0; l < 4; ++l)
    for (const char* kv : {"key", "value"})
      js << ",{\"name\": \"past_key_values." << l << "." << kv << "\", \"dtype\": \"float32\", \"dims\": [1, 4, 0, 32], \"data\": []}";
  js << "]";
  js.close();
  const std::string cmd = "cd '" + ortDir.string() + "' && node run_ort.mjs '" + (dir / "ort.onnx").string() + "' '" +
                          (dir / "inputs.json").string() + "' logits '" + (dir / "ort.bin").string() + "' 2>&1";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  std::string raw = test::readFile(dir / "ort.bin");
  ASSERT_EQ(raw.size(), static_cast<size_t>(n * 256 * 4));
  std::vector<float> want(static_cast<size_t>(n * 256));
  std::memcpy(want.data(), raw.data(), raw.size());

  Model m = loadModel((dir / "tl.onnx").string());
  Graph g(m.proto.graph());
  ShapeAnalysis a = inferShapes(m, g);
  Device device(selectDevice(""), false);
  Executor ex(device, m, g, a);
  CausalLm lm(ex, g, a);
  auto got = lm.step(ids, true);
  ASSERT_EQ(got.size(), want.size());
  double maxErr = 0;
  for (size_t i = 0; i < got.size(); ++i) maxErr = std::max(maxErr, double(std::fabs(got[i] - want[i])));
  EXPECT_LT(maxErr, 1e-3) << "max abs logits difference between ONNX Runtime (MatMulNBits) and tl-run (tl.QMatMul)";
}

}  // namespace
}  // namespace tl

namespace tl {
namespace {

// A weight-only quantized model must compute what its dequantized twin (the same
// weights as floats, plain MatMuls) computes: everything else about its outputs is
// the quantization's own error, which is what `tl-run --check --atol` must allow for.
// (A in fp32: the CPU decode rows, up to 8 of them, would round it to int8, an
// approximation of their own, docs/tl-run.md.)
TEST(QuantizedModels, MatchTheirDequantizedTwins) {
  const auto dir = test::tempDir("quant_twins");
  const std::string model = (test::sourceDir() / "models/bytellama-past/model.onnx").string();
  const auto sets = loadDataSets(test::sourceDir() / "models/bytellama-past");
  for (const char* scheme : {"e0m4", "int4", "q8", "q3h"}) {
    std::vector<std::vector<Tensor>> outs;
    for (const char* fmt : {"tl", "dequantized"}) {
      const auto path = dir / (std::string(scheme) + "." + fmt + ".onnx");
      auto r = test::runTool("tl-quant", model + " --scheme " + scheme + " --format " + fmt + " -o " + path.string());
      ASSERT_EQ(r.exitCode, 0) << r.err;
      Model m = loadModel(path.string());
      Graph g(m.proto.graph());
      ShapeAnalysis a = inferShapes(m, g);
      Device device(selectDevice(""), false);
      device.setInt8Activations(false);
      Executor ex(device, m, g, a);
      outs.push_back(ex.run(sets[0].inputs));
    }
    ASSERT_EQ(outs[0].size(), sets[0].outputs.size());
    ASSERT_EQ(outs[1].size(), sets[0].outputs.size());
    for (size_t j = 0; j < outs[0].size(); ++j) {
      auto c = compareTensors(outs[0][j], outs[1][j], 1e-4, 1e-4);
      EXPECT_TRUE(c.pass()) << scheme << " " << c.name << ": max abs " << c.maxAbs;
    }
  }
}

// quantizeModel checks its options itself (tl-quant does too, before reading the model,
// but the library has other callers): options it cannot honour are refused, naming the
// option, before any weight changes.
// A weight two MatMuls share (a tied projection) is quantized once: one report, one set of
// codes (and their scales and offsets) that both tl.QMatMuls read.
Model sharedWeightModel() {
  Model m;
  EXPECT_TRUE(onnx::OnnxParser::Parse(m.proto, R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 8] x, float[N, 8] y) => (float[N, 4] a, float[N, 4] b) <float[8, 4] w = {0.5, -1, 2, 0.25, 1, 1, -0.5, 3, 0, 2, 1, -1, 0.75, 0, -2, 1, 0.5, -1, 2, 0.25, 1, 1, -0.5, 3, 0, 2, 1, -1, 0.75, 0, -2, 1}> {
  a = MatMul (x, w)
  b = MatMul (y, w)
}
)ONNX").IsOK());
  return m;
}

TEST(QuantizedModels, SharedWeightQuantizedOnce) {
  Model m = sharedWeightModel();
  QuantOptions opt;
  opt.quantizeLmHead = true;  // (both products are graph outputs)
  const auto report = quantizeModel(m, opt, false);
  ASSERT_EQ(report.size(), 1u);
  EXPECT_EQ(report[0].name, "w");
  std::set<std::string> weights;
  for (const auto& n : m.proto.graph().node()) {
    EXPECT_EQ(n.op_type(), "QMatMul");
    weights.insert(n.input(1));
  }
  EXPECT_EQ(weights.size(), 1u);
  EXPECT_EQ(m.proto.graph().initializer_size(), 3);  // the codes, their scales and offsets
}

// Progress lines (tl-quant's, a line a weight and a total) only when asked: a library
// caller (tl-bench --kernels, the tests) quantizes without a word on stderr.
TEST(QuantizedModels, ProgressOnlyWhenAsked) {
  QuantOptions opt;
  opt.quantizeLmHead = true;
  for (bool progress : {false, true}) {
    Model m = sharedWeightModel();
    ::testing::internal::CaptureStderr();
    quantizeModel(m, opt, progress);
    const std::string said = ::testing::internal::GetCapturedStderr();
    if (!progress) {
      EXPECT_EQ(said, "");
    } else {
      EXPECT_EQ(said.rfind("tl-quant: [1/1] w ", 0), 0u) << said;
      EXPECT_NE(said.find("\ntl-quant: 1 weights, "), std::string::npos) << said;
    }
  }
}

TEST(QuantizedModels, BadOptionsRefusedBeforeAnyWeightChanges) {
  const Model original = loadModel((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  const std::vector<std::pair<std::function<void(QuantOptions&)>, std::string>> cases = {
      {[](QuantOptions& o) { o.group = 0; }, "--group must be positive, not 0"},
      {[](QuantOptions& o) { o.ortFormat = true; }, "--format ort writes int4 (MatMulNBits), not e0m4"},
      {[](QuantOptions& o) { o.scheme = QuantScheme::Q3H; o.group = 33; }, "q3h pairs weights: --group must be even"},
  };
  for (const auto& [set, says] : cases) {
    Model m = original;
    QuantOptions opt;
    set(opt);
    try {
      quantizeModel(m, opt, false);
      ADD_FAILURE() << "taken: " << says;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
    EXPECT_EQ(m.proto.SerializeAsString(), original.proto.SerializeAsString()) << says;
  }
}

// What each scheme costs the model, in held-out bits per byte of bytellama (the first 16 KB
// of ../shared/models/bytellama-heldout.txt, windows of 512, tl-run --perplexity): each
// within a bound of the fp32 model's score, the measured cost (PoCL, fp32 1.0849: e0m4
// +0.024, int4 +0.027, w4a8 +0.051, q8 +0.000, q3h +0.073) and 0.01 more, and none better
// than fp32 by more than rounding. A logits' error bound could not tell a scheme from a
// broken one: bytellama's logits have a standard deviation of 2.4, near the 2.5 a --check
// needs for e0m4.
TEST(QuantizedModels, HeldOutBitsPerByteWithinEachSchemesBound) {
  const auto dir = test::tempDir("quant_bpb");
  const std::string model = (test::sourceDir() / "models/bytellama-past/model.onnx").string();
  const std::string text = test::readFile(test::sharedModels() / "bytellama-heldout.txt").substr(0, 16384);
  const auto heldOut = dir / "heldout16k.txt";
  test::writeFile(heldOut, text);
  const auto bitsPerByte = [&](const std::string& path) {
    const auto r = test::runTool("tl-run", path + " --perplexity " + heldOut.string() + " --window 512");
    EXPECT_EQ(r.exitCode, 0) << r.err;
    const size_t at = r.out.find(" bits per byte (");
    EXPECT_NE(at, std::string::npos) << r.out;
    return at == std::string::npos ? 1e9 : std::stod(r.out.substr(r.out.rfind(' ', at - 1) + 1));
  };
  const double fp32 = bitsPerByte(model);
  EXPECT_NEAR(fp32, 1.0849, 0.001);
  const std::pair<const char*, double> bounds[] = {{"e0m4", 0.034}, {"int4", 0.037}, {"w4a8", 0.061}, {"q8", 0.01}, {"q3h", 0.083}};
  for (const auto& [scheme, bound] : bounds) {
    const auto path = dir / (std::string(scheme) + ".onnx");
    auto r = test::runTool("tl-quant", model + " --scheme " + scheme + " -o " + path.string());
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const double q = bitsPerByte(path.string());
    std::printf("%s: %.4f bits per byte, fp32 %.4f\n", scheme, q, fp32);
    EXPECT_LE(q, fp32 + bound) << scheme;
    EXPECT_GE(q, fp32 - 0.002) << scheme;
  }
}

}  // namespace
}  // namespace tl
