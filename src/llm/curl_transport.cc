// libcurl transport. Each request runs on its own multi handle driven by the reading thread: Send() and
// Read() pump curl_multi_perform / curl_multi_poll until they have what they need (headers, the next body
// bytes, or the end), so the body streams without a helper thread and the caller controls the pace.
// Cancellation wakes the poll (curl_multi_wakeup); the idle timeout is enforced here because curl's
// low-speed limit has one-second granularity.
#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <mutex>

#include "strata/llm/chat_error.h"
#include "strata/llm/http.h"

namespace strata::llm {
namespace {

using Clock = std::chrono::steady_clock;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

void GlobalInit() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

class CurlResponse final : public HttpResponse {
 public:
  CurlResponse(const HttpRequest& request, const HttpOptions& options, const Canceller* cancel)
      : options_(options), cancel_(cancel), body_(request.body) {
    multi_ = curl_multi_init();
    easy_ = curl_easy_init();
    for (const auto& [name, value] : request.headers) {
      header_list_ = curl_slist_append(header_list_, (name + ": " + value).c_str());
    }
    curl_easy_setopt(easy_, CURLOPT_URL, request.url.c_str());
    curl_easy_setopt(easy_, CURLOPT_CUSTOMREQUEST, request.method.c_str());
    if (request.method != "GET") {
      curl_easy_setopt(easy_, CURLOPT_POSTFIELDS, body_.data());
      curl_easy_setopt(easy_, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body_.size()));
    }
    curl_easy_setopt(easy_, CURLOPT_HTTPHEADER, header_list_);
    curl_easy_setopt(easy_, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(easy_, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(easy_, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(easy_, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(options.connect_timeout.count()));
    if (options.total_timeout.count() > 0) {
      curl_easy_setopt(easy_, CURLOPT_TIMEOUT_MS, static_cast<long>(options.total_timeout.count()));
    }
    curl_easy_setopt(easy_, CURLOPT_WRITEFUNCTION, &CurlResponse::OnBody);
    curl_easy_setopt(easy_, CURLOPT_WRITEDATA, this);
    curl_easy_setopt(easy_, CURLOPT_HEADERFUNCTION, &CurlResponse::OnHeader);
    curl_easy_setopt(easy_, CURLOPT_HEADERDATA, this);
    curl_easy_setopt(easy_, CURLOPT_ERRORBUFFER, error_);
    curl_multi_add_handle(multi_, easy_);
    wake_ = std::make_unique<ScopedCancelCallback>(cancel, [multi = multi_] { curl_multi_wakeup(multi); });
  }

  ~CurlResponse() override {
    wake_.reset();  // No wake-up may reach the multi handle once it is gone.
    curl_multi_remove_handle(multi_, easy_);
    curl_easy_cleanup(easy_);
    curl_multi_cleanup(multi_);
    curl_slist_free_all(header_list_);
  }

  // Pumps until the headers of the final response are in (or the transfer ends).
  Status AwaitHeaders() {
    while (!headers_done_ && !done_) STRATA_RETURN_IF_ERROR(Pump(/*want_headers=*/true));
    if (!headers_done_) return TransferError();
    return Status::Ok();
  }

  int status() const override { return status_; }

  std::string_view header(std::string_view name) const override { return FindHeader(headers_, name); }

  Result<bool> Read(std::string* chunk) override {
    while (true) {
      Result<bool> more = ReadFor(chunk, std::chrono::hours(1));
      if (!more.ok() || !*more || !chunk->empty()) return more;
    }
  }

  Result<bool> ReadFor(std::string* chunk, std::chrono::milliseconds wait) override {
    chunk->clear();
    Clock::time_point until = Clock::now() + wait;
    while (pending_.empty() && !done_ && Clock::now() < until) STRATA_RETURN_IF_ERROR(Pump(/*want_headers=*/false));
    if (!pending_.empty()) {
      chunk->swap(pending_);
      return true;
    }
    if (!done_) return true;  // Nothing yet: the caller's turn to do something else.
    STRATA_RETURN_IF_ERROR(TransferError());
    return false;
  }

 private:
  static size_t OnBody(char* data, size_t size, size_t n, void* self) {
    auto* r = static_cast<CurlResponse*>(self);
    r->pending_.append(data, size * n);
    r->last_activity_ = Clock::now();
    return size * n;
  }

  static size_t OnHeader(char* data, size_t size, size_t n, void* self) {
    auto* r = static_cast<CurlResponse*>(self);
    std::string_view line(data, size * n);
    r->last_activity_ = Clock::now();
    while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
    if (line.starts_with("HTTP/")) {  // A new response (after 100 Continue or a redirect): start over.
      r->headers_.clear();
      r->headers_done_ = false;
      size_t space = line.find(' ');
      r->status_ = space == std::string_view::npos ? 0 : std::atoi(std::string(line.substr(space + 1, 3)).c_str());
    } else if (line.empty()) {
      // The end of a header block; an interim 1xx response is followed by the real one.
      if (r->status_ >= 200) r->headers_done_ = true;
    } else if (size_t colon = line.find(':'); colon != std::string_view::npos) {
      std::string_view value = line.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      r->headers_.emplace_back(std::string(line.substr(0, colon)), std::string(value));
    }
    return size * n;
  }

  // Runs the transfer until it makes the progress the caller waits for (headers, body bytes or the end),
  // or one poll interval passes.
  Status Pump(bool want_headers) {
    if (cancel_ != nullptr && cancel_->cancelled()) return CancelledError("request cancelled");
    int running = 0;
    CURLMcode mc = curl_multi_perform(multi_, &running);
    if (mc != CURLM_OK) return ConnectionError(std::string("curl: ") + curl_multi_strerror(mc));
    int queued = 0;
    while (CURLMsg* msg = curl_multi_info_read(multi_, &queued)) {
      if (msg->msg == CURLMSG_DONE) {
        done_ = true;
        result_ = msg->data.result;
      }
    }
    if (done_ || !pending_.empty() || (want_headers && headers_done_)) return Status::Ok();
    if (Clock::now() - last_activity_ > options_.idle_timeout) {
      return TimeoutError("no data from the server for " + std::to_string(options_.idle_timeout.count()) + " ms");
    }
    mc = curl_multi_poll(multi_, nullptr, 0, 100, nullptr);
    if (mc != CURLM_OK) return ConnectionError(std::string("curl: ") + curl_multi_strerror(mc));
    if (cancel_ != nullptr && cancel_->cancelled()) return CancelledError("request cancelled");
    return Status::Ok();
  }

  Status TransferError() const {
    if (result_ == CURLE_OK) return Status::Ok();
    std::string detail = error_[0] != '\0' ? error_ : curl_easy_strerror(result_);
    if (result_ == CURLE_OPERATION_TIMEDOUT) return TimeoutError("timeout: " + detail);
    return ConnectionError("connection error: " + detail);
  }

  HttpOptions options_;
  const Canceller* cancel_;
  std::string body_;  // Kept alive for CURLOPT_POSTFIELDS.
  CURLM* multi_ = nullptr;
  CURL* easy_ = nullptr;
  curl_slist* header_list_ = nullptr;
  std::unique_ptr<ScopedCancelCallback> wake_;
  char error_[CURL_ERROR_SIZE] = {};
  int status_ = 0;
  HttpHeaders headers_;
  bool headers_done_ = false;
  std::string pending_;
  bool done_ = false;
  CURLcode result_ = CURLE_OK;
  Clock::time_point last_activity_ = Clock::now();
};

class Transport final : public HttpTransport {
 public:
  Result<std::unique_ptr<HttpResponse>> Send(const HttpRequest& request, const HttpOptions& options,
                                             const Canceller* cancel) override {
    GlobalInit();
    auto response = std::make_unique<CurlResponse>(request, options, cancel);
    STRATA_RETURN_IF_ERROR(response->AwaitHeaders());
    return std::unique_ptr<HttpResponse>(std::move(response));
  }
};

}  // namespace

std::shared_ptr<HttpTransport> CurlTransport() {
  static std::shared_ptr<HttpTransport> transport = std::make_shared<Transport>();
  return transport;
}

Result<std::string> ReadAll(HttpResponse& response, size_t limit) {
  std::string out, chunk;
  while (true) {
    STRATA_ASSIGN_OR_RETURN(bool more, response.Read(&chunk));
    if (!more) return out;
    if (out.size() < limit) out.append(chunk, 0, std::min(chunk.size(), limit - out.size()));
  }
}

std::string_view FindHeader(const HttpHeaders& headers, std::string_view name) {
  for (auto it = headers.rbegin(); it != headers.rend(); ++it) {
    if (EqualsIgnoreCase(it->first, name)) return it->second;
  }
  return "";
}

}  // namespace strata::llm
