// A fast non-cryptographic 64-bit hash (FNV-1a over 8-byte words, then a splitmix64 finaliser) for
// feature hashing and cache keys. Stable across platforms and versions: stored keys depend on it.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace strata::memory {

inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

inline uint64_t Hash64(std::string_view s, uint64_t seed = 0) {
  uint64_t h = 0xcbf29ce484222325ULL ^ Mix64(seed + s.size());
  size_t i = 0;
  for (; i + 8 <= s.size(); i += 8) {
    uint64_t w;
    std::memcpy(&w, s.data() + i, 8);
    h = (h ^ w) * 0x100000001b3ULL;
    h ^= h >> 29;
  }
  for (; i < s.size(); ++i) h = (h ^ static_cast<unsigned char>(s[i])) * 0x100000001b3ULL;
  return Mix64(h);
}

// 128 bits as 32 hex digits: two independent 64-bit hashes (collisions negligible for cache keys).
inline std::string HashHex(std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  uint64_t parts[2] = {Hash64(s, 1), Hash64(s, 0x9e3779b97f4a7c15ULL)};
  std::string out(32, '0');
  for (int p = 0; p < 2; ++p) {
    for (int i = 0; i < 16; ++i) out[p * 16 + i] = kHex[(parts[p] >> (60 - 4 * i)) & 0xf];
  }
  return out;
}

}  // namespace strata::memory
