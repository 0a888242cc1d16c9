// Reading and writing Messages as JSON, byte-compatible with kosong (pydantic `model_dump_json`).
//
// Input rules: `content` may be a string (one text part) or null (no parts); unknown keys are ignored at
// every level; an unregistered part type, a wrong value type or a missing required key is an
// kInvalidArgument error naming the path inside the message (e.g. `content[2].image_url.url`).
// Output rules: compact, raw UTF-8; message-level nulls are omitted (`exclude_none`) while nulls inside
// content parts stay (`"encrypted":null`); a content list of exactly one text part is written as a string;
// a tool call's null `arguments` is omitted, and reading it back yields null again.
//
// Thread safety: all functions are thread-safe.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "strata/message/message.h"
#include "strata/util/status.h"

namespace strata {

// Parses one JSON message object.
Result<Message> ParseMessage(std::string_view json_text);

// Parses either one message object or an array of message objects. Errors name the array index.
Result<std::vector<Message>> ParseMessages(std::string_view json_text);

// Parses one streamed part: a content part (has "type"), a tool call ("type":"function") or a tool-call
// fragment (`{"arguments_part": ..., "index"?: n}` without "type").
Result<StreamedPart> ParseStreamedPart(std::string_view json_text);

// Appends the kosong dump of `message` to `out` (no trailing newline).
void AppendMessageJson(const Message& message, std::string* out);

// Returns the kosong dump of `message`.
std::string MessageToJson(const Message& message);

// Returns one content part as JSON (all of its fields, nulls included).
std::string ContentPartToJson(const ContentPart& part);

// Returns `message` with content as a list even when it is one text part (the non-collapsed form some
// callers, e.g. HTTP APIs, prefer).
std::string MessageToJsonContentList(const Message& message);

// Returns the first invalid UTF-8 string in `message` as "path: byte N", or "" if all strings are valid.
std::string FindInvalidUtf8(const Message& message);

}  // namespace strata
