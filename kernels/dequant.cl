// The quantized schemes' codes as levels (tl.QMatMul, docs/ops.md): the helpers that
// qmatmul.cl's and gemm.cl's kernels share. A column's codes are contiguous along k.

inline uint nibble(__global const uchar* w, int k) { return (w[k >> 1] >> ((k & 1) * 4)) & 15; }

inline int q3h_code(__global const uchar* w, int k) {
  const int bit = 7 * (k >> 1);
  const int pair = ((w[bit >> 3] | (w[(bit >> 3) + 1] << 8)) >> (bit & 7)) & 0x7f;
  return (k & 1) ? pair % 11 : pair / 11;
}

// The level f(code) of weight k of a column, one at a time...
#define E0M4_LEVEL(q) as_float(0x40000000u | ((uint)(q) << 19))  // E0M4: two bit operations
#define INT_LEVEL(q) ((float)(q))
#define E0M4_AT(w, k) E0M4_LEVEL(nibble(w, k))
#define INT4_AT(w, k) INT_LEVEL(nibble(w, k))
#define Q8_AT(w, k) ((float)((__global const char*)(w))[k])
#define Q3H_AT(w, k) ((float)q3h_code(w, k))

// ... and eight at a time from k % 8 == 0: a 4-byte word of nibbles, 8 bytes, or 4 q3h pairs.
#define SHIFTS8 (uint8)(0, 4, 8, 12, 16, 20, 24, 28)
#define NIBBLES8(w, k) ((uint8)as_uint(vload4((k) >> 3, w)) >> SHIFTS8 & 15u)
#define E0M4_AT8(w, k) e0m4_levels8(as_uint(vload4((k) >> 3, w)))
#define INT4_AT8(w, k) convert_float8(NIBBLES8(w, k))
#define Q8_AT8(w, k) convert_float8(vload8(0, (__global const char*)(w) + (k)))
#define Q3H_AT8(w, k) q3h_levels8(w, k)

// A group's weights as q s' + o' (code q, scale s, offset o): the levels' step s' and base
// o', where the levels are uniform (gemm.cl's int8 tiles).
#define E0M4_STEP(s) (0.125f * (s))
#define E0M4_BASE(s, o) (2.0f * (s) + (o))
#define INT4_STEP(s) (s)
#define INT4_BASE(s, o) (o)
#define Q8_STEP INT4_STEP
#define Q8_BASE INT4_BASE
#define Q3H_STEP INT4_STEP
#define Q3H_BASE INT4_BASE

// E0M4's 8 levels of a word: each nibble shifted straight to bits 19..22 by a constant,
// then masked and given the exponent: two operations per code (one LOP3 on NVIDIA). CPUs
// take the 8 as one vector: each nibble to the bottom by its lane's shift, all up by 19,
// then mask and exponent at once: four vector operations where the per-lane constants
// made five (left and right shifts, a blend; the decode GEMV's loop on AVX-512).
inline float8 e0m4_levels8(uint x) {
  const uint m = 0x00780000u, e = 0x40000000u;
#ifdef TL_CPU
  return as_float8(((uint8)x >> SHIFTS8) << 19 & m | e);
#else
  return as_float8((uint8)((x << 19 & m) | e, (x << 15 & m) | e, (x << 11 & m) | e, (x << 7 & m) | e,
                           (x << 3 & m) | e, (x >> 1 & m) | e, (x >> 5 & m) | e, (x >> 9 & m) | e));
#endif
}

// 4 pairs are 28 bits from a bit offset of 0 or 4 (7 * 4j): one 4-byte read (the row's
// spare byte covers the end).
#define Q3H_WORD(w, k) (as_uint(vload4(0, (w) + ((7 * ((k) >> 1)) >> 3))) >> ((7 * ((k) >> 1)) & 7))
inline float8 q3h_pairs8(uint word) {
  const uint4 pair = (uint4)word >> (uint4)(0, 7, 14, 21) & 0x7fu;
  const uint4 hi = pair / 11u, lo = pair - hi * 11u;
  return convert_float8((uint8)(hi.s0, lo.s0, hi.s1, lo.s1, hi.s2, lo.s2, hi.s3, lo.s3));
}
inline float8 q3h_levels8(__global const uchar* w, int k) { return q3h_pairs8(Q3H_WORD(w, k)); }

// The prefill tiles' form (gemm.cl): 8 codes from k % 8 == 0 as one raw word, loaded ahead
// of their use and turned into levels later. RAW is its type; LOAD reads it (the 4-bit
// schemes and q8 whole-word, so rows must be 4- or 8-byte aligned); LEVELS8 gives the 8
// levels.
#define E0M4_RAW uint
#define E0M4_LOAD(w, k) (*(__global const uint*)((w) + ((k) >> 1)))
#define E0M4_LEVELS8(r) e0m4_levels8(r)
#define INT4_RAW uint
#define INT4_LOAD E0M4_LOAD
#define INT4_LEVELS8(r) convert_float8((uint8)(r) >> SHIFTS8 & 15u)
#define Q8_RAW char8
#define Q8_LOAD(w, k) (*(__global const char8*)((w) + (k)))
#define Q8_LEVELS8(r) convert_float8(r)
#define Q3H_RAW uint
#define Q3H_LOAD Q3H_WORD
#define Q3H_LEVELS8(r) q3h_pairs8(r)
