// UTF-8 helpers for cutting text to a byte budget without splitting a character.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace strata {

// The longest prefix of `s` of at most `max_bytes` that does not end inside a multi-byte character: `s.size()`
// when it fits, else `max_bytes` moved back past continuation bytes. Input that is not UTF-8 is cut by bytes.
inline size_t Utf8Prefix(std::string_view s, size_t max_bytes) {
  if (s.size() <= max_bytes) return s.size();
  size_t cut = max_bytes;
  while (cut > 0 && (static_cast<unsigned char>(s[cut]) & 0xC0) == 0x80) --cut;
  return cut;
}

// `text` cut to at most `max_bytes` at a character boundary (Utf8Prefix).
inline std::string Utf8Cut(std::string text, size_t max_bytes) {
  text.resize(Utf8Prefix(text, max_bytes));
  return text;
}

}  // namespace strata
