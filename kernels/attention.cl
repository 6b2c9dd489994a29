// tl.Attention: softmax(q k^T * scale [soft-capped] + mask) v, fp32 throughout, with the
// online softmax (running max and sum), so scores are never written to memory. q is
// [B,H,S,D]; k, v are [B,Hkv,T,D|Dv] and query head h reads kv head h / (H / Hkv), so
// grouped-query attention never repeats the cache. Every operand is read through
// strides: q, k, v and out by (b, head, row) with the head dim contiguous, so the
// exporters' head/sequence transposes need no copy; the mask by broadcast (b, h, s, t).
#define ATT_MAX_D 256

inline float att_score(float dot, float scale, float softcap, __global const float* mask, int moff, int has_mask) {
  float x = dot * scale;
  if (softcap > 0.0f) x = softcap * tanh(x / softcap);
  return has_mask ? x + mask[moff] : x;
}

// CPU family: one work item per query row (b, h, s), every key in order.
#define ATT_ARGS                                                                                      \
  int rows, int H, int Hkv, int S, int T, int D, int Dv, float scale, float softcap, int has_mask, int qsb, \
      int qsh, int qss, int ksb, int ksh, int kst, int vsb, int vsh, int vst, int msb, int msh, int mss, int mst, \
      int osb, int osh, int oss, int zero_rows

__kernel void attention_f32(__global const float* q, __global const float* k, __global const float* v,
                            __global const float* mask, __global float* out, ATT_ARGS) {
  const int row = get_global_id(0);
  if (row >= rows) return;
  const int s = row % S, h = row / S % H, b = row / (S * H), g = h / (H / Hkv);
  __global const float* qr = q + b * qsb + h * qsh + s * qss;
  __global const float* kr = k + b * ksb + g * ksh;
  __global const float* vr = v + b * vsb + g * vsh;
  const int moff = b * msb + h * msh + s * mss;
  float acc[ATT_MAX_D];
  for (int d = 0; d < Dv; ++d) acc[d] = 0.0f;
  float m = -INFINITY, l = 0.0f;
  for (int t = 0; t < T; ++t, kr += kst, vr += vst) {
    float dot = 0.0f;
    for (int d = 0; d < D; ++d) dot += qr[d] * kr[d];
    const float x = att_score(dot, scale, softcap, mask, moff + t * mst, has_mask);
    if (x == -INFINITY) continue;
    if (x > m) {  // a new maximum rescales what was summed so far
      const float corr = exp(m - x);
      l *= corr;
      for (int d = 0; d < Dv; ++d) acc[d] *= corr;
      m = x;
    }
    const float p = exp(x - m);
    l += p;
    for (int d = 0; d < Dv; ++d) acc[d] += p * vr[d];
  }
  __global float* o = out + b * osb + h * osh + s * oss;
  // A row masked whole is 0/0, NaN, as Softmax gives; or 0 (SDPA's Where(IsNaN(p), 0, p)).
  for (int d = 0; d < Dv; ++d) o[d] = zero_rows && !(l > 0.0f) ? 0.0f : acc[d] / l;
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
  const int row = get_group_id(0), split = get_group_id(1), lid = get_local_id(0);
  const int s = row % S, h = row / S % H, b = row / (S * H), g = h / (H / Hkv);
  for (int d = lid; d < D; d += RED_WG) qs[d] = q[b * qsb + h * qsh + s * qss + d];
  barrier(CLK_LOCAL_MEM_FENCE);
  __global const float* kb = k + b * ksb + g * ksh;
  __global const float* vb = v + b * vsb + g * vsh;
  const int moff = b * msb + h * msh + s * mss;
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
      x = att_score(dot, scale, softcap, mask, moff + t * mst, has_mask);
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

// Merges attention_wg_f32's splits of each row: weights exp(m_s - max m) on sums and accs.
__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))
void attention_combine_f32(__global const float* part, __global float* out, int H, int S, int Dv, int splits,
                           int osb, int osh, int oss, int zero_rows) {
  const int row = get_group_id(0), lid = get_local_id(0);
  const int s = row % S, h = row / S % H, b = row / (S * H);
  __global const float* pr = part + (long)row * splits * (Dv + 2);
  float mx = -INFINITY;
  for (int i = 0; i < splits; ++i) mx = fmax(mx, pr[i * (Dv + 2)]);
  float l = 0.0f;
  for (int i = 0; i < splits; ++i) {
    const float mi = pr[i * (Dv + 2)];
    l += mi == -INFINITY ? 0.0f : pr[i * (Dv + 2) + 1] * exp(mi - mx);
  }
  __global float* o = out + b * osb + h * osh + s * oss;
  for (int d = lid; d < Dv; d += RED_WG) {
    float a = 0.0f;
    for (int i = 0; i < splits; ++i) {
      const float mi = pr[i * (Dv + 2)];
      if (mi != -INFINITY) a += pr[i * (Dv + 2) + 2 + d] * exp(mi - mx);
    }
    o[d] = zero_rows && !(l > 0.0f) ? 0.0f : a / l;
  }
}
