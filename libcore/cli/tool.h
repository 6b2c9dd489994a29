// The command-line conventions every tl tool shares, in one place.
//
//   TOOL [INPUT] [-o FILE] [--emit onnx|text] [-f] [--help] [--version]
// INPUT and FILE default to "-" (stdin, stdout). Binary output is refused on a
// terminal unless -f. Output goes to a temporary file renamed into place only on
// success, so a failed run never leaves half an artifact for the next stage.
// Errors print one line, `TOOL: error: FILE: message`, and set the exit code:
// 0 ok, 1 bad input, 2 usage, 3 device.
#pragma once

#include <functional>
#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace tl {

enum class Emit { Onnx, Text };

class Tool {
 public:
  // `synopsis` is the opening of --help: what the tool does and how it is invoked.
  Tool(std::string name, const std::string& synopsis);

  CLI::App& app() { return app_; }
  const std::string& name() const { return name_; }
  const std::string& input() const { return input_; }
  const std::string& output() const { return output_; }
  Emit emit() const { return emit_ == "text" ? Emit::Text : Emit::Onnx; }
  // The name errors are reported against: the input path, or "<stdin>"; a tool that
  // reads several files names the one it is working on with blame().
  std::string inputDisplayName() const { return !blamed_.empty() ? blamed_ : input_ == "-" ? "<stdin>" : input_; }
  void blame(const std::string& file) { blamed_ = file == "-" ? "<stdin>" : file; }

  // Parses argv, runs body, maps tl::Error and parse errors to messages and exit codes.
  int run(int argc, char** argv, const std::function<void()>& body);

  // Writes data to -o (atomically for files). `binary` output is refused on a terminal unless -f.
  void writeOutput(const std::string& data, bool binary) const;

 private:
  std::string name_;
  CLI::App app_;
  std::string input_ = "-";
  std::string output_ = "-";
  std::string blamed_;
  std::string emit_ = "onnx";
  bool force_ = false;
};

// "a,b" -> {"a", "b"}; "" -> {}. Empty items are kept, for callers to refuse.
std::vector<std::string> splitCommas(const std::string& text);
// "1,2,3" -> {1, 2, 3}; "" -> {}. Throws tl::Error (usage) naming `flag` for anything else.
std::vector<int64_t> parseIntList(const std::string& flag, const std::string& text);

// "256MiB", "512KiB", "2GiB", "1000" (bytes) -> bytes. Throws tl::Error (usage) naming
// `flag` for anything else.
size_t parseByteSize(const std::string& flag, const std::string& text);

// Writes data to a file through a temporary renamed into place: a failure leaves
// nothing half-written. Throws tl::Error naming the path.
void writeFileAtomically(const std::string& path, const std::string& data);

}  // namespace tl
