// Google Gemini (generateContent REST, camelCase).
//
// Request (kosong's GoogleGenAI provider, contrib/chat_provider/google_genai.py, is the reference): the
// system prompt is `systemInstruction` {parts:[{text}], role:"user"}; roles map user -> user, assistant ->
// model; a system message inside the history becomes a user turn "<system>text</system>" (kosong sends role
// "system", which Gemini rejects). Thinking is never sent back (kosong drops every think part: Gemini's
// thought text is a summary). Tool calls are functionCall parts without ids (the Gemini API rejects `id`),
// each carrying its thought signature as `thoughtSignature` on the part: the signature is stored on the
// ToolCall as extras.thought_signature_b64 (kosong's key; extras.thought_signature, written by earlier
// Strata versions, is still read).
//
// Tool results: the run of tool messages right after a tool-calling assistant turn becomes ONE user turn of
// functionResponse parts, ordered like the functionCall parts (Vertex AI rejects any other order or count);
// the run must answer every call exactly once ("Missing tool responses for ids: [...]", "Unexpected tool
// responses for ids: [...]", "Duplicate tool response for id: ..." otherwise). A tool message that does not
// follow a calling turn (a truncated history) becomes a user turn of its own. A functionResponse is
// {name, response:{output}, parts}: `name` comes from the call it answers (any earlier turn), else the part
// of its id before the first '_' (ids this provider mints look like "<name>_<n>"); `output` is the text
// parts concatenated with no separator (so "<system-reminder>...</system-reminder>" text stays in front of
// the result); image and audio parts go to `parts` as fileData {fileUri, mimeType} with the MIME type
// guessed from the URL like Python's mimetypes (an unknown type is an error, as in kosong); other parts are
// dropped. Tools are declared with their JSON Schema as `parametersJsonSchema`, unchanged.
//
// Response: each SSE payload is a GenerateContentResponse: thought parts are thinking (signed by their
// thoughtSignature), other text parts text, functionCall parts tool calls with ids "<name>_<id>" whose
// thoughtSignature is kept as extras.thought_signature_b64.
// Usage: output = candidatesTokenCount + thoughtsTokenCount; cachedContentTokenCount is cached input.
#include <algorithm>
#include <cstdint>
#include <map>

#include "json_dom.h"
#include "wire_internal.h"
#include "strata/json/checked.h"
#include "strata/json/json_writer.h"
#include "strata/llm/chat_error.h"
#include "strata/util/ascii.h"

namespace strata::llm::internal {
namespace {

constexpr std::string_view kKnownOptions[] = {
    "thinking_budget", "include_thoughts", "temperature", "top_p", "top_k", "max_output_tokens",
    "stop_sequences", "response_mime_type"};

// The MIME type of a user message's media sent by URI (fileData). kosong downloads such a URL and inlines
// the bytes instead; a request builder does no I/O, so Strata lets Gemini fetch it.
std::string GuessMimeType(std::string_view url) {
  size_t dot = url.rfind('.');
  std::string ext = dot == std::string_view::npos ? "" : AsciiLower(url.substr(dot + 1));
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

// Returns the thought signature stored on a tool call: kosong's extras.thought_signature_b64 (the base64
// text Gemini sent), else extras.thought_signature (Strata before it used kosong's key); nullopt when
// neither is a string. The extras are untrusted text (a context log), read with checked accessors.
std::optional<std::string> ThoughtSignature(const ToolCall& call) {
  if (!call.extras) return std::nullopt;
  Json extras = strata::json::ParseOrDiscard<Json>(*call.extras);
  for (const char* key : {"thought_signature_b64", "thought_signature"}) {
    const Json* value = strata::json::Field(extras, key);
    if (value != nullptr && value->is_string()) return value->get<std::string>();
  }
  return std::nullopt;
}

// The MIME type Python's mimetypes.guess_type gives a URL (kosong's google-genai SDK labels a tool result's
// media with it): a data: URL's declared type ("text/plain" when it declares none), else the type of the
// path's extension (query and fragment ignored), from the default table plus the common audio types that a
// Linux /etc/mime.types adds; nullopt when unknown.
std::optional<std::string> PythonMimeType(std::string_view url) {
  constexpr size_t npos = std::string_view::npos;
  size_t colon = url.find(':');
  if (colon != npos && colon > 0 && url.substr(0, colon).find('/') == npos) {
    std::string scheme = AsciiLower(url.substr(0, colon));
    url = url.substr(colon + 1);
    if (scheme == "data") {
      size_t comma = url.find(',');
      if (comma == npos) return std::nullopt;
      std::string_view type = url.substr(0, comma);
      if (size_t semi = type.find(';'); semi != npos) type = type.substr(0, semi);
      if (type.find('=') != npos || type.find('/') == npos) return std::string("text/plain");
      return std::string(type);
    }
  }
  if (size_t cut = url.find_first_of("?#"); cut != npos) url = url.substr(0, cut);
  if (size_t slash = url.rfind('/'); slash != npos) url = url.substr(slash + 1);
  size_t dot = url.rfind('.');
  // Like posixpath.splitext, leading dots ("..png", ".png") are part of the name, not an extension.
  if (dot == npos || url.substr(0, dot).find_first_not_of('.') == npos) return std::nullopt;
  std::string ext = AsciiLower(url.substr(dot + 1));
  static const std::map<std::string, std::string, std::less<>> kTypes = {
      {"png", "image/png"},       {"jpg", "image/jpeg"},        {"jpeg", "image/jpeg"},
      {"jpe", "image/jpeg"},      {"gif", "image/gif"},         {"webp", "image/webp"},
      {"bmp", "image/bmp"},       {"svg", "image/svg+xml"},     {"tif", "image/tiff"},
      {"tiff", "image/tiff"},     {"ico", "image/vnd.microsoft.icon"}, {"heic", "image/heic"},
      {"heif", "image/heif"},     {"avif", "image/avif"},       {"mp3", "audio/mpeg"},
      {"mp2", "audio/mpeg"},      {"wav", "audio/x-wav"},       {"aac", "audio/aac"},
      {"aif", "audio/x-aiff"},    {"aiff", "audio/x-aiff"},     {"aifc", "audio/x-aiff"},
      {"au", "audio/basic"},      {"snd", "audio/basic"},       {"opus", "audio/opus"},
      {"ogg", "audio/ogg"},       {"oga", "audio/ogg"},         {"flac", "audio/flac"},
      {"mp4", "video/mp4"},       {"mpeg", "video/mpeg"},       {"mpg", "video/mpeg"},
      {"mov", "video/quicktime"}, {"webm", "video/webm"},       {"avi", "video/x-msvideo"},
      {"pdf", "application/pdf"}, {"json", "application/json"}, {"txt", "text/plain"}};
  auto it = kTypes.find(ext);
  if (it == kTypes.end()) return std::nullopt;
  return it->second;
}

// Shortens a URL for an error message (data: URLs can be megabytes).
std::string ShortUrl(std::string_view url) {
  constexpr size_t kMax = 80;
  return url.size() <= kMax ? std::string(url) : std::string(url.substr(0, kMax)) + "...";
}

// Python's repr() of a string and of a list of strings, so that messages read like kosong's
// ("Missing tool responses for ids: ['call_1']").
std::string PyRepr(std::string_view s) {
  char quote = s.find('\'') != std::string_view::npos && s.find('"') == std::string_view::npos ? '"' : '\'';
  std::string out(1, quote);
  for (char c : s) {
    if (c == '\\' || c == quote) {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else {
      out += c;
    }
  }
  out += quote;
  return out;
}

std::string PyList(const std::vector<std::string>& items) {
  std::string out = "[";
  for (size_t i = 0; i < items.size(); ++i) out += (i == 0 ? "" : ", ") + PyRepr(items[i]);
  return out + "]";
}

// The function a tool result answers: the name of the call with its id in any earlier calling turn, else
// the part of the id before the first '_' (kosong's fallback for ids "<name>_<id>"; the tool message's own
// `name` is not used, as in kosong).
std::string FunctionNameFor(const std::string& id, const std::map<std::string, std::string>& names) {
  if (auto it = names.find(id); it != names.end()) return it->second;
  return id.substr(0, id.find('_'));
}

// One functionResponse part for tool message history[index] (whose tool_call_id is present).
Result<Json> FunctionResponse(const Message& m, size_t index, const std::map<std::string, std::string>& names) {
  const std::string& id = *m.tool_call_id;
  std::string output;
  Json media = Json::array();
  for (const ContentPart& part : m.content) {
    if (const std::string* text = TextOf(part)) {
      output += *text;
    } else if (const auto* item = std::get_if<MediaPart>(&part); item != nullptr && item->kind != MediaKind::kVideo) {
      std::string data_mime, data;
      if (SplitDataUrl(item->url, &data_mime, &data)) {
        // Inline bytes (an MCP tool's image, say) go as inlineData: a data: URL is no fileUri Gemini can fetch
        // (kosong passes it as one).
        media.push_back({{"inlineData", {{"mimeType", data_mime}, {"data", data}}}});
        continue;
      }
      std::optional<std::string> mime = PythonMimeType(item->url);
      if (!mime) {
        return Status::InvalidArgument("gemini: history[" + std::to_string(index) + "] (tool result for " + id +
                                       "): Failed to determine mime type for file: " + ShortUrl(item->url));
      }
      media.push_back({{"fileData", {{"fileUri", item->url}, {"mimeType", *mime}}}});
    }
  }
  Json response = Json::object();
  response["name"] = FunctionNameFor(id, names);
  response["response"] = {{"output", std::move(output)}};
  response["parts"] = std::move(media);
  return Json{{"functionResponse", std::move(response)}};
}

// Packs tool messages history[begin, end) into one user turn of functionResponse parts. With `expected`
// (the ids of the calling turn history[begin - 1], in call order) the parts follow the calls' order and the
// run must answer each call exactly once; without (an orphaned result) the run is a single message.
Result<Json> ToolResultsTurn(const std::vector<Message>& history, size_t begin, size_t end,
                             const std::vector<std::string>* expected,
                             const std::map<std::string, std::string>& names) {
  std::map<std::string, size_t> rank;  // Call id -> position; a repeated id keeps its last position.
  if (expected != nullptr) {
    for (size_t k = 0; k < expected->size(); ++k) rank[(*expected)[k]] = k;
  }
  auto rank_of = [&](size_t index) {
    const std::optional<std::string>& id = history[index].tool_call_id;
    auto it = id ? rank.find(*id) : rank.end();
    return it == rank.end() ? SIZE_MAX : it->second;
  };
  std::vector<size_t> order;
  for (size_t k = begin; k < end; ++k) order.push_back(k);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rank_of(a) < rank_of(b); });

  Json parts = Json::array();
  std::vector<std::string> answered;  // In part order.
  for (size_t index : order) {
    const Message& m = history[index];
    std::string where = "gemini: history[" + std::to_string(index) + "]: ";
    if (!m.tool_call_id) return Status::InvalidArgument(where + "Tool response is missing `tool_call_id`.");
    if (std::find(answered.begin(), answered.end(), *m.tool_call_id) != answered.end()) {
      return Status::InvalidArgument(where + "Duplicate tool response for id: " + *m.tool_call_id);
    }
    answered.push_back(*m.tool_call_id);
    STRATA_ASSIGN_OR_RETURN(Json part, FunctionResponse(m, index, names));
    parts.push_back(std::move(part));
  }
  if (expected != nullptr) {
    std::vector<std::string> missing, extra;
    for (const std::string& id : *expected) {
      if (std::find(answered.begin(), answered.end(), id) == answered.end()) missing.push_back(id);
    }
    for (const std::string& id : answered) {
      if (rank.find(id) == rank.end()) extra.push_back(id);
    }
    std::string where = "gemini: the tool calls of history[" + std::to_string(begin - 1) + "] are answered by history[" +
                        std::to_string(begin) + ".." + std::to_string(end - 1) + "]: ";
    if (!missing.empty()) return Status::InvalidArgument(where + "Missing tool responses for ids: " + PyList(missing));
    if (!extra.empty()) return Status::InvalidArgument(where + "Unexpected tool responses for ids: " + PyList(extra));
  }
  return Json{{"role", "user"}, {"parts", std::move(parts)}};
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
      return EmbeddedError("gemini", "an error in a response the server answered with 200",
                           static_cast<int>(code < 400 || code > 599 ? 500 : code), ToJsonText(e));
    }
    std::string_view id = GetString(e, "responseId");
    if (!id.empty()) id_ = std::string(id);
    if (Get(e, "usageMetadata", &usage) && usage.is_object() && IsCount(usage, "promptTokenCount")) {
      int64_t prompt = GetCount(usage, "promptTokenCount");
      int64_t cached = std::min(GetCount(usage, "cachedContentTokenCount"), prompt);
      usage_ = TokenUsage{.input_other = Uncached(prompt, cached),
                          .output = GetCount(usage, "candidatesTokenCount") + GetCount(usage, "thoughtsTokenCount"),
                          .input_cache_read = cached};
    }
    if (Get(e, "promptFeedback", &error) && Has(error, "blockReason")) {
      complete_ = true;
      stop_reason_ = "prompt blocked: " + std::string(GetString(error, "blockReason"));
      if (std::string_view why = GetString(error, "blockReasonMessage"); !why.empty()) stop_reason_ += " (" + std::string(why) + ")";
    }
    if (!Get(e, "candidates", &candidates) || !candidates.is_array() || candidates.at(0).get(candidate)) {
      return Status::Ok();
    }
    if (Has(candidate, "finishReason")) {
      complete_ = true;
      stop_reason_ = std::string(GetString(candidate, "finishReason"));
      if (std::string_view why = GetString(candidate, "finishMessage"); !why.empty()) stop_reason_ += ": " + std::string(why);
    }
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
        if (signature && !signature->empty()) {
          std::string extras = "{\"thought_signature_b64\":";
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

  std::map<std::string, std::string> names;  // tool_call_id -> function name, from every calling turn so far
  Json contents = Json::array();
  const std::vector<Message>& history = request.history;
  size_t i = 0;
  while (i < history.size()) {
    const Message& m = history[i];
    if (m.role == Role::kTool) {
      // Not right after a calling turn (a truncated history): converted on its own, as kosong does.
      STRATA_ASSIGN_OR_RETURN(Json turn, ToolResultsTurn(history, i, i + 1, nullptr, names));
      contents.push_back(std::move(turn));
      ++i;
      continue;
    }
    Json parts = Json::array();
    if (m.role == Role::kSystem) {
      parts.push_back({{"text", "<system>" + m.ExtractText("\n") + "</system>"}});
    } else if (m.role == Role::kUser) {
      AppendUserParts(m, &parts);
    } else {
      // Think parts are never sent back (kosong drops them: Gemini's thought text is synthetic).
      for (const ContentPart& part : m.content) {
        if (const std::string* text = TextOf(part)) {
          if (!text->empty()) parts.push_back({{"text", *text}});
        }
      }
      if (m.tool_calls) {
        for (const ToolCall& call : *m.tool_calls) {
          names[call.id] = call.function.name;
          Json part{{"functionCall", {{"name", call.function.name}, {"args", ArgumentsObject(call.function.arguments)}}}};
          if (auto signature = ThoughtSignature(call)) part["thoughtSignature"] = *signature;
          parts.push_back(std::move(part));
        }
      }
    }
    if (!parts.empty()) {
      contents.push_back({{"role", m.role == Role::kAssistant ? "model" : "user"}, {"parts", std::move(parts)}});
    }
    ++i;
    if (m.role != Role::kAssistant || !m.tool_calls || m.tool_calls->empty()) continue;
    // The tool messages right after a calling turn answer it: one user turn, in call order, every call
    // answered exactly once. A calling turn followed by no tool message (still pending) is sent as it is.
    size_t end = i;
    while (end < history.size() && history[end].role == Role::kTool) ++end;
    if (end == i) continue;
    std::vector<std::string> expected;
    for (const ToolCall& call : *m.tool_calls) expected.push_back(call.id);
    STRATA_ASSIGN_OR_RETURN(Json turn, ToolResultsTurn(history, i, end, &expected, names));
    contents.push_back(std::move(turn));
    i = end;
  }

  Json body = Json::object();
  body["contents"] = std::move(contents);
  if (!request.system_prompt.empty()) {
    body["systemInstruction"] = {{"parts", Json::array({{{"text", request.system_prompt}}})}, {"role", "user"}};
  }
  if (!request.tools.empty()) {
    // The JSON Schema goes unchanged as parametersJsonSchema (which takes standard JSON Schema: $schema,
    // additionalProperties, $ref and all), as in kosong.
    Json declarations = Json::array();
    for (const ToolDeclaration& tool : request.tools) {
      STRATA_ASSIGN_OR_RETURN(Json parameters, ParseToolParameters(tool));
      declarations.push_back(
          {{"name", tool.name}, {"description", tool.description}, {"parametersJsonSchema", std::move(parameters)}});
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
