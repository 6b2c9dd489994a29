#include "ctxswap/chunk_memory.h"

#include <algorithm>
#include <string>

#include "cli/error.h"

namespace tl {

void ChunkMemory::claim(const ChunkKey& k, size_t bytes, int bits) {
  auto it = chunks_.find(k);
  const size_t before = it == chunks_.end() ? 0 : it->second.bytes;
  if (used_ - before + bytes > budget_)
    throw Error("claiming " + std::to_string(bytes) + " bytes would hold " + std::to_string(used_ - before + bytes) +
                " of a budget of " + std::to_string(budget_) + ": reclaim first");
  used_ = used_ - before + bytes;
  chunks_[k] = Held{bytes, bits, ++clock_};
}

void ChunkMemory::touch(const ChunkKey& k) {
  auto it = chunks_.find(k);
  if (it != chunks_.end()) it->second.used = ++clock_;
}

void ChunkMemory::release(const ChunkKey& k) {
  auto it = chunks_.find(k);
  if (it == chunks_.end()) return;
  used_ -= it->second.bytes;
  chunks_.erase(it);
}

void ChunkMemory::unlock(uint64_t context) {
  auto it = locks_.find(context);
  if (it != locks_.end() && --it->second == 0) locks_.erase(it);
}

bool ChunkMemory::reclaim(size_t bytes, std::vector<ChunkKey>* out) const {
  out->clear();
  if (bytes > budget_) return false;
  std::vector<std::pair<ChunkKey, const Held*>> order;
  for (const auto& [k, h] : chunks_)
    if (!locks_.count(k.context)) order.emplace_back(k, &h);
  std::sort(order.begin(), order.end(), [](const auto& a, const auto& b) {
    return a.second->bits != b.second->bits ? a.second->bits > b.second->bits : a.second->used < b.second->used;
  });
  size_t freed = 0;
  for (const auto& [k, h] : order) {
    if (used_ - freed + bytes <= budget_) break;
    out->push_back(k);
    freed += h->bytes;
  }
  if (used_ - freed + bytes <= budget_) return true;
  out->clear();
  return false;
}

}  // namespace tl
