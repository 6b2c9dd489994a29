// Reading a node's attributes by name, with the defaults ONNX specifies left to the
// caller. Shared by the shape rules and the kernel lowering.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace tl {

const onnx::AttributeProto* findAttr(const onnx::NodeProto& node, const char* name);
// Each throws tl::Error when the attribute exists with another type.
std::optional<int64_t> attrInt(const onnx::NodeProto& node, const char* name);
std::optional<float> attrFloat(const onnx::NodeProto& node, const char* name);
std::optional<std::string> attrString(const onnx::NodeProto& node, const char* name);
std::optional<std::vector<int64_t>> attrInts(const onnx::NodeProto& node, const char* name);

}  // namespace tl
