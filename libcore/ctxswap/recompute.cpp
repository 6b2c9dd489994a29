#include "ctxswap/recompute.h"

#include <cstring>
#include <iterator>

#include "cli/error.h"
#include "ops/op_table.h"

namespace tl {

namespace {

// Rows [first, first + count) of a [heads, total, size] array, as [heads, count, size].
std::vector<float> rows(const float* src, int64_t heads, int64_t total, int64_t size, int64_t first, int64_t count) {
  std::vector<float> out(static_cast<size_t>(heads * count * size));
  for (int64_t h = 0; h < heads; ++h)
    std::memcpy(out.data() + h * count * size, src + (h * total + first) * size, static_cast<size_t>(count * size) * sizeof(float));
  return out;
}

}  // namespace

int64_t kvChannels(const ContextKv& kv) {
  int64_t c = 0;
  for (size_t i = 0; i < kv.caches.size(); ++i) c += kv.heads[i] * kv.size[i];
  return c;
}

ContextKv emptyContextKv(const CausalLm& lm) {
  if (!lm.hasCache()) throw Error("the model has no cache inputs: its contexts have no KV rows to keep");
  ContextKv kv;
  for (const auto& [name, dims] : lm.inputShapes(1, 0)) {
    if (name.rfind("past_key_values.", 0) != 0) continue;
    kv.heads.push_back(dims[1]);
    kv.size.push_back(dims[3]);
    kv.caches.emplace_back();
  }
  return kv;
}

ContextRun runContext(Executor& ex, const CausalLm& lm, const std::vector<int64_t>& tokens, int64_t first,
                      int64_t count, const ContextKv& past, const std::vector<std::string>& wanted) {
  if (past.tokens != first) throw Error("recompute from token " + std::to_string(first) + " needs the rows before it");
  if (count < 1 || first < 0 || first + count > static_cast<int64_t>(tokens.size()))
    throw Error("rows " + std::to_string(first) + ".." + std::to_string(first + count) + " are outside the context");
  std::vector<Tensor> inputs;
  size_t cache = 0;
  for (const auto& [name, dims] : lm.inputShapes(count, first)) {
    std::vector<int64_t> values;
    if (name == "input_ids") {
      values.assign(tokens.begin() + first, tokens.begin() + first + count);
    } else if (name == "attention_mask") {
      values.assign(static_cast<size_t>(first + count), 1);
    } else if (name == "position_ids") {
      for (int64_t i = 0; i < count; ++i) values.push_back(first + i);
    } else {
      inputs.push_back(makeTensor(name, DType::Float, dims, past.caches.at(cache++).data()));
      continue;
    }
    inputs.push_back(makeTensor(name, DType::Int64, dims, values.data()));
  }
  std::vector<std::string> names = lm.cacheOutputs();
  names.insert(names.end(), wanted.begin(), wanted.end());
  auto out = ex.run(inputs, names);
  ContextRun r;
  r.rows.heads = past.heads;  // the shape, not the past's rows
  r.rows.size = past.size;
  r.rows.caches.resize(past.caches.size());
  r.rows.tokens = count;
  for (size_t i = 0; i < lm.cacheOutputs().size(); ++i) {
    const auto& d = out[i].dims;
    if (d.size() != 4 || d[2] != first + count) throw Error("cache output '" + out[i].name + "' is not [1, heads, past + new, size]");
    r.rows.caches[i] = rows(reinterpret_cast<const float*>(out[i].bytes.data()), r.rows.heads[i], d[2], r.rows.size[i], first, count);
  }
  r.wanted.assign(std::make_move_iterator(out.begin() + static_cast<std::ptrdiff_t>(lm.cacheOutputs().size())),
                  std::make_move_iterator(out.end()));
  return r;
}

ContextKv recomputeRows(Executor& ex, const CausalLm& lm, const std::vector<int64_t>& tokens, int64_t first,
                        int64_t count, const ContextKv& past) {
  return runContext(ex, lm, tokens, first, count, past, {}).rows;
}

std::vector<std::string> attentionProbabilities(const Executor& ex) {
  std::vector<std::string> out;
  for (size_t i = 0; i < ex.graph().nodeCount(); ++i) {
    const auto& n = ex.graph().node(i);
    if (isOnnxOp(n, "Softmax") &&
        ex.analysis().at(n.output(0)).dims.size() == 4)
      out.push_back(n.output(0));
  }
  return out;
}

int64_t addKeyMass(const ContextRun& run, size_t from, std::vector<double>* mass) {
  int64_t heads = 1;
  for (size_t l = from; l < run.wanted.size(); ++l) {  // [1, H, rows, keys]
    const auto& d = run.wanted[l].dims;
    heads = d[1];
    if (mass->size() < static_cast<size_t>(d[3])) mass->resize(static_cast<size_t>(d[3]), 0.0);
    const float* a = reinterpret_cast<const float*>(run.wanted[l].bytes.data());
    for (int64_t h = 0; h < d[1]; ++h)
      for (int64_t row = 0; row < d[2]; ++row)
        for (int64_t t = 0; t < d[3]; ++t) (*mass)[static_cast<size_t>(t)] += a[(h * d[2] + row) * d[3] + t];
  }
  return heads;
}

std::vector<float> chunkValues(const ContextKv& kv, int64_t first, int64_t count) {
  if (first < 0 || first + count > kv.tokens) throw Error("a chunk past the context's rows");
  const int64_t channels = kvChannels(kv);
  std::vector<float> out(static_cast<size_t>(count * channels));
  for (int64_t t = 0; t < count; ++t) {
    float* dst = out.data() + t * channels;
    for (size_t i = 0; i < kv.caches.size(); ++i)
      for (int64_t h = 0; h < kv.heads[i]; ++h) {
        std::memcpy(dst, kv.caches[i].data() + (h * kv.tokens + first + t) * kv.size[i], static_cast<size_t>(kv.size[i]) * sizeof(float));
        dst += kv.size[i];
      }
  }
  return out;
}

void appendChunk(ContextKv& kv, const std::vector<float>& values, int64_t count) {
  const int64_t total = kv.tokens + count;
  const int64_t channels = kvChannels(kv);
  if (static_cast<int64_t>(values.size()) != count * channels) throw Error("a chunk of the wrong size for this context");
  int64_t at = 0;  // the cache's first channel in a token's row
  for (size_t i = 0; i < kv.caches.size(); ++i) {
    const int64_t H = kv.heads[i], S = kv.size[i];
    std::vector<float> grown(static_cast<size_t>(H * total * S));
    for (int64_t h = 0; h < H; ++h) {
      std::memcpy(grown.data() + h * total * S, kv.caches[i].data() + h * kv.tokens * S, static_cast<size_t>(kv.tokens * S) * sizeof(float));
      for (int64_t t = 0; t < count; ++t)
        std::memcpy(grown.data() + (h * total + kv.tokens + t) * S, values.data() + t * channels + at + h * S,
                    static_cast<size_t>(S) * sizeof(float));
    }
    kv.caches[i] = std::move(grown);
    at += H * S;
  }
  kv.tokens = total;
}

}  // namespace tl
