#include "ctxswap/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cli/error.h"
#include "ctxswap/chunk_file.h"
#include "ctxswap/context_log.h"
#include "ctxswap/recompute.h"

namespace tl {

namespace {

template <typename F>
double fastest(int runs, F&& f) {
  double best = 1e30;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return best;
}

}  // namespace

LoadCosts calibrateLoad(Executor& ex, const CausalLm& lm, const std::string& dir, int64_t chunk, int runs) {
  if (chunk < 1 || runs < 1) throw Error("calibration needs a positive chunk size and run count", ExitCode::Usage);
  const int64_t context = 8 * chunk, most = 8;
  std::vector<int64_t> tokens(static_cast<size_t>(context + most * chunk));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>((i * 37 + 11) % static_cast<size_t>(lm.vocab()));
  const ContextKv past = recomputeRows(ex, lm, tokens, 0, context, emptyContextKv(lm));
  const ContextKv made = recomputeRows(ex, lm, tokens, context, most * chunk, past);
  std::vector<double> chunks, reSeconds, bytes, readSeconds;
  for (int64_t x : {1, 2, 4, 8}) {
    chunks.push_back(static_cast<double>(x));
    reSeconds.push_back(fastest(runs, [&] { recomputeRows(ex, lm, tokens, context, x * chunk, past); }));
    size_t total = 0;
    std::string error;
    for (int64_t c = 0; c < x; ++c) {
      const auto values = chunkValues(made, c * chunk, chunk);
      const KvChunk k = compressChunk(values.data(), chunk, static_cast<int64_t>(values.size()) / chunk, 8);
      if (!writeChunkFile(chunkFilePath(dir, 0, static_cast<uint32_t>(c)), ChunkId{0, 0, static_cast<uint32_t>(c), 0}, k, &error))
        throw Error("calibration: " + error, ExitCode::BadInput);
      total += k.bytes();
    }
    bytes.push_back(static_cast<double>(total));
    readSeconds.push_back(fastest(runs, [&] {
      KvChunk k;
      for (int64_t c = 0; c < x; ++c)
        if (readChunkFile(chunkFilePath(dir, 0, static_cast<uint32_t>(c)), ChunkId{0, 0, static_cast<uint32_t>(c), 0}, &k) != ChunkRead::Ok)
          throw Error("calibration: a chunk file it wrote did not read back", ExitCode::BadInput);
    }));
  }
  for (int64_t c = 0; c < most; ++c) std::remove(chunkFilePath(dir, 0, static_cast<uint32_t>(c)).c_str());
  return {fitLinear(chunks, reSeconds), fitLinear(bytes, readSeconds)};
}

}  // namespace tl
