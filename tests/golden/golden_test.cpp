// Golden tests for tl-shape's text output. To regenerate after an intended change:
//   TL_UPDATE_GOLDEN=1 ctest --test-dir build -R Golden     (then review `git diff tests/golden`)
#include <cstdlib>

#include <gtest/gtest.h>

#include "cli/test_support.h"

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
  auto golden = test::sourceDir() / "tests/golden" / c.file;
  if (std::getenv("TL_UPDATE_GOLDEN")) test::writeFile(golden, r.out);
  ASSERT_TRUE(std::filesystem::exists(golden)) << golden;
  EXPECT_EQ(r.out, test::readFile(golden)) << "regenerate with TL_UPDATE_GOLDEN=1 if the change is intended";
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
