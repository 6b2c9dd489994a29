// tl-bench: speed as a command, llama-bench style, judged against the device's own
// measured limits and beside peers from the same run.
//
//   tl-bench model.onnx                              pp128..pp2048 and tg128, 5 repetitions, md
//   tl-bench model.onnx -p 128,1024 -n 128 -d 0,1024 -r 3 -o json
//   tl-bench planned.onnx -p '' -n 128 -d 128 -b 1,4,16   16 sequences at once (tl-plan --batch 16)
//   tl-bench model.onnx --peer 'node scripts/bench_ort.mjs model.onnx'   peers' rows beside tl's
//   tl-bench model.onnx --bind batch=1,N=77          a model that is not an LM: latency per forward
//   tl-bench --probe                                 the device alone: bandwidth, peak, launch, round trip
//   tl-bench --kernels                               quantized GEMV table (Transformer-Lite Table 1)
//   tl-bench model.onnx --plot roofline.svg          the rows against the device's ceilings
#include <cmath>
#include <cstdio>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <unistd.h>

#include "bench/kernel_table.h"
#include "bench/lm_bench.h"
#include "bench/probe.h"
#include "bench/report.h"
#include "cli/error.h"
#include "cli/tool.h"
#include "graph/graph.h"
#include "lm/causal_lm.h"
#include "lm/loaded_lm.h"
#include "lm/speculative_flags.h"
#include "onnx/model_io.h"
#include "quant/quant.h"
#include "runtime/device.h"
#include "runtime/executor.h"
#include "shape/binding.h"
#include "shape/shape_inference.h"

namespace {

std::string join(const std::vector<int64_t>& v) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
  return s;
}

// "bytellama-past/model.onnx" -> "bytellama-past"; "q.e0m4.onnx" -> "q.e0m4".
std::string modelName(const std::string& path) {
  if (path == "-") return "<stdin>";
  std::filesystem::path p(path);
  const std::string stem = p.stem().string();
  return stem == "model" && p.has_parent_path() ? p.parent_path().filename().string() : stem;
}

// Runs a peer with the same tests and reads the rows it prints (jsonl on stdout).
std::vector<tl::BenchRow> runPeer(const std::string& cmd, const std::string& args) {
  const std::string full = cmd + " " + args;
  std::fprintf(stderr, "tl-bench: peer: %s\n", full.c_str());
  FILE* f = popen(full.c_str(), "r");
  if (!f) throw tl::Error("cannot start peer '" + cmd + "'");
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) out.append(buf, n);
  const int status = pclose(f);
  if (status != 0)
    throw tl::Error("peer '" + cmd + "' failed (exit " + std::to_string(WIFEXITED(status) ? WEXITSTATUS(status) : status) +
                    ")");
  return tl::parseRows(out, "peer '" + cmd + "'");
}

}  // namespace

int main(int argc, char** argv) {
  tl::Tool tool("tl-bench",
                "tl-bench: tokens per second of a model on an OpenCL device, llama-bench style, with\n"
                "each row judged against the device's limits measured in the same run.\n\n"
                "Tests: ppP prefills P tokens in one step; tgN decodes N tokens one at a time (the\n"
                "first from a context of one token); @dD runs a test after a D-token context\n"
                "(untimed). Each test runs once to warm up, once profiled (kernels and device time per\n"
                "step), then -r times for t/s (mean ± stddev). Columns: weights; bytes/token (what the test\n"
                "must move per token: weights once, the KV cache read, the new rows written); GB/s\n"
                "and % of the probe's bandwidth; GFLOP/s and % of its fp32 peak; kernels, device and\n"
                "host ms per step. docs/tl-bench.md says how to read a row.\n\n"
                "  tl-bench model.onnx [-p 128,512 -n 128 -d 0,1024 -r 5] [-o md|csv|json|jsonl|FILE]\n"
                "  tl-bench planned.onnx -p '' -n 128 -d 128 -b 1,4,16   (16 sequences at once: tl-plan --batch 16)\n"
                "  tl-bench model.onnx --peer 'node scripts/bench_ort.mjs model.onnx'\n"
                "  tl-bench model.onnx --bind batch=1,N=77     (not an LM: latency per forward)\n"
                "  tl-bench --probe | --kernels [--plot roofline.svg]\n");
  std::string device, prompts = "128,512,1024,2048", gens = "128", depths = "0", batches = "1", format, bind, plot, name;
  std::string schemes = "e0m4,int4,w4a8,q8,q3h", kernelShapes = tl::kDefaultKernelShapes;
  std::vector<std::string> peers, models;
  int reps = 5, kernelRuns = 20;
  bool probeOnly = false, kernels = false;
  auto& app = tool.app();
  app.get_option("-o")->description(
      "md, csv, json or jsonl (to stdout), or an output FILE whose extension names the format; - is stdout");
  app.add_option("-p,--n-prompt", prompts, "prefill tests: prompt lengths, comma-separated ('' for none)")->capture_default_str();
  app.add_option("-n,--n-gen", gens, "decode tests: tokens to generate, comma-separated ('' for none)")->capture_default_str();
  app.add_option("-d,--n-depth", depths, "run each test after contexts of these lengths")->capture_default_str();
  app.add_option("-b,--batch", batches,
                 "decode tests of this many sequences at once, comma-separated, each with its own context (-d), "
                 "as llama-batched-bench's parallel sequences: t/s is theirs together. Needs a plan of at least the "
                 "largest (tl-plan --batch N)")
      ->capture_default_str();
  app.add_option("-r,--repetitions", reps, "timed repetitions of each test")->capture_default_str();
  app.add_option("-m,--model", models, "another model to run the same tests on (rows side by side); repeatable");
  app.add_option("--format", format, "md, csv, json or jsonl (default: from -o, else md)");
  app.add_option("--device", device, "device by index or name substring (see tl-run --list-devices)");
  app.add_option("--bind", bind, "a model that is not a causal LM: symbol values for its inputs, e.g. batch=1,N=77");
  app.add_option("--peer", peers,
                 "a command that runs the same tests on another engine: tl-bench appends -p -n -d -r and "
                 "'-o jsonl' and reads its rows (scripts/bench_ort.mjs, scripts/bench_torch.py); repeatable");
  app.add_flag("--probe", probeOnly, "measure the device alone: copy and read bandwidth, fp32/fp16 peak, launch, round trip");
  app.add_flag("--kernels", kernels,
               "the quantized GEMV table (Transformer-Lite Table 1 shapes, every scheme), then the prefill GEMM\n"
               "table: the same at --gemm-rows rows, through each path the device has (tensor cores; again with\n"
               "fp16 A where those rounded it to int8; portable), beside CLBlast's SGEMM (and HGEMM with\n"
               "cl_khr_fp16) of a float weight at those shapes");
  std::string gemmRows = tl::kDefaultGemmRows;
  app.add_option("--gemm-rows", gemmRows, "rows of A (M) for --kernels' GEMM table, comma-separated ('' for none)")
      ->capture_default_str();
  app.add_option("--schemes", schemes, "schemes for --kernels (fp32: the unquantized MatMul beside them)")->capture_default_str();
  app.add_option("--kernel-runs", kernelRuns, "runs per kernel for --kernels")->capture_default_str();
  app.add_option("--kernel-shapes", kernelShapes, "(K, N) of the GEMVs for --kernels, as KxN (a model's own, e.g. TinyLlama's after tl-fuse: "
                 "2048x2560,2048x2048,2048x11264,5632x2048)")->capture_default_str();
  app.add_option("--plot", plot, "write an SVG roofline: the device's ceilings and every row as a point");
  app.add_option("--name", name, "the model's name in the rows (default: from its path)");
  std::string gemm = "auto";
  app.add_option("--gemm", gemm, tl::kGemmChoiceHelp)
      ->check(CLI::IsMember({"auto", "f16", "portable"}))
      ->capture_default_str();
  bool profile = false;
  app.add_flag("--profile", profile,
               "print to stderr, for each test, its profiled step's device time per op and kernel variant (tl-run\n"
               "--profile's table, after the warm-up: a prefill test's step, a decode test's last step)");
  bool noCommandBuffers = false;
  app.add_flag("--no-command-buffers", noCommandBuffers,
               "replay a step's launches one enqueue each, not as one command buffer (cl_khr_command_buffer)");
  tl::SpeculativeFlags spec;
  tl::addSpeculativeFlags(app, spec,
                          "decoding, a row beside each one-sequence decode test (tgN@dD+lookup, +draft: the drafts\n"
                          "taken, tokens a step, the speedup over the plain row; prompt lookup needs real contexts: --text)");
  std::string textPath;
  app.add_option("--text", textPath,
                 "the tests' contexts (-d) from this file's bytes, repeated, not random tokens (a byte-level model:\n"
                 "vocab 256), e.g. held-out text for the speculative rows");
  bool noChains = false;
  app.add_flag("--no-chains", noChains,
               "CPU kernels: replay a step's one-item launches each on its own, not joined into task chains\n"
               "(one kernel that takes their tasks in turn; tl-run --explain lists the chains)");
  return tool.run(argc, argv, [&] {
    // Where the report goes and in which format (-o takes llama-bench's format names too).
    std::string out = tool.output();
    std::optional<tl::BenchFormat> fmt;
    if (auto f = tl::benchFormatNamed(out)) {
      fmt = f;
      out = "-";
    }
    tl::checkSpeculativeFlags(spec, false);  // (both: a row of each)
    std::vector<int64_t> contextText;  // --text's bytes
    if (!textPath.empty()) {
      std::ifstream in(textPath, std::ios::binary);
      if (!in) throw tl::Error(textPath + ": cannot open the --text file");
      for (char c; in.get(c);) contextText.push_back(static_cast<unsigned char>(c));
      if (contextText.empty()) throw tl::Error(textPath + ": the --text file is empty");
    }
    if (!format.empty()) {
      fmt = tl::benchFormatNamed(format);
      if (!fmt) throw tl::Error("--format must be md, csv, json or jsonl, not '" + format + "'", tl::ExitCode::Usage);
    }
    if (!fmt && out != "-") {
      const std::string ext = std::filesystem::path(out).extension().string();
      fmt = tl::benchFormatNamed(ext.empty() ? ext : ext.substr(1));
    }
    if (app.get_option("--emit")->count()) {
      if (tool.emit() != tl::Emit::Text) throw tl::Error("tl-bench writes tables, not models: --emit text (md) or -o FORMAT", tl::ExitCode::Usage);
      fmt = tl::BenchFormat::Md;
    }
    const tl::BenchFormat format = fmt.value_or(tl::BenchFormat::Md);
    if (reps < 1) throw tl::Error("-r must be at least 1", tl::ExitCode::Usage);
    std::vector<std::string> paths = models;
    // A model comes as a path, or - (or nothing, when stdin is no terminal) for stdin.
    if (app.get_option("input")->count() > 0 || (paths.empty() && !probeOnly && !kernels && !isatty(STDIN_FILENO)))
      paths.insert(paths.begin(), tool.input());
    if (probeOnly && (!paths.empty() || kernels))
      throw tl::Error("--probe measures the device alone: give it without a model or --kernels", tl::ExitCode::Usage);
    if (paths.empty() && !probeOnly && !kernels)
      throw tl::Error("give a model (or - with one on stdin), --probe or --kernels (see --help)", tl::ExitCode::Usage);
    if (!name.empty() && paths.size() > 1) throw tl::Error("--name names one model; give it with one", tl::ExitCode::Usage);
    auto progress = [](const std::string& s) {
      if (isatty(STDERR_FILENO)) {
        std::fprintf(stderr, "\r\033[Ktl-bench: %s", s.c_str());
      } else {
        std::fprintf(stderr, "tl-bench: %s\n", s.c_str());
      }
    };

    // Everything about the models is checked before the device is touched.
    struct Subject {
      std::string path, name;
      tl::Model model;
      std::unique_ptr<tl::Graph> graph;
      tl::ShapeAnalysis analysis;
      bool lm = false;
    };
    std::deque<Subject> subjects;  // executors keep references: no moves
    std::vector<tl::BenchTest> tests;
    tl::SymbolValues binding;
    if (!bind.empty()) binding = tl::parseBindings(bind);
    for (const auto& path : paths) {
      tool.blame(path);
      Subject& s = subjects.emplace_back();
      s.path = path;
      s.name = name.empty() ? modelName(path) : name;
      s.model = tl::loadModel(path);
      s.graph = std::make_unique<tl::Graph>(s.model.proto.graph());
      s.analysis = tl::inferShapes(s.model, *s.graph);
      s.lm = s.analysis.tensors.count("input_ids") && s.analysis.tensors.count("logits") && bind.empty();
      if (s.lm && tests.empty()) {
        std::vector<std::string> specs;
        if (spec.lookup) specs.push_back("lookup");
        if (!spec.draft.empty()) specs.push_back("draft");
        tests = tl::makeTests(tl::parseIntList("-p", prompts), tl::parseIntList("-n", gens), tl::parseIntList("-d", depths),
                              tl::parseIntList("-b", batches), specs);
        if (tests.empty()) throw tl::Error("no tests: -p and -n are both empty", tl::ExitCode::Usage);
      }
      if (!s.lm && !peers.empty()) throw tl::Error("--peer runs language-model tests; this model is timed per forward");
      if (s.lm) {
        tl::checkTests(tl::positionTableRows(*s.graph), tests);
      } else {
        tl::checkForwardBinding(s.analysis, binding);
      }
    }

    std::vector<std::string> schemeList;
    for (const auto& s : tl::splitCommas(schemes)) {
      try {
        tl::checkKernelScheme(s);
      } catch (const tl::Error& e) {
        throw tl::Error(std::string("--schemes: ") + e.what(), tl::ExitCode::Usage);
      }
      schemeList.push_back(s);
    }
    if (kernelRuns < 1) throw tl::Error("--kernel-runs must be at least 1", tl::ExitCode::Usage);
    const auto shapes = tl::parseKernelShapes(kernelShapes);
    const auto gemmRowList = tl::parseIntList("--gemm-rows", gemmRows);

    tl::Device dev(tl::selectDevice(device), false);
    dev.setCommandBuffers(!noCommandBuffers);
    dev.setTaskChains(!noChains);
    tl::setGemmChoice(dev, gemm);
    tl::BenchReport report;
    progress("probing " + dev.info().name);
    tool.blame(dev.info().name);  // what the probe and --kernels find is the device's
    report.probe = tl::probeDevice(dev, [&](const std::string& s) { progress("probe: " + s); });
    if (kernels) {
      report.kernels =
          tl::benchQuantKernels(dev, schemeList, shapes, kernelRuns, [&](const std::string& s) { progress("kernels: " + s); });
      if (!gemmRowList.empty())
        report.gemm = tl::benchGemmKernels(dev, schemeList, shapes, gemmRowList, kernelRuns,
                                           [&](const std::string& s) { progress("kernels: " + s); });
    }
    std::vector<std::vector<tl::BenchRow>> rows;  // per model, then per peer
    for (auto& s : subjects) {
      tool.blame(s.path);
      tl::BenchOptions opt;
      opt.reps = reps;
      opt.progress = [&](const std::string& m) { progress(s.name + ": " + m); };
      if (profile)
        opt.profiled = [&](const std::string& test, const tl::Executor& ex) {
          std::fprintf(stderr, "%s %s: ", s.name.c_str(), test.c_str());
          std::fputs(tl::profileText(ex).c_str(), stderr);
        };
      progress(s.name + ": loading");
      tl::Executor ex(dev, s.model, *s.graph, s.analysis);  // freed before the next model or peer runs
      std::vector<tl::BenchRow> got;
      if (s.lm) {
        tl::CausalLm lm(ex, *s.graph, s.analysis);
        if (!contextText.empty() && lm.vocab() != 256)
          throw tl::Error("--text feeds the file's bytes as tokens: it needs a byte-level model (vocab 256), not one of " +
                          std::to_string(lm.vocab()));
        opt.text = contextText;
        opt.draftMax = spec.draftMax;
        std::optional<tl::LoadedLm> draft;  // on the same device, freed with the model
        if (!spec.draft.empty()) {
          tool.blame(spec.draft);
          draft.emplace(tl::loadModel(spec.draft), device);
          draft->device.setCommandBuffers(!noCommandBuffers);
          draft->device.setTaskChains(!noChains);
          tl::setGemmChoice(draft->device, gemm);
          tool.blame(s.path);
          opt.draft = &draft->lm;
        }
        got = tl::benchLanguageModel(ex, lm, tests, opt);
      } else {
        got.push_back(tl::benchForward(ex, binding, bind, opt));
      }
      for (auto& r : got) {
        r.model = s.name;
        r.engine = "tl";
        r.device = report.probe->device;
      }
      rows.push_back(std::move(got));
    }
    std::string peerError;
    if (!peers.empty()) {
      std::vector<int64_t> p, n, d, b;
      for (const auto& t : tests) {
        if (t.prompt && std::find(p.begin(), p.end(), t.prompt) == p.end()) p.push_back(t.prompt);
        if (t.gen && std::find(n.begin(), n.end(), t.gen) == n.end()) n.push_back(t.gen);
        if (std::find(d.begin(), d.end(), t.depth) == d.end()) d.push_back(t.depth);
        if (t.gen && std::find(b.begin(), b.end(), t.batch) == b.end()) b.push_back(t.batch);
      }
      // -b only where a test batches, so that peers of one sequence need not know it.
      const bool batched = std::any_of(b.begin(), b.end(), [](int64_t x) { return x > 1; });
      const std::string args = "-p '" + join(p) + "' -n '" + join(n) + "' -d " + join(d) + (batched ? " -b " + join(b) : "") +
                               " -r " + std::to_string(reps) + " -o jsonl";
      for (const auto& cmd : peers) {
        std::vector<tl::BenchRow> got;
        try {
          got = runPeer(cmd, args);
        } catch (const tl::Error& e) {
          peerError += (peerError.empty() ? "" : "; ") + std::string(e.what());
        }
        // The same test computes the same FLOPs; the bytes are the first model's unless the
        // peer says what its own precision moves.
        for (auto& r : got) {
          if (r.model.empty()) r.model = subjects.front().name;
          for (const auto& own : rows.front())
            if (own.test == r.test) {
              r.flopsPerToken = own.flopsPerToken;
              if (std::isnan(r.weightBytes)) r.weightBytes = own.weightBytes;
              if (std::isnan(r.bytesPerToken)) r.bytesPerToken = own.bytesPerToken;
            }
        }
        rows.push_back(std::move(got));
      }
    }
    // Test by test: each model's row, then the peers'.
    std::vector<std::string> order;
    for (const auto& engine : rows)
      for (const auto& r : engine)
        if (std::find(order.begin(), order.end(), r.test) == order.end()) order.push_back(r.test);
    for (const auto& test : order)
      for (const auto& engine : rows)
        for (const auto& r : engine)
          if (r.test == test) report.rows.push_back(r);
    tool.blame(paths.empty() ? "-" : paths.front());
    if (isatty(STDERR_FILENO)) std::fprintf(stderr, "\r\033[K");
    const std::string text = tl::renderReport(report, format);
    if (!plot.empty()) tl::writeFileAtomically(plot, tl::rooflineSvg(report));
    if (out == "-") {
      std::cout << text;
    } else {
      tool.writeOutput(text, false);
    }
    if (!peerError.empty()) throw tl::Error(peerError);
  });
}
