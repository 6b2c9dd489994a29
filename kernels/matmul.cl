// Batched matrix product with broadcast batch dims and arbitrary element strides
// (so Gemm's transposes need no copy): C[b][m][n] = sum_k A[b][m][k] * B[b][k][n].
// 16x16 tiles through local memory.
#define TILE 16

__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void matmul_f32(__global const float* A, __global const float* B, __global float* C, SPLIT_ARGS, int M, int N, int K,
                int a_rs, int a_cs, int b_rs, int b_cs, int8 bdims, int8 bsa, int8 bsb) {
  __local float As[TILE][TILE];
  __local float Bs[TILE][TILE];
  const int n = get_global_id(0), m = get_global_id(1), b = get_global_id(2);
  const int tn = get_local_id(0), tm = get_local_id(1);
  const int aoff = strided_offset(b, bdims, bsa), boff = strided_offset(b, bdims, bsb);
  float acc = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    int ka = k0 + tn, kb = k0 + tm;
    As[tm][tn] = (m < M && ka < K) ? A[aoff + m * a_rs + ka * a_cs] : 0.0f;
    Bs[tm][tn] = (n < N && kb < K) ? B[boff + kb * b_rs + n * b_cs] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < TILE; ++k) acc += As[tm][k] * Bs[k][tn];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (m < M && n < N) STORE((long)b * M + m, n, acc);
}

// matmul_f32 with a tl.MatMul's GLU epilogue (prefill on GPUs): output column n < N / 2 is
// gate(A B[:, n]) * A B[:, n + N / 2]; each step loads A's tile and both of B's, and the
// product's halves never reach memory (in steps they went to scratch and back through
// glu_f32: a launch more a layer).
__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1)))
void matmul_glu_f32(__global const float* A, __global const float* B, __global float* C, SPLIT_ARGS, int M, int N,
                    int K, int a_rs, int a_cs, int b_rs, int b_cs, int8 bdims, int8 bsa, int8 bsb, int glu) {
  __local float As[TILE][TILE];
  __local float Gs[TILE][TILE];
  __local float Us[TILE][TILE];
  const int width = N / 2;
  const int n = get_global_id(0), m = get_global_id(1), b = get_global_id(2);
  const int tn = get_local_id(0), tm = get_local_id(1);
  const int aoff = strided_offset(b, bdims, bsa), boff = strided_offset(b, bdims, bsb);
  float g = 0.0f, u = 0.0f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    int ka = k0 + tn, kb = k0 + tm;
    As[tm][tn] = (m < M && ka < K) ? A[aoff + m * a_rs + ka * a_cs] : 0.0f;
    Gs[tm][tn] = (n < width && kb < K) ? B[boff + kb * b_rs + n * b_cs] : 0.0f;
    Us[tm][tn] = (n < width && kb < K) ? B[boff + kb * b_rs + (n + width) * b_cs] : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int k = 0; k < TILE; ++k) {
      g += As[tm][k] * Gs[k][tn];
      u += As[tm][k] * Us[k][tn];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (m < M && n < width) STORE_GLU((long)b * M + m, n, g, u, width);
}

// One output element per work item, no local memory: for M = 1 (decode), where a
// tile would idle 15 of 16 rows, and on CPU devices, where barriers cost more than
// they save and the compiler vectorizes across consecutive n.
__kernel void matmul_rows_f32(__global const float* A, __global const float* B, __global float* C, SPLIT_ARGS,
                              int M, int N, int K, int a_rs, int a_cs, int b_rs, int b_cs, int8 bdims, int8 bsa, int8 bsb) {
  const int n = get_global_id(0), m = get_global_id(1), b = get_global_id(2);
  if (n >= N || m >= M) return;
  const int aoff = strided_offset(b, bdims, bsa) + m * a_rs, boff = strided_offset(b, bdims, bsb) + n * b_cs;
  float acc = 0.0f;
  for (int k = 0; k < K; ++k) acc += A[aoff + k * a_cs] * B[boff + k * b_rs];
  STORE((long)b * M + m, n, acc);
}

// Decode on GPUs (M <= 4; tl.MatMul's W [K, N] row-major, N % 4 == 0): a work item
// takes 4 columns (consecutive items, consecutive columns: W's rows are read whole) and
// every 16th k; the 16 items of a column group add their sums in local memory. With NW
// (kernels/common.cl's GEMV_ARGS) A's rows are RMS-normalized, their squares summed
// along the way; with glu it takes the 4 up columns N / 2 further on too.
#define FGEMV_KS 16
inline float4 fgemv_sum(__local float4* red, float4 v, int x, int y) {  // over y; item y = 0 gets it
  red[y * 64 + x] = v;
  barrier(CLK_LOCAL_MEM_FENCE);
  float4 s = 0.0f;
  if (y == 0)
    for (int i = 0; i < FGEMV_KS; ++i) s += red[i * 64 + x];
  barrier(CLK_LOCAL_MEM_FENCE);
  return s;
}

// An item takes runs of 4 consecutive k (every 16th run): W's 4 rows are loaded before
// they are used, so that an item has 4 loads in flight (8 with the up columns), and A's
// and the norm's 4 values are one float4 each. On the H100 (tl-bench --kernels, caches
// evicted) Qwen2's 896 x 151936 lm_head reads at 2.69 TB/s this way, 1.98 with a k at a
// time (docs/bench/h100/session12c-*).
// ROWS: the rows of A the kernel keeps sums for (M <= ROWS); the _m1 kernel keeps one.
#define FGEMV_EACH(X) X(0) X(1) X(2) X(3)
#define FGEMV_LOAD(j)                                                                                   \
  const float4 b##j = vload4(0, B + (4 * (long)k4 + j) * N + n);                                        \
  const float4 bu##j = glu ? vload4(0, B + (4 * (long)k4 + j) * N + n + width) : 0.0f;
// Row m of A's 4 values at run k4 (scaled by the norm's nw) times W's 4 rows into the sums.
#define FGEMV_ROW4(m)                                                                                   \
  if (rows > m && M > m) {                                                                              \
    const float4 a = vload4(k4, A + (long)(m) * K), an = a * nw;                                        \
    ss.s##m += dot(a, a);                                                                               \
    acc[m] = fma((float4)an.x, b0, fma((float4)an.y, b1, fma((float4)an.z, b2, fma((float4)an.w, b3, acc[m])))); \
    if (glu) up[m] = fma((float4)an.x, bu0, fma((float4)an.y, bu1, fma((float4)an.z, bu2, fma((float4)an.w, bu3, up[m])))); \
  }
// The same for one k past the runs (K % 4 != 0).
#define FGEMV_ROW1(m)                                                                                   \
  if (rows > m && M > m) {                                                                              \
    const float a = A[(long)(m) * K + k];                                                               \
    ss.s##m += a * a;                                                                                   \
    acc[m] = fma((float4)(a * nw), b, acc[m]);                                                          \
    if (glu) up[m] = fma((float4)(a * nw), bu, up[m]);                                                  \
  }
#define FGEMV(NAME, ROWS)                                                                               \
  __kernel __attribute__((reqd_work_group_size(64, FGEMV_KS, 1)))                                       \
  void NAME(__global const float* A, __global const float* B, __global float* C, SPLIT_ARGS, int M, int N, \
            int K, GEMV_ARGS) {                                                                         \
    __local float4 red[FGEMV_KS * 64];                                                                  \
    const int x = get_local_id(0), y = get_local_id(1);                                                 \
    const int width = glu ? N / 2 : N, n = (get_group_id(0) * 64 + x) * 4, rows = ROWS;                \
    float4 acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, up[4] = {0.0f, 0.0f, 0.0f, 0.0f}, ss = 0.0f;             \
    if (n < width) {                                                                                    \
      for (int k4 = y; k4 < K / 4; k4 += FGEMV_KS) {                                                    \
        FGEMV_EACH(FGEMV_LOAD)                                                                          \
        const float4 nw = NW ? vload4(k4, NW) : 1.0f;                                                   \
        FGEMV_EACH(FGEMV_ROW4)                                                                          \
      }                                                                                                 \
      for (int k = K / 4 * 4 + y; k < K; k += FGEMV_KS) {                                               \
        const float4 b = vload4(0, B + (long)k * N + n), bu = glu ? vload4(0, B + (long)k * N + n + width) : 0.0f; \
        const float nw = NW ? NW[k] : 1.0f;                                                             \
        FGEMV_EACH(FGEMV_ROW1)                                                                          \
      }                                                                                                 \
    }                                                                                                   \
    const float4 sum_sq = NW ? fgemv_sum(red, ss, x, y) : 0.0f;                                         \
    for (int m = 0; m < rows && m < M; ++m) {                                                           \
      const float4 v = fgemv_sum(red, acc[m], x, y), u = glu ? fgemv_sum(red, up[m], x, y) : 0.0f;      \
      if (y != 0 || n >= width) continue;                                                               \
      const float r = m == 0 ? sum_sq.x : m == 1 ? sum_sq.y : m == 2 ? sum_sq.z : sum_sq.w;             \
      const float inv = NW ? 1.0f / sqrt(r / K + eps) : 1.0f;                                           \
      const float vs[4] = {v.x, v.y, v.z, v.w}, us[4] = {u.x, u.y, u.z, u.w};                           \
      for (int c = 0; c < 4; ++c) {                                                                     \
        if (glu) STORE_GLU(m, n + c, vs[c] * inv, us[c] * inv, width);                                  \
        else STORE(m, n + c, vs[c] * inv);                                                              \
      }                                                                                                 \
    }                                                                                                   \
  }
FGEMV(gemv_f32, 4)
FGEMV(gemv_f32_m1, 1)

// A 4x4 block's operands: a0..a3, A's rows m..m + 3 (the last repeated past M), and
// boff, B's column n in batch b.
#define BLOCK4_OPERANDS                                                                         \
  const int aoff = strided_offset(b, bdims, bsa), boff = strided_offset(b, bdims, bsb) + n;     \
  const int r1 = min(m + 1, M - 1), r2 = min(m + 2, M - 1), r3 = min(m + 3, M - 1);             \
  __global const float* a0 = A + aoff + m * a_rs;                                               \
  __global const float* a1 = A + aoff + r1 * a_rs;                                              \
  __global const float* a2 = A + aoff + r2 * a_rs;                                              \
  __global const float* a3 = A + aoff + r3 * a_rs;

// A 4x4 block of C per work item, B read as float4 along n (needs b_cs == 1 and
// N % 4 == 0): 16 multiply-adds per 5 loads, for CPU devices.
__kernel void matmul_4x4_f32(__global const float* A, __global const float* B, __global float* C, SPLIT_ARGS,
                             int M, int N, int K, int a_rs, int a_cs, int b_rs, int b_cs, int8 bdims, int8 bsa, int8 bsb) {
  const int n = get_global_id(0) * 4, m = get_global_id(1) * 4, b = get_global_id(2);
  if (n >= N || m >= M) return;
  BLOCK4_OPERANDS
  float4 c0 = 0.0f, c1 = 0.0f, c2 = 0.0f, c3 = 0.0f;
  for (int k = 0; k < K; ++k) {
    float4 bv = vload4(0, B + boff + k * b_rs);
    int ka = k * a_cs;
    c0 += a0[ka] * bv;
    c1 += a1[ka] * bv;
    c2 += a2[ka] * bv;
    c3 += a3[ka] * bv;
  }
  // Four columns stay in one output: the host asks for split widths that are multiples of 4.
  const long row = (long)b * M + m;
  const float4 bv = bias ? vload4(0, bias + n) : (float4)0.0f;
#define STORE4(i, c) vstore4(c + bv + (res ? vload4(0, res + (row + i) * N0 + n) : (float4)0.0f), 0, &OUT_AT(row + i, n))
  STORE4(0, c0);
  if (m + 1 < M) STORE4(1, c1);
  if (m + 2 < M) STORE4(2, c2);
  if (m + 3 < M) STORE4(3, c3);
#undef STORE4
}

// matmul_4x4_f32 with a tl.MatMul's GLU epilogue (prefill on CPU devices): a 4x4 block of
// output columns n < N / 2 from the gate's block at n and the up's at n + N / 2, gated as
// stored; the product's halves never reach memory.
__kernel void matmul_4x4_glu_f32(__global const float* A, __global const float* B, __global float* C, SPLIT_ARGS,
                                 int M, int N, int K, int a_rs, int a_cs, int b_rs, int b_cs, int8 bdims, int8 bsa,
                                 int8 bsb, int glu) {
  const int width = N / 2;
  const int n = get_global_id(0) * 4, m = get_global_id(1) * 4, b = get_global_id(2);
  if (n >= width || m >= M) return;
  BLOCK4_OPERANDS
  float4 g0 = 0.0f, g1 = 0.0f, g2 = 0.0f, g3 = 0.0f, u0 = 0.0f, u1 = 0.0f, u2 = 0.0f, u3 = 0.0f;
  for (int k = 0; k < K; ++k) {
    const float4 gv = vload4(0, B + boff + k * b_rs), uv = vload4(0, B + boff + width + k * b_rs);
    const int ka = k * a_cs;
    g0 += a0[ka] * gv;
    g1 += a1[ka] * gv;
    g2 += a2[ka] * gv;
    g3 += a3[ka] * gv;
    u0 += a0[ka] * uv;
    u1 += a1[ka] * uv;
    u2 += a2[ka] * uv;
    u3 += a3[ka] * uv;
  }
  const long row = (long)b * M + m;
#define STORE_GLU4(i, g, u)                       \
  STORE_GLU(row + i, n, g.s0, u.s0, width);         \
  STORE_GLU(row + i, n + 1, g.s1, u.s1, width);     \
  STORE_GLU(row + i, n + 2, g.s2, u.s2, width);     \
  STORE_GLU(row + i, n + 3, g.s3, u.s3, width)
  STORE_GLU4(0, g0, u0);
  if (m + 1 < M) {
    STORE_GLU4(1, g1, u1);
  }
  if (m + 2 < M) {
    STORE_GLU4(2, g2, u2);
  }
  if (m + 3 < M) {
    STORE_GLU4(3, g3, u3);
  }
#undef STORE_GLU4
}

// One row and 8 columns of C per work item, B read as float8 along n (b_cs == 1, split
// widths multiples of 8): a decode step's rows on CPU devices, where a 4x4 block would
// repeat its one row four times.
__kernel void matmul_1x8_f32(__global const float* A, __global const float* B, __global float* C, SPLIT_ARGS,
                             int M, int N, int K, int a_rs, int a_cs, int b_rs, int b_cs, int8 bdims, int8 bsa, int8 bsb) {
  const int n = get_global_id(0) * 8, m = get_global_id(1), b = get_global_id(2);
  if (n >= N || m >= M) return;
  const int aoff = strided_offset(b, bdims, bsa) + m * a_rs, boff = strided_offset(b, bdims, bsb) + n;
  float8 c = 0.0f;
  for (int k = 0; k < K; ++k) c += A[aoff + k * a_cs] * vload8(0, B + boff + k * b_rs);
  const long row = (long)b * M + m;
  const float8 bv = bias ? vload8(0, bias + n) : (float8)0.0f;
  const float8 rv = res ? vload8(0, res + row * N0 + n) : (float8)0.0f;
  vstore8(c + bv + rv, 0, &OUT_AT(row, n));
}

// Decode on CPU devices (M < 4; tl.MatMul's W [K, N] row-major): gemv_f32's arguments. A
// work item (a work-group of its own) takes GEMV_CPU_RUNS runs of 8 columns of one row
// over all of K, so that it reads each row of W as one contiguous run, with the norm's
// squares summed along the way (NW) and the up columns N / 2 further on (glu). The last
// item of a row may take fewer runs.
#define GEMV_CPU_RUNS 8
#define GEMV_CPU_STEP(runs)                                                    \
  for (int k = 0; k < K; ++k) {                                                \
    const float x = a[k];                                                      \
    ss += x * x;                                                               \
    const float8 xs = (float8)(NW ? x * NW[k] : x);                            \
    __global const float* w = B + (long)k * N + n0;                            \
    for (int r = 0; r < (runs); ++r) {                                         \
      acc[r] = fma(xs, vload8(r, w), acc[r]);                                  \
      if (glu) up[r] = fma(xs, vload8(r, w + width), up[r]);                   \
    }                                                                          \
  }
TASK_KERNEL(gemv_rows8_f32)(TASK_ARGS __global const float* A, __global const float* B, __global float* C,
                            SPLIT_ARGS, int M, int N, int K, GEMV_ARGS) {
  const int width = glu ? N / 2 : N, n0 = TASK_ID * 8 * GEMV_CPU_RUNS, m = TASK_ROW;
  if (n0 >= width || m >= M) return;
  const int runs = min(GEMV_CPU_RUNS, (width - n0) / 8);
  __global const float* a = A + (long)m * K;
  float8 acc[GEMV_CPU_RUNS], up[GEMV_CPU_RUNS];
  for (int r = 0; r < GEMV_CPU_RUNS; ++r) acc[r] = up[r] = 0.0f;
  float ss = 0.0f;
  if (runs == GEMV_CPU_RUNS) {  // a constant trip count keeps the sums in registers
    GEMV_CPU_STEP(GEMV_CPU_RUNS)
  } else {
    GEMV_CPU_STEP(runs)
  }
  const float inv = NW ? 1.0f / sqrt(ss / K + eps) : 1.0f;
  for (int r = 0; r < runs; ++r) {
    const float vs[8] = {acc[r].s0, acc[r].s1, acc[r].s2, acc[r].s3, acc[r].s4, acc[r].s5, acc[r].s6, acc[r].s7};
    const float us[8] = {up[r].s0, up[r].s1, up[r].s2, up[r].s3, up[r].s4, up[r].s5, up[r].s6, up[r].s7};
    for (int c = 0; c < 8; ++c) {
      const int n = n0 + 8 * r + c;
      if (glu) STORE_GLU(m, n, vs[c] * inv, us[c] * inv, width);
      else STORE(m, n, vs[c] * inv);
    }
  }
}
#undef GEMV_CPU_STEP

// Conv, direct: one output element per work item, over its group's input channels and the
// kernel window (spatial dims padded to 3 with 1s). Patch embeddings (stride = kernel)
// read each input element once.
__kernel void conv_f32(__global const float* X, __global const float* W, __global const float* B, __global float* Y,
                       int n, int C, int M, int group, int4 in, int4 out, int4 ker, int4 stride, int4 dil, int4 pad,
                       int has_bias) {
  const int i = get_global_id(0);
  if (i >= n) return;
  const int o3 = i % out.z, o2 = i / out.z % out.y, o1 = i / (out.z * out.y) % out.x;
  const int m = i / (out.x * out.y * out.z) % M, b = i / (out.x * out.y * out.z * M);
  const int cpg = C / group, g = m / (M / group);
  float acc = has_bias ? B[m] : 0.0f;
  for (int c = 0; c < cpg; ++c) {
    __global const float* x = X + ((long)b * C + g * cpg + c) * in.x * in.y * in.z;
    __global const float* w = W + ((long)m * cpg + c) * ker.x * ker.y * ker.z;
    for (int k1 = 0; k1 < ker.x; ++k1) {
      const int p1 = o1 * stride.x - pad.x + k1 * dil.x;
      if (p1 < 0 || p1 >= in.x) continue;
      for (int k2 = 0; k2 < ker.y; ++k2) {
        const int p2 = o2 * stride.y - pad.y + k2 * dil.y;
        if (p2 < 0 || p2 >= in.y) continue;
        for (int k3 = 0; k3 < ker.z; ++k3) {
          const int p3 = o3 * stride.z - pad.z + k3 * dil.z;
          if (p3 < 0 || p3 >= in.z) continue;
          acc += x[(p1 * in.y + p2) * in.z + p3] * w[(k1 * ker.y + k2) * ker.z + k3];
        }
      }
    }
  }
  Y[i] = acc;
}
