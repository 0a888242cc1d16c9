// OpenAI chat completions (and compatibles) and Kimi/Moonshot.
//
// Request: the system prompt is a leading {role:system} message; a content list of exactly one text part is
// sent as a string; media parts carry `id: null` when they have none (kosong dumps nested nulls). Thinking
// goes to the `reasoning_key` field of the message (Kimi: "reasoning_content" by default): the think parts
// joined, sent whenever the message holds a think part, even an empty one (kosong 0.54 round-trips an empty
// reasoning; a backend in thinking mode rejects a history whose assistant turn lost the field). Tool calls
// go as `tool_calls`; tool results as {role:tool, tool_call_id}, or with `tool_message_conversion:
// "extract_text"` as one string of the text parts joined by "\n". Kimi omits `content` on an assistant
// turn with tool calls whose visible content is only white-space text (Moonshot rejects an empty text
// part), always sends `tools`, sends "$name" tools as builtin functions and fills missing schema `type`s;
// OpenAI keeps `content: []` and omits an empty `tools` (the API rejects it). With a reasoning_key and no
// explicit effort, a history that contains thinking sets `reasoning_effort: "medium"`. A streamed request
// asks for usage (`stream_options.include_usage`) unless `stream_usage` is false.
//
// Response: reasoning is read from the `reasoning_key` field, then from `reasoning` (a string) and
// `reasoning_details` (blocks with `text` or `summary`), which other backends use; the first non-empty one
// wins. A field that is present but empty still yields an empty think part (streamed deltas and the
// non-streamed message alike), so the empty reasoning round-trips into the next request as kosong's does.
// Non-empty `content` is text parts, tool-call deltas carry their `index` so interleaved parallel calls never cross-wire. Usage: OpenAI
// reads the top-level chunk `usage` (cached input from prompt_tokens_details.cached_tokens); Kimi also reads
// `choices[0].usage` and prefers its top-level `cached_tokens`.
#include <algorithm>

#include "json_dom.h"
#include "wire_internal.h"
#include "strata/llm/chat_error.h"

namespace strata::llm::internal {
namespace {

constexpr std::string_view kKnownOptions[] = {
    "reasoning_key",     "reasoning_effort", "stream_usage",        "tool_message_conversion",
    "temperature",       "top_p",            "max_tokens",          "max_completion_tokens",
    "seed",              "stop",             "presence_penalty",    "frequency_penalty",
    "n",                 "prompt_cache_key", "tool_choice",         "parallel_tool_calls",
    "response_format"};
constexpr const char* kSamplingKeys[] = {
    "temperature", "top_p", "max_tokens", "max_completion_tokens", "seed", "stop", "presence_penalty",
    "frequency_penalty", "n", "prompt_cache_key", "tool_choice", "parallel_tool_calls", "response_format"};

// Reads one UTF-8 code point at text[*i] and advances *i; false (and no advance guarantee) on a malformed
// sequence.
bool NextCodePoint(std::string_view text, size_t* i, char32_t* out) {
  auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  unsigned char lead = byte(*i);
  size_t len = lead < 0x80 ? 1 : (lead >> 5) == 0x6 ? 2 : (lead >> 4) == 0xE ? 3 : (lead >> 3) == 0x1E ? 4 : 0;
  if (len == 0 || *i + len > text.size()) return false;
  char32_t cp = len == 1 ? lead : len == 2 ? (lead & 0x1F) : len == 3 ? (lead & 0x0F) : (lead & 0x07);
  for (size_t k = 1; k < len; ++k) {
    if ((byte(*i + k) & 0xC0) != 0x80) return false;
    cp = (cp << 6) | (byte(*i + k) & 0x3F);
  }
  *i += len;
  *out = cp;
  return true;
}

// Whether Python's str.strip() would remove the whole text (str.isspace for every code point): kosong decides
// "effectively empty" with it.
bool IsBlank(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    char32_t c = 0;
    if (!NextCodePoint(text, &i, &c)) return false;
    bool space = (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
                 c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
                 c == 0x205F || c == 0x3000;
    if (!space) return false;
  }
  return true;
}

// The JSON type of an enum/const value, as a JSON Schema type name.
std::string_view ValueType(const Json& v) {
  if (v.is_string()) return "string";
  if (v.is_boolean()) return "boolean";
  if (v.is_number_integer() || v.is_number_unsigned()) return "integer";
  if (v.is_number_float()) return "number";
  if (v.is_array()) return "array";
  if (v.is_object()) return "object";
  return "null";
}

// Fills a missing `type` (Kimi requires one on every property schema): from enum/const values, else from
// structural keywords, else "string". Combinator and $ref nodes are left alone, their children are not.
void FillSchemaTypes(Json& node, bool is_root) {
  if (!node.is_object()) return;
  bool combinator = node.contains("anyOf") || node.contains("oneOf") || node.contains("allOf");
  if (!is_root && !node.contains("type") && !combinator && !node.contains("$ref")) {
    std::string type;
    std::vector<const Json*> values;
    if (auto it = node.find("enum"); it != node.end() && it->is_array()) {
      for (const Json& v : *it) values.push_back(&v);
    } else if (auto c = node.find("const"); c != node.end()) {
      values.push_back(&*c);
    }
    if (!values.empty()) {
      std::string_view first = ValueType(*values.front());
      bool same = true, numeric = true;
      for (const Json* v : values) {
        std::string_view t = ValueType(*v);
        same = same && t == first;
        numeric = numeric && (t == "integer" || t == "number");
      }
      if (same) type = first;
      else if (numeric) type = "number";
    }
    if (type.empty()) {
      if (node.contains("properties") || node.contains("additionalProperties") || node.contains("required")) {
        type = "object";
      } else if (node.contains("items") || node.contains("minItems") || node.contains("maxItems")) {
        type = "array";
      } else if (node.contains("minimum") || node.contains("maximum") || node.contains("exclusiveMinimum") ||
                 node.contains("exclusiveMaximum") || node.contains("multipleOf")) {
        type = "number";
      } else if (values.empty()) {
        type = "string";
      }
    }
    if (!type.empty()) node["type"] = type;
  }
  if (auto it = node.find("properties"); it != node.end() && it->is_object()) {
    for (auto& [name, child] : it->items()) FillSchemaTypes(child, false);
  }
  for (const char* key : {"items", "additionalProperties", "not"}) {
    if (auto it = node.find(key); it != node.end() && it->is_object()) FillSchemaTypes(*it, false);
  }
  if (auto it = node.find("items"); it != node.end() && it->is_array()) {
    for (Json& child : *it) FillSchemaTypes(child, false);
  }
  for (const char* key : {"anyOf", "oneOf", "allOf"}) {
    if (auto it = node.find(key); it != node.end() && it->is_array()) {
      for (Json& child : *it) FillSchemaTypes(child, false);
    }
  }
  for (const char* key : {"$defs", "definitions"}) {
    if (auto it = node.find(key); it != node.end() && it->is_object()) {
      for (auto& [name, child] : it->items()) FillSchemaTypes(child, false);
    }
  }
}

// One non-think content part in the chat-completions format; false to skip the part.
bool PartJson(const ContentPart& part, Json* out) {
  if (const auto* text = std::get_if<TextPart>(&part)) {
    *out = Json{{"type", "text"}, {"text", text->text}};
    return true;
  }
  if (const auto* media = std::get_if<MediaPart>(&part)) {
    std::string media_type, data;
    if (media->kind == MediaKind::kAudio && SplitDataUrl(media->url, &media_type, &data)) {
      std::string format = media_type.substr(media_type.find('/') + 1);
      if (format == "mpeg") format = "mp3";
      *out = Json{{"type", "input_audio"}, {"input_audio", {{"data", data}, {"format", format}}}};
      return true;
    }
    const char* key = media->kind == MediaKind::kImage ? "image_url"
                      : media->kind == MediaKind::kAudio ? "audio_url" : "video_url";
    // kosong dumps the part with its nested nulls: a missing file id is sent as `"id": null`.
    Json url{{"url", media->url}, {"id", media->id ? Json(*media->id) : Json(nullptr)}};
    if (media->detail) url["detail"] = *media->detail;
    *out = Json{{"type", key}, {key, std::move(url)}};
    return true;
  }
  if (const auto* custom = std::get_if<CustomPart>(&part)) {
    // Anthropic-only parts: meaningless here.
    if (custom->type == "redacted_thinking" || custom->type == "document") return false;
    *out = Json::parse(custom->json);
    return true;
  }
  return false;
}

// The content value: a string for exactly one text part, else a list of parts.
Json ContentJson(const std::vector<const ContentPart*>& parts) {
  if (parts.size() == 1) {
    if (const std::string* text = TextOf(*parts[0])) return *text;
  }
  Json list = Json::array();
  for (const ContentPart* part : parts) {
    Json j;
    if (PartJson(*part, &j)) list.push_back(std::move(j));
  }
  return list;
}

// How a message is sent (the request-wide choices).
struct MessageOptions {
  bool kimi = false;
  std::optional<std::string> reasoning_key;
  bool tool_text_only = false;  // tool_message_conversion: "extract_text".
};

Result<Json> MessageJson(const Message& m, const MessageOptions& options) {
  Json out = Json::object();
  out["role"] = std::string(RoleName(m.role));
  if (m.name) out["name"] = *m.name;
  std::vector<const ContentPart*> visible;
  std::string reasoning;
  bool has_think = false;
  for (const ContentPart& part : m.content) {
    if (const auto* think = std::get_if<ThinkPart>(&part)) {
      has_think = true;
      reasoning += think->think;
    } else if (const auto* custom = std::get_if<CustomPart>(&part); custom && custom->type == "redacted_thinking") {
      continue;  // Anthropic-only; meaningless here.
    } else {
      visible.push_back(&part);
    }
  }
  bool has_calls = m.tool_calls && !m.tool_calls->empty();
  // Kimi's compat layer rejects an empty text part beside tool calls; dropping `content` is always accepted.
  bool blank_beside_calls = m.role == Role::kAssistant && has_calls &&
                            std::all_of(visible.begin(), visible.end(), [](const ContentPart* part) {
                              const std::string* text = TextOf(*part);
                              return text != nullptr && IsBlank(*text);
                            });
  if (m.role == Role::kTool && options.tool_text_only) {
    out["content"] = m.ExtractText("\n");
  } else if (!(options.kimi && blank_beside_calls)) {
    out["content"] = ContentJson(visible);
  }
  if (has_calls) {
    Json calls = Json::array();
    for (const ToolCall& call : *m.tool_calls) {
      calls.push_back({{"type", "function"},
                       {"id", call.id},
                       {"function", {{"name", call.function.name},
                                     {"arguments", call.function.arguments.value_or("{}")}}}});
    }
    out["tool_calls"] = std::move(calls);
  }
  if (m.tool_call_id) out["tool_call_id"] = *m.tool_call_id;
  // Kimi's partial mode (prefill): the model continues an assistant message marked partial. kosong sends
  // every field of a message that is set, this one too, true or false.
  if (options.kimi && m.partial) out["partial"] = *m.partial;
  // Present whenever a think part is, even an empty one, whatever the role (as kosong).
  if (has_think && options.reasoning_key) out[*options.reasoning_key] = reasoning;
  return out;
}

bool HistoryHasThinking(const std::vector<Message>& history) {
  for (const Message& m : history) {
    for (const ContentPart& p : m.content) {
      if (std::holds_alternative<ThinkPart>(p)) return true;
    }
  }
  return false;
}

TokenUsage UsageFrom(simdjson::dom::element usage, bool kimi) {
  int64_t prompt = GetCount(usage, "prompt_tokens");
  int64_t cached = 0;
  simdjson::dom::element details;
  if (kimi && Has(usage, "cached_tokens")) {
    cached = GetCount(usage, "cached_tokens");
  } else if (Get(usage, "prompt_tokens_details", &details)) {
    cached = GetCount(details, "cached_tokens");
  }
  return TokenUsage{.input_other = Uncached(prompt, cached), .output = GetCount(usage, "completion_tokens"),
                    .input_cache_read = std::min(cached, prompt)};
}

// The reasoning text of a message or delta (see the top of the file), nullopt when no field carries any.
std::optional<std::string> ReasoningText(simdjson::dom::element e, const std::string& reasoning_key) {
  std::optional<std::string> empty;
  std::vector<std::string_view> keys = {reasoning_key};
  for (std::string_view fallback : {"reasoning", "reasoning_details"}) {
    if (fallback != reasoning_key) keys.push_back(fallback);
  }
  for (std::string_view key : keys) {
    simdjson::dom::element value;
    if (!Get(e, key, &value)) continue;
    std::optional<std::string> text;
    if (value.is_string()) {
      text = std::string(value.get_string().value_unsafe());
    } else if (value.is_array()) {
      std::string joined;
      bool any = false;
      for (simdjson::dom::element block : json::AsArray(value)) {
        // Never `data`: encrypted blocks carry a signature, not text.
        simdjson::dom::element t;
        if ((Get(block, "text", &t) && t.is_string()) || (Get(block, "summary", &t) && t.is_string())) {
          joined += t.get_string().value_unsafe();
          any = true;
        }
      }
      if (any) text = std::move(joined);
    }
    if (!text) continue;
    if (!text->empty()) return text;
    if (!empty) empty = std::move(text);
  }
  return empty;
}

class OpenAIChatDecoder final : public StreamDecoder {
 public:
  OpenAIChatDecoder(bool kimi, std::optional<std::string> reasoning_key)
      : kimi_(kimi), reasoning_key_(std::move(reasoning_key)) {}

  Status OnEvent(std::string_view, std::string_view data, std::vector<StreamedPart>* out) override {
    std::string_view trimmed = data;
    while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\n')) trimmed.remove_suffix(1);
    if (trimmed == "[DONE]") {
      complete_ = true;
      return Status::Ok();
    }
    STRATA_ASSIGN_OR_RETURN(simdjson::dom::element chunk, ParsePayload(parser_, data, Format()));
    STRATA_RETURN_IF_ERROR(CheckError(chunk));
    std::string_view id = GetString(chunk, "id");
    if (!id.empty()) id_ = std::string(id);
    simdjson::dom::element usage;
    // A usage whose prompt count is not a count is no usage (it would mark the context as nearly free).
    if (Get(chunk, "usage", &usage) && usage.is_object() && IsCount(usage, "prompt_tokens")) usage_ = UsageFrom(usage, kimi_);
    simdjson::dom::element choices, choice;
    if (!Get(chunk, "choices", &choices) || !choices.is_array()) return Status::Ok();
    if (choices.at(0).get(choice) != simdjson::SUCCESS) return Status::Ok();
    if (kimi_ && Get(choice, "usage", &usage) && usage.is_object() && IsCount(usage, "prompt_tokens")) {
      usage_ = UsageFrom(usage, kimi_);
    }
    simdjson::dom::element delta;
    if (Get(choice, "delta", &delta) && delta.is_object()) {
      if (reasoning_key_ && !reasoning_key_->empty()) {
        if (auto reasoning = ReasoningText(delta, *reasoning_key_)) out->push_back(ContentPart(ThinkPart{*reasoning, std::nullopt}));
      }
      std::string_view content = GetString(delta, "content");
      if (!content.empty()) out->push_back(ContentPart(TextPart{std::string(content)}));
      simdjson::dom::element calls;
      if (Get(delta, "tool_calls", &calls) && calls.is_array()) {
        for (simdjson::dom::element call : json::AsArray(calls)) AppendCallDelta(call, out);
      }
    }
    if (Has(choice, "finish_reason")) {
      complete_ = true;
      stop_reason_ = std::string(GetString(choice, "finish_reason"));
    }
    return Status::Ok();
  }

  Status OnResponse(std::string_view body, std::vector<StreamedPart>* out) override {
    STRATA_ASSIGN_OR_RETURN(simdjson::dom::element response, ParsePayload(parser_, body, Format()));
    STRATA_RETURN_IF_ERROR(CheckError(response));
    id_ = std::string(GetString(response, "id"));
    simdjson::dom::element usage, choices, choice, message;
    if (Get(response, "usage", &usage) && usage.is_object() && IsCount(usage, "prompt_tokens")) usage_ = UsageFrom(usage, kimi_);
    if (!Get(response, "choices", &choices) || !choices.is_array() || choices.at(0).get(choice) ||
        !Get(choice, "message", &message) || !message.is_object()) {
      return InvalidResponseError(std::string(Format()) + ": response has no choices[0].message");
    }
    stop_reason_ = std::string(GetString(choice, "finish_reason"));
    if (reasoning_key_ && !reasoning_key_->empty()) {
      if (auto reasoning = ReasoningText(message, *reasoning_key_)) out->push_back(ContentPart(ThinkPart{*reasoning, std::nullopt}));
    }
    std::string_view content = GetString(message, "content");
    if (!content.empty()) out->push_back(ContentPart(TextPart{std::string(content)}));
    simdjson::dom::element calls;
    if (Get(message, "tool_calls", &calls) && calls.is_array()) {
      for (simdjson::dom::element call : json::AsArray(calls)) {
        simdjson::dom::element function;
        if (GetString(call, "type", "function") != "function" || !Get(call, "function", &function)) continue;
        std::string_view call_id = GetString(call, "id");
        out->push_back(ToolCall{.id = call_id.empty() ? NewCallId("call_") : std::string(call_id),
                                .function = {std::string(GetString(function, "name")),
                                             std::string(GetString(function, "arguments"))}});
      }
    }
    complete_ = true;
    return Status::Ok();
  }

  Status Finish() override {
    if (complete_) return Status::Ok();
    return InvalidResponseError(std::string(Format()) +
                                ": stream ended before a finish_reason or [DONE] (truncated response)");
  }

 private:
  static simdjson::dom::array json_array(simdjson::dom::element e) {
    simdjson::dom::array a = json::AsArray(e);
    return a;
  }

  std::string_view Format() const { return kimi_ ? "kimi" : "openai"; }

  // A mid-stream or body-level {"error": {...}} object.
  Status CheckError(simdjson::dom::element e) const {
    simdjson::dom::element error;
    if (!Get(e, "error", &error) || error.is_null()) return Status::Ok();
    int64_t code = GetInt(error, "code", 0);
    if (code < 400 || code > 599) code = GetInt(error, "status", 500);
    if (code < 400 || code > 599) code = 500;
    return EmbeddedError(Format(), "error in a response the server answered with 200", static_cast<int>(code),
                         ToJsonText(e));
  }

  void AppendCallDelta(simdjson::dom::element call, std::vector<StreamedPart>* out) {
    std::optional<int> index;
    simdjson::dom::element function, index_value;
    if (Get(call, "index", &index_value) && index_value.is_int64()) {
      index = static_cast<int>(int64_t(index_value));
    }
    if (!Get(call, "function", &function)) return;
    std::string_view name = GetString(function, "name");
    simdjson::dom::element arguments;
    bool has_arguments = Get(function, "arguments", &arguments) && arguments.is_string();
    if (!name.empty()) {
      std::string_view call_id = GetString(call, "id");
      ToolCall tc{.id = call_id.empty() ? NewCallId("call_") : std::string(call_id),
                  .function = {std::string(name), std::nullopt}, .index = index};
      if (has_arguments) tc.function.arguments = std::string(std::string_view(arguments));
      out->push_back(std::move(tc));
    } else if (has_arguments && !std::string_view(arguments).empty()) {
      out->push_back(ToolCallPart{std::string(std::string_view(arguments)), index});
    }
  }

  bool kimi_;
  std::optional<std::string> reasoning_key_;
  simdjson::dom::parser parser_;
};

}  // namespace

Result<std::string> BuildOpenAIChatBody(bool kimi, const ChatRequest& request) {
  std::string_view format = kimi ? "kimi" : "openai";
  STRATA_ASSIGN_OR_RETURN(Json options, ParseOptions(request.options, format, kKnownOptions));
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> reasoning_key, OptionalString(options, "reasoning_key"));
  if (kimi && !options.contains("reasoning_key")) reasoning_key = "reasoning_content";
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> effort, OptionalString(options, "reasoning_effort"));
  STRATA_ASSIGN_OR_RETURN(std::optional<bool> stream_usage, OptionalBool(options, "stream_usage"));
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> conversion, OptionalString(options, "tool_message_conversion"));
  if (conversion && *conversion != "extract_text" && *conversion != "blocks") {
    return Status::InvalidArgument("options.tool_message_conversion: expected \"extract_text\" or \"blocks\", got \"" +
                                   *conversion + "\"");
  }
  MessageOptions message_options{
      .kimi = kimi, .reasoning_key = reasoning_key, .tool_text_only = conversion == "extract_text"};

  Json body = Json::object();
  body["model"] = request.model;
  Json messages = Json::array();
  if (!request.system_prompt.empty()) messages.push_back({{"role", "system"}, {"content", request.system_prompt}});
  for (size_t i = 0; i < request.history.size(); ++i) {
    auto m = MessageJson(request.history[i], message_options);
    if (!m.ok()) return m.status().WithContext("history[" + std::to_string(i) + "]");
    messages.push_back(std::move(*m));
  }
  body["messages"] = std::move(messages);

  Json tools = Json::array();
  for (const ToolDeclaration& tool : request.tools) {
    if (kimi && tool.name.starts_with("$")) {
      tools.push_back({{"type", "builtin_function"}, {"function", {{"name", tool.name}}}});
      continue;
    }
    STRATA_ASSIGN_OR_RETURN(Json parameters, ParseToolParameters(tool));
    if (kimi) FillSchemaTypes(parameters, true);
    tools.push_back({{"type", "function"},
                     {"function", {{"name", tool.name}, {"description", tool.description},
                                   {"parameters", std::move(parameters)}}}});
  }
  if (kimi || !tools.empty()) body["tools"] = std::move(tools);
  if (request.stream) {
    body["stream"] = true;
    if (stream_usage.value_or(true)) body["stream_options"] = {{"include_usage", true}};
  }
  if (effort) {
    body["reasoning_effort"] = *effort;
  } else if (!kimi && reasoning_key && HistoryHasThinking(request.history)) {
    body["reasoning_effort"] = "medium";
  }
  CopyKeys(options, kSamplingKeys, &body);
  STRATA_RETURN_IF_ERROR(MergeExtraBody(options, &body));
  return DumpBody(body);
}

Result<std::unique_ptr<StreamDecoder>> NewOpenAIChatDecoder(bool kimi, std::string_view options_text) {
  STRATA_ASSIGN_OR_RETURN(Json options, ParseOptions(options_text, kimi ? "kimi" : "openai", kKnownOptions));
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> reasoning_key, OptionalString(options, "reasoning_key"));
  if (kimi && !options.contains("reasoning_key")) reasoning_key = "reasoning_content";
  return std::unique_ptr<StreamDecoder>(new OpenAIChatDecoder(kimi, std::move(reasoning_key)));
}

}  // namespace strata::llm::internal
