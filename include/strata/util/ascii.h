// ASCII-only text helpers (protocol tokens, MIME types, identifiers): no locale, no Unicode case folding.
#pragma once

#include <string>
#include <string_view>

namespace strata {

// Returns `s` with A-Z lowered; every other byte is kept.
inline std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

}  // namespace strata
