// rmsnorm: the chain every exporter writes for RMSNorm (TorchScript and dynamo alike,
// Llama, Qwen2, Mistral, Phi-3, Gemma's (1 + w) scale):
//   x2 = Pow(x, 2); m = ReduceMean(x2, last axis, keepdims); v = Add(m, eps); s = Sqrt(v)
//   r = Reciprocal(s) | Div(1, s); n = Mul(x, r) [-> Cast to float]; y = Mul(n, scale)
// becomes y = tl.RMSNorm(x, scale, epsilon). Every intermediate must be read by the
// chain alone, the constants must have the values named, and scale must be [H].
#include <cmath>
#include <set>

#include "cli/error.h"
#include "fuse/fuse.h"
#include "graph/attributes.h"
#include "graph/graph.h"
#include "shape/shape_inference.h"
#include "tensor/tensor.h"

namespace tl {
namespace {

struct Context {
  const Model& model;
  const Graph& graph;
  const ShapeAnalysis& analysis;
  std::set<std::string> outputs;  // graph outputs: never internal to a pattern
};

// A one-element constant's value: an initializer or a Constant node's tensor.
std::optional<double> scalar(const Context& c, const std::string& name) {
  const onnx::TensorProto* t = c.graph.initializer(name);
  const int p = c.graph.producer(name);
  if (!t && p >= 0) {
    const auto& n = c.graph.node(static_cast<size_t>(p));
    if (n.op_type() == "Constant" && n.attribute_size() == 1 && n.attribute(0).has_t()) t = &n.attribute(0).t();
  }
  if (!t) return std::nullopt;
  const Tensor v = readTensor(*t, c.model.baseDir);
  if (v.numel() != 1 || !(isFloating(v.dtype) || isInteger(v.dtype))) return std::nullopt;
  return v.toDouble()[0];
}

// The one node that reads `tensor`, when exactly one does and it is no graph output.
const onnx::NodeProto* onlyReader(const Context& c, const std::string& tensor, size_t* index = nullptr) {
  const auto& readers = c.graph.consumers(tensor);
  if (readers.size() != 1 || c.outputs.count(tensor)) return nullptr;
  if (index) *index = readers[0];
  return &c.graph.node(readers[0]);
}

// The input of a two-input node that is not `known` ("" when neither or both are).
std::string other(const onnx::NodeProto& n, const std::string& known) {
  if (n.input_size() != 2) return "";
  if (n.input(0) == known && n.input(1) != known) return n.input(1);
  if (n.input(1) == known && n.input(0) != known) return n.input(0);
  return "";
}

bool is(const onnx::NodeProto* n, const char* op) {
  return n && n->op_type() == op && (n->domain().empty() || n->domain() == "ai.onnx");
}

struct Match {
  std::vector<size_t> nodes;  // to remove; the last is the scale Mul
  std::string x, scale, y;
  double eps = 0;
};

// Why the ReduceMean at `mean` does not start an RMSNorm chain (empty: it does).
std::string match(const Context& c, size_t mean, Match& m) {
  const auto& r = c.graph.node(mean);
  const int pp = c.graph.producer(r.input(0));
  const onnx::NodeProto* pow = pp >= 0 ? &c.graph.node(static_cast<size_t>(pp)) : nullptr;
  if (!is(pow, "Pow")) return "its input is not a Pow";
  if (scalar(c, pow->input(1)) != 2.0) return "the Pow's exponent is not the constant 2";
  m.x = pow->input(0);
  const auto& x = c.analysis.at(m.x);
  if (x.dtype != DType::Float || x.dims.empty()) return "x is not a float32 tensor of rank >= 1";
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  std::vector<int64_t> axes;
  if (auto a = attrInts(r, "axes")) axes = *a;
  if (r.input_size() > 1 && !r.input(1).empty()) {
    const auto& v = c.analysis.at(r.input(1)).value;
    if (!v) return "its axes are not constant";
    for (const auto& e : *v) {
      if (!e.isConst()) return "its axes are not constant";
      axes.push_back(*e.constValue());
    }
  }
  if (axes.size() != 1 || (axes[0] != -1 && axes[0] != rank - 1)) return "it does not reduce the last axis alone";
  if (attrInt(r, "keepdims").value_or(1) != 1) return "keepdims is 0";
  size_t iAdd, iSqrt, iInv, iMul, iNext;
  if (!onlyReader(c, pow->output(0))) return "the Pow's output has other readers";
  const onnx::NodeProto* add = onlyReader(c, r.output(0), &iAdd);
  if (!is(add, "Add")) return "its output goes to more than an Add";
  const auto eps = scalar(c, other(*add, r.output(0)));
  if (!eps || !(*eps >= 0)) return "the Add's eps is not a non-negative constant";
  m.eps = *eps;
  const onnx::NodeProto* sq = onlyReader(c, add->output(0), &iSqrt);
  if (!is(sq, "Sqrt")) return "the Add is not followed by a Sqrt alone";
  const onnx::NodeProto* inv = onlyReader(c, sq->output(0), &iInv);
  if (!(is(inv, "Reciprocal") || (is(inv, "Div") && inv->input(1) == sq->output(0) && scalar(c, inv->input(0)) == 1.0)))
    return "the Sqrt is not followed by Reciprocal or Div(1, .) alone";
  const onnx::NodeProto* mul = onlyReader(c, inv->output(0), &iMul);
  if (!is(mul, "Mul") || other(*mul, inv->output(0)) != m.x) return "the reciprocal is not multiplied by x alone";
  std::string normed = mul->output(0);
  std::vector<size_t> nodes = {static_cast<size_t>(pp), mean, iAdd, iSqrt, iInv, iMul};
  const onnx::NodeProto* next = onlyReader(c, normed, &iNext);
  if (is(next, "Cast") && attrInt(*next, "to").value_or(0) == onnx::TensorProto::FLOAT) {
    nodes.push_back(iNext);
    normed = next->output(0);
    next = onlyReader(c, normed, &iNext);
  }
  if (!is(next, "Mul")) return "the normalized x is not scaled by a Mul alone";
  m.scale = other(*next, normed);
  if (m.scale.empty()) return "the scale Mul does not multiply the normalized x by another tensor";
  const auto& s = c.analysis.at(m.scale);
  if (s.dtype != DType::Float || s.dims.size() != 1 || c.analysis.symbols.resolve(s.dims[0]) !=
                                                           c.analysis.symbols.resolve(x.dims.back()))
    return "the scale is not a float32 [" + x.dims.back().str() + "]";
  nodes.push_back(iNext);
  m.nodes = nodes;
  m.y = next->output(0);
  return "";
}

}  // namespace

PassResult fuseRmsNorm(Model& model) {
  PassResult result;
  std::vector<Match> matches;
  {
    Graph graph(model.proto.graph());
    const ShapeAnalysis analysis = inferShapes(model, graph);
    Context c{model, graph, analysis, {}};
    for (const auto& o : model.proto.graph().output()) c.outputs.insert(o.name());
    for (size_t i = 0; i < graph.nodeCount(); ++i) {
      if (!is(&graph.node(i), "ReduceMean")) continue;
      Match m;
      const std::string why = match(c, i, m);
      if (why.empty()) {
        matches.push_back(std::move(m));
      } else {
        result.nearMisses.push_back("node '" + graph.nodeName(i) + "' (ReduceMean): " + why);
      }
    }
  }
  auto* g = model.proto.mutable_graph();
  std::set<size_t> removed;
  std::map<size_t, onnx::NodeProto> fused;  // at the scale Mul's place, so the file stays in order
  for (const auto& m : matches) {
    removed.insert(m.nodes.begin(), m.nodes.end());
    onnx::NodeProto n;
    n.set_name(g->node(static_cast<int>(m.nodes.back())).name() + "/tl.RMSNorm");
    n.set_op_type("RMSNorm");
    n.set_domain("tl");
    n.add_input(m.x);
    n.add_input(m.scale);
    n.add_output(m.y);
    auto* eps = n.add_attribute();
    eps->set_name("epsilon");
    eps->set_type(onnx::AttributeProto::FLOAT);
    eps->set_f(static_cast<float>(m.eps));
    fused[m.nodes.back()] = std::move(n);
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i = 0; i < g->node_size(); ++i) {
    auto f = fused.find(static_cast<size_t>(i));
    if (f != fused.end()) {
      *nodes.Add() = std::move(f->second);
    } else if (!removed.count(static_cast<size_t>(i))) {
      *nodes.Add() = g->node(i);
    }
  }
  g->mutable_node()->Swap(&nodes);
  result.rewrites = static_cast<int>(matches.size());
  if (result.rewrites) {
    bool imported = false;
    for (const auto& o : model.proto.opset_import()) imported = imported || o.domain() == "tl";
    if (!imported) {
      auto* o = model.proto.add_opset_import();
      o->set_domain("tl");
      o->set_version(1);
    }
  }
  return result;
}

}  // namespace tl
