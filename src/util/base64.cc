#include "strata/util/base64.h"

#include <array>
#include <cstdint>

namespace strata {

std::string Base64Decode(std::string_view in, bool* ok) {
  static const auto table = [] {
    std::array<int8_t, 256> t;
    t.fill(-1);
    const char* chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    for (int i = 0; i < 64; ++i) t[static_cast<unsigned char>(chars[i])] = static_cast<int8_t>(i);
    return t;
  }();
  std::string out;
  out.reserve(in.size() / 4 * 3);
  uint32_t acc = 0;
  int bits = 0;
  *ok = true;
  // Padding: at most two '=' and only at the end, making the length a multiple of four. Without it, a
  // length of 4n+1 cannot be base64 (six bits are not a byte).
  size_t data = in.size();
  while (data > 0 && in.size() - data < 2 && in[data - 1] == '=') --data;
  if ((data < in.size() && in.size() % 4 != 0) || data % 4 == 1) {
    *ok = false;
    return out;
  }
  for (char ch : in.substr(0, data)) {
    int8_t v = table[static_cast<unsigned char>(ch)];
    if (v < 0) {
      *ok = false;
      return out;
    }
    acc = (acc << 6) | static_cast<uint32_t>(v);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out.push_back(static_cast<char>((acc >> bits) & 0xFF));
    }
  }
  return out;
}

}  // namespace strata
