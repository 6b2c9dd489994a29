// Which missing chunks a context switch reads from disk and which it recomputes
// (LLMS 3.3, eq. 4; issue 11). Both go on at once, so a load takes the longer of the two;
// linear cost models, measured once per device and model (tl-ctxswap calibrate), predict
// each.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tl {

struct LinearCost {  // seconds = fixed + per * amount (none: 0)
  double fixed = 0, per = 0;
  double at(double amount) const { return amount > 0 ? fixed + per * amount : 0.0; }
};
// Least-squares line through (x, y) points (at least two distinct x): the calibration fit.
LinearCost fitLinear(const std::vector<double>& x, const std::vector<double>& y);

struct LoadPlan {
  std::vector<bool> recompute;  // per missing chunk: recomputed (true) or read
  double seconds = 0;           // the predicted delay: max(recompute, reads)
};

// chunkBytes: each missing chunk's bytes on disk. recompute: seconds for x chunks; io:
// seconds for m bytes. Recomputing costs the same per chunk whatever its bits, and
// saves reading its bytes, so the heaviest chunks are the ones worth recomputing: the plan
// recomputes the k heaviest for the best k (eq. 4 over the splits that can be optimal).
LoadPlan planLoad(const std::vector<size_t>& chunkBytes, const LinearCost& recompute, const LinearCost& io);

}  // namespace tl
