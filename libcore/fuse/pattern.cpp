#include "fuse/pattern.h"

#include <algorithm>
#include <map>
#include <set>

#include "graph/attributes.h"
#include "graph/tl_ops.h"
#include "ops/op_table.h"
#include "tensor/tensor.h"

namespace tl {

PatternContext::PatternContext(const Model& m, const Graph& g, const ShapeAnalysis& a) : model(m), graph(g), analysis(a) {
  for (const auto& o : g.proto().output()) outputs.insert(o.name());
}

bool isOp(const onnx::NodeProto* n, const char* op) {
  return n && isOnnxOp(*n, op);
}

bool hasPerm(const onnx::NodeProto& transpose, const std::vector<int64_t>& want) {
  const auto* p = findAttr(transpose, "perm");
  return p && std::vector<int64_t>(p->ints().begin(), p->ints().end()) == want;
}

const onnx::TensorProto* constantOf(const Graph& graph, const std::string& tensor) {
  std::string t = tensor;
  for (int hops = 0; hops < 16; ++hops) {
    if (const auto* init = graph.initializer(t)) return init;
    const int p = graph.producer(t);
    if (p < 0) return nullptr;
    const auto& n = graph.node(static_cast<size_t>(p));
    if (isOp(&n, "Constant") && n.attribute_size() == 1 && n.attribute(0).has_t()) return &n.attribute(0).t();
    if (!isOp(&n, "Identity")) return nullptr;
    t = n.input(0);
  }
  return nullptr;
}

int64_t projectionWidth(const Graph& graph, const onnx::NodeProto& n) {
  if (n.output_size() != 1 || findAttr(n, "split") || findAttr(n, "transB") || hasMatMulExtras(n)) return 0;
  if (isOp(&n, "MatMul") || (n.domain() == "tl" && n.op_type() == "MatMul")) {
    const auto* w = n.input_size() >= 2 ? constantOf(graph, n.input(1)) : nullptr;
    return w && w->dims_size() == 2 && w->data_type() == onnx::TensorProto::FLOAT ? w->dims(1) : 0;
  }
  if (n.domain() == "tl" && n.op_type() == "QMatMul") return attrInt(n, "N").value_or(0);
  return 0;
}

bool readOnlyAfter(const Graph& graph, const std::string& tensor, size_t index) {
  for (size_t reader : graph.consumers(tensor))
    if (reader <= index) return false;
  return true;
}

bool isAnchor(const onnx::NodeProto& n, const std::string& anchor) {
  if (anchor.rfind("tl.", 0) == 0) return n.domain() == "tl" && n.op_type() == anchor.substr(3);
  return isOp(&n, anchor.c_str());
}

std::string otherInput(const onnx::NodeProto& n, const std::string& known) {
  if (n.input_size() != 2) return "";
  if (n.input(0) == known && n.input(1) != known) return n.input(1);
  if (n.input(1) == known && n.input(0) != known) return n.input(0);
  return "";
}

const onnx::NodeProto* PatternContext::producer(const std::string& tensor, const char* op, size_t* index) const {
  const int p = graph.producer(tensor);
  if (p < 0 || !isOp(&graph.node(static_cast<size_t>(p)), op)) return nullptr;
  if (index) *index = static_cast<size_t>(p);
  return &graph.node(static_cast<size_t>(p));
}

const onnx::NodeProto* PatternContext::onlyReader(const std::string& tensor, size_t* index) const {
  const auto& readers = graph.consumers(tensor);
  if (readers.size() != 1 || outputs.count(tensor)) return nullptr;
  if (index) *index = readers[0];
  return &graph.node(readers[0]);
}

std::optional<double> PatternContext::scalar(const std::string& tensor) const {
  const onnx::TensorProto* t = graph.initializer(tensor);
  const int p = graph.producer(tensor);
  if (!t && p >= 0) {
    const auto& n = graph.node(static_cast<size_t>(p));
    if (n.op_type() == "Constant" && n.attribute_size() == 1 && n.attribute(0).has_t()) t = &n.attribute(0).t();
  }
  if (!t) return std::nullopt;
  const Tensor v = readTensor(*t, model.baseDir);
  if (v.numel() != 1 || !(isFloating(v.dtype) || isInteger(v.dtype))) return std::nullopt;
  return v.toDouble()[0];
}

std::optional<std::vector<int64_t>> PatternContext::ints(const std::string& tensor) const {
  if (tensor.empty() || !analysis.tensors.count(tensor)) return std::nullopt;
  const auto& v = analysis.at(tensor).value;
  if (!v) return std::nullopt;
  std::vector<int64_t> out;
  for (const auto& e : *v) {
    if (!e.isConst()) return std::nullopt;
    out.push_back(*e.constValue());
  }
  return out;
}

bool PatternContext::sameDims(const std::string& a, const std::string& b) const {
  const auto &x = dims(a), &y = dims(b);
  if (x.size() != y.size()) return false;
  for (size_t i = 0; i < x.size(); ++i)
    if (!same(x[i], y[i])) return false;
  return true;
}

onnx::NodeProto constantNode(const std::string& name, const std::vector<int64_t>& v) {
  onnx::NodeProto n;
  n.set_op_type("Constant");
  n.set_name(name);
  n.add_output(name);
  auto* a = n.add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  auto* t = a->mutable_t();
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(v.size()));
  for (auto x : v) t->add_int64_data(x);
  return n;
}

onnx::NodeProto tlNode(const std::string& op, const std::string& base, const std::vector<std::string>& inputs,
                       const std::string& output) {
  onnx::NodeProto n;
  n.set_name(base + "/tl." + op);
  n.set_op_type(op);
  n.set_domain("tl");
  for (const auto& i : inputs) n.add_input(i);
  n.add_output(output);
  return n;
}

void applyRewrites(Model& model, std::vector<Rewrite> rewrites) {
  if (rewrites.empty()) return;
  auto* g = model.proto.mutable_graph();
  std::set<size_t> removed;
  std::map<size_t, Rewrite*> fused;  // at the last replaced node's place, so the file stays in order
  std::map<size_t, onnx::NodeProto*> edited;
  std::map<size_t, std::vector<Rewrite*>> early;
  for (auto& r : rewrites) {
    if (!r.early.empty()) early[r.earlyAt].push_back(&r);
    removed.insert(r.remove.begin(), r.remove.end());
    fused[r.remove.back()] = &r;
    for (auto& [i, node] : r.edits) edited[i] = &node;
  }
  google::protobuf::RepeatedPtrField<onnx::NodeProto> nodes;
  for (int i = 0; i < g->node_size(); ++i) {
    if (auto h = early.find(static_cast<size_t>(i)); h != early.end())
      for (Rewrite* r : h->second)
        for (auto& b : r->early) *nodes.Add() = std::move(b);
    auto f = fused.find(static_cast<size_t>(i));
    auto e = edited.find(static_cast<size_t>(i));
    if (f != fused.end()) {
      for (auto& b : f->second->before) *nodes.Add() = std::move(b);
      *nodes.Add() = std::move(f->second->fused);
    } else if (e != edited.end()) {
      *nodes.Add() = std::move(*e->second);
    } else if (!removed.count(static_cast<size_t>(i))) {
      *nodes.Add() = g->node(i);
    }
  }
  g->mutable_node()->Swap(&nodes);
  for (const auto& o : model.proto.opset_import())
    if (o.domain() == "tl") return;
  auto* o = model.proto.add_opset_import();
  o->set_domain("tl");
  o->set_version(1);
}

void absorb(PassResult& into, const PassResult& more) {
  into.rewrites += more.rewrites;
  into.nearMisses.insert(into.nearMisses.end(), more.nearMisses.begin(), more.nearMisses.end());
}

namespace {

// Why a match may not be rewritten though its pattern holds: a node it removes makes a
// tensor that something outside the match still reads (or the graph outputs), and the
// rewrite does not make it again. "" when every such read is kept.
std::string dropsARead(const PatternContext& c, const Rewrite& r) {
  std::set<size_t> gone(r.remove.begin(), r.remove.end());
  std::map<size_t, const onnx::NodeProto*> edited;
  std::set<std::string> made(r.fused.output().begin(), r.fused.output().end());
  for (const auto& b : r.before) made.insert(b.output().begin(), b.output().end());
  for (const auto& b : r.early) made.insert(b.output().begin(), b.output().end());
  for (const auto& [i, n] : r.edits) {
    edited[i] = &n;
    made.insert(n.output().begin(), n.output().end());
  }
  for (size_t i : r.remove)
    for (const auto& t : c.graph.node(i).output()) {
      if (t.empty() || made.count(t)) continue;
      if (c.outputs.count(t)) return "'" + t + "', which it would remove, is a graph output";
      for (size_t reader : c.graph.consumers(t)) {
        if (gone.count(reader)) continue;
        const auto e = edited.find(reader);
        if (e != edited.end() && std::find(e->second->input().begin(), e->second->input().end(), t) == e->second->input().end())
          continue;
        return "'" + t + "', which it would remove, is also read by node '" + c.graph.nodeName(reader) + "'";
      }
    }
  return "";
}

}  // namespace

PassResult runPattern(Model& model, const char* anchor, PatternMatch match) {
  PassResult result;
  std::vector<Rewrite> rewrites;
  {
    Graph graph(model.proto.graph());
    const ShapeAnalysis analysis = inferShapes(model, graph);
    PatternContext c(model, graph, analysis);
    std::set<size_t> claimed;  // nodes an earlier match replaces: rewrites must share none
    for (size_t i = 0; i < graph.nodeCount(); ++i) {
      if (!isAnchor(graph.node(i), anchor)) continue;
      Rewrite r;
      std::string why = match(c, i, r);
      if (why.empty()) why = dropsARead(c, r);
      std::vector<size_t> touched = r.remove;
      for (const auto& e : r.edits) touched.push_back(e.first);
      for (size_t n : touched)
        if (why.empty() && claimed.count(n)) why = "node '" + graph.nodeName(n) + "' is in an earlier match (run the pass again)";
      if (why.empty()) {
        claimed.insert(touched.begin(), touched.end());
        if (!r.remove.empty()) rewrites.push_back(std::move(r));  // empty: not this pattern's start at all
      } else {
        result.nearMisses.push_back("node '" + graph.nodeName(i) + "' (" + anchor + "): " + why);
      }
    }
  }  // the graph views the proto: done with it before the rewrite
  result.rewrites = static_cast<int>(rewrites.size());
  applyRewrites(model, std::move(rewrites));
  return result;
}

}  // namespace tl
