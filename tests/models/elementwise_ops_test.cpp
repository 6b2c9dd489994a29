// Elementwise ops whose operands' types differ, comparisons of equal operands, Range in
// each type, MatMul of vectors, Dropout's modes, Trilu, ConstantOfShape and tl.Concat: each computed right against a
// reference on the host, or refused in one line, never a silently wrong value.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <optional>

#include "cli/error.h"
#include "cli/test_support.h"
#include "runtime/executor.h"
#include "tensor/tensor.h"

namespace tl {
namespace {

using test::oneNodeModel;
using test::onBothFamilies;

template <typename T>
Tensor tensorOf(const char* name, DType dtype, const std::vector<T>& v) {
  Tensor t;
  t.name = name;
  t.dtype = dtype;
  t.dims = {static_cast<int64_t>(v.size())};
  t.bytes.resize(v.size() * sizeof(T));
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

// v's values in dtype t (float32, int32 or int64).
Tensor typedTensor(const char* name, DType t, const std::vector<double>& v) {
  if (t == DType::Float) return tensorOf(name, t, std::vector<float>(v.begin(), v.end()));
  if (t == DType::Int32) return tensorOf(name, t, std::vector<int32_t>(v.begin(), v.end()));
  return tensorOf(name, t, std::vector<int64_t>(v.begin(), v.end()));
}

void setInputType(Model& m, int input, DType t) {
  m.proto.mutable_graph()->mutable_input(input)->mutable_type()->mutable_tensor_type()->set_elem_type(
      static_cast<int32_t>(t));
}

// Integer powers by repeated multiplication, wrapping in the base's width as numpy's do;
// a negative exponent truncates 1 / a^-b toward zero.
int64_t intPower(int64_t a, int64_t b, bool wide) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? (b % 2 ? -1 : 1) : 0;
  uint64_t r = 1;
  for (int64_t i = 0; i < b; ++i) r *= static_cast<uint64_t>(a);
  return wide ? static_cast<int64_t>(r) : static_cast<int32_t>(static_cast<uint32_t>(r));
}

// Pow(T base, T1 exponent) for every pair of float32, int32 and int64 (ONNX lets the
// exponent's type differ): results equal the host's, integral ones exactly (the kernels
// once read an int exponent's bits as a float, and pow()'s error truncated 729 to 728).
TEST(PowKernel, EveryBaseAndExponentType) {
  const std::vector<double> bases = {-3, -2, -1, 0, 1, 2, 3, 7, 10, 1.5};
  const std::vector<double> exps = {0, 1, 2, 3, 5, 6, -1, -2, 11, 0.5};
  for (DType tb : {DType::Float, DType::Int32, DType::Int64})
    for (DType te : {DType::Float, DType::Int32, DType::Int64}) {
      Model m = oneNodeModel("Pow", {{"a", {"10"}}, {"b", {"10"}}}, 0, "");
      setInputType(m, 0, tb);
      setInputType(m, 1, te);
      // An integer base's negative exponents are left to the float exponent row below
      // (numpy refuses them for integer exponents); 0 to a negative power is infinite.
      std::vector<double> b = bases, e = exps;
      for (size_t i = 0; i < b.size(); ++i) {
        if (tb != DType::Float) b[i] = std::trunc(b[i]);
        if (te != DType::Float) e[i] = std::trunc(e[i]);
        if (b[i] == 0 && e[i] < 0) e[i] = -e[i];
      }
      onBothFamilies(m, [&](Executor& ex, bool gpu) {
        const auto got = ex.run({typedTensor("a", tb, b), typedTensor("b", te, e)});
        ASSERT_EQ(got[0].dtype, tb);
        for (size_t i = 0; i < b.size(); ++i) {
          const std::string at = std::string(dtypeName(tb)) + "^" + dtypeName(te) + " " + std::to_string(b[i]) + "^" +
                                 std::to_string(e[i]) + " gpu " + std::to_string(gpu);
          if (tb == DType::Float) {
            const double want = std::pow(b[i], e[i]);
            const float y = reinterpret_cast<const float*>(got[0].bytes.data())[i];
            EXPECT_NEAR(y, want, 4e-6 * std::fabs(want)) << at;  // pow(): 16 ulp
            continue;
          }
          const int64_t want = e[i] == std::trunc(e[i])
                                   ? intPower(static_cast<int64_t>(b[i]), static_cast<int64_t>(e[i]), tb == DType::Int64)
                                   : static_cast<int64_t>(std::pow(b[i], e[i]));
          const int64_t y = tb == DType::Int64 ? reinterpret_cast<const int64_t*>(got[0].bytes.data())[i]
                                               : reinterpret_cast<const int32_t*>(got[0].bytes.data())[i];
          EXPECT_EQ(y, want) << at;
        }
      });
    }
}

// Range of each type whose length is only known at run time (limit from x's shape), so
// that a kernel computes it: start and delta reach it in the output's own type.
TEST(RangeKernel, EachTypeFromItsOwnArguments) {
  for (const auto& [type, code] : {std::pair<DType, int>{DType::Float, 1}, {DType::Int32, 6}, {DType::Int64, 7}}) {
    const std::string to = "<to = " + std::to_string(code) + ">";
    const std::string text = R"(<ir_version: 8, opset_import: ["" : 17]>
g (float[N] x) => (y) {
  zero = Constant <value = int64 {0}> ()
  three = Constant <value = int64 {3}> ()
  seven = Constant <value = int64 {7}> ()
  shape = Shape (x)
  n = Gather <axis = 0> (shape, zero)
  steps = Mul (n, three)
  end = Add (steps, seven)
  start = Cast )" + to + R"( (seven)
  limit = Cast )" + to + R"( (end)
  delta = Cast )" + to + R"( (three)
  y = Range (start, limit, delta)
})";
    Model m;
    const auto status = onnx::OnnxParser::Parse(m.proto, text.c_str());
    ASSERT_TRUE(status.IsOK()) << status.ErrorMessage();
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      const auto got = ex.run({test::floats("x", {0, 0, 0, 0, 0}, {5})});
      ASSERT_EQ(got[0].dtype, type);
      ASSERT_EQ(got[0].dims, (std::vector<int64_t>{5}));
      const auto y = got[0].toDouble();
      for (size_t i = 0; i < y.size(); ++i)
        EXPECT_EQ(y[i], 7.0 + 3.0 * static_cast<double>(i)) << dtypeName(type) << " element " << i << " gpu " << gpu;
    });
  }
}

// Trilu keeps the upper (or lower) triangle of each matrix from diagonal k on: every k
// from below the matrix to past it, both triangles, against the rule j - i >= k (<= k).
TEST(TriluKernel, EachDiagonalEachTriangle) {
  for (const int upper : {0, 1})
    for (const std::optional<int> given : {std::optional<int>{-4}, {-1}, {0}, {2}, {5}, {}}) {  // none: the main diagonal
      const int k = given.value_or(0);
      const std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[2, 3, 4] x) => (float[2, 3, 4] y) {\n" +
                               (given ? "  k = Constant <value = int64 {" + std::to_string(k) + "}> ()\n" : "") +
                               "  y = Trilu <upper = " + std::to_string(upper) + "> (x" + (given ? ", k" : "") + ")\n}";
      Model m;
      ASSERT_TRUE(onnx::OnnxParser::Parse(m.proto, text.c_str()).IsOK());
      std::vector<float> x(24);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i + 1);
      onBothFamilies(m, [&](Executor& ex, bool gpu) {
        const auto got = ex.run({test::floats("x", x, {2, 3, 4})});
        const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
        for (int b = 0; b < 2; ++b)
          for (int i = 0; i < 3; ++i)
            for (int j = 0; j < 4; ++j) {
              const int e = (b * 3 + i) * 4 + j;
              const bool kept = upper ? j - i >= k : j - i <= k;
              EXPECT_EQ(y[e], kept ? x[static_cast<size_t>(e)] : 0.0f) << "upper " << upper << " k " << k << " at " << e << " gpu " << gpu;
            }
      });
    }
}

// ConstantOfShape of a shape known only at binding ([N, 3]) fills it with its value: a
// float, an int64, and the default float 0; on the host when small (N = 5), by a kernel
// past Executor::kHostElements (N = 30000).
TEST(ConstantOfShapeKernel, FillsTheBoundShape) {
  for (const char* value : {"float {2.5}", "int64 {-7}", ""}) {
    const std::string attr = *value ? std::string(" <value = ") + value + ">" : "";
    const bool isInt = std::string(value).rfind("int64", 0) == 0;
    const std::string text = std::string("<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[N, 3] x) => (") +
                             (isInt ? "int64" : "float") + "[N, 3] y) {\n  s = Shape (x)\n  y = ConstantOfShape" + attr + " (s)\n}";
    Model m;
    ASSERT_TRUE(onnx::OnnxParser::Parse(m.proto, text.c_str()).IsOK()) << text;
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      for (int64_t n : {5, 30000}) {
        const auto got = ex.run({test::floats("x", std::vector<float>(static_cast<size_t>(3 * n)), {n, 3})});
        ASSERT_EQ(got[0].dims, (std::vector<int64_t>{n, 3}));
        const auto y = got[0].toDouble();
        EXPECT_EQ(std::count(y.begin(), y.end(), isInt ? -7.0 : *value ? 2.5 : 0.0), 3 * n) << value << " n " << n << " gpu " << gpu;
      }
    });
  }
}

// tl.Concat (tl-fuse's pair of Concats in one launch): each output its own pair joined
// along the axis, the pairs of different shapes.
TEST(ConcatPairKernel, TwoPairsInOneLaunch) {
  for (const int axis : {1, -2}) {  // one axis, counted from either end
    const std::string text = "<ir_version: 8, opset_import: [\"\" : 17, \"tl\" : 1]>\n"
                             "g (float[2, A, 3] a0, float[2, B, 3] a1, float[1, C, 2] b0, float[1, D, 2] b1) => (float[2, E, 3] y0, float[1, F, 2] y1) {\n"
                             "  y0, y1 = tl.Concat <axis = " + std::to_string(axis) + "> (a0, a1, b0, b1)\n}";
    Model m;
    ASSERT_TRUE(onnx::OnnxParser::Parse(m.proto, text.c_str()).IsOK()) << text;
    const std::vector<int64_t> len = {2, 3, 1, 4};
    std::vector<std::vector<float>> data;
    std::vector<Tensor> feeds;
    const char* names[] = {"a0", "a1", "b0", "b1"};
    for (size_t j = 0; j < 4; ++j) {
      const int64_t outer = j < 2 ? 2 : 1, inner = j < 2 ? 3 : 2;
      data.emplace_back(static_cast<size_t>(outer * len[j] * inner));
      for (size_t e = 0; e < data[j].size(); ++e) data[j][e] = static_cast<float>(100 * j + e);
      feeds.push_back(test::floats(names[j], data[j], {outer, len[j], inner}));
    }
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      const auto got = ex.run(feeds);
      for (size_t p = 0; p < 2; ++p) {
        const int64_t outer = p == 0 ? 2 : 1, inner = p == 0 ? 3 : 2, l0 = len[2 * p], l1 = len[2 * p + 1];
        ASSERT_EQ(got[p].dims, (std::vector<int64_t>{outer, l0 + l1, inner}));
        const float* y = reinterpret_cast<const float*>(got[p].bytes.data());
        for (int64_t o = 0, i = 0; o < outer; ++o)
          for (size_t j : {2 * p, 2 * p + 1})
            for (int64_t r = 0; r < len[j]; ++r)
              for (int64_t c = 0; c < inner; ++c, ++i)
                ASSERT_EQ(y[i], data[j][static_cast<size_t>((o * len[j] + r) * inner + c)]) << "pair " << p << " gpu " << gpu << " at " << i;
      }
    });
  }
}

// The comparisons on equal operands, where each differs from its strict or loose twin:
// float32, int32 and int64, elementwise against the host.
TEST(ComparisonKernel, EqualOperandsDecideEachOp) {
  const std::vector<double> a = {1, 2, 3, -4, 0, 7}, b = {1, 3, 2, -4, 0, -7};
  for (const char* op : {"Equal", "Less", "LessOrEqual", "Greater", "GreaterOrEqual"})
    for (DType t : {DType::Float, DType::Int32, DType::Int64}) {
      Model m = oneNodeModel(op, {{"a", {"6"}}, {"b", {"6"}}}, 0, "");
      setInputType(m, 0, t);
      setInputType(m, 1, t);
      const std::string o = op;
      onBothFamilies(m, [&](Executor& ex, bool gpu) {
        const auto got = ex.run({typedTensor("a", t, a), typedTensor("b", t, b)});
        ASSERT_EQ(got[0].dtype, DType::Bool);
        for (size_t i = 0; i < a.size(); ++i) {
          const bool want = o == "Equal" ? a[i] == b[i] : o == "Less" ? a[i] < b[i] : o == "LessOrEqual" ? a[i] <= b[i]
                            : o == "Greater" ? a[i] > b[i] : a[i] >= b[i];
          EXPECT_EQ(got[0].bytes[i] != 0, want) << o << " " << dtypeName(t) << " " << a[i] << ", " << b[i] << " gpu " << gpu;
        }
      });
    }
}

// Gather along a middle axis with negative indices (data [2, 5, 3], indices [4] along
// axis 1: out [2, 4, 3]) and along the first axis with 2-D indices (out [2, 2, 5, 3]), on
// the device in both families, against the host.
TEST(GatherKernel, AxesAndNegativeIndices) {
  std::vector<float> data(30);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<float>(i) * 0.5f - 3.0f;
  struct Case {
    int64_t axis;
    std::vector<int64_t> idxDims;
    std::vector<double> idx;
  };
  for (const Case& c : {Case{1, {4}, {0, -1, 2, 4}}, Case{0, {2, 2}, {1, 0, -2, -1}}}) {
    std::vector<std::string> idxNames;
    for (int64_t d : c.idxDims) idxNames.push_back(std::to_string(d));
    Model m = oneNodeModel("Gather", {{"data", {"2", "5", "3"}}, {"idx", idxNames}}, 0, "");
    setInputType(m, 1, DType::Int64);
    test::setAttr(m, "axis", c.axis);
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      Tensor idx = typedTensor("idx", DType::Int64, c.idx);
      idx.dims = c.idxDims;
      const auto got = ex.run({test::floats("data", data, {2, 5, 3}), idx});
      const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
      const int64_t dims[3] = {2, 5, 3}, outer = c.axis ? 2 : 1, inner = c.axis ? 3 : 15;
      size_t at = 0;
      for (int64_t o = 0; o < outer; ++o)
        for (double v : c.idx) {
          const int64_t k = v < 0 ? static_cast<int64_t>(v) + dims[c.axis] : static_cast<int64_t>(v);
          for (int64_t e = 0; e < inner; ++e, ++at)
            ASSERT_EQ(y[at], data[static_cast<size_t>((o * dims[c.axis] + k) * inner + e)])
                << "axis " << c.axis << " at " << at << " gpu " << gpu;
        }
      ASSERT_EQ(at * 4, got[0].bytes.size());
    });
  }
}

// MatMul with a 1-D operand (ONNX: a vector is a matrix of one row or one column, that
// axis dropped from the output): [M, K] x [K] -> [M], [K] x [K, N] -> [N], against the host.
TEST(MatMulKernel, VectorOperands) {
  const int64_t M = 5, K = 7, N = 3;
  std::vector<float> a(static_cast<size_t>(M * K)), v(static_cast<size_t>(K)), b(static_cast<size_t>(K * N));
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(static_cast<int>(i % 11) - 5) * 0.25f;
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) - 3.0f;
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<float>(static_cast<int>(i % 7) - 2) * 0.5f;
  {
    Model m = oneNodeModel("MatMul", {{"a", {"5", "7"}}, {"b", {"7"}}}, 0, "");
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      const auto got = ex.run({test::floats("a", a, {M, K}), test::floats("b", v, {K})});
      ASSERT_EQ(got[0].dims, (std::vector<int64_t>{M}));
      const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
      for (int64_t m = 0; m < M; ++m) {
        double want = 0;
        for (int64_t k = 0; k < K; ++k) want += a[static_cast<size_t>(m * K + k)] * v[static_cast<size_t>(k)];
        EXPECT_NEAR(y[m], want, 1e-5) << "row " << m << " gpu " << gpu;
      }
    });
  }
  Model m = oneNodeModel("MatMul", {{"a", {"7"}}, {"b", {"7", "3"}}}, 0, "");
  onBothFamilies(m, [&](Executor& ex, bool gpu) {
    const auto got = ex.run({test::floats("a", v, {K}), test::floats("b", b, {K, N})});
    ASSERT_EQ(got[0].dims, (std::vector<int64_t>{N}));
    const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
    for (int64_t n = 0; n < N; ++n) {
      double want = 0;
      for (int64_t k = 0; k < K; ++k) want += v[static_cast<size_t>(k)] * b[static_cast<size_t>(k * N + n)];
      EXPECT_NEAR(y[n], want, 1e-5) << "column " << n << " gpu " << gpu;
    }
  });
}

// Batch dims broadcast from either side between operands of different ranks:
// [2, M, K] x [3, 1, K, N] -> [3, 2, M, N], and [3, 1, M, K] x [2, K, N], against the host.
TEST(MatMulKernel, BatchesOfDifferentRanksBroadcast) {
  const int64_t M = 3, K = 4, N = 5;
  const std::vector<std::pair<std::vector<int64_t>, std::vector<int64_t>>> cases = {{{2}, {3, 1}}, {{3, 1}, {2}}};
  for (const auto& [ab, bb] : cases) {
    std::vector<int64_t> ad = ab, bd = bb;
    ad.insert(ad.end(), {M, K});
    bd.insert(bd.end(), {K, N});
    auto names = [](const std::vector<int64_t>& d) {
      std::vector<std::string> s;
      for (int64_t x : d) s.push_back(std::to_string(x));
      return s;
    };
    auto values = [](const std::vector<int64_t>& d, int mod, float step) {
      std::vector<float> v(static_cast<size_t>(elementCount(d)));
      for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(static_cast<int>(i % mod) - mod / 2) * step;
      return v;
    };
    const std::vector<float> a = values(ad, 13, 0.25f), b = values(bd, 11, 0.5f);
    // [3, 2]: the batch index (i, j) reads a's and b's matrices at their own (broadcast) dims
    auto matrix = [](const std::vector<int64_t>& batch, int64_t i, int64_t j) {
      const int64_t x = batch.size() == 2 ? (batch[0] == 1 ? 0 : i) : 0, y = batch.back() == 1 ? 0 : j;
      return batch.size() == 2 ? x * batch[1] + y : y;
    };
    Model m = oneNodeModel("MatMul", {{"a", names(ad)}, {"b", names(bd)}}, 0, "");
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      const auto got = ex.run({test::floats("a", a, ad), test::floats("b", b, bd)});
      ASSERT_EQ(got[0].dims, (std::vector<int64_t>{3, 2, M, N})) << "gpu " << gpu;
      const float* y = reinterpret_cast<const float*>(got[0].bytes.data());
      for (int64_t i = 0; i < 3; ++i)
        for (int64_t j = 0; j < 2; ++j) {
          const float* am = a.data() + matrix(ab, i, j) * M * K;
          const float* bm = b.data() + matrix(bb, i, j) * K * N;
          for (int64_t r = 0; r < M; ++r)
            for (int64_t c = 0; c < N; ++c) {
              double want = 0;
              for (int64_t k = 0; k < K; ++k) want += am[r * K + k] * bm[k * N + c];
              EXPECT_NEAR(y[((i * 2 + j) * M + r) * N + c], want, 1e-5) << "batch " << i << "," << j << " gpu " << gpu;
            }
        }
    });
  }
}

// Mod of integers takes the divisor's sign (fmod = 0, Python's %), in int32 and int64;
// fmod = 1 (C's fmod) has no kernel and is refused.
TEST(ModKernel, IntegersTakeTheDivisorsSign) {
  const std::vector<double> a = {7, -7, 7, -7, 6}, b = {3, 3, -3, -3, 3}, want = {1, 2, -2, -1, 0};
  for (DType t : {DType::Int32, DType::Int64}) {
    Model m = oneNodeModel("Mod", {{"a", {"5"}}, {"b", {"5"}}}, 0, "");
    setInputType(m, 0, t);
    setInputType(m, 1, t);
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      const auto got = ex.run({typedTensor("a", t, a), typedTensor("b", t, b)});
      const auto y = got[0].toDouble();
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_EQ(y[i], want[i]) << dtypeName(t) << " " << a[i] << " mod " << b[i] << " gpu " << gpu;
    });
  }
  Model m = oneNodeModel("Mod", {{"a", {"5"}}, {"b", {"5"}}}, 0, "");
  test::setAttr(m, "fmod", int64_t{1});
  try {
    onBothFamilies(m, [&](Executor& ex, bool) {
      ex.run({test::floats("a", {1, 2, 3, 4, 5}, {5}), test::floats("b", {2, 2, 2, 2, 2}, {5})});
    });
    ADD_FAILURE() << "Mod with fmod = 1 ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Mod with fmod=1 has no kernel"), std::string::npos) << e.what();
  }
}

// Div of integers truncates toward zero (C's, as ONNX Runtime's), in int32 and int64.
TEST(DivKernel, IntegersTruncateTowardZero) {
  const std::vector<double> a = {7, -7, 7, -7, 6}, b = {2, 2, -2, -2, 3}, want = {3, -3, -3, 3, 2};
  for (DType t : {DType::Int32, DType::Int64}) {
    Model m = oneNodeModel("Div", {{"a", {"5"}}, {"b", {"5"}}}, 0, "");
    setInputType(m, 0, t);
    setInputType(m, 1, t);
    onBothFamilies(m, [&](Executor& ex, bool gpu) {
      const auto y = ex.run({typedTensor("a", t, a), typedTensor("b", t, b)})[0].toDouble();
      for (size_t i = 0; i < a.size(); ++i)
        EXPECT_EQ(y[i], want[i]) << dtypeName(t) << " " << a[i] << " / " << b[i] << " gpu " << gpu;
    });
  }
}

// Binary ops other than Pow take one type: a mix is refused, naming both.
TEST(BinaryKernel, RefusesOperandsOfTwoTypes) {
  Model m = oneNodeModel("Add", {{"a", {"3"}}, {"b", {"3"}}}, 0, "");
  setInputType(m, 1, DType::Int32);
  try {
    onBothFamilies(m, [&](Executor& ex, bool) {
      ex.run({tensorOf<float>("a", DType::Float, {1, 2, 3}), tensorOf<int32_t>("b", DType::Int32, {1, 2, 3})});
    });
    ADD_FAILURE() << "a float32 + int32 Add ran";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("inputs of two types (float32 and int32)"), std::string::npos) << err.what();
  }
}

// Dropout: a view at inference; with a training_mode input, a copy where that input is a
// constant false, and refused where it may train (ONNX leaves the random stream to each
// runtime, so no reference output exists to meet).
TEST(DropoutKernel, CopiesAtInferenceRefusesTraining) {
  for (int mode : {-1, 0, 1}) {  // a graph input, a constant false, a constant true
    const bool inference = mode == 0;
    Model m = oneNodeModel("Dropout", {{"x", {"4"}}, {"ratio", {}}}, 0, "");
    auto* g = m.proto.mutable_graph();
    g->mutable_input(1)->mutable_type()->mutable_tensor_type()->mutable_shape();  // a scalar
    g->mutable_node(0)->add_input("training_mode");
    if (mode >= 0) {
      auto* t = g->add_initializer();
      t->set_name("training_mode");
      t->set_data_type(onnx::TensorProto::BOOL);
      t->add_int32_data(mode);
    } else {
      auto* in = g->add_input();
      in->set_name("training_mode");
      in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::BOOL);
      in->mutable_type()->mutable_tensor_type()->mutable_shape();
    }
    try {
      onBothFamilies(m, [&](Executor& ex, bool) {
        std::vector<Tensor> inputs = {test::floats("x", {1, -2, 3, 4}, {4}), test::floats("ratio", {0.5f}, {})};
        if (mode < 0) inputs.push_back(tensorOf<uint8_t>("training_mode", DType::Bool, {1}));
        if (mode < 0) inputs.back().dims = {};
        const auto got = ex.run(inputs);
        EXPECT_EQ(got[0].bytes, inputs[0].bytes);
      });
      EXPECT_TRUE(inference) << "a Dropout that may train ran, mode " << mode;
    } catch (const Error& err) {
      EXPECT_FALSE(inference) << err.what();
      EXPECT_NE(std::string(err.what()).find("Dropout in training mode has no kernel"), std::string::npos) << err.what();
    }
  }
}

}  // namespace
}  // namespace tl
