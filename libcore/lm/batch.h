// BatchDecoder: several sequences decoded together, one run a step (Inferflow 5's dynamic
// batching: a sequence joins the running batch at the next step and leaves when done).
//
// Each sequence owns a batch row of tl-plan's in-place caches (tl-plan --batch N: N rows),
// with its own length and positions (Executor::setCacheRows): a step feeds every active
// sequence's next token as one [n, 1] run, so each weight is read once for all n. A
// sequence joins with its prompt as a run of its own in batch row 0, the prefill it would
// run alone, so its cache rows are the ones it would have alone; on CPUs a decode step's
// rows are each summed as a lone row's (lower/matmul.cpp's QCase::cpuDecode), so a greedy
// sequence decoded in a batch gets the tokens it gets alone. Rows stay packed: a joiner
// moves row 0's sequence to the first free row, and a leaver's row takes the last row's
// sequence, so a step runs on as many rows as there are sequences.
#pragma once

#include <functional>
#include <map>
#include <vector>

#include "lm/causal_lm.h"

namespace tl {

class BatchDecoder {
 public:
  // Throws tl::Error for a model without tl-plan's in-place caches, attention_mask or
  // position_ids (a row's mask and positions are its own).
  BatchDecoder(Executor& ex, CausalLm& lm);

  int64_t capacity() const { return rows_; }  // sequences at once: the caches' batch rows
  int64_t active() const { return static_cast<int64_t>(order_.size()); }
  int64_t length(int64_t id) const;  // tokens the sequence holds
  int64_t row(int64_t id) const;     // the batch row it holds now (rows move as others join and leave)

  // Starts a sequence: `prefill` runs its first tokens through the CausalLm (or the
  // executor) as a lone sequence of batch 1, which writes batch row 0, and returns what
  // it likes; the sequence then holds the caches' length after it. Returns its id. Throws
  // when every row is taken.
  int64_t join(const std::function<void()>& prefill);
  // ... the common case: its prompt, fed by CausalLm::step; the last position's logits.
  int64_t join(const std::vector<int64_t>& prompt, std::vector<float>* logits);
  void leave(int64_t id);

  // One step of every active sequence: next[id] is the token it takes. Returns each
  // sequence's logits for the token after ([vocab] each, by id).
  std::map<int64_t, std::vector<float>> step(const std::map<int64_t, int64_t>& next);
  // `n` greedy steps of every active sequence, the first taking next[id]: each sequence's
  // n tokens, the argmax of its logits after each step (the first of equals), as n step()s
  // would give. The argmax is taken on the device and fed to the next step there, which is
  // enqueued before the host reads the last step's tokens (Executor::feedToken): the
  // device never waits for the host, as in CausalLm::generateGreedy.
  std::map<int64_t, std::vector<int64_t>> generateGreedy(const std::map<int64_t, int64_t>& next, int64_t n);

 private:
  Executor& ex_;
  CausalLm& lm_;
  int64_t rows_ = 0;
  int64_t next_ = 1;
  std::vector<int64_t> order_;             // the id in each batch row
  std::map<int64_t, int64_t> length_;      // id -> tokens
  // Enqueues a step of every row; ids[b] is row b's token (a placeholder where the device
  // feeds it). Returns the rows.
  int64_t enqueueStep(const std::vector<int64_t>& ids);
  std::vector<int64_t> rowTokens(const std::map<int64_t, int64_t>& next) const;  // next in row order
};

}  // namespace tl
