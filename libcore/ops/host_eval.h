// Host evaluation of small tensors that only the inputs' data decides: the attention
// mask an export builds from attention_mask and Ranges, integer position arithmetic.
// A decode step's mask is one row, built by a dozen tiny kernels on the device; on the
// host it costs microseconds, and only the result goes up (one write, not a dozen
// launches). Only exact ops run here (integer arithmetic, comparisons, logic, data
// movement, casts), so a host result equals what the kernels would have written.
#pragma once

#include <vector>

#include "ops/op_table.h"
#include "tensor/tensor.h"

namespace tl {

// Whether `node` has a host evaluation for its operator (the op table's host column)
// and its tensors' dtypes.
bool hostEvaluable(const onnx::NodeProto& node, const DTypeOf& dtype);

// Evaluates `node` on its inputs (nullptr for an absent optional one) into an output of
// `outDims` and `outType` (the run's shapes). Throws tl::Error naming the problem.
Tensor evaluateOnHost(const onnx::NodeProto& node, const std::vector<const Tensor*>& inputs,
                      const std::vector<int64_t>& outDims, DType outType);

}  // namespace tl
