#include "strata/llm/model_json.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "strata/json/json_writer.h"

namespace strata::llm {
namespace {

using Json = nlohmann::json;

constexpr size_t kMaxCandidates = 16;

// Decodes the UTF-8 code point at `text[i]` (0xFFFD for a bad byte) and its length.
std::pair<char32_t, size_t> CodePointAt(std::string_view text, size_t i) {
  unsigned char c = static_cast<unsigned char>(text[i]);
  size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
  if (len == 0 || i + len > text.size()) return {0xFFFD, 1};
  char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < len; ++k) {
    unsigned char cc = static_cast<unsigned char>(text[i + k]);
    if ((cc >> 6) != 2) return {0xFFFD, 1};
    cp = (cp << 6) | (cc & 0x3F);
  }
  return {cp, len};
}

// Full-width punctuation a model may use as JSON delimiters, mapped to ASCII (0 if none).
char AsciiDelimiter(char32_t cp) {
  switch (cp) {
    case U'\uFF0C': return ',';
    case U'\uFF1A': return ':';
    case U'\uFF5B': return '{';
    case U'\uFF5D': return '}';
    case U'\uFF3B': return '[';
    case U'\uFF3D': return ']';
    default: return 0;
  }
}

bool IsOpeningQuote(char32_t cp) { return cp == U'\u201C' || cp == U'\u300C'; }  // “ 「
bool IsClosingQuote(char32_t cp) { return cp == U'\u201D' || cp == U'\u300D'; }  // ” 」

bool IsIdentChar(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
}

// Skips whitespace and comments from `i`; returns the index of the next meaningful character.
size_t SkipSpaceAndComments(std::string_view text, size_t i) {
  while (i < text.size()) {
    char c = text[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
    } else if (text.substr(i, 2) == "//") {
      size_t nl = text.find('\n', i);
      i = nl == std::string_view::npos ? text.size() : nl + 1;
    } else if (text.substr(i, 2) == "/*") {
      size_t end = text.find("*/", i + 2);
      i = end == std::string_view::npos ? text.size() : end + 2;
    } else {
      break;
    }
  }
  return i;
}

void AppendEscaped(std::string* out, char c) {
  switch (c) {
    case '\n': *out += "\\n"; return;
    case '\r': *out += "\\r"; return;
    case '\t': *out += "\\t"; return;
    default: break;
  }
  if (static_cast<unsigned char>(c) < 0x20) {
    static const char kHex[] = "0123456789abcdef";
    *out += "\\u00";
    *out += kHex[(c >> 4) & 0xF];
    *out += kHex[c & 0xF];
    return;
  }
  *out += c;
}

// Finds where the string starting at `open` (its quote, `open_len` bytes) ends: the index just past the
// closing quote, or nullopt when unterminated. `quote` is the ASCII quote, or 0 for a curly-quoted string
// (closed by a closing curly quote or an ASCII double quote).
std::optional<size_t> StringEnd(std::string_view text, size_t open, char quote, size_t open_len) {
  for (size_t i = open + open_len; i < text.size();) {
    if (quote != 0 && text[i] == '\\') {
      i += 2;
      continue;
    }
    if (quote != 0 && text[i] == quote) return i + 1;
    auto [cp, len] = CodePointAt(text, i);
    if (quote == 0 && (IsClosingQuote(cp) || text[i] == '"')) return i + len;
    i += len;
  }
  return std::nullopt;
}

// The end (one past the closing bracket) of the balanced value starting at `start`, or nullopt.
std::optional<size_t> BalancedEnd(std::string_view text, size_t start) {
  std::vector<char> stack;
  for (size_t i = start; i < text.size();) {
    char c = text[i];
    auto [cp, len] = CodePointAt(text, i);
    if (c == '"' || c == '\'') {
      // A single quote only opens a string where a value may start; elsewhere it is an apostrophe.
      if (c == '\'') {
        size_t prev = i;
        while (prev > start && (text[prev - 1] == ' ' || text[prev - 1] == '\t' || text[prev - 1] == '\n')) --prev;
        char p = prev > start ? text[prev - 1] : '\0';
        if (p != '{' && p != '[' && p != ',' && p != ':') {
          ++i;
          continue;
        }
      }
      std::optional<size_t> end = StringEnd(text, i, c, 1);
      if (!end) return std::nullopt;
      i = *end;
      continue;
    }
    if (IsOpeningQuote(cp)) {
      std::optional<size_t> end = StringEnd(text, i, 0, len);
      if (!end) return std::nullopt;
      i = *end;
      continue;
    }
    char d = AsciiDelimiter(cp);
    if (d == 0 && len == 1) d = c;
    if (d == '{' || d == '[') {
      stack.push_back(d == '{' ? '}' : ']');
    } else if (d == '}' || d == ']') {
      if (stack.empty() || stack.back() != d) return std::nullopt;
      stack.pop_back();
      if (stack.empty()) return i + len;
    }
    i += len;
  }
  return std::nullopt;
}

// 1-based line and column of byte `offset` in `text`.
std::pair<size_t, size_t> LineColumn(std::string_view text, size_t offset) {
  size_t line = 1, column = 1;
  for (size_t i = 0; i < offset && i < text.size(); ++i) {
    if (text[i] == '\n') {
      ++line;
      column = 1;
    } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
      ++column;
    }
  }
  return {line, column};
}

std::string Snippet(std::string_view text, size_t offset) {
  size_t from = offset > 30 ? offset - 30 : 0;
  while (from > 0 && (static_cast<unsigned char>(text[from]) & 0xC0) == 0x80) --from;
  size_t to = std::min(text.size(), offset + 30);
  while (to < text.size() && (static_cast<unsigned char>(text[to]) & 0xC0) == 0x80) ++to;
  std::string s(text.substr(from, to - from));
  for (char& c : s) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return s;
}

bool HasShape(const Json& j, JsonShape want) {
  return want == JsonShape::kAny || (want == JsonShape::kObject && j.is_object()) ||
         (want == JsonShape::kArray && j.is_array());
}

const char* ShapeName(JsonShape want) {
  return want == JsonShape::kObject ? "a JSON object" : want == JsonShape::kArray ? "a JSON array" : "JSON";
}

struct Candidate {
  std::string_view text;
  size_t offset;  // In the reply.
  const char* where;
};

}  // namespace

std::string RepairJson(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    char c = text[i];
    auto [cp, len] = CodePointAt(text, i);
    // Strings: re-emitted with ASCII double quotes, raw control characters escaped.
    bool ascii_quote = c == '"' || c == '\'';
    if (ascii_quote || IsOpeningQuote(cp) || (IsClosingQuote(cp))) {
      char quote = ascii_quote ? c : 0;
      size_t open_len = ascii_quote ? 1 : len;
      std::optional<size_t> end = StringEnd(text, i, quote, open_len);
      size_t close_len = 0;
      if (end) {
        size_t k = *end - 1;  // The start of the closing quote's code point.
        while (k > i && (static_cast<unsigned char>(text[k]) & 0xC0) == 0x80) --k;
        close_len = *end - k;
      }
      out += '"';
      size_t body_end = end ? *end - close_len : text.size();
      for (size_t k = i + open_len; k < body_end; ++k) {
        char b = text[k];
        if (quote != 0 && b == '\\' && k + 1 < body_end) {
          if (quote == '\'' && text[k + 1] == '\'') {
            out += '\'';
          } else {
            out += b;
            out += text[k + 1];
          }
          ++k;
          continue;
        }
        if (quote != '"' && b == '"') {
          out += "\\\"";
          continue;
        }
        AppendEscaped(&out, b);
      }
      if (end) out += '"';
      i = end ? *end : text.size();
      continue;
    }
    if (text.substr(i, 2) == "//" || text.substr(i, 2) == "/*") {
      i = SkipSpaceAndComments(text, i);
      out += ' ';
      continue;
    }
    char d = AsciiDelimiter(cp);
    if (d == 0 && len == 1) d = c;
    if (d == ',') {
      size_t next = SkipSpaceAndComments(text, i + len);
      char n = next < text.size() ? text[next] : '\0';
      char nd = next < text.size() ? AsciiDelimiter(CodePointAt(text, next).first) : 0;
      if (n == '}' || n == ']' || nd == '}' || nd == ']') {
        i += len;  // A trailing comma.
        continue;
      }
    }
    if (IsIdentChar(c) && (i == 0 || !IsIdentChar(text[i - 1]))) {
      size_t end = i;
      while (end < text.size() && IsIdentChar(text[end])) ++end;
      std::string_view word = text.substr(i, end - i);
      out += word == "True" ? "true" : word == "False" ? "false" : word == "None" ? "null" : std::string(word);
      i = end;
      continue;
    }
    if (d != 0 && len > 1) {
      out += d;
    } else {
      out.append(text.substr(i, len));
    }
    i += len;
  }
  return out;
}

Result<std::string> ExtractModelJson(std::string_view reply, JsonShape want) {
  if (reply.substr(0, 3) == "\xEF\xBB\xBF") reply.remove_prefix(3);
  std::vector<Candidate> candidates;
  // A reply that is nothing but a JSON value is taken as it is (a fence inside one of its strings is text).
  size_t first = reply.find_first_not_of(" \t\r\n");
  size_t last = reply.find_last_not_of(" \t\r\n");
  if (first != std::string_view::npos && (reply[first] == '{' || reply[first] == '[') &&
      (reply[last] == '}' || reply[last] == ']')) {
    candidates.push_back({reply.substr(first, last - first + 1), first, "reply"});
  }
  // Fenced blocks next: ```json ... ``` (any info string) or ``` ... ```.
  for (size_t pos = reply.find("```"); pos != std::string_view::npos && candidates.size() < kMaxCandidates;) {
    size_t body = reply.find('\n', pos + 3);
    if (body == std::string_view::npos) break;
    size_t close = reply.find("```", body + 1);
    size_t end = close == std::string_view::npos ? reply.size() : close;
    candidates.push_back({reply.substr(body + 1, end - body - 1), body + 1, "code block"});
    if (close == std::string_view::npos) break;
    pos = reply.find("```", close + 3);
  }
  // Then every balanced {...} / [...] span, outermost first.
  for (size_t i = 0; i < reply.size() && candidates.size() < kMaxCandidates;) {
    auto [cp, len] = CodePointAt(reply, i);
    char d = AsciiDelimiter(cp);
    if (d == 0 && len == 1) d = reply[i];
    if (d == '{' || d == '[') {
      std::optional<size_t> end = BalancedEnd(reply, i);
      if (end) {
        candidates.push_back({reply.substr(i, *end - i), i, "reply"});
        i = *end;
        continue;
      }
      // Unbalanced to the end: the model stopped early or closed it wrongly; still worth an error message.
      candidates.push_back({reply.substr(i), i, "reply"});
      break;
    }
    i += len;
  }
  if (candidates.empty()) {
    return Status::InvalidArgument(std::string("the reply holds no JSON: it should be ") + ShapeName(want) +
                                   " (no '{' or '[' found): \"" + Snippet(reply, 0) + "\"");
  }
  std::optional<Status> first_error;
  for (const Candidate& c : candidates) {
    for (int repaired = 0; repaired < 2; ++repaired) {
      std::string text = repaired ? RepairJson(c.text) : std::string(c.text);
      if (size_t deep = json::FindTooDeep(text); deep != std::string::npos) {
        // Callers copy and walk the value recursively: a reply nested this deep is refused, not parsed.
        if (!first_error) {
          first_error = Status::InvalidArgument(std::string("the ") + c.where + " is nested deeper than " +
                                                std::to_string(json::kMaxJsonDepth) + " levels");
        }
        break;
      }
      try {
        Json j = Json::parse(text);
        if (HasShape(j, want)) return repaired ? text : std::string(c.text);
        if (!first_error) {
          first_error = Status::InvalidArgument(std::string("the ") + c.where + " holds " + j.type_name() +
                                                ", not " + ShapeName(want));
        }
        break;
      } catch (const Json::parse_error& e) {
        if (repaired && !first_error) {
          // Position in the repaired text; for the untouched prefix it equals the reply's.
          size_t at = e.byte > 0 ? e.byte - 1 : 0;
          auto [line, column] = LineColumn(text, at);
          auto [reply_line, reply_column] = LineColumn(reply, c.offset);
          std::string message = e.what();
          size_t colon = message.find(": ", message.find("parse error"));
          // nlohmann quotes the bytes it last read, which may end inside a character.
          std::string why = json::ReplaceInvalidUtf8(colon == std::string::npos ? message : message.substr(colon + 2));
          first_error = Status::InvalidArgument(
              std::string("the JSON in the ") + c.where + " (starting at line " + std::to_string(reply_line) +
              ", column " + std::to_string(reply_column) + ") does not parse at its line " + std::to_string(line) +
              ", column " + std::to_string(column) + ", near \"" + Snippet(text, at) + "\": " + why);
        }
      } catch (const Json::exception& e) {  // e.g. out_of_range: a number too large for a double.
        if (repaired && !first_error) {
          auto [reply_line, reply_column] = LineColumn(reply, c.offset);
          first_error = Status::InvalidArgument(std::string("the JSON in the ") + c.where + " (starting at line " +
                                                std::to_string(reply_line) + ", column " +
                                                std::to_string(reply_column) + ") cannot be read: " + e.what());
        }
      }
    }
  }
  return *first_error;
}

}  // namespace strata::llm
