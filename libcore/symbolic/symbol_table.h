// SymbolTable: the model's dimension symbols and the equalities proven between them.
//
// Symbols are declared where a model names them (a graph input's dim, a declared
// output or value_info shape). When shape inference proves two dimensions equal
// (broadcasting, Concat, MatMul's inner dimension, a declared output shape), `unify`
// expresses one symbol through the others and records why. `resolve` rewrites any
// expression over the surviving (free) symbols. It does not guess: an equality it
// cannot solve for a symbol, or one that contradicts itself, is an error.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "symbolic/sym_expr.h"

namespace tl {

// expr <= limit: where the model is defined at all (clip-text's position table of 77 rows,
// sliced to min(77, N), added to N rows: N <= 77). Found by unify, checked by bindings.
struct SymbolBound {
  SymExpr expr;
  int64_t limit = 0;
  std::string evidence;
};

struct SymbolRelation {
  std::string symbol;    // the eliminated symbol
  SymExpr value;         // what it equals, over free symbols (kept resolved)
  std::string evidence;  // where the equality was proven
};

class SymbolTable {
 public:
  // `origin` says where it was first seen, e.g. "input 'input_ids' axis 1". Symbols
  // declared on graph inputs are preferred to stay free; `onInput` counts them.
  void declare(const std::string& name, const std::string& origin, bool onInput);

  SymExpr resolve(const SymExpr& e) const;
  // Records a == b (after resolving). Throws tl::Error if they provably differ or the
  // equality cannot be solved for a symbol. e == min(c, e) (either way round) holds
  // exactly when e <= c: that is recorded as a bound instead.
  void unify(const SymExpr& a, const SymExpr& b, const std::string& evidence);

  bool isDeclared(const std::string& name) const { return origin_.count(name) != 0; }
  bool onInput(const std::string& name) const { return inputUses_.count(name) != 0; }
  std::vector<std::string> freeSymbols() const;  // in declaration order
  const std::vector<SymbolRelation>& relations() const { return relations_; }
  const std::vector<SymbolBound>& bounds() const { return bounds_; }
  const std::string& origin(const std::string& name) const { return origin_.at(name); }

 private:
  std::vector<std::string> order_;
  std::map<std::string, std::string> origin_;
  std::map<std::string, int> inputUses_;
  std::map<std::string, SymExpr> subst_;
  std::vector<SymbolRelation> relations_;
  std::vector<SymbolBound> bounds_;
};

}  // namespace tl
