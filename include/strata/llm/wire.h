// Provider wire formats: what Strata sends to each vendor's API and how it reads the replies.
//
// Everything here is pure (no I/O), so the exact bytes are testable: BuildRequestBody() turns a system
// prompt, tool declarations and a history of vendor-neutral Messages into the JSON body of one request, and
// a StreamDecoder turns the response (Server-Sent Events payloads, or one non-streamed JSON body) back into
// StreamedParts plus the response id and TokenUsage. The HTTP transport (http.h) and the provider
// (provider.h) put these together.
//
// Formats:
//   kOpenAIChat       OpenAI chat completions and compatibles (DeepSeek, Ollama, vLLM, llama.cpp server).
//   kKimi             Moonshot/Kimi chat completions: `reasoning_content` thinking, tool-call-only assistant
//                     turns without `content`, `$builtin` tools, missing schema `type`s filled in.
//   kOpenAIResponses  OpenAI Responses API (`input` items, reasoning items, stateless: store=false).
//   kAnthropic        Anthropic Messages (content blocks, thinking signatures, prompt caching markers).
//   kGemini           Google Gemini generateContent REST (camelCase, functionCall/functionResponse).
//
// Options are a JSON object of per-format keys (unknown keys are rejected with the list of known ones);
// every format accepts "extra_body" (an object merged into the body last) and the sampling keys listed in
// docs/providers.md.
//
// Thread safety: functions are thread-safe; a StreamDecoder is not (one per response).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/message/message.h"
#include "strata/util/status.h"

namespace strata::llm {

enum class ProviderKind { kOpenAIChat, kKimi, kOpenAIResponses, kAnthropic, kGemini };

// Accepts "openai", "openai_legacy", "kimi", "moonshot", "deepseek", "ollama", "vllm", "llamacpp",
// "openai-responses" / "openai_responses", "anthropic", "gemini" / "google_genai".
Result<ProviderKind> ParseProviderKind(std::string_view name);
std::string_view ProviderKindName(ProviderKind kind);

// A tool as the model sees it: JSON Schema `parameters` as JSON text (an object schema).
struct ToolDeclaration {
  std::string name;
  std::string description;
  std::string parameters = R"({"type":"object","properties":{}})";
};

struct ChatRequest {
  std::string model;
  std::string system_prompt;
  std::vector<ToolDeclaration> tools;
  std::vector<Message> history;
  std::string options = "{}";  // Per-format options as a JSON object (see above).
  bool stream = true;
};

// Returns the JSON body for `request` in `kind`'s wire format. Fails with kInvalidArgument naming the
// offending option, tool or history index when the input cannot be expressed.
Result<std::string> BuildRequestBody(ProviderKind kind, const ChatRequest& request);

// Returns the URL path (after the base URL) of the request: e.g. "/chat/completions", "/messages",
// "/models/gemini-2.5-flash:streamGenerateContent?alt=sse".
std::string RequestPath(ProviderKind kind, std::string_view model, bool stream);

// Reads one response. Feed it each SSE event in order (OnEvent) and then Finish(), or a whole non-streamed
// body (OnResponse). Parts are appended to `out` in the order the provider produced them.
class StreamDecoder {
 public:
  virtual ~StreamDecoder() = default;

  // One Server-Sent Event. `event` is the SSE event type ("message" when the stream names none).
  virtual Status OnEvent(std::string_view event, std::string_view data, std::vector<StreamedPart>* out) = 0;
  // A whole non-streamed JSON response.
  virtual Status OnResponse(std::string_view body, std::vector<StreamedPart>* out) = 0;
  // The stream ended: fails with an invalid_response error if it ended before the provider marked the
  // response complete (a truncated stream).
  virtual Status Finish() = 0;

  // The provider's response id ("" until seen) and usage (nullopt until reported).
  const std::string& id() const { return id_; }
  const std::optional<TokenUsage>& usage() const { return usage_; }
  // Whether the provider has marked the response complete.
  bool complete() const { return complete_; }
  // Why it ended, in the provider's words: finish_reason, stop_reason, finishReason, a Responses API
  // response's incomplete_details.reason, or "prompt blocked: <blockReason>" (Gemini). "" when not said.
  const std::string& stop_reason() const { return stop_reason_; }

 protected:
  std::string id_;
  std::optional<TokenUsage> usage_;
  bool complete_ = false;
  std::string stop_reason_;
};

// What a stop reason means for the reply it ended.
enum class StopKind {
  kEnd,       // The model finished ("stop", "end_turn", "tool_calls", "STOP", "completed"...), or no reason.
  kLength,    // Cut at the output token limit: "length", "max_tokens", "MAX_TOKENS", "max_output_tokens".
  kFiltered,  // Blocked or cut by the provider: "content_filter", "SAFETY", "RECITATION", "refusal",
              // "prompt blocked: ..." and Gemini's other block reasons.
  kOther,     // Anything else the provider says ("MALFORMED_FUNCTION_CALL", "OTHER", an unknown word).
};
StopKind StopKindOf(std::string_view stop_reason);

// The error for a reply with nothing in it (`empty` says what the merge found: no parts, only thinking),
// naming the provider's stop reason: content_filter when the provider refused the prompt (not retryable:
// the same request is refused again), else empty_response (retryable; a reply filtered on its way out
// depends on what was sampled).
Status NoReplyError(std::string_view empty, std::string_view stop_reason);

// A whole response, decoded and merged.
struct DecodedResponse {
  std::string id;
  Message message;
  std::optional<TokenUsage> usage;
  std::string stop_reason;  // StreamDecoder::stop_reason.
};

// Decodes a recorded streamed response (the raw text/event-stream bytes) or a non-streamed JSON body, and
// merges the parts (stream_merge.h). Fails like a live request would: the provider's error event, a
// truncated stream (invalid_response) or a reply with no text and no tool call (empty_response).
Result<DecodedResponse> DecodeSseText(ProviderKind kind, std::string_view options, std::string_view sse_text);
Result<DecodedResponse> DecodeResponseBody(ProviderKind kind, std::string_view options, std::string_view body);

// Reads the "messages" (and "system") of an Anthropic Messages request, as a client sends them to an
// Anthropic-compatible server, into Messages: text, images, thinking (with its signature), redacted
// thinking, tool_use blocks (tool calls) and tool_result blocks (each a tool message, before the rest of
// its user turn). `system` (a string or text blocks, or null) is returned in *system_prompt. Fails with
// kInvalidArgument naming the message and block that cannot be read.
Result<std::vector<Message>> ParseAnthropicRequestMessages(std::string_view messages_json,
                                                           std::string_view system_json, std::string* system_prompt);

// Returns a decoder for `kind`. `options` as for BuildRequestBody (some affect decoding, e.g. which field
// carries reasoning text).
Result<std::unique_ptr<StreamDecoder>> NewStreamDecoder(ProviderKind kind, std::string_view options = "{}");

}  // namespace strata::llm
