// Encoding: byte-level BPE tokenisation compatible with OpenAI's tiktoken (`cl100k_base`, `o200k_base`).
//
// Encode() splits text with the encoding's pre-tokenisation pattern (a hand-written matcher equivalent
// to tiktoken's regular expression, using Unicode classes generated from ICU at build time), then merges
// the bytes of each piece by rank, exactly as tiktoken does: the same ids for every valid UTF-8 input.
// Ordinary encoding treats special tokens (`<|endoftext|>`, ...) as text; EncodeWithSpecialTokens
// recognises them. Input that is not valid UTF-8 is accepted: each invalid byte becomes its own piece
// (tiktoken's Python/Rust API accepts only valid strings; the npm package likewise).
//
// Vocabularies come from the npm registry's `tiktoken` package (its encoders/<name>.json): Load(name)
// looks in $STRATA_VOCAB_DIR, then in the set-up scripts' cache (~/.cache/strata/npm/node_modules/tiktoken/
// encoders). A loaded Encoding is immutable and shared (shared_ptr<const Encoding>).
//
// Speed comes from memos (docs/PERFORMANCE.md, "Tokenizer"): each thread that encodes keeps ~2 MiB of
// them per encoding (pieces and merged pairs), and an encoding builds 584 KiB of tables for pieces of
// multi-byte characters on first use. None of them changes a result.
//
// Thread safety: all const methods are safe to call concurrently.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/util/status.h"

namespace strata::tokenizer {

using Token = uint32_t;

class Encoding {
 public:
  struct Data;  // The vocabulary; defined in the implementation.

  // Loads the named encoding ("cl100k_base" or "o200k_base") from the vocabulary search path.
  static Result<std::shared_ptr<const Encoding>> Load(std::string_view name);
  // Loads an encoding from the contents of a tiktoken npm `encoders/<name>.json` file.
  static Result<std::shared_ptr<const Encoding>> FromTiktokenJson(std::string_view name, std::string_view json);
  // Returns the directories Load() searches, in order.
  static std::vector<std::string> SearchPath();

  ~Encoding();
  Encoding(const Encoding&) = delete;  // Holds a large immutable vocabulary; share it instead.
  Encoding& operator=(const Encoding&) = delete;

  // Returns the token ids of `text`, treating special-token text as ordinary text.
  std::vector<Token> Encode(std::string_view text) const;
  // Appends the token ids of `text` to `*out`.
  void EncodeTo(std::string_view text, std::vector<Token>* out) const;
  // Returns the number of tokens Encode(text) would return, without materialising them.
  size_t Count(std::string_view text) const;
  // Returns the ids of `text` with every special token's text mapped to its id.
  std::vector<Token> EncodeWithSpecialTokens(std::string_view text) const;
  // Long texts on several threads: `text` is cut at piece boundaries (SplitPoints) into parts of at least
  // `min_part_bytes`, at most `threads` of them, each encoded on its own thread; the ids are exactly those
  // of Encode(text) and Count(text).
  struct Parallel {
    int threads = 2;
    size_t min_part_bytes = size_t{1} << 18;
  };
  void EncodeTo(std::string_view text, std::vector<Token>* out, Parallel parallel) const;
  size_t Count(std::string_view text, Parallel parallel) const;
  // Returns up to `parts` - 1 ascending offsets, each about len/parts from the last, where `text` may be cut
  // without changing its pieces: just after a '\n' that an ASCII letter follows. No pattern of either encoding
  // matches across such a place (a piece with letters never starts with a line break, and every piece that
  // ends in line breaks stops at the first letter), so the pieces of the parts are the pieces of the whole.
  // Offsets closer than `min_part_bytes` to the previous cut or to the end are not returned.
  static std::vector<size_t> SplitPoints(std::string_view text, size_t parts, size_t min_part_bytes);
  // Encodes every text; uses up to `threads` threads (1 = the calling thread only).
  std::vector<std::vector<Token>> EncodeBatch(std::span<const std::string_view> texts, int threads) const;
  // Returns the bytes of `tokens` concatenated (they need not form valid UTF-8). An id that is neither a
  // mergeable nor a special token is kInvalidArgument naming its position.
  Result<std::string> Decode(std::span<const Token> tokens) const;

  const std::string& name() const;
  // Returns the number of ids (mergeable ranks plus special tokens).
  size_t vocab_size() const;
  // Returns the bytes this encoding holds in memory.
  size_t memory_bytes() const;
  // Returns the Unicode version of the character classes the pre-tokeniser uses.
  static std::string_view UnicodeVersion();

 private:
  explicit Encoding(std::unique_ptr<Data> data);
  std::unique_ptr<Data> data_;
};

}  // namespace strata::tokenizer
