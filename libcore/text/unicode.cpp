#include "text/unicode.h"

#include <utf8proc.h>

#include <algorithm>

namespace tl::text {

std::string utf8(int32_t cp) {
  utf8proc_uint8_t buf[4];
  const auto n = utf8proc_encode_char(cp, buf);
  return std::string(reinterpret_cast<char*>(buf), static_cast<size_t>(n));
}

std::string utf8(const std::vector<int32_t>& cps, size_t from, size_t to) {
  std::string out;
  to = std::min(to, cps.size());
  for (size_t i = from; i < to; ++i) out += utf8(cps[i]);
  return out;
}

std::vector<int32_t> codepoints(const std::string& s) {
  std::vector<int32_t> out;
  for (size_t i = 0; i < s.size();) {
    utf8proc_int32_t c = 0;
    const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                    static_cast<utf8proc_ssize_t>(s.size() - i), &c);
    if (n <= 0) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    out.push_back(c);
    i += static_cast<size_t>(n);
  }
  return out;
}

std::string lowerChar(int32_t c) { return c == 0x130 ? std::string("i\xCC\x87") : utf8(utf8proc_tolower(c)); }

std::string strip(const std::string& s, bool left, bool right, bool (*space)(int32_t)) {
  const auto cps = codepoints(s);
  size_t a = 0, b = cps.size();
  while (left && a < b && space(cps[a])) ++a;
  while (right && b > a && space(cps[b - 1])) --b;
  return utf8(cps, a, b);
}

}  // namespace tl::text
