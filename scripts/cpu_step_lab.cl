// Kernels of scripts/cpu_step_cl_lab.c, built after scripts/cpu_gemv_lab.cl (its quant_x,
// c32 and s16): qgemv_cpu_i8's loop (x rounded to int8 a block of 32 by each task, the
// codes' nibbles times it by pmaddubsw and pmaddwd, 8 columns a pass, each column's codes
// asked for 256 bytes ahead), as one GEMV a launch (step_gemv, its columns' passes shared
// out over the launch's tasks) or as a step's GEMVs in one launch of one task (step_all:
// the table's entries in order, as a decode step's phases would run). XQ, D8, XS: each
// task's own rounding of x (scratch of 8 KiB, 128 float8 and 64 floats a task).
inline void pass8(__global const uchar* W, int K, int c0, __global const char* xq, __global const float8* d,
                  __global float* y) {
  float8 acc[8];
  for (int j = 0; j < 8; ++j) acc[j] = 0.0f;
  for (int k = 0; k < K; k += 64) {
    const c32 xe = *(__global const c32*)(xq + k), xo = *(__global const c32*)(xq + k + 32);
    const float8 dd = d[k / 64];
    for (int j = 0; j < 8; ++j) {
      __global const uchar* p = W + (long)(c0 + j) * (K / 2) + k / 2;
      __builtin_prefetch(p + 256);
      const c32 w = *(__global const c32*)p, lo = w & (c32)0x0f, hi = (w >> (c32)4) & (c32)0x0f;
      const s16 s = __builtin_ia32_pmaddubsw256(lo, xe) + __builtin_ia32_pmaddubsw256(hi, xo);
      acc[j] = fma(convert_float8(__builtin_ia32_pmaddwd256(s, (s16)1)), dd, acc[j]);
    }
  }
  for (int j = 0; j < 8; ++j) {
    const float8 a = acc[j];
    y[c0 + j] = a.s0 + a.s1 + a.s2 + a.s3 + a.s4 + a.s5 + a.s6 + a.s7;
  }
}
#define STEP_SCRATCH(t)                                                                 \
  __global char* xq = XQ + 8192 * (t);                                                  \
  __global float8* d = D8 + 128 * (t);                                                  \
  __global float* xs = XS + 64 * (t);
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void step_gemv(__global const uchar* W, __global const float* x,
                                                                        __global float* y, int K, int N, __global char* XQ,
                                                                        __global float8* D8, __global float* XS) {
  STEP_SCRATCH(get_group_id(0))
  quant_x(x, xq, d, xs, K);
  for (int c0 = 8 * get_group_id(0); c0 < N; c0 += 8 * get_num_groups(0)) pass8(W, K, c0, xq, d, y);
}
// table: per GEMV (byte offset of its codes in W, K, N)
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void step_all(__global const uchar* W, __global const float* x,
                                                                       __global float* y, __global const long* table, int n,
                                                                       __global char* XQ, __global float8* D8,
                                                                       __global float* XS) {
  STEP_SCRATCH(0)
  for (int g = 0; g < n; ++g) {
    const int K = (int)table[3 * g + 1], N = (int)table[3 * g + 2];
    quant_x(x, xq, d, xs, K);
    for (int c0 = 0; c0 < N; c0 += 8) pass8(W + table[3 * g], K, c0, xq, d, y);
  }
}
