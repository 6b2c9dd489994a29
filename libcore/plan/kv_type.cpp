#include "plan/kv_type.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "tensor/tensor.h"

namespace tl {

const char* kvTypeName(KvType t) { return t == KvType::F16 ? "f16" : t == KvType::Q8 ? "q8" : "f32"; }

std::optional<KvType> kvTypeNamed(const std::string& name) {
  for (KvType t : {KvType::F32, KvType::F16, KvType::Q8})
    if (name == kvTypeName(t)) return t;
  return std::nullopt;
}

namespace {
constexpr size_t kQ8BlockBytes = 4 + kKvQ8Block;  // the float scale, then the codes
}  // namespace

size_t kvBytes(KvType t, int64_t n) {
  const auto d = static_cast<size_t>(n);
  return t == KvType::F32 ? 4 * d : t == KvType::F16 ? 2 * d : d / kKvQ8Block * kQ8BlockBytes;
}

double kvElementBytes(KvType t) { return static_cast<double>(kvBytes(t, kKvQ8Block)) / kKvQ8Block; }

void encodeKvRows(KvType t, const float* in, size_t rows, int64_t D, uint8_t* out) {
  const size_t n = rows * static_cast<size_t>(D);
  if (t == KvType::F32) {
    std::memcpy(out, in, 4 * n);
  } else if (t == KvType::F16) {
    for (size_t i = 0; i < n; ++i) {
      const uint16_t h = floatToHalf(in[i]);
      std::memcpy(out + 2 * i, &h, 2);
    }
  } else {
    for (size_t b = 0; b < n / kKvQ8Block; ++b) {  // as common.cl's kv_q8_store
      const float* x = in + b * kKvQ8Block;
      uint8_t* o = out + b * kQ8BlockBytes;
      float amax = 0.0f;
      for (int64_t j = 0; j < kKvQ8Block; ++j) amax = std::max(amax, std::fabs(x[j]));
      const float d = amax / 127.0f, id = amax > 0.0f ? 127.0f / amax : 0.0f;
      std::memcpy(o, &d, 4);
      for (int64_t j = 0; j < kKvQ8Block; ++j)
        o[4 + j] = static_cast<uint8_t>(static_cast<int8_t>(std::clamp(std::nearbyint(x[j] * id), -127.0f, 127.0f)));
    }
  }
}

void decodeKvRows(KvType t, const uint8_t* in, size_t rows, int64_t D, float* out) {
  const size_t n = rows * static_cast<size_t>(D);
  if (t == KvType::F32) {
    std::memcpy(out, in, 4 * n);
  } else if (t == KvType::F16) {
    for (size_t i = 0; i < n; ++i) {
      uint16_t h;
      std::memcpy(&h, in + 2 * i, 2);
      out[i] = halfToFloat(h);
    }
  } else {
    for (size_t b = 0; b < n / kKvQ8Block; ++b) {
      const uint8_t* blk = in + b * kQ8BlockBytes;
      float d;
      std::memcpy(&d, blk, 4);
      for (int64_t j = 0; j < kKvQ8Block; ++j) out[b * kKvQ8Block + j] = static_cast<float>(static_cast<int8_t>(blk[4 + j])) * d;
    }
  }
}

}  // namespace tl
