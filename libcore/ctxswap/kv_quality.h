// What chunk compression costs a model (issue 11's quality check, LLMS 3.2): bits per byte
// of a text when the KV rows each window builds go through the chunks' compression before
// the window's later bytes read them.
#pragma once

#include <cstdint>
#include <string>

#include "lm/perplexity.h"
#include "runtime/executor.h"

namespace tl {

enum class KvMode {
  Fp32,       // the rows as computed (the reference: equals bitsPerByte's windows)
  Bits8,      // every chunk at 8 bits
  Tolerance,  // 8, 4 or 2 bits by tolerance.h's allocation at `ratio`
};

struct KvQualityOptions {
  int64_t window = 512, chunk = 16;
  KvMode mode = KvMode::Fp32;
  double ratio = 0.5;
};

// Each window is run a chunk of tokens at a time, every run's past the window's earlier
// rows as the mode keeps them: completed chunks are stored at 8 bits; under Tolerance
// their bits are re-chosen after each chunk from the attention mass every token has drawn
// so far (the model's Softmax outputs over keys, [batch, heads, rows, keys], so an
// unfused model) and each is rebuilt from its 8-bit copy. Throws tl::Error for a model
// that is not byte-level, or Tolerance on a model without such Softmax outputs.
// `meanBits` is the width the past's chunks were read at, over every chunk of every run's
// past (32 for Fp32's rows), so what a mode saves is measured, not assumed.
struct KvQuality : PerplexityResult {
  double meanBits = 0;
};
KvQuality compressedBitsPerByte(Executor& ex, CausalLm& lm, const std::string& text, const KvQualityOptions& opt);

}  // namespace tl
