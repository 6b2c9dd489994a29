#include "graph/attributes.h"

#include "cli/error.h"

namespace tl {
namespace {

const onnx::AttributeProto* typed(const onnx::NodeProto& node, const char* name, onnx::AttributeProto::AttributeType t,
                                  const char* what) {
  const auto* a = findAttr(node, name);
  if (a && a->type() != t) throw Error(std::string("attribute '") + name + "' is not " + what);
  return a;
}

}  // namespace

const onnx::AttributeProto* findAttr(const onnx::NodeProto& node, const char* name) {
  for (const auto& a : node.attribute())
    if (a.name() == name) return &a;
  return nullptr;
}

std::optional<int64_t> attrInt(const onnx::NodeProto& node, const char* name) {
  const auto* a = typed(node, name, onnx::AttributeProto::INT, "an integer");
  return a ? std::optional<int64_t>(a->i()) : std::nullopt;
}

std::optional<float> attrFloat(const onnx::NodeProto& node, const char* name) {
  const auto* a = typed(node, name, onnx::AttributeProto::FLOAT, "a float");
  return a ? std::optional<float>(a->f()) : std::nullopt;
}

std::optional<std::string> attrString(const onnx::NodeProto& node, const char* name) {
  const auto* a = typed(node, name, onnx::AttributeProto::STRING, "a string");
  return a ? std::optional<std::string>(a->s()) : std::nullopt;
}

std::optional<std::vector<int64_t>> attrInts(const onnx::NodeProto& node, const char* name) {
  const auto* a = typed(node, name, onnx::AttributeProto::INTS, "a list of integers");
  if (!a) return std::nullopt;
  return std::vector<int64_t>(a->ints().begin(), a->ints().end());
}

namespace {

onnx::AttributeProto* added(onnx::NodeProto& node, const char* name, onnx::AttributeProto::AttributeType t) {
  auto* a = node.add_attribute();
  a->set_name(name);
  a->set_type(t);
  return a;
}

}  // namespace

void addAttr(onnx::NodeProto& node, const char* name, int64_t value) {
  added(node, name, onnx::AttributeProto::INT)->set_i(value);
}

void addAttr(onnx::NodeProto& node, const char* name, float value) {
  added(node, name, onnx::AttributeProto::FLOAT)->set_f(value);
}

void addAttr(onnx::NodeProto& node, const char* name, const std::string& value) {
  added(node, name, onnx::AttributeProto::STRING)->set_s(value);
}

void addAttr(onnx::NodeProto& node, const char* name, const std::vector<int64_t>& values) {
  auto* a = added(node, name, onnx::AttributeProto::INTS);
  for (auto v : values) a->add_ints(v);
}

}  // namespace tl
