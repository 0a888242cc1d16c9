#include "strata/session/chat_export.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>
#include <set>
#include <unordered_map>

#include "strata/json/checked.h"
#include "strata/log/log_reader.h"
#include "strata/memory/hash.h"
#include "strata/message/message_json.h"
#include "strata/util/file_system.h"
#include "strata/util/utf8.h"
#include "strata/util/memory_file_system.h"
#include "session_common.h"

namespace strata::session {
namespace {

using nlohmann::json;

int64_t SecondsToMs(const json* seconds) {
  if (seconds == nullptr || !seconds->is_number()) return 0;
  double s = seconds->get<double>();
  if (!std::isfinite(s) || s < 0 || s > 1e11) return 0;  // Past the year 5000: not a time.
  return static_cast<int64_t>(std::llround(s * 1000));
}

int64_t IsoToMs(const json& j, std::string_view key) {
  int64_t ms = 0;
  std::string text = strata::json::StringOr(j, key);
  return ParseIsoTimeMs(text, &ms) ? ms : 0;
}

std::string Where(std::string_view name, size_t index, std::string_view title) {
  std::string where = std::string(name) + "[" + std::to_string(index) + "]";
  title = title.substr(0, Utf8Prefix(title, 80));  // At a character boundary: `where` may end up in JSON.
  if (!title.empty()) where += " (" + std::string(title) + ")";
  return where;
}

// The content hash of a conversation's messages: the id of a conversation whose format has none.
std::string ContentId(const std::vector<Message>& messages) {
  std::string all;
  for (const Message& m : messages) AppendMessageJson(m, &all), all += '\n';
  return memory::HashHex(all).substr(0, 32);
}

// ---- ChatGPT ----

// The visible text of one ChatGPT message, or "" when it is not part of the transcript.
std::string ChatGptText(const json& message) {
  const json* meta = strata::json::Field(message, "metadata");
  if (meta != nullptr && (strata::json::BoolOr(*meta, "is_visually_hidden_from_conversation", false) ||
                          strata::json::BoolOr(*meta, "is_user_system_message", false))) {
    return "";
  }
  // An assistant message addressed to a tool (python, browser, canvas) is tool traffic.
  std::string recipient = strata::json::StringOr(message, "recipient", "all");
  if (recipient != "all") return "";
  const json* content = strata::json::Field(message, "content");
  if (content == nullptr || !content->is_object()) return "";
  std::string type = strata::json::StringOr(*content, "content_type");
  if (type != "text" && type != "multimodal_text") return "";  // code, execution_output, thoughts, ...
  const json* parts = strata::json::Field(*content, "parts");
  if (parts == nullptr || !parts->is_array()) return "";
  std::string text;
  for (const json& part : *parts) {
    if (!part.is_string() || part.get_ref<const std::string&>().empty()) continue;  // Images are objects.
    if (!text.empty()) text += "\n";
    text += part.get_ref<const std::string&>();
  }
  return text;
}

Status ReadChatGptConversation(const json& conv, ImportedConversation* out) {
  const json* mapping = strata::json::Field(conv, "mapping");
  if (mapping == nullptr || !mapping->is_object()) return Status::InvalidArgument("\"mapping\" is not an object");
  std::string id = strata::json::StringOr(conv, "conversation_id", strata::json::StringOr(conv, "id"));
  if (id.empty()) return Status::InvalidArgument("no \"id\" or \"conversation_id\"");
  // As it is stored (a NUL becomes U+FFFD): a re-import compares the stored origin with this one, and a
  // raw id never matched its stored form, so every re-import made another copy of the conversation.
  out->source_id = internal::StorableText("chatgpt-" + id);
  out->title = strata::json::StringOr(conv, "title");
  out->created_ms = SecondsToMs(strata::json::Field(conv, "create_time"));
  out->updated_ms = SecondsToMs(strata::json::Field(conv, "update_time"));
  // The current branch: from current_node up through the parents (a cycle or a dangling parent ends it),
  // then reversed. Without current_node, the leaf whose message is newest.
  std::string node = strata::json::StringOr(conv, "current_node");
  if (node.empty() || !mapping->contains(node)) {
    double newest = -1;
    for (const auto& [key, value] : mapping->items()) {
      const json* children = strata::json::Field(value, "children");
      if (children != nullptr && children->is_array() && !children->empty()) continue;
      const json* message = strata::json::Field(value, "message");
      const json* time = message != nullptr ? strata::json::Field(*message, "create_time") : nullptr;
      double t = time != nullptr && time->is_number() ? time->get<double>() : 0;
      if (t > newest) newest = t, node = key;
    }
  }
  std::vector<const json*> branch;
  std::set<std::string> seen;
  while (!node.empty() && seen.insert(node).second) {
    const json* entry = strata::json::Field(*mapping, node);
    if (entry == nullptr || !entry->is_object()) break;
    branch.push_back(entry);
    node = strata::json::StringOr(*entry, "parent");
  }
  std::reverse(branch.begin(), branch.end());
  for (const json* entry : branch) {
    const json* message = strata::json::Field(*entry, "message");
    if (message == nullptr || !message->is_object()) continue;  // The root.
    const json* author = strata::json::Field(*message, "author");
    std::string role = author != nullptr ? strata::json::StringOr(*author, "role") : "";
    if (role != "user" && role != "assistant") continue;  // system scaffolding, tool output
    std::string text = ChatGptText(*message);
    if (text.empty()) continue;
    out->messages.push_back(role == "user" ? Message::User(std::move(text)) : Message::Assistant(std::move(text)));
  }
  return Status::Ok();
}

// ---- Claude ----

std::string ClaudeText(const json& message) {
  std::string text;
  const json* content = strata::json::Field(message, "content");
  if (content != nullptr && content->is_array()) {
    for (const json& block : *content) {
      if (strata::json::StringOr(block, "type") != "text") continue;  // thinking, tool_use, tool_result
      std::string t = strata::json::StringOr(block, "text");
      if (t.empty()) continue;
      if (!text.empty()) text += "\n";
      text += t;
    }
  }
  if (text.empty()) text = strata::json::StringOr(message, "text");
  // Attachments are named, not copied (their extracted text can be whole documents).
  const json* attachments = strata::json::Field(message, "attachments");
  if (attachments != nullptr && attachments->is_array()) {
    for (const json& a : *attachments) {
      std::string file = strata::json::StringOr(a, "file_name");
      if (!file.empty()) text += std::string(text.empty() ? "" : "\n") + "[attached: " + file + "]";
    }
  }
  return text;
}

Status ReadClaudeConversation(const json& conv, ImportedConversation* out) {
  const json* messages = strata::json::Field(conv, "chat_messages");
  if (messages == nullptr || !messages->is_array()) return Status::InvalidArgument("\"chat_messages\" is not an array");
  std::string id = strata::json::StringOr(conv, "uuid");
  if (id.empty()) return Status::InvalidArgument("no \"uuid\"");
  out->source_id = internal::StorableText("claude-" + id);  // As stored (see ChatGPT's).
  out->title = strata::json::StringOr(conv, "name");
  out->created_ms = IsoToMs(conv, "created_at");
  out->updated_ms = IsoToMs(conv, "updated_at");
  // With parent_message_uuid, edits and regenerations sit side by side in the array: the current branch
  // is the chain ending at the newest message that no other message continues. Without, the array order.
  std::unordered_map<std::string, const json*> by_id;
  std::set<std::string> parents;
  bool chained = false;
  for (const json& m : *messages) {
    std::string uuid = strata::json::StringOr(m, "uuid");
    std::string parent = strata::json::StringOr(m, "parent_message_uuid");
    if (!uuid.empty()) by_id[uuid] = &m;
    if (!parent.empty()) chained = true, parents.insert(parent);
  }
  std::vector<const json*> order;
  if (chained) {
    const json* leaf = nullptr;
    int64_t newest = -1;
    for (const json& m : *messages) {
      if (parents.count(strata::json::StringOr(m, "uuid")) != 0) continue;
      int64_t t = IsoToMs(m, "created_at");
      if (t >= newest) newest = t, leaf = &m;
    }
    if (leaf == nullptr) {
      // Every message is another's parent: the links form a cycle. The chain ends at the newest message and,
      // as in a ChatGPT export, at the first message it reaches twice.
      for (const json& m : *messages) {
        int64_t t = IsoToMs(m, "created_at");
        if (t >= newest) newest = t, leaf = &m;
      }
    }
    std::set<std::string> seen;
    for (const json* m = leaf; m != nullptr;) {
      std::string uuid = strata::json::StringOr(*m, "uuid");
      if (!seen.insert(uuid).second) break;
      order.push_back(m);
      auto it = by_id.find(strata::json::StringOr(*m, "parent_message_uuid"));
      m = it == by_id.end() ? nullptr : it->second;
    }
    std::reverse(order.begin(), order.end());
  } else {
    for (const json& m : *messages) order.push_back(&m);
  }
  for (const json* m : order) {
    std::string sender = strata::json::StringOr(*m, "sender");
    if (sender != "human" && sender != "assistant") continue;
    std::string text = ClaudeText(*m);
    if (text.empty()) continue;
    out->messages.push_back(sender == "human" ? Message::User(std::move(text)) : Message::Assistant(std::move(text)));
  }
  return Status::Ok();
}

Result<ChatExport> ParseConversationArray(std::string_view bytes, ChatExportFormat format, std::string_view name) {
  // Depth-limited: the value is copied and walked recursively below.
  json all = strata::json::ParseOrDiscard<json>(bytes);
  // A lone surrogate (a cut emoji) in one message refused the whole export: it is read as U+FFFD.
  if (all.is_discarded()) all = strata::json::ParseOrDiscard<json>(strata::json::ReplaceLoneSurrogateEscapes(bytes));
  if (all.is_discarded()) {
    return Status::InvalidArgument(std::string(name) + ": " + strata::json::DescribeSyntaxError(bytes));
  }
  if (const json* wrapped = strata::json::Field(all, "conversations"); wrapped != nullptr) all = *wrapped;
  if (!all.is_array()) {
    return Status::InvalidArgument(std::string(name) + ": expected an array of conversations, found " +
                                   std::string(strata::json::TypeName(all)));
  }
  ChatExport out;
  for (size_t i = 0; i < all.size(); ++i) {
    const json& conv = all[i];
    std::string title = strata::json::StringOr(conv, format == ChatExportFormat::kChatGpt ? "title" : "name");
    if (!conv.is_object()) {
      out.skipped.push_back({Where(name, i, ""), "not an object but " + std::string(strata::json::TypeName(conv))});
      continue;
    }
    ImportedConversation c;
    Status s = format == ChatExportFormat::kChatGpt ? ReadChatGptConversation(conv, &c) : ReadClaudeConversation(conv, &c);
    if (!s.ok()) {
      out.skipped.push_back({Where(name, i, title), s.message()});
    } else if (c.messages.empty()) {
      out.skipped.push_back({Where(name, i, title), "no user or assistant text on its current branch"});
    } else {
      out.conversations.push_back(std::move(c));
    }
  }
  return out;
}

// ---- JSON Lines ----

Result<ChatExport> ParseOpenAiJsonl(std::string_view bytes, std::string_view name) {
  ChatExport out;
  std::vector<Message> whole;  // Lines that are messages: one conversation.
  std::string whole_error;
  size_t line_no = 0;
  for (size_t pos = 0; pos < bytes.size();) {
    size_t end = bytes.find('\n', pos);
    if (end == std::string_view::npos) end = bytes.size();
    std::string_view line = bytes.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (line_no == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);  // A byte-order mark.
    if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
    std::string where = std::string(name) + " line " + std::to_string(line_no);
    json j = strata::json::ParseOrDiscard<json>(line);
    std::string repaired;
    if (j.is_discarded()) {
      repaired = strata::json::ReplaceLoneSurrogateEscapes(line);
      j = strata::json::ParseOrDiscard<json>(repaired);
      if (!j.is_discarded()) line = repaired;
    }
    if (j.is_discarded() || !j.is_object()) {
      out.skipped.push_back({where, j.is_discarded() ? strata::json::DescribeSyntaxError(line) : "not an object"});
      continue;
    }
    if (const json* messages = strata::json::Field(j, "messages"); messages != nullptr) {
      Result<std::vector<Message>> parsed = messages->is_array() ? ParseMessages(messages->dump())
                                                                 : Status::InvalidArgument("\"messages\" is not an array");
      if (!parsed.ok()) {
        out.skipped.push_back({where, parsed.status().message()});
      } else if (parsed->empty()) {
        out.skipped.push_back({where, "no messages"});
      } else {
        ImportedConversation c{.source_id = "jsonl-" + ContentId(*parsed), .messages = std::move(*parsed)};
        out.conversations.push_back(std::move(c));
      }
      continue;
    }
    Result<Message> message = ParseMessage(line);
    if (!message.ok()) {
      out.skipped.push_back({where, message.status().message()});
      continue;
    }
    whole.push_back(std::move(*message));
  }
  if (!whole.empty()) {
    ImportedConversation c{.source_id = "jsonl-" + ContentId(whole), .messages = std::move(whole)};
    out.conversations.push_back(std::move(c));
  }
  return out;
}

}  // namespace

Result<ChatExportFormat> ParseChatExportFormat(std::string_view name) {
  if (name == "chatgpt") return ChatExportFormat::kChatGpt;
  if (name == "claude") return ChatExportFormat::kClaude;
  if (name == "kimi") return ChatExportFormat::kKimi;
  if (name == "openai-jsonl") return ChatExportFormat::kOpenAiJsonl;
  return Status::InvalidArgument("unknown chat export format \"" + std::string(name) +
                                 "\" (expected chatgpt, claude, kimi or openai-jsonl)");
}

std::string_view ChatExportFormatName(ChatExportFormat format) {
  switch (format) {
    case ChatExportFormat::kChatGpt: return "chatgpt";
    case ChatExportFormat::kClaude: return "claude";
    case ChatExportFormat::kKimi: return "kimi";
    case ChatExportFormat::kOpenAiJsonl: return "openai-jsonl";
  }
  return "unknown";
}

Result<ChatExport> ParseChatExport(std::string_view bytes, ChatExportFormat format, std::string_view name) {
  switch (format) {
    case ChatExportFormat::kChatGpt:
    case ChatExportFormat::kClaude:
      return ParseConversationArray(bytes, format, name);
    case ChatExportFormat::kOpenAiJsonl:
      return ParseOpenAiJsonl(bytes, name);
    case ChatExportFormat::kKimi:
      break;
  }
  // kimi-cli's log reader reads files: the bytes become one, in memory.
  MemoryFileSystem memory;
  std::string_view base = name.substr(name.find_last_of('/') == std::string_view::npos ? 0 : name.find_last_of('/') + 1);
  const std::string path = "/" + std::string(base.empty() ? "context.jsonl" : base);
  memory.SetFileDurably(path, bytes);
  return ReadChatExport(path, format, &memory);
}

Result<ChatExport> ReadChatExport(const std::string& path, ChatExportFormat format, FileSystem* fs) {
  if (fs == nullptr) fs = PosixFileSystem();
  std::string name = path.substr(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/') + 1);
  if (format != ChatExportFormat::kKimi) {
    STRATA_ASSIGN_OR_RETURN(std::string bytes, fs->ReadFileToString(path));
    return ParseChatExport(bytes, format, name);
  }
  // kimi-cli's context.jsonl: its messages in order (a system prompt record becomes the first message);
  // damaged lines are reported and skipped, as a restore does.
  ChatExport out;
  std::vector<Message> messages;
  std::optional<Message> system;
  STRATA_ASSIGN_OR_RETURN(ScanSummary summary,
                          ScanLog(fs, path, LogFormat::kContext, [&](const LogLine&, LogRecord& record) -> Status {
                            if (record.kind == LogRecord::Kind::kMessage) messages.push_back(std::move(record.message));
                            if (record.kind == LogRecord::Kind::kSystemPrompt) system = Message::System(record.text);
                            return Status::Ok();
                          }));
  // A line with text that is not Unicode (invalid UTF-8, a lone surrogate escape) is kept with U+FFFD in its
  // place (its damage says so); others are left out.
  for (const Damage& d : summary.damage) {
    out.skipped.push_back({name + " " + d.ToString(),
                           d.kind == DamageKind::kInvalidUtf8 ? "damaged line, kept with U+FFFD in place of what is not Unicode"
                                                              : "damaged line, left out"});
  }
  if (system) messages.insert(messages.begin(), std::move(*system));
  if (messages.empty()) {
    out.skipped.push_back({name, "no messages"});
    return out;
  }
  ImportedConversation c{.source_id = "kimi-" + ContentId(messages), .messages = std::move(messages)};
  out.conversations.push_back(std::move(c));
  return out;
}

bool ParseIsoTimeMs(std::string_view text, int64_t* ms) {
  // YYYY-MM-DDTHH:MM:SS[.fraction][Z|±HH:MM]
  auto number = [&](size_t at, size_t len, int* out) {
    if (at + len > text.size()) return false;
    auto [p, ec] = std::from_chars(text.data() + at, text.data() + at + len, *out);
    return ec == std::errc() && p == text.data() + at + len;
  };
  int year = 0, month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (text.size() < 19 || text[4] != '-' || text[7] != '-' || (text[10] != 'T' && text[10] != ' ') ||
      text[13] != ':' || text[16] != ':' || !number(0, 4, &year) || !number(5, 2, &month) || !number(8, 2, &day) ||
      !number(11, 2, &hour) || !number(14, 2, &minute) || !number(17, 2, &second)) {
    return false;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) return false;
  size_t i = 19;
  int64_t millis = 0;
  if (i < text.size() && text[i] == '.') {
    int64_t scale = 100;
    for (++i; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i, scale /= 10) millis += (text[i] - '0') * scale;
  }
  int64_t offset_minutes = 0;
  if (i < text.size()) {
    if (text[i] == 'Z' && i + 1 == text.size()) {
      ++i;
    } else if ((text[i] == '+' || text[i] == '-') && text.size() == i + 6 && text[i + 3] == ':') {
      int oh = 0, om = 0;
      if (!number(i + 1, 2, &oh) || !number(i + 4, 2, &om) || oh > 23 || om > 59) return false;
      offset_minutes = (text[i] == '+' ? 1 : -1) * (oh * 60 + om);
      i = text.size();
    } else {
      return false;
    }
  }
  std::tm tm{};
  tm.tm_year = year - 1900;
  tm.tm_mon = month - 1;
  tm.tm_mday = day;
  tm.tm_hour = hour;
  tm.tm_min = minute;
  tm.tm_sec = second;
  *ms = (static_cast<int64_t>(timegm(&tm)) - offset_minutes * 60) * 1000 + millis;
  return true;
}

}  // namespace strata::session
