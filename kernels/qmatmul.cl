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

// W4A8, step 1: each row of A to int8 with its abs-max scale.
__kernel void quantize_rows_i8(__global const float* A, __global char* Q, __global float* RS, int M, int K) {
  const int m = get_global_id(0);
  if (m >= M) return;
  __global const float* a = A + (long)m * K;
  float amax = 0.0f;
  for (int k = 0; k < K; ++k) amax = fmax(amax, fabs(a[k]));
  const float s = amax > 0.0f ? amax / 127.0f : 1.0f;
  for (int k = 0; k < K; ++k) Q[(long)m * K + k] = (char)clamp((int)rint(a[k] / s), -127, 127);
  RS[m] = s;
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
