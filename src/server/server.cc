#include "strata/server/server.h"

#include <algorithm>
#include <cerrno>
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <thread>

#include "keys.h"
#include "strata/engine/views.h"
#include "strata/json/checked.h"
#include "strata/memory/uri.h"
#include "strata/message/message_json.h"
#include "strata/prompt/value.h"
#include "strata/tokenizer/encoding.h"
#include "strata/engine/provider_config.h"
#include "strata/llm/http.h"
#include "strata/llm/wire.h"
#include "strata/util/cancel.h"
#include "strata/window/assembler.h"

namespace strata::server {
namespace {

namespace fs = std::filesystem;
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

struct RouteSpec {
  std::string method;
  std::string pattern;  // Regular expression over the path.
  std::string name;     // For metrics and the OpenAPI check: the OpenAPI path template.
  Api api;
  bool needs_key = true;  // False: health and readiness.
};

std::string NewRequestId() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t start = std::random_device{}();
  char buf[40];
  std::snprintf(buf, sizeof buf, "req-%08llx-%06llx", static_cast<unsigned long long>(start & 0xffffffff),
                static_cast<unsigned long long>(++counter));
  return buf;
}

// The tokens of `text` in `encoding` (exact BPE), or characters / 4 for "chars".
Result<int64_t> CountText(const std::string& encoding, std::string_view text) {
  if (encoding == "chars") return static_cast<int64_t>((text.size() + 3) / 4);
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const tokenizer::Encoding>> loaded;
  std::shared_ptr<const tokenizer::Encoding> e;
  {
    std::lock_guard lock(mu);
    auto it = loaded.find(encoding);
    if (it == loaded.end()) {
      STRATA_ASSIGN_OR_RETURN(e, tokenizer::Encoding::Load(encoding));
      loaded[encoding] = e;
    } else {
      e = it->second;
    }
  }
  return static_cast<int64_t>(e->Count(text));
}

bool IsLoopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

}  // namespace

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
  std::atomic<bool> shut_down{false};

  // ---- Accounts ----
  Result<Engine*> EngineFor(const std::string& account) {
    std::lock_guard lock(engines_mu);
    auto it = engines.find(account);
    if (it != engines.end()) return it->second.get();
    STRATA_RETURN_IF_ERROR(memory::ValidateScopeId(account, "account"));
    EngineOptions o = engine_options;
    if (account != "default") o.data_dir = engine_options.data_dir + "/accounts/" + account;
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

  // The session `sid` exists and `id` may use it.
  Status CheckSession(Call& c, std::string_view sid) {
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, c.engine->GetSession(sid));
    if (c.id.role == Role::kUser && info.user != c.id.user) {
      // Not "forbidden": another user's session is not even said to exist.
      return Status::NotFound("no session " + std::string(sid));
    }
    return Status::Ok();
  }

  // Whether `id` may read (or write) `uri`: everything for root and admin; for a user, its own user scope,
  // its own sessions' scopes, and the shared resources and agent scopes.
  Status CheckUri(Call& c, const Uri& uri, bool write) {
    (void)write;
    if (c.id.role != Role::kUser) return Status::Ok();
    std::string_view kind = uri.kind();
    auto deny = [&] {
      return Status::PermissionDenied("this key reaches strata://user/" + c.id.user +
                                      ", its own sessions, strata://resources and strata://agent; not " + uri.str());
    };
    if (kind == "resources" || kind == "agent") return Status::Ok();
    if (kind == "user") return uri.scope_id() == c.id.user ? Status::Ok() : deny();
    if (kind == "session") {
      if (uri.scope_id().empty()) return deny();
      Status s = CheckSession(c, uri.scope_id());
      return s.ok() ? s : deny();
    }
    return deny();  // The root and the kind directories list every user.
  }

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
      Json envelope = {{"status", "error"},
                       {"error", {{"code", std::string(StatusCodeName(s.code()))},
                                  {"message", s.message()},
                                  {"request_id", request_id}}}};
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
    if (!req.body.empty() && (req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
                              req.method == "DELETE")) {
      STRATA_ASSIGN_OR_RETURN(Json body, json::ParseUntrusted<Json>(req.body, "request body"));
      c.body = std::move(body);
    }
    Result<Json> result = route.api(c);
    *raw = c.raw;
    return result;
  }

  // A user key may not remove or move a scope root or kind directory (all of strata://resources, an
  // agent's scope, its own scope) in one call: shared scopes belong to the account.
  static Status CheckWholeScope(const Call& c, const Uri& uri) {
    if (c.id.role == Role::kUser && (uri.is_root() || uri.is_kind_dir() || uri.is_scope_root())) {
      return Status::PermissionDenied("a user key cannot remove or move " + uri.str() + " as a whole");
    }
    return Status::Ok();
  }

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

  // The context_ref parts of `messages` point only where the caller may read: phase 2 links memories to
  // them, and a link names both ends.
  Status CheckRefs(Call& c, const std::vector<Message>& messages) {
    for (const Message& m : messages) {
      for (const ContentPart& part : m.content) {
        const auto* custom = std::get_if<CustomPart>(&part);
        if (custom == nullptr || custom->type != "context_ref") continue;
        Json j = json::ParseOrDiscard<Json>(custom->json);
        STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(json::StringOr(j, "uri")));
        STRATA_RETURN_IF_ERROR(CheckUri(c, uri, false));
      }
    }
    return Status::Ok();
  }

  void WakeWorker() {
    {
      std::lock_guard lock(worker_mu);
      worker_wanted = true;
    }
    worker_cv.notify_one();
  }

  void WorkerLoop() {
    while (true) {
      {
        std::unique_lock lock(worker_mu);
        worker_cv.wait_for(lock, options.worker_poll, [&] { return worker_stop || worker_wanted; });
        if (worker_stop) return;
        worker_wanted = false;
      }
      for (Engine* engine : OpenEngines()) {
        Result<WorkReport> report = engine->Work(&worker_cancel);
        if (report.ok()) {
          for (int i = 0; i < report->completed; ++i) metrics.Commit("completed");
        } else if (report.status().code() != StatusCode::kCancelled &&
                   report.status().code() != StatusCode::kUnavailable) {
          std::fprintf(stderr, "strata serve: phase 2: %s\n", report.status().ToString().c_str());
        }
      }
    }
  }

  void AddRoutes();
  Result<Json> ChatCompletions(Call& c);
  // Assembles the request of a session-mode call into `forward`; returns the new turn, which the caller
  // appends once the upstream has accepted the request.
  Result<std::vector<Message>> AssembleForSession(Call& c, const std::string& session_id, const Json& messages,
                                                  const llm::ProviderConfig& upstream, Json* forward,
                                                  int64_t* prompt_tokens);
  void LogReply(Engine* engine, const std::string& session_id, const llm::ProviderConfig& upstream, bool streamed,
                std::string_view body);
  void MaybeCommit(Engine* engine, const std::string& session_id);
};

namespace {

// The text of an OpenAI message's content: a string, or the text parts of an array.
std::string ContentText(const Json& content) {
  if (content.is_string()) return content.get<std::string>();
  std::string out;
  if (content.is_array()) {
    for (const Json& part : content) {
      if (json::StringOr(part, "type") == "text") out += json::StringOr(part, "text");
    }
  }
  return out;
}

}  // namespace

Result<Json> Server::Impl::ChatCompletions(Call& c) {
  STRATA_ASSIGN_OR_RETURN(const ConfigFile* config, c.engine->config());
  STRATA_ASSIGN_OR_RETURN(llm::ProviderConfig upstream, ResolveProviderConfig(engine_options.provider, *config));
  if (upstream.kind != llm::ProviderKind::kOpenAIChat && upstream.kind != llm::ProviderKind::kKimi) {
    return Status::FailedPrecondition("/v1/chat/completions forwards to an OpenAI-compatible upstream; the configured "
                                      "provider speaks " + std::string(llm::ProviderKindName(upstream.kind)));
  }
  const Json* messages = json::Field(c.body, "messages");
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    return Status::InvalidArgument("\"messages\" must be a non-empty array");
  }
  const Json* stream_flag = json::Field(c.body, "stream");
  bool stream = stream_flag != nullptr && stream_flag->is_boolean() && stream_flag->get<bool>();
  Json forward = c.body;
  if (json::StringOr(forward, "model").empty()) forward["model"] = upstream.model;
  std::string model = forward["model"].get<std::string>();

  std::string session_id = c.req.Header("x-strata-session");
  int64_t prompt_tokens = -1;
  std::vector<Message> turn;
  std::shared_ptr<StreamSlot> slot;
  if (stream) {
    STRATA_ASSIGN_OR_RETURN(slot, TakeStreamSlot());
  }
  if (!session_id.empty()) {
    STRATA_ASSIGN_OR_RETURN(turn, AssembleForSession(c, session_id, *messages, upstream, &forward, &prompt_tokens));
  } else if (auto parsed = ParseMessages(messages->dump()); parsed.ok()) {
    prompt_tokens = Engine::Counter("o200k_base").CountMessages(*parsed);
  }

  llm::HttpRequest request;
  request.url = upstream.base_url + llm::RequestPath(upstream.kind, model, stream);
  request.headers = {{"Content-Type", "application/json"}};
  if (!upstream.api_key.empty()) request.headers.emplace_back("Authorization", "Bearer " + upstream.api_key);
  if (stream) request.headers.emplace_back("Accept", "text/event-stream");
  request.body = forward.dump();
  std::shared_ptr<llm::HttpTransport> transport = upstream.transport ? upstream.transport : llm::CurlTransport();
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<llm::HttpResponse> response, transport->Send(request, upstream.http, nullptr));
  // The turn joins the session only once the upstream has taken the request: a refused request can be
  // retried without logging the turn twice.
  if (!session_id.empty() && response->status() < 400 && !turn.empty()) {
    STRATA_RETURN_IF_ERROR(c.engine->AddMessages(session_id, turn).status());
  }

  c.raw = true;
  if (prompt_tokens >= 0) c.res.headers.emplace_back("X-Strata-Prompt-Tokens", std::to_string(prompt_tokens));
  if (!session_id.empty()) c.res.headers.emplace_back("X-Strata-Session", session_id);
  c.res.status = response->status();
  std::string content_type(response->header("content-type"));
  c.res.content_type = content_type.empty() ? "application/json" : content_type;
  if (response->status() >= 400 || !stream) {
    // A whole body: the upstream's error (already in OpenAI's shape) or a non-streamed completion.
    STRATA_ASSIGN_OR_RETURN(std::string body, llm::ReadAll(*response));
    if (response->status() < 400 && !session_id.empty()) LogReply(c.engine, session_id, upstream, false, body);
    c.res.body = std::move(body);
    return Json();
  }
  // Streamed: each chunk goes to the client as it arrives; the whole stream is decoded for the log at the end.
  std::shared_ptr<llm::HttpResponse> live(std::move(response));
  Engine* engine = c.engine;
  // The last chunk is held back until the reply is in the session's log, so a client that sends its next
  // turn as soon as the stream ends finds the previous reply there.
  c.res.stream = [this, live, engine, session_id, upstream, slot](const ChunkWriter& write) {
    constexpr size_t kMaxLoggedReply = 16 << 20;  // A longer reply is passed on but not logged.
    std::string all, chunk, held;
    bool too_long = false;
    while (!shut_down.load()) {
      Result<bool> more = live->Read(&chunk);
      if (!more.ok() || !*more) break;
      if (!session_id.empty() && !too_long) {
        all += chunk;
        too_long = all.size() > kMaxLoggedReply;
      }
      if (!held.empty() && !write(held)) return;  // The client went away: nothing of the reply is logged.
      held.swap(chunk);
    }
    if (!session_id.empty() && !too_long) LogReply(engine, session_id, upstream, true, all);
    if (too_long) std::fprintf(stderr, "strata serve: session %s: a reply over 16 MiB was not logged\n", session_id.c_str());
    if (!held.empty()) write(held);
  };
  return Json();
}

Result<std::vector<Message>> Server::Impl::AssembleForSession(Call& c, const std::string& session_id,
                                                              const Json& messages,
                                                              const llm::ProviderConfig& upstream, Json* forward,
                                                              int64_t* prompt_tokens) {
  Result<session::SessionInfo> info = c.engine->GetSession(session_id);
  if (!info.ok() && info.status().code() == StatusCode::kNotFound) {
    std::string user = c.id.role == Role::kUser ? c.id.user : c.req.Header("x-strata-user");
    info = c.engine->CreateSession(user, c.req.Header("x-strata-agent"), session_id);
  }
  if (!info.ok()) return info.status();
  if (c.id.role == Role::kUser && info->user != c.id.user) return Status::NotFound("no session " + session_id);

  // The system messages of the request are its system prompt (not logged); the rest is the new turn.
  std::string system;
  Json turn = Json::array();
  for (const Json& m : messages) {
    std::string role = json::StringOr(m, "role");
    if (role == "system" || role == "developer") {
      if (!system.empty()) system += "\n\n";
      system += ContentText(json::Field(m, "content") != nullptr ? m["content"] : Json());
    } else {
      turn.push_back(m);
    }
  }
  std::string query;
  std::vector<Message> added;
  if (!turn.empty()) {
    STRATA_ASSIGN_OR_RETURN(added, ParseMessages(turn.dump()));
    STRATA_RETURN_IF_ERROR(CheckRefs(c, added));
    for (const Json& m : turn) {
      if (json::StringOr(m, "role") == "user") query = ContentText(json::Field(m, "content") ? m["content"] : Json());
    }
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<Message> history, c.engine->SessionMessages(session_id));
  history.insert(history.end(), added.begin(), added.end());

  // What Strata remembers that bears on the newest user message.
  if (!query.empty() && !info->user.empty()) {
    memory::FindOptions o;
    auto under = Uri::Parse("strata://user/" + info->user);
    if (under.ok()) {
      o.under = *under;
      o.limit = 5;
      auto hits = c.engine->Find(query, o);
      if (hits.ok() && !hits->empty()) {
        system += system.empty() ? "" : "\n\n";
        system += "What you remember about this user (from earlier sessions):";
        for (const memory::Hit& h : *hits) {
          if (!h.is_dir && !h.abstract_text.empty()) system += "\n- " + h.abstract_text;
        }
      }
    }
  }

  const MessageTokenCounter& counter = Engine::Counter("o200k_base");
  int64_t window = options.upstream_context_tokens;
  if (std::string header = c.req.Header("x-strata-max-context"); !header.empty()) {
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(header.c_str(), &end, 10);
    if (*end != '\0' || v <= 0 || errno == ERANGE) {
      return Status::InvalidArgument("X-Strata-Max-Context must be a positive integer");
    }
    window = v;
  }
  int64_t reserve = json::IntOr(c.body, "max_completion_tokens", json::IntOr(c.body, "max_tokens", 4096));
  window::AssembleOptions ao;
  ao.max_context_tokens = window;
  ao.reserve_for_reply = std::min<int64_t>(reserve, window / 2);
  ao.system_prompt = system;
  if (const Json* tools = json::Field(c.body, "tools"); tools != nullptr) {
    STRATA_ASSIGN_OR_RETURN(ao.reserved_tokens, CountText("o200k_base", tools->dump()));
  }
  window::HistoryIndex index(&counter);
  index.Sync(history);
  STRATA_ASSIGN_OR_RETURN(window::Assembly assembly, window::Assemble(history, index, ao, counter));
  std::vector<Message> sent = window::AssembledMessages(history, assembly, ao);
  llm::ChatRequest request;
  request.model = json::StringOr(*forward, "model");
  request.system_prompt = system;
  request.history = std::move(sent);
  request.options = upstream.options;
  STRATA_ASSIGN_OR_RETURN(std::string wire, llm::BuildRequestBody(upstream.kind, request));
  Json built = Json::parse(wire);
  (*forward)["messages"] = built["messages"];
  *prompt_tokens = assembly.total_tokens;
  return added;
}

void Server::Impl::LogReply(Engine* engine, const std::string& session_id, const llm::ProviderConfig& upstream,
                            bool streamed, std::string_view body) {
  Result<llm::DecodedResponse> reply = streamed ? llm::DecodeSseText(upstream.kind, upstream.options, body)
                                                : llm::DecodeResponseBody(upstream.kind, upstream.options, body);
  if (!reply.ok()) {
    std::fprintf(stderr, "strata serve: session %s: the reply was not logged: %s\n", session_id.c_str(),
                 reply.status().ToString().c_str());
    return;
  }
  Status added = engine->AddMessages(session_id, std::vector<Message>{reply->message}).status();
  if (!added.ok()) {
    std::fprintf(stderr, "strata serve: session %s: %s\n", session_id.c_str(), added.ToString().c_str());
    return;
  }
  MaybeCommit(engine, session_id);
}

void Server::Impl::MaybeCommit(Engine* engine, const std::string& session_id) {
  auto history = engine->SessionMessages(session_id);
  if (!history.ok()) return;
  int64_t turns = 0;
  for (const Message& m : *history) turns += m.role == strata::Role::kUser ? 1 : 0;
  int64_t tokens = Engine::Counter("o200k_base").CountMessages(*history);
  bool due = (options.commit_after_tokens > 0 && tokens >= options.commit_after_tokens) ||
             (options.commit_after_turns > 0 && turns >= options.commit_after_turns);
  if (!due) return;
  if (engine->Commit(session_id, {.wait = false}).ok()) {
    metrics.Commit("accepted");
    WakeWorker();
  }
}

// Builds the route table; every route here is in docs/api/openapi.yaml (ServerTest checks both ways).
void Server::Impl::AddRoutes() {
  auto add = [this](std::string method, std::string pattern, std::string name, Api api, bool needs_key = true) {
    routes.push_back({std::move(method), std::move(pattern), std::move(name), std::move(api), needs_key});
  };
  constexpr const char* kId = "([A-Za-z0-9_.-]+)";
  const std::string sid = kId;

  // ---- Service ----
  add("GET", "/health", "/health", [](Call&) -> Result<Json> { return Json{{"alive", true}}; }, false);
  add("GET", "/ready", "/ready", [this](Call&) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Engine * engine, EngineFor("default"));
    STRATA_RETURN_IF_ERROR(engine->store().status());
    STRATA_RETURN_IF_ERROR(engine->sessions().status());
    return Json{{"ready", true}};
  }, false);
  add("GET", "/metrics", "/metrics", [this](Call& c) -> Result<Json> {
    if (c.id.role != Role::kRoot) return Status::PermissionDenied("metrics cover every account: they need the root key");
    std::map<std::string, int64_t> queue;
    for (Engine* engine : OpenEngines()) {
      auto q = engine->queue();
      if (!q.ok()) continue;
      auto jobs = (*q)->List(std::nullopt);
      if (!jobs.ok()) continue;
      for (const session::Job& j : *jobs) queue[std::string(session::JobStateName(j.state))] += 1;
    }
    // Written directly: Prometheus reads text, not the JSON envelope.
    c.res.content_type = "text/plain; version=0.0.4";
    c.res.body = metrics.Text(queue);
    c.raw = true;
    return Json();
  });

  // ---- The store ----
  auto list = [this](bool recursive) {
    return [this, recursive](Call& c) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", false, false));
      STRATA_ASSIGN_OR_RETURN(int64_t limit, c.IntArg("limit", 0));
      STRATA_ASSIGN_OR_RETURN(auto nodes, c.engine->List(uri.str(), {.recursive = recursive || c.BoolArg("recursive"),
                                                                     .limit = static_cast<size_t>(std::max<int64_t>(0, limit))}));
      Json out = Json::array();
      for (const memory::Node& n : nodes) out.push_back(views::NodeView(n));
      return out;
    };
  };
  add("GET", "/api/v1/fs/ls", "/api/v1/fs/ls", list(false));
  add("GET", "/api/v1/fs/tree", "/api/v1/fs/tree", list(true));
  add("GET", "/api/v1/fs/stat", "/api/v1/fs/stat", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", false));
    STRATA_ASSIGN_OR_RETURN(memory::Node node, c.engine->Stat(uri.str()));
    STRATA_ASSIGN_OR_RETURN(auto relations, c.engine->Relations(uri.str()));
    // A relation names both its ends: one the caller cannot reach is left out (it would reveal another
    // user's memory or session).
    std::erase_if(relations, [&](const memory::Relation& r) {
      return !CheckUri(c, r.from, false).ok() || !CheckUri(c, r.to, false).ok();
    });
    return views::NodeDetailView(node, relations);
  });
  add("GET", "/api/v1/fs/read", "/api/v1/fs/read", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", false));
    STRATA_ASSIGN_OR_RETURN(int64_t level, c.IntArg("level", 2));
    if (level < 0 || level > 2) return Status::InvalidArgument("\"level\" must be 0 (abstract), 1 (overview) or 2 (content)");
    STRATA_ASSIGN_OR_RETURN(std::string text, c.engine->Read(uri.str(), static_cast<memory::Level>(level)));
    return Json{{"uri", uri.str()}, {"level", level}, {"content", text}};
  });
  add("POST", "/api/v1/fs/write", "/api/v1/fs/write", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", true));
    STRATA_ASSIGN_OR_RETURN(std::string content, c.Arg("content"));
    memory::WriteOptions o;
    o.abstract_text = c.OptString("abstract");
    o.overview = c.OptString("overview");
    o.category = c.OptString("category");
    if (const Json* m = json::Field(c.body, "metadata"); m != nullptr && !m->is_null()) {
      if (!m->is_object()) return Status::InvalidArgument("\"metadata\" must be an object");
      o.metadata = m->dump();
    }
    o.overwrite = json::BoolOr(c.body, "overwrite", true);
    STRATA_RETURN_IF_ERROR(c.engine->Write(uri.str(), content, o));
    STRATA_ASSIGN_OR_RETURN(memory::Node node, c.engine->Stat(uri.str()));
    return views::NodeView(node);
  });
  add("POST", "/api/v1/fs/mkdir", "/api/v1/fs/mkdir", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", true));
    memory::WriteOptions o;
    o.abstract_text = c.OptString("abstract");
    o.overview = c.OptString("overview");
    STRATA_RETURN_IF_ERROR(c.engine->Mkdir(uri.str(), o));
    STRATA_ASSIGN_OR_RETURN(memory::Node node, c.engine->Stat(uri.str()));
    return views::NodeView(node);
  });
  add("POST", "/api/v1/fs/mv", "/api/v1/fs/mv", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri from, UriArg(c, "from", true));
    STRATA_ASSIGN_OR_RETURN(Uri to, UriArg(c, "to", true));
    STRATA_RETURN_IF_ERROR(CheckWholeScope(c, from));
    STRATA_RETURN_IF_ERROR(c.engine->Move(from.str(), to.str()));
    return Json{{"from", from.str()}, {"to", to.str()}};
  });
  add("DELETE", "/api/v1/fs", "/api/v1/fs", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", true));
    STRATA_RETURN_IF_ERROR(CheckWholeScope(c, uri));
    STRATA_ASSIGN_OR_RETURN(int64_t removed, c.engine->Remove(uri.str(), c.BoolArg("recursive")));
    return Json{{"removed", removed}};
  });
  add("POST", "/api/v1/fs/link", "/api/v1/fs/link", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri from, UriArg(c, "from", true));
    STRATA_ASSIGN_OR_RETURN(Uri to, UriArg(c, "to", false));
    STRATA_ASSIGN_OR_RETURN(std::string reason, c.Arg("reason", false));
    STRATA_RETURN_IF_ERROR(c.engine->Link(from.str(), to.str(), reason));
    return Json{{"from", from.str()}, {"to", to.str()}, {"reason", reason}};
  });
  add("POST", "/api/v1/fs/unlink", "/api/v1/fs/unlink", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri from, UriArg(c, "from", true));
    STRATA_ASSIGN_OR_RETURN(Uri to, UriArg(c, "to", false));
    STRATA_RETURN_IF_ERROR(c.engine->Unlink(from.str(), to.str()));
    return Json{{"from", from.str()}, {"to", to.str()}};
  });
  add("GET", "/api/v1/fs/glob", "/api/v1/fs/glob", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string pattern, c.Arg("pattern"));
    STRATA_ASSIGN_OR_RETURN(Uri under, UriArg(c, "under", false, false));
    STRATA_ASSIGN_OR_RETURN(auto nodes, c.engine->Glob(pattern, under.str()));
    Json out = Json::array();
    for (const memory::Node& n : nodes) out.push_back(views::NodeView(n));
    return out;
  });
  add("GET", "/api/v1/fs/grep", "/api/v1/fs/grep", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string pattern, c.Arg("pattern"));
    STRATA_ASSIGN_OR_RETURN(Uri under, UriArg(c, "under", false, false));
    STRATA_ASSIGN_OR_RETURN(auto matches, c.engine->Grep(pattern, under.str(), c.BoolArg("ignore_case")));
    Json out = Json::array();
    for (const memory::GrepMatch& m : matches) {
      out.push_back({{"uri", m.uri.str()}, {"line", m.line}, {"text", m.text}, {"superseded", m.superseded}});
    }
    return out;
  });
  add("POST", "/api/v1/search/find", "/api/v1/search/find", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string query, c.Arg("query"));
    STRATA_ASSIGN_OR_RETURN(Uri under, UriArg(c, "under", false, false));
    STRATA_ASSIGN_OR_RETURN(int64_t limit, c.IntArg("limit", 10));
    STRATA_ASSIGN_OR_RETURN(int64_t budget, c.IntArg("token_budget", 0));
    if (limit < 1 || limit > 1000) return Status::InvalidArgument("\"limit\" must be between 1 and 1000");
    memory::FindOptions o;
    o.under = under;
    o.limit = static_cast<size_t>(limit);
    STRATA_ASSIGN_OR_RETURN(auto hits, c.engine->Find(query, o));
    // With a token budget, the hits whose abstracts fit it, best first.
    Json out = Json::array();
    int64_t used = 0;
    for (const memory::Hit& h : hits) {
      STRATA_ASSIGN_OR_RETURN(int64_t tokens, CountText("o200k_base", h.abstract_text));
      if (budget > 0 && used + tokens > budget) break;
      used += tokens;
      Json v = views::HitView(h);
      v["tokens"] = tokens;
      out.push_back(std::move(v));
    }
    return Json{{"hits", out}, {"tokens", used}};
  });

  // ---- Sessions ----
  add("POST", "/api/v1/sessions", "/api/v1/sessions", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string user, c.Arg("user", false));
    STRATA_ASSIGN_OR_RETURN(std::string agent, c.Arg("agent", false));
    STRATA_ASSIGN_OR_RETURN(std::string id, c.Arg("id", false));
    if (c.id.role == Role::kUser) {
      if (!user.empty() && user != c.id.user) {
        return Status::PermissionDenied("this key creates sessions for user " + c.id.user + " only");
      }
      user = c.id.user;
    }
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, c.engine->CreateSession(user, agent, id));
    return views::SessionView(info);
  });
  add("GET", "/api/v1/sessions", "/api/v1/sessions", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(auto sessions, c.engine->ListSessions());
    Json out = Json::array();
    for (const session::SessionInfo& s : sessions) {
      if (c.id.role == Role::kUser && s.user != c.id.user) continue;
      out.push_back(views::SessionView(s));
    }
    return out;
  });
  add("GET", "/api/v1/sessions/" + sid, "/api/v1/sessions/{id}", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, c.engine->GetSession(id));
    STRATA_ASSIGN_OR_RETURN(std::vector<Message> messages, c.engine->SessionMessages(id));
    return views::SessionView(info, &messages);
  });
  add("POST", "/api/v1/sessions/" + sid + "/messages", "/api/v1/sessions/{id}/messages", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    // {"message": {...}}, {"messages": [...]}, or the message or array itself.
    const Json* given = json::Field(c.body, "messages");
    if (given == nullptr) given = json::Field(c.body, "message");
    const Json& payload = given != nullptr ? *given : c.body;
    STRATA_ASSIGN_OR_RETURN(std::vector<Message> messages, ParseMessages(payload.dump()));
    if (messages.empty()) return Status::InvalidArgument("no messages given");
    STRATA_RETURN_IF_ERROR(CheckRefs(c, messages));
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, c.engine->AddMessages(id, messages));
    return views::SessionView(info);
  });
  add("GET", "/api/v1/sessions/" + sid + "/messages", "/api/v1/sessions/{id}/messages", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(std::vector<Message> messages, c.engine->SessionMessages(id));
    Json out = Json::array();
    for (const Message& m : messages) out.push_back(Json::parse(MessageToJson(m)));
    return out;
  });
  add("POST", "/api/v1/sessions/" + sid + "/commit", "/api/v1/sessions/{id}/commit", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(CommitOutcome outcome, c.engine->Commit(id, {.wait = false}));
    metrics.Commit("accepted");
    WakeWorker();
    return Json{{"task_id", outcome.ticket.job_id}, {"archive", outcome.ticket.archive},
                {"messages", outcome.ticket.messages}};
  });
  add("GET", "/api/v1/sessions/" + sid + "/status", "/api/v1/sessions/{id}/status", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(SessionStatus status, c.engine->GetSessionStatus(id));
    Json archives = Json::array(), jobs = Json::array();
    for (const auto& a : status.archives) archives.push_back(views::ArchiveView(a));
    for (const auto& j : status.jobs) jobs.push_back(views::JobView(j));
    return Json{{"session", status.session}, {"archives", archives}, {"jobs", jobs}};
  });

  // ---- Background tasks (phase-2 jobs) ----
  auto task_of = [this](Call& c) -> Result<session::Job> {
    char* end = nullptr;
    long long task = std::strtoll(c.req.path_params.at(0).c_str(), &end, 10);
    STRATA_ASSIGN_OR_RETURN(session::JobQueue * queue, c.engine->queue());
    STRATA_ASSIGN_OR_RETURN(std::optional<session::Job> job, queue->Get(task));
    if (!job) return Status::NotFound("no task " + c.req.path_params.at(0));
    if (c.id.role == Role::kUser && !CheckSession(c, job->key).ok()) {
      return Status::NotFound("no task " + c.req.path_params.at(0));
    }
    return *job;
  };
  add("GET", "/api/v1/tasks/([0-9]+)", "/api/v1/tasks/{id}", [task_of](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(session::Job job, task_of(c));
    return views::JobView(job);
  });
  add("GET", "/api/v1/tasks/([0-9]+)/events", "/api/v1/tasks/{id}/events", [this, task_of](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(session::Job first, task_of(c));
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<StreamSlot> slot, TakeStreamSlot());
    Engine* engine = c.engine;
    int64_t task = first.id;
    c.res.content_type = "text/event-stream";
    c.res.headers.emplace_back("Cache-Control", "no-cache");
    c.raw = true;
    c.res.stream = [this, engine, task, slot](const ChunkWriter& write) {
      std::string last;
      for (int i = 0; i < 36000 && !shut_down.load(); ++i) {  // An hour at most.
        auto queue = engine->queue();
        if (!queue.ok()) break;
        auto job = (*queue)->Get(task);
        if (!job.ok() || !*job) break;
        std::string state(session::JobStateName((*job)->state));
        std::string view = views::Dump(views::JobView(**job));
        if (view != last) {
          if (!write("event: task\ndata: " + view + "\n\n")) break;
          last = view;
        } else if (i % 50 == 0 && !write(": keep-alive\n\n")) {
          break;
        }
        if (state == "done" || state == "dead") break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      write("event: end\ndata: {}\n\n");
    };
    return Json();
  });

  // ---- Memories, prompts, tokens ----
  add("POST", "/api/v1/memories/remember", "/api/v1/memories/remember", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri scope, UriArg(c, "scope", true));
    STRATA_ASSIGN_OR_RETURN(std::string text, c.Arg("text"));
    STRATA_ASSIGN_OR_RETURN(std::string category, c.Arg("category", false));
    STRATA_ASSIGN_OR_RETURN(auto changes, c.engine->Remember(scope.str(), text, category));
    return views::ChangesView(changes);
  });
  add("GET", "/api/v1/memories/history", "/api/v1/memories/history", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", false));
    STRATA_ASSIGN_OR_RETURN(auto entries, c.engine->MemoryHistory(uri.str()));
    Json out = Json::array();
    for (const auto& e : entries) out.push_back(views::AuditEntryView(e));
    return out;
  });
  add("POST", "/api/v1/memories/consolidate", "/api/v1/memories/consolidate", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri under, UriArg(c, "under", true));
    STRATA_ASSIGN_OR_RETURN(auto changes, c.engine->Consolidate(under.str()));
    return views::ChangesView(changes);
  });
  add("POST", "/api/v1/prompts/render", "/api/v1/prompts/render", [](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string id, c.Arg("id"));
    const Json* vars = json::Field(c.body, "vars");
    STRATA_ASSIGN_OR_RETURN(prompt::Value values, prompt::Value::FromJson(vars == nullptr ? "{}" : vars->dump()));
    STRATA_ASSIGN_OR_RETURN(std::string text, c.engine->RenderPrompt(id, values));
    return Json{{"id", id}, {"text", text}};
  });
  add("POST", "/api/v1/tokens/count", "/api/v1/tokens/count", [](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string encoding, c.Arg("encoding", false));
    if (encoding.empty()) encoding = "o200k_base";
    if (encoding != "o200k_base" && encoding != "cl100k_base" && encoding != "chars") {
      return Status::InvalidArgument("\"encoding\" must be o200k_base, cl100k_base or chars");
    }
    Json out = {{"encoding", encoding}};
    if (const Json* messages = json::Field(c.body, "messages"); messages != nullptr) {
      // A whole request's messages, counted the way the context window counts them.
      STRATA_ASSIGN_OR_RETURN(std::vector<Message> parsed, ParseMessages(messages->dump()));
      std::string warning;
      const MessageTokenCounter& counter = Engine::Counter(encoding, &warning);
      out["tokens"] = counter.CountMessages(parsed);
      if (!warning.empty()) out["warning"] = warning;
    } else {
      STRATA_ASSIGN_OR_RETURN(std::string text, c.Arg("text"));
      STRATA_ASSIGN_OR_RETURN(int64_t tokens, CountText(encoding, text));
      out["tokens"] = tokens;
    }
    return out;
  });

  // ---- The memory-managing OpenAI-compatible endpoint ----
  add("POST", "/v1/chat/completions", "/v1/chat/completions", [this](Call& c) { return ChatCompletions(c); });

  // ---- Keys (root only) ----
  auto root_only = [](Call& c) -> Status {
    return c.id.role == Role::kRoot ? Status::Ok() : Status::PermissionDenied("managing keys needs the root key");
  };
  add("POST", "/api/v1/admin/keys", "/api/v1/admin/keys", [this, root_only](Call& c) -> Result<Json> {
    STRATA_RETURN_IF_ERROR(root_only(c));
    if (!keys->has_root_key()) return Status::FailedPrecondition("this server has no root key; keys cannot be issued");
    STRATA_ASSIGN_OR_RETURN(std::string account, c.Arg("account", false));
    STRATA_ASSIGN_OR_RETURN(std::string user, c.Arg("user"));
    STRATA_ASSIGN_OR_RETURN(std::string role_name, c.Arg("role", false));
    STRATA_ASSIGN_OR_RETURN(Role role, ParseRole(role_name.empty() ? "user" : role_name));
    STRATA_ASSIGN_OR_RETURN(auto issued, keys->Issue(account.empty() ? "default" : account, user, role));
    return Json{{"id", issued.first.id}, {"account", issued.first.account}, {"user", issued.first.user},
                {"role", std::string(RoleName(issued.first.role))}, {"key", issued.second}};
  });
  add("GET", "/api/v1/admin/keys", "/api/v1/admin/keys", [this, root_only](Call& c) -> Result<Json> {
    STRATA_RETURN_IF_ERROR(root_only(c));
    STRATA_ASSIGN_OR_RETURN(auto issued_keys, keys->List());
    Json out = Json::array();
    for (const KeyInfo& k : issued_keys) {
      out.push_back({{"id", k.id}, {"account", k.account}, {"user", k.user},
                     {"role", std::string(RoleName(k.role))}, {"created_ms", k.created_ms}});
    }
    return out;
  });
  add("DELETE", "/api/v1/admin/keys/" + sid, "/api/v1/admin/keys/{id}", [this, root_only](Call& c) -> Result<Json> {
    STRATA_RETURN_IF_ERROR(root_only(c));
    STRATA_RETURN_IF_ERROR(keys->Revoke(c.req.path_params.at(0)));
    return Json{{"revoked", c.req.path_params.at(0)}};
  });
}

Server::Server(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Server::~Server() {
  Shutdown();
  if (impl_->worker.joinable()) impl_->worker.join();
}

Result<std::unique_ptr<Server>> Server::Open(EngineOptions engine, ServerOptions options) {
  auto impl = std::make_unique<Impl>();
  size_t colon = options.listen.rfind(':');
  if (colon == std::string::npos) return Status::InvalidArgument("--listen must be HOST:PORT, not " + options.listen);
  impl->host = options.listen.substr(0, colon);
  if (impl->host.size() > 2 && impl->host.front() == '[' && impl->host.back() == ']') {
    impl->host = impl->host.substr(1, impl->host.size() - 2);
  }
  std::string port = options.listen.substr(colon + 1);
  char* end = nullptr;
  long p = std::strtol(port.c_str(), &end, 10);
  if (port.empty() || *end != '\0' || p < 0 || p > 65535) {
    return Status::InvalidArgument("--listen: the port must be a number from 0 to 65535, not \"" + port + "\"");
  }
  impl->port = static_cast<int>(p);
  std::string root_key = options.root_key;
  if (root_key.empty() && options.read_root_key_from_env) {
    if (const char* env = std::getenv("STRATA_ROOT_KEY")) root_key = env;
  }
  std::error_code ec;
  fs::create_directories(engine.data_dir, ec);
  if (ec) return Status::Internal("cannot create " + engine.data_dir + ": " + ec.message());
  STRATA_ASSIGN_OR_RETURN(impl->keys, KeyStore::Open(engine.data_dir + "/keys.db", root_key));
  impl->engine_options = std::move(engine);
  impl->options = std::move(options);
  STRATA_RETURN_IF_ERROR(impl->EngineFor("default").status());
  impl->AddRoutes();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Result<int> Server::Bind() {
  Impl& s = *impl_;
  if (!s.keys->has_root_key() && !IsLoopback(s.host)) {
    return Status::FailedPrecondition("refusing to listen on " + s.host +
                                      " without a root key: anyone who can reach it could read and change every "
                                      "memory. Set STRATA_ROOT_KEY (or --root-key-file), or listen on 127.0.0.1");
  }
  s.http = NewHttpServer(s.options.http);
  for (const RouteSpec& route : s.routes) {
    const RouteSpec* r = &route;
    s.http->Route(route.method, route.pattern,
                  [impl = &s, r](const HttpRequest& req, HttpResponse& res) { impl->Dispatch(*r, req, res); });
  }
  s.http->NotFound([](const HttpRequest& req, HttpResponse& res) {
    res.status = 404;
    Json envelope = {{"status", "error"},
                     {"error", {{"code", "not_found"},
                                {"message", "no route " + req.method + " " + json::QuoteForError(req.path, 120)}}}};
    res.body = views::Dump(envelope);
  });
  STRATA_ASSIGN_OR_RETURN(int port, s.http->Bind(s.host, s.port));
  s.port = port;
  return port;
}

Status Server::Serve() {
  Impl& s = *impl_;
  if (!s.http) STRATA_RETURN_IF_ERROR(Bind().status());
  if (s.options.run_worker && !s.worker.joinable()) {
    s.worker = std::thread([&s] { s.WorkerLoop(); });
    s.WakeWorker();  // Jobs left by an earlier run.
  }
  Status served = s.http->Serve();
  // Requests in flight have been answered; stop the worker between jobs.
  {
    std::lock_guard lock(s.worker_mu);
    s.worker_stop = true;
  }
  s.worker_cancel.Cancel();
  s.worker_cv.notify_all();
  if (s.worker.joinable()) s.worker.join();
  return served;
}

std::vector<std::pair<std::string, std::string>> Server::Routes() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const RouteSpec& r : impl_->routes) out.emplace_back(r.method, r.name);
  return out;
}

void Server::Shutdown() {
  Impl& s = *impl_;
  if (s.shut_down.exchange(true)) return;
  if (s.http) s.http->Stop();
  {
    std::lock_guard lock(s.worker_mu);
    s.worker_stop = true;
  }
  s.worker_cv.notify_all();
}

}  // namespace strata::server
