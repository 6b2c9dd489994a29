// NVIDIA tensor cores from OpenCL C: inline PTX, which NVIDIA's compiler accepts (sm_80+
// for these forms). Only built apart, with TL_MMA defined, on NVIDIA platforms
// (runtime/kernel_library.cpp), after mma_probe below has built and computed right.
#ifdef TL_MMA
// d += a x b for a 16 x 16 (row) by 16 x 8 (col) tile, f16 in, f32 accumulate: a0..a3 and
// b0, b1 hold two halves each (the lower one at the lower k), in PTX's fragment layout.
#define MMA_16816(d, a0, a1, a2, a3, b0, b1)                                                                \
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                      \
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))
// d += a x b for a 16 x 32 (row, int8) by 32 x 8 (col, uint8) tile, int32 sums: a0..a3
// and b0, b1 hold four bytes each (the lowest at the lowest k), in PTX's fragment layout.
#define MMA_S8U8(d, a0, a1, a2, a3, b0, b1)                                                          \
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.u8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])                                              \
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))
// An int32 below 2^22 in magnitude as a float: one integer add and one float add, where a
// conversion instruction runs at a quarter of their rate.
inline float small_i2f(int i) { return as_float(i + 0x4B400000) - 12582912.0f; }
// 16 bytes from global to local memory without registers (cp.async, sm_80+): `bytes` of
// them read (16, or 0 for zeros), the copy in flight until a wait_group covers its group.
#define CP_ASYNC16(dst, src, bytes) \
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((uint)(size_t)(dst)), "l"(src), "r"(bytes) : "memory")
// ... 4 bytes (cp.async.ca), for scattered floats.
#define CP_ASYNC4(dst, src, bytes) \
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"((uint)(size_t)(dst)), "l"(src), "r"(bytes) : "memory")
#define CP_ASYNC_COMMIT() asm volatile("cp.async.commit_group;" ::: "memory")
// Waits until at most n (a literal) of this item's committed groups are in flight.
#define CP_ASYNC_WAIT(n) asm volatile("cp.async.wait_group " #n ";" ::: "memory")
// Two floats as a pair of halves (round to nearest), lo in the lower 16 bits: one cvt.
inline uint half2_bits(float lo, float hi) {
  uint r;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  return r;
}
inline uint4 half8_bits(float8 v) {
  return (uint4)(half2_bits(v.s0, v.s1), half2_bits(v.s2, v.s3), half2_bits(v.s4, v.s5), half2_bits(v.s6, v.s7));
}

// A 16 x 8 x 16 product checked against the host when the program is built
// (runtime/kernel_library.cpp): a device that builds but computes it wrong keeps the
// portable path. A [16][16] and B [8][16] (n, k) as half bits, C [16][8].
__kernel void mma_probe(__global const uint* A, __global const uint* B, __global float* C) {
  const int lane = get_local_id(0), g = lane >> 2, t = lane & 3;
  float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  MMA_16816(d, A[g * 8 + t], A[(g + 8) * 8 + t], A[g * 8 + t + 4], A[(g + 8) * 8 + t + 4], B[g * 8 + t], B[g * 8 + t + 4]);
  C[g * 8 + 2 * t] = d[0];
  C[g * 8 + 2 * t + 1] = d[1];
  C[(g + 8) * 8 + 2 * t] = d[2];
  C[(g + 8) * 8 + 2 * t + 1] = d[3];
}

// The tensor cores' peak (tl-bench --probe): four independent chains of m16n8k16 products
// per warp, 4 x 4096 flops an iteration, 512 an item (probe.cpp's fmaGflops, width 32).
__kernel void probe_mma_f16(__global float* out, float fa, float fb, int iters) {
  const uint a = half2_bits(fa, fb) ^ (get_global_id(0) & 1), b = half2_bits(fb, fa);
  float d0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, d1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  float d2[4] = {0.0f, 0.0f, 0.0f, 0.0f}, d3[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int i = 0; i < iters; ++i) {
    MMA_16816(d0, a, a, a, a, b, b);
    MMA_16816(d1, a, a, a, a, b, b);
    MMA_16816(d2, a, a, a, a, b, b);
    MMA_16816(d3, a, a, a, a, b, b);
  }
  out[get_global_id(0)] = d0[0] + d1[1] + d2[2] + d3[3];
}

#endif  // TL_MMA
