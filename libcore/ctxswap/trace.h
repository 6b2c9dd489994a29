// Context-switching traces (LLMS 4, eq. 5; issue 11): when each call comes, which
// context it is for, and which text it adds, synthesized from a seed so that a replay is
// reproducible, and kept as a file.
//
// Calls arrive as a Poisson process (exponential gaps at `rate` calls a second). Each
// context is given one of the tasks of LLMS Table 3, whose "delta length" range is how
// much a call grows the context (tokens; `scale` shrinks them for small models), and
// reads its text in consecutive slices of one of the given texts. Which context a call
// is for follows the pattern:
//   random    every context alike;
//   markov    a first-order Markov chain that favours the recently used: weight
//             1 / (1 + r), r the number of distinct contexts called since this one
//             (never called: r = contexts);
//   gaussian  weight exp(-(m - mu)^2 / (2 sigma^2)) of the context's mean delta length
//             m, mu and sigma over the contexts: moderate workloads come most.
//
// File format (text, one call a line after a header):
//   # tl-ctxswap trace 1 pattern=P contexts=N seed=S rate=R scale=F
//   TIME_S <TAB> CONTEXT <TAB> TEXT <TAB> OFFSET <TAB> LENGTH <TAB> GENERATE
// TEXT indexes the texts the trace was made from (in the order given), OFFSET and LENGTH
// are the call's prompt bytes in it, GENERATE the tokens the call asks for.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tl {

enum class SwitchPattern { Random, Markov, Gaussian };
SwitchPattern parsePattern(const std::string& name);  // throws tl::Error (usage) for others
const char* patternName(SwitchPattern p);

struct TaskLength {  // LLMS Table 3: a task and how much a call grows its context
  const char* task;
  int64_t lo, hi;
};
const std::vector<TaskLength>& llmsTasks();

struct TraceCall {
  double time = 0;
  int64_t context = 0, text = 0, offset = 0, length = 0, generate = 0;
};

struct TraceOptions {
  SwitchPattern pattern = SwitchPattern::Random;
  int64_t contexts = 8, calls = 100, generate = 16;
  double rate = 1.0 / 300;  // calls a second: one in five minutes on average (LLMS 5.2)
  double scale = 1.0;       // delta lengths times this (at least 1 token)
  uint64_t seed = 1;
};

// textSizes: the bytes of each text the prompts come from. A context that reaches the
// end of its text wraps around to its start.
std::vector<TraceCall> synthesizeTrace(const TraceOptions& opt, const std::vector<int64_t>& textSizes);
std::string traceText(const TraceOptions& opt, const std::vector<TraceCall>& calls);
// Throws tl::Error naming the line for a malformed file.
std::vector<TraceCall> parseTrace(const std::string& text);
// Call number `index` (from 0)'s prompt: its LENGTH bytes of texts[TEXT] from OFFSET,
// wrapping at the text's end. Throws tl::Error naming the call for a text not given.
std::string callPrompt(const TraceCall& call, size_t index, const std::vector<std::string>& texts);

}  // namespace tl
