// Reading JSON out of a model's reply.
//
// Models asked for JSON often wrap it in prose or a Markdown code fence, leave trailing commas, write
// Python literals (True, None), use full-width CJK punctuation (，：“”) as delimiters, or put raw line breaks
// inside strings. ExtractModelJson finds the JSON value in such a reply and repairs those slips — outside
// string literals only, so the text the model meant is never changed — and fails with an error that says
// what was wrong and where, for showing back to the model on a retry.
//
// Order of attempts: the whole reply when it is one {...} or [...] (a fence inside its strings is text),
// each fenced block (```json or ```), then each balanced {...} or [...] span in the reply, first as
// written and then repaired; the first that parses (and, if `want` is given, has that
// type) wins.
//
// Thread safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "strata/util/status.h"

namespace strata::llm {

enum class JsonShape { kAny, kObject, kArray };

// Returns the JSON value found in `reply` as valid JSON text (parse it with any JSON library). Errors
// (kInvalidArgument): no JSON value at all, a value of the wrong shape, or the first candidate's parse error
// with line, column and a snippet around it.
Result<std::string> ExtractModelJson(std::string_view reply, JsonShape want = JsonShape::kAny);

// The repair pass alone (exposed for tests): trailing commas dropped, comments removed, True/False/None
// lowered, full-width delimiters and curly quotes used as delimiters made ASCII, raw control characters in
// strings escaped.
std::string RepairJson(std::string_view text);

}  // namespace strata::llm
