#include "strata/tokenizer/encoding.h"
#include "strata/util/base64.h"

#include <fcntl.h>
#include <simdjson.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <mutex>
#include <queue>
#include <sstream>
#include <system_error>
#include <thread>
#include <unordered_map>

#include "pretokenize.h"

namespace strata::tokenizer {

namespace {

constexpr uint32_t kNoRank = UINT32_MAX;
// Vocabularies have ~10^5 ranks; anything near 2^24 is not a tiktoken vocabulary.
constexpr uint64_t kMaxRanks = uint64_t{1} << 24;

inline uint64_t Load64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

inline uint32_t Load32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Returns the first min(n, 8) bytes of p as a zero-padded little-endian word, without a variable-length
// copy and without reading outside [p, p + n): short keys are read with overlapping fixed-size loads.
inline uint64_t Head(const uint8_t* p, size_t n) {
  if (n >= 8) return Load64(p);
  if (n >= 4) return static_cast<uint64_t>(Load32(p)) | (static_cast<uint64_t>(Load32(p + n - 4)) << (8 * (n - 4)));
  if (n == 0) return 0;
  return static_cast<uint64_t>(p[0]) | (static_cast<uint64_t>(p[n / 2]) << (8 * (n / 2))) |
         (static_cast<uint64_t>(p[n - 1]) << (8 * (n - 1)));
}

inline uint64_t Mix(uint64_t h) {
  h ^= h >> 32;
  h *= 0xD6E8FEB86659FD93ull;
  h ^= h >> 32;
  return h;
}

// A fast hash for byte strings whose first 8 bytes are `head` (most tokens are 1-8 bytes).
inline uint64_t HashBytes(uint64_t head, const uint8_t* p, size_t n) {
  uint64_t h = (head ^ (n * 0xC2B2AE3D27D4EB4Full)) * 0xBF58476D1CE4E5B9ull;
  for (size_t i = 8; i < n; i += 8) {
    uint64_t chunk = i + 8 <= n ? Load64(p + i) : Load64(p + n - 8);  // The last chunk may overlap.
    h = ((h ^ (h >> 29)) ^ chunk) * 0x94D049BB133111EBull;
  }
  return Mix(h);
}

}  // namespace

struct Encoding::Data {
  // One slot of the open-addressing table. The first 8 bytes of the token are stored in the slot, so the
  // common case (tokens of at most 8 bytes) is decided with one cache line and no pointer chase.
  struct Slot {
    uint64_t head = 0;  // First min(len, 8) bytes, zero-padded.
    uint32_t rank = kNoRank;
    uint32_t len = 0;   // 0 = empty.
  };

  std::string name;
  uint64_t generation = 0;  // Unique per loaded vocabulary: keys the per-thread piece cache.
  SplitPattern pattern = SplitPattern::kCl100k;

  // Views used on the hot path. They point into the owned vectors below (a vocabulary built from JSON) or
  // into a memory-mapped vocabulary image (docs/formats/vocab-image.md).
  const char* blob = nullptr;         // Token bytes, by rank.
  const uint32_t* offsets = nullptr;  // Token r is blob[offsets[r], offsets[r+1]); empty for unused ranks.
  size_t n_offsets = 0;               // max rank + 2.
  const Slot* table = nullptr;        // Open addressing over token bytes.
  uint64_t mask = 0;                  // Table slots - 1.
  const uint32_t* pair_rank = nullptr;  // 65,536 entries: rank of each 2-byte string (kNoRank if none).
  uint32_t byte_rank[256];              // Rank of each single byte.
  std::vector<std::pair<std::string, Token>> specials;  // Longest first.

  // Built on first use by a piece of multi-byte characters (MergeBySegments): a Bloom filter of the byte
  // windows around every character boundary inside a token, and the encodings of single characters of 2-3
  // bytes by code point (0: not computed yet; written once, by any thread, always with the same value).
  mutable std::once_flag segments_once;
  mutable std::vector<uint64_t> straddle_bloom;  // Two-byte-a-side windows (shorter ones expanded).
  mutable std::vector<uint64_t> straddle_pairs;  // One byte a side: a bitmap over the 65,536 byte pairs.
  mutable std::unique_ptr<std::atomic<uint64_t>[]> char_encodings;

  std::string own_blob;
  std::vector<uint32_t> own_offsets;
  std::vector<Slot> own_table;
  std::vector<uint32_t> own_pairs;
  void* map = nullptr;  // A mapped image, unmapped on destruction.
  size_t map_size = 0;

  Data() = default;
  Data(const Data&) = delete;  // Views point into this object's storage.
  Data& operator=(const Data&) = delete;
  ~Data() {
    if (map != nullptr) ::munmap(map, map_size);
  }

  uint32_t Rank(const uint8_t* p, size_t n) const {
    if (n == 1) return byte_rank[p[0]];
    if (n == 2) return pair_rank[(static_cast<uint32_t>(p[0]) << 8) | p[1]];
    uint64_t head = Head(p, n);
    for (uint64_t i = HashBytes(head, p, n) & mask;; i = (i + 1) & mask) {
      const Slot& slot = table[i];
      if (slot.len == 0) return kNoRank;
      if (slot.head == head && slot.len == n &&
          (n <= 8 || std::memcmp(blob + offsets[slot.rank] + 8, p + 8, n - 8) == 0)) {
        return slot.rank;
      }
    }
  }

  // Builds the table and the pair/byte ranks from own_blob and own_offsets, and points the views at them.
  void BuildIndexes(size_t tokens) {
    size_t capacity = 1;
    while (capacity < tokens * 2) capacity <<= 1;
    own_table.assign(capacity, Slot{});
    mask = capacity - 1;
    own_pairs.assign(65536, kNoRank);
    std::fill(std::begin(byte_rank), std::end(byte_rank), kNoRank);
    for (uint32_t r = 0; r + 1 < own_offsets.size(); ++r) {
      const auto* t = reinterpret_cast<const uint8_t*>(own_blob.data()) + own_offsets[r];
      size_t n = own_offsets[r + 1] - own_offsets[r];
      if (n == 0) continue;
      uint64_t i = HashBytes(Head(t, n), t, n) & mask;
      while (own_table[i].len != 0) i = (i + 1) & mask;
      own_table[i] = Slot{Head(t, n), r, static_cast<uint32_t>(n)};
      if (n == 1) byte_rank[t[0]] = r;
      if (n == 2) own_pairs[(static_cast<uint32_t>(t[0]) << 8) | t[1]] = r;
    }
    blob = own_blob.data();
    offsets = own_offsets.data();
    n_offsets = own_offsets.size();
    table = own_table.data();
    pair_rank = own_pairs.data();
  }
};

namespace {

// The heap merge: a doubly linked list of parts and a min-heap of (rank, start) with lazy deletion.
// Emits (token, start, length) for each token, left to right. O(n log n) time, about 24 bytes per byte.
template <typename EmitSpan>
void MergeHeap(const Encoding::Data& d, const uint8_t* p, size_t n, EmitSpan&& emit) {
  if (n == 1) {
    emit(d.byte_rank[p[0]], 0, 1);
    return;
  }
  std::vector<uint32_t> next(n + 1), prev(n + 1);
  std::vector<uint32_t> rank_at(n + 1, kNoRank);  // Current rank of the pair starting at part i.
  for (size_t i = 0; i <= n; ++i) {
    next[i] = static_cast<uint32_t>(i + 1);
    prev[i] = static_cast<uint32_t>(i == 0 ? 0 : i - 1);
  }
  using Item = std::pair<uint32_t, uint32_t>;  // (rank, start): ties go to the leftmost pair.
  std::priority_queue<Item, std::vector<Item>, std::greater<Item>> heap;
  auto pair_rank = [&](uint32_t i) -> uint32_t {
    if (i >= n) return kNoRank;
    uint32_t j = next[i];
    if (j >= n) return kNoRank;
    return d.Rank(p + i, next[j] - i);
  };
  for (uint32_t i = 0; i + 1 < n; ++i) {
    rank_at[i] = d.Rank(p + i, 2);
    if (rank_at[i] != kNoRank) heap.emplace(rank_at[i], i);
  }
  std::vector<bool> alive(n + 1, true);
  while (!heap.empty()) {
    auto [r, i] = heap.top();
    heap.pop();
    if (!alive[i] || rank_at[i] != r) continue;  // Stale entry.
    uint32_t j = next[i];
    alive[j] = false;
    next[i] = next[j];
    if (next[j] <= n) prev[next[j]] = i;
    rank_at[i] = pair_rank(i);
    if (rank_at[i] != kNoRank) heap.emplace(rank_at[i], i);
    if (i > 0) {
      uint32_t h = prev[i];
      rank_at[h] = pair_rank(h);
      if (rank_at[h] != kNoRank) heap.emplace(rank_at[h], h);
    }
  }
  for (uint32_t i = 0; i < n; i = next[i]) emit(d.Rank(p + i, next[i] - i), i, next[i] - i);
}

// Whether the BPE merge of p[0, n) yields exactly two tokens split at `split`: the two tokens are a
// "compatible pair", the condition for joining two valid encodings (below).
bool PairHolds(const Encoding::Data& d, const uint8_t* p, size_t n, size_t split) {
  size_t count = 0;
  bool split_ok = false;
  MergeHeap(d, p, n, [&](uint32_t, uint32_t start, uint32_t) {
    if (count == 1) split_ok = start == split;
    ++count;
  });
  return count == 2 && split_ok;
}

// Pieces longer than this are merged window by window, so memory stays bounded (a 50 MB run of one
// character took 1.2 GB in one heap merge).
constexpr size_t kWindowedPieceBytes = 1 << 16;
constexpr size_t kMergeWindowBytes = 1 << 15;

// Merges a long piece in windows with exactly the result of merging it whole. The argument (the
// "valid encoding" corollaries of byte-pair encoding): a prefix of a valid token sequence is valid, and two
// valid sequences joined where the last token of one and the first of the other form a compatible pair
// make a valid sequence; the valid sequence of a text is unique, and is what merging it whole returns. So
// each window's tokens are kept up to three quarters of the window, the next window starts where they
// end, and every join is checked with PairHolds. Should a join fail, the piece is merged whole instead:
// the result is always exact; only the memory bound depends on the joins holding.
template <typename Emit>
void MergeWindowed(const Encoding::Data& d, const uint8_t* p, size_t n, size_t window, Emit&& emit) {
  struct Span {
    uint32_t token, start, len;
  };
  std::vector<uint32_t> out;
  std::vector<Span> win;
  Span last{kNoRank, 0, 0};
  size_t pos = 0;
  bool joined = true;
  while (pos < n && joined) {
    size_t len = std::min(window, n - pos);
    bool final = pos + len == n;
    win.clear();
    MergeHeap(d, p + pos, len, [&](uint32_t t, uint32_t start, uint32_t l) {
      win.push_back({t, static_cast<uint32_t>(pos + start), l});
    });
    size_t keep = win.size();
    if (!final) {
      // The end of a window may merge differently once the text after it is seen: leave it to the next.
      size_t limit = pos + len - len / 4;
      keep = 0;
      while (keep < win.size() && win[keep].start + win[keep].len <= limit) ++keep;
    }
    if (keep == 0 || (last.token != kNoRank && !PairHolds(d, p + last.start, last.len + win[0].len, last.len))) {
      joined = false;
      break;
    }
    for (size_t i = 0; i < keep; ++i) out.push_back(win[i].token);
    last = win[keep - 1];
    pos = last.start + last.len;
  }
  if (!joined) {
    MergeHeap(d, p, n, [&](uint32_t t, uint32_t, uint32_t) { emit(t); });
    return;
  }
  for (uint32_t t : out) emit(t);
}

// Per-thread memos (~1.9 MiB a thread, zeroed on first use). Text repeats its words, so most pieces are
// answered from a table that mostly stays in the core's L2 cache instead of the vocabulary's
// multi-megabyte hash table; novel pieces are built from parts that repeat far more than pieces do
// (syllables, the bytes of a CJK character), so their merges are answered from a memo keyed by the two
// parts' ranks. Every entry carries the vocabulary's generation (the pair memo its low 32 bits: two
// vocabularies 2^32 loads apart could share entries), so encodings that take turns on one thread miss,
// never mix.
struct ThreadCaches {
  // Short pieces (2-24 bytes) and their tokens, direct-mapped.
  static constexpr size_t kEntries = 16384;
  static constexpr uint32_t kMaxTokens = 8;
  struct Entry {
    uint64_t generation = 0;  // 0 = empty.
    uint64_t head = 0;        // Bytes 0-7 of the piece, zero-padded.
    uint64_t mid = 0;         // Bytes 8-15, zero-padded.
    uint64_t tail = 0;        // Bytes 16-23, zero-padded.
    uint32_t len = 0;
    uint32_t count = 0;
    Token tokens[kMaxTokens];
  };
  Entry entries[kEntries];

  // Longer pieces (rare words, identifiers, runs of CJK) go to a smaller second table that keeps their
  // bytes, since their merges are the expensive ones.
  static constexpr size_t kLongEntries = 1024;
  static constexpr size_t kLongMaxBytes = 96;
  static constexpr uint32_t kLongMaxTokens = 32;
  struct LongEntry {
    uint64_t generation = 0;
    uint32_t len = 0;
    uint32_t count = 0;
    uint8_t bytes[kLongMaxBytes];
    Token tokens[kLongMaxTokens];
  };
  LongEntry long_entries[kLongEntries];

  // Pairs of adjacent parts (by rank) -> the rank of their concatenation (kNoRank: not a token).
  struct PairEntry {
    uint64_t key = ~uint64_t{0};  // (left << 32) | right; ranks are < 2^24, so ~0 is never a key.
    uint32_t value = 0;
    uint32_t generation = 0;
  };
  static constexpr size_t kPairEntries = 1 << 15;
  PairEntry merged[kPairEntries];
};

ThreadCaches& ThreadCache() {
  thread_local std::unique_ptr<ThreadCaches> cache(new ThreadCaches());
  return *cache;
}

inline uint64_t PairKey(uint32_t left, uint32_t right) { return (uint64_t{left} << 32) | right; }

inline size_t PairSlot(uint64_t key, size_t entries) {
  return static_cast<size_t>((key * 0x9E3779B97F4A7C15ull) >> 40) & (entries - 1);
}

// The rank of the concatenation of adjacent parts `left` and `right`, whose bytes are p[0, n).
inline uint32_t MergedRank(const Encoding::Data& d, ThreadCaches& c, uint32_t left, uint32_t right,
                           const uint8_t* p, size_t n) {
  if (n == 2) return d.pair_rank[(static_cast<uint32_t>(p[0]) << 8) | p[1]];  // Dense table, cache-resident.
  uint64_t key = PairKey(left, right);
  ThreadCaches::PairEntry& e = c.merged[PairSlot(key, ThreadCaches::kPairEntries)];
  uint32_t generation = static_cast<uint32_t>(d.generation);
  if (e.key == key && e.generation == generation) return e.value;
  uint32_t rank = d.Rank(p, n);
  e = {key, rank, generation};
  return rank;
}

// The O(n^2) merge for short pieces (n <= kShortPiece): parts in arrays, the lowest-ranked adjacent pair
// found by a scan, concatenations looked up by the parts' ranks (MergedRank). Emits each token's rank.
constexpr size_t kShortPiece = 128;

template <typename Emit>
void MergeShort(const Encoding::Data& d, ThreadCaches& c, const uint8_t* p, size_t n, Emit&& emit) {
  uint32_t starts[kShortPiece + 2];  // starts[i] = start of the i-th part (and the end sentinel).
  uint32_t ranks[kShortPiece + 2];   // ranks[i] = rank of parts i and i+1 merged.
  uint32_t tokens[kShortPiece + 2];  // tokens[i] = the rank of part i itself.
  size_t count = n + 1;              // Part starts plus the end sentinel.
  for (size_t i = 0; i <= n; ++i) starts[i] = static_cast<uint32_t>(i);
  for (size_t i = 0; i < n; ++i) tokens[i] = d.byte_rank[p[i]];
  for (size_t i = 0; i + 1 < n; ++i) ranks[i] = d.pair_rank[(static_cast<uint32_t>(p[i]) << 8) | p[i + 1]];
  ranks[n - 1] = ranks[n] = kNoRank;
  tokens[n] = kNoRank;  // Sentinels: shifted down by merges, never read as values.
  while (count > 2) {
    uint32_t best = kNoRank;
    size_t at = 0;
    for (size_t i = 0; i + 2 < count; ++i) {
      if (ranks[i] < best) {
        best = ranks[i];
        at = i;
      }
    }
    if (best == kNoRank) break;
    // Drop part at+1 (plain loops: the arrays are short, a memmove call costs more than the copy).
    for (size_t i = at + 1; i + 1 < count; ++i) {
      starts[i] = starts[i + 1];
      ranks[i] = ranks[i + 1];
      tokens[i] = tokens[i + 1];
    }
    tokens[at] = best;
    --count;
    ranks[at] = at + 2 < count
                    ? MergedRank(d, c, tokens[at], tokens[at + 1], p + starts[at], starts[at + 2] - starts[at])
                    : kNoRank;
    if (at > 0) {
      ranks[at - 1] = MergedRank(d, c, tokens[at - 1], tokens[at], p + starts[at - 1], starts[at + 1] - starts[at - 1]);
    }
  }
  for (size_t i = 0; i + 1 < count; ++i) emit(tokens[i]);
}

// ---- Pieces of multi-byte characters (CJK, Cyrillic, emoji, ...) ----
//
// A merge joins two adjacent parts into a token, so a merge across the boundary between two characters
// makes a token that holds the bytes on both sides of it. If no token of the vocabulary holds bytes on
// both sides of a boundary, no merge ever crosses it, and the parts on either side merge exactly as they
// would alone (the lowest-ranked pair of each side is merged first whatever happens on the other). Such a
// "safe" boundary splits a piece into segments that are encoded one by one; a lone character's encoding
// is computed once per vocabulary. Which boundaries are safe is decided from the two bytes before and
// after it: every token that straddles a boundary between characters left a window of up to two bytes on
// each side in a Bloom filter, and a boundary none of whose four windows is in the filter is safe (a false
// positive only joins two segments: the result stays exact). A window with one byte on a side is entered
// as every two-byte window it can stand for in text (the byte beyond it is a continuation or lead byte
// before a boundary, a continuation byte after one); one byte on both sides, which is rare (one window in
// o200k_base, two in cl100k_base), goes to an exact bitmap of byte pairs instead.

constexpr size_t kBloomWords = 1 << 13;  // 64 KiB: ~32,000 windows in o200k_base, ~1.5% false positives.

inline uint64_t WindowKey(uint8_t a1, uint8_t a2, uint8_t b1, uint8_t b2) {
  return (uint64_t{a1} << 24) | (uint64_t{a2} << 16) | (uint64_t{b1} << 8) | b2;
}

// Two bits in one 64-bit word per key (a blocked filter: one memory access per test).
inline uint64_t BloomHash(uint64_t key) { return Mix((key + 0x9E3779B97F4A7C15ull) * 0xC2B2AE3D27D4EB4Full); }
inline uint64_t BloomBits(uint64_t h) { return (uint64_t{1} << ((h >> 20) & 63)) | (uint64_t{1} << ((h >> 26) & 63)); }
inline void BloomAdd(std::vector<uint64_t>& bloom, uint64_t key) {
  uint64_t h = BloomHash(key);
  bloom[h & (kBloomWords - 1)] |= BloomBits(h);
}
inline bool BloomMayHave(const uint64_t* bloom, uint64_t key) {
  uint64_t h = BloomHash(key);
  return (bloom[h & (kBloomWords - 1)] & BloomBits(h)) == BloomBits(h);
}

// Character boundaries the filter knows about: a multi-byte character's last byte (a continuation byte,
// or a malformed lead) followed by a lead byte of a multi-byte character.
inline bool IsCharacterBoundary(uint8_t before, uint8_t after) { return before >= 0x80 && after >= 0xC0; }

void BuildSegmentTables(const Encoding::Data& d) {
  std::vector<uint64_t> bloom(kBloomWords, 0);
  std::vector<uint64_t> pairs(65536 / 64, 0);
  for (size_t r = 0; r + 1 < d.n_offsets; ++r) {
    const auto* t = reinterpret_cast<const uint8_t*>(d.blob) + d.offsets[r];
    size_t len = d.offsets[r + 1] - d.offsets[r];
    for (size_t i = 1; i < len; ++i) {
      if (!IsCharacterBoundary(t[i - 1], t[i])) continue;
      bool two_before = i >= 2, two_after = i + 2 <= len;
      if (!two_before && !two_after) {
        size_t pair = (size_t{t[i - 1]} << 8) | t[i];
        pairs[pair / 64] |= uint64_t{1} << (pair % 64);
      } else if (!two_before) {
        for (unsigned a1 = 0x80; a1 <= 0xFF; ++a1) BloomAdd(bloom, WindowKey(uint8_t(a1), t[i - 1], t[i], t[i + 1]));
      } else if (!two_after) {
        for (unsigned b2 = 0x80; b2 <= 0xBF; ++b2) BloomAdd(bloom, WindowKey(t[i - 2], t[i - 1], t[i], uint8_t(b2)));
      } else {
        BloomAdd(bloom, WindowKey(t[i - 2], t[i - 1], t[i], t[i + 1]));
      }
    }
  }
  d.straddle_bloom = std::move(bloom);
  d.straddle_pairs = std::move(pairs);
  d.char_encodings.reset(new std::atomic<uint64_t>[0x10000]);
  for (size_t i = 0; i < 0x10000; ++i) d.char_encodings[i].store(0, std::memory_order_relaxed);
}

// Whether no token straddles the character boundary at p, which has two bytes of characters on each side
// (p[-2], p[-1] before it; p[0], p[1] after).
inline bool SafeBoundary(const Encoding::Data& d, const uint8_t* p) {
  size_t pair = (size_t{p[-1]} << 8) | p[0];
  if ((d.straddle_pairs[pair / 64] >> (pair % 64)) & 1) return false;
  return !BloomMayHave(d.straddle_bloom.data(), WindowKey(p[-2], p[-1], p[0], p[1]));
}

// The length of the UTF-8 character starting at p[0] within n bytes, or 0 if it is not a well-formed one
// of 2-4 bytes (the structure only: overlong forms and surrogates do not matter here).
inline size_t MultiByteCharLength(const uint8_t* p, size_t n) {
  size_t len = p[0] >= 0xF0 ? (p[0] < 0xF8 ? 4 : 0) : p[0] >= 0xE0 ? 3 : p[0] >= 0xC0 ? 2 : 0;
  if (len == 0 || len > n) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((p[i] & 0xC0) != 0x80) return 0;
  }
  return len;
}

// A lone character's encoding packed in a word: [filled:1][count:3][rank:20] x 3 (ranks below 2^20).
constexpr uint32_t kCharRankBits = 20;

// Emits the encoding of one segment: a lone character of 2-3 bytes from the per-vocabulary table (filled
// on first use), anything else merged. A segment is only ever merged, never looked up whole: tiktoken
// looks up the whole piece and nothing smaller, and a token that merging cannot build from its own bytes
// (a vocabulary may hold one) must not come out of a segment. Only a segment that is the whole piece may
// be looked up (`whole_piece`).
template <typename Emit>
void EmitSegment(const Encoding::Data& d, ThreadCaches& c, const uint8_t* p, size_t n, bool whole_piece, Emit& emit) {
  auto merge = [&](auto&& out) {
    uint32_t whole = n == 1 ? d.byte_rank[p[0]] : whole_piece ? d.Rank(p, n) : kNoRank;
    if (whole != kNoRank) {
      out(whole);
    } else {
      MergeShort(d, c, p, n, out);
    }
  };
  // Well-formed only (no overlong forms: the table is keyed by code point, which an overlong form shares
  // with another character), and never the whole piece (the table holds merged encodings).
  bool lone_char = !whole_piece && ((n == 2 && p[0] >= 0xC2 && p[0] < 0xE0) ||
                                    (n == 3 && p[0] >= 0xE0 && p[0] < 0xF0 && (p[0] != 0xE0 || p[1] >= 0xA0)));
  if (!lone_char || d.n_offsets > (size_t{1} << kCharRankBits)) {
    merge(emit);
    return;
  }
  uint32_t code = n == 2 ? ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu)
                         : ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
  std::atomic<uint64_t>& slot = d.char_encodings[code];
  uint64_t packed = slot.load(std::memory_order_relaxed);
  if (packed == 0) {
    uint64_t count = 0;
    packed = uint64_t{1} << 63;
    merge([&](uint32_t t) {
      if (count < 3) packed |= uint64_t{t} << (kCharRankBits * count);
      ++count;
    });
    packed |= count << 60;  // A character of 2-3 bytes has at most 3 tokens.
    slot.store(packed, std::memory_order_relaxed);
  }
  uint32_t count = static_cast<uint32_t>(packed >> 60) & 7;
  for (uint32_t i = 0; i < count; ++i) {
    emit(static_cast<uint32_t>(packed >> (kCharRankBits * i)) & ((1u << kCharRankBits) - 1));
  }
}

// Encodes a piece whose characters after the first are all multi-byte by splitting it at safe boundaries
// (see above). Returns false, having emitted nothing, when the piece is not of that shape.
template <typename Emit>
bool MergeBySegments(const Encoding::Data& d, ThreadCaches& c, const uint8_t* p, size_t n, Emit&& emit) {
  // Character starts, all checked before anything is emitted.
  uint32_t starts[kShortPiece + 1];
  size_t chars = 0;
  size_t first = p[0] < 0x80 ? 1 : MultiByteCharLength(p, n);
  if (first == 0) return false;
  starts[chars++] = 0;
  for (size_t pos = first; pos < n;) {
    size_t len = MultiByteCharLength(p + pos, n - pos);
    if (len == 0) return false;
    starts[chars++] = static_cast<uint32_t>(pos);
    pos += len;
  }
  starts[chars] = static_cast<uint32_t>(n);
  std::call_once(d.segments_once, [&d] { BuildSegmentTables(d); });
  size_t segment = 0;
  for (size_t i = 1; i <= chars; ++i) {
    size_t at = starts[i];
    // A boundary after a single-byte first character is never split (it may well merge: " 中").
    if (i < chars && (at < 2 || !IsCharacterBoundary(p[at - 1], p[at]) || !SafeBoundary(d, p + at))) continue;
    EmitSegment(d, c, p + segment, at - segment, /*whole_piece=*/segment == 0 && at == n, emit);
    segment = at;
  }
  return true;
}

// Merges the bytes of one piece by rank (tiktoken's byte-pair merge) and emits the ranks. Short pieces use
// MergeShort (or, for pieces of multi-byte characters, MergeBySegments); long ones a heap, so a huge piece (a long
// run of spaces, a base64 blob) costs O(n log n) rather than O(n^2); very long ones are merged in windows.
template <typename Emit>
void MergePiece(const Encoding::Data& d, ThreadCaches& c, const uint8_t* p, size_t n, Emit&& emit) {
  if (n == 1) {
    emit(d.byte_rank[p[0]]);
    return;
  }
  // A piece of multi-byte characters: its segments are looked up whole, the piece need not be.
  if (n >= 4 && n <= kShortPiece && (p[n - 1] & 0x80) != 0 && MergeBySegments(d, c, p, n, emit)) return;
  uint32_t whole = d.Rank(p, n);
  if (whole != kNoRank) {
    emit(whole);
    return;
  }
  if (n <= kShortPiece) {
    MergeShort(d, c, p, n, emit);
    return;
  }
  if (n > kWindowedPieceBytes) {
    MergeWindowed(d, p, n, kMergeWindowBytes, emit);
    return;
  }
  MergeHeap(d, p, n, [&](uint32_t t, uint32_t, uint32_t) { emit(t); });
}

std::atomic<uint64_t> g_next_generation{1};

// Merges a piece, emitting its tokens and recording the first `capacity` of them in `record`; returns how
// many tokens the piece has (more than `capacity` means the record is incomplete and must not be used).
template <typename Emit>
uint32_t MergeRecording(const Encoding::Data& d, ThreadCaches& c, const uint8_t* p, size_t n, Emit& emit,
                        Token* record, uint32_t capacity) {
  uint32_t count = 0;
  MergePiece(d, c, p, n, [&](uint32_t t) {
    if (count < capacity) record[count] = t;
    ++count;
    emit(t);
  });
  return count;
}

// Emits the tokens of piece p[0, n) from cache entry `e` if it holds them (same vocabulary, same length,
// `matches` its key), otherwise merges the piece and refills `e` (`store_key` writes the key). Both piece
// caches share this; they differ only in how an entry holds its key.
template <typename Entry, typename Emit, typename Matches, typename StoreKey>
void CachedMerge(const Encoding::Data& d, ThreadCaches& c, const uint8_t* p, size_t n, Emit& emit, Entry& e,
                 Matches&& matches, StoreKey&& store_key) {
  constexpr uint32_t kCapacity = static_cast<uint32_t>(std::size(Entry{}.tokens));
  if (e.generation == d.generation && e.len == n && matches(e)) {
    for (uint32_t i = 0; i < e.count; ++i) emit(e.tokens[i]);
    return;
  }
  e.generation = 0;  // Invalid while its tokens are being rewritten.
  uint32_t count = MergeRecording(d, c, p, n, emit, e.tokens, kCapacity);
  if (count <= kCapacity) {
    e.generation = d.generation;
    e.len = static_cast<uint32_t>(n);
    e.count = count;
    store_key(e);
  }
}

template <typename Emit>
void EncodeOrdinary(const Encoding::Data& d, std::string_view text, Emit&& emit) {
  const auto* base = reinterpret_cast<const uint8_t*>(text.data());
  ThreadCaches& cache = ThreadCache();
  for (size_t pos = 0; pos < text.size();) {
    size_t end = NextPiece(d.pattern, text, pos);
    size_t n = end - pos;
    const uint8_t* p = base + pos;
    pos = end;
    if (n > 24) {
      if (n > ThreadCaches::kLongMaxBytes) {
        MergePiece(d, cache, p, n, emit);
        continue;
      }
      ThreadCaches::LongEntry& e =
          cache.long_entries[HashBytes(Head(p, n), p, n) & (ThreadCaches::kLongEntries - 1)];
      CachedMerge(
          d, cache, p, n, emit, e, [&](const ThreadCaches::LongEntry& x) { return std::memcmp(x.bytes, p, n) == 0; },
          [&](ThreadCaches::LongEntry& x) { std::memcpy(x.bytes, p, n); });
      continue;
    }
    if (n < 2) {
      MergePiece(d, cache, p, n, emit);
      continue;
    }
    uint64_t head = Head(p, n);
    uint64_t mid = n > 8 ? Head(p + 8, n - 8) : 0;
    uint64_t tail = n > 16 ? Head(p + 16, n - 16) : 0;
    ThreadCaches::Entry& e =
        cache.entries[Mix((head * 0x9E3779B97F4A7C15ull) ^ (mid * 0xC2B2AE3D27D4EB4Full) ^ (tail + n)) &
                      (ThreadCaches::kEntries - 1)];
    CachedMerge(
        d, cache, p, n, emit, e,
        [&](const ThreadCaches::Entry& x) { return x.head == head && x.mid == mid && x.tail == tail; },
        [&](ThreadCaches::Entry& x) {
          x.head = head;
          x.mid = mid;
          x.tail = tail;
        });
  }
}

}  // namespace

Encoding::Encoding(std::unique_ptr<Data> data) : data_(std::move(data)) {}
Encoding::~Encoding() = default;

std::vector<std::string> Encoding::SearchPath() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("STRATA_VOCAB_DIR"); env && *env) dirs.emplace_back(env);
  if (const char* cache = std::getenv("STRATA_NPM_CACHE"); cache && *cache) {
    dirs.push_back(std::string(cache) + "/node_modules/tiktoken/encoders");
  }
  if (const char* home = std::getenv("HOME"); home && *home) {
    dirs.push_back(std::string(home) + "/.cache/strata/npm/node_modules/tiktoken/encoders");
  }
  return dirs;
}

namespace {

Result<std::unique_ptr<Encoding::Data>> ParseTiktokenJson(std::string_view name, std::string_view json) {
  using Data = Encoding::Data;
  simdjson::dom::parser parser;
  simdjson::padded_string padded(json);
  simdjson::dom::element root;
  if (parser.parse(padded).get(root) != simdjson::SUCCESS) {
    return Status::InvalidArgument("vocabulary is not valid JSON");
  }
  std::string_view ranks_text, pat;
  simdjson::dom::object specials;
  if (root["bpe_ranks"].get(ranks_text) != simdjson::SUCCESS || root["pat_str"].get(pat) != simdjson::SUCCESS ||
      root["special_tokens"].get(specials) != simdjson::SUCCESS) {
    return Status::InvalidArgument("vocabulary JSON lacks bpe_ranks, pat_str or special_tokens");
  }
  auto d = std::make_unique<Data>();
  d->name = std::string(name);
  d->generation = g_next_generation++;
  if (pat.find("\\p{Lu}") != std::string_view::npos) {
    d->pattern = SplitPattern::kO200k;
  } else if (pat.find("(?i:'s|'t|'re|'ve|'m|'ll|'d)|") == 0) {
    d->pattern = SplitPattern::kCl100k;
  } else {
    return Status::InvalidArgument("unsupported split pattern (only the cl100k_base and o200k_base patterns are built in)");
  }
  // bpe_ranks: lines of "<label> <first rank> <base64 token> <base64 token> ...", ranks consecutive.
  std::vector<std::pair<uint32_t, std::string>> tokens;
  size_t line_start = 0;
  while (line_start < ranks_text.size()) {
    size_t line_end = ranks_text.find('\n', line_start);
    if (line_end == std::string_view::npos) line_end = ranks_text.size();
    std::string_view line = ranks_text.substr(line_start, line_end - line_start);
    line_start = line_end + 1;
    if (line.empty()) continue;
    size_t sp1 = line.find(' ');
    size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
    if (sp2 == std::string_view::npos) return Status::InvalidArgument("malformed bpe_ranks line");
    uint64_t first = 0;
    std::string_view first_text = line.substr(sp1 + 1, sp2 - sp1 - 1);
    auto parsed = std::from_chars(first_text.data(), first_text.data() + first_text.size(), first);
    if (parsed.ec != std::errc() || parsed.ptr != first_text.data() + first_text.size() || first >= kMaxRanks) {
      return Status::InvalidArgument("malformed first rank in bpe_ranks: \"" + std::string(first_text) + "\"");
    }
    uint32_t rank = static_cast<uint32_t>(first);
    size_t pos = sp2 + 1;
    while (pos <= line.size()) {
      size_t end = line.find(' ', pos);
      if (end == std::string_view::npos) end = line.size();
      if (end > pos) {
        bool ok = false;
        std::string bytes = Base64Decode(line.substr(pos, end - pos), &ok);
        if (!ok || bytes.empty()) return Status::InvalidArgument("malformed base64 token in bpe_ranks");
        if (rank >= kMaxRanks) return Status::InvalidArgument("bpe_ranks has more than 2^24 ranks");
        tokens.emplace_back(rank++, std::move(bytes));
      }
      pos = end + 1;
    }
  }
  uint32_t max_rank = 0;
  for (const auto& [rank, bytes] : tokens) max_rank = std::max(max_rank, rank);
  std::vector<const std::string*> by_rank(max_rank + 1, nullptr);
  for (const auto& [rank, bytes] : tokens) by_rank[rank] = &bytes;
  d->own_offsets.resize(max_rank + 2);
  for (uint32_t r = 0; r <= max_rank; ++r) {
    d->own_offsets[r] = static_cast<uint32_t>(d->own_blob.size());
    if (by_rank[r]) d->own_blob += *by_rank[r];
  }
  d->own_offsets[max_rank + 1] = static_cast<uint32_t>(d->own_blob.size());
  d->BuildIndexes(tokens.size());
  for (uint32_t b : d->byte_rank) {
    if (b == kNoRank) return Status::InvalidArgument("vocabulary lacks a token for some single byte");
  }
  for (auto field : specials) {
    int64_t id = 0;
    if (field.value.get(id) != simdjson::SUCCESS || id < 0 || id > UINT32_MAX - 1) {
      return Status::InvalidArgument("malformed special token id");
    }
    if (field.key.empty()) return Status::InvalidArgument("empty special token text");
    d->specials.emplace_back(std::string(field.key), static_cast<Token>(id));
  }
  // Longest first, so that a special token that is a prefix of another never wins.
  std::sort(d->specials.begin(), d->specials.end(),
            [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  return d;
}

// The vocabulary image: the built indexes laid out for mmap (docs/formats/vocab-image.md).
constexpr char kImageMagic[8] = {'S', 'T', 'R', 'V', 'O', 'C', 'A', 'B'};
constexpr uint32_t kImageVersion = 1;

struct ImageHeader {
  char magic[8];
  uint32_t version;
  uint32_t pattern;          // 0 cl100k, 1 o200k.
  uint64_t source_size;      // Size and modification time of the JSON it was built from.
  int64_t source_mtime_ns;
  uint64_t n_offsets;
  uint64_t blob_size;
  uint64_t table_slots;
  uint64_t specials_size;
  uint32_t byte_rank[256];
};

size_t Align8(size_t n) { return (n + 7) & ~size_t{7}; }

std::string SerializeImage(const Encoding::Data& d, uint64_t source_size, int64_t source_mtime_ns) {
  std::string specials;
  for (const auto& [text, id] : d.specials) {
    uint32_t fields[2] = {id, static_cast<uint32_t>(text.size())};
    specials.append(reinterpret_cast<const char*>(fields), sizeof(fields));
    specials += text;
  }
  ImageHeader h{};
  std::memcpy(h.magic, kImageMagic, 8);
  h.version = kImageVersion;
  h.pattern = d.pattern == SplitPattern::kO200k ? 1 : 0;
  h.source_size = source_size;
  h.source_mtime_ns = source_mtime_ns;
  h.n_offsets = d.n_offsets;
  h.blob_size = d.offsets[d.n_offsets - 1];
  h.table_slots = d.mask + 1;
  h.specials_size = specials.size();
  std::memcpy(h.byte_rank, d.byte_rank, sizeof(h.byte_rank));
  std::string out(reinterpret_cast<const char*>(&h), sizeof(h));
  auto section = [&out](const void* data, size_t bytes) {
    out.resize(Align8(out.size()), '\0');
    out.append(static_cast<const char*>(data), bytes);
  };
  section(d.offsets, d.n_offsets * sizeof(uint32_t));
  section(d.blob, h.blob_size);
  section(d.table, h.table_slots * sizeof(Encoding::Data::Slot));
  section(d.pair_rank, 65536 * sizeof(uint32_t));
  section(specials.data(), specials.size());
  return out;
}

// Maps an image; NotFound if absent, DataLoss if it does not match its header or its source.
Result<std::unique_ptr<Encoding::Data>> MapImage(const std::string& path, std::string_view name,
                                                 uint64_t source_size, int64_t source_mtime_ns) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Status::NotFound("no vocabulary image at " + path);
  struct stat st;
  if (::fstat(fd, &st) != 0 || static_cast<size_t>(st.st_size) < sizeof(ImageHeader)) {
    ::close(fd);
    return Status::DataLoss("vocabulary image " + path + " is truncated");
  }
  size_t size = static_cast<size_t>(st.st_size);
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (map == MAP_FAILED) return Status::Internal("cannot map " + path);
  auto d = std::make_unique<Encoding::Data>();
  d->map = map;
  d->map_size = size;
  const char* base = static_cast<const char*>(map);
  ImageHeader h;
  std::memcpy(&h, base, sizeof(h));
  if (std::memcmp(h.magic, kImageMagic, 8) != 0 || h.version != kImageVersion || h.source_size != source_size ||
      h.source_mtime_ns != source_mtime_ns || h.n_offsets < 2 || h.table_slots == 0 ||
      (h.table_slots & (h.table_slots - 1)) != 0) {
    return Status::DataLoss("vocabulary image " + path + " is stale or not an image");
  }
  // Counts bounded before multiplying, sizes compared by subtraction: no overflow can pass a check.
  if (h.n_offsets < 2 || h.n_offsets > kMaxRanks + 1 || h.table_slots > (kMaxRanks << 2) ||
      h.blob_size > size || h.specials_size > size) {
    return Status::DataLoss("vocabulary image " + path + " is invalid: counts out of range");
  }
  size_t pos = sizeof(ImageHeader);
  auto section = [&](size_t bytes) -> const char* {
    pos = Align8(pos);
    if (pos > size || bytes > size - pos) return nullptr;
    const char* at = base + pos;
    pos += bytes;
    return at;
  };
  const char* offsets = section(h.n_offsets * sizeof(uint32_t));
  const char* blob = section(h.blob_size);
  const char* table = section(h.table_slots * sizeof(Encoding::Data::Slot));
  const char* pairs = section(65536 * sizeof(uint32_t));
  const char* specials = section(h.specials_size);
  if (!offsets || !blob || !table || !pairs || !specials) return Status::DataLoss("vocabulary image " + path + " is truncated");

  auto bad = [&](const char* what) { return Status::DataLoss("vocabulary image " + path + " is invalid: " + what); };
  if (h.pattern > 1) return bad("unknown split pattern");
  d->name = std::string(name);
  d->generation = g_next_generation++;
  d->pattern = h.pattern == 1 ? SplitPattern::kO200k : SplitPattern::kCl100k;
  d->offsets = reinterpret_cast<const uint32_t*>(offsets);
  d->n_offsets = h.n_offsets;
  d->blob = blob;
  d->table = reinterpret_cast<const Encoding::Data::Slot*>(table);
  d->mask = h.table_slots - 1;
  d->pair_rank = reinterpret_cast<const uint32_t*>(pairs);
  std::memcpy(d->byte_rank, h.byte_rank, sizeof(h.byte_rank));
  // One pass over everything the hot path trusts, so that no image, however damaged or hostile, can make
  // a lookup read outside the mapping or loop forever.
  const uint64_t n_ranks = h.n_offsets - 1;
  if (d->offsets[0] != 0 || d->offsets[n_ranks] != h.blob_size) return bad("offsets do not span the blob");
  for (uint64_t r = 0; r < n_ranks; ++r) {
    if (d->offsets[r + 1] < d->offsets[r]) return bad("offsets decrease");
  }
  uint64_t empty_slots = 0;
  for (uint64_t i = 0; i < h.table_slots; ++i) {
    const Encoding::Data::Slot& slot = d->table[i];
    if (slot.len == 0) {
      ++empty_slots;
      continue;
    }
    if (slot.rank >= n_ranks || slot.len != d->offsets[slot.rank + 1] - d->offsets[slot.rank]) {
      return bad("table slot disagrees with the offsets");
    }
  }
  if (empty_slots == 0) return bad("table has no empty slot");
  for (uint32_t r : d->byte_rank) {
    if (r >= n_ranks) return bad("a single byte has no token");
  }
  for (size_t i = 0; i < 65536; ++i) {
    if (d->pair_rank[i] != kNoRank && d->pair_rank[i] >= n_ranks) return bad("pair table names an unknown rank");
  }
  for (size_t at = 0; at < h.specials_size;) {
    uint32_t fields[2];
    if (h.specials_size - at < sizeof(fields)) return bad("specials truncated");
    std::memcpy(fields, specials + at, sizeof(fields));
    at += sizeof(fields);
    if (fields[1] == 0 || fields[1] > h.specials_size - at) return bad("special token text out of range");
    d->specials.emplace_back(std::string(specials + at, fields[1]), fields[0]);
    at += fields[1];
  }
  return d;
}

std::string ImageCacheDir() {
  if (const char* env = std::getenv("STRATA_VOCAB_CACHE"); env && *env) return env;
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.cache/strata/vocab";
  return "";
}

// Writes the image beside others atomically (temp + rename). Failure only costs the next load's speed.
void WriteImage(const std::string& dir, const std::string& path, const std::string& image) {
  for (size_t i = 1; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') ::mkdir(dir.substr(0, i).c_str(), 0755);
  }
  std::string tmp = path + ".tmp.XXXXXX";  // Unique per writer: threads and processes may race here.
  int fd = ::mkstemp(tmp.data());
  if (fd < 0) return;
  ::fchmod(fd, 0644);
  size_t done = 0;
  while (done < image.size()) {
    ssize_t n = ::write(fd, image.data() + done, image.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  bool ok = done == image.size() && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok || ::rename(tmp.c_str(), path.c_str()) != 0) ::unlink(tmp.c_str());
}

}  // namespace

Result<std::shared_ptr<const Encoding>> Encoding::FromTiktokenJson(std::string_view name, std::string_view json) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Data> d, ParseTiktokenJson(name, json));
  return std::shared_ptr<const Encoding>(new Encoding(std::move(d)));
}

Result<std::shared_ptr<const Encoding>> Encoding::Load(std::string_view name) {
  if (name != "cl100k_base" && name != "o200k_base") {
    return Status::InvalidArgument("unknown encoding \"" + std::string(name) + "\" (known: cl100k_base, o200k_base)");
  }
  std::string tried;
  for (const std::string& dir : SearchPath()) {
    std::string path = dir + "/" + std::string(name) + ".json";
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) {
      tried += (tried.empty() ? "" : ", ") + path;
      continue;
    }
    uint64_t size = static_cast<uint64_t>(st.st_size);
    int64_t mtime = static_cast<int64_t>(st.st_mtim.tv_sec) * 1'000'000'000 + st.st_mtim.tv_nsec;
    // Fast path: the image built from this very JSON on an earlier load, memory-mapped.
    std::string cache_dir = ImageCacheDir();
    std::string image_path = cache_dir + "/" + std::string(name) + "-" + std::to_string(size) + "-" +
                             std::to_string(mtime) + ".bin";
    if (!cache_dir.empty()) {
      auto mapped = MapImage(image_path, name, size, mtime);
      if (mapped.ok()) return std::shared_ptr<const Encoding>(new Encoding(std::move(*mapped)));
    }
    std::ifstream in(path, std::ios::binary);
    std::stringstream ss;
    ss << in.rdbuf();
    auto data = ParseTiktokenJson(name, ss.str());
    if (!data.ok()) return data.status().WithContext(path);
    if (!cache_dir.empty()) WriteImage(cache_dir, image_path, SerializeImage(**data, size, mtime));
    return std::shared_ptr<const Encoding>(new Encoding(std::move(*data)));
  }
  return Status::NotFound("vocabulary " + std::string(name) + ".json not found (looked in: " + tried +
                          "); run scripts/run or scripts/test once to fetch the tiktoken npm package, or set "
                          "STRATA_VOCAB_DIR");
}


std::vector<Token> Encoding::Encode(std::string_view text) const {
  std::vector<Token> out;
  EncodeTo(text, &out);
  return out;
}

void Encoding::EncodeTo(std::string_view text, std::vector<Token>* out) const {
  // Real text averages 2.5-4.5 bytes per token; capacity that is never used is never touched.
  out->reserve(out->size() + text.size() / 2 + 4);
  // Tokens gather in a small buffer that is appended in blocks: a push_back per token is not inlined.
  Token buffer[1024];
  size_t used = 0;
  EncodeOrdinary(*data_, text, [&](uint32_t r) {
    buffer[used++] = r;
    if (used == std::size(buffer)) {
      out->insert(out->end(), buffer, buffer + used);
      used = 0;
    }
  });
  out->insert(out->end(), buffer, buffer + used);
}

size_t Encoding::Count(std::string_view text) const {
  size_t n = 0;
  EncodeOrdinary(*data_, text, [&n](uint32_t) { ++n; });
  return n;
}

std::vector<size_t> Encoding::SplitPoints(std::string_view text, size_t parts, size_t min_part_bytes) {
  std::vector<size_t> cuts;
  if (parts < 2 || text.size() < 2 * std::max<size_t>(min_part_bytes, 1)) return cuts;
  const size_t step = std::max(text.size() / parts, std::max<size_t>(min_part_bytes, 1));
  size_t last = 0;
  for (size_t target = step; cuts.size() + 1 < parts && target < text.size(); target = last + step) {
    size_t at = target < 1 ? 1 : target;
    // The first line break at or after the target whose next byte is an ASCII letter.
    while (true) {
      size_t nl = text.find('\n', at - 1);
      if (nl == std::string_view::npos || nl + 1 >= text.size()) return cuts;
      unsigned char next = static_cast<unsigned char>(text[nl + 1]);
      if ((next | 0x20) >= 'a' && (next | 0x20) <= 'z') {
        at = nl + 1;
        break;
      }
      at = nl + 2;
    }
    if (at - last < min_part_bytes || text.size() - at < min_part_bytes) return cuts;
    cuts.push_back(at);
    last = at;
  }
  return cuts;
}

namespace {

// Runs `work(part, begin, end)` for each part of `text` between `cuts`, the first on the calling thread.
template <typename Work>
void ForEachPart(std::string_view text, const std::vector<size_t>& cuts, Work work) {
  std::vector<std::thread> pool;
  pool.reserve(cuts.size());
  for (size_t i = 1; i <= cuts.size(); ++i) {
    size_t begin = cuts[i - 1];
    size_t end = i < cuts.size() ? cuts[i] : text.size();
    auto part = [&work, i, text, begin, end] { work(i, text.substr(begin, end - begin)); };
    try {
      pool.emplace_back(part);
    } catch (const std::system_error&) {
      part();  // No thread to be had: this one does the part.
    }
  }
  work(0, text.substr(0, cuts.empty() ? text.size() : cuts[0]));
  for (std::thread& t : pool) t.join();
}

}  // namespace

void Encoding::EncodeTo(std::string_view text, std::vector<Token>* out, Parallel parallel) const {
  std::vector<size_t> cuts =
      SplitPoints(text, static_cast<size_t>(std::max(1, parallel.threads)), parallel.min_part_bytes);
  if (cuts.empty()) return EncodeTo(text, out);
  std::vector<std::vector<Token>> parts(cuts.size() + 1);
  ForEachPart(text, cuts, [&](size_t i, std::string_view part) { EncodeTo(part, &parts[i]); });
  size_t total = out->size();
  for (const auto& p : parts) total += p.size();
  out->reserve(total);
  for (const auto& p : parts) out->insert(out->end(), p.begin(), p.end());
}

size_t Encoding::Count(std::string_view text, Parallel parallel) const {
  std::vector<size_t> cuts =
      SplitPoints(text, static_cast<size_t>(std::max(1, parallel.threads)), parallel.min_part_bytes);
  if (cuts.empty()) return Count(text);
  std::vector<size_t> counts(cuts.size() + 1, 0);
  ForEachPart(text, cuts, [&](size_t i, std::string_view part) { counts[i] = Count(part); });
  size_t total = 0;
  for (size_t c : counts) total += c;
  return total;
}

std::vector<Token> Encoding::EncodeWithSpecialTokens(std::string_view text) const {
  std::vector<Token> out;
  const auto& specials = data_->specials;
  // next[i] = where specials[i] next occurs at or after the scan position (npos: never again). Each
  // special's occurrences are searched once in total, not once per match.
  std::vector<size_t> next(specials.size(), 0);
  std::vector<bool> known(specials.size(), false);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t best = std::string_view::npos;
    size_t which = 0;
    for (size_t i = 0; i < specials.size(); ++i) {
      if (!known[i] || (next[i] != std::string_view::npos && next[i] < pos)) {
        next[i] = text.find(specials[i].first, pos);
        known[i] = true;
      }
      if (next[i] < best) {  // Specials are sorted longest first, so ties go to the longest.
        best = next[i];
        which = i;
      }
    }
    if (best == std::string_view::npos) break;
    EncodeTo(text.substr(pos, best - pos), &out);
    out.push_back(specials[which].second);
    pos = best + specials[which].first.size();
  }
  EncodeTo(text.substr(pos), &out);
  return out;
}

std::vector<std::vector<Token>> Encoding::EncodeBatch(std::span<const std::string_view> texts, int threads) const {
  std::vector<std::vector<Token>> out(texts.size());
  size_t n_threads = static_cast<size_t>(std::max(1, threads));
  n_threads = std::min(n_threads, std::max<size_t>(1, texts.size()));
  if (n_threads == 1) {
    for (size_t i = 0; i < texts.size(); ++i) out[i] = Encode(texts[i]);
    return out;
  }
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t i = next++; i < texts.size(); i = next++) out[i] = Encode(texts[i]);
  };
  std::vector<std::thread> pool;
  try {
    for (size_t t = 1; t < n_threads; ++t) pool.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads to be had: the ones started and this one share the rest.
  }
  work();
  for (std::thread& t : pool) t.join();
  return out;
}

Result<std::string> Encoding::Decode(std::span<const Token> tokens) const {
  std::string out;
  const Data& d = *data_;
  for (size_t i = 0; i < tokens.size(); ++i) {
    Token t = tokens[i];
    if (size_t{t} + 1 < d.n_offsets && d.offsets[t + 1] > d.offsets[t]) {
      out.append(d.blob + d.offsets[t], d.offsets[t + 1] - d.offsets[t]);
      continue;
    }
    auto special = std::find_if(d.specials.begin(), d.specials.end(), [t](const auto& s) { return s.second == t; });
    if (special == d.specials.end()) {
      return Status::InvalidArgument("token " + std::to_string(t) + " at index " + std::to_string(i) +
                                     " is not in " + d.name);
    }
    out += special->first;
  }
  return out;
}

const std::string& Encoding::name() const { return data_->name; }

size_t Encoding::vocab_size() const {
  size_t n = 0;
  for (size_t r = 0; r + 1 < data_->n_offsets; ++r) n += data_->offsets[r + 1] > data_->offsets[r];
  return n + data_->specials.size();
}

size_t Encoding::memory_bytes() const {
  const Data& d = *data_;
  size_t specials = 0;
  for (const auto& s : d.specials) specials += s.first.capacity() + sizeof(s);
  return sizeof(Data) + d.offsets[d.n_offsets - 1] + d.n_offsets * sizeof(uint32_t) +
         (d.mask + 1) * sizeof(Data::Slot) + 65536 * sizeof(uint32_t) + specials;
}

std::string_view Encoding::UnicodeVersion() { return ClassTablesUnicodeVersion(); }

}  // namespace strata::tokenizer
