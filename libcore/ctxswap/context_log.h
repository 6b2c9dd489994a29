// A context's durable record in the swap directory (issue 11): its owner and its tokens,
// written at the end of every call, so that a restarted service recovers every context
// that finished a call (its KV chunks are read back or recomputed from these tokens).
//
//   offset  size  field
//   0       8     magic "TLCTXLG1"
//   8       4     version (1)
//   12      8     model fingerprint
//   20      8     context id
//   28      4     owner bytes, then the owner
//   ..      4     tokens, then each token as an int32
//   end-8   8     FNV-1a 64 of every byte before it (durable_file.h)
//
// Files: DIR/ctx-ID.log, and its chunks DIR/ctx-ID-chunk-INDEX.kv (chunk_file.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tl {

struct ContextRecord {
  uint64_t id = 0;
  std::string owner;
  std::vector<int64_t> tokens;
};

std::string contextLogPath(const std::string& dir, uint64_t id);
std::string chunkFilePath(const std::string& dir, uint64_t id, uint32_t index);

// The record's file but its checksum (DurableWrites adds it).
std::vector<uint8_t> contextRecordBytes(uint64_t model, const ContextRecord& r);
// ... written durably; false with *error when the file system refuses (the record stays
// as it was).
bool writeContextRecord(const std::string& dir, uint64_t model, const ContextRecord& r, std::string* error);
// Every context whose record in `dir` is whole and this model's, by id; each other
// ctx-*.log is named in *skipped with the reason. Throws tl::Error when `dir` cannot be
// read at all.
std::vector<ContextRecord> recoverContexts(const std::string& dir, uint64_t model, std::vector<std::string>* skipped);

}  // namespace tl
