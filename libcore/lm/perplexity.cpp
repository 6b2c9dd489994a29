#include "lm/perplexity.h"

#include <algorithm>

#include "cli/error.h"
#include "sample/sampler.h"

namespace tl {

PerplexityResult bitsPerByte(CausalLm& lm, const std::string& text, int64_t window,
                             const std::function<void(const PerplexityResult&)>& progress) {
  if (lm.vocab() != 256) throw Error("perplexity scores bytes: it needs a byte-level model (vocab 256)");
  if (window < 2) throw Error("--window must be at least 2", ExitCode::Usage);
  if (lm.positionLimit() && window > lm.positionLimit())
    throw Error("--window " + std::to_string(window) + " exceeds the model's position table of " +
                std::to_string(lm.positionLimit()));
  if (text.size() < 2) throw Error("the text has fewer than 2 bytes");
  double bits = 0;
  PerplexityResult r;
  for (size_t at = 0; at < text.size(); at += static_cast<size_t>(window)) {
    const size_t len = std::min(text.size() - at, static_cast<size_t>(window));
    if (len < 2) break;  // a last window of one byte has nothing to score
    std::vector<int64_t> toks(len);
    for (size_t i = 0; i < len; ++i) toks[i] = static_cast<unsigned char>(text[at + i]);
    lm.reset();
    auto logits = lm.step(toks, true);
    for (size_t t = 1; t < len; ++t) bits += negLog2Prob(&logits[(t - 1) * 256], 256, toks[t]);
    r.scored += static_cast<int64_t>(len) - 1;
    ++r.windows;
    r.bitsPerByte = bits / static_cast<double>(r.scored);
    if (progress) progress(r);
  }
  return r;
}

}  // namespace tl
