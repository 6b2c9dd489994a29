#include "graph/graph.h"

#include <deque>

#include "cli/error.h"

namespace tl {

Graph::Graph(const onnx::GraphProto& g) : g_(&g) {
  for (const auto& t : g.initializer()) initializers_[t.name()] = &t;
  for (const auto& i : g.input()) graphInputs_[i.name()] = true;
  for (size_t i = 0; i < nodeCount(); ++i) {
    for (const auto& out : node(i).output()) {
      if (out.empty()) continue;
      if (graphInputs_.count(out) || initializers_.count(out))
        throw Error("node '" + nodeName(i) + "': output '" + out + "' redefines a graph input or initializer");
      auto [it, fresh] = producer_.emplace(out, static_cast<int>(i));
      if (!fresh)
        throw Error("node '" + nodeName(i) + "': output '" + out + "' is also produced by node '" +
                    nodeName(static_cast<size_t>(it->second)) + "'");
    }
  }
  std::vector<int> pending(nodeCount(), 0);
  for (size_t i = 0; i < nodeCount(); ++i) {
    for (const auto& in : node(i).input()) {
      if (in.empty()) continue;  // an omitted optional input
      consumers_[in].push_back(i);
      if (producer_.count(in)) {
        ++pending[i];
      } else if (!graphInputs_.count(in) && !initializers_.count(in)) {
        throw Error("node '" + nodeName(i) + "': input '" + in +
                    "' is not produced by any node, initializer or graph input");
      }
    }
  }
  for (const auto& out : g.output())
    if (!producer_.count(out.name()) && !graphInputs_.count(out.name()) && !initializers_.count(out.name()))
      throw Error("graph output '" + out.name() + "' is not produced by any node");
  // Kahn's algorithm, taking nodes in file order when several are ready.
  std::deque<size_t> ready;
  for (size_t i = 0; i < nodeCount(); ++i)
    if (pending[i] == 0) ready.push_back(i);
  while (!ready.empty()) {
    size_t i = ready.front();
    ready.pop_front();
    order_.push_back(i);
    for (const auto& out : node(i).output()) {
      auto it = consumers_.find(out);
      if (out.empty() || it == consumers_.end()) continue;
      for (size_t c : it->second)
        if (--pending[c] == 0) ready.push_back(c);
    }
  }
  if (order_.size() != nodeCount()) {
    for (size_t i = 0; i < nodeCount(); ++i)
      if (pending[i] > 0) throw Error("node '" + nodeName(i) + "': the graph has a cycle through this node");
  }
}

std::string Graph::nodeName(size_t i) const {
  const auto& n = node(i);
  return n.name().empty() ? n.op_type() + "#" + std::to_string(i) : n.name();
}

int Graph::producer(const std::string& tensor) const {
  auto it = producer_.find(tensor);
  return it == producer_.end() ? -1 : it->second;
}

const std::vector<size_t>& Graph::consumers(const std::string& tensor) const {
  static const std::vector<size_t> none;
  auto it = consumers_.find(tensor);
  return it == consumers_.end() ? none : it->second;
}

const onnx::TensorProto* Graph::initializer(const std::string& name) const {
  auto it = initializers_.find(name);
  return it == initializers_.end() ? nullptr : it->second;
}

bool Graph::isGraphInput(const std::string& name) const { return graphInputs_.count(name) != 0; }

}  // namespace tl
