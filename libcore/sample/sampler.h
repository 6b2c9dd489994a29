// Choosing the next token from logits (Inferflow section 6): greedy, or sampling
// with temperature after top-k, typical, top-p and min-p filters, in that order (as
// llama.cpp chains them). Seeded, so a run can be reproduced.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace tl {

struct SamplingOptions {
  float temperature = 0.0f;  // <= 0: greedy (argmax)
  int topK = 0;              // 0: off
  float topP = 1.0f;         // 1: off
  float minP = 0.0f;         // 0: off; keep tokens with p >= minP * p_max
  float typical = 1.0f;      // 1: off; locally typical sampling mass
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingOptions& options);
  int64_t sample(const std::vector<float>& logits);

 private:
  SamplingOptions opt_;
  std::mt19937_64 rng_;
};

// -log2 of the softmax probability of `token`, computed stably.
double negLog2Prob(const float* logits, int64_t vocab, int64_t token);

}  // namespace tl
