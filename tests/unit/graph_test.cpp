#include "graph/graph.h"

#include <gtest/gtest.h>

#include "cli/error.h"

namespace tl {
namespace {

onnx::NodeProto* addNode(onnx::GraphProto& g, const std::string& name, const std::string& op,
                         std::vector<std::string> in, std::vector<std::string> out) {
  auto* n = g.add_node();
  n->set_name(name);
  n->set_op_type(op);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

std::string errorOf(const onnx::GraphProto& g) {
  try {
    Graph graph(g);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Graph, TopologicalOrderIgnoresFileOrder) {
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  addNode(g, "c", "Relu", {"b"}, {"y"});
  addNode(g, "a", "Relu", {"x"}, {"a"});
  addNode(g, "b", "Add", {"a", "a"}, {"b"});
  g.add_output()->set_name("y");
  Graph graph(g);
  EXPECT_EQ(graph.topoOrder(), (std::vector<size_t>{1, 2, 0}));
  EXPECT_EQ(graph.producer("a"), 1);
  EXPECT_EQ(graph.producer("x"), -1);
  EXPECT_EQ(graph.consumers("a"), (std::vector<size_t>{2, 2}));
  EXPECT_TRUE(graph.isGraphInput("x"));
}

TEST(Graph, CycleIsNamed) {
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  addNode(g, "first", "Add", {"x", "loop"}, {"a"});
  addNode(g, "second", "Relu", {"a"}, {"loop"});
  EXPECT_NE(errorOf(g).find("cycle"), std::string::npos) << errorOf(g);
  EXPECT_NE(errorOf(g).find("node 'first'"), std::string::npos) << errorOf(g);
}

TEST(Graph, DanglingInputIsNamed) {
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  addNode(g, "MatMul_3", "MatMul", {"x", "weight_missing"}, {"y"});
  EXPECT_EQ(errorOf(g), "node 'MatMul_3': input 'weight_missing' is not produced by any node, initializer or graph input");
}

TEST(Graph, DuplicateProducerAndUnnamedNodes) {
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  addNode(g, "", "Relu", {"x"}, {"y"});
  addNode(g, "", "Neg", {"x"}, {"y"});
  EXPECT_EQ(errorOf(g), "node 'Neg#1': output 'y' is also produced by node 'Relu#0'");
}

TEST(Graph, OptionalInputsMayBeEmpty) {
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  addNode(g, "clip", "Clip", {"x", "", "hi"}, {"y"});
  auto* hi = g.add_initializer();
  hi->set_name("hi");
  Graph graph(g);
  EXPECT_NE(graph.initializer("hi"), nullptr);
  EXPECT_EQ(graph.initializer("x"), nullptr);
}

TEST(Graph, UndefinedGraphOutput) {
  onnx::GraphProto g;
  g.add_input()->set_name("x");
  g.add_output()->set_name("nowhere");
  EXPECT_EQ(errorOf(g), "graph output 'nowhere' is not produced by any node");
}

}  // namespace
}  // namespace tl
