// tl-plan: memory planning from symbolic sizes.
//
//   tl-plan model.onnx --max-seq 2048 -o planned.onnx     the model with its memory plan
//   tl-plan model.onnx --max-seq 2048 --emit text         tensor -> buffer, arena vs naive
//   tl-plan fused.onnx --max-seq 2048 --pad 64 -o p.onnx  the KV cache in place, decode lengths in buckets
//   tl-plan fused.onnx --max-seq 2048 --kv-type f32 -o p.onnx  the in-place cache in fp32, not fp16
#include <filesystem>

#include "cli/error.h"
#include "cli/tool.h"
#include "graph/graph.h"
#include "onnx/model_io.h"
#include "plan/kv_cache.h"
#include "plan/memory_plan.h"
#include "shape/shape_inference.h"

int main(int argc, char** argv) {
  tl::Tool tool("tl-plan",
                "tl-plan: plans a model's activation memory for every length up to --max-seq\n"
                "(Transformer-Lite 2.1). Each tensor a kernel writes lives from its producer to its\n"
                "last reader; tensors whose lives do not overlap and whose byte sizes are provably\n"
                "related (a constant difference or ratio of their expressions) share a buffer, and\n"
                "the buffers lie in one arena at offsets that are expressions of the symbols. The\n"
                "plan goes into the model's metadata (tl.plan.*, docs/artifacts.md); --emit text\n"
                "prints tensor -> buffer, the arena and the naive total (every tensor its own\n"
                "buffer) as expressions and at their largest within --max-seq.\n\n"
                "KV caches (Transformer-Lite 2.3): each cache input and the graph output appending to it\n"
                "become one buffer of --max-seq tokens when tl.Attention alone reads the cache (a fused\n"
                "model); the appends (tl.KvAppend, or tl.RoPE's) write only the new tokens, so a decode\n"
                "step moves no cache bytes. --pad binds decode lengths in buckets, the padding hidden by\n"
                "the causal mask, so steps within a bucket replay their launches unchanged. In-place caches\n"
                "hold fp16 by default (half the bytes a decode step reads at depth; the graph stays fp32,\n"
                "the kernels round as they append): --kv-type f32 keeps them exact.\n\n"
                "  tl-plan model.onnx --max-seq 2048 -o planned.onnx\n"
                "  tl-plan fused.onnx --max-seq 2048 --emit text | tail -5\n"
                "  tl-plan fused.onnx --max-seq 2048 --pad 64 -o planned.onnx\n");
  tl::PlanOptions opt;
  tool.app().add_option("--max-seq", opt.maxSeq, "the longest sequence the plan holds (every symbolic input dim)")
      ->capture_default_str();
  tool.app().add_option("--batch", opt.batch, "the value of the batch symbols: the first input's leading axis, and that of any input over its tokens (position_ids)")->capture_default_str();
  tool.app().add_option("--align", opt.align, "bytes between buffer starts (a power of two)")->capture_default_str();
  std::string layout = "sequence";
  int64_t pad = 1;
  tool.app()
      .add_option("--kv-layout", layout,
                   "the in-place KV cache's layout: sequence ([T, B, H, D], a run of tokens one block) or heads "
                   "([B, H, T, D], as exported)")
      ->check(CLI::IsMember({"sequence", "heads"}))
      ->capture_default_str();
  tool.app()
      .add_option("--pad", pad,
                   "bind decode lengths in buckets of this many tokens, so a step re-derives shapes and kernel "
                   "arguments only when it crosses one (1: exact lengths)")
      ->capture_default_str();
  std::string kvType;
  tool.app()
      .add_option("--kv-type", kvType,
                   "the in-place KV cache's element: f16, f32, or q8 (blocks of 32 along a head: a float scale and\n"
                   "32 int8 codes, 1.125 bytes an element; heads of multiples of 32). Default: f16 where the caches\n"
                   "are in place and every tl.Attention reads them, else f32 (--emit text says which and why)")
      ->check(CLI::IsMember({"f32", "f16", "q8"}));
  return tool.run(argc, argv, [&] {
    tl::Model model = tl::loadModel(tool.input());
    std::optional<tl::KvType> type;
    if (!kvType.empty()) type = tl::kvTypeNamed(kvType);
    const tl::KvPlan kv =
        tl::planKvCache(model, layout == "heads" ? tl::KvLayout::Heads : tl::KvLayout::Sequence, pad, type);
    if (kv.notInPlace.empty())
      for (const auto& p : kv.pairs) opt.outside.insert(p.present);
    tl::Graph graph(model.proto.graph());
    tl::ShapeAnalysis analysis = tl::inferShapes(model, graph);
    tl::MemoryPlan plan = tl::planMemory(graph, analysis, opt);
    if (tool.emit() == tl::Emit::Text) {
      tool.writeOutput(tl::renderPlan(plan, "tl-plan: " + model.displayName) + tl::renderKvPlan(kv, opt.maxSeq), false);
      return;
    }
    tl::annotateModel(model.proto, analysis);
    tl::annotatePlan(model.proto, plan);
    tl::annotateKvPlan(model.proto, kv);
    std::filesystem::path outDir =
        tool.output() == "-" ? std::filesystem::current_path() : std::filesystem::absolute(tool.output()).parent_path();
    tool.writeOutput(tl::serializeModel(model, outDir), true);
  });
}
