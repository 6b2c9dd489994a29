// The service's wire format (docs/tl-ctxswap.md): one JSON object a line, flat, with
// string, number (integers, and reals with a fraction or exponent) and boolean members. Strings carry bytes: escapes \u0000-\u00ff are one
// byte each (a byte-level model's prompt need not be UTF-8), and a writer escapes every
// byte outside printable ASCII that way.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace tl {

struct JsonLine {
  std::map<std::string, std::string> strings;
  std::map<std::string, int64_t> ints;
  std::map<std::string, double> reals;
  std::map<std::string, bool> bools;
  bool has(const std::string& k) const { return strings.count(k) || ints.count(k) || reals.count(k) || bools.count(k); }
  double number(const std::string& k, double fallback) const;  // an int or a real member
};

// Throws tl::Error saying what is wrong (position) for anything else: nesting, arrays, a
// member twice, text after the object.
JsonLine parseJsonLine(const std::string& line);

// Members written in order, as one line (no newline).
class JsonWriter {
 public:
  JsonWriter& str(const std::string& key, const std::string& value);
  JsonWriter& num(const std::string& key, int64_t value);
  JsonWriter& real(const std::string& key, double value);
  JsonWriter& flag(const std::string& key, bool value);
  std::string line() const { return body_.empty() ? "{}" : "{" + body_ + "}"; }

 private:
  JsonWriter& member(const std::string& key, const std::string& json);
  std::string body_;
};
std::string jsonQuote(const std::string& bytes);

}  // namespace tl
