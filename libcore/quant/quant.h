// Group-wise weight quantization of a K x N matrix (MatMul's B: y = x W), grouped
// along K so that each group feeds one stretch of a dot product.
//
// Layout (what tl.QMatMul reads, docs/ops.md): weights are stored per output column
// n, K codes in a row; every group of `group` codes along K (the last one may be
// ragged) has a float scale and a float offset, so that w = f(code) * scale + offset.
//   e0m4  f(q) = as_float(0x40000000 | q << 19) = 2 + q/8 (Transformer-Lite's FP4:
//         two bit operations; the group is mapped into [2, 4) and the offset's
//         dropped fraction bits are zeroed so that 0 stays exact)
//   int4  f(q) = q, 16 levels from min to max (the paper's asymmetric baseline)
//   q8    f(q) = q, signed 8-bit symmetric (offset 0)
//   w4a8  f(q) = q, signed 4-bit symmetric weights; activations are quantized per row
//         to int8 at run time (MNN); integer accumulation per group
//   q3h   f(q) = q, 11 levels; two codes share 7 bits (a*11 + b), Inferflow's 3.5 bits
// Packing: 4-bit codes two per byte (low nibble first), 8-bit codes one per byte,
// q3h pairs as a 7-bit stream (pair p at bit 7p of the column's bytes).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tl {

enum class QuantScheme { E0M4, Int4, Q8, W4A8, Q3H };

QuantScheme parseScheme(const std::string& name);  // throws tl::Error (usage) for unknown names
const char* schemeName(QuantScheme s);
int schemeLevels(QuantScheme s);

struct QuantizedMatrix {
  QuantScheme scheme = QuantScheme::E0M4;
  int64_t K = 0, N = 0, group = 0;
  int64_t rowBytes = 0;           // packed bytes per output column
  std::vector<uint8_t> packed;    // N * rowBytes
  std::vector<float> scale, offset;  // N * groups()

  int64_t groups() const { return (K + group - 1) / group; }
  // Stored bits per weight: codes plus per-group scale and offset.
  double bitsPerWeight() const;
};

// w: row-major K x N. group must be positive (a power of two for the 4-bit schemes'
// kernels is not required: ragged last groups are handled exactly).
QuantizedMatrix quantize(const float* w, int64_t K, int64_t N, QuantScheme scheme, int64_t group);
// The weights the kernels compute with, row-major K x N.
std::vector<float> dequantize(const QuantizedMatrix& q);
// The code of weight (k, n).
int code(const QuantizedMatrix& q, int64_t k, int64_t n);

double meanAbsError(const float* a, const float* b, size_t n);

}  // namespace tl
