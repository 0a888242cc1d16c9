// ChatProvider: one interface for every vendor. Generate() sends the system prompt, tool declarations and
// history, and returns a ChatStream of StreamedParts as the model produces them, plus the response id and
// usage once known. generate.h consumes streams into messages; step.h adds tool execution.
//
// NewHttpProvider() is the real provider for every wire format in wire.h: it builds the body, sends it with
// the configured transport, retries retryable failures that happen before the response starts (connection,
// timeout, 429, 408/409, 5xx) with exponential backoff and jitter, honouring Retry-After, and decodes the
// stream. A failure after the response started is returned from ChatStream::Next and not retried (neither
// here nor by generate.h, which never retries: a caller that wants another attempt calls again).
//
// Thread safety: providers are thread-safe (concurrent Generate calls are fine); a ChatStream is used by
// one thread at a time.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "strata/llm/http.h"
#include "strata/llm/wire.h"
#include "strata/message/message.h"
#include "strata/util/cancel.h"
#include "strata/util/status.h"

namespace strata::llm {

class ChatStream {
 public:
  virtual ~ChatStream() = default;
  // Sets *part to the next part and returns true, or returns false at the end of the response.
  virtual Result<bool> Next(StreamedPart* part) = 0;
  // The provider's response id ("" until known) and usage (nullopt until reported).
  virtual std::string id() const = 0;
  virtual std::optional<TokenUsage> usage() const = 0;
  // The provider's own word for why the reply ended ("" until known, or when it gave none): see StopReason.
  virtual std::string stop_reason() const { return {}; }
};

struct GenerateOptions {
  const Canceller* cancel = nullptr;  // Cancels the request, its retries and the stream.
};

class ChatProvider {
 public:
  virtual ~ChatProvider() = default;
  virtual std::string_view name() const = 0;
  virtual std::string_view model() const = 0;
  virtual Result<std::unique_ptr<ChatStream>> Generate(std::string_view system_prompt,
                                                      std::span<const ToolDeclaration> tools,
                                                      std::span<const Message> history,
                                                      const GenerateOptions& options = {}) = 0;
};

struct RetryPolicy {
  int max_attempts = 4;  // 1 = no retries.
  std::chrono::milliseconds initial_backoff{500};
  std::chrono::milliseconds max_backoff{30'000};
  double multiplier = 2.0;
  double jitter = 0.2;  // Each delay is scaled by a random factor in [1 - jitter, 1 + jitter].
  // A Retry-After longer than this is not waited for: the error is returned at once.
  std::chrono::milliseconds max_retry_after{60'000};

  // Returns the delay before retry number `retry` (1-based) without jitter.
  std::chrono::milliseconds BaseDelay(int retry) const;
};

// Called before each retry with the attempt number, the error and the delay (for logging).
using RetryCallback = std::function<void(int attempt, const Status& error, std::chrono::milliseconds delay)>;

// Sends `request` and returns the 2xx response (its body not yet read), retrying retryable failures
// (IsRetryable: connection, timeout, 429, 408/409, 5xx) with `retry`'s backoff and jitter, honouring
// Retry-After. Errors: the last attempt's error (an HTTP status carries the provider's message), or
// cancelled.
Result<std::unique_ptr<HttpResponse>> SendWithRetry(HttpTransport& transport, const HttpRequest& request,
                                                    const HttpOptions& options, const RetryPolicy& retry,
                                                    const Canceller* cancel, const RetryCallback& on_retry = {});

struct ProviderConfig {
  ProviderKind kind = ProviderKind::kOpenAIChat;
  std::string name;      // Reported by name(); defaults to the kind's name.
  std::string model;
  std::string base_url;  // e.g. "https://api.openai.com/v1"; the wire format's path is appended.
  std::string api_key;   // Sent as the format's auth header when not empty.
  // Set when the config names a hosted service but no key (ResolveProviderConfig): every request then fails
  // at once with kFailedPrecondition and this message, as the service would refuse it (HTTP 401), without
  // the network round trip and its retries — unless `headers` carries a credential (Authorization,
  // x-api-key, x-goog-api-key).
  std::string missing_key;
  HttpHeaders headers;   // Extra headers (after the defaults; same name replaces).
  std::string options = "{}";  // Per-format options (wire.h).
  bool stream = true;
  HttpOptions http;
  RetryPolicy retry;
  std::shared_ptr<HttpTransport> transport;  // Defaults to CurlTransport().
  RetryCallback on_retry;
};

// The headers of a request to `config`'s API: content type, the format's auth header and version, then the
// configured extra headers (which replace defaults of the same name).
HttpHeaders RequestHeaders(const ProviderConfig& config, bool stream);

// Fails with kInvalidArgument if the config cannot work (no model, no base URL, bad options).
Result<std::unique_ptr<ChatProvider>> NewHttpProvider(ProviderConfig config);

// A named preset: kind, default base URL, the environment variable holding its key, default model and
// options. Names: openai, openai-responses, kimi (moonshot), deepseek, ollama, vllm, llamacpp, anthropic,
// gemini.
struct ProviderPreset {
  ProviderKind kind;
  std::string base_url;
  std::string api_key_env;
  std::string default_model;
  std::string options;
};
Result<ProviderPreset> FindProviderPreset(std::string_view name);

}  // namespace strata::llm
