// Loading and saving ONNX models: files or stdin/stdout, any IR version, external data.
//
// tl never asks Debian's ONNX library (1.12, IR 8) to check or infer a model: it
// uses only the protobuf classes, so IR 10 / opset 20+ exports load as they are.
// Weights stored as external data stay where they are; when a model is written
// to another directory, their locations are rewritten relative to it.
#pragma once

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <onnx/onnx_pb.h>

namespace tl {

struct Model {
  onnx::ModelProto proto;
  std::string displayName;        // the path as given, or "<stdin>"
  std::filesystem::path baseDir;  // external data locations are relative to this
};

// Whether a domain names the ONNX standard operators ("" or "ai.onnx").
bool isOnnxDomain(const std::string& domain);

// path "-" reads stdin. Throws tl::Error for unreadable, truncated or non-ONNX input.
Model loadModel(const std::string& path);
// Serializes for writing into outDir (external data locations rewritten to stay valid).
std::string serializeModel(const Model& model, const std::filesystem::path& outDir);
// Writes tensors' bytes into one external data file as they come (so that a big
// model's weights are never all in memory, nor serialized into a protobuf, which stops
// at 2 GiB), to a temporary file that commit() renames; dropped unless committed.
class ExternalDataWriter {
 public:
  // file: where the data goes; location: how the model names it (relative to the model).
  ExternalDataWriter(std::filesystem::path file, std::string location);
  ~ExternalDataWriter();
  ExternalDataWriter(const ExternalDataWriter&) = delete;
  ExternalDataWriter& operator=(const ExternalDataWriter&) = delete;
  // Appends the bytes and points t at them (data_location EXTERNAL, no raw data).
  void store(onnx::TensorProto& t, const void* data, size_t bytes);
  void commit();

 private:
  std::filesystem::path file_, tmp_;
  std::string location_;
  std::ofstream out_;
  size_t offset_ = 0;
  bool committed_ = false;
};

// A writer of `modelFile`.data beside the model file a stage writes, its location named
// relative to the model's base directory, as every external location is until serializeModel.
std::unique_ptr<ExternalDataWriter> externalDataBeside(const std::string& modelFile, const Model& model);

// Moves initializers whose inline bytes reach `minBytes` into `data` (tl-fuse's merged
// weights, when the model keeps its others outside too). Returns how many moved.
int moveToExternalData(Model& model, ExternalDataWriter& data, size_t minBytes);

// Whether any initializer keeps its bytes in external data.
bool hasExternalData(const onnx::ModelProto& proto);

// The ai.onnx opset the model imports (0 if none).
int64_t onnxOpset(const onnx::ModelProto& proto);

}  // namespace tl
