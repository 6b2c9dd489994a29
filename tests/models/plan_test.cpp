// Memory plans (plan/memory_plan.h) of every model: at bindings across the lengths
// --max-seq allows, a buffer holds each of its tensors, tensors sharing a buffer never
// live at once, buffers do not overlap in the arena, and the arena is at most a third
// of every tensor in its own buffer.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include <fstream>
#include <random>

#include <onnx/defs/parser.h>

#include "cli/error.h"
#include "cli/test_support.h"
#include "graph/graph.h"
#include "onnx/model_io.h"
#include "ops/op_table.h"
#include "check/reference_check.h"
#include "graph/attributes.h"
#include "fuse/fuse.h"
#include "plan/kv_cache.h"
#include "plan/memory_plan.h"
#include "quant/quantize_model.h"
#include "lm/batch.h"
#include "lm/causal_lm.h"
#include "lm/speculative.h"
#include "runtime/executor.h"
#include "shape/shape_inference.h"

namespace tl {
namespace {

class PlanModels : public ::testing::TestWithParam<std::filesystem::path> {};

TEST_P(PlanModels, BuffersHoldTheirTensorsAndNeverOverlap) {
  Model model = loadModel((GetParam() / "model.onnx").string());
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  PlanOptions opt;
  opt.maxSeq = 512;
  const MemoryPlan plan = planMemory(graph, analysis, opt);
  ASSERT_FALSE(plan.tensors.empty());
  for (size_t b = 0; b < plan.buffers.size(); ++b) {
    const auto& ts = plan.buffers[b].tensors;
    for (size_t i = 0; i < ts.size(); ++i) {
      EXPECT_EQ(plan.tensors[ts[i]].buffer, static_cast<int>(b));
      for (size_t j = i + 1; j < ts.size(); ++j) {
        const auto &x = plan.tensors[ts[i]], &y = plan.tensors[ts[j]];
        EXPECT_TRUE(x.last < y.first || y.last < x.first) << x.name << " and " << y.name << " share b" << b;
      }
    }
  }
  // Bindings inside the plan's region: the worst one and smaller lengths.
  std::mt19937 rng(7);
  std::vector<SymbolValues> bindings{plan.worst};
  for (int k = 0; k < 8; ++k) {
    SymbolValues v = plan.worst;
    for (auto& [s, x] : v) x = std::uniform_int_distribution<int64_t>(1, x)(rng);
    bindings.push_back(v);
  }
  for (const auto& v : bindings) {
    int64_t end = 0;
    for (const auto& b : plan.buffers) {
      const int64_t at = b.offset.evaluate(v), size = b.bytes.evaluate(v);
      EXPECT_GE(at, end);
      EXPECT_EQ(at % opt.align, 0);
      end = at + size;
      EXPECT_LE((size + opt.align - 1) / opt.align * opt.align, b.capacity);
      for (int t : b.tensors) EXPECT_LE(plan.tensors[t].bytes.evaluate(v), size) << plan.tensors[t].name;
    }
  }
  EXPECT_LE(plan.arenaBytes * 3, plan.naiveBytes) << plan.arena.str() << " against " << plan.naive.str();
}

// The planned model, plain and fused, runs from its arena (tl-run reads the plan) and
// still matches the references, in both kernel families. Fused, its caches are in place,
// in both layouts and both element types: the data sets' past goes into the cache and
// present comes out of it. fp16 caches (the default) and 8-bit ones round every key and
// value, and the rounding grows through the layers: compared as tl-run --check does
// (atol, rtol 1e-2 for fp16; atol 0.25, rtol 0.1 for q8).
void checkPlanned(const std::filesystem::path& dir, bool fused, KvLayout layout = KvLayout::Sequence,
                  std::optional<KvType> type = std::nullopt) {
  Model model = loadModel((dir / "model.onnx").string());
  if (fused) runFusePasses(model, {});
  KvType held = KvType::F32;
  {
    const KvPlan kv = planKvCache(model, layout, 1, type);
    EXPECT_TRUE(!fused || kv.notInPlace.empty()) << kv.notInPlace;
    if (kv.notInPlace.empty() && !kv.pairs.empty()) held = kv.type;
    EXPECT_EQ(held, type.value_or(fused && !kv.pairs.empty() ? KvType::F16 : KvType::F32))
        << "the default: fp16 where the caches are in place";
    Graph graph(model.proto.graph());
    ShapeAnalysis analysis = inferShapes(model, graph);
    PlanOptions opt;
    opt.maxSeq = 512;
    for (const auto& set : loadDataSets(dir))  // the batch the data sets run (a plan holds one)
      opt.batch = std::max(opt.batch, set.inputs.at(0).dims.at(0));
    if (kv.notInPlace.empty())
      for (const auto& p : kv.pairs) opt.outside.insert(p.present);
    annotatePlan(model.proto, planMemory(graph, analysis, opt));
    annotateKvPlan(model.proto, kv);
  }
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  test::onBothFamilies(model, [&](Executor& ex, bool gpu) {
    EXPECT_EQ(ex.kvType(), held);
    const double atol = held == KvType::Q8 ? 0.25 : held == KvType::F16 ? 1e-2 : 1e-4;
    const double rtol = held == KvType::Q8 ? 0.1 : held == KvType::F16 ? 1e-2 : 1e-3;
    for (const auto& set : loadDataSets(dir)) {
      std::vector<std::string> names;
      for (const auto& t : set.outputs) names.push_back(t.name);
      auto got = ex.run(set.inputs, names);
      ASSERT_EQ(got.size(), set.outputs.size());
      for (size_t j = 0; j < got.size(); ++j) {
        auto c = compareTensors(got[j], set.outputs[j], atol, rtol);
        EXPECT_TRUE(c.pass()) << set.dir << " " << c.name << (gpu ? " gpu" : " cpu") << (fused ? " fused" : "")
                              << ": max abs " << c.maxAbs;
      }
    }
  });
}

TEST_P(PlanModels, PlannedModelMatchesReferenceOutputs) { checkPlanned(GetParam(), false); }
TEST_P(PlanModels, FusedPlannedModelMatchesReferenceOutputs) {
  checkPlanned(GetParam(), true, KvLayout::Sequence);
  checkPlanned(GetParam(), true, KvLayout::Heads);
  const std::string name = GetParam().filename().string();
  if (name.size() > 5 && name.compare(name.size() - 5, 5, "-past") == 0) {  // --kv-type takes models with caches
    checkPlanned(GetParam(), true, KvLayout::Sequence, KvType::F32);
    // 8-bit caches keep blocks of 32 along a head: bytellama's heads are 32 wide, the tiny
    // models' 16 (refused, naming the cache).
    Model model = loadModel((GetParam() / "model.onnx").string());
    runFusePasses(model, {});
    Graph graph(model.proto.graph());
    const ShapeAnalysis analysis = inferShapes(model, graph);
    const int64_t D = *analysis.symbols.resolve(analysis.at("past_key_values.0.key").dims[3]).constValue();
    if (D % 32 == 0) {
      checkPlanned(GetParam(), true, KvLayout::Sequence, KvType::Q8);
      checkPlanned(GetParam(), true, KvLayout::Heads, KvType::Q8);
    } else {
      try {
        planKvCache(model, KvLayout::Sequence, 1, KvType::Q8);
        ADD_FAILURE() << "--kv-type q8 planned heads of " << D;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("--kv-type q8 keeps blocks of 32 along a head, and cache input 'past_key_values."),
                  std::string::npos)
            << e.what();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllModels, PlanModels, ::testing::ValuesIn(test::modelDirs()),
                         [](const auto& info) { return test::modelTestName(info.param); });

// Decoding through the plan's arena (views that a decode step makes of Transposes
// included) gives the unplanned model's greedy text; a longer run is refused.
TEST(TlPlanCli, PlannedGenerationEqualsUnplanned) {
  const auto model = test::sourceDir() / "models/bytellama-past/model.onnx";
  const auto dir = test::tempDir("tl_plan_generate");
  const auto planned = dir / "planned.onnx";
  ASSERT_EQ(test::runTool("tl-plan", model.string() + " --max-seq 128 -o " + planned.string()).exitCode, 0);
  auto a = test::runTool("tl-run", model.string() + " --generate --prompt 'def ' -n 100");
  auto b = test::runTool("tl-run", planned.string() + " --generate --prompt 'def ' -n 100");
  ASSERT_EQ(a.exitCode, 0) << a.err;
  ASSERT_EQ(b.exitCode, 0) << b.err;
  EXPECT_EQ(a.out, b.out);
  auto c = test::runTool("tl-run", planned.string() + " --generate --prompt 'def ' -n 200");
  EXPECT_EQ(c.exitCode, 1);
  EXPECT_NE(c.err.find("longer than the plan's --max-seq 128"), std::string::npos) << c.err;
}

// The planned arena is allocated whole when the executor is built, and memoryUse
// reports it with the activations; the cache, preallocated for --max-seq, apart.
TEST(PlanMemory, ArenaAllocatedAtStartAndReported) {
  Model model = loadModel((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  PlanOptions opt;
  opt.maxSeq = 128;
  const MemoryPlan plan = planMemory(graph, analysis, opt);
  annotatePlan(model.proto, plan);
  Device device(selectDevice(""), false);
  Executor ex(device, model, graph, analysis);
  EXPECT_GE(ex.memoryUse({}).activations, static_cast<size_t>(plan.allocated));
  CausalLm lm(ex, graph, analysis);
  lm.step({'d', 'e', 'f'});
  lm.step({' '});
  std::vector<std::string> cache = lm.cacheInputs();
  cache.insert(cache.end(), lm.cacheOutputs().begin(), lm.cacheOutputs().end());
  const auto m = ex.memoryUse(cache);
  // 4 layers, k and v, 4 heads x 32 dims, float: present.* sized for the plan's 128
  // tokens from the start, so the cache never reallocates as it grows.
  EXPECT_GE(m.cache, static_cast<size_t>(4 * 2 * 4 * 32 * 128 * 4));
  EXPECT_GT(m.constants, 0u);
}

// The batch is the leading symbol of an input of rank 2 or more: an export with a fixed
// batch ([1, N] ids) has none, and its N is a sequence, bounded by --max-seq (planned
// here at 32 tokens: 10 logits of 4 bytes each), not taken for the batch (1).
TEST(PlanMemory, FixedBatchLeavesTheSequenceBounded) {
  Model model = loadModel(test::writeTinyCacheModel(test::tempDir("plan_fixed_batch")).string());
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  PlanOptions opt;
  opt.maxSeq = 32;
  const MemoryPlan plan = planMemory(graph, analysis, opt);
  int logits = -1;
  for (const auto& t : plan.tensors)
    if (t.name == "logits") logits = t.buffer;
  ASSERT_GE(logits, 0);
  EXPECT_GE(plan.buffers[static_cast<size_t>(logits)].capacity, 10 * 4 * 32);
}

// The plan of a model written in ONNX's text form, at --max-seq 16.
MemoryPlan planOf(const Model& model, int64_t maxSeq = 16) {
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  PlanOptions opt;
  opt.maxSeq = maxSeq;
  return planMemory(graph, analysis, opt);
}
MemoryPlan planOf(const char* text) {
  Model model;
  EXPECT_TRUE(onnx::OnnxParser::Parse(model.proto, text).IsOK());
  return planOf(model);
}

// A tensor lives from the schedule position of the node that writes it to that of its last
// reader, positions counted from 0 (tl-plan --emit text prints them); a graph output is
// read one past the last node, after the run.
TEST(PlanMemory, LiveRangesAreSchedulePositions) {
  const MemoryPlan plan = planOf(R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[N, 4] x) => (float[N, 4] y) {
  a = Relu (x)
  b = Neg (a)
  c = Exp (b)
  d = Add (a, c)
  y = Sigmoid (d)
}
)ONNX");
  std::map<std::string, std::pair<int, int>> live;
  for (const auto& t : plan.tensors) live[t.name] = {t.first, t.last};
  const std::map<std::string, std::pair<int, int>> want = {
      {"a", {0, 3}}, {"b", {1, 2}}, {"c", {2, 3}}, {"d", {3, 4}}, {"y", {4, 5}}};
  EXPECT_EQ(live, want);
}

// Buffers are shared between tensors whose sizes are provably proportional (16 N and 32 N
// bytes, N a sequence: the one grows), not only between sizes a constant apart: a's
// buffer, free once b is written, takes c; b's takes y. Two buffers.
TEST(PlanMemory, ProportionalSizesShareABuffer) {
  const MemoryPlan plan = planOf(R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, N, 4] x) => (float[1, N, 8] y) {
  a = Relu (x)
  b = Concat <axis = 2> (a, a)
  c = Relu (b)
  y = Relu (c)
}
)ONNX");
  std::map<std::string, int> buffer;
  for (const auto& t : plan.tensors) buffer[t.name] = t.buffer;
  EXPECT_EQ(plan.buffers.size(), 2u);
  EXPECT_EQ(buffer["c"], buffer["a"]);
  EXPECT_EQ(buffer["y"], buffer["b"]);
}

// An empty tensor (a Slice of no rows) beside ones that grow with N: no growing size is
// provably proportional to zero, so none shares with it by proportion, and no buffer
// ends smaller than a tensor it holds, at any length.
TEST(PlanMemory, EmptyTensorsLeaveEveryBufferWhole) {
  const MemoryPlan plan = planOf(R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, N, 4] x) => (float[1, N, 4] y, float[1, 0, 4] f) {
  zero = Constant <value = int64[1] {0}> ()
  one = Constant <value = int64[1] {1}> ()
  a = Relu (x)
  b = Relu (a)
  e = Slice (b, zero, zero, one)
  f = Relu (e)
  c = Relu (b)
  y = Relu (c)
}
)ONNX");
  bool empty = false;
  for (const auto& t : plan.tensors) {
    empty = empty || (t.name == "e" && t.bytes.evaluate({{"N", 5}}) == 0);
    for (int64_t n = 1; n <= 16; ++n)
      EXPECT_GE(plan.buffers.at(static_cast<size_t>(t.buffer)).bytes.evaluate({{"N", n}}), t.bytes.evaluate({{"N", n}}))
          << t.name << " at N = " << n;
  }
  EXPECT_TRUE(empty);
}

// Planning a planned model again (tl-plan over its own output) replaces its plan: each
// tl.plan key once, holding the new plan's options, where a reader taking the first of
// two would take the old plan's.
TEST(PlanMemory, PlanningAgainReplacesThePlan) {
  Model model;
  ASSERT_TRUE(onnx::OnnxParser::Parse(model.proto, R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, N, 4] x) => (float[1, N, 4] y) {
  a = Relu (x)
  y = Relu (a)
}
)ONNX").IsOK());
  for (int64_t maxSeq : {16, 32}) annotatePlan(model.proto, planOf(model, maxSeq));
  std::map<std::string, int> count;
  std::string options;
  for (const auto& p : model.proto.metadata_props()) {
    ++count[p.key()];
    if (p.key() == "tl.plan.options") options = p.value();
  }
  EXPECT_EQ(count.count("tl.plan.tensors"), 1u);
  for (const auto& [key, n] : count) {
    if (key.rfind("tl.plan.", 0) == 0) {
      EXPECT_EQ(n, 1) << key;
    }
  }
  EXPECT_NE(options.find("max_seq=32"), std::string::npos) << options;
}

// A tensor of sub-byte elements takes whole bytes: N x 9 int4 values are 4.5 N bytes,
// rounded up (5 at N = 1, 14 at N = 3), as float ones take 36 N.
TEST(PlanMemory, SubByteTensorsTakeWholeBytes) {
  const MemoryPlan plan = planOf(R"ONNX(
<ir_version: 10, opset_import: ["" : 21]>
g (float[1, N, 9] x) => (float[1, N, 9] y) {
  q = Cast <to = 22> (x)
  y = Cast <to = 1> (q)
}
)ONNX");
  std::map<std::string, const PlannedTensor*> byName;
  for (const auto& t : plan.tensors) byName[t.name] = &t;
  ASSERT_TRUE(byName.count("q") && byName.count("y"));
  EXPECT_EQ(byName["q"]->bytes.evaluate({{"N", 1}}), 5);
  EXPECT_EQ(byName["q"]->bytes.evaluate({{"N", 3}}), 14);
  EXPECT_EQ(byName["y"]->bytes.evaluate({{"N", 3}}), 108);
}

// A string tensor has no size to plan: refused by name, not planned as 0 bytes (which
// would let every later tensor share its buffer).
TEST(PlanMemory, SizelessTensorsRefusedByName) {
  try {
    planOf(R"ONNX(
<ir_version: 10, opset_import: ["" : 21]>
g (float[1, N, 9] x) => (float[1, N, 9] y) {
  s = Cast <to = 8> (x)
  y = Cast <to = 1> (s)
}
)ONNX");
    ADD_FAILURE() << "a string tensor planned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 's' has dtype string, which has no size"), std::string::npos)
        << e.what();
  }
}

// Only the batch (the first input's leading symbol) is left to the batch size: another
// input's leading symbol is a length like any other, held to --max-seq (16 here), and the
// arena is sized there: a's 4 floats of a batch of 1, x's and z's 16 x 8.
TEST(PlanMemory, OnlyTheBatchSymbolEscapesMaxSeq) {
  const MemoryPlan plan = planOf(R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[B, 4] a, float[N, 8] x) => (float[B, 4] y, float[N, 8] z) {
  y = Relu (a)
  z = Relu (x)
}
)ONNX");
  EXPECT_EQ(plan.worst.at("N"), 16);
  EXPECT_EQ(plan.worst.at("B"), 1);
}

// An input over input_ids' own tokens leads with a batch of its own (the dynamo exporter
// gives position_ids [s44, N] a symbol apart from input_ids' [s10, N]): P is held at
// --batch, where [N, 8] above is a length.
TEST(PlanMemory, AnInputOverTheTokensLeadsWithABatch) {
  const MemoryPlan plan = planOf(R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[B, N] x, float[P, N] p) => (float[B, N] y, float[P, N] z) {
  y = Relu (x)
  z = Relu (p)
}
)ONNX");
  EXPECT_EQ(plan.worst.at("N"), 16);
  EXPECT_EQ(plan.worst.at("P"), 1);
}

// An input nothing reads (an ALiBi model's position_ids, which exporters keep) bounds
// nothing: its K is no third sequence symbol.
TEST(PlanMemory, AnInputNothingReadsBoundsNothing) {
  const MemoryPlan plan = planOf(R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[B, N] x, float[B, M] w, float[B, K] u) => (float[B, N] y, float[B, M] v) {
  y = Relu (x)
  v = Relu (w)
}
)ONNX");
  EXPECT_EQ(plan.worst.at("N"), 16);
  EXPECT_EQ(plan.worst.at("M"), 16);
  EXPECT_EQ(plan.worst.count("K"), 0u);
}

// Two lengths besides the batch are planned (the arena's worst case is searched over
// both); a third is refused, naming the count.
TEST(PlanMemory, AtMostTwoSequenceSymbols) {
  const MemoryPlan plan = planOf(R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[B, 4] a, float[N, 8] x, float[M, 8] w) => (float[B, 4] y, float[N, 8] z, float[M, 8] v) {
  y = Relu (a)
  z = Relu (x)
  v = Relu (w)
}
)ONNX");
  EXPECT_EQ(plan.worst.at("N"), 16);
  EXPECT_EQ(plan.worst.at("M"), 16);
  Model three;
  ASSERT_TRUE(onnx::OnnxParser::Parse(three.proto, R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[B, 4] a, float[N, 8] x, float[M, 8] w, float[K, 8] u) => (float[B, 4] y, float[N, 8] z, float[M, 8] v, float[K, 8] t) {
  y = Relu (a)
  z = Relu (x)
  v = Relu (w)
  t = Relu (u)
}
)ONNX").IsOK());
  try {
    planOf(three);
    ADD_FAILURE() << "three sequence symbols planned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("3 sequence symbols"), std::string::npos) << e.what();
  }
}

// The arena's worst case is searched at the longest second length only where every size
// grows with it: x's rows from M on (N - M of them) shrink as M grows, so such a model is
// refused, not planned short of what a smaller M needs.
TEST(PlanMemory, SizesThatShrinkWithTheSecondLengthRefused) {
  try {
    planOf(R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[B, 4] a, float[N, 8] x, float[M, 8] w) => (float[B, 4] z, float[M, 8] v, float[?, 8] y) {
  z = Relu (a)
  v = Relu (w)
  m = Shape <end = 1> (w)
  e = Constant <value = int64[1] {1000000}> ()
  r = Slice (x, m, e)
  y = Relu (r)
}
)ONNX");
    ADD_FAILURE() << "a size shrinking with a length planned";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("the activations' size"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("does not provably grow with M"), std::string::npos) << e.what();
  }
}

TEST(TlPlanCli, TextArtifactAndBadInput) {
  const auto model = test::sharedModels() / "llama-past/model.onnx";
  auto r = test::runTool("tl-plan", model.string() + " --max-seq 2048 --emit text");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("arena/naive"), std::string::npos) << r.out;
  {  // the summary's figures agree: arena / naive is the ratio printed, all finite
    const size_t a = r.out.find(": arena "), n = r.out.find(", naive "), q = r.out.find("arena/naive ");
    ASSERT_TRUE(a != std::string::npos && n != std::string::npos && q != std::string::npos) << r.out;
    const double arena = std::stod(r.out.substr(a + 8)), naive = std::stod(r.out.substr(n + 8)),
                 ratio = std::stod(r.out.substr(q + 12));
    EXPECT_TRUE(std::isfinite(arena) && std::isfinite(naive) && arena > 0 && naive >= arena) << r.out;
    EXPECT_NEAR(arena / naive, ratio, 0.001) << r.out;
  }
  const auto dir = test::tempDir("tl_plan_cli");
  r = test::runTool("tl-plan", model.string() + " --max-seq 1024 -o " + (dir / "planned.onnx").string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  Model planned = loadModel((dir / "planned.onnx").string());
  bool found = false;
  for (const auto& p : planned.proto.metadata_props()) found = found || p.key() == "tl.plan.tensors";
  EXPECT_TRUE(found);
  r = test::runTool("tl-run", (dir / "planned.onnx").string() + " --check " + (test::sharedModels() / "llama-past").string());
  EXPECT_EQ(r.exitCode, 0) << r.err;
  // attention_mask is N + past: 2 tokens at the least, over a max-seq of 1.
  r = test::runTool("tl-plan", model.string() + " --max-seq 1 --emit text");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("tl-plan: error: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("attention_mask"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  r = test::runTool("tl-plan", model.string() + " --max-seq 0 --emit text");
  EXPECT_EQ(r.exitCode, 2) << r.err;
  r = test::runTool("tl-plan", model.string() + " --max-seq 64 --batch 0 --emit text");
  EXPECT_EQ(r.exitCode, 2) << r.err;
  EXPECT_NE(r.err.find("--batch must be at least 1"), std::string::npos) << r.err;
  r = test::runTool("tl-plan", model.string() + " --max-seq 64 --align 48 --emit text");
  EXPECT_EQ(r.exitCode, 2) << r.err;
  EXPECT_NE(r.err.find("--align must be a power of two"), std::string::npos) << r.err;
  r = test::runTool("tl-plan", "- --max-seq 64 --emit text", model.string());  // stdin
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("N=63"), std::string::npos) << r.out;
  r = test::runTool("tl-plan", "--help");
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_NE(r.out.find("--max-seq"), std::string::npos);
  EXPECT_EQ(test::runTool("tl-plan", "--version").exitCode, 0);
}

}  // namespace
}  // namespace tl

namespace tl {
namespace {

// bytellama (e0m4 where `quantized`) fused and planned with its caches in place, decode
// lengths in buckets of `pad`.
Model inPlaceBytellama(int64_t pad, KvLayout layout, int64_t maxSeq, bool quantized = false,
                       const std::vector<std::string>& passes = {}, std::optional<KvType> type = std::nullopt,
                       int64_t batch = 1) {
  Model model = loadModel((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  if (quantized) quantizeModel(model, QuantOptions{}, false);
  runFusePasses(model, passes);
  const KvPlan kv = planKvCache(model, layout, pad, type);
  EXPECT_TRUE(kv.notInPlace.empty()) << kv.notInPlace;
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  PlanOptions opt;
  opt.maxSeq = maxSeq;
  opt.batch = batch;
  for (const auto& p : kv.pairs) opt.outside.insert(p.present);
  annotatePlan(model.proto, planMemory(graph, analysis, opt));
  annotateKvPlan(model.proto, kv);
  return model;
}

// A model's executor and causal LM on the default device, in one kernel family (`emulate`:
// the GPU family with the tensor cores' PTX emulated, Device::setMmaEmulation).
// A decoder in one kernel family; the CPU family keeps A in fp32 (its AVX2 decode rows
// would round it to int8: MatMulExtras' and QMatMulKernel's to check), the reference the
// GPU family's outputs and tokens are held to.
struct Decoder {
  static Device& family(Device& d, bool gpu, bool emulate) {
    d.setGpuKernels(gpu);
    d.setMmaEmulation(emulate);
    if (!gpu) d.setInt8Activations(false);
    return d;
  }
  Decoder(Model& m, bool gpu, bool profiling, bool emulate = false)
      : graph(m.proto.graph()), analysis(inferShapes(m, graph)), device(selectDevice(""), profiling),
        ex(family(device, gpu, emulate), m, graph, analysis), lm(ex, graph, analysis) {}
  Graph graph;
  ShapeAnalysis analysis;
  Device device;
  Executor ex;
  CausalLm lm;
};

// Greedy tokens after "def "; from step `plainFrom` on without command buffers. `ahead`:
// all but the last step a step ahead (CausalLm::generateGreedy), the last step by step.
std::vector<int64_t> greedy(Model& model, int64_t n, bool gpu, int64_t* replays = nullptr, int64_t plainFrom = -1,
                            bool ahead = false) {
  Decoder d(model, gpu, false);
  CausalLm& lm = d.lm;
  std::vector<int64_t> out;
  int64_t next = lm.stepGreedy({'d', 'e', 'f', ' '});
  if (ahead) {
    out.push_back(next);
    const auto rest = lm.generateGreedy(next, n - 2);
    out.insert(out.end(), rest.begin(), rest.end());
    out.push_back(lm.stepGreedy({out.back()}));
  }
  for (int64_t i = 0; i < n && !ahead; ++i) {
    if (i == plainFrom) d.device.setCommandBuffers(false);
    out.push_back(next);
    next = lm.stepGreedy({next});
  }
  if (replays) *replays = d.ex.replays();
  return out;
}

// bytellama-past fused, its caches planned in place (tl-plan's in_attention marks on its
// tl.RoPEs, or none with `unmark`), memory-planned: for each tl.RoPE that appends to the
// caches, the schedule step of its outputs' last reader and the last steps of its inputs
// 0, 3 and 6 (q, k, v; a view's bytes are its root's).
struct RopeLives {
  std::string name;
  int attention;
  std::vector<int> inputs;
};
std::vector<RopeLives> ropeInputLives(bool unmark) {
  Model model = loadModel((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  runFusePasses(model, {});
  const KvPlan kv = planKvCache(model, KvLayout::Sequence, 16, std::nullopt);
  annotateKvPlan(model.proto, kv);
  if (unmark)
    for (auto& n : *model.proto.mutable_graph()->mutable_node()) {
      auto* attrs = n.mutable_attribute();
      for (int i = attrs->size() - 1; i >= 0; --i)
        if (attrs->Get(i).name() == "in_attention") attrs->DeleteSubrange(i, 1);
    }
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  PlanOptions opt;
  opt.maxSeq = 256;
  for (const auto& p : kv.pairs) opt.outside.insert(p.present);
  const MemoryPlan plan = planMemory(graph, analysis, opt);
  std::map<std::string, int> last;
  for (const auto& t : plan.tensors) {
    last[t.name] = t.last;
    EXPECT_FALSE(opt.outside.count(t.name)) << t.name << ": the caches in place live outside the arena";
  }
  std::map<size_t, int> step;  // schedule positions, as the plan counts them
  int at = 0;
  for (size_t i : graph.topoOrder())
    if (analysis.nodeClass[i] == NodeClass::Tensor) step[i] = at++;
  std::vector<RopeLives> out;
  for (size_t i = 0; i < graph.nodeCount(); ++i) {
    const auto& n = graph.node(i);
    if (n.op_type() != "RoPE" || n.input_size() < 7) continue;
    EXPECT_EQ(attrInt(n, "in_attention").value_or(0), unmark ? 0 : 1) << n.name();
    RopeLives r{n.name(), -1, {}};
    for (size_t j = 0; j < graph.nodeCount(); ++j)
      for (const auto& in : graph.node(j).input())
        for (const auto& o : n.output())
          if (!o.empty() && in == o && step.count(j)) r.attention = std::max(r.attention, step[j]);
    EXPECT_GT(r.attention, step[i]) << n.name();
    for (int k : {0, 3, 6}) {
      const std::string root = producerThroughViews(graph, n.input(k), analysis.dtypeOf()).tensors.back();
      EXPECT_TRUE(last.count(root)) << root << " is not planned";
      r.inputs.push_back(last.count(root) ? last[root] : -1);
    }
    out.push_back(r);
  }
  return out;
}

// A tl.RoPE marked in_attention launches nothing: its attention reads the RoPE's inputs
// (q, k, v: inputs 0, 3, 6) at its own step, so the memory plan keeps each alive until
// then, or another tensor could take its bytes before the attention reads them. The
// caches in place (present.*) are none of the arena's.
TEST(PlanMemory, InAttentionRopeInputsLiveUntilTheAttention) {
  const auto ropes = ropeInputLives(false);
  EXPECT_EQ(ropes.size(), 4u);  // one a layer
  for (const auto& r : ropes)
    for (size_t k = 0; k < r.inputs.size(); ++k) EXPECT_GE(r.inputs[k], r.attention) << r.name << " input " << k;
}

// ... and an unmarked one (its own launch) reads them itself: they end at the RoPE, before
// the attention, and their bytes are free for the tensors between.
TEST(PlanMemory, UnmarkedRopeInputsEndAtTheRope) {
  const auto ropes = ropeInputLives(true);
  EXPECT_EQ(ropes.size(), 4u);
  for (const auto& r : ropes)
    for (size_t k = 0; k < r.inputs.size(); ++k) EXPECT_LT(r.inputs[k], r.attention) << r.name << " input " << k;
}

// Greedy decoding through the in-place cache, 500 tokens across buckets of 64 (and exact
// lengths, and the heads-first layout), equals decoding through the copying path, byte for
// byte, in both kernel families; steps within a bucket replay their launches.
TEST(KvInPlace, GreedyGenerationEqualsTheCopyingPath) {
  Model plain = loadModel((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  runFusePasses(plain, {});
  for (bool gpu : {false, true}) {
    const auto want = greedy(plain, 500, gpu);
    for (auto [pad, layout] : {std::pair{int64_t{64}, KvLayout::Sequence}, {int64_t{1}, KvLayout::Sequence}, {int64_t{64}, KvLayout::Heads}}) {
      Model planned = inPlaceBytellama(pad, layout, 600);
      int64_t replays = 0;
      EXPECT_EQ(greedy(planned, 500, gpu, &replays), want) << "pad " << pad << (gpu ? " gpu" : " cpu");
      if (pad > 1) {
        EXPECT_GE(replays, 500 - 500 / pad - 2) << "pad " << pad;
      }
    }
  }
}

// A speculative check (lm/speculative.h) of as many rows as the decode kernels take
// (Executor::decodeRows: 8 in the CPU family, 4 in the GPU's) gives each row the logits a
// step of that row alone gives it: bit for bit in the CPU family. The GPU family's lone
// steps take its one-row GEMVs (qgemv_wide_*, *_m1), whose sums round apart from the
// check's (qgemv16_*: 1e-3 apart here), so there a check's greedy tokens can leave plain
// decoding's at a near tie. One row more takes the prefill kernels: checkDraftRows refuses
// the draft that would need it.
TEST(KvInPlace, ACheckOfTheDecodeRowsGivesEachRowItsLoneLogits) {
  for (bool gpu : {false, true}) {
    Model m = inPlaceBytellama(64, KvLayout::Sequence, 256, true);
    Graph graph(m.proto.graph());
    ShapeAnalysis analysis = inferShapes(m, graph);
    Device device(selectDevice(""), false);
    device.setGpuKernels(gpu);
    Executor ex(device, m, graph, analysis);
    CausalLm lm(ex, graph, analysis);
    const int64_t rows = lm.decodeRows(), vocab = lm.vocab();
    ASSERT_EQ(rows, gpu ? kGpuDecodeRows : kCpuDecodeRows);
    const std::string text = "x, y):\n    return";
    const std::vector<int64_t> feed(text.begin(), text.begin() + rows + 1);
    lm.step({'d', 'e', 'f', ' ', 'f', '('});
    const int64_t base = lm.length();
    const auto attention = [&] {
      for (const auto& l : ex.explain())
        if (l.op == "tl.Attention") return l.kernel;
      return std::string();
    };
    const auto together = lm.step(std::vector<int64_t>(feed.begin(), feed.begin() + rows), true);
    const std::string decodeKernel = attention();
    lm.rewind(base);
    for (int64_t i = 0; i < rows; ++i) {
      const auto alone = lm.step({feed[static_cast<size_t>(i)]});
      ASSERT_EQ(attention(), decodeKernel) << (gpu ? "gpu" : "cpu");
      for (int64_t v = 0; v < vocab; ++v) {
        const float a = alone[static_cast<size_t>(v)], b = together[static_cast<size_t>(i * vocab + v)];
        if (gpu) ASSERT_NEAR(a, b, 5e-3f) << "gpu: row " << i << ", logit " << v;
        else ASSERT_EQ(a, b) << "cpu: row " << i << ", logit " << v;
      }
    }
    lm.rewind(base);
    lm.step(feed, true);
    EXPECT_NE(attention(), decodeKernel) << (gpu ? "gpu" : "cpu") << ": " << rows + 1 << " rows";
    EXPECT_NO_THROW(checkDraftRows(lm, rows - 1));
    try {
      checkDraftRows(lm, rows);
      ADD_FAILURE() << "a draft of " << rows << " taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::Usage);
      const std::string why = gpu ? "decode kernels take 4" : "--draft-max must be 1 to 7";  // (the flag's own range)
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

// 8-bit caches (--kv-type q8): every kernel that writes them (the RoPE's, the decode and
// prefill attention's own appends, tl.KvAppend) and reads them (the CPU rows, the GPU
// family's decode rows, the grouped-query one past 256 keys) keeps bytellama's greedy
// tokens, 300 of them, those of its fp32 caches, in both kernel families and layouts.
// A prompt in two chunks too, without tl-fuse's rope-cache (so that tl.KvAppend, not the
// RoPE, writes the new rows): the second chunk's rows go after the first's, past a cache
// that is no longer empty.
TEST(KvInPlace, EightBitCachesKeepTheGreedyTokens) {
  Model exact = inPlaceBytellama(64, KvLayout::Sequence, 400, false, {}, KvType::F32);
  const auto want = greedy(exact, 300, false);
  std::vector<std::string> appending;  // every pass but rope-cache
  for (const auto& p : fusePasses())
    if (p.name != "rope-cache") appending.push_back(p.name);
  auto chunked = [](Model& m, bool gpu) {
    Decoder d(m, gpu, false);
    d.lm.stepGreedy({'d', 'e', 'f', ' '});
    std::vector<int64_t> out{d.lm.stepGreedy({'a', 'd', 'd', '('})};
    for (int i = 0; i < 30; ++i) out.push_back(d.lm.stepGreedy({out.back()}));
    return out;
  };
  const auto wantChunked = chunked(exact, false);
  for (KvLayout layout : {KvLayout::Sequence, KvLayout::Heads}) {
    Model eight = inPlaceBytellama(64, layout, 400, false, {}, KvType::Q8);
    Model appended = inPlaceBytellama(64, layout, 400, false, appending, KvType::Q8);
    for (bool gpu : {false, true}) {
      EXPECT_EQ(greedy(eight, 300, gpu), want) << (gpu ? "gpu" : "cpu");
      EXPECT_EQ(chunked(appended, gpu), wantChunked) << (gpu ? "gpu" : "cpu") << ", tl.KvAppend, the prompt in two chunks";
    }
  }
}

// Batched decoding (lm/batch.h): seven prompts through five batch rows, joining as rows
// free up and leaving after their own lengths, each sequence picking its greedy token
// from its logits, get the tokens each gets alone (CausalLm, batch 1), byte for byte: in
// the CPU family with A in fp32 and rounded to int8, both cache layouts, fp16 and 8-bit
// caches (copyCacheRow moves rows in each). Five rows: past the 4 that any run's rows
// take as decode GEMVs. Again through generateGreedy between joins and leaves (the
// argmax on the device, fed to the next step there, each step enqueued ahead).
TEST(BatchDecode, EverySequenceGetsItsLoneGreedyTokens) {
  const std::vector<std::string> prompts{"def ", "import os\n", "class Tree:\n    def ", "for i in range(",
                                         "x = [", "# read the file\nwith open(", "    return "};
  auto lengths = [](size_t i) { return static_cast<int64_t>(20 + 9 * i); };
  auto argmax = [](const std::vector<float>& v) {
    return static_cast<int64_t>(std::max_element(v.begin(), v.end()) - v.begin());
  };
  for (auto [layout, type] : {std::pair{KvLayout::Sequence, KvType::F16}, {KvLayout::Heads, KvType::F16},
                              {KvLayout::Sequence, KvType::Q8}}) {
    Model alone = inPlaceBytellama(64, layout, 400, true, {}, type);
    Model batched = inPlaceBytellama(64, layout, 400, true, {}, type, 5);
    for (bool int8 : {false, true}) {
      std::vector<std::vector<int64_t>> want;
      std::vector<std::vector<std::vector<float>>> wantRows;  // each sequence's cache rows at its end
      // A sequence's rows in batch row `row` (Executor::readCacheRow), all of them, and past its
      // first 5 tokens, which must be those rows' tail.
      auto rowsOf = [](Decoder& d, int64_t row, int64_t tokens) {
        std::vector<std::vector<float>> out;
        for (const auto& name : d.lm.cacheInputs()) {
          out.push_back(d.ex.readCacheRow(name, row, 0, tokens));
          const std::vector<float> tail = d.ex.readCacheRow(name, row, 5, tokens - 5);
          const size_t heads = d.ex.shape(name)[1], size = out.back().size() / heads / static_cast<size_t>(tokens);
          for (size_t h = 0; h < heads; ++h)
            EXPECT_TRUE(std::equal(tail.begin() + h * (tokens - 5) * size, tail.begin() + (h + 1) * (tokens - 5) * size,
                                   out.back().begin() + (h * tokens + 5) * size))
                << name << ", head " << h;
        }
        return out;
      };
      {
        Decoder d(alone, false, false);
        d.device.setInt8Activations(int8);
        for (size_t i = 0; i < prompts.size(); ++i) {
          d.lm.reset();
          std::vector<int64_t> out{d.lm.stepGreedy(byteTokens(prompts[i]))};
          while (static_cast<int64_t>(out.size()) < lengths(i)) out.push_back(d.lm.stepGreedy({out.back()}));
          want.push_back(out);
          wantRows.push_back(rowsOf(d, 0, d.lm.length()));
        }
      }
      for (bool pipelined : {false, true}) {
        Decoder d(batched, false, false);
        d.device.setInt8Activations(int8);
        BatchDecoder batch(d.ex, d.lm);
        ASSERT_EQ(batch.capacity(), 5);
        std::vector<std::vector<int64_t>> got(prompts.size());
        std::map<int64_t, size_t> running;  // id -> prompt
        size_t joined = 0;
        while (joined < prompts.size() || !running.empty()) {
          while (joined < prompts.size() && batch.active() < batch.capacity()) {
            std::vector<float> logits;
            running[batch.join(byteTokens(prompts[joined]), &logits)] = joined;
            got[joined++].push_back(argmax(logits));
          }
          std::map<int64_t, int64_t> next;
          int64_t steps = lengths(prompts.size());  // until the first sequence is done
          for (auto [id, i] : running) {
            next[id] = got[i].back();
            steps = std::min(steps, lengths(i) - static_cast<int64_t>(got[i].size()));
          }
          if (pipelined) {
            for (const auto& [id, tokens] : batch.generateGreedy(next, steps))
              got[running[id]].insert(got[running[id]].end(), tokens.begin(), tokens.end());
          } else {
            for (const auto& [id, logits] : batch.step(next)) got[running[id]].push_back(argmax(logits));
          }
          for (auto it = running.begin(); it != running.end();) {
            if (static_cast<int64_t>(got[it->second].size()) < lengths(it->second)) {
              ++it;
              continue;
            }
            EXPECT_EQ(rowsOf(d, batch.row(it->first), batch.length(it->first)), wantRows[it->second])
                << "prompt " << it->second << "'s cache rows";
            batch.leave(it->first);
            it = running.erase(it);
          }
        }
        for (size_t i = 0; i < prompts.size(); ++i)
          EXPECT_EQ(got[i], want[i]) << "prompt " << i << (layout == KvLayout::Heads ? ", heads first" : "")
                                     << (type == KvType::Q8 ? ", q8" : "") << (int8 ? ", int8 A" : "")
                                     << (pipelined ? ", generateGreedy" : "");
      }
    }
  }
}

// Task chains (runtime/executor/chains.cpp): in the CPU family a replayed decode step runs
// its launches of one-item work-groups (the decode GEMVs of float and e0m4 weights, the
// decode attention) as one kernel of one task, over bucket crossings, with each launch's
// tokens; the profile names the chain; the GPU family's step has none; a deep one runs on
// several work-groups.
TEST(TaskChains, ReplayedStepsRunAsOneKernelWithTheSameTokens) {
  if (selectDevice("").isGpu) GTEST_SKIP() << "the CPU family's task kernels are built on CPU devices only";
  for (bool quantized : {false, true}) {
    Model planned = inPlaceBytellama(64, KvLayout::Sequence, 400, quantized);
    auto tokens = [&](bool gpu, bool chains, bool profiling, size_t* launches, size_t* chained) {
      Decoder d(planned, gpu, profiling);
      d.device.setTaskChains(chains);
      std::vector<int64_t> out{d.lm.stepGreedy({'d', 'e', 'f', ' '})};
      for (int i = 0; i < 150; ++i) out.push_back(d.lm.stepGreedy({out.back()}));
      *launches = d.ex.explain().size();
      *chained = 0;
      for (const auto& c : d.ex.chains()) *chained += c.last - c.first + 1;
      if (profiling) {
        EXPECT_EQ(chains && !gpu, std::any_of(d.ex.profile().begin(), d.ex.profile().end(),
                                              [](const OpTime& t) { return t.op == "TaskChain"; }));
      }
      return out;
    };
    size_t launches = 0, chained = 0;
    const auto want = tokens(false, false, false, &launches, &chained);
    EXPECT_EQ(chained, 0u);
    EXPECT_EQ(tokens(false, true, false, &launches, &chained), want) << (quantized ? "e0m4" : "fp32");
    EXPECT_EQ(chained, launches) << "every launch of a bytellama decode step is a CPU task";
    EXPECT_EQ(tokens(false, true, true, &launches, &chained), want) << "profiled";
    tokens(true, true, false, &launches, &chained);
    EXPECT_EQ(chained, 0u) << "GPU family";
  }
  // Past kCpuChainSpread's work (e0m4: from a bucket of 640 keys) a chain runs on a work-group
  // a compute unit, its GEMVs split as many ways, with the same tokens.
  Model deep = inPlaceBytellama(64, KvLayout::Sequence, 1024, true);
  auto longRun = [&](bool chains, size_t* groups) {
    Decoder d(deep, false, false);
    d.device.setTaskChains(chains);
    std::vector<int64_t> out{d.lm.stepGreedy({'d', 'e', 'f', ' '})};
    for (int i = 0; i < 780; ++i) out.push_back(d.lm.stepGreedy({out.back()}));
    *groups = 0;
    for (const auto& c : d.ex.chains()) *groups = std::max(*groups, c.groups);
    return out;
  };
  size_t groups = 0;
  const auto want = longRun(false, &groups);
  EXPECT_EQ(longRun(true, &groups), want);
  if (selectDevice("").computeUnits > 1) {
    EXPECT_GT(groups, 1u) << "the last bucket's chain";
  }
}

// Greedy generation with each step's token moved to the next step's input on the device,
// the next step enqueued before the host reads the token (CausalLm::generateGreedy), gives
// the tokens of a step-by-step decode, over bucket crossings, in both kernel families.
TEST(KvInPlace, GenerationAheadOfTheTokensEqualsStepByStep) {
  Model planned = inPlaceBytellama(64, KvLayout::Sequence, 400);
  for (bool gpu : {false, true}) {
    int64_t replays = 0;
    EXPECT_EQ(greedy(planned, 300, gpu, &replays, -1, true), greedy(planned, 300, gpu)) << (gpu ? "gpu" : "cpu");
    EXPECT_GE(replays, 290) << "replayed steps";
  }
}

// Command buffers turned off between steps (tl-bench's --no-command-buffers on a warm
// executor): the steps go on launch by launch, with the same tokens, and the command
// buffer recorded before is released at the end.
TEST(KvInPlace, CommandBuffersTurnedOffBetweenSteps) {
  Model planned = inPlaceBytellama(64, KvLayout::Sequence, 256);
  EXPECT_EQ(greedy(planned, 40, false, nullptr, 20), greedy(planned, 40, false));
}

// A decode attention over splits of the keys launches no merge: over 2 to 4 splits the
// o-projection's one-row GEMV merges them as it reads them (tl-fuse's merge-attention marks
// it, runtime/lower/matmul.cpp reads the mark), over more the grouped-query kernel's last
// work-group of each kv head does (attention_gqa_f32's `merged`), where
// attention_combine_f32 did. bytellama e0m4, fused (its caches copied: lengths exact),
// teacher-forced over 300 tokens: in the GPU family the attention launches once a layer
// at 128 keys and more, and every step's logits equal the CPU family's within fp32
// tolerance. The same steps hand each layer's second RMSNorm on from the
// attention's output GEMV to the gate/up GEMV (matmul.cpp's normHandoff); the first stays
// in the QKV GEMV, as the down projection (688 wide) takes no 32-code row that hands.
// Three times: as fused; with a merging GEMV moved to the file's first node (ONNX files
// list nodes in order; tl takes any order, and a merging reader's index is then 0); and
// that, with the last layer's GEMV unmarked, whose attention must then merge its own
// splits (node 0's mark is not its reader's).
TEST(KvInPlace, DecodeGemvMergesTheAttentionSplits) {
  Model fused = loadModel((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  quantizeModel(fused, QuantOptions{}, false);
  runFusePasses(fused, {});
  for (int variant : {0, 1, 2}) {
    SCOPED_TRACE(variant == 0 ? "as fused" : variant == 1 ? "a merging GEMV first in the file" : "... and the last one unmarked");
    Model model = fused;
    auto* nodes = model.proto.mutable_graph()->mutable_node();
    if (variant >= 1) {
      int at = 0;
      while (at < nodes->size() && !attrInt(nodes->Get(at), "merge_attention").value_or(0)) ++at;
      ASSERT_LT(at, nodes->size());
      for (; at > 0; --at) nodes->SwapElements(at, at - 1);
    }
    if (variant == 2) {
      int last = nodes->size() - 1;
      while (last > 0 && !attrInt(nodes->Get(last), "merge_attention").value_or(0)) --last;
      ASSERT_GT(last, 0);
      auto* attrs = nodes->Mutable(last)->mutable_attribute();
      for (int i = 0; i < attrs->size(); ++i)
        if (attrs->Get(i).name() == "merge_attention") attrs->Mutable(i)->set_i(0);
    }
    Decoder gpu(model, true, true), cpu(model, false, false);
    int64_t layers = 0;
    for (const auto& n : gpu.graph.proto().node()) layers += n.domain() == "tl" && n.op_type() == "Attention";
    ASSERT_GT(layers, 0);
    std::mt19937 rng(5);
    int64_t merged = 0, selfMerged = 0;
    for (int64_t step = 0; step < 300; ++step) {
      const std::vector<int64_t> token = {static_cast<int64_t>(rng() % 256)};
      const std::vector<float> want = cpu.lm.step(token), got = gpu.lm.step(token);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << "step " << step << " logit " << i;
      int64_t attentions = 0, combines = 0;
      for (const auto& t : gpu.ex.profile()) {
        attentions += t.op == "Attention";
        combines += t.kernel == "attention_combine_f32";
      }
      if (step == 0 || step == 299) {
        int64_t handed = 0;
        for (const auto& l : gpu.ex.explain()) handed += l.why.find("RMSNorm handed on") != std::string::npos;
        EXPECT_EQ(handed, layers) << "step " << step;
      }
      const int64_t keys = step + 1;
      if (keys >= 128 && keys <= 256) {  // the unmarked layer's splits merged by attention_combine_f32
        const int64_t unmarked = variant == 2;
        EXPECT_EQ(attentions, layers + unmarked) << "keys " << keys;
        EXPECT_EQ(combines, unmarked) << "keys " << keys;
        merged += attentions == layers + unmarked && combines == unmarked;
      } else if (keys > 256) {
        EXPECT_EQ(attentions, layers) << "keys " << keys;
        EXPECT_EQ(combines, 0) << "keys " << keys;
        selfMerged += attentions == layers && combines == 0;
      }
    }
    EXPECT_EQ(merged, 129);
    EXPECT_EQ(selfMerged, 44);
  }
}

// A layer's attention output also a graph output (a user exposing it to look at): outside
// the plan, it takes a buffer of its own, and the GPU family's decode steps equal those of
// the model without it (the executor built, its kernels looked up, with it exposed).
TEST(KvInPlace, AttentionOutputAlsoAGraphOutput) {
  Model planned = inPlaceBytellama(64, KvLayout::Sequence, 256, true), exposed = planned;
  auto* g = exposed.proto.mutable_graph();
  std::string name;
  for (const auto& n : g->node())
    if (name.empty() && n.domain() == "tl" && n.op_type() == "Attention") name = n.output(0);
  ASSERT_FALSE(name.empty());
  g->add_output()->set_name(name);
  Decoder plain(planned, true, false), seen(exposed, true, false);
  std::mt19937 rng(9);
  for (int64_t step = 0; step < 4; ++step) {
    const std::vector<int64_t> token = {static_cast<int64_t>(rng() % 256)};
    const std::vector<float> want = plain.lm.step(token), got = seen.lm.step(token);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], 1e-5) << "step " << step << " logit " << i;
  }
}

// A prefill step launches no more kernels a layer than a decode step (issue 27): the
// prefill GEMMs (gemm.cl, the codes' and the float weights') do the norm and the GLU as the
// GPU's GEMVs do, the GPU's prefill attention (attention_flash_f32 here, heads of 32) does
// the RoPE's work as its decode kernels do, also beside the tensor cores' int8 tiles
// (emulated: the third family), and tl-fuse's rope-bshd left no Transpose to copy (where
// the tensor-core attention takes the heads, the q/k/v projection's store does it:
// AttentionKernel.RopeEpilogueOfTheQkvGemm). CPUs take their own prefill rows
// (qgemm_cpu_*, gemm_cpu_f32, attention_cpu_f32; the QKV projection's RoPE row doing the
// RoPE's work in its store), which a GPU does not build (its CPU family runs the portable
// rows, uncounted). bytellama fp32 and e0m4, fused
// and planned (in place), a 9-token prompt then 3 decode steps: the same greedy tokens in
// the CPU and GPU families.
TEST(KvInPlace, PrefillLaunchesNoMoreKernelsALayerThanDecode) {
  for (bool quantized : {false, true}) {
    Model planned = inPlaceBytellama(64, KvLayout::Sequence, 256, quantized);
    std::vector<int64_t> prompt;
    for (char c : std::string("def f(x):")) prompt.push_back(static_cast<unsigned char>(c));
    ASSERT_GT(prompt.size(), 4u);  // prefill rows, not decode ones
    const std::string scheme = quantized ? "e0m4" : "f32", gemm = quantized ? "qgemm" : "gemm";
    std::vector<int64_t> tokens[2];
    for (int family = 0; family < 3; ++family) {
      const bool gpu = family > 0;
      Decoder d(planned, gpu, true, family == 2);
      d.device.setTaskChains(false);  // lowering's launches, each profiled (a chain is one)
      auto perLayer = [&](std::set<std::string>* kernels) {
        std::map<std::string, int64_t> layers;  // "layers.3" -> launches
        for (const auto& t : d.ex.profile()) {
          const size_t at = t.node.find("layers.");
          if (at == std::string::npos) continue;
          ++layers[t.node.substr(at, t.node.find('/', at) - at)];
          if (kernels) kernels->insert(t.kernel);
        }
        return layers;
      };
      std::set<std::string> prefillKernels;
      int64_t next = d.lm.stepGreedy(prompt);
      const auto prefill = perLayer(&prefillKernels);
      std::vector<int64_t> generated = {next};
      for (int i = 0; i < 3; ++i) generated.push_back(next = d.lm.stepGreedy({next}));
      if (family < 2) tokens[family] = generated;  // (the int8 tiles round A: not the same sums)
      const auto decode = perLayer(nullptr);
      ASSERT_EQ(prefill.size(), 4u);
      const std::string where = scheme + ", family " + std::to_string(family);
      EXPECT_EQ(prefillKernels.count("copy_b32"), 0u) << where;
      // (a GPU builds no CPU family's prefill rows: there that family runs them in steps)
      if (gpu || !d.device.info().isGpu) {
        for (const auto& [layer, n] : prefill) EXPECT_LE(n, decode.at(layer)) << layer << ", " << where;
      }
      if (gpu) {
        EXPECT_EQ(prefillKernels.count("rope_kv_f32"), 0u) << where;
      }
      if (family == 2 && quantized) {
        EXPECT_EQ(prefillKernels.count("qgemm64_mma_i8_e0m4"), 1u);
      }
      if (gpu) {
        EXPECT_EQ(prefillKernels.count("attention_flash_f32"), 1u) << where;
      } else if (!d.device.info().isGpu) {  // the CPU prefill rows: the norms and GLUs inside the GEMMs
        EXPECT_EQ(prefillKernels.count(gemm + "_cpu_" + scheme), 1u) << where;
        EXPECT_EQ(prefillKernels.count(gemm + "_cpu_rope_" + scheme), 1u) << where;  // the RoPE in the QKV GEMM's store
        EXPECT_EQ(prefillKernels.count("attention_cpu_f32"), 1u) << where;
        EXPECT_EQ(prefillKernels.count("rmsnorm_f32"), 0u) << where;
        EXPECT_EQ(prefillKernels.count("glu_f32"), 0u) << where;
      }
    }
    EXPECT_EQ(tokens[1], tokens[0]) << scheme;
  }
}

// The rotary kernel over in-place caches with cos and sin tables rather than position ids
// (every tl-fuse pass but rope-positions): a 9-token prefill (rope_kv_f32's rotated pairs
// read each half's table entry; rope_kv_cpu_f32's tables of the token) and 40 decode steps
// give the copying path's greedy tokens, in both kernel families. The graph computes the
// tables after the q/k/v projection, so its tiles must leave the RoPE alone (ropeForGemm:
// their store read the tables before they were made).
TEST(KvInPlace, RopeTablesOverInPlaceCachesEqualTheCopyingPath) {
  std::vector<std::string> passes;
  for (const auto& p : fusePasses())
    if (p.name != "rope-positions") passes.push_back(p.name);
  Model plain = loadModel((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  runFusePasses(plain, passes);
  Model planned = inPlaceBytellama(64, KvLayout::Sequence, 256, false, passes);
  for (const auto& n : planned.proto.graph().node()) {
    if (n.op_type() == "RoPE") {
      EXPECT_EQ(attrInt(n, "positions").value_or(0), 0) << n.name();
    }
  }
  std::vector<int64_t> prompt;
  for (char c : std::string("def f(x):")) prompt.push_back(static_cast<unsigned char>(c));
  for (bool gpu : {false, true}) {
    std::vector<int64_t> tokens[2];
    for (int i = 0; i < 2; ++i) {
      Decoder d(i ? planned : plain, gpu, i == 1);
      d.device.setTaskChains(false);  // each launch profiled (a chain is one)
      int64_t next = d.lm.stepGreedy(prompt);
      for (int s = 0; s < 40; ++s) tokens[i].push_back(next = d.lm.stepGreedy({next}));
      if (i) {
        bool rope = false;
        // (a GPU builds no CPU family's kernels: there the CPU family takes rope_kv_f32)
        const bool perToken = !gpu && d.ex.kernels().has("rope_kv_cpu_f32");
        for (const auto& t : d.ex.profile()) rope |= t.kernel == (perToken ? "rope_kv_cpu_f32" : "rope_kv_f32");
        EXPECT_TRUE(rope) << (gpu ? "gpu" : "cpu");
      }
    }
    EXPECT_EQ(tokens[1], tokens[0]) << (gpu ? "gpu" : "cpu");
  }
}

// A decode step moves no cache bytes but the new token's: no copy, each layer's rotary
// kernel writes one k row and one v row per kv head into caches that exist once. Both
// kernel families, over up to 304 keys; in the GPU family the decode attention kernels do
// the rotary kernel's work (tl-plan's in_attention: no RoPE launch), over one split of the keys and
// several, and in the grouped-query kernel past 256 keys.
TEST(KvInPlace, DecodeStepMovesOnlyTheNewToken) {
  for (bool gpu : {false, true}) {
    Model model = inPlaceBytellama(16, KvLayout::Sequence, 512);
    Decoder d(model, gpu, true);
    const ShapeAnalysis& analysis = d.analysis;
    Executor& ex = d.ex;
    CausalLm& lm = d.lm;
    int64_t next = lm.stepGreedy({'d', 'e', 'f', ' '});
    int64_t caches = 0, rowBytes = 0;
    ASSERT_EQ(ex.kvType(), KvType::F16);  // tl-plan's default
    for (const auto& name : lm.cacheInputs()) {
      const auto& d = analysis.at(name).dims;
      rowBytes += *d[1].constValue() * *d[3].constValue() * 2;  // a token's row in every head
      caches += *d[1].constValue() * *d[3].constValue() * 2 * 512;
    }
    for (int step = 0; step < 300; ++step) {
      next = lm.stepGreedy({next});
      EXPECT_EQ(ex.cacheTraffic().copied, 0);
      EXPECT_EQ(ex.cacheTraffic().written, rowBytes) << "step " << step;
      for (const auto& t : ex.profile()) {
        EXPECT_TRUE(t.op != "CacheCarry" && t.op != "KvAppend") << t.op;
        EXPECT_TRUE(!gpu || t.op != "RoPE") << "step " << step << ": " << t.node;
      }
    }
    std::vector<std::string> all = lm.cacheInputs();
    all.insert(all.end(), lm.cacheOutputs().begin(), lm.cacheOutputs().end());
    EXPECT_EQ(static_cast<int64_t>(ex.memoryUse(all).cache), caches);
  }
}

// Slices that are one contiguous run of their input run no kernel: a prefix reads the
// input's buffer; a run from a later element of a kernel's output reads a sub-buffer of
// it where the offset suits the device's alignment (4096 bytes suit every device), and a
// Slice of that one too. A later run of a graph input, an unaligned one and a strided
// one copy.
TEST(Views, ContiguousSlicesRunNoKernel) {
  Model model;
  ASSERT_TRUE(onnx::OnnxParser::Parse(model.proto, R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[1, 1, 1, 204800] x, float[1, 2, 1, 102400] x2)
  => (float[1, 1, 1, 102400] y, float[1, 1, 1, 102400] z, float[1, 2, 1, 80000] w, float[1, 1, 1, 102400] u,
      float[1, 1, 1, 1024] v, float[1, 1, 1, 1023] t) {
  zero = Constant <value = int64[1] {0}> ()
  one = Constant <value = int64[1] {1}> ()
  page = Constant <value = int64[1] {1024}> ()
  two = Constant <value = int64[1] {2048}> ()
  most = Constant <value = int64[1] {80000}> ()
  half = Constant <value = int64[1] {102400}> ()
  all = Constant <value = int64[1] {204800}> ()
  last = Constant <value = int64[1] {3}> ()
  a = Slice (x, zero, half, last)
  y = Mul (a, a)
  b = Slice (x, half, all, last)
  z = Mul (b, b)
  c = Slice (x2, zero, most, last)
  w = Mul (c, c)
  sq = Mul (x, x)
  e = Slice (sq, half, all, last)
  u = Add (e, e)
  f = Slice (e, page, two, last)
  v = Add (f, f)
  g = Slice (sq, one, page, last)
  t = Add (g, g)
}
)ONNX").IsOK());
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  Device device(selectDevice(""), true);
  Executor ex(device, model, graph, analysis);
  std::vector<float> x(204800), x2(204800);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 1000) * 0.01f;
  for (size_t i = 0; i < x2.size(); ++i) x2[i] = static_cast<float>(i % 777) * 0.01f;
  auto sq = [](float f) { return f * f; };
  for (int run = 0; run < 2; ++run) {  // the second replays its launches over the same sub-buffers
    auto got = ex.run({makeTensor("x", DType::Float, {1, 1, 1, 204800}, x.data()),
                       makeTensor("x2", DType::Float, {1, 2, 1, 102400}, x2.data())});
    ASSERT_EQ(got.size(), 6u);
    const auto y = got[0].toDouble(), z = got[1].toDouble(), w = got[2].toDouble();
    const auto u = got[3].toDouble(), v = got[4].toDouble(), t = got[5].toDouble();
    for (size_t i = 0; i < 102400; i += 97) {
      EXPECT_FLOAT_EQ(y[i], sq(x[i]));
      EXPECT_FLOAT_EQ(z[i], sq(x[102400 + i]));
      EXPECT_FLOAT_EQ(u[i], 2 * sq(x[102400 + i]));
    }
    for (size_t i = 0; i < 160000; i += 997) EXPECT_FLOAT_EQ(w[i], sq(x2[i / 80000 * 102400 + i % 80000]));
    for (size_t i = 0; i < 1024; ++i) EXPECT_FLOAT_EQ(v[i], 2 * sq(x[102400 + 1024 + i])) << i;
    for (size_t i = 0; i < 1023; ++i) EXPECT_FLOAT_EQ(t[i], 2 * sq(x[1 + i])) << i;
    int slices = 0;
    for (const auto& p : ex.profile()) slices += p.op == "Slice" ? 1 : 0;
    EXPECT_EQ(slices, 3);  // b, c and g copy
  }
}

// tl-plan's refusals: --pad where the caches cannot be in place (not fused), a cache whose
// append is no graph output; a longer run than the plan holds is refused by tl-run.
TEST(TlPlanCli, KvCacheRefusals) {
  const auto model = test::sharedModels() / "llama-past" / "model.onnx";
  auto r = test::runTool("tl-plan", model.string() + " --max-seq 64 --pad 16 --emit text");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("--pad needs the cache in place"), std::string::npos) << r.err;
  r = test::runTool("tl-plan", model.string() + " --max-seq 64 --pad 0 --emit text");
  EXPECT_EQ(r.exitCode, 2) << r.err;
  r = test::runTool("tl-plan", model.string() + " --max-seq 64 --kv-layout diagonal --emit text");
  EXPECT_EQ(r.exitCode, 2) << r.err;
  // --kv-type: fp16 needs the caches in place (not so unfused); a model without caches
  // takes none; an element type tl-plan does not know is a usage error.
  r = test::runTool("tl-plan", model.string() + " --max-seq 64 --kv-type f16 --emit text");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("--kv-type f16 needs the caches in place, and"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  r = test::runTool("tl-plan", model.string() + " --max-seq 64 --emit text");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("copied each step as exported"), std::string::npos) << r.out;
  r = test::runTool("tl-plan", (test::sharedModels() / "llama-nopast" / "model.onnx").string() + " --max-seq 64 --kv-type f32 --emit text");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("--kv-type: the model has no KV cache"), std::string::npos) << r.err;
  r = test::runTool("tl-plan", model.string() + " --max-seq 64 --kv-type q4 --emit text");
  EXPECT_EQ(r.exitCode, 2) << r.err;
  const auto dir = test::tempDir("kv-refusals");
  const auto fused = dir / "fused.onnx", planned = dir / "planned.onnx";
  ASSERT_EQ(test::runTool("tl-fuse", (test::sourceDir() / "models/bytellama-past/model.onnx").string() + " -o " + fused.string()).exitCode, 0);
  r = test::runTool("tl-plan", fused.string() + " --max-seq 64 --pad 16 -o " + planned.string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  r = test::runTool("tl-run", planned.string() + " --generate --prompt 'def ' -n 100");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("--max-seq 64"), std::string::npos) << r.err;
  // Fused, the caches go in place in fp16 by default (said, and written for tl-run, whose
  // --check then compares at 1e-2); --kv-type f32 keeps them fp32; a type tl-run does not
  // know is refused in one line.
  r = test::runTool("tl-plan", fused.string() + " --max-seq 64 --emit text");
  EXPECT_NE(r.out.find("fp16 elements"), std::string::npos) << r.out;
  const auto kvType = [](const std::filesystem::path& path) {
    const Model m = loadModel(path.string());
    for (const auto& p : m.proto.metadata_props())
      if (p.key() == "tl.plan.kv_options") return p.value().substr(p.value().find("type="));
    return std::string();
  };
  EXPECT_EQ(kvType(planned), "type=f16");
  r = test::runTool("tl-run", planned.string() + " --check " + (test::sourceDir() / "models/bytellama-past").string());
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("over atol 0.01 + rtol 0.01"), std::string::npos) << r.out;
  const auto exact = dir / "exact.onnx", unknown = dir / "unknown.onnx";
  ASSERT_EQ(test::runTool("tl-plan", fused.string() + " --max-seq 64 --kv-type f32 -o " + exact.string()).exitCode, 0);
  EXPECT_EQ(kvType(exact), "type=f32");
  r = test::runTool("tl-run", exact.string() + " --check " + (test::sourceDir() / "models/bytellama-past").string());
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("over atol 0.0001 + rtol 0.001"), std::string::npos) << r.out;
  // --kv-type q8: blocks of 32 along a head (bytellama's heads are 32 wide; --check's
  // default bars widen to theirs); the tiny llama's heads of 16 are refused in one line.
  const auto eight = dir / "q8.onnx";
  r = test::runTool("tl-plan", fused.string() + " --max-seq 64 --kv-type q8 --emit text");
  EXPECT_NE(r.out.find("8-bit (blocks of 32) elements"), std::string::npos) << r.out;
  ASSERT_EQ(test::runTool("tl-plan", fused.string() + " --max-seq 64 --kv-type q8 -o " + eight.string()).exitCode, 0);
  EXPECT_EQ(kvType(eight), "type=q8");
  r = test::runTool("tl-run", eight.string() + " --check " + (test::sourceDir() / "models/bytellama-past").string());
  EXPECT_EQ(r.exitCode, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("over atol 0.25 + rtol 0.1"), std::string::npos) << r.out;
  const auto tinyFused = dir / "tiny-fused.onnx";
  ASSERT_EQ(test::runTool("tl-fuse", model.string() + " -o " + tinyFused.string()).exitCode, 0);
  r = test::runTool("tl-plan", tinyFused.string() + " --max-seq 64 --kv-type q8 --emit text");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("--kv-type q8 keeps blocks of 32 along a head, and cache input 'past_key_values."), std::string::npos)
      << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  {
    Model m = loadModel(planned.string());
    for (auto& p : *m.proto.mutable_metadata_props())
      if (p.key() == "tl.plan.kv_options") p.set_value(p.value().substr(0, p.value().find("type=")) + "type=q3");
    std::ofstream(unknown, std::ios::binary) << serializeModel(m, dir);
  }
  r = test::runTool("tl-run", unknown.string() + " --generate --prompt 'def ' -n 4");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("type 'q3' is not one this tl-run reads"), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 2) << r.err;  // the device line, the error
  // A Concat appends to a cache input, but what it makes is no graph output.
  Model orphan;
  ASSERT_TRUE(onnx::OnnxParser::Parse(orphan.proto, R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[B, 2, P, 4] past, float[B, 2, N, 4] x) => (float[B, 2, N, 4] y) {
  c = Concat <axis = 2> (past, x)
  y = Identity (x)
}
)ONNX").IsOK());
  orphan.baseDir = dir;
  const auto orphanPath = dir / "orphan.onnx";
  std::ofstream(orphanPath, std::ios::binary) << serializeModel(orphan, dir);
  // Planned as exported, no cache in place, saying why (GPT-J's TorchScript export makes
  // its cache outputs from the append through further nodes); --pad and --kv-type, which
  // need the caches in place, are refused naming the append.
  r = test::runTool("tl-plan", orphanPath.string() + " --max-seq 64 --emit text");
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("kv cache: none in place (node"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("is no graph output: tl-plan cannot match the cache to an output"), std::string::npos) << r.out;
  for (const char* option : {" --pad 64", " --kv-type f16"}) {
    r = test::runTool("tl-plan", orphanPath.string() + " --max-seq 64 --emit text" + option);
    EXPECT_EQ(r.exitCode, 1) << option;
    EXPECT_NE(r.err.find("is no graph output: tl-plan cannot match the cache to an output"), std::string::npos) << r.err;
  }
}

}  // namespace
}  // namespace tl
