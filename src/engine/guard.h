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

// kFailedPrecondition naming the mode when the engine was opened read-only (EngineOptions::read_only):
// every operation that would change the data calls it first.
inline Status Writable(const EngineOptions& options, std::string_view what) {
  if (!options.read_only) return Status::Ok();
  return Status::FailedPrecondition(std::string(what) + " refused: the data is open read-only (--read-only)");
}

}  // namespace strata::engine_internal
