// The pieces every family's lowering uses: argument packing, the launch, the dispatch
// from the op table's device column to the family's lowering.
#include "runtime/lower/lower.h"

#include <algorithm>
#include <cctype>

namespace tl {

cl_int8 pad8(const Dims& v, int64_t fill) {
  if (v.size() > 8) throw Error("rank " + std::to_string(v.size()) + " is over the kernels' limit of 8", ExitCode::BadInput);
  cl_int8 r;
  for (int i = 0; i < 8; ++i) r.s[i] = static_cast<cl_int>(fill);
  for (size_t i = 0; i < v.size(); ++i) r.s[8 - v.size() + i] = static_cast<cl_int>(v[i]);
  return r;
}

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

size_t axisIndex(int64_t a, size_t rank) { return static_cast<size_t>(a < 0 ? a + static_cast<int64_t>(rank) : a); }

Launch::Launch(Executor& ex, size_t node, const std::string& kernel, const char* why)
    : ex_(ex), node_(node), kernel_(ex.kernels().get(kernel)), name_(kernel) {
  openSite(why);
}

Launch::Launch(Executor& ex, size_t node, const std::string& name, cl_kernel kernel, const char* why)
    : ex_(ex), node_(node), kernel_(kernel), name_(name) {
  openSite(why);
}

Launch& Launch::mem(const std::string& tensor) {
  cl_mem m = ex_.dryRun() ? nullptr : ex_.operand(tensor);
  return set(sizeof(m), &m, ArgKind::Mem);
}

Launch& Launch::nullMem() {
  cl_mem m = nullptr;
  return set(sizeof(m), &m, ArgKind::Mem);
}

Launch& Launch::i32(int64_t v) {
  cl_int x = static_cast<cl_int>(v);
  return set(sizeof(x), &x, ArgKind::Int);
}

Launch& Launch::i64(int64_t v) {
  cl_long x = v;
  return set(sizeof(x), &x, ArgKind::Long);
}

Geometry items(int64_t n) {
  Geometry g;
  g.global[0] = static_cast<size_t>((n + 63) / 64 * 64);
  return g;
}

Geometry grid(size_t gx, size_t gy, size_t gz, size_t lx, size_t ly) {
  Geometry g;
  g.dims = 3;
  g.global[0] = gx, g.global[1] = gy, g.global[2] = gz;
  g.local[0] = lx, g.local[1] = ly;
  return g;
}

std::string Launch::where() const { return "kernel " + name_ + ", node '" + ex_.graph().nodeName(node_) + "'"; }

void Launch::openSite(const char* why) {
  if (!ex_.dryRun()) kernel_ = ex_.siteKernel(name_, why, &site_);
}

Launch& Launch::set(size_t size, const void* p, ArgKind kind) {
  if (!ex_.dryRun()) {
    const cl_int err = clSetKernelArg(kernel_, index_, size, p);
    if (err != CL_SUCCESS) clCheck(err, "clSetKernelArg", where());  // where() only when it fails
    ex_.siteArg(site_, index_, kind, p, size);
  }
  ++index_;
  return *this;
}

void Launch::run(const Geometry& g) {
  if (ex_.dryRun() || g.global[0] == 0 || g.global[1] == 0 || g.global[2] == 0) return;
  ex_.launchSite(site_, g.dims, g.global, g.local, cacheBytes_, task_);
}

void requireFloatInputs(const LowerNode& n, int integer) {
  for (int i = 0; i < n.proto.input_size(); ++i) {
    if (!n.hasIn(static_cast<size_t>(i))) continue;
    const DType t = n.dtype(n.in(static_cast<size_t>(i)));
    if (i == integer ? !(isInteger(t) || t == DType::Bool) : t != DType::Float)
      throw Error("tl." + n.proto.op_type() + " has kernels for float32 only" +
                      (integer >= 0 ? " (and integers as input " + std::to_string(integer) + ")" : std::string()),
                  ExitCode::BadInput);
  }
}

const Lowerings* familyLowerings(Family f) {
  switch (f) {
    case Family::None: return nullptr;
    case Family::Elementwise: return &elementwiseLowerings();
    case Family::Movement: return &movementLowerings();
    case Family::MatMul: return &matmulLowerings();
    case Family::Attention: return &attentionLowerings();
    case Family::Norm: return &normLowerings();
    case Family::Reduce: return &reduceLowerings();
    case Family::Conv: return &convLowerings();
  }
  return nullptr;
}

void enqueueNode(Executor& ex, size_t index) {
  const auto& proto = ex.graph().node(index);
  const OpInfo* op = findOp(proto);
  const Lowerings* family = op ? familyLowerings(op->family) : nullptr;
  const auto it = family ? family->find(opKey(proto)) : Lowerings::const_iterator{};
  if (!family || it == family->end())
    throw Error("no device kernel for operator '" + opKey(proto) + "'", ExitCode::BadInput);
  it->second(LowerNode{ex, index, proto});
}

}  // namespace tl
