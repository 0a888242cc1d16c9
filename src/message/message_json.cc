#include "strata/message/message_json.h"

#include <string>

#include "json_dom.h"
#include "message_json_internal.h"
#include "strata/json/json_writer.h"
#include "strata/message/part_registry.h"

namespace strata {
namespace internal {
namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;
using simdjson::dom::object;

// A location inside the message being parsed ("content[2].image_url.url"), built into a string only when
// an error is reported: the success path allocates nothing for it.
struct Path {
  Path(const char* k) : key(k) {}  // NOLINT: implicit for top-level names.
  Path(const Path* p, std::string_view k, int i = -1) : parent(p), key(k), index(i) {}
  std::string str() const {
    std::string s = parent ? parent->str() : std::string();
    if (!key.empty()) {
      if (!s.empty()) s += '.';
      s.append(key);
    }
    if (index >= 0) s += "[" + std::to_string(index) + "]";
    return s;
  }
  const Path* parent = nullptr;
  std::string_view key;
  int index = -1;
};

Status TypeError(const Path& path, std::string_view expected, element got) {
  return Status::InvalidArgument(path.str() + ": expected " + std::string(expected) + ", got " +
                                 std::string(json::TypeName(got)));
}

Status ReadString(element e, const Path& path, std::string* out) {
  if (e.type() != element_type::STRING) return TypeError(path, "string", e);
  out->assign(e.get_string().value_unsafe());
  return Status::Ok();
}

Status ReadOptionalString(element e, const Path& path, std::optional<std::string>* out) {
  if (e.type() == element_type::NULL_VALUE) {
    out->reset();
    return Status::Ok();
  }
  if (e.type() != element_type::STRING) return TypeError(path, "string or null", e);
  out->emplace(e.get_string().value_unsafe());
  return Status::Ok();
}

Status MissingKey(const Path& path, std::string_view key) {
  return Status::InvalidArgument(Path(&path, key).str() + ": required field missing");
}

Path Sub(const Path& path, std::string_view key) { return Path(&path, key); }

Status MediaFromObject(object obj, MediaKind kind, std::string_view key, const Path& path,
                       MediaPart* out) {
  out->kind = kind;
  bool seen = false;
  for (auto field : obj) {
    if (field.key != key) continue;
    Path sub = Sub(path, key);
    if (field.value.type() != element_type::OBJECT) return TypeError(sub, "object", field.value);
    bool have_url = false;
    out->id.reset();
    out->detail.reset();
    for (auto inner : json::AsObject(field.value)) {
      if (inner.key == "url") {
        STRATA_RETURN_IF_ERROR(ReadString(inner.value, Sub(sub, "url"), &out->url));
        have_url = true;
      } else if (inner.key == "id") {
        STRATA_RETURN_IF_ERROR(ReadOptionalString(inner.value, Sub(sub, "id"), &out->id));
      } else if (inner.key == "detail") {
        STRATA_RETURN_IF_ERROR(ReadOptionalString(inner.value, Sub(sub, "detail"), &out->detail));
      }
    }
    if (!have_url) return MissingKey(sub, "url");
    seen = true;
  }
  if (!seen) return MissingKey(path, key);
  return Status::Ok();
}

Status PartFromElement(element e, const Path& path, ContentPart* out) {
  if (e.type() != element_type::OBJECT) return TypeError(path, "object (a content part)", e);
  object obj = json::AsObject(e);
  std::string_view type;
  bool have_type = false;
  for (auto field : obj) {
    if (field.key == "type") {
      if (field.value.type() != element_type::STRING) return TypeError(Sub(path, "type"), "string", field.value);
      type = field.value.get_string().value_unsafe();
      have_type = true;
    }
  }
  if (!have_type) return MissingKey(path, "type");
  if (type == "text") {
    TextPart part;
    bool have = false;
    for (auto field : obj) {
      if (field.key == "text") {
        STRATA_RETURN_IF_ERROR(ReadString(field.value, Sub(path, "text"), &part.text));
        have = true;
      }
    }
    if (!have) return MissingKey(path, "text");
    *out = std::move(part);
    return Status::Ok();
  }
  if (type == "think") {
    ThinkPart part;
    bool have = false;
    for (auto field : obj) {
      if (field.key == "think") {
        STRATA_RETURN_IF_ERROR(ReadString(field.value, Sub(path, "think"), &part.think));
        have = true;
      } else if (field.key == "encrypted") {
        STRATA_RETURN_IF_ERROR(ReadOptionalString(field.value, Sub(path, "encrypted"), &part.encrypted));
      }
    }
    if (!have) return MissingKey(path, "think");
    *out = std::move(part);
    return Status::Ok();
  }
  if (type == "image_url" || type == "audio_url" || type == "video_url") {
    MediaKind kind = type == "image_url" ? MediaKind::kImage : type == "audio_url" ? MediaKind::kAudio : MediaKind::kVideo;
    MediaPart part;
    STRATA_RETURN_IF_ERROR(MediaFromObject(obj, kind, type, path, &part));
    *out = std::move(part);
    return Status::Ok();
  }
  if (!IsKnownContentPartType(type)) {
    std::string known;
    for (const std::string& t : KnownContentPartTypes()) known += (known.empty() ? "" : ", ") + t;
    return Status::InvalidArgument(Sub(path, "type").str() + ": unknown content part type " + json::QuoteForError(type) +
                                   " (known: " + known + ")");
  }
  CustomPart part;
  part.type.assign(type);
  json::AppendCanonical(&part.json, e);
  Status valid = ValidateCustomPart(part.type, part.json);
  if (!valid.ok()) return Status::InvalidArgument(path.str() + ": " + valid.message());
  *out = std::move(part);
  return Status::Ok();
}

Status FunctionFromElement(element e, const Path& path, FunctionCall* out) {
  if (e.type() != element_type::OBJECT) return TypeError(path, "object", e);
  bool have_name = false;
  out->arguments.reset();
  for (auto field : json::AsObject(e)) {
    if (field.key == "name") {
      STRATA_RETURN_IF_ERROR(ReadString(field.value, Sub(path, "name"), &out->name));
      have_name = true;
    } else if (field.key == "arguments") {
      STRATA_RETURN_IF_ERROR(ReadOptionalString(field.value, Sub(path, "arguments"), &out->arguments));
    }
  }
  if (!have_name) return MissingKey(path, "name");
  return Status::Ok();
}

Status ReadIndex(element e, const Path& path, std::optional<int>* out) {
  if (e.type() == element_type::NULL_VALUE) {
    out->reset();
    return Status::Ok();
  }
  if (e.type() != element_type::INT64 && e.type() != element_type::UINT64) return TypeError(path, "integer", e);
  int64_t v = e.type() == element_type::INT64 ? e.get_int64().value_unsafe()
                                              : static_cast<int64_t>(e.get_uint64().value_unsafe());
  if (v < 0 || v > 1'000'000) return Status::InvalidArgument(path.str() + ": index out of range: " + std::to_string(v));
  *out = static_cast<int>(v);
  return Status::Ok();
}

Status ToolCallFromElement(element e, const Path& path, ToolCall* out) {
  if (e.type() != element_type::OBJECT) return TypeError(path, "object (a tool call)", e);
  bool have_id = false, have_function = false;
  for (auto field : json::AsObject(e)) {
    if (field.key == "type") {
      std::string type;
      STRATA_RETURN_IF_ERROR(ReadString(field.value, Sub(path, "type"), &type));
      if (type != "function") {
        return Status::InvalidArgument(Sub(path, "type").str() + ": expected \"function\", got " + json::QuoteForError(type));
      }
    } else if (field.key == "id") {
      STRATA_RETURN_IF_ERROR(ReadString(field.value, Sub(path, "id"), &out->id));
      have_id = true;
    } else if (field.key == "function") {
      STRATA_RETURN_IF_ERROR(FunctionFromElement(field.value, Sub(path, "function"), &out->function));
      have_function = true;
    } else if (field.key == "extras") {
      if (field.value.type() == element_type::NULL_VALUE) {
        out->extras.reset();
      } else if (field.value.type() != element_type::OBJECT) {
        return TypeError(Sub(path, "extras"), "object or null", field.value);
      } else {
        std::string extras;
        json::AppendCanonical(&extras, field.value);
        out->extras = std::move(extras);
      }
    } else if (field.key == "index") {
      STRATA_RETURN_IF_ERROR(ReadIndex(field.value, Sub(path, "index"), &out->index));
    }
  }
  if (!have_id) return MissingKey(path, "id");
  if (!have_function) return MissingKey(path, "function");
  return Status::Ok();
}

bool ParseRole(std::string_view s, Role* role) {
  if (s == "user") *role = Role::kUser;
  else if (s == "assistant") *role = Role::kAssistant;
  else if (s == "tool") *role = Role::kTool;
  else if (s == "system") *role = Role::kSystem;
  else return false;
  return true;
}

}  // namespace

Status MessageFromElement(element e, Message* out) {
  if (e.type() != element_type::OBJECT) return TypeError("message", "object", e);
  *out = Message();
  bool have_role = false, have_content = false;
  for (auto field : json::AsObject(e)) {
    std::string_view key = field.key;
    element v = field.value;
    if (key == "role") {
      if (v.type() != element_type::STRING) return TypeError("role", "string", v);
      std::string_view role = v.get_string().value_unsafe();
      if (!ParseRole(role, &out->role)) {
        return Status::InvalidArgument("role: expected one of system, user, assistant, tool; got " +
                                       json::QuoteForError(role));
      }
      have_role = true;
    } else if (key == "content") {
      have_content = true;
      out->content.clear();
      if (v.type() == element_type::STRING) {
        out->content.emplace_back(TextPart{std::string(v.get_string().value_unsafe())});
      } else if (v.type() == element_type::ARRAY) {
        size_t i = 0;
        for (element part : json::AsArray(v)) {
          ContentPart parsed;
          STRATA_RETURN_IF_ERROR(PartFromElement(part, Path(nullptr, "content", static_cast<int>(i)), &parsed));
          out->content.push_back(std::move(parsed));
          ++i;
        }
      } else if (v.type() != element_type::NULL_VALUE) {
        return TypeError("content", "string, array of parts or null", v);
      }
    } else if (key == "name") {
      STRATA_RETURN_IF_ERROR(ReadOptionalString(v, "name", &out->name));
    } else if (key == "tool_calls") {
      if (v.type() == element_type::NULL_VALUE) {
        out->tool_calls.reset();
      } else if (v.type() != element_type::ARRAY) {
        return TypeError("tool_calls", "array or null", v);
      } else {
        out->tool_calls.emplace();
        size_t i = 0;
        for (element call : json::AsArray(v)) {
          ToolCall parsed;
          STRATA_RETURN_IF_ERROR(ToolCallFromElement(call, Path(nullptr, "tool_calls", static_cast<int>(i)), &parsed));
          parsed.index.reset();  // Stream-only metadata never lives in a stored message.
          out->tool_calls->push_back(std::move(parsed));
          ++i;
        }
      }
    } else if (key == "tool_call_id") {
      STRATA_RETURN_IF_ERROR(ReadOptionalString(v, "tool_call_id", &out->tool_call_id));
    } else if (key == "partial") {
      if (v.type() == element_type::NULL_VALUE) {
        out->partial.reset();
      } else if (v.type() == element_type::BOOL) {
        out->partial = v.get_bool().value_unsafe();
      } else {
        return TypeError("partial", "boolean or null", v);
      }
    }
  }
  if (!have_role) return MissingKey("", "role");
  if (!have_content) return MissingKey("", "content");
  return Status::Ok();
}

Status StreamedPartFromElement(element e, StreamedPart* out) {
  if (e.type() != element_type::OBJECT) return TypeError("part", "object", e);
  object obj = json::AsObject(e);
  std::string_view type;
  bool have_type = false, have_fragment = false;
  for (auto field : obj) {
    if (field.key == "type" && field.value.type() == element_type::STRING) {
      type = field.value.get_string().value_unsafe();
      have_type = true;
    } else if (field.key == "arguments_part") {
      have_fragment = true;
    }
  }
  if (!have_type && have_fragment) {
    ToolCallPart part;
    for (auto field : obj) {
      if (field.key == "arguments_part") {
        STRATA_RETURN_IF_ERROR(ReadOptionalString(field.value, "arguments_part", &part.arguments_part));
      } else if (field.key == "index") {
        STRATA_RETURN_IF_ERROR(ReadIndex(field.value, "index", &part.index));
      }
    }
    *out = std::move(part);
    return Status::Ok();
  }
  if (have_type && type == "function") {
    ToolCall call;
    STRATA_RETURN_IF_ERROR(ToolCallFromElement(e, "tool_call", &call));
    *out = std::move(call);
    return Status::Ok();
  }
  ContentPart part;
  STRATA_RETURN_IF_ERROR(PartFromElement(e, "part", &part));
  *out = std::move(part);
  return Status::Ok();
}

simdjson::dom::parser& ThreadParser() {
  thread_local simdjson::dom::parser parser;
  return parser;
}

}  // namespace internal

namespace {

Result<simdjson::dom::element> ParseDom(std::string_view text, simdjson::padded_string* storage) {
  *storage = simdjson::padded_string(text);
  simdjson::dom::element root;
  if (internal::ThreadParser().parse(*storage).get(root) != simdjson::SUCCESS) {
    return Status::InvalidArgument(json::DescribeSyntaxError(text));
  }
  return root;
}

void AppendOptionalStringField(std::string* out, std::string_view key, const std::optional<std::string>& v) {
  out->push_back(',');
  json::AppendString(out, key);
  out->push_back(':');
  if (v) {
    json::AppendString(out, *v);
  } else {
    out->append("null");
  }
}

void AppendPart(const ContentPart& part, std::string* out) {
  if (const auto* custom = std::get_if<CustomPart>(&part)) {
    out->append(custom->json);
    return;
  }
  out->append("{\"type\":");
  json::AppendString(out, PartTypeName(part));
  if (const auto* text = std::get_if<TextPart>(&part)) {
    out->append(",\"text\":");
    json::AppendString(out, text->text);
  } else if (const auto* think = std::get_if<ThinkPart>(&part)) {
    out->append(",\"think\":");
    json::AppendString(out, think->think);
    AppendOptionalStringField(out, "encrypted", think->encrypted);
  } else if (const auto* media = std::get_if<MediaPart>(&part)) {
    out->push_back(',');
    json::AppendString(out, PartTypeName(part));
    out->append(":{\"url\":");
    json::AppendString(out, media->url);
    AppendOptionalStringField(out, "id", media->id);
    if (media->detail) {  // Absent when none was given: kosong's parts have no detail.
      out->append(",\"detail\":");
      json::AppendString(out, *media->detail);
    }
    out->push_back('}');
  }
  out->push_back('}');
}

void AppendToolCall(const ToolCall& call, std::string* out) {
  out->append("{\"type\":\"function\",\"id\":");
  json::AppendString(out, call.id);
  out->append(",\"function\":{\"name\":");
  json::AppendString(out, call.function.name);
  if (call.function.arguments) {
    out->append(",\"arguments\":");
    json::AppendString(out, *call.function.arguments);
  }
  out->push_back('}');
  if (call.extras) {
    out->append(",\"extras\":");
    out->append(*call.extras);
  }
  out->push_back('}');
}

void AppendMessage(const Message& message, bool collapse_single_text, std::string* out) {
  out->append("{\"role\":\"");
  out->append(RoleName(message.role));
  out->push_back('"');
  if (message.name) {
    out->append(",\"name\":");
    json::AppendString(out, *message.name);
  }
  out->append(",\"content\":");
  if (collapse_single_text && message.content.size() == 1 && std::holds_alternative<TextPart>(message.content[0])) {
    json::AppendString(out, std::get<TextPart>(message.content[0]).text);
  } else {
    out->push_back('[');
    for (size_t i = 0; i < message.content.size(); ++i) {
      if (i > 0) out->push_back(',');
      AppendPart(message.content[i], out);
    }
    out->push_back(']');
  }
  if (message.tool_calls) {
    out->append(",\"tool_calls\":[");
    for (size_t i = 0; i < message.tool_calls->size(); ++i) {
      if (i > 0) out->push_back(',');
      AppendToolCall((*message.tool_calls)[i], out);
    }
    out->push_back(']');
  }
  if (message.tool_call_id) {
    out->append(",\"tool_call_id\":");
    json::AppendString(out, *message.tool_call_id);
  }
  if (message.partial) out->append(*message.partial ? ",\"partial\":true" : ",\"partial\":false");
  out->push_back('}');
}


}  // namespace

Result<Message> ParseMessage(std::string_view json_text) {
  simdjson::padded_string storage;
  STRATA_ASSIGN_OR_RETURN(simdjson::dom::element root, ParseDom(json_text, &storage));
  Message message;
  Status s = internal::MessageFromElement(root, &message);
  if (!s.ok()) return s.WithContext("invalid message");
  return message;
}

Result<std::vector<Message>> ParseMessages(std::string_view json_text) {
  simdjson::padded_string storage;
  STRATA_ASSIGN_OR_RETURN(simdjson::dom::element root, ParseDom(json_text, &storage));
  std::vector<Message> out;
  if (root.type() == simdjson::dom::element_type::ARRAY) {
    size_t i = 0;
    for (simdjson::dom::element e : json::AsArray(root)) {
      Message message;
      Status s = internal::MessageFromElement(e, &message);
      if (!s.ok()) return s.WithContext("invalid message at index " + std::to_string(i));
      out.push_back(std::move(message));
      ++i;
    }
    return out;
  }
  Message message;
  Status s = internal::MessageFromElement(root, &message);
  if (!s.ok()) return s.WithContext("invalid message");
  out.push_back(std::move(message));
  return out;
}

Result<StreamedPart> ParseStreamedPart(std::string_view json_text) {
  simdjson::padded_string storage;
  STRATA_ASSIGN_OR_RETURN(simdjson::dom::element root, ParseDom(json_text, &storage));
  StreamedPart part;
  Status s = internal::StreamedPartFromElement(root, &part);
  if (!s.ok()) return s.WithContext("invalid streamed part");
  return part;
}

void AppendMessageJson(const Message& message, std::string* out) { AppendMessage(message, true, out); }

std::string MessageToJson(const Message& message) {
  std::string out;
  AppendMessage(message, true, &out);
  return out;
}

std::string MessageToJsonContentList(const Message& message) {
  std::string out;
  AppendMessage(message, false, &out);
  return out;
}

std::string ContentPartToJson(const ContentPart& part) {
  std::string out;
  AppendPart(part, &out);
  return out;
}

std::string FindInvalidUtf8(const Message& message) {
  // Validation runs on every append: the path of a bad string is only built once one is found.
  std::string bad;
  auto check = [&](std::string_view s, auto&& path) {
    size_t offset = 0;
    if (bad.empty() && !json::IsValidUtf8(s, &offset)) bad = path() + ": byte " + std::to_string(offset);
  };
  auto at = [](const char* field, size_t i, const char* sub) {
    return std::string(field) + "[" + std::to_string(i) + "]." + sub;
  };
  if (message.name) check(*message.name, [] { return std::string("name"); });
  for (size_t i = 0; i < message.content.size(); ++i) {
    const ContentPart& part = message.content[i];
    if (const auto* t = std::get_if<TextPart>(&part)) check(t->text, [&] { return at("content", i, "text"); });
    if (const auto* t = std::get_if<ThinkPart>(&part)) {
      check(t->think, [&] { return at("content", i, "think"); });
      if (t->encrypted) check(*t->encrypted, [&] { return at("content", i, "encrypted"); });
    }
    if (const auto* m = std::get_if<MediaPart>(&part)) {
      check(m->url, [&] { return at("content", i, "url"); });
      if (m->id) check(*m->id, [&] { return at("content", i, "id"); });
      if (m->detail) check(*m->detail, [&] { return at("content", i, "detail"); });
    }
  }
  if (message.tool_calls) {
    for (size_t i = 0; i < message.tool_calls->size(); ++i) {
      const ToolCall& c = (*message.tool_calls)[i];
      check(c.id, [&] { return at("tool_calls", i, "id"); });
      check(c.function.name, [&] { return at("tool_calls", i, "function.name"); });
      if (c.function.arguments) check(*c.function.arguments, [&] { return at("tool_calls", i, "function.arguments"); });
    }
  }
  if (message.tool_call_id) check(*message.tool_call_id, [] { return std::string("tool_call_id"); });
  return bad;
}

}  // namespace strata
