// Task chains: on CPU kernels, a replayed run's consecutive launches of task kernels
// (common.cl's TASK_KERNEL: work-groups of one item) run as one kernel of one task that
// takes each launch's tasks in turn. A CPU OpenCL's workers sleep between launches, and a
// decode step of small GEMVs launched one by one waited on their wake-ups more than it
// computed (docs/tl-bench.md, issue 28). The chain's kernel takes each distinct buffer
// once, as many as the device's argument bytes allow, and every scalar from one buffer of
// their bits: its source depends on the launches' kernels and buffers, not on the cache's
// bucket, so one build serves a whole generation.
#include <CL/cl.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>

#include "cli/error.h"
#include "runtime/executor.h"

namespace tl {

namespace {

size_t parameterBytes(cl_device_id id) {
  size_t bytes = 0;
  clCheck(clGetDeviceInfo(id, CL_DEVICE_MAX_PARAMETER_SIZE, sizeof bytes, &bytes, nullptr), "clGetDeviceInfo");
  return bytes;
}

}  // namespace


void Executor::siteArg(size_t site, cl_uint index, ArgKind kind, const void* value, size_t size) {
  auto& args = recordings_.at(recording_).sites.at(site).args;
  if (index == 0) args.clear();  // a launch sets its arguments from the first on
  args.resize(index + 1);
  args[index].kind = kind;
  const auto* bytes = static_cast<const uint8_t*>(value);
  args[index].bytes.assign(bytes, bytes + size);
}


void Executor::makeChains(Replay& r) {
  r.steps.clear();
  const auto site = [&](size_t i) -> const Site& { return recordings_[r.launches[i].first].sites[r.launches[i].second]; };
  const auto chainable = [&](const Site& s) {
    if (!s.joinable || s.global[1] != 1 || s.global[2] != 1) return false;
    if (s.local[0] != 1 || s.local[1] != 1 || s.local[2] != 1) return false;
    return std::none_of(s.args.begin(), s.args.end(), [](const Site::Arg& a) { return a.kind == ArgKind::Raw; });
  };
  const bool on = device_.taskChains() && !device_.gpuKernels();
  const size_t most = on ? parameterBytes(device_.info().id) / sizeof(cl_mem) : 0;  // the scalars' buffer and the rest
  for (size_t i = 0; i < r.launches.size();) {
    // The longest run from i whose distinct buffers fit the kernel's arguments.
    std::map<cl_mem, size_t> mems;
    size_t j = i;
    while (on && j < r.launches.size() && chainable(site(j))) {
      std::map<cl_mem, size_t> more = mems;
      for (const auto& a : site(j).args) {
        cl_mem m = nullptr;
        if (a.kind == ArgKind::Mem) std::memcpy(&m, a.bytes.data(), sizeof m);
        if (m) more.emplace(m, more.size());
      }
      if (more.size() + 1 > most) break;
      mems = std::move(more);
      ++j;
    }
    if (j - i < 2) {
      r.steps.push_back(i);
      i = std::max(j, i + 1);
      continue;
    }
    // tl_chain(s, m0, m1, ...): each launch's tasks in turn, its scalars read from s.
    std::vector<cl_int> scalars;
    std::string body;
    auto scalar = [&](const uint8_t* p, size_t ints) {
      const size_t at = scalars.size();
      scalars.resize(at + ints);
      std::memcpy(scalars.data() + at, p, ints * sizeof(cl_int));
      return "s[" + std::to_string(at) + "]";
    };
    Replay::Chain c;
    c.first = i;
    c.count = j - i;
    int64_t cacheBytes = 0;
    for (size_t l = i; l < j; ++l) {
      const Site& s = site(l);
      cacheBytes += s.cacheBytes;
      const cl_int tasks = static_cast<cl_int>(s.global[0]);
      const std::string n = scalar(reinterpret_cast<const uint8_t*>(&tasks), 1);
      body += "  for (int t = 0; t < " + n + "; ++t)\n    " + s.kernel + "_task(t, " + n;
      for (const auto& a : s.args) {
        switch (a.kind) {
          case ArgKind::Mem: {
            cl_mem m = nullptr;
            std::memcpy(&m, a.bytes.data(), sizeof m);
            body += m ? ", m" + std::to_string(mems.at(m)) : std::string(", 0");
            break;
          }
          case ArgKind::Int: body += ", " + scalar(a.bytes.data(), 1); break;
          case ArgKind::Float: body += ", as_float(" + scalar(a.bytes.data(), 1) + ")"; break;
          case ArgKind::Long: body += ", as_long(vload2(0, &" + scalar(a.bytes.data(), 2) + "))"; break;
          case ArgKind::Int8: body += ", vload8(0, &" + scalar(a.bytes.data(), 8) + ")"; break;
          case ArgKind::Raw: throw Error("a task chain over a raw argument", ExitCode::Device);  // chainable() keeps them out
        }
      }
      body += ");\n";
    }
    std::vector<cl_mem> order(mems.size());
    for (const auto& [m, at] : mems) order[at] = m;
    std::string source = "__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void tl_chain(__global const int* s";
    for (size_t m = 0; m < order.size(); ++m) source += ", __global void* m" + std::to_string(m);
    source += ") {\n" + body + "}\n";
    cl_int err;
    c.scalars = clCreateBuffer(device_.context(), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, scalars.size() * sizeof(cl_int),
                               scalars.data(), &err);
    clCheck(err, "clCreateBuffer", "a task chain's scalars");
    c.k = kernels_.chain("tl_chain", source);
    clCheck(clSetKernelArg(c.k, 0, sizeof c.scalars, &c.scalars), "clSetKernelArg", "tl_chain");
    for (size_t m = 0; m < order.size(); ++m)
      clCheck(clSetKernelArg(c.k, static_cast<cl_uint>(m + 1), sizeof(cl_mem), &order[m]), "clSetKernelArg", "tl_chain");
    c.cacheBytes = cacheBytes;
    r.steps.push_back(~r.chains.size());
    r.chains.push_back(c);
    i = j;
  }
}


void Executor::enqueueChain(const Replay::Chain& c) {
  const size_t one = 1;
  cl_event e = nullptr;
  clCheck(timed([&] {
            return clEnqueueNDRangeKernel(device_.queue(), c.k, 1, nullptr, &one, &one, 0, nullptr,
                                          device_.profiling() ? &e : nullptr);
          }),
          "clEnqueueNDRangeKernel", "a task chain of " + std::to_string(c.count) + " launches");
  if (e) extraEvents_.push_back({"launches " + std::to_string(c.first) + "-" + std::to_string(c.first + c.count - 1),
                                 "TaskChain", e});
  traffic_.written += c.cacheBytes;
}


std::vector<std::pair<size_t, size_t>> Executor::chains() const {
  std::vector<std::pair<size_t, size_t>> out;
  if (replay_.valid)
    for (const auto& c : replay_.chains) out.emplace_back(c.first, c.first + c.count - 1);
  return out;
}

std::string chainsText(const Executor& ex) {
  std::string text;
  for (const auto& [first, last] : ex.chains())
    text += "  task chain: launches " + std::to_string(first) + "-" + std::to_string(last) + " (" +
            std::to_string(last - first + 1) + ") replayed as one kernel of one task\n";
  return text;
}

}  // namespace tl
