// tl-shape: symbolic shape inference.
//
//   tl-shape model.onnx -o model.shaped.onnx      the model with every shape as an expression
//   tl-shape model.onnx --emit text               per-tensor table, symbols, summary
//   tl-shape model.onnx --emit text --bind N=7,past=11
//   cat model.onnx | tl-shape - | tl-run - ...    stdin to stdout in a pipeline
#include <iostream>

#include "cli/error.h"
#include "cli/tool.h"
#include "graph/graph.h"
#include "onnx/model_io.h"
#include "shape/binding.h"
#include "shape/report.h"
#include "ops/op_table.h"
#include "shape/shape_inference.h"

int main(int argc, char** argv) {
  tl::Tool tool("tl-shape",
                "tl-shape: symbolic shape inference for ONNX models.\n"
                "Writes the model back with every tensor's shape as an expression over the input\n"
                "symbols (value_info dim_param such as 'N + past'), the relations found between\n"
                "symbols and the value of every shape-computing tensor (metadata tl.shape.*), so\n"
                "no shape op runs at inference. --emit text prints the same as a table.\n\n"
                "  tl-shape model.onnx -o model.shaped.onnx\n"
                "  tl-shape model.onnx --emit text --bind N=7,past=11\n");
  std::string bind;
  bool listOps = false;
  tool.app().add_option("--bind", bind, "evaluate with symbol values, e.g. N=7,past=11 (implies --emit text)");
  tool.app().add_flag("--list-ops", listOps,
                      "print the operator table and exit: each op's shape rule, host evaluation, view,\n"
                      "FLOPs, device family ('shape-only': folded by tl-shape, never run) and the\n"
                      "stage after which it appears (docs/ops.md)");
  return tool.run(argc, argv, [&] {
    if (listOps) {
      std::cout << tl::formatOpTable();
      return;
    }
    tl::Model model = tl::loadModel(tool.input());
    tl::Graph graph(model.proto.graph());
    tl::ShapeAnalysis analysis = tl::inferShapes(model, graph);
    if (tool.emit() == tl::Emit::Text || !bind.empty()) {
      tl::SymbolValues values;
      if (!bind.empty()) {
        values = tl::parseBindings(bind);
        tl::checkBindings(analysis, values);
      }
      std::string title = "tl-shape: " + model.displayName + " (ir " + std::to_string(model.proto.ir_version()) +
                          ", opset " + std::to_string(tl::onnxOpset(model.proto)) + ")";
      tool.writeOutput(tl::renderShapeReport(graph, analysis, title, bind.empty() ? nullptr : &values), false);
      return;
    }
    tl::annotateModel(model.proto, analysis);
    std::filesystem::path outDir =
        tool.output() == "-" ? std::filesystem::current_path() : std::filesystem::absolute(tool.output()).parent_path();
    tool.writeOutput(tl::serializeModel(model, outDir), true);
  });
}
