// Shape rules, one per ONNX operator (ai.onnx domain, opsets 1-21 as LLM exports use
// them). A rule sets every output's dtype and symbolic dims, and its values when
// the inputs' values are known, which is how shape-computing chains fold away.
// An operator without a rule is an error, never a guess.
#pragma once

#include <string>
#include <vector>

#include "shape/rule_context.h"

namespace tl {

using ShapeRule = void (*)(RuleContext&);

// nullptr when there is no rule for the operator.
ShapeRule findShapeRule(const std::string& domain, const std::string& opType);
std::vector<std::string> supportedOps();

}  // namespace tl
