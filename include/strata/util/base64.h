// Standard base64 (RFC 4648, '+' and '/'; padding optional), for vocabulary files and binary files carried
// in JSON (a PDF in POST /api/v1/resources).
#pragma once

#include <string>
#include <string_view>

namespace strata {

// Decodes `in`. Sets *ok = false (and returns what was decoded before the fault) on a byte outside the
// alphabet, an '=' anywhere but the last one or two places of a length that is a multiple of four, or a
// length no encoding has (4n+1): "aGVsbG8=garbage" is refused, not read as "hello".
std::string Base64Decode(std::string_view in, bool* ok);

}  // namespace strata
