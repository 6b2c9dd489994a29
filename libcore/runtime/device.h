// OpenCL devices: discovery with detected capabilities, selection, and the context
// and in-order queues tl runs on: one without profiling and one with, so that a
// benchmark times runs without the events' overhead and measures kernels apart.
// Every OpenCL error becomes a tl::Error with exit code 3 naming the call (and, where
// given, the kernel and node).
#pragma once

#include <CL/cl.h>

#include <string>
#include <vector>

namespace tl {

struct DeviceInfo {
  cl_platform_id platform = nullptr;
  cl_device_id id = nullptr;
  std::string platformName, name, vendor, version, driver;
  bool isGpu = false;
  size_t computeUnits = 0;
  size_t globalMem = 0, maxAlloc = 0, localMem = 0, maxWorkGroup = 0;
  size_t subBufferAlign = 0;  // bytes: CL_DEVICE_MEM_BASE_ADDR_ALIGN, where sub-buffers may start
  bool fp16 = false, fp64 = false, subgroups = false, intDot = false, imageFromBuffer = false, priorityHints = false;
};

std::vector<DeviceInfo> listDevices();
// "": the first GPU, else the first device. A number picks by index (as --list-devices
// shows); anything else is a case-insensitive substring of "platform device".
DeviceInfo selectDevice(const std::string& spec);
std::string describe(const DeviceInfo& d);  // one line per device for --list-devices

// Throws tl::Error (ExitCode::Device) when err is not CL_SUCCESS.
void clCheck(cl_int err, const char* call, const std::string& context = "");

class Device {
 public:
  Device(const DeviceInfo& info, bool profiling);
  ~Device();
  Device(const Device&) = delete;
  Device& operator=(const Device&) = delete;

  const DeviceInfo& info() const { return info_; }
  cl_context context() const { return context_; }
  cl_command_queue queue() const { return profiling_ ? profilingQueue_ : queue_; }
  bool profiling() const { return profiling_; }
  // Switches queues, after finishing the current one (the two are not ordered
  // against each other). Kernels then come with profiling events, or stop to.
  void setProfiling(bool on);
  // Which kernel variants lowering picks: work-group tiles and reductions (GPUs) or
  // per-item blocks (CPUs, where barriers cost more than they save). Defaults to the
  // device type; tests force each to run both on one device.
  bool gpuKernels() const { return gpuKernels_; }
  void setGpuKernels(bool on) { gpuKernels_ = on; }

 private:
  DeviceInfo info_;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  cl_command_queue profilingQueue_ = nullptr;  // made on first use
  bool profiling_ = false;
  bool gpuKernels_;
};

}  // namespace tl
