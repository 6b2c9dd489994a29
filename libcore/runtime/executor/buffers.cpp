// Device buffers: each tensor's own or the one it shares (views, the plan's regions,
// sub-buffers of contiguous Slices), where its bytes lie, and what the executor holds.
#include <algorithm>

#include "cli/error.h"
#include "runtime/executor.h"
#include "runtime/executor/internal.h"
#include "runtime/lower/lower.h"

namespace tl {

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
  const bool exact = device_.info().exactBuffers;
  bytes = std::max<size_t>(bytes, exact ? 1 : 8);  // OpenCL buffers cannot be empty
  const auto p = planned_.find(tensor);
  const bool inPlan = p != planned_.end() && b.mem == p->second;
  // Exact buffers are remade for a smaller tensor too (but a plan's regions are kept).
  if (exact && !inPlan ? b.capacity == bytes : b.capacity >= bytes) return b;
  if (planEnforced_ && inPlan)
    throw Error("this run needs " + std::to_string(bytes) + " bytes for tensor '" + tensor + "', over the " +
                    std::to_string(b.capacity) + " its plan holds: a sequence longer than the plan's --max-seq " +
                    std::to_string(planMaxSeq_) + " (run tl-plan with a larger one)",
                ExitCode::BadInput);
  if (bytes > device_.info().maxAlloc)
    throw Error("tensor '" + tensor + "' needs " + std::to_string(bytes) + " bytes, over the device's largest allocation",
                ExitCode::Device);
  if (b.mem) releaseBuffer(b.mem);
  // Grow with headroom so that decoding one more token rarely reallocates.
  size_t cap = b.capacity && !exact ? std::max(bytes, b.capacity + b.capacity / 2) : bytes;
  b.mem = createBuffer(cap, "tensor '" + tensor + "'");
  b.capacity = cap;
  return b;
}


cl_mem Executor::createBuffer(size_t bytes, const std::string& what) {
  const size_t guard = device_.info().guardBytes;
  cl_int err;
  cl_mem mem = clCreateBuffer(device_.context(), CL_MEM_READ_WRITE, bytes + guard, nullptr, &err);
  clCheck(err, "clCreateBuffer", what);
  if (guard) {
    const cl_uchar fill = kGuardFill;
    clCheck(clEnqueueFillBuffer(device_.queue(), mem, &fill, 1, bytes, guard, 0, nullptr, nullptr), "clEnqueueFillBuffer",
            what + "'s guard");
    guards_[mem] = {bytes, what};
  }
  return mem;
}


void Executor::releaseBuffer(cl_mem mem) {
  guards_.erase(mem);  // (a handle the driver may give out again)
  clReleaseMemObject(mem);
}


void Executor::checkGuards() {
  const size_t guard = device_.info().guardBytes;
  if (!guard || guards_.empty()) return;
  std::vector<std::pair<const Guard*, std::vector<cl_uchar>>> read;
  for (const auto& [mem, g] : guards_) {
    read.emplace_back(&g, std::vector<cl_uchar>(guard));
    clCheck(clEnqueueReadBuffer(device_.queue(), mem, CL_FALSE, g.at, guard, read.back().second.data(), 0, nullptr, nullptr),
            "clEnqueueReadBuffer", g.what + "'s guard");
  }
  clCheck(clFinish(device_.queue()), "clFinish");
  for (const auto& [g, bytes] : read)
    for (size_t i = 0; i < bytes.size(); ++i)
      if (bytes[i] != kGuardFill)
        throw Error("a kernel wrote past the end of " + g->what + " (" + std::to_string(g->at) + " bytes): its byte " +
                        std::to_string(g->at + i) + ", in the guard, is " + std::to_string(bytes[i]) + " where " +
                        std::to_string(kGuardFill) + " was written (TL_GUARD_BYTES)",
                    ExitCode::Device);
}

void Executor::zeroedScratch(const std::string& key, size_t bytes) {
  // Made anew exactly when its capacity changes (ensure). Not the handle: a buffer
  // released and another made may get the old one's handle back (NVIDIA's driver does),
  // and the split-K rows then met counters left unzeroed: wrong sums at 300 rows after 64.
  const size_t before = buffers_[key].capacity;
  Buffer& b = ensure(key, bytes);
  if (b.capacity == before) return;
  const cl_uchar zero = 0;
  clCheck(clEnqueueFillBuffer(device_.queue(), b.mem, &zero, 1, 0, b.capacity, 0, nullptr, nullptr),
          "clEnqueueFillBuffer", "scratch '" + key + "'");
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

void Executor::scratchTensor(const std::string& key, const std::vector<int64_t>& dims) {
  shapes_[key] = dims;
  ensure(key, static_cast<size_t>(elementCount(dims)) * 4);
}

void Executor::keepLastRows(const std::string& output, int64_t rows) {
  if (lastRowsKept(output) == rows) return;
  lastRows_[output] = rows;
  const int p = graph_.producer(output);
  if (p >= 0) dirty_.at(static_cast<size_t>(p)) = 1;
  dropReplay();  // a whole-run replay would repeat the old launches
}

}  // namespace tl
