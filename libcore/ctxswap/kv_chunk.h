// KV cache chunks (LLMS 3.1-3.2, issue 11): the unit tl-ctxswap keeps in memory, swaps
// and recomputes. A chunk is `tokens` consecutive tokens of one context with every
// layer's k and v rows of them: `channels` floats per token (each cache's heads x head
// dims, caches in order), token-major.
//
// Compression is channel-wise linear quantization: each channel's values over the
// chunk's tokens map onto 2^bits levels from their minimum to their maximum, so a
// channel keeps its own range (k channels differ by orders of magnitude). Every chunk is
// written at 8 bits; tolerance.h decides which go down to 4 or 2. At 32 bits the codes
// are the floats themselves (the uncompressed baselines; lo and step stay 0).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tl {

struct KvChunk {
  int64_t tokens = 0, channels = 0;
  int bits = 8;                 // 32 (floats), 8, 4 or 2 bits a value
  std::vector<float> lo, step;  // per channel: value = lo + code * step
  std::vector<uint8_t> codes;   // value (t, c) is code t * channels + c, `bits` wide, low bits first

  // Bytes it holds: the codes and two floats a channel.
  size_t bytes() const { return codes.size() + (lo.size() + step.size()) * sizeof(float); }
};

// values: tokens x channels, token-major. Throws tl::Error for bits other than 32, 8, 4, 2.
KvChunk compressChunk(const float* values, int64_t tokens, int64_t channels, int bits);
// The values it stands for, tokens x channels.
std::vector<float> decompressChunk(const KvChunk& chunk);
// The chunk at fewer bits, from its own values (what a chunk written at 8 bits becomes).
KvChunk recompressChunk(const KvChunk& chunk, int bits);

}  // namespace tl
