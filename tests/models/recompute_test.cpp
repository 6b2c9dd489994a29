// Exact recompute of a context's KV rows (issue 11, LLMS 3.3): a chunk anywhere in a
// context, recomputed from its tokens and the rows before it, equals what the prefill of
// the whole context wrote, to fp32 rounding, in both kernel families.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "cli/test_support.h"
#include "ctxswap/recompute.h"
#include "fuse/fuse.h"
#include "graph/graph.h"
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

}  // namespace
}  // namespace tl
