#include "runtime/kernel_library.h"

#include <sstream>
#include <vector>

#include "cli/error.h"

namespace tl {

namespace {

cl_program build(const Device& device, const std::string& source) {
  cl_int err;
  const char* src = source.c_str();
  cl_program p = clCreateProgramWithSource(device.context(), 1, &src, nullptr, &err);
  clCheck(err, "clCreateProgramWithSource");
  cl_device_id id = device.info().id;
  // TL_LOCAL_MEM, TL_MAX_WG: kernels whose local arrays or work-groups would not fit are
  // left out (attention.cl).
  const std::string options = "-cl-std=CL1.2 -DTL_LOCAL_MEM=" + std::to_string(device.localMemory()) +
                              " -DTL_MAX_WG=" + std::to_string(device.info().maxWorkGroup);
  err = clBuildProgram(p, 1, &id, options.c_str(), nullptr, nullptr);
  if (err != CL_SUCCESS) {
    size_t n = 0;
    clGetProgramBuildInfo(p, id, CL_PROGRAM_BUILD_LOG, 0, nullptr, &n);
    std::string log(n, '\0');
    clGetProgramBuildInfo(p, id, CL_PROGRAM_BUILD_LOG, n, log.data(), nullptr);
    clReleaseProgram(p);
    throw Error("kernels failed to compile for " + device.info().name + ":\n" + log, ExitCode::Device);
  }
  return p;
}

// common.cl, the first file of the embedded source (cmake/embed_kernels.cmake marks each).
std::string commonHelpers() {
  const std::string all = kernelSource();
  const size_t next = all.find("// ---- ", all.find("// ---- ") + 1);
  return all.substr(0, next);
}

}  // namespace

KernelLibrary::KernelLibrary(const Device& device) : device_(device) {
  program_ = build(device, kernelSource());
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
  for (auto& [n, p] : generated_) clReleaseProgram(p);
  if (program_) clReleaseProgram(program_);
}

cl_kernel KernelLibrary::generated(const std::string& name, const std::function<std::string()>& source) {
  auto it = kernels_.find(name);
  if (it != kernels_.end()) return it->second;
  cl_program p = build(device_, commonHelpers() + source());
  generated_[name] = p;
  cl_int err;
  cl_kernel k = clCreateKernel(p, name.c_str(), &err);
  clCheck(err, "clCreateKernel", name);
  kernels_[name] = k;
  return k;
}

cl_kernel KernelLibrary::fresh(const std::string& name) {
  get(name);
  auto g = generated_.find(name);
  cl_int err;
  cl_kernel k = clCreateKernel(g == generated_.end() ? program_ : g->second, name.c_str(), &err);
  clCheck(err, "clCreateKernel", name);
  return k;
}

cl_kernel KernelLibrary::get(const std::string& name) {
  auto it = kernels_.find(name);
  if (it == kernels_.end()) throw Error("no kernel '" + name + "' (an op or dtype tl cannot run yet)");
  return it->second;
}

}  // namespace tl
