// A trace's calls run on a ContextStore (LLMS 5, issue 11's bench): back to back, so that
// hours of calls replay in minutes, each call's context switch measured.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ctxswap/context_store.h"
#include "ctxswap/trace.h"

namespace tl {

// Context switching latency over a replay's calls (seconds), and where the chunks came from.
struct SwitchSummary {
  int64_t calls = 0;
  double mean = 0, p50 = 0, p99 = 0, max = 0;
  int64_t inMemory = 0, read = 0, recomputed = 0;
};
SwitchSummary summarizeSwitches(const std::vector<SwitchStats>& switches);

struct ReplayResult {
  std::vector<SwitchStats> switches;           // per call, in trace order
  std::vector<std::vector<int64_t>> replies;   // per call
  SwitchSummary summary;
  size_t peakMemory = 0;                       // KV bytes held at most (the budget bounds it)
  int64_t refusedWrites = 0;
};

// Runs the calls on a store with `opt`, from no contexts: opt.swapDir is emptied first
// (a replay must not recover another's contexts). Each trace context is made at its first
// call (by an app of its own, "appN", with no system prompt), and each call's prompt
// (trace.h's callPrompt) is fed as bytes: a byte-level model. Throws tl::Error for another
// model, or a call naming a text that is not there.
ReplayResult replayTrace(Executor& ex, CausalLm& lm, uint64_t modelFingerprint, const std::vector<TraceCall>& calls,
                         const std::vector<std::string>& texts, const StoreOptions& opt);

// One policy's replay, and the table of several (markdown): per policy the budget, the
// calls, the switching latency (mean, p50, p99, max, in ms), where the chunks came from,
// the most KV bytes held, the refused writes, and its mean over the first row's.
struct PolicyReplay {
  Policy policy = Policy::Llms;
  size_t budget = 0;
  ReplayResult result;
};
std::string replayTable(const std::vector<PolicyReplay>& runs);

// How many active contexts a budget serves (LLMS 5.2's sweep): for each count of
// contexts a trace made as `base` says but with that many contexts and base.calls calls
// for each, replayed under each policy in a swap directory of its own below swapRoot
// (removed after).
struct SweepPoint {
  Policy policy = Policy::Llms;
  int64_t contexts = 0;
  SwitchSummary summary;
};
std::vector<SweepPoint> sweepContexts(Executor& ex, CausalLm& lm, uint64_t modelFingerprint, const TraceOptions& base,
                                      const std::vector<int64_t>& counts, const std::vector<std::string>& texts,
                                      StoreOptions opt, const std::vector<Policy>& policies, const std::string& swapRoot);
// Markdown: the mean switch (ms) per count and policy, then per policy the most contexts
// whose mean switch stays within boundMs (0 where none does).
std::string sweepTable(const std::vector<SweepPoint>& points, double boundMs);
// The same as an SVG line plot: mean switch (log scale) against contexts, a line a policy,
// the bound dashed.
std::string sweepSvg(const std::vector<SweepPoint>& points, double boundMs);

}  // namespace tl
