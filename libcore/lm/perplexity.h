// Bits per byte of a text under a byte-level model (vocab 256): the text is cut into
// non-overlapping windows; in each, every byte after the first is scored given the
// bytes before it in that window; the result is the mean of -log2 p over all scored
// bytes (a last partial window counts the same way).
#pragma once

#include <functional>
#include <string>

#include "lm/causal_lm.h"

namespace tl {

struct PerplexityResult {
  double bitsPerByte = 0;
  int64_t scored = 0, windows = 0;
};

// `progress` is called after each window with the result so far. Throws tl::Error
// for a model that is not byte-level, a window under 2 or over the model's position
// table, or a text under 2 bytes.
PerplexityResult bitsPerByte(CausalLm& lm, const std::string& text, int64_t window,
                             const std::function<void(const PerplexityResult&)>& progress = {});

}  // namespace tl
