// The decoding methods of Inferflow 6 against their papers' formulas, written out here
// on fixed logits: tail-free sampling (Bricken 2019), Mirostat 1 and 2 (Basu et al. 2021),
// FSD and randomized FSD (Yang et al. 2023). The other filters' draws are tested in
// tests/models/generate_test.cpp (Sampler.DrawsFollowTheFilteredDistribution).
#include "sample/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "cli/error.h"

namespace tl {
namespace {

// Zipf's law over n tokens, p_i proportional to (i + 1)^-s, as logits (token i of rank i).
std::vector<float> zipfLogits(int64_t n, double s) {
  std::vector<float> l(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) l[static_cast<size_t>(i)] = static_cast<float>(-s * std::log(double(i + 1)));
  return l;
}

// The first `keep` tokens' probabilities under softmax(logits / t), renormalized over them.
std::vector<double> truncated(const std::vector<float>& logits, size_t keep, double t) {
  std::vector<double> p(keep);
  double sum = 0;
  for (size_t i = 0; i < keep; ++i) sum += p[i] = std::exp((logits[i] - logits[0]) / t);
  for (auto& x : p) x /= sum;
  return p;
}

// Probabilities {1/2, 1/4, 1/8, 1/16, 1/16}: first differences {1/4, 1/8, 1/16, 0}, second
// {1/8, 1/16, 1/16}, their weights {1/2, 1/4, 1/4} summing to {1/2, 3/4, 1}. The cut falls
// before the first index whose sum exceeds z: at 0 for z < 1/2 (one token kept, the
// least llama.cpp keeps), 1 for z in [1/2, 3/4), 2 for z in [3/4, 1); z = 1 keeps all.
TEST(TailFree, CutsWhereTheSecondDifferencesHaveSummedToZ) {
  const std::vector<double> p{0.5, 0.25, 0.125, 0.0625, 0.0625};
  EXPECT_EQ(tailFreeKeep(p, 0.4), 1u);
  EXPECT_EQ(tailFreeKeep(p, 0.6), 1u);
  EXPECT_EQ(tailFreeKeep(p, 0.9), 2u);
  EXPECT_EQ(tailFreeKeep(p, 1.0), 5u);
  EXPECT_EQ(tailFreeKeep({0.6, 0.4}, 0.5), 2u);              // no second difference
  EXPECT_EQ(tailFreeKeep({0.25, 0.25, 0.25, 0.25}, 0.5), 4u);  // a flat line: no tail
  // Drawn through the Sampler at temperature 1, z 0.9 keeps tokens 0 and 1, at 2 : 1.
  SamplingOptions o;
  o.temperature = 1;
  o.tailFree = 0.9f;
  o.seed = 3;
  Sampler s(o);
  std::vector<float> logits;
  for (double x : p) logits.push_back(static_cast<float>(std::log(x)));
  int count[5] = {};
  for (int i = 0; i < 6000; ++i) ++count[s.sample(logits)];
  EXPECT_EQ(count[0] + count[1], 6000);
  EXPECT_NEAR(count[0] / 6000.0, 2.0 / 3.0, 0.02);
}

// Mirostat 1's k (Algorithm 1): on logits that follow Zipf's law exactly the estimate of s
// is s itself, so k = ((s - 1) 2^mu / (1 - N^(1 - s)))^(1/s); at s = 1, 2^mu / ln N.
TEST(Mirostat, KFromTheZipfExponent) {
  for (double s : {1.2, 1.5, 2.0})
    for (double mu : {4.0, 8.0, 10.0}) {
      const int64_t n = 5000;
      auto l = zipfLogits(100, s);
      const std::vector<double> scaled(l.begin(), l.end());
      const double k = std::pow((s - 1) * std::pow(2.0, mu) / (1 - std::pow(double(n), 1 - s)), 1 / s);
      EXPECT_EQ(mirostatK(scaled, n, mu), std::min<int64_t>(n, std::max<int64_t>(1, static_cast<int64_t>(k))))
          << "s " << s << " mu " << mu;
    }
  const auto l = zipfLogits(100, 1.0);
  EXPECT_EQ(mirostatK(std::vector<double>(l.begin(), l.end()), 1000, 6.0), static_cast<int64_t>(64 / std::log(1000.0)));
  EXPECT_EQ(mirostatK({0, 0, 0, 0}, 1000, 6.0), 1000);  // flat: nothing to cut
  EXPECT_EQ(mirostatK({0}, 1000, 6.0), 1);              // one finite token
}

// Each step of both versions against the paper's loop run here beside the Sampler: the
// truncation from mu (version 1: the top k; 2: the tokens of surprise -log2 p <= mu), the
// draw within it, and mu -= eta (surprise - tau), the surprise under the truncated,
// renormalized distribution. And the point of it: the surprise averages near tau.
TEST(Mirostat, FollowsThePapersLoop) {
  const int64_t n = 2000;
  const auto logits = zipfLogits(n, 1.3);
  for (int version : {1, 2}) {
    SamplingOptions o;
    o.temperature = 1;
    o.mirostat = version;
    o.mirostatTau = 4;
    o.mirostatEta = 0.1f;
    o.seed = 17;
    Sampler s(o);
    double mu = 2 * o.mirostatTau, surprise = 0;
    EXPECT_DOUBLE_EQ(s.mirostatMu(), mu);
    const int steps = 3000;
    for (int i = 0; i < steps; ++i) {
      size_t keep;
      if (version == 1) {
        const std::vector<double> top(logits.begin(), logits.begin() + 100);
        keep = static_cast<size_t>(mirostatK(top, n, mu));
      } else {
        const auto p = truncated(logits, static_cast<size_t>(n), 1.0);
        keep = 0;
        while (keep < p.size() && -std::log2(p[keep]) <= mu) ++keep;
        keep = std::max<size_t>(keep, 1);
      }
      const int64_t t = s.sample(logits);
      ASSERT_LT(static_cast<size_t>(t), keep) << "version " << version << " step " << i;
      const double bits = -std::log2(truncated(logits, keep, 1.0)[static_cast<size_t>(t)]);
      mu -= o.mirostatEta * (bits - o.mirostatTau);
      surprise += bits;
      ASSERT_NEAR(s.mirostatMu(), mu, 1e-9) << "version " << version << " step " << i;
    }
    EXPECT_NEAR(surprise / steps, o.mirostatTau, 0.25) << "version " << version;
  }
}

// The anti-LM over "1 2 3 1 2", n 3, beta 0.9, by hand. Candidate 3 has followed the
// context (1, 2) once in one: 0.9 x 1/2 = 0.45, leaving 0.1; (2) once in one: 0.1 x 0.9 x
// 1/2 = 0.045, leaving 0.01; the unigram 1 of 5: 0.002; 0.497 in all. Candidate 1 never
// followed (1, 2) or (2): the unigram alone, 2 of 5 with the whole share, 0.4.
TEST(Fsd, AntiLmByHand) {
  NgramAntiLm a(3, 0.9);
  a.push(1);
  EXPECT_EQ(a.probability(1), 0) << "fewer than n - 1 tokens: nothing penalized";
  for (int64_t t : {2, 3, 1, 2}) a.push(t);
  EXPECT_NEAR(a.probability(3), 0.497, 1e-12);
  EXPECT_NEAR(a.probability(1), 0.4, 1e-12);
  EXPECT_NEAR(a.probability(2), 0.4, 1e-12);
  EXPECT_EQ(a.probability(4), 0);
}

// FSD's choice, (1 - a) p - a p_anti over the candidates, after "1 2 3 1 2" with p(3) 0.5,
// p(1) 0.3, p(4) 0.2: at a = 0.5 token 3 scores 0.0015, 1 -0.05 and 4 0.1, so 4 (the
// repetition avoided); at a = 0.1, 3 (0.4003 against 0.23 and 0.18). Then, 4 being in the
// text, the same logits at a = 0.5 give 3 (4's unigram 1/6 costs it 0.083, 3's too: 0.167
// against 0.017).
TEST(Fsd, ChoosesByTheContrastWithTheAntiLm) {
  const std::vector<float> logits{-INFINITY, std::log(0.3f), -INFINITY, std::log(0.5f), std::log(0.2f)};
  for (auto [alpha, first, second] : {std::tuple{0.5f, 4, 3}, std::tuple{0.1f, 3, 3}}) {
    SamplingOptions o;
    o.fsdAlpha = alpha;
    Sampler s(o);
    s.prime({1, 2, 3, 1, 2});
    EXPECT_EQ(s.sample(logits), first) << "alpha " << alpha;
    EXPECT_EQ(s.sample(logits), second) << "alpha " << alpha;
  }
  // The candidates are the top k: at --top-k 1 only the most likely can be chosen.
  SamplingOptions one;
  one.fsdAlpha = 0.5f;
  one.topK = 1;
  Sampler s(one);
  s.prime({1, 2, 3, 1, 2});
  EXPECT_EQ(s.sample(logits), 3);
}

// Randomized FSD samples in half of its first N steps: with FSD's choice always the most
// likely token (a tiny alpha) and sampling drawing it 40% of the time, it comes 70% of the
// first N steps, and every step after.
TEST(Fsd, RandomizedSamplesHalfItsFirstSteps) {
  const std::vector<float> logits{std::log(0.4f), std::log(0.3f), std::log(0.3f)};
  SamplingOptions o;
  o.fsdAlpha = 1e-6f;
  o.fsdRandom = 4000;
  o.temperature = 1;
  o.seed = 9;
  Sampler s(o);
  int first = 0;
  for (int i = 0; i < o.fsdRandom; ++i) first += s.sample(logits) == 0;
  EXPECT_NEAR(first / double(o.fsdRandom), 0.7, 0.025);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(s.sample(logits), 0) << "step " << o.fsdRandom + i;
}

// Settings that cannot work are one line each, before any token: exit 1.
TEST(SamplerSettings, RefusedWithOneLine) {
  const auto refused = [](SamplingOptions o, const std::string& want) {
    try {
      Sampler s(o);
      ADD_FAILURE() << "accepted: " << want;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::BadInput) << e.what();
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  SamplingOptions m;
  m.mirostat = 2;
  m.temperature = 1;
  m.mirostatTau = 0;
  refused(m, "--mirostat-tau must be above 0");
  m.mirostatTau = -1;
  refused(m, "--mirostat-tau must be above 0");
  m.mirostatTau = 5;
  m.mirostatEta = 0;
  refused(m, "--mirostat-eta must be in (0, 1]");
  m.mirostatEta = 0.1f;
  m.topP = 0.9f;
  refused(m, "--mirostat chooses its own cut");
  m.topP = 1;
  m.temperature = 0;
  refused(m, "--mirostat samples: give --temperature above 0");
  m.mirostat = 3;
  refused(m, "--mirostat must be 0 (off), 1 or 2");
  SamplingOptions f;
  f.fsdAlpha = 1.5f;
  refused(f, "--fsd-alpha must be in [0, 1]");
  f.fsdAlpha = 0.5f;
  f.fsdN = 0;
  refused(f, "--fsd-n must be at least 1");
  f.fsdN = 3;
  f.temperature = 0.7f;
  refused(f, "FSD chooses deterministically");
  f.fsdRandom = 5;
  f.temperature = 0;
  refused(f, "--fsd-random samples: give --temperature above 0");
  SamplingOptions r;
  r.fsdRandom = 5;
  r.temperature = 1;
  refused(r, "--fsd-random randomizes FSD: give --fsd-alpha above 0");
}

}  // namespace
}  // namespace tl
