// Quantizing a model: which MatMul weights are eligible, the rewrite into tl.QMatMul
// (docs/ops.md), and the per-weight error report (Transformer-Lite Table 2).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "onnx/model_io.h"
#include "quant/quant.h"

namespace tl {

struct QuantOptions {
  QuantScheme scheme = QuantScheme::E0M4;
  int64_t group = 128;
  std::vector<std::string> skip;  // substrings of weight or node names to keep in float
  bool quantizeLmHead = false;    // the MatMul that produces the logits
  // That MatMul in a scheme of its own (implies quantizing it), as deployments keep the
  // logits' weights at more bits than the rest (llama.cpp's output tensor type).
  std::optional<QuantScheme> lmHeadScheme;
  std::vector<std::string> only;  // when given: exactly these weights (each must be a constant MatMul weight)
  // Write int4 as ONNX Runtime's com.microsoft.MatMulNBits (its documented packing)
  // instead of tl.QMatMul, so that ONNX Runtime runs the artifact.
  bool ortFormat = false;
  // Keep MatMul and float weights, but with the dequantized values: the quantization's
  // own error, without any kernel's, for judging a quantized model's outputs.
  bool dequantizedFormat = false;
  // When set, every tensor tl-quant writes goes there instead of into the model.
  ExternalDataWriter* externalData = nullptr;
};

struct EligibleWeight {
  std::string name;     // the initializer
  std::string node;     // first MatMul using it
  int64_t K = 0, N = 0;
  std::string keptBecause;  // empty when it is quantized
  QuantScheme scheme = QuantScheme::E0M4;  // the one it is quantized in
  // Set by quantizeModel: the dequantized weight's mean absolute error, and the bytes stored.
  double mae = 0;
  int64_t storedBytes = 0;
};

// MatMuls whose B is a constant 2-D float initializer, with the reason any is kept.
std::vector<EligibleWeight> findWeights(const Graph& graph, const QuantOptions& opt);

// Throws tl::Error (one line, naming the flag) for options no model can satisfy.
void checkOptions(const QuantOptions& opt);

// Rewrites the model in place (after checkOptions); returns the weights it quantized. Progress on stderr.
// One weight at a time: its float values are read (from external data too), quantized
// and stored, so memory holds one float weight and the quantized ones (none of those
// either with opt.externalData).
std::vector<EligibleWeight> quantizeModel(Model& model, const QuantOptions& opt, bool progress);

// --emit text: a row per eligible weight (`all`, from findWeights), the scheme, error and
// bits per weight of those quantized (`done`, from quantizeModel) or why it was kept, and
// the bytes before and after.
std::string renderQuantization(const std::string& title, const std::vector<EligibleWeight>& all,
                               const std::vector<EligibleWeight>& done);

// y = x W: a one-node model with input x [M, K] (M symbolic) and constant W (row-major
// K x N), the unit that kernel tests and benchmarks quantize.
Model matmulModel(const float* w, int64_t K, int64_t N);

enum class ReportFormat { Md, Csv, Json };
ReportFormat parseReportFormat(const std::string& s);
// Mean absolute error of the dequantized weight per scheme, E0M4/INT4 ratio, bits per weight.
std::string errorReport(const Model& model, const Graph& graph, const QuantOptions& opt, ReportFormat format);

}  // namespace tl
