// The attention family: tl.Attention, tl.RoPE and tl.KvAppend (the RoPE's and the append's
// writes into the KV caches, and the attention's reads of them, share the caches' layout).
// tl.Attention's variants are the rows of kAttention. Two decisions span nodes; passes
// take them and write them into the artifact, and the runtime reads them:
// - tl-plan's `in_attention` on a tl.RoPE: at decode (a row of mode Dec or Gqa) and at GPU
//   prefill (mode Flash: attention_flash_f32) the attention reading its q does its work
//   (kernels/attention.cl's ATT_FRESH_ARGS), a launch fewer a layer; tl-plan keeps the
//   RoPE's inputs alive until the attention.
// - tl-fuse's `merge_attention` on a tl.QMatMul reading the attention's output: a one-row
//   GEMV merges the attention's splits as it reads them (matmul.cpp), and the attention
//   launches no combine.
#include <algorithm>
#include <array>
#include <cmath>

#include "runtime/lower/lower.h"

namespace tl {
namespace {

// tl.Attention's operands as its kernels read them: logical dims [B, heads, rows, size] of
// q, k and v, and their element strides (b, head, row).
struct AttentionViews {
  Dims q, k, v, qs, ks, vs;
};
AttentionViews attentionViews(const LowerNode& n) {
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

// What the choice of a tl.Attention variant sees: its logical dims at the binding.
struct AttentionCase {
  bool gpu = false;
  int64_t B = 0, H = 0, S = 0, D = 0, Hkv = 0, T = 0, Dv = 0;
  bool plain = false;  // no float mask or soft cap
  int64_t computeUnits = 0;
  int64_t rows() const { return B * H * S; }
  int64_t groupRows() const { return H / Hkv * S; }  // query rows that share a kv head
  // Decode rows: heads up to 128, multiples of 4, their keys an item each.
  bool decode() const { return gpu && S <= kGpuDecodeRows && D <= 128 && Dv <= 128 && D % 4 == 0 && Dv % 4 == 0; }
};
AttentionCase attentionCase(const LowerNode& n, const AttentionViews& a) {
  return {n.gpu(), a.q[0], a.q[1], a.q[2], a.q[3], a.k[1], a.k[2], a.v[3],
          !n.hasIn(3) && n.attrFloat("softcap", 0.0f) == 0.0f, static_cast<int64_t>(n.ex.device().info().computeUnits)};
}

// How a variant's work-groups divide the keys: splits of `chunk` keys each (merged by
// attention_combine_f32 or the GEMV that reads the output), `groups` work-groups of
// `groupSize` items per split.
struct KeySplit {
  int64_t splits = 1, chunk = 0, groups = 0;
  size_t groupSize = 64;
};
// A row's `mode`. Dec, Gqa, Flash and CpuDec rows can do a tl.RoPE's work (joinedRope).
enum Mode { Tile, Flash, Gqa, Dec, Wg, Cpu, CpuDec };
// Whether a row of this mode takes ATT_FRESH_ARGS (kernels/attention.cl): a RoPE's work.
bool takesRope(int mode) { return mode == Dec || mode == Gqa || mode == Flash || mode == CpuDec; }
constexpr int64_t kMaxGroups = 1024;   // so at most 1024 splits: attention_combine_f32's ATT_MAX_SPLITS
constexpr int64_t kGqaBlock = 32, kGqaGroup = 256;  // kernels/attention.cl's GQA_BK, GQA_WG
constexpr int64_t kGqaMerge = 4096;                  // kernels/attention.cl's GQA_MERGE
// Past this many splits attention_combine_f32 merges them sooner than the last work-group
// (126 splits: 45.4 us against 43.5 with the combine; 63: 27.9 against 28.7; H200, att_lab).
constexpr int64_t kGqaMergeSplits = 64;
constexpr int64_t kCpuAttentionRows = 16;  // kernels/attention.cl's ATT_CPUQ_ROWS
constexpr int64_t kCpuDecRows = 8;         // kernels/attention.cl's ATT_CPUG_ROWS
KeySplit keySplit(int mode, const AttentionCase& c) {
  KeySplit k;
  const int64_t T = c.T;
  k.groups = mode == Gqa ? c.B * c.Hkv : c.rows();
  if (mode == Dec || mode == Gqa) {  // chunks of at least a block, up to 1024 work-groups (flash-decoding)
    const int64_t block = mode == Gqa ? kGqaBlock : 64;
    const int64_t most = std::max<int64_t>(1, kMaxGroups / std::max<int64_t>(k.groups, 1));
    k.splits = std::clamp<int64_t>(mode == Gqa ? (T + block - 1) / block : T / block, 1, most);
    k.chunk = (T + k.splits - 1) / k.splits;
    if (mode == Gqa) {  // whole blocks, no split left empty
      k.chunk = (k.chunk + block - 1) / block * block;
      k.splits = (T + k.chunk - 1) / k.chunk;
      k.groupSize = kGqaGroup;
    }
  } else if (mode == Wg) {  // about 128 work-groups
    k.splits = std::clamp<int64_t>(128 / std::max<int64_t>(c.rows(), 1), 1, (T + 127) / 128);
    k.chunk = (T + k.splits - 1) / k.splits;
  } else {
    k.chunk = T;
  }
  return k;
}
Geometry splitGeometry(int mode, const AttentionCase& c) {
  const KeySplit k = keySplit(mode, c);
  return grid(static_cast<size_t>(k.groups) * k.groupSize, static_cast<size_t>(k.splits), 1, k.groupSize, 1);
}

bool isDecRow(const AttentionCase& c, int64_t d) { return c.decode() && c.D == d && c.Dv == d; }
// Prefill rows on GPUs share each key tile among 16 rows (heads up to 128 wide). Decode
// rows go a work-group per row and split of the keys. Over more than 256 keys, a
// grouped-query layer's decode rows go a work-group per (kv head, chunk of keys), its 2 to
// 16 query rows together (GQA_MAXR), so the cache is read once per kv head: on the H100
// TinyLlama's tg128@d2048 went from 347 to 407 tok/s, and with a chunk of one block of
// kGqaBlock keys per work-group (where 1024 work-groups allow) to 496. Over fewer keys the
// per-row kernel won (docs/tl-bench.md, sessions 7, 8 and 12). Devices with little local
// memory or small work-groups lack the tile, GQA and 128-wide kernels (ATT_FITS; the GQA
// kernel needs more than the decode rows' ones, so where it is built they are).
// Tensor-core prefill rows take 128 query rows a work-group (8 warps, each key tile staged
// for twice the rows) where those work-groups still fill every compute unit, else 64.
// A work-group's warps take 16 rows each of G query heads of one kv head (kernels/
// attention.cl's att_mma_heads: the largest power of two dividing the group's heads and
// the warps), so its rows span 16 * warps / G positions.
int64_t mmaHeads(const AttentionCase& c, int64_t warps) {
  int64_t g = 1;
  const int64_t rep = c.H / std::max<int64_t>(c.Hkv, 1);
  while (g < warps && rep % (2 * g) == 0) g *= 2;
  return g;
}
template <int64_t Warps> size_t mmaGroups(const AttentionCase& c) {
  const int64_t g = mmaHeads(c, Warps), rows = 16 * Warps / g;
  return static_cast<size_t>(c.B * (c.H / g) * ((c.S + rows - 1) / rows));
}
bool isMmaRow(const AttentionCase& c, int64_t d) { return c.gpu && c.S > kGpuDecodeRows && c.plain && c.D == d && c.Dv == d; }
bool isMma128Row(const AttentionCase& c, int64_t d) {
  return isMmaRow(c, d) && mmaGroups<8>(c) >= static_cast<size_t>(c.computeUnits);
}
template <int64_t Rows> Geometry mmaGeometry(const AttentionCase& c) {  // 16 rows a warp
  return grid(mmaGroups<Rows / 16>(c) * 2 * Rows, 1, 1, 2 * Rows, 1);
}
constexpr const char* kMma128Why =
    "GPU prefill, NVIDIA tensor cores: flash attention, 128 query rows a work-group, f16 products";
constexpr const char* kMmaWhy = "GPU prefill, NVIDIA tensor cores: flash attention, 64 query rows a work-group, f16 products";
const Variant<AttentionCase> kAttention[] = {
    {"attention_mma_d64_r128", [](const AttentionCase& c) { return isMma128Row(c, 64); }, mmaGeometry<128>,
     kMma128Why, Tile},
    {"attention_mma_d128_r128", [](const AttentionCase& c) { return isMma128Row(c, 128); }, mmaGeometry<128>,
     kMma128Why, Tile},
    {"attention_mma_d64", [](const AttentionCase& c) { return isMmaRow(c, 64); }, mmaGeometry<64>, kMmaWhy, Tile},
    {"attention_mma_d128", [](const AttentionCase& c) { return isMmaRow(c, 128); }, mmaGeometry<64>, kMmaWhy, Tile},
    {"attention_flash_f32",
     [](const AttentionCase& c) { return c.gpu && c.S > kGpuDecodeRows && c.plain && c.D <= 64 && c.Dv <= 64 && c.Dv % 4 == 0; },
     [](const AttentionCase& c) { return grid(static_cast<size_t>(c.B * c.H * ((c.S + 63) / 64)) * 256, 1, 1, 256, 1); },
     "GPU prefill, heads up to 64: flash attention, 64 query rows a work-group, 4 x 2 scores and 4 x 4 outputs an item",
     Flash},
    {"attention_tile_f32", [](const AttentionCase& c) { return c.gpu && c.S > kGpuDecodeRows && c.D <= 128 && c.Dv <= 128; },
     [](const AttentionCase& c) { return grid(static_cast<size_t>(c.B * c.H * ((c.S + 15) / 16)) * 64, 1, 1, 64, 1); },
     "GPU prefill: 16 query rows share each tile of 32 keys in local memory", Tile},
    {"attention_gqa_f32",
     [](const AttentionCase& c) { return c.decode() && c.T > 256 && c.groupRows() >= 2 && c.groupRows() <= 16; },
     [](const AttentionCase& c) { return splitGeometry(Gqa, c); },
     "GPU decode over 256+ keys: a kv head's query rows together, each block of keys read once", Gqa},
    {"attention_dec128_f32", [](const AttentionCase& c) { return isDecRow(c, 128); },
     [](const AttentionCase& c) { return splitGeometry(Dec, c); },
     "GPU decode, heads of 128: a work-group per row and split of the keys, 4 items a key (a quarter of its dims each)", Dec},
    {"attention_dec64_f32", [](const AttentionCase& c) { return isDecRow(c, 64); },
     [](const AttentionCase& c) { return splitGeometry(Dec, c); },
     "GPU decode, heads of 64: a work-group per row and split of the keys, 4 items a key (a quarter of its dims each)", Dec},
    {"attention_dec32_f32", [](const AttentionCase& c) { return isDecRow(c, 32); },
     [](const AttentionCase& c) { return splitGeometry(Dec, c); },
     "GPU decode, heads of 32: a work-group per row and split of the keys, 4 items a key (a quarter of its dims each)", Dec},
    {"attention_dec_f32",
     [](const AttentionCase& c) { return c.decode() && !isDecRow(c, 32) && !isDecRow(c, 64) && !isDecRow(c, 128); },
     [](const AttentionCase& c) { return splitGeometry(Dec, c); },
     "GPU decode, other heads: a work-group per row and split of the keys", Dec},
    {"attention_wg_f32", [](const AttentionCase& c) { return c.gpu; },
     [](const AttentionCase& c) { return splitGeometry(Wg, c); },
     "GPU, other shapes: a work-group per row and split, blocks of 64 keys", Wg},
    {"attention_cpu_f32",
     [](const AttentionCase& c) { return !c.gpu && c.S > kCpuDecodeRows && c.plain && c.D <= 128 && c.Dv <= 128 && c.Dv % 8 == 0; },
     [](const AttentionCase& c) {
       return grid(static_cast<size_t>(c.B * c.H) * up(c.S, kCpuAttentionRows), 1, 1, 1, 1);
     },
     "CPU prefill: a task per 16 query rows as a vector's lanes, keys 16 at a time", Cpu},
    {"attention_cpu_dec_f32",
     [](const AttentionCase& c) {
       return !c.gpu && c.S <= kCpuDecodeRows && c.D % 8 == 0 && c.Dv % 8 == 0 && c.D <= 128 && c.Dv <= 128;
     },
     [](const AttentionCase& c) {
       return grid(static_cast<size_t>(c.B * c.Hkv * up(c.groupRows(), kCpuDecRows)), 1, 1, 1, 1);
     },
     "CPU decode: a task per kv head's query rows (up to 8), each block of 16 keys converted once for them, 8 dims a "
     "step",
     CpuDec},
    {"attention_f32", [](const AttentionCase&) { return true; },
     [](const AttentionCase& c) { return grid(static_cast<size_t>(c.rows()), 1, 1, 1, 1); }, "CPU: an item per query row",
     Cpu},
};

// A tl.Attention's choice at this binding.
struct AttentionChoice {
  AttentionViews views;
  AttentionCase c;
  const Variant<AttentionCase>* variant;
  KeySplit keys;
};
AttentionChoice attentionChoice(const LowerNode& n) {
  AttentionChoice a;
  a.views = attentionViews(n);
  a.c = attentionCase(n, a.views);
  a.variant = &chooseVariant(kAttention, a.c, n);
  a.keys = keySplit(a.variant->mode, a.c);
  return a;
}

// A tl.RoPE's input 0, 3 or 6 (q, k, v) as the kernels read it: [B, H, S, D], through the
// Transpose(0,2,1,3) that rope-bshd absorbed where its flag is set.
constexpr const char* kRopeBshd[] = {"x_bshd", "x2_bshd", "x3_bshd"};
Dims ropeInputDims(const onnx::NodeProto& rope, const Dims& stored, int input) {
  Dims d = stored;
  if (attrInt(rope, kRopeBshd[input / 3]).value_or(0)) {
    if (d.size() != 4)
      throw Error(std::string("tl.RoPE's ") + kRopeBshd[input / 3] + " input must be of rank 4", ExitCode::BadInput);
    std::swap(d[1], d[2]);
  }
  return d;
}
Dims ropeInputDims(const LowerNode& n, int input) { return ropeInputDims(n.proto, n.shape(n.in(input)), input); }
// The kernels' `bshd` (xbshd): bit 0, 1, 2 where q, k, v are stored [B, S, H, D].
int ropeBshdBits(const onnx::NodeProto& rope) {
  int bits = 0;
  for (int i = 0; i < 3; ++i)
    if (attrInt(rope, kRopeBshd[i]).value_or(0)) bits |= 1 << i;
  return bits;
}

// Element strides (b, head, row, dim) of a tl.RoPE's position ids read as `dims`, when
// they hold one position per (batch, row); empty otherwise.
Dims ropePositionStrides(const LowerNode& n, const onnx::NodeProto& rope, const Dims& dims) {
  const Dims& p = n.shape(rope.input(1));
  if (p.size() > dims.size()) return {};
  const Dims st = broadcastStrides(p, dims);
  return st.size() == 4 && st[1] == 0 && st[3] == 0 ? st : Dims{};
}

// The tl.RoPE whose work this attention launch (a GPU or CPU decode row, or a Flash row)
// does itself, or null: tl-plan marked it (`in_attention`: it appends to in-place caches
// that only this attention reads, and its q is read by it alone), it wrote those caches
// at this binding, its new rows are
// [B, Hkv, S, D] with one position per (batch, row), and no buffer of this run overlaps
// the RoPE's inputs, which the attention then reads (tl-plan keeps them alive; a plan
// could still share them where a run binds other sizes). The decode rows read those
// inputs as [B, H, S, D]: stored [B, S, H, D] (rope-bshd) they are that at S = 1 alone;
// the Flash rows read either (ATT_FRESH_ARGS' xbshd).
// The tensor-core rows (mode Tile) leave it to the q/k/v projection's store where that
// takes it (ropeForGemm), else to rope_kv_f32: on the H200 the attention was slower
// both ways it was joined there: each of a kv head's query heads rotating every new key
// itself (Qwen2-0.5B dims pp1024 62,126 tok/s joined, 74,485 apart), and the work-groups
// sharing out the appends and waiting for them all in the launch (TinyLlama-1.1B dims
// pp128 32,080 and 36,910, Qwen2-0.5B dims 33,814 and 41,525; docs/tl-bench.md).
const onnx::NodeProto* joinedRope(const LowerNode& n, const AttentionChoice& a) {
  const int mode = a.variant->mode;
  if (!takesRope(mode)) return nullptr;
  const int at = n.ex.graph().producer(n.in(0));
  if (at < 0) return nullptr;
  const auto& r = n.ex.graph().node(static_cast<size_t>(at));
  if (!attrInt(r, "in_attention").value_or(0) || r.input_size() < 7 || r.output_size() < 3 || r.output(1) != n.in(1) ||
      r.output(2) != n.in(2) || !n.ex.cacheStrides(n.in(1)) || !n.ex.cacheStrides(n.in(2)))
    return nullptr;  // the mark, on what it says it is, over in-place caches
  const int64_t B = a.c.B, S = a.c.S, Hkv = a.c.Hkv;
  if (mode != Flash && S != 1 && ropeBshdBits(r)) return nullptr;
  if (ropeInputDims(r, n.shape(r.input(3)), 3) != Dims{B, Hkv, S, a.c.D} ||
      ropeInputDims(r, n.shape(r.input(6)), 6) != Dims{B, Hkv, S, a.c.Dv})
    return nullptr;
  if (ropePositionStrides(n, r, a.views.q).size() != 4) return nullptr;
  if (n.ex.dryRun()) return &r;
  for (int i : {0, 3, 6})
    if (n.ex.overlaps(n.out(0), r.input(i))) return nullptr;
  return &r;
}

// Whether the attention reading this tl.RoPE's q does its work at this binding.
bool joinedToAttention(const LowerNode& n) {
  if (!n.attrInt("in_attention", 0)) return false;
  const auto& readers = n.ex.graph().consumers(n.out(0));
  if (readers.size() != 1) return false;
  const LowerNode attention = n.at(readers[0]);
  return joinedRope(attention, attentionChoice(attention)) == &n.proto;
}

// The cos and sin's arguments (common.cl's ROPE_TRIG_ARGS): tables, or computed from
// position ids.
void ropeTrigArgs(const LowerNode& n, Launch& l) {
  l.i32(n.attrInt("positions", 0)).f32(n.attrFloat("cos_scale", 1.0f)).f32(n.attrFloat("sin_scale", 1.0f));
}
// The RoPE kernels' last arguments: which inputs are stored [B, S, H, D] (bits 0, 1, 2 for
// x, x2, x3), then the cos and sin's.
void ropeLastArgs(const LowerNode& n, Launch& l) {
  l.i32(ropeBshdBits(n.proto));
  ropeTrigArgs(n, l);
}

// Whether the tl.QMatMul or tl.MatMul that writes this tl.RoPE's q (through views) does its
// work in its store at this binding (ropeForGemm, and the GEMM's row takes it).
bool ropeInGemm(const LowerNode& n) {
  const ViewChain q = producerThroughViews(n.ex.graph(), n.in(0), n.ex.analysis().dtypeOf());
  if (q.producer < 0) return false;
  const LowerNode gemm = n.at(static_cast<size_t>(q.producer));
  return gemmTakesRope(gemm) && ropeForGemm(gemm) == static_cast<int>(n.index);
}

// tl.RoPE with cache_axis (docs/ops.md): after q's arguments, k rotated into Concat(past_k,
// ·) and v into Concat(past_v, v), one launch (rope_cache_f32).
void ropeCache(const LowerNode& n, Launch& l, int64_t count) {
  const Dims k = ropeInputDims(n, 3);
  l.mem(n.in(3)).vec(pad8(k, 1)).vec(pad8(broadcastStrides(n.shape(n.in(1)), k), 0));
  l.vec(pad8(broadcastStrides(n.shape(n.in(2)), k), 0));
  const size_t axis = n.axis(n.attrInt("cache_axis", 0), k.size());
  if (axis != 2 && (n.attrInt("x2_bshd", 0) || n.attrInt("x3_bshd", 0)))
    throw Error("tl.RoPE reads k and v stored [B, S, H, D] for a cache along axis 2 only", ExitCode::BadInput);
  int64_t total = count;
  for (auto [past, fresh, out] : {std::array<size_t, 3>{4, 3, 1}, std::array<size_t, 3>{5, 6, 2}}) {
    const Dims& o = n.shape(n.out(out));
    const int64_t inner = elementsAfter(o, axis);
    if (fresh == 6) l.mem(n.in(fresh));
    l.mem(n.in(past)).mem(n.out(out)).i32(elementCount(o)).i32(inner).i32(o[axis]).i32(n.shape(n.in(past))[axis]);
    total += elementCount(o);
  }
  ropeLastArgs(n, l);
  l.run1d(total);
}

// New rows [B, H, N, D] (`x`) of in-place cache `cache` (kv_append_f32's and rope_kv_f32's
// arguments after the tensor): elements, heads, rows, size, the cache's strides.
int64_t kvRowsArgs(const LowerNode& n, Launch& l, const Dims& x, const std::string& cache) {
  const Dims& st = *n.ex.cacheStrides(cache);
  if (x.size() != 4) throw Error("tl-plan's cache appends take [B, H, N, D] rows", ExitCode::BadInput);
  l.i32(elementCount(x)).i32(x[1]).i32(x[2]).i32(x[3]).i32(st[0]).i32(st[1]).i32(st[2]);
  return elementCount(x);
}

constexpr int64_t kRopeCpuTokens = 16;  // kernels/elementwise.cl's ROPE_CPU_TOKENS
constexpr int64_t kRopeCpuMid = 128;    // ... and ROPE_CPU_MID

// rope_kv_cpu_f32's cases (a task per kRopeCpuTokens tokens): a CPU, caches not 8-bit, cos
// and sin shared by the heads (their strides along H zero, for q and for k), v rows of q's
// length, at most kRopeCpuMid rotated pairs. Built only for CPUs (TL_CPU): the tests that
// force the CPU kernel family on a GPU run rope_kv_f32.
bool ropePerToken(const LowerNode& n) {
  if (n.gpu() || n.ex.kvType() == KvType::Q8 || !n.built("rope_kv_cpu_f32")) return false;
  const Dims q = ropeInputDims(n, 0), k = ropeInputDims(n, 3), v = ropeInputDims(n, 6);
  if (q.size() != 4 || k.size() != 4 || v.size() != 4 || v[2] != q[2]) return false;
  for (const Dims* d : {&q, &k})
    for (size_t t : {1, 2})
      if (broadcastStrides(n.shape(n.in(t)), *d)[1] != 0) return false;
  return n.attrInt("rotary_dim", q[3]) / 2 <= kRopeCpuMid;
}

// tl.RoPE with cache_axis over in-place caches (tl-plan): q rotated, the new k rows rotated
// into their cache and the new v rows copied into theirs after the true length (rope_kv_f32,
// or on CPUs rope_kv_cpu_f32 where ropePerToken).
void ropeInPlace(const LowerNode& n, Launch& l, int64_t count, bool perToken) {
  const Dims k = ropeInputDims(n, 3);
  if (n.axis(n.attrInt("cache_axis", 0), k.size()) != 2) throw Error("tl.RoPE appends in place along axis 2 only", ExitCode::BadInput);
  l.mem(n.in(3)).vec(pad8(k, 1)).vec(pad8(broadcastStrides(n.shape(n.in(1)), k), 0));
  l.vec(pad8(broadcastStrides(n.shape(n.in(2)), k), 0)).mem(n.out(1));
  const int64_t nk = kvRowsArgs(n, l, k, n.out(1));
  l.mem(n.in(6)).mem(n.out(2));
  const Dims v = ropeInputDims(n, 6);
  const int64_t nv = kvRowsArgs(n, l, v, n.out(2));
  l.mem(Executor::kKvRows);
  ropeLastArgs(n, l);
  const Dims q = ropeInputDims(n, 0);
  if (q.size() != 4 || ropeInputDims(n, 3)[2] != q[2] || ropeInputDims(n, 3)[3] != q[3])
    throw Error("tl.RoPE appending in place takes q [B, H, S, D] and k rows of its S and D", ExitCode::BadInput);
  const int64_t tokens = count / (q[1] * q[3]);
  if (perToken)  // (a task per kRopeCpuTokens tokens, which a task chain may join)
    return l.writesCache(n.ex.kvBytes(nk + nv)).task(count + nk + nv, false).run(grid(up(tokens, kRopeCpuTokens), 1, 1, 1, 1));
  // An item per (b, s) and rotated pair or other dim of q and k, then per (b, s, d) of v;
  // on GPUs a head of each in the second dimension (the kernel's comment says why).
  const int64_t rot = n.attrInt("rotary_dim", q[3]);
  const int64_t items = tokens * (q[3] - rot / 2) + nv / v[1];
  const int64_t heads = n.gpu() ? std::max({q[1], k[1], v[1]}) : 1;
  l.writesCache(n.ex.kvBytes(nk + nv)).run(grid(static_cast<size_t>((items + 63) / 64 * 64), static_cast<size_t>(heads), 1, 64, 1));
}

// tl.KvAppend (docs/ops.md): Concat(past, new) per pair; on in-place caches (tl-plan) only
// the new rows are written (kv_append_f32), else the pairs are concatenated.
void kvAppendOp(const LowerNode& n) {
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
      total += kvRowsArgs(n, l, n.shape(n.in(2 * j + 1)), n.out(j));
    } else {
      l.nullMem().nullMem().i32(0).i32(1).i32(1).i32(1).i32(0).i32(0).i32(0);
    }
  }
  l.mem(Executor::kKvRows).writesCache(n.ex.kvBytes(total)).run1d(total);
}

// tl.RoPE (docs/ops.md): rotate-half rotary embedding in one pass over x (and over the
// second input, q's k, in the same launch).
void ropeOp(const LowerNode& n) {
  const bool positions = n.attrInt("positions", 0) != 0;
  requireFloatInputs(n, positions ? 1 : -1);
  if (positions && n.dtype(n.in(1)) != DType::Int64) throw Error("tl.RoPE's position ids must be int64", ExitCode::BadInput);
  const Dims d = ropeInputDims(n, 0);
  const int64_t count = elementCount(d);
  const bool inPlace = n.attr("cache_axis") && n.ex.cacheStrides(n.out(1)) && n.ex.cacheStrides(n.out(2));
  if (inPlace && (joinedToAttention(n) || ropeInGemm(n))) return;  // another launch does this one's work
  const bool perToken = inPlace && ropePerToken(n);
  Launch l = perToken               ? n.launch("rope_kv_cpu_f32", "appending k and v to in-place caches (tl-plan), a task per 16 tokens")
             : inPlace              ? n.launch("rope_kv_f32", "appending k and v to in-place caches (tl-plan)")
             : n.attr("cache_axis") ? n.launch("rope_cache_f32", "appending k and v to caches by Concat")
                                    : n.launch("rope_f32", "q (and k) rotated");
  l.mem(n.in(0)).mem(n.in(1)).mem(n.in(2)).mem(n.out(0)).i32(count).i32(d.back()).i32(n.attrInt("rotary_dim", d.back()));
  l.vec(pad8(d, 1)).vec(pad8(broadcastStrides(n.shape(n.in(1)), d), 0)).vec(pad8(broadcastStrides(n.shape(n.in(2)), d), 0));
  if (inPlace) return ropeInPlace(n, l, count, perToken);
  if (n.attr("cache_axis")) return ropeCache(n, l, count);
  int64_t count2 = 0;
  if (n.hasIn(3)) {
    const Dims d2 = ropeInputDims(n, 3);
    count2 = elementCount(d2);
    l.mem(n.in(3)).mem(n.out(1)).i32(count2).vec(pad8(d2, 1));
    l.vec(pad8(broadcastStrides(n.shape(n.in(1)), d2), 0)).vec(pad8(broadcastStrides(n.shape(n.in(2)), d2), 0));
  } else {
    const cl_int8 none = pad8({}, 0);
    l.nullMem().nullMem().i32(0).vec(none).vec(none).vec(none);
  }
  ropeLastArgs(n, l);
  l.run1d(count + count2);
}

// The tl.QMatMul marked `merge_attention` that reads this attention's output (through
// views), or -1.
int mergeReader(const LowerNode& n) {
  const Graph& g = n.ex.graph();
  for (std::string t = n.out(0);;) {
    const auto& readers = g.consumers(t);
    if (readers.size() != 1) return -1;
    const auto& r = g.node(readers[0]);
    if (r.domain() == "tl" && r.op_type() == "QMatMul")
      return r.input(0) == t && attrInt(r, "merge_attention").value_or(0) ? static_cast<int>(readers[0]) : -1;
    if (!isView(r, n.ex.analysis().dtypeOf())) return -1;
    t = r.output(0);
  }
}

// The tl.Attention behind a tl.QMatMul's A, through views, or -1.
int attentionBehind(const LowerNode& n) {
  const ViewChain a = producerThroughViews(n.ex.graph(), n.in(0), n.ex.analysis().dtypeOf());
  if (a.producer < 0) return -1;
  const auto& p = n.ex.graph().node(static_cast<size_t>(a.producer));
  return p.domain() == "tl" && p.op_type() == "Attention" && p.output(0) == a.tensors.back() ? a.producer : -1;
}

// tl.Attention (docs/ops.md): the row of kAttention, then the merge of its splits by
// attention_combine_f32, or by the GEMV that reads the output (merge_attention).
void attentionOp(const LowerNode& n) {
  requireFloatInputs(n, 4);  // the key mask is read as integers
  const AttentionChoice choice = attentionChoice(n);
  const AttentionViews& a = choice.views;
  const Dims& q = a.q;
  const int64_t B = choice.c.B, H = choice.c.H, S = choice.c.S, D = choice.c.D, Hkv = choice.c.Hkv, T = choice.c.T,
                Dv = choice.c.Dv;
  if (D > 256 || Dv > 256) throw Error("tl.Attention's kernels take head sizes up to 256", ExitCode::BadInput);
  if (n.ex.kvType() != KvType::F32 && !(n.ex.cacheStrides(n.in(1)) && n.ex.cacheStrides(n.in(2))))
    throw Error(std::string("reads k or v that is no in-place cache, and this plan's caches are ") +
                    kvTypeName(n.ex.kvType()) + " (the attention kernels read k and v as that): plan with tl-plan --kv-type f32",
                ExitCode::BadInput);
  const int64_t rows = B * H * S;
  const int mode = choice.variant->mode;
  const KeySplit& p = choice.keys;
  Dims ms = {0, 0, 0, 0};
  if (n.hasIn(3)) ms = broadcastStrides(n.shape(n.in(3)), {B, H, S, T});
  const bool bshd = n.attrInt("out_bshd", 0) != 0;
  const Dims os = bshd ? Dims{S * H * Dv, Dv, H * Dv} : Dims{H * S * Dv, S * Dv, Dv};
  const std::string part = n.proto.name() + "#splits";
  if (p.splits > 1) n.ex.scratch(part, static_cast<size_t>(rows * p.splits * (Dv + 2) * 4));
  // Who merges the splits: the GEMV that reads the output, else (Gqa) each kv head's last
  // work-group to finish, counted per kv head (attention_gqa_f32's `merged`), else
  // attention_combine_f32.
  const bool splitModes = mode == Dec || mode == Gqa || mode == Wg;  // (the others return after their launch)
  const int reader = splitModes ? mergeReader(n) : -1;
  const bool readerMerges = reader >= 0 && mergesAttention(n.at(static_cast<size_t>(reader)));
  const bool selfMerges = mode == Gqa && p.splits > 1 && p.splits <= kGqaMergeSplits && !readerMerges &&
                          (H / Hkv) * S * p.splits <= kGqaMerge && n.ex.kernels().crossGroupReads();
  const std::string merged = n.proto.name() + "#merged";
  if (selfMerges) n.ex.zeroedScratch(merged, static_cast<size_t>(B * Hkv * 4));
  Launch l = launchVariant(n, *choice.variant);
  l.mem(n.in(0)).mem(n.in(1)).mem(n.in(2));
  if (n.hasIn(3)) l.mem(n.in(3)); else l.nullMem();
  l.mem(n.out(0));
  if (splitModes) {
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
  const Geometry geometry = choice.variant->geometry(choice.c);
  if (mode == Cpu || mode == Tile) return l.run(geometry);
  if (mode != Flash && mode != CpuDec) l.i32(p.splits).i32(p.chunk);
  if (takesRope(mode)) {
    const onnx::NodeProto* r = joinedRope(n, choice);
    if (r) {  // rope_kv_f32's work (ropeInPlace), from the RoPE's own inputs
      const Dims ps = ropePositionStrides(n, *r, q);
      l.mem(r->input(0)).mem(r->input(3)).mem(r->input(6)).mem(n.in(1)).mem(n.in(2));
      l.mem(r->input(1)).i32(ps[0]).i32(ps[2]).mem(r->input(2)).i32(attrInt(*r, "rotary_dim").value_or(D));
      l.f32(attrFloat(*r, "cos_scale").value_or(1.0f)).f32(attrFloat(*r, "sin_scale").value_or(1.0f));
      l.i32(ropeBshdBits(*r)).writesCache(n.ex.kvBytes(B * Hkv * S * (D + Dv)));
    } else {
      l.nullMem().nullMem().nullMem().nullMem().nullMem().nullMem().i32(0).i32(0).nullMem().i32(0).f32(1.0f).f32(1.0f);
      l.i32(0);
    }
  }
  if (mode == Gqa) {
    if (selfMerges) l.mem(merged); else l.nullMem();
  }
  if (mode == CpuDec) l.task(rows * T * (D + Dv), false);  // (a task a kv head's rows)
  l.run(geometry);
  if (mode == Flash || mode == CpuDec) return;
  if (reader >= 0) n.ex.relower(static_cast<size_t>(reader));  // its merge depends on this binding's splits
  if (p.splits > 1 && !readerMerges && !selfMerges)
    n.launch("attention_combine_f32", "the splits of the keys merged")
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

}  // namespace

std::optional<MergedSplits> mergedSplits(const LowerNode& reader, int64_t maxSplits, int64_t K) {
  const int at = attentionBehind(reader);
  if (at < 0) return std::nullopt;
  const LowerNode a = reader.at(static_cast<size_t>(at));
  const AttentionChoice choice = attentionChoice(a);
  const AttentionCase& c = choice.c;
  if (choice.variant->mode != Dec || choice.keys.splits < 2 || choice.keys.splits > maxSplits || c.B * c.S != 1 ||
      c.Dv % 32 || c.H * c.Dv != K)
    return std::nullopt;
  return MergedSplits{a.proto.name() + "#splits", choice.keys.splits, c.Dv, a.attrInt("zero_masked_rows", 0)};
}

int ropeForGemm(const LowerNode& gemm) {
  const Graph& g = gemm.ex.graph();
  const auto dtypeOf = gemm.ex.analysis().dtypeOf();
  if (gemm.proto.output_size() != 3) return -1;
  // From q forward through views to the one node that reads it ...
  std::string t = gemm.out(0);
  int at = -1;
  while (at < 0) {
    const auto& readers = g.consumers(t);
    if (readers.size() != 1) return -1;
    const auto& r = g.node(readers[0]);
    if (opKey(r) == "tl.RoPE") at = static_cast<int>(readers[0]);
    else if (isView(r, dtypeOf) && r.input(0) == t) t = r.output(0);
    else return -1;
  }
  const LowerNode r = gemm.at(static_cast<size_t>(at));
  if (!r.attr("cache_axis") || r.proto.input_size() < 7 || r.proto.output_size() < 3 || !gemm.ex.cacheStrides(r.out(1)) ||
      !gemm.ex.cacheStrides(r.out(2)) || ropeBshdBits(r.proto) != 7 || joinedToAttention(r))
    return -1;
  // ... and back from its q, k and v to this node's outputs, through views read by nothing else.
  const auto& outputs = g.proto().output();
  for (int i = 0; i < 3; ++i) {
    const ViewChain c = producerThroughViews(g, r.in(static_cast<size_t>(3 * i)), dtypeOf);
    if (c.producer != static_cast<int>(gemm.index) || c.tensors.back() != gemm.out(static_cast<size_t>(i))) return -1;
    for (const auto& x : c.tensors)
      if (g.consumers(x).size() != 1 ||
          std::any_of(outputs.begin(), outputs.end(), [&](const auto& o) { return o.name() == x; }))
        return -1;
  }
  const Dims q = ropeInputDims(r, 0), k = ropeInputDims(r, 3), v = ropeInputDims(r, 6);
  if (q.size() != 4 || k.size() != 4 || v.size() != 4) return -1;
  const int64_t B = q[0], S = q[2], D = q[3];
  // (8-bit caches: a block of 32 dims must be 32 pairs' firsts or seconds, kernels/gemm.cl's
  // ROPE_Q8_TILE)
  if (gemm.ex.kvType() == KvType::Q8 && D % 64) return -1;
  if (r.axis(r.attrInt("cache_axis", 0), 4) != 2 || D % 2 || r.attrInt("rotary_dim", D) != D ||
      k != Dims{B, k[1], S, D} || v != Dims{B, k[1], S, D} || gemm.shape(gemm.out(0)).back() != q[1] * D ||
      gemm.shape(gemm.out(1)).back() != k[1] * D || gemm.shape(gemm.out(2)).back() != k[1] * D ||
      elementCount(gemm.shape(gemm.in(0))) != B * S * gemm.shape(gemm.in(0)).back())
    return -1;
  for (size_t table : {1, 2}) {
    // one cos and sin for every head, made before the GEMM runs (a table the graph computes
    // from the positions may come after the projection in node order)
    if (broadcastStrides(r.shape(r.in(table)), q)[1] != 0 || g.producer(r.in(table)) > static_cast<int>(gemm.index))
      return -1;
  }
  if (gemm.ex.dryRun()) return at;
  for (const std::string& read : {r.in(1), r.in(2), gemm.in(0)})  // (what the store's launch reads)
    if (gemm.ex.overlaps(r.out(0), read)) return -1;
  return at;
}

void ropeEpilogueArgs(const LowerNode& gemm, int rope, Launch& l) {
  const LowerNode r = gemm.at(static_cast<size_t>(rope));
  const Dims q = ropeInputDims(r, 0), k = ropeInputDims(r, 3), v = ropeInputDims(r, 6);
  l.mem(r.out(0)).mem(r.in(1)).mem(r.in(2));
  l.vec(pad8(broadcastStrides(r.shape(r.in(1)), q), 0)).vec(pad8(broadcastStrides(r.shape(r.in(2)), q), 0));
  l.i32(q[2]).i32(q[3]);
  for (size_t cache : {1, 2}) {
    const Dims& st = *gemm.ex.cacheStrides(r.out(cache));
    l.mem(r.out(cache)).i32(st[0]).i32(st[1]).i32(st[2]);
  }
  l.mem(Executor::kKvRows);
  ropeTrigArgs(r, l);
  l.writesCache(gemm.ex.kvBytes(elementCount(k) + elementCount(v)));
}

const Lowerings& attentionLowerings() {
  static const Lowerings table = {
      {"tl.Attention", attentionOp},
      {"tl.RoPE", ropeOp},
      {"tl.KvAppend", kvAppendOp},
  };
  return table;
}

}  // namespace tl
