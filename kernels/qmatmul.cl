// tl.QMatMul (docs/ops.md): C[m][n] = sum_k A[m][k] * (f(code(k, n)) * scale[n][g] + offset[n][g]),
// computed per group as scale * sum(a f) + offset * sum(a). One output per work item;
// codes of column n are contiguous along k.

#define QMATMUL(NAME, DECODE)                                                                       \
  __kernel void NAME(__global const float* A, __global const uchar* W, __global const float* S,     \
                     __global const float* O, __global float* C, int M, int N, int K, int G,        \
                     int row_bytes, int groups) {                                                   \
    const int n = get_global_id(0), m = get_global_id(1);                                           \
    if (n >= N || m >= M) return;                                                                   \
    __global const float* a = A + (long)m * K;                                                      \
    __global const uchar* w = W + (long)n * row_bytes;                                              \
    float acc = 0.0f;                                                                               \
    for (int g = 0; g < groups; ++g) {                                                              \
      const int k0 = g * G, k1 = min(K, k0 + G);                                                    \
      float dot = 0.0f, asum = 0.0f;                                                                \
      for (int k = k0; k < k1; ++k) {                                                               \
        float f = DECODE;                                                                           \
        dot += a[k] * f;                                                                            \
        asum += a[k];                                                                               \
      }                                                                                             \
      acc += S[n * groups + g] * dot + O[n * groups + g] * asum;                                    \
    }                                                                                               \
    C[(long)m * N + n] = acc;                                                                       \
  }

// E0M4: the code goes into the top fraction bits of 2.0f: two bit operations.
QMATMUL(qmatmul_e0m4, as_float(0x40000000u | ((uint)((w[k >> 1] >> ((k & 1) * 4)) & 15) << 19)))
QMATMUL(qmatmul_int4, (float)((w[k >> 1] >> ((k & 1) * 4)) & 15))
QMATMUL(qmatmul_q8, (float)(char)w[k])

inline int q3h_code(__global const uchar* w, int k) {
  const int bit = 7 * (k >> 1);
  const int pair = ((w[bit >> 3] | (w[(bit >> 3) + 1] << 8)) >> (bit & 7)) & 0x7f;
  return (k & 1) ? pair % 11 : pair / 11;
}
QMATMUL(qmatmul_q3h, (float)q3h_code(w, k))

// W4A8, step 1: each row of A to int8 with its abs-max scale; a 64-wide work-group
// per row finds the maximum together, then writes the codes.
__kernel __attribute__((reqd_work_group_size(64, 1, 1)))
void quantize_rows_i8(__global const float* A, __global char* Q, __global float* RS, int M, int K) {
  __local float red[64];
  const int m = get_group_id(0), t = get_local_id(0);
  __global const float* a = A + (long)m * K;
  float amax = 0.0f;
  for (int k = t; k < K; k += 64) amax = fmax(amax, fabs(a[k]));
  red[t] = amax;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int step = 32; step > 0; step >>= 1) {
    if (t < step) red[t] = fmax(red[t], red[t + step]);
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float s = red[0] > 0.0f ? red[0] / 127.0f : 1.0f;
  for (int k = t; k < K; k += 64) Q[(long)m * K + k] = (char)clamp((int)rint(a[k] / s), -127, 127);
  if (t == 0) RS[m] = s;
}

// W4A8, step 2: int8 x int4 products summed in int per group, scaled once per group.
__kernel void qmatmul_w4a8(__global const char* QA, __global const float* RS, __global const uchar* W,
                           __global const float* S, __global float* C, int M, int N, int K, int G, int row_bytes,
                           int groups) {
  const int n = get_global_id(0), m = get_global_id(1);
  if (n >= N || m >= M) return;
  __global const char* a = QA + (long)m * K;
  __global const uchar* w = W + (long)n * row_bytes;
  float acc = 0.0f;
  for (int g = 0; g < groups; ++g) {
    const int k0 = g * G, k1 = min(K, k0 + G);
    int dot = 0;
    for (int k = k0; k < k1; ++k) {
      int q = (w[k >> 1] >> ((k & 1) * 4)) & 15;
      dot += (int)a[k] * (q >= 8 ? q - 16 : q);
    }
    acc += S[n * groups + g] * (float)dot;
  }
  C[(long)m * N + n] = acc * RS[m];
}

// Decode on CPUs (M <= 4): a column per work item, 8 codes per step as one vector
// (the 8 levels of a 4-byte word, or 8 int8 codes) against 8 floats of each row of A.
// Needs group % 8 == 0 so that a step stays in one group; ragged tails go code by code.
#define SHIFTS8 (uint8)(0, 4, 8, 12, 16, 20, 24, 28)
#define QGEMV_COLS(NAME, LEVELS8, LEVEL_AT)                                                         \
  __kernel void NAME(__global const float* A, __global const uchar* W, __global const float* S,     \
                     __global const float* O, __global float* C, int M, int N, int K, int G,        \
                     int row_bytes, int groups) {                                                   \
    const int n = get_global_id(0);                                                                 \
    if (n >= N) return;                                                                             \
    __global const uchar* w = W + (long)n * row_bytes;                                              \
    float8 d0 = 0.0f, d1 = 0.0f, d2 = 0.0f, d3 = 0.0f;                                              \
    float acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;                                      \
    for (int g = 0; g < groups; ++g) {                                                              \
      const int k0 = g * G, k1 = min(K, k0 + G);                                                    \
      const float sc = S[(long)n * groups + g], of = O[(long)n * groups + g];                       \
      int k = k0;                                                                                   \
      for (; k + 8 <= k1; k += 8) {                                                                 \
        const float8 wv = fma(LEVELS8, (float8)sc, (float8)of);                                     \
        d0 = fma(vload8(0, A + k), wv, d0);                                                         \
        if (M > 1) d1 = fma(vload8(0, A + K + k), wv, d1);                                          \
        if (M > 2) d2 = fma(vload8(0, A + 2 * K + k), wv, d2);                                      \
        if (M > 3) d3 = fma(vload8(0, A + 3 * K + k), wv, d3);                                      \
      }                                                                                             \
      for (; k < k1; ++k) {                                                                         \
        const float wv = (LEVEL_AT) * sc + of;                                                      \
        acc0 += A[k] * wv;                                                                          \
        if (M > 1) acc1 += A[K + k] * wv;                                                           \
        if (M > 2) acc2 += A[2 * K + k] * wv;                                                       \
        if (M > 3) acc3 += A[3 * K + k] * wv;                                                       \
      }                                                                                             \
    }                                                                                               \
    const float8 one = 1.0f;                                                                        \
    C[n] = acc0 + dot(d0.lo, one.lo) + dot(d0.hi, one.hi);                                          \
    if (M > 1) C[N + n] = acc1 + dot(d1.lo, one.lo) + dot(d1.hi, one.hi);                           \
    if (M > 2) C[2 * N + n] = acc2 + dot(d2.lo, one.lo) + dot(d2.hi, one.hi);                       \
    if (M > 3) C[3 * N + n] = acc3 + dot(d3.lo, one.lo) + dot(d3.hi, one.hi);                       \
  }

#define WORD_AT(k) ((uint8)as_uint(vload4((k) >> 3, w)) >> SHIFTS8 & 15u)
QGEMV_COLS(qgemv_cols_e0m4, as_float8(0x40000000u | WORD_AT(k) << 19),
           as_float(0x40000000u | ((uint)((w[k >> 1] >> ((k & 1) * 4)) & 15) << 19)))
QGEMV_COLS(qgemv_cols_int4, convert_float8(WORD_AT(k)), (float)((w[k >> 1] >> ((k & 1) * 4)) & 15))
QGEMV_COLS(qgemv_cols_q8, convert_float8(vload8(0, (__global const char*)w + k)), (float)(char)w[k])

// Prefill: dequantize a whole weight once into a float K x N matrix (row-major), then
// the float matmul runs at full speed. One element per work item.
#define DEQUANT(NAME, DECODE)                                                                       \
  __kernel void NAME(__global const uchar* W, __global const float* S, __global const float* O,     \
                     __global float* out, int K, int N, int G, int row_bytes, int groups) {         \
    const int k = get_global_id(0), n = get_global_id(1);                                           \
    if (k >= K || n >= N) return;                                                                   \
    __global const uchar* w = W + (long)n * row_bytes;                                              \
    const int g = n * groups + k / G;                                                               \
    out[(long)k * N + n] = (DECODE) * S[g] + O[g];                                                  \
  }

DEQUANT(dequant_e0m4, as_float(0x40000000u | ((uint)((w[k >> 1] >> ((k & 1) * 4)) & 15) << 19)))
DEQUANT(dequant_int4, (float)((w[k >> 1] >> ((k & 1) * 4)) & 15))
DEQUANT(dequant_q8, (float)(char)w[k])
DEQUANT(dequant_q3h, (float)q3h_code(w, k))

// Decode (M <= 4): one 64-wide work-group per output column. Work item t reads codes
// 8 at a time at 8t, 8t + 512, ... (consecutive items read consecutive bytes), keeps
// a partial sum per row, and the group adds them up in local memory. Needs group % 8 == 0
// so that 8 codes share one scale and offset; ragged K tails go code by code.
#define GEMV_WG 64

// Adds up the work-group's partial sums of up to 4 rows and writes row m of column n
// (scaled by row_scale[m] when given). Every work item of the group must call it.
inline void gemv_finish(__local float* red, float a0, float a1, float a2, float a3, int t, int M, int N, int n,
                        __global float* C, __global const float* row_scale) {
  red[t] = a0;
  red[GEMV_WG + t] = a1;
  red[2 * GEMV_WG + t] = a2;
  red[3 * GEMV_WG + t] = a3;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int step = GEMV_WG / 2; step > 0; step >>= 1) {
    if (t < step)
      for (int m = 0; m < 4; ++m) red[m * GEMV_WG + t] += red[m * GEMV_WG + t + step];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  if (t < M) C[(long)t * N + n] = red[t * GEMV_WG] * (row_scale ? row_scale[t] : 1.0f);
}

#define QGEMV(NAME, LOAD8, CODE, LEVEL, TAIL_CODE)                                                  \
  __kernel __attribute__((reqd_work_group_size(GEMV_WG, 1, 1)))                                     \
  void NAME(__global const float* A, __global const uchar* W, __global const float* S,              \
            __global const float* O, __global float* C, int M, int N, int K, int G, int row_bytes,  \
            int groups) {                                                                           \
    __local float red[4 * GEMV_WG];                                                                 \
    const int n = get_group_id(0), t = get_local_id(0);                                             \
    __global const uchar* w = W + (long)n * row_bytes;                                              \
    __global const float* s = S + (long)n * groups;                                                 \
    __global const float* o = O + (long)n * groups;                                                 \
    float acc0 = 0.0f, acc1 = 0.0f, acc2 = 0.0f, acc3 = 0.0f;                                      \
    const int words = K / 8;                                                                        \
    for (int i = t; i < words; i += GEMV_WG) {                                                      \
      LOAD8;                                                                                        \
      const int k0 = 8 * i, g = k0 / G;                                                             \
      const float sc = s[g], of = o[g];                                                             \
      for (int j = 0; j < 8; ++j) {                                                                 \
        const float wv = (LEVEL(CODE)) * sc + of;                                                   \
        acc0 += A[k0 + j] * wv;                                                                     \
        if (M > 1) acc1 += A[K + k0 + j] * wv;                                                      \
        if (M > 2) acc2 += A[2 * K + k0 + j] * wv;                                                  \
        if (M > 3) acc3 += A[3 * K + k0 + j] * wv;                                                  \
      }                                                                                             \
    }                                                                                               \
    for (int k = 8 * words + t; k < K; k += GEMV_WG) {                                              \
      const int g = k / G;                                                                          \
      const float wv = (LEVEL(TAIL_CODE)) * s[g] + o[g];                                            \
      acc0 += A[k] * wv;                                                                            \
      if (M > 1) acc1 += A[K + k] * wv;                                                             \
      if (M > 2) acc2 += A[2 * K + k] * wv;                                                         \
      if (M > 3) acc3 += A[3 * K + k] * wv;                                                         \
    }                                                                                               \
    gemv_finish(red, acc0, acc1, acc2, acc3, t, M, N, n, C, 0);                                     \
  }

#define E0M4_LEVEL(q) as_float(0x40000000u | ((uint)(q) << 19))
#define INT_LEVEL(q) ((float)(q))
#define NIBBLE(j) ((b[(j) >> 1] >> (((j) & 1) * 4)) & 15)
#define NIBBLE_AT(k) ((w[(k) >> 1] >> (((k) & 1) * 4)) & 15)

QGEMV(qgemv_e0m4, uchar b[4]; vstore4(vload4(i, w), 0, b), NIBBLE(j), E0M4_LEVEL, NIBBLE_AT(k))
QGEMV(qgemv_int4, uchar b[4]; vstore4(vload4(i, w), 0, b), NIBBLE(j), INT_LEVEL, NIBBLE_AT(k))
QGEMV(qgemv_q8, char b[8]; vstore8(vload8(i, (__global const char*)w), 0, b), b[j], INT_LEVEL, ((char)w[k]))

// q3h decode: work item t takes pairs t, t + 64, ... (two bytes hold a 7-bit pair);
// a pair never straddles a group since groups are even.
__kernel __attribute__((reqd_work_group_size(GEMV_WG, 1, 1)))
void qgemv_q3h(__global const float* A, __global const uchar* W, __global const float* S, __global const float* O,
               __global float* C, int M, int N, int K, int G, int row_bytes, int groups) {
  __local float red[4 * GEMV_WG];
  const int n = get_group_id(0), t = get_local_id(0);
  __global const uchar* w = W + (long)n * row_bytes;
  __global const float* s = S + (long)n * groups;
  __global const float* o = O + (long)n * groups;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int pairs = K / 2;
  for (int p = t; p < pairs; p += GEMV_WG) {
    const int bit = 7 * p, k = 2 * p, g = k / G;
    const int pair = ((w[bit >> 3] | (w[(bit >> 3) + 1] << 8)) >> (bit & 7)) & 0x7f;
    const float wa = (float)(pair / 11) * s[g] + o[g], wb = (float)(pair % 11) * s[g] + o[g];
    for (int m = 0; m < M; ++m) acc[m] += A[m * K + k] * wa + A[m * K + k + 1] * wb;
  }
  if ((K & 1) && t == 0) {
    const int k = K - 1, g = k / G;
    const float wv = (float)q3h_code(w, k) * s[g] + o[g];
    for (int m = 0; m < M; ++m) acc[m] += A[m * K + k] * wv;
  }
  gemv_finish(red, acc[0], acc[1], acc[2], acc[3], t, M, N, n, C, 0);
}

// W4A8 decode: int8 activations times int4 weights, 8 at a time in integers, each
// 8-code dot scaled by its group's scale; the row scale comes last. Needs group % 8 == 0.
__kernel __attribute__((reqd_work_group_size(GEMV_WG, 1, 1)))
void qgemv_w4a8(__global const char* QA, __global const float* RS, __global const uchar* W, __global const float* S,
                __global float* C, int M, int N, int K, int G, int row_bytes, int groups) {
  __local float red[4 * GEMV_WG];
  const int n = get_group_id(0), t = get_local_id(0);
  __global const uchar* w = W + (long)n * row_bytes;
  __global const float* s = S + (long)n * groups;
  float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  const int words = K / 8;
  for (int i = t; i < words; i += GEMV_WG) {
    uchar b[4];
    vstore4(vload4(i, w), 0, b);
    const int k0 = 8 * i;
    const float sc = s[k0 / G];
    for (int m = 0; m < M; ++m) {
      int d = 0;
      for (int j = 0; j < 8; ++j) {
        int q = (b[j >> 1] >> ((j & 1) * 4)) & 15;
        d += (int)QA[m * K + k0 + j] * (q >= 8 ? q - 16 : q);
      }
      acc[m] += sc * (float)d;
    }
  }
  for (int k = 8 * words + t; k < K; k += GEMV_WG) {
    int q = (w[k >> 1] >> ((k & 1) * 4)) & 15;
    for (int m = 0; m < M; ++m) acc[m] += s[k / G] * (float)((int)QA[m * K + k] * (q >= 8 ? q - 16 : q));
  }
  gemv_finish(red, acc[0], acc[1], acc[2], acc[3], t, M, N, n, C, RS);
}
