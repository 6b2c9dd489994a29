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

// The operator's rule, through the op table's shape column; nullptr when the table has
// no row for it.
ShapeRule findShapeRule(const std::string& domain, const std::string& opType);
// A rule by the name the op table gives it; nullptr for an unknown name.
ShapeRule shapeRuleNamed(const std::string& name);
// Every rule's name.
std::vector<std::string> shapeRuleNames();

}  // namespace tl
