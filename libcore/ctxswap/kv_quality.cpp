#include "ctxswap/kv_quality.h"

#include <algorithm>

#include "cli/error.h"
#include "ctxswap/kv_chunk.h"
#include "ctxswap/recompute.h"
#include "ctxswap/tolerance.h"
#include "sample/sampler.h"

namespace tl {

KvQuality compressedBitsPerByte(Executor& ex, CausalLm& lm, const std::string& text, const KvQualityOptions& opt) {
  if (lm.vocab() != 256) throw Error("bits per byte need a byte-level model (vocab 256)");
  if (opt.window < 2 || opt.chunk < 1) throw Error("the window must be at least 2 tokens and the chunk at least 1", ExitCode::Usage);
  const std::vector<std::string> probs = opt.mode == KvMode::Tolerance ? attentionProbabilities(ex) : std::vector<std::string>{};
  if (opt.mode == KvMode::Tolerance && probs.empty())
    throw Error("tolerance-aware compression reads the attention probabilities: give the unfused model");
  std::vector<std::string> wanted = {"logits"};
  wanted.insert(wanted.end(), probs.begin(), probs.end());
  KvQuality r;
  double bits = 0, chunkBits = 0;
  int64_t chunkReads = 0;
  for (size_t at = 0; at + 1 < text.size(); at += static_cast<size_t>(opt.window)) {
    const int64_t len = static_cast<int64_t>(std::min(text.size() - at, static_cast<size_t>(opt.window)));
    std::vector<int64_t> toks(static_cast<size_t>(len));
    for (int64_t i = 0; i < len; ++i) toks[i] = static_cast<unsigned char>(text[at + i]);
    ContextKv exact = emptyContextKv(lm);  // Fp32's past
    std::vector<KvChunk> stored;          // the completed chunks at 8 bits
    std::vector<int> kept;                // and the bits each is read at
    std::vector<std::vector<float>> read;  // its values at those bits, remade when they change
    std::vector<int> readBits;
    std::vector<double> mass;             // attention each token drew, over layers, heads and rows
    int64_t heads = 1;
    for (int64_t p = 0; p < len; p += opt.chunk) {
      const int64_t n = std::min(opt.chunk, len - p);
      ContextKv past = emptyContextKv(lm);
      if (opt.mode == KvMode::Fp32) {
        past = exact;
        chunkBits += 32.0 * static_cast<double>(p / opt.chunk);
        chunkReads += p / opt.chunk;
      } else {
        read.resize(stored.size());
        readBits.resize(stored.size(), 0);
        for (size_t c = 0; c < stored.size(); ++c) {
          if (readBits[c] != kept[c]) {
            read[c] = decompressChunk(kept[c] == 8 ? stored[c] : recompressChunk(stored[c], kept[c]));
            readBits[c] = kept[c];
          }
          appendChunk(past, read[c], stored[c].tokens);
          chunkBits += readBits[c];
          ++chunkReads;
        }
      }
      const ContextRun run = runContext(ex, lm, toks, p, n, past, wanted);
      const float* logits = reinterpret_cast<const float*>(run.wanted[0].bytes.data());
      for (int64_t i = 0; i < n && p + i + 1 < len; ++i) {
        bits += negLog2Prob(logits + i * 256, 256, toks[static_cast<size_t>(p + i + 1)]);
        ++r.scored;
      }
      const std::vector<float> rows = chunkValues(run.rows, 0, n);
      if (opt.mode == KvMode::Fp32) {
        appendChunk(exact, rows, n);
        continue;
      }
      stored.push_back(compressChunk(rows.data(), n, static_cast<int64_t>(rows.size()) / n, 8));
      kept.push_back(8);
      if (opt.mode != KvMode::Tolerance) continue;
      heads = addKeyMass(run, 1, &mass);
      kept = allocateBits(chunkDensities(mass, opt.chunk, static_cast<int64_t>(probs.size()), heads), opt.ratio, {8, 4, 2});
    }
    ++r.windows;
  }
  if (!r.scored) throw Error("the text has fewer than 2 bytes");
  r.bitsPerByte = bits / static_cast<double>(r.scored);
  r.meanBits = chunkReads ? chunkBits / static_cast<double>(chunkReads) : 0;
  return r;
}

}  // namespace tl
