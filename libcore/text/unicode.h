// Code points and UTF-8 for text/'s two readers (the tokenizer, the chat template), through
// utf8proc: what both need of a string a character at a time.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace tl::text {

// One code point, or code points [from, to), as UTF-8.
std::string utf8(int32_t cp);
std::string utf8(const std::vector<int32_t>& cps, size_t from = 0, size_t to = std::string::npos);
// s's code points; each byte that starts no valid character is U+FFFD.
std::vector<int32_t> codepoints(const std::string& s);
// A character lower-cased as Rust's char::to_lowercase and JavaScript's toLowerCase both
// do: U+0130 (İ) is the one whose full lowercase is two characters ("i" and a combining dot).
std::string lowerChar(int32_t c);
// s without the characters `space` takes at its start (left) and at its end (right).
std::string strip(const std::string& s, bool left, bool right, bool (*space)(int32_t));

}  // namespace tl::text
