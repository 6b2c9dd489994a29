// Device probe (tl-bench --probe, libcore/bench/probe.cpp): each kernel stresses one
// ceiling, as clpeak and ArchProbe do.

// Read bandwidth: a sum, one float written per item so that the reads cannot be
// dropped (the writes are a rounding error of the bytes read). GPUs read grid-strided,
// so a warp's loads coalesce; CPUs read a contiguous chunk per item (chunk > 0), so
// each thread streams through its own pages.
__kernel void probe_read(__global const float4* src, __global float* out, int n4, int chunk) {
  float4 acc = (float4)(0.0f);
  if (chunk > 0) {
    const int begin = get_global_id(0) * chunk, end = min(begin + chunk, n4);
    for (int i = begin; i < end; ++i) acc += src[i];
  } else {
    const int stride = get_global_size(0);
    for (int i = get_global_id(0); i < n4; i += stride) acc += src[i];
  }
  out[get_global_id(0)] = acc.x + acc.y + acc.z + acc.w;
}

// FMA peak: eight independent chains of W-wide vectors per item keep the pipelines
// full; each iteration is 8 x W fused multiply-adds, 16 W flops. The host keeps the
// best width: GPUs fill their lanes with items, CPUs (PoCL) run wide vectors best.
#define FMA8(a, b)                                                                            \
  x0 = fma(x0, a, b); x1 = fma(x1, a, b); x2 = fma(x2, a, b); x3 = fma(x3, a, b);             \
  x4 = fma(x4, a, b); x5 = fma(x5, a, b); x6 = fma(x6, a, b); x7 = fma(x7, a, b);
#define SUM4(v) ((v).x + (v).y + (v).z + (v).w)
#define PROBE_FMA(NAME, S, TW, LANES)                                                                \
  __kernel void NAME(__global float* out, float fa, float fb, int iters) {                    \
    const S a = (S)fa, b = (S)fb;                                                             \
    TW x0 = (TW)((S)get_global_id(0) * (S)1e-3f), x1 = x0 + (S)1, x2 = x0 + (S)2, x3 = x0 + (S)3; \
    TW x4 = x0 + (S)4, x5 = x0 + (S)5, x6 = x0 + (S)6, x7 = x0 + (S)7;                         \
    for (int i = 0; i < iters; ++i) { FMA8(a, b) }                                            \
    TW s = x0 + x1 + x2 + x3 + x4 + x5 + x6 + x7;                                             \
    out[get_global_id(0)] = (float)SUM4(LANES(s)); /* every lane, or the compiler drops some */ \
  }
#define LANES4(v) (v)
#define LANES16(v) ((v).s0123 + (v).s4567 + (v).s89ab + (v).scdef)
PROBE_FMA(probe_fma_f32x4, float, float4, LANES4)
PROBE_FMA(probe_fma_f32x16, float, float16, LANES16)
#ifdef cl_khr_fp16
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
PROBE_FMA(probe_fma_f16x4, half, half4, LANES4)
PROBE_FMA(probe_fma_f16x16, half, half16, LANES16)
#endif

// Launch overhead and round trips: a kernel that does (almost) nothing.
__kernel void probe_empty(__global int* out) {
  if (get_global_id(0) == 0) out[0] = 1;
}
