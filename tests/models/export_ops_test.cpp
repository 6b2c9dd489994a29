// Operators fresh exports use that the shared models do not (docs/support.md): CumSum
// (Bloom's ALiBi positions from the mask), Tile (GPT-J's rotary tables, SigLIP's pooling
// probe), GatherElements (GPT-J's sin/cos rows by position), and a mixture of experts'
// router: TopK, Clip (its expert ids clamped) and OneHot (TorchScript's expert mask), each
// against a loop in double in both kernel families.
#include <gtest/gtest.h>

#include <onnx/defs/parser.h>

#include <algorithm>
#include <random>
#include <string>

#include "cli/test_support.h"
#include "runtime/executor.h"

namespace tl {
namespace {

Model parsed(const std::string& text) {
  Model m;
  EXPECT_TRUE(onnx::OnnxParser::Parse(m.proto, text.c_str()).IsOK()) << text;
  return m;
}

// CumSum along the middle axis (given as 1 and as -2), inclusive and exclusive, forwards
// and reversed, over floats and over int64 (an attention mask's positions).
TEST(CumSumKernel, MatchesReference) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> digit(-9, 9);
  for (const char* type : {"float", "int64"})
    for (int axis : {1, -2})
      for (int exclusive : {0, 1})
        for (int reverse : {0, 1}) {
          const std::string t = type;
          Model m = parsed("<ir_version: 8, opset_import: [\"\" : 17]>\ng (" + t + "[2, 5, 3] x) => (" + t +
                           "[2, 5, 3] y) <int64 axis = {" + std::to_string(axis) + "}> {\n  y = CumSum <exclusive = " +
                           std::to_string(exclusive) + ", reverse = " + std::to_string(reverse) + "> (x, axis)\n}\n");
          std::vector<double> x(30);
          for (auto& v : x) v = t == "float" ? digit(rng) * 0.37 : digit(rng);
          std::vector<float> xf(x.begin(), x.end());
          std::vector<int64_t> xi(x.begin(), x.end());
          const Tensor in = t == "float" ? makeTensor("x", DType::Float, {2, 5, 3}, xf.data())
                                         : makeTensor("x", DType::Int64, {2, 5, 3}, xi.data());
          test::onBothFamilies(m, [&](Executor& ex, bool gpu) {
            const auto y = ex.run({in})[0].toDouble();
            for (int o = 0; o < 2; ++o)
              for (int c = 0; c < 3; ++c) {
                double sum = 0;
                for (int j = 0; j < 5; ++j) {
                  const int at = o * 15 + (reverse ? 4 - j : j) * 3 + c;
                  if (!exclusive) sum += x[at];
                  EXPECT_NEAR(y[at], sum, 1e-5) << t << " axis " << axis << " exclusive " << exclusive << " reverse "
                                                << reverse << (gpu ? " gpu" : " cpu") << " at " << at;
                  if (exclusive) sum += x[at];
                }
              }
          });
        }
}

// Tile by 2 x 1 x 3 (a repeat of 1 between two of more) and by 1 x 4 x 1, against the
// definition: y[i, j, k] = x[i % 2, j % 3, k % 4].
TEST(TileKernel, MatchesReference) {
  for (const std::vector<int64_t>& reps : {std::vector<int64_t>{2, 1, 3}, std::vector<int64_t>{1, 4, 1}}) {
    const int64_t Y[3] = {2 * reps[0], 3 * reps[1], 4 * reps[2]};
    const auto s = [](int64_t v) { return std::to_string(v); };
    Model m = parsed("<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[2, 3, 4] x) => (float[" + s(Y[0]) + ", " +
                     s(Y[1]) + ", " + s(Y[2]) + "] y) <int64[3] r = {" + s(reps[0]) + ", " + s(reps[1]) + ", " +
                     s(reps[2]) + "}> {\n  y = Tile (x, r)\n}\n");
    std::vector<float> x(24);
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.5f - 3;
    test::onBothFamilies(m, [&](Executor& ex, bool gpu) {
      const auto y = ex.run({test::floats("x", x, {2, 3, 4})})[0].toDouble();
      ASSERT_EQ(static_cast<int64_t>(y.size()), Y[0] * Y[1] * Y[2]);
      for (int64_t i = 0; i < Y[0]; ++i)
        for (int64_t j = 0; j < Y[1]; ++j)
          for (int64_t k = 0; k < Y[2]; ++k)
            EXPECT_EQ(y[static_cast<size_t>((i * Y[1] + j) * Y[2] + k)], x[static_cast<size_t>((i % 2 * 3 + j % 3) * 4 + k % 4)])
                << "reps " << reps[0] << reps[1] << reps[2] << (gpu ? " gpu" : " cpu");
    });
  }
}

// GatherElements along each axis of data [3, 4, 5] with indices [2, 4, 3] (shorter than
// data on two axes), negative indices counting from the end.
TEST(GatherElementsKernel, MatchesReference) {
  std::mt19937 rng(9);
  const int64_t D[3] = {3, 4, 5}, I[3] = {2, 4, 3};
  std::vector<float> x(60);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i) * 0.25f - 7;
  for (int axis = 0; axis < 3; ++axis) {
    Model m = parsed("<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[3, 4, 5] x, int64[2, 4, 3] i) => (float[2, 4, 3] y) {\n"
                     "  y = GatherElements <axis = " + std::to_string(axis) + "> (x, i)\n}\n");
    std::uniform_int_distribution<int64_t> pick(-D[axis], D[axis] - 1);
    std::vector<int64_t> idx(24);
    for (auto& v : idx) v = pick(rng);
    test::onBothFamilies(m, [&](Executor& ex, bool gpu) {
      const auto y = ex.run({test::floats("x", x, {3, 4, 5}), makeTensor("i", DType::Int64, {2, 4, 3}, idx.data())})[0].toDouble();
      for (int64_t a = 0; a < I[0]; ++a)
        for (int64_t b = 0; b < I[1]; ++b)
          for (int64_t c = 0; c < I[2]; ++c) {
            const size_t at = static_cast<size_t>((a * I[1] + b) * I[2] + c);
            int64_t co[3] = {a, b, c};
            co[axis] = idx[at] < 0 ? idx[at] + D[axis] : idx[at];
            EXPECT_EQ(y[at], x[static_cast<size_t>((co[0] * D[1] + co[1]) * D[2] + co[2])])
                << "axis " << axis << (gpu ? " gpu" : " cpu") << " at " << at;
          }
    });
  }
}

// TopK along the middle axis of [2, 6, 3], largest and smallest, k = 1, 3 and 6: ties
// (the values repeat) taken lower index first, as ONNX asks.
TEST(TopKKernel, MatchesReference) {
  std::vector<float> x(36);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 5) - 2;  // repeats: ties
  for (int64_t k : {1, 3, 6})
    for (int largest : {1, 0}) {
      Model m = parsed("<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[2, 6, 3] x) => (float[2, " + std::to_string(k) +
                       ", 3] v, int64[2, " + std::to_string(k) + ", 3] i) <int64[1] k = {" + std::to_string(k) +
                       "}> {\n  v, i = TopK <axis = 1, largest = " + std::to_string(largest) + "> (x, k)\n}\n");
      test::onBothFamilies(m, [&](Executor& ex, bool gpu) {
        const auto out = ex.run({test::floats("x", x, {2, 6, 3})});
        const auto v = out[0].toDouble();
        const auto idx = out[1].toInt64();
        for (int o = 0; o < 2; ++o)
          for (int c = 0; c < 3; ++c) {
            std::vector<int> order(6);
            for (int j = 0; j < 6; ++j) order[j] = j;
            const auto at = [&](int j) { return x[static_cast<size_t>(o * 18 + j * 3 + c)]; };
            std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return largest ? at(a) > at(b) : at(a) < at(b); });
            for (int64_t j = 0; j < k; ++j) {
              const size_t y = static_cast<size_t>((o * k + j) * 3 + c);
              EXPECT_EQ(idx[y], order[j]) << "k " << k << " largest " << largest << (gpu ? " gpu" : " cpu");
              EXPECT_EQ(v[y], at(order[j]));
            }
          }
      });
    }
}

// Clip with a lower bound only, an upper only, and both, over floats and int64 (expert ids).
TEST(ClipKernel, MatchesReference) {
  for (const char* type : {"float", "int64"})
    for (int bounds : {1, 2, 3}) {
      const std::string t = type;
      const std::string lo = bounds & 1 ? "lo" : "", hi = bounds & 2 ? "hi" : "";
      Model m = parsed("<ir_version: 8, opset_import: [\"\" : 17]>\ng (" + t + "[7] x) => (" + t + "[7] y) <" + t +
                       " lo = {-2}, " + t + " hi = {3}> {\n  y = Clip (x, " + lo + ", " + hi + ")\n}\n");
      const std::vector<double> x = {-5, -2, -1, 0, 2, 3, 9};
      std::vector<float> xf(x.begin(), x.end());
      std::vector<int64_t> xi(x.begin(), x.end());
      const Tensor in = t == "float" ? makeTensor("x", DType::Float, {7}, xf.data()) : makeTensor("x", DType::Int64, {7}, xi.data());
      test::onBothFamilies(m, [&](Executor& ex, bool gpu) {
        const auto y = ex.run({in})[0].toDouble();
        for (size_t i = 0; i < x.size(); ++i) {
          double want = x[i];
          if (!lo.empty()) want = std::max(want, -2.0);
          if (!hi.empty()) want = std::min(want, 3.0);
          EXPECT_EQ(y[i], want) << t << " bounds " << bounds << (gpu ? " gpu" : " cpu");
        }
      });
    }
}

// OneHot of int64 indices [2, 3] (negative ones count from the depth's end) at the last
// axis and at the first, with off and on values of 0.5 and 2.
TEST(OneHotKernel, MatchesReference) {
  const std::vector<int64_t> idx = {0, 3, -1, 2, -4, 1};
  for (int axis : {-1, 0}) {
    const std::string dims = axis == 0 ? "4, 2, 3" : "2, 3, 4";
    Model m = parsed("<ir_version: 8, opset_import: [\"\" : 17]>\ng (int64[2, 3] i) => (float[" + dims +
                     "] y) <int64 depth = {4}, float[2] values = {0.5, 2}> {\n  y = OneHot <axis = " + std::to_string(axis) +
                     "> (i, depth, values)\n}\n");
    test::onBothFamilies(m, [&](Executor& ex, bool gpu) {
      const auto y = ex.run({makeTensor("i", DType::Int64, {2, 3}, idx.data())})[0].toDouble();
      for (size_t l = 0; l < 6; ++l)
        for (int64_t c = 0; c < 4; ++c) {
          const size_t at = axis == 0 ? static_cast<size_t>(c) * 6 + l : l * 4 + static_cast<size_t>(c);
          EXPECT_EQ(y[at], (idx[l] + 4) % 4 == c ? 2.0 : 0.5) << "axis " << axis << (gpu ? " gpu" : " cpu");
        }
    });
  }
}

}  // namespace
}  // namespace tl
