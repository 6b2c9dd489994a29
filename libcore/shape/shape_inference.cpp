#include "shape/shape_inference.h"

#include <algorithm>
#include <cctype>

#include "cli/error.h"
#include "shape/rule_context.h"
#include "shape/rules.h"

namespace tl {

const char* className(TensorClass c) {
  switch (c) {
    case TensorClass::Input: return "input";
    case TensorClass::Constant: return "constant";
    case TensorClass::Shape: return "shape";
    case TensorClass::Tensor: return "tensor";
  }
  return "?";
}

const char* className(NodeClass c) {
  switch (c) {
    case NodeClass::Constant: return "constant";
    case NodeClass::Shape: return "shape";
    case NodeClass::Tensor: return "tensor";
  }
  return "?";
}

const TensorShape& ShapeAnalysis::at(const std::string& name) const {
  auto it = tensors.find(name);
  if (it == tensors.end()) throw Error("tensor '" + name + "' has no inferred shape");
  return it->second;
}

namespace {

// A dim name as a symbolic expression. Names that are not expressions (dots, dashes,
// spaces...) become one symbol with the offending characters replaced, noted.
SymExpr parseDimName(ShapeAnalysis& a, const std::string& text, const std::string& origin, bool onInput) {
  SymExpr e;
  try {
    e = SymExpr::parse(text);
  } catch (const Error&) {
    std::string name;
    for (char ch : text) name += std::isalnum(static_cast<unsigned char>(ch)) ? ch : '_';
    if (name.empty() || std::isdigit(static_cast<unsigned char>(name[0]))) name = "_" + name;
    a.notes.push_back("dim name '" + text + "' (" + origin + ") is not an expression: used as symbol '" + name + "'");
    e = SymExpr::symbol(name);
  }
  for (const auto& s : e.symbols()) a.symbols.declare(s, origin, onInput);
  return e;
}

// The declared dims of a value; nullopt when the declaration has no shape.
std::optional<std::vector<SymExpr>> declaredDims(ShapeAnalysis& a, const onnx::ValueInfoProto& vi,
                                                 const std::string& what, bool onInput, bool inventMissing) {
  if (!vi.type().has_tensor_type() || !vi.type().tensor_type().has_shape()) return std::nullopt;
  std::vector<SymExpr> dims;
  const auto& shape = vi.type().tensor_type().shape();
  for (int k = 0; k < shape.dim_size(); ++k) {
    const auto& d = shape.dim(k);
    const std::string origin = what + " '" + vi.name() + "' axis " + std::to_string(k);
    if (d.has_dim_value()) {
      dims.push_back(d.dim_value());
    } else if (d.has_dim_param() && !d.dim_param().empty()) {
      dims.push_back(parseDimName(a, d.dim_param(), origin, onInput));
    } else if (inventMissing) {
      std::string name = vi.name() + "_d" + std::to_string(k);
      for (auto& ch : name)
        if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
      a.inventedSymbols.push_back(name + " (" + origin + " has no name)");
      a.symbols.declare(name, origin, onInput);
      dims.push_back(SymExpr::symbol(name));
    } else {
      return std::nullopt;  // a partly unknown declaration proves nothing
    }
  }
  return dims;
}

void checkDeclared(ShapeAnalysis& a, const Graph& g, size_t nodeIndex, const std::string& name,
                   const onnx::ValueInfoProto& vi, const std::string& what) {
  TensorShape& t = a.tensors.at(name);
  const auto& tt = vi.type().tensor_type();
  if (tt.elem_type() != 0 && dtypeFromOnnx(tt.elem_type()) != t.dtype)
    throw Error("node '" + g.nodeName(nodeIndex) + "': " + what + " '" + name + "' is declared " +
                dtypeName(dtypeFromOnnx(tt.elem_type())) + " but computes " + dtypeName(t.dtype));
  auto dims = declaredDims(a, vi, what, false, false);
  if (!dims) return;
  if (dims->size() != t.dims.size())
    throw Error("node '" + g.nodeName(nodeIndex) + "': " + what + " '" + name + "' is declared " + str(*dims) +
                " but computes " + str(t.dims));
  for (size_t k = 0; k < dims->size(); ++k) {
    SymExpr want = a.symbols.resolve((*dims)[k]), got = a.symbols.resolve(t.dims[k]);
    if (want == got) continue;
    // An inner declaration that would pin a graph input's free axis to a constant is the
    // exporter's trace of its example (torch.export specializes what its example had at 1:
    // the dynamo exporter's position_ids batch, a free symbol of its own), not a property
    // of the graph, whose input says the axis is free and whose ops compute it: it stands.
    const auto gotSymbols = got.symbols();
    if (want.isConst() && what == "value_info" &&
        std::any_of(gotSymbols.begin(), gotSymbols.end(), [&](const std::string& s) { return a.symbols.onInput(s); }))
      continue;
    try {
      a.symbols.unify(got, want, what + " '" + name + "' axis " + std::to_string(k) + " is declared " +
                                     (*dims)[k].str() + ", computed " + got.str());
    } catch (const Error& e) {
      // Neither provably equal nor provably apart (2048 - max(0, 2048 - s) against
      // min(2048, s)): the computed dims, which the ops prove, stand.
      if (what == "value_info" && !(got - want).isConst()) continue;
      throw Error("node '" + g.nodeName(nodeIndex) + "': " + what + " '" + name + "' is declared " + str(*dims) +
                  " but computes " + str(t.dims) + ": " + e.what());
    }
  }
}

NodeClass classify(const ShapeAnalysis& a, const onnx::NodeProto& n) {
  if (n.op_type() == "Constant") return NodeClass::Constant;
  for (const auto& out : n.output())
    if (!out.empty() && !a.tensors.at(out).value) return NodeClass::Tensor;
  return NodeClass::Shape;
}

}  // namespace

ShapeAnalysis inferShapes(const Model& model, const Graph& graph) {
  ShapeAnalysis a;
  const auto& g = graph.proto();
  const int64_t opset = onnxOpset(model.proto);

  for (const auto& init : g.initializer()) {
    TensorShape t;
    t.dtype = dtypeFromOnnx(init.data_type());
    for (auto d : init.dims()) t.dims.push_back(d);
    t.cls = TensorClass::Constant;
    int64_t n = 1;
    for (auto d : init.dims()) n *= d;
    if (n <= kMaxValueElements && (isInteger(t.dtype) || t.dtype == DType::Bool) &&
        init.data_location() != onnx::TensorProto::EXTERNAL) {
      std::vector<SymExpr> v;
      for (auto x : readTensor(init, model.baseDir).toInt64()) v.push_back(x);
      t.value = std::move(v);
    }
    a.tensors[init.name()] = std::move(t);
    a.order.push_back(init.name());
  }
  for (const auto& in : g.input()) {
    if (a.tensors.count(in.name())) continue;  // an initializer listed as input (IR < 4)
    if (!in.type().has_tensor_type()) throw Error("input '" + in.name() + "' is not a tensor");
    TensorShape t;
    t.dtype = dtypeFromOnnx(in.type().tensor_type().elem_type());
    auto dims = declaredDims(a, in, "input", true, true);
    if (!dims) throw Error("input '" + in.name() + "' declares no shape (its rank is unknown)");
    t.dims = std::move(*dims);
    t.cls = TensorClass::Input;
    a.tensors[in.name()] = std::move(t);
    a.order.push_back(in.name());
  }

  std::unordered_map<std::string, std::pair<const onnx::ValueInfoProto*, std::string>> declared;
  for (const auto& vi : g.value_info()) declared[vi.name()] = {&vi, "value_info"};
  for (const auto& out : g.output()) declared[out.name()] = {&out, "graph output"};

  a.nodeClass.assign(graph.nodeCount(), NodeClass::Tensor);
  for (size_t i : graph.topoOrder()) {
    const auto& node = graph.node(i);
    ShapeRule rule = findShapeRule(node.domain(), node.op_type());
    if (!rule) {
      throw Error("node '" + graph.nodeName(i) + "': no shape rule for operator '" + opKey(node) + "'");
    }
    RuleContext ctx(a, graph, i, opset);
    try {
      rule(ctx);
    } catch (const Error& e) {
      rethrowForNode(graph.nodeName(i), e);
    }
    for (const auto& out : node.output()) {
      if (out.empty()) continue;
      if (!a.tensors.count(out))
        throw Error("node '" + graph.nodeName(i) + "': the " + node.op_type() + " rule gives no shape for output '" + out + "'");
      auto d = declared.find(out);
      if (d != declared.end()) checkDeclared(a, graph, i, out, *d->second.first, d->second.second);
    }
    NodeClass cls = classify(a, node);
    a.nodeClass[i] = cls;
    if (cls == NodeClass::Constant)
      for (const auto& out : node.output())
        if (!out.empty()) a.tensors.at(out).cls = TensorClass::Constant;
  }
  // Graph inputs may also be declared as outputs (pass-through); check those too.
  for (const auto& out : g.output())
    if (!a.tensors.count(out.name())) throw Error("graph output '" + out.name() + "' has no shape");

  // Express everything over the free symbols that survived unification.
  for (auto& [name, t] : a.tensors) {
    for (auto& d : t.dims) d = a.symbols.resolve(d);
    if (t.value)
      for (auto& v : *t.value) v = a.symbols.resolve(v);
  }
  // Tensor ops fed only by shapes and constants: generators (Range over N, causal
  // masks) that run on the device, or small shape tensors that failed to fold.
  for (size_t i = 0; i < graph.nodeCount(); ++i) {
    if (a.nodeClass[i] != NodeClass::Tensor) continue;
    const auto& node = graph.node(i);
    bool shapeOnly = true;
    for (const auto& in : node.input()) {
      if (in.empty()) continue;
      TensorClass c = a.tensors.at(in).cls;
      shapeOnly = shapeOnly && (c == TensorClass::Shape || c == TensorClass::Constant);
    }
    if (!shapeOnly) continue;
    bool small = true;
    for (const auto& out : node.output()) {
      if (out.empty()) continue;
      const auto& t = a.tensors.at(out);
      auto cd = constDims(t.dims);
      small = small && cd && elementCount(*cd) <= kMaxValueElements && (isInteger(t.dtype) || t.dtype == DType::Bool);
    }
    if (small) {
      ++a.shapeOpsLeft;
      a.notes.push_back("node '" + graph.nodeName(i) + "' (" + node.op_type() +
                        ") computes from shapes only but could not be folded");
    } else {
      ++a.shapeOnlyTensorOps;
    }
  }
  return a;
}

namespace {

void writeDims(onnx::TypeProto_Tensor* tt, DType dtype, const std::vector<SymExpr>& dims) {
  tt->set_elem_type(static_cast<int32_t>(dtype));
  auto* shape = tt->mutable_shape();
  shape->clear_dim();
  for (const auto& d : dims) {
    auto* dim = shape->add_dim();
    if (auto c = d.constValue()) {
      dim->set_dim_value(*c);
    } else {
      dim->set_dim_param(d.str());
    }
  }
}

}  // namespace

void annotateModel(onnx::ModelProto& proto, const ShapeAnalysis& a) {
  auto* g = proto.mutable_graph();
  std::unordered_map<std::string, bool> io;
  for (auto& in : *g->mutable_input()) {
    io[in.name()] = true;
    auto it = a.tensors.find(in.name());
    if (it != a.tensors.end() && it->second.cls == TensorClass::Input)
      writeDims(in.mutable_type()->mutable_tensor_type(), it->second.dtype, it->second.dims);
  }
  for (auto& out : *g->mutable_output()) {
    io[out.name()] = true;
    const auto& t = a.at(out.name());
    writeDims(out.mutable_type()->mutable_tensor_type(), t.dtype, t.dims);
  }
  g->clear_value_info();
  for (const auto& name : a.order) {
    const auto& t = a.at(name);
    if (io.count(name) || t.producer < 0) continue;
    auto* vi = g->add_value_info();
    vi->set_name(name);
    writeDims(vi->mutable_type()->mutable_tensor_type(), t.dtype, t.dims);
  }

  // Replace earlier tl-shape metadata; keep everyone else's. Relations found by an
  // earlier run name symbols this model no longer declares (its inputs were rewritten
  // to expressions); they are kept, so re-running loses nothing.
  std::string earlier;
  auto* props = proto.mutable_metadata_props();
  for (int i = props->size(); i-- > 0;) {
    if (props->Get(i).key() == "tl.shape.relations") earlier = props->Get(i).value();
    if (props->Get(i).key().rfind("tl.shape.", 0) == 0) props->DeleteSubrange(i, 1);
  }
  auto put = [&](const std::string& k, const std::string& v) {
    auto* p = proto.add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  };
  std::string symbols, relations, values;
  for (const auto& s : a.symbols.freeSymbols()) symbols += (symbols.empty() ? "" : ",") + s;
  for (size_t pos = 0; pos < earlier.size();) {
    size_t nl = earlier.find('\n', pos);
    std::string line = earlier.substr(pos, nl == std::string::npos ? std::string::npos : nl - pos);
    pos = nl == std::string::npos ? earlier.size() : nl + 1;
    std::string symbol = line.substr(0, line.find(" = "));
    if (!line.empty() && !a.symbols.isDeclared(symbol)) relations += line + "\n";
  }
  for (const auto& r : a.symbols.relations()) relations += r.symbol + " = " + r.value.str() + "\n";
  for (const auto& name : a.order) {
    const auto& t = a.at(name);
    if (t.cls == TensorClass::Shape) values += name + "\t" + str(*t.value) + "\n";
  }
  put("tl.shape.version", "1");
  put("tl.shape.symbols", symbols);
  put("tl.shape.relations", relations);
  put("tl.shape.values", values);
  std::string bounds;
  for (const auto& b : a.symbols.bounds()) bounds += b.expr.str() + " <= " + std::to_string(b.limit) + "\t" + b.evidence + "\n";
  if (!bounds.empty()) put("tl.shape.bounds", bounds);
}

}  // namespace tl
