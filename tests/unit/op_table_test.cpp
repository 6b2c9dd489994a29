// The op table (ops/op_table.h) is complete and agrees with every stage that reads it:
// each op is lowered, evaluated on the host, a view or marked shape-only; every shape
// rule it names exists and every rule is named; each family's lowerings are rows of that
// family; the host evaluator takes exactly what the host column says.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "ops/host_eval.h"
#include "ops/op_table.h"
#include "runtime/lower/lower.h"
#include "shape/rules.h"

namespace tl {
namespace {

TEST(OpTable, EveryOpRunsSomewhereOrIsShapeOnly) {
  for (const auto& op : opTable()) {
    const std::string key = opKey(op.domain, op.name);
    const Lowerings* family = familyLowerings(op.family);
    const bool lowered = family && family->count(key);
    EXPECT_EQ(op.family != Family::None, lowered) << key << ": device column " << familyName(op.family);
    const bool runs = lowered || op.host != Host::None || op.view != View::Never;
    EXPECT_NE(runs, op.shapeOnly) << key << (op.shapeOnly ? " is marked shape-only but runs" : " runs nowhere");
    EXPECT_TRUE(shapeRuleNamed(op.shape)) << key << ": no shape rule named '" << op.shape << "'";
    EXPECT_EQ(findOp(op.domain, op.name), &op) << key;
  }
}

TEST(OpTable, EveryRuleIsNamedAndEveryLoweringIsARow) {
  std::set<std::string> named;
  for (const auto& op : opTable()) named.insert(op.shape);
  for (const auto& rule : shapeRuleNames()) EXPECT_TRUE(named.count(rule)) << "rule '" << rule << "' names no op";
  for (Family f : {Family::Elementwise, Family::Movement, Family::MatMul, Family::Attention, Family::Norm,
                   Family::Reduce, Family::Conv}) {
    ASSERT_TRUE(familyLowerings(f)) << familyName(f);
    for (const auto& [key, lowering] : *familyLowerings(f)) {
      const auto dot = key.find('.');
      const OpInfo* op = dot == std::string::npos ? findOp("", key) : findOp(key.substr(0, dot), key.substr(dot + 1));
      ASSERT_TRUE(op) << familyName(f) << " lowers '" << key << "', which the table lacks";
      EXPECT_EQ(op->family, f) << key << " is lowered in " << familyName(f) << " but its row says " << familyName(op->family);
    }
  }
}

TEST(OpTable, HostColumnIsWhatTheHostEvaluates) {
  const DTypeOf ints = [](const std::string&) { return DType::Int64; };
  const DTypeOf floats = [](const std::string&) { return DType::Float; };
  for (const auto& op : opTable()) {
    onnx::NodeProto n;
    n.set_domain(op.domain);
    n.set_op_type(op.name);
    n.add_input("x");
    n.add_output("y");
    EXPECT_EQ(hostEvaluable(n, ints), op.host != Host::None) << opKey(n);
    EXPECT_EQ(hostEvaluable(n, floats), op.host == Host::Exact) << opKey(n);  // float arithmetic stays on the device
  }
}

TEST(OpTable, ListingHasAHeaderAndEveryOp) {
  const std::string text = formatOpTable();
  EXPECT_EQ(text.rfind("op ", 0), 0u);
  for (const char* column : {"shape rule", "host", "view", "flops", "device", "only after"})
    EXPECT_NE(text.substr(0, text.find('\n')).find(column), std::string::npos) << column;
  for (const auto& op : opTable())
    EXPECT_NE(text.find("\n" + opKey(op.domain, op.name) + " "), std::string::npos) << opKey(op.domain, op.name);
  EXPECT_EQ(static_cast<size_t>(std::count(text.begin(), text.end(), '\n')), opTable().size() + 1);
}

TEST(OpTable, ViewsFollowTheViewColumn) {
  onnx::NodeProto cast;
  cast.set_op_type("Cast");
  cast.add_input("x");
  cast.add_output("y");
  EXPECT_TRUE(isView(cast, [](const std::string&) { return DType::Float; }));
  EXPECT_FALSE(isView(cast, [](const std::string& t) { return t == "x" ? DType::Int64 : DType::Float; }));
  onnx::NodeProto dropout = cast;
  dropout.set_op_type("Dropout");
  EXPECT_TRUE(isView(dropout, [](const std::string&) { return DType::Float; }));
  dropout.add_output("mask");
  EXPECT_FALSE(isView(dropout, [](const std::string&) { return DType::Float; }));
  onnx::NodeProto transpose = cast;
  transpose.set_op_type("Transpose");  // a view at some run shapes only: the runtime's call
  EXPECT_FALSE(isView(transpose, [](const std::string&) { return DType::Float; }));
  transpose.set_domain("com.example");
  EXPECT_FALSE(findOp(transpose));
}

// A node's cost at a binding: FLOPs from its row, bytes of its inputs and outputs (a
// Gather's rows rather than its table, a view nothing), worked by hand.
TEST(OpTable, CostAtABinding) {
  const std::map<std::string, std::vector<int64_t>> dims = {
      {"a", {2, 3, 8}}, {"w", {8, 5}}, {"y", {2, 3, 5}}, {"table", {100, 8}}, {"ids", {2, 3}}, {"rows", {2, 3, 8}},
      {"q", {1, 4, 3, 16}}, {"k", {1, 2, 10, 16}}, {"v", {1, 2, 10, 8}}, {"o", {1, 4, 3, 8}}};
  const auto dimsOf = [&](const std::string& t) { return dims.at(t); };
  const DTypeOf dtype = [](const std::string& t) { return t == "ids" ? DType::Int64 : DType::Float; };
  std::set<std::string> counted;
  const auto cost = [&](const char* domain, const char* op, std::vector<std::string> in, std::vector<std::string> out) {
    onnx::NodeProto n;
    n.set_domain(domain);
    n.set_op_type(op);
    for (const auto& t : in) n.add_input(t);
    for (const auto& t : out) n.add_output(t);
    return opCost(CostNode{n, dimsOf, dtype, &counted});
  };
  const OpCost mm = cost("", "MatMul", {"a", "w"}, {"y"});
  EXPECT_EQ(mm.flops, 2.0 * 6 * 8 * 5);
  EXPECT_EQ(mm.bytes, 4.0 * (48 + 40 + 30));
  const OpCost g = cost("", "Gather", {"table", "ids"}, {"rows"});
  EXPECT_EQ(g.flops, 0);
  EXPECT_EQ(g.bytes, 2 * 4.0 * 48 + 8 * 6);  // 6 rows of 8 floats read and written, 6 int64 ids
  const OpCost view = cost("", "Reshape", {"a", "ids"}, {"rows"});
  EXPECT_EQ(view.bytes, 0);
  // q [1, 4, 3, 16] against 10 keys of 16 and values of 8 (grouped: 2 kv heads).
  const OpCost att = cost("tl", "Attention", {"q", "k", "v"}, {"o"});
  EXPECT_EQ(att.flops, 2.0 * 4 * 3 * 10 * (16 + 8));
  EXPECT_EQ(cost("com.example", "Mystery", {"a"}, {"y"}).bytes, 0);
}

}  // namespace
}  // namespace tl
