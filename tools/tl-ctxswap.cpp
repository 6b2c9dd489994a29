// tl-ctxswap: LLM contexts under a memory budget (LLMS) as a service, and the bench that
// replays its experiments.
//
//   tl-ctxswap serve --model m.onnx --budget 256MiB --swap-dir DIR &
//   id=$(tl-ctxswap new --system "# notes"); tl-ctxswap call $id "def fib(" -n 64; tl-ctxswap ls
//   tl-ctxswap trace --texts a.txt,b.txt --pattern markov --contexts 8 --calls 200 -o t.trace
//   tl-ctxswap calibrate --model m.onnx -o costs.txt
//   tl-ctxswap replay t.trace --model m.onnx --texts a.txt,b.txt --budget 2MiB --policy llms,vllm-sq,lmk
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>

#include "cli/error.h"
#include "cli/tool.h"
#include "ctxswap/calibrate.h"
#include "ctxswap/context_store.h"
#include "ctxswap/durable_file.h"
#include "ctxswap/replay.h"
#include "ctxswap/service.h"
#include "ctxswap/trace.h"
#include "lm/loaded_lm.h"
#include "lm/speculative_flags.h"
#include "sample/sampling_flags.h"
#include "text/tokenizer.h"

namespace {

// A file's bytes; throws tl::Error when it cannot be read.
std::string fileBytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw tl::Error("cannot read the file");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string readText(tl::Tool& tool, const std::string& path) {
  tool.blame(path);
  return fileBytes(path);
}

std::vector<std::string> readTexts(tl::Tool& tool, const std::string& list) {
  std::vector<std::string> texts;
  for (const auto& path : tl::splitCommas(list)) {
    texts.push_back(readText(tool, path));
    if (texts.back().empty()) throw tl::Error("the text is empty");
  }
  if (texts.empty()) throw tl::Error("--texts names no file", tl::ExitCode::Usage);
  return texts;
}

// A causal LM with caches, ready on a device; its fingerprint is its file's.
struct Engine : tl::LoadedLm {
  Engine(const std::string& path, const std::string& device) : LoadedLm(path, device) {
    const std::string bytes = fileBytes(path);
    fingerprint = tl::fnv1a(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    if (!lm.hasCache()) throw tl::Error("the model has no past_key_values inputs: export it with its cache (*-past)");
  }
  uint64_t fingerprint = 0;
};

void makeDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw tl::Error(dir + ": cannot create the swap directory: " + ec.message());
}

std::atomic<bool> stopServing{false};
extern "C" void onStopSignal(int) { stopServing = true; }

// Prints a service's error line as this tool's error (exit 1).
void failOn(const tl::JsonLine& l) {
  if (auto e = l.strings.find("error"); e != l.strings.end()) throw tl::Error(e->second);
}

}  // namespace

int main(int argc, char** argv) {
  tl::Tool tool("tl-ctxswap",
                "tl-ctxswap: LLM contexts under a memory budget (LLMS, docs/tl-ctxswap.md). A context is\n"
                "its token log and its KV rows in chunks of --chunk tokens; chunks are held in memory up\n"
                "to --budget, written to --swap-dir ahead of time, and loaded back by reading or\n"
                "recomputing them when their context is called (the context switch). Policies: llms\n"
                "(chunks at 8, 4 or 2 bits by the attention they draw, LCTRU reclaim, reads overlapped\n"
                "with recompute), vllm-s (uncompressed chunks swapped), vllm-sq (8-bit chunks swapped),\n"
                "swap (whole contexts swapped), lmk (whole contexts killed and recomputed).\n\n"
                "Verbs (the service; LLMS Table 1's newLLMCtx, callLLM, delLLMCtx):\n"
                "  serve      hold contexts for the apps that call it, on a Unix socket (owner-only)\n"
                "  new        make a context (--system PROMPT); prints its id\n"
                "  call       ID PROMPT [-n N]: append the prompt, stream N tokens of reply (greedy,\n"
                "             or --temperature, --top-k, --top-p, --mirostat, --fsd-alpha, ...: call --help)\n"
                "  del        ID: delete a context; ls: this app's contexts; stats: the service's memory\n"
                "Contexts belong to the user who made them (the socket's peer credentials) and the\n"
                "--app name given, and survive a crash of the service: they are in --swap-dir.\n\n"
                "Verbs (the bench):\n"
                "  trace      synthesize a trace of calls (LLMS 4: Poisson arrivals; random, markov or\n"
                "             gaussian context switching; Table 3's prompt growth) as a file\n"
                "  calibrate  measure the load's cost lines on this device and model (recompute\n"
                "             seconds per chunk, read and zstd decompression seconds per byte) as a\n"
                "             file for --costs\n"
                "  replay     run a trace's calls back to back under each --policy with one budget;\n"
                "             a table of context switching latency per policy\n"
                "  sweep      traces of 2, 4, 8, ... contexts under one budget: the most each policy\n"
                "             serves with a mean switch within --bound-ms, and a plot (--plot)\n\n"
                "  tl-ctxswap serve --model m.onnx --budget 256MiB --swap-dir ~/.tl-ctxswap &\n"
                "  tl-ctxswap serve --model planned.onnx --policy vllm-sq --max-batch 8 &   (tl-plan --batch 8)\n"
                "  id=$(tl-ctxswap new --system '# notes'); tl-ctxswap call $id 'def fib(' -n 64\n"
                "  tl-ctxswap trace --texts a.txt --pattern markov --contexts 8 --calls 200 -o t.trace\n"
                "  tl-ctxswap calibrate --model m.onnx -o costs.txt\n"
                "  tl-ctxswap replay t.trace --model m.onnx --texts a.txt --budget 2MiB --costs costs.txt\n");
  auto& app = tool.app();
  // Every output is text, and each verb names its own inputs: the shared model input,
  // --emit and -f do not apply.
  for (const char* o : {"input", "--emit", "--force"}) app.remove_option(app.get_option(o));
  app.require_subcommand(1);

  tl::TraceOptions topt;
  std::string texts, pattern = "random";
  auto* trace = app.add_subcommand("trace", "synthesize a trace of calls (file format: docs/tl-ctxswap.md)")->fallthrough();
  trace->add_option("--texts", texts, "comma-separated text files the prompts are slices of")->required();
  trace->add_option("--pattern", pattern, "which context each call is for: random, markov or gaussian")
      ->check(CLI::IsMember({"random", "markov", "gaussian"}))
      ->capture_default_str();
  trace->add_option("--contexts", topt.contexts, "contexts")->check(CLI::PositiveNumber)->capture_default_str();
  trace->add_option("--calls", topt.calls, "calls")->check(CLI::PositiveNumber)->capture_default_str();
  trace->add_option("--rate", topt.rate, "calls a second (Poisson)")->check(CLI::PositiveNumber)->capture_default_str();
  trace->add_option("--scale", topt.scale, "Table 3's delta lengths times this")->check(CLI::PositiveNumber)->capture_default_str();
  trace->add_option("--generate", topt.generate, "tokens each call generates")->check(CLI::NonNegativeNumber)->capture_default_str();
  trace->add_option("--seed", topt.seed, "random seed")->capture_default_str();

  std::string model, device, swapDir = "ctxswap-swap", policies = "llms,vllm-s,vllm-sq,swap,lmk", budget = "2MiB", costs;
  tl::StoreOptions sopt;
  const auto engineOptions = [&](CLI::App* verb) {
    verb->add_option("--model", model, "a causal LM exported with its cache (*-past): byte-level (vocab 256), except for serve with a tokenizer")->required();
    verb->add_option("--device", device, "device by index or name substring (tl-run --list-devices)");
    verb->add_option("--chunk", sopt.chunk, "tokens a KV chunk")->check(CLI::PositiveNumber)->capture_default_str();
    verb->add_option("--swap-dir", swapDir, "where chunk files go (a folder per policy under it)")->capture_default_str();
  };
  auto* calibrate = app.add_subcommand("calibrate", "measure the load's cost lines (file: docs/tl-ctxswap.md)")->fallthrough();
  engineOptions(calibrate);
  std::string traceFile;
  auto* replay = app.add_subcommand("replay", "run a trace under each policy: context switching latency")->fallthrough();
  replay->add_option("trace", traceFile, "the trace file (tl-ctxswap trace)")->required();
  engineOptions(replay);
  replay->add_option("--texts", texts, "the trace's text files, in the order it was made from")->required();
  replay->add_option("--policy", policies, "comma-separated: llms, vllm-s, vllm-sq, swap, lmk")->capture_default_str();
  replay->add_option("--budget", budget, "KV bytes held in memory (KiB, MiB, GiB)")->capture_default_str();
  replay->add_option("--ratio", sopt.ratio, "llms: mean bits / 8 over a context's chunks")->check(CLI::Range(0.25, 1.0))->capture_default_str();
  replay->add_option("--costs", costs, "the load's cost lines (tl-ctxswap calibrate -o FILE); default: calibrate first");
  replay->add_option("--max-tokens", sopt.maxTokens, "the longest a context may grow")->check(CLI::PositiveNumber)->capture_default_str();

  std::string counts = "2,4,8,16,32", plot;
  double boundMs = 5;
  int64_t callsEach = 8;
  auto* sweep = app.add_subcommand("sweep", "the most active contexts each policy serves within a latency bound")->fallthrough();
  engineOptions(sweep);
  sweep->add_option("--texts", texts, "comma-separated text files the prompts are slices of")->required();
  sweep->add_option("--contexts", counts, "the counts of contexts to try, comma-separated")->capture_default_str();
  sweep->add_option("--pattern", pattern, "random, markov or gaussian")->check(CLI::IsMember({"random", "markov", "gaussian"}))->capture_default_str();
  sweep->add_option("--calls", callsEach, "calls a context (a trace of n contexts has n times as many)")->check(CLI::PositiveNumber)->capture_default_str();
  sweep->add_option("--scale", topt.scale, "Table 3's delta lengths times this")->check(CLI::PositiveNumber)->capture_default_str();
  sweep->add_option("--generate", topt.generate, "tokens each call generates")->check(CLI::NonNegativeNumber)->capture_default_str();
  sweep->add_option("--seed", topt.seed, "random seed")->capture_default_str();
  sweep->add_option("--policy", policies, "comma-separated: llms, vllm-s, vllm-sq, swap, lmk")->capture_default_str();
  sweep->add_option("--budget", budget, "KV bytes held in memory (KiB, MiB, GiB)")->capture_default_str();
  sweep->add_option("--costs", costs, "the load's cost lines (tl-ctxswap calibrate -o FILE); default: calibrate first");
  sweep->add_option("--bound-ms", boundMs, "the latency bound: a mean context switch in ms")->check(CLI::PositiveNumber)->capture_default_str();
  sweep->add_option("--plot", plot, "write the sweep as an SVG plot to this file");
  const std::string defaultSocket = "/tmp/tl-ctxswap-" + std::to_string(::getuid()) + ".sock";
  std::string socket = defaultSocket, appName, system, prompt, servePolicy = "llms";
  int64_t callId = 0, generate = 16;
  const auto client = [&](CLI::App* verb) {
    verb->add_option("--socket", socket, "the service's socket")->capture_default_str();
    verb->add_option("--app", appName, "which of this user's apps: its contexts are its own");
  };
  auto* serveVerb = app.add_subcommand("serve", "hold contexts on a Unix socket until SIGTERM or SIGINT")->fallthrough();
  engineOptions(serveVerb);
  client(serveVerb);
  serveVerb->add_option("--policy", servePolicy, "llms, vllm-s, vllm-sq, swap or lmk")->capture_default_str();
  std::string tokenizerPath;
  serveVerb->add_option("--tokenizer", tokenizerPath,
                        "a Hugging Face tokenizer.json, or a folder holding one: texts in and replies out go through\n"
                        "it (default: tokenizer.json beside the model; without one, bytes are tokens)");
  serveVerb->add_option("--budget", budget, "KV bytes held in memory (KiB, MiB, GiB)")->capture_default_str();
  serveVerb->add_option("--ratio", sopt.ratio, "llms: mean bits / 8 over a context's chunks")->check(CLI::Range(0.25, 1.0))->capture_default_str();
  serveVerb->add_option("--costs", costs, "the load's cost lines (tl-ctxswap calibrate -o FILE); default: calibrate first");
  serveVerb->add_option("--max-contexts", sopt.maxContextsPerOwner, "contexts an app may hold")->check(CLI::PositiveNumber)->capture_default_str();
  serveVerb->add_option("--max-tokens", sopt.maxTokens, "the longest a context may grow")->check(CLI::PositiveNumber)->capture_default_str();
  tl::SpeculativeFlags spec;
  tl::addSpeculativeFlags(*serveVerb, spec, "calls (each reply the one without drafts)");
  int64_t maxBatch = 0;
  serveVerb->add_option("--max-batch", maxBatch,
                        "decode up to N calls together, one run a step (a model planned with tl-plan --batch N, a\n"
                        "policy other than llms); default: one call at a time");
  auto* newVerb = app.add_subcommand("new", "make a context; prints its id")->fallthrough();
  client(newVerb);
  newVerb->add_option("--system", system, "the context's first text");
  auto* callVerb = app.add_subcommand("call", "append a prompt to a context and stream the reply")->fallthrough();
  client(callVerb);
  callVerb->add_option("id", callId, "the context")->required();
  callVerb->add_option("prompt", prompt, "the text to append")->required();
  callVerb->add_option("-n", generate, "tokens to generate")->check(CLI::NonNegativeNumber)->capture_default_str();
  tl::SamplingOptions sampling;
  tl::addSamplingFlags(*callVerb, sampling);
  auto* delVerb = app.add_subcommand("del", "delete a context")->fallthrough();
  client(delVerb);
  delVerb->add_option("id", callId, "the context")->required();
  auto* lsVerb = app.add_subcommand("ls", "this app's contexts: tokens, chunks in memory and on disk by bits")->fallthrough();
  client(lsVerb);
  auto* statsVerb = app.add_subcommand("stats", "the service's contexts and KV memory")->fallthrough();
  client(statsVerb);

  return tool.run(argc, argv, [&] {
    // The load's cost lines: --costs, or measured here (printed, to be kept for --costs).
    const auto loadCosts = [&](Engine& e) {
      if (!costs.empty()) {
        const tl::LoadCosts c = tl::parseCosts(readText(tool, costs), sopt.chunk);
        tool.blame(model);
        return c;
      }
      makeDir(swapDir);  // the calibration writes its chunk files there
      const tl::LoadCosts c = tl::calibrateLoad(e.ex, e.lm, swapDir, sopt.chunk);
      std::cerr << tl::costsText(c, sopt.chunk);
      return c;
    };
    const auto ask = [&](tl::JsonWriter w, const std::function<void(const tl::JsonLine&)>& onLine) {
      tool.blame(socket);
      if (!appName.empty()) w.str("app", appName);
      tl::request(socket, w.line(), [&](const tl::JsonLine& l) {
        failOn(l);
        onLine(l);
      });
    };
    if (newVerb->parsed()) {
      ask(tl::JsonWriter().str("verb", "new").str("system", system),
          [&](const tl::JsonLine& l) { tool.writeOutput(std::to_string(l.ints.at("id")) + "\n", false); });
      return;
    }
    if (callVerb->parsed()) {
      std::string reply;
      tl::JsonWriter call;
      call.str("verb", "call").num("id", callId).str("prompt", prompt).num("n", generate);
      tl::writeSampling(call, sampling);
      ask(call,
          [&](const tl::JsonLine& l) {  // a tokenizer's service sends text, a byte model's the bytes as tokens
            std::string piece;
            if (auto t = l.strings.find("text"); t != l.strings.end()) piece = t->second;
            else if (auto b = l.ints.find("token"); b != l.ints.end()) piece = std::string(1, static_cast<char>(b->second));
            reply += piece;
            if (tool.output() == "-") std::cout << piece << std::flush;
          });
      if (tool.output() == "-") std::cout << "\n";
      else tool.writeOutput(reply, false);
      return;
    }
    if (delVerb->parsed()) {
      ask(tl::JsonWriter().str("verb", "del").num("id", callId), [](const tl::JsonLine&) {});
      return;
    }
    if (lsVerb->parsed() || statsVerb->parsed()) {
      std::string out = lsVerb->parsed() ? "id\ttokens\tin memory (bits:chunks)\ton disk\n" : "";
      ask(tl::JsonWriter().str("verb", lsVerb->parsed() ? "ls" : "stats"), [&](const tl::JsonLine& l) {
        if (lsVerb->parsed() && l.ints.count("id"))
          out += std::to_string(l.ints.at("id")) + "\t" + std::to_string(l.ints.at("tokens")) + "\t" +
                 l.strings.at("memory") + "\t" + l.strings.at("disk") + "\n";
        if (statsVerb->parsed())
          for (const auto& [k, v] : l.ints) out += k + "\t" + std::to_string(v) + "\n";
      });
      tool.writeOutput(out, false);
      return;
    }
    if (serveVerb->parsed()) {
      std::optional<tl::Tokenizer> tok;
      if (const std::string file = tl::tokenizerFileFor(tokenizerPath, model); !file.empty()) {
        tool.blame(file);
        tok = tl::Tokenizer::fromFile(file);
      }
      tool.blame(model);
      Engine e(model, device);
      if (!tok && e.lm.vocab() != 256)
        throw tl::Error("without a tokenizer (--tokenizer, or tokenizer.json beside the model) the service feeds bytes as "
                        "tokens: it needs a byte-level model (vocab 256)");
      if (tok) tl::checkTokenizerFits(*tok, e.lm.vocab());
      sopt.policy = tl::parsePolicy(servePolicy);
      tl::checkSpeculativeFlags(spec, true);
      if (serveVerb->count("--max-batch"))  // before calibrating
        tl::checkBatchable(e.ex, e.lm, sopt.policy, maxBatch, spec.any());
      if (spec.any()) tl::checkSpeculative(e.lm, sopt.policy);
      std::unique_ptr<tl::Drafter> drafter;
      std::optional<tl::LoadedLm> draftLm;
      if (spec.lookup) drafter = std::make_unique<tl::PromptLookup>();
      if (!spec.draft.empty()) {
        tool.blame(spec.draft);
        draftLm.emplace(spec.draft, device);
        drafter = std::make_unique<tl::DraftModel>(draftLm->lm, e.lm);
        tool.blame(model);
      }
      sopt.budget = tl::parseByteSize("--budget", budget);
      sopt.swapDir = swapDir;
      sopt.costs = loadCosts(e);
      tl::ContextStore store(e.ex, e.lm, e.fingerprint, sopt);
      if (serveVerb->count("--max-batch")) store.enableBatch(maxBatch);
      if (drafter) store.setDrafter(drafter.get(), spec.draftMax);
      for (const auto& n : store.recoveryNotes()) std::cerr << "tl-ctxswap: skipped " << n << "\n";
      std::signal(SIGTERM, onStopSignal);
      std::signal(SIGINT, onStopSignal);
      // A file-size limit (`ulimit -f`, a quota) then fails the write (EFBIG), which the
      // store survives like a full disk, instead of killing the service.
      std::signal(SIGXFSZ, SIG_IGN);
      std::cerr << "tl-ctxswap: serving " << store.contexts() << " contexts on " << socket
                << (maxBatch ? ", up to " + std::to_string(maxBatch) + " calls a step" : std::string()) << "\n";
      tool.blame(socket);
      tl::serve(store, tok ? &*tok : nullptr, socket, stopServing);
      return;
    }
    if (trace->parsed()) {
      topt.pattern = tl::parsePattern(pattern);
      std::vector<int64_t> sizes;
      for (const auto& t : readTexts(tool, texts)) sizes.push_back(static_cast<int64_t>(t.size()));
      tool.writeOutput(tl::traceText(topt, tl::synthesizeTrace(topt, sizes)), false);
      return;
    }
    if (calibrate->parsed()) {
      tool.blame(model);
      Engine e(model, device);
      makeDir(swapDir);
      tool.writeOutput(tl::costsText(tl::calibrateLoad(e.ex, e.lm, swapDir, sopt.chunk), sopt.chunk), false);
      return;
    }
    std::vector<tl::Policy> chosen;
    for (const auto& p : tl::splitCommas(policies)) chosen.push_back(tl::parsePolicy(p));
    sopt.budget = tl::parseByteSize("--budget", budget);
    if (sweep->parsed()) {
      topt.pattern = tl::parsePattern(pattern);
      topt.calls = callsEach;
      const std::vector<int64_t> n = tl::parseIntList("--contexts", counts);
      const std::vector<std::string> corpus = readTexts(tool, texts);
      tool.blame(model);
      Engine e(model, device);
      sopt.costs = loadCosts(e);
      const auto points = tl::sweepContexts(e.ex, e.lm, e.fingerprint, topt, n, corpus, sopt, chosen, swapDir);
      if (!plot.empty()) tl::writeFileAtomically(plot, tl::sweepSvg(points, boundMs));
      tool.writeOutput(tl::sweepTable(points, boundMs), false);
      return;
    }
    const std::vector<tl::TraceCall> calls = tl::parseTrace(readText(tool, traceFile));
    const std::vector<std::string> corpus = readTexts(tool, texts);
    tool.blame(model);
    Engine e(model, device);
    sopt.costs = loadCosts(e);
    std::vector<tl::PolicyReplay> runs;
    for (tl::Policy p : chosen) {
      sopt.policy = p;
      sopt.swapDir = (std::filesystem::path(swapDir) / tl::policyName(p)).string();
      runs.push_back({p, sopt.budget, tl::replayTrace(e.ex, e.lm, e.fingerprint, calls, corpus, sopt)});
      std::cerr << "tl-ctxswap: " << tl::policyName(p) << " replayed " << calls.size() << " calls\n";
    }
    tool.writeOutput(tl::replayTable(runs), false);
  });
}
