// tl-ctxswap as a user runs it: a trace made, the costs measured, a replay's table; bad
// input as one line, exit 1, and usage errors exit 2.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "cli/test_support.h"
#include "ctxswap/calibrate.h"
#include "ctxswap/trace.h"

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

}  // namespace
}  // namespace tl
