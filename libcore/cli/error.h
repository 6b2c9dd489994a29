// tl::Error: the one exception type libcore throws for anything a user can cause.
//
// It carries the exit code the tool should end with (1 bad input, 2 usage, 3 device)
// and, where known, the node it is about, so that every tool prints the same line:
//   tl-shape: error: model.onnx: node 'Reshape_12': target shape has two -1
// Internal invariants use assert, not Error.
#pragma once

#include <stdexcept>
#include <string>

namespace tl {

enum class ExitCode : int { Ok = 0, BadInput = 1, Usage = 2, Device = 3 };

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message, ExitCode code = ExitCode::BadInput)
      : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

// Prefixes "node 'NAME': " to an error raised while handling that node.
[[noreturn]] void rethrowForNode(const std::string& nodeName, const Error& e);

}  // namespace tl
