// tl-quant: group-wise weight quantization.
//
//   tl-quant model.onnx --scheme e0m4 --group 128 -o model.q.onnx
//   tl-quant model.onnx --report [--report-format md|csv|json]
#include <iostream>
#include <memory>

#include "cli/error.h"
#include "cli/tool.h"
#include "graph/graph.h"
#include "onnx/model_io.h"
#include "quant/quantize_model.h"

int main(int argc, char** argv) {
  tl::Tool tool("tl-quant",
                "tl-quant: quantize MatMul weights (constant 2-D initializers) group-wise along K and\n"
                "rewrite those MatMuls into tl.QMatMul (docs/ops.md). Schemes: e0m4 (Transformer-Lite's\n"
                "FP4), int4 (asymmetric min/max), w4a8 (int4 weights, int8 activations), q8, q3h (3.5 bits).\n"
                "The lm_head (the MatMul producing a graph output) goes to q8 unless --lm-head-scheme\n"
                "says otherwise (float keeps it; --quantize-lm-head: the model's scheme): its errors reach\n"
                "the logits directly, and q8 keeps them close at a quarter of fp32's bytes (docs/tl-quant.md).\n"
                "--format ort keeps it in float (MatMulNBits is int4). Embeddings are Gathers and stay.\n\n"
                "  tl-quant model.onnx --scheme e0m4 --group 128 -o model.q.onnx\n"
                "  tl-quant model.onnx --scheme e0m4 --lm-head-scheme float -o model.q.onnx\n"
                "  tl-quant model.onnx --skip mlp --emit text     (each weight's scheme, or why it is kept)\n"
                "  tl-quant model.onnx --report --report-format md\n");
  std::string scheme = "e0m4", format = "md";
  tl::QuantOptions opt;
  bool report = false;
  auto& app = tool.app();
  app.add_option("--scheme", scheme, "e0m4, int4, w4a8, q8 or q3h")->capture_default_str();
  app.add_option("--group", opt.group, "weights per group along K (a ragged last group is exact)")->capture_default_str();
  app.add_option("--skip", opt.skip, "keep weights whose name or node contains this (repeatable)");
  app.add_option("--only", opt.only, "quantize exactly this weight (repeatable); it must be a constant MatMul weight");
  app.add_flag("--quantize-lm-head", opt.quantizeLmHead, "quantize the MatMul that produces the logits in --scheme");
  std::string lmHeadScheme;
  app.add_option("--lm-head-scheme", lmHeadScheme,
                 "that MatMul's scheme, or float to keep it (default: q8; float with --format ort)");
  app.add_flag("--report", report, "print the error of every scheme per weight instead of writing a model");
  app.add_option("--report-format", format, "md, csv or json")->capture_default_str();
  std::string outFormat = "tl";
  app.add_option("--format", outFormat,
                 "tl (tl.QMatMul), ort (int4 as com.microsoft.MatMulNBits, for ONNX Runtime) or dequantized "
                 "(float MatMuls with the dequantized weights: the quantization error alone)")
      ->check(CLI::IsMember({"tl", "ort", "dequantized"}))
      ->capture_default_str();
  bool external = false;
  app.add_flag("--external-data", external,
               "write the quantized weights to OUT.data beside -o OUT, not inside the model (automatic when the "
               "input keeps its weights in external data; protobuf stops at 2 GiB)");
  return tool.run(argc, argv, [&] {
    opt.scheme = tl::parseScheme(scheme);
    opt.ortFormat = outFormat == "ort";
    if (lmHeadScheme == "float" && opt.quantizeLmHead)
      throw tl::Error("--quantize-lm-head and --lm-head-scheme float contradict each other", tl::ExitCode::Usage);
    if (lmHeadScheme.empty() && !opt.quantizeLmHead && !opt.ortFormat) lmHeadScheme = "q8";
    if (!lmHeadScheme.empty() && lmHeadScheme != "float") {
      try {
        opt.lmHeadScheme = tl::parseScheme(lmHeadScheme);
      } catch (const tl::Error& e) {
        throw tl::Error(std::string("--lm-head-scheme: ") + e.what() + " or float", tl::ExitCode::Usage);
      }
    }
    opt.dequantizedFormat = outFormat == "dequantized";
    tl::checkOptions(opt);  // before reading a possibly large model
    auto fmt = tl::parseReportFormat(format);
    tl::Model model = tl::loadModel(tool.input());
    if (report) {
      tl::Graph graph(model.proto.graph());
      tool.writeOutput(tl::errorReport(model, graph, opt, fmt), false);
      return;
    }
    const bool toFile = tool.output() != "-";
    if (external && !toFile) throw tl::Error("--external-data needs -o FILE (the data goes beside it)", tl::ExitCode::Usage);
    std::unique_ptr<tl::ExternalDataWriter> data;
    if (toFile && (external || tl::hasExternalData(model.proto))) {
      data = tl::externalDataBeside(tool.output(), model);
      opt.externalData = data.get();
    }
    const bool text = tool.emit() == tl::Emit::Text;
    const auto eligible = text ? tl::findWeights(tl::Graph(model.proto.graph()), opt) : std::vector<tl::EligibleWeight>{};
    auto done = tl::quantizeModel(model, opt, true);
    if (done.empty()) throw tl::Error("no MatMul has a constant 2-D float weight to quantize");
    if (text) {
      tool.writeOutput(tl::renderQuantization("tl-quant: " + model.displayName, eligible, done), false);
      return;
    }
    std::filesystem::path outDir =
        toFile ? std::filesystem::absolute(tool.output()).parent_path() : std::filesystem::current_path();
    if (data) data->commit();
    tool.writeOutput(tl::serializeModel(model, outDir), true);
  });
}
