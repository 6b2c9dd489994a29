#include "ops/op_table.h"

#include <algorithm>
#include <map>

#include "graph/attributes.h"

namespace tl {
namespace {

using Dims = std::vector<int64_t>;

double count(const Dims& d) {
  double n = 1;
  for (int64_t x : d) n *= static_cast<double>(x);
  return n;
}

// MatMul: 2 x K per output element (numpy's 1-D operands included).
double matmulFlops(const CostNode& c) {
  const Dims a = c.dims(c.node.input(0));
  return 2 * (a.empty() ? 1.0 : static_cast<double>(a.back())) * count(c.dims(c.node.output(0)));
}

double gemmFlops(const CostNode& c) {
  const Dims a = c.dims(c.node.input(0));
  const bool transA = attrInt(c.node, "transA").value_or(0) != 0;
  return 2 * static_cast<double>(transA ? a.front() : a.back()) * count(c.dims(c.node.output(0)));
}

// tl.MatMul: A [..., K] x W [K, N] (W [N, K] with transB): the whole product, whatever
// its outputs keep (a GLU halves them, a split shares them out).
double weightMatmulFlops(const CostNode& c) {
  const Dims w = c.dims(c.node.input(1));
  const bool transB = attrInt(c.node, "transB").value_or(0) != 0;
  return 2 * count(c.dims(c.node.input(0))) * static_cast<double>(transB ? w[0] : w[1]);  // A holds M x K
}

// tl.QMatMul: K and N are attributes.
double quantMatmulFlops(const CostNode& c) {
  const double N = static_cast<double>(attrInt(c.node, "N").value_or(0));
  return 2 * count(c.dims(c.node.input(0))) * N;
}

// Conv: 2 x (input channels of a group x kernel window) per output element.
double convFlops(const CostNode& c) {
  const Dims w = c.dims(c.node.input(1));
  double window = 1;
  for (size_t i = 1; i < w.size(); ++i) window *= static_cast<double>(w[i]);
  return 2 * window * count(c.dims(c.node.output(0)));
}

// tl.Attention: QK^T and PV over every (query row, key) pair, as the unfused graph's two
// MatMuls compute them, masked or not (docs/tl-bench.md says why the causal half counts).
double attentionFlops(const CostNode& c) {
  Dims q = c.dims(c.node.input(0)), k = c.dims(c.node.input(1)), v = c.dims(c.node.input(2));
  if (attrInt(c.node, "q_bshd").value_or(0)) std::swap(q[1], q[2]);
  if (attrInt(c.node, "k_bthd").value_or(0)) std::swap(k[1], k[2]);
  if (attrInt(c.node, "v_bthd").value_or(0)) std::swap(v[1], v[2]);
  const double pairs = static_cast<double>(q[0]) * static_cast<double>(q[1]) * static_cast<double>(q[2]) *
                       static_cast<double>(k[2]);
  return 2 * pairs * static_cast<double>(q[3] + v[3]);
}

// tl.RoPE with positions: the angles position x inv_freq, the export's MatMul of them, once
// per (positions, inv_freq) pair however many layers' RoPEs compute them.
double ropeFlops(const CostNode& c) {
  if (!attrInt(c.node, "positions").value_or(0) || !c.counted->insert(c.node.input(1) + "\n" + c.node.input(2)).second)
    return 0;
  return 2 * count(c.dims(c.node.input(1))) * count(c.dims(c.node.input(2)));
}

double tensorBytes(const CostNode& c, const std::string& t) {
  return count(c.dims(t)) * static_cast<double>(dtypeBits(c.dtype(t))) / 8;
}

// Gather: the rows it reads (as many bytes as it writes), its indices, its output.
double gatherBytes(const CostNode& c) {
  return 2 * tensorBytes(c, c.node.output(0)) + tensorBytes(c, c.node.input(1));
}

constexpr Host kNo = Host::None, kExact = Host::Exact, kInt = Host::Integer;
constexpr View kNever = View::Never;
constexpr Family kEw = Family::Elementwise, kMove = Family::Movement, kMm = Family::MatMul, kAtt = Family::Attention,
                 kNorm = Family::Norm, kRed = Family::Reduce, kConv = Family::Conv, kNone = Family::None;

// Rows of ops with one rule, host column and family: ONNX operators that differ only in
// their arithmetic.
struct Group {
  const char* shape;
  Host host;
  Family family;
  std::vector<std::pair<const char*, const char*>> ops;  // name, description
};

std::vector<OpInfo> buildTable() {
  std::vector<OpInfo> t;
  const auto onnx = [&](const char* name, const char* shape, Host host, View view, FlopCount flops, Family family,
                        const char* description) {
    t.push_back({"", name, shape, host, view, flops, nullptr, family, family == kNone && host == kNo && view == kNever,
                 nullptr, description});
  };
  const auto tlOp = [&](const char* name, const char* shape, FlopCount flops, Family family, const char* by,
                        const char* description) {
    t.push_back({"tl", name, shape, kNo, kNever, flops, nullptr, family, false, by, description});
  };
  const std::vector<Group> groups = {
      {"broadcast", kInt, kEw, {{"Add", "a + b"}, {"Sub", "a - b"}, {"Mul", "a * b"}}},
      {"broadcast", kNo, kEw, {{"Div", "a / b"}, {"Pow", "a to the power b"}, {"Max", "the larger of two (two inputs)"},
                               {"Min", "the smaller of two (two inputs)"}, {"Mod", "integer remainder, fmod=0"}}},
      {"broadcast", kExact, kEw, {{"Equal", "a == b"}, {"Less", "a < b"}, {"LessOrEqual", "a <= b"},
                                  {"Greater", "a > b"}, {"GreaterOrEqual", "a >= b"}, {"And", "logical and"},
                                  {"Or", "logical or"}, {"Xor", "logical xor"}}},
      {"broadcast", kNo, kNone, {{"PRelu", "leaky relu with a slope tensor"}, {"BitShift", "integer shift"},
                                 {"BitwiseAnd", "bitwise and"}, {"BitwiseOr", "bitwise or"}, {"BitwiseXor", "bitwise xor"},
                                 {"Sum", "sum of n inputs"}, {"Mean", "mean of n inputs"}}},
      {"unary", kNo, kEw, {{"Neg", "-x"}, {"Abs", "|x|"}, {"Sqrt", "square root"}, {"Reciprocal", "1 / x"},
                           {"Exp", "e to the x"}, {"Log", "natural logarithm"}, {"Sin", "sine"}, {"Cos", "cosine"},
                           {"Tanh", "hyperbolic tangent"}, {"Erf", "error function"}, {"Sigmoid", "1 / (1 + e^-x)"},
                           {"Relu", "max(x, 0)"}, {"Floor", "round down"}, {"Ceil", "round up"},
                           {"Softplus", "log(1 + e^x)"}, {"Gelu", "GELU, exact or tanh"}, {"IsNaN", "x is NaN"},
                           {"IsInf", "x is infinite (both signs)"}}},
      {"unary", kExact, kEw, {{"Not", "logical not"}}},
      {"unary", kNo, kNone, {{"Tan", "tangent"}, {"Asin", "arcsine"}, {"Acos", "arccosine"}, {"Atan", "arctangent"},
                             {"Sinh", "hyperbolic sine"}, {"Cosh", "hyperbolic cosine"}, {"Asinh", "inverse sinh"},
                             {"Acosh", "inverse cosh"}, {"Atanh", "inverse tanh"}, {"HardSigmoid", "clamped linear sigmoid"},
                             {"HardSwish", "x * hard sigmoid"}, {"LeakyRelu", "relu with a slope"}, {"Elu", "ELU"},
                             {"Selu", "SELU"}, {"Celu", "CELU"}, {"Softsign", "x / (1 + |x|)"},
                             {"Mish", "x * tanh(softplus(x))"}, {"Round", "round half to even"}, {"Sign", "-1, 0 or 1"},
                             {"ThresholdedRelu", "x where x > alpha"}, {"Shrink", "shrink towards 0"},
                             {"BitwiseNot", "bitwise not"}}},
      {"same-as-input", kNo, kNone, {{"Hardmax", "one-hot of the row maximum"},
                                     {"InstanceNormalization", "per-channel norm"},
                                     {"BatchNormalization", "inference batch norm"}, {"GroupNormalization", "group norm"},
                                     {"LpNormalization", "Lp norm along an axis"},
                                     {"MeanVarianceNormalization", "mean and variance norm"}}},
      {"reduce", kNo, kRed, {{"ReduceMean", "mean over axes"}, {"ReduceSum", "sum over axes"}, {"ReduceMax", "max over axes"},
                             {"ReduceMin", "min over axes"}, {"ReduceProd", "product over axes"},
                             {"ReduceSumSquare", "sum of squares over axes"}, {"ReduceL2", "L2 norm over axes"}}},
      {"reduce", kNo, kNone, {{"ReduceL1", "L1 norm over axes"}, {"ReduceLogSum", "log of the sum over axes"},
                              {"ReduceLogSumExp", "log-sum-exp over axes"}}},
  };
  for (const auto& g : groups)
    for (const auto& [name, description] : g.ops) onnx(name, g.shape, g.host, kNever, nullptr, g.family, description);

  onnx("Identity", "unary", kExact, View::Always, nullptr, kNone, "its input");
  onnx("Dropout", "unary", kNo, View::NoMask, nullptr, kEw, "its input at inference (a mask output, or training: no kernel)");
  onnx("Cast", "cast", kExact, View::SameType, nullptr, kEw, "convert to another dtype");
  onnx("CastLike", "cast-like", kNo, kNever, nullptr, kNone, "convert to another tensor's dtype");
  onnx("Where", "where", kExact, kNever, nullptr, kEw, "c ? x : y");
  onnx("Clip", "same-as-input", kNo, kNever, nullptr, kEw, "clamp to [min, max] (opset 11 on)");
  onnx("Shape", "shape", kNo, kNever, nullptr, kNone, "a tensor's dims (always folded)");
  onnx("Size", "size", kNo, kNever, nullptr, kNone, "a tensor's element count (always folded)");
  onnx("Constant", "constant", kNo, kNever, nullptr, kNone, "a constant tensor (data, or folded)");
  onnx("ConstantOfShape", "constant-of-shape", kExact, kNever, nullptr, kMove, "a tensor filled with one value");
  onnx("Reshape", "reshape", kExact, View::Always, nullptr, kNone, "new dims, same elements");
  onnx("Flatten", "flatten", kExact, View::Always, nullptr, kNone, "to 2-D at an axis");
  onnx("Squeeze", "squeeze", kExact, View::Always, nullptr, kNone, "drop dims of 1");
  onnx("Unsqueeze", "unsqueeze", kExact, View::Always, nullptr, kNone, "insert dims of 1");
  onnx("Transpose", "transpose", kExact, View::AtBinding, nullptr, kMove, "permute axes");
  onnx("Expand", "expand", kExact, View::AtBinding, nullptr, kMove, "broadcast to a shape");
  onnx("Slice", "slice", kNo, View::AtBinding, nullptr, kMove, "strided ranges of axes");
  onnx("Concat", "concat", kExact, kNever, nullptr, kMove, "join along an axis");
  onnx("Split", "split", kNo, kNever, nullptr, kMove, "cut along an axis");
  onnx("Gather", "gather", kExact, kNever, nullptr, kMove, "rows by index along an axis");
  t.back().bytes = gatherBytes;
  onnx("GatherElements", "gather-elements", kNo, kNever, nullptr, kMove, "elements by index along an axis");
  onnx("GatherND", "gather-nd", kNo, kNever, nullptr, kMove, "slices by index tuples (batch_dims 0)");
  onnx("ScatterND", "scatter", kNo, kNever, nullptr, kNone, "write slices by index tuples");
  onnx("ScatterElements", "scatter", kNo, kNever, nullptr, kNone, "write elements by index");
  onnx("Tile", "tile", kNo, kNever, nullptr, kMove, "repeat along axes");
  onnx("OneHot", "one-hot", kNo, kNever, nullptr, kMove, "values[1] where the axis's coordinate is the index, else values[0]");
  onnx("Pad", "pad", kNo, kNever, nullptr, kNone, "pad axes");
  onnx("Range", "range", kInt, kNever, nullptr, kMove, "start, start + delta, ... below limit");
  onnx("Trilu", "same-as-input", kNo, kNever, nullptr, kMove, "upper or lower triangle");
  onnx("MatMul", "matmul", kNo, kNever, matmulFlops, kMm, "matrix product, numpy broadcasting");
  onnx("MatMulInteger", "matmul", kNo, kNever, matmulFlops, kNone, "integer matrix product");
  onnx("Gemm", "gemm", kNo, kNever, gemmFlops, kMm, "A x B + C (alpha = beta = 1)");
  onnx("Conv", "conv", kNo, kNever, convFlops, kConv, "1-3-D convolution, groups, dilations, pads");
  onnx("Softmax", "same-as-input", kNo, kNever, nullptr, kNorm, "softmax along an axis");
  onnx("LogSoftmax", "same-as-input", kNo, kNever, nullptr, kNorm, "log of softmax along an axis");
  onnx("LayerNormalization", "layer-norm", kNo, kNever, nullptr, kNorm, "(x - mean) / std * scale + bias");
  onnx("ArgMax", "arg-reduce", kNo, kNever, nullptr, kRed, "index of the maximum along an axis");
  onnx("ArgMin", "arg-reduce", kNo, kNever, nullptr, kRed, "index of the minimum along an axis");
  onnx("CumSum", "same-as-input", kNo, kNever, nullptr, kRed, "running sum along an axis (exclusive, reverse)");
  onnx("TopK", "topk", kNo, kNever, nullptr, kRed, "the k largest or smallest along an axis (float)");

  tlOp("QMatMul", "qmatmul", quantMatmulFlops, kMm, "tl-quant", "A x group-wise quantized W (+ bias, residual, norm, GLU, split)");
  tlOp("MatMul", "tl-matmul", weightMatmulFlops, kMm, "tl-fuse", "A x constant W (+ bias, residual, norm, GLU, split)");
  tlOp("RMSNorm", "rms-norm", nullptr, kNorm, "tl-fuse", "x / rms(x) * scale, with its residual Add");
  tlOp("RoPE", "rope", ropeFlops, kAtt, "tl-fuse", "rotary embedding of q (and k), appending k and v to caches");
  tlOp("SwiGLU", "glu", nullptr, kEw, "tl-fuse", "silu(g) * u");
  tlOp("GeGLU", "glu", nullptr, kEw, "tl-fuse", "gelu(g) * u");
  tlOp("Attention", "attention", attentionFlops, kAtt, "tl-fuse", "softmax(q k^T * scale + mask) v, grouped-query");
  tlOp("Concat", "concat-pair", nullptr, kMove, "tl-fuse", "two Concats along one axis in one launch");
  tlOp("KvAppend", "concat-pair", nullptr, kAtt, "tl-plan", "new rows appended to KV caches (in place when planned)");
  tlOp("Elementwise", "elementwise", nullptr, kEw, "tl-fuse", "a chain of elementwise ops as one generated kernel");
  tlOp("Gelu", "same-as-input", nullptr, kEw, "tl-fuse", "ONNX Gelu (opset 20) for models of older opsets");

  std::stable_sort(t.begin(), t.end(), [](const OpInfo& a, const OpInfo& b) {
    return std::make_pair(!isOnnxDomain(a.domain), opKey(a.domain, a.name)) <
           std::make_pair(!isOnnxDomain(b.domain), opKey(b.domain, b.name));
  });
  return t;
}

}  // namespace

const char* familyName(Family f) {
  switch (f) {
    case Family::None: return "-";
    case Family::Elementwise: return "elementwise";
    case Family::Movement: return "movement";
    case Family::MatMul: return "matmul";
    case Family::Attention: return "attention";
    case Family::Norm: return "norm";
    case Family::Reduce: return "reduce";
    case Family::Conv: return "conv";
  }
  return "?";
}

std::string opKey(const std::string& domain, const std::string& op) {
  return isOnnxDomain(domain) ? op : domain + "." + op;
}

std::string opKey(const onnx::NodeProto& node) { return opKey(node.domain(), node.op_type()); }

const std::vector<OpInfo>& opTable() {
  static const std::vector<OpInfo> table = buildTable();
  return table;
}

const OpInfo* findOp(const std::string& domain, const std::string& op) {
  static const std::map<std::string, const OpInfo*> index = [] {
    std::map<std::string, const OpInfo*> m;
    for (const auto& o : opTable()) m[opKey(o.domain, o.name)] = &o;
    return m;
  }();
  const auto it = index.find(opKey(domain, op));
  return it == index.end() ? nullptr : it->second;
}

const OpInfo* findOp(const onnx::NodeProto& node) { return findOp(node.domain(), node.op_type()); }

bool isOnnxOp(const onnx::NodeProto& node, const char* op) { return node.op_type() == op && isOnnxDomain(node.domain()); }

OpCost opCost(const CostNode& c) {
  OpCost cost;
  const OpInfo* op = findOp(c.node);
  if (!op || isView(c.node, c.dtype)) return cost;
  if (op->flops) cost.flops = op->flops(c);
  if (op->bytes) {
    cost.bytes = op->bytes(c);
  } else {
    for (const auto* names : {&c.node.input(), &c.node.output()})
      for (const auto& t : *names)
        if (!t.empty()) cost.bytes += tensorBytes(c, t);
  }
  return cost;
}

ViewChain producerThroughViews(const Graph& graph, const std::string& tensor, const DTypeOf& dtype) {
  ViewChain chain;
  chain.tensors.push_back(tensor);
  for (;;) {
    chain.producer = graph.producer(chain.tensors.back());
    if (chain.producer < 0 || !isView(graph.node(static_cast<size_t>(chain.producer)), dtype)) return chain;
    chain.tensors.push_back(graph.node(static_cast<size_t>(chain.producer)).input(0));
  }
}

bool isView(const onnx::NodeProto& n, const DTypeOf& dtype) {
  if (n.input_size() < 1 || n.input(0).empty() || n.output_size() < 1 || n.output(0).empty()) return false;
  const OpInfo* op = findOp(n);
  switch (op ? op->view : View::Never) {
    case View::Always: return true;
    case View::SameType: return dtype(n.input(0)) == dtype(n.output(0));
    case View::NoMask:
      return (n.output_size() == 1 || n.output(1).empty()) && (n.input_size() < 3 || n.input(2).empty());
    case View::Never: case View::AtBinding: return false;
  }
  return false;
}

std::string formatOpTable() {
  const auto hostName = [](Host h) { return h == Host::Exact ? "exact" : h == Host::Integer ? "integers" : "-"; };
  const auto viewName = [](View v) {
    switch (v) {
      case View::Never: return "-";
      case View::Always: return "always";
      case View::SameType: return "same dtype";
      case View::NoMask: return "no mask/train";
      case View::AtBinding: return "at some shapes";
    }
    return "?";
  };
  std::vector<std::vector<std::string>> rows = {{"op", "shape rule", "host", "view", "flops", "device", "only after",
                                                 "description"}};
  for (const auto& o : opTable())
    rows.push_back({opKey(o.domain, o.name), o.shape, hostName(o.host), viewName(o.view), o.flops ? "counted" : "-",
                    o.shapeOnly ? "shape-only" : familyName(o.family), o.writtenBy ? o.writtenBy : "-", o.description});
  std::vector<size_t> width(rows[0].size(), 0);
  for (const auto& r : rows)
    for (size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t i = 0; i < r.size(); ++i) line += i + 1 < r.size() ? r[i] + std::string(width[i] - r[i].size() + 2, ' ') : r[i];
    out += line + "\n";
  }
  return out;
}

}  // namespace tl
