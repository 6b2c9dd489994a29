#include "ctxswap/trace.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <sstream>

#include "cli/error.h"

namespace tl {

SwitchPattern parsePattern(const std::string& name) {
  if (name == "random") return SwitchPattern::Random;
  if (name == "markov") return SwitchPattern::Markov;
  if (name == "gaussian") return SwitchPattern::Gaussian;
  throw Error("unknown switching pattern '" + name + "' (random, markov, gaussian)", ExitCode::Usage);
}

const char* patternName(SwitchPattern p) {
  switch (p) {
    case SwitchPattern::Random: return "random";
    case SwitchPattern::Markov: return "markov";
    case SwitchPattern::Gaussian: return "gaussian";
  }
  return "?";
}

const std::vector<TaskLength>& llmsTasks() {
  static const std::vector<TaskLength> tasks = {
      {"news classification (AGnews)", 200, 500},        {"document summary (Xsum)", 1000, 2000},
      {"chat history summary (Samsum)", 100, 300},       {"text comprehension (cnn dailymail)", 500, 1000},
      {"translation (WMT17 de-en)", 100, 500},           {"sentiment classification (SST-2)", 10, 100},
  };
  return tasks;
}

std::vector<TraceCall> synthesizeTrace(const TraceOptions& opt, const std::vector<int64_t>& textSizes) {
  if (opt.contexts < 1 || opt.calls < 0 || opt.rate <= 0 || opt.scale <= 0 || opt.generate < 0)
    throw Error("a trace needs contexts >= 1, calls >= 0, a positive rate and scale", ExitCode::Usage);
  if (textSizes.empty()) throw Error("a trace needs at least one text for its prompts", ExitCode::Usage);
  for (int64_t s : textSizes)
    if (s < 1) throw Error("a trace's texts must not be empty", ExitCode::BadInput);
  std::mt19937_64 rng(opt.seed);
  const auto& tasks = llmsTasks();
  const int64_t n = opt.contexts;
  std::vector<int64_t> task(static_cast<size_t>(n)), text(static_cast<size_t>(n)), at(static_cast<size_t>(n));
  std::vector<double> mean(static_cast<size_t>(n));
  for (int64_t c = 0; c < n; ++c) {
    task[c] = c % static_cast<int64_t>(tasks.size());  // every task in turn
    text[c] = c % static_cast<int64_t>(textSizes.size());
    at[c] = std::uniform_int_distribution<int64_t>(0, textSizes[text[c]] - 1)(rng);
    mean[c] = 0.5 * static_cast<double>(tasks[task[c]].lo + tasks[task[c]].hi);
  }
  std::vector<double> weight(static_cast<size_t>(n), 1.0);
  if (opt.pattern == SwitchPattern::Gaussian) {
    double mu = 0, var = 0;
    for (double m : mean) mu += m / static_cast<double>(n);
    for (double m : mean) var += (m - mu) * (m - mu) / static_cast<double>(n);
    const double sigma = std::max(std::sqrt(var), 1.0);
    for (int64_t c = 0; c < n; ++c) weight[c] = std::exp(-(mean[c] - mu) * (mean[c] - mu) / (2 * sigma * sigma));
  }
  std::vector<int64_t> recent;  // distinct contexts, the most recently called first
  std::exponential_distribution<double> gap(opt.rate);
  std::vector<TraceCall> calls;
  double time = 0;
  for (int64_t i = 0; i < opt.calls; ++i) {
    time += gap(rng);
    if (opt.pattern == SwitchPattern::Markov) {
      for (int64_t c = 0; c < n; ++c) {
        const auto r = std::find(recent.begin(), recent.end(), c);
        weight[c] = 1.0 / (1.0 + static_cast<double>(r == recent.end() ? n : r - recent.begin()));
      }
    }
    const int64_t c = std::discrete_distribution<int64_t>(weight.begin(), weight.end())(rng);
    const TaskLength& t = tasks[task[c]];
    const int64_t delta = std::uniform_int_distribution<int64_t>(t.lo, t.hi)(rng);
    TraceCall call;
    call.time = time;
    call.context = c;
    call.text = text[c];
    call.length = std::max<int64_t>(1, std::llround(static_cast<double>(delta) * opt.scale));
    call.offset = at[c];
    call.generate = opt.generate;
    at[c] = (at[c] + call.length) % textSizes[text[c]];
    calls.push_back(call);
    recent.erase(std::remove(recent.begin(), recent.end(), c), recent.end());
    recent.insert(recent.begin(), c);
  }
  return calls;
}

std::string traceText(const TraceOptions& opt, const std::vector<TraceCall>& calls) {
  std::ostringstream out;
  out << "# tl-ctxswap trace 1 pattern=" << patternName(opt.pattern) << " contexts=" << opt.contexts
      << " seed=" << opt.seed << " rate=" << opt.rate << " scale=" << opt.scale << "\n";
  char line[160];
  for (const auto& c : calls) {
    std::snprintf(line, sizeof line, "%.3f\t%lld\t%lld\t%lld\t%lld\t%lld\n", c.time, static_cast<long long>(c.context),
                  static_cast<long long>(c.text), static_cast<long long>(c.offset), static_cast<long long>(c.length),
                  static_cast<long long>(c.generate));
    out << line;
  }
  return out.str();
}

std::vector<TraceCall> parseTrace(const std::string& text) {
  std::istringstream in(text);
  std::string line;
  int64_t number = 0;
  std::vector<TraceCall> calls;
  while (std::getline(in, line)) {
    ++number;
    if (number == 1) {
      if (line.rfind("# tl-ctxswap trace 1", 0) != 0) throw Error("line 1: not a tl-ctxswap trace (version 1)", ExitCode::BadInput);
      continue;
    }
    if (line.empty()) continue;
    std::istringstream f(line);
    TraceCall c;
    std::string rest;
    if (!(f >> c.time >> c.context >> c.text >> c.offset >> c.length >> c.generate) || (f >> rest) || c.time < 0 ||
        c.context < 0 || c.text < 0 || c.offset < 0 || c.length < 1 || c.generate < 0 ||
        (!calls.empty() && c.time < calls.back().time))
      throw Error("line " + std::to_string(number) + ": not TIME CONTEXT TEXT OFFSET LENGTH GENERATE in time order: '" + line + "'",
                  ExitCode::BadInput);
    calls.push_back(c);
  }
  if (number == 0) throw Error("line 1: an empty file, not a tl-ctxswap trace", ExitCode::BadInput);
  return calls;
}

std::string callPrompt(const TraceCall& call, size_t index, const std::vector<std::string>& texts) {
  if (call.text < 0 || call.text >= static_cast<int64_t>(texts.size()) || texts[static_cast<size_t>(call.text)].empty())
    throw Error("call " + std::to_string(index + 1) + " reads text " + std::to_string(call.text) + ", which was not given");
  const std::string& text = texts[static_cast<size_t>(call.text)];
  std::string prompt;
  for (int64_t k = 0; k < call.length; ++k) prompt.push_back(text[static_cast<size_t>((call.offset + k) % static_cast<int64_t>(text.size()))]);
  return prompt;
}

}  // namespace tl
