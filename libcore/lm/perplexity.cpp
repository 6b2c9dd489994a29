#include "lm/perplexity.h"

#include <algorithm>

#include "cli/error.h"
#include "sample/sampler.h"
#include "text/tokenizer.h"

namespace tl {

PerplexityResult bitsPerByte(CausalLm& lm, const std::string& text, int64_t window,
                             const std::function<void(const PerplexityResult&)>& progress, const Tokenizer* tokenizer) {
  if (!tokenizer && lm.vocab() != 256)
    throw Error("perplexity without a tokenizer scores bytes: it needs a byte-level model (vocab 256)");
  if (window < 2) throw Error("--window must be at least 2", ExitCode::Usage);
  if (lm.positionLimit() && window > lm.positionLimit())
    throw Error("--window " + std::to_string(window) + " exceeds the model's position table of " +
                std::to_string(lm.positionLimit()));
  // The tokens, and the bytes of text each adds (a character split across byte tokens
  // counts at the token that completes it, as TextStream prints it).
  std::vector<int64_t> ids, bytes;
  if (tokenizer) {
    const auto enc = tokenizer->encode(text, true);
    ids.assign(enc.begin(), enc.end());
    TextStream stream(*tokenizer, {});
    for (int32_t id : enc) bytes.push_back(static_cast<int64_t>(stream.push(id).size()));
    if (!bytes.empty()) bytes.back() += static_cast<int64_t>(stream.finish().size());
  } else {
    for (unsigned char c : text) ids.push_back(c), bytes.push_back(1);
  }
  if (ids.size() < 2) throw Error("the text has fewer than 2 tokens");
  const int64_t vocab = lm.vocab();
  double bits = 0;
  PerplexityResult r;
  for (size_t at = 0; at < ids.size(); at += static_cast<size_t>(window)) {
    const size_t len = std::min(ids.size() - at, static_cast<size_t>(window));
    if (len < 2) break;  // a last window of one token has nothing to score
    const std::vector<int64_t> toks(ids.begin() + static_cast<std::ptrdiff_t>(at), ids.begin() + static_cast<std::ptrdiff_t>(at + len));
    for (int64_t t : toks)
      if (t < 0 || t >= vocab) throw Error("token " + std::to_string(t) + " is past the model's " + std::to_string(vocab) + " logits");
    lm.reset();
    auto logits = lm.step(toks, true);
    for (size_t t = 1; t < len; ++t) {
      bits += negLog2Prob(&logits[(t - 1) * static_cast<size_t>(vocab)], vocab, toks[t]);
      r.bytes += bytes[at + t];
    }
    r.scored += static_cast<int64_t>(len) - 1;
    ++r.windows;
    r.bitsPerToken = bits / static_cast<double>(r.scored);
    r.bitsPerByte = r.bytes ? bits / static_cast<double>(r.bytes) : 0.0;
    if (progress) progress(r);
  }
  return r;
}

}  // namespace tl
