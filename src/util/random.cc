#include "strata/util/random.h"

#include <fstream>

namespace strata {

Result<std::string> RandomHex(size_t bytes) {
  std::ifstream in("/dev/urandom", std::ios::binary);
  std::string raw(bytes, '\0');
  if (!in.read(raw.data(), static_cast<std::streamsize>(bytes))) return Status::Internal("cannot read /dev/urandom");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes);
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

}  // namespace strata
