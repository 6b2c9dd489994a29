// The cost models of a load (load_plan.h), measured once per device and model (LLMS 3.3 i,
// `tl-ctxswap calibrate` in issue 11): recompute seconds against chunks, reads against
// bytes, each a least-squares line through a few measured points (through the origin
// where the fixed cost would come out below 0).
#pragma once

#include <cstdint>
#include <string>

#include "ctxswap/load_plan.h"
#include "lm/causal_lm.h"
#include "runtime/executor.h"

namespace tl {

struct LoadCosts {
  LinearCost recompute;  // seconds for x chunks of `chunk` tokens
  LinearCost read;       // seconds to read m bytes of chunk files from `dir`
  LinearCost unzstd;     // seconds to decompress the zstd frame of m code bytes (none: chunks kept raw)
};

// The costs as a small text file (`tl-ctxswap calibrate -o FILE`, `replay --costs FILE`):
//   # tl-ctxswap costs 1 chunk=16
//   recompute FIXED_S PER_CHUNK_S
//   read FIXED_S PER_BYTE_S
//   unzstd FIXED_S PER_BYTE_S     (optional: without it, chunk files are never compressed)
std::string costsText(const LoadCosts& c, int64_t chunk);
// Throws tl::Error naming the line for a malformed file, or one made for another chunk size.
LoadCosts parseCosts(const std::string& text, int64_t chunk);

// Times recomputing 1, 2, 4 and 8 chunks after a context of 8 chunks, reading chunk files
// of those many chunks (written to `dir` at 8 bits, then removed), and decompressing their
// codes' zstd frames. Each point is the fastest of `runs`. The reads go through the page
// cache unless the caller drops it.
LoadCosts calibrateLoad(Executor& ex, const CausalLm& lm, const std::string& dir, int64_t chunk, int runs = 3);

}  // namespace tl
