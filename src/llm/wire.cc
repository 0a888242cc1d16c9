#include "strata/llm/wire.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iterator>
#include <optional>
#include <random>

#include "wire_internal.h"
#include "strata/json/checked.h"
#include "strata/json/json_writer.h"
#include "strata/llm/chat_error.h"
#include "strata/llm/sse.h"
#include "strata/message/stream_merge.h"

namespace strata::llm {

Result<ProviderKind> ParseProviderKind(std::string_view name) {
  if (name == "openai" || name == "openai_legacy" || name == "openai-chat" || name == "deepseek" ||
      name == "ollama" || name == "vllm" || name == "llamacpp" || name == "llama.cpp") {
    return ProviderKind::kOpenAIChat;
  }
  if (name == "kimi" || name == "moonshot") return ProviderKind::kKimi;
  if (name == "openai-responses" || name == "openai_responses") return ProviderKind::kOpenAIResponses;
  if (name == "anthropic") return ProviderKind::kAnthropic;
  if (name == "gemini" || name == "google_genai") return ProviderKind::kGemini;
  return Status::InvalidArgument("unknown provider \"" + std::string(name) +
                                 "\"; expected one of kimi, openai, openai-responses, anthropic, gemini "
                                 "(or deepseek, ollama, vllm, llamacpp)");
}

std::string_view ProviderKindName(ProviderKind kind) {
  switch (kind) {
    case ProviderKind::kOpenAIChat: return "openai";
    case ProviderKind::kKimi: return "kimi";
    case ProviderKind::kOpenAIResponses: return "openai-responses";
    case ProviderKind::kAnthropic: return "anthropic";
    case ProviderKind::kGemini: return "gemini";
  }
  return "unknown";
}

Result<std::string> BuildRequestBody(ProviderKind kind, const ChatRequest& request) {
  switch (kind) {
    case ProviderKind::kOpenAIChat: return internal::BuildOpenAIChatBody(false, request);
    case ProviderKind::kKimi: return internal::BuildOpenAIChatBody(true, request);
    case ProviderKind::kOpenAIResponses: return internal::BuildResponsesBody(request);
    case ProviderKind::kAnthropic: return internal::BuildAnthropicBody(request);
    case ProviderKind::kGemini: return internal::BuildGeminiBody(request);
  }
  return Status::Internal("unhandled provider kind");
}

std::string RequestPath(ProviderKind kind, std::string_view model, bool stream) {
  switch (kind) {
    case ProviderKind::kOpenAIChat:
    case ProviderKind::kKimi: return "/chat/completions";
    case ProviderKind::kOpenAIResponses: return "/responses";
    case ProviderKind::kAnthropic: return "/messages";
    case ProviderKind::kGemini:
      return "/models/" + std::string(model) + (stream ? ":streamGenerateContent?alt=sse" : ":generateContent");
  }
  return "/";
}

Result<std::unique_ptr<StreamDecoder>> NewStreamDecoder(ProviderKind kind, std::string_view options) {
  switch (kind) {
    case ProviderKind::kOpenAIChat: return internal::NewOpenAIChatDecoder(false, options);
    case ProviderKind::kKimi: return internal::NewOpenAIChatDecoder(true, options);
    case ProviderKind::kOpenAIResponses: return internal::NewResponsesDecoder(options);
    case ProviderKind::kAnthropic: return internal::NewAnthropicDecoder(options);
    case ProviderKind::kGemini: return internal::NewGeminiDecoder(options);
  }
  return Status::Internal("unhandled provider kind");
}

StopKind StopKindOf(std::string_view stop_reason) {
  // The word before any detail ("MALFORMED_FUNCTION_CALL: <finishMessage>", "prompt blocked: SAFETY").
  std::string word(stop_reason.substr(0, stop_reason.find(':')));
  for (char& c : word) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  while (!word.empty() && word.back() == ' ') word.pop_back();
  static constexpr std::string_view kEnd[] = {"",         "stop",          "end_turn",  "tool_calls", "tool_use",
                                              "function_call", "stop_sequence", "completed", "pause_turn"};
  static constexpr std::string_view kLength[] = {"length", "max_tokens", "max_output_tokens",
                                                 "model_context_window_exceeded"};
  static constexpr std::string_view kFiltered[] = {"content_filter", "safety",      "recitation",
                                                   "blocklist",      "prohibited_content", "spii",
                                                   "image_safety",   "refusal",     "prompt blocked"};
  auto in = [&](auto& list) { return std::find(std::begin(list), std::end(list), word) != std::end(list); };
  if (in(kEnd)) return StopKind::kEnd;
  if (in(kLength)) return StopKind::kLength;
  if (in(kFiltered)) return StopKind::kFiltered;
  return StopKind::kOther;
}

Status NoReplyError(std::string_view empty, std::string_view stop_reason) {
  if (stop_reason.empty()) return EmptyResponseError(std::string(empty));
  if (stop_reason.starts_with("prompt blocked")) {
    return ContentFilterError("the provider refused the request (" + std::string(stop_reason) +
                              "): the same request would be refused again");
  }
  if (StopKindOf(stop_reason) == StopKind::kFiltered) {
    // A reply filtered on its way out depends on what was sampled: another attempt may pass (a summary that
    // recited a quote once must not send a commit's job to the dead letters at once).
    return EmptyResponseError("the provider blocked the reply (" + std::string(stop_reason) +
                              "): nothing of it came back; another attempt may pass");
  }
  return EmptyResponseError(std::string(empty) + " (the provider's stop reason: " + std::string(stop_reason) + ")");
}

namespace {

Result<DecodedResponse> MergeDecoded(const StreamDecoder& decoder, const std::vector<StreamedPart>& parts) {
  auto message = MergeStream(parts);
  if (!message.ok()) return NoReplyError(message.status().message(), decoder.stop_reason());
  return DecodedResponse{decoder.id(), std::move(*message), decoder.usage(), decoder.stop_reason()};
}

}  // namespace

Result<DecodedResponse> DecodeSseText(ProviderKind kind, std::string_view options, std::string_view sse_text) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<StreamDecoder> decoder, NewStreamDecoder(kind, options));
  std::vector<StreamedPart> parts;
  Status status;
  SseParser parser;
  auto on_event = [&](const SseEvent& event) {
    if (status.ok()) status = decoder->OnEvent(event.type, event.data, &parts);
  };
  parser.Feed(sse_text, on_event);
  parser.Finish(on_event, /*dispatch_incomplete=*/true);
  STRATA_RETURN_IF_ERROR(status);
  STRATA_RETURN_IF_ERROR(decoder->Finish());
  return MergeDecoded(*decoder, parts);
}

Result<DecodedResponse> DecodeResponseBody(ProviderKind kind, std::string_view options, std::string_view body) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<StreamDecoder> decoder, NewStreamDecoder(kind, options));
  std::vector<StreamedPart> parts;
  STRATA_RETURN_IF_ERROR(decoder->OnResponse(body, &parts));
  return MergeDecoded(*decoder, parts);
}

namespace internal {

Result<Json> ParseOptions(std::string_view options, std::string_view format,
                          std::span<const std::string_view> known) {
  Json parsed = strata::json::ParseOrDiscard<Json>(options.empty() ? std::string_view("{}") : options);
  if (parsed.is_discarded()) return Status::InvalidArgument("options: not valid JSON");
  if (parsed.is_null()) return Json::object();
  if (!parsed.is_object()) return Status::InvalidArgument("options: expected a JSON object");
  for (const auto& [key, value] : parsed.items()) {
    bool ok = key == "extra_body";
    for (std::string_view k : known) ok = ok || key == k;
    if (!ok) {
      std::string list;
      for (std::string_view k : known) list += std::string(k) + ", ";
      list += "extra_body";
      return Status::InvalidArgument("options." + key + ": unknown option for " + std::string(format) +
                                     " (known: " + list + ")");
    }
  }
  const Json* extra = parsed.contains("extra_body") ? &parsed["extra_body"] : nullptr;
  if (extra != nullptr && !extra->is_object() && !extra->is_null()) {
    return Status::InvalidArgument("options.extra_body: expected an object");
  }
  return parsed;
}

Result<std::optional<std::string>> OptionalString(const Json& options, const char* key) {
  auto it = options.find(key);
  if (it == options.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) return Status::InvalidArgument(std::string("options.") + key + ": expected a string");
  return std::optional<std::string>(it->get<std::string>());
}

Result<std::optional<int64_t>> OptionalInt(const Json& options, const char* key) {
  auto it = options.find(key);
  if (it == options.end() || it->is_null()) return std::optional<int64_t>();
  if (!it->is_number_integer()) {
    return Status::InvalidArgument(std::string("options.") + key + ": expected an integer");
  }
  return std::optional<int64_t>(it->get<int64_t>());
}

Result<std::optional<bool>> OptionalBool(const Json& options, const char* key) {
  auto it = options.find(key);
  if (it == options.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) return Status::InvalidArgument(std::string("options.") + key + ": expected true or false");
  return std::optional<bool>(it->get<bool>());
}

void CopyKeys(const Json& options, std::span<const char* const> keys, Json* body) {
  for (const char* key : keys) {
    auto it = options.find(key);
    if (it != options.end() && !it->is_null()) (*body)[key] = *it;
  }
}

Status MergeExtraBody(const Json& options, Json* body) {
  auto it = options.find("extra_body");
  if (it == options.end() || it->is_null()) return Status::Ok();
  for (const auto& [key, value] : it->items()) (*body)[key] = value;
  return Status::Ok();
}

std::string DumpBody(const Json& body) { return body.dump(-1, ' ', false, Json::error_handler_t::replace); }

Result<Json> ParseToolParameters(const ToolDeclaration& tool) {
  if (tool.name.empty()) return Status::InvalidArgument("tools: a tool has an empty name");
  Json schema = strata::json::ParseOrDiscard<Json>(tool.parameters.empty() ? std::string_view("{}")
                                                                          : std::string_view(tool.parameters));
  if (schema.is_discarded()) {
    return Status::InvalidArgument("tools[" + tool.name + "].parameters: not valid JSON");
  }
  if (!schema.is_object()) {
    return Status::InvalidArgument("tools[" + tool.name + "].parameters: expected a JSON Schema object");
  }
  return schema;
}

Json ArgumentsObject(const std::optional<std::string>& arguments) {
  if (!arguments.has_value() || arguments->empty()) return Json::object();
  Json parsed = strata::json::ParseOrDiscard<Json>(*arguments);
  if (parsed.is_discarded() || !parsed.is_object()) return Json::object();
  return parsed;
}

const std::string* TextOf(const ContentPart& part) {
  const auto* text = std::get_if<TextPart>(&part);
  return text == nullptr ? nullptr : &text->text;
}

std::string NewCallId(std::string_view prefix) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  static constexpr char kHex[] = "0123456789abcdef";
  std::string id(prefix);
  uint64_t bits = rng();
  for (int i = 0; i < 16; ++i) id += kHex[(bits >> (i * 4)) & 0xf];
  return id;
}

bool SplitDataUrl(std::string_view url, std::string* media_type, std::string* data) {
  if (url.substr(0, 5) != "data:") return false;
  size_t comma = url.find(',');
  if (comma == std::string_view::npos) return false;
  std::string_view header = url.substr(5, comma - 5);
  constexpr std::string_view kBase64 = ";base64";
  if (header.size() < kBase64.size() || header.substr(header.size() - kBase64.size()) != kBase64) return false;
  *media_type = std::string(header.substr(0, header.size() - kBase64.size()));
  *data = std::string(url.substr(comma + 1));
  return true;
}

std::string_view GetString(simdjson::dom::element e, std::string_view key, std::string_view fallback) {
  std::string_view out;
  if (e.is_object() && e[key].get(out) == simdjson::SUCCESS) return out;
  return fallback;
}

int64_t GetInt(simdjson::dom::element e, std::string_view key, int64_t fallback) {
  if (!e.is_object()) return fallback;
  simdjson::dom::element v;
  if (e[key].get(v) != simdjson::SUCCESS) return fallback;
  int64_t i;
  if (v.get(i) == simdjson::SUCCESS) return i;
  uint64_t u;
  if (v.get(u) == simdjson::SUCCESS) return static_cast<int64_t>(u);
  double d;
  if (v.get(d) == simdjson::SUCCESS) return static_cast<int64_t>(d);
  return fallback;
}

namespace {
std::optional<int64_t> CountAt(simdjson::dom::element e, std::string_view key) {
  if (!e.is_object()) return std::nullopt;
  simdjson::dom::element v;
  if (e[key].get(v) != simdjson::SUCCESS) return std::nullopt;
  constexpr int64_t kMost = int64_t{1} << 53;
  int64_t i;
  if (v.get(i) == simdjson::SUCCESS) return i >= 0 && i <= kMost ? std::optional(i) : std::nullopt;
  double d;
  if (v.get(d) == simdjson::SUCCESS && d >= 0 && d <= static_cast<double>(kMost) && d == std::floor(d)) {
    return static_cast<int64_t>(d);
  }
  return std::nullopt;
}
}  // namespace

int64_t GetCount(simdjson::dom::element e, std::string_view key) { return CountAt(e, key).value_or(0); }
bool IsCount(simdjson::dom::element e, std::string_view key) { return CountAt(e, key).has_value(); }

bool Has(simdjson::dom::element e, std::string_view key) {
  simdjson::dom::element v;
  return e.is_object() && e[key].get(v) == simdjson::SUCCESS && !v.is_null();
}

bool Get(simdjson::dom::element e, std::string_view key, simdjson::dom::element* out) {
  return e.is_object() && e[key].get(*out) == simdjson::SUCCESS;
}

Result<simdjson::dom::element> ParsePayload(simdjson::dom::parser& parser, std::string_view data,
                                            std::string_view format) {
  simdjson::dom::element root;
  simdjson::error_code error = parser.parse(data.data(), data.size(), true).get(root);
  if (error != simdjson::SUCCESS) {
    // Valid JSON that simdjson refuses: an integer past 64 bits (in tool arguments, or a field nobody reads;
    // NUMBER_ERROR in this simdjson, BIGINT_ERROR in later ones). It is read again with such numbers as
    // doubles (lossy, but the reply is kept; it was refused whole as "not valid JSON"), keys in their order.
    nlohmann::ordered_json j = json::ParseOrDiscard<nlohmann::ordered_json>(data);
    if (!j.is_discarded()) {
      const std::string again = j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
      error = parser.parse(again.data(), again.size(), true).get(root);  // The parser keeps its own copy.
    }
  }
  if (error != simdjson::SUCCESS) {
    return InvalidResponseError(std::string(format) + ": response is not valid JSON: " +
                                json::DescribeSyntaxError(data) + " (it begins " + json::QuoteForError(data.substr(0, 80), 80) + ")");
  }
  if (!root.is_object()) {
    return InvalidResponseError(std::string(format) + ": expected a JSON object, got: " +
                                json::QuoteForError(data.substr(0, 80), 80));
  }
  return root;
}

std::string ToJsonText(simdjson::dom::element e) { return simdjson::minify(e); }

}  // namespace internal
}  // namespace strata::llm
