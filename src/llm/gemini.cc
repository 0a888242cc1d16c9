// Google Gemini (generateContent REST, camelCase).
//
// Request: the system prompt is `systemInstruction`; roles map user -> user, assistant -> model; a system
// message inside the history becomes a user turn "<system>text</system>"; signed thinking goes back as a
// thought part with its thoughtSignature (unsigned thinking is not sent); tool calls are functionCall parts
// (no ids on the wire) carrying their thought signature; every run of tool messages becomes ONE user turn of
// functionResponse parts, ordered to match the preceding functionCall parts (Vertex AI rejects any other
// order or count). A response's function name comes from the call it answers, else the tool message's
// `name`, else the part of its id before the first '_' (ids Strata mints look like "<name>_<n>").
// JSON Schema keywords Gemini rejects ($schema, additionalProperties) are removed from tool parameters.
//
// Response: each SSE payload is a GenerateContentResponse: thought parts are thinking (signed by their
// thoughtSignature), other text parts text, functionCall parts tool calls with ids "<name>_<id>".
// Usage: output = candidatesTokenCount + thoughtsTokenCount; cachedContentTokenCount is cached input.
#include <map>

#include "json_dom.h"
#include "wire_internal.h"
#include "strata/json/checked.h"
#include "strata/json/json_writer.h"
#include "strata/llm/chat_error.h"

namespace strata::llm::internal {
namespace {

constexpr std::string_view kKnownOptions[] = {
    "thinking_budget", "include_thoughts", "temperature", "top_p", "top_k", "max_output_tokens",
    "stop_sequences", "response_mime_type"};

std::string GuessMimeType(std::string_view url) {
  size_t dot = url.rfind('.');
  std::string ext = dot == std::string_view::npos ? "" : std::string(url.substr(dot + 1));
  for (char& c : ext) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  static const std::map<std::string, std::string> kTypes = {
      {"png", "image/png"},   {"jpg", "image/jpeg"},  {"jpeg", "image/jpeg"}, {"gif", "image/gif"},
      {"webp", "image/webp"}, {"mp3", "audio/mp3"},   {"wav", "audio/wav"},   {"mp4", "video/mp4"},
      {"pdf", "application/pdf"}};
  auto it = kTypes.find(ext);
  return it == kTypes.end() ? "application/octet-stream" : it->second;
}

void AppendUserParts(const Message& m, Json* parts) {
  for (const ContentPart& part : m.content) {
    if (const std::string* text = TextOf(part)) {
      if (!text->empty()) parts->push_back({{"text", *text}});
    } else if (const auto* media = std::get_if<MediaPart>(&part)) {
      std::string mime, data;
      if (SplitDataUrl(media->url, &mime, &data)) {
        parts->push_back({{"inlineData", {{"mimeType", mime}, {"data", data}}}});
      } else {
        parts->push_back({{"fileData", {{"mimeType", GuessMimeType(media->url)}, {"fileUri", media->url}}}});
      }
    }
  }
}

std::optional<std::string> ThoughtSignature(const ToolCall& call) {
  if (!call.extras) return std::nullopt;
  Json extras = strata::json::ParseOrDiscard<Json>(*call.extras);
  if (!extras.is_object()) return std::nullopt;
  auto it = extras.find("thought_signature");
  if (it == extras.end() || !it->is_string()) return std::nullopt;
  return it->get<std::string>();
}

void StripUnsupported(Json& schema) {
  if (schema.is_object()) {
    schema.erase("$schema");
    schema.erase("additionalProperties");
    for (auto& [key, value] : schema.items()) StripUnsupported(value);
  } else if (schema.is_array()) {
    for (Json& v : schema) StripUnsupported(v);
  }
}

std::string FunctionNameFor(const Message& tool_message, const std::map<std::string, std::string>& names) {
  const std::string id = tool_message.tool_call_id.value_or("");
  if (auto it = names.find(id); it != names.end()) return it->second;
  if (tool_message.name) return *tool_message.name;
  size_t underscore = id.find('_');
  return underscore == std::string::npos ? id : id.substr(0, underscore);
}

Json FunctionResponse(const Message& m, const std::map<std::string, std::string>& names) {
  return Json{{"functionResponse", {{"name", FunctionNameFor(m, names)}, {"response", {{"output", m.ExtractText("\n")}}}}}};
}

class GeminiDecoder final : public StreamDecoder {
 public:
  Status OnEvent(std::string_view, std::string_view data, std::vector<StreamedPart>* out) override {
    STRATA_ASSIGN_OR_RETURN(simdjson::dom::element e, ParsePayload(parser_, data, "gemini"));
    return Read(e, out);
  }

  Status OnResponse(std::string_view body, std::vector<StreamedPart>* out) override {
    STRATA_ASSIGN_OR_RETURN(simdjson::dom::element e, ParsePayload(parser_, body, "gemini"));
    STRATA_RETURN_IF_ERROR(Read(e, out));
    complete_ = true;
    return Status::Ok();
  }

  Status Finish() override {
    if (complete_) return Status::Ok();
    return InvalidResponseError("gemini: stream ended before a finishReason (truncated response)");
  }

 private:
  Status Read(simdjson::dom::element e, std::vector<StreamedPart>* out) {
    simdjson::dom::element error, usage, candidates, candidate, content, parts;
    if (Get(e, "error", &error) && error.is_object()) {
      int64_t code = GetInt(error, "code", 500);
      return HttpStatusError(static_cast<int>(code < 400 || code > 599 ? 500 : code), ToJsonText(e));
    }
    std::string_view id = GetString(e, "responseId");
    if (!id.empty()) id_ = std::string(id);
    if (Get(e, "usageMetadata", &usage) && usage.is_object()) {
      int64_t cached = GetInt(usage, "cachedContentTokenCount");
      usage_ = TokenUsage{.input_other = GetInt(usage, "promptTokenCount") - cached,
                          .output = GetInt(usage, "candidatesTokenCount") + GetInt(usage, "thoughtsTokenCount"),
                          .input_cache_read = cached};
    }
    if (Get(e, "promptFeedback", &error) && Has(error, "blockReason")) complete_ = true;
    if (!Get(e, "candidates", &candidates) || !candidates.is_array() || candidates.at(0).get(candidate)) {
      return Status::Ok();
    }
    if (Has(candidate, "finishReason")) complete_ = true;
    if (!Get(candidate, "content", &content) || !Get(content, "parts", &parts) || !parts.is_array()) {
      return Status::Ok();
    }
    simdjson::dom::array list = json::AsArray(parts);
    for (simdjson::dom::element part : list) {
      std::optional<std::string> signature;
      if (Has(part, "thoughtSignature")) signature = std::string(GetString(part, "thoughtSignature"));
      simdjson::dom::element call, thought;
      if (Get(part, "functionCall", &call)) {
        std::string name(GetString(call, "name"));
        std::string call_id(GetString(call, "id"));
        simdjson::dom::element args;
        std::string arguments = Get(call, "args", &args) && args.is_object() ? ToJsonText(args) : "{}";
        ToolCall tc{.id = name + "_" + (call_id.empty() ? std::to_string(++calls_) : call_id),
                    .function = {name, std::move(arguments)}};
        if (signature) {
          std::string extras = "{\"thought_signature\":";
          json::AppendString(&extras, *signature);
          tc.extras = extras + "}";
        }
        out->push_back(std::move(tc));
      } else if (Has(part, "text")) {
        std::string text(GetString(part, "text"));
        bool is_thought = Get(part, "thought", &thought) && thought.is_bool() && bool(thought);
        if (is_thought) {
          out->push_back(ContentPart(ThinkPart{std::move(text), std::move(signature)}));
        } else if (!text.empty()) {
          out->push_back(ContentPart(TextPart{std::move(text)}));
        }
      }
    }
    return Status::Ok();
  }

  int calls_ = 0;  // Numbers calls the provider sent without ids.
  simdjson::dom::parser parser_;
};

}  // namespace

Result<std::string> BuildGeminiBody(const ChatRequest& request) {
  STRATA_ASSIGN_OR_RETURN(Json options, ParseOptions(request.options, "gemini", kKnownOptions));
  STRATA_ASSIGN_OR_RETURN(std::optional<int64_t> budget, OptionalInt(options, "thinking_budget"));
  STRATA_ASSIGN_OR_RETURN(std::optional<bool> include_thoughts, OptionalBool(options, "include_thoughts"));

  std::map<std::string, std::string> names;          // tool_call_id -> function name
  std::map<std::string, size_t> expected_order;      // tool_call_id -> position in the last calling turn
  Json contents = Json::array();
  const std::vector<Message>& history = request.history;
  for (size_t i = 0; i < history.size(); ++i) {
    const Message& m = history[i];
    if (m.role == Role::kTool) {
      // Pack the whole run of tool messages into one user turn, in the order of the calls they answer.
      size_t end = i;
      while (end < history.size() && history[end].role == Role::kTool) ++end;
      std::vector<size_t> run;
      for (size_t j = i; j < end; ++j) run.push_back(j);
      std::stable_sort(run.begin(), run.end(), [&](size_t a, size_t b) {
        auto rank = [&](size_t k) {
          auto it = expected_order.find(history[k].tool_call_id.value_or(""));
          return it == expected_order.end() ? SIZE_MAX : it->second;
        };
        return rank(a) < rank(b);
      });
      Json parts = Json::array();
      for (size_t k : run) parts.push_back(FunctionResponse(history[k], names));
      contents.push_back({{"role", "user"}, {"parts", std::move(parts)}});
      i = end - 1;
      continue;
    }
    Json parts = Json::array();
    if (m.role == Role::kSystem) {
      parts.push_back({{"text", "<system>" + m.ExtractText("\n") + "</system>"}});
    } else if (m.role == Role::kUser) {
      AppendUserParts(m, &parts);
    } else {
      for (const ContentPart& part : m.content) {
        if (const auto* think = std::get_if<ThinkPart>(&part)) {
          if (think->encrypted) {
            parts.push_back({{"text", think->think}, {"thought", true}, {"thoughtSignature", *think->encrypted}});
          }
        } else if (const std::string* text = TextOf(part)) {
          if (!text->empty()) parts.push_back({{"text", *text}});
        }
      }
      if (m.tool_calls) {
        expected_order.clear();
        for (const ToolCall& call : *m.tool_calls) {
          names[call.id] = call.function.name;
          expected_order.emplace(call.id, expected_order.size());
          Json part{{"functionCall", {{"name", call.function.name}, {"args", ArgumentsObject(call.function.arguments)}}}};
          if (auto signature = ThoughtSignature(call)) part["thoughtSignature"] = *signature;
          parts.push_back(std::move(part));
        }
      }
    }
    if (parts.empty()) continue;
    contents.push_back({{"role", m.role == Role::kAssistant ? "model" : "user"}, {"parts", std::move(parts)}});
  }

  Json body = Json::object();
  body["contents"] = std::move(contents);
  if (!request.system_prompt.empty()) body["systemInstruction"] = {{"parts", Json::array({{{"text", request.system_prompt}}})}};
  if (!request.tools.empty()) {
    Json declarations = Json::array();
    for (const ToolDeclaration& tool : request.tools) {
      STRATA_ASSIGN_OR_RETURN(Json parameters, ParseToolParameters(tool));
      StripUnsupported(parameters);
      Json declaration{{"name", tool.name}, {"description", tool.description}};
      auto props = parameters.find("properties");
      if (props != parameters.end() && props->is_object() && !props->empty()) declaration["parameters"] = parameters;
      declarations.push_back(std::move(declaration));
    }
    body["tools"] = Json::array({{{"functionDeclarations", std::move(declarations)}}});
  }
  Json config = Json::object();
  static const std::pair<const char*, const char*> kRenames[] = {
      {"temperature", "temperature"}, {"top_p", "topP"}, {"top_k", "topK"}, {"max_output_tokens", "maxOutputTokens"},
      {"stop_sequences", "stopSequences"}, {"response_mime_type", "responseMimeType"}};
  for (const auto& [from, to] : kRenames) {
    if (auto it = options.find(from); it != options.end() && !it->is_null()) config[to] = *it;
  }
  if (budget || include_thoughts) {
    Json thinking = Json::object();
    if (budget) thinking["thinkingBudget"] = *budget;
    thinking["includeThoughts"] = include_thoughts.value_or(true);
    config["thinkingConfig"] = std::move(thinking);
  }
  if (!config.empty()) body["generationConfig"] = std::move(config);
  STRATA_RETURN_IF_ERROR(MergeExtraBody(options, &body));
  return DumpBody(body);
}

Result<std::unique_ptr<StreamDecoder>> NewGeminiDecoder(std::string_view options) {
  STRATA_RETURN_IF_ERROR(ParseOptions(options, "gemini", kKnownOptions).status());
  return std::unique_ptr<StreamDecoder>(new GeminiDecoder());
}

}  // namespace strata::llm::internal
