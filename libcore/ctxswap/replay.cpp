#include "ctxswap/replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "cli/error.h"

namespace tl {

SwitchSummary summarizeSwitches(const std::vector<SwitchStats>& switches) {
  SwitchSummary s;
  s.calls = static_cast<int64_t>(switches.size());
  if (switches.empty()) return s;
  std::vector<double> t;
  for (const SwitchStats& w : switches) {
    t.push_back(w.seconds);
    s.mean += w.seconds;
    s.inMemory += w.inMemory;
    s.read += w.read;
    s.recomputed += w.recomputed;
  }
  s.mean /= static_cast<double>(t.size());
  std::sort(t.begin(), t.end());
  // nearest rank: the smallest value with at least p of the calls at or under it
  const auto rank = [&](double p) { return t[static_cast<size_t>(std::max(0.0, std::ceil(p * t.size()) - 1))]; };
  s.p50 = rank(0.5);
  s.p99 = rank(0.99);
  s.max = t.back();
  return s;
}

std::string replayTable(const std::vector<PolicyReplay>& runs) {
  std::string out =
      "| policy | budget KiB | calls | switch mean ms | p50 ms | p99 ms | max ms | chunks in memory | read | recomputed | "
      "peak KiB | refused writes | mean / first row's |\n"
      "| :--- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n";
  for (const PolicyReplay& p : runs) {
    const SwitchSummary& s = p.result.summary;
    const double first = runs.front().result.summary.mean;
    char row[512];
    std::snprintf(row, sizeof row, "| %s | %.1f | %lld | %.3f | %.3f | %.3f | %.3f | %lld | %lld | %lld | %.1f | %lld | %.2fx |\n",
                  policyName(p.policy), p.budget / 1024.0, static_cast<long long>(s.calls), s.mean * 1e3, s.p50 * 1e3,
                  s.p99 * 1e3, s.max * 1e3, static_cast<long long>(s.inMemory), static_cast<long long>(s.read),
                  static_cast<long long>(s.recomputed), p.result.peakMemory / 1024.0,
                  static_cast<long long>(p.result.refusedWrites), first > 0 ? s.mean / first : 0.0);
    out += row;
  }
  return out;
}

ReplayResult replayTrace(Executor& ex, CausalLm& lm, uint64_t modelFingerprint, const std::vector<TraceCall>& calls,
                         const std::vector<std::string>& texts, const StoreOptions& opt) {
  if (lm.vocab() != 256) throw Error("a replay feeds the trace's text bytes as tokens: it needs a byte-level model (vocab 256)");
  ContextStore store(ex, lm, modelFingerprint, opt);
  std::map<int64_t, uint64_t> ids;  // trace context -> store context
  ReplayResult r;
  for (size_t i = 0; i < calls.size(); ++i) {
    const TraceCall& c = calls[i];
    if (c.text < 0 || c.text >= static_cast<int64_t>(texts.size()) || texts[static_cast<size_t>(c.text)].empty())
      throw Error("call " + std::to_string(i + 1) + " reads text " + std::to_string(c.text) + ", which was not given");
    const std::string& text = texts[static_cast<size_t>(c.text)];
    std::vector<int64_t> prompt;
    for (int64_t k = 0; k < c.length; ++k)
      prompt.push_back(static_cast<unsigned char>(text[static_cast<size_t>((c.offset + k) % static_cast<int64_t>(text.size()))]));
    const std::string owner = "app" + std::to_string(c.context);  // an app a context, as LLMS's
    auto id = ids.find(c.context);
    if (id == ids.end()) id = ids.emplace(c.context, store.create(owner, {})).first;
    CallResult got = store.call(id->second, owner, prompt, c.generate);
    r.switches.push_back(got.load);
    r.replies.push_back(std::move(got.reply));
  }
  r.summary = summarizeSwitches(r.switches);
  r.peakMemory = store.peakMemory();
  r.refusedWrites = store.refusedWrites();
  return r;
}

}  // namespace tl
