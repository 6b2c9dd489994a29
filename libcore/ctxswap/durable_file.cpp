#include "ctxswap/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace tl {

namespace {

bool writeAll(int fd, const uint8_t* p, size_t n) {
  while (n) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

std::string directoryOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}

std::string tempOf(const std::string& path) { return path + ".tmp"; }

std::string failure(const std::string& path, const char* what) { return path + ": " + what + ": " + std::strerror(errno); }

}  // namespace

// FNV-1a 64 from the offset basis 1469598103934665603, the standard one's first 19 digits:
// the files were first written so, and a change would make every file already written
// read as corrupt (docs/tl-ctxswap.md).
uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

DurableWrites::~DurableWrites() {
  for (const File& f : files_) {
    ::close(f.fd);
    ::unlink(tempOf(f.path).c_str());
  }
}

size_t DurableWrites::add(const std::string& path, std::vector<uint8_t> bytes, std::string* error) {
  putLE(bytes, fnv1a(bytes.data(), bytes.size()));
  const auto again = std::find_if(files_.begin(), files_.end(), [&](const File& f) { return f.path == path; });
  if (again != files_.end()) {  // a path written twice in a group: the second write replaces the first
    ::close(again->fd);
    files_.erase(again);
  }
  const std::string tmp = tempOf(path);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) {
    *error = failure(path, "cannot create");
    return 0;
  }
  if (!writeAll(fd, bytes.data(), bytes.size())) {
    *error = failure(path, "cannot write");
    ::close(fd);
    ::unlink(tmp.c_str());
    return 0;
  }
  files_.push_back({path, fd});
  return bytes.size();
}

std::vector<std::pair<std::string, std::string>> DurableWrites::commit() {
  std::vector<std::pair<std::string, std::string>> failed;
  // Several files: one sync of their file system, which since Linux 5.8 fails where any
  // writeback failed; only then does each file's own sync say which (an fsync took
  // 0.4 ms under strace here even after the syncfs, 15 of them a 200-token call).
  const bool all = files_.size() > 1 && ::syncfs(files_[0].fd) == 0;
  std::vector<std::string> dirs;
  for (const File& f : files_) {
    const std::string tmp = tempOf(f.path);
    const bool synced = all || ::fsync(f.fd) == 0;
    const int saved = errno;
    ::close(f.fd);
    errno = saved;
    if (!synced || ::rename(tmp.c_str(), f.path.c_str()) != 0) {
      failed.emplace_back(f.path, failure(f.path, synced ? "cannot rename" : "cannot write"));
      ::unlink(tmp.c_str());
      continue;
    }
    const std::string dir = directoryOf(f.path);
    if (std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
  }
  files_.clear();
  for (const std::string& d : dirs) {  // the renames themselves reach the disk
    const int fd = ::open(d.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd >= 0) {
      ::fsync(fd);
      ::close(fd);
    }
  }
  return failed;
}

bool writeDurably(const std::string& path, std::vector<uint8_t> bytes, std::string* error) {
  DurableWrites w;
  if (!w.add(path, std::move(bytes), error)) return false;
  const auto failed = w.commit();
  if (failed.empty()) return true;
  *error = failed[0].second;
  return false;
}

bool readDurably(const std::string& path, std::vector<uint8_t>* bytes, bool* missing) {
  std::ifstream in(path, std::ios::binary);
  *missing = !in;
  if (!in) return false;
  bytes->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (bytes->size() < 8 || getLE<uint64_t>(bytes->data() + bytes->size() - 8) != fnv1a(bytes->data(), bytes->size() - 8))
    return false;
  bytes->resize(bytes->size() - 8);
  return true;
}

}  // namespace tl
