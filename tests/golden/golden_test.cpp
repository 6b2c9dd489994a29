// Golden tests for tl-shape's text output, and for what tl-fuse and tl-plan make of every
// model. To regenerate after an intended change:
//   TL_UPDATE_GOLDEN=1 ctest --test-dir build -R Golden     (then review `git diff tests/golden`)
#include <set>

#include <gtest/gtest.h>

#include "cli/error.h"
#include "cli/test_support.h"
#include "fuse/fuse.h"
#include "onnx/model_io.h"
#include "tensor/tensor.h"

namespace tl {
namespace {

struct GoldenCase {
  const char* file;   // under tests/golden
  const char* where;  // "shared" or "dynamo": the folder the tool runs in
  const char* args;
};

void PrintTo(const GoldenCase& c, std::ostream* os) { *os << c.file; }

std::filesystem::path whereDir(const std::string& where) {
  return where == "shared" ? test::sharedModels() : test::sourceDir() / "tests/models/dynamo";
}

class Golden : public ::testing::TestWithParam<GoldenCase> {};

TEST_P(Golden, TextOutputMatches) {
  const auto& c = GetParam();
  auto r = test::runTool("tl-shape", c.args, "", whereDir(c.where));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  test::expectGolden(c.file, r.out);
}

// A tool's text output without its first line (the title, which names a temporary file).
std::string withoutTitle(const std::string& out) {
  const size_t eol = out.find('\n');
  return eol == std::string::npos ? "" : out.substr(eol + 1);
}

// Every model through tl-fuse -v (each pass's rewrites and near misses), each pass alone
// (its counts), and tl-plan's whole plan of the fused model (each tensor's buffer, bytes
// and live range, each buffer's offset and capacity): a pattern that stops matching or
// starts matching elsewhere, a near miss that changes its reason, a tensor that lives
// longer or shares differently, each shows as a diff of this file. The outputs' values
// are FuseModels' and PlanModels' to check.
TEST(PipelineGolden, FuseAndPlanOfEveryModel) {
  const auto dir = test::tempDir("pipeline-golden");
  std::string text;
  for (const auto& d : test::modelDirs()) {
    const std::string model = (d / "model.onnx").string(), fused = (dir / "fused.onnx").string();
    text += "== " + test::modelTestName(d) + "\n-- tl-fuse -v\n";
    auto r = test::runTool("tl-fuse", "-v " + model + " -o " + fused);
    ASSERT_EQ(r.exitCode, 0) << r.err;
    text += r.err + "-- each pass alone\n";
    const Model loaded = loadModel(model);
    for (const auto& p : fusePasses()) {
      Model m = loaded;
      for (const auto& res : runFusePasses(m, {p.name}))
        text += res.pass + ": " + std::to_string(res.rewrites) + " " + res.counts + ", " +
                std::to_string(res.nearMisses.size()) + " near misses\n";
    }
    text += "-- tl-plan --max-seq 64 --emit text\n";
    r = test::runTool("tl-plan", fused + " --max-seq 64 --emit text");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    text += withoutTitle(r.out);
  }
  // Unfused graphs (views, transposes read through, two sequence symbols), at another
  // batch and alignment.
  int unfused = 0;
  for (const auto& d : test::modelDirs()) {
    const std::string name = test::modelTestName(d);
    if (name != "llama_past" && name != "gpt2_past" && name != "bytellama_past") continue;
    text += "== " + name + " unfused\n-- tl-plan --max-seq 48 --batch 2 --align 64 --emit text\n";
    auto r = test::runTool("tl-plan", (d / "model.onnx").string() + " --max-seq 48 --batch 2 --align 64 --emit text");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    text += withoutTitle(r.out);
    ++unfused;
  }
  EXPECT_EQ(unfused, 3);
  test::expectGolden("pipeline.txt", text);
}

// The fuse passes' report (rewrites and near misses) of a model, one line each.
std::set<std::string> fuseReport(Model m) {
  std::set<std::string> lines;
  for (const auto& p : fusePasses()) {
    try {
      for (const auto& r : runFusePasses(m, {p.name})) {
        lines.insert(r.pass + ": " + std::to_string(r.rewrites) + " " + r.counts);
        for (const auto& n : r.nearMisses) lines.insert(r.pass + " near miss: " + n);
      }
    } catch (const Error& e) {
      lines.insert("THROWS after the passes before " + p.name + ": " + e.what());
      return lines;
    }
  }
  // Whatever the passes rewrote, every tensor read is still made: by a node, an
  // initializer or the graph's inputs.
  std::set<std::string> made;
  const auto& g = m.proto.graph();
  for (const auto& i : g.input()) made.insert(i.name());
  for (const auto& i : g.initializer()) made.insert(i.name());
  for (const auto& n : g.node())
    for (const auto& o : n.output()) made.insert(o);
  for (const auto& n : g.node())
    for (const auto& i : n.input())
      if (!i.empty() && !made.count(i)) lines.insert("DANGLING: node '" + n.name() + "' reads '" + i + "', which nothing makes");
  for (const auto& o : g.output())
    if (!made.count(o.name())) lines.insert("DANGLING: graph output '" + o.name() + "', which nothing makes");
  return lines;
}

// Near misses on real graphs: each node of a model's first layer and outside the layers,
// perturbed one way at a time (its first output read by one more node; a commutative
// Add's or Mul's operands swapped; the value of a float scalar constant it reads times 1.5), then
// every pass run. Recorded: how each perturbation changes the passes' report (a pattern
// that stops or starts matching, the near miss that says why), and never a read of a
// tensor the rewrites removed. A pattern check that changes what it accepts shows here.
TEST(FuseGolden, PerturbedGraphs) {
  std::string text;
  for (const auto& d : test::modelDirs()) {
    const std::string name = test::modelTestName(d);
    if (name != "llama_past" && name != "gpt2_past" && name != "gemma_past" && name != "phi3_past" && name != "clip_text")
      continue;
    const Model model = loadModel((d / "model.onnx").string());
    const std::set<std::string> base = fuseReport(model);
    for (const auto& l : base) EXPECT_EQ(l.rfind("DANGLING", 0), std::string::npos) << name << ": " << l;
    text += "== " + name + "\n";
    const auto& g = model.proto.graph();
    std::set<std::string> scalars;  // float scalar initializers and Constants
    for (const auto& t : g.initializer())
      if (t.data_type() == onnx::TensorProto::FLOAT && t.dims_size() == 0) scalars.insert(t.name());
    for (const auto& n : g.node())
      if (n.op_type() == "Constant" && n.attribute_size() == 1 && n.attribute(0).name() == "value" &&
          n.attribute(0).t().data_type() == onnx::TensorProto::FLOAT && n.attribute(0).t().dims_size() == 0)
        scalars.insert(n.output(0));
    auto perturbed = [&](const std::string& what, Model m) {
      const std::set<std::string> got = fuseReport(std::move(m));
      std::string diff;
      for (const auto& l : base)
        if (!got.count(l)) diff += "  - " + l + "\n";
      for (const auto& l : got)
        if (!base.count(l)) diff += "  + " + l + "\n";
      if (!diff.empty()) text += what + "\n" + diff;
    };
    for (int i = 0; i < g.node_size(); ++i) {
      const auto& n = g.node(i);
      const std::string& nn = n.name();
      const bool inLayer = nn.find("layers.") != std::string::npos || nn.find("/h.") != std::string::npos;
      const bool firstLayer = nn.find("layers.0/") != std::string::npos || nn.find("/h.0/") != std::string::npos;
      if ((inLayer && !firstLayer) || n.op_type() == "Constant" || n.output_size() == 0) continue;
      {
        Model m = model;
        auto* g2 = m.proto.mutable_graph();
        auto* reader = g2->add_node();
        reader->set_op_type("Identity");
        reader->set_name("perturb_reader");
        reader->add_input(n.output(0));
        reader->add_output("perturb_read");
        g2->add_output()->set_name("perturb_read");
        perturbed("'" + nn + "' (" + n.op_type() + "): its output read once more", std::move(m));
      }
      if ((n.op_type() == "Add" || n.op_type() == "Mul") && n.input_size() == 2) {
        Model m = model;
        auto* t = m.proto.mutable_graph()->mutable_node(i);
        const std::string a = t->input(0);
        t->set_input(0, t->input(1));
        t->set_input(1, a);
        perturbed("'" + nn + "' (" + n.op_type() + "): operands swapped", std::move(m));
      }
      for (int k = 0; k < n.input_size(); ++k) {
        if (!scalars.count(n.input(k))) continue;
        Model m = model;  // the constant's value itself, for all its readers
        const std::string c = n.input(k);
        auto* g2 = m.proto.mutable_graph();
        onnx::TensorProto* t = nullptr;
        for (auto& init : *g2->mutable_initializer())
          if (init.name() == c) t = &init;
        for (auto& p : *g2->mutable_node())
          if (p.op_type() == "Constant" && p.output(0) == c) t = p.mutable_attribute(0)->mutable_t();
        const float x = static_cast<float>(readTensor(*t, {}).toDouble().at(0));
        t->clear_raw_data();
        t->clear_float_data();
        t->add_float_data(1.5f * x);
        perturbed("'" + nn + "' (" + n.op_type() + "): its constant '" + c + "' times 1.5", std::move(m));
      }
    }
  }
  test::expectGolden("fuse_perturbed.txt", text);
}

// tl-quant on the bundled model: the error report in each format (another group size,
// weights kept by --skip), and --emit text in each scheme: every weight's error and bits
// per weight to the printed digits, so a change in any scheme's codes, scales or offsets,
// or in what is kept, is a diff.
TEST(QuantGolden, ReportsAndTextOfTheBundledModel) {
  const std::string model = (test::sourceDir() / "models/bytellama-past/model.onnx").string();
  std::string text;
  for (const char* args : {"--report --report-format md --group 64", "--report --report-format csv --skip up_proj",
                           "--report --report-format json --group 96", "--emit text", "--emit text --scheme int4 --group 32",
                           "--emit text --scheme w4a8", "--emit text --scheme q8 --quantize-lm-head",
                           "--emit text --scheme q3h --group 64 --lm-head-scheme e0m4"}) {
    const auto r = test::runTool("tl-quant", model + " " + args);
    ASSERT_EQ(r.exitCode, 0) << args << ": " << r.err;
    text += std::string("== tl-quant ") + args + "\n" + (r.out.rfind("# tl-quant: ", 0) == 0 ? withoutTitle(r.out) : r.out);
  }
  test::expectGolden("quant_bytellama.txt", text);
}

INSTANTIATE_TEST_SUITE_P(
    ShapeText, Golden,
    ::testing::Values(GoldenCase{"llama-past.shape.txt", "shared", "llama-past/model.onnx --emit text"},
                      GoldenCase{"llama-past.bind.txt", "shared", "llama-past/model.onnx --bind batch=1,N=7,past=11"},
                      GoldenCase{"gpt2-nopast.shape.txt", "shared", "gpt2-nopast/model.onnx --emit text"},
                      GoldenCase{"dynamo-llama-past.shape.txt", "dynamo", "llama-past/model.onnx --emit text"},
                      GoldenCase{"dynamo-gpt2-past.shape.txt", "dynamo", "gpt2-past/model.onnx --emit text"}),
    [](const ::testing::TestParamInfo<GoldenCase>& info) {
      std::string n = info.param.file;
      for (auto& ch : n)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      return n;
    });

}  // namespace
}  // namespace tl
