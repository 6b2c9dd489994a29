// tl.QMatMul (docs/ops.md): C[m][n] = sum_k A[m][k] * (f(code(k, n)) * scale[n][g] + offset[n][g]),
// g = k / group; the codes of column n are contiguous along k. Three kernel families:
// decode on GPUs (M <= 4: a 64-wide work-group per 4 columns), tiles on GPUs (64 x 64
// outputs per work-group, each weight dequantized once per tile into local memory) and
// columns on CPUs (a column and 4 or 8 rows per work item, 8 codes dequantized per
// vector step).

// Stamps X(i) for the rows of a CPU work item: 4 for decode (fewer registers), 8 for prefill.
#define ROWS4(X) X(0) X(1) X(2) X(3)
#define ROWS8(X) ROWS4(X) X(4) X(5) X(6) X(7)
#define ROWS4_COUNT 4
#define ROWS8_COUNT 8

// CPUs: a column n and ROWS rows per work item. Each 8-code step is dequantized once into
// a float8 and used by every row. Steps stay within a group; a group's ragged end, and
// whole groups when the group size is not a multiple of 8, go code by code. (The loop
// forms matter: PoCL made decode 1.6x slower with a scalar head loop or a `k < k8` test.)
#define QMATMUL_COLS(NAME, ROWS, AT, AT8)                                                           \
  __kernel void NAME(__global const float* A, __global const uchar* W, __global const float* S,     \
                     __global const float* O, __global float* C, SPLIT_ARGS, int M, int N, int K, int G,        \
                     int row_bytes, int groups) {                                                   \
    const int n = get_global_id(0), r0 = ROWS##_COUNT * get_global_id(1);                           \
    if (n >= N || r0 >= M) return;                                                                  \
    const int R = min(ROWS##_COUNT, M - r0);                                                        \
    __global const uchar* w = W + (long)n * row_bytes;                                              \
    __global const float* a = A + (long)r0 * K;                                                     \
    ROWS(COLS_DECLARE)                                                                              \
    for (int g = 0; g < groups; ++g) {                                                              \
      const int k1 = min(K, (g + 1) * G);                                                           \
      const float sc = S[(long)n * groups + g], of = O[(long)n * groups + g];                       \
      int k = g * G;                                                                                \
      for (const int k8 = (G & 7) ? k : k1; k + 8 <= k8; k += 8) {                                  \
        const float8 wv = fma(AT8(w, k), (float8)sc, (float8)of);                                   \
        ROWS(COLS_VECTOR)                                                                           \
      }                                                                                             \
      for (; k < k1; ++k) {                                                                         \
        const float wv = AT(w, k) * sc + of;                                                        \
        ROWS(COLS_SCALAR)                                                                           \
      }                                                                                             \
    }                                                                                               \
    const float8 one = 1.0f;                                                                        \
    ROWS(COLS_STORE)                                                                                \
  }
#define COLS_DECLARE(i) float8 d##i = 0.0f; float s##i = 0.0f;
#define COLS_SCALAR(i) if (R > i) s##i += a[i * K + k] * wv;
#define COLS_VECTOR(i) if (R > i) d##i = fma(vload8(0, a + i * K + k), wv, d##i);
#define COLS_STORE(i) if (R > i) STORE(r0 + i, n, s##i + dot(d##i.lo, one.lo) + dot(d##i.hi, one.hi));

QMATMUL_COLS(qmatmul_cols_e0m4, ROWS8, E0M4_AT, E0M4_AT8)
QMATMUL_COLS(qmatmul_cols_int4, ROWS8, INT4_AT, INT4_AT8)
QMATMUL_COLS(qmatmul_cols_q8, ROWS8, Q8_AT, Q8_AT8)
QMATMUL_COLS(qmatmul_cols_q3h, ROWS8, Q3H_AT, Q3H_AT8)
QMATMUL_COLS(qgemv_cols_e0m4, ROWS4, E0M4_AT, E0M4_AT8)
QMATMUL_COLS(qgemv_cols_int4, ROWS4, INT4_AT, INT4_AT8)
QMATMUL_COLS(qgemv_cols_q8, ROWS4, Q8_AT, Q8_AT8)
QMATMUL_COLS(qgemv_cols_q3h, ROWS4, Q3H_AT, Q3H_AT8)

// GPUs, M > 4 (prefill): 64 x 64 outputs per 16 x 16 work-group, 4 x 4 per item (rows
// ty + 16i, columns tx + 16j). Per 16-deep step of k the group loads A's 64 x 16 slice
// and dequantizes the weight's 16 x 64 slice once into local memory.
#define QTILE 16
#define QTILE_ROWS 64

// Loads one step's slices: item `lid` takes elements lid + 256i of each, k fastest, so
// consecutive items read consecutive codes of a column. TYPE is float, or int for w4a8.
#define TILE_LOAD(TYPE, A_AT, W_AT)                                                                  \
  for (int e = lid; e < QTILE * QTILE_ROWS; e += QTILE * QTILE) {                                    \
    const int kk = e & (QTILE - 1), i = e / QTILE, k = k0 + kk;                                      \
    const int m = m0 + i, n = n0 + i;                                                                \
    As[kk][i] = (m < M && k < K) ? (TYPE)(A_AT) : (TYPE)0;                                           \
    Ws[kk][i] = (n < N && k < K) ? (TYPE)(W_AT) : (TYPE)0;                                           \
  }

#define QMATMUL_TILES(NAME, AT)                                                                      \
  __kernel __attribute__((reqd_work_group_size(QTILE, QTILE, 1)))                                    \
  void NAME(__global const float* A, __global const uchar* W, __global const float* S,               \
            __global const float* O, __global float* C, SPLIT_ARGS, int M, int N, int K, int G, int row_bytes,   \
            int groups) {                                                                            \
    __local float As[QTILE][QTILE_ROWS], Ws[QTILE][QTILE_ROWS];                                      \
    const int tx = get_local_id(0), ty = get_local_id(1), lid = ty * QTILE + tx;                     \
    const int n0 = get_group_id(0) * QTILE_ROWS, m0 = get_group_id(1) * QTILE_ROWS;                  \
    float acc[4][4] = {{0.0f}};                                                                      \
    for (int k0 = 0; k0 < K; k0 += QTILE) {                                                          \
      TILE_LOAD(float, A[(long)m * K + k],                                                           \
                AT(W + (long)n * row_bytes, k) * S[(long)n * groups + k / G] + O[(long)n * groups + k / G]) \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
      for (int kk = 0; kk < QTILE; ++kk) {                                                           \
        float a[4], b[4];                                                                            \
        for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];                                      \
        for (int j = 0; j < 4; ++j) b[j] = Ws[kk][tx + 16 * j];                                      \
        for (int i = 0; i < 4; ++i)                                                                  \
          for (int j = 0; j < 4; ++j) acc[i][j] += a[i] * b[j];                                      \
      }                                                                                              \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                  \
    }                                                                                                \
    for (int i = 0; i < 4; ++i)                                                                      \
      for (int j = 0; j < 4; ++j) {                                                                  \
        const int m = m0 + ty + 16 * i, n = n0 + tx + 16 * j;                                       \
        if (m < M && n < N) STORE(m, n, acc[i][j]);                                                  \
      }                                                                                              \
  }

QMATMUL_TILES(qmatmul_tiles_e0m4, E0M4_AT)
QMATMUL_TILES(qmatmul_tiles_int4, INT4_AT)
QMATMUL_TILES(qmatmul_tiles_q8, Q8_AT)
QMATMUL_TILES(qmatmul_tiles_q3h, Q3H_AT)

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

// W4A8, step 2 (prefill on GPUs): tiles as above with int8 activations and int4 weights
// in local memory; products are summed in int until a group ends, then scaled by the
// group's scale, and by the row's scale at the end.
__kernel __attribute__((reqd_work_group_size(QTILE, QTILE, 1)))
void qmatmul_tiles_w4a8(__global const char* QA, __global const float* RS, __global const uchar* W,
                        __global const float* S, __global float* C, SPLIT_ARGS, int M, int N, int K, int G, int row_bytes,
                        int groups) {
  __local int As[QTILE][QTILE_ROWS], Ws[QTILE][QTILE_ROWS];
  const int tx = get_local_id(0), ty = get_local_id(1), lid = ty * QTILE + tx;
  const int n0 = get_group_id(0) * QTILE_ROWS, m0 = get_group_id(1) * QTILE_ROWS;
  float acc[4][4] = {{0.0f}};
  int dot[4][4] = {{0}};
  for (int k0 = 0; k0 < K; k0 += QTILE) {
    TILE_LOAD(int, QA[(long)m * K + k], (int)(nibble(W + (long)n * row_bytes, k) << 28) >> 28)
    barrier(CLK_LOCAL_MEM_FENCE);
    for (int kk = 0; kk < QTILE; ++kk) {
      int a[4], b[4];
      for (int i = 0; i < 4; ++i) a[i] = As[kk][ty + 16 * i];
      for (int j = 0; j < 4; ++j) b[j] = Ws[kk][tx + 16 * j];
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 4; ++j) dot[i][j] += a[i] * b[j];
      const int k = k0 + kk;
      if ((k + 1) % G == 0 || k + 1 == K) {  // the same k for the whole group: no divergence
        for (int j = 0; j < 4; ++j) {
          const int n = min(n0 + tx + 16 * j, N - 1);
          const float s = S[(long)n * groups + k / G];
          for (int i = 0; i < 4; ++i) {
            acc[i][j] += s * (float)dot[i][j];
            dot[i][j] = 0;
          }
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  for (int i = 0; i < 4; ++i) {
    const int m = m0 + ty + 16 * i;
    for (int j = 0; j < 4; ++j) {
      const int n = n0 + tx + 16 * j;
      if (m < M && n < N) STORE(m, n, acc[i][j] * RS[m]);
    }
  }
}

// W4A8 on CPUs: columns as above, 8 int8 x int4 products per vector step summed in int,
// each group's sums scaled once.
#define SIGNED_NIBBLES8(w, k) (as_int8(NIBBLES8(w, k) << 28) >> 28)
#define W4A8_DECLARE(i) float f##i = 0.0f; int8 d##i = 0; int s##i = 0;
#define W4A8_SCALAR(i) if (R > i) s##i += (int)a[i * K + k] * q;
#define W4A8_VECTOR(i) if (R > i) d##i += convert_int8(vload8(0, a + i * K + k)) * q;
#define HSUM8(v) ((v).s0 + (v).s1 + (v).s2 + (v).s3 + (v).s4 + (v).s5 + (v).s6 + (v).s7)
#define W4A8_GROUP(i)                             \
  if (R > i) {                                    \
    f##i += sc * (float)(s##i + HSUM8(d##i));     \
    d##i = 0;                                     \
    s##i = 0;                                     \
  }
#define W4A8_STORE(i) if (R > i) STORE(r0 + i, n, f##i * RS[r0 + i]);

__kernel void qmatmul_cols_w4a8(__global const char* QA, __global const float* RS, __global const uchar* W,
                                __global const float* S, __global float* C, SPLIT_ARGS, int M, int N, int K, int G,
                                int row_bytes, int groups) {
  const int n = get_global_id(0), r0 = 8 * get_global_id(1);
  if (n >= N || r0 >= M) return;
  const int R = min(8, M - r0);
  __global const uchar* w = W + (long)n * row_bytes;
  __global const char* a = QA + (long)r0 * K;
  ROWS8(W4A8_DECLARE)
  for (int g = 0; g < groups; ++g) {
    const int k1 = min(K, (g + 1) * G);
    int k = g * G;
    for (; k < k1 && (k & 7); ++k) {
      const int q = (int)(nibble(w, k) << 28) >> 28;
      ROWS8(W4A8_SCALAR)
    }
    for (; k + 8 <= k1; k += 8) {
      const int8 q = SIGNED_NIBBLES8(w, k);
      ROWS8(W4A8_VECTOR)
    }
    for (; k < k1; ++k) {
      const int q = (int)(nibble(w, k) << 28) >> 28;
      ROWS8(W4A8_SCALAR)
    }
    const float sc = S[(long)n * groups + g];
    ROWS8(W4A8_GROUP)
  }
  ROWS8(W4A8_STORE)
}

// Decode on GPUs (M <= 4): 64-wide work-groups. Work item t reads codes 8 at a time at
// 8t, 8t + 512, ... (consecutive items read consecutive words), keeps a partial sum per
// row, and the group adds them up in local memory. Needs group % 8 == 0 so that 8 codes
// share one scale and offset; ragged K tails go code by code. A work-group takes 4
// columns (measured on the H100: 1.4x faster than 1; 8 columns, or 128- or 256-wide
// groups, no better for these kernels; qgemv16_plain_*_m1 below is the one-row form that
// 128 items do speed up).
#define GEMV_WG 64

// A work-group takes 4 columns, so that each 8 floats of A read serve 4 words of weights
// (A is read from cache 8x as often as the weights otherwise).
#define GEMV_COLS 4
#define COLS4(X, P) X(0, P) X(1, P) X(2, P) X(3, P)
#define DOT8(a, b) (dot((a).lo, (b).lo) + dot((a).hi, (b).hi))

// The weight column behind work-group column c: 4 consecutive columns, or with a GLU
// epilogue 2 gate columns and their 2 up columns, N / 2 further on (the last group's
// extra columns repeat the last one).
inline int gemv_col(int c, int group, int N, int glu) {
  if (!glu) return min(group * GEMV_COLS + c, N - 1);
  const int width = N / 2;
  return min(group * 2 + (c & 1), width - 1) + (c >> 1) * width;
}

// Sums the work-group's partials acc[4c + m] (column c, row m) and the rows' sums of
// squares ss (when NW normalizes them), then writes the outputs: times row_scale[m] when
// given, times row m's inverse RMS, then the bias and the GLU or the residual. 8 items per
// value add 8 partials each, one item per value adds those 8. Every item must call it.
#define GEMV_VALUES (4 * GEMV_COLS + 4)
inline void gemv_finish_cols(__local float* red, __local float* part, const float* acc, float4 ss, int t, int M,
                             int N, int K, __global float* C, SPLIT_ARGS, __global const float* row_scale,
                             __global const float* NW, float eps, int glu) {
  for (int v = 0; v < 4 * GEMV_COLS; ++v) red[v * GEMV_WG + t] = acc[v];
  if (NW) vstore4(ss, 0, red + 4 * GEMV_COLS * GEMV_WG + 4 * t);  // [4 x 64], then read 8 at a time
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int e = t; e < GEMV_VALUES * 8; e += GEMV_WG) {
    const int v = e >> 3;
    if (v >= 4 * GEMV_COLS && !NW) continue;
    float p = 0.0f;
    if (v < 4 * GEMV_COLS) {
      __local const float* r = red + v * GEMV_WG + (e & 7) * 8;
      p = r[0] + r[1] + r[2] + r[3] + r[4] + r[5] + r[6] + r[7];
    } else {  // row m's sums of squares: items 8j .. 8j + 7
      __local const float* r = red + 4 * GEMV_COLS * GEMV_WG + (v - 4 * GEMV_COLS);
      for (int i = 0; i < 8; ++i) p += r[4 * ((e & 7) * 8 + i)];
    }
    part[e] = p;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (t < GEMV_VALUES) {
    __local const float* p = part + 8 * t;
    red[t] = p[0] + p[1] + p[2] + p[3] + p[4] + p[5] + p[6] + p[7];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const int c = t >> 2, m = t & 3, group = get_group_id(0);
  const float scale = m < M ? (row_scale ? row_scale[m] : 1.0f) * (NW ? 1.0f / sqrt(red[4 * GEMV_COLS + m] / K + eps) : 1.0f) : 0.0f;
  if (!glu) {
    const int n = group * GEMV_COLS + c;
    if (t < 4 * GEMV_COLS && m < M && n < N) STORE(m, n, red[t] * scale);
  } else {  // items 4c + m, c < 2: gate column 2 * group + c, its up column's sum 8 further
    const int width = N / 2, j = group * 2 + c;
    if (t < 8 && m < M && j < width)
      STORE_GLU(m, j, red[t] * scale, red[t + 8] * scale, width);
  }
}

// What every 4-column decode kernel starts with: arguments, local memory, the columns'
// pointers, the accumulators.
#define QGEMV_HEAD(NAME, ROWS)                                                                      \
  __kernel __attribute__((reqd_work_group_size(GEMV_WG, 1, 1)))                                     \
  void NAME(__global const float* A, __global const uchar* W, __global const float* S,              \
            __global const float* O, __global float* C, SPLIT_ARGS, int M, int N, int K, int G, int row_bytes,  \
            int groups, GEMV_ARGS) {                                                                \
    __local float red[GEMV_VALUES * GEMV_WG], part[GEMV_VALUES * 8];                                \
    const int t = get_local_id(0);                                                                  \
    COLS4(GEMV_POINTERS, _)                                                                         \
    COLS4(GEMV_OFFSETS, _)                                                                          \
    const int rows = ROWS; /* 1: a decode kernel with a quarter of the registers */                 \
    float acc[4 * GEMV_COLS] = {0.0f};                                                              \
    float4 ss = 0.0f;
// A variant macro's empty part (no arguments of its own, nothing before a block).
#define GEMV_NOTHING()
// Row m of A as 8 floats at word i, or as the one float at k (tails); 0 past M.
#define A_WORD(m) (rows > m && M > m ? vload8(i, A + (m) * K) : 0.0f)
#define A_CODE(m) (rows > m && M > m ? (float8)(A[(m) * K + k], 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f) : 0.0f)
// The RMSNorm prologue on the rows' 8 values at hand: their squares summed, then scaled.
#define NORM_ROWS(nw)                                                                               \
  if (NW) {                                                                                         \
    const float8 w8 = (nw);                                                                         \
    ss += (float4)(DOT8(a0, a0), DOT8(a1, a1), DOT8(a2, a2), DOT8(a3, a3));                         \
    a0 *= w8; a1 *= w8; a2 *= w8; a3 *= w8;                                                         \
  }

#define QGEMV(NAME, ROWS, AT, AT8)                                                                  \
  QGEMV_HEAD(NAME, ROWS)                                                                            \
    const int words = K / 8;                                                                        \
    for (int i = t; i < words; i += GEMV_WG) {                                                      \
      const int k0 = 8 * i, g = k0 / G;                                                             \
      float8 a0 = A_WORD(0), a1 = A_WORD(1), a2 = A_WORD(2), a3 = A_WORD(3);                        \
      NORM_ROWS(vload8(i, NW))                                                                      \
      COLS4(GEMV_WORD, AT8)                                                                         \
    }                                                                                               \
    for (int k = 8 * words + t; k < K; k += GEMV_WG) {                                              \
      const int g = k / G;                                                                          \
      float8 a0 = A_CODE(0), a1 = A_CODE(1), a2 = A_CODE(2), a3 = A_CODE(3);                        \
      NORM_ROWS((float8)NW[k])                                                                      \
      COLS4(GEMV_TAIL, AT)                                                                          \
    }                                                                                               \
    gemv_finish_cols(red, part, acc, ss, t, M, N, K, C, SPLIT_PASS, 0, NW, eps, glu);               \
  }
#define GEMV_POINTERS(c, _)                                                                         \
  const int col##c = gemv_col(c, get_group_id(0), N, glu);                                          \
  __global const uchar* w##c = W + (long)col##c * row_bytes;                                        \
  __global const float* s##c = S + (long)col##c * groups;
#define GEMV_OFFSETS(c, _) __global const float* o##c = O + (long)col##c * groups;
// Adds row m's dot with the 8 weights wv to sums[4c + m] for the rows there are.
#define ROWS_DOT(sums, c, wv)                                                                       \
  sums[4 * c] += DOT8(a0, wv);                                                                      \
  if (rows > 1 && M > 1) sums[4 * c + 1] += DOT8(a1, wv);                                           \
  if (rows > 2 && M > 2) sums[4 * c + 2] += DOT8(a2, wv);                                           \
  if (rows > 3 && M > 3) sums[4 * c + 3] += DOT8(a3, wv);
#define GEMV_WORD(c, AT8)                                                                           \
  {                                                                                                 \
    const float8 wv = fma(AT8(w##c, k0), (float8)s##c[g], (float8)o##c[g]);                         \
    ROWS_DOT(acc, c, wv)                                                                            \
  }
#define GEMV_TAIL(c, AT)                                                                            \
  {                                                                                                 \
    const float8 wv = (float8)(AT(w##c, k) * s##c[g] + o##c[g]);                                    \
    ROWS_DOT(acc, c, wv)                                                                            \
  }

QGEMV(qgemv_e0m4, 4, E0M4_AT, E0M4_AT8)
QGEMV(qgemv_int4, 4, INT4_AT, INT4_AT8)
QGEMV(qgemv_q8, 4, Q8_AT, Q8_AT8)
QGEMV(qgemv_q3h, 4, Q3H_AT, Q3H_AT8)
QGEMV(qgemv_e0m4_m1, 1, E0M4_AT, E0M4_AT8)
QGEMV(qgemv_int4_m1, 1, INT4_AT, INT4_AT8)
QGEMV(qgemv_q8_m1, 1, Q8_AT, Q8_AT8)
QGEMV(qgemv_q3h_m1, 1, Q3H_AT, Q3H_AT8)

// e0m4, int4 decode when rows are 16-byte aligned (K % 32 == 0, group % 32 == 0): as
// above, but each item reads 32 codes of a column as one uint4 and A as float4s: fewer
// load instructions, 1.5-2x faster on the H100 (4096 x 11008: 0.043 -> 0.028 ms).
inline uint word_of(uint4 q, int j) { return j == 0 ? q.x : j == 1 ? q.y : j == 2 ? q.z : q.w; }
// A 32-code block of a column lies in one group, so its levels' dot with the rows is taken
// first and scaled once: sum a (l s + o) = s (sum a l) + o (sum a). One multiply-add a code
// instead of two.
#define GEMV16_WORD(c, LEVELS8)                                                                     \
  {                                                                                                 \
    const float8 lv = LEVELS8(word_of(q##c, j));                                                    \
    ROWS_DOT(blk, c, lv)                                                                            \
  }
#define GEMV16_SCALE(c, _)                                                                          \
  for (int m = 0; m < rows && m < M; ++m) acc[4 * c + m] += sc##c * blk[4 * c + m] + of##c * sa[m];
#define GEMV16_LOAD(c, _)                                                                           \
  const uint4 q##c = ((__global const uint4*)w##c)[i];                                              \
  const float sc##c = s##c[g], of##c = o##c[g];
#define A8(m) \
  (rows > m && M > m ? (float8)(a4[(m) * K / 4 + 8 * i + 2 * j], a4[(m) * K / 4 + 8 * i + 2 * j + 1]) : 0.0f)

#define QGEMV16(NAME, ROWS, LEVELS8)                                                                \
  QGEMV_HEAD(NAME, ROWS)                                                                            \
    __global const float4* a4 = (__global const float4*)A;                                          \
    __global const float4* nw4 = (__global const float4*)NW;                                        \
    for (int i = t; i < K / 32; i += GEMV_WG) {                                                     \
      const int g = 32 * i / G;                                                                     \
      COLS4(GEMV16_LOAD, _)                                                                         \
      float blk[4 * GEMV_COLS] = {0.0f}, sa[4] = {0.0f};                                            \
      for (int j = 0; j < 4; ++j) {                                                                 \
        float8 a0 = A8(0), a1 = A8(1), a2 = A8(2), a3 = A8(3);                                      \
        NORM_ROWS(((float8)(nw4[8 * i + 2 * j], nw4[8 * i + 2 * j + 1])))                          \
        sa[0] += DOT8(a0, (float8)1.0f);                                                            \
        if (rows > 1) { sa[1] += DOT8(a1, (float8)1.0f); sa[2] += DOT8(a2, (float8)1.0f); sa[3] += DOT8(a3, (float8)1.0f); } \
        COLS4(GEMV16_WORD, LEVELS8)                                                                 \
      }                                                                                             \
      COLS4(GEMV16_SCALE, _)                                                                        \
    }                                                                                               \
    gemv_finish_cols(red, part, acc, ss, t, M, N, K, C, SPLIT_PASS, 0, NW, eps, glu);               \
  }
QGEMV16(qgemv16_e0m4, 4, E0M4_LEVELS8)
QGEMV16(qgemv16_int4, 4, INT4_LEVELS8)

// One row (M == 1), 32 codes at a time, in WG-wide groups: each item loads its block's 4
// columns of codes, then takes A's 8 floats of each step once for the 4 words at that step;
// the scales and offsets come after the arithmetic; the group sums its 4 columns in a
// tree. NORMED (a constant: 0, or 1 for rows with an RMSNorm, whose NW must then be given)
// compiles the norm's squares and scaling into the loop, so no row tests NW there. On the
// H100 (scripts/gemv_lab.c, weights not in L2) this form without a norm in 128-wide groups
// took 11008 x 4096 from 28.4 to 22.1 µs and 4096 x 4096 from 15.4 to 13.0 against the
// 4-row form; a test of NW inside its loop alone made it 1.2x slower again. With the norm
// compiled in, 64-wide groups took TinyLlama's QKV (2048 x 2560: one block an item) from
// 12.5 to 10.2 µs against the 4-row form (docs/bench/h100/issue28-gemv-lab.md). MORE,
// BLOCK and AJ make variants: arguments, what each block of 32 codes starts with (macros
// without arguments, named), and A's 8 floats at step j of block i.
#define GEMV16_WG 128
// An RMSNorm handed from the one-row GEMV that writes its input to the one that reads it
// (lowering's normHandoff; docs/ops.md): the writer also stores its outputs y times the
// norm's weights NW2 into XN and each work-group's sum of y^2 into SQO[group]; the reader
// takes XN as its A (no weights to multiply in its loop) and the row's sum of squares
// from SQ's sq_parts pieces, for its outputs' scale. Null where a launch has no part.
#define HAND_ARGS , __global const float *SQ, int sq_parts, __global float *XN, __global const float *NW2, __global float *SQO
#define HAND_PASS SQ, sq_parts, XN, NW2, SQO
// A writer's part, after its outputs are stored: y its item's output (column n, cols
// outputs a group), every item calling it.
inline void gemv_hand_norm(__local float* red, float y, int t, int n, int N, int cols, __global float* XN,
                           __global const float* NW2, __global float* SQO) {
  barrier(CLK_LOCAL_MEM_FENCE);  // red's sums read
  if (t < cols) {
    red[t] = n < N ? y * y : 0.0f;
    if (n < N) XN[n] = y * NW2[n];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (t == 0) {
    float s = 0.0f;
    for (int i = 0; i < cols; ++i) s += red[i];
    SQO[get_group_id(0)] = s;
  }
}
// A reader's sum of squares: its item's share of the writer's pieces.
inline float gemv_handed_squares(__global const float* SQ, int sq_parts, int t, int wg) {
  float s = 0.0f;
  for (int p = t; p < sq_parts; p += wg) s += SQ[p];
  return s;
}
#define QGEMV16_ONE(NAME, WG, NORMED, LEVELS8, MORE, BLOCK, AJ)                                     \
  __kernel __attribute__((reqd_work_group_size(WG, 1, 1)))                                          \
  void NAME(__global const float* A, __global const uchar* W, __global const float* S,              \
            __global const float* O, __global float* C, SPLIT_ARGS, int M, int N, int K, int G, int row_bytes,  \
            int groups, GEMV_ARGS HAND_ARGS MORE()) {                                               \
    __local float red[5 * (WG)];                                                                    \
    const int t = get_local_id(0);                                                                  \
    int col[4];                                                                                     \
    for (int c = 0; c < 4; ++c) col[c] = gemv_col(c, get_group_id(0), N, glu);                      \
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f}, ss = 0.0f;                                             \
    __global const float8* a8 = (__global const float8*)A;                                          \
    __global const float8* n8 = (__global const float8*)NW;                                         \
    for (int i = t; i < K / 32; i += (WG)) {                                                        \
      const int g = 32 * i / G;                                                                     \
      BLOCK()                                                                                       \
      uint4 q[4];                                                                                   \
      for (int c = 0; c < 4; ++c) q[c] = ((__global const uint4*)(W + (long)col[c] * row_bytes))[i]; \
      float b[4] = {0.0f, 0.0f, 0.0f, 0.0f}, sa = 0.0f;                                             \
      for (int j = 0; j < 4; ++j) {                                                                 \
        float8 a = AJ;                                                                              \
        if (NORMED) {                                                                               \
          ss += DOT8(a, a);                                                                         \
          a *= n8[4 * i + j];                                                                       \
        }                                                                                           \
        sa += sum8(a);                                                                              \
        for (int c = 0; c < 4; ++c) b[c] += DOT8(a, LEVELS8(word_of(q[c], j)));                     \
      }                                                                                             \
      for (int c = 0; c < 4; ++c) acc[c] += S[col[c] * groups + g] * b[c] + O[col[c] * groups + g] * sa; \
    }                                                                                               \
    gemv_finish_one(red, acc, ss, NORMED, WG, t, N, K, eps, C, SPLIT_PASS, glu, HAND_PASS);         \
  }
// QGEMV16_ONE's end: the 4 columns' partials (and with a norm, its own or handed, the sums
// of squares) added in a tree over the wg items, then the 4 outputs (2 with a GLU: gate
// columns c < 2, their up columns' sums at c + 2), times the row's inverse RMS when normed.
inline void gemv_finish_one(__local float* red, const float* acc, float ss, int normed, int wg, int t, int N, int K,
                            float eps, __global float* C, SPLIT_ARGS, int glu, __global const float* SQ, int sq_parts,
                            __global float* XN, __global const float* NW2, __global float* SQO) {
  if (SQ) {
    ss = gemv_handed_squares(SQ, sq_parts, t, wg);
    normed = 1;
  }
  const int values = normed ? 5 : 4;
  for (int c = 0; c < 4; ++c) red[c * wg + t] = acc[c];
  red[4 * wg + t] = ss;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int s = wg / 2; s > 0; s >>= 1) {
    if (t < s)
      for (int c = 0; c < values; ++c) red[c * wg + t] += red[c * wg + t + s];
    barrier(CLK_LOCAL_MEM_FENCE);
  }
  const float inv = normed ? 1.0f / sqrt(red[4 * wg] / K + eps) : 1.0f;
  const int group = get_group_id(0);
  if (!glu) {
    const int n = group * GEMV_COLS + t;
    float y = 0.0f;
    if (t < GEMV_COLS && n < N) y = STORE(0, n, red[t * wg] * inv);
    if (XN) gemv_hand_norm(red, y, t, n, N, GEMV_COLS, XN, NW2, SQO);
  } else {
    const int width = N / 2, j = group * 2 + t;
    if (t < 2 && j < width) STORE_GLU(0, j, red[t * wg] * inv, red[(t + 2) * wg] * inv, width);
  }
}
#define QGEMV16_PLAIN_FROM(NAME, LEVELS8, MORE, BLOCK, AJ) QGEMV16_ONE(NAME, GEMV16_WG, 0, LEVELS8, MORE, BLOCK, AJ)
QGEMV16_PLAIN_FROM(qgemv16_plain_e0m4_m1, E0M4_LEVELS8, GEMV_NOTHING, GEMV_NOTHING, a8[4 * i + j])
QGEMV16_PLAIN_FROM(qgemv16_plain_int4_m1, INT4_LEVELS8, GEMV_NOTHING, GEMV_NOTHING, a8[4 * i + j])
QGEMV16_ONE(qgemv16_norm_e0m4_m1, GEMV_WG, 1, E0M4_LEVELS8, GEMV_NOTHING, GEMV_NOTHING, a8[4 * i + j])
QGEMV16_ONE(qgemv16_norm_int4_m1, GEMV_WG, 1, INT4_LEVELS8, GEMV_NOTHING, GEMV_NOTHING, a8[4 * i + j])

// One row whose A is a decode attention's output still in its splits (lowering's
// merge_attention, runtime/lower/matmul.cpp): each split of query head h left (max, sum, partial output of Dv) in
// `att_part` (kernels/attention.cl's decode kernels), and the block of 32 values at k = 32i
// (head k / Dv) is merged as it is read, as attention_combine_f32 would have written it.
// That saves the merge's launch a layer; it reads the splits' bytes once per work-group,
// so lowering takes it only for up to MERGE_SPLITS splits.
#define MERGE_SPLITS 4
#define MERGE_ARGS() , __global const float *att_part, int splits, int Dv, int zero_rows
#define MERGE_BLOCK()                                                                               \
  __global const float* pr = att_part + (long)(32 * i / Dv) * splits * (Dv + 2);                    \
  const int d0 = 32 * i % Dv;                                                                       \
  float mw[MERGE_SPLITS], mx = -INFINITY, ml = 0.0f;                                                \
  for (int p = 0; p < MERGE_SPLITS; ++p)                                                            \
    if (p < splits) mx = fmax(mx, pr[p * (Dv + 2)]);                                                \
  for (int p = 0; p < MERGE_SPLITS; ++p) {                                                          \
    const float mp = p < splits ? pr[p * (Dv + 2)] : -INFINITY;                                     \
    mw[p] = mp == -INFINITY ? 0.0f : exp(mp - mx);                                                  \
    if (p < splits) ml += pr[p * (Dv + 2) + 1] * mw[p];                                             \
  }                                                                                                 \
  const int mzero = zero_rows && !(ml > 0.0f);
inline float8 merged8(__global const float* pr, const float* mw, int splits, int Dv, int d, float l, int zero) {
  float8 a = 0.0f;
  for (int p = 0; p < MERGE_SPLITS; ++p)
    if (p < splits) a += mw[p] * vload8(0, pr + p * (Dv + 2) + 2 + d);
  return zero ? (float8)0.0f : a / l;
}
#define MERGED_ROW0 merged8(pr, mw, splits, Dv, d0 + 8 * j, ml, mzero)
QGEMV16_PLAIN_FROM(qgemv16_merge_e0m4_m1, E0M4_LEVELS8, MERGE_ARGS, MERGE_BLOCK, MERGED_ROW0)
QGEMV16_PLAIN_FROM(qgemv16_merge_int4_m1, INT4_LEVELS8, MERGE_ARGS, MERGE_BLOCK, MERGED_ROW0)

// The wide rows' start (QGEMV_WIDE_FROM, QGEMV_WIDE_I8): a work-group's COLS columns (a
// GLU's gate columns, then their up columns N / 2 further on) and each item's sums.
#define GEMV_WIDE_START(COLS)                                                                       \
  __local float red[(COLS + 1) * GEMV_WG], part[(COLS + 1) * 8];                                    \
  const int t = get_local_id(0), grp = get_group_id(0), width = glu ? N / 2 : N;                    \
  int col[COLS]; /* indices, not pointers: a third of the registers */                              \
  for (int c = 0; c < COLS; ++c)                                                                    \
    col[c] = glu ? min(grp * (COLS / 2) + c % (COLS / 2), width - 1) + c / (COLS / 2) * width       \
                 : min(grp * COLS + c, N - 1);                                                      \
  float acc[COLS];                                                                                  \
  for (int c = 0; c < COLS; ++c) acc[c] = 0.0f;                                                     \
  float ss = 0.0f;                                                                                  \
  __global const float8* a8 = (__global const float8*)A;                                            \
  __global const float8* nw8 = (__global const float8*)NW;

// The wide rows' end (QGEMV_WIDE_FROM, QGEMV_WIDE_I8): each item's COLS sums and its sum of
// squares reduced over the group, the norm's inverse applied, the columns stored (a GLU's
// gate and up together), an RMSNorm handed on where asked.
#define GEMV_WIDE_FINISH(COLS)                                                                       \
  for (int c = 0; c < COLS; ++c) red[c * GEMV_WG + t] = acc[c];                                     \
  red[COLS * GEMV_WG + t] = SQ ? gemv_handed_squares(SQ, sq_parts, t, GEMV_WG) : ss;                \
  barrier(CLK_LOCAL_MEM_FENCE);                                                                     \
  for (int e = t; e < (COLS + 1) * 8; e += GEMV_WG) {                                               \
    __local const float* r = red + (e >> 3) * GEMV_WG + (e & 7) * 8;                                \
    part[e] = r[0] + r[1] + r[2] + r[3] + r[4] + r[5] + r[6] + r[7];                                \
  }                                                                                                 \
  barrier(CLK_LOCAL_MEM_FENCE);                                                                     \
  if (t < COLS + 1) {                                                                               \
    __local const float* p = part + 8 * t;                                                          \
    red[t] = p[0] + p[1] + p[2] + p[3] + p[4] + p[5] + p[6] + p[7];                                 \
  }                                                                                                 \
  barrier(CLK_LOCAL_MEM_FENCE);                                                                     \
  const float inv = NW || SQ ? 1.0f / sqrt(red[COLS] / K + eps) : 1.0f;                             \
  if (!glu) {                                                                                       \
    const int n = grp * COLS + t;                                                                   \
    float y = 0.0f;                                                                                 \
    if (t < COLS && n < N) y = STORE(0, n, red[t] * inv);                                           \
    if (XN) gemv_hand_norm(red, y, t, n, N, COLS, XN, NW2, SQO);                                    \
  } else {                                                                                          \
    const int j = grp * (COLS / 2) + t;                                                             \
    if (t < COLS / 2 && j < width) STORE_GLU(0, j, red[t] * inv, red[t + COLS / 2] * inv, width);   \
  }

// Decode of one row on GPUs (M == 1; e0m4, int4 with K % 32 == 0, group % 32 == 0) over
// many columns: as QGEMV16 at one row, but a work-group takes COLS columns, so half as many
// groups each live twice as long, and the 32 floats of A and of the norm's weights an
// item reads per block serve COLS columns. With a GLU the first COLS / 2 are gate columns
// and the rest their up columns, N / 2 further on. On the H100 at 8 columns, against that
// form: 2048 x 11264 18.5 -> 14.5 µs, 2048 x 32000 39.1 -> 34.1, but 2048 x 2560 8.6 ->
// 10.3 (too few groups to fill the device), so lowering takes it only for wide weights.
// Its norm compiled in (no test of NW) was no faster (4096 x 22016 with a GLU: 52.1 µs
// as it is, 56.7 so; docs/bench/h100/issue28-gemv-lab.md). MORE, BLOCK and AJ make
// variants as QGEMV16_ONE's do.
#define QGEMV_WIDE_FROM(NAME, COLS, LEVELS8, MORE, BLOCK, AJ)                                      \
  __kernel __attribute__((reqd_work_group_size(GEMV_WG, 1, 1)))                                     \
  void NAME(__global const float* A, __global const uchar* W, __global const float* S,              \
            __global const float* O, __global float* C, SPLIT_ARGS, int M, int N, int K, int G, int row_bytes,  \
            int groups, GEMV_ARGS HAND_ARGS MORE()) {                                               \
    GEMV_WIDE_START(COLS)                                                                           \
    for (int i = t; i < K / 32; i += GEMV_WG) {                                                     \
      const int g = 32 * i / G;                                                                     \
      BLOCK()                                                                                       \
      float8 a[4];                                                                                  \
      for (int j = 0; j < 4; ++j) {                                                                 \
        a[j] = AJ;                                                                                  \
        if (NW) {                                                                                   \
          ss += DOT8(a[j], a[j]);                                                                   \
          a[j] *= nw8[4 * i + j];                                                                   \
        }                                                                                           \
      }                                                                                             \
      const float sa = DOT8(a[0] + a[1] + a[2] + a[3], (float8)1.0f);                               \
      for (int c = 0; c < COLS; ++c) {                                                              \
        const uint4 q = ((__global const uint4*)(W + (long)col[c] * row_bytes))[i];                \
        const float b = DOT8(a[0], LEVELS8(q.x)) + DOT8(a[1], LEVELS8(q.y)) + DOT8(a[2], LEVELS8(q.z)) + \
                        DOT8(a[3], LEVELS8(q.w));                                                   \
        acc[c] += S[col[c] * groups + g] * b + O[col[c] * groups + g] * sa;                         \
      }                                                                                             \
    }                                                                                               \
    GEMV_WIDE_FINISH(COLS)                                                                          \
  }
#define QGEMV_WIDE(NAME, COLS, LEVELS8) QGEMV_WIDE_FROM(NAME, COLS, LEVELS8, GEMV_NOTHING, GEMV_NOTHING, a8[4 * i + j])
QGEMV_WIDE(qgemv_wide_e0m4, 8, E0M4_LEVELS8)
QGEMV_WIDE(qgemv_wide_int4, 8, INT4_LEVELS8)
QGEMV_WIDE_FROM(qgemv_wide_merge_e0m4, 8, E0M4_LEVELS8, MERGE_ARGS, MERGE_BLOCK, MERGED_ROW0)
QGEMV_WIDE_FROM(qgemv_wide_merge_int4, 8, INT4_LEVELS8, MERGE_ARGS, MERGE_BLOCK, MERGED_ROW0)

#if defined(TL_NV)
// The wide rows with A rounded to int8 (NVIDIA, where --gemm auto allows it, as for the
// prefill's qgemm64_mma_i8_*): each item rounds its block of 32 floats of A (times the
// norm's weights) to int8 on the block's own grid (step max |a| / 127, llama.cpp's q8_1)
// and multiplies them by the codes 4 at a time (PTX dp4a, no code turned into a float).
// The levels being uniform in a group (w = c s' + o': e0m4 s' = s / 8, o' = 2 s + o; int4
// s, o), a block's dot is s' step sum(qa c) + o' sum(a), the block's exact sum. H200, back
// to back against the rows these replace: Llama-2-7B's 4096 x 22016 with a norm and GLU
// 48.3 -> 37.0 µs, 11008 x 4096 19.3 -> 15.9, 4096 x 4096 10.0 -> 9.4, TinyLlama's 2-9%
// (docs/tl-bench.md). Lowering takes it for one row over wide weights or K >= 4096
// (QCase::int8Gemv).
inline int dp4a_us(uint a, int b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
inline int pack_i8(float a, float b, float c, float d) {
  return (int)((uint)(convert_char_sat_rte(a) & 0xff) | (uint)(convert_char_sat_rte(b) & 0xff) << 8 |
               (uint)(convert_char_sat_rte(c) & 0xff) << 16 | (uint)(convert_char_sat_rte(d) & 0xff) << 24);
}
#define QGEMV_WIDE_I8(NAME, COLS, STEP, BASE)                                                       \
  __kernel __attribute__((reqd_work_group_size(GEMV_WG, 1, 1)))                                     \
  void NAME(__global const float* A, __global const uchar* W, __global const float* S,              \
            __global const float* O, __global float* C, SPLIT_ARGS, int M, int N, int K, int G, int row_bytes,  \
            int groups, GEMV_ARGS HAND_ARGS) {                                                      \
    GEMV_WIDE_START(COLS)                                                                           \
    for (int i = t; i < K / 32; i += GEMV_WG) {                                                     \
      const int g = 32 * i / G;                                                                     \
      uint4 q[COLS]; /* the codes first: their loads in flight while A is rounded */               \
      for (int c = 0; c < COLS; ++c) q[c] = ((__global const uint4*)(W + (long)col[c] * row_bytes))[i]; \
      float8 a[4];                                                                                  \
      float m = 0.0f;                                                                               \
      for (int j = 0; j < 4; ++j) {                                                                 \
        a[j] = a8[4 * i + j];                                                                       \
        if (NW) {                                                                                   \
          ss += DOT8(a[j], a[j]);                                                                   \
          a[j] *= nw8[4 * i + j];                                                                   \
        }                                                                                           \
        const float8 x = fabs(a[j]);                                                                \
        m = fmax(m, fmax(fmax(fmax(x.s0, x.s1), fmax(x.s2, x.s3)), fmax(fmax(x.s4, x.s5), fmax(x.s6, x.s7)))); \
      }                                                                                             \
      const float sa = DOT8(a[0] + a[1] + a[2] + a[3], (float8)1.0f);                               \
      const float to = m > 0.0f ? 127.0f / m : 0.0f, step = m / 127.0f;                             \
      int ev[4], od[4]; /* codes 0 2 4 6 and 1 3 5 7 of a word: its low and high nibbles */         \
      for (int j = 0; j < 4; ++j) {                                                                 \
        const float8 y = a[j] * to;                                                                 \
        ev[j] = pack_i8(y.s0, y.s2, y.s4, y.s6);                                                    \
        od[j] = pack_i8(y.s1, y.s3, y.s5, y.s7);                                                    \
      }                                                                                             \
      for (int c = 0; c < COLS; ++c) {                                                              \
        const uint w[4] = {q[c].x, q[c].y, q[c].z, q[c].w};                                         \
        int d = 0;                                                                                  \
        for (int j = 0; j < 4; ++j)                                                                 \
          d = dp4a_us((w[j] >> 4) & 0x0F0F0F0Fu, od[j], dp4a_us(w[j] & 0x0F0F0F0Fu, ev[j], d));      \
        const float s = S[col[c] * groups + g], o = O[col[c] * groups + g];                          \
        acc[c] += BASE(s, o) * sa + STEP(s) * step * (float)d;                                      \
      }                                                                                             \
    }                                                                                               \
    GEMV_WIDE_FINISH(COLS)                                                                          \
  }
QGEMV_WIDE_I8(qgemv_wide_i8_e0m4, 8, E0M4_STEP, E0M4_BASE)
QGEMV_WIDE_I8(qgemv_wide_i8_int4, 8, INT4_STEP, INT4_BASE)
// ... 16 columns a work-group, where that still makes 4 work-groups a compute unit: each
// group rounds A (and reads the norm's weights) once for twice the columns. H200, back to
// back, 8 -> 16 columns: 2048 x 11264 with a GLU 10.4-10.6 -> 8.5-9.3 µs (with the norm
// compiled in 15.6 -> 9.8-10.2), 4096 x 22016 24.6 -> 22.3 (37.0 -> 28.1), 4096 x 12288
// 18.4 -> 13.5 (25.7 -> 16.0); with fewer groups slower (4096 x 4096 8.4 -> 9.6, 11008 x
// 4096 15.9 -> 18.0; docs/tl-bench.md).
QGEMV_WIDE_I8(qgemv_wide16_i8_e0m4, 16, E0M4_STEP, E0M4_BASE)
QGEMV_WIDE_I8(qgemv_wide16_i8_int4, 16, INT4_STEP, INT4_BASE)
#endif

// W4A8 decode, 4 columns per work-group as above: int8 activations times int4 weights,
// 8 at a time in integers, each 8-code dot scaled by its group's scale; the row scale
// comes last.
#define QA_WORD(m) (rows > m && M > m ? convert_int8(vload8(i, QA + (m) * K)) : 0)
#define QA_CODE(m) (rows > m && M > m ? (int)QA[(m) * K + k] : 0)
#define W4A8_ROWS(c, DOT)                                                                           \
  acc[4 * c] += sc * (float)DOT(a0);                                                                \
  if (rows > 1 && M > 1) acc[4 * c + 1] += sc * (float)DOT(a1);                                     \
  if (rows > 2 && M > 2) acc[4 * c + 2] += sc * (float)DOT(a2);                                     \
  if (rows > 3 && M > 3) acc[4 * c + 3] += sc * (float)DOT(a3);
#define W4A8_DOT8(a) HSUM8((a) * q)
#define W4A8_DOT1(a) ((a) * q)
#define W4A8_WORD(c, _)                                                                             \
  {                                                                                                 \
    const int8 q = SIGNED_NIBBLES8(w##c, k0);                                                       \
    const float sc = s##c[g];                                                                       \
    W4A8_ROWS(c, W4A8_DOT8)                                                                         \
  }
#define W4A8_CODE(c, _)                                                                             \
  {                                                                                                 \
    const int q = (int)(nibble(w##c, k) << 28) >> 28;                                              \
    const float sc = s##c[g];                                                                       \
    W4A8_ROWS(c, W4A8_DOT1)                                                                         \
  }

#define QGEMV_W4A8(NAME, ROWS)                                                                      \
  __kernel __attribute__((reqd_work_group_size(GEMV_WG, 1, 1)))                                     \
  void NAME(__global const char* QA, __global const float* RS, __global const uchar* W,             \
            __global const float* S, __global float* C, SPLIT_ARGS, int M, int N, int K, int G, int row_bytes,  \
            int groups) {                                                                           \
    __local float red[GEMV_VALUES * GEMV_WG], part[GEMV_VALUES * 8];                                \
    const int t = get_local_id(0), glu = 0;                                                         \
    COLS4(GEMV_POINTERS, _)                                                                         \
    const int rows = ROWS;                                                                          \
    float acc[4 * GEMV_COLS] = {0.0f};                                                              \
    const int words = K / 8;                                                                        \
    for (int i = t; i < words; i += GEMV_WG) {                                                      \
      const int k0 = 8 * i, g = k0 / G;                                                             \
      const int8 a0 = QA_WORD(0), a1 = QA_WORD(1), a2 = QA_WORD(2), a3 = QA_WORD(3);                \
      COLS4(W4A8_WORD, _)                                                                           \
    }                                                                                               \
    for (int k = 8 * words + t; k < K; k += GEMV_WG) {                                              \
      const int g = k / G;                                                                          \
      const int a0 = QA_CODE(0), a1 = QA_CODE(1), a2 = QA_CODE(2), a3 = QA_CODE(3);                 \
      COLS4(W4A8_CODE, _)                                                                           \
    }                                                                                               \
    gemv_finish_cols(red, part, acc, (float4)0.0f, t, M, N, K, C, SPLIT_PASS, RS, 0, 0.0f, 0);              \
  }
QGEMV_W4A8(qgemv_w4a8, 4)
QGEMV_W4A8(qgemv_w4a8_m1, 1)
