#include "cli/tool.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include "cli/error.h"
#include "tl/version.h"

namespace tl {

Tool::Tool(std::string name, const std::string& synopsis) : name_(std::move(name)), app_(synopsis, name_) {
  app_.set_version_flag("--version", name_ + " (tl) " TL_VERSION);
  app_.add_option("input", input_, "input model; - or nothing reads stdin")->capture_default_str();
  app_.add_option("-o,--output", output_, "output file; - writes stdout")->capture_default_str();
  app_.add_option("--emit", emit_, "output form: onnx (the artifact) or text (human-readable)")
      ->check(CLI::IsMember({"onnx", "text"}))
      ->capture_default_str();
  app_.add_flag("-f,--force", force_, "write binary output even to a terminal");
  app_.footer("\nExit codes: 0 ok, 1 bad input, 2 usage, 3 device error. Errors are one line:\n"
              "  " + name_ + ": error: FILE: message");
}

int Tool::run(int argc, char** argv, const std::function<void()>& body) {
  try {
    app_.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app_.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app_.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << name_ << ": error: " << e.what() << " (see --help)\n";
    return static_cast<int>(ExitCode::Usage);
  }
  try {
    body();
    std::cout.flush();
    return 0;
  } catch (const Error& e) {
    std::cout.flush();
    if (e.code() == ExitCode::Usage) {
      std::cerr << name_ << ": error: " << e.what() << "\n";
    } else {
      std::cerr << name_ << ": error: " << inputDisplayName() << ": " << e.what() << "\n";
    }
    return static_cast<int>(e.code());
  } catch (const std::bad_alloc&) {
    std::cerr << name_ << ": error: " << inputDisplayName() << ": out of memory\n";
    return static_cast<int>(ExitCode::BadInput);
  }
}

void Tool::writeOutput(const std::string& data, bool binary) const {
  if (output_ == "-") {
    if (binary && !force_ && isatty(STDOUT_FILENO))
      throw Error("refusing to write a binary model to a terminal: use -o FILE, --emit text, or -f",
                  ExitCode::Usage);
    std::cout.write(data.data(), static_cast<std::streamsize>(data.size()));
    std::cout.flush();
    if (!std::cout) throw Error("cannot write to stdout");
    return;
  }
  writeFileAtomically(output_, data);
}

std::vector<std::string> splitCommas(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream ss(text);
  for (std::string item; std::getline(ss, item, ',');) out.push_back(item);
  return out;
}

std::vector<int64_t> parseIntList(const std::string& flag, const std::string& text) {
  std::vector<int64_t> out;
  for (const auto& item : splitCommas(text)) {
    char* end = nullptr;
    const long long v = std::strtoll(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0')
      throw Error(flag + " expects comma-separated integers, got '" + item + "'", ExitCode::Usage);
    out.push_back(v);
  }
  return out;
}

size_t parseByteSize(const std::string& flag, const std::string& text) {
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  const std::string unit = end ? end : "";
  double scale = 0;
  if (unit.empty() || unit == "B") scale = 1;
  else if (unit == "KiB") scale = 1024.0;
  else if (unit == "MiB") scale = 1024.0 * 1024;
  else if (unit == "GiB") scale = 1024.0 * 1024 * 1024;
  if (text.empty() || end == text.c_str() || scale == 0 || !(v > 0))
    throw Error(flag + " expects a size such as 256MiB, 512KiB or a count of bytes, got '" + text + "'", ExitCode::Usage);
  return static_cast<size_t>(v * scale);
}

void writeFileAtomically(const std::string& path, const std::string& data) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path tmp = target;
  tmp += ".tmp" + std::to_string(getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error("cannot write '" + path + "'");
    out.write(data.data(), static_cast<std::streamsize>(data.size()));
    out.close();
    if (!out) {
      std::error_code ec;
      fs::remove(tmp, ec);
      throw Error("cannot write '" + path + "'");
    }
  }
  std::error_code ec;
  fs::rename(tmp, target, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error("cannot write '" + path + "': " + ec.message());
  }
}

}  // namespace tl
