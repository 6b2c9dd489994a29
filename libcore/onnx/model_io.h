// Loading and saving ONNX models: files or stdin/stdout, any IR version, external data.
//
// tl never asks Debian's ONNX library (1.12, IR 8) to check or infer a model: it
// uses only the protobuf classes, so IR 10 / opset 20+ exports load as they are.
// Weights stored as external data stay where they are; when a model is written
// to another directory, their locations are rewritten relative to it.
#pragma once

#include <filesystem>
#include <string>

#include <onnx/onnx_pb.h>

namespace tl {

struct Model {
  onnx::ModelProto proto;
  std::string displayName;        // the path as given, or "<stdin>"
  std::filesystem::path baseDir;  // external data locations are relative to this
};

// path "-" reads stdin. Throws tl::Error for unreadable, truncated or non-ONNX input.
Model loadModel(const std::string& path);
// Serializes for writing into outDir (external data locations rewritten to stay valid).
std::string serializeModel(const Model& model, const std::filesystem::path& outDir);
// The ai.onnx opset the model imports (0 if none).
int64_t onnxOpset(const onnx::ModelProto& proto);

}  // namespace tl
