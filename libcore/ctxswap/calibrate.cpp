#include "ctxswap/calibrate.h"

#include <zstd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

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

// A cost line through the points: the least-squares one, or where its fixed cost comes out
// below 0 (page-cache reads are all per byte), the best line through the origin.
LinearCost costLine(const std::vector<double>& x, const std::vector<double>& y) {
  LinearCost c = fitLinear(x, y);
  if (c.fixed >= 0) return c;
  double xy = 0, xx = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    xy += x[i] * y[i];
    xx += x[i] * x[i];
  }
  return {0.0, xx > 0 ? xy / xx : 0.0};
}

}  // namespace

std::string costsText(const LoadCosts& c, int64_t chunk) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "# tl-ctxswap costs 1 chunk=%lld\nrecompute %.9g %.9g\nread %.9g %.9g\n",
                static_cast<long long>(chunk), c.recompute.fixed, c.recompute.per, c.read.fixed, c.read.per);
  std::string text = buf;
  if (c.unzstd.per > 0) {
    std::snprintf(buf, sizeof buf, "unzstd %.9g %.9g\n", c.unzstd.fixed, c.unzstd.per);
    text += buf;
  }
  return text;
}

LoadCosts parseCosts(const std::string& text, int64_t chunk) {
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line.rfind("# tl-ctxswap costs 1 chunk=", 0) != 0)
    throw Error("line 1: not a tl-ctxswap costs file (its first line is '# tl-ctxswap costs 1 chunk=N')");
  const std::string size = line.substr(27);
  if (size != std::to_string(chunk))
    throw Error("line 1: these costs were measured for chunks of " + size + " tokens, not " + std::to_string(chunk));
  LoadCosts c;
  bool seen[2] = {false, false};
  for (int n = 2; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    std::istringstream f(line);
    std::string what, rest;
    LinearCost l;
    if (!(f >> what >> l.fixed >> l.per) || (f >> rest) || (what != "recompute" && what != "read" && what != "unzstd") ||
        l.fixed < 0 || l.per < 0)
      throw Error("line " + std::to_string(n) + ": expected 'recompute|read|unzstd FIXED_S PER_S', got '" + line + "'");
    (what == "recompute" ? c.recompute : what == "read" ? c.read : c.unzstd) = l;
    if (what != "unzstd") seen[what == "read"] = true;
  }
  if (!seen[0] || !seen[1]) throw Error("the costs file needs a recompute line and a read line");
  return c;
}

LoadCosts calibrateLoad(Executor& ex, const CausalLm& lm, const std::string& dir, int64_t chunk, int runs) {
  if (chunk < 1 || runs < 1) throw Error("calibration needs a positive chunk size and run count", ExitCode::Usage);
  const int64_t context = 8 * chunk, most = 8;
  std::vector<int64_t> tokens(static_cast<size_t>(context + most * chunk));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = static_cast<int64_t>((i * 37 + 11) % static_cast<size_t>(lm.vocab()));
  const ContextKv past = recomputeRows(ex, lm, tokens, 0, context, emptyContextKv(lm));
  const ContextKv made = recomputeRows(ex, lm, tokens, context, most * chunk, past);
  std::vector<double> chunks, reSeconds, bytes, readSeconds, codeBytes, unzstdSeconds;
  for (int64_t x : {1, 2, 4, 8}) {
    chunks.push_back(static_cast<double>(x));
    reSeconds.push_back(fastest(runs, [&] { recomputeRows(ex, lm, tokens, context, x * chunk, past); }));
    size_t total = 0, codes = 0;
    std::string error;
    std::vector<std::vector<uint8_t>> frames;  // the chunks' codes as zstd frames
    for (int64_t c = 0; c < x; ++c) {
      const auto values = chunkValues(made, c * chunk, chunk);
      const KvChunk k = compressChunk(values.data(), chunk, static_cast<int64_t>(values.size()) / chunk, 8);
      if (!writeChunkFile(chunkFilePath(dir, 0, static_cast<uint32_t>(c)), ChunkId{0, 0, static_cast<uint32_t>(c), 0}, k, &error))
        throw Error("calibration: " + error, ExitCode::BadInput);
      total += k.bytes();
      codes += k.codes.size();
      frames.push_back(zstdFrame(k.codes));
    }
    codeBytes.push_back(static_cast<double>(codes));
    std::vector<uint8_t> out(codes);
    unzstdSeconds.push_back(fastest(runs, [&] {
      for (const auto& f : frames) ZSTD_decompress(out.data(), out.size(), f.data(), f.size());
    }));
    bytes.push_back(static_cast<double>(total));
    readSeconds.push_back(fastest(runs, [&] {
      KvChunk k;
      for (int64_t c = 0; c < x; ++c)
        if (readChunkFile(chunkFilePath(dir, 0, static_cast<uint32_t>(c)), ChunkId{0, 0, static_cast<uint32_t>(c), 0}, &k) != ChunkRead::Ok)
          throw Error("calibration: a chunk file it wrote did not read back", ExitCode::BadInput);
    }));
  }
  for (int64_t c = 0; c < most; ++c) std::remove(chunkFilePath(dir, 0, static_cast<uint32_t>(c)).c_str());
  return {costLine(chunks, reSeconds), costLine(bytes, readSeconds), costLine(codeBytes, unzstdSeconds)};
}

}  // namespace tl
