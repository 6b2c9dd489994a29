// A Jinja interpreter for chat templates, following @huggingface/jinja (the reference the
// docs name): its preprocessing (a final newline dropped, lstrip_blocks and trim_blocks),
// whitespace control by `-`, Python's values and operators as it emulates them, its
// filters, tests and string methods. Lexer, then a tree of statements and expressions,
// then evaluation over scopes (a `for` body's sets stay in it; namespace() objects carry
// values out).
#include "text/chat_template.h"

#include <utf8proc.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "cli/error.h"
#include "text/unicode.h"

namespace tl {

using json = nlohmann::json;

namespace {

[[noreturn]] void fail(const std::string& what) { throw Error("chat template: " + what, ExitCode::BadInput); }

// ---- values ----

struct Value;
using List = std::vector<Value>;
using Dict = std::vector<std::pair<std::string, Value>>;  // insertion order, as JS maps and Python dicts
using Args = std::vector<Value>;
using Kwargs = std::vector<std::pair<std::string, Value>>;
using Func = std::function<Value(Args&, Kwargs&)>;

struct Value {
  enum Kind { Undefined, None, Bool, Int, Float, Str, Array, Object, Function } kind = Undefined;
  bool b = false;
  int64_t i = 0;
  double f = 0;
  std::string s;
  std::shared_ptr<List> list;
  std::shared_ptr<Dict> dict;  // Object: a dict, or a namespace() (mutable)
  std::shared_ptr<Func> fn;

  static Value none() { return make(None); }
  static Value boolean(bool v) {
    Value x = make(Bool);
    x.b = v;
    return x;
  }
  static Value integer(int64_t v) {
    Value x = make(Int);
    x.i = v;
    return x;
  }
  static Value real(double v) {
    Value x = make(Float);
    x.f = v;
    return x;
  }
  static Value str(std::string v) {
    Value x = make(Str);
    x.s = std::move(v);
    return x;
  }
  static Value array(List v = {}) {
    Value x = make(Array);
    x.list = std::make_shared<List>(std::move(v));
    return x;
  }
  static Value object(Dict v = {}) {
    Value x = make(Object);
    x.dict = std::make_shared<Dict>(std::move(v));
    return x;
  }
  static Value function(Func f) {
    Value x = make(Function);
    x.fn = std::make_shared<Func>(std::move(f));
    return x;
  }
  static Value make(Kind k) {
    Value x;
    x.kind = k;
    return x;
  }
  bool number() const { return kind == Int || kind == Float; }
  double num() const { return kind == Int ? static_cast<double>(i) : f; }
  const Value* find(const std::string& key) const {
    if (kind != Object) return nullptr;
    for (const auto& [k, v] : *dict)
      if (k == key) return &v;
    return nullptr;
  }
};

const char* kindName(const Value& v) {
  static const char* const names[] = {"undefined", "none", "boolean", "integer", "float", "string", "list", "dict", "function"};
  return names[v.kind];
}

Value fromJson(const json& j) {
  switch (j.type()) {
    case json::value_t::null: return Value::none();
    case json::value_t::boolean: return Value::boolean(j.get<bool>());
    case json::value_t::number_integer:
    case json::value_t::number_unsigned: return Value::integer(j.get<int64_t>());
    case json::value_t::number_float: return Value::real(j.get<double>());
    case json::value_t::string: return Value::str(j.get<std::string>());
    case json::value_t::array: {
      List l;
      for (const auto& x : j) l.push_back(fromJson(x));
      return Value::array(std::move(l));
    }
    case json::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it) d.emplace_back(it.key(), fromJson(it.value()));
      return Value::object(std::move(d));
    }
    default: return Value();
  }
}

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Undefined:
    case Value::None: return false;
    case Value::Bool: return v.b;
    case Value::Int: return v.i != 0;
    case Value::Float: return v.f != 0;
    case Value::Str: return !v.s.empty();
    case Value::Array: return !v.list->empty();
    case Value::Object: return true;  // (the reference: every object is true)
    case Value::Function: return true;
  }
  return false;
}

// Numbers as JavaScript prints them (the reference's values are JS numbers): integers
// plainly, floats in the shortest form that reads back, with ".0" when whole.
std::string numberText(const Value& v) {
  if (v.kind == Value::Int) return std::to_string(v.i);
  if (std::isnan(v.f)) return "NaN";
  if (std::isinf(v.f)) return v.f > 0 ? "Infinity" : "-Infinity";
  if (v.f == std::floor(v.f) && std::fabs(v.f) < 1e21) {
    std::ostringstream o;
    o.precision(0);
    o << std::fixed << v.f;
    return o.str() + ".0";
  }
  for (int p = 1; p <= 17; ++p) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.*g", p, v.f);
    if (std::strtod(buf, nullptr) == v.f) return buf;
  }
  return std::to_string(v.f);
}

std::string jsonText(const Value& v, int indent, int depth);
}  // namespace
std::string jsonString(const std::string& s) { return json(s).dump(-1, ' ', false, json::error_handler_t::replace); }
namespace {

// What {{ v }} prints.
std::string text(const Value& v) {
  switch (v.kind) {
    case Value::Undefined: return "";
    case Value::None: return "";  // (the reference prints none as nothing, booleans in lower case)
    case Value::Bool: return v.b ? "true" : "false";
    case Value::Int:
    case Value::Float: return numberText(v);
    case Value::Str: return v.s;
    case Value::Array:
    case Value::Object: return jsonText(v, 0, 0);
    case Value::Function: return "<function>";
  }
  return "";
}


// The reference's tojson: ", " and ": " between items, or with an indent "," and new lines.
std::string jsonText(const Value& v, int indent, int depth) {
  switch (v.kind) {
    case Value::Undefined:
    case Value::None: return "null";
    case Value::Bool: return v.b ? "true" : "false";
    case Value::Int: return std::to_string(v.i);
    case Value::Float: {
      const std::string t = numberText(v);
      return t.size() > 2 && t.compare(t.size() - 2, 2, ".0") == 0 ? t.substr(0, t.size() - 2) : t;  // (JSON.stringify)
    }
    case Value::Str: return jsonString(v.s);
    case Value::Function: fail("tojson of a function");
    default: break;
  }
  const std::string item = indent ? "," : ", ", pad(indent ? static_cast<size_t>(indent * depth) : 0, ' ');
  const std::string base = "\n" + pad, child = base + std::string(static_cast<size_t>(indent), ' ');
  std::vector<std::string> core;
  if (v.kind == Value::Array) {
    for (const auto& x : *v.list) core.push_back(jsonText(x, indent, depth + 1));
  } else {
    for (const auto& [k, x] : *v.dict) core.push_back((indent ? child : "") + jsonString(k) + ": " + jsonText(x, indent, depth + 1));
  }
  std::string joined;
  for (size_t i = 0; i < core.size(); ++i) joined += (i ? item + (indent && v.kind == Value::Array ? child : "") : "") + core[i];
  const char open = v.kind == Value::Array ? '[' : '{', close = v.kind == Value::Array ? ']' : '}';
  if (!indent || core.empty()) return open + joined + close;
  return open + (v.kind == Value::Array ? child : "") + joined + base + close;
}

bool equal(const Value& a, const Value& b) {
  if (a.number() && b.number()) return a.num() == b.num();
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Undefined:
    case Value::None: return true;
    case Value::Bool: return a.b == b.b;
    case Value::Str: return a.s == b.s;
    case Value::Array:
      return a.list->size() == b.list->size() && std::equal(a.list->begin(), a.list->end(), b.list->begin(), equal);
    default: return a.dict == b.dict;
  }
}

// ---- strings ----

using text::codepoints;
using text::utf8;
// A string's length as JavaScript counts it (UTF-16 units).
int64_t utf16Length(const std::string& s) {
  int64_t n = 0;
  for (int32_t c : codepoints(s)) n += c >= 0x10000 ? 2 : 1;
  return n;
}
// JavaScript's whitespace (what trim() and the lexer's \s take).
bool jsSpace(int32_t c) {
  return (c >= 9 && c <= 13) || c == ' ' || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000 || c == 0xFEFF;
}
// JavaScript's trim(), trimStart(), trimEnd(): the reference's strip, lstrip and rstrip,
// which ignore a set of characters given to them (qwen3's strip('\n') strips spaces too).
std::string stripped(const std::string& s, bool left, bool right) { return text::strip(s, left, right, jsSpace); }
// JavaScript's toLowerCase / toUpperCase of a character: full mappings where they are
// longer than one character (SpecialCasing's unconditional ones: İ; ß, the Latin
// ligatures, ŉ), else the simple ones.
std::string caseOf(int32_t c, bool upper) {
  if (!upper) return text::lowerChar(c);
  static const std::map<int32_t, const char*> kUpper = {{0xDF, "SS"},  {0xFB00, "FF"}, {0xFB01, "FI"}, {0xFB02, "FL"},
                                                        {0xFB03, "FFI"}, {0xFB04, "FFL"}, {0xFB05, "ST"}, {0xFB06, "ST"},
                                                        {0x149, "\xCA\xBCN"}};
  if (auto it = kUpper.find(c); it != kUpper.end()) return it->second;
  return utf8(utf8proc_toupper(c));
}
// 0 lower, 1 upper; 2 title: an ASCII word character after a non-word one upper-cased
// (the reference's /\b\w/g), the rest as it is; 3 capitalize: the first character
// upper-cased, the rest as it is.
std::string mapCase(const std::string& s, int mode) {
  std::string out;
  bool wordBefore = false, first = true;
  for (int32_t c : codepoints(s)) {
    const bool word = c < 128 && (std::isalnum(c) || c == '_');
    if (mode == 0 || mode == 1) out += caseOf(c, mode == 1);
    else if ((mode == 2 && word && !wordBefore) || (mode == 3 && first)) out += caseOf(c, true);
    else out += utf8(c);
    wordBefore = word, first = false;
  }
  return out;
}
std::string replaced(std::string s, const std::string& from, const std::string& to, int64_t count = -1) {
  if (from.empty()) return s;
  for (size_t at = 0; count != 0 && (at = s.find(from, at)) != std::string::npos; at += to.size(), --count) s.replace(at, from.size(), to);
  return s;
}

// ---- lexer ----

struct Token {
  enum Kind { Text, Open, Close, OpenExpr, CloseExpr, Name, String, Number, Op, End } kind;
  std::string v;
};

std::string preprocess(std::string t) {
  if (!t.empty() && t.back() == '\n') t.pop_back();
  t = std::regex_replace(t, std::regex("(^|\n)[ \t]*(\\{[#%-])"), "$1$2");  // lstrip_blocks
  t = std::regex_replace(t, std::regex("([#%-]\\})\n"), "$1");              // trim_blocks
  return t;
}

std::string trimEndJs(const std::string& s) { return stripped(s, false, true); }

std::vector<Token> lex(const std::string& source) {
  const std::string src = preprocess(source);
  std::vector<Token> out;
  size_t at = 0;
  auto stripLast = [&] {
    if (!out.empty() && out.back().kind == Token::Text) {
      out.back().v = trimEndJs(out.back().v);
      if (out.back().v.empty()) out.pop_back();
    }
  };
  auto skipSpace = [&] {  // JavaScript's \s: Unicode whitespace too
    while (at < src.size()) {
      utf8proc_int32_t c = 0;
      const auto len = utf8proc_iterate(reinterpret_cast<const utf8proc_uint8_t*>(src.data() + at),
                                        static_cast<utf8proc_ssize_t>(src.size() - at), &c);
      if (len <= 0 || !jsSpace(c)) return;
      at += static_cast<size_t>(len);
    }
  };
  bool inside = false;
  while (at < src.size()) {
    if (!inside) {
      size_t next = at;
      while (next < src.size() && !(src[next] == '{' && next + 1 < src.size() && (src[next + 1] == '%' || src[next + 1] == '{' || src[next + 1] == '#')))
        ++next;
      if (next > at) out.push_back({Token::Text, src.substr(at, next - at)});
      at = next;
      if (at >= src.size()) break;
      if (src[at + 1] == '#') {
        const size_t end = src.find("#}", at + 2);
        if (end == std::string::npos) fail("a comment has no end");
        if (src[at + 2] == '-') stripLast();
        const bool after = end > at + 2 && src[end - 1] == '-';
        at = end + 2;
        if (after) skipSpace();
        continue;
      }
      const bool expr = src[at + 1] == '{';
      at += 2;
      if (at < src.size() && src[at] == '-') {
        stripLast();
        ++at;
      }
      out.push_back({expr ? Token::OpenExpr : Token::Open, ""});
      inside = true;
      continue;
    }
    skipSpace();
    if (at >= src.size()) break;
    auto closes = [&](const char* tag) { return src.compare(at, std::strlen(tag), tag) == 0; };
    if (closes("-%}") || closes("%}") || closes("-}}") || closes("}}")) {
      bool stripNext = src[at] == '-';
      const bool statement = src[at + (stripNext ? 1 : 0)] == '%';
      // "}}" inside an expression's dict literal closes the dict, not the tag
      int depth = 0;
      for (auto it = out.rbegin(); it != out.rend() && it->kind != Token::OpenExpr && it->kind != Token::Open; ++it)
        if (it->kind == Token::Op) depth += it->v == "{" ? 1 : it->v == "}" ? -1 : 0;
      if (statement || depth <= 0) {
        out.push_back({statement ? Token::Close : Token::CloseExpr, ""});
        at += stripNext ? 3 : 2;
        if (stripNext) skipSpace();
        inside = false;
        continue;
      }
    }
    const char c = src[at];
    if (c == '\'' || c == '"') {
      std::string s;
      ++at;
      while (at < src.size() && src[at] != c) {
        if (src[at] != '\\') {
          s += src[at++];
          continue;
        }
        if (++at >= src.size()) fail("a string ends in a backslash");
        const char e = src[at++];
        static const std::map<char, char> kEscapes = {{'n', '\n'}, {'t', '\t'}, {'r', '\r'}, {'b', '\b'}, {'f', '\f'},
                                                      {'v', '\v'}, {'\'', '\''}, {'"', '"'}, {'\\', '\\'}};
        if (e == 'x' || e == 'u') {
          const size_t len = e == 'x' ? 2 : 4;
          const std::string hex = src.substr(at, len);
          if (hex.size() != len || hex.find_first_not_of("0123456789abcdefABCDEF") != std::string::npos)
            fail("bad escape \\" + std::string(1, e) + hex);
          s += utf8(static_cast<int32_t>(std::stoi(hex, nullptr, 16)));
          at += len;
        } else if (auto it = kEscapes.find(e); it != kEscapes.end()) {
          s += it->second;
        } else {
          fail(std::string("unknown escape \\") + e);
        }
      }
      if (at >= src.size()) fail("a string has no end");
      ++at;
      out.push_back({Token::String, s});
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t end = at;
      while (end < src.size() && std::isdigit(static_cast<unsigned char>(src[end]))) ++end;
      if (end + 1 < src.size() && src[end] == '.' && std::isdigit(static_cast<unsigned char>(src[end + 1])) &&
          !(out.back().kind == Token::Op && out.back().v == ".")) {
        ++end;
        while (end < src.size() && std::isdigit(static_cast<unsigned char>(src[end]))) ++end;
      }
      out.push_back({Token::Number, src.substr(at, end - at)});
      at = end;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t end = at;
      while (end < src.size() && (std::isalnum(static_cast<unsigned char>(src[end])) || src[end] == '_')) ++end;
      out.push_back({Token::Name, src.substr(at, end - at)});
      at = end;
      continue;
    }
    static const char* const kOps[] = {"==", "!=", "<=", ">=", "//", "**", "(", ")", "[", "]", "{", "}", ",", ".", ":",
                                       "|", "+", "-", "*", "/", "%", "<", ">", "~", "=", "!"};
    bool matched = false;
    for (const char* op : kOps)
      if (src.compare(at, std::strlen(op), op) == 0) {
        out.push_back({Token::Op, op});
        at += std::strlen(op);
        matched = true;
        break;
      }
    if (!matched) fail(std::string("unexpected character '") + c + "'");
  }
  if (inside) fail("a tag has no end");
  out.push_back({Token::End, ""});
  return out;
}

// ---- trees ----

struct Expr;
using ExprP = std::shared_ptr<Expr>;
struct Expr {
  enum Kind { Literal, Name, Attr, Index, Slice, Call, Filter, Test, Unary, Binary, Ternary, ListLit, DictLit } kind;
  Value value;                 // Literal
  std::string name;            // Name, Attr, Filter, Test, operator
  std::vector<ExprP> args;     // operands, elements, call arguments (for Slice: start, stop, step; null when absent)
  std::vector<std::pair<std::string, ExprP>> kwargs;
  bool negated = false;        // Test: `is not`
};

}  // namespace

struct ChatTemplate::Node {
  enum Kind { Block, Text, Output, If, For, Set, Macro, Break, Continue } kind = Block;
  std::string text;                           // Text; Set/For/Macro target names (comma-joined in For)
  ExprP expr, target, cond;                   // Output, If/Set value, For iterable; Set's attribute target; For's filter
  std::vector<std::unique_ptr<Node>> body;    // Block children; If branches (Blocks); For body, else
  std::vector<ExprP> conds;                   // If: one per branch (null: else)
  std::vector<std::string> params;            // Macro
  std::vector<ExprP> defaults;
};

namespace {

using Node = ChatTemplate::Node;

class Parser {
 public:
  explicit Parser(std::vector<Token> t) : t_(std::move(t)) {}

  std::unique_ptr<Node> document() {
    auto root = block({});
    if (peek().kind != Token::End) fail("unexpected '{% " + peek(1).v + " %}'");
    return root;
  }

 private:
  std::vector<Token> t_;
  size_t at_ = 0;

  const Token& peek(size_t k = 0) const { return t_[std::min(at_ + k, t_.size() - 1)]; }
  Token next() { return t_[at_ < t_.size() - 1 ? at_++ : at_]; }
  bool isOp(const char* op, size_t k = 0) const { return peek(k).kind == Token::Op && peek(k).v == op; }
  bool isName(const char* n, size_t k = 0) const { return peek(k).kind == Token::Name && peek(k).v == n; }
  void expectOp(const char* op) {
    if (!isOp(op)) fail(std::string("expected '") + op + "', found '" + peek().v + "'");
    next();
  }
  std::string name() {
    if (peek().kind != Token::Name) fail("expected a name, found '" + peek().v + "'");
    return next().v;
  }
  void closeTag() {
    if (peek().kind != Token::Close) fail("expected '%}', found '" + peek().v + "'");
    next();
  }

  // Statements until a {% tag %} named in `ends` (left unread), or the end.
  std::unique_ptr<Node> block(const std::vector<std::string>& ends) {
    auto b = std::make_unique<Node>();
    while (true) {
      const Token& tok = peek();
      if (tok.kind == Token::End) {
        if (!ends.empty()) fail("'{% " + ends.back() + " %}' is missing");
        return b;
      }
      if (tok.kind == Token::Text) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Text;
        n->text = next().v;
        b->body.push_back(std::move(n));
        continue;
      }
      if (tok.kind == Token::OpenExpr) {
        next();
        auto n = std::make_unique<Node>();
        n->kind = Node::Output;
        n->expr = expression();
        if (peek().kind != Token::CloseExpr) fail("expected '}}', found '" + peek().v + "'");
        next();
        b->body.push_back(std::move(n));
        continue;
      }
      if (tok.kind != Token::Open) fail("unexpected '" + tok.v + "'");
      const std::string kw = peek(1).v;
      if (std::find(ends.begin(), ends.end(), kw) != ends.end()) return b;
      next();
      next();
      b->body.push_back(statement(kw));
    }
  }

  // A body up to {% end %} into n, and that tag read.
  void bodyTo(Node& n, const char* end) {
    n.body.push_back(block({end}));
    next(), next();
    closeTag();
  }

  std::unique_ptr<Node> statement(const std::string& kw) {
    auto n = std::make_unique<Node>();
    if (kw == "if") {
      n->kind = Node::If;
      n->conds.push_back(expression());
      closeTag();
      while (true) {
        n->body.push_back(block({"elif", "else", "endif"}));
        next();
        const std::string k = next().v;
        if (k == "endif") break;
        n->conds.push_back(k == "elif" ? expression() : nullptr);
        closeTag();
        if (k == "else") {
          bodyTo(*n, "endif");
          return n;
        }
      }
      closeTag();
    } else if (kw == "for") {
      n->kind = Node::For;
      n->text = name();
      while (isOp(",")) next(), n->text += "," + name();
      if (!isName("in")) fail("expected 'in' in a for");
      next();
      n->expr = ternary(false);
      if (isName("if")) next(), n->cond = expression();
      closeTag();
      n->body.push_back(block({"else", "endfor"}));
      if (next(), next().v == "else") {
        closeTag();
        bodyTo(*n, "endfor");
        return n;
      }
      closeTag();
    } else if (kw == "set") {
      n->kind = Node::Set;
      n->text = name();
      if (isOp(".")) {
        next();
        n->target = std::make_shared<Expr>();
        n->target->name = name();
      }
      if (isOp("=")) {
        next();
        n->expr = expression();
        closeTag();
      } else {  // {% set x %}...{% endset %}
        closeTag();
        bodyTo(*n, "endset");
      }
    } else if (kw == "macro") {
      n->kind = Node::Macro;
      n->text = name();
      expectOp("(");
      while (!isOp(")")) {
        n->params.push_back(name());
        n->defaults.push_back(nullptr);
        if (isOp("=")) next(), n->defaults.back() = expression();
        if (!isOp(")")) expectOp(",");
      }
      next();
      closeTag();
      bodyTo(*n, "endmacro");
    } else if (kw == "break" || kw == "continue") {
      n->kind = kw == "break" ? Node::Break : Node::Continue;
      closeTag();
    } else {
      fail("'{% " + kw + " %}' is not a statement tl knows");
    }
    return n;
  }

  static ExprP make(Expr::Kind k, std::string name = "", std::vector<ExprP> args = {}) {
    auto e = std::make_shared<Expr>();
    e->kind = k;
    e->name = std::move(name);
    e->args = std::move(args);
    return e;
  }

  ExprP expression() { return ternary(true); }
  // a if c else b; `withIf` false in a for's iterable, where `if` starts its filter
  ExprP ternary(bool withIf) {
    ExprP a = orExpr();
    if (withIf && isName("if")) {
      next();
      ExprP c = orExpr();
      ExprP b = nullptr;
      if (isName("else")) next(), b = ternary(true);
      return make(Expr::Ternary, "", {c, a, b});
    }
    return a;
  }
  // Left-associative binary operators over `operand`'s expressions: keywords or punctuation.
  ExprP leftAssoc(ExprP (Parser::*operand)(), std::initializer_list<const char*> ops, bool keywords) {
    ExprP a = (this->*operand)();
    while (true) {
      const char* op = nullptr;
      for (const char* o : ops)
        if (keywords ? isName(o) : isOp(o)) op = o;
      if (!op) return a;
      next();
      a = make(Expr::Binary, op, {a, (this->*operand)()});
    }
  }
  ExprP orExpr() { return leftAssoc(&Parser::andExpr, {"or"}, true); }
  ExprP andExpr() { return leftAssoc(&Parser::notExpr, {"and"}, true); }
  ExprP notExpr() {
    if (isName("not")) {
      next();
      return make(Expr::Unary, "not", {notExpr()});
    }
    return compare();
  }
  ExprP compare() {
    ExprP a = concat();
    while (true) {
      static const char* const ops[] = {"==", "!=", "<", ">", "<=", ">="};
      if (peek().kind == Token::Op && std::find_if(std::begin(ops), std::end(ops), [&](const char* o) { return peek().v == o; }) != std::end(ops)) {
        const std::string op = next().v;
        a = make(Expr::Binary, op, {a, concat()});
      } else if (isName("in")) {
        next();
        a = make(Expr::Binary, "in", {a, concat()});
      } else if (isName("not") && isName("in", 1)) {
        next(), next();
        a = make(Expr::Binary, "not in", {a, concat()});
      } else if (isName("is")) {
        next();
        auto t = make(Expr::Test, "", {a});
        if (isName("not")) next(), t->negated = true;
        t->name = name();
        if (isOp("(")) callArgs(*t);
        a = t;
      } else {
        return a;
      }
    }
  }
  ExprP concat() { return leftAssoc(&Parser::additive, {"~"}, false); }
  ExprP additive() { return leftAssoc(&Parser::multiplicative, {"+", "-"}, false); }
  ExprP multiplicative() { return leftAssoc(&Parser::unary, {"*", "/", "//", "%"}, false); }
  ExprP unary() {
    if (isOp("-") || isOp("+")) {
      const std::string op = next().v;
      return make(Expr::Unary, op, {unary()});
    }
    return filtered();
  }
  ExprP filtered() {
    ExprP a = postfix();
    while (isOp("|")) {
      next();
      auto f = make(Expr::Filter, name(), {a});
      if (isOp("(")) callArgs(*f);
      a = f;
    }
    return a;
  }
  void callArgs(Expr& e) {
    expectOp("(");
    while (!isOp(")")) {
      if (peek().kind == Token::Name && isOp("=", 1)) {
        const std::string k = next().v;
        next();
        e.kwargs.emplace_back(k, expression());
      } else {
        e.args.push_back(expression());
      }
      if (!isOp(")")) expectOp(",");
    }
    next();
  }
  ExprP postfix() {
    ExprP a = primary();
    while (true) {
      if (isOp(".")) {
        next();
        a = make(Expr::Attr, name(), {a});
      } else if (isOp("[")) {
        next();
        ExprP parts[3] = {nullptr, nullptr, nullptr};
        int colons = 0;
        while (!isOp("]")) {
          if (isOp(":")) {
            if (++colons > 2) fail("a slice of more than three parts");
            next();
            continue;
          }
          parts[colons] = expression();
        }
        next();
        a = colons ? make(Expr::Slice, "", {a, parts[0], parts[1], parts[2]}) : make(Expr::Index, "", {a, parts[0]});
        if (!colons && !parts[0]) fail("an empty subscript");
      } else if (isOp("(")) {
        auto c = make(Expr::Call, "", {a});
        callArgs(*c);
        a = c;
      } else {
        return a;
      }
    }
  }
  ExprP primary() {
    const Token tok = next();
    if (tok.kind == Token::String) {
      std::string s = tok.v;
      while (peek().kind == Token::String) s += next().v;  // adjacent literals join
      auto e = make(Expr::Literal);
      e->value = Value::str(s);
      return e;
    }
    if (tok.kind == Token::Number) {
      auto e = make(Expr::Literal);
      e->value = tok.v.find('.') != std::string::npos ? Value::real(std::stod(tok.v)) : Value::integer(std::stoll(tok.v));
      return e;
    }
    if (tok.kind == Token::Name) {
      auto e = make(Expr::Literal);
      if (tok.v == "true" || tok.v == "True") e->value = Value::boolean(true);
      else if (tok.v == "false" || tok.v == "False") e->value = Value::boolean(false);
      else if (tok.v == "none" || tok.v == "None") e->value = Value::none();
      else return make(Expr::Name, tok.v);
      return e;
    }
    if (tok.kind == Token::Op && tok.v == "(") {
      ExprP e = expression();
      if (isOp(",")) {  // a tuple: a list
        auto l = make(Expr::ListLit, "", {e});
        while (isOp(",")) {
          next();
          if (isOp(")")) break;
          l->args.push_back(expression());
        }
        e = l;
      }
      expectOp(")");
      return e;
    }
    if (tok.kind == Token::Op && tok.v == "[") {
      auto l = make(Expr::ListLit);
      while (!isOp("]")) {
        l->args.push_back(expression());
        if (!isOp("]")) expectOp(",");
      }
      next();
      return l;
    }
    if (tok.kind == Token::Op && tok.v == "{") {
      auto d = make(Expr::DictLit);
      while (!isOp("}")) {
        d->args.push_back(expression());
        expectOp(":");
        d->args.push_back(expression());
        if (!isOp("}")) expectOp(",");
      }
      next();
      return d;
    }
    fail("unexpected '" + tok.v + "'");
  }
};

// ---- evaluation ----

struct LoopSignal {
  bool isBreak;
};

class Renderer {
 public:
  explicit Renderer(Value globals) { scopes_.push_back(std::move(globals)); }

  void run(const Node& n, std::string& out) {
    switch (n.kind) {
      case Node::Block:
        for (const auto& c : n.body) run(*c, out);
        return;
      case Node::Text: out += n.text; return;
      case Node::Output: out += text(eval(*n.expr)); return;
      case Node::If:
        for (size_t i = 0; i < n.conds.size(); ++i)
          if (!n.conds[i] || truthy(eval(*n.conds[i]))) return run(*n.body[i], out);
        return;
      case Node::Set: {
        Value v;
        if (n.expr) v = eval(*n.expr);
        else {
          std::string s;
          run(*n.body[0], s);
          v = Value::str(s);
        }
        if (!n.target) return set(n.text, v);
        Value ns = lookup(n.text);
        if (ns.kind != Value::Object) fail("'" + n.text + "' is not a namespace to set '" + n.target->name + "' in");
        assign(*ns.dict, n.target->name, v);
        return;
      }
      case Node::For: return loop(n, out);
      case Node::Macro: return macro(n);
      case Node::Break:
      case Node::Continue: throw LoopSignal{n.kind == Node::Break};
    }
  }

 private:
  std::vector<Value> scopes_;  // objects, innermost last

  static void assign(Dict& d, const std::string& k, Value v) {
    for (auto& [key, x] : d)
      if (key == k) {
        x = std::move(v);
        return;
      }
    d.emplace_back(k, std::move(v));
  }
  void set(const std::string& k, Value v) { assign(*scopes_.back().dict, k, std::move(v)); }
  Value lookup(const std::string& k) const {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (const Value* v = it->find(k)) return *v;
    return Value();
  }

  struct Scope {
    Renderer& r;
    explicit Scope(Renderer& r) : r(r) { r.scopes_.push_back(Value::object()); }
    ~Scope() { r.scopes_.pop_back(); }
  };

  static List items(const Value& v) {
    if (v.kind == Value::Array) return *v.list;
    if (v.kind == Value::Object) {
      List keys;
      for (const auto& [k, x] : *v.dict) keys.push_back(Value::str(k));
      return keys;
    }
    if (v.kind == Value::Str) {
      List chars;
      const auto cps = codepoints(v.s);
      for (size_t i = 0; i < cps.size(); ++i) chars.push_back(Value::str(utf8(cps, i, i + 1)));
      return chars;
    }
    fail(std::string("cannot iterate over a ") + kindName(v));
  }

  void loop(const Node& n, std::string& out) {
    const Value seq = eval(*n.expr);
    List all = seq.kind == Value::Undefined ? List{} : items(seq);
    std::vector<std::string> names;
    for (size_t a = 0, b; a <= n.text.size(); a = b + 1) {
      b = n.text.find(',', a);
      if (b == std::string::npos) b = n.text.size();
      names.push_back(n.text.substr(a, b - a));
    }
    auto bind = [&](const Value& x) {
      if (names.size() == 1) return set(names[0], x);
      if (x.kind != Value::Array || x.list->size() != names.size()) fail("cannot unpack a " + std::string(kindName(x)) + " into " + n.text);
      for (size_t k = 0; k < names.size(); ++k) set(names[k], (*x.list)[k]);
    };
    if (n.cond) {  // {% for x in xs if c %}: the loop runs over those that pass
      List kept;
      for (const auto& x : all) {
        Scope s(*this);
        bind(x);
        if (truthy(eval(*n.cond))) kept.push_back(x);
      }
      all = std::move(kept);
    }
    if (all.empty()) {
      if (n.body.size() > 1) run(*n.body[1], out);
      return;
    }
    Scope s(*this);
    for (size_t k = 0; k < all.size(); ++k) {
      const auto len = static_cast<int64_t>(all.size()), i = static_cast<int64_t>(k);
      set("loop", Value::object({{"index", Value::integer(i + 1)}, {"index0", Value::integer(i)},
                                 {"first", Value::boolean(k == 0)}, {"last", Value::boolean(k + 1 == all.size())},
                                 {"length", Value::integer(len)}, {"revindex", Value::integer(len - i)},
                                 {"revindex0", Value::integer(len - i - 1)},
                                 {"previtem", k ? all[k - 1] : Value()}, {"nextitem", k + 1 < all.size() ? all[k + 1] : Value()}}));
      bind(all[k]);
      try {
        run(*n.body[0], out);
      } catch (const LoopSignal& sig) {
        if (sig.isBreak) break;
      }
    }
  }

  void macro(const Node& n) {
    const Node* body = n.body[0].get();
    auto params = n.params;
    std::vector<Value> defaults;
    for (const auto& d : n.defaults) defaults.push_back(d ? eval(*d) : Value());
    set(n.text, Value::function([this, body, params, defaults](Args& args, Kwargs& kwargs) {
          Scope s(*this);
          for (size_t k = 0; k < params.size(); ++k) set(params[k], k < args.size() ? args[k] : defaults[k]);
          for (auto& [k, v] : kwargs) set(k, v);
          std::string out;
          run(*body, out);
          return Value::str(out);
        }));
  }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::Literal: return e.value;
      case Expr::Name: return lookup(e.name);
      case Expr::ListLit: {
        List l;
        for (const auto& a : e.args) l.push_back(eval(*a));
        return Value::array(std::move(l));
      }
      case Expr::DictLit: {
        Dict d;
        for (size_t k = 0; k + 1 < e.args.size(); k += 2) {
          const Value key = eval(*e.args[k]);
          if (key.kind != Value::Str) fail("a dict key that is not a string");
          assign(d, key.s, eval(*e.args[k + 1]));
        }
        return Value::object(std::move(d));
      }
      case Expr::Attr: return member(eval(*e.args[0]), e.name);
      case Expr::Index: {
        const Value obj = eval(*e.args[0]), key = eval(*e.args[1]);
        if (key.kind == Value::Str) return member(obj, key.s);
        if (key.kind != Value::Int) fail(std::string("an index that is a ") + kindName(key));
        return index(obj, key.i);
      }
      case Expr::Slice: return slice(eval(*e.args[0]), e.args[1], e.args[2], e.args[3]);
      case Expr::Call: {
        const Value f = eval(*e.args[0]);
        Args args;
        Kwargs kwargs;
        for (size_t k = 1; k < e.args.size(); ++k) args.push_back(eval(*e.args[k]));
        for (const auto& [k, v] : e.kwargs) kwargs.emplace_back(k, eval(*v));
        if (f.kind != Value::Function) fail(e.args[0]->kind == Expr::Name ? "'" + e.args[0]->name + "' is not a function" : "a call of a value that is not a function");
        return (*f.fn)(args, kwargs);
      }
      case Expr::Filter: {
        Args args = {eval(*e.args[0])};
        Kwargs kwargs;
        for (size_t k = 1; k < e.args.size(); ++k) args.push_back(eval(*e.args[k]));
        for (const auto& [k, v] : e.kwargs) kwargs.emplace_back(k, eval(*v));
        return filter(e.name, args, kwargs);
      }
      case Expr::Test: {
        const Value v = eval(*e.args[0]);
        Args args;
        for (size_t k = 1; k < e.args.size(); ++k) args.push_back(eval(*e.args[k]));
        return Value::boolean(test(e.name, v, args) != e.negated);
      }
      case Expr::Unary: {
        const Value v = eval(*e.args[0]);
        if (e.name == "not") return Value::boolean(!truthy(v));
        if (!v.number()) fail(std::string("unary ") + e.name + " of a " + kindName(v));
        if (e.name == "+") return v;
        return v.kind == Value::Int ? Value::integer(-v.i) : Value::real(-v.f);
      }
      case Expr::Ternary: {
        if (truthy(eval(*e.args[0]))) return eval(*e.args[1]);
        return e.args[2] ? eval(*e.args[2]) : Value();
      }
      case Expr::Binary: {
        if (e.name == "and") {
          Value a = eval(*e.args[0]);
          return truthy(a) ? eval(*e.args[1]) : a;
        }
        if (e.name == "or") {
          Value a = eval(*e.args[0]);
          return truthy(a) ? a : eval(*e.args[1]);
        }
        return binary(e.name, eval(*e.args[0]), eval(*e.args[1]));
      }
    }
    return Value();
  }

  static Value index(const Value& obj, int64_t k) {
    if (obj.kind == Value::Array) {
      const auto n = static_cast<int64_t>(obj.list->size());
      if (k < 0) k += n;
      return k >= 0 && k < n ? (*obj.list)[static_cast<size_t>(k)] : Value();
    }
    if (obj.kind == Value::Str) {
      const auto cps = codepoints(obj.s);
      const auto n = static_cast<int64_t>(cps.size());
      if (k < 0) k += n;
      return k >= 0 && k < n ? Value::str(utf8(cps, static_cast<size_t>(k), static_cast<size_t>(k) + 1)) : Value();
    }
    if (obj.kind == Value::Undefined) fail("an index into an undefined value");
    fail(std::string("an index into a ") + kindName(obj));
  }

  Value slice(const Value& obj, const ExprP& a, const ExprP& b, const ExprP& c) {
    const Value va = a ? eval(*a) : Value(), vb = b ? eval(*b) : Value(), vc = c ? eval(*c) : Value();
    const int64_t step = vc.kind == Value::Int ? vc.i : 1;
    if (step == 0) fail("a slice step of 0");
    std::vector<int64_t> picks;
    const bool str = obj.kind == Value::Str;
    const auto cps = str ? codepoints(obj.s) : std::vector<int32_t>{};
    if (!str && obj.kind != Value::Array) fail(std::string("a slice of a ") + kindName(obj));
    const auto n = static_cast<int64_t>(str ? cps.size() : obj.list->size());
    auto norm = [&](const Value& v, int64_t otherwise) {
      if (v.kind != Value::Int) return otherwise;
      int64_t x = v.i < 0 ? v.i + n : v.i;
      return step > 0 ? std::clamp<int64_t>(x, 0, n) : std::clamp<int64_t>(x, -1, n - 1);
    };
    const int64_t from = norm(va, step > 0 ? 0 : n - 1), to = norm(vb, step > 0 ? n : -1);
    for (int64_t k = from; step > 0 ? k < to : k > to; k += step) picks.push_back(k);
    if (str) {
      std::string s;
      for (int64_t k : picks) s += utf8(cps, static_cast<size_t>(k), static_cast<size_t>(k) + 1);
      return Value::str(s);
    }
    List l;
    for (int64_t k : picks) l.push_back((*obj.list)[static_cast<size_t>(k)]);
    return Value::array(std::move(l));
  }

  static Value binary(const std::string& op, const Value& a, const Value& b) {
    if (op == "==") return Value::boolean(equal(a, b));
    if (op == "!=") return Value::boolean(!equal(a, b));
    if (op == "in" || op == "not in") {
      bool found = false;
      if (b.kind == Value::Str && a.kind == Value::Str) found = b.s.find(a.s) != std::string::npos;
      else if (b.kind == Value::Array) found = std::any_of(b.list->begin(), b.list->end(), [&](const Value& x) { return equal(x, a); });
      else if (b.kind == Value::Object && a.kind == Value::Str) found = b.find(a.s) != nullptr;
      else if (b.kind != Value::Undefined && b.kind != Value::None) fail(std::string("'in' a ") + kindName(b));
      return Value::boolean(found == (op == "in"));
    }
    if (op == "~") return Value::str(text(a) + text(b));
    if (op == "+" && (a.kind == Value::Str || b.kind == Value::Str)) {
      if (a.kind == Value::Undefined || b.kind == Value::Undefined) fail("'+' of an undefined value");
      return Value::str(text(a) + text(b));
    }
    if (op == "+" && a.kind == Value::Array && b.kind == Value::Array) {
      List l = *a.list;
      l.insert(l.end(), b.list->begin(), b.list->end());
      return Value::array(std::move(l));
    }
    if (op == "<" || op == ">" || op == "<=" || op == ">=") {
      int c = 0;
      if (a.number() && b.number()) c = a.num() < b.num() ? -1 : a.num() > b.num() ? 1 : 0;
      else if (a.kind == Value::Str && b.kind == Value::Str) c = a.s.compare(b.s);
      else fail(std::string("'") + op + "' between a " + kindName(a) + " and a " + kindName(b));
      return Value::boolean(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
    }
    if (!a.number() || !b.number()) fail(std::string("'") + op + "' between a " + kindName(a) + " and a " + kindName(b));
    const bool ints = a.kind == Value::Int && b.kind == Value::Int;
    if (op == "+") return ints ? Value::integer(a.i + b.i) : Value::real(a.num() + b.num());
    if (op == "-") return ints ? Value::integer(a.i - b.i) : Value::real(a.num() - b.num());
    if (op == "*") return ints ? Value::integer(a.i * b.i) : Value::real(a.num() * b.num());
    if (op == "/") return Value::real(a.num() / b.num());
    if (b.num() == 0) fail("a division by zero");
    if (op == "//") return ints ? Value::integer(static_cast<int64_t>(std::floor(a.num() / b.num()))) : Value::real(std::floor(a.num() / b.num()));
    if (op == "%") {
      if (ints) return Value::integer(a.i % b.i);  // (JavaScript's remainder: the dividend's sign)
      return Value::real(std::fmod(a.num(), b.num()));
    }
    fail("operator '" + op + "'");
  }

  // obj.name: a key of a dict, or a method of a string, list or dict.
  Value member(const Value& obj, const std::string& name) {
    if (obj.kind == Value::Object)
      if (const Value* v = obj.find(name)) return *v;
    if (obj.kind == Value::Str) return stringMethod(obj.s, name);
    if (obj.kind == Value::Object) {
      const Value self = obj;
      if (name == "items" || name == "keys" || name == "values")
        return Value::function([self, name](Args&, Kwargs&) {
          List l;
          for (const auto& [k, v] : *self.dict)
            l.push_back(name == "items" ? Value::array({Value::str(k), v}) : name == "keys" ? Value::str(k) : v);
          return Value::array(std::move(l));
        });
      if (name == "get")
        return Value::function([self](Args& a, Kwargs&) {
          if (a.empty() || a[0].kind != Value::Str) fail("get() takes a key");
          const Value* v = self.find(a[0].s);
          return v ? *v : a.size() > 1 ? a[1] : Value::none();
        });
      return Value();
    }
    if (obj.kind == Value::Array && name == "append") {
      const Value self = obj;
      return Value::function([self](Args& a, Kwargs&) {
        for (auto& x : a) self.list->push_back(x);
        return Value::none();
      });
    }
    if (obj.kind == Value::Undefined) fail("'" + name + "' of an undefined value");
    return Value();
  }

  static Value stringMethod(const std::string& s, const std::string& name) {
    if (name == "strip" || name == "lstrip" || name == "rstrip")
      return Value::function([s, name](Args&, Kwargs&) {
        return Value::str(stripped(s, name != "rstrip", name != "lstrip"));
      });
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize")
      return Value::function([s, name](Args&, Kwargs&) {
        return Value::str(mapCase(s, name == "lower" ? 0 : name == "upper" ? 1 : name == "title" ? 2 : 3));
      });
    if (name == "startswith" || name == "endswith")
      return Value::function([s, name](Args& a, Kwargs&) {
        List options = !a.empty() && a[0].kind == Value::Array ? *a[0].list : a;
        for (const auto& o : options) {
          if (o.kind != Value::Str) fail(name + "() takes strings");
          if (o.s.size() <= s.size() && s.compare(name == "startswith" ? 0 : s.size() - o.s.size(), o.s.size(), o.s) == 0)
            return Value::boolean(true);
        }
        return Value::boolean(false);
      });
    if (name == "split")
      return Value::function([s](Args& a, Kwargs&) {
        List parts;
        const int64_t most = a.size() > 1 && a[1].kind == Value::Int ? a[1].i : -1;
        if (a.empty() || a[0].kind == Value::None) {  // runs of whitespace
          const auto cps = codepoints(s);
          size_t k = 0;
          while (k < cps.size()) {
            while (k < cps.size() && jsSpace(cps[k])) ++k;
            if (k >= cps.size()) break;
            size_t e = k;
            if (most >= 0 && static_cast<int64_t>(parts.size()) == most) e = cps.size();
            else while (e < cps.size() && !jsSpace(cps[e])) ++e;
            parts.push_back(Value::str(utf8(cps, k, e)));
            k = e;
          }
          return Value::array(std::move(parts));
        }
        if (a[0].kind != Value::Str || a[0].s.empty()) fail("split() takes a separator that is a non-empty string");
        size_t from = 0;
        for (size_t at; (most < 0 || static_cast<int64_t>(parts.size()) < most) && (at = s.find(a[0].s, from)) != std::string::npos;
             from = at + a[0].s.size())
          parts.push_back(Value::str(s.substr(from, at - from)));
        parts.push_back(Value::str(s.substr(from)));
        return Value::array(std::move(parts));
      });
    if (name == "replace")
      return Value::function([s](Args& a, Kwargs&) {
        if (a.size() < 2 || a[0].kind != Value::Str || a[1].kind != Value::Str) fail("replace() takes two strings");
        return Value::str(replaced(s, a[0].s, a[1].s, a.size() > 2 && a[2].kind == Value::Int ? a[2].i : -1));
      });
    fail("string method '" + name + "' is not one tl knows");
  }

  Value filter(const std::string& name, Args& a, Kwargs& kw) {
    const Value& v = a[0];
    auto need = [&](Value::Kind k) {
      if (v.kind != k) fail("filter '" + name + "' of a " + kindName(v));
    };
    if (name == "trim") return need(Value::Str), Value::str(stripped(v.s, true, true));
    if (name == "length" || name == "count") {
      if (v.kind == Value::Str) return Value::integer(utf16Length(v.s));
      if (v.kind == Value::Array) return Value::integer(static_cast<int64_t>(v.list->size()));
      if (v.kind == Value::Object) return Value::integer(static_cast<int64_t>(v.dict->size()));
      fail("filter 'length' of a " + std::string(kindName(v)));
    }
    if (name == "upper" || name == "lower" || name == "title" || name == "capitalize")
      return need(Value::Str), Value::str(mapCase(v.s, name == "lower" ? 0 : name == "upper" ? 1 : name == "title" ? 2 : 3));
    if (name == "string") return Value::str(text(v));
    if (name == "safe") return v;
    if (name == "int") {
      if (v.number()) return Value::integer(static_cast<int64_t>(v.num()));
      if (v.kind == Value::Str) {
        char* end = nullptr;
        const long long x = std::strtoll(v.s.c_str(), &end, 10);
        return Value::integer(*end ? 0 : x);
      }
      return Value::integer(0);
    }
    if (name == "float") return Value::real(v.number() ? v.num() : v.kind == Value::Str ? std::strtod(v.s.c_str(), nullptr) : 0.0);
    if (name == "abs") {
      if (!v.number()) fail("filter 'abs' of a " + std::string(kindName(v)));
      return v.kind == Value::Int ? Value::integer(std::llabs(v.i)) : Value::real(std::fabs(v.f));
    }
    if (name == "default" || name == "d") {
      const bool boolean = (a.size() > 2 && truthy(a[2])) || std::any_of(kw.begin(), kw.end(), [](auto& p) { return p.first == "boolean" && truthy(p.second); });
      if (v.kind == Value::Undefined || (boolean && !truthy(v))) return a.size() > 1 ? a[1] : Value::str("");
      return v;
    }
    if (name == "first" || name == "last") {
      const List l = items(v);
      if (l.empty()) return Value();
      return name == "first" ? l.front() : l.back();
    }
    if (name == "list") return Value::array(items(v));
    if (name == "reverse") {
      if (v.kind == Value::Str) {
        auto cps = codepoints(v.s);
        std::reverse(cps.begin(), cps.end());
        return Value::str(utf8(cps));
      }
      List l = items(v);
      std::reverse(l.begin(), l.end());
      return Value::array(std::move(l));
    }
    if (name == "join") {
      const std::string sep = a.size() > 1 && a[1].kind == Value::Str ? a[1].s : "";
      std::string s;
      const List l = items(v);
      for (size_t k = 0; k < l.size(); ++k) s += (k ? sep : "") + text(l[k]);
      return Value::str(s);
    }
    if (name == "items") {
      need(Value::Object);
      List l;
      for (const auto& [k, x] : *v.dict) l.push_back(Value::array({Value::str(k), x}));
      return Value::array(std::move(l));
    }
    if (name == "replace") {
      need(Value::Str);
      if (a.size() < 3 || a[1].kind != Value::Str || a[2].kind != Value::Str) fail("filter 'replace' takes two strings");
      return Value::str(replaced(v.s, a[1].s, a[2].s));
    }
    if (name == "tojson") {
      int indent = 0;
      for (const auto& [k, x] : kw)
        if (k == "indent" && x.kind == Value::Int) indent = static_cast<int>(x.i);
      if (a.size() > 1 && a[1].kind == Value::Int) indent = static_cast<int>(a[1].i);
      return Value::str(jsonText(v, indent, 0));
    }
    if (name == "selectattr" || name == "rejectattr" || name == "map") {
      const List l = items(v);
      List out;
      if (name == "map") {
        std::string attr;
        for (const auto& [k, x] : kw)
          if (k == "attribute" && x.kind == Value::Str) attr = x.s;
        if (attr.empty()) {
          if (a.size() < 2 || a[1].kind != Value::Str) fail("filter 'map' takes attribute= or a filter name");
          for (const auto& x : l) {
            Args fa = {x};
            Kwargs none;
            out.push_back(filter(a[1].s, fa, none));
          }
        } else {
          for (const auto& x : l) out.push_back(member(x, attr));
        }
        return Value::array(std::move(out));
      }
      if (a.size() < 2 || a[1].kind != Value::Str) fail("filter '" + name + "' takes an attribute name");
      for (const auto& x : l) {
        const Value attr = member(x, a[1].s);
        Args targs(a.begin() + std::min<ptrdiff_t>(3, static_cast<ptrdiff_t>(a.size())), a.end());
        const bool pass = a.size() > 2 && a[2].kind == Value::Str ? test(a[2].s, attr, targs) : truthy(attr);
        if (pass == (name == "selectattr")) out.push_back(x);
      }
      return Value::array(std::move(out));
    }
    fail("filter '" + name + "' is not one tl knows");
  }

  static bool test(const std::string& name, const Value& v, const Args& args) {
    if (name == "defined") return v.kind != Value::Undefined;
    if (name == "undefined") return v.kind == Value::Undefined;
    if (name == "none") return v.kind == Value::None;
    if (name == "string") return v.kind == Value::Str;
    if (name == "number") return v.number();
    if (name == "integer") return v.kind == Value::Int;
    if (name == "float") return v.kind == Value::Float;
    if (name == "boolean") return v.kind == Value::Bool;
    if (name == "true") return v.kind == Value::Bool && v.b;
    if (name == "false") return v.kind == Value::Bool && !v.b;
    if (name == "mapping") return v.kind == Value::Object;
    if (name == "iterable" || name == "sequence") return v.kind == Value::Array || v.kind == Value::Str || v.kind == Value::Object;
    if (name == "callable") return v.kind == Value::Function;
    if (name == "odd" || name == "even") {
      if (v.kind != Value::Int) fail("test '" + name + "' of a " + kindName(v));
      return (v.i % 2 != 0) == (name == "odd");
    }
    if (name == "equalto" || name == "eq" || name == "==") return !args.empty() && equal(v, args[0]);
    if (name == "ne" || name == "!=") return !args.empty() && !equal(v, args[0]);
    if (name == "lower") return v.kind == Value::Str && mapCase(v.s, 0) == v.s;
    if (name == "upper") return v.kind == Value::Str && mapCase(v.s, 1) == v.s;
    fail("test '" + name + "' is not one tl knows");
  }
};

Value builtins(Value context) {
  auto set = [&](const std::string& k, Value v) {
    if (!context.find(k)) context.dict->emplace_back(k, std::move(v));
  };
  set("raise_exception", Value::function([](Args& a, Kwargs&) -> Value {
        throw Error("chat template raised: " + (a.empty() ? std::string("(no message)") : text(a[0])), ExitCode::BadInput);
      }));
  const Value keywords = Value::function([](Args&, Kwargs& kw) {  // namespace(a=1) and dict(a=1)
    Dict d;
    for (auto& [k, v] : kw) d.emplace_back(k, v);
    return Value::object(std::move(d));
  });
  set("namespace", keywords);
  set("dict", keywords);
  set("range", Value::function([](Args& a, Kwargs&) {
        for (const auto& x : a)
          if (x.kind != Value::Int) fail("range() takes integers");
        const int64_t from = a.size() > 1 ? a[0].i : 0, to = a.size() > 1 ? a[1].i : a.empty() ? 0 : a[0].i,
                      step = a.size() > 2 ? a[2].i : 1;
        if (step == 0) fail("range() step of 0");
        List l;
        for (int64_t k = from; step > 0 ? k < to : k > to; k += step) l.push_back(Value::integer(k));
        return Value::array(std::move(l));
      }));
  set("strftime_now", Value::function([](Args& a, Kwargs&) {
        if (a.empty() || a[0].kind != Value::Str) fail("strftime_now() takes a format");
        const std::time_t now = std::time(nullptr);
        std::tm tm{};
        localtime_r(&now, &tm);
        char buf[256];
        return Value::str(std::string(buf, std::strftime(buf, sizeof buf, a[0].s.c_str(), &tm)));
      }));
  return context;
}

}  // namespace

ChatTemplate::ChatTemplate(const std::string& source) : root_(Parser(lex(source)).document()) {}
ChatTemplate::ChatTemplate(ChatTemplate&&) noexcept = default;
ChatTemplate::~ChatTemplate() = default;

std::string ChatTemplate::render(const std::string& context) const {
  json j;
  try {
    j = json::parse(context);
  } catch (const json::exception& e) {
    fail(std::string("context is not JSON: ") + e.what());
  }
  if (!j.is_object()) fail("context is not a JSON object");
  Renderer r(builtins(fromJson(j)));
  std::string out;
  try {
    r.run(*root_, out);
  } catch (const LoopSignal&) {
    fail("break or continue outside a loop");
  }
  return out;
}

ChatConfig readChatConfig(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error("cannot open", ExitCode::BadInput);
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    throw Error(std::string("not JSON: ") + e.what(), ExitCode::BadInput);
  }
  ChatConfig c;
  const json t = j.value("chat_template", json());
  if (t.is_string()) {
    c.source = t.get<std::string>();
  } else if (t.is_array()) {
    for (const auto& named : t)
      if (named.value("name", "") == "default") c.source = named.value("template", "");
  }
  if (c.source.empty()) throw Error("no chat_template (or none named 'default')", ExitCode::BadInput);
  json tokens = json::object();
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    if (k.size() < 6 || k.compare(k.size() - 6, 6, "_token") != 0) continue;
    if (it->is_string()) tokens[k] = *it;
    else if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) tokens[k] = (*it)["content"];
  }
  c.tokens = tokens.dump();
  return c;
}

std::string chatToken(const ChatConfig& config, const std::string& name) {
  const json tokens = json::parse(config.tokens);
  return tokens.contains(name) ? tokens[name].get<std::string>() : std::string();
}

std::string chatContext(const ChatConfig& config, const std::string& request) {
  json r, tokens = json::parse(config.tokens);
  try {
    r = json::parse(request);
  } catch (const json::exception& e) {
    fail(std::string("the request is not JSON: ") + e.what());
  }
  if (!r.is_object()) fail("the request is not a JSON object");
  for (auto it = tokens.begin(); it != tokens.end(); ++it)
    if (!r.contains(it.key())) r[it.key()] = it.value();
  return r.dump();
}

}  // namespace tl
