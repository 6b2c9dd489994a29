#include "runtime/device.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#ifdef __linux__
#include <sched.h>
#include <unistd.h>
#endif

#include "cli/error.h"

namespace tl {
namespace {

std::string platformString(cl_platform_id p, cl_platform_info what) {
  size_t n = 0;
  clGetPlatformInfo(p, what, 0, nullptr, &n);
  std::string s(n, '\0');
  clGetPlatformInfo(p, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

std::string deviceString(cl_device_id d, cl_device_info what) {
  size_t n = 0;
  if (clGetDeviceInfo(d, what, 0, nullptr, &n) != CL_SUCCESS) return "";
  std::string s(n, '\0');
  clGetDeviceInfo(d, what, n, s.data(), nullptr);
  while (!s.empty() && s.back() == '\0') s.pop_back();
  return s;
}

template <typename T>
T deviceValue(cl_device_id d, cl_device_info what) {
  T v{};
  clGetDeviceInfo(d, what, sizeof(T), &v, nullptr);
  return v;
}

std::string lower(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// Whether this process may run on every CPU: PoCL pins worker i to CPU i, which would leave
// a mask the user set (taskset) and abort where a cpuset forbids that CPU.
bool mayRunOnEveryCpu() {
#ifdef __linux__
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return false;
  const long cpus = sysconf(_SC_NPROCESSORS_CONF);
  if (cpus <= 0 || cpus > CPU_SETSIZE) return false;
  for (long i = 0; i < cpus; ++i)
    if (!CPU_ISSET(i, &set)) return false;
  return true;
#else
  return false;
#endif
}

}  // namespace

void clCheck(cl_int err, const char* call, const std::string& context) {
  if (err == CL_SUCCESS) return;
  throw Error(std::string("OpenCL ") + call + " failed with error " + std::to_string(err) +
                  (context.empty() ? "" : " (" + context + ")"),
              ExitCode::Device);
}

std::vector<DeviceInfo> listDevices() {
  // PoCL's CPU workers pinned a core each, unless the user says otherwise: a task chain's
  // work-groups wait for each other (runtime/executor/chains.cpp), and unpinned, Linux at
  // times ran both workers on one of this VM's two cores (bytellama's decode then lost a
  // fifth). PoCL reads it when its devices start, at the first clGetPlatformIDs.
  if (mayRunOnEveryCpu()) setenv("POCL_AFFINITY", "1", 0);
  cl_uint np = 0;
  if (clGetPlatformIDs(0, nullptr, &np) != CL_SUCCESS || np == 0) return {};
  std::vector<cl_platform_id> platforms(np);
  clGetPlatformIDs(np, platforms.data(), nullptr);
  std::vector<DeviceInfo> out;
  for (auto p : platforms) {
    cl_uint nd = 0;
    if (clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, 0, nullptr, &nd) != CL_SUCCESS || nd == 0) continue;
    std::vector<cl_device_id> ids(nd);
    clGetDeviceIDs(p, CL_DEVICE_TYPE_ALL, nd, ids.data(), nullptr);
    for (auto id : ids) {
      DeviceInfo d;
      d.platform = p;
      d.id = id;
      d.platformName = platformString(p, CL_PLATFORM_NAME);
      d.name = deviceString(id, CL_DEVICE_NAME);
      d.vendor = deviceString(id, CL_DEVICE_VENDOR);
      d.version = deviceString(id, CL_DEVICE_VERSION);
      d.driver = deviceString(id, CL_DRIVER_VERSION);
      d.isGpu = (deviceValue<cl_device_type>(id, CL_DEVICE_TYPE) & CL_DEVICE_TYPE_GPU) != 0;
      d.computeUnits = deviceValue<cl_uint>(id, CL_DEVICE_MAX_COMPUTE_UNITS);
      d.globalMem = deviceValue<cl_ulong>(id, CL_DEVICE_GLOBAL_MEM_SIZE);
      d.maxAlloc = deviceValue<cl_ulong>(id, CL_DEVICE_MAX_MEM_ALLOC_SIZE);
      d.subBufferAlign = deviceValue<cl_uint>(id, CL_DEVICE_MEM_BASE_ADDR_ALIGN) / 8;
      d.floatWidth = static_cast<int>(deviceValue<cl_uint>(id, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT));
      d.localMem = deviceValue<cl_ulong>(id, CL_DEVICE_LOCAL_MEM_SIZE);
      d.maxWorkGroup = deviceValue<size_t>(id, CL_DEVICE_MAX_WORK_GROUP_SIZE);
      const std::string ext = " " + deviceString(id, CL_DEVICE_EXTENSIONS) + " ";
      auto has = [&](const char* e) { return ext.find(std::string(" ") + e + " ") != std::string::npos; };
      d.exactBuffers = d.platformName == "Oclgrind";
      if (const char* guard = std::getenv("TL_GUARD_BYTES"); guard && !d.exactBuffers)
        d.guardBytes = static_cast<size_t>(std::strtoull(guard, nullptr, 10));
      // Oclgrind 21.10 lists cl_khr_fp16 but stops on a kernel with a half constant.
      d.fp16 = has("cl_khr_fp16") && !d.exactBuffers;
      d.fp64 = has("cl_khr_fp64");
      d.subgroups = has("cl_khr_subgroups") || has("cl_intel_subgroups");
      d.intDot = has("cl_khr_integer_dot_product");
      d.imageFromBuffer = has("cl_khr_image2d_from_buffer");
      d.priorityHints = has("cl_khr_priority_hints");
      cl_command_queue_properties needs = 0;
      d.commandBuffers = has("cl_khr_command_buffer") &&
                         clGetDeviceInfo(id, CL_DEVICE_COMMAND_BUFFER_REQUIRED_QUEUE_PROPERTIES_KHR, sizeof needs, &needs,
                                         nullptr) == CL_SUCCESS &&
                         needs == 0;
      out.push_back(std::move(d));
    }
  }
  return out;
}

DeviceInfo selectDevice(const std::string& spec) {
  auto all = listDevices();
  if (all.empty())
    throw Error("no OpenCL device found (is an ICD installed? Debian: pocl-opencl-icd)", ExitCode::Device);
  if (spec.empty()) {
    auto gpu = std::find_if(all.begin(), all.end(), [](const DeviceInfo& d) { return d.isGpu; });
    return gpu != all.end() ? *gpu : all.front();
  }
  if (std::all_of(spec.begin(), spec.end(), [](char c) { return std::isdigit(static_cast<unsigned char>(c)); })) {
    size_t i = std::stoul(spec);
    if (i >= all.size())
      throw Error("--device " + spec + ": there are " + std::to_string(all.size()) + " devices (see --list-devices)",
                  ExitCode::Usage);
    return all[i];
  }
  for (const auto& d : all)
    if (lower(d.platformName + " " + d.name).find(lower(spec)) != std::string::npos) return d;
  throw Error("--device '" + spec + "' matches no device (see --list-devices)", ExitCode::Usage);
}

std::string describe(const DeviceInfo& d) {
  auto mib = [](size_t b) { return std::to_string(b >> 20) + " MiB"; };
  std::string caps;
  auto cap = [&](bool v, const char* n) { caps += std::string(" ") + (v ? "+" : "-") + n; };
  cap(d.fp16, "fp16");
  cap(d.fp64, "fp64");
  cap(d.subgroups, "subgroups");
  cap(d.intDot, "int-dot");
  cap(d.imageFromBuffer, "image-from-buffer");
  cap(d.priorityHints, "priority-hints");
  cap(d.commandBuffers, "command-buffers");
  return d.platformName + " / " + d.name + " (" + (d.isGpu ? "GPU" : "CPU/other") + ", " + d.version + ", " +
         std::to_string(d.computeUnits) + " CUs, mem " + mib(d.globalMem) + ", max alloc " + mib(d.maxAlloc) +
         ", local " + std::to_string(d.localMem >> 10) + " KiB, max work-group " + std::to_string(d.maxWorkGroup) +
         ";" + caps + ")";
}

Device::Device(const DeviceInfo& info, bool profiling)
    : info_(info), gpuKernels_(info.isGpu), localMemory_(info.localMem), vectorWidth_(info.floatWidth) {
  cl_int err;
  cl_context_properties props[] = {CL_CONTEXT_PLATFORM, reinterpret_cast<cl_context_properties>(info.platform), 0};
  context_ = clCreateContext(props, 1, &info_.id, nullptr, nullptr, &err);
  clCheck(err, "clCreateContext", info_.name);
  queue_ = clCreateCommandQueue(context_, info_.id, 0, &err);
  clCheck(err, "clCreateCommandQueue", info_.name);
  if (info_.commandBuffers) {
    auto fn = [&](const char* name) { return clGetExtensionFunctionAddressForPlatform(info_.platform, name); };
    commands_.create = reinterpret_cast<clCreateCommandBufferKHR_fn>(fn("clCreateCommandBufferKHR"));
    commands_.ndrange = reinterpret_cast<clCommandNDRangeKernelKHR_fn>(fn("clCommandNDRangeKernelKHR"));
    commands_.finalize = reinterpret_cast<clFinalizeCommandBufferKHR_fn>(fn("clFinalizeCommandBufferKHR"));
    commands_.enqueue = reinterpret_cast<clEnqueueCommandBufferKHR_fn>(fn("clEnqueueCommandBufferKHR"));
    commands_.release = reinterpret_cast<clReleaseCommandBufferKHR_fn>(fn("clReleaseCommandBufferKHR"));
    if (!commands_.ndrange || !commands_.finalize || !commands_.enqueue || !commands_.release) commands_ = {};
  }
  setProfiling(profiling);
}

void Device::setProfiling(bool on) {
  if (on == profiling_) return;
  clCheck(clFinish(queue()), "clFinish");
  if (on && !profilingQueue_) {
    cl_int err;
    profilingQueue_ = clCreateCommandQueue(context_, info_.id, CL_QUEUE_PROFILING_ENABLE, &err);
    clCheck(err, "clCreateCommandQueue", info_.name);
  }
  profiling_ = on;
}

Device::~Device() {
  if (profilingQueue_) clReleaseCommandQueue(profilingQueue_);
  if (queue_) clReleaseCommandQueue(queue_);
  if (context_) clReleaseContext(context_);
}

const char* const kGemmChoiceHelp =
    "prefill GEMMs: auto (NVIDIA tensor cores where the device passes their probe, see tl-run\n"
    "--list-devices; codes times A rounded to int8 per 128 values, and per 32 in NVIDIA's\n"
    "one-row decode GEMVs over wide weights or K >= 4096 and in AVX2 CPUs' decode GEMVs, as\n"
    "llama.cpp does), f16 (the tensor\n"
    "cores with A in fp16 everywhere, fp32 A in every GEMV; from 256 rows both operands made fp16\n"
    "in a launch first) or portable (the fp32 tiles every GPU runs)";

void setGemmChoice(Device& dev, const std::string& choice) {
  if (choice != "auto" && choice != "f16" && choice != "portable")
    throw Error("--gemm must be auto, f16 or portable, not '" + choice + "'", ExitCode::Usage);
  dev.setTensorCores(choice != "portable");
  dev.setInt8Activations(choice == "auto");
}

}  // namespace tl
