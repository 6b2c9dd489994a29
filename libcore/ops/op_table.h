// The operator table: what each (domain, op) is, stated once (docs/ops.md's table is
// generated from it, `tl-shape --list-ops` prints it).
//
// A row names the op's shape rule (shape/rules.cpp, by name), whether and how it is
// evaluated on the host (ops/host_eval.h), when it is a view, how its FLOPs are counted
// at a binding, and the family of device lowerings that runs it (runtime/lower/, one
// file per family). Every stage asks here instead of keeping its own list of names:
// shape inference finds rules through it, tl-fuse folds what it says the host evaluates,
// tl-plan and tl-run share its views, tl-bench counts its FLOPs.
//
// Adding an operator: one row here, its shape rule if no existing one fits, its lowering
// in its family's file if it runs on the device (tests/unit/op_table_test.cpp checks that
// every row is lowered, evaluated on the host, a view, or marked shape-only).
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

#include "graph/graph.h"
#include "onnx/model_io.h"  // isOnnxDomain
#include "tensor/tensor.h"

namespace tl {

// Where the device lowering of an op lives (runtime/lower/<family>.cpp).
enum class Family { None, Elementwise, Movement, MatMul, Attention, Norm, Reduce, Conv };
const char* familyName(Family f);

// Host evaluation (ops/host_eval.h): none; exact for every dtype the host handles
// (bool, int32, int64, float32: data movement, comparisons, logic); integers only
// (arithmetic: float rounding is the kernels' business).
enum class Host { None, Exact, Integer };

// When the op's output is its input reinterpreted, sharing its buffer:
// - Always: Reshape, Flatten, Squeeze, Unsqueeze, Identity;
// - SameType: Cast to the input's own dtype;
// - NoMask: Dropout without its mask output and training_mode input;
// - AtBinding: at some run shapes only (runtime's isRunView: a Transpose that moves dims
//   of 1 alone, an Expand to its input's shape, a Slice that is a prefix of its input).
enum class View { Never, Always, SameType, NoMask, AtBinding };

// What a FLOP count sees of a node at a binding: its dims by tensor name, and the work
// other nodes of the run already counted (a computation several nodes repeat, such as the
// rotary angles every layer's tl.RoPE computes from the same positions, counts once, as
// the export computes it once).
struct CostNode {
  const onnx::NodeProto& node;
  std::function<std::vector<int64_t>(const std::string&)> dims;
  std::function<DType(const std::string&)> dtype;
  std::set<std::string>* counted;
};
// FLOPs of one node: the matrix work (2 x M x K x N of a product, attention's QK^T and PV,
// convolutions, RoPE's angles from positions); nullptr counts none (elementwise ops,
// norms, softmax and data movement are not counted).
using FlopCount = double (*)(const CostNode&);
// Bytes one node reads and writes; nullptr: each input and output once.
using ByteCount = double (*)(const CostNode&);

struct OpInfo {
  const char* domain;  // "" for ai.onnx
  const char* name;
  const char* shape;   // the shape rule's name (shape/rules.cpp)
  Host host;
  View view;
  FlopCount flops;
  ByteCount bytes;
  Family family;       // Family::None: no device kernel
  bool shapeOnly;      // only folded by tl-shape: no kernel, no host evaluation
  const char* writtenBy;  // the stage that writes it (tl-domain ops), or nullptr
  const char* description;
};

// The table's key of an op: "Add" for ONNX operators, "tl.RoPE" for others.
std::string opKey(const std::string& domain, const std::string& op);
std::string opKey(const onnx::NodeProto& node);

// The row of an op; nullptr when the table has none.
const OpInfo* findOp(const std::string& domain, const std::string& op);
const OpInfo* findOp(const onnx::NodeProto& node);
// Every row, ONNX operators first, each part in name order.
const std::vector<OpInfo>& opTable();

// Whether a node is one of the ONNX standard operators named `op`.
bool isOnnxOp(const onnx::NodeProto& node, const char* op);

// A tensor's dtype by name (ShapeAnalysis::dtypeOf()).
using DTypeOf = std::function<DType(const std::string&)>;

// A node's cost at a binding: its row's FLOPs and the bytes it reads and writes (each
// input and output once, a view none, a Gather the rows it reads rather than its table);
// an op the table lacks costs nothing.
struct OpCost {
  double flops = 0, bytes = 0;
};
OpCost opCost(const CostNode& c);
// Whether a node runs no kernel: its output names its input's buffer (the view column;
// View::AtBinding ops are views only at some run shapes, which the runtime decides).
// Tensors are written only by their producer, so sharing is safe.
bool isView(const onnx::NodeProto& node, const DTypeOf& dtype);

// The node that wrote `tensor`, looking through views: its index (-1 for a graph input
// or initializer) and the tensors passed on the way, `tensor` first and that node's
// output last.
struct ViewChain {
  int producer = -1;
  std::vector<std::string> tensors;
};
ViewChain producerThroughViews(const Graph& graph, const std::string& tensor, const DTypeOf& dtype);

// The table as text: a header line, then a row per op (op, shape rule, host, view, FLOPs
// counted, device family, the stage after which it appears; "-" for none, "shape-only"
// for the device of an op only folded), aligned in columns, and its description.
std::string formatOpTable();

}  // namespace tl
