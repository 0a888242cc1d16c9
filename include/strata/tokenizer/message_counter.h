// Token counting for messages with a real tokenizer, pluggable wherever Strata takes a
// MessageTokenCounter (e.g. ContextLogOptions::estimator).
//
// Thread safety: immutable after construction; safe to share.
#pragma once

#include <memory>
#include <mutex>
#include <string_view>
#include <unordered_map>

#include "strata/message/token_estimator.h"
#include "strata/tokenizer/encoding.h"

namespace strata::tokenizer {

// An estimate of what a media part costs a prompt. Images: OpenAI's published rule (85 at low detail; else
// 85 + 170 per 512-pixel tile of the image fitted within 2048 x 2048 with its shorter side at most 768),
// the size read from a data: URL's PNG, GIF, WebP or JPEG header, kUnknownImageTokens when it cannot be.
// Audio and video: by the bytes a data: URL carries (audio 1 token per 1.6 kB, about 10 a second at
// 128 kbit/s; video 1 per 800 bytes), at least 100 and 1,000.
int64_t EstimateMediaTokens(const MediaPart& part);

// Counts messages the way OpenAI's chat format bills them: per message a fixed overhead
// (kTokensPerMessage) plus the tokens of its role, name (+1), text and thinking, and of each tool call's
// name and arguments and the tool_call_id. Media parts count what EstimateMediaTokens says (providers bill
// them by size: without it, twenty images cost a 2,000-token window nothing and were all sent).
// CountMessages() is the sum over the messages, without the reply priming that CountPrompt() adds.
class EncodingMessageCounter final : public MessageTokenCounter {
 public:
  static constexpr int64_t kTokensPerMessage = 3;
  // An image whose size cannot be read (a URL, an unknown format): a 1024 x 1024 image at high detail.
  static constexpr int64_t kUnknownImageTokens = 765;
  static constexpr int64_t kReplyPriming = 3;

  explicit EncodingMessageCounter(std::shared_ptr<const Encoding> encoding) : encoding_(std::move(encoding)) {}

  int64_t CountMessages(std::span<const Message> messages) const override;
  std::unique_ptr<Tally> NewTally() const override { return NewSummingTally(*this); }  // A sum over messages.
  // Returns the tokens of one message.
  int64_t CountMessage(const Message& message) const;
  // Returns CountMessages(messages) plus the reply priming the provider adds to a prompt.
  int64_t CountPrompt(std::span<const Message> messages) const;
  // Returns an estimate of the tokens the tool definitions add to a prompt. `tools_json` is a JSON array
  // of {"name","description","parameters"} objects (OpenAI's function shape, with or without the
  // {"type":"function","function":{...}} wrapper). Providers do not publish the exact rendering; this
  // counts each tool's name, description and compact parameter schema plus kTokensPerTool, and
  // kToolsPreamble once. Invalid JSON is kInvalidArgument.
  Result<int64_t> CountToolSchemas(std::string_view tools_json) const;
  static constexpr int64_t kTokensPerTool = 8;
  static constexpr int64_t kToolsPreamble = 12;

  const Encoding& encoding() const { return *encoding_; }

 private:
  std::shared_ptr<const Encoding> encoding_;
};

// Caches another counter's per-message counts, so recounting a growing history only counts the new
// messages. Messages are keyed by a 64-bit hash of their JSON plus its length (a collision, ~1e-9 at a
// million distinct messages, would only misreport one message's count). Only for counters whose count of a
// list is the sum of its messages' counts (EncodingMessageCounter, ScriptRatioEstimator; not
// CharRatioEstimator). When `max_entries` is reached the cache is cleared and starts over.
// Thread safety: thread-safe (one internal mutex).
class CachingMessageCounter final : public MessageTokenCounter {
 public:
  // `inner` is borrowed and must outlive this counter.
  explicit CachingMessageCounter(const MessageTokenCounter* inner, size_t max_entries = 1u << 20)
      : inner_(inner), max_entries_(max_entries) {}
  int64_t CountMessages(std::span<const Message> messages) const override;
  std::unique_ptr<Tally> NewTally() const override { return NewSummingTally(*this); }  // A sum over messages.
  // Returns how many per-message counts were answered from the cache / computed.
  uint64_t hits() const;
  uint64_t misses() const;

 private:
  const MessageTokenCounter* inner_;
  size_t max_entries_;
  mutable std::mutex mu_;
  mutable std::unordered_map<uint64_t, int64_t> counts_;  // Guarded by mu_.
  mutable uint64_t hits_ = 0;                              // Guarded by mu_.
  mutable uint64_t misses_ = 0;                            // Guarded by mu_.
};

}  // namespace strata::tokenizer
