// Status and Result<T>: Strata's error values.
//
// Expected failures (bad input, a missing file, a corrupt record, a provider's 429) are returned as values,
// never thrown. The code says what the caller does next; the message says what was wrong and where
// (file, line, byte offset, the offending value). Each code maps once, here, to a process exit code and an
// HTTP status so every adapter (CLI, server) reports the same failure the same way.
//
// Thread safety: Status and Result are values; distinct objects may be used from distinct threads.
#pragma once

#include <cassert>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata {

// StatusCode is chosen by what the caller does next, not by where the failure happened.
enum class StatusCode {
  kOk = 0,
  kInvalidArgument,     // Fix the input; retrying the same call fails the same way.
  kNotFound,            // The named thing (file, checkpoint, URI) does not exist.
  kFailedPrecondition,  // The system is not in a state for this call (already restored, poisoned writer).
  kUnavailable,         // Transient: retry later, perhaps with backoff (locked by another writer, HTTP 503).
  kResourceExhausted,   // A limit was hit (budget, quota, disk full).
  kDataLoss,            // Stored data is damaged or durability could not be guaranteed.
  kCancelled,           // The caller cancelled the operation.
  kDeadlineExceeded,    // A timeout expired.
  kAlreadyExists,       // The name is taken (a file created exclusively, a registered type): pick another.
  kInternal,            // A bug or an unexpected operating-system failure.
  kUnauthenticated,     // No valid credentials (an API key): supply them.
  kPermissionDenied,    // The credentials do not reach this (another user's scope): nothing to retry.
  kAborted,             // Lost a race and changed nothing: another worker holds what this one worked on (an
                        // expired lease), or it was removed meanwhile.
};

// Returns the lower-case name of `code` ("invalid_argument", ...).
std::string_view StatusCodeName(StatusCode code);

class [[nodiscard]] Status {
 public:
  // Creates an OK status.
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) { return {StatusCode::kInvalidArgument, std::move(msg)}; }
  static Status NotFound(std::string msg) { return {StatusCode::kNotFound, std::move(msg)}; }
  static Status FailedPrecondition(std::string msg) { return {StatusCode::kFailedPrecondition, std::move(msg)}; }
  static Status Unavailable(std::string msg) { return {StatusCode::kUnavailable, std::move(msg)}; }
  static Status ResourceExhausted(std::string msg) { return {StatusCode::kResourceExhausted, std::move(msg)}; }
  static Status DataLoss(std::string msg) { return {StatusCode::kDataLoss, std::move(msg)}; }
  static Status Cancelled(std::string msg) { return {StatusCode::kCancelled, std::move(msg)}; }
  static Status DeadlineExceeded(std::string msg) { return {StatusCode::kDeadlineExceeded, std::move(msg)}; }
  static Status AlreadyExists(std::string msg) { return {StatusCode::kAlreadyExists, std::move(msg)}; }
  static Status Internal(std::string msg) { return {StatusCode::kInternal, std::move(msg)}; }
  static Status Unauthenticated(std::string msg) { return {StatusCode::kUnauthenticated, std::move(msg)}; }
  static Status PermissionDenied(std::string msg) { return {StatusCode::kPermissionDenied, std::move(msg)}; }
  static Status Aborted(std::string msg) { return {StatusCode::kAborted, std::move(msg)}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns "code: message", or "ok".
  std::string ToString() const;

  // Returns a copy whose message is "`context`: original message"; OK stays OK.
  Status WithContext(std::string_view context) const;

  // Payloads: typed details attached by the layer that knows them (e.g. the LLM layer's error kind, HTTP
  // status and Retry-After), keyed by a namespaced name such as "strata.llm.kind". Setting on an OK status
  // does nothing. WithContext keeps them.
  void SetPayload(std::string_view key, std::string value);
  // Returns the payload under `key`, or nullopt.
  std::optional<std::string_view> GetPayload(std::string_view key) const;

  bool operator==(const Status& other) const;

 private:
  using Payloads = std::vector<std::pair<std::string, std::string>>;
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
  std::shared_ptr<const Payloads> payloads_;  // Shared, copy-on-write: Status stays cheap to copy.
};

// Returns the process exit code for `code`: 0 for OK, 2 for invalid arguments, 3.. for the others.
// Exit code 1 is reserved for "the command ran and found a problem" (e.g. `strata context check`).
int ExitCodeFor(StatusCode code);

// Returns the HTTP status that a server reports for `code` (400, 404, 409, 503, 429, 500, ...).
int HttpStatusFor(StatusCode code);

// Result<T> holds either a T or a non-OK Status.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design, like absl::StatusOr.
  Result(Status status) : status_(std::move(status)) {  // NOLINT
    assert(!status_.ok() && "Result constructed from an OK status without a value");
    if (status_.ok()) status_ = Status::Internal("Result constructed from OK status without a value");
  }

  bool ok() const { return status_.ok(); }
  const Status& status() const { return status_; }

  // Accessors require ok(); calling them on an error is a programmer error.
  T& value() & { assert(ok()); return *value_; }
  const T& value() const& { assert(ok()); return *value_; }
  T&& value() && { assert(ok()); return std::move(*value_); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  Status status_;
  std::optional<T> value_;
};

}  // namespace strata

#define STRATA_CONCAT_INNER_(a, b) a##b
#define STRATA_CONCAT_(a, b) STRATA_CONCAT_INNER_(a, b)

// Returns from the enclosing function if `expr` (a Status) is not OK.
#define STRATA_RETURN_IF_ERROR(expr)                  \
  do {                                                \
    ::strata::Status strata_status_ = (expr);         \
    if (!strata_status_.ok()) return strata_status_;  \
  } while (0)

// Evaluates `rexpr` (a Result<T>); on error returns its status, otherwise assigns the value to `lhs`.
#define STRATA_ASSIGN_OR_RETURN(lhs, rexpr) \
  STRATA_ASSIGN_OR_RETURN_IMPL_(STRATA_CONCAT_(strata_result_, __LINE__), lhs, rexpr)
#define STRATA_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                   \
  if (!tmp.ok()) return tmp.status();                   \
  lhs = std::move(tmp).value()
