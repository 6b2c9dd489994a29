// tl-ctxswap's building blocks (issue 11): chunk compression, bit allocation, chunk files.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <random>

#include "cli/error.h"
#include "ctxswap/chunk_file.h"
#include "ctxswap/chunk_memory.h"
#include "ctxswap/context_log.h"
#include "ctxswap/durable_file.h"
#include "ctxswap/kv_chunk.h"
#include "ctxswap/json_line.h"
#include "ctxswap/load_plan.h"
#include "ctxswap/replay.h"
#include "ctxswap/tolerance.h"
#include "ctxswap/trace.h"

namespace tl {
namespace {

// 16 tokens x 24 channels whose ranges differ by orders of magnitude, as k's do.
std::vector<float> chunkValues(int64_t tokens, int64_t channels, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(tokens * channels));
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 0; c < channels; ++c) v[t * channels + c] = normal(rng) * std::pow(10.0f, static_cast<float>(c % 4) - 2) + c;
  return v;
}

// The service's lines: every byte through a string, integers, reals, booleans, and one
// error for each malformed form.
TEST(JsonLine, RoundTripAndErrors) {
  std::string bytes;
  for (int b = 0; b < 256; ++b) bytes += static_cast<char>(b);
  const std::string line = JsonWriter().str("s", bytes).num("i", -42).real("r", 0.8).real("whole", 2).flag("b", true).line();
  EXPECT_EQ(line.find('\n'), std::string::npos);
  const JsonLine j = parseJsonLine(line);
  EXPECT_EQ(j.strings.at("s"), bytes);
  EXPECT_EQ(j.ints.at("i"), -42);
  EXPECT_DOUBLE_EQ(j.reals.at("r"), 0.8);
  EXPECT_DOUBLE_EQ(j.number("whole", 0), 2.0);
  EXPECT_DOUBLE_EQ(j.number("i", 0), -42.0);
  EXPECT_TRUE(j.bools.at("b"));
  EXPECT_TRUE(parseJsonLine(" { } ").strings.empty());
  for (const char* bad : {"", "{", "{\"a\":}", "{\"a\":[1]}", "{\"a\":{}}", "{\"a\":1,\"a\":2}", "{\"a\":1} x",
                          "{\"a\":\"\\u0100\"}", "{\"a\":\"open}", "{a:1}", "{\"a\":12345678901234567890}"}) {
    EXPECT_THROW(parseJsonLine(bad), Error) << bad;
  }
}

// At 32 bits a chunk holds the floats themselves, and its file reads them back.
TEST(KvChunk, ThirtyTwoBitsKeepTheFloats) {
  const auto v = chunkValues(16, 24, 3);
  const KvChunk c = compressChunk(v.data(), 16, 24, 32);
  EXPECT_EQ(c.codes.size(), v.size() * 4);
  EXPECT_EQ(decompressChunk(c), v);
  EXPECT_EQ(decompressChunk(recompressChunk(c, 8)).size(), v.size());
  const std::string path = (std::filesystem::temp_directory_path() / "tl-kvchunk-32.kv").string();
  std::string error;
  ASSERT_TRUE(writeChunkFile(path, {1, 2, 3, 48}, c, &error)) << error;
  KvChunk back;
  ASSERT_EQ(readChunkFile(path, {1, 2, 3, 48}, &back), ChunkRead::Ok);
  EXPECT_EQ(decompressChunk(back), v);
  std::filesystem::remove(path);
}

// A chunk file is the layout docs/tl-ctxswap.md gives, little-endian: magic, version 2,
// the chunk's id and sizes, lo and step a channel, the codes, and an FNV-1a 64 of the rest
// from the offset basis 1469598103934665603 (the standard one's first 19 digits, as the
// files were first written; the docs say so).
TEST(KvChunk, FileIsTheDocumentedLayout) {
  const auto v = chunkValues(16, 24, 5);
  const KvChunk c = compressChunk(v.data(), 16, 24, 8);
  const std::string path = (std::filesystem::temp_directory_path() / "tl-kvchunk-layout.kv").string();
  std::string error;
  ASSERT_TRUE(writeChunkFile(path, {0x1122334455667788ull, 9, 3, 48}, c, &error)) << error;
  std::ifstream in(path, std::ios::binary);
  const std::string b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::filesystem::remove(path);
  const auto le = [&](size_t at, size_t n) {
    uint64_t x = 0;
    for (size_t i = 0; i < n; ++i) x |= uint64_t(static_cast<uint8_t>(b[at + i])) << (8 * i);
    return x;
  };
  ASSERT_EQ(b.size(), 56u + 2 * 24 * 4 + 16 * 24 + 8);
  EXPECT_EQ(b.substr(0, 8), "TLKVCHK1");
  EXPECT_EQ(le(8, 4), 2u);
  EXPECT_EQ(le(12, 8), 0x1122334455667788ull);
  EXPECT_EQ(le(20, 8), 9u);
  EXPECT_EQ(le(28, 4), 3u);
  EXPECT_EQ(le(32, 4), 48u);
  EXPECT_EQ(le(36, 4), 16u);
  EXPECT_EQ(le(40, 4), 24u);
  EXPECT_EQ(le(44, 4), 8u);
  EXPECT_EQ(le(48, 4), 16u * 24);
  EXPECT_EQ(le(52, 4), 16u * 24);
  float lo0 = 0, step0 = 0;
  std::memcpy(&lo0, b.data() + 56, 4);
  std::memcpy(&step0, b.data() + 56 + 24 * 4, 4);
  EXPECT_EQ(lo0, c.lo[0]);
  EXPECT_EQ(step0, c.step[0]);
  EXPECT_EQ(b.compare(56 + 2 * 24 * 4, c.codes.size(), std::string(c.codes.begin(), c.codes.end())), 0);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i + 8 < b.size(); ++i) h = (h ^ static_cast<uint8_t>(b[i])) * 1099511628211ull;
  EXPECT_EQ(le(b.size() - 8, 8), h);
}

// Switching latency statistics: nearest-rank percentiles, the mean, the chunks' sources.
TEST(Replay, SwitchSummaryNearestRank) {
  std::vector<SwitchStats> s;
  for (int i = 1; i <= 200; ++i) s.push_back({i * 1e-3, 1, i % 2, 0});
  const SwitchSummary m = summarizeSwitches(s);
  EXPECT_EQ(m.calls, 200);
  EXPECT_DOUBLE_EQ(m.p50, 100e-3);
  EXPECT_DOUBLE_EQ(m.p99, 198e-3);
  EXPECT_DOUBLE_EQ(m.max, 200e-3);
  EXPECT_NEAR(m.mean, 100.5e-3, 1e-12);
  EXPECT_EQ(m.inMemory, 200);
  EXPECT_EQ(m.read, 100);
  EXPECT_EQ(summarizeSwitches({}).calls, 0);
}

// The sweep's table: a column a policy, and the most contexts whose mean switch is within
// the bound (a count past the bound does not end the search: the most within it counts);
// its plot has a line a policy and the bound.
TEST(Replay, SweepTableAndPlot) {
  const auto at = [](Policy p, int64_t n, double meanMs) {
    SweepPoint x;
    x.policy = p;
    x.contexts = n;
    x.summary.mean = meanMs * 1e-3;
    x.summary.p99 = 2 * meanMs * 1e-3;
    return x;
  };
  const std::vector<SweepPoint> points = {at(Policy::Llms, 2, 0.5), at(Policy::Lmk, 2, 3),   at(Policy::Llms, 4, 1.5),
                                          at(Policy::Lmk, 4, 30),   at(Policy::Llms, 8, 0.9), at(Policy::Lmk, 8, 90)};
  const std::string t = sweepTable(points, 1.0);
  EXPECT_NE(t.find("| contexts | llms mean ms (p99) | lmk mean ms (p99) |"), std::string::npos) << t;
  EXPECT_NE(t.find("| 4 | 1.500 (3.00) | 30.000 (60.00) |"), std::string::npos) << t;
  EXPECT_NE(t.find("within 1 ms | 8 | 0 |"), std::string::npos) << t;
  const std::string svg = sweepSvg(points, 1.0);
  size_t lines = 0;
  for (size_t at = 0; (at = svg.find("<polyline", at)) != std::string::npos; ++at) ++lines;
  EXPECT_EQ(lines, 2u);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
}

// Each value comes back within half a step of its channel's grid, at every width.
TEST(KvChunk, ChannelWiseRoundTripWithinHalfAStep) {
  const int64_t tokens = 16, channels = 24;
  const auto v = chunkValues(tokens, channels, 1);
  size_t last = SIZE_MAX;
  for (int bits : {8, 4, 2}) {
    const KvChunk c = compressChunk(v.data(), tokens, channels, bits);
    EXPECT_EQ(c.codes.size(), static_cast<size_t>(tokens * channels * bits / 8));
    EXPECT_LT(c.bytes(), last);
    last = c.bytes();
    const auto back = decompressChunk(c);
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t ch = 0; ch < channels; ++ch) {
        const size_t i = static_cast<size_t>(t * channels + ch);
        EXPECT_LE(std::fabs(back[i] - v[i]), 0.5f * c.step[ch] * 1.0001f + 1e-6f) << bits << " bits, (" << t << ", " << ch << ")";
      }
    // the extremes of each channel are exact grid points
    for (int64_t ch = 0; ch < channels; ++ch) {
      float lo = v[ch];
      for (int64_t t = 1; t < tokens; ++t) lo = std::min(lo, v[t * channels + ch]);
      EXPECT_FLOAT_EQ(c.lo[ch], lo);
    }
  }
}

TEST(KvChunk, ConstantChannelsAndFewerBits) {
  std::vector<float> v(8 * 3, 0.25f);
  for (int t = 0; t < 8; ++t) v[t * 3 + 1] = static_cast<float>(t);
  const KvChunk c8 = compressChunk(v.data(), 8, 3, 8);
  const auto back = decompressChunk(c8);
  for (size_t i = 0; i < v.size(); ++i) {  // constant channels exact, the ramp within half a step
    if (i % 3 == 1) {
      EXPECT_NEAR(back[i], v[i], 0.5f * c8.step[1]) << i;
    } else {
      EXPECT_FLOAT_EQ(back[i], v[i]) << i;
    }
  }
  const KvChunk c2 = recompressChunk(c8, 2);
  EXPECT_EQ(c2.bits, 2);
  const auto two = decompressChunk(c2);
  EXPECT_FLOAT_EQ(two[0], 0.25f);
  EXPECT_NEAR(two[7 * 3 + 1], 7.0f, 1e-5);
  // Widths 32, 8, 4 and 2 only; at least one token and one channel.
  for (int bits : {0, 1, 3, 5, 16, 33}) EXPECT_THROW(compressChunk(v.data(), 8, 3, bits), Error) << bits;
  for (int bits : {2, 4, 8, 32}) EXPECT_EQ(compressChunk(v.data(), 8, 3, bits).bits, bits);
  EXPECT_THROW(compressChunk(v.data(), 0, 3, 8), Error);
  EXPECT_THROW(compressChunk(v.data(), 8, 0, 8), Error);
  EXPECT_EQ(compressChunk(v.data(), 1, 1, 8).codes.size(), 1u);
}

TEST(Tolerance, DensityIsMassOverTheRowsThatSeeEachToken) {
  // 4 tokens, 1 layer, 2 heads: token t is seen by 4 - t rows of each head.
  const std::vector<double> mass = {8, 6, 4, 2};
  const auto d = chunkDensities(mass, 2, 1, 2);
  ASSERT_EQ(d.size(), 2u);
  EXPECT_DOUBLE_EQ(d[0], (8.0 / (2 * 4) + 6.0 / (2 * 3)) / 2);
  EXPECT_DOUBLE_EQ(d[1], (4.0 / (2 * 2) + 2.0 / (2 * 1)) / 2);
  EXPECT_EQ(chunkDensities(mass, 3, 1, 1).size(), 2u);  // a short last chunk
  const auto each = chunkDensities(mass, 1, 1, 1);  // chunks of one token: each its own density
  ASSERT_EQ(each.size(), 4u);
  EXPECT_DOUBLE_EQ(each[1], 6.0 / 3);
  EXPECT_THROW(chunkDensities(mass, 0, 1, 1), Error);
  EXPECT_THROW(chunkDensities(mass, 2, 0, 1), Error);
  EXPECT_THROW(chunkDensities(mass, 2, 1, 0), Error);  // (no heads: a density of 0 / 0)
}

// The ratio is met, the densest chunks keep the most bits, and no allocation within the
// ratio has a smaller density-weighted error (checked against uniform widths, and every
// split of 4 chunks).
TEST(Tolerance, AllocationMeetsTheRatioWithTheLeastError) {
  auto loss = [](const std::vector<double>& d, const std::vector<int>& bits) {
    double l = 0;
    for (size_t i = 0; i < d.size(); ++i) l += d[i] / ((1 << bits[i]) - 1);
    return l;
  };
  std::mt19937 rng(3);
  std::exponential_distribution<double> skew(1.0);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<double> d(static_cast<size_t>(5 + trial));
    for (auto& x : d) x = skew(rng);
    for (double ratio : {0.25, 0.4, 0.5, 0.75, 1.0}) {
      const auto bits = allocateBits(d, ratio, {8, 4, 2});
      ASSERT_EQ(bits.size(), d.size());
      const double used = std::accumulate(bits.begin(), bits.end(), 0.0) / (8.0 * static_cast<double>(d.size()));
      EXPECT_LE(used, ratio + 1e-9);
      for (size_t i = 0; i < d.size(); ++i)
        for (size_t j = 0; j < d.size(); ++j) {
          if (d[i] > d[j]) {
            EXPECT_GE(bits[i], bits[j]) << "denser chunk with fewer bits";
          }
        }
      // the least loss of every allocation by rank (the densest chunks the most bits)
      // that keeps to the ratio, each loss summed chunk by chunk
      std::vector<size_t> rank(d.size());
      std::iota(rank.begin(), rank.end(), size_t{0});
      std::stable_sort(rank.begin(), rank.end(), [&](size_t a, size_t b) { return d[a] > d[b]; });
      double least = -1;
      for (size_t c8 = 0; c8 <= d.size(); ++c8)
        for (size_t c4 = 0; c8 + c4 <= d.size(); ++c4) {
          std::vector<int> b(d.size(), 2);
          for (size_t i = 0; i < c8 + c4; ++i) b[rank[i]] = i < c8 ? 8 : 4;
          if (std::accumulate(b.begin(), b.end(), 0.0) > ratio * 8.0 * static_cast<double>(d.size()) + 1e-9) continue;
          if (least < 0 || loss(d, b) < least) least = loss(d, b);
        }
      EXPECT_NEAR(loss(d, bits), least, 1e-12) << "trial " << trial << " ratio " << ratio;
      for (int w : {8, 4, 2}) {
        if (w / 8.0 <= ratio + 1e-9) {
          EXPECT_LE(loss(d, bits), loss(d, std::vector<int>(d.size(), w)) + 1e-12);
        }
      }
    }
  }
  const std::vector<double> d = {5, 1, 1, 1};
  EXPECT_EQ(allocateBits(d, 1.0, {8, 4, 2}), (std::vector<int>{8, 8, 8, 8}));
  EXPECT_EQ(allocateBits(d, 0.25, {8, 4, 2}), (std::vector<int>{2, 2, 2, 2}));
  const auto mid = allocateBits(d, 0.4375, {8, 4, 2});  // 14 bits of 32
  EXPECT_EQ(mid, (std::vector<int>{4, 4, 4, 2}));
  for (int a : {8, 4, 2})
    for (int b : {8, 4, 2})
      for (int c : {8, 4, 2})
        for (int e : {8, 4, 2}) {
          if (a + b + c + e <= 14) {
            EXPECT_LE(loss(d, mid), loss(d, {a, b, c, e}) + 1e-12);
          }
        }
  EXPECT_THROW(allocateBits(d, 0.2, {8, 4, 2}), Error);
  EXPECT_THROW(allocateBits(d, 0.5, {2, 4, 8}), Error);
  // The narrowest width's own ratio, computed with a rounding error of up to 1e-12 (as
  // 2.0 / 8 summed from parts is), is still taken; past that it is refused.
  EXPECT_EQ(allocateBits(d, 0.25 - 5e-13, {8, 4, 2}), (std::vector<int>{2, 2, 2, 2}));
  EXPECT_THROW(allocateBits(d, 0.25 - 5e-12, {8, 4, 2}), Error);
}

std::string tempDir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() / ("tl_ctxswap_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir.string();
}

TEST(ChunkFile, RoundTripAndEveryDefectDetected) {
  const auto v = chunkValues(16, 24, 5);
  const KvChunk c = compressChunk(v.data(), 16, 24, 4);
  const std::string dir = tempDir("file"), path = dir + "/chunk-3.kv";
  const ChunkId id{0x1234abcdull, 7, 3, 48};
  std::string error;
  ASSERT_TRUE(writeChunkFile(path, id, c, &error)) << error;
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  KvChunk back;
  ASSERT_EQ(readChunkFile(path, id, &back), ChunkRead::Ok);
  EXPECT_EQ(back.bits, 4);
  EXPECT_EQ(decompressChunk(back), decompressChunk(c));
  EXPECT_EQ(readChunkFile(dir + "/none.kv", id, &back), ChunkRead::Missing);
  EXPECT_EQ(readChunkFile(path, ChunkId{1, 7, 3, 48}, &back), ChunkRead::OtherModel);
  EXPECT_EQ(readChunkFile(path, ChunkId{id.model, 8, 3, 48}, &back), ChunkRead::Mismatch);
  EXPECT_EQ(readChunkFile(path, ChunkId{id.model, 7, 3, 32}, &back), ChunkRead::Mismatch);
  const auto size = std::filesystem::file_size(path);
  for (size_t at : {size_t{0}, size_t{20}, size_t{60}, static_cast<size_t>(size) - 20, static_cast<size_t>(size) - 1}) {
    ASSERT_TRUE(writeChunkFile(path, id, c, &error)) << error;
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(at));
    const char byte = static_cast<char>(f.get() ^ 0x10);
    f.seekp(static_cast<std::streamoff>(at));
    f.put(byte);
    f.close();
    EXPECT_EQ(readChunkFile(path, id, &back), ChunkRead::Corrupt) << "byte " << at << " flipped";
  }
  ASSERT_TRUE(writeChunkFile(path, id, c, &error)) << error;
  std::filesystem::resize_file(path, size - 9);
  EXPECT_EQ(readChunkFile(path, id, &back), ChunkRead::Corrupt) << "truncated";
  std::filesystem::remove_all(dir);
}

// Every width a chunk is stored at reads back as written; a header that names another width
// (3 bits, its sizes and checksum consistent with it) is corrupt, not read at that width, and
// so is one whose code bytes disagree with its width.
TEST(ChunkFile, EveryStoredWidthAndNoOther) {
  const auto v = chunkValues(16, 24, 11);
  const std::string dir = tempDir("widths"), path = dir + "/chunk-0.kv";
  const ChunkId id{5, 1, 0, 0};
  std::string error;
  KvChunk back;
  for (int bits : {32, 8, 4, 2}) {
    const KvChunk c = compressChunk(v.data(), 16, 24, bits);
    ASSERT_TRUE(writeChunkFile(path, id, c, &error)) << error;
    ASSERT_EQ(readChunkFile(path, id, &back), ChunkRead::Ok) << bits << " bits";
    EXPECT_EQ(back.bits, bits);
    EXPECT_EQ(decompressChunk(back), decompressChunk(c)) << bits << " bits";
  }
  ASSERT_TRUE(writeChunkFile(path, id, compressChunk(v.data(), 16, 24, 4), &error)) << error;
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  const uint32_t codeBytes = (16 * 24 * 3 + 7) / 8, header = 56 + 8 * 24;  // kHeader, then lo and step
  b.resize(header + codeBytes);  // the codes cut to 3 bits' size, the checksum made again below
  for (int i = 0; i < 4; ++i) {
    b[44 + i] = static_cast<uint8_t>(3u >> (8 * i));  // bits
    b[48 + i] = b[52 + i] = static_cast<uint8_t>(codeBytes >> (8 * i));  // code bytes, stored
  }
  ASSERT_TRUE(writeDurably(path, b, &error)) << error;
  EXPECT_EQ(readChunkFile(path, id, &back), ChunkRead::Corrupt);
  // At 4 bits, code and stored byte counts one off together, the file as long as they say:
  // the codes' bytes must be what tokens x channels x bits make.
  for (int delta : {1, -1}) {
    const uint32_t bytes4 = (16 * 24 * 4 + 7) / 8 + delta;
    for (int i = 0; i < 4; ++i) {
      b[44 + i] = static_cast<uint8_t>(4u >> (8 * i));
      b[48 + i] = b[52 + i] = static_cast<uint8_t>(bytes4 >> (8 * i));
    }
    b.resize(header + bytes4);
    ASSERT_TRUE(writeDurably(path, b, &error)) << error;
    EXPECT_EQ(readChunkFile(path, id, &back), ChunkRead::Corrupt) << "code bytes off by " << delta;
  }
  std::filesystem::remove_all(dir);
}

// zstd where the caller says it pays: an fp32 chunk of a smooth signal is written as a
// zstd frame of its codes, reads back the same and is smaller; told it never pays, the same
// chunk is written raw. A frame that does not give the codes is corrupt even under a
// checksum that matches it.
TEST(ChunkFile, CompressedWhereItPays) {
  std::vector<float> v(16 * 24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i % 24) * 0.25f;  // repeats: compresses
  const KvChunk c = compressChunk(v.data(), 16, 24, 32);
  const std::string dir = tempDir("zstd"), path = dir + "/chunk-0.kv";
  const ChunkId id{9, 1, 0, 0};
  std::string error;
  size_t asked = 0;
  ASSERT_TRUE(writeChunkFile(path, id, c, &error, [&](size_t raw, size_t packed) {
    asked = raw;
    return packed < raw;
  })) << error;
  EXPECT_EQ(asked, c.codes.size());
  const auto packedSize = std::filesystem::file_size(path);
  KvChunk back;
  ASSERT_EQ(readChunkFile(path, id, &back), ChunkRead::Ok);
  EXPECT_EQ(decompressChunk(back), v);
  ASSERT_TRUE(writeChunkFile(path, id, c, &error, [](size_t, size_t) { return false; })) << error;
  const auto rawSize = std::filesystem::file_size(path);
  EXPECT_LT(packedSize + c.codes.size() / 2, rawSize);
  ASSERT_TRUE(writeChunkFile(path, id, c, &error)) << error;
  EXPECT_EQ(std::filesystem::file_size(path), rawSize);
  // the frame's last byte changed, the checksum made again over the changed bytes
  ASSERT_TRUE(writeChunkFile(path, id, c, &error, [](size_t, size_t) { return true; })) << error;
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  in.close();
  b.resize(b.size() - 8);
  b.back() ^= 0x55;
  ASSERT_TRUE(writeDurably(path, b, &error)) << error;
  EXPECT_EQ(readChunkFile(path, id, &back), ChunkRead::Corrupt);
  std::filesystem::remove_all(dir);
}

// A group commit: no file is at its name before commit(), every one is after (a path
// added twice holds the second bytes), and one that cannot be renamed (its name is a
// directory) is reported by path and left as it was, the others committed; a group
// dropped uncommitted leaves neither files nor temporaries.
TEST(DurableWrites, CommitsTheGroupTogether) {
  const std::string dir = tempDir("group");
  std::filesystem::create_directory(dir + "/taken");
  std::ofstream(dir + "/taken/x") << "x";
  std::string error;
  std::vector<uint8_t> back;
  bool missing = false;
  {
    DurableWrites w;
    EXPECT_EQ(w.add(dir + "/a", {1, 2, 3}, &error), 3u + 8u) << error;  // the bytes and their checksum
    EXPECT_TRUE(w.add(dir + "/b", {4}, &error)) << error;
    EXPECT_TRUE(w.add(dir + "/a", {5, 6}, &error)) << error;
    EXPECT_TRUE(w.add(dir + "/taken", {7}, &error)) << error;
    EXPECT_FALSE(std::filesystem::exists(dir + "/a"));
    EXPECT_FALSE(readDurably(dir + "/b", &back, &missing));
    EXPECT_TRUE(missing);
    const auto failed = w.commit();
    ASSERT_EQ(failed.size(), 1u);
    EXPECT_EQ(failed[0].first, dir + "/taken");
    EXPECT_NE(failed[0].second.find(dir + "/taken: cannot rename"), std::string::npos) << failed[0].second;
    ASSERT_TRUE(readDurably(dir + "/a", &back, &missing));
    EXPECT_EQ(back, (std::vector<uint8_t>{5, 6}));
    ASSERT_TRUE(readDurably(dir + "/b", &back, &missing));
    EXPECT_EQ(back, std::vector<uint8_t>{4});
    EXPECT_TRUE(std::filesystem::is_directory(dir + "/taken"));
    EXPECT_TRUE(w.commit().empty());  // nothing added since
  }
  {
    DurableWrites w;
    EXPECT_TRUE(w.add(dir + "/c", {8}, &error)) << error;
  }
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "taken"}));
  std::filesystem::remove_all(dir);
}

// A swap directory that refuses the write (missing, or not a directory: what a full or
// read-only disk looks like to the caller): false and a line naming the file, nothing
// thrown, no temporary file left.
TEST(ChunkFile, RefusedWriteIsAnErrorNotACrash) {
  const auto v = chunkValues(16, 4, 9);
  const KvChunk c = compressChunk(v.data(), 16, 4, 8);
  const std::string dir = tempDir("refused"), file = dir + "/not-a-dir";
  std::ofstream(file) << "x";
  for (const std::string& path : {file + "/c.kv", dir + "/missing/c.kv"}) {
    std::string error;
    EXPECT_FALSE(writeChunkFile(path, ChunkId{}, c, &error)) << path;
    EXPECT_NE(error.find(path + ": cannot create"), std::string::npos) << error;
  }
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 1);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tl

namespace tl {
namespace {

TEST(Trace, ReproducibleAndPoisson) {
  TraceOptions opt;
  opt.contexts = 6;
  opt.calls = 4000;
  opt.rate = 0.5;
  const std::vector<int64_t> texts = {5000, 300};
  const auto a = synthesizeTrace(opt, texts), b = synthesizeTrace(opt, texts);
  ASSERT_EQ(a.size(), 4000u);
  EXPECT_EQ(traceText(opt, a), traceText(opt, b));
  opt.seed = 2;
  EXPECT_NE(traceText(opt, synthesizeTrace(opt, texts)), traceText(opt, a));
  EXPECT_NEAR(a.back().time / 4000, 2.0, 0.1);  // mean gap 1 / rate
  std::vector<int64_t> at(6, -1);
  for (const auto& c : a) {
    const TaskLength& t = llmsTasks()[c.context];  // context c has task c here
    EXPECT_GE(c.length, t.lo);
    EXPECT_LE(c.length, t.hi);
    EXPECT_EQ(c.text, c.context % 2);
    if (at[c.context] >= 0) {
      EXPECT_EQ(c.offset, at[c.context]) << "a context reads its text in consecutive slices";
    }
    at[c.context] = (c.offset + c.length) % texts[c.text];
  }
}

// How often a call stays with the context before it, and how often each context comes.
std::vector<double> shares(const std::vector<TraceCall>& calls, int64_t contexts, double* stay) {
  std::vector<double> s(static_cast<size_t>(contexts), 0.0);
  int64_t same = 0;
  for (size_t i = 0; i < calls.size(); ++i) {
    s[calls[i].context] += 1.0 / static_cast<double>(calls.size());
    if (i && calls[i].context == calls[i - 1].context) ++same;
  }
  *stay = static_cast<double>(same) / static_cast<double>(calls.size() - 1);
  return s;
}

TEST(Trace, PatternsShapeWhoIsCalled) {
  TraceOptions opt;
  opt.contexts = 6;
  opt.calls = 6000;
  double stay = 0;
  for (double s : shares(synthesizeTrace(opt, {1000}), 6, &stay)) EXPECT_NEAR(s, 1.0 / 6, 0.03);
  EXPECT_NEAR(stay, 1.0 / 6, 0.03);
  opt.pattern = SwitchPattern::Markov;
  shares(synthesizeTrace(opt, {1000}), 6, &stay);
  EXPECT_GT(stay, 0.3) << "the last context is the likeliest next";
  opt.pattern = SwitchPattern::Gaussian;  // tasks' mean deltas 350, 1500, 200, 750, 300, 55
  const auto g = shares(synthesizeTrace(opt, {1000}), 6, &stay);
  EXPECT_GT(g[0], g[1]) << "the moderate workload comes more than the largest";
  EXPECT_GT(g[3], g[1]);
  EXPECT_GT(g[0], g[5]) << "and more than the smallest";
}

TEST(Trace, FileRoundTripAndBadLines) {
  TraceOptions opt;
  opt.calls = 50;
  opt.scale = 0.1;
  const auto calls = synthesizeTrace(opt, {100000});
  for (const auto& c : calls) EXPECT_LE(c.length, 200);  // scaled
  const auto back = parseTrace(traceText(opt, calls));
  ASSERT_EQ(back.size(), calls.size());
  for (size_t i = 0; i < calls.size(); ++i) {
    EXPECT_NEAR(back[i].time, calls[i].time, 5e-4);
    EXPECT_EQ(back[i].context, calls[i].context);
    EXPECT_EQ(back[i].offset, calls[i].offset);
    EXPECT_EQ(back[i].length, calls[i].length);
  }
  const std::string head = "# tl-ctxswap trace 1 pattern=random\n";
  for (const std::string& bad : {head + "1.0\t0\t0\t0\t5\n0.5\t1\t0\t0\t5\t1\n", head + "1.0\t0\t0\t0\t0\t1\n",
                                 head + "1.0\t0\t0\t0\t5\t1\textra\n", std::string("1.0\t0\t0\t0\t5\t1\n"), std::string()}) {
    try {
      parseTrace(bad);
      ADD_FAILURE() << "accepted: " << bad;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::BadInput) << e.what();
      EXPECT_NE(std::string(e.what()).find("line"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW(parsePattern("zipf"), Error);
}

}  // namespace
}  // namespace tl

namespace tl {
namespace {

TEST(ChunkMemory, LctruOrderLocksAndTheBudget) {
  ChunkMemory m(1000);
  m.claim({1, 0}, 200, 8);
  m.claim({1, 1}, 100, 4);
  m.claim({2, 0}, 200, 8);
  m.claim({2, 1}, 50, 2);
  m.claim({3, 0}, 100, 4);
  EXPECT_EQ(m.used(), 650u);
  m.touch({1, 0});  // now the most recent 8-bit chunk
  std::vector<ChunkKey> out;
  ASSERT_TRUE(m.reclaim(350, &out));  // 1000 - 650 = 350 free already
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(m.reclaim(500, &out));  // 150 more: the least recent 8-bit chunk
  EXPECT_EQ(out, (std::vector<ChunkKey>{{2, 0}}));
  ASSERT_TRUE(m.reclaim(700, &out));  // 350 more: both 8-bit chunks, then
  EXPECT_EQ(out, (std::vector<ChunkKey>{{2, 0}, {1, 0}}));
  ASSERT_TRUE(m.reclaim(800, &out));  // 450 more: then the least recent 4-bit one
  EXPECT_EQ(out, (std::vector<ChunkKey>{{2, 0}, {1, 0}, {1, 1}}));
  m.lock(1);  // a call runs on context 1: its chunks stay
  ASSERT_TRUE(m.reclaim(700, &out));  // 350 more: every other chunk, heaviest and oldest first
  EXPECT_EQ(out, (std::vector<ChunkKey>{{2, 0}, {3, 0}, {2, 1}}));
  EXPECT_FALSE(m.reclaim(800, &out));  // 1's 300 bytes are locked
  EXPECT_TRUE(out.empty());
  m.unlock(1);
  EXPECT_TRUE(m.reclaim(1000, &out));
  EXPECT_EQ(out.size(), 5u);
  EXPECT_FALSE(m.reclaim(1001, &out));
  EXPECT_THROW(m.claim({4, 0}, 400, 8), Error);  // over the budget until reclaimed
  EXPECT_EQ(m.used(), 650u);
  m.release({2, 0});
  m.release({2, 0});  // twice is harmless
  m.claim({4, 0}, 400, 8);
  EXPECT_EQ(m.used(), 850u);
  m.claim({4, 0}, 100, 2);  // recompressed in place
  EXPECT_EQ(m.used(), 550u);
  EXPECT_TRUE(m.holds({4, 0}));
  EXPECT_FALSE(m.holds({2, 0}));
}

}  // namespace
}  // namespace tl

namespace tl {
namespace {

TEST(LoadPlan, RecomputesTheHeaviestChunksForTheShortestLoad) {
  const LinearCost line = fitLinear({1, 2, 4}, {3, 5, 9});  // 1 + 2x
  EXPECT_NEAR(line.fixed, 1, 1e-12);
  EXPECT_NEAR(line.per, 2, 1e-12);
  EXPECT_THROW(fitLinear({1, 1}, {2, 3}), Error);
  // reads at 1 s a byte, recompute 3 s a chunk: chunks of 8, 2, 4, 2 bytes (16 to read)
  const std::vector<size_t> bytes = {8, 2, 4, 2};
  const LoadPlan p = planLoad(bytes, {0, 3}, {0, 1});
  // recompute the 8-byte chunk (3 s) while reading 8 bytes (8 s); the 8 and 4 (6 s, 4 s):
  // 6 s; three (9 s, 2 s): 9 s. Best: two.
  EXPECT_EQ(p.recompute, (std::vector<bool>{true, false, true, false}));
  EXPECT_DOUBLE_EQ(p.seconds, 6);
  // against every split, none is faster
  for (int mask = 0; mask < 16; ++mask) {
    double re = 0, io = 0;
    for (int i = 0; i < 4; ++i) (mask >> i & 1 ? re : io) += mask >> i & 1 ? 1 : static_cast<double>(bytes[i]);
    EXPECT_GE(std::max(3 * re, io) + 1e-12, p.seconds) << mask;
  }
  // a slow processor reads everything; a slow disk recomputes everything
  EXPECT_EQ(planLoad(bytes, {0, 100}, {0, 1}).recompute, std::vector<bool>(4, false));
  EXPECT_EQ(planLoad(bytes, {0, 0.1}, {5, 10}).recompute, std::vector<bool>(4, true));
  EXPECT_DOUBLE_EQ(planLoad({}, {1, 1}, {1, 1}).seconds, 0);
}

}  // namespace
}  // namespace tl

namespace tl {
namespace {

// A restart finds every context whose record is whole and this model's; a damaged record
// and another model's are passed over, each named; a temporary file a crash left, and
// files not ours, are ignored.
TEST(ContextLog, RecoveryAfterACrash) {
  const std::string dir = tempDir("log");
  std::string error;
  const ContextRecord a{3, "uid:1000", {104, 105, 33}}, b{7, "uid:1001", {}}, c{9, "uid:1000", {1, 2}};
  ASSERT_TRUE(writeContextRecord(dir, 42, a, &error)) << error;
  ASSERT_TRUE(writeContextRecord(dir, 42, b, &error)) << error;
  ASSERT_TRUE(writeContextRecord(dir, 42, c, &error)) << error;
  ASSERT_TRUE(writeContextRecord(dir, 43, ContextRecord{11, "x", {5}}, &error)) << error;  // another model
  {
    std::fstream f(contextLogPath(dir, 9), std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(30);
    f.put('\x7f');
  }
  std::ofstream(dir + "/ctx-12.log.tmp") << "half a record";
  std::ofstream(dir + "/notes.txt") << "not ours";
  std::vector<std::string> skipped;
  const auto got = recoverContexts(dir, 42, &skipped);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].id, 3u);
  EXPECT_EQ(got[0].owner, "uid:1000");
  EXPECT_EQ(got[0].tokens, a.tokens);
  EXPECT_EQ(got[1].id, 7u);
  EXPECT_TRUE(got[1].tokens.empty());
  EXPECT_EQ(skipped, (std::vector<std::string>{"ctx-11.log: another model's", "ctx-9.log: checksum mismatch"}));
  EXPECT_EQ(chunkFilePath(dir, 3, 2), dir + "/ctx-3-chunk-2.kv");
  EXPECT_THROW(recoverContexts(dir + "/none", 42, &skipped), Error);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tl
