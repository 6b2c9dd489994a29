// Benchmarks a model the way llama-bench does: prefill tests (ppP: P prompt tokens in
// one step) and decode tests (tgN: N steps of one token), each optionally at a depth
// (@dD: a context of D tokens filled, untimed, before the test), repeated, as tokens
// per second. Models that are not causal LMs are timed per forward at a binding.
//
// Each test runs once to warm up (drivers that compile per launch geometry, as PoCL
// does, compile then; buffers take their size), once on the device's profiling queue
// (the device time and command count of every step), then `reps` times without
// profiling for the wall-clock rate. Each row also carries what the
// test must compute and move per token (bench/model_cost.h), so that it can be set
// against the device's ceilings; peers' rows get the same numbers for the same test.
#pragma once

#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "lm/causal_lm.h"
#include "runtime/executor.h"
#include "shape/binding.h"

namespace tl {

// A decode test of batch B (llama-batched-bench's parallel sequences): B sequences, each
// with its own context of `depth` tokens (or one), decoded together (lm/batch.h), their
// tokens counted together (t/s: the aggregate; a sequence's is t/s / B).
// A decode test with `spec` ("lookup", "draft") decodes one sequence speculatively
// (lm/speculative.h: prompt lookup, or BenchOptions::draft), greedy: the same tokens as the
// plain test, in fewer steps.
struct BenchTest {
  int64_t prompt = 0, gen = 0, depth = 0;  // exactly one of prompt, gen is > 0
  int64_t batch = 1;                       // sequences at once (decode tests)
  std::string spec;                        // speculative decoding's drafter ("": none)
  std::string name() const;                // pp512, tg128, tg128@d1024, tg128@d128x16, tg128@d128+lookup
};

// Every prompt length and every generation length (each at every batch, and of one
// sequence also through each of `specs`), each at every depth, in that order. Throws
// tl::Error (bad input) for a length or batch under 1 or a negative depth.
std::vector<BenchTest> makeTests(const std::vector<int64_t>& prompts, const std::vector<int64_t>& gens,
                                 const std::vector<int64_t>& depths, const std::vector<int64_t>& batches = {1},
                                 const std::vector<std::string>& specs = {});

constexpr double kUnknown = std::numeric_limits<double>::quiet_NaN();

struct BenchRow {
  std::string model, engine, device, test;
  int64_t prompt = 0, gen = 0, depth = 0, batch = 1;
  std::string bind;                 // forward rows: the binding
  std::vector<double> samplesTs;    // tokens (forwards) per second, one per repetition
  double weightBytes = kUnknown;    // the model's weights on the device
  double flopsPerToken = kUnknown;  // per forward, for forward rows
  double bytesPerToken = kUnknown;
  double kernelsPerStep = kUnknown, deviceMsPerStep = kUnknown, hostMsPerStep = kUnknown;  // tl rows
  double enqueueMsPerStep = kUnknown;  // tl rows: host time enqueueing a step (Executor::enqueueSeconds)
  double ownMsPerStep = kUnknown;      // tl rows: that less the OpenCL calls in it (Executor::openclSeconds)
  double kvBytes = kUnknown, activationBytes = kUnknown;  // tl rows: device memory after the test
  // Speculative rows: the drafter, the share of drafted tokens taken, tokens a checking
  // step, and t/s over the plain row's of the same test in the same run.
  std::string spec;
  double specTaken = kUnknown, specTokensPerStep = kUnknown, specSpeedup = kUnknown;
};

struct BenchOptions {
  int reps = 5;
  std::function<void(const std::string&)> progress;
  // Called after each test's profiled run with the test's name: the executor's profile()
  // then holds that run's last step (tl-bench --profile prints it).
  std::function<void(const std::string&, const Executor&)> profiled;
  // Contexts (-d) from these tokens, repeated (tl-bench --text), not random ones.
  std::vector<int64_t> text;
  CausalLm* draft = nullptr;  // the "draft" tests' draft model (planned, the model's vocabulary)
  int64_t draftMax = 3;       // tokens a speculative step drafts
};

// Throws tl::Error (bad input) for a test the model cannot take: a context longer than
// its position table (positionTableRows; 0: no table). Needs no device.
void checkTests(int64_t positionLimit, const std::vector<BenchTest>& tests);

std::vector<BenchRow> benchLanguageModel(Executor& ex, CausalLm& lm, const std::vector<BenchTest>& tests,
                                         const BenchOptions& opt);

// Throws tl::Error (bad input) when the binding leaves a free symbol unbound (usage for
// a symbol the model does not have). Needs no device.
void checkForwardBinding(const ShapeAnalysis& analysis, const SymbolValues& binding);

// Latency per forward with every input made at the binding (floats random, integers
// 0), after checkForwardBinding.
BenchRow benchForward(Executor& ex, const SymbolValues& binding, const std::string& bindText, const BenchOptions& opt);

}  // namespace tl
