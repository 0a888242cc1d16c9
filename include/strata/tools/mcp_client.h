// McpClient: tools from Model Context Protocol servers, for an agent's Toolset (what kimi-cli's MCP
// support does for its agent): a server is started as a child process speaking newline-delimited
// JSON-RPC on its stdin/stdout ("stdio"), or reached at a URL (Streamable HTTP: each message a POST,
// the answer JSON or a text/event-stream). Connect() runs the handshake (initialize, then
// notifications/initialized; protocol revisions 2025-11-25, 2025-06-18, 2025-03-26 and 2024-11-05);
// ListTools() pages through tools/list; CallTool() runs tools/call and converts the result's content
// (text, images, audio, embedded resources, links) into message parts.
//
// Servers are untrusted: a reply that is not JSON (or nested too deep), a wrongly typed member, a server
// that exits, stops reading its input, hangs or floods its output are errors that name the server and
// what went wrong; nothing a server sends can throw, crash or hang the client. Images and audio a model
// would refuse are described in text instead. An HTTP session the server lost (it restarted) is
// initialized again and the request asked once more; an event stream the server ends early (2025-11-25)
// is resumed with Last-Event-ID. Requests the server makes of the client are answered
// (ping) or refused (method not found: no sampling, roots or elicitation here).
//
// AddMcpTools() puts a server's tools into a Toolset: the model calls them like any other tool, and a
// failure of the server becomes a tool result the model can read (tool.h), never an error of the turn.
//
// Config (ParseMcpServers): the "mcpServers" object kimi-cli and other MCP clients use,
//   {"mcpServers": {"files": {"command": "npx", "args": ["-y", "server"], "env": {"K": "V"}, "cwd": "/"},
//                   "docs":  {"url": "https://host/mcp", "headers": {"Authorization": "Bearer ..."}}}}
// with an optional "timeout" (seconds, per request) on each server.
//
// Thread safety: a connected McpClient may be called from several threads at once (requests are matched
// to answers by id). The child process and the client's threads end with the client.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/llm/http.h"
#include "strata/tools/tool.h"
#include "strata/util/cancel.h"
#include "strata/util/status.h"

namespace strata::tools {

struct McpServerConfig {
  std::string name;  // How errors and the toolset name the server.
  // stdio: the program (looked up on PATH), its arguments, variables added to the inherited environment,
  // and the working directory ("" = ours).
  std::string command;
  std::vector<std::string> args;
  std::vector<std::pair<std::string, std::string>> env;
  std::string cwd;
  // Streamable HTTP: the endpoint and extra request headers (e.g. Authorization).
  std::string url;
  llm::HttpHeaders headers;
  // Longest wait for the answer to one request (the handshake included); exceeded: kDeadlineExceeded,
  // and the request is cancelled on the server.
  std::chrono::milliseconds timeout{60'000};
};

// Parses an MCP configuration: {"mcpServers": {NAME: {...}}} or the inner object alone. `where` names the
// source in errors ("config.json"). A server with neither "command" nor "url", with both, a member of the
// wrong type, or a transport other than Streamable HTTP (e.g. "sse") is kInvalidArgument naming it.
Result<std::vector<McpServerConfig>> ParseMcpServers(std::string_view json, std::string_view where);

struct McpToolInfo {
  std::string name;
  std::string title;        // "" when the server gives none.
  std::string description;
  std::string input_schema;  // JSON text; {"type":"object"} when the server gives none.
};

struct McpClientOptions {
  // Receives each line the child process writes to its stderr (stdio servers); default: dropped. The last
  // lines are kept either way and quoted when the server exits.
  std::function<void(std::string_view server, std::string_view line)> on_stderr;
  // Longest JSON-RPC message accepted from a server; a longer one fails the request it answers.
  size_t max_message_bytes = 16 << 20;
  // The HTTP transport (tests pass their own); default: libcurl.
  std::shared_ptr<llm::HttpTransport> http;
};

class McpClient {
 public:
  // Starts or reaches the server and runs the handshake. Fails with kInvalidArgument for an unusable
  // config, kUnavailable when the server cannot be started or reached or exits, kDeadlineExceeded when it
  // does not answer within config.timeout, kFailedPrecondition for a protocol revision we do not speak.
  static Result<std::unique_ptr<McpClient>> Connect(const McpServerConfig& config, McpClientOptions options = {});
  // Ends the session: closes the server's stdin and waits for it (then SIGTERM, then SIGKILL), or sends
  // the HTTP session's DELETE.
  ~McpClient();
  McpClient(const McpClient&) = delete;  // Owns a child process or a session.
  McpClient& operator=(const McpClient&) = delete;

  const std::string& name() const;
  // What the server said of itself in the (latest) handshake.
  std::string server_name() const;
  std::string server_version() const;
  std::string protocol_version() const;
  std::string instructions() const;

  // Lists every tool (following nextCursor; none if the server declared no tools capability). An entry
  // without a name is left out and described in `*warnings` (if given); more than 10,000 tools is
  // kResourceExhausted.
  Result<std::vector<McpToolInfo>> ListTools(const Canceller* cancel = nullptr,
                                             std::vector<std::string>* warnings = nullptr);
  // Calls `tool` with `arguments` (JSON text of an object). A result with isError is a ToolOutput with
  // is_error set; a failure to get any result (transport, timeout, JSON-RPC error) is a non-OK status.
  // When `cancel` fires the server is told (notifications/cancelled) and the call is kCancelled.
  Result<ToolOutput> CallTool(std::string_view tool, std::string_view arguments, const Canceller* cancel = nullptr);

  struct Impl;

 private:
  explicit McpClient(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Lists `client`'s tools and adds each to `toolset` as a tool whose calls go to the server. A tool whose
// name is already taken is added as "<server>__<tool>"; one whose input schema the toolset cannot use
// is left out. Each such case is described in `*warnings` (if given). Returns the names added.
Result<std::vector<std::string>> AddMcpTools(std::shared_ptr<McpClient> client, Toolset* toolset,
                                             std::vector<std::string>* warnings = nullptr);

}  // namespace strata::tools
