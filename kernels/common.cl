// Shared helpers. Shapes reach kernels as int8 vectors (rank <= 8, padded on the left
// with dims of 1 and strides of 0), so one kernel serves every rank and broadcast.

inline int strided_offset(int i, int8 dims, int8 strides) {
  int d[8], s[8];
  vstore8(dims, 0, d);
  vstore8(strides, 0, s);
  int off = 0;
  for (int k = 7; k >= 0 && i > 0; --k) {  // the host collapses dims, so few iterations divide
    if (d[k] == 1) continue;
    int c = i % d[k];
    i /= d[k];
    off += c * s[k];
  }
  return off;
}

// Element i of a head row at x (dim d of it) under the rotate-half rotary embedding, its
// angle pos * inv_freq[d mod rot/2] (tl-fuse rope-positions' form, cos and sin times their
// scales); past `rot` the head passes through. tl.RoPE's kernels (elementwise.cl's
// rope_at) and the decode attention kernels that do a RoPE's work both use it.
// The cos and sin (times their scales) of dim d < rot at position pos.
inline float2 rope_pos_trig(float pos, __global const float* inv_freq, int d, int rot, float cscale, float sscale) {
  float c;
  const float sn = sincos(pos * inv_freq[d % (rot / 2)], &c);  // one range reduction for both
  return (float2)(c * cscale, sn * sscale);
}
// Element i (dim d) of a head row at x rotated by t = (cos, sin); past `rot` it passes.
inline float rope_rotate(__global const float* x, int i, int d, int rot, float2 t) {
  const int mid = rot / 2;
  if (d >= rot) return x[i];
  const float partner = d < mid ? -x[i + mid] : x[i - mid];
  return x[i] * t.x + partner * t.y;
}
// Where the cos and sin of rope_at (elementwise.cl) and of the GEMMs' RoPE epilogue
// (gemm.cl's rope_pair_store) come from: tables read through the strides cs and ss, or
// (positions, tl-fuse rope-positions) the angle pos * inv_freq[d mod rot/2] of the int64
// position ids at `cosv` (through cs), inv_freq at `sinv`, each times its scale, the ops
// the unfused graph runs.
typedef struct {
  int positions;
  float cscale, sscale;
} RopeTrig;
#define ROPE_TRIG_ARGS int positions, float cscale, float sscale
#define ROPE_TRIG ((RopeTrig){positions, cscale, sscale})
// The cos and sin of dim d < rot at offset co of the cos table (or of the position ids)
// and so of the sin table (or inv_freq, indexed by d).
inline float2 rope_trig(__global const float* cosv, __global const float* sinv, int co, int so, int d, int rot,
                        RopeTrig tg) {
  if (tg.positions) return rope_pos_trig((float)((__global const long*)cosv)[co], sinv, d, rot, tg.cscale, tg.sscale);
  return (float2)(cosv[co], sinv[so]);
}
inline float rope_pos_at(__global const float* x, int i, int d, int rot, float pos, __global const float* inv_freq,
                         float cscale, float sscale) {
  if (d >= rot) return x[i];
  return rope_rotate(x, i, d, rot, rope_pos_trig(pos, inv_freq, d, rot, cscale, sscale));
}

// The in-place KV caches' elements (tl-plan --kv-type): fp32, fp16 where KernelLibrary
// builds the program with TL_KV_HALF, or 8-bit blocks with TL_KV_Q8 (one model an
// executor, so a build option, not a branch). Every kernel that reads or writes a cache
// does so through these; arithmetic stays fp32. vload_half and vstore_half are core
// OpenCL, no cl_khr_fp16 needed: a half pointer is converted through them, never
// dereferenced. A q8 cache holds blocks of 32 elements along a head row (head sizes are
// multiples of 32): the block's scale as a float, then 32 signed codes, element = code x
// scale, the scale the block's largest magnitude / 127 (llama.cpp's q8_0 with a float
// scale, so that codes sit 4-byte aligned). So a cache is addressed by element offset from
// a block's start: KV_AT(p, e) is element e's place (e a multiple of 32 for q8: a row's
// start); KV_LD(p, i) element i of p, KV_LDn(o, p) elements n o .. n o + n - 1 of p (within
// a block for q8). KV_ST stores one element (fp32, fp16 rounded to nearest even); a q8
// cache is written a block at a time (kv_q8_store). kv_round gives a kernel that uses a
// new key or value before it is read back what the read would give, so that a row sees
// every key as the cache holds it, whether written by this launch or an earlier one.
#if defined(TL_KV_HALF)
#define KV_T half
#define KV_AT(p, e) ((p) + (e))
#define KV_LD(p, i) vload_half((i), (p))
#if defined(TL_PTX)
// NVIDIA's compiler reads vload_half4 as four 2-byte loads; KernelLibrary builds with
// TL_PTX where inline PTX compiles, and 4 halves are one 8-byte load widened in registers
// (a row of a head of a multiple of 4 starts on 8 bytes: buffers start on 512). 7B heads at
// 2049 keys: 63.9 -> 41.0 us (scripts/att_lab.c, docs/tl-bench.md).
inline float4 kv_half4(uint2 u) {
  float4 f;
  asm("{ .reg .b16 a, b, c, d; mov.b32 {a, b}, %4; mov.b32 {c, d}, %5; cvt.f32.f16 %0, a; cvt.f32.f16 %1, b; "
      "cvt.f32.f16 %2, c; cvt.f32.f16 %3, d; }"
      : "=f"(f.x), "=f"(f.y), "=f"(f.z), "=f"(f.w)
      : "r"(u.x), "r"(u.y));
  return f;
}
#define KV_LD4(o, p) kv_half4(((__global const uint2*)(p))[o])
#define KV_LD8(o, p) (float8)(KV_LD4(2 * (o), p), KV_LD4(2 * (o) + 1, p))
#define KV_LD16(o, p) (float16)(KV_LD8(2 * (o), p), KV_LD8(2 * (o) + 1, p))
#else
#define KV_LD4(o, p) vload_half4((o), (p))
#define KV_LD8(o, p) vload_half8((o), (p))
#define KV_LD16(o, p) vload_half16((o), (p))
#endif
#define KV_ST(x, i, p) vstore_half((x), (i), (p))
#define KV_ST8(x, i, p) vstore_half8((x), 0, (p) + (i))
inline void kv_round(float* x, int n) {
  for (int i = 0; i < n; ++i) {
    ushort h;
    vstore_half(x[i], 0, (half*)&h);
    x[i] = vload_half(0, (const half*)&h);
  }
}
#elif defined(TL_KV_Q8)
#define KV_T char
#define KV_Q8_BLOCK 36
#define KV_AT(p, e) ((p) + ((long)(e) >> 5) * KV_Q8_BLOCK)
// Block of element i: its scale at the start, code i % 32 four bytes on.
#define KV_Q8_SCALE(p, i) (*(__global const float*)KV_AT(p, i))
#define KV_Q8_CODES(n, p, i) convert_float##n(vload##n(0, KV_AT(p, i) + 4 + ((i) & 31)))
#define KV_LD(p, i) ((float)KV_AT(p, i)[4 + ((i) & 31)] * KV_Q8_SCALE(p, i))
#define KV_LD4(o, p) (KV_Q8_CODES(4, p, 4 * (o)) * KV_Q8_SCALE(p, 4 * (o)))
#define KV_LD8(o, p) (KV_Q8_CODES(8, p, 8 * (o)) * KV_Q8_SCALE(p, 8 * (o)))
#define KV_LD16(o, p) (KV_Q8_CODES(16, p, 16 * (o)) * KV_Q8_SCALE(p, 16 * (o)))
// Value x of element e of a block whose largest magnitude is amax: its code, and the
// block's scale where e is the block's first (the stores that hold a block's values
// spread over items: gemm.cl's RoPE stores).
inline char kv_q8_code(float x, float amax) {
  return (char)clamp(convert_int_rte(x * (amax > 0.0f ? 127.0f / amax : 0.0f)), -127, 127);
}
inline void kv_q8_put(float x, float amax, long e, __global char* p) {
  __global char* b = KV_AT(p, e);
  if ((e & 31) == 0) *(__global float*)b = amax / 127.0f;
  b[4 + (e & 31)] = kv_q8_code(x, amax);
}
// The largest magnitude of 32 values: their block's scale times 127.
inline float kv_q8_amax(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) amax = fmax(amax, fabs(x[j]));
  return amax;
}
// 32 values x into the block at element e (e % 32 == 0) of cache p: the scale from their
// largest magnitude, codes rounded to nearest even (the host's encodeKvRows does the same).
inline void kv_q8_store(const float* x, long e, __global char* p) {
  const float amax = kv_q8_amax(x);
  for (int j = 0; j < 32; ++j) kv_q8_put(x[j], amax, e + j, p);
}
// n values (whole blocks) in private memory rounded to what the cache would give back.
inline void kv_round(float* x, int n) {
  for (int b = 0; b < n; b += 32) {
    const float amax = kv_q8_amax(x + b);
    for (int j = 0; j < 32; ++j) x[b + j] = (float)kv_q8_code(x[b + j], amax) * (amax / 127.0f);
  }
}
#else
#define KV_T float
#define KV_AT(p, e) ((p) + (e))
#define KV_LD(p, i) ((p)[i])
#define KV_LD4(o, p) vload4((o), (p))
#define KV_LD8(o, p) vload8((o), (p))
#define KV_LD16(o, p) vload16((o), (p))
#define KV_ST(x, i, p) ((p)[i] = (x))
#define KV_ST8(x, i, p) vstore8((x), 0, (p) + (i))
inline void kv_round(float* x, int n) {}
#endif

// Work-group reductions of the GPU family: RED_WG items per group (run1d's 64).
#define RED_WG 64

// Combines every item's `v` with OP (an expression of a and b) over a work-group of n
// items (a power of two; NAME itself: RED_WG); all items get the result.
#define WG_REDUCE(NAME, OP)                                                                      \
  inline float NAME##_n(__local float* part, float v, int n) {                                   \
    const int t = get_local_id(0);                                                               \
    part[t] = v;                                                                                 \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                \
    for (int s = n / 2; s > 0; s >>= 1) {                                                        \
      if (t < s) {                                                                               \
        const float a = part[t], b = part[t + s];                                                \
        part[t] = OP;                                                                            \
      }                                                                                          \
      barrier(CLK_LOCAL_MEM_FENCE);                                                              \
    }                                                                                            \
    const float r = part[0];                                                                     \
    barrier(CLK_LOCAL_MEM_FENCE); /* part may be reused at once */                               \
    return r;                                                                                    \
  }                                                                                              \
  inline float NAME(__local float* part, float v) { return NAME##_n(part, v, RED_WG); }
WG_REDUCE(wg_sum, a + b)
WG_REDUCE(wg_max, fmax(a, b))
WG_REDUCE(wg_min, fmin(a, b))
WG_REDUCE(wg_prod, a * b)

// What one work-group of a launch wrote, another reads: NVIDIA's PTX (the main program
// there, or the tensor-core program unless emulated) fences with membar.gl, device-wide,
// and reads a float past L1 with ld.global.cg (an ordinary load the compiler may batch);
// elsewhere OpenCL 1.2's mem_fence, which promises less (lowering uses these only on CPUs
// there: KernelLibrary::crossGroupReads), and a volatile load.
#if defined(TL_NV) || (defined(TL_MMA) && !defined(TL_MMA_EMU))
#define TL_GLOBAL_FENCE() asm volatile("membar.gl;" ::: "memory")
inline float load_past_l1(__global const float* p) {
  float v;
  asm("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(p));
  return v;
}
#else
#define TL_GLOBAL_FENCE() mem_fence(CLK_GLOBAL_MEM_FENCE)
inline float load_past_l1(__global const float* p) { return *(__global volatile const float*)p; }
#endif
// Whether this work-group is the last of `n` to finish a shared piece of work (counted in
// *count, which the last sets back to 0 for the next launch): what the others wrote before
// they counted is visible to it (fences on both sides of the count; read it with
// load_past_l1). `tid` is the item's index in the group; every item must call it.
inline int last_to_finish(__global int* count, int n, int tid, __local int* flag) {
  TL_GLOBAL_FENCE();
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  if (tid == 0) {
    *flag = atomic_inc(count) == n - 1;
    if (*flag) atomic_xchg(count, 0);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  TL_GLOBAL_FENCE();
  return *flag;
}

// Pieces of work that a launch's work-groups share out before their own (gemm.cl's int8
// rows of A): each group takes the next piece from a count, PC[0], until none is left,
// counting each piece done in PC[1], then waits for all of them:
//   for (int p = claim_first(PC, tid, flag); p < n; p = claim_next(PC, tid, flag)) ...;
//   claims_wait(PC, n, tid, flag);
// A group that waits has taken its last piece, so every piece taken is a running group's:
// no deadlock however few groups the device holds at once. The last group past the wait
// sets the counts back to 0 for the next launch (PC[2]). Every item calls these; `flag` is
// a local int. (The claim at the loop's end: PoCL 3.1 never finished a loop that left from
// its middle.)
inline int claim_first(__global int* PC, int tid, __local int* flag) {
  if (tid == 0) *flag = atomic_inc(PC);
  barrier(CLK_LOCAL_MEM_FENCE);
  return *flag;
}
inline int claim_next(__global int* PC, int tid, __local int* flag) {
  TL_GLOBAL_FENCE();
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);  // the piece written, its local memory read
  if (tid == 0) atomic_inc(PC + 1), *flag = atomic_inc(PC);
  barrier(CLK_LOCAL_MEM_FENCE);
  return *flag;
}
inline void claims_wait(__global int* PC, int n, int tid, __local int* flag) {
  if (tid == 0)
    while (atomic_add(PC + 1, 0) < n) {
    }
  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);
  TL_GLOBAL_FENCE();
  if (last_to_finish(PC + 2, get_num_groups(0) * get_num_groups(1) * get_num_groups(2), tid, flag) && tid == 0)
    atomic_xchg(PC, 0), atomic_xchg(PC + 1, 0);
}

// A MatMul's outputs (tl.MatMul and tl.QMatMul with `split`): its columns [0, N0) go to
// C, [N0, N0 + N1) to C1 and the rest to C2, each row-major at its own width, so the
// merged q/k/v (or gate/up) projection writes three tensors in one kernel. Unsplit: N0 = N.
// `bias` (or null) is added to column n as it is stored: the bias Add's epilogue; `res`
// (or null, unsplit outputs only) is added at C's own element: the residual Add's.
#define SPLIT_ARGS __global float *C1, __global float *C2, int N0, int N1, __global const float *bias, __global const float *res
#define SPLIT_PASS C1, C2, N0, N1, bias, res
inline __global float* split_at(__global float* C, __global float* C1, __global float* C2, int N0, int N1, int N,
                                long row, int n) {
  if (n < N0) return C + row * N0 + n;
  if (n < N0 + N1) return C1 + row * N1 + (n - N0);
  return C2 + row * (N - N0 - N1) + (n - N0 - N1);
}
#define OUT_AT(row, n) (*split_at(C, C1, C2, N0, N1, N, (long)(row), (n)))
#define BIAS(n) (bias ? bias[n] : 0.0f)
#define RES(row, n) (res ? res[(long)(row) * N0 + (n)] : 0.0f)
#define STORE(row, n, v) (OUT_AT(row, n) = (v) + BIAS(n) + RES(row, n))
// A GLU epilogue's store (GEMV_ARGS' glu): gate sum g of column j, up sum u of column
// width + j, each with its bias, into output column j.
#define STORE_GLU(row, j, g, u, width) (OUT_AT(row, j) = glu_gate((g) + BIAS(j), glu) * ((u) + BIAS((width) + (j))))

// The prologue and epilogue arguments of the decode kernels (gemv_f32, qgemv*; docs/ops.md):
// NW (or null) the RMSNorm scale that A's rows are normalized by first, with eps; glu (0
// none, else glu_gate's kind) the gated unit that pairs column j with column j + N / 2
// into output column j.
#define GEMV_ARGS __global const float *NW, float eps, int glu

// A CPU task kernel (a work-group of one item, its task index and count along dim 0, its
// row along dim 1), TASK_KERNEL(NAME)(TASK_ARGS params...): a kernel, or under TL_TASKS
// (runtime/executor/chains.cpp's programs) a function NAME_task of the task index and
// count first, so that one kernel can run several launches' tasks in turn (a CPU OpenCL's
// workers sleep between launches, and waking them costs a short launch more than its
// work). (No variadic macros: NVIDIA's OpenCL C refuses them.)
#ifdef TL_TASKS
// A chain's work-groups (one item each) take a launch's tasks from the count PC[0], count
// each done in PC[1] and wait for all before the next launch; the last group past the wait
// (PC[2]) sets the counts back to 0. A group that waits has taken its last task, so it
// waits only on running groups: one group alone, or groups run one after another, finish.
// (No barriers: PoCL's one-item groups with barriers in such loops never finished.)
inline int task_claim(__global int* PC) { return atomic_inc(PC); }
inline int task_next(__global int* PC) {
  mem_fence(CLK_GLOBAL_MEM_FENCE);
  atomic_inc(PC + 1);
  return atomic_inc(PC);
}
inline void task_wait(__global int* PC, int n) {
  while (atomic_add(PC + 1, 0) < n) {
  }
  mem_fence(CLK_GLOBAL_MEM_FENCE);
  if (atomic_inc(PC + 2) == (int)get_num_groups(0) - 1) atomic_xchg(PC, 0), atomic_xchg(PC + 1, 0), atomic_xchg(PC + 2, 0);
}
#define TASK_KERNEL(NAME) void NAME##_task
#define TASK_ARGS const int tl_task, const int tl_tasks,
#define TASK_ID tl_task
#define TASK_COUNT tl_tasks
#define TASK_ROW 0 /* chains take launches of one task along dims 1 and 2 */
#else
#define TASK_KERNEL(NAME) __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void NAME
#define TASK_ARGS
#define TASK_ID ((int)get_group_id(0))
#define TASK_COUNT ((int)get_num_groups(0))
#define TASK_ROW ((int)get_group_id(1))
#endif

// The sum of a float8's lanes.
inline float sum8(float8 v) { return dot(v.lo, (float4)1.0f) + dot(v.hi, (float4)1.0f); }
// The sum8 of each of 8 vectors, as one vector (the same bits: pairs of lanes, pairs of
// those, then the halves), by 6 shuffled adds: 8 sum8s into a vector had been a fifth of
// a CPU decode GEMV's time at K = 256 (perf, PoCL).
inline float8 hpair8(float8 a, float8 b) {
  return (float8)(a.s0, a.s2, b.s0, b.s2, a.s4, a.s6, b.s4, b.s6) + (float8)(a.s1, a.s3, b.s1, b.s3, a.s5, a.s7, b.s5, b.s7);
}
inline float8 sum8x8(float8 v0, float8 v1, float8 v2, float8 v3, float8 v4, float8 v5, float8 v6, float8 v7) {
  const float8 u = hpair8(hpair8(v0, v1), hpair8(v2, v3)), w = hpair8(hpair8(v4, v5), hpair8(v6, v7));
  return (float8)(u.lo, w.lo) + (float8)(u.hi, w.hi);
}

// A gated linear unit's activation of its gate (tl.SwiGLU, tl.GeGLU, a MatMul's `glu`):
// 1 silu, as the unfused graphs compute it (x * sigmoid(x)); 2 GELU's erf form; 3 its
// tanh form, as ONNX Gelu's kernels.
// glu_gate4: of 4 gates at once (a CPU decode task's: one vector exp for its 4, not 4
// scalar ones).
#define GLU_GATE_OF(T, NAME)                                                        \
  inline T NAME(T x, int kind) {                                                    \
    if (kind == 1) return x * (1.0f / (1.0f + exp(-x)));                            \
    if (kind == 2) return 0.5f * x * (1.0f + erf(x * 0.70710678118654752f));         \
    return 0.5f * x * (1.0f + tanh(0.7978845608028654f * (x + 0.044715f * x * x * x))); \
  }
GLU_GATE_OF(float, glu_gate)
GLU_GATE_OF(float4, glu_gate4)
