#include "tensor/tensor.h"

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "cli/error.h"

namespace tl {
namespace {

TEST(Tensor, RawAndTypedInt64Agree) {
  onnx::TensorProto raw, typed;
  std::vector<int64_t> v{1, -2, 3, INT64_MAX};
  raw.set_data_type(onnx::TensorProto::INT64);
  raw.add_dims(4);
  raw.set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * 8));
  typed.set_data_type(onnx::TensorProto::INT64);
  typed.add_dims(2);
  typed.add_dims(2);
  for (auto x : v) typed.add_int64_data(x);
  EXPECT_EQ(readTensor(raw, {}).toInt64(), v);
  EXPECT_EQ(readTensor(typed, {}).toInt64(), v);
  EXPECT_EQ(readTensor(typed, {}).numel(), 4);
}

TEST(Tensor, WidenedTypedFieldsNarrowBack) {
  onnx::TensorProto t;
  t.set_data_type(onnx::TensorProto::INT8);
  t.add_dims(3);
  for (int x : {-128, 0, 127}) t.add_int32_data(x);
  EXPECT_EQ(readTensor(t, {}).toInt64(), (std::vector<int64_t>{-128, 0, 127}));

  onnx::TensorProto h;  // fp16 bits in int32_data: 1.0, -2.0, 65504, 2^-24 (smallest subnormal)
  h.set_data_type(onnx::TensorProto::FLOAT16);
  h.add_dims(4);
  for (int bits : {0x3c00, 0xc000, 0x7bff, 0x0001}) h.add_int32_data(bits);
  auto d = readTensor(h, {}).toDouble();
  EXPECT_EQ(d[0], 1.0);
  EXPECT_EQ(d[1], -2.0);
  EXPECT_EQ(d[2], 65504.0);
  EXPECT_EQ(d[3], std::ldexp(1.0, -24));

  onnx::TensorProto b;
  b.set_data_type(onnx::TensorProto::BOOL);
  b.add_dims(2);
  b.add_int32_data(1);
  b.add_int32_data(0);
  EXPECT_EQ(readTensor(b, {}).toInt64(), (std::vector<int64_t>{1, 0}));
}

TEST(Tensor, BFloat16AndInt4) {
  onnx::TensorProto bf;
  bf.set_data_type(onnx::TensorProto::BFLOAT16);
  bf.add_dims(1);
  bf.add_int32_data(0x3f80);  // 1.0
  EXPECT_EQ(readTensor(bf, {}).toDouble()[0], 1.0);
  onnx::TensorProto i4;
  i4.set_data_type(22);  // INT4, packed two per byte, low nibble first
  i4.add_dims(3);
  i4.set_raw_data(std::string("\xF7\x08", 2));
  EXPECT_EQ(readTensor(i4, {}).toInt64(), (std::vector<int64_t>{7, -1, -8}));
}

TEST(Tensor, ExternalData) {
  auto dir = std::filesystem::temp_directory_path() / "tl_tensor_test";
  std::filesystem::create_directories(dir);
  float data[4] = {0.5f, 1.5f, 2.5f, 3.5f};
  {
    std::ofstream f(dir / "weights.bin", std::ios::binary);
    f.write("PAD!", 4);
    f.write(reinterpret_cast<const char*>(data), sizeof(data));
  }
  onnx::TensorProto t;
  t.set_name("w");
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(2);
  t.add_dims(2);
  t.set_data_location(onnx::TensorProto::EXTERNAL);
  auto add = [&](const char* k, const std::string& v) {
    auto* e = t.add_external_data();
    e->set_key(k);
    e->set_value(v);
  };
  add("location", "weights.bin");
  add("offset", "4");
  add("length", "16");
  EXPECT_EQ(readTensor(t, dir).toDouble(), (std::vector<double>{0.5, 1.5, 2.5, 3.5}));
  t.mutable_external_data(1)->set_value("8");  // runs past the end
  EXPECT_THROW(readTensor(t, dir), Error);
  t.mutable_external_data(0)->set_value("missing.bin");
  EXPECT_THROW(readTensor(t, dir), Error);
}

TEST(Tensor, SizeMismatchIsAnError) {
  onnx::TensorProto t;
  t.set_name("short");
  t.set_data_type(onnx::TensorProto::FLOAT);
  t.add_dims(3);
  t.add_float_data(1.0f);
  try {
    readTensor(t, {});
    FAIL();
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "tensor 'short' holds 4 bytes, its shape needs 12");
  }
}

}  // namespace
}  // namespace tl

namespace tl {
namespace {

// floatToHalf, as vstore_half rounds (the fp16 KV caches' host side): every finite half
// and infinity comes back as itself; a value between two halves goes to the nearer, a
// tie to the even one, in the normal and subnormal ranges alike; past 65520 it overflows.
TEST(Tensor, FloatToHalfRoundsToNearestEven) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue;  // NaN: any NaN back
    ASSERT_EQ(floatToHalf(halfToFloat(static_cast<uint16_t>(h))), h) << std::hex << h;
  }
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f), 0x3c00);           // a tie: to even (1.0)
  EXPECT_EQ(floatToHalf(1.0f + 3 * 0x1p-11f), 0x3c02);       // a tie: to even (1 + 2^-9)
  EXPECT_EQ(floatToHalf(1.0f + 0x1p-11f + 0x1p-20f), 0x3c01);  // past the tie: up
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);  // the tie above the largest half: to infinity
  EXPECT_EQ(floatToHalf(-1e10f), 0xfc00);
  EXPECT_EQ(floatToHalf(0x1p-25f), 0x0000);            // half the smallest subnormal: to even (0)
  EXPECT_EQ(floatToHalf(0x1p-25f * 1.0001f), 0x0001);  // past it
  EXPECT_EQ(floatToHalf(3 * 0x1p-25f), 0x0002);        // 1.5 units: to even
  EXPECT_EQ(floatToHalf(0x1p-14f - 0x1p-26f), 0x0400); // rounds up into the normals
  EXPECT_EQ(floatToHalf(1e-30f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  const uint16_t nan = floatToHalf(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE((nan & 0x7c00) == 0x7c00 && (nan & 0x3ff));
}

}  // namespace
}  // namespace tl
