// The content-part type registry: the extension point for part types beyond the built-in
// text / think / image_url / audio_url / video_url.
//
// A registered type is parsed into a CustomPart that keeps the whole part object (as canonical JSON) and is
// written back unchanged. Registration is process-wide; register at start-up, before parsing.
// "redacted_thinking" (Anthropic's opaque `{"type":"redacted_thinking","data":...}` block, which the
// Anthropic provider round-trips) is registered from the start.
//
// Thread safety: all functions are thread-safe.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/util/status.h"

namespace strata {

// Validates a part of a registered type. Receives the part object as canonical JSON text; returns a non-OK
// status (its message is reported with the part's location) to reject it.
using ContentPartValidator = std::function<Status(std::string_view part_json)>;

// Registers `type`. Returns kFailedPrecondition if `type` is built in, kAlreadyExists if it is already
// registered, and
// kInvalidArgument if it is empty.
Status RegisterContentPartType(std::string type, ContentPartValidator validator = nullptr);

// Returns whether `type` is built in or registered.
bool IsKnownContentPartType(std::string_view type);

// Returns the built-in types followed by the registered ones, in registration order.
std::vector<std::string> KnownContentPartTypes();

// Runs the validator registered for `type` (OK if it has none). Returns kInvalidArgument if unknown.
Status ValidateCustomPart(std::string_view type, std::string_view part_json);

}  // namespace strata
