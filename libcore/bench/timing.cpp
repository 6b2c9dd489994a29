#include "bench/timing.h"

#include <algorithm>
#include <cmath>

#include "runtime/device.h"

namespace tl {

double eventMs(cl_event e) {
  clCheck(clWaitForEvents(1, &e), "clWaitForEvents");
  cl_ulong start = 0, end = 0;
  clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof start, &start, nullptr);
  clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof end, &end, nullptr);
  clReleaseEvent(e);
  return (end - start) * 1e-6;
}

double secondsSince(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, static_cast<size_t>(q * v.size()))];
}

double median(std::vector<double> v) { return quantile(std::move(v), 0.5); }

double mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

double stddev(const std::vector<double>& v) {
  if (v.size() < 2) return 0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / (v.size() - 1));
}

}  // namespace tl
