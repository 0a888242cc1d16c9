// The context store: one home for skills, memories and resources, addressed by URI (uri.h).
//
// Every node is a directory or a leaf with three layers: L0 abstract (one line, for filtering), L1 overview
// (a paragraph, for deciding), L2 content (the full text, loaded on demand). A leaf written without an
// abstract or overview gets derived ones (the first line / the first paragraph of its content, cut); a
// directory without them reads as a generated listing of its children's abstracts.
//
// Every mutation is one transaction over content, the full-text index, vectors and relations, so the
// indexes never drift from the content; a crash leaves the state before or after the call. Scope roots get
// their preset directories (presets.h) the first time they are used, idempotently.
//
// ContextStore is the interface; OpenSqliteStore() is the embedded implementation (sqlite_store.h). Search
// primitives (Lexical, VectorNeighbours) live here so retrieval (retrieval.h) works over any implementation.
//
// Thread safety: implementations are safe to call from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/memory/embedder.h"
#include "strata/memory/uri.h"
#include "strata/util/status.h"

namespace strata::memory {

enum class ContextType { kResource, kMemory, kSkill };
std::string_view ContextTypeName(ContextType type);  // "resource", "memory", "skill"
Result<ContextType> ParseContextType(std::string_view name);
// The type a node gets by default from where it lives: under a `skills` segment → skill, under
// `memories` → memory, otherwise resource.
ContextType InferContextType(const Uri& uri);

enum class Level { kAbstract = 0, kOverview = 1, kContent = 2 };
// The level a caller gave as a number: 0, 1 or 2, anything else refused in words every front end shares.
Result<Level> LevelOf(int64_t number);

struct Node {
  Uri uri = Uri::Root();
  bool is_dir = false;
  ContextType type = ContextType::kResource;
  std::string category;
  std::string abstract_text;  // L0
  std::string overview;       // L1
  std::string content;        // L2; empty in listings (see `size`)
  std::string metadata = "{}";  // A JSON object.
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  int64_t size = 0;  // Bytes of content.
};

struct Relation {
  Uri from = Uri::Root();
  Uri to = Uri::Root();
  std::string reason;
  int64_t created_ms = 0;
};

struct WriteOptions {
  std::optional<std::string> abstract_text;  // Absent: derived from the content (or kept, for a directory).
  std::optional<std::string> overview;
  std::optional<ContextType> type;           // Absent: InferContextType.
  std::optional<std::string> category;
  std::optional<std::string> metadata;       // A JSON object; replaces the old one.
  bool create_parents = true;                // Create missing parent directories (mkdir -p).
  bool overwrite = true;                     // False: fail with kAlreadyExists if the leaf exists.
  // Set: write only while the leaf's content is exactly this, checked under the write lock (kAborted naming
  // the URI otherwise: it changed or went away since it was read). A read-modify-write then loses no change
  // another writer made in between.
  std::optional<std::string> expect_content;
};

struct ListOptions {
  bool recursive = false;
  size_t limit = 0;  // 0 = no limit; otherwise the first `limit` entries in URI order.
  std::string after;  // When set, only the entries whose URI sorts after it (the next page after that entry).
};

struct GrepMatch {
  Uri uri = Uri::Root();
  int line = 0;  // 1-based.
  std::string text;
  bool superseded = false;  // The leaf is a memory a newer one replaced (metadata "valid_to").
};

// A directory whose metadata has "ordered": true holds a sequence: its children were written in an order
// that means something (the turns of a conversation, the chunks of a document), so a leaf's neighbours are
// evidence for it (Find's neighbour step). Whoever writes a sequence marks its directory (Mkdir with this
// metadata); a directory of unrelated notes is not marked.
inline constexpr std::string_view kOrderedKey = "ordered";
inline constexpr std::string_view kOrderedMetadata = R"({"ordered": true})";

struct SearchFilter {
  Uri under = Uri::Root();                 // Only nodes at or below this URI.
  std::optional<ContextType> type;
  std::optional<std::string> category;
  bool leaves_only = false;
  std::optional<Uri> parent;               // Only direct children of this directory.
  bool current_only = false;               // Skip superseded nodes (metadata has "valid_to").
  // When not empty: only nodes at or below one of these too (what a caller may read: its user scope and
  // the shared scopes). At most kMaxRoots.
  std::vector<Uri> roots;
  static constexpr size_t kMaxRoots = 8;
};

struct ScoredUri {
  Uri uri = Uri::Root();
  bool is_dir = false;
  double score = 0;           // BM25 (higher is better) or cosine similarity.
  std::string detail;         // Which terms / which layer matched.
  int level = -1;             // Lexical: the most abstract layer a term matched (name counts as L0); else -1.
};

struct Neighbour {
  Uri uri = Uri::Root();
  int offset = 0;  // -1 the leaf written just before, 1 just after, -2, 2 ...
};

class ContextStore {
 public:
  virtual ~ContextStore() = default;

  // Writes a leaf's content (creates or overwrites). Fails with kFailedPrecondition on a directory.
  virtual Status Write(const Uri& uri, std::string_view content, const WriteOptions& options = {}) = 0;
  // Writes many leaves in one transaction, embedding them in batches (import, ingestion).
  virtual Status WriteBatch(const std::vector<std::pair<Uri, std::string>>& leaves,
                            const std::vector<WriteOptions>& options) = 0;
  // Creates a directory (and its parents); sets its L0/L1 when given. Existing directories are updated.
  virtual Status Mkdir(const Uri& uri, const WriteOptions& options = {}) = 0;
  // Returns the node with all layers (content included).
  virtual Result<Node> Stat(const Uri& uri) = 0;
  // Returns the nodes at `uris` as Stat does, in the order asked (a URI asked twice comes back twice), with
  // std::nullopt where nothing is stored: one read for all (one round trip on PostgreSQL).
  virtual Result<std::vector<std::optional<Node>>> StatMany(std::span<const Uri> uris) = 0;
  // Returns one layer's text.
  virtual Result<std::string> Read(const Uri& uri, Level level) = 0;
  // Returns the children (or the whole subtree) of a directory in URI order, content left out.
  virtual Result<std::vector<Node>> List(const Uri& dir, const ListOptions& options = {}) = 0;
  // Returns nodes below `under` whose path relative to it matches `pattern` (`*`, `?`, `**`, `[abc]`).
  virtual Result<std::vector<Node>> Glob(std::string_view pattern, const Uri& under) = 0;
  // Returns the lines of leaves below `under` containing `needle` (case-insensitively for ASCII if asked).
  virtual Result<std::vector<GrepMatch>> Grep(std::string_view needle, const Uri& under, bool ignore_case,
                                              size_t limit = 1000) = 0;
  // Moves a node and its subtree; relations follow. Fails if `to` exists or lies inside `from`.
  virtual Status Move(const Uri& from, const Uri& to) = 0;
  // Removes a node; a non-empty directory needs `recursive`. Returns how many nodes were removed.
  virtual Result<int64_t> Remove(const Uri& uri, bool recursive) = 0;
  // Links two existing nodes with a reason (replacing the reason of an existing link).
  virtual Status Link(const Uri& from, const Uri& to, std::string_view reason) = 0;
  // Removes a link; kNotFound if there was none.
  virtual Status Unlink(const Uri& from, const Uri& to) = 0;
  // Returns the links from or to `uri`.
  virtual Result<std::vector<Relation>> Relations(const Uri& uri) = 0;

  // Full-text search (BM25 over name and the three layers); best first.
  virtual Result<std::vector<ScoredUri>> Lexical(std::string_view query, const SearchFilter& filter,
                                                 size_t limit) = 0;
  // Nearest nodes to `query` by cosine similarity; best first.
  virtual Result<std::vector<ScoredUri>> VectorNeighbours(const Vector& query, const SearchFilter& filter,
                                                          size_t limit) = 0;
  // The cosine of `query` with each of `uris`' stored vector, in order; 0 for a node without a vector (or gone).
  virtual Result<std::vector<float>> Similarities(const Vector& query, std::span<const Uri> uris) = 0;
  // How many nodes pass `filter`, counting no further than `cap` (a cheap "more than cap?").
  virtual Result<int64_t> Count(const SearchFilter& filter, int64_t cap) = 0;
  // For each of `leaves`, the leaves written just before and after it in the same directory, at most `span`
  // on each side, that pass `filter`: only in a directory whose metadata marks it ordered (kOrderedKey: a
  // conversation's turns, a document's chunks, a session's archives), where write order means something.
  // Nearest first on each side; an unknown URI, or one in an unordered directory, has none.
  virtual Result<std::vector<std::vector<Neighbour>>> Neighbours(std::span<const Uri> leaves, int span,
                                                                 const SearchFilter& filter) = 0;
  // Embeds `texts` with the store's embedder, through its cache.
  virtual Result<std::vector<Vector>> EmbedTexts(std::span<const std::string> texts) = 0;
  // The embedder the store's vectors are of (its own model when opened to keep it).
  virtual std::shared_ptr<Embedder> embedder() const = 0;

  // Verifies that the indexes match the content (full-text rows, vectors, parents); returns the problems.
  virtual Result<std::vector<std::string>> Check() = 0;
  // Re-embeds stale vectors and rebuilds the vector index from the database.
  virtual Status Reindex() = 0;
  // Persists the vector index.
  virtual Status Flush() = 0;
  // Counts of nodes, leaves, vectors and relations; on PostgreSQL also the generation of the snapshot this
  // instance's vector index was loaded from (-1: built from the table, or not built yet).
  struct Stats {
    int64_t nodes = 0, leaves = 0, vectors = 0, relations = 0;
    int64_t index_snapshot_generation = -1;
  };
  virtual Result<Stats> GetStats() = 0;
};

// The text a node's vector is computed from: its abstract, overview and the start of its content.
std::string EmbeddingText(const Node& node);
// The derived L0/L1 of a leaf written without them.
std::string DeriveAbstract(std::string_view content);
std::string DeriveOverview(std::string_view content);

}  // namespace strata::memory
