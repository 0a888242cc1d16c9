// strata::server::Server — `strata serve`: the Engine over HTTP (docs/api/openapi.yaml, docs/server.md).
//
//   auto server = strata::server::Server::Open({.data_dir = "strata-data"}, {.listen = "127.0.0.1:8420"});
//   int port = *(*server)->Bind();
//   (*server)->Serve();            // blocks until Shutdown(), from a signal-watching thread
//
// Every response is one JSON envelope: {"status":"ok","result":...} or
// {"status":"error","error":{"code","message","request_id"}}, with the HTTP status of the error's
// StatusCode (util/status.h). Each request carries an id (X-Request-Id, echoed or generated).
//
// Identity (server/keys): with a root key (ServerOptions::root_key or $STRATA_ROOT_KEY) every request needs
// a key, sent as `Authorization: Bearer KEY` or `X-API-Key: KEY`; the root key issues per-user keys bound
// to an account, a user and a role. Each account has its own data (an Engine of its own: the default
// account's is the data directory, another's is <data>/accounts/<account>), so nothing crosses accounts;
// within an account a "user" key reaches only its own user scope and sessions, and the shared resources
// and agent scopes. Without any key the server is one open account and listens on loopback only.
//
// POST /v1/chat/completions is an OpenAI-compatible endpoint in front of the configured (OpenAI-compatible)
// upstream: without a session header it forwards the request as it is and counts its tokens exactly; with
// `X-Strata-Session: ID` the client sends only its new turn, and Strata appends it to the session, assembles
// the request within the upstream's window (system prompt, relevant memories, newest history, tool groups
// whole), forwards it, streams the reply back while logging it, and commits the session by policy.
//
// A resident worker runs phase 2 of commits (summaries, extraction, dedup) in the background; a commit
// returns at once with a task id. Shutdown stops accepting, answers requests in flight, stops the worker
// between jobs and returns; every write acknowledged before it is durable.
//
// Thread safety: Serve blocks one thread; Shutdown may be called from any other.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/engine/engine.h"
#include "strata/server/http.h"
#include "strata/util/status.h"

namespace strata::server {

struct ServerOptions {
  std::string listen = "127.0.0.1:8420";  // host:port; port 0 picks a free one.
  // The root key; empty: $STRATA_ROOT_KEY. With neither, no key is needed and only loopback is allowed.
  std::string root_key;
  bool read_root_key_from_env = true;
  HttpServerOptions http;
  // The phase-2 worker runs after each commit and at least this often (jobs waiting out a backoff).
  std::chrono::milliseconds worker_poll{2000};
  bool run_worker = true;
  // Streams open at once (task event streams and streamed chat completions), kept below http.threads so
  // that plain requests always have threads; one more is answered 429.
  int max_streams = 48;
  // The memory-managing endpoints (with X-Strata-Session): the upstream model's context window that turns
  // are assembled to fit (X-Strata-Max-Context overrides it per request). When such a session is committed
  // is the engine's CommitPolicy (EngineOptions::commit_policy).
  int64_t upstream_context_tokens = 128'000;
};

class Server {
 public:
  // Opens the default account's engine (the data directory) and the key store; nothing listens yet.
  static Result<std::unique_ptr<Server>> Open(EngineOptions engine, ServerOptions options);
  ~Server();
  Server(const Server&) = delete;  // Owns engines, threads and a socket.
  Server& operator=(const Server&) = delete;

  // Binds the listening socket; returns the port. kFailedPrecondition for a non-loopback address without a
  // root key, kUnavailable when the port is taken.
  Result<int> Bind();
  // Serves until Shutdown(); returns when requests in flight are answered and the worker has stopped.
  Status Serve();
  // Stops the server (see Serve). Safe from any thread, more than once.
  void Shutdown();
  // A route served: what docs/api/openapi.yaml documents.
  struct RouteInfo {
    std::string method;
    std::string name;  // The OpenAPI path template.
    // The query parameters and body members it takes (any other is refused); nullopt when it does not check
    // them (the model endpoints, MCP, the routes that need no key).
    std::optional<std::vector<std::string>> takes;
  };
  std::vector<RouteInfo> Routes() const;

  struct Impl;  // Opaque.

 private:
  explicit Server(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace strata::server
