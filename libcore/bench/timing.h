// The measuring helpers tl-bench's parts share: event times, wall clocks, statistics.
#pragma once

#include <CL/cl.h>

#include <chrono>
#include <vector>

namespace tl {

// Waits for a profiled command, returns its device time in ms and releases the event.
double eventMs(cl_event e);
double secondsSince(std::chrono::steady_clock::time_point t0);

double median(std::vector<double> v);
double mean(const std::vector<double>& v);
double stddev(const std::vector<double>& v);  // sample standard deviation; 0 for fewer than 2
double quantile(std::vector<double> v, double q);  // nearest rank

}  // namespace tl
