// Generation: the cached path (present.* carried to past_key_values.* on the
// device) must give exactly what re-running the whole sequence gives.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "cli/error.h"
#include "cli/test_support.h"
#include "fuse/fuse.h"
#include "graph/graph.h"
#include "lm/causal_lm.h"
#include "lm/loaded_lm.h"
#include "onnx/model_io.h"
#include "runtime/executor.h"
#include "sample/sampler.h"
#include "shape/shape_inference.h"

namespace tl {
namespace {

std::string greedy(CausalLm& lm, const std::string& prompt, int n) {
  std::vector<int64_t> toks(prompt.begin(), prompt.end());
  Sampler s(SamplingOptions{});
  auto logits = lm.step(toks);
  std::string out;
  for (int i = 0; i < n; ++i) {
    int64_t t = s.sample(logits);
    out += static_cast<char>(t);
    if (i + 1 < n) logits = lm.step({t});
  }
  return out;
}

TEST(Generate, CachedEqualsRecomputedAndLooksLikePython) {
  LoadedLm past((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  LoadedLm nopast((test::sharedModels() / "bytellama-nopast/model.onnx").string());
  ASSERT_TRUE(past.lm.hasCache());
  ASSERT_FALSE(nopast.lm.hasCache());
  const std::string a = greedy(past.lm, "def ", 80), b = greedy(nopast.lm, "def ", 80);
  EXPECT_EQ(a, b);
  int python = 0;
  for (const char* w : {"self", "return", "(", "):", "\n    ", "=", "."}) python += a.find(w) != std::string::npos;
  EXPECT_GE(python, 4) << a;
}

TEST(Generate, EmptyCachePrefillMatchesTheModelWithoutCache) {
  // bytellama's two exports share their trained weights (the tiny random ones do not).
  LoadedLm past((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  LoadedLm nopast((test::sharedModels() / "bytellama-nopast/model.onnx").string());
  const std::vector<int64_t> toks{5, 77, 200, 13, 42, 9};
  auto a = past.lm.step(toks, true), b = nopast.lm.step(toks, true);
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4) << i;
}

// A prefill step computes the logits of its last position only (Executor::keepLastRows:
// the fused lm_head runs on that row, copied in and out), equal to an every-row run's last.
TEST(Generate, PrefillComputesOnlyTheLastRowOfTheLogits) {
  Model model = loadModel((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  runFusePasses(model, {});
  LoadedLm fused(std::move(model));
  CausalLm& lm = fused.lm;
  Executor& ex = fused.ex;
  const std::vector<int64_t> toks{5, 77, 200, 13, 42, 9, 100, 3};
  const auto all = lm.step(toks, true);
  const std::string head = fused.graph.nodeName(static_cast<size_t>(fused.graph.producer("logits")));
  auto copies = [&] {
    int n = 0;
    for (const auto& l : ex.explain()) n += l.node == head && l.kernel == "copy_b32";
    return n;
  };
  EXPECT_EQ(copies(), 0);
  lm.reset();
  const auto last = lm.step(toks);
  EXPECT_EQ(copies(), 2) << "the lm_head's last row in, its logits out";
  ASSERT_EQ(last.size(), 256u);
  for (size_t i = 0; i < last.size(); ++i) ASSERT_NEAR(last[i], all[all.size() - 256 + i], 1e-4) << i;
  lm.step({7});  // a decode step: one row, nothing copied
  EXPECT_EQ(copies(), 0);
}

TEST(Generate, ADecodeStepWaitsOnlyForItsLogits) {
  LoadedLm past((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  past.lm.step({'d', 'e', 'f', ' '});
  for (int i = 0; i < 3; ++i) {
    const int64_t before = past.ex.syncs();
    past.lm.step({'x'});
    EXPECT_EQ(past.ex.syncs() - before, 1);
  }
}

TEST(Generate, GreedyOnTheDeviceEqualsTheHostArgmax) {
  LoadedLm a((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  LoadedLm b((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  Sampler s(SamplingOptions{});
  const std::vector<int64_t> prompt{'d', 'e', 'f', ' '};
  int64_t x = s.sample(a.lm.step(prompt)), y = b.lm.stepGreedy(prompt);
  for (int i = 0; i < 40; ++i) {
    ASSERT_EQ(x, y) << "step " << i;
    const int64_t before = b.ex.syncs();
    x = s.sample(a.lm.step({x}));
    y = b.lm.stepGreedy({y});
    EXPECT_EQ(b.ex.syncs() - before, 1);
  }
}

// The device's argmax of a row (kernels/reduce.cl's argmax_row_f32, greedy decoding's next
// token), on rows that make the reduction's order matter: equal maxima (the first wins), a
// row of -inf (index 0, as std::max_element), NaN and +inf (refused, naming the first, as
// the sampler refuses them), lengths around the group size, and one peak at each position
// an item of the 256 holds first or last, or the reduction's halves meet (0, 127, 128,
// 255, 256, the last).
TEST(ArgmaxRowKernel, TakesTheFirstOfEquals) {
  for (int64_t n : {1, 7, 255, 256, 257, 1000, 151936}) {
    std::vector<float> v(static_cast<size_t>(n));
    std::mt19937 rng(static_cast<uint32_t>(n));
    std::uniform_real_distribution<float> u(-4, 4);
    for (auto& f : v) f = u(rng);
    std::vector<std::vector<float>> rows{v};
    if (n > 3) {
      auto tie = v;
      tie[n / 3] = tie[n - 1] = tie[2] = 9.f;
      rows.push_back(tie);
    }
    for (int64_t p : {int64_t{0}, int64_t{127}, int64_t{128}, int64_t{255}, int64_t{256}, n - 1})
      if (p < n && n < 100000) {
        auto peak = v;
        peak[static_cast<size_t>(p)] = 9.f;
        rows.push_back(peak);
      }
    rows.push_back(std::vector<float>(static_cast<size_t>(n), -std::numeric_limits<float>::infinity()));
    Model m = test::oneNodeModel("Identity", {{"x", {"1", std::to_string(n)}}}, 0, "");
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto& row = rows[r];
      int64_t want = 0;
      for (int64_t i = 1; i < n; ++i)
        if (row[i] > row[want]) want = i;
      test::onBothFamilies(m, [&](Executor& ex, bool gpu) {
        ex.run({test::floats("x", row, {1, n})});
        EXPECT_EQ(ex.argmax("y", 0, n), want) << "n " << n << " row " << r << (gpu ? " gpu" : " cpu");
      });
    }
    // a NaN or +inf anywhere, a large value before it: refused, the first named
    for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()})
      for (int64_t at : {n / 2, n - 1}) {
        auto row = v;
        row[0] = 9.f;
        row[static_cast<size_t>(at)] = bad;
        if (at + 1 < n) row[static_cast<size_t>(n - 1)] = bad;
        test::onBothFamilies(m, [&](Executor& ex, bool gpu) {
          ex.run({test::floats("x", row, {1, n})});
          try {
            ex.argmax("y", 0, n);
            ADD_FAILURE() << bad << " at " << at << " of " << n << (gpu ? " gpu" : " cpu") << " taken";
          } catch (const Error& e) {
            EXPECT_NE(std::string(e.what()).find("the logits are not numbers (token " + std::to_string(at) + ": "),
                      std::string::npos)
                << e.what();
          }
        });
      }
  }
}

// The mask an export builds from attention_mask runs on the host while it is small (a
// decode step's row) and on the device when it is not (a 300-token prefill's 300 x 300):
// both give the logits of the model without a cache, and each step runs where it should.
TEST(Generate, HostMaskMovesToTheDeviceAndBack) {
  LoadedLm past((test::sourceDir() / "models/bytellama-past/model.onnx").string());
  LoadedLm nopast((test::sharedModels() / "bytellama-nopast/model.onnx").string());
  past.device.setProfiling(true);
  auto ran = [&](const char* op) {
    for (const auto& t : past.ex.profile())
      if (t.op == op) return true;
    return false;
  };
  std::vector<int64_t> toks;
  for (int i = 0; i < 300; ++i) toks.push_back((i * 37 + 11) % 256);
  auto a = past.lm.step(toks), b = nopast.lm.step(toks);
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4) << i;
  EXPECT_TRUE(ran("Where"));  // the prefill's mask: on the device
  for (int64_t t : {5, 77, 200}) {
    a = past.lm.step({t});
    b = nopast.lm.step({t});
    for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4) << i;
    EXPECT_FALSE(ran("Where"));  // a decode step's: on the host
  }
}

// Draws land on each token as often as the filters and the temperature say: over 20,000
// draws of each setting, no token outside the set the filters keep, and a chi-squared
// statistic against softmax(logits / T) over that set below its 1e-4 critical value (the
// seeds are fixed, so this never flakes; a sampler that ignores the temperature, a filter
// or the random stream fails it). The kept sets are worked out by hand from p = softmax:
// token 1 0.407, 4 0.368, 2 0.150, 0 0.055, 3 0.020; entropy 1.257 nats, so typical
// sampling ranks 4, 1, 2, 0, 3.
TEST(Sampler, DrawsFollowTheFilteredDistribution) {
  const std::vector<float> logits{0.0f, 2.0f, 1.0f, -1.0f, 1.9f};
  EXPECT_EQ(Sampler(SamplingOptions{}).sample(logits), 1);
  EXPECT_EQ(Sampler(SamplingOptions{}).sample({0.5f, 3.0f, 3.0f}), 1);  // ties: the first maximum
  struct Setting {
    const char* name;
    float temperature;
    int topK;
    float topP, minP, typical;
    std::vector<int64_t> kept;
  };
  const std::vector<Setting> settings = {
      {"T 1", 1.0f, 0, 1, 0, 1, {0, 1, 2, 3, 4}},
      {"T 0.5", 0.5f, 0, 1, 0, 1, {0, 1, 2, 3, 4}},
      {"T 2, top-k 2", 2.0f, 2, 1, 0, 1, {1, 4}},
      {"min-p 0.1", 1.0f, 0, 1, 0.1f, 1, {0, 1, 2, 4}},
      {"top-p 0.9", 1.0f, 0, 0.9f, 0, 1, {1, 2, 4}},
      {"T 0.8, top-p 0.95", 0.8f, 0, 0.95f, 0, 1, {0, 1, 2, 4}},
      {"top-k 3, min-p 0.5", 1.0f, 3, 1, 0.5f, 1, {1, 4}},
      {"typical 0.8", 1.0f, 0, 1, 0, 0.8f, {1, 2, 4}},
      {"typical 0.2", 1.0f, 0, 1, 0, 0.2f, {4}},
      // top-p over typical's renormalized survivors: 0.44 + 0.40 reaches 0.8 ({1, 4}); the
      // unrenormalized 0.41 + 0.37 would not, and keep 2 as well
      {"typical 0.8, top-p 0.8", 1.0f, 0, 0.8f, 0, 0.8f, {1, 4}},
      // min-p after top-p: token 0 at 0.055 is under 0.2 x 0.407 (a ratio: top-p's
      // survivors renormalized or not); flattened to temperature 2 first, it would stay
      {"top-p 0.95, min-p 0.2", 1.0f, 0, 0.95f, 0.2f, 1, {1, 2, 4}},
  };
  // chi-squared at 1 - 1e-4 by degrees of freedom (one kept token: every draw is it)
  const double critical[] = {1e-9, 15.14, 18.42, 21.11, 23.51};
  const int draws = 20000;
  for (const auto& st : settings) {
    SamplingOptions o;
    o.temperature = st.temperature;
    o.topK = st.topK;
    o.topP = st.topP;
    o.minP = st.minP;
    o.typical = st.typical;
    o.seed = 11;
    Sampler sampler(o);
    std::vector<int> count(logits.size(), 0);
    for (int i = 0; i < draws; ++i) ++count[static_cast<size_t>(sampler.sample(logits))];
    double z = 0;
    for (int64_t t : st.kept) z += std::exp(logits[static_cast<size_t>(t)] / st.temperature);
    double chi2 = 0;
    int inSet = 0;
    for (int64_t t : st.kept) {
      const double expected = draws * std::exp(logits[static_cast<size_t>(t)] / st.temperature) / z;
      const double d = count[static_cast<size_t>(t)] - expected;
      chi2 += d * d / expected;
      inSet += count[static_cast<size_t>(t)];
    }
    EXPECT_EQ(inSet, draws) << st.name << ": drew a token the filters drop";
    EXPECT_LT(chi2, critical[st.kept.size() - 1]) << st.name;
  }
  // Filters left off keep every token, however unlikely at temperature 1, where they rank
  // them: at {0, -40, -40, -40} token 0's probability rounds to 1, so a top-p or typical
  // pass at mass 1 would keep it alone; drawn at temperature 100 the three others have
  // e^-0.4 of its weight (0.223 each, token 0 0.332).
  SamplingOptions flat;
  flat.temperature = 100.0f;
  flat.seed = 5;
  Sampler flattened(flat);
  std::vector<int> tail(4, 0);
  for (int i = 0; i < draws; ++i) ++tail[static_cast<size_t>(flattened.sample({0.0f, -40.0f, -40.0f, -40.0f}))];
  for (int t = 0; t < 4; ++t)
    EXPECT_NEAR(tail[static_cast<size_t>(t)] / double(draws), t == 0 ? 0.332 : 0.223, 0.02) << "token " << t;
  // Logits that are not numbers are refused, greedy or sampled, naming the token: NaN would
  // fail every comparison and +inf make every probability NaN. -inf (a masked token) is
  // never drawn.
  for (float bad : {NAN, INFINITY})
    for (float t : {0.0f, 1.0f}) {
      SamplingOptions o;
      o.temperature = t;
      try {
        Sampler(o).sample({0.5f, bad, 1.0f});
        ADD_FAILURE() << bad << " sampled at temperature " << t;
      } catch (const Error& e) {
        EXPECT_NE(std::string(e.what()).find("the logits are not numbers (token 1: "), std::string::npos) << e.what();
      }
    }
  SamplingOptions warm;
  warm.temperature = 1.0f;
  Sampler masked(warm);
  for (int i = 0; i < 50; ++i) EXPECT_NE(masked.sample({0.0f, -INFINITY, 0.5f}), 1);
  // Typical's sort keeps ties in order, the lower id first: a cut between two equal tokens
  // keeps the lower, as greedy takes the first maximum.
  SamplingOptions tie;
  tie.temperature = 1.0f;
  tie.typical = 0.4f;
  Sampler tied(tie);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(tied.sample({0.0f, 0.0f, -10.0f}), 0);
  // Every logit counts, the first too: top-k 1 over {-5, 0} draws the second, always.
  SamplingOptions one;
  one.temperature = 1.0f;
  one.topK = 1;
  Sampler first(one);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(first.sample({-5.0f, 0.0f}), 1);
  // Top-p keeps the shortest prefix whose mass reaches p, not one past it: four equal
  // tokens (0.25 each, exactly) under top-p 0.75 keep three, so the fourth is never drawn
  // (one more kept would draw it a quarter of the time).
  SamplingOptions reach;
  reach.temperature = 1.0f;
  reach.topP = 0.75f;
  reach.seed = 3;
  Sampler reaching(reach);
  std::vector<int> drawn(4, 0);
  for (int i = 0; i < 400; ++i) ++drawn[static_cast<size_t>(reaching.sample({1.0f, 1.0f, 1.0f, 1.0f}))];
  EXPECT_EQ(drawn[3], 0);
  for (int t = 0; t < 3; ++t) EXPECT_GT(drawn[static_cast<size_t>(t)], 80) << "token " << t;
  // Logits as large as a model's can be (hundreds) draw as their differences say: shifted
  // by 1000, the same stream (each normalized by its largest, none overflows).
  SamplingOptions big;
  big.temperature = 1.0f;
  big.seed = 5;
  Sampler shifted(big), unshifted(big);
  for (int i = 0; i < 200; ++i) ASSERT_EQ(shifted.sample({1000.0f, 999.0f, 998.0f}), unshifted.sample({2.0f, 1.0f, 0.0f})) << i;
  // No logits is an error, greedy or drawn, never token 0 (nor a draw from nothing).
  for (float temperature : {0.0f, 1.0f}) {
    SamplingOptions none;
    none.temperature = temperature;
    EXPECT_THROW(Sampler(none).sample({}), Error) << "temperature " << temperature;
  }
  // Options outside their ranges are usage errors (exit 2), each naming its flag.
  for (const auto& [flag, set] : std::vector<std::pair<std::string, std::function<void(SamplingOptions&)>>>{
           {"--top-k", [](SamplingOptions& x) { x.topK = -1; }},
           {"--top-p", [](SamplingOptions& x) { x.topP = 0; }},
           {"--top-p", [](SamplingOptions& x) { x.topP = 1.5f; }},
           {"--min-p", [](SamplingOptions& x) { x.minP = 1; }},
           {"--min-p", [](SamplingOptions& x) { x.minP = -0.1f; }},
           {"--typical", [](SamplingOptions& x) { x.typical = 0; }},
           {"--typical", [](SamplingOptions& x) { x.typical = 1.5f; }}}) {
    SamplingOptions bad;
    bad.temperature = 1.0f;
    set(bad);
    try {
      Sampler s(bad);
      ADD_FAILURE() << flag << " out of range was taken";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::Usage);
      EXPECT_EQ(std::string(e.what()).rfind(flag + " must be", 0), 0u) << e.what();
    }
  }
  // The seed keys the stream: the same seed repeats it, another gives another.
  SamplingOptions o;
  o.temperature = 1.0f;
  std::vector<int64_t> runs[3];
  for (uint64_t k = 0; k < 3; ++k) {
    o.seed = k < 2 ? 7 : 8;
    Sampler s(o);
    for (int i = 0; i < 64; ++i) runs[k].push_back(s.sample(logits));
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_NE(runs[0], runs[2]);
  EXPECT_NEAR(negLog2Prob(logits.data(), 5, 1), -std::log2(std::exp(2.0) / (1 + std::exp(2.0) + std::exp(1.0) + std::exp(-1.0) + std::exp(1.9))), 1e-6);
  // Large logits stay finite (the largest, the first one too, is taken out before exp):
  // {1000, 0} gives its first token about 1000 / ln 2 bits less than its second.
  const std::vector<float> large{1000.0f, 0.0f};
  EXPECT_NEAR(negLog2Prob(large.data(), 2, 0), 0.0, 1e-9);
  EXPECT_NEAR(negLog2Prob(large.data(), 2, 1), 1000.0 / std::log(2.0), 1e-6);
}

}  // namespace
}  // namespace tl
