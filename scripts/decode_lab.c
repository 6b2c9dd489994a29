// A decode step's layers as one persistent kernel (issue 28): what TinyLlama's decode
// costs when its phases are separated by grid barriers instead of launches. Per layer,
// e0m4 codes (group 128, column-major as tl.QMatMul's), one work-group per compute unit,
// all resident, a grid barrier after each phase:
//   1  qkv = W_qkv (rmsnorm(x) * nw1)                K = D, N = NQKV
//   2  the attention at position T (RoPE, GQA, fp16 caches; attention_partials), then
//      the chunks merged (attention_merge) into att; or a stand-in, att = qkv[0, D)
//   3  x  += W_o att                                 K = D, N = D
//   4  h   = silu(W_g xn) * (W_u xn), xn = rmsnorm(x) * nw2   K = D, N = 2 F (gate, up)
//   5  x  += W_d h                                   K = F, N = D
// Each warp takes whole output columns (a GLU's gate and up together), its 32 lanes the
// column's blocks of 32 codes, summed by shuffles; A is staged in local memory, block-major
// so that a warp's lanes read it without bank conflicts, with each block's sum (the
// offsets' term). The output is checked against the host (double); then the layers
// (distinct weights, more than L2) are timed, one launch. NVIDIA only (PTX; the barrier
// needs every work-group resident). gcc -O2 decode_lab.c -lOpenCL -lm; then
//   ./a.out [layers] [wg] [prefetch] [skip] [u2] [q8] [T] [attention form]
// layers (22), wg (items a work-group, 512), prefetch 1: the next phase's weights into L2
// before each barrier; skip 1: the dots left out (the stages and barriers alone), 2: the
// stages too, 3: the dots' loads kept but not their arithmetic (a wrong output); u2 2: two
// columns at once in the residual GEMVs; q8 1: A as int8 a block of 32 (its scale), the
// codes' products by dp4a (e0m4's level is (16 + c) / 8, so a block's dot is
// (2 s + o) sum(a) + s / 8 sum(a c)); T: the attention's position (128; -1: the stand-in);
// attention form 1 (default): a warp per (kv head, 32 keys), 2: a warp per (query head, chunk),
// slower (docs/tl-bench.md).
#define CL_TARGET_OPENCL_VERSION 300
#include <CL/cl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { D = 2048, NQKV = 2560, F = 5632, G = 128 };

static const char *src =
"#define BLK(K) ((K) / 32)\n"
"inline float warp_sum(float v) {\n"
"  for (int o = 16; o > 0; o >>= 1) { float w; asm volatile(\"shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;\" : \"=f\"(w) : \"f\"(v), \"r\"(o)); v += w; }\n"
"  return v;\n"
"}\n"
"inline float warp_max(float v) {\n"
"  for (int o = 16; o > 0; o >>= 1) { float w; asm volatile(\"shfl.sync.bfly.b32 %0, %1, %2, 0x1f, 0xffffffff;\" : \"=f\"(w) : \"f\"(v), \"r\"(o)); v = fmax(v, w); }\n"
"  return v;\n"
"}\n"
"inline void warp_sync(void) { asm volatile(\"bar.warp.sync -1;\" ::: \"memory\"); }\n"
"inline float ldcg(__global const float* p) { float v; asm volatile(\"ld.global.cg.f32 %0, [%1];\" : \"=f\"(v) : \"l\"(p)); return v; }\n"
"inline void grid_sync(volatile __global int* cnt, int target, __global int* err) {\n"
"  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);\n"
"  if (get_local_id(0) == 0) {\n"
"    asm volatile(\"membar.gl;\" ::: \"memory\");\n"
"    atomic_inc(cnt);\n"
"    int spins = 0;\n"
"    while (atomic_add(cnt, 0) < target) if (++spins > 20000000) { err[0] = 1; break; }\n"
"    asm volatile(\"membar.gl;\" ::: \"memory\");\n"
"  }\n"
"  barrier(CLK_GLOBAL_MEM_FENCE | CLK_LOCAL_MEM_FENCE);\n"
"}\n"
// A (K floats) into local memory as float4 [8][K / 32] (block-major: lane b reads float4 f
// of its block at f * nb + b), times inv * nw[k] when nw is given (inv from x's squares).
"inline float4 ldcg4(__global const float* p) {\n"
"  float4 v; asm volatile(\"ld.global.cg.v4.f32 {%0, %1, %2, %3}, [%4];\" : \"=f\"(v.x), \"=f\"(v.y), \"=f\"(v.z), \"=f\"(v.w) : \"l\"(p));\n"
"  return v;\n"
"}\n"
// 4 unsigned bytes of a times 4 signed ones of b, plus c (PTX dp4a).
"inline int dp4a(uint a, int b, int c) { int d; asm(\"dp4a.u32.s32 %0, %1, %2, %3;\" : \"=r\"(d) : \"r\"(a), \"r\"(b), \"r\"(c)); return d; }\n"
"inline uint pack4(float a, float b, float c, float d) {\n"
"  return (uint)(convert_char_sat_rte(a) & 0xff) | (uint)(convert_char_sat_rte(b) & 0xff) << 8 |\n"
"         (uint)(convert_char_sat_rte(c) & 0xff) << 16 | (uint)(convert_char_sat_rte(d) & 0xff) << 24;\n"
"}\n"
"inline void stage(__global const float* a, int K, __global const float* nw, __local float4* al, __local float* asum, __local float* red,\n"
"                  __local int2* aq, __local float* qs) {\n"
"  const int t = get_local_id(0), wg = get_local_size(0), nb = K / 32;\n"
"  float s = 0.0f;\n"
"  for (int e = t; e < K / 4; e += wg) {\n"
"    const float4 v = ldcg4(a + 4 * e);\n"
"    s += dot(v, v);\n"
"    al[(e & 7) * nb + (e >> 3)] = v;\n"
"  }\n"
"  if (nw) {\n"
"    s = warp_sum(s);\n"
"    if ((t & 31) == 0) red[t >> 5] = s;\n"
"    barrier(CLK_LOCAL_MEM_FENCE);\n"
"    s = 0.0f;\n"
"    for (int w = 0; w < wg / 32; ++w) s += red[w];\n"
"    const float inv = 1.0f / sqrt(s / K + 1e-5f);\n"
"    for (int e = t; e < K / 4; e += wg) al[(e & 7) * nb + (e >> 3)] *= inv * vload4(e, nw);\n"
"  }\n"
"  barrier(CLK_LOCAL_MEM_FENCE);\n"
"  for (int b = t; b < nb; b += wg) {\n"
"    float4 v = 0.0f;\n"
"    for (int f = 0; f < 8; ++f) v += al[f * nb + b];\n"
"    asum[b] = v.x + v.y + v.z + v.w;\n"
"    if (Q8) {\n"
"      float m = 0.0f;\n"
"      for (int f = 0; f < 8; ++f) { const float4 x = fabs(al[f * nb + b]); m = fmax(m, fmax(fmax(x.x, x.y), fmax(x.z, x.w))); }\n"
"      const float inv = m > 0.0f ? 127.0f / m : 0.0f;\n"
"      qs[b] = m / 127.0f;\n"
"      for (int h = 0; h < 4; ++h) {\n"
"        const float4 x0 = al[(2 * h) * nb + b] * inv, x1 = al[(2 * h + 1) * nb + b] * inv;\n"
"        aq[h * nb + b] = (int2)(pack4(x0.x, x0.z, x1.x, x1.z), pack4(x0.y, x0.w, x1.y, x1.w));\n"
"      }\n"
"    }\n"
"  }\n"
"  barrier(CLK_LOCAL_MEM_FENCE);\n"
"}\n"
// e0m4's levels 2 + c / 8 as floats by their bits (kernels/dequant.cl's e0m4_levels8).
"inline float8 lv8(uint x) {\n"
"  const uint m = 0x00780000u, e = 0x40000000u;\n"
"  return as_float8((uint8)((x << 19 & m) | e, (x << 15 & m) | e, (x << 11 & m) | e, (x << 7 & m) | e,\n"
"                           (x << 3 & m) | e, (x >> 1 & m) | e, (x >> 5 & m) | e, (x >> 9 & m) | e));\n"
"}\n"
// U columns' dots with the staged A (cols[u], valid[u]: the warp's columns), every load
// issued before any arithmetic, each float of A read from local memory once for the U
// columns (local memory's bandwidth bounds one column at a time): lane's blocks b = lane + 32 j.
"#define DOTS(OUT, U, W, S, O, cols, valid, K)                                         \\\n"
"  {                                                                                  \\\n"
"    const int nb = (K) / 32, groups = (K) / 128;                                     \\\n"
"    uint4 q[U][((K) / 32 + 31) / 32]; float sc[U][((K) / 32 + 31) / 32], of[U][((K) / 32 + 31) / 32]; \\\n"
"    _Pragma(\"unroll\") for (int u = 0; u < U; ++u)                                \\\n"
"      _Pragma(\"unroll\") for (int j = 0; j < ((K) / 32 + 31) / 32; ++j) {                               \\\n"
"        const int b = lane + 32 * j;                                                 \\\n"
"        if (valid[u] && b < nb) {                                                    \\\n"
"          q[u][j] = ((__global const uint4*)((W) + (long)cols[u] * ((K) / 2)))[b];   \\\n"
"          sc[u][j] = (S)[(long)cols[u] * groups + b / 4]; of[u][j] = (O)[(long)cols[u] * groups + b / 4]; \\\n"
"        }                                                                            \\\n"
"      }                                                                              \\\n"
"    float acc[U];                                                                    \\\n"
"    _Pragma(\"unroll\") for (int u = 0; u < U; ++u) acc[u] = 0.0f;                   \\\n"
"    _Pragma(\"unroll\") for (int j = 0; j < ((K) / 32 + 31) / 32; ++j) {             \\\n"
"      const int b = lane + 32 * j;                                                   \\\n"
"      if (b < nb) {                                                                  \\\n"
"        float d[U]; int di[U];                                                       \\\n"
"        _Pragma(\"unroll\") for (int u = 0; u < U; ++u) di[u] = 0;                    \\\n"
"        _Pragma(\"unroll\") for (int u = 0; u < U; ++u) d[u] = 0.0f;                 \\\n"
"        _Pragma(\"unroll\") for (int h = 0; h < 4; ++h) {                            \\\n"
"          const float4 a0 = Q8 ? 0.0f : al[(2 * h) * nb + b], a1 = Q8 ? 0.0f : al[(2 * h + 1) * nb + b]; \\\n"
"          const int2 aw = Q8 ? aq[h * nb + b] : 0;                                    \\\n"
"          _Pragma(\"unroll\") for (int u = 0; u < U; ++u) {                          \\\n"
"            const uint w = h == 0 ? q[u][j].x : h == 1 ? q[u][j].y : h == 2 ? q[u][j].z : q[u][j].w; \\\n"
"            if (Q8) di[u] = dp4a((w >> 4) & 0x0F0F0F0Fu, aw.y, dp4a(w & 0x0F0F0F0Fu, aw.x, di[u])); \\\n"
"            else if (SKIP == 3) d[u] += a0.x * (float)(w & 255u);                    \\\n"
"            else { const float8 l = lv8(w); d[u] += dot(a0, l.lo) + dot(a1, l.hi); }   \\\n"
"          }                                                                          \\\n"
"        }                                                                            \\\n"
"        _Pragma(\"unroll\") for (int u = 0; u < U; ++u)                              \\\n"
"          if (valid[u]) acc[u] += Q8 ? (2.0f * sc[u][j] + of[u][j]) * asum[b] + 0.125f * sc[u][j] * qs[b] * (float)di[u] \\\n"
"                                     : sc[u][j] * d[u] + of[u][j] * asum[b];        \\\n"
"      }                                                                              \\\n"
"    }                                                                                \\\n"
"    _Pragma(\"unroll\") for (int u = 0; u < U; ++u) OUT[u] = warp_sum(acc[u]);       \\\n"
"  }\n"
// The L2 prefetch of what DOTS will load (the next phase's weights, issued before the
// barrier that ends this one: they do not wait on its outputs).
"inline void pf(__global const void* p) { asm volatile(\"prefetch.global.L2 [%0];\" :: \"l\"(p)); }\n"
"#define PREFETCH(W, S, O, col, K)                                                     \\\n"
"  {                                                                                  \\\n"
"    const int nb = (K) / 32, groups = (K) / 128;                                     \\\n"
"    _Pragma(\"unroll\") for (int j = 0; j < ((K) / 32 + 31) / 32; ++j) {             \\\n"
"      const int b = lane + 32 * j;                                                   \\\n"
"      if (b < nb) pf((W) + (long)(col) * ((K) / 2) + 16 * b);                        \\\n"
"      if (b < nb && b % 32 == 0) { pf((S) + (long)(col) * groups + b / 4); pf((O) + (long)(col) * groups + b / 4); } \\\n"
"    }                                                                                \\\n"
"  }\n"
// The decode attention of TinyLlama's heads (HQ query heads, HKV kv heads of DH dims; q
// and the new key rotated by RoPE at position T, rotate-half pairs d, d + 32), fp16 caches
// [HKV][TMAX][DH] a layer: a warp per (kv head, chunk of CH keys), its lanes one key each
// for the scores of the kv head's HQ / HKV query heads (from local memory), then one dim
// pair each for the values; the new key and value (T) from qkv, appended to the caches by
// the warp whose chunk holds T. Each chunk leaves (max, sum, output) per head in part;
// attention_merge, after a barrier, a warp a head, merges them into att.
"#define HQ 32\n"
"#define HKV 4\n"
"#define DH 64\n"
"#define CH 32\n"
"#define AW 7\n"
"#define GQ (HQ / HKV)\n"
// Key T's rotated dims i and i + 32 of kv head g (from qkv), with its value's, appended to
// the caches when `append`; and the value of key t (the caches below T, qkv at T) at the
// lane's dims lane and lane + 32.
"inline float2 new_key(__global const float* qkv, __global half* Kc, __global half* Vc, __global const float* cs, int g,\n"
"                      int T, int i, int append) {\n"
"  __global const float* kn = qkv + HQ * DH + g * DH;\n"
"  __global const float* vn = qkv + HQ * DH + HKV * DH + g * DH;\n"
"  const float x = ldcg(kn + i), y = ldcg(kn + 32 + i), ci = cs[T * DH + i], sn = cs[T * DH + 32 + i];\n"
"  const float2 k = (float2)(x * ci - y * sn, y * ci + x * sn);\n"
"  if (append) {\n"
"    vstore_half_rte(k.x, ((long)g * TMAX + T) * DH + i, Kc);\n"
"    vstore_half_rte(k.y, ((long)g * TMAX + T) * DH + 32 + i, Kc);\n"
"    vstore_half_rte(ldcg(vn + i), ((long)g * TMAX + T) * DH + i, Vc);\n"
"    vstore_half_rte(ldcg(vn + 32 + i), ((long)g * TMAX + T) * DH + 32 + i, Vc);\n"
"  }\n"
"  return k;\n"
"}\n"
"inline float2 value_at(__global const float* qkv, __global const half* Vc, int g, int t, int T, int lane) {\n"
"  if (t < T) {\n"
"    __global const half* vr = Vc + ((long)g * TMAX + t) * DH;\n"
"    return (float2)(vload_half(lane, vr), vload_half(lane + 32, vr));\n"
"  }\n"
"  __global const float* vn = qkv + HQ * DH + HKV * DH + g * DH;\n"
"  return (float2)(ldcg(vn + lane), ldcg(vn + 32 + lane));\n"
"}\n"
"inline void attention_partials(__global const float* qkv, __global half* Kc, __global half* Vc, __global const float* cs,\n"
"                               __global float* part, int T, __local float* scratch) {\n"
"  const int lane = get_local_id(0) & 31, w = get_local_id(0) >> 5, nwg = get_num_groups(0), nch = (T + CH) / CH;\n"
"  if (w >= AW) return;\n"
"  __local float* qw = scratch + w * (GQ * DH + GQ * CH);\n"
"  __local float* pw = qw + GQ * DH;\n"
"  const float co = cs[T * DH + lane], si = cs[T * DH + 32 + lane];\n"
"  for (int u = get_group_id(0) + nwg * w; u < HKV * nch; u += nwg * AW) {\n"
"    const int g = u / nch, c = u % nch, t = c * CH + lane;\n"
"    for (int hh = 0; hh < GQ; ++hh) {\n"
"      const int h = g * GQ + hh;\n"
"      const float a = ldcg(qkv + h * DH + lane), b = ldcg(qkv + h * DH + 32 + lane);\n"
"      qw[hh * DH + lane] = (a * co - b * si) * 0.125f;\n"
"      qw[hh * DH + 32 + lane] = (b * co + a * si) * 0.125f;\n"
"    }\n"
"    warp_sync();\n"
"    float s[GQ];\n"
"    for (int hh = 0; hh < GQ; ++hh) s[hh] = 0.0f;\n"
"    if (t < T) {\n"
"      __global const half* kr = Kc + ((long)g * TMAX + t) * DH;\n"
"      for (int d = 0; d < DH; d += 8) {\n"
"        const float8 k8 = vload_half8(d / 8, kr);\n"
"        for (int hh = 0; hh < GQ; ++hh) s[hh] += dot(vload4(0, qw + hh * DH + d), k8.lo) + dot(vload4(1, qw + hh * DH + d), k8.hi);\n"
"      }\n"
"    } else if (t == T) {\n"
"      for (int i = 0; i < 32; ++i) {\n"
"        const float2 k = new_key(qkv, Kc, Vc, cs, g, T, i, 1);\n"
"        for (int hh = 0; hh < GQ; ++hh) s[hh] += qw[hh * DH + i] * k.x + qw[hh * DH + 32 + i] * k.y;\n"
"      }\n"
"    }\n"
"    float m[GQ], l[GQ];\n"
"    for (int hh = 0; hh < GQ; ++hh) {\n"
"      m[hh] = warp_max(t <= T ? s[hh] : -INFINITY);\n"
"      const float p = t <= T ? exp(s[hh] - m[hh]) : 0.0f;\n"
"      l[hh] = warp_sum(p);\n"
"      pw[hh * CH + lane] = p;\n"
"    }\n"
"    warp_sync();\n"
"    float o0[GQ], o1[GQ];\n"
"    for (int hh = 0; hh < GQ; ++hh) o0[hh] = o1[hh] = 0.0f;\n"
"    for (int j = 0; j < CH && c * CH + j <= T; ++j) {\n"
"      const float2 v = value_at(qkv, Vc, g, c * CH + j, T, lane);\n"
"      for (int hh = 0; hh < GQ; ++hh) { const float pj = pw[hh * CH + j]; o0[hh] += pj * v.x; o1[hh] += pj * v.y; }\n"
"    }\n"
"    for (int hh = 0; hh < GQ; ++hh) {\n"
"      __global float* b = part + ((long)(g * GQ + hh) * nch + c) * (DH + 2);\n"
"      if (lane == 0) { b[0] = m[hh]; b[1] = l[hh]; }\n"
"      b[2 + lane] = o0[hh];\n"
"      b[34 + lane] = o1[hh];\n"
"    }\n"
"    warp_sync();\n"
"  }\n"
"}\n"
"inline void attention_merge(__global const float* part, __global float* att, int T) {\n"
"  const int lane = get_local_id(0) & 31, nch = (T + CH) / CH;\n"
"  const int warps = get_global_size(0) / 32, gw = get_global_id(0) / 32;\n"
"  for (int h = gw; h < HQ; h += warps) {\n"
"    __global const float* ph = part + (long)h * nch * (DH + 2);\n"
"    float M = -INFINITY;\n"
"    for (int c = lane; c < nch; c += 32) M = fmax(M, ldcg(ph + c * (DH + 2)));\n"
"    M = warp_max(M);\n"
"    float L = 0.0f, a0 = 0.0f, a1 = 0.0f;\n"
"    for (int c = 0; c < nch; ++c) {\n"
"      __global const float* b = ph + c * (DH + 2);\n"
"      const float wt = exp(ldcg(b) - M);\n"
"      L += wt * ldcg(b + 1);\n"
"      a0 += wt * ldcg(b + 2 + lane);\n"
"      a1 += wt * ldcg(b + 34 + lane);\n"
"    }\n"
"    att[h * DH + lane] = a0 / L;\n"
"    att[h * DH + 32 + lane] = a1 / L;\n"
"  }\n"
"}\n"
// The second form (ATTV=2): a warp per (query head, chunk), at most 16 chunks of at least
// 32 keys, its lanes one key each for the scores (q from local memory), an online softmax
// over its passes of 32 keys, and one dim pair each for the values (the probabilities by
// shuffles); the merge a warp a head, each lane one chunk's (max, sum), the partial outputs
// loaded all at once before they are summed. Each kv head's new key and value are appended
// by its first query head's last chunk; every other reader of key T takes it from qkv.
"inline float lane_of(float v, int j) { float r; asm volatile(\"shfl.sync.idx.b32 %0, %1, %2, 0x1f, 0xffffffff;\" : \"=f\"(r) : \"f\"(v), \"r\"(j)); return r; }\n"
"inline int chunks2(int T) { return min(16, (T + 32) / 32); }\n"
"inline void attention_partials2(__global const float* qkv, __global half* Kc, __global half* Vc, __global const float* cs,\n"
"                                __global float* part, int T, __local float* scratch) {\n"
"  const int lane = get_local_id(0) & 31, nch = chunks2(T), per = (T + nch) / nch;\n"
"  __local float* qw = scratch + (get_local_id(0) >> 5) * DH;\n"
"  const float co = cs[T * DH + lane], si = cs[T * DH + 32 + lane];\n"
"  for (int u = get_global_id(0) / 32; u < HQ * nch; u += get_global_size(0) / 32) {\n"
"    const int h = u / nch, c = u % nch, g = h / GQ, t0 = c * per, t1 = min(T + 1, t0 + per);\n"
"    const float a = ldcg(qkv + h * DH + lane), b = ldcg(qkv + h * DH + 32 + lane);\n"
"    qw[lane] = (a * co - b * si) * 0.125f;\n"
"    qw[32 + lane] = (b * co + a * si) * 0.125f;\n"
"    warp_sync();\n"
"    float m = -INFINITY, l = 0.0f, o0 = 0.0f, o1 = 0.0f;\n"
"    for (int base = t0; base < t1; base += 32) {\n"
"      const int t = base + lane;\n"
"      float s = -INFINITY;\n"
"      if (t < T && t < t1) {\n"
"        __global const half* kr = Kc + ((long)g * TMAX + t) * DH;\n"
"        float acc = 0.0f;\n"
"        for (int d = 0; d < DH; d += 8) {\n"
"          const float8 k8 = vload_half8(d / 8, kr);\n"
"          acc += dot(vload4(0, qw + d), k8.lo) + dot(vload4(1, qw + d), k8.hi);\n"
"        }\n"
"        s = acc;\n"
"      } else if (t == T) {\n"
"        float acc = 0.0f;\n"
"        for (int i = 0; i < 32; ++i) {\n"
"          const float2 k = new_key(qkv, Kc, Vc, cs, g, T, i, h % GQ == 0);\n"
"          acc += qw[i] * k.x + qw[32 + i] * k.y;\n"
"        }\n"
"        s = acc;\n"
"      }\n"
"      const float mn = fmax(m, warp_max(s));\n"
"      const float p = t < t1 ? exp(s - mn) : 0.0f, keep = exp(m - mn);\n"
"      l = l * keep + warp_sum(p);\n"
"      o0 *= keep;\n"
"      o1 *= keep;\n"
"      for (int j = 0; j < 32 && base + j < t1; ++j) {\n"
"        const float pj = lane_of(p, j);\n"
"        const float2 v = value_at(qkv, Vc, g, base + j, T, lane);\n"
"        o0 += pj * v.x;\n"
"        o1 += pj * v.y;\n"
"      }\n"
"      m = mn;\n"
"    }\n"
"    __global float* bp = part + ((long)h * nch + c) * (DH + 2);\n"
"    if (lane == 0) { bp[0] = m; bp[1] = l; }\n"
"    bp[2 + lane] = o0;\n"
"    bp[34 + lane] = o1;\n"
"    warp_sync();\n"
"  }\n"
"}\n"
"inline void attention_merge2(__global const float* part, __global float* att, int T) {\n"
"  const int lane = get_local_id(0) & 31, nch = chunks2(T);\n"
"  for (int h = get_global_id(0) / 32; h < HQ; h += get_global_size(0) / 32) {\n"
"    __global const float* ph = part + (long)h * nch * (DH + 2);\n"
"    const float mc = lane < nch ? ldcg(ph + lane * (DH + 2)) : -INFINITY;\n"
"    const float lc = lane < nch ? ldcg(ph + lane * (DH + 2) + 1) : 0.0f;\n"
"    float x0[16], x1[16];\n"
"    for (int c = 0; c < 16; ++c) {\n"
"      x0[c] = c < nch ? ldcg(ph + c * (DH + 2) + 2 + lane) : 0.0f;\n"
"      x1[c] = c < nch ? ldcg(ph + c * (DH + 2) + 34 + lane) : 0.0f;\n"
"    }\n"
"    const float M = warp_max(mc), wc = lane < nch ? exp(mc - M) : 0.0f, L = warp_sum(wc * lc);\n"
"    float a0 = 0.0f, a1 = 0.0f;\n"
"    for (int c = 0; c < 16; ++c) {\n"
"      const float wt = lane_of(wc, c);\n"
"      a0 += wt * x0[c];\n"
"      a1 += wt * x1[c];\n"
"    }\n"
"    att[h * DH + lane] = a0 / L;\n"
"    att[h * DH + 32 + lane] = a1 / L;\n"
"  }\n"
"}\n"
"__kernel void layers(__global float* x, __global float* qkv, __global float* att, __global float* h,\n"
"                     __global const uchar* Wq, __global const float* Sq, __global const float* Oq,\n"
"                     __global const uchar* Wo, __global const float* So, __global const float* Oo,\n"
"                     __global const uchar* Wg, __global const float* Sg, __global const float* Og,\n"
"                     __global const uchar* Wd, __global const float* Sd, __global const float* Od,\n"
"                     __global const float* nw1, __global const float* nw2, volatile __global int* cnt,\n"
"                     __global int* err, int nlayers, __global half* Kc, __global half* Vc, __global const float* cs,\n"
"                     __global float* part, int T) {\n"
"  __local float4 al[F / 4];\n"
"  __local float red[32], asum[F / 32], qs[F / 32];\n"
"  __local int2 aq[4 * (F / 32)];\n"
"  const int lane = get_local_id(0) & 31;\n"
"  const int warps = get_global_size(0) / 32, gw = get_global_id(0) / 32;\n"
"  int phase = 0;\n"
"  const int nwg = get_num_groups(0);\n"
"  for (int l = 0; l < nlayers; ++l) {\n"
"    const int lq = l * NQKV, lo = l * D, lg = l * 2 * F, ld = l * D;\n"
"    if (SKIP != 2) stage(x, D, nw1 + (long)l * D, al, asum, red, aq, qs);\n"
"    for (int c = gw; c < NQKV; c += 2 * warps) {\n"
"      const int cols[2] = {lq + c, lq + c + warps}, valid[2] = {1, c + warps < NQKV}; float y[2] = {0.0f, 0.0f};\n"
"      if (SKIP == 0 || SKIP == 3) DOTS(y, 2, Wq, Sq, Oq, cols, valid, D);\n"
"      if (lane == 0) { qkv[c] = y[0]; if (valid[1]) qkv[c + warps] = y[1]; }\n"
"    }\n"
"    if (PF) for (int c = gw; c < D; c += warps) PREFETCH(Wo, So, Oo, lo + c, D);\n"
"    grid_sync(cnt, ++phase * nwg, err);\n"
"    if (!ATT) {\n"
"      for (int e = get_global_id(0); e < D / 4; e += get_global_size(0)) vstore4(ldcg4(qkv + 4 * e), e, att);\n"
"    } else {\n"
"      __global half* kl = Kc + (long)l * HKV * TMAX * DH;\n"
"      __global half* vl = Vc + (long)l * HKV * TMAX * DH;\n"
"      if (ATTV == 2) attention_partials2(qkv, kl, vl, cs, part, T, (__local float*)al);\n"
"      else attention_partials(qkv, kl, vl, cs, part, T, (__local float*)al);\n"
"      grid_sync(cnt, ++phase * nwg, err);\n"
"      if (ATTV == 2) attention_merge2(part, att, T);\n"
"      else attention_merge(part, att, T);\n"
"    }\n"
"    grid_sync(cnt, ++phase * nwg, err);\n"
"    if (SKIP != 2) stage(att, D, 0, al, asum, red, aq, qs);\n"
"    for (int c = gw; c < D; c += U2 * warps) {\n"
"      const int cols[2] = {lo + c, lo + c + warps}, valid[2] = {1, U2 > 1 && c + warps < D}; float y[2] = {0.0f, 0.0f};\n"
"      if (SKIP == 0 || SKIP == 3) DOTS(y, U2, Wo, So, Oo, cols, valid, D);\n"
"      if (lane == 0) { x[c] += y[0]; if (valid[1]) x[c + warps] += y[1]; }\n"
"    }\n"
"    if (PF) for (int c = gw; c < F; c += warps) { PREFETCH(Wg, Sg, Og, lg + c, D); PREFETCH(Wg, Sg, Og, lg + F + c, D); }\n"
"    grid_sync(cnt, ++phase * nwg, err);\n"
"    if (SKIP != 2) stage(x, D, nw2 + (long)l * D, al, asum, red, aq, qs);\n"
"    for (int c = gw; c < F; c += 2 * warps) {\n"
"      const int more = c + warps < F;\n"
"      const int cols[4] = {lg + c, lg + F + c, lg + c + warps, lg + F + c + warps}, valid[4] = {1, 1, more, more}; float y[4] = {0.0f, 0.0f, 0.0f, 0.0f};\n"
"      if (SKIP == 0 || SKIP == 3) DOTS(y, 4, Wg, Sg, Og, cols, valid, D);\n"
"      if (lane == 0) { h[c] = y[0] / (1.0f + exp(-y[0])) * y[1]; if (more) h[c + warps] = y[2] / (1.0f + exp(-y[2])) * y[3]; }\n"
"    }\n"
"    if (PF) for (int c = gw; c < D; c += warps) PREFETCH(Wd, Sd, Od, ld + c, F);\n"
"    grid_sync(cnt, ++phase * nwg, err);\n"
"    if (SKIP != 2) stage(h, F, 0, al, asum, red, aq, qs);\n"
"    for (int c = gw; c < D; c += U2 * warps) {\n"
"      const int cols[2] = {ld + c, ld + c + warps}, valid[2] = {1, U2 > 1 && c + warps < D}; float y[2] = {0.0f, 0.0f};\n"
"      if (SKIP == 0 || SKIP == 3) DOTS(y, U2, Wd, Sd, Od, cols, valid, F);\n"
"      if (lane == 0) { x[c] += y[0]; if (valid[1]) x[c + warps] += y[1]; }\n"
"    }\n"
"    if (PF && l + 1 < nlayers) for (int c = gw; c < NQKV; c += warps) PREFETCH(Wq, Sq, Oq, lq + NQKV + c, D);\n"
"    grid_sync(cnt, ++phase * nwg, err);\n"
"  }\n"
"}\n";

#define CK(x) do { cl_int e_ = (x); if (e_) { printf("error %d at %s line %d\n", e_, #x, __LINE__); exit(1); } } while (0)
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e6 + t.tv_nsec / 1e3; }

typedef struct { unsigned char *w; float *s, *o; } Q;
static Q makeq(int K, long cols) {
  Q q = {malloc((size_t)cols * K / 2), malloc(sizeof(float) * cols * (K / G)), malloc(sizeof(float) * cols * (K / G))};
  for (size_t i = 0; i < (size_t)cols * K / 2; ++i) q.w[i] = rand();
  for (long i = 0; i < cols * (K / G); ++i) { q.s[i] = 0.004f * rand() / RAND_MAX; q.o[i] = -3.0f * q.s[i] + 0.002f * rand() / RAND_MAX - 0.001f; }
  return q;
}
static double wq(const Q *q, int K, long col, int k) {
  const int c = (q->w[col * (K / 2) + k / 2] >> (4 * (k & 1))) & 15;
  return q->s[col * (K / G) + k / G] * (2.0 + c / 8.0) + q->o[col * (K / G) + k / G];
}
static void gemv(const Q *q, int K, long col0, int N, const double *a, double *y) {
  for (int n = 0; n < N; ++n) { double s = 0; for (int k = 0; k < K; ++k) s += a[k] * wq(q, K, col0 + n, k); y[n] = s; }
}
// fp16 bits from a float of the caches' range (round to nearest even; no subnormals
// needed), and back.
static unsigned short f2h(float f) {
  unsigned u; memcpy(&u, &f, 4);
  const unsigned sign = (u >> 16) & 0x8000u; int e = (int)((u >> 23) & 255) - 127 + 15; unsigned m = u & 0x7fffffu;
  if (e <= 0) return (unsigned short)sign;
  unsigned h = sign | (unsigned)e << 10 | m >> 13; const unsigned rest = m & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (h & 1))) ++h;
  return (unsigned short)h;
}
static float h2f(unsigned short h) {
  const unsigned sign = (h & 0x8000u) << 16, e = (h >> 10) & 31, m = h & 0x3ffu;
  unsigned u = e ? sign | (e - 15 + 127) << 23 | m << 13 : sign;
  float f; memcpy(&f, &u, 4); return f;
}
enum { HQ = 32, HKV = 4, DH = 64, TMAX = 4096 };
// The decode attention of one layer at position T (RoPE'd q and new key; the caches'
// rows below T), as the kernel computes it, in double.
static void attention(const double *qkv, const unsigned short *kc, const unsigned short *vc, const float *cs, int T, double *out) {
  for (int g = 0; g < HKV; ++g) {
    double kn[DH];
    for (int i = 0; i < 32; ++i) {
      const double a = qkv[HQ * DH + g * DH + i], b = qkv[HQ * DH + g * DH + 32 + i], c = cs[T * DH + i], s = cs[T * DH + 32 + i];
      kn[i] = a * c - b * s; kn[i + 32] = b * c + a * s;
    }
    for (int hh = 0; hh < HQ / HKV; ++hh) {
      const int h = g * (HQ / HKV) + hh;
      double q[DH];
      for (int i = 0; i < 32; ++i) {
        const double a = qkv[h * DH + i], b = qkv[h * DH + 32 + i], c = cs[T * DH + i], s = cs[T * DH + 32 + i];
        q[i] = (a * c - b * s) * 0.125; q[i + 32] = (b * c + a * s) * 0.125;
      }
      double *sc = malloc(sizeof(double) * (T + 1)), m = -1e300, l = 0;
      for (int t = 0; t <= T; ++t) {
        double d = 0;
        for (int i = 0; i < DH; ++i) d += q[i] * (t < T ? h2f(kc[((long)g * TMAX + t) * DH + i]) : kn[i]);
        sc[t] = d; if (d > m) m = d;
      }
      for (int t = 0; t <= T; ++t) { sc[t] = exp(sc[t] - m); l += sc[t]; }
      for (int i = 0; i < DH; ++i) {
        double o = 0;
        for (int t = 0; t <= T; ++t) o += sc[t] * (t < T ? h2f(vc[((long)g * TMAX + t) * DH + i]) : qkv[HQ * DH + HKV * DH + g * DH + i]);
        out[h * DH + i] = o / l;
      }
      free(sc);
    }
  }
}
static void rms(const double *x, const float *nw, double *o) {
  double s = 0; for (int k = 0; k < D; ++k) s += x[k] * x[k];
  const double inv = 1.0 / sqrt(s / D + 1e-5); for (int k = 0; k < D; ++k) o[k] = x[k] * inv * nw[k];
}

int main(int argc, char **argv) {
  const int L = argc > 1 ? atoi(argv[1]) : 22, WG = argc > 2 ? atoi(argv[2]) : 512, PF = argc > 3 ? atoi(argv[3]) : 1,
            SKIP = argc > 4 ? atoi(argv[4]) : 0, U2 = argc > 5 ? atoi(argv[5]) : 1, Q8 = argc > 6 ? atoi(argv[6]) : 0,
            T = argc > 7 ? atoi(argv[7]) : 128, ATT = T >= 0, ATTV = argc > 8 ? atoi(argv[8]) : 1;
  cl_platform_id ps[8]; cl_uint np; CK(clGetPlatformIDs(8, ps, &np));
  cl_device_id dev = 0;
  for (cl_uint i = 0; i < np && !dev; i++) if (clGetDeviceIDs(ps[i], CL_DEVICE_TYPE_GPU, 1, &dev, 0)) dev = 0;
  if (!dev) { printf("no GPU\n"); return 1; }
  cl_uint cus; clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof cus, &cus, 0);
  cl_int err; cl_context ctx = clCreateContext(0, 1, &dev, 0, 0, &err); CK(err);
  cl_command_queue q = clCreateCommandQueueWithProperties(ctx, dev, (cl_queue_properties[]){CL_QUEUE_PROPERTIES, CL_QUEUE_PROFILING_ENABLE, 0}, &err); CK(err);
  cl_program p = clCreateProgramWithSource(ctx, 1, &src, 0, &err); CK(err);
  // One work-group of WG items a compute unit: at most 65536 / WG registers an item.
  char opts[256]; snprintf(opts, sizeof opts, "-DD=%d -DNQKV=%d -DF=%d -DPF=%d -DSKIP=%d -DU2=%d -DQ8=%d -DATT=%d -DATTV=%d -DTMAX=%d -cl-nv-verbose -cl-nv-maxrregcount=%d", D, NQKV, F, PF, SKIP, U2, Q8, ATT, ATTV, TMAX,
                           65536 / WG < 255 ? 65536 / WG : 255);
  char log[65536];
  if (clBuildProgram(p, 1, &dev, opts, 0, 0)) { clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, 0); printf("%s\n", log); return 1; }
  clGetProgramBuildInfo(p, dev, CL_PROGRAM_BUILD_LOG, sizeof log, log, 0);
  if (strstr(log, "registers")) printf("%s", strstr(log, "Used") ? strstr(log, "Used") : log);
  srand(3);
  Q wqkv = makeq(D, (long)L * NQKV), wo = makeq(D, (long)L * D), wg = makeq(D, (long)L * 2 * F), wd = makeq(F, (long)L * D);
  float *nw1 = malloc(sizeof(float) * L * D), *nw2 = malloc(sizeof(float) * L * D), *x0 = malloc(sizeof(float) * D);
  for (int i = 0; i < L * D; ++i) { nw1[i] = 0.5f + (float)rand() / RAND_MAX; nw2[i] = 0.5f + (float)rand() / RAND_MAX; }
  for (int i = 0; i < D; ++i) x0[i] = 2.0f * rand() / RAND_MAX - 1.0f;
#define BUF(h, n) clCreateBuffer(ctx, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, n, h, &err)
  cl_mem b[21];
  b[0] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, D * 4, 0, &err); CK(err);
  b[1] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, NQKV * 4, 0, &err); CK(err);
  b[2] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, D * 4, 0, &err); CK(err);
  b[3] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, F * 4, 0, &err); CK(err);
  Q *qs[4] = {&wqkv, &wo, &wg, &wd}; const int ks[4] = {D, D, D, F}; const long cs[4] = {NQKV, D, 2 * F, D};
  double mb = 0;
  for (int i = 0; i < 4; ++i) {
    const size_t cols = (size_t)L * cs[i];
    b[4 + 3 * i] = BUF(qs[i]->w, cols * ks[i] / 2); CK(err);
    b[5 + 3 * i] = BUF(qs[i]->s, cols * (ks[i] / G) * 4); CK(err);
    b[6 + 3 * i] = BUF(qs[i]->o, cols * (ks[i] / G) * 4); CK(err);
    mb += cols * ks[i] / 2 + 2.0 * cols * (ks[i] / G) * 4;
  }
  b[16] = BUF(nw1, (size_t)L * D * 4); CK(err);
  b[17] = BUF(nw2, (size_t)L * D * 4); CK(err);
  b[18] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4, 0, &err); CK(err);
  b[19] = clCreateBuffer(ctx, CL_MEM_READ_WRITE, 4, 0, &err); CK(err);
  // The caches (random rows below T), RoPE's table ([position][cos 32 | sin 32], base
  // 10000), the chunks' partials.
  const size_t kvn = (size_t)L * HKV * TMAX * DH;
  unsigned short *kc = malloc(kvn * 2), *vc = malloc(kvn * 2);
  for (size_t i = 0; i < kvn; ++i) { kc[i] = f2h(2.0f * rand() / RAND_MAX - 1.0f); vc[i] = f2h(2.0f * rand() / RAND_MAX - 1.0f); }
  float *rope = malloc(sizeof(float) * (TMAX + 1) * DH);
  for (int t = 0; t <= TMAX; ++t)
    for (int i = 0; i < 32; ++i) {
      const double th = t * pow(10000.0, -2.0 * i / DH);
      rope[t * DH + i] = (float)cos(th); rope[t * DH + 32 + i] = (float)sin(th);
    }
  cl_mem kcb = BUF(kc, kvn * 2); CK(err);
  cl_mem vcb = BUF(vc, kvn * 2); CK(err);
  cl_mem csb = BUF(rope, sizeof(float) * (TMAX + 1) * DH); CK(err);
  cl_mem partb = clCreateBuffer(ctx, CL_MEM_READ_WRITE, sizeof(float) * HQ * (TMAX / 32 + 1) * (DH + 2), 0, &err); CK(err);
  if (ATT) mb += (double)L * HKV * (T + 1) * DH * 2 * 2;
  cl_kernel k = clCreateKernel(p, "layers", &err); CK(err);
  for (int i = 0; i < 20; ++i) CK(clSetKernelArg(k, i, sizeof(cl_mem), &b[i]));
  CK(clSetKernelArg(k, 21, sizeof kcb, &kcb)); CK(clSetKernelArg(k, 22, sizeof vcb, &vcb));
  CK(clSetKernelArg(k, 23, sizeof csb, &csb)); CK(clSetKernelArg(k, 24, sizeof partb, &partb));
  const int tpos = ATT ? T : 0;
  CK(clSetKernelArg(k, 25, sizeof(int), &tpos));
  const size_t global = (size_t)cus * WG, local = WG;
  const int zero = 0;
  // The layers against the host (double).
  {
    CK(clSetKernelArg(k, 20, sizeof(int), &L));
    CK(clEnqueueWriteBuffer(q, b[0], CL_TRUE, 0, D * 4, x0, 0, 0, 0));
    CK(clEnqueueFillBuffer(q, b[18], &zero, 4, 0, 4, 0, 0, 0)); CK(clEnqueueFillBuffer(q, b[19], &zero, 4, 0, 4, 0, 0, 0));
    CK(clEnqueueNDRangeKernel(q, k, 1, 0, &global, &local, 0, 0, 0));
    float got[D]; int e; CK(clEnqueueReadBuffer(q, b[0], CL_TRUE, 0, D * 4, got, 0, 0, 0));
    CK(clEnqueueReadBuffer(q, b[19], CL_TRUE, 0, 4, &e, 0, 0, 0));
    static double x[D], a[D], qkv[NQKV], y[D], gu[2 * F], hh[F], yd[D];
    for (int i = 0; i < D; ++i) x[i] = x0[i];
    for (int l = 0; l < L; ++l) {
      rms(x, nw1 + (long)l * D, a); gemv(&wqkv, D, (long)l * NQKV, NQKV, a, qkv);
      if (ATT) {
        static double at[D];
        attention(qkv, kc + (size_t)l * HKV * TMAX * DH, vc + (size_t)l * HKV * TMAX * DH, rope, T, at);
        gemv(&wo, D, (long)l * D, D, at, y);
      } else {
        gemv(&wo, D, (long)l * D, D, qkv, y);
      }
      for (int i = 0; i < D; ++i) x[i] += y[i];
      rms(x, nw2 + (long)l * D, a); gemv(&wg, D, (long)l * 2 * F, 2 * F, a, gu);
      for (int i = 0; i < F; ++i) hh[i] = gu[i] / (1.0 + exp(-gu[i])) * gu[F + i];
      gemv(&wd, F, (long)l * D, D, hh, yd); for (int i = 0; i < D; ++i) x[i] += yd[i];
    }
    double maxe = 0, maxx = 0;
    for (int i = 0; i < D; ++i) { if (fabs(got[i] - x[i]) > maxe) maxe = fabs(got[i] - x[i]); if (fabs(x[i]) > maxx) maxx = fabs(x[i]); }
    printf("%d layers against the host: max error %.3e of %.3e%s\n", L, maxe, maxx, e ? " (barrier timed out)" : "");
  }
  double ev[20], wall = 1e30;
  for (int r = 0; r < 20; ++r) {
    CK(clEnqueueWriteBuffer(q, b[0], CL_TRUE, 0, D * 4, x0, 0, 0, 0));
    CK(clEnqueueFillBuffer(q, b[18], &zero, 4, 0, 4, 0, 0, 0));
    clFinish(q); const double t0 = now();
    cl_event e; CK(clEnqueueNDRangeKernel(q, k, 1, 0, &global, &local, 0, 0, &e)); CK(clWaitForEvents(1, &e));
    const double t = now() - t0; if (t < wall) wall = t;
    cl_ulong a0, a1; clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_START, 8, &a0, 0); clGetEventProfilingInfo(e, CL_PROFILING_COMMAND_END, 8, &a1, 0);
    ev[r] = (a1 - a0) / 1e3; clReleaseEvent(e);
  }
  int e; CK(clEnqueueReadBuffer(q, b[19], CL_TRUE, 0, 4, &e, 0, 0, 0));
  double best = 1e30, sum = 0; for (int r = 2; r < 20; ++r) { if (ev[r] < best) best = ev[r]; sum += ev[r]; }
  printf("%d layers, %u x %d items, prefetch %d, skip %d, u2 %d, q8 %d, attention at %d (form %d): kernel %.1f us (best %.1f), %.2f us a layer, %.1f MB read: %.0f GB/s; wall %.1f us%s\n", L, cus, WG, PF, SKIP, U2, Q8, ATT ? T : -1, ATTV,
         sum / 18, best, best / L, mb / 1e6, mb / best / 1e3, wall, e ? " (barrier timed out)" : "");
  return 0;
}
