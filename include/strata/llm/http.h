// HTTP transport for providers: one request, a response whose body is read incrementally.
//
// HttpTransport is the seam between providers and the network: CurlTransport() is the real one (libcurl),
// tests and the record/replay transports (scripted.h: RecordingTransport, ReplayTransport) wrap or replace it. Send() returns once the status line
// and headers are in; the body is then pulled with Read(), chunk by chunk, as the server sends it.
//
// Errors use the taxonomy in chat_error.h: connection (refused, reset, DNS, TLS, a body cut short),
// timeout (connect, idle = no byte for `idle_timeout`, total), cancelled.
//
// Thread safety: a transport may be shared by threads; an HttpResponse is used by one thread at a time.
// Cancel() on the request's Canceller may come from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/util/cancel.h"
#include "strata/util/status.h"

namespace strata::llm {

using HttpHeaders = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method = "POST";
  std::string url;
  HttpHeaders headers;
  std::string body;
};

struct HttpOptions {
  std::chrono::milliseconds connect_timeout{10'000};
  std::chrono::milliseconds idle_timeout{120'000};  // Longest wait for the next byte of the response.
  std::chrono::milliseconds total_timeout{0};       // Whole request; 0 = none (streams may be long).
};

class HttpResponse {
 public:
  virtual ~HttpResponse() = default;
  virtual int status() const = 0;
  // Returns the header's value (case-insensitive name; the last one if repeated), or "".
  virtual std::string_view header(std::string_view name) const = 0;
  // Sets *chunk to the next body bytes; returns false at the end of the body.
  virtual Result<bool> Read(std::string* chunk) = 0;
  // Like Read, but gives up waiting after about `wait`: then *chunk is empty and the result true (the body
  // goes on). A caller that owes someone else a sign of life reads this way. The default waits as Read does.
  virtual Result<bool> ReadFor(std::string* chunk, std::chrono::milliseconds wait) {
    (void)wait;
    return Read(chunk);
  }
};

class HttpTransport {
 public:
  virtual ~HttpTransport() = default;
  virtual Result<std::unique_ptr<HttpResponse>> Send(const HttpRequest& request, const HttpOptions& options,
                                                     const Canceller* cancel) = 0;
};

// The libcurl transport (HTTP/1.1 and HTTP/2, TLS, gzip). Shared and thread-safe.
std::shared_ptr<HttpTransport> CurlTransport();

// Reads the rest of `response`'s body, up to `limit` bytes (the rest is dropped).
Result<std::string> ReadAll(HttpResponse& response, size_t limit = 16 << 20);

// Returns `name`'s value in `headers` (case-insensitive; last wins), or "".
std::string_view FindHeader(const HttpHeaders& headers, std::string_view name);

}  // namespace strata::llm
