#include "symbolic/sym_expr.h"

#include <gtest/gtest.h>

#include "cli/error.h"

namespace tl {
namespace {

SymExpr P(const char* s) { return SymExpr::parse(s); }
SymExpr S(const char* s) { return SymExpr::symbol(s); }

TEST(SymExpr, CanonicalSumOrder) {
  EXPECT_EQ(P("past + N"), P("N + past"));
  EXPECT_EQ(P("past + N").str(), P("N + past").str());
  EXPECT_EQ(S("N") + S("past"), S("past") + S("N"));
  EXPECT_EQ(P("a + b + c"), P("c + (b + a)"));
}

TEST(SymExpr, ConstantsFoldAndCancel) {
  EXPECT_EQ(P("2 + 3*4").constValue(), 14);
  EXPECT_EQ(P("N - N").constValue(), 0);
  EXPECT_EQ(P("N + 1 - (N - 1)").constValue(), 2);
  EXPECT_EQ(P("0").str(), "0");
  EXPECT_TRUE(P("7").isConst());
  EXPECT_FALSE(P("N").isConst());
}

TEST(SymExpr, ProductsDistributeAndMerge) {
  EXPECT_EQ(P("(a + b)*(a - b)"), P("a*a - b*b"));
  EXPECT_EQ(P("2*N*3"), P("6*N"));
  EXPECT_EQ(P("N*past"), P("past*N"));
  EXPECT_EQ(P("(N + 1)*(N + 1)").str(), "N*N + 2*N + 1");
}

TEST(SymExpr, ExactDivisionOfPaperExample) {
  EXPECT_EQ(floorDiv(P("N*4096"), P("N*32*128")).constValue(), 1);
  EXPECT_EQ(constRatio(P("N*4096"), P("N*32*128")), 1);
  EXPECT_EQ(exactDiv(P("64*N + 64*past"), P("N + past")), SymExpr(64));
  EXPECT_EQ(exactDiv(P("(N + 1)*(N + 2)"), P("N + 2")), P("N + 1"));
  EXPECT_EQ(exactDiv(P("batch*N*256"), P("batch*N*8")), SymExpr(32));
  EXPECT_FALSE(exactDiv(P("N + 1"), P("N")).has_value());
  EXPECT_FALSE(exactDiv(P("3*N"), SymExpr(2)).has_value());
  EXPECT_FALSE(constRatio(P("N*4096"), P("sumN*2*128")).has_value());
}

TEST(SymExpr, FloorDivision) {
  EXPECT_EQ(floorDiv(SymExpr(7), SymExpr(2)).constValue(), 3);
  EXPECT_EQ(floorDiv(SymExpr(-7), SymExpr(2)).constValue(), -4);
  EXPECT_EQ(floorDiv(P("2*N + 1"), SymExpr(2)), S("N"));
  EXPECT_EQ(floorDiv(P("4*N + 6"), SymExpr(4)), P("N + 1 + (2 + 0)//4"));
  EXPECT_EQ(floorDiv(P("4*N + 6"), SymExpr(4)).str(), "N + 1");
  EXPECT_EQ(floorDiv(P("N + 2"), SymExpr(2)), P("(N + 2)//2"));
  EXPECT_EQ(floorDiv(P("N + 2"), SymExpr(2)).str(), "N//2 + 1");
  EXPECT_EQ(floorDiv(floorDiv(S("N"), SymExpr(2)), SymExpr(3)), floorDiv(S("N"), SymExpr(6)));
  EXPECT_EQ(floorDiv(P("2*N + 2*M"), SymExpr(4)), floorDiv(P("N + M"), SymExpr(2)));
  EXPECT_THROW(floorDiv(S("N"), SymExpr(0)), Error);
  EXPECT_EQ(ceilDiv(S("N"), SymExpr(2)).evaluate({{"N", 5}}), 3);
  EXPECT_EQ(floorDiv(S("N"), S("M")).evaluate({{"N", 7}, {"M", 2}}), 3);
}

TEST(SymExpr, Modulo) {
  EXPECT_EQ(mod(SymExpr(-7), SymExpr(3)).constValue(), 2);
  EXPECT_EQ(mod(P("4*N + 6"), SymExpr(4)).constValue(), 2);
  EXPECT_EQ(mod(P("N*past"), S("N")).constValue(), 0);
  EXPECT_EQ(mod(P("2*N + 1"), SymExpr(4)).evaluate({{"N", 3}}), 3);
  EXPECT_EQ(mod(P("2*N"), SymExpr(4)), SymExpr(2) * mod(S("N"), SymExpr(2)));
  EXPECT_THROW(mod(S("N"), SymExpr(0)), Error);
}

TEST(SymExpr, MinMaxDecideWhenProvable) {
  EXPECT_EQ(max(S("N"), SymExpr(0)), S("N"));
  EXPECT_EQ(max(S("N"), SymExpr(1)), S("N"));
  EXPECT_EQ(min(P("N + past"), S("N")), S("N"));
  EXPECT_EQ(min(S("N"), S("M")), min(S("M"), S("N")));
  EXPECT_EQ(min(S("N"), S("M")).str(), "min(M, N)");
  EXPECT_EQ(max(S("N"), SymExpr(2)).evaluate({{"N", 1}}), 2);
  EXPECT_EQ(min(SymExpr(3), SymExpr(-2)).constValue(), -2);
  // Seeing through min/max: the clamps of a Slice with start -3 on an axis of T.
  SymExpr start = max(P("T - 3"), SymExpr(0));
  EXPECT_EQ(min(start, S("T")), start);
  EXPECT_EQ(max(S("T") - start, SymExpr(0)), min(S("T"), SymExpr(3)));
  EXPECT_EQ(compare(min(S("T"), SymExpr(3)), SymExpr(0)), Order::GreaterEqual);
  EXPECT_EQ(compare(SymExpr(5), max(S("T"), SymExpr(5))), Order::LessEqual);
}

TEST(SymExpr, SignQuestionsOverPositiveSymbols) {
  EXPECT_TRUE(provablyNonNegative(P("N - 1")));
  EXPECT_FALSE(provablyPositive(P("N - 1")));
  EXPECT_TRUE(provablyPositive(P("N*past")));
  EXPECT_TRUE(provablyNonNegative(P("N*past - past")));
  EXPECT_FALSE(provablyNonNegative(P("N - past")));
  EXPECT_TRUE(provablyNonNegative(P("N % 4")));
  EXPECT_TRUE(provablyNonNegative(P("N//2")));
  EXPECT_EQ(compare(P("N + past"), S("N")), Order::Greater);
  EXPECT_EQ(compare(S("N"), P("N + past")), Order::Less);
  EXPECT_EQ(compare(P("N*N"), S("N")), Order::GreaterEqual);
  EXPECT_EQ(compare(S("N"), S("M")), Order::Unknown);
  EXPECT_EQ(compare(P("N + 2"), P("N + 2")), Order::Equal);
  EXPECT_EQ(constDifference(P("N + past + 3"), P("past + N")), 3);
  EXPECT_FALSE(constDifference(P("N*4096"), P("sumN*256")).has_value());
}

TEST(SymExpr, ParsesExporterNames) {
  EXPECT_EQ(P("s17 + s70"), S("s17") + S("s70"));
  EXPECT_EQ(P("2*s0"), SymExpr(2) * S("s0"));
  EXPECT_EQ(P("s0//2"), floorDiv(S("s0"), SymExpr(2)));
  EXPECT_EQ(P("((s17 + s70)//2)"), floorDiv(P("s17 + s70"), SymExpr(2)));
  EXPECT_EQ(P("Max(1, s0)"), S("s0"));
  EXPECT_EQ(P("Mod(s0, 2)"), mod(S("s0"), SymExpr(2)));
  EXPECT_EQ(P("FloorDiv(s0, 4)"), floorDiv(S("s0"), SymExpr(4)));
  EXPECT_EQ(P("floor(s0/2)"), floorDiv(S("s0"), SymExpr(2)));
  EXPECT_EQ(P("ceiling(s0/2)"), ceilDiv(S("s0"), SymExpr(2)));
  EXPECT_EQ(P("CeilDiv(s0, 2)"), ceilDiv(S("s0"), SymExpr(2)));
  EXPECT_EQ(P("batch_size"), S("batch_size"));
  EXPECT_EQ(P("sequence_length + past_sequence_length"), S("past_sequence_length") + S("sequence_length"));
  EXPECT_EQ(P("N*4096/(N*32*128)").constValue(), 1);
  EXPECT_EQ(P("-N + 3"), SymExpr(3) - S("N"));
}

TEST(SymExpr, ParseErrorsSayWhere) {
  EXPECT_THROW(P("N +"), Error);
  EXPECT_THROW(P("(N"), Error);
  EXPECT_THROW(P("N $ 2"), Error);
  EXPECT_THROW(P("foo(N, 2)"), Error);
  EXPECT_THROW(P("99999999999999999999"), Error);
  try {
    P("N + * 2");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("column 5"), std::string::npos) << e.what();
  }
}

TEST(SymExpr, PrintsBackInTheSameSyntax) {
  const char* cases[] = {"N + past", "s15 + s70", "2*N - 1", "-N + 3", "N//2 + 1", "(N + past)//2",
                         "2*(N//2)", "N % 4", "min(M, N)", "max(M, N) + 1", "N*N*past",
                         "-(N//2) + past", "(N + 1) % 3", "N//M"};
  for (const char* c : cases) {
    SymExpr e = P(c);
    EXPECT_EQ(SymExpr::parse(e.str()), e) << c << " printed as " << e.str();
  }
  EXPECT_EQ(P("past + N").str(), "N + past");
  EXPECT_EQ(P("3 - N").str(), "-N + 3");
  EXPECT_EQ(P("N // 2 * 2").str(), "2*(N//2)");
}

TEST(SymExpr, SubstituteAndEvaluate) {
  SymExpr e = P("sumN - N");
  EXPECT_EQ(e.substitute({{"sumN", P("N + past")}}), S("past"));
  EXPECT_EQ(P("(N + past)//2").substitute({{"past", SymExpr(1)}, {"N", SymExpr(5)}}).constValue(), 3);
  EXPECT_EQ(P("batch*(N + past)*16").evaluate({{"batch", 2}, {"N", 5}, {"past", 7}}), 384);
  EXPECT_THROW(P("N + past").evaluate({{"N", 1}}), Error);
  EXPECT_EQ(P("N*past + max(N, past)").symbols(), (std::set<std::string>{"N", "past"}));
}

TEST(SymExpr, OverflowIsAnError) {
  EXPECT_THROW(SymExpr(INT64_MAX) + SymExpr(1), Error);
  EXPECT_THROW(SymExpr(INT64_MAX / 2) * SymExpr(3), Error);
}

}  // namespace
}  // namespace tl
