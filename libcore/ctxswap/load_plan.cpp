#include "ctxswap/load_plan.h"

#include <algorithm>
#include <numeric>

#include "cli/error.h"

namespace tl {

LinearCost fitLinear(const std::vector<double>& x, const std::vector<double>& y) {
  if (x.size() != y.size() || x.size() < 2) throw Error("a cost line needs at least two measured points");
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n, my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (sxx == 0) throw Error("a cost line needs measurements at two different sizes");
  return {my - sxy / sxx * mx, sxy / sxx};
}

LoadPlan planLoad(const std::vector<size_t>& chunkBytes, const LinearCost& recompute, const LinearCost& io) {
  std::vector<size_t> order(chunkBytes.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return chunkBytes[a] > chunkBytes[b]; });
  double left = 0;  // bytes read when the first k are recomputed
  for (size_t b : chunkBytes) left += static_cast<double>(b);
  size_t bestK = 0;
  double best = io.at(left);
  for (size_t k = 1; k <= order.size(); ++k) {
    left -= static_cast<double>(chunkBytes[order[k - 1]]);
    const double t = std::max(recompute.at(static_cast<double>(k)), io.at(left));
    if (t < best) {
      best = t;
      bestK = k;
    }
  }
  LoadPlan plan;
  plan.recompute.assign(chunkBytes.size(), false);
  for (size_t k = 0; k < bestK; ++k) plan.recompute[order[k]] = true;
  plan.seconds = best;
  return plan;
}

}  // namespace tl
