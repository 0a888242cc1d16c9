// Internal: Message parsing from an already-parsed simdjson DOM element, shared by the message module and
// the log readers (which parse one line per element on the restore hot path).
#pragma once

#include <simdjson.h>

#include "strata/message/message.h"
#include "strata/util/status.h"

namespace strata::internal {

// Converts `e` to a Message following kosong's validation rules. Errors are kInvalidArgument with the
// path inside the message ("content[1].text: expected string, got integer").
Status MessageFromElement(simdjson::dom::element e, Message* out);

// Converts `e` to a StreamedPart (see ParseStreamedPart).
Status StreamedPartFromElement(simdjson::dom::element e, StreamedPart* out);

// Returns a thread-local parser for cold-path helpers.
simdjson::dom::parser& ThreadParser();

}  // namespace strata::internal
