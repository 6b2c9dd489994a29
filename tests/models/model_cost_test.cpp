// What a run must compute and move (bench/model_cost.h), checked by hand on a model
// small enough to count and on the shared llama-past.
#include <gtest/gtest.h>

#include "bench/model_cost.h"
#include "cli/test_support.h"
#include "fuse/fuse.h"
#include "lm/loaded_lm.h"
#include "onnx/model_io.h"
#include "quant/quantize_model.h"

namespace tl {
namespace {

struct Loaded {
  Model model;
  std::unique_ptr<Graph> graph;
  ShapeAnalysis analysis;
  explicit Loaded(const std::string& path) : model(loadModel(path)) {
    graph = std::make_unique<Graph>(model.proto.graph());
    analysis = inferShapes(model, *graph);
  }
  RunCost cost(int64_t n, int64_t past, const std::vector<CachePair>& caches,
               const std::vector<std::pair<std::string, std::vector<int64_t>>>& inputs) const {
    return runCost(*graph, analysis, bindFromInputs(analysis, inputs), caches);
  }
};

TEST(ModelCost, TinyModelCountedByHand) {
  Loaded m(test::writeTinyCacheModel(test::tempDir("cost_tiny")).string());
  // table 10 x 8 and W 8 x 10 in float32, the Reshape's int64[4] target.
  EXPECT_EQ(modelWeightBytes(*m.graph, m.analysis), 320 + 320 + 32);
  const std::vector<CachePair> caches{{"past_key_values.0.key", "present.0.key"}};
  auto at = [&](int64_t n, int64_t past) {
    return m.cost(n, past, caches, {{"input_ids", {1, n}}, {"past_key_values.0.key", {1, 2, past, 4}}});
  };
  const RunCost c = at(3, 5);
  EXPECT_EQ(c.weightBytes, 3 * 8 * 4 + 320 + 32);  // three rows gathered, W read once
  EXPECT_EQ(c.flops, 2.0 * 3 * 8 * 10);            // [1,3,8] x [8,10]
  EXPECT_EQ(c.cacheReadBytes, 8 * 2 * 4 * 4);      // present: past 5 + 3 new rows of 2 x 4 floats
  EXPECT_EQ(c.cacheWrittenBytes, 3 * 2 * 4 * 4);   // the new rows
  EXPECT_EQ(c.bytes(), c.weightBytes + c.cacheReadBytes + c.cacheWrittenBytes);
  // 20 tokens gather from a 10-row table: a perfect engine reads it once.
  EXPECT_EQ(at(20, 0).weightBytes, 320 + 320 + 32);
}

TEST(ModelCost, LlamaDecodeStep) {
  Loaded m((test::sharedModels() / "llama-past/model.onnx").string());
  // hidden 64, 2 layers, 4 heads of 16, 2 KV heads, FFN 128, vocab 256 (../shared/models/README.md)
  std::vector<CachePair> caches;
  std::vector<std::pair<std::string, std::vector<int64_t>>> inputs;
  const int64_t past = 9;
  inputs = {{"input_ids", {1, 1}}, {"attention_mask", {1, past + 1}}, {"position_ids", {1, 1}}};
  for (int layer = 0; layer < 2; ++layer)
    for (const char* kv : {"key", "value"}) {
      const std::string i = std::to_string(layer) + "." + kv;
      caches.push_back({"past_key_values." + i, "present." + i});
      inputs.push_back({"past_key_values." + i, {1, 2, past, 16}});
    }
  const RunCost c = m.cost(1, past, caches, inputs);
  const double perLayer = 64 * 64 + 64 * 32 + 64 * 32 + 64 * 64 + 3 * 64 * 128;  // q k v o, gate up down
  // lm_head, one embedding row, and the norms' weight: the exporter keeps one initializer
  // for the five (all ones in a random-init model).
  const double matrices = 2 * perLayer + 64 * 256 + 64 + 64;
  EXPECT_GE(c.weightBytes, 4 * matrices);
  EXPECT_LT(c.weightBytes, 4 * matrices + 1024);  // plus the graph's scalar constants (eps, scales, rotary)
  const double row = 2 * 2 * 2 * 16 * 4;  // layers x (k, v) x KV heads x head dim x 4 bytes
  EXPECT_EQ(c.cacheReadBytes, (past + 1) * row);
  EXPECT_EQ(c.cacheWrittenBytes, row);
  // Weights: 2 per parameter per token. Attention: QK^T and PV, 2 x heads x head dim per
  // position attended, per layer. Rotary: its position x inv_freq MatMul, 8 frequencies.
  const double weightFlops = 2.0 * (2 * perLayer + 64 * 256);
  EXPECT_EQ(c.flops, weightFlops + 2 * 2 * 2.0 * 4 * 16 * (past + 1) + 2 * 8);
}

// FLOPs come from the op table: a fused model (tl.Attention, tl.MatMul with merged, split
// and GLU outputs, tl.RoPE from positions) counts what its export counts, at a prefill and
// a decode step, for every causal LM of both exporters; quantized (tl.QMatMul) too.
TEST(ModelCost, FusedModelCountsTheExportsFlops) {
  int compared = 0;
  for (const auto& dir : test::modelDirs()) {
    const std::string path = (dir / "model.onnx").string();
    Model probe = loadModel(path);
    bool causal = false;
    for (const auto& in : probe.proto.graph().input()) causal = causal || in.name() == "input_ids";
    bool logits = false;
    for (const auto& out : probe.proto.graph().output()) logits = logits || out.name() == "logits";
    causal = causal && logits;
    if (!causal) continue;
    LoadedLm plain(path);
    const bool past = !plain.lm.cacheInputs().empty();
    std::vector<CachePair> caches;
    for (size_t i = 0; i < plain.lm.cacheInputs().size(); ++i)
      caches.push_back({plain.lm.cacheInputs()[i], plain.lm.cacheOutputs()[i]});
    for (bool quantized : {false, true}) {
      if (quantized && dir.filename() != "llama-past") continue;
      Model fused = loadModel(path);
      if (quantized) quantizeModel(fused, QuantOptions{}, false);
      runFusePasses(fused, {});
      Graph graph(fused.proto.graph());
      const ShapeAnalysis analysis = inferShapes(fused, graph);
      for (const auto& [tokens, depth] : std::vector<std::pair<int64_t, int64_t>>{{7, 0}, {1, 9}}) {
        if (!past && depth) continue;
        const auto inputs = plain.lm.inputShapes(tokens, depth);
        const double want = runCost(plain.graph, plain.analysis, bindFromInputs(plain.analysis, inputs), caches).flops;
        const double got = runCost(graph, analysis, bindFromInputs(analysis, inputs), caches).flops;
        EXPECT_GT(want, 0) << dir;
        EXPECT_DOUBLE_EQ(got, want) << dir << (quantized ? " quantized" : "") << ", " << tokens << " tokens after " << depth;
        ++compared;
      }
    }
  }
  EXPECT_GE(compared, 20);
}

}  // namespace
}  // namespace tl
