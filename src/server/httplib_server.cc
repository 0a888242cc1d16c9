// HttpServer on cpp-httplib: the only file of the server that includes httplib.h.
#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <chrono>
#include <thread>
#include <exception>

#include "strata/json/json_writer.h"
#include "strata/server/http.h"

namespace strata::server {

std::string HttpRequest::Header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() == name.size() &&
        std::equal(k.begin(), k.end(), name.begin(), [](char a, char b) { return a == std::tolower(b); })) {
      return v;
    }
  }
  return "";
}

std::optional<std::string> HttpRequest::Query(std::string_view name) const {
  for (const auto& [k, v] : query) {
    if (k == name) return v;
  }
  return std::nullopt;
}

namespace {

// The query string's parameters in their order, each split at its first '=': RFC 3986 allows '=' in a
// value, and httplib's own reading split "pattern=x=5" at the last one (a grep for "x=5" searched "5").
std::vector<std::pair<std::string, std::string>> ParseQuery(std::string_view target) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = target.find('?');
  if (start == std::string_view::npos) return out;
  std::string_view query = target.substr(start + 1);
  if (size_t hash = query.find('#'); hash != std::string_view::npos) query = query.substr(0, hash);
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    // httplib's own decoding (%XX, %uXXXX, '+' as a space), as it decoded the parameters before.
    auto decode = [](std::string_view part) { return httplib::detail::decode_url(std::string(part), true); };
    out.emplace_back(decode(pair.substr(0, eq)), eq == std::string_view::npos ? std::string() : decode(pair.substr(eq + 1)));
  }
  return out;
}

// What is wrong with the raw path (before decoding), or "": an encoded '/' in a segment, which no id or name
// holds, named with its segment.
std::string PathError(std::string_view target) {
  std::string_view path = target.substr(0, target.find('?'));
  size_t at = path.find("%2");
  while (at != std::string_view::npos && !(at + 2 < path.size() && (path[at + 2] == 'F' || path[at + 2] == 'f'))) {
    at = path.find("%2", at + 1);
  }
  if (at == std::string_view::npos) return "";
  size_t begin = path.rfind('/', at) + 1;
  size_t end = path.find('/', at);
  std::string segment(path.substr(begin, end == std::string_view::npos ? std::string_view::npos : end - begin));
  return "the path segment " + json::QuoteForError(httplib::detail::decode_url(segment, false)) +
         " holds an encoded '/' (%2F): no id or name holds one";
}

HttpRequest Convert(const httplib::Request& in) {
  HttpRequest out;
  out.method = in.method;
  out.path = in.path;
  out.path_error = PathError(in.target);
  out.query = ParseQuery(in.target);
  for (const auto& [k, v] : in.headers) {
    std::string name = k;
    std::transform(name.begin(), name.end(), name.begin(), [](unsigned char c) { return std::tolower(c); });
    out.headers.emplace_back(std::move(name), v);
  }
  out.body = in.body;
  for (size_t i = 1; i < in.matches.size(); ++i) out.path_params.push_back(in.matches[i].str());
  out.remote_addr = in.remote_addr;
  return out;
}

void Apply(HttpResponse& in, httplib::Response& out) {
  out.status = in.status;
  for (const auto& [k, v] : in.headers) out.set_header(k, v);
  if (in.stream) {
    auto stream = std::move(in.stream);
    out.set_chunked_content_provider(in.content_type, [stream](size_t, httplib::DataSink& sink) {
      // Runs in httplib's response writer, outside every handler's try: nothing may escape it.
      try {
        stream([&sink](std::string_view chunk) {
          if (chunk.empty()) return sink.is_writable();
          return sink.write(chunk.data(), chunk.size());
        });
      } catch (...) {
        return false;  // Ends the connection; the client sees a cut stream.
      }
      sink.done();
      return true;
    });
    return;
  }
  out.set_content(in.body, in.content_type);
}

class HttplibServer final : public HttpServer {
 public:
  explicit HttplibServer(HttpServerOptions options) : options_(options) {
    server_.set_payload_max_length(options_.max_body_bytes);
    server_.set_read_timeout(options_.read_timeout);
    server_.set_write_timeout(options_.write_timeout);
    server_.set_tcp_nodelay(true);
    // SO_REUSEADDR alone (a restarted server binds at once while its old connections linger). httplib's
    // default also sets SO_REUSEPORT, with which a second server bound a port in use without an error and
    // the kernel shared the requests between the two.
    server_.set_socket_options([](socket_t sock) {
      int yes = 1;
      setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof(yes));
    });
    int threads = std::max(1, options_.threads);
    server_.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
    // A handler that throws is a bug; the client still gets a JSON error and the server lives on.
    server_.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
      res.status = 500;
      res.set_content(R"({"status":"error","error":{"code":"internal","message":"unexpected error in the handler"}})",
                      "application/json");
    });
    // Errors httplib raises itself (413 body too large, 404 no route, 400 bad request line) in the same
    // envelope; an unmatched route goes to the NotFound handler when one is set.
    server_.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
          if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
          if (res.status == 404 && not_found_) {
            HttpResponse out;
            not_found_(Convert(req), out);
            Apply(out, res);
            return httplib::Server::HandlerResponse::Handled;
          }
          std::string code = res.status == 413 ? "resource_exhausted" : res.status == 404 ? "not_found" : "invalid_argument";
          std::string message = res.status == 413 ? "the request body is larger than the server accepts"
                                                  : "HTTP " + std::to_string(res.status);
          res.set_content(R"({"status":"error","error":{"code":")" + code + R"(","message":")" + message + "\"}}",
                          "application/json");
          return httplib::Server::HandlerResponse::Handled;
        }));
  }

  void Route(std::string_view method, std::string pattern, HttpHandler handler) override {
    auto adapt = [handler](const httplib::Request& req, httplib::Response& res) {
      HttpRequest in = Convert(req);
      HttpResponse out;
      handler(in, out);
      Apply(out, res);
    };
    // Bodies are read through a content reader: httplib's own reading parses a form-urlencoded body (what
    // `curl -d` sends) as form fields and refuses one over 8 KiB; here a body is bytes, up to max_body_bytes.
    auto adapt_body = [handler, max = options_.max_body_bytes](const httplib::Request& req, httplib::Response& res,
                                                             const httplib::ContentReader& reader) {
      if (req.is_multipart_form_data()) {  // The API takes JSON; httplib would hand a multipart body to callbacks.
        HttpResponse out;
        out.status = 415;
        out.body = R"({"status":"error","error":{"code":"invalid_argument","message":"multipart bodies are not accepted; send JSON"}})";
        Apply(out, res);
        return;
      }
      HttpRequest in = Convert(req);
      bool too_large = false;
      // A request with neither Content-Length nor Transfer-Encoding has no body (RFC 9112 §6.3): what
      // `curl -X POST URL` sends. httplib would read it until the connection closes or the read times out.
      bool has_body = req.has_header("Content-Length") || req.has_header("Transfer-Encoding");
      bool read = !has_body || reader([&](const char* data, size_t n) {
        if (in.body.size() + n > max) {
          too_large = true;
          return false;
        }
        in.body.append(data, n);
        return true;
      });
      too_large = too_large || res.status == 413;  // httplib's own limit (payload_max_length).
      HttpResponse out;
      if (too_large || !read) {
        in.body.clear();
        in.body_error_status = too_large ? 413 : 400;
      }
      handler(in, out);
      Apply(out, res);
    };
    if (method == "GET") {
      server_.Get(pattern, adapt);
    } else if (method == "POST") {
      server_.Post(pattern, adapt_body);
    } else if (method == "PUT") {
      server_.Put(pattern, adapt_body);
    } else if (method == "PATCH") {
      server_.Patch(pattern, adapt_body);
    } else if (method == "DELETE") {
      server_.Delete(pattern, adapt_body);
    } else if (method == "OPTIONS") {
      server_.Options(pattern, adapt);
    }
  }

  void NotFound(HttpHandler handler) override { not_found_ = std::move(handler); }

  Result<int> Bind(const std::string& host, int port) override {
    int bound = port == 0 ? server_.bind_to_any_port(host) : (server_.bind_to_port(host, port) ? port : -1);
    if (bound < 0) return Status::Unavailable("cannot listen on " + host + ":" + std::to_string(port) + " (in use?)");
    return bound;
  }

  Status Serve() override {
    serving_ = true;
    if (stop_requested_) {  // Stopped before it started.
      serving_ = false;
      return Status::Ok();
    }
    bool ok = server_.listen_after_bind();
    serving_ = false;
    if (!ok && !stop_requested_) return Status::Internal("the HTTP server stopped with an error");
    return Status::Ok();
  }

  void Stop() override {
    stop_requested_ = true;
    // httplib's stop() does nothing until listen_after_bind() runs: when Serve is on its way there, wait for
    // it (a SIGTERM right after start would otherwise leave the server listening for good).
    // Serve clears serving_ when it returns, so this ends either way.
    while (serving_ && !server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
    server_.stop();
  }

 private:
  HttpServerOptions options_;
  httplib::Server server_;
  // Stop() and Serve() may race (Serve runs on its own thread); both are sequentially consistent atomics,
  // so one of them always sees the other.
  std::atomic<bool> stop_requested_{false};
  std::atomic<bool> serving_{false};
  HttpHandler not_found_;
};

}  // namespace

std::unique_ptr<HttpServer> NewHttpServer(HttpServerOptions options) {
  return std::make_unique<HttplibServer>(options);
}

}  // namespace strata::server
