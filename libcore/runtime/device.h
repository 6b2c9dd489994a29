// OpenCL devices: discovery with detected capabilities, selection, and the context
// and in-order queues tl runs on: one without profiling and one with, so that a
// benchmark times runs without the events' overhead and measures kernels apart.
// Every OpenCL error becomes a tl::Error with exit code 3 naming the call (and, where
// given, the kernel and node).
#pragma once

#include <CL/cl.h>
#include <CL/cl_ext.h>

#include <algorithm>
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
  int floatWidth = 1;          // CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT: PoCL says 16 on AVX-512, 8 on AVX2
  bool fp16 = false, fp64 = false, subgroups = false, intDot = false, imageFromBuffer = false, priorityHints = false;
  bool commandBuffers = false;  // cl_khr_command_buffer, usable on a queue without properties
  // Oclgrind (a simulator that checks every access, docs/testing.md): each tensor in a
  // buffer of its own exact size, so that a read past a tensor is a read past a buffer.
  bool exactBuffers = false;
  // TL_GUARD_BYTES (environment; 0, the default, off): each device buffer an executor makes
  // has that many bytes more past its end, filled with 0xA5, and every run that waits for
  // the device checks them, an error naming the buffer where a kernel wrote past it. For
  // devices without Oclgrind (NVIDIA's tensor-core rows): a write, or a counter read and
  // written, past a buffer's end changes them. Off under Oclgrind, which names the access.
  size_t guardBytes = 0;
};

// cl_khr_command_buffer's entry points (a run's launches recorded once, enqueued in one call).
struct CommandBufferApi {
  clCreateCommandBufferKHR_fn create = nullptr;
  clCommandNDRangeKernelKHR_fn ndrange = nullptr;
  clFinalizeCommandBufferKHR_fn finalize = nullptr;
  clEnqueueCommandBufferKHR_fn enqueue = nullptr;
  clReleaseCommandBufferKHR_fn release = nullptr;
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
  // Command buffers, when the device has them and they are not turned off (nullptr then):
  // a replayed run is one enqueue instead of one per kernel.
  const CommandBufferApi* commandBuffers() const { return useCommandBuffers_ && commands_.create ? &commands_ : nullptr; }
  void setCommandBuffers(bool on) { useCommandBuffers_ = on; }
  // Task chains (runtime/executor/chains.cpp): on CPU kernels, a replayed run's consecutive
  // short launches of one-item work-groups run as one kernel; off keeps each launch (tl-run
  // and tl-bench --no-chains).
  bool taskChains() const { return taskChains_; }
  void setTaskChains(bool on) { taskChains_ = on; }
  // Local memory the kernels may use: the device's, or less (tests run what a GPU with
  // 32 KB gets). KernelLibrary compiles only the kernels that fit (TL_LOCAL_MEM), and
  // lowering picks among those; set it before making an Executor.
  size_t localMemory() const { return localMemory_; }
  // NVIDIA's tensor cores for prefill GEMMs (kernels/mma.cl), where the device builds and
  // passes their probe (runtime/kernel_library.h); off forces the portable fp32 tiles
  // (tl-run and tl-bench --gemm portable). Set it before making an Executor.
  bool tensorCores() const { return tensorCores_; }
  void setTensorCores(bool on) { tensorCores_ = on; }
  // ... and the codes (e0m4, int4, q8, q3h) times A rounded to int8 per 128 k (the tensor
  // cores' int8 rows, after llama.cpp's MMQ), and per 32 k in NVIDIA's one-row GEMVs and
  // AVX2 CPUs' decode GEMVs; off keeps A in fp16 or fp32 there too (tl-run and tl-bench
  // --gemm f16). Set it before making an Executor.
  bool int8Activations() const { return int8Activations_; }
  void setInt8Activations(bool on) { int8Activations_ = on; }
  // ... and from 256 rows, the weights dequantized into fp16 once a GEMM before the tiles
  // (prep_f16_*, qgemm_mma_f16) where the int8 rows do not take the codes; off keeps the
  // in-tile rows there (tl-bench --kernels' "tensor cores, in-tile" row, which times the two
  // against each other). Set it before making an Executor.
  bool halvesRows() const { return halvesRows_; }
  void setHalvesRows(bool on) { halvesRows_ = on; }
  // Tests only: the tensor-core kernels built on a device that is not NVIDIA's, their PTX
  // emulated (kernels/mma.cl's TL_MMA_EMU), so that the tiles' arithmetic is checked
  // where no such device is. Set it before making an Executor.
  bool mmaEmulation() const { return mmaEmulation_; }
  void setMmaEmulation(bool on) { mmaEmulation_ = on; }
  void setLocalMemory(size_t bytes) { localMemory_ = std::min(bytes, info_.localMem); }
  // The float vector width the CPU kernels' register tiles are built for (TL_VEC): the
  // device's native width, or less (tests run the 8-wide tiles on an AVX-512 host too).
  // Set it before making an Executor.
  int vectorWidth() const { return vectorWidth_; }
  void setVectorWidth(int w) { vectorWidth_ = std::min(w, info_.floatWidth); }

 private:
  DeviceInfo info_;
  cl_context context_ = nullptr;
  cl_command_queue queue_ = nullptr;
  cl_command_queue profilingQueue_ = nullptr;  // made on first use
  bool profiling_ = false;
  bool gpuKernels_;
  CommandBufferApi commands_;
  bool useCommandBuffers_ = true, taskChains_ = true;
  size_t localMemory_;
  int vectorWidth_;
  bool tensorCores_ = true, int8Activations_ = true, halvesRows_ = true, mmaEmulation_ = false;
};

// tl-run's and tl-bench's --gemm: which prefill GEMM rows a device may take. "auto": NVIDIA
// tensor cores where the device passes their probe, A rounded to int8 for the codes;
// "f16": the tensor cores with A in fp16 everywhere; "portable": the fp32 tiles every GPU
// runs. Throws tl::Error (usage) for another name.
extern const char* const kGemmChoiceHelp;
void setGemmChoice(Device& dev, const std::string& choice);

}  // namespace tl
