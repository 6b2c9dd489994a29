// Graph: a read-only view of an ONNX graph for analyses.
//
// It indexes producers and consumers of every tensor name, checks that the graph
// is well formed (each tensor produced once, every input defined, no cycles) and
// gives a topological order that does not rely on the file's node order.
// It does not own or change the GraphProto.
#pragma once

#include <string>
#include <unordered_map>
#include <vector>

#include <onnx/onnx_pb.h>

namespace tl {

class Graph {
 public:
  // Throws tl::Error (naming the node) for dangling inputs, duplicate producers, cycles.
  explicit Graph(const onnx::GraphProto& g);

  const onnx::GraphProto& proto() const { return *g_; }
  size_t nodeCount() const { return static_cast<size_t>(g_->node_size()); }
  const onnx::NodeProto& node(size_t i) const { return g_->node(static_cast<int>(i)); }
  // The node's name, or "OpType#index" for unnamed nodes.
  std::string nodeName(size_t i) const;
  const std::vector<size_t>& topoOrder() const { return order_; }

  // Node index producing the tensor; -1 for graph inputs, initializers and unknown names.
  int producer(const std::string& tensor) const;
  const std::vector<size_t>& consumers(const std::string& tensor) const;
  const onnx::TensorProto* initializer(const std::string& name) const;
  bool isGraphInput(const std::string& name) const;

 private:
  const onnx::GraphProto* g_;
  std::unordered_map<std::string, int> producer_;
  std::unordered_map<std::string, std::vector<size_t>> consumers_;
  std::unordered_map<std::string, const onnx::TensorProto*> initializers_;
  std::unordered_map<std::string, bool> graphInputs_;
  std::vector<size_t> order_;
};

}  // namespace tl
