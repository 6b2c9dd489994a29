// The in-place KV caches' element type and its bytes (tl-plan --kv-type): the planner
// records it, the runtime builds its kernels for it and converts the host's rows.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace tl {

// The in-place caches' element (Transformer-Lite 2.3 keeps them in fp16): the graph's
// tensors stay fp32, the kernels round as they append and widen as they read. Q8: blocks
// of 32 elements along a head row, a float scale (largest magnitude / 127) then 32 int8
// codes (llama.cpp's q8_0 with a float scale, 36 bytes; kernels/common.cl's KV_T).
enum class KvType { F32, F16, Q8 };
constexpr int64_t kKvQ8Block = 32;  // elements a Q8 block holds (its scale, then their codes)
const char* kvTypeName(KvType t);  // "f32", "f16", "q8"
std::optional<KvType> kvTypeNamed(const std::string& name);
// Bytes of n consecutive elements of a head row from a row's start (n % 32 == 0 for Q8),
// and per element on average.
size_t kvBytes(KvType t, int64_t n);
double kvElementBytes(KvType t);
// `rows` head rows of D floats to the cache's form and back (fp16 rounded to nearest even,
// q8 blocks as the kernels write them).
void encodeKvRows(KvType t, const float* in, size_t rows, int64_t D, uint8_t* out);
void decodeKvRows(KvType t, const uint8_t* in, size_t rows, int64_t D, float* out);

}  // namespace tl
