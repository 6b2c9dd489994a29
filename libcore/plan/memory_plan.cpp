#include "plan/memory_plan.h"

#include <algorithm>
#include <functional>
#include <cstdio>
#include <map>
#include <set>
#include <unordered_map>

#include "cli/error.h"
#include "fuse/pattern.h"
#include "graph/attributes.h"
#include "ops/op_table.h"

namespace tl {
namespace {

struct Constraint {
  SymExpr expr;
  int64_t limit;
  std::string what;
};

// Whether a node or the graph's outputs read the tensor.
bool isRead(const Graph& graph, const std::string& name) {
  if (!graph.consumers(name).empty()) return true;
  const auto& outs = graph.proto().output();
  return std::any_of(outs.begin(), outs.end(), [&](const auto& o) { return o.name() == name; });
}

// The batch symbols, and the limits --max-seq puts on the rest: each symbolic input dim,
// and tl-shape's bounds. The batch leads the first input of rank 2 or more. An input
// whose later axes are all the batch's inputs' own (at least one of them a symbol) leads
// with a batch too: the dynamo exporter gives position_ids [s44, N] a symbol of its own,
// which broadcasts against input_ids' [s10, N]. Each is held at --batch; another input's
// leading symbol ([N, 8]) is a length like any other, whatever its name.
// `unread`: the symbols only inputs nothing reads have (an ALiBi model's position_ids, which
// an exporter keeps): they bound nothing and are no sequence symbols.
void bindingRegion(const Graph& graph, const ShapeAnalysis& analysis, const PlanOptions& opt,
                   std::set<std::string>* batch, std::vector<Constraint>* limits, std::set<std::string>* unread) {
  std::vector<const TensorShape*> read;
  std::vector<std::string> names;
  std::set<std::string> onRead;
  for (const auto& in : graph.proto().input()) {
    const auto& t = analysis.at(in.name());
    if (t.cls != TensorClass::Input) continue;
    const bool used = isRead(graph, in.name());
    for (const auto& d : t.dims)
      for (const auto& s : d.symbols()) (used ? onRead : *unread).insert(s);
    if (!used) continue;
    read.push_back(&t);
    names.push_back(in.name());
  }
  for (const auto& s : onRead) unread->erase(s);
  const auto leading = [](const TensorShape& t) {
    return t.dims.size() >= 2 && t.dims[0].isSymbol() ? t.dims[0].symbolName() : std::string();
  };
  std::string first;
  std::set<std::string> tokens;  // the later axes' symbols of the inputs that lead with it
  for (const auto* t : read)
    if (first.empty()) first = leading(*t);
  for (const auto* t : read)
    if (!first.empty() && leading(*t) == first)
      for (size_t axis = 1; axis < t->dims.size(); ++axis)
        for (const auto& s : t->dims[axis].symbols()) tokens.insert(s);
  if (!first.empty()) batch->insert(first);
  for (const auto* t : read) {
    const std::string b = leading(*t);
    if (b.empty() || tokens.count(b)) continue;
    bool same = true, symbolic = false;
    for (size_t axis = 1; axis < t->dims.size(); ++axis)
      for (const auto& s : t->dims[axis].symbols()) {
        symbolic = true;
        same = same && tokens.count(s);
      }
    if (same && symbolic) batch->insert(b);
  }
  for (size_t i = 0; i < read.size(); ++i)
    for (size_t axis = 0; axis < read[i]->dims.size(); ++axis) {
      const SymExpr& d = read[i]->dims[axis];
      if (d.isConst() || (axis == 0 && batch->count(leading(*read[i])))) continue;
      limits->push_back({d, opt.maxSeq, "input '" + names[i] + "' axis " + std::to_string(axis) + " (" + d.str() + ")"});
    }
  for (const auto& b : analysis.symbols.bounds()) limits->push_back({b.expr, b.limit, b.evidence});
}

bool within(const std::vector<Constraint>& limits, const SymbolValues& v) {
  for (const auto& c : limits)
    if (c.expr.evaluate(v) > c.limit) return false;
  return true;
}

// The largest value of `s` in [1, opt.maxSeq] keeping the others as bound (0 if none):
// limits grow with every symbol, so the feasible values are a prefix.
int64_t largest(const std::vector<Constraint>& limits, SymbolValues v, const std::string& s, int64_t cap) {
  int64_t lo = 0, hi = cap;
  while (lo < hi) {
    const int64_t mid = (lo + hi + 1) / 2;
    v[s] = mid;
    if (within(limits, v)) lo = mid; else hi = mid - 1;
  }
  return lo;
}

bool nondecreasing(const SymExpr& e, const std::string& s);

// A factor that is never negative and does not shrink as s grows: a symbol, min or max of
// such, such a floor-divided by a positive constant.
bool factorNondecreasing(const Factor& f, const std::string& s) {
  if (f.kind == FactorKind::Symbol) return true;
  const auto& a = *f.args;
  switch (f.kind) {
    case FactorKind::Min:
    case FactorKind::Max:
      return nondecreasing(a[0], s) && nondecreasing(a[1], s) && provablyNonNegative(a[0]) && provablyNonNegative(a[1]);
    case FactorKind::FloorDiv:
      return nondecreasing(a[0], s) && provablyNonNegative(a[0]) && a[1].isConst() && a[1].constValue() > 0;
    default:
      return false;
  }
}

// Whether e does not shrink as s grows, term by term: each term that involves s has a
// positive coefficient and factors that do not shrink (16*min(2048, N + past) grows with
// past, which the difference test cannot tell).
bool nondecreasing(const SymExpr& e, const std::string& s) {
  for (const auto& t : e.terms()) {
    bool involves = false;
    for (const auto& f : t.factors)
      involves = involves || (f.kind == FactorKind::Symbol ? f.name == s
                                                            : (*f.args)[0].symbols().count(s) || (*f.args)[1].symbols().count(s));
    if (!involves) continue;
    if (t.coef < 0) return false;
    for (const auto& f : t.factors)
      if (!factorNondecreasing(f, s)) return false;
  }
  return true;
}

bool growsWith(const SymExpr& e, const std::string& s) {
  return provablyNonNegative(e.substitute({{s, SymExpr::symbol(s) + 1}}) - e) || nondecreasing(e, s);
}

// a = b * p / q for constants p, q > 0, when the two expressions are proportional.
bool proportional(const SymExpr& a, const SymExpr& b, int64_t* p, int64_t* q) {
  if (a.terms().empty() || b.terms().empty()) return false;
  *p = a.terms()[0].coef;
  *q = b.terms()[0].coef;
  return *p > 0 && *q > 0 && a * *q == b * *p;
}

// Whether a and b are provably ordered, and so the larger: -1 when a < b everywhere,
// 1 when a >= b, 0 when not provable.
int order(const SymExpr& a, const SymExpr& b) {
  if (auto d = constDifference(a, b)) return *d >= 0 ? 1 : -1;
  int64_t p, q;
  if (proportional(a, b, &p, &q)) return p >= q ? 1 : -1;
  return 0;
}

SymExpr aligned(const SymExpr& bytes, int64_t align) { return ceilDiv(bytes, align) * align; }

std::string mib(int64_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(bytes) / (1 << 20));
  return buf;
}

std::string bindingText(const SymbolValues& v) {
  std::string s;
  for (const auto& [k, x] : v) s += (s.empty() ? "" : ",") + k + "=" + std::to_string(x);
  return s;
}

}  // namespace

MemoryPlan planMemory(const Graph& graph, const ShapeAnalysis& analysis, const PlanOptions& opt) {
  if (opt.maxSeq < 1) throw Error("--max-seq must be at least 1", ExitCode::Usage);
  if (opt.batch < 1) throw Error("--batch must be at least 1", ExitCode::Usage);
  if (opt.align < 1 || (opt.align & (opt.align - 1))) throw Error("--align must be a power of two", ExitCode::Usage);
  MemoryPlan plan;
  plan.options = opt;

  // The region of bindings: batch fixed, the other symbols as long as the inputs allow.
  std::set<std::string> batch, unread;
  std::vector<Constraint> limits;
  bindingRegion(graph, analysis, opt, &batch, &limits, &unread);
  // The plan is for one batch size: sizes that differ only in it become comparable.
  std::map<std::string, SymExpr> fixed;
  for (const auto& b : batch) fixed[b] = SymExpr(opt.batch);

  // Lifetimes over the schedule of tensor-computing nodes.
  std::unordered_map<std::string, std::string> root;  // a view's output -> the tensor it reads
  std::unordered_map<std::string, int> index;          // planned tensor -> position in plan.tensors
  // Transpose, Expand and Slice are views at some bindings (isRunView: a decode step's
  // [B, 1, H, D] -> [B, H, 1, D]); there their readers read the input's buffer, so the
  // input lives as long as the output. They keep a buffer of their own for the others.
  // A decode attention may do the work of the tl.RoPE that appends to its in-place caches
  // (the RoPE's in_attention, runtime/lower/attention.cpp), reading the RoPE's q, k and v
  // inputs where it would read q's rotation: those live as long as that output.
  std::unordered_map<std::string, std::vector<std::string>> readsThrough;
  std::function<void(const std::string&, int)> read = [&](const std::string& t, int at) {
    auto r = root.find(t);
    const std::string& name = r == root.end() ? t : r->second;
    if (auto it = index.find(name); it != index.end()) plan.tensors[it->second].last = at;
    if (auto via = readsThrough.find(name); via != readsThrough.end())
      for (const auto& in : via->second) read(in, at);
  };
  int step = 0;
  for (size_t i : graph.topoOrder()) {
    if (analysis.nodeClass[i] != NodeClass::Tensor) continue;
    const auto& n = graph.node(i);
    for (const auto& in : n.input())
      if (!in.empty()) read(in, step);
    if (const OpInfo* op = findOp(n); op && op->view == View::AtBinding && n.output_size() == 1)
      readsThrough[n.output(0)] = {n.input(0)};
    if (attrInt(n, "in_attention").value_or(0) && n.input_size() >= 7)  // tl-plan's mark (kv_cache.h)
      readsThrough[n.output(0)] = {n.input(0), n.input(3), n.input(6)};
    if (isView(n, analysis.dtypeOf())) {
      auto r = root.find(n.input(0));
      root[n.output(0)] = r == root.end() ? n.input(0) : r->second;
    } else {
      for (const auto& out : n.output()) {
        if (out.empty() || opt.outside.count(out)) continue;
        const auto& t = analysis.at(out);
        const int64_t bits = static_cast<int64_t>(dtypeBits(t.dtype));
        if (bits == 0) throw Error("tensor '" + out + "' has dtype " + dtypeName(t.dtype) + ", which has no size");
        index[out] = static_cast<int>(plan.tensors.size());
        const SymExpr count = product(t.dims).substitute(fixed);
        plan.tensors.push_back({out, bits % 8 ? ceilDiv(count * bits, 8) : count * (bits / 8), step, step, -1});
      }
    }
    ++step;
  }
  for (const auto& o : graph.proto().output()) read(o.name(), step);  // read after the run

  std::vector<std::string> seq;  // the free symbols less the batch and the unread inputs' own
  for (const auto& s : analysis.symbols.freeSymbols())
    if (!batch.count(s) && !unread.count(s)) seq.push_back(s);
  if (seq.size() > 2)
    throw Error("the model has " + std::to_string(seq.size()) + " sequence symbols; tl-plan bounds at most two");
  SymbolValues base;
  for (const auto& b : batch) base[b] = opt.batch;
  for (const auto& s : seq) base[s] = 1;
  for (const auto& c : limits)
    if (c.expr.evaluate(base) > c.limit)
      throw Error(c.what + " is " + std::to_string(c.expr.evaluate(base)) + " at its shortest, over the limit of " +
                  std::to_string(c.limit) + (c.limit == opt.maxSeq ? " (--max-seq)" : ""));

  // Greedy sharing in schedule order: a tensor takes a free buffer whose size is provably
  // related to its own, the one that grows least (ranked at a middle binding).
  SymbolValues mid = base;
  for (const auto& s : seq) mid[s] = std::max<int64_t>(1, largest(limits, base, s, opt.maxSeq) / 2);
  std::vector<int> lastUse;
  for (size_t t = 0; t < plan.tensors.size(); ++t) {
    PlannedTensor& pt = plan.tensors[t];
    int best = -1;
    int64_t bestGrowth = 0;
    for (size_t b = 0; b < plan.buffers.size(); ++b) {
      if (lastUse[b] >= pt.first) continue;
      const int o = order(plan.buffers[b].bytes, pt.bytes);
      if (o == 0) continue;
      const int64_t growth = o > 0 ? 0 : (pt.bytes - plan.buffers[b].bytes).evaluate(mid);
      const int64_t waste = o > 0 ? (plan.buffers[b].bytes - pt.bytes).evaluate(mid) : 0;
      const int64_t cost = growth * 4 + waste;  // growing costs every other tensor there too
      if (best < 0 || cost < bestGrowth) {
        best = static_cast<int>(b);
        bestGrowth = cost;
      }
    }
    if (best < 0) {
      best = static_cast<int>(plan.buffers.size());
      plan.buffers.push_back({pt.bytes, SymExpr(0), {}});
      lastUse.push_back(pt.last);
    } else if (order(plan.buffers[best].bytes, pt.bytes) < 0) {
      plan.buffers[best].bytes = pt.bytes;
    }
    lastUse[best] = std::max(lastUse[best], pt.last);
    plan.buffers[best].tensors.push_back(static_cast<int>(t));
    pt.buffer = best;
  }
  SymExpr offset(0);
  for (auto& b : plan.buffers) {
    b.offset = offset;
    offset = offset + aligned(b.bytes, opt.align);
    plan.arena = plan.arena + b.bytes;
  }
  for (const auto& t : plan.tensors) plan.naive = plan.naive + t.bytes;

  // The largest arena within --max-seq: every length of the first symbol, each with the
  // longest second symbol the limits allow (the sizes grow with it: checked). The limits
  // grow with every symbol (checked), so the lengths they allow are a prefix.
  for (const auto& s : seq)
    for (const auto& c : limits)
      if (!growsWith(c.expr, s)) throw Error(c.what + " does not provably grow with " + s);
  if (seq.size() == 2) {
    std::vector<const SymExpr*> sizes{&plan.arena, &plan.naive};
    for (const auto& b : plan.buffers) sizes.push_back(&b.bytes);
    for (const SymExpr* e : sizes)
      if (!growsWith(*e, seq[1])) throw Error("the activations' size " + e->str() + " does not provably grow with " + seq[1]);
  }
  auto consider = [&](const SymbolValues& v) {
    const int64_t a = plan.arena.evaluate(v);
    if (plan.worst.empty() || a > plan.arena.evaluate(plan.worst)) plan.worst = v;
    plan.naiveBytes = std::max(plan.naiveBytes, plan.naive.evaluate(v));
    for (auto& b : plan.buffers) b.capacity = std::max(b.capacity, aligned(b.bytes, opt.align).evaluate(v));
  };
  if (seq.empty()) {
    consider(base);
  } else if (seq.size() == 1) {
    for (int64_t x = 1, top = largest(limits, base, seq[0], opt.maxSeq); x <= top; ++x) {
      SymbolValues v = base;
      v[seq[0]] = x;
      consider(v);
    }
  } else {
    for (int64_t x = 1, top = largest(limits, base, seq[0], opt.maxSeq); x <= top; ++x) {
      SymbolValues v = base;
      v[seq[0]] = x;
      v[seq[1]] = largest(limits, v, seq[1], opt.maxSeq);  // >= 1: (x, 1) is within, as (top, 1) is
      consider(v);
    }
  }
  for (const auto& b : plan.buffers) {
    plan.arenaBytes += aligned(b.bytes, opt.align).evaluate(plan.worst);
    plan.allocated += b.capacity;
  }
  return plan;
}

std::string renderPlan(const MemoryPlan& plan, const std::string& title) {
  std::string out = "# " + title + "\n# max-seq " + std::to_string(plan.options.maxSeq) + ", batch " +
                    std::to_string(plan.options.batch) + ", align " + std::to_string(plan.options.align) + " bytes\n";
  out += "# tensor  buffer  bytes  live (schedule positions)\n";
  for (const auto& t : plan.tensors)
    out += t.name + "  b" + std::to_string(t.buffer) + "  " + t.bytes.str() + "  [" + std::to_string(t.first) + ", " +
           std::to_string(t.last) + "]\n";
  out += "# buffer  offset  bytes  capacity  tensors\n";
  for (size_t b = 0; b < plan.buffers.size(); ++b)
    out += "b" + std::to_string(b) + "  " + plan.buffers[b].offset.str() + "  " + plan.buffers[b].bytes.str() + "  " +
           std::to_string(plan.buffers[b].capacity) + "  " + std::to_string(plan.buffers[b].tensors.size()) + "\n";
  const std::string at = bindingText(plan.worst);
  out += "tensors: " + std::to_string(plan.tensors.size()) + " in " + std::to_string(plan.buffers.size()) + " buffers\n";
  out += "arena: " + plan.arena.str() + " bytes (+ alignment)\n";
  out += "naive: " + plan.naive.str() + " bytes\n";
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%.3f", plan.naiveBytes ? static_cast<double>(plan.arenaBytes) / plan.naiveBytes : 0.0);
  out += "at max-seq (" + at + "): arena " + mib(plan.arenaBytes) + ", naive " + mib(plan.naiveBytes) +
         " (largest over the lengths), arena/naive " + ratio + "\n";
  out += "allocated at start: " + mib(plan.allocated) + " (each buffer at its largest)\n";
  return out;
}

void annotatePlan(onnx::ModelProto& proto, const MemoryPlan& plan) {
  std::map<std::string, std::string> keys;
  keys["tl.plan.version"] = "1";
  keys["tl.plan.options"] = "max_seq=" + std::to_string(plan.options.maxSeq) + ",batch=" +
                            std::to_string(plan.options.batch) + ",align=" + std::to_string(plan.options.align);
  std::string tensors, buffers;
  for (const auto& t : plan.tensors) tensors += t.name + "\t" + std::to_string(t.buffer) + "\n";
  for (const auto& b : plan.buffers)
    buffers += b.offset.str() + "\t" + b.bytes.str() + "\t" + std::to_string(b.capacity) + "\n";
  keys["tl.plan.tensors"] = tensors;
  keys["tl.plan.buffers"] = buffers;
  keys["tl.plan.arena"] = plan.arena.str();
  keys["tl.plan.peak"] = std::to_string(plan.arenaBytes) + "\t" + bindingText(plan.worst);
  auto* props = proto.mutable_metadata_props();
  for (int i = props->size() - 1; i >= 0; --i)
    if (props->Get(i).key().rfind("tl.plan.", 0) == 0) props->DeleteSubrange(i, 1);
  for (const auto& [k, v] : keys) {
    auto* p = proto.add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  }
}

}  // namespace tl
