#include "strata/llm/scripted.h"

#include "strata/json/checked.h"

#include <fstream>
#include <nlohmann/json.hpp>

#include "strata/json/json_writer.h"
#include "strata/llm/chat_error.h"
#include "strata/message/message_json.h"

namespace strata::llm {
namespace {

using Json = nlohmann::json;

class ScriptedStream final : public ChatStream {
 public:
  ScriptedStream(ScriptedReply reply, const Canceller* cancel) : reply_(std::move(reply)), cancel_(cancel) {}

  Result<bool> Next(StreamedPart* part) override {
    if (cancel_ != nullptr && cancel_->cancelled()) return CancelledError("generation cancelled");
    if (next_ < reply_.parts.size()) {
      *part = reply_.parts[next_++];
      return true;
    }
    STRATA_RETURN_IF_ERROR(reply_.stream_error);
    return false;
  }
  std::string id() const override { return reply_.id; }
  std::optional<TokenUsage> usage() const override { return reply_.usage; }
  std::string stop_reason() const override { return reply_.stop_reason; }

 private:
  ScriptedReply reply_;
  const Canceller* cancel_;
  size_t next_ = 0;
};

// Sets *error to the error `e` describes; fails if `e` is malformed.
Status ErrorFromJson(const Json& e, const std::string& where, Status* error) {
  if (!e.is_object()) return Status::InvalidArgument(where + ": expected an object");
  for (const char* key : {"kind", "message"}) {
    STRATA_RETURN_IF_ERROR(json::OptionalString(e, key, where).status());
  }
  for (const char* key : {"status", "retry_after_ms"}) {
    if (const Json* v = json::Field(e, key); v != nullptr && !v->is_number_integer()) {
      return Status::InvalidArgument(where + ": \"" + key + "\" must be an integer, not " + std::string(json::TypeName(*v)));
    }
  }
  std::string kind = json::StringOr(e, "kind", "http_status");
  std::string message = json::StringOr(e, "message", kind);
  if (kind == "http_status") {
    int status = static_cast<int>(json::IntOr(e, "status", 500));
    std::optional<std::chrono::milliseconds> retry_after;
    if (e.contains("retry_after_ms")) retry_after = std::chrono::milliseconds(json::IntOr(e, "retry_after_ms", 0));
    *error = HttpStatusError(status, Json{{"error", {{"message", message}}}}.dump(), retry_after);
  } else if (kind == "connection") {
    *error = ConnectionError(message);
  } else if (kind == "timeout") {
    *error = TimeoutError(message);
  } else if (kind == "empty_response") {
    *error = EmptyResponseError(message);
  } else if (kind == "invalid_response") {
    *error = InvalidResponseError(message);
  } else {
    return Status::InvalidArgument(where + ".kind: unknown error kind \"" + kind +
                                 "\" (expected http_status, connection, timeout, empty_response, invalid_response)");
  }
  return Status::Ok();
}

Result<ScriptedReply> ReplyFromJson(const Json& r, const std::string& where) {
  if (!r.is_object()) return Status::InvalidArgument(where + ": expected an object");
  ScriptedReply reply;
  STRATA_ASSIGN_OR_RETURN(reply.id, json::OptionalString(r, "id", where));
  STRATA_ASSIGN_OR_RETURN(reply.stop_reason, json::OptionalString(r, "stop_reason", where));
  if (r.contains("text")) {
    if (!r["text"].is_string()) return Status::InvalidArgument(where + ".text: expected a string");
    reply.parts.push_back(ContentPart(TextPart{r["text"].get<std::string>()}));
  }
  if (r.contains("parts")) {
    if (!r["parts"].is_array()) return Status::InvalidArgument(where + ".parts: expected a list");
    for (size_t i = 0; i < r["parts"].size(); ++i) {
      auto part = ParseStreamedPart(r["parts"][i].dump());
      if (!part.ok()) return part.status().WithContext(where + ".parts[" + std::to_string(i) + "]");
      reply.parts.push_back(std::move(*part));
    }
  }
  if (r.contains("usage")) {
    const Json& u = r["usage"];
    if (!u.is_object()) return Status::InvalidArgument(where + ".usage: expected an object");
    for (const char* key : {"input_other", "output", "input_cache_read", "input_cache_creation"}) {
      if (const Json* v = json::Field(u, key); v != nullptr && !v->is_number_integer()) {
        return Status::InvalidArgument(where + ".usage: \"" + key + "\" must be an integer, not " +
                                       std::string(json::TypeName(*v)));
      }
    }
    reply.usage = TokenUsage{json::IntOr(u, "input_other", 0), json::IntOr(u, "output", 0),
                             json::IntOr(u, "input_cache_read", 0), json::IntOr(u, "input_cache_creation", 0)};
  }
  if (r.contains("error")) {
    STRATA_RETURN_IF_ERROR(ErrorFromJson(r["error"], where + ".error", &reply.error));
  }
  if (r.contains("stream_error")) {
    STRATA_RETURN_IF_ERROR(ErrorFromJson(r["stream_error"], where + ".stream_error", &reply.stream_error));
  }
  return reply;
}

}  // namespace

ScriptedProvider::ScriptedProvider(std::string model, std::vector<ScriptedReply> replies)
    : model_(std::move(model)), replies_(std::move(replies)) {}

ScriptedProvider::ScriptedProvider(std::string model, Responder responder)
    : model_(std::move(model)), responder_(std::move(responder)) {}

Result<std::unique_ptr<ScriptedProvider>> ScriptedProvider::FromJson(std::string_view script) {
  Json j = strata::json::ParseOrDiscard<Json>(script);
  if (j.is_discarded()) return Status::InvalidArgument("script: not valid JSON: " + json::DescribeSyntaxError(script));
  std::string model = "scripted";
  if (j.is_object()) {
    STRATA_ASSIGN_OR_RETURN(std::string named, json::OptionalString(j, "model", "script"));
    if (!named.empty()) model = std::move(named);
    if (!j.contains("replies")) return Status::InvalidArgument("script: expected a \"replies\" list");
    j = j["replies"];
  }
  if (!j.is_array()) return Status::InvalidArgument("script: expected a list of replies");
  std::vector<ScriptedReply> replies;
  for (size_t i = 0; i < j.size(); ++i) {
    STRATA_ASSIGN_OR_RETURN(ScriptedReply reply, ReplyFromJson(j[i], "script.replies[" + std::to_string(i) + "]"));
    replies.push_back(std::move(reply));
  }
  return std::make_unique<ScriptedProvider>(std::move(model), std::move(replies));
}

Result<std::unique_ptr<ChatStream>> ScriptedProvider::Generate(std::string_view system_prompt,
                                                               std::span<const ToolDeclaration> tools,
                                                               std::span<const Message> history,
                                                               const GenerateOptions& options) {
  if (options.cancel != nullptr && options.cancel->cancelled()) return CancelledError("generation cancelled");
  std::lock_guard lock(mu_);
  requests_.push_back({std::string(system_prompt), {tools.begin(), tools.end()}, {history.begin(), history.end()}});
  if (responder_) {
    ScriptedReply reply = responder_(requests_.back());
    STRATA_RETURN_IF_ERROR(reply.error);
    return std::unique_ptr<ChatStream>(new ScriptedStream(std::move(reply), options.cancel));
  }
  if (next_ >= replies_.size()) {
    return Status::FailedPrecondition("scripted provider: the script has no reply left (it had " +
                                      std::to_string(replies_.size()) + ")");
  }
  ScriptedReply reply = replies_[next_++];
  STRATA_RETURN_IF_ERROR(reply.error);
  return std::unique_ptr<ChatStream>(new ScriptedStream(std::move(reply), options.cancel));
}

std::vector<ScriptedProvider::Request> ScriptedProvider::requests() const {
  std::lock_guard lock(mu_);
  return requests_;
}

size_t ScriptedProvider::remaining() const {
  std::lock_guard lock(mu_);
  return replies_.size() - next_;
}

}  // namespace strata::llm
