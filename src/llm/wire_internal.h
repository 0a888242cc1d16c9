// Internal: shared pieces of the provider wire formats. Request bodies are built as nlohmann::ordered_json
// (insertion order kept, so bodies read like the vendors' documentation); responses are decoded with
// simdjson, which is on the per-event hot path.
#pragma once

#include <simdjson.h>

#include <span>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "strata/llm/wire.h"
#include "strata/message/message.h"
#include "strata/util/status.h"

namespace strata::llm::internal {

using Json = nlohmann::ordered_json;

// Parses the options object and rejects keys outside `known` (the error lists the known ones).
Result<Json> ParseOptions(std::string_view options, std::string_view format,
                          std::span<const std::string_view> known);

// Reads an optional option of the given JSON type; a present value of another type is an error naming it.
// The CustomPart JSON of an Anthropic redacted_thinking block.
std::string RedactedThinkingJson(std::string_view data);

Result<std::optional<std::string>> OptionalString(const Json& options, const char* key);
Result<std::optional<int64_t>> OptionalInt(const Json& options, const char* key);
Result<std::optional<bool>> OptionalBool(const Json& options, const char* key);

// Copies the sampling keys present in `options` into `body` (same name on the wire), and merges
// `extra_body` (an object) last: its keys replace the body's.
void CopyKeys(const Json& options, std::span<const char* const> keys, Json* body);
Status MergeExtraBody(const Json& options, Json* body);

// Serialises a request body: compact, raw UTF-8 (invalid sequences become U+FFFD rather than failing).
std::string DumpBody(const Json& body);

// Parses a tool's JSON Schema text; errors name the tool.
Result<Json> ParseToolParameters(const ToolDeclaration& tool);

// Parses tool-call arguments into an object: null or "" gives {}, anything that is not a JSON object is
// sent as {} too (the model's malformed arguments must not make the conversation unsendable).
Json ArgumentsObject(const std::optional<std::string>& arguments);

// Returns the part's text for text parts, else nullptr.
const std::string* TextOf(const ContentPart& part);

// Returns a new random tool-call id "<prefix><16 hex digits>".
std::string NewCallId(std::string_view prefix);

// Splits a data: URL into media type and base64 payload; false if `url` is not a base64 data URL.
bool SplitDataUrl(std::string_view url, std::string* media_type, std::string* data);

// The per-format entry points (one .cc each).
Result<std::string> BuildOpenAIChatBody(bool kimi, const ChatRequest& request);
Result<std::unique_ptr<StreamDecoder>> NewOpenAIChatDecoder(bool kimi, std::string_view options);
Result<std::string> BuildResponsesBody(const ChatRequest& request);
Result<std::unique_ptr<StreamDecoder>> NewResponsesDecoder(std::string_view options);
Result<std::string> BuildAnthropicBody(const ChatRequest& request);
Result<std::unique_ptr<StreamDecoder>> NewAnthropicDecoder(std::string_view options);
Result<std::string> BuildGeminiBody(const ChatRequest& request);
Result<std::unique_ptr<StreamDecoder>> NewGeminiDecoder(std::string_view options);

// simdjson helpers for decoders: absent, null and wrong-typed fields read as the fallback.
std::string_view GetString(simdjson::dom::element e, std::string_view key, std::string_view fallback = "");
int64_t GetInt(simdjson::dom::element e, std::string_view key, int64_t fallback = 0);
// A token count the model reported: an integer from 0 to 2^53, else 0 (a report of 1e300 or -5 tokens is
// ignored rather than turned into INT64_MIN, which later failed a turn as "token count must be
// non-negative").
int64_t GetCount(simdjson::dom::element e, std::string_view key);
// Whether `key` holds such a count.
bool IsCount(simdjson::dom::element e, std::string_view key);
// prompt - cached, never below 0 (a report whose cached tokens pass its prompt tokens).
inline int64_t Uncached(int64_t prompt, int64_t cached) { return prompt > cached ? prompt - cached : 0; }
bool Has(simdjson::dom::element e, std::string_view key);  // Present and not null.
// Sets *out to e[key] when e is an object with that key (null included); returns whether it did.
bool Get(simdjson::dom::element e, std::string_view key, simdjson::dom::element* out);
// Parses `data` with `parser`; the error names the format and quotes the start of the payload.
Result<simdjson::dom::element> ParsePayload(simdjson::dom::parser& parser, std::string_view data,
                                            std::string_view format);
// Copies a JSON value to compact text.
std::string ToJsonText(simdjson::dom::element e);

}  // namespace strata::llm::internal
