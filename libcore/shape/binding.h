// Binding symbols to integers: from `--bind N=7,past=11`, or solved from the
// concrete shapes of a run's inputs, then evaluating any shape expression.
// This is the one place a run turns tl-shape's expressions into numbers.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "shape/shape_inference.h"

namespace tl {

using SymbolValues = std::map<std::string, int64_t>;

// "N=7,past=11" -> {N: 7, past: 11}. Throws tl::Error (usage) on bad syntax.
SymbolValues parseBindings(const std::string& text);

// Solves the free symbols from the actual shapes of the graph inputs and checks
// every input dimension against its expression. Throws tl::Error naming the input
// and axis on a mismatch or a symbol the inputs do not determine.
SymbolValues bindFromInputs(const ShapeAnalysis& analysis,
                            const std::vector<std::pair<std::string, std::vector<int64_t>>>& inputs);

// Accepts values for eliminated symbols too (sumN=12) and checks them against their relation.
void checkBindings(const ShapeAnalysis& analysis, const SymbolValues& values);
// Throws when the values put a bounded expression over its bound (SymbolTable::bounds).
void checkBounds(const ShapeAnalysis& analysis, const SymbolValues& values);

std::vector<int64_t> evaluateDims(const std::vector<SymExpr>& dims, const SymbolValues& values);

}  // namespace tl
