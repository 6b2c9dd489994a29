#include "ctxswap/tolerance.h"

#include <algorithm>
#include <numeric>

#include "cli/error.h"

namespace tl {

std::vector<double> chunkDensities(const std::vector<double>& keyMass, int64_t chunk, int64_t layers, int64_t heads) {
  if (chunk < 1 || layers < 1 || heads < 1) throw Error("chunk densities need a positive chunk size, layers and heads");
  const int64_t rows = static_cast<int64_t>(keyMass.size());
  std::vector<double> out;
  for (int64_t p = 0; p < rows; p += chunk) {
    const int64_t q = std::min(rows, p + chunk);
    double sum = 0;
    for (int64_t t = p; t < q; ++t) sum += keyMass[static_cast<size_t>(t)] / static_cast<double>(layers * heads * (rows - t));
    out.push_back(sum / static_cast<double>(q - p));
  }
  return out;
}

std::vector<int> allocateBits(const std::vector<double>& density, double ratio, const std::vector<int>& levels) {
  if (levels.empty() || levels.size() > 3) throw Error("tolerance-aware compression takes 1 to 3 widths");
  if (!std::is_sorted(levels.rbegin(), levels.rend()) || levels.back() < 1)
    throw Error("the widths must be positive and given from the most bits down");
  const int64_t n = static_cast<int64_t>(density.size());
  const double full = levels[0];
  if (levels.back() / full > ratio + 1e-12)
    throw Error("a ratio of " + std::to_string(ratio) + " is under what " + std::to_string(levels.back()) + " bits of " +
                std::to_string(levels[0]) + " reach");
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return density[a] > density[b]; });
  std::vector<double> prefix(static_cast<size_t>(n) + 1, 0.0);  // densities of the top i chunks
  for (int64_t i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + density[order[i]];
  // counts[w]: chunks at levels[w], in rank order; the last level takes the rest.
  std::vector<int64_t> best, counts(levels.size(), 0);
  double bestLoss = 0;
  const double budget = ratio * full * static_cast<double>(n) + 1e-9;
  auto search = [&](auto&& self, size_t w, int64_t from) -> void {
    if (w + 1 == levels.size()) {
      counts[w] = n - from;
      double bits = 0, loss = 0;
      int64_t at = 0;
      for (size_t i = 0; i < levels.size(); ++i) {
        bits += static_cast<double>(levels[i]) * static_cast<double>(counts[i]);
        loss += (prefix[at + counts[i]] - prefix[at]) / static_cast<double>((int64_t{1} << levels[i]) - 1);
        at += counts[i];
      }
      if (bits <= budget && (best.empty() || loss < bestLoss)) {
        bestLoss = loss;
        best = counts;
      }
      return;
    }
    for (int64_t c = 0; from + c <= n; ++c) {
      counts[w] = c;
      self(self, w + 1, from + c);
    }
  };
  search(search, 0, 0);
  std::vector<int> bits(static_cast<size_t>(n));
  int64_t at = 0;
  for (size_t w = 0; w < levels.size(); ++w)
    for (int64_t i = 0; i < best[w]; ++i) bits[static_cast<size_t>(order[at++])] = levels[w];
  return bits;
}

}  // namespace tl
