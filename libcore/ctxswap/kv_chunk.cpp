#include "ctxswap/kv_chunk.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "cli/error.h"

namespace tl {

namespace {

void checkBits(int bits) {
  if (bits != 32 && bits != 8 && bits != 4 && bits != 2)
    throw Error("a KV chunk is stored at 32 (floats), 8, 4 or 2 bits a value, not " + std::to_string(bits));
}

// Codes never straddle a byte: 8 / bits of them share one.
int codeAt(const KvChunk& c, int64_t i) {
  const int64_t bit = i * c.bits;
  return (c.codes[static_cast<size_t>(bit / 8)] >> (bit % 8)) & ((1 << c.bits) - 1);
}

}  // namespace

KvChunk compressChunk(const float* values, int64_t tokens, int64_t channels, int bits) {
  checkBits(bits);
  if (tokens < 1 || channels < 1) throw Error("a KV chunk needs at least one token and one channel");
  KvChunk c;
  c.tokens = tokens;
  c.channels = channels;
  c.bits = bits;
  c.lo.assign(static_cast<size_t>(channels), 0.0f);
  c.step.assign(static_cast<size_t>(channels), 0.0f);
  c.codes.assign(static_cast<size_t>((tokens * channels * bits + 7) / 8), 0);
  if (bits == 32) {
    std::memcpy(c.codes.data(), values, c.codes.size());
    return c;
  }
  const int top = (1 << bits) - 1;
  for (int64_t ch = 0; ch < channels; ++ch) {
    float lo = values[ch], hi = values[ch];
    for (int64_t t = 1; t < tokens; ++t) {
      lo = std::min(lo, values[t * channels + ch]);
      hi = std::max(hi, values[t * channels + ch]);
    }
    const float step = (hi - lo) / static_cast<float>(top);
    c.lo[static_cast<size_t>(ch)] = lo;
    c.step[static_cast<size_t>(ch)] = step;
    for (int64_t t = 0; t < tokens; ++t) {
      const int64_t i = t * channels + ch;
      const int q = step > 0.0f ? static_cast<int>(std::lround((values[i] - lo) / step)) : 0;
      const int64_t bit = i * bits;
      c.codes[static_cast<size_t>(bit / 8)] |= static_cast<uint8_t>(std::clamp(q, 0, top) << (bit % 8));
    }
  }
  return c;
}

std::vector<float> decompressChunk(const KvChunk& c) {
  std::vector<float> out(static_cast<size_t>(c.tokens * c.channels));
  if (c.bits == 32) {
    std::memcpy(out.data(), c.codes.data(), c.codes.size());
    return out;
  }
  for (int64_t t = 0; t < c.tokens; ++t)
    for (int64_t ch = 0; ch < c.channels; ++ch) {
      const int64_t i = t * c.channels + ch;
      out[static_cast<size_t>(i)] = c.lo[static_cast<size_t>(ch)] + static_cast<float>(codeAt(c, i)) * c.step[static_cast<size_t>(ch)];
    }
  return out;
}

KvChunk recompressChunk(const KvChunk& chunk, int bits) {
  const std::vector<float> values = decompressChunk(chunk);
  return compressChunk(values.data(), chunk.tokens, chunk.channels, bits);
}

}  // namespace tl
