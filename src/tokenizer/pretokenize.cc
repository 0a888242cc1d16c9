#include "pretokenize.h"

#include <cstdint>
#include <string>

#include "unicode_classes.inc"  // Generated at build time by tools/gen_unicode_classes.cc.

namespace strata::tokenizer {
namespace {

enum : uint8_t {
  kLetter = 1,    // \p{L}
  kNumber = 2,    // \p{N}
  kSpace = 4,     // \s
  kUpperish = 8,  // [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]
  kLowerish = 16, // [\p{Ll}\p{Lm}\p{Lo}\p{M}]
  kInvalid = 32,  // A byte that does not start a valid UTF-8 sequence: always a piece of its own.
};

struct Char {
  uint32_t cp;
  uint8_t len;    // Bytes.
  uint8_t flags;
};

inline uint8_t Flags(uint32_t cp) { return kUnicodeStage2[kUnicodeStage1[cp >> 8]][cp & 0xFF]; }
// Block 0 covers ASCII: one lookup for the common case.
inline const unsigned char* const kAsciiFlags = kUnicodeStage2[kUnicodeStage1[0]];

// Decodes the character at `pos`; an invalid sequence yields one byte flagged kInvalid.
[[gnu::always_inline]] inline Char At(std::string_view s, size_t pos) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data()) + pos;
  size_t left = s.size() - pos;
  unsigned char c = p[0];
  if (c < 0x80) return {c, 1, kAsciiFlags[c]};
  uint32_t cp;
  uint8_t len;
  if (c >= 0xC2 && c <= 0xDF) {
    if (left < 2 || (p[1] & 0xC0) != 0x80) return {c, 1, kInvalid};
    cp = ((c & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80) return {c, 1, kInvalid};
    if ((c == 0xE0 && p[1] < 0xA0) || (c == 0xED && p[1] >= 0xA0)) return {c, 1, kInvalid};
    cp = ((c & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    len = 3;
  } else if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || (p[1] & 0xC0) != 0x80 || (p[2] & 0xC0) != 0x80 || (p[3] & 0xC0) != 0x80) return {c, 1, kInvalid};
    if ((c == 0xF0 && p[1] < 0x90) || (c == 0xF4 && p[1] >= 0x90)) return {c, 1, kInvalid};
    cp = ((c & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
    len = 4;
  } else {
    return {c, 1, kInvalid};
  }
  return {cp, len, Flags(cp)};
}

inline bool IsNewline(uint32_t cp) { return cp == '\r' || cp == '\n'; }

// Advances over characters whose flags contain any of `want` (and none of `kInvalid`).
[[gnu::always_inline]] inline size_t SkipRun(std::string_view s, size_t pos, uint8_t want) {
  while (pos < s.size()) {
    Char c = At(s, pos);
    if (!(c.flags & want) || (c.flags & kInvalid)) break;
    pos += c.len;
  }
  return pos;
}

// [^\s\p{L}\p{N}] for a valid character.
inline bool IsOther(const Char& c) { return !(c.flags & (kSpace | kLetter | kNumber | kInvalid)); }
// [^\r\n\p{L}\p{N}] for a valid character.
inline bool IsPrefix(const Char& c) { return !(c.flags & (kLetter | kNumber | kInvalid)) && !IsNewline(c.cp); }

// Matches (?i:'s|'t|'re|'ve|'m|'ll|'d) at `pos`; returns its byte length or 0. Case-insensitive matching
// is Unicode simple case folding, under which U+017F LATIN SMALL LETTER LONG S equals 's'.
size_t MatchContraction(std::string_view s, size_t pos) {
  if (pos >= s.size() || s[pos] != '\'') return 0;
  auto lower = [&](size_t at, size_t* len) -> uint32_t {
    if (at >= s.size()) return 0;
    Char c = At(s, at);
    *len = c.len;
    if (c.flags & kInvalid) return 0;
    if (c.cp >= 'A' && c.cp <= 'Z') return c.cp + 32;
    if (c.cp == 0x17F) return 's';
    return c.cp;
  };
  size_t l1 = 0, l2 = 0;
  uint32_t a = lower(pos + 1, &l1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 1 + l1;
  uint32_t b = lower(pos + 1 + l1, &l2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 1 + l1 + l2;
  return 0;
}

// \p{N}{1,3}
size_t Digits(std::string_view s, size_t pos) {
  for (int k = 0; k < 3 && pos < s.size(); ++k) {
    Char c = At(s, pos);
    if (!(c.flags & kNumber) || (c.flags & kInvalid)) break;
    pos += c.len;
  }
  return pos;
}

// ' '?[^\s\p{L}\p{N}]+ followed by any characters of `trail` (\r \n, and '/' for o200k). 0 if no match.
size_t Punctuation(std::string_view s, size_t pos, bool slash_trails) {
  size_t j = pos;
  if (s[j] == ' ') ++j;
  size_t start = j;
  while (j < s.size()) {
    Char c = At(s, j);
    if (!IsOther(c)) break;
    j += c.len;
  }
  if (j == start) return 0;
  while (j < s.size() && (s[j] == '\r' || s[j] == '\n' || (slash_trails && s[j] == '/'))) ++j;
  return j;
}

// \s*[\r\n]+ | \s+(?!\S) | \s+ at a whitespace character.
size_t Whitespace(std::string_view s, size_t pos) {
  size_t end = pos, last_newline_end = 0, last_char_start = pos;
  while (end < s.size()) {
    Char c = At(s, end);
    if (!(c.flags & kSpace) || (c.flags & kInvalid)) break;
    last_char_start = end;
    end += c.len;
    if (IsNewline(c.cp)) last_newline_end = end;
  }
  if (last_newline_end != 0) return last_newline_end;        // \s*[\r\n]+
  if (end == s.size()) return end;                            // \s+(?!\S) at the end of the text
  if (last_char_start > pos) return last_char_start;          // \s+(?!\S): leave one space for the next piece
  return end;                                                 // \s+
}

size_t NextCl100k(std::string_view s, size_t pos) {
  Char c0 = At(s, pos);
  if (c0.flags & kInvalid) return pos + 1;
  if (size_t m = MatchContraction(s, pos)) return pos + m;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  size_t j = (c0.flags & kLetter) ? pos : (IsPrefix(c0) ? pos + c0.len : pos);
  if (j < s.size()) {
    size_t end = SkipRun(s, j, kLetter);
    if (end > j) return end;
  }
  if (c0.flags & kNumber) return Digits(s, pos);
  if (size_t end = Punctuation(s, pos, false)) return end;
  if (c0.flags & kSpace) return Whitespace(s, pos);
  return pos + c0.len;
}

// [U]*[W]+C? starting exactly at `j` (U = kUpperish, W = kLowerish, C = a contraction); 0 if no match.
// U* is greedy with backtracking: it stops at the last position of its run where a W character follows.
size_t O200kUpperThenLower(std::string_view s, size_t j) {
  size_t u_end = j, best = std::string::npos;
  while (u_end < s.size()) {
    Char c = At(s, u_end);
    if (c.flags & kInvalid) break;
    if (c.flags & kLowerish) best = u_end;  // A W character here: U* may stop here.
    if (!(c.flags & kUpperish)) break;
    u_end += c.len;
  }
  if (best == std::string::npos) return 0;
  size_t end = SkipRun(s, best, kLowerish);
  return end + MatchContraction(s, end);
}

// [U]+[W]*C? starting exactly at `j`; 0 if no match.
size_t O200kUpperRun(std::string_view s, size_t j) {
  size_t u_end = SkipRun(s, j, kUpperish);
  if (u_end == j) return 0;
  size_t end = SkipRun(s, u_end, kLowerish);
  return end + MatchContraction(s, end);
}

size_t NextO200k(std::string_view s, size_t pos) {
  Char c0 = At(s, pos);
  if (c0.flags & kInvalid) return pos + 1;
  // The two word alternatives, each tried with the optional prefix character first (greedy) and then
  // without it, in the regex's order. Only a combining mark can be both a prefix and a word character.
  bool prefix = IsPrefix(c0) && pos + c0.len < s.size();
  if (prefix) {
    if (size_t end = O200kUpperThenLower(s, pos + c0.len)) return end;
  }
  if (size_t end = O200kUpperThenLower(s, pos)) return end;
  if (prefix) {
    if (size_t end = O200kUpperRun(s, pos + c0.len)) return end;
  }
  if (size_t end = O200kUpperRun(s, pos)) return end;
  if (c0.flags & kNumber) return Digits(s, pos);
  if (size_t end = Punctuation(s, pos, true)) return end;
  if (c0.flags & kSpace) return Whitespace(s, pos);
  return pos + c0.len;
}

}  // namespace

size_t NextPiece(SplitPattern pattern, std::string_view text, size_t pos) {
  return pattern == SplitPattern::kCl100k ? NextCl100k(text, pos) : NextO200k(text, pos);
}

std::string_view ClassTablesUnicodeVersion() { return kUnicodeVersion; }

}  // namespace strata::tokenizer
