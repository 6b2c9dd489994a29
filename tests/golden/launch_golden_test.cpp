// The launch table (golden): what lowering makes of every model, launch by launch: each
// node's kernel variant, its grid and why, and the task chains a replay would run (tl-run
// --explain's text). A row that starts or
// stops being chosen, a grid grown, shrunk or moved, a launch added or dropped, each shows
// as a diff of tests/golden/launches.txt, also where the outputs stay right (a launch of
// twice the work-groups it needs, a prefill computing logits for every row). The outputs'
// values are RunModels', PlanModels' and the kernel tests' to check. To regenerate after an
// intended change:
//   TL_UPDATE_GOLDEN=1 build/bin/tl_model_tests --gtest_filter='LaunchGolden.*'
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "check/reference_check.h"
#include "cli/test_support.h"
#include "fuse/fuse.h"
#include "graph/graph.h"
#include "lm/causal_lm.h"
#include "onnx/model_io.h"
#include "plan/kv_cache.h"
#include "plan/memory_plan.h"
#include "quant/quant.h"
#include "quant/quantize_model.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "shape/shape_inference.h"

namespace tl {
namespace {

// The default device with what lowering reads of it pinned (compute units, for splits and
// waves; local memory and vector width, for which kernels are built; the sub-buffer
// alignment, for which Slices are views), so that the table is the same on every host PoCL
// runs on: 2 units (so that the test models' small matrices still reach the rows chosen by
// how many work-groups fill a device), 64 KiB of local memory, 8 floats a vector, 128-byte
// sub-buffers (PoCL's here). Only a CPU device's table is kept: a GPU builds other kernels
// (TL_CPU unset). The host is taken to have AVX2 (x86 since 2013: PoCL builds the CPU
// decode's int8 rows, qgemv_cpu_i8_*, only there).
std::optional<DeviceInfo> pinnedDevice() {
  DeviceInfo d = selectDevice("");
  if (d.isGpu) return std::nullopt;
  d.computeUnits = 2;
  d.localMem = std::min<size_t>(d.localMem, 64 << 10);
  d.floatWidth = 8;
  d.maxWorkGroup = std::min<size_t>(d.maxWorkGroup, 1024);
  d.subBufferAlign = std::max<size_t>(d.subBufferAlign, 128);
  return d;
}

// A past decoder fused and planned as tl-fuse and tl-plan --max-seq 64 leave it (its caches
// in place where the plan allows), `scheme` quantized first unless "".
Model plannedDecoder(const std::filesystem::path& dir, const std::string& scheme) {
  Model model = loadModel((dir / "model.onnx").string());
  if (!scheme.empty()) {
    QuantOptions q;
    q.scheme = parseScheme(scheme);
    quantizeModel(model, q, false);
  }
  runFusePasses(model, {});
  const KvPlan kv = planKvCache(model, KvLayout::Heads, 1);
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  PlanOptions opt;
  opt.maxSeq = 64;
  if (kv.notInPlace.empty())
    for (const auto& p : kv.pairs) opt.outside.insert(p.present);
  annotatePlan(model.proto, planMemory(graph, analysis, opt));
  if (kv.notInPlace.empty()) annotateKvPlan(model.proto, kv);
  return model;
}

using Note = std::function<void(const std::string&)>;

// One model's table in both kernel families: `run` feeds the executor and names each run.
std::string tableOf(Model& model, const std::string& title, const DeviceInfo& info,
                    const std::function<void(Executor&, const Graph&, const ShapeAnalysis&, const Note&)>& run) {
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  Device device(info, false);
  std::string text;
  for (bool gpu : {false, true}) {
    device.setGpuKernels(gpu);
    Executor ex(device, model, graph, analysis);
    run(ex, graph, analysis, [&](const std::string& what) {
      const auto notes = ex.explain();
      text += "== " + title + ", " + (gpu ? "GPU" : "CPU") + " family, " + what + ": " +
              std::to_string(notes.size()) + " launches\n" + explainText(notes) + chainsText(ex);
    });
  }
  return text;
}

TEST(LaunchGolden, EveryModelEachFamily) {
  const auto info = pinnedDevice();
  if (!info) GTEST_SKIP() << "the launch table is a CPU device's (PoCL's); the default device is a GPU";
  std::string text;
  // Each export as it is, on its first data set.
  for (const auto& dir : test::modelDirs()) {
    Model model = loadModel((dir / "model.onnx").string());
    const auto sets = loadDataSets(dir);
    ASSERT_FALSE(sets.empty()) << dir;
    text += tableOf(model, test::modelTestName(dir), *info, [&](Executor& ex, const Graph&, const ShapeAnalysis&,
                                                               const Note& note) {
      std::vector<std::string> names;
      for (const auto& t : sets[0].outputs) names.push_back(t.name);
      ASSERT_EQ(ex.run(sets[0].inputs, names).size(), names.size());
      note(sets[0].dir.filename().string());
    });
  }
  // Each past decoder fused and planned (and bytellama in each scheme): a prefill of 20
  // tokens, then a decode step.
  std::vector<std::pair<std::filesystem::path, std::string>> decoders;
  for (const auto& dir : test::modelDirs())
    if (test::modelTestName(dir).find("_past") != std::string::npos) decoders.emplace_back(dir, "");
  for (const char* scheme : {"e0m4", "int4", "w4a8", "q8", "q3h"})
    decoders.emplace_back(test::sourceDir() / "models/bytellama-past", scheme);
  for (const auto& [dir, scheme] : decoders) {
    Model model = plannedDecoder(dir, scheme);
    const std::string title = test::modelTestName(dir) + " fused, planned" + (scheme.empty() ? "" : ", " + scheme);
    text += tableOf(model, title, *info, [&](Executor& ex, const Graph& graph, const ShapeAnalysis& analysis,
                                             const Note& note) {
      CausalLm lm(ex, graph, analysis);
      std::vector<int64_t> prompt(20);
      for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = static_cast<int64_t>(i % 7 + 1);
      lm.step(prompt);
      note("prefill of 20");
      lm.step({3});
      note("decode step");
    });
  }
  test::expectGolden("launches.txt", text);
}

}  // namespace
}  // namespace tl
