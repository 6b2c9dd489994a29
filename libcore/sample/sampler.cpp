#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "cli/error.h"

namespace tl {

Sampler::Sampler(const SamplingOptions& options) : opt_(options), rng_(options.seed) {
  if (opt_.topK < 0) throw Error("--top-k must be >= 0", ExitCode::Usage);
  if (!(opt_.topP > 0 && opt_.topP <= 1)) throw Error("--top-p must be in (0, 1]", ExitCode::Usage);
  if (!(opt_.minP >= 0 && opt_.minP < 1)) throw Error("--min-p must be in [0, 1)", ExitCode::Usage);
  if (!(opt_.typical > 0 && opt_.typical <= 1)) throw Error("--typical must be in (0, 1]", ExitCode::Usage);
}

namespace {

struct Candidate {
  int64_t id;
  float logit;
  double p;
};

void normalize(std::vector<Candidate>& c, float temperature) {
  float mx = -INFINITY;
  for (const auto& x : c) mx = std::max(mx, x.logit);
  double sum = 0;
  for (auto& x : c) sum += x.p = std::exp(double(x.logit - mx) / temperature);
  for (auto& x : c) x.p /= sum;
}

// Keeps the shortest prefix (in the current order) whose probability reaches `mass`.
void keepMass(std::vector<Candidate>& c, double mass) {
  double cum = 0;
  size_t keep = 0;
  while (keep < c.size()) {
    cum += c[keep++].p;
    if (cum >= mass) break;
  }
  c.resize(std::max<size_t>(keep, 1));
}

}  // namespace

int64_t Sampler::sample(const std::vector<float>& logits) {
  if (logits.empty()) throw Error("no logits to sample from");
  // NaN fails every comparison and +inf makes every probability NaN: either would draw a
  // token silently, with no meaning.
  for (size_t i = 0; i < logits.size(); ++i)
    if (std::isnan(logits[i]) || logits[i] == INFINITY)
      throw Error("the logits are not numbers (token " + std::to_string(i) + ": " + (std::isnan(logits[i]) ? "nan" : "inf") +
                  "): the model's output is broken");
  if (opt_.temperature <= 0)
    return std::max_element(logits.begin(), logits.end()) - logits.begin();  // first maximum
  std::vector<Candidate> c(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) c[i] = {static_cast<int64_t>(i), logits[i], 0};
  std::stable_sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) { return a.logit > b.logit; });
  if (opt_.topK > 0 && static_cast<size_t>(opt_.topK) < c.size()) c.resize(static_cast<size_t>(opt_.topK));
  normalize(c, 1.0f);
  if (opt_.typical < 1) {
    double entropy = 0;
    for (const auto& x : c) entropy -= x.p > 0 ? x.p * std::log(x.p) : 0;
    std::stable_sort(c.begin(), c.end(), [&](const Candidate& a, const Candidate& b) {
      return std::fabs(-std::log(a.p) - entropy) < std::fabs(-std::log(b.p) - entropy);
    });
    keepMass(c, opt_.typical);
    std::stable_sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) { return a.p > b.p; });
    normalize(c, 1.0f);
  }
  // Top-p's survivors are not renormalized: min-p compares each to a share of the largest,
  // the same whatever the scale, and the draw's normalize starts again from the logits.
  if (opt_.topP < 1) keepMass(c, opt_.topP);
  if (opt_.minP > 0) {
    const double floor = opt_.minP * c.front().p;
    c.erase(std::remove_if(c.begin() + 1, c.end(), [&](const Candidate& x) { return x.p < floor; }), c.end());
  }
  normalize(c, opt_.temperature);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  double r = u(rng_), cum = 0;
  for (const auto& x : c) {
    cum += x.p;
    if (r < cum) return x.id;
  }
  return c.back().id;
}

double negLog2Prob(const float* logits, int64_t vocab, int64_t token) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - mx);
  return (std::log(sum) - (double(logits[token]) - mx)) / std::log(2.0);
}

}  // namespace tl
