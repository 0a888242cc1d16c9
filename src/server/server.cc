#include "strata/server/server.h"

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
    case 400: case 409: case 413: return "invalid_request_error";
    case 401: return "authentication_error";
    case 403: return "permission_error";
    case 404: return "not_found_error";
    case 429: return "rate_limit_error";
    case 503: case 529: return "overloaded_error";
    default: return "api_error";
  }
}

bool IsLoopback(const std::string& host) {
  return host == "127.0.0.1" || host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
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
  if (pg::IsPostgresUrl(engine.data_dir)) {
    STRATA_ASSIGN_OR_RETURN(impl->keys, KeyStore::OpenPg(engine.data_dir, root_key));
  } else {
    if (!engine.read_only) {
      std::error_code ec;
      fs::create_directories(engine.data_dir, ec);
      if (ec) return Status::Internal("cannot create " + engine.data_dir + ": " + ec.message());
    }
    STRATA_ASSIGN_OR_RETURN(impl->keys, KeyStore::Open(engine.data_dir + "/keys.db", root_key, engine.read_only));
  }
  // Read-only data runs no phase 2: nothing may change it.
  if (engine.read_only) options.run_worker = false;
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
