#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "cli/error.h"
#include "ops/host_eval.h"
#include "tensor/tensor.h"

namespace tl {
namespace {

size_t elementBytes(DType t) {
  size_t bits = dtypeBits(t);
  if (bits < 8) throw Error(std::string("dtype ") + dtypeName(t) + " has no device layout", ExitCode::Device);
  return bits / 8;
}

// Folded values as bytes of the tensor's dtype, for consumers that read them as data.
std::vector<uint8_t> encode(const std::vector<int64_t>& v, DType t) {
  std::vector<uint8_t> out(v.size() * elementBytes(t));
  for (size_t i = 0; i < v.size(); ++i) {
    switch (t) {
      case DType::Int64: { int64_t x = v[i]; std::memcpy(&out[i * 8], &x, 8); break; }
      case DType::Int32: { int32_t x = static_cast<int32_t>(v[i]); std::memcpy(&out[i * 4], &x, 4); break; }
      case DType::Float: { float x = static_cast<float>(v[i]); std::memcpy(&out[i * 4], &x, 4); break; }
      case DType::Bool: case DType::UInt8: out[i] = static_cast<uint8_t>(v[i] != 0); break;
      default: throw Error(std::string("cannot place folded values of dtype ") + dtypeName(t) + " on the device");
    }
  }
  return out;
}

// A key mask's rows of `from` elements of `width` bytes, each padded with zeros (hidden
// keys) to `to` elements, into `out` (rows * to elements).
void padRows(const std::vector<uint8_t>& rows, size_t width, int64_t from, int64_t to, uint8_t* out) {
  const size_t f = static_cast<size_t>(from) * width, t = static_cast<size_t>(to) * width;
  for (size_t r = 0; f && r < rows.size() / f; ++r) {
    std::memcpy(out + r * t, rows.data() + r * f, f);
    std::memset(out + r * t + f, 0, t - f);
  }
}

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

}  // namespace

Executor::Executor(Device& device, const Model& model, const Graph& graph, const ShapeAnalysis& analysis)
    : device_(device), kernels_(device), model_(model), graph_(graph), analysis_(analysis) {
  for (const auto& name : analysis.order) {
    const auto& t = analysis.at(name);
    std::set<std::string> symbols;
    for (const auto& d : t.dims) symbols.merge(d.symbols());
    if (t.value)
      for (const auto& v : *t.value) symbols.merge(v.symbols());
    if (!symbols.empty()) {
      dependent_.push_back({&name, &t, {symbols.begin(), symbols.end()}});
      continue;
    }
    setShape(name, t, {});
  }
  for (const auto& o : graph.proto().output()) graphOutputs_.insert(o.name());
  for (size_t i : graph.topoOrder()) {
    if (analysis.nodeClass[i] != NodeClass::Tensor) continue;
    tensorNodes_.push_back(i);
    const auto& n = graph.node(i);
    for (const auto& t : n.input()) if (!t.empty()) touching_[t].push_back(i);
    for (const auto& t : n.output()) if (!t.empty()) touching_[t].push_back(i);
    if (!isView(n, analysis.dtypeOf())) {
      kernelNodes_.push_back(i);
      for (const auto& o : n.output()) kernelOutputs_.insert(o);
      continue;
    }
    auto root = aliases_.find(n.input(0));  // a view of a view names the first buffer
    aliases_[n.output(0)] = root == aliases_.end() ? n.input(0) : root->second;
  }

  // Constants that tensor ops read: initializers and Constant nodes, uploaded once.
  std::unordered_map<std::string, const onnx::TensorProto*> constants;
  for (const auto& t : graph.proto().initializer()) constants[t.name()] = &t;
  for (size_t i = 0; i < graph.nodeCount(); ++i) {
    const auto& n = graph.node(i);
    if (n.op_type() == "Constant" && n.attribute_size() == 1 && n.attribute(0).name() == "value")
      constants[n.output(0)] = &n.attribute(0).t();
  }
  for (size_t i : tensorNodes_) {
    for (const auto& in : graph.node(i).input()) {
      auto it = constants.find(in);
      if (in.empty() || it == constants.end() || buffers_.count(in)) continue;
      Tensor t = readTensor(*it->second, model.baseDir);
      upload(in, t.bytes.data(), t.bytes.size());
    }
  }
  usePlan();
  findHostNodes(constants);
  recordings_.resize(graph.nodeCount());
  dirty_.assign(graph.nodeCount(), 1);
  runView_.assign(graph.nodeCount(), 0);
  // Every tensor op must have its kernels: look them up with a dry run at a nominal binding.
  SymbolValues nominal;
  for (const auto& s : analysis.symbols.freeSymbols()) nominal[s] = 2;
  prepare(nominal);
  dry_ = true;
  for (size_t i : kernelNodes_) {
    try {
      enqueueNode(*this, i);
    } catch (const Error& e) {
      dry_ = false;
      throw Error("node '" + graph.nodeName(i) + "' (" + graph.node(i).op_type() + "): " + e.what(), e.code());
    }
  }
  dry_ = false;
  planEnforced_ = true;
  clCheck(clFinish(device_.queue()), "clFinish");  // the constants' staging copies may go now
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
  planArena_ = clCreateBuffer(device_.context(), CL_MEM_READ_WRITE, std::max<size_t>(total, 8), nullptr, &err);
  clCheck(err, "clCreateBuffer", "the plan's arena");
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
    const size_t bytes = static_cast<size_t>(c.B * c.H * cap * c.D) * 4;
    if (bytes > device_.info().maxAlloc)
      throw Error("cache '" + c.past + "' needs " + std::to_string(bytes) + " bytes for max-seq " + std::to_string(cap) +
                      ", over the device's largest allocation",
                  ExitCode::Device);
    cl_int err;
    c.mem = clCreateBuffer(device_.context(), CL_MEM_READ_WRITE, bytes, nullptr, &err);
    clCheck(err, "clCreateBuffer", "cache '" + c.past + "'");
    const float zero = 0;
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

namespace {

// A cache's first `rows` tokens of its first `batch` batch rows as [batch, H, rows, D] and
// their place in the buffer, as a rectangle: sequence first, a token's batch rows are one
// row of the rectangle (the host side transposed to [rows, batch, H, D]); heads first, a
// (batch, head)'s tokens are one slice.
struct CacheRect {
  size_t region[3], bufferRow, bufferSlice, hostRow, hostSlice;
};

CacheRect cacheRect(int64_t batch, int64_t H, int64_t D, int64_t B, int64_t capacity, int64_t rows, bool sequenceFirst) {
  const size_t row = static_cast<size_t>(D) * 4;
  if (sequenceFirst)
    return {{row * static_cast<size_t>(batch * H), static_cast<size_t>(rows), 1}, row * static_cast<size_t>(B * H), 0,
            row * static_cast<size_t>(batch * H), 0};
  return {{row, static_cast<size_t>(rows), static_cast<size_t>(batch * H)}, row, row * static_cast<size_t>(capacity), row,
          row * static_cast<size_t>(rows)};
}

// [batch * H, rows, D] <-> [rows, batch * H, D], rows of D floats.
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
  kvBatch_ = t.dims[0];
  const int64_t rows = t.dims[2];
  if (!rows) return;
  auto& stage = staging_[c.past];
  stage.resize(t.bytes.size());
  if (kvSequenceFirst_) swapTokensAndHeads(t.bytes.data(), stage.data(), kvBatch_ * c.H, rows, static_cast<size_t>(c.D) * 4, true);
  else stage = t.bytes;
  const CacheRect r = cacheRect(kvBatch_, c.H, c.D, c.B, kvCapacity_, rows, kvSequenceFirst_);
  const size_t origin[3] = {0, 0, 0};
  clCheck(clEnqueueWriteBufferRect(device_.queue(), c.mem, CL_FALSE, origin, origin, r.region, r.bufferRow, r.bufferSlice,
                                   r.hostRow, r.hostSlice, stage.data(), 0, nullptr, nullptr),
          "clEnqueueWriteBufferRect", "cache '" + c.past + "'");
}

std::vector<uint8_t> Executor::readCache(const KvCache& c, int64_t rows) {
  const size_t row = static_cast<size_t>(c.D) * 4;
  std::vector<uint8_t> out(static_cast<size_t>(kvBatch_ * c.H * rows) * row), block(out.size());
  if (!rows) return out;
  const CacheRect r = cacheRect(kvBatch_, c.H, c.D, c.B, kvCapacity_, rows, kvSequenceFirst_);
  const size_t origin[3] = {0, 0, 0};
  clCheck(clEnqueueReadBufferRect(device_.queue(), c.mem, CL_TRUE, origin, origin, r.region, r.bufferRow, r.bufferSlice,
                                  r.hostRow, r.hostSlice, kvSequenceFirst_ ? block.data() : out.data(), 0, nullptr, nullptr),
          "clEnqueueReadBufferRect", "cache '" + c.present + "'");
  if (kvSequenceFirst_) swapTokensAndHeads(block.data(), out.data(), kvBatch_ * c.H, rows, row, false);
  return out;
}

void Executor::findHostNodes(const std::unordered_map<std::string, const onnx::TensorProto*>& constants) {
  onHost_.assign(graph_.nodeCount(), 0);
  for (const auto& in : graph_.proto().input()) {
    const auto& t = analysis_.at(in.name());
    if (t.cls == TensorClass::Input && (isInteger(t.dtype) || t.dtype == DType::Bool)) hostInputs_.insert(in.name());
  }
  for (size_t i : tensorNodes_) {
    const auto& n = graph_.node(i);
    if (!hostEvaluable(n, analysis_.dtypeOf())) continue;
    std::vector<std::string> small;  // constants to keep on the host
    bool known = true;
    for (const auto& in : n.input()) {
      if (in.empty() || hostInputs_.count(in) || hostProducer_.count(in) || hostConstants_.count(in)) continue;
      const auto& t = analysis_.at(in);
      if (t.cls == TensorClass::Shape) continue;  // folded: its values are on the host
      auto c = constants.find(in);
      if (t.cls == TensorClass::Constant && c != constants.end() && elementCount(shapes_.at(in)) <= kHostElements) {
        small.push_back(in);
        continue;
      }
      known = false;
    }
    if (!known) continue;
    for (const auto& name : small) hostConstants_[name] = readTensor(*constants.at(name), model_.baseDir);
    hostable_.push_back(i);
    hostProducer_[n.output(0)] = i;
  }
}

const Tensor& Executor::hostValue(const std::string& tensor) {
  if (auto h = hostValues_.find(tensor); h != hostValues_.end()) return h->second;
  if (auto c = hostConstants_.find(tensor); c != hostConstants_.end()) return c->second;
  const auto& info = analysis_.at(tensor);
  if (info.cls != TensorClass::Shape) throw Error("tensor '" + tensor + "' has no host value in this run");
  Tensor& t = hostValues_[tensor];
  t.name = tensor;
  t.dtype = info.dtype;
  t.dims = shape(tensor);
  t.bytes = foldedBytes(tensor);
  return t;
}

std::vector<uint8_t> Executor::foldedBytes(const std::string& tensor) const {
  return encode(value(tensor), analysis_.at(tensor).dtype);
}

Executor::~Executor() {
  dropReplay();
  for (auto& r : recordings_)
    for (auto& site : r.sites)
      for (auto& [name, k] : site.made) clReleaseKernel(k);
  for (auto& [n, b] : buffers_)
    if (b.mem) clReleaseMemObject(b.mem);
  for (auto& [n, v] : subViews_)
    if (v.buf.mem) clReleaseMemObject(v.buf.mem);
  if (argmaxOut_) clReleaseMemObject(argmaxOut_);
  for (int i = 0; i < 2; ++i) {
    if (tokenRead_[i]) {  // it writes into tokenHost_
      clWaitForEvents(1, &tokenRead_[i]);
      clReleaseEvent(tokenRead_[i]);
    }
    if (tokenSlots_[i]) clReleaseMemObject(tokenSlots_[i]);
  }
  if (uploadsWritten_) clReleaseEvent(uploadsWritten_);
  for (auto& [n, r] : regions_) clReleaseMemObject(r.sub);
  if (uploadArena_) clReleaseMemObject(uploadArena_);
  for (cl_mem m : planRegions_) clReleaseMemObject(m);
  if (planArena_) clReleaseMemObject(planArena_);
  releaseEvents();
}

void Executor::releaseEvents() {
  for (auto& [n, e] : events_) clReleaseEvent(e);
  for (auto& x : extraEvents_) clReleaseEvent(x.e);
  events_.clear();
  extraEvents_.clear();
}

const std::vector<int64_t>& Executor::shape(const std::string& tensor) const {
  auto it = shapes_.find(tensor);
  if (it == shapes_.end()) throw Error("tensor '" + tensor + "' has no shape in this run");
  return it->second;
}

const std::vector<int64_t>& Executor::value(const std::string& tensor) const {
  auto it = values_.find(tensor);
  if (it == values_.end()) throw Error("tensor '" + tensor + "' is not computable from shapes and constants");
  return it->second;
}

const std::string& Executor::root(const std::string& tensor) const {
  auto alias = aliases_.find(tensor);
  const std::string& t = alias == aliases_.end() ? tensor : alias->second;
  auto run = runAliases_.find(t);  // its values are roots already
  return run == runAliases_.end() ? t : run->second;
}

const Executor::Buffer& Executor::rootBuffer(const std::string& tensor) const {
  const std::string& r = root(tensor);
  if (const SubView* v = activeSubView(r)) return v->buf;
  auto it = buffers_.find(r);
  if (it == buffers_.end()) throw Error("tensor '" + tensor + "' has no device buffer", ExitCode::Device);
  return it->second;
}

cl_mem Executor::buffer(const std::string& tensor) const { return rootBuffer(tensor).mem; }

Executor::Buffer& Executor::ensure(const std::string& tensor, size_t bytes) {
  Buffer& b = buffers_[tensor];
  bytes = std::max<size_t>(bytes, 8);  // OpenCL buffers cannot be empty
  if (b.capacity >= bytes) return b;
  if (auto p = planned_.find(tensor); planEnforced_ && p != planned_.end() && b.mem == p->second)
    throw Error("this run needs " + std::to_string(bytes) + " bytes for tensor '" + tensor + "', over the " +
                    std::to_string(b.capacity) + " its plan holds: a sequence longer than the plan's --max-seq " +
                    std::to_string(planMaxSeq_) + " (run tl-plan with a larger one)",
                ExitCode::BadInput);
  if (bytes > device_.info().maxAlloc)
    throw Error("tensor '" + tensor + "' needs " + std::to_string(bytes) + " bytes, over the device's largest allocation",
                ExitCode::Device);
  if (b.mem) clReleaseMemObject(b.mem);
  // Grow with headroom so that decoding one more token rarely reallocates.
  size_t cap = b.capacity ? std::max(bytes, b.capacity + b.capacity / 2) : bytes;
  cl_int err;
  b.mem = clCreateBuffer(device_.context(), CL_MEM_READ_WRITE, cap, nullptr, &err);
  clCheck(err, "clCreateBuffer", "tensor '" + tensor + "'");
  b.capacity = cap;
  return b;
}

void Executor::upload(const std::string& tensor, const void* data, size_t bytes) {
  Buffer& b = ensure(tensor, bytes);
  if (bytes == 0) return;
  // Non-blocking: the bytes wait in a staging copy that outlives the run, so that
  // uploading inputs never stalls the host on the queue.
  auto& stage = staging_[tensor];
  stage.assign(static_cast<const uint8_t*>(data), static_cast<const uint8_t*>(data) + bytes);
  clCheck(clEnqueueWriteBuffer(device_.queue(), b.mem, CL_FALSE, 0, bytes, stage.data(), 0, nullptr, nullptr),
          "clEnqueueWriteBuffer", "tensor '" + tensor + "'");
}

void Executor::setShape(const std::string& name, const TensorShape& t, const SymbolValues& binding) {
  std::vector<int64_t> dims;
  try {
    dims = evaluateDims(t.dims, binding);
  } catch (const Error& e) {
    throw Error("tensor '" + name + "': " + e.what());
  }
  if (elementCount(dims) >= (int64_t(1) << 31))
    throw Error("tensor '" + name + "' has more than 2^31 elements", ExitCode::Device);
  shapes_[name] = std::move(dims);
  if (!t.value) return;
  values_[name] = evaluateDims(*t.value, binding);
  if (t.cls == TensorClass::Shape) stale_.insert(name);
}

void Executor::prepare(const SymbolValues& binding) {
  for (const auto& d : dependent_) {
    bool changed = bound_.empty();
    for (size_t i = 0; i < d.symbols.size() && !changed; ++i) {
      const auto now = binding.find(d.symbols[i]);
      const auto was = bound_.find(d.symbols[i]);
      changed = now == binding.end() || was == bound_.end() || now->second != was->second;
    }
    if (!changed) continue;
    setShape(*d.name, *d.shape, binding);
    for (size_t n : touching_[*d.name]) dirty_[n] = 1;
  }
  const bool first = bound_.empty();
  bound_ = binding;
  // Which nodes are views, and which run on the host, at these shapes changes only where
  // shapes did: the full pass runs when one flips.
  bool flipped = first;
  for (size_t i : hostable_) {
    const auto& n = graph_.node(i);
    bool host = elementCount(shapes_.at(n.output(0))) <= kHostElements;
    for (const auto& in : n.input()) {
      auto p = hostProducer_.find(in);
      if (!in.empty() && p != hostProducer_.end() && !onHost_[p->second]) host = false;
      if (deviceFed_.count(in)) host = false;
    }
    if (host != static_cast<bool>(onHost_[i])) {
      onHost_[i] = host;
      flipped = true;
    }
  }
  for (size_t i : kernelNodes_)
    if (dirty_[i] && !onHost_[i]) {
      SubView at;
      if (viewKind(i, &at) != runView_[i]) flipped = true;
    }
  if (flipped) {
    runAliases_.clear();
    runNodes_.clear();
    for (auto& [name, v] : subViews_) v.active = false;
    for (size_t i : kernelNodes_) {
      const auto& n = graph_.node(i);
      if (onHost_[i]) continue;
      SubView at;
      runView_[i] = viewKind(i, &at);
      if (runView_[i] == 1) {
        runAliases_[n.output(0)] = root(n.input(0));
      } else if (runView_[i] == 2) {
        SubView& v = subViews_[n.output(0)];  // its sub-buffer, if any, is remade by refreshSubViews when it moved
        v.active = true;
        v.root = at.root;
        v.offset = at.offset;
        v.bytes = at.bytes;
      } else {
        runNodes_.push_back(i);
      }
    }
    hostRun_.clear();
    for (size_t i : hostable_)
      if (onHost_[i]) hostRun_.push_back(i);
    deviceReads_.clear();
    for (size_t i : runNodes_)
      for (const auto& in : graph_.node(i).input())
        if (!in.empty()) deviceReads_.insert(root(in));
    hostUploads_.clear();
    for (size_t i : hostRun_) {
      const std::string& out = graph_.node(i).output(0);
      if (deviceReads_.count(out)) hostUploads_.push_back(out);
    }
  }
  for (size_t i : tensorNodes_) {
    if ((!dirty_[i] && !flipped) || onHost_[i]) continue;
    const auto& n = graph_.node(i);
    for (const auto& out : n.output())
      if (!out.empty() && !aliases_.count(out) && !runAliases_.count(out) && !activeSubView(out))
        ensure(out, elementCount(shapes_[out]) * elementBytes(analysis_.at(out).dtype));
  }
  if (!subViews_.empty()) refreshSubViews();
}

bool Executor::subViewAt(const onnx::NodeProto& n, SubView* v) const {
  const int64_t off = sliceRunOffset(n, *this);
  if (off <= 0 || graphOutputs_.count(n.output(0))) return false;
  const size_t size = elementBytes(analysis_.at(n.output(0)).dtype);
  std::string base = root(n.input(0));
  size_t offset = static_cast<size_t>(off) * size;
  if (const SubView* s = activeSubView(base)) {  // a Slice of one: the same root
    offset += s->offset;
    base = s->root;
  }
  // Kernel outputs only: graph inputs and what the host computes sit in the upload arena,
  // which moves; graph outputs are read back and carried. A plan's regions start on the
  // device's alignment (tl-plan --align, checked at load), so the offset alone decides.
  if (!kernelOutputs_.count(base) || graphOutputs_.count(base)) return false;
  if (auto h = hostProducer_.find(base); h != hostProducer_.end() && onHost_[h->second]) return false;  // uploaded
  if (offset % std::max<size_t>(device_.info().subBufferAlign, 1)) return false;
  v->root = base;
  v->offset = offset;
  v->bytes = static_cast<size_t>(elementCount(shape(n.output(0)))) * size;
  return v->bytes > 0;
}

const Executor::SubView* Executor::activeSubView(const std::string& tensor) const {
  const auto v = subViews_.find(tensor);
  return v != subViews_.end() && v->second.active ? &v->second : nullptr;
}

Executor::Extent Executor::extent(const std::string& tensor) const {
  std::string base = root(tensor);
  const SubView* v = activeSubView(base);
  if (v) base = v->root;
  const Buffer& b = rootBuffer(base);
  const size_t at = v ? v->offset : 0, bytes = v ? v->bytes : b.capacity;
  if (auto p = planned_.find(base); p != planned_.end() && b.mem == p->second)
    if (auto o = planOrigins_.find(base); o != planOrigins_.end()) return {planArena_, o->second + at, o->second + at + bytes};
  if (auto r = regions_.find(base); r != regions_.end() && b.mem == r->second.sub)
    return {uploadArena_, r->second.offset + at, r->second.offset + at + bytes};
  return {b.mem, at, at + bytes};
}

bool Executor::overlaps(const std::string& a, const std::string& b) const {
  const Extent x = extent(a), y = extent(b);
  return x.base == y.base && x.begin < y.end && y.begin < x.end;
}

char Executor::viewKind(size_t node, SubView* at) const {
  const auto& n = graph_.node(node);
  return isRunView(n, *this) ? 1 : subViewAt(n, at) ? 2 : 0;
}

void Executor::refreshSubViews() {
  for (auto& [name, v] : subViews_) {
    if (!v.active) continue;
    const Buffer& r = buffers_.at(v.root);
    cl_mem parent = r.mem;  // a buffer of its own, or a region of the plan's arena
    size_t origin = v.offset;
    if (auto p = planned_.find(v.root); p != planned_.end() && r.mem == p->second) {
      parent = planArena_;
      origin += planOrigins_.at(v.root);
    }
    if (v.buf.mem && v.parent == parent && v.origin == origin && v.buf.capacity == v.bytes) continue;
    if (v.buf.mem) clReleaseMemObject(v.buf.mem);
    cl_int err;
    cl_buffer_region where{origin, v.bytes};
    v.buf.mem = clCreateSubBuffer(parent, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &where, &err);
    clCheck(err, "clCreateSubBuffer", "tensor '" + name + "', a view of '" + v.root + "'");
    v.buf.capacity = v.bytes;
    v.parent = parent;
    v.origin = origin;
  }
}

cl_kernel Executor::siteKernel(const std::string& name, const char* why, size_t* site) {
  auto& r = recordings_.at(recording_);
  if (nextSite_ == r.sites.size()) r.sites.emplace_back();
  Site& s = r.sites[nextSite_];
  if (s.kernel != name) {  // a new site, or the node now lowers to another kernel there
    auto made = std::find_if(s.made.begin(), s.made.end(), [&](const auto& m) { return m.first == name; });
    if (made == s.made.end()) made = s.made.insert(s.made.end(), {name, kernels_.fresh(name)});
    s.k = made->second;
    s.kernel = name;
  }
  s.why = why;
  *site = nextSite_++;
  return s.k;
}

void Executor::launchSite(size_t site, cl_uint dims, const size_t* global, const size_t* local, int64_t cacheBytes) {
  auto& r = recordings_.at(recording_);
  Site& s = r.sites.at(site);
  s.dims = dims;
  s.cacheBytes = cacheBytes;
  for (cl_uint d = 0; d < 3; ++d) {
    s.global[d] = d < dims ? global[d] : 1;
    s.local[d] = d < dims ? local[d] : 1;
  }
  r.runs.push_back(site);
  launches_.emplace_back(recording_, site);
  enqueueSite(recording_, s);
}

void Executor::enqueueSite(size_t node, const Site& s) {
  cl_event e = nullptr;
  clCheck(timed([&] {
            return clEnqueueNDRangeKernel(device_.queue(), s.k, s.dims, nullptr, s.global, s.local, 0, nullptr,
                                          device_.profiling() ? &e : nullptr);
          }),
          "clEnqueueNDRangeKernel", "kernel " + s.kernel + ", node '" + graph_.nodeName(node) + "'");
  recordEvent(node, e);
  traffic_.written += s.cacheBytes;
}

void Executor::lowerOrReplay(size_t node) {
  Recording& r = recordings_[node];
  bool same = r.valid && !dirty_[node];
  for (size_t i = 0; same && i < r.buffers.size(); ++i) same = r.buffers[i].first->mem == r.buffers[i].second;
  if (same) {
    for (size_t site : r.runs) {
      launches_.emplace_back(node, site);
      enqueueSite(node, r.sites[site]);
    }
    return;
  }
  r.valid = false;
  r.runs.clear();
  r.buffers.clear();
  recording_ = node;
  nextSite_ = 0;
  try {
    enqueueNode(*this, node);
  } catch (...) {
    recording_ = static_cast<size_t>(-1);
    throw;
  }
  recording_ = static_cast<size_t>(-1);
  r.valid = true;
  dirty_[node] = 0;
}

cl_mem Executor::operand(const std::string& tensor) {
  // Folded tensors read as data (Add(Range, past), Where(..., shape values)) go up when first read after a change.
  if (!stale_.empty() && stale_.erase(tensor)) {
    uploadFolded(tensor);
    foldedRead_.insert(tensor);
  }
  const Buffer& b = rootBuffer(tensor);
  if (recording_ != static_cast<size_t>(-1)) recordings_[recording_].buffers.emplace_back(&b, b.mem);
  return b.mem;
}

void Executor::recordEvent(size_t node, cl_event e) {
  if (e) events_.emplace_back(node, e);
}

void Executor::enqueue(const std::vector<Tensor>& inputs, const std::vector<Carry>& carried) {
  // Staging copies are reused run to run: a run nobody read must finish first. A replay fed
  // its token on the device (feedToken) rewrites only arenaHost_, whose last write must be
  // done, and goes ahead of the run before it.
  const bool ahead = pending_ && fedSlot_ >= 0 && replay_.valid && uploadsWritten_ && !device_.profiling();
  if (ahead) clCheck(clWaitForEvents(1, &uploadsWritten_), "clWaitForEvents", "the last run's uploads");
  if (pending_ && !ahead) {
    clCheck(clFinish(device_.queue()), "clFinish");
    ++syncs_;
  }
  pending_ = true;
  const auto started = std::chrono::steady_clock::now();
  if (tryReplay(inputs, carried)) {
    enqueueSeconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    return;
  }
  if (ahead) {  // not a replay after all: the full path reuses staging and may move buffers
    clCheck(clFinish(device_.queue()), "clFinish");
    ++syncs_;
  }
  dropReplay();
  launches_.clear();
  std::unordered_map<std::string, const Tensor*> given;
  for (const auto& t : inputs) {
    if (!analysis_.tensors.count(t.name) || analysis_.at(t.name).cls != TensorClass::Input) {
      std::string names;
      for (const auto& in : graph_.proto().input())
        if (analysis_.at(in.name()).cls == TensorClass::Input) names += (names.empty() ? "" : ", ") + in.name();
      throw Error("the model has no input '" + t.name + "' (its inputs: " + names + ")");
    }
    if (!given.emplace(t.name, &t).second) throw Error("input '" + t.name + "' is given twice");
  }
  std::unordered_map<std::string, const Carry*> carriedBy;
  for (const auto& c : carried) carriedBy[c.input] = &c;
  std::vector<std::pair<std::string, std::vector<int64_t>>> shapes;
  // In-place caches: their true length before this run, the same for all (-1: none given).
  int64_t kvPast = -1;
  bool kvCarried = false;
  auto kvLength = [&](const std::string& name, int64_t rows) {
    if (kvPast >= 0 && rows != kvPast)
      throw Error("cache input '" + name + "' holds " + std::to_string(rows) + " tokens, another " + std::to_string(kvPast));
    kvPast = rows;
  };
  for (const auto& in : graph_.proto().input()) {
    const auto& info = analysis_.at(in.name());
    if (info.cls != TensorClass::Input) continue;
    const auto k = kvOf_.find(in.name());
    if (auto c = carriedBy.find(in.name()); c != carriedBy.end() && k != kvOf_.end()) {
      const KvCache& kc = kv_[k->second];
      if (c->second->fromTensor != kc.present)
        throw Error("input '" + in.name() + "' is an in-place cache: it is carried from '" + kc.present + "' only");
      kvLength(in.name(), kvRows_);
      kvCarried = true;
      shapes.emplace_back(in.name(), std::vector<int64_t>{kvBatch_, kc.H, kvRows_, kc.D});
      continue;
    }
    if (auto c = carriedBy.find(in.name()); c != carriedBy.end()) {
      if (!shapes_.count(c->second->fromTensor)) throw Error("input '" + in.name() + "' is carried from a tensor no run made");
      shapes.emplace_back(in.name(), shapes_.at(c->second->fromTensor));
      continue;
    }
    auto it = given.find(in.name());
    if (it == given.end()) throw Error("input '" + in.name() + "' is missing");
    if (it->second->dtype != info.dtype)
      throw Error("input '" + in.name() + "' is " + dtypeName(it->second->dtype) + ", the model expects " +
                  dtypeName(info.dtype));
    if (k != kvOf_.end() && it->second->dims.size() == 4) kvLength(in.name(), it->second->dims[2]);
    shapes.emplace_back(in.name(), it->second->dims);
  }
  SymbolValues binding = bindFromInputs(analysis_, shapes);
  int64_t kvTotal = 0;  // the caches' true length after this run
  std::vector<Tensor> padded;  // key masks padded to a bucket
  if (kvPast >= 0) {
    kvTotal = evaluateDims({analysis_.at(kv_[0].present).dims[2]}, binding)[0];
    if (kvTotal > kvCapacity_)
      throw Error("this run makes the caches " + std::to_string(kvTotal) + " tokens long, over the plan's --max-seq " +
                      std::to_string(kvCapacity_) + " (run tl-plan with a larger one)",
                  ExitCode::BadInput);
    // A step on carried caches binds a bucket's length: the keys past the true length are
    // padding, hidden by the causal mask at the true length (att_offset) and by zeros in
    // the key masks, so every step within the bucket replays the same launches.
    const int64_t bucket = bucketOf(kvTotal);
    if (kvCarried && bucket > kvTotal) {
      padded.reserve(kvMasks_.size());
      for (auto& [name, dims] : shapes) {
        if (kvOf_.count(name)) dims[2] += bucket - kvTotal;
        if (std::find(kvMasks_.begin(), kvMasks_.end(), name) == kvMasks_.end() || !given.count(name)) continue;
        const Tensor& m = *given[name];
        if (m.dims.empty() || m.dims.back() != kvTotal)
          throw Error("key mask '" + name + "' is not [..., " + std::to_string(kvTotal) + "]");
        Tensor p;
        p.name = m.name;
        p.dtype = m.dtype;
        p.dims = m.dims;
        p.dims.back() = bucket;
        p.bytes.resize(static_cast<size_t>(elementCount(p.dims)) * dtypeBits(m.dtype) / 8);
        padRows(m.bytes, dtypeBits(m.dtype) / 8, kvTotal, bucket, p.bytes.data());
        dims = p.dims;
        padded.push_back(std::move(p));
        given[name] = &padded.back();
      }
      binding = bindFromInputs(analysis_, shapes);
    }
  }
  traffic_ = {};
  releaseEvents();
  // Carried data moves before prepare() may grow (and so replace) the source buffers. A
  // tensor that a kernel wrote in its own buffer (present.* from a Concat) hands that
  // buffer to the input and takes the input's, which its kernel overwrites this run: no
  // bytes move. Anything else (a view, a tensor carried twice) is copied.
  std::unordered_map<std::string, int> carriedFrom;
  for (const auto& c : carried) ++carriedFrom[root(c.fromTensor)];
  for (const auto& c : carried) {
    if (kvOf_.count(c.input)) continue;  // the cache is its own carry
    const std::string& from = root(c.fromTensor);
    if (from == c.input) continue;  // the input is its own carry: already there
    if (from == c.fromTensor && kernelOutputs_.count(from) && carriedFrom[from] == 1 && buffers_.count(from)) {
      std::swap(buffers_[c.input], buffers_[from]);
      if (auto p = plannedOutputs_.find(from); p != plannedOutputs_.end()) ensure(from, p->second);  // once
      continue;
    }
    size_t bytes = static_cast<size_t>(elementCount(shapes_.at(c.fromTensor))) * elementBytes(analysis_.at(c.input).dtype);
    cl_mem src = buffer(c.fromTensor);
    Buffer& dst = ensure(c.input, bytes);
    if (!bytes) continue;
    cl_event e = nullptr;
    clCheck(clEnqueueCopyBuffer(device_.queue(), src, dst.mem, 0, 0, bytes, 0, nullptr, device_.profiling() ? &e : nullptr),
            "clEnqueueCopyBuffer", "input '" + c.input + "'");
    if (e) extraEvents_.push_back({c.input, "CacheCarry", e});
    traffic_.copied += static_cast<int64_t>(bytes);
  }
  prepare(binding);
  hostValues_.clear();
  if (!hostRun_.empty()) {
    for (const auto& [name, t] : given)
      if (hostInputs_.count(name)) hostValues_[name] = *t;
    evaluateHostNodes();
  }
  // Inputs only host nodes read stay on the host.
  for (const auto& [name, t] : given) {
    if (auto k = kvOf_.find(name); k != kvOf_.end()) {
      writeCache(kv_[k->second], *t);
      continue;
    }
    if (hostRun_.empty() || !hostInputs_.count(name) || deviceReads_.count(name)) stageUpload(name, t->bytes.data(), t->bytes.size());
  }
  if (!kv_.empty()) {
    const int32_t rows = static_cast<int32_t>(std::max<int64_t>(kvPast, 0));
    stageUpload(kKvRows, &rows, sizeof rows);
  }
  for (const auto& name : hostUploads_) stageUpload(name, hostValues_.at(name).bytes.data(), hostValues_.at(name).bytes.size());
  // Folded tensors that kernels read go up with them, before any kernel (a write between
  // kernels costs NVIDIA's OpenCL about 40 us).
  for (const auto& name : foldedRead_) {
    if (!stale_.erase(name)) continue;
    const auto bytes = foldedBytes(name);
    stageUpload(name, bytes.data(), bytes.size());
  }
  flushUploads();
  copyFedToken();
  for (size_t i : runNodes_) lowerOrReplay(i);
  recordReplay(inputs, carried, kvPast, kvTotal, kvCarried ? bucketOf(kvTotal) : kvTotal);
  if (kvPast >= 0) kvRows_ = kvTotal;
  enqueueSeconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}

void Executor::evaluateHostNodes() {
  for (size_t i : hostRun_) {
    const auto& n = graph_.node(i);
    std::vector<const Tensor*> in;
    for (const auto& name : n.input()) in.push_back(name.empty() ? nullptr : &hostValue(name));
    try {
      hostValues_[n.output(0)] = evaluateOnHost(n, in, shape(n.output(0)), analysis_.at(n.output(0)).dtype);
    } catch (const Error& e) {
      throw Error("node '" + graph_.nodeName(i) + "' (" + n.op_type() + ", on the host): " + e.what(), e.code());
    }
  }
}

void Executor::dropReplay() {
  for (auto* c : replay_.commands)
    if (c) replay_.api->release(c);
  replay_ = Replay{};
}

void Executor::recordReplay(const std::vector<Tensor>& inputs, const std::vector<Carry>& carried, int64_t kvPast,
                            int64_t kvTotal, int64_t bucket) {
  Replay r;
  for (const auto& c : carried) {
    if (!kvOf_.count(c.input)) return;  // a carry that swaps or copies buffers changes the arguments
    r.carried.emplace_back(c.input, c.fromTensor);
  }
  // The upload region of a tensor this run wrote (kNotUploaded: only host nodes read it).
  auto offset = [&](const std::string& name, bool* ok) {
    auto region = regions_.find(name);
    if (region == regions_.end() || buffers_[name].mem != region->second.sub) *ok = false;
    return *ok ? region->second.offset : 0;
  };
  bool ok = true;
  for (const auto& t : inputs) {
    if (kvOf_.count(t.name)) return;  // caches given as data: a check, not a decode loop
    const bool uploaded = hostRun_.empty() || !hostInputs_.count(t.name) || deviceReads_.count(t.name);
    r.names.push_back(t.name);
    r.dims.push_back(t.dims);
    r.dtypes.push_back(t.dtype);
    r.isMask.push_back(std::find(kvMasks_.begin(), kvMasks_.end(), t.name) != kvMasks_.end());
    r.offsets.push_back(uploaded ? offset(t.name, &ok) : kNotUploaded);
  }
  for (const auto& name : hostUploads_) r.hostOffsets.push_back(offset(name, &ok));
  if (!kv_.empty()) {
    if (kvPast < 0) return;
    r.offsets.push_back(offset(kKvRows, &ok));
  }
  if (!ok) return;
  r.fresh = kvTotal - std::max<int64_t>(kvPast, 0);
  r.bucket = bucket;
  r.launches = launches_;
  r.writes = lastWrites_;
  r.cacheBytes = traffic_.written;
  r.valid = true;
  replay_ = std::move(r);
}

bool Executor::tryReplay(const std::vector<Tensor>& inputs, const std::vector<Carry>& carried) {
  Replay& r = replay_;
  if (!r.valid || inputs.size() != r.names.size() || carried.size() != r.carried.size()) return false;
  for (size_t i = 0; i < carried.size(); ++i)
    if (carried[i].input != r.carried[i].first || carried[i].fromTensor != r.carried[i].second) return false;
  const int64_t past = kv_.empty() ? 0 : kvRows_, total = past + r.fresh;
  if (!kv_.empty() && (total > kvCapacity_ || (carried.empty() ? total : bucketOf(total)) != r.bucket)) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (t.name != r.names[i] || t.dtype != r.dtypes[i] || t.dims.size() != r.dims[i].size()) return false;
    for (size_t d = 0; d < t.dims.size(); ++d)
      if (t.dims[d] != (r.isMask[i] && d + 1 == t.dims.size() ? total : r.dims[i][d])) return false;
  }
  if (!hostRun_.empty()) {
    for (const auto& t : inputs)
      if (hostInputs_.count(t.name)) hostValues_[t.name] = t;
    evaluateHostNodes();
    for (size_t i = 0; i < hostUploads_.size(); ++i) {
      const auto& bytes = hostValues_.at(hostUploads_[i]).bytes;
      std::memcpy(arenaHost_.data() + r.hostOffsets[i], bytes.data(), bytes.size());
    }
  }
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (r.offsets[i] == kNotUploaded) continue;
    uint8_t* at = arenaHost_.data() + r.offsets[i];
    if (r.isMask[i]) padRows(t.bytes, dtypeBits(t.dtype) / 8, total, r.bucket, at);
    else std::memcpy(at, t.bytes.data(), t.bytes.size());
  }
  if (!kv_.empty()) {
    const int32_t rows = static_cast<int32_t>(past);
    std::memcpy(arenaHost_.data() + r.offsets.back(), &rows, sizeof rows);
  }
  for (const auto& [from, to] : r.writes) writeUploads(from, to);
  copyFedToken();
  releaseEvents();
  traffic_ = {};
  const CommandBufferApi* cb = device_.commandBuffers();
  if (cb && !device_.profiling()) {
    cl_command_queue q = device_.queue();
    cl_command_buffer_khr& commands = r.commands[r.turn];
    r.turn ^= 1;
    if (!commands) {
      cl_int err;
      commands = cb->create(1, &q, nullptr, &err);
      clCheck(err, "clCreateCommandBufferKHR");
      r.api = cb;
      for (const auto& [node, site] : r.launches) {
        const Site& s = recordings_[node].sites[site];
        clCheck(cb->ndrange(commands, nullptr, nullptr, s.k, s.dims, nullptr, s.global, s.local, 0, nullptr, nullptr, nullptr),
                "clCommandNDRangeKernelKHR", "kernel " + s.kernel + ", node '" + graph_.nodeName(node) + "'");
      }
      clCheck(cb->finalize(commands), "clFinalizeCommandBufferKHR");
    }
    clCheck(timed([&] { return cb->enqueue(0, nullptr, commands, 0, nullptr, nullptr); }), "clEnqueueCommandBufferKHR");
    traffic_.written = r.cacheBytes;
  } else {
    for (const auto& [node, site] : r.launches) enqueueSite(node, recordings_[node].sites[site]);
  }
  if (!kv_.empty()) kvRows_ = total;
  ++replays_;
  return true;
}

void Executor::uploadFolded(const std::string& tensor) {
  const auto bytes = foldedBytes(tensor);
  upload(tensor, bytes.data(), bytes.size());
}

void Executor::stageUpload(const std::string& tensor, const void* data, size_t bytes) {
  const auto* p = static_cast<const uint8_t*>(data);
  pendingUploads_.push_back({tensor, std::vector<uint8_t>(p, p + bytes)});
}

void Executor::flushUploads() {
  if (pendingUploads_.empty()) return;
  bool fits = true;
  for (const auto& u : pendingUploads_) {
    auto r = regions_.find(u.name);
    fits = fits && r != regions_.end() && r->second.capacity >= u.bytes.size() && buffers_[u.name].mem == r->second.sub;
  }
  if (!fits) layoutUploads();
  for (const auto& u : pendingUploads_)
    std::copy(u.bytes.begin(), u.bytes.end(), arenaHost_.begin() + static_cast<std::ptrdiff_t>(regions_.at(u.name).offset));
  // One write per contiguous run of pending regions: one in a decode step. Regions not
  // pending keep their device bytes (a host node that now runs on the device writes there).
  std::unordered_set<std::string> pending;
  for (const auto& u : pendingUploads_) pending.insert(u.name);
  size_t from = 0, to = 0;
  lastWrites_.clear();
  auto write = [&] {
    if (to <= from) return;
    writeUploads(from, to);
    lastWrites_.emplace_back(from, to);
  };
  for (const auto& name : regionOrder_) {
    const Region& r = regions_.at(name);
    if (!pending.count(name)) {
      write();
      from = to = r.offset + r.capacity;
      continue;
    }
    if (to != r.offset) {
      write();
      from = r.offset;
    }
    to = r.offset + r.capacity;
  }
  write();
  pendingUploads_.clear();
}

void Executor::writeUploads(size_t from, size_t to) {
  cl_event e = nullptr;
  clCheck(timed([&] {
            return clEnqueueWriteBuffer(device_.queue(), uploadArena_, CL_FALSE, from, to - from, arenaHost_.data() + from, 0,
                                        nullptr, &e);
          }),
          "clEnqueueWriteBuffer", "the run's uploads");
  if (uploadsWritten_) clReleaseEvent(uploadsWritten_);
  uploadsWritten_ = e;
}

void Executor::copyFedToken() {
  if (fedSlot_ < 0) return;
  const std::string input = fedInput_;
  const int slot = fedSlot_;
  fedSlot_ = -1;
  if (!analysis_.tensors.count(input) || analysis_.at(input).cls != TensorClass::Input ||
      analysis_.at(input).dtype != DType::Int64 || elementCount(shape(input)) != 1)
    throw Error("input '" + input + "' is not one int64 token: it cannot take a token from the device");
  for (size_t i : hostRun_)
    for (const auto& in : graph_.node(i).input())
      if (in == input) throw Error("input '" + input + "' is read on the host: it cannot take a token from the device");
  clCheck(timed([&] { return clEnqueueCopyBuffer(device_.queue(), tokenSlots_[slot], buffer(input), 0, 0, sizeof(cl_long), 0, nullptr, nullptr); }),
          "clEnqueueCopyBuffer", "the token fed to '" + input + "'");
}

void Executor::layoutUploads() {
  const size_t align = std::max<size_t>(device_.info().subBufferAlign, 64);
  // Pending tensors first, in run order, with room to grow; then the regions kept from
  // before (their bytes are copied on the device).
  std::vector<std::pair<std::string, size_t>> layout;
  std::unordered_set<std::string> placed;
  for (const auto& u : pendingUploads_)
    if (placed.insert(u.name).second) layout.emplace_back(u.name, std::max<size_t>(u.bytes.size() * 2, 64));
  for (const auto& name : regionOrder_)
    if (placed.insert(name).second && buffers_[name].mem == regions_.at(name).sub) layout.emplace_back(name, regions_.at(name).capacity);
  size_t total = 0;
  std::unordered_map<std::string, Region> next;
  std::vector<std::string> order;
  for (auto& [name, cap] : layout) {
    cap = (cap + align - 1) / align * align;
    next[name] = {total, cap, nullptr};
    order.push_back(name);
    total += cap;
  }
  cl_int err;
  cl_mem arena = clCreateBuffer(device_.context(), CL_MEM_READ_WRITE, total, nullptr, &err);
  clCheck(err, "clCreateBuffer", "the upload arena");
  std::vector<uint8_t> host(total, 0);
  for (const auto& name : order) {
    Region& r = next[name];
    cl_buffer_region where{r.offset, r.capacity};
    r.sub = clCreateSubBuffer(arena, CL_MEM_READ_WRITE, CL_BUFFER_CREATE_TYPE_REGION, &where, &err);
    clCheck(err, "clCreateSubBuffer", "tensor '" + name + "'");
    Buffer& b = buffers_[name];
    if (auto old = regions_.find(name); old != regions_.end() && b.mem == old->second.sub) {
      // A region kept: its device bytes move with it; its host copy too.
      const size_t keep = std::min(old->second.capacity, r.capacity);
      clCheck(clEnqueueCopyBuffer(device_.queue(), uploadArena_, arena, old->second.offset, r.offset, keep, 0, nullptr, nullptr),
              "clEnqueueCopyBuffer", "tensor '" + name + "'");
      std::copy_n(arenaHost_.begin() + static_cast<std::ptrdiff_t>(old->second.offset), keep,
                  host.begin() + static_cast<std::ptrdiff_t>(r.offset));
    }
    if (b.mem) clReleaseMemObject(b.mem);
    b.mem = r.sub;
    clRetainMemObject(b.mem);  // the buffer and the region each hold one reference
    b.capacity = r.capacity;
  }
  for (auto& [name, r] : regions_) clReleaseMemObject(r.sub);
  if (uploadArena_) {
    clCheck(clFinish(device_.queue()), "clFinish");  // the copies out of the old arena
    clReleaseMemObject(uploadArena_);
  }
  uploadArena_ = arena;
  arenaHost_ = std::move(host);
  regions_ = std::move(next);
  regionOrder_ = std::move(order);
}

std::vector<float> Executor::readFloats(const std::string& tensor, int64_t offset, int64_t n) {
  if (analysis_.at(tensor).dtype != DType::Float) throw Error("tensor '" + tensor + "' is not float32");
  if (offset < 0 || offset + n > elementCount(shape(tensor))) throw Error("read past the end of '" + tensor + "'");
  std::vector<float> out(static_cast<size_t>(n));
  if (n)
    clCheck(clEnqueueReadBuffer(device_.queue(), buffer(tensor), CL_TRUE, offset * 4, n * 4, out.data(), 0, nullptr,
                                nullptr),
            "clEnqueueReadBuffer", "tensor '" + tensor + "'");
  pending_ = false;  // a blocking read on the in-order queue: everything before it is done
  ++syncs_;
  collectProfile();
  return out;
}

Executor::MemoryUse Executor::memoryUse(const std::vector<std::string>& cache) const {
  MemoryUse m;
  const std::unordered_set<std::string> caches(cache.begin(), cache.end());
  for (const auto& [name, b] : buffers_) {
    auto p = planned_.find(name);
    auto r = regions_.find(name);
    if (auto k = kvOf_.find(name); k != kvOf_.end()) {
      if (kv_[k->second].past == name) m.cache += b.capacity;  // one buffer for the pair
      continue;
    }
    if ((p != planned_.end() && b.mem == p->second) || (r != regions_.end() && b.mem == r->second.sub)) continue;
    const auto t = analysis_.tensors.find(name);
    if (caches.count(name)) m.cache += b.capacity;
    else if (t != analysis_.tensors.end() && t->second.cls == TensorClass::Constant) m.constants += b.capacity;
    else m.activations += b.capacity;
  }
  auto size = [](cl_mem mem) {
    size_t n = 0;
    if (mem) clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof n, &n, nullptr);
    return n;
  };
  m.activations += size(planArena_) + size(uploadArena_);
  return m;
}

void Executor::enqueueArgmax(const std::string& tensor, int64_t offset, int64_t n, cl_mem out) {
  if (analysis_.at(tensor).dtype != DType::Float) throw Error("tensor '" + tensor + "' is not float32");
  if (n < 1 || offset < 0 || offset + n > elementCount(shape(tensor))) throw Error("argmax past the end of '" + tensor + "'");
  cl_kernel k = kernels_.get("argmax_row_f32");
  const cl_mem in = buffer(tensor);
  const cl_long off = offset;
  const cl_int count = static_cast<cl_int>(n);
  clCheck(clSetKernelArg(k, 0, sizeof in, &in), "clSetKernelArg", "argmax");
  clCheck(clSetKernelArg(k, 1, sizeof off, &off), "clSetKernelArg", "argmax");
  clCheck(clSetKernelArg(k, 2, sizeof count, &count), "clSetKernelArg", "argmax");
  clCheck(clSetKernelArg(k, 3, sizeof out, &out), "clSetKernelArg", "argmax");
  const size_t items = 256;
  cl_event e = nullptr;
  clCheck(clEnqueueNDRangeKernel(device_.queue(), k, 1, nullptr, &items, &items, 0, nullptr,
                                 device_.profiling() ? &e : nullptr),
          "clEnqueueNDRangeKernel", "kernel argmax_row_f32, tensor '" + tensor + "'");
  if (e) extraEvents_.push_back({tensor, "ArgMax", e});
}

int64_t Executor::argmax(const std::string& tensor, int64_t offset, int64_t n) {
  cl_int err = CL_SUCCESS;
  if (!argmaxOut_) argmaxOut_ = clCreateBuffer(device_.context(), CL_MEM_READ_WRITE, sizeof(cl_long), nullptr, &err);
  clCheck(err, "clCreateBuffer", "argmax");
  enqueueArgmax(tensor, offset, n, argmaxOut_);
  cl_long at = 0;
  clCheck(clEnqueueReadBuffer(device_.queue(), argmaxOut_, CL_TRUE, 0, sizeof at, &at, 0, nullptr, nullptr),
          "clEnqueueReadBuffer", "argmax of '" + tensor + "'");
  pending_ = false;
  ++syncs_;
  collectProfile();
  return at;
}

void Executor::argmaxToSlot(const std::string& tensor, int64_t offset, int64_t n, int slot) {
  if (slot < 0 || slot > 1) throw Error("token slot " + std::to_string(slot) + " is not 0 or 1");
  if (tokenRead_[slot]) tokenAt(slot);  // its last read lands in tokenHost_ first
  cl_int err = CL_SUCCESS;
  if (!tokenSlots_[slot]) tokenSlots_[slot] = clCreateBuffer(device_.context(), CL_MEM_READ_WRITE, sizeof(cl_long), nullptr, &err);
  clCheck(err, "clCreateBuffer", "token slot");
  enqueueArgmax(tensor, offset, n, tokenSlots_[slot]);
  clCheck(clEnqueueReadBuffer(device_.queue(), tokenSlots_[slot], CL_FALSE, 0, sizeof(cl_long), &tokenHost_[slot], 0, nullptr,
                              &tokenRead_[slot]),
          "clEnqueueReadBuffer", "argmax of '" + tensor + "'");
}

void Executor::feedToken(const std::string& input, int slot) {
  if (slot < 0 || slot > 1 || !tokenSlots_[slot]) throw Error("token slot " + std::to_string(slot) + " holds no argmax");
  fedInput_ = input;
  fedSlot_ = slot;
  if (deviceFed_.insert(input).second) dropReplay();  // its readers move to the device (prepare)
}

int64_t Executor::tokenAt(int slot) {
  if (slot < 0 || slot > 1 || !tokenRead_[slot]) throw Error("token slot " + std::to_string(slot) + " has no read under way");
  clCheck(clWaitForEvents(1, &tokenRead_[slot]), "clWaitForEvents", "a token's read");
  clReleaseEvent(tokenRead_[slot]);
  tokenRead_[slot] = nullptr;
  ++syncs_;
  return tokenHost_[slot];
}

std::vector<Tensor> Executor::run(const std::vector<Tensor>& inputs, const std::vector<std::string>& wanted) {
  enqueue(inputs, {});
  std::vector<std::string> names = wanted;
  if (names.empty())
    for (const auto& o : graph_.proto().output()) names.push_back(o.name());
  std::vector<Tensor> out;
  for (const auto& name : names) {
    if (!analysis_.tensors.count(name)) throw Error("the model has no tensor '" + name + "'");
    const auto& info = analysis_.at(name);
    Tensor t;
    t.name = name;
    t.dtype = info.dtype;
    t.dims = shape(name);
    if (info.cls == TensorClass::Shape) {
      t.bytes = foldedBytes(name);
    } else if (auto p = hostProducer_.find(name); p != hostProducer_.end() && onHost_[p->second]) {
      t.bytes = hostValues_.at(name).bytes;
    } else if (auto k = kvOf_.find(name); k != kvOf_.end()) {
      t.bytes = readCache(kv_[k->second], t.dims.at(2));
    } else {
      t.bytes.resize(static_cast<size_t>(elementCount(t.dims)) * elementBytes(info.dtype));
      if (!t.bytes.empty())
        clCheck(clEnqueueReadBuffer(device_.queue(), buffer(name), CL_TRUE, 0, t.bytes.size(), t.bytes.data(), 0,
                                    nullptr, nullptr),
                "clEnqueueReadBuffer", "output '" + name + "'");
    }
    out.push_back(std::move(t));
  }
  clCheck(clFinish(device_.queue()), "clFinish");
  pending_ = false;
  ++syncs_;
  collectProfile();
  return out;
}

std::vector<Executor::LaunchNote> Executor::explain() const {
  std::vector<LaunchNote> notes;
  for (const auto& [node, site] : launches_) {
    const Site& s = recordings_.at(node).sites.at(site);
    notes.push_back({graph_.nodeName(node), opKey(graph_.node(node)), s.kernel, s.why});
  }
  return notes;
}

void Executor::collectProfile() {
  profile_.clear();
  if (!device_.profiling()) return;
  clCheck(clFinish(device_.queue()), "clFinish");
  auto ms = [](cl_event e) {
    cl_ulong start = 0, end = 0;
    clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof(start), &start, nullptr);
    clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof(end), &end, nullptr);
    return (end - start) * 1e-6;
  };
  for (auto& x : extraEvents_) profile_.push_back({x.name, x.op, ms(x.e)});
  for (auto& [node, e] : events_) profile_.push_back({graph_.nodeName(node), graph_.node(node).op_type(), ms(e)});
}

}  // namespace tl
