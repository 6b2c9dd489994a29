// CausalLm: a decoder-only language model behind the executor, fed by token ids.
//
// It recognizes the inputs exporters write (input_ids, attention_mask,
// position_ids, past_key_values.K.key|value with outputs present.K.*, logits). With
// a cache, each step feeds only the new tokens and the cache moves on the device
// from present.* to past_key_values.* (no host copy); without one, each step
// re-runs the whole sequence (the reference the cached path is tested against).
#pragma once

#include <string>
#include <vector>

#include "runtime/executor.h"

namespace tl {

// Rows of the model's learned position table (gpt2's wpe): the smallest table a Gather
// indexes by positions (position_ids or a Range), not by token ids; 0 when there is none
// (rotary models).
int64_t positionTableRows(const Graph& graph);

// A byte-level model's tokens for some text: each byte is its token, 0 to 255.
std::vector<int64_t> byteTokens(const std::string& bytes);

class CausalLm {
 public:
  CausalLm(Executor& executor, const Graph& graph, const ShapeAnalysis& analysis);

  bool hasCache() const { return !kvInputs_.empty(); }
  bool hasMask() const { return hasMask_; }            // an attention_mask input
  bool hasPositions() const { return hasPositions_; }  // a position_ids input
  int64_t vocab() const { return vocab_; }
  int64_t length() const { return length_; }  // tokens consumed so far
  // Rows of the model's learned position table (gpt2's wpe), the longest sequence it
  // can take; 0 when it has none (rotary models).
  int64_t positionLimit() const { return positionLimit_; }
  void reset();
  // Whether the model's caches are tl-plan's in-place ones, which rewind() takes back.
  bool canRewind() const;
  // Forgets the tokens after the first `length` consumed (a speculative step's drafts the
  // model did not take); the next step follows token length - 1. Throws where !canRewind().
  void rewind(int64_t length);
  // Takes the in-place caches' first `length` tokens as this sequence's, written by a run
  // it did not make (a service's prefill, its context's rows given as data): the next step
  // follows them. Throws where !canRewind().
  void adopt(int64_t length);
  // The longest sequence the model takes: its caches' capacity (tl-plan's --max-seq) or
  // its position table, whichever binds; 0 where neither does.
  int64_t capacity() const;
  // The most rows a step takes through the decode kernels (Executor::decodeRows).
  int64_t decodeRows() const;
  // The cache pairs (past_key_values.K.*, present.K.*), in input order.
  const std::vector<std::string>& cacheInputs() const { return kvInputs_; }
  const std::vector<std::string>& cacheOutputs() const { return kvOutputs_; }

  // The shapes of the inputs a step feeds when `tokens` new tokens follow `past`
  // consumed ones (without a cache, the whole sequence), for costing a step.
  std::vector<std::pair<std::string, std::vector<int64_t>>> inputShapes(int64_t tokens, int64_t past) const;

  // Feeds tokens after those already consumed. Returns the logits of the last
  // position, or of every new position when allPositions ([tokens.size() x vocab]).
  std::vector<float> step(const std::vector<int64_t>& tokens, bool allPositions = false);
  // The same, returning the last position's most likely token (the first of equal
  // logits), chosen on the device: a greedy step reads back 8 bytes, not the vocabulary.
  int64_t stepGreedy(const std::vector<int64_t>& tokens);
  // n greedy steps after `first` (the first step feeds it, each later one the token before),
  // returning their tokens, equal to stepGreedy's. With a cache, each step's token goes to
  // the next step's input on the device (Executor::feedToken), so the host enqueues a step
  // while the device runs the one before and reads each token a step behind. Without a
  // cache, or while the device profiles, it runs stepGreedy's way.
  std::vector<int64_t> generateGreedy(int64_t first, int64_t n);

 private:
  // Returns the positions fed; the step computes the last `rows` rows of the logits only
  // (Executor::keepLastRows), the rest of them stale.
  int64_t enqueueStep(const std::vector<int64_t>& tokens, int64_t rows);
  Executor& ex_;
  std::vector<std::string> kvInputs_, kvOutputs_;
  std::vector<std::vector<int64_t>> kvEmpty_;  // [batch 1, heads, 0, head_dim] per cache input
  bool hasMask_ = false, hasPositions_ = false;
  int64_t vocab_ = 0;
  int64_t positionLimit_ = 0;
  int64_t length_ = 0;
  std::vector<int64_t> history_;  // all tokens, for models without a cache
};

}  // namespace tl
