// The human-readable form of a shape analysis (`tl-shape --emit text`): per tensor
// its dtype, shape, producer and class; the symbol table with the relations found;
// a summary. With bindings, shapes and values are shown evaluated.
#pragma once

#include <string>

#include "graph/graph.h"
#include "shape/binding.h"
#include "shape/shape_inference.h"

namespace tl {

std::string renderShapeReport(const Graph& graph, const ShapeAnalysis& analysis, const std::string& title,
                              const SymbolValues* bindings);

}  // namespace tl
