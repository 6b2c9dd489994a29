#include "check/reference_check.h"

#include <algorithm>
#include <cmath>

#include "cli/error.h"

namespace tl {

std::vector<DataSet> loadDataSets(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw Error("--check: '" + dir.string() + "' is not a directory");
  std::vector<fs::path> sets;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0) sets.push_back(e.path());
  std::sort(sets.begin(), sets.end());
  if (sets.empty()) throw Error("--check: no test_data_set_* in '" + dir.string() + "'");
  std::vector<DataSet> out;
  for (const auto& s : sets) {
    DataSet d;
    d.dir = s;
    for (int j = 0;; ++j) {
      auto p = s / ("input_" + std::to_string(j) + ".pb");
      if (!fs::exists(p)) break;
      d.inputs.push_back(readTensorFile(p));
    }
    for (int j = 0;; ++j) {
      auto p = s / ("output_" + std::to_string(j) + ".pb");
      if (!fs::exists(p)) break;
      d.outputs.push_back(readTensorFile(p));
    }
    if (d.inputs.empty() || d.outputs.empty())
      throw Error("--check: '" + s.string() + "' has no input_0.pb or output_0.pb");
    out.push_back(std::move(d));
  }
  return out;
}

Comparison compareTensors(const Tensor& got, const Tensor& want, double atol, double rtol) {
  Comparison c;
  c.name = want.name;
  c.shapeMatches = got.dims == want.dims && got.dtype == want.dtype;
  if (!c.shapeMatches) return c;
  auto a = got.toDouble(), b = want.toDouble();
  for (size_t i = 0; i < a.size(); ++i) {
    double d = std::fabs(a[i] - b[i]);
    if (std::isnan(a[i]) != std::isnan(b[i])) d = INFINITY;
    if (std::isnan(a[i]) && std::isnan(b[i])) d = 0;
    c.maxAbs = std::max(c.maxAbs, d);
    if (b[i] != 0) c.maxRel = std::max(c.maxRel, d / std::fabs(b[i]));
    if (d > atol + rtol * std::fabs(b[i])) ++c.mismatches;
  }
  return c;
}

}  // namespace tl
