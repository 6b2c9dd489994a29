// Shared helpers. Shapes reach kernels as int8 vectors (rank <= 8, padded on the left
// with dims of 1 and strides of 0), so one kernel serves every rank and broadcast.

inline int strided_offset(int i, int8 dims, int8 strides) {
  int d[8], s[8];
  vstore8(dims, 0, d);
  vstore8(strides, 0, s);
  int off = 0;
  for (int k = 7; k >= 0 && i > 0; --k) {  // the host collapses dims, so few iterations divide
    if (d[k] == 1) continue;
    int c = i % d[k];
    i /= d[k];
    off += c * s[k];
  }
  return off;
}
