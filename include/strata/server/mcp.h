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
// scope, its sessions, the shared resources and agent scopes), over HTTP the request's key (server.h). What
// a caller reaches is the Engine's rule (Reach).
//
// The two transports share one list of protocol revisions (McpKnownVersion) and one way of keeping requests
// in flight (McpInFlight): ServeMcpStdio below, and McpHttpTransport, which `strata serve` puts at /mcp.
//
// Thread safety: McpHandler, McpInFlight and McpHttpTransport are safe from several threads (requests run
// concurrently so that a cancellation can reach one in flight).
#pragma once

#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "strata/engine/engine.h"
#include "strata/util/cancel.h"
#include "strata/util/status.h"

namespace strata::server {

inline constexpr std::string_view kMcpProtocolVersion = "2025-11-25";
// Whether this server speaks protocol revision `version` (2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05).
bool McpKnownVersion(std::string_view version);

// Who an MCP client is, from its transport.
struct McpCaller {
  Reach reach;                      // What its tools reach.
  std::string user = "default";     // Whose memories `remember` keeps, and who owns the sessions it makes.
  std::string account = "default";  // Shown by the `health` tool.
  int64_t window = 128'000;         // get_context's window when none is given (the server's --window).
  // Called after a commit a tool queued (the server wakes its phase-2 worker and counts it, as for HTTP).
  std::function<void()> on_commit;
  // Called after a tool that writes ran (the server tells its viewers; reads, pings and listings do not).
  std::function<void()> on_change;
};

// One client's protocol endpoint over an engine and an identity.
class McpHandler {
 public:
  // Writes one JSON-RPC message to the client (a progress notification, from the request's thread).
  using Notify = std::function<void(const std::string& message)>;

  McpHandler(Engine* engine, McpCaller caller, size_t max_message_bytes = 4 << 20);
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

// The requests a transport has in flight, by client (any string naming who sent them) and JSON-RPC id (as
// JSON text): a notifications/cancelled reaches the request it names, of the same client only.
class McpInFlight {
 public:
  // Registers request `id` of `client` and returns its canceller; nullptr when that id is in flight.
  std::shared_ptr<Canceller> Begin(const std::string& client, const std::string& id);
  void End(const std::string& client, const std::string& id);
  void Cancel(const std::string& client, const std::string& id);
  size_t size();

 private:
  std::mutex mu_;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<Canceller>> requests_;  // Guarded by mu_.
};

// MCP over Streamable HTTP: each POST carries one JSON-RPC message; a request is answered with its response
// as JSON (200), a notification or a response is accepted with 202 and no body. No SSE stream is opened (the
// transport allows it), so GET answers 405.
struct McpHttpReply {
  int status = 200;
  std::string body;  // JSON; empty for 202.
  std::string session_id;  // For the Mcp-Session-Id header: set on the reply to an initialize.
};
class McpHttpTransport {
 public:
  // `shutdown` (borrowed; may be null), when cancelled, cancels every request in flight.
  explicit McpHttpTransport(size_t max_message_bytes = 4 << 20, const Canceller* shutdown = nullptr)
      : max_message_bytes_(max_message_bytes), shutdown_(shutdown) {}
  // `client` names the caller's connection identity (its key); `protocol_version` is the
  // MCP-Protocol-Version header ("" when absent; an unknown one is kInvalidArgument); `session` the
  // Mcp-Session-Id header ("" when absent). An initialize is given a new session id; request ids and their
  // cancellation are the client's within its session, so that two clients of one key, each numbering its
  // requests from 0, neither refuse nor cancel each other's.
  Result<McpHttpReply> Post(Engine* engine, const McpCaller& caller, const std::string& client,
                            std::string_view protocol_version, std::string_view session, std::string_view body);

 private:
  size_t max_message_bytes_;
  const Canceller* shutdown_;
  McpInFlight in_flight_;
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
