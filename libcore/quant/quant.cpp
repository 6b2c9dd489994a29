#include "quant/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cli/error.h"

namespace tl {

QuantScheme parseScheme(const std::string& name) {
  if (name == "e0m4") return QuantScheme::E0M4;
  if (name == "int4") return QuantScheme::Int4;
  if (name == "q8") return QuantScheme::Q8;
  if (name == "w4a8") return QuantScheme::W4A8;
  if (name == "q3h") return QuantScheme::Q3H;
  throw Error("unknown scheme '" + name + "' (e0m4, int4, w4a8, q8, q3h)");
}

const char* schemeName(QuantScheme s) {
  switch (s) {
    case QuantScheme::E0M4: return "e0m4";
    case QuantScheme::Int4: return "int4";
    case QuantScheme::Q8: return "q8";
    case QuantScheme::W4A8: return "w4a8";
    case QuantScheme::Q3H: return "q3h";
  }
  return "?";
}

int schemeLevels(QuantScheme s) {
  switch (s) {
    case QuantScheme::Q8: return 256;
    case QuantScheme::Q3H: return 11;
    default: return 16;
  }
}

namespace {

float bitsToFloat(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

uint32_t floatToBits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

// E0M4 level q as the kernels compute it: exponent of 2, q in the top fraction bits.
float e0m4Level(int q) { return bitsToFloat(0x40000000u | (static_cast<uint32_t>(q) << 19)); }

int64_t rowBytesFor(QuantScheme s, int64_t K) {
  switch (s) {
    case QuantScheme::Q8: return K;
    case QuantScheme::Q3H: return ((K + 1) / 2 * 7 + 7) / 8 + 1;  // one spare byte: kernels read two at a time
    default: return (K + 1) / 2;
  }
}

void putCode(QuantizedMatrix& q, int64_t k, int64_t n, int c) {
  uint8_t* row = q.packed.data() + n * q.rowBytes;
  switch (q.scheme) {
    case QuantScheme::Q8:
      row[k] = static_cast<uint8_t>(static_cast<int8_t>(c));
      break;
    case QuantScheme::Q3H: {
      // Codes arrive in k order; a pair is written when its second code is known
      // (a ragged odd K pairs its last code with 0).
      const int64_t p = k / 2;
      const int64_t bit = 7 * p;
      uint16_t pair = k % 2 == 0 ? static_cast<uint16_t>(c * 11) : static_cast<uint16_t>(c);
      uint16_t cur = static_cast<uint16_t>(row[bit / 8] | (row[bit / 8 + 1] << 8));
      uint16_t v = static_cast<uint16_t>(((cur >> (bit % 8)) & 0x7f) + pair);
      cur = static_cast<uint16_t>((cur & ~(0x7f << (bit % 8))) | (v << (bit % 8)));
      row[bit / 8] = static_cast<uint8_t>(cur);
      row[bit / 8 + 1] = static_cast<uint8_t>(cur >> 8);
      break;
    }
    default:
      row[k / 2] = static_cast<uint8_t>(k % 2 == 0 ? (row[k / 2] & 0xf0) | (c & 0xf) : (row[k / 2] & 0x0f) | ((c & 0xf) << 4));
      break;
  }
}

}  // namespace

int code(const QuantizedMatrix& q, int64_t k, int64_t n) {
  const uint8_t* row = q.packed.data() + n * q.rowBytes;
  switch (q.scheme) {
    case QuantScheme::Q8: return static_cast<int8_t>(row[k]);
    case QuantScheme::Q3H: {
      const int64_t bit = 7 * (k / 2);
      int pair = ((row[bit / 8] | (row[bit / 8 + 1] << 8)) >> (bit % 8)) & 0x7f;
      return k % 2 == 0 ? pair / 11 : pair % 11;
    }
    case QuantScheme::W4A8: {
      int v = (row[k / 2] >> (4 * (k % 2))) & 0xf;
      return v >= 8 ? v - 16 : v;
    }
    default: return (row[k / 2] >> (4 * (k % 2))) & 0xf;
  }
}

double QuantizedMatrix::bitsPerWeight() const {
  return (8.0 * static_cast<double>(packed.size()) + 64.0 * static_cast<double>(scale.size())) /
         static_cast<double>(K * N);
}

QuantizedMatrix quantize(const float* w, int64_t K, int64_t N, QuantScheme scheme, int64_t group) {
  if (group <= 0) throw Error("group size must be positive, not " + std::to_string(group));
  if (scheme == QuantScheme::Q3H && group % 2) throw Error("q3h pairs weights: the group size must be even");
  QuantizedMatrix q;
  q.scheme = scheme;
  q.K = K;
  q.N = N;
  q.group = group;
  q.rowBytes = rowBytesFor(scheme, K);
  q.packed.assign(static_cast<size_t>(N * q.rowBytes), 0);
  q.scale.assign(static_cast<size_t>(N * q.groups()), 0.0f);
  q.offset.assign(static_cast<size_t>(N * q.groups()), 0.0f);
  for (int64_t n = 0; n < N; ++n) {
    for (int64_t g = 0; g < q.groups(); ++g) {
      const int64_t k0 = g * group, k1 = std::min(K, k0 + group);
      float lo = INFINITY, hi = -INFINITY, amax = 0;
      for (int64_t k = k0; k < k1; ++k) {
        float x = w[k * N + n];
        lo = std::min(lo, x);
        hi = std::max(hi, x);
        amax = std::max(amax, std::fabs(x));
      }
      float& s = q.scale[n * q.groups() + g];
      float& o = q.offset[n * q.groups() + g];
      std::vector<int> codes;
      switch (scheme) {
        case QuantScheme::E0M4: {
          // Map [lo, hi] onto [2, 4 - eps]: 16 levels 1/8 apart; the top sixteenth of
          // the range rounds to the last level.
          const float range = hi - lo;
          const float mul = range > 0 ? (2.0f - 1.0f / 64) / range : 0.0f;
          float bias = 2.0f - lo * mul;
          // Zero the bias's dropped fraction bits (when it lies in [2, 4), i.e. the
          // group spans 0) so that w = 0 lands exactly on a level.
          if (bias >= 2.0f && bias < 4.0f) bias = bitsToFloat(floatToBits(bias) & 0xfff80000u);
          s = mul > 0 ? 1.0f / mul : 0.0f;
          o = mul > 0 ? -bias / mul : lo;
          for (int64_t k = k0; k < k1; ++k) {
            float x1 = w[k * N + n] * mul + bias;
            // Top 4 fraction bits of x1 plus the next one for rounding, capped at 15;
            // computed arithmetically so values just under 2 (after the bias change) clamp to 0.
            int y = static_cast<int>(std::floor((x1 - 2.0f) * 16.0f));
            int c = std::clamp((y >> 1) + (y & 1), 0, 15);
            if (x1 < 2.0f) c = 0;
            codes.push_back(c);
          }
          break;
        }
        case QuantScheme::Int4:
        case QuantScheme::Q3H: {
          // The range always holds 0, so the integer zero point stays within the codes
          // (ONNX Runtime's MatMulNBits does the same).
          const int top = schemeLevels(scheme) - 1;
          const float l = std::min(lo, 0.0f), h = std::max(hi, 0.0f);
          const float step = h > l ? (h - l) / top : 1.0f;
          // Integer zero point, as the paper's INT4 baseline: 0 is exact.
          const int zero = std::clamp(static_cast<int>(std::lround(-l / step)), 0, top);
          s = step;
          o = -zero * step;
          for (int64_t k = k0; k < k1; ++k)
            codes.push_back(std::clamp(static_cast<int>(std::lround(w[k * N + n] / step)) + zero, 0, top));
          break;
        }
        case QuantScheme::Q8:
        case QuantScheme::W4A8: {
          const int top = scheme == QuantScheme::Q8 ? 127 : 7;
          s = amax > 0 ? amax / top : 1.0f;
          o = 0.0f;
          for (int64_t k = k0; k < k1; ++k)
            codes.push_back(std::clamp(static_cast<int>(std::lround(w[k * N + n] / s)), -top, top));
          break;
        }
      }
      for (int64_t k = k0; k < k1; ++k) putCode(q, k, n, codes[static_cast<size_t>(k - k0)]);
    }
  }
  return q;
}

std::vector<float> dequantize(const QuantizedMatrix& q) {
  std::vector<float> w(static_cast<size_t>(q.K * q.N));
  for (int64_t n = 0; n < q.N; ++n) {
    for (int64_t k = 0; k < q.K; ++k) {
      const int64_t gi = n * q.groups() + k / q.group;
      const int c = code(q, k, n);
      const float f = q.scheme == QuantScheme::E0M4 ? e0m4Level(c) : static_cast<float>(c);
      w[k * q.N + n] = f * q.scale[gi] + q.offset[gi];
    }
  }
  return w;
}

double meanAbsError(const float* a, const float* b, size_t n) {
  double s = 0;
  for (size_t i = 0; i < n; ++i) s += std::fabs(double(a[i]) - double(b[i]));
  return n ? s / n : 0;
}

}  // namespace tl
