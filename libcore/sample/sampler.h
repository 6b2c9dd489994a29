// Choosing the next token from logits (Inferflow section 6): greedy; sampling with
// temperature after top-k, tail-free, typical, top-p and min-p filters, in that order (as
// llama.cpp chains them); Mirostat 1 and 2, which choose their own truncation to hold the
// text's surprise near a target; FSD and randomized FSD, which weigh the model against
// an n-gram anti-LM of the sequence so far. Seeded, so a run can be reproduced.
#pragma once

#include <cstdint>
#include <map>
#include <random>
#include <variant>
#include <vector>

namespace tl {

struct SamplingOptions {
  float temperature = 0.0f;  // <= 0: greedy (argmax), unless FSD
  int topK = 0;              // 0: off; FSD's candidates (6 when 0)
  float tailFree = 1.0f;     // 1: off; tail-free sampling's z
  float typical = 1.0f;      // 1: off; locally typical sampling mass
  float topP = 1.0f;         // 1: off
  float minP = 0.0f;         // 0: off; keep tokens with p >= minP * p_max
  int mirostat = 0;          // 0: off; 1 or 2: Mirostat's version, in place of the filters
  float mirostatTau = 5.0f;  // its target surprise, bits a token
  float mirostatEta = 0.1f;  // its learning rate
  float fsdAlpha = 0.0f;     // 0: off; > 0: FSD, the anti-LM's weight
  int fsdN = 3;              // the anti-LM's n-gram order
  int fsdRandom = 0;         // randomized FSD: the first tokens that sample (half the time)
  uint64_t seed = 0;
  // Whether every step is the argmax of the logits (which a caller may take on the device).
  bool greedy() const { return temperature <= 0 && fsdAlpha <= 0; }
};

// One sampling setting as every tool spells it: the flag --NAME (tl-run, tl-ctxswap call)
// and the service's field NAME with '_' for '-' (docs/tl-ctxswap.md), one list for both.
struct SamplingSetting {
  const char* name;
  const char* help;
  std::variant<float SamplingOptions::*, int SamplingOptions::*, uint64_t SamplingOptions::*> member;
};
const std::vector<SamplingSetting>& samplingSettings();

// FSD's anti-LM (Yang et al. 2023, as Inferflow runs it): n-gram counts of the sequence so
// far. A candidate's probability under it goes order by order from the longest context
// (the last n - 1 tokens) down: each order whose context the candidate has followed adds
// beta times the share still left, times the candidate's count after that context over
// the context's count plus one, and leaves (1 - beta) of the share to the orders below;
// the last order, the unigram, adds the share left times the candidate's count over the
// sequence's length. Nothing is penalized before the sequence holds n - 1 tokens.
class NgramAntiLm {
 public:
  NgramAntiLm(int n, double beta) : n_(n), beta_(beta), follow_(static_cast<size_t>(n)) {}
  void push(int64_t token);
  double probability(int64_t candidate) const;

 private:
  int n_;
  double beta_;
  std::vector<int64_t> tokens_;
  // follow_[i]: the tokens seen after each context of i tokens, with their counts.
  std::vector<std::map<std::vector<int64_t>, std::map<int64_t, int64_t>>> follow_;
};

class Sampler {
 public:
  // Throws tl::Error for values out of range or options that do not combine.
  explicit Sampler(const SamplingOptions& options);
  // The sequence so far (a prompt, a context's tokens), before the first sample: FSD's
  // anti-LM is built from it.
  void prime(const std::vector<int64_t>& tokens);
  // Chooses the next token; it joins the sequence.
  int64_t sample(const std::vector<float>& logits);
  // Mirostat's running maximum surprise (bits), 2 tau before the first token.
  double mirostatMu() const { return mu_; }

 private:
  int64_t fsd(const std::vector<float>& logits);
  int64_t mirostat(const std::vector<float>& logits);
  int64_t filtered(const std::vector<float>& logits);
  SamplingOptions opt_;
  std::mt19937_64 rng_;
  double mu_;
  NgramAntiLm anti_;
  int64_t made_ = 0;
};

// Tail-free sampling's cut (Bricken 2019, as llama.cpp takes it) over probabilities sorted
// from the largest: the weights of the second differences' magnitudes, normalized, summed
// from the head; the tokens before the first index whose sum exceeds z stay (at least 1;
// all of them where no sum does, or fewer than 3 tokens leave no second difference).
size_t tailFreeKeep(const std::vector<double>& sortedProbs, double z);

// Mirostat 1's k (Basu et al. 2021, Algorithm 1): the Zipf exponent s estimated from the
// m = 100 largest probabilities' log ratios (given as the sorted logits over the
// temperature: log(p_i / p_i+1) = l_i - l_i+1), then k = (e 2^mu / (1 - N^-e))^(1/s) with
// e = s - 1, within [1, N].
int64_t mirostatK(const std::vector<double>& sortedScaledLogits, int64_t vocab, double mu);

// Throws tl::Error naming the first logit that is no number (NaN, +inf): a broken model's,
// from which no token may be chosen (-inf, a masked token, is a number).
void checkLogits(const float* logits, int64_t vocab);

// -log2 of the softmax probability of `token`, computed stably.
double negLog2Prob(const float* logits, int64_t vocab, int64_t token);

}  // namespace tl
