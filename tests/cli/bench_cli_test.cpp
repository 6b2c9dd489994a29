// tl-bench as a user runs it: the rows' counts (tokens, repetitions, bytes and FLOPs per
// token) on a model counted by hand, every output format, peers' rows, and one-line
// errors. These check formats and counts, never speed.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <regex>

#include "cli/test_support.h"
#include "onnx/model_io.h"
#include "quant/quantize_model.h"

namespace tl {
namespace {

using test::runTool;

// The number after "key": in a JSON line; NaN when absent.
double field(const std::string& line, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(line, m, std::regex("\"" + key + "\": ([-0-9.e+]+)"))) return std::nan("");
  return std::stod(m[1]);
}
std::string textField(const std::string& line, const std::string& key) {
  std::smatch m;
  return std::regex_search(line, m, std::regex("\"" + key + "\": \"([^\"]*)\"")) ? std::string(m[1]) : "";
}
std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string l; std::getline(ss, l);)
    if (!l.empty()) out.push_back(l);
  return out;
}

void expectOneLineError(const test::RunResult& r, const std::string& fragment, int code = 1) {
  EXPECT_EQ(r.exitCode, code) << r.err;
  const auto all = lines(r.err);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(all.back().rfind("tl-bench: error: ", 0), 0u) << r.err;
  EXPECT_NE(all.back().find(fragment), std::string::npos) << r.err;
  for (size_t i = 0; i + 1 < all.size(); ++i) EXPECT_EQ(all[i].find("error"), std::string::npos) << r.err;
}

class TlBenchCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { tiny_ = test::writeTinyCacheModel(test::tempDir("bench_cli")).string(); }
  static std::string tiny_;
};
std::string TlBenchCli::tiny_;

TEST_F(TlBenchCli, RowsCountTokensAndBytesOfTheModel) {
  auto r = runTool("tl-bench", tiny_ + " -p 3 -n 2 -d 0,5 -r 2 -o jsonl");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto rows = lines(r.out);
  ASSERT_EQ(rows.size(), 4u) << r.out;
  // Per token: weights (gathered rows, W 320, Reshape target 32) + cache read (all rows
  // after the step) + written (new rows), 32 bytes a cache row; decode steps average over
  // the test (tgN at depth D: steps at past max(D, 1) .. + N - 1).
  const std::map<std::string, std::vector<double>> want{
      {"pp3", {3, 0, 0, (96 + 352 + 96 + 96) / 3.0}},
      {"tg2", {0, 2, 0, 32 + 352 + (2 + 3) / 2.0 * 32 + 32}},
      {"pp3@d5", {3, 0, 5, (96 + 352 + 8 * 32 + 96) / 3.0}},
      {"tg2@d5", {0, 2, 5, 32 + 352 + (6 + 7) / 2.0 * 32 + 32}}};
  for (const auto& row : rows) {
    const std::string test = textField(row, "test");
    ASSERT_TRUE(want.count(test)) << row;
    const auto& w = want.at(test);
    EXPECT_EQ(textField(row, "engine"), "tl");
    EXPECT_EQ(textField(row, "model"), "tiny");
    EXPECT_EQ(field(row, "n_prompt"), w[0]) << row;
    EXPECT_EQ(field(row, "n_gen"), w[1]) << row;
    EXPECT_EQ(field(row, "n_depth"), w[2]) << row;
    EXPECT_NEAR(field(row, "bytes_per_token"), w[3], 1e-9) << row;
    EXPECT_EQ(field(row, "flops_per_token"), 160) << row;  // 2 x 8 x 10 per token
    EXPECT_EQ(field(row, "weight_bytes"), 672) << row;
    EXPECT_EQ(field(row, "reps"), 2) << row;
    EXPECT_NE(row.find("\"samples_ts\": ["), std::string::npos) << row;
    EXPECT_GT(field(row, "avg_ts"), 0) << row;
    // MatMul and Concat at least (the embedding Gather and its Transpose, a few small rows,
    // run on the host; one token's Transpose is a view; the carry swaps buffers)
    EXPECT_GE(field(row, "kernels_per_step"), 2) << row;
    EXPECT_LE(field(row, "own_ms_per_step"), field(row, "enqueue_ms_per_step")) << row;
    // achieved GB/s is bytes per token times tokens per second
    EXPECT_NEAR(field(row, "gbs"), field(row, "bytes_per_token") * field(row, "avg_ts") / 1e9, 1e-6) << row;
  }
}

TEST_F(TlBenchCli, EveryFormat) {
  auto md = runTool("tl-bench", tiny_ + " -p 3 -n 2 -r 1");
  ASSERT_EQ(md.exitCode, 0) << md.err;
  EXPECT_NE(md.out.find("| model | engine | test | t/s | weights | bytes/token | GB/s | % BW |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("| tiny | tl | pp3 |"), std::string::npos) << md.out;
  EXPECT_NE(md.out.find("copy GB/s (r+w)"), std::string::npos) << md.out;
  auto csv = runTool("tl-bench", tiny_ + " -p 3 -n '' -r 1 -o csv");
  ASSERT_EQ(csv.exitCode, 0) << csv.err;
  const auto csvLines = lines(csv.out);
  ASSERT_EQ(csvLines.size(), 2u) << csv.out;  // one table: the probe's numbers ride on each row
  EXPECT_EQ(csvLines[0].rfind("model,engine,test,t_s,weight_bytes,bytes_per_token,", 0), 0u) << csv.out;
  EXPECT_EQ(csvLines[1].rfind("tiny,tl,pp3,", 0), 0u) << csv.out;
  auto json = runTool("tl-bench", tiny_ + " -p 3 -n '' -r 1 -o json");
  ASSERT_EQ(json.exitCode, 0) << json.err;
  EXPECT_EQ(json.out.rfind("{\n\"probe\": {\"device\": ", 0), 0u) << json.out;
  EXPECT_NE(json.out.find("\"rows\": [\n  {\"model\": \"tiny\""), std::string::npos) << json.out;
  // -o FILE: the format from its extension; --plot: the roofline.
  auto dir = test::tempDir("bench_formats");
  auto f = runTool("tl-bench", tiny_ + " -p 3 -n '' -r 1 -o " + (dir / "r.jsonl").string() + " --plot " + (dir / "r.svg").string());
  ASSERT_EQ(f.exitCode, 0) << f.err;
  EXPECT_TRUE(f.out.empty()) << f.out;
  EXPECT_EQ(lines(test::readFile(dir / "r.jsonl")).size(), 1u);
  const std::string svg = test::readFile(dir / "r.svg");
  EXPECT_EQ(svg.rfind("<svg ", 0), 0u);
  EXPECT_NE(svg.find("tiny pp3"), std::string::npos);
  EXPECT_NE(svg.find("GB/s</text>"), std::string::npos);
}

// --profile: each test's warm step kernel by kernel on stderr, headed by the model and the
// test; the rows on stdout as without it.
TEST_F(TlBenchCli, ProfilePrintsEachTestsStep) {
  auto r = runTool("tl-bench", tiny_ + " -p 3 -n 2 -r 1 -o jsonl --profile");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(lines(r.out).size(), 2u) << r.out;
  for (const char* test : {"pp3", "tg2"}) {
    const auto at = r.err.find(std::string("tiny ") + test + ": profile: ");
    ASSERT_NE(at, std::string::npos) << r.err;
    EXPECT_TRUE(std::regex_search(r.err.substr(at), std::regex("\\n  MatMul +[a-z0-9_]+ +1 +[0-9.]+ "))) << r.err;
  }
  EXPECT_EQ(runTool("tl-bench", tiny_ + " -p 3 -n 2 -r 1 -o jsonl").err.find("profile: "), std::string::npos);
}

TEST_F(TlBenchCli, ProbeAlone) {
  auto r = runTool("tl-bench", "--probe -o jsonl");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  ASSERT_EQ(lines(r.out).size(), 1u) << r.out;
  for (const char* k : {"copy_gbs", "read_gbs", "fp32_gflops", "launch_us", "round_trip_us"})
    EXPECT_GT(field(r.out, k), 0) << k << ": " << r.out;
}

TEST_F(TlBenchCli, PeerRowsSitBesideTlsWithTheModelsCounts) {
  auto dir = test::tempDir("bench_peer");
  const auto peer = dir / "peer.sh", bad = dir / "bad.sh", args = dir / "args";
  // A peer hears the same tests and answers in tl-bench's jsonl.
  test::writeFile(peer, "#!/bin/sh\necho \"$@\" > " + args.string() +
                            "\necho '{\"engine\": \"fake\", \"n_prompt\": 3, \"n_gen\": 0, \"n_depth\": 0, "
                            "\"samples_ts\": [100, 110]}'\n");
  test::writeFile(bad, "#!/bin/sh\necho 'not json'\n");
  std::filesystem::permissions(peer, std::filesystem::perms::owner_all);
  std::filesystem::permissions(bad, std::filesystem::perms::owner_all);
  auto r = runTool("tl-bench", tiny_ + " -p 3 -n '' -r 1 -o jsonl --peer " + peer.string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(test::readFile(args), "-p 3 -n  -d 0 -r 1 -o jsonl\n");
  const auto rows = lines(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_EQ(textField(rows[1], "engine"), "fake");
  EXPECT_EQ(textField(rows[1], "model"), "tiny");
  EXPECT_EQ(field(rows[1], "avg_ts"), 105);
  EXPECT_EQ(field(rows[1], "bytes_per_token"), field(rows[0], "bytes_per_token"));  // same model, same test
  EXPECT_TRUE(std::isnan(field(rows[1], "kernels_per_step"))) << rows[1];
  // A peer that answers nonsense: tl's rows are still printed, then one error line.
  r = runTool("tl-bench", tiny_ + " -p 3 -n '' -r 1 -o jsonl --peer " + bad.string());
  EXPECT_EQ(lines(r.out).size(), 1u) << r.out;
  expectOneLineError(r, "line 1: not a JSON object");
}

TEST_F(TlBenchCli, ForwardLatencyOfAModelThatIsNoLm) {
  const std::vector<float> w(6 * 5, 0.5f);
  Model m = matmulModel(w.data(), 6, 5);
  auto path = test::tempDir("bench_fwd") / "mm.onnx";
  test::writeFile(path, m.proto.SerializeAsString());
  auto r = runTool("tl-bench", path.string() + " --bind M=4 -r 2 -o jsonl");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(textField(r.out, "test"), "fwd");
  EXPECT_EQ(textField(r.out, "bind"), "M=4");
  EXPECT_EQ(field(r.out, "flops_per_token"), 2 * 4 * 6 * 5);
  EXPECT_EQ(field(r.out, "weight_bytes"), 6 * 5 * 4);
  // Without a binding it cannot run.
  expectOneLineError(runTool("tl-bench", path.string() + " -r 1"), "no runnable shape binding: M unbound (give --bind M=...)");
}

TEST_F(TlBenchCli, BadInputIsOneLine) {
  expectOneLineError(runTool("tl-bench", tiny_ + " -p 0"), "-p 0: a prefill test needs at least 1 token");
  expectOneLineError(runTool("tl-bench", tiny_ + " -n 4 -d -3"), "-d -3: a depth cannot be negative");
  const std::string gpt2 = (test::sharedModels() / "gpt2-past/model.onnx").string();
  expectOneLineError(runTool("tl-bench", gpt2 + " -p '' -n 128 -d 100000"),
                     "tg128@d100000 needs 100128 positions; the model's position table has");
  expectOneLineError(runTool("tl-bench", tiny_ + " --format xml"), "--format must be md, csv, json or jsonl", 2);
  expectOneLineError(runTool("tl-bench", tiny_ + " -p 1,x"), "-p expects comma-separated integers", 2);
  expectOneLineError(runTool("tl-bench", "--probe " + tiny_), "--probe measures the device alone", 2);
  expectOneLineError(runTool("tl-bench", "/nonexistent.onnx"), "/nonexistent.onnx");
  expectOneLineError(runTool("tl-bench", "--kernels --kernel-shapes 2048x"), "--kernel-shapes expects KxN pairs", 2);
  expectOneLineError(runTool("tl-bench", "--kernels --kernel-shapes 0x64"), "got '0x64'", 2);
}

// --kernels at a model's own shapes: one row per shape and scheme, in the order given,
// fp32 (the unquantized MatMul, no group) among them, then the GEMM table's; an unknown
// scheme is a usage error.
TEST_F(TlBenchCli, KernelTableAtGivenShapes) {
  auto r = runTool("tl-bench", "--kernels --schemes e0m4,int4,fp32 --kernel-shapes 256x128,512x64 --kernel-runs 1");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const size_t a = r.out.find("| 256 | 128 | e0m4 | 128 |"), b = r.out.find("| 512 | 64 | int4 | 128 |");
  const size_t c = r.out.find("| 512 | 64 | fp32 | 0 |");
  EXPECT_NE(a, std::string::npos) << r.out;
  EXPECT_NE(b, std::string::npos) << r.out;
  EXPECT_NE(c, std::string::npos) << r.out;
  EXPECT_LT(a, b);
  EXPECT_LT(b, c);
  EXPECT_EQ(r.out.find("| 4096 |"), std::string::npos) << r.out;
  // then the prefill GEMM table: each shape and scheme at M = 128, 512, 1024, through the
  // portable path (PoCL has no tensor cores), after the GEMV table
  const size_t g = r.out.find("| 256 | 128 | 128 | e0m4 | portable |"), h = r.out.find("| 512 | 64 | 1024 | fp32 | portable |");
  EXPECT_NE(g, std::string::npos) << r.out;
  EXPECT_NE(h, std::string::npos) << r.out;
  EXPECT_LT(c, g);
  EXPECT_LT(g, h);
  EXPECT_EQ(r.out.find("tensor cores"), std::string::npos) << r.out;
  // and CLBlast's SGEMM at each shape and M, after tl's rows of that shape (PoCL: no fp16, no HGEMM)
  const size_t sg = r.out.find("| 256 | 128 | 512 | fp32 | CLBlast SGEMM | CLBlast |");
  EXPECT_NE(sg, std::string::npos) << r.out;
  EXPECT_LT(g, sg);
  EXPECT_NE(r.out.find("| 512 | 64 | 1024 | fp32 | CLBlast SGEMM |"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("HGEMM"), std::string::npos) << r.out;
  expectOneLineError(runTool("tl-bench", "--kernels --schemes fp16"), "--schemes: unknown scheme 'fp16' (fp32, e0m4,", 2);
}

}  // namespace
}  // namespace tl

namespace tl {
namespace {

// -b: decode tests of several sequences at once (lm/batch.h), on a plan of that batch:
// each batch a row of its own (tgNxB), its tokens all the sequences' (n_batch); a batch
// the plan does not hold, or a batch under 1, is one line.
TEST(TlBenchBatch, BatchedRowsAndTheirRefusals) {
  const auto dir = test::tempDir("bench_batch");
  const std::string model = (test::sourceDir() / "models/bytellama-past/model.onnx").string();
  const std::string fused = (dir / "fused.onnx").string(), planned = (dir / "planned.onnx").string();
  ASSERT_EQ(runTool("tl-fuse", model + " -o " + fused).exitCode, 0);
  ASSERT_EQ(runTool("tl-plan", fused + " --max-seq 64 --pad 16 --batch 2 -o " + planned).exitCode, 0);
  auto r = runTool("tl-bench", planned + " -p '' -n 4 -d 3 -b 1,2 -r 1 -o jsonl");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto rows = lines(r.out);
  ASSERT_EQ(rows.size(), 2u) << r.out;
  EXPECT_EQ(textField(rows[0], "test"), "tg4@d3");
  EXPECT_EQ(field(rows[0], "n_batch"), 1);
  EXPECT_EQ(textField(rows[1], "test"), "tg4@d3x2");
  EXPECT_EQ(field(rows[1], "n_batch"), 2);
  EXPECT_GT(field(rows[1], "avg_ts"), 0);
  expectOneLineError(runTool("tl-bench", planned + " -p '' -n 4 -b 3 -r 1"), "the model's plan holds 2 (tl-plan --batch 3)");
  expectOneLineError(runTool("tl-bench", fused + " -p '' -n 4 -b 2 -r 1"), "in-place KV caches");
  expectOneLineError(runTool("tl-bench", planned + " -p '' -n 4 -b 0 -r 1"), "-b 0: a batch is at least 1 sequence");
}

// Speculative rows (--prompt-lookup, --draft) beside the plain row of each one-sequence
// decode test, contexts from held-out text (--text): the drafts taken, tokens a checking
// step, the speedup over the plain row. The model as its own draft takes its drafts (the
// same greedy tokens). Refusals: --draft-max past 7 (usage), a model without in-place caches.
TEST(TlBenchSpeculative, RowsBesideThePlainOne) {
  const auto dir = test::tempDir("bench_spec");
  const std::string model = (test::sourceDir() / "models/bytellama-past/model.onnx").string();
  const std::string fused = (dir / "fused.onnx").string(), planned = (dir / "planned.onnx").string();
  const std::string text = (test::sharedModels() / "bytellama-heldout.txt").string();
  ASSERT_EQ(runTool("tl-fuse", model + " -o " + fused).exitCode, 0);
  ASSERT_EQ(runTool("tl-plan", fused + " --max-seq 256 --pad 16 -o " + planned).exitCode, 0);
  auto r = runTool("tl-bench", planned + " -p '' -n 24 -d 64 --prompt-lookup --draft " + planned + " --text " + text +
                                   " -r 1 -o jsonl");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto rows = lines(r.out);
  ASSERT_EQ(rows.size(), 3u) << r.out;
  EXPECT_EQ(textField(rows[0], "test"), "tg24@d64");
  EXPECT_EQ(textField(rows[0], "spec"), "");
  for (size_t i : {1, 2}) {
    EXPECT_EQ(textField(rows[i], "test"), i == 1 ? "tg24@d64+lookup" : "tg24@d64+draft");
    EXPECT_GE(field(rows[i], "spec_taken"), 0.0) << rows[i];
    EXPECT_LE(field(rows[i], "spec_taken"), 1.0) << rows[i];
    EXPECT_GE(field(rows[i], "spec_tokens_per_step"), 1.0) << rows[i];
    EXPECT_LE(field(rows[i], "spec_tokens_per_step"), 4.0) << rows[i];
    EXPECT_NEAR(field(rows[i], "spec_speedup"), field(rows[i], "avg_ts") / field(rows[0], "avg_ts"), 1e-2) << rows[i];
  }
  EXPECT_GE(field(rows[2], "spec_taken"), 0.9) << rows[2];
  EXPECT_GE(field(rows[2], "spec_tokens_per_step"), 3.0) << rows[2];
  expectOneLineError(runTool("tl-bench", planned + " -p '' -n 4 --prompt-lookup --draft-max 8 -r 1"), "--draft-max must be 1 to 7", 2);
  expectOneLineError(runTool("tl-bench", fused + " -p '' -n 4 --prompt-lookup -r 1"), "in-place KV caches");
}

}  // namespace
}  // namespace tl
