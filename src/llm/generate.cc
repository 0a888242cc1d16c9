#include "strata/llm/generate.h"

#include <nlohmann/json.hpp>

#include "strata/llm/chat_error.h"
#include "strata/message/stream_merge.h"

namespace strata::llm {

Result<GenerateResult> Generate(ChatProvider& provider, std::string_view system_prompt,
                                std::span<const ToolDeclaration> tools, std::span<const Message> history,
                                const GenerateCallbacks& callbacks, const GenerateOptions& options) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<ChatStream> stream,
                          provider.Generate(system_prompt, tools, history, options));
  // Calls completed while the stream runs go out as they complete; those the end completes go out once the
  // stop reason is known: in a reply cut at the token limit, one whose arguments are not whole JSON was cut
  // (none at all too: the reply ended after the call's name).
  bool ended = false, cut = false;
  StreamMerger merger([&](const ToolCall& call) {
    // Parsed only in a cut reply (each argument string of every other reply is read by the tool itself).
    if (ended && cut && callbacks.on_cut_tool_call &&
        !nlohmann::json::accept(call.function.arguments.value_or(""))) {
      callbacks.on_cut_tool_call(call);
    } else if (callbacks.on_tool_call) {
      callbacks.on_tool_call(call);
    }
  });
  StreamedPart part;
  while (true) {
    STRATA_ASSIGN_OR_RETURN(bool more, stream->Next(&part));
    if (!more) break;
    if (callbacks.on_part) callbacks.on_part(part);
    merger.Push(std::move(part));
  }
  const std::string stop_reason = stream->stop_reason();
  ended = true;
  cut = StopKindOf(stop_reason) == StopKind::kLength;
  auto message = merger.Finish();
  if (!message.ok()) return NoReplyError(message.status().message(), stop_reason);
  return GenerateResult{stream->id(), std::move(*message), stream->usage(), stop_reason};
}

}  // namespace strata::llm
