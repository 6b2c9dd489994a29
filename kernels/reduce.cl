// Reductions, Softmax and LayerNormalization. CPU family: one work item per output row.
// GPU family (`_wg`): a work-group of RED_WG items per row, each striding over the row,
// partials combined in local memory, so a long row (RMSNorm's mean over the hidden size,
// a decode step's softmax over the context) is read by many items at once (RED_WG and the
// WG_REDUCE helpers are in common.cl).

// out[o] = reduce over the reduced region of in[base(o) + rs . r].
#define REDUCE(NAME, INIT, STEP, FINAL)                                                          \
  __kernel void NAME(__global const float* in, __global float* out, int n, int8 odims, int8 os,  \
                     int count, int8 rdims, int8 rs) {                                           \
    int o = get_global_id(0);                                                                    \
    if (o >= n) return;                                                                          \
    int base = strided_offset(o, odims, os);                                                     \
    float acc = INIT;                                                                            \
    for (int r = 0; r < count; ++r) {                                                            \
      float x = in[base + strided_offset(r, rdims, rs)];                                         \
      acc = STEP;                                                                                \
    }                                                                                            \
    out[o] = FINAL;                                                                              \
  }

// The same per work-group; COMBINE merges the items' partials.
#define REDUCE_WG(NAME, INIT, STEP, COMBINE, FINAL)                                              \
  __kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))                                   \
  void NAME##_wg(__global const float* in, __global float* out, int n, int8 odims, int8 os,      \
                 int count, int8 rdims, int8 rs) {                                               \
    __local float part[RED_WG];                                                                  \
    const int o = get_group_id(0);                                                               \
    const int base = strided_offset(o, odims, os);                                               \
    float acc = INIT;                                                                            \
    for (int r = get_local_id(0); r < count; r += RED_WG) {                                      \
      float x = in[base + strided_offset(r, rdims, rs)];                                         \
      acc = STEP;                                                                                \
    }                                                                                            \
    acc = COMBINE(part, acc);                                                                    \
    if (get_local_id(0) == 0) out[o] = FINAL;                                                    \
  }
#define REDUCE_BOTH(NAME, INIT, STEP, COMBINE, FINAL) \
  REDUCE(NAME, INIT, STEP, FINAL)                     \
  REDUCE_WG(NAME, INIT, STEP, COMBINE, FINAL)

REDUCE_BOTH(reducesum_f32, 0.0f, acc + x, wg_sum, acc)
REDUCE_BOTH(reducemean_f32, 0.0f, acc + x, wg_sum, acc / (float)count)
REDUCE_BOTH(reducemax_f32, -INFINITY, fmax(acc, x), wg_max, acc)
REDUCE_BOTH(reducemin_f32, INFINITY, fmin(acc, x), wg_min, acc)
REDUCE_BOTH(reduceprod_f32, 1.0f, acc * x, wg_prod, acc)
REDUCE_BOTH(reducesumsquare_f32, 0.0f, acc + x * x, wg_sum, acc)
REDUCE_BOTH(reducel2_f32, 0.0f, acc + x * x, wg_sum, sqrt(acc))

// Softmax along an axis of length `len` with `inner` elements after it.
__kernel void softmax_f32(__global const float* in, __global float* out, int rows, int len, int inner, int logsm) {
  int row = get_global_id(0);
  if (row >= rows) return;
  int base = (row / inner) * len * inner + row % inner;
  float mx = -INFINITY;
  for (int j = 0; j < len; ++j) mx = fmax(mx, in[base + j * inner]);
  float sum = 0.0f;
  for (int j = 0; j < len; ++j) sum += exp(in[base + j * inner] - mx);
  for (int j = 0; j < len; ++j) {
    float x = in[base + j * inner] - mx;
    out[base + j * inner] = logsm ? x - log(sum) : exp(x) / sum;
  }
}

__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))
void softmax_f32_wg(__global const float* in, __global float* out, int rows, int len, int inner, int logsm) {
  __local float part[RED_WG];
  const int row = get_group_id(0), t = get_local_id(0);
  const int base = (row / inner) * len * inner + row % inner;
  float mx = -INFINITY;
  for (int j = t; j < len; j += RED_WG) mx = fmax(mx, in[base + j * inner]);
  mx = wg_max(part, mx);
  float sum = 0.0f;
  for (int j = t; j < len; j += RED_WG) sum += exp(in[base + j * inner] - mx);
  sum = wg_sum(part, sum);
  for (int j = t; j < len; j += RED_WG) {
    float x = in[base + j * inner] - mx;
    out[base + j * inner] = logsm ? x - log(sum) : exp(x) / sum;
  }
}

// LayerNormalization over the trailing `cols` elements; scale and bias hold `cols` values
// (bias optional); mean and inv_std are written when their buffers are given.
__kernel void layernorm_f32(__global const float* in, __global const float* scale, __global const float* bias,
                            __global float* out, __global float* mean_out, __global float* inv_out, int rows,
                            int cols, float eps, int has_bias, int has_stats) {
  int r = get_global_id(0);
  if (r >= rows) return;
  __global const float* x = in + (long)r * cols;
  float mean = 0.0f;
  for (int j = 0; j < cols; ++j) mean += x[j];
  mean /= cols;
  float var = 0.0f;
  for (int j = 0; j < cols; ++j) var += (x[j] - mean) * (x[j] - mean);
  float inv = 1.0f / sqrt(var / cols + eps);
  for (int j = 0; j < cols; ++j) {
    float y = (x[j] - mean) * inv * scale[j];
    out[(long)r * cols + j] = has_bias ? y + bias[j] : y;
  }
  if (has_stats) {
    mean_out[r] = mean;
    inv_out[r] = inv;
  }
}

__kernel __attribute__((reqd_work_group_size(RED_WG, 1, 1)))
void layernorm_f32_wg(__global const float* in, __global const float* scale, __global const float* bias,
                      __global float* out, __global float* mean_out, __global float* inv_out, int rows, int cols,
                      float eps, int has_bias, int has_stats) {
  __local float part[RED_WG];
  const int r = get_group_id(0), t = get_local_id(0);
  __global const float* x = in + (long)r * cols;
  float mean = 0.0f;
  for (int j = t; j < cols; j += RED_WG) mean += x[j];
  mean = wg_sum(part, mean) / cols;
  float var = 0.0f;
  for (int j = t; j < cols; j += RED_WG) var += (x[j] - mean) * (x[j] - mean);
  const float inv = 1.0f / sqrt(wg_sum(part, var) / cols + eps);
  for (int j = t; j < cols; j += RED_WG) {
    float y = (x[j] - mean) * inv * scale[j];
    out[(long)r * cols + j] = has_bias ? y + bias[j] : y;
  }
  if (has_stats && t == 0) {
    mean_out[r] = mean;
    inv_out[r] = inv;
  }
}

// tl.RMSNorm over the trailing `cols` elements: y = x / sqrt(mean(x^2) + eps) * scale,
// in the order the exporters' unfused graphs compute it.
// tl.RMSNorm of x = in (+ res, the residual, when has_res), writing x to sum when has_sum.
__kernel void rmsnorm_f32(__global const float* in, __global const float* res, __global const float* scale,
                          __global float* out, __global float* sum, int rows, int cols, float eps, int has_res,
                          int has_sum) {
  const int r = get_global_id(0);
  if (r >= rows) return;
  const long base = (long)r * cols;
  float ss = 0.0f;
  for (int j = 0; j < cols; ++j) {
    const float v = has_res ? in[base + j] + res[base + j] : in[base + j];
    if (has_sum) sum[base + j] = v;
    ss += v * v;
  }
  const float inv = 1.0f / sqrt(ss / cols + eps);
  for (int j = 0; j < cols; ++j) {
    const float v = has_res ? in[base + j] + res[base + j] : in[base + j];
    out[base + j] = v * inv * scale[j];
  }
}

// GPU family: a 256-item work-group per row. A decode step's norm is one row, the whole
// step waits on it, and 64 items left it latency-bound (H100: 17 us for 2048 columns).
#define NORM_WG 256
__kernel __attribute__((reqd_work_group_size(NORM_WG, 1, 1)))
void rmsnorm_f32_wg(__global const float* in, __global const float* res, __global const float* scale,
                    __global float* out, __global float* sum, int rows, int cols, float eps, int has_res,
                    int has_sum) {
  __local float part[NORM_WG];
  const int r = get_group_id(0), t = get_local_id(0);
  const long base = (long)r * cols;
  float ss = 0.0f;
  for (int j = t; j < cols; j += NORM_WG) {
    const float v = has_res ? in[base + j] + res[base + j] : in[base + j];
    if (has_sum) sum[base + j] = v;
    ss += v * v;
  }
  const float inv = 1.0f / sqrt(wg_sum_n(part, ss, NORM_WG) / cols + eps);
  for (int j = t; j < cols; j += NORM_WG) {
    const float v = has_res ? in[base + j] + res[base + j] : in[base + j];
    out[base + j] = v * inv * scale[j];
  }
}

// ArgMax / ArgMin along an axis of `len` (inner elements apart): the first extreme index,
// or the last with select_last. NaN never wins (as ONNX Runtime's comparison).
#define ARG_EXTREME(NAME, T, BETTER)                                                                  \
  __kernel void NAME(__global const T* in, __global long* out, int n, int len, int inner, int last) { \
    const int o = get_global_id(0);                                                                   \
    if (o >= n) return;                                                                               \
    __global const T* x = in + (long)(o / inner) * len * inner + o % inner;                          \
    T best = x[0];                                                                                    \
    int at = 0;                                                                                       \
    for (int j = 1; j < len; ++j) {                                                                   \
      const T v = x[(long)j * inner];                                                                 \
      if (BETTER(v, best) || (last && v == best)) {                                                   \
        best = v;                                                                                     \
        at = j;                                                                                       \
      }                                                                                               \
    }                                                                                                 \
    out[o] = at;                                                                                      \
  }
#define ARG_GT(a, b) ((a) > (b))
#define ARG_LT(a, b) ((a) < (b))
ARG_EXTREME(argmax_f32, float, ARG_GT)
ARG_EXTREME(argmin_f32, float, ARG_LT)
ARG_EXTREME(argmax_i64, long, ARG_GT)
ARG_EXTREME(argmin_i64, long, ARG_LT)
ARG_EXTREME(argmax_i32, int, ARG_GT)
ARG_EXTREME(argmin_i32, int, ARG_LT)

// TopK along an axis of `len` (inner elements apart), an item a line: pick j is the best
// element after pick j - 1 in the order (value, then the lower index first) that ONNX
// asks for, so no scratch is needed; k passes over the line (a router's handful of
// experts). largest = 0 reverses the values' order. NaN is never picked over a number.
__kernel void topk_f32(__global const float* in, __global float* values, __global long* indices, int n, int len,
                       int inner, int k, int largest) {
  const int o = get_global_id(0);
  if (o >= n) return;
  const long base = (long)(o / inner) * len * inner + o % inner, obase = (long)(o / inner) * k * inner + o % inner;
  float pv = 0;
  int pi = -1;
  for (int j = 0; j < k; ++j) {
    float bv = 0;
    int bi = -1;
    for (int i = 0; i < len; ++i) {
      const float v = in[base + (long)i * inner];
      const float s = largest ? v : -v, ps = largest ? pv : -pv, bs = largest ? bv : -bv;
      const bool after = pi < 0 || s < ps || (s == ps && i > pi);
      if (after && (bi < 0 || s > bs || isnan(bs))) {
        bv = v;
        bi = i;
      }
    }
    values[obase + (long)j * inner] = bv;
    indices[obase + (long)j * inner] = bi;
    pv = bv;
    pi = bi;
  }
}

// CumSum along an axis of `len` (inner elements apart), an item a line: the running sum,
// exclusive (each element the sum before it) and reversed (from the end) as ONNX defines.
#define CUMSUM(NAME, T)                                                                               \
  __kernel void NAME(__global const T* in, __global T* out, int n, int len, int inner, int exclusive, \
                     int reverse) {                                                                   \
    const int o = get_global_id(0);                                                                   \
    if (o >= n) return;                                                                               \
    const long base = (long)(o / inner) * len * inner + o % inner;                                   \
    T sum = 0;                                                                                        \
    for (int j = 0; j < len; ++j) {                                                                   \
      const long at = base + (long)(reverse ? len - 1 - j : j) * inner;                              \
      const T v = in[at];                                                                             \
      if (!exclusive) sum += v;                                                                       \
      out[at] = sum;                                                                                  \
      if (exclusive) sum += v;                                                                        \
    }                                                                                                 \
  }
CUMSUM(cumsum_f32, float)
CUMSUM(cumsum_i32, int)
CUMSUM(cumsum_i64, long)

// The first largest of x[offset .. offset + n) into *out, by one work-group of 256: a
// greedy decode step's next token without reading the logits back. Work-group r takes the
// r-th such row, x[offset + r n ..), into out[r]: a batched step's rows. A row with nothing
// above -inf gives 0 (the first element, as std::max_element). A logit that is no number
// (NaN or +inf) gives -1 - its index instead, the first such: the host refuses it
// (Executor::argmax), where NaN would silently never win.
__kernel __attribute__((reqd_work_group_size(256, 1, 1)))
void argmax_row_f32(__global const float* x, long offset, int n, __global long* out) {
  __local float best_v[256];
  __local int best_i[256], bad_i[256];
  const int lid = get_local_id(0);
  x += offset + (long)get_group_id(0) * n;
  out += get_group_id(0);
  float best = -INFINITY;
  int at = n, bad = n;
  for (int j = lid; j < n; j += 256) {
    const float v = x[j];
    if (bad == n && (isnan(v) || v == INFINITY)) bad = j;
    if (v > best) {
      best = v;
      at = j;
    }
  }
  best_v[lid] = best;
  best_i[lid] = at;
  bad_i[lid] = bad;
  for (int s = 128; s > 0; s >>= 1) {
    barrier(CLK_LOCAL_MEM_FENCE);
    if (lid < s) {
      const float v = best_v[lid + s];
      const int i = best_i[lid + s];
      if (v > best_v[lid] || (v == best_v[lid] && i < best_i[lid])) {
        best_v[lid] = v;
        best_i[lid] = i;
      }
      bad_i[lid] = min(bad_i[lid], bad_i[lid + s]);
    }
  }
  if (lid == 0) *out = bad_i[0] < n ? -1 - (long)bad_i[0] : best_i[0] == n ? 0 : best_i[0];
}
