// Hugging Face tokenizers read from tokenizer.json: text to ids and back, the ids the Rust
// `tokenizers` library gives (docs/tokenizer.md). Input that is not valid UTF-8 has each
// maximal invalid subsequence replaced by U+FFFD first, as Python's
// bytes.decode('utf-8', errors='replace') does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tl {

class Tokenizer {
 public:
  // Reads a tokenizer.json; throws Error (bad input) naming any component it does not
  // know (the caller names the file).
  static Tokenizer fromFile(const std::string& path);
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // encode(text, add_special_tokens): the post-processor's special tokens when asked.
  std::vector<int32_t> encode(const std::string& text, bool addSpecialTokens = true) const;
  // decode(ids, skip_special_tokens).
  std::string decode(const std::vector<int32_t>& ids, bool skipSpecialTokens = false) const;
  size_t vocabSize() const;
  // Whether id names a token (decode() skips one that does not, as the Rust library does).
  bool knows(int32_t id) const;

  struct Impl;

 private:
  explicit Tokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Text as tokens come (generation): push(id) returns what the id adds to the text,
// holding back a character whose bytes are split across tokens until it is whole (its
// decode ends in U+FFFD). As the Rust library's DecodeStream, each step decodes a window:
// the ids since the emission before last, so that decoders that look at a neighbour
// (Llama's leading space) print what decode() would, and a step costs the window, not the
// sequence so far.
class TextStream {
 public:
  TextStream(const Tokenizer& tokenizer, std::vector<int32_t> context, bool skipSpecialTokens = false);
  std::string push(int32_t id);
  // What is still held back (a character left split at the end), as decode() gives it.
  std::string finish();
  // The text so far: the context's decode, then what push() and finish() returned.
  const std::string& text() const { return text_; }

 private:
  const Tokenizer& tokenizer_;
  bool skipSpecial_;
  std::vector<int32_t> window_;
  std::string prefix_;  // window_'s decode at the last emission
  size_t prefixIndex_;  // window_'s ids before that emission's
  std::string text_;
};

// Where a tool's tokenizer is: `path` itself (--tokenizer FILE), PATH/tokenizer.json for a
// folder, or with no path the tokenizer.json beside `model` where there is one ("" where
// there is none, or no model).
std::string tokenizerFileFor(const std::string& path, const std::string& model);
// Throws Error (bad input) where the tokenizer has more tokens than the model has logits.
void checkTokenizerFits(const Tokenizer& tokenizer, int64_t logits);

// bytes with each maximal invalid UTF-8 subsequence replaced by U+FFFD.
std::string utf8Lossy(const std::string& bytes);

}  // namespace tl
