// A context's KV rows on the host, and their exact recompute (LLMS 3.3, issue 11).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "lm/causal_lm.h"
#include "runtime/executor.h"

namespace tl {

// The caches of one context (batch 1): per cache input of the model, in CausalLm's order,
// `tokens` rows of heads[i] x size[i] floats, stored [heads, tokens, size] as the model's
// past_key_values are.
struct ContextKv {
  std::vector<int64_t> heads, size;
  int64_t tokens = 0;
  std::vector<std::vector<float>> caches;
};

// Floats a token holds over all the caches (heads x size each): a chunk's channels.
int64_t kvChannels(const ContextKv& kv);

// An empty ContextKv shaped for the model behind `lm`.
ContextKv emptyContextKv(const CausalLm& lm);

// One run of the model on tokens [first, first + count) of a context with `past`
// (past.tokens == first) as its caches: the new rows, and the tensors in `wanted` (the
// logits, attention probabilities) by name.
struct ContextRun {
  ContextKv rows;
  std::vector<Tensor> wanted;
};
ContextRun runContext(Executor& ex, const CausalLm& lm, const std::vector<int64_t>& tokens, int64_t first,
                      int64_t count, const ContextKv& past, const std::vector<std::string>& wanted);

// The rows of tokens [first, first + count) recomputed from the context's tokens, given
// the rows before them (past.tokens == first): one run of the model with those rows as its
// past, so the new rows are the ones the original run made, to fp32 rounding, for a chunk
// anywhere in the context (whatever comes after it is not needed).
ContextKv recomputeRows(Executor& ex, const CausalLm& lm, const std::vector<int64_t>& tokens, int64_t first,
                        int64_t count, const ContextKv& past);

// The attention probabilities of each layer: Softmax outputs of rank 4 (the exporters'
// [batch, heads, rows, keys]), which an unfused model has. What runContext can ask for to
// learn the attention each key draws.
std::vector<std::string> attentionProbabilities(const Executor& ex);
// Adds the attention mass each key drew in a run (its wanted tensors from index `from`:
// attentionProbabilities' outputs) to mass[key], growing it to the run's keys; returns
// the heads per layer.
int64_t addKeyMass(const ContextRun& run, size_t from, std::vector<double>* mass);

// Rows [first, first + count) as a chunk's values (kv_chunk.h: token-major, each token's
// channels the caches' heads x size in order), and rows appended from such values.
std::vector<float> chunkValues(const ContextKv& kv, int64_t first, int64_t count);
void appendChunk(ContextKv& kv, const std::vector<float>& values, int64_t count);

}  // namespace tl
