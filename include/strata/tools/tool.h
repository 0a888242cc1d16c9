// Tools the model can call, and the Toolset that runs them.
//
// A Tool has a declaration (name, description, JSON Schema parameters) and a Call() that receives the
// model's arguments, already validated against the schema. Toolset::Handle() never fails and never
// throws: an unknown tool, arguments that are not JSON or do not match the schema, a tool that throws or
// returns an error — each becomes a tool-result message the model can read and act on.
//
// typed_tool.h builds tools from a typed parameter struct (schema generated, arguments parsed).
//
// Thread safety: a Toolset is immutable once built and may run calls from many threads at once; tools
// must be thread-safe (Step runs parallel calls concurrently).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/llm/wire.h"
#include "strata/message/message.h"
#include "strata/tools/json_schema.h"
#include "strata/util/cancel.h"
#include "strata/util/status.h"

namespace strata::tools {

struct ToolOutput {
  std::vector<ContentPart> content;
  bool is_error = false;

  static ToolOutput Text(std::string text) { return {{TextPart{std::move(text)}}, false}; }
  static ToolOutput Error(std::string message) { return {{TextPart{std::move(message)}}, true}; }
};

class Tool {
 public:
  virtual ~Tool() = default;
  virtual const llm::ToolDeclaration& declaration() const = 0;
  // Runs the tool on schema-valid `arguments` (JSON text of an object). Long-running tools should watch
  // `cancel`. May throw; the toolset reports the exception to the model.
  virtual ToolOutput Call(std::string_view arguments, const Canceller& cancel) = 0;
};

using ToolFunction = std::function<ToolOutput(std::string_view arguments, const Canceller& cancel)>;

// A tool from a declaration and a function.
std::shared_ptr<Tool> MakeTool(llm::ToolDeclaration declaration, ToolFunction function);

// The outcome of one tool call, as sent back to the model.
struct ToolResult {
  ToolCall call;
  Message message;  // role tool, tool_call_id = call.id
  bool is_error = false;
};

class Toolset {
 public:
  // Adds `tool`. Fails with kAlreadyExists for a duplicate name and kInvalidArgument for an unusable
  // schema.
  Status Add(std::shared_ptr<Tool> tool);

  std::vector<llm::ToolDeclaration> declarations() const;
  const Tool* Find(std::string_view name) const;
  size_t size() const { return tools_.size(); }

  // Runs `call` and returns its result (errors included, see above).
  ToolResult Handle(const ToolCall& call, const Canceller& cancel) const;

 private:
  struct Entry {
    std::shared_ptr<Tool> tool;
    JsonSchema schema;
  };
  std::vector<std::string> order_;
  std::map<std::string, Entry, std::less<>> tools_;
};

}  // namespace strata::tools
