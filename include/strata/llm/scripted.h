// Offline providers for tests, demos and reproducible runs.
//
// ScriptedProvider answers each Generate() with the next reply of a script: streamed parts (with id and
// usage), an error before the stream starts, or an error after some parts; or, built with a Responder,
// with whatever that function makes of the request (a deterministic stand-in for a model, e.g. one that
// echoes the facts it is shown). It records every request it receives so tests can assert on what the
// agent sent.
//
// Script JSON (a file for `strata chat --provider scripted --script FILE`): a list of replies, or
// {"model": M, "replies": [...]}. A reply is one of
//   {"text": "..."}                                   one text part
//   {"parts": [<streamed part>...], "id": ..., "usage": {"input_other":..,"output":..,...}, "stop_reason": ...}
//   {"error": {"kind": "http_status", "status": 429, "message": "..."}}   fails before streaming
//   {"parts": [...], "stream_error": {"kind": "connection", "message": "..."}}  fails mid-stream
// where a streamed part is a content part ({"type":"text",...}), a tool call ({"type":"function",...}) or a
// fragment ({"arguments_part": ...}), as in message_json.h.
//
// RecordingTransport / ReplayTransport (http level): record every exchange a real provider makes to a
// JSONL file (request URL and body, response status, headers that matter and raw body; never request
// headers, so keys are not written), and serve them back later in order, optionally checking that each
// request body equals the recorded one.
//
// Thread safety: ScriptedProvider and the transports are thread-safe.
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "strata/llm/http.h"
#include "strata/llm/provider.h"

namespace strata::llm {

struct ScriptedReply {
  std::vector<StreamedPart> parts;
  std::string id;
  std::optional<TokenUsage> usage;
  std::string stop_reason;  // ChatStream::stop_reason ("" for a plain end).
  Status error;         // Returned by Generate() instead of a stream.
  Status stream_error;  // Returned by Next() after the parts.
};

class ScriptedProvider final : public ChatProvider {
 public:
  struct Request {
    std::string system_prompt;
    std::vector<ToolDeclaration> tools;
    std::vector<Message> history;
  };

  using Responder = std::function<ScriptedReply(const Request&)>;

  ScriptedProvider(std::string model, std::vector<ScriptedReply> replies);
  ScriptedProvider(std::string model, Responder responder);
  // Parses a script (see above); errors name the reply index.
  static Result<std::unique_ptr<ScriptedProvider>> FromJson(std::string_view script);

  std::string_view name() const override { return "scripted"; }
  std::string_view model() const override { return model_; }
  Result<std::unique_ptr<ChatStream>> Generate(std::string_view system_prompt, std::span<const ToolDeclaration> tools,
                                               std::span<const Message> history,
                                               const GenerateOptions& options = {}) override;

  std::vector<Request> requests() const;
  size_t remaining() const;

 private:
  std::string model_;
  mutable std::mutex mu_;
  std::vector<ScriptedReply> replies_;  // Guarded by mu_.
  Responder responder_;                 // Answers instead of replies_ when set.
  size_t next_ = 0;                     // Guarded by mu_.
  std::vector<Request> requests_;       // Guarded by mu_.
};

// Records the exchanges made through `inner` to `path` (appending).
std::shared_ptr<HttpTransport> RecordingTransport(std::shared_ptr<HttpTransport> inner, std::string path);

// Serves the exchanges recorded in `path`, in order. With `check_requests`, a request whose body differs
// from the recorded one (as JSON) fails with kFailedPrecondition naming the exchange. `chunk_bytes` > 0
// delivers bodies in pieces of that size, as a network would.
Result<std::shared_ptr<HttpTransport>> ReplayTransport(const std::string& path, bool check_requests = true,
                                                       size_t chunk_bytes = 0);

}  // namespace strata::llm
