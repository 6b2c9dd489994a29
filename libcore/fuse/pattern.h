// What tl-fuse's passes share: reading a graph while proving a pattern (single readers,
// constants by value), and rewriting each proven pattern into one node.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <vector>

#include "fuse/fuse.h"
#include "graph/graph.h"
#include "onnx/model_io.h"
#include "shape/shape_inference.h"

namespace tl {

struct PatternContext {
  PatternContext(const Model& model, const Graph& graph, const ShapeAnalysis& analysis);
  const Model& model;
  const Graph& graph;
  const ShapeAnalysis& analysis;
  std::set<std::string> outputs;  // graph outputs: never internal to a pattern

  // The node producing `tensor`, when it is of plain ONNX op `op`; else nullptr.
  const onnx::NodeProto* producer(const std::string& tensor, const char* op, size_t* index = nullptr) const;
  // The one node reading `tensor`, when exactly one does and `tensor` is no graph output.
  const onnx::NodeProto* onlyReader(const std::string& tensor, size_t* index = nullptr) const;
  // A one-element constant's value (an initializer or a Constant node).
  std::optional<double> scalar(const std::string& tensor) const;
  // The values of a tensor tl-shape knows as constant integers (folded shape tensors).
  std::optional<std::vector<int64_t>> ints(const std::string& tensor) const;
  // A tensor's dims as tl-shape's expressions, and whether two dims are provably equal.
  const std::vector<SymExpr>& dims(const std::string& tensor) const { return analysis.at(tensor).dims; }
  bool same(const SymExpr& a, const SymExpr& b) const { return analysis.symbols.resolve(a) == analysis.symbols.resolve(b); }
  bool sameDims(const std::string& a, const std::string& b) const;
};

bool isOp(const onnx::NodeProto* node, const char* op);  // plain ONNX op of that type
// A Transpose's perm is exactly `want`.
bool hasPerm(const onnx::NodeProto& transpose, const std::vector<int64_t>& want);
// The constant behind a tensor: an initializer, a Constant node's value, or either through
// Identity nodes (TorchScript shares equal weights that way); nullptr if it is computed.
const onnx::TensorProto* constantOf(const Graph& graph, const std::string& tensor);
// A pass's anchor: a plain op ("Softmax"), or a tl op written by an earlier pass ("tl.RMSNorm").
bool isAnchor(const onnx::NodeProto& node, const std::string& anchor);
// The input of a two-input node that is not `known` ("" when neither or both are).
std::string otherInput(const onnx::NodeProto& node, const std::string& known);

// One proven pattern: the nodes it replaces, and the node replacing them, which takes
// the place of the last of them (whose output it writes).
struct Rewrite {
  std::vector<size_t> remove;
  onnx::NodeProto fused;
  std::vector<onnx::NodeProto> before;  // more new nodes, placed just before `fused`
  // More new nodes, placed just before node `earlyAt` (the first after what they read), so
  // that every reader of theirs may come earlier than `fused` (and, merged by cse, several
  // rewrites' copies sit where the first reader can see them).
  std::vector<onnx::NodeProto> early;
  size_t earlyAt = 0;
  std::vector<std::pair<size_t, onnx::NodeProto>> edits;  // other nodes, rewritten where they stand
};
// N of a projection by a constant matrix: MatMul(a, W) with W a constant float [K, N], or
// a tl.MatMul / tl.QMatMul of one output, not split, not transposed and with nothing but a
// bias (graph/tl_ops.h); 0 for anything else.
int64_t projectionWidth(const Graph& graph, const onnx::NodeProto& n);
// Whether every reader of `tensor` comes after node `index` in the file (a node moved there
// still precedes them).
bool readOnlyAfter(const Graph& graph, const std::string& tensor, size_t index);

// A Constant node of int64 values [v.size()], named and outputting `name`.
onnx::NodeProto constantNode(const std::string& name, const std::vector<int64_t>& v);
// A `tl` node named after `base`, with these inputs and output.
onnx::NodeProto tlNode(const std::string& op, const std::string& base, const std::vector<std::string>& inputs,
                       const std::string& output);
// Applies rewrites that share no node, and imports the `tl` domain when there are any.
void applyRewrites(Model& model, std::vector<Rewrite> rewrites);

// A pattern pass: `match` is tried at every node of op `anchor` (isAnchor) and says why a
// node does not start its pattern ("" when it does, with the rewrite filled in; "" with
// no rewrite when the node is plainly no start, not worth a near miss). The matches are
// rewritten; the rest are the pass's near misses.
using PatternMatch = std::string (*)(const PatternContext& c, size_t anchor, Rewrite& r);
PassResult runPattern(Model& model, const char* anchor, PatternMatch match);
// Adds another run's rewrites and near misses to a pass's result (a pass of two anchors).
void absorb(PassResult& into, const PassResult& more);

}  // namespace tl
