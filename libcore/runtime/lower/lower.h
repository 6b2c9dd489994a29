// Lowering: each tensor-computing node becomes one or more kernel launches, with shapes,
// strides and offsets computed on the host from the run's binding.
//
// One file per op family (the op table's device column, ops/op_table.h): elementwise.cpp
// (and generated kernels), movement.cpp, matmul.cpp (and quantized), attention.cpp (with
// RoPE and the KV append), norm.cpp, reduce.cpp, conv.cpp. Where a family has kernel
// variants they are rows of a table (Variant below): the condition, the kernel's name
// written out whole, why it is chosen; choosing is one function per family that takes
// the first row whose condition holds, and `tl-run --explain` prints the row each launch
// took. Adding a variant is one row and one kernel.
//
// Internal to runtime/: the executor and the family files include it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "cli/error.h"
#include "graph/attributes.h"
#include "ops/op_table.h"
#include "runtime/executor.h"
#include "tensor/tensor.h"

namespace tl {

using Dims = std::vector<int64_t>;

// Rank-8 vectors, padded on the left (dims with 1, strides with 0).
cl_int8 pad8(const Dims& v, int64_t fill);
// Merges adjacent dims that every operand walks contiguously (and drops dims of 1), so
// kernels divide through as few dims as possible: an elementwise op on same-shaped
// tensors becomes rank 1 whatever its rank was.
void collapse(Dims& dims, std::vector<Dims*> strides);
// Strides that read `in` broadcast to `out` (numpy rules): 0 along broadcast dims.
Dims broadcastStrides(const Dims& in, const Dims& out);
// Kernel name suffixes: by element type (f32, i64, i32, u8) and by size (b8, b32, b64).
const char* typeSuffix(DType t);
const char* sizeSuffix(DType t);
std::string lowerCase(std::string s);
// An axis attribute as an index: negative ones count from the end.
size_t axisIndex(int64_t a, size_t rank);

// A launch's geometry: global and work-group sizes (1-D launches round up to 64).
struct Geometry {
  cl_uint dims = 1;
  size_t global[3] = {1, 1, 1}, local[3] = {64, 1, 1};
};
// n items in work-groups of 64 (a fixed size: drivers that specialize kernels per launch
// geometry, as PoCL does per local size, then build each kernel once, not per shape).
Geometry items(int64_t n);
Geometry grid(size_t gx, size_t gy, size_t gz, size_t lx, size_t ly);
// How many groups of m hold x things (a grid's count of tasks or tiles).
constexpr size_t up(int64_t x, int64_t m) { return static_cast<size_t>((x + m - 1) / m); }

// One launch: a kernel, its arguments, and its geometry.
class Launch {
 public:
  // A missing kernel throws, dry or not. A run sets the arguments of its launch site's own
  // kernel object (Executor::siteKernel), which replays keep. `why` is what --explain says
  // of the choice (a string that lives as long as the program).
  Launch(Executor& ex, size_t node, const std::string& kernel, const char* why = "the op's kernel");
  Launch(Executor& ex, size_t node, const std::string& name, cl_kernel kernel, const char* why);

  Launch& mem(const std::string& tensor);
  Launch& nullMem();
  Launch& i32(int64_t v);
  Launch& i64(int64_t v);
  Launch& f32(float v) { return set(sizeof(v), &v, ArgKind::Float); }
  Launch& vec(const cl_int8& v) { return set(sizeof(v), &v, ArgKind::Int8); }
  Launch& raw(const void* p, size_t n) { return set(n, p, ArgKind::Raw); }

  void run(const Geometry& g);
  void run1d(int64_t n) { run(items(n)); }
  void run3d(size_t gx, size_t gy, size_t gz, size_t lx, size_t ly) { run(grid(gx, gy, gz, lx, ly)); }
  // The launch writes this many bytes of an in-place cache (Executor::cacheTraffic).
  Launch& writesCache(int64_t bytes) {
    cacheBytes_ = bytes;
    return *this;
  }
  // The launch's kernel is a TASK_KERNEL (kernels/common.cl) of `work` multiply-adds,
  // which a task chain (runtime/executor/chains.cpp) may join. `spreads`: its tasks take
  // every (count)-th block, so any count of them computes it.
  Launch& task(int64_t work, bool spreads) {
    task_ = {work, spreads};
    return *this;
  }

 private:
  std::string where() const;
  void openSite(const char* why);
  Launch& set(size_t size, const void* p, ArgKind kind);

  Executor& ex_;
  size_t node_;
  cl_kernel kernel_;
  std::string name_;
  size_t site_ = 0;
  cl_uint index_ = 0;
  int64_t cacheBytes_ = 0;
  TaskWork task_;
};

// Multiply-adds a CPU decode launch may do in one task: a CPU OpenCL's workers sleep
// between launches, and one woken for less work delays the step more than it helps (PoCL
// on a 2-core VM, whose thread wake-ups take some 50 us: bytellama's 16 GEMVs as launches
// of 4 tasks 240-277 us a step, of one 151-156; scripts/cpu_step_cl_lab.c, docs/tl-bench.md).
// The decode GEMVs take a task per this many weights at most.
constexpr int64_t kCpuTaskWork = int64_t{1} << 20;
// A task chain of more work than this runs on a work-group a compute unit (its spreading
// GEMVs split as many ways), less than a task's worth on one: on PoCL here, with its
// workers pinned a core each (device.cpp), bytellama's step at depth 0-128 (some 3 M
// multiply-adds) 7,100-7,600 -> 7,700-9,300 tok/s, at depth 1024 (5 M) 2,700 -> 4,300.
// (Unpinned, two workers shared one core in some runs, and spreading lost there.)
constexpr int64_t kCpuChainSpread = kCpuTaskWork;

// The node being lowered, with the run's shapes.
struct LowerNode {
  Executor& ex;
  size_t index;
  const onnx::NodeProto& proto;

  const std::string& in(size_t i) const { return proto.input(static_cast<int>(i)); }
  const std::string& out(size_t i) const { return proto.output(static_cast<int>(i)); }
  bool hasIn(size_t i) const { return static_cast<int>(i) < proto.input_size() && !in(i).empty(); }
  bool hasOut(size_t i) const { return static_cast<int>(i) < proto.output_size() && !out(i).empty(); }
  const Dims& shape(const std::string& t) const { return ex.shape(t); }
  DType dtype(const std::string& t) const {  // stand-ins (Executor::scratchTensor) are float
    return ex.analysis().tensors.count(t) ? ex.analysis().at(t).dtype : DType::Float;
  }
  bool gpu() const { return ex.device().gpuKernels(); }
  bool built(const std::string& kernel) const { return ex.kernels().has(kernel); }
  Launch launch(const std::string& kernel, const char* why = "the op's kernel") const {
    return Launch(ex, index, kernel, why);
  }
  int64_t attrInt(const char* name, int64_t fallback) const { return tl::attrInt(proto, name).value_or(fallback); }
  float attrFloat(const char* name, float fallback) const { return tl::attrFloat(proto, name).value_or(fallback); }
  std::string attrString(const char* name, const std::string& fallback) const {
    return tl::attrString(proto, name).value_or(fallback);
  }
  const onnx::AttributeProto* attr(const char* name) const { return findAttr(proto, name); }
  size_t axis(int64_t a, size_t rank) const { return axisIndex(a, rank); }
  // The node `index` of the same graph, for a lowering that reads its neighbour's choice.
  LowerNode at(size_t other) const { return {ex, other, ex.graph().node(other)}; }
};

// A kernel variant of a family: the first row of a family's table whose condition holds
// at the binding, and whose kernel was built for the device (kernels that need more local
// memory or larger work-groups than a device has are not), is the one launched.
template <typename Case>
struct Variant {
  const char* kernel;  // the kernel's name, whole: a grep finds the .cl and this row
  bool (*when)(const Case&);
  Geometry (*geometry)(const Case&);
  const char* why;     // --explain's reason
  int mode = 0;        // what else a family's lowering needs to know of the row
};
// The chosen row; nullptr when none fits.
template <typename Case, size_t N>
const Variant<Case>* findVariant(const Variant<Case> (&rows)[N], const Case& c, const LowerNode& n) {
  for (const auto& r : rows)
    if (r.when(c) && n.built(r.kernel)) return &r;
  return nullptr;
}
// The chosen row; throws when none fits.
template <typename Case, size_t N>
const Variant<Case>& chooseVariant(const Variant<Case> (&rows)[N], const Case& c, const LowerNode& n) {
  if (const auto* r = findVariant(rows, c, n)) return *r;
  throw Error("no kernel variant of " + opKey(n.proto) + " fits this node's shapes on this device", ExitCode::BadInput);
}
// A row's launch: its kernel, with its reason for --explain.
template <typename Case>
Launch launchVariant(const LowerNode& n, const Variant<Case>& v) {
  return n.launch(v.kernel, v.why);
}

// The fused tl ops have float32 kernels only; any other input dtype is an error naming
// the op. Every input float32 but `integer` (-1: none), which must then be an integer type.
void requireFloatInputs(const LowerNode& n, int integer = -1);

// Lowerings shared across families.
// elementwise.cpp: `op`'s broadcasting binary kernel (add, mul, ...) of a and b into dst.
void binary(const LowerNode& n, const std::string& op, const std::string& a, const std::string& b, const std::string& dst);
// elementwise.cpp: glu_f32, out = gate(g) * u over `count` values, common.cl's glu_gate kind.
void glu(const LowerNode& n, const std::string& g, const std::string& u, const std::string& out, int64_t count, int kind);
// norm.cpp: tl.RMSNorm's kernels over rows of `cols` values of x (+ residual), scaled,
// into y (and the sum into `sum`); "" for an absent residual or sum.
void rmsNorm(const LowerNode& n, const std::string& x, const std::string& residual, const std::string& scale,
             const std::string& y, const std::string& sum, int64_t rows, int64_t cols, float eps);
// movement.cpp: out[outOff + outStrides . c] = in[inOff + inStrides . c] for c over dims
// (copy_b32 and its kin), one launch.
void copyRegion(const LowerNode& n, const std::string& src, const std::string& dst, Dims dims, int64_t inOff,
                Dims inStrides, int64_t outOff, Dims outStrides);
// movement.cpp: Concat, and tl.Concat's pair in one launch (tl.KvAppend off the plan).
void concatOp(const LowerNode& n);
void concatPairOp(const LowerNode& n);

// The decode attention's splits that a one-row tl.QMatMul merges as it reads its A (the
// node attribute `merge_attention`, written by tl-fuse): the splits' scratch and what the
// merge needs. Both nodes ask attention.cpp's mergedSplits, so they agree.
struct MergedSplits {
  std::string part;
  int64_t splits = 0, Dv = 0, zeroRows = 0;
};
// attention.cpp: the splits of the tl.Attention behind tl.QMatMul `reader` (through views),
// when at this binding it takes a per-row decode variant of 2 to `maxSplits` splits, over
// query rows of one batch row and position, its heads `K` values together in multiples of 32.
std::optional<MergedSplits> mergedSplits(const LowerNode& reader, int64_t maxSplits, int64_t K);
// matmul.cpp: whether a tl.QMatMul marked `merge_attention` merges the attention's splits
// at this binding (it takes a one-row merging GEMV, built for the device).
bool mergesAttention(const LowerNode& qmatmul);

// The RoPE epilogue of a merged q/k/v tl.QMatMul or tl.MatMul (kernels/gemm.cl's
// rope_pair_store): both nodes ask, so they agree. attention.cpp: the index of the tl.RoPE
// over in-place caches whose work the GEMM `gemm` may do in its store (its q, k and v reach
// the RoPE through views read by nothing else, stored [B, S, H, D]; every dim rotary; one
// cos and sin for all heads; 8-bit caches only for heads of a multiple of 64; the attention
// does not do it), or -1; and that work's arguments (ROPE_EPI_ARGS) on the GEMM's launch.
int ropeForGemm(const LowerNode& gemm);
void ropeEpilogueArgs(const LowerNode& gemm, int rope, Launch& l);
// matmul.cpp: whether `gemm` (a tl.QMatMul, or a tl.MatMul's float weights) takes a row
// with that epilogue at this binding where ropeForGemm finds it a RoPE (a cheap test:
// decode's GEMVs never do).
bool gemmTakesRope(const LowerNode& gemm);

// The op table's View::AtBinding ops (movement.cpp). A node that is a view at this run's shapes only: a Transpose that moves dims of 1 alone
// (a decode step's [B, 1, H, D] -> [B, H, 1, D]), an Expand to its input's own shape, a
// Slice that is a prefix of its input (a decode step's mask [1, 1, 1, max] -> [1, 1, 1, T]).
bool isRunView(const onnx::NodeProto& node, const Executor& ex);

// Where a Slice's output starts in its input (elements), if at this run's shapes the
// output is one contiguous run of the input's elements (a decode step's q, k, v split of
// one [1, 1, 3 * H * D] projection); -1 otherwise, or for another op. From a later
// element than 0 the Executor makes it a sub-buffer where the device's alignment allows.
int64_t sliceRunOffset(const onnx::NodeProto& node, const Executor& ex);

// Enqueues the kernels of one tensor-computing node: its family's lowering (the op table's
// device column). In a dry run it only looks up the kernels, so missing ones are found
// before anything runs.
void enqueueNode(Executor& ex, size_t node);

// Each family's lowerings by op key (ops/op_table.h's opKey).
using Lowering = void (*)(const LowerNode&);
using Lowerings = std::map<std::string, Lowering>;
const Lowerings& elementwiseLowerings();
const Lowerings& movementLowerings();
const Lowerings& matmulLowerings();
const Lowerings& attentionLowerings();
const Lowerings& normLowerings();
const Lowerings& reduceLowerings();
const Lowerings& convLowerings();
// The family's table; nullptr for Family::None.
const Lowerings* familyLowerings(Family f);

}  // namespace tl
