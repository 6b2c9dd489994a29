// tl.Attention: softmax(q k^T * scale [soft-capped] + mask) v, fp32 throughout, with the
// online softmax (running max and sum), so scores are never written to memory. q is
// [B,H,S,D]; k, v are [B,Hkv,T,D|Dv] and query head h reads kv head h / (H / Hkv), so
// grouped-query attention never repeats the cache. Every operand is read through
// strides: q, k, v and out by (b, head, row) with the head dim contiguous, so the
// exporters' head/sequence transposes need no copy; the mask by broadcast (b, h, s, t).
#define ATT_MAX_D 256
// Whether a kernel's local arrays of this many floats fit the device (TL_LOCAL_MEM bytes,
// set by KernelLibrary): the work-group kernels that stage more than 32 KB are left out
// where they do not, as on many mobile GPUs, and lowering falls back to others.
#define ATT_FITS(floats) (TL_LOCAL_MEM >= 4 * (floats))

// Whether key t of query row s is hidden by the recognized masks (tl-fuse causal-mask):
// causally (row s sits at position off + s: off is T - S, or for an in-place cache the
// cache's true length, att_offset), or by a zero in the key mask (elements of kmb bytes;
// kmo: the row's batch offset).
inline int att_hidden(int s, int t, int off, int causal, __global const uchar* km, int kmb, int kmo) {
  if (causal && t > s + off) return 1;
  if (!km) return 0;
  const int e = kmo + t;
  return kmb == 8 ? ((__global const long*)km)[e] == 0 : kmb == 4 ? ((__global const int*)km)[e] == 0 : km[e] == 0;
}

// Where query row 0 of batch row b sits: T - S keys before it, or an in-place cache's true
// length for that row (each batch row its own sequence; the keys past it and the new rows
// are padding: tl-plan --pad, or a longer row's).
#define ATT_OFFSET (kv_rows ? kv_rows[b] : T - S)

// A score as the unfused graph computes it: scaled, soft-capped, plus the float mask, plus
// mask_value where a recognized mask hides the key.
inline float att_score(float dot, float scale, float softcap, __global const float* mask, int moff, int has_mask,
                       int hidden, float mask_value) {
  float x = dot * scale;
  if (softcap > 0.0f) x = softcap * tanh(x / softcap);
  if (has_mask) x += mask[moff];
  return hidden ? x + mask_value : x;
}

// Whether a causal row whose running max is m may still need the keys after its own:
// only while no visible key has lifted m above half a finite mask_value, since a hidden
// key then adds exp(x + mask_value - m) = 0 (a row that padding hid whole averages them).
inline int att_needs_hidden(float m, float mask_value) { return mask_value > -INFINITY && m <= 0.5f * mask_value; }

// The tiled prefill kernels at key tile t0: past `seen`, the last key any row of the
// work-group may see, every key is hidden, so the loop stops unless some item's `needs`
// (a row of its with no visible key yet: att_needs_hidden). Every item must reach it.
#define ATT_STOP_PAST_SEEN(first, needs) \
  if (t0 >= seen) {                      \
    if (first) more = 0;                 \
    barrier(CLK_LOCAL_MEM_FENCE);        \
    if (needs) more = 1;                 \
    barrier(CLK_LOCAL_MEM_FENCE);        \
    if (!more) break;                    \
  }

// CPU family: one work item per query row (b, h, s), a work-group each so that a decode
// step's few rows spread over the cores; keys in blocks of ATT_CPU_BK, scored, then the
// block's maximum rescales the sums once, the head dims four at a time where they allow.
#define ATT_CPU_BK 16
#define ATT_ARGS                                                                                      \
  int rows, int H, int Hkv, int S, int T, int D, int Dv, float scale, float softcap, int has_mask, int qsb, \
      int qsh, int qss, int ksb, int ksh, int kst, int vsb, int vsh, int vst, int msb, int msh, int mss, int mst, \
      int osb, int osh, int oss, int zero_rows, int causal, float mask_value, __global const uchar *km, int kmb, int kmsb, \
      __global const int *kv_rows

// What a kernel of one item per query row (attention_f32, attention_cpu_dec_f32) starts
// with: the row's indices, its q, its kv head's k and v, its mask offset, and `seen`: under
// a causal mask the keys after the row's own are hidden, so it stops there unless
// att_needs_hidden (as attention_tile_f32 does).
#define ATT_ROW_START(ROW)                                                                         \
  const int row = ROW;                                                                             \
  if (row >= rows) return;                                                                         \
  const int s = row % S, h = row / S % H, b = row / (S * H), g = h / (H / Hkv), off = ATT_OFFSET;  \
  __global const float* qr = q + b * qsb + h * qsh + s * qss;                                      \
  __global const KV_T* kb = KV_AT(k, b * ksb + g * ksh);                                           \
  __global const KV_T* vb = KV_AT(v, b * vsb + g * vsh);                                           \
  const int moff = b * msb + h * msh + s * mss, seen = causal ? min(T, s + off + 1) : T;

__kernel void attention_f32(__global const float* q, __global const KV_T* k, __global const KV_T* v,
                            __global const float* mask, __global float* out, ATT_ARGS) {
  ATT_ROW_START(get_global_id(0))
  const int quads = ((D | Dv) & 3) == 0;
  float acc[ATT_MAX_D], x[ATT_CPU_BK];
  for (int d = 0; d < Dv; ++d) acc[d] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int t0 = 0; t0 < T; t0 += ATT_CPU_BK) {
    if (t0 >= seen && !att_needs_hidden(m, mask_value)) break;
    const int n = min(ATT_CPU_BK, T - t0);
    float bm = -INFINITY;
    for (int j = 0; j < n; ++j) {
      __global const KV_T* kr = KV_AT(kb, (long)(t0 + j) * kst);
      float dot = 0.0f;
      if (quads) {
        float4 a = 0.0f;
        for (int d = 0; d < D; d += 4) a += vload4(0, qr + d) * KV_LD4(d / 4, kr);
        dot = a.x + a.y + a.z + a.w;
      } else {
        for (int d = 0; d < D; ++d) dot += qr[d] * KV_LD(kr, d);
      }
      x[j] = att_score(dot, scale, softcap, mask, moff + (t0 + j) * mst, has_mask,
                       att_hidden(s, t0 + j, off, causal, km, kmb, b * kmsb), mask_value);
      bm = fmax(bm, x[j]);
    }
    if (bm == -INFINITY) continue;
    if (bm > m) {  // a new maximum rescales what was summed so far
      const float corr = exp(m - bm);
      l *= corr;
      for (int d = 0; d < Dv; ++d) acc[d] *= corr;
      m = bm;
    }
    for (int j = 0; j < n; ++j) {
      if (x[j] == -INFINITY) continue;
      const float p = exp(x[j] - m);
      __global const KV_T* vr = KV_AT(vb, (long)(t0 + j) * vst);
      l += p;
      if (quads) {
        for (int d = 0; d < Dv; d += 4) vstore4(vload4(0, acc + d) + p * KV_LD4(d / 4, vr), 0, acc + d);
      } else {
        for (int d = 0; d < Dv; ++d) acc[d] += p * KV_LD(vr, d);
      }
    }
  }
  __global float* o = out + b * osb + h * osh + s * oss;
  // A row masked whole is 0/0, NaN, as Softmax gives; or 0 (SDPA's Where(IsNaN(p), 0, p)).
  for (int d = 0; d < Dv; ++d) o[d] = zero_rows && !(l > 0.0f) ? 0.0f : acc[d] / l;
}

// CPU prefill, plain attention (no float mask or soft cap): a task (a work-group of one
// item) per (b, h, 16 query rows), the rows as a vector's 16 lanes. q is transposed once a
// task (qt: a dim's 16 rows together) and each block of 16 keys read once as floats (kf, a
// key ATT_CPUQ_MAX_D apart: the caches' fp16 or 8-bit codes converted once, and one base
// register for all 16 keys), so the block scores as 16 float16 sums, each key element a
// broadcast: no key block is transposed (scattering it cost 9-16% of the kernel, and AMD's
// cores microcode scatters), and the running max, its
// rescale, the sums and the masks are lane-wise, with no horizontal max or sum a row. The
// block's 16 weights of a row are then broadcasts from p ([key][row]) into that row's value
// sums, 8 rows at a time sharing each load of a value row, 16 (or 8) dims a step.
#define ATT_CPUQ_ROWS 16
#define ATT_CPUQ_MAX_D 128
#define CPUQ_KEYS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11) X(12) X(13) X(14) X(15)
#define CPUQ_ROWS(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7)
// Key j's 16 scores (a short last block repeats its last key in kf; masked as past below).
#define CPUQ_KEY(j) float16 x##j = 0.0f;
#define CPUQ_DOT(j) x##j = fma(qd, (float16)kf[ATT_CPUQ_MAX_D * j + d], x##j);
// Its 16 rows' scores: scaled, mask_value where hidden (causally per row, by the key mask
// for all), -inf past the keys or in a row that takes no key here; the block's maximum.
#define CPUQ_MASK(j)                                                                                \
  {                                                                                                \
    const int16 hid = (causal ? (int16)(t0 + j) > srow + off : (int16)0) | (int16)(-keyh[j]);       \
    x##j = j < n ? select(x##j * scale, x##j * scale + mask_value, hid) : (float16)(-INFINITY);      \
    x##j = select((float16)(-INFINITY), x##j, on);                                                  \
    bm = fmax(bm, x##j);                                                                            \
  }
// ... or where every row sees all 16 keys and no key mask applies, only scaled.
#define CPUQ_SCALE(j) x##j *= scale, bm = fmax(bm, x##j);
#define CPUQ_EXP(j)                                 \
  {                                                 \
    const float16 e = exp(x##j - msafe);            \
    lv += e;                                        \
    vstore16(e, j, p);                              \
  }
#define CPUQ_LOAD(i) float8 o##i = vload8(0, acc + (r0 + i) * Dv + d);
#define CPUQ_ADD(i) o##i = fma((float8)p[16 * j + r0 + i], vj, o##i);
#define CPUQ_SAVE(i) vstore8(o##i, 0, acc + (r0 + i) * Dv + d);
#define CPUQ_LOAD16(i) float16 o##i = vload16(0, acc + (r0 + i) * Dv + d);
#define CPUQ_ADD16(i) o##i = fma((float16)p[16 * j + r0 + i], vj, o##i);
#define CPUQ_SAVE16(i) vstore16(o##i, 0, acc + (r0 + i) * Dv + d);

// The decode kernels (attention_dec*, attention_gqa_f32, attention_cpu_dec_f32) and the
// portable GPU prefill one (attention_flash_f32) can do their layer's tl.RoPE with
// in-place cache appends themselves (a tl.RoPE marked in_attention by tl-plan), a launch
// fewer a layer: q is rotated from the RoPE's input xq as it is staged, the step's new
// keys and values (keys [off, off + S)) come from its inputs xk (rotated) and xv, never
// from the caches, and the work-groups of each kv head's first query head write them into
// the caches kc and vc (k and v themselves) for the next steps. The inputs are
// [B, H, S, D], or [B, S, H, D] where xbshd's bit 0, 1, 2 (q, k, v: the RoPE's x_bshd,
// x2_bshd, x3_bshd) says so. The RoPE's position ids (row s of batch b
// at pos[b * pbs + s * pss]), inv_freq and attributes follow (common.cl's rope_pos_at).
// xq == 0: the RoPE ran.
#define ATT_FRESH_ARGS                                                                                         \
  __global const float *xq, __global const float *xk, __global const float *xv, __global KV_T *kc,             \
      __global KV_T *vc, __global const long *pos, int pbs, int pss, __global const float *inv_freq, int rot, \
      float cscale, float sscale, int xbshd
// Where row s of head h (of Hn, Dn wide) of batch b starts in a RoPE input, [B, S, Hn, Dn]
// when bs, else [B, Hn, S, Dn].
#define ATT_XROW(bs, b, h, s, Hn, Dn) \
  ((bs) ? (((long)(b) * S + (s)) * (Hn) + (h)) * (Dn) : (((long)(b) * (Hn) + (h)) * S + (s)) * (Dn))
// Element d of the head row x of batch b's row s, rotated (common.cl's rope_pos_at).
#define ATT_ROPE(x, d, b, s) rope_pos_at(x, d, d, rot, (float)pos[(b) * pbs + (s) * pss], inv_freq, cscale, sscale)
#define ATT_FRESH_Q(r, d) (xq ? ATT_ROPE(xq + (r), d, b, s) : q[(r) + (d)])
// Element d of row s of query head h, rotated from xq.
#define ATT_FRESH_QH(b, h, s, d) ATT_ROPE(xq + ATT_XROW(xbshd & 1, b, h, s, H, D), d, b, s)
// Element d of new row j of kv head g in batch b: the key rotated, the value.
#define ATT_FRESH_K(b, g, j, d) ATT_ROPE(xk + ATT_XROW(xbshd & 2, b, g, j, Hkv, D), d, b, j)
#define ATT_FRESH_V(b, g, j, d) xv[ATT_XROW(xbshd & 4, b, g, j, Hkv, Dv) + (d)]
// New rows [r0, r1) of kv head g into the caches after their true length `off` (a launch
// that does this uses its own copies of those rows, whatever it reads there), by the
// group's NT items from item `lid`: an element an item, or for q8 caches a block of 32.
#ifdef TL_KV_Q8
#define ATT_FRESH_BLOCKS(b, g, W, VALUE, SB, SH, ST, C, NT, r0, r1)                                              \
  for (int e = 32 * lid; e < ((r1) - (r0)) * (W); e += 32 * (NT)) {                                              \
    const int j_ = (r0) + e / (W), d_ = e % (W);                                                                 \
    float x_[32];                                                                                                \
    for (int u = 0; u < 32; ++u) x_[u] = VALUE(b, g, j_, d_ + u);                                                \
    kv_q8_store(x_, (long)(b) * (SB) + (long)(g) * (SH) + (long)(off + j_) * (ST) + d_, C);                      \
  }
#define ATT_FRESH_STORE(b, g, NT, r0, r1)                                                                              \
  {                                                                                                                    \
    ATT_FRESH_BLOCKS(b, g, D, ATT_FRESH_K, ksb, ksh, kst, kc, NT, r0, r1)                                              \
    ATT_FRESH_BLOCKS(b, g, Dv, ATT_FRESH_V, vsb, vsh, vst, vc, NT, r0, r1)                                             \
  }
#else
#define ATT_FRESH_STORE(b, g, NT, r0, r1)                                                                              \
  {                                                                                                                    \
    for (int e = lid; e < ((r1) - (r0)) * D; e += (NT)) {                                                              \
      const int j_ = (r0) + e / D;                                                                                     \
      KV_ST(ATT_FRESH_K(b, g, j_, e % D), (long)(b) * ksb + (long)(g) * ksh + (long)(off + j_) * kst + e % D, kc);     \
    }                                                                                                                  \
    for (int e = lid; e < ((r1) - (r0)) * Dv; e += (NT)) {                                                             \
      const int j_ = (r0) + e / Dv;                                                                                    \
      KV_ST(ATT_FRESH_V(b, g, j_, e % Dv), (long)(b) * vsb + (long)(g) * vsh + (long)(off + j_) * vst + e % Dv, vc);   \
    }                                                                                                                  \
  }
#endif

#ifdef TL_CPU
__kernel __attribute__((reqd_work_group_size(1, 1, 1))) void attention_cpu_f32(
    __global const float* q, __global const KV_T* k, __global const KV_T* v, __global const float* mask,
    __global float* out, ATT_ARGS) {
  const int tiles = (S + ATT_CPUQ_ROWS - 1) / ATT_CPUQ_ROWS, task = get_group_id(0);
  const int s0 = task % tiles * ATT_CPUQ_ROWS, h = task / tiles % H, b = task / tiles / H;
  const int g = h / (H / Hkv), off = ATT_OFFSET, nr = min(ATT_CPUQ_ROWS, S - s0);
  __global const KV_T* kb = KV_AT(k, b * ksb + g * ksh);
  __global const KV_T* vb = KV_AT(v, b * vsb + g * vsh);
  float qt[16 * ATT_CPUQ_MAX_D] __attribute__((aligned(64))), kf[16 * ATT_CPUQ_MAX_D] __attribute__((aligned(64)));
  float acc[16 * ATT_CPUQ_MAX_D] __attribute__((aligned(64))), p[256] __attribute__((aligned(64))), row[16];
  for (int r = 0; r < 16; ++r) {  // rows past the task's repeat its last (their lanes take no key)
    __global const float* qr = q + b * qsb + h * qsh + (s0 + min(r, nr - 1)) * qss;
    for (int d = 0; d < D; ++d) qt[16 * d + r] = qr[d];
  }
  for (int i = 0; i < 16 * Dv; ++i) acc[i] = 0.0f;
  const int16 lane = (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  const int16 srow = s0 + min(lane, nr - 1), real = lane < nr;
  float16 mv = -INFINITY, lv = 0.0f;
  for (int t0 = 0; t0 < T; t0 += 16) {
    // A row takes the block unless all its keys from t0 on are hidden and a visible one
    // already lifted its max (att_needs_hidden); none takes it: done.
    const int16 needs = mask_value > -INFINITY ? islessequal(mv, (float16)(0.5f * mask_value)) : (int16)0;
    const int16 on = real & ((causal ? (int16)t0 <= srow + off : (int16)(-1)) | needs);
    if (!any(on)) break;
    const int n = min(16, T - t0);
    int keyh[16];
    for (int j = 0; j < 16; ++j) keyh[j] = km && j < n && att_hidden(0, t0 + j, 0, 0, km, kmb, b * kmsb);
    for (int j = 0; j < 16; ++j) {  // the block's keys as floats, a row ATT_CPUQ_MAX_D apart
      __global const KV_T* kr = KV_AT(kb, (long)(t0 + min(j, n - 1)) * kst);
      if (D % 8 == 0) {
        for (int d = 0; d < D; d += 8) vstore8(KV_LD8(d / 8, kr), 0, kf + ATT_CPUQ_MAX_D * j + d);
      } else {
        for (int d = 0; d < D; ++d) kf[ATT_CPUQ_MAX_D * j + d] = KV_LD(kr, d);
      }
    }
    CPUQ_KEYS(CPUQ_KEY)
    for (int d = 0; d < D; ++d) {
      const float16 qd = vload16(d, qt);
      CPUQ_KEYS(CPUQ_DOT)
    }
    float16 bm = -INFINITY;
    if (n == 16 && !km && (!causal || t0 + 15 <= s0 + off)) {  // every key seen by every row
      CPUQ_KEYS(CPUQ_SCALE)
    } else {
      CPUQ_KEYS(CPUQ_MASK)
    }
    const float16 mn = fmax(mv, bm);
    if (any(mn > mv)) {  // a new maximum rescales what was summed so far (-inf: nothing yet)
      const float16 corr = select(exp(mv - mn), (float16)1.0f, isequal(mv, mn));
      lv *= corr;
      vstore16(corr, 0, row);
      for (int r = 0; r < nr; ++r)
        for (int d = 0; d < Dv; d += 8) vstore8(vload8(0, acc + r * Dv + d) * row[r], 0, acc + r * Dv + d);
      mv = mn;
    }
    const float16 msafe = select(mv, (float16)0.0f, isequal(mv, (float16)(-INFINITY)));
    CPUQ_KEYS(CPUQ_EXP)
    for (int r0 = 0; r0 < nr; r0 += 8) {
      for (int d = 0; d < Dv; d += 16) {  // 16 dims at a time, then 8 (Dv % 8 == 0)
        if (d + 16 <= Dv) {
          CPUQ_ROWS(CPUQ_LOAD16)
          for (int j = 0; j < n; ++j) {
            const float16 vj = KV_LD16(d / 16, KV_AT(vb, (long)(t0 + j) * vst));
            CPUQ_ROWS(CPUQ_ADD16)
          }
          CPUQ_ROWS(CPUQ_SAVE16)
        } else {
          CPUQ_ROWS(CPUQ_LOAD)
          for (int j = 0; j < n; ++j) {
            const float8 vj = KV_LD8(d / 8, KV_AT(vb, (long)(t0 + j) * vst));
            CPUQ_ROWS(CPUQ_ADD)
          }
          CPUQ_ROWS(CPUQ_SAVE)
        }
      }
    }
  }
  vstore16(lv, 0, row);
  for (int r = 0; r < nr; ++r) {
    __global float* o = out + b * osb + h * osh + (s0 + r) * oss;
    // A row masked whole is 0/0, NaN, as Softmax gives; or 0 (SDPA's Where(IsNaN(p), 0, p)).
    for (int d = 0; d < Dv; ++d) o[d] = zero_rows && !(row[r] > 0.0f) ? 0.0f : acc[r * Dv + d] / row[r];
  }
}

// CPU decode (S <= ATT_CPUG_S, heads of multiples of 8 up to 128): a task per kv head's query rows
// (its H / Hkv query heads times S, up to ATT_CPUG_ROWS a task), keys 16 at a time. Each
// block's keys are read from the cache (converted from fp16 or 8-bit codes) once for all
// the task's rows into kf; a row's dots go 8 dims a step, the block's maximum rescales its
// sums once, and the values add into the outputs 8 dims at a time with the block's 16
// weights, 4 rows at once, each value converted once for them: one row's 4 sums were a
// chain of dependent fmas a key (perf, PoCL: a third of a decode step's attention), and
// every row of a speculative check or of a GQA group converted the same keys and values.
// The causal mask is one compare a block (a key mask's zeros read key by key). A row's
// arithmetic is what it would be alone in its task, so a step of S rows gives each row
// what S steps of one would, and a batch's rows what they would alone.
// With a RoPE's work (ATT_FRESH_ARGS, after the GPU rows' rules) q is rotated from xq, the
// step's S new keys and values come rotated from xk and xv into private rows (the blocks
// holding keys [off, off + S) read them there), and the first task of each kv head writes
// them into the caches: the RoPE's launch a layer saved (on this machine's PoCL some 4 µs
// each, docs/tl-bench.md).
// A row's scores of block t0's n keys (kf, a key ATT_CPUQ_MAX_D apart) into x as its
// weights, its maximum m and sum l updated and the rescale of its sums in corr; `continue`
// where the row takes none of the block. A block of 16 keys without a float mask or a soft
// cap takes its scores, maximum and exponentials as one float16: the scalar exp and max a
// key had been most of a decode step's attention once the launches were chained (perf, PoCL).
#define ATT_CPU_KF8(j, d) vload8(0, kf + (j) * ATT_CPUQ_MAX_D + (d))
#define ATT_IOTA16 (int16)(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)
#define ATT_CPU_DEC_SCORES                                                                         \
  {                                                                                                \
    const int vec_ = plain && n == 16;                                                             \
    float bm = -INFINITY;                                                                          \
    float16 sc = 0.0f; /* the block's scores, as one vector */                                     \
    if (vec_) {                                                                                    \
      /* the causal mask as one compare; a key mask's zeros key by key */                          \
      int16 hid = causal ? (int16)(t0 - s - off) + ATT_IOTA16 > (int16)0 : (int16)0;               \
      if (km) {                                                                                    \
        int h_[16] __attribute__((aligned(64)));                                                   \
        for (int j = 0; j < 16; ++j) h_[j] = att_hidden(s, t0 + j, off, causal, km, kmb, b * kmsb) ? -1 : 0; \
        hid = vload16(0, h_);                                                                      \
      }                                                                                            \
      float8 a[16];                                                                                \
      _Pragma("unroll") for (int j = 0; j < 16; ++j) a[j] = 0.0f;                                  \
      for (int d = 0; d < D; d += 8) {                                                             \
        const float8 q8 = vload8(0, qv + d);                                                       \
        _Pragma("unroll") for (int j = 0; j < 16; ++j) a[j] = fma(q8, ATT_CPU_KF8(j, d), a[j]);    \
      }                                                                                            \
      sc = (float16)(sum8x8(a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7]),                      \
                     sum8x8(a[8], a[9], a[10], a[11], a[12], a[13], a[14], a[15])) * scale +       \
           select((float16)0.0f, (float16)mask_value, hid);                                        \
      const float8 h8 = fmax(sc.lo, sc.hi);                                                        \
      const float4 h4 = fmax(h8.lo, h8.hi);                                                        \
      bm = fmax(fmax(h4.x, h4.y), fmax(h4.z, h4.w));                                               \
    } else {                                                                                       \
      for (int j = 0; j < n; ++j) {                                                                \
        float8 a = 0.0f;                                                                           \
        for (int d = 0; d < D; d += 8) a = fma(vload8(0, qv + d), ATT_CPU_KF8(j, d), a);           \
        x[j] = att_score(sum8(a), scale, softcap, mask, moff + (t0 + j) * mst, has_mask,           \
                         att_hidden(s, t0 + j, off, causal, km, kmb, b * kmsb), mask_value);       \
        bm = fmax(bm, x[j]);                                                                       \
      }                                                                                            \
    }                                                                                              \
    if (bm == -INFINITY) continue;                                                                 \
    corr[r] = 1.0f; /* a new maximum rescales what was summed so far */                            \
    if (bm > m) {                                                                                  \
      corr[r] = exp(m - bm);                                                                       \
      l *= corr[r];                                                                                \
      m = bm;                                                                                      \
    }                                                                                              \
    if (vec_) {                                                                                    \
      const float16 p = exp(sc - m);                                                               \
      l += sum8(p.lo) + sum8(p.hi);                                                                \
      vstore16(p, 0, x);                                                                           \
    } else {                                                                                       \
      for (int j = 0; j < n; ++j) {                                                                \
        x[j] = x[j] == -INFINITY ? 0.0f : exp(x[j] - m);                                           \
        l += x[j];                                                                                 \
      }                                                                                            \
    }                                                                                              \
  }
// The block's values into the sums of rows rq[0..3] (a row may repeat: it computes the
// same sums again), W vectors of 8 dims from d: a row's sums times its corr, then each
// key's weight times its value row, in key order.
#define ATT_CPUG_LOAD(i, W)                                                                         \
  float8 o##i[W];                                                                                   \
  _Pragma("unroll") for (int w = 0; w < W; ++w) o##i[w] = vload8(w, accs + rq[i] * ATT_CPUQ_MAX_D + d) * corr[rq[i]];
#define ATT_CPUG_ADD(i, W)                                                                          \
  {                                                                                                 \
    const float8 p_ = (float8)xs[rq[i] * 16 + j];                                                   \
    _Pragma("unroll") for (int w = 0; w < W; ++w) o##i[w] = fma(p_, v_[w], o##i[w]);            \
  }
#define ATT_CPUG_SAVE(i, W) \
  _Pragma("unroll") for (int w = 0; w < W; ++w) vstore8(o##i[w], w, accs + rq[i] * ATT_CPUQ_MAX_D + d);
#define ATT_CPUG_VALUES(W, V8)                                                                      \
  {                                                                                                 \
    ATT_CPUG_LOAD(0, W) ATT_CPUG_LOAD(1, W) ATT_CPUG_LOAD(2, W) ATT_CPUG_LOAD(3, W)                 \
    for (int j = 0; j < n; ++j) {                                                                   \
      float8 v_[W];                                                                                 \
      _Pragma("unroll") for (int w = 0; w < W; ++w) v_[w] = V8(t0 + j, d + 8 * w);                  \
      ATT_CPUG_ADD(0, W) ATT_CPUG_ADD(1, W) ATT_CPUG_ADD(2, W) ATT_CPUG_ADD(3, W)                   \
    }                                                                                               \
    ATT_CPUG_SAVE(0, W) ATT_CPUG_SAVE(1, W) ATT_CPUG_SAVE(2, W) ATT_CPUG_SAVE(3, W)                 \
  }
#define ATT_CPUG_ROWS 8
#define ATT_CPUG_S 8  // the most rows a CPU decode step takes (runtime/executor.h's kCpuDecodeRows)
#define ATT_CPU_K8(t, d) KV_LD8((d) / 8, KV_AT(kb, (long)(t) * kst))
#define ATT_CPU_V8(t, d) KV_LD8((d) / 8, KV_AT(vb, (long)(t) * vst))
#define ATT_CPU_NEW(t) ((t) >= off && (t) - off < S)
#define ATT_CPU_FK8(t, d) (ATT_CPU_NEW(t) ? vload8(0, fk + ((t) - off) * ATT_CPUQ_MAX_D + (d)) : ATT_CPU_K8(t, d))
#define ATT_CPU_FV8(t, d) (ATT_CPU_NEW(t) ? vload8(0, fv + ((t) - off) * ATT_CPUQ_MAX_D + (d)) : ATT_CPU_V8(t, d))
// Head row x (D wide) rotated into y by the cos c and sin sn of its pairs (common.cl's
// rope_rotate, an angle a pair).
inline void att_cpu_rotate(__global const float* x, float* y, int D, int rot, const float* c, const float* sn) {
  const int R = rot / 2;
  for (int d = 0; d < R; ++d) {
    y[d] = x[d] * c[d] - x[d + R] * sn[d];
    y[d + R] = x[d + R] * c[d] + x[d] * sn[d];
  }
  for (int d = rot; d < D; ++d) y[d] = x[d];
}
TASK_KERNEL(attention_cpu_dec_f32)(TASK_ARGS __global const float* q, __global const KV_T* k,
                                   __global const KV_T* v, __global const float* mask, __global float* out, ATT_ARGS,
                                   ATT_FRESH_ARGS) {
  const int rep = H / Hkv, group = rep * S, tiles = (group + ATT_CPUG_ROWS - 1) / ATT_CPUG_ROWS;
  const int tile = TASK_ID % tiles, g = TASK_ID / tiles % Hkv, b = TASK_ID / (tiles * Hkv);
  if (b * H * S >= rows) return;
  const int r0 = tile * ATT_CPUG_ROWS, R = min(ATT_CPUG_ROWS, group - r0), off = ATT_OFFSET;
  __global const KV_T* kb = KV_AT(k, b * ksb + g * ksh);
  __global const KV_T* vb = KV_AT(v, b * vsb + g * vsh);
  // the task's rows: row r is head rh[r]'s row rs[r], which under a causal mask sees keys
  // up to rseen[r]
  int rh[ATT_CPUG_ROWS], rs[ATT_CPUG_ROWS], rseen[ATT_CPUG_ROWS];
  for (int r = 0; r < R; ++r) {
    rh[r] = g * rep + (r0 + r) / S, rs[r] = (r0 + r) % S;
    rseen[r] = causal ? min(T, rs[r] + off + 1) : T;
  }
  float qvs[ATT_CPUG_ROWS * ATT_CPUQ_MAX_D] __attribute__((aligned(32)));
  float accs[ATT_CPUG_ROWS * ATT_CPUQ_MAX_D] __attribute__((aligned(32)));
  float kf[16 * ATT_CPUQ_MAX_D] __attribute__((aligned(32)));
  float xs[ATT_CPUG_ROWS * 16] __attribute__((aligned(64)));
  float ms[ATT_CPUG_ROWS], ls[ATT_CPUG_ROWS], corr[ATT_CPUG_ROWS];
  float fk[ATT_CPUG_S * ATT_CPUQ_MAX_D] __attribute__((aligned(32)));
  float fv[ATT_CPUG_S * ATT_CPUQ_MAX_D] __attribute__((aligned(32)));
  if (xq) {
    // each new row's angles once, 8 pairs a sincos where they allow, for its key and the q rows at it
    float c[ATT_CPUQ_MAX_D / 2] __attribute__((aligned(32))), sn[ATT_CPUQ_MAX_D / 2] __attribute__((aligned(32)));
    const int RP = rot / 2;
    for (int j = 0; j < S; ++j) {
      const float p = (float)pos[b * pbs + j * pss];
      if (RP % 8 == 0) {
        for (int d = 0; d < RP; d += 8) {
          float8 c8;
          vstore8(sincos(p * vload8(0, inv_freq + d), &c8) * sscale, 0, sn + d);
          vstore8(c8 * cscale, 0, c + d);
        }
      } else {
        for (int d = 0; d < RP; ++d) {
          const float2 t = rope_pos_trig(p, inv_freq, d, rot, cscale, sscale);
          c[d] = t.x;
          sn[d] = t.y;
        }
      }
      att_cpu_rotate(xk + ATT_XROW(xbshd & 2, b, g, j, Hkv, D), fk + j * ATT_CPUQ_MAX_D, D, rot, c, sn);
      __global const float* xvr = xv + ATT_XROW(xbshd & 4, b, g, j, Hkv, Dv);
      for (int d = 0; d < Dv; ++d) fv[j * ATT_CPUQ_MAX_D + d] = xvr[d];
      for (int r = 0; r < R; ++r)
        if (rs[r] == j)
          att_cpu_rotate(xq + ATT_XROW(xbshd & 1, b, rh[r], j, H, D), qvs + r * ATT_CPUQ_MAX_D, D, rot, c, sn);
    }
    if (tile == 0) {  // the caches' new rows, by the kv head's first task
      for (int j = 0; j < S; ++j) {
        const long kat = (long)b * ksb + (long)g * ksh + (long)(off + j) * kst;
        const long vat = (long)b * vsb + (long)g * vsh + (long)(off + j) * vst;
#ifdef TL_KV_Q8
        for (int d = 0; d < D; d += 32) kv_q8_store(fk + j * ATT_CPUQ_MAX_D + d, kat + d, kc);
        for (int d = 0; d < Dv; d += 32) kv_q8_store(fv + j * ATT_CPUQ_MAX_D + d, vat + d, vc);
#else
        for (int d = 0; d < D; ++d) KV_ST(fk[j * ATT_CPUQ_MAX_D + d], kat + d, kc);
        for (int d = 0; d < Dv; ++d) KV_ST(fv[j * ATT_CPUQ_MAX_D + d], vat + d, vc);
#endif
      }
    }
    // Every row sees the new keys as the cache holds them, as a later step would read them:
    // a step of S rows gives each row what S steps of one would (speculative checks).
    for (int j = 0; j < S; ++j) {
      kv_round(fk + j * ATT_CPUQ_MAX_D, D);
      kv_round(fv + j * ATT_CPUQ_MAX_D, Dv);
    }
  } else {
    for (int r = 0; r < R; ++r) {
      __global const float* qr = q + b * qsb + rh[r] * qsh + rs[r] * qss;
      for (int d = 0; d < D; ++d) qvs[r * ATT_CPUQ_MAX_D + d] = qr[d];
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int d = 0; d < Dv; ++d) accs[r * ATT_CPUQ_MAX_D + d] = 0.0f;
    ms[r] = -INFINITY, ls[r] = 0.0f;
  }
  const int plain = !has_mask && !(softcap > 0.0f);
  for (int t0 = 0; t0 < T; t0 += 16) {
    // the rows that read this block: under a causal mask a row stops after its own key,
    // unless att_needs_hidden
    int rr[ATT_CPUG_ROWS], na = 0;
    for (int r = 0; r < R; ++r)
      if (t0 < rseen[r] || att_needs_hidden(ms[r], mask_value)) rr[na++] = r;
    if (na == 0) break;
    const int n = min(16, T - t0);
    const int fresh = xq && t0 + n > off && t0 < off + S;  // the block holds new keys
    for (int j = 0; j < n; ++j) {
      const int t = t0 + j;
      __builtin_prefetch(KV_AT(kb, (long)(t + 32) * kst));
      __builtin_prefetch(KV_AT(vb, (long)(t + 32) * vst));
      for (int d = 0; d < D; d += 8) vstore8(fresh ? ATT_CPU_FK8(t, d) : ATT_CPU_K8(t, d), 0, kf + j * ATT_CPUQ_MAX_D + d);
    }
    int took = 0;
    for (int i = 0; i < na; ++i) {
      const int r = rr[i], s = rs[r], moff = b * msb + rh[r] * msh + s * mss;
      const float* qv = qvs + r * ATT_CPUQ_MAX_D;
      float* x = xs + r * 16;
      float m = ms[r], l = ls[r];
      ATT_CPU_DEC_SCORES
      ms[r] = m, ls[r] = l;
      rr[took++] = r;
    }
    for (int i0 = 0; i0 < took; i0 += 4) {  // 4 rows at a time, the last repeated to fill them
      const int rq[4] = {rr[i0], rr[min(i0 + 1, took - 1)], rr[min(i0 + 2, took - 1)], rr[min(i0 + 3, took - 1)]};
      int d = 0;
      if (fresh) {
        for (; d + 32 <= Dv; d += 32) ATT_CPUG_VALUES(4, ATT_CPU_FV8)
        for (; d < Dv; d += 8) ATT_CPUG_VALUES(1, ATT_CPU_FV8)
      } else {
        for (; d + 32 <= Dv; d += 32) ATT_CPUG_VALUES(4, ATT_CPU_V8)
        for (; d < Dv; d += 8) ATT_CPUG_VALUES(1, ATT_CPU_V8)
      }
    }
  }
  for (int r = 0; r < R; ++r) {
    __global float* o = out + b * osb + rh[r] * osh + rs[r] * oss;
    // A row masked whole is 0/0, NaN, as Softmax gives; or 0 (SDPA's Where(IsNaN(p), 0, p)).
    for (int d = 0; d < Dv; ++d) o[d] = zero_rows && !(ls[r] > 0.0f) ? 0.0f : accs[r * ATT_CPUQ_MAX_D + d] / ls[r];
  }
}
#endif  // TL_CPU

#if defined(TL_CPU) && !defined(TL_KV_Q8)
// CPUs (tables shared by the heads, v rows of q's length, rot / 2 <= ROPE_CPU_MID): what
// elementwise.cl's rope_kv_f32 does, a task per ROPE_CPU_TOKENS tokens, for each token (b, s) its cos and sin
// per rotated dim once, then each head's row of q, k and v along d, loops the compiler
// vectorizes. rope_kv_f32's item per (token, dim) computed its indices and conversions one
// element at a time there (bytellama pp512 on PoCL: 8-10% of the step), and a task per token
// left half the time in PoCL's dealing out of 512 tasks. A task kernel, so that a decode
// step of several rows (a speculative check) chains it with the launches around it.
#define ROPE_CPU_MID 128
#define ROPE_CPU_TOKENS 16
// A head's row r rotated by the token's tables, 8 dims at a time (explicit vectors: the
// compiler left the loop scalar, unsure r and the output do not overlap), the dims past
// rot passed through; ST8 and ST store 8 values or one at place d.
#define ROPE_CPU_ROW(r, ST8, ST)                                             \
  {                                                                          \
    int d = 0;                                                               \
    for (; d + 8 <= mid; d += 8) {                                           \
      const float8 a = vload8(0, r + d), e = vload8(0, r + d + mid);         \
      ST8(a * vload8(0, c0 + d) - e * vload8(0, s0 + d), d);                 \
      ST8(e * vload8(0, c1 + d) + a * vload8(0, s1 + d), d + mid);           \
    }                                                                        \
    for (; d < mid; ++d) {                                                   \
      const float a = r[d], e = r[d + mid];                                  \
      ST(a * c0[d] - e * s0[d], d);                                          \
      ST(e * c1[d] + a * s1[d], d + mid);                                    \
    }                                                                        \
    for (d = 2 * mid; d < D; ++d) ST(r[d], d);                               \
  }
// ... into q's output row o, or k's cache row from c.
#define ROPE_Q_ST8(v, d) vstore8((v), 0, o + (d))
#define ROPE_Q_ST(v, d) (o[d] = (v))
#define ROPE_K_ST8(v, d) KV_ST8((v), c + (d), kc)
#define ROPE_K_ST(v, d) KV_ST((v), c + (d), kc)
TASK_KERNEL(rope_kv_cpu_f32)(
    TASK_ARGS __global const float* x, __global const float* cosv, __global const float* sinv, __global float* out, int n, int D,
    int rot, int8 dims, int8 cs, int8 ss, __global const float* x2, int8 dims2, int8 cs2, int8 ss2, __global KV_T* kc,
    int n2, int H2, int N2, int D2, int ksb, int ksh, int kst, __global const float* x3, __global KV_T* vc, int n3, int H3,
    int N3, int D3, int vsb, int vsh, int vst, __global const int* kv_rows, int bshd, ROPE_TRIG_ARGS) {
  const int H = dims.s5, S = dims.s6, mid = rot / 2;
  const int first = TASK_ID * ROPE_CPU_TOKENS, tokens = n / (H * D);
  for (int t = first; t < min(first + ROPE_CPU_TOKENS, tokens); ++t) {
    const int s = t % S, b = t / S, rows0 = kv_rows[b];
    float c0[ROPE_CPU_MID], s0[ROPE_CPU_MID], c1[ROPE_CPU_MID], s1[ROPE_CPU_MID];
    const int co = b * cs.s4 + s * cs.s6, so = b * ss.s4 + s * ss.s6;
    for (int d = 0; d < mid; ++d) {
      const float2 t0 = rope_trig(cosv, sinv, co + d * cs.s7, so + d * ss.s7, d, rot, ROPE_TRIG);
      const float2 t1 = positions ? t0 : rope_trig(cosv, sinv, co + (d + mid) * cs.s7, so + (d + mid) * ss.s7, d + mid, rot, ROPE_TRIG);
      c0[d] = t0.x, s0[d] = t0.y, c1[d] = t1.x, s1[d] = t1.y;
    }
    for (int h = 0; h < H; ++h) {
      __global const float* r = x + (bshd & 1 ? ((b * S + s) * H + h) * D : ((b * H + h) * S + s) * D);
      __global float* o = out + ((b * H + h) * S + s) * D;
      ROPE_CPU_ROW(r, ROPE_Q_ST8, ROPE_Q_ST)
    }
    for (int h = 0; h < H2; ++h) {
      __global const float* r = x2 + (bshd & 2 ? ((b * S + s) * H2 + h) * D : ((b * H2 + h) * S + s) * D);
      const long c = (long)b * ksb + (long)h * ksh + (long)(rows0 + s) * kst;
      ROPE_CPU_ROW(r, ROPE_K_ST8, ROPE_K_ST)
    }
    for (int h = 0; h < H3; ++h) {
      __global const float* r = x3 + (bshd & 4 ? ((b * N3 + s) * H3 + h) * D3 : ((b * H3 + h) * N3 + s) * D3);
      const long c = (long)b * vsb + (long)h * vsh + (long)(rows0 + s) * vst;
      int d = 0;
      for (; d + 8 <= D3; d += 8) KV_ST8(vload8(0, r + d), c + d, vc);
      for (; d < D3; ++d) KV_ST(r[d], c + d, vc);
    }
  }
}
#endif

// What a work-group per (query row, split of the keys) starts with: its row's indices, q
// going to local memory qs (element d of the row at offset r of q: QAT(r, d); read after a
// barrier), the kv head's k and v, the row's mask offset.
#define ATT_SPLIT_ROW(QAT)                                                                          \
  const int row = get_group_id(0), split = get_group_id(1), lid = get_local_id(0);                  \
  const int s = row % S, h = row / S % H, b = row / (S * H), g = h / (H / Hkv), off = ATT_OFFSET;   \
  for (int d = lid; d < D; d += RED_WG) qs[d] = QAT(b * qsb + h * qsh + s * qss, d);                \
  __global const KV_T* kb = KV_AT(k, b * ksb + g * ksh);                                           \
  __global const KV_T* vb = KV_AT(v, b * vsb + g * vsh);                                           \
  const int moff = b * msb + h * msh + s * mss;

#define ATT_Q(r, d) q[(r) + (d)]


// GPU family: a work-group per (query row, split of the keys). Each block of RED_WG keys is
// scored an item per key, max and sum reduced in local memory, and accumulated an item
// per output dim. With one split the group writes the row; with several (a decode step's
// few rows over a long cache: flash-decoding) it writes (max, sum, acc[Dv]) to `part`
// and attention_combine_f32 merges the splits.
__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))
void attention_wg_f32(__global const float* q, __global const KV_T* k, __global const KV_T* v,
                      __global const float* mask, __global float* out, __global float* part, ATT_ARGS, int splits,
                      int chunk) {
  __local float qs[ATT_MAX_D];
  __local float ps[RED_WG];
  __local float red[RED_WG];
  ATT_SPLIT_ROW(ATT_Q)
  barrier(CLK_LOCAL_MEM_FENCE);
  const int t0 = split * chunk, t1 = min(T, t0 + chunk);
  float acc[ATT_MAX_D / RED_WG];
  for (int i = 0; i < ATT_MAX_D / RED_WG; ++i) acc[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int tb = t0; tb < t1; tb += RED_WG) {
    const int t = tb + lid;
    float x = -INFINITY;
    if (t < t1) {
      __global const KV_T* kr = KV_AT(kb, (long)t * kst);
      float dot = 0.0f;
      if ((D & 3) == 0) {
        float4 a = 0.0f;
        for (int d = 0; d < D; d += 4) a += vload4(0, qs + d) * KV_LD4(d / 4, kr);
        dot = a.x + a.y + a.z + a.w;
      } else {
        for (int d = 0; d < D; ++d) dot += qs[d] * KV_LD(kr, d);
      }
      x = att_score(dot, scale, softcap, mask, moff + t * mst, has_mask, att_hidden(s, t, off, causal, km, kmb, b * kmsb),
                    mask_value);
    }
    const float mn = fmax(m, wg_max(red, x));  // wg_max's first barrier: the last block's ps reads are done
    const float p = x == -INFINITY ? 0.0f : exp(x - mn);
    ps[lid] = p;
    const float sum = wg_sum(red, p);  // its barriers publish ps
    const float corr = m == -INFINITY ? 0.0f : exp(m - mn);
    l = l * corr + sum;
    m = mn;
    const int nk = min(RED_WG, t1 - tb);
    for (int i = 0; i < ATT_MAX_D / RED_WG; ++i) {
      const int d = lid + i * RED_WG;
      if (d >= Dv) break;
      float a = acc[i] * corr;
      for (int j = 0; j < nk; ++j) a += ps[j] * KV_LD(vb, (long)(tb + j) * vst + d);
      acc[i] = a;
    }
  }
  if (splits == 1) {
    __global float* o = out + b * osb + h * osh + s * oss;
    for (int i = 0; i < ATT_MAX_D / RED_WG && lid + i * RED_WG < Dv; ++i)
      o[lid + i * RED_WG] = zero_rows && !(l > 0.0f) ? 0.0f : acc[i] / l;
    return;
  }
  __global float* pp = part + ((long)row * splits + split) * (Dv + 2);
  if (lid == 0) {
    pp[0] = m;
    pp[1] = l;
  }
  for (int i = 0; i < ATT_MAX_D / RED_WG && lid + i * RED_WG < Dv; ++i) pp[2 + lid + i * RED_WG] = acc[i];
}

// Merges the splits of each row (attention_wg_f32's, the decode kernels'): weights
// exp(m_s - max m) on sums and accs. The items take the splits' maxima and sums together,
// the weights go to local memory, and an item per output dim has 8 loads in flight.
#define ATT_MAX_SPLITS 1024 /* lowering (attentionOp) keeps splits within it */
__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))
void attention_combine_f32(__global const float* part, __global float* out, int H, int S, int Dv, int splits,
                           int osb, int osh, int oss, int zero_rows) {
  __local float w[ATT_MAX_SPLITS], red[RED_WG];
  const int row = get_group_id(0), lid = get_local_id(0), n = Dv + 2;
  const int s = row % S, h = row / S % H, b = row / (S * H);
  __global const float* pr = part + (long)row * splits * n;
  float mx = -INFINITY;
  for (int i = lid; i < splits; i += RED_WG) mx = fmax(mx, pr[i * n]);
  mx = wg_max(red, mx);
  float l = 0.0f;
  for (int i = lid; i < splits; i += RED_WG) {
    const float mi = pr[i * n], wi = mi == -INFINITY ? 0.0f : exp(mi - mx);
    w[i] = wi;
    l += pr[i * n + 1] * wi;
  }
  l = wg_sum(red, l);  // its barriers publish w
  __global float* o = out + b * osb + h * osh + s * oss;
  for (int d = lid; d < Dv; d += RED_WG) {
    float a = 0.0f;
    int i = 0;
    for (; i + 8 <= splits; i += 8) {
      float x[8];
      for (int u = 0; u < 8; ++u) x[u] = pr[(i + u) * n + 2 + d];
      for (int u = 0; u < 8; ++u) a += w[i + u] * x[u];
    }
    for (; i < splits; ++i) a += w[i] * pr[i * n + 2 + d];
    o[d] = zero_rows && !(l > 0.0f) ? 0.0f : a / l;
  }
}

// GPU family, prefill: a work-group per (batch, head, tile of 16 query rows). Each step
// loads 32 keys and values of the kv head into local memory, shared by the tile's rows;
// item (r, c) scores row r against keys c, c + 4, ..., c + 28 and accumulates output dims
// c, c + 4, ...; a row's 4 items reduce its max and sum in local memory. Under a causal
// mask a tile stops at the last key its rows may see: the keys after it are hidden from
// every row of the tile, and a hidden score adds exp(x + mask_value - max) = 0 once the row
// has a visible key. A row with none yet (padding hid them all) goes on to the last key,
// as the unfused softmax averages every hidden key then.
#define AT_BR 16
#define AT_BC 32
#define AT_MAXD 128
#if ATT_FITS(AT_BR * AT_MAXD + 2 * AT_BC * AT_MAXD + AT_BR * AT_BC + RED_WG + 1)
__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))
void attention_tile_f32(__global const float* q, __global const KV_T* k, __global const KV_T* v,
                        __global const float* mask, __global float* out, ATT_ARGS) {
  __local float qs[AT_BR * AT_MAXD], ks[AT_BC * AT_MAXD], vs[AT_BC * AT_MAXD], ps[AT_BR * AT_BC];
  __local float red[RED_WG];
  __local int more;
  const int lid = get_local_id(0), tiles = (S + AT_BR - 1) / AT_BR, grp = get_group_id(0);
  const int tile = grp % tiles, h = grp / tiles % H, b = grp / (tiles * H), g = h / (H / Hkv);
  const int s0 = tile * AT_BR, r = lid >> 2, c = lid & 3, s = s0 + r, off = ATT_OFFSET;
  for (int e = lid; e < AT_BR * D; e += RED_WG) {
    const int rr = e / D, d = e - rr * D;
    qs[e] = s0 + rr < S ? q[b * qsb + h * qsh + (s0 + rr) * qss + d] : 0.0f;
  }
  __global const KV_T* kb = KV_AT(k, b * ksb + g * ksh);
  __global const KV_T* vb = KV_AT(v, b * vsb + g * vsh);
  const int moff = b * msb + h * msh + s * mss, kmo = b * kmsb;
  const int seen = causal ? min(T, s0 + AT_BR + off) : T;  // keys some row of the tile may see
  float acc[AT_MAXD / 4];
  for (int i = 0; i < AT_MAXD / 4; ++i) acc[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int t0 = 0; t0 < T; t0 += AT_BC) {
    ATT_STOP_PAST_SEEN(lid == 0, c == 0 && s < S && att_needs_hidden(m, mask_value))
    barrier(CLK_LOCAL_MEM_FENCE);  // the last step's reads of ks, vs and ps are done
    for (int e = lid; e < AT_BC * D; e += RED_WG) {
      const int kk = e / D, d = e - kk * D;
      ks[e] = t0 + kk < T ? KV_LD(kb, (long)(t0 + kk) * kst + d) : 0.0f;
    }
    for (int e = lid; e < AT_BC * Dv; e += RED_WG) {
      const int kk = e / Dv, d = e - kk * Dv;
      vs[e] = t0 + kk < T ? KV_LD(vb, (long)(t0 + kk) * vst + d) : 0.0f;
    }
    barrier(CLK_LOCAL_MEM_FENCE);
    float x[AT_BC / 4], tmax = -INFINITY;
    for (int j = 0; j < AT_BC / 4; ++j) {
      const int kk = c + 4 * j, t = t0 + kk;
      x[j] = -INFINITY;
      if (s < S && t < T) {
        float dot = 0.0f;
        for (int d = 0; d < D; ++d) dot += qs[r * D + d] * ks[kk * D + d];
        x[j] = att_score(dot, scale, softcap, mask, moff + t * mst, has_mask, att_hidden(s, t, off, causal, km, kmb, kmo),
                         mask_value);
      }
      tmax = fmax(tmax, x[j]);
    }
    red[lid] = tmax;
    barrier(CLK_LOCAL_MEM_FENCE);
    const float mn = fmax(m, fmax(fmax(red[4 * r], red[4 * r + 1]), fmax(red[4 * r + 2], red[4 * r + 3])));
    barrier(CLK_LOCAL_MEM_FENCE);
    float sum = 0.0f;
    for (int j = 0; j < AT_BC / 4; ++j) {
      const float p = x[j] == -INFINITY ? 0.0f : exp(x[j] - mn);
      ps[r * AT_BC + c + 4 * j] = p;
      sum += p;
    }
    red[lid] = sum;
    barrier(CLK_LOCAL_MEM_FENCE);
    const float corr = m == -INFINITY ? 0.0f : exp(m - mn);
    l = l * corr + red[4 * r] + red[4 * r + 1] + red[4 * r + 2] + red[4 * r + 3];
    m = mn;
    for (int i = 0; i < AT_MAXD / 4; ++i) {
      const int d = c + 4 * i;
      if (d >= Dv) break;
      float a = acc[i] * corr;
      for (int kk = 0; kk < AT_BC; ++kk) a += ps[r * AT_BC + kk] * vs[kk * Dv + d];
      acc[i] = a;
    }
  }
  if (s >= S) return;
  __global float* o = out + b * osb + h * osh + s * oss;
  for (int i = 0; i < AT_MAXD / 4; ++i) {
    const int d = c + 4 * i;
    if (d >= Dv) break;
    o[d] = zero_rows && !(l > 0.0f) ? 0.0f : acc[i] / l;
  }
}
#endif

// GPU family, prefill without a float mask or soft cap, heads up to 64: flash attention in
// fp32 with register tiles. A work-group of 256 items per (batch, head, 64 query rows);
// per tile of 32 keys (in local memory, K by dim and V by key):
// - scores: item (sr, sk) takes rows 4 sr..4 sr+3 against keys 2 sk, 2 sk+1, a float4 of
//   q (staged by dim, times scale) and a float2 of k per dim: 8 products per two reads;
// - softmax: item (mr, mc) takes row mr's keys 8 mc..8 mc+7, the row's 4 items agreeing on
//   its max and sum through local memory, the weights written back in place;
// - output: item (orr, od) adds P V to rows 4 orr.., dims 4 od.. (16 sums in registers),
//   a float4 of weights and one of values per key.
// Masks as the tensor-core kernel takes them: the key mask once a tile (kbias), the causal
// test on the tiles crossing a row's diagonal, hidden tiles skipped as attention_tile_f32
// skips them. attention_tile_f32 scored a row against its keys one product per two local
// reads: 79 of 155 ms of a TinyLlama 1024-token step on the H200 (docs/tl-bench.md).
#define FL_BR 64
#define FL_BC 32
#define FL_MAXD 64
#define FL_PW (FL_BR + 4) /* a key's row of weights: float4 reads across banks */
#if ATT_FITS(FL_MAXD * FL_BR + 2 * FL_BC * FL_MAXD + FL_BC * FL_PW + 256 + 2 * FL_BR + FL_BC) && TL_MAX_WG >= 256
__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void attention_flash_f32(__global const float* q, __global const KV_T* k, __global const KV_T* v,
                         __global const float* mask, __global float* out, ATT_ARGS, ATT_FRESH_ARGS) {
  __local float Qs[FL_MAXD * FL_BR], Ks[FL_MAXD * FL_BC], Vs[FL_BC * FL_MAXD], Ps[FL_BC * FL_PW];
  __local float red[256], crow[FL_BR], lrow[FL_BR], kbias[FL_BC];
  __local int more;
  const int tid = get_local_id(0), tiles = (S + FL_BR - 1) / FL_BR, grp = get_group_id(0);
  const int tile = grp % tiles, h = grp / tiles % H, b = grp / (tiles * H), g = h / (H / Hkv);
  const int s0 = tile * FL_BR, off = ATT_OFFSET, kmo = b * kmsb;
  const int sr = tid / 16, sk = tid % 16, mr = tid / 4, mc = tid % 4, od = tid % 16;
  const int row = s0 + mr;  // the softmax role's row
  const int lid = tid, fresh0 = xq ? off : T;  // keys [fresh0, off + S) from the RoPE's inputs
  if (xq && h % (H / Hkv) == 0) ATT_FRESH_STORE(b, g, 256, s0, min(S, s0 + FL_BR))  // this tile's own keys
  for (int e = tid; e < FL_BR * D; e += 256) {
    const int r = e / D, d = e - r * D, s = s0 + r;
    Qs[d * FL_BR + r] = s < S ? (xq ? ATT_FRESH_QH(b, h, s, d) : q[b * qsb + h * qsh + s * qss + d]) * scale : 0.0f;
  }
  __global const KV_T* kb = KV_AT(k, b * ksb + g * ksh);
  __global const KV_T* vb = KV_AT(v, b * vsb + g * vsh);
  const int seen = causal ? min(T, s0 + FL_BR + off) : T;
  float4 acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  float m = -INFINITY, l = 0.0f;
  for (int t0 = 0; t0 < T; t0 += FL_BC) {
    ATT_STOP_PAST_SEEN(tid == 0, mc == 0 && row < S && att_needs_hidden(m, mask_value))
    barrier(CLK_LOCAL_MEM_FENCE);  // the last tile's reads done
    for (int e = tid; e < FL_BC * D; e += 256) {
      const int key = e / D, d = e - key * D, t = t0 + key;
      Ks[d * FL_BC + key] = t >= T                           ? 0.0f
                            : t >= fresh0 && t - off < S     ? ATT_FRESH_K(b, g, t - off, d)
                                                             : KV_LD(kb, (long)t * kst + d);
    }
    for (int e = tid; e < FL_BC * Dv; e += 256) {
      const int key = e / Dv, d = e - key * Dv, t = t0 + key;
      Vs[key * FL_MAXD + d] = t >= T                           ? 0.0f
                              : t >= fresh0 && t - off < S     ? ATT_FRESH_V(b, g, t - off, d)
                                                               : KV_LD(vb, (long)t * vst + d);
    }
    if (tid < FL_BC)
      kbias[tid] = t0 + tid >= T ? -INFINITY : att_hidden(0, t0 + tid, 0, 0, km, kmb, kmo) ? mask_value : 0.0f;
    barrier(CLK_LOCAL_MEM_FENCE);
    float4 x0 = 0.0f, x1 = 0.0f;
    for (int d = 0; d < D; ++d) {
      const float4 qv = vload4(0, Qs + d * FL_BR + 4 * sr);
      const float2 kv = vload2(0, Ks + d * FL_BC + 2 * sk);
      x0 = fma(qv, (float4)kv.x, x0);
      x1 = fma(qv, (float4)kv.y, x1);
    }
    vstore4(x0, 0, Ps + 2 * sk * FL_PW + 4 * sr);
    vstore4(x1, 0, Ps + (2 * sk + 1) * FL_PW + 4 * sr);
    barrier(CLK_LOCAL_MEM_FENCE);
    const int diag = causal && t0 + FL_BC - 1 > row + off;  // some key after the row's own
    float x[8], bm = -INFINITY;  // unrolled loops keep x in registers
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const int kl = 8 * mc + j;
      const float kbv = kbias[kl];
      float sc = Ps[kl * FL_PW + mr];
      if (!diag) sc += kbv;
      else if (kbv == -INFINITY) sc = -INFINITY;
      else if (t0 + kl > row + off || kbv != 0.0f) sc += mask_value;
      x[j] = sc;
      bm = fmax(bm, sc);
    }
    red[tid] = bm;
    barrier(CLK_LOCAL_MEM_FENCE);
    const float mn = fmax(m, fmax(fmax(red[4 * mr], red[4 * mr + 1]), fmax(red[4 * mr + 2], red[4 * mr + 3])));
    const float corr = m == -INFINITY ? 0.0f : exp(m - mn);
    float ps = 0.0f;
#pragma unroll
    for (int j = 0; j < 8; ++j) {
      const float p = x[j] == -INFINITY ? 0.0f : exp(x[j] - mn);
      Ps[(8 * mc + j) * FL_PW + mr] = p;
      ps += p;
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // the maxima read
    red[tid] = ps;
    if (mc == 0) crow[mr] = corr;
    barrier(CLK_LOCAL_MEM_FENCE);  // the weights, sums and rescales written
    l = l * corr + red[4 * mr] + red[4 * mr + 1] + red[4 * mr + 2] + red[4 * mr + 3];
    m = mn;
    if (4 * od < Dv) {
      const float4 c = vload4(0, crow + 4 * sr);
      acc[0] *= c.x;
      acc[1] *= c.y;
      acc[2] *= c.z;
      acc[3] *= c.w;
      for (int key = 0; key < FL_BC; ++key) {
        const float4 p = vload4(0, Ps + key * FL_PW + 4 * sr), vv = vload4(0, Vs + key * FL_MAXD + 4 * od);
        acc[0] = fma((float4)p.x, vv, acc[0]);
        acc[1] = fma((float4)p.y, vv, acc[1]);
        acc[2] = fma((float4)p.z, vv, acc[2]);
        acc[3] = fma((float4)p.w, vv, acc[3]);
      }
    }
  }
  if (mc == 0) lrow[mr] = l;
  barrier(CLK_LOCAL_MEM_FENCE);
  if (4 * od >= Dv) return;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int r = 4 * sr + i, s = s0 + r;
    if (s >= S) break;
    const float lr = lrow[r];
    vstore4(zero_rows && !(lr > 0.0f) ? (float4)0.0f : acc[i] / lr, 0, out + b * osb + h * osh + s * oss + 4 * od);
  }
}
#endif

// GPU family, decode rows of grouped-query heads: a work-group of GQA_WG items per (batch,
// kv head, split of the keys) takes the R = (H / Hkv) * S query rows (2 to GQA_MAXR) that
// read that kv head, so each key and value is loaded once for the group, not once per
// query head. Per block of GQA_BK keys:
// - the block's keys and values go to local memory, every item's loads in flight at once
//   (issued before the barrier that frees the last block's copies);
// - an item per (key, row) scores, GQA_LANES items per row take the block's max and sum
//   (the row's running max and sum live in those items' registers);
// - an item per (output dim, row) adds the block to its rows' outputs (registers).
// The split count gives each split one block where the device has room (lowering), and
// several splits write (max, sum, output) per row for attention_combine_f32.
// A 64-item version (an item per key and every row, an item per dim and every row) kept
// only 2 warps on an H100 SM, each walking every row in turn: 35-44 us a layer of
// TinyLlama over 2048 keys, for 4 MB (docs/tl-bench.md, session 12).
#define GQA_WG 256
#define GQA_BK 32
#define GQA_MAXR 16
#define GQA_MAXD 128
#define GQA_ROW(d) ((d) + 4)                         /* a staged key's floats: float4 reads across banks */
#define GQA_LANES (GQA_WG / GQA_MAXR)                /* items per row for its max and sum */
#define GQA_SROWS (GQA_WG / GQA_BK)                  /* rows scored at once */
#define GQA_ACC (GQA_MAXR * GQA_MAXD / GQA_WG)       /* outputs an item keeps */
#define GQA_LOADS (2 * GQA_BK * GQA_MAXD / 4 / GQA_WG) /* float4s of a block an item loads */
#define GQA_QLOADS (GQA_MAXR * GQA_MAXD / GQA_WG)    /* floats of q an item stages */
#define GQA_FLOATS \
  (GQA_MAXR * GQA_MAXD + GQA_BK * GQA_ROW(GQA_MAXD) + GQA_BK * GQA_MAXD + GQA_MAXR * GQA_BK + 2 * GQA_WG + 3 * GQA_MAXR)
#define GQA_MERGE (GQA_BK * GQA_MAXD) /* rows x splits the last work-group merges: vs's floats */
#if ATT_FITS(GQA_FLOATS) && TL_MAX_WG >= GQA_WG
__kernel __attribute__((reqd_work_group_size(GQA_WG, 1, 1)))
void attention_gqa_f32(__global const float* q, __global const KV_T* k, __global const KV_T* v,
                       __global const float* mask, __global float* out, __global float* part, ATT_ARGS, int splits,
                       int chunk, ATT_FRESH_ARGS, __global int* merged) {
  __local float qs[GQA_MAXR * GQA_MAXD], ks[GQA_BK * GQA_ROW(GQA_MAXD)], vs[GQA_BK * GQA_MAXD], sc[GQA_MAXR * GQA_BK];
  __local float redm[GQA_WG], reds[GQA_WG], crow[GQA_MAXR], mrow[GQA_MAXR], lrow[GQA_MAXR];
  __local int last;
  const int bg = get_group_id(0), split = get_group_id(1), lid = get_local_id(0);
  const int G = H / Hkv, R = G * S, b = bg / Hkv, g = bg % Hkv, off = ATT_OFFSET;
  __global const KV_T* kb = KV_AT(k, b * ksb + g * ksh);
  __global const KV_T* vb = KV_AT(v, b * vsb + g * vsh);
  const int t0 = split * chunk, t1 = min(T, t0 + chunk), KR = GQA_ROW(D), kq = D / 4, vq = Dv / 4;
  // A block's keys, then its values, into x (unrolled loops keep it in registers:
  // scripts/kernel_spills.py). The first block's loads go out before q is staged, and each
  // next block's as soon as the one before is staged, so they are in flight meanwhile.
  float4 x[GQA_LOADS];
#define GQA_LOAD(TB)                                                                              \
  {                                                                                               \
    const int nl = min(GQA_BK, t1 - (TB));                                                        \
    _Pragma("unroll") for (int u = 0; u < GQA_LOADS; ++u) {                                       \
      const int e = u * GQA_WG + lid, ev = e - nl * kq;                                           \
      x[u] = ev < 0 ? KV_LD4(e % kq, KV_AT(kb, (long)((TB) + e / kq) * kst))                       \
             : ev < nl * vq ? KV_LD4(ev % vq, KV_AT(vb, (long)((TB) + ev / vq) * vst)) : 0.0f;     \
    }                                                                                             \
  }
  if (t0 < t1) GQA_LOAD(t0)
  // rows r of the group: query head g * G + r / S, position r % S, its D floats at qs + r * D
  if (xq && split == 0) ATT_FRESH_STORE(b, g, GQA_WG, 0, S)  // early: the blocks use their own copies of those rows
  {
    float qx[GQA_QLOADS];
#pragma unroll
    for (int u = 0; u < GQA_QLOADS; ++u) {
      const int e = u * GQA_WG + lid, r = e / D;
      __global const float* qr = (xq ? xq : q) + b * qsb + (g * G + r / S) * qsh + r % S * qss;
      qx[u] = e >= R * D ? 0.0f : xq ? ATT_ROPE(qr, e % D, b, r % S) : qr[e % D];
    }
#pragma unroll
    for (int u = 0; u < GQA_QLOADS; ++u)
      if (u * GQA_WG + lid < R * D) qs[u * GQA_WG + lid] = qx[u];
  }
  // this split's new keys [f0, f1), when the launch has them (ATT_FRESH_ARGS)
  const int f0 = max(t0, off), f1 = xq ? min(t1, off + S) : f0;
  // roles: scoring key sj of rows sr, sr + GQA_SROWS; row mr's max and sum with lane mc;
  // output dim ad of rows ar, ar + lanes, ... (items past lanes * Dv have none)
  const int sj = lid % GQA_BK, sr = lid / GQA_BK, mr = lid / GQA_LANES, mc = lid % GQA_LANES;
  const int lanes = GQA_WG / Dv, ad = lid % Dv, ar = lid < lanes * Dv ? lid / Dv : GQA_MAXR;
  float m = -INFINITY, l = 0.0f, acc[GQA_ACC];
  for (int i = 0; i < GQA_ACC; ++i) acc[i] = 0.0f;
  for (int tb = t0; tb < t1; tb += GQA_BK) {
    const int nk = min(GQA_BK, t1 - tb);
    barrier(CLK_LOCAL_MEM_FENCE);  // the last block's ks, vs, sc and crow read (and q staged)
#pragma unroll
    for (int u = 0; u < GQA_LOADS; ++u) {
      const int e = u * GQA_WG + lid, ev = e - nk * kq;
      const int j = ev < 0 ? e / kq : ev / vq, d = 4 * (ev < 0 ? e % kq : ev % vq), t = tb + j;
      if (ev >= nk * vq) continue;
      float4 y = x[u];
      if (t >= f0 && t < f1) {  // a new key: the RoPE's rotated input, never the cache
        const int fj = t - off;
        y = ev < 0 ? (float4)(ATT_FRESH_K(b, g, fj, d), ATT_FRESH_K(b, g, fj, d + 1), ATT_FRESH_K(b, g, fj, d + 2),
                              ATT_FRESH_K(b, g, fj, d + 3))
                   : (float4)(ATT_FRESH_V(b, g, fj, d), ATT_FRESH_V(b, g, fj, d + 1), ATT_FRESH_V(b, g, fj, d + 2),
                              ATT_FRESH_V(b, g, fj, d + 3));
      }
      if (ev < 0) vstore4(y, 0, ks + j * KR + d);
      else vstore4(y, 0, vs + j * Dv + d);
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // the block staged
    if (tb + GQA_BK < t1) GQA_LOAD(tb + GQA_BK)
    {
      float dots[GQA_MAXR / GQA_SROWS] = {0.0f};
      if (sj < nk)
        for (int d = 0; d < D; d += 4) {
          const float4 kd = vload4(0, ks + sj * KR + d);
          for (int i = 0; i < GQA_MAXR / GQA_SROWS; ++i)
            if (sr + GQA_SROWS * i < R) dots[i] += dot(vload4(0, qs + (sr + GQA_SROWS * i) * D + d), kd);
        }
      for (int i = 0; i < GQA_MAXR / GQA_SROWS; ++i) {
        const int r = sr + GQA_SROWS * i, s = r % S, t = tb + sj;
        if (r < R)
          sc[r * GQA_BK + sj] = sj >= nk ? -INFINITY
                                         : att_score(dots[i], scale, softcap, mask, b * msb + (g * G + r / S) * msh + s * mss + t * mst,
                                                     has_mask, att_hidden(s, t, off, causal, km, kmb, b * kmsb), mask_value);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // the scores written
    float bm = -INFINITY;
    if (mr < R)
      for (int j = mc; j < GQA_BK; j += GQA_LANES) bm = fmax(bm, sc[mr * GQA_BK + j]);
    redm[lid] = bm;
    barrier(CLK_LOCAL_MEM_FENCE);
    float mn = m, ps = 0.0f;
    for (int u = 0; u < GQA_LANES; ++u) mn = fmax(mn, redm[mr * GQA_LANES + u]);
    if (mr < R)
      for (int j = mc; j < GQA_BK; j += GQA_LANES) {
        const float y = sc[mr * GQA_BK + j], p = y == -INFINITY ? 0.0f : exp(y - mn);
        sc[mr * GQA_BK + j] = p;
        ps += p;
      }
    reds[lid] = ps;
    const float corr = m == -INFINITY ? 0.0f : exp(m - mn);
    if (mc == 0 && mr < R) crow[mr] = corr;
    m = mn;
    barrier(CLK_LOCAL_MEM_FENCE);  // the weights, their sums and the rows' rescales written
    float sum = 0.0f;
    for (int u = 0; u < GQA_LANES; ++u) sum += reds[mr * GQA_LANES + u];
    l = l * corr + sum;
    // Keys outermost, so that every index into acc is a constant once the loops inside
    // unroll (the H100's compiler otherwise keeps acc in memory: scripts/kernel_spills.py).
#pragma unroll
    for (int i = 0; i < GQA_ACC; ++i)
      if (ar + lanes * i < R) acc[i] *= crow[ar + lanes * i];
    for (int j = 0; j < nk; ++j) {
      const float y = vs[j * Dv + ad];
#pragma unroll
      for (int i = 0; i < GQA_ACC; ++i)
        if (ar + lanes * i < R) acc[i] += sc[(ar + lanes * i) * GQA_BK + j] * y;
    }
  }
  if (mc == 0 && mr < R) {
    mrow[mr] = m;
    lrow[mr] = l;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  // Row r's splits in `part`, each n floats (its maximum, its sum, its Dv outputs).
  const int n = Dv + 2;
#define GQA_PART(r) (part + (long)((b * H + g * G + (r) / S) * S + (r) % S) * splits * n)
#pragma unroll
  for (int i = 0; i < GQA_ACC; ++i) {
    const int r = ar + lanes * i;
    if (r < R) {
      const int h = g * G + r / S, s = r % S;
      const float lr = lrow[r];
      if (splits == 1) {
        out[b * osb + h * osh + s * oss + ad] = zero_rows && !(lr > 0.0f) ? 0.0f : acc[i] / lr;
      } else {
        __global float* pp = GQA_PART(r) + split * n;
        pp[2 + ad] = acc[i];
        if (ad == 0) {
          pp[0] = mrow[r];
          pp[1] = lr;
        }
      }
    }
  }
  // With `merged` (a count per kv head), the kv head's last work-group to finish merges
  // its rows' splits, as attention_combine_f32 would, with no launch of that: each split's
  // weight exp(m - max) and sum into local memory (ks and vs, free now; lowering passes
  // `merged` only where R * splits fits GQA_MERGE), the rows' maxima and sums by GQA_LANES
  // items a row in a fixed order, then each output as acc's items hold them.
  if (splits == 1 || !merged || !last_to_finish(merged + bg, splits, lid, &last)) return;
  __local float *w = ks, *sz = vs;
  for (int e = lid; e < R * splits; e += GQA_WG) {
    __global const float* pz = GQA_PART(e / splits) + (e % splits) * n;
    w[e] = load_past_l1(pz);
    sz[e] = load_past_l1(pz + 1);
  }
  barrier(CLK_LOCAL_MEM_FENCE);
  float bm = -INFINITY;
  if (mr < R)
    for (int z = mc; z < splits; z += GQA_LANES) bm = fmax(bm, w[mr * splits + z]);
  redm[lid] = bm;
  barrier(CLK_LOCAL_MEM_FENCE);
  bm = -INFINITY;
  for (int u = 0; u < GQA_LANES; ++u) bm = fmax(bm, redm[mr * GQA_LANES + u]);
  float ps = 0.0f;
  if (mr < R)
    for (int z = mc; z < splits; z += GQA_LANES) {
      const float mz = w[mr * splits + z], wz = mz == -INFINITY ? 0.0f : exp(mz - bm);
      w[mr * splits + z] = wz;
      ps += wz * sz[mr * splits + z];
    }
  reds[lid] = ps;
  barrier(CLK_LOCAL_MEM_FENCE);  // the weights and the rows' part sums written
  if (mc == 0 && mr < R) {
    float sum = 0.0f;
    for (int u = 0; u < GQA_LANES; ++u) sum += reds[mr * GQA_LANES + u];
    lrow[mr] = sum;
  }
  barrier(CLK_LOCAL_MEM_FENCE);
#pragma unroll
  for (int i = 0; i < GQA_ACC; ++i) {
    const int r = ar + lanes * i;
    if (r < R) {
      __global const float* pr = GQA_PART(r) + 2 + ad;
      float4 o4 = 0.0f;  // four sums, so that four loads are in flight
      int z = 0;
      for (; z + 4 <= splits; z += 4)
        o4 += vload4(0, w + r * splits + z) * (float4)(load_past_l1(pr + z * n), load_past_l1(pr + (z + 1) * n),
                                                       load_past_l1(pr + (z + 2) * n), load_past_l1(pr + (z + 3) * n));
      float o = o4.x + o4.y + o4.z + o4.w;
      for (; z < splits; ++z) o += w[r * splits + z] * load_past_l1(pr + z * n);
      const float lr = lrow[r];
      out[b * osb + (g * G + r / S) * osh + r % S * oss + ad] = zero_rows && !(lr > 0.0f) ? 0.0f : o / lr;
    }
  }
#undef GQA_PART
}
#undef GQA_LOAD
#endif

// GPU family, decode (a few query rows over a cache): a work-group per (query row, split
// of the keys), each item taking keys lid, lid + 64, ... with its own running max, sum and
// output (registers; D and Dv up to 128, multiples of 4): no barrier per block of keys, one
// merge at the end (the items' maxima, then their outputs summed a column per item). With
// several splits it writes (max, sum, output) for attention_combine_f32.
// It takes heads of any multiple of 4 up to WIDTH (heads of exactly 32, 64 or 128: ATT_DEC4).
// With a RoPE's work (ATT_FRESH_ARGS) the split holding new keys stages them rotated in
// local memory (up to ATT_DEC_MAXS rows: lowering's decode rows), in accs, which the
// final merge uses only after wg_max's barriers.
#define ATT_DEC_MAXS 4
#define ATT_DEC_FLOATS(WIDTH) ((WIDTH) + RED_WG + RED_WG * ((WIDTH) + 1))
// One key t at KR, its value at VR into the item's running state (accumulators of WIDTH
// floats): a cache's (KV_LD4) or the staged new keys' (vload4, local memory) by LD4.
#define ATT_DEC_KEY(WIDTH, KR, VR, LD4)                                                              \
  {                                                                                                  \
    float4 a = 0.0f;                                                                                 \
    for (int d = 0; d < DK; d += 4) a += vload4(0, qs + d) * LD4(d / 4, (KR));                        \
    const float x = att_score(a.x + a.y + a.z + a.w, scale, softcap, mask, moff + t * mst, has_mask, \
                              att_hidden(s, t, off, causal, km, kmb, b * kmsb), mask_value);         \
    if (x != -INFINITY) {                                                                            \
      if (x > m) { /* a new maximum rescales what this item summed so far */                         \
        const float corr = exp(m - x);                                                               \
        l *= corr;                                                                                   \
        for (int i = 0; i < WIDTH / 4; ++i) acc[i] *= corr;                                          \
        m = x;                                                                                       \
      }                                                                                              \
      const float p = exp(x - m);                                                                    \
      l += p;                                                                                        \
      for (int i = 0; i < WIDTH / 4; ++i)                                                            \
        if (4 * i < DV) acc[i] += p * LD4(i, (VR));                                                   \
    }                                                                                                \
  }
// The decode rows' end: output dim d is the sum of the LANES partial rows in accs (STRIDE
// floats apart), over the row's sum, written to out, or with several splits to the split's
// (max, sum, output) in part for the merge.
#define ATT_DEC_WRITE(DVN, LANES, STRIDE)                                                                        \
  __global float* o = out + b * osb + h * osh + s * oss;                                                         \
  __global float* pp = part + ((long)row * splits + split) * ((DVN) + 2);                                        \
  for (int d = lid; d < (DVN); d += RED_WG) {                                                                    \
    float a = 0.0f;                                                                                              \
    for (int j = 0; j < (LANES); ++j) a += accs[j * (STRIDE) + d];                                               \
    if (splits == 1) o[d] = zero_rows && !(sum > 0.0f) ? 0.0f : a / sum;                                         \
    else pp[2 + d] = a;                                                                                          \
  }                                                                                                              \
  if (splits > 1 && lid == 0) {                                                                                  \
    pp[0] = mx;                                                                                                  \
    pp[1] = sum;                                                                                                 \
  }
#define ATT_DEC(NAME, WIDTH)                                                                                     \
  __kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))                                                   \
  void NAME(__global const float* q, __global const KV_T* k, __global const KV_T* v,                           \
            __global const float* mask, __global float* out, __global float* part, ATT_ARGS, int splits,         \
            int chunk, ATT_FRESH_ARGS) {                                                                         \
    __local float qs[WIDTH], red[RED_WG], accs[RED_WG * (WIDTH + 1)];                                            \
    __local float *fk = accs, *fv = accs + ATT_DEC_MAXS * (WIDTH);                                               \
    ATT_SPLIT_ROW(ATT_FRESH_Q)                                                                                   \
    const int DK = D, DV = Dv;                                                                                   \
    const int t0 = split * chunk, t1 = min(T, t0 + chunk);                                                       \
    /* this split's new keys [f0, f1), if the launch has them; the caches' copy early, as */                     \
    /* nothing here reads it */                                                                                  \
    const int f0 = max(t0, off), f1 = xq ? min(t1, off + S) : f0;                                                \
    if (xq && split == 0 && s == 0 && h % (H / Hkv) == 0) ATT_FRESH_STORE(b, g, RED_WG, 0, S)                    \
    for (int e = lid; e < (f1 - f0) * DK; e += RED_WG)                                                           \
      fk[e / DK * WIDTH + e % DK] = ATT_FRESH_K(b, g, f0 - off + e / DK, e % DK);                                \
    for (int e = lid; e < (f1 - f0) * DV; e += RED_WG)                                                           \
      fv[e / DV * WIDTH + e % DV] = ATT_FRESH_V(b, g, f0 - off + e / DV, e % DV);                                \
    barrier(CLK_LOCAL_MEM_FENCE); /* q and the new keys staged */                                                \
    float4 acc[WIDTH / 4];                                                                                       \
    for (int i = 0; i < WIDTH / 4; ++i) acc[i] = 0.0f;                                                           \
    float m = -INFINITY, l = 0.0f;                                                                               \
    for (int t = t0 + lid; t < t1; t += RED_WG)                                                                  \
      if (t < f0 || t >= f1) ATT_DEC_KEY(WIDTH, KV_AT(kb, (long)t * kst), KV_AT(vb, (long)t * vst), KV_LD4)                  \
    for (int t = f0 + lid; t < f1; t += RED_WG)                                                                  \
      ATT_DEC_KEY(WIDTH, fk + (t - f0) * WIDTH, fv + (t - f0) * WIDTH, vload4)                                   \
    const float mx = wg_max(red, m);                                                                             \
    const float sc = m == -INFINITY ? 0.0f : exp(m - mx);                                                        \
    const float sum = wg_sum(red, l * sc);                                                                       \
    const int stride = DV + 1; /* one apart: the column sums read across banks */                                \
    for (int i = 0; i < WIDTH / 4; ++i) {                                                                        \
      if (4 * i >= DV) break;                                                                                    \
      const float4 x = acc[i] * sc;                                                                              \
      accs[lid * stride + 4 * i] = x.x;                                                                          \
      accs[lid * stride + 4 * i + 1] = x.y;                                                                      \
      accs[lid * stride + 4 * i + 2] = x.z;                                                                      \
      accs[lid * stride + 4 * i + 3] = x.w;                                                                      \
    }                                                                                                            \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                                \
    ATT_DEC_WRITE(DV, RED_WG, stride)                                                                            \
  }
// Heads of exactly 32, 64 or 128: the same work-groups, but 16 keys at a time, 4 items a
// key, each item a quarter of the head's dims (8 to 32 consecutive: a warp's loads cover 8
// whole key rows, where an item a key read 8 rows' scattered pieces), the quarters' dots
// summed through local memory (two buffers taken in turn: one barrier a step). An item
// then keeps the sums of its quarter only, and the merge at the end adds 16 key lanes (16 x
// WIDTH floats), not 64 items' whole rows. Each item loads its quarter of the value with
// the key's, before the barrier, so a step waits on one round trip to memory, not two (H100
// lab, Llama-2-7B's heads over 2049 keys read as 8-byte words: 41 -> 36 µs; docs/tl-bench.md).
#define ATT_DEC4_FLOATS(WIDTH) ((WIDTH) + 3 * RED_WG + 16 * (WIDTH) + 2 * ATT_DEC_MAXS * (WIDTH))
#define ATT_DEC4(NAME, WIDTH)                                                                                    \
  __kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))                                                   \
  void NAME(__global const float* q, __global const KV_T* k, __global const KV_T* v,                           \
            __global const float* mask, __global float* out, __global float* part, ATT_ARGS, int splits,         \
            int chunk, ATT_FRESH_ARGS) {                                                                         \
    __local float qs[WIDTH], red[RED_WG], pd[2 * RED_WG], accs[16 * (WIDTH)];                                    \
    __local float fk[ATT_DEC_MAXS * (WIDTH)], fv[ATT_DEC_MAXS * (WIDTH)];                                        \
    ATT_SPLIT_ROW(ATT_FRESH_Q)                                                                                   \
    const int QW = (WIDTH) / 4, ks = lid >> 2, d0 = (lid & 3) * QW;                                              \
    const int t0 = split * chunk, t1 = min(T, t0 + chunk);                                                       \
    const int f0 = max(t0, off), f1 = xq ? min(t1, off + S) : f0; /* as ATT_DEC's */                             \
    if (xq && split == 0 && s == 0 && h % (H / Hkv) == 0) ATT_FRESH_STORE(b, g, RED_WG, 0, S)                    \
    for (int e = lid; e < (f1 - f0) * (WIDTH); e += RED_WG) {                                                    \
      fk[e] = ATT_FRESH_K(b, g, f0 - off + e / (WIDTH), e % (WIDTH));                                            \
      fv[e] = ATT_FRESH_V(b, g, f0 - off + e / (WIDTH), e % (WIDTH));                                            \
    }                                                                                                            \
    barrier(CLK_LOCAL_MEM_FENCE); /* q and the new keys staged */                                                \
    float4 acc[(WIDTH) / 16];                                                                                    \
    for (int i = 0; i < (WIDTH) / 16; ++i) acc[i] = 0.0f;                                                        \
    float m = -INFINITY, l = 0.0f;                                                                               \
    for (int tb = t0, it = 0; tb < t1; tb += 16, ++it) {                                                         \
      const int t = tb + ks, fresh = t >= f0 && t < f1;                                                          \
      float4 a = 0.0f, vq[(WIDTH) / 16]; /* the value's quarter, loaded with the key's */                       \
      if (t < t1) {                                                                                              \
        __global const KV_T* kr = KV_AT(kb, (long)t * kst);                                                      \
        __global const KV_T* vr = KV_AT(vb, (long)t * vst);                                                      \
        for (int i = 0; i < (WIDTH) / 16; ++i)                                                                   \
          vq[i] = fresh ? vload4(0, fv + (t - f0) * (WIDTH) + d0 + 4 * i) : KV_LD4(d0 / 4 + i, vr);              \
        for (int i = 0; i < QW; i += 4)                                                                          \
          a += vload4(0, qs + d0 + i) * (fresh ? vload4(0, fk + (t - f0) * (WIDTH) + d0 + i) : KV_LD4((d0 + i) / 4, kr)); \
      }                                                                                                          \
      __local float* pp = pd + (it & 1) * RED_WG;                                                                \
      pp[lid] = a.x + a.y + a.z + a.w;                                                                           \
      barrier(CLK_LOCAL_MEM_FENCE); /* the quarters' dots; the buffer's last readers were two steps back */      \
      if (t < t1) {                                                                                              \
        const float x = att_score(pp[4 * ks] + pp[4 * ks + 1] + pp[4 * ks + 2] + pp[4 * ks + 3], scale, softcap, \
                                  mask, moff + t * mst, has_mask, att_hidden(s, t, off, causal, km, kmb, b * kmsb), \
                                  mask_value);                                                                   \
        if (x != -INFINITY) {                                                                                    \
          if (x > m) { /* a new maximum rescales what this key lane summed so far */                             \
            const float corr = exp(m - x);                                                                       \
            l *= corr;                                                                                           \
            for (int i = 0; i < (WIDTH) / 16; ++i) acc[i] *= corr;                                               \
            m = x;                                                                                               \
          }                                                                                                      \
          const float p = exp(x - m);                                                                            \
          l += p;                                                                                                \
          for (int i = 0; i < (WIDTH) / 16; ++i) acc[i] += p * vq[i];                                            \
        }                                                                                                        \
      }                                                                                                          \
    }                                                                                                            \
    const float mx = wg_max(red, m);                                                                             \
    const float sc = m == -INFINITY ? 0.0f : exp(m - mx);                                                        \
    const float sum = wg_sum(red, (lid & 3) ? 0.0f : l * sc); /* a key lane's sum once, not 4 times */           \
    for (int i = 0; i < (WIDTH) / 16; ++i) vstore4(acc[i] * sc, 0, accs + ks * (WIDTH) + d0 + 4 * i);           \
    barrier(CLK_LOCAL_MEM_FENCE);                                                                                \
    ATT_DEC_WRITE(WIDTH, 16, WIDTH)                                                                              \
  }
#if ATT_FITS(ATT_DEC4_FLOATS(64))
ATT_DEC4(attention_dec32_f32, 32)
ATT_DEC4(attention_dec64_f32, 64)
#endif
#if ATT_FITS(ATT_DEC_FLOATS(128))
ATT_DEC(attention_dec_f32, 128)
#endif
#if ATT_FITS(ATT_DEC4_FLOATS(128))
ATT_DEC4(attention_dec128_f32, 128)
#endif

#ifdef TL_MMA
// Prefill attention on tensor cores (attention.cpp's attention_mma* rows): the flash
// form with f16 products and fp32 softmax and sums. A work-group of WARPS warps takes 16
// query rows a warp (4 warps, or 8 where the device has work-groups enough: twice the rows
// for each key tile staged), of G query heads that share a kv head (att_mma_heads: a
// grouped-query layer's heads read each staged tile together, and the group's rows span
// 16 WARPS / G positions, so the causal edge comes sooner), and steps through the keys its
// rows may see 64 at a time: S = Q K^T (Q's fragments kept in registers, K's tile in local memory),
// the running max and sum per row (a row's 4 threads agree through shuffles), P = exp2(S -
// max) as f16 fragments straight from S's registers, O += P V (V's tile stored transposed,
// so its fragments are pairs of keys). Taken without a float mask or soft cap; hidden keys
// (the causal and key masks) score + mask_value as att_score's do, and the keys after the
// last one any row may see are skipped as attention_tile_f32 skips them. The key mask is
// read once a tile (kbias: 0, mask_value, or -inf past T); the causal test runs only on
// the tiles that cross a warp's diagonal. Q's and K's k order inside 32 dims is permuted
// alike (thread t reads dims 8t..8t+7 as one uint4, as gemm.cl's tiles).
#define FA_BC 64
// A row's 4 threads' largest value and sum (mma.cl's LANE_XOR).
#define QUAD_MAX(x) (x = fmax(x, LANE_XOR(x, 1)), fmax(x, LANE_XOR(x, 2)))
#define QUAD_SUM(x) (x += LANE_XOR(x, 1), x + LANE_XOR(x, 2))
// The query heads of one kv head that a work-group takes together (warp w: head w % G of
// them, rows 16 (w / G) on): the largest power of two dividing both the group's `rep`
// heads and the warps, so that each key tile staged serves G heads' rows. (attention.cpp's
// mmaHeads is the same.)
inline int att_mma_heads(int rep, int warps) {
  int g = 1;
  while (g < warps && rep % (2 * g) == 0) g *= 2;
  return g;
}
// A cache's 8 dims of a key row (c: which 8; zeros where `has` is 0) as half bits, and 4
// dims of two key rows (q: which 4) as pairs of halves (the first key's in the lower
// bits): the tiles' elements. An fp16 cache (TL_KV_HALF) gives its bits as stored, the
// others are widened to fp32 and rounded to nearest.
inline uint4 kv_half8(__global const KV_T* row, int c, int has) {
#ifdef TL_KV_HALF
  return has ? ((__global const uint4*)row)[c] : (uint4)0;  // one 16-byte load (rows start on 16 bytes)
#else
  return half8_bits(has ? KV_LD8(c, row) : (float8)0.0f);
#endif
}
inline uint4 kv_half_pairs(__global const KV_T* a, int has_a, __global const KV_T* c, int has_c, int q) {
#ifdef TL_KV_HALF
  const uint2 x = has_a ? ((__global const uint2*)a)[q] : (uint2)0;  // 8-byte loads
  const uint2 y = has_c ? ((__global const uint2*)c)[q] : (uint2)0;
  return (uint4)((x.x & 0xffff) | y.x << 16, x.x >> 16 | (y.x & 0xffff0000), (x.y & 0xffff) | y.y << 16,
                 x.y >> 16 | (y.y & 0xffff0000));
#else
  const float4 x = has_a ? KV_LD4(q, a) : (float4)0.0f, y = has_c ? KV_LD4(q, c) : (float4)0.0f;
  return (uint4)(half2_bits(x.x, y.x), half2_bits(x.y, y.y), half2_bits(x.z, y.z), half2_bits(x.w, y.w));
#endif
}
// K's tile: rows of D halves, padded to D / 2 + 16 words so that two rows fill 32 banks;
// V's: D rows of FA_BC keys, FA_BC / 2 + 4 words.
#define ATTENTION_MMA(NAME, D_, WARPS)                                                             \
  __kernel __attribute__((reqd_work_group_size(32 * WARPS, 1, 1))) void NAME(                      \
      __global const float* q, __global const KV_T* k, __global const KV_T* v, __global const float* mask, \
      __global float* out, ATT_ARGS) {                                                             \
    __local uint4 Ks[FA_BC * (D_ / 8 + 4)];                                                         \
    __local uint Vt[D_ * (FA_BC / 2 + 4)];                                                          \
    __local float kbias[FA_BC];                                                                    \
    MMA_EMU_DECL                                                                                   \
    const int KW = D_ / 8 + 4, VW = FA_BC / 2 + 4, NT = 32 * WARPS;                                \
    const int tid = get_local_id(0), lane = tid & 31, warp = tid >> 5, g = lane >> 2, t = lane & 3; \
    const int G = att_mma_heads(H / Hkv, WARPS), BR = 16 * WARPS / G;                              \
    const int tiles = (S + BR - 1) / BR, grp = get_group_id(0);                                    \
    const int tile = grp % tiles, h = grp / tiles % (H / G) * G + warp % G, b = grp / (tiles * (H / G)); \
    const int kvh = h / (H / Hkv), s0 = tile * BR, off = ATT_OFFSET;                               \
    /* scores in base 2 (exp2): q and mask_value scaled by log2(e) */                             \
    const float qscale = scale * 1.4426950408889634f, mv = mask_value * 1.4426950408889634f;       \
    const int kmo = b * kmsb;                                                                      \
    __local int more;                                                                              \
    uint4 qf[2][D_ / 32];                                                                           \
    MMA_UNROLL for (int hh = 0; hh < 2; ++hh) {                                                                      \
      const int s = min(s0 + warp / G * 16 + g + 8 * hh, S - 1);                                   \
      __global const float* qr = q + b * qsb + h * qsh + s * qss;                                  \
      MMA_UNROLL for (int c = 0; c < D_ / 32; ++c) qf[hh][c] = half8_bits(vload8(0, qr + 32 * c + 8 * t) * qscale);        \
    }                                                                                              \
    float o[D_ / 8][4];                                                                            \
    MMA_UNROLL for (int j = 0; j < D_ / 8; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;                        \
    float m0 = -INFINITY, m1 = -INFINITY, l0 = 0.0f, l1 = 0.0f;                                    \
    __global const KV_T* kb = KV_AT(k, b * ksb + kvh * ksh);                                      \
    __global const KV_T* vb = KV_AT(v, b * vsb + kvh * vsh);                                      \
    const int seen = causal ? min(T, s0 + BR + off) : T;                                           \
    const int r0 = s0 + warp / G * 16 + g; /* this thread's rows: r0 and r0 + 8 */                 \
    for (int t0 = 0; t0 < T; t0 += FA_BC) {                                                        \
      ATT_STOP_PAST_SEEN(tid == 0, (r0 < S && att_needs_hidden(m0, mv)) || (r0 + 8 < S && att_needs_hidden(m1, mv))) \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                \
      for (int e = tid; e < FA_BC * D_ / 8; e += NT) {                                             \
        const int key = e / (D_ / 8), c = e % (D_ / 8);                                            \
        Ks[key * KW + c] = kv_half8(KV_AT(kb, (long)(t0 + key) * kst), c, t0 + key < T);          \
      }                                                                                            \
      for (int e = tid; e < FA_BC / 2 * D_ / 4; e += NT) {                                         \
        const int kp = e / (D_ / 4), d = e % (D_ / 4) * 4, key = t0 + 2 * kp;                       \
        const uint4 pk = kv_half_pairs(KV_AT(vb, (long)key * vst), key < T, KV_AT(vb, (long)(key + 1) * vst), key + 1 < T, d / 4); \
        Vt[d * VW + kp] = pk.x;                                                                    \
        Vt[(d + 1) * VW + kp] = pk.y;                                                              \
        Vt[(d + 2) * VW + kp] = pk.z;                                                              \
        Vt[(d + 3) * VW + kp] = pk.w;                                                              \
      }                                                                                            \
      if (tid < FA_BC)                                                                             \
        kbias[tid] = t0 + tid >= T ? -INFINITY : att_hidden(0, t0 + tid, 0, 0, km, kmb, kmo) ? mv : 0.0f; \
      barrier(CLK_LOCAL_MEM_FENCE);                                                                \
      float sc[FA_BC / 8][4];                                                                      \
      MMA_UNROLL for (int j = 0; j < FA_BC / 8; ++j) {                                                               \
        sc[j][0] = sc[j][1] = sc[j][2] = sc[j][3] = 0.0f;                                          \
        MMA_UNROLL for (int c = 0; c < D_ / 32; ++c) {                                                               \
          const uint4 kf = Ks[(8 * j + g) * KW + 4 * c + t];                                       \
          MMA_16816(sc[j], qf[0][c].x, qf[1][c].x, qf[0][c].y, qf[1][c].y, kf.x, kf.y);            \
          MMA_16816(sc[j], qf[0][c].z, qf[1][c].z, qf[0][c].w, qf[1][c].w, kf.z, kf.w);            \
        }                                                                                          \
      }                                                                                            \
      float x0 = m0, x1 = m1;                                                                      \
      /* the tile crosses this thread's rows' diagonal: some key after a row's own */             \
      const int diag = causal && t0 + FA_BC - 1 > r0 + off;                                        \
      MMA_UNROLL for (int j = 0; j < FA_BC / 8; ++j)                                                                 \
        MMA_UNROLL for (int e = 0; e < 4; ++e) {                                                                     \
          const int kl = 8 * j + 2 * t + (e & 1), row = r0 + (e >> 1) * 8;                        \
          const float kbv = kbias[kl];                                                             \
          if (!diag) sc[j][e] += kbv;                                                              \
          else if (kbv == -INFINITY) sc[j][e] = -INFINITY;                                         \
          else if (t0 + kl > row + off || kbv != 0.0f) sc[j][e] += mv;                             \
          if (e < 2) x0 = fmax(x0, sc[j][e]); else x1 = fmax(x1, sc[j][e]);                        \
        }                                                                                          \
      x0 = QUAD_MAX(x0);                                                                           \
      x1 = QUAD_MAX(x1);                                                                           \
      /* a row with no finite score yet (mask_value -inf) keeps 0s, no NaN */                      \
      const float c0 = x0 == -INFINITY ? 1.0f : native_exp2(m0 - x0);                              \
      const float c1 = x1 == -INFINITY ? 1.0f : native_exp2(m1 - x1);                              \
      m0 = x0;                                                                                     \
      m1 = x1;                                                                                     \
      const float z0 = x0 == -INFINITY ? 0.0f : x0, z1 = x1 == -INFINITY ? 0.0f : x1;              \
      float p0 = 0.0f, p1 = 0.0f;                                                                  \
      MMA_UNROLL for (int j = 0; j < FA_BC / 8; ++j) {                                             \
        sc[j][0] = native_exp2(sc[j][0] - z0);                                                     \
        sc[j][1] = native_exp2(sc[j][1] - z0);                                                     \
        sc[j][2] = native_exp2(sc[j][2] - z1);                                                     \
        sc[j][3] = native_exp2(sc[j][3] - z1);                                                     \
        p0 += sc[j][0] + sc[j][1];                                                                 \
        p1 += sc[j][2] + sc[j][3];                                                                 \
      }                                                                                            \
      l0 = l0 * c0 + QUAD_SUM(p0);                                                                 \
      l1 = l1 * c1 + QUAD_SUM(p1);                                                                 \
      MMA_UNROLL for (int j = 0; j < D_ / 8; ++j) {                                                                  \
        o[j][0] *= c0;                                                                             \
        o[j][1] *= c0;                                                                             \
        o[j][2] *= c1;                                                                             \
        o[j][3] *= c1;                                                                             \
      }                                                                                            \
      MMA_UNROLL for (int c = 0; c < FA_BC / 16; ++c) {                                                              \
        const uint a0 = half2_bits(sc[2 * c][0], sc[2 * c][1]), a1 = half2_bits(sc[2 * c][2], sc[2 * c][3]); \
        const uint a2 = half2_bits(sc[2 * c + 1][0], sc[2 * c + 1][1]);                            \
        const uint a3 = half2_bits(sc[2 * c + 1][2], sc[2 * c + 1][3]);                            \
        MMA_UNROLL for (int j = 0; j < D_ / 8; ++j) {                                                                \
          const int d = 8 * j + g;                                                                 \
          MMA_16816(o[j], a0, a1, a2, a3, Vt[d * VW + 8 * c + t], Vt[d * VW + 8 * c + 4 + t]);     \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    MMA_UNROLL for (int hh = 0; hh < 2; ++hh) {                                                                      \
      const int s = r0 + 8 * hh;                                                                   \
      if (s >= S) continue;                                                                        \
      const float l = hh ? l1 : l0, inv = zero_rows && !(l > 0.0f) ? 0.0f : 1.0f / l;              \
      __global float* orow = out + b * osb + h * osh + s * oss;                                    \
      MMA_UNROLL for (int j = 0; j < D_ / 8; ++j) vstore2((float2)(o[j][2 * hh], o[j][2 * hh + 1]) * inv, 0, orow + 8 * j + 2 * t);        \
    }                                                                                              \
  }
ATTENTION_MMA(attention_mma_d64, 64, 4)
ATTENTION_MMA(attention_mma_d128, 128, 4)
ATTENTION_MMA(attention_mma_d64_r128, 64, 8)
ATTENTION_MMA(attention_mma_d128_r128, 128, 8)
#endif  // TL_MMA
