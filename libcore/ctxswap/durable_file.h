// Files that survive a crash whole or not at all (issue 11's swap directory): written
// under a temporary name in the same directory, synced, renamed over the final name, and
// the directory synced; with an FNV-1a 64 checksum of their bytes at the end, so a read
// can tell a damaged file from a good one. Fields are little-endian.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tl {

uint64_t fnv1a(const uint8_t* p, size_t n);

// Writes bytes + their checksum. False with *error ("PATH: what: why") when the file
// system refuses: nothing is thrown, no temporary file is left.
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
