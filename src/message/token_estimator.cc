#include "strata/message/token_estimator.h"

namespace strata {

int64_t CountCodePoints(std::string_view s) {
  int64_t n = 0;
  for (char c : s) n += (static_cast<unsigned char>(c) & 0xC0) != 0x80;  // Count every non-continuation byte.
  return n;
}

int64_t CharRatioEstimator::CountMessages(std::span<const Message> messages) const {
  int64_t chars = 0;
  for (const Message& m : messages) {
    for (const ContentPart& part : m.content) {
      if (const auto* text = std::get_if<TextPart>(&part)) chars += CountCodePoints(text->text);
    }
  }
  return chars_per_token_ > 0 ? chars / chars_per_token_ : 0;
}

const MessageTokenCounter* DefaultTokenEstimator() {
  static const CharRatioEstimator* estimator = new CharRatioEstimator(4);  // Never destroyed.
  return estimator;
}

}  // namespace strata
