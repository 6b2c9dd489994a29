#include "ctxswap/chunk_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

namespace tl {

namespace {

constexpr char kMagic[8] = {'T', 'L', 'K', 'V', 'C', 'H', 'K', '1'};
constexpr uint32_t kVersion = 1;
constexpr size_t kHeader = 52, kTrailer = 8;

uint64_t fnv1a(const uint8_t* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

template <typename T>
void put(std::vector<uint8_t>& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i)));
}

template <typename T>
T get(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}

void putFloats(std::vector<uint8_t>& out, const std::vector<float>& f) {
  for (float x : f) {
    uint32_t u;
    std::memcpy(&u, &x, 4);
    put(out, u);
  }
}

void getFloats(const uint8_t* p, std::vector<float>& f, size_t n) {
  f.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const uint32_t u = get<uint32_t>(p + 4 * i);
    std::memcpy(&f[i], &u, 4);
  }
}

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

bool writeChunkFile(const std::string& path, const ChunkId& id, const KvChunk& c, std::string* error) {
  std::vector<uint8_t> bytes(kMagic, kMagic + 8);
  put(bytes, kVersion);
  put(bytes, id.model);
  put(bytes, id.context);
  put(bytes, id.index);
  put(bytes, id.first);
  put(bytes, static_cast<uint32_t>(c.tokens));
  put(bytes, static_cast<uint32_t>(c.channels));
  put(bytes, static_cast<uint32_t>(c.bits));
  put(bytes, static_cast<uint32_t>(c.codes.size()));
  putFloats(bytes, c.lo);
  putFloats(bytes, c.step);
  bytes.insert(bytes.end(), c.codes.begin(), c.codes.end());
  put(bytes, fnv1a(bytes.data(), bytes.size()));
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

const char* chunkReadName(ChunkRead r) {
  switch (r) {
    case ChunkRead::Ok: return "ok";
    case ChunkRead::Missing: return "missing";
    case ChunkRead::Corrupt: return "corrupt";
    case ChunkRead::OtherModel: return "another model's";
    case ChunkRead::Mismatch: return "another chunk's";
  }
  return "?";
}

ChunkRead readChunkFile(const std::string& path, const ChunkId& id, KvChunk* chunk) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return ChunkRead::Missing;
  const std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (b.size() < kHeader + kTrailer || std::memcmp(b.data(), kMagic, 8) != 0 || get<uint32_t>(b.data() + 8) != kVersion)
    return ChunkRead::Corrupt;
  if (get<uint64_t>(b.data() + b.size() - kTrailer) != fnv1a(b.data(), b.size() - kTrailer)) return ChunkRead::Corrupt;
  const uint64_t channels = get<uint32_t>(b.data() + 40), codeBytes = get<uint32_t>(b.data() + 48);
  const uint32_t tokens = get<uint32_t>(b.data() + 36), bits = get<uint32_t>(b.data() + 44);
  if ((bits != 8 && bits != 4 && bits != 2) || tokens == 0 || channels == 0 ||
      codeBytes != (tokens * channels * bits + 7) / 8 || b.size() != kHeader + 8 * channels + codeBytes + kTrailer)
    return ChunkRead::Corrupt;
  if (get<uint64_t>(b.data() + 12) != id.model) return ChunkRead::OtherModel;
  if (get<uint64_t>(b.data() + 20) != id.context || get<uint32_t>(b.data() + 28) != id.index ||
      get<uint32_t>(b.data() + 32) != id.first)
    return ChunkRead::Mismatch;
  chunk->tokens = tokens;
  chunk->channels = static_cast<int64_t>(channels);
  chunk->bits = static_cast<int>(bits);
  getFloats(b.data() + kHeader, chunk->lo, channels);
  getFloats(b.data() + kHeader + 4 * channels, chunk->step, channels);
  chunk->codes.assign(b.begin() + static_cast<std::ptrdiff_t>(kHeader + 8 * channels), b.end() - kTrailer);
  return ChunkRead::Ok;
}

}  // namespace tl
