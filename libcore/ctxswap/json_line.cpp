#include "ctxswap/json_line.h"

#include <cstdio>
#include <cstdlib>

#include "cli/error.h"

namespace tl {

namespace {

struct Reader {
  const std::string& s;
  size_t at = 0;
  [[noreturn]] void fail(const std::string& what) const {
    throw Error("malformed request at byte " + std::to_string(at) + ": " + what);
  }
  void space() {
    while (at < s.size() && (s[at] == ' ' || s[at] == '\t' || s[at] == '\r')) ++at;
  }
  bool take(char c) {
    space();
    if (at < s.size() && s[at] == c) {
      ++at;
      return true;
    }
    return false;
  }
  std::string string() {
    space();
    if (at >= s.size() || s[at] != '"') fail("expected a string");
    ++at;
    std::string out;
    while (at < s.size() && s[at] != '"') {
      char c = s[at++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at >= s.size()) fail("a string ends in an escape");
      const char e = s[at++];
      switch (e) {
        case '"': case '\\': case '/': out += e; break;
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (at + 4 > s.size()) fail("a short \\u escape");
          unsigned v = 0;
          for (int i = 0; i < 4; ++i) {
            const char h = s[at++];
            v = v * 16 + static_cast<unsigned>(h >= '0' && h <= '9' ? h - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10
                                                 : h >= 'A' && h <= 'F' ? h - 'A' + 10 : (fail("a bad \\u escape"), 0));
          }
          if (v > 0xff) fail("\\u escapes carry bytes: up to \\u00ff");
          out += static_cast<char>(v);
          break;
        }
        default: fail(std::string("an unknown escape \\") + e);
      }
    }
    if (at >= s.size()) fail("an unterminated string");
    ++at;
    return out;
  }
};

}  // namespace

JsonLine parseJsonLine(const std::string& line) {
  Reader r{line};
  JsonLine out;
  if (!r.take('{')) r.fail("expected '{'");
  if (!r.take('}')) {
    do {
      const std::string key = r.string();
      if (out.has(key)) r.fail("member '" + key + "' twice");
      if (!r.take(':')) r.fail("expected ':'");
      r.space();
      if (r.at < line.size() && line[r.at] == '"') {
        out.strings[key] = r.string();
      } else if (line.compare(r.at, 4, "true") == 0 || line.compare(r.at, 5, "false") == 0) {
        out.bools[key] = line[r.at] == 't';
        r.at += out.bools[key] ? 4 : 5;
      } else {
        size_t end = r.at;
        if (end < line.size() && line[end] == '-') ++end;
        const size_t digits = end;
        while (end < line.size() && line[end] >= '0' && line[end] <= '9') ++end;
        if (end == digits) r.fail("member '" + key + "': expected a string, a number or a boolean");
        if (end < line.size() && (line[end] == '.' || line[end] == 'e' || line[end] == 'E')) {
          char* stop = nullptr;
          out.reals[key] = std::strtod(line.c_str() + r.at, &stop);
          r.at = static_cast<size_t>(stop - line.c_str());
        } else {
          if (end - digits > 18) r.fail("member '" + key + "': an integer too long");
          out.ints[key] = std::stoll(line.substr(r.at, end - r.at));
          r.at = end;
        }
      }
    } while (r.take(','));
    if (!r.take('}')) r.fail("expected ',' or '}'");
  }
  r.space();
  if (r.at != line.size()) r.fail("text after the object");
  return out;
}

double JsonLine::number(const std::string& k, double fallback) const {
  if (auto i = ints.find(k); i != ints.end()) return static_cast<double>(i->second);
  if (auto r = reals.find(k); r != reals.end()) return r->second;
  return fallback;
}

std::string jsonQuote(const std::string& bytes) {
  std::string out = "\"";
  for (unsigned char c : bytes) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

JsonWriter& JsonWriter::member(const std::string& key, const std::string& json) {
  if (!body_.empty()) body_ += ',';
  body_ += jsonQuote(key) + ":" + json;
  return *this;
}
JsonWriter& JsonWriter::str(const std::string& key, const std::string& value) { return member(key, jsonQuote(value)); }
JsonWriter& JsonWriter::num(const std::string& key, int64_t value) { return member(key, std::to_string(value)); }
JsonWriter& JsonWriter::real(const std::string& key, double value) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.9g", value);
  std::string s = buf;
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";  // read back as a real, not an integer
  return member(key, s);
}
JsonWriter& JsonWriter::flag(const std::string& key, bool value) { return member(key, value ? "true" : "false"); }

}  // namespace tl
