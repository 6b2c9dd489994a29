// A swapped-out KV chunk on disk (issue 11's crash safety). One file per chunk:
//
//   offset  size  field
//   0       8     magic "TLKVCHK1"
//   8       4     version (2), little-endian like every field
//   12      8     model fingerprint (whose caches these are)
//   20      8     context id
//   28      4     chunk index in the context
//   32      4     first token
//   36      4     tokens
//   40      4     channels
//   44      4     bits (32, 8, 4 or 2)
//   48      4     code bytes
//   52      4     stored bytes: the code bytes (codes as they are), or fewer (a zstd frame of them)
//   56      -     lo (channels floats), step (channels floats), codes (kv_chunk.h)
//   end-8   8     FNV-1a 64 of every byte before it
//
// Written durably (durable_file.h: a crash leaves the old file or the new one, never a
// torn one). A read checks every field against what the caller expects and the checksum;
// any mismatch is reported, never used: the caller recomputes the chunk.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ctxswap/kv_chunk.h"

namespace tl {

struct ChunkId {
  uint64_t model = 0, context = 0;
  uint32_t index = 0, first = 0;  // the chunk's place, and its first token in the context
};

// The zstd frame of a chunk's codes, as chunk files keep them (empty if zstd failed).
std::vector<uint8_t> zstdFrame(const std::vector<uint8_t>& codes);

// Whether to keep a chunk's codes zstd-compressed, given their bytes raw and compressed
// (ContextStore: when reading the bytes saved would cost more than decompressing them).
using KeepCompressed = std::function<bool(size_t raw, size_t compressed)>;

// The chunk's file but its checksum (DurableWrites adds it), its codes compressed where
// `keep` says so (empty: never tried).
std::vector<uint8_t> chunkFileBytes(const ChunkId& id, const KvChunk& chunk, const KeepCompressed& keep = {});
// ... written durably; false with *error set when the file system refuses (a full or
// read-only disk): the caller keeps the chunk in memory or recomputes it later.
bool writeChunkFile(const std::string& path, const ChunkId& id, const KvChunk& chunk, std::string* error,
                    const KeepCompressed& keep = {});

enum class ChunkRead { Ok, Missing, Corrupt, OtherModel, Mismatch };
const char* chunkReadName(ChunkRead r);
// Reads the chunk `id` from `path` into *chunk when the result is Ok. OtherModel: another
// model's fingerprint; Mismatch: another context, index or first token; Corrupt: a bad
// magic, version, size or checksum, or a zstd frame that does not give the codes.
ChunkRead readChunkFile(const std::string& path, const ChunkId& id, KvChunk* chunk);

}  // namespace tl
