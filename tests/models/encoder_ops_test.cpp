// What the encoders (../shared/encoders: CLIP's towers, ViT) need beyond the decoders:
// Conv (patch embeddings and more) and ArgMax against a reference, and a symbol bound
// (clip-text's N <= 77) that a run over it is refused by.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>

#include "cli/error.h"
#include "cli/test_support.h"
#include "graph/graph.h"
#include "onnx/model_io.h"
#include "runtime/executor.h"
#include "shape/shape_inference.h"

namespace tl {
namespace {

using test::floats;
using test::oneNodeModel;
using test::onBothFamilies;
using test::refusalOf;
using test::setAttr;

struct ConvCase {
  int64_t N, C, H, W, M, KH, KW, group;
  std::vector<int64_t> strides, dilations, pads;  // pads: top, left, bottom, right
  std::string autoPad = "";                       // SAME_*: pads worked out, not given
};

// Conv against a direct loop in double: patch embedding (stride = kernel), padding,
// dilation, groups, 1x1, and auto_pad's SAME_UPPER and SAME_LOWER, whose odd totals (3 of
// a 4-wide kernel) put the extra pad at the end or the start, and whose even ones (4 of a
// 5-wide kernel, 2 of a 3-wide one at stride 2) split evenly.
TEST(ConvKernel, MatchesReference) {
  std::mt19937 rng(21);
  std::normal_distribution<float> normal;
  for (const ConvCase& c : {ConvCase{2, 3, 32, 32, 8, 8, 8, 1, {8, 8}, {1, 1}, {0, 0, 0, 0}},
                            ConvCase{1, 4, 9, 7, 6, 3, 3, 2, {2, 1}, {1, 2}, {1, 0, 2, 1}},
                            ConvCase{1, 5, 4, 4, 3, 1, 1, 1, {1, 1}, {1, 1}, {0, 0, 0, 0}},
                            ConvCase{1, 2, 6, 7, 3, 4, 5, 1, {1, 1}, {1, 1}, {}, "SAME_UPPER"},
                            ConvCase{1, 2, 6, 7, 3, 4, 5, 1, {1, 1}, {1, 1}, {}, "SAME_LOWER"},
                            ConvCase{1, 2, 7, 6, 3, 3, 4, 1, {2, 1}, {1, 1}, {}, "SAME_LOWER"}}) {
    const auto s = [](int64_t v) { return std::to_string(v); };
    Model m = oneNodeModel("Conv", {{"x", {"B", s(c.C), s(c.H), s(c.W)}}, {"w", {s(c.M), s(c.C / c.group), s(c.KH), s(c.KW)}},
                                    {"b", {s(c.M)}}},
                           0, "");
    setAttr(m, "strides", c.strides);
    setAttr(m, "dilations", c.dilations);
    std::vector<int64_t> pads = c.pads;
    if (c.autoPad.empty()) {
      setAttr(m, "pads", pads);
    } else {  // ONNX: the output is ceil(in / stride), the pads what that takes, split
      setAttr(m, "auto_pad", c.autoPad);
      const int64_t in[2] = {c.H, c.W}, ker[2] = {c.KH, c.KW};
      pads.assign(4, 0);
      for (int i = 0; i < 2; ++i) {
        const int64_t out = (in[i] + c.strides[i] - 1) / c.strides[i];
        const int64_t total = std::max<int64_t>(0, (out - 1) * c.strides[i] + c.dilations[i] * (ker[i] - 1) + 1 - in[i]);
        pads[i] = c.autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
        pads[i + 2] = total - pads[i];
      }
    }
    setAttr(m, "group", c.group);
    const int64_t OH = (c.H + pads[0] + pads[2] - c.dilations[0] * (c.KH - 1) - 1) / c.strides[0] + 1;
    const int64_t OW = (c.W + pads[1] + pads[3] - c.dilations[1] * (c.KW - 1) - 1) / c.strides[1] + 1;
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      std::vector<float> x(static_cast<size_t>(c.N * c.C * c.H * c.W)),
          w(static_cast<size_t>(c.M * c.C / c.group * c.KH * c.KW)), b(static_cast<size_t>(c.M));
      for (auto* v : {&x, &w, &b})
        for (auto& f : *v) f = normal(rng);
      auto got = ex.run({floats("x", x, {c.N, c.C, c.H, c.W}), floats("w", w, {c.M, c.C / c.group, c.KH, c.KW}),
                         floats("b", b, {c.M})});
      ASSERT_EQ(got[0].dims, (std::vector<int64_t>{c.N, c.M, OH, OW}));
      const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
      const int64_t cpg = c.C / c.group, mpg = c.M / c.group;
      for (int64_t n = 0, i = 0; n < c.N; ++n)
        for (int64_t mo = 0; mo < c.M; ++mo)
          for (int64_t oh = 0; oh < OH; ++oh)
            for (int64_t ow = 0; ow < OW; ++ow, ++i) {
              double want = b[static_cast<size_t>(mo)];
              for (int64_t ci = 0; ci < cpg; ++ci)
                for (int64_t kh = 0; kh < c.KH; ++kh)
                  for (int64_t kw = 0; kw < c.KW; ++kw) {
                    const int64_t ih = oh * c.strides[0] - pads[0] + kh * c.dilations[0];
                    const int64_t iw = ow * c.strides[1] - pads[1] + kw * c.dilations[1];
                    if (ih < 0 || ih >= c.H || iw < 0 || iw >= c.W) continue;
                    const int64_t ch = mo / mpg * cpg + ci;
                    want += double(x[static_cast<size_t>(((n * c.C + ch) * c.H + ih) * c.W + iw)]) *
                            w[static_cast<size_t>(((mo * cpg + ci) * c.KH + kh) * c.KW + kw)];
                  }
              ASSERT_NEAR(y[i], want, 1e-4 * (1 + std::fabs(want))) << "gpu " << gpu << " at " << i;
            }
    });
  }
}

// ArgMax over a middle axis: the first maximum, or the last with select_last_index.
TEST(ArgMaxKernel, FirstOrLastMaximum) {
  for (int64_t last : {0, 1}) {
    Model m = oneNodeModel("ArgMax", {{"x", {"2", "4", "3"}}}, 0, "");
    setAttr(m, "axis", int64_t{1});
    setAttr(m, "select_last_index", last);
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      std::vector<float> x(24);
      // ties along the axis (j): columns 0 and 1 hold their maximum at two j, column 2 at all four
      for (size_t i = 0; i < x.size(); ++i) {
        const size_t j = i / 3 % 4, c = i % 3;
        x[i] = c == 2 ? 1.0f : static_cast<float>((j + c) % 2) + static_cast<float>(i / 12);
      }
      auto got = ex.run({floats("x", x, {2, 4, 3})});
      ASSERT_EQ(got[0].dtype, DType::Int64);
      const int64_t* y = reinterpret_cast<const int64_t*>(got[0].bytes.data());
      for (int64_t o = 0; o < 2; ++o)
        for (int64_t c = 0; c < 3; ++c) {
          int64_t at = 0;
          for (int64_t j = 1; j < 4; ++j) {
            const float v = x[static_cast<size_t>((o * 4 + j) * 3 + c)], best = x[static_cast<size_t>((o * 4 + at) * 3 + c)];
            if (v > best || (last && v == best)) at = j;
          }
          EXPECT_EQ(y[o * 3 + c], at) << "last " << last << " gpu " << gpu;
        }
    });
  }
}

// Softmax over an axis of no elements (x [2, 0]) gives an empty output and launches
// nothing, in both families; over [2, 3] its rows sum to 1.
TEST(SoftmaxKernel, EmptyAxisGivesAnEmptyOutput) {
  Model m = oneNodeModel("Softmax", {{"x", {"2", "N"}}}, 0, "");
  onBothFamilies(m, [&](Executor& ex, bool gpu) {
    const auto none = ex.run({floats("x", {}, {2, 0})});
    EXPECT_EQ(none[0].dims, (std::vector<int64_t>{2, 0})) << "gpu " << gpu;
    const auto y = ex.run({floats("x", {1, 2, 3, -1, 0, 1}, {2, 3})})[0].toDouble();
    EXPECT_NEAR(y[0] + y[1] + y[2], 1.0, 1e-6) << "gpu " << gpu;
    EXPECT_NEAR(y[5], std::exp(1.0) / (std::exp(-1.0) + 1 + std::exp(1.0)), 1e-6) << "gpu " << gpu;
  });
}

// LayerNormalization with its statistics outputs, Mean and InvStdDev (over the normalized
// axis, shaped like X with it 1), in both families against double sums; one of the two
// alone is refused (the kernel writes both or neither), naming the node.
TEST(LayerNormKernel, StatisticsOutputs) {
  const auto model = [](std::vector<const char*> stats) {
    Model m = oneNodeModel("LayerNormalization", {{"x", {"2", "3", "8"}}, {"w", {"8"}}, {"b", {"8"}}}, 1e-5f, "");
    auto* g = m.proto.mutable_graph();
    for (const char* o : stats) {
      g->mutable_node(0)->add_output(o);
      g->add_output()->set_name(o);
    }
    return m;
  };
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.5f, 2.0f);
  std::vector<float> x(48), w(8), b(8);
  for (auto* v : {&x, &w, &b})
    for (auto& f : *v) f = normal(rng);
  Model m = model({"mean", "inv"});
  onBothFamilies(m, [&](Executor& ex, bool gpu) {
    const auto got = ex.run({floats("x", x, {2, 3, 8}), floats("w", w, {8}), floats("b", b, {8})});
    ASSERT_EQ(got.size(), 3u);
    EXPECT_EQ(got[1].dims, (std::vector<int64_t>{2, 3, 1}));
    EXPECT_EQ(got[2].dims, (std::vector<int64_t>{2, 3, 1}));
    const auto y = got[0].toDouble(), mean = got[1].toDouble(), inv = got[2].toDouble();
    for (size_t r = 0; r < 6; ++r) {
      double sum = 0, sq = 0;
      for (size_t c = 0; c < 8; ++c) sum += x[r * 8 + c];
      const double mu = sum / 8;
      for (size_t c = 0; c < 8; ++c) sq += (x[r * 8 + c] - mu) * (x[r * 8 + c] - mu);
      const double is = 1 / std::sqrt(sq / 8 + 1e-5);
      EXPECT_NEAR(mean[r], mu, 1e-5) << "row " << r << " gpu " << gpu;
      EXPECT_NEAR(inv[r], is, 1e-4 * is) << "row " << r << " gpu " << gpu;
      for (size_t c = 0; c < 8; ++c)
        EXPECT_NEAR(y[r * 8 + c], (x[r * 8 + c] - mu) * is * w[c] + b[c], 1e-4) << "row " << r << " gpu " << gpu;
    }
  });
  Model one = model({"mean"});
  const std::string refused = refusalOf(one);
  EXPECT_NE(refused.find("both or neither statistics outputs"), std::string::npos) << "refused with: '" << refused << "'";
}

// clip-text slices its 77-row position table to min(77, N): tl-shape records N <= 77, and
// a run with 80 tokens is refused before anything runs, naming the bound and the node.
TEST(SymbolBounds, ClipTextRefusesMoreThan77Tokens) {
  Model model = loadModel((test::sharedModels().parent_path() / "encoders/clip-text/model.onnx").string());
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  ASSERT_EQ(analysis.symbols.bounds().size(), 1u);
  EXPECT_EQ(analysis.symbols.bounds()[0].expr.str(), "N");
  EXPECT_EQ(analysis.symbols.bounds()[0].limit, 77);
  Device device(selectDevice(""), false);
  Executor ex(device, model, graph, analysis);
  Tensor ids;
  ids.name = "input_ids";
  ids.dtype = DType::Int64;
  for (int64_t n : {77, 80}) {
    ids.dims = {1, n};
    ids.bytes.assign(static_cast<size_t>(8 * n), 0);
    for (int64_t i = 0; i < n; ++i) std::memcpy(&ids.bytes[static_cast<size_t>(8 * i)], &i, 8);
    if (n == 77) {
      EXPECT_NO_THROW(ex.run({ids}));
      continue;
    }
    try {
      ex.run({ids});
      FAIL() << "80 tokens ran";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("N is 80, over the model's bound N <= 77 (node '/m/text_model/embeddings/Add'"),
                std::string::npos)
          << e.what();
    }
  }
  // The bound is written into the artifact.
  annotateModel(model.proto, analysis);
  bool found = false;
  for (const auto& p : model.proto.metadata_props())
    found = found || (p.key() == "tl.shape.bounds" && p.value().rfind("N <= 77\t", 0) == 0);
  EXPECT_TRUE(found);
}

}  // namespace
}  // namespace tl
