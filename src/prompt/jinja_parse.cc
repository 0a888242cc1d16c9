// Jinja2 lexer and parser: template text -> internal::Tree.
//
// Lexing follows Jinja2's default Environment: the source's line breaks are normalised the way
// str.splitlines() + "\n".join() does (which also drops one trailing line break unless
// keep_trailing_newline), then data, {{ }}, {% %} and {# #} are split with `-` whitespace control, optional
// trim_blocks / lstrip_blocks, and raw blocks. Expressions are parsed with Jinja2's precedence:
// conditional < or < and < not < comparison < +,- < ~ < *,/,//,% < ** < unary < postfix/filters/tests.
#include <algorithm>
#include <cstring>
#include <map>

#include "jinja_ast.h"
#include "jinja_internal.h"
#include "strata/json/json_writer.h"
#include "strata/prompt/jinja.h"

namespace strata::prompt {
namespace internal {
namespace {

// --- Source normalisation ------------------------------------------------------------------------------

// Returns the length of the line break at `s[i]` (str.splitlines rules), or 0.
size_t LineBreakAt(std::string_view s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  if (c == '\r') return i + 1 < s.size() && s[i + 1] == '\n' ? 2 : 1;
  if (c == '\n' || c == '\v' || c == '\f' || c == 0x1c || c == 0x1d || c == 0x1e) return 1;
  if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x85) return 2;  // U+0085
  if (c == 0xE2 && i + 2 < s.size() && static_cast<unsigned char>(s[i + 1]) == 0x80 &&
      (static_cast<unsigned char>(s[i + 2]) == 0xA8 || static_cast<unsigned char>(s[i + 2]) == 0xA9)) {
    return 3;  // U+2028, U+2029
  }
  return 0;
}

std::string NormaliseNewlines(std::string_view source, bool keep_trailing_newline) {
  std::string out;
  out.reserve(source.size());
  bool ended_with_break = false;
  for (size_t i = 0; i < source.size();) {
    size_t n = LineBreakAt(source, i);
    if (n > 0) {
      out.push_back('\n');
      i += n;
      ended_with_break = i == source.size();
    } else {
      out.push_back(source[i++]);
    }
  }
  if (ended_with_break && !keep_trailing_newline) out.pop_back();
  return out;
}

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

// --- Segments ------------------------------------------------------------------------------------------

struct Segment {
  enum class Kind { kText, kVar, kBlock } kind;
  std::string content;  // Text, or the inside of the tag (without delimiters and `-`).
  int line;
};

// The 1-based line of byte `pos`, counted on from an earlier (pos, line) so that a scan through a template
// counts each newline once.
class LineCounter {
 public:
  explicit LineCounter(std::string_view s) : s_(s) {}
  int At(size_t pos) {
    pos = std::min(pos, s_.size());
    if (pos < pos_) {  // Never happens in a forward scan; start again.
      pos_ = 0;
      line_ = 1;
    }
    for (; pos_ < pos; ++pos_) line_ += s_[pos_] == '\n';
    return line_;
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
  int line_ = 1;
};

// Finds the end of a {{ or {% tag starting at `pos` (just after the opening delimiter): returns the index of
// the closing delimiter ("}}" or "%}", possibly preceded by '-'), skipping string literals.
Result<size_t> FindTagEnd(std::string_view s, size_t pos, char close, int line) {
  for (size_t i = pos; i + 1 < s.size(); ++i) {
    char c = s[i];
    if (c == '"' || c == '\'') {
      size_t j = i + 1;
      while (j < s.size() && s[j] != c) j += s[j] == '\\' ? 2 : 1;
      if (j >= s.size()) return Status::InvalidArgument("line " + std::to_string(line) + ": unterminated string");
      i = j;
      continue;
    }
    if (c == close && s[i + 1] == '}') return i;
  }
  return Status::InvalidArgument("line " + std::to_string(line) + ": unexpected end of template, expected '" +
                                 std::string(1, close) + "}'");
}

Result<std::vector<Segment>> Split(const std::string& s, const JinjaOptions& options) {
  std::vector<Segment> out;
  LineCounter lines(s);
  std::string text;
  bool strip_next = false;  // The previous tag ended with '-'.
  bool trim_newline = false;  // trim_blocks after a block tag.
  size_t i = 0;
  size_t text_start = 0;  // Where the text being collected began in `s`.
  auto flush_text = [&](bool strip_trailing, bool lstrip) {
    if (strip_trailing) {
      while (!text.empty() && IsSpace(text.back())) text.pop_back();
    } else if (lstrip) {
      // lstrip_blocks: spaces and tabs between the start of the line and the tag.
      size_t k = text.size();
      while (k > 0 && (text[k - 1] == ' ' || text[k - 1] == '\t')) --k;
      if ((k > 0 && text[k - 1] == '\n') || (k == 0 && text_start == 0)) text.resize(k);
    }
    if (!text.empty()) out.push_back({Segment::Kind::kText, text, 0});
    text.clear();
  };
  while (i < s.size()) {
    if (text.empty()) text_start = i;
    size_t open = s.find('{', i);
    while (open != std::string::npos && open + 1 < s.size() && s[open + 1] != '{' && s[open + 1] != '%' &&
           s[open + 1] != '#') {
      open = s.find('{', open + 1);
    }
    if (open == std::string::npos || open + 1 >= s.size()) open = s.size();
    std::string_view chunk(s.data() + i, open - i);
    if (strip_next) {
      size_t k = 0;
      while (k < chunk.size() && IsSpace(chunk[k])) ++k;
      chunk.remove_prefix(k);
      strip_next = false;
    }
    if (trim_newline) {
      if (!chunk.empty() && chunk[0] == '\n') chunk.remove_prefix(1);
      trim_newline = false;
    }
    text.append(chunk);
    if (open >= s.size()) break;
    char kind = s[open + 1];
    int line = lines.At(open);
    size_t inner = open + 2;
    bool minus_before = inner < s.size() && s[inner] == '-';
    bool plus_before = inner < s.size() && s[inner] == '+';
    if (minus_before || plus_before) ++inner;
    if (kind == '#') {
      size_t close = s.find("#}", inner);
      if (close == std::string::npos) {
        return Status::InvalidArgument("line " + std::to_string(line) + ": unterminated comment");
      }
      bool minus_after = close > inner && s[close - 1] == '-';
      flush_text(minus_before, options.lstrip_blocks && !plus_before);
      strip_next = minus_after;
      i = close + 2;
      continue;
    }
    char close_char = kind == '{' ? '}' : '%';
    STRATA_ASSIGN_OR_RETURN(size_t close, FindTagEnd(s, inner, close_char, line));
    bool minus_after = close > inner && s[close - 1] == '-';
    std::string content = s.substr(inner, close - inner - (minus_after ? 1 : 0));
    bool is_block = kind == '%';
    flush_text(minus_before, is_block && options.lstrip_blocks && !plus_before);
    i = close + 2;
    strip_next = minus_after;
    if (is_block) {
      size_t b = content.find_first_not_of(" \t\n\r");
      size_t e = content.find_last_not_of(" \t\n\r");
      std::string word = b == std::string::npos ? "" : content.substr(b, e - b + 1);
      if (word == "raw") {
        // Everything up to {% endraw %} is text.
        size_t search = i;
        while (true) {
          size_t end_open = s.find("{%", search);
          if (end_open == std::string::npos) {
            return Status::InvalidArgument("line " + std::to_string(line) + ": missing '{% endraw %}'");
          }
          size_t p = end_open + 2;
          bool end_minus_before = p < s.size() && s[p] == '-';
          if (end_minus_before || (p < s.size() && s[p] == '+')) ++p;
          while (p < s.size() && IsSpace(s[p])) ++p;
          if (s.compare(p, 6, "endraw") == 0) {
            p += 6;
            while (p < s.size() && IsSpace(s[p])) ++p;
            bool end_minus_after = p < s.size() && s[p] == '-';
            if (end_minus_after) ++p;
            if (s.compare(p, 2, "%}") == 0) {
              std::string raw = s.substr(i, end_open - i);
              if (minus_after) {
                size_t k = 0;
                while (k < raw.size() && IsSpace(raw[k])) ++k;
                raw.erase(0, k);
              }
              if (end_minus_before) {
                while (!raw.empty() && IsSpace(raw.back())) raw.pop_back();
              }
              text += raw;
              i = p + 2;
              strip_next = end_minus_after;
              trim_newline = options.trim_blocks;
              break;
            }
          }
          search = end_open + 2;
        }
        continue;
      }
      trim_newline = options.trim_blocks;
    }
    out.push_back({is_block ? Segment::Kind::kBlock : Segment::Kind::kVar, std::move(content), line});
  }
  flush_text(false, false);
  return out;
}

// --- Expression tokens ---------------------------------------------------------------------------------

struct Token {
  enum class Kind { kName, kString, kInt, kFloat, kOp, kEnd } kind;
  std::string text;
  Value value;
};

Result<std::vector<Token>> Tokenize(std::string_view s, int line) {
  std::vector<Token> out;
  auto error = [&](const std::string& what) { return Status::InvalidArgument("line " + std::to_string(line) + ": " + what); };
  size_t i = 0;
  while (i < s.size()) {
    char c = s[i];
    if (IsSpace(c)) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_' || static_cast<unsigned char>(c) >= 0x80) {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_' ||
                              static_cast<unsigned char>(s[j]) >= 0x80)) {
        ++j;
      }
      out.push_back({Token::Kind::kName, std::string(s.substr(i, j - i)), Value()});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool is_float = false;
      std::string digits;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) {
        if (s[j] != '_') digits += s[j];
        ++j;
      }
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        is_float = true;
        digits += s[j++];
        while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) {
          if (s[j] != '_') digits += s[j];
          ++j;
        }
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          is_float = true;
          digits += std::string(s.substr(j, k - j));
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) digits += s[j++];
        }
      }
      if (is_float) {
        out.push_back({Token::Kind::kFloat, digits, Value(std::strtod(digits.c_str(), nullptr))});
      } else {
        errno = 0;
        long long v = std::strtoll(digits.c_str(), nullptr, 10);
        if (errno == ERANGE) return error("integer literal too large: " + digits);
        out.push_back({Token::Kind::kInt, digits, Value(static_cast<int64_t>(v))});
      }
      i = j;
      continue;
    }
    if (c == '"' || c == '\'') {
      std::string value;
      size_t j = i + 1;
      while (j < s.size() && s[j] != c) {
        if (s[j] == '\\' && j + 1 < s.size()) {
          char e = s[j + 1];
          j += 2;
          switch (e) {
            case 'n': value += '\n'; break;
            case 't': value += '\t'; break;
            case 'r': value += '\r'; break;
            case '\\': value += '\\'; break;
            case '\'': value += '\''; break;
            case '"': value += '"'; break;
            case '0': value += '\0'; break;
            case 'a': value += '\a'; break;
            case 'b': value += '\b'; break;
            case 'f': value += '\f'; break;
            case 'v': value += '\v'; break;
            case '\n': break;
            case 'x':
            case 'u':
            case 'U': {
              size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
              if (j + n > s.size()) return error("truncated \\" + std::string(1, e) + " escape");
              uint32_t cp = static_cast<uint32_t>(std::strtoul(std::string(s.substr(j, n)).c_str(), nullptr, 16));
              j += n;
              AppendUtf8(cp, &value);
              break;
            }
            default: value += '\\'; value += e;
          }
          continue;
        }
        value += s[j++];
      }
      if (j >= s.size()) return error("unterminated string");
      out.push_back({Token::Kind::kString, "", Value(std::move(value))});
      i = j + 1;
      continue;
    }
    static const char* kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "=",
                                 "(", ")", "[", "]", "{", "}", ".", ",", ":", "|", ";"};
    bool matched = false;
    for (const char* op : kOps) {
      size_t n = std::strlen(op);
      if (s.compare(i, n, op) == 0) {
        out.push_back({Token::Kind::kOp, op, Value()});
        i += n;
        matched = true;
        break;
      }
    }
    if (!matched) return error("unexpected character '" + std::string(1, c) + "'");
  }
  out.push_back({Token::Kind::kEnd, "", Value()});
  return out;
}

// --- Expression parser ---------------------------------------------------------------------------------

// Counts one level of recursion for as long as it lives.
class DepthGuard {
 public:
  explicit DepthGuard(int* depth) : depth_(depth) { ++*depth_; }
  ~DepthGuard() { --*depth_; }
  DepthGuard(const DepthGuard&) = delete;
  DepthGuard& operator=(const DepthGuard&) = delete;

 private:
  int* depth_;
};

class ExprParser {
 public:
  ExprParser(std::vector<Token> tokens, int line) : t_(std::move(tokens)), line_(line) {}

  const Token& Peek(size_t ahead = 0) const { return t_[std::min(pos_ + ahead, t_.size() - 1)]; }
  bool AtEnd() const { return Peek().kind == Token::Kind::kEnd; }
  bool IsOp(std::string_view op, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kOp && Peek(ahead).text == op;
  }
  bool IsName(std::string_view name, size_t ahead = 0) const {
    return Peek(ahead).kind == Token::Kind::kName && Peek(ahead).text == name;
  }
  Token Next() { return t_[std::min(pos_++, t_.size() - 1)]; }
  Status Error(const std::string& what) const { return Status::InvalidArgument("line " + std::to_string(line_) + ": " + what); }
  std::string Describe(const Token& t) const {
    switch (t.kind) {
      case Token::Kind::kEnd: return "end of statement";
      case Token::Kind::kString: return "string " + t.value.Repr();
      default: return "'" + t.text + "'";
    }
  }
  Status Expect(std::string_view op) {
    if (!IsOp(op)) return Error("expected '" + std::string(op) + "', got " + Describe(Peek()));
    ++pos_;
    return Status::Ok();
  }
  Result<std::string> ExpectName() {
    if (Peek().kind != Token::Kind::kName) return Error("expected a name, got " + Describe(Peek()));
    return Next().text;
  }
  Status ExpectEnd() {
    if (!AtEnd()) return Error("unexpected " + Describe(Peek()));
    return Status::Ok();
  }

  ExprPtr Make(Expr::Kind kind) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line_;
    return e;
  }

  // expression (with conditional)
  Result<ExprPtr> Parse() { return ParseCond(); }

  // A comma-separated tuple, or a single expression (explicit_parens: inside "( )").
  Result<ExprPtr> ParseTuple(bool allow_cond = true) {
    std::vector<ExprPtr> items;
    bool trailing_comma = false;
    while (true) {
      if (!items.empty()) {
        if (!IsOp(",")) break;
        ++pos_;
        trailing_comma = true;
        if (AtEnd() || IsOp(")") || IsOp("]") || IsOp("=") || IsName("in")) break;
      }
      STRATA_ASSIGN_OR_RETURN(ExprPtr e, allow_cond ? ParseCond() : ParseOr());
      items.push_back(std::move(e));
      trailing_comma = false;
    }
    if (items.size() == 1 && !trailing_comma && !IsOp(",")) {
      // Distinguish "(x)" from "(x,)": a trailing comma was consumed above only for tuples.
    }
    if (items.size() == 1 && !trailing_comma) return std::move(items[0]);
    ExprPtr tuple = Make(Expr::Kind::kTuple);
    tuple->args = std::move(items);
    return tuple;
  }

  Result<ExprPtr> ParseCond() {
    DepthGuard guard(&nesting_);  // `a if c else b if d else ...` nests through the else branch.
    STRATA_RETURN_IF_ERROR(CheckNesting());
    STRATA_ASSIGN_OR_RETURN(ExprPtr e, ParseOr());
    while (IsName("if")) {
      ++pos_;
      STRATA_ASSIGN_OR_RETURN(ExprPtr cond, ParseOr());
      ExprPtr other;
      if (IsName("else")) {
        ++pos_;
        STRATA_ASSIGN_OR_RETURN(other, ParseCond());
      }
      ExprPtr c = Make(Expr::Kind::kCond);
      c->args.push_back(std::move(cond));
      c->args.push_back(std::move(e));
      c->args.push_back(std::move(other));
      e = std::move(c);
    }
    return e;
  }

  // One left-associative level: `next (op next)*` with the level's operators (names such as "or", or
  // operator tokens), each application built as `kind` (kBinary records the operator).
  Result<ExprPtr> LeftAssoc(Result<ExprPtr> (ExprParser::*next)(), Expr::Kind kind,
                            std::initializer_list<std::string_view> ops) {
    STRATA_ASSIGN_OR_RETURN(ExprPtr e, (this->*next)());
    while (true) {
      const Token& t = Peek();
      auto op = std::find(ops.begin(), ops.end(), t.text);
      if (op == ops.end() || (t.kind != Token::Kind::kOp && t.kind != Token::Kind::kName)) return e;
      ++pos_;
      STRATA_ASSIGN_OR_RETURN(ExprPtr r, (this->*next)());
      ExprPtr n = Make(kind);
      if (kind == Expr::Kind::kBinary) n->name = std::string(*op);
      n->args.push_back(std::move(e));
      n->args.push_back(std::move(r));
      e = std::move(n);
    }
  }

  Result<ExprPtr> ParseOr() { return LeftAssoc(&ExprParser::ParseAnd, Expr::Kind::kOr, {"or"}); }
  Result<ExprPtr> ParseAnd() { return LeftAssoc(&ExprParser::ParseNot, Expr::Kind::kAnd, {"and"}); }

  Result<ExprPtr> ParseNot() {
    DepthGuard guard(&nesting_);
    STRATA_RETURN_IF_ERROR(CheckNesting());
    if (IsName("not")) {
      ++pos_;
      STRATA_ASSIGN_OR_RETURN(ExprPtr operand, ParseNot());
      ExprPtr n = Make(Expr::Kind::kNot);
      n->args.push_back(std::move(operand));
      return n;
    }
    return ParseCompare();
  }

  Result<ExprPtr> ParseCompare() {
    STRATA_ASSIGN_OR_RETURN(ExprPtr first, ParseMath1());
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (Peek().kind == Token::Kind::kOp &&
          (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" || Peek().text == "<=" ||
           Peek().text == ">" || Peek().text == ">=")) {
        op = Next().text;
      } else if (IsName("in")) {
        ++pos_;
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        pos_ += 2;
        op = "notin";
      } else {
        break;
      }
      if (!cmp) {
        cmp = Make(Expr::Kind::kCompare);
        cmp->args.push_back(std::move(first));
      }
      STRATA_ASSIGN_OR_RETURN(ExprPtr r, ParseMath1());
      cmp->ops.push_back(op);
      cmp->args.push_back(std::move(r));
    }
    return cmp ? std::move(cmp) : std::move(first);
  }

  // Jinja2's arithmetic levels, loosest first: + -, then ~, then * / // %, then **.
  Result<ExprPtr> ParseMath1() { return LeftAssoc(&ExprParser::ParseConcat, Expr::Kind::kBinary, {"+", "-"}); }
  Result<ExprPtr> ParseConcat() { return LeftAssoc(&ExprParser::ParseMath2, Expr::Kind::kBinary, {"~"}); }
  Result<ExprPtr> ParseMath2() {
    return LeftAssoc(&ExprParser::ParsePow, Expr::Kind::kBinary, {"*", "/", "//", "%"});
  }
  Result<ExprPtr> ParsePow() { return LeftAssoc(&ExprParser::ParseFilteredUnary, Expr::Kind::kBinary, {"**"}); }
  Result<ExprPtr> ParseFilteredUnary() { return ParseUnary(true); }

  // Nesting (parentheses, unary operators, `not`) is bounded so that hostile input cannot exhaust the
  // parser's stack.
  static constexpr int kMaxNesting = 200;
  Status CheckNesting() {
    if (nesting_ <= kMaxNesting) return Status::Ok();
    return Error("expression nested more than " + std::to_string(kMaxNesting) + " levels deep");
  }

  Result<ExprPtr> ParseUnary(bool with_filter) {
    DepthGuard guard(&nesting_);
    STRATA_RETURN_IF_ERROR(CheckNesting());
    ExprPtr e;
    if (IsOp("-") || IsOp("+")) {
      bool neg = Next().text == "-";
      STRATA_ASSIGN_OR_RETURN(ExprPtr operand, ParseUnary(false));
      e = Make(neg ? Expr::Kind::kNeg : Expr::Kind::kPos);
      e->args.push_back(std::move(operand));
    } else {
      STRATA_ASSIGN_OR_RETURN(e, ParsePrimary());
    }
    STRATA_ASSIGN_OR_RETURN(e, ParsePostfix(std::move(e)));
    if (with_filter) {
 STRATA_ASSIGN_OR_RETURN(e, ParseFilterExpr(std::move(e)));
}
    return e;
  }

  Result<ExprPtr> ParsePrimary() {
    const Token& t = Peek();
    switch (t.kind) {
      case Token::Kind::kName: {
        std::string name = Next().text;
        if (name == "true" || name == "True") return Literal(Value(true));
        if (name == "false" || name == "False") return Literal(Value(false));
        if (name == "none" || name == "None") return Literal(Value::None());
        ExprPtr n = Make(Expr::Kind::kName);
        n->name = std::move(name);
        return n;
      }
      case Token::Kind::kString: {
        std::string s = Next().value.as_string();
        while (Peek().kind == Token::Kind::kString) s += Next().value.as_string();  // "a" "b"
        return Literal(Value(std::move(s)));
      }
      case Token::Kind::kInt:
      case Token::Kind::kFloat: return Literal(Next().value);
      case Token::Kind::kOp:
        if (t.text == "(") {
          ++pos_;
          if (IsOp(")")) {
            ++pos_;
            return Make(Expr::Kind::kTuple);
          }
          STRATA_ASSIGN_OR_RETURN(ExprPtr e, ParseTuple());
          STRATA_RETURN_IF_ERROR(Expect(")"));
          return e;
        }
        if (t.text == "[") {
          ++pos_;
          ExprPtr list = Make(Expr::Kind::kList);
          while (!IsOp("]")) {
            if (!list->args.empty()) STRATA_RETURN_IF_ERROR(Expect(","));
            if (IsOp("]")) break;
            STRATA_ASSIGN_OR_RETURN(ExprPtr e, Parse());
            list->args.push_back(std::move(e));
          }
          ++pos_;
          return list;
        }
        if (t.text == "{") {
          ++pos_;
          ExprPtr dict = Make(Expr::Kind::kDict);
          while (!IsOp("}")) {
            if (!dict->args.empty()) STRATA_RETURN_IF_ERROR(Expect(","));
            if (IsOp("}")) break;
            STRATA_ASSIGN_OR_RETURN(ExprPtr k, Parse());
            STRATA_RETURN_IF_ERROR(Expect(":"));
            STRATA_ASSIGN_OR_RETURN(ExprPtr v, Parse());
            dict->args.push_back(std::move(k));
            dict->args.push_back(std::move(v));
          }
          ++pos_;
          return dict;
        }
        [[fallthrough]];
      default: return Error("unexpected " + Describe(t));
    }
  }

  ExprPtr Literal(Value v) {
    ExprPtr e = Make(Expr::Kind::kLiteral);
    e->literal = std::move(v);
    return e;
  }

  Status ParseCallArgs(Expr* call) {
    STRATA_RETURN_IF_ERROR(Expect("("));
    bool first = true;
    while (!IsOp(")")) {
      if (!first) STRATA_RETURN_IF_ERROR(Expect(","));
      first = false;
      if (IsOp(")")) break;
      if (Peek().kind == Token::Kind::kName && IsOp("=", 1)) {
        std::string key = Next().text;
        ++pos_;
        STRATA_ASSIGN_OR_RETURN(ExprPtr v, Parse());
        call->kwargs.emplace_back(std::move(key), std::move(v));
      } else {
        if (!call->kwargs.empty()) return Error("positional argument follows keyword argument");
        STRATA_ASSIGN_OR_RETURN(ExprPtr v, Parse());
        call->args.push_back(std::move(v));
      }
    }
    ++pos_;
    return Status::Ok();
  }

  Result<ExprPtr> ParsePostfix(ExprPtr e) {
    while (true) {
      if (IsOp(".")) {
        ++pos_;
        const Token& t = Peek();
        if (t.kind == Token::Kind::kName) {
          ExprPtr a = Make(Expr::Kind::kGetAttr);
          a->name = Next().text;
          a->args.push_back(std::move(e));
          e = std::move(a);
        } else if (t.kind == Token::Kind::kInt) {
          ExprPtr a = Make(Expr::Kind::kGetItem);
          a->args.push_back(std::move(e));
          a->args.push_back(Literal(Next().value));
          e = std::move(a);
        } else {
          return Error("expected an attribute name after '.', got " + Describe(t));
        }
      } else if (IsOp("[")) {
        ++pos_;
        std::vector<ExprPtr> parts(3);
        bool slice = false;
        for (int k = 0; k < 3; ++k) {
          if (!IsOp(":") && !IsOp("]")) {
 STRATA_ASSIGN_OR_RETURN(parts[static_cast<size_t>(k)], Parse());
}
          if (IsOp(":") && k < 2) {
            ++pos_;
            slice = true;
            continue;
          }
          break;
        }
        STRATA_RETURN_IF_ERROR(Expect("]"));
        ExprPtr a = Make(slice ? Expr::Kind::kSlice : Expr::Kind::kGetItem);
        a->args.push_back(std::move(e));
        if (slice) {
          for (auto& p : parts) a->args.push_back(std::move(p));
        } else {
          if (!parts[0]) return Error("empty subscript");
          a->args.push_back(std::move(parts[0]));
        }
        e = std::move(a);
      } else if (IsOp("(")) {
        ExprPtr call = Make(Expr::Kind::kCall);
        call->args.push_back(std::move(e));
        STRATA_RETURN_IF_ERROR(ParseCallArgs(call.get()));
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  Result<std::string> DottedName() {
    STRATA_ASSIGN_OR_RETURN(std::string name, ExpectName());
    while (IsOp(".") && Peek(1).kind == Token::Kind::kName) {
      pos_ += 1;
      name += "." + Next().text;
    }
    return name;
  }

  Result<ExprPtr> ParseFilterExpr(ExprPtr e) {
    while (true) {
      if (IsOp("|")) {
        ++pos_;
        ExprPtr f = Make(Expr::Kind::kFilter);
        STRATA_ASSIGN_OR_RETURN(f->name, DottedName());
        f->args.push_back(std::move(e));
        if (IsOp("(")) STRATA_RETURN_IF_ERROR(ParseCallArgs(f.get()));
        e = std::move(f);
      } else if (IsName("is")) {
        ++pos_;
        ExprPtr t = Make(Expr::Kind::kTest);
        if (IsName("not")) {
          ++pos_;
          t->negated = true;
        }
        STRATA_ASSIGN_OR_RETURN(t->name, DottedName());
        t->args.push_back(std::move(e));
        if (IsOp("(")) {
          STRATA_RETURN_IF_ERROR(ParseCallArgs(t.get()));
        } else if (StartsPrimary() && !IsName("else") && !IsName("or") && !IsName("and") && !IsName("if") &&
                   !IsName("not") && !IsName("in") && !IsName("is")) {
          STRATA_ASSIGN_OR_RETURN(ExprPtr arg, ParsePrimary());
          STRATA_ASSIGN_OR_RETURN(arg, ParsePostfix(std::move(arg)));
          t->args.push_back(std::move(arg));
        }
        e = std::move(t);
      } else if (IsOp("(")) {
        ExprPtr call = Make(Expr::Kind::kCall);
        call->args.push_back(std::move(e));
        STRATA_RETURN_IF_ERROR(ParseCallArgs(call.get()));
        e = std::move(call);
      } else {
        return e;
      }
    }
  }

  bool StartsPrimary() const {
    const Token& t = Peek();
    if (t.kind == Token::Kind::kName || t.kind == Token::Kind::kString || t.kind == Token::Kind::kInt ||
        t.kind == Token::Kind::kFloat) {
      return true;
    }
    return t.kind == Token::Kind::kOp && (t.text == "[" || t.text == "{" || t.text == "-");
  }

  // Assignment targets: name, or names separated by commas, optionally in parentheses.
  Result<std::vector<std::string>> ParseTargets() {
    std::vector<std::string> names;
    bool parens = IsOp("(");
    if (parens) ++pos_;
    while (true) {
      STRATA_ASSIGN_OR_RETURN(std::string n, ExpectName());
      names.push_back(std::move(n));
      if (!IsOp(",")) break;
      ++pos_;
      if (parens && IsOp(")")) break;
      if (!parens && (IsName("in") || IsOp("="))) break;
    }
    if (parens) STRATA_RETURN_IF_ERROR(Expect(")"));
    return names;
  }

  size_t pos() const { return pos_; }

 private:
  std::vector<Token> t_;
  size_t pos_ = 0;
  int line_;
  int nesting_ = 0;
};

// --- Statement parser ----------------------------------------------------------------------------------

class Parser {
 public:
  explicit Parser(std::vector<Segment> segments) : seg_(std::move(segments)) {}

  Result<Body> ParseBody(const std::vector<std::string>& end_words, std::string* ended_with,
                         std::unique_ptr<ExprParser>* end_tag) {
    // Blocks nest at most this deep (the parser and the renderer recurse once per level).
    constexpr int kMaxBlockNesting = 200;
    DepthGuard depth(&block_nesting_);
    if (block_nesting_ > kMaxBlockNesting) {
      int line = i_ < seg_.size() ? seg_[i_].line : 0;
      return Status::InvalidArgument("line " + std::to_string(line) + ": blocks nested more than " +
                                     std::to_string(kMaxBlockNesting) + " levels deep");
    }
    Body body;
    while (i_ < seg_.size()) {
      Segment& s = seg_[i_];
      if (s.kind == Segment::Kind::kText) {
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kText;
        n->text = std::move(s.content);
        body.push_back(std::move(n));
        ++i_;
        continue;
      }
      STRATA_ASSIGN_OR_RETURN(std::vector<Token> tokens, Tokenize(s.content, s.line));
      auto p = std::make_unique<ExprParser>(std::move(tokens), s.line);
      if (s.kind == Segment::Kind::kVar) {
        ++i_;
        if (p->AtEnd()) return p->Error("expected an expression in '{{ }}'");
        STRATA_ASSIGN_OR_RETURN(ExprPtr e, p->ParseTuple());
        STRATA_RETURN_IF_ERROR(p->ExpectEnd());
        auto n = std::make_unique<Node>();
        n->kind = Node::Kind::kOutput;
        n->line = s.line;
        n->expr = std::move(e);
        body.push_back(std::move(n));
        continue;
      }
      if (p->Peek().kind != Token::Kind::kName) return p->Error("expected a statement name in '{% %}'");
      std::string word = p->Peek().text;
      for (const std::string& end : end_words) {
        if (word == end) {
          ++i_;
          p->Next();
          *ended_with = word;
          if (end_tag) *end_tag = std::move(p);
          return body;
        }
      }
      ++i_;
      p->Next();
      STRATA_ASSIGN_OR_RETURN(NodePtr node, ParseStatement(word, *p, s.line));
      if (node) body.push_back(std::move(node));
    }
    if (!end_words.empty()) {
      std::string expected;
      for (const std::string& w : end_words) expected += (expected.empty() ? "'" : " or '") + w + "'";
      int line = seg_.empty() ? 1 : seg_.back().line;
      return Status::InvalidArgument("line " + std::to_string(line) + ": unexpected end of template, expected " +
                                     expected);
    }
    *ended_with = "";
    return body;
  }

  Result<NodePtr> ParseStatement(const std::string& word, ExprParser& p, int line) {
    auto n = std::make_unique<Node>();
    n->line = line;
    std::string ended;
    if (word == "if") {
      n->kind = Node::Kind::kIf;
      STRATA_ASSIGN_OR_RETURN(ExprPtr cond, p.ParseTuple());
      STRATA_RETURN_IF_ERROR(p.ExpectEnd());
      while (true) {
        std::unique_ptr<ExprParser> tag;
        STRATA_ASSIGN_OR_RETURN(Body body, ParseBody({"elif", "else", "endif"}, &ended, &tag));
        n->branches.emplace_back(std::move(cond), std::move(body));
        if (ended == "elif") {
          STRATA_ASSIGN_OR_RETURN(cond, tag->ParseTuple());
          STRATA_RETURN_IF_ERROR(tag->ExpectEnd());
          continue;
        }
        if (ended == "else") {
          STRATA_RETURN_IF_ERROR(tag->ExpectEnd());
          STRATA_ASSIGN_OR_RETURN(n->else_body, ParseBody({"endif"}, &ended, &tag));
        }
        STRATA_RETURN_IF_ERROR(tag->ExpectEnd());
        return n;
      }
    }
    if (word == "for") {
      n->kind = Node::Kind::kFor;
      STRATA_ASSIGN_OR_RETURN(n->targets, p.ParseTargets());
      if (!p.IsName("in")) return p.Error("expected 'in' in a for statement");
      p.Next();
      STRATA_ASSIGN_OR_RETURN(n->expr, p.ParseTuple(/*allow_cond=*/false));
      if (p.IsName("if")) {
        p.Next();
        STRATA_ASSIGN_OR_RETURN(n->condition, p.Parse());
      }
      if (p.IsName("recursive")) {
        p.Next();
        n->recursive = true;
      }
      STRATA_RETURN_IF_ERROR(p.ExpectEnd());
      std::unique_ptr<ExprParser> tag;
      STRATA_ASSIGN_OR_RETURN(n->body, ParseBody({"else", "endfor"}, &ended, &tag));
      if (ended == "else") {
        STRATA_RETURN_IF_ERROR(tag->ExpectEnd());
        STRATA_ASSIGN_OR_RETURN(n->else_body, ParseBody({"endfor"}, &ended, &tag));
      }
      STRATA_RETURN_IF_ERROR(tag->ExpectEnd());
      return n;
    }
    if (word == "set") {
      if (p.Peek().kind == Token::Kind::kName && p.IsOp(".", 1)) {
        n->kind = Node::Kind::kSet;
        n->attribute_target = true;
        n->targets.push_back(p.Next().text);
        p.Next();
        STRATA_ASSIGN_OR_RETURN(std::string attr, p.ExpectName());
        n->targets.push_back(attr);
        STRATA_RETURN_IF_ERROR(p.Expect("="));
        STRATA_ASSIGN_OR_RETURN(n->expr, p.ParseTuple());
        STRATA_RETURN_IF_ERROR(p.ExpectEnd());
        return n;
      }
      STRATA_ASSIGN_OR_RETURN(n->targets, p.ParseTargets());
      if (p.IsOp("=")) {
        p.Next();
        n->kind = Node::Kind::kSet;
        STRATA_ASSIGN_OR_RETURN(n->expr, p.ParseTuple());
        STRATA_RETURN_IF_ERROR(p.ExpectEnd());
        return n;
      }
      if (n->targets.size() != 1) return p.Error("a block set assigns one name");
      n->kind = Node::Kind::kSetBlock;
      if (p.IsOp("|")) {  // {% set x | filter %}: filters applied to the block's text.
        ExprPtr placeholder = p.Make(Expr::Kind::kName);
        placeholder->name = "\x01" "block";
        STRATA_ASSIGN_OR_RETURN(n->expr, p.ParseFilterExpr(std::move(placeholder)));
      }
      STRATA_RETURN_IF_ERROR(p.ExpectEnd());
      std::unique_ptr<ExprParser> tag;
      STRATA_ASSIGN_OR_RETURN(n->body, ParseBody({"endset"}, &ended, &tag));
      STRATA_RETURN_IF_ERROR(tag->ExpectEnd());
      return n;
    }
    if (word == "macro" || word == "call") {
      std::unique_ptr<ExprParser> tag;
      if (word == "macro") {
        n->kind = Node::Kind::kMacro;
        STRATA_ASSIGN_OR_RETURN(n->text, p.ExpectName());
      } else {
        n->kind = Node::Kind::kCallBlock;
      }
      if (p.IsOp("(") && (word == "macro" || true)) {
        if (word == "call") {
          // {% call(params) macro(args) %}: the caller's own parameters come first.
          if (p.IsOp("(")) STRATA_RETURN_IF_ERROR(ParseParams(p, n.get()));
        } else {
          STRATA_RETURN_IF_ERROR(ParseParams(p, n.get()));
        }
      }
      if (word == "call") {
        STRATA_ASSIGN_OR_RETURN(n->expr, p.Parse());
        if (n->expr->kind != Expr::Kind::kCall) return p.Error("expected a macro call after 'call'");
      }
      STRATA_RETURN_IF_ERROR(p.ExpectEnd());
      STRATA_ASSIGN_OR_RETURN(n->body, ParseBody({word == "macro" ? "endmacro" : "endcall"}, &ended, &tag));
      STRATA_RETURN_IF_ERROR(tag->ExpectEnd());
      return n;
    }
    if (word == "filter") {
      n->kind = Node::Kind::kFilterBlock;
      ExprPtr placeholder = p.Make(Expr::Kind::kName);
      placeholder->name = "\x01" "block";
      // The first filter has no leading '|'.
      ExprPtr f = p.Make(Expr::Kind::kFilter);
      STRATA_ASSIGN_OR_RETURN(f->name, p.DottedName());
      f->args.push_back(std::move(placeholder));
      if (p.IsOp("(")) STRATA_RETURN_IF_ERROR(p.ParseCallArgs(f.get()));
      STRATA_ASSIGN_OR_RETURN(n->expr, p.ParseFilterExpr(std::move(f)));
      STRATA_RETURN_IF_ERROR(p.ExpectEnd());
      std::unique_ptr<ExprParser> tag;
      STRATA_ASSIGN_OR_RETURN(n->body, ParseBody({"endfilter"}, &ended, &tag));
      STRATA_RETURN_IF_ERROR(tag->ExpectEnd());
      return n;
    }
    if (word == "with") {
      n->kind = Node::Kind::kWith;
      while (!p.AtEnd()) {
        if (!n->params.empty()) STRATA_RETURN_IF_ERROR(p.Expect(","));
        STRATA_ASSIGN_OR_RETURN(std::string name, p.ExpectName());
        STRATA_RETURN_IF_ERROR(p.Expect("="));
        STRATA_ASSIGN_OR_RETURN(ExprPtr v, p.Parse());
        n->params.emplace_back(std::move(name), std::move(v));
      }
      std::unique_ptr<ExprParser> tag;
      STRATA_ASSIGN_OR_RETURN(n->body, ParseBody({"endwith"}, &ended, &tag));
      STRATA_RETURN_IF_ERROR(tag->ExpectEnd());
      return n;
    }
    if (word == "block") {
      n->kind = Node::Kind::kWith;  // Without inheritance, a block renders in place, in its own scope.
      STRATA_ASSIGN_OR_RETURN(n->text, p.ExpectName());
      if (p.IsName("scoped") || p.IsName("required")) p.Next();
      STRATA_RETURN_IF_ERROR(p.ExpectEnd());
      std::unique_ptr<ExprParser> tag;
      STRATA_ASSIGN_OR_RETURN(n->body, ParseBody({"endblock"}, &ended, &tag));
      if (!tag->AtEnd() && tag->Peek().kind == Token::Kind::kName) tag->Next();
      STRATA_RETURN_IF_ERROR(tag->ExpectEnd());
      return n;
    }
    if (word == "extends" || word == "include" || word == "import" || word == "from") {
      return p.Error("'" + word + "' is not supported: Strata templates are self-contained");
    }
    if (word == "break" || word == "continue" || word == "do") {
      return p.Error("'" + word + "' needs a Jinja2 extension that Strata does not enable");
    }
    if (word.starts_with("end") || word == "elif" || word == "else") return p.Error("unexpected '" + word + "'");
    return p.Error("unknown tag '" + word + "'");
  }

  Status ParseParams(ExprParser& p, Node* n) {
    STRATA_RETURN_IF_ERROR(p.Expect("("));
    while (!p.IsOp(")")) {
      if (!n->params.empty()) STRATA_RETURN_IF_ERROR(p.Expect(","));
      if (p.IsOp(")")) break;
      STRATA_ASSIGN_OR_RETURN(std::string name, p.ExpectName());
      ExprPtr def;
      if (p.IsOp("=")) {
        p.Next();
        STRATA_ASSIGN_OR_RETURN(def, p.Parse());
      } else if (!n->params.empty() && n->params.back().second) {
        return p.Error("non-default argument follows default argument");
      }
      n->params.emplace_back(std::move(name), std::move(def));
    }
    p.Next();
    return Status::Ok();
  }

 private:
  std::vector<Segment> seg_;
  size_t i_ = 0;
  int block_nesting_ = 0;
};

}  // namespace

void AppendUtf8(uint32_t cp, std::string* out) { json::AppendUtf8(out, cp); }

Result<std::shared_ptr<const Tree>> ParseTemplate(std::string_view source, const JinjaOptions& options) {
  std::string text = NormaliseNewlines(source, options.keep_trailing_newline);
  STRATA_ASSIGN_OR_RETURN(std::vector<Segment> segments, Split(text, options));
  Parser parser(std::move(segments));
  std::string ended;
  auto tree = std::make_shared<Tree>();
  STRATA_ASSIGN_OR_RETURN(tree->body, parser.ParseBody({}, &ended, nullptr));
  return std::shared_ptr<const Tree>(std::move(tree));
}

}  // namespace internal
}  // namespace strata::prompt
