// tl-run: execute ONNX models on an OpenCL device.
//
//   tl-run --list-devices                        devices and their detected capabilities
//   tl-run model.onnx --check DIR                run every DIR/test_data_set_*, compare outputs
//   tl-run model.onnx --check DIR --profile      ... and print per-op device time
//   tl-run model.onnx --check DIR --explain      ... and each launch's kernel variant and why
//   tl-run model.onnx --generate --prompt "def " -n 200 [--temperature 0.8 --top-p 0.9 --seed 1]
//   tl-run model.onnx --perplexity FILE --window 512     bits per byte of a text
//   tl-run --tokenizer DIR --tokenize FILE       a Hugging Face tokenizer's ids, a line each
//   tl-run --tokenizer DIR --detokenize FILE     ... and ids back to text
//   tl-run --tokenizer DIR --render-chat FILE    chat requests through tokenizer_config.json's template
//   tl-run model.onnx --generate --chat --prompt "Hi" [--system TEXT]   a reply through the chat template
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <climits>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>

#include "bench/timing.h"
#include "check/reference_check.h"
#include "cli/error.h"
#include "cli/tool.h"
#include "graph/graph.h"
#include "lm/causal_lm.h"
#include "lm/perplexity.h"
#include "lm/loaded_lm.h"
#include "lm/speculative.h"
#include "lm/speculative_flags.h"
#include "sample/sampler.h"
#include "sample/sampling_flags.h"
#include "onnx/model_io.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "runtime/kernel_library.h"
#include "shape/shape_inference.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace {

// Each launch of the last run: its node, op, the kernel variant its lowering chose, its
// grid and why (runtime/lower/, the family's table of variants).
void printExplain(const tl::Executor& ex, const char* run) {
  const auto notes = ex.explain();
  std::fprintf(stderr, "explain (%s): %zu launches\n%s%s", run, notes.size(), tl::explainText(notes).c_str(),
               tl::chainsText(ex).c_str());
}

// Bytes for byte-level models (vocab 256), else ids separated by spaces.
void emitToken(int64_t token, int64_t vocab) {
  if (vocab == 256) {
    std::fputc(static_cast<int>(token), stdout);
  } else {
    std::printf("%lld ", static_cast<long long>(token));
  }
  std::fflush(stdout);
}

// Generated tokens as text through `stream` (a tokenizer's), else emitToken's bytes or ids.
void emit(int64_t token, int64_t vocab, tl::TextStream* stream) {
  if (!stream) return emitToken(token, vocab);
  std::fputs(stream->push(static_cast<int32_t>(token)).c_str(), stdout);
  std::fflush(stdout);
}

// What a generation prints and where it stops: the prompt's text or not (a chat's rendered
// template is not shown), and the ids that end the reply (a chat's eos_token), left unprinted.
struct Reply {
  bool showPrompt = true;
  std::vector<int64_t> stops;
};

void generate(tl::CausalLm& lm, tl::Executor& ex, std::vector<int64_t> prompt, int64_t n, int64_t context,
              const tl::SamplingOptions& opt, bool profile, bool explain, const tl::Tokenizer* tokenizer,
              const Reply& reply, tl::Drafter* drafter, int64_t draftMax) {
  if (prompt.empty()) throw tl::Error("the prompt is empty", tl::ExitCode::Usage);
  const int64_t limit = lm.positionLimit() ? std::min(context, lm.positionLimit()) : context;
  if (static_cast<int64_t>(prompt.size()) + n > limit)
    throw tl::Error("a prompt of " + std::to_string(prompt.size()) + " tokens plus " + std::to_string(n) +
                    " new ones exceeds the context of " + std::to_string(limit) +
                    (limit == context ? " (--context)" : " (the model's position table)"));
  tl::Sampler sampler(opt);
  sampler.prime(prompt);
  std::unique_ptr<tl::TextStream> stream;
  if (tokenizer) {  // the prompt's text (special tokens left out), then each token's as it comes
    stream = std::make_unique<tl::TextStream>(*tokenizer, std::vector<int32_t>(prompt.begin(), prompt.end()), true);
    if (reply.showPrompt) std::fputs(stream->text().c_str(), stdout);
  } else {
    for (auto t : prompt) emitToken(t, lm.vocab());
  }
  auto t0 = std::chrono::steady_clock::now();
  auto logits = lm.step(prompt);
  const double prefill = tl::secondsSince(t0);
  if (profile) std::fputs(tl::profileText(ex).c_str(), stderr);
  if (explain) printExplain(ex, "prefill");
  auto t1 = std::chrono::steady_clock::now();
  // Greedy steps pick their token on the device; sampling reads the logits.
  const bool greedy = opt.greedy();
  int64_t next = sampler.sample(logits), made = 0;
  tl::SpeculativeStats spec;
  if (drafter) {
    spec = tl::generateSpeculative(lm, *drafter, sampler, prompt, next, n, draftMax, [&](int64_t t) {
      if (std::count(reply.stops.begin(), reply.stops.end(), t)) return false;
      emit(t, lm.vocab(), stream.get());
      ++made;
      return true;
    });
  } else {
    for (int64_t i = 0; i < n; ++i) {
      if (std::count(reply.stops.begin(), reply.stops.end(), next)) break;
      emit(next, lm.vocab(), stream.get());
      ++made;
      if (i + 1 == n) break;
      next = greedy ? lm.stepGreedy({next}) : sampler.sample(lm.step({next}));
    }
  }
  const double decode = tl::secondsSince(t1);
  if (stream) std::fputs(stream->finish().c_str(), stdout);
  if (lm.vocab() != 256 || n > 0) std::printf("\n");
  if (profile && n > 1) {
    std::fprintf(stderr, "last decode step:\n");
    std::fputs(tl::profileText(ex).c_str(), stderr);
  }
  if (explain && n > 1) printExplain(ex, "last decode step");
  std::fprintf(stderr, "prefill: %zu tokens in %.1f ms (%.1f tok/s); decode: %lld tokens in %.1f ms (%.1f tok/s)%s\n",
               prompt.size(), prefill * 1e3, prompt.size() / prefill, static_cast<long long>(made), decode * 1e3,
               made > 1 ? (made - 1) / decode : 0.0, lm.hasCache() ? "" : " [no cache: each step re-runs the sequence]");
  if (drafter)
    std::fprintf(stderr, "speculative: %lld steps of %lld drafts, %lld of %lld drafted tokens taken (%.1f%%), %.2f tokens a step\n",
                 static_cast<long long>(spec.steps), static_cast<long long>(draftMax), static_cast<long long>(spec.accepted),
                 static_cast<long long>(spec.drafted), spec.drafted ? 100.0 * spec.accepted / spec.drafted : 0.0,
                 spec.steps ? double(made - 1) / spec.steps : 0.0);
}

void perplexity(tl::CausalLm& lm, const std::string& path, int64_t window, const tl::Tokenizer* tokenizer) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw tl::Error("--perplexity: cannot open '" + path + "'");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto t0 = std::chrono::steady_clock::now();
  tl::PerplexityResult r;
  try {
    r = tl::bitsPerByte(
        lm, text, window,
        [](const tl::PerplexityResult& so_far) {
          std::fprintf(stderr, "\rperplexity: %lld windows, %.4f bits per byte so far", static_cast<long long>(so_far.windows),
                       so_far.bitsPerByte);
        },
        tokenizer);
  } catch (const tl::Error& e) {
    throw tl::Error("--perplexity '" + path + "': " + e.what(), e.code());
  }
  std::fprintf(stderr, "\n");
  if (!tokenizer) {
    std::printf("%s: %.4f bits per byte (%lld bytes scored in %lld windows of up to %lld; %.1f s)\n", path.c_str(),
                r.bitsPerByte, static_cast<long long>(r.scored), static_cast<long long>(r.windows),
                static_cast<long long>(window), tl::secondsSince(t0));
    return;
  }
  std::printf("%s: %.4f bits per UTF-8 byte, %.4f bits per token (%lld tokens scored, %lld bytes, in %lld windows of up "
              "to %lld tokens; %.1f s)\n",
              path.c_str(), r.bitsPerByte, r.bitsPerToken, static_cast<long long>(r.scored), static_cast<long long>(r.bytes),
              static_cast<long long>(r.windows), static_cast<long long>(window), tl::secondsSince(t0));
}

// The tokenizer in `file` (tl::tokenizerFileFor's); errors name it.
tl::Tokenizer loadTokenizer(tl::Tool& tool, const std::string& file) {
  tool.blame(file);
  return tl::Tokenizer::fromFile(file);
}
// The chat template beside a tokenizer's file; errors name its tokenizer_config.json.
tl::ChatConfig loadChatConfig(tl::Tool& tool, const std::string& tokenizerFile) {
  const std::string file = (std::filesystem::path(tokenizerFile).parent_path() / "tokenizer_config.json").string();
  tool.blame(file);
  return tl::readChatConfig(file);
}

// Each line of FILE ('-': stdin; its newline dropped) through `line`, what it returns
// written out in order; errors name FILE and the first line that failed. The lines are
// shared among the cores (as the Rust tokenizers' encode_batch does): `line` must be safe
// to call from several threads.
void mapLines(tl::Tool& tool, const std::string& file, const std::function<std::string(const std::string&)>& line) {
  tool.blame(file);
  std::ifstream f;
  if (file != "-") {
    f.open(file, std::ios::binary);
    if (!f) throw tl::Error("cannot open");
  }
  std::istream& in = file == "-" ? std::cin : f;
  std::vector<std::string> lines;
  for (std::string text; std::getline(in, text);) lines.push_back(std::move(text));
  std::vector<std::string> outs(lines.size());
  std::vector<std::optional<tl::Error>> errors(lines.size());
  // Lines are handed out one at a time, not in equal blocks: one very long line must not
  // leave the other cores idle.
  const size_t workers = std::clamp<size_t>(std::thread::hardware_concurrency(), 1, 64);
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::vector<std::thread> threads;
  for (size_t w = 0; w < workers; ++w)
    threads.emplace_back([&] {
      for (size_t i; !failed && (i = next++) < lines.size();) {
        try {
          outs[i] = line(lines[i]);
        } catch (const tl::Error& e) {
          errors[i] = e;
          failed = true;
        }
      }
    });
  for (auto& t : threads) t.join();
  std::string out;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (errors[i]) throw tl::Error("line " + std::to_string(i + 1) + ": " + errors[i]->what(), errors[i]->code());
    out += outs[i];
  }
  tool.writeOutput(out, false);
}

// --tokenize / --detokenize: a line out each: ids space-separated, or the text of a line
// of ids.
void tokenizeLines(tl::Tool& tool, const tl::Tokenizer& tok, const std::string& file, bool back) {
  const auto t0 = std::chrono::steady_clock::now();
  std::atomic<int64_t> lines{0}, bytes{0};  // (mapLines calls from several threads)
  mapLines(tool, file, [&](const std::string& line) {
    ++lines, bytes += static_cast<int64_t>(line.size()) + 1;
    std::string out;
    if (back) {
      std::vector<int32_t> ids;
      std::istringstream words(line);
      for (std::string w; words >> w;) {
        char* end = nullptr;
        const long v = std::strtol(w.c_str(), &end, 10);
        if (*end || v < 0 || v > INT32_MAX) throw tl::Error("'" + w + "' is not a token id");
        if (!tok.knows(static_cast<int32_t>(v)))
          throw tl::Error("id " + w + " is not in the tokenizer's vocabulary (" + std::to_string(tok.vocabSize()) + " tokens)");
        ids.push_back(static_cast<int32_t>(v));
      }
      out = tok.decode(ids, false);
    } else {
      const auto ids = tok.encode(line, true);
      for (size_t i = 0; i < ids.size(); ++i) out += (i ? " " : "") + std::to_string(ids[i]);
    }
    return out + "\n";
  });
  const double seconds = tl::secondsSince(t0);  // (the lines' work and the output's write, not the tokenizer's load)
  std::fprintf(stderr, "%s: %lld lines, %lld bytes in %.3f s (%.2f MB/s)\n", back ? "detokenize" : "tokenize",
               static_cast<long long>(lines.load()), static_cast<long long>(bytes.load()), seconds, bytes / seconds / 1e6);
}

// --render-chat: each line of FILE a JSON request ({"messages": [...],
// "add_generation_prompt": ...}) rendered through the chat template of tokenizer_config.json
// (in --tokenizer's folder, or beside its file), a JSON string a line out.
void renderChats(tl::Tool& tool, const std::string& tokenizerPath, const std::string& file) {
  const tl::ChatConfig config = loadChatConfig(tool, tl::tokenizerFileFor(tokenizerPath, ""));
  const tl::ChatTemplate chat(config.source);
  mapLines(tool, file, [&](const std::string& line) {
    return line.empty() ? std::string() : tl::jsonString(chat.render(tl::chatContext(config, line))) + "\n";
  });
}

}  // namespace

int main(int argc, char** argv) {
  tl::Tool tool("tl-run",
                "tl-run: execute an ONNX model (plain, or any tl stage's artifact) on an OpenCL device.\n"
                "Shapes come from tl-shape's analysis (run here if the model has none): every shape\n"
                "expression is evaluated once per run and all tensor ops are enqueued without syncing.\n\n"
                "  tl-run --list-devices\n"
                "  tl-run model.onnx --check DIR [--atol 1e-4 --rtol 1e-3] [--profile] [--explain]\n"
                "  tl-run model.onnx --generate --prompt \"def \" -n 200 [--temperature 0.8 --top-p 0.95 --seed 1]\n"
                "  tl-run model.onnx --generate --chat --prompt \"Hi\" [--system TEXT]\n"
                "  tl-run model.onnx --perplexity FILE --window 512\n"
                "  tl-run --tokenizer DIR --tokenize FILE | --detokenize FILE | --render-chat FILE\n");
  std::string device, checkDir, prompt, tokens, perplexityFile, tokenizerPath, tokenizeFile, detokenizeFile, chatFile, system;
  bool listDevices = false, profile = false, explain = false, gen = false, chat = false;
  double atol = 1e-4, rtol = 1e-3;
  int64_t n = 128, window = 512, context = 4096;
  tl::SamplingOptions sampling;
  auto& app = tool.app();
  app.add_flag("--list-devices", listDevices, "list OpenCL devices with their capabilities, and exit");
  app.add_option("--device", device, "device by index (see --list-devices) or name substring; default: first GPU, else CPU");
  std::string gemm = "auto";
  app.add_option("--gemm", gemm, tl::kGemmChoiceHelp)
      ->check(CLI::IsMember({"auto", "f16", "portable"}))
      ->capture_default_str();
  bool noChains = false;
  app.add_flag("--no-chains", noChains,
               "CPU kernels: replay a step's one-item launches each on its own, not joined into task chains\n"
               "(one kernel that takes their tasks in turn; tl-run --explain lists the chains)");
  app.add_option("--check", checkDir, "run every DIR/test_data_set_* and compare with its outputs");
  app.add_option("--atol", atol, "absolute tolerance for --check (1e-2 where the plan keeps fp16 KV caches, 0.25 8-bit ones)")
      ->capture_default_str();
  app.add_option("--rtol", rtol, "relative tolerance for --check (1e-2 where the plan keeps fp16 KV caches, 0.1 8-bit ones)")
      ->capture_default_str();
  app.add_flag("--profile", profile, "print device time per op (OpenCL profiling events)");
  app.add_flag("--explain", explain,
               "print each kernel launch of a run (--generate: the prefill and the last decode step): its node,\n"
               "op, the kernel variant it took, its grid (global/work-group sizes) and why");
  app.add_flag("--generate", gen, "generate text: prefill the prompt, then decode -n tokens");
  app.add_option("--prompt", prompt,
                 "prompt text, through the tokenizer (--tokenizer, or tokenizer.json beside the model; the\n"
                 "reply streams as text), else bytes as tokens for byte-level models");
  app.add_option("--tokens", tokens, "prompt as token ids, e.g. 1,2,3 (any model)");
  app.add_option("-n", n, "tokens to generate")->capture_default_str();
  app.add_option("--context", context, "longest sequence (prompt + generated) allowed")->capture_default_str();
  tl::addSamplingFlags(app, sampling);
  tl::SpeculativeFlags spec;
  tl::addSpeculativeFlags(app, spec, "decoding");
  app.add_option("--perplexity", perplexityFile,
                 "score FILE: -log2 p of its tokens in --window windows, per UTF-8 byte (and per token) through the\n"
                 "tokenizer (--tokenizer, or tokenizer.json beside the model), else bytes as tokens");
  app.add_option("--window", window, "window for --perplexity, in tokens")->capture_default_str();
  app.add_option("--tokenizer", tokenizerPath,
                 "a Hugging Face tokenizer.json, or a folder holding one (docs/tokenizer.md: what it reads);\n"
                 "--generate takes tokenizer.json beside the model without it");
  app.add_option("--tokenize", tokenizeFile,
                 "with --tokenizer and no model: each line of FILE (- reads stdin) as the ids of\n"
                 "encode(line, add_special_tokens=True), space-separated, a line out each");
  app.add_option("--detokenize", detokenizeFile,
                 "with --tokenizer and no model: each line of FILE, ids separated by spaces, as the text\n"
                 "of decode(ids, skip_special_tokens=False), a line out each");
  app.add_flag("--chat", chat,
               "with --generate --prompt: the prompt as the user's turn of the chat template (tokenizer_config.json\n"
               "beside the tokenizer), the reply printed as text until the template's eos_token or -n tokens");
  app.add_option("--system", system, "with --chat: a system turn before the user's");
  app.add_option("--render-chat", chatFile,
                 "with --tokenizer and no model: each line of FILE a JSON object {\"messages\": [{\"role\": ...,\n"
                 "\"content\": ...}, ...], \"add_generation_prompt\": true|false} rendered through the chat template of\n"
                 "tokenizer_config.json (beside the tokenizer), a JSON string a line out: what transformers'\n"
                 "apply_chat_template(..., tokenize=False) returns");
  return tool.run(argc, argv, [&] {
    if (listDevices) {
      auto all = tl::listDevices();
      if (all.empty()) throw tl::Error("no OpenCL device found", tl::ExitCode::Device);
      for (size_t i = 0; i < all.size(); ++i) {
        std::cout << i << ": " << tl::describe(all[i]) << "\n";
        std::cout << "   " << tl::prefillGemmPath(tl::Device(all[i], false)) << "\n";
      }
      return;
    }
    if (!tokenizeFile.empty() || !detokenizeFile.empty() || !chatFile.empty()) {
      if (!tokenizeFile.empty() + !detokenizeFile.empty() + !chatFile.empty() > 1)
        throw tl::Error("give one of --tokenize FILE, --detokenize FILE, --render-chat FILE", tl::ExitCode::Usage);
      if (tokenizerPath.empty())
        throw tl::Error("--tokenize, --detokenize and --render-chat need --tokenizer FILE|DIR", tl::ExitCode::Usage);
      if (app.count("input") || !checkDir.empty() || gen || !perplexityFile.empty())
        throw tl::Error("--tokenize, --detokenize and --render-chat take no model and no other mode", tl::ExitCode::Usage);
      if (!chatFile.empty()) return renderChats(tool, tokenizerPath, chatFile);
      const auto t0 = std::chrono::steady_clock::now();
      const tl::Tokenizer tok = loadTokenizer(tool, tl::tokenizerFileFor(tokenizerPath, ""));
      std::fprintf(stderr, "tokenizer: %zu tokens, read in %.3f s\n", tok.vocabSize(), tl::secondsSince(t0));
      return tokenizeLines(tool, tok, tokenizeFile.empty() ? detokenizeFile : tokenizeFile, !detokenizeFile.empty());
    }
    if (!tokenizerPath.empty() && !gen && perplexityFile.empty())
      throw tl::Error("--tokenizer goes with --generate, --perplexity FILE, --tokenize FILE, --detokenize FILE or "
                      "--render-chat FILE",
                      tl::ExitCode::Usage);
    const int modes = !checkDir.empty() + gen + !perplexityFile.empty();
    if (modes != 1)
      throw tl::Error("give exactly one of --check DIR, --generate, --perplexity FILE, --tokenize FILE, --detokenize FILE "
                      "(or --list-devices)",
                      tl::ExitCode::Usage);
    if (gen && prompt.empty() == tokens.empty())
      throw tl::Error("--generate needs --prompt TEXT or --tokens IDS", tl::ExitCode::Usage);
    if (chat && (!gen || prompt.empty())) throw tl::Error("--chat goes with --generate --prompt TEXT", tl::ExitCode::Usage);
    if (app.count("--system") && !chat) throw tl::Error("--system goes with --chat", tl::ExitCode::Usage);
    if (n < 0) throw tl::Error("-n must be >= 0", tl::ExitCode::Usage);
    if (gen) (void)tl::Sampler(sampling);  // its settings refused before the model loads
    tl::checkSpeculativeFlags(spec, true);
    if (spec.any() && !gen) throw tl::Error("--draft and --prompt-lookup go with --generate", tl::ExitCode::Usage);
    tl::Model model = tl::loadModel(tool.input());
    tl::Graph graph(model.proto.graph());
    tl::ShapeAnalysis analysis = tl::inferShapes(model, graph);
    std::vector<tl::DataSet> sets;
    if (!checkDir.empty()) sets = tl::loadDataSets(checkDir);
    tl::Device dev(tl::selectDevice(device), profile);
    tl::setGemmChoice(dev, gemm);
    dev.setTaskChains(!noChains);
    std::fprintf(stderr, "device: %s / %s\n", dev.info().platformName.c_str(), dev.info().name.c_str());
    tl::Executor ex(dev, model, graph, analysis);
    if (gen || !perplexityFile.empty()) {
      tl::CausalLm lm(ex, graph, analysis);
      // The tokenizer: --tokenizer's, else a tokenizer.json beside the model.
      std::optional<tl::Tokenizer> tok;
      const std::string tokFile = tl::tokenizerFileFor(tokenizerPath, tool.input() == "-" ? "" : tool.input());
      if (!tokFile.empty()) tok = loadTokenizer(tool, tokFile);
      tool.blame(tool.input());
      if (tok) tl::checkTokenizerFits(*tok, lm.vocab());
      if (!perplexityFile.empty()) return perplexity(lm, perplexityFile, window, tok ? &*tok : nullptr);
      std::vector<int64_t> ids;
      Reply reply;
      if (chat) {
        if (!tok) throw tl::Error("--chat needs a tokenizer (--tokenizer, or tokenizer.json beside the model)", tl::ExitCode::Usage);
        const tl::ChatConfig config = loadChatConfig(tool, tokFile);
        std::string request = "{\"messages\": [";
        if (app.count("--system")) request += "{\"role\": \"system\", \"content\": " + tl::jsonString(system) + "}, ";
        request += "{\"role\": \"user\", \"content\": " + tl::jsonString(prompt) + "}], \"add_generation_prompt\": true}";
        const std::string text = tl::ChatTemplate(config.source).render(tl::chatContext(config, request));
        tool.blame(tool.input());
        for (int32_t id : tok->encode(text, false)) ids.push_back(id);  // (the template wrote the special tokens)
        reply.showPrompt = false;
        const auto eos = tok->encode(tl::chatToken(config, "eos_token"), false);
        if (eos.size() == 1) reply.stops.push_back(eos[0]);
      } else if (!tokens.empty()) {
        ids = tl::parseIntList("--tokens", tokens);
      } else if (tok) {
        for (int32_t id : tok->encode(prompt, true)) ids.push_back(id);
      } else if (lm.vocab() == 256) {
        ids = tl::byteTokens(prompt);
      } else {
        throw tl::Error("--prompt needs a tokenizer (--tokenizer, or tokenizer.json beside the model) or a byte-level "
                        "model (vocab 256); or give --tokens",
                        tl::ExitCode::Usage);
      }
      std::unique_ptr<tl::LoadedLm> draftLm;
      std::unique_ptr<tl::Drafter> drafter;
      if (!spec.draft.empty()) {
        tool.blame(spec.draft);
        draftLm = std::make_unique<tl::LoadedLm>(spec.draft, device);
        tl::setGemmChoice(draftLm->device, gemm);
        draftLm->device.setTaskChains(!noChains);
        drafter = std::make_unique<tl::DraftModel>(draftLm->lm, lm);
        tool.blame(tool.input());
      } else if (spec.lookup) {
        drafter = std::make_unique<tl::PromptLookup>();
      }
      return generate(lm, ex, ids, n, context, sampling, profile, explain, tok ? &*tok : nullptr, reply, drafter.get(),
                      spec.draftMax);
    }
    // fp16 caches round every key and value (2^-11 relative), 8-bit ones to 1/254 of their
    // block's largest, and the rounding grows through the layers: bytellama's logits move by
    // up to 5.5e-3 with fp16 caches, 0.151 with 8-bit ones (docs/tl-plan.md).
    if (ex.kvType() != tl::KvType::F32) {
      const bool q8 = ex.kvType() == tl::KvType::Q8;
      if (!app.count("--atol")) atol = q8 ? 0.25 : 1e-2;
      if (!app.count("--rtol")) rtol = q8 ? 0.1 : 1e-2;
    }
    bool allPass = true;
    for (const auto& set : sets) {
      std::vector<std::string> names;
      for (const auto& t : set.outputs) names.push_back(t.name);
      std::vector<tl::Tensor> got;
      try {
        got = ex.run(set.inputs, names);
      } catch (const tl::Error& e) {
        throw tl::Error(set.dir.filename().string() + ": " + e.what(), e.code());
      }
      std::printf("%s:\n", set.dir.filename().c_str());
      for (size_t j = 0; j < got.size(); ++j) {
        auto c = tl::compareTensors(got[j], set.outputs[j], atol, rtol);
        allPass = allPass && c.pass();
        if (!c.shapeMatches) {
          std::printf("  %-28s FAIL shape %s vs reference %s\n", c.name.c_str(),
                      tl::str(std::vector<tl::SymExpr>(got[j].dims.begin(), got[j].dims.end())).c_str(),
                      tl::str(std::vector<tl::SymExpr>(set.outputs[j].dims.begin(), set.outputs[j].dims.end())).c_str());
          continue;
        }
        std::printf("  %-28s %s  max abs %.3g  max rel %.3g  (%lld of %lld over atol %g + rtol %g)\n", c.name.c_str(),
                    c.pass() ? "PASS" : "FAIL", c.maxAbs, c.maxRel, static_cast<long long>(c.mismatches),
                    static_cast<long long>(set.outputs[j].numel()), atol, rtol);
      }
      if (profile) std::fputs(tl::profileText(ex).c_str(), stderr);
      if (explain) printExplain(ex, set.dir.filename().c_str());
    }
    std::printf("%s\n", allPass ? "PASSED" : "FAILED");
    if (!allPass) throw tl::Error("outputs differ from the reference beyond the tolerances");
  });
}
