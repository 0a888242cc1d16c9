#include "strata/llm/generate.h"

#include "strata/llm/chat_error.h"
#include "strata/message/stream_merge.h"

namespace strata::llm {

Result<GenerateResult> Generate(ChatProvider& provider, std::string_view system_prompt,
                                std::span<const ToolDeclaration> tools, std::span<const Message> history,
                                const GenerateCallbacks& callbacks, const GenerateOptions& options) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<ChatStream> stream,
                          provider.Generate(system_prompt, tools, history, options));
  StreamMerger merger(callbacks.on_tool_call);
  StreamedPart part;
  while (true) {
    STRATA_ASSIGN_OR_RETURN(bool more, stream->Next(&part));
    if (!more) break;
    if (callbacks.on_part) callbacks.on_part(part);
    merger.Push(std::move(part));
  }
  auto message = merger.Finish();
  if (!message.ok()) return EmptyResponseError(message.status().message());
  return GenerateResult{stream->id(), std::move(*message), stream->usage()};
}

}  // namespace strata::llm
