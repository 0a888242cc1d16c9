// Recording and replay of HTTP exchanges (scripted.h). One JSON object per line:
//   {"url": ..., "request": <body as JSON, or a string if not JSON>, "status": 200,
//    "headers": {"content-type": ..., "retry-after": ...}, "response": "<raw body text>"}
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>

#include "strata/json/json_writer.h"
#include "strata/llm/chat_error.h"
#include "strata/llm/scripted.h"

#include "strata/json/checked.h"

namespace strata::llm {
namespace {

using Json = nlohmann::json;

Json BodyJson(const std::string& body) {
  Json parsed = strata::json::ParseOrDiscard<Json>(body);
  return parsed.is_discarded() ? Json(json::ReplaceInvalidUtf8(body)) : parsed;
}

class Recorder {
 public:
  explicit Recorder(std::string path) : path_(std::move(path)) {}
  void Append(const Json& record) {
    std::lock_guard lock(mu_);
    std::ofstream out(path_, std::ios::app | std::ios::binary);
    out << record.dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
  }

 private:
  std::string path_;
  std::mutex mu_;
};

// Passes the body through and writes the exchange once the body has been read to the end (or abandoned).
class RecordingResponse final : public HttpResponse {
 public:
  RecordingResponse(std::unique_ptr<HttpResponse> inner, std::shared_ptr<Recorder> recorder, Json record)
      : inner_(std::move(inner)), recorder_(std::move(recorder)), record_(std::move(record)) {}
  ~RecordingResponse() override { Flush(); }

  int status() const override { return inner_->status(); }
  std::string_view header(std::string_view name) const override { return inner_->header(name); }
  Result<bool> Read(std::string* chunk) override {
    Result<bool> more = inner_->Read(chunk);
    if (more.ok() && *more) body_ += *chunk;
    if (!more.ok() || !*more) Flush();
    return more;
  }

 private:
  void Flush() {
    if (flushed_) return;
    flushed_ = true;
    record_["response"] = json::ReplaceInvalidUtf8(body_);
    recorder_->Append(record_);
  }

  std::unique_ptr<HttpResponse> inner_;
  std::shared_ptr<Recorder> recorder_;
  Json record_;
  std::string body_;
  bool flushed_ = false;
};

class Recording final : public HttpTransport {
 public:
  Recording(std::shared_ptr<HttpTransport> inner, std::string path)
      : inner_(std::move(inner)), recorder_(std::make_shared<Recorder>(std::move(path))) {}

  Result<std::unique_ptr<HttpResponse>> Send(const HttpRequest& request, const HttpOptions& options,
                                             const Canceller* cancel) override {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<HttpResponse> response, inner_->Send(request, options, cancel));
    Json headers = Json::object();
    for (const char* name : {"content-type", "retry-after"}) {
      std::string_view value = response->header(name);
      if (!value.empty()) headers[name] = std::string(value);
    }
    Json record{{"url", request.url}, {"request", BodyJson(request.body)}, {"status", response->status()},
                {"headers", headers}};
    return std::unique_ptr<HttpResponse>(new RecordingResponse(std::move(response), recorder_, std::move(record)));
  }

 private:
  std::shared_ptr<HttpTransport> inner_;
  std::shared_ptr<Recorder> recorder_;
};

struct Exchange {
  Json request;
  int status = 200;
  HttpHeaders headers;
  std::string response;
};

class MemoryResponse final : public HttpResponse {
 public:
  MemoryResponse(const Exchange& exchange, size_t chunk_bytes)
      : status_(exchange.status), headers_(exchange.headers), body_(exchange.response), chunk_bytes_(chunk_bytes) {}
  int status() const override { return status_; }
  std::string_view header(std::string_view name) const override { return FindHeader(headers_, name); }
  Result<bool> Read(std::string* chunk) override {
    if (offset_ >= body_.size()) return false;
    size_t n = chunk_bytes_ == 0 ? body_.size() : chunk_bytes_;
    *chunk = body_.substr(offset_, n);
    offset_ += chunk->size();
    return true;
  }

 private:
  int status_;
  HttpHeaders headers_;
  std::string body_;
  size_t chunk_bytes_;
  size_t offset_ = 0;
};

class Replay final : public HttpTransport {
 public:
  Replay(std::vector<Exchange> exchanges, bool check, size_t chunk_bytes)
      : exchanges_(std::move(exchanges)), check_(check), chunk_bytes_(chunk_bytes) {}

  Result<std::unique_ptr<HttpResponse>> Send(const HttpRequest& request, const HttpOptions&,
                                             const Canceller* cancel) override {
    if (cancel != nullptr && cancel->cancelled()) return CancelledError("request cancelled");
    std::lock_guard lock(mu_);
    if (next_ >= exchanges_.size()) {
      return Status::FailedPrecondition("replay: no recorded exchange left (the recording has " +
                                        std::to_string(exchanges_.size()) + ")");
    }
    const Exchange& exchange = exchanges_[next_];
    if (check_ && BodyJson(request.body) != exchange.request) {
      return Status::FailedPrecondition("replay: request " + std::to_string(next_ + 1) +
                                        " differs from the recorded one");
    }
    ++next_;
    return std::unique_ptr<HttpResponse>(new MemoryResponse(exchange, chunk_bytes_));
  }

 private:
  std::vector<Exchange> exchanges_;
  bool check_;
  size_t chunk_bytes_;
  std::mutex mu_;
  size_t next_ = 0;  // Guarded by mu_.
};

}  // namespace

std::shared_ptr<HttpTransport> RecordingTransport(std::shared_ptr<HttpTransport> inner, std::string path) {
  return std::make_shared<Recording>(std::move(inner), std::move(path));
}

Result<std::shared_ptr<HttpTransport>> ReplayTransport(const std::string& path, bool check_requests,
                                                       size_t chunk_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("replay: cannot open " + path);
  std::vector<Exchange> exchanges;
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.empty()) continue;
    std::string where = path + ":" + std::to_string(line_no);
    Json record = strata::json::ParseOrDiscard<Json>(line);
    if (record.is_discarded() || !record.is_object()) {
      return Status::InvalidArgument(where + ": not a JSON object");
    }
    if (!record.contains("response") || !record["response"].is_string()) {
      return Status::InvalidArgument(where + ": missing \"response\" text");
    }
    if (const Json* status = json::Field(record, "status"); status != nullptr && !status->is_number_integer()) {
      return Status::InvalidArgument(where + ": \"status\" must be an integer, not " + std::string(json::TypeName(*status)));
    }
    Exchange exchange{.request = record.value("request", Json()), .status = static_cast<int>(json::IntOr(record, "status", 200)),
                      .response = record["response"].get<std::string>()};
    if (auto it = record.find("headers"); it != record.end() && it->is_object()) {
      for (const auto& [name, value] : it->items()) {
        if (value.is_string()) exchange.headers.emplace_back(name, value.get<std::string>());
      }
    }
    exchanges.push_back(std::move(exchange));
  }
  return std::shared_ptr<HttpTransport>(std::make_shared<Replay>(std::move(exchanges), check_requests, chunk_bytes));
}

}  // namespace strata::llm
