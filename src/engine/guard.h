// Internal to the engine: the exception barrier of its entry points.
#pragma once

#include <exception>
#include <string>
#include <string_view>

#include "strata/engine/engine.h"
#include "strata/util/status.h"

namespace strata::engine_internal {

// Runs `body`, turning an exception that escaped the library (a bug) into kInternal naming `what`.
template <typename F>
auto Guard(std::string_view what, F&& body) -> decltype(body()) {
  try {
    return body();
  } catch (const std::exception& e) {
    return Status::Internal(std::string(what) + ": unexpected error: " + e.what());
  } catch (...) {
    return Status::Internal(std::string(what) + ": unexpected error");
  }
}

// "" where a URI is required: refused as every front end refuses it, naming the argument (`name`: "uri",
// "from", "to", "under", "scope").
inline Status NotEmpty(std::string_view text, std::string_view name) {
  if (!text.empty()) return Status::Ok();
  return Status::InvalidArgument("\"" + std::string(name) + "\" must not be empty");
}

// kFailedPrecondition naming the mode when the engine was opened read-only (EngineOptions::read_only):
// every operation that would change the data calls it first.
inline Status Writable(const EngineOptions& options, std::string_view what) {
  if (!options.read_only) return Status::Ok();
  return Status::FailedPrecondition(std::string(what) + " refused: the data is open read-only (--read-only)");
}

// A model's refusal of a request the engine made (HTTP 400, 404, 422: a wrong model name, a prompt it will
// not take) is not the caller's mistake: kFailedPrecondition saying it was the model's answer, not
// kInvalidArgument or kNotFound, which front ends answer as the caller's own 400 or 404 ("HTTP 404" read as
// a missing scope). Every other status is returned as it is.
Status ModelRefusal(Status status);

template <typename T>
Result<T> ModelRefusal(Result<T> result) {
  if (result.ok()) return result;
  return ModelRefusal(result.status());
}

}  // namespace strata::engine_internal
