// Chat histories exported by other tools, read into conversations that can become Strata sessions
// (`strata session import`): the formats are described in docs/formats/chat-exports.md.
//
//   kChatGpt      ChatGPT's data export, conversations.json: an array of conversations, each a tree of
//                 messages (`mapping`) whose current branch ends at `current_node`.
//   kClaude       claude.ai's data export, conversations.json: an array of conversations with
//                 `chat_messages` (a chain through `parent_message_uuid` when present, else in order).
//   kKimi         kimi-cli's context.jsonl: one conversation (its checkpoints and usage marks are dropped).
//   kOpenAiJsonl  JSON Lines of OpenAI-format messages: one conversation per file, or one per line when each
//                 line is an object with a "messages" array (the fine-tuning layout).
//
// What is kept: the visible user and assistant text of the current branch, in order (and system prompts for
// the two JSONL formats). Hidden messages, tool traffic, reasoning and attachments' contents are dropped. Exports
// are untrusted: a conversation that cannot be read is skipped with its reason (which conversation, which
// field), never a crash, and the others are kept.
//
// Thread safety: the functions are thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "strata/message/message.h"
#include "strata/util/status.h"

namespace strata {
class FileSystem;
}

namespace strata::session {

enum class ChatExportFormat { kChatGpt, kClaude, kKimi, kOpenAiJsonl };

// "chatgpt", "claude", "kimi", "openai-jsonl"; kInvalidArgument naming the accepted names otherwise.
Result<ChatExportFormat> ParseChatExportFormat(std::string_view name);
std::string_view ChatExportFormatName(ChatExportFormat format);

struct ImportedConversation {
  // The export's own id (ChatGPT's conversation id, Claude's uuid), or for the JSONL formats the content
  // hash of the conversation: the same conversation imported twice has the same id.
  std::string source_id;
  std::string title;        // "" when the export has none.
  int64_t created_ms = 0;   // 0 when the export has no time.
  int64_t updated_ms = 0;
  std::vector<Message> messages;
};

struct SkippedConversation {
  std::string where;   // e.g. "conversations.json[3] (Pasta)" or "line 7".
  std::string reason;
};

struct ChatExport {
  std::vector<ImportedConversation> conversations;
  std::vector<SkippedConversation> skipped;
};

// Parses the bytes of an export in `format` (the bytes of a file, e.g. an HTTP request's). `name` names the
// file in `where`. kInvalidArgument when the whole file cannot be read as the format (not JSON, not an
// array).
Result<ChatExport> ParseChatExport(std::string_view bytes, ChatExportFormat format, std::string_view name);

// Reads `path` (through `fs`, PosixFileSystem() when nullptr) as `format`.
Result<ChatExport> ReadChatExport(const std::string& path, ChatExportFormat format, FileSystem* fs = nullptr);

// Parses an ISO 8601 date-time ("2026-01-06T21:03:50.592817Z", "+00:00" offsets, no zone = UTC) into
// milliseconds since the epoch; false when it is not one.
bool ParseIsoTimeMs(std::string_view text, int64_t* ms);

}  // namespace strata::session
