#include "onnx/model_io.h"

#include <fstream>
#include <iostream>
#include <iterator>

#include <unistd.h>

#include "cli/error.h"

namespace tl {
namespace {

std::string readAll(const std::string& path) {
  if (path == "-") {
    std::string data((std::istreambuf_iterator<char>(std::cin)), std::istreambuf_iterator<char>());
    return data;
  }
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error("is a directory, not an ONNX model");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open file");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

template <typename Fn>
void forEachTensor(onnx::GraphProto& g, Fn fn) {
  for (auto& t : *g.mutable_initializer()) fn(t);
  for (auto& n : *g.mutable_node()) {
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_t()) fn(*a.mutable_t());
      for (auto& t : *a.mutable_tensors()) fn(t);
      if (a.has_g()) forEachTensor(*a.mutable_g(), fn);
      for (auto& sg : *a.mutable_graphs()) forEachTensor(sg, fn);
    }
  }
}

}  // namespace

Model loadModel(const std::string& path) {
  Model m;
  m.displayName = path == "-" ? "<stdin>" : path;
  m.baseDir = path == "-" ? std::filesystem::current_path() : std::filesystem::absolute(path).parent_path();
  std::string data = readAll(path);
  if (data.empty()) throw Error("not a valid ONNX model: the input is empty");
  if (!m.proto.ParseFromString(data)) throw Error("not a valid ONNX model (truncated or corrupt protobuf)");
  // A cut at a field boundary can still parse; a model always has a graph and opsets.
  if (!m.proto.has_graph()) throw Error("not a valid ONNX model: it has no graph (truncated?)");
  if (m.proto.ir_version() >= 3 && m.proto.opset_import_size() == 0)
    throw Error("not a valid ONNX model: it imports no opset (truncated?)");
  return m;
}

std::string serializeModel(const Model& model, const std::filesystem::path& outDir) {
  namespace fs = std::filesystem;
  const fs::path target = fs::absolute(outDir).lexically_normal();
  const fs::path base = fs::absolute(model.baseDir).lexically_normal();
  std::string out;
  if (target == base) {
    if (!model.proto.SerializeToString(&out)) throw Error("cannot serialize the model (over 2 GiB?)");
    return out;
  }
  onnx::ModelProto copy = model.proto;
  forEachTensor(*copy.mutable_graph(), [&](onnx::TensorProto& t) {
    if (t.data_location() != onnx::TensorProto::EXTERNAL) return;
    for (auto& kv : *t.mutable_external_data()) {
      if (kv.key() != "location") continue;
      fs::path abs = (base / kv.value()).lexically_normal();
      fs::path rel = abs.lexically_relative(target);
      kv.set_value(rel.empty() ? abs.string() : rel.string());
    }
  });
  if (!copy.SerializeToString(&out)) throw Error("cannot serialize the model (over 2 GiB?)");
  return out;
}

ExternalDataWriter::ExternalDataWriter(std::filesystem::path file, std::string location)
    : file_(std::move(file)), location_(std::move(location)) {
  tmp_ = file_;
  tmp_ += ".tmp" + std::to_string(getpid());
  out_.open(tmp_, std::ios::binary | std::ios::trunc);
  if (!out_) throw Error("cannot write '" + file_.string() + "'");
}

ExternalDataWriter::~ExternalDataWriter() {
  if (committed_) return;
  out_.close();
  std::error_code ec;
  std::filesystem::remove(tmp_, ec);
}

void ExternalDataWriter::store(onnx::TensorProto& t, const void* data, size_t bytes) {
  out_.write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
  if (!out_) throw Error("cannot write '" + file_.string() + "' (disk full?)");
  t.clear_raw_data();
  t.clear_external_data();
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  for (auto [key, value] : {std::pair<const char*, std::string>{"location", location_},
                            {"offset", std::to_string(offset_)},
                            {"length", std::to_string(bytes)}}) {
    auto* kv = t.add_external_data();
    kv->set_key(key);
    kv->set_value(value);
  }
  offset_ += bytes;
}

void ExternalDataWriter::commit() {
  out_.close();
  if (!out_) throw Error("cannot write '" + file_.string() + "'");
  std::error_code ec;
  std::filesystem::rename(tmp_, file_, ec);
  if (ec) throw Error("cannot write '" + file_.string() + "': " + ec.message());
  committed_ = true;
}

std::unique_ptr<ExternalDataWriter> externalDataBeside(const std::string& modelFile, const Model& model) {
  const auto file = std::filesystem::absolute(modelFile + ".data").lexically_normal();
  return std::make_unique<ExternalDataWriter>(
      file, file.lexically_relative(std::filesystem::absolute(model.baseDir).lexically_normal()).string());
}

int moveToExternalData(Model& model, ExternalDataWriter& data, size_t minBytes) {
  int moved = 0;
  for (auto& t : *model.proto.mutable_graph()->mutable_initializer()) {
    if (t.data_location() == onnx::TensorProto::EXTERNAL || t.raw_data().size() < minBytes) continue;
    const std::string bytes = t.raw_data();
    data.store(t, bytes.data(), bytes.size());
    ++moved;
  }
  return moved;
}

bool hasExternalData(const onnx::ModelProto& proto) {
  for (const auto& t : proto.graph().initializer())
    if (t.data_location() == onnx::TensorProto::EXTERNAL) return true;
  return false;
}

bool isOnnxDomain(const std::string& domain) { return domain.empty() || domain == "ai.onnx"; }

int64_t onnxOpset(const onnx::ModelProto& proto) {
  for (const auto& o : proto.opset_import())
    if (isOnnxDomain(o.domain())) return o.version();
  return 0;
}

}  // namespace tl
