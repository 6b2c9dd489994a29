#include "cli/test_support.h"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

namespace tl::test {

std::filesystem::path sharedModels() { return TL_SHARED_MODELS; }
std::filesystem::path sourceDir() { return TL_SOURCE_DIR; }

std::filesystem::path tempDir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("tl_test_" + name);
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

std::string readFile(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

void writeFile(const std::filesystem::path& p, const std::string& data) {
  std::ofstream(p, std::ios::binary).write(data.data(), static_cast<std::streamsize>(data.size()));
}

RunResult runTool(const std::string& tool, const std::string& args, const std::string& stdinFile,
                  const std::filesystem::path& cwd) {
  static int counter = 0;
  auto dir = std::filesystem::temp_directory_path();
  std::string tag = std::to_string(getpid()) + "_" + std::to_string(counter++);
  auto out = dir / ("tl_run_" + tag + ".out"), err = dir / ("tl_run_" + tag + ".err");
  std::string cmd = (cwd.empty() ? "" : "cd '" + cwd.string() + "' && ") + std::string(TL_BIN_DIR) + "/" + tool + " " + args + " >" + out.string() + " 2>" + err.string() +
                    (stdinFile.empty() ? " </dev/null" : " <" + stdinFile);
  int status = std::system(cmd.c_str());
  RunResult r;
  r.exitCode = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = readFile(out);
  r.err = readFile(err);
  std::filesystem::remove(out);
  std::filesystem::remove(err);
  return r;
}

std::string modelTestName(const std::filesystem::path& modelDir) {
  std::string n = (modelDir.parent_path().filename() == "dynamo" ? "dynamo_" : "") + modelDir.filename().string();
  for (auto& ch : n)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return n;
}

std::vector<std::filesystem::path> modelDirs() {
  std::vector<std::filesystem::path> dirs;
  for (const auto& root : {sharedModels(), sourceDir() / "tests/models/dynamo"}) {
    if (!std::filesystem::exists(root)) continue;
    for (const auto& e : std::filesystem::directory_iterator(root))
      if (std::filesystem::exists(e.path() / "model.onnx")) dirs.push_back(e.path());
  }
  std::sort(dirs.begin(), dirs.end());
  return dirs;
}

}  // namespace tl::test
