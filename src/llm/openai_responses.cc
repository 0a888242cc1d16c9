// OpenAI Responses API.
//
// Request: the system prompt (and system messages) use role "developer" for OpenAI models ("system" for
// others served through the same API); user and assistant turns are typed message items (input_text /
// input_image, output_text with annotations:[]); each think part becomes a reasoning item (its text as one
// summary_text, its `encrypted` as encrypted_content) placed before the assistant's message; tool calls are
// function_call items after it; tool results function_call_output items (empty text dropped). Tools are
// flat with strict:false; store:false (the conversation lives in Strata), and with a reasoning effort the
// encrypted reasoning is requested back.
//
// Response events: output_text deltas are text, reasoning summary/text deltas are thinking, a finished
// reasoning item's encrypted_content signs the thinking; function_call items open calls (index = output
// index) whose argument deltas follow; response.completed carries the usage; response.failed / error are
// errors.
#include "json_dom.h"
#include "wire_internal.h"
#include "strata/llm/chat_error.h"

namespace strata::llm::internal {
namespace {

constexpr std::string_view kKnownOptions[] = {
    "reasoning_effort", "reasoning_summary", "temperature", "top_p", "max_output_tokens", "tool_choice",
    "parallel_tool_calls", "text", "truncation"};
constexpr const char* kSamplingKeys[] = {"temperature", "top_p", "max_output_tokens",
                                                              "tool_choice", "parallel_tool_calls", "text",
                                                              "truncation"};

bool IsOpenAIModel(std::string_view model) {
  for (std::string_view prefix : {"gpt-", "o1", "o3", "o4", "codex", "chatgpt", "computer-use"}) {
    if (model.starts_with(prefix)) return true;
  }
  return false;
}

// Input-side parts of a user/system/tool message: text (empty skipped when `skip_empty`) and images.
Json InputParts(const Message& m, bool skip_empty) {
  Json parts = Json::array();
  for (const ContentPart& part : m.content) {
    if (const std::string* text = TextOf(part)) {
      if (skip_empty && text->empty()) continue;
      parts.push_back({{"type", "input_text"}, {"text", *text}});
    } else if (const auto* media = std::get_if<MediaPart>(&part)) {
      if (media->kind == MediaKind::kImage) parts.push_back({{"type", "input_image"}, {"image_url", media->url}});
    }
  }
  return parts;
}

void AppendAssistant(const Message& m, Json* input) {
  Json texts = Json::array();
  for (const ContentPart& part : m.content) {
    if (const auto* think = std::get_if<ThinkPart>(&part)) {
      Json summary = Json::array();
      if (!think->think.empty()) summary.push_back({{"type", "summary_text"}, {"text", think->think}});
      Json item{{"summary", std::move(summary)}, {"type", "reasoning"}};
      if (think->encrypted) item["encrypted_content"] = *think->encrypted;
      input->push_back(std::move(item));
    } else if (const std::string* text = TextOf(part)) {
      texts.push_back({{"type", "output_text"}, {"text", *text}, {"annotations", Json::array()}});
    }
  }
  if (!texts.empty()) input->push_back({{"content", std::move(texts)}, {"role", "assistant"}, {"type", "message"}});
  if (m.tool_calls) {
    for (const ToolCall& call : *m.tool_calls) {
      input->push_back({{"arguments", call.function.arguments.value_or("{}")},
                        {"call_id", call.id},
                        {"name", call.function.name},
                        {"type", "function_call"}});
    }
  }
}

TokenUsage UsageFrom(simdjson::dom::element usage) {
  int64_t input = GetInt(usage, "input_tokens");
  int64_t cached = 0;
  simdjson::dom::element details;
  if (Get(usage, "input_tokens_details", &details)) cached = GetInt(details, "cached_tokens");
  return TokenUsage{.input_other = input - cached, .output = GetInt(usage, "output_tokens"),
                    .input_cache_read = cached};
}

class ResponsesDecoder final : public StreamDecoder {
 public:
  Status OnEvent(std::string_view event, std::string_view data, std::vector<StreamedPart>* out) override {
    STRATA_ASSIGN_OR_RETURN(simdjson::dom::element e, ParsePayload(parser_, data, "openai-responses"));
    std::string_view type = GetString(e, "type", event);
    simdjson::dom::element response, item;
    if (type == "response.created" || type == "response.in_progress") {
      if (Get(e, "response", &response)) id_ = std::string(GetString(response, "id"));
    } else if (type == "response.output_text.delta") {
      std::string_view delta = GetString(e, "delta");
      if (!delta.empty()) out->push_back(ContentPart(TextPart{std::string(delta)}));
    } else if (type == "response.reasoning_summary_text.delta" || type == "response.reasoning_text.delta") {
      std::string_view delta = GetString(e, "delta");
      if (!delta.empty()) out->push_back(ContentPart(ThinkPart{std::string(delta), std::nullopt}));
    } else if (type == "response.output_item.added") {
      if (Get(e, "item", &item) && GetString(item, "type") == "function_call") {
        out->push_back(ToolCall{.id = std::string(GetString(item, "call_id")),
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
      if (Get(e, "item", &item) && GetString(item, "type") == "reasoning" && Has(item, "encrypted_content")) {
        out->push_back(ContentPart(ThinkPart{"", std::string(GetString(item, "encrypted_content"))}));
      }
    } else if (type == "response.completed" || type == "response.incomplete") {
      if (Get(e, "response", &response)) ReadResponseMeta(response);
      complete_ = true;
    } else if (type == "response.failed") {
      simdjson::dom::element error;
      if (Get(e, "response", &response) && Get(response, "error", &error) && !error.is_null()) {
        return ErrorFrom(error);
      }
      return HttpStatusError(500, ToJsonText(e));
    } else if (type == "error") {
      return ErrorFrom(e);
    }
    return Status::Ok();
  }

  Status OnResponse(std::string_view body, std::vector<StreamedPart>* out) override {
    STRATA_ASSIGN_OR_RETURN(simdjson::dom::element response, ParsePayload(parser_, body, "openai-responses"));
    simdjson::dom::element error, output;
    if (Get(response, "error", &error) && !error.is_null()) return ErrorFrom(error);
    ReadResponseMeta(response);
    if (!Get(response, "output", &output) || !output.is_array()) {
      return InvalidResponseError("openai-responses: response has no output list");
    }
    simdjson::dom::array items = json::AsArray(output);
    for (simdjson::dom::element item : items) {
      std::string_view type = GetString(item, "type");
      simdjson::dom::element list;
      if (type == "reasoning") {
        std::string text;
        if (Get(item, "summary", &list) && list.is_array()) {
          simdjson::dom::array summary = json::AsArray(list);
          for (simdjson::dom::element s : summary) text += GetString(s, "text");
        }
        std::optional<std::string> encrypted;
        if (Has(item, "encrypted_content")) encrypted = std::string(GetString(item, "encrypted_content"));
        out->push_back(ContentPart(ThinkPart{std::move(text), std::move(encrypted)}));
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
        out->push_back(ToolCall{.id = std::string(GetString(item, "call_id")),
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
  void ReadResponseMeta(simdjson::dom::element response) {
    std::string_view id = GetString(response, "id");
    if (!id.empty()) id_ = std::string(id);
    simdjson::dom::element usage;
    if (Get(response, "usage", &usage) && usage.is_object()) usage_ = UsageFrom(usage);
  }

  static Status ErrorFrom(simdjson::dom::element error) {
    std::string_view code = GetString(error, "code");
    int status = code == "rate_limit_exceeded" ? 429 : code == "server_error" ? 500 : 400;
    if (code.empty()) status = 500;
    std::string body = "{\"error\":" + ToJsonText(error) + "}";
    return HttpStatusError(status, body);
  }

  simdjson::dom::parser parser_;
};

}  // namespace

Result<std::string> BuildResponsesBody(const ChatRequest& request) {
  STRATA_ASSIGN_OR_RETURN(Json options, ParseOptions(request.options, "openai-responses", kKnownOptions));
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> effort, OptionalString(options, "reasoning_effort"));
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> summary, OptionalString(options, "reasoning_summary"));
  const char* system_role = IsOpenAIModel(request.model) ? "developer" : "system";

  Json body = Json::object();
  body["model"] = request.model;
  Json input = Json::array();
  if (!request.system_prompt.empty()) input.push_back({{"role", system_role}, {"content", request.system_prompt}});
  for (const Message& m : request.history) {
    switch (m.role) {
      case Role::kSystem:
      case Role::kUser:
        input.push_back({{"content", InputParts(m, false)},
                         {"role", m.role == Role::kUser ? "user" : system_role},
                         {"type", "message"}});
        break;
      case Role::kAssistant: AppendAssistant(m, &input); break;
      case Role::kTool:
        input.push_back({{"call_id", m.tool_call_id.value_or("")},
                         {"output", InputParts(m, true)},
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
  if (!tools.empty()) body["tools"] = std::move(tools);
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
