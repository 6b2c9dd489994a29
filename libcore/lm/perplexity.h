// Perplexity of a text as bits per UTF-8 byte, comparable across tokenizers: the text's
// tokens are cut into non-overlapping windows; in each, every token after the first is
// scored given the tokens before it in that window; the result is the sum of -log2 p over
// the scored tokens divided by the UTF-8 bytes they stand for (a last partial window
// counts the same way). Under a byte-level model (vocab 256, no tokenizer) a token is a
// byte.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "lm/causal_lm.h"

namespace tl {

class Tokenizer;

struct PerplexityResult {
  double bitsPerByte = 0, bitsPerToken = 0;
  int64_t scored = 0, bytes = 0, windows = 0;  // tokens scored, the bytes they stand for
};

// `progress` is called after each window with the result so far. Without a tokenizer the
// model must be byte-level. Throws tl::Error for a window under 2 or over the model's
// position table, or a text of fewer than 2 tokens.
PerplexityResult bitsPerByte(CausalLm& lm, const std::string& text, int64_t window,
                             const std::function<void(const PerplexityResult&)>& progress = {},
                             const Tokenizer* tokenizer = nullptr);

}  // namespace tl
