// Files that survive a crash whole or not at all (issue 11's swap directory): written
// under a temporary name in the same directory, synced, renamed over the final name, and
// the directory synced; with an FNV-1a 64 checksum of their bytes at the end, so a read
// can tell a damaged file from a good one. Fields are little-endian.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace tl {

uint64_t fnv1a(const uint8_t* p, size_t n);

// Files made durable together, a group commit: add() writes each under its temporary
// name, commit() syncs them all at once (syncfs), renames each over its name and syncs
// each directory once. File by file, the two syncs a file of the 15 chunk files and the
// record a 200-token call of bytellama keeps cost 20 ms of this machine's 80 ms call
// (docs/tl-ctxswap.md). A crash still leaves each file old or new, never torn. Until
// commit() a file is not at its name; a group dropped uncommitted removes its temporaries.
class DurableWrites {
 public:
  DurableWrites() = default;
  DurableWrites(const DurableWrites&) = delete;
  DurableWrites& operator=(const DurableWrites&) = delete;
  ~DurableWrites();
  // Writes bytes + their checksum under path's temporary name: the file's size, or 0 with
  // *error ("PATH: what: why") when the file system refuses (no temporary file is left).
  size_t add(const std::string& path, std::vector<uint8_t> bytes, std::string* error);
  // Every file added since the last commit at its name, durably; those that could not be
  // (each path, and "PATH: what: why"), each left as it was.
  std::vector<std::pair<std::string, std::string>> commit();

 private:
  struct File {
    std::string path;
    int fd;
  };
  std::vector<File> files_;
};

// A group of one file. False with *error ("PATH: what: why") when the file system
// refuses: nothing is thrown, no temporary file is left.
bool writeDurably(const std::string& path, std::vector<uint8_t> bytes, std::string* error);
// The file's bytes less the checksum when it is there and matches; false otherwise
// (*missing says whether the file was absent).
bool readDurably(const std::string& path, std::vector<uint8_t>* bytes, bool* missing);

// Little-endian fields.
template <typename T>
void putLE(std::vector<uint8_t>& out, T v) {
  for (size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<uint8_t>(static_cast<uint64_t>(v) >> (8 * i)));
}
template <typename T>
T getLE(const uint8_t* p) {
  uint64_t v = 0;
  for (size_t i = 0; i < sizeof(T); ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return static_cast<T>(v);
}

}  // namespace tl
