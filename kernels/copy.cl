// Data movement: every layout change (Transpose, Slice, Expand, Concat, Split,
// Reshape...) is a strided copy over a region: out[oo + os . c] = in[io + is . c].
// Kernels are per element size, so any dtype moves with the same code.

#define COPY(S, T)                                                                              \
  __kernel void copy_##S(__global const T* in, __global T* out, int n, int8 dims, int in_off,   \
                         int8 is, int out_off, int8 os) {                                       \
    int i = get_global_id(0);                                                                   \
    if (i >= n) return;                                                                         \
    out[out_off + strided_offset(i, dims, os)] = in[in_off + strided_offset(i, dims, is)];      \
  }                                                                                             \
  /* Concat of up to 4 inputs [outer, a_j, inner] into out's axis at `at` (of `axis` rows). */ \
  __kernel void concat_##S(__global const T* in0, __global const T* in1, __global const T* in2, \
                           __global const T* in3, __global T* out, int n, int inner, int axis,  \
                           int at, int a0, int a1, int a2, int a3) {                            \
    int i = get_global_id(0);                                                                   \
    if (i >= n) return;                                                                         \
    const int rows = a0 + a1 + a2 + a3, c = i % inner, o = i / (inner * rows);                  \
    const int r = i / inner % rows;                                                             \
    int a = r, w = a0;                                                                          \
    __global const T* src = in0;                                                                \
    if (a >= a0) { a -= a0; src = in1; w = a1;                                                  \
      if (a >= a1) { a -= a1; src = in2; w = a2;                                                \
        if (a >= a2) { a -= a2; src = in3; w = a3; } } }                                        \
    out[((long)o * axis + at + r) * inner + c] = src[((long)o * w + a) * inner + c];            \
  }                                                                                             \
  /* tl.Concat: two independent two-input Concats (a KV cache's k and v) in one launch. */    \
  __kernel void concat_pair_##S(__global const T* a0, __global const T* a1, __global T* ya,     \
                                int na, int inner_a, int rows_a, int first_a,                   \
                                __global const T* b0, __global const T* b1, __global T* yb,     \
                                int nb, int inner_b, int rows_b, int first_b) {                 \
    int i = get_global_id(0);                                                                   \
    if (i >= na + nb) return;                                                                   \
    int inner = inner_a, rows = rows_a, first = first_a;                                        \
    __global const T* x0 = a0;                                                                  \
    __global const T* x1 = a1;                                                                  \
    __global T* y = ya;                                                                         \
    if (i >= na) {                                                                              \
      i -= na; inner = inner_b; rows = rows_b; first = first_b; x0 = b0; x1 = b1; y = yb;       \
    }                                                                                           \
    const int c = i % inner, r = i / inner % rows, o = i / (inner * rows);                      \
    y[i] = r < first ? x0[((long)o * first + r) * inner + c]                                    \
                     : x1[((long)o * (rows - first) + r - first) * inner + c];                  \
  }                                                                                             \
  __kernel void fill_##S(__global T* out, int n, T value) {                                     \
    int i = get_global_id(0);                                                                   \
    if (i < n) out[i] = value;                                                                  \
  }                                                                                             \
  /* an item per (element of a row, row): a row's index math is one division, the same for */ \
  /* all its items (an item's three divisions were most of an embedding's gather on CPUs)   */ \
  __kernel void gather_##S(__global const T* data, __global const long* idx, __global T* out,   \
                           int count, int axis_dim, int inner) {                                \
    const int in = get_global_id(0), r = get_global_id(1);                                      \
    if (in >= inner) return;                                                                    \
    const int j = r % count, o = r / count;                                                     \
    long k = idx[j];                                                                            \
    if (k < 0) k += axis_dim;                                                                   \
    out[(long)r * inner + in] = data[((long)o * axis_dim + k) * inner + in];                    \
  }                                                                                             \
  __kernel void gathernd_##S(__global const T* data, __global const long* idx, __global T* out, \
                             int n, int m, int inner, int8 dims, int8 strides) {                \
    int i = get_global_id(0);                                                                   \
    if (i >= n) return;                                                                         \
    int d[8], s[8];                                                                             \
    vstore8(dims, 0, d);                                                                        \
    vstore8(strides, 0, s);                                                                     \
    int k = i / inner, off = 0;                                                                 \
    for (int j = 0; j < m; ++j) {                                                               \
      long v = idx[k * m + j];                                                                  \
      if (v < 0) v += d[j];                                                                     \
      off += (int)v * s[j];                                                                     \
    }                                                                                           \
    out[i] = data[off + i % inner];                                                             \
  }                                                                                             \
  /* GatherElements: out[i] is data's element at i's coordinates, the axis's idx[i]; ds */ \
  /* are data's strides with the axis's 0 (indices may be shorter than data on any axis) */ \
  __kernel void gather_elements_##S(__global const T* data, __global const long* idx,         \
                                    __global T* out, int n, int8 dims, int8 ds, int axis_dim,  \
                                    int axis_stride) {                                        \
    int i = get_global_id(0);                                                                   \
    if (i >= n) return;                                                                         \
    long k = idx[i];                                                                            \
    if (k < 0) k += axis_dim;                                                                   \
    out[i] = data[strided_offset(i, dims, ds) + k * axis_stride];                               \
  }                                                                                             \
  /* OneHot: out [outer, depth, inner] from int64 indices [outer, inner] */                 \
  __kernel void one_hot_##S(__global const long* idx, __global const T* values, __global T* out, \
                            int n, int depth, int inner) {                                    \
    int i = get_global_id(0);                                                                   \
    if (i >= n) return;                                                                         \
    const int c = i / inner % depth;                                                            \
    long k = idx[(long)(i / (inner * depth)) * inner + i % inner];                              \
    if (k < 0) k += depth;                                                                      \
    out[i] = values[k == c ? 1 : 0];                                                            \
  }                                                                                             \
  __kernel void trilu_##S(__global const T* in, __global T* out, int n, int rows, int cols,     \
                          int k, int upper) {                                                   \
    int i = get_global_id(0);                                                                   \
    if (i >= n) return;                                                                         \
    int c = i % cols, r = (i / cols) % rows;                                                    \
    int keep = upper ? (c - r >= k) : (c - r <= k);                                             \
    out[i] = keep ? in[i] : (T)0;                                                               \
  }

COPY(b8, uchar)
COPY(b32, uint)
COPY(b64, ulong)

__kernel void range_i64(__global long* out, int n, long start, long delta) {
  int i = get_global_id(0);
  if (i < n) out[i] = start + i * delta;
}

__kernel void range_i32(__global int* out, int n, int start, int delta) {
  int i = get_global_id(0);
  if (i < n) out[i] = start + i * delta;
}

__kernel void range_f32(__global float* out, int n, float start, float delta) {
  int i = get_global_id(0);
  if (i < n) out[i] = start + i * delta;
}
