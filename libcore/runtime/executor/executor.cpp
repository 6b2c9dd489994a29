// The executor's construction and its step loop: a run binds the symbols, evaluates its
// host nodes, uploads, and enqueues each node's launches (lowered, or replayed as
// recorded); results come back through readFloats, argmax and the token slots.
#include "runtime/executor.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>

#include "cli/error.h"
#include "runtime/executor/internal.h"
#include "runtime/lower/lower.h"
#include "tensor/tensor.h"

namespace tl {

size_t elementBytes(DType t) {
  size_t bits = dtypeBits(t);
  if (bits < 8) throw Error(std::string("dtype ") + dtypeName(t) + " has no device layout", ExitCode::Device);
  return bits / 8;
}

void padRows(const std::vector<uint8_t>& rows, size_t width, int64_t from, int64_t to, uint8_t* out) {
  const size_t f = static_cast<size_t>(from) * width, t = static_cast<size_t>(to) * width;
  for (size_t r = 0; f && r < rows.size() / f; ++r) {
    std::memcpy(out + r * t, rows.data() + r * f, f);
    std::memset(out + r * t + f, 0, t - f);
  }
}

Executor::Executor(Device& device, const Model& model, const Graph& graph, const ShapeAnalysis& analysis)
    : device_(device), kernels_(device, planKvType(model)), model_(model), graph_(graph), analysis_(analysis) {
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
        ensure(out, kvOf_.count(out) ? static_cast<size_t>(kvBytes(elementCount(shapes_[out])))
                                     : elementCount(shapes_[out]) * elementBytes(analysis_.at(out).dtype));
  }
  if (!subViews_.empty()) refreshSubViews();
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
    if (!kvCarried) kvLens_.assign(static_cast<size_t>(kvBatch_), std::max<int64_t>(kvPast, 0));
    std::vector<uint8_t> rows(kvLens_.size() * sizeof(int32_t));
    uploadCacheRows(rows.data());
    stageUpload(kKvRows, rows.data(), rows.size());
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
  if (kvPast >= 0) {
    for (auto& rows : kvLens_) rows += kvTotal - kvPast;
    kvRows_ = kvTotal;
  }
  enqueueSeconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
}


std::vector<float> Executor::readFloats(const std::string& tensor, int64_t offset, int64_t n) {
  if (analysis_.at(tensor).dtype != DType::Float) throw Error("tensor '" + tensor + "' is not float32");
  if (offset < 0 || offset + n > elementCount(shape(tensor))) throw Error("read past the end of '" + tensor + "'");
  std::vector<float> out(static_cast<size_t>(n));
  if (n)
    clCheck(clEnqueueReadBuffer(device_.queue(), buffer(tensor), CL_TRUE, offset * 4, n * 4, out.data(), 0, nullptr,
                                nullptr),
            "clEnqueueReadBuffer", "tensor '" + tensor + "'");
  synced();  // a blocking read on the in-order queue: everything before it is done
  return out;
}


void Executor::enqueueArgmax(const std::string& tensor, int64_t offset, int64_t n, cl_mem out, int64_t rows) {
  if (analysis_.at(tensor).dtype != DType::Float) throw Error("tensor '" + tensor + "' is not float32");
  if (n < 1 || rows < 1 || offset < 0 || offset + rows * n > elementCount(shape(tensor)))
    throw Error("argmax past the end of '" + tensor + "'");
  cl_kernel k = kernels_.get("argmax_row_f32");
  const cl_mem in = buffer(tensor);
  const cl_long off = offset;
  const cl_int count = static_cast<cl_int>(n);
  clCheck(clSetKernelArg(k, 0, sizeof in, &in), "clSetKernelArg", "argmax");
  clCheck(clSetKernelArg(k, 1, sizeof off, &off), "clSetKernelArg", "argmax");
  clCheck(clSetKernelArg(k, 2, sizeof count, &count), "clSetKernelArg", "argmax");
  clCheck(clSetKernelArg(k, 3, sizeof out, &out), "clSetKernelArg", "argmax");
  const size_t items = 256, global = items * static_cast<size_t>(rows);
  cl_event e = nullptr;
  clCheck(clEnqueueNDRangeKernel(device_.queue(), k, 1, nullptr, &global, &items, 0, nullptr,
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
  synced();
  return checkedToken(at);
}


void Executor::argmaxToSlot(const std::string& tensor, int64_t offset, int64_t n, int slot, int64_t rows) {
  if (slot < 0 || slot > 1) throw Error("token slot " + std::to_string(slot) + " is not 0 or 1");
  if (tokenRead_[slot]) tokensAt(slot);  // its last read lands in tokenHost_ first
  cl_int err = CL_SUCCESS;
  if (slotCapacity_[slot] < static_cast<size_t>(rows)) {
    if (tokenSlots_[slot]) clReleaseMemObject(tokenSlots_[slot]);
    tokenSlots_[slot] = clCreateBuffer(device_.context(), CL_MEM_READ_WRITE, rows * sizeof(cl_long), nullptr, &err);
    clCheck(err, "clCreateBuffer", "token slot");
    slotCapacity_[slot] = static_cast<size_t>(rows);
  }
  enqueueArgmax(tensor, offset, n, tokenSlots_[slot], rows);
  tokenHost_[slot].resize(static_cast<size_t>(rows));
  clCheck(clEnqueueReadBuffer(device_.queue(), tokenSlots_[slot], CL_FALSE, 0, rows * sizeof(cl_long), tokenHost_[slot].data(),
                              0, nullptr, &tokenRead_[slot]),
          "clEnqueueReadBuffer", "argmax of '" + tensor + "'");
}


void Executor::feedToken(const std::string& input, int slot) {
  if (slot < 0 || slot > 1 || !tokenSlots_[slot]) throw Error("token slot " + std::to_string(slot) + " holds no argmax");
  fedInput_ = input;
  fedSlot_ = slot;
  if (deviceFed_.insert(input).second) dropReplay();  // its readers move to the device (prepare)
}


std::vector<int64_t> Executor::tokensAt(int slot) {
  if (slot < 0 || slot > 1 || !tokenRead_[slot]) throw Error("token slot " + std::to_string(slot) + " has no read under way");
  clCheck(clWaitForEvents(1, &tokenRead_[slot]), "clWaitForEvents", "a token's read");
  clReleaseEvent(tokenRead_[slot]);
  tokenRead_[slot] = nullptr;
  ++syncs_;
  std::vector<int64_t> out;
  for (cl_long t : tokenHost_[slot]) out.push_back(checkedToken(t));
  return out;
}

// argmax_row_f32 gives -1 - i where x[i] is NaN or +inf (kernels/reduce.cl).
int64_t Executor::checkedToken(int64_t at) {
  if (at < 0) throw Error("the logits are not numbers (token " + std::to_string(-1 - at) + ": nan or inf): the model's output is broken");
  return at;
}


void Executor::synced() {
  pending_ = false;
  ++syncs_;
  collectProfile();
  checkGuards();
}


std::vector<Tensor> Executor::run(const std::vector<Tensor>& inputs, const std::vector<std::string>& wanted) {
  for (const auto& kept : lastRows_) keepLastRows(kept.first, 0);  // a run that returns tensors computes every row
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
  synced();
  return out;
}

}  // namespace tl
