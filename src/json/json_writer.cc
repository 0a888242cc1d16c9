#include "strata/json/json_writer.h"

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

#include <array>
#include <charconv>
#include <cstring>

#include <simdjson.h>

namespace strata::json {
namespace {

constexpr char kHex[] = "0123456789abcdef";

void AppendU16Escape(std::string* out, uint32_t unit) {
  char buf[6] = {'\\', 'u', kHex[(unit >> 12) & 0xF], kHex[(unit >> 8) & 0xF], kHex[(unit >> 4) & 0xF],
                 kHex[unit & 0xF]};
  out->append(buf, 6);
}

// Decodes one UTF-8 sequence at s[i]; returns its length (0 if invalid) and the code point.
size_t DecodeUtf8(std::string_view s, size_t i, uint32_t* cp) {
  auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = b(i);
  size_t n = s.size() - i;
  if (c < 0x80) { *cp = c; return 1; }
  if (c >= 0xC2 && c <= 0xDF) {
    if (n < 2 || (b(i + 1) & 0xC0) != 0x80) return 0;
    *cp = ((c & 0x1Fu) << 6) | (b(i + 1) & 0x3Fu);
    return 2;
  }
  if (c >= 0xE0 && c <= 0xEF) {
    if (n < 3 || (b(i + 1) & 0xC0) != 0x80 || (b(i + 2) & 0xC0) != 0x80) return 0;
    if (c == 0xE0 && b(i + 1) < 0xA0) return 0;   // Overlong.
    if (c == 0xED && b(i + 1) >= 0xA0) return 0;  // Surrogate.
    *cp = ((c & 0x0Fu) << 12) | ((b(i + 1) & 0x3Fu) << 6) | (b(i + 2) & 0x3Fu);
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (n < 4 || (b(i + 1) & 0xC0) != 0x80 || (b(i + 2) & 0xC0) != 0x80 || (b(i + 3) & 0xC0) != 0x80) return 0;
    if (c == 0xF0 && b(i + 1) < 0x90) return 0;  // Overlong.
    if (c == 0xF4 && b(i + 1) >= 0x90) return 0;  // Beyond U+10FFFF.
    *cp = ((c & 0x07u) << 18) | ((b(i + 1) & 0x3Fu) << 12) | ((b(i + 2) & 0x3Fu) << 6) | (b(i + 3) & 0x3Fu);
    return 4;
  }
  return 0;
}

}  // namespace

// kNeedsEscape[c] is 1 for bytes that cannot be copied verbatim into a raw-UTF-8 JSON string.
constexpr auto kNeedsEscape = [] {
  std::array<uint8_t, 256> table{};
  for (int c = 0; c < 0x20; ++c) table[c] = 1;
  table['"'] = 1;
  table['\\'] = 1;
  return table;
}();

namespace {

// Returns the offset of the first byte at or after `i` that cannot be copied verbatim (a control
// character, '"', '\\', and with `ascii_only` any byte >= 0x80), or s.size(). Sixteen bytes a step where
// SSE2 is available (every x86-64), eight by word arithmetic elsewhere: text is mostly plain runs.
size_t NextToEscape(std::string_view s, size_t i, bool ascii_only) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), below = _mm_set1_epi8(0x1F);
  for (; i + 16 <= n; i += 16) {
    __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
                               _mm_cmpeq_epi8(_mm_min_epu8(x, below), x));  // x <= 0x1F, unsigned.
    int mask = _mm_movemask_epi8(hit);
    if (ascii_only) mask |= _mm_movemask_epi8(x);  // The high bit: non-ASCII.
    if (mask != 0) return i + static_cast<size_t>(__builtin_ctz(static_cast<unsigned>(mask)));
  }
#else
  constexpr uint64_t kOnes = 0x0101010101010101ull, kHigh = 0x8080808080808080ull;
  auto zero_byte = [](uint64_t v) { return (v - kOnes) & ~v & kHigh; };
  for (; i + 8 <= n; i += 8) {
    uint64_t v;
    std::memcpy(&v, p + i, 8);
    uint64_t hit = zero_byte(v ^ (kOnes * '"')) | zero_byte(v ^ (kOnes * '\\')) | ((v - kOnes * 0x20) & ~v & kHigh);
    if (ascii_only) hit |= v & kHigh;
    if (hit != 0) break;  // The byte loop below finds which one.
  }
#endif
  for (; i < n; ++i) {
    unsigned char c = p[i];
    if (kNeedsEscape[c] || (ascii_only && c >= 0x80)) return i;
  }
  return n;
}

}  // namespace

namespace {

// The escape of each byte that needs one in the raw-UTF-8 style (control characters, '"', '\\'), padded
// to eight bytes so that it is copied with one fixed-size store; `length` says how many count.
struct Escape {
  char text[8];
  uint8_t length;
};
constexpr auto kEscapes = [] {
  std::array<Escape, 128> table{};
  for (int c = 0; c < 128; ++c) {
    Escape e{{'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xF], 0, 0}, 6};
    char two = c == '"' ? '"' : c == '\\' ? '\\' : c == '\n' ? 'n' : c == '\r' ? 'r' : c == '\t' ? 't'
             : c == '\b' ? 'b' : c == '\f' ? 'f' : 0;
    if (two != 0) e = Escape{{'\\', two, 0, 0, 0, 0, 0, 0}, 2};
    table[static_cast<size_t>(c)] = e;
  }
  return table;
}();

inline size_t WriteEscape(char* to, unsigned char c) {
  std::memcpy(to, kEscapes[c].text, 8);
  return kEscapes[c].length;
}

// The raw-UTF-8 style, the hot one (every message written or shown). Sixteen bytes a step: a block
// without escapes is copied whole; in one with escapes, each is written in turn from the block's mask (code
// and tool output hold one every few dozen bytes), every copy a fixed-size store (the buffer has slack,
// the count advances by what is real). Output gathers in a local buffer appended in blocks.
void AppendRawUtf8Body(std::string* out, std::string_view s) {
  constexpr size_t kBuffer = 8192;
  constexpr size_t kSlack = 16 * 8 + 16;  // A block of sixteen escapes, each stored as eight bytes, and a tail.
  char buf[kBuffer];
  size_t used = 0;
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
#if defined(__SSE2__)
  const __m128i quote = _mm_set1_epi8('"'), backslash = _mm_set1_epi8('\\'), below = _mm_set1_epi8(0x1F);
  alignas(16) unsigned char block[32] = {};
  for (; i + 16 <= n; i += 16) {
    if (used > kBuffer - kSlack) {
      out->append(buf, used);
      used = 0;
    }
    __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + i));
    __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, backslash)),
                               _mm_cmpeq_epi8(_mm_min_epu8(x, below), x));  // x <= 0x1F, unsigned.
    unsigned mask = static_cast<unsigned>(_mm_movemask_epi8(hit));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(buf + used), x);
    if (mask == 0) {
      used += 16;
      continue;
    }
    _mm_store_si128(reinterpret_cast<__m128i*>(block), x);
    size_t from = 0;
    while (mask != 0) {
      size_t at = static_cast<size_t>(__builtin_ctz(mask));
      std::memcpy(buf + used, block + from, 16);  // Bytes past `at` are overwritten next.
      used += at - from;
      used += WriteEscape(buf + used, block[at]);
      from = at + 1;
      mask &= mask - 1;
    }
    std::memcpy(buf + used, block + from, 16);
    used += 16 - from;
  }
#endif
  for (; i < n; ++i) {
    if (used > kBuffer - kSlack) {
      out->append(buf, used);
      used = 0;
    }
    unsigned char c = p[i];
    if (kNeedsEscape[c]) {
      used += WriteEscape(buf + used, c);
    } else {
      buf[used++] = static_cast<char>(c);
    }
  }
  out->append(buf, used);
}

}  // namespace

void AppendString(std::string* out, std::string_view s, StringStyle style) {
  out->reserve(out->size() + s.size() + 2);
  out->push_back('"');
  if (style == StringStyle::kRawUtf8) {
    AppendRawUtf8Body(out, s);
    out->push_back('"');
    return;
  }
  const bool ascii_only = true;
  size_t run_start = 0;
  for (size_t i = 0; i < s.size();) {
    i = NextToEscape(s, i, ascii_only);
    if (i == s.size()) break;
    unsigned char c = static_cast<unsigned char>(s[i]);
    out->append(s.data() + run_start, i - run_start);
    if (c < 0x80) {
      switch (c) {
        case '"': out->append("\\\""); break;
        case '\\': out->append("\\\\"); break;
        case '\n': out->append("\\n"); break;
        case '\r': out->append("\\r"); break;
        case '\t': out->append("\\t"); break;
        case '\b': out->append("\\b"); break;
        case '\f': out->append("\\f"); break;
        default: AppendU16Escape(out, c); break;
      }
      ++i;
    } else {
      uint32_t cp = 0xFFFD;
      size_t len = DecodeUtf8(s, i, &cp);
      if (len == 0) {
        cp = 0xFFFD;
        len = 1;
      }
      if (cp >= 0x10000) {
        uint32_t v = cp - 0x10000;
        AppendU16Escape(out, 0xD800 + (v >> 10));
        AppendU16Escape(out, 0xDC00 + (v & 0x3FF));
      } else {
        AppendU16Escape(out, cp);
      }
      i += len;
    }
    run_start = i;
  }
  out->append(s.data() + run_start, s.size() - run_start);
  out->push_back('"');
}

void AppendPythonFloat(std::string* out, double value) {
  if (value != value) { out->append("NaN"); return; }
  if (value == 1.0 / 0.0) { out->append("Infinity"); return; }
  if (value == -1.0 / 0.0) { out->append("-Infinity"); return; }
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::scientific);
  std::string_view sci(buf, static_cast<size_t>(res.ptr - buf));  // e.g. "-1.5e-05"
  bool negative = !sci.empty() && sci[0] == '-';
  if (negative) sci.remove_prefix(1);
  size_t e_pos = sci.find('e');
  std::string digits;
  for (char ch : sci.substr(0, e_pos)) {
    if (ch != '.') digits.push_back(ch);
  }
  int exp10 = 0;
  std::from_chars(sci.data() + e_pos + 1 + (sci[e_pos + 1] == '+' ? 1 : 0), sci.data() + sci.size(), exp10);
  if (negative) out->push_back('-');
  if (exp10 >= -4 && exp10 < 16) {
    if (exp10 < 0) {
      out->append("0.");
      out->append(static_cast<size_t>(-exp10 - 1), '0');
      out->append(digits);
    } else {
      size_t int_len = static_cast<size_t>(exp10) + 1;
      if (digits.size() <= int_len) {
        out->append(digits);
        out->append(int_len - digits.size(), '0');
        out->append(".0");
      } else {
        out->append(digits, 0, int_len);
        out->push_back('.');
        out->append(digits, int_len, std::string::npos);
      }
    }
  } else {
    out->push_back(digits[0]);
    if (digits.size() > 1) {
      out->push_back('.');
      out->append(digits, 1, std::string::npos);
    }
    int magnitude = exp10 < 0 ? -exp10 : exp10;
    out->push_back('e');
    out->push_back(exp10 < 0 ? '-' : '+');
    if (magnitude < 10) out->push_back('0');
    out->append(std::to_string(magnitude));
  }
}

void AppendUtf8(std::string* out, char32_t cp) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

bool IsValidUtf8(std::string_view s, size_t* bad_offset) {
  if (simdjson::validate_utf8(s.data(), s.size())) return true;  // SIMD fast path; locate the error below.
  for (size_t i = 0; i < s.size();) {
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      ++i;
      continue;
    }
    uint32_t cp;
    size_t len = DecodeUtf8(s, i, &cp);
    if (len == 0) {
      if (bad_offset) *bad_offset = i;
      return false;
    }
    i += len;
  }
  return true;
}

std::string ReplaceLoneSurrogateEscapes(std::string_view text) {
  auto surrogate = [&](size_t at, bool high) {  // text[at] is the start of "\uXXXX"?
    if (at + 6 > text.size() || text[at] != '\\' || (text[at + 1] != 'u' && text[at + 1] != 'U')) return false;
    unsigned v = 0;
    for (size_t i = at + 2; i < at + 6; ++i) {
      char c = text[i];
      int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      if (d < 0) return false;
      v = v * 16 + static_cast<unsigned>(d);
    }
    return high ? (v >= 0xD800 && v <= 0xDBFF) : (v >= 0xDC00 && v <= 0xDFFF);
  };
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) {
    if (text[i] != '\\' || i + 1 >= text.size()) {
      out += text[i++];
      continue;
    }
    if (surrogate(i, true) && surrogate(i + 6, false)) {  // A whole pair.
      out.append(text.substr(i, 12));
      i += 12;
    } else if (surrogate(i, true) || surrogate(i, false)) {
      out += "\\ufffd";
      i += 6;
    } else {  // Any other escape, its next character taken with it (an escaped backslash is not a \u).
      out.append(text.substr(i, 2));
      i += 2;
    }
  }
  return out;
}

std::string ReplaceInvalidUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp;
    size_t len = DecodeUtf8(s, i, &cp);
    if (len == 0) {
      out.append("\xEF\xBF\xBD");
      ++i;
    } else {
      out.append(s.data() + i, len);
      i += len;
    }
  }
  return out;
}

}  // namespace strata::json
