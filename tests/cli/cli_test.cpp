// tl-shape as a user runs it: conventions (stdin/stdout, -o, exit codes, --help,
// --version) and malformed input, each giving one clear line and exit code 1.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <filesystem>
#include <set>
#include <sys/wait.h>

#include "cli/test_support.h"
#include "onnx/model_io.h"
#include "tensor/tensor.h"

namespace tl {
namespace {

using test::runTool;

const std::string kLlamaPast = (test::sharedModels() / "llama-past/model.onnx").string();

// A one-line error: "tl-shape: error: FILE: ...\n".
void expectOneLineError(const test::RunResult& r, const std::string& file, const std::string& fragment) {
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_EQ(r.err.rfind("tl-shape: error: " + file + ": ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty());
}

onnx::ModelProto tinyModel() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* in = m.mutable_graph()->add_input();
  in->set_name("x");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::FLOAT);
  tt->mutable_shape()->add_dim()->set_dim_param("N");
  tt->mutable_shape()->add_dim()->set_dim_value(6);
  return m;
}

onnx::NodeProto* addNode(onnx::ModelProto& m, const std::string& name, const std::string& op,
                         std::vector<std::string> in, std::vector<std::string> out) {
  auto* n = m.mutable_graph()->add_node();
  n->set_name(name);
  n->set_op_type(op);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

void addInt64s(onnx::ModelProto& m, const std::string& name, std::vector<int64_t> v) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(v.size()));
  for (auto x : v) t->add_int64_data(x);
}

std::string save(const onnx::ModelProto& m, const std::string& name) {
  auto p = test::tempDir("cli_" + name) / "model.onnx";
  std::string data;
  m.SerializeToString(&data);
  test::writeFile(p, data);
  return p.string();
}

TEST(TlShapeCli, TruncatedFilesAreRejected) {
  const std::string whole = test::readFile(kLlamaPast);
  auto dir = test::tempDir("truncated");
  for (double frac : {0.0, 0.001, 0.1, 0.5, 0.9, 0.999}) {
    auto p = (dir / ("cut" + std::to_string(static_cast<int>(frac * 1000)) + ".onnx")).string();
    test::writeFile(p, whole.substr(0, static_cast<size_t>(whole.size() * frac)));
    auto r = runTool("tl-shape", p + " --emit text");
    expectOneLineError(r, p, "not a valid ONNX model");
  }
}

TEST(TlShapeCli, FailedRunLeavesNoOutputFile) {
  auto dir = test::tempDir("noleftover");
  auto bad = (dir / "bad.onnx").string();
  test::writeFile(bad, test::readFile(kLlamaPast).substr(0, 1000));
  auto out = dir / "out.onnx";
  auto r = runTool("tl-shape", bad + " -o " + out.string());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_FALSE(std::filesystem::exists(out));
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1) << "a temporary file was left";
}

TEST(TlShapeCli, GraphWithACycle) {
  auto m = tinyModel();
  addNode(m, "Add_1", "Add", {"x", "back"}, {"a"});
  addNode(m, "Relu_2", "Relu", {"a"}, {"back"});
  m.mutable_graph()->add_output()->set_name("a");
  auto p = save(m, "cycle");
  expectOneLineError(runTool("tl-shape", p), p, "cycle");
}

TEST(TlShapeCli, DanglingInputName) {
  auto m = tinyModel();
  addNode(m, "MatMul_7", "MatMul", {"x", "w_missing"}, {"y"});
  m.mutable_graph()->add_output()->set_name("y");
  auto p = save(m, "dangling");
  expectOneLineError(runTool("tl-shape", p), p,
                     "node 'MatMul_7': input 'w_missing' is not produced by any node, initializer or graph input");
}

// x [N, 6] (or [firstDim, 6]) reshaped by a constant target.
std::string reshapeModel(const std::string& name, std::vector<int64_t> target, int64_t firstDim = 0) {
  auto m = tinyModel();
  if (firstDim)
    m.mutable_graph()->mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(0)->set_dim_value(firstDim);
  addInt64s(m, "target", std::move(target));
  addNode(m, "Reshape_12", "Reshape", {"x", "target"}, {"y"});
  m.mutable_graph()->add_output()->set_name("y");
  return save(m, name);
}

TEST(TlShapeCli, ReshapeTargetThatDoesNotDivide) {
  auto p = reshapeModel("reshape", {-1, 4});
  expectOneLineError(runTool("tl-shape", p), p, "node 'Reshape_12': cannot prove that target shape [-1, 4] divides");
  auto q = reshapeModel("reshape_const", {5, -1}, 2);
  expectOneLineError(runTool("tl-shape", q), q,
                     "node 'Reshape_12': target shape [5, -1] does not divide the input's 12 elements");
  auto r = reshapeModel("reshape_count", {5, 3}, 2);
  expectOneLineError(runTool("tl-shape", r), r, "node 'Reshape_12': target shape [5, 3] has 15 elements, the input [2, 6] has 12");
}

TEST(TlShapeCli, ReshapeWithTwoMinusOnes) {
  auto p = reshapeModel("two_minus_one", {-1, -1});
  expectOneLineError(runTool("tl-shape", p), p, "node 'Reshape_12': target shape [-1, -1] has two -1");
}

TEST(TlShapeCli, OperatorWithoutARule) {
  auto m = tinyModel();
  addNode(m, "Mystery_1", "FooBar", {"x"}, {"y"});
  m.mutable_graph()->add_output()->set_name("y");
  auto p = save(m, "norule");
  expectOneLineError(runTool("tl-shape", p), p, "node 'Mystery_1': no shape rule for operator 'FooBar'");
}

TEST(TlShapeCli, BroadcastMismatchOfConstants) {
  auto m = tinyModel();
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(5);
  for (int i = 0; i < 5; ++i) w->add_float_data(0);
  addNode(m, "Add_3", "Add", {"x", "w"}, {"y"});
  m.mutable_graph()->add_output()->set_name("y");
  auto p = save(m, "broadcast");
  expectOneLineError(runTool("tl-shape", p), p, "node 'Add_3': cannot broadcast");
}

TEST(TlShapeCli, MissingAndEmptyFiles) {
  expectOneLineError(runTool("tl-shape", "/nonexistent/model.onnx"), "/nonexistent/model.onnx", "cannot open file");
  auto p = (test::tempDir("empty") / "empty.onnx").string();
  test::writeFile(p, "");
  expectOneLineError(runTool("tl-shape", p), p, "the input is empty");
}

TEST(TlShapeCli, UsageErrorsExitTwo) {
  auto r = runTool("tl-shape", "--no-such-flag");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("tl-shape: error:"), std::string::npos) << r.err;
  r = runTool("tl-shape", kLlamaPast + " --emit yaml");
  EXPECT_EQ(r.exitCode, 2);
  r = runTool("tl-shape", kLlamaPast + " --bind N");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("--bind expects NAME=INT"), std::string::npos) << r.err;
  r = runTool("tl-shape", kLlamaPast + " --bind nosuch=3");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("no symbol 'nosuch'"), std::string::npos) << r.err;
  r = runTool("tl-shape", kLlamaPast + " --bind N=5,past=7,sumN=13");
  EXPECT_EQ(r.exitCode, 2);
  EXPECT_NE(r.err.find("contradicts sumN = N + past = 12"), std::string::npos) << r.err;
}

TEST(TlShapeCli, HelpAndVersion) {
  auto r = runTool("tl-shape", "--help");
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_NE(r.out.find("tl-shape model.onnx -o model.shaped.onnx"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--bind"), std::string::npos);
  r = runTool("tl-shape", "--list-ops");
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_EQ(r.out.rfind("op ", 0), 0u) << r.out;  // the header line
  EXPECT_NE(r.out.find("\nGatherND "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\ntl.Attention "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("shape-only"), std::string::npos) << r.out;
  r = runTool("tl-shape", "--version");
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_EQ(r.out.rfind("tl-shape (tl) ", 0), 0u) << r.out;
}

// docs/ops.md's operator table is the op table as it is (scripts/ops_doc.sh writes it).
// The tests run the tools' binaries: building the tests builds every tool in tools/, so
// none is older than the library it links (a tool left out of the tests' dependencies ran
// stale after a change built with `make tl_model_tests`).
TEST(TlToolsCli, EveryToolIsBuiltWithTheTests) {
  const std::filesystem::path bin(TL_BIN_DIR), lib = bin.parent_path() / "libcore/libtlcore.a";
  ASSERT_TRUE(std::filesystem::exists(lib)) << lib;
  int tools = 0;
  for (const auto& e : std::filesystem::directory_iterator(test::sourceDir() / "tools")) {
    if (e.path().extension() != ".cpp") continue;
    ++tools;
    const auto tool = bin / e.path().stem();
    ASSERT_TRUE(std::filesystem::exists(tool)) << tool;
    EXPECT_GE(std::filesystem::last_write_time(tool), std::filesystem::last_write_time(lib))
        << tool << " is older than the library: tests/CMakeLists.txt's add_dependencies must name it";
  }
  EXPECT_GE(tools, 7);
}

TEST(TlShapeCli, OpsDocMatchesTheTable) {
  const auto r = runTool("tl-shape", "--list-ops");
  ASSERT_EQ(r.exitCode, 0);
  const std::string doc = test::readFile(test::sourceDir() / "docs/ops.md");
  const std::string begin = "<!-- generated by scripts/ops_doc.sh from `tl-shape --list-ops`: do not edit -->\n```\n";
  const auto at = doc.find(begin);
  ASSERT_NE(at, std::string::npos) << "docs/ops.md has no generated table";
  const auto end = doc.find("```\n<!-- end of the generated table -->", at);
  ASSERT_NE(end, std::string::npos);
  EXPECT_EQ(doc.substr(at + begin.size(), end - at - begin.size()), r.out)
      << "docs/ops.md's operator table is stale: run scripts/ops_doc.sh";
}

TEST(TlShapeCli, StdinToStdoutPipeline) {
  auto dir = test::tempDir("pipe");
  auto r = runTool("tl-shape", "- -o " + (dir / "a.onnx").string(), kLlamaPast);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  // The artifact is a model again: tl-shape reads its own output, and finds the same.
  r = runTool("tl-shape", "- --emit text", (dir / "a.onnx").string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("free symbols: batch, N, past"), std::string::npos);
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(test::readFile(dir / "a.onnx")));
  std::map<std::string, std::string> meta;
  for (const auto& p : m.metadata_props()) meta[p.key()] = p.value();
  EXPECT_EQ(meta["tl.shape.symbols"], "batch,N,past");
  EXPECT_EQ(meta["tl.shape.relations"], "sumN = N + past\n");
  EXPECT_NE(meta["tl.shape.values"].find("/m/model/Concat_1_output_0\t[batch, -1, N, N + past]"), std::string::npos);
  const auto& mask = m.graph().input(1);
  EXPECT_EQ(mask.name(), "attention_mask");
  EXPECT_EQ(mask.type().tensor_type().shape().dim(1).dim_param(), "N + past");
  EXPECT_EQ(m.graph().value_info_size() + m.graph().input_size() + m.graph().output_size() +
                m.graph().initializer_size(),
            [&] {
              std::set<std::string> names;
              for (const auto& n : m.graph().node())
                for (const auto& o : n.output()) names.insert(o);
              for (const auto& i : m.graph().input()) names.insert(i.name());
              for (const auto& i : m.graph().initializer()) names.insert(i.name());
              return static_cast<int>(names.size());
            }());
}

TEST(TlShapeCli, ExternalDataStaysReachable) {
  auto root = test::tempDir("external");
  std::filesystem::create_directories(root / "a");
  std::filesystem::create_directories(root / "b");
  std::vector<float> w(6 * 4, 0.25f);
  test::writeFile(root / "a/w.bin", std::string(reinterpret_cast<const char*>(w.data()), w.size() * 4));
  auto m = tinyModel();  // x: [N, 6]
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name("w");
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(6);
  t->add_dims(4);
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  auto* loc = t->add_external_data();
  loc->set_key("location");
  loc->set_value("w.bin");
  addNode(m, "MatMul_0", "MatMul", {"x", "w"}, {"y"});
  m.mutable_graph()->add_output()->set_name("y");
  std::string data;
  m.SerializeToString(&data);
  test::writeFile(root / "a/model.onnx", data);

  auto locationIn = [](const std::filesystem::path& p) {
    onnx::ModelProto out;
    EXPECT_TRUE(out.ParseFromString(test::readFile(p)));
    return out.graph().initializer(0).external_data(0).value();
  };
  auto r = runTool("tl-shape", (root / "a/model.onnx").string() + " -o " + (root / "a/same.onnx").string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(locationIn(root / "a/same.onnx"), "w.bin");
  r = runTool("tl-shape", (root / "a/model.onnx").string() + " -o " + (root / "b/moved.onnx").string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(locationIn(root / "b/moved.onnx"), "../a/w.bin");
  // The moved artifact is still a complete model: its weights load from b/.
  Model moved = loadModel((root / "b/moved.onnx").string());
  EXPECT_EQ(readTensor(moved.proto.graph().initializer(0), moved.baseDir).toDouble(), std::vector<double>(24, 0.25));
  r = runTool("tl-shape", "moved.onnx --emit text", "", root / "b");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("y  float32  [N, 4]"), std::string::npos) << r.out;
  // Through stdin, locations are relative to the working directory.
  r = runTool("tl-shape", "- -o ../b/piped.onnx", (root / "a/model.onnx").string(), root / "a");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(locationIn(root / "b/piped.onnx"), "../a/w.bin");
}

TEST(TlShapeCli, RefusesBinaryOnATerminal) {
  if (std::system("command -v script >/dev/null 2>&1") != 0) GTEST_SKIP() << "util-linux 'script' is not installed";
  auto log = test::tempDir("tty") / "log";
  std::string cmd = "script -qec '" + std::string(TL_BIN_DIR) + "/tl-shape " + kLlamaPast + "' " + log.string() +
                    " </dev/null >/dev/null 2>&1";
  int status = std::system(cmd.c_str());
  EXPECT_EQ(WEXITSTATUS(status), 2);
  EXPECT_NE(test::readFile(log).find("refusing to write a binary model to a terminal"), std::string::npos);
}

}  // namespace
}  // namespace tl
