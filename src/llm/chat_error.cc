#include "strata/llm/chat_error.h"

#include "strata/json/checked.h"
#include "strata/util/utf8.h"
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

namespace strata::llm {
namespace {

constexpr std::string_view kKindKey = "strata.llm.kind";
constexpr std::string_view kHttpStatusKey = "strata.llm.http_status";
constexpr std::string_view kProviderMessageKey = "strata.llm.provider_message";
constexpr std::string_view kRetryAfterKey = "strata.llm.retry_after_ms";

StatusCode CodeFor(const ChatErrorInfo& info) {
  switch (info.kind) {
    case ChatErrorKind::kConnection: return StatusCode::kUnavailable;
    case ChatErrorKind::kTimeout: return StatusCode::kDeadlineExceeded;
    case ChatErrorKind::kEmptyResponse: return StatusCode::kUnavailable;
    case ChatErrorKind::kInvalidResponse: return StatusCode::kDataLoss;
    case ChatErrorKind::kCancelled: return StatusCode::kCancelled;
    case ChatErrorKind::kContentFilter: return StatusCode::kFailedPrecondition;
    case ChatErrorKind::kHttpStatus: break;
  }
  int s = info.http_status;
  if (s == 429) return StatusCode::kResourceExhausted;
  if (s >= 500 || s == 408 || s == 409) return StatusCode::kUnavailable;
  if (s == 401 || s == 403) return StatusCode::kFailedPrecondition;
  if (s == 404) return StatusCode::kNotFound;
  return StatusCode::kInvalidArgument;
}

}  // namespace

std::string_view ChatErrorKindName(ChatErrorKind kind) {
  switch (kind) {
    case ChatErrorKind::kConnection: return "connection";
    case ChatErrorKind::kTimeout: return "timeout";
    case ChatErrorKind::kHttpStatus: return "http_status";
    case ChatErrorKind::kEmptyResponse: return "empty_response";
    case ChatErrorKind::kInvalidResponse: return "invalid_response";
    case ChatErrorKind::kCancelled: return "cancelled";
    case ChatErrorKind::kContentFilter: return "content_filter";
  }
  return "unknown";
}

Status MakeChatError(const ChatErrorInfo& info, std::string message) {
  Status status(CodeFor(info), std::move(message));
  status.SetPayload(kKindKey, std::string(ChatErrorKindName(info.kind)));
  if (info.kind == ChatErrorKind::kHttpStatus) status.SetPayload(kHttpStatusKey, std::to_string(info.http_status));
  if (!info.provider_message.empty()) status.SetPayload(kProviderMessageKey, info.provider_message);
  if (info.retry_after) status.SetPayload(kRetryAfterKey, std::to_string(info.retry_after->count()));
  return status;
}

Status ConnectionError(std::string message) {
  return MakeChatError({.kind = ChatErrorKind::kConnection}, std::move(message));
}
Status TimeoutError(std::string message) {
  return MakeChatError({.kind = ChatErrorKind::kTimeout}, std::move(message));
}
Status InvalidResponseError(std::string message) {
  return MakeChatError({.kind = ChatErrorKind::kInvalidResponse}, std::move(message));
}
Status EmptyResponseError(std::string message) {
  return MakeChatError({.kind = ChatErrorKind::kEmptyResponse}, std::move(message));
}
Status CancelledError(std::string message) {
  return MakeChatError({.kind = ChatErrorKind::kCancelled}, std::move(message));
}
Status ContentFilterError(std::string message) {
  return MakeChatError({.kind = ChatErrorKind::kContentFilter}, std::move(message));
}

Status HttpStatusError(int http_status, std::string_view body, std::optional<std::chrono::milliseconds> retry_after) {
  ChatErrorInfo info{.kind = ChatErrorKind::kHttpStatus, .http_status = http_status,
                     .provider_message = ExtractProviderErrorMessage(body), .retry_after = retry_after};
  std::string message = "HTTP " + std::to_string(http_status);
  if (!info.provider_message.empty()) message += ": " + info.provider_message;
  return MakeChatError(info, std::move(message));
}

Status EmbeddedError(std::string_view provider, std::string_view where, int http_status, std::string_view body) {
  ChatErrorInfo info{.kind = ChatErrorKind::kHttpStatus, .http_status = http_status,
                     .provider_message = ExtractProviderErrorMessage(body)};
  std::string message = std::string(provider) + ": " + std::string(where);
  if (!info.provider_message.empty()) message += ": " + info.provider_message;
  return MakeChatError(info, std::move(message));
}

std::optional<ChatErrorInfo> ChatErrorOf(const Status& status) {
  auto kind = status.GetPayload(kKindKey);
  if (!kind) return std::nullopt;
  ChatErrorInfo info;
  for (ChatErrorKind k : {ChatErrorKind::kConnection, ChatErrorKind::kTimeout, ChatErrorKind::kHttpStatus,
                          ChatErrorKind::kEmptyResponse, ChatErrorKind::kInvalidResponse, ChatErrorKind::kCancelled,
                          ChatErrorKind::kContentFilter}) {
    if (ChatErrorKindName(k) == *kind) info.kind = k;
  }
  if (auto s = status.GetPayload(kHttpStatusKey)) info.http_status = std::atoi(std::string(*s).c_str());
  if (auto m = status.GetPayload(kProviderMessageKey)) info.provider_message = std::string(*m);
  if (auto r = status.GetPayload(kRetryAfterKey)) {
    info.retry_after = std::chrono::milliseconds(std::atoll(std::string(*r).c_str()));
  }
  return info;
}

bool IsRetryable(const Status& status) {
  auto info = ChatErrorOf(status);
  if (!info) return false;
  switch (info->kind) {
    case ChatErrorKind::kConnection:
    case ChatErrorKind::kTimeout:
    case ChatErrorKind::kEmptyResponse: return true;
    case ChatErrorKind::kInvalidResponse:
    case ChatErrorKind::kCancelled:
    case ChatErrorKind::kContentFilter: return false;
    case ChatErrorKind::kHttpStatus: {
      int s = info->http_status;
      return s == 429 || s == 408 || s == 409 || s >= 500;
    }
  }
  return false;
}

std::string ExtractProviderErrorMessage(std::string_view body) {
  auto shorten = [](std::string_view s) {
    std::string out(s.substr(0, Utf8Prefix(s, 300)));  // Never inside a character.
    if (s.size() > 300) out += "...";
    while (!out.empty() && (out.back() == '\n' || out.back() == '\r' || out.back() == ' ')) out.pop_back();
    return out;
  };
  nlohmann::json j = strata::json::ParseOrDiscard<nlohmann::json>(body);
  // Gemini and some proxies wrap the error object in a one-element array.
  if (j.is_array() && j.size() == 1) j = j[0];
  if (j.is_object()) {
    auto pick = [](const nlohmann::json& o, const char* key) -> std::string {
      auto it = o.find(key);
      return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
    };
    auto err = j.find("error");
    if (err != j.end() && err->is_object()) {
      std::string m = pick(*err, "message");
      if (!m.empty()) return m;
    }
    if (err != j.end() && err->is_string()) return err->get<std::string>();
    for (const char* key : {"message", "detail"}) {
      std::string m = pick(j, key);
      if (!m.empty()) return m;
    }
  }
  return shorten(body);
}

std::optional<std::chrono::milliseconds> ParseRetryAfter(std::string_view value,
                                                         std::chrono::system_clock::time_point now) {
  while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ') value.remove_suffix(1);
  if (value.empty()) return std::nullopt;
  bool numeric = true;
  for (char c : value) numeric = numeric && ((c >= '0' && c <= '9') || c == '.');
  if (numeric) {
    double seconds = std::strtod(std::string(value).c_str(), nullptr);
    if (!std::isfinite(seconds) || seconds < 0) return std::nullopt;
    return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0));
  }
  // IMF-fixdate, e.g. "Wed, 21 Oct 2015 07:28:00 GMT".
  std::tm tm{};
  const char* end = strptime(std::string(value).c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr) return std::nullopt;
  auto when = std::chrono::system_clock::from_time_t(timegm(&tm));
  auto delta = std::chrono::duration_cast<std::chrono::milliseconds>(when - now);
  return delta.count() < 0 ? std::chrono::milliseconds(0) : delta;
}

}  // namespace strata::llm
