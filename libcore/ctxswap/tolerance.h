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
// bits / levels[0] is at most `ratio` and the density-weighted error, the sum of
// density / (2^bits - 1) (a b-bit grid's step over a channel's range), is least.
// (LLMS's eq. 3 weighs each chunk's density by its width instead, linearly: on 4 KB of
// bytellama's held-out text that allocation cost 1.8% bits per byte over all chunks at 8
// bits, this one 0.2%, all at 4 bits 0.1%.)
// Exhaustive over the counts: up to 3 levels. Throws tl::Error when even the smallest
// width exceeds the ratio.
std::vector<int> allocateBits(const std::vector<double>& density, double ratio, const std::vector<int>& levels);

}  // namespace tl
