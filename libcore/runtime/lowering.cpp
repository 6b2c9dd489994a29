// Lowering: each tensor-computing ONNX node becomes one or more kernel launches,
// with shapes, strides and offsets computed on the host from the run's binding.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <optional>

#include "cli/error.h"
#include "graph/attributes.h"
#include "graph/tl_ops.h"
#include "runtime/executor.h"
#include "tensor/tensor.h"

namespace tl {
namespace {

using Dims = std::vector<int64_t>;

// Rank-8 vectors, padded on the left (dims with 1, strides with 0).
cl_int8 pad8(const Dims& v, int64_t fill) {
  if (v.size() > 8) throw Error("rank " + std::to_string(v.size()) + " is over the kernels' limit of 8", ExitCode::BadInput);
  cl_int8 r;
  for (int i = 0; i < 8; ++i) r.s[i] = static_cast<cl_int>(fill);
  for (size_t i = 0; i < v.size(); ++i) r.s[8 - v.size() + i] = static_cast<cl_int>(v[i]);
  return r;
}

// Merges adjacent dims that every operand walks contiguously (and drops dims of 1),
// so kernels divide through as few dims as possible: an elementwise op on
// same-shaped tensors becomes rank 1 whatever its rank was.
void collapse(Dims& dims, std::vector<Dims*> strides) {
  Dims d;
  std::vector<Dims> s(strides.size());
  for (size_t i = 0; i < dims.size(); ++i) {
    if (dims[i] == 1) continue;
    bool merge = !d.empty();
    for (size_t j = 0; j < strides.size() && merge; ++j) merge = s[j].back() == (*strides[j])[i] * dims[i];
    if (merge) {
      d.back() *= dims[i];
      for (size_t j = 0; j < strides.size(); ++j) s[j].back() = (*strides[j])[i];
    } else {
      d.push_back(dims[i]);
      for (size_t j = 0; j < strides.size(); ++j) s[j].push_back((*strides[j])[i]);
    }
  }
  dims = d;
  for (size_t j = 0; j < strides.size(); ++j) *strides[j] = s[j];
}

// Strides that read `in` broadcast to `out` (numpy rules): 0 along broadcast dims.
Dims broadcastStrides(const Dims& in, const Dims& out) {
  Dims s(out.size(), 0);
  Dims cs = contiguousStrides(in);
  const size_t off = out.size() - in.size();
  for (size_t i = 0; i < in.size(); ++i) s[off + i] = in[i] == 1 ? 0 : cs[i];
  return s;
}

const char* typeSuffix(DType t) {
  switch (t) {
    case DType::Float: return "f32";
    case DType::Int64: return "i64";
    case DType::Int32: return "i32";
    case DType::Bool: case DType::UInt8: return "u8";
    default: throw Error(std::string("no kernels for dtype ") + dtypeName(t), ExitCode::BadInput);
  }
}

const char* sizeSuffix(DType t) {
  switch (dtypeBits(t)) {
    case 8: return "b8";
    case 32: return "b32";
    case 64: return "b64";
    default: throw Error(std::string("no copy kernel for dtype ") + dtypeName(t), ExitCode::BadInput);
  }
}

std::string lowerCase(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// One launch: a kernel, its arguments, and a 1-D size (or a 3-D tiled one).
class Launch {
 public:
  // A missing kernel throws, dry or not. A run sets the arguments of its launch site's own
  // kernel object (Executor::siteKernel), which replays keep.
  Launch(Executor& ex, size_t node, const std::string& kernel)
      : ex_(ex), node_(node), kernel_(ex.kernels().get(kernel)), name_(kernel) {
    openSite();
  }
  Launch(Executor& ex, size_t node, const std::string& name, cl_kernel kernel)
      : ex_(ex), node_(node), kernel_(kernel), name_(name) {
    openSite();
  }

  Launch& mem(const std::string& tensor) {
    cl_mem m = ex_.dryRun() ? nullptr : ex_.operand(tensor);
    return set(sizeof(m), &m);
  }
  Launch& nullMem() {
    cl_mem m = nullptr;
    return set(sizeof(m), &m);
  }
  Launch& i32(int64_t v) {
    cl_int x = static_cast<cl_int>(v);
    return set(sizeof(x), &x);
  }
  Launch& i64(int64_t v) {
    cl_long x = v;
    return set(sizeof(x), &x);
  }
  Launch& f32(float v) { return set(sizeof(v), &v); }
  Launch& vec(const cl_int8& v) { return set(sizeof(v), &v); }
  Launch& raw(const void* p, size_t n) { return set(n, p); }

  // A fixed work-group size: drivers that specialize kernels per launch geometry
  // (PoCL compiles one per local size) then build each kernel once, not per shape.
  void run1d(int64_t n) {
    const size_t local[3] = {64, 1, 1};
    run({static_cast<size_t>(n), 1, 1}, local, 1);
  }
  void run3d(size_t gx, size_t gy, size_t gz, size_t lx, size_t ly) {
    const size_t local[3] = {lx, ly, 1};
    run({gx, gy, gz}, local, 3);
  }
  // The launch writes this many bytes of an in-place cache (Executor::cacheTraffic).
  Launch& writesCache(int64_t bytes) {
    cacheBytes_ = bytes;
    return *this;
  }

 private:
  std::string where() const { return "kernel " + name_ + ", node '" + ex_.graph().nodeName(node_) + "'"; }
  void openSite() {
    if (!ex_.dryRun()) kernel_ = ex_.siteKernel(name_, &site_);
  }
  Launch& set(size_t size, const void* p) {
    if (!ex_.dryRun()) {
      const cl_int err = clSetKernelArg(kernel_, index_, size, p);
      if (err != CL_SUCCESS) clCheck(err, "clSetKernelArg", where());  // where() only when it fails
    }
    ++index_;
    return *this;
  }
  void run(std::array<size_t, 3> global, const size_t* local, cl_uint dims) {
    if (ex_.dryRun() || global[0] == 0 || global[1] == 0 || global[2] == 0) return;
    if (dims == 1) global[0] = (global[0] + 63) / 64 * 64;
    ex_.launchSite(site_, dims, global.data(), local, cacheBytes_);
  }

  Executor& ex_;
  size_t node_;
  cl_kernel kernel_;
  std::string name_;
  size_t site_ = 0;
  cl_uint index_ = 0;
  int64_t cacheBytes_ = 0;
};

// An axis attribute as an index: negative ones count from the end.
size_t axisIndex(int64_t a, size_t rank) { return static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(rank) : a); }

struct Node {
  Executor& ex;
  size_t index;
  const onnx::NodeProto& proto;

  const std::string& in(size_t i) const { return proto.input(static_cast<int>(i)); }
  const std::string& out(size_t i) const { return proto.output(static_cast<int>(i)); }
  bool hasIn(size_t i) const { return static_cast<int>(i) < proto.input_size() && !in(i).empty(); }
  bool hasOut(size_t i) const { return static_cast<int>(i) < proto.output_size() && !out(i).empty(); }
  const Dims& shape(const std::string& t) const { return ex.shape(t); }
  DType dtype(const std::string& t) const { return ex.analysis().at(t).dtype; }
  Launch launch(const std::string& kernel) const { return Launch(ex, index, kernel); }
  int64_t attrInt(const char* name, int64_t fallback) const { return tl::attrInt(proto, name).value_or(fallback); }
  float attrFloat(const char* name, float fallback) const { return tl::attrFloat(proto, name).value_or(fallback); }
  std::string attrString(const char* name, const std::string& fallback) const {
    return tl::attrString(proto, name).value_or(fallback);
  }
  const onnx::AttributeProto* attr(const char* name) const { return findAttr(proto, name); }
  size_t axis(int64_t a, size_t rank) const { return axisIndex(a, rank); }
};

// out[oo + os . c] = in[io + is . c] for c over dims.
void copy(const Node& n, const std::string& src, const std::string& dst, Dims dims, int64_t inOff,
          Dims inStrides, int64_t outOff, Dims outStrides) {
  collapse(dims, {&inStrides, &outStrides});
  n.launch(std::string("copy_") + sizeSuffix(n.dtype(src)))
      .mem(src)
      .mem(dst)
      .i32(elementCount(dims))
      .vec(pad8(dims, 1))
      .i32(inOff)
      .vec(pad8(inStrides, 0))
      .i32(outOff)
      .vec(pad8(outStrides, 0))
      .run1d(elementCount(dims));
}

void binary(const Node& n, const std::string& op, const std::string& a, const std::string& b, const std::string& dst) {
  Dims o = n.shape(dst);
  const int64_t c = elementCount(o);
  Dims sa = broadcastStrides(n.shape(a), o), sb = broadcastStrides(n.shape(b), o), so = contiguousStrides(o);
  collapse(o, {&sa, &sb, &so});
  n.launch(op + "_" + typeSuffix(n.dtype(a)))
      .mem(a)
      .mem(b)
      .mem(dst)
      .i32(c)
      .vec(pad8(o, 1))
      .vec(pad8(sa, 0))
      .vec(pad8(sb, 0))
      .run1d(c);
}

void binaryOp(const Node& n) {
  if (n.proto.input_size() != 2) throw Error("only two inputs are supported", ExitCode::BadInput);
  std::string op = lowerCase(n.proto.op_type());
  if (op == "mod" && n.attrInt("fmod", 0)) throw Error("Mod with fmod=1 has no kernel", ExitCode::BadInput);
  binary(n, op, n.in(0), n.in(1), n.out(0));
}

void unary(const Node& n, const std::string& op) {
  int64_t c = elementCount(n.shape(n.out(0)));
  n.launch(op + "_" + typeSuffix(n.dtype(n.in(0)))).mem(n.in(0)).mem(n.out(0)).i32(c).run1d(c);
}

void unaryOp(const Node& n) {
  std::string op = lowerCase(n.proto.op_type());
  if (op == "dropout") throw Error("Dropout's mask output has no kernel", ExitCode::BadInput);  // without one it is a view
  if (op == "gelu" && n.attrString("approximate", "none") == "tanh") op = "gelutanh";
  if (op == "isinf" && (!n.attrInt("detect_positive", 1) || !n.attrInt("detect_negative", 1)))
    throw Error("IsInf detecting one sign only has no kernel", ExitCode::BadInput);
  unary(n, op);
}

void castOp(const Node& n) {
  DType from = n.dtype(n.in(0)), to = n.dtype(n.out(0));
  int64_t c = elementCount(n.shape(n.out(0)));
  n.launch(std::string("cast_") + typeSuffix(from) + "_" + typeSuffix(to)).mem(n.in(0)).mem(n.out(0)).i32(c).run1d(c);
}

void whereOp(const Node& n) {
  Dims o = n.shape(n.out(0));
  const int64_t c = elementCount(o);
  Dims sc = broadcastStrides(n.shape(n.in(0)), o), sx = broadcastStrides(n.shape(n.in(1)), o),
       sy = broadcastStrides(n.shape(n.in(2)), o), so = contiguousStrides(o);
  collapse(o, {&sc, &sx, &sy, &so});
  n.launch(std::string("where_") + typeSuffix(n.dtype(n.in(1))))
      .mem(n.in(0))
      .mem(n.in(1))
      .mem(n.in(2))
      .mem(n.out(0))
      .i32(c)
      .vec(pad8(o, 1))
      .vec(pad8(sc, 0))
      .vec(pad8(sx, 0))
      .vec(pad8(sy, 0))
      .run1d(c);
}

void transposeOp(const Node& n) {
  const Dims& in = n.shape(n.in(0));
  Dims perm;
  if (const auto* p = n.attr("perm")) {
    perm.assign(p->ints().begin(), p->ints().end());
  } else {
    for (size_t i = in.size(); i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  Dims is = contiguousStrides(in), strides;
  for (auto p : perm) strides.push_back(is[n.axis(p, in.size())]);
  const Dims& o = n.shape(n.out(0));
  copy(n, n.in(0), n.out(0), o, 0, strides, 0, contiguousStrides(o));
}

void expandOp(const Node& n) {
  const Dims& o = n.shape(n.out(0));
  copy(n, n.in(0), n.out(0), o, 0, broadcastStrides(n.shape(n.in(0)), o), 0, contiguousStrides(o));
}

// A Slice at this run's shapes: the input element its first output element reads, and
// the input strides of its output axes.
int64_t sliceLayout(const onnx::NodeProto& n, const Executor& ex, Dims* strides) {
  const Dims& in = ex.shape(n.input(0));
  const Dims& starts = ex.value(n.input(1));
  const auto optional = [&](int i) { return n.input_size() > i && !n.input(i).empty() ? ex.value(n.input(i)) : Dims{}; };
  Dims axes = optional(3), steps = optional(4);
  if (axes.empty())
    for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
  if (steps.empty()) steps.assign(starts.size(), 1);
  Dims first(in.size(), 0), step(in.size(), 1);
  for (size_t i = 0; i < starts.size(); ++i) {
    const size_t k = axisIndex(axes[i], in.size());
    int64_t d = in[k], s = starts[i];
    if (s < 0) s += d;
    s = steps[i] > 0 ? std::clamp<int64_t>(s, 0, d) : std::clamp<int64_t>(s, 0, d - 1);
    first[k] = s;
    step[k] = steps[i];
  }
  const Dims is = contiguousStrides(in);
  strides->assign(in.size(), 0);
  int64_t off = 0;
  for (size_t k = 0; k < in.size(); ++k) {
    off += first[k] * is[k];
    (*strides)[k] = step[k] * is[k];
  }
  return off;
}

void sliceOp(const Node& n) {
  Dims strides;
  const int64_t off = sliceLayout(n.proto, n.ex, &strides);
  const Dims& o = n.shape(n.out(0));
  copy(n, n.in(0), n.out(0), o, off, strides, 0, contiguousStrides(o));
}

// Up to four inputs per launch (one for a KV cache's Concat(past, new)).
void concatOp(const Node& n) {
  const Dims& o = n.shape(n.out(0));
  const size_t k = n.axis(n.attrInt("axis", 0), o.size());
  int64_t inner = 1;
  for (size_t i = k + 1; i < o.size(); ++i) inner *= o[i];
  const int64_t outer = elementCount(o) / std::max<int64_t>(o[k] * inner, 1);
  std::vector<std::string> ins;
  for (int i = 0; i < n.proto.input_size(); ++i)
    if (!n.in(i).empty() && n.shape(n.in(i))[k] > 0) ins.push_back(n.in(i));
  int64_t at = 0;
  for (size_t first = 0; first < ins.size(); first += 4) {
    Launch l = n.launch(std::string("concat_") + sizeSuffix(n.dtype(n.out(0))));
    Dims rows;
    for (size_t j = first; j < first + 4; ++j) {
      if (j < ins.size()) {
        l.mem(ins[j]);
        rows.push_back(n.shape(ins[j])[k]);
      } else {
        l.nullMem();
        rows.push_back(0);
      }
    }
    const int64_t chunk = rows[0] + rows[1] + rows[2] + rows[3], count = outer * chunk * inner;
    l.mem(n.out(0)).i32(count).i32(inner).i32(o[k]).i32(at).i32(rows[0]).i32(rows[1]).i32(rows[2]).i32(rows[3]);
    l.run1d(count);
    at += chunk;
  }
}

// tl.Concat (docs/ops.md): two two-input Concats along one axis, in one launch.
void concatPairOp(const Node& n) {
  const size_t k = n.axis(n.attrInt("axis", 0), n.shape(n.out(0)).size());
  Launch l = n.launch(std::string("concat_pair_") + sizeSuffix(n.dtype(n.out(0))));
  int64_t total = 0;
  for (size_t j = 0; j < 2; ++j) {
    const Dims& o = n.shape(n.out(j));
    int64_t inner = 1;
    for (size_t i = k + 1; i < o.size(); ++i) inner *= o[i];
    const int64_t count = elementCount(o);
    l.mem(n.in(2 * j)).mem(n.in(2 * j + 1)).mem(n.out(j)).i32(count).i32(inner).i32(o[k]).i32(n.shape(n.in(2 * j))[k]);
    total += count;
  }
  l.run1d(total);
}

void splitOp(const Node& n) {
  const Dims& in = n.shape(n.in(0));
  size_t k = n.axis(n.attrInt("axis", 0), in.size());
  Dims is = contiguousStrides(in);
  int64_t at = 0;
  for (int i = 0; i < n.proto.output_size(); ++i) {
    if (n.out(i).empty()) continue;
    const Dims& d = n.shape(n.out(i));
    copy(n, n.in(0), n.out(i), d, at * is[k], is, 0, contiguousStrides(d));
    at += d[k];
  }
}

void gatherOp(const Node& n) {
  if (n.dtype(n.in(1)) != DType::Int64) throw Error("Gather indices must be int64", ExitCode::BadInput);
  const Dims& data = n.shape(n.in(0));
  size_t k = n.axis(n.attrInt("axis", 0), data.size());
  int64_t inner = 1;
  for (size_t i = k + 1; i < data.size(); ++i) inner *= data[i];
  int64_t c = elementCount(n.shape(n.out(0)));
  n.launch(std::string("gather_") + sizeSuffix(n.dtype(n.in(0))))
      .mem(n.in(0))
      .mem(n.in(1))
      .mem(n.out(0))
      .i32(c)
      .i32(elementCount(n.shape(n.in(1))))
      .i32(data[k])
      .i32(inner)
      .run1d(c);
}

void gatherNDOp(const Node& n) {
  if (n.attrInt("batch_dims", 0) != 0) throw Error("GatherND with batch_dims has no kernel", ExitCode::BadInput);
  if (n.dtype(n.in(1)) != DType::Int64) throw Error("GatherND indices must be int64", ExitCode::BadInput);
  const Dims& data = n.shape(n.in(0));
  const Dims& idx = n.shape(n.in(1));
  int64_t m = idx.back();
  int64_t inner = 1;
  for (size_t i = static_cast<size_t>(m); i < data.size(); ++i) inner *= data[i];
  Dims ds = contiguousStrides(data);
  Dims head(data.begin(), data.begin() + m), headStrides(ds.begin(), ds.begin() + m);
  // The kernel reads dims[j], strides[j] for j < m: pad on the right here.
  cl_int8 dv, sv;
  for (int i = 0; i < 8; ++i) {
    dv.s[i] = i < m ? static_cast<cl_int>(head[i]) : 1;
    sv.s[i] = i < m ? static_cast<cl_int>(headStrides[i]) : 0;
  }
  int64_t c = elementCount(n.shape(n.out(0)));
  n.launch(std::string("gathernd_") + sizeSuffix(n.dtype(n.in(0))))
      .mem(n.in(0))
      .mem(n.in(1))
      .mem(n.out(0))
      .i32(c)
      .i32(m)
      .i32(inner)
      .vec(dv)
      .vec(sv)
      .run1d(c);
}

// The fused tl ops have float32 kernels only; any other input dtype is an error naming the op.
// Every input float32 but `integer` (-1: none), which must then be an integer type.
void requireFloatInputs(const Node& n, int integer = -1) {
  for (int i = 0; i < n.proto.input_size(); ++i) {
    if (!n.hasIn(static_cast<size_t>(i))) continue;
    const DType t = n.dtype(n.in(static_cast<size_t>(i)));
    if (i == integer ? !(isInteger(t) || t == DType::Bool) : t != DType::Float)
      throw Error("tl." + n.proto.op_type() + " has kernels for float32 only" +
                      (integer >= 0 ? " (and integers as input " + std::to_string(integer) + ")" : std::string()),
                  ExitCode::BadInput);
  }
}

// A (Q)MatMul's outputs and what its kernel adds as it stores them (kernels/common.cl's
// SPLIT_ARGS): the tensors C, C1, C2 with their widths (one output is the plain case),
// the bias and the residual ("" for none).
struct MatMulOut {
  std::vector<std::string> outs;
  Dims widths;
  std::string bias, residual;
};

void setOutputs(Launch& l, const MatMulOut& o) {
  l.mem(o.outs[0]);
  if (o.outs.size() > 1) l.mem(o.outs[1]); else l.nullMem();
  if (o.outs.size() > 2) l.mem(o.outs[2]); else l.nullMem();
  l.i32(o.widths[0]).i32(o.widths.size() > 1 ? o.widths[1] : 0);
  if (o.bias.empty()) l.nullMem(); else l.mem(o.bias);
  if (o.residual.empty()) l.nullMem(); else l.mem(o.residual);
}

// A tl.MatMul's or tl.QMatMul's outputs (`split`, or the one output of N columns, N / 2
// with a GLU), bias and residual.
MatMulOut matmulOutputs(const Node& n, int64_t N) {
  MatMulOut o;
  for (int i = 0; i < n.proto.output_size(); ++i) o.outs.push_back(n.out(static_cast<size_t>(i)));
  o.widths = {gluKind(n.proto) ? N / 2 : N};
  if (const auto* s = n.attr("split")) o.widths.assign(s->ints().begin(), s->ints().end());
  if (o.outs.size() > 3 || o.widths.size() != o.outs.size())
    throw Error("a split MatMul needs one width per output, at most 3", ExitCode::BadInput);
  o.bias = matmulOptional(n.proto, MatMulInput::Bias);
  o.residual = matmulOptional(n.proto, MatMulInput::Residual);
  return o;
}

// tl.RMSNorm's kernels: rows of `cols` values of x (+ residual), scaled, into y (and the
// sum into `sum`); "" for an absent residual or sum.
void rmsNorm(const Node& n, const std::string& x, const std::string& residual, const std::string& scale,
             const std::string& y, const std::string& sum, int64_t rows, int64_t cols, float eps) {
  const bool gpu = n.ex.device().gpuKernels();
  Launch l = n.launch(gpu ? "rmsnorm_f32_wg" : "rmsnorm_f32");
  l.mem(x);
  if (!residual.empty()) l.mem(residual); else l.nullMem();
  l.mem(scale).mem(y);
  if (!sum.empty()) l.mem(sum); else l.nullMem();
  l.i32(rows).i32(cols).f32(eps).i32(residual.empty() ? 0 : 1).i32(sum.empty() ? 0 : 1);
  if (gpu) return l.run3d(static_cast<size_t>(rows) * 256, 1, 1, 256, 1);  // kernels/reduce.cl's NORM_WG
  l.run1d(rows);
}

// glu_f32 (kernels/elementwise.cl): out = gate(g) * u over `count` values, glu_gate's kind.
void glu(const Node& n, const std::string& g, const std::string& u, const std::string& out, int64_t count, int kind) {
  n.launch("glu_f32").mem(g).mem(u).mem(out).i32(count).i32(kind).run1d(count);
}

// The decode kernels' GEMV_ARGS (kernels/common.cl): the norm scale or null, its epsilon,
// the GLU kind. Returns the GLU kind.
int setGemvArgs(Launch& l, const Node& n) {
  const std::string scale = matmulOptional(n.proto, MatMulInput::NormScale);
  if (scale.empty()) l.nullMem(); else l.mem(scale);
  const int kind = gluKind(n.proto);
  l.f32(n.attrFloat("norm_epsilon", 1e-5f)).i32(kind);
  return kind;
}

// Runs a (Q)MatMul whose kernel lacks the node's RMSNorm prologue or GLU epilogue (all
// but the GPU decode kernels) in steps: the norm of A's rows into scratch, the product
// into two halves in scratch, the GLU of those. `product(a, outputs)` enqueues the
// kernel; returns without it when the node has neither.
void matmulInSteps(const Node& n, std::string a, int64_t M, int64_t K, int64_t N, MatMulOut o,
                   const std::function<void(const std::string&, const MatMulOut&)>& product) {
  const std::string scale = matmulOptional(n.proto, MatMulInput::NormScale);
  if (!scale.empty()) {
    const std::string normed = n.proto.name() + "#normed";
    n.ex.scratch(normed, static_cast<size_t>(M * K) * 4);
    rmsNorm(n, a, "", scale, normed, "", M, K, n.attrFloat("norm_epsilon", 1e-5f));
    a = normed;
  }
  const int kind = gluKind(n.proto);
  if (!kind) return product(a, o);
  MatMulOut halves = o;
  halves.outs = {n.proto.name() + "#gate", n.proto.name() + "#up"};
  halves.widths = {N / 2, N / 2};
  for (const auto& h : halves.outs) n.ex.scratch(h, static_cast<size_t>(M * N / 2) * 4);
  product(a, halves);
  glu(n, halves.outs[0], halves.outs[1], o.outs[0], M * N / 2, kind);
}

void matmul(const Node& n, const std::string& a, Dims ad, const std::string& b, Dims bd, const MatMulOut& o,
            bool transA, bool transB) {
  if (ad.size() == 1) ad.insert(ad.begin(), 1);
  if (bd.size() == 1) bd.push_back(1);
  int64_t M = transA ? ad[ad.size() - 1] : ad[ad.size() - 2];
  int64_t K = transA ? ad[ad.size() - 2] : ad[ad.size() - 1];
  int64_t N = transB ? bd[bd.size() - 2] : bd[bd.size() - 1];
  Dims ab(ad.begin(), ad.end() - 2), bb(bd.begin(), bd.end() - 2);
  size_t r = std::max(ab.size(), bb.size());
  Dims batch(r, 1);
  for (size_t i = 0; i < r; ++i) {
    int64_t x = i + ab.size() >= r ? ab[i + ab.size() - r] : 1;
    int64_t y = i + bb.size() >= r ? bb[i + bb.size() - r] : 1;
    batch[i] = std::max(x, y);
  }
  // Batch strides in elements of whole matrices, 0 where broadcast.
  auto batchStrides = [&](const Dims& bdims, int64_t matrix) {
    Dims s = broadcastStrides(bdims, batch);
    for (auto& x : s) x *= matrix;
    return s;
  };
  const int64_t aRows = ad[ad.size() - 2], aCols = ad[ad.size() - 1];
  const int64_t bRows = bd[bd.size() - 2], bCols = bd[bd.size() - 1];
  // GPUs: 16x16 tiles through local memory once there are rows to fill them. CPUs:
  // 4x4 register blocks where B's rows are contiguous. Otherwise one output per item.
  const bool gpu = n.ex.device().gpuKernels();
  const bool tiled = gpu && M >= 16;
  const bool blocked = !gpu && !transB && std::all_of(o.widths.begin(), o.widths.end(), [](int64_t w) { return w % 4 == 0; });
  // A few rows (decode): 8 columns of one row per item, not 4x4 blocks of repeated rows.
  const bool rows8 = blocked && M < 4 && std::all_of(o.widths.begin(), o.widths.end(), [](int64_t w) { return w % 8 == 0; });
  const char* kernel = tiled ? "matmul_f32" : rows8 ? "matmul_1x8_f32" : blocked ? "matmul_4x4_f32" : "matmul_rows_f32";
  Launch l = n.launch(kernel);
  l.mem(a).mem(b);
  setOutputs(l, o);
  l.i32(M)
      .i32(N)
      .i32(K)
      .i32(transA ? 1 : aCols)
      .i32(transA ? aCols : 1)
      .i32(transB ? 1 : bCols)
      .i32(transB ? bCols : 1)
      .vec(pad8(batch, 1))
      .vec(pad8(batchStrides(ab, aRows * aCols), 0))
      .vec(pad8(batchStrides(bb, bRows * bCols), 0))
      .run3d(static_cast<size_t>(((rows8 ? N / 8 : blocked ? N / 4 : N) + 15) / 16 * 16),
             static_cast<size_t>(tiled ? (M + 15) / 16 * 16 : blocked && !rows8 ? (M + 3) / 4 : M),
             static_cast<size_t>(elementCount(batch)), 16, tiled ? 16 : 1);
}

void matmulOp(const Node& n) {
  if (n.dtype(n.in(0)) != DType::Float) throw Error("MatMul has kernels for float32 only", ExitCode::BadInput);
  const Dims& b = n.shape(n.in(1));
  matmul(n, n.in(0), n.shape(n.in(0)), n.in(1), b, {{n.out(0)}, {b.size() == 1 ? 1 : b.back()}, "", ""}, false, false);
}

// tl.MatMul (docs/ops.md): A [..., K] x W [K, N] with N's columns split among the outputs.
// Decode runs gemv_f32 on GPUs (M <= 4) and gemv_rows8_f32 on CPUs (M < 4), with the
// norm and GLU inside.
void tlMatmulOp(const Node& n) {
  requireFloatInputs(n);
  const Dims& w = n.shape(n.in(1));
  const bool transB = n.attrInt("transB", 0) != 0;  // W stored [N, K]
  const int64_t K = transB ? w[1] : w[0], N = transB ? w[0] : w[1];
  const int64_t M = elementCount(n.shape(n.in(0))) / std::max<int64_t>(K, 1);
  const int glu = gluKind(n.proto);
  const MatMulOut o = matmulOutputs(n, N);
  if (n.ex.device().gpuKernels() && M <= 4 && !transB && N % (glu ? 8 : 4) == 0) {  // gemv_f32: 4 columns per item
    Launch l = n.launch(M == 1 ? "gemv_f32_m1" : "gemv_f32");
    l.mem(n.in(0)).mem(n.in(1));
    setOutputs(l, o);
    l.i32(M).i32(N).i32(K);
    setGemvArgs(l, n);
    const int64_t groups = ((glu ? N / 2 : N) / 4 + 63) / 64;
    return l.run3d(static_cast<size_t>(groups * 64), 16, 1, 64, 16);  // kernels/matmul.cl's FGEMV_KS
  }
  // CPU decode: gemv_rows8_f32, 64 columns of a row per item in a work-group of its own,
  // the norm and GLU inside. PoCL deals a launch's groups out among its threads in chunks,
  // and an item walking K for 8 columns read half a cache line a row: bytellama's qkv took
  // 54 µs in 4 groups of 16 such items, 13-22 µs in items of 32 columns; 64 was faster
  // still over the whole step (docs/tl-bench.md, session 9).
  const int64_t width = glu ? N / 2 : N;
  if (!n.ex.device().gpuKernels() && M < 4 && !transB && width % 8 == 0 &&
      std::all_of(o.widths.begin(), o.widths.end(), [](int64_t v) { return v % 8 == 0; })) {
    Launch l = n.launch("gemv_rows8_f32");
    l.mem(n.in(0)).mem(n.in(1));
    setOutputs(l, o);
    l.i32(M).i32(N).i32(K);
    setGemvArgs(l, n);
    return l.run3d(static_cast<size_t>((width / 8 + 7) / 8), static_cast<size_t>(M), 1, 1, 1);  // matmul.cl's GEMV_CPU_RUNS
  }
  matmulInSteps(n, n.in(0), M, K, N, o, [&](const std::string& a, const MatMulOut& out) {
    matmul(n, a, {M, K}, n.in(1), w, out, false, transB);
  });
}

void gemmOp(const Node& n) {
  if (n.attrFloat("alpha", 1.0f) != 1.0f || n.attrFloat("beta", 1.0f) != 1.0f)
    throw Error("Gemm with alpha or beta other than 1 has no kernel", ExitCode::BadInput);
  const bool transB = n.attrInt("transB", 0) != 0;
  const Dims& b = n.shape(n.in(1));
  const int64_t N = transB ? b[0] : b[1];
  // A bias of N values is the kernel's epilogue; any other C broadcast is an add after.
  const bool epilogue = n.hasIn(2) && elementCount(n.shape(n.in(2))) == N && !n.shape(n.in(2)).empty() &&
                        n.shape(n.in(2)).back() == N && n.shape(n.in(2)).size() <= 2 && n.dtype(n.in(2)) == DType::Float;
  matmul(n, n.in(0), n.shape(n.in(0)), n.in(1), b, {{n.out(0)}, {N}, epilogue ? n.in(2) : "", ""},
         n.attrInt("transA", 0) != 0, transB);
  if (n.hasIn(2) && !epilogue) binary(n, "add", n.out(0), n.in(2), n.out(0));  // each element reads then writes itself
}

// Conv: spatial dims, kernel, strides, dilations and begin pads padded to 3 (SAME padding
// split as ONNX says: the odd pixel at the end for SAME_UPPER, at the start for SAME_LOWER).
void convOp(const Node& n) {
  requireFloatInputs(n);
  const Dims &x = n.shape(n.in(0)), &w = n.shape(n.in(1)), &y = n.shape(n.out(0));
  const size_t k = x.size() - 2;
  auto ints = [&](const char* name, int64_t fill, size_t count) {
    return tl::attrInts(n.proto, name).value_or(Dims(count, fill));
  };
  const Dims strides = ints("strides", 1, k), dil = ints("dilations", 1, k), pads = ints("pads", 0, 2 * k);
  const std::string autoPad = n.attrString("auto_pad", "NOTSET");
  auto four = [](const Dims& v, size_t from, size_t count, int64_t fill) {
    cl_int4 r = {{static_cast<cl_int>(fill), static_cast<cl_int>(fill), static_cast<cl_int>(fill), static_cast<cl_int>(fill)}};
    for (size_t i = 0; i < count; ++i) r.s[i] = static_cast<cl_int>(v[from + i]);
    return r;
  };
  Dims begin(k, 0);
  for (size_t i = 0; i < k; ++i) {
    if (autoPad == "NOTSET") begin[i] = pads[i];
    if (autoPad == "SAME_UPPER" || autoPad == "SAME_LOWER") {
      const int64_t total = std::max<int64_t>(0, (y[2 + i] - 1) * strides[i] + dil[i] * (w[2 + i] - 1) + 1 - x[2 + i]);
      begin[i] = autoPad == "SAME_UPPER" ? total / 2 : total - total / 2;
    }
  }
  const int64_t count = elementCount(y);
  Launch l = n.launch("conv_f32");
  l.mem(n.in(0)).mem(n.in(1));
  if (n.hasIn(2)) l.mem(n.in(2)); else l.nullMem();
  l.mem(n.out(0)).i32(count).i32(x[1]).i32(w[0]).i32(n.attrInt("group", 1));
  const cl_int4 in = four(x, 2, k, 1), out = four(y, 2, k, 1), ker = four(w, 2, k, 1);
  const cl_int4 st = four(strides, 0, k, 1), di = four(dil, 0, k, 1), pb = four(begin, 0, k, 0);
  for (const cl_int4* v : {&in, &out, &ker, &st, &di, &pb}) l.raw(v, sizeof(cl_int4));
  l.i32(n.hasIn(2) ? 1 : 0).run1d(count);
}

// The row kernels' family: a work-group per row on GPUs (kernels/reduce.cl's RED_WG is
// run1d's 64), an item per row on CPUs.
struct RowKernel {
  std::string name;
  int64_t items;
};
RowKernel rowKernel(const Node& n, const std::string& base, int64_t rows) {
  if (n.ex.device().gpuKernels()) return {base + "_wg", rows * 64};
  return {base, rows};
}

void softmaxOp(const Node& n) {
  const Dims& d = n.shape(n.in(0));
  size_t k = n.axis(n.attrInt("axis", -1), d.size());
  int64_t inner = 1;
  for (size_t i = k + 1; i < d.size(); ++i) inner *= d[i];
  int64_t rows = elementCount(d) / std::max<int64_t>(d[k], 1);
  const RowKernel rk = rowKernel(n, "softmax_f32", rows);
  n.launch(rk.name)
      .mem(n.in(0))
      .mem(n.out(0))
      .i32(rows)
      .i32(d[k])
      .i32(inner)
      .i32(n.proto.op_type() == "LogSoftmax" ? 1 : 0)
      .run1d(rk.items);
}

void reduceOp(const Node& n) {
  const Dims& d = n.shape(n.in(0));
  Dims axes;
  if (const auto* a = n.attr("axes")) axes.assign(a->ints().begin(), a->ints().end());
  if (n.hasIn(1)) axes = n.ex.value(n.in(1));
  std::vector<bool> reduce(d.size(), axes.empty() && !n.attrInt("noop_with_empty_axes", 0));
  for (auto a : axes) reduce[n.axis(a, d.size())] = true;
  Dims is = contiguousStrides(d), od, os, rd, rs;
  for (size_t i = 0; i < d.size(); ++i) {
    (reduce[i] ? rd : od).push_back(d[i]);
    (reduce[i] ? rs : os).push_back(is[i]);
  }
  int64_t outCount = elementCount(od), redCount = elementCount(rd);
  const RowKernel rk = rowKernel(n, lowerCase(n.proto.op_type()) + "_" + typeSuffix(n.dtype(n.in(0))), outCount);
  n.launch(rk.name)
      .mem(n.in(0))
      .mem(n.out(0))
      .i32(outCount)
      .vec(pad8(od, 1))
      .vec(pad8(os, 0))
      .i32(redCount)
      .vec(pad8(rd, 1))
      .vec(pad8(rs, 0))
      .run1d(rk.items);
}

void argExtremeOp(const Node& n) {
  const Dims& d = n.shape(n.in(0));
  const size_t k = n.axis(n.attrInt("axis", 0), d.size());
  int64_t inner = 1;
  for (size_t i = k + 1; i < d.size(); ++i) inner *= d[i];
  const int64_t count = elementCount(n.shape(n.out(0)));
  if (d[k] == 0) throw Error(n.proto.op_type() + " over an empty axis", ExitCode::BadInput);
  n.launch(lowerCase(n.proto.op_type()) + "_" + typeSuffix(n.dtype(n.in(0))))
      .mem(n.in(0))
      .mem(n.out(0))
      .i32(count)
      .i32(d[k])
      .i32(inner)
      .i32(n.attrInt("select_last_index", 0))
      .run1d(count);
}

void layerNormOp(const Node& n) {
  const Dims& d = n.shape(n.in(0));
  size_t k = n.axis(n.attrInt("axis", -1), d.size());
  int64_t cols = 1;
  for (size_t i = k; i < d.size(); ++i) cols *= d[i];
  if (elementCount(n.shape(n.in(1))) != cols || (n.hasIn(2) && elementCount(n.shape(n.in(2))) != cols))
    throw Error("LayerNormalization with broadcast scale or bias has no kernel", ExitCode::BadInput);
  int64_t rows = elementCount(d) / std::max<int64_t>(cols, 1);
  const bool stats = n.hasOut(1) && n.hasOut(2);
  if (n.hasOut(1) != n.hasOut(2)) throw Error("LayerNormalization needs both or neither statistics outputs", ExitCode::BadInput);
  const RowKernel rk = rowKernel(n, "layernorm_f32", rows);
  Launch l = n.launch(rk.name);
  l.mem(n.in(0)).mem(n.in(1));
  if (n.hasIn(2)) l.mem(n.in(2)); else l.nullMem();
  l.mem(n.out(0));
  if (stats) l.mem(n.out(1)).mem(n.out(2)); else l.nullMem().nullMem();
  l.i32(rows).i32(cols).f32(n.attrFloat("epsilon", 1e-5f)).i32(n.hasIn(2) ? 1 : 0).i32(stats ? 1 : 0).run1d(rk.items);
}

void rangeOp(const Node& n) {
  DType t = n.dtype(n.out(0));
  int64_t c = elementCount(n.shape(n.out(0)));
  int64_t start = n.ex.value(n.in(0)).at(0), delta = n.ex.value(n.in(2)).at(0);
  Launch l = n.launch(std::string("range_") + typeSuffix(t));
  l.mem(n.out(0)).i32(c);
  if (t == DType::Int64) l.i64(start).i64(delta);
  else if (t == DType::Int32) l.i32(start).i32(delta);
  else l.f32(static_cast<float>(start)).f32(static_cast<float>(delta));
  l.run1d(c);
}

void constantOfShapeOp(const Node& n) {
  DType t = n.dtype(n.out(0));
  uint8_t bytes[8] = {0};
  if (const auto* a = n.attr("value")) {
    Tensor v = readTensor(a->t(), {});
    std::memcpy(bytes, v.bytes.data(), std::min<size_t>(v.bytes.size(), 8));
  }
  int64_t c = elementCount(n.shape(n.out(0)));
  n.launch(std::string("fill_") + sizeSuffix(t)).mem(n.out(0)).i32(c).raw(bytes, dtypeBits(t) / 8).run1d(c);
}

void triluOp(const Node& n) {
  const Dims& d = n.shape(n.in(0));
  int64_t k = n.hasIn(1) ? n.ex.value(n.in(1)).at(0) : 0;
  int64_t c = elementCount(d);
  n.launch(std::string("trilu_") + sizeSuffix(n.dtype(n.in(0))))
      .mem(n.in(0))
      .mem(n.out(0))
      .i32(c)
      .i32(d[d.size() - 2])
      .i32(d[d.size() - 1])
      .i32(k)
      .i32(n.attrInt("upper", 1))
      .run1d(c);
}

// Which kernel a tl.QMatMul runs at this binding. GPUs: a work-group per 4 columns for
// decode (M <= 4, group % 8 == 0), with the RMSNorm prologue and GLU epilogue inside;
// dequantizing tiles otherwise; CPUs: a column and 4 (decode) or 8 rows per work item.
struct QMatMulPath {
  std::string scheme, kernel;
  int64_t K = 0, N = 0, G = 0, M = 0;
  bool gpu = false, w4a8 = false, gemv = false, cols4 = false, gemv16 = false, oneRow = false, native = false, wide = false;
};
QMatMulPath qmatmulPath(const Node& n) {
  QMatMulPath q;
  q.scheme = n.attrString("scheme", "");
  q.K = n.attrInt("K", 0), q.N = n.attrInt("N", 0), q.G = n.attrInt("group", 0);
  q.M = elementCount(n.shape(n.in(0))) / std::max<int64_t>(q.K, 1);
  q.gpu = n.ex.device().gpuKernels();
  q.w4a8 = q.scheme == "w4a8", q.gemv = q.gpu && q.M <= 4 && q.G % 8 == 0;
  q.cols4 = !q.gpu && q.M <= 4 && !q.w4a8;  // 4 rows: fewer registers, faster decode
  q.gemv16 = q.gemv && (q.scheme == "e0m4" || q.scheme == "int4") && q.K % 32 == 0 && q.G % 32 == 0;
  q.oneRow = q.gemv && q.M == 1;  // kernels compiled for one row
  q.native = q.gemv && !q.w4a8;   // the kernel normalizes A and applies the GLU itself
  // One row over wide weights: 8 columns a work-group (kernels/qmatmul.cl's QGEMV_WIDE)
  // where 4 would launch over 16 groups per compute unit; fewer groups left the H100 idle.
  q.wide = q.gemv16 && q.oneRow && q.N / 4 > 16 * static_cast<int64_t>(n.ex.device().info().computeUnits);
  q.kernel = (q.wide     ? "qgemv_wide_"
              : q.gemv16 ? "qgemv16_"
              : q.gemv   ? "qgemv_"
              : q.gpu    ? "qmatmul_tiles_"
              : q.cols4  ? "qgemv_cols_"
                         : "qmatmul_cols_") +
             q.scheme + (q.oneRow && !q.wide ? "_m1" : "");
  return q;
}

// A decode attention whose splits a one-row tl.QMatMul merges as it reads its A
// (mergedAttention): the splits' scratch and what the merge needs.
struct MergedSplits {
  std::string part;
  int64_t splits = 0, Dv = 0, zeroRows = 0;
};
std::optional<MergedSplits> mergedAttention(const Node& n, const QMatMulPath& q);
std::string mergeKernel(const QMatMulPath& q) {
  return (q.wide ? "qgemv_wide_merge_" : "qgemv16_merge_") + q.scheme + (q.wide ? "" : "_m1");
}

// tl.QMatMul: A [..., K] x quantized [K, N] (docs/ops.md has the table; qmatmulPath the
// kernels). W4A8 first quantizes A's rows to int8.
void qmatmulOp(const Node& n) {
  const QMatMulPath q = qmatmulPath(n);
  const int64_t K = q.K, N = q.N, G = q.G, M = q.M;
  const int64_t rowBytes = n.shape(n.in(1)).at(1), groups = n.shape(n.in(2)).at(1);
  const bool gpu = q.gpu, w4a8 = q.w4a8, gemv = q.gemv, cols4 = q.cols4, native = q.native, wide = q.wide;
  constexpr int64_t kWideCols = 8;
  const auto merged = mergedAttention(n, q);
  const std::string kernel = merged ? mergeKernel(q) : q.kernel;
  const auto product = [&](const std::string& a, const MatMulOut& o) {
    Launch l = n.launch(kernel);
    if (w4a8) {
      const std::string qa = n.proto.name() + "#int8", rs = n.proto.name() + "#rowscale";
      n.ex.scratch(qa, static_cast<size_t>(M * K));
      n.ex.scratch(rs, static_cast<size_t>(M * 4));
      n.launch("quantize_rows_i8").mem(a).mem(qa).mem(rs).i32(M).i32(K).run3d(static_cast<size_t>(M) * 64, 1, 1, 64, 1);
      l.mem(qa).mem(rs).mem(n.in(1)).mem(n.in(2));
    } else {
      l.mem(a).mem(n.in(1)).mem(n.in(2)).mem(n.in(3));
    }
    setOutputs(l, o);
    l.i32(M).i32(N).i32(K).i32(G).i32(rowBytes).i32(groups);
    const auto up = [](int64_t x, int64_t m) { return static_cast<size_t>((x + m - 1) / m); };
    if (native) {
      const int kind = setGemvArgs(l, n);
      if (merged) l.mem(merged->part).i32(merged->splits).i32(merged->Dv).i32(merged->zeroRows);
      if (wide) return l.run3d((kind ? up(N / 2, kWideCols / 2) : up(N, kWideCols)) * 64, 1, 1, 64, 1);
      return l.run3d((kind ? up(N / 2, 2) : up(N, 4)) * 64, 1, 1, 64, 1);  // 4 weight columns per work-group
    }
    if (gemv) return l.run3d(up(N, 4) * 64, 1, 1, 64, 1);
    if (gpu) return l.run3d(up(N, 64) * 16, up(M, 64) * 16, 1, 16, 16);
    l.run3d(up(N, 64) * 64, up(M, cols4 ? 4 : 8), 1, 64, 1);
  };
  const MatMulOut o = matmulOutputs(n, N);
  if (native) return product(n.in(0), o);
  matmulInSteps(n, n.in(0), M, K, N, o, product);
}

// tl.RMSNorm (docs/ops.md): rows of the trailing dim, scaled; with a residual input, of
// x + residual, which output 1 (when present) receives.
void rmsNormOp(const Node& n) {
  requireFloatInputs(n);
  const Dims& d = n.shape(n.in(0));
  const int64_t cols = d.empty() ? 1 : d.back(), rows = elementCount(d) / std::max<int64_t>(cols, 1);
  rmsNorm(n, n.in(0), n.hasIn(2) ? n.in(2) : "", n.in(1), n.out(0), n.hasOut(1) ? n.out(1) : "", rows, cols,
          n.attrFloat("epsilon", 1e-5f));
}

// tl.Attention's operands as its kernels read them: logical dims [B, heads, rows, size] of
// q, k and v, and their element strides (b, head, row).
struct AttentionViews {
  Dims q, k, v, qs, ks, vs;
};
AttentionViews attentionViews(const Node& n) {
  auto view = [&](size_t i, const char* swapped, Dims& d) {
    d = n.shape(n.in(i));
    if (const auto* cs = n.ex.cacheStrides(n.in(i))) return *cs;  // an in-place cache, [B, H, T, D]
    Dims st = contiguousStrides(d);
    if (n.attrInt(swapped, 0)) {
      std::swap(d[1], d[2]);
      std::swap(st[1], st[2]);
    }
    return Dims{st[0], st[1], st[2]};
  };
  AttentionViews a;
  a.qs = view(0, "q_bshd", a.q);
  a.ks = view(1, "k_bthd", a.k);
  a.vs = view(2, "v_bthd", a.v);
  return a;
}

// Which kernels tl.Attention runs at this binding. Prefill rows on GPUs share each key
// tile among 16 rows (heads up to 128 wide). Decode rows (heads up to 128, multiples of 4)
// take their keys an item each, split into chunks of at least 64 keys, up to 1024
// work-groups (flash-decoding). Over more than 256 keys, a grouped-query layer's decode
// rows go a work-group per (kv head, chunk of keys), its 2 to 16 query rows together
// (kernels/attention.cl's GQA_MAXR), so the cache is read once per kv head: on the H100
// TinyLlama's tg128@d2048 went from 347 to 407 tok/s, and with a chunk of one block of
// kGqaBlock keys per work-group (where 1024 work-groups allow) to 496. Over fewer keys the
// per-row kernel won (docs/tl-bench.md, sessions 7, 8 and 12). Each only where it was
// built: devices with little local memory or small work-groups lack some (ATT_FITS).
struct AttentionPath {
  bool gpu = false, tiled = false, dec = false, gqa = false;
  std::string kernel;
  int64_t groups = 0, splits = 1, chunk = 0;  // work-groups per split; splits of the keys
  size_t groupSize = 64;                      // work items per group
};
constexpr int64_t kGqaBlock = 32, kGqaGroup = 256;  // kernels/attention.cl's GQA_BK, GQA_WG
AttentionPath attentionPath(const Node& n, const AttentionViews& a) {
  const int64_t B = a.q[0], H = a.q[1], S = a.q[2], D = a.q[3], Hkv = a.k[1], T = a.k[2], Dv = a.v[3];
  const int64_t rows = B * H * S;
  const auto built = [&](const std::string& k) { return n.ex.kernels().has(k); };
  AttentionPath p;
  p.gpu = n.ex.device().gpuKernels();
  const std::string decKernel = D == Dv && (D == 64 || D == 128) ? "attention_dec" + std::to_string(D) + "_f32" : "attention_dec_f32";
  p.tiled = p.gpu && S > 4 && D <= 128 && Dv <= 128 && built("attention_tile_f32");
  p.dec = p.gpu && !p.tiled && S <= 4 && D <= 128 && Dv <= 128 && D % 4 == 0 && Dv % 4 == 0 && built(decKernel);
  const int64_t groupRows = H / Hkv * S;
  p.gqa = p.dec && T > 256 && groupRows >= 2 && groupRows <= 16 && built("attention_gqa_f32");
  p.groups = p.gqa ? B * Hkv : rows;
  constexpr int64_t kMaxGroups = 1024;  // so at most 1024 splits: attention_combine_f32's ATT_MAX_SPLITS
  const int64_t block = p.gqa ? kGqaBlock : 64;
  p.splits = p.dec ? std::clamp<int64_t>(p.gqa ? (T + block - 1) / block : T / block, 1, std::max<int64_t>(1, kMaxGroups / std::max<int64_t>(p.groups, 1)))
             : p.gpu && !p.tiled ? std::clamp<int64_t>(128 / std::max<int64_t>(rows, 1), 1, (T + 127) / 128)
                                 : 1;
  p.chunk = p.gqa ? ((T + p.splits - 1) / p.splits + block - 1) / block * block : (T + p.splits - 1) / p.splits;
  if (p.gqa) p.splits = (T + p.chunk - 1) / p.chunk;  // whole blocks, no split left empty
  if (p.gqa) p.groupSize = kGqaGroup;
  p.kernel = p.tiled ? "attention_tile_f32" : p.gqa ? "attention_gqa_f32" : p.dec ? decKernel : p.gpu ? "attention_wg_f32" : "attention_f32";
  return p;
}

// Element strides (b, head, row, dim) of a tl.RoPE's position ids read as `dims`, when
// they hold one position per (batch, row); empty otherwise.
Dims ropePositionStrides(const Node& n, const onnx::NodeProto& rope, const Dims& dims) {
  const Dims& p = n.shape(rope.input(1));
  if (p.size() > dims.size()) return {};
  const Dims st = broadcastStrides(p, dims);
  return st.size() == 4 && st[1] == 0 && st[3] == 0 ? st : Dims{};
}

// The tl.RoPE whose work a decode attention launch does itself (kernels/attention.cl's
// ATT_FRESH_ARGS), or null: one that appends to in-place caches (tl-plan) that only this
// attention reads, its q read by it alone, its new rows [B, Hkv, S, D]. That saves a
// launch a layer. The attention then reads the RoPE's inputs: tl-plan keeps them alive
// until it (memory_plan.cpp), and a buffer that overlaps them anyway (a plan from before)
// keeps the RoPE's own launch. ropeOp asks the same question; the answer depends on
// shapes that both nodes read, so the two are lowered again together.
const onnx::NodeProto* joinedRope(const Node& n, const AttentionViews& a, const AttentionPath& p) {
  if (!p.dec) return nullptr;
  const int at = n.ex.graph().producer(n.in(0));
  if (at < 0) return nullptr;
  const auto& r = n.ex.graph().node(static_cast<size_t>(at));
  if (r.domain() != "tl" || r.op_type() != "RoPE" || !findAttr(r, "cache_axis") || r.input_size() < 7 ||
      r.output_size() < 3 || r.output(0) != n.in(0) || r.output(1) != n.in(1) || r.output(2) != n.in(2) ||
      !n.ex.cacheStrides(n.in(1)) || !n.ex.cacheStrides(n.in(2)) || n.ex.graph().consumers(n.in(0)).size() != 1)
    return nullptr;
  const int64_t B = a.q[0], S = a.q[2], Hkv = a.k[1];
  if (n.shape(r.input(3)) != Dims{B, Hkv, S, a.q[3]} || n.shape(r.input(6)) != Dims{B, Hkv, S, a.v[3]}) return nullptr;
  // position ids (rope-positions' form), one per (batch, row)
  if (!attrInt(r, "positions").value_or(0) || ropePositionStrides(n, r, a.q).size() != 4) return nullptr;
  if (n.ex.dryRun()) return &r;
  for (int i : {0, 3, 6})
    if (n.ex.overlaps(n.out(0), r.input(i))) return nullptr;
  return &r;
}

// tl.RoPE's cos and sin (rope_at's RopeTrig): tables, or computed from position ids.
void ropeTrig(const Node& n, Launch& l) {
  l.i32(n.attrInt("positions", 0)).f32(n.attrFloat("cos_scale", 1.0f)).f32(n.attrFloat("sin_scale", 1.0f));
}

// tl.RoPE with cache_axis (docs/ops.md): after q's arguments, k rotated into Concat(past_k,
// ·) and v into Concat(past_v, v), one launch (rope_cache_f32).
void ropeCache(const Node& n, Launch& l, int64_t count) {
  const Dims& k = n.shape(n.in(3));
  l.mem(n.in(3)).vec(pad8(k, 1)).vec(pad8(broadcastStrides(n.shape(n.in(1)), k), 0));
  l.vec(pad8(broadcastStrides(n.shape(n.in(2)), k), 0));
  const size_t axis = n.axis(n.attrInt("cache_axis", 0), k.size());
  int64_t total = count;
  for (auto [past, fresh, out] : {std::array<size_t, 3>{4, 3, 1}, std::array<size_t, 3>{5, 6, 2}}) {
    const Dims& o = n.shape(n.out(out));
    int64_t inner = 1;
    for (size_t i = axis + 1; i < o.size(); ++i) inner *= o[i];
    if (fresh == 6) l.mem(n.in(fresh));
    l.mem(n.in(past)).mem(n.out(out)).i32(elementCount(o)).i32(inner).i32(o[axis]).i32(n.shape(n.in(past))[axis]);
    total += elementCount(o);
  }
  ropeTrig(n, l);
  l.run1d(total);
}

// New rows [B, H, N, D] of in-place cache `cache` (kv_append_f32's and rope_kv_f32's
// arguments after the tensor): elements, heads, rows, size, the cache's strides.
int64_t kvRowsArgs(const Node& n, Launch& l, const std::string& fresh, const std::string& cache) {
  const Dims& x = n.shape(fresh);
  const Dims& st = *n.ex.cacheStrides(cache);
  if (x.size() != 4) throw Error("tl-plan's cache appends take [B, H, N, D] rows", ExitCode::BadInput);
  l.i32(elementCount(x)).i32(x[1]).i32(x[2]).i32(x[3]).i32(st[0]).i32(st[1]).i32(st[2]);
  return elementCount(x);
}

// tl.RoPE with cache_axis over in-place caches (tl-plan): q rotated, the new k rows rotated
// into their cache and the new v rows copied into theirs after the true length (rope_kv_f32).
void ropeInPlace(const Node& n, Launch& l, int64_t count) {
  const Dims& k = n.shape(n.in(3));
  if (n.axis(n.attrInt("cache_axis", 0), k.size()) != 2) throw Error("tl.RoPE appends in place along axis 2 only", ExitCode::BadInput);
  l.mem(n.in(3)).vec(pad8(k, 1)).vec(pad8(broadcastStrides(n.shape(n.in(1)), k), 0));
  l.vec(pad8(broadcastStrides(n.shape(n.in(2)), k), 0)).mem(n.out(1));
  const int64_t nk = kvRowsArgs(n, l, n.in(3), n.out(1));
  l.mem(n.in(6)).mem(n.out(2));
  const int64_t nv = kvRowsArgs(n, l, n.in(6), n.out(2));
  l.mem(Executor::kKvRows);
  ropeTrig(n, l);
  l.writesCache((nk + nv) * 4).run1d(count + nk + nv);
}

// tl.KvAppend (docs/ops.md): Concat(past, new) per pair; on in-place caches (tl-plan) only
// the new rows are written (kv_append_f32), else the pairs are concatenated.
void kvAppendOp(const Node& n) {
  requireFloatInputs(n);
  const size_t pairs = static_cast<size_t>(n.proto.output_size());
  bool inPlace = true;
  for (size_t j = 0; j < pairs; ++j) inPlace = inPlace && n.ex.cacheStrides(n.out(j));
  if (!inPlace) {
    if (pairs == 2) return concatPairOp(n);
    return concatOp(n);
  }
  if (n.axis(n.attrInt("axis", 0), n.shape(n.out(0)).size()) != 2) throw Error("tl.KvAppend appends in place along axis 2 only", ExitCode::BadInput);
  Launch l = n.launch("kv_append_f32");
  int64_t total = 0;
  for (size_t j = 0; j < 2; ++j) {
    if (j < pairs) {
      l.mem(n.in(2 * j + 1)).mem(n.out(j));
      total += kvRowsArgs(n, l, n.in(2 * j + 1), n.out(j));
    } else {
      l.nullMem().nullMem().i32(0).i32(1).i32(1).i32(1).i32(0).i32(0).i32(0);
    }
  }
  l.mem(Executor::kKvRows).writesCache(total * 4).run1d(total);
}

// Whether the one reader of this tl.RoPE's q, a tl.Attention, does its work (joinedRope).
bool joinedToAttention(const Node& n) {
  const auto& readers = n.ex.graph().consumers(n.out(0));
  if (readers.size() != 1) return false;
  const auto& proto = n.ex.graph().node(readers[0]);
  if (proto.domain() != "tl" || proto.op_type() != "Attention") return false;
  const Node attention{n.ex, readers[0], proto};
  const AttentionViews a = attentionViews(attention);
  return joinedRope(attention, a, attentionPath(attention, a)) == &n.proto;
}

// tl.RoPE (docs/ops.md): rotate-half rotary embedding in one pass over x (and over the
// second input, q's k, in the same launch).
void ropeOp(const Node& n) {
  const bool positions = n.attrInt("positions", 0) != 0;
  requireFloatInputs(n, positions ? 1 : -1);
  if (positions && n.dtype(n.in(1)) != DType::Int64) throw Error("tl.RoPE's position ids must be int64", ExitCode::BadInput);
  const Dims& d = n.shape(n.in(0));
  const int64_t count = elementCount(d);
  const bool inPlace = n.attr("cache_axis") && n.ex.cacheStrides(n.out(1)) && n.ex.cacheStrides(n.out(2));
  if (inPlace && joinedToAttention(n)) return;  // the attention's launch does this one's work
  Launch l = n.launch(inPlace ? "rope_kv_f32" : n.attr("cache_axis") ? "rope_cache_f32" : "rope_f32");
  l.mem(n.in(0)).mem(n.in(1)).mem(n.in(2)).mem(n.out(0)).i32(count).i32(d.back()).i32(n.attrInt("rotary_dim", d.back()));
  l.vec(pad8(d, 1)).vec(pad8(broadcastStrides(n.shape(n.in(1)), d), 0)).vec(pad8(broadcastStrides(n.shape(n.in(2)), d), 0));
  if (inPlace) return ropeInPlace(n, l, count);
  if (n.attr("cache_axis")) return ropeCache(n, l, count);
  int64_t count2 = 0;
  if (n.hasIn(3)) {
    const Dims& d2 = n.shape(n.in(3));
    count2 = elementCount(d2);
    l.mem(n.in(3)).mem(n.out(1)).i32(count2).vec(pad8(d2, 1));
    l.vec(pad8(broadcastStrides(n.shape(n.in(1)), d2), 0)).vec(pad8(broadcastStrides(n.shape(n.in(2)), d2), 0));
  } else {
    const cl_int8 none = pad8({}, 0);
    l.nullMem().nullMem().i32(0).vec(none).vec(none).vec(none);
  }
  ropeTrig(n, l);
  l.run1d(count + count2);
}

// tl.SwiGLU (docs/ops.md): silu(g) * u, elementwise over one shape.
void swigluOp(const Node& n) {
  requireFloatInputs(n);
  glu(n, n.in(0), n.in(1), n.out(0), elementCount(n.shape(n.out(0))), 1);
}

// The one tl.Attention output that tl.QMatMul `n` reads as its A, through views alone,
// with no other reader and not a graph output: the attention's index, or -1.
int attentionBehind(const Node& n) {
  const Graph& g = n.ex.graph();
  const auto& outputs = g.proto().output();
  for (std::string t = n.in(0);;) {
    if (g.consumers(t).size() != 1 ||
        std::any_of(outputs.begin(), outputs.end(), [&](const onnx::ValueInfoProto& o) { return o.name() == t; }))
      return -1;
    const int at = g.producer(t);
    if (at < 0) return -1;
    const auto& p = g.node(static_cast<size_t>(at));
    if (p.domain() == "tl" && p.op_type() == "Attention") return p.output(0) == t ? at : -1;
    if (!isView(p, n.ex.analysis())) return -1;
    t = p.input(0);
  }
}

// The reverse: the tl.QMatMul reading this tl.Attention's output so, or -1.
int attentionReader(const Node& n) {
  const Graph& g = n.ex.graph();
  for (std::string t = n.out(0);;) {
    const auto& readers = g.consumers(t);
    if (readers.size() != 1) return -1;
    const auto& r = g.node(readers[0]);
    if (r.domain() == "tl" && r.op_type() == "QMatMul" && r.input(0) == t) {
      const Node q{n.ex, readers[0], r};
      return attentionBehind(q) == static_cast<int>(n.index) ? static_cast<int>(readers[0]) : -1;
    }
    if (!isView(r, n.ex.analysis())) return -1;
    t = r.output(0);
  }
}

// Whether the one-row decode GEMV of tl.QMatMul `n` merges the splits of the attention
// behind it (kernels/qmatmul.cl's *_merge_*): query rows of one batch row and
// position, the rows' kernel (not grouped-query), 2 to 4 splits (its MERGE_SPLITS: every
// work-group reads them all), heads a multiple of 32 wide, no norm prologue. The attention
// then writes its splits and launches no merge: a launch fewer a layer, where a decode
// step's host time on the H100 is about 10 µs a launch. Both nodes ask; the attention
// has its reader lowered again whenever it is (the answer changes with the keys' count).
std::optional<MergedSplits> mergedAttention(const Node& n, const QMatMulPath& q) {
  constexpr int64_t kMergeSplits = 4;  // kernels/qmatmul.cl's MERGE_SPLITS
  if (!q.gemv16 || !q.oneRow || !q.native || !matmulOptional(n.proto, MatMulInput::NormScale).empty())
    return std::nullopt;
  const int at = attentionBehind(n);
  if (at < 0) return std::nullopt;
  const Node a{n.ex, static_cast<size_t>(at), n.ex.graph().node(static_cast<size_t>(at))};
  const AttentionViews v = attentionViews(a);
  const AttentionPath p = attentionPath(a, v);
  const int64_t H = v.q[1], Dv = v.v[3];
  if (!p.dec || p.gqa || p.splits < 2 || p.splits > kMergeSplits || v.q[0] * v.q[2] != 1 || Dv % 32 || H * Dv != q.K ||
      !n.ex.kernels().has(mergeKernel(q)))
    return std::nullopt;
  return MergedSplits{a.proto.name() + "#splits", p.splits, Dv, a.attrInt("zero_masked_rows", 0)};
}

// tl.Attention (docs/ops.md): CPUs an item per query row; GPUs a work-group per row and
// split of the keys, the splits chosen so that a decode step's few rows still fill the
// device (about 128 groups), then merged by a second kernel, or by the GEMV that reads
// the output (mergedAttention).
void attentionOp(const Node& n) {
  requireFloatInputs(n, 4);  // the key mask is read as integers
  const AttentionViews a = attentionViews(n);
  const Dims &q = a.q, &k = a.k, &v = a.v;
  const int64_t B = q[0], H = q[1], S = q[2], D = q[3], Hkv = k[1], T = k[2], Dv = v[3];
  if (D > 256 || Dv > 256) throw Error("tl.Attention's kernels take head sizes up to 256", ExitCode::BadInput);
  const int64_t rows = B * H * S;
  Dims ms = {0, 0, 0, 0};
  if (n.hasIn(3)) ms = broadcastStrides(n.shape(n.in(3)), {B, H, S, T});
  const bool bshd = n.attrInt("out_bshd", 0) != 0;
  const Dims os = bshd ? Dims{S * H * Dv, Dv, H * Dv} : Dims{H * S * Dv, S * Dv, Dv};
  const AttentionPath p = attentionPath(n, a);
  const std::string part = n.proto.name() + "#splits";
  if (p.splits > 1) n.ex.scratch(part, static_cast<size_t>(rows * p.splits * (Dv + 2) * 4));
  Launch l = n.launch(p.kernel);
  l.mem(n.in(0)).mem(n.in(1)).mem(n.in(2));
  if (n.hasIn(3)) l.mem(n.in(3)); else l.nullMem();
  l.mem(n.out(0));
  if (p.gpu && !p.tiled) {
    if (p.splits > 1) l.mem(part); else l.nullMem();
  }
  l.i32(rows).i32(H).i32(Hkv).i32(S).i32(T).i32(D).i32(Dv);
  l.f32(n.attrFloat("scale", 1.0f)).f32(n.attrFloat("softcap", 0.0f)).i32(n.hasIn(3) ? 1 : 0);
  for (const Dims* st : std::initializer_list<const Dims*>{&a.qs, &a.ks, &a.vs, &ms, &os})
    for (int64_t x : *st) l.i32(x);
  const int64_t zeroRows = n.attrInt("zero_masked_rows", 0);
  l.i32(zeroRows).i32(n.attrInt("causal", 0)).f32(n.attrFloat("mask_value", -INFINITY));
  if (n.hasIn(4)) {  // the key mask [B or 1, T], read as nonzero elements of its own size
    const Dims& km = n.shape(n.in(4));
    l.mem(n.in(4)).i32(static_cast<int64_t>(dtypeBits(n.dtype(n.in(4))) / 8)).i32(km.at(0) == 1 ? 0 : km.at(1));
  } else {
    l.nullMem().i32(1).i32(0);
  }
  // Over an in-place cache the causal offset is its true length (padding follows it).
  if (n.ex.cacheStrides(n.in(1))) l.mem(Executor::kKvRows); else l.nullMem();
  if (!p.gpu) return l.run3d(static_cast<size_t>(rows), 1, 1, 1, 1);
  if (p.tiled) return l.run3d(static_cast<size_t>(B * H * ((S + 15) / 16)) * 64, 1, 1, 64, 1);
  l.i32(p.splits).i32(p.chunk);
  if (p.dec) {
    const onnx::NodeProto* r = joinedRope(n, a, p);
    if (r) {  // rope_kv_f32's work (ropeInPlace), from the RoPE's own inputs
      const Dims ps = ropePositionStrides(n, *r, q);
      l.mem(r->input(0)).mem(r->input(3)).mem(r->input(6)).mem(n.in(1)).mem(n.in(2));
      l.mem(r->input(1)).i32(ps[0]).i32(ps[2]).mem(r->input(2)).i32(attrInt(*r, "rotary_dim").value_or(D));
      l.f32(attrFloat(*r, "cos_scale").value_or(1.0f)).f32(attrFloat(*r, "sin_scale").value_or(1.0f));
      l.writesCache(static_cast<int64_t>(B * Hkv * S * (D + Dv) * 4));
    } else {
      l.nullMem().nullMem().nullMem().nullMem().nullMem().nullMem().i32(0).i32(0).nullMem().i32(0).f32(1.0f).f32(1.0f);
    }
  }
  l.run3d(static_cast<size_t>(p.groups) * p.groupSize, static_cast<size_t>(p.splits), 1, p.groupSize, 1);
  const int reader = attentionReader(n);
  if (reader >= 0) {
    n.ex.relower(static_cast<size_t>(reader));
    const Node r{n.ex, static_cast<size_t>(reader), n.ex.graph().node(static_cast<size_t>(reader))};
    if (mergedAttention(r, qmatmulPath(r))) return;
  }
  if (p.splits > 1)
    n.launch("attention_combine_f32")
        .mem(part)
        .mem(n.out(0))
        .i32(H)
        .i32(S)
        .i32(Dv)
        .i32(p.splits)
        .i32(os[0])
        .i32(os[1])
        .i32(os[2])
        .i32(zeroRows)
        .run1d(rows * 64);
}

// tl.GeGLU (docs/ops.md): gelu(g) * u, elementwise over one shape.
void gegluOp(const Node& n) {
  requireFloatInputs(n);
  glu(n, n.in(0), n.in(1), n.out(0), elementCount(n.shape(n.out(0))), n.attrString("approximate", "none") == "tanh" ? 3 : 2);
}

// tl.Elementwise's program as the OpenCL kernel `name` of `inputs` inputs: out[i] = the
// last temporary, each input read through broadcast strides. Throws for a program it
// cannot read.
std::string elementwiseSource(const std::string& name, const std::string& program, size_t inputs) {
  static const std::map<std::string, std::pair<const char*, const char*>> ops = {
      {"add", {"(", " + "}}, {"sub", {"(", " - "}}, {"mul", {"(", " * "}}, {"div", {"(", " / "}},
      {"neg", {"(-", ""}}, {"sqrt", {"sqrt(", ""}}, {"recip", {"(1.0f / ", ""}}, {"exp", {"exp(", ""}},
      {"log", {"log(", ""}}, {"tanh", {"tanh(", ""}}, {"erf", {"erf(", ""}}, {"sigmoid", {"(1.0f / (1.0f + exp(-", ""}},
      {"relu", {"fmax(0.0f, ", ""}}, {"abs", {"fabs(", ""}}, {"sin", {"sin(", ""}}, {"cos", {"cos(", ""}}};
  std::string body, last;
  for (size_t pos = 0; pos < program.size();) {  // "tK=op(a,b);..."
    const size_t end = std::min(program.find(';', pos), program.size());
    const std::string step = program.substr(pos, end - pos);
    pos = end + 1;
    const size_t eq = step.find('='), open = step.find('('), close = step.rfind(')');
    if (eq == std::string::npos || open == std::string::npos || close == std::string::npos)
      throw Error("tl.Elementwise: bad program step '" + step + "'", ExitCode::BadInput);
    const std::string out = step.substr(0, eq), op = step.substr(eq + 1, open - eq - 1);
    const auto it = ops.find(op);
    if (it == ops.end()) throw Error("tl.Elementwise: unknown op '" + op + "'", ExitCode::BadInput);
    std::vector<std::string> args;
    for (size_t a = open + 1; a <= close;) {
      const size_t comma = std::min(step.find(',', a), close);
      std::string arg = step.substr(a, comma - a);
      if (!arg.empty() && (std::isdigit(static_cast<unsigned char>(arg[0])) || arg[0] == '-' || arg[0] == '.'))
        arg = "(float)(" + arg + ")";  // a literal
      args.push_back(arg);
      a = comma + 1;
    }
    const bool binary = std::string(it->second.second).size() > 0;
    if (args.size() != (binary ? 2u : 1u)) throw Error("tl.Elementwise: '" + op + "' with " + std::to_string(args.size()) + " operands", ExitCode::BadInput);
    std::string expr = it->second.first + args[0] + (binary ? it->second.second + args[1] : "") + ")";
    if (op == "sigmoid") expr += "))";
    body += "  const float " + out + " = " + expr + ";\n";
    last = out;
  }
  if (last.empty()) throw Error("tl.Elementwise: empty program", ExitCode::BadInput);
  std::string source = "__kernel void " + name + "(__global float* out, int n, int8 dims";
  std::string loads;
  for (size_t i = 0; i < inputs; ++i) {
    const std::string x = "x" + std::to_string(i);
    source += ", __global const float* " + x + "p, int8 s" + std::to_string(i);
    loads += "  const float " + x + " = " + x + "p[strided_offset(i, dims, s" + std::to_string(i) + ")];\n";
  }
  return source + ") {\n  const int i = get_global_id(0);\n  if (i >= n) return;\n" + loads + body + "  out[i] = " + last +
         ";\n}\n";
}

// tl.Elementwise (docs/ops.md): its program as one generated kernel, one per program and
// arity (named by a hash of both), generated and built on its first launch only.
void elementwiseOp(const Node& n) {
  requireFloatInputs(n);
  const std::string program = n.attrString("program", "");
  const size_t inputs = static_cast<size_t>(n.proto.input_size());
  const std::string name = "ew_" + std::to_string(std::hash<std::string>{}(program + "/" + std::to_string(inputs)));
  cl_kernel kernel = n.ex.kernels().generated(name, [&] { return elementwiseSource(name, program, inputs); });
  Dims o = n.shape(n.out(0));
  const int64_t count = elementCount(o);
  std::vector<Dims> strides;
  for (size_t i = 0; i < inputs; ++i) strides.push_back(broadcastStrides(n.shape(n.in(i)), o));
  Dims so = contiguousStrides(o);
  std::vector<Dims*> all = {&so};
  for (auto& st : strides) all.push_back(&st);
  collapse(o, all);
  Launch l(n.ex, n.index, name, kernel);
  l.mem(n.out(0)).i32(count).vec(pad8(o, 1));
  for (size_t i = 0; i < inputs; ++i) l.mem(n.in(i)).vec(pad8(strides[i], 0));
  l.run1d(count);
}

const std::map<std::string, void (*)(const Node&)>& lowerings() {
  static const std::map<std::string, void (*)(const Node&)> table = [] {
    std::map<std::string, void (*)(const Node&)> t;
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Mod", "Equal", "Less", "LessOrEqual",
                           "Greater", "GreaterOrEqual", "And", "Or", "Xor"})
      t[op] = binaryOp;
    for (const char* op : {"Dropout", "Neg", "Abs", "Sqrt", "Reciprocal", "Exp", "Log", "Sin", "Cos", "Tanh", "Erf",
                           "Sigmoid", "Relu", "Floor", "Ceil", "Softplus", "Not", "Gelu", "IsNaN", "IsInf"})
      t[op] = unaryOp;
    for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare",
                           "ReduceL2"})
      t[op] = reduceOp;
    t["Cast"] = castOp;
    t["Where"] = whereOp;
    t["Transpose"] = transposeOp;
    t["Expand"] = expandOp;
    t["Slice"] = sliceOp;
    t["Concat"] = concatOp;
    t["Split"] = splitOp;
    t["Gather"] = gatherOp;
    t["GatherND"] = gatherNDOp;
    t["MatMul"] = matmulOp;
    t["Gemm"] = gemmOp;
    t["Conv"] = convOp;
    // The tl domain (docs/ops.md), keyed "tl.Op".
    t["tl.QMatMul"] = qmatmulOp;
    t["tl.MatMul"] = tlMatmulOp;
    t["tl.RMSNorm"] = rmsNormOp;
    t["tl.RoPE"] = ropeOp;
    t["tl.SwiGLU"] = swigluOp;
    t["tl.GeGLU"] = gegluOp;
    t["tl.Concat"] = concatPairOp;
    t["tl.KvAppend"] = kvAppendOp;
    t["tl.Elementwise"] = elementwiseOp;
    t["tl.Attention"] = attentionOp;
    t["tl.Gelu"] = unaryOp;  // ONNX Gelu's kernels
    t["Softmax"] = softmaxOp;
    t["ArgMax"] = argExtremeOp;
    t["ArgMin"] = argExtremeOp;
    t["LogSoftmax"] = softmaxOp;
    t["LayerNormalization"] = layerNormOp;
    t["Range"] = rangeOp;
    t["ConstantOfShape"] = constantOfShapeOp;
    t["Trilu"] = triluOp;
    return t;
  }();
  return table;
}

}  // namespace

bool isView(const onnx::NodeProto& n, const ShapeAnalysis& analysis) {
  if (n.input_size() < 1 || n.input(0).empty() || n.output_size() < 1 || n.output(0).empty()) return false;
  const std::string& op = n.op_type();
  if (!(n.domain().empty() || n.domain() == "ai.onnx")) return false;
  if (op == "Dropout") return n.output_size() == 1 || n.output(1).empty();
  if (op == "Cast") return analysis.at(n.input(0)).dtype == analysis.at(n.output(0)).dtype;
  return op == "Reshape" || op == "Flatten" || op == "Squeeze" || op == "Unsqueeze" || op == "Identity";
}

int64_t sliceRunOffset(const onnx::NodeProto& n, const Executor& ex) {
  if (!(n.domain().empty() || n.domain() == "ai.onnx") || n.op_type() != "Slice" || n.input_size() < 1 || n.output_size() != 1)
    return -1;
  Dims strides;
  const int64_t off = sliceLayout(n, ex, &strides);
  const Dims& out = ex.shape(n.output(0));
  const Dims os = contiguousStrides(out);
  for (size_t k = 0; k < out.size(); ++k)
    if (out[k] > 1 && strides[k] != os[k]) return -1;
  return off;
}

bool isRunView(const onnx::NodeProto& n, const Executor& ex) {
  if (!(n.domain().empty() || n.domain() == "ai.onnx") || n.input_size() < 1 || n.output_size() != 1) return false;
  const bool expand = n.op_type() == "Expand", slice = n.op_type() == "Slice";
  if (!expand && !slice && n.op_type() != "Transpose") return false;  // before any lookup: every step asks every node
  const Dims& in = ex.shape(n.input(0));
  if (expand) return in == ex.shape(n.output(0));
  if (slice) return sliceRunOffset(n, ex) == 0;  // a prefix of its input
  Dims order;  // the input axes that are not 1, in output order
  const auto* p = findAttr(n, "perm");
  for (size_t i = 0; i < in.size(); ++i) {
    const int64_t a = p ? p->ints(static_cast<int>(i)) : static_cast<int64_t>(in.size() - 1 - i);
    const size_t axis = axisIndex(a, in.size());
    if (axis < in.size() && in[axis] != 1) order.push_back(static_cast<int64_t>(axis));
  }
  return std::is_sorted(order.begin(), order.end());
}

void enqueueNode(Executor& ex, size_t index) {
  const auto& proto = ex.graph().node(index);
  const bool plain = proto.domain().empty() || proto.domain() == "ai.onnx";
  auto it = lowerings().find(plain ? proto.op_type() : proto.domain() + "." + proto.op_type());
  if (it == lowerings().end())
    throw Error("no device kernel for operator '" + (plain ? "" : proto.domain() + ".") + proto.op_type() + "'",
                ExitCode::BadInput);
  it->second(Node{ex, index, proto});
}

}  // namespace tl
