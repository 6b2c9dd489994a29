#include "runtime/kernel_library.h"

#include <sstream>
#include <vector>

#include "cli/error.h"

namespace tl {

KernelLibrary::KernelLibrary(const Device& device) {
  cl_int err;
  const char* src = kernelSource();
  program_ = clCreateProgramWithSource(device.context(), 1, &src, nullptr, &err);
  clCheck(err, "clCreateProgramWithSource");
  cl_device_id id = device.info().id;
  err = clBuildProgram(program_, 1, &id, "-cl-std=CL1.2", nullptr, nullptr);
  if (err != CL_SUCCESS) {
    size_t n = 0;
    clGetProgramBuildInfo(program_, id, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string log(n, '\0');
    clGetProgramBuildInfo(program_, id, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
    throw Error("kernels failed to compile for " + device.info().name + ":\n" + log, ExitCode::Device);
  }
  cl_uint count = 0;
  clCreateKernelsInProgram(program_, 0, nullptr, &count);
  std::vector<cl_kernel> all(count);
  clCheck(clCreateKernelsInProgram(program_, count, all.data(), nullptr), "clCreateKernelsInProgram");
  for (auto k : all) {
    size_t n = 0;
    clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, 0, nullptr, &n);
    std::string name(n, '\0');
    clGetKernelInfo(k, CL_KERNEL_FUNCTION_NAME, n, name.data(), nullptr);
    while (!name.empty() && name.back() == '\0') name.pop_back();
    kernels_[name] = k;
  }
}

KernelLibrary::~KernelLibrary() {
  for (auto& [n, k] : kernels_) clReleaseKernel(k);
  if (program_) clReleaseProgram(program_);
}

cl_kernel KernelLibrary::get(const std::string& name) {
  auto it = kernels_.find(name);
  if (it == kernels_.end()) throw Error("no kernel '" + name + "' (an op or dtype tl cannot run yet)");
  return it->second;
}

}  // namespace tl
