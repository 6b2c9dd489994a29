// tl-plan's decisions as the executor holds them: the memory plan's one arena and the
// in-place KV caches (docs/artifacts.md), read from the model's metadata, and the caches'
// host copies (writeCache, readCache).
#include <algorithm>
#include <cstring>

#include "cli/error.h"
#include "runtime/executor.h"
#include "runtime/executor/internal.h"

namespace tl {
namespace {


// The fields of a metadata value (tl.plan.*), empty ones dropped.
std::vector<std::string> split(const std::string& text, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find(sep, start), text.size());
    if (end > start) out.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

// A metadata value's `key=value` fields (tl.plan.options, tl.plan.kv_options).
std::unordered_map<std::string, std::string> keyValues(const std::string& text) {
  std::unordered_map<std::string, std::string> out;
  for (const auto& kv : split(text, ',')) {
    const auto eq = kv.find('=');
    if (eq != std::string::npos) out[kv.substr(0, eq)] = kv.substr(eq + 1);
  }
  return out;
}

// tl.plan.kv_options' `type`: f32 (also where absent: plans before --kv-type), f16 or q8.
KvType kvTypeOf(const std::unordered_map<std::string, std::string>& kvOptions) {
  const auto t = kvOptions.find("type");
  const std::string type = t == kvOptions.end() ? "f32" : t->second;
  const auto known = kvTypeNamed(type);
  if (!known) throw Error("tl.plan.kv_options: type '" + type + "' is not one this tl-run reads");
  return *known;
}

}  // namespace


KvType Executor::planKvType(const Model& model) {
  for (const auto& p : model.proto.metadata_props())
    if (p.key() == "tl.plan.kv_options") return kvTypeOf(keyValues(p.value()));
  return KvType::F32;
}


void Executor::usePlan() {
  std::unordered_map<std::string, std::string> meta;
  for (const auto& p : model_.proto.metadata_props())
    if (p.key().rfind("tl.plan.", 0) == 0) meta[p.key()] = p.value();
  if (!meta.count("tl.plan.version")) return;
  if (meta["tl.plan.version"] != "1") throw Error("tl.plan.version " + meta["tl.plan.version"] + " is not one this tl-run reads");
  int64_t align = 0, batch = 1;
  for (const auto& [key, v] : keyValues(meta["tl.plan.options"])) {
    if (key == "align") align = std::stoll(v);
    if (key == "batch") batch = std::stoll(v);
    if (key == "max_seq") planMaxSeq_ = std::stoll(v);
  }
  std::vector<size_t> offsets, capacities;
  size_t total = 0;
  for (const auto& line : split(meta["tl.plan.buffers"], '\n')) {
    const auto cols = split(line, '\t');
    if (cols.size() != 3) throw Error("tl.plan.buffers: a line without offset, size and capacity: '" + line + "'");
    const size_t cap = static_cast<size_t>(std::stoll(cols[2]));
    offsets.push_back(total);
    capacities.push_back(std::max<size_t>(cap, 8));
    total += (std::max<size_t>(cap, 8) + static_cast<size_t>(align) - 1) / static_cast<size_t>(align) * static_cast<size_t>(align);
  }
  const size_t need = std::max<size_t>(device_.info().subBufferAlign, 1);
  if (align < 1 || static_cast<size_t>(align) % need)
    throw Error("the plan aligns buffers to " + std::to_string(align) + " bytes; this device needs multiples of " +
                std::to_string(need) + " (tl-plan --align)", ExitCode::Device);
  if (total > device_.info().maxAlloc)
    throw Error("the plan's arena of " + std::to_string(total) + " bytes is over the device's largest allocation (" +
                std::to_string(device_.info().maxAlloc) + "): plan with a smaller --max-seq", ExitCode::Device);
  cl_int err;
  planArena_ = createBuffer(std::max<size_t>(total, 8), "the plan's arena");
  for (size_t b = 0; b < offsets.size(); ++b) {
    cl_buffer_region where{offsets[b], capacities[b]};
    planRegions_.push_back(clCreateSubBuffer(planArena_, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &where, &err));
    clCheck(err, "clCreateSubBuffer", "the plan's buffer " + std::to_string(b));
  }
  std::unordered_set<std::string> outputs;
  for (const auto& o : graph_.proto().output()) outputs.insert(o.name());
  for (const auto& line : split(meta["tl.plan.tensors"], '\n')) {
    const auto cols = split(line, '\t');
    if (cols.size() != 2) throw Error("tl.plan.tensors: a line without tensor and buffer: '" + line + "'");
    const size_t b = static_cast<size_t>(std::stoll(cols[1]));
    if (!kernelOutputs_.count(cols[0]) || b >= planRegions_.size())
      throw Error("the plan places tensor '" + cols[0] + "', which no kernel of this graph writes: the graph changed "
                  "after tl-plan (run tl-plan last)");
    if (outputs.count(cols[0])) {
      // Graph outputs keep buffers of their own (the cache carry swaps them), sized for
      // --max-seq now, so that a growing cache never reallocates.
      plannedOutputs_[cols[0]] = capacities[b];
      ensure(cols[0], capacities[b]);
      continue;
    }
    Buffer& buf = buffers_[cols[0]];
    buf.mem = planRegions_[b];
    clRetainMemObject(buf.mem);
    buf.capacity = capacities[b];
    planned_[cols[0]] = buf.mem;
    planOrigins_[cols[0]] = offsets[b];
  }
  useKvPlan(meta, batch);
}


void Executor::useKvPlan(const std::unordered_map<std::string, std::string>& meta, int64_t batch) {
  const auto pairs = meta.find("tl.plan.kv");
  if (pairs == meta.end()) return;
  std::string layout = "sequence";
  if (auto o = meta.find("tl.plan.kv_options"); o != meta.end())
    for (const auto& [key, v] : keyValues(o->second)) {
      if (key == "layout") layout = v;
      if (key == "pad") kvPad_ = std::max<int64_t>(1, std::stoll(v));
    }
  if (layout != "sequence" && layout != "heads") throw Error("tl.plan.kv_options: layout '" + layout + "' is not one this tl-run reads");
  kvSequenceFirst_ = layout == "sequence";
  kvCapacity_ = planMaxSeq_;
  if (auto m = meta.find("tl.plan.kv_masks"); m != meta.end()) kvMasks_ = split(m->second, '\n');
  for (const auto& line : split(pairs->second, '\n')) {
    const auto cols = split(line, '\t');
    if (cols.size() != 2 || !analysis_.tensors.count(cols[0]) || !analysis_.tensors.count(cols[1]))
      throw Error("tl.plan.kv: '" + line + "' names no cache input and output of this graph: the graph changed after tl-plan");
    KvCache c;
    c.past = cols[0];
    c.present = cols[1];
    const auto& d = analysis_.at(c.past).dims;
    const auto H = d.size() == 4 ? analysis_.symbols.resolve(d[1]).constValue() : std::nullopt;
    const auto D = d.size() == 4 ? analysis_.symbols.resolve(d[3]).constValue() : std::nullopt;
    if (!H || !D) throw Error("tl.plan.kv: cache input '" + c.past + "' " + str(d) + " is not [batch, heads, length, size]");
    SymbolValues b;
    for (const auto& s : d[0].symbols()) b[s] = batch;
    c.B = d[0].evaluate(b);
    c.H = *H;
    c.D = *D;
    const int64_t cap = kvCapacity_;
    c.strides = kvSequenceFirst_ ? std::vector<int64_t>{c.H * c.D, c.D, c.B * c.H * c.D}
                                 : std::vector<int64_t>{c.H * cap * c.D, cap * c.D, c.D};
    const size_t bytes = static_cast<size_t>(c.B * c.H * cap) * tl::kvBytes(kvType(), c.D);
    if (bytes > device_.info().maxAlloc)
      throw Error("cache '" + c.past + "' needs " + std::to_string(bytes) + " bytes for max-seq " + std::to_string(cap) +
                      ", over the device's largest allocation",
                  ExitCode::Device);
    c.mem = createBuffer(bytes, "cache '" + c.past + "'");
    const cl_uchar zero = 0;
    clCheck(clEnqueueFillBuffer(device_.queue(), c.mem, &zero, sizeof zero, 0, bytes, 0, nullptr, nullptr),
            "clEnqueueFillBuffer", "cache '" + c.past + "'");
    for (const auto* name : {&c.past, &c.present}) {
      Buffer& buf = buffers_[*name];
      buf.mem = c.mem;
      clRetainMemObject(c.mem);
      buf.capacity = bytes;
      planned_[*name] = c.mem;
      kvOf_[*name] = kv_.size();
    }
    clReleaseMemObject(c.mem);  // the two buffers hold it
    kv_.push_back(c);
  }
}


const std::vector<int64_t>* Executor::cacheStrides(const std::string& tensor) const {
  auto k = kvOf_.find(tensor);
  return k == kvOf_.end() ? nullptr : &kv_[k->second].strides;
}

void Executor::rewindCaches(int64_t rows) {
  if (kv_.empty()) throw Error("the model has no in-place KV caches to rewind (tl-plan makes them)");
  if (rows < 0 || rows > kvRows_)
    throw Error("cannot rewind the caches to " + std::to_string(rows) + " tokens: they hold " + std::to_string(kvRows_));
  kvRows_ = rows;
  for (auto& r : kvLens_) r = std::min(r, rows);
}

void Executor::setCacheRows(const std::vector<int64_t>& rows) {
  if (kv_.empty()) throw Error("the model has no in-place KV caches (tl-plan makes them)");
  if (rows.empty() || static_cast<int64_t>(rows.size()) > kv_[0].B)
    throw Error(std::to_string(rows.size()) + " batch rows: the caches hold " + std::to_string(kv_[0].B) +
                " (the batch tl-plan was run for)");
  for (int64_t r : rows)
    if (r < 0 || r > kvCapacity_)
      throw Error("a batch row of " + std::to_string(r) + " tokens: the caches hold " + std::to_string(kvCapacity_));
  kvLens_ = rows;
  kvBatch_ = static_cast<int64_t>(rows.size());
  kvRows_ = *std::max_element(rows.begin(), rows.end());
}

void Executor::uploadCacheRows(uint8_t* at) const {
  for (size_t b = 0; b < kvLens_.size(); ++b) {
    const int32_t rows = static_cast<int32_t>(kvLens_[b]);
    std::memcpy(at + b * sizeof rows, &rows, sizeof rows);
  }
}


namespace {


// A cache's first `rows` tokens of its first `batch` batch rows as [batch, H, rows, D] and
// their place in the buffer, as a rectangle: sequence first, a token's batch rows are one
// row of the rectangle (the host side transposed to [rows, batch, H, D]); heads first, a
// (batch, head)'s tokens are one slice.
struct CacheRect {
  size_t region[3], bufferRow, bufferSlice, hostRow, hostSlice;
};


CacheRect cacheRect(int64_t batch, int64_t H, int64_t B, int64_t capacity, int64_t rows, bool sequenceFirst, size_t row) {
  if (sequenceFirst)
    return {{row * static_cast<size_t>(batch * H), static_cast<size_t>(rows), 1}, row * static_cast<size_t>(B * H), 0,
            row * static_cast<size_t>(batch * H), 0};
  return {{row, static_cast<size_t>(rows), static_cast<size_t>(batch * H)}, row, row * static_cast<size_t>(capacity), row,
          row * static_cast<size_t>(rows)};
}


// [batch * H, rows, D] <-> [rows, batch * H, D], rows of `row` bytes.
void swapTokensAndHeads(const uint8_t* from, uint8_t* to, int64_t heads, int64_t rows, size_t row, bool toTokens) {
  for (int64_t bh = 0; bh < heads; ++bh)
    for (int64_t r = 0; r < rows; ++r) {
      const size_t a = static_cast<size_t>(bh * rows + r) * row, b = static_cast<size_t>(r * heads + bh) * row;
      std::memcpy(to + (toTokens ? b : a), from + (toTokens ? a : b), row);
    }
}


}  // namespace


void Executor::writeCache(const KvCache& c, const Tensor& t) {
  if (t.dims.size() != 4 || t.dims[0] > c.B || t.dims[1] != c.H || t.dims[3] != c.D)
    throw Error("cache input '" + c.past + "' is " + str(std::vector<SymExpr>(t.dims.begin(), t.dims.end())) +
                "; its in-place cache holds [at most " + std::to_string(c.B) + ", " + std::to_string(c.H) + ", tokens, " +
                std::to_string(c.D) + "] (the batch tl-plan was run for)");
  if (t.dtype != DType::Float)
    throw Error("cache input '" + c.past + "' is " + dtypeName(t.dtype) + "; tl-plan's in-place caches take float32");
  kvBatch_ = t.dims[0];
  const int64_t rows = t.dims[2];
  if (!rows) return;
  // The host's fp32 rows as the cache holds them (rounded as the kernels round), tokens
  // first where the cache is.
  const size_t row = tl::kvBytes(kvType(), c.D), count = static_cast<size_t>(kvBatch_ * c.H * rows);
  const auto* floats = reinterpret_cast<const float*>(t.bytes.data());
  auto& stage = staging_[c.past];
  stage.resize(count * row);
  if (kvSequenceFirst_) {
    std::vector<uint8_t> encoded(stage.size());
    encodeKvRows(kvType(), floats, count, c.D, encoded.data());
    swapTokensAndHeads(encoded.data(), stage.data(), kvBatch_ * c.H, rows, row, true);
  } else {
    encodeKvRows(kvType(), floats, count, c.D, stage.data());  // straight into the staging bytes
  }
  const CacheRect r = cacheRect(kvBatch_, c.H, c.B, kvCapacity_, rows, kvSequenceFirst_, row);
  const size_t origin[3] = {0, 0, 0};
  clCheck(clEnqueueWriteBufferRect(device_.queue(), c.mem, CL_FALSE, origin, origin, r.region, r.bufferRow, r.bufferSlice,
                                   r.hostRow, r.hostSlice, stage.data(), 0, nullptr, nullptr),
          "clEnqueueWriteBufferRect", "cache '" + c.past + "'");
}


std::vector<uint8_t> Executor::readCache(const KvCache& c, int64_t rows) {
  const size_t row = tl::kvBytes(kvType(), c.D), count = static_cast<size_t>(kvBatch_ * c.H * rows);
  std::vector<uint8_t> held(count * row), block(held.size()), out(count * static_cast<size_t>(c.D) * sizeof(float));
  if (!rows) return out;
  const CacheRect r = cacheRect(kvBatch_, c.H, c.B, kvCapacity_, rows, kvSequenceFirst_, row);
  const size_t origin[3] = {0, 0, 0};
  clCheck(clEnqueueReadBufferRect(device_.queue(), c.mem, CL_TRUE, origin, origin, r.region, r.bufferRow, r.bufferSlice,
                                  r.hostRow, r.hostSlice, kvSequenceFirst_ ? block.data() : held.data(), 0, nullptr, nullptr),
          "clEnqueueReadBufferRect", "cache '" + c.present + "'");
  if (kvSequenceFirst_) swapTokensAndHeads(block.data(), held.data(), kvBatch_ * c.H, rows, row, false);
  decodeKvRows(kvType(), held.data(), count, c.D, reinterpret_cast<float*>(out.data()));  // to the graph's fp32
  return out;
}

void Executor::copyCacheRow(int64_t from, int64_t to, int64_t rows) {
  if (kv_.empty()) throw Error("the model has no in-place KV caches (tl-plan makes them)");
  const int64_t B = kv_[0].B;
  if (from < 0 || to < 0 || from >= B || to >= B || rows < 0 || rows > kvCapacity_)
    throw Error("cannot copy " + std::to_string(rows) + " tokens of batch row " + std::to_string(from) + " to row " +
                std::to_string(to) + ": the caches hold " + std::to_string(B) + " rows of " + std::to_string(kvCapacity_));
  if (from == to || !rows) return;
  for (const KvCache& c : kv_) {
    const size_t row = tl::kvBytes(kvType(), c.D);
    const CacheRect r = cacheRect(1, c.H, c.B, kvCapacity_, rows, kvSequenceFirst_, row);
    size_t src[3], dst[3];
    const size_t host[3] = {0, 0, 0};
    rowOrigin(c, from, 0, src);
    rowOrigin(c, to, 0, dst);
    std::vector<uint8_t> bytes(static_cast<size_t>(c.H * rows) * row);
    clCheck(clEnqueueReadBufferRect(device_.queue(), c.mem, CL_TRUE, src, host, r.region, r.bufferRow, r.bufferSlice,
                                    r.hostRow, r.hostSlice, bytes.data(), 0, nullptr, nullptr),
            "clEnqueueReadBufferRect", "cache '" + c.present + "'");
    clCheck(clEnqueueWriteBufferRect(device_.queue(), c.mem, CL_TRUE, dst, host, r.region, r.bufferRow, r.bufferSlice,
                                     r.hostRow, r.hostSlice, bytes.data(), 0, nullptr, nullptr),
            "clEnqueueWriteBufferRect", "cache '" + c.past + "'");
  }
  synced();
}

// Batch row b's token `first` in a cache's buffer, as a rectangle's origin (cacheRect of
// one batch row): sequence first, b's heads along a token's row; heads first, its slices.
void Executor::rowOrigin(const KvCache& c, int64_t b, int64_t first, size_t* o) const {
  const size_t row = tl::kvBytes(kvType(), c.D);
  o[0] = kvSequenceFirst_ ? static_cast<size_t>(b * c.H) * row : 0;
  o[1] = static_cast<size_t>(first);
  o[2] = kvSequenceFirst_ ? 0 : static_cast<size_t>(b * c.H);
}

std::vector<float> Executor::readCacheRow(const std::string& cacheInput, int64_t b, int64_t first, int64_t count) {
  const auto k = kvOf_.find(cacheInput);
  if (k == kvOf_.end()) throw Error("'" + cacheInput + "' is no in-place KV cache input (tl-plan makes them)");
  const KvCache& c = kv_[k->second];
  if (b < 0 || b >= c.B || first < 0 || count < 0 || first + count > kvCapacity_)
    throw Error("cannot read tokens " + std::to_string(first) + ".." + std::to_string(first + count) + " of batch row " +
                std::to_string(b) + ": the caches hold " + std::to_string(c.B) + " rows of " + std::to_string(kvCapacity_));
  const size_t row = tl::kvBytes(kvType(), c.D), n = static_cast<size_t>(c.H * count);
  std::vector<float> out(n * static_cast<size_t>(c.D));
  if (!count) return out;
  std::vector<uint8_t> held(n * row), block(held.size());
  const CacheRect r = cacheRect(1, c.H, c.B, kvCapacity_, count, kvSequenceFirst_, row);
  size_t at[3];
  const size_t host[3] = {0, 0, 0};
  rowOrigin(c, b, first, at);
  clCheck(clEnqueueReadBufferRect(device_.queue(), c.mem, CL_TRUE, at, host, r.region, r.bufferRow, r.bufferSlice, r.hostRow,
                                  r.hostSlice, kvSequenceFirst_ ? block.data() : held.data(), 0, nullptr, nullptr),
          "clEnqueueReadBufferRect", "cache '" + c.present + "'");
  synced();
  if (kvSequenceFirst_) swapTokensAndHeads(block.data(), held.data(), c.H, count, row, false);
  decodeKvRows(kvType(), held.data(), n, c.D, out.data());  // to the graph's fp32
  return out;
}

}  // namespace tl
