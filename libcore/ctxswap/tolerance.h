// Tolerance-aware compression (LLMS 3.2, issue 11): how many bits each chunk of a
// context keeps, from how much attention its tokens draw.
#pragma once

#include <cstdint>
#include <vector>

namespace tl {

// Information density of each chunk of `chunk` tokens (LLMS eq. 1). keyMass[t] is the
// attention mass token t received, summed over `layers` layers, `heads` heads and the
// `rows` query rows (positions 0 .. rows - 1) under a causal mask. A token's density is
// its mass over the layers, heads and rows that could attend to it (rows - t of them:
// the paper's R - row is the number of rows at or after the column), and a chunk's the
// mean over its tokens (the last chunk may be short).
std::vector<double> chunkDensities(const std::vector<double>& keyMass, int64_t chunk, int64_t layers, int64_t heads);

// Bits for each chunk (LLMS eq. 2-3): `levels` are the widths from the most (every chunk
// is written at levels[0]); the chunks ranked by density take them in that order, the
// densest the most bits, with the counts at each width chosen so that the mean of
// bits / levels[0] is at most `ratio` and the kept information, the sum of density x
// bits / levels[0], is largest. (The paper writes eq. 3's weight as 1 / ratio; as
// written it would give the densest chunks the fewest bits, against its own rationale,
// so the kept fraction is the weight here.) Exhaustive over the counts: up to 3 levels.
// Throws tl::Error when even the smallest width exceeds the ratio.
std::vector<int> allocateBits(const std::vector<double>& density, double ratio, const std::vector<int>& levels);

}  // namespace tl
