// scripts/cpu_gemv_lab.c's kernels: a decode GEMV over e0m4 codes (tl.QMatMul's layout:
// column n's K codes, two a byte, low nibble first; a scale and an offset a group of G) on
// a CPU OpenCL, y = x W, a task (work-group of one item) per NC columns.
#define G 128

// The library's form (kernels/gemm.cl's qgemv_cpu_*): 8 k at a time, each column's codes
// turned into levels (e0m4: 2 + c / 8, by bit operations) and multiplied in fp32.
__kernel void gemv_f32(__global const uchar* W, __global const float* S, __global const float* O,
                       __global const float* x, __global float* y, int K, int N) {
  const int c0 = get_group_id(0) * 8;
  float v[8];
  for (int j = 0; j < 8; ++j) v[j] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += G) {
    float8 acc[8], xs = 0.0f;
    for (int j = 0; j < 8; ++j) acc[j] = 0.0f;
    for (int k = k0; k < k0 + G; k += 8) {
      const float8 xv = vload8(0, x + k);
      xs += xv;
      for (int j = 0; j < 8; ++j) {
        const uint w = *(__global const uint*)(W + (long)(c0 + j) * (K / 2) + k / 2);
        const float8 l = as_float8(((uint8)w >> (uint8)(0, 4, 8, 12, 16, 20, 24, 28)) << 19 & 0x00780000u | 0x40000000u);
        acc[j] = fma(xv, l, acc[j]);
      }
    }
    const float sx = dot(xs.lo, (float4)1.0f) + dot(xs.hi, (float4)1.0f);
    for (int j = 0; j < 8; ++j) {
      const long g = (long)(c0 + j) * (K / G) + k0 / G;
      v[j] += S[g] * (dot(acc[j].lo, (float4)1.0f) + dot(acc[j].hi, (float4)1.0f)) + O[g] * sx;
    }
  }
  for (int j = 0; j < 8; ++j) y[c0 + j] = v[j];
}

#if defined(__AVX2__)
// x rounded to int8 a block of 32 (its own step d), once: per 64 k, XQ holds the two
// blocks' even k (16 bytes each), then their odd k, as the codes' low and high nibbles
// stand; D8 the steps as (d0 x 4, d1 x 4); XS each group's exact sum.
__kernel void quant_x(__global const float* x, __global char* XQ, __global float8* D8, __global float* XS, int K) {
  for (int k0 = 0; k0 < K; k0 += 64) {
    float d[2];
    for (int b = 0; b < 2; ++b) {
      float m = 0.0f;
      for (int k = 0; k < 32; ++k) m = fmax(m, fabs(x[k0 + 32 * b + k]));
      d[b] = m > 0.0f ? m / 127.0f : 1.0f;
      for (int k = 0; k < 32; ++k) {
        const char q = convert_char_rte(x[k0 + 32 * b + k] / d[b]);
        XQ[k0 + (k & 1) * 32 + 16 * b + k / 2] = q;
      }
    }
    D8[k0 / 64] = (float8)(d[0], d[0], d[0], d[0], d[1], d[1], d[1], d[1]);
  }
  for (int g = 0; g < K / G; ++g) {
    float s = 0.0f;
    for (int k = 0; k < G; ++k) s += x[g * G + k];
    XS[g] = s;
  }
}
typedef char c32 __attribute__((ext_vector_type(32)));
typedef short s16 __attribute__((ext_vector_type(16)));
// The codes times x's int8 blocks by AVX2's pmaddubsw (u8 x s8, pairs added into s16) and
// pmaddwd (pairs into s32), 64 k a step: a column's 32 code bytes split into low and high
// nibbles (the blocks' even and odd k) by two masks and a shift. e0m4's level is 2 + c / 8,
// so a group's sum is s / 8 sum(x c) + (2 s + o) sum(x).
__kernel void gemv_i8(__global const uchar* W, __global const float* S, __global const float* O,
                      __global const char* XQ, __global const float8* D8, __global const float* XS,
                      __global float* y, int K, int N) {
  const int c0 = get_group_id(0) * NC;
  float v[NC];
  for (int j = 0; j < NC; ++j) v[j] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += G) {
    float8 acc[NC];
    for (int j = 0; j < NC; ++j) acc[j] = 0.0f;
    for (int k = k0; k < k0 + G; k += 64) {
      const c32 xe = *(__global const c32*)(XQ + k), xo = *(__global const c32*)(XQ + k + 32);
      const float8 d = D8[k / 64];
      for (int j = 0; j < NC; ++j) {
        const c32 w = *(__global const c32*)(W + (long)(c0 + j) * (K / 2) + k / 2);
        const c32 lo = w & (c32)0x0f, hi = (w >> (c32)4) & (c32)0x0f;
        const s16 p = __builtin_ia32_pmaddubsw256(lo, xe) + __builtin_ia32_pmaddubsw256(hi, xo);
        acc[j] = fma(convert_float8(__builtin_ia32_pmaddwd256(p, (s16)1)), d, acc[j]);
      }
    }
    for (int j = 0; j < NC; ++j) {
      const long g = (long)(c0 + j) * (K / G) + k0 / G;
      v[j] += S[g] * 0.125f * (dot(acc[j].lo, (float4)1.0f) + dot(acc[j].hi, (float4)1.0f)) +
              (2.0f * S[g] + O[g]) * XS[k0 / G];
    }
  }
  for (int j = 0; j < NC; ++j) y[c0 + j] = v[j];
}

// ... for ROWS rows of x at once (a batched decode step's, a speculative check's): each
// column's 32 code bytes loaded and split into nibbles once for all rows, each row's
// products as gemv_i8's (the same sums). XQ, D8, XS: ROWS rows of quant_x's; y: ROWS rows
// of N. RC columns a task (RC x ROWS accumulators: 16 of AVX-512's 32 ymm at 4 x 4).
#ifndef ROWS
#define ROWS 4
#endif
#ifndef RC
#define RC 4
#endif
__kernel void gemv_i8_rows(__global const uchar* W, __global const float* S, __global const float* O,
                           __global const char* XQ, __global const float8* D8, __global const float* XS,
                           __global float* y, int K, int N) {
  const int c0 = get_group_id(0) * RC;
  float v[ROWS][RC];
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < RC; ++j) v[r][j] = 0.0f;
  for (int k0 = 0; k0 < K; k0 += G) {
    float8 acc[ROWS][RC];
    for (int r = 0; r < ROWS; ++r)
      for (int j = 0; j < RC; ++j) acc[r][j] = 0.0f;
    for (int k = k0; k < k0 + G; k += 64) {
      c32 xe[ROWS], xo[ROWS];
      float8 d[ROWS];
      for (int r = 0; r < ROWS; ++r) {
        xe[r] = *(__global const c32*)(XQ + (long)r * K + k);
        xo[r] = *(__global const c32*)(XQ + (long)r * K + k + 32);
        d[r] = D8[r * (K / 64) + k / 64];
      }
      for (int j = 0; j < RC; ++j) {
        const c32 w = *(__global const c32*)(W + (long)(c0 + j) * (K / 2) + k / 2);
        const c32 lo = w & (c32)0x0f, hi = (w >> (c32)4) & (c32)0x0f;
        for (int r = 0; r < ROWS; ++r) {
          const s16 p = __builtin_ia32_pmaddubsw256(lo, xe[r]) + __builtin_ia32_pmaddubsw256(hi, xo[r]);
          acc[r][j] = fma(convert_float8(__builtin_ia32_pmaddwd256(p, (s16)1)), d[r], acc[r][j]);
        }
      }
    }
    for (int j = 0; j < RC; ++j) {
      const long g = (long)(c0 + j) * (K / G) + k0 / G;
      for (int r = 0; r < ROWS; ++r)
        v[r][j] += S[g] * 0.125f * (dot(acc[r][j].lo, (float4)1.0f) + dot(acc[r][j].hi, (float4)1.0f)) +
                   (2.0f * S[g] + O[g]) * XS[r * (K / G) + k0 / G];
    }
  }
  for (int r = 0; r < ROWS; ++r)
    for (int j = 0; j < RC; ++j) y[(long)r * N + c0 + j] = v[r][j];
}
#endif
