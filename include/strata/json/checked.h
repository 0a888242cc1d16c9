// Checked reads of untrusted JSON held in nlohmann-json values: model replies, request bodies, files on
// disk. nlohmann's `value()` and `get<T>()` throw `type_error` when a field has another type than the one
// asked for (`{"decision": 1}` read as a string), and an exception that escapes a worker ends the process.
// These accessors never throw:
//
//   StringOr(j, "key", "fallback")   the string, or the fallback when the key is absent, null or not a string
//   IntOr / BoolOr / DoubleOr        likewise
//   CheckedIntOr(j, "key", fallback) an integer argument: the fallback when absent, an error when not one
//   Field(j, "key")                  a pointer to the member (nullptr when j is not an object or lacks it)
//   RequireString(j, "key", where)   kInvalidArgument naming `where.key` and what was found instead
//   RequireInt(j, "key", where)
//   TypeName(j)                      "string", "number", "object", ... for error messages
//
// Include only from .cc files that already use nlohmann-json (this header pulls it in).
#pragma once

#include <cmath>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "strata/json/json_writer.h"
#include "strata/util/status.h"

namespace strata::json {

template <typename J>
const J* Field(const J& j, std::string_view key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

template <typename J>
std::string_view TypeName(const J& j) {
  if (j.is_string()) return "a string";
  if (j.is_boolean()) return "a boolean";
  if (j.is_number_integer()) return "an integer";
  if (j.is_number()) return "a number";
  if (j.is_object()) return "an object";
  if (j.is_array()) return "an array";
  if (j.is_null()) return "null";
  return "an invalid value";
}

template <typename J>
std::string StringOr(const J& j, std::string_view key, std::string_view fallback = "") {
  const J* f = Field(j, key);
  return f != nullptr && f->is_string() ? f->template get_ref<const std::string&>() : std::string(fallback);
}

// `j` as a whole number: an integer that fits int64_t, or a float with no fraction of at most 2^53 either way
// (JSON Schema's "integer" takes 5.0, so every reader of an integer member does too; past 2^53 a float no
// longer says which integer was written); nullopt otherwise.
template <typename J>
std::optional<int64_t> WholeNumber(const J& j) {
  if (j.is_number_unsigned()) {
    const auto v = j.template get<uint64_t>();
    return v <= static_cast<uint64_t>(INT64_MAX) ? std::optional<int64_t>(static_cast<int64_t>(v)) : std::nullopt;
  }
  if (j.is_number_integer()) return j.template get<int64_t>();
  if (j.is_number_float()) {
    const double v = j.template get<double>();
    constexpr double kExact = 9007199254740992.0;  // 2^53.
    if (std::isfinite(v) && v == std::trunc(v) && v >= -kExact && v <= kExact) {
      return static_cast<int64_t>(v);
    }
  }
  return std::nullopt;
}

template <typename J>
int64_t IntOr(const J& j, std::string_view key, int64_t fallback) {
  const J* f = Field(j, key);
  if (f == nullptr) return fallback;
  return WholeNumber(*f).value_or(fallback);
}

// What is wrong with `j` as an integer argument: "must be an integer of at most 64 bits" for a whole number
// past int64 (as Python's front end says it), else "must be an integer".
template <typename J>
std::string IntegerProblem(const J& j) {
  bool too_wide = j.is_number_unsigned();  // Only past INT64_MAX does WholeNumber refuse one.
  if (j.is_number_float()) {
    const double v = j.template get<double>();
    too_wide = std::isfinite(v) && v == std::trunc(v) && std::fabs(v) >= 9223372036854775808.0;
  }
  return too_wide ? "must be an integer of at most 64 bits" : "must be an integer";
}

// IntOr for arguments a caller sent: `fallback` when absent or null, kInvalidArgument naming `key` when it
// is there but not a whole number an int64 holds (1e300, 2^63, 5.5, "5"), where IntOr quietly uses the
// fallback. The words are HTTP's for the same member.
template <typename J>
Result<int64_t> CheckedIntOr(const J& j, std::string_view key, int64_t fallback) {
  const J* f = Field(j, key);
  if (f == nullptr || f->is_null()) return fallback;
  if (std::optional<int64_t> v = WholeNumber(*f)) return *v;
  return Status::InvalidArgument("\"" + std::string(key) + "\" " + IntegerProblem(*f));
}

template <typename J>
bool BoolOr(const J& j, std::string_view key, bool fallback) {
  const J* f = Field(j, key);
  return f != nullptr && f->is_boolean() ? f->template get<bool>() : fallback;
}

template <typename J>
double DoubleOr(const J& j, std::string_view key, double fallback) {
  const J* f = Field(j, key);
  return f != nullptr && f->is_number() ? f->template get<double>() : fallback;
}

// The member `key` of object `j` as a string; `where` names the object in the error ("session.json").
template <typename J>
Result<std::string> RequireString(const J& j, std::string_view key, std::string_view where) {
  const J* f = Field(j, key);
  if (f == nullptr) return Status::InvalidArgument(std::string(where) + ": \"" + std::string(key) + "\" is missing");
  if (!f->is_string()) {
    return Status::InvalidArgument(std::string(where) + ": \"" + std::string(key) + "\" must be a string, not " +
                                   std::string(TypeName(*f)));
  }
  return f->template get<std::string>();
}

template <typename J>
Result<int64_t> RequireInt(const J& j, std::string_view key, std::string_view where) {
  const J* f = Field(j, key);
  if (f == nullptr) return Status::InvalidArgument(std::string(where) + ": \"" + std::string(key) + "\" is missing");
  if (!f->is_number_integer()) {
    return Status::InvalidArgument(std::string(where) + ": \"" + std::string(key) + "\" must be an integer, not " +
                                   std::string(TypeName(*f)));
  }
  return f->template get<int64_t>();
}

// A field that, when present and not null, must be a string: kInvalidArgument otherwise.
template <typename J>
Result<std::string> OptionalString(const J& j, std::string_view key, std::string_view where) {
  const J* f = Field(j, key);
  if (f == nullptr || f->is_null()) return std::string();
  return RequireString(j, key, where);
}

// `J::parse(text, nullptr, false)` for untrusted text: a discarded value for invalid JSON and also for JSON
// nested deeper than `max_depth` (DescribeSyntaxError says which).
template <typename J>
J ParseOrDiscard(std::string_view text, size_t max_depth = kMaxJsonDepth) {
  // A raw NUL is never JSON, and the parser would take it for the end (ignoring whatever follows).
  if (text.find('\0') != std::string_view::npos) return J(J::value_t::discarded);
  if (FindTooDeep(text, max_depth) != std::string_view::npos) return J(J::value_t::discarded);
  return J::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
}

// Parses untrusted `text` without throwing: invalid JSON and JSON nested deeper than `max_depth` are
// kInvalidArgument naming `what`, the byte offset and the problem (never echoing the input whole).
template <typename J = nlohmann::json>
Result<J> ParseUntrusted(std::string_view text, std::string_view what, size_t max_depth = kMaxJsonDepth) {
  // A raw NUL is never JSON, and the parser would take it for the end (ignoring whatever follows).
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return Status::InvalidArgument(std::string(what) + ": a NUL byte at byte " + std::to_string(nul) +
                                   " (JSON holds none outside \\u0000 escapes)");
  }
  size_t deep = FindTooDeep(text, max_depth);
  if (deep != std::string_view::npos) {
    return Status::InvalidArgument(std::string(what) + ": JSON nested deeper than " + std::to_string(max_depth) +
                                   " levels at byte " + std::to_string(deep));
  }
  J j = J::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Status::InvalidArgument(std::string(what) + ": " + DescribeSyntaxError(text));
  return j;
}

}  // namespace strata::json
