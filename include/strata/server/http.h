// The HTTP transport under `strata serve`: plain request and response values and a small server
// interface, so the API code never names an HTTP library. The one implementation is on cpp-httplib
// (Debian's libcpp-httplib); another library can replace it behind NewHttpServer.
//
// Thread safety: an HttpServer calls handlers from a pool of threads at once; Route must be called before
// Serve. Stop may be called from any thread (a signal-watching thread, a test).
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/util/status.h"

namespace strata::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // Decoded path without the query.
  std::vector<std::pair<std::string, std::string>> query;    // Decoded, in order.
  std::vector<std::pair<std::string, std::string>> headers;  // Names lower-cased.
  std::string body;
  std::vector<std::string> path_params;  // The route pattern's capture groups.
  std::string remote_addr;
  // 413 (over the limit) or 400 (cut short) when the body could not be read: the route still runs its
  // dispatch, which answers the error in the route's own shape (the model endpoints' SDKs read theirs) with
  // a request id.
  int body_error_status = 0;
  // Set when the request's path holds what no route may be asked with (an encoded '/' in a segment: the
  // transport routes the decoded path, so "sessions/s1%2Fstatus" reached another route): what is wrong,
  // answered 400 before the route runs.
  std::string path_error;

  // Returns the first header `name` (case-insensitive), or "".
  std::string Header(std::string_view name) const;
  // Returns the first query parameter `name`, or nullopt.
  std::optional<std::string> Query(std::string_view name) const;
};

// Writes one chunk of a streamed body; returns false once the client has gone away.
using ChunkWriter = std::function<bool(std::string_view chunk)>;

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  // When set, the body is streamed (chunked): called once on the connection's thread after the handler
  // returns, it writes chunks until done or until a write returns false.
  std::function<void(const ChunkWriter& write)> stream;
};

using HttpHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

struct HttpServerOptions {
  size_t max_body_bytes = 8 << 20;   // A larger request body is answered 413 without reading it.
  int threads = 64;                  // Requests served at once; more wait in the accept queue.
  std::chrono::seconds read_timeout{30};   // A client that sends nothing for this long is disconnected.
  std::chrono::seconds write_timeout{60};
};

class HttpServer {
 public:
  virtual ~HttpServer() = default;
  // Registers `handler` for `method` on paths matching `pattern` (a whole-path regular expression whose
  // groups become path_params). Routes are tried in registration order.
  virtual void Route(std::string_view method, std::string pattern, HttpHandler handler) = 0;
  // Sets the handler for requests no route matches (default: 404 with an empty body).
  virtual void NotFound(HttpHandler handler) = 0;
  // Binds `host`:`port` (0: any free port); returns the port bound.
  virtual Result<int> Bind(const std::string& host, int port) = 0;
  // Serves until Stop(); blocks. Returns after requests in flight have been answered.
  virtual Status Serve() = 0;
  // Stops accepting connections; Serve returns once in-flight requests are done.
  virtual void Stop() = 0;
};

// Returns the cpp-httplib server.
std::unique_ptr<HttpServer> NewHttpServer(HttpServerOptions options);

}  // namespace strata::server
