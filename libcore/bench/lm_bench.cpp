#include "bench/lm_bench.h"

#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <random>

#include "bench/model_cost.h"
#include "bench/timing.h"
#include "cli/error.h"
#include "lm/batch.h"
#include "lm/speculative.h"
#include "tensor/tensor.h"

namespace tl {
namespace {

// A decode test needs a context to start from: its depth, or one token.
int64_t contextOf(const BenchTest& t) { return t.gen > 0 ? std::max<int64_t>(t.depth, 1) : t.depth; }

int64_t argmax(const std::vector<float>& v) {
  return static_cast<int64_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

// cacheElement: bytes of a cache element as the executor stores it.
RunCost stepCost(const CausalLm& lm, const ShapeAnalysis& analysis, const Graph& graph, int64_t tokens, int64_t past,
                 double cacheElement) {
  std::vector<CachePair> caches;
  for (size_t i = 0; i < lm.cacheInputs().size(); ++i)
    caches.push_back({lm.cacheInputs()[i], lm.cacheOutputs()[i], cacheElement});
  return runCost(graph, analysis, bindFromInputs(analysis, lm.inputShapes(tokens, past)), caches);
}

struct StepTotals {
  double deviceMs = 0;
  int64_t commands = 0, steps = 0;  // (the steps profiled)
};

void addProfile(const Executor& ex, StepTotals& totals) {
  for (const auto& t : ex.profile()) totals.deviceMs += t.ms;
  totals.commands += static_cast<int64_t>(ex.profile().size());
  ++totals.steps;
}

// The model-derived columns of a row, for its test.
void addCost(BenchRow& row, const CausalLm& lm, const Executor& ex) {
  const Graph& graph = ex.graph();
  const ShapeAnalysis& analysis = ex.analysis();
  // In-place caches hold the plan's element; others the graph's dtype.
  const bool inPlace = !lm.cacheInputs().empty() && ex.cacheStrides(lm.cacheInputs()[0]);
  const double element = inPlace ? kvElementBytes(ex.kvType()) : 0.0;
  const BenchTest t{row.prompt, row.gen, row.depth, row.batch, row.spec};
  row.weightBytes = modelWeightBytes(graph, analysis);
  RunCost c;
  double tokens = 0;
  if (t.prompt > 0) {
    c = stepCost(lm, analysis, graph, t.prompt, t.depth, element);
    tokens = static_cast<double>(t.prompt);
  } else {
    // A step's cost grows linearly with the cache it attends over, so the mean over
    // the test's steps is the mean of its first and last.
    const int64_t first = contextOf(t), last = first + t.gen - 1;
    const RunCost a = stepCost(lm, analysis, graph, 1, first, element), b = stepCost(lm, analysis, graph, 1, last, element);
    c.flops = a.flops + b.flops;
    c.weightBytes = a.weightBytes + b.weightBytes;
    c.cacheReadBytes = a.cacheReadBytes + b.cacheReadBytes;
    c.cacheWrittenBytes = a.cacheWrittenBytes + b.cacheWrittenBytes;
    tokens = 2;
  }
  row.flopsPerToken = c.flops / tokens;
  // A batch's step reads the weights once for all its sequences' tokens.
  row.bytesPerToken = (c.weightBytes / static_cast<double>(row.batch) + c.cacheReadBytes + c.cacheWrittenBytes) / tokens;
}

// The schedule every test follows: a warm-up, a profiled run (device time and commands
// per step profiled), then opt.reps timed runs. `once` runs the test once and returns the
// seconds of its timed part, adding each step's profile (or its last's) to `totals` when
// given; `steps` is a run's steps (read after the runs: a speculative run counts its own).
void measure(Executor& ex, const std::string& label, const int64_t& steps, double units,
             const std::function<double(StepTotals*)>& once, const BenchOptions& opt, BenchRow& row) {
  Device& dev = ex.device();
  if (opt.progress) opt.progress(label + ": warm-up");
  once(nullptr);
  if (opt.progress) opt.progress(label + ": profiled run");
  StepTotals totals;
  dev.setProfiling(true);
  once(&totals);
  dev.setProfiling(false);
  if (opt.profiled) opt.profiled(label, ex);
  double wall = 0;
  const double enqueued = ex.enqueueSeconds(), inOpenCl = ex.openclSeconds();
  for (int r = 0; r < opt.reps; ++r) {
    if (opt.progress) opt.progress(label + ": " + std::to_string(r + 1) + "/" + std::to_string(opt.reps));
    const double s = once(nullptr);
    wall += s;
    row.samplesTs.push_back(units / s);
  }
  row.kernelsPerStep = static_cast<double>(totals.commands) / static_cast<double>(totals.steps);
  row.deviceMsPerStep = totals.deviceMs / static_cast<double>(totals.steps);
  row.hostMsPerStep = wall / opt.reps / steps * 1e3 - row.deviceMsPerStep;
  row.enqueueMsPerStep = (ex.enqueueSeconds() - enqueued) / opt.reps / steps * 1e3;
  row.ownMsPerStep = row.enqueueMsPerStep - (ex.openclSeconds() - inOpenCl) / opt.reps / steps * 1e3;
}

void addMemory(BenchRow& row, const Executor::MemoryUse& m) {
  row.kvBytes = static_cast<double>(m.cache);
  row.activationBytes = static_cast<double>(m.activations);
}

}  // namespace

std::string BenchTest::name() const {
  std::string s = prompt > 0 ? "pp" + std::to_string(prompt) : "tg" + std::to_string(gen);
  if (depth > 0) s += "@d" + std::to_string(depth);
  if (batch > 1) s += "x" + std::to_string(batch);
  return spec.empty() ? s : s + "+" + spec;
}

std::vector<BenchTest> makeTests(const std::vector<int64_t>& prompts, const std::vector<int64_t>& gens,
                                 const std::vector<int64_t>& depths, const std::vector<int64_t>& batches,
                                 const std::vector<std::string>& specs) {
  for (auto p : prompts)
    if (p < 1) throw Error("-p " + std::to_string(p) + ": a prefill test needs at least 1 token");
  for (auto n : gens)
    if (n < 1) throw Error("-n " + std::to_string(n) + ": a decode test needs at least 1 token");
  for (auto d : depths)
    if (d < 0) throw Error("-d " + std::to_string(d) + ": a depth cannot be negative");
  for (auto b : batches)
    if (b < 1) throw Error("-b " + std::to_string(b) + ": a batch is at least 1 sequence");
  std::vector<BenchTest> out;
  for (auto d : depths.empty() ? std::vector<int64_t>{0} : depths) {
    for (auto p : prompts) out.push_back({p, 0, d, 1, ""});
    for (auto n : gens) {
      for (auto b : batches.empty() ? std::vector<int64_t>{1} : batches) out.push_back({0, n, d, b, ""});
      for (const auto& s : specs) out.push_back({0, n, d, 1, s});
    }
  }
  return out;
}

void checkTests(int64_t positionLimit, const std::vector<BenchTest>& tests) {
  if (!positionLimit) return;
  for (const auto& t : tests) {
    const int64_t need = contextOf(t) + t.prompt + t.gen;
    if (need > positionLimit)
      throw Error(t.name() + " needs " + std::to_string(need) + " positions; the model's position table has " +
                  std::to_string(positionLimit));
  }
}

std::vector<BenchRow> benchLanguageModel(Executor& ex, CausalLm& lm, const std::vector<BenchTest>& tests,
                                         const BenchOptions& opt) {
  std::mt19937 rng(1);
  std::uniform_int_distribution<int64_t> pick(0, lm.vocab() - 1);
  std::vector<BenchRow> rows;
  for (const auto& t : tests) {
    std::vector<int64_t> context(static_cast<size_t>(contextOf(t))), prompt(static_cast<size_t>(t.prompt));
    for (size_t i = 0; i < context.size(); ++i) context[i] = opt.text.empty() ? pick(rng) : opt.text[i % opt.text.size()];
    for (auto& x : prompt) x = pick(rng);
    int64_t steps = t.prompt > 0 ? 1 : t.gen;
    const int64_t tokens = t.prompt > 0 ? t.prompt : t.gen;
    // One repetition: wall seconds of the timed part; device totals when profiling.
    auto once = [&](StepTotals* totals) {
      lm.reset();
      std::vector<float> logits;
      if (!context.empty()) logits = lm.step(context);
      const auto t0 = std::chrono::steady_clock::now();
      if (t.prompt > 0) {
        lm.step(prompt);
        if (totals) addProfile(ex, *totals);
      } else if (totals) {
        int64_t next = argmax(logits);
        for (int64_t i = 0; i < t.gen; ++i) {
          next = lm.stepGreedy({next});
          addProfile(ex, *totals);
        }
      } else {
        lm.generateGreedy(argmax(logits), t.gen);  // each step enqueued while the last one runs
      }
      return secondsSince(t0);
    };
    std::unique_ptr<BatchDecoder> batch;
    std::vector<std::vector<int64_t>> contexts;  // a sequence's each
    if (t.batch > 1) {
      batch = std::make_unique<BatchDecoder>(ex, lm);
      if (batch->capacity() < t.batch)
        throw Error(t.name() + " decodes " + std::to_string(t.batch) + " sequences at once; the model's plan holds " +
                    std::to_string(batch->capacity()) + " (tl-plan --batch " + std::to_string(t.batch) + ")");
      for (int64_t s = 0; s < t.batch; ++s) {
        contexts.push_back(context);
        for (auto& x : contexts.back()) x = pick(rng);
      }
    }
    // ... of a batch: every sequence's context joins (untimed), then the steps of all.
    auto batched = [&](StepTotals* totals) {
      std::map<int64_t, int64_t> next;
      for (const auto& c : contexts) {
        std::vector<float> logits;
        const int64_t id = batch->join(c, &logits);
        next[id] = argmax(logits);
      }
      const auto t0 = std::chrono::steady_clock::now();
      if (totals) {
        for (int64_t i = 0; i < t.gen; ++i) {
          for (const auto& [id, logits] : batch->step(next)) next[id] = argmax(logits);
          addProfile(ex, *totals);
        }
      } else {
        batch->generateGreedy(next, t.gen);  // as one sequence's: each step enqueued while the last one runs
      }
      const double s = secondsSince(t0);
      for (const auto& [id, token] : next) batch->leave(id);
      return s;
    };
    // ... speculative: the context's prefill (untimed), then greedy decoding with the drafter.
    SpeculativeStats spec;
    auto speculative = [&](StepTotals* totals) {
      lm.reset();
      const int64_t first = argmax(lm.step(context));
      std::unique_ptr<Drafter> drafter;
      if (t.spec == "lookup") {
        drafter = std::make_unique<PromptLookup>();
      } else {
        if (!opt.draft) throw Error(t.name() + ": no draft model (tl-bench --draft MODEL)");
        opt.draft->reset();
        drafter = std::make_unique<DraftModel>(*opt.draft, lm);
      }
      Sampler greedy{SamplingOptions{}};
      const auto t0 = std::chrono::steady_clock::now();
      // (first, then t.gen tokens of the model's, as the plain test's t.gen steps make)
      spec = generateSpeculative(lm, *drafter, greedy, context, first, t.gen + 1, opt.draftMax, [](int64_t) { return true; });
      const double s = secondsSince(t0);
      steps = spec.steps;
      if (totals) addProfile(ex, *totals);  // (its last check)
      return s;
    };
    BenchRow row;
    row.test = t.name();
    row.prompt = t.prompt;
    row.gen = t.gen;
    row.depth = t.depth;
    row.batch = t.batch;
    row.spec = t.spec;
    if (batch) {
      measure(ex, t.name(), steps, static_cast<double>(tokens * t.batch), batched, opt, row);
    } else if (!t.spec.empty()) {
      measure(ex, t.name(), steps, static_cast<double>(tokens), speculative, opt, row);
      row.specTaken = spec.drafted ? static_cast<double>(spec.accepted) / static_cast<double>(spec.drafted) : kUnknown;
      row.specTokensPerStep = spec.steps ? static_cast<double>(t.gen) / static_cast<double>(spec.steps) : kUnknown;
      for (const auto& plain : rows)
        if (plain.spec.empty() && plain.batch == 1 && plain.gen == t.gen && plain.depth == t.depth && !plain.samplesTs.empty())
          row.specSpeedup = mean(row.samplesTs) / mean(plain.samplesTs);
    } else {
      measure(ex, t.name(), steps, static_cast<double>(tokens), once, opt, row);
    }
    addCost(row, lm, ex);
    std::vector<std::string> cache = lm.cacheInputs();
    cache.insert(cache.end(), lm.cacheOutputs().begin(), lm.cacheOutputs().end());
    addMemory(row, ex.memoryUse(cache));
    rows.push_back(std::move(row));
  }
  return rows;
}

void checkForwardBinding(const ShapeAnalysis& analysis, const SymbolValues& binding) {
  std::string unbound;
  for (const auto& s : analysis.symbols.freeSymbols())
    if (!binding.count(s)) unbound += (unbound.empty() ? "" : ", ") + s;
  if (!unbound.empty())
    throw Error("the model has no runnable shape binding: " + unbound + " unbound (give --bind " +
                (unbound.find(',') == std::string::npos ? unbound + "=..." : "NAME=INT,...") + ")");
  checkBindings(analysis, binding);
}

BenchRow benchForward(Executor& ex, const SymbolValues& binding, const std::string& bindText, const BenchOptions& opt) {
  const ShapeAnalysis& analysis = ex.analysis();
  checkForwardBinding(analysis, binding);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  std::vector<Tensor> inputs;
  for (const auto& in : ex.graph().proto().input()) {
    const auto& info = analysis.at(in.name());
    if (info.cls != TensorClass::Input) continue;
    Tensor t;
    t.name = in.name();
    t.dtype = info.dtype;
    t.dims = evaluateDims(info.dims, binding);
    t.bytes.assign(static_cast<size_t>(elementCount(t.dims)) * dtypeBits(t.dtype) / 8, 0);
    if (t.dtype == DType::Float) {
      auto* f = reinterpret_cast<float*>(t.bytes.data());
      for (int64_t i = 0; i < elementCount(t.dims); ++i) f[i] = normal(rng);
    }
    inputs.push_back(std::move(t));
  }
  BenchRow row;
  row.test = "fwd";
  row.bind = bindText;
  measure(ex, "fwd", 1, 1, [&](StepTotals* totals) {
    const auto t0 = std::chrono::steady_clock::now();
    ex.run(inputs);
    const double s = secondsSince(t0);
    if (totals) addProfile(ex, *totals);
    return s;
  }, opt, row);
  const RunCost c = runCost(ex.graph(), analysis, binding, {});
  addMemory(row, ex.memoryUse({}));
  row.weightBytes = modelWeightBytes(ex.graph(), analysis);
  row.flopsPerToken = c.flops;
  row.bytesPerToken = c.bytes();
  return row;
}

}  // namespace tl
