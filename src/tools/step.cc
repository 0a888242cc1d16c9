#include "strata/tools/step.h"

#include <mutex>
#include <thread>

namespace strata::tools {

std::vector<Message> StepResult::NewMessages() const {
  std::vector<Message> out = {message};
  for (const ToolResult& r : tool_results) out.push_back(r.message);
  return out;
}

Result<StepResult> Step(llm::ChatProvider& provider, std::string_view system_prompt, const Toolset& toolset,
                        std::span<const Message> history, const StepCallbacks& callbacks,
                        const llm::GenerateOptions& options) {
  // Tools get their own canceller: cancelled when the caller cancels or when the stream fails.
  Canceller tools_cancel;
  ScopedCancelCallback link(options.cancel, [&tools_cancel] { tools_cancel.Cancel(); });

  std::mutex mu;
  std::vector<std::optional<ToolResult>> results;  // Guarded by mu; index = call order.
  std::vector<std::thread> workers;
  std::mutex callback_mu;

  auto on_tool_call = [&](const ToolCall& call) {
    if (callbacks.on_tool_call) callbacks.on_tool_call(call);
    size_t slot;
    {
      std::lock_guard lock(mu);
      slot = results.size();
      results.emplace_back();
    }
    workers.emplace_back([&, call, slot] {
      ToolResult result = toolset.Handle(call, tools_cancel);
      if (callbacks.on_tool_result) {
        std::lock_guard lock(callback_mu);
        callbacks.on_tool_result(result);
      }
      std::lock_guard lock(mu);
      results[slot] = std::move(result);
    });
  };
  // A call whose arguments the end of a reply cut at the output token limit cut too is not run: the model is
  // told why rather than given a parse error.
  auto on_cut_tool_call = [&](const ToolCall& call) {
    if (callbacks.on_tool_call) callbacks.on_tool_call(call);
    ToolResult result{call,
                      Message::ToolResult(call.id, "Error: tool \"" + call.function.name +
                                                       "\" was not run: your reply was cut at the output token limit "
                                                       "before this call's arguments were complete. Call it again, "
                                                       "with shorter arguments or after less text."),
                      true};
    if (callbacks.on_tool_result) {
      std::lock_guard lock(callback_mu);
      callbacks.on_tool_result(result);
    }
    std::lock_guard lock(mu);
    results.emplace_back(std::move(result));
  };
  auto join_all = [&] {
    for (std::thread& t : workers) t.join();
    workers.clear();
  };

  Result<llm::GenerateResult> generated = [&]() -> Result<llm::GenerateResult> {
    try {
      return llm::Generate(provider, system_prompt, toolset.declarations(), history,
                           {.on_part = callbacks.on_part, .on_tool_call = on_tool_call,
                            .on_cut_tool_call = on_cut_tool_call},
                           options);
    } catch (...) {
      tools_cancel.Cancel();
      join_all();
      throw;
    }
  }();
  if (!generated.ok()) {
    tools_cancel.Cancel();
    join_all();
    return generated.status();
  }
  join_all();
  StepResult out{.id = std::move(generated->id), .message = std::move(generated->message),
                 .usage = generated->usage, .stop_reason = std::move(generated->stop_reason)};
  for (std::optional<ToolResult>& r : results) out.tool_results.push_back(std::move(*r));
  return out;
}

}  // namespace strata::tools
