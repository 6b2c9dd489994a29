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
#include "runtime/lower/lower.h"

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
    if (s.task.work <= 0 || s.global[1] != 1 || s.global[2] != 1) return false;
    if (s.local[0] != 1 || s.local[1] != 1 || s.local[2] != 1) return false;
    return std::none_of(s.args.begin(), s.args.end(), [](const Site::Arg& a) { return a.kind == ArgKind::Raw; });
  };
  const auto memOf = [](const Site::Arg& a) {  // a buffer argument's cl_mem (null for another kind)
    cl_mem m = nullptr;
    if (a.kind == ArgKind::Mem) std::memcpy(&m, a.bytes.data(), sizeof m);
    return m;
  };
  const bool on = device_.taskChains() && !device_.gpuKernels();
  const size_t most = on ? parameterBytes(device_.info().id) / sizeof(cl_mem) : 0;  // 2 buffers of its own and the rest
  for (size_t i = 0; i < r.launches.size();) {
    // The longest run from i whose distinct buffers fit the kernel's arguments.
    std::map<cl_mem, size_t> mems;
    size_t j = i;
    while (on && j < r.launches.size() && chainable(site(j))) {
      std::map<cl_mem, size_t> more = mems;
      for (const auto& a : site(j).args)
        if (cl_mem m = memOf(a)) more.emplace(m, more.size());
      if (more.size() + 2 > most) break;
      mems = std::move(more);
      ++j;
    }
    if (j - i < 2) {
      r.steps.push_back(i);
      i = std::max(j, i + 1);
      continue;
    }
    // tl_chain(s, pc, m0, m1, ...): each launch's tasks in turn, its scalars read from s,
    // its tasks taken by the chain's work-groups from counts in pc (common.cl's task_claim),
    // all done before the next launch. A chain of more work than kCpuChainSpread runs on a
    // work-group a compute unit, and the launches whose tasks spread take one a group.
    int64_t work = 0;
    for (size_t l = i; l < j; ++l) work += site(l).task.work;
    const size_t units = std::max<size_t>(device_.info().computeUnits, 1);
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
    for (size_t l = i; l < j; ++l) {
      const Site& s = site(l);
      c.cacheBytes += s.cacheBytes;
      const size_t spread = work > kCpuChainSpread && s.task.spreads ? units : 1;
      const cl_int tasks = static_cast<cl_int>(std::max(s.global[0], spread));
      if (work > kCpuChainSpread) c.groups = std::max(c.groups, std::min<size_t>(static_cast<size_t>(tasks), units));
      const std::string n = scalar(reinterpret_cast<const uint8_t*>(&tasks), 1), pc = "pc + " + std::to_string(3 * (l - i));
      body += "  for (int t = task_claim(" + pc + "); t < " + n + "; t = task_next(" + pc + "))\n    " + s.kernel + "_task(t, " + n;
      for (const auto& a : s.args) {
        switch (a.kind) {
          case ArgKind::Mem: {
            cl_mem m = memOf(a);
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
      body += ");\n  task_wait(" + pc + ", " + n + ");\n";
    }
    std::vector<cl_mem> order(mems.size());
    for (const auto& [m, at] : mems) order[at] = m;
    std::string source =
        "__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void tl_chain(__global const int* s, __global int* pc";
    for (size_t m = 0; m < order.size(); ++m) source += ", __global void* m" + std::to_string(m);
    source += ") {\n" + body + "}\n";
    cl_int err;
    c.scalars = clCreateBuffer(device_.context(), CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, scalars.size() * sizeof(cl_int),
                               scalars.data(), &err);
    clCheck(err, "clCreateBuffer", "a task chain's scalars");
    std::vector<cl_int> zeros(3 * c.count, 0);  // (each wait sets its counts back to 0)
    c.counts = clCreateBuffer(device_.context(), CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, zeros.size() * sizeof(cl_int),
                              zeros.data(), &err);
    clCheck(err, "clCreateBuffer", "a task chain's counts");
    c.k = kernels_.chain("tl_chain", source);
    clCheck(clSetKernelArg(c.k, 0, sizeof c.scalars, &c.scalars), "clSetKernelArg", "tl_chain");
    clCheck(clSetKernelArg(c.k, 1, sizeof c.counts, &c.counts), "clSetKernelArg", "tl_chain");
    for (size_t m = 0; m < order.size(); ++m)
      clCheck(clSetKernelArg(c.k, static_cast<cl_uint>(m + 2), sizeof(cl_mem), &order[m]), "clSetKernelArg", "tl_chain");
    r.steps.push_back(~r.chains.size());
    r.chains.push_back(c);
    i = j;
  }
}


void Executor::enqueueChain(const Replay::Chain& c) {
  const size_t one = 1;
  cl_event e = nullptr;
  clCheck(timed([&] {
            return clEnqueueNDRangeKernel(device_.queue(), c.k, 1, nullptr, &c.groups, &one, 0, nullptr,
                                          device_.profiling() ? &e : nullptr);
          }),
          "clEnqueueNDRangeKernel", "a task chain of " + std::to_string(c.count) + " launches");
  if (e) extraEvents_.push_back({"launches " + std::to_string(c.first) + "-" + std::to_string(c.first + c.count - 1),
                                 "TaskChain", e});
  traffic_.written += c.cacheBytes;
}


std::vector<Executor::ChainNote> Executor::chains() const {
  std::vector<ChainNote> out;
  if (replay_.valid)
    for (const auto& c : replay_.chains) out.push_back({c.first, c.first + c.count - 1, c.groups});
  return out;
}

std::string chainsText(const Executor& ex) {
  std::string text;
  for (const auto& c : ex.chains())
    text += "  task chain: launches " + std::to_string(c.first) + "-" + std::to_string(c.last) + " (" +
            std::to_string(c.last - c.first + 1) + ") replayed as one kernel, " + std::to_string(c.groups) +
            (c.groups == 1 ? " task\n" : " tasks at once\n");
  return text;
}

}  // namespace tl
