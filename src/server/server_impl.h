// Internal to the server: a request's context (Call), the route table (RouteSpec) and Server::Impl, shared by
// server.cc (dispatch, identity, accounts, lifecycle, the worker), the route registrars (routes_*.cc, chat.cc,
// mcp.cc's transport, viewer.cc) and metrics.cc. Declarations only: the bodies live in those files.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "access.h"
#include "strata/engine/engine.h"
#include "strata/engine/views.h"
#include "strata/json/checked.h"
#include "strata/llm/provider.h"
#include "strata/memory/uri.h"
#include "strata/server/mcp.h"
#include "strata/server/server.h"
#include "strata/tokenizer/registry.h"
#include "strata/util/cancel.h"

namespace strata::server {

using Json = nlohmann::ordered_json;
using memory::Uri;

// ---- Metrics (Prometheus text format; metrics.cc) ----

class Metrics {
 public:
  void Record(const std::string& route, int status, double seconds);
  void Commit(const std::string& outcome);
  // The exposition text, with the phase-2 queue's jobs by state.
  std::string Text(const std::map<std::string, int64_t>& queue);

 private:
  struct RouteStats;
  std::mutex mu_;  // Guards the two maps.
  std::map<std::string, std::shared_ptr<RouteStats>> routes_;
  std::map<std::string, int64_t> commits_;
};

// ---- One request ----

struct Call {
  const HttpRequest& req;
  HttpResponse& res;  // Handlers that answer other than in the envelope write it directly and set `raw`.
  bool raw = false;
  Identity id;
  Engine* engine = nullptr;
  Json body;  // The parsed body of requests that have one (an object).

  // The query parameter or body member `name` as a string; kInvalidArgument naming it when required.
  Result<std::string> Arg(std::string_view name, bool required = true) const;
  Result<int64_t> IntArg(std::string_view name, int64_t fallback) const;
  Result<std::optional<int64_t>> OptIntArg(std::string_view name) const;  // nullopt when absent or null.
  // true/false (query string: true, false, 1, 0, or the bare name for true); `fallback` when absent or null; any other value is
  // refused naming it (a "false" string must not count as true, nor "yes" as false).
  Result<bool> BoolArg(std::string_view name, bool fallback = false) const;
  // The query parameter or string member of the body `name`: absent (or a null member) is nullopt, "" is
  // given; another type an error naming it.
  Result<std::optional<std::string>> OptString(std::string_view name) const;
  Reach reach() const { return ReachOf(id); }
};

using Api = std::function<Result<Json>(Call&)>;

// The two model-endpoint formats.
enum class Dialect { kOpenAI, kAnthropic };

// One route, whole: registrars build it with Route() and its modifiers, and nothing changes it afterwards.
struct RouteSpec {
  std::string method;
  std::string pattern;  // Regular expression over the path.
  std::string name;     // The OpenAPI path template (metrics, the OpenAPI check).
  Api api;
  bool needs_key = true;  // False: health, readiness, the viewer's files.
  // Errors in this model API's own shape (what its SDKs read), not the envelope.
  std::optional<Dialect> errors;
  bool parse_body = true;  // False: the route reads the raw body itself (MCP answers bad JSON in JSON-RPC).
  bool list_body = false;  // True: the body may be a JSON array (a list of messages) as well as an object.
  // True: a request that changes nothing (a GET, find, token counting), so it does not bump the account's
  // revision; a handler that changes data only sometimes bumps it itself.
  bool read_only = false;
  // The query parameters and body members the route takes (docs/api/openapi.yaml lists the same, checked by
  // ServerTest.EachRouteTakesWhatTheOpenApiDocumentLists); any other is refused naming it, as MCP refuses an
  // unknown argument: a misspelt "overwite" must not be ignored. Not checked on routes that answer a model
  // API's dialect (its SDKs send members of their own), read their raw body, or need no key.
  std::vector<std::string> takes;
  // Those of `takes` the route reads from the JSON body only (objects and arrays, and options its body
  // reader reads): in the query string they are refused, naming where they go, not ignored.
  std::vector<std::string> body_only;

  RouteSpec NoKey() && { needs_key = false; return std::move(*this); }
  RouteSpec ReadOnly() && { read_only = true; return std::move(*this); }
  RouteSpec RawBody() && { parse_body = false; return std::move(*this); }
  RouteSpec ListBody() && { list_body = true; return std::move(*this); }
  RouteSpec Errors(Dialect dialect) && { errors = dialect; return std::move(*this); }
  // Names separated by spaces: Takes("uri limit recursive").
  RouteSpec Takes(std::string_view names) &&;
  // Names (as Takes) the route takes in the JSON body only; each is taken, too.
  RouteSpec BodyOnly(std::string_view names) &&;
  // Whether the request's names are checked against `takes`.
  bool ChecksNames() const { return needs_key && parse_body && !errors; }
};

// A route whose OpenAPI path template is `name`; {id}, {name} and {file} match one path segment
// ([A-Za-z0-9_.-]+). GETs are read-only.
RouteSpec Route(std::string method, std::string name, Api api);

// Anthropic's error type for an HTTP status ("invalid_request_error", ...).
std::string_view AnthropicErrorType(int http_status);
// A new request id ("req-<start>-<counter>").
std::string NewRequestId();
bool IsLoopback(const std::string& host);

struct Server::Impl {
  EngineOptions engine_options;
  ServerOptions options;
  std::string host;
  int port = 0;
  std::string root_key_hash;  // SHA-256 of the root key; "" when the server has none.
  KeyStore* keys = nullptr;   // The default account's (engine/keys.h).
  std::unique_ptr<HttpServer> http;
  Metrics metrics;
  std::vector<RouteSpec> routes;
  std::unique_ptr<McpHttpTransport> mcp;  // /mcp (mcp.h), with its requests in flight.

  std::mutex engines_mu;  // Guards engines (not the engines themselves: each is thread-safe).
  std::map<std::string, std::unique_ptr<Engine>> engines;

  std::mutex worker_mu;
  std::condition_variable worker_cv;
  bool worker_stop = false;    // Guarded by worker_mu.
  bool worker_wanted = false;  // Guarded by worker_mu.
  Canceller worker_cancel;
  // Cancelled when Shutdown begins: the long requests in flight (remember, consolidate, MCP's tools) stop
  // at their next model call instead of holding the shutdown (and owner locks) until they are done.
  Canceller shutdown_cancel;
  std::thread worker;
  std::atomic<int> open_streams{0};
  std::atomic<int> open_event_streams{0};  // Change streams (viewers), capped apart: see TakeEventSlot.
  std::atomic<bool> shut_down{false};

  // ---- Accounts and identity (server.cc) ----
  // The account's engine, opened on first use (Engine::OpenAccount decides where its data lives).
  Result<Engine*> EngineFor(const std::string& account);
  bool EngineOpen(const std::string& account);  // Whether EngineFor(account) has opened it already.
  std::vector<Engine*> OpenEngines();
  bool has_keys() const { return !root_key_hash.empty(); }
  Result<Identity> Authenticate(const HttpRequest& req);
  // For a stream that outlives its request's check (events, a task's progress): the "event: error" that
  // ends it when `req`'s key no longer authenticates (revoked since), or when `allowed`, given the
  // identity, refuses it what it streams (permission denied, not found); nullopt while it may go on (a
  // check that failed for another reason, a database busy a moment, is made again next time).
  std::optional<std::string> StreamRefusal(const HttpRequest& req,
                                           const std::function<Status(const Identity&)>& allowed = nullptr);
  // A web page must not drive the API from a user's browser; without keys, only loopback Host names.
  Status CheckOrigin(const HttpRequest& req) const;

  // Access (the rules are the Engine's; these apply them to a request's identity).
  // The reference of the session the caller may use (Engine::CheckSessionAccess): the call that follows is
  // made with it, so that a session deleted and made again under the id in between is not acted on.
  Result<std::string> CheckSession(Call& c, std::string_view sid) { return c.engine->CheckSessionAccess(c.reach(), sid); }
  Status CheckUri(Call& c, const Uri& uri) { return c.engine->CheckAccess(c.reach(), uri.str()); }
  Status CheckRefs(Call& c, const std::vector<Message>& messages) { return c.engine->CheckRefs(c.reach(), messages); }
  static Status CheckWholeScope(const Call& c, const Uri& uri) { return Engine::CheckWholeScope(c.reach(), uri.str()); }
  // The URI argument `name`, checked against the caller; unset (when not required): everything for an
  // admin, the user's own scope for a user.
  Result<Uri> UriArg(Call& c, std::string_view name, bool required = true);

  // ---- Dispatch (server.cc) ----
  void Dispatch(const RouteSpec& route, const HttpRequest& req, HttpResponse& res);
  Result<Json> Run(const RouteSpec& route, const HttpRequest& req, HttpResponse& res, bool* raw);

  // ---- Streams (server.cc) ----
  // One open stream (event stream or streamed chat), released when the response's stream function is
  // destroyed, whether or not it ever ran (a HEAD request, a client gone before the headers).
  struct StreamSlot {
    explicit StreamSlot(std::atomic<int>* n) : count(n) {}
    ~StreamSlot() { count->fetch_sub(1); }
    StreamSlot(const StreamSlot&) = delete;
    StreamSlot& operator=(const StreamSlot&) = delete;
    std::atomic<int>* count;
  };
  Result<std::shared_ptr<StreamSlot>> TakeStreamSlot();
  // A change stream takes a stream slot and one of its own: viewers may hold at most half the slots.
  Result<std::shared_ptr<StreamSlot>> TakeEventSlot();

  // ---- The phase-2 worker (server.cc) ----
  void WakeWorker();
  void WorkerLoop();

  // ---- Revisions (viewer.cc): a counter per account, bumped by every request that may have changed its
  // data and by the worker's finished jobs; GET /api/v1/events streams it so that open viewers refresh. ----
  void BumpRevision(const Engine* engine);
  int64_t Revision(const Engine* engine);
  std::mutex revisions_mu;
  std::map<const Engine*, int64_t> revisions;  // Guarded by revisions_mu.
  // Where this process's revisions start (random, below 2^52): a viewer that reconnects to a restarted
  // server, or to another instance, must not meet the revision it last saw after as many changes.
  const int64_t revision_base = RandomRevisionBase();
  static int64_t RandomRevisionBase();

  // ---- The route registrars ----
  void Add(RouteSpec route) { routes.push_back(std::move(route)); }
  void AddServiceRoutes();   // routes_service.cc: health, readiness, metrics, keys, tokens, prompts, MCP.
  void AddStoreRoutes();     // routes_store.cc: fs/*, search/find.
  void AddSessionRoutes();   // routes_sessions.cc: sessions/*, tasks/*.
  void AddMemoryRoutes();    // routes_memories.cc: memories/*, skills/*.
  void AddModelRoutes();     // chat.cc: /v1/chat/completions, /v1/messages.
  void AddViewerRoutes();    // viewer.cc: the viewer's files and the change stream.

  // An audit entry's view for this caller (routes_memories.cc).
  Json AuditView(Call& c, const session::AuditEntry& e);

  // The model endpoints (chat.cc).
  Result<Json> ModelEndpoint(Call& c, Dialect dialect);
  // Hands the upstream's reply to a session's turn (logged, usage recorded, committed by policy).
  Status FinishTurn(Engine* engine, Turn& turn, const llm::ProviderConfig& upstream, bool streamed, std::string_view body);
};

}  // namespace strata::server
