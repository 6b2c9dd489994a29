#include "symbolic/symbol_table.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "cli/error.h"

namespace tl {
namespace {

// Divides out the factors and coefficient gcd shared by every term: batch*x - batch*y
// becomes x - y, which can be solved for a symbol.
SymExpr removeContent(const SymExpr& e) {
  const auto& terms = e.terms();
  if (terms.empty()) return e;
  int64_t g = 0;
  for (const auto& t : terms) g = std::gcd(g, t.coef < 0 ? -t.coef : t.coef);
  SymExpr rest = *exactDiv(e, SymExpr(g));
  for (const auto& f : terms[0].factors) {
    if (f.kind != FactorKind::Symbol) continue;
    if (auto q = exactDiv(rest, SymExpr::symbol(f.name))) rest = *q;
  }
  return rest;
}

// c when m is min(c, e) or min(e, c) for a constant c and e == other; else nothing.
std::optional<int64_t> minBound(const SymExpr& m, const SymExpr& other) {
  const auto& terms = m.terms();
  if (terms.size() != 1 || terms[0].coef != 1 || terms[0].factors.size() != 1) return std::nullopt;
  const Factor& f = terms[0].factors[0];
  if (f.kind != FactorKind::Min) return std::nullopt;
  const auto& args = *f.args;
  for (int i : {0, 1})
    if (args[i].isConst() && args[1 - i] == other) return args[i].constValue();
  return std::nullopt;
}

}  // namespace

void SymbolTable::declare(const std::string& name, const std::string& origin, bool onInput) {
  if (origin_.emplace(name, origin).second) order_.push_back(name);
  if (onInput) ++inputUses_[name];
}

SymExpr SymbolTable::resolve(const SymExpr& e) const { return subst_.empty() ? e : e.substitute(subst_); }

void SymbolTable::unify(const SymExpr& a, const SymExpr& b, const std::string& evidence) {
  SymExpr ra = resolve(a), rb = resolve(b);
  SymExpr diff = removeContent(ra - rb);
  if (diff.terms().empty()) return;
  if (diff.isConst())
    throw Error("dimensions differ: " + ra.str() + " vs " + rb.str() + " (" + evidence + ")");
  for (const auto& [e, m] : {std::pair{&ra, &rb}, {&rb, &ra}}) {
    if (auto c = minBound(*m, *e)) {
      for (const auto& b : bounds_)
        if (b.expr == *e && b.limit <= *c) return;
      bounds_.push_back(SymbolBound{*e, *c, evidence});
      return;
    }
  }
  // Candidates: symbols that occur in exactly one term, alone, with coefficient +-1.
  std::map<std::string, int> occurrences;
  for (const auto& t : diff.terms()) {
    for (const auto& f : t.factors) {
      if (f.kind == FactorKind::Symbol) {
        ++occurrences[f.name];
      } else {
        for (const auto& arg : *f.args)
          for (const auto& s : arg.symbols()) occurrences[s] += 2;  // never solvable inside a compound
      }
    }
  }
  std::string best;
  int64_t bestCoef = 0;
  for (const auto& t : diff.terms()) {
    if (t.factors.size() != 1 || t.factors[0].kind != FactorKind::Symbol) continue;
    if (t.coef != 1 && t.coef != -1) continue;
    const std::string& s = t.factors[0].name;
    if (occurrences[s] != 1) continue;
    auto rank = [&](const std::string& x) {
      auto it = std::find(order_.begin(), order_.end(), x);
      int uses = inputUses_.count(x) ? inputUses_.at(x) : 0;
      return std::make_pair(uses, -static_cast<long>(it - order_.begin()));
    };
    if (best.empty() || rank(s) < rank(best)) {
      best = s;
      bestCoef = t.coef;
    }
  }
  if (best.empty())
    throw Error("cannot solve " + ra.str() + " = " + rb.str() + " for a symbol (" + evidence + ")");
  // diff = coef*best + rest = 0  =>  best = -rest/coef
  SymExpr value = diff - SymExpr(bestCoef) * SymExpr::symbol(best);
  value = bestCoef == 1 ? -value : value;
  std::map<std::string, SymExpr> one{{best, value}};
  for (auto& [name, v] : subst_) v = v.substitute(one);
  for (auto& r : relations_) r.value = r.value.substitute(one);
  for (auto& b : bounds_) b.expr = b.expr.substitute(one);
  subst_.emplace(best, value);
  relations_.push_back(SymbolRelation{best, value, evidence});
}

std::vector<std::string> SymbolTable::freeSymbols() const {
  std::vector<std::string> out;
  for (const auto& s : order_)
    if (!subst_.count(s)) out.push_back(s);
  return out;
}

}  // namespace tl
