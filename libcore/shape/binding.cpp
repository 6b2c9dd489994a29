#include "shape/binding.h"

#include <cerrno>
#include <cstdlib>

#include "cli/error.h"

namespace tl {

SymbolValues parseBindings(const std::string& text) {
  SymbolValues out;
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t comma = text.find(',', pos);
    std::string item = text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      throw Error("--bind expects NAME=INT[,NAME=INT...], got '" + item + "'", ExitCode::Usage);
    std::string name = item.substr(0, eq), num = item.substr(eq + 1);
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(num.c_str(), &end, 10);
    if (*end != '\0' || errno == ERANGE)
      throw Error("--bind: '" + num + "' is not an integer (for " + name + ")", ExitCode::Usage);
    out[name] = v;
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

void checkBindings(const ShapeAnalysis& a, const SymbolValues& values) {
  checkBounds(a, values);
  for (const auto& [name, v] : values)
    if (!a.symbols.isDeclared(name)) throw Error("--bind: the model has no symbol '" + name + "'", ExitCode::Usage);
  for (const auto& r : a.symbols.relations()) {
    auto it = values.find(r.symbol);
    if (it == values.end()) continue;
    SymExpr e = r.value.substitute([&] {
      std::map<std::string, SymExpr> m;
      for (const auto& [k, x] : values) m[k] = SymExpr(x);
      return m;
    }());
    if (auto c = e.constValue(); c && *c != it->second)
      throw Error("--bind: " + r.symbol + "=" + std::to_string(it->second) + " contradicts " + r.symbol + " = " +
                      r.value.str() + " = " + std::to_string(*c),
                  ExitCode::Usage);
  }
}

SymbolValues bindFromInputs(const ShapeAnalysis& a,
                            const std::vector<std::pair<std::string, std::vector<int64_t>>>& inputs) {
  SymbolValues bound;
  struct Dim {
    std::string input;
    size_t axis;
    SymExpr expr;
    int64_t actual;
  };
  std::vector<Dim> dims;
  for (const auto& [name, shape] : inputs) {
    const auto& t = a.at(name);
    if (t.dims.size() != shape.size())
      throw Error("input '" + name + "' has rank " + std::to_string(shape.size()) + ", the model expects " +
                  std::to_string(t.dims.size()) + " " + str(t.dims));
    for (size_t k = 0; k < shape.size(); ++k) dims.push_back({name, k, t.dims[k], shape[k]});
  }
  auto asExprs = [&] {
    std::map<std::string, SymExpr> m;
    for (const auto& [k, v] : bound) m[k] = SymExpr(v);
    return m;
  };
  // Solve dims that are linear in one unbound symbol, until nothing changes.
  for (bool progress = true; progress;) {
    progress = false;
    for (const auto& d : dims) {
      SymExpr e = d.expr.substitute(asExprs());
      auto syms = e.symbols();
      if (syms.size() != 1) continue;
      const std::string s = *syms.begin();
      SymExpr x = SymExpr::symbol(s);
      SymExpr rest = e.substitute({{s, SymExpr(0)}});
      auto coef = constRatio(e - rest, x);
      if (!coef || *coef == 0) continue;
      int64_t num = d.actual - *rest.constValue();
      if (num % *coef != 0)
        throw Error("input '" + d.input + "' axis " + std::to_string(d.axis) + " is " + std::to_string(d.actual) +
                    ", which no integer " + s + " gives for " + d.expr.str());
      bound[s] = num / *coef;
      progress = true;
    }
  }
  for (const auto& d : dims) {
    SymExpr e = d.expr.substitute(asExprs());
    auto c = e.constValue();
    if (!c)
      throw Error("input '" + d.input + "' axis " + std::to_string(d.axis) + ": the inputs do not determine " +
                  e.str());
    if (*c != d.actual)
      throw Error("input '" + d.input + "' axis " + std::to_string(d.axis) + " is " + std::to_string(d.actual) +
                  " but the model needs " + d.expr.str() + " = " + std::to_string(*c));
    if (*c < 0) throw Error("input '" + d.input + "' has a negative dimension");
  }
  for (const auto& s : a.symbols.freeSymbols())
    if (!bound.count(s)) throw Error("no input determines symbol '" + s + "'");
  checkBounds(a, bound);
  return bound;
}

void checkBounds(const ShapeAnalysis& a, const SymbolValues& values) {
  for (const auto& b : a.symbols.bounds()) {
    bool known = true;
    for (const auto& s : b.expr.symbols()) known = known && values.count(s);
    if (!known) continue;
    const int64_t v = b.expr.evaluate(values);
    if (v > b.limit)
      throw Error(b.expr.str() + " is " + std::to_string(v) + ", over the model's bound " + b.expr.str() +
                  " <= " + std::to_string(b.limit) + " (" + b.evidence + ")");
  }
}

std::vector<int64_t> evaluateDims(const std::vector<SymExpr>& dims, const SymbolValues& values) {
  std::vector<int64_t> out;
  for (const auto& d : dims) out.push_back(d.evaluate(values));
  return out;
}

}  // namespace tl
