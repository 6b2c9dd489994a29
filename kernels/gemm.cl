// Prefill GEMMs of tl.QMatMul (matmul.cpp's qgemm_* rows) and of tl.MatMul's float
// weights, one more form of W (gemm_*_f32): C = rmsnorm(A) x dequant(W) with the node's
// norm prologue and GLU epilogue inside, so that a prefill layer launches no more kernels
// than a decode layer. On GPUs a work-group of 256 items computes
// a BM x BN tile of the weights' columns (with a GLU: BN / 2 gate columns and their BN / 2
// up columns, each pair in the same item's registers), a slice of k at a time:
// - the slices of A (BM rows) and of the weights (BN columns, each code dequantized once)
//   go through local memory; the next slice's global reads are issued before the current
//   slice's products, so their latency hides behind them;
// - the norm's sums of squares come from A as it is loaded (an item loads the same rows
//   at every step), its scale NW multiplies A as it is stored, and each row's inverse RMS
//   multiplies the row's sums at the end: (sum_k a_k nw_k w_k) / rms is the normed product.
// Two inner products: fp32 FMAs (qgemm_*, any GPU), and on NVIDIA sm_80+ tensor cores
// through inline PTX (qgemm_mma_*, built apart with TL_MMA: runtime/kernel_library.cpp).
// Needs K % 8 == 0, group % 8 == 0 (a chunk of 8 codes shares a scale) and code rows that
// LOAD may read whole-word (dequant.cl).

#define GEMM_WG 256
#define GEMM_ARGS                                                                                     \
  __global const float *A, __global const uchar *W, __global const float *S, __global const float *O,   \
      __global float *C, SPLIT_ARGS, int M, int N, int K, int G, int row_bytes, int groups, GEMV_ARGS

// The weight column behind a tile's local column: c0 + lc, or with a GLU the gate (up = 0)
// or the up column of output column c0 + oc; -1 past the weights (the tile loads zeros).
inline int tile_column(int c0, int lc, int oc, int up, int N, int glu) {
  if (!glu) return c0 + lc < N ? c0 + lc : -1;
  return c0 + oc < N / 2 ? (up ? N / 2 : 0) + c0 + oc : -1;
}

// Chunk s of the weights' slice from k0 into register set P: 8 raw codes of column
// bcol[s] at kq, with their group's scale and offset; zeros past the matrix.
#define FETCH_CODES(P, s, k0, kq, RAW, LOAD)                                                  \
  {                                                                                           \
    const int k_ = (k0) + (kq);                                                               \
    if (bcol[s] >= 0 && k_ < K) {                                                             \
      rb[P][s] = LOAD(W + (long)bcol[s] * row_bytes, k_);                                     \
      rs[P][s] = S[(long)bcol[s] * groups + k_ / G];                                          \
      ro[P][s] = O[(long)bcol[s] * groups + k_ / G];                                          \
    } else {                                                                                  \
      rb[P][s] = (RAW)0;                                                                      \
      rs[P][s] = ro[P][s] = 0.0f;                                                             \
    }                                                                                         \
  }
// tl.MatMul's float weights W [K, N] through the same tiles (matmul.cpp's gemm_*_f32
// rows, row_bytes 4: a column starts 4 bytes after the last): 8 weights of a column from
// k, N apart, as they are (no scale, no offset). A warp's loads of one k touch 16
// consecutive columns of two rows: whole 32-byte sectors, as the codes' loads do.
#define F32_RAW float8
#define F32_LOAD(w, k) f32_column8((__global const float*)(w) + (long)(k) * N, N)
#define F32_LEVELS8(r) (r)
inline float8 f32_column8(__global const float* w, int N) {
  return (float8)(w[0], w[N], w[2 * N], w[3 * N], w[4 * N], w[5 * N], w[6 * N], w[7 * N]);
}
#define FETCH_FLOATS(P, s, k0, kq, RAW, LOAD)                                                 \
  {                                                                                           \
    const int k_ = (k0) + (kq);                                                               \
    rb[P][s] = bcol[s] >= 0 && k_ < K ? LOAD(W + (long)bcol[s] * row_bytes, k_) : (RAW)0;      \
    rs[P][s] = 1.0f;                                                                          \
    ro[P][s] = 0.0f;                                                                          \
  }
// The norm's inverse RMS of the tile's rows into rinv (ss: each item's sums of squares of
// its AC chunks, chunk e = tid + 256 s of rows e / 4), through `red` (BM * 4 floats). Every
// item must reach it.
#define NORM_RINV(red, rinv, ss, AC, BM)                                                      \
  if (NW) {                                                                                   \
    for (int s = 0; s < AC; ++s) red[tid + GEMM_WG * s] = ss[s];                              \
    barrier(CLK_LOCAL_MEM_FENCE);                                                             \
    for (int r = tid; r < BM; r += GEMM_WG)                                                   \
      rinv[r] = 1.0f / sqrt((red[4 * r] + red[4 * r + 1] + red[4 * r + 2] + red[4 * r + 3]) / K + eps); \
    barrier(CLK_LOCAL_MEM_FENCE);                                                             \
  }

// A float4 into x[i..i+3] (registers, once the loops are unrolled).
#define SPLAT4(dst, at, v)    \
  {                           \
    const float4 v_ = v;      \
    dst[at] = v_.x;           \
    dst[(at) + 1] = v_.y;     \
    dst[(at) + 2] = v_.z;     \
    dst[(at) + 3] = v_.w;     \
  }

// A float2 into x[i], x[i+1].
#define SPLAT2(dst, at, v)    \
  {                           \
    const float2 v_ = v;      \
    dst[at] = v_.x;           \
    dst[(at) + 1] = v_.y;     \
  }

// One slice's global reads into register set P, from k0: chunk s of A (AW floats of type
// AT at row e / 4, e = tid + 256 s) and code chunk s (FETCH_CODES, BKS chunks a column).
// FETCH: FETCH_CODES, or FETCH_HALVES for weights dequantized once.
#define GEMM_FETCH(P, k0, BM, AT, AW, BCH, BKS, RAW, LOAD, FETCH)                              \
  {                                                                                           \
    _Pragma("unroll") for (int s = 0; s < BM / 64; ++s) {                                     \
      const int e = tid + GEMM_WG * s, m = m0 + (e >> 2), k = (k0) + (e & 3) * AW;             \
      ra[P][s] = m < M && k < K ? *(__global const AT*)(A + (long)m * K + k) : (AT)0.0f;      \
    }                                                                                         \
    _Pragma("unroll") for (int s = 0; s < BCH; ++s)                                           \
      FETCH(P, s, k0, ((tid + GEMM_WG * s) % BKS) * 8, RAW, LOAD)                             \
  }

// The RoPE epilogue (matmul.cpp's kRope rows): a merged q/k/v projection's columns (N0 of
// q, N1 of k, the rest v; heads of D, every dim rotary) rotated where rotary (the cos and
// sin as rope_kv_f32 reads them: tables through the strides rcs and rss of q's [B, H, S,
// D], or positions) and stored where tl.RoPE over in-place caches puts them: q [B, H, seq,
// D] into QR, the k and v rows into their caches after kv_rows[b] tokens. Row m is token
// (m / seq, m % seq). The tiles pair columns as for a GLU: pair p of N / 2 is column
// p / R * 2R + p % R and, up, its partner R on (R = D / 2), so that an item holds both
// dims of a rotated pair. rope_kv_f32's launch is then gone: a prefill layer launches as
// many kernels as a decode layer.
inline int rope_column(int p, int up, int N, int R) { return p < N / 2 ? p / R * 2 * R + p % R + (up ? R : 0) : -1; }
// A tile's weight column behind local column lc: tile_column's, or rope_column's where R.
inline int paired_column(int c0, int lc, int oc, int up, int N, int glu, int R) {
  return R ? rope_column(c0 + oc, up, N, R) : tile_column(c0, lc, oc, up, N, glu);
}
#define ROPE_EPI_ARGS                                                                         \
  , __global float *QR, __global const float *cosv, __global const float *sinv, int8 rcs, int8 rss, int seq, int D, \
      __global KV_T *kc, int ksb, int ksh, int kst, __global KV_T *vc, int vsb, int vsh, int vst, \
      __global const int *kv_rows, ROPE_TRIG_ARGS
// Column n's (a pair's first, of q or k) and its partner's sums lo and hi of row m, rotated.
inline float2 rope_pair_rotate(int m, int n, float lo, float hi, __global const float* cosv,
                               __global const float* sinv, int8 rcs, int8 rss, int seq, int D, RopeTrig tg) {
  const int R = D / 2, d = n % D, b = m / seq, s = m % seq;
  const int co = b * rcs.s4 + s * rcs.s6, so = b * rss.s4 + s * rss.s6;
  const float2 t0 = rope_trig(cosv, sinv, co + d * rcs.s7, so + d * rss.s7, d, D, tg);
  const float2 t1 = tg.positions ? t0 : rope_trig(cosv, sinv, co + (d + R) * rcs.s7, so + (d + R) * rss.s7, d + R, D, tg);
  return (float2)(lo * t0.x - hi * t0.y, hi * t1.x + lo * t1.y);
}
// Column n's (a pair's first) and its partner's sums lo and hi of row m, bias added,
// rotated where q or k; q's stored into QR. The pair's values (k's and v's to store).
inline float2 rope_pair_q(int m, int n, float lo, float hi, int Hq, int Hk, __global float* QR,
                          __global const float* cosv, __global const float* sinv, int8 rcs, int8 rss, int seq, int D,
                          RopeTrig tg) {
  const float2 v = n / D < Hq + Hk ? rope_pair_rotate(m, n, lo, hi, cosv, sinv, rcs, rss, seq, D, tg) : (float2)(lo, hi);
  if (n / D < Hq) {
    const long at = (((long)(m / seq) * Hq + n / D) * seq + m % seq) * D + n % D;
    QR[at] = v.x;
    QR[at + D / 2] = v.y;
  }
  return v;
}
// Where column n (of k or v: its head at least Hq) of row m goes in its cache (k's or v's
// strides; kv[b]: the tokens already there in batch row b, each row its own sequence).
#define ROPE_CACHE_AT(m, n, kv)                                                               \
  ((n) / D < Hq + Hk                                                                          \
       ? (long)((m) / seq) * ksb + (long)((n) / D - Hq) * ksh + (long)((kv)[(m) / seq] + (m) % seq) * kst + (n) % D \
       : (long)((m) / seq) * vsb + (long)((n) / D - Hq - Hk) * vsh + (long)((kv)[(m) / seq] + (m) % seq) * vst + (n) % D)
#ifndef TL_KV_Q8  // (8-bit caches take whole blocks of 32: ROPE_Q8_TILE below)
// Column n's (a pair's first) and its partner's sums lo and hi of row m, bias added, stored.
inline void rope_pair_store(int m, int n, float lo, float hi, int N0, int N1, __global float* QR,
                            __global const float* cosv, __global const float* sinv, int8 rcs, int8 rss, int seq,
                            int D, __global KV_T* kc, int ksb, int ksh, int kst, __global KV_T* vc, int vsb, int vsh,
                            int vst, __global const int* kv_rows, RopeTrig tg) {
  const int Hq = N0 / D, Hk = N1 / D;
  const float2 y = rope_pair_q(m, n, lo, hi, Hq, Hk, QR, cosv, sinv, rcs, rss, seq, D, tg);
  if (n / D < Hq) return;
  __global KV_T* cache = n / D < Hq + Hk ? kc : vc;
  const long at = ROPE_CACHE_AT(m, n, kv_rows);
  KV_ST(y.x, at, cache);
  KV_ST(y.y, at + D / 2, cache);
}
#endif
// Pair p's sums lo and hi of row m stored (the RoPE rows' ROPE_PAIR; the others' is NO_PAIR).
#define ROPE_PAIR(m, p, lo, hi)                                                               \
  {                                                                                           \
    const int n_ = rope_column(p, 0, N, D / 2);                                               \
    if (n_ >= 0)                                                                              \
      rope_pair_store(m, n_, (lo) + BIAS(n_), (hi) + BIAS(n_ + D / 2), N0, N1, QR, cosv, sinv, rcs, rss, seq, D, kc, \
                      ksb, ksh, kst, vc, vsb, vsh, vst, kv_rows, ROPE_TRIG);                  \
  }
#define NO_PAIR(m, p, lo, hi)
#ifdef TL_KV_Q8
// 8-bit caches (the portable tiles' RoPE rows there, heads a multiple of 64): a block of 32
// dims of a k or v row is 32 consecutive pairs' firsts (or seconds), held by 32 / TH
// consecutive items of a row of items; each row of the tile in turn, the items put their
// values' largest magnitudes in local memory (red: 512 floats), then each takes its
// block's, and writes its codes, the block's first item its scale, as kv_q8_store does.
// q's pairs go to QR rotated, as ROPE_PAIR's. Every item reaches each barrier.
#define ROPE_Q8_TILE(BM, BN)                                                                  \
  {                                                                                           \
    const int R = D / 2, Hq = N0 / D, Hk = N1 / D, G8 = 32 / TH;                              \
    _Pragma("unroll") for (int i = 0; i < TM; ++i) {                                         \
      const int row = ty * TM + i, m = m0 + row;                                              \
      const float sc = NW ? rinv[row] : 1.0f;                                                 \
      float y[2][BN / 32], ml = 0.0f, mh = 0.0f;                                              \
      int n = -1;                                                                             \
      _Pragma("unroll") for (int j = 0; j < TH; ++j) {                                       \
        const int n_ = rope_column(c0 + tx * TH + j, 0, N, R);                                \
        if (j == 0) n = n_;                                                                   \
        y[0][j] = y[1][j] = 0.0f;                                                             \
        if (n_ < 0 || m >= M) continue;                                                       \
        const float2 v = rope_pair_q(m, n_, acc[i][j] * sc + BIAS(n_), acc[i][TH + j] * sc + BIAS(n_ + R), Hq, Hk, \
                                     QR, cosv, sinv, rcs, rss, seq, D, ROPE_TRIG);            \
        if (n_ / D >= Hq) {                                                                   \
          y[0][j] = v.x, y[1][j] = v.y;                                                       \
          ml = fmax(ml, fabs(v.x)), mh = fmax(mh, fabs(v.y));                                 \
        }                                                                                     \
      }                                                                                       \
      barrier(CLK_LOCAL_MEM_FENCE);                                                           \
      red[2 * tid] = ml, red[2 * tid + 1] = mh;                                               \
      barrier(CLK_LOCAL_MEM_FENCE);                                                           \
      const int head = n / D, first = ty * 16 + tx / G8 * G8;                                 \
      if (n < 0 || m >= M || head < Hq) continue;                                             \
      __global KV_T* cache = head < Hq + Hk ? kc : vc;                                        \
      const long at = ROPE_CACHE_AT(m, n, kv_rows);                                           \
      _Pragma("unroll") for (int h = 0; h < 2; ++h) {                                        \
        float amax = 0.0f;                                                                    \
        for (int u = 0; u < G8; ++u) amax = fmax(amax, red[2 * (first + u) + h]);             \
        _Pragma("unroll") for (int j = 0; j < TH; ++j) kv_q8_put(y[h][j], amax, at + h * R + j, cache); \
      }                                                                                       \
    }                                                                                         \
  }
#define ROPE_Q8_TAIL(BM, BN)                                                                  \
  {                                                                                           \
    barrier(CLK_LOCAL_MEM_FENCE); /* (red: the last slice's products may still read it) */    \
    ROPE_Q8_TILE(BM, BN)                                                                      \
  }
#endif
#define NO_TAIL(BM, BN)
// The tensor-core tiles' outputs (MMA_SLICE's layout): BODY(BM, BN, X) for each of an
// item's rows in the launch, with `row` (local), m and sc = SC (an expression of `row`).
// (Bodies are macros by name: NVIDIA's OpenCL C takes no variadic macros.)
#define MMA_ROWS(BM, BN, SC, BODY, X)                                                         \
  MMA_UNROLL for (int i = 0; i < MT; ++i)                                                     \
    MMA_UNROLL for (int h = 0; h < 2; ++h) {                                                  \
      const int row = wm * (BM / 2) + i * 16 + g + 8 * h, m = m0 + row;                       \
      if (m >= M) continue;                                                                   \
      const float sc = SC;                                                                    \
      BODY(BM, BN, X)                                                                         \
    }
// ... paired: PAIR(BM, BN) for each of an item's pairs, with lp (the tile's pair) and its
// sums lo and hi (times sc).
#define MMA_PAIRS(BM, BN, SC, PAIR) MMA_ROWS(BM, BN, SC, MMA_PAIR_LOOP, PAIR)
#define MMA_PAIR_LOOP(BM, BN, PAIR)                                                           \
  MMA_UNROLL for (int j = 0; j < NT / 2; ++j)                                                 \
    MMA_UNROLL for (int x = 0; x < 2; ++x) {                                                  \
      const int lp = MMA_BROW_P(1, wn, j, NT, BN) + 2 * t + x;                                \
      float lo = acc[i][j][2 * h + x] * sc, hi = acc[i][j + NT / 2][2 * h + x] * sc;          \
      PAIR(BM, BN)                                                                            \
    }
#ifndef TL_KV_Q8
// ... stored through ROPE_PAIR.
#define MMA_ROPE_STORE(BM, BN, SC) MMA_PAIRS(BM, BN, SC, MMA_ROPE_PAIR)
#define MMA_ROPE_PAIR(BM, BN) ROPE_PAIR(m, c0 + lp, lo, hi)
#else
// ... into 8-bit caches (heads a multiple of 64): a block's 32 pairs lie across warps, so
// each item first takes its k and v values' magnitudes into their (row, block)'s largest
// in local memory by atomic_max on their bits (non-negative floats order as their bits),
// keeping the values in acc; then, past a barrier, writes its codes, the item of a block's
// first pair its scale (kv_q8_store's rounding). q's pairs go to QR rotated at once.
#define MMA_ROPE_STORE(BM, BN, SC)                                                            \
  {                                                                                           \
    const int R = D / 2, Hq = N0 / D, Hk = N1 / D;                                            \
    __local uint* bmax = (__local uint*)As; /* [BM][BN / 64 blocks][first, second] */         \
    barrier(CLK_LOCAL_MEM_FENCE); /* (the last products may still read As) */                 \
    for (int e = tid; e < BM * BN / 32; e += GEMM_WG) bmax[e] = 0;                            \
    barrier(CLK_LOCAL_MEM_FENCE);                                                             \
    MMA_PAIRS(BM, BN, SC, MMA_Q8_MAX)                                                         \
    barrier(CLK_LOCAL_MEM_FENCE);                                                             \
    MMA_PAIRS(BM, BN, 1.0f, MMA_Q8_CODES)                                                     \
  }
// The pair's block's largest magnitudes (its firsts', then its seconds').
#define MMA_Q8_BLOCK(BN) (bmax + (row * (BN / 64) + lp / 32) * 2)
#define MMA_Q8_MAX(BM, BN)                                                                    \
  {                                                                                           \
    const int n = rope_column(c0 + lp, 0, N, R);                                              \
    if (n < 0) continue;                                                                      \
    const float2 v = rope_pair_q(m, n, lo + BIAS(n), hi + BIAS(n + R), Hq, Hk, QR, cosv, sinv, rcs, rss, seq, D, ROPE_TRIG); \
    if (n / D < Hq) continue;                                                                 \
    acc[i][j][2 * h + x] = v.x, acc[i][j + NT / 2][2 * h + x] = v.y;                          \
    atomic_max(MMA_Q8_BLOCK(BN), as_uint(fabs(v.x)));                                         \
    atomic_max(MMA_Q8_BLOCK(BN) + 1, as_uint(fabs(v.y)));                                     \
  }
#define MMA_Q8_CODES(BM, BN)                                                                  \
  {                                                                                           \
    const int n = rope_column(c0 + lp, 0, N, R);                                              \
    if (n < 0 || n / D < Hq) continue;                                                        \
    __global KV_T* cache = n / D < Hq + Hk ? kc : vc;                                         \
    const long at = ROPE_CACHE_AT(m, n, kv_rows);                                             \
    kv_q8_put(lo, as_float(MMA_Q8_BLOCK(BN)[0]), at, cache);                                  \
    kv_q8_put(hi, as_float(MMA_Q8_BLOCK(BN)[1]), at + R, cache);                              \
  }
#endif

#if TL_MAX_WG >= GEMM_WG
// fp32: 16 x 16 items, each TM x TN outputs: rows ty * TM + i, and columns in two halves
// of TN / 2, tx * TN / 2 + j and BN / 2 + tx * TN / 2 + j (with a GLU the tile's gates,
// then their ups: an item's gate and its up in the same registers), so that a warp's
// reads of a weight row are consecutive, free of bank conflicts (8 consecutive columns an
// item read two ways at once). Slices of 16 k, GEMM_BUFS of them in local memory: with
// two, a slice is stored while the last one's products may still run, one barrier a
// slice (where the device's local memory holds them).
#define GEMM_BUFS (TL_LOCAL_MEM >= 2 * 16 * (2 * 128 + 8) * 4 + 512 ? 2 : 1)
// EXTRA_ARGS, ROPE_HALF, PAIR and TAIL: the plain rows' (none, 0, NO_PAIR, NO_TAIL) or the
// RoPE epilogue's (ROPE_EPI_ARGS, D / 2, then ROPE_PAIR, NO_TAIL or over 8-bit caches
// NO_PAIR, ROPE_Q8_TAIL).
#define QGEMM(NAME, BM, BN, RAW, LOAD, LEVELS8, FETCH, EXTRA_ARGS, ROPE_HALF, PAIR, TAIL)     \
  __kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1))) void NAME(GEMM_ARGS EXTRA_ARGS) { \
    __local float As[GEMM_BUFS][16][BM + 4] __attribute__((aligned(16)));                     \
    __local float Bs[GEMM_BUFS][16][BN + 4] __attribute__((aligned(16)));                     \
    __local float rinv[BM];                                                                   \
    const int tid = get_local_id(0), tx = tid % 16, ty = tid / 16;                            \
    const int rope_half = ROPE_HALF, paired = glu || rope_half;                               \
    const int m0 = get_group_id(1) * BM, c0 = get_group_id(0) * (paired ? BN / 2 : BN);       \
    const int TM = BM / 16, TH = BN / 32;                                                     \
    /* A: chunks of 4 floats, e = tid + 256 s at row e / 4; codes: 8 at column e / 2 */       \
    float4 ra[1][BM / 64];                                                                    \
    float ss[BM / 64];                                                                        \
    RAW rb[1][(BN + 127) / 128];                                                              \
    float rs[1][(BN + 127) / 128], ro[1][(BN + 127) / 128];                                   \
    int bcol[(BN + 127) / 128];                                                               \
    _Pragma("unroll") for (int s = 0; s < (BN + 127) / 128; ++s) {                           \
      const int e = tid + GEMM_WG * s, lc = e >> 1;                                           \
      bcol[s] = e < BN * 2 ? paired_column(c0, lc, lc % (BN / 2), lc >= BN / 2, N, glu, rope_half) : -1; \
    }                                                                                         \
    _Pragma("unroll") for (int s = 0; s < BM / 64; ++s) ss[s] = 0.0f;                        \
    float acc[BM / 16][BN / 16];                                                              \
    _Pragma("unroll") for (int i = 0; i < TM; ++i)                                           \
      _Pragma("unroll") for (int j = 0; j < 2 * TH; ++j) acc[i][j] = 0.0f;                   \
    GEMM_FETCH(0, 0, BM, float4, 4, (BN + 127) / 128, 2, RAW, LOAD, FETCH)                   \
    int p = 0;                                                                                \
    for (int k0 = 0; k0 < K; k0 += 16, p = (p + 1) % GEMM_BUFS) {                             \
      _Pragma("unroll") for (int s = 0; s < BM / 64; ++s) {                                  \
        const int e = tid + GEMM_WG * s, row = e >> 2, kq = (e & 3) * 4;                      \
        float4 v = ra[0][s];                                                                  \
        if (NW) {                                                                             \
          ss[s] += dot(v, v);                                                                 \
          if (k0 + kq < K) v *= vload4(0, NW + k0 + kq);                                      \
        }                                                                                     \
        As[p][kq][row] = v.x;                                                                 \
        As[p][kq + 1][row] = v.y;                                                             \
        As[p][kq + 2][row] = v.z;                                                             \
        As[p][kq + 3][row] = v.w;                                                             \
      }                                                                                       \
      _Pragma("unroll") for (int s = 0; s < (BN + 127) / 128; ++s) {                         \
        const int e = tid + GEMM_WG * s, lc = e >> 1, kq = (e & 1) * 8;                       \
        if (e < BN * 2) {                                                                     \
          const float8 w = fma(LEVELS8(rb[0][s]), (float8)rs[0][s], (float8)ro[0][s]);        \
          Bs[p][kq][lc] = w.s0;                                                               \
          Bs[p][kq + 1][lc] = w.s1;                                                           \
          Bs[p][kq + 2][lc] = w.s2;                                                           \
          Bs[p][kq + 3][lc] = w.s3;                                                           \
          Bs[p][kq + 4][lc] = w.s4;                                                           \
          Bs[p][kq + 5][lc] = w.s5;                                                           \
          Bs[p][kq + 6][lc] = w.s6;                                                           \
          Bs[p][kq + 7][lc] = w.s7;                                                           \
        }                                                                                     \
      }                                                                                       \
      barrier(CLK_LOCAL_MEM_FENCE);                                                           \
      if (k0 + 16 < K) GEMM_FETCH(0, k0 + 16, BM, float4, 4, (BN + 127) / 128, 2, RAW, LOAD, FETCH) \
      _Pragma("unroll") for (int kk = 0; kk < 16; ++kk) {                                    \
        float a[BM / 16], b[BN / 16];                                                         \
        _Pragma("unroll") for (int i = 0; i < TM; i += 4) SPLAT4(a, i, *(__local float4*)&As[p][kk][ty * TM + i]) \
        if (TH % 4 == 0) {                                                                    \
          _Pragma("unroll") for (int j = 0; j < TH; j += 4) {                                \
            SPLAT4(b, j, *(__local float4*)&Bs[p][kk][tx * TH + j])                           \
            SPLAT4(b, TH + j, *(__local float4*)&Bs[p][kk][BN / 2 + tx * TH + j])             \
          }                                                                                   \
        } else { /* BN = 64: two columns a half */                                            \
          SPLAT2(b, 0, *(__local float2*)&Bs[p][kk][tx * 2])                                  \
          SPLAT2(b, 2, *(__local float2*)&Bs[p][kk][BN / 2 + tx * 2])                         \
        }                                                                                     \
        _Pragma("unroll") for (int i = 0; i < TM; ++i)                                       \
          _Pragma("unroll") for (int j = 0; j < 2 * TH; ++j) acc[i][j] = fma(a[i], b[j], acc[i][j]); \
      }                                                                                       \
      if (GEMM_BUFS == 1) barrier(CLK_LOCAL_MEM_FENCE);                                       \
    }                                                                                         \
    /* the buffer the last slice did not read (every item is past its barrier) */             \
    __local float* red = &As[p][0][0];                                                        \
    NORM_RINV(red, rinv, ss, BM / 64, BM)                                                     \
    _Pragma("unroll") for (int i = 0; i < TM; ++i) {                                         \
      const int row = ty * TM + i, m = m0 + row;                                              \
      if (m >= M) break;                                                                      \
      const float sc = NW ? rinv[row] : 1.0f;                                                 \
      _Pragma("unroll") for (int j = 0; j < TH; ++j) {                                       \
        const int n = c0 + tx * TH + j;                                                       \
        if (rope_half) {                                                                      \
          PAIR(m, n, acc[i][j] * sc, acc[i][TH + j] * sc)                                     \
        } else if (glu) {                                                                     \
          if (n < N / 2) STORE_GLU(m, n, acc[i][j] * sc, acc[i][TH + j] * sc, N / 2);         \
        } else {                                                                              \
          if (n < N) STORE(m, n, acc[i][j] * sc);                                             \
          if (n + BN / 2 < N) STORE(m, n + BN / 2, acc[i][TH + j] * sc);                      \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
    TAIL(BM, BN)                                                                              \
  }

// The forms of W the tiles read, X(prefix of the kernels' names, of the form's macros, the
// fetch): the codes (qgemm*_<scheme>) and tl.MatMul's float weights (gemm*_f32).
#define W_FORMS(X)                                                                            \
  X(q, e0m4, E0M4, FETCH_CODES) X(q, int4, INT4, FETCH_CODES) X(q, q8, Q8, FETCH_CODES)       \
  X(q, q3h, Q3H, FETCH_CODES) X(, f32, F32, FETCH_FLOATS)
#define QGEMM_PLAIN(Q, s, F, FETCH)                                                           \
  QGEMM(Q##gemm_##s, 128, 128, F##_RAW, F##_LOAD, F##_LEVELS8, FETCH, , 0, NO_PAIR, NO_TAIL)  \
  QGEMM(Q##gemm64_##s, 64, 64, F##_RAW, F##_LOAD, F##_LEVELS8, FETCH, , 0, NO_PAIR, NO_TAIL)
W_FORMS(QGEMM_PLAIN)
#ifndef TL_KV_Q8
#define ROPE_PAIR_ ROPE_PAIR
#define ROPE_TAIL_ NO_TAIL
#else
#define ROPE_PAIR_ NO_PAIR
#define ROPE_TAIL_ ROPE_Q8_TAIL
#endif
#define QGEMM_ROPE(Q, s, F, FETCH)                                                            \
  QGEMM(Q##gemm_rope_##s, 128, 128, F##_RAW, F##_LOAD, F##_LEVELS8, FETCH, ROPE_EPI_ARGS, D / 2, ROPE_PAIR_, ROPE_TAIL_) \
  QGEMM(Q##gemm64_rope_##s, 64, 64, F##_RAW, F##_LOAD, F##_LEVELS8, FETCH, ROPE_EPI_ARGS, D / 2, ROPE_PAIR_, ROPE_TAIL_)
W_FORMS(QGEMM_ROPE)

#ifdef TL_MMA
// Tensor cores (mma.cl's MMA_16816): 8 warps, 2 (rows) x 4 (columns), each BM / 2 x BN / 4
// outputs in BM / 32 x BN / 32 tiles of 16 x 8; slices of 32 k. A row of a slice is 32
// halves in local memory, 4 uint4 of 8. A stage is two slices (64 k), read from global
// memory into two register sets a stage before it is stored: the reads' latency hides
// behind two slices' products (one slice's was too short on the H200). The k order inside a slice is free as long as A
// and the weights share it, so thread t's fragments are the halves 8t..8t+7 of their rows:
// one uint4 each (registers .x.y for the first k16 step, .z.w for the second), and a phase
// of 8 threads reads two rows, 32 banks, no conflict.
// The local row of the weights' slice behind warp column wn's n-tile j: with a GLU (or
// any pairing P of a column with another: the RoPE epilogue's), gate tiles first (their
// ups BN / 2 rows on), so an item holds a gate and its up alike.
#define MMA_BROW_P(P, wn, j, NT, BN) \
  ((P) ? ((j) < NT / 2 ? 0 : BN / 2) + (wn) * (BN / 8) + (j) % (NT / 2) * 8 : (wn) * (BN / 4) + (j) * 8)
#define MMA_BROW(wn, j, NT, BN) MMA_BROW_P(glu, wn, j, NT, BN)

// Chunk s of the weights' slice in register set P as 8 halves.
#define MMA_BCODES(P, s, LEVELS8) half8_bits(fma(LEVELS8(rb[P][s]), (float8)rs[P][s], (float8)ro[P][s]))
// The slice from k0 in register set P (GEMM_FETCH's) into buffer P as halves, the norm's
// sums of squares taken and its scale applied on the way.
#define MMA_STAGE(P, k0, BM, BN, LEVELS8)                                              \
  {                                                                                           \
    MMA_UNROLL for (int s = 0; s < BM / 64; ++s) {                                            \
      const int e = tid + GEMM_WG * s, kq = (e & 3) * 8;                                      \
      float8 v = ra[P][s];                                                                    \
      if (NW) {                                                                               \
        ss[s] += dot(v.lo, v.lo) + dot(v.hi, v.hi);                                           \
        if ((k0) + kq < K) v *= vload8(0, NW + (k0) + kq);                                    \
      }                                                                                       \
      As[P][e] = half8_bits(v);                                                               \
    }                                                                                         \
    MMA_UNROLL for (int s = 0; s < BN / 64; ++s)                                              \
      Bs[P][tid + GEMM_WG * s] = MMA_BCODES(P, s, LEVELS8);                                        \
  }
// The products of the slice in buffer P.
#define MMA_SLICE(P, BM, BN)                                                                  \
  {                                                                                           \
    uint4 bf[BN / 32];                                                                        \
    MMA_UNROLL for (int j = 0; j < NT; ++j) bf[j] = Bs[P][(MMA_BROW_P(paired, wn, j, NT, BN) + g) * 4 + t]; \
    MMA_UNROLL for (int i = 0; i < MT; ++i) {                                                 \
      const int r0 = wm * (BM / 2) + i * 16 + g;                                              \
      const uint4 a0 = As[P][r0 * 4 + t], a1 = As[P][(r0 + 8) * 4 + t];                       \
      MMA_UNROLL for (int j = 0; j < NT; ++j) {                                               \
        MMA_16816(acc[i][j], a0.x, a1.x, a0.y, a1.y, bf[j].x, bf[j].y);                       \
        MMA_16816(acc[i][j], a0.z, a1.z, a0.w, a1.w, bf[j].z, bf[j].w);                       \
      }                                                                                       \
    }                                                                                         \
  }

// A tile's output column n of row m, sum y: through STORE or, with a GLU, where y is a
// gate's (gate), STORE_GLU of y and its up's sum u.
#define TILE_OUT(m, n, gate, y, u)                                                            \
  {                                                                                           \
    const int n_ = (n);                                                                       \
    if (glu) {                                                                                \
      if ((gate) && n_ < N / 2) STORE_GLU(m, n_, y, u, N / 2);                                \
    } else if (n_ < N) {                                                                      \
      STORE(m, n_, y);                                                                        \
    }                                                                                         \
  }
// The tile's outputs from acc (MMA_ROWS), with a GLU gate tile j and its up tile j + NT / 2.
#define MMA_STORE(BM, BN, SC) MMA_ROWS(BM, BN, SC, MMA_STORE_ROW, 0)
#define MMA_STORE_ROW(BM, BN, X)                                                              \
  MMA_UNROLL for (int j = 0; j < NT; ++j) /* fixed bounds: acc stays in registers */          \
    MMA_UNROLL for (int x = 0; x < 2; ++x)                                                    \
      TILE_OUT(m, c0 + MMA_BROW(wn, j, NT, BN) + 2 * t + x, j < NT / 2, acc[i][j][2 * h + x] * sc, \
               acc[i][(j + NT / 2) % NT][2 * h + x] * sc)

// Split K (matmul.cpp's QCase::kSlice): the launch's third dimension cuts K into slices of
// kslice (a multiple of 64), a work-group each, where the tiles alone would leave compute
// units idle. With several, each writes its raw sums and its rows' sums of squares to KP
// (tile, slice, item-major), and the tile's last work-group to finish (counted in KC,
// which it sets back to 0 for the next launch) adds them up in slice order, so that the
// result does not depend on which one finished last, then stores the tile as usual.
#define KSPLIT_ARGS int kslice, __global float *KP, __global int *KC
// The tile's sums over the slices (see KSPLIT_ARGS) into acc and ss, or a return from
// every work-group but the tile's last.
#define KSPLIT_GATHER(BM)                                                                     \
  if (get_num_groups(2) > 1) {                                                                \
    const int slices = get_num_groups(2), per = MT * NT * 4 + BM / 64;                        \
    const long tile = (long)get_group_id(1) * get_num_groups(0) + get_group_id(0);            \
    __global float* kp = KP + (tile * slices + get_group_id(2)) * per * GEMM_WG + tid;        \
    MMA_UNROLL for (int i = 0; i < MT; ++i)                                                   \
      MMA_UNROLL for (int j = 0; j < NT; ++j)                                                 \
        MMA_UNROLL for (int x = 0; x < 4; ++x) kp[((i * NT + j) * 4 + x) * GEMM_WG] = acc[i][j][x];        \
    MMA_UNROLL for (int s = 0; s < BM / 64; ++s) kp[(MT * NT * 4 + s) * GEMM_WG] = ss[s];        \
    if (!last_to_finish(KC + tile, slices, tid, &klast)) return;                              \
    MMA_UNROLL for (int i = 0; i < MT; ++i)                                                   \
      MMA_UNROLL for (int j = 0; j < NT; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;        \
    MMA_UNROLL for (int s = 0; s < BM / 64; ++s) ss[s] = 0.0f;                                \
    for (int z = 0; z < slices; ++z) {                                                        \
      __global volatile const float* kz = KP + (tile * slices + z) * per * GEMM_WG + tid;     \
      MMA_UNROLL for (int i = 0; i < MT; ++i)                                                 \
        MMA_UNROLL for (int j = 0; j < NT; ++j)                                               \
          MMA_UNROLL for (int x = 0; x < 4; ++x) acc[i][j][x] += kz[((i * NT + j) * 4 + x) * GEMM_WG];        \
      MMA_UNROLL for (int s = 0; s < BM / 64; ++s) ss[s] += kz[(MT * NT * 4 + s) * GEMM_WG];        \
    }                                                                                         \
  }

// EXTRA_ARGS, ROPE_HALF and EPILOGUE: the plain rows' (none, 0, MMA_STORE) or the RoPE
// epilogue's (ROPE_EPI_ARGS, D / 2, MMA_ROPE_STORE).
#define QGEMM_MMA(NAME, BM, BN, RAW, LOAD, LEVELS8, FETCH, EXTRA_ARGS, ROPE_HALF, EPILOGUE)    \
  __kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1))) void NAME(GEMM_ARGS, KSPLIT_ARGS EXTRA_ARGS) { \
    __local uint4 As[2][BM * 4], Bs[2][BN * 4];                                               \
    __local float rinv[BM];                                                                   \
    __local int klast;                                                                        \
    MMA_EMU_DECL                                                                              \
    const int tid = get_local_id(0), lane = tid & 31, warp = tid >> 5;                        \
    const int wm = warp >> 2, wn = warp & 3, g = lane >> 2, t = lane & 3;                     \
    const int rope_half = ROPE_HALF, paired = glu || rope_half;                               \
    const int m0 = get_group_id(1) * BM, c0 = get_group_id(0) * (paired ? BN / 2 : BN);       \
    const int MT = BM / 32, NT = BN / 32;                                                     \
    /* A: chunks of 8 floats, e = tid + 256 s at row e / 4; codes: 8 at local row e / 4 */    \
    float8 ra[2][BM / 64];                                                                    \
    float ss[BM / 64];                                                                        \
    RAW rb[2][BN / 64];                                                                       \
    float rs[2][BN / 64], ro[2][BN / 64];                                                     \
    int bcol[BN / 64];                                                                        \
    MMA_UNROLL for (int s = 0; s < BN / 64; ++s) {                                                              \
      const int lc = (tid + GEMM_WG * s) >> 2;                                                \
      bcol[s] = paired_column(c0, lc, lc % (BN / 2), lc >= BN / 2, N, glu, rope_half);        \
    }                                                                                         \
    MMA_UNROLL for (int s = 0; s < BM / 64; ++s) ss[s] = 0.0f;                                                  \
    float acc[BM / 32][BN / 32][4];                                                           \
    MMA_UNROLL for (int i = 0; i < MT; ++i)                                                                     \
      MMA_UNROLL for (int j = 0; j < NT; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;        \
    const int kb = get_group_id(2) * kslice, ke = min(K, kb + kslice);                        \
    GEMM_FETCH(0, kb, BM, float8, 8, BN / 64, 4, RAW, LOAD, FETCH)                               \
    if (kb + 32 < ke) GEMM_FETCH(1, kb + 32, BM, float8, 8, BN / 64, 4, RAW, LOAD, FETCH)        \
    for (int k0 = kb; k0 < ke; k0 += 64) {                                                    \
      const int two = k0 + 32 < ke;                                                           \
      MMA_STAGE(0, k0, BM, BN, LEVELS8)                                                \
      if (two) MMA_STAGE(1, k0 + 32, BM, BN, LEVELS8)                                  \
      barrier(CLK_LOCAL_MEM_FENCE);                                                           \
      if (k0 + 64 < ke) GEMM_FETCH(0, k0 + 64, BM, float8, 8, BN / 64, 4, RAW, LOAD, FETCH)          \
      if (k0 + 96 < ke) GEMM_FETCH(1, k0 + 96, BM, float8, 8, BN / 64, 4, RAW, LOAD, FETCH)          \
      MMA_SLICE(0, BM, BN)                                                                    \
      if (two) MMA_SLICE(1, BM, BN)                                                           \
      barrier(CLK_LOCAL_MEM_FENCE);                                                           \
    }                                                                                         \
    KSPLIT_GATHER(BM)                                                                         \
    __local float* red = (__local float*)As[0];                                               \
    NORM_RINV(red, rinv, ss, BM / 64, BM)                                                     \
    EPILOGUE(BM, BN, NW ? rinv[row] : 1.0f)                                                   \
  }

// (float weights rounded to fp16 as the tiles stage them: tl-run --gemm f16 alone, where
// auto keeps an fp32 model's products in fp32)
#define QGEMM_MMA_PLAIN(Q, s, F, FETCH)                                                       \
  QGEMM_MMA(Q##gemm_mma_##s, 128, 128, F##_RAW, F##_LOAD, F##_LEVELS8, FETCH, , 0, MMA_STORE) \
  QGEMM_MMA(Q##gemm64_mma_##s, 64, 64, F##_RAW, F##_LOAD, F##_LEVELS8, FETCH, , 0, MMA_STORE)
W_FORMS(QGEMM_MMA_PLAIN)
// ... their stores doing the RoPE's work (the codes the int8 rows do not take: q3h, K or
// the group not multiples of 128, --gemm f16).
#define QGEMM_MMA_ROPE(Q, s, F, FETCH)                                                        \
  QGEMM_MMA(Q##gemm_mma_rope_##s, 128, 128, F##_RAW, F##_LOAD, F##_LEVELS8, FETCH, ROPE_EPI_ARGS, D / 2, MMA_ROPE_STORE) \
  QGEMM_MMA(Q##gemm64_mma_rope_##s, 64, 64, F##_RAW, F##_LOAD, F##_LEVELS8, FETCH, ROPE_EPI_ARGS, D / 2, MMA_ROPE_STORE)
W_FORMS(QGEMM_MMA_ROPE)
// Many rows (matmul.cpp's qgemm_mma_f16 row): both operands in fp16 first, in one launch
// before the tiles (prep_f16_<scheme>): the weights dequantized [N][K], A's rows normed
// (the node's RMSNorm) [M][K]. The 128 x 128 tiles then copy slices of 32 k of both into
// local memory with cp.async, F16_STAGES slices in flight and no registers staged, and run
// products in MMA_SLICE's layout in k-step order (the two k16 steps apart, so that
// consecutive mma are independent). Of GEMM_ARGS it reads A, W (as halves), C, the splits,
// M, N, K and glu: S, O, G, row_bytes, groups and NW were prep_f16's. A's rows staged
// through registers as fp32 ran at half the speed (scripts/gemm_lab.c; docs/tl-bench.md).
// Local memory: 48 KiB, NVIDIA's limit for OpenCL.
#define F16_STAGES 3
// Slice kt of both operands into stage st: this item's chunks tid and tid + 256 of each,
// rows lr and lr + 64 (lr = tid / 4), chunk q = tid % 4 of their 4; zeros past K.
#define F16_SLICE(st, kt)                                                                     \
  {                                                                                           \
    const int kc = (kt) * 4 + q;                                                              \
    MMA_UNROLL for (int s = 0; s < 2; ++s) {                                                  \
      const int aok = arow[s] && kc < KW, bok = bcol[s] >= 0 && kc < KW;                     \
      CP_ASYNC16(&As[st][tid + GEMM_WG * s], aok ? A + (long)(m0 + lr + 64 * s) * KW + kc : A, aok ? 16 : 0); \
      CP_ASYNC16(&Bs[st][tid + GEMM_WG * s], bok ? W + (long)bcol[s] * KW + kc : W, bok ? 16 : 0); \
    }                                                                                         \
  }
__kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1))) void qgemm_mma_f16(
    __global const uint4* A, __global const uint4* W, __global const float* S, __global const float* O,
    __global float* C, SPLIT_ARGS, int M, int N, int K, int G, int row_bytes, int groups, GEMV_ARGS) {
  __local uint4 As[F16_STAGES][128 * 4], Bs[F16_STAGES][128 * 4];
  MMA_EMU_DECL
  const int tid = get_local_id(0), lane = tid & 31, warp = tid >> 5;
  const int wm = warp >> 2, wn = warp & 3, g = lane >> 2, t = lane & 3;
  const int m0 = get_group_id(1) * 128, c0 = get_group_id(0) * (glu ? 64 : 128);
  const int MT = 4, NT = 4, KW = K / 8, KT = (K + 31) / 32, lr = tid >> 2, q = tid & 3;
  int arow[2], bcol[2];
  MMA_UNROLL for (int s = 0; s < 2; ++s) {
    const int lc = lr + 64 * s;
    arow[s] = m0 + lc < M;
    bcol[s] = tile_column(c0, lc, lc % 64, lc >= 64, N, glu);
  }
  float acc[4][4][4];
  MMA_UNROLL for (int i = 0; i < MT; ++i)
    MMA_UNROLL for (int j = 0; j < NT; ++j) acc[i][j][0] = acc[i][j][1] = acc[i][j][2] = acc[i][j][3] = 0.0f;
  MMA_UNROLL for (int st = 0; st < F16_STAGES - 1; ++st) {
    if (st < KT) F16_SLICE(st, st)
    CP_ASYNC_COMMIT();
  }
  for (int kt = 0; kt < KT; ++kt) {
    CP_ASYNC_WAIT(1);  // F16_STAGES - 2: slice kt has landed
    barrier(CLK_LOCAL_MEM_FENCE);  // ... for every item; and slice kt - 1's stage is free
    const int nx = kt + F16_STAGES - 1, st = kt % F16_STAGES;
    if (nx < KT) F16_SLICE(nx % F16_STAGES, nx)
    CP_ASYNC_COMMIT();  // (empty past the end: the wait above counts groups)
    uint4 bf[4], a0[4], a1[4];
    MMA_UNROLL for (int j = 0; j < NT; ++j) bf[j] = Bs[st][(MMA_BROW(wn, j, NT, 128) + g) * 4 + t];
    MMA_UNROLL for (int i = 0; i < MT; ++i) {
      const int r0 = wm * 64 + i * 16 + g;
      a0[i] = As[st][r0 * 4 + t];
      a1[i] = As[st][(r0 + 8) * 4 + t];
    }
    MMA_UNROLL for (int i = 0; i < MT; ++i)
      MMA_UNROLL for (int j = 0; j < NT; ++j) MMA_16816(acc[i][j], a0[i].x, a1[i].x, a0[i].y, a1[i].y, bf[j].x, bf[j].y);
    MMA_UNROLL for (int i = 0; i < MT; ++i)
      MMA_UNROLL for (int j = 0; j < NT; ++j) MMA_16816(acc[i][j], a0[i].z, a1[i].z, a0[i].w, a1[i].w, bf[j].z, bf[j].w);
  }
  MMA_STORE(128, 128, 1.0f)
}
// 1 / rms of a row of K values (rmsnorm_f32's order) for the preps that fold a norm into
// A; 1 without its weight NW. The whole work-group calls it (a barrier inside).
inline float row_inv_rms(__global const float* x, int K, __global const float* NW, float eps, __local float* part) {
  if (!NW) return 1.0f;
  float ss = 0.0f;
  for (int c = get_local_id(0); c < K / 8; c += GEMM_WG) {
    const float8 v = vload8(c, x);
    ss += dot(v.lo, v.lo) + dot(v.hi, v.hi);
  }
  return 1.0f / sqrt(wg_sum_n(part, ss, GEMM_WG) / K + eps);
}
// Before qgemm_mma_f16, one launch: work-groups below `wgroups` dequantize 8 codes an item
// into WH [N][K] halves; each one after converts a row of A into AH [M][K] halves, times
// its RMSNorm's 1 / rms and NW (rmsnorm_f32's order) when NW is given.
#define PREP_F16(NAME, LOAD, LEVELS8)                                                         \
  __kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1))) void NAME(                   \
      __global const uchar* W, __global const float* S, __global const float* O, __global uint4* WH, int N, int K, \
      int G, int row_bytes, int groups, int wgroups, __global const float* A, __global uint4* AH, \
      __global const float* NW, float eps) {                                                  \
    const int grp = get_group_id(0), tid = get_local_id(0), kw = K / 8;                       \
    if (grp < wgroups) {                                                                      \
      const long i = (long)grp * GEMM_WG + tid;                                               \
      if (i >= (long)N * kw) return;                                                          \
      const int n = i / kw, k = i % kw * 8;                                                   \
      const long s = (long)n * groups + k / G;                                                \
      WH[i] = half8_bits(fma(LEVELS8(LOAD(W + (long)n * row_bytes, k)), (float8)S[s], (float8)O[s])); \
      return;                                                                                 \
    }                                                                                         \
    __local float part[GEMM_WG];                                                              \
    const long m = grp - wgroups;                                                             \
    __global const float* x = A + m * K;                                                      \
    const float inv = row_inv_rms(x, K, NW, eps, part);                                       \
    for (int c = tid; c < kw; c += GEMM_WG) {                                                 \
      float8 v = vload8(c, x) * inv;                                                          \
      if (NW) v *= vload8(c, NW);                                                             \
      AH[m * kw + c] = half8_bits(v);                                                         \
    }                                                                                         \
  }
PREP_F16(prep_f16_e0m4, E0M4_LOAD, E0M4_LEVELS8)
PREP_F16(prep_f16_int4, INT4_LOAD, INT4_LEVELS8)
PREP_F16(prep_f16_q8, Q8_LOAD, Q8_LEVELS8)
PREP_F16(prep_f16_q3h, Q3H_LOAD, Q3H_LEVELS8)

// Codes of uniform levels (matmul.cpp's qgemm64_mma_i8_* rows): the codes times A in int8
// on the tensor cores (mma m16n8k32, s8 x u8 for 16-level codes and q3h's, s8 x s8 for
// q8's bytes), llama.cpp's MMQ idea. Each 128 k of A's rows times the norm's weights (a
// stage) is rounded to int8 with its own step d, keeping the exact sums of each 32 k; the
// levels being uniform (w = q s' + o' in a group: e0m4 s' = s / 8, o' = 2 s + o; int4, q8
// and q3h s, o), a group's part of a stage is s' d sum(qa q) + o' a (a: A's exact sum over
// those k): the int32 sums run through the part's products (the stage's 4 for groups of
// 128 or more) and are scaled once. The norm's 1 / rms scales a row's products alike and
// is applied at the store (rounding x NW per block gives the codes that x NW / rms would).
// With a step per 32 k (llama.cpp's q8_1) each 32 k cost a conversion and a scaled add per
// sum, more issue slots than the 4 products' (docs/tl-bench.md); llama.cpp's CPU dot
// products round activations per 256 (q8_K). For 16-level codes (and q3h's) the bytes of
// each 8 k of A's rows stand as k 0 2 4 6 1 3 5 7, so that a word of 8 codes is the two B
// registers by two masks, no code turned into a float; q8's codes are the registers as
// they stand, A's bytes in order. 64 x 64 tiles in MMA_SLICE's layout, 128 k a stage by
// cp.async (two stages), local rows padded against bank conflicts, each stage bringing its
// groups' scales and its block's steps and sums. Needs K % 64 == 0 (the last stage's
// second half may be zeros), groups of 32, 64 or a multiple of 128, code rows 16-byte
// aligned (but q3h's).
#define I8_KS 128
#define I8_BLOCKS(K) (((K) + I8_KS - 1) / I8_KS)
#define I8_AROW (I8_KS + 32)
// The codes' forms F: KB, a column's code bytes a stage; BCOL, its local row's bytes
// (padded: a half-warp's reads of 8 rows x 4 lanes fall in distinct banks); NATURAL, A's
// bytes in k order (else each 8 k's as 0 2 4 6 1 3 5 7); SLOTS, the columns an item
// brings a stage, PER, its items a column; REGS, FETCH(st, k0) and PUT(st): the stage's
// codes into local memory (by cp.async: PUT nothing; or into registers, then after the
// stage's products decoded into Bs[st]); B(p, b0, b1), lane t's two B registers of the 32
// k from local p; MMA.
#define I8_NIB_KB (I8_KS / 2)
#define I8_NIB_BCOL (I8_KS / 2 + 16)
#define I8_NIB_NATURAL 0
#define I8_NIB_SLOTS 1
#define I8_NIB_PER 4
#define I8_NIB_REGS
#define I8_NIB_FETCH(st, k0) I8_ASYNC_B(st, k0, I8_NIB_KB, I8_NIB_BCOL, I8_NIB_SLOTS, I8_NIB_PER)
#define I8_NIB_PUT(st)
#define I8_NIB_B(p, b0, b1)                                                                   \
  {                                                                                           \
    const uint w_ = *(__local const uint*)((p) + t * 4);                                      \
    b0 = w_ & 0x0f0f0f0fu, b1 = (w_ >> 4) & 0x0f0f0f0fu;                                      \
  }
#define I8_NIB_MMA MMA_S8U8
#define I8_Q8_KB I8_KS
#define I8_Q8_BCOL (I8_KS + 32)
#define I8_Q8_NATURAL 1
#define I8_Q8_SLOTS 2
#define I8_Q8_PER 8
#define I8_Q8_REGS
#define I8_Q8_FETCH(st, k0) I8_ASYNC_B(st, k0, I8_Q8_KB, I8_Q8_BCOL, I8_Q8_SLOTS, I8_Q8_PER)
#define I8_Q8_PUT(st)
#define I8_Q8_B(p, b0, b1)                                                                    \
  {                                                                                           \
    const uint2 w_ = *(__local const uint2*)((p) + t * 8);                                    \
    b0 = w_.x, b1 = w_.y;                                                                     \
  }
#define I8_Q8_MMA MMA_S8S8
// q3h: 4 words of 4 pairs an item (Q3H_WORD: no alignment), decoded after the products
// into 8 bytes each, the pairs' firsts (even k) then their seconds, as A's bytes stand.
#define I8_Q3H_KB I8_KS
#define I8_Q3H_BCOL (I8_KS + 32)
#define I8_Q3H_NATURAL 0
#define I8_Q3H_SLOTS 4
#define I8_Q3H_PER 16
#define I8_Q3H_REGS uint rq[I8_Q3H_SLOTS];
#define I8_Q3H_FETCH(st, k0)                                                                  \
  MMA_UNROLL for (int s = 0; s < I8_Q3H_SLOTS; ++s) {                                         \
    const int k = (k0) + (tid + GEMM_WG * s) % I8_Q3H_PER * 8;                                \
    rq[s] = bcol[s] >= 0 && (!ragged || k < K) ? Q3H_WORD(W + (long)bcol[s] * row_bytes, k) : 0;           \
  }
#define I8_Q3H_PUT(st)                                                                        \
  MMA_UNROLL for (int s = 0; s < I8_Q3H_SLOTS; ++s) {                                         \
    const int e = tid + GEMM_WG * s;                                                          \
    *(__local uint2*)((__local uchar*)Bs[st] + e / I8_Q3H_PER * I8_Q3H_BCOL + e % I8_Q3H_PER * 8) = q3h_bytes8(rq[s]); \
  }
#define I8_Q3H_B I8_Q8_B
#define I8_Q3H_MMA MMA_S8U8
// 4 q3h pairs (a Q3H_WORD) as their firsts' 4 bytes and their seconds': pairs 0 and 2, 1
// and 3 side by side in 16-bit fields, each divided by 11 as (p x 187) >> 11 (exact below 128).
inline uint2 q3h_bytes8(uint w) {
  const uint a = (w & 0x7fu) | (w << 2 & 0x7f0000u), b = (w >> 7 & 0x7fu) | (w >> 5 & 0x7f0000u);
  const uint ha = (a * 187u) >> 11 & 0x1f001fu, hb = (b * 187u) >> 11 & 0x1f001fu;
  return (uint2)(ha | hb << 8, (a - ha * 11u) | (b - hb * 11u) << 8);
}
// A's int8 rows are made by the tiles' own launch (a launch fewer than the launch of its
// own before each GEMM that it was): the work-groups share out pieces (a row's 8 k an
// item, 1024 k) as common.cl's claim_first says, then wait for all of them. AQ: the codes
// [M][K]; AD: the blocks' steps [blocks][ad_stride], then their sums [blocks][ad_stride]
// (the common rows read one a stage), the sums of each 32 k [4 blocks][ad_stride] (the
// ragged rows'), x's blocks' sums of squares (for the norm's 1 / rms) [blocks]
// [ad_stride] (blocks: K / 128 rounded up; ad_stride: M rounded up to 4). `red`: 3 x
// GEMM_WG floats. natural: each 8 k's bytes in k order (else 0 2 4 6 1 3 5 7).
inline void i8_rows_in_launch(__global const float* A, __global uint* AQ, __global float* AD, int M, int K,
                              int ad_stride, __global const float* NW, __global int* PC, int tid,
                              __local float* red, __local int* flag, int natural) {
  __local float *amaxs = red, *sums = red + GEMM_WG, *squares = red + 2 * GEMM_WG;
  const int pieces = (K / 8 + GEMM_WG - 1) / GEMM_WG, first = tid & ~15, blocks = I8_BLOCKS(K);
  for (int p = claim_first(PC, tid, flag); p < M * pieces; p = claim_next(PC, tid, flag)) {
    // A float8 an item (coalesced), the 16 items of a block pairing up in local memory to
    // its largest magnitude and sums, the sums of each 32 k on the way (a fixed order: the
    // same sums every run). K is a multiple of 64: a block's first item is in (the last
    // block's second half may be out: zeros).
    const int m = p / pieces, c = (p % pieces) * GEMM_WG + tid, in = c < K / 8;
    float8 v = in ? vload8(c, A + (long)m * K) : 0.0f;
    squares[tid] = dot(v.lo, v.lo) + dot(v.hi, v.hi);
    if (NW && in) v *= vload8(c, NW);
    const float8 a = fabs(v);
    amaxs[tid] = fmax(fmax(fmax(a.s0, a.s1), fmax(a.s2, a.s3)), fmax(fmax(a.s4, a.s5), fmax(a.s6, a.s7)));
    sums[tid] = (v.s0 + v.s1) + (v.s2 + v.s3) + ((v.s4 + v.s5) + (v.s6 + v.s7));
    float s32 = 0.0f;  // (items 4j: the sum of the j-th 32 k)
    MMA_UNROLL for (int h = 1; h < 16; h <<= 1) {
      barrier(CLK_LOCAL_MEM_FENCE);
      if ((tid & (2 * h - 1)) == 0)
        amaxs[tid] = fmax(amaxs[tid], amaxs[tid + h]), sums[tid] += sums[tid + h], squares[tid] += squares[tid + h];
      if (h == 2) s32 = sums[tid];
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    if ((tid & 3) == 0 && c < blocks * 16) AD[(long)(2 * blocks + c / 4) * ad_stride + m] = s32;
    if (in) {
      const float amax = amaxs[first], d = amax > 0.0f ? amax / 127.0f : 1.0f;
      const int8 q = convert_int8_rte(v / d) & 0xff;
      const int8 o = natural ? q : q.s02461357;
      AQ[((long)m * K + c * 8) / 4] = o.s0 | o.s1 << 8 | o.s2 << 16 | o.s3 << 24;
      AQ[((long)m * K + c * 8) / 4 + 1] = o.s4 | o.s5 << 8 | o.s6 << 16 | o.s7 << 24;
      if (tid == first) {
        AD[(long)(c / 16) * ad_stride + m] = d;
        AD[(long)(blocks + c / 16) * ad_stride + m] = sums[first];
        AD[(long)(6 * blocks + c / 16) * ad_stride + m] = squares[first];
      }
    }
  }
  claims_wait(PC, M * pieces, tid, flag);
}
// The tile's rows' 1 / rms from their blocks' sums of squares (1 without a norm).
inline void i8_rows_rinv(__global const float* AD, int M, int K, int ad_stride, __global const float* NW, float eps,
                         int m0, int tid, __local float* rinv) {
  if (tid >= 64) return;
  float ss = 0.0f;
  const int blocks = I8_BLOCKS(K);
  for (int b = 0; NW && m0 + tid < M && b < blocks; ++b)
    ss += load_past_l1(AD + (long)(6 * blocks + b) * ad_stride + m0 + tid);
  rinv[tid] = NW ? 1.0f / sqrt(ss / K + eps) : 1.0f;
}
// Stage st of the codes by cp.async: SLOTS chunks of 16 bytes an item, PER a column (bcol).
#define I8_ASYNC_B(st, k0, KB, BCOL, SLOTS, PER)                                              \
  MMA_UNROLL for (int s = 0; s < SLOTS; ++s) {                                                \
    const int e = tid + GEMM_WG * s, ch = e % PER, ok = bcol[s] >= 0 && (!ragged || (k0) + ch * (I8_KS / PER) < K); \
    CP_ASYNC16((__local uchar*)Bs[st] + e / PER * BCOL + ch * 16,                             \
               ok ? W + (long)bcol[s] * row_bytes + (k0) / (I8_KS / KB) + ch * 16 : W, ok ? 16 : 0); \
  }
// Stage st: A's 64 rows of I8_KS bytes from k0 (2 chunks of 16 an item; zeros past K), the
// codes' 64 columns (F's FETCH), the columns' scales and offsets of the stage's nq groups
// (a group from k0 and, groups of 32 or 64, those after it within the stage: Ss[st][scale,
// offset][group][column]; only those: every copy costs an issue slot beside 16 products a
// warp), the rows' steps and their block's sum (the common rows) or its sums of each 32 k
// (the ragged rows; items 128-207, apart from the scales': Ds[st][step, sums][row]).
#define I8_SLICE(st, k0, F)                                                                   \
  {                                                                                           \
    MMA_UNROLL for (int s = 0; s < 2; ++s) {                                                  \
      const int e = tid + GEMM_WG * s, r = e >> 3, c = e & 7, ok = m0 + r < M && (!ragged || (k0) + c * 16 < K); \
      CP_ASYNC16((__local uchar*)As[st] + r * I8_AROW + c * 16, ok ? AQ + (long)(m0 + r) * K + (k0) + c * 16 : AQ, ok ? 16 : 0); \
    }                                                                                         \
    F##_FETCH(st, k0)                                                                         \
    MMA_UNROLL for (int s = 0; s < (ragged ? 2 : 1); ++s) {                                   \
      const int e = tid + GEMM_WG * s, lc = e & 63, r = e >> 6, off = r >= nq, q = r - off * nq; \
      if (r < 2 * nq) {                                                                       \
        const int col = paired_column(c0, lc, lc % 32, lc >= 32, N, glu, rope_half);         \
        const int ok = col >= 0 && (!ragged || (k0) + q * G < K);                             \
        CP_ASYNC4(&Ss[st][off][q][lc], (off ? O : S) + (ok ? (long)col * groups + (k0) / G + q : 0), ok ? 4 : 0); \
      }                                                                                       \
    }                                                                                         \
    if (tid >= 128 && tid < (ragged ? 208 : 160)) {                                           \
      const int a = (tid - 128) >> 4, r = 4 * (tid & 15), rows = M - m0 - r;                  \
      const long at = ragged && a ? 2 * I8_BLOCKS(K) + (k0) / 32 + a - 1 : (long)a * I8_BLOCKS(K) + (k0) / I8_KS; \
      CP_ASYNC16(&Ds[st][a][r], rows > 0 ? AD + at * ad_stride + m0 + r : AD, rows >= 4 ? 16 : rows > 0 ? 4 * rows : 0); \
    }                                                                                         \
  }
// The products of the 32 k from u * 32 of stage st into iacc.
#define I8_PRODUCTS(u, F)                                                                     \
  {                                                                                           \
    uint b0[2], b1[2];                                                                        \
    MMA_UNROLL for (int j = 0; j < NT; ++j)                                                   \
      F##_B((__local const uchar*)Bs[st] + (MMA_BROW_P(paired, wn, j, NT, 64) + g) * F##_BCOL + (u) * (F##_KB / 4), b0[j], b1[j]) \
    MMA_UNROLL for (int i = 0; i < MT; ++i) {                                                 \
      __local const uchar* ar = (__local const uchar*)As[st] + (wm * 32 + i * 16 + g) * I8_AROW + (u) * 32 + t * 8; \
      const uint2 lo = *(__local const uint2*)ar, hi = *(__local const uint2*)(ar + 8 * I8_AROW); \
      MMA_UNROLL for (int j = 0; j < NT; ++j) F##_MMA(iacc[i][j], lo.x, hi.x, lo.y, hi.y, b0[j], b1[j]); \
    }                                                                                         \
  }
// Group q of the stage, whose A sums are Ds[st][1 + f] and the n after it: its int32 sums
// scaled into acc (below 128 x 127 x 128) and cleared.
#define I8_FLUSH(q, f, n, LEVEL_STEP, LEVEL_BASE)                                             \
  MMA_UNROLL for (int i = 0; i < MT; ++i) MMA_UNROLL for (int h = 0; h < 2; ++h) {            \
    const int lr = wm * 32 + i * 16 + g + 8 * h;                                              \
    const float d = Ds[st][0][lr];                                                            \
    float a = 0.0f;                                                                           \
    for (int v = 0; v < (n); ++v) a += Ds[st][1 + (f) + v][lr];                               \
    MMA_UNROLL for (int j = 0; j < NT; ++j) MMA_UNROLL for (int x = 0; x < 2; ++x) {          \
      const int lc = MMA_BROW_P(paired, wn, j, NT, 64) + 2 * t + x;                          \
      const float s = Ss[st][0][q][lc];                                                       \
      acc[i][j][2 * h + x] = fma(small_i2f(iacc[i][j][2 * h + x]) * d, LEVEL_STEP(s), fma(LEVEL_BASE(s, Ss[st][1][q][lc]), a, acc[i][j][2 * h + x])); \
      iacc[i][j][2 * h + x] = 0;                                                              \
    }                                                                                         \
  }
// F: the codes' form (I8_NIB, I8_Q8, I8_Q3H); LEVEL_STEP(s) and LEVEL_BASE(s, o): a group's s' and
// o' from its scale s and offset o; EXTRA_ARGS, ROPE_HALF and EPILOGUE: the plain rows'
// (none, 0, MMA_STORE) or the RoPE epilogue's (ROPE_EPI_ARGS, D / 2, MMA_ROPE_STORE).
// RAGGED: stages not whole, groups of 32 or 64 or K's last stage half (the groups' scales
// and A's sums of 32 k a stage, a group's sums scaled as it ends; K checked); else K and
// groups multiples of 128 (one group a stage: its 4 products back to back, then its sums
// scaled once; no K checks). Two kernels, not one: c6ef1c5's one, testing a group's end
// inside the 32-k loop, took e0m4's 4096 x 4096 GEMM at 1024 rows from 0.183 to 0.292 ms
// on an H200, 0.230 with the two paths in one kernel (docs/tl-bench.md): 183 registers
// against 04431d7's 125 (clang's PTX, scripts/ptx_resources.sh; 138 with the paths apart
// but the K checks kept), and above 128 a compute unit keeps one 256-item work-group, not
// two. (NVIDIA's own compiler: this kernel 94, 04431d7's 75, which fits three.)
#define QGEMM_I8(NAME, F, LEVEL_STEP, LEVEL_BASE, EXTRA_ARGS, ROPE_HALF, EPILOGUE, RAGGED)    \
  __kernel __attribute__((reqd_work_group_size(GEMM_WG, 1, 1))) void NAME(                    \
      __global const float* A, __global uchar* AQ, __global const uchar* W, __global const float* S, \
      __global const float* O, __global float* C, SPLIT_ARGS, int M, int N, int K, int G, int row_bytes, \
      int groups, GEMV_ARGS, KSPLIT_ARGS, __global float* AD, int ad_stride, __global int* PC EXTRA_ARGS) { \
    __local uint4 As[2][64 * I8_AROW / 16], Bs[2][64 * F##_BCOL / 16];                       \
    __local float Ss[2][2][RAGGED ? 4 : 1][64], Ds[2][RAGGED ? 5 : 2][64] __attribute__((aligned(16))), rinv[64]; \
    __local int klast;                                                                        \
    MMA_EMU_DECL                                                                              \
    const int tid = get_local_id(0), lane = tid & 31, warp = tid >> 5;                        \
    i8_rows_in_launch(A, (__global uint*)AQ, AD, M, K, ad_stride, NW, PC, tid, (__local float*)As[0], &klast, F##_NATURAL); \
    i8_rows_rinv(AD, M, K, ad_stride, NW, eps, get_group_id(1) * 64, tid, rinv);              \
    const int wm = warp >> 2, wn = warp & 3, g = lane >> 2, t = lane & 3;                     \
    const int rope_half = ROPE_HALF, paired = glu || rope_half;                               \
    const int m0 = get_group_id(1) * 64, c0 = get_group_id(0) * (paired ? 32 : 64);          \
    const int MT = 2, NT = 2;                                                                 \
    int bcol[F##_SLOTS];                                                                      \
    F##_REGS                                                                                  \
    MMA_UNROLL for (int s = 0; s < F##_SLOTS; ++s) {                                          \
      const int lc = (tid + GEMM_WG * s) / F##_PER;                                           \
      bcol[s] = paired_column(c0, lc, lc % 32, lc >= 32, N, glu, rope_half);                  \
    }                                                                                         \
    int iacc[2][2][4];                                                                        \
    float acc[2][2][4], ss[1] = {0.0f}; /* (KSPLIT_GATHER's: rinv instead) */                \
    MMA_UNROLL for (int i = 0; i < MT; ++i) MMA_UNROLL for (int j = 0; j < NT; ++j)               \
      MMA_UNROLL for (int x = 0; x < 4; ++x) iacc[i][j][x] = 0, acc[i][j][x] = 0.0f;          \
    const int kb = get_group_id(2) * kslice, ke = min(K, kb + kslice), gs = min(G, I8_KS), ragged = RAGGED, nq = ragged ? I8_KS / gs : 1; \
    I8_SLICE(0, kb, F)                                                                        \
    CP_ASYNC_COMMIT();                                                                        \
    F##_PUT(0)                                                                                \
    for (int k0 = kb; k0 < ke; k0 += I8_KS) {                                                 \
      const int st = ((k0 - kb) / I8_KS) & 1;                                                 \
      CP_ASYNC_WAIT(0);                                                                       \
      barrier(CLK_LOCAL_MEM_FENCE); /* stage st landed for all; the other one is free */      \
      if (k0 + I8_KS < ke) I8_SLICE(st ^ 1, k0 + I8_KS, F)                                    \
      CP_ASYNC_COMMIT();                                                                      \
      if (!ragged) {                                                                          \
        MMA_UNROLL for (int u = 0; u < I8_KS / 32; ++u) I8_PRODUCTS(u, F)                     \
        I8_FLUSH(0, 0, 1, LEVEL_STEP, LEVEL_BASE)                                             \
      } else {                                                                                \
        MMA_UNROLL for (int u = 0; u < I8_KS / 32; ++u) {                                     \
          I8_PRODUCTS(u, F)                                                                   \
          if ((u + 1) * 32 % gs == 0) I8_FLUSH(u * 32 / gs, u + 1 - gs / 32, gs / 32, LEVEL_STEP, LEVEL_BASE) \
        }                                                                                     \
      }                                                                                       \
      if (k0 + I8_KS < ke) {                                                                  \
        F##_PUT(st ^ 1)                                                                       \
      }                                                                                       \
    }                                                                                         \
    KSPLIT_GATHER(64)                                                                         \
    EPILOGUE                                                                                  \
  }
// The int8 tiles' outputs (MMA_STORE's) through local memory: acc into As as a 64 x 64
// tile (rows padded by one), then each item stores every 256th value in row order
// (consecutive items, consecutive columns), no fragment's addresses held: e0m4's rows 125
// registers where MMA_STORE took them to 128, the edge past which a compute unit keeps one
// 256-item work-group, not two; q3h's 136 where it took them to 168 (clang's PTX,
// scripts/ptx_resources.sh; what it saves under NVIDIA's own compiler is not measured).
#define I8_STAGED_STORE(BM, BN, SC)                                                           \
  {                                                                                           \
    __local float* T = (__local float*)As;                                                    \
    barrier(CLK_LOCAL_MEM_FENCE); /* (the last products may still read As) */                 \
    MMA_ROWS(BM, BN, 1.0f, I8_STAGE_ROW, T)                                                   \
    barrier(CLK_LOCAL_MEM_FENCE);                                                             \
    _Pragma("unroll 1") for (int e = tid; e < BM * BN; e += GEMM_WG) {                        \
      const int row = e / BN, lc = e % BN, m = m0 + row, n = c0 + lc;                        \
      if (m >= M) break;                                                                      \
      const float sc = SC;                                                                    \
      __local const float* v = T + row * (BN + 1) + lc;                                       \
      TILE_OUT(m, n, lc < BN / 2, v[0] * sc, v[BN / 2] * sc)                                  \
    }                                                                                         \
  }
// An item's values of a row (MMA_ROWS' body) into the staged tile T.
#define I8_STAGE_ROW(BM, BN, T)                                                               \
  MMA_UNROLL for (int j = 0; j < NT; ++j) MMA_UNROLL for (int x = 0; x < 2; ++x)              \
    T[row * (BN + 1) + MMA_BROW(wn, j, NT, BN) + 2 * t + x] = acc[i][j][2 * h + x];
// The schemes the int8 rows take, X(scheme, its form, its levels' macros' prefix).
#define I8_SCHEMES(X) X(e0m4, I8_NIB, E0M4) X(int4, I8_NIB, INT4) X(q8, I8_Q8, Q8) X(q3h, I8_Q3H, Q3H)
#define QGEMM_I8_PLAIN(s, F, L)                                                                                 \
  QGEMM_I8(qgemm64_mma_i8_##s, F, L##_STEP, L##_BASE, , 0, I8_STAGED_STORE(64, 64, rinv[row]), 0)            \
  QGEMM_I8(qgemm64_mma_i8_ragged_##s, F, L##_STEP, L##_BASE, , 0, I8_STAGED_STORE(64, 64, rinv[row]), 1)
I8_SCHEMES(QGEMM_I8_PLAIN)
#define QGEMM_I8_ROPE(s, F, L)                                                                                             \
  QGEMM_I8(qgemm64_mma_i8_rope_##s, F, L##_STEP, L##_BASE, ROPE_EPI_ARGS, D / 2, MMA_ROPE_STORE(64, 64, rinv[row]), 0) \
  QGEMM_I8(qgemm64_mma_i8_ragged_rope_##s, F, L##_STEP, L##_BASE, ROPE_EPI_ARGS, D / 2, MMA_ROPE_STORE(64, 64, rinv[row]), 1)
I8_SCHEMES(QGEMM_I8_ROPE)
#endif  // TL_MMA
#endif  // TL_MAX_WG >= GEMM_WG

// CPUs (matmul.cpp's qgemm_cpu_* rows): a work-group of one item is a task on one core,
// CPU_MB rows x 32 weight columns (with a GLU: 16 gate columns and their 16 up columns) of
// the product, the norm prologue and GLU epilogue inside as above. Per block of CPU_KB k:
// the block's 32 columns dequantized once (the norm's scale folded into them) and laid out
// k-major, a k's 32 weights two float16 made by a few vector operations each (LEVEL16);
// then each micro-tile of CPU_MR rows keeps its sums in registers, each k one A value
// broadcast per row against the k's weights. The tile follows the device's vector width
// (TL_VEC): where a float16 is one register (AVX-512: 32 of them), 12 rows of two float16
// sums each, 24 FMAs for 14 loads (bytellama pp512 on PoCL: 12 rows of one float16, 12
// FMAs for 13 loads, were 12.8k -> 16.5k tok/s over 6 x 2 float8); elsewhere 6 rows of
// two float8 sums over each half of the columns in turn, 12 FMAs for 8 loads (AVX2's 16
// registers). 32 columns a task, not 16: each A value read from memory feeds twice the
// FMAs, and the rows' norm sums, which every task computes again, are spread over twice
// the columns (this host: that epilogue took 19% of the 16-column kernel's time).
#define CPU_KB 256
// 11 micro-tiles of 12 rows (22 of 6) a task: each task dequantizes its block and sums its
// rows' squares again, so more rows a task share that; bytellama pp512 on an AMD EPYC (PoCL,
// 2 cores) 39.6-42.1k -> 43.3-45.0k tok/s over 96 rows, pp128 no slower (48 or 192 against
// 96 were within the noise on an older host).
#define CPU_MB 132
// The micro-tile's two vectors of sums a row, CPU_V wide, at acc's and wt's vector
// indices CPU_AT(row, x) and CPU_AT(k, x).
#if TL_VEC >= 16
#define CPU_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)
#define CPU_MR 12
#define CPU_HALVES 1
#define CPU_V float16
#define CPU_VLOAD vload16
#define CPU_VSTORE vstore16
#define CPU_AT(r, x) (2 * (r) + (x))
#else
#define CPU_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5)
#define CPU_MR 6
#define CPU_HALVES 2
#define CPU_V float8
#define CPU_VLOAD vload8
#define CPU_VSTORE vstore8
#define CPU_AT(r, x) (4 * (r) + 2 * h + (x))
#endif
#define CPU_B const CPU_V b0 = CPU_VLOAD(CPU_AT(k, 0), wt), b1 = CPU_VLOAD(CPU_AT(k, 1), wt);
#define CPU_LOAD(i)                                                                                   \
  CPU_V c##i##a = CPU_VLOAD(CPU_AT(r0 + i, 0), acc), c##i##b = CPU_VLOAD(CPU_AT(r0 + i, 1), acc);     \
  __global const float* a##i = A + (long)min(m0 + r0 + i, M - 1) * K + k0;
#define CPU_FMA(i)                             \
  {                                            \
    const CPU_V x = (CPU_V)a##i[k];            \
    c##i##a = fma(x, b0, c##i##a);             \
    c##i##b = fma(x, b1, c##i##b);             \
  }
#define CPU_SAVE(i)                                \
  CPU_VSTORE(c##i##a, CPU_AT(r0 + i, 0), acc);     \
  CPU_VSTORE(c##i##b, CPU_AT(r0 + i, 1), acc);

// A k's levels across 16 columns, from their 16 words of 8 codes each (r, a WORD_T16; p,
// the code's place in its word, a constant once unrolled).
#define E0M4_LEVEL16(r, p) \
  as_float16(((p) <= 4 ? (r) << (19 - 4 * (p)) : (r) >> (4 * (p) - 19)) & 0x00780000u | 0x40000000u)
#define INT4_LEVEL16(r, p) convert_float16((r) >> (4 * (p)) & 15u)
#define Q8_WORD(w, k) as_ulong(Q8_LOAD(w, k))
#define Q8_LEVEL16(r, p) convert_float16(as_int16(convert_uint16((r) >> (8 * (p))) << 24) >> 24)
#define Q3H_LEVEL16(r, p) \
  convert_float16((p) % 2 ? ((r) >> (7 * ((p) / 2)) & 0x7fu) % 11u : ((r) >> (7 * ((p) / 2)) & 0x7fu) / 11u)
// A task's weights for k .. k + 7 (kk = k0 + k) into wt, the norm's scale folded in: codes
// dequantized (their group's 32 scales and offsets s0, s1, o0, o1 read as a group starts,
// 0 past N) ...
#define CODES_PACK8(k, kk, WORD_T, WORD, LEVEL16)                                             \
  {                                                                                           \
    if ((k) == 0 || (kk) % G == 0) {                                                          \
      float s[32], o[32];                                                                     \
      for (int j = 0; j < 32; ++j) {                                                          \
        const long g = (long)max(col[j], 0) * groups + (kk) / G;                              \
        s[j] = col[j] >= 0 ? S[g] : 0.0f, o[j] = col[j] >= 0 ? O[g] : 0.0f;                   \
      }                                                                                       \
      s0 = vload16(0, s), s1 = vload16(1, s), o0 = vload16(0, o), o1 = vload16(1, o);         \
    }                                                                                         \
    WORD_T raw[32];                                                                           \
    _Pragma("clang loop vectorize(disable)") /* scalar loads: gathers cost more */            \
    for (int j = 0; j < 32; ++j) raw[j] = WORD(wc[j], kk);                                    \
    const CPU_VEC16(WORD_T) w0 = vload16(0, raw), w1 = vload16(1, raw);                       \
    _Pragma("unroll") for (int p = 0; p < 8; ++p) {                                           \
      float16 b0 = fma(LEVEL16(w0, p), s0, o0), b1 = fma(LEVEL16(w1, p), s1, o1);             \
      if (NW) b0 *= NW[(kk) + p], b1 *= NW[(kk) + p];                                         \
      vstore16(b0, 2 * ((k) + p), wt);                                                        \
      vstore16(b1, 2 * ((k) + p) + 1, wt);                                                    \
    }                                                                                         \
  }
// ... or float weights W [K, N] copied: a k's 32 columns from its row, 0 past N.
#define FLOATS_PACK8(k, kk, WORD_T, WORD, LEVEL16)                                            \
  for (int p = 0; p < 8; ++p) {                                                               \
    __global const float* wr = (__global const float*)W + (long)((kk) + p) * N;               \
    float16 b0, b1;                                                                           \
    if (whole) {                                                                              \
      b0 = vload16(0, wr + col[0]), b1 = vload16(0, wr + col[16]);                            \
    } else {                                                                                  \
      float b[32];                                                                            \
      for (int j = 0; j < 32; ++j) b[j] = col[j] >= 0 ? wr[col[j]] : 0.0f;                   \
      b0 = vload16(0, b), b1 = vload16(1, b);                                                 \
    }                                                                                         \
    if (NW) b0 *= NW[(kk) + p], b1 *= NW[(kk) + p];                                           \
    vstore16(b0, 2 * ((k) + p), wt);                                                          \
    vstore16(b1, 2 * ((k) + p) + 1, wt);                                                      \
  }
#define CPU_CAT(a, b) a##b
#define CPU_VEC16(T) CPU_CAT(T, 16)

// EXTRA_ARGS, ROPE_HALF and PAIRS: the plain rows' (none, 0, NO_PAIRS16) or the RoPE
// epilogue's (ROPE_EPI_ARGS, D / 2, ROPE_PAIRS16: a task's 16 pairs of columns rotated and
// stored as the portable tiles' RoPE rows do; not over 8-bit caches, whose blocks of 32
// dims a task's 16 pairs do not hold).
#define QGEMM_CPU(NAME, PACK8, WORD_T, WORD, LEVEL16, EXTRA_ARGS, ROPE_HALF, PAIRS)           \
  __kernel __attribute__((reqd_work_group_size(1, 1, 1))) void NAME(GEMM_ARGS EXTRA_ARGS) {   \
    float wt[CPU_KB * 32] __attribute__((aligned(64))), acc[CPU_MB * 32] __attribute__((aligned(64))); \
    const int rope_half = ROPE_HALF;                                                          \
    const int m0 = get_group_id(1) * CPU_MB, c0 = get_group_id(0) * (glu || rope_half ? 16 : 32); \
    const int rows = min(CPU_MB, M - m0);                                                     \
    int col[32];                                                                              \
    __global const uchar* wc[32];                                                             \
    for (int j = 0; j < 32; ++j) {                                                            \
      col[j] = paired_column(c0, j, j % 16, j >= 16, N, glu, rope_half);                      \
      wc[j] = W + (long)max(col[j], 0) * row_bytes;                                           \
    }                                                                                         \
    float nsq[CPU_MB];                                                                        \
    for (int i = 0; i < CPU_MB * 32; ++i) acc[i] = 0.0f;                                      \
    for (int i = 0; i < CPU_MB; ++i) nsq[i] = 0.0f;                                           \
    float16 s0, s1, o0, o1;                                                                   \
    /* (float weights: both halves' columns consecutive, so a k's row is two vloads) */       \
    const int whole = col[0] >= 0 && col[15] == col[0] + 15 && col[16] >= 0 && col[31] == col[16] + 15; \
    for (int k0 = 0; k0 < K; k0 += CPU_KB) {                                                  \
      const int kn = min(CPU_KB, K - k0);                                                     \
      for (int k = 0; k < kn; k += 8) PACK8(k, k0 + k, WORD_T, WORD, LEVEL16)                 \
      for (int r0 = 0; r0 < rows; r0 += CPU_MR) {                                             \
        /* the rows' norm sums over this block, 16 at a time (their A then in L1 for the FMAs) */ \
        for (int i = 0; NW && i < min(CPU_MR, rows - r0); ++i) {                              \
          __global const float* a = A + (long)(m0 + r0 + i) * K + k0;                         \
          float16 q = 0.0f;                                                                   \
          int k = 0;                                                                          \
          for (; k + 16 <= kn; k += 16) {                                                     \
            const float16 v = vload16(0, a + k);                                              \
            q = fma(v, v, q);                                                                 \
          }                                                                                   \
          if (k < kn) {                                                                       \
            const float8 v = vload8(0, a + k);                                                \
            q.lo = fma(v, v, q.lo);                                                           \
          }                                                                                   \
          nsq[r0 + i] += sum8(q.lo + q.hi);                                                   \
        }                                                                                     \
        for (int h = 0; h < CPU_HALVES; ++h) {                                                \
          CPU_ROWS(CPU_LOAD)                                                                  \
          for (int k = 0; k < kn; ++k) {                                                      \
            CPU_B                                                                             \
            CPU_ROWS(CPU_FMA)                                                                 \
          }                                                                                   \
          CPU_ROWS(CPU_SAVE)                                                                  \
        }                                                                                     \
      }                                                                                       \
    }                                                                                         \
    for (int r = 0; r < rows; ++r) {                                                          \
      const int m = m0 + r;                                                                   \
      const float sc = NW ? 1.0f / sqrt(nsq[r] / K + eps) : 1.0f;                             \
      const float* v = acc + r * 32;                                                          \
      if (rope_half) {                                                                        \
        PAIRS(m, c0, v, sc)                                                                   \
      } else if (glu) {                                                                       \
        if (glu == 1 && c0 + 16 <= N / 2) {                                                   \
          const float16 g = vload16(0, v) * sc + (bias ? vload16(0, bias + c0) : 0.0f);       \
          const float16 u = vload16(1, v) * sc + (bias ? vload16(0, bias + N / 2 + c0) : 0.0f); \
          vstore16(g / (1.0f + exp(-g)) * u, 0, &OUT_AT(m, c0));                              \
        } else {                                                                              \
          for (int j = 0; j < 16; ++j)                                                        \
            if (c0 + j < N / 2) STORE_GLU(m, c0 + j, v[j] * sc, v[16 + j] * sc, N / 2);       \
        }                                                                                     \
      } else if (c0 + 32 <= N && (c0 < N0) == (c0 + 31 < N0) && (c0 < N0 + N1) == (c0 + 31 < N0 + N1)) { \
        __global float* o = &OUT_AT(m, c0);                                                   \
        for (int h = 0; h < 4; ++h) {                                                         \
          float8 x = vload8(h, v) * sc;                                                       \
          if (bias) x += vload8(h, bias + c0);                                                \
          if (res) x += vload8(h, res + (long)m * N0 + c0);                                   \
          vstore8(x, h, o);                                                                   \
        }                                                                                     \
      } else {                                                                                \
        for (int j = 0; j < 32; ++j)                                                          \
          if (c0 + j < N) STORE(m, c0 + j, v[j] * sc);                                        \
      }                                                                                       \
    }                                                                                         \
  }

// CPU decode (M <= 4; matmul.cpp's qgemv_cpu_* rows): a task per 8 weight columns (with a
// GLU: 4 gate columns and their 4 ups), each column's codes read along k 8 at a time and
// dotted with 8 of A's (the norm's scale folded into A) in one float8 sum per column; the
// row's norm and the GLU inside. The column kernels (qgemv_cols_*) spread a column over
// work-items, whose codes PoCL then gathers across lanes.
// A CPU decode task's 8 weight columns from c0 (with a GLU, 4 gates and their ups): their
// codes' rows wc and first scales' index sg in S and O (a column past the weights reads
// column 0's; it is never stored) ...
#define CPU_GEMV_COLUMNS(c0)                                                                  \
  __global const uchar* wc[8];                                                                \
  long sg[8];                                                                                 \
  for (int j = 0; j < 8; ++j) {                                                               \
    const int col_ = max(tile_column(c0, j, j % 4, j >= 4, N, glu), 0);                       \
    wc[j] = W + (long)col_ * row_bytes;                                                       \
    sg[j] = (long)col_ * groups;                                                              \
  }
// ... and their sums v of row m stored (with a GLU: each gate's and its up's). The gates
// go into a vector from scalars and out of it by a vector store: scalar stores reloaded as
// a vector wait for the stores to retire (perf: 7% of bytellama's int8 GEMV at one such load).
#define CPU_GATE(c0, j, v) (v[j] + ((c0) + (j) < N / 2 ? BIAS((c0) + (j)) : 0.0f))
#define CPU_GEMV_STORE(m, c0, v)                                                              \
  if (glu) {                                                                                  \
    float g_[4];                                                                              \
    vstore4(glu_gate4((float4)(CPU_GATE(c0, 0, v), CPU_GATE(c0, 1, v), CPU_GATE(c0, 2, v), CPU_GATE(c0, 3, v)), glu), 0, g_); \
    for (int j = 0; j < 4; ++j)                                                               \
      if ((c0) + j < N / 2) OUT_AT(m, (c0) + j) = g_[j] * (v[4 + j] + BIAS(N / 2 + (c0) + j)); \
  } else {                                                                                    \
    for (int j = 0; j < 8; ++j)                                                               \
      if ((c0) + j < N) STORE(m, (c0) + j, v[j]);                                             \
  }
#define QGEMV_CPU(NAME, LOAD, LEVELS8)                                                        \
  TASK_KERNEL(NAME)(TASK_ARGS GEMM_ARGS) {                                                    \
    const int blocks = glu ? (N / 2 + 3) / 4 : (N + 7) / 8; /* (a task may take several) */   \
    for (int cb = TASK_ID; cb < blocks; cb += TASK_COUNT) {                                   \
      const int c0 = cb * (glu ? 4 : 8);                                                      \
      CPU_GEMV_COLUMNS(c0)                                                                    \
      for (int m = 0; m < M; ++m) {                                                           \
        __global const float* a = A + (long)m * K;                                            \
        float8 q = 0.0f, v8 = 0.0f;                                                           \
        for (int k0 = 0, gi = 0; k0 < K; k0 += G, ++gi) {                                     \
          /* a group's sum_k x_k (l_k s + o) = s sum_k x_k l_k + o sum_k x_k, the 8 columns' at \
             once in registers (a loop over them through memory took a fifth of the time) */  \
          float8 acc[8], xs = 0.0f;                                                           \
          _Pragma("unroll") for (int j = 0; j < 8; ++j) acc[j] = 0.0f;                        \
          for (int k = k0; k < min(K, k0 + G); k += 8) {                                      \
            float8 x = vload8(0, a + k);                                                      \
            if (NW) {                                                                         \
              q = fma(x, x, q);                                                               \
              x *= vload8(0, NW + k);                                                         \
            }                                                                                 \
            xs += x;                                                                          \
            _Pragma("unroll") for (int j = 0; j < 8; ++j) acc[j] = fma(x, LEVELS8(LOAD(wc[j], k)), acc[j]); \
          }                                                                                   \
          const float8 tot = (float8)(sum8(acc[0]), sum8(acc[1]), sum8(acc[2]), sum8(acc[3]), \
                                      sum8(acc[4]), sum8(acc[5]), sum8(acc[6]), sum8(acc[7])); \
          float s[8], o[8];                                                                   \
          _Pragma("unroll") for (int j = 0; j < 8; ++j) s[j] = S[sg[j] + gi], o[j] = O[sg[j] + gi]; \
          const float8 s8 = vload8(0, s), o8 = vload8(0, o);                                  \
          v8 = fma(s8, tot, fma(o8, (float8)sum8(xs), v8));                                  \
        }                                                                                     \
        float v[8];                                                                           \
        vstore8(v8 * (NW ? 1.0f / sqrt(sum8(q) / K + eps) : 1.0f), 0, v);                     \
        CPU_GEMV_STORE(m, c0, v)                                                              \
      }                                                                                       \
    }                                                                                         \
  }

#if defined(TL_CPU) && defined(__AVX2__)
// CPU decode through int8 activations (matmul.cpp's qgemv_cpu_i8_* rows): x (times the
// norm's weights) rounded to int8 a block of 32 with its own step, then a column's codes
// times it by AVX2's pmaddubsw (u8 codes x s8, pairs into s16) and pmaddwd (pairs into
// s32), llama.cpp's CPU dot products; PoCL's OpenCL C takes clang's x86 builtins where its
// target has AVX2 (this section is built only there). 64 k a step: a column's 32 code
// bytes split by two masks and a shift into low and high nibbles (the two blocks' even k,
// then their odd k), x's bytes stored in that order; the levels being uniform (w = c s' +
// o' in a group: e0m4 s' = s / 8, o' = 2 s + o; int4 s, o), a group's sum is s' d sum(xq c)
// + o' sum(x), the blocks' steps d applied to the int32 sums as floats. Each task rounds
// x itself into private arrays, then takes 8 columns (4 gates and their ups) at a time,
// every (launch's tasks)-th block of them: few tasks (matmul.cpp's cpuI8Geometry), so that
// x is rounded a few times, not once for every 8 columns. 1.3-1.9 times the fp32 form's
// speed on this machine's PoCL up to K = 8192 (docs/tl-bench.md). Needs K % 16 == 0 (a last
// block of 16, 32 or 48 k: x's codes past K zeros, the codes' bytes read no further than
// K), K <= CPU_I8_MAXK, groups a multiple of 64.
#define CPU_I8_MAXK 8192
// How far ahead of a column's codes a task asks for them (bytes): the 8 columns' streams
// outran the hardware's prefetch (PoCL, AMD EPYC, 4096 x 4096: 0.73 -> 0.38-0.50 ms).
#define CPU_I8_AHEAD 256
typedef char tl_c32 __attribute__((ext_vector_type(32)));
typedef short tl_s16 __attribute__((ext_vector_type(16)));
inline tl_c32 c32_of(char16 a, char16 b) {
  return __builtin_shufflevector(a, b, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21,
                                 22, 23, 24, 25, 26, 27, 28, 29, 30, 31);
}
inline tl_c32 load_c32(__global const uchar* p) {
  return c32_of(vload16(0, (__global const char*)p), vload16(1, (__global const char*)p));
}
// ... the first n of them (8, 16 or 24: K's last block), zeros after: no byte past a
// column's codes is read.
inline tl_c32 load_c32_part(__global const uchar* p, int n) {
  __global const char* q = (__global const char*)p;
  const char16 a = n >= 16 ? vload16(0, q) : (char16)(vload8(0, q), (char8)0);
  return c32_of(a, n > 16 ? (char16)(vload8(2, q), (char8)0) : (char16)0);
}
// Row a of K values (times NW) into xq (64 k: the two blocks' even k, then their odd k),
// d8 (each 64 k's steps as d0 x 4, d1 x 4) and xs (each 64 k's exact sum); its sum of
// squares (before NW) returned.
inline float cpu_i8_round(__global const float* a, __global const float* NW, int K, char* xq, float8* d8, float* xs) {
  float8 sq = 0.0f;
  for (int k0 = 0; k0 < K; k0 += 64) {
    float8 v[8];
    for (int i = 0; i < 8; ++i) {
      const int in = k0 + 8 * i < K;  // (the last block's values past K: zeros)
      v[i] = in ? vload8(0, a + k0 + 8 * i) : 0.0f;
      sq = fma(v[i], v[i], sq);
      if (NW && in) v[i] *= vload8(0, NW + k0 + 8 * i);
    }
    float d[2], sum = 0.0f;
    for (int b = 0; b < 2; ++b) {
      float8 m = 0.0f;
      for (int i = 4 * b; i < 4 * b + 4; ++i) m = fmax(m, fabs(v[i])), sum += sum8(v[i]);
      const float amax = fmax(fmax(fmax(m.s0, m.s1), fmax(m.s2, m.s3)), fmax(fmax(m.s4, m.s5), fmax(m.s6, m.s7)));
      d[b] = amax > 0.0f ? amax / 127.0f : 1.0f;
      for (int i = 4 * b; i < 4 * b + 4; ++i) {
        const char8 q = convert_char8(convert_int8(rint(v[i] / d[b])));  // (x / d: the other int8 rows' codes)
        vstore4(q.even, 0, xq + k0 + 16 * b + 4 * (i - 4 * b));
        vstore4(q.odd, 0, xq + k0 + 32 + 16 * b + 4 * (i - 4 * b));
      }
    }
    d8[k0 / 64] = (float8)(d[0], d[0], d[0], d[0], d[1], d[1], d[1], d[1]);
    xs[k0 / 64] = sum;
  }
  return sum8(sq);
}
// Column j's 64 k from k (codes read by LOAD) times x's into its int32 sums, as floats
// times the blocks' steps into a##j; with ROW2 (a constant), the same codes times the
// next row's (ye, yo, steps e) into b##j: a pair of rows shares each code's load and
// unpacking and each column's setup. The 8 columns are written out: as a loop PoCL kept
// their sums on the stack (perf: a store and a reload a column a step).
#define CPU_I8_DOT(j, LOAD, ROW2)                                                             \
  {                                                                                           \
    __builtin_prefetch(wc[j] + k / 2 + CPU_I8_AHEAD);                                         \
    const tl_c32 w = LOAD(wc[j] + k / 2);                                                     \
    const tl_c32 lo = w & (tl_c32)0x0f, hi = (w >> (tl_c32)4) & (tl_c32)0x0f;                 \
    const tl_s16 p = __builtin_ia32_pmaddubsw256(lo, xe) + __builtin_ia32_pmaddubsw256(hi, xo); \
    a##j = fma(convert_float8(__builtin_ia32_pmaddwd256(p, (tl_s16)1)), d, a##j);             \
    if (ROW2) {                                                                               \
      const tl_s16 p2 = __builtin_ia32_pmaddubsw256(lo, ye) + __builtin_ia32_pmaddubsw256(hi, yo); \
      b##j = fma(convert_float8(__builtin_ia32_pmaddwd256(p2, (tl_s16)1)), e, b##j);          \
    }                                                                                         \
  }
#define CPU_I8_DOTS(LOAD, ROW2)                                                               \
  CPU_I8_DOT(0, LOAD, ROW2) CPU_I8_DOT(1, LOAD, ROW2) CPU_I8_DOT(2, LOAD, ROW2)               \
  CPU_I8_DOT(3, LOAD, ROW2) CPU_I8_DOT(4, LOAD, ROW2) CPU_I8_DOT(5, LOAD, ROW2)               \
  CPU_I8_DOT(6, LOAD, ROW2) CPU_I8_DOT(7, LOAD, ROW2)
#define CPU_I8_FULL(p) load_c32(p)
#define CPU_I8_PART(p) load_c32_part(p, (K - k) / 2)
// A group's sums of column j scaled into vs##j (as vectors, added across lanes once at
// the end) and its offsets' part into v[j] (with ROW2, the next row's into ws##j, u[j]).
// The empty asm hides the 8 columns' scale pointers from LLVM's SLP vectorizer, whose
// gathers of them (vgatherqps) cost more than 16 scalar loads (perf: 15% of the kernel; 5%
// off bytellama's decode step).
#define CPU_I8_GROUP(j, ROW2, LEVEL_STEP, LEVEL_BASE)                                         \
  {                                                                                           \
    __global const float* sp_ = S + sg[j] + gi;                                               \
    __global const float* op_ = O + sg[j] + gi;                                               \
    __asm__("" : "+r"(sp_), "+r"(op_));                                                       \
    const float s_ = *sp_, o_ = *op_;                                                         \
    vs##j = fma(a##j, (float8)LEVEL_STEP(s_), vs##j);                                         \
    v[j] += LEVEL_BASE(s_, o_) * sx;                                                          \
    if (ROW2) {                                                                               \
      ws##j = fma(b##j, (float8)LEVEL_STEP(s_), ws##j);                                       \
      u[j] += LEVEL_BASE(s_, o_) * sy;                                                        \
    }                                                                                         \
  }
#define CPU_I8_GROUPS(ROW2, LEVEL_STEP, LEVEL_BASE)                                           \
  CPU_I8_GROUP(0, ROW2, LEVEL_STEP, LEVEL_BASE) CPU_I8_GROUP(1, ROW2, LEVEL_STEP, LEVEL_BASE) \
  CPU_I8_GROUP(2, ROW2, LEVEL_STEP, LEVEL_BASE) CPU_I8_GROUP(3, ROW2, LEVEL_STEP, LEVEL_BASE) \
  CPU_I8_GROUP(4, ROW2, LEVEL_STEP, LEVEL_BASE) CPU_I8_GROUP(5, ROW2, LEVEL_STEP, LEVEL_BASE) \
  CPU_I8_GROUP(6, ROW2, LEVEL_STEP, LEVEL_BASE) CPU_I8_GROUP(7, ROW2, LEVEL_STEP, LEVEL_BASE)
// Row m's outputs of the task's blocks of 8 columns (with ROW2, row m + 1's too), x
// rounded into xq, d8, xs (the next row's into yq, e8, ys), rinv (rinv2) its norm's.
#define CPU_I8_BLOCKS(ROW2, LEVEL_STEP, LEVEL_BASE)                                           \
  for (int cb = TASK_ID; cb < blocks; cb += TASK_COUNT) {                                     \
    const int c0 = cb * (glu ? 4 : 8);                                                        \
    CPU_GEMV_COLUMNS(c0)                                                                      \
    float8 vs0 = 0.0f, vs1 = 0.0f, vs2 = 0.0f, vs3 = 0.0f, vs4 = 0.0f, vs5 = 0.0f, vs6 = 0.0f, vs7 = 0.0f; \
    float8 ws0 = 0.0f, ws1 = 0.0f, ws2 = 0.0f, ws3 = 0.0f, ws4 = 0.0f, ws5 = 0.0f, ws6 = 0.0f, ws7 = 0.0f; \
    float v[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};                            \
    float u[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};                            \
    for (int k0 = 0, gi = 0; k0 < K; k0 += G, ++gi) {                                         \
      float8 a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, a4 = 0.0f, a5 = 0.0f, a6 = 0.0f, a7 = 0.0f; \
      float8 b0 = 0.0f, b1 = 0.0f, b2 = 0.0f, b3 = 0.0f, b4 = 0.0f, b5 = 0.0f, b6 = 0.0f, b7 = 0.0f; \
      float sx = 0.0f, sy = 0.0f;                                                             \
      for (int k = k0; k < min(K, k0 + G); k += 64) {                                         \
        const tl_c32 xe = *(const tl_c32*)(xq + k), xo = *(const tl_c32*)(xq + k + 32);       \
        const tl_c32 ye = ROW2 ? *(const tl_c32*)(yq + k) : xe;                               \
        const tl_c32 yo = ROW2 ? *(const tl_c32*)(yq + k + 32) : xo;                          \
        const float8 d = d8[k / 64], e = ROW2 ? e8[k / 64] : d;                               \
        sx += xs[k / 64];                                                                     \
        if (ROW2) sy += ys[k / 64];                                                           \
        if (k + 64 <= K) {                                                                    \
          CPU_I8_DOTS(CPU_I8_FULL, ROW2)                                                      \
        } else {                                                                              \
          CPU_I8_DOTS(CPU_I8_PART, ROW2)                                                      \
        }                                                                                     \
      }                                                                                       \
      CPU_I8_GROUPS(ROW2, LEVEL_STEP, LEVEL_BASE)                                             \
    }                                                                                         \
    float w[8]; /* (as one vector store: see CPU_GEMV_STORE) */                               \
    vstore8((vload8(0, v) + sum8x8(vs0, vs1, vs2, vs3, vs4, vs5, vs6, vs7)) * rinv, 0, w);    \
    CPU_GEMV_STORE(m, c0, w)                                                                  \
    if (ROW2) {                                                                               \
      vstore8((vload8(0, u) + sum8x8(ws0, ws1, ws2, ws3, ws4, ws5, ws6, ws7)) * rinv2, 0, w); \
      CPU_GEMV_STORE(m + 1, c0, w)                                                            \
    }                                                                                         \
  }
// Rows in pairs (an odd last row alone): each row's arithmetic is what it is alone, so a
// batch's rows get what they would in steps of one.
#define QGEMV_CPU_I8(NAME, LEVEL_STEP, LEVEL_BASE)                                            \
  TASK_KERNEL(NAME)(TASK_ARGS GEMM_ARGS) {                                                    \
    char xq[CPU_I8_MAXK] __attribute__((aligned(32))), yq[CPU_I8_MAXK] __attribute__((aligned(32))); \
    float8 d8[CPU_I8_MAXK / 64], e8[CPU_I8_MAXK / 64];                                        \
    float xs[CPU_I8_MAXK / 64], ys[CPU_I8_MAXK / 64];                                         \
    const int blocks = glu ? (N / 2 + 3) / 4 : (N + 7) / 8;                                   \
    int m = 0;                                                                                \
    for (; m + 1 < M; m += 2) {                                                               \
      const float ss = cpu_i8_round(A + (long)m * K, NW, K, xq, d8, xs);                      \
      const float ss2 = cpu_i8_round(A + (long)(m + 1) * K, NW, K, yq, e8, ys);               \
      const float rinv = NW ? 1.0f / sqrt(ss / K + eps) : 1.0f;                               \
      const float rinv2 = NW ? 1.0f / sqrt(ss2 / K + eps) : 1.0f;                             \
      CPU_I8_BLOCKS(1, LEVEL_STEP, LEVEL_BASE)                                                \
    }                                                                                         \
    if (m < M) {                                                                              \
      const float ss = cpu_i8_round(A + (long)m * K, NW, K, xq, d8, xs);                      \
      const float rinv = NW ? 1.0f / sqrt(ss / K + eps) : 1.0f, rinv2 = rinv;                 \
      CPU_I8_BLOCKS(0, LEVEL_STEP, LEVEL_BASE)                                                \
    }                                                                                         \
  }
QGEMV_CPU_I8(qgemv_cpu_i8_e0m4, E0M4_STEP, E0M4_BASE)
QGEMV_CPU_I8(qgemv_cpu_i8_int4, INT4_STEP, INT4_BASE)
#endif

#ifdef TL_CPU
QGEMV_CPU(qgemv_cpu_e0m4, E0M4_LOAD, E0M4_LEVELS8)
QGEMV_CPU(qgemv_cpu_int4, INT4_LOAD, INT4_LEVELS8)
QGEMV_CPU(qgemv_cpu_q8, Q8_LOAD, Q8_LEVELS8)
QGEMV_CPU(qgemv_cpu_q3h, Q3H_LOAD, Q3H_LEVELS8)
#ifndef TL_KV_Q8
// Row m's 16 pairs from pair p0 (their sums v[j] and v[16 + j], times sc) rotated and
// stored as ROPE_PAIR does; where they are one head's consecutive dims and the angles come
// from position ids, with one float16 sincos for the 16: a scalar sincos a pair of each head
// (ROPE_PAIR's) made bytellama's pp512 on PoCL 30% slower than the RoPE's own launch,
// which computes a token's once for all heads.
#define ROPE_PAIRS16(m, p0, v, sc)                                                            \
  {                                                                                           \
    const int R_ = D / 2, n0_ = rope_column(p0, 0, N, R_), Hq = N0 / D, Hk = N1 / D;          \
    if (positions && R_ % 16 == 0 && rcs.s7 == 0 && n0_ >= 0 && (p0) + 16 <= N / 2) {         \
      const int h_ = n0_ / D, d0_ = n0_ % D, b_ = (m) / seq, s_ = (m) % seq;                  \
      float16 lo_ = vload16(0, v) * (sc), hi_ = vload16(1, v) * (sc);                         \
      if (bias) {                                                                             \
        lo_ += vload16(0, bias + n0_);                                                        \
        hi_ += vload16(0, bias + n0_ + R_);                                                   \
      }                                                                                       \
      if (h_ < Hq + Hk) {                                                                     \
        const float pos_ = (float)((__global const long*)cosv)[b_ * rcs.s4 + s_ * rcs.s6];    \
        float16 c_;                                                                           \
        const float16 sn_ = sincos(pos_ * vload16(0, sinv + d0_), &c_) * sscale;              \
        c_ *= cscale;                                                                         \
        const float16 x_ = lo_ * c_ - hi_ * sn_;                                              \
        hi_ = hi_ * c_ + lo_ * sn_;                                                           \
        lo_ = x_;                                                                             \
      }                                                                                       \
      if (h_ < Hq) {                                                                          \
        __global float* q_ = QR + (((long)b_ * Hq + h_) * seq + s_) * D + d0_;                \
        vstore16(lo_, 0, q_);                                                                 \
        vstore16(hi_, 0, q_ + R_);                                                            \
      } else {                                                                                \
        __global KV_T* cache_ = h_ < Hq + Hk ? kc : vc;                                       \
        const long at_ = ROPE_CACHE_AT(m, n0_, kv_rows);                                      \
        KV_ST8(lo_.lo, at_, cache_);                                                          \
        KV_ST8(lo_.hi, at_ + 8, cache_);                                                      \
        KV_ST8(hi_.lo, at_ + R_, cache_);                                                     \
        KV_ST8(hi_.hi, at_ + R_ + 8, cache_);                                                 \
      }                                                                                       \
    } else {                                                                                  \
      for (int j_ = 0; j_ < 16; ++j_) { ROPE_PAIR(m, (p0) + j_, v[j_] * (sc), v[16 + j_] * (sc)) } \
    }                                                                                         \
  }
#endif
#define NO_PAIRS16(m, p0, v, sc)
// Each scheme's plain row and its RoPE row (ROPE: its name).
#define QGEMM_CPU_ROWS(NAME, ROPE, PACK8, WORD_T, WORD, LEVEL16)                              \
  QGEMM_CPU(NAME, PACK8, WORD_T, WORD, LEVEL16, , 0, NO_PAIRS16)                              \
  QGEMM_CPU_ROPE(ROPE, PACK8, WORD_T, WORD, LEVEL16)
#ifdef TL_KV_Q8
#define QGEMM_CPU_ROPE(NAME, PACK8, WORD_T, WORD, LEVEL16)
#else
#define QGEMM_CPU_ROPE(NAME, PACK8, WORD_T, WORD, LEVEL16) \
  QGEMM_CPU(NAME, PACK8, WORD_T, WORD, LEVEL16, ROPE_EPI_ARGS, D / 2, ROPE_PAIRS16)
#endif
QGEMM_CPU_ROWS(qgemm_cpu_e0m4, qgemm_cpu_rope_e0m4, CODES_PACK8, uint, E0M4_LOAD, E0M4_LEVEL16)
QGEMM_CPU_ROWS(qgemm_cpu_int4, qgemm_cpu_rope_int4, CODES_PACK8, uint, INT4_LOAD, INT4_LEVEL16)
QGEMM_CPU_ROWS(qgemm_cpu_q8, qgemm_cpu_rope_q8, CODES_PACK8, ulong, Q8_WORD, Q8_LEVEL16)
QGEMM_CPU_ROWS(qgemm_cpu_q3h, qgemm_cpu_rope_q3h, CODES_PACK8, uint, Q3H_LOAD, Q3H_LEVEL16)
QGEMM_CPU_ROWS(gemm_cpu_f32, gemm_cpu_rope_f32, FLOATS_PACK8, uint, , )
#endif  // TL_CPU
