// The embedded kernels (kernels/*.cl), compiled once per device and cached for the
// process. A compile failure shows the build log.
#pragma once

#include <CL/cl.h>

#include <map>
#include <string>

#include "runtime/device.h"

namespace tl {

const char* kernelSource();  // generated at build time

class KernelLibrary {
 public:
  explicit KernelLibrary(const Device& device);
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary&) = delete;
  KernelLibrary& operator=(const KernelLibrary&) = delete;

  cl_kernel get(const std::string& name);  // throws tl::Error naming the kernel if absent

 private:
  cl_program program_ = nullptr;
  std::map<std::string, cl_kernel> kernels_;
};

}  // namespace tl
