// Elementwise ops with numpy broadcasting: out[i] = f(a[sa . coords(i)], b[sb . coords(i)]).

#define BINARY2(NAME, TA, TB, TOUT, EXPR)                                                         \
  __kernel void NAME(__global const TA* A, __global const TB* B, __global TOUT* out, int n,       \
                     int8 dims, int8 sa, int8 sb) {                                               \
    int i = get_global_id(0);                                                                     \
    if (i >= n) return;                                                                           \
    TA a = A[strided_offset(i, dims, sa)];                                                        \
    TB b = B[strided_offset(i, dims, sb)];                                                        \
    out[i] = (EXPR);                                                                              \
  }
#define BINARY(NAME, TA, TOUT, EXPR) BINARY2(NAME, TA, TA, TOUT, EXPR)

#define ARITH(T, S)                                   \
  BINARY(add_##S, T, T, a + b)                        \
  BINARY(sub_##S, T, T, a - b)                        \
  BINARY(mul_##S, T, T, a * b)                        \
  BINARY(max_##S, T, T, a > b ? a : b)                \
  BINARY(min_##S, T, T, a < b ? a : b)                \
  BINARY(equal_##S, T, uchar, a == b)                 \
  BINARY(less_##S, T, uchar, a < b)                   \
  BINARY(lessorequal_##S, T, uchar, a <= b)           \
  BINARY(greater_##S, T, uchar, a > b)                \
  BINARY(greaterorequal_##S, T, uchar, a >= b)

ARITH(float, f32)
ARITH(long, i64)
ARITH(int, i32)
BINARY(div_f32, float, float, a / b)
BINARY(div_i64, long, long, a / b)
BINARY(div_i32, int, int, a / b)
BINARY(mod_i64, long, long, ((a % b) + b) % b)
BINARY(mod_i32, int, int, ((a % b) + b) % b)
BINARY(pow_f32, float, float, b == 2.0f ? a * a : pow(a, b))

// Pow's exponent may have another type than its base (ONNX's T1). Integer exponents go
// by squaring, exact where the result is representable (pow()'s 16 ulp would turn 729
// into 728.99994, and an integer result truncates that to 728); integer bases wrap as
// numpy's integer powers do, and a negative exponent truncates 1 / a^-b toward zero.
float pow_float_int(float a, long b) {
  float r = 1.0f;
  for (ulong e = b < 0 ? -(ulong)b : (ulong)b; e; e >>= 1, a *= a)
    if (e & 1) r *= a;
  return b < 0 ? 1.0f / r : r;
}
long pow_int_int(long a, long b) {
  if (b < 0) return a == 1 ? 1 : a == -1 ? ((b & 1) ? -1 : 1) : 0;
  ulong r = 1, x = (ulong)a;  // unsigned: overflow wraps instead of being undefined
  for (ulong e = (ulong)b; e; e >>= 1, x *= x)
    if (e & 1) r *= x;
  return (long)r;
}
// An integer base to a float exponent: exact for integral exponents, else through
// float, truncated toward zero as a cast is.
long pow_int_float(long a, float b) {
  return b == floor(b) && fabs(b) < 0x1p62f ? pow_int_int(a, (long)b) : (long)pow((float)a, b);
}
BINARY2(pow_f32_i32, float, int, float, pow_float_int(a, b))
BINARY2(pow_f32_i64, float, long, float, pow_float_int(a, b))
BINARY(pow_i32, int, int, (int)pow_int_int(a, b))
BINARY2(pow_i32_i64, int, long, int, (int)pow_int_int(a, b))
BINARY2(pow_i32_f32, int, float, int, (int)pow_int_float(a, b))
BINARY(pow_i64, long, long, pow_int_int(a, b))
BINARY2(pow_i64_i32, long, int, long, pow_int_int(a, b))
BINARY2(pow_i64_f32, long, float, long, pow_int_float(a, b))
BINARY(and_u8, uchar, uchar, a && b)
BINARY(or_u8, uchar, uchar, a || b)
BINARY(xor_u8, uchar, uchar, (a != 0) != (b != 0))
BINARY(equal_u8, uchar, uchar, a == b)

#define UNARY(NAME, T, EXPR)                                                      \
  __kernel void NAME(__global const T* A, __global T* out, int n) {               \
    int i = get_global_id(0);                                                     \
    if (i >= n) return;                                                           \
    T x = A[i];                                                                   \
    out[i] = (EXPR);                                                              \
  }

// Float tests with a bool (uchar) result.
#define PREDICATE(NAME, EXPR)                                                       \
  __kernel void NAME(__global const float* A, __global uchar* out, int n) {         \
    int i = get_global_id(0);                                                       \
    if (i >= n) return;                                                             \
    float x = A[i];                                                                 \
    out[i] = (EXPR) ? 1 : 0;                                                        \
  }
PREDICATE(isnan_f32, isnan(x))
PREDICATE(isinf_f32, isinf(x))

UNARY(neg_f32, float, -x)
UNARY(neg_i64, long, -x)
UNARY(abs_f32, float, fabs(x))
UNARY(abs_i64, long, x < 0 ? -x : x)
UNARY(sqrt_f32, float, sqrt(x))
UNARY(reciprocal_f32, float, 1.0f / x)
UNARY(exp_f32, float, exp(x))
UNARY(log_f32, float, log(x))
UNARY(sin_f32, float, sin(x))
UNARY(cos_f32, float, cos(x))
UNARY(tanh_f32, float, tanh(x))
UNARY(erf_f32, float, erf(x))
UNARY(sigmoid_f32, float, 1.0f / (1.0f + exp(-x)))
UNARY(relu_f32, float, fmax(x, 0.0f))
UNARY(floor_f32, float, floor(x))
UNARY(ceil_f32, float, ceil(x))
UNARY(softplus_f32, float, x > 20.0f ? x : log1p(exp(x)))
UNARY(not_u8, uchar, !x)
UNARY(gelu_f32, float, 0.5f * x * (1.0f + erf(x * 0.70710678118654752f)))
UNARY(gelutanh_f32, float, 0.5f * x * (1.0f + tanh(0.7978845608028654f * (x + 0.044715f * x * x * x))))

#define CAST(NAME, TI, TO, EXPR)                                                  \
  __kernel void NAME(__global const TI* A, __global TO* out, int n) {             \
    int i = get_global_id(0);                                                     \
    if (i >= n) return;                                                           \
    TI x = A[i];                                                                  \
    out[i] = (EXPR);                                                              \
  }

CAST(cast_f32_i64, float, long, (long)x)
CAST(cast_f32_i32, float, int, (int)x)
CAST(cast_f32_u8, float, uchar, x != 0.0f)
CAST(cast_i64_f32, long, float, (float)x)
CAST(cast_i64_i32, long, int, (int)x)
CAST(cast_i64_u8, long, uchar, x != 0)
CAST(cast_i32_f32, int, float, (float)x)
CAST(cast_i32_i64, int, long, (long)x)
CAST(cast_i32_u8, int, uchar, x != 0)
CAST(cast_u8_f32, uchar, float, (float)x)
CAST(cast_u8_i64, uchar, long, (long)x)
CAST(cast_u8_i32, uchar, int, (int)x)

#define WHERE(S, T)                                                                             \
  __kernel void where_##S(__global const uchar* C, __global const T* X, __global const T* Y,    \
                          __global T* out, int n, int8 dims, int8 sc, int8 sx, int8 sy) {       \
    int i = get_global_id(0);                                                                   \
    if (i >= n) return;                                                                         \
    out[i] = C[strided_offset(i, dims, sc)] ? X[strided_offset(i, dims, sx)]                    \
                                            : Y[strided_offset(i, dims, sy)];                   \
  }

WHERE(f32, float)
WHERE(i64, long)
WHERE(i32, int)
WHERE(u8, uchar)

// tl.RoPE (rotate-half): y = x * cos + rotate_half(x) * sin over the last dim D, where
// rotate_half(x) = concat(-x[D/2:], x[:D/2]); cos and sin read through broadcast strides.

// Where element i of a [B, H, S, D] tensor stored as [B, S, H, D] is: a tl.RoPE's input
// read through the exporter's Transpose(0,2,1,3) (x_bshd, x2_bshd, x3_bshd; the kernels'
// `bshd` has bit 0, 1, 2 for x, x2, x3).
inline int bshd_at(int i, int H, int S, int D) {
  const int d = i % D, s = i / D % S, h = i / (D * S) % H, b = i / (D * S * H);
  return ((b * S + s) * H + h) * D + d;
}

// Element i of rope(x), x of logical dims `dims` ([B, H, S, D] when bshd); past `rot` the
// head passes through (partial rotary).
inline float rope_at(__global const float* x, __global const float* cosv, __global const float* sinv, int i, int D,
                     int rot, int8 dims, int8 cs, int8 ss, RopeTrig tg, int bshd) {
  const int d = i % D, p = bshd ? bshd_at(i, dims.s5, dims.s6, D) : i;
  if (d >= rot) return x[p];
  return rope_rotate(x, p, d, rot, rope_trig(cosv, sinv, strided_offset(i, dims, cs), strided_offset(i, dims, ss), d, rot, tg));
}

__kernel void rope_f32(__global const float* x, __global const float* cosv, __global const float* sinv,
                       __global float* out, int n, int D, int rot, int8 dims, int8 cs, int8 ss,
                       __global const float* x2, __global float* out2, int n2, int8 dims2, int8 cs2, int8 ss2,
                       int bshd, ROPE_TRIG_ARGS) {
  const int i = get_global_id(0);
  if (i < n) out[i] = rope_at(x, cosv, sinv, i, D, rot, dims, cs, ss, ROPE_TRIG, bshd & 1);
  else if (i < n + n2) out2[i - n] = rope_at(x2, cosv, sinv, i - n, D, rot, dims2, cs2, ss2, ROPE_TRIG, bshd & 2);
}

// Element i of Concat(a, b) along an axis of `rows` (the first `first` from a), `inner`
// elements past it; b's value from `fresh`.
#define CACHE_AT(a, i, inner, rows, first, fresh)                                                    \
  {                                                                                                 \
    const int c_ = (i) % (inner), r_ = (i) / (inner) % (rows), o_ = (i) / ((inner) * (rows));      \
    if (r_ < (first)) return a[((long)o_ * (first) + r_) * (inner) + c_];                           \
    const int j = (o_ * ((rows) - (first)) + r_ - (first)) * (inner) + c_;                          \
    return fresh;                                                                                   \
  }
inline float rope_cache_at(__global const float* past, __global const float* x, __global const float* cosv,
                           __global const float* sinv, int i, int inner, int rows, int first, int D, int rot,
                           int8 dims, int8 cs, int8 ss, RopeTrig tg, int bshd)
    CACHE_AT(past, i, inner, rows, first, rope_at(x, cosv, sinv, j, D, rot, dims, cs, ss, tg, bshd))
// x of H heads (bshd: stored [B, S, H, D], the cache axis 2).
inline float cache_at(__global const float* past, __global const float* x, int i, int inner, int rows, int first,
                      int bshd, int H)
    CACHE_AT(past, i, inner, rows, first, x[bshd ? bshd_at(j, H, rows - first, inner) : j])

// tl.RoPE with cache_axis: q rotated; k rotated and appended to its cache; v appended to
// its cache, in one launch.
__kernel void rope_cache_f32(__global const float* x, __global const float* cosv, __global const float* sinv,
                             __global float* out, int n, int D, int rot, int8 dims, int8 cs, int8 ss,
                             __global const float* x2, int8 dims2, int8 cs2, int8 ss2, __global const float* past2,
                             __global float* cat2, int n2, int inner2, int rows2, int first2,
                             __global const float* x3, __global const float* past3, __global float* cat3, int n3,
                             int inner3, int rows3, int first3, int bshd, ROPE_TRIG_ARGS) {
  int i = get_global_id(0);
  if (i < n) {
    out[i] = rope_at(x, cosv, sinv, i, D, rot, dims, cs, ss, ROPE_TRIG, bshd & 1);
  } else if ((i -= n) < n2) {
    cat2[i] = rope_cache_at(past2, x2, cosv, sinv, i, inner2, rows2, first2, D, rot, dims2, cs2, ss2, ROPE_TRIG, bshd & 2);
  } else if ((i -= n2) < n3) {
    cat3[i] = cache_at(past3, x3, i, inner3, rows3, first3, bshd & 4, dims2.s5);
  }
}

// Element j of new rows x [B, H, N, D] (contiguous), at its place in an in-place cache
// (tl-plan): token kv_rows[b] + i of head h of batch row b (each row its own sequence, with
// its own length), through the cache's strides.
inline long kv_at(int j, int H, int N, int D, int sb, int sh, int st, __global const int* kv_rows) {
  const int d = j % D, i = j / D % N, h = j / (D * N) % H, b = j / (D * N * H);
  return (long)b * sb + (long)h * sh + (long)(kv_rows[b] + i) * st + d;
}

// Dims d0 and d0 + mid of a head row (x[i], x[i + mid]) rotated by their (cos, sin) t0
// and t1; a dim past the rotary ones (pair = 0) passes as .x.
inline float2 rope_pair(__global const float* x, int i, int mid, float2 t0, float2 t1, int pair) {
  if (!pair) return (float2)(x[i], 0.0f);
  const float a = x[i], c = x[i + mid];
  return (float2)(a * t0.x - c * t0.y, c * t1.x + a * t1.y);
}

// tl.RoPE with cache_axis on in-place caches: q [B, H, S, D] rotated into out; the new k
// rows [B, H2, S, D] rotated into their cache and the new v rows [B, H3, N3, D3] copied
// into theirs, after the caches' *kv_rows tokens. An item per (b, s, j) of the rows, j a
// rotated pair (j, j + rot / 2) or a dim past them, does that place of every q and k head
// with one cos and sin; then an item per (b, s, d) of v's rows copies every v head. The
// position ids' sincos per element, and each element's index divisions, were most of the
// kernel's time on CPUs (bytellama's pp512 on PoCL). Tables that vary by head go element
// by element. The launch's second dimension deals the heads out (GPUs: a head an item,
// where 8,192 items walking 32 heads each took 25 µs at 128 rows of Llama-2-7B on an
// H200); CPUs keep one slice, each sincos shared by every head. (n2: k's elements;
// bshd's bits: which of x, x2, x3 are stored [B, S, H, D].)
__kernel void rope_kv_f32(__global const float* x, __global const float* cosv, __global const float* sinv,
                          __global float* out, int n, int D, int rot, int8 dims, int8 cs, int8 ss,
                          __global const float* x2, int8 dims2, int8 cs2, int8 ss2, __global KV_T* kc, int n2,
                          int H2, int N2, int D2, int ksb, int ksh, int kst, __global const float* x3,
                          __global KV_T* vc, int n3, int H3, int N3, int D3, int vsb, int vsh, int vst,
                          __global const int* kv_rows, int bshd, ROPE_TRIG_ARGS) {
  int i = get_global_id(0);
  const int H = dims.s5, S = dims.s6, mid = rot / 2, W = D - mid, rows = n / (H * D) * W;
  const int h0 = get_global_id(1), HS = get_global_size(1);
  if (i < rows) {
    const int j = i % W, s = i / W % S, b = i / (W * S), pair = j < mid, d = pair ? j : j + mid, rows0 = kv_rows[b];
    const int perHead = cs.s5 || ss.s5 || cs2.s5 || ss2.s5;
    float2 t0 = 0.0f, t1 = 0.0f;
    if (pair && !perHead) {  // q is [B, H, S, D] (dims' last four): the tables' offsets of (b, 0, s, d)
      const int co = b * cs.s4 + s * cs.s6, so = b * ss.s4 + s * ss.s6;
      t0 = rope_trig(cosv, sinv, co + d * cs.s7, so + d * ss.s7, d, rot, ROPE_TRIG);
      t1 = positions ? t0 : rope_trig(cosv, sinv, co + (d + mid) * cs.s7, so + (d + mid) * ss.s7, d + mid, rot, ROPE_TRIG);
    }
    for (int h = h0; h < H; h += HS) {
      const int e = ((b * H + h) * S + s) * D + d;
      if (perHead) {
        out[e] = rope_at(x, cosv, sinv, e, D, rot, dims, cs, ss, ROPE_TRIG, bshd & 1);
        if (pair) out[e + mid] = rope_at(x, cosv, sinv, e + mid, D, rot, dims, cs, ss, ROPE_TRIG, bshd & 1);
      } else {
        const float2 y = rope_pair(x, bshd & 1 ? ((b * S + s) * H + h) * D + d : e, mid, t0, t1, pair);
        out[e] = y.x;
        if (pair) out[e + mid] = y.y;
      }
    }
#ifdef TL_KV_Q8
    // 8-bit caches take whole blocks: the item of (b, s)'s first dim writes every k head's row.
    for (int h = h0; h < H2 && j == 0; h += HS)
      for (int d0 = 0; d0 < D; d0 += 32) {
        const int e = ((b * H2 + h) * S + s) * D + d0;
        float y[32];
        for (int u = 0; u < 32; ++u) y[u] = rope_at(x2, cosv, sinv, e + u, D2, rot, dims2, cs2, ss2, ROPE_TRIG, bshd & 2);
        kv_q8_store(y, (long)b * ksb + (long)h * ksh + (long)(rows0 + s) * kst + d0, kc);
      }
#else
    for (int h = h0; h < H2; h += HS) {
      const int e = ((b * H2 + h) * S + s) * D + d;
      const long c = (long)b * ksb + (long)h * ksh + (long)(rows0 + s) * kst + d;
      if (perHead) {
        KV_ST(rope_at(x2, cosv, sinv, e, D2, rot, dims2, cs2, ss2, ROPE_TRIG, bshd & 2), c, kc);
        if (pair) KV_ST(rope_at(x2, cosv, sinv, e + mid, D2, rot, dims2, cs2, ss2, ROPE_TRIG, bshd & 2), c + mid, kc);
      } else {
        const float2 y = rope_pair(x2, bshd & 2 ? ((b * S + s) * H2 + h) * D + d : e, mid, t0, t1, pair);
        KV_ST(y.x, c, kc);
        if (pair) KV_ST(y.y, c + mid, kc);
      }
    }
#endif
  } else if ((i -= rows) < n3 / H3) {
    const int d = i % D3, s = i / D3 % N3, b = i / (D3 * N3), rows0 = kv_rows[b];
#define ROPE_KV_V(h, d) x3[bshd & 4 ? ((b * N3 + s) * H3 + (h)) * D3 + (d) : ((b * H3 + (h)) * N3 + s) * D3 + (d)]
#ifdef TL_KV_Q8
    for (int h = h0; h < H3 && d % 32 == 0; h += HS) {  // a block's first dim writes it
      float y[32];
      for (int u = 0; u < 32; ++u) y[u] = ROPE_KV_V(h, d + u);
      kv_q8_store(y, (long)b * vsb + (long)h * vsh + (long)(rows0 + s) * vst + d, vc);
    }
#else
    for (int h = h0; h < H3; h += HS) KV_ST(ROPE_KV_V(h, d), (long)b * vsb + (long)h * vsh + (long)(rows0 + s) * vst + d, vc);
#endif
#undef ROPE_KV_V
  }
}

// tl.KvAppend on in-place caches: one or two tensors of new rows [B, H, N, D] written into
// their caches after the caches' *kv_rows tokens (n1 = 0: one pair).
__kernel void kv_append_f32(__global const float* x0, __global KV_T* c0, int n0, int H0, int N0, int D0, int sb0,
                            int sh0, int st0, __global const float* x1, __global KV_T* c1, int n1, int H1, int N1,
                            int D1, int sb1, int sh1, int st1, __global const int* kv_rows) {
  int i = get_global_id(0);
#ifdef TL_KV_Q8
  // 8-bit caches take whole blocks: a block's first element writes it (n0 % 32 == 0).
  if (i % 32) return;
  __global const float* x = i < n0 ? x0 + i : x1 + (i - n0);
  float y[32];
  for (int u = 0; u < 32 && i < n0 + n1; ++u) y[u] = x[u];
  if (i < n0) kv_q8_store(y, kv_at(i, H0, N0, D0, sb0, sh0, st0, kv_rows), c0);
  else if ((i -= n0) < n1) kv_q8_store(y, kv_at(i, H1, N1, D1, sb1, sh1, st1, kv_rows), c1);
#else
  if (i < n0) KV_ST(x0[i], kv_at(i, H0, N0, D0, sb0, sh0, st0, kv_rows), c0);
  else if ((i -= n0) < n1) KV_ST(x1[i], kv_at(i, H1, N1, D1, sb1, sh1, st1, kv_rows), c1);
#endif
}

// tl.SwiGLU, tl.GeGLU and the GLU of a MatMul whose kernel lacks it: y = gate(g) * u,
// glu_gate's kind.
__kernel void glu_f32(__global const float* g, __global const float* u, __global float* out, int n, int kind) {
  const int i = get_global_id(0);
  if (i < n) out[i] = glu_gate(g[i], kind) * u[i];
}
