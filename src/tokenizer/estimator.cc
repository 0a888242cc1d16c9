#include "strata/tokenizer/estimator.h"

#include <cmath>

#include "strata/tokenizer/message_counter.h"

namespace strata::tokenizer {
namespace {

// Decodes one UTF-8 character; invalid bytes count as one character of class "other".
size_t Next(std::string_view s, size_t i, uint32_t* cp) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t len = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
  if (i + len > s.size()) len = 1;
  *cp = c;
  if (len == 2) *cp = ((c & 0x1Fu) << 6) | (b(i + 1) & 0x3Fu);
  if (len == 3) *cp = ((c & 0x0Fu) << 12) | ((b(i + 1) & 0x3Fu) << 6) | (b(i + 2) & 0x3Fu);
  if (len == 4) *cp = ((c & 0x07u) << 18) | ((b(i + 1) & 0x3Fu) << 12) | ((b(i + 2) & 0x3Fu) << 6) | (b(i + 3) & 0x3Fu);
  return len;
}

bool IsCjk(uint32_t cp) {
  return (cp >= 0x3040 && cp <= 0x30FF) ||    // Hiragana, Katakana
         (cp >= 0x3400 && cp <= 0x4DBF) ||    // CJK Extension A
         (cp >= 0x4E00 && cp <= 0x9FFF) ||    // CJK Unified Ideographs
         (cp >= 0xAC00 && cp <= 0xD7AF) ||    // Hangul syllables
         (cp >= 0x1100 && cp <= 0x11FF) ||    // Hangul Jamo
         (cp >= 0xF900 && cp <= 0xFAFF) ||    // CJK Compatibility Ideographs
         (cp >= 0xFF00 && cp <= 0xFFEF) ||    // Fullwidth forms
         (cp >= 0x3000 && cp <= 0x303F) ||    // CJK punctuation
         (cp >= 0x20000 && cp <= 0x3134F);    // Extensions B-G
}

}  // namespace

int64_t EstimateTokens(std::string_view text, const ScriptWeights& w) {
  double total = 0;
  for (size_t i = 0; i < text.size();) {
    uint32_t cp;
    i += Next(text, i, &cp);
    if (cp < 0x80) {
      if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) total += w.latin_letter;
      else if (cp >= '0' && cp <= '9') total += w.digit;
      else if (cp == ' ' || cp == '\t' || cp == '\n' || cp == '\r') total += w.space;
      else total += w.punctuation;
    } else if (cp < 0x250) {
      total += w.latin_letter;  // Latin-1 and Latin Extended letters.
    } else if (IsCjk(cp)) {
      total += w.cjk;
    } else if ((cp >= 0x370 && cp <= 0x1FFF) || (cp >= 0xA000 && cp <= 0xABFF)) {
      total += w.other_letter;
    } else {
      total += w.other;
    }
  }
  return static_cast<int64_t>(std::llround(total));
}

int64_t ScriptRatioEstimator::CountMessages(std::span<const Message> messages) const {
  int64_t n = 0;
  for (const Message& m : messages) {
    n += 3 + 1;  // Per-message overhead and the role.
    if (m.name) n += EstimateTokens(*m.name, weights_) + 1;
    for (const ContentPart& part : m.content) {
      if (const auto* t = std::get_if<TextPart>(&part)) n += EstimateTokens(t->text, weights_);
      if (const auto* t = std::get_if<ThinkPart>(&part)) n += EstimateTokens(t->think, weights_);
      if (const auto* media = std::get_if<MediaPart>(&part)) n += EstimateMediaTokens(*media);
    }
    if (m.tool_calls) {
      for (const ToolCall& c : *m.tool_calls) {
        n += EstimateTokens(c.function.name, weights_);
        if (c.function.arguments) n += EstimateTokens(*c.function.arguments, weights_);
      }
    }
    if (m.tool_call_id) n += EstimateTokens(*m.tool_call_id, weights_);
  }
  return n;
}

}  // namespace strata::tokenizer
