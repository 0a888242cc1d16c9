// The LLM layer's one error taxonomy.
//
// Every provider failure is a Status whose code says what the caller does next and whose payloads say what
// happened, so callers can branch without parsing messages:
//
//   kind              Status code                          retryable
//   connection        kUnavailable                         yes (refused, reset, DNS, TLS, truncated body)
//   timeout           kDeadlineExceeded                    yes (connect, idle or total timeout)
//   http_status       by status: 429 kResourceExhausted,    429, 408, 409, 5xx (and 529): yes
//                     5xx kUnavailable, 401/403
//                     kFailedPrecondition, 404 kNotFound,
//                     other 4xx kInvalidArgument
//   empty_response    kUnavailable                         yes (no text, no media and no tool call)
//   content_filter    kFailedPrecondition                  no  (the provider refused the prompt: a safety
//                                                               or content filter; a reply filtered on its
//                                                               way out is empty_response, naming why)
//   invalid_response  kDataLoss                            no  (malformed JSON, unexpected shape)
//   cancelled         kCancelled                           no
//
// A Status from elsewhere (e.g. a bad request built from invalid input) has no kind.
//
// Thread safety: all functions are thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "strata/util/status.h"

namespace strata::llm {

enum class ChatErrorKind {
  kConnection,
  kTimeout,
  kHttpStatus,
  kEmptyResponse,
  kInvalidResponse,
  kCancelled,
  kContentFilter
};

// Returns "connection", "timeout", "http_status", "empty_response", "invalid_response", "cancelled" or
// "content_filter".
std::string_view ChatErrorKindName(ChatErrorKind kind);

struct ChatErrorInfo {
  ChatErrorKind kind = ChatErrorKind::kInvalidResponse;
  int http_status = 0;                  // For kHttpStatus.
  std::string provider_message;         // The provider's own error text, when it sent one.
  std::optional<std::chrono::milliseconds> retry_after;  // From a Retry-After header.
};

// Builds the Status for `info`; `message` is the human-readable summary.
Status MakeChatError(const ChatErrorInfo& info, std::string message);

// Shorthands for the common kinds.
Status ConnectionError(std::string message);
Status TimeoutError(std::string message);
Status InvalidResponseError(std::string message);
Status EmptyResponseError(std::string message);
Status CancelledError(std::string message);
Status ContentFilterError(std::string message);
// An HTTP error status; `provider_message` is extracted from the error body when possible.
Status HttpStatusError(int http_status, std::string_view body,
                       std::optional<std::chrono::milliseconds> retry_after = std::nullopt);
// An error the provider sent inside a response whose HTTP status was 200 (an SSE error event, an error
// object as the body): the http_status kind with `http_status` the status its type stands for (classifying
// it), but a message that says where it came from, "<provider>: <where>: <its message>" — not "HTTP 500",
// which no request returned.
Status EmbeddedError(std::string_view provider, std::string_view where, int http_status, std::string_view body);

// Returns the error's kind and details, or nullopt if `status` is OK or not a chat error.
std::optional<ChatErrorInfo> ChatErrorOf(const Status& status);

// Returns whether retrying the same request may succeed (see the table above).
bool IsRetryable(const Status& status);

// Extracts a readable message from a provider's error body: `error.message`, `error` (a string), `message`,
// `detail`, or else the body itself shortened to 300 bytes.
std::string ExtractProviderErrorMessage(std::string_view body);

// Parses a Retry-After header value: delta-seconds (fractions allowed) or an HTTP-date relative to `now`.
std::optional<std::chrono::milliseconds> ParseRetryAfter(std::string_view value,
                                                         std::chrono::system_clock::time_point now);

}  // namespace strata::llm
