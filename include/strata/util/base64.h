// Standard base64 (RFC 4648, '+' and '/'; padding optional), for vocabulary files and binary files carried
// in JSON (a PDF in POST /api/v1/resources).
#pragma once

#include <string>
#include <string_view>

namespace strata {

// Decodes `in`; stops at the first '='. On a byte outside the alphabet sets *ok = false and returns what
// was decoded before it.
std::string Base64Decode(std::string_view in, bool* ok);

}  // namespace strata
