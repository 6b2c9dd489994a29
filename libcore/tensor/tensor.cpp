#include "tensor/tensor.h"

#include <cstring>
#include <fstream>
#include <onnx/onnx_pb.h>

#include "cli/error.h"

namespace tl {

Tensor makeTensor(std::string name, DType dtype, std::vector<int64_t> dims, const void* data) {
  Tensor t;
  t.name = std::move(name);
  t.dtype = dtype;
  t.dims = std::move(dims);
  t.bytes.resize(static_cast<size_t>(elementCount(t.dims)) * dtypeBits(dtype) / 8);
  if (!t.bytes.empty()) std::memcpy(t.bytes.data(), data, t.bytes.size());
  return t;
}

const char* dtypeName(DType t) {
  switch (t) {
    case DType::Float: return "float32";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::UInt16: return "uint16";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::String: return "string";
    case DType::Bool: return "bool";
    case DType::Float16: return "float16";
    case DType::Double: return "float64";
    case DType::UInt32: return "uint32";
    case DType::UInt64: return "uint64";
    case DType::Complex64: return "complex64";
    case DType::Complex128: return "complex128";
    case DType::BFloat16: return "bfloat16";
    case DType::Float8E4M3FN: return "float8e4m3fn";
    case DType::Float8E4M3FNUZ: return "float8e4m3fnuz";
    case DType::Float8E5M2: return "float8e5m2";
    case DType::Float8E5M2FNUZ: return "float8e5m2fnuz";
    case DType::UInt4: return "uint4";
    case DType::Int4: return "int4";
    case DType::Undefined: break;
  }
  return "undefined";
}

size_t dtypeBits(DType t) {
  switch (t) {
    case DType::Bool: case DType::UInt8: case DType::Int8: case DType::Float8E4M3FN:
    case DType::Float8E4M3FNUZ: case DType::Float8E5M2: case DType::Float8E5M2FNUZ:
      return 8;
    case DType::UInt16: case DType::Int16: case DType::Float16: case DType::BFloat16: return 16;
    case DType::Float: case DType::Int32: case DType::UInt32: return 32;
    case DType::Int64: case DType::UInt64: case DType::Double: case DType::Complex64: return 64;
    case DType::Complex128: return 128;
    case DType::UInt4: case DType::Int4: return 4;
    case DType::String: case DType::Undefined: break;
  }
  return 0;
}

bool isInteger(DType t) {
  switch (t) {
    case DType::UInt8: case DType::Int8: case DType::UInt16: case DType::Int16: case DType::Int32:
    case DType::Int64: case DType::UInt32: case DType::UInt64: case DType::UInt4: case DType::Int4:
      return true;
    default: return false;
  }
}

bool isFloating(DType t) {
  switch (t) {
    case DType::Float: case DType::Float16: case DType::Double: case DType::BFloat16:
    case DType::Float8E4M3FN: case DType::Float8E4M3FNUZ: case DType::Float8E5M2: case DType::Float8E5M2FNUZ:
      return true;
    default: return false;
  }
}

DType dtypeFromOnnx(int32_t onnxType) {
  if (onnxType < 0 || onnxType > static_cast<int32_t>(DType::Int4))
    throw Error("unknown tensor element type " + std::to_string(onnxType));
  return static_cast<DType>(onnxType);
}

int64_t elementCount(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (auto d : dims) n *= d;
  return n;
}

int64_t elementsAfter(const std::vector<int64_t>& dims, size_t axis) {
  int64_t n = 1;
  for (size_t i = axis + 1; i < dims.size(); ++i) n *= dims[i];
  return n;
}

std::vector<int64_t> contiguousStrides(const std::vector<int64_t>& dims) {
  std::vector<int64_t> s(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) s[i - 1] = s[i] * dims[i];
  return s;
}

float halfToFloat(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      exp = 127 - 15 + 1;
      while (!(mant & 0x400)) { mant <<= 1; --exp; }
      bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000 | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

uint16_t floatToHalf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000);
  const uint32_t abs = u & 0x7fffffff;
  if (abs >= 0x7f800000) return sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0);  // inf, NaN (quiet)
  if (abs >= 0x477ff000) return sign | 0x7c00;  // rounds past 65504
  if (abs < 0x38800000) {  // a half subnormal (or zero): the value in units of 2^-24, to even
    if (abs < 0x33000000) return sign;  // under half of the smallest subnormal
    const uint32_t m = (abs & 0x7fffff) | 0x800000, sh = 126 - (abs >> 23);  // the value: m >> sh of them
    const uint32_t q = m >> sh, rest = m & ((1u << sh) - 1), half = 1u << (sh - 1);
    return sign | static_cast<uint16_t>(q + (rest > half || (rest == half && (q & 1))));
  }
  const uint32_t r = abs - 0x38000000;  // rebias 127 -> 15 in place: exponent and mantissa as one number
  const uint32_t q = r >> 13, rest = r & 0x1fff;
  return sign | static_cast<uint16_t>(q + (rest > 0x1000 || (rest == 0x1000 && (q & 1))));
}

int64_t Tensor::numel() const { return elementCount(dims); }

namespace {

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

template <typename Src>
void appendAs(std::vector<uint8_t>& out, Src v, size_t bytes) {
  // Typed fields widen small types (int32_data holds int8, uint16, fp16 bits...); narrow back.
  uint8_t buf[8];
  std::memcpy(buf, &v, sizeof(v));
  out.insert(out.end(), buf, buf + bytes);
}

std::vector<uint8_t> readExternal(const onnx::TensorProto& p, const std::filesystem::path& baseDir) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : p.external_data()) {
    if (kv.key() == "location") location = kv.value();
    if (kv.key() == "offset") offset = std::stoll(kv.value());
    if (kv.key() == "length") length = std::stoll(kv.value());
  }
  if (location.empty()) throw Error("tensor '" + p.name() + "': external data has no location");
  std::filesystem::path file = baseDir / location;
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error("tensor '" + p.name() + "': cannot open external data file '" + file.string() + "'");
  in.seekg(0, std::ios::end);
  int64_t size = in.tellg();
  if (length < 0) length = size - offset;
  if (offset < 0 || offset + length > size)
    throw Error("tensor '" + p.name() + "': external data range [" + std::to_string(offset) + ", " +
                std::to_string(offset + length) + ") is past the end of '" + file.string() + "'");
  std::vector<uint8_t> bytes(static_cast<size_t>(length));
  in.seekg(offset);
  in.read(reinterpret_cast<char*>(bytes.data()), length);
  return bytes;
}

}  // namespace

Tensor readTensor(const onnx::TensorProto& p, const std::filesystem::path& baseDir) {
  Tensor t;
  t.name = p.name();
  t.dtype = dtypeFromOnnx(p.data_type());
  t.dims.assign(p.dims().begin(), p.dims().end());
  for (auto d : t.dims)
    if (d < 0) throw Error("tensor '" + p.name() + "' has a negative dimension");
  if (t.dtype == DType::String || t.dtype == DType::Undefined)
    throw Error("tensor '" + p.name() + "': element type " + dtypeName(t.dtype) + " is not supported");
  const size_t bits = dtypeBits(t.dtype);
  const size_t expect = (static_cast<size_t>(t.numel()) * bits + 7) / 8;
  const size_t width = bits / 8;
  if (p.data_location() == onnx::TensorProto::EXTERNAL) {
    t.bytes = readExternal(p, baseDir);
  } else if (p.has_raw_data()) {
    t.bytes.assign(p.raw_data().begin(), p.raw_data().end());
  } else {
    switch (t.dtype) {
      case DType::Float:
        for (float v : p.float_data()) appendAs(t.bytes, v, 4);
        break;
      case DType::Double:
        for (double v : p.double_data()) appendAs(t.bytes, v, 8);
        break;
      case DType::Int64:
        for (int64_t v : p.int64_data()) appendAs(t.bytes, v, 8);
        break;
      case DType::UInt32: case DType::UInt64:
        for (uint64_t v : p.uint64_data()) appendAs(t.bytes, v, width);
        break;
      case DType::Complex64:
        for (float v : p.float_data()) appendAs(t.bytes, v, 4);
        break;
      case DType::Complex128:
        for (double v : p.double_data()) appendAs(t.bytes, v, 8);
        break;
      case DType::UInt4: case DType::Int4:  // int32_data holds one packed byte each
        for (int32_t v : p.int32_data()) appendAs(t.bytes, static_cast<uint8_t>(v), 1);
        break;
      default:  // int8/16/32, uint8/16, bool, fp16, bf16, fp8: widened into int32_data
        for (int32_t v : p.int32_data()) appendAs(t.bytes, v, width);
        break;
    }
  }
  if (t.bytes.size() != expect)
    throw Error("tensor '" + p.name() + "' holds " + std::to_string(t.bytes.size()) + " bytes, its shape needs " +
                std::to_string(expect));
  return t;
}

Tensor readTensorFile(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error("cannot open '" + path.string() + "'");
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  onnx::TensorProto p;
  if (!p.ParseFromString(data)) throw Error("'" + path.string() + "' is not a serialized TensorProto");
  return readTensor(p, path.parent_path());
}

std::vector<int64_t> Tensor::toInt64() const {
  const int64_t n = numel();
  std::vector<int64_t> out(static_cast<size_t>(n));
  const uint8_t* p = bytes.data();
  for (int64_t i = 0; i < n; ++i) {
    switch (dtype) {
      case DType::Int64: out[i] = load<int64_t>(p + 8 * i); break;
      case DType::UInt64: out[i] = static_cast<int64_t>(load<uint64_t>(p + 8 * i)); break;
      case DType::Int32: out[i] = load<int32_t>(p + 4 * i); break;
      case DType::UInt32: out[i] = load<uint32_t>(p + 4 * i); break;
      case DType::Int16: out[i] = load<int16_t>(p + 2 * i); break;
      case DType::UInt16: out[i] = load<uint16_t>(p + 2 * i); break;
      case DType::Int8: out[i] = load<int8_t>(p + i); break;
      case DType::UInt8: case DType::Bool: out[i] = p[i]; break;
      case DType::UInt4: out[i] = (p[i / 2] >> (4 * (i % 2))) & 0xf; break;
      case DType::Int4: out[i] = static_cast<int8_t>(((p[i / 2] >> (4 * (i % 2))) & 0xf) << 4) >> 4; break;
      default: throw Error("tensor '" + name + "': " + dtypeName(dtype) + " is not an integer type");
    }
  }
  return out;
}

std::vector<double> Tensor::toDouble() const {
  const int64_t n = numel();
  std::vector<double> out(static_cast<size_t>(n));
  const uint8_t* p = bytes.data();
  switch (dtype) {
    case DType::Float:
      for (int64_t i = 0; i < n; ++i) out[i] = load<float>(p + 4 * i);
      return out;
    case DType::Double:
      for (int64_t i = 0; i < n; ++i) out[i] = load<double>(p + 8 * i);
      return out;
    case DType::Float16:
      for (int64_t i = 0; i < n; ++i) out[i] = halfToFloat(load<uint16_t>(p + 2 * i));
      return out;
    case DType::BFloat16:
      for (int64_t i = 0; i < n; ++i) {
        uint32_t bits = uint32_t(load<uint16_t>(p + 2 * i)) << 16;
        float f;
        std::memcpy(&f, &bits, 4);
        out[i] = f;
      }
      return out;
    default: {
      auto ints = toInt64();
      for (int64_t i = 0; i < n; ++i) out[i] = static_cast<double>(ints[i]);
      return out;
    }
  }
}

}  // namespace tl
