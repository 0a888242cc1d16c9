// Internal: helpers over simdjson's DOM for modules that parse on hot paths. Include only from .cc files:
// simdjson.h is large.
#pragma once

#include <simdjson.h>

#include <string>
#include <string_view>

#include "strata/json/json_writer.h"

namespace strata::json {

// Return the object / array view of an element of that type, by value. (Iterating
// `e.get_object().value_unsafe()` directly dangles: value_unsafe() returns a reference into a temporary.)
inline simdjson::dom::object AsObject(simdjson::dom::element e) {
  simdjson::dom::object obj;
  if (e.get(obj) != simdjson::SUCCESS) return {};
  return obj;
}
inline simdjson::dom::array AsArray(simdjson::dom::element e) {
  simdjson::dom::array arr;
  if (e.get(arr) != simdjson::SUCCESS) return {};
  return arr;
}

enum class DomStyle {
  kCanonical,    // Compact, UTF-8 strings (see Canonicalize in json_writer.h).
  kPythonDumps,  // As Python's json.dumps with default arguments: ", " and ": ", non-ASCII as \uXXXX.
};
// Appends `e` in `style`; numbers are written as Python writes them (repr() for floats) in both.
void AppendJson(std::string* out, simdjson::dom::element e, DomStyle style);
// Appends `e` as compact canonical JSON.
void AppendCanonical(std::string* out, simdjson::dom::element e);

// Returns the JSON type name of `e` for error messages ("string", "object", ...).
std::string_view TypeName(simdjson::dom::element e);

}  // namespace strata::json
