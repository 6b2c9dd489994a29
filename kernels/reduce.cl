// Reductions, Softmax and LayerNormalization: one work item per output row.

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

REDUCE(reducesum_f32, 0.0f, acc + x, acc)
REDUCE(reducemean_f32, 0.0f, acc + x, acc / (float)count)
REDUCE(reducemax_f32, -INFINITY, fmax(acc, x), acc)
REDUCE(reducemin_f32, INFINITY, fmin(acc, x), acc)
REDUCE(reduceprod_f32, 1.0f, acc * x, acc)
REDUCE(reducesumsquare_f32, 0.0f, acc + x * x, acc)
REDUCE(reducel2_f32, 0.0f, acc + x * x, sqrt(acc))

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
