// The embedded kernels (kernels/*.cl), compiled once per device and cached for the
// process. A compile failure shows the build log.
#pragma once

#include <CL/cl.h>

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "plan/kv_type.h"
#include "runtime/device.h"

namespace tl {

const char* kernelSource();  // generated at build time

// Whether the device runs NVIDIA's tensor-core instructions from OpenCL (kernels/mma.cl):
// an NVIDIA platform whose compiler builds mma_probe, which then computes a 16 x 8 x 16
// product as the host does. Otherwise false, with what failed in `why`. Never throws on
// a failed build: such a device keeps the portable kernels.
bool probeTensorCores(const Device& device, std::string* why = nullptr);

class KernelLibrary {
 public:
  // kvType: the in-place KV caches' element (tl-plan --kv-type): the kernels that read or
  // write them are built for it (kernels/common.cl's KV_T); fp16 caches on NVIDIA are read
  // through inline PTX (TL_PTX) where that builds, else by vload_half.
  explicit KernelLibrary(const Device& device, KvType kvType = KvType::F32);
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary&) = delete;
  KernelLibrary& operator=(const KernelLibrary&) = delete;

  cl_kernel get(const std::string& name);  // throws tl::Error naming the kernel if absent
  bool has(const std::string& name) const { return kernels_.count(name) > 0; }  // built for this device
  // The tensor-core kernels (kernels/gemm.cl's qgemm_mma_*) were built: the device passed
  // probeTensorCores and Device::tensorCores() was on.
  bool tensorCores() const { return mma_ != nullptr; }
  // The KV cache element the kernels were built for (the constructor's kvType).
  KvType kvType() const { return kvType_; }
  // A work-group may read what others of the same launch wrote before they counted
  // (common.cl's last_to_finish): NVIDIA's PTX fences were built in, or the device is a
  // CPU (coherent caches). Other GPUs keep a separate merge launch.
  bool crossGroupReads() const { return options_.find("-DTL_NV") != std::string::npos || !device_.info().isGpu; }
  // A kernel built from generated source (tl.Elementwise's programs) with common.cl's
  // helpers in front. `source` is asked for only the first time `name` is wanted. A
  // compile failure shows the build log.
  cl_kernel generated(const std::string& name, const std::function<std::string()>& source);
  // A new kernel object of a kernel get() or generated() has given: one whose arguments
  // its owner sets and releases.
  cl_kernel fresh(const std::string& name);
  // A new kernel object of `name` in a program of the CPU task kernels as functions
  // (common.cl's TASK_KERNEL under TL_TASKS) and `source` after them: a task chain
  // (runtime/executor/chains.cpp). Each source is built once; its owner releases the kernel.
  cl_kernel chain(const std::string& name, const std::string& source);

 private:
  const Device& device_;
  KvType kvType_;
  std::string options_;  // build options past the device's own (TL_KV_HALF, TL_KV_Q8, TL_NV, TL_PTX)
  cl_program program_ = nullptr;
  cl_program mma_ = nullptr;  // kernels/mma.cl and gemm.cl's TL_MMA part, where built
  std::map<std::string, cl_program> generated_;  // by kernel name
  std::map<std::string, cl_program> chains_;     // by source
  std::map<std::string, cl_kernel> kernels_;
};

}  // namespace tl
