// Lab (scripts/mmq_lab.c; after kernels/mma.cl, built with TL_MMA): a 4-bit GEMM on int8 tensor cores, llama.cpp's MMQ idea in
// OpenCL through inline PTX. A is int8 per (row, weight group) with its scale d and its
// exact sum s (mmq_lab.c makes them; a prep kernel would), each 8-chunk of k stored
// [0 2 4 6 1 3 5 7] so that a 4-byte word of codes splits into the two B registers of
// m16n8k32 by two masks: w & 0x0f0f0f0f holds k 0 2 4 6, (w >> 4) & 0x0f0f0f0f k 1 3 5 7.
// For uniform levels (e0m4: w = (2 + q / 8) s + o = q s' + o'), a group's product is
// s' d sum(qa q) + o' s: integer sums over the group, two FMAs a group.
#define CP_ASYNC_WAIT_N(n) CP_ASYNC_WAIT(n)

#ifndef STAGES
#define STAGES 3
#define WAITN 1 /* STAGES - 2, a literal for PTX */
#endif
#ifndef KS
#define KS 64 /* k a stage: KS / 32 mma steps between barriers */
#endif
// A's scales and sums: per (row, weight group), or with ABLOCK32 per (row, 32 k) as
// llama.cpp's q8_1 (an outlier then coarsens 32 values, not a group's), folded every 32 k.
#ifdef ABLOCK32
#define ABLOCKS (KS / 32)
#else
#define ABLOCKS 1
#endif
// Local rows: padded against bank conflicts, or with SWIZZLE unpadded and each 16-byte
// chunk c of row r (column n) stored at chunk ASWZ(r, c) (BSWZ(n, c)).
#ifdef SWIZZLE
#define AROW KS
#define BCOL (KS / 2)
#if KS == 128
#define ASWZ(r, c) ((c) ^ (((r) & 3) << 1))
#define BSWZ(n, c) ((c) ^ (((n) >> 1) & 3))
#else
#define ASWZ(r, c) ((c) ^ ((((r) >> 1) & 1) << 1))
#define BSWZ(n, c) ((c) ^ (((n) >> 2) & 1))
#endif
#else
#define AROW (KS + 32)
#define BCOL (KS / 2 + 16)
#define ASWZ(r, c) (c)
#define BSWZ(n, c) (c)
#endif
// BM x BN tiles of 256 items (8 warps, WM x WN of them), KS k a stage (G % KS == 0). AQ
// [M][K] int8, AD, AS [groups][M] (M % 4 == 0); W codes [N][K / 2]; S, O [N][groups]; C
// [M][N]. A stage's copies bring its group's scales too (the fold reads them from local
// memory: global loads there stalled every group).
#define MMQ(NAME, BM, BN, WM)                                                                       \
  __kernel __attribute__((reqd_work_group_size(256, 1, 1))) void NAME(                               \
      __global const uchar* AQ, __global const uchar* W, __global float* C, int M, int N, int K,       \
      __global const float* AD, __global const float* AS, __global const float* S, __global const float* O, int G) { \
    const int WN = 8 / WM, TM = BM / WM / 16, TN = BN / WN / 8; /* warp tile: TM x 16 rows, TN x 8 cols */ \
    __local uint4 As[STAGES][BM * AROW / 16];                                                      \
    __local uint4 Bs[STAGES][BN * BCOL / 16];                                                      \
    __local float Ss[STAGES][2][BN], Ds[STAGES][2][ABLOCKS][BM] __attribute__((aligned(16)));      \
    const int tid = get_local_id(0), lane = tid & 31, warp = tid >> 5;                             \
    const int wm = warp % WM, wn = warp / WM, g = lane >> 2, t = lane & 3;                         \
    const int m0 = get_group_id(1) * BM, n0 = get_group_id(0) * BN, groups = (K + G - 1) / G;           \
    /* split K (grid z): whole groups a split, partial sums to C + z M N */                        \
    const int gps = (groups + get_num_groups(2) - 1) / get_num_groups(2), kb = get_group_id(2) * gps * (G / KS); \
    const int KT = min(K / KS, kb + gps * (G / KS)) - kb;                                          \
    C += (long)get_group_id(2) * M * N;                                                            \
    const int per = G / 32;                                                                        \
    int iacc[BM / WM / 16][BN * WM / 64][4];                                                       \
    float facc[BM / WM / 16][BN * WM / 64][4];                                                     \
    _Pragma("unroll") for (int i = 0; i < TM; ++i) _Pragma("unroll") for (int j = 0; j < TN; ++j)  \
      _Pragma("unroll") for (int x = 0; x < 4; ++x) iacc[i][j][x] = 0, facc[i][j][x] = 0.0f;        \
    _Pragma("unroll") for (int st = 0; st < STAGES - 1; ++st) {                                    \
      if (st < KT) MMQ_SLICE(st, kb + st, BM, BN)                                                       \
      CP_ASYNC_COMMIT();                                                                           \
    }                                                                                              \
    for (int kt = 0; kt < KT; ++kt) {                                                              \
      CP_ASYNC_WAIT_N(WAITN);                                                                      \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                \
      const int nx = kt + STAGES - 1, st = kt % STAGES;                                            \
      if (nx < KT) MMQ_SLICE(nx % STAGES, kb + nx, BM, BN)                                              \
      CP_ASYNC_COMMIT();                                                                           \
      _Pragma("unroll") for (int u = 0; u < KS / 32; ++u) {                                        \
        const int k32 = (kb + kt) * (KS / 32) + u;                                                        \
        uint b0[BN * WM / 64], b1[BN * WM / 64];                                                   \
        _Pragma("unroll") for (int j = 0; j < TN; ++j) {                                           \
          const int n = wn * TN * 8 + j * 8 + g;                                                   \
          const uint w = *(__local const uint*)((__local const uchar*)Bs[st] + n * BCOL + BSWZ(n, u) * 16 + t * 4); \
          b0[j] = w & 0x0f0f0f0fu, b1[j] = (w >> 4) & 0x0f0f0f0fu;                                 \
        }                                                                                          \
        _Pragma("unroll") for (int i = 0; i < TM; ++i) {                                           \
          const int r = wm * TM * 16 + i * 16 + g;                                                 \
          __local const uchar* ar = (__local const uchar*)As[st] + (t & 1) * 8;                    \
          const int c = 2 * u + (t >> 1);                                                          \
          const uint2 lo = *(__local const uint2*)(ar + r * AROW + ASWZ(r, c) * 16);               \
          const uint2 hi = *(__local const uint2*)(ar + (r + 8) * AROW + ASWZ(r + 8, c) * 16);     \
          _Pragma("unroll") for (int j = 0; j < TN; ++j) MMA_S8U8(iacc[i][j], lo.x, hi.x, lo.y, hi.y, b0[j], b1[j]); \
        }                                                                                          \
        if (ABLOCKS > 1 || (k32 + 1) % per == 0 || k32 == K / 32 - 1) { /* A's block ends: fold */ \
          _Pragma("unroll") for (int i = 0; i < TM; ++i) _Pragma("unroll") for (int j = 0; j < TN; ++j) \
            _Pragma("unroll") for (int h = 0; h < 2; ++h) _Pragma("unroll") for (int x = 0; x < 2; ++x) { \
              float* f = &facc[i][j][2 * h + x];                                                   \
              const int lc = wn * TN * 8 + j * 8 + 2 * t + x, lr = wm * TM * 16 + i * 16 + g + 8 * h; \
              const float s = Ss[st][0][lc];                                                       \
              const int b = ABLOCKS > 1 ? u : 0;                                                   \
              *f = fma(small_i2f(iacc[i][j][2 * h + x]), 0.125f * s * Ds[st][0][b][lr], fma(2.0f * s + Ss[st][1][lc], Ds[st][1][b][lr], *f)); \
              iacc[i][j][2 * h + x] = 0;                                                           \
            }                                                                                      \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    _Pragma("unroll") for (int i = 0; i < TM; ++i) _Pragma("unroll") for (int h = 0; h < 2; ++h) {  \
      const int m = m0 + wm * TM * 16 + i * 16 + g + 8 * h;                                        \
      if (m >= M) continue;                                                                        \
      _Pragma("unroll") for (int j = 0; j < TN; ++j) _Pragma("unroll") for (int x = 0; x < 2; ++x) { \
        const int n = n0 + wn * TN * 8 + j * 8 + 2 * t + x;                                        \
        if (n < N) C[(long)m * N + n] = facc[i][j][2 * h + x];                                     \
      }                                                                                            \
    }                                                                                              \
  }
// Slice kt into stage st: A's BM rows of KS bytes (KS / 16 chunks a row), the codes' BN
// columns of KS / 2 bytes; zeros past M and N.
#define MMQ_SLICE(st, kt, BM, BN)                                                                  \
  {                                                                                                \
    _Pragma("unroll") for (int e0 = 0; e0 < BM * KS / 16; e0 += 256) {                             \
      const int e = e0 + tid, r = e / (KS / 16), c = e % (KS / 16), ok = m0 + r < M;               \
      if (e < BM * KS / 16)                                                                        \
        CP_ASYNC16((__local uchar*)As[st] + r * AROW + ASWZ(r, c) * 16, ok ? AQ + (long)(m0 + r) * K + (kt) * KS + c * 16 : AQ, ok ? 16 : 0); \
    }                                                                                              \
    {                                                                                              \
      const int gi = (kt) * KS / G, a = tid - 2 * BN, rows = M - m0 - 4 * (a % (BM / 4));          \
      const int blk = (a / (BM / 4)) % ABLOCKS, ab = ABLOCKS > 1 ? (kt) * (KS / 32) + blk : gi;    \
      if (tid < 2 * BN) {                                                                          \
        const int n = min(n0 + tid % BN, N - 1);                                                   \
        CP_ASYNC4(&Ss[st][tid / BN][tid % BN], (tid < BN ? S : O) + (long)n * groups + gi, 4);     \
      } else if (a < BM / 2 * ABLOCKS) {                                                           \
        CP_ASYNC16(&Ds[st][a / (BM / 4 * ABLOCKS)][blk][4 * (a % (BM / 4))],                       \
                   (a < BM / 4 * ABLOCKS ? AD : AS) + (long)ab * M + m0 + 4 * (a % (BM / 4)), rows >= 4 ? 16 : rows > 0 ? 4 * rows : 0); \
      }                                                                                            \
    }                                                                                              \
    _Pragma("unroll") for (int e0 = 0; e0 < BN * KS / 32; e0 += 256) {                             \
      const int e = e0 + tid, n = e / (KS / 32), c = e % (KS / 32), ok = n0 + n < N;               \
      if (e < BN * KS / 32)                                                                        \
        CP_ASYNC16((__local uchar*)Bs[st] + n * BCOL + BSWZ(n, c) * 16, ok ? W + (long)(n0 + n) * (K / 2) + (kt) * (KS / 2) + c * 16 : W, ok ? 16 : 0); \
    }                                                                                              \
  }

#ifndef NO128x64
MMQ(mmq_128x64, 128, 64, 4)
#endif
#ifndef ONLY64
MMQ(mmq_128x32, 128, 32, 8)
#endif

MMQ(mmq_64x64, 64, 64, 4)
