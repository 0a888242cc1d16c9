// Path helpers for '/'-separated paths. Pure string functions: no file-system access.
#pragma once

#include <string>
#include <string_view>

namespace strata {

// Returns the directory part of `path` ("." when there is none, "/" for a root-level file).
std::string Dirname(std::string_view path);
// Returns the last component of `path`.
std::string Basename(std::string_view path);
// Returns `dir` + "/" + `name` (no doubled separator).
std::string JoinPath(std::string_view dir, std::string_view name);
// Splits "context.jsonl" into {"context", ".jsonl"}; a name without a dot has an empty extension.
std::pair<std::string, std::string> SplitExtension(std::string_view name);

}  // namespace strata
