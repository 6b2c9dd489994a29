// DeviceProbe: the device's ceilings, measured in the process that benchmarks models
// on it (as clpeak and ArchProbe measure them), so that every tl-bench row is judged
// against numbers from the same run: copy and read bandwidth, FMA peak, the cost of
// launching a kernel and of one host-device round trip.
#pragma once

#include <algorithm>
#include <functional>
#include <string>

#include "runtime/device.h"

namespace tl {

struct DeviceProbe {
  std::string device;        // "platform / device"
  double bufferMiB = 0;      // the size the bandwidths were measured on
  double copyGBs = 0;        // clEnqueueCopyBuffer, bytes read + written per second
  double readGBs = 0;        // a kernel that only reads
  double fp32Gflops = 0;     // chains of fma in registers
  double fp16Gflops = 0;     // 0 when the device has no cl_khr_fp16
  double tensorGflops = 0;   // tensor cores, f16 x f16 -> f32 (kernels/mma.cl); 0 without them
  double launchUs = 0;       // back-to-back empty kernels: wall time per kernel
  double roundTripUs = 0;    // an empty kernel and a blocking 4-byte read: wall time
  // The bandwidth a memory-bound row is judged against: the best the device showed.
  double bandwidthGBs() const { return std::max(copyGBs, readGBs); }
};

// Takes about a second on a GPU, a few on a CPU device. `progress` hears each step.
DeviceProbe probeDevice(Device& device, const std::function<void(const std::string&)>& progress = {});

}  // namespace tl
