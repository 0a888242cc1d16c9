// MessageTokenCounter: how Strata estimates the tokens of messages that no provider has counted yet
// (e.g. the messages after the last usage mark of a context log).
//
// The tokenizer module provides exact counters; CharRatioEstimator is the dependency-free fallback and
// reproduces kimi-cli's estimate exactly (characters of text / 4) so that `token_count_with_pending` matches
// it when no tokenizer is configured.
//
// Thread safety: implementations must be safe to call concurrently (they are shared, immutable objects).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "strata/message/message.h"

namespace strata {

class MessageTokenCounter {
 public:
  virtual ~MessageTokenCounter() = default;
  // Returns the estimated token count of `messages` taken together.
  virtual int64_t CountMessages(std::span<const Message> messages) const = 0;

  // A count kept as messages arrive one at a time (a one-pass reader of a log): Total() equals
  // CountMessages() of every message added since the last Reset(). Borrows the counter that made it.
  class Tally {
   public:
    virtual ~Tally() = default;
    virtual void Add(const Message& message) = 0;
    virtual void Reset() = 0;
    virtual int64_t Total() const = 0;
  };
  // Returns a new tally. The default keeps the messages it is given (memory grows with them); counters
  // whose count is a sum over messages return NewSummingTally(*this), which keeps one number.
  virtual std::unique_ptr<Tally> NewTally() const;
};

// A tally for a counter whose CountMessages() is the sum of its count of each message alone.
std::unique_ptr<MessageTokenCounter::Tally> NewSummingTally(const MessageTokenCounter& counter);

// kimi-cli's estimate: the number of Unicode code points in all text parts, summed over the messages,
// divided by `chars_per_token` (rounded down). Thinking, media and tool-call arguments are not counted.
class CharRatioEstimator final : public MessageTokenCounter {
 public:
  explicit CharRatioEstimator(int64_t chars_per_token = 4) : chars_per_token_(chars_per_token) {}
  int64_t CountMessages(std::span<const Message> messages) const override;
  // Keeps the code points seen (the division comes last, as in CountMessages).
  std::unique_ptr<Tally> NewTally() const override;

 private:
  int64_t chars_per_token_;
};

// Returns a process-wide CharRatioEstimator(4). Never null; never freed.
const MessageTokenCounter* DefaultTokenEstimator();

// Returns the number of Unicode code points in UTF-8 `s` (invalid bytes count as one each).
int64_t CountCodePoints(std::string_view s);

}  // namespace strata
