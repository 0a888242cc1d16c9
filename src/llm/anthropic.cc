// Anthropic Messages.
//
// Request: the system prompt is the `system` field (one text block); a system message inside the history
// becomes a user turn "<system>text</system>" (text parts joined by "\n"); every message is a block list;
// empty text blocks are never sent; thinking is sent only when signed (the API rejects unsigned thinking): a
// signed think part with text as a thinking block, one with no text (how a redacted_thinking block is read
// back, its `data` in `encrypted`) as a redacted_thinking block carrying that data; tool calls are tool_use
// blocks with the parsed arguments; tool results are tool_result blocks in a user turn (`content` always
// present, [] when nothing is left), and consecutive tool-result turns are merged into one (parallel calls
// answered together). A message left with no blocks is dropped. Prompt caching: cache_control ephemeral
// on the system block, the last tool and the last block of the last message (unless that block is
// thinking). `tools` is always sent.
//
// Response events: message_start (id, usage), content_block_start/delta (text, thinking, signature,
// redacted thinking as a think part {think:"", encrypted:data}, tool_use + input_json_delta), message_delta
// (every non-null usage field replaces the running value), message_stop, error. A non-streamed response
// reads the same blocks; a tool_use `input` becomes its arguments as Python's json.dumps writes it (", " and
// ": " separators, non-ASCII escaped), as kosong does.
#include <algorithm>

#include "json_dom.h"
#include "wire_internal.h"
#include "strata/json/checked.h"
#include "strata/json/json_writer.h"
#include "strata/llm/chat_error.h"

namespace strata::llm::internal {
namespace {

constexpr std::string_view kKnownOptions[] = {
    "max_tokens", "thinking_budget", "tool_message_conversion", "prompt_cache", "temperature", "top_p", "top_k",
    "stop_sequences", "tool_choice", "thinking", "metadata"};
constexpr const char* kSamplingKeys[] = {"temperature", "top_p", "top_k", "stop_sequences",
                                                              "tool_choice", "thinking", "metadata"};
constexpr int64_t kDefaultMaxTokens = 8192;

Json Ephemeral() { return Json{{"type", "ephemeral"}}; }

// Appends the blocks of user-visible parts (text, images, documents).
void AppendMediaBlocks(const ContentPart& part, Json* blocks) {
  if (const std::string* text = TextOf(part)) {
    if (!text->empty()) blocks->push_back({{"type", "text"}, {"text", *text}});
    return;
  }
  if (const auto* custom = std::get_if<CustomPart>(&part); custom != nullptr && custom->type == "document") {
    blocks->push_back(Json::parse(custom->json));  // Kept as it came (ParseAnthropicRequestMessages).
    return;
  }
  const auto* media = std::get_if<MediaPart>(&part);
  if (media == nullptr || media->kind != MediaKind::kImage) return;
  std::string media_type, data;
  if (SplitDataUrl(media->url, &media_type, &data)) {
    blocks->push_back({{"type", "image"},
                       {"source", {{"type", "base64"}, {"media_type", media_type}, {"data", data}}}});
  } else {
    blocks->push_back({{"type", "image"}, {"source", {{"type", "url"}, {"url", media->url}}}});
  }
}

Json ToolResultBlock(const Message& m, bool extract_text) {
  Json block{{"type", "tool_result"}, {"tool_use_id", m.tool_call_id.value_or("")}};
  if (extract_text) {
    block["content"] = m.ExtractText("\n");
    return block;
  }
  Json content = Json::array();
  for (const ContentPart& part : m.content) AppendMediaBlocks(part, &content);
  block["content"] = std::move(content);  // [] when nothing is left, as kosong sends it.
  return block;
}

Json AssistantBlocks(const Message& m) {
  Json blocks = Json::array();
  for (const ContentPart& part : m.content) {
    if (const auto* think = std::get_if<ThinkPart>(&part)) {
      if (!think->encrypted) continue;  // Unsigned (another vendor's thinking): the API would reject it.
      if (think->think.empty()) {
        // A redacted_thinking block read back as {think:"", encrypted:data}: its data must return unchanged.
        blocks.push_back({{"type", "redacted_thinking"}, {"data", *think->encrypted}});
      } else {
        blocks.push_back({{"type", "thinking"}, {"thinking", think->think}, {"signature", *think->encrypted}});
      }
    } else if (const auto* custom = std::get_if<CustomPart>(&part)) {
      if (custom->type == "redacted_thinking") blocks.push_back(Json::parse(custom->json));
    } else {
      AppendMediaBlocks(part, &blocks);
    }
  }
  if (m.tool_calls) {
    for (const ToolCall& call : *m.tool_calls) {
      blocks.push_back({{"type", "tool_use"}, {"id", call.id}, {"name", call.function.name},
                        {"input", ArgumentsObject(call.function.arguments)}});
    }
  }
  return blocks;
}

bool IsToolResultTurn(const Json& message) {
  if (message["role"] != "user") return false;
  for (const Json& block : message["content"]) {
    if (block["type"] != "tool_result") return false;
  }
  return !message["content"].empty();
}

TokenUsage ReadUsage(simdjson::dom::element usage, TokenUsage current) {
  auto update = [&](std::string_view key, int64_t* field) {
    // Only a count replaces what an earlier event said (a -5 in message_delta erased message_start's).
    if (Has(usage, key) && IsCount(usage, key)) *field = GetCount(usage, key);
  };
  update("input_tokens", &current.input_other);
  update("output_tokens", &current.output);
  update("cache_read_input_tokens", &current.input_cache_read);
  update("cache_creation_input_tokens", &current.input_cache_creation);
  return current;
}

}  // namespace

std::string RedactedThinkingJson(std::string_view data) {
  std::string out = "{\"data\":";
  json::AppendString(&out, data);
  out += ",\"type\":\"redacted_thinking\"}";
  return out;
}

namespace {

int StatusForErrorType(std::string_view type) {
  if (type == "overloaded_error") return 529;
  if (type == "rate_limit_error") return 429;
  if (type == "api_error") return 500;
  if (type == "authentication_error") return 401;
  if (type == "permission_error") return 403;
  if (type == "not_found_error") return 404;
  if (type == "request_too_large") return 413;
  return 400;
}

class AnthropicDecoder final : public StreamDecoder {
 public:
  Status OnEvent(std::string_view event, std::string_view data, std::vector<StreamedPart>* out) override {
    STRATA_ASSIGN_OR_RETURN(simdjson::dom::element e, ParsePayload(parser_, data, "anthropic"));
    std::string_view type = GetString(e, "type", event);
    simdjson::dom::element message, block, delta, usage;
    if (type == "content_block_delta") {
      if (!Get(e, "delta", &delta)) return Status::Ok();
      std::string_view delta_type = GetString(delta, "type");
      if (delta_type == "text_delta") {
        out->push_back(ContentPart(TextPart{std::string(GetString(delta, "text"))}));
      } else if (delta_type == "thinking_delta") {
        out->push_back(ContentPart(ThinkPart{std::string(GetString(delta, "thinking")), std::nullopt}));
      } else if (delta_type == "signature_delta") {
        out->push_back(ContentPart(ThinkPart{"", std::string(GetString(delta, "signature"))}));
      } else if (delta_type == "input_json_delta") {
        out->push_back(ToolCallPart{std::string(GetString(delta, "partial_json")), std::nullopt});
      }
    } else if (type == "content_block_start") {
      if (Get(e, "content_block", &block)) AppendBlock(block, /*streaming=*/true, out);
    } else if (type == "message_start") {
      if (Get(e, "message", &message)) {
        id_ = std::string(GetString(message, "id"));
        if (Get(message, "usage", &usage) && usage.is_object()) usage_ = ReadUsage(usage, TokenUsage{});
      }
    } else if (type == "message_delta") {
      if (Get(e, "usage", &usage) && usage.is_object()) usage_ = ReadUsage(usage, usage_.value_or(TokenUsage{}));
      simdjson::dom::element stop;
      if (Get(e, "delta", &stop) && Has(stop, "stop_reason")) stop_reason_ = std::string(GetString(stop, "stop_reason"));
    } else if (type == "message_stop") {
      complete_ = true;
    } else if (type == "error") {
      return ErrorFrom(e);
    }
    return Status::Ok();
  }

  Status OnResponse(std::string_view body, std::vector<StreamedPart>* out) override {
    STRATA_ASSIGN_OR_RETURN(simdjson::dom::element message, ParsePayload(parser_, body, "anthropic"));
    if (GetString(message, "type") == "error") return ErrorFrom(message);
    id_ = std::string(GetString(message, "id"));
    stop_reason_ = std::string(GetString(message, "stop_reason"));
    simdjson::dom::element usage, content;
    if (Get(message, "usage", &usage) && usage.is_object()) usage_ = ReadUsage(usage, TokenUsage{});
    if (!Get(message, "content", &content) || !content.is_array()) {
      return InvalidResponseError("anthropic: response has no content list");
    }
    simdjson::dom::array blocks = json::AsArray(content);
    for (simdjson::dom::element block : blocks) AppendBlock(block, /*streaming=*/false, out);
    complete_ = true;
    return Status::Ok();
  }

  Status Finish() override {
    if (complete_) return Status::Ok();
    return InvalidResponseError("anthropic: stream ended before message_stop (truncated response)");
  }

 private:
  // A content block from content_block_start (streaming: tool input arrives as deltas) or a whole response.
  static void AppendBlock(simdjson::dom::element block, bool streaming, std::vector<StreamedPart>* out) {
    std::string_view type = GetString(block, "type");
    if (type == "text") {
      out->push_back(ContentPart(TextPart{std::string(GetString(block, "text"))}));
    } else if (type == "thinking") {
      std::optional<std::string> signature;
      if (Has(block, "signature") && !GetString(block, "signature").empty()) {
        signature = std::string(GetString(block, "signature"));
      }
      out->push_back(ContentPart(ThinkPart{std::string(GetString(block, "thinking")), std::move(signature)}));
    } else if (type == "redacted_thinking") {
      // As kosong: a think part with no text whose `encrypted` holds the opaque data (it closes the part).
      out->push_back(ContentPart(ThinkPart{"", std::string(GetString(block, "data"))}));
    } else if (type == "tool_use") {
      std::string arguments;
      simdjson::dom::element input;
      if (!streaming && Get(block, "input", &input)) json::AppendJson(&arguments, input, json::DomStyle::kPythonDumps);
      out->push_back(ToolCall{.id = std::string(GetString(block, "id")),
                              .function = {std::string(GetString(block, "name")), std::move(arguments)}});
    }
  }

  static Status ErrorFrom(simdjson::dom::element e) {
    simdjson::dom::element error;
    std::string_view type;
    if (Get(e, "error", &error)) type = GetString(error, "type");
    return EmbeddedError("anthropic",
                         "an error in the response" + (type.empty() ? std::string() : " (" + std::string(type) + ")"),
                         StatusForErrorType(type), ToJsonText(e));
  }

  simdjson::dom::parser parser_;
};

}  // namespace

Result<std::string> BuildAnthropicBody(const ChatRequest& request) {
  STRATA_ASSIGN_OR_RETURN(Json options, ParseOptions(request.options, "anthropic", kKnownOptions));
  STRATA_ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens, OptionalInt(options, "max_tokens"));
  STRATA_ASSIGN_OR_RETURN(std::optional<int64_t> budget, OptionalInt(options, "thinking_budget"));
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> conversion, OptionalString(options, "tool_message_conversion"));
  STRATA_ASSIGN_OR_RETURN(std::optional<bool> prompt_cache, OptionalBool(options, "prompt_cache"));
  if (conversion && *conversion != "extract_text" && *conversion != "blocks") {
    return Status::InvalidArgument("options.tool_message_conversion: expected \"extract_text\" or \"blocks\", got \"" +
                                   *conversion + "\"");
  }
  bool extract_text = conversion == "extract_text";
  bool cache = prompt_cache.value_or(true);

  Json messages = Json::array();
  for (const Message& m : request.history) {
    Json turn;
    switch (m.role) {
      case Role::kSystem:
        turn = {{"role", "user"},
                {"content", Json::array({{{"type", "text"}, {"text", "<system>" + m.ExtractText("\n") + "</system>"}}})}};
        break;
      case Role::kUser: {
        Json blocks = Json::array();
        for (const ContentPart& part : m.content) AppendMediaBlocks(part, &blocks);
        turn = {{"role", "user"}, {"content", std::move(blocks)}};
        break;
      }
      case Role::kAssistant: turn = {{"role", "assistant"}, {"content", AssistantBlocks(m)}}; break;
      case Role::kTool: {
        turn = {{"role", "user"}, {"content", Json::array({ToolResultBlock(m, extract_text)})}};
        if (!messages.empty() && IsToolResultTurn(messages.back())) {
          messages.back()["content"].push_back(std::move(turn["content"][0]));
          continue;
        }
        break;
      }
    }
    if (turn["content"].empty()) continue;
    messages.push_back(std::move(turn));
  }
  if (cache && !messages.empty()) {
    Json& last = messages.back()["content"].back();
    std::string type = last.value("type", "");
    if (type != "thinking" && type != "redacted_thinking") last["cache_control"] = Ephemeral();
  }

  Json tools = Json::array();
  for (const ToolDeclaration& tool : request.tools) {
    STRATA_ASSIGN_OR_RETURN(Json parameters, ParseToolParameters(tool));
    tools.push_back({{"name", tool.name}, {"description", tool.description}, {"input_schema", std::move(parameters)}});
  }
  if (cache && !tools.empty()) tools.back()["cache_control"] = Ephemeral();

  Json body = Json::object();
  body["model"] = request.model;
  int64_t default_max = budget ? std::max<int64_t>(kDefaultMaxTokens, *budget + 4096) : kDefaultMaxTokens;
  body["max_tokens"] = max_tokens.value_or(default_max);
  body["messages"] = std::move(messages);
  if (!request.system_prompt.empty()) {
    Json block{{"type", "text"}, {"text", request.system_prompt}};
    if (cache) block["cache_control"] = Ephemeral();
    body["system"] = Json::array({std::move(block)});
  }
  body["tools"] = std::move(tools);
  if (request.stream) body["stream"] = true;
  if (budget) body["thinking"] = {{"type", "enabled"}, {"budget_tokens", *budget}};
  CopyKeys(options, kSamplingKeys, &body);
  STRATA_RETURN_IF_ERROR(MergeExtraBody(options, &body));
  return DumpBody(body);
}

Result<std::unique_ptr<StreamDecoder>> NewAnthropicDecoder(std::string_view options) {
  STRATA_RETURN_IF_ERROR(ParseOptions(options, "anthropic", kKnownOptions).status());
  return std::unique_ptr<StreamDecoder>(new AnthropicDecoder());
}

}  // namespace strata::llm::internal

namespace strata::llm {

namespace {

using internal::Json;

// The text of a string or an array of text blocks (other blocks are refused, naming `where`).
Result<std::string> TextOfContent(const Json& content, const std::string& where) {
  if (content.is_null()) return std::string();
  if (content.is_string()) return content.get<std::string>();
  if (!content.is_array()) return Status::InvalidArgument(where + " must be a string or an array of blocks");
  std::string out;
  for (size_t i = 0; i < content.size(); ++i) {
    const Json& block = content[i];
    if (!block.is_object() || json::StringOr(block, "type") != "text") {
      return Status::InvalidArgument(where + "[" + std::to_string(i) + "] must be a text block");
    }
    if (!out.empty()) out += "\n";
    out += json::StringOr(block, "text");
  }
  return out;
}

Result<ContentPart> ImagePart(const Json& block, const std::string& where) {
  const Json* source = json::Field(block, "source");
  if (source == nullptr || !source->is_object()) return Status::InvalidArgument(where + ": an image needs a \"source\"");
  std::string type = json::StringOr(*source, "type");
  if (type == "base64") {
    return ContentPart(MediaPart{MediaKind::kImage,
                                 "data:" + json::StringOr(*source, "media_type") + ";base64," + json::StringOr(*source, "data"),
                                 std::nullopt});
  }
  if (type == "url") return ContentPart(MediaPart{MediaKind::kImage, json::StringOr(*source, "url"), std::nullopt});
  return Status::InvalidArgument(where + ": image source type must be base64 or url, not \"" + type + "\"");
}

}  // namespace

Result<std::vector<Message>> ParseAnthropicRequestMessages(std::string_view messages_json,
                                                           std::string_view system_json, std::string* system_prompt) {
  STRATA_ASSIGN_OR_RETURN(Json messages, json::ParseUntrusted<Json>(messages_json, "messages"));
  if (!messages.is_array()) return Status::InvalidArgument("\"messages\" must be an array");
  if (system_prompt != nullptr) {
    Json system;
    if (!system_json.empty()) {
      STRATA_ASSIGN_OR_RETURN(system, json::ParseUntrusted<Json>(system_json, "system"));
    }
    STRATA_ASSIGN_OR_RETURN(*system_prompt, TextOfContent(system, "\"system\""));
  }
  std::vector<Message> out;
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return Status::InvalidArgument(where + " must be an object");
    std::string role = json::StringOr(m, "role");
    if (role != "user" && role != "assistant") {
      return Status::InvalidArgument(where + ".role must be \"user\" or \"assistant\", not \"" + role + "\"");
    }
    Message message;
    message.role = role == "user" ? Role::kUser : Role::kAssistant;
    const Json* content = json::Field(m, "content");
    if (content == nullptr || content->is_null()) return Status::InvalidArgument(where + ".content is required");
    if (content->is_string()) {
      message.content.push_back(TextPart{content->get<std::string>()});
      out.push_back(std::move(message));
      continue;
    }
    if (!content->is_array()) return Status::InvalidArgument(where + ".content must be a string or an array of blocks");
    for (size_t b = 0; b < content->size(); ++b) {
      const Json& block = (*content)[b];
      std::string at = where + ".content[" + std::to_string(b) + "]";
      if (!block.is_object()) return Status::InvalidArgument(at + " must be an object");
      std::string type = json::StringOr(block, "type");
      if (type == "text") {
        message.content.push_back(TextPart{json::StringOr(block, "text")});
      } else if (type == "image") {
        STRATA_ASSIGN_OR_RETURN(ContentPart part, ImagePart(block, at));
        message.content.push_back(std::move(part));
      } else if (type == "document" && message.role == Role::kUser) {
        const Json* source = json::Field(block, "source");
        if (source == nullptr || !source->is_object()) return Status::InvalidArgument(at + ": a document needs a \"source\"");
        Json kept = block;
        kept.erase("cache_control");  // Strata places its own cache breakpoints.
        message.content.push_back(CustomPart{"document", kept.dump()});
      } else if (type == "thinking" && message.role == Role::kAssistant) {
        std::string signature = json::StringOr(block, "signature");
        message.content.push_back(ThinkPart{json::StringOr(block, "thinking"),
                                            signature.empty() ? std::nullopt : std::optional<std::string>(signature)});
      } else if (type == "redacted_thinking" && message.role == Role::kAssistant) {
        // The same think part a redacted block in a reply becomes; it is sent back as redacted_thinking.
        message.content.push_back(ThinkPart{"", json::StringOr(block, "data")});
      } else if (type == "tool_use" && message.role == Role::kAssistant) {
        const Json* input = json::Field(block, "input");
        std::string id = json::StringOr(block, "id"), name = json::StringOr(block, "name");
        if (id.empty() || name.empty()) return Status::InvalidArgument(at + ": a tool_use block needs an id and a name");
        if (!message.tool_calls) message.tool_calls.emplace();
        message.tool_calls->push_back(ToolCall{.id = id,
                                               .function = {name, input != nullptr ? input->dump() : std::string("{}")}});
      } else if (type == "tool_result" && message.role == Role::kUser) {
        std::string id = json::StringOr(block, "tool_use_id");
        if (id.empty()) return Status::InvalidArgument(at + ": a tool_result block needs a tool_use_id");
        const Json* result = json::Field(block, "content");
        const bool failed = json::BoolOr(block, "is_error", false);
        const bool has_image = result != nullptr && result->is_array() &&
                               std::any_of(result->begin(), result->end(), [](const Json& part) {
                                 return part.is_object() && json::StringOr(part, "type") == "image";
                               });
        if (has_image) {
          // Text and images (a screenshot a computer-use tool returns), kept as parts: ToolResultBlock writes
          // them back as tool_result blocks.
          Message shown = Message::ToolResult(id, "");
          shown.content.clear();
          if (failed) shown.content.push_back(TextPart{"<system>ERROR: the tool failed</system>"});
          for (size_t k = 0; k < result->size(); ++k) {
            const Json& part = (*result)[k];
            const std::string part_at = at + ".content[" + std::to_string(k) + "]";
            const std::string kind = part.is_object() ? json::StringOr(part, "type") : "";
            if (kind == "text") {
              shown.content.push_back(TextPart{json::StringOr(part, "text")});
            } else if (kind == "image") {
              STRATA_ASSIGN_OR_RETURN(ContentPart image, ImagePart(part, part_at));
              shown.content.push_back(std::move(image));
            } else {
              return Status::InvalidArgument(part_at + " must be a text or image block");
            }
          }
          out.push_back(std::move(shown));
          continue;
        }
        STRATA_ASSIGN_OR_RETURN(std::string text, TextOfContent(result != nullptr ? *result : Json(), at + ".content"));
        if (failed) text = "<system>ERROR: the tool failed</system>\n" + text;
        out.push_back(Message::ToolResult(id, std::move(text)));
      } else {
        return Status::InvalidArgument(at + ": a " + role + " message cannot hold a \"" + type + "\" block");
      }
    }
    if (!message.content.empty() || message.tool_calls) out.push_back(std::move(message));
  }
  return out;
}

}  // namespace strata::llm
