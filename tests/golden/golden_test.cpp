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
