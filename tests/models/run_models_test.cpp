// Differential test of the executor: every model and data set, on the default
// OpenCL device (PoCL here), against ONNX Runtime's outputs at fp32 tolerances.
#include <gtest/gtest.h>

#include "check/reference_check.h"
#include "cli/test_support.h"
#include "graph/graph.h"
#include "onnx/model_io.h"
#include "runtime/executor.h"
#include "shape/shape_inference.h"

namespace tl {
namespace {

class RunModels : public ::testing::TestWithParam<std::filesystem::path> {};

TEST_P(RunModels, MatchesReferenceOutputs) {
  const auto dir = GetParam();
  Model model = loadModel((dir / "model.onnx").string());
  Graph graph(model.proto.graph());
  ShapeAnalysis analysis = inferShapes(model, graph);
  Device device(selectDevice(""), false);
  for (bool gpuKernels : {false, true}) {  // both kernel families, on whatever device this is
    device.setGpuKernels(gpuKernels);
    Executor ex(device, model, graph, analysis);
    for (const auto& set : loadDataSets(dir)) {
      std::vector<std::string> names;
      for (const auto& t : set.outputs) names.push_back(t.name);
      auto got = ex.run(set.inputs, names);
      ASSERT_EQ(got.size(), set.outputs.size());
      for (size_t j = 0; j < got.size(); ++j) {
        auto c = compareTensors(got[j], set.outputs[j], 1e-4, 1e-3);
        EXPECT_TRUE(c.shapeMatches) << set.dir << " " << c.name;
        EXPECT_LT(c.maxAbs, 1e-4) << set.dir << " " << c.name;
        EXPECT_TRUE(c.pass()) << set.dir << " " << c.name << ": " << c.mismatches << " elements off, max abs " << c.maxAbs;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllModels, RunModels, ::testing::ValuesIn(test::modelDirs()),
                         [](const auto& info) { return test::modelTestName(info.param); });

}  // namespace
}  // namespace tl
