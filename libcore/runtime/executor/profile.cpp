// Profiling: the device time of each command of a run, from OpenCL's events.
#include <set>

#include "cli/error.h"
#include "runtime/executor.h"

namespace tl {

OpCost Executor::nodeCost(size_t node) const {
  std::set<std::string> counted;
  return opCost(CostNode{graph_.node(node), [this](const std::string& t) { return shape(t); }, analysis_.dtypeOf(), &counted});
}

void Executor::releaseEvents() {
  for (auto& x : events_) clReleaseEvent(x.e);
  for (auto& x : extraEvents_) clReleaseEvent(x.e);
  events_.clear();
  extraEvents_.clear();
}


void Executor::recordEvent(size_t node, cl_event e, const std::string& kernel) {
  if (e) events_.push_back({node, e, kernel});
}


void Executor::collectProfile() {
  profile_.clear();
  if (!device_.profiling()) return;
  clCheck(clFinish(device_.queue()), "clFinish");
  auto ms = [](cl_event e) {
    cl_ulong start = 0, end = 0;
    clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, sizeof(start), &start, nullptr);
    clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, sizeof(end), &end, nullptr);
    return (end - start) * 1e-6;
  };
  for (auto& x : extraEvents_) profile_.push_back({x.name, x.op, ms(x.e), -1, ""});
  for (auto& x : events_)
    profile_.push_back({graph_.nodeName(x.node), graph_.node(x.node).op_type(), ms(x.e), static_cast<int64_t>(x.node), x.kernel});
}

}  // namespace tl
