#include "strata/util/status.h"

namespace strata {

std::string_view StatusCodeName(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kFailedPrecondition: return "failed_precondition";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kResourceExhausted: return "resource_exhausted";
    case StatusCode::kDataLoss: return "data_loss";
    case StatusCode::kCancelled: return "cancelled";
    case StatusCode::kDeadlineExceeded: return "deadline_exceeded";
    case StatusCode::kAlreadyExists: return "already_exists";
    case StatusCode::kInternal: return "internal";
    case StatusCode::kUnauthenticated: return "unauthenticated";
    case StatusCode::kPermissionDenied: return "permission_denied";
    case StatusCode::kAborted: return "aborted";
  }
  return "unknown";
}

std::string Status::ToString() const {
  if (ok()) return "ok";
  std::string out(StatusCodeName(code_));
  out += ": ";
  out += message_;
  return out;
}

Status Status::WithContext(std::string_view context) const {
  if (ok()) return *this;
  std::string msg(context);
  msg += ": ";
  msg += message_;
  Status out(code_, std::move(msg));
  out.payloads_ = payloads_;
  return out;
}

void Status::SetPayload(std::string_view key, std::string value) {
  if (ok()) return;
  auto next = payloads_ ? std::make_shared<Payloads>(*payloads_) : std::make_shared<Payloads>();
  for (auto& [k, v] : *next) {
    if (k == key) {
      v = std::move(value);
      payloads_ = std::move(next);
      return;
    }
  }
  next->emplace_back(std::string(key), std::move(value));
  payloads_ = std::move(next);
}

std::optional<std::string_view> Status::GetPayload(std::string_view key) const {
  if (!payloads_) return std::nullopt;
  for (const auto& [k, v] : *payloads_) {
    if (k == key) return std::string_view(v);
  }
  return std::nullopt;
}

bool Status::operator==(const Status& other) const {
  if (code_ != other.code_ || message_ != other.message_) return false;
  static const Payloads kNone;
  const Payloads& a = payloads_ ? *payloads_ : kNone;
  const Payloads& b = other.payloads_ ? *other.payloads_ : kNone;
  return a == b;
}

int ExitCodeFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 0;
    case StatusCode::kInvalidArgument: return 2;
    case StatusCode::kNotFound: return 3;
    case StatusCode::kFailedPrecondition: return 4;
    case StatusCode::kUnavailable: return 5;
    case StatusCode::kResourceExhausted: return 6;
    case StatusCode::kDataLoss: return 7;
    case StatusCode::kCancelled: return 8;
    case StatusCode::kDeadlineExceeded: return 9;
    case StatusCode::kAlreadyExists: return 11;
    case StatusCode::kInternal: return 10;
    case StatusCode::kUnauthenticated: return 12;
    case StatusCode::kPermissionDenied: return 13;
    case StatusCode::kAborted: return 14;
  }
  return 10;
}

int HttpStatusFor(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return 200;
    case StatusCode::kInvalidArgument: return 400;
    case StatusCode::kNotFound: return 404;
    case StatusCode::kFailedPrecondition: return 409;
    case StatusCode::kUnavailable: return 503;
    case StatusCode::kResourceExhausted: return 429;
    case StatusCode::kDataLoss: return 500;
    case StatusCode::kCancelled: return 499;
    case StatusCode::kDeadlineExceeded: return 504;
    case StatusCode::kAlreadyExists: return 409;
    case StatusCode::kInternal: return 500;
    case StatusCode::kUnauthenticated: return 401;
    case StatusCode::kPermissionDenied: return 403;
    case StatusCode::kAborted: return 409;
  }
  return 500;
}

}  // namespace strata
