// Uploads: a run's inputs, host results and folded values go up in one write, each a
// region of one upload arena (on NVIDIA's OpenCL each write at the start of a step costs
// 15-100 us); constants go up once.
#include <algorithm>
#include <cstring>

#include "cli/error.h"
#include "runtime/executor.h"
#include "runtime/executor/internal.h"

namespace tl {
namespace {


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

}  // namespace

std::vector<uint8_t> Executor::foldedBytes(const std::string& tensor) const {
  return encode(value(tensor), analysis_.at(tensor).dtype);
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
  if (device_.info().exactBuffers) {  // each in its own buffer, not a region of the arena
    for (const auto& u : pendingUploads_) upload(u.name, u.bytes.data(), u.bytes.size());
    pendingUploads_.clear();
    return;
  }
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
  const size_t tokens = tokenHost_[slot].size();  // (the slot's last argmax's rows)
  if (!analysis_.tensors.count(input) || analysis_.at(input).cls != TensorClass::Input ||
      analysis_.at(input).dtype != DType::Int64 || elementCount(shape(input)) != static_cast<int64_t>(tokens))
    throw Error("input '" + input + "' is not " + std::to_string(tokens) + " int64 token" + (tokens == 1 ? "" : "s") +
                ": it cannot take the device's tokens");
  for (size_t i : hostRun_)
    for (const auto& in : graph_.node(i).input())
      if (in == input) throw Error("input '" + input + "' is read on the host: it cannot take a token from the device");
  clCheck(timed([&] { return clEnqueueCopyBuffer(device_.queue(), tokenSlots_[slot], buffer(input), 0, 0, tokens * sizeof(cl_long), 0, nullptr, nullptr); }),
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
    if (b.mem) releaseBuffer(b.mem);
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

}  // namespace tl
