// JSON text output with the exact byte conventions Strata's formats need.
//
// Two string styles exist because the files Strata is compatible with use both: kosong and pydantic write
// raw UTF-8 (`ensure_ascii=False`), while Python's `json.dumps` defaults escape everything outside ASCII as
// lower-case `\uXXXX` (with surrogate pairs). Both escape `"`, `\`, and control characters the same way.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "strata/util/status.h"

namespace strata::json {

enum class StringStyle {
  kRawUtf8,      // Non-ASCII copied as UTF-8 bytes (pydantic model_dump_json, json.dumps(ensure_ascii=False)).
  kAsciiEscape,  // Non-ASCII as \uXXXX, astral planes as surrogate pairs (json.dumps defaults).
};

// Appends `s` as a quoted JSON string. `s` must be valid UTF-8 for kAsciiEscape; invalid bytes are written
// as U+FFFD in that style and copied through in kRawUtf8 (validate input at the boundary).
void AppendString(std::string* out, std::string_view s, StringStyle style = StringStyle::kRawUtf8);

// Appends `value` the way Python's repr(float) writes it (shortest round trip; "1.0", "1e-05", "1e+16").
void AppendPythonFloat(std::string* out, double value);

// Returns `text` re-written as compact JSON (no whitespace, raw UTF-8 strings, Python float style, key order
// and duplicate keys as given). Errors name the byte offset of the problem.
Result<std::string> Canonicalize(std::string_view text);

// Returns a one-line description of why `text` is not valid JSON, naming the byte offset, line and column
// (e.g. "invalid JSON at byte 12 (line 1, column 13): syntax error ..."). Returns "" if `text` is valid.
std::string DescribeSyntaxError(std::string_view text);

// Returns `s` as a JSON string literal for an error message: control characters escaped (a newline in a
// URI cannot split the message), cut at a UTF-8 boundary to at most about `max` bytes, with the full
// length said when cut ("...\" (52428800 bytes)"). Untrusted input is never echoed whole.
std::string QuoteForError(std::string_view s, size_t max = 60);

// JSON from outside (request bodies, files, model replies, command-line options) is nested at most this
// deep: recursive operations on a parsed value (copy, dump, compare, conversion) use stack per level.
inline constexpr size_t kMaxJsonDepth = 256;

// Returns the byte offset of the first '[' or '{' that opens a level deeper than `max_depth` (strings
// skipped), or npos. Linear, no allocation; does not check the rest of the syntax.
size_t FindTooDeep(std::string_view text, size_t max_depth = kMaxJsonDepth);

// Returns whether `s` is valid UTF-8; on failure sets `*bad_offset` to the first invalid byte.
bool IsValidUtf8(std::string_view s, size_t* bad_offset = nullptr);
// Appends code point `cp` (at most U+10FFFF) as UTF-8.
void AppendUtf8(std::string* out, char32_t cp);

// Returns `s` with every invalid UTF-8 sequence replaced by U+FFFD (Python's errors="replace").
std::string ReplaceInvalidUtf8(std::string_view s);
// JSON text with every \u escape of a lone UTF-16 surrogate (half of a pair, as an emoji cut in two leaves it)
// made \ufffd: JSON's grammar allows one, JSON readers (simdjson, nlohmann) refuse the whole document.
std::string ReplaceLoneSurrogateEscapes(std::string_view json_text);

}  // namespace strata::json
