// Host evaluation of small input-derived tensors (ops/host_eval.h), on values worked
// out by hand: broadcasting, the first-of-axis layouts of Gather and Concat, ONNX's Cast.
#include "ops/host_eval.h"

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <limits>

#include "cli/error.h"
#include "graph/attributes.h"

namespace tl {
namespace {

Tensor ints(std::vector<int64_t> v, std::vector<int64_t> dims, DType t = DType::Int64) {
  Tensor out;
  out.dtype = t;
  out.dims = std::move(dims);
  for (auto x : v) {
    if (t == DType::Int64) {
      const auto* p = reinterpret_cast<const uint8_t*>(&x);
      out.bytes.insert(out.bytes.end(), p, p + 8);
    } else {
      out.bytes.push_back(static_cast<uint8_t>(x != 0));
    }
  }
  return out;
}

Tensor reals(std::vector<float> v, std::vector<int64_t> dims) {
  Tensor out;
  out.dtype = DType::Float;
  out.dims = std::move(dims);
  const auto* p = reinterpret_cast<const uint8_t*>(v.data());
  out.bytes.assign(p, p + 4 * v.size());
  return out;
}

onnx::NodeProto node(const std::string& op) {
  onnx::NodeProto n;
  n.set_op_type(op);
  n.add_output("y");
  return n;
}

TEST(HostOps, BroadcastComparisonAndLogic) {
  // A causal mask: key positions [0..3] <= query positions [[1], [2]].
  Tensor k = ints({0, 1, 2, 3}, {1, 4}), q = ints({1, 2}, {2, 1});
  Tensor le = evaluateOnHost(node("LessOrEqual"), {&k, &q}, {2, 4}, DType::Bool);
  EXPECT_EQ(le.toInt64(), (std::vector<int64_t>{1, 1, 0, 0, 1, 1, 1, 0}));
  // padding clears key 1, where le holds in both rows; le's own zeros stay (an And that
  // returns either input fails)
  Tensor pad = ints({1, 0, 1, 1}, {4}, DType::Bool);
  Tensor both = evaluateOnHost(node("And"), {&le, &pad}, {2, 4}, DType::Bool);
  EXPECT_EQ(both.toInt64(), (std::vector<int64_t>{1, 0, 0, 0, 1, 0, 1, 0}));
  Tensor sum = evaluateOnHost(node("Sub"), {&q, &k}, {2, 4}, DType::Int64);
  EXPECT_EQ(sum.toInt64(), (std::vector<int64_t>{1, 0, -1, -2, 2, 1, 0, -1}));
}

TEST(HostOps, WhereKeepsTheBranchesBytes) {
  Tensor c = ints({1, 0, 1}, {3}, DType::Bool);
  Tensor zero = reals({0.f}, {}), low = reals({std::numeric_limits<float>::lowest()}, {});
  Tensor y = evaluateOnHost(node("Where"), {&c, &zero, &low}, {2, 3}, DType::Float);
  EXPECT_EQ(y.toDouble(), (std::vector<double>{0, std::numeric_limits<float>::lowest(), 0, 0,
                                               std::numeric_limits<float>::lowest(), 0}));
}

TEST(HostOps, GatherConcatExpandRange) {
  Tensor data = ints({10, 11, 12, 20, 21, 22}, {2, 3}), idx = ints({2, -3}, {2});
  auto g = node("Gather");
  addAttr(g, "axis", int64_t{1});
  EXPECT_EQ(evaluateOnHost(g, {&data, &idx}, {2, 2}, DType::Int64).toInt64(), (std::vector<int64_t>{12, 10, 22, 20}));
  Tensor bad = ints({3}, {1});
  EXPECT_THROW(evaluateOnHost(g, {&data, &bad}, {2, 1}, DType::Int64), Error);
  auto c = node("Concat");
  addAttr(c, "axis", int64_t{1});
  Tensor b = ints({7, 8}, {2, 1});
  EXPECT_EQ(evaluateOnHost(c, {&data, &b}, {2, 4}, DType::Int64).toInt64(),
            (std::vector<int64_t>{10, 11, 12, 7, 20, 21, 22, 8}));
  Tensor col = ints({1, 2}, {2, 1}), shape = ints({2, 3}, {2});
  EXPECT_EQ(evaluateOnHost(node("Expand"), {&col, &shape}, {2, 3}, DType::Int64).toInt64(),
            (std::vector<int64_t>{1, 1, 1, 2, 2, 2}));
  Tensor start = ints({5}, {}), limit = ints({11}, {}), delta = ints({2}, {});
  EXPECT_EQ(evaluateOnHost(node("Range"), {&start, &limit, &delta}, {3}, DType::Int64).toInt64(),
            (std::vector<int64_t>{5, 7, 9}));
}

TEST(HostOps, CastTruncatesTowardZero) {
  Tensor x = reals({-1.7f, 2.9f, 0.f}, {3});
  EXPECT_EQ(evaluateOnHost(node("Cast"), {&x}, {3}, DType::Int64).toInt64(), (std::vector<int64_t>{-1, 2, 0}));
  EXPECT_EQ(evaluateOnHost(node("Cast"), {&x}, {3}, DType::Bool).toInt64(), (std::vector<int64_t>{1, 1, 0}));
  Tensor i = ints({3, -4}, {2});
  EXPECT_EQ(evaluateOnHost(node("Cast"), {&i}, {2}, DType::Float).toDouble(), (std::vector<double>{3, -4}));
}

}  // namespace
}  // namespace tl
