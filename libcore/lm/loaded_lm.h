// A causal LM from a file, ready on a device: the model, its graph and shapes, an
// executor and the CausalLm over it (what a tool or test that runs one LM builds).
#pragma once

#include <string>
#include <utility>

#include "graph/graph.h"
#include "lm/causal_lm.h"
#include "onnx/model_io.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "shape/shape_inference.h"

namespace tl {

struct LoadedLm {
  // deviceName: an index or name substring (selectDevice); "" the default.
  explicit LoadedLm(const std::string& path, const std::string& deviceName = "") : LoadedLm(loadModel(path), deviceName) {}
  // A model already in memory (a test's, fused or quantized first).
  explicit LoadedLm(Model m, const std::string& deviceName = "")
      : model(std::move(m)), graph(model.proto.graph()), analysis(inferShapes(model, graph)),
        device(selectDevice(deviceName), false), ex(device, model, graph, analysis), lm(ex, graph, analysis) {}
  Model model;
  Graph graph;
  ShapeAnalysis analysis;
  Device device;
  Executor ex;
  CausalLm lm;
};

}  // namespace tl
