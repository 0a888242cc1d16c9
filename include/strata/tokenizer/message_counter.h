// Token counting for messages with a real tokenizer, pluggable wherever Strata takes a
// MessageTokenCounter (e.g. ContextLogOptions::estimator).
//
// Thread safety: immutable after construction; safe to share.
#pragma once

#include <memory>

#include "strata/message/token_estimator.h"
#include "strata/tokenizer/encoding.h"

namespace strata::tokenizer {

// Counts messages the way OpenAI's chat format bills them: per message a fixed overhead
// (kTokensPerMessage) plus the tokens of its role, name (+1), text and thinking, and of each tool call's
// name and arguments and the tool_call_id. Media parts count nothing here (providers bill them by size).
// CountMessages() is the sum over the messages, without the reply priming that CountPrompt() adds.
class EncodingMessageCounter final : public MessageTokenCounter {
 public:
  static constexpr int64_t kTokensPerMessage = 3;
  static constexpr int64_t kReplyPriming = 3;

  explicit EncodingMessageCounter(std::shared_ptr<const Encoding> encoding) : encoding_(std::move(encoding)) {}

  int64_t CountMessages(std::span<const Message> messages) const override;
  // Returns the tokens of one message.
  int64_t CountMessage(const Message& message) const;
  // Returns CountMessages(messages) plus the reply priming the provider adds to a prompt.
  int64_t CountPrompt(std::span<const Message> messages) const;

  const Encoding& encoding() const { return *encoding_; }

 private:
  std::shared_ptr<const Encoding> encoding_;
};

}  // namespace strata::tokenizer
