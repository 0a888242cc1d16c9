// OpenAI Responses API.
//
// Request: the system prompt (and system messages) use role "developer" for OpenAI models and "system" for
// any other model served through the same API; "OpenAI model" means a name in the OpenAI SDK's model list
// (kosong's test), not a prefix, so "gpt-oss-120b" is another vendor's. Nothing else depends on the model:
// reasoning items are kept and sent back either way. A message's parts are sent in order: runs of
// non-thinking parts become one message item (user/system: input_text for non-empty text, input_image with
// detail "auto", audio as input_file; assistant: output_text with annotations:[] for non-empty text), and
// each run of think parts sharing one `encrypted` value becomes one reasoning item (one summary_text per
// part, even empty; `encrypted_content` null when unsigned). Tool calls are function_call items after the
// message (arguments "{}" when empty); tool results function_call_output items (empty text dropped, or one
// string with `tool_message_conversion: "extract_text"`). `tools` is always sent (flat, strict:false);
// store:false (the conversation lives in Strata); with a reasoning effort the encrypted reasoning is
// requested back (`include`).
//
// Response events: output_text deltas are text; a reasoning summary part opens a think part and its text
// deltas extend it; a finished reasoning item closes it with its encrypted_content (raw reasoning_text
// deltas are read too, where kosong drops them); function_call items open calls (index = output index) whose argument
// deltas follow; the id is the last output item's id (as kosong; the response id until an item names one);
// response.completed carries the usage; response.failed / error are errors. A non-streamed response gives
// one think part per reasoning summary, each carrying the item's encrypted_content.
#include "json_dom.h"
#include "strata/util/ascii.h"
#include "wire_internal.h"
#include "strata/llm/chat_error.h"

namespace strata::llm::internal {
namespace {

constexpr std::string_view kKnownOptions[] = {
    "reasoning_effort", "reasoning_summary", "tool_message_conversion", "temperature", "top_p",
    "max_output_tokens", "max_tool_calls", "top_logprobs", "user", "tool_choice", "parallel_tool_calls", "text",
    "truncation"};
constexpr const char* kSamplingKeys[] = {"temperature", "top_p", "max_output_tokens", "max_tool_calls",
                                         "top_logprobs", "user", "tool_choice", "parallel_tool_calls", "text",
                                         "truncation"};

// The OpenAI SDK's ResponsesModel names (ChatModel plus the Responses-only models), which kosong's
// is_openai_model() tests by exact membership.
constexpr std::string_view kOpenAIModels[] = {
    "gpt-5.2", "gpt-5.2-2025-12-11", "gpt-5.2-chat-latest", "gpt-5.2-pro", "gpt-5.2-pro-2025-12-11", "gpt-5.1",
    "gpt-5.1-2025-11-13", "gpt-5.1-codex", "gpt-5.1-mini", "gpt-5.1-chat-latest", "gpt-5", "gpt-5-mini",
    "gpt-5-nano", "gpt-5-2025-08-07", "gpt-5-mini-2025-08-07", "gpt-5-nano-2025-08-07", "gpt-5-chat-latest",
    "gpt-4.1", "gpt-4.1-mini", "gpt-4.1-nano", "gpt-4.1-2025-04-14", "gpt-4.1-mini-2025-04-14",
    "gpt-4.1-nano-2025-04-14", "o4-mini", "o4-mini-2025-04-16", "o3", "o3-2025-04-16", "o3-mini",
    "o3-mini-2025-01-31", "o1", "o1-2024-12-17", "o1-preview", "o1-preview-2024-09-12", "o1-mini",
    "o1-mini-2024-09-12", "gpt-4o", "gpt-4o-2024-11-20", "gpt-4o-2024-08-06", "gpt-4o-2024-05-13",
    "gpt-4o-audio-preview", "gpt-4o-audio-preview-2024-10-01", "gpt-4o-audio-preview-2024-12-17",
    "gpt-4o-audio-preview-2025-06-03", "gpt-4o-mini-audio-preview", "gpt-4o-mini-audio-preview-2024-12-17",
    "gpt-4o-search-preview", "gpt-4o-mini-search-preview", "gpt-4o-search-preview-2025-03-11",
    "gpt-4o-mini-search-preview-2025-03-11", "chatgpt-4o-latest", "codex-mini-latest", "gpt-4o-mini",
    "gpt-4o-mini-2024-07-18", "gpt-4-turbo", "gpt-4-turbo-2024-04-09", "gpt-4-0125-preview",
    "gpt-4-turbo-preview", "gpt-4-1106-preview", "gpt-4-vision-preview", "gpt-4", "gpt-4-0314", "gpt-4-0613",
    "gpt-4-32k", "gpt-4-32k-0314", "gpt-4-32k-0613", "gpt-audio-mini", "gpt-3.5-turbo", "gpt-3.5-turbo-16k",
    "gpt-3.5-turbo-0301", "gpt-3.5-turbo-0613", "gpt-3.5-turbo-1106", "gpt-3.5-turbo-0125",
    "gpt-3.5-turbo-16k-0613",
    // Responses-only.
    "o1-pro", "o1-pro-2025-03-19", "o3-pro", "o3-pro-2025-06-10", "o3-deep-research",
    "o3-deep-research-2025-06-26", "o4-mini-deep-research", "o4-mini-deep-research-2025-06-26",
    "computer-use-preview", "computer-use-preview-2025-03-11", "gpt-5-codex", "gpt-5-pro", "gpt-5-pro-2025-10-06",
    "gpt-5.1-codex-max", "gpt-5.5-pro", "gpt-5.5-pro-2026-04-23"};

bool IsOpenAIModel(std::string_view model) {
  for (std::string_view name : kOpenAIModels) {
    if (model == name) return true;
  }
  return false;
}

// An audio part as a message input item: always an input_file (message content no longer accepts
// input_audio). A data URL needs an mp3/mpeg or wav subtype; false to skip the part.
bool AudioInputItem(std::string_view url, Json* out) {
  if (url.starts_with("data:audio/")) {
    size_t comma = url.find(',');
    if (comma == std::string_view::npos) return false;
    std::string_view subtype = url.substr(11, comma - 11);
    subtype = subtype.substr(0, subtype.find(';'));
    std::string lower = AsciiLower(subtype);
    std::string ext = lower == "mp3" || lower == "mpeg" ? "mp3" : lower == "wav" ? "wav" : "";
    if (ext.empty()) return false;
    *out = Json{{"type", "input_file"}, {"file_data", std::string(url.substr(comma + 1))},
                {"filename", "inline." + ext}};
    return true;
  }
  if (url.starts_with("http://") || url.starts_with("https://")) {
    *out = Json{{"type", "input_file"}, {"file_url", std::string(url)}};
    return true;
  }
  return false;
}

// An audio part inside a function_call_output: a URL, or a data URL's payload (any subtype).
bool AudioOutputItem(std::string_view url, Json* out) {
  if (url.starts_with("http://") || url.starts_with("https://")) {
    *out = Json{{"type", "input_file"}, {"file_url", std::string(url)}};
    return true;
  }
  if (url.starts_with("data:audio/")) {
    size_t comma = url.find(',');
    if (comma == std::string_view::npos) return false;
    *out = Json{{"type", "input_file"}, {"file_data", std::string(url.substr(comma + 1))}};
    return true;
  }
  return false;
}

// The content of a user/system message item: non-empty text, images (detail "auto"), audio files; other
// parts are dropped.
Json InputItems(const std::vector<const ContentPart*>& parts) {
  Json items = Json::array();
  for (const ContentPart* part : parts) {
    if (const std::string* text = TextOf(*part)) {
      if (!text->empty()) items.push_back({{"type", "input_text"}, {"text", *text}});
    } else if (const auto* media = std::get_if<MediaPart>(part)) {
      Json item;
      if (media->kind == MediaKind::kImage) {
        items.push_back({{"type", "input_image"}, {"detail", media->detail.value_or("auto")}, {"image_url", media->url}});
      } else if (media->kind == MediaKind::kAudio && AudioInputItem(media->url, &item)) {
        items.push_back(std::move(item));
      }
    }
  }
  return items;
}

// The content of an assistant message item: non-empty text only.
Json OutputItems(const std::vector<const ContentPart*>& parts) {
  Json items = Json::array();
  for (const ContentPart* part : parts) {
    const std::string* text = TextOf(*part);
    if (text != nullptr && !text->empty()) {
      items.push_back({{"type", "output_text"}, {"text", *text}, {"annotations", Json::array()}});
    }
  }
  return items;
}

// A tool result's `output`: one string (extract_text), or its non-empty text, images and audio files.
Json FunctionOutput(const Message& m, bool text_only) {
  if (text_only) return m.ExtractText("\n");
  Json items = Json::array();
  for (const ContentPart& part : m.content) {
    if (const std::string* text = TextOf(part)) {
      if (!text->empty()) items.push_back({{"type", "input_text"}, {"text", *text}});
    } else if (const auto* media = std::get_if<MediaPart>(&part)) {
      Json item;
      if (media->kind == MediaKind::kImage) {
        Json image = {{"type", "input_image"}, {"image_url", media->url}};
        if (media->detail) image["detail"] = *media->detail;
        items.push_back(std::move(image));
      } else if (media->kind == MediaKind::kAudio && AudioOutputItem(media->url, &item)) {
        items.push_back(std::move(item));
      }
    }
  }
  return items;
}

// Appends the input items of a user, system or assistant message: its parts in order (runs of visible parts
// as one message item, runs of think parts with one `encrypted` value as one reasoning item), then its tool
// calls.
void AppendMessageItems(const Message& m, const char* role, Json* input) {
  bool assistant = m.role == Role::kAssistant;
  std::vector<const ContentPart*> pending;
  auto flush = [&] {
    if (pending.empty()) return;
    input->push_back({{"content", assistant ? OutputItems(pending) : InputItems(pending)},
                      {"role", role},
                      {"type", "message"}});
    pending.clear();
  };
  for (size_t i = 0; i < m.content.size();) {
    const auto* think = std::get_if<ThinkPart>(&m.content[i]);
    if (think == nullptr) {
      const auto* custom = std::get_if<CustomPart>(&m.content[i]);
      // Anthropic's redacted thinking as older logs hold it: meaningless here.
      if (custom == nullptr || custom->type != "redacted_thinking") pending.push_back(&m.content[i]);
      ++i;
      continue;
    }
    flush();
    Json summary = Json::array();
    const std::optional<std::string>& encrypted = think->encrypted;
    for (; i < m.content.size(); ++i) {
      const auto* next = std::get_if<ThinkPart>(&m.content[i]);
      if (next == nullptr || next->encrypted != encrypted) break;
      summary.push_back({{"type", "summary_text"}, {"text", next->think}});
    }
    input->push_back({{"summary", std::move(summary)},
                      {"type", "reasoning"},
                      {"encrypted_content", encrypted ? Json(*encrypted) : Json(nullptr)}});
  }
  flush();
  if (m.tool_calls) {
    for (const ToolCall& call : *m.tool_calls) {
      const std::optional<std::string>& arguments = call.function.arguments;
      input->push_back({{"arguments", arguments && !arguments->empty() ? *arguments : std::string("{}")},
                        {"call_id", call.id},
                        {"name", call.function.name},
                        {"type", "function_call"}});
    }
  }
}

TokenUsage UsageFrom(simdjson::dom::element usage) {
  int64_t input = GetCount(usage, "input_tokens");
  int64_t cached = 0;
  simdjson::dom::element details;
  if (Get(usage, "input_tokens_details", &details)) cached = GetCount(details, "cached_tokens");
  return TokenUsage{.input_other = Uncached(input, cached), .output = GetCount(usage, "output_tokens"),
                    .input_cache_read = std::min(cached, input)};
}

class ResponsesDecoder final : public StreamDecoder {
 public:
  Status OnEvent(std::string_view event, std::string_view data, std::vector<StreamedPart>* out) override {
    STRATA_ASSIGN_OR_RETURN(simdjson::dom::element e, ParsePayload(parser_, data, "openai-responses"));
    std::string_view type = GetString(e, "type", event);
    simdjson::dom::element response, item;
    if (type == "response.created" || type == "response.in_progress") {
      if (Get(e, "response", &response)) ReadResponseId(response);
    } else if (type == "response.output_text.delta") {
      out->push_back(ContentPart(TextPart{std::string(GetString(e, "delta"))}));
    } else if (type == "response.reasoning_summary_part.added") {
      out->push_back(ContentPart(ThinkPart{"", std::nullopt}));
    } else if (type == "response.reasoning_summary_text.delta" || type == "response.reasoning_text.delta") {
      // Raw reasoning text (servers of open models stream it; OpenAI's do not) is kept too, where kosong
      // reads only summaries and loses it.
      out->push_back(ContentPart(ThinkPart{std::string(GetString(e, "delta")), std::nullopt}));
    } else if (type == "response.output_item.added") {
      if (!Get(e, "item", &item)) return Status::Ok();
      ReadItemId(item);
      if (GetString(item, "type") == "function_call") {
        std::string_view call_id = GetString(item, "call_id");
        out->push_back(ToolCall{.id = call_id.empty() ? NewCallId("call_") : std::string(call_id),
                                .function = {std::string(GetString(item, "name")),
                                             std::string(GetString(item, "arguments"))},
                                .index = static_cast<int>(GetInt(e, "output_index"))});
      }
    } else if (type == "response.function_call_arguments.delta") {
      std::string_view delta = GetString(e, "delta");
      if (!delta.empty()) {
        out->push_back(ToolCallPart{std::string(delta), static_cast<int>(GetInt(e, "output_index"))});
      }
    } else if (type == "response.output_item.done") {
      if (!Get(e, "item", &item)) return Status::Ok();
      ReadItemId(item);
      if (GetString(item, "type") == "reasoning") {
        // Closes the reasoning (signed when the item carries its encrypted content).
        out->push_back(ContentPart(ThinkPart{"", EncryptedContent(item)}));
      }
    } else if (type == "response.completed" || type == "response.incomplete") {
      if (Get(e, "response", &response)) {
        ReadResponseId(response);
        ReadUsage(response);
        ReadStatus(response);
      }
      if (stop_reason_.empty()) stop_reason_ = type == "response.completed" ? "completed" : "incomplete";
      complete_ = true;
    } else if (type == "response.failed") {
      simdjson::dom::element error;
      if (Get(e, "response", &response) && Get(response, "error", &error) && !error.is_null()) {
        return ErrorFrom(error);
      }
      return EmbeddedError("openai-responses", "the stream's response.failed event", 500, ToJsonText(e));
    } else if (type == "error") {
      return ErrorFrom(e);
    }
    return Status::Ok();
  }

  Status OnResponse(std::string_view body, std::vector<StreamedPart>* out) override {
    STRATA_ASSIGN_OR_RETURN(simdjson::dom::element response, ParsePayload(parser_, body, "openai-responses"));
    simdjson::dom::element error, output;
    if (Get(response, "error", &error) && !error.is_null()) return ErrorFrom(error);
    id_ = std::string(GetString(response, "id"));
    ReadUsage(response);
    ReadStatus(response);
    if (!Get(response, "output", &output) || !output.is_array()) {
      return InvalidResponseError("openai-responses: response has no output list");
    }
    simdjson::dom::array items = json::AsArray(output);
    for (simdjson::dom::element item : items) {
      std::string_view type = GetString(item, "type");
      simdjson::dom::element list;
      if (type == "reasoning") {
        // One think part per summary, each carrying the item's encrypted content (none without a summary).
        if (Get(item, "summary", &list) && list.is_array()) {
          simdjson::dom::array summary = json::AsArray(list);
          for (simdjson::dom::element s : summary) {
            out->push_back(ContentPart(ThinkPart{std::string(GetString(s, "text")), EncryptedContent(item)}));
          }
        }
      } else if (type == "message") {
        if (Get(item, "content", &list) && list.is_array()) {
          simdjson::dom::array content = json::AsArray(list);
          for (simdjson::dom::element c : content) {
            if (GetString(c, "type") == "output_text") {
              out->push_back(ContentPart(TextPart{std::string(GetString(c, "text"))}));
            }
          }
        }
      } else if (type == "function_call") {
        std::string_view call_id = GetString(item, "call_id");
        out->push_back(ToolCall{.id = call_id.empty() ? NewCallId("call_") : std::string(call_id),
                                .function = {std::string(GetString(item, "name")),
                                             std::string(GetString(item, "arguments"))}});
      }
    }
    complete_ = true;
    return Status::Ok();
  }

  Status Finish() override {
    if (complete_) return Status::Ok();
    return InvalidResponseError("openai-responses: stream ended before response.completed (truncated response)");
  }

 private:
  static std::optional<std::string> EncryptedContent(simdjson::dom::element item) {
    if (!Has(item, "encrypted_content")) return std::nullopt;
    return std::string(GetString(item, "encrypted_content"));
  }

  // kosong names a streamed message after its last output item; the response id stands in until one does.
  void ReadItemId(simdjson::dom::element item) {
    std::string_view id = GetString(item, "id");
    if (id.empty()) return;
    id_ = std::string(id);
    item_named_ = true;
  }

  void ReadResponseId(simdjson::dom::element response) {
    std::string_view id = GetString(response, "id");
    if (!id.empty() && !item_named_) id_ = std::string(id);
  }

  // A response that is "incomplete" says why in incomplete_details.reason ("max_output_tokens",
  // "content_filter"); a complete one is "completed".
  void ReadStatus(simdjson::dom::element response) {
    std::string_view status = GetString(response, "status");
    simdjson::dom::element details;
    std::string_view reason;
    if (Get(response, "incomplete_details", &details) && details.is_object()) reason = GetString(details, "reason");
    if (!reason.empty()) {
      stop_reason_ = std::string(reason);
    } else if (!status.empty()) {
      stop_reason_ = std::string(status);
    }
  }

  void ReadUsage(simdjson::dom::element response) {
    simdjson::dom::element usage;
    // A usage whose input count is not a count (negative, fractional, huge, a string) is no usage: it would
    // become a usage mark that says the context costs almost nothing.
    if (Get(response, "usage", &usage) && usage.is_object() && IsCount(usage, "input_tokens")) usage_ = UsageFrom(usage);
  }

  static Status ErrorFrom(simdjson::dom::element error) {
    std::string_view code = GetString(error, "code");
    int status = code == "rate_limit_exceeded" ? 429 : code == "server_error" ? 500 : 400;
    if (code.empty()) status = 500;
    std::string body = "{\"error\":" + ToJsonText(error) + "}";
    return EmbeddedError("openai-responses", "error" + (code.empty() ? std::string() : " " + std::string(code)) +
                                                 " in a response the server answered with 200",
                         status, body);
  }

  bool item_named_ = false;  // An output item has named the response (its id wins from then on).
  simdjson::dom::parser parser_;
};

}  // namespace

Result<std::string> BuildResponsesBody(const ChatRequest& request) {
  STRATA_ASSIGN_OR_RETURN(Json options, ParseOptions(request.options, "openai-responses", kKnownOptions));
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> effort, OptionalString(options, "reasoning_effort"));
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> summary, OptionalString(options, "reasoning_summary"));
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> conversion, OptionalString(options, "tool_message_conversion"));
  if (conversion && *conversion != "extract_text" && *conversion != "blocks") {
    return Status::InvalidArgument("options.tool_message_conversion: expected \"extract_text\" or \"blocks\", got \"" +
                                   *conversion + "\"");
  }
  bool tool_text_only = conversion == "extract_text";
  const char* system_role = IsOpenAIModel(request.model) ? "developer" : "system";

  Json body = Json::object();
  body["model"] = request.model;
  Json input = Json::array();
  if (!request.system_prompt.empty()) input.push_back({{"role", system_role}, {"content", request.system_prompt}});
  for (const Message& m : request.history) {
    switch (m.role) {
      case Role::kSystem: AppendMessageItems(m, system_role, &input); break;
      case Role::kUser: AppendMessageItems(m, "user", &input); break;
      case Role::kAssistant: AppendMessageItems(m, "assistant", &input); break;
      case Role::kTool:
        input.push_back({{"call_id", m.tool_call_id.value_or("")},
                         {"output", FunctionOutput(m, tool_text_only)},
                         {"type", "function_call_output"}});
        break;
    }
  }
  body["input"] = std::move(input);
  Json tools = Json::array();
  for (const ToolDeclaration& tool : request.tools) {
    STRATA_ASSIGN_OR_RETURN(Json parameters, ParseToolParameters(tool));
    tools.push_back({{"type", "function"}, {"name", tool.name}, {"description", tool.description},
                     {"parameters", std::move(parameters)}, {"strict", false}});
  }
  body["tools"] = std::move(tools);  // Sent even when empty, as kosong does.
  body["store"] = false;
  if (request.stream) body["stream"] = true;
  if (effort) {
    body["reasoning"] = {{"effort", *effort}, {"summary", summary.value_or("auto")}};
    body["include"] = Json::array({"reasoning.encrypted_content"});
  }
  CopyKeys(options, kSamplingKeys, &body);
  STRATA_RETURN_IF_ERROR(MergeExtraBody(options, &body));
  return DumpBody(body);
}

Result<std::unique_ptr<StreamDecoder>> NewResponsesDecoder(std::string_view options) {
  STRATA_RETURN_IF_ERROR(ParseOptions(options, "openai-responses", kKnownOptions).status());
  return std::unique_ptr<StreamDecoder>(new ResponsesDecoder());
}

}  // namespace strata::llm::internal
