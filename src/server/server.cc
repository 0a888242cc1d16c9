#include "strata/server/server.h"

#include <arpa/inet.h>

#include <algorithm>
#include <filesystem>
#include <random>

#include "server_impl.h"
#include "strata/tokenizer/registry.h"

namespace strata::server {

namespace fs = std::filesystem;

std::string NewRequestId() {
  static std::atomic<uint64_t> counter{0};
  static const uint64_t start = std::random_device{}();
  char buf[40];
  std::snprintf(buf, sizeof buf, "req-%08llx-%06llx", static_cast<unsigned long long>(start & 0xffffffff),
                static_cast<unsigned long long>(++counter));
  return buf;
}


std::string_view AnthropicErrorType(int http_status) {
  switch (http_status) {
    case 400: case 409: return "invalid_request_error";
    case 413: return "request_too_large";  // Anthropic's own type for a body over the limit.
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: case 529: return "overloaded_error";
    default: return "api_error";
  }
}

// An address literal of the loopback network (127.0.0.0/8, ::1) or "localhost": never a name that only begins
// like one, such as "127.evil.example", which its owner can resolve to 127.0.0.1 (DNS rebinding).
bool IsLoopback(const std::string& host) {
  if (host.size() == 9 && std::equal(host.begin(), host.end(), "localhost", [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) == b;
      })) {
    return true;
  }
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  return inet_pton(AF_INET6, host.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

RouteSpec Route(std::string method, std::string name, Api api) {
  std::string pattern;
  for (size_t i = 0; i < name.size();) {
    if (name[i] == '{') {
      size_t close = name.find('}', i);
      pattern += "([^/]+)";  // Checked by what reads it: a bad id is a 400 naming it, not "no route".
      i = close + 1;
    } else {
      pattern += name[i++];
    }
  }
  RouteSpec spec{.method = method, .pattern = std::move(pattern), .name = std::move(name), .api = std::move(api)};
  spec.read_only = method == "GET";
  return spec;
}

namespace {
void AddNames(std::string_view names, std::vector<std::string>& to) {
  for (size_t i = 0; i < names.size();) {
    size_t end = std::min(names.find(' ', i), names.size());
    if (end > i && std::find(to.begin(), to.end(), names.substr(i, end - i)) == to.end()) {
      to.emplace_back(names.substr(i, end - i));
    }
    i = end + 1;
  }
}
}  // namespace

RouteSpec RouteSpec::Takes(std::string_view names) && {
  AddNames(names, takes);
  return std::move(*this);
}

RouteSpec RouteSpec::BodyOnly(std::string_view names) && {
  AddNames(names, takes);
  AddNames(names, body_only);
  return std::move(*this);
}

namespace {

// kInvalidArgument for the first query parameter or body member `route` does not take, naming it and them.
Status CheckNames(const RouteSpec& route, const HttpRequest& req, const Json& body) {
  auto taken = [&](std::string_view name) { return std::find(route.takes.begin(), route.takes.end(), name) != route.takes.end(); };
  auto refuse = [&](std::string_view what, std::string_view name) {
    std::string list;
    for (const std::string& t : route.takes) list += (list.empty() ? "" : ", ") + t;
    return Status::InvalidArgument("unknown " + std::string(what) + " " + json::QuoteForError(name, 64) + ": " +
                                   route.method + " " + route.name + " takes " + (list.empty() ? "none" : list));
  };
  for (size_t i = 0; i < req.query.size(); ++i) {
    const std::string& name = req.query[i].first;
    if (!taken(name)) return refuse("query parameter", name);
    if (std::find(route.body_only.begin(), route.body_only.end(), name) != route.body_only.end()) {
      return Status::InvalidArgument("query parameter " + json::QuoteForError(name, 64) + ": " + route.method + " " +
                                     route.name + " reads it from the JSON body only; send it there");
    }
    for (size_t j = 0; j < i; ++j) {
      if (req.query[j].first == name) {  // Which one was meant? Only the first was read.
        return Status::InvalidArgument("query parameter " + json::QuoteForError(name, 64) + " is given more than once");
      }
    }
  }
  if (body.is_object()) {
    for (const auto& [name, value] : body.items()) {
      if (!taken(name)) return refuse("body member", name);
    }
  }
  return Status::Ok();
}

}  // namespace

// ---- Call ----

// The query parameter or body member `name` as a string; kInvalidArgument naming it when required.
Result<std::string> Call::Arg(std::string_view name, bool required) const {
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
Result<int64_t> IntegerText(const std::string& text, std::string_view name) {
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (!text.empty() && *end == '\0' && errno == ERANGE) {
    return Status::InvalidArgument("\"" + std::string(name) + "\" must be an integer of at most 64 bits");
  }
  if (text.empty() || *end != '\0' || errno == ERANGE) {
    return Status::InvalidArgument("\"" + std::string(name) + "\" must be an integer");
  }
  return static_cast<int64_t>(v);
}

Result<std::optional<int64_t>> Call::OptIntArg(std::string_view name) const {
  if (auto q = req.Query(name)) {
    STRATA_ASSIGN_OR_RETURN(int64_t v, IntegerText(*q, name));
    return std::optional<int64_t>(v);
  }
  if (const Json* f = json::Field(body, name); f != nullptr && !f->is_null()) {
    std::optional<int64_t> v = json::WholeNumber(*f);
    if (!v) return Status::InvalidArgument("\"" + std::string(name) + "\" " + json::IntegerProblem(*f));
    return v;
  }
  return std::optional<int64_t>();
}
Result<int64_t> Call::IntArg(std::string_view name, int64_t fallback) const {
  STRATA_ASSIGN_OR_RETURN(std::optional<int64_t> v, OptIntArg(name));
  return v.value_or(fallback);
}
Result<bool> Call::BoolArg(std::string_view name, bool fallback) const {
  if (auto q = req.Query(name)) {
    if (*q == "true" || *q == "1" || q->empty()) return true;  // A bare ?recursive says it.
    if (*q == "false" || *q == "0") return false;
    return Status::InvalidArgument("\"" + std::string(name) + "\" must be true or false, not " + json::QuoteForError(*q, 40));
  }
  const Json* f = json::Field(body, name);
  if (f == nullptr || f->is_null()) return fallback;
  if (!f->is_boolean()) {
    return Status::InvalidArgument("\"" + std::string(name) + "\" must be true or false, not " +
                                   std::string(json::TypeName(*f)));
  }
  return f->get<bool>();
}
Result<std::optional<std::string>> Call::OptString(std::string_view name) const {
  if (auto q = req.Query(name)) return std::optional<std::string>(*q);  // As Arg reads it: "" is given.
  const Json* f = json::Field(body, name);
  if (f == nullptr || f->is_null()) return std::optional<std::string>();
  if (!f->is_string()) return Status::InvalidArgument("\"" + std::string(name) + "\" must be a string");
  return std::optional<std::string>(f->get<std::string>());
}

// ---- Accounts and identity ----

Result<Engine*> Server::Impl::EngineFor(const std::string& account) {
  std::lock_guard lock(engines_mu);
  auto it = engines.find(account);
  if (it != engines.end()) return it->second.get();
  std::unique_ptr<Engine> engine;
  if (account == "default") {
    STRATA_ASSIGN_OR_RETURN(engine, Engine::Open(engine_options));
  } else {
    // Another account's data: where it lives is the default engine's business (Engine::OpenAccount).
    auto main = engines.find("default");
    if (main == engines.end()) return Status::Internal("the default account's engine is not open");
    STRATA_ASSIGN_OR_RETURN(engine, main->second->OpenAccount(account));
  }
  Engine* raw = engine.get();
  engines[account] = std::move(engine);
  return raw;
}

bool Server::Impl::EngineOpen(const std::string& account) {
  std::lock_guard lock(engines_mu);
  return engines.contains(account);
}

std::vector<Engine*> Server::Impl::OpenEngines() {
  std::lock_guard lock(engines_mu);
  std::vector<Engine*> out;
  for (auto& [name, e] : engines) out.push_back(e.get());
  return out;
}

std::optional<std::string> Server::Impl::StreamRefusal(const HttpRequest& req,
                                                       const std::function<Status(const Identity&)>& allowed) {
  Result<Identity> who = Authenticate(req);
  Status still = who.ok() && allowed ? allowed(*who) : who.status();
  // Only a refusal ends the stream: a database busy for a moment (kUnavailable) is asked again next time.
  const StatusCode code = still.code();
  if (code != StatusCode::kUnauthenticated && code != StatusCode::kPermissionDenied && code != StatusCode::kNotFound) {
    return std::nullopt;
  }
  Json error = {{"code", std::string(StatusCodeName(code))},
                {"message", WithoutDataDir(std::string(still.message()), engine_options.data_dir)}};
  return "event: error\ndata: " + views::Dump(error) + "\n\n";
}

Result<Identity> Server::Impl::Authenticate(const HttpRequest& req) {
  std::string key = req.Header("x-api-key");
  std::string auth = req.Header("authorization");
  if (key.empty() && auth.size() > 7 && (auth.rfind("Bearer ", 0) == 0 || auth.rfind("bearer ", 0) == 0)) {
    key = auth.substr(7);
  }
  if (!has_keys()) return Identity{"default", "default", Role::kRoot, ""};  // Loopback, no keys.
  if (key.empty()) return Status::Unauthenticated("an API key is required (Authorization: Bearer KEY or X-API-Key)");
  if (Sha256Hex(key) == root_key_hash) {
    Identity id{"default", "default", Role::kRoot, ""};
    std::string account = req.Header("x-strata-account");
    if (!account.empty()) {
      STRATA_RETURN_IF_ERROR(memory::ValidateScopeId(account, "X-Strata-Account"));
      id.account = account;
    }
    return id;
  }
  STRATA_ASSIGN_OR_RETURN(std::optional<KeyInfo> info, keys->Find(key));
  if (!info) return Status::Unauthenticated("the API key is not valid (unknown or revoked)");
  std::string account = req.Header("x-strata-account");
  if (!account.empty() && account != info->account) {
    // Only the root key chooses an account; a key that asked for another must not be answered from its own.
    return Status::PermissionDenied("X-Strata-Account " + json::QuoteForError(account, 64) +
                                    " is not this key's account: only the root key may choose one");
  }
  return Identity{info->account, info->user, info->role, info->id};
}

Result<Uri> Server::Impl::UriArg(Call& c, std::string_view name, bool required) {
  STRATA_ASSIGN_OR_RETURN(std::string text, c.Arg(name, required));
  if (text.empty() && required) return Status::InvalidArgument("\"" + std::string(name) + "\" must not be empty");
  if (text.empty()) {
    // Unset: everything for an admin, the user's own scope for a user.
    if (c.id.role == Role::kUser) return Uri::Parse("strata://user/" + c.id.user);
    return Uri::Root();
  }
  STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(text));
  STRATA_RETURN_IF_ERROR(CheckUri(c, uri));
  return uri;
}

Status Server::Impl::CheckOrigin(const HttpRequest& req) const {
  std::string host_header = req.Header("host");
  std::string origin = req.Header("origin");
  if (!origin.empty()) {
    size_t scheme = origin.find("://");
    std::string origin_host = scheme == std::string::npos ? origin : origin.substr(scheme + 3);
    if (origin_host != host_header) {
      return Status::PermissionDenied("cross-origin requests are refused (Origin " + json::QuoteForError(origin, 80) + ")");
    }
  }
  if (!has_keys() && !host_header.empty()) {
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

namespace {

// The caller's X-Request-Id when it is a plain token of at most 64 characters, a new one otherwise; echoed on
// the response so every answer, a 404 for an unknown route included, can be found in the server's log.
std::string RequestIdOf(const HttpRequest& req, HttpResponse& res) {
  std::string request_id = req.Header("x-request-id");
  bool id_ok = !request_id.empty() && request_id.size() <= 64 &&
               std::all_of(request_id.begin(), request_id.end(), [](char ch) {
                 return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
               });
  if (!id_ok) request_id = NewRequestId();
  res.headers.emplace_back("X-Request-Id", request_id);
  return request_id;
}

}  // namespace

void Server::Impl::Dispatch(const RouteSpec& route, const HttpRequest& req, HttpResponse& res) {
  auto started = std::chrono::steady_clock::now();
  std::string request_id = RequestIdOf(req, res);
  Result<Json> result = Status::Internal("not run");
  bool raw = false;
  bool body_refused = false;  // Answered 413 or 400 for the body itself (HttpRequest::body_error_status).
  try {
    Status allowed = CheckOrigin(req);
    body_refused = allowed.ok() && req.body_error_status != 0;
    if (allowed.ok() && req.body_error_status == 413) {
      allowed = Status::ResourceExhausted("the request body is larger than the server accepts (" +
                                          std::to_string(options.http.max_body_bytes) + " bytes)");
    } else if (allowed.ok() && req.body_error_status != 0) {
      allowed = Status::InvalidArgument("the request body could not be read");
    }
    if (allowed.ok() && !req.path_error.empty()) allowed = Status::InvalidArgument(req.path_error);
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
    const Status s(result.status().code(), WithoutDataDir(result.status().message(), engine_options.data_dir));
    res.content_type = "application/json";
    res.stream = nullptr;
    res.status = body_refused ? req.body_error_status : HttpStatusFor(s.code());
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

Result<Json> Server::Impl::Run(const RouteSpec& route, const HttpRequest& req, HttpResponse& res, bool* raw) {
  Call c{req, res, false, Identity{}, nullptr, Json::object()};
  if (route.needs_key) {
    STRATA_ASSIGN_OR_RETURN(c.id, Authenticate(req));
    if (req.method == "GET" && c.id.role == Role::kRoot && c.id.account != "default" && !EngineOpen(c.id.account)) {
      // The root key's X-Strata-Account on a GET: an account with no data and no key is a typo, not a new
      // account (opening it would create it, and answer an empty one). Other requests may begin one.
      STRATA_ASSIGN_OR_RETURN(Engine * main, EngineFor("default"));
      STRATA_ASSIGN_OR_RETURN(bool exists, main->AccountExists(c.id.account));
      if (!exists) {
        return Status::NotFound("no account " + json::QuoteForError(c.id.account, 64) +
                                ": an account begins with its first write or key");
      }
    }
    STRATA_ASSIGN_OR_RETURN(c.engine, EngineFor(c.id.account));
  }
  if (route.parse_body && !req.body.empty() && (req.method == "POST" || req.method == "PUT" || req.method == "PATCH" ||
                            req.method == "DELETE")) {
    STRATA_ASSIGN_OR_RETURN(Json body, json::ParseUntrusted<Json>(req.body, "request body"));
    // An object (a list of messages, too, where a route takes one): a bare string, number, null or array
    // was answered as if every member were missing ("\"uri\" is required").
    if (!body.is_object() && !(body.is_array() && route.list_body)) {
      return Status::InvalidArgument("request body: must be a JSON object, not " + std::string(json::TypeName(body)));
    }
    c.body = std::move(body);
  }
  if (route.ChecksNames()) STRATA_RETURN_IF_ERROR(CheckNames(route, req, c.body));
  Result<Json> result = route.api(c);
  *raw = c.raw;
  if (result.ok() && c.engine != nullptr && !route.read_only) BumpRevision(c.engine);
  return result;
}

// ---- Streams ----

Result<std::shared_ptr<Server::Impl::StreamSlot>> Server::Impl::TakeStreamSlot() {
  if (open_streams.fetch_add(1) >= options.max_streams) {
    open_streams.fetch_sub(1);
    return Status::ResourceExhausted("too many streams open (" + std::to_string(options.max_streams) +
                                     "); try again when one ends");
  }
  return std::make_shared<StreamSlot>(&open_streams);
}

// A change stream (GET /api/v1/events): open viewers, left in forgotten tabs, may hold at most half the
// stream slots, never crowding out streamed replies.
Result<std::shared_ptr<Server::Impl::StreamSlot>> Server::Impl::TakeEventSlot() {
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

// ---- The phase-2 worker ----

void Server::Impl::WakeWorker() {
  {
    std::lock_guard lock(worker_mu);
    worker_wanted = true;
  }
  worker_cv.notify_one();
}

void Server::Impl::WorkerLoop() {
  std::map<const Engine*, std::pair<size_t, size_t>> last_queue_state;  // (pending, dead) per account.
  // The last failure of each account's phase 2, said once until it changes or phase 2 runs again: a model
  // configuration that cannot be used filled the log with one line per poll.
  std::map<const Engine*, std::string> last_work_error;
  std::optional<std::chrono::steady_clock::time_point> last_scan;
  while (true) {
    {
      std::unique_lock lock(worker_mu);
      worker_cv.wait_for(lock, options.worker_poll, [&] { return worker_stop || worker_wanted; });
      if (worker_stop) return;
      worker_wanted = false;
    }
    // Every account's queue is worked, not only those a request opened since this instance started: an
    // account's job whose instance died (or that was queued before a restart) is taken over by whichever
    // instance runs. Accounts with a job to claim are looked for at start and then every 30 s (one query
    // each), and only those are opened.
    auto now = std::chrono::steady_clock::now();
    if (!last_scan || now - *last_scan >= std::chrono::seconds(30)) {
      last_scan = now;
      if (Result<Engine*> main = EngineFor("default"); main.ok()) {
        if (Result<std::vector<std::string>> accounts = (*main)->AccountsWithWork(); accounts.ok()) {
          for (const std::string& account : *accounts) {
            if (!EngineOpen(account)) (void)EngineFor(account);
          }
        } else {
          std::fprintf(stderr, "strata serve: listing accounts: %s\n", accounts.status().ToString().c_str());
        }
      }
    }
    for (Engine* engine : OpenEngines()) {
      // Sessions served turn by turn that went quiet: committed by the engine's policy.
      if (Result<int> idle = engine->CommitIdleSessions(); idle.ok() && *idle > 0) {
        for (int i = 0; i < *idle; ++i) metrics.Commit("accepted_idle");
        BumpRevision(engine);
      }
      Result<WorkReport> report = engine->Work(&worker_cancel);
      if (report.ok()) {
        for (int i = 0; i < report->completed; ++i) metrics.Commit("completed");
        // A finished job, or a job that failed, went dead or came back: what a viewer shows changed.
        std::pair<size_t, size_t> queue_state{report->pending, report->dead};
        if (report->completed > 0 || last_queue_state[engine] != queue_state) BumpRevision(engine);
        last_queue_state[engine] = queue_state;
        last_work_error.erase(engine);
      } else if (report.status().code() != StatusCode::kCancelled &&
                 report.status().code() != StatusCode::kUnavailable) {
        std::string said = report.status().ToString();
        if (last_work_error[engine] != said) std::fprintf(stderr, "strata serve: phase 2: %s\n", said.c_str());
        last_work_error[engine] = std::move(said);
      }
    }
  }
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
  if (!root_key.empty() && root_key.size() < 16) {
    return Status::InvalidArgument("the root key must be at least 16 characters long");
  }
  if (!root_key.empty()) impl->root_key_hash = Sha256Hex(root_key);
  // Read-only data runs no phase 2: nothing may change it.
  if (engine.read_only) options.run_worker = false;
  impl->engine_options = std::move(engine);
  impl->options = std::move(options);
  impl->mcp = std::make_unique<McpHttpTransport>(impl->options.http.max_body_bytes, &impl->shutdown_cancel);
  // The default account's engine holds the keys, on whatever backend it runs on.
  STRATA_ASSIGN_OR_RETURN(Engine * main, impl->EngineFor("default"));
  STRATA_ASSIGN_OR_RETURN(impl->keys, main->keys());
  impl->AddServiceRoutes();
  impl->AddStoreRoutes();
  impl->AddSessionRoutes();
  impl->AddMemoryRoutes();
  impl->AddModelRoutes();
  impl->AddViewerRoutes();
  return std::unique_ptr<Server>(new Server(std::move(impl)));
}

Result<int> Server::Bind() {
  Impl& s = *impl_;
  if (!s.has_keys() && !IsLoopback(s.host)) {
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
    std::string request_id = RequestIdOf(req, res);
    const bool bad_path = !req.path_error.empty();  // "a%2Fb" split an id into two segments: no route.
    res.status = bad_path ? 400 : 404;
    Json envelope = {{"status", "error"},
                     {"error", {{"code", bad_path ? "invalid_argument" : "not_found"},
                                {"message", bad_path ? req.path_error
                                                     : "no route " + req.method + " " + json::QuoteForError(req.path, 120)},
                                {"request_id", request_id}}}};
    res.body = views::Dump(envelope);
  });
  STRATA_ASSIGN_OR_RETURN(int port, s.http->Bind(s.host, s.port));
  s.port = port;
  return port;
}

Status Server::Serve() {
  Impl& s = *impl_;
  if (!s.http) STRATA_RETURN_IF_ERROR(Bind().status());
  if (s.shut_down) return Status::Ok();  // Shut down before it was bound: there was no server to stop then.
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

std::vector<Server::RouteInfo> Server::Routes() const {
  std::vector<RouteInfo> out;
  for (const RouteSpec& r : impl_->routes) {
    out.push_back({r.method, r.name, r.ChecksNames() ? std::optional(r.takes) : std::nullopt});
  }
  return out;
}

void Server::Shutdown() {
  Impl& s = *impl_;
  if (s.shut_down.exchange(true)) return;
  s.shutdown_cancel.Cancel();
  if (s.http) s.http->Stop();
  {
    std::lock_guard lock(s.worker_mu);
    s.worker_stop = true;
  }
  s.worker_cv.notify_all();
}

}  // namespace strata::server
