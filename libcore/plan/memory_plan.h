// Memory planning from symbolic sizes (Transformer-Lite 2.1): the activations of one
// run placed in a single arena, decided once for every length up to --max-seq.
//
// Each tensor a kernel writes lives from its producer to its last reader in the
// schedule (views extend their input's life; graph outputs live to the end). Two
// tensors share a buffer when their lives do not overlap and their byte sizes are
// provably related, the difference or the ratio of the two expressions being a
// constant, so the larger is the larger at every binding and the buffer is sized by
// it. Buffers follow one another in the arena; offsets are expressions of the symbols.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "graph/graph.h"
#include "shape/binding.h"
#include "shape/shape_inference.h"
#include "symbolic/sym_expr.h"

namespace tl {

struct PlanOptions {
  int64_t maxSeq = 2048;  // the longest sequence: every symbolic input dim stays within it
  int64_t batch = 1;      // the value of the batch symbols (memory_plan.cpp's bindingRegion)
  int64_t align = 512;    // bytes between buffer starts (sub-buffer alignment: NVIDIA needs 512)
  std::set<std::string> outside;  // tensors that live outside the arena (the in-place KV caches)
};

struct PlannedTensor {
  std::string name;
  SymExpr bytes;
  int first = 0, last = 0;  // schedule positions of its producer and its last reader
  int buffer = -1;
};

struct PlannedBuffer {
  SymExpr bytes;   // its largest tensor's size
  SymExpr offset;  // in the arena: the aligned sizes of the buffers before it
  std::vector<int> tensors;
  int64_t capacity = 0;  // aligned bytes at its largest within --max-seq: what a run allocates
};

struct MemoryPlan {
  PlanOptions options;
  std::vector<PlannedTensor> tensors;  // in schedule order
  std::vector<PlannedBuffer> buffers;  // in arena order
  SymExpr arena;  // bytes, before alignment: the sum of the buffers
  SymExpr naive;  // bytes: every tensor its own buffer
  // The binding within --max-seq where the arena is largest, and the sizes there
  // (the arena with each buffer's alignment).
  SymbolValues worst;
  int64_t arenaBytes = 0, naiveBytes = 0;
  int64_t allocated = 0;  // the buffers' capacities: one allocation at start holds every length
};

// Throws tl::Error (bad input) when the model's inputs cannot fit --max-seq, or when a
// size cannot be bounded (not provably growing with the sequence symbols).
MemoryPlan planMemory(const Graph& graph, const ShapeAnalysis& analysis, const PlanOptions& options);

// --emit text: tensor -> buffer, the buffers, the arena against naive.
std::string renderPlan(const MemoryPlan& plan, const std::string& title);

// Writes the plan into the model's metadata_props (tl.plan.*, docs/artifacts.md).
void annotatePlan(onnx::ModelProto& proto, const MemoryPlan& plan);

}  // namespace tl
