// Generate(): runs one model call to completion. Consumes a provider's stream, fires `on_part` for every
// streamed part and `on_tool_call` for every tool call as soon as it is complete (StreamMerger rules), and
// returns the merged assistant message with the response id and usage.
//
// Errors are the provider's (chat_error.h); a reply with no text, media or tool call is an empty_response
// error (retryable: the caller may call again). Generate does not retry by itself; providers retry what
// fails before the response starts.
//
// Thread safety: callbacks run on the calling thread.
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>

#include "strata/llm/provider.h"

namespace strata::llm {

struct GenerateResult {
  std::string id;
  Message message;
  std::optional<TokenUsage> usage;
};

struct GenerateCallbacks {
  std::function<void(const StreamedPart&)> on_part;
  std::function<void(const ToolCall&)> on_tool_call;
};

Result<GenerateResult> Generate(ChatProvider& provider, std::string_view system_prompt,
                                std::span<const ToolDeclaration> tools, std::span<const Message> history,
                                const GenerateCallbacks& callbacks = {}, const GenerateOptions& options = {});

}  // namespace strata::llm
