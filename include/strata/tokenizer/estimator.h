// Token estimates for models without a public vocabulary: per-script character ratios calibrated against
// o200k_base (tests/tokenizer/estimator_test.cc checks the error on the test corpus), so that Chinese,
// Japanese or Korean text is not undercounted the way characters / 4 undercounts it (by ~3x).
//
// Thread safety: immutable; safe to share.
#pragma once

#include <cstdint>
#include <string_view>

#include "strata/message/token_estimator.h"

namespace strata::tokenizer {

// Weights in tokens per character class; the defaults are the calibration against o200k_base.
struct ScriptWeights {
  // Fitted (least squares on relative error) to o200k_base counts of tests/tokenizer/corpus.
  double latin_letter = 0.184;  // ASCII and Latin letters.
  double digit = 1.214;         // ASCII digits (short numbers are whole tokens, long ones split by three).
  double space = 0.203;         // White space.
  double punctuation = 0.534;   // Other ASCII symbols.
  double cjk = 0.809;           // Han, kana, hangul, CJK punctuation and full-width forms.
  double other_letter = 0.369;  // Other scripts: Cyrillic, Greek, Arabic, Devanagari, ...
  double other = 1.776;         // Emoji, symbols, anything else (multi-byte, often several tokens).
};

// Returns the estimated token count of UTF-8 `text`.
int64_t EstimateTokens(std::string_view text, const ScriptWeights& weights = {});

// A MessageTokenCounter from the script estimate plus the same per-message overhead as
// EncodingMessageCounter (3 tokens per message, role, name, tool-call names and arguments).
class ScriptRatioEstimator final : public MessageTokenCounter {
 public:
  explicit ScriptRatioEstimator(ScriptWeights weights = {}) : weights_(weights) {}
  int64_t CountMessages(std::span<const Message> messages) const override;
  std::unique_ptr<Tally> NewTally() const override { return NewSummingTally(*this); }  // A sum over messages.

 private:
  ScriptWeights weights_;
};

}  // namespace strata::tokenizer
