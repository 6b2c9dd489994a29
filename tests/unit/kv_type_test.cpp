// The in-place caches' element types: their bytes, and the host's conversion of rows to
// and from them (what tl-run writes into a cache and reads back).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "plan/kv_type.h"

namespace tl {
namespace {

TEST(KvType, NamesAndBytes) {
  for (KvType t : {KvType::F32, KvType::F16, KvType::Q8}) EXPECT_EQ(kvTypeNamed(kvTypeName(t)), t);
  EXPECT_FALSE(kvTypeNamed("q4"));
  EXPECT_EQ(kvBytes(KvType::F32, 64), 256u);
  EXPECT_EQ(kvBytes(KvType::F16, 64), 128u);
  EXPECT_EQ(kvBytes(KvType::Q8, 64), 72u);  // two blocks: a float scale and 32 codes each
  EXPECT_DOUBLE_EQ(kvElementBytes(KvType::Q8), 1.125);
}

// q8: each element within half a step (its block's largest magnitude / 127) of its value,
// the largest exact up to the scale's rounding, a zero block zeros; fp16 within 2^-11
// relative; fp32 exact.
TEST(KvType, RowsRoundTrip) {
  const int64_t D = 64;
  const size_t rows = 3;
  std::vector<float> x(rows * D);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (auto& v : x) v = normal(rng);
  x[5] = 40.0f;                                               // an outlier in the first block
  for (int64_t d = 0; d < 32; ++d) x[2 * D + d] = 0.0f;       // a zero block
  for (KvType t : {KvType::F32, KvType::F16, KvType::Q8}) {
    std::vector<uint8_t> held(kvBytes(t, D) * rows);
    std::vector<float> back(x.size());
    encodeKvRows(t, x.data(), rows, D, held.data());
    decodeKvRows(t, held.data(), rows, D, back.data());
    for (size_t b = 0; b < x.size() / 32; ++b) {
      float amax = 0.0f;
      for (size_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[32 * b + j]));
      for (size_t j = 0; j < 32; ++j) {
        const size_t i = 32 * b + j;
        const float bound = t == KvType::F32 ? 0.0f
                            : t == KvType::F16 ? std::fabs(x[i]) * 0x1p-11f
                                               : amax / 254.0f * (1.0f + 1e-5f);
        EXPECT_LE(std::fabs(back[i] - x[i]), bound) << kvTypeName(t) << " element " << i;
      }
    }
    EXPECT_NEAR(back[5], 40.0f, 40.0f * 1e-6f) << kvTypeName(t);
    for (int64_t d = 0; d < 32; ++d) EXPECT_EQ(back[2 * D + d], 0.0f) << kvTypeName(t);
  }
}

}  // namespace
}  // namespace tl
