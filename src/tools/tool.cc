#include "strata/tools/tool.h"

#include <exception>

namespace strata::tools {
namespace {

class FunctionTool final : public Tool {
 public:
  FunctionTool(llm::ToolDeclaration declaration, ToolFunction function)
      : declaration_(std::move(declaration)), function_(std::move(function)) {}
  const llm::ToolDeclaration& declaration() const override { return declaration_; }
  ToolOutput Call(std::string_view arguments, const Canceller& cancel) override { return function_(arguments, cancel); }

 private:
  llm::ToolDeclaration declaration_;
  ToolFunction function_;
};

ToolResult ErrorResult(const ToolCall& call, std::string text) {
  return ToolResult{call, Message::ToolResult(call.id, std::move(text)), true};
}

}  // namespace

std::shared_ptr<Tool> MakeTool(llm::ToolDeclaration declaration, ToolFunction function) {
  return std::make_shared<FunctionTool>(std::move(declaration), std::move(function));
}

Status Toolset::Add(std::shared_ptr<Tool> tool) {
  if (!tool) return Status::InvalidArgument("toolset: null tool");
  const llm::ToolDeclaration& d = tool->declaration();
  if (d.name.empty()) return Status::InvalidArgument("toolset: a tool has an empty name");
  if (tools_.contains(d.name)) return Status::AlreadyExists("toolset: a tool named \"" + d.name + "\" is already added");
  auto schema = JsonSchema::Parse(d.parameters);
  if (!schema.ok()) return schema.status().WithContext("toolset: tool \"" + d.name + "\" parameters");
  order_.push_back(d.name);
  tools_.emplace(d.name, Entry{std::move(tool), std::move(*schema)});
  return Status::Ok();
}

std::vector<llm::ToolDeclaration> Toolset::declarations() const {
  std::vector<llm::ToolDeclaration> out;
  for (const std::string& name : order_) out.push_back(tools_.find(name)->second.tool->declaration());
  return out;
}

const Tool* Toolset::Find(std::string_view name) const {
  auto it = tools_.find(name);
  return it == tools_.end() ? nullptr : it->second.tool.get();
}

ToolResult Toolset::Handle(const ToolCall& call, const Canceller& cancel) const {
  auto it = tools_.find(call.function.name);
  if (it == tools_.end()) {
    std::string names;
    for (const std::string& n : order_) names += (names.empty() ? "" : ", ") + n;
    return ErrorResult(call, "Error: tool \"" + call.function.name + "\" not found. Available tools: " +
                                 (names.empty() ? "none" : names) + ".");
  }
  std::string arguments = call.function.arguments.value_or("");
  if (arguments.find_first_not_of(" \t\r\n") == std::string::npos) arguments = "{}";
  Status valid = it->second.schema.Validate(arguments);
  if (!valid.ok()) {
    return ErrorResult(call, "Error: invalid arguments for tool \"" + call.function.name + "\": " + valid.message());
  }
  if (cancel.cancelled()) return ErrorResult(call, "Error: tool \"" + call.function.name + "\" was cancelled.");
  ToolOutput output;
  try {
    output = it->second.tool->Call(arguments, cancel);
  } catch (const std::exception& e) {
    return ErrorResult(call, "Error: tool \"" + call.function.name + "\" failed: " + e.what());
  } catch (...) {
    return ErrorResult(call, "Error: tool \"" + call.function.name + "\" failed with an unknown exception.");
  }
  Message message{.role = Role::kTool, .content = std::move(output.content), .tool_call_id = call.id};
  return ToolResult{call, std::move(message), output.is_error};
}

}  // namespace strata::tools
