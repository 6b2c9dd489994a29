#include "ctxswap/chunk_file.h"

#include <zstd.h>

#include <cstring>
#include <vector>

#include "ctxswap/durable_file.h"

namespace tl {

namespace {

constexpr char kMagic[8] = {'T', 'L', 'K', 'V', 'C', 'H', 'K', '1'};
constexpr uint32_t kVersion = 2;
constexpr size_t kHeader = 56;
constexpr int kZstdLevel = 1;  // the fastest: written ahead of time, but on the device's host

void putFloats(std::vector<uint8_t>& out, const std::vector<float>& f) {
  for (float x : f) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    putLE(out, u);
  }
}

void getFloats(const uint8_t* p, std::vector<float>& f, size_t n) {
  f.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = getLE<uint32_t>(p + 4 * i);
    std::memcpy(&f[i], &u, 4);
  }
}

}  // namespace

std::vector<uint8_t> zstdFrame(const std::vector<uint8_t>& codes) {
  std::vector<uint8_t> frame(ZSTD_compressBound(codes.size()));
  const size_t n = ZSTD_compress(frame.data(), frame.size(), codes.data(), codes.size(), kZstdLevel);
  frame.resize(ZSTD_isError(n) ? 0 : n);
  return frame;
}

std::vector<uint8_t> chunkFileBytes(const ChunkId& id, const KvChunk& c, const KeepCompressed& keep) {
  std::vector<uint8_t> packed;
  if (keep && !c.codes.empty()) {
    packed = zstdFrame(c.codes);
    if (packed.empty() || packed.size() >= c.codes.size() || !keep(c.codes.size(), packed.size())) packed.clear();
  }
  std::vector<uint8_t> bytes(kMagic, kMagic + 8);
  putLE(bytes, kVersion);
  putLE(bytes, id.model);
  putLE(bytes, id.context);
  putLE(bytes, id.index);
  putLE(bytes, id.first);
  putLE(bytes, static_cast<uint32_t>(c.tokens));
  putLE(bytes, static_cast<uint32_t>(c.channels));
  putLE(bytes, static_cast<uint32_t>(c.bits));
  putLE(bytes, static_cast<uint32_t>(c.codes.size()));
  putLE(bytes, static_cast<uint32_t>(packed.empty() ? c.codes.size() : packed.size()));
  putFloats(bytes, c.lo);
  putFloats(bytes, c.step);
  const std::vector<uint8_t>& codes = packed.empty() ? c.codes : packed;
  bytes.insert(bytes.end(), codes.begin(), codes.end());
  return bytes;
}

bool writeChunkFile(const std::string& path, const ChunkId& id, const KvChunk& c, std::string* error,
                    const KeepCompressed& keep) {
  return writeDurably(path, chunkFileBytes(id, c, keep), error);
}

const char* chunkReadName(ChunkRead r) {
  switch (r) {
    case ChunkRead::Ok: return "ok";
    case ChunkRead::Missing: return "missing";
    case ChunkRead::Corrupt: return "corrupt";
    case ChunkRead::OtherModel: return "another model's";
    case ChunkRead::Mismatch: return "another chunk's";
  }
  return "?";
}

ChunkRead readChunkFile(const std::string& path, const ChunkId& id, KvChunk* chunk) {
  std::vector<uint8_t> b;
  bool missing = false;
  if (!readDurably(path, &b, &missing)) return missing ? ChunkRead::Missing : ChunkRead::Corrupt;
  if (b.size() < kHeader || std::memcmp(b.data(), kMagic, 8) != 0 || getLE<uint32_t>(b.data() + 8) != kVersion)
    return ChunkRead::Corrupt;
  const uint64_t channels = getLE<uint32_t>(b.data() + 40), codeBytes = getLE<uint32_t>(b.data() + 48);
  const uint64_t stored = getLE<uint32_t>(b.data() + 52);
  const uint32_t tokens = getLE<uint32_t>(b.data() + 36), bits = getLE<uint32_t>(b.data() + 44);
  if ((bits != 32 && bits != 8 && bits != 4 && bits != 2) || tokens == 0 || channels == 0 ||
      codeBytes != (tokens * channels * bits + 7) / 8 || stored > codeBytes || b.size() != kHeader + 8 * channels + stored)
    return ChunkRead::Corrupt;
  if (getLE<uint64_t>(b.data() + 12) != id.model) return ChunkRead::OtherModel;
  if (getLE<uint64_t>(b.data() + 20) != id.context || getLE<uint32_t>(b.data() + 28) != id.index ||
      getLE<uint32_t>(b.data() + 32) != id.first)
    return ChunkRead::Mismatch;
  chunk->tokens = tokens;
  chunk->channels = static_cast<int64_t>(channels);
  chunk->bits = static_cast<int>(bits);
  getFloats(b.data() + kHeader, chunk->lo, channels);
  getFloats(b.data() + kHeader + 4 * channels, chunk->step, channels);
  const uint8_t* codes = b.data() + kHeader + 8 * channels;
  if (stored == codeBytes) {
    chunk->codes.assign(codes, codes + stored);
  } else {
    chunk->codes.resize(codeBytes);
    const size_t n = ZSTD_decompress(chunk->codes.data(), codeBytes, codes, stored);
    if (ZSTD_isError(n) || n != codeBytes) return ChunkRead::Corrupt;
  }
  return ChunkRead::Ok;
}

}  // namespace tl
