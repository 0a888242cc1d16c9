// The Model Context Protocol server (docs/mcp.md): Strata's store, sessions and memory as MCP tools,
// resources and prompts, for any agent that speaks MCP.
//
//   strata mcp --data DIR --user alice        stdio: newline-delimited JSON-RPC on stdin/stdout, logs on stderr
//   strata serve ...  → POST /mcp             Streamable HTTP on the API's port, with its keys
//
// Protocol revision 2025-11-25 (earlier revisions a client asks for are answered in kind: 2025-06-18,
// 2025-03-26, 2024-11-05): initialize, ping, tools/list + tools/call, resources/list +
// resources/templates/list + resources/read, prompts/list + prompts/get, notifications/cancelled and
// progress notifications for requests that carry a progress token. The JSON-RPC layer is Strata's own:
// every malformed message, unknown method, unknown tool and schema-invalid argument list is a JSON-RPC
// error naming the problem, and nothing a client sends can stop the server.
//
// Identity comes from the transport, never from a tool argument: on stdio the configured user (its user
// scope, its sessions, the shared resources and agent scopes), over HTTP the request's key (server.h).
//
// Thread safety: McpHandler is safe from several threads (requests run concurrently so that a
// cancellation can reach one in flight).
#pragma once

#include <cstdio>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "strata/engine/engine.h"
#include "strata/util/cancel.h"
#include "strata/util/status.h"

namespace strata::server {

struct Identity;

inline constexpr std::string_view kMcpProtocolVersion = "2025-11-25";

// One client's protocol endpoint over an engine and an identity.
class McpHandler {
 public:
  // Writes one JSON-RPC message to the client (a progress notification, from the request's thread).
  using Notify = std::function<void(const std::string& message)>;

  McpHandler(Engine* engine, const Identity& who, size_t max_message_bytes = 4 << 20);
  ~McpHandler();
  McpHandler(const McpHandler&) = delete;
  McpHandler& operator=(const McpHandler&) = delete;

  // Handles one incoming message (JSON text). Returns the response to send, or nullopt for a
  // notification, a response, or a request cancelled meanwhile. `cancel` is checked by long tools;
  // `notify` carries progress notifications.
  std::optional<std::string> Handle(std::string_view message, const Canceller* cancel = nullptr,
                                    const Notify& notify = nullptr);

  // The JSON-RPC id of `message` if it is a request (as JSON text), for the transports' bookkeeping of
  // cancellation; nullopt for notifications, responses and unparseable text.
  static std::optional<std::string> RequestId(std::string_view message);
  // For a notifications/cancelled message: the id (as JSON text) of the request it cancels.
  static std::optional<std::string> CancelledId(std::string_view message);

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

struct McpStdioOptions {
  std::string user = "default";
  size_t max_message_bytes = 4 << 20;  // A longer line is answered with a parse error and skipped.
  int max_in_flight = 8;               // Requests run at once; more wait for one to finish.
};

// Serves MCP over `in`/`out` (newline-delimited JSON-RPC) until `in` ends; requests still in flight then
// finish and answer before it returns. A request id already in flight is refused. While max_in_flight
// requests run, the next line waits to be read.
Status ServeMcpStdio(Engine* engine, const McpStdioOptions& options, std::FILE* in, std::FILE* out);

}  // namespace strata::server
