#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "cli/error.h"

namespace tl {
namespace {

// FSD's share for the longer contexts (the authors' default).
constexpr double kFsdBeta = 0.9;
// FSD's candidates when --top-k is off (Inferflow's default).
constexpr int kFsdCandidates = 6;
// Mirostat 1 estimates the Zipf exponent from this many of the largest probabilities.
constexpr size_t kMirostatM = 100;

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

// Every token, the most likely first (ties: the lower id first, as greedy's first maximum).
std::vector<Candidate> sorted(const std::vector<float>& logits) {
  std::vector<Candidate> c(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) c[i] = {static_cast<int64_t>(i), logits[i], 0};
  std::stable_sort(c.begin(), c.end(), [](const Candidate& a, const Candidate& b) { return a.logit > b.logit; });
  return c;
}

// One draw from c's probabilities (which sum to 1).
size_t draw(const std::vector<Candidate>& c, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  double r = u(rng), cum = 0;
  for (size_t i = 0; i < c.size(); ++i) {
    cum += c[i].p;
    if (r < cum) return i;
  }
  return c.size() - 1;
}

void need(bool ok, const std::string& message, ExitCode code = ExitCode::BadInput) {
  if (!ok) throw Error(message, code);
}

}  // namespace

const std::vector<SamplingSetting>& samplingSettings() {
  using O = SamplingOptions;
  static const std::vector<SamplingSetting> settings = {
      {"temperature", "0: greedy (the most likely token); > 0: sample at this temperature", &O::temperature},
      {"top-k", "keep the k most likely tokens (0: off); FSD's candidates (0: 6)", &O::topK},
      {"tfs", "tail-free sampling: cut where the probabilities' curvature has summed to z (1: off)", &O::tailFree},
      {"typical", "locally typical sampling: the tokens nearest the entropy, up to this mass (1: off)", &O::typical},
      {"top-p", "keep the smallest set with this probability mass (1: off)", &O::topP},
      {"min-p", "drop tokens below min-p times the top probability (0: off)", &O::minP},
      {"mirostat", "1 or 2: Mirostat, which cuts the tail to hold each token's surprise near --mirostat-tau\n"
                   "(in place of the filters above; needs --temperature > 0); 0: off", &O::mirostat},
      {"mirostat-tau", "Mirostat's target surprise, bits a token (lower: more focused text)", &O::mirostatTau},
      {"mirostat-eta", "Mirostat's learning rate, in (0, 1]", &O::mirostatEta},
      {"fsd-alpha", "FSD: choose among the --top-k candidates by (1 - a) p - a p_anti, the anti-LM an n-gram\n"
                    "model of the text so far, so that repeating it costs (0: off)", &O::fsdAlpha},
      {"fsd-n", "FSD's n-gram order", &O::fsdN},
      {"fsd-random", "randomized FSD: each of the first N tokens samples (with --temperature and the filters)\n"
                     "half the time, for varied replies; FSD's choice otherwise (0: off)", &O::fsdRandom},
      {"seed", "random seed for sampling", &O::seed},
  };
  return settings;
}

void NgramAntiLm::push(int64_t token) {
  for (int i = 0; i < n_; ++i) {
    if (tokens_.size() < static_cast<size_t>(i)) break;
    std::vector<int64_t> context(tokens_.end() - i, tokens_.end());
    ++follow_[static_cast<size_t>(i)][context][token];
  }
  tokens_.push_back(token);
}

double NgramAntiLm::probability(int64_t candidate) const {
  if (tokens_.size() + 1 < static_cast<size_t>(n_)) return 0;
  double left = 1, p = 0;
  for (int i = n_ - 1; i >= 0; --i) {
    const auto& byContext = follow_[static_cast<size_t>(i)];
    auto ctx = byContext.find(std::vector<int64_t>(tokens_.end() - i, tokens_.end()));
    if (ctx == byContext.end()) continue;
    auto seen = ctx->second.find(candidate);
    if (seen == ctx->second.end()) continue;
    int64_t total = 0;
    for (const auto& [t, count] : ctx->second) total += count;
    p += i == 0 ? left * double(seen->second) / double(total) : left * kFsdBeta * double(seen->second) / double(total + 1);
    left -= left * kFsdBeta;
  }
  return p;
}

Sampler::Sampler(const SamplingOptions& options)
    : opt_(options), rng_(options.seed), mu_(2.0 * options.mirostatTau), anti_(std::max(options.fsdN, 1), kFsdBeta) {
  need(opt_.topK >= 0, "--top-k must be >= 0", ExitCode::Usage);
  need(opt_.topP > 0 && opt_.topP <= 1, "--top-p must be in (0, 1]", ExitCode::Usage);
  need(opt_.minP >= 0 && opt_.minP < 1, "--min-p must be in [0, 1)", ExitCode::Usage);
  need(opt_.typical > 0 && opt_.typical <= 1, "--typical must be in (0, 1]", ExitCode::Usage);
  need(opt_.tailFree > 0 && opt_.tailFree <= 1, "--tfs must be in (0, 1]", ExitCode::Usage);
  const bool filters = opt_.topK > 0 || opt_.tailFree < 1 || opt_.typical < 1 || opt_.topP < 1 || opt_.minP > 0;
  need(opt_.mirostat >= 0 && opt_.mirostat <= 2, "--mirostat must be 0 (off), 1 or 2");
  if (opt_.mirostat) {
    need(opt_.mirostatTau > 0, "--mirostat-tau must be above 0 (the target surprise, bits a token)");
    need(opt_.mirostatEta > 0 && opt_.mirostatEta <= 1, "--mirostat-eta must be in (0, 1]");
    need(opt_.temperature > 0, "--mirostat samples: give --temperature above 0 (1: the model's own distribution)");
    need(!filters && opt_.fsdAlpha <= 0,
         "--mirostat chooses its own cut: it takes none of --top-k, --tfs, --typical, --top-p, --min-p, --fsd-alpha");
  }
  need(opt_.fsdAlpha >= 0 && opt_.fsdAlpha <= 1, "--fsd-alpha must be in [0, 1]");
  need(opt_.fsdN >= 1, "--fsd-n must be at least 1");
  need(opt_.fsdRandom >= 0, "--fsd-random must be >= 0");
  if (opt_.fsdRandom > 0) {
    need(opt_.fsdAlpha > 0, "--fsd-random randomizes FSD: give --fsd-alpha above 0");
    need(opt_.temperature > 0, "--fsd-random samples: give --temperature above 0");
  } else if (opt_.fsdAlpha > 0) {
    need(opt_.temperature <= 0 && opt_.tailFree == 1 && opt_.typical == 1 && opt_.topP == 1 && opt_.minP == 0,
         "FSD chooses deterministically among --top-k candidates: --temperature and the other filters take part "
         "only with --fsd-random");
  }
}

void Sampler::prime(const std::vector<int64_t>& tokens) {
  if (opt_.fsdAlpha <= 0) return;
  for (int64_t t : tokens) anti_.push(t);
}

int64_t Sampler::sample(const std::vector<float>& logits) {
  if (logits.empty()) throw Error("no logits to sample from");
  checkLogits(logits.data(), static_cast<int64_t>(logits.size()));
  int64_t next;
  if (opt_.fsdAlpha > 0) {
    const bool sampleNow = made_ < opt_.fsdRandom && std::uniform_real_distribution<double>(0.0, 1.0)(rng_) < 0.5;
    next = sampleNow ? filtered(logits) : fsd(logits);
    anti_.push(next);
  } else if (opt_.mirostat) {
    next = mirostat(logits);
  } else if (opt_.temperature <= 0) {
    next = std::max_element(logits.begin(), logits.end()) - logits.begin();  // first maximum
  } else {
    next = filtered(logits);
  }
  ++made_;
  return next;
}

// The candidate of the largest (1 - alpha) p - alpha p_anti, p the model's probability at
// temperature 1 (the first of equal scores, the more likely).
int64_t Sampler::fsd(const std::vector<float>& logits) {
  auto c = sorted(logits);
  normalize(c, 1.0f);
  c.resize(std::min(c.size(), static_cast<size_t>(opt_.topK > 0 ? opt_.topK : kFsdCandidates)));
  const double a = opt_.fsdAlpha;
  int64_t best = c.front().id;
  double bestScore = -INFINITY;
  for (const auto& x : c) {
    const double score = (1 - a) * x.p - a * anti_.probability(x.id);
    if (score > bestScore) bestScore = score, best = x.id;
  }
  return best;
}

int64_t Sampler::mirostat(const std::vector<float>& logits) {
  auto c = sorted(logits);
  const double t = opt_.temperature;
  if (opt_.mirostat == 1) {
    std::vector<double> scaled;
    for (size_t i = 0; i < std::min(c.size(), kMirostatM) && std::isfinite(c[i].logit); ++i) scaled.push_back(c[i].logit / t);
    c.resize(static_cast<size_t>(mirostatK(scaled, static_cast<int64_t>(logits.size()), mu_)));
    normalize(c, opt_.temperature);
  } else {  // 2: the tokens whose surprise is at most mu, renormalized
    normalize(c, opt_.temperature);
    size_t keep = 0;
    while (keep < c.size() && -std::log2(c[keep].p) <= mu_) ++keep;
    c.resize(std::max<size_t>(keep, 1));
    normalize(c, opt_.temperature);
  }
  const size_t i = draw(c, rng_);
  mu_ -= opt_.mirostatEta * (-std::log2(c[i].p) - opt_.mirostatTau);
  return c[i].id;
}

int64_t Sampler::filtered(const std::vector<float>& logits) {
  auto c = sorted(logits);
  if (opt_.topK > 0 && static_cast<size_t>(opt_.topK) < c.size()) c.resize(static_cast<size_t>(opt_.topK));
  normalize(c, 1.0f);
  if (opt_.tailFree < 1) {
    std::vector<double> p;
    for (const auto& x : c) p.push_back(x.p);
    c.resize(tailFreeKeep(p, opt_.tailFree));
    normalize(c, 1.0f);
  }
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
  return c[draw(c, rng_)].id;
}

size_t tailFreeKeep(const std::vector<double>& p, double z) {
  if (p.size() < 3) return p.size();
  std::vector<double> d2(p.size() - 2);
  double sum = 0;
  for (size_t i = 0; i < d2.size(); ++i) sum += d2[i] = std::fabs((p[i] - p[i + 1]) - (p[i + 1] - p[i + 2]));
  if (sum <= 0) return p.size();  // a straight line has no tail to find
  double cum = 0;
  for (size_t i = 0; i < d2.size(); ++i)
    if ((cum += d2[i] / sum) > z) return std::max<size_t>(i, 1);
  return p.size();
}

int64_t mirostatK(const std::vector<double>& l, int64_t vocab, double mu) {
  double tb = 0, tt = 0;
  for (size_t i = 0; i + 1 < l.size(); ++i) {
    const double ti = std::log(double(i + 2) / double(i + 1));
    tb += ti * (l[i] - l[i + 1]);
    tt += ti * ti;
  }
  if (tt == 0) return 1;  // one token
  const double s = tb / tt;
  if (!(s > 1e-6)) return vocab;  // flat (or -inf logits): no Zipf tail to cut
  const double e = s - 1;
  // At e = 0 the ratio e / (1 - N^-e) is its limit, 1 / ln N.
  const double ratio = std::fabs(e) < 1e-9 ? 1 / std::log(double(vocab)) : e / (1 - std::pow(double(vocab), -e));
  const double k = std::pow(ratio * std::pow(2.0, mu), 1 / s);
  if (!(k < double(vocab))) return vocab;
  return std::max<int64_t>(static_cast<int64_t>(k), 1);
}

void checkLogits(const float* logits, int64_t vocab) {
  // NaN fails every comparison and +inf makes every probability NaN: either would choose a
  // token silently, with no meaning.
  for (int64_t i = 0; i < vocab; ++i)
    if (std::isnan(logits[i]) || logits[i] == INFINITY)
      throw Error("the logits are not numbers (token " + std::to_string(i) + ": " + (std::isnan(logits[i]) ? "nan" : "inf") +
                  "): the model's output is broken");
}

double negLog2Prob(const float* logits, int64_t vocab, int64_t token) {
  float mx = -INFINITY;
  for (int64_t i = 0; i < vocab; ++i) mx = std::max(mx, logits[i]);
  double sum = 0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(double(logits[i]) - mx);
  return (std::log(sum) - (double(logits[token]) - mx)) / std::log(2.0);
}

}  // namespace tl
