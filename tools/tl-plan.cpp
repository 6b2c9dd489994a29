// tl-plan: memory planning from symbolic sizes.
//
//   tl-plan model.onnx --max-seq 2048 -o planned.onnx     the model with its memory plan
//   tl-plan model.onnx --max-seq 2048 --emit text         tensor -> buffer, arena vs naive
#include <filesystem>

#include "cli/error.h"
#include "cli/tool.h"
#include "graph/graph.h"
#include "onnx/model_io.h"
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
                "  tl-plan model.onnx --max-seq 2048 -o planned.onnx\n"
                "  tl-plan fused.onnx --max-seq 2048 --emit text | tail -4\n");
  tl::PlanOptions opt;
  tool.app().add_option("--max-seq", opt.maxSeq, "the longest sequence the plan holds (every symbolic input dim)")
      ->capture_default_str();
  tool.app().add_option("--batch", opt.batch, "the value of the batch symbol")->capture_default_str();
  tool.app().add_option("--align", opt.align, "bytes between buffer starts (a power of two)")->capture_default_str();
  return tool.run(argc, argv, [&] {
    tl::Model model = tl::loadModel(tool.input());
    tl::Graph graph(model.proto.graph());
    tl::ShapeAnalysis analysis = tl::inferShapes(model, graph);
    tl::MemoryPlan plan = tl::planMemory(graph, analysis, opt);
    if (tool.emit() == tl::Emit::Text) {
      tool.writeOutput(tl::renderPlan(plan, "tl-plan: " + model.displayName), false);
      return;
    }
    tl::annotateModel(model.proto, analysis);
    tl::annotatePlan(model.proto, plan);
    std::filesystem::path outDir =
        tool.output() == "-" ? std::filesystem::current_path() : std::filesystem::absolute(tool.output()).parent_path();
    tool.writeOutput(tl::serializeModel(model, outDir), true);
  });
}
