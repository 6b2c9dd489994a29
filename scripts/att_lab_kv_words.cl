// scripts/att_lab.c's input between kernels/common.cl and kernels/attention.cl (NVIDIA,
// fp16 caches): NVIDIA's compiler reads vload_half4 as four 2-byte loads; here 4 halves are
// one 8-byte load widened in registers by inline PTX (a cache row starts on 8 bytes: heads
// of a multiple of 4, buffers aligned). Measured in the lab (docs/tl-bench.md, issue 28);
// not yet in the library's programs: its main program, where the decode attention rows
// live, is built without inline PTX.
inline float4 kv_half4(uint2 u) {
  float4 f;
  asm("{ .reg .b16 a, b, c, d; mov.b32 {a, b}, %4; mov.b32 {c, d}, %5; cvt.f32.f16 %0, a; cvt.f32.f16 %1, b; "
      "cvt.f32.f16 %2, c; cvt.f32.f16 %3, d; }"
      : "=f"(f.x), "=f"(f.y), "=f"(f.z), "=f"(f.w)
      : "r"(u.x), "r"(u.y));
  return f;
}
#undef KV_LD4
#undef KV_LD8
#undef KV_LD16
#define KV_LD4(o, p) kv_half4(((__global const uint2*)(p))[o])
#define KV_LD8(o, p) (float8)(KV_LD4(2 * (o), p), KV_LD4(2 * (o) + 1, p))
#define KV_LD16(o, p) (float16)(KV_LD8(2 * (o), p), KV_LD8(2 * (o) + 1, p))
