// The KV chunks a service holds in memory under a byte budget (LLMS 3.1 and 3.4, issue
// 11). Claim records a chunk in memory; reclaim picks which chunks leave (after their
// files are written: AoT swapping makes that free) so that a claim fits. The pick is the
// LCTRU order: chunks kept at more bits first (heavy chunks: the swap-recompute pipeline
// loads fewer, larger chunks faster, LLMS 3.4 ii), least recently used first among the
// same bits, and never a chunk of a locked context (the one a call is running on).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <vector>

namespace tl {

struct ChunkKey {
  uint64_t context = 0;
  uint32_t index = 0;
  bool operator<(const ChunkKey& o) const { return context != o.context ? context < o.context : index < o.index; }
  bool operator==(const ChunkKey& o) const { return context == o.context && index == o.index; }
};

class ChunkMemory {
 public:
  explicit ChunkMemory(size_t budget) : budget_(budget) {}

  size_t budget() const { return budget_; }
  size_t used() const { return used_; }
  bool holds(const ChunkKey& k) const { return chunks_.count(k) != 0; }

  // Claims memory for a chunk (or resizes one held, at other bits), used now. Throws
  // tl::Error when it would take the bytes held over the budget: reclaim first.
  void claim(const ChunkKey& k, size_t bytes, int bits);
  void touch(const ChunkKey& k);    // a call used it now
  void release(const ChunkKey& k);  // swapped out or deleted: its bytes are free
  void lock(uint64_t context) { ++locks_[context]; }
  void unlock(uint64_t context);

  // The chunks to release, in order, so that `bytes` more fit under the budget; false
  // (and *out empty) when even every unlocked chunk would not make the room.
  bool reclaim(size_t bytes, std::vector<ChunkKey>* out) const;

 private:
  struct Held {
    size_t bytes = 0;
    int bits = 0;
    uint64_t used = 0;  // the clock at the last claim or touch
  };
  size_t budget_, used_ = 0;
  uint64_t clock_ = 0;
  std::map<ChunkKey, Held> chunks_;
  std::map<uint64_t, int> locks_;
};

}  // namespace tl
