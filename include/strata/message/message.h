// The vendor-neutral message model, compatible with kosong's `Message` JSON.
//
// A Message has a role, optional name, a list of content parts (text, thinking, image/audio/video URLs, or a
// registered extension type), optional tool calls (assistant turns) and an optional tool_call_id (tool
// results). Streaming providers emit StreamedParts that stream_merge.h folds into one Message.
//
// Thread safety: value types; no shared state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace strata {

enum class Role { kSystem, kUser, kAssistant, kTool };

// Returns "system", "user", "assistant" or "tool".
std::string_view RoleName(Role role);

struct TextPart {
  std::string text;
  bool operator==(const TextPart&) const = default;
};

// Model reasoning. `encrypted` is the provider's signature (Anthropic) or opaque reasoning blob; once a
// streamed think part carries it, the part is closed.
struct ThinkPart {
  std::string think;
  std::optional<std::string> encrypted;
  bool operator==(const ThinkPart&) const = default;
};

enum class MediaKind { kImage, kAudio, kVideo };

// An image_url / audio_url / video_url part: a URL (http(s) or data:), an optional provider file id, and for
// an image the detail OpenAI's API reads ("low", "high", "auto"; absent: the API's default), written only
// when present.
struct MediaPart {
  MediaKind kind = MediaKind::kImage;
  std::string url;
  std::optional<std::string> id;
  std::optional<std::string> detail;
  bool operator==(const MediaPart&) const = default;
};

// A part of a type registered at run time (part_registry.h). `json` is the whole part object as compact
// canonical JSON, including its "type" key; it is written back verbatim.
struct CustomPart {
  std::string type;
  std::string json;
  bool operator==(const CustomPart&) const = default;
};

using ContentPart = std::variant<TextPart, ThinkPart, MediaPart, CustomPart>;

// Returns the part's wire type name ("text", "think", "image_url", ... or the custom type).
std::string_view PartTypeName(const ContentPart& part);

struct FunctionCall {
  std::string name;
  // The arguments as JSON text, exactly as the model produced them. Absent (null) is distinct from "".
  std::optional<std::string> arguments;
  bool operator==(const FunctionCall&) const = default;
};

struct ToolCall {
  std::string id;
  FunctionCall function;
  // Provider-specific extras (e.g. Gemini thought signatures) as compact canonical JSON text, or absent.
  std::optional<std::string> extras;
  // The provider's position for this call in a streamed response (OpenAI's `index`). Only used while
  // merging a stream; never serialised.
  std::optional<int> index;
  bool operator==(const ToolCall&) const = default;
};

// A streamed fragment of a tool call's arguments. With `index`, it belongs to the call with that index;
// without, to the call being streamed.
struct ToolCallPart {
  std::optional<std::string> arguments_part;
  std::optional<int> index;
  bool operator==(const ToolCallPart&) const = default;
};

// What a streaming provider yields.
using StreamedPart = std::variant<ContentPart, ToolCall, ToolCallPart>;

struct Message {
  Role role = Role::kUser;
  std::optional<std::string> name;
  std::vector<ContentPart> content;
  std::optional<std::vector<ToolCall>> tool_calls;  // Absent is distinct from an empty list.
  std::optional<std::string> tool_call_id;
  std::optional<bool> partial;

  // Returns the text parts joined by `sep` (thinking and media are not text).
  std::string ExtractText(std::string_view sep = "") const;

  // Convenience constructors for the common shapes.
  static Message System(std::string text);
  static Message User(std::string text);
  static Message Assistant(std::string text);
  static Message ToolResult(std::string tool_call_id, std::string text);

  bool operator==(const Message&) const = default;
};

static_assert(std::is_nothrow_move_constructible_v<Message>, "vectors of messages must move, not copy, them");

// Token usage as providers report it. `input_other` excludes cached input.
struct TokenUsage {
  int64_t input_other = 0;
  int64_t output = 0;
  int64_t input_cache_read = 0;
  int64_t input_cache_creation = 0;

  // Returns all input tokens: other + cache read + cache creation.
  int64_t input() const { return input_other + input_cache_read + input_cache_creation; }
  // Returns input() + output.
  int64_t total() const { return input() + output; }
  bool operator==(const TokenUsage&) const = default;
};

}  // namespace strata
