#include "quant/quant.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cli/error.h"
#include "quant/quantize_model.h"

namespace tl {
namespace {

std::vector<float> normalMatrix(int64_t K, int64_t N, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.02f);
  std::vector<float> w(static_cast<size_t>(K * N));
  for (auto& x : w) x = d(rng);
  return w;
}

TEST(Quant, E0M4LevelsAreTwoBitOperations) {
  // as_float(0x40000000 | q << 19) == 2 + q/8 for every 4-bit code.
  for (uint32_t q = 0; q < 16; ++q) {
    uint32_t bits = 0x40000000u | (q << 19);
    float f;
    std::memcpy(&f, &bits, 4);
    EXPECT_EQ(f, 2.0f + q / 8.0f);
  }
}

TEST(Quant, E0M4KeepsZeroExactAndBeatsInt4) {
  auto w = normalMatrix(256, 64, 1);
  w[5 * 64 + 3] = 0.0f;
  auto e = quantize(w.data(), 256, 64, QuantScheme::E0M4, 128);
  auto i = quantize(w.data(), 256, 64, QuantScheme::Int4, 128);
  auto de = dequantize(e), di = dequantize(i);
  EXPECT_NEAR(de[5 * 64 + 3], 0.0f, 1e-7);
  EXPECT_NEAR(di[5 * 64 + 3], 0.0f, 1e-7);
  double me = meanAbsError(w.data(), de.data(), w.size()), mi = meanAbsError(w.data(), di.data(), w.size());
  EXPECT_LT(me, mi);
  EXPECT_NEAR(me / mi, 0.955, 0.03);  // the paper's Table 2 ratio
  EXPECT_EQ(meanAbsError(w.data(), de.data(), 0), 0.0);  // no values, no error (an empty weight's report)
  for (int64_t k = 0; k < 256; ++k)
    for (int64_t n = 0; n < 64; ++n) EXPECT_LE(code(e, k, n), 15);
}

TEST(Quant, ErrorsAreBoundedByTheStep) {
  auto w = normalMatrix(100, 7, 2);  // ragged last group of 4 with group 32
  for (auto s : {QuantScheme::E0M4, QuantScheme::Int4, QuantScheme::Q8, QuantScheme::W4A8, QuantScheme::Q3H}) {
    auto q = quantize(w.data(), 100, 7, s, 32);
    EXPECT_EQ(q.groups(), 4);
    auto d = dequantize(q);
    for (int64_t n = 0; n < 7; ++n) {
      for (int64_t k = 0; k < 100; ++k) {
        float lo = INFINITY, hi = -INFINITY;  // of the group
        for (int64_t j = k / 32 * 32; j < std::min<int64_t>(100, k / 32 * 32 + 32); ++j) {
          lo = std::min(lo, w[j * 7 + n]);
          hi = std::max(hi, w[j * 7 + n]);
        }
        const float amax = std::max(std::fabs(lo), std::fabs(hi));
        float bound = 0;
        switch (s) {
          case QuantScheme::E0M4: bound = (hi - lo) / 16 * 1.01f + (hi - lo) / 16; break;  // top slot clipped
          case QuantScheme::Int4:  // half a step plus the zero point's shift, over a range that holds 0
            bound = (std::max(hi, 0.0f) - std::min(lo, 0.0f)) / 15;
            break;
          case QuantScheme::Q3H: bound = (std::max(hi, 0.0f) - std::min(lo, 0.0f)) / 10; break;
          case QuantScheme::Q8: bound = amax / 127 * 0.51f; break;
          case QuantScheme::W4A8: bound = amax / 7 * 0.51f; break;
        }
        EXPECT_LE(std::fabs(d[k * 7 + n] - w[k * 7 + n]), bound + 1e-7f) << schemeName(s) << " k=" << k << " n=" << n;
      }
    }
  }
}

TEST(Quant, Q3HPacksTwoElevenLevelCodesInSevenBits) {
  auto w = normalMatrix(37, 3, 3);  // odd K: the last pair is half used
  auto q = quantize(w.data(), 37, 3, QuantScheme::Q3H, 16);
  EXPECT_EQ(q.rowBytes, (19 * 7 + 7) / 8 + 1);
  for (int64_t n = 0; n < 3; ++n)
    for (int64_t k = 0; k < 37; ++k) {
      EXPECT_GE(code(q, k, n), 0);
      EXPECT_LE(code(q, k, n), 10);
    }
  auto big = normalMatrix(256, 256, 4);
  EXPECT_NEAR(quantize(big.data(), 256, 256, QuantScheme::Q3H, 128).bitsPerWeight(), 3.5 + 0.5, 0.05);
  EXPECT_NEAR(quantize(big.data(), 256, 256, QuantScheme::E0M4, 128).bitsPerWeight(), 4.5, 1e-9);
}

TEST(Quant, ConstantGroupsAndBadArguments) {
  std::vector<float> w(64, 0.25f);
  for (auto s : {QuantScheme::E0M4, QuantScheme::Int4, QuantScheme::Q8, QuantScheme::W4A8, QuantScheme::Q3H}) {
    auto d = dequantize(quantize(w.data(), 64, 1, s, 16));
    for (float x : d) EXPECT_NEAR(x, 0.25f, 0.25f / 7 * 0.51f) << schemeName(s);
  }
  EXPECT_THROW(quantize(w.data(), 64, 1, QuantScheme::Int4, 0), Error);
  EXPECT_THROW(quantize(w.data(), 64, 1, QuantScheme::Q3H, 15), Error);
  EXPECT_THROW(parseScheme("fp3"), Error);
  EXPECT_EQ(parseScheme("e0m4"), QuantScheme::E0M4);
}

// The smallest group is one weight: its own scale and offset, so every weight comes back
// exactly; zero or fewer is refused.
TEST(Quant, GroupsOfOneKeepEveryWeight) {
  auto w = normalMatrix(8, 3, 5);
  for (auto s : {QuantScheme::E0M4, QuantScheme::Int4, QuantScheme::Q8}) {
    QuantOptions opt;
    opt.scheme = s;
    opt.group = 1;
    EXPECT_NO_THROW(checkOptions(opt)) << schemeName(s);
    auto d = dequantize(quantize(w.data(), 8, 3, s, 1));
    for (size_t i = 0; i < w.size(); ++i) EXPECT_NEAR(d[i], w[i], 1e-7f) << schemeName(s);
  }
  QuantOptions zero;
  zero.group = 0;
  EXPECT_THROW(checkOptions(zero), Error);
}

}  // namespace
}  // namespace tl
