// SymExpr: integer expressions over named dimension symbols, in one canonical form.
//
// An expression is a sum of terms, each an integer coefficient times a product of
// factors; a factor is a symbol or an opaque compound (floor division, modulo, min,
// max) whose arguments are themselves canonical. Terms are kept sorted and merged,
// so equal expressions are equal objects: `past + N` and `N + past` compare equal,
// and `(N*4096) / (N*32*128)` simplifies to `1`.
//
// Symbols stand for positive integers (tensor dimensions); the sign questions
// (`provablyNonNegative`, `compare`) answer for every positive value of the symbols
// and say "unknown" when they cannot tell. Nothing here knows about ONNX.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace tl {

class SymExpr;

enum class FactorKind : uint8_t { Symbol, FloorDiv, Mod, Min, Max };

struct Factor {
  FactorKind kind = FactorKind::Symbol;
  std::string name;                                    // Symbol only
  std::shared_ptr<const std::vector<SymExpr>> args;    // compounds: two arguments
};

struct Term {
  std::vector<Factor> factors;  // sorted; empty for the constant term
  int64_t coef = 0;
};

class SymExpr {
 public:
  SymExpr() = default;  // 0
  SymExpr(int64_t value);  // NOLINT: constants convert implicitly, as in arithmetic
  static SymExpr symbol(std::string name);

  // Parses the dim-name syntax exporters write: integers, identifiers, + - * / // %,
  // parentheses, min/max/Min/Max(a, b), Mod(a, b), FloorDiv(a, b), CeilDiv(a, b),
  // floor(a/b), ceiling(a/b). `/` is exact division where provable, else floor.
  // Throws tl::Error with the position on a syntax error.
  static SymExpr parse(std::string_view text);

  bool isConst() const { return terms_.empty() || (terms_.size() == 1 && terms_[0].factors.empty()); }
  std::optional<int64_t> constValue() const;
  bool isSymbol() const;  // a single symbol with coefficient 1
  const std::string& symbolName() const;  // precondition: isSymbol()

  std::string str() const;  // re-parseable: parse(e.str()) == e
  std::set<std::string> symbols() const;
  const std::vector<Term>& terms() const { return terms_; }

  // Substitutes expressions for symbols and re-simplifies.
  SymExpr substitute(const std::map<std::string, SymExpr>& values) const;
  // Evaluates with every symbol bound; throws tl::Error naming a missing symbol.
  int64_t evaluate(const std::map<std::string, int64_t>& values) const;

  friend SymExpr operator+(const SymExpr& a, const SymExpr& b);
  friend SymExpr operator-(const SymExpr& a, const SymExpr& b);
  friend SymExpr operator*(const SymExpr& a, const SymExpr& b);
  SymExpr operator-() const;

  friend bool operator==(const SymExpr& a, const SymExpr& b);
  friend bool operator!=(const SymExpr& a, const SymExpr& b) { return !(a == b); }
  friend bool operator<(const SymExpr& a, const SymExpr& b);  // total order, for containers

 private:
  friend class SymBuilder;
  std::vector<Term> terms_;  // canonical: sorted by factors, no zero coefficients
};

SymExpr floorDiv(const SymExpr& a, const SymExpr& b);
SymExpr ceilDiv(const SymExpr& a, const SymExpr& b);
SymExpr mod(const SymExpr& a, const SymExpr& b);
SymExpr min(const SymExpr& a, const SymExpr& b);
SymExpr max(const SymExpr& a, const SymExpr& b);
// a / b when it is exact for every value of the symbols, else nothing.
std::optional<SymExpr> exactDiv(const SymExpr& a, const SymExpr& b);

// The questions memory planning asks.
std::optional<int64_t> constDifference(const SymExpr& a, const SymExpr& b);  // a - b if constant
std::optional<int64_t> constRatio(const SymExpr& a, const SymExpr& b);       // a / b if an integer constant
enum class Order { Less, Equal, Greater, LessEqual, GreaterEqual, Unknown };
Order compare(const SymExpr& a, const SymExpr& b);  // for every positive value of the symbols
bool provablyNonNegative(const SymExpr& e);
bool provablyPositive(const SymExpr& e);

// Product of a list of dimensions.
SymExpr product(const std::vector<SymExpr>& dims);
// `[a, b, c]`
std::string str(const std::vector<SymExpr>& dims);

}  // namespace tl
