// RuleContext: what a shape rule sees of one node while inference runs.
//
// A rule reads its inputs' shapes and known values, asks for attributes, proves
// dimensions equal through `unify` (which records the node as evidence) and sets
// each output's dtype, dims and, when it can compute them, values. Errors raised
// here are reported with the node's name by the driver.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "shape/shape_inference.h"

namespace tl {

class RuleContext {
 public:
  RuleContext(ShapeAnalysis& analysis, const Graph& graph, size_t nodeIndex, int64_t opset);

  const onnx::NodeProto& node() const { return *node_; }
  int64_t opset() const { return opset_; }
  size_t numInputs() const { return static_cast<size_t>(node_->input_size()); }
  size_t numOutputs() const { return static_cast<size_t>(node_->output_size()); }
  bool hasInput(size_t i) const { return i < numInputs() && !node_->input(static_cast<int>(i)).empty(); }
  bool hasOutput(size_t i) const { return i < numOutputs() && !node_->output(static_cast<int>(i)).empty(); }
  const TensorShape& input(size_t i) const;  // throws if absent
  size_t rank(size_t i) const { return input(i).dims.size(); }

  const onnx::AttributeProto* attr(const char* name) const;
  std::optional<int64_t> attrInt(const char* name) const;
  int64_t attrInt(const char* name, int64_t fallback) const;
  std::optional<std::vector<int64_t>> attrInts(const char* name) const;

  // Known elements of input i, or nullptr.
  const std::vector<SymExpr>* value(size_t i) const;
  // Elements of input i, which must be known; `what` names it in the error.
  const std::vector<SymExpr>& requireValue(size_t i, const char* what) const;
  // Elements of input i, which must be integer constants.
  std::vector<int64_t> requireConstInts(size_t i, const char* what) const;

  // Proves a == b (unifying symbols); returns the resolved common value.
  SymExpr unify(const SymExpr& a, const SymExpr& b);
  // Numpy-style broadcast of several shapes.
  std::vector<SymExpr> broadcast(const std::vector<std::vector<SymExpr>>& shapes);
  // Normalizes a possibly negative axis for the given rank.
  size_t axis(int64_t a, size_t rank) const;
  SymExpr resolve(const SymExpr& e) const { return analysis_.symbols.resolve(e); }

  void setOutput(size_t i, DType dtype, std::vector<SymExpr> dims,
                 std::optional<std::vector<SymExpr>> value = std::nullopt);

  // Marks output i as an index tensor (see TensorShape::iotaAxis / indexAxes).
  void setIotaAxis(size_t i, int axis);
  void setIndexAxes(size_t i, std::vector<int> axes);
  // The data axis of extent `extent` is read at exactly 0..count-1. Where the extent is
  // still a free symbol, that proves it equals `count`: unify, naming `what` as evidence.
  void readsWholeAxis(const SymExpr& extent, const SymExpr& count, const std::string& what);
  // Records an equality that the graph makes plausible but does not prove.
  void assume(const SymExpr& a, const SymExpr& b, const std::string& why);
  bool isFreeSymbol(const SymExpr& e) const;

  [[noreturn]] void fail(const std::string& message) const;

 private:
  ShapeAnalysis& analysis_;
  const Graph& graph_;
  size_t index_;
  const onnx::NodeProto* node_;
  int64_t opset_;
};

// Constant dims, if every dim is a constant.
std::optional<std::vector<int64_t>> constDims(const std::vector<SymExpr>& dims);

}  // namespace tl
