// Index algebra: what each element of a tensor holds, as a term over the element's own
// index, for the integer, bool and float chains exporters build masks with (Range, shape
// values, comparisons, And/Or/Not, Where, Gather/GatherND of a graph input, and the
// views and broadcasts between them). A term is proven from the graph's ops and
// tl-shape's expressions, for every value of the symbols, never sampled.
//
// Index variables are a tensor's axes (variable k runs over axis k); an axis of size 1
// has no variable (its index is 0). Integer values are affine in the variables, with
// coefficients that are symbol expressions (`j + past`, `(N + past) * b + j`).
// It knows nothing of attention: fuse/causal_mask.cpp reads masks with it.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fuse/pattern.h"
#include "symbolic/sym_expr.h"

namespace tl {

// sum coef[v] * v + constant over index variables v.
struct Affine {
  std::map<int, SymExpr> coef;  // no zero coefficients
  SymExpr constant;
  bool hasVars() const { return !coef.empty(); }
};

enum class IndexKind {
  Int,      // a: an integer
  Real,     // real: a float constant
  Bool,     // truth: a bool constant
  Load,     // element idx of graph input `input` (its own dtype)
  Le,       // a <= 0
  NonZero,  // args[0] != 0
  And,      // every args[i]
  Or,       // some args[i]
  Not,      // !args[0]
  Where,    // args[0] ? args[1] : args[2]
  Piece,    // args[v] where v is variable `var` (a Concat of single elements along that axis)
  Linear,   // args[0] (a term over a tensor of `dims`) at the row-major position a
};

struct IndexTerm;
using IndexTermPtr = std::shared_ptr<const IndexTerm>;
struct IndexTerm {
  IndexKind kind = IndexKind::Bool;
  Affine a;
  double real = 0;
  bool truth = false;
  std::string input;
  std::vector<Affine> idx;
  std::vector<SymExpr> dims;
  int var = -1;
  std::vector<IndexTermPtr> args;
};

std::string str(const IndexTermPtr& t);

// A tensor's term over its own axes, whose sizes are `dims` (resolved).
struct IndexValue {
  IndexTermPtr term;
  std::vector<SymExpr> dims;
};

class IndexAlgebra {
 public:
  explicit IndexAlgebra(const PatternContext& c) : c_(c) {}
  // The value of `tensor`; nullopt with `why` set when some op on the way has no rule here.
  std::optional<IndexValue> value(const std::string& tensor, std::string* why);
  // `t` over variables with these extents, after variable v becomes map[v] (nullopt: 0).
  // Nullptr with `why` when a piece cannot be chosen.
  IndexTermPtr substitute(const IndexTermPtr& t, const std::vector<std::optional<Affine>>& map, const std::vector<SymExpr>& extents,
                     std::string* why) const;
  // Whether a <= 0 for every index within the extents (and every value of the symbols).
  bool alwaysNonPositive(const Affine& a, const std::vector<SymExpr>& extents) const;
  SymExpr resolve(const SymExpr& e) const { return c_.analysis.symbols.resolve(e); }

 private:
  std::optional<IndexValue> compute(const std::string& tensor, std::string* why);
  const PatternContext& c_;
  std::map<std::string, IndexValue> memo_;
};

}  // namespace tl
