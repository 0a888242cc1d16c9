#include "strata/memory/sqlite_store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <shared_mutex>
#include <unordered_map>
#include <unordered_set>

#include "fts_text.h"
#include "strata/json/checked.h"
#include "strata/memory/hash.h"
#include "sqlite_db.h"
#include "store_internal.h"
#include "vector_index.h"
#include "strata/memory/presets.h"

namespace strata::memory {
namespace {

using sqlite::Db;
using sqlite::Stmt;
using sqlite::Txn;
using namespace internal;  // NOLINT: the backends' shared rules.

constexpr int kSchemaVersion = 1;

// The parent `p` of a leaf is a sequence: its metadata's "ordered" is true (not 1, not "true"; as on
// PostgreSQL).
constexpr std::string_view kOrderedSql =
    "(CASE WHEN json_valid(p.metadata) THEN json_type(p.metadata, '$.ordered') END) = 'true'";
// meta.fts_layout: the tokenizer (kFtsTokenizer) and the row layout (MakeFtsRow); a store whose meta.fts_layout
// differs has its full-text index rebuilt from the nodes on open.
constexpr std::string_view kFtsLayout = "porter unicode61 remove_diacritics 2; leaf-derived-layers-omitted";

// The same rule in SQL over nodes n, for Check().
constexpr std::string_view kFtsAbstractSql =
    "CASE WHEN n.is_dir = 0 AND (n.derived & 1) != 0 THEN '' ELSE strata_fts_text(n.abstract) END";
constexpr std::string_view kFtsOverviewSql =
    "CASE WHEN n.is_dir = 0 AND (n.derived & 2) != 0 THEN '' ELSE strata_fts_text(n.overview) END";

constexpr std::string_view kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS nodes(
  id INTEGER PRIMARY KEY,
  uri TEXT NOT NULL UNIQUE,
  parent TEXT NOT NULL,
  name TEXT NOT NULL,
  is_dir INTEGER NOT NULL,
  type TEXT NOT NULL,
  category TEXT NOT NULL DEFAULT '',
  abstract TEXT NOT NULL DEFAULT '',
  overview TEXT NOT NULL DEFAULT '',
  content TEXT NOT NULL DEFAULT '',
  metadata TEXT NOT NULL DEFAULT '{}',
  derived INTEGER NOT NULL DEFAULT 0,
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS nodes_by_parent ON nodes(parent, uri);
CREATE INDEX IF NOT EXISTS nodes_by_parent_id ON nodes(parent, id);
CREATE TABLE IF NOT EXISTS vectors(node_id INTEGER PRIMARY KEY, text_hash TEXT NOT NULL, vec BLOB NOT NULL,
  generation INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS vector_removals(node_id INTEGER NOT NULL, generation INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS vector_removals_by_generation ON vector_removals(generation);
CREATE TABLE IF NOT EXISTS relations(src TEXT NOT NULL, dst TEXT NOT NULL, reason TEXT NOT NULL,
  created_ms INTEGER NOT NULL, PRIMARY KEY(src, dst));
CREATE INDEX IF NOT EXISTS relations_by_dst ON relations(dst);
CREATE TABLE IF NOT EXISTS embedding_cache(key TEXT PRIMARY KEY, vec BLOB NOT NULL);
INSERT OR IGNORE INTO meta(key, value) VALUES ('schema_version', '1'), ('vector_generation', '0');
)sql";

std::atomic<int64_t> sqlite_index_rebuilds{0};  // SqliteIndexRebuilds (store_internal.h).

constexpr std::string_view kNodeColumns =
    "id, uri, is_dir, type, category, abstract, overview, content, metadata, created_ms, updated_ms, "
    "length(CAST(content AS BLOB)), derived";

class SqliteStore;
// The read connection lent to this thread and the store it belongs to (SqliteStore::ReadScope).
thread_local Db* t_conn = nullptr;
thread_local const SqliteStore* t_owner = nullptr;

class SqliteStore final : public ContextStore {
 public:
  SqliteStore(std::string dir, SqliteStoreOptions options) : dir_(std::move(dir)), options_(std::move(options)) {
    if (options_.clock == nullptr) options_.clock = SystemClock();
  }

  ~SqliteStore() override { (void)Flush(); }

  Status Open() {
    if (options_.read_only) return OpenReadOnly();
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    if (ec) return Status::Internal("cannot create store directory " + dir_ + ": " + ec.message());
    STRATA_RETURN_IF_ERROR(db_.Open(dir_ + "/strata.db"));
    sqlite3_busy_timeout(db_.get(), static_cast<int>(options_.busy_timeout.count()));
    STRATA_RETURN_IF_ERROR(db_.EnableWal(static_cast<int>(options_.busy_timeout.count())));
    STRATA_RETURN_IF_ERROR(db_.Exec(options_.synchronous_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL"));
    {
      Txn txn(db_);
      STRATA_RETURN_IF_ERROR(txn.Begin());
      STRATA_RETURN_IF_ERROR(db_.Exec(kSchema));
      STRATA_ASSIGN_OR_RETURN(std::string version, MetaGet("schema_version"));
      if (version != std::to_string(kSchemaVersion)) {
        return Status::FailedPrecondition("store " + dir_ + " has schema version " + version + "; this build reads " +
                                          std::to_string(kSchemaVersion));
      }
      STRATA_RETURN_IF_ERROR(EnsureFtsTokenizer());
      STRATA_RETURN_IF_ERROR(EnsureVectorLog());
      STRATA_RETURN_IF_ERROR(txn.Commit());
    }
    STRATA_RETURN_IF_ERROR(PrepareConnection(db_));
    embedder_ = options_.embedder ? options_.embedder : std::shared_ptr<Embedder>(NewLocalHashedEmbedder());
    if (embedder_->dimension() == 0) {  // Learn the dimension from one call.
      std::vector<std::string> probe = {"dimension probe"};
      STRATA_RETURN_IF_ERROR(embedder_->Embed(probe).status().WithContext("embedder"));
    }
    model_ = embedder_->model_id();
    STRATA_ASSIGN_OR_RETURN(std::string stored_model, MetaGet("embed_model"));
    STRATA_RETURN_IF_ERROR(KeepStoredModel(options_.keep_stored_model, stored_model, embedder_, model_));
    if (stored_model != model_) {
      // A new vector space: every vector is recomputed (through the cache) before the store is used.
      STRATA_RETURN_IF_ERROR(ReindexLocked(/*all=*/true));
    }
    STRATA_ASSIGN_OR_RETURN(generation_, ReadGeneration());
    RemoveAbandonedGraphs();
    return LoadIndexLocked();
  }

  // A save's own graph file that a process killed mid-save left behind (as large as the graph): gone once it
  // is an hour old, by when no save is still writing it.
  void RemoveAbandonedGraphs() {
    std::error_code ec;
    const std::string prefix = "vectors.hnsw.";
    for (std::filesystem::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (!name.starts_with(prefix) || !name.ends_with(".tmp") || name == "vectors.hnsw.meta.tmp") continue;
      std::error_code time_ec;
      auto written = std::filesystem::last_write_time(it->path(), time_ec);
      if (time_ec || std::filesystem::file_time_type::clock::now() - written < std::chrono::hours(1)) continue;
      std::filesystem::remove(it->path(), time_ec);
    }
  }

  // The saved graph: as it is when current; when older, caught up from the vector log (another process
  // wrote since it was saved); else built from the vectors.
  Status LoadIndexLocked() {
    auto loaded = VectorIndex::Load(IndexPath(), generation_, model_, IndexParams());
    if (loaded.ok()) {
      index_ = std::move(*loaded);
      index_generation_ = generation_;
      return Status::Ok();
    }
    Result<int64_t> saved = VectorIndex::SavedGeneration(IndexPath());
    if (saved.ok() && *saved < generation_ && LogCovers(*saved)) {  // Else loading it is wasted.
      auto older = VectorIndex::Load(IndexPath(), *saved, model_, IndexParams());
      if (older.ok()) {
        index_ = std::move(*older);
        index_generation_ = *saved;
        if (CatchUpIndexLocked().ok()) return Status::Ok();
      }
    }
    return RebuildIndexLocked();
  }

  // Open() for options_.read_only: reads what is there, changes nothing (sqlite_store.h).
  Status OpenReadOnly() {
    Status opened = db_.OpenReadOnly(dir_ + "/strata.db", static_cast<int>(options_.busy_timeout.count()));
    bool empty = opened.code() == StatusCode::kNotFound;
    if (empty) {
      // No store yet: an empty one in memory (shared with the read connections), so every read answers as
      // it would on a new store.
      empty_name_ = "strata-empty-store-" + std::to_string(reinterpret_cast<uintptr_t>(this));
      STRATA_RETURN_IF_ERROR(db_.OpenSharedMemory(empty_name_));
      STRATA_RETURN_IF_ERROR(db_.Exec(kSchema));
      STRATA_RETURN_IF_ERROR(EnsureFtsTokenizer());
    } else {
      STRATA_RETURN_IF_ERROR(opened);
    }
    auto upgrade = [&](std::string what) {
      return Status::FailedPrecondition("the store in the data directory " + what +
                                        "; open it once without --read-only to bring it up to date");
    };
    STRATA_ASSIGN_OR_RETURN(std::string version, MetaGet("schema_version"));
    if (version != std::to_string(kSchemaVersion)) {
      return upgrade("has schema version " + version + " and this build reads " + std::to_string(kSchemaVersion));
    }
    STRATA_ASSIGN_OR_RETURN(std::string layout, MetaGet("fts_layout"));
    if (layout != kFtsLayout) return upgrade("was indexed for full text by another version");
    STRATA_RETURN_IF_ERROR(PrepareConnection(db_));
    embedder_ = options_.embedder ? options_.embedder : std::shared_ptr<Embedder>(NewLocalHashedEmbedder());
    if (embedder_->dimension() == 0) {
      std::vector<std::string> probe = {"dimension probe"};
      STRATA_RETURN_IF_ERROR(embedder_->Embed(probe).status().WithContext("embedder"));
    }
    model_ = embedder_->model_id();
    STRATA_ASSIGN_OR_RETURN(std::string stored_model, MetaGet("embed_model"));
    if (!empty) STRATA_RETURN_IF_ERROR(KeepStoredModel(options_.keep_stored_model, stored_model, embedder_, model_));
    if (!empty && stored_model != model_) {
      return upgrade("was embedded with " + json::QuoteForError(stored_model, 80) + ", not " +
                     json::QuoteForError(model_, 80));
    }
    STRATA_ASSIGN_OR_RETURN(generation_, ReadGeneration());
    // As for writing (a store last opened for writing by a build from before the vector log has none, and
    // is rebuilt), but a graph built or caught up in memory is never saved.
    return LoadIndexLocked();
  }

  // Every change to a store opened read-only is refused, naming the mode.
  Status Writable(std::string_view what) const {
    if (!options_.read_only) return Status::Ok();
    return Status::FailedPrecondition(std::string(what) + " refused: the data is open read-only (--read-only)");
  }

  // Creates the full-text table with kFtsTokenizer, or recreates and refills it when the store was indexed
  // with another tokenizer or row layout. Runs inside the opening transaction.
  Status EnsureFtsTokenizer() {
    STRATA_ASSIGN_OR_RETURN(std::string current, MetaGet("fts_layout"));
    if (current == kFtsLayout) return Status::Ok();
    STRATA_RETURN_IF_ERROR(db_.Exec("DROP TABLE IF EXISTS fts"));
    STRATA_RETURN_IF_ERROR(db_.Exec("CREATE VIRTUAL TABLE fts USING fts5(name, abstract, overview, content, tokenize = '" +
                                    std::string(kFtsTokenizer) + "')"));
    Stmt nodes(Conn(), "SELECT id, name, is_dir, derived, abstract, overview, content FROM nodes");
    Stmt ins(Conn(), "INSERT INTO fts(rowid, name, abstract, overview, content) VALUES (?, ?, ?, ?, ?)");
    while (true) {
      STRATA_ASSIGN_OR_RETURN(bool row, nodes.Step());
      if (!row) break;
      FtsRow f = MakeFtsRow(nodes.Text(1), nodes.Int(2) != 0, nodes.Int(3), nodes.Text(4), nodes.Text(5), nodes.Text(6));
      ins.Reset().Bind(1, nodes.Int(0)).Bind(2, f.name).Bind(3, f.abstract_text).Bind(4, f.overview);
      STRATA_RETURN_IF_ERROR(ins.Bind(5, f.content).Run());
    }
    return MetaSet("fts_layout", kFtsLayout);
  }

  Status Write(const Uri& uri, std::string_view content, const WriteOptions& options) override {
    return WriteBatch({{uri, std::string(content)}}, {options});
  }

  Status WriteBatch(const std::vector<std::pair<Uri, std::string>>& leaves,
                    const std::vector<WriteOptions>& options) override {
    STRATA_RETURN_IF_ERROR(Writable("write"));
    STRATA_RETURN_IF_ERROR(ValidateLeaves(leaves, options));
    // Embed first, outside the store's lock (a remote embedder can take seconds, and readers must not wait
    // for it): the text each leaf will have. A kept hand-written layer of an existing leaf makes the text
    // differ; Apply embeds that one under the lock.
    STRATA_ASSIGN_OR_RETURN(Prepared prepared, PreEmbed(PredictedTexts(leaves, options), AncestorsOf(leaves)));
    auto lock = LockForWrite();
    Txn txn(db_);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    Plan plan;
    STRATA_RETURN_IF_ERROR(PlanLeaves(leaves, options, NowMs(), ensured_, Finder(), &plan));
    STRATA_RETURN_IF_ERROR(Apply(plan, &prepared));
    return CommitAndIndex(txn, plan);
  }

  // Vectors computed before a write takes the lock, by text.
  using Prepared = std::unordered_map<std::string, Vector>;

  // Embeds `texts` without holding the store's lock across the embedder call: cached vectors are looked
  // up under the lock, the rest are embedded after it is released.
  // `new_dirs`: directories the write creates if they are missing; a missing one reads as its name.
  Result<Prepared> PreEmbed(std::vector<std::string> texts, const std::vector<Uri>& new_dirs = {}) {
    Prepared out;
    std::vector<std::string> missing;
    std::unordered_set<std::string> seen;
    size_t want_bytes = 4 * static_cast<size_t>(embedder_->dimension());
    {
      STRATA_ASSIGN_OR_RETURN(ReadScope scope, BeginRead());
      for (const Uri& dir : new_dirs) {
        STRATA_ASSIGN_OR_RETURN(std::optional<Row> existing, FindStored(dir));
        if (existing) continue;
        Node n;
        n.uri = dir;
        n.is_dir = true;
        texts.push_back(EmbeddingText(n));
      }
      Stmt get(Conn(), "SELECT vec FROM embedding_cache WHERE key = ?");
      for (const std::string& text : texts) {
        if (!seen.insert(text).second) continue;
        get.Reset().Bind(1, HashHex(model_ + '\0' + text));
        STRATA_ASSIGN_OR_RETURN(bool row, get.Step());
        if (row && get.Blob(0).size() == want_bytes) {
          out[text] = BlobVector(get.Blob(0));
        } else {
          missing.push_back(text);
        }
      }
    }
    for (size_t start = 0; start < missing.size(); start += embedder_->max_batch()) {
      size_t n = std::min(embedder_->max_batch(), missing.size() - start);
      STRATA_ASSIGN_OR_RETURN(std::vector<Vector> fresh,
                              embedder_->Embed(std::span<const std::string>(missing).subspan(start, n)));
      if (fresh.size() != n) {
        return Status::Internal("embedder returned " + std::to_string(fresh.size()) + " vectors for " +
                                std::to_string(n) + " texts");
      }
      for (size_t j = 0; j < n; ++j) out[missing[start + j]] = std::move(fresh[j]);
    }
    return out;
  }

  Status Mkdir(const Uri& uri, const WriteOptions& o) override {
    STRATA_RETURN_IF_ERROR(Writable("mkdir"));
    STRATA_RETURN_IF_ERROR(ValidateMkdir(uri, o));
    // Embedded before the lock, as for leaves: the directory as it will read, and new parents.
    STRATA_ASSIGN_OR_RETURN(Prepared prepared, PreEmbed({MkdirText(uri, o)}, AncestorsOf({{uri, std::string()}})));
    auto lock = LockForWrite();
    Txn txn(db_);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    Plan plan;
    STRATA_RETURN_IF_ERROR(PlanMkdir(uri, o, NowMs(), ensured_, Finder(), &plan));
    STRATA_RETURN_IF_ERROR(Apply(plan, &prepared));
    return CommitAndIndex(txn, plan);
  }

  Result<Node> Stat(const Uri& uri) override {
    STRATA_ASSIGN_OR_RETURN(ReadScope scope, BeginRead());
    STRATA_ASSIGN_OR_RETURN(std::optional<Row> row, FindStored(uri));
    if (!row) return NotFoundError(uri);
    return row->node;
  }

  Result<std::vector<std::optional<Node>>> StatMany(std::span<const Uri> uris) override {
    std::vector<std::optional<Node>> out;
    out.reserve(uris.size());
    STRATA_ASSIGN_OR_RETURN(ReadScope scope, BeginRead());  // One read transaction for all of them.
    for (const Uri& uri : uris) {
      STRATA_ASSIGN_OR_RETURN(std::optional<Row> row, FindStored(uri));
      out.push_back(row ? std::optional<Node>(std::move(row->node)) : std::nullopt);
    }
    return out;
  }

  Result<std::string> Read(const Uri& uri, Level level) override {
    STRATA_ASSIGN_OR_RETURN(ReadScope scope, BeginRead());
    STRATA_ASSIGN_OR_RETURN(std::optional<Row> row, FindStored(uri));
    if (!row) return NotFoundError(uri);
    if (std::optional<std::string> layer = StoredLayer(row->node, level)) return std::move(*layer);
    // A directory without the layer reads as a listing of its children's abstracts.
    STRATA_ASSIGN_OR_RETURN(std::vector<Node> children, ListLocked(uri, {}));
    return DirectoryLayer(uri, level, children);
  }

  Result<std::vector<Node>> List(const Uri& dir, const ListOptions& options) override {
    STRATA_ASSIGN_OR_RETURN(ReadScope scope, BeginRead());
    if (!dir.is_root()) {
      STRATA_ASSIGN_OR_RETURN(std::optional<Row> row, FindStored(dir));
      if (!row) return NotFoundError(dir);
      if (!row->node.is_dir) return Status::FailedPrecondition(dir.str() + " is a file, not a directory");
    }
    return ListLocked(dir, options);
  }

  Result<std::vector<Node>> Glob(std::string_view pattern, const Uri& under) override {
    return GlobNodes(*this, pattern, under);
  }

  Result<std::vector<GrepMatch>> Grep(std::string_view needle, const Uri& under, bool ignore_case,
                                      size_t limit) override {
    if (needle.empty()) return Status::InvalidArgument("grep: empty pattern");
    STRATA_ASSIGN_OR_RETURN(ReadScope scope, BeginRead());
    auto [lo, hi] = DescendantRange(under);
    Stmt s(Conn(),
           "SELECT uri, content, json_extract(metadata, '$.valid_to') IS NOT NULL FROM nodes "
           "WHERE is_dir = 0 AND (uri = ? OR (uri >= ? AND uri < ?)) ORDER BY uri");
    s.Bind(1, under.str()).Bind(2, lo).Bind(3, hi);
    std::string wanted = ignore_case ? AsciiLower(needle) : std::string(needle);
    std::vector<GrepMatch> out;
    while (true) {
      STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(s.Text(0)));
      if (!GrepLines(uri, s.Text(1), wanted, ignore_case, s.Int(2) != 0, limit, &out)) return out;
    }
    return out;
  }

  Status Move(const Uri& from, const Uri& to) override {
    STRATA_RETURN_IF_ERROR(Writable("move"));
    STRATA_RETURN_IF_ERROR(ValidateMove(from, to));
    auto lock = LockForWrite();
    Txn txn(db_);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    STRATA_ASSIGN_OR_RETURN(std::optional<Row> source, FindStored(from));
    if (!source) return NotFoundError(from);
    STRATA_ASSIGN_OR_RETURN(std::optional<Row> target, FindStored(to));
    if (target) return Status::AlreadyExists("cannot move to " + to.str() + ": it exists");
    Plan plan;
    int64_t now = NowMs();
    auto [lo, hi] = DescendantRange(from);
    {
      Stmt extent(Conn(),
                  "SELECT max(length(uri) - length(replace(uri, '/', ''))), max(length(CAST(uri AS BLOB))) "
                  "FROM nodes WHERE uri = ?1 OR (uri >= ?2 AND uri < ?3)");
      extent.Bind(1, from.str()).Bind(2, lo).Bind(3, hi);
      STRATA_ASSIGN_OR_RETURN(bool row, extent.Step());
      if (row) STRATA_RETURN_IF_ERROR(CheckMovedBounds(from, to, extent.Int(0), extent.Int(1)));
    }
    STRATA_RETURN_IF_ERROR(PlanDirectories(to.Parent(), now, ensured_, Finder(), &plan));
    STRATA_RETURN_IF_ERROR(Apply(plan));
    const int64_t cut = CharCount(from.str()) + 1;  // substr() counts characters.
    Stmt nodes(Conn(),
               "UPDATE nodes SET uri = ?1 || substr(uri, ?2), "
               "parent = CASE WHEN uri = ?3 THEN ?4 ELSE ?1 || substr(parent, ?2) END, "
               "name = CASE WHEN uri = ?3 THEN ?5 ELSE name END, updated_ms = ?6 "
               "WHERE uri = ?3 OR (uri >= ?7 AND uri < ?8)");
    nodes.Bind(1, to.str()).Bind(2, cut).Bind(3, from.str()).Bind(4, to.Parent().str()).Bind(5, to.name());
    nodes.Bind(6, now).Bind(7, lo).Bind(8, hi);
    STRATA_RETURN_IF_ERROR(nodes.Run());
    for (const char* column : {"src", "dst"}) {
      std::string sql = std::string("UPDATE relations SET ") + column + " = ?1 || substr(" + column + ", ?2) WHERE " +
                        column + " = ?3 OR (" + column + " >= ?4 AND " + column + " < ?5)";
      Stmt rel(Conn(), sql);
      rel.Bind(1, to.str()).Bind(2, cut).Bind(3, from.str()).Bind(4, lo).Bind(5, hi);
      STRATA_RETURN_IF_ERROR(rel.Run());
    }
    // A node whose type was its place's (InferContextType) follows it: a resource moved among memories is a
    // memory now, and find's type filter finds it there. A type given when it was written stays.
    {
      std::vector<std::pair<std::string, std::string_view>> retyped;
      Stmt moved_rows(Conn(), "SELECT uri, type FROM nodes WHERE uri = ?1 OR (uri >= ?2 AND uri < ?3)");
      auto [to_lo, to_hi] = DescendantRange(to);
      moved_rows.Bind(1, to.str()).Bind(2, to_lo).Bind(3, to_hi);
      while (true) {
        STRATA_ASSIGN_OR_RETURN(bool row, moved_rows.Step());
        if (!row) break;
        std::string uri = moved_rows.Text(0), was = from.str() + uri.substr(to.str().size());
        std::string_view type = TypeOfPlace(uri);
        if (type != moved_rows.Text(1) && TypeOfPlace(was) == moved_rows.Text(1)) retyped.emplace_back(uri, type);
      }
      Stmt retype(Conn(), "UPDATE nodes SET type = ?1 WHERE uri = ?2");
      for (const auto& [uri, type] : retyped) STRATA_RETURN_IF_ERROR(retype.Reset().Bind(1, type).Bind(2, uri).Run());
    }
    // The moved node's name is indexed (and may be its whole embedding text): refresh its rows.
    Plan moved;
    STRATA_ASSIGN_OR_RETURN(std::optional<Row> row, FindStored(to));
    moved.Put(std::move(*row));
    STRATA_RETURN_IF_ERROR(Apply(moved));
    plan.Merge(std::move(moved));
    return CommitAndIndex(txn, plan);
  }

  Result<int64_t> Remove(const Uri& uri, bool recursive) override {
    STRATA_RETURN_IF_ERROR(Writable("remove"));
    if (uri.is_root()) return Status::InvalidArgument("refusing to remove strata:// (the whole store)");
    auto lock = LockForWrite();
    Txn txn(db_);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    STRATA_ASSIGN_OR_RETURN(std::optional<Row> row, FindStored(uri));
    if (!row) return NotFoundError(uri);
    auto [lo, hi] = DescendantRange(uri);
    std::vector<int64_t> ids = {row->id};
    {
      Stmt s(Conn(), "SELECT id FROM nodes WHERE uri >= ? AND uri < ?");
      s.Bind(1, lo).Bind(2, hi);
      while (true) {
        STRATA_ASSIGN_OR_RETURN(bool more, s.Step());
        if (!more) break;
        ids.push_back(s.Int(0));
      }
    }
    if (ids.size() > 1 && !recursive) {
      return Status::FailedPrecondition(uri.str() + " is a directory with " + std::to_string(ids.size() - 1) +
                                        " entries below it; remove it recursively (recursive=true; -r on the command line) to delete them all");
    }
    Stmt del_node(Conn(), "DELETE FROM nodes WHERE id = ?");
    Stmt del_fts(Conn(), "DELETE FROM fts WHERE rowid = ?");
    Stmt del_vec(Conn(), "DELETE FROM vectors WHERE node_id = ?");
    for (int64_t id : ids) {
      STRATA_RETURN_IF_ERROR(del_node.Reset().Bind(1, id).Run());
      STRATA_RETURN_IF_ERROR(del_fts.Reset().Bind(1, id).Run());
      STRATA_RETURN_IF_ERROR(del_vec.Reset().Bind(1, id).Run());
    }
    Stmt rel(Conn(), "DELETE FROM relations WHERE src = ?1 OR dst = ?1 OR (src >= ?2 AND src < ?3) OR (dst >= ?2 AND dst < ?3)");
    STRATA_RETURN_IF_ERROR(rel.Bind(1, uri.str()).Bind(2, lo).Bind(3, hi).Run());
    Plan plan;
    plan.removed = ids;
    STRATA_RETURN_IF_ERROR(BumpGeneration(&plan));
    STRATA_RETURN_IF_ERROR(CommitAndIndex(txn, plan));
    // A removed scope root is re-created with its presets when next used.
    for (auto it = ensured_.begin(); it != ensured_.end();) {
      it = uri.Contains(Uri::Parse(*it).value()) ? ensured_.erase(it) : std::next(it);
    }
    return static_cast<int64_t>(ids.size());
  }

  Status Link(const Uri& from, const Uri& to, std::string_view reason) override {
    STRATA_RETURN_IF_ERROR(Writable("link"));
    STRATA_RETURN_IF_ERROR(ValidateLink(from, to, reason));
    auto lock = LockForWrite();
    Txn txn(db_);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    for (const Uri* u : {&from, &to}) {
      STRATA_ASSIGN_OR_RETURN(std::optional<Row> row, FindStored(*u));
      if (!row) return Status::NotFound("cannot link: " + u->str() + " does not exist");
    }
    Stmt s(Conn(), "INSERT OR REPLACE INTO relations(src, dst, reason, created_ms) VALUES (?, ?, ?, ?)");
    STRATA_RETURN_IF_ERROR(s.Bind(1, from.str()).Bind(2, to.str()).Bind(3, reason).Bind(4, NowMs()).Run());
    return txn.Commit();
  }

  Status Unlink(const Uri& from, const Uri& to) override {
    STRATA_RETURN_IF_ERROR(Writable("unlink"));
    auto lock = LockForWrite();
    Stmt s(Conn(), "DELETE FROM relations WHERE src = ? AND dst = ?");
    STRATA_RETURN_IF_ERROR(s.Bind(1, from.str()).Bind(2, to.str()).Run());
    if (sqlite3_changes(db_.get()) == 0) return Status::NotFound("no link from " + from.str() + " to " + to.str());
    return Status::Ok();
  }

  Result<std::vector<Relation>> Relations(const Uri& uri) override {
    STRATA_ASSIGN_OR_RETURN(ReadScope scope, BeginRead());
    Stmt s(Conn(), "SELECT src, dst, reason, created_ms FROM relations WHERE src = ?1 OR dst = ?1 ORDER BY src, dst");
    s.Bind(1, uri.str());
    std::vector<Relation> out;
    while (true) {
      STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      STRATA_ASSIGN_OR_RETURN(Uri src, Uri::Parse(s.Text(0)));
      STRATA_ASSIGN_OR_RETURN(Uri dst, Uri::Parse(s.Text(1)));
      out.push_back({src, dst, s.Text(2), s.Int(3)});
    }
    return out;
  }

  // `t` as one FTS5 phrase (quoted, its quotes doubled).
  static std::string Phrase(std::string_view t) {
    std::string out = "\"";
    for (char c : t) out += c == '"' ? std::string("\"\"") : std::string(1, c);
    return out + '"';
  }

  Result<std::vector<ScoredUri>> Lexical(std::string_view query, const SearchFilter& filter, size_t limit) override {
    std::vector<std::string> terms = QueryTerms(query);
    std::vector<ScoredUri> out;
    if (terms.empty() || limit == 0) return out;
    STRATA_ASSIGN_OR_RETURN(ReadScope scope, BeginRead());
    // Respelling: whether a word is held is asked of the index itself (its first match: half the time of a
    // look-up in the vocabulary, which counts every match); the held lexemes near it are listed by fts_terms,
    // an fts5vocab table of each connection.
    STRATA_ASSIGN_OR_RETURN(
        std::vector<Respelling> respelt,
        Respell(terms, [&](const std::vector<RespellAsk>& asks) -> Result<std::vector<std::vector<std::string>>> {
          Stmt first(Conn(), "SELECT 1 FROM fts WHERE fts MATCH ?1 LIMIT 1");
          Stmt in_range(Conn(), "SELECT term FROM temp.fts_terms WHERE term >= ?1 AND term < ?2 AND length(term) "
                                "BETWEEN ?4 AND ?5 LIMIT ?3");
          std::vector<std::vector<std::string>> found(asks.size());
          for (size_t i = 0; i < asks.size(); ++i) {
            STRATA_ASSIGN_OR_RETURN(bool held, first.Reset().Bind(1, Phrase(asks[i].word)).Step());
            if (held) continue;
            for (const auto& [lo, hi] : asks[i].ranges) {
              in_range.Reset().Bind(1, lo).Bind(2, hi).Bind(3, static_cast<int64_t>(kRespellCandidates));
              in_range.Bind(4, static_cast<int64_t>(asks[i].shortest)).Bind(5, static_cast<int64_t>(asks[i].longest));
              while (true) {
                STRATA_ASSIGN_OR_RETURN(bool row, in_range.Step());
                if (!row) break;
                found[i].push_back(in_range.Text(0));
              }
            }
          }
          return found;
        }));
    std::string match;
    for (const std::string& t : terms) match += (match.empty() ? "" : " OR ") + Phrase(t);
    for (const Respelling& r : respelt) match += " OR " + Phrase(r.word);  // The tokenizer reads it as r.lexeme.
    // FTS5 ranks its matches itself (ORDER BY rank with the bm25 weights as the rank function) and the
    // store joins only the best of them: joining every match before sorting cost most of a search. A
    // filter beyond current_only may drop many of those best, so it joins every match; so does the second
    // try when the first left fewer than `limit` (superseded memories among the best, or few matches).
    const bool narrow = !filter.under.is_root() || filter.type || filter.category || filter.leaves_only ||
                        filter.parent || !filter.roots.empty();
    // Only the best kExplainedRows rows are explained (which terms matched in which layer): their text is
    // read by rowid afterwards, not for every row.
    auto sql = [&](bool best_only) {
      std::string from = best_only ? "(SELECT rowid, rank FROM fts WHERE fts MATCH ?1 AND rank MATCH "
                                     "'bm25(2.0, 3.0, 2.0, 1.0)' ORDER BY rank LIMIT ?3) f"
                                   : "(SELECT rowid, bm25(fts, 2.0, 3.0, 2.0, 1.0) AS rank FROM fts WHERE fts MATCH ?1) f";
      return "SELECT n.uri, n.is_dir, f.rank, n.id FROM " + from + " JOIN nodes n ON n.id = f.rowid WHERE 1" +
             FilterSql(filter) + " ORDER BY f.rank LIMIT ?2";
    };
    std::vector<int64_t> ids;
    for (bool best_only : {true, false}) {
      if (best_only && narrow) continue;
      Stmt s(Conn(), sql(best_only));
      s.Bind(1, match).Bind(2, static_cast<int64_t>(limit));
      if (best_only) s.Bind(3, static_cast<int64_t>(limit + limit / 4));
      BindFilter(s, filter);
      out.clear();
      ids.clear();
      while (true) {
        STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(s.Text(0)));
        out.push_back({uri, s.Int(1) != 0, -s.Double(2), "", -1});
        ids.push_back(s.Int(3));
      }
      if (out.size() >= limit) break;
    }
    Stmt text(Conn(), "SELECT f.name, f.abstract, f.overview, f.content, n.abstract, n.overview FROM fts f "
                      "JOIN nodes n ON n.id = f.rowid WHERE f.rowid = ?1");
    for (size_t i = 0; i < out.size() && i < kExplainedRows; ++i) {
      text.Reset().Bind(1, ids[i]);
      STRATA_ASSIGN_OR_RETURN(bool row, text.Step());
      if (!row) continue;
      std::tie(out[i].detail, out[i].level) =
          LexicalDetail(terms, {text.Text(0), text.Text(1), text.Text(2), text.Text(3)}, text.Text(4), text.Text(5),
                        respelt);
    }
    return out;
  }

  Result<std::vector<ScoredUri>> VectorNeighbours(const Vector& query, const SearchFilter& filter,
                                                  size_t limit) override {
    STRATA_RETURN_IF_ERROR(CheckQueryDimension(query, embedder_->dimension()));
    std::vector<ScoredUri> out;
    if (limit == 0) return out;
    STRATA_RETURN_IF_ERROR(EnsureIndexCurrent());
    STRATA_ASSIGN_OR_RETURN(ReadScope scope, BeginRead());
    // A scoped search (subtree, type, category, leaves, parent) may cover few nodes: count them, and scan
    // exactly when they are few. current_only alone excludes only superseded memories, so it is checked row
    // by row on the graph's answers like the rest, without counting the whole store first.
    bool scoped = !filter.under.is_root() || filter.type || filter.category || filter.leaves_only || filter.parent ||
                  !filter.roots.empty();
    if (scoped) {
      // Counted only as far as the threshold: a scope as large as the store (a user's find: its scope and the
      // shared ones) was counted whole on every search, 80 ms at 100k nodes.
      Stmt count(Conn(), "SELECT count(*) FROM (SELECT 1 FROM nodes n WHERE 1" + FilterSql(filter) + " LIMIT " +
                             std::to_string(options_.exact_search_below + 1) + ")");
      BindFilter(count, filter);
      STRATA_ASSIGN_OR_RETURN(bool row, count.Step());
      int64_t candidates = row ? count.Int(0) : 0;
      if (candidates <= options_.exact_search_below) return ExactNeighbours(query, filter, limit);
    }
    // The graph was brought up to date before this read began: another process may have written since (or
    // this one be rebuilding it). Its answers are this read's only while it reflects this read's generation;
    // else a node removed there and another written may share an id (SQLite hands the highest one out
    // again), which was answered with the removed one's similarity. Then the table is read exactly (rare:
    // a write landed in the moment between the two).
    STRATA_ASSIGN_OR_RETURN(int64_t generation, ReadGeneration());
    if (generation != index_generation_ || index_generation_ < 0) return ExactNeighbours(query, filter, limit);
    // Over-fetch from the graph and filter; widen until enough pass or the graph is exhausted.
    Stmt check(Conn(), "SELECT n.uri, n.is_dir FROM nodes n WHERE n.id = ?1" + FilterSql(filter, 3));
    for (size_t k = scoped ? limit * 4 : limit;; k *= 4) {
      STRATA_ASSIGN_OR_RETURN(auto hits, index_->Search(query.data(), k));
      out.clear();
      for (const auto& [id, similarity] : hits) {
        check.Reset().Bind(1, id);
        BindFilter(check, filter, 3);
        STRATA_ASSIGN_OR_RETURN(bool row, check.Step());
        if (!row) continue;
        STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(check.Text(0)));
        out.push_back({uri, check.Int(1) != 0, similarity, "cosine " + std::to_string(similarity).substr(0, 5)});
        if (out.size() >= limit) return out;
      }
      if (hits.size() < k || k >= index_->size()) return out;
    }
  }

  Result<std::vector<float>> Similarities(const Vector& query, std::span<const Uri> uris) override {
    STRATA_RETURN_IF_ERROR(CheckQueryDimension(query, embedder_->dimension()));
    STRATA_ASSIGN_OR_RETURN(ReadScope scope, BeginRead());
    std::vector<float> out(uris.size(), 0.0f);
    // The vectors come from the index when it reflects this read's generation (it holds every vector in
    // memory), from the table otherwise.
    STRATA_ASSIGN_OR_RETURN(int64_t generation, ReadGeneration());
    const VectorIndex* index = index_ && generation == index_generation_ ? index_.get() : nullptr;
    Stmt id_of(Conn(), "SELECT id FROM nodes WHERE uri = ?1");
    Stmt stored(Conn(), "SELECT vec FROM vectors WHERE node_id = ?1");
    const size_t want_bytes = query.size() * sizeof(float);
    Vector v(query.size());
    for (size_t i = 0; i < uris.size(); ++i) {
      id_of.Reset().Bind(1, uris[i].str());
      STRATA_ASSIGN_OR_RETURN(bool row, id_of.Step());
      if (!row) continue;
      const int64_t id = id_of.Int(0);
      if (index == nullptr || !index->Get(id, v.data())) {
        stored.Reset().Bind(1, id);
        STRATA_ASSIGN_OR_RETURN(bool has_vector, stored.Step());
        if (!has_vector) continue;
        std::string_view blob = stored.Blob(0);
        if (blob.size() != want_bytes) continue;
        std::memcpy(v.data(), blob.data(), want_bytes);
      }
      out[i] = Dot(query, v);
    }
    return out;
  }

  Result<int64_t> Count(const SearchFilter& filter, int64_t cap) override {
    STRATA_ASSIGN_OR_RETURN(ReadScope scope, BeginRead());
    Stmt s(Conn(), "SELECT count(*) FROM (SELECT 1 FROM nodes n WHERE 1" + FilterSql(filter) + " LIMIT ?1)");
    s.Bind(1, cap);
    BindFilter(s, filter);
    STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
    return row ? s.Int(0) : 0;
  }

  Result<std::vector<std::vector<Neighbour>>> Neighbours(std::span<const Uri> leaves, int span,
                                                         const SearchFilter& filter) override {
    std::vector<std::vector<Neighbour>> out(leaves.size());
    if (span <= 0) return out;
    STRATA_ASSIGN_OR_RETURN(ReadScope scope, BeginRead());
    // nodes_by_parent_id: a range of the leaf's directory in write order, from the leaf outwards — only in a
    // directory marked ordered (kOrderedKey), where write order means something.
    auto side = [&](const char* cmp, const char* order) {
      return "SELECT n.uri FROM nodes m JOIN nodes p ON p.uri = m.parent JOIN nodes n ON n.parent = m.parent AND n.id " +
             std::string(cmp) + " m.id WHERE m.uri = ?1 AND " + std::string(kOrderedSql) + " AND n.is_dir = 0" + FilterSql(filter) +
             " ORDER BY n.id " + order + " LIMIT ?2";
    };
    Stmt before(Conn(), side("<", "DESC"));
    Stmt after(Conn(), side(">", "ASC"));
    for (size_t i = 0; i < leaves.size(); ++i) {
      for (auto [s, sign] : {std::pair<Stmt*, int>{&before, -1}, {&after, 1}}) {
        s->Reset().Bind(1, leaves[i].str()).Bind(2, static_cast<int64_t>(span));
        BindFilter(*s, filter);
        for (int k = 1;; ++k) {
          STRATA_ASSIGN_OR_RETURN(bool row, s->Step());
          if (!row) break;
          STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(s->Text(0)));
          out[i].push_back({std::move(uri), sign * k});
        }
      }
    }
    return out;
  }

  Result<std::vector<Vector>> EmbedTexts(std::span<const std::string> texts) override {
    return query_cache_.Embed(*embedder_, texts);
  }
  std::shared_ptr<Embedder> embedder() const override { return embedder_; }

  Result<std::vector<std::string>> Check() override {
    auto lock = LockForWrite();
    std::vector<std::string> problems;
    auto collect = [&](std::string_view sql, std::string_view what) -> Status {
      Stmt s(Conn(), sql);
      while (true) {
        STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        problems.push_back(std::string(what) + ": " + s.Text(0));
      }
      return Status::Ok();
    };
    STRATA_RETURN_IF_ERROR(db_.ExecOne("BEGIN"));
    CommitOnExit end_read{db_};
    {
      Stmt s(Conn(), "PRAGMA quick_check");
      while (true) {
        STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        if (s.Text(0) != "ok") problems.push_back("sqlite quick_check: " + s.Text(0));
      }
    }
    STRATA_RETURN_IF_ERROR(collect(
        "SELECT n.uri FROM nodes n WHERE n.parent != 'strata://' AND NOT EXISTS "
        "(SELECT 1 FROM nodes p WHERE p.uri = n.parent AND p.is_dir = 1)", "parent missing"));
    STRATA_RETURN_IF_ERROR(collect(
        "SELECT n.uri FROM nodes n LEFT JOIN fts f ON f.rowid = n.id WHERE f.rowid IS NULL OR "
        "f.name != strata_fts_text(n.name) OR f.abstract != " + std::string(kFtsAbstractSql) +
            " OR f.overview != " + std::string(kFtsOverviewSql) + " OR f.content != strata_fts_text(n.content)",
        "full-text row missing or different"));
    STRATA_RETURN_IF_ERROR(collect(
        "SELECT CAST(f.rowid AS TEXT) FROM fts f WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = f.rowid)",
        "full-text row without node"));
    STRATA_RETURN_IF_ERROR(collect(
        "SELECT CAST(v.node_id AS TEXT) FROM vectors v WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.id = v.node_id)",
        "vector without node"));
    STRATA_RETURN_IF_ERROR(collect(
        "SELECT r.src || ' -> ' || r.dst FROM relations r WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.uri = r.src) "
        "OR NOT EXISTS (SELECT 1 FROM nodes n WHERE n.uri = r.dst)", "relation to a missing node"));
    Stmt s(Conn(), std::string("SELECT ") + std::string(kNodeColumns) +
                    ", v.text_hash, length(v.vec) FROM nodes LEFT JOIN vectors v ON v.node_id = nodes.id");
    int64_t vectors = 0;
    while (true) {
      STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      STRATA_ASSIGN_OR_RETURN(Row r, ReadRow(s));
      if (s.Text(13).empty()) {
        problems.push_back("vector missing: " + r.node.uri.str());
      } else if (s.Text(13) != HashHex(EmbeddingText(r.node))) {
        problems.push_back("vector stale: " + r.node.uri.str());
      } else if (s.Int(14) != 4 * static_cast<int64_t>(embedder_->dimension())) {
        problems.push_back("vector of the wrong size: " + r.node.uri.str());
      }
      if (!s.Text(13).empty()) ++vectors;
    }
    STRATA_ASSIGN_OR_RETURN(int64_t generation, ReadGeneration());
    if (generation == index_generation_ && static_cast<int64_t>(index_->size()) != vectors) {
      problems.push_back("vector index holds " + std::to_string(index_->size()) + " vectors, the database " +
                         std::to_string(vectors));
    }
    return problems;
  }

  Status Reindex() override {
    STRATA_RETURN_IF_ERROR(Writable("reindex"));
    auto lock = LockForWrite();
    STRATA_RETURN_IF_ERROR(ReindexLocked(/*all=*/false));
    STRATA_RETURN_IF_ERROR(RebuildIndexLocked());
    return SaveIndexLocked();
  }

  Status Flush() override {
    auto lock = LockForWrite();
    return SaveIndexLocked();
  }

  Result<Stats> GetStats() override {
    STRATA_ASSIGN_OR_RETURN(ReadScope scope, BeginRead());
    Stats stats;
    Stmt s(Conn(),
           "SELECT (SELECT count(*) FROM nodes), (SELECT count(*) FROM nodes WHERE is_dir = 0), "
           "(SELECT count(*) FROM vectors), (SELECT count(*) FROM relations)");
    STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
    if (row) stats = {s.Int(0), s.Int(1), s.Int(2), s.Int(3)};
    return stats;
  }

 private:
  int64_t NowMs() const { return options_.clock->WallMicros() / 1000; }
  std::string IndexPath() const { return dir_ + "/vectors.hnsw"; }
  VectorIndexParams IndexParams() const {
    return {.dim = embedder_->dimension(), .m = options_.hnsw_m, .ef_construction = options_.hnsw_ef_construction,
            .ef_search = options_.hnsw_ef_search, .threads = options_.index_threads};
  }

  // The SQL functions and the temporary tables every connection has: strata_fts_text, and fts_terms, the
  // full-text index's vocabulary (an fts5vocab table over `fts`, which it reads when asked; respelling).
  // fts_terms is in the connection's own temporary schema; a read-only connection's query_only is lifted to
  // create it, and restored.
  static Status PrepareConnection(Db& db) {
    bool query_only = false;
    {
      Stmt q(db, "PRAGMA query_only");
      STRATA_ASSIGN_OR_RETURN(bool row, q.Step());
      query_only = row && q.Int(0) != 0;
    }
    if (query_only) STRATA_RETURN_IF_ERROR(db.Exec("PRAGMA query_only=0"));
    STRATA_RETURN_IF_ERROR(db.Exec("CREATE VIRTUAL TABLE IF NOT EXISTS temp.fts_terms USING fts5vocab(main, 'fts', 'row')"));
    if (query_only) STRATA_RETURN_IF_ERROR(db.Exec("PRAGMA query_only=1"));
    auto fts_text = [](sqlite3_context* ctx, int, sqlite3_value** argv) {
      const auto* text = reinterpret_cast<const char*>(sqlite3_value_text(argv[0]));
      std::string out = FtsText(text == nullptr ? "" : std::string_view(text, static_cast<size_t>(sqlite3_value_bytes(argv[0]))));
      sqlite3_result_text(ctx, out.data(), static_cast<int>(out.size()), SQLITE_TRANSIENT);
    };
    int rc = sqlite3_create_function_v2(db.get(), "strata_fts_text", 1, SQLITE_UTF8 | SQLITE_DETERMINISTIC, nullptr,
                                        fts_text, nullptr, nullptr, nullptr);
    return rc == SQLITE_OK ? Status::Ok() : db.Error(rc, "register strata_fts_text");
  }

  // The connection of the calling thread: its read connection inside a ReadScope of this store, else the
  // writer's.
  Db& Conn() { return t_owner == this && t_conn != nullptr ? *t_conn : db_; }

  // A read in progress: mu_ held shared and a read connection lent to this thread.
  class ReadScope {
   public:
    ReadScope(SqliteStore* store, std::unique_ptr<Db> conn)
        : store_(store), lock_(store->mu_), conn_(std::move(conn)), prev_conn_(t_conn), prev_owner_(t_owner) {
      t_conn = conn_.get();
      t_owner = store;
    }
    ReadScope(ReadScope&& other) noexcept
        : store_(other.store_), lock_(std::move(other.lock_)), conn_(std::move(other.conn_)),
          prev_conn_(other.prev_conn_), prev_owner_(other.prev_owner_) {
      other.store_ = nullptr;
    }
    ReadScope(const ReadScope&) = delete;
    ReadScope& operator=(const ReadScope&) = delete;
    ReadScope& operator=(ReadScope&&) = delete;
    ~ReadScope() {
      if (store_ == nullptr) return;
      t_conn = prev_conn_;
      t_owner = prev_owner_;
      // A connection whose read transaction would not end is not reused.
      if (conn_->ExecOne("COMMIT").ok()) store_->ReturnReader(std::move(conn_));
    }

   private:
    SqliteStore* store_;
    std::shared_lock<std::shared_mutex> lock_;
    std::unique_ptr<Db> conn_;
    Db* prev_conn_;
    const SqliteStore* prev_owner_;
  };

  // Writers go through the turnstile: a waiting writer holds it, so readers that arrive after it wait
  // instead of keeping the shared lock busy for ever (glibc's rwlock prefers readers).
  std::unique_lock<std::shared_mutex> LockForWrite() {
    std::lock_guard turn(turnstile_);
    return std::unique_lock<std::shared_mutex>(mu_);
  }

  Result<ReadScope> BeginRead() {
    { std::lock_guard turn(turnstile_); }  // Behind any writer already waiting.
    std::unique_ptr<Db> conn;
    {
      std::lock_guard lock(readers_mu_);
      if (!readers_.empty()) {
        conn = std::move(readers_.back());
        readers_.pop_back();
      }
    }
    if (!conn) {
      conn = std::make_unique<Db>();
      Status opened = !options_.read_only     ? conn->Open(dir_ + "/strata.db")
                      : !empty_name_.empty() ? conn->OpenSharedMemory(empty_name_)
                                             : conn->OpenReadOnly(dir_ + "/strata.db");
      STRATA_RETURN_IF_ERROR(opened.WithContext("read connection"));
      sqlite3_busy_timeout(conn->get(), static_cast<int>(options_.busy_timeout.count()));
      STRATA_RETURN_IF_ERROR(PrepareConnection(*conn));
      STRATA_RETURN_IF_ERROR(conn->Exec("PRAGMA query_only=1"));
      // Pages come from the shared file mapping instead of being copied into each connection's cache.
      STRATA_RETURN_IF_ERROR(conn->Exec("PRAGMA mmap_size=1073741824"));
    }
    // One read transaction for the scope: its statements share one snapshot and take the WAL read lock
    // (file-lock system calls) once, not once per statement (a search runs hundreds).
    STRATA_RETURN_IF_ERROR(conn->ExecOne("BEGIN"));
    return ReadScope(this, std::move(conn));
  }

  void ReturnReader(std::unique_ptr<Db> conn) {
    std::lock_guard lock(readers_mu_);
    if (readers_.size() < kMaxIdleReaders) readers_.push_back(std::move(conn));
  }
  static constexpr size_t kMaxIdleReaders = 8;

  // Rebuilds the vector index first when another process changed the vectors (generation moved).
  Status EnsureIndexCurrent() {
    {
      STRATA_ASSIGN_OR_RETURN(ReadScope scope, BeginRead());
      STRATA_ASSIGN_OR_RETURN(int64_t generation, ReadGeneration());
      if (generation == index_generation_) return Status::Ok();
    }
    auto lock = LockForWrite();
    STRATA_ASSIGN_OR_RETURN(int64_t generation, ReadGeneration());
    if (generation == index_generation_) return Status::Ok();
    STRATA_ASSIGN_OR_RETURN(std::string stored_model, MetaGet("embed_model"));
    STRATA_RETURN_IF_ERROR(CheckEmbedModel(stored_model, model_));
    return CatchUpOrRebuildLocked();
  }

  // Another process changed the vectors: its changes are applied from the vector log when this index is of
  // a generation the log reaches back to (a few milliseconds), else the index is built again from every
  // vector (seconds at tens of thousands; every read of this process waits meanwhile).
  Status CatchUpOrRebuildLocked() {
    if (index_ && index_generation_ >= 0 && CatchUpIndexLocked().ok()) return Status::Ok();
    return RebuildIndexLocked();
  }

  // Applies the vector removals and rows of the generations after index_generation_, in one read.
  Status CatchUpIndexLocked() {
    STRATA_RETURN_IF_ERROR(db_.ExecOne("BEGIN"));
    CommitOnExit end_read{db_};
    STRATA_ASSIGN_OR_RETURN(int64_t generation, ReadGeneration());
    if (generation < index_generation_) return Status::FailedPrecondition("the vector index is ahead of the database");
    // The log must reach back to this index and up to the database: a build from before the log, writing to
    // the store, bumps the generation without logging what it changed (BumpGeneration moves the log's start
    // past such writes once it sees them).
    if (!LogCovers(index_generation_, generation)) {
      return Status::FailedPrecondition("the vector log does not cover generations " +
                                        std::to_string(index_generation_) + " to " + std::to_string(generation));
    }
    int64_t applied = 0;
    Stmt removed(Conn(), "SELECT node_id FROM vector_removals WHERE generation > ?");
    removed.Bind(1, index_generation_);
    while (true) {
      STRATA_ASSIGN_OR_RETURN(bool row, removed.Step());
      if (!row) break;
      index_->Remove(removed.Int(0));
      ++applied;
    }
    // Removals first: an id removed and then given to a new node is in the vectors again, with a later
    // generation.
    Stmt written(Conn(), "SELECT node_id, vec FROM vectors WHERE generation > ?");
    written.Bind(1, index_generation_);
    const size_t want_bytes = 4 * static_cast<size_t>(embedder_->dimension());
    VectorBatch batch(index_.get());
    while (true) {
      STRATA_ASSIGN_OR_RETURN(bool row, written.Step());
      if (!row) break;
      std::string_view blob = written.Blob(1);
      if (blob.size() != want_bytes) continue;  // Another model's: re-embedded by Reindex.
      STRATA_RETURN_IF_ERROR(batch.AddBytes(written.Int(0), blob));
      ++applied;
    }
    STRATA_RETURN_IF_ERROR(batch.Flush());
    index_generation_ = generation;
    generation_ = generation;
    if (applied > 0) index_dirty_ = true;  // Else the saved graph, if it is this one, is current as it is.
    return Status::Ok();
  }

  // Whether the vector log holds every change after generation `from` up to `to` (the database's current
  // one when -1): it reaches back to `from`, and its head is `to` (a build without the log, writing since,
  // left the head behind).
  bool LogCovers(int64_t from, int64_t to = -1) {
    Result<std::string> since = MetaGet("vector_log_since");
    Result<std::string> head = MetaGet("vector_log_head");
    if (to < 0) {
      Result<int64_t> current = ReadGeneration();
      if (!current.ok()) return false;
      to = *current;
    }
    return since.ok() && head.ok() && !since->empty() && !head->empty() && std::stoll(*since) <= from &&
           std::stoll(*head) == to;
  }

  // The vector log (vectors.generation, vector_removals) lets a process apply another's changes instead of
  // rebuilding its index. A store made before it gets the column, and its log starts at the generation it
  // is at: an index saved before then is built again. Inside Open's transaction.
  Status EnsureVectorLog() {
    bool has_generation = false;
    {
      Stmt columns(Conn(), "SELECT 1 FROM pragma_table_info('vectors') WHERE name = 'generation'");
      STRATA_ASSIGN_OR_RETURN(has_generation, columns.Step());
    }
    if (!has_generation) {
      STRATA_RETURN_IF_ERROR(db_.Exec("ALTER TABLE vectors ADD COLUMN generation INTEGER NOT NULL DEFAULT 0"));
    }
    STRATA_ASSIGN_OR_RETURN(std::string head, MetaGet("vector_log_head"));
    if (!has_generation || head.empty()) {
      // The log starts here: at 0 for a new store, at the generation a store made before it is at.
      STRATA_ASSIGN_OR_RETURN(int64_t generation, ReadGeneration());
      STRATA_RETURN_IF_ERROR(MetaSet("vector_log_since", std::to_string(generation)));
      STRATA_RETURN_IF_ERROR(MetaSet("vector_log_head", std::to_string(generation)));
    }
    return db_.Exec("CREATE INDEX IF NOT EXISTS vectors_by_generation ON vectors(generation)");
  }

  Result<std::string> MetaGet(std::string_view key) {
    Stmt s(Conn(), "SELECT value FROM meta WHERE key = ?");
    s.Bind(1, key);
    STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
    return row ? s.Text(0) : std::string();
  }

  Status MetaSet(std::string_view key, std::string_view value) {
    Stmt s(Conn(), "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)");
    return s.Bind(1, key).Bind(2, value).Run();
  }

  Result<int64_t> ReadGeneration() {
    STRATA_ASSIGN_OR_RETURN(std::string value, MetaGet("vector_generation"));
    return static_cast<int64_t>(std::stoll(value.empty() ? "0" : value));
  }

  Result<Row> ReadRow(Stmt& s) {
    Row row;
    row.id = s.Int(0);
    STRATA_ASSIGN_OR_RETURN(row.node.uri, Uri::Parse(s.Text(1)));
    row.node.is_dir = s.Int(2) != 0;
    STRATA_ASSIGN_OR_RETURN(row.node.type, ParseContextType(s.Text(3)));
    row.node.category = s.Text(4);
    row.node.abstract_text = s.Text(5);
    row.node.overview = s.Text(6);
    row.node.content = s.Text(7);
    row.node.metadata = s.Text(8);
    row.node.created_ms = s.Int(9);
    row.node.updated_ms = s.Int(10);
    row.node.size = s.Int(11);
    row.derived = s.Int(12);
    return row;
  }

  Result<std::optional<Row>> FindStored(const Uri& uri) {
    Stmt s(Conn(), std::string("SELECT ") + std::string(kNodeColumns) + " FROM nodes WHERE uri = ?");
    s.Bind(1, uri.str());
    STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
    if (!row) return std::optional<Row>();
    STRATA_ASSIGN_OR_RETURN(Row r, ReadRow(s));
    return std::optional<Row>(std::move(r));
  }

  FindFn Finder() {
    return [this](const Uri& uri) { return FindStored(uri); };
  }

  // Writes the plan's rows with their full-text rows and vectors (embedding what changed, in batches, via
  // the cache). Must run inside a transaction.
  Status Apply(Plan& plan, const Prepared* prepared = nullptr) {
    if (plan.rows.empty()) return Status::Ok();
    std::vector<std::string> texts(plan.rows.size()), hashes(plan.rows.size());
    std::vector<size_t> to_embed;
    Stmt old_hash(Conn(), "SELECT text_hash FROM vectors WHERE node_id = ?");
    for (size_t i = 0; i < plan.rows.size(); ++i) {
      texts[i] = EmbeddingText(plan.rows[i].node);
      hashes[i] = HashHex(texts[i]);
      if (plan.rows[i].id != 0) {
        old_hash.Reset().Bind(1, plan.rows[i].id);
        STRATA_ASSIGN_OR_RETURN(bool row, old_hash.Step());
        if (row && old_hash.Text(0) == hashes[i]) continue;
      }
      to_embed.push_back(i);
    }
    std::vector<std::string> embed_texts;
    std::vector<size_t> embed_rows;
    for (size_t i : to_embed) {
      embed_texts.push_back(texts[i]);
      embed_rows.push_back(i);
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<Vector> vectors, CachedEmbed(embed_texts, prepared));
    Stmt insert(Conn(),
                "INSERT INTO nodes(uri, parent, name, is_dir, type, category, abstract, overview, content, metadata, "
                "derived, created_ms, updated_ms) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
    Stmt update(Conn(),
                "UPDATE nodes SET uri = ?1, parent = ?2, name = ?3, is_dir = ?4, type = ?5, category = ?6, abstract = ?7, "
                "overview = ?8, content = ?9, metadata = ?10, derived = ?11, created_ms = ?12, updated_ms = ?13 "
                "WHERE id = ?14");
    Stmt del_fts(Conn(), "DELETE FROM fts WHERE rowid = ?");
    Stmt ins_fts(Conn(), "INSERT INTO fts(rowid, name, abstract, overview, content) VALUES (?, ?, ?, ?, ?)");
    for (Row& row : plan.rows) {
      const Node& n = row.node;
      Stmt& s = row.id == 0 ? insert : update;
      s.Reset().Bind(1, n.uri.str()).Bind(2, n.uri.Parent().str()).Bind(3, n.uri.name()).Bind(4, int64_t{n.is_dir});
      s.Bind(5, ContextTypeName(n.type)).Bind(6, n.category).Bind(7, n.abstract_text).Bind(8, n.overview);
      s.Bind(9, n.content).Bind(10, n.metadata).Bind(11, row.derived).Bind(12, n.created_ms).Bind(13, n.updated_ms);
      if (row.id != 0) s.Bind(14, row.id);
      STRATA_RETURN_IF_ERROR(s.Run().WithContext(n.uri.str()));
      if (row.id == 0) row.id = sqlite3_last_insert_rowid(db_.get());
      STRATA_RETURN_IF_ERROR(del_fts.Reset().Bind(1, row.id).Run());
      FtsRow f = MakeFtsRow(n.uri.name(), n.is_dir, row.derived, n.abstract_text, n.overview, n.content);
      ins_fts.Reset().Bind(1, row.id).Bind(2, f.name).Bind(3, f.abstract_text).Bind(4, f.overview);
      STRATA_RETURN_IF_ERROR(ins_fts.Bind(5, f.content).Run());
    }
    if (!embed_rows.empty()) {
      Stmt vec(Conn(), "INSERT OR REPLACE INTO vectors(node_id, text_hash, vec) VALUES (?, ?, ?)");
      for (size_t j = 0; j < embed_rows.size(); ++j) {
        const Row& row = plan.rows[embed_rows[j]];
        std::string blob = VectorBlob(vectors[j]);
        STRATA_RETURN_IF_ERROR(vec.Reset().Bind(1, row.id).Bind(2, hashes[embed_rows[j]]).BindBlob(3, blob.data(), blob.size()).Run());
        plan.upserts.emplace_back(row.id, std::move(vectors[j]));
      }
      STRATA_RETURN_IF_ERROR(BumpGeneration(&plan));
    }
    return Status::Ok();
  }

  Status BumpGeneration(Plan* plan) {
    STRATA_ASSIGN_OR_RETURN(std::string stored_model, MetaGet("embed_model"));
    STRATA_RETURN_IF_ERROR(CheckEmbedModel(stored_model, model_));  // Vectors of one embedder only.
    // A build from before the vector log wrote since the last logged generation: its changes are in no log,
    // so the log starts again after them (an index older than that is rebuilt, never caught up past them).
    STRATA_ASSIGN_OR_RETURN(int64_t before, ReadGeneration());
    STRATA_ASSIGN_OR_RETURN(std::string head, MetaGet("vector_log_head"));
    if (head != std::to_string(before)) STRATA_RETURN_IF_ERROR(MetaSet("vector_log_since", std::to_string(before)));
    STRATA_RETURN_IF_ERROR(db_.Exec(
        "UPDATE meta SET value = CAST(CAST(value AS INTEGER) + 1 AS TEXT) WHERE key = 'vector_generation'"));
    STRATA_ASSIGN_OR_RETURN(plan->generation, ReadGeneration());
    STRATA_RETURN_IF_ERROR(MetaSet("vector_log_head", std::to_string(plan->generation)));
    // The vector log: what this generation wrote and removed, for the other processes' indexes.
    Stmt stamp(Conn(), "UPDATE vectors SET generation = ?1 WHERE node_id = ?2");
    for (const auto& [id, vector] : plan->upserts) {
      STRATA_RETURN_IF_ERROR(stamp.Reset().Bind(1, plan->generation).Bind(2, id).Run());
    }
    Stmt gone(Conn(), "INSERT INTO vector_removals(node_id, generation) VALUES (?1, ?2)");
    for (int64_t id : plan->removed) STRATA_RETURN_IF_ERROR(gone.Reset().Bind(1, id).Bind(2, plan->generation).Run());
    return Status::Ok();
  }

  // Embeds `texts` through the persistent cache (hash of model id and text); must run inside a transaction.
  Result<std::vector<Vector>> CachedEmbed(const std::vector<std::string>& texts, const Prepared* prepared = nullptr) {
    std::vector<Vector> out(texts.size());
    std::vector<std::string> keys(texts.size());
    std::vector<std::string> missing;
    std::vector<size_t> where;
    Stmt get(Conn(), "SELECT vec FROM embedding_cache WHERE key = ?");
    size_t want_bytes = 4 * static_cast<size_t>(embedder_->dimension());
    Stmt put(Conn(), "INSERT OR REPLACE INTO embedding_cache(key, vec) VALUES (?, ?)");
    for (size_t i = 0; i < texts.size(); ++i) {
      keys[i] = HashHex(model_ + '\0' + texts[i]);
      if (prepared != nullptr) {
        if (auto it = prepared->find(texts[i]); it != prepared->end() && it->second.size() * 4 == want_bytes) {
          out[i] = it->second;
          std::string blob = VectorBlob(out[i]);
          STRATA_RETURN_IF_ERROR(put.Reset().Bind(1, keys[i]).BindBlob(2, blob.data(), blob.size()).Run());
          continue;
        }
      }
      get.Reset().Bind(1, keys[i]);
      STRATA_ASSIGN_OR_RETURN(bool row, get.Step());
      if (row && get.Blob(0).size() == want_bytes) {
        out[i] = BlobVector(get.Blob(0));
      } else {
        missing.push_back(texts[i]);
        where.push_back(i);
      }
    }
    for (size_t start = 0; start < missing.size(); start += embedder_->max_batch()) {
      size_t n = std::min(embedder_->max_batch(), missing.size() - start);
      STRATA_ASSIGN_OR_RETURN(std::vector<Vector> fresh,
                              embedder_->Embed(std::span<const std::string>(missing).subspan(start, n)));
      if (fresh.size() != n) return Status::Internal("embedder returned " + std::to_string(fresh.size()) + " vectors for " + std::to_string(n) + " texts");
      for (size_t j = 0; j < n; ++j) {
        if (fresh[j].size() * 4 != want_bytes) {
          return Status::InvalidArgument("embedder " + model_ + " returned a vector of " + std::to_string(fresh[j].size()) +
                                         " dimensions, expected " + std::to_string(embedder_->dimension()));
        }
        size_t i = where[start + j];
        std::string blob = VectorBlob(fresh[j]);
        STRATA_RETURN_IF_ERROR(put.Reset().Bind(1, keys[i]).BindBlob(2, blob.data(), blob.size()).Run());
        out[i] = std::move(fresh[j]);
      }
    }
    return out;
  }

  // Commits, then brings the in-memory vector index and the preset bookkeeping up to date.
  Status CommitAndIndex(Txn& txn, Plan& plan) {
    STRATA_RETURN_IF_ERROR(txn.Commit());
    for (std::string& root : plan.ensured) ensured_.insert(std::move(root));
    if (plan.generation < 0) return Status::Ok();
    generation_ = plan.generation;
    if (index_generation_ != plan.generation - 1) {
      // Another process wrote in between: caught up (this write included) before the next vector search,
      // or rebuilt when the log does not reach.
      if (!index_) index_generation_ = -1;
      return Status::Ok();
    }
    for (int64_t id : plan.removed) index_->Remove(id);
    STRATA_RETURN_IF_ERROR(IndexUpserts(*index_, plan.upserts));
    index_generation_ = plan.generation;
    index_dirty_ = true;
    return Status::Ok();
  }

  // Ends the transaction begun on `db` when it goes out of scope (one that only read, or wrote no rows).
  struct CommitOnExit {
    Db& db;
    ~CommitOnExit() { (void)db.ExecOne("COMMIT"); }
  };

  Status RebuildIndexLocked() {
    sqlite_index_rebuilds.fetch_add(1, std::memory_order_relaxed);
    auto index = std::make_unique<VectorIndex>(IndexParams());
    STRATA_RETURN_IF_ERROR(db_.ExecOne("BEGIN"));
    CommitOnExit end_read{db_};
    STRATA_ASSIGN_OR_RETURN(int64_t generation, ReadGeneration());
    Stmt s(Conn(), "SELECT node_id, vec FROM vectors");
    size_t want_bytes = 4 * static_cast<size_t>(embedder_->dimension());
    VectorBatch batch(index.get());
    while (true) {
      STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      std::string_view blob = s.Blob(1);
      if (blob.size() != want_bytes) continue;  // Stale vectors from another model are re-embedded by Reindex.
      STRATA_RETURN_IF_ERROR(batch.AddBytes(s.Int(0), blob));
    }
    STRATA_RETURN_IF_ERROR(batch.Flush());
    index_ = std::move(index);
    index_generation_ = generation;
    generation_ = generation;
    index_dirty_ = true;
    return Status::Ok();
  }

  Status SaveIndexLocked() {
    if (options_.read_only || !index_dirty_ || !index_ || index_generation_ < 0) return Status::Ok();
    // Only the database's current generation is saved, and inside a write transaction: another process's
    // newer graph, saved after its own write, was replaced by this older one at shutdown (and the next start
    // rebuilt), and two saves at once could mix their files.
    // The graph is written first, to a file of this process's own, with no transaction held (it may be
    // hundreds of megabytes; the other processes' writes do not wait for it); only the check and the renames
    // hold the write lock.
    // The name is this save's alone: two stores of one process, or two processes of one pid (containers
    // sharing the volume), may save at once.
    static std::atomic<uint64_t> saves{0};
    const std::string graph = IndexPath() + "." + std::to_string(::getpid()) + "-" +
                              std::to_string(saves.fetch_add(1)) + "-" + std::to_string(std::random_device{}()) + ".tmp";
    struct RemoveOnExit {
      const std::string& path;
      ~RemoveOnExit() {
        std::error_code ignored;
        std::filesystem::remove(path, ignored);
      }
    } remove_graph{graph};
    STRATA_RETURN_IF_ERROR(index_->SaveGraph(graph));
    std::error_code ec;
    STRATA_RETURN_IF_ERROR(db_.ExecOne("BEGIN IMMEDIATE"));
    CommitOnExit end_write{db_};
    STRATA_ASSIGN_OR_RETURN(int64_t generation, ReadGeneration());
    if (generation != index_generation_) return Status::Ok();
    std::filesystem::remove(IndexPath() + ".meta", ec);
    std::filesystem::rename(graph, IndexPath(), ec);
    if (ec) return Status::Internal("vector index save: rename " + graph + ": " + ec.message());
    STRATA_RETURN_IF_ERROR(index_->SaveMeta(IndexPath(), index_generation_, model_));
    index_dirty_ = false;
    return Status::Ok();
  }

  // Recomputes vectors whose text changed (or all, for a new model) in one transaction.
  Status ReindexLocked(bool all) {
    Txn txn(db_);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    if (all) {
      // Another instance (process) opened with this model while we waited for the lock: it re-embedded all.
      STRATA_ASSIGN_OR_RETURN(std::string stored_model, MetaGet("embed_model"));
      if (stored_model == model_) all = false;
    }
    Plan plan;
    {
      Stmt s(Conn(), std::string("SELECT ") + std::string(kNodeColumns) +
                      ", v.text_hash FROM nodes LEFT JOIN vectors v ON v.node_id = nodes.id");
      while (true) {
        STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
        if (!row) break;
        STRATA_ASSIGN_OR_RETURN(Row r, ReadRow(s));
        if (all || s.Text(13) != HashHex(EmbeddingText(r.node))) plan.Put(std::move(r));
      }
    }
    if (all) STRATA_RETURN_IF_ERROR(db_.Exec("DELETE FROM vectors"));
    if (!all) {  // Recomputing stale vectors is for the store's own model: a stale instance must not relabel it.
      STRATA_ASSIGN_OR_RETURN(std::string stored_model, MetaGet("embed_model"));
      STRATA_RETURN_IF_ERROR(CheckEmbedModel(stored_model, model_));
      if (plan.rows.empty()) return Status::Ok();  // Every vector current: nothing to write or announce.
    }
    STRATA_RETURN_IF_ERROR(MetaSet("embed_model", model_));  // First: what Apply writes is checked against it.
    STRATA_RETURN_IF_ERROR(Apply(plan));
    STRATA_RETURN_IF_ERROR(BumpGeneration(&plan));
    STRATA_RETURN_IF_ERROR(txn.Commit());
    generation_ = plan.generation;
    index_generation_ = -1;
    return Status::Ok();
  }

  Result<std::vector<Node>> ListLocked(const Uri& dir, const ListOptions& options) {
    std::string sql = std::string("SELECT ") + std::string(kNodeColumns) + " FROM nodes WHERE ";
    sql += options.recursive ? "uri >= ?2 AND uri < ?3" : "parent = ?1";
    if (!options.after.empty()) sql += " AND uri > ?4";
    sql += " ORDER BY uri";
    if (options.limit != 0) sql += " LIMIT " + std::to_string(options.limit);
    Stmt s(Conn(), sql);
    auto [lo, hi] = DescendantRange(dir);
    if (options.recursive) {
      s.Bind(2, lo).Bind(3, hi);
    } else {
      s.Bind(1, dir.str());
    }
    if (!options.after.empty()) s.Bind(4, options.after);
    std::vector<Node> out;
    while (true) {
      STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      STRATA_ASSIGN_OR_RETURN(Row r, ReadRow(s));
      r.node.content.clear();
      out.push_back(std::move(r.node));
    }
    return out;
  }

  // The WHERE clauses of a filter over `nodes n`, with parameters numbered from `first`.
  static std::string FilterSql(const SearchFilter& f, int first = 10) {
    std::string sql;
    auto p = [&](int k) { return "?" + std::to_string(first + k); };
    if (!f.under.is_root()) sql += " AND (n.uri = " + p(0) + " OR (n.uri >= " + p(1) + " AND n.uri < " + p(2) + "))";
    if (f.type) sql += " AND n.type = " + p(3);
    if (f.category) sql += " AND n.category = " + p(4);
    if (f.leaves_only) sql += " AND n.is_dir = 0";
    if (f.parent) sql += " AND n.parent = " + p(5);
    if (f.current_only) sql += " AND json_extract(n.metadata, '$.valid_to') IS NULL";
    if (!f.roots.empty() && std::none_of(f.roots.begin(), f.roots.end(), [](const Uri& r) { return r.is_root(); })) {
      sql += " AND (";
      for (size_t i = 0; i < f.roots.size(); ++i) {
        int k = 6 + 3 * static_cast<int>(i);
        sql += (i > 0 ? " OR " : "") + std::string("n.uri = ") + p(k) + " OR (n.uri >= " + p(k + 1) + " AND n.uri < " +
               p(k + 2) + ")";
      }
      sql += ")";
    }
    return sql;
  }

  static void BindFilter(Stmt& s, const SearchFilter& f, int first = 10) {
    if (!f.under.is_root()) {
      auto [lo, hi] = DescendantRange(f.under);
      s.Bind(first, f.under.str()).Bind(first + 1, lo).Bind(first + 2, hi);
    }
    if (f.type) s.Bind(first + 3, ContextTypeName(*f.type));
    if (f.category) s.Bind(first + 4, *f.category);
    if (f.parent) s.Bind(first + 5, f.parent->str());
    if (!f.roots.empty() && std::none_of(f.roots.begin(), f.roots.end(), [](const Uri& r) { return r.is_root(); })) {
      for (size_t i = 0; i < f.roots.size(); ++i) {
        int k = first + 6 + 3 * static_cast<int>(i);
        auto [lo, hi] = DescendantRange(f.roots[i]);
        s.Bind(k, f.roots[i].str()).Bind(k + 1, lo).Bind(k + 2, hi);
      }
    }
  }

  Result<std::vector<ScoredUri>> ExactNeighbours(const Vector& query, const SearchFilter& filter, size_t limit) {
    Stmt s(Conn(), "SELECT n.uri, n.is_dir, v.vec FROM vectors v JOIN nodes n ON n.id = v.node_id WHERE 1" + FilterSql(filter));
    BindFilter(s, filter);
    std::vector<std::tuple<float, std::string, bool>> scored;
    size_t want_bytes = query.size() * 4;
    Vector v(query.size());
    while (true) {
      STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      std::string_view blob = s.Blob(2);
      if (blob.size() != want_bytes) continue;
      std::memcpy(v.data(), blob.data(), want_bytes);
      scored.emplace_back(Dot(query, v), s.Text(0), s.Int(1) != 0);
    }
    return TopByCosine(std::move(scored), limit);
  }

  std::string dir_;
  SqliteStoreOptions options_;
  std::shared_ptr<Embedder> embedder_;
  std::string model_;
  // Writers hold mu_ exclusively and use db_; readers hold it shared and each uses a connection of its
  // own from readers_ (SQLite in WAL mode lets them read in parallel with each other).
  std::shared_mutex mu_;
  std::mutex turnstile_;  // See LockForWrite().
  Db db_;                                   // The writer's connection. Guarded by mu_ (exclusive).
  std::mutex readers_mu_;
  std::vector<std::unique_ptr<Db>> readers_;  // Idle read connections. Guarded by readers_mu_.
  std::unique_ptr<VectorIndex> index_;      // Replaced under mu_ exclusive; searched under mu_ shared.
  int64_t generation_ = 0;                  // The database's vector generation as last seen. Guarded by mu_.
  int64_t index_generation_ = -1;           // The generation index_ reflects; -1: stale. Guarded by mu_.
  bool index_dirty_ = false;                // index_ changed since it was saved. Guarded by mu_.
  std::string empty_name_;  // Read-only with no database on disk: the shared in-memory one standing for it.
  std::set<std::string> ensured_;           // Scope roots whose presets are known complete. Guarded by mu_.
  QueryVectorCache query_cache_;
};

}  // namespace

int64_t internal::SqliteIndexRebuilds() { return sqlite_index_rebuilds.load(std::memory_order_relaxed); }

Result<std::unique_ptr<ContextStore>> OpenSqliteStore(const std::string& dir, SqliteStoreOptions options) {
  auto store = std::make_unique<SqliteStore>(dir, std::move(options));
  STRATA_RETURN_IF_ERROR(store->Open().WithContext("context store " + dir));
  return std::unique_ptr<ContextStore>(std::move(store));
}

}  // namespace strata::memory
