// RunCost: what one run of a model must compute and move, derived from the graph and
// tl-shape's expressions at a binding. These are the numbers a benchmark row is judged
// by, the same for tl and for any peer that runs the same model:
// - flops: the op table's count of each node (ops/op_table.h): 2 x M x K x N of every
//   product (MatMul, Gemm, tl.MatMul, tl.QMatMul), tl.Attention's QK^T and PV, Conv, the
//   rotary angles; elementwise ops, norms and softmax are not counted. A fused model
//   counts what the unfused one does;
// - bytes: what a perfect engine must move: each weight read once per run (an
//   embedding table only in the rows it gathers), the KV cache read in full (the
//   past rows and the new ones, which attention reads) and the new rows written, at the
//   element size the cache is stored in.
//   Activations are not counted: an engine may keep them on chip.
#pragma once

#include <string>
#include <vector>

#include "graph/graph.h"
#include "shape/binding.h"
#include "shape/shape_inference.h"

namespace tl {

struct RunCost {
  double flops = 0;
  double weightBytes = 0;
  double cacheReadBytes = 0;
  double cacheWrittenBytes = 0;
  double bytes() const { return weightBytes + cacheReadBytes + cacheWrittenBytes; }
};

// A cache input and the output that holds it extended by the run's new rows, and the
// bytes of an element as the engine stores it (tl-plan --kv-type f16: 2; 0: the tensor's
// dtype's).
struct CachePair {
  std::string input, output;
  double elementBytes = 0;
};

// Bytes of every constant that a tensor op reads: the model's weights as they sit in
// device memory (constants that only shape computations read are folded away).
double modelWeightBytes(const Graph& graph, const ShapeAnalysis& analysis);

// Throws tl::Error when a shape cannot be evaluated at the binding.
RunCost runCost(const Graph& graph, const ShapeAnalysis& analysis, const SymbolValues& binding,
                const std::vector<CachePair>& caches);

}  // namespace tl
