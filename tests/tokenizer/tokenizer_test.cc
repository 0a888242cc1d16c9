#include <cctype>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <cstring>
#include <random>
#include <set>

#include "strata/json/json_writer.h"
#include "strata/tokenizer/encoding.h"
#include "strata/tokenizer/registry.h"
#include "strata/tokenizer/message_counter.h"
#include "test_util.h"
#include "tokenizer/pretokenize.h"

namespace strata::tokenizer {
namespace {

std::shared_ptr<const Encoding> Get(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const Encoding>> cache;
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  auto loaded = Encoding::Load(name);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString();
  if (!loaded.ok()) return nullptr;
  return cache[name] = *loaded;
}

// The obviously-correct merger: repeatedly merge the adjacent pair whose concatenation has the lowest rank
// (leftmost on ties), with ranks looked up in a std::map built from Decode() of every id.
class SlowReference {
 public:
  explicit SlowReference(const Encoding& e) {
    for (Token t = 0; t < 300000; ++t) {
      auto bytes = e.Decode(std::vector<Token>{t});
      if (bytes.ok() && !ranks_.count(*bytes)) ranks_[*bytes] = t;
    }
  }
  std::vector<Token> Merge(const std::string& piece) const {
    std::vector<std::string> parts;
    for (char c : piece) parts.emplace_back(1, c);
    while (parts.size() > 1) {
      size_t best_at = 0;
      Token best = UINT32_MAX;
      for (size_t i = 0; i + 1 < parts.size(); ++i) {
        auto it = ranks_.find(parts[i] + parts[i + 1]);
        if (it != ranks_.end() && it->second < best) {
          best = it->second;
          best_at = i;
        }
      }
      if (best == UINT32_MAX) break;
      parts[best_at] += parts[best_at + 1];
      parts.erase(parts.begin() + static_cast<long>(best_at) + 1);
    }
    std::vector<Token> out;
    for (const std::string& p : parts) out.push_back(ranks_.at(p));
    return out;
  }

 private:
  std::map<std::string, Token> ranks_;
};

std::string RandomUtf8(std::mt19937& rng, size_t max_chars) {
  static const std::vector<std::string> pool = {
      "a", "Z", "q", "e", "7", "0", " ", " ", "\t", "\n", "\r\n", "'", "s", "ll", ".", ",", "!", "/", "#",
      "é", "ß", "中", "文", "字", "あ", "カ", "한", "ع", "ह", "्", "\xCC\x81", "😀", "👍🏽", "\xE2\x80\x8D", "½", "٣",
      "\xC2\xA0", "\xE3\x80\x80", "ſ", "Ǆ"};
  std::string s;
  size_t n = 1 + rng() % max_chars;
  for (size_t i = 0; i < n; ++i) {
    if (rng() % 50 == 0) {
      s += std::string(20 + rng() % 300, rng() % 2 ? ' ' : 'x');  // Long pieces take the heap path.
    } else {
      s += pool[rng() % pool.size()];
    }
  }
  return s;
}

class TokenizerTest : public ::testing::TestWithParam<std::string> {};

// The slow reference of an encoding, built once (it reads every id).
const SlowReference& Reference(const std::string& name) {
  static std::map<std::string, std::unique_ptr<SlowReference>> refs;
  auto& ref = refs[name];
  if (!ref) ref = std::make_unique<SlowReference>(*Get(name));
  return *ref;
}

// The ids of `text` by the slow reference: split by the encoding's pattern, each piece merged slowly.
std::vector<Token> ReferenceEncode(const std::string& name, const std::string& text) {
  SplitPattern pattern = name == "cl100k_base" ? SplitPattern::kCl100k : SplitPattern::kO200k;
  std::vector<Token> out;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = NextPiece(pattern, text, pos);
    EXPECT_GT(end, pos);
    if (end <= pos) break;
    for (Token t : Reference(name).Merge(text.substr(pos, end - pos))) out.push_back(t);
    pos = end;
  }
  return out;
}

TEST_P(TokenizerTest, FastMergerAgreesWithSlowReferenceOnRandomUtf8) {
  auto enc = Get(GetParam());
  ASSERT_NE(enc, nullptr);
  std::mt19937 rng(1234);
  for (int iter = 0; iter < 400; ++iter) {
    std::string text = RandomUtf8(rng, 40);
    std::vector<Token> expected = ReferenceEncode(GetParam(), text);
    ASSERT_EQ(enc->Encode(text), expected) << "text: " << text;
    ASSERT_EQ(enc->Count(text), expected.size());
    auto decoded = enc->Decode(expected);
    ASSERT_TRUE(decoded.ok());
    ASSERT_EQ(*decoded, text);
  }
}


// Runs of multi-byte characters take the segmented path (pieces split where no token straddles a
// character boundary): random characters of many scripts, common and rare, must still merge exactly as
// the slow reference merges them.
TEST_P(TokenizerTest, MultiByteRunsAgreeWithSlowReference) {
  auto enc = Get(GetParam());
  ASSERT_NE(enc, nullptr);
  // Blocks: CJK (common and rare), Hangul, kana, Cyrillic, Greek, Arabic, Devanagari with marks, Thai,
  // CJK punctuation and full-width forms, emoji; and a few frequent characters so that real words form.
  const std::vector<std::pair<uint32_t, uint32_t>> blocks = {
      {0x4E00, 0x4FFF}, {0x4E00, 0x9FFF}, {0xAC00, 0xD7A3}, {0x3041, 0x30FF}, {0x0410, 0x044F}, {0x0391, 0x03C9},
      {0x0621, 0x064A}, {0x0900, 0x097F}, {0x0E01, 0x0E5B}, {0x3000, 0x303F}, {0xFF01, 0xFF5E}, {0x1F300, 0x1F6FF}};
  const std::vector<uint32_t> frequent = {0x7684, 0x662F, 0x4E00, 0x4E2D, 0x56FD, 0x4EBA, 0x5927, 0x5B66,
                                          0x3002, 0xFF0C, 0x043E, 0x0430, 0x306E, 0xC774};
  std::mt19937 rng(4242);
  for (int iter = 0; iter < 1500; ++iter) {
    std::string text;
    size_t chars = 2 + rng() % 40;
    const auto& block = blocks[rng() % blocks.size()];
    for (size_t i = 0; i < chars; ++i) {
      uint32_t r = rng() % 100;
      if (r < 25) {
        json::AppendUtf8(&text, frequent[rng() % frequent.size()]);
      } else if (r < 30) {
        json::AppendUtf8(&text, " ,.a1"[rng() % 5]);
      } else if (r < 35) {
        const auto& other = blocks[rng() % blocks.size()];
        json::AppendUtf8(&text, other.first + rng() % (other.second - other.first + 1));
      } else {
        json::AppendUtf8(&text, block.first + rng() % (block.second - block.first + 1));
      }
    }
    ASSERT_EQ(enc->Encode(text), ReferenceEncode(GetParam(), text)) << "text: " << text;
  }
}

std::string Base64(std::string_view in) {
  static const char* kChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (unsigned char c : in) {
    acc = (acc << 8) | c;
    bits += 8;
    while (bits >= 6) {
      bits -= 6;
      out.push_back(kChars[(acc >> bits) & 63]);
    }
  }
  if (bits > 0) out.push_back(kChars[(acc << (6 - bits)) & 63]);
  while (out.size() % 4 != 0) out.push_back('=');
  return out;
}

// tiktoken looks up the whole piece and merges everything smaller: a part of a piece (here a character of
// a run split where no token straddles) must be merged, never looked up, even when its bytes are a token
// that merging cannot build. A vocabulary of the 256 bytes and "中" alone (no two-byte token) shows it.
TEST(TokenizerSegmentsTest, APartOfAPieceIsMergedNeverLookedUpWhole) {
  std::string ranks = "! 0";
  for (int b = 0; b < 256; ++b) ranks += " " + Base64(std::string(1, static_cast<char>(b)));
  ranks += " " + Base64("中");
  auto enc = Encoding::FromTiktokenJson(
      "toy", R"({"pat_str": "[^\\r\\n\\p{L}\\p{N}]?[\\p{Lu}\\p{Lt}\\p{Lm}\\p{Lo}\\p{M}]*", "special_tokens": {}, "bpe_ranks": ")" +
                 ranks + "\"}");
  ASSERT_OK(enc);
  EXPECT_EQ((*enc)->Encode("中"), std::vector<Token>{256});  // The whole piece: looked up.
  EXPECT_EQ((*enc)->Encode("中中"), (std::vector<Token>{0xE4, 0xB8, 0xAD, 0xE4, 0xB8, 0xAD}));  // Two parts: merged.
  EXPECT_EQ((*enc)->Encode("中中中"), (std::vector<Token>{0xE4, 0xB8, 0xAD, 0xE4, 0xB8, 0xAD, 0xE4, 0xB8, 0xAD}));
}

TEST_P(TokenizerTest, InvalidUtf8BytesRoundTrip) {
  auto enc = Get(GetParam());
  ASSERT_NE(enc, nullptr);
  std::mt19937 rng(99);
  for (int iter = 0; iter < 300; ++iter) {
    std::string bytes;
    size_t n = 1 + rng() % 60;
    for (size_t i = 0; i < n; ++i) bytes.push_back(static_cast<char>(rng() % 256));
    std::vector<Token> ids = enc->Encode(bytes);
    auto decoded = enc->Decode(ids);
    ASSERT_TRUE(decoded.ok());
    ASSERT_EQ(*decoded, bytes);
  }
  // A truncated multi-byte character: its bytes are pieces of their own, and nothing is lost.
  EXPECT_EQ(*enc->Decode(enc->Encode("ab\xE4\xB8")), "ab\xE4\xB8");
}

TEST_P(TokenizerTest, SpecialTokensOnlyWhenAsked) {
  auto enc = Get(GetParam());
  ASSERT_NE(enc, nullptr);
  Token eot = GetParam() == "cl100k_base" ? 100257 : 199999;
  std::vector<Token> ordinary = enc->Encode("a<|endoftext|>b");
  EXPECT_EQ(std::count(ordinary.begin(), ordinary.end(), eot), 0);
  std::vector<Token> special = enc->EncodeWithSpecialTokens("a<|endoftext|>b");
  ASSERT_EQ(std::count(special.begin(), special.end(), eot), 1);
  EXPECT_EQ(*enc->Decode(special), "a<|endoftext|>b");
  auto bad = enc->Decode(std::vector<Token>{1, 4000000});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("index 1"), std::string::npos);
}

TEST_P(TokenizerTest, BatchEqualsSequential) {
  auto enc = Get(GetParam());
  ASSERT_NE(enc, nullptr);
  std::mt19937 rng(5);
  std::vector<std::string> texts;
  for (int i = 0; i < 64; ++i) texts.push_back(RandomUtf8(rng, 200));
  std::vector<std::string_view> views(texts.begin(), texts.end());
  auto batch = enc->EncodeBatch(views, 2);
  for (size_t i = 0; i < texts.size(); ++i) EXPECT_EQ(batch[i], enc->Encode(texts[i]));
}

// Long texts cut at piece boundaries and encoded on several threads give exactly the ids of one thread, for
// every cut SplitPoints may choose (parts as small as a byte), on text dense with line breaks, letters,
// punctuation, spaces and other scripts around them.
TEST_P(TokenizerTest, PartsOnThreadsEqualTheWhole) {
  auto enc = Get(GetParam());
  ASSERT_NE(enc, nullptr);
  std::mt19937 rng(11);
  static const std::vector<std::string> around = {"\n", "\r\n", "\n\n", " \n", "'\n", ";\n", "\n ", "\t\n",
                                                  "x", "Ab", "s", "'s", "中", "é", "1", " ", "  ", "/", "\n\u00e9"};
  // Under a sanitizer every thread started costs ~10 ms (ThreadSanitizer), and every text runs ~10x slower
  // (AddressSanitizer; 75 s a run with all of them): a tenth of the texts there still cuts every split on
  // threads; ctest in the developer build runs them all.
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  constexpr int kRounds = 40;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer) || __has_feature(address_sanitizer)
  constexpr int kRounds = 40;
#else
  constexpr int kRounds = 400;
#endif
#else
  constexpr int kRounds = 400;
#endif
  size_t cuts_seen = 0;
  for (int round = 0; round < kRounds; ++round) {
    std::string text;
    size_t n = 1 + rng() % 120;
    for (size_t i = 0; i < n; ++i) text += rng() % 3 == 0 ? RandomUtf8(rng, 6) : around[rng() % around.size()];
    std::vector<Token> whole = enc->Encode(text);
    for (int threads : {2, 3, 7}) {
      for (size_t min_part : {size_t{1}, size_t{5}, size_t{64}}) {
        Encoding::Parallel parallel{.threads = threads, .min_part_bytes = min_part};
        std::vector<size_t> cuts = Encoding::SplitPoints(text, static_cast<size_t>(threads), min_part);
        cuts_seen += cuts.size();
        for (size_t i = 0; i < cuts.size(); ++i) {
          ASSERT_GT(cuts[i], i == 0 ? 0 : cuts[i - 1]);
          ASSERT_EQ(text[cuts[i] - 1], '\n');
          ASSERT_TRUE(std::isalpha(static_cast<unsigned char>(text[cuts[i]])));
        }
        std::vector<Token> ids;
        enc->EncodeTo(text, &ids, parallel);
        ASSERT_EQ(ids, whole) << "threads " << threads << ", min part " << min_part << ", text "
                              << nlohmann::json(text).dump();
        ASSERT_EQ(enc->Count(text, parallel), whole.size());
      }
    }
  }
  EXPECT_GT(cuts_seen, 2.5 * kRounds);  // The texts did get cut.
  // A long text with no place to cut is encoded whole.
  std::string no_cut(1 << 12, 'a');
  EXPECT_TRUE(Encoding::SplitPoints(no_cut, 4, 16).empty());
  EXPECT_EQ(enc->Count(no_cut, {.threads = 4, .min_part_bytes = 16}), enc->Count(no_cut));
}

// An independent O(n log n) merger for long pieces: parts in a linked list, pairs in an ordered set of
// (rank, start). The same rule as SlowReference, fast enough for pieces of hundreds of kilobytes.
std::vector<Token> HeapReference(const std::map<std::string, Token>& ranks, const std::string& piece) {
  size_t n = piece.size();
  std::vector<size_t> next(n + 1), prev(n + 1);
  for (size_t i = 0; i <= n; ++i) {
    next[i] = i + 1;
    prev[i] = i == 0 ? 0 : i - 1;
  }
  std::vector<bool> alive(n + 1, true);
  auto rank_of = [&](size_t i) -> Token {
    if (i >= n || next[i] >= n) return UINT32_MAX;
    auto it = ranks.find(piece.substr(i, next[next[i]] - i));
    return it == ranks.end() ? UINT32_MAX : it->second;
  };
  std::vector<Token> rank_at(n + 1, UINT32_MAX);
  std::set<std::pair<Token, size_t>> pairs;
  for (size_t i = 0; i + 1 < n; ++i) {
    rank_at[i] = rank_of(i);
    if (rank_at[i] != UINT32_MAX) pairs.insert({rank_at[i], i});
  }
  auto update = [&](size_t i) {
    if (rank_at[i] != UINT32_MAX) pairs.erase({rank_at[i], i});
    rank_at[i] = rank_of(i);
    if (rank_at[i] != UINT32_MAX) pairs.insert({rank_at[i], i});
  };
  while (!pairs.empty()) {
    size_t i = pairs.begin()->second;
    size_t j = next[i];
    if (rank_at[j] != UINT32_MAX) pairs.erase({rank_at[j], j});
    alive[j] = false;
    next[i] = next[j];
    if (next[j] <= n) prev[next[j]] = i;
    update(i);
    if (i > 0) update(prev[i]);
  }
  std::vector<Token> out;
  for (size_t i = 0; i < n; i = next[i]) out.push_back(ranks.at(piece.substr(i, next[i] - i)));
  return out;
}

// Pieces of hundreds of kilobytes are merged in windows (bounded memory); the ids must be exactly those of
// merging the piece whole. Before, a 50 MB run of one character took 1.2 GB.
TEST_P(TokenizerTest, VeryLongPiecesMergeExactlyAsWhole) {
  auto enc = Get(GetParam());
  ASSERT_NE(enc, nullptr);
  std::map<std::string, Token> ranks;
  for (Token t = 0; t < 300000; ++t) {
    auto bytes = enc->Decode(std::vector<Token>{t});
    if (bytes.ok() && !ranks.count(*bytes)) ranks[*bytes] = t;
  }
  std::mt19937 rng(7);
  std::string random_letters, words_run;
  for (int i = 0; i < 300000; ++i) random_letters += static_cast<char>('a' + rng() % 26);
  static const char* kSyllables[] = {"tion", "ing", "qu", "str", "ab", "e", "ou", "zz", "x"};
  while (words_run.size() < 250000) words_run += kSyllables[rng() % std::size(kSyllables)];
  std::string abab;
  for (int i = 0; i < 100000; ++i) abab += "ab";
  SplitPattern pattern = GetParam() == "cl100k_base" ? SplitPattern::kCl100k : SplitPattern::kO200k;
  for (const std::string& piece : {std::string(200000, 'a'), std::string(150001, ' '), std::string(140000, '='),
                                   abab, random_letters, words_run}) {
    SCOPED_TRACE(piece.substr(0, 12));
    ASSERT_EQ(NextPiece(pattern, piece, 0), piece.size()) << "one piece";
    std::vector<Token> expected = HeapReference(ranks, piece);
    ASSERT_EQ(enc->Encode(piece), expected);
    ASSERT_EQ(enc->Count(piece), expected.size());
  }
}

INSTANTIATE_TEST_SUITE_P(Encodings, TokenizerTest, ::testing::Values("cl100k_base", "o200k_base"));

TEST(TokenizerLoadTest, VocabularyImageIsBuiltOnceThenMappedAndRebuiltWhenDamaged) {
  testing::TempDir dir;
  ::setenv("STRATA_VOCAB_CACHE", dir.path().c_str(), 1);
  auto built = Encoding::Load("cl100k_base");  // Parses the JSON and writes the image.
  ASSERT_OK(built);
  std::vector<std::string> images;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) images.push_back(entry.path().string());
  ASSERT_EQ(images.size(), 1u);
  auto mapped = Encoding::Load("cl100k_base");  // Maps the image.
  ASSERT_OK(mapped);
  std::string text = "Images must agree with the JSON: 你好, ſ'S, 12345, \r\n  spaces <|endoftext|>";
  EXPECT_EQ((*mapped)->Encode(text), (*built)->Encode(text));
  EXPECT_EQ((*mapped)->EncodeWithSpecialTokens(text), (*built)->EncodeWithSpecialTokens(text));
  EXPECT_EQ((*mapped)->vocab_size(), (*built)->vocab_size());
  // A damaged image is ignored (and replaced), never trusted.
  std::string bytes = testing::ReadFileOrDie(images[0]);
  testing::WriteFileOrDie(images[0], bytes.substr(0, bytes.size() / 2));
  auto rebuilt = Encoding::Load("cl100k_base");
  ASSERT_OK(rebuilt);
  EXPECT_EQ((*rebuilt)->Encode(text), (*built)->Encode(text));
  EXPECT_EQ(testing::ReadFileOrDie(images[0]).size(), bytes.size());
  ::unsetenv("STRATA_VOCAB_CACHE");
}

std::vector<std::string> Pieces(SplitPattern pattern, const std::string& text) {
  std::vector<std::string> out;
  for (size_t pos = 0; pos < text.size();) {
    size_t end = NextPiece(pattern, text, pos);
    out.push_back(text.substr(pos, end - pos));
    pos = end;
  }
  return out;
}

TEST(PretokenizerTest, SplitsLikeTheRegexes) {
  using V = std::vector<std::string>;
  EXPECT_EQ(Pieces(SplitPattern::kCl100k, "Hello world's  123456 !!\n\n  x"),
            (V{"Hello", " world", "'s", " ", " ", "123", "456", " !!\n\n", " ", " x"}));
  EXPECT_EQ(Pieces(SplitPattern::kO200k, "HELLOWorld don't   "), (V{"HELLOWorld", " don't", "   "}));
  // A leading combining mark: alternative 1 without the prefix beats alternative 2 with it.
  EXPECT_EQ(Pieces(SplitPattern::kO200k, "\u0301ABC"), (V{"\u0301", "ABC"}));
  EXPECT_EQ(Pieces(SplitPattern::kO200k, "1\u0301NASA"), (V{"1", "\u0301", "NASA"}));
  EXPECT_EQ(Pieces(SplitPattern::kO200k, "path/to/file\r\n"), (V{"path", "/to", "/file", "\r\n"}));
}

TEST(TokenizerLoadTest, HostileInputsAreErrorsNotCrashes) {
  auto enc = Get("cl100k_base");
  ASSERT_NE(enc, nullptr);
  auto decoded = enc->Decode(std::vector<Token>{4294967295u});
  ASSERT_FALSE(decoded.ok());
  EXPECT_EQ(decoded.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(Encoding::FromTiktokenJson("x", R"({"pat_str":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|x","special_tokens":{},"bpe_ranks":"! 4294967295 QUI="})").ok());
  EXPECT_FALSE(Encoding::FromTiktokenJson("x", R"({"pat_str":"(?i:'s|'t|'re|'ve|'m|'ll|'d)|x","special_tokens":{"":3},"bpe_ranks":"! 0 QQ=="})").ok());
}

TEST(TokenizerLoadTest, HostileImageIsRejectedAndRebuilt) {
  testing::TempDir dir;
  ::setenv("STRATA_VOCAB_CACHE", dir.path().c_str(), 1);
  ASSERT_OK(Encoding::Load("cl100k_base"));
  std::string image;
  for (const auto& entry : std::filesystem::directory_iterator(dir.path())) image = entry.path().string();
  std::string bytes = testing::ReadFileOrDie(image);
  // table_slots (at byte 48 of the header) set to 2^60: a power of two whose byte size overflows.
  std::string hostile = bytes;
  uint64_t huge = uint64_t{1} << 60;
  std::memcpy(hostile.data() + 48, &huge, 8);
  testing::WriteFileOrDie(image, hostile);
  auto loaded = Encoding::Load("cl100k_base");
  ASSERT_OK(loaded);
  EXPECT_EQ((*loaded)->Encode("still correct"), Get("cl100k_base")->Encode("still correct"));
  ::unsetenv("STRATA_VOCAB_CACHE");
}

TEST(TokenizerLoadTest, UnknownEncodingIsAClearError) {
  auto missing = Encoding::Load("p50k_base");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(Encoding::FromTiktokenJson("x", "{\"bpe_ranks\": 3}").ok());
}

TEST(MessageCounterTest, CountsTextToolCallsAndOverhead) {
  auto enc = Get("o200k_base");
  ASSERT_NE(enc, nullptr);
  EncodingMessageCounter counter(enc);
  Message user = Message::User("Hello, world!");
  int64_t text = static_cast<int64_t>(enc->Count("Hello, world!"));
  EXPECT_EQ(counter.CountMessage(user), 3 + static_cast<int64_t>(enc->Count("user")) + text);
  Message call;
  call.role = Role::kAssistant;
  call.tool_calls = std::vector<ToolCall>{ToolCall{"c1", {"search", "{\"q\":\"strata\"}"}, std::nullopt, std::nullopt}};
  EXPECT_EQ(counter.CountMessage(call), 3 + static_cast<int64_t>(enc->Count("assistant") + enc->Count("search") +
                                                                 enc->Count("{\"q\":\"strata\"}")));
  std::vector<Message> both = {user, call};
  EXPECT_EQ(counter.CountMessages(both), counter.CountMessage(user) + counter.CountMessage(call));
  EXPECT_EQ(counter.CountPrompt(both), counter.CountMessages(both) + 3);
}

namespace {

MediaPart Image(std::string_view mime, std::string_view bytes, std::optional<std::string> detail = std::nullopt) {
  return MediaPart{MediaKind::kImage, "data:" + std::string(mime) + ";base64," + Base64(bytes), std::nullopt, detail};
}

std::string Png(uint32_t w, uint32_t h) {
  std::string b("\x89PNG\r\n\x1a\n\0\0\0\x0dIHDR", 16);
  for (uint32_t v : {w, h}) {
    for (int shift : {24, 16, 8, 0}) b += static_cast<char>((v >> shift) & 0xFF);
  }
  return b + std::string("\x08\x02\0\0\0", 5);
}

}  // namespace

// A media part costs a prompt what the provider bills for it, estimated: it cost nothing, and twenty images
// were sent into a 2,000-token window. Images by OpenAI's rule, their size read from the data they carry.
TEST(MessageCounterTest, MediaPartsCostWhatProvidersBillForThem) {
  EXPECT_EQ(EstimateMediaTokens(Image("image/png", Png(512, 512))), 85 + 170);
  EXPECT_EQ(EstimateMediaTokens(Image("image/png", Png(2048, 4096))), 85 + 170 * 6);  // 768 x 1536.
  EXPECT_EQ(EstimateMediaTokens(Image("image/png", Png(4000, 100))), 85 + 170 * 4);   // 2048 x 51.
  EXPECT_EQ(EstimateMediaTokens(Image("image/png", Png(2048, 4096), "low")), 85);
  EXPECT_EQ(EstimateMediaTokens(Image("image/gif", std::string("GIF89a\x0a\x00\x0a\x00", 10))), 255);
  // A JPEG's size is in its frame header, after the segments before it.
  std::string jpeg("\xFF\xD8\xFF\xE0\x00\x10JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00"
                   "\xFF\xC0\x00\x11\x08\x02\x58\x03\x20\x03\x01\x22\x00",
                   33);
  EXPECT_EQ(EstimateMediaTokens(Image("image/jpeg", jpeg)), 85 + 170 * 4);  // 800 x 600.
  std::string webp = std::string("RIFF\0\0\0\0WEBPVP8X", 16) + std::string(8, '\0') +
                     std::string("\xE7\x03\x00\xC7\x00\x00", 6);  // 1000 x 200.
  EXPECT_EQ(EstimateMediaTokens(Image("image/webp", webp)), 85 + 170 * 2);
  // What cannot be read: a URL, damaged data.
  EXPECT_EQ(EstimateMediaTokens(MediaPart{MediaKind::kImage, "https://example.com/cat.png"}),
            EncodingMessageCounter::kUnknownImageTokens);
  EXPECT_EQ(EstimateMediaTokens(Image("image/png", "not a png")), EncodingMessageCounter::kUnknownImageTokens);
  EXPECT_EQ(EstimateMediaTokens(MediaPart{MediaKind::kImage, "data:image/png;base64,%%%"}),
            EncodingMessageCounter::kUnknownImageTokens);
  // Audio by its bytes, with a floor.
  EXPECT_EQ(EstimateMediaTokens(MediaPart{MediaKind::kAudio, "data:audio/wav;base64," + Base64(std::string(320'000, 'a'))}),
            200);
  EXPECT_EQ(EstimateMediaTokens(MediaPart{MediaKind::kAudio, "https://example.com/a.mp3"}), 100);
  // In a message, every counter counts them.
  Message seen = Message::User("What is this?");
  seen.content.push_back(Image("image/png", Png(512, 512)));
  auto enc = Get("o200k_base");
  ASSERT_NE(enc, nullptr);
  EncodingMessageCounter counter(enc);
  EXPECT_EQ(counter.CountMessage(seen), counter.CountMessage(Message::User("What is this?")) + 255);
}

// A tally (one message at a time, as a one-pass reader counts) equals CountMessages of the same messages,
// rounding included, for every counter.
TEST(MessageCounterTest, TalliesEqualCountMessages) {
  auto enc = Get("o200k_base");
  ASSERT_NE(enc, nullptr);
  EncodingMessageCounter exact(enc);
  CharRatioEstimator chars(4);
  std::vector<Message> messages = {Message::User("abc"), Message::User("def"), Message::User("世界 and more"),
                                   Message::ToolResult("c1", "x")};
  for (const MessageTokenCounter* counter : {static_cast<const MessageTokenCounter*>(&exact),
                                             static_cast<const MessageTokenCounter*>(&chars)}) {
    auto tally = counter->NewTally();
    for (size_t i = 0; i < messages.size(); ++i) {
      tally->Add(messages[i]);
      EXPECT_EQ(tally->Total(), counter->CountMessages(std::span<const Message>(messages.data(), i + 1)));
    }
    tally->Reset();
    EXPECT_EQ(tally->Total(), 0);
  }
  EXPECT_EQ(chars.CountMessages(std::span<const Message>(messages.data(), 2)), 1) << "3 + 3 characters: one token, not 0 + 0";
}

TEST(MessageCounterTest, CachingCounterCountsEachMessageOnce) {
  auto enc = Get("o200k_base");
  ASSERT_NE(enc, nullptr);
  EncodingMessageCounter exact(enc);
  CachingMessageCounter cached(&exact);
  std::vector<Message> history;
  for (int turn = 0; turn < 20; ++turn) {
    history.push_back(Message::User("question " + std::to_string(turn)));
    history.push_back(Message::Assistant("answer number " + std::to_string(turn) + " 你好"));
    EXPECT_EQ(cached.CountMessages(history), exact.CountMessages(history));
  }
  EXPECT_EQ(cached.misses(), 40u) << "every message was tokenised exactly once";
  EXPECT_EQ(cached.hits(), 2u * (0 + 1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9 + 10 + 11 + 12 + 13 + 14 + 15 + 16 + 17 + 18 + 19));
}

TEST(MessageCounterTest, ToolSchemasAreCounted) {
  auto enc = Get("o200k_base");
  ASSERT_NE(enc, nullptr);
  EncodingMessageCounter counter(enc);
  auto none = counter.CountToolSchemas("[]");
  ASSERT_OK(none);
  EXPECT_EQ(*none, 0);
  auto one = counter.CountToolSchemas(
      R"([{"type":"function","function":{"name":"read_file","description":"Read a file.","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}}])");
  ASSERT_OK(one);
  int64_t expected = EncodingMessageCounter::kToolsPreamble + EncodingMessageCounter::kTokensPerTool +
                     static_cast<int64_t>(enc->Count("read_file") + enc->Count("Read a file.") +
                                          enc->Count(R"({"type":"object","properties":{"path":{"type":"string"}}})"));
  EXPECT_EQ(*one, expected);
  EXPECT_EQ(counter.CountToolSchemas("{").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(counter.CountToolSchemas(R"([{"description":"no name"}])").status().code(), StatusCode::kInvalidArgument);
}

// Compares with ids produced by the npm `tiktoken` package (tests/tokenizer/reference_test.sh writes them and
// sets STRATA_TOKENIZER_REFERENCE). Run through ctest's tokenizer_reference test.
TEST(TokenizerReference, MatchesTiktokenNpm) {
  const char* path = std::getenv("STRATA_TOKENIZER_REFERENCE");
  if (path == nullptr) GTEST_SKIP() << "run via ctest -R tokenizer_reference (needs Node and the npm cache)";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::string line;
  int rows = 0;
  while (std::getline(in, line)) {
    nlohmann::json row = nlohmann::json::parse(line);
    std::string text = row["text"];
    for (const char* name : {"cl100k_base", "o200k_base"}) {
      auto enc = Get(name);
      ASSERT_NE(enc, nullptr);
      std::vector<Token> expected = row[name].get<std::vector<Token>>();
      std::vector<Token> actual = enc->Encode(text);
      // And cut into parts on threads wherever it may be cut.
      std::vector<Token> in_parts;
      enc->EncodeTo(text, &in_parts, {.threads = 4, .min_part_bytes = 1});
      EXPECT_EQ(in_parts, expected) << row["name"] << " (" << name << ") in parts";
      if (actual != expected) {
        size_t i = 0;
        while (i < actual.size() && i < expected.size() && actual[i] == expected[i]) ++i;
        FAIL() << row["name"] << " (" << name << "): first difference at token " << i << " of " << expected.size()
               << "; text: " << nlohmann::json(text).dump();
      }
    }
    ++rows;
  }
  EXPECT_GT(rows, 10);
  std::printf("%d texts agree with tiktoken for cl100k_base and o200k_base\n", rows);
}

}  // namespace
}  // namespace strata::tokenizer

namespace strata::tokenizer {
namespace {

// One registry names every counter (issue 29): the same name counts the same anywhere.
TEST(TokenCounterRegistry, NamesValidationAndOneCountPerName) {
  std::vector<std::string_view> names(CounterNames().begin(), CounterNames().end());
  EXPECT_EQ(names, (std::vector<std::string_view>{"o200k_base", "cl100k_base", "chars"}));
  EXPECT_EQ(kDefaultEncoding, "o200k_base");
  Status bad = ValidateCounterName("p50k");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.message(), "encoding must be o200k_base, cl100k_base or chars, not \"p50k\"");
  EXPECT_FALSE(FindCounter("gpt2").ok());
  auto found = FindCounter("cl100k_base");
  ASSERT_OK(found);
  EXPECT_EQ(*found, &CounterFor("cl100k_base"));  // Loaded once, shared.
  const std::string text = "Tokens are counted the same way wherever a budget is given.";
  auto encoding = Encoding::Load("o200k_base");
  ASSERT_OK(encoding);
  std::string warning = "unset";
  EXPECT_EQ(CountText("o200k_base", text, &warning), static_cast<int64_t>((*encoding)->Count(text)));
  EXPECT_EQ(warning, "");
  EXPECT_EQ(CountText("chars", text), static_cast<int64_t>((text.size() + 3) / 4));
}

}  // namespace
}  // namespace strata::tokenizer
