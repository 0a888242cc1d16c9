// Generate(): runs one model call to completion. Consumes a provider's stream, fires `on_part` for every
// streamed part and `on_tool_call` for every tool call as soon as it is complete (StreamMerger rules), and
// returns the merged assistant message with the response id and usage.
//
// Errors are the provider's (chat_error.h); a reply with no text, media or tool call is an empty_response
// error (retryable: the caller may call again), or content_filter when the provider's stop reason says it
// blocked the reply (not retryable). Generate does not retry by itself; providers retry what fails before
// the response starts. A reply cut at the output token limit is returned (its stop_reason says so), and the
// tool calls that only its end completed whose arguments are not whole JSON (cut with the reply; none at all
// also) go to on_cut_tool_call instead of on_tool_call when it is set.
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
  std::string stop_reason;  // The provider's own (ChatStream::stop_reason); StopKindOf says what it means.
};

struct GenerateCallbacks {
  std::function<void(const StreamedPart&)> on_part;
  std::function<void(const ToolCall&)> on_tool_call;
  std::function<void(const ToolCall&)> on_cut_tool_call;
};

Result<GenerateResult> Generate(ChatProvider& provider, std::string_view system_prompt,
                                std::span<const ToolDeclaration> tools, std::span<const Message> history,
                                const GenerateCallbacks& callbacks = {}, const GenerateOptions& options = {});

}  // namespace strata::llm
