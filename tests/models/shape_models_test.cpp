// Differential test: for every model and every test_data_set_*, binding the symbols
// from the input shapes and evaluating tl-shape's expressions gives exactly the shape
// of every reference output (computed by ONNX Runtime).
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

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

namespace tl {
namespace {

// An inner declaration pinning a graph input's free axis to a constant is the exporter's
// trace of its example (the dynamo exporter declares position_ids' own batch 1 inside the
// rotary embedding): P stays free, where a declaration that names it relates it.
TEST(ShapeDeclarations, AnInnerConstantDoesNotPinAnInputAxis) {
  for (const bool pin : {true, false}) {
    Model m;
    ASSERT_TRUE(onnx::OnnxParser::Parse(m.proto, R"ONNX(
<ir_version: 8, opset_import: ["" : 17]>
g (float[B, N] x, float[P, N] p) => (float[B, N] y, float[P, N] z) {
  t = Relu (p)
  y = Relu (x)
  z = Neg (t)
}
)ONNX").IsOK());
    auto* vi = m.proto.mutable_graph()->add_value_info();
    vi->set_name("t");
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    if (pin) tt->mutable_shape()->add_dim()->set_dim_value(1);
    else tt->mutable_shape()->add_dim()->set_dim_param("B");
    tt->mutable_shape()->add_dim()->set_dim_param("N");
    Graph g(m.proto.graph());
    const ShapeAnalysis a = inferShapes(m, g);
    const SymExpr P = a.symbols.resolve(SymExpr::symbol("P")), B = a.symbols.resolve(SymExpr::symbol("B"));
    EXPECT_FALSE(P.isConst()) << P.str();
    EXPECT_EQ(P == B, !pin) << (pin ? "pinned to 1: " : "named B: ") << P.str() << " and " << B.str();
  }
}

}  // namespace
}  // namespace tl
