#include "cli/test_support.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "cli/error.h"
#include "graph/attributes.h"
#include "graph/graph.h"
#include "shape/shape_inference.h"

namespace tl::test {

std::filesystem::path sharedModels() { return TL_SHARED_MODELS; }
std::filesystem::path sourceDir() { return TL_SOURCE_DIR; }

std::filesystem::path tempDir(const std::string& name) {
  // One per process, removed when it exits: ctest runs a suite's tests in parallel
  // processes, and one emptying a shared folder while another wrote there failed its set-up.
  struct Made {
    std::vector<std::filesystem::path> dirs;
    ~Made() {
      std::error_code ignored;
      for (const auto& d : dirs) std::filesystem::remove_all(d, ignored);
    }
  };
  static Made made;
  auto d = std::filesystem::temp_directory_path() / ("tl_test_" + name + "_" + std::to_string(getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  made.dirs.push_back(d);
  return d;
}

std::string readFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void writeFile(const std::filesystem::path& p, const std::string& data) {
  std::ofstream(p, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

void expectGolden(const std::string& file, const std::string& text) {
  const auto golden = sourceDir() / "tests/golden" / file;
  if (std::getenv("TL_UPDATE_GOLDEN")) writeFile(golden, text);
  ASSERT_TRUE(std::filesystem::exists(golden)) << golden;
  const std::string want = readFile(golden);
  if (text == want) return;
  // (gtest's whole diff of a table of thousands of lines would fill the terminal)
  const auto a = lines(text), b = lines(want);
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  std::string title = "(the start)";
  for (size_t j = 0; j < i; ++j)
    if (b[j].rfind("== ", 0) == 0) title = b[j];
  const auto now = tempDir("golden") / file;
  writeFile(now, text);
  ADD_FAILURE() << file << " differs from line " << i + 1 << ", in " << title << "\n  golden: "
                << (i < b.size() ? b[i] : "(its end)") << "\n  now:    " << (i < a.size() ? a[i] : "(its end)")
                << "\nthe whole text: " << now.string() << " (diff it with " << golden.string()
                << "); regenerate with TL_UPDATE_GOLDEN=1 if the change is intended";
}

RunResult runTool(const std::string& tool, const std::string& args, const std::string& stdinFile,
                  const std::filesystem::path& cwd) {
  static int counter = 0;
  auto dir = std::filesystem::temp_directory_path();
  std::string tag = std::to_string(getpid()) + "_" + std::to_string(counter++);
  auto out = dir / ("tl_run_" + tag + ".out"), err = dir / ("tl_run_" + tag + ".err");
  std::string cmd = (cwd.empty() ? "" : "cd '" + cwd.string() + "' && ") + std::string(TL_BIN_DIR) + "/" + tool + " " + args + " >" + out.string() + " 2>" + err.string() +
                    (stdinFile.empty() ? " </dev/null" : " <" + stdinFile);
  int status = std::system(cmd.c_str());
  RunResult r;
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = readFile(out);
  r.err = readFile(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

std::string modelTestName(const std::filesystem::path& modelDir) {
  std::string n = (modelDir.parent_path().filename() == "dynamo" ? "dynamo_" : "") + modelDir.filename().string();
  for (auto& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

std::vector<std::filesystem::path> modelDirs() {
  std::vector<std::filesystem::path> dirs;
  for (const auto& root : {sharedModels(), sharedModels().parent_path() / "encoders", sourceDir() / "tests/models/dynamo"}) {
    if (!std::filesystem::exists(root)) continue;
    for (const auto& e : std::filesystem::directory_iterator(root))
      if (std::filesystem::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

namespace {

void addValue(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name, int type,
              const std::vector<std::string>& dims) {
  auto* v = list->Add();
  v->set_name(name);
  auto* t = v->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  for (const auto& d : dims) {
    auto* dim = t->mutable_shape()->add_dim();
    if (std::isdigit(static_cast<unsigned char>(d[0]))) {
      dim->set_dim_value(std::stoll(d));
    } else {
      dim->set_dim_param(d);
    }
  }
}

void addNode(onnx::GraphProto* g, const std::string& op, const std::vector<std::string>& in, const std::string& out) {
  auto* n = g->add_node();
  n->set_name(op + "_" + out);
  n->set_op_type(op);
  for (const auto& i : in) n->add_input(i);
  n->add_output(out);
}

}  // namespace

std::filesystem::path writeVocabModel(const std::filesystem::path& src, const std::filesystem::path& dir, int64_t vocab) {
  Model m = loadModel(src.string());
  auto* g = m.proto.mutable_graph();
  std::mt19937 rng(29);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  // Replaces initializer `name` (rank 2) by random values, `axis` resized to vocab.
  auto widen = [&](const std::string& name, int axis) {
    for (auto& t : *g->mutable_initializer()) {
      if (t.name() != name) continue;
      EXPECT_EQ(t.dims_size(), 2) << name;
      t.set_dims(axis, vocab);
      std::string raw(static_cast<size_t>(t.dims(0) * t.dims(1)) * sizeof(float), '\0');
      for (size_t i = 0; i < raw.size(); i += sizeof(float)) {
        const float v = u(rng);
        std::memcpy(&raw[i], &v, sizeof v);
      }
      t.clear_float_data();
      t.set_raw_data(raw);
      return;
    }
    ADD_FAILURE() << src << ": no initializer " << name;
  };
  int widened = 0;
  for (const auto& n : g->node()) {
    if (n.op_type() == "Gather" && n.input_size() == 2 && n.input(1) == "input_ids") widen(n.input(0), 0), ++widened;
    if (n.op_type() == "MatMul" && n.output(0) == "logits") widen(n.input(1), 1), ++widened;
  }
  EXPECT_EQ(widened, 2) << src << ": the embedding Gather and the logits MatMul";
  for (auto& o : *g->mutable_output())
    if (o.name() == "logits") {
      auto* shape = o.mutable_type()->mutable_tensor_type()->mutable_shape();
      shape->mutable_dim(shape->dim_size() - 1)->set_dim_value(vocab);
    }
  g->clear_value_info();  // (sizes of the old vocabulary; tl infers them again)
  std::filesystem::create_directories(dir);
  const auto path = dir / "model.onnx";
  writeFile(path, m.proto.SerializeAsString());
  return path;
}

std::filesystem::path writeTinyCacheModel(const std::filesystem::path& dir) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("tiny");
  addValue(g->mutable_input(), "input_ids", onnx::TensorProto::INT64, {"1", "N"});
  addValue(g->mutable_input(), "past_key_values.0.key", onnx::TensorProto::FLOAT, {"1", "2", "past", "4"});
  auto floats = [&](const std::string& name, std::vector<int64_t> dims) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (auto d : dims) t->add_dims(d), n *= d;
    for (int64_t i = 0; i < n; ++i) t->add_float_data(0.01f * static_cast<float>(i % 7) - 0.02f);
  };
  floats("table", {10, 8});
  floats("w", {8, 10});
  auto* shape = g->add_initializer();
  shape->set_name("kv_shape");
  shape->set_data_type(onnx::TensorProto::INT64);
  shape->add_dims(4);
  for (int64_t v : {1, -1, 2, 4}) shape->add_int64_data(v);
  addNode(g, "Gather", {"table", "input_ids"}, "h");
  addNode(g, "MatMul", {"h", "w"}, "logits");
  addNode(g, "Reshape", {"h", "kv_shape"}, "k_rows");
  addNode(g, "Transpose", {"k_rows"}, "k");
  auto* perm = g->mutable_node(g->node_size() - 1)->add_attribute();
  perm->set_name("perm");
  perm->set_type(onnx::AttributeProto::INTS);
  for (int64_t v : {0, 2, 1, 3}) perm->add_ints(v);
  addNode(g, "Concat", {"past_key_values.0.key", "k"}, "present.0.key");
  auto* axis = g->mutable_node(g->node_size() - 1)->add_attribute();
  axis->set_name("axis");
  axis->set_type(onnx::AttributeProto::INT);
  axis->set_i(2);
  addValue(g->mutable_output(), "logits", onnx::TensorProto::FLOAT, {"1", "N", "10"});
  addValue(g->mutable_output(), "present.0.key", onnx::TensorProto::FLOAT, {"1", "2", "sumN", "4"});
  auto path = dir / "tiny.onnx";
  writeFile(path, m.SerializeAsString());
  return path;
}

Model oneNodeModel(const std::string& op, const std::vector<std::pair<std::string, std::vector<std::string>>>& inputs,
                   float epsilon, const std::string& domain) {
  Model m;
  m.proto.set_ir_version(8);
  m.proto.add_opset_import()->set_version(17);
  auto* tlOpset = m.proto.add_opset_import();
  tlOpset->set_domain("tl");
  tlOpset->set_version(1);
  auto* g = m.proto.mutable_graph();
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_domain(domain);
  for (const auto& [name, dims] : inputs) {
    auto* in = g->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (const auto& d : dims) {
      if (std::isdigit(static_cast<unsigned char>(d[0]))) {
        tt->mutable_shape()->add_dim()->set_dim_value(std::stoll(d));
      } else {
        tt->mutable_shape()->add_dim()->set_dim_param(d);
      }
    }
    n->add_input(name);
  }
  n->add_output("y");
  if (epsilon > 0) setAttr(m, "epsilon", epsilon);
  g->add_output()->set_name("y");
  return m;
}

void setAttr(Model& m, const char* name, float f) { addAttr(*m.proto.mutable_graph()->mutable_node(0), name, f); }

void setAttr(Model& m, const char* name, int64_t i) { addAttr(*m.proto.mutable_graph()->mutable_node(0), name, i); }

void setAttr(Model& m, const char* name, const std::vector<int64_t>& ints) {
  addAttr(*m.proto.mutable_graph()->mutable_node(0), name, ints);
}

void setAttr(Model& m, const char* name, const std::string& s) { addAttr(*m.proto.mutable_graph()->mutable_node(0), name, s); }

Tensor floats(const char* name, const std::vector<float>& v, std::vector<int64_t> dims) {
  return makeTensor(name, DType::Float, std::move(dims), v.data());
}

void addInitializer(Model& model, const char* name, const std::vector<int64_t>& dims, const float* v, size_t count) {
  auto* t = model.proto.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  for (auto d : dims) t->add_dims(d);
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v), count * 4));
}

void onBothFamilies(Model& m, const std::function<void(Executor&, bool)>& check) {
  Graph graph(m.proto.graph());
  ShapeAnalysis analysis = inferShapes(m, graph);
  Device device(selectDevice(""), false);
  for (bool gpuKernels : {false, true}) {
    device.setGpuKernels(gpuKernels);
    Executor ex(device, m, graph, analysis);
    check(ex, gpuKernels);
  }
  device.setLocalMemory(32 << 10);  // the GPU family as a GPU with 32 KB of local memory gets it
  Executor ex(device, m, graph, analysis);
  EXPECT_FALSE(ex.kernels().has("attention_gqa_f32"));  // left out: the fallbacks run
  check(ex, true);
}

std::string byteLevelTokenizerJson() {
  std::string vocab;
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    const int cp = printable ? b : 256 + extra++;
    std::string ch = cp < 0x80 ? std::string(1, static_cast<char>(cp))
                               : std::string{static_cast<char>(0xC0 | cp >> 6), static_cast<char>(0x80 | (cp & 0x3F))};
    if (ch == "\"" || ch == "\\") ch = "\\" + ch;
    vocab += (b ? ", \"" : "\"") + ch + "\": " + std::to_string(b);
  }
  return R"({"added_tokens": [], "normalizer": null,
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}, "post_processor": null,
    "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": {)" + vocab + R"(}, "merges": []}})";
}

std::string refusalOf(Model& m) {
  Graph graph(m.proto.graph());
  ShapeAnalysis analysis = inferShapes(m, graph);
  Device device(selectDevice(""), false);
  try {
    Executor ex(device, m, graph, analysis);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void onEmulatedTensorCores(Model& m, const std::function<void(Executor&, bool)>& check) {
  Graph graph(m.proto.graph());
  ShapeAnalysis analysis = inferShapes(m, graph);
  Device device(selectDevice(""), false);
  device.setMmaEmulation(true);
  device.setGpuKernels(true);
  Executor ex(device, m, graph, analysis);
  check(ex, true);
}

bool roundsActivations(const std::vector<Executor::LaunchNote>& launches) {
  for (const auto& l : launches)
    if (l.kernel.find("_mma_") != std::string::npos || l.kernel.find("_i8_") != std::string::npos) return true;
  return false;
}

void roundRowsToInt8(float* rows, int64_t count, int64_t K, int64_t block) {
  const int64_t b = block > 0 ? block : K;
  for (int64_t r = 0; r < count; ++r)
    for (int64_t k0 = 0; k0 < K; k0 += b) {
      float* x = rows + r * K + k0;
      const int64_t n = std::min(b, K - k0);
      float amax = 0;
      for (int64_t k = 0; k < n; ++k) amax = std::max(amax, std::fabs(x[k]));
      const float s = amax > 0 ? amax / 127.0f : 1.0f;
      for (int64_t k = 0; k < n; ++k) x[k] = std::nearbyint(x[k] / s) * s;
    }
}

}  // namespace tl::test
