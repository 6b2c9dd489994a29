#include "bench/probe.h"

#include <chrono>
#include <vector>

#include "bench/timing.h"
#include "cli/error.h"
#include "runtime/kernel_library.h"

namespace tl {
namespace {

constexpr int kRuns = 10;

// A device buffer that releases itself.
struct Mem {
  cl_mem m = nullptr;
  Mem(const Device& dev, size_t bytes) {
    cl_int err;
    m = clCreateBuffer(dev.context(), CL_MEM_READ_WRITE, bytes, nullptr, &err);
    clCheck(err, "clCreateBuffer", "probe buffer of " + std::to_string(bytes) + " bytes");
  }
  ~Mem() { clReleaseMemObject(m); }
  Mem(const Mem&) = delete;
  Mem& operator=(const Mem&) = delete;
};

// Median device time of a kernel over kRuns, after one warm-up (profiling queue).
double kernelMs(Device& dev, cl_kernel k, size_t global, size_t local) {
  std::vector<double> ms;
  for (int i = 0; i <= kRuns; ++i) {
    cl_event e;
    clCheck(clEnqueueNDRangeKernel(dev.queue(), k, 1, nullptr, &global, &local, 0, nullptr, &e),
            "clEnqueueNDRangeKernel", "probe");
    const double t = eventMs(e);
    if (i) ms.push_back(t);
  }
  return median(ms);
}

void arg(cl_kernel k, cl_uint i, size_t size, const void* p) { clCheck(clSetKernelArg(k, i, size, p), "clSetKernelArg", "probe"); }

double fmaGflops(Device& dev, cl_kernel k, int width, size_t global, size_t local, Mem& out) {
  const float a = 0.999f, b = 1e-4f;
  arg(k, 0, sizeof(cl_mem), &out.m);
  arg(k, 1, sizeof a, &a);
  arg(k, 2, sizeof b, &b);
  // Calibrate the loop to about 20 ms, long enough to hide clock and launch effects.
  cl_int iters = 16;
  for (;;) {
    arg(k, 3, sizeof iters, &iters);
    const double ms = kernelMs(dev, k, global, local);
    if (ms >= 10 || iters >= (1 << 22)) return 16.0 * width * iters * global / (ms * 1e-3) / 1e9;
    iters = static_cast<cl_int>(std::min<double>(1 << 22, iters * std::max(2.0, 20 / std::max(ms, 1e-3))));
  }
}

// The family's best width (x4 or x16) on this device.
double fmaGflops(Device& dev, KernelLibrary& kernels, const std::string& family, size_t global, size_t local, Mem& out) {
  double best = 0;
  for (int width : {4, 16})
    best = std::max(best, fmaGflops(dev, kernels.get(family + "x" + std::to_string(width)), width, global, local, out));
  return best;
}

}  // namespace

DeviceProbe probeDevice(Device& dev, const std::function<void(const std::string&)>& progress) {
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  const bool wasProfiling = dev.profiling();
  dev.setProfiling(true);
  KernelLibrary kernels(dev);
  const auto& info = dev.info();
  DeviceProbe p;
  p.device = info.platformName + " / " + info.name;
  size_t bytes = std::min<size_t>({size_t(256) << 20, info.maxAlloc, info.globalMem / 4});
  bytes &= ~size_t(4095);
  p.bufferMiB = bytes / 1048576.0;
  // Enough items to fill every compute unit many times over; CPUs run a work-group per thread.
  const size_t local = 64, global = std::max<size_t>(1, info.computeUnits) * (info.isGpu ? 2048 : 256);
  Mem a(dev, bytes), b(dev, bytes), out(dev, global * sizeof(float));
  // Ones, so that the read probe's sums must add up to the floats it claims to read.
  const float ones = 1.0f;
  clCheck(clEnqueueFillBuffer(dev.queue(), a.m, &ones, sizeof ones, 0, bytes, 0, nullptr, nullptr), "clEnqueueFillBuffer");

  say("copy bandwidth");
  std::vector<double> ms;
  for (int i = 0; i <= kRuns; ++i) {
    cl_event e;
    clCheck(clEnqueueCopyBuffer(dev.queue(), a.m, b.m, 0, 0, bytes, 0, nullptr, &e), "clEnqueueCopyBuffer", "probe");
    const double t = eventMs(e);
    if (i) ms.push_back(t);
  }
  p.copyGBs = 2.0 * bytes / (median(ms) * 1e-3) / 1e9;

  say("read bandwidth");
  cl_kernel read = kernels.get("probe_read");
  const cl_int n4 = static_cast<cl_int>(bytes / 16);
  arg(read, 0, sizeof(cl_mem), &a.m);
  arg(read, 1, sizeof(cl_mem), &out.m);
  arg(read, 2, sizeof n4, &n4);
  const cl_int chunk = info.isGpu ? 0 : static_cast<cl_int>((n4 + global - 1) / global);
  arg(read, 3, sizeof chunk, &chunk);
  p.readGBs = bytes / (kernelMs(dev, read, global, local) * 1e-3) / 1e9;
  // A bandwidth is only as true as the reads behind it: every float once (each item's
  // partial sums are small integers, exact in float).
  std::vector<float> sums(global);
  clCheck(clEnqueueReadBuffer(dev.queue(), out.m, CL_TRUE, 0, global * sizeof(float), sums.data(), 0, nullptr, nullptr),
          "clEnqueueReadBuffer", "probe");
  double total = 0;
  for (float v : sums) total += v;
  if (total != static_cast<double>(bytes / sizeof(float)))
    throw Error("the read probe summed " + std::to_string(static_cast<long long>(total)) + " over a buffer of " +
                std::to_string(bytes / sizeof(float)) + " ones: its bandwidth would not be one",
                ExitCode::Device);

  say("fp32 fma peak");
  p.fp32Gflops = fmaGflops(dev, kernels, "probe_fma_f32", global, local, out);
  if (info.fp16) {
    say("fp16 fma peak");
    p.fp16Gflops = fmaGflops(dev, kernels, "probe_fma_f16", global, local, out);
  }

  if (kernels.tensorCores()) {
    say("tensor-core peak");
    p.tensorGflops = fmaGflops(dev, kernels.get("probe_mma_f16"), 32, global, local, out);
  }

  // Launches and round trips are wall times, as a run sees them: no profiling queue.
  dev.setProfiling(false);
  say("launch overhead");
  cl_kernel empty = kernels.get("probe_empty");
  arg(empty, 0, sizeof(cl_mem), &out.m);
  const size_t one = 1;
  auto launch = [&] {
    clCheck(clEnqueueNDRangeKernel(dev.queue(), empty, 1, nullptr, &one, &one, 0, nullptr, nullptr),
            "clEnqueueNDRangeKernel", "probe");
  };
  std::vector<double> us;
  for (int rep = 0; rep <= 3; ++rep) {
    const int count = 500;
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < count; ++i) launch();
    clCheck(clFinish(dev.queue()), "clFinish");
    if (rep) us.push_back(secondsSince(t0) * 1e6 / count);
  }
  p.launchUs = median(us);

  say("round trip");
  us.clear();
  for (int i = 0; i <= 50; ++i) {
    int flag = 0;
    const auto t0 = std::chrono::steady_clock::now();
    launch();
    clCheck(clEnqueueReadBuffer(dev.queue(), out.m, CL_TRUE, 0, sizeof flag, &flag, 0, nullptr, nullptr),
            "clEnqueueReadBuffer", "probe");
    if (i) us.push_back(secondsSince(t0) * 1e6);
  }
  p.roundTripUs = median(us);
  dev.setProfiling(wasProfiling);
  return p;
}

}  // namespace tl
