#include <algorithm>
#include <cctype>
#include <cmath>
#include <deque>
#include <random>
#include <thread>

#include "strata/llm/chat_error.h"
#include "strata/llm/provider.h"
#include "strata/llm/sse.h"

namespace strata::llm {
namespace {

// Reads one response: SSE events (or a whole JSON body) through the decoder into a queue of parts.
class HttpChatStream final : public ChatStream {
 public:
  HttpChatStream(std::unique_ptr<HttpResponse> response, std::unique_ptr<StreamDecoder> decoder, bool stream,
                 const Canceller* cancel)
      : response_(std::move(response)), decoder_(std::move(decoder)), cancel_(cancel) {
    // A server may answer a streaming request with a plain JSON body (errors, or servers without
    // streaming): read it as a non-streamed response.
    std::string_view type = response_->header("content-type");
    stream_ = stream && type.find("application/json") == std::string_view::npos;
  }

  Result<bool> Next(StreamedPart* part) override {
    while (queue_.empty()) {
      if (finished_) return false;
      if (cancel_ != nullptr && cancel_->cancelled()) return CancelledError("generation cancelled");
      STRATA_RETURN_IF_ERROR(Fill());
    }
    *part = std::move(queue_.front());
    queue_.pop_front();
    return true;
  }

  std::string id() const override { return decoder_->id(); }
  std::optional<TokenUsage> usage() const override { return decoder_->usage(); }
  std::string stop_reason() const override { return decoder_->stop_reason(); }

 private:
  Status Fill() {
    std::vector<StreamedPart> parts;
    if (!stream_) {
      STRATA_ASSIGN_OR_RETURN(std::string body, ReadAll(*response_));
      STRATA_RETURN_IF_ERROR(decoder_->OnResponse(body, &parts));
      finished_ = true;
    } else {
      STRATA_ASSIGN_OR_RETURN(bool more, response_->Read(&chunk_));
      Status status;
      auto on_event = [&](const SseEvent& event) {
        if (status.ok()) status = decoder_->OnEvent(event.type, event.data, &parts);
      };
      if (more) {
        sse_.Feed(chunk_, on_event);
      } else {
        sse_.Finish(on_event, /*dispatch_incomplete=*/true);
        finished_ = true;
      }
      STRATA_RETURN_IF_ERROR(status);
      if (finished_) STRATA_RETURN_IF_ERROR(decoder_->Finish());
    }
    for (StreamedPart& p : parts) queue_.push_back(std::move(p));
    return Status::Ok();
  }

  std::unique_ptr<HttpResponse> response_;
  std::unique_ptr<StreamDecoder> decoder_;
  const Canceller* cancel_;
  bool stream_ = true;
  bool finished_ = false;
  SseParser sse_;
  std::string chunk_;
  std::deque<StreamedPart> queue_;
};

class HttpProvider final : public ChatProvider {
 public:
  explicit HttpProvider(ProviderConfig config) : config_(std::move(config)) {
    if (!config_.transport) config_.transport = CurlTransport();
    if (config_.name.empty()) config_.name = std::string(ProviderKindName(config_.kind));
    while (!config_.base_url.empty() && config_.base_url.back() == '/') config_.base_url.pop_back();
  }

  std::string_view name() const override { return config_.name; }
  std::string_view model() const override { return config_.model; }

  Result<std::unique_ptr<ChatStream>> Generate(std::string_view system_prompt, std::span<const ToolDeclaration> tools,
                                               std::span<const Message> history,
                                               const GenerateOptions& options) override {
    if (!config_.missing_key.empty() && !HasCredentialHeader()) return Status::FailedPrecondition(config_.missing_key);
    ChatRequest request{.model = config_.model, .system_prompt = std::string(system_prompt),
                        .tools = {tools.begin(), tools.end()}, .history = {history.begin(), history.end()},
                        .options = config_.options, .stream = config_.stream};
    STRATA_ASSIGN_OR_RETURN(std::string body, BuildRequestBody(config_.kind, request));
    HttpRequest http{.method = "POST",
                     .url = config_.base_url + RequestPath(config_.kind, config_.model, config_.stream),
                     .headers = Headers(),
                     .body = std::move(body)};
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<HttpResponse> response,
                            SendWithRetry(*config_.transport, http, config_.http, config_.retry, options.cancel,
                                          config_.on_retry));
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<StreamDecoder> decoder, NewStreamDecoder(config_.kind, config_.options));
    return std::unique_ptr<ChatStream>(
        new HttpChatStream(std::move(response), std::move(decoder), config_.stream, options.cancel));
  }

 private:
  HttpHeaders Headers() const { return RequestHeaders(config_, config_.stream); }

  // A credential set as an extra header (ProviderConfig::headers) stands in for the key.
  bool HasCredentialHeader() const {
    for (const auto& [name, value] : config_.headers) {
      std::string lower(name);
      for (char& ch : lower) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      if (!value.empty() && (lower == "authorization" || lower == "x-api-key" || lower == "x-goog-api-key")) return true;
    }
    return false;
  }

  ProviderConfig config_;
};

// Scales `base` by a random factor in [1 - jitter, 1 + jitter].
std::chrono::milliseconds Jittered(std::chrono::milliseconds base, double jitter) {
  thread_local std::mt19937_64 rng(std::random_device{}());
  double j = std::clamp(jitter, 0.0, 1.0);
  std::uniform_real_distribution<double> dist(1.0 - j, 1.0 + j);
  return std::chrono::milliseconds(static_cast<int64_t>(static_cast<double>(base.count()) * dist(rng)));
}

// One attempt: the response if its status is 2xx, else the HTTP error (with Retry-After).
Result<std::unique_ptr<HttpResponse>> SendOnce(HttpTransport& transport, const HttpRequest& http,
                                               const HttpOptions& options, const Canceller* cancel) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<HttpResponse> response, transport.Send(http, options, cancel));
  if (response->status() < 200 || response->status() >= 300) {
    auto retry_after = ParseRetryAfter(response->header("retry-after"), std::chrono::system_clock::now());
    auto body = ReadAll(*response, 64 << 10);
    return HttpStatusError(response->status(), body.ok() ? *body : "", retry_after);
  }
  return response;
}

}  // namespace

Result<std::unique_ptr<HttpResponse>> SendWithRetry(HttpTransport& transport, const HttpRequest& http,
                                                    const HttpOptions& options, const RetryPolicy& retry,
                                                    const Canceller* cancel, const RetryCallback& on_retry) {
  for (int attempt = 1;; ++attempt) {
    if (cancel != nullptr && cancel->cancelled()) return CancelledError("request cancelled");
    Result<std::unique_ptr<HttpResponse>> response = SendOnce(transport, http, options, cancel);
    if (response.ok()) return response;
    Status error = response.status();
    if (!IsRetryable(error) || attempt >= std::max(1, retry.max_attempts)) return error;
    std::chrono::milliseconds delay = Jittered(retry.BaseDelay(attempt), retry.jitter);
    if (auto info = ChatErrorOf(error); info && info->retry_after) {
      if (*info->retry_after > retry.max_retry_after) return error;
      delay = std::max(delay, *info->retry_after);
    }
    if (on_retry) on_retry(attempt, error, delay);
    if (cancel != nullptr ? cancel->SleepFor(delay) : (std::this_thread::sleep_for(delay), false)) {
      return CancelledError("request cancelled while waiting to retry");
    }
  }
}

std::chrono::milliseconds RetryPolicy::BaseDelay(int retry) const {
  double delay = static_cast<double>(initial_backoff.count()) * std::pow(multiplier, std::max(0, retry - 1));
  return std::chrono::milliseconds(static_cast<int64_t>(std::min(delay, static_cast<double>(max_backoff.count()))));
}

HttpHeaders RequestHeaders(const ProviderConfig& config, bool stream) {
  HttpHeaders headers = {{"Content-Type", "application/json"}};
  if (stream) headers.emplace_back("Accept", "text/event-stream");
  switch (config.kind) {
    case ProviderKind::kAnthropic:
      headers.emplace_back("anthropic-version", "2023-06-01");
      if (!config.api_key.empty()) headers.emplace_back("x-api-key", config.api_key);
      break;
    case ProviderKind::kGemini:
      if (!config.api_key.empty()) headers.emplace_back("x-goog-api-key", config.api_key);
      break;
    default:
      if (!config.api_key.empty()) headers.emplace_back("Authorization", "Bearer " + config.api_key);
  }
  for (const auto& header : config.headers) {
    // A configured header replaces a default of the same name (compared case-insensitively).
    std::erase_if(headers, [&](const auto& h) { return !FindHeader({h}, header.first).empty(); });
    headers.push_back(header);
  }
  return headers;
}

Result<std::unique_ptr<ChatProvider>> NewHttpProvider(ProviderConfig config) {
  if (config.model.empty()) return Status::InvalidArgument("provider: no model given");
  if (config.base_url.empty()) return Status::InvalidArgument("provider: no base URL given");
  if (!config.base_url.starts_with("http://") && !config.base_url.starts_with("https://")) {
    return Status::InvalidArgument("provider: base URL \"" + config.base_url + "\" must start with http:// or https://");
  }
  // Validate the options now rather than on the first request.
  STRATA_RETURN_IF_ERROR(NewStreamDecoder(config.kind, config.options).status().WithContext("provider options"));
  return std::unique_ptr<ChatProvider>(new HttpProvider(std::move(config)));
}

Result<ProviderPreset> FindProviderPreset(std::string_view name) {
  static const std::pair<std::string_view, ProviderPreset> kPresets[] = {
      {"openai", {ProviderKind::kOpenAIChat, "https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-4.1", "{}"}},
      {"openai-responses",
       {ProviderKind::kOpenAIResponses, "https://api.openai.com/v1", "OPENAI_API_KEY", "gpt-4.1", "{}"}},
      {"kimi", {ProviderKind::kKimi, "https://api.moonshot.ai/v1", "MOONSHOT_API_KEY", "kimi-k2-turbo-preview", "{}"}},
      {"moonshot",
       {ProviderKind::kKimi, "https://api.moonshot.ai/v1", "MOONSHOT_API_KEY", "kimi-k2-turbo-preview", "{}"}},
      {"deepseek", {ProviderKind::kOpenAIChat, "https://api.deepseek.com/v1", "DEEPSEEK_API_KEY", "deepseek-chat",
                    R"({"reasoning_key":"reasoning_content"})"}},
      {"ollama", {ProviderKind::kOpenAIChat, "http://localhost:11434/v1", "OLLAMA_API_KEY", "llama3.2",
                  R"({"reasoning_key":"reasoning"})"}},
      {"vllm", {ProviderKind::kOpenAIChat, "http://localhost:8000/v1", "VLLM_API_KEY", "",
                R"({"reasoning_key":"reasoning_content"})"}},
      {"llamacpp", {ProviderKind::kOpenAIChat, "http://localhost:8080/v1", "LLAMACPP_API_KEY", "default",
                    R"({"reasoning_key":"reasoning_content"})"}},
      {"anthropic",
       {ProviderKind::kAnthropic, "https://api.anthropic.com/v1", "ANTHROPIC_API_KEY", "claude-sonnet-4-5", "{}"}},
      {"gemini", {ProviderKind::kGemini, "https://generativelanguage.googleapis.com/v1beta", "GEMINI_API_KEY",
                  "gemini-2.5-flash", "{}"}},
  };
  for (const auto& [preset_name, preset] : kPresets) {
    if (preset_name == name) return preset;
  }
  return Status::InvalidArgument("unknown provider \"" + std::string(name) +
                                 "\"; expected one of openai, openai-responses, kimi, deepseek, ollama, vllm, "
                                 "llamacpp, anthropic, gemini");
}

}  // namespace strata::llm
