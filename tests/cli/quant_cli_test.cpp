// tl-quant as a user runs it: reports, rewrites, and bad input as one line, exit 1.
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>

#include "cli/test_support.h"
#include "graph/attributes.h"
#include "graph/graph.h"
#include "quant/quantize_model.h"

namespace tl {
namespace {

using test::runTool;

const std::string kByte = (test::sourceDir() / "models/bytellama-past/model.onnx").string();

void expectOneLineError(const test::RunResult& r, const std::string& fragment) {
  EXPECT_EQ(r.exitCode, 1) << r.err;
  EXPECT_EQ(r.err.rfind("tl-quant: error: ", 0), 0u) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_NE(r.err.find(fragment), std::string::npos) << r.err;
}

// A line of tl-quant's csv report, cut at its commas.
std::vector<std::string> csvFields(const std::string& line) {
  std::vector<std::string> f;
  std::stringstream ss(line);
  for (std::string x; std::getline(ss, x, ',');) f.push_back(x);
  return f;
}

TEST(TlQuantCli, E0M4BeatsInt4OnEveryBytellamaMatrix) {
  auto r = runTool("tl-quant", kByte + " --report --report-format csv --group 128");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::istringstream in(r.out);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("weight,K,N,e0m4_mae,int4_mae,w4a8_mae,q8_mae,q3h_mae,e0m4_over_int4", 0), 0u) << line;
  int rows = 0;
  while (std::getline(in, line)) {
    const auto f = csvFields(line);
    ASSERT_GE(f.size(), 9u);
    EXPECT_LT(std::stod(f[3]), std::stod(f[4])) << line;  // e0m4 MAE < int4 MAE
    EXPECT_LT(std::stod(f[8]), 1.0) << line;
    ++rows;
  }
  EXPECT_EQ(rows, 29);  // 4 layers x 7 projections + lm_head
  r = runTool("tl-quant", kByte + " --report --report-format md");  // every row as many cells as the header
  ASSERT_EQ(r.exitCode, 0) << r.err;
  {
    std::istringstream md(r.out);
    std::string header;
    std::getline(md, header);
    const auto cells = std::count(header.begin(), header.end(), '|');
    int mdRows = 0;
    for (std::string line; std::getline(md, line); ++mdRows)
      EXPECT_EQ(std::count(line.begin(), line.end(), '|'), cells) << line;
    EXPECT_EQ(mdRows, 30);  // the separator and 29 weights
  }
  r = runTool("tl-quant", kByte + " --report --report-format json");
  EXPECT_EQ(r.exitCode, 0);
  EXPECT_NE(r.out.find("\"e0m4_over_int4\""), std::string::npos);
}

// Where INT4 quantizes a weight exactly (here all zeros: every scheme does), the E0M4/INT4
// ratio has no value and the report says 0, as docs/tl-quant.md states.
TEST(TlQuantCli, ReportRatioIsZeroWhereInt4IsExact) {
  const std::vector<float> zeros(64 * 8, 0.0f);
  Model m = matmulModel(zeros.data(), 64, 8);
  Graph g(m.proto.graph());
  QuantOptions opt;
  opt.group = 32;
  opt.quantizeLmHead = true;
  const std::string csv = errorReport(m, g, opt, ReportFormat::Csv);
  std::istringstream in(csv);
  std::string header, row;
  std::getline(in, header);
  ASSERT_TRUE(std::getline(in, row)) << csv;
  const auto f = csvFields(row);
  ASSERT_GE(f.size(), 9u) << row;
  EXPECT_EQ(f[4], "0") << row;  // int4's error
  EXPECT_EQ(f[8], "0") << row;  // the ratio
}

TEST(TlQuantCli, RewritesIntoQMatMulAndKeepsTheLmHeadWhenAsked) {
  auto out = (test::tempDir("quant_rewrite") / "q.onnx").string();
  auto r = runTool("tl-quant", kByte + " --scheme int4 --group 64 --lm-head-scheme float -o " + out);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find("[28/29]"), std::string::npos) << r.err;  // progress, lm_head skipped
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(test::readFile(out)));
  int q = 0, mm = 0;
  for (const auto& n : m.graph().node()) {
    q += n.domain() == "tl" && n.op_type() == "QMatMul";
    mm += n.op_type() == "MatMul" && n.input(1).rfind("onnx::MatMul", 0) == 0;
  }
  EXPECT_EQ(q, 28);
  EXPECT_EQ(mm, 1);
  int tlImports = 0;  // the tl ops' domain declared once, so other ONNX tools read the file
  for (const auto& o : m.opset_import()) tlImports += o.domain() == "tl" && o.version() == 1;
  EXPECT_EQ(tlImports, 1);
  // The summary: the weights quantized, their fp32 bytes (K x N x 4 each), and the stored
  // codes, scales and offsets, to the MiB's hundredth.
  size_t stored = 0, floats = 0;
  for (const auto& t : m.graph().initializer()) {
    const std::string& n = t.name();
    for (const char* suffix : {".qweight", ".qscale", ".qoffset"})
      if (n.size() > std::strlen(suffix) && n.compare(n.size() - std::strlen(suffix), std::string::npos, suffix) == 0)
        stored += t.raw_data().size();
  }
  for (const auto& n : m.graph().node())
    if (n.op_type() == "QMatMul") floats += static_cast<size_t>(*attrInt(n, "K") * *attrInt(n, "N") * 4);
  char summary[96];
  std::snprintf(summary, sizeof summary, "tl-quant: %d weights, %.2f MiB -> %.2f MiB\n", q,
                static_cast<double>(floats) / 1048576.0, static_cast<double>(stored) / 1048576.0);
  EXPECT_NE(r.err.find(summary), std::string::npos) << summary << r.err;
  expectOneLineError(runTool("tl-quant", out + " --scheme e0m4 -o /dev/null"), "already quantized");
  // The quantized model still runs and shapes.
  r = runTool("tl-shape", out + " --emit text");
  EXPECT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.out.find("QMatMul"), std::string::npos);
}

// --emit text: a row per MatMul weight, its scheme, error and bits per weight, or why it
// was kept (--skip by node or by weight name, the lm_head's float), and the bytes; the
// summary agrees with the progress's.
TEST(TlQuantCli, TextListsEveryWeightAndWhyItWasKept) {
  const auto r = runTool("tl-quant", kByte + " --skip mlp --skip onnx::MatMul_1216 --emit text");
  ASSERT_EQ(r.exitCode, 0) << r.err;
  std::istringstream lines(r.out);
  int rows = 0, kept = 0, byNode = 0, byName = 0, e0m4 = 0, q8 = 0;
  std::string summary;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind("quantized: ", 0) == 0) {
      summary = line;
      continue;
    }
    ++rows;
    if (line.find("kept (--skip mlp)") != std::string::npos) {
      ++kept, ++byNode;
      EXPECT_NE(line.find("/mlp/"), std::string::npos) << line;
    } else if (line.find("kept (--skip onnx::MatMul_1216)") != std::string::npos) {
      ++kept, ++byName;
      EXPECT_EQ(line.rfind("onnx::MatMul_1216  ", 0), 0u) << line;
    } else {
      EXPECT_EQ(line.find("/mlp/"), std::string::npos) << line;
      e0m4 += line.find("  e0m4  ") != std::string::npos && line.find("  4.50") != std::string::npos;
      q8 += line.find("/m/lm_head/MatMul  256 x 256  q8  ") != std::string::npos && line.find("  8.50") != std::string::npos;
    }
  }
  EXPECT_EQ(rows, 29);
  EXPECT_EQ(byNode, 12);  // gate, up and down in each of 4 layers
  EXPECT_EQ(byName, 1);
  EXPECT_EQ(e0m4, 15);
  EXPECT_EQ(q8, 1);
  EXPECT_EQ(summary.substr(0, 29), "quantized: 16 of 29 weights, ");
  const size_t mib = r.err.find("tl-quant: 16 weights, ");
  ASSERT_NE(mib, std::string::npos) << r.err;
  EXPECT_EQ(summary.substr(29), r.err.substr(mib + 22, r.err.find('\n', mib) - mib - 22)) << summary;
  // The lm_head kept in float is a row of its own.
  const auto f = runTool("tl-quant", kByte + " --lm-head-scheme float --emit text");
  ASSERT_EQ(f.exitCode, 0) << f.err;
  EXPECT_NE(f.out.find("/m/lm_head/MatMul  256 x 256  kept (lm_head (--quantize-lm-head))"), std::string::npos) << f.out;
}

// The lm_head's scheme: q8 by default (the rest in e0m4), another when asked, and the
// model still runs.
TEST(TlQuantCli, LmHeadInASchemeOfItsOwn) {
  const auto dir = test::tempDir("quant_lm_head");
  auto schemesOf = [](const std::string& path, std::string& lmHead) {
    onnx::ModelProto m;
    EXPECT_TRUE(m.ParseFromString(test::readFile(path)));
    std::map<std::string, int> schemes;
    for (const auto& n : m.graph().node()) {
      if (n.op_type() != "QMatMul") continue;
      for (const auto& a : n.attribute())
        if (a.name() == "scheme") {
          ++schemes[a.s()];
          if (n.output(0) == m.graph().output(0).name()) lmHead = a.s();
        }
    }
    return schemes;
  };
  const std::string out = (dir / "q.onnx").string();
  auto r = runTool("tl-quant", kByte + " --scheme e0m4 -o " + out);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_NE(r.err.find("[29/29]"), std::string::npos) << r.err;
  std::string lmHead;
  auto schemes = schemesOf(out, lmHead);
  EXPECT_EQ(schemes["e0m4"], 28);
  EXPECT_EQ(schemes["q8"], 1);
  EXPECT_EQ(lmHead, "q8");
  r = runTool("tl-run", out + " --generate --prompt 'def ' -n 8");
  EXPECT_EQ(r.exitCode, 0) << r.err;
  // --quantize-lm-head: the model's own scheme; --lm-head-scheme: any other
  const std::string own = (dir / "own.onnx").string(), q3h = (dir / "q3h.onnx").string();
  ASSERT_EQ(runTool("tl-quant", kByte + " --scheme int4 --quantize-lm-head -o " + own).exitCode, 0);
  EXPECT_EQ(schemesOf(own, lmHead)["int4"], 29);
  EXPECT_EQ(lmHead, "int4");
  ASSERT_EQ(runTool("tl-quant", kByte + " --scheme e0m4 --lm-head-scheme q3h -o " + q3h).exitCode, 0);
  schemesOf(q3h, lmHead);
  EXPECT_EQ(lmHead, "q3h");
  r = runTool("tl-quant", kByte + " --quantize-lm-head --lm-head-scheme float -o /dev/null");
  EXPECT_EQ(r.exitCode, 2) << r.err;
  EXPECT_EQ(r.err, "tl-quant: error: --quantize-lm-head and --lm-head-scheme float contradict each other\n");
  r = runTool("tl-quant", kByte + " --lm-head-scheme fp3 -o /dev/null");
  EXPECT_EQ(r.exitCode, 2) << r.err;
  EXPECT_NE(r.err.find("--lm-head-scheme: unknown scheme 'fp3' (e0m4, int4, w4a8, q8, q3h) or float"), std::string::npos)
      << r.err;
  expectOneLineError(runTool("tl-quant", kByte + " --scheme int4 --format ort --lm-head-scheme q8 -o /dev/null"),
                     "--format ort writes int4 (MatMulNBits), not q8");
  expectOneLineError(runTool("tl-quant", kByte + " --lm-head-scheme q3h --group 127 -o /dev/null"), "--group must be even");
}

// Weights in external data come in one at a time and go out to OUT.data: the model
// file holds no weight bytes, and it runs exactly as the inline quantized model.
TEST(TlQuantCli, ExternalDataInExternalDataOut) {
  const auto dir = test::tempDir("quant_external");
  std::filesystem::create_directories(dir / "in");
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(test::readFile(kByte)));
  std::string bin;
  for (auto& t : *m.mutable_graph()->mutable_initializer()) {
    if (t.raw_data().size() < 1024) continue;
    for (auto [key, value] : {std::pair<const char*, std::string>{"location", "weights.bin"},
                              {"offset", std::to_string(bin.size())},
                              {"length", std::to_string(t.raw_data().size())}}) {
      auto* kv = t.add_external_data();
      kv->set_key(key);
      kv->set_value(value);
    }
    bin += t.raw_data();
    t.clear_raw_data();
    t.set_data_location(onnx::TensorProto::EXTERNAL);
  }
  test::writeFile(dir / "in/weights.bin", bin);
  std::string proto;
  ASSERT_TRUE(m.SerializeToString(&proto));
  test::writeFile(dir / "in/model.onnx", proto);

  const std::string ext = (dir / "q.onnx").string(), inl = (dir / "inline.onnx").string();
  auto r = runTool("tl-quant", (dir / "in/model.onnx").string() + " --scheme e0m4 -o " + ext);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  r = runTool("tl-quant", kByte + " --scheme e0m4 -o " + inl);
  ASSERT_EQ(r.exitCode, 0) << r.err;
  ASSERT_TRUE(std::filesystem::exists(ext + ".data"));
  EXPECT_LT(std::filesystem::file_size(ext), std::filesystem::file_size(dir / "in/model.onnx") + 16 * 1024);
  EXPECT_GT(std::filesystem::file_size(ext + ".data"), 1024u * 1024);
  onnx::ModelProto q;
  ASSERT_TRUE(q.ParseFromString(test::readFile(ext)));
  for (const auto& t : q.graph().initializer()) EXPECT_LT(t.raw_data().size(), 1024u) << t.name();
  const std::string gen = " --generate --prompt 'def ' -n 40";
  auto a = runTool("tl-run", ext + gen), b = runTool("tl-run", inl + gen);
  ASSERT_EQ(a.exitCode, 0) << a.err;
  EXPECT_EQ(a.out, b.out);
  // Asked for explicitly from an inline model, too; not to stdout.
  r = runTool("tl-quant", kByte + " --scheme q8 --external-data -o " + (dir / "q8.onnx").string());
  ASSERT_EQ(r.exitCode, 0) << r.err;
  EXPECT_TRUE(std::filesystem::exists(dir / "q8.onnx.data"));
  r = runTool("tl-quant", kByte + " --scheme q8 --external-data -o -");
  EXPECT_EQ(r.exitCode, 2) << r.err;
  EXPECT_NE(r.err.find("--external-data needs -o FILE"), std::string::npos) << r.err;
}

TEST(TlQuantCli, BadInput) {
  expectOneLineError(runTool("tl-quant", kByte + " --scheme fp3 -o /dev/null"), "unknown scheme 'fp3'");
  expectOneLineError(runTool("tl-quant", kByte + " --group 0 -o /dev/null"), "--group must be positive, not 0");
  expectOneLineError(runTool("tl-quant", kByte + " --scheme q3h --group 127 -o /dev/null"), "--group must be even");
  expectOneLineError(runTool("tl-quant", kByte + " --only nosuch -o /dev/null"), "no MatMul multiplies by");
  expectOneLineError(runTool("tl-quant", kByte + " --scheme int4 --group 96 --format ort -o /dev/null"),
                     "a power of two >= 16 (MatMulNBits' block_size), not 96");
  expectOneLineError(runTool("tl-quant", kByte + " --scheme e0m4 --format ort -o /dev/null"),
                     "--format ort writes int4 (MatMulNBits), not e0m4");
  // Each line at its edge: 8 is a power of two under MatMulNBits' 16, and 16 is taken; the
  // lm-head's scheme is held to the same rules as --scheme.
  expectOneLineError(runTool("tl-quant", kByte + " --scheme int4 --group 8 --format ort -o /dev/null"),
                     "a power of two >= 16 (MatMulNBits' block_size), not 8");
  EXPECT_EQ(runTool("tl-quant", kByte + " --scheme int4 --group 16 --format ort -o /dev/null").exitCode, 0);
  expectOneLineError(runTool("tl-quant", kByte + " --scheme int4 --quantize-lm-head --lm-head-scheme q8 --format ort -o /dev/null"),
                     "--format ort writes int4 (MatMulNBits), not q8");
  expectOneLineError(runTool("tl-quant", kByte + " --scheme int4 --quantize-lm-head --lm-head-scheme q3h --group 63 -o /dev/null"),
                     "--group must be even");
  // A fused model's merged MatMuls (q, k and v as one tl.MatMul) have no MatMulNBits form.
  const auto fused = (test::tempDir("quant_fused_ort") / "fused.onnx").string();
  ASSERT_EQ(runTool("tl-fuse", kByte + " -o " + fused).exitCode, 0);
  expectOneLineError(runTool("tl-quant", fused + " --scheme int4 --format ort -o /dev/null"),
                     "a merged tl.MatMul has no MatMulNBits form (quantize before tl-fuse)");
  const auto format = runTool("tl-quant", kByte + " --report --report-format xml");
  EXPECT_EQ(format.exitCode, 2);  // a usage error
  EXPECT_NE(format.err.find("--report-format must be md, csv or json"), std::string::npos) << format.err;
  // A MatMul by an activation (attention's q x k) is no constant weight.
  onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(test::readFile(kByte)));
  std::string act;
  for (const auto& n : m.graph().node())
    if (n.op_type() == "MatMul" && n.input(1).find("Transpose") != std::string::npos) act = n.input(1);
  ASSERT_FALSE(act.empty());
  expectOneLineError(runTool("tl-quant", kByte + " --only '" + act + "' -o /dev/null"), "is not constant");
  // A constant weight that is no 2-D float32 matrix: a [2, 4, 5] one of a batched MatMul,
  // a [4, 5] one of int32 (reshaped and retyped from bytellama's first weight).
  for (const bool batched : {true, false}) {
    onnx::ModelProto w = m;
    std::string name;
    for (const auto& n : w.graph().node())
      if (n.op_type() == "MatMul" && n.input(1).rfind("onnx::MatMul", 0) == 0 && name.empty()) name = n.input(1);
    for (auto& t : *w.mutable_graph()->mutable_initializer()) {
      if (t.name() != name) continue;
      t.clear_dims();
      if (batched) {
        for (int64_t d : {2, 4, 5}) t.add_dims(d);
        t.set_raw_data(std::string(2 * 4 * 5 * 4, '\0'));
      } else {
        for (int64_t d : {4, 5}) t.add_dims(d);
        t.set_data_type(onnx::TensorProto::INT32);
        t.set_raw_data(std::string(4 * 5 * 4, '\0'));
      }
      t.clear_external_data();
    }
    const auto path = test::tempDir("quant_bad_weight") / (batched ? "batched.onnx" : "int32.onnx");
    test::writeFile(path, w.SerializeAsString());
    expectOneLineError(runTool("tl-quant", path.string() + " --only '" + name + "' -o /dev/null"),
                       "is not a 2-D float32 matrix");
  }
}

}  // namespace
}  // namespace tl
