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

// Where query row 0 sits: T - S keys before it, or an in-place cache's true length (the
// keys past it and the new rows are padding: tl-plan --pad).
#define ATT_OFFSET (kv_rows ? kv_rows[0] : T - S)

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

// CPU family: one work item per query row (b, h, s), a work-group each so that a decode
// step's few rows spread over the cores; keys in blocks of ATT_CPU_BK, scored, then the
// block's maximum rescales the sums once, the head dims four at a time where they allow.
#define ATT_CPU_BK 16
#define ATT_ARGS                                                                                      \
  int rows, int H, int Hkv, int S, int T, int D, int Dv, float scale, float softcap, int has_mask, int qsb, \
      int qsh, int qss, int ksb, int ksh, int kst, int vsb, int vsh, int vst, int msb, int msh, int mss, int mst, \
      int osb, int osh, int oss, int zero_rows, int causal, float mask_value, __global const uchar *km, int kmb, int kmsb, \
      __global const int *kv_rows

__kernel void attention_f32(__global const float* q, __global const float* k, __global const float* v,
                            __global const float* mask, __global float* out, ATT_ARGS) {
  const int row = get_global_id(0);
  if (row >= rows) return;
  const int s = row % S, h = row / S % H, b = row / (S * H), g = h / (H / Hkv), off = ATT_OFFSET;
  __global const float* qr = q + b * qsb + h * qsh + s * qss;
  __global const float* kb = k + b * ksb + g * ksh;
  __global const float* vb = v + b * vsb + g * vsh;
  const int moff = b * msb + h * msh + s * mss, quads = ((D | Dv) & 3) == 0;
  // Under a causal mask the keys after the row's own are hidden: stop there unless
  // att_needs_hidden (as attention_tile_f32 does).
  const int seen = causal ? min(T, s + off + 1) : T;
  float acc[ATT_MAX_D], x[ATT_CPU_BK];
  for (int d = 0; d < Dv; ++d) acc[d] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int t0 = 0; t0 < T; t0 += ATT_CPU_BK) {
    if (t0 >= seen && !att_needs_hidden(m, mask_value)) break;
    const int n = min(ATT_CPU_BK, T - t0);
    float bm = -INFINITY;
    for (int j = 0; j < n; ++j) {
      __global const float* kr = kb + (long)(t0 + j) * kst;
      float dot = 0.0f;
      if (quads) {
        float4 a = 0.0f;
        for (int d = 0; d < D; d += 4) a += vload4(0, qr + d) * vload4(0, kr + d);
        dot = a.x + a.y + a.z + a.w;
      } else {
        for (int d = 0; d < D; ++d) dot += qr[d] * kr[d];
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
      __global const float* vr = vb + (long)(t0 + j) * vst;
      l += p;
      if (quads) {
        for (int d = 0; d < Dv; d += 4) vstore4(vload4(0, acc + d) + p * vload4(0, vr + d), 0, acc + d);
      } else {
        for (int d = 0; d < Dv; ++d) acc[d] += p * vr[d];
      }
    }
  }
  __global float* o = out + b * osb + h * osh + s * oss;
  // A row masked whole is 0/0, NaN, as Softmax gives; or 0 (SDPA's Where(IsNaN(p), 0, p)).
  for (int d = 0; d < Dv; ++d) o[d] = zero_rows && !(l > 0.0f) ? 0.0f : acc[d] / l;
}

// What a work-group per (query row, split of the keys) starts with: its row's indices, q
// going to local memory qs (element d of the row at offset r of q: QAT(r, d); read after a
// barrier), the kv head's k and v, the row's mask offset.
#define ATT_SPLIT_ROW(QAT)                                                                          \
  const int row = get_group_id(0), split = get_group_id(1), lid = get_local_id(0);                  \
  const int s = row % S, h = row / S % H, b = row / (S * H), g = h / (H / Hkv), off = ATT_OFFSET;   \
  for (int d = lid; d < D; d += RED_WG) qs[d] = QAT(b * qsb + h * qsh + s * qss, d);                \
  __global const float* kb = k + b * ksb + g * ksh;                                                 \
  __global const float* vb = v + b * vsb + g * vsh;                                                 \
  const int moff = b * msb + h * msh + s * mss;

#define ATT_Q(r, d) q[(r) + (d)]

// The decode kernels (attention_dec*, attention_gqa_f32) can do their layer's tl.RoPE
// with in-place cache appends themselves (lowering's joinedRope), a launch fewer a layer:
// q is rotated from the RoPE's input xq as it is staged, the step's new keys and values
// (keys [off, off + S)) come from its inputs xk (rotated) and xv, contiguous [B, Hkv, S,
// D], never from the caches, and one work-group per kv head writes them into the caches
// kc and vc (k and v themselves) for the next steps. The RoPE's position ids (row s of
// batch b at pos[b * pbs + s * pss]), inv_freq and attributes follow (common.cl's
// rope_pos_at). xq == 0: the RoPE ran.
#define ATT_FRESH_ARGS                                                                                         \
  __global const float *xq, __global const float *xk, __global const float *xv, __global float *kc,            \
      __global float *vc, __global const long *pos, int pbs, int pss, __global const float *inv_freq, int rot, \
      float cscale, float sscale
// Element d of the head row x of batch b's row s, rotated (common.cl's rope_pos_at).
#define ATT_ROPE(x, d, b, s) rope_pos_at(x, d, d, rot, (float)pos[(b) * pbs + (s) * pss], inv_freq, cscale, sscale)
#define ATT_FRESH_Q(r, d) (xq ? ATT_ROPE(xq + (r), d, b, s) : q[(r) + (d)])
// Element d of new row j of kv head g in batch b: the key rotated, the value.
#define ATT_FRESH_K(b, g, j, d) ATT_ROPE(xk + (((b) * Hkv + (g)) * S + (j)) * D, d, b, j)
#define ATT_FRESH_V(b, g, j, d) xv[(((b) * Hkv + (g)) * S + (j)) * Dv + (d)]
// The new rows of kv head g into the caches after their true length `off` (a launch that
// does this uses its own copies of those rows, whatever it reads there).
#define ATT_FRESH_STORE(b, g)                                                                                          \
  {                                                                                                                    \
    for (int e = lid; e < S * D; e += RED_WG)                                                                          \
      kc[(long)(b) * ksb + (long)(g) * ksh + (long)(off + e / D) * kst + e % D] = ATT_FRESH_K(b, g, e / D, e % D);     \
    for (int e = lid; e < S * Dv; e += RED_WG)                                                                         \
      vc[(long)(b) * vsb + (long)(g) * vsh + (long)(off + e / Dv) * vst + e % Dv] = ATT_FRESH_V(b, g, e / Dv, e % Dv); \
  }

// GPU family: a work-group per (query row, split of the keys). Each block of RED_WG keys is
// scored an item per key, max and sum reduced in local memory, and accumulated an item
// per output dim. With one split the group writes the row; with several (a decode step's
// few rows over a long cache: flash-decoding) it writes (max, sum, acc[Dv]) to `part`
// and attention_combine_f32 merges the splits.
__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))
void attention_wg_f32(__global const float* q, __global const float* k, __global const float* v,
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
      __global const float* kr = kb + (long)t * kst;
      float dot = 0.0f;
      if ((D & 3) == 0) {
        float4 a = 0.0f;
        for (int d = 0; d < D; d += 4) a += vload4(0, qs + d) * vload4(0, kr + d);
        dot = a.x + a.y + a.z + a.w;
      } else {
        for (int d = 0; d < D; ++d) dot += qs[d] * kr[d];
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
      __global const float* vr = vb + (long)tb * vst + d;
      for (int j = 0; j < nk; ++j) a += ps[j] * vr[(long)j * vst];
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
void attention_tile_f32(__global const float* q, __global const float* k, __global const float* v,
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
  __global const float* kb = k + b * ksb + g * ksh;
  __global const float* vb = v + b * vsb + g * vsh;
  const int moff = b * msb + h * msh + s * mss, kmo = b * kmsb;
  const int seen = causal ? min(T, s0 + AT_BR + off) : T;  // keys some row of the tile may see
  float acc[AT_MAXD / 4];
  for (int i = 0; i < AT_MAXD / 4; ++i) acc[i] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int t0 = 0; t0 < T; t0 += AT_BC) {
    if (t0 >= seen) {  // every key from here is hidden: go on only for rows with no visible key
      if (lid == 0) more = 0;
      barrier(CLK_LOCAL_MEM_FENCE);
      if (c == 0 && s < S && att_needs_hidden(m, mask_value)) more = 1;
      barrier(CLK_LOCAL_MEM_FENCE);
      if (!more) break;
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // the last step's reads of ks, vs and ps are done
    for (int e = lid; e < AT_BC * D; e += RED_WG) {
      const int kk = e / D, d = e - kk * D;
      ks[e] = t0 + kk < T ? kb[(long)(t0 + kk) * kst + d] : 0.0f;
    }
    for (int e = lid; e < AT_BC * Dv; e += RED_WG) {
      const int kk = e / Dv, d = e - kk * Dv;
      vs[e] = t0 + kk < T ? vb[(long)(t0 + kk) * vst + d] : 0.0f;
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

// GPU family, decode rows of grouped-query heads: a work-group per (batch, kv head, split
// of the keys) takes the R = (H / Hkv) * S query rows (2 to GQA_MAXR) that read that kv
// head, so each key and value is loaded once for the group, not once per query head. Per
// block of 64 keys: the block's keys are copied to local memory, an item per key scores
// it against every row (q in local memory), the row's P = 64 / R items take the block's
// max and sum, the block's values replace the keys there, and an item per output dim adds
// the block to every row's output (registers). Every copy from global memory is
// gqa_stage's: its loads are all in flight at once, where a loop of dependent loads costs
// a memory latency each (on the H100 a block took about 27 us that way). Several splits
// write (max, sum, output) per row for attention_combine_f32, as attention_dec_f32 does.
#define GQA_MAXR 16
#define GQA_MAXD 128
#define GQA_DPI (GQA_MAXD / RED_WG) /* output dims per item */
#define GQA_ROW(d) ((d) + 4)        /* a staged key's floats: rows 4 apart, float4 reads across banks */
#define GQA_BATCH 16                /* loads an item has in flight */
// Copies n4 float4s of each of nk rows to dst's rows, ld floats apart. Row j is at src +
// (j / per) * st + (j % per) * st2: keys and values per = 1, q's rows (head, position).
inline void gqa_stage(__local float* dst, int ld, __global const float* src, long st, int per, int st2, int nk, int n4) {
  const int lid = get_local_id(0);
  for (int e0 = 0; e0 < nk * n4; e0 += RED_WG * GQA_BATCH) {
    float4 x[GQA_BATCH];
    for (int u = 0; u < GQA_BATCH; ++u) {
      const int e = e0 + u * RED_WG + lid, j = e / n4;
      x[u] = j < nk ? vload4(e % n4, src + j / per * st + j % per * st2) : 0.0f;
    }
    for (int u = 0; u < GQA_BATCH; ++u) {
      const int e = e0 + u * RED_WG + lid, j = e / n4;
      if (j < nk) vstore4(x[u], 0, dst + j * ld + 4 * (e % n4));
    }
  }
}
#if ATT_FITS(GQA_MAXR * GQA_MAXD + GQA_MAXR * RED_WG + RED_WG * GQA_ROW(GQA_MAXD) + RED_WG + 3 * GQA_MAXR)
__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))
void attention_gqa_f32(__global const float* q, __global const float* k, __global const float* v,
                       __global const float* mask, __global float* out, __global float* part, ATT_ARGS, int splits,
                       int chunk, ATT_FRESH_ARGS) {
  __local float qs[GQA_MAXR * GQA_MAXD], sc[GQA_MAXR * RED_WG], kv[RED_WG * GQA_ROW(GQA_MAXD)], red[RED_WG];
  __local float mrow[GQA_MAXR], lrow[GQA_MAXR], crow[GQA_MAXR];
  const int bg = get_group_id(0), split = get_group_id(1), lid = get_local_id(0);
  const int G = H / Hkv, R = G * S, b = bg / Hkv, g = bg % Hkv, off = ATT_OFFSET;
  // rows r of the group: query head g * G + r / S, position r % S, its D floats at qs + r * D
  if (xq && split == 0) ATT_FRESH_STORE(b, g)  // early: the blocks replace what they stage of those rows
  if (xq)
    for (int e = lid; e < R * D; e += RED_WG) {
      const int r = e / D;
      qs[e] = ATT_ROPE(xq + b * qsb + (g * G + r / S) * qsh + r % S * qss, e % D, b, r % S);
    }
  else
    gqa_stage(qs, D, q + b * qsb + g * G * qsh, qsh, S, qss, R, D / 4);
  if (lid < R) {
    mrow[lid] = -INFINITY;
    lrow[lid] = 0.0f;
  }
  __global const float* kb = k + b * ksb + g * ksh;
  __global const float* vb = v + b * vsb + g * vsh;
  const int t0 = split * chunk, t1 = min(T, t0 + chunk), KR = GQA_ROW(D);
  const int P = RED_WG / R, pr = lid / P, pj = lid % P;  // item lid takes row pr's keys pj, pj + P, ...
  float acc[GQA_MAXR * GQA_DPI];  // row r, dim lid + RED_WG * i: acc[GQA_DPI * r + i]
  for (int i = 0; i < GQA_MAXR * GQA_DPI; ++i) acc[i] = 0.0f;
  for (int tb = t0; tb < t1; tb += RED_WG) {
    const int nk = min(RED_WG, t1 - tb);
    gqa_stage(kv, KR, kb + (long)tb * kst, kst, 1, 0, nk, D / 4);
    // the block's new keys [f0, f1) (ATT_FRESH_ARGS) replace what the caches held there
    const int f0 = max(tb, off), f1 = xq ? min(tb + nk, off + S) : f0;
    if (f1 > f0) {
      barrier(CLK_LOCAL_MEM_FENCE);
      for (int e = lid; e < (f1 - f0) * D; e += RED_WG)
        kv[(f0 - tb + e / D) * KR + e % D] = ATT_FRESH_K(b, g, f0 - off + e / D, e % D);
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // the keys (and in the first block q) staged
    if (lid < nk) {
      const int t = tb + lid;
      float dots[GQA_MAXR];
      for (int r = 0; r < GQA_MAXR; ++r) dots[r] = 0.0f;
      for (int d = 0; d < D; d += 4) {
        const float4 kd = vload4(0, kv + lid * KR + d);
        for (int r = 0; r < GQA_MAXR; ++r)
          if (r < R) dots[r] += dot(vload4(0, qs + r * D + d), kd);
      }
      for (int r = 0; r < GQA_MAXR; ++r) {
        if (r >= R) break;
        const int s = r % S;
        sc[r * RED_WG + lid] = att_score(dots[r], scale, softcap, mask, b * msb + (g * G + r / S) * msh + s * mss + t * mst,
                                         has_mask, att_hidden(s, t, off, causal, km, kmb, b * kmsb), mask_value);
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // the scores written, the keys read
    gqa_stage(kv, Dv, vb + (long)tb * vst, vst, 1, 0, nk, Dv / 4);
    float bm = -INFINITY;
    if (pr < R)
      for (int j = pj; j < nk; j += P) bm = fmax(bm, sc[pr * RED_WG + j]);
    red[lid] = bm;
    barrier(CLK_LOCAL_MEM_FENCE);
    float mo = -INFINITY, mn = -INFINITY;
    if (pr < R) {
      mo = mrow[pr];
      mn = mo;
      for (int j = 0; j < P; ++j) mn = fmax(mn, red[pr * P + j]);
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // red's maxima read before its sums overwrite them
    float ps = 0.0f;
    if (pr < R)
      for (int j = pj; j < nk; j += P) {
        const float x = sc[pr * RED_WG + j], p = x == -INFINITY ? 0.0f : exp(x - mn);
        sc[pr * RED_WG + j] = p;
        ps += p;
      }
    red[lid] = ps;
    barrier(CLK_LOCAL_MEM_FENCE);
    if (pr < R && pj == 0) {
      float sum = 0.0f;
      for (int j = 0; j < P; ++j) sum += red[pr * P + j];
      const float corr = mo == -INFINITY ? 0.0f : exp(mo - mn);
      lrow[pr] = lrow[pr] * corr + sum;
      mrow[pr] = mn;
      crow[pr] = corr;
    }
    // (the values' staging is behind the barriers above)
    for (int e = lid; e < (f1 - f0) * Dv; e += RED_WG)
      kv[(f0 - tb + e / Dv) * Dv + e % Dv] = ATT_FRESH_V(b, g, f0 - off + e / Dv, e % Dv);
    barrier(CLK_LOCAL_MEM_FENCE);  // and the values staged
    // Keys outermost, so that every index into acc is a constant once the loops inside
    // unroll: with the dims outermost the H100's compiler kept acc in memory, a load and
    // a store per multiply-add (scripts/kernel_spills.py; TinyLlama tg128@d2048 437 -> 448).
#pragma unroll
    for (int r = 0; r < GQA_MAXR; ++r)
      for (int i = 0; i < GQA_DPI; ++i)
        if (r < R) acc[GQA_DPI * r + i] *= crow[r];
    for (int j = 0; j < nk; ++j) {
      float x[GQA_DPI];
      for (int i = 0; i < GQA_DPI; ++i) x[i] = lid + i * RED_WG < Dv ? kv[j * Dv + lid + i * RED_WG] : 0.0f;
#pragma unroll
      for (int r = 0; r < GQA_MAXR; ++r) {
        if (r < R) {
          const float p = sc[r * RED_WG + j];
          for (int i = 0; i < GQA_DPI; ++i) acc[GQA_DPI * r + i] += p * x[i];
        }
      }
    }
    barrier(CLK_LOCAL_MEM_FENCE);  // sc, the values and crow read before the next block writes them
  }
#pragma unroll
  for (int r = 0; r < GQA_MAXR; ++r) {
    if (r < R) {
      const int h = g * G + r / S, s = r % S, row = (b * H + h) * S + s;
      const float l = lrow[r];
      __global float* o = out + b * osb + h * osh + s * oss;
      __global float* pp = part + ((long)row * splits + split) * (Dv + 2);
      for (int i = 0; i < GQA_DPI; ++i) {
        const int d = lid + i * RED_WG;
        if (d < Dv && splits == 1) o[d] = zero_rows && !(l > 0.0f) ? 0.0f : acc[GQA_DPI * r + i] / l;
        if (d < Dv && splits > 1) pp[2 + d] = acc[GQA_DPI * r + i];
      }
      if (splits > 1 && lid == 0) {
        pp[0] = mrow[r];
        pp[1] = l;
      }
    }
  }
}
#endif

// GPU family, decode (a few query rows over a cache): a work-group per (query row, split
// of the keys), each item taking keys lid, lid + 64, ... with its own running max, sum and
// output (registers; D and Dv up to 128, multiples of 4): no barrier per block of keys, one
// merge at the end (the items' maxima, then their outputs summed a column per item). With
// several splits it writes (max, sum, output) for attention_combine_f32.
// EXACT kernels know D = Dv = WIDTH at compile time, so the loops unroll and the
// accumulators stay in registers; the generic one takes any multiple of 4 up to WIDTH.
// With a RoPE's work (ATT_FRESH_ARGS) the split holding new keys stages them rotated in
// local memory (up to ATT_DEC_MAXS rows: lowering's decode rows), in accs, which the
// final merge uses only after wg_max's barriers.
#define ATT_DEC_MAXS 4
#define ATT_DEC_FLOATS(WIDTH) ((WIDTH) + RED_WG + RED_WG * ((WIDTH) + 1))
// One key t at KR, its value at VR (global or local memory) into the item's running state
// (accumulators of WIDTH floats).
#define ATT_DEC_KEY(WIDTH, KR, VR)                                                                   \
  {                                                                                                  \
    float4 a = 0.0f;                                                                                 \
    for (int d = 0; d < DK; d += 4) a += vload4(0, qs + d) * vload4(0, (KR) + d);                    \
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
        if (4 * i < DV) acc[i] += p * vload4(i, (VR));                                               \
    }                                                                                                \
  }
#define ATT_DEC(NAME, WIDTH, EXACT)                                                                              \
  __kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))                                                   \
  void NAME(__global const float* q, __global const float* k, __global const float* v,                           \
            __global const float* mask, __global float* out, __global float* part, ATT_ARGS, int splits,         \
            int chunk, ATT_FRESH_ARGS) {                                                                         \
    __local float qs[WIDTH], red[RED_WG], accs[RED_WG * (WIDTH + 1)];                                            \
    __local float *fk = accs, *fv = accs + ATT_DEC_MAXS * (WIDTH);                                               \
    ATT_SPLIT_ROW(ATT_FRESH_Q)                                                                                   \
    const int DK = EXACT ? WIDTH : D, DV = EXACT ? WIDTH : Dv;                                                   \
    const int t0 = split * chunk, t1 = min(T, t0 + chunk);                                                       \
    /* this split's new keys [f0, f1), if the launch has them; the caches' copy early, as */                     \
    /* nothing here reads it */                                                                                  \
    const int f0 = max(t0, off), f1 = xq ? min(t1, off + S) : f0;                                                \
    if (xq && split == 0 && s == 0 && h % (H / Hkv) == 0) ATT_FRESH_STORE(b, g)                                  \
    for (int e = lid; e < (f1 - f0) * DK; e += RED_WG)                                                           \
      fk[e / DK * WIDTH + e % DK] = ATT_FRESH_K(b, g, f0 - off + e / DK, e % DK);                                \
    for (int e = lid; e < (f1 - f0) * DV; e += RED_WG)                                                           \
      fv[e / DV * WIDTH + e % DV] = ATT_FRESH_V(b, g, f0 - off + e / DV, e % DV);                                \
    barrier(CLK_LOCAL_MEM_FENCE); /* q and the new keys staged */                                                \
    float4 acc[WIDTH / 4];                                                                                       \
    for (int i = 0; i < WIDTH / 4; ++i) acc[i] = 0.0f;                                                           \
    float m = -INFINITY, l = 0.0f;                                                                               \
    for (int t = t0 + lid; t < t1; t += RED_WG)                                                                  \
      if (t < f0 || t >= f1) ATT_DEC_KEY(WIDTH, kb + (long)t * kst, vb + (long)t * vst)                          \
    for (int t = f0 + lid; t < f1; t += RED_WG) ATT_DEC_KEY(WIDTH, fk + (t - f0) * WIDTH, fv + (t - f0) * WIDTH) \
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
    __global float* o = out + b * osb + h * osh + s * oss;                                                       \
    __global float* pp = part + ((long)row * splits + split) * (DV + 2);                                         \
    for (int d = lid; d < DV; d += RED_WG) {                                                                     \
      float a = 0.0f;                                                                                            \
      for (int j = 0; j < RED_WG; ++j) a += accs[j * stride + d];                                                \
      if (splits == 1) o[d] = zero_rows && !(sum > 0.0f) ? 0.0f : a / sum;                                       \
      else pp[2 + d] = a;                                                                                        \
    }                                                                                                            \
    if (splits > 1 && lid == 0) {                                                                                \
      pp[0] = mx;                                                                                                \
      pp[1] = sum;                                                                                               \
    }                                                                                                            \
  }
#if ATT_FITS(ATT_DEC_FLOATS(64))
ATT_DEC(attention_dec64_f32, 64, 1)
#endif
#if ATT_FITS(ATT_DEC_FLOATS(128))
ATT_DEC(attention_dec_f32, 128, 0)
ATT_DEC(attention_dec128_f32, 128, 1)
#endif
