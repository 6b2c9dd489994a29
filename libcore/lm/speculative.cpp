#include "lm/speculative.h"

#include <algorithm>

#include "cli/error.h"
#include "sample/sampler.h"

namespace tl {

std::vector<int64_t> PromptLookup::propose(const std::vector<int64_t>& h, int64_t k) {
  const int64_t size = static_cast<int64_t>(h.size());
  for (int64_t n = std::min(maxNgram_, size - 1); n >= 1; --n) {
    // the latest start s < size - n whose n tokens equal the last n
    for (int64_t s = size - n - 1; s >= 0; --s) {
      if (!std::equal(h.begin() + s, h.begin() + s + n, h.end() - n)) continue;
      const int64_t from = s + n, to = std::min(size, from + k);
      return std::vector<int64_t>(h.begin() + from, h.begin() + to);
    }
  }
  return {};
}

DraftModel::DraftModel(CausalLm& draft, const CausalLm& target) : lm_(draft) {
  if (draft.vocab() != target.vocab())
    throw Error("the draft model's vocabulary has " + std::to_string(draft.vocab()) + " tokens, the model's " +
                std::to_string(target.vocab()) + ": a draft must share the model's tokenizer");
  if (!draft.canRewind())
    throw Error("the draft model has no in-place KV caches to go back over its rejected drafts (run it through tl-plan)");
}

std::vector<int64_t> DraftModel::propose(const std::vector<int64_t>& h, int64_t k) {
  // Keep what the draft consumed as far as it agrees with the history, short of the
  // history's last token, whose logits the first draft comes from.
  size_t keep = 0;
  while (keep < consumed_.size() && keep + 1 < h.size() && consumed_[keep] == h[keep]) ++keep;
  if (keep < consumed_.size()) {
    lm_.rewind(static_cast<int64_t>(keep));
    consumed_.resize(keep);
  }
  std::vector<int64_t> feed(h.begin() + static_cast<int64_t>(keep), h.end()), out;
  const int64_t room = lm_.capacity() ? lm_.capacity() - static_cast<int64_t>(h.size()) : k;
  for (int64_t i = 0; i < std::min(k, room); ++i) {
    const int64_t t = lm_.stepGreedy(feed);
    consumed_.insert(consumed_.end(), feed.begin(), feed.end());
    out.push_back(t);
    feed = {t};
  }
  return out;
}

void checkDraftMax(int64_t draftMax) {
  if (draftMax < 1 || draftMax > kCpuDecodeRows - 1)
    throw Error("--draft-max must be 1 to " + std::to_string(kCpuDecodeRows - 1) + ": a check of more than " +
                    std::to_string(kCpuDecodeRows) + " rows takes the prefill kernels, whose rounding differs from decoding's",
                ExitCode::Usage);
}

void checkDraftRows(const CausalLm& lm, int64_t draftMax) {
  checkDraftMax(draftMax);
  const int64_t rows = lm.decodeRows();
  if (draftMax + 1 > rows)
    throw Error("--draft-max " + std::to_string(draftMax) + " checks " + std::to_string(draftMax + 1) +
                    " rows a step, and this device's decode kernels take " + std::to_string(rows) +
                    " (past them the prefill kernels' rounding differs from decoding's): give --draft-max " +
                    std::to_string(rows - 1) + " or less",
                ExitCode::Usage);
}

SpeculativeStats generateSpeculative(CausalLm& lm, Drafter& drafter, Sampler& sampler, std::vector<int64_t> h, int64_t first,
                                     int64_t n, int64_t k, const std::function<bool(int64_t)>& onToken) {
  checkDraftRows(lm, k);
  if (!lm.canRewind())
    throw Error("speculative decoding needs tl-plan's in-place KV caches, to go back over the drafts not taken "
                "(run the model through tl-plan)");
  SpeculativeStats stats;
  if (n <= 0) return stats;
  h.push_back(first);
  if (!onToken(first)) return stats;
  int64_t made = 1, next = first;
  const int64_t vocab = lm.vocab();
  while (made < n) {
    // Near the end of the caches a step drafts less (and stops replaying: it is the last).
    const int64_t room = lm.capacity() ? lm.capacity() - lm.length() - 1 : k;
    const int64_t width = std::max<int64_t>(0, std::min(k, room));
    std::vector<int64_t> draft = width ? drafter.propose(h, width) : std::vector<int64_t>{};
    stats.drafted += static_cast<int64_t>(draft.size());
    const size_t real = draft.size();
    while (static_cast<int64_t>(draft.size()) < width) draft.push_back(draft.empty() ? next : draft.back());
    std::vector<int64_t> feed{next};
    feed.insert(feed.end(), draft.begin(), draft.end());
    const int64_t base = lm.length();
    const std::vector<float> logits = lm.step(feed, true);
    ++stats.steps;
    // Row i's token follows feed[i], chosen by the sampler as a plain step's would be (its
    // draws in the same order): draft[i] stays while it is that token, and the rows after
    // a token that is not the draft are not read (nor drawn for).
    std::vector<int64_t> chosen;
    size_t j = 0;
    for (;; ++j) {
      const auto row = logits.begin() + static_cast<int64_t>(j) * vocab;
      chosen.push_back(sampler.sample(std::vector<float>(row, row + vocab)));
      if (j == draft.size() || chosen.back() != draft[j]) break;
    }
    stats.accepted += static_cast<int64_t>(std::min(j, real));
    if (j < draft.size()) lm.rewind(base + 1 + static_cast<int64_t>(j));
    for (size_t i = 0; i <= j && made < n; ++i) {
      h.push_back(chosen[i]);
      ++made;
      if (!onToken(chosen[i])) return stats;
    }
    next = chosen[j];
  }
  return stats;
}

}  // namespace tl
