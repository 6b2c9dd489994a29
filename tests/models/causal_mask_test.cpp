// causal-mask and the index algebra behind it: masks written in ONNX's text syntax, the
// way exporters build them, are recognized (and the fused attention gives the unfused
// one's outputs in both kernel families), or left alone with a reason when any part of
// them is not the causal or the key padding mask.
#include <gtest/gtest.h>

#include <onnx/defs/parser.h>

#include <cmath>
#include <random>
#include <regex>

#include "cli/test_support.h"
#include "fuse/fuse.h"
#include "fuse/index_algebra.h"
#include "graph/attributes.h"
#include "runtime/executor.h"

namespace tl {
namespace {

// q [B,4,S,8], k and v [B,2,T,8], key mask am [B,T]; the mask is built from Ranges over T
// and S, row s at position s + T - S, and the key mask gathered through a flattened view
// (TorchScript's form), into Where(cond, 0, min).
const char* kModel = R"ONNX(
<ir_version: 8, opset_import: ["" : 17, "tl" : 1]>
g (float[B, 4, S, 8] q, float[B, 2, T, 8] k, float[B, 2, T, 8] v, int64[B, T] am) => (float[B, 4, S, 8] y) {
  zero = Constant <value = int64 {0}> ()
  one = Constant <value = int64 {1}> ()
  two = Constant <value = int64 {2}> ()
  ax0 = Constant <value = int64[1] {0}> ()
  ax012 = Constant <value = int64[3] {0, 1, 2}> ()
  ax013 = Constant <value = int64[3] {0, 1, 3}> ()
  ax123 = Constant <value = int64[3] {1, 2, 3}> ()
  minus1 = Constant <value = int64[1] {-1}> ()
  fzero = Constant <value = float {0}> ()
  fmin = Constant <value = float {-3.4028234663852886e38}> ()
  kshape = Shape (k)
  qshape = Shape (q)
  T1 = Gather <axis = 0> (kshape, two)
  S1 = Gather <axis = 0> (qshape, two)
  B1 = Gather <axis = 0> (qshape, zero)
  past = Sub (T1, S1)
  keys = Range (zero, T1, one)
  rows = Range (zero, S1, one)
  qpos = Add (rows, past)
  kk = Unsqueeze (keys, ax012)
  qq = Unsqueeze (qpos, ax013)
  causal = LessOrEqual (kk, qq)
  amb = Cast <to = 9> (am)
  flat = Flatten <axis = 2> (amb)
  batches = Range (zero, B1, one)
  bb = Unsqueeze (batches, ax123)
  boff = Mul (bb, T1)
  at = Add (kk, boff)
  picked = Gather <axis = 0> (flat, at)
  line = Reshape (picked, minus1)
  bshape = Shape (at)
  pad = Reshape (line, bshape)
  both = And (causal, pad)
  mask = Where (both, fzero, fmin)
  y = tl.Attention <scale = 0.35> (q, k, v, mask)
}
)ONNX";

Model parse(const std::string& text) {
  Model m;
  const auto status = onnx::OnnxParser::Parse(m.proto, text.c_str());
  EXPECT_TRUE(status.IsOK()) << status.ErrorMessage();
  return m;
}

// The pass's rewrites and near misses on a variant of kModel (`from` replaced by `to`).
PassResult recognize(Model& m) { return runFusePasses(m, {"causal-mask"})[0]; }

Model variant(const std::string& from, const std::string& to) {
  return parse(std::regex_replace(std::string(kModel), std::regex(from), to));
}

const onnx::NodeProto& attention(const Model& m) {
  for (const auto& n : m.proto.graph().node())
    if (n.op_type() == "Attention") return n;
  throw std::runtime_error("no attention");
}

TEST(CausalMask, TorchScriptFormIsCausalWithKeyPadding) {
  Model m = parse(kModel);
  const PassResult r = recognize(m);
  ASSERT_EQ(r.rewrites, 1) << (r.nearMisses.empty() ? "" : r.nearMisses[0]);
  const auto& a = attention(m);
  EXPECT_EQ(attrInt(a, "causal").value_or(0), 1);
  ASSERT_EQ(a.input_size(), 5);
  EXPECT_EQ(a.input(3), "");
  EXPECT_EQ(a.input(4), "am");
  EXPECT_FLOAT_EQ(*attrFloat(a, "mask_value"), -3.4028234663852886e38f);
}

// Where(not C, min, 0) is the same mask; a GatherND of (b, t) pairs (the dynamo export's
// form) reads the same key mask.
TEST(CausalMask, NegatedWhereAndGatherNdAreRead) {
  Model negated = variant("mask = Where \\(both, fzero, fmin\\)", "nb = Not (both)\n  mask = Where (nb, fmin, fzero)");
  EXPECT_EQ(recognize(negated).rewrites, 1);
  Model nd = variant("picked = Gather <axis = 0> \\(flat, at\\)",
                     "ax4 = Constant <value = int64[1] {4}> ()\n"
                     "  shp = Shape (at)\n"
                     "  bx = Expand (bb, shp)\n  kx = Expand (kk, shp)\n"
                     "  b5 = Unsqueeze (bx, ax4)\n  k5 = Unsqueeze (kx, ax4)\n"
                     "  pairs = Concat <axis = -1> (b5, k5)\n"
                     "  picked0 = GatherND (amb, pairs)\n  picked = Unsqueeze (picked0, ax4)");
  const PassResult r = recognize(nd);
  EXPECT_EQ(r.rewrites, 1) << (r.nearMisses.empty() ? "" : r.nearMisses[0]);
}

// A key index read from a Concat of (b, t) pairs at a position past its pieces (index 2 of
// 2: invalid, as ONNX Runtime would say at run time) is a near miss naming the piece, not a
// read past the Concat's inputs.
TEST(CausalMask, PiecePastTheConcatIsANearMiss) {
  Model m = variant("picked = Gather <axis = 0> \\(flat, at\\)",
                    "ax4 = Constant <value = int64[1] {4}> ()\n"
                    "  shp = Shape (at)\n"
                    "  bx = Expand (bb, shp)\n  kx = Expand (kk, shp)\n"
                    "  b5 = Unsqueeze (bx, ax4)\n  k5 = Unsqueeze (kx, ax4)\n"
                    "  pairs = Concat <axis = -1> (b5, k5)\n"
                    "  beyond = Constant <value = int64 {2}> ()\n"
                    "  kbeyond = Gather <axis = -1> (pairs, beyond)\n"
                    "  picked = Gather <axis = 0> (flat, kbeyond)");
  const PassResult r = recognize(m);
  EXPECT_EQ(r.rewrites, 0);
  ASSERT_EQ(r.nearMisses.size(), 1u);
  EXPECT_NE(r.nearMisses[0].find("piece 2 is not one of its 2"), std::string::npos) << r.nearMisses[0];
}

// Anything else is left alone, with the reason: a strict comparison (the diagonal hidden),
// padding joined by Or, a row offset other than T - S, a key mask read at key 0 for every key.
TEST(CausalMask, OtherMasksAreNearMisses) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"causal = LessOrEqual \\(kk, qq\\)", "causal = Less (kk, qq)"},
      {"both = And \\(causal, pad\\)", "both = Or (causal, pad)"},
      {"qpos = Add \\(rows, past\\)", "qpos = Add (rows, one)"},
      {"at = Add \\(kk, boff\\)", "at = Add (boff, zero)"},
      {"mask = Where \\(both, fzero, fmin\\)", "mask = Where (both, fzero, fzero)"},
      // the visible keys' value is each key's index, a float that varies: no mask of 0s
      {"mask = Where \\(both, fzero, fmin\\)", "kf = Cast <to = 1> (kk)\n  mask = Where (both, kf, fmin)"},
  };
  for (const auto& [from, to] : cases) {
    Model m = variant(from, to);
    const PassResult r = recognize(m);
    EXPECT_EQ(r.rewrites, 0) << to;
    ASSERT_EQ(r.nearMisses.size(), 1u) << to;
    EXPECT_EQ(attention(m).input(3), "mask") << to;
  }
}

// The recognized mask runs as the float mask did: both kernel families, decode (S = 1) and
// prefill rows over caches, left padding in one batch row, keys long enough to split, and
// prefill tiles that stop at the causal edge unless a row has seen no visible key (past
// the first tile of keys at 80).
TEST(CausalMask, FusedAttentionMatchesTheFloatMask) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  Model plain = parse(kModel), fused = parse(kModel);
  ASSERT_EQ(runFusePasses(fused, {"causal-mask", "dead-nodes"})[0].rewrites, 1);
  for (auto [B, S, T] :
       {std::array<int64_t, 3>{1, 1, 1}, {2, 1, 9}, {2, 5, 5}, {1, 3, 300}, {2, 7, 20}, {2, 40, 40}, {2, 70, 100}, {2, 80, 80}}) {
    std::vector<float> q(static_cast<size_t>(B * 4 * S * 8)), k(static_cast<size_t>(B * 2 * T * 8)), v(k.size());
    for (auto* x : {&q, &k, &v})
      for (auto& f : *x) f = normal(rng);
    std::vector<int64_t> am(static_cast<size_t>(B * T), 1);
    if (B > 1) am[static_cast<size_t>(T)] = 0;  // batch row 1's first key is padding
    if (S == T && T >= 40)  // and its first T / 2 + 1: rows 0 to T / 2 see no key, and average them all
      for (int64_t t = 0; t <= T / 2; ++t) am[static_cast<size_t>(T + t)] = 0;
    std::vector<Tensor> in = {test::floats("q", q, {B, 4, S, 8}), test::floats("k", k, {B, 2, T, 8}),
                              test::floats("v", v, {B, 2, T, 8}), makeTensor("am", DType::Int64, {B, T}, am.data())};
    std::vector<std::vector<float>> outs;
    for (Model* m : {&plain, &fused})
      test::onBothFamilies(*m, [&](Executor& ex, bool) {
        auto y = ex.run(in);
        const float* p = reinterpret_cast<const float*>(y[0].bytes.data());
        outs.emplace_back(p, p + y[0].bytes.size() / 4);
      });
    ASSERT_EQ(outs.size(), 6u);  // two models, each in onBothFamilies' three runs
    for (size_t o = 1; o < outs.size(); ++o)
      for (size_t i = 0; i < outs[0].size(); ++i)
        ASSERT_NEAR(outs[o][i], outs[0][i], 1e-5f * (1 + std::fabs(outs[0][i])))
            << "B " << B << " S " << S << " T " << T << " run " << o << " at " << i;
  }
}

}  // namespace
}  // namespace tl
