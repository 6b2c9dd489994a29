// Symbolic shape inference (Transformer-Lite 2.1): every tensor's shape as an
// expression over the model's input symbols, and the value of every
// shape-computing tensor, so that no shape-computing op runs at inference.
//
// Classification (paper figure 1): a node is *shape-computing* when its outputs'
// values are known symbolically (Shape, and everything computed from shapes and
// constants: Gather on shapes, Concat of dims, ...). Those nodes are folded: a
// Reshape's target is an expression list evaluated from the symbol values. All
// other nodes are *tensor-computing* and run on the device. Constant nodes hold data.
//
// Symbols are unified along the way (broadcasting, Concat, MatMul, declared output
// and value_info shapes), so each model ends with a minimal set of free symbols.
// An op without a rule, an unknowable dimension or a contradiction is an error
// naming the node; nothing is guessed.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/graph.h"
#include "onnx/model_io.h"
#include "ops/op_table.h"
#include "symbolic/symbol_table.h"
#include "tensor/tensor.h"

namespace tl {

enum class TensorClass { Input, Constant, Shape, Tensor };
enum class NodeClass { Constant, Shape, Tensor };
const char* className(TensorClass c);
const char* className(NodeClass c);

struct TensorShape {
  DType dtype = DType::Undefined;
  std::vector<SymExpr> dims;
  // The elements, row-major, when known symbolically (small integer-valued tensors only).
  std::optional<std::vector<SymExpr>> value;
  TensorClass cls = TensorClass::Tensor;
  int producer = -1;  // node index; -1 for graph inputs and initializers
  // Index tensors built from Range(0, n): each element equals its coordinate along
  // `iotaAxis` (-1: not such a tensor). `indexAxes` is the same for index tuples
  // (GatherND indices): component j of the last axis is the coordinate along
  // indexAxes[j]. A gather through them reads an axis at exactly 0..n-1, which proves
  // that axis's extent where the model leaves it as a free symbol (attention masks).
  int iotaAxis = -1;
  std::vector<int> indexAxes;
};

struct ShapeAnalysis {
  std::vector<std::string> order;  // every tensor, in definition order
  std::unordered_map<std::string, TensorShape> tensors;
  std::vector<NodeClass> nodeClass;  // by node index
  SymbolTable symbols;
  std::vector<std::string> inventedSymbols;  // names made up for unnamed dims (should be none)
  std::vector<std::string> notes;            // renamed dim names and similar
  size_t shapeOpsLeft = 0;   // shape-only nodes that could not be folded (the goal is zero)
  size_t shapeOnlyTensorOps = 0;  // tensor ops computed from shapes alone (Range over N, masks)

  const TensorShape& at(const std::string& name) const;
  // at(name).dtype as a function (what ops/ asks of tensors, without knowing this type).
  DTypeOf dtypeOf() const {
    return [this](const std::string& name) { return at(name).dtype; };
  }
};

// Largest tensor whose elements are tracked symbolically.
constexpr int64_t kMaxValueElements = 1024;

ShapeAnalysis inferShapes(const Model& model, const Graph& graph);

// Writes the result into the model: value_info for every tensor (dims as dim_value
// or expression dim_param), resolved input/output shapes, and the metadata_props
// described in docs/artifacts.md.
void annotateModel(onnx::ModelProto& proto, const ShapeAnalysis& analysis);

}  // namespace tl
