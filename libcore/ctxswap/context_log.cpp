#include "ctxswap/context_log.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "cli/error.h"
#include "ctxswap/durable_file.h"

namespace tl {

namespace {

constexpr char kMagic[8] = {'T', 'L', 'C', 'T', 'X', 'L', 'G', '1'};
constexpr uint32_t kVersion = 1;

}  // namespace

std::string contextLogPath(const std::string& dir, uint64_t id) { return dir + "/ctx-" + std::to_string(id) + ".log"; }

std::string chunkFilePath(const std::string& dir, uint64_t id, uint32_t index) {
  return dir + "/ctx-" + std::to_string(id) + "-chunk-" + std::to_string(index) + ".kv";
}

std::vector<uint8_t> contextRecordBytes(uint64_t model, const ContextRecord& r) {
  std::vector<uint8_t> b(kMagic, kMagic + 8);
  putLE(b, kVersion);
  putLE(b, model);
  putLE(b, r.id);
  putLE(b, static_cast<uint32_t>(r.owner.size()));
  b.insert(b.end(), r.owner.begin(), r.owner.end());
  putLE(b, static_cast<uint32_t>(r.tokens.size()));
  for (int64_t t : r.tokens) putLE(b, static_cast<int32_t>(t));
  return b;
}

bool writeContextRecord(const std::string& dir, uint64_t model, const ContextRecord& r, std::string* error) {
  return writeDurably(contextLogPath(dir, r.id), contextRecordBytes(model, r), error);
}

std::vector<ContextRecord> recoverContexts(const std::string& dir, uint64_t model, std::vector<std::string>* skipped) {
  std::error_code ec;
  std::filesystem::directory_iterator it(dir, ec);
  if (ec) throw Error(dir + ": cannot read the swap directory: " + ec.message(), ExitCode::BadInput);
  std::vector<ContextRecord> out;
  for (const auto& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("ctx-", 0) != 0 || name.size() < 9 || name.compare(name.size() - 4, 4, ".log") != 0) continue;
    std::vector<uint8_t> b;
    bool missing = false;
    auto skip = [&](const std::string& why) { skipped->push_back(name + ": " + why); };
    if (!readDurably(entry.path().string(), &b, &missing)) {
      skip(missing ? "unreadable" : "checksum mismatch");
      continue;
    }
    if (b.size() < 36 || std::memcmp(b.data(), kMagic, 8) != 0 || getLE<uint32_t>(b.data() + 8) != kVersion) {
      skip("not a version 1 context record");
      continue;
    }
    if (getLE<uint64_t>(b.data() + 12) != model) {
      skip("another model's");
      continue;
    }
    ContextRecord r;
    r.id = getLE<uint64_t>(b.data() + 20);
    const size_t owner = getLE<uint32_t>(b.data() + 28);
    if (32 + owner + 4 > b.size()) {
      skip("truncated");
      continue;
    }
    r.owner.assign(reinterpret_cast<const char*>(b.data() + 32), owner);
    const size_t count = getLE<uint32_t>(b.data() + 32 + owner);
    if (36 + owner + 4 * count != b.size() || name != "ctx-" + std::to_string(r.id) + ".log") {
      skip("sizes or id do not match");
      continue;
    }
    for (size_t i = 0; i < count; ++i) r.tokens.push_back(getLE<int32_t>(b.data() + 36 + owner + 4 * i));
    out.push_back(std::move(r));
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  std::sort(skipped->begin(), skipped->end());
  return out;
}

}  // namespace tl
