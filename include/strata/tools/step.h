// Step(): one agent step. Like llm::Generate, plus tool execution: each tool call is dispatched to the
// toolset as soon as the stream completes it (parallel calls run concurrently, each on its own thread,
// while the model is still streaming), and the step returns the assistant message with every tool result
// in call order. If the stream fails or the step is cancelled, running tools are cancelled and joined
// before the error is returned; no tool outlives Step().
//
// Thread safety: on_part and on_tool_call run on the calling thread; on_tool_result runs on the tool's
// thread as each finishes (calls to it are serialised).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "strata/llm/generate.h"
#include "strata/tools/tool.h"

namespace strata::tools {

struct StepResult {
  std::string id;
  Message message;
  std::optional<TokenUsage> usage;
  std::string stop_reason;               // llm::GenerateResult::stop_reason.
  std::vector<ToolResult> tool_results;  // In call order.

  // The assistant message followed by the tool results: what to append to the history.
  std::vector<Message> NewMessages() const;
};

struct StepCallbacks {
  std::function<void(const StreamedPart&)> on_part;
  std::function<void(const ToolCall&)> on_tool_call;
  std::function<void(const ToolResult&)> on_tool_result;
};

Result<StepResult> Step(llm::ChatProvider& provider, std::string_view system_prompt, const Toolset& toolset,
                        std::span<const Message> history, const StepCallbacks& callbacks = {},
                        const llm::GenerateOptions& options = {});

}  // namespace strata::tools
