// tokenizer.json's pipeline, in the order the Rust `tokenizers` library runs it: added
// tokens split out of the raw text; each other piece normalized, pre-tokenized into words,
// each word through the model (BPE, WordPiece or Unigram); the post-processor's template. Decoding: ids to
// token strings, then the decoders in turn. JSON by nlohmann-json, regular expressions by
// PCRE2 (UTF and UCP: Unicode classes and lookahead, which the families' Split patterns
// use), normalization forms by utf8proc (docs/tokenizer.md says why these).
#include "text/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <cstring>
#include <nlohmann/json.hpp>
#include <queue>
#include <unordered_map>

#include "cli/error.h"
#include "text/unicode.h"

namespace tl {

using json = nlohmann::json;

std::string utf8Lossy(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    size_t len = c < 0x80 ? 1 : (c >= 0xC2 && c <= 0xDF) ? 2 : (c >= 0xE0 && c <= 0xEF) ? 3 : (c >= 0xF0 && c <= 0xF4) ? 4 : 0;
    if (len == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
      continue;
    }
    // The continuation bytes that keep the sequence a valid prefix (Unicode's maximal
    // subpart: the second byte's range depends on the first).
    size_t ok = 1;
    for (; ok < len && i + ok < n; ++ok) {
      const unsigned char b = p[i + ok];
      unsigned char lo = 0x80, hi = 0xBF;
      if (ok == 1) {
        if (c == 0xE0) lo = 0xA0;
        if (c == 0xED) hi = 0x9F;
        if (c == 0xF0) lo = 0x90;
        if (c == 0xF4) hi = 0x8F;
      }
      if (b < lo || b > hi) break;
    }
    if (ok == len) {
      out.append(s, i, len);
    } else {
      out += "\xEF\xBF\xBD";
    }
    i += ok;
  }
  return out;
}

namespace {

// (The file is the caller's to name: tl tools blame it, `TOOL: error: FILE: what`.)
[[noreturn]] void bad(const std::string& /*file*/, const std::string& what) { throw Error(what, ExitCode::BadInput); }

size_t charLen(unsigned char c) { return c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4; }


// A compiled PCRE2 pattern; matches as (start, end) byte offsets, left to right.
class Regex {
 public:
  explicit Regex(const std::string& pattern, const std::string& file) {
    int err = 0;
    PCRE2_SIZE off = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &err,
                          &off, nullptr);
    if (!code_) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      bad(file, "regex '" + pattern + "' at " + std::to_string(off) + ": " + reinterpret_cast<char*>(msg));
    }
    pcre2_jit_compile(code_, PCRE2_JIT_COMPLETE);  // (falls back to the interpreter)
  }
  Regex(const Regex&) = delete;
  ~Regex() { pcre2_code_free(code_); }
  std::vector<std::pair<size_t, size_t>> findAll(const std::string& s) const {
    std::vector<std::pair<size_t, size_t>> out;
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(code_, nullptr);
    size_t at = 0;
    while (at <= s.size()) {
      const int rc = pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), at, PCRE2_NO_UTF_CHECK, md, nullptr);
      if (rc < 0) break;
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      if (ov[1] == ov[0]) {  // empty: step over a character
        at = ov[1] + (ov[1] < s.size() ? charLen(static_cast<unsigned char>(s[ov[1]])) : 1);
        continue;
      }
      out.emplace_back(ov[0], ov[1]);
      at = ov[1];
    }
    pcre2_match_data_free(md);
    return out;
  }

 private:
  pcre2_code* code_ = nullptr;
};

std::string quoteRegex(const std::string& literal) {
  std::string out = "\\Q";
  for (size_t i = 0; i < literal.size(); ++i) {
    out += literal[i];
    if (literal[i] == '\\' && i + 1 < literal.size() && literal[i + 1] == 'E') out += "E\\\\Q";
  }
  return out + "\\E";
}

// A component's {"String": s} or {"Regex": r} pattern, compiled.
std::unique_ptr<Regex> pattern(const json& p, const std::string& file) {
  if (p.contains("String")) return std::make_unique<Regex>(quoteRegex(p["String"].get<std::string>()), file);
  if (p.contains("Regex")) return std::make_unique<Regex>(p["Regex"].get<std::string>(), file);
  bad(file, "pattern " + p.dump() + " is neither String nor Regex");
}

// s with every match of re replaced by `with`.
std::string replaceAll(const Regex& re, const std::string& s, const std::string& with) {
  std::string out;
  size_t prev = 0;
  for (auto [a, b] : re.findAll(s)) {
    out.append(s, prev, a - prev);
    out += with;
    prev = b;
  }
  return out.append(s, prev, std::string::npos);
}

using Normalizer = std::function<std::string(const std::string&)>;
// Pieces in, words out; `atStart`: the first piece begins the raw text (Metaspace's
// prepend_scheme "first").
using PreTokenizer = std::function<void(std::vector<std::string>&, bool atStart)>;
using Decoder = std::function<void(std::vector<std::string>&)>;       // tokens in, strings out

// A Sequence of normalizers, pre-tokenizers or decoders: each of `list` built by `make`,
// run in turn.
template <typename Step, typename... Args> Step sequenceOf(const json& list, const std::string& file, Step (*make)(const json&, const std::string&)) {
  std::vector<Step> parts;
  for (const auto& p : list)
    if (auto f = make(p, file)) parts.push_back(std::move(f));
  return [parts](auto& v, Args... args) {
    for (const auto& f : parts) f(v, args...);
  };
}

std::string utf8procMap(const std::string& s, int options) {
  // ASCII is left as it is by every normalization form: no allocation for it
  if (std::all_of(s.begin(), s.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) return s;
  utf8proc_uint8_t* out = nullptr;
  const auto n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()), static_cast<utf8proc_ssize_t>(s.size()),
                              &out, static_cast<utf8proc_option_t>(options | UTF8PROC_STABLE));
  if (n < 0) return s;
  std::string r(reinterpret_cast<char*>(out), static_cast<size_t>(n));
  free(out);
  return r;
}

// Calls f with each code point of valid UTF-8 s.
template <typename F> void forEachChar(const std::string& s, F f) {
  for (size_t i = 0; i < s.size();) {
    utf8proc_int32_t cp = 0;
    const auto n = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + i),
                                    static_cast<utf8proc_ssize_t>(s.size() - i), &cp);
    if (n <= 0) return;
    f(static_cast<int32_t>(cp));
    i += static_cast<size_t>(n);
  }
}
utf8proc_category_t category(int32_t c) { return utf8proc_category(c); }
// Rust's char::is_whitespace (White_Space) and unicode_categories' is_other (BertNormalizer's
// controls: Cc, Cf, Co and Cs; its Cn table is empty, since UnicodeData.txt lists no
// unassigned code point, so tokenizers keeps those), tokenizers' CJK ideographs.
bool isWhitespace(int32_t c) {
  return (c >= 9 && c <= 13) || c == ' ' || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}
bool isOther(int32_t c) {
  const auto k = category(c);
  return k == UTF8PROC_CATEGORY_CC || k == UTF8PROC_CATEGORY_CF || k == UTF8PROC_CATEGORY_CO || k == UTF8PROC_CATEGORY_CS;
}
bool isChineseChar(int32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}
// Rust's char::to_lowercase a character at a time, as NormalizedString::lowercase maps
// (no final sigma): U+0130 is the one character whose lowercase is two.
std::string lowercase(const std::string& s) {
  std::string r;
  forEachChar(s, [&](int32_t c) { r += text::lowerChar(c); });
  return r;
}
// s without its nonspacing marks (Mn): StripAccents, after NFD in BertNormalizer.
std::string dropMarks(const std::string& s) {
  std::string r;
  forEachChar(s, [&](int32_t c) {
    if (category(c) != UTF8PROC_CATEGORY_MN) r += text::utf8(c);
  });
  return r;
}

Normalizer makeNormalizer(const json& j, const std::string& file) {
  if (j.is_null()) return nullptr;
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    std::vector<Normalizer> parts;
    for (const auto& n : j["normalizers"])
      if (auto f = makeNormalizer(n, file)) parts.push_back(std::move(f));
    return [parts](const std::string& s) {
      std::string r = s;
      for (const auto& f : parts) r = f(r);
      return r;
    };
  }
  if (type == "NFC") return [](const std::string& s) { return utf8procMap(s, UTF8PROC_COMPOSE); };
  if (type == "NFD") return [](const std::string& s) { return utf8procMap(s, UTF8PROC_DECOMPOSE); };
  if (type == "NFKC") return [](const std::string& s) { return utf8procMap(s, UTF8PROC_COMPOSE | UTF8PROC_COMPAT); };
  if (type == "NFKD") return [](const std::string& s) { return utf8procMap(s, UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT); };
  if (type == "Lowercase") return lowercase;
  if (type == "StripAccents") return [](const std::string& s) { return dropMarks(s); };
  if (type == "Strip") {
    const bool left = j.at("strip_left").get<bool>(), right = j.at("strip_right").get<bool>();
    return [left, right](const std::string& s) { return text::strip(s, left, right, isWhitespace); };
  }
  if (type == "BertNormalizer") {
    const bool clean = j.value("clean_text", true), chinese = j.value("handle_chinese_chars", true),
               lower = j.value("lowercase", true);
    const bool accents = j.contains("strip_accents") && !j["strip_accents"].is_null() ? j["strip_accents"].get<bool>() : lower;
    return [clean, chinese, lower, accents](const std::string& s) {
      std::string r;
      forEachChar(s, [&](int32_t c) {
        if (clean && (c == 0 || c == 0xFFFD || (c != '\t' && c != '\n' && c != '\r' && isOther(c)))) return;
        if (clean && (c == '\t' || c == '\n' || c == '\r' || isWhitespace(c))) c = ' ';
        if (chinese && isChineseChar(c)) r += " " + text::utf8(c) + " "; else r += text::utf8(c);
      });
      if (accents) r = dropMarks(utf8procMap(r, UTF8PROC_DECOMPOSE));
      return lower ? lowercase(r) : r;
    };
  }
  if (type == "Prepend") {
    const std::string p = j["prepend"].get<std::string>();
    return [p](const std::string& s) { return s.empty() ? s : p + s; };
  }
  if (type == "Replace") {
    auto re = std::shared_ptr<Regex>(pattern(j["pattern"], file));
    const std::string with = j["content"].get<std::string>();
    return [re, with](const std::string& s) { return replaceAll(*re, s, with); };
  }
  bad(file, "normalizer '" + type + "' is not one tl knows");
}

// Bytes as GPT-2's printable characters (ByteLevel), and back.
struct ByteChars {
  std::array<std::string, 256> of;
  std::unordered_map<int32_t, unsigned char> back;
  ByteChars() {
    int n = 0;
    for (int b = 0; b < 256; ++b) {
      const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
      const int32_t cp = printable ? b : 256 + n++;
      of[static_cast<size_t>(b)] = text::utf8(cp);
      back[cp] = static_cast<unsigned char>(b);
    }
  }
};
const ByteChars& byteChars() {
  static const ByteChars t;
  return t;
}

// The pieces (start, end, is_match) of s around re's matches, all of s covered.
std::vector<std::tuple<size_t, size_t, bool>> segments(const Regex& re, const std::string& s) {
  std::vector<std::tuple<size_t, size_t, bool>> out;
  size_t prev = 0;
  for (auto [a, b] : re.findAll(s)) {
    if (prev != a) out.emplace_back(prev, a, false);
    out.emplace_back(a, b, true);
    prev = b;
  }
  if (prev != s.size()) out.emplace_back(prev, s.size(), false);
  return out;
}

// Split's behaviours over one piece (tokenizers' SplitDelimiterBehavior).
std::vector<std::string> splitPiece(const Regex& re, const std::string& s, const std::string& behavior, bool invert) {
  auto segs = segments(re, s);
  if (invert)
    for (auto& g : segs) std::get<2>(g) = !std::get<2>(g);
  std::vector<std::pair<size_t, size_t>> keep;
  bool previous = false;
  if (behavior == "Isolated") {
    for (auto [a, b, m] : segs) keep.emplace_back(a, b);
  } else if (behavior == "Removed") {
    for (auto [a, b, m] : segs)
      if (!m) keep.emplace_back(a, b);
  } else if (behavior == "MergedWithPrevious") {
    for (auto [a, b, m] : segs) {
      if (m && !previous && !keep.empty()) keep.back().second = b; else keep.emplace_back(a, b);
      previous = m;
    }
  } else if (behavior == "MergedWithNext") {
    for (auto it = segs.rbegin(); it != segs.rend(); ++it) {
      auto [a, b, m] = *it;
      if (m && !previous && !keep.empty()) keep.back().first = a; else keep.emplace_back(a, b);
      previous = m;
    }
    std::reverse(keep.begin(), keep.end());
  } else if (behavior == "Contiguous") {
    for (auto [a, b, m] : segs) {
      if (m == previous && !keep.empty()) keep.back().second = b; else keep.emplace_back(a, b);
      previous = m;
    }
  }
  std::vector<std::string> out;
  for (auto [a, b] : keep)
    if (b > a) out.push_back(s.substr(a, b - a));
  return out;
}

const char* const kGpt2Pattern =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

// Splits every piece at re's matches with a Split behaviour.
PreTokenizer splitter(std::shared_ptr<Regex> re, const std::string& behavior, bool invert, const std::string& file) {
  static const char* const known[] = {"Isolated", "Removed", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
  if (std::find(std::begin(known), std::end(known), behavior) == std::end(known))
    bad(file, "Split behavior '" + behavior + "' is not one tl knows");
  return [re, behavior, invert](std::vector<std::string>& pieces, bool) {
    std::vector<std::string> out;
    for (const auto& p : pieces)
      for (auto& w : splitPiece(*re, p, behavior, invert)) out.push_back(std::move(w));
    pieces = std::move(out);
  };
}
PreTokenizer splitter(const std::string& regex, const std::string& behavior, bool invert, const std::string& file) {
  return splitter(std::make_shared<Regex>(regex, file), behavior, invert, file);
}
// Rust's char::is_whitespace and the BERT pieces' punctuation (ASCII or P*) as classes;
// Rust regex's \w (UTS #18), which PCRE2's UCP \w does not match exactly.
const char* const kWhitespace = "\\p{White_Space}";
const std::string kWordClass = "\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\p{Join_Control}", kWordChar = "[" + kWordClass + "]";
const char* const kPunctuation = "[\\p{P}!-/:-@\\[-`{-~]";

PreTokenizer makePreTokenizer(const json& j, const std::string& file) {
  if (j.is_null()) return nullptr;
  const std::string type = j.value("type", "");
  if (type == "Sequence") return sequenceOf<PreTokenizer, bool>(j["pretokenizers"], file, makePreTokenizer);
  if (type == "Split")
    return splitter(std::shared_ptr<Regex>(pattern(j["pattern"], file)), j.value("behavior", "Isolated"), j.value("invert", false), file);
  if (type == "WhitespaceSplit") return splitter(std::string(kWhitespace) + "+", "Removed", false, file);
  if (type == "Whitespace")  // \w+|[^\w\s]+
    return splitter(kWordChar + "+|[^" + kWordClass + kWhitespace + "]+", "Removed", true, file);
  if (type == "Punctuation") return splitter(kPunctuation, j.value("behavior", "Isolated"), false, file);
  if (type == "Digits") return splitter(j.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+", "Isolated", false, file);
  if (type == "BertPreTokenizer") {
    auto space = splitter(std::string(kWhitespace) + "+", "Removed", false, file);
    auto punct = splitter(kPunctuation, "Isolated", false, file);
    return [space, punct](std::vector<std::string>& pieces, bool atStart) {
      space(pieces, atStart);
      punct(pieces, atStart);
    };
  }
  if (type == "Metaspace") {
    const std::string rep = j.value("replacement", "\u2581");
    std::string scheme = j.value("prepend_scheme", "");
    if (scheme.empty()) scheme = j.value("add_prefix_space", true) ? "always" : "never";  // (files before 0.19)
    if (scheme != "always" && scheme != "first" && scheme != "never") bad(file, "Metaspace prepend_scheme '" + scheme + "' is not one tl knows");
    const bool split = j.value("split", true);
    auto re = std::make_shared<Regex>(quoteRegex(rep), file);
    return [rep, scheme, split, re](std::vector<std::string>& pieces, bool atStart) {
      std::vector<std::string> out;
      for (size_t i = 0; i < pieces.size(); ++i) {
        std::string p;
        for (char c : pieces[i]) {
          if (c == ' ') p += rep; else p += c;
        }
        if (p.compare(0, rep.size(), rep) != 0 && (scheme == "always" || (scheme == "first" && i == 0 && atStart))) p = rep + p;
        if (!split) {
          out.push_back(std::move(p));
          continue;
        }
        for (auto& w : splitPiece(*re, p, "MergedWithNext", false)) out.push_back(std::move(w));
      }
      pieces = std::move(out);
    };
  }
  if (type == "ByteLevel") {
    const bool prefix = j.value("add_prefix_space", false), useRegex = j.value("use_regex", true);
    auto re = std::make_shared<Regex>(kGpt2Pattern, file);
    return [prefix, useRegex, re](std::vector<std::string>& pieces, bool) {
      std::vector<std::string> out;
      for (auto p : pieces) {
        if (prefix && (p.empty() || p[0] != ' ')) p = " " + p;
        std::vector<std::string> words = useRegex ? splitPiece(*re, p, "Isolated", false) : std::vector<std::string>{p};
        for (const auto& w : words) {
          std::string m;
          for (unsigned char c : w) m += byteChars().of[c];
          out.push_back(std::move(m));
        }
      }
      pieces = std::move(out);
    };
  }
  bad(file, "pre-tokenizer '" + type + "' is not one tl knows");
}

// Strings to values by bytes: edges (node << 8 | byte) -> node, and the value each node
// ends (-1: none). Node 0 is the root.
struct ByteTrie {
  std::unordered_map<uint64_t, int32_t> edges;
  std::vector<int32_t> ends = {-1};
  // Keeps the first value of equal strings.
  void insert(const std::string& key, int32_t value) {
    size_t node = 0;
    for (unsigned char c : key) {
      auto [e, fresh] = edges.emplace(static_cast<uint64_t>(node) << 8 | c, static_cast<int32_t>(ends.size()));
      if (fresh) ends.push_back(-1);
      node = static_cast<size_t>(e->second);
    }
    if (node && ends[node] < 0) ends[node] = value;
  }
  // f(end, value) for every key that s has as a prefix from `at`, shortest first.
  template <typename F> void prefixes(const std::string& s, size_t at, F f) const {
    for (size_t j = at, node = 0; j < s.size(); ++j) {
      auto e = edges.find(static_cast<uint64_t>(node) << 8 | static_cast<unsigned char>(s[j]));
      if (e == edges.end()) return;
      node = static_cast<size_t>(e->second);
      if (ends[node] >= 0) f(j + 1, ends[node]);
    }
  }
};

// A model: a word to ids, over its vocabulary.
struct Model {
  virtual ~Model() = default;
  virtual void encodeWord(const std::string& w, std::vector<int32_t>& ids) const = 0;
  std::unordered_map<std::string, int32_t> vocab;
  // The ids of the <0xXX> byte tokens (-1: absent), for byte fallback.
  std::array<int32_t, 256> byteIds{};
  void findByteIds() {
    for (int b = 0; b < 256; ++b) {
      char code[8];
      std::snprintf(code, sizeof code, "<0x%02X>", b);
      auto it = vocab.find(code);
      byteIds[static_cast<size_t>(b)] = it == vocab.end() ? -1 : it->second;
    }
  }
  bool hasBytes(const std::string& s) const {
    return std::all_of(s.begin(), s.end(), [&](char c) { return byteIds[static_cast<unsigned char>(c)] >= 0; });
  }
};

// WordPiece: the longest vocabulary entry from the word's start, then from where it
// ended with the continuing prefix, and so on; a word with a piece none matches, or over
// max_input_chars_per_word characters, is the unknown token.
struct WordPiece : Model {
  std::string prefix = "##";
  size_t maxChars = 100;
  int32_t unk = -1;
  void encodeWord(const std::string& w, std::vector<int32_t>& ids) const override {
    size_t chars = 0;
    forEachChar(w, [&](int32_t) { ++chars; });
    const size_t mark = ids.size();
    for (size_t start = 0; start < w.size() && chars <= maxChars;) {
      size_t end = w.size();
      int32_t found = -1;
      while (start < end) {
        const std::string sub = (start > 0 ? prefix : "") + w.substr(start, end - start);
        if (auto it = vocab.find(sub); it != vocab.end()) {
          found = it->second;
          break;
        }
        do --end; while (end > start && (static_cast<unsigned char>(w[end]) & 0xC0) == 0x80);  // a character back
      }
      if (found < 0) {
        chars = maxChars + 1;  // bad: the whole word is unknown
        break;
      }
      ids.push_back(found);
      start = end;
    }
    if (chars > maxChars) {
      ids.resize(mark);
      ids.push_back(unk);
    }
  }
};

// Unigram: the pieces whose scores sum highest over the word (sentencepiece's Viterbi, as
// tokenizers' encode_optimized: ties keep the shorter piece found first), a character no
// piece starts with taking the unknown score (the lowest score less 10); consecutive
// unknown characters fused into one, which byte fallback turns into its bytes' tokens.
struct Unigram : Model {
  ByteTrie pieces;
  std::vector<double> scores;
  int32_t unk = -1;
  double unkScore = 0;
  bool byteFallback = false;
  void encodeWord(const std::string& w, std::vector<int32_t>& ids) const override {
    struct Best {
      int32_t id = -1;
      double score = 0;
      size_t from = 0;
      bool set = false;
    };
    std::vector<Best> best(w.size() + 1);
    best[0].set = true;
    for (size_t at = 0; at < w.size();) {
      const size_t len = std::min(charLen(static_cast<unsigned char>(w[at])), w.size() - at);
      const double here = best[at].score;
      bool single = false;
      auto offer = [&](size_t end, int32_t id, double score) {
        Best& b = best[end];
        if (!b.set || here + score > b.score) b = {id, here + score, at, true};
      };
      pieces.prefixes(w, at, [&](size_t end, int32_t id) {
        offer(end, id, scores[static_cast<size_t>(id)]);
        single |= end - at == len;
      });
      if (!single && unk < 0) bad("", "Unigram: a character no piece covers, and the model has no unk_id");
      if (!single) offer(at + len, unk, unkScore);
      at += len;
    }
    std::vector<std::pair<std::string, int32_t>> toks;  // backwards
    for (size_t end = w.size(); end > 0;) {
      const Best& b = best[end];
      std::string piece = w.substr(b.from, end - b.from);
      if (b.id == unk && !toks.empty() && toks.back().second == unk) toks.back().first.insert(0, piece);
      else toks.emplace_back(std::move(piece), b.id);
      end = b.from;
    }
    for (auto it = toks.rbegin(); it != toks.rend(); ++it) {
      auto [piece, id] = *it;
      if (id == unk) {
        if (auto v = vocab.find(piece); v != vocab.end()) id = v->second;
      }
      if (id == unk && byteFallback && hasBytes(piece)) {
        for (unsigned char c : piece) ids.push_back(byteIds[c]);
        continue;
      }
      ids.push_back(id);
    }
  }
};

// The BPE model: vocabulary, merges by rank, byte fallback, unknown token.
// BPE's merges, (left id, right id) -> (rank, new id), in one open-addressed array at
// most half full: a lookup touches one cache line where a node-based map misses twice, and
// lookups are most of encoding. A pair named again takes the later rank, as the Rust
// library's map does.
class MergeTable {
 public:
  struct Slot {
    uint64_t key = kEmpty;
    int32_t rank = 0, id = 0;
  };
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap <<= 1;
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }
  void set(uint64_t key, int32_t rank, int32_t id) {
    size_t i = home(key);
    while (slots_[i].key != kEmpty && slots_[i].key != key) i = (i + 1) & mask_;
    slots_[i] = {key, rank, id};
  }
  const Slot* find(uint64_t key) const {
    for (size_t i = home(key);; i = (i + 1) & mask_) {
      if (slots_[i].key == key) return &slots_[i];
      if (slots_[i].key == kEmpty) return nullptr;
    }
  }

 private:
  static constexpr uint64_t kEmpty = ~uint64_t{0};  // ids are never negative
  size_t home(uint64_t key) const { return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 32) & mask_; }
  std::vector<Slot> slots_;
  size_t mask_ = 0;
};

struct Bpe : Model {
  MergeTable merges;
  std::string prefix, suffix;  // continuing_subword_prefix, end_of_word_suffix
  bool byteFallback = false, fuseUnk = false, ignoreMerges = false;
  int32_t unk = -1;

  // The id of each one-character token, by its UTF-8 bytes packed: a word's characters
  // are looked up without making a string of each (the lookup that dominated encoding
  // Gemma's lines, which its pre-tokenizer leaves whole).
  std::unordered_map<uint32_t, int32_t> charIds;

  static uint64_t key(int32_t a, int32_t b) { return static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32 | static_cast<uint32_t>(b); }
  static uint32_t packChar(const char* c, size_t len) {
    uint32_t v = 0;
    std::memcpy(&v, c, len);
    return v;
  }
  void findCharIds() {
    for (const auto& [tok, id] : vocab)
      if (!tok.empty() && tok.size() <= 4 && charLen(static_cast<unsigned char>(tok[0])) == tok.size())
        charIds.emplace(packChar(tok.data(), tok.size()), id);
  }
  // The symbol for the character w[i, i + len): with the continuing prefix unless first,
  // the end-of-word suffix if last.
  std::string affixed(const std::string& w, size_t i, size_t len) const {
    return (i > 0 ? prefix : "") + w.substr(i, len) + (i + len == w.size() ? suffix : "");
  }
  // That symbol's id, or -1.
  int32_t charId(const std::string& w, size_t i, size_t len) const {
    if ((i > 0 && !prefix.empty()) || (i + len == w.size() && !suffix.empty())) {
      auto it = vocab.find(affixed(w, i, len));
      return it == vocab.end() ? -1 : it->second;
    }
    auto it = charIds.find(packChar(w.data() + i, len));
    return it == charIds.end() ? -1 : it->second;
  }

  void encodeWord(const std::string& w, std::vector<int32_t>& ids) const override {
    if (ignoreMerges)
      if (auto it = vocab.find(w); it != vocab.end()) {
        ids.push_back(it->second);
        return;
      }
    // Symbols: a character each (its id), or its bytes' ids (byte fallback), or the
    // unknown token (fused over a run when fuse_unk).
    std::vector<int32_t> sym;
    bool pendingUnk = false;
    for (size_t i = 0; i < w.size();) {
      const size_t len = std::min(charLen(static_cast<unsigned char>(w[i])), w.size() - i);
      if (const int32_t id = charId(w, i, len); id >= 0) {
        if (pendingUnk) sym.push_back(unk), pendingUnk = false;
        sym.push_back(id);
      } else if (const std::string s = byteFallback ? affixed(w, i, len) : ""; byteFallback && hasBytes(s)) {
        if (pendingUnk) sym.push_back(unk), pendingUnk = false;
        for (char c : s) sym.push_back(byteIds[static_cast<unsigned char>(c)]);
      } else if (unk >= 0) {
        if (pendingUnk && !fuseUnk) sym.push_back(unk);
        pendingUnk = true;
      }
      i += len;
    }
    if (pendingUnk) sym.push_back(unk);
    // Merges, lowest rank first, then leftmost (tokenizers' Word::merge_all).
    const size_t n = sym.size();
    std::vector<int> prev(n), next(n);
    std::vector<char> alive(n, 1);
    for (size_t i = 0; i < n; ++i) prev[i] = static_cast<int>(i) - 1, next[i] = i + 1 < n ? static_cast<int>(i + 1) : -1;
    // An entry is stale once the pair at its position is no longer the one it was made
    // for; the pair's ids are kept in it so that needs no second lookup.
    using Entry = std::tuple<int32_t, int, int32_t, uint64_t>;  // rank, position, new id, pair
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> queue;
    auto offer = [&](int at) {
      if (at < 0 || next[at] < 0) return;
      const uint64_t pair = key(sym[at], sym[next[at]]);
      if (const auto* m = merges.find(pair)) queue.emplace(m->rank, at, m->id, pair);
    };
    for (size_t i = 0; i + 1 < n; ++i) offer(static_cast<int>(i));
    while (!queue.empty()) {
      auto [rank, at, id, pair] = queue.top();
      queue.pop();
      if (!alive[at] || next[at] < 0 || key(sym[at], sym[next[at]]) != pair) continue;  // stale
      const int right = next[at];
      sym[at] = id;
      alive[right] = 0;
      next[at] = next[right];
      if (next[at] >= 0) prev[next[at]] = at;
      offer(prev[at]);
      offer(at);
    }
    for (size_t i = 0; i < n; ++i)
      if (alive[i]) ids.push_back(sym[i]);
  }
};

Decoder makeDecoder(const json& j, const std::string& file) {
  if (j.is_null()) return nullptr;
  const std::string type = j.value("type", "");
  if (type == "Sequence") return sequenceOf<Decoder>(j["decoders"], file, makeDecoder);
  if (type == "ByteLevel") {
    return [](std::vector<std::string>& t) {
      std::string bytes;
      for (const auto& tok : t) {
        std::string b;
        bool all = true;
        for (size_t i = 0; i < tok.size() && all;) {
          utf8proc_int32_t cp = 0;
          const auto len = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(tok.data() + i),
                                            static_cast<utf8proc_ssize_t>(tok.size() - i), &cp);
          auto it = byteChars().back.find(cp);
          if (len <= 0 || it == byteChars().back.end()) all = false; else b += static_cast<char>(it->second), i += static_cast<size_t>(len);
        }
        bytes += all ? b : tok;
      }
      t = {utf8Lossy(bytes)};
    };
  }
  if (type == "Replace") {
    auto re = std::shared_ptr<Regex>(pattern(j["pattern"], file));
    const std::string with = j["content"].get<std::string>();
    return [re, with](std::vector<std::string>& t) {
      for (auto& s : t) s = replaceAll(*re, s, with);
    };
  }
  if (type == "ByteFallback") {
    return [](std::vector<std::string>& t) {
      std::vector<std::string> out;
      std::string run;  // bytes of consecutive <0xXX> tokens
      size_t count = 0;
      auto flush = [&] {
        if (!count) return;
        if (utf8Lossy(run) == run) {
          out.push_back(run);
        } else {
          for (size_t i = 0; i < count; ++i) out.push_back("\xEF\xBF\xBD");
        }
        run.clear(), count = 0;
      };
      for (auto& s : t) {
        if (s.size() == 6 && s.compare(0, 3, "<0x") == 0 && s[5] == '>' && std::isxdigit(static_cast<unsigned char>(s[3])) &&
            std::isxdigit(static_cast<unsigned char>(s[4]))) {
          run += static_cast<char>(std::stoi(s.substr(3, 2), nullptr, 16)), ++count;
        } else {
          flush();
          out.push_back(std::move(s));
        }
      }
      flush();
      t = std::move(out);
    };
  }
  if (type == "WordPiece") {
    const std::string prefix = j.value("prefix", "##");
    const bool cleanup = j.value("cleanup", true);
    return [prefix, cleanup](std::vector<std::string>& t) {
      static const std::pair<const char*, const char*> kCleanup[] = {
          {" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
          {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
      for (size_t i = 0; i < t.size(); ++i) {
        std::string& s = t[i];
        if (i > 0) s = s.compare(0, prefix.size(), prefix) == 0 ? s.substr(prefix.size()) : " " + s;
        if (cleanup)
          for (auto [from, to] : kCleanup)
                for (size_t at = 0; (at = s.find(from, at)) != std::string::npos; at += std::strlen(to)) s.replace(at, std::strlen(from), to);
      }
    };
  }
  if (type == "Metaspace") {
    const std::string rep = j.value("replacement", "\u2581");
    std::string scheme = j.value("prepend_scheme", "");
    if (scheme.empty()) scheme = j.value("add_prefix_space", true) ? "always" : "never";
    return [rep, scheme](std::vector<std::string>& t) {
      // The replacement becomes a space, except in the first token, where the Rust
      // decoder drops every one (not only the one prepended), unless nothing was prepended.
      for (size_t i = 0; i < t.size(); ++i) {
        std::string& s = t[i];
        const bool drop = scheme != "never" && i == 0;
        std::string out;
        for (size_t at = 0; at < s.size();) {
          if (s.compare(at, rep.size(), rep) != 0) {
            out += s[at++];
            continue;
          }
          if (!drop) out += ' ';
          at += rep.size();
        }
        s = std::move(out);
      }
    };
  }
  if (type == "BPEDecoder") {
    const std::string suffix = j.value("suffix", "</w>");
    return [suffix](std::vector<std::string>& t) {
      for (size_t i = 0; i < t.size(); ++i)
        for (size_t at = 0; (at = t[i].find(suffix, at)) != std::string::npos;) {
          const std::string with = i + 1 == t.size() ? "" : " ";
          t[i].replace(at, suffix.size(), with);
          at += with.size();
        }
    };
  }
  if (type == "Fuse") {
    return [](std::vector<std::string>& t) {
      std::string all;
      for (const auto& s : t) all += s;
      t = {all};
    };
  }
  if (type == "Strip") {
    const std::string content = j["content"].get<std::string>();
    const size_t start = j.value("start", 0), stop = j.value("stop", 0);
    return [content, start, stop](std::vector<std::string>& t) {
      for (auto& s : t) {
        size_t a = 0, b = s.size();
        for (size_t i = 0; i < start && s.compare(a, content.size(), content) == 0 && a < b; ++i) a += content.size();
        for (size_t i = 0; i < stop && b >= a + content.size() && s.compare(b - content.size(), content.size(), content) == 0; ++i)
          b -= content.size();
        s = s.substr(a, b - a);
      }
    };
  }
  bad(file, "decoder '" + type + "' is not one tl knows");
}

std::string stringOr(const json& m, const char* key, const std::string& otherwise) {
  return m.contains(key) && m[key].is_string() ? m[key].get<std::string>() : otherwise;
}

std::unique_ptr<Model> makeModel(const json& m, const std::string& path) {
  const std::string type = m.value("type", "");
  if (type == "WordPiece") {
    auto wp = std::make_unique<WordPiece>();
    for (auto& [tok, id] : m.at("vocab").items()) wp->vocab.emplace(tok, id.get<int32_t>());
    wp->prefix = stringOr(m, "continuing_subword_prefix", "##");
    wp->maxChars = m.value("max_input_chars_per_word", size_t{100});
    const std::string unk = stringOr(m, "unk_token", "[UNK]");
    auto it = wp->vocab.find(unk);
    if (it == wp->vocab.end()) bad(path, "WordPiece unk_token '" + unk + "' is not in the vocabulary");
    wp->unk = it->second;
    return wp;
  }
  if (type == "Unigram") {
    auto u = std::make_unique<Unigram>();
    const json& vocab = m.at("vocab");
    double lowest = std::numeric_limits<double>::infinity();
    for (size_t i = 0; i < vocab.size(); ++i) {
      u->vocab[vocab[i].at(0).get<std::string>()] = static_cast<int32_t>(i);  // (the last of equal pieces)
      u->scores.push_back(vocab[i].at(1).get<double>());
      lowest = std::min(lowest, u->scores.back());
    }
    for (const auto& [piece, id] : u->vocab) u->pieces.insert(piece, id);
    u->unkScore = lowest - 10.0;  // tokenizers' K_UNK_PENALTY
    if (m.contains("unk_id") && !m["unk_id"].is_null()) u->unk = m["unk_id"].get<int32_t>();
    if (u->unk >= static_cast<int64_t>(vocab.size())) bad(path, "Unigram unk_id " + std::to_string(u->unk) + " is past its vocabulary");
    u->byteFallback = m.value("byte_fallback", false);
    u->findByteIds();
    return u;
  }
  if (type != "BPE") bad(path, "model '" + type + "' is not one tl knows");
  auto bpe = std::make_unique<Bpe>();
  for (auto& [tok, id] : m.at("vocab").items()) bpe->vocab.emplace(tok, id.get<int32_t>());
  bpe->prefix = stringOr(m, "continuing_subword_prefix", "");
  bpe->suffix = stringOr(m, "end_of_word_suffix", "");
  bpe->byteFallback = m.value("byte_fallback", false);
  bpe->fuseUnk = m.value("fuse_unk", false);
  bpe->ignoreMerges = m.value("ignore_merges", false);
  if (m.contains("dropout") && !m["dropout"].is_null()) bad(path, "BPE dropout is not one tl knows");
  if (auto it = bpe->vocab.find(stringOr(m, "unk_token", "")); it != bpe->vocab.end()) bpe->unk = it->second;
  bpe->findByteIds();
  bpe->findCharIds();
  int32_t rank = 0;
  bpe->merges.reserve(m.at("merges").size());
  for (const auto& mg : m.at("merges")) {
    std::string a, b;
    if (mg.is_string()) {
      const std::string line = mg.get<std::string>();
      const size_t sp = line.find(' ');
      if (sp == std::string::npos) bad(path, "merge '" + line + "' is not two tokens");
      a = line.substr(0, sp), b = line.substr(sp + 1);
    } else {
      a = mg.at(0).get<std::string>(), b = mg.at(1).get<std::string>();
    }
    auto ia = bpe->vocab.find(a), ib = bpe->vocab.find(b);
    auto in = bpe->vocab.find(a + b.substr(std::min(bpe->prefix.size(), b.size())));
    if (ia == bpe->vocab.end() || ib == bpe->vocab.end() || in == bpe->vocab.end())
      bad(path, "merge '" + a + " " + b + "' names a token outside the vocabulary");
    bpe->merges.set(Bpe::key(ia->second, ib->second), rank++, in->second);
  }
  return bpe;
}

struct AddedToken {
  std::string content;
  int32_t id;
  bool special, lstrip, rstrip, singleWord, normalized;
};

// The first character of s[at, ...), or -1 at the end; where the character before `at`
// (at > 0) starts.
int32_t charAt(const std::string& s, size_t at) {
  if (at >= s.size()) return -1;
  utf8proc_int32_t cp = -1;
  utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(s.data() + at), static_cast<utf8proc_ssize_t>(s.size() - at), &cp);
  return cp;
}
size_t charStartBefore(const std::string& s, size_t at) {
  size_t i = at - 1;
  while (i > 0 && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80) --i;
  return i;
}

}  // namespace

struct Tokenizer::Impl {
  std::string file;
  Normalizer normalizer;
  PreTokenizer preTokenizer;
  Decoder decoder;
  std::unique_ptr<Model> model;
  std::vector<AddedToken> added;
  // Contents -> index in `added`: of the tokens matched in the raw text, and of those
  // matched in the normalized pieces between them (the normalizer's form of each content).
  ByteTrie rawTrie, normalizedTrie;
  std::unique_ptr<Regex> wordChar;  // for single_word tokens
  std::unordered_map<int32_t, std::string> idToToken;
  std::unordered_map<int32_t, const AddedToken*> addedById;
  std::vector<int32_t> before, after;  // the template's special ids around the sequence
  bool templated = false;

  // s's pieces: (text, -1) to go on with, or (its text, id) of an added token of `trie`,
  // the leftmost match first and of those the longest, as the Rust library's
  // AddedVocabulary::find_matches: a single_word token only with no word character (\w)
  // on either side, else skipped (the search goes on after it); lstrip and rstrip take the
  // whitespace (\s) beside the token into it, but not what an earlier token took.
  std::vector<std::pair<std::string, int32_t>> splitAdded(const std::string& s, const ByteTrie& trie) const {
    std::vector<std::pair<std::string, int32_t>> out;
    auto word = [&](int32_t c) { return c >= 0 && !wordChar->findAll(text::utf8(c)).empty(); };
    size_t from = 0;
    for (size_t i = 0; i < s.size();) {
      const AddedToken* best = nullptr;
      trie.prefixes(s, i, [&](size_t, int32_t k) { best = &added[static_cast<size_t>(k)]; });
      if (!best) {
        ++i;
        continue;
      }
      const size_t end = i + best->content.size();
      if (best->singleWord && ((i > 0 && word(charAt(s, charStartBefore(s, i)))) || word(charAt(s, end)))) {
        i = end;
        continue;
      }
      size_t a = i, b = end;
      if (best->lstrip) {
        while (a > 0 && isWhitespace(charAt(s, charStartBefore(s, a)))) a = charStartBefore(s, a);
        a = std::max(a, from);
      }
      if (best->rstrip)
        while (b < s.size() && isWhitespace(charAt(s, b))) b += charLen(static_cast<unsigned char>(s[b]));
      if (a > from) out.emplace_back(s.substr(from, a - from), -1);
      out.emplace_back(s.substr(a, b - a), best->id);
      from = b;
      i = end;
    }
    if (from < s.size()) out.emplace_back(s.substr(from), -1);
    return out;
  }
};

Tokenizer::Tokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

Tokenizer Tokenizer::fromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) bad(path, "cannot open");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    bad(path, std::string("not JSON: ") + e.what());
  }
  auto t = std::make_unique<Impl>();
  t->file = path;
  try {
    t->model = makeModel(j.at("model"), path);
    for (auto& [tok, id] : t->model->vocab) t->idToToken.emplace(id, tok);
    for (const auto& a : j.value("added_tokens", json::array())) {
      const bool special = a.value("special", false);
      t->added.push_back({a["content"].get<std::string>(), a["id"].get<int32_t>(), special, a.value("lstrip", false),
                          a.value("rstrip", false), a.value("single_word", false), a.value("normalized", !special)});
    }
    t->normalizer = makeNormalizer(j.value("normalizer", json()), path);
    // The special tokens first, then the others (the first of equal contents counts).
    for (const bool special : {true, false})
      for (size_t i = 0; i < t->added.size(); ++i) {
        const AddedToken& a = t->added[i];
        if (a.special != special || a.content.empty()) continue;
        if (a.normalized)
          t->normalizedTrie.insert(t->normalizer ? t->normalizer(a.content) : a.content, static_cast<int32_t>(i));
        else
          t->rawTrie.insert(a.content, static_cast<int32_t>(i));
        if (a.singleWord && !t->wordChar) t->wordChar = std::make_unique<Regex>(kWordChar, path);
      }
    for (const auto& a : t->added) t->idToToken[a.id] = a.content, t->addedById[a.id] = &a;
    t->preTokenizer = makePreTokenizer(j.value("pre_tokenizer", json()), path);
    t->decoder = makeDecoder(j.value("decoder", json()), path);
    const json pp = j.value("post_processor", json());
    const std::string ppType = pp.is_null() ? "" : pp.value("type", "");
    if (ppType == "TemplateProcessing") {
      t->templated = true;
      bool seen = false;
      for (const auto& piece : pp.at("single")) {
        if (piece.contains("Sequence")) {
          seen = true;
          continue;
        }
        const std::string id = piece.at("SpecialToken").at("id").get<std::string>();
        for (const auto& x : pp.at("special_tokens").at(id).at("ids")) (seen ? t->after : t->before).push_back(x.get<int32_t>());
      }
    } else if (ppType == "BertProcessing" || ppType == "RobertaProcessing") {  // [CLS] text [SEP]
      t->templated = true;
      t->before = {pp.at("cls").at(1).get<int32_t>()};
      t->after = {pp.at("sep").at(1).get<int32_t>()};
    } else if (!ppType.empty() && ppType != "ByteLevel") {  // (ByteLevel's changes only offsets)
      bad(path, "post-processor '" + ppType + "' is not one tl knows");
    }
  } catch (const json::exception& e) {
    bad(path, std::string("tokenizer.json: ") + e.what());
  }
  return Tokenizer(std::move(t));
}

std::vector<int32_t> Tokenizer::encode(const std::string& text, bool addSpecialTokens) const {
  const Impl& t = *impl_;
  std::vector<int32_t> ids;
  if (addSpecialTokens) ids = t.before;
  // Added tokens in the raw text; the pieces between them normalized, then added tokens
  // matched there (normalized: true); what is left pre-tokenized ("first": the piece that
  // starts the text, for Metaspace) and through the model.
  const auto pieces = t.splitAdded(utf8Lossy(text), t.rawTrie);
  for (const auto& [piece, id] : pieces) {
    if (id >= 0) {
      ids.push_back(id);
      continue;
    }
    const auto subs = t.splitAdded(t.normalizer ? t.normalizer(piece) : piece, t.normalizedTrie);
    for (const auto& [sub, subId] : subs) {
      if (subId >= 0) {
        ids.push_back(subId);
        continue;
      }
      std::vector<std::string> words = {sub};
      if (t.preTokenizer) t.preTokenizer(words, &piece == &pieces.front().first && &sub == &subs.front().first);
      for (const auto& w : words) t.model->encodeWord(w, ids);
    }
  }
  if (addSpecialTokens) ids.insert(ids.end(), t.after.begin(), t.after.end());
  return ids;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids, bool skipSpecialTokens) const {
  const Impl& t = *impl_;
  std::vector<std::string> tokens;
  for (int32_t id : ids) {
    auto a = t.addedById.find(id);
    if (skipSpecialTokens && a != t.addedById.end() && a->second->special) continue;
    auto it = t.idToToken.find(id);
    if (it != t.idToToken.end()) tokens.push_back(it->second);
  }
  if (!t.decoder) {
    std::string out;
    for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
    return out;
  }
  t.decoder(tokens);
  std::string out;
  for (const auto& s : tokens) out += s;
  return out;
}

size_t Tokenizer::vocabSize() const { return impl_->idToToken.size(); }
bool Tokenizer::knows(int32_t id) const { return impl_->idToToken.count(id) > 0; }

std::string tokenizerFileFor(const std::string& path, const std::string& model) {
  std::error_code ec;
  if (!path.empty()) return std::filesystem::is_directory(path, ec) ? (std::filesystem::path(path) / "tokenizer.json").string() : path;
  if (model.empty()) return "";
  const auto beside = std::filesystem::path(model).parent_path() / "tokenizer.json";
  return std::filesystem::exists(beside, ec) ? beside.string() : "";
}

void checkTokenizerFits(const Tokenizer& tokenizer, int64_t logits) {
  if (tokenizer.vocabSize() > static_cast<size_t>(logits))
    throw Error("the tokenizer has " + std::to_string(tokenizer.vocabSize()) + " tokens, more than the model's " +
                    std::to_string(logits) + " logits: a tokenizer of another model?",
                ExitCode::BadInput);
}

TextStream::TextStream(const Tokenizer& tokenizer, std::vector<int32_t> context, bool skipSpecialTokens)
    : tokenizer_(tokenizer), skipSpecial_(skipSpecialTokens), window_(std::move(context)),
      prefix_(tokenizer.decode(window_, skipSpecialTokens)), prefixIndex_(0), text_(prefix_) {}

std::string TextStream::push(int32_t id) {
  window_.push_back(id);
  const std::string text = tokenizer_.decode(window_, skipSpecial_);
  static const std::string kReplacement = "\xEF\xBF\xBD";
  const bool split = text.size() >= 3 && text.compare(text.size() - 3, 3, kReplacement) == 0;
  // Where the window decodes what was shown differently (the context ended inside a
  // character the new id completes: shown as U+FFFD), print from where it differs; the
  // Rust library's stream stops with an error there.
  const size_t same = static_cast<size_t>(std::mismatch(prefix_.begin(), prefix_.end(), text.begin(), text.end()).first - prefix_.begin());
  if (split || text.size() <= same) return "";
  std::string added = text.substr(same);
  const size_t next = window_.size() - prefixIndex_;
  window_.erase(window_.begin(), window_.begin() + static_cast<std::ptrdiff_t>(prefixIndex_));
  prefix_ = tokenizer_.decode(window_, skipSpecial_);
  prefixIndex_ = next;
  text_ += added;
  return added;
}

std::string TextStream::finish() {
  const std::string text = tokenizer_.decode(window_, skipSpecial_);
  const size_t same = static_cast<size_t>(std::mismatch(prefix_.begin(), prefix_.end(), text.begin(), text.end()).first - prefix_.begin());
  if (text.size() <= same) return "";
  std::string rest = text.substr(same);
  prefix_ = text;
  text_ += rest;
  return rest;
}

}  // namespace tl
