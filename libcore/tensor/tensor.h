// Typed tensors read from ONNX TensorProto: every storage form the format allows
// (raw_data little-endian bytes, the typed repeated fields, external data files).
//
// A Tensor owns its bytes in the dtype's natural layout; toInt64/toDouble convert
// for callers that only need values (shape inference, tests). No arithmetic here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace onnx {
class TensorProto;
}

namespace tl {

// Values are ONNX's TensorProto.DataType numbers.
enum class DType : int32_t {
  Undefined = 0, Float = 1, UInt8 = 2, Int8 = 3, UInt16 = 4, Int16 = 5, Int32 = 6, Int64 = 7,
  String = 8, Bool = 9, Float16 = 10, Double = 11, UInt32 = 12, UInt64 = 13, Complex64 = 14,
  Complex128 = 15, BFloat16 = 16, Float8E4M3FN = 17, Float8E4M3FNUZ = 18, Float8E5M2 = 19,
  Float8E5M2FNUZ = 20, UInt4 = 21, Int4 = 22,
};

const char* dtypeName(DType t);   // "float32", "int64", ...
size_t dtypeBits(DType t);        // 0 for string and unknown
bool isInteger(DType t);          // signed or unsigned integer types, not bool
bool isFloating(DType t);
DType dtypeFromOnnx(int32_t onnxType);  // throws tl::Error for numbers ONNX does not define

// Elements of a shape (1 for a scalar), and the row-major strides that walk it.
int64_t elementCount(const std::vector<int64_t>& dims);
// Elements of one step along axis: the product of the dims after it.
int64_t elementsAfter(const std::vector<int64_t>& dims, size_t axis);
std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& dims);
// IEEE half <-> float: floatToHalf rounds to nearest even (as OpenCL's vstore_half),
// overflowing to infinity; both keep subnormals, infinities and NaNs.
float halfToFloat(uint16_t h);
uint16_t floatToHalf(float f);

struct Tensor {
  std::string name;
  DType dtype = DType::Undefined;
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;  // packed, little-endian; 4-bit types two per byte

  int64_t numel() const;
  std::vector<int64_t> toInt64() const;  // integer and bool types
  std::vector<double> toDouble() const;  // any numeric type
};

// A tensor of `dims` whose elements (of a byte-sized dtype) are copied from `data`.
Tensor makeTensor(std::string name, DType dtype, std::vector<int64_t> dims, const void* data);

// Reads a TensorProto; external data is resolved against baseDir.
Tensor readTensor(const onnx::TensorProto& proto, const std::filesystem::path& baseDir);
// Reads a serialized TensorProto file (the backend test layout's input_0.pb).
Tensor readTensorFile(const std::filesystem::path& path);

}  // namespace tl
