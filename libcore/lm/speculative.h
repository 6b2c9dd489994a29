// Speculative decoding (Inferflow 8; Leviathan et al. 2023): a drafter proposes the next
// tokens, the model checks them all in one step (a row of logits each), and keeps the
// drafts its own greedy choice agrees with, plus its choice after the last of them: one
// step yields 1 to k + 1 tokens, each the one greedy decoding would have chosen. The
// caches then go back over the drafts not kept (CausalLm::rewind: tl-plan's in-place
// caches).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "lm/causal_lm.h"
#include "sample/sampler.h"

namespace tl {

class Drafter {
 public:
  virtual ~Drafter() = default;
  // Up to k tokens to follow `history` (the prompt and every token chosen so far).
  virtual std::vector<int64_t> propose(const std::vector<int64_t>& history, int64_t k) = 0;
};

// Prompt lookup (no second model): the tokens that followed the latest earlier occurrence
// of the history's last n tokens, n from maxNgram down to 1, in the prompt and the reply.
class PromptLookup : public Drafter {
 public:
  explicit PromptLookup(int64_t maxNgram = 3) : maxNgram_(maxNgram) {}
  std::vector<int64_t> propose(const std::vector<int64_t>& history, int64_t k) override;

 private:
  int64_t maxNgram_;
};

// A draft model: a smaller or lower-bit model of the same vocabulary (a q3h quantization
// of the target), greedy over k steps of its own. Its caches follow the history: what it
// consumed beyond the history's agreement with it is taken back (it must be planned too).
class DraftModel : public Drafter {
 public:
  // Throws tl::Error when the vocabularies differ or the draft cannot rewind.
  DraftModel(CausalLm& draft, const CausalLm& target);
  std::vector<int64_t> propose(const std::vector<int64_t>& history, int64_t k) override;

 private:
  CausalLm& lm_;
  std::vector<int64_t> consumed_;  // the tokens in its caches
};

struct SpeculativeStats {
  int64_t steps = 0;     // the model's checking steps
  int64_t drafted = 0;   // tokens the drafter proposed (fillers not counted)
  int64_t accepted = 0;  // of those, kept
};

// Decoding with a drafter, after lm has consumed `history` (a prompt) and `first` was
// chosen from its last logits (by `sampler`, which holds the history since): hands onToken
// first and then each token chosen, up to n in all (onToken returning false stops). Each
// row's token is the sampler's, drawn in order as plain decoding draws them, so the tokens
// are plain decoding's (greedy: lm.stepGreedy's; sampled: the same text for a seed).
// Leviathan et al.'s rule keeps a draft x with probability min(1, p(x) / q(x)) and else
// draws from (p - q)+; for drafts that are certain (q(x) = 1: prompt lookup, a greedy draft
// model) that is p(x), else p without x, which is what drawing from p and keeping the
// draft where they agree does. Every step feeds k + 1 tokens (a short draft filled out
// with its last token, which the check keeps or drops like any draft), so that each step
// replays the one before.
// Throws tl::Error (usage) for a draft of none or of more tokens than any device's decode
// kernels check in one step (kCpuDecodeRows - 1: runtime/executor.h).
void checkDraftMax(int64_t draftMax);
// ... or of more than lm's device checks: past its decode rows (4 on GPUs) a check takes
// the prefill kernels, whose rounding differs from decoding's, and greedy output could
// leave the model's own.
void checkDraftRows(const CausalLm& lm, int64_t draftMax);

SpeculativeStats generateSpeculative(CausalLm& lm, Drafter& drafter, Sampler& sampler, std::vector<int64_t> history,
                                     int64_t first, int64_t n, int64_t k, const std::function<bool(int64_t)>& onToken);

}  // namespace tl
