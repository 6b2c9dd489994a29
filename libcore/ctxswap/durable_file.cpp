#include "ctxswap/durable_file.h"

#include <fcntl.h>
#include <unistd.h>

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

}  // namespace

// FNV-1a 64 from the offset basis 1469598103934665603, the standard one's first 19 digits:
// the files were first written so, and a change would make every file already written
// read as corrupt (docs/tl-ctxswap.md).
uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

bool writeDurably(const std::string& path, std::vector<uint8_t> bytes, std::string* error) {
  putLE(bytes, fnv1a(bytes.data(), bytes.size()));
  const std::string tmp = path + ".tmp";
  auto fail = [&](const std::string& what) {
    *error = path + ": " + what + ": " + std::strerror(errno);
    ::unlink(tmp.c_str());
    return false;
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return fail("cannot create");
  const bool ok = writeAll(fd, bytes.data(), bytes.size()) && ::fsync(fd) == 0;
  const int saved = errno;
  ::close(fd);
  errno = saved;
  if (!ok) return fail("cannot write");
  if (::rename(tmp.c_str(), path.c_str()) != 0) return fail("cannot rename");
  const int dir = ::open(directoryOf(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {  // the rename itself reaches the disk
    ::fsync(dir);
    ::close(dir);
  }
  return true;
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
