#include "strata/message/token_estimator.h"

namespace strata {

int64_t CountCodePoints(std::string_view s) {
  int64_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;  // Count every non-continuation byte.
  return n;
}



namespace {

int64_t TextCodePoints(const Message& m) {
  int64_t chars = 0;
  for (const ContentPart& part : m.content) {
    if (const auto* text = std::get_if<TextPart>(&part)) chars += CountCodePoints(text->text);
  }
  return chars;
}

class KeptTally final : public MessageTokenCounter::Tally {
 public:
  explicit KeptTally(const MessageTokenCounter& counter) : counter_(counter) {}
  void Add(const Message& message) override { kept_.push_back(message); }
  void Reset() override { kept_.clear(); }
  int64_t Total() const override { return counter_.CountMessages(kept_); }

 private:
  const MessageTokenCounter& counter_;
  std::vector<Message> kept_;
};

class SummingTally final : public MessageTokenCounter::Tally {
 public:
  explicit SummingTally(const MessageTokenCounter& counter) : counter_(counter) {}
  void Add(const Message& message) override { total_ += counter_.CountMessages(std::span<const Message>(&message, 1)); }
  void Reset() override { total_ = 0; }
  int64_t Total() const override { return total_; }

 private:
  const MessageTokenCounter& counter_;
  int64_t total_ = 0;
};

class CharTally final : public MessageTokenCounter::Tally {
 public:
  explicit CharTally(int64_t chars_per_token) : chars_per_token_(chars_per_token) {}
  void Add(const Message& message) override { chars_ += TextCodePoints(message); }
  void Reset() override { chars_ = 0; }
  int64_t Total() const override { return chars_per_token_ > 0 ? chars_ / chars_per_token_ : 0; }

 private:
  int64_t chars_per_token_;
  int64_t chars_ = 0;
};

}  // namespace

std::unique_ptr<MessageTokenCounter::Tally> MessageTokenCounter::NewTally() const {
  return std::make_unique<KeptTally>(*this);
}

std::unique_ptr<MessageTokenCounter::Tally> NewSummingTally(const MessageTokenCounter& counter) {
  return std::make_unique<SummingTally>(counter);
}

int64_t CharRatioEstimator::CountMessages(std::span<const Message> messages) const {
  int64_t chars = 0;
  for (const Message& m : messages) chars += TextCodePoints(m);
  return chars_per_token_ > 0 ? chars / chars_per_token_ : 0;
}

std::unique_ptr<MessageTokenCounter::Tally> CharRatioEstimator::NewTally() const {
  return std::make_unique<CharTally>(chars_per_token_);
}

const MessageTokenCounter* DefaultTokenEstimator() {
  static const CharRatioEstimator* estimator = new CharRatioEstimator(4);  // Never destroyed.
  return estimator;
}

}  // namespace strata
