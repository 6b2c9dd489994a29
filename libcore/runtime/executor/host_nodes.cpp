// Host evaluation of small input-derived tensors (ops/host_eval.h): which nodes run on
// the host at a binding, and their values for the run.
#include "cli/error.h"
#include "ops/host_eval.h"
#include "runtime/executor.h"

namespace tl {

void Executor::findHostNodes(const std::unordered_map<std::string, const onnx::TensorProto*>& constants) {
  onHost_.assign(graph_.nodeCount(), 0);
  for (const auto& in : graph_.proto().input()) {
    const auto& t = analysis_.at(in.name());
    if (t.cls == TensorClass::Input && (isInteger(t.dtype) || t.dtype == DType::Bool)) hostInputs_.insert(in.name());
  }
  for (size_t i : tensorNodes_) {
    const auto& n = graph_.node(i);
    if (!hostEvaluable(n, analysis_.dtypeOf())) continue;
    std::vector<std::string> small;  // constants to keep on the host
    bool known = true;
    for (const auto& in : n.input()) {
      if (in.empty() || hostInputs_.count(in) || hostProducer_.count(in) || hostConstants_.count(in)) continue;
      const auto& t = analysis_.at(in);
      if (t.cls == TensorClass::Shape) continue;  // folded: its values are on the host
      auto c = constants.find(in);
      if (t.cls == TensorClass::Constant && c != constants.end() && elementCount(shapes_.at(in)) <= kHostElements) {
        small.push_back(in);
        continue;
      }
      known = false;
    }
    if (!known) continue;
    for (const auto& name : small) hostConstants_[name] = readTensor(*constants.at(name), model_.baseDir);
    hostable_.push_back(i);
    hostProducer_[n.output(0)] = i;
  }
}


const Tensor& Executor::hostValue(const std::string& tensor) {
  if (auto h = hostValues_.find(tensor); h != hostValues_.end()) return h->second;
  if (auto c = hostConstants_.find(tensor); c != hostConstants_.end()) return c->second;
  const auto& info = analysis_.at(tensor);
  if (info.cls != TensorClass::Shape) throw Error("tensor '" + tensor + "' has no host value in this run");
  Tensor& t = hostValues_[tensor];
  t.name = tensor;
  t.dtype = info.dtype;
  t.dims = shape(tensor);
  t.bytes = foldedBytes(tensor);
  return t;
}


void Executor::evaluateHostNodes() {
  for (size_t i : hostRun_) {
    const auto& n = graph_.node(i);
    std::vector<const Tensor*> in;
    for (const auto& name : n.input()) in.push_back(name.empty() ? nullptr : &hostValue(name));
    try {
      hostValues_[n.output(0)] = evaluateOnHost(n, in, shape(n.output(0)), analysis_.at(n.output(0)).dtype);
    } catch (const Error& e) {
      throw Error("node '" + graph_.nodeName(i) + "' (" + n.op_type() + ", on the host): " + e.what(), e.code());
    }
  }
}

}  // namespace tl
