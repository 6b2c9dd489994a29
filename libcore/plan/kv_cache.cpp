#include "plan/kv_cache.h"

#include <map>
#include <set>

#include "cli/error.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"

namespace tl {
namespace {

// A Concat along `axis` appending input `fresh` of `node` to graph input `past`: its
// output `present`. The exporters may pass the past through one-input Concats and
// Identities first: `through` is the first of those (-1: the node reads `past` itself).
struct Append {
  size_t node;
  std::string past, fresh, present;
  int64_t axis;
  int through = -1;
};

// The graph input behind `t` through one-input Concats and Identities, and the first node
// of that chain (-1 when `t` is the input).
std::string passedFrom(const Graph& g, std::string t, int* first) {
  *first = -1;
  for (int hops = 0; hops < 8; ++hops) {
    const int p = g.producer(t);
    if (p < 0) return t;
    const auto& n = g.node(static_cast<size_t>(p));
    if (!((isOp(&n, "Concat") || isOp(&n, "Identity")) && n.input_size() == 1)) return t;
    *first = p;
    t = n.input(0);
  }
  return t;
}

std::vector<Append> findAppends(const Graph& g, const ShapeAnalysis& a) {
  std::vector<Append> out;
  for (size_t i = 0; i < g.nodeCount(); ++i) {
    const auto& n = g.node(i);
    // (past, new, output) index triples of each appending node kind.
    std::vector<std::array<int, 3>> slots;
    if (isOp(&n, "Concat") && n.input_size() == 2) slots = {{0, 1, 0}};
    if ((isAnchor(n, "tl.Concat") || isAnchor(n, "tl.KvAppend")) && n.input_size() == 4 && n.output_size() == 2) slots = {{0, 1, 0}, {2, 3, 1}};
    if (isAnchor(n, "tl.KvAppend") && n.input_size() == 2) slots = {{0, 1, 0}};
    if (isAnchor(n, "tl.RoPE") && findAttr(n, "cache_axis") && n.input_size() == 7 && n.output_size() == 3) slots = {{4, 3, 1}, {5, 6, 2}};
    const char* axisAttr = isAnchor(n, "tl.RoPE") ? "cache_axis" : "axis";
    for (const auto& [p, f, o] : slots) {
      int through;
      const std::string past = passedFrom(g, n.input(p), &through);
      if (past.empty() || !a.tensors.count(past) || a.at(past).cls != TensorClass::Input) continue;
      int64_t axis = attrInt(n, axisAttr).value_or(0);
      if (axis < 0) axis += static_cast<int64_t>(a.at(past).dims.size());
      out.push_back({i, past, n.input(f), n.output(o), axis, through});
    }
  }
  return out;
}

bool onlyShapeReaders(const Graph& g, const ShapeAnalysis& a, const std::string& t, size_t except) {
  for (size_t r : g.consumers(t))
    if (r != except && a.nodeClass[r] == NodeClass::Tensor) return false;
  return true;
}

bool mentions(const ShapeAnalysis& a, const TensorShape& t, const std::string& symbol) {
  for (const auto& d : t.dims)
    if (a.symbols.resolve(d).symbols().count(symbol)) return true;
  if (t.value)
    for (const auto& v : *t.value)
      if (a.symbols.resolve(v).symbols().count(symbol)) return true;
  return false;
}

// A tl.RoPE that appends to in-place caches, with position ids, whose q and caches one
// tl.Attention alone reads: at decode that attention does the RoPE's work in its own
// launch (runtime/lower/attention.cpp), reading the RoPE's inputs, which the memory plan
// then keeps alive until it. Marked `in_attention = 1`, the decision both read.
void markRopesInAttention(Model& model, KvPlan& plan) {
  std::set<std::string> presents;
  for (const auto& p : plan.pairs) presents.insert(p.present);
  Graph g(model.proto.graph());
  std::vector<int> marked;
  for (size_t i = 0; i < g.nodeCount(); ++i) {
    const auto& r = g.node(i);
    if (!isAnchor(r, "tl.RoPE") || !findAttr(r, "cache_axis") || !attrInt(r, "positions").value_or(0) ||
        r.input_size() < 7 || r.output_size() < 3 || !presents.count(r.output(1)) || !presents.count(r.output(2)))
      continue;
    const auto& readers = g.consumers(r.output(0));
    if (readers.size() != 1) continue;
    const auto& a = g.node(readers[0]);
    if (isAnchor(a, "tl.Attention") && a.input_size() > 2 && a.input(0) == r.output(0) && a.input(1) == r.output(1) &&
        a.input(2) == r.output(2) && g.consumers(r.output(1)).size() == 1 && g.consumers(r.output(2)).size() == 1)
      marked.push_back(static_cast<int>(i));
  }
  for (int i : marked) {
    auto* n = model.proto.mutable_graph()->mutable_node(i);
    if (!attrInt(*n, "in_attention").value_or(0)) addAttr(*n, "in_attention", int64_t{1});
  }
  plan.ropesInAttention = static_cast<int>(marked.size());
}

// Why one model's attention kernels cannot read fp16 caches: a tl.Attention whose k or v
// is not an in-place cache ("" when every one reads them).
std::string attentionOffCache(const Graph& g, const ShapeAnalysis& a, const std::set<std::string>& presents) {
  for (size_t i = 0; i < g.nodeCount(); ++i) {
    const auto& n = g.node(i);
    if (a.nodeClass[i] != NodeClass::Tensor || !isAnchor(n, "tl.Attention")) continue;
    if (n.input_size() < 3 || !presents.count(n.input(1)) || !presents.count(n.input(2)))
      return "node '" + g.nodeName(i) + "' (tl.Attention) reads k or v that is no in-place cache";
  }
  return "";
}

}  // namespace

KvPlan planKvCache(Model& model, KvLayout layout, int64_t pad, std::optional<KvType> type) {
  if (pad < 1) throw Error("--pad must be at least 1", ExitCode::Usage);
  KvPlan plan;
  plan.layout = layout;
  std::set<size_t> appendNodes;
  {
    Graph g(model.proto.graph());
    const ShapeAnalysis a = inferShapes(model, g);
    std::set<std::string> outputs;
    for (const auto& o : g.proto().output()) outputs.insert(o.name());
    const auto appends = findAppends(g, a);
    SymExpr length;
    for (const auto& ap : appends) {
      const auto& pd = a.at(ap.past).dims;
      const std::string where = "node '" + g.nodeName(ap.node) + "' appends to input '" + ap.past + "'";
      if (!outputs.count(ap.present)) {
        // The cache output is made from the append by further nodes (GPT-J's TorchScript
        // export): the caches stay the model's own, copied each step, as in a plain run;
        // --pad and --kv-type, which need them in place, are refused.
        const std::string why = where + ", but its result '" + ap.present + "' is no graph output: tl-plan cannot match the cache to an output";
        if (pad > 1 || type) throw Error(why);
        KvPlan none;
        none.layout = layout;
        none.notInPlace = why;
        return none;
      }
      if (pd.size() != 4 || ap.axis != 2) throw Error(where + " along axis " + std::to_string(ap.axis) + " of " + str(pd) + ": tl-plan keeps caches [batch, heads, length, head size]");
      const SymExpr len = a.symbols.resolve(pd[2]);
      if (!len.isSymbol()) throw Error(where + " of length " + len.str() + ", not a symbol of its own");
      if (plan.pairs.empty()) length = len;
      if (len != length) throw Error(where + " of length " + len.str() + ", the other caches' being " + length.str());
      if (!a.symbols.resolve(pd[1]).isConst() || !a.symbols.resolve(pd[3]).isConst())
        throw Error(where + ": its heads and head size " + str(pd) + " are not constants");
      if (const int64_t D = *a.symbols.resolve(pd[3]).constValue(); type == KvType::Q8 && D % kKvQ8Block)
        throw Error("--kv-type q8 keeps blocks of " + std::to_string(kKvQ8Block) + " along a head, and cache input '" +
                    ap.past + "' " + str(pd) + " has heads of " + std::to_string(D) + " (plan with --kv-type f16)");
      if (ap.through >= 0 && plan.notInPlace.empty())
        plan.notInPlace = "input '" + ap.past + "' passes through node '" + g.nodeName(static_cast<size_t>(ap.through)) +
                          "' before its Concat (tl-fuse first)";
      if (!onlyShapeReaders(g, a, ap.past, ap.through >= 0 ? static_cast<size_t>(ap.through) : ap.node) && plan.notInPlace.empty())
        plan.notInPlace = "input '" + ap.past + "' is read by other nodes too";
      plan.pairs.push_back({ap.past, ap.present});
      appendNodes.insert(ap.node);
    }
    if (plan.pairs.empty()) {
      if (pad > 1) throw Error("--pad: the model has no KV cache (no graph input that a Concat appends to)");
      if (type) throw Error("--kv-type: the model has no KV cache (no graph input that a Concat appends to)");
      return plan;
    }
    plan.length = length.symbolName();
    std::set<std::string> pasts, presents;
    for (const auto& p : plan.pairs) {
      pasts.insert(p.past);
      presents.insert(p.present);
    }
    for (const auto& in : g.proto().input()) {
      const auto& t = a.at(in.name());
      if (t.cls == TensorClass::Input && isFloating(t.dtype) && !pasts.count(in.name()) && mentions(a, t, plan.length))
        throw Error("input '" + in.name() + "' " + str(t.dims) + " is sized by the cache length '" + plan.length +
                    "' but no Concat appending to it is a graph output: tl-plan cannot match it to an output");
    }
    // In place only when tl.Attention alone reads each appended cache, as [B, H, T, D].
    std::set<size_t> attentions;
    for (const auto& p : plan.pairs) {
      if (!plan.notInPlace.empty()) break;
      for (size_t r : g.consumers(p.present)) {
        if (a.nodeClass[r] != NodeClass::Tensor) continue;
        const auto& n = g.node(r);
        const bool asK = n.input_size() > 1 && n.input(1) == p.present && !attrInt(n, "k_bthd").value_or(0);
        const bool asV = n.input_size() > 2 && n.input(2) == p.present && !attrInt(n, "v_bthd").value_or(0);
        if (isAnchor(n, "tl.Attention") && (asK || asV) && n.input(0) != p.present) {
          attentions.insert(r);
          continue;
        }
        plan.notInPlace = "'" + p.present + "' is read by node '" + g.nodeName(r) + "' (" + n.op_type() +
                          "), not by tl.Attention alone (tl-fuse first)";
        break;
      }
    }
    if (!plan.notInPlace.empty()) {
      if (pad > 1) throw Error("--pad needs the cache in place, and " + plan.notInPlace);
      if (type && *type != KvType::F32)
        throw Error(std::string("--kv-type ") + kvTypeName(*type) + " needs the caches in place, and " + plan.notInPlace);
      return plan;
    }
    const std::string offCache = attentionOffCache(g, a, presents);
    if (type && *type != KvType::F32 && !offCache.empty())
      throw Error(std::string("--kv-type ") + kvTypeName(*type) + ": " + offCache +
                  " (one model's attention kernels read one element type; plan with --kv-type f32)");
    plan.type = type ? *type : offCache.empty() ? KvType::F16 : KvType::F32;
    if (!type) plan.typeWhy = offCache;
    if (pad > 1) {
      // Padded keys must be hidden, and nothing but the caches' appends and readers may
      // depend on the cache length: the causal mask, at the cache's true length, hides them.
      std::set<std::string> masks;
      for (size_t r : attentions) {
        const auto& n = g.node(r);
        const std::string where = "--pad: node '" + g.nodeName(r) + "' (tl.Attention)";
        if (!attrInt(n, "causal").value_or(0) || (n.input_size() > 3 && !n.input(3).empty()))
          throw Error(where + " has no causal mask that hides the padding (tl-fuse's causal-mask did not prove one)");
        auto qd = a.at(n.input(0)).dims;
        const auto& kd = a.at(n.input(1)).dims;
        const SymExpr rows = a.symbols.resolve(qd.at(attrInt(n, "q_bshd").value_or(0) ? 1 : 2));
        if (a.symbols.resolve(kd.at(2)) - rows != length)
          throw Error(where + " reads " + kd.at(2).str() + " keys for " + rows.str() + " rows: its rows are not the new tokens");
        if (n.input_size() > 4 && !n.input(4).empty()) {
          const std::string& m = n.input(4);
          if (a.at(m).cls != TensorClass::Input) throw Error(where + " reads key mask '" + m + "', which is no graph input");
          masks.insert(m);
        }
      }
      std::set<std::string> allowed = masks;
      allowed.insert(pasts.begin(), pasts.end());
      allowed.insert(presents.begin(), presents.end());
      for (size_t i : g.topoOrder()) {
        if (a.nodeClass[i] != NodeClass::Tensor || appendNodes.count(i) || attentions.count(i)) continue;
        const auto& n = g.node(i);
        for (const auto* names : {&n.input(), &n.output()})
          for (const auto& t : *names)
            if (!t.empty() && !allowed.count(t) && mentions(a, a.at(t), plan.length))
              throw Error("--pad: node '" + g.nodeName(i) + "' (" + n.op_type() + ") reads or writes '" + t + "' " +
                          str(a.at(t).dims) + ", which depends on the cache length '" + plan.length +
                          "': a padded length would change it");
      }
      plan.keyMasks.assign(masks.begin(), masks.end());
      plan.pad = pad;
    }
  }
  // Plain and paired Concats become tl.KvAppend (a tl.RoPE with cache_axis appends already).
  auto* g = model.proto.mutable_graph();
  for (size_t i : appendNodes) {
    auto* n = g->mutable_node(static_cast<int>(i));
    if (n->op_type() == "RoPE" || isAnchor(*n, "tl.KvAppend")) continue;
    n->set_domain("tl");
    n->set_op_type("KvAppend");
    n->set_name(n->name() + "/tl.KvAppend");
    ++plan.appends;
  }
  markRopesInAttention(model, plan);
  bool imported = false;
  for (const auto& o : model.proto.opset_import()) imported = imported || o.domain() == "tl";
  if (!imported && plan.appends) {
    auto* o = model.proto.add_opset_import();
    o->set_domain("tl");
    o->set_version(1);
  }
  return plan;
}

std::string renderKvPlan(const KvPlan& plan, int64_t maxSeq) {
  if (plan.pairs.empty()) return plan.notInPlace.empty() ? "kv cache: none\n" : "kv cache: none in place (" + plan.notInPlace + ")\n";
  if (!plan.notInPlace.empty())
    return "kv cache: " + std::to_string(plan.pairs.size()) + " caches, copied each step as exported: " + plan.notInPlace + "\n";
  std::string s = "kv cache: " + std::to_string(plan.pairs.size()) + " caches in place, " + std::to_string(maxSeq) +
                  " tokens each, " + (plan.layout == KvLayout::Sequence ? "sequence first [T, B, H, D]" : "heads first [B, H, T, D]") +
                  "; " + std::to_string(plan.appends) + " Concats -> tl.KvAppend; length '" + plan.length + "'";
  if (plan.ropesInAttention)
    s += "; " + std::to_string(plan.ropesInAttention) + " tl.RoPEs done by their tl.Attention at decode (in_attention)";
  s += std::string("; ") + (plan.type == KvType::F16 ? "fp16" : plan.type == KvType::Q8 ? "8-bit (blocks of 32)" : "fp32") +
       " elements";
  if (!plan.typeWhy.empty()) s += " (not fp16: " + plan.typeWhy + ")";
  if (plan.pad > 1) {
    s += "; decode lengths in buckets of " + std::to_string(plan.pad);
    for (const auto& m : plan.keyMasks) s += ", key mask '" + m + "' padded";
  }
  return s + "\n";
}

void annotateKvPlan(onnx::ModelProto& proto, const KvPlan& plan) {
  if (plan.pairs.empty() || !plan.notInPlace.empty()) return;
  std::string pairs, masks;
  for (const auto& p : plan.pairs) pairs += p.past + "\t" + p.present + "\n";
  for (const auto& m : plan.keyMasks) masks += m + "\n";
  const std::map<std::string, std::string> keys = {
      {"tl.plan.kv", pairs},
      {"tl.plan.kv_options", std::string("layout=") + (plan.layout == KvLayout::Sequence ? "sequence" : "heads") +
                                 ",pad=" + std::to_string(plan.pad) + ",length=" + plan.length + ",type=" + kvTypeName(plan.type)},
      {"tl.plan.kv_masks", masks}};
  for (const auto& [k, v] : keys) {
    auto* p = proto.add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  }
}

}  // namespace tl
