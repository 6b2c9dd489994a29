// Reading a node's attributes by name, with the defaults ONNX specifies left to the
// caller (shared by the shape rules and the kernel lowering), and adding them.
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

// Adds an attribute (tl-fuse's rewrites write their nodes' attributes with these).
void addAttr(onnx::NodeProto& node, const char* name, int64_t value);
void addAttr(onnx::NodeProto& node, const char* name, float value);
void addAttr(onnx::NodeProto& node, const char* name, const std::string& value);
void addAttr(onnx::NodeProto& node, const char* name, const std::vector<int64_t>& values);

}  // namespace tl
