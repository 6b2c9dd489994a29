// Exact recompute of a context's KV rows (issue 11, LLMS 3.3): a chunk anywhere in a
// context, recomputed from its tokens and the rows before it, equals what the prefill of
// the whole context wrote, to fp32 rounding, in both kernel families.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <cmath>
#include <string>

#include "cli/error.h"
#include "cli/test_support.h"
#include "ctxswap/calibrate.h"
#include "ctxswap/kv_quality.h"
#include "ctxswap/recompute.h"
#include "lm/perplexity.h"
#include "fuse/fuse.h"
#include "graph/graph.h"
#include "lm/loaded_lm.h"
#include "lm/causal_lm.h"
#include "onnx/model_io.h"
#include "runtime/executor.h"
#include "shape/shape_inference.h"

namespace tl {
namespace {

TEST(Recompute, ChunksAnywhereEqualTheOriginalRows) {
  Model model = loadModel((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  runFusePasses(model, {});
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  const std::string text = "def fib(n):\n    a, b = 0, 1\n    for _ in range(n):\n        a, b = b, a + b\n";
  const std::vector<int64_t> tokens(text.begin(), text.begin() + 64);
  for (bool gpu : {false, true}) {
    Device device(selectDevice(""), false);
    device.setGpuKernels(gpu);
    Executor ex(device, model, graph, analysis);
    CausalLm lm(ex, graph, analysis);
    const ContextKv all = recomputeRows(ex, lm, tokens, 0, 64, emptyContextKv(lm));  // the context's prefill
    ASSERT_EQ(all.tokens, 64);
    for (int64_t first : {16, 32, 48}) {
      ContextKv past = emptyContextKv(lm);
      appendChunk(past, chunkValues(all, 0, first), first);
      const ContextKv again = recomputeRows(ex, lm, tokens, first, 16, past);
      const auto want = chunkValues(all, first, 16), got = chunkValues(again, 0, 16);
      ASSERT_EQ(got.size(), want.size());
      double worst = 0, scale = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::fabs(static_cast<double>(got[i]) - want[i]));
        scale = std::max(scale, std::fabs(static_cast<double>(want[i])));
      }
      EXPECT_LE(worst, 1e-5 * std::max(1.0, scale)) << (gpu ? "gpu" : "cpu") << ", chunk from " << first;
    }
  }
}

// Bits per byte of the held-out text with each window's KV rows through chunk compression
// (issue 11's quality check, on its first 4 KB): run a chunk at a time on the exact rows it
// equals the whole-window score; all chunks at 8 bits and tolerance-aware 8/4/2 bits at a
// ratio of 0.5 stay close to it.
TEST(KvQuality, ChunkCompressionOfTheHeldOutText) {
  Model model = loadModel((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  Device device(selectDevice(""), false);
  Executor ex(device, model, graph, analysis);
  CausalLm lm(ex, graph, analysis);
  std::ifstream in(test::sharedModels() / "bytellama-heldout.txt", std::ios::binary);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  text.resize(std::min<size_t>(text.size(), 4096));
  const double whole = bitsPerByte(lm, text, 256).bitsPerByte;
  KvQualityOptions opt;
  opt.window = 256;
  const double fp32 = compressedBitsPerByte(ex, lm, text, opt).bitsPerByte;
  opt.mode = KvMode::Bits8;
  const double eight = compressedBitsPerByte(ex, lm, text, opt).bitsPerByte;
  opt.mode = KvMode::Tolerance;
  const double tolerant = compressedBitsPerByte(ex, lm, text, opt).bitsPerByte;
  std::printf("bits per byte, 4 KB, window 256: whole %.5f, chunked fp32 %.5f, 8-bit %.5f, ratio 0.5 %.5f\n", whole, fp32,
              eight, tolerant);
  EXPECT_NEAR(fp32, whole, 1e-4);
  EXPECT_NEAR(eight, fp32, 0.01 * fp32);
  EXPECT_LE(tolerant, 1.01 * eight);
}

// Calibration runs the recomputes and reads it times and leaves no files behind (what the
// lines say about speed is the bench's business, not a test's).
TEST(Calibrate, LinesThroughMeasuredLoads) {
  Model model = loadModel((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  runFusePasses(model, {});
  LoadedLm fused(std::move(model));
  const auto dir = test::tempDir("tl_calibrate");
  const LoadCosts c = calibrateLoad(fused.ex, fused.lm, dir.string(), 16);
  for (double x : {c.recompute.fixed, c.recompute.per, c.read.fixed, c.read.per}) EXPECT_TRUE(std::isfinite(x));
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  EXPECT_THROW(calibrateLoad(fused.ex, fused.lm, (dir / "missing").string(), 16), Error);
}

}  // namespace
}  // namespace tl
