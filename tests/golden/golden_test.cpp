// Golden tests for tl-shape's text output, and for what tl-fuse and tl-plan make of every
// model. To regenerate after an intended change:
//   TL_UPDATE_GOLDEN=1 ctest --test-dir build -R Golden     (then review `git diff tests/golden`)
#include <cstdlib>
#include <sstream>

#include <gtest/gtest.h>

#include "cli/test_support.h"
#include "fuse/fuse.h"
#include "onnx/model_io.h"

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

// `text` against tests/golden/`file` (written instead under TL_UPDATE_GOLDEN).
void expectGolden(const std::string& file, const std::string& text) {
  auto golden = test::sourceDir() / "tests/golden" / file;
  if (std::getenv("TL_UPDATE_GOLDEN")) test::writeFile(golden, text);
  ASSERT_TRUE(std::filesystem::exists(golden)) << golden;
  EXPECT_EQ(text, test::readFile(golden)) << "regenerate with TL_UPDATE_GOLDEN=1 if the change is intended";
}

TEST_P(Golden, TextOutputMatches) {
  const auto& c = GetParam();
  auto r = test::runTool("tl-shape", c.args, "", whereDir(c.where));
  ASSERT_EQ(r.exitCode, 0) << r.err;
  expectGolden(c.file, r.out);
}

// Every model through tl-fuse -v (each pass's rewrites and near misses), each pass alone
// (its counts), and tl-plan's summary of the fused model: a pattern that stops matching
// or starts matching elsewhere, a near miss that changes its reason, a plan that shares
// differently, each shows as a diff of this file. The outputs' values are FuseModels' and
// PlanModels' to check.
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
    text += "-- tl-plan --max-seq 64 --emit text, its summary\n";
    r = test::runTool("tl-plan", fused + " --max-seq 64 --emit text");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    std::istringstream lines(r.out);
    bool summary = false;
    for (std::string line; std::getline(lines, line);) {
      summary = summary || line.rfind("tensors: ", 0) == 0;
      if (summary) text += line + "\n";
    }
  }
  expectGolden("pipeline.txt", text);
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
