#include "symbolic/symbol_table.h"

#include <gtest/gtest.h>

#include "cli/error.h"

namespace tl {
namespace {

SymExpr P(const char* s) { return SymExpr::parse(s); }

SymbolTable pastModelSymbols() {
  SymbolTable t;
  t.declare("batch", "input_ids[0]", true);
  t.declare("N", "input_ids[1]", true);
  t.declare("batch", "attention_mask[0]", true);
  t.declare("sumN", "attention_mask[1]", true);
  t.declare("past", "past.key[2]", true);
  t.declare("past", "past.value[2]", true);
  return t;
}

TEST(SymbolTable, EliminatesTheLeastUsedSymbol) {
  SymbolTable t = pastModelSymbols();
  t.unify(P("sumN"), P("past + N"), "present.0.key axis 2");
  EXPECT_EQ(t.freeSymbols(), (std::vector<std::string>{"batch", "N", "past"}));
  ASSERT_EQ(t.relations().size(), 1u);
  EXPECT_EQ(t.relations()[0].symbol, "sumN");
  EXPECT_EQ(t.relations()[0].value, P("N + past"));
  EXPECT_EQ(t.relations()[0].evidence, "present.0.key axis 2");
  EXPECT_EQ(t.resolve(P("sumN - N")), P("past"));
}

TEST(SymbolTable, EqualExpressionsNeedNoRelation) {
  SymbolTable t = pastModelSymbols();
  t.unify(P("N + past"), P("past + N"), "x");
  EXPECT_TRUE(t.relations().empty());
}

TEST(SymbolTable, ContradictionsAreErrors) {
  SymbolTable t = pastModelSymbols();
  EXPECT_THROW(t.unify(P("N + 1"), P("N"), "x"), Error);
  EXPECT_THROW(t.unify(SymExpr(3), SymExpr(4), "x"), Error);
}

TEST(SymbolTable, DividesOutCommonFactors) {
  SymbolTable t = pastModelSymbols();
  t.unify(P("batch*sumN*4"), P("4*batch*N + 4*batch*past"), "reshape");
  EXPECT_EQ(t.resolve(P("sumN")), P("N + past"));
}

TEST(SymbolTable, ChainsStayResolved) {
  SymbolTable t;
  for (const char* s : {"a", "b", "c"}) t.declare(s, s, false);
  t.declare("a", "in", true);
  t.unify(P("c"), P("b + 1"), "1");
  t.unify(P("b"), P("a*2"), "2");
  EXPECT_EQ(t.resolve(P("c")), P("2*a + 1"));
  EXPECT_EQ(t.relations()[0].value, P("2*a + 1"));  // earlier relations are rewritten too
  EXPECT_EQ(t.freeSymbols(), (std::vector<std::string>{"a"}));
}

TEST(SymbolTable, UnsolvableEqualityIsAnError) {
  SymbolTable t;
  t.declare("a", "a", true);
  t.declare("b", "b", true);
  EXPECT_THROW(t.unify(P("a*a"), P("b*b"), "x"), Error);
  EXPECT_THROW(t.unify(P("a//2"), P("b//2"), "x"), Error);
}

TEST(SymbolTable, SymbolBoundToAConstant) {
  SymbolTable t;
  t.declare("heads", "w", false);
  t.unify(P("heads*16"), SymExpr(64), "reshape");
  EXPECT_EQ(t.resolve(P("heads")).constValue(), 4);
}

}  // namespace
}  // namespace tl

namespace tl {
namespace {

// N == min(77, N) holds exactly when N <= 77: a bound, not an error, and not a relation.
TEST(SymbolTable, MinOfAConstantIsABound) {
  SymbolTable t;
  t.declare("N", "input 'ids' axis 1", true);
  const SymExpr n = SymExpr::symbol("N");
  t.unify(n, min(SymExpr(77), n), "node 'Add'");
  t.unify(min(n, SymExpr(77)), n, "node 'Add2'");  // the same bound again: recorded once
  ASSERT_EQ(t.bounds().size(), 1u);
  EXPECT_EQ(t.bounds()[0].expr, n);
  EXPECT_EQ(t.bounds()[0].limit, 77);
  EXPECT_EQ(t.bounds()[0].evidence, "node 'Add'");
  EXPECT_TRUE(t.relations().empty());
  EXPECT_EQ(t.freeSymbols(), std::vector<std::string>{"N"});
  EXPECT_THROW(t.unify(n, min(SymExpr(77), n + SymExpr(1)), "x"), Error);  // no such bound: still unsolvable
}

}  // namespace
}  // namespace tl
