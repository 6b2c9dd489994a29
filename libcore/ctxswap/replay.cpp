#include "ctxswap/replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
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

std::vector<SweepPoint> sweepContexts(Executor& ex, CausalLm& lm, uint64_t modelFingerprint, const TraceOptions& base,
                                      const std::vector<int64_t>& counts, const std::vector<std::string>& texts,
                                      StoreOptions opt, const std::vector<Policy>& policies, const std::string& swapRoot) {
  std::vector<int64_t> sizes;
  for (const auto& t : texts) sizes.push_back(static_cast<int64_t>(t.size()));
  std::vector<SweepPoint> out;
  for (int64_t n : counts) {
    if (n < 1) throw Error("a sweep's context counts must be positive", ExitCode::Usage);
    TraceOptions t = base;
    t.contexts = n;
    t.calls = base.calls * n;  // the same calls a context at every count
    const std::vector<TraceCall> calls = synthesizeTrace(t, sizes);
    for (Policy p : policies) {
      opt.policy = p;
      opt.swapDir = (std::filesystem::path(swapRoot) / (std::string(policyName(p)) + "-" + std::to_string(n))).string();
      out.push_back({p, n, replayTrace(ex, lm, modelFingerprint, calls, texts, opt).summary});
      std::error_code ec;
      std::filesystem::remove_all(opt.swapDir, ec);
    }
  }
  return out;
}

namespace {

// The sweep's policies and counts, in their first order.
void sweepAxes(const std::vector<SweepPoint>& points, std::vector<Policy>* policies, std::vector<int64_t>* counts) {
  for (const auto& p : points) {
    if (std::find(policies->begin(), policies->end(), p.policy) == policies->end()) policies->push_back(p.policy);
    if (std::find(counts->begin(), counts->end(), p.contexts) == counts->end()) counts->push_back(p.contexts);
  }
}

const SweepPoint* pointAt(const std::vector<SweepPoint>& points, Policy p, int64_t n) {
  for (const auto& x : points)
    if (x.policy == p && x.contexts == n) return &x;
  return nullptr;
}

}  // namespace

std::string sweepTable(const std::vector<SweepPoint>& points, double boundMs) {
  std::vector<Policy> policies;
  std::vector<int64_t> counts;
  sweepAxes(points, &policies, &counts);
  std::string out = "| contexts |", rule = "| ---: |";
  for (Policy p : policies) {
    out += std::string(" ") + policyName(p) + " mean ms (p99) |";
    rule += " ---: |";
  }
  out += "\n" + rule + "\n";
  char cell[64];
  for (int64_t n : counts) {
    out += "| " + std::to_string(n) + " |";
    for (Policy p : policies) {
      const SweepPoint* x = pointAt(points, p, n);
      std::snprintf(cell, sizeof cell, " %.3f (%.2f) |", x ? x->summary.mean * 1e3 : 0.0, x ? x->summary.p99 * 1e3 : 0.0);
      out += cell;
    }
    out += "\n";
  }
  std::snprintf(cell, sizeof cell, "%g", boundMs);
  out += "| most contexts with a mean switch within " + std::string(cell) + " ms |";
  for (Policy p : policies) {
    int64_t best = 0;
    for (int64_t n : counts)
      if (const SweepPoint* x = pointAt(points, p, n); x && x->summary.mean * 1e3 <= boundMs) best = std::max(best, n);
    out += " " + std::to_string(best) + " |";
  }
  return out + "\n";
}

std::string sweepSvg(const std::vector<SweepPoint>& points, double boundMs) {
  std::vector<Policy> policies;
  std::vector<int64_t> counts;
  sweepAxes(points, &policies, &counts);
  const double W = 640, H = 400, L = 70, R = 130, T = 30, B = 50;
  double lo = boundMs, hi = boundMs;
  for (const auto& p : points) {
    lo = std::min(lo, std::max(p.summary.mean * 1e3, 1e-3));
    hi = std::max(hi, p.summary.mean * 1e3);
  }
  const double l0 = std::floor(std::log10(lo)), l1 = std::ceil(std::log10(hi)) + (std::log10(hi) == std::ceil(std::log10(hi)));
  const auto xAt = [&](size_t i) { return L + (counts.size() > 1 ? (W - L - R) * i / (counts.size() - 1.0) : (W - L - R) / 2); };
  const auto yAt = [&](double ms) { return T + (H - T - B) * (l1 - std::log10(std::max(ms, 1e-3))) / (l1 - l0); };
  const char* colors[] = {"#d62728", "#1f77b4", "#2ca02c", "#9467bd", "#ff7f0e"};
  char buf[256];
  std::string s = "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"640\" height=\"400\" font-family=\"sans-serif\" font-size=\"12\">\n";
  s += "<text x=\"70\" y=\"18\">context switch, mean ms (log) against active contexts</text>\n";
  for (double e = l0; e <= l1; ++e) {
    std::snprintf(buf, sizeof buf, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#ddd\"/><text x=\"5\" y=\"%g\">%g ms</text>\n",
                  L, yAt(std::pow(10, e)), W - R, yAt(std::pow(10, e)), yAt(std::pow(10, e)) + 4, std::pow(10, e));
    s += buf;
  }
  for (size_t i = 0; i < counts.size(); ++i) {
    std::snprintf(buf, sizeof buf, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">%lld</text>\n", xAt(i), H - B + 18,
                  static_cast<long long>(counts[i]));
    s += buf;
  }
  std::snprintf(buf, sizeof buf, "<text x=\"%g\" y=\"%g\" text-anchor=\"middle\">contexts</text>\n", (L + W - R) / 2, H - 12);
  s += buf;
  std::snprintf(buf, sizeof buf, "<line x1=\"%g\" y1=\"%g\" x2=\"%g\" y2=\"%g\" stroke=\"#000\" stroke-dasharray=\"4 4\"/>\n", L,
                yAt(boundMs), W - R, yAt(boundMs));
  s += buf;
  for (size_t k = 0; k < policies.size(); ++k) {
    std::string path;
    for (size_t i = 0; i < counts.size(); ++i)
      if (const SweepPoint* x = pointAt(points, policies[k], counts[i])) {
        std::snprintf(buf, sizeof buf, "%s%g,%g", path.empty() ? "" : " ", xAt(i), yAt(x->summary.mean * 1e3));
        path += buf;
      }
    std::snprintf(buf, sizeof buf, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"2\" points=\"%s\"/>\n", colors[k % 5], path.c_str());
    s += buf;
    std::snprintf(buf, sizeof buf, "<text x=\"%g\" y=\"%g\" fill=\"%s\">%s</text>\n", W - R + 10, T + 16.0 * (k + 1), colors[k % 5],
                  policyName(policies[k]));
    s += buf;
  }
  return s + "</svg>\n";
}

ReplayResult replayTrace(Executor& ex, CausalLm& lm, uint64_t modelFingerprint, const std::vector<TraceCall>& calls,
                         const std::vector<std::string>& texts, const StoreOptions& opt) {
  if (lm.vocab() != 256) throw Error("a replay feeds the trace's text bytes as tokens: it needs a byte-level model (vocab 256)");
  std::error_code ec;
  std::filesystem::remove_all(opt.swapDir, ec);
  if (ec) throw Error(opt.swapDir + ": cannot clear the swap directory: " + ec.message());
  ContextStore store(ex, lm, modelFingerprint, opt);
  std::map<int64_t, uint64_t> ids;  // trace context -> store context
  ReplayResult r;
  for (size_t i = 0; i < calls.size(); ++i) {
    const TraceCall& c = calls[i];
    const std::vector<int64_t> prompt = byteTokens(callPrompt(c, i, texts));
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
