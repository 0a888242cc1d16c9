// Internal to the server: the request context, the route table and Server::Impl, shared by server.cc
// (dispatch, identity, lifecycle), routes.cc (the API routes) and chat.cc (the model endpoints).
#pragma once

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "access.h"
#include "keys.h"
#include "pg.h"
#include "strata/engine/engine.h"
#include "strata/engine/views.h"
#include "strata/json/checked.h"
#include "strata/llm/provider.h"
#include "strata/message/message.h"
#include "strata/memory/uri.h"
#include "strata/server/server.h"
#include "strata/tokenizer/registry.h"
#include "strata/util/cancel.h"

namespace strata::server {

using Json = nlohmann::ordered_json;
using memory::Uri;



// ---- Metrics (Prometheus text format) ----

constexpr double kLatencyBuckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
constexpr size_t kBucketCount = std::size(kLatencyBuckets);

struct RouteStats {
  std::map<int, int64_t> by_status;
  int64_t buckets[kBucketCount + 1] = {};  // The last one is +Inf.
  double seconds_sum = 0;
  int64_t count = 0;
};

class Metrics {
 public:
  void Record(const std::string& route, int status, double seconds) {
    std::lock_guard lock(mu_);
    RouteStats& r = routes_[route];
    r.by_status[status] += 1;
    size_t b = 0;
    while (b < kBucketCount && seconds > kLatencyBuckets[b]) ++b;
    r.buckets[b] += 1;
    r.seconds_sum += seconds;
    r.count += 1;
  }
  void Commit(const std::string& outcome) {
    std::lock_guard lock(mu_);
    commits_[outcome] += 1;
  }
  std::string Text(const std::map<std::string, int64_t>& queue) {
    std::lock_guard lock(mu_);
    std::ostringstream out;
    out << "# HELP strata_http_requests_total HTTP requests by route and status.\n"
        << "# TYPE strata_http_requests_total counter\n";
    for (const auto& [route, r] : routes_) {
      for (const auto& [status, n] : r.by_status) {
        out << "strata_http_requests_total{route=\"" << route << "\",status=\"" << status << "\"} " << n << "\n";
      }
    }
    out << "# HELP strata_http_request_duration_seconds Time to answer a request, by route.\n"
        << "# TYPE strata_http_request_duration_seconds histogram\n";
    for (const auto& [route, r] : routes_) {
      int64_t cumulative = 0;
      for (size_t b = 0; b <= kBucketCount; ++b) {
        cumulative += r.buckets[b];
        std::string le = b == kBucketCount ? "+Inf" : Format(kLatencyBuckets[b]);
        out << "strata_http_request_duration_seconds_bucket{route=\"" << route << "\",le=\"" << le << "\"} "
            << cumulative << "\n";
      }
      out << "strata_http_request_duration_seconds_sum{route=\"" << route << "\"} " << Format(r.seconds_sum) << "\n";
      out << "strata_http_request_duration_seconds_count{route=\"" << route << "\"} " << r.count << "\n";
    }
    out << "# HELP strata_queue_jobs Phase-2 jobs by state (all accounts opened by this server).\n"
        << "# TYPE strata_queue_jobs gauge\n";
    for (const auto& [state, n] : queue) out << "strata_queue_jobs{state=\"" << state << "\"} " << n << "\n";
    out << "# HELP strata_commits_total Commits by outcome (accepted: phase 1 done; the worker's results).\n"
        << "# TYPE strata_commits_total counter\n";
    for (const auto& [outcome, n] : commits_) out << "strata_commits_total{outcome=\"" << outcome << "\"} " << n << "\n";
    return out.str();
  }

 private:
  static std::string Format(double v) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
  }
  std::mutex mu_;
  std::map<std::string, RouteStats> routes_;
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
  Result<std::string> Arg(std::string_view name, bool required = true) const {
    if (auto q = req.Query(name)) return *q;
    if (const Json* f = json::Field(body, name); f != nullptr && !f->is_null()) {
      if (!f->is_string()) {
        return Status::InvalidArgument("\"" + std::string(name) + "\" must be a string, not " +
                                       std::string(json::TypeName(*f)));
      }
      return f->get<std::string>();
    }
    if (required) return Status::InvalidArgument("\"" + std::string(name) + "\" is required");
    return std::string();
  }
  Result<int64_t> IntArg(std::string_view name, int64_t fallback) const {
    if (auto q = req.Query(name)) {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(q->c_str(), &end, 10);
      if (q->empty() || *end != '\0' || errno == ERANGE) {
        return Status::InvalidArgument("\"" + std::string(name) + "\" must be an integer");
      }
      return static_cast<int64_t>(v);
    }
    if (const Json* f = json::Field(body, name); f != nullptr && !f->is_null()) {
      if (!f->is_number_integer()) return Status::InvalidArgument("\"" + std::string(name) + "\" must be an integer");
      return f->get<int64_t>();
    }
    return fallback;
  }
  bool BoolArg(std::string_view name) const {
    if (auto q = req.Query(name)) return *q == "true" || *q == "1";
    return json::BoolOr(body, name, false);
  }
  std::optional<std::string> OptString(std::string_view name) const {
    const Json* f = json::Field(body, name);
    return f != nullptr && f->is_string() ? std::optional<std::string>(f->get<std::string>()) : std::nullopt;
  }
};

using Api = std::function<Result<Json>(Call&)>;

// The two model-endpoint formats.
enum class Dialect { kOpenAI, kAnthropic };

struct RouteSpec {
  std::string method;
  std::string pattern;  // Regular expression over the path.
  std::string name;     // For metrics and the OpenAPI check: the OpenAPI path template.
  Api api;
  bool needs_key = true;  // False: health and readiness.
  // Errors in this model API's own shape (what its SDKs read), not the envelope.
  std::optional<Dialect> errors;
  bool parse_body = true;  // False: the route reads the raw body itself (MCP answers bad JSON in JSON-RPC).
  // True: a POST that changes nothing (find, token counting), so it does not bump the account's revision.
  bool read_only = false;
};

// A model request's messages as Strata messages, and its system prompt (OpenAI: the system and developer
// messages; Anthropic: "system").
struct ModelRequest {
  std::string system;
  std::vector<Message> turn;
};

// A session-mode turn: what to append once the upstream accepts it, and the session's uncommitted size
// with it (for the commit policy).
struct PendingCommit {
  std::vector<Message> turn;
  int64_t tokens = 0;
  int64_t turns = 0;
};

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
  std::unique_ptr<KeyStore> keys;
  std::unique_ptr<HttpServer> http;
  Metrics metrics;
  std::vector<RouteSpec> routes;

  std::mutex engines_mu;  // Guards engines (not the engines themselves: each is thread-safe).
  std::map<std::string, std::unique_ptr<Engine>> engines;

  std::mutex worker_mu;
  std::condition_variable worker_cv;
  bool worker_stop = false;      // Guarded by worker_mu.
  bool worker_wanted = false;    // Guarded by worker_mu.
  Canceller worker_cancel;
  std::thread worker;
  std::atomic<int> open_streams{0};
  std::atomic<int> open_event_streams{0};  // Change streams (viewers), capped apart: see TakeEventSlot.
  std::atomic<bool> shut_down{false};

  // ---- Accounts ----
  Result<Engine*> EngineFor(const std::string& account) {
    std::lock_guard lock(engines_mu);
    auto it = engines.find(account);
    if (it != engines.end()) return it->second.get();
    STRATA_RETURN_IF_ERROR(memory::ValidateScopeId(account, "account"));
    EngineOptions o = engine_options;
    if (account != "default") {
      if (pg::IsPostgresUrl(engine_options.data_dir)) {
        // Each account's tables live in a schema of its own in the one database.
        std::string schema = pg::SchemaFor(account);
        STRATA_RETURN_IF_ERROR(pg::EnsureSchema(engine_options.data_dir, schema));
        o.data_dir = pg::WithSchema(engine_options.data_dir, schema);
      } else {
        o.data_dir = engine_options.data_dir + "/accounts/" + account;
      }
    }
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::Open(o));
    Engine* raw = engine.get();
    engines[account] = std::move(engine);
    return raw;
  }

  std::vector<Engine*> OpenEngines() {
    std::lock_guard lock(engines_mu);
    std::vector<Engine*> out;
    for (auto& [name, e] : engines) out.push_back(e.get());
    return out;
  }

  // ---- Identity ----
  Result<Identity> Authenticate(const HttpRequest& req) {
    std::string key = req.Header("x-api-key");
    std::string auth = req.Header("authorization");
    if (key.empty() && auth.size() > 7 && (auth.rfind("Bearer ", 0) == 0 || auth.rfind("bearer ", 0) == 0)) {
      key = auth.substr(7);
    }
    if (!keys->has_root_key()) return Identity{"default", "default", Role::kRoot, ""};  // Loopback, no keys.
    STRATA_ASSIGN_OR_RETURN(Identity id, keys->Authenticate(key));
    if (id.role == Role::kRoot) {
      std::string account = req.Header("x-strata-account");
      if (!account.empty()) {
        STRATA_RETURN_IF_ERROR(memory::ValidateScopeId(account, "X-Strata-Account"));
        id.account = account;
      }
    }
    return id;
  }

  // The rules are in access.h; these apply them to a request's identity.
  Status CheckSession(Call& c, std::string_view sid) { return c.engine->CheckSessionAccess(ReachOf(c.id), sid); }
  Status CheckUri(Call& c, const Uri& uri, bool /*write*/) { return c.engine->CheckAccess(ReachOf(c.id), uri.str()); }

  Result<Uri> UriArg(Call& c, std::string_view name, bool write, bool required = true) {
    STRATA_ASSIGN_OR_RETURN(std::string text, c.Arg(name, required));
    if (text.empty() && required) return Status::InvalidArgument("\"" + std::string(name) + "\" must not be empty");
    if (text.empty()) {
      // Unset: everything for an admin, the user's own scope for a user.
      if (c.id.role == Role::kUser) return Uri::Parse("strata://user/" + c.id.user);
      return Uri::Root();
    }
    STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(text));
    STRATA_RETURN_IF_ERROR(CheckUri(c, uri, write));
    return uri;
  }

  // A web page must not drive the API from a user's browser: a request with an Origin other than the
  // server's own is refused (browsers send Origin on every cross-origin POST, even with mode "no-cors").
  // Without keys, the Host must be a loopback name too, so DNS rebinding cannot make a page same-origin.
  Status CheckOrigin(const HttpRequest& req) const {
    std::string host_header = req.Header("host");
    std::string origin = req.Header("origin");
    if (!origin.empty()) {
      size_t scheme = origin.find("://");
      std::string origin_host = scheme == std::string::npos ? origin : origin.substr(scheme + 3);
      if (origin_host != host_header) {
        return Status::PermissionDenied("cross-origin requests are refused (Origin " + json::QuoteForError(origin, 80) + ")");
      }
    }
    if (!keys->has_root_key() && !host_header.empty()) {
      std::string name = host_header;
      if (name.front() == '[') {
        name = name.substr(1, name.find(']') == std::string::npos ? std::string::npos : name.find(']') - 1);
      } else if (size_t colon = name.rfind(':'); colon != std::string::npos) {
        name = name.substr(0, colon);
      }
      if (!IsLoopback(name)) {
        return Status::PermissionDenied("this server has no keys and answers loopback names only (Host " +
                                        json::QuoteForError(host_header, 80) + ")");
      }
    }
    return Status::Ok();
  }

  // ---- Dispatch ----
  void Dispatch(const RouteSpec& route, const HttpRequest& req, HttpResponse& res) {
    auto started = std::chrono::steady_clock::now();
    std::string request_id = req.Header("x-request-id");
    bool id_ok = !request_id.empty() && request_id.size() <= 64 &&
                 std::all_of(request_id.begin(), request_id.end(),
                             [](char ch) { return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.'; });
    if (!id_ok) request_id = NewRequestId();
    res.headers.emplace_back("X-Request-Id", request_id);
    Result<Json> result = Status::Internal("not run");
    bool raw = false;
    try {
      Status allowed = CheckOrigin(req);
      result = allowed.ok() ? Run(route, req, res, &raw) : Result<Json>(allowed);
    } catch (const std::exception& e) {
      result = Status::Internal(std::string("unexpected error: ") + e.what());
    } catch (...) {
      result = Status::Internal("unexpected error");
    }
    if (raw && result.ok()) {
      // The handler wrote its own response (metrics text, an event stream, a proxied reply).
    } else if (result.ok()) {
      res.status = 200;
      Json envelope = {{"status", "ok"}, {"result", std::move(*result)}};
      res.body = views::Dump(envelope);
    } else {
      const Status& s = result.status();
      res.content_type = "application/json";
      res.stream = nullptr;
      res.status = HttpStatusFor(s.code());
      std::string code(StatusCodeName(s.code()));
      Json envelope;
      if (route.errors == Dialect::kOpenAI) {
        envelope = {{"error", {{"message", s.message()}, {"type", code}, {"code", code}, {"param", nullptr}}}};
      } else if (route.errors == Dialect::kAnthropic) {
        envelope = {{"type", "error"}, {"error", {{"type", AnthropicErrorType(res.status)}, {"message", s.message()}}}};
      } else {
        envelope = {{"status", "error"}, {"error", {{"code", code}, {"message", s.message()}, {"request_id", request_id}}}};
      }
      res.body = views::Dump(envelope);
      if (s.code() == StatusCode::kUnauthenticated) res.headers.emplace_back("WWW-Authenticate", "Bearer");
    }
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    metrics.Record(route.method + " " + route.name, res.status, seconds);
  }

  Result<Json> Run(const RouteSpec& route, const HttpRequest& req, HttpResponse& res, bool* raw) {
    Call c{req, res, false, Identity{}, nullptr, Json::object()};
    if (route.needs_key) {
      STRATA_ASSIGN_OR_RETURN(c.id, Authenticate(req));
      STRATA_ASSIGN_OR_RETURN(c.engine, EngineFor(c.id.account));
    }
    if (route.parse_body && !req.body.empty() && (req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
                              req.method == "DELETE")) {
      STRATA_ASSIGN_OR_RETURN(Json body, json::ParseUntrusted<Json>(req.body, "request body"));
      c.body = std::move(body);
    }
    Result<Json> result = route.api(c);
    *raw = c.raw;
    if (result.ok() && c.engine != nullptr && req.method != "GET" && !route.read_only) BumpRevision(c.engine);
    return result;
  }

  static Status CheckWholeScope(const Call& c, const Uri& uri) { return Engine::CheckWholeScope(ReachOf(c.id), uri.str()); }

  // One open stream (event stream or streamed chat), released when the response's stream function is
  // destroyed, whether or not it ever ran (a HEAD request, a client gone before the headers).
  struct StreamSlot {
    explicit StreamSlot(std::atomic<int>* n) : count(n) {}
    ~StreamSlot() { count->fetch_sub(1); }
    StreamSlot(const StreamSlot&) = delete;
    StreamSlot& operator=(const StreamSlot&) = delete;
    std::atomic<int>* count;
  };
  Result<std::shared_ptr<StreamSlot>> TakeStreamSlot() {
    if (open_streams.fetch_add(1) >= options.max_streams) {
      open_streams.fetch_sub(1);
      return Status::ResourceExhausted("too many streams open (" + std::to_string(options.max_streams) +
                                       "); try again when one ends");
    }
    return std::make_shared<StreamSlot>(&open_streams);
  }

  // A change stream (GET /api/v1/events) takes a stream slot and one of its own: open viewers, left in
  // forgotten tabs, may hold at most half the stream slots, never crowding out streamed replies.
  Result<std::shared_ptr<StreamSlot>> TakeEventSlot() {
    int cap = std::max(1, options.max_streams / 2);
    if (open_event_streams.fetch_add(1) >= cap) {
      open_event_streams.fetch_sub(1);
      return Status::ResourceExhausted("too many change streams open (" + std::to_string(cap) +
                                       "); close a viewer or try again later");
    }
    auto events = std::make_shared<StreamSlot>(&open_event_streams);
    Result<std::shared_ptr<StreamSlot>> slot = TakeStreamSlot();
    if (!slot.ok()) return slot.status();
    // Both are released together when the stream function is destroyed.
    return std::shared_ptr<StreamSlot>(slot->get(), [slot = *slot, events](StreamSlot*) {});
  }

  Status CheckRefs(Call& c, const std::vector<Message>& messages) { return c.engine->CheckRefs(ReachOf(c.id), messages); }

  void WakeWorker() {
    {
      std::lock_guard lock(worker_mu);
      worker_wanted = true;
    }
    worker_cv.notify_one();
  }

  void WorkerLoop() {
    std::map<const Engine*, std::pair<size_t, size_t>> last_queue_state;  // (pending, dead) per account.
    while (true) {
      {
        std::unique_lock lock(worker_mu);
        worker_cv.wait_for(lock, options.worker_poll, [&] { return worker_stop || worker_wanted; });
        if (worker_stop) return;
        worker_wanted = false;
      }
      CommitIdleSessions();
      for (Engine* engine : OpenEngines()) {
        Result<WorkReport> report = engine->Work(&worker_cancel);
        if (report.ok()) {
          for (int i = 0; i < report->completed; ++i) metrics.Commit("completed");
          // A finished job, or a job that failed, went dead or came back: what a viewer shows changed.
          std::pair<size_t, size_t> queue_state{report->pending, report->dead};
          if (report->completed > 0 || last_queue_state[engine] != queue_state) BumpRevision(engine);
          last_queue_state[engine] = queue_state;
        } else if (report.status().code() != StatusCode::kCancelled &&
                   report.status().code() != StatusCode::kUnavailable) {
          std::fprintf(stderr, "strata serve: phase 2: %s\n", report.status().ToString().c_str());
        }
      }
    }
  }

  void AddRoutes();
  // An audit entry's view for this caller (routes.cc).
  Json AuditView(Call& c, const session::AuditEntry& e);
  // The viewer's files and the change stream (viewer.cc).
  void AddViewerRoutes();

  // ---- Revisions: a counter per account, bumped by every request that may have changed its data and by
  // the worker's finished jobs; GET /api/v1/events streams it so that open viewers refresh. ----
  void BumpRevision(const Engine* engine);
  int64_t Revision(const Engine* engine);
  std::mutex revisions_mu;
  std::map<const Engine*, int64_t> revisions;  // Guarded by revisions_mu.

  // POST /v1/chat/completions and POST /v1/messages (chat.cc).
  Result<Json> ModelEndpoint(Call& c, Dialect dialect);
  // Assembles the request of a session-mode call into `forward`; returns the new turn, which the caller
  // appends once the upstream has accepted the request.
  Result<PendingCommit> AssembleForSession(Call& c, const std::string& session_id, const ModelRequest& parsed,
                                           const llm::ProviderConfig& upstream, Json* forward, int64_t* prompt_tokens);
  // Logs the upstream's reply to a session-mode turn, records its usage, and commits by policy.
  void LogReply(Engine* engine, const std::string& session_id, const llm::ProviderConfig& upstream, bool streamed,
                std::string_view body, const PendingCommit& pending);
  void CommitNow(Engine* engine, const std::string& session_id);
  // Idle-time commits: sessions with uncommitted proxied turns, by when they were last active.
  void NoteActivity(Engine* engine, const std::string& session_id);
  void CommitIdleSessions();
  std::mutex mcp_mu;  // Guards mcp_in_flight.
  std::map<std::string, std::shared_ptr<Canceller>> mcp_in_flight;  // MCP requests over HTTP, by key and id.
  std::mutex idle_mu;
  std::map<std::pair<Engine*, std::string>, std::chrono::steady_clock::time_point> idle;  // Guarded by idle_mu.
  std::set<std::pair<Engine*, std::string>> busy;  // Sessions with a proxied turn in progress; idle_mu.
  // Marks a session busy with a proxied turn until destroyed (after its reply is logged, or on failure).
  struct SessionTurn {
    SessionTurn(Impl* i, Engine* e, std::string s) : impl(i), engine(e), session_id(std::move(s)) {}
    ~SessionTurn();
    SessionTurn(const SessionTurn&) = delete;
    SessionTurn& operator=(const SessionTurn&) = delete;
    // Ends the turn now (idempotent): before the last chunk of a reply reaches the client.
    void Release();
    Impl* impl;
    bool released = false;  // Guarded by impl->idle_mu.
    Engine* engine;
    std::string session_id;
  };
  Result<std::shared_ptr<SessionTurn>> BeginTurn(Engine* engine, const std::string& session_id);
};

}  // namespace strata::server
