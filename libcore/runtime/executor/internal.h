// What the executor's files (runtime/executor/*.cpp) share beside the class itself.
#pragma once

#include <cstdint>
#include <vector>

#include "tensor/tensor.h"

namespace tl {

// Bytes of one element on the device; throws for dtypes without a device layout.
size_t elementBytes(DType t);
// A key mask's rows of `from` elements of `width` bytes, each padded with zeros (hidden
// keys) to `to` elements, into `out` (rows * to elements).
void padRows(const std::vector<uint8_t>& rows, size_t width, int64_t from, int64_t to, uint8_t* out);

}  // namespace tl
