#include "json_dom.h"

#include <nlohmann/json.hpp>

#include "strata/json/json_writer.h"
#include "strata/util/utf8.h"

namespace strata::json {

void AppendJson(std::string* out, simdjson::dom::element e, DomStyle style) {
  using simdjson::dom::element_type;
  const bool python = style == DomStyle::kPythonDumps;
  const std::string_view item_separator = python ? ", " : ",";
  const std::string_view key_separator = python ? ": " : ":";
  const StringStyle strings = python ? StringStyle::kAsciiEscape : StringStyle::kRawUtf8;
  switch (e.type()) {
    case element_type::ARRAY: {
      out->push_back('[');
      bool first = true;
      for (simdjson::dom::element child : AsArray(e)) {
        if (!first) out->append(item_separator);
        first = false;
        AppendJson(out, child, style);
      }
      out->push_back(']');
      break;
    }
    case element_type::OBJECT: {
      out->push_back('{');
      bool first = true;
      for (simdjson::dom::key_value_pair field : AsObject(e)) {
        if (!first) out->append(item_separator);
        first = false;
        AppendString(out, field.key, strings);
        out->append(key_separator);
        AppendJson(out, field.value, style);
      }
      out->push_back('}');
      break;
    }
    case element_type::INT64: out->append(std::to_string(e.get_int64().value_unsafe())); break;
    case element_type::UINT64: out->append(std::to_string(e.get_uint64().value_unsafe())); break;
    case element_type::DOUBLE: AppendPythonFloat(out, e.get_double().value_unsafe()); break;
    case element_type::STRING: AppendString(out, e.get_string().value_unsafe(), strings); break;
    case element_type::BOOL: out->append(e.get_bool().value_unsafe() ? "true" : "false"); break;
    case element_type::NULL_VALUE: out->append("null"); break;
  }
}

void AppendCanonical(std::string* out, simdjson::dom::element e) { AppendJson(out, e, DomStyle::kCanonical); }

std::string_view TypeName(simdjson::dom::element e) {
  using simdjson::dom::element_type;
  switch (e.type()) {
    case element_type::ARRAY: return "array";
    case element_type::OBJECT: return "object";
    case element_type::INT64:
    case element_type::UINT64: return "integer";
    case element_type::DOUBLE: return "number";
    case element_type::STRING: return "string";
    case element_type::BOOL: return "boolean";
    case element_type::NULL_VALUE: return "null";
  }
  return "value";
}

std::string QuoteForError(std::string_view s, size_t max) {
  std::string out;
  if (s.size() <= max) {
    AppendString(&out, s);
    return out;
  }
  AppendString(&out, s.substr(0, Utf8Prefix(s, max)));
  out.insert(out.size() - 1, "...");
  return out + " (" + std::to_string(s.size()) + " bytes)";
}

size_t FindTooDeep(std::string_view text, size_t max_depth) {
  size_t depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if ((c == ']' || c == '}') && depth > 0) {
      --depth;
    }
  }
  return std::string_view::npos;
}

Result<std::string> Canonicalize(std::string_view text) {
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  simdjson::dom::element root;
  if (parser.parse(padded).get(root) != simdjson::SUCCESS) {
    return Status::InvalidArgument(DescribeSyntaxError(text));
  }
  std::string out;
  AppendCanonical(&out, root);
  return out;
}

std::string DescribeSyntaxError(std::string_view text) {
  if (size_t deep = FindTooDeep(text); deep != std::string_view::npos) {
    return "JSON nested deeper than " + std::to_string(kMaxJsonDepth) + " levels at byte " + std::to_string(deep);
  }
  size_t bad = 0;
  if (!IsValidUtf8(text, &bad)) {
    return "invalid JSON at byte " + std::to_string(bad) + ": invalid UTF-8";
  }
  try {
    nlohmann::json parsed = nlohmann::json::parse(text.begin(), text.end());
    (void)parsed;
  } catch (const nlohmann::json::parse_error& e) {
    // what() is "[json.exception.parse_error.101] parse error at line L, column C: detail".
    std::string what = e.what();
    std::string where, detail = what;
    size_t at = what.find("parse error at ");
    size_t colon = at == std::string::npos ? std::string::npos : what.find(": ", at);
    if (colon != std::string::npos) {
      where = what.substr(at + 15, colon - at - 15);
      detail = what.substr(colon + 2);
    }
    // nlohmann's detail ends with "last read: '<the token so far>'", which for an unterminated string is
    // the rest of the input (megabytes): keep the start of it, escaped.
    size_t last = detail.find("last read: '");
    if (last != std::string::npos) {
      std::string_view token = std::string_view(detail).substr(last + 12);
      if (token.ends_with('\'')) token.remove_suffix(1);
      detail = detail.substr(0, last) + "last read: " + QuoteForError(token, 40);
    } else if (detail.size() > 200) {
      detail = QuoteForError(detail, 200);
    }
    size_t byte = e.byte > 0 ? e.byte - 1 : 0;
    std::string out = "invalid JSON at byte " + std::to_string(byte);
    if (text.find('\n') != std::string_view::npos && !where.empty()) out += " (" + where + ")";
    return out + ": " + detail;
  } catch (const std::exception& e) {
    return std::string("invalid JSON: ") + e.what();
  }
  // nlohmann accepted what simdjson rejected: the only such inputs are too deep or too large.
  simdjson::dom::parser parser;
  simdjson::padded_string padded(text);
  auto err = parser.parse(padded).error();
  if (err != simdjson::SUCCESS) return std::string("invalid JSON: ") + simdjson::error_message(err);
  return "";
}

}  // namespace strata::json
