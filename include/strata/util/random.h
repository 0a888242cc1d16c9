// Secrets and unguessable ids: API keys, MCP session ids.
#pragma once

#include <cstddef>
#include <string>

#include "strata/util/status.h"

namespace strata {

// `bytes` bytes from the kernel's random source (/dev/urandom) as 2 × `bytes` lower-case hex digits.
Result<std::string> RandomHex(size_t bytes);

}  // namespace strata
