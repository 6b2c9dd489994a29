// A lab form of qgemv_wide_e0m4 (kernels/qmatmul.cl, same arguments; after common.cl,
// dequant.cl and qmatmul.cl on scripts/gemv_lab.c's command line) whose codes meet A as
// int8: each item rounds its block of 32 floats of A (times the norm's weights) to int8
// at the block's own scale and multiplies them by the 4-bit codes 4 at a time (PTX
// dp4a). e0m4's level is (16 + c) / 8, so a block's dot is (2 s + o) sum(a) + s / 8 sum(a c).
// NVIDIA only. docs/tl-bench.md, issue 28.
inline int dp4a_us(uint a, int b, int c) {
  int d;
  asm("dp4a.u32.s32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(c));
  return d;
}
inline int pack_i8(float a, float b, float c, float d) {
  return (int)((uint)(convert_char_sat_rte(a) & 0xff) | (uint)(convert_char_sat_rte(b) & 0xff) << 8 |
               (uint)(convert_char_sat_rte(c) & 0xff) << 16 | (uint)(convert_char_sat_rte(d) & 0xff) << 24);
}
#define Q8A_COLS 8
__kernel __attribute__((reqd_work_group_size(GEMV_WG, 1, 1)))
void qgemv_wide_q8a_e0m4(__global const float* A, __global const uchar* W, __global const float* S,
                         __global const float* O, __global float* C, SPLIT_ARGS, int M, int N, int K, int G,
                         int row_bytes, int groups, GEMV_ARGS HAND_ARGS) {
  __local float red[(Q8A_COLS + 1) * GEMV_WG], part[(Q8A_COLS + 1) * 8];
  const int t = get_local_id(0), grp = get_group_id(0), width = glu ? N / 2 : N;
  int col[Q8A_COLS];
  for (int c = 0; c < Q8A_COLS; ++c)
    col[c] = glu ? min(grp * (Q8A_COLS / 2) + c % (Q8A_COLS / 2), width - 1) + c / (Q8A_COLS / 2) * width
                 : min(grp * Q8A_COLS + c, N - 1);
  float acc[Q8A_COLS];
  for (int c = 0; c < Q8A_COLS; ++c) acc[c] = 0.0f;
  float ss = 0.0f;
  __global const float8* a8 = (__global const float8*)A;
  __global const float8* nw8 = (__global const float8*)NW;
  for (int i = t; i < K / 32; i += GEMV_WG) {
    const int g = 32 * i / G;
    uint4 q[Q8A_COLS];
    for (int c = 0; c < Q8A_COLS; ++c) q[c] = ((__global const uint4*)(W + (long)col[c] * row_bytes))[i];
    float8 a[4];
    float m = 0.0f;
    for (int j = 0; j < 4; ++j) {
      a[j] = a8[4 * i + j];
      if (NW) {
        ss += DOT8(a[j], a[j]);
        a[j] *= nw8[4 * i + j];
      }
      const float8 x = fabs(a[j]);
      m = fmax(m, fmax(fmax(fmax(x.s0, x.s1), fmax(x.s2, x.s3)), fmax(fmax(x.s4, x.s5), fmax(x.s6, x.s7))));
    }
    const float sa = DOT8(a[0] + a[1] + a[2] + a[3], (float8)1.0f);
    const float inv = m > 0.0f ? 127.0f / m : 0.0f, qs = m / 127.0f;
    int ev[4], od[4];
    for (int j = 0; j < 4; ++j) {
      const float8 y = a[j] * inv;
      ev[j] = pack_i8(y.s0, y.s2, y.s4, y.s6);
      od[j] = pack_i8(y.s1, y.s3, y.s5, y.s7);
    }
    for (int c = 0; c < Q8A_COLS; ++c) {
      const uint w[4] = {q[c].x, q[c].y, q[c].z, q[c].w};
      int di = 0;
      for (int j = 0; j < 4; ++j) di = dp4a_us((w[j] >> 4) & 0x0F0F0F0Fu, od[j], dp4a_us(w[j] & 0x0F0F0F0Fu, ev[j], di));
      const float s = S[col[c] * groups + g];
      acc[c] += (2.0f * s + O[col[c] * groups + g]) * sa + 0.125f * s * qs * (float)di;
    }
  }
  for (int c = 0; c < Q8A_COLS; ++c) red[c * GEMV_WG + t] = acc[c];
  red[Q8A_COLS * GEMV_WG + t] = SQ ? gemv_handed_squares(SQ, sq_parts, t, GEMV_WG) : ss;
  barrier(CLK_LOCAL_MEM_FENCE);
  for (int e = t; e < (Q8A_COLS + 1) * 8; e += GEMV_WG) {
    __local const float* r = red + (e >> 3) * GEMV_WG + (e & 7) * 8;
    part[e] = r[0] + r[1] + r[2] + r[3] + r[4] + r[5] + r[6] + r[7];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  if (t < Q8A_COLS + 1) {
    __local const float* p = part + 8 * t;
    red[t] = p[0] + p[1] + p[2] + p[3] + p[4] + p[5] + p[6] + p[7];
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  const float rinv = NW || SQ ? 1.0f / sqrt(red[Q8A_COLS] / K + eps) : 1.0f;
  if (!glu) {
    const int n = grp * Q8A_COLS + t;
    if (t < Q8A_COLS && n < N) STORE(0, n, red[t] * rinv);
  } else {
    const int j = grp * (Q8A_COLS / 2) + t;
    if (t < Q8A_COLS / 2 && j < width) STORE_GLU(0, j, red[t] * rinv, red[t + Q8A_COLS / 2] * rinv, width);
  }
}
