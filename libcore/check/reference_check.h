// Comparing a run against stored reference outputs (the ONNX backend test layout:
// DIR/test_data_set_K/input_J.pb and output_J.pb), Polygraphy style: per output the
// max absolute and relative error and PASS/FAIL against atol/rtol.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "tensor/tensor.h"

namespace tl {

struct DataSet {
  std::filesystem::path dir;
  std::vector<Tensor> inputs, outputs;
};

// Every test_data_set_* under dir, in name order. Throws tl::Error for an unreadable one.
std::vector<DataSet> loadDataSets(const std::filesystem::path& dir);

struct Comparison {
  std::string name;
  double maxAbs = 0, maxRel = 0;
  int64_t mismatches = 0;  // elements with |a - b| > atol + rtol * |b|
  bool shapeMatches = true;
  bool pass() const { return shapeMatches && mismatches == 0; }
};

// got against want (float32 compared as values, integers and bool exactly as values).
Comparison compareTensors(const Tensor& got, const Tensor& want, double atol, double rtol);

}  // namespace tl
