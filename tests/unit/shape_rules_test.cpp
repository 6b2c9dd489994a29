// Shape rules on one-node graphs: symbolic dims in, exact expressions out.
#include <gtest/gtest.h>
#include <onnx/defs/parser.h>

#include <functional>

#include "cli/error.h"
#include "graph/graph.h"
#include "onnx/model_io.h"
#include "shape/shape_inference.h"

namespace tl {
namespace {

class OneNode {
 public:
  explicit OneNode(const std::string& op, int64_t opset = 18) {
    model_.proto.set_ir_version(8);
    model_.proto.add_opset_import()->set_version(opset);
    node_ = model_.proto.mutable_graph()->add_node();
    node_->set_op_type(op);
    node_->set_name(op + "_0");
  }
  // The node in tl's domain (docs/ops.md), its opset imported.
  OneNode& tl() {
    node_->set_domain("tl");
    auto* o = model_.proto.add_opset_import();
    o->set_domain("tl");
    o->set_version(1);
    return *this;
  }
  // A graph input with dims given as strings ("N", "past + N", "4").
  OneNode& input(const std::string& name, std::vector<std::string> dims, int dtype = onnx::TensorProto::FLOAT) {
    auto* in = model_.proto.mutable_graph()->add_input();
    in->set_name(name);
    auto* tt = in->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dtype);
    tt->mutable_shape();  // declared even with no dims: a scalar
    for (const auto& d : dims) {
      auto* dim = tt->mutable_shape()->add_dim();
      if (d.find_first_not_of("0123456789") == std::string::npos) {
        dim->set_dim_value(std::stoll(d));
      } else {
        dim->set_dim_param(d);
      }
    }
    node_->add_input(name);
    return *this;
  }
  OneNode& ints(const std::string& name, std::vector<int64_t> v) {
    auto* t = model_.proto.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (auto x : v) t->add_int64_data(x);
    node_->add_input(name);
    return *this;
  }
  // An int64 initializer of the given dims holding v.
  OneNode& intsShaped(const std::string& name, std::vector<int64_t> dims, std::vector<int64_t> v) {
    ints(name, std::move(v));
    auto* t = model_.proto.mutable_graph()->mutable_initializer(model_.proto.graph().initializer_size() - 1);
    t->clear_dims();
    for (auto d : dims) t->add_dims(d);
    return *this;
  }
  OneNode& attrFloat(const std::string& name, float v) {
    auto* a = newAttr(name, onnx::AttributeProto::FLOAT);
    a->set_f(v);
    return *this;
  }
  OneNode& skip() {
    node_->add_input("");
    return *this;
  }
  OneNode& attr(const std::string& name, int64_t v) {
    auto* a = newAttr(name, onnx::AttributeProto::INT);
    a->set_i(v);
    return *this;
  }
  OneNode& attr(const std::string& name, const std::string& v) {
    auto* a = newAttr(name, onnx::AttributeProto::STRING);
    a->set_s(v);
    return *this;
  }
  OneNode& attrInts(const std::string& name, const std::vector<int64_t>& v) {
    auto* a = newAttr(name, onnx::AttributeProto::INTS);
    for (auto x : v) a->add_ints(x);
    return *this;
  }
  // A float tensor attribute [v.size()] (ConstantOfShape's value).
  OneNode& attrTensor(const std::string& name, const std::vector<float>& v) {
    auto* a = newAttr(name, onnx::AttributeProto::TENSOR);
    a->mutable_t()->set_data_type(onnx::TensorProto::FLOAT);
    a->mutable_t()->add_dims(static_cast<int64_t>(v.size()));
    for (float x : v) a->mutable_t()->add_float_data(x);
    return *this;
  }
  OneNode& attr(const std::string& name, const std::vector<float>& v) {
    auto* a = newAttr(name, onnx::AttributeProto::FLOATS);
    for (float x : v) a->add_floats(x);
    return *this;
  }
  // Runs inference; returns each output's shape as text.
  std::vector<std::string> outputs(int n = 1) {
    const ShapeAnalysis a = analyze(n);
    std::vector<std::string> r;
    for (int i = 0; i < n; ++i) r.push_back(str(a.at("out" + std::to_string(i)).dims));
    return r;
  }
  std::string out() { return outputs(1)[0]; }
  // The output's element type.
  DType dtype() { return analyze(1).at("out0").dtype; }
  // The output's tracked value as text ("[0, 1]"), or "none".
  std::string value(int outputs = 1) {
    const ShapeAnalysis a = analyze(outputs);
    const auto& v = a.at("out0").value;
    return v ? str(*v) : "none";
  }
  // The message inference fails with ("" when it does not: shape() then has the output's).
  std::string failure(int outputs = 1) {
    try {
      shape_ = this->outputs(outputs)[0];
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }
  const std::string& shape() const { return shape_; }

 private:
  onnx::AttributeProto* newAttr(const std::string& name, onnx::AttributeProto::AttributeType type) {
    auto* a = node_->add_attribute();
    a->set_name(name);
    a->set_type(type);
    return a;
  }
  // Names the node's first n outputs (graph outputs too) and runs inference.
  ShapeAnalysis analyze(int n) {
    for (int i = 0; i < n; ++i) {
      node_->add_output("out" + std::to_string(i));
      model_.proto.mutable_graph()->add_output()->set_name("out" + std::to_string(i));
    }
    Graph g(model_.proto.graph());
    return inferShapes(model_, g);
  }
  Model model_;
  onnx::NodeProto* node_;
  std::string shape_;
};

TEST(ShapeRules, SliceSymbolicAndOpenBounds) {
  const int64_t kMax = INT64_MAX;
  EXPECT_EQ(OneNode("Slice").input("x", {"B", "N + past", "16"}).ints("s", {0}).ints("e", {kMax}).ints("a", {1}).out(),
            "[B, N + past, 16]");
  EXPECT_EQ(OneNode("Slice").input("x", {"B", "T", "16"}).ints("s", {-3}).ints("e", {kMax}).ints("a", {1}).out(),
            "[B, min(3, T), 16]");
  EXPECT_EQ(OneNode("Slice").input("x", {"B", "T", "16"}).ints("s", {0}).ints("e", {8}).ints("a", {2}).out(),
            "[B, T, 8]");
  EXPECT_EQ(OneNode("Slice").input("x", {"16"}).ints("s", {kMax}).ints("e", {INT64_MIN}).ints("a", {0}).ints("st", {-1}).out(),
            "[16]");
  EXPECT_EQ(OneNode("Slice").input("x", {"16"}).ints("s", {1}).ints("e", {15}).skip().ints("st", {3}).out(), "[5]");
  // a backward slice from past the end starts at the last element (clamped to dim - 1)
  EXPECT_EQ(OneNode("Slice").input("x", {"16"}).ints("s", {20}).ints("e", {-100}).ints("a", {0}).ints("st", {-1}).out(),
            "[16]");
}

TEST(ShapeRules, SplitSizesAndNumOutputs) {
  EXPECT_EQ(OneNode("Split").input("x", {"N", "192"}).ints("sp", {64, 128}).attr("axis", 1).outputs(2),
            (std::vector<std::string>{"[N, 64]", "[N, 128]"}));
  EXPECT_EQ(OneNode("Split").input("x", {"N", "10"}).attr("axis", 1).attr("num_outputs", 3).outputs(3),
            (std::vector<std::string>{"[N, 4]", "[N, 4]", "[N, 2]"}));
  EXPECT_EQ(OneNode("Split").input("x", {"2*N"}).outputs(2), (std::vector<std::string>{"[N]", "[N]"}));
  EXPECT_THROW(OneNode("Split").input("x", {"N"}).outputs(2), Error);
}

TEST(ShapeRules, SqueezeUnsqueezeFlattenTranspose) {
  EXPECT_EQ(OneNode("Squeeze").input("x", {"1", "N", "1"}).ints("a", {0, -1}).out(), "[N]");
  EXPECT_EQ(OneNode("Squeeze").input("x", {"1", "N", "1"}).ints("a", {2}).out(), "[1, N]");
  EXPECT_THROW(OneNode("Squeeze").input("x", {"2", "N"}).ints("a", {0}).out(), Error);
  EXPECT_EQ(OneNode("Unsqueeze").input("x", {"N", "4"}).ints("a", {0, -1}).out(), "[1, N, 4, 1]");
  EXPECT_EQ(OneNode("Flatten").input("x", {"B", "N", "4", "16"}).attr("axis", 2).out(), "[B*N, 64]");
  EXPECT_EQ(OneNode("Transpose").input("x", {"B", "N", "4"}).out(), "[4, N, B]");
}

TEST(ShapeRules, ReshapeZeroAndMinusOne) {
  EXPECT_EQ(OneNode("Reshape").input("x", {"B", "N", "256"}).ints("t", {0, 0, -1, 32}).out(), "[B, N, 8, 32]");
  EXPECT_EQ(OneNode("Reshape").input("x", {"B", "N", "8", "32"}).ints("t", {0, -1, 256}).out(), "[B, N, 256]");
  EXPECT_EQ(OneNode("Reshape").input("x", {"B", "N", "64"}).ints("t", {-1, 64}).out(), "[B*N, 64]");
}

TEST(ShapeRules, MatMulGemmBroadcast) {
  EXPECT_EQ(OneNode("MatMul").input("a", {"B", "4", "N", "16"}).input("b", {"B", "4", "16", "N + past"}).out(),
            "[B, 4, N, N + past]");
  EXPECT_EQ(OneNode("MatMul").input("a", {"N", "64"}).input("b", {"64"}).out(), "[N]");
  EXPECT_THROW(OneNode("MatMul").input("a", {"N", "64"}).input("b", {"32", "8"}).out(), Error);
  EXPECT_EQ(OneNode("Gemm").input("a", {"N", "64"}).input("b", {"192", "64"}).attr("transB", 1).out(), "[N, 192]");
  EXPECT_EQ(OneNode("Add").input("a", {"B", "1", "N", "1"}).input("b", {"N", "T"}).out(), "[B, 1, N, T]");
  EXPECT_EQ(OneNode("Where").input("c", {"N", "1"}, onnx::TensorProto::BOOL).input("x", {"1"}).input("y", {"1", "T"}).out(),
            "[N, T]");
}

// tl.MatMul's glu epilogue halves N (g and u side by side); an odd N has no halves.
TEST(ShapeRules, MatMulGluHalvesAnEvenN) {
  EXPECT_EQ(OneNode("MatMul").tl().input("a", {"N", "64"}).input("w", {"64", "8"}).attr("glu", "silu").out(), "[N, 4]");
  EXPECT_NE(OneNode("MatMul").tl().input("a", {"N", "64"}).input("w", {"64", "9"}).attr("glu", "silu").failure().find(
                "glu needs an even N"),
            std::string::npos);
  EXPECT_EQ(OneNode("MatMul").tl().input("a", {"N", "64"}).input("w", {"64", "10"}).out(), "[N, 10]");
}

// tl.SwiGLU's g and u: one shape, the output's; ranks that differ are refused.
TEST(ShapeRules, GluTakesGAndUOfOneShape) {
  EXPECT_EQ(OneNode("SwiGLU").tl().input("g", {"N", "8"}).input("u", {"N", "8"}).out(), "[N, 8]");
  EXPECT_NE(OneNode("SwiGLU").tl().input("g", {"N", "8"}).input("u", {"1", "N", "8"}).failure().find(
                "needs g and u of one shape"),
            std::string::npos);
}

TEST(ShapeRules, ConcatUnifiesAndSums) {
  EXPECT_EQ(OneNode("Concat").input("a", {"B", "2", "past", "16"}).input("b", {"B", "2", "N", "16"}).attr("axis", 2).out(),
            "[B, 2, N + past, 16]");
  EXPECT_THROW(OneNode("Concat").input("a", {"3", "2"}).input("b", {"4", "2"}).attr("axis", 1).out(), Error);
}

// An axis attribute is taken in [-rank, rank): one past either end is refused, naming both.
TEST(ShapeRules, AxesPastTheRankAreRefused) {
  EXPECT_EQ(OneNode("ArgMax").input("x", {"B", "N", "256"}).attr("axis", 2).out(), "[B, N, 1]");
  EXPECT_EQ(OneNode("ArgMax").input("x", {"B", "N", "256"}).attr("axis", -3).out(), "[1, N, 256]");
  EXPECT_NE(OneNode("ArgMax").input("x", {"B", "N", "256"}).attr("axis", 3).failure().find(
                "axis 3 is out of range for rank 3"),
            std::string::npos);
  EXPECT_NE(OneNode("Concat").input("a", {"N", "2"}).input("b", {"N", "2"}).attr("axis", -3).failure().find(
                "axis -3 is out of range for rank 2"),
            std::string::npos);
  EXPECT_EQ(OneNode("GatherElements").input("x", {"N", "4"}).input("i", {"N", "2"}).attr("axis", 1).out(), "[N, 2]");
  EXPECT_NE(OneNode("GatherElements").input("x", {"N", "4"}).input("i", {"N", "2"}).attr("axis", 2).failure().find(
                "axis 2 is out of range for rank 2"),
            std::string::npos);
}

// Constant's value attributes each give their shape; one tl does not read is refused by name.
TEST(ShapeRules, ConstantOfEachValueAttribute) {
  EXPECT_EQ(OneNode("Constant").attr("value_floats", std::vector<float>{1, 2, 3}).out(), "[3]");
  EXPECT_EQ(OneNode("Constant").attr("value_int", 7).value(), "[7]");
  EXPECT_NE(OneNode("Constant").attr("value_string", "x").failure().find("Constant attribute 'value_string' is not supported"),
            std::string::npos);
}

TEST(ShapeRules, ReductionsAndNorms) {
  EXPECT_EQ(OneNode("ReduceMean", 17).input("x", {"B", "N", "64"}).attr("keepdims", 1).out(), "[1, 1, 1]");
  EXPECT_EQ(OneNode("ReduceSum").input("x", {"B", "N", "64"}).ints("a", {-1}).attr("keepdims", 0).out(), "[B, N]");
  EXPECT_EQ(OneNode("ReduceMax").input("x", {"B", "N", "64"}).ints("a", {1}).out(), "[B, 1, 64]");
  EXPECT_EQ(OneNode("LayerNormalization").input("x", {"B", "N", "64"}).input("w", {"64"}).outputs(3),
            (std::vector<std::string>{"[B, N, 64]", "[B, N, 1]", "[B, N, 1]"}));
  EXPECT_EQ(OneNode("ArgMax").input("x", {"B", "N", "256"}).attr("axis", -1).attr("keepdims", 0).out(), "[B, N]");
}

TEST(ShapeRules, GatherAndGatherND) {
  EXPECT_EQ(OneNode("Gather").input("w", {"256", "64"}).input("ids", {"B", "N"}, onnx::TensorProto::INT64).out(),
            "[B, N, 64]");
  EXPECT_EQ(OneNode("GatherND").input("x", {"B", "T", "8"}).input("i", {"B", "N", "2"}, onnx::TensorProto::INT64).out(),
            "[B, N, 8]");
  EXPECT_EQ(OneNode("Gather").input("x", {"B", "N", "64"}).ints("i", {-1}).attr("axis", 1).out(), "[B, 1, 64]");
}

TEST(ShapeRules, PadTileRangeExpand) {
  EXPECT_EQ(OneNode("Pad").input("x", {"B", "N"}).ints("p", {0, 1, 0, 2}).out(), "[B, N + 3]");
  EXPECT_EQ(OneNode("Tile").input("x", {"B", "N"}).ints("r", {1, 4}).out(), "[B, 4*N]");
  EXPECT_EQ(OneNode("Expand").input("x", {"N", "1"}).ints("s", {2, 1, 8}).out(), "[2, N, 8]");
}

TEST(ShapeRules, CastToBoolKeepsTruth) {
  EXPECT_EQ(OneNode("Cast").ints("x", {0, 3, -2}).attr("to", onnx::TensorProto::BOOL).value(), "[0, 1, 1]");
  EXPECT_EQ(OneNode("Cast").ints("x", {0, 3, -2}).attr("to", onnx::TensorProto::INT32).value(), "[0, 3, -2]");
}

// Values are tracked for small tensors only (kMaxValueElements): a Range of 1025 is data.
TEST(ShapeRules, ValuesOfSmallTensorsOnly) {
  EXPECT_EQ(OneNode("Range").ints("s", {0}).ints("l", {4}).ints("d", {1}).value(), "[0, 1, 2, 3]");
  EXPECT_EQ(OneNode("Range").ints("s", {0}).ints("l", {kMaxValueElements + 1}).ints("d", {1}).value(), "none");
  EXPECT_EQ(OneNode("Expand").ints("x", {7}).ints("s", {kMaxValueElements + 1}).value(), "none");
  EXPECT_EQ(OneNode("Tile").ints("x", {7}).ints("r", {kMaxValueElements + 1}).value(), "none");
  const std::vector<int64_t> half(kMaxValueElements / 2 + 1, 3);
  EXPECT_EQ(OneNode("Concat").ints("a", half).ints("b", half).attr("axis", 0).value(), "none");
}

// tl.Attention's float mask broadcasts to the scores [B, H, S, T]: up to rank 4.
TEST(ShapeRules, AttentionMaskUpToRankFour) {
  // the output's shape, or the failure's message
  const auto attention = [](const std::vector<std::string>& mask) {
    OneNode n("Attention");
    n.tl().input("q", {"B", "4", "S", "16"}).input("k", {"B", "2", "T", "16"}).input("v", {"B", "2", "T", "16"});
    n.input("m", mask);
    const std::string failed = n.failure();
    return failed.empty() ? n.shape() : failed;
  };
  EXPECT_EQ(attention({"B", "1", "S", "T"}), "[B, 4, S, 16]");
  EXPECT_EQ(attention({"S", "T"}), "[B, 4, S, 16]");
  EXPECT_NE(attention({"1", "B", "1", "S", "T"}).find("mask must broadcast to [B, H, S, T]"), std::string::npos);
}

// tl.Attention's operands agree where the product needs them to: q, k and v one batch, k and
// v one head count and length, q and k one head dim. Each pair that disagrees fails.
TEST(ShapeRules, AttentionOperandsAgree) {
  const auto attention = [](std::vector<std::string> q, std::vector<std::string> k, std::vector<std::string> v) {
    OneNode n("Attention");
    n.tl().input("q", q).input("k", k).input("v", v);
    return n.failure();
  };
  const std::vector<std::string> q = {"2", "4", "S", "16"}, k = {"2", "2", "6", "16"}, v = {"2", "2", "6", "8"};
  EXPECT_EQ(attention(q, k, v), "");
  const auto with = [](std::vector<std::string> d, size_t i, const char* x) { d[i] = x; return d; };
  EXPECT_NE(attention(q, with(k, 0, "3"), v), "") << "q's batch against k's";
  EXPECT_NE(attention(q, k, with(v, 0, "3")), "") << "q's batch against v's";
  EXPECT_NE(attention(q, k, with(v, 1, "1")), "") << "k's heads against v's";
  EXPECT_NE(attention(q, k, with(v, 2, "5")), "") << "k's length against v's";
  EXPECT_NE(attention(with(q, 3, "8"), k, v), "") << "q's head dim against k's";
}

// Every refusal of a rule names its cause, at the input that just crosses its line (a
// rank one short or past, one entry too many, a fourth output where three is the most).
TEST(ShapeRules, EachRefusalSaysWhy) {
  using N = OneNode;
  const auto i64 = onnx::TensorProto::INT64;
  const std::vector<std::pair<std::function<std::string()>, const char*>> cases = {
      {[] { return N("Add").skip().skip().failure(); }, "needs at least one input"},
      {[] { return N("Cast").input("x", {"2"}).failure(); }, "attribute 'to' is missing"},
      {[] { return N("Reshape", 4).input("x", {"2"}).failure(); }, "attribute 'shape' is missing"},
      {[] { return N("Squeeze").input("x", {"N", "1"}).failure(); }, "cannot tell whether dimension N is 1"},
      {[] { return N("Squeeze").input("x", {"2", "3"}).ints("a", {-1}).failure(); }, "cannot squeeze axis -1 of size 3"},
      {[] { return N("Unsqueeze").input("x", {"2"}).failure(); }, "axes are missing"},
      {[] { return N("Unsqueeze").input("x", {"2"}).ints("a", {0, -3}).failure(); }, "axis -3 is repeated"},
      {[] { return N("Transpose").input("x", {"2", "3"}).attrInts("perm", {0}).failure(); }, "perm has 1 entries for rank 2"},
      {[] { return N("Transpose").input("x", {"2", "3"}).attrInts("perm", {1, -1}).failure(); }, "perm repeats axis -1"},
      {[] { return N("Concat").input("a", {"2"}).failure(); }, "attribute 'axis' is missing"},
      {[] { return N("Concat").skip().attr("axis", 0).failure(); }, "needs at least one input"},
      {[] { return N("Concat").input("a", {"2", "3"}).input("b", {"4", "5"}).attr("axis", 0).failure(); },
       "inputs differ in dimension 1: 3 vs 5"},
      {[] { return N("Split").input("x", {"4"}).attr("num_outputs", 0).failure(); }, "num_outputs must be positive"},
      {[] { return N("Split").input("x", {"5"}).failure(2); }, "cannot split dimension 5 into 2 equal parts"},
      {[] { return N("Split").input("x", {"N"}).failure(2); }, "cannot prove that dimension N splits into 2 equal parts"},
      {[] { return N("Split").input("x", {"6"}).ints("s", {2, 4}).failure(3); }, "split gives 2 sizes for 3 outputs"},
      {[] { return N("Slice").input("x", {"8"}).ints("s", {0}).ints("e", {1, 2}).failure(); },
       "starts and ends differ in length"},
      {[] { return N("Slice").input("x", {"8", "8"}).ints("s", {0}).ints("e", {1}).ints("a", {0, 1}).failure(); },
       "starts, ends, axes and steps differ in length"},
      {[] { return N("Slice").input("x", {"8"}).ints("s", {0}).ints("e", {1}).ints("a", {0}).ints("t", {1, 1}).failure(); },
       "starts, ends, axes and steps differ in length"},
      {[] { return N("Slice").input("x", {"8"}).ints("s", {0}).ints("e", {1}).ints("a", {0}).ints("t", {0}).failure(); },
       "slice step is 0"},
      {[=] { return N("GatherElements").input("x", {"2", "3"}).input("i", {"2"}, i64).failure(); },
       "data and indices differ in rank"},
      {[=] { return N("GatherND").input("x", {"2"}).input("i", {}, i64).failure(); }, "indices must have rank >= 1"},
      {[=] { return N("GatherND").input("x", {"2"}).input("i", {"N"}, i64).failure(); },
       "the last dimension of indices must be constant, not N"},
      {[=] { return N("GatherND").input("x", {"2", "3"}).input("i", {"1", "3"}, i64).failure(); },
       "indices address more dimensions than data has"},
      {[=] { return N("GatherND").input("x", {"2", "3"}).input("i", {"2", "2"}, i64).attr("batch_dims", 1).failure(); },
       "indices address more dimensions than data has"},
      {[] { return N("Tile").input("x", {"2", "3"}).ints("r", {2}).failure(); }, "repeats has 1 entries for rank 2"},
      {[] { return N("Range").ints("s", {0}).ints("l", {5}).ints("d", {0}).failure(); }, "delta is 0"},
      {[] { return N("MatMul").input("a", {}).input("b", {"2"}).failure(); }, "MatMul inputs must have rank >= 1"},
      {[] { return N("MatMul").input("a", {"2"}).input("b", {}).failure(); }, "MatMul inputs must have rank >= 1"},
      {[] { return N("MatMul").input("a", {"2", "3"}).input("b", {"4", "5"}).failure(); }, "inner dimensions differ: [2, 3] x [4, 5]"},
      {[] { return N("Gemm").input("a", {"2"}).input("b", {"2", "3"}).failure(); }, "Gemm inputs must be 2-D"},
      {[] { return N("Gemm").input("a", {"2", "3"}).input("b", {"2", "3", "1"}).failure(); }, "Gemm inputs must be 2-D"},
      {[] { return N("Gemm").input("a", {"2", "3"}).input("b", {"4", "5"}).failure(); }, "inner dimensions differ: 3 vs 4"},
      {[] { return N("Gemm").input("a", {"2", "3"}).input("b", {"3", "4"}).input("c", {"1", "2", "4"}).failure(); },
       "C does not broadcast to [M, N]"},
      {[] { return N("Conv").input("x", {"1", "3", "8"}).input("w", {"4", "3", "K"}).failure(); },
       "Conv needs a weight of constant spatial shape"},
      {[] { return N("Conv").input("x", {"1", "3", "8"}).input("w", {"4", "3", "3"}).attr("auto_pad", "FULL").failure(); },
       "Conv's auto_pad 'FULL' is not NOTSET, VALID, SAME_UPPER or SAME_LOWER"},
      {[] { return N("QMatMul").tl().input("x", {"2", "8"}).attr("N", 4).failure(); }, "tl.QMatMul needs attributes K and N"},
      {[] { return N("QMatMul").tl().input("x", {"2", "8"}).attr("K", 8).failure(); }, "tl.QMatMul needs attributes K and N"},
      {[] { return N("QMatMul").tl().input("x", {}).attr("K", 8).attr("N", 4).failure(); }, "tl.QMatMul input must have rank >= 1"},
      {[] { return N("MatMul").tl().input("a", {"2", "7"}).input("w", {"8", "4"}).failure(); }, "dimensions differ: 7 vs 8"},
      {[] { return N("MatMul").tl().input("a", {"2", "8"}).input("w", {"8", "4"}).input("b", {"1", "4"}).failure(); },
       "a (Q)MatMul's bias must be 1-D [N]"},
      {[] {
         return N("MatMul").tl().input("a", {"2", "8"}).input("w", {"8", "4"}).skip().skip().input("s", {"1", "8"}).failure();
       },
       "a (Q)MatMul's norm scale must be 1-D [K]"},
      {[] { return N("MatMul").tl().input("a", {"2", "8"}).input("w", {"8", "4"}).skip().input("r", {"4"}).failure(); },
       "a (Q)MatMul's residual must be shaped like its one output"},
      {[] {
         return N("MatMul").tl().input("a", {"2", "8"}).input("w", {"8", "4"}).skip().input("r", {"2", "4"}).attrInts("split", {2, 2}).failure(2);
       },
       "a (Q)MatMul's residual must be shaped like its one output"},
      {[] { return N("MatMul").tl().input("a", {"2", "8"}).input("w", {"8", "4"}).attrInts("split", {1, 1, 1, 1}).failure(4); },
       "split must give each of at most 3 outputs its width, summing to N = 4"},
      {[] { return N("MatMul").tl().input("a", {"2", "8"}).input("w", {"8", "4"}).attrInts("split", {1, 2}).failure(2); },
       "split must give each of at most 3 outputs its width, summing to N = 4"},
      {[] { return N("MatMul").tl().input("a", {"2", "8"}).input("w", {"8", "4"}).attrInts("split", {1, 3}).failure(1); },
       "split must give each of at most 3 outputs its width, summing to N = 4"},
      {[] { return N("MatMul").tl().input("a", {"2", "8"}).input("w", {"8", "N"}).failure(); },
       "tl.MatMul needs A of rank >= 1 and W [K, N], N constant"},
      {[] { return N("MatMul").tl().input("a", {}).input("w", {"8", "4"}).failure(); },
       "tl.MatMul needs A of rank >= 1 and W [K, N], N constant"},
      {[] { return N("MatMul").tl().input("a", {"2", "8"}).input("w", {"8"}).failure(); },
       "tl.MatMul needs A of rank >= 1 and W [K, N], N constant"},
      {[] { return N("RMSNorm").tl().input("x", {}).input("s", {"8"}).failure(); }, "tl.RMSNorm input must have rank >= 1"},
      {[] { return N("RMSNorm").tl().input("x", {"2", "8"}).input("s", {"1", "8"}).failure(); }, "tl.RMSNorm scale must have rank 1, not 2"},
      {[] { return N("RMSNorm").tl().input("x", {"2", "8"}).input("s", {"8"}).input("r", {"8"}).failure(); },
       "tl.RMSNorm's residual must have x's shape"},
      {[] { return N("RoPE").tl().input("x", {"1", "2", "3", "5"}).input("c", {"3", "2"}).input("s", {"3", "2"}).failure(); },
       "tl.RoPE needs x whose last dimension is a constant even number"},
      {[] { return N("RoPE").tl().input("x", {"1", "2", "3", "D"}).input("c", {"3", "2"}).input("s", {"3", "2"}).failure(); },
       "tl.RoPE needs x whose last dimension is a constant even number"},
      {[] {
         return N("RoPE").tl().input("x", {"1", "2", "3", "8"}).input("c", {"3", "2"}).input("s", {"3", "2"}).attr("rotary_dim", 3).failure();
       },
       "tl.RoPE's rotary_dim must be even and at most x's last dimension"},
      {[] {
         return N("RoPE").tl().input("x", {"1", "2", "3", "8"}).input("c", {"3", "2"}).input("s", {"3", "2"}).attr("rotary_dim", 10).failure();
       },
       "tl.RoPE's rotary_dim must be even and at most x's last dimension"},
      {[] {
         return N("RoPE").tl().input("x", {"1", "2", "3", "8"}).input("c", {"3", "2"}).input("s", {"3", "2"}).attr("rotary_dim", 0).failure();
       },
       "tl.RoPE's rotary_dim must be even and at most x's last dimension"},
      {[] { return N("RoPE").tl().input("x", {"2", "3", "8"}).input("c", {"1", "1", "3", "8"}).input("s", {"3", "8"}).failure(); },
       "tl.RoPE's cos and sin must broadcast to x"},
      {[] { return N("RoPE").tl().input("x", {"2", "3", "8"}).input("c", {"3", "8"}).input("s", {"1", "1", "3", "8"}).failure(); },
       "tl.RoPE's cos and sin must broadcast to x"},
      {[] {
         return N("RoPE").tl().input("x", {"1", "2", "3", "8"}).input("c", {"3", "8"}).input("s", {"3", "8"}).input("k", {"2", "3", "8"}).failure(2);
       },
       "tl.RoPE's second input must have x's rank"},
      {[] {
         return N("RoPE").tl().input("x", {"1", "2", "3", "8"}).input("c", {"3", "8"}).input("s", {"3", "8"}).input("k", {"1", "2", "3", "8"})
             .attr("cache_axis", 2).failure(3);
       },
       "tl.RoPE with cache_axis takes 7 inputs and gives 3 outputs"},
      {[] {
         N n("RoPE");
         n.tl().input("x", {"1", "2", "3", "8"}).input("c", {"3", "8"}).input("s", {"3", "8"}).input("k", {"1", "2", "3", "8"});
         n.input("pk", {"1", "2", "4", "8"}).input("pv", {"1", "2", "4", "8"}).input("v", {"1", "2", "3", "8"}).attr("cache_axis", 3);
         return n.failure(3);
       },
       "tl.RoPE's cache_axis must come before the last axis"},
      {[] {
         N n("RoPE");
         n.tl().input("x", {"1", "2", "3", "8"}).input("c", {"3", "8"}).input("s", {"3", "8"}).input("k", {"1", "2", "3", "8"});
         n.input("pk", {"2", "4", "8"}).input("pv", {"1", "2", "4", "8"}).input("v", {"1", "2", "3", "8"}).attr("cache_axis", 2);
         return n.failure(3);
       },
       "tl.RoPE's caches and new entries must have x2's rank"},
      {[] {
         N n("RoPE");
         n.tl().input("x", {"1", "2", "3", "8"}).input("c", {"3", "8"}).input("s", {"3", "8"}).input("k", {"1", "2", "3", "8"});
         n.input("pk", {"1", "2", "4", "8"}).input("pv", {"1", "2", "4", "8"}).input("v", {"2", "3", "8"}).attr("cache_axis", 2);
         return n.failure(3);
       },
       "tl.RoPE's caches and new entries must have x2's rank"},
      {[] { return N("Attention").tl().input("q", {"1", "H", "3", "8"}).input("k", {"1", "2", "5", "8"}).input("v", {"1", "2", "5", "8"}).failure(); },
       "tl.Attention needs constant head counts, q's a multiple of k's"},
      {[] { return N("Attention").tl().input("q", {"1", "3", "3", "8"}).input("k", {"1", "2", "5", "8"}).input("v", {"1", "2", "5", "8"}).failure(); },
       "tl.Attention needs constant head counts, q's a multiple of k's"},
      {[] { return N("Attention").tl().input("q", {"1", "4", "3", "8"}).input("k", {"1", "0", "5", "8"}).input("v", {"1", "0", "5", "8"}).failure(); },
       "tl.Attention needs constant head counts, q's a multiple of k's"},
      {[] { return N("Attention").tl().input("q", {"4", "3", "8"}).input("k", {"1", "2", "5", "8"}).input("v", {"1", "2", "5", "8"}).failure(); },
       "tl.Attention needs q, k and v of rank 4"},
      {[] {
         return N("Attention").tl().input("q", {"1", "4", "3", "8"}).input("k", {"1", "2", "5", "8"}).input("v", {"1", "2", "5", "8"}).skip()
             .input("km", {"5"}).failure();
       },
       "tl.Attention's key_mask must be [B, T]"},
      {[] { return N("Elementwise").tl().failure(); }, "tl.Elementwise needs inputs"},
      {[] { return N("Constant").failure(); }, "Constant needs exactly one value attribute"},
      {[] { return N("Constant").attr("value_int", 1).attrInts("value_ints", {1}).failure(); }, "Constant needs exactly one value attribute"},
      {[] { return N("ConstantOfShape").ints("s", {2}).attrTensor("value", {1, 2}).failure(); }, "value must hold one element"},
  };
  for (const auto& [fails, says] : cases) {
    const std::string got = fails();
    EXPECT_NE(got.find(says), std::string::npos) << "wanted: " << says << "\ngot: " << (got.empty() ? "(no failure)" : got);
  }
}

// Values tracked through each op that computes them (shape arithmetic folded away), and
// none where an element cannot be decided.
TEST(ShapeRules, ValuesThroughEachOp) {
  using N = OneNode;
  EXPECT_EQ(N("Pow").ints("a", {2, 3, 5}).ints("b", {3, 2, 0}).value(), "[8, 9, 1]");
  EXPECT_EQ(N("Pow").ints("a", {2, 3}).ints("b", {-1, 2}).value(), "none");
  EXPECT_EQ(N("Pow").ints("a", {2}).ints("b", {63}).value(), "none");
  EXPECT_EQ(N("Div").ints("a", {7, -7}).ints("b", {2, 2}).value(), "[3, -3]");  // C's, as ONNX Runtime's
  EXPECT_EQ(N("Div").ints("a", {7}).ints("b", {0}).value(), "none");
  EXPECT_EQ(N("Sub").ints("a", {7, 1}).ints("b", {2}).value(), "[5, -1]");
  EXPECT_EQ(N("Max").ints("a", {7, 1}).ints("b", {2, 3}).value(), "[7, 3]");
  EXPECT_EQ(N("Min").ints("a", {7, 1}).ints("b", {2, 3}).value(), "[2, 1]");
  EXPECT_EQ(N("And").ints("a", {0, 1, 0, 1}).ints("b", {0, 0, 2, 1}).value(), "[0, 0, 0, 1]");
  EXPECT_EQ(N("Or").ints("a", {0, 1, 0, 1}).ints("b", {0, 0, 2, 1}).value(), "[0, 1, 1, 1]");
  EXPECT_EQ(N("Xor").ints("a", {0, 1, 0, 1}).ints("b", {0, 0, 2, 1}).value(), "[0, 1, 1, 0]");
  EXPECT_EQ(N("PRelu").ints("a", {-2, 3}).ints("b", {1}).value(), "none");  // (not tracked: no logic op's values)
  EXPECT_EQ(N("Less").ints("a", {1, 2, 3}).ints("b", {2}).value(), "[1, 0, 0]");
  EXPECT_EQ(N("GreaterOrEqual").ints("a", {1, 2, 3}).ints("b", {2}).value(), "[0, 1, 1]");
  EXPECT_EQ(N("Not").ints("a", {0, 3}).value(), "[1, 0]");
  EXPECT_EQ(N("Abs").ints("a", {-3, 4}).value(), "[3, 4]");
  EXPECT_EQ(N("Neg").ints("a", {-3, 4}).value(), "[3, -4]");
  EXPECT_EQ(N("Sign").ints("a", {-5, 0, 7}).value(), "[-1, 0, 1]");
  EXPECT_EQ(N("CastLike").ints("a", {1, 2}).input("t", {"1"}).value(), "[1, 2]");
  EXPECT_EQ(N("Size").input("x", {"2", "N"}).value(), "[2*N]");
  EXPECT_EQ(N("Transpose").intsShaped("x", {2, 3}, {1, 2, 3, 4, 5, 6}).value(), "[1, 4, 2, 5, 3, 6]");
  EXPECT_EQ(N("Transpose").intsShaped("x", {2, 3}, {1, 2, 3, 4, 5, 6}).attrInts("perm", {1, 0}).out(), "[3, 2]");
  EXPECT_EQ(N("ReduceProd").ints("x", {2, 3, 4}).value(), "[24]");
  EXPECT_EQ(N("ReduceSum").ints("x", {2, 3, 4}).value(), "[9]");
  EXPECT_EQ(N("ReduceMax").ints("x", {2, 7, 4}).value(), "[7]");
  EXPECT_EQ(N("ReduceMin").ints("x", {2, 7, 1}).value(), "[1]");
  EXPECT_EQ(N("ReduceMean").ints("x", {2, 4}).value(), "none");
  EXPECT_EQ(N("Split").ints("x", {1, 2, 3, 4}).ints("s", {1, 3}).value(2), "[1]");
  EXPECT_EQ(N("Slice").ints("x", {1, 2, 3, 4, 5}).ints("s", {4}).ints("e", {0}).ints("a", {0}).ints("t", {-2}).value(), "[5, 3]");
  EXPECT_EQ(N("Constant").attrInts("value_ints", {4, 5}).value(), "[4, 5]");
  EXPECT_EQ(N("Constant").attrFloat("value_float", 2.0f).value(), "[2]");
  EXPECT_EQ(N("Constant").attrFloat("value_float", 2.5f).value(), "none");
}

// Rules the bundled models never reach, each at an ordinary input.
TEST(ShapeRules, OpsTheModelsDoNotReach) {
  using N = OneNode;
  const auto i64 = onnx::TensorProto::INT64;
  EXPECT_EQ(N("Reshape", 4).input("x", {"2", "3"}).attrInts("shape", {3, 2}).out(), "[3, 2]");
  EXPECT_NE(N("Reshape").input("x", {"6"}).ints("s", {0, 0}).failure().find("copies dimension 1 (0) but the input has rank 1"),
            std::string::npos);
  EXPECT_NE(N("Reshape").input("x", {"6"}).ints("s", {-2, -3}).failure().find("has a negative dimension"), std::string::npos);
  EXPECT_NE(N("Reshape").input("x", {"6"}).input("s", {"1"}, i64).failure().find(
                "target shape (input 's') is not computable from shapes and constants"),
            std::string::npos);
  EXPECT_NE(N("Concat").input("a", {"2", "3"}).input("b", {"3"}).attr("axis", 0).failure().find("input 'b' has rank 1, expected 2"),
            std::string::npos);
  EXPECT_EQ(N("Concat").input("a", {"2", "N"}).input("b", {"3", "4"}).attr("axis", 0).out(), "[5, 4]");
  EXPECT_EQ(N("Split", 11).input("x", {"6"}).attrInts("split", {2, 4}).outputs(2), (std::vector<std::string>{"[2]", "[4]"}));
  EXPECT_EQ(N("Split", 11).input("x", {"N"}).attrInts("split", {2, 3}).outputs(2), (std::vector<std::string>{"[2]", "[3]"}));
  EXPECT_NE(N("Split", 11).input("x", {"6"}).attrInts("split", {2, 3}).failure(2).find("split sizes [2, 3] do not add up to dimension 6"),
            std::string::npos);
  EXPECT_EQ(N("Slice", 9).input("x", {"8", "4"}).attrInts("starts", {2}).attrInts("ends", {5}).attrInts("axes", {0}).out(), "[3, 4]");
  EXPECT_EQ(N("GatherElements").input("x", {"2", "3"}).input("i", {"2", "5"}, i64).attr("axis", 1).out(), "[2, 5]");
  EXPECT_EQ(N("ScatterND").input("x", {"4", "5"}).input("i", {"2", "1"}, i64).input("u", {"2", "5"}).out(), "[4, 5]");
  EXPECT_EQ(N("Pad", 10).input("x", {"2", "3"}).attrInts("pads", {1, 0, 1, 2}).out(), "[4, 5]");
  EXPECT_EQ(N("Pad").input("x", {"2", "3"}).ints("p", {1, 2}).skip().ints("a", {1}).out(), "[2, 6]");
  EXPECT_EQ(N("MatMul").input("a", {"2", "K"}).input("b", {"3", "4"}).out(), "[2, 4]");
  EXPECT_EQ(N("Gemm").input("a", {"2", "K"}).input("b", {"3", "4"}).out(), "[2, 4]");
  EXPECT_EQ(N("Gemm").input("a", {"3", "2"}).input("b", {"3", "4"}).attr("transA", 1).out(), "[2, 4]");
  EXPECT_EQ(N("Gemm").input("a", {"3", "2"}).input("b", {"4", "3"}).attr("transA", 1).attr("transB", 1).out(), "[2, 4]");
  EXPECT_EQ(N("TopK").input("x", {"B", "9"}).ints("k", {3}).outputs(2), (std::vector<std::string>{"[B, 3]", "[B, 3]"}));
  EXPECT_EQ(N("TopK", 9).input("x", {"B", "9"}).attr("k", 4).attr("axis", 0).out(), "[4, 9]");
  EXPECT_EQ(N("QMatMul").tl().input("x", {"N", "8"}).attr("K", 8).attr("N", 6).out(), "[N, 6]");
  EXPECT_EQ(N("QMatMul").tl().input("x", {"N", "K"}).attr("K", 8).attr("N", 6).out(), "[N, 6]");
  // a symbolic inner dimension becomes K: a norm scale [7] then disagrees with it
  EXPECT_NE(N("QMatMul").tl().input("x", {"N", "D"}).skip().skip().skip().skip().skip().input("g", {"7"}).attr("K", 8).attr("N", 6)
                .failure().find("dimensions differ: 7 vs 8"),
            std::string::npos);
  EXPECT_NE(N("QMatMul").tl().input("x", {"N", "7"}).attr("K", 8).attr("N", 6).failure().find("inner dimension 7 is not K = 8"),
            std::string::npos);
  EXPECT_EQ(N("Conv").input("x", {"1", "3", "9"}).input("w", {"4", "3", "3"}).attrInts("strides", {2}).attr("auto_pad", "SAME_UPPER").out(),
            "[1, 4, 5]");
  EXPECT_EQ(N("Conv").input("x", {"1", "3", "9"}).input("w", {"4", "3", "3"}).attrInts("strides", {2}).attr("auto_pad", "VALID").out(),
            "[1, 4, 4]");
  EXPECT_NE(N("Concat").tl().input("a", {"2"}).input("b", {"3"}).failure().find("tl.Concat takes two pairs of inputs and gives two outputs"),
            std::string::npos);
  EXPECT_NE(N("KvAppend").tl().input("a", {"2"}).input("b", {"3"}).input("c", {"3"}).failure().find(
                "tl.KvAppend takes one or two pairs of inputs, an output each"),
            std::string::npos);
  EXPECT_NE(N("KvAppend").tl().input("a", {"2", "3"}).input("b", {"3"}).attr("axis", 0).failure().find("tl.KvAppend's pair 0 differs in rank"),
            std::string::npos);
  // as ONNX Concat, no default axis (docs/ops.md)
  EXPECT_NE(N("KvAppend").tl().input("a", {"1", "2"}).input("b", {"1", "3"}).failure().find("attribute 'axis' is missing"),
            std::string::npos);
  EXPECT_EQ(N("KvAppend").tl().input("a", {"1", "past", "4"}).input("b", {"1", "N", "4"}).attr("axis", 1).out(), "[1, N + past, 4]");
}

// Where an op reads indices beside its data, the output takes the data's element type, not
// the indices'.
TEST(ShapeRules, DataNotIndicesGiveTheOutputType) {
  using N = OneNode;
  const auto i64 = onnx::TensorProto::INT64;
  const auto f16 = onnx::TensorProto::FLOAT16;
  EXPECT_EQ(N("ScatterND").input("x", {"4", "5"}, f16).input("i", {"2", "1"}, i64).input("u", {"2", "5"}, f16).dtype(),
            DType::Float16);
  EXPECT_EQ(N("ScatterElements").input("x", {"4", "5"}).input("i", {"2", "5"}, i64).input("u", {"2", "5"}).dtype(),
            DType::Float);
  EXPECT_EQ(N("GatherElements").input("x", {"2", "3"}).input("i", {"2", "5"}, i64).attr("axis", 1).dtype(), DType::Float);
  EXPECT_EQ(N("Gather").input("x", {"6", "3"}, f16).input("i", {"2"}, i64).dtype(), DType::Float16);
  EXPECT_EQ(N("GatherND").input("x", {"6", "3"}).input("i", {"2", "1"}, i64).dtype(), DType::Float);
}

// Values that are expressions of a symbol (n = N, the first dim of x, N >= 1): decided
// where their sign is provable, left unknown where it is not.
TEST(ShapeRules, SymbolicValuesBySign) {
  const auto analyze = [](const std::string& body, const std::string& outputs) {
    Model m;
    const std::string text = "<ir_version: 8, opset_import: [\"\" : 17]>\ng (float[N, 4] x) => (" + outputs + ") {\n" +
                             "  s = Shape (x)\n  zero = Constant <value = int64[1] {0}> ()\n  big = Constant <value = int64[1] {100}> ()\n"
                             "  n = Gather (s, zero)\n" + body + "}";
    EXPECT_TRUE(onnx::OnnxParser::Parse(m.proto, text.c_str()).IsOK()) << text;
    Graph g(m.proto.graph());
    return inferShapes(m, g);
  };
  const auto value = [](const ShapeAnalysis& a, const char* t) {
    const auto& v = a.at(t).value;
    return v ? str(*v) : std::string("none");
  };
  const auto a = analyze(
      "  two = Constant <value = int64[1] {2}> ()\n  three = Constant <value = int64[1] {3}> ()\n"
      "  half = Div (n, two)\n  rem = Mod <fmod = 1> (n, three)\n  neg = Neg (n)\n  absn = Abs (n)\n  absneg = Abs (neg)\n"
      "  sign = Sign (n)\n  signneg = Sign (neg)\n  not = Not (n)\n  both = And (n, n)\n"
      "  back = Div (neg, two)\n  remneg = Mod <fmod = 1> (neg, three)\n  y = Slice (x, neg, big, zero)\n",
      "half, rem, absn, absneg, sign, signneg, not, both, back, remneg, y");
  EXPECT_EQ(value(a, "half"), "[N//2]");
  EXPECT_EQ(value(a, "rem"), "[N % 3]");
  EXPECT_EQ(value(a, "absn"), "[N]");
  EXPECT_EQ(value(a, "absneg"), "[N]");
  EXPECT_EQ(value(a, "sign"), "[1]");
  EXPECT_EQ(value(a, "signneg"), "[-1]");
  EXPECT_EQ(value(a, "not"), "[0]");   // N >= 1 is true
  EXPECT_EQ(value(a, "both"), "[1]");
  EXPECT_EQ(value(a, "back"), "none");  // C's division of a negative: not floor
  EXPECT_EQ(value(a, "remneg"), "none");
  EXPECT_EQ(str(a.at("y").dims), "[min(100, N), 4]");  // from -N: the start of the axis
  try {
    analyze("  five = Constant <value = int64[1] {5}> ()\n  m = Sub (n, five)\n  y = Slice (x, m, big, zero)\n", "y");
    ADD_FAILURE() << "a slice bound of unknown sign was taken";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot tell the sign of slice bound N - 5"), std::string::npos) << e.what();
  }
}

// Mod's values: the sign of the divisor's (Python's) by default, of the dividend's with fmod.
TEST(ShapeRules, ModValuesEitherSign) {
  EXPECT_EQ(OneNode("Mod").ints("a", {7, -7}).ints("b", {3, 3}).value(), "[1, 2]");
  EXPECT_EQ(OneNode("Mod").ints("a", {7, -7}).ints("b", {3, 3}).attr("fmod", 1).value(), "[1, -1]");
  EXPECT_EQ(OneNode("Mod").ints("a", {7}).ints("b", {0}).value(), "none");
}

// tl.RoPE's x_bshd input is read as [B, S, H, D]: the output is [B, H, S, D]; only rank 4.
TEST(ShapeRules, RopeOfBshdInput) {
  const auto rope = [](const std::vector<std::string>& x) {
    OneNode n("RoPE");
    n.tl().input("x", x).input("cos", {"S", "8"}).input("sin", {"S", "8"}).attr("x_bshd", 1);
    const std::string failed = n.failure();
    return failed.empty() ? n.shape() : failed;
  };
  EXPECT_EQ(rope({"B", "S", "4", "8"}), "[B, 4, S, 8]");
  EXPECT_NE(rope({"S", "4", "8"}).find("tl.RoPE's x_bshd input must be of rank 4"), std::string::npos);
}

TEST(ShapeRules, ConvSpatialDims) {
  EXPECT_EQ(OneNode("Conv").input("x", {"B", "3", "L"}).input("w", {"8", "3", "1"}).out(), "[B, 8, L]");
  for (const std::vector<std::string>& x : {std::vector<std::string>{"B", "3"}, {"B", "3", "2", "2", "2", "2"}}) {
    std::vector<std::string> w = x;
    w[0] = "8";
    EXPECT_NE(OneNode("Conv").input("x", x).input("w", w).failure().find("with 1 to 3 spatial dims"), std::string::npos)
        << x.size() - 2 << " spatial dims";
  }
}

}  // namespace
}  // namespace tl
