#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <fmt/format.h>
#include <map>

#include "bench/timing.h"
#include "cli/error.h"

namespace tl {
namespace {

// ---- one table, four formats ----

// A cell: how md shows it and the JSON literal (number, string, array or null) that
// csv, json and jsonl write.
struct Cell {
  std::string md, json;
};

struct Table {
  std::vector<std::string> keys, headers;
  std::vector<std::vector<Cell>> rows;
};

std::string quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += fmt::format("\\u{:04x}", static_cast<int>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string jsonNumber(double v) { return std::isfinite(v) ? fmt::format("{}", v) : "null"; }

Cell text(const std::string& s) { return {s, quote(s)}; }
Cell integer(int64_t v) { return {std::to_string(v), std::to_string(v)}; }
// md shows `digits` decimals; "-" where unknown.
Cell number(double v, int digits) { return {std::isfinite(v) ? fmt::format("{:.{}f}", v, digits) : "-", jsonNumber(v)}; }
Cell bytes(double v) {
  std::string md = "-";
  if (std::isfinite(v))
    md = v >= 1e9 ? fmt::format("{:.2f} GB", v / 1e9) : v >= 1e6 ? fmt::format("{:.2f} MB", v / 1e6)
                                                                 : fmt::format("{:.1f} kB", v / 1e3);
  return {md, jsonNumber(v)};
}
Cell array(const std::vector<double>& v) {
  std::string s = "[";
  for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + jsonNumber(v[i]);
  return {"", s + "]"};
}

std::string csvField(const Cell& c) {
  if (c.json.size() >= 2 && c.json.front() == '"') {  // a string: the JSON value, unescaped
    std::string raw;
    for (size_t i = 1; i + 1 < c.json.size(); ++i) {
      if (c.json[i] == '\\') ++i;
      raw += c.json[i];
    }
    if (raw.find_first_of(",\"\n") == std::string::npos) return raw;
    std::string out = "\"";
    for (char ch : raw) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return out + "\"";
  }
  if (!c.json.empty() && c.json.front() == '[') {  // an array: values separated by ';'
    std::string s = c.json.substr(1, c.json.size() - 2);
    std::replace(s.begin(), s.end(), ',', ';');
    return s;
  }
  return c.json == "null" ? "" : c.json;
}

std::string jsonObject(const Table& t, const std::vector<Cell>& row) {
  std::string s = "{";
  for (size_t i = 0; i < t.keys.size(); ++i) s += (i ? ", " : "") + quote(t.keys[i]) + ": " + row[i].json;
  return s + "}";
}

std::string render(const Table& t, BenchFormat f) {
  std::string s;
  switch (f) {
    case BenchFormat::Md: {
      std::vector<size_t> shown;  // arrays are for machines
      for (size_t i = 0; i < t.keys.size(); ++i)
        if (!t.headers[i].empty()) shown.push_back(i);
      auto line = [&](auto cell) {
        s += "|";
        for (size_t i : shown) s += " " + cell(i) + " |";
        s += "\n";
      };
      line([&](size_t i) { return t.headers[i]; });
      // Numbers right-aligned, text left, judged by the first row.
      line([&](size_t i) {
        const std::string& j = t.rows.empty() ? std::string() : t.rows.front()[i].json;
        return std::string(!j.empty() && j.front() == '"' ? ":---" : "---:");
      });
      for (const auto& r : t.rows) line([&](size_t i) { return r[i].md; });
      return s;
    }
    case BenchFormat::Csv:
      for (size_t i = 0; i < t.keys.size(); ++i) s += (i ? "," : "") + t.keys[i];
      s += "\n";
      for (const auto& r : t.rows) {
        for (size_t i = 0; i < r.size(); ++i) s += (i ? "," : "") + csvField(r[i]);
        s += "\n";
      }
      return s;
    case BenchFormat::Json:
      s = "[";
      for (size_t i = 0; i < t.rows.size(); ++i) s += std::string(i ? ",\n  " : "\n  ") + jsonObject(t, t.rows[i]);
      return s + (t.rows.empty() ? "]" : "\n]");
    case BenchFormat::Jsonl:
      for (const auto& r : t.rows) s += jsonObject(t, r) + "\n";
      return s;
  }
  return s;
}

// ---- the three tables ----

Table probeTable(const DeviceProbe& p) {
  Table t;
  t.keys = {"device", "buffer_mib", "copy_gbs", "read_gbs", "fp32_gflops", "fp16_gflops", "tensor_gflops", "launch_us",
            "round_trip_us"};
  t.headers = {"device", "buffer", "copy GB/s (r+w)", "read GB/s", "fp32 GFLOP/s", "fp16 GFLOP/s", "tensor-core GFLOP/s",
               "launch µs", "round trip µs"};
  t.rows.push_back({text(p.device), {fmt::format("{:.0f} MiB", p.bufferMiB), jsonNumber(p.bufferMiB)},
                    number(p.copyGBs, 1), number(p.readGBs, 1), number(p.fp32Gflops, 0),
                    p.fp16Gflops > 0 ? number(p.fp16Gflops, 0) : number(kUnknown, 0),
                    p.tensorGflops > 0 ? number(p.tensorGflops, 0) : number(kUnknown, 0), number(p.launchUs, 2),
                    number(p.roundTripUs, 1)});
  return t;
}

double ratio(double a, double b) { return b > 0 ? a / b : kUnknown; }

Table rowsTable(const BenchReport& r) {
  Table t;
  t.keys = {"model", "engine", "test", "t_s", "weight_bytes", "bytes_per_token", "gbs", "bw_pct", "gflops",
            "peak_pct", "kernels_per_step", "device_ms_per_step", "host_ms_per_step", "enqueue_ms_per_step", "own_ms_per_step", "kv_bytes", "activation_bytes",
            "device", "n_prompt", "n_gen",
            "n_depth", "n_batch", "bind", "reps", "avg_ts", "stddev_ts", "samples_ts", "flops_per_token", "bw_ceiling_gbs",
            "fp32_peak_gflops", "spec", "spec_taken", "spec_tokens_per_step", "spec_speedup"};
  t.headers = {"model", "engine", "test", "t/s", "weights", "bytes/token", "GB/s", "% BW", "GFLOP/s", "% peak",
               "kernels/step", "device ms/step", "host ms/step", "enqueue ms/step", "tl ms/step", "KV", "activations"};
  t.headers.resize(t.keys.size());  // the rest only in csv and json
  const double bw = r.probe ? r.probe->bandwidthGBs() : kUnknown, peak = r.probe ? r.probe->fp32Gflops : kUnknown;
  for (const auto& row : r.rows) {
    const double ts = mean(row.samplesTs), sd = stddev(row.samplesTs);
    const double gbs = row.bytesPerToken * ts / 1e9, gflops = row.flopsPerToken * ts / 1e9;
    const Cell test{row.bind.empty() ? row.test : row.test + "@" + row.bind, quote(row.test)};
    // A batch's rate is its sequences' together; the md cell adds one sequence's.
    // A speculative row's adds its speedup over the plain row, the drafts taken, tokens a step.
    std::string rate = fmt::format("{:.2f} ± {:.2f}", ts, sd);
    if (row.batch > 1) rate += fmt::format(" ({:.2f} a sequence)", ts / static_cast<double>(row.batch));
    if (!row.spec.empty())
      rate += " (" + (std::isnan(row.specSpeedup) ? std::string() : fmt::format("{:.2f}x plain, ", row.specSpeedup)) +
              (std::isnan(row.specTaken) ? std::string("nothing drafted") : fmt::format("{:.0f}% of drafts taken", 100 * row.specTaken)) +
              fmt::format(", {:.2f} tokens a step)", row.specTokensPerStep);
    t.rows.push_back({text(row.model), text(row.engine), test, {rate, jsonNumber(ts)}, bytes(row.weightBytes),
                      bytes(row.bytesPerToken), number(gbs, 1), number(100 * ratio(gbs, bw), 1), number(gflops, 1),
                      number(100 * ratio(gflops, peak), 1), number(row.kernelsPerStep, 0),
                      number(row.deviceMsPerStep, 3), number(row.hostMsPerStep, 3),
                      number(row.enqueueMsPerStep, 3), number(row.ownMsPerStep, 3), bytes(row.kvBytes),
                      bytes(row.activationBytes), text(row.device),
                      integer(row.prompt), integer(row.gen), integer(row.depth), integer(row.batch), text(row.bind),
                      integer(static_cast<int64_t>(row.samplesTs.size())), number(ts, 3), number(sd, 3),
                      array(row.samplesTs), number(row.flopsPerToken, 0), number(bw, 1), number(peak, 1), text(row.spec),
                      number(row.specTaken, 4), number(row.specTokensPerStep, 3), number(row.specSpeedup, 3)});
  }
  return t;
}

Table kernelsTable(const KernelTable& k, const std::optional<DeviceProbe>& probe) {
  Table t;
  t.keys = {"k", "n", "scheme", "group", "median_ms", "q1_ms", "q3_ms", "gbs", "bw_pct", "runs", "bytes", "samples_ms"};
  const size_t runs = k.rows.empty() ? 0 : k.rows.front().ms.size();
  t.headers = {"K", "N", "scheme", "group", fmt::format("kernel ms (median of {})", runs), "q1 ms", "q3 ms", "GB/s",
               "% BW", "", "", ""};
  const double bw = probe ? probe->bandwidthGBs() : kUnknown;
  for (const auto& row : k.rows) {
    const double ms = median(row.ms), gbs = row.bytes / (ms * 1e-3) / 1e9;
    t.rows.push_back({integer(row.K), integer(row.N), text(row.scheme), integer(row.group), number(ms, 4),
                      number(quantile(row.ms, 0.25), 4), number(quantile(row.ms, 0.75), 4), number(gbs, 1),
                      number(100 * ratio(gbs, bw), 1), integer(static_cast<int64_t>(row.ms.size())),
                      number(row.bytes, 0), array(row.ms)});
  }
  return t;
}

// Each row judged against its path's peak: the tensor cores', fp16's for CLBlast's HGEMM,
// else fp32 FMA.
Table gemmTable(const KernelTable& k, const std::optional<DeviceProbe>& probe) {
  Table t;
  t.keys = {"k", "n", "m", "scheme", "path", "kernels", "median_ms", "gflops", "peak_pct", "runs", "samples_ms"};
  const size_t runs = k.rows.empty() ? 0 : k.rows.front().ms.size();
  t.headers = {"K", "N", "M", "scheme", "path", "kernels", fmt::format("ms (median of {})", runs), "GFLOP/s", "% peak",
               "", ""};
  for (const auto& row : k.rows) {
    const double ms = median(row.ms), gflops = row.flops / (ms * 1e-3) / 1e9;
    // (the f16 mma peak for the int8 rows too: their int8 peak is not probed)
    const bool tensor = row.path == GemmPath::TensorCores || row.path == GemmPath::TensorCoresF16 ||
                        row.path == GemmPath::TensorCoresInTile;
    const double peak = !probe                                 ? kUnknown
                        : tensor                             ? probe->tensorGflops
                        : row.path == GemmPath::ClblastHgemm ? probe->fp16Gflops
                                                             : probe->fp32Gflops;
    t.rows.push_back({integer(row.K), integer(row.N), integer(row.M), text(row.scheme), text(gemmPathName(row.path)),
                      text(row.kernels), number(ms, 4),
                      number(gflops, 0), number(peak > 0 ? 100 * gflops / peak : kUnknown, 1),
                      integer(static_cast<int64_t>(row.ms.size())), array(row.ms)});
  }
  return t;
}

// ---- reading peers' jsonl: flat objects of strings, numbers, null and number arrays ----

struct JsonValue {
  enum Kind { Null, Number, String, Array } kind = Null;
  double number = 0;
  std::string string;
  std::vector<double> array;
};

class FlatJson {
 public:
  explicit FlatJson(const std::string& s) : s_(s) {}
  std::map<std::string, JsonValue> object() {
    std::map<std::string, JsonValue> out;
    expect('{');
    if (peek() == '}') return ++i_, out;
    for (;;) {
      std::string key = str();
      expect(':');
      out[key] = value();
      if (peek() == ',') {
        ++i_;
        continue;
      }
      expect('}');
      break;
    }
    if (peek() != '\0') fail("text after the object");
    return out;
  }

 private:
  char peek() {
    while (i_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[i_]))) ++i_;
    return i_ < s_.size() ? s_[i_] : '\0';
  }
  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  [[noreturn]] void fail(const std::string& what) { throw Error(what + " at column " + std::to_string(i_ + 1)); }
  std::string str() {
    expect('"');
    std::string out;
    while (i_ < s_.size() && s_[i_] != '"') {
      if (s_[i_] == '\\' && i_ + 1 < s_.size()) ++i_;
      out += s_[i_++];
    }
    expect('"');
    return out;
  }
  double num() {
    peek();
    const char* begin = s_.c_str() + i_;
    char* end = nullptr;
    const double v = std::strtod(begin, &end);
    if (end == begin) fail("expected a value");
    i_ += static_cast<size_t>(end - begin);
    return v;
  }
  JsonValue value() {
    JsonValue v;
    const char c = peek();
    if (c == '"') {
      v.kind = JsonValue::String;
      v.string = str();
    } else if (c == '[') {
      ++i_;
      v.kind = JsonValue::Array;
      if (peek() == ']') return ++i_, v;
      for (;;) {
        v.array.push_back(num());
        if (peek() == ',') {
          ++i_;
          continue;
        }
        expect(']');
        break;
      }
    } else if (s_.compare(i_, 4, "null") == 0) {
      i_ += 4;
    } else {
      v.kind = JsonValue::Number;
      v.number = num();
    }
    return v;
  }
  const std::string& s_;
  size_t i_ = 0;
};

// ---- the roofline picture ----

struct Point {
  double x, y;
  std::string label, engine;
};

std::string esc(const std::string& s) {
  std::string out;
  for (char c : s) out += c == '<' ? "&lt;" : c == '>' ? "&gt;" : c == '&' ? "&amp;" : std::string(1, c);
  return out;
}

}  // namespace

std::optional<BenchFormat> benchFormatNamed(const std::string& name) {
  if (name == "md") return BenchFormat::Md;
  if (name == "csv") return BenchFormat::Csv;
  if (name == "json") return BenchFormat::Json;
  if (name == "jsonl") return BenchFormat::Jsonl;
  return std::nullopt;
}

std::string renderReport(const BenchReport& r, BenchFormat f) {
  std::vector<std::string> notes;  // the GEMV table's, then the GEMM table's
  for (const auto* k : {&r.kernels, &r.gemm})
    if (*k) notes.insert(notes.end(), (*k)->notes.begin(), (*k)->notes.end());
  std::vector<std::pair<std::string, Table>> parts;
  if (r.probe) parts.push_back({"probe", probeTable(*r.probe)});
  if (!r.rows.empty()) parts.push_back({"rows", rowsTable(r)});
  if (r.kernels) parts.push_back({"kernels", kernelsTable(*r.kernels, r.probe)});
  if (r.gemm) parts.push_back({"gemm", gemmTable(*r.gemm, r.probe)});
  std::string s;
  if (f == BenchFormat::Json) {
    s = "{";
    for (size_t i = 0; i < parts.size(); ++i) {
      const Table& t = parts[i].second;
      s += (i ? ",\n" : "\n") + quote(parts[i].first) + ": " +
           (parts[i].first == "probe" ? jsonObject(t, t.rows.front()) : render(t, f));
    }
    if (r.kernels || r.gemm) {
      s += ",\n\"notes\": [";
      for (size_t i = 0; i < notes.size(); ++i) s += (i ? ", " : "") + quote(notes[i]);
      s += "]";
    }
    return s + "\n}\n";
  }
  for (size_t i = 0; i < parts.size(); ++i) {
    // csv and jsonl stay one table, so the probe is there only alone; its numbers ride
    // on every row.
    if ((f == BenchFormat::Jsonl || f == BenchFormat::Csv) && parts[i].first == "probe" && parts.size() > 1) continue;
    if (!s.empty()) s += "\n";
    s += render(parts[i].second, f);
  }
  if (f == BenchFormat::Md && !notes.empty()) {
    s += "\n";
    for (const auto& n : notes) s += n + "\n";
  }
  return s;
}

std::vector<BenchRow> parseRows(const std::string& jsonl, const std::string& source) {
  std::vector<BenchRow> rows;
  size_t lineNo = 0, pos = 0;
  while (pos < jsonl.size()) {
    size_t end = jsonl.find('\n', pos);
    if (end == std::string::npos) end = jsonl.size();
    const std::string line = jsonl.substr(pos, end - pos);
    pos = end + 1;
    ++lineNo;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = source + ": line " + std::to_string(lineNo) + ": ";
    std::map<std::string, JsonValue> o;
    try {
      o = FlatJson(line).object();
    } catch (const Error& e) {
      throw Error(where + "not a JSON object: " + e.what());
    }
    auto need = [&](const char* key, JsonValue::Kind kind) -> const JsonValue& {
      auto it = o.find(key);
      if (it == o.end() || it->second.kind != kind)
        throw Error(where + "needs \"" + key + "\" as a " + (kind == JsonValue::String ? "string" : kind == JsonValue::Array ? "number array" : "number"));
      return it->second;
    };
    BenchRow row;
    row.engine = need("engine", JsonValue::String).string;
    row.prompt = static_cast<int64_t>(need("n_prompt", JsonValue::Number).number);
    row.gen = static_cast<int64_t>(need("n_gen", JsonValue::Number).number);
    row.depth = static_cast<int64_t>(need("n_depth", JsonValue::Number).number);
    row.samplesTs = need("samples_ts", JsonValue::Array).array;
    if (auto it = o.find("n_batch"); it != o.end() && it->second.kind == JsonValue::Number)
      row.batch = static_cast<int64_t>(it->second.number);
    if ((row.prompt > 0) == (row.gen > 0) || row.depth < 0 || row.samplesTs.empty() || row.batch < 1 ||
        (row.batch > 1 && row.prompt > 0))
      throw Error(where + "a row is one test: n_prompt or n_gen above 0, a depth, at least one sample, and a batch "
                  "(n_batch, absent: 1) of at least 1, above 1 for n_gen only");
    if (auto it = o.find("device"); it != o.end() && it->second.kind == JsonValue::String) row.device = it->second.string;
    if (auto it = o.find("model"); it != o.end() && it->second.kind == JsonValue::String) row.model = it->second.string;
    // A peer that runs another precision says what it moves.
    if (auto it = o.find("weight_bytes"); it != o.end() && it->second.kind == JsonValue::Number) row.weightBytes = it->second.number;
    if (auto it = o.find("bytes_per_token"); it != o.end() && it->second.kind == JsonValue::Number) row.bytesPerToken = it->second.number;
    row.test = BenchTest{row.prompt, row.gen, row.depth, row.batch, ""}.name();
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string rooflineSvg(const BenchReport& r) {
  if (!r.probe) throw Error("a roofline needs the probe's ceilings");
  const double bw = r.probe->bandwidthGBs(), peak = r.probe->fp32Gflops;
  std::vector<Point> pts;
  for (const auto& row : r.rows) {
    const double ts = mean(row.samplesTs);
    if (!(row.flopsPerToken > 0) || !(row.bytesPerToken > 0) || !(ts > 0)) continue;
    pts.push_back({row.flopsPerToken / row.bytesPerToken, row.flopsPerToken * ts / 1e9,
                   row.model + " " + row.test, row.engine});
  }
  if (r.kernels)
    for (const auto& k : r.kernels->rows)
      pts.push_back({k.flops / k.bytes, k.flops / (median(k.ms) * 1e-3) / 1e9,
                     fmt::format("{}x{}", k.K, k.N), "tl.QMatMul " + k.scheme});
  // Axes: decades that hold the ridge point, the ceilings and every point.
  double x0 = 0.1, x1 = std::max(1000.0, 10 * peak / bw), y0 = peak / 1e4, y1 = peak * 3;
  for (const auto& p : pts) {
    x0 = std::min(x0, p.x / 2);
    x1 = std::max(x1, p.x * 2);
    y0 = std::min(y0, p.y / 2);
  }
  x0 = std::pow(10, std::floor(std::log10(x0)));
  x1 = std::pow(10, std::ceil(std::log10(x1)));
  y0 = std::pow(10, std::floor(std::log10(y0)));
  y1 = std::pow(10, std::ceil(std::log10(y1)));
  const double W = 1100, H = 560, L = 80, R = 460, T = 50, B = 60;  // room on the right for long engine names
  auto sx = [&](double x) { return L + (std::log10(x) - std::log10(x0)) / (std::log10(x1) - std::log10(x0)) * (W - L - R); };
  auto sy = [&](double y) { return H - B - (std::log10(y) - std::log10(y0)) / (std::log10(y1) - std::log10(y0)) * (H - T - B); };
  std::string s = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n"
      "<text x=\"{2}\" y=\"24\" font-size=\"15\">Roofline: {3}</text>\n",
      W, H, L, esc(r.probe->device));
  for (double x = x0; x <= x1 * 1.001; x *= 10)
    s += fmt::format("<line x1=\"{0:.1f}\" y1=\"{1}\" x2=\"{0:.1f}\" y2=\"{2}\" stroke=\"#ddd\"/>"
                     "<text x=\"{0:.1f}\" y=\"{3}\" text-anchor=\"middle\">{4:g}</text>\n",
                     sx(x), T, H - B, H - B + 16, x);
  for (double y = y0; y <= y1 * 1.001; y *= 10)
    s += fmt::format("<line x1=\"{0}\" y1=\"{1:.1f}\" x2=\"{2}\" y2=\"{1:.1f}\" stroke=\"#ddd\"/>"
                     "<text x=\"{3}\" y=\"{4:.1f}\" text-anchor=\"end\">{5:g}</text>\n",
                     L, sy(y), W - R, L - 6, sy(y) + 4, y);
  s += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">arithmetic intensity (FLOP per byte moved)</text>\n",
                   (L + W - R) / 2, H - 20);
  s += fmt::format("<text x=\"20\" y=\"{0}\" transform=\"rotate(-90 20 {0})\" text-anchor=\"middle\">GFLOP/s</text>\n",
                   (T + H - B) / 2);
  // The ceiling: bandwidth-bound up to the ridge, compute-bound after it.
  const double ridge = peak / bw;
  const double xs = std::max(x0, y0 / bw);
  s += fmt::format("<polyline fill=\"none\" stroke=\"#c00\" stroke-width=\"2\" points=\"{:.1f},{:.1f} {:.1f},{:.1f} {:.1f},{:.1f}\"/>\n",
                   sx(xs), sy(xs * bw), sx(ridge), sy(peak), sx(x1), sy(peak));
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#c00\">fp32 peak {:.0f} GFLOP/s</text>\n", sx(ridge) + 6,
                   sy(peak) - 6, peak);
  s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" fill=\"#c00\" transform=\"rotate({:.1f} {:.1f} {:.1f})\">{:.0f} GB/s</text>\n",
                   sx(xs * 3), sy(xs * 3 * bw) - 6,
                   -std::atan2(sy(xs) - sy(xs * 10), sx(xs * 10) - sx(xs)) * 180 / M_PI, sx(xs * 3), sy(xs * 3 * bw) - 6, bw);
  const char* colors[] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#17becf", "#7f7f7f"};
  std::vector<std::string> engines;
  for (size_t i = 0; i < pts.size(); ++i) {
    auto it = std::find(engines.begin(), engines.end(), pts[i].engine);
    const size_t c = static_cast<size_t>(it - engines.begin());
    if (it == engines.end()) engines.push_back(pts[i].engine);
    s += fmt::format("<circle cx=\"{:.1f}\" cy=\"{:.1f}\" r=\"4\" fill=\"{}\"><title>{} ({}): {:.3g} FLOP/B, {:.4g} GFLOP/s</title></circle>\n",
                     sx(pts[i].x), sy(pts[i].y), colors[c % 8], esc(pts[i].label), esc(pts[i].engine), pts[i].x, pts[i].y);
    s += fmt::format("<text x=\"{:.1f}\" y=\"{:.1f}\" font-size=\"9\" fill=\"{}\">{}</text>\n", sx(pts[i].x) + 6,
                     sy(pts[i].y) + 3, colors[c % 8], esc(pts[i].label));
  }
  for (size_t i = 0; i < engines.size(); ++i)
    s += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"5\" fill=\"{}\"/><text x=\"{}\" y=\"{}\">{}</text>\n", W - R + 20,
                     T + 20 + 20 * i, colors[i % 8], W - R + 32, T + 24 + 20 * i, esc(engines[i]));
  return s + "</svg>\n";
}

}  // namespace tl
