#include "symbolic/sym_expr.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <numeric>

#include "cli/error.h"

namespace tl {
namespace {

int64_t checkedAdd(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) throw Error("integer overflow in a dimension expression");
  return r;
}

int64_t checkedMul(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) throw Error("integer overflow in a dimension expression");
  return r;
}

// Python semantics: the quotient rounds toward minus infinity, the remainder has b's sign.
int64_t floorDivInt(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t modInt(int64_t a, int64_t b) { return a - checkedMul(floorDivInt(a, b), b); }

int compareExpr(const SymExpr& a, const SymExpr& b);

int compareFactor(const Factor& a, const Factor& b) {
  if (a.kind != b.kind) return a.kind < b.kind ? -1 : 1;
  if (a.kind == FactorKind::Symbol) return a.name.compare(b.name);
  const auto& x = *a.args;
  const auto& y = *b.args;
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
    int c = compareExpr(x[i], y[i]);
    if (c != 0) return c;
  }
  return x.size() == y.size() ? 0 : (x.size() < y.size() ? -1 : 1);
}

int compareFactors(const std::vector<Factor>& a, const std::vector<Factor>& b) {
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    int c = compareFactor(a[i], b[i]);
    if (c != 0) return c;
  }
  return a.size() == b.size() ? 0 : (a.size() < b.size() ? -1 : 1);
}

int compareExpr(const SymExpr& a, const SymExpr& b) {
  const auto& x = a.terms();
  const auto& y = b.terms();
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i) {
    int c = compareFactors(x[i].factors, y[i].factors);
    if (c != 0) return c;
    if (x[i].coef != y[i].coef) return x[i].coef < y[i].coef ? -1 : 1;
  }
  return x.size() == y.size() ? 0 : (x.size() < y.size() ? -1 : 1);
}

struct FactorsLess {
  bool operator()(const std::vector<Factor>& a, const std::vector<Factor>& b) const {
    return compareFactors(a, b) < 0;
  }
};

Factor compound(FactorKind kind, SymExpr a, SymExpr b) {
  Factor f;
  f.kind = kind;
  f.args = std::make_shared<const std::vector<SymExpr>>(std::vector<SymExpr>{std::move(a), std::move(b)});
  return f;
}

int64_t gcdOfCoefs(const SymExpr& e, int64_t start) {
  int64_t g = std::abs(start);
  for (const auto& t : e.terms()) g = std::gcd(g, std::abs(t.coef));
  return g;
}

// Monomial order for polynomial division: degree, then the list order (together: grevlex).
bool monomialLess(const std::vector<Factor>& a, const std::vector<Factor>& b) {
  if (a.size() != b.size()) return a.size() < b.size();
  return compareFactors(a, b) < 0;
}

const Term& leadingTerm(const SymExpr& e) {
  const Term* best = &e.terms().front();
  for (const auto& t : e.terms())
    if (monomialLess(best->factors, t.factors)) best = &t;
  return *best;
}

// m / d as a monomial (factor multiset difference and exact coefficient), if it is one.
std::optional<Term> divideTerm(const Term& m, const Term& d) {
  if (d.coef == 0 || m.coef % d.coef != 0) return std::nullopt;
  std::vector<Factor> rest;
  size_t j = 0;
  for (const auto& f : m.factors) {
    if (j < d.factors.size() && compareFactor(f, d.factors[j]) == 0) {
      ++j;
    } else {
      rest.push_back(f);
    }
  }
  if (j != d.factors.size()) return std::nullopt;
  return Term{std::move(rest), m.coef / d.coef};
}

}  // namespace

// Collects terms, merges equal monomials and produces the canonical form.
class SymBuilder {
 public:
  void add(std::vector<Factor> factors, int64_t coef) {
    if (coef == 0) return;
    auto it = acc_.find(factors);
    if (it == acc_.end()) {
      acc_.emplace(std::move(factors), coef);
    } else {
      it->second = checkedAdd(it->second, coef);
    }
  }
  void add(const SymExpr& e, int64_t scale = 1) {
    for (const auto& t : e.terms_) add(t.factors, checkedMul(t.coef, scale));
  }
  SymExpr build() {
    SymExpr e;
    for (auto& [f, c] : acc_)
      if (c != 0) e.terms_.push_back(Term{f, c});
    return e;
  }
  static SymExpr fromFactor(Factor f, int64_t coef = 1) {
    SymBuilder b;
    b.add({std::move(f)}, coef);
    return b.build();
  }
  static SymExpr fromTerm(const Term& t) {
    SymBuilder b;
    b.add(t.factors, t.coef);
    return b.build();
  }

 private:
  std::map<std::vector<Factor>, int64_t, FactorsLess> acc_;
};

SymExpr::SymExpr(int64_t value) {
  if (value != 0) terms_.push_back(Term{{}, value});
}

SymExpr SymExpr::symbol(std::string name) {
  Factor f;
  f.kind = FactorKind::Symbol;
  f.name = std::move(name);
  return SymBuilder::fromFactor(std::move(f));
}

std::optional<int64_t> SymExpr::constValue() const {
  if (terms_.empty()) return 0;
  if (terms_.size() == 1 && terms_[0].factors.empty()) return terms_[0].coef;
  return std::nullopt;
}

bool SymExpr::isSymbol() const {
  return terms_.size() == 1 && terms_[0].coef == 1 && terms_[0].factors.size() == 1 &&
         terms_[0].factors[0].kind == FactorKind::Symbol;
}

const std::string& SymExpr::symbolName() const { return terms_[0].factors[0].name; }

SymExpr operator+(const SymExpr& a, const SymExpr& b) {
  SymBuilder s;
  s.add(a);
  s.add(b);
  return s.build();
}

SymExpr operator-(const SymExpr& a, const SymExpr& b) {
  SymBuilder s;
  s.add(a);
  s.add(b, -1);
  return s.build();
}

SymExpr SymExpr::operator-() const {
  SymBuilder s;
  s.add(*this, -1);
  return s.build();
}

SymExpr operator*(const SymExpr& a, const SymExpr& b) {
  SymBuilder s;
  for (const auto& x : a.terms_) {
    for (const auto& y : b.terms_) {
      std::vector<Factor> f;
      f.reserve(x.factors.size() + y.factors.size());
      std::merge(x.factors.begin(), x.factors.end(), y.factors.begin(), y.factors.end(),
                 std::back_inserter(f),
                 [](const Factor& p, const Factor& q) { return compareFactor(p, q) < 0; });
      s.add(std::move(f), checkedMul(x.coef, y.coef));
    }
  }
  return s.build();
}

bool operator==(const SymExpr& a, const SymExpr& b) { return compareExpr(a, b) == 0; }
bool operator<(const SymExpr& a, const SymExpr& b) { return compareExpr(a, b) < 0; }

std::optional<SymExpr> exactDiv(const SymExpr& a, const SymExpr& b) {
  if (auto c = b.constValue()) {
    if (*c == 0) return std::nullopt;
    SymBuilder s;
    for (const auto& t : a.terms()) {
      if (t.coef % *c != 0) return std::nullopt;
      s.add(t.factors, t.coef / *c);
    }
    return s.build();
  }
  // Multivariate division by the leading term; exact when the remainder vanishes.
  SymExpr rem = a;
  SymBuilder q;
  const Term& lb = leadingTerm(b);
  while (!rem.terms().empty()) {
    auto t = divideTerm(leadingTerm(rem), lb);
    if (!t) return std::nullopt;
    SymExpr tq = SymBuilder::fromTerm(*t);
    q.add(tq);
    rem = rem - tq * b;
  }
  return q.build();
}

SymExpr floorDiv(const SymExpr& a, const SymExpr& b) {
  auto bc = b.constValue();
  if (bc && *bc == 0) throw Error("division by zero in a dimension expression");
  if (!bc) {
    if (auto q = exactDiv(a, b)) return *q;
    return SymBuilder::fromFactor(compound(FactorKind::FloorDiv, a, b));
  }
  int64_t c = *bc;
  if (auto ac = a.constValue()) return floorDivInt(*ac, c);
  if (c < 0) return floorDiv(-a, SymExpr(-c));
  if (c == 1) return a;
  // floor((c*q + r) / c) = q + floor(r / c)
  SymBuilder quotient;
  SymBuilder rest;
  int64_t restConst = 0;
  for (const auto& t : a.terms()) {
    if (t.coef % c == 0) {
      quotient.add(t.factors, t.coef / c);
    } else if (t.factors.empty()) {
      restConst = t.coef;
    } else {
      rest.add(t.factors, t.coef);
    }
  }
  SymExpr r = rest.build();
  int64_t whole = floorDivInt(restConst, c);
  SymExpr out = quotient.build() + SymExpr(whole);
  if (r.terms().empty()) return out;
  r = r + SymExpr(restConst - whole * c);
  int64_t g = gcdOfCoefs(r, c);
  if (g > 1) {
    r = *exactDiv(r, SymExpr(g));
    c /= g;
  }
  if (c == 1) return out + r;
  // floor(floor(x / d) / c) = floor(x / (d*c)) for positive d and c
  if (r.terms().size() == 1 && r.terms()[0].coef == 1 && r.terms()[0].factors.size() == 1) {
    const Factor& f = r.terms()[0].factors[0];
    if (f.kind == FactorKind::FloorDiv) {
      auto d = (*f.args)[1].constValue();
      if (d && *d > 0) return out + floorDiv((*f.args)[0], SymExpr(checkedMul(*d, c)));
    }
  }
  return out + SymBuilder::fromFactor(compound(FactorKind::FloorDiv, r, SymExpr(c)));
}

SymExpr ceilDiv(const SymExpr& a, const SymExpr& b) { return -floorDiv(-a, b); }

SymExpr mod(const SymExpr& a, const SymExpr& b) {
  auto bc = b.constValue();
  if (bc && *bc == 0) throw Error("modulo by zero in a dimension expression");
  if (!bc) {
    if (exactDiv(a, b)) return SymExpr(0);
    return SymBuilder::fromFactor(compound(FactorKind::Mod, a, b));
  }
  int64_t c = *bc;
  if (auto ac = a.constValue()) return modInt(*ac, c);
  if (c < 0) return -mod(-a, SymExpr(-c));
  SymBuilder rest;
  for (const auto& t : a.terms()) {
    int64_t m = t.factors.empty() ? modInt(t.coef, c) : t.coef % c;
    rest.add(t.factors, m);
  }
  SymExpr r = rest.build();
  if (auto rc = r.constValue()) return modInt(*rc, c);
  int64_t g = gcdOfCoefs(r, c);
  if (g > 1) {
    r = *exactDiv(r, SymExpr(g));
    c /= g;
  }
  if (c == 1) return SymExpr(0);
  return SymExpr(g > 1 ? g : 1) * SymBuilder::fromFactor(compound(FactorKind::Mod, r, SymExpr(c)));
}

namespace {

// r + max(p, q) is max(r + p, r + q), and r - max(p, q) is min(r - p, r - q): moving
// the rest of a sum inside its one min/max lets the comparisons below see through it
// (T - max(0, T - 3) becomes min(T, 3)).
SymExpr pushIntoMinMax(const SymExpr& e) {
  const Term* mm = nullptr;
  for (const auto& t : e.terms()) {
    for (const auto& f : t.factors) {
      if (f.kind != FactorKind::Min && f.kind != FactorKind::Max) continue;
      if (mm || t.factors.size() != 1 || (t.coef != 1 && t.coef != -1)) return e;
      mm = &t;
    }
  }
  if (!mm) return e;
  const Factor& f = mm->factors[0];
  const SymExpr rest = e - SymBuilder::fromTerm(*mm);
  const auto& p = (*f.args)[0];
  const auto& q = (*f.args)[1];
  const bool isMax = (f.kind == FactorKind::Max) == (mm->coef == 1);
  const SymExpr x = mm->coef == 1 ? rest + p : rest - p;
  const SymExpr y = mm->coef == 1 ? rest + q : rest - q;
  return isMax ? max(x, y) : min(x, y);
}

SymExpr minMax(const SymExpr& a0, const SymExpr& b0, bool isMin) {
  const SymExpr a = pushIntoMinMax(a0), b = pushIntoMinMax(b0);
  if (a == b) return a;
  switch (compare(a, b)) {
    case Order::Less:
    case Order::LessEqual:
    case Order::Equal:
      return isMin ? a : b;
    case Order::Greater:
    case Order::GreaterEqual:
      return isMin ? b : a;
    case Order::Unknown:
      break;
  }
  const bool aFirst = a < b;
  return SymBuilder::fromFactor(
      compound(isMin ? FactorKind::Min : FactorKind::Max, aFirst ? a : b, aFirst ? b : a));
}

bool factorNonNegative(const Factor& f) {
  const auto& args = f.args ? *f.args : std::vector<SymExpr>{};
  switch (f.kind) {
    case FactorKind::Symbol:
      return true;
    case FactorKind::FloorDiv:
      return provablyNonNegative(args[0]) && provablyPositive(args[1]);
    case FactorKind::Mod:
      return provablyPositive(args[1]);
    case FactorKind::Min:
      return provablyNonNegative(args[0]) && provablyNonNegative(args[1]);
    case FactorKind::Max:
      return provablyNonNegative(args[0]) || provablyNonNegative(args[1]);
  }
  return false;
}

// e with every symbol s replaced by s + 1: the new symbols range over all non-negative
// integers exactly when the old ones range over the positive ones.
SymExpr shiftSymbols(const SymExpr& e) {
  SymExpr out;
  for (const auto& t : e.terms()) {
    SymExpr term(t.coef);
    for (const auto& f : t.factors) {
      SymExpr x = SymBuilder::fromFactor(f);
      term = term * (f.kind == FactorKind::Symbol ? x + SymExpr(1) : x);
    }
    out = out + term;
  }
  return out;
}

// Every term of the shifted form is a non-negative coefficient times non-negative factors.
bool shiftedNonNegative(const SymExpr& shifted) {
  for (const auto& t : shifted.terms()) {
    if (t.coef < 0) return false;
    for (const auto& f : t.factors)
      if (!factorNonNegative(f)) return false;
  }
  return true;
}

}  // namespace

SymExpr min(const SymExpr& a, const SymExpr& b) {
  auto x = a.constValue(), y = b.constValue();
  if (x && y) return std::min(*x, *y);
  return minMax(a, b, true);
}

SymExpr max(const SymExpr& a, const SymExpr& b) {
  auto x = a.constValue(), y = b.constValue();
  if (x && y) return std::max(*x, *y);
  return minMax(a, b, false);
}

bool provablyNonNegative(const SymExpr& e) {
  if (auto c = e.constValue()) return *c >= 0;
  return shiftedNonNegative(shiftSymbols(e));
}

bool provablyPositive(const SymExpr& e) {
  if (auto c = e.constValue()) return *c > 0;
  // For integers, e > 0 is e - 1 >= 0.
  return shiftedNonNegative(shiftSymbols(e) - SymExpr(1));
}

namespace {

bool isLe(Order o) { return o == Order::Less || o == Order::LessEqual || o == Order::Equal; }
bool isGe(Order o) { return o == Order::Greater || o == Order::GreaterEqual || o == Order::Equal; }

// a is a lone min(p, q) or max(p, q): compare through its arguments.
Order compareMinMax(const SymExpr& a, const SymExpr& b) {
  if (a.terms().size() != 1 || a.terms()[0].coef != 1 || a.terms()[0].factors.size() != 1) return Order::Unknown;
  const Factor& f = a.terms()[0].factors[0];
  if (f.kind != FactorKind::Min && f.kind != FactorKind::Max) return Order::Unknown;
  Order p = compare((*f.args)[0], b), q = compare((*f.args)[1], b);
  if (f.kind == FactorKind::Max) {
    if (isLe(p) && isLe(q)) return Order::LessEqual;  // both arguments below b
    if (isGe(p) || isGe(q)) return Order::GreaterEqual;
  } else {
    if (isGe(p) && isGe(q)) return Order::GreaterEqual;
    if (isLe(p) || isLe(q)) return Order::LessEqual;
  }
  return Order::Unknown;
}

Order flip(Order o) {
  switch (o) {
    case Order::Less: return Order::Greater;
    case Order::Greater: return Order::Less;
    case Order::LessEqual: return Order::GreaterEqual;
    case Order::GreaterEqual: return Order::LessEqual;
    default: return o;
  }
}

}  // namespace

Order compare(const SymExpr& a, const SymExpr& b) {
  SymExpr d = a - b;
  if (auto c = d.constValue()) return *c < 0 ? Order::Less : (*c == 0 ? Order::Equal : Order::Greater);
  if (provablyPositive(d)) return Order::Greater;
  if (provablyPositive(-d)) return Order::Less;
  if (provablyNonNegative(d)) return Order::GreaterEqual;
  if (provablyNonNegative(-d)) return Order::LessEqual;
  if (Order o = compareMinMax(a, b); o != Order::Unknown) return o;
  return flip(compareMinMax(b, a));
}

std::optional<int64_t> constDifference(const SymExpr& a, const SymExpr& b) { return (a - b).constValue(); }

std::optional<int64_t> constRatio(const SymExpr& a, const SymExpr& b) {
  auto q = exactDiv(a, b);
  if (!q) return std::nullopt;
  return q->constValue();
}

SymExpr product(const std::vector<SymExpr>& dims) {
  SymExpr p(1);
  for (const auto& d : dims) p = p * d;
  return p;
}

std::set<std::string> SymExpr::symbols() const {
  std::set<std::string> out;
  for (const auto& t : terms_) {
    for (const auto& f : t.factors) {
      if (f.kind == FactorKind::Symbol) {
        out.insert(f.name);
      } else {
        for (const auto& a : *f.args) {
          auto s = a.symbols();
          out.insert(s.begin(), s.end());
        }
      }
    }
  }
  return out;
}

namespace {

SymExpr applyCompound(FactorKind kind, const SymExpr& a, const SymExpr& b) {
  switch (kind) {
    case FactorKind::FloorDiv: return floorDiv(a, b);
    case FactorKind::Mod: return mod(a, b);
    case FactorKind::Min: return min(a, b);
    case FactorKind::Max: return max(a, b);
    case FactorKind::Symbol: break;
  }
  return a;
}

}  // namespace

SymExpr SymExpr::substitute(const std::map<std::string, SymExpr>& values) const {
  SymExpr out;
  for (const auto& t : terms_) {
    SymExpr term(t.coef);
    for (const auto& f : t.factors) {
      if (f.kind == FactorKind::Symbol) {
        auto it = values.find(f.name);
        term = term * (it == values.end() ? SymBuilder::fromFactor(f) : it->second);
      } else {
        term = term * applyCompound(f.kind, (*f.args)[0].substitute(values), (*f.args)[1].substitute(values));
      }
    }
    out = out + term;
  }
  return out;
}

int64_t SymExpr::evaluate(const std::map<std::string, int64_t>& values) const {
  int64_t sum = 0;
  for (const auto& t : terms_) {
    int64_t p = t.coef;
    for (const auto& f : t.factors) {
      int64_t v = 0;
      if (f.kind == FactorKind::Symbol) {
        auto it = values.find(f.name);
        if (it == values.end()) throw Error("symbol '" + f.name + "' has no value");
        v = it->second;
      } else {
        int64_t x = (*f.args)[0].evaluate(values), y = (*f.args)[1].evaluate(values);
        if (y == 0 && (f.kind == FactorKind::FloorDiv || f.kind == FactorKind::Mod))
          throw Error("division by zero evaluating '" + str() + "'");
        v = *applyCompound(f.kind, SymExpr(x), SymExpr(y)).constValue();
      }
      p = checkedMul(p, v);
    }
    sum = checkedAdd(sum, p);
  }
  return sum;
}

// ---- printing --------------------------------------------------------------------------

namespace {

bool bareArg(const SymExpr& e) {
  if (auto c = e.constValue()) return *c >= 0;
  return e.isSymbol();
}

std::string argStr(const SymExpr& e) { return bareArg(e) ? e.str() : "(" + e.str() + ")"; }

std::string factorStr(const Factor& f, bool standalone) {
  const auto& a = f.args ? *f.args : std::vector<SymExpr>{};
  std::string s;
  switch (f.kind) {
    case FactorKind::Symbol: return f.name;
    case FactorKind::Min: return "min(" + a[0].str() + ", " + a[1].str() + ")";
    case FactorKind::Max: return "max(" + a[0].str() + ", " + a[1].str() + ")";
    case FactorKind::FloorDiv: s = argStr(a[0]) + "//" + argStr(a[1]); break;
    case FactorKind::Mod: s = argStr(a[0]) + " % " + argStr(a[1]); break;
  }
  return standalone ? s : "(" + s + ")";
}

}  // namespace

std::string SymExpr::str() const {
  if (terms_.empty()) return "0";
  std::vector<const Term*> order;
  for (const auto& t : terms_)
    if (!t.factors.empty()) order.push_back(&t);
  // Higher degree first reads like algebra; the constant goes last.
  std::stable_sort(order.begin(), order.end(),
                   [](const Term* a, const Term* b) { return a->factors.size() > b->factors.size(); });
  for (const auto& t : terms_)
    if (t.factors.empty()) order.push_back(&t);
  std::string out;
  for (size_t i = 0; i < order.size(); ++i) {
    const Term& t = *order[i];
    int64_t c = t.coef;
    if (i == 0) {
      if (c < 0) out += "-";
    } else {
      out += c < 0 ? " - " : " + ";
    }
    uint64_t mag = c < 0 ? uint64_t(0) - uint64_t(c) : uint64_t(c);
    if (t.factors.empty()) {
      out += std::to_string(mag);
      continue;
    }
    // A lone compound with coefficient +-1 stands bare unless a leading minus would bind to it.
    const bool standalone = mag == 1 && t.factors.size() == 1 && !(i == 0 && c < 0);
    std::string body;
    if (mag != 1) body = std::to_string(mag);
    for (const auto& f : t.factors) {
      if (!body.empty()) body += "*";
      body += factorStr(f, standalone);
    }
    out += body;
  }
  return out;
}

std::string str(const std::vector<SymExpr>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    if (i) s += ", ";
    s += dims[i].str();
  }
  return s + "]";
}

// ---- parsing ---------------------------------------------------------------------------

namespace {

class Parser {
 public:
  explicit Parser(std::string_view text) : text_(text) {}

  SymExpr parseAll() {
    SymExpr e = parseSum();
    skipSpace();
    if (pos_ != text_.size()) fail("unexpected '" + std::string(1, text_[pos_]) + "'");
    return e;
  }

 private:
  [[noreturn]] void fail(const std::string& what) {
    throw Error("cannot parse dimension expression '" + std::string(text_) + "': " + what + " at column " +
                std::to_string(pos_ + 1));
  }

  void skipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_]))) ++pos_;
  }

  bool accept(std::string_view tok) {
    skipSpace();
    if (text_.substr(pos_, tok.size()) == tok) {
      pos_ += tok.size();
      return true;
    }
    return false;
  }

  void expect(std::string_view tok) {
    if (!accept(tok)) fail("expected '" + std::string(tok) + "'");
  }

  SymExpr parseSum() {
    SymExpr e = parseProduct();
    for (;;) {
      if (accept("+")) {
        e = e + parseProduct();
      } else if (accept("-")) {
        e = e - parseProduct();
      } else {
        return e;
      }
    }
  }

  SymExpr parseProduct() {
    SymExpr e = parseUnary();
    for (;;) {
      skipSpace();
      if (stopAtSlash_ && text_.substr(pos_, 1) == "/" && text_.substr(pos_, 2) != "//") return e;
      if (accept("*")) {
        e = e * parseUnary();
      } else if (accept("//")) {
        e = floorDiv(e, parseUnary());
      } else if (accept("/")) {
        SymExpr d = parseUnary();
        auto q = exactDiv(e, d);
        e = q ? *q : floorDiv(e, d);
      } else if (accept("%")) {
        e = mod(e, parseUnary());
      } else {
        return e;
      }
    }
  }

  SymExpr parseUnary() {
    if (accept("-")) return -parseUnary();
    if (accept("+")) return parseUnary();
    return parsePrimary();
  }

  // floor(a/b) and ceiling(a/b): the argument must be a quotient.
  SymExpr parseRounded(bool ceil) {
    expect("(");
    stopAtSlash_ = true;
    SymExpr num = parseSum();
    stopAtSlash_ = false;
    if (!accept("/")) fail("expected a quotient a/b");
    SymExpr den = parseUnary();
    expect(")");
    return ceil ? ceilDiv(num, den) : floorDiv(num, den);
  }

  SymExpr parsePrimary() {
    skipSpace();
    if (pos_ >= text_.size()) fail("unexpected end");
    char ch = text_[pos_];
    if (ch == '(') {
      ++pos_;
      const bool outer = stopAtSlash_;
      stopAtSlash_ = false;
      SymExpr e = parseSum();
      stopAtSlash_ = outer;
      expect(")");
      return e;
    }
    if (std::isdigit(static_cast<unsigned char>(ch))) {
      size_t start = pos_;
      while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) ++pos_;
      std::string digits(text_.substr(start, pos_ - start));
      errno = 0;
      long long v = std::strtoll(digits.c_str(), nullptr, 10);
      if (errno == ERANGE) fail("integer out of range");
      return SymExpr(static_cast<int64_t>(v));
    }
    if (std::isalpha(static_cast<unsigned char>(ch)) || ch == '_') {
      size_t start = pos_;
      while (pos_ < text_.size() &&
             (std::isalnum(static_cast<unsigned char>(text_[pos_])) || text_[pos_] == '_'))
        ++pos_;
      std::string name(text_.substr(start, pos_ - start));
      skipSpace();
      if (pos_ < text_.size() && text_[pos_] == '(') {
        if (name == "floor") return parseRounded(false);
        if (name == "ceiling" || name == "ceil") return parseRounded(true);
        ++pos_;
        SymExpr a = parseSum();
        expect(",");
        SymExpr b = parseSum();
        expect(")");
        if (name == "min" || name == "Min") return min(a, b);
        if (name == "max" || name == "Max") return max(a, b);
        if (name == "Mod" || name == "mod") return mod(a, b);
        if (name == "FloorDiv" || name == "floordiv") return floorDiv(a, b);
        if (name == "CeilDiv" || name == "ceildiv") return ceilDiv(a, b);
        pos_ = start;
        fail("unknown function '" + name + "'");
      }
      return SymExpr::symbol(name);
    }
    fail("unexpected '" + std::string(1, ch) + "'");
  }

  std::string_view text_;
  size_t pos_ = 0;
  bool stopAtSlash_ = false;  // inside floor(a/b): the top-level '/' ends the numerator
};

}  // namespace

SymExpr SymExpr::parse(std::string_view text) { return Parser(text).parseAll(); }

}  // namespace tl
