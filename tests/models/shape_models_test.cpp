// Differential test: for every model and every test_data_set_*, binding the symbols
// from the input shapes and evaluating tl-shape's expressions gives exactly the shape
// of every reference output (computed by ONNX Runtime).
#include <gtest/gtest.h>

#include "cli/test_support.h"
#include "graph/graph.h"
#include "onnx/model_io.h"
#include "shape/binding.h"
#include "shape/shape_inference.h"

namespace tl {
namespace {

class ShapeModels : public ::testing::TestWithParam<std::filesystem::path> {};

TEST_P(ShapeModels, ReferenceOutputShapesAndNoUnknownDims) {
  const auto dir = GetParam();
  Model model = loadModel((dir / "model.onnx").string());
  Graph graph(model.proto.graph());
  ShapeAnalysis a = inferShapes(model, graph);

  const bool past = dir.filename().string().find("-past") != std::string::npos;
  // Images have fixed sizes: the vision encoders' one symbol is the batch.
  const bool image = dir.filename() == "vit" || dir.filename() == "clip-vision";
  EXPECT_EQ(a.symbols.freeSymbols().size(), past ? 3u : image ? 1u : 2u) << "free symbols of " << dir;
  if (dir.parent_path() == test::sharedModels()) {
    const std::vector<std::string> want =
        past ? std::vector<std::string>{"batch", "N", "past"} : std::vector<std::string>{"batch", "N"};
    EXPECT_EQ(a.symbols.freeSymbols(), want);
  }
  EXPECT_TRUE(a.inventedSymbols.empty());
  EXPECT_EQ(a.shapeOpsLeft, 0u);
  // Every dim of every tensor is an expression over the free symbols only.
  const auto free = a.symbols.freeSymbols();
  for (const auto& name : a.order) {
    for (const auto& d : a.at(name).dims)
      for (const auto& s : d.symbols())
        EXPECT_NE(std::find(free.begin(), free.end(), s), free.end()) << name << " has " << d.str();
  }

  int sets = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("test_data_set_", 0) != 0) continue;
    ++sets;
    std::vector<std::pair<std::string, std::vector<int64_t>>> inputs;
    std::vector<Tensor> outputs;
    for (int j = 0;; ++j) {
      auto p = e.path() / ("input_" + std::to_string(j) + ".pb");
      if (!std::filesystem::exists(p)) break;
      Tensor t = readTensorFile(p);
      inputs.emplace_back(t.name, t.dims);
    }
    for (int j = 0;; ++j) {
      auto p = e.path() / ("output_" + std::to_string(j) + ".pb");
      if (!std::filesystem::exists(p)) break;
      outputs.push_back(readTensorFile(p));
    }
    ASSERT_FALSE(inputs.empty());
    ASSERT_EQ(static_cast<int>(outputs.size()), model.proto.graph().output_size());
    SymbolValues values = bindFromInputs(a, inputs);
    for (int j = 0; j < model.proto.graph().output_size(); ++j) {
      const std::string& name = model.proto.graph().output(j).name();
      EXPECT_EQ(evaluateDims(a.at(name).dims, values), outputs[static_cast<size_t>(j)].dims)
          << dir.filename() << "/" << e.path().filename() << " output " << name << " " << str(a.at(name).dims);
    }
    // Every tensor evaluates to a valid shape under the binding.
    for (const auto& name : a.order)
      for (auto d : evaluateDims(a.at(name).dims, values)) EXPECT_GE(d, 0) << name;
  }
  EXPECT_GE(sets, 1) << "no test_data_set_* in " << dir;
}

INSTANTIATE_TEST_SUITE_P(AllModels, ShapeModels, ::testing::ValuesIn(test::modelDirs()),
                         [](const auto& info) { return test::modelTestName(info.param); });

TEST(ShapeModelsPresent, SharedModelsAreThere) {
  // Guards against the parameterized suite silently running over nothing.
  EXPECT_GE(test::modelDirs().size(), 29u) << "expected 14 shared, 3 encoder and 12 dynamo models";
}

}  // namespace
}  // namespace tl
