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

// Returns `s` without the spaces, tabs, carriage returns and line feeds at its two ends.
inline std::string_view StripAsciiWhitespace(std::string_view s) {
  size_t begin = s.find_first_not_of(" \t\r\n");
  if (begin == std::string_view::npos) return {};
  return s.substr(begin, s.find_last_not_of(" \t\r\n") - begin + 1);
}

}  // namespace strata
