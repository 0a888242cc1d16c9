// A loopback HTTP server (cpp-httplib) for provider tests: serves recorded provider responses on
// 127.0.0.1, streamed in chunks with optional delays, or cut off mid-stream, and records what it received.
#pragma once

#include <httplib.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace strata::testing {

// Serves POST requests on an ephemeral 127.0.0.1 port with `handler`, on its own thread, until destroyed.
class HttpTestServer {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
  explicit HttpTestServer(Handler handler) : port_(server_.bind_to_any_port("127.0.0.1")) {
    server_.Post(".*", std::move(handler));
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() before the accept loop runs would be lost; wait for it.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~HttpTestServer() {
    server_.stop();
    thread_.join();
  }
  HttpTestServer(const HttpTestServer&) = delete;
  HttpTestServer& operator=(const HttpTestServer&) = delete;

  // http://127.0.0.1:PORT followed by `path`.
  std::string url(const std::string& path = "") const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

 private:
  httplib::Server server_;
  int port_;
  std::thread thread_;
};

class LoopbackServer {
 public:
  // One reply: status, headers, and a body sent as `chunks` (one write each, `delay` before each).
  struct Reply {
    int status = 200;
    std::string content_type = "text/event-stream";
    std::vector<std::pair<std::string, std::string>> headers;
    std::vector<std::string> chunks;
    std::chrono::milliseconds delay{0};
    bool reset = false;  // Drop the connection after the chunks instead of ending the body.
  };

  LoopbackServer() : http_([this](const httplib::Request& req, httplib::Response& res) { Handle(req, res); }) {}

  std::string base_url() const { return http_.url("/v1"); }

  // Replies are served in order; the last one repeats.
  void Enqueue(Reply reply) {
    std::lock_guard lock(mu_);
    replies_.push_back(std::move(reply));
  }
  // Splits `body` into pieces of `piece` bytes (0 = one chunk).
  static std::vector<std::string> Split(const std::string& body, size_t piece = 0) {
    if (piece == 0) return {body};
    std::vector<std::string> out;
    for (size_t i = 0; i < body.size(); i += piece) out.push_back(body.substr(i, piece));
    return out;
  }

  struct Received {
    std::string path;
    std::string body;
    httplib::Headers headers;
  };
  std::vector<Received> received() const {
    std::lock_guard lock(mu_);
    return received_;
  }
  int hits() const { return hits_.load(); }

 private:
  void Handle(const httplib::Request& req, httplib::Response& res) {
    Reply reply;
    {
      std::lock_guard lock(mu_);
      received_.push_back({req.path, req.body, req.headers});
      size_t i = std::min<size_t>(next_++, replies_.empty() ? 0 : replies_.size() - 1);
      if (!replies_.empty()) reply = replies_[i];
    }
    hits_++;
    res.status = reply.status;
    for (const auto& [k, v] : reply.headers) res.set_header(k, v);
    auto shared = std::make_shared<Reply>(std::move(reply));
    res.set_chunked_content_provider(shared->content_type, [shared](size_t, httplib::DataSink& sink) {
      for (const std::string& chunk : shared->chunks) {
        if (shared->delay.count() > 0) std::this_thread::sleep_for(shared->delay);
        if (!sink.write(chunk.data(), chunk.size())) return false;
      }
      if (shared->reset) return false;
      sink.done();
      return true;
    });
  }

  mutable std::mutex mu_;
  std::vector<Reply> replies_;
  size_t next_ = 0;
  std::vector<Received> received_;
  std::atomic<int> hits_{0};
  HttpTestServer http_;  // Last: stops serving before the state its handler uses is destroyed.
};

}  // namespace strata::testing
