// NVIDIA tensor cores from OpenCL C: inline PTX, which NVIDIA's compiler accepts (sm_80+
// for these forms). Only built apart, with TL_MMA defined, on NVIDIA platforms
// (runtime/kernel_library.cpp), after mma_probe below has built and computed right; or,
// for the tests, elsewhere with TL_MMA_EMU (below).
#ifdef TL_MMA
#ifndef TL_MMA_EMU
// Each kernel that uses these opens with MMA_EMU_DECL (TL_MMA_EMU's scratch; here none);
// their loops over fragments unroll (MMA_UNROLL), so that the fragments stay in registers.
#define MMA_EMU_DECL
#define MMA_UNROLL _Pragma("unroll")
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
// ... B signed too.
#define MMA_S8S8(d, a0, a1, a2, a3, b0, b1)                                                          \
  asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])                                              \
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))
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
// shfl.sync.bfly: the value of lane ^ mask (1 or 2) in this warp.
#define LANE_XOR(v, mask) lane_xor##mask(v)
inline float lane_xor1(float x) {
  float y;
  asm volatile("shfl.sync.bfly.b32 %0, %1, 1, 0x1f, 0xffffffff;" : "=f"(y) : "f"(x));
  return y;
}
inline float lane_xor2(float x) {
  float y;
  asm volatile("shfl.sync.bfly.b32 %0, %1, 2, 0x1f, 0xffffffff;" : "=f"(y) : "f"(x));
  return y;
}
#else  // TL_MMA_EMU
// The tests' tensor cores on any device (Device::setMmaEmulation): each form above
// computed from its fragment layout as the PTX ISA gives it (mma.m16n8k16 .f16,
// m16n8k32 .s8.u8 and .s8.s8, shfl.sync.bfly), a warp's 32 items exchanging their registers through
// local memory, cp.async as a plain copy: the tiles' index arithmetic runs, and can fail,
// where there is no NVIDIA device. The kernels call these where every item of the
// work-group does (as the PTX forms require of a warp); the scratch's two halves
// alternate, so one barrier an exchange is enough. Work-groups of at most 256 items.
#define MMA_EMU_DECL            \
  __local uint mma_x[2 * 256 * 6]; \
  int mma_n = 0;
// Rolled: a barrier an exchange, unrolled, left PoCL building for over 15 minutes.
#define MMA_UNROLL _Pragma("nounroll")
// Puts an item's registers r[0..count) beside its warp's; returns the warp's.
inline __local const uint* mma_emu_put(__local uint* x, int* n, const uint* r, int count) {
  const int tid = get_local_id(0), lane = tid & 31;
  __local uint* w = x + (*n & 1) * 256 * 6 + (tid - lane) * 6;
  for (int i = 0; i < count; ++i) w[lane * 6 + i] = r[i];
  barrier(CLK_LOCAL_MEM_FENCE);
  ++*n;
  return w;
}
inline float mma_emu_half(uint r, int high) {
  const ushort h = high ? r >> 16 : r & 0xffff;
  return vload_half(0, (const half*)&h);
}
// The words of a warp's registers w (mma_emu_put's: 4 of A, 2 of B a lane) that hold A's
// (row, k) and B's (k, col), `per` elements a register (2 halves or 4 bytes, the lowest
// first): A's register j of lane l holds row l / 4 + 8 (j & 1), k per (l % 4) + 4 per
// (j >> 1) and the next per - 1; B's register j k per (l % 4) + 4 per j and the next of
// column l / 4.
inline uint2 mma_emu_words(__local const uint* w, int row, int col, int k, int per) {
  const int r = (k % (4 * per)) / per, j = k / (4 * per);
  return (uint2)(w[((row & 7) * 4 + r) * 6 + (row >> 3) + 2 * j], w[(col * 4 + r) * 6 + 4 + j]);
}
// d (rows g and g + 8, columns 2t and 2t + 1 of lane 4g + t) += A (16 x 16) B (16 x 8).
inline void mma_emu_f16(float* d, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1, __local uint* x, int* n) {
  const uint r[6] = {a0, a1, a2, a3, b0, b1};
  __local const uint* w = mma_emu_put(x, n, r, 6);
  const int lane = get_local_id(0) & 31, g = lane >> 2, t = lane & 3;
  for (int e = 0; e < 4; ++e) {
    float s = d[e];
    for (int k = 0; k < 16; ++k) {
      const uint2 ab = mma_emu_words(w, g + 8 * (e >> 1), 2 * t + (e & 1), k, 2);
      s += mma_emu_half(ab.x, k & 1) * mma_emu_half(ab.y, k & 1);
    }
    d[e] = s;
  }
}
// ... int8: A (16 x 32) signed bytes, B (32 x 8) unsigned or, bs, signed.
inline void mma_emu_i8(int* d, uint a0, uint a1, uint a2, uint a3, uint b0, uint b1, int bs, __local uint* x, int* n) {
  const uint r[6] = {a0, a1, a2, a3, b0, b1};
  __local const uint* w = mma_emu_put(x, n, r, 6);
  const int lane = get_local_id(0) & 31, g = lane >> 2, t = lane & 3;
  for (int e = 0; e < 4; ++e) {
    int s = d[e];
    for (int k = 0; k < 32; ++k) {
      const uint2 ab = mma_emu_words(w, g + 8 * (e >> 1), 2 * t + (e & 1), k, 4);
      const int b = (ab.y >> 8 * (k & 3)) & 0xff;
      s += (int)(char)(ab.x >> 8 * (k & 3)) * (bs ? (int)(char)b : b);
    }
    d[e] = s;
  }
}
#define MMA_16816(d, a0, a1, a2, a3, b0, b1) mma_emu_f16(d, a0, a1, a2, a3, b0, b1, mma_x, &mma_n)
#define MMA_S8U8(d, a0, a1, a2, a3, b0, b1) mma_emu_i8(d, a0, a1, a2, a3, b0, b1, 0, mma_x, &mma_n)
#define MMA_S8S8(d, a0, a1, a2, a3, b0, b1) mma_emu_i8(d, a0, a1, a2, a3, b0, b1, 1, mma_x, &mma_n)
inline float mma_emu_xor(float v, int mask, __local uint* x, int* n) {
  const uint r[1] = {as_uint(v)};
  __local const uint* w = mma_emu_put(x, n, r, 1);
  return as_float(w[((get_local_id(0) & 31) ^ mask) * 6]);
}
#define LANE_XOR(v, mask) mma_emu_xor(v, mask, mma_x, &mma_n)
inline void mma_emu_copy(__local uchar* d, __global const uchar* s, int bytes, int n) {
  for (int i = 0; i < n; ++i) d[i] = i < bytes ? s[i] : 0;
}
#define CP_ASYNC16(dst, src, bytes) mma_emu_copy((__local uchar*)(dst), (__global const uchar*)(src), (bytes), 16)
#define CP_ASYNC4(dst, src, bytes) mma_emu_copy((__local uchar*)(dst), (__global const uchar*)(src), (bytes), 4)
#define CP_ASYNC_COMMIT()
#define CP_ASYNC_WAIT(n)
inline uint half2_bits(float lo, float hi) {
  ushort h[2];
  vstore_half_rte(lo, 0, (half*)h);
  vstore_half_rte(hi, 1, (half*)h);
  return h[0] | (uint)h[1] << 16;
}
#endif  // TL_MMA_EMU
// An int32 below 2^22 in magnitude as a float: one integer add and one float add, where a
// conversion instruction runs at a quarter of their rate.
inline float small_i2f(int i) { return as_float(i + 0x4B400000) - 12582912.0f; }
inline uint4 half8_bits(float8 v) {
  return (uint4)(half2_bits(v.s0, v.s1), half2_bits(v.s2, v.s3), half2_bits(v.s4, v.s5), half2_bits(v.s6, v.s7));
}

// A 16 x 8 x 16 product checked against the host when the program is built
// (runtime/kernel_library.cpp): a device that builds but computes it wrong keeps the
// portable path. A [16][16] and B [8][16] (n, k) as half bits, C [16][8].
__kernel void mma_probe(__global const uint* A, __global const uint* B, __global float* C) {
  MMA_EMU_DECL
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
  MMA_EMU_DECL
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
