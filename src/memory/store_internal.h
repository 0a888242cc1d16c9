// What the context store's backends (sqlite_store.cc, pg_store.cc) share: the rules of a write, made
// independent of SQL. A write is planned first — the rows it creates or changes, with every missing parent
// directory and the presets of a scope root met on the way — and then applied by the backend in one
// transaction. Planning reads stored rows through a FindFn the backend supplies (inside its transaction).
// Also here: input validation, glob matching, a directory's generated layers, grep's line matching, the
// full-text row of a node and the explanation of a lexical hit.
//
// Internal to src/memory; never installed.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "strata/memory/embedder.h"
#include "strata/memory/store.h"
#include "strata/util/ascii.h"

struct sb_stemmer;  // libstemmer.h

namespace strata::memory {
class VectorIndex;  // vector_index.h
}  // namespace strata::memory

namespace strata::memory::internal {

// Bit flags of a node's `derived`: which layers were derived from the content rather than given.
constexpr int64_t kAbstractDerived = 1;
constexpr int64_t kOverviewDerived = 2;

constexpr size_t kMaxGlobPattern = 512;

// A stored node with its row id and flags.
struct Row {
  int64_t id = 0;  // 0: new.
  Node node;
  int64_t derived = 0;
};

// Rows to write in one transaction, addressable by URI; what the vector index must learn after it.
struct Plan {
  std::vector<Row> rows;
  std::map<std::string, size_t> by_uri;
  std::vector<std::pair<int64_t, Vector>> upserts;  // Vector index updates after the commit.
  std::vector<int64_t> removed;
  std::vector<std::string> ensured;  // Scope roots whose presets this plan completes.
  int64_t generation = -1;           // The generation the commit produces (-1: vectors untouched).

  void Put(Row row);
  const Row* Find(const Uri& uri) const;
  void Merge(Plan other);
};

// Reads one stored row (nullopt: none), inside the backend's transaction.
using FindFn = std::function<Result<std::optional<Row>>(const Uri&)>;

// kFailedPrecondition when the store's vectors (`stored`, its embed_model) are no longer this instance's
// embedder's (`mine`): another instance on the store, started with another embedder, re-embedded them. Its
// vectors and this one's must not be mixed (each instance matched only its own, at cosine 0 to the others).
Status CheckEmbedModel(std::string_view stored, std::string_view mine);

// The defaults used for a leaf of WriteBatch without options of its own.
const WriteOptions& OptionOf(const std::vector<WriteOptions>& options, size_t i);

// Checks a WriteBatch before anything is read: option count, scope directories, metadata, UTF-8.
Status ValidateLeaves(const std::vector<std::pair<Uri, std::string>>& leaves, const std::vector<WriteOptions>& options);
Status ValidateMkdir(const Uri& uri, const WriteOptions& options);

// The texts the written leaves will be embedded from (predicted before the transaction, so that a remote
// embedder is called without holding any lock).
std::vector<std::string> PredictedTexts(const std::vector<std::pair<Uri, std::string>>& leaves,
                                        const std::vector<WriteOptions>& options);
// The embedding text of a directory as Mkdir will leave it.
std::string MkdirText(const Uri& uri, const WriteOptions& options);
// The directories above `nodes`, below the kind directories: the ones a write creates when missing.
std::vector<Uri> AncestorsOf(const std::vector<std::pair<Uri, std::string>>& nodes);

// Plans the rows of WriteBatch / Mkdir (missing parents and presets included). `ensured`: scope roots whose
// presets are known complete.
Status PlanLeaves(const std::vector<std::pair<Uri, std::string>>& leaves, const std::vector<WriteOptions>& options,
                  int64_t now, const std::set<std::string>& ensured, const FindFn& find, Plan* plan);
Status PlanMkdir(const Uri& uri, const WriteOptions& options, int64_t now, const std::set<std::string>& ensured,
                 const FindFn& find, Plan* plan);
// Plans every missing directory from the top of `dir`'s chain down to `dir` itself, and the presets of a
// scope root met on the way that are not in `ensured`.
Status PlanDirectories(const Uri& dir, int64_t now, const std::set<std::string>& ensured, const FindFn& find, Plan* plan);

// The number of characters (code points) of UTF-8 `text`: SQL substr() counts characters, not bytes.
int64_t CharCount(std::string_view text);

// Checks that a move is allowed by the URIs alone.
Status ValidateMove(const Uri& from, const Uri& to);
// The type a node at `uri` has (ContextTypeName of InferContextType); "resource" for text that is no URI.
std::string_view TypeOfPlace(std::string_view uri);
// The embedder a store opened with `given` uses, when its options keep the store's own model
// (keep_stored_model: no embedder was chosen) and it records `stored_model`: `given` when that is the
// model, or none is recorded (a new store); the local embedder of the recorded dimension for a local model;
// else kFailedPrecondition naming the model — also for a store without vectors yet, whose model a server
// chose: re-embedding (or relabelling) a store another instance serves with its own model is never done
// without being asked.
Result<std::shared_ptr<Embedder>> EmbedderForStore(std::shared_ptr<Embedder> given, std::string_view stored_model);
// With `keep` (keep_stored_model), makes `embedder` and its `model` id the store's own (EmbedderForStore).
Status KeepStoredModel(bool keep, std::string_view stored_model, std::shared_ptr<Embedder>& embedder,
                       std::string& model);

// Checks that a link is allowed: not the root (no node), not a node to itself, a reason of valid UTF-8
// without NUL (as a node's text).
Status ValidateLink(const Uri& from, const Uri& to, std::string_view reason);
// kInvalidArgument when moving `from` to `to` would give a node below it a URI past Uri's bounds (128
// segments, 4096 bytes): `deepest` and `longest` are the most '/' and the most bytes of any URI at or below
// `from`. Such URIs were stored, and every later read of them (a find over the scope, a check) failed.
Status CheckMovedBounds(const Uri& from, const Uri& to, int64_t deepest, int64_t longest);

// A directory's L0/L1 when it has none of its own: a listing of its children's abstracts.
std::string DirectoryLayer(const Uri& dir, Level level, const std::vector<Node>& children);

// Appends the lines of `content` containing `wanted` (already lower-cased when ignoring case) to `out`;
// false once `limit` matches are reached.
bool GrepLines(const Uri& uri, const std::string& content, const std::string& wanted, bool ignore_case,
               bool superseded, size_t limit, std::vector<GrepMatch>* out);
bool GlobMatch(std::string_view pattern, std::string_view path);
Status ValidateGlob(std::string_view pattern);
// ContextStore::Glob over any store: its subtree listed, matched here.
Result<std::vector<Node>> GlobNodes(ContextStore& store, std::string_view pattern, const Uri& under);

// kInvalidArgument unless `query` has the store's `dimension`.
Status CheckQueryDimension(const Vector& query, int dimension);
// The `limit` best of (cosine, uri, is_dir) triples as hits, best first.
Result<std::vector<ScoredUri>> TopByCosine(std::vector<std::tuple<float, std::string, bool>> scored, size_t limit);
// A leaf's layer, or a directory's own L0/L1 when it has one (nullopt: the directory reads as a listing).
std::optional<std::string> StoredLayer(const Node& node, Level level);

// The full-text row of a node: name, abstract, overview, content. A leaf's derived layers are cut from its
// content, so they are left out: indexing them again would count the content's first words three times.
struct FtsRow {
  std::string name, abstract_text, overview, content;
};
FtsRow MakeFtsRow(std::string_view name, bool is_dir, int64_t derived, std::string_view abstract_text,
                  std::string_view overview, std::string_view content);

// Porter's stemmer (Snowball's libstemmer, the algorithm of SQLite's `porter` tokenizer), to explain matches
// the index made through a stem. Not thread-safe: one per thread.
class PorterStemmer {
 public:
  PorterStemmer();
  ~PorterStemmer();
  PorterStemmer(const PorterStemmer&) = delete;
  PorterStemmer& operator=(const PorterStemmer&) = delete;
  std::string Stem(std::string_view word);
  // The first word of the lower-cased `text` other than `term` whose stem is `stem` (Stem(term)), or "".
  std::string MatchingWord(std::string_view text, std::string_view term, std::string_view stem);

 private:
  ::sb_stemmer* stemmer_;
};

// The full-text tokenizer of the embedded store (SQLite FTS5): Unicode word breaks, case folded and diacritics
// removed, then Porter stemming, so "preferences" finds "preference" and "cafe" finds "café" (CJK text is
// pre-split into characters by FtsText and passes the stemmer unchanged).
inline constexpr std::string_view kFtsTokenizer = "porter unicode61 remove_diacritics 2";

// `text` (its first `max_bytes`, cut on a character boundary) as the embedded index reads it: FtsText, then
// SQLite's own kFtsTokenizer, run in process (an FTS5 tokenizer of a per-thread in-memory database) — words
// of letters and digits (punctuation of every kind separates them, so `config.yaml`, `ops@example.com` and
// `docs/CHANGES.md` are words each), case folded, diacritics removed, words of 3-64 bytes Porter-stemmed, each
// CJK character a word; joined by spaces. The PostgreSQL store indexes and queries this with the `simple`
// configuration (no stemming, no stop words of its own), so both backends find the same words
// (LexemeTextTest checks them against an FTS5 index of the same text).
std::string LexemeText(std::string_view text, size_t max_bytes = std::string_view::npos);
// The word layout PostgreSQL's full text was computed with; a store with another is indexed again on open.
// 1: ASCII case folding only (accented and non-Latin words differed from SQLite's); 2: SQLite's tokenizer.
inline constexpr std::string_view kLexemeLayout = "porter-unicode61-2";

// The best rows of a full-text list that are explained (LexicalDetail); the rest have no detail and level -1
// (reading and examining each row's text cost more than the search itself once lists are long).
inline constexpr size_t kExplainedRows = 50;

// Respelling (docs/memory.md, "Finding things", step 1): a query word whose lexeme no node holds is also
// searched by the held lexemes nearest it in spelling, so "restuarant" finds "restaurant".
struct Respelling {
  std::string asked;   // The query term ("funraiser").
  std::string lexeme;  // A held lexeme searched in its place ("fundrais", as LexemeText makes it).
  std::string word;    // A word read as that lexeme ("fundraise"): what a query searches it by.
};

// The held lexemes of each range [lo, hi) a respelling is looked for in, at most kRespellCandidates each.
inline constexpr size_t kRespellCandidates = 5000;

// Of `held`, the lexemes nearest the lower-cased query `word` or its `lexeme` (LexemeText) by optimal string
// alignment distance (an insertion, deletion, substitution or swap of two neighbouring letters is one edit):
// within 1 edit of a form of 4-7 letters, 2 of a longer one, at most 3 (the nearest first, then in byte order).
// Only forms of 4-64 ASCII letters are respelt or offered, and only lexemes a query word can be read as
// (SearchableWord) that are not stop words.
std::vector<std::string> NearestLexemes(std::string_view word, std::string_view lexeme,
                                        std::span<const std::string> held);

// A word LexemeText reads as `lexeme` (Porter's stemmer is not idempotent: "fundrais" is read as "fundrai",
// "fundraise" as "fundrais"): the lexeme itself or it with a common ending, or "" when none is.
std::string SearchableWord(std::string_view lexeme);

// A query word to respell if the store does not hold its lexeme, and the ranges [lo, hi) of held lexemes its
// respellings are looked for in: those that share its first two letters, and those that begin with the two
// swapped (a slip in the first two letters other than a swap is not respelt).
struct RespellAsk {
  std::string word;    // As asked.
  std::string lexeme;  // LexemeText(word).
  std::vector<std::pair<std::string, std::string>> ranges;
  size_t shortest = 0, longest = 0;  // The lengths in bytes a candidate can have.
};
// For each ask, in order: nothing when the store holds its lexeme, else the held lexemes of its ranges whose
// length is within [shortest, longest] (at most kRespellCandidates per range). One call per query (on
// PostgreSQL one statement).
using NearbyLexemes =
    std::function<Result<std::vector<std::vector<std::string>>>(const std::vector<RespellAsk>& asks)>;

// The respellings of `terms` (QueryTerms), from what `nearby` finds.
Result<std::vector<Respelling>> Respell(const std::vector<std::string>& terms, const NearbyLexemes& nearby);

// Which query terms matched which layers of a hit ("deploy (name+content), ..."), and the most abstract
// layer a term matched (0, 1 or 2). `row` is the indexed text (MakeFtsRow); a leaf's derived layers, not
// indexed, are taken from `abstract_text` / `overview`. A term matched only through its stem is shown with the
// word it matched; a respelt one as `funraiser (content: "fundraiser", respelt)`.
std::pair<std::string, int> LexicalDetail(const std::vector<std::string>& terms, FtsRow row,
                                          std::string_view abstract_text, std::string_view overview,
                                          std::span<const Respelling> respelt = {});

// True when a node's metadata marks it superseded (a "valid_to" that is not null).
bool IsSuperseded(std::string_view metadata);

// Vectors as stored: little-endian float32 bytes.
std::string VectorBlob(const Vector& v);
Vector BlobVector(std::string_view blob);

// Applies a plan's vector index updates to `index` in one VectorIndex::UpsertBatch.
Status IndexUpserts(VectorIndex& index, const std::vector<std::pair<int64_t, Vector>>& upserts);

// How many times the SQLite stores of this process built a vector index from the whole table (on open, or
// when another process's changes could not be caught up from the vector log): for tests of the log.
int64_t SqliteIndexRebuilds();

// The range that selects `uri`'s strict descendants: uri >= "X/" AND uri < "X0" ('0' follows '/').
std::pair<std::string, std::string> DescendantRange(const Uri& uri);

inline Status NotFoundError(const Uri& uri) { return Status::NotFound(uri.str() + " does not exist"); }

// A bounded cache of query vectors (find embeds the same query text again and again).
class QueryVectorCache {
 public:
  // Embeds the texts not cached with `embedder`, caching them.
  Result<std::vector<Vector>> Embed(Embedder& embedder, std::span<const std::string> texts);

 private:
  std::mutex mu_;
  std::unordered_map<std::string, Vector> cache_;  // Guarded by mu_.
};

}  // namespace strata::memory::internal
