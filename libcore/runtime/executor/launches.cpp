// Launch sites, their recording and replay: each launch of a node owns a kernel object
// whose arguments stay set; a node is lowered again only when what it touches changed,
// and a run with the last run's shapes replays its launches as recorded (issue 10).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>

#include "cli/error.h"
#include "runtime/executor.h"
#include "runtime/executor/internal.h"
#include "runtime/lower/lower.h"

namespace tl {

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


void Executor::launchSite(size_t site, cl_uint dims, const size_t* global, const size_t* local, int64_t cacheBytes,
                          TaskWork task) {
  auto& r = recordings_.at(recording_);
  Site& s = r.sites.at(site);
  s.dims = dims;
  s.cacheBytes = cacheBytes;
  s.task = task;
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
  recordEvent(node, e, s.kernel);
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


void Executor::dropReplay() {
  for (auto* c : replay_.commands)
    if (c) replay_.api->release(c);
  for (const auto& c : replay_.chains) {
    clReleaseKernel(c.k);
    clReleaseMemObject(c.scalars);
    clReleaseMemObject(c.counts);
  }
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
  makeChains(r);
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
  if (!kv_.empty()) uploadCacheRows(arenaHost_.data() + r.offsets.back());
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
      for (size_t step : r.steps) {
        if (step >= r.launches.size()) {  // a task chain
          const size_t one = 1;
          const auto& c = r.chains[~step];
          clCheck(cb->ndrange(commands, nullptr, nullptr, c.k, 1, nullptr, &c.groups, &one, 0, nullptr, nullptr, nullptr),
                  "clCommandNDRangeKernelKHR", "a task chain");
          continue;
        }
        const auto& [node, site] = r.launches[step];
        const Site& s = recordings_[node].sites[site];
        clCheck(cb->ndrange(commands, nullptr, nullptr, s.k, s.dims, nullptr, s.global, s.local, 0, nullptr, nullptr, nullptr),
                "clCommandNDRangeKernelKHR", "kernel " + s.kernel + ", node '" + graph_.nodeName(node) + "'");
      }
      clCheck(cb->finalize(commands), "clFinalizeCommandBufferKHR");
    }
    clCheck(timed([&] { return cb->enqueue(0, nullptr, commands, 0, nullptr, nullptr); }), "clEnqueueCommandBufferKHR");
    traffic_.written = r.cacheBytes;
  } else {
    for (size_t step : r.steps) {
      if (step >= r.launches.size()) {
        enqueueChain(r.chains[~step]);
        continue;
      }
      const auto& [node, site] = r.launches[step];
      enqueueSite(node, recordings_[node].sites[site]);
    }
  }
  if (!kv_.empty()) {
    for (auto& rows : kvLens_) rows += r.fresh;
    kvRows_ = total;
  }
  ++replays_;
  return true;
}


std::vector<Executor::LaunchNote> Executor::explain() const {
  std::vector<LaunchNote> notes;
  for (const auto& [node, site] : launches_) {
    const Site& s = recordings_.at(node).sites.at(site);
    LaunchNote n{graph_.nodeName(node), opKey(graph_.node(node)), s.kernel, s.why, s.dims};
    std::copy(s.global, s.global + 3, n.global);
    std::copy(s.local, s.local + 3, n.local);
    notes.push_back(std::move(n));
  }
  return notes;
}


std::string explainText(const std::vector<Executor::LaunchNote>& notes) {
  auto sizes = [](cl_uint dims, const size_t* v) {
    std::string s = std::to_string(v[0]);
    for (cl_uint d = 1; d < dims; ++d) s += "x" + std::to_string(v[d]);
    return s;
  };
  std::vector<std::string> grids;
  size_t node = 4, op = 2, kernel = 6, grid = 4;
  for (const auto& l : notes) {
    grids.push_back(sizes(l.dims, l.global) + "/" + sizes(l.dims, l.local));
    node = std::max(node, l.node.size());
    op = std::max(op, l.op.size());
    kernel = std::max(kernel, l.kernel.size());
    grid = std::max(grid, grids.back().size());
  }
  auto line = [&](const std::string& a, const std::string& b, const std::string& c, const std::string& d,
                  const std::string& e) {
    std::string s = "  " + a + std::string(node - a.size() + 2, ' ') + b + std::string(op - b.size() + 2, ' ') + c +
                    std::string(kernel - c.size() + 2, ' ') + d + std::string(grid - d.size() + 2, ' ') + e;
    return s + "\n";
  };
  std::string text = line("node", "op", "kernel", "grid", "why");
  for (size_t i = 0; i < notes.size(); ++i)
    text += line(notes[i].node, notes[i].op, notes[i].kernel, grids[i], notes[i].why);
  return text;
}

std::string profileText(const Executor& ex) {
  struct Row {
    double ms = 0, bytes = 0, flops = 0;
    int kernels = 0;
  };
  // By op and kernel: which variant (and so which path, e.g. tensor cores or not) each took.
  std::map<std::pair<std::string, std::string>, Row> byKernel;
  std::map<int64_t, const OpTime*> longest;  // a node's cost goes to the row of its longest launch
  double total = 0;
  for (const auto& t : ex.profile()) {
    Row& r = byKernel[{t.op, t.kernel}];
    r.ms += t.ms;
    r.kernels += 1;
    total += t.ms;
    if (t.index >= 0 && (!longest.count(t.index) || longest[t.index]->ms < t.ms)) longest[t.index] = &t;
  }
  for (const auto& [node, t] : longest) {
    const OpCost c = ex.nodeCost(static_cast<size_t>(node));
    byKernel[{t->op, t->kernel}].bytes += c.bytes;
    byKernel[{t->op, t->kernel}].flops += c.flops;
  }
  std::vector<std::pair<std::pair<std::string, std::string>, Row>> rows(byKernel.begin(), byKernel.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  char buf[512];
  std::snprintf(buf, sizeof buf, "profile: %zu kernels, %.3f ms device time\n", ex.profile().size(), total);
  std::string text = buf;
  std::snprintf(buf, sizeof buf, "  %-18s %-26s %8s %10s %7s %9s %9s\n", "op", "kernel", "launches", "ms", "share", "GB/s",
                "GFLOP/s");
  text += buf;
  for (const auto& [key, r] : rows) {
    std::snprintf(buf, sizeof buf, "  %-18s %-26s %8d %10.3f %6.1f%% %9.1f %9.1f\n", key.first.c_str(), key.second.c_str(),
                  r.kernels, r.ms, total > 0 ? 100 * r.ms / total : 0, r.ms > 0 ? r.bytes / r.ms * 1e-6 : 0,
                  r.ms > 0 ? r.flops / r.ms * 1e-6 : 0);
    text += buf;
  }
  return text;
}

}  // namespace tl
