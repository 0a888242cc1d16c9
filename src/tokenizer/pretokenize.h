// Internal: pre-tokenisation. Splits text into pieces exactly as tiktoken's split patterns do, with a
// hand-written matcher per pattern (no regex engine on the hot path).
#pragma once

#include <cstddef>
#include <string_view>

namespace strata::tokenizer {

enum class SplitPattern {
  kCl100k,  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|...
  kO200k,   // [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|...)?|...
};

// Returns the end (exclusive byte offset) of the piece that starts at `pos` (< text.size()).
size_t NextPiece(SplitPattern pattern, std::string_view text, size_t pos);

// Returns the Unicode version of the generated class tables.
std::string_view ClassTablesUnicodeVersion();

}  // namespace strata::tokenizer
