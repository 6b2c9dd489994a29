#include "ctxswap/replay.h"

#include <algorithm>
#include <cmath>
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
    auto id = ids.find(c.context);
    if (id == ids.end()) id = ids.emplace(c.context, store.create("app", {})).first;
    CallResult got = store.call(id->second, "app", prompt, c.generate);
    r.switches.push_back(got.load);
    r.replies.push_back(std::move(got.reply));
  }
  r.summary = summarizeSwitches(r.switches);
  r.peakMemory = store.peakMemory();
  r.refusedWrites = store.refusedWrites();
  return r;
}

}  // namespace tl
