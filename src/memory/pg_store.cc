#include "strata/memory/pg_store.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <system_error>
#include <thread>
#include <set>
#include <shared_mutex>
#include <tuple>
#include <unordered_map>

#include "fts_text.h"
#include "pg.h"
#include "store_internal.h"
#include "strata/memory/hash.h"
#include "vector_index.h"

namespace strata::memory {
namespace {

using namespace internal;  // NOLINT: the backends' shared rules.

// Version i+1 of the schema is kMigrations[i]; never edit a step once released, add one. URIs are compared
// bytewise (COLLATE "C"), as the subtree ranges (DescendantRange) and the URI order of listings need.
constexpr std::string_view kMigrations[] = {
    R"sql(
CREATE TABLE store_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO store_meta(key, value) VALUES ('vector_generation', '0'), ('embed_model', '');
CREATE TABLE store_nodes(
  id BIGSERIAL PRIMARY KEY,
  uri TEXT COLLATE "C" NOT NULL UNIQUE,
  parent TEXT COLLATE "C" NOT NULL,
  name TEXT NOT NULL,
  is_dir BOOLEAN NOT NULL,
  type TEXT NOT NULL,
  category TEXT NOT NULL DEFAULT '',
  abstract TEXT NOT NULL DEFAULT '',
  overview TEXT NOT NULL DEFAULT '',
  content TEXT NOT NULL DEFAULT '',
  metadata TEXT NOT NULL DEFAULT '{}',
  superseded BOOLEAN NOT NULL DEFAULT FALSE,
  derived INTEGER NOT NULL DEFAULT 0,
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL,
  fts TSVECTOR NOT NULL);
CREATE INDEX store_nodes_by_parent ON store_nodes(parent, uri);
CREATE INDEX store_nodes_fts ON store_nodes USING GIN(fts);
CREATE TABLE store_vectors(
  node_id BIGINT PRIMARY KEY REFERENCES store_nodes(id) ON DELETE CASCADE,
  text_hash TEXT NOT NULL,
  vec BYTEA NOT NULL,
  generation BIGINT NOT NULL);
CREATE INDEX store_vectors_by_generation ON store_vectors(generation);
CREATE TABLE store_vector_removals(node_id BIGINT NOT NULL, generation BIGINT NOT NULL);
CREATE INDEX store_vector_removals_by_generation ON store_vector_removals(generation);
CREATE TABLE store_relations(
  src TEXT COLLATE "C" NOT NULL,
  dst TEXT COLLATE "C" NOT NULL,
  reason TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  PRIMARY KEY(src, dst));
CREATE INDEX store_relations_by_dst ON store_relations(dst);
CREATE TABLE store_embedding_cache(key TEXT PRIMARY KEY, vec BYTEA NOT NULL);
)sql",
    // 2: a directory's leaves in write order (Neighbours).
    "CREATE INDEX store_nodes_by_parent_id ON store_nodes(parent, id);",
    // 3: snapshots of the vector index, so that a new instance starts warm (docs/formats/postgres.md).
    R"sql(
CREATE TABLE store_index_snapshots(
  id BIGSERIAL PRIMARY KEY,
  generation BIGINT NOT NULL,
  model TEXT NOT NULL,
  dim INTEGER NOT NULL,
  live BIGINT NOT NULL,
  bytes BIGINT NOT NULL,
  created_ms BIGINT NOT NULL);
CREATE TABLE store_index_snapshot_chunks(
  snapshot_id BIGINT NOT NULL REFERENCES store_index_snapshots(id) ON DELETE CASCADE,
  seq INTEGER NOT NULL,
  data BYTEA NOT NULL,
  PRIMARY KEY(snapshot_id, seq));
)sql",
    // 4: the full-text vocabulary, for respelling (docs/formats/postgres.md), filled from what is indexed.
    R"sql(
CREATE TABLE store_terms(term TEXT COLLATE "C" PRIMARY KEY);
INSERT INTO store_terms(term) SELECT word FROM ts_stat('SELECT fts FROM store_nodes') ON CONFLICT DO NOTHING;
)sql",
    // 5: how many rows hold each lexeme, so a lexeme leaves the vocabulary with the last row holding it.
    R"sql(
ALTER TABLE store_terms ADD COLUMN docs BIGINT NOT NULL DEFAULT 0;
DELETE FROM store_terms;
INSERT INTO store_terms(term, docs) SELECT word, ndoc FROM ts_stat('SELECT fts FROM store_nodes');
)sql",
};

// store_terms counts the rows holding each lexeme (docs), kept in the write's transaction under kWriteLock
// (writers of one store take turns). Rows about to be rewritten or removed are uncounted first
// (kUncountTermsSql, which also names the lexemes that reached zero); the rows written are counted after
// (kCountTermsSql); then the lexemes still at zero leave (kDropUncountedTermsSql). Each takes the ids in $1.
constexpr std::string_view kCountTermsSql =
    "INSERT INTO store_terms(term, docs) SELECT t, count(*) FROM store_nodes, unnest(tsvector_to_array(fts)) AS t "
    "WHERE id = ANY($1::bigint[]) GROUP BY t ON CONFLICT (term) DO UPDATE SET docs = store_terms.docs + EXCLUDED.docs";
// One row: the lexemes now at zero, as an array value (NULL for none).
constexpr std::string_view kUncountTermsSql =
    "WITH g AS (SELECT t, count(*) AS n FROM store_nodes, unnest(tsvector_to_array(fts)) AS t WHERE id = "
    "ANY($1::bigint[]) GROUP BY t), u AS (UPDATE store_terms s SET docs = s.docs - g.n FROM g WHERE s.term = g.t "
    "RETURNING s.term, s.docs) SELECT array_agg(term) FROM u WHERE docs <= 0";
constexpr std::string_view kDropUncountedTermsSql =
    "DELETE FROM store_terms WHERE term = ANY($1::text[]) AND docs <= 0";

// A snapshot's graph file is stored in chunks of this many bytes (a bytea value holds at most 1 GB, and
// smaller rows stream without holding the whole graph twice in memory).
constexpr size_t kSnapshotChunkBytes = size_t{16} << 20;
// One instance at a time saves a snapshot of a schema's index.
constexpr std::string_view kSnapshotLock =
    "SELECT pg_try_advisory_xact_lock(hashtext('strata index snapshot'), hashtext(current_schema()))";

// A file in a directory of its own in the temporary directory (mkdtemp: made by this call alone, with an
// unguessable name, readable by this user only), removed with it when this goes out of scope. A name made of
// the pid was the same in two containers sharing /tmp (both pid 1): one's snapshot was written into the
// other's file, and every vector was readable by any local user.
struct ScratchFile {
  ScratchFile() {
    std::error_code ec;
    std::string templ = (std::filesystem::temp_directory_path(ec) / "strata-index-XXXXXX").string();
    if (ec) {
      error = Status::Unavailable("no temporary directory for the vector index's scratch file: " + ec.message());
    } else if (::mkdtemp(templ.data()) != nullptr) {
      dir = templ;
      path = dir + "/index.hnsw";
    } else {
      error = Status::Unavailable("cannot make a scratch directory for the vector index in " + templ + ": " +
                                  std::strerror(errno));
    }
  }
  ~ScratchFile() {
    std::error_code ec;
    if (!dir.empty()) std::filesystem::remove_all(dir, ec);
  }
  ScratchFile(const ScratchFile&) = delete;  // Owns the file.
  ScratchFile& operator=(const ScratchFile&) = delete;
  std::string dir, path;
  Status error;  // Not ok: there is no file (path is empty).
};

// The NOTIFY channel that carries each new vector generation, as "<schema> <generation>" (stores of several
// accounts, in schemas of their own, share the channel).
constexpr std::string_view kChannel = "strata_store_vectors";
// Store writes of one schema take this advisory lock.
constexpr std::string_view kWriteLock = "pg_advisory_xact_lock(hashtext('strata store'), hashtext(current_schema()))";

constexpr std::string_view kNodeColumns =
    "id, uri, is_dir, type, category, abstract, overview, content, metadata, created_ms, updated_ms, "
    "octet_length(content), derived";
// The same without the content (listings): the size is still reported, the text stays in the database.
constexpr std::string_view kListColumns =
    "id, uri, is_dir, type, category, abstract, overview, '', metadata, created_ms, updated_ms, "
    "octet_length(content), derived";

// The tsvector of a full-text row ($1..$4: FtsParams of the row's name, abstract, overview, content): words
// as the embedded store's tokenizer makes them (LexemeText), read by the `simple` configuration, so that
// both backends index and find the same words — identifiers, paths and addresses split at their
// punctuation, stop words kept.
constexpr std::string_view kFtsSql =
    "setweight(to_tsvector('simple', $1), 'B') || setweight(to_tsvector('simple', $2), 'A') || "
    "setweight(to_tsvector('simple', $3), 'B') || setweight(to_tsvector('simple', $4), 'D')";

// kFtsSql's four parameters for `f`. PostgreSQL refuses a tsvector over 1 MB, so the content is indexed up
// to its first 256 KiB and each other layer up to 64 KiB.
std::vector<pg::Param> FtsParams(const FtsRow& f) {
  return {LexemeText(f.name, 65536), LexemeText(f.abstract_text, 65536), LexemeText(f.overview, 65536),
          LexemeText(f.content, 262144)};
}
// ts_rank's weights {D, C, B, A}: abstract 3, name and overview 2, content 1 — the embedded store's bm25 weights.
constexpr std::string_view kRankWeights = "'{0.333, 0, 0.667, 1.0}'";

// URIs a call asks about, for one `= ANY($1::text[])` statement: each distinct one once, and where each was
// asked (a URI asked twice gets the answer row at both places).
struct AskedUris {
  std::vector<std::string> distinct;
  std::unordered_map<std::string, std::vector<size_t>> at;
};

AskedUris Asked(std::span<const Uri> uris) {
  AskedUris asked;
  for (size_t i = 0; i < uris.size(); ++i) {
    std::vector<size_t>& at = asked.at[uris[i].str()];
    if (at.empty()) asked.distinct.push_back(uris[i].str());
    at.push_back(i);
  }
  return asked;
}

// A PostgreSQL array literal of `items` ({"a","b"}), each quoted.
std::string ArrayLiteral(const std::vector<std::string>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) out += ',';
    out += '"';
    for (char c : items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

std::string IdArray(const std::vector<int64_t>& ids) {
  std::string out = "{";
  for (size_t i = 0; i < ids.size(); ++i) out += (i > 0 ? "," : "") + std::to_string(ids[i]);
  return out + "}";
}

class PgStore final : public ContextStore {
 public:
  PgStore(std::string url, PgStoreOptions options) : url_(std::move(url)), options_(std::move(options)) {
    if (options_.clock == nullptr) options_.clock = SystemClock();
  }
  ~PgStore() override {
    // As the SQLite store saves its index when closed: this instance's writes are saved for the next
    // instance (a bulk load by `strata memory add` builds the index first: Flush).
    if (listener_ != nullptr) (void)Flush();
    {
      std::lock_guard lock(snapshot_mu_);
      snapshot_stop_ = true;
    }
    snapshot_cv_.notify_all();
    if (snapshot_thread_.joinable()) snapshot_thread_.join();
  }
  PgStore(const PgStore&) = delete;  // Owns connections and a thread.
  PgStore& operator=(const PgStore&) = delete;

  Status Open() {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<pg::Conn> conn, pg::Conn::Connect(url_));
    STRATA_RETURN_IF_ERROR(pg::Migrate(*conn, "store", kMigrations));
    STRATA_ASSIGN_OR_RETURN(pg::Rows schema, conn->Exec("SELECT current_schema()"));
    STRATA_ASSIGN_OR_RETURN(schema_, schema.Text(0, 0));
    Return(std::move(conn));
    embedder_ = options_.embedder ? options_.embedder : std::shared_ptr<Embedder>(NewLocalHashedEmbedder());
    if (embedder_->dimension() == 0) {  // Learn the dimension from one call.
      std::vector<std::string> probe = {"dimension probe"};
      STRATA_RETURN_IF_ERROR(embedder_->Embed(probe).status().WithContext("embedder"));
    }
    model_ = embedder_->model_id();
    STRATA_ASSIGN_OR_RETURN(listener_, pg::Conn::Connect(url_));
    STRATA_RETURN_IF_ERROR(listener_->Listen(kChannel));
    listener_connects_ = listener_->connects();
    std::string stored_model;
    {
      STRATA_ASSIGN_OR_RETURN(Lease c, Take());
      STRATA_ASSIGN_OR_RETURN(stored_model, MetaGet(*c, "embed_model"));
      STRATA_RETURN_IF_ERROR(KeepStoredModel(options_.keep_stored_model, stored_model, embedder_, model_));
    }
    if (stored_model != model_) {
      // A new vector space: every vector is recomputed (through the cache) before the store is used.
      std::lock_guard write(write_mu_);
      STRATA_RETURN_IF_ERROR(ReindexLocked(/*all=*/true));
    }
    return RefillFullTextIfStale();
  }

  Status Write(const Uri& uri, std::string_view content, const WriteOptions& options) override {
    return WriteBatch({{uri, std::string(content)}}, {options});
  }

  Status WriteBatch(const std::vector<std::pair<Uri, std::string>>& leaves,
                    const std::vector<WriteOptions>& options) override {
    STRATA_RETURN_IF_ERROR(ValidateLeaves(leaves, options));
    STRATA_ASSIGN_OR_RETURN(Prepared prepared, PreEmbed(PredictedTexts(leaves, options), AncestorsOf(leaves)));
    Status written = WriteTransaction([&](pg::Conn& c, Plan* plan) -> Status {
      STRATA_RETURN_IF_ERROR(PlanLeaves(leaves, options, NowMs(), ensured_, Finder(c), plan));
      return Apply(c, *plan, &prepared);
    });
    if (written.ok()) AnalyzeAfterBulkWrite(leaves.size());
    return written;
  }

  Status Mkdir(const Uri& uri, const WriteOptions& o) override {
    STRATA_RETURN_IF_ERROR(ValidateMkdir(uri, o));
    STRATA_ASSIGN_OR_RETURN(Prepared prepared, PreEmbed({MkdirText(uri, o)}, AncestorsOf({{uri, std::string()}})));
    return WriteTransaction([&](pg::Conn& c, Plan* plan) -> Status {
      STRATA_RETURN_IF_ERROR(PlanMkdir(uri, o, NowMs(), ensured_, Finder(c), plan));
      return Apply(c, *plan, &prepared);
    });
  }

  Result<Node> Stat(const Uri& uri) override {
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    STRATA_ASSIGN_OR_RETURN(std::optional<Row> row, FindStored(*c, uri));
    if (!row) return NotFoundError(uri);
    return row->node;
  }

  Result<std::vector<std::optional<Node>>> StatMany(std::span<const Uri> uris) override {
    std::vector<std::optional<Node>> out(uris.size());
    if (uris.empty()) return out;
    AskedUris asked = Asked(uris);
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, c->Exec("SELECT " + std::string(kNodeColumns) +
                                                    " FROM store_nodes WHERE uri = ANY($1::text[])",
                                                {ArrayLiteral(asked.distinct)}));
    for (int i = 0; i < r.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(Row row, ReadRow(r, i));
      auto at = asked.at.find(row.node.uri.str());
      if (at == asked.at.end()) return Status::DataLoss("store_nodes returned " + row.node.uri.str() + ", not asked for");
      for (size_t k : at->second) out[k] = row.node;
    }
    return out;
  }

  Result<std::string> Read(const Uri& uri, Level level) override {
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    STRATA_ASSIGN_OR_RETURN(std::optional<Row> row, FindStored(*c, uri));
    if (!row) return NotFoundError(uri);
    if (std::optional<std::string> layer = StoredLayer(row->node, level)) return std::move(*layer);
    STRATA_ASSIGN_OR_RETURN(std::vector<Node> children, ListWith(*c, uri, {}));
    return DirectoryLayer(uri, level, children);
  }

  Result<std::vector<Node>> List(const Uri& dir, const ListOptions& options) override {
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    if (!dir.is_root()) {
      STRATA_ASSIGN_OR_RETURN(std::optional<Row> row, FindStored(*c, dir));
      if (!row) return NotFoundError(dir);
      if (!row->node.is_dir) return Status::FailedPrecondition(dir.str() + " is a file, not a directory");
    }
    return ListWith(*c, dir, options);
  }

  Result<std::vector<Node>> Glob(std::string_view pattern, const Uri& under) override {
    return GlobNodes(*this, pattern, under);
  }

  Result<std::vector<GrepMatch>> Grep(std::string_view needle, const Uri& under, bool ignore_case,
                                      size_t limit) override {
    if (needle.empty()) return Status::InvalidArgument("grep: empty pattern");
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    auto [lo, hi] = DescendantRange(under);
    std::string wanted = ignore_case ? AsciiLower(needle) : std::string(needle);
    // Only leaves that contain the needle come back (strpos / a case-insensitive LIKE on ASCII).
    std::string pattern;
    for (char ch : needle) {
      if (ch == '%' || ch == '_' || ch == '\\') pattern += '\\';
      pattern += ch;
    }
    STRATA_ASSIGN_OR_RETURN(
        pg::Rows r,
        c->Exec(std::string("SELECT uri, content, superseded FROM store_nodes WHERE NOT is_dir AND "
                            "(uri = $1 OR (uri >= $2 AND uri < $3)) AND ") +
                    (ignore_case ? "content ILIKE '%' || $4 || '%'" : "strpos(content, $4) > 0") + " ORDER BY uri",
                {under.str(), lo, hi, ignore_case ? pattern : std::string(needle)}));
    std::vector<GrepMatch> out;
    for (int i = 0; i < r.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(std::string uri_text, r.Text(i, 0));
      STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(uri_text));
      STRATA_ASSIGN_OR_RETURN(std::string content, r.Text(i, 1));
      STRATA_ASSIGN_OR_RETURN(std::string superseded, r.Text(i, 2));
      if (!GrepLines(uri, content, wanted, ignore_case, superseded == "t", limit, &out)) break;
    }
    return out;
  }

  Status Move(const Uri& from, const Uri& to) override {
    STRATA_RETURN_IF_ERROR(ValidateMove(from, to));
    return WriteTransaction([&](pg::Conn& c, Plan* plan) -> Status {
      STRATA_ASSIGN_OR_RETURN(std::optional<Row> source, FindStored(c, from));
      if (!source) return NotFoundError(from);
      STRATA_ASSIGN_OR_RETURN(std::optional<Row> target, FindStored(c, to));
      if (target) return Status::AlreadyExists("cannot move to " + to.str() + ": it exists");
      int64_t now = NowMs();
      auto [lo, hi] = DescendantRange(from);
      STRATA_ASSIGN_OR_RETURN(pg::Rows extent,
                              c.Exec("SELECT max(length(uri) - length(replace(uri, '/', ''))), max(octet_length(uri)) "
                                     "FROM store_nodes WHERE uri = $1 OR (uri >= $2 AND uri < $3)",
                                     {from.str(), lo, hi}));
      if (extent.size() > 0) {
        STRATA_ASSIGN_OR_RETURN(int64_t deepest, extent.Int(0, 0));
        STRATA_ASSIGN_OR_RETURN(int64_t longest, extent.Int(0, 1));
        STRATA_RETURN_IF_ERROR(CheckMovedBounds(from, to, deepest, longest));
      }
      STRATA_RETURN_IF_ERROR(PlanDirectories(to.Parent(), now, ensured_, Finder(c), plan));
      STRATA_RETURN_IF_ERROR(Apply(c, *plan));
      const int64_t cut = CharCount(from.str()) + 1;  // substr() counts characters.
      STRATA_RETURN_IF_ERROR(
          c.Exec("UPDATE store_nodes SET uri = $1 || substr(uri, $2::int), "
                 "parent = CASE WHEN uri = $3 THEN $4 ELSE $1 || substr(parent, $2::int) END, "
                 "name = CASE WHEN uri = $3 THEN $5 ELSE name END, updated_ms = $6 "
                 "WHERE uri = $3 OR (uri >= $7 AND uri < $8)",
                 {to.str(), cut, from.str(), to.Parent().str(), to.name(), now, lo, hi})
              .status());
      for (const char* column : {"src", "dst"}) {
        std::string sql = std::string("UPDATE store_relations SET ") + column + " = $1 || substr(" + column +
                          ", $2::int) WHERE " + column + " = $3 OR (" + column + " >= $4 AND " + column + " < $5)";
        STRATA_RETURN_IF_ERROR(c.Exec(sql, {to.str(), cut, from.str(), lo, hi}).status());
      }
      // A node whose type was its place's (InferContextType) follows it: a resource moved among memories is a
      // memory now, and find's type filter finds it there. A type given when it was written stays.
      auto [to_lo, to_hi] = DescendantRange(to);
      STRATA_ASSIGN_OR_RETURN(pg::Rows moved_rows, c.Exec("SELECT uri, type FROM store_nodes WHERE uri = $1 OR "
                                                          "(uri >= $2 AND uri < $3)",
                                                          {to.str(), to_lo, to_hi}));
      for (int i = 0; i < moved_rows.size(); ++i) {
        STRATA_ASSIGN_OR_RETURN(std::string uri, moved_rows.Text(i, 0));
        STRATA_ASSIGN_OR_RETURN(std::string type, moved_rows.Text(i, 1));
        std::string_view placed = TypeOfPlace(uri);
        if (placed == type || TypeOfPlace(from.str() + uri.substr(to.str().size())) != type) continue;
        STRATA_RETURN_IF_ERROR(
            c.Exec("UPDATE store_nodes SET type = $1 WHERE uri = $2", {std::string(placed), uri}).status());
      }
      // The moved node's name is indexed (and may be its whole embedding text): refresh its rows.
      Plan moved;
      STRATA_ASSIGN_OR_RETURN(std::optional<Row> row, FindStored(c, to));
      moved.Put(std::move(*row));
      STRATA_RETURN_IF_ERROR(Apply(c, moved));
      plan->Merge(std::move(moved));
      return Status::Ok();
    });
  }

  Result<int64_t> Remove(const Uri& uri, bool recursive) override {
    if (uri.is_root()) return Status::InvalidArgument("refusing to remove strata:// (the whole store)");
    int64_t removed = 0;
    Status done = WriteTransaction([&](pg::Conn& c, Plan* plan) -> Status {
      STRATA_ASSIGN_OR_RETURN(std::optional<Row> row, FindStored(c, uri));
      if (!row) return NotFoundError(uri);
      auto [lo, hi] = DescendantRange(uri);
      STRATA_ASSIGN_OR_RETURN(pg::Rows below, c.Exec("SELECT id FROM store_nodes WHERE uri >= $1 AND uri < $2", {lo, hi}));
      std::vector<int64_t> ids = {row->id};
      for (int i = 0; i < below.size(); ++i) {
        STRATA_ASSIGN_OR_RETURN(int64_t id, below.Int(i, 0));
        ids.push_back(id);
      }
      if (ids.size() > 1 && !recursive) {
        return Status::FailedPrecondition(uri.str() + " is a directory with " + std::to_string(ids.size() - 1) +
                                          " entries below it; remove it recursively (recursive=true; -r on the command line) to delete them all");
      }
      STRATA_ASSIGN_OR_RETURN(std::optional<std::string> uncounted, UncountTerms(c, ids));
      STRATA_RETURN_IF_ERROR(c.Exec("DELETE FROM store_nodes WHERE id = ANY($1::bigint[])", {IdArray(ids)}).status());
      if (uncounted) STRATA_RETURN_IF_ERROR(c.Exec(std::string(kDropUncountedTermsSql), {*uncounted}).status());
      STRATA_RETURN_IF_ERROR(c.Exec("DELETE FROM store_relations WHERE src = $1 OR dst = $1 OR (src >= $2 AND src < $3) "
                                    "OR (dst >= $2 AND dst < $3)",
                                    {uri.str(), lo, hi})
                                 .status());
      STRATA_RETURN_IF_ERROR(BumpGeneration(c, plan));
      STRATA_RETURN_IF_ERROR(c.Exec("INSERT INTO store_vector_removals(node_id, generation) "
                                    "SELECT unnest($1::bigint[]), $2",
                                    {IdArray(ids), plan->generation})
                                 .status());
      plan->removed = ids;
      removed = static_cast<int64_t>(ids.size());
      return Status::Ok();
    });
    if (!done.ok()) return done;
    // A removed scope root is re-created with its presets when next used.
    std::lock_guard write(write_mu_);
    for (auto it = ensured_.begin(); it != ensured_.end();) {
      it = uri.Contains(Uri::Parse(*it).value()) ? ensured_.erase(it) : std::next(it);
    }
    return removed;
  }

  Status Link(const Uri& from, const Uri& to, std::string_view reason) override {
    STRATA_RETURN_IF_ERROR(ValidateLink(from, to, reason));
    return WriteTransaction([&](pg::Conn& c, Plan*) -> Status {
      for (const Uri* u : {&from, &to}) {
        STRATA_ASSIGN_OR_RETURN(std::optional<Row> row, FindStored(c, *u));
        if (!row) return Status::NotFound("cannot link: " + u->str() + " does not exist");
      }
      return c.Exec("INSERT INTO store_relations(src, dst, reason, created_ms) VALUES ($1, $2, $3, $4) "
                    "ON CONFLICT (src, dst) DO UPDATE SET reason = EXCLUDED.reason, created_ms = EXCLUDED.created_ms",
                    {from.str(), to.str(), reason, NowMs()})
          .status();
    });
  }

  Status Unlink(const Uri& from, const Uri& to) override {
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    STRATA_ASSIGN_OR_RETURN(pg::Rows r,
                            c->Exec("DELETE FROM store_relations WHERE src = $1 AND dst = $2", {from.str(), to.str()}));
    if (r.affected() == 0) return Status::NotFound("no link from " + from.str() + " to " + to.str());
    return Status::Ok();
  }

  Result<std::vector<Relation>> Relations(const Uri& uri) override {
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, c->Exec("SELECT src, dst, reason, created_ms FROM store_relations "
                                                "WHERE src = $1 OR dst = $1 ORDER BY src, dst",
                                                {uri.str()}));
    std::vector<Relation> out;
    for (int i = 0; i < r.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(std::string src_text, r.Text(i, 0));
      STRATA_ASSIGN_OR_RETURN(std::string dst_text, r.Text(i, 1));
      STRATA_ASSIGN_OR_RETURN(Uri src, Uri::Parse(src_text));
      STRATA_ASSIGN_OR_RETURN(Uri dst, Uri::Parse(dst_text));
      STRATA_ASSIGN_OR_RETURN(std::string reason, r.Text(i, 2));
      STRATA_ASSIGN_OR_RETURN(int64_t created, r.Int(i, 3));
      out.push_back({src, dst, reason, created});
    }
    return out;
  }

  Result<std::vector<ScoredUri>> Lexical(std::string_view query, const SearchFilter& filter, size_t limit) override {
    std::vector<std::string> terms = QueryTerms(query);
    std::vector<ScoredUri> out;
    if (terms.empty() || limit == 0) return out;
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    // Respelling in one statement: for each lexeme the vocabulary does not hold, the held lexemes of its ranges.
    STRATA_ASSIGN_OR_RETURN(
        std::vector<Respelling> respelt,
        Respell(terms, [&](const std::vector<RespellAsk>& asks) -> Result<std::vector<std::vector<std::string>>> {
          std::vector<std::string> index, lexemes, lows, highs, shortest, longest;
          for (size_t i = 0; i < asks.size(); ++i) {
            for (const auto& [lo, hi] : asks[i].ranges) {
              index.push_back(std::to_string(i));
              lexemes.push_back(asks[i].lexeme);
              lows.push_back(lo);
              highs.push_back(hi);
              shortest.push_back(std::to_string(asks[i].shortest));
              longest.push_back(std::to_string(asks[i].longest));
            }
          }
          STRATA_ASSIGN_OR_RETURN(
              pg::Rows r,
              c->Exec("SELECT q.i, s.term FROM unnest($1::int[], $2::text[], $3::text[], $4::text[], $5::int[], "
                      "$6::int[]) AS q(i, lexeme, lo, hi, shortest, longest) CROSS JOIN LATERAL (SELECT term FROM "
                      "store_terms WHERE term >= q.lo AND term < q.hi AND octet_length(term) BETWEEN q.shortest AND "
                      "q.longest ORDER BY term LIMIT $7) s WHERE NOT EXISTS (SELECT 1 FROM store_terms WHERE term = "
                      "q.lexeme)",
                      {ArrayLiteral(index), ArrayLiteral(lexemes), ArrayLiteral(lows), ArrayLiteral(highs),
                       ArrayLiteral(shortest), ArrayLiteral(longest), static_cast<int64_t>(kRespellCandidates)}));
          std::vector<std::vector<std::string>> found(asks.size());
          for (int row = 0; row < r.size(); ++row) {
            STRATA_ASSIGN_OR_RETURN(int64_t i, r.Int(row, 0));
            if (i < 0 || static_cast<size_t>(i) >= asks.size()) return Status::DataLoss("respelling: a row for no word");
            STRATA_ASSIGN_OR_RETURN(std::string term, r.Text(row, 1));
            found[static_cast<size_t>(i)].push_back(std::move(term));
          }
          return found;
        }));
    // Any term, each a phrase query (a CJK bigram is two words) weighted by its inverse document frequency
    // as BM25 weighs it: ts_rank alone has no IDF, and a common word would count as much as a rare one.
    // The node count is the planner's estimate once the table is large (exact below 10,000 rows).
    std::vector<pg::Param> params;
    std::string values;
    auto add_query = [&](std::string lexemes) {
      params.emplace_back(std::move(lexemes));
      values += (values.empty() ? "(" : ", (") + std::string("phraseto_tsquery('simple', $") +
                std::to_string(params.size()) + "))";
    };
    for (const std::string& t : terms) add_query(LexemeText(t));
    for (const Respelling& r : respelt) add_query(r.lexeme);
    std::string where = FilterSql(filter, &params);
    params.emplace_back(static_cast<int64_t>(limit));
    std::string sql =
        "WITH q(query) AS (VALUES " + values + "), "
        "total AS (SELECT CASE WHEN c.reltuples >= 10000 THEN c.reltuples::float8 "
        "ELSE greatest((SELECT count(*) FROM store_nodes), 1)::float8 END AS n "
        "FROM pg_class c WHERE c.oid = 'store_nodes'::regclass), "
        "w AS (SELECT q.query, ln(1 + (t.n - d.df + 0.5) / (d.df + 0.5)) AS idf FROM q, total t, "
        "LATERAL (SELECT count(*)::float8 AS df FROM store_nodes WHERE fts @@ q.query) d) "
        "SELECT n.uri, n.is_dir, sum(w.idf * ts_rank(" + std::string(kRankWeights) + ", n.fts, w.query, 1)) AS rank, "
        "n.name, n.derived, n.abstract, n.overview, n.content FROM store_nodes n JOIN w ON n.fts @@ w.query "
        "WHERE TRUE" + where + " GROUP BY n.id ORDER BY rank DESC, n.uri LIMIT $" + std::to_string(params.size());
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, c->Exec(sql, params));
    for (int i = 0; i < r.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(std::string uri_text, r.Text(i, 0));
      STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(uri_text));
      STRATA_ASSIGN_OR_RETURN(std::string is_dir, r.Text(i, 1));
      STRATA_ASSIGN_OR_RETURN(double rank, r.Double(i, 2));
      STRATA_ASSIGN_OR_RETURN(std::string name, r.Text(i, 3));
      STRATA_ASSIGN_OR_RETURN(int64_t derived, r.Int(i, 4));
      STRATA_ASSIGN_OR_RETURN(std::string abstract_text, r.Text(i, 5));
      STRATA_ASSIGN_OR_RETURN(std::string overview, r.Text(i, 6));
      STRATA_ASSIGN_OR_RETURN(std::string content, r.Text(i, 7));
      out.push_back({uri, is_dir == "t", rank, "", -1});
      if (out.size() > kExplainedRows) continue;  // Only the best rows are explained (as on SQLite).
      std::tie(out.back().detail, out.back().level) = LexicalDetail(
          terms, MakeFtsRow(name, is_dir == "t", derived, abstract_text, overview, content), abstract_text, overview,
          respelt);
    }
    return out;
  }

  Result<std::vector<ScoredUri>> VectorNeighbours(const Vector& query, const SearchFilter& filter,
                                                  size_t limit) override {
    STRATA_RETURN_IF_ERROR(CheckQueryDimension(query, embedder_->dimension()));
    std::vector<ScoredUri> out;
    if (limit == 0) return out;
    // Notifications arrive asynchronously: a write another instance committed a moment ago may not be
    // announced yet. The statement that checks the graph's hits also reads the generation; when it is ahead
    // of the index, the index catches up and the search runs again, so a search never misses a committed
    // write (read-after-write across instances).
    bool force = false;
    for (int pass = 0; pass < 2; ++pass) {
      STRATA_RETURN_IF_ERROR(EnsureIndexCurrent(force));
      STRATA_ASSIGN_OR_RETURN(Lease c, Take());
      bool scoped = !filter.under.is_root() || filter.type || filter.category || filter.leaves_only || filter.parent ||
                    !filter.roots.empty();
      if (scoped) {
        std::vector<pg::Param> params;
        std::string where = FilterSql(filter, &params);
        // Counted only as far as the threshold: a scope as large as the store (a user's find: its scope and
        // the shared ones) was counted whole on every search.
        STRATA_ASSIGN_OR_RETURN(pg::Rows count, c->Exec("SELECT count(*) FROM (SELECT 1 FROM store_nodes n WHERE TRUE" +
                                                            where + " LIMIT " +
                                                            std::to_string(options_.exact_search_below + 1) + ") s",
                                                        params));
        STRATA_ASSIGN_OR_RETURN(int64_t candidates, count.Int(0, 0));
        if (candidates <= options_.exact_search_below) {
          bool stale = false;
          STRATA_ASSIGN_OR_RETURN(out, ExactNeighbours(*c, query, filter, limit, pass == 0 ? &stale : nullptr));
          if (!stale) return out;
          force = true;
          continue;
        }
      }
      bool stale = false;
      STRATA_ASSIGN_OR_RETURN(out, GraphNeighbours(*c, query, filter, limit, scoped, pass == 0 ? &stale : nullptr));
      if (!stale) return out;
      force = true;
    }
    return out;
  }

  Result<std::vector<float>> Similarities(const Vector& query, std::span<const Uri> uris) override {
    STRATA_RETURN_IF_ERROR(CheckQueryDimension(query, embedder_->dimension()));
    std::vector<float> out(uris.size(), 0.0f);
    if (uris.empty()) return out;
    AskedUris asked = Asked(uris);
    // The vectors come from the in-process index (current as for a search); only ids travel.
    bool force = false;
    for (int pass = 0; pass < 2; ++pass) {
      STRATA_RETURN_IF_ERROR(EnsureIndexCurrent(force));
      STRATA_ASSIGN_OR_RETURN(Lease c, Take());
      STRATA_ASSIGN_OR_RETURN(pg::Rows r, c->Exec("SELECT g.value::bigint, n.id, n.uri FROM store_meta g LEFT JOIN "
                                                  "store_nodes n ON n.uri = ANY($1::text[]) WHERE g.key = "
                                                  "'vector_generation'",
                                                  {ArrayLiteral(asked.distinct)}));
      if (r.size() == 0) return Status::DataLoss("store_meta has no vector_generation");
      STRATA_ASSIGN_OR_RETURN(int64_t generation, r.Int(0, 0));
      auto index_lock = ReadIndex();
      if (pass == 0 && generation > index_generation_) {
        force = true;
        continue;
      }
      Vector v(query.size());
      for (int i = 0; i < r.size(); ++i) {
        if (r.IsNull(i, 1)) continue;
        STRATA_ASSIGN_OR_RETURN(int64_t id, r.Int(i, 1));
        STRATA_ASSIGN_OR_RETURN(std::string uri, r.Text(i, 2));
        if (!index_->Get(id, v.data())) continue;
        float similarity = Dot(query, v);
        for (size_t k : asked.at[uri]) out[k] = similarity;
      }
      return out;
    }
    return out;
  }

  Result<int64_t> Count(const SearchFilter& filter, int64_t cap) override {
    std::vector<pg::Param> params = {cap};
    std::string where = FilterSql(filter, &params);
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    STRATA_ASSIGN_OR_RETURN(pg::Rows r,
                            c->Exec("SELECT count(*) FROM (SELECT 1 FROM store_nodes n WHERE TRUE" + where + " LIMIT $1) c",
                                    params));
    return r.Int(0, 0);
  }

  Result<std::vector<std::vector<Neighbour>>> Neighbours(std::span<const Uri> leaves, int span,
                                                         const SearchFilter& filter) override {
    std::vector<std::vector<Neighbour>> out(leaves.size());
    if (span <= 0 || leaves.empty()) return out;
    AskedUris asked = Asked(leaves);
    // One statement: for each leaf, its directory in write order from the leaf outwards (store_nodes_by_parent_id).
    std::vector<pg::Param> params = {ArrayLiteral(asked.distinct), static_cast<int64_t>(span)};
    auto side = [&](const char* cmp, const char* order, const char* sign) {
      std::string on = FilterSql(filter, &params);
      return "SELECT m.uri, s.uri, " + std::string(sign) + "s.k FROM m, LATERAL (SELECT n.uri, row_number() OVER "
             "(ORDER BY n.id " + order + ") AS k FROM (SELECT n.uri, n.id FROM store_nodes n WHERE n.parent = m.parent "
             "AND n.id " + cmp + " m.id AND NOT n.is_dir" + on + " ORDER BY n.id " + order + " LIMIT $2) n) s";
    };
    // Only leaves of directories marked ordered (kOrderedKey: true, not 1 or "true", as on SQLite): elsewhere
    // write order means nothing. jsonb refuses "\u0000", which JSON and the metadata column take: it is read
    // as "\u0020" here (the text stays valid JSON whatever precedes it), or one directory's metadata failed
    // every find that reached this statement.
    std::string sql =
        "WITH m AS (SELECT n.uri, n.parent, n.id FROM store_nodes n JOIN store_nodes p ON p.uri = n.parent "
        "WHERE n.uri = ANY($1::text[]) AND CASE WHEN p.metadata LIKE '%\"ordered\"%' THEN "
        "(replace(p.metadata, '\\u0000', '\\u0020')::jsonb -> 'ordered') = 'true'::jsonb ELSE false END) " +
        side("<", "DESC", "-") + " UNION ALL " + side(">", "ASC", "");
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, c->Exec(sql, params));
    for (int i = 0; i < r.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(std::string leaf, r.Text(i, 0));
      STRATA_ASSIGN_OR_RETURN(std::string uri_text, r.Text(i, 1));
      STRATA_ASSIGN_OR_RETURN(int64_t offset, r.Int(i, 2));
      STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(uri_text));
      for (size_t k : asked.at[leaf]) out[k].push_back({uri, static_cast<int>(offset)});
    }
    for (auto& list : out) {
      std::sort(list.begin(), list.end(), [](const Neighbour& a, const Neighbour& b) {
        // As the SQLite store gives them: the leaves before (nearest first), then those after.
        return (a.offset < 0) != (b.offset < 0) ? a.offset < 0 : std::abs(a.offset) < std::abs(b.offset);
      });
    }
    return out;
  }

  Result<std::vector<Vector>> EmbedTexts(std::span<const std::string> texts) override {
    return query_cache_.Embed(*embedder_, texts);
  }
  std::shared_ptr<Embedder> embedder() const override { return embedder_; }

  Result<std::vector<std::string>> Check() override {
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    std::vector<std::string> problems;
    pg::Txn txn(*c);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    STRATA_RETURN_IF_ERROR(c->Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY").status());
    auto collect = [&](std::string_view sql, std::string_view what) -> Status {
      STRATA_ASSIGN_OR_RETURN(pg::Rows r, c->Exec(sql));
      for (int i = 0; i < r.size(); ++i) {
        STRATA_ASSIGN_OR_RETURN(std::string text, r.Text(i, 0));
        problems.push_back(std::string(what) + ": " + text);
      }
      return Status::Ok();
    };
    STRATA_RETURN_IF_ERROR(collect(
        "SELECT n.uri FROM store_nodes n WHERE n.parent <> 'strata://' AND NOT EXISTS "
        "(SELECT 1 FROM store_nodes p WHERE p.uri = n.parent AND p.is_dir)", "parent missing"));
    STRATA_RETURN_IF_ERROR(collect(
        "SELECT r.src || ' -> ' || r.dst FROM store_relations r WHERE NOT EXISTS (SELECT 1 FROM store_nodes n "
        "WHERE n.uri = r.src) OR NOT EXISTS (SELECT 1 FROM store_nodes n WHERE n.uri = r.dst)",
        "relation to a missing node"));
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, c->Exec("SELECT " + std::string(kNodeColumns) +
                                                ", v.text_hash, octet_length(v.vec), n.fts::text, n.name, "
                                                "n.superseded FROM store_nodes n LEFT JOIN store_vectors v ON "
                                                "v.node_id = n.id"));
    int64_t vectors = 0;
    for (int i = 0; i < r.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(Row row, ReadRow(r, i));
      const Node& n = row.node;
      bool has_vector = !r.IsNull(i, 13);
      if (!has_vector) {
        problems.push_back("vector missing: " + n.uri.str());
      } else {
        ++vectors;
        STRATA_ASSIGN_OR_RETURN(std::string hash, r.Text(i, 13));
        STRATA_ASSIGN_OR_RETURN(int64_t bytes, r.Int(i, 14));
        if (hash != HashHex(EmbeddingText(n))) {
          problems.push_back("vector stale: " + n.uri.str());
        } else if (bytes != 4 * static_cast<int64_t>(embedder_->dimension())) {
          problems.push_back("vector of the wrong size: " + n.uri.str());
        }
      }
      STRATA_ASSIGN_OR_RETURN(std::string fts, r.Text(i, 15));
      STRATA_ASSIGN_OR_RETURN(std::string name, r.Text(i, 16));
      STRATA_ASSIGN_OR_RETURN(std::string superseded, r.Text(i, 17));
      FtsRow f = MakeFtsRow(n.uri.name(), n.is_dir, row.derived, n.abstract_text, n.overview, n.content);
      STRATA_ASSIGN_OR_RETURN(pg::Rows want, c->Exec("SELECT (" + std::string(kFtsSql) + ")::text", FtsParams(f)));
      STRATA_ASSIGN_OR_RETURN(std::string want_fts, want.Text(0, 0));
      if (want_fts != fts || name != n.uri.name()) problems.push_back("full-text row different: " + n.uri.str());
      if ((superseded == "t") != IsSuperseded(n.metadata)) problems.push_back("superseded flag wrong: " + n.uri.str());
    }
    STRATA_ASSIGN_OR_RETURN(int64_t generation, ReadGeneration(*c));
    auto index_lock = ReadIndex();
    if (index_ && generation == index_generation_ && static_cast<int64_t>(index_->size()) != vectors) {
      problems.push_back("vector index holds " + std::to_string(index_->size()) + " vectors, the database " +
                         std::to_string(vectors));
    }
    return problems;
  }

  Status Reindex() override {
    {
      std::lock_guard write(write_mu_);
      STRATA_RETURN_IF_ERROR(ReindexLocked(/*all=*/false));
    }
    auto index_lock = WriteIndex();
    return RebuildIndexLocked();
  }

  // Waits for a snapshot of the vector index being saved (the only thing an instance keeps for later) and
  // returns how the last one went.
  // Waits for the snapshot being saved, after asking for one when this instance wrote at least
  // snapshot_after_bulk vectors since the newest: a bulk load that ends with Flush leaves a snapshot a new
  // instance needs no catching up from. Fewer are caught up from the change feed by the next instance: a
  // snapshot is the whole graph (hundreds of MB at a million nodes), and every CLI `remember` or instance
  // shutdown uploaded one for a single vector.
  Status Flush() override {
    bool bulk = false;
    {
      auto index_lock = ReadIndex();
      bulk = options_.index_snapshots && !index_ && options_.snapshot_after_bulk > 0 &&
             unindexed_written_ >= options_.snapshot_after_bulk;
    }
    if (bulk) {
      // The end of a bulk load by an instance that never searched: it builds the index (from the newest
      // snapshot and the change feed, or the table), which saves a snapshot for the next instance.
      STRATA_RETURN_IF_ERROR(EnsureIndexCurrent(/*force=*/true));
      auto index_lock = WriteIndex();
      unindexed_written_ = 0;
    }
    bool wrote = false;
    {
      auto index_lock = ReadIndex();
      wrote = options_.index_snapshots && index_ && index_generation_ >= 0 && options_.snapshot_after_bulk > 0 &&
              written_since_snapshot_ >= options_.snapshot_after_bulk;
    }
    if (wrote) RequestSnapshot(/*whatever_counted=*/true);
    std::unique_lock lock(snapshot_mu_);
    snapshot_cv_.wait(lock, [&] { return !snapshot_due_ && !snapshot_busy_; });
    return snapshot_status_;
  }

  Result<Stats> GetStats() override {
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, c->Exec("SELECT (SELECT count(*) FROM store_nodes), (SELECT count(*) FROM "
                                                "store_nodes WHERE NOT is_dir), (SELECT count(*) FROM store_vectors), "
                                                "(SELECT count(*) FROM store_relations)"));
    Stats stats;
    STRATA_ASSIGN_OR_RETURN(stats.nodes, r.Int(0, 0));
    STRATA_ASSIGN_OR_RETURN(stats.leaves, r.Int(0, 1));
    STRATA_ASSIGN_OR_RETURN(stats.vectors, r.Int(0, 2));
    STRATA_ASSIGN_OR_RETURN(stats.relations, r.Int(0, 3));
    auto index_lock = ReadIndex();
    stats.index_snapshot_generation = snapshot_generation_;
    return stats;
  }

 private:
  using Prepared = std::unordered_map<std::string, Vector>;
  using VectorsByKey = std::unordered_map<std::string, Vector>;

  // A pooled connection, returned to the pool when the lease ends.
  class Lease {
   public:
    Lease(PgStore* store, std::unique_ptr<pg::Conn> conn) : store_(store), conn_(std::move(conn)) {}
    Lease(Lease&&) noexcept = default;
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    Lease& operator=(Lease&&) = delete;
    ~Lease() {
      if (conn_) store_->Return(std::move(conn_));
    }
    pg::Conn* operator->() { return conn_.get(); }
    pg::Conn& operator*() { return *conn_; }

   private:
    PgStore* store_;
    std::unique_ptr<pg::Conn> conn_;
  };

  Result<Lease> Take() {
    {
      std::lock_guard lock(pool_mu_);
      if (!idle_.empty()) {
        std::unique_ptr<pg::Conn> conn = std::move(idle_.back());
        idle_.pop_back();
        return Lease(this, std::move(conn));
      }
    }
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<pg::Conn> conn, pg::Conn::Connect(url_));
    return Lease(this, std::move(conn));
  }

  void Return(std::unique_ptr<pg::Conn> conn) {
    std::lock_guard lock(pool_mu_);
    if (idle_.size() < options_.max_idle_connections) idle_.push_back(std::move(conn));
  }

  int64_t NowMs() const { return options_.clock->WallMicros() / 1000; }

  std::shared_lock<std::shared_mutex> ReadIndex() {
    { std::lock_guard turn(index_turn_); }
    return std::shared_lock<std::shared_mutex>(index_mu_);
  }
  std::unique_lock<std::shared_mutex> WriteIndex() {
    std::lock_guard turn(index_turn_);
    return std::unique_lock<std::shared_mutex>(index_mu_);
  }

  VectorIndexParams IndexParams() const {
    return {.dim = embedder_->dimension(), .m = options_.hnsw_m, .ef_construction = options_.hnsw_ef_construction,
            .ef_search = options_.hnsw_ef_search, .threads = options_.index_threads};
  }

  FindFn Finder(pg::Conn& c) {
    return [this, &c](const Uri& uri) { return FindStored(c, uri); };
  }

  // Runs `body` in one transaction holding the store's write lock (this process's and, through an
  // advisory lock, every instance's), then brings the vector index and preset bookkeeping up to date.
  template <typename Body>
  Status WriteTransaction(Body&& body) {
    std::lock_guard write(write_mu_);
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    Plan plan;
    {
      pg::Txn txn(*c);
      STRATA_RETURN_IF_ERROR(txn.Begin());
      STRATA_RETURN_IF_ERROR(c->Exec("SELECT " + std::string(kWriteLock)).status());
      STRATA_RETURN_IF_ERROR(body(*c, &plan));
      STRATA_RETURN_IF_ERROR(txn.Commit());
    }
    for (std::string& root : plan.ensured) ensured_.insert(std::move(root));
    // Read the notifications here too: an instance that only writes must not let them pile up (the server
    // stops delivering to a listener that does not read, and the database's notification queue fills).
    int64_t announced = DrainNotifications();
    if (plan.generation < 0 && announced < 0) return Status::Ok();
    auto index_lock = WriteIndex();
    if (!index_) {  // Built whole by the first vector search, or by Flush after a bulk load.
      if (plan.generation >= 0) unindexed_written_ += static_cast<int64_t>(plan.removed.size() + plan.upserts.size());
      return Status::Ok();
    }
    if (plan.generation >= 0) {
      if (index_generation_ == plan.generation - 1) {
        for (int64_t id : plan.removed) index_->Remove(id);
        STRATA_RETURN_IF_ERROR(IndexUpserts(*index_, plan.upserts));
        index_generation_ = plan.generation;
        indexed_through_ = plan.generation;
        NoteIndexChanges(static_cast<int64_t>(plan.removed.size() + plan.upserts.size()));
        written_since_snapshot_ += static_cast<int64_t>(plan.removed.size() + plan.upserts.size());
      } else if (index_generation_ >= 0) {
        index_generation_ = -2;  // Another instance wrote in between: caught up before the next search.
      }
    }
    if (index_generation_ >= 0 && announced > index_generation_) index_generation_ = -2;
    return Status::Ok();
  }

  static Result<std::string> MetaGet(pg::Conn& c, std::string_view key) {
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, c.Exec("SELECT value FROM store_meta WHERE key = $1", {key}));
    if (r.size() == 0) return std::string();
    return r.Text(0, 0);
  }

  static Result<int64_t> ReadGeneration(pg::Conn& c) {
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, c.Exec("SELECT value::bigint FROM store_meta WHERE key = 'vector_generation'"));
    if (r.size() == 0) return Status::DataLoss("store_meta has no vector_generation");
    return r.Int(0, 0);
  }

  // Takes the next generation for this transaction's vector changes and announces it at commit.
  Status BumpGeneration(pg::Conn& c, Plan* plan) {
    if (plan->generation >= 0) return Status::Ok();
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, c.Exec("UPDATE store_meta SET value = (value::bigint + 1)::text WHERE key = "
                                               "'vector_generation' RETURNING value::bigint, (SELECT value FROM "
                                               "store_meta WHERE key = 'embed_model')"));
    STRATA_ASSIGN_OR_RETURN(std::string stored_model, r.Text(0, 1));
    STRATA_RETURN_IF_ERROR(CheckEmbedModel(stored_model, model_));  // Vectors of one embedder only.
    STRATA_ASSIGN_OR_RETURN(plan->generation, r.Int(0, 0));
    return c.Exec("SELECT pg_notify($1, current_schema() || ' ' || $2)", {kChannel, plan->generation}).status();
  }

  static Result<Row> ReadRow(const pg::Rows& r, int i) {
    Row row;
    STRATA_ASSIGN_OR_RETURN(row.id, r.Int(i, 0));
    STRATA_ASSIGN_OR_RETURN(std::string uri, r.Text(i, 1));
    Result<Uri> parsed = Uri::Parse(uri);
    if (!parsed.ok()) return Status::DataLoss("store_nodes row " + std::to_string(row.id) + ": " + parsed.status().message());
    row.node.uri = std::move(*parsed);
    STRATA_ASSIGN_OR_RETURN(std::string is_dir, r.Text(i, 2));
    row.node.is_dir = is_dir == "t";
    STRATA_ASSIGN_OR_RETURN(std::string type, r.Text(i, 3));
    Result<ContextType> parsed_type = ParseContextType(type);
    if (!parsed_type.ok()) return Status::DataLoss(uri + ": " + parsed_type.status().message());
    row.node.type = *parsed_type;
    STRATA_ASSIGN_OR_RETURN(row.node.category, r.Text(i, 4));
    STRATA_ASSIGN_OR_RETURN(row.node.abstract_text, r.Text(i, 5));
    STRATA_ASSIGN_OR_RETURN(row.node.overview, r.Text(i, 6));
    STRATA_ASSIGN_OR_RETURN(row.node.content, r.Text(i, 7));
    STRATA_ASSIGN_OR_RETURN(row.node.metadata, r.Text(i, 8));
    STRATA_ASSIGN_OR_RETURN(row.node.created_ms, r.Int(i, 9));
    STRATA_ASSIGN_OR_RETURN(row.node.updated_ms, r.Int(i, 10));
    STRATA_ASSIGN_OR_RETURN(row.node.size, r.Int(i, 11));
    STRATA_ASSIGN_OR_RETURN(row.derived, r.Int(i, 12));
    return row;
  }

  // Refreshes the planner's statistics after a batch that is a large part of the tables (a fresh store's bulk
  // load): until autovacuum gets to them (a minute or more), plans made for the empty tables made finds 30
  // times slower (220-330 ms against 7 ms on LoCoMo's 2,760 turns, bench/retrieval_bench.cc --pg). Only a
  // batch of at least kAnalyzeBatch leaves that is a fifth or more of store_nodes' rows as last estimated
  // (never, for a new table) pays for it; ANALYZE samples at most 30,000 rows per table. A failure (another
  // role owns the tables) is left to autovacuum: the write has succeeded.
  void AnalyzeAfterBulkWrite(size_t written) {
    constexpr size_t kAnalyzeBatch = 200;
    if (written < kAnalyzeBatch) return;
    Result<Lease> c = Take();
    if (!c.ok()) return;
    Result<pg::Rows> estimate = (*c)->Exec("SELECT reltuples FROM pg_class WHERE oid = 'store_nodes'::regclass");
    if (!estimate.ok() || estimate->size() != 1) return;
    Result<double> rows = estimate->Double(0, 0);
    if (!rows.ok() || (*rows >= 0 && static_cast<double>(written) * 5 < *rows)) return;
    (void)(*c)->Exec("ANALYZE store_nodes, store_vectors");
  }

  Result<std::optional<Row>> FindStored(pg::Conn& c, const Uri& uri) {
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, c.Exec("SELECT " + std::string(kNodeColumns) + " FROM store_nodes WHERE uri = $1",
                                               {uri.str()}));
    if (r.size() == 0) return std::optional<Row>();
    STRATA_ASSIGN_OR_RETURN(Row row, ReadRow(r, 0));
    return std::optional<Row>(std::move(row));
  }

  Result<std::vector<Node>> ListWith(pg::Conn& c, const Uri& dir, const ListOptions& options) {
    auto [lo, hi] = DescendantRange(dir);
    std::vector<pg::Param> params;
    if (options.recursive) {
      params = {lo, hi};
    } else {
      params = {dir.str()};
    }
    std::string sql = "SELECT " + std::string(kListColumns) + " FROM store_nodes WHERE " +
                      (options.recursive ? "uri >= $1 AND uri < $2" : "parent = $1");
    if (!options.after.empty()) {
      params.emplace_back(options.after);
      sql += " AND uri > $" + std::to_string(params.size());
    }
    sql += " ORDER BY uri";
    if (options.limit != 0) sql += " LIMIT " + std::to_string(options.limit);
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, c.Exec(sql, params));
    std::vector<Node> out;
    out.reserve(static_cast<size_t>(r.size()));
    for (int i = 0; i < r.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(Row row, ReadRow(r, i));
      row.node.content.clear();
      out.push_back(std::move(row.node));
    }
    return out;
  }

  // The WHERE clauses of a filter over `store_nodes n`, appending their parameters to `params`.
  static std::string FilterSql(const SearchFilter& f, std::vector<pg::Param>* params) {
    std::string sql;
    auto p = [&](std::string value) {
      params->emplace_back(std::move(value));
      return "$" + std::to_string(params->size());
    };
    if (!f.under.is_root()) {
      auto [lo, hi] = DescendantRange(f.under);
      sql += " AND (n.uri = " + p(f.under.str()) + " OR (n.uri >= " + p(lo) + " AND n.uri < " + p(hi) + "))";
    }
    if (f.type) sql += " AND n.type = " + p(std::string(ContextTypeName(*f.type)));
    if (f.category) sql += " AND n.category = " + p(*f.category);
    if (f.leaves_only) sql += " AND NOT n.is_dir";
    if (f.parent) sql += " AND n.parent = " + p(f.parent->str());
    if (f.current_only) sql += " AND NOT n.superseded";
    if (!f.roots.empty() && std::none_of(f.roots.begin(), f.roots.end(), [](const Uri& r) { return r.is_root(); })) {
      sql += " AND (";
      for (size_t i = 0; i < f.roots.size(); ++i) {
        auto [lo, hi] = DescendantRange(f.roots[i]);
        sql += (i > 0 ? " OR " : "") + std::string("n.uri = ") + p(f.roots[i].str()) + " OR (n.uri >= " + p(lo) +
               " AND n.uri < " + p(hi) + ")";
      }
      sql += ")";
    }
    return sql;
  }

  // Searches the graph, over-fetching and checking the hits in one statement (widening until enough pass).
  // *stale: the database's vector generation is ahead of the index (the answer may miss new vectors).
  // *stale stays null on the last attempt: the answer is then given as the index has it (a write racing
  // every attempt must not fail the search).
  Result<std::vector<ScoredUri>> GraphNeighbours(pg::Conn& c, const Vector& query, const SearchFilter& filter,
                                                 size_t limit, bool scoped, bool* stale) {
    std::vector<ScoredUri> out;
    auto index_lock = ReadIndex();
    const int64_t searched = index_generation_;
    const size_t index_size = index_->size();
    for (size_t k = scoped ? limit * 4 : limit;; k *= 4) {
      STRATA_ASSIGN_OR_RETURN(auto hits, index_->Search(query.data(), k));
      std::vector<int64_t> ids;
      for (const auto& hit : hits) ids.push_back(hit.first);
      std::vector<pg::Param> params = {IdArray(ids)};
      std::string on = FilterSql(filter, &params);
      // One row at least (the generation), with the hits that pass the filter joined to it.
      STRATA_ASSIGN_OR_RETURN(pg::Rows r, c.Exec("SELECT g.value::bigint, n.id, n.uri, n.is_dir FROM store_meta g "
                                                 "LEFT JOIN store_nodes n ON n.id = ANY($1::bigint[])" + on +
                                                 " WHERE g.key = 'vector_generation'",
                                                 params));
      if (r.size() == 0) return Status::DataLoss("store_meta has no vector_generation");
      STRATA_ASSIGN_OR_RETURN(int64_t generation, r.Int(0, 0));
      if (stale != nullptr && generation > searched) {
        *stale = true;
        return out;
      }
      std::unordered_map<int64_t, std::pair<std::string, bool>> passed;
      for (int i = 0; i < r.size(); ++i) {
        if (r.IsNull(i, 1)) continue;
        STRATA_ASSIGN_OR_RETURN(int64_t id, r.Int(i, 1));
        STRATA_ASSIGN_OR_RETURN(std::string uri, r.Text(i, 2));
        STRATA_ASSIGN_OR_RETURN(std::string is_dir, r.Text(i, 3));
        passed.emplace(id, std::make_pair(std::move(uri), is_dir == "t"));
      }
      out.clear();
      for (const auto& [id, similarity] : hits) {
        auto it = passed.find(id);
        if (it == passed.end()) continue;
        STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(it->second.first));
        out.push_back({uri, it->second.second, similarity, "cosine " + std::to_string(similarity).substr(0, 5)});
        if (out.size() >= limit) return out;
      }
      if (hits.size() < k || k >= index_size) return out;
    }
  }

  // Scores every node that passes the filter with its vector from the in-process index (only ids travel
  // from the database). *stale as for GraphNeighbours.
  Result<std::vector<ScoredUri>> ExactNeighbours(pg::Conn& c, const Vector& query, const SearchFilter& filter,
                                                 size_t limit, bool* stale) {
    std::vector<pg::Param> params;
    std::string on = FilterSql(filter, &params);
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, c.Exec("SELECT g.value::bigint, n.id, n.uri, n.is_dir FROM store_meta g "
                                               "LEFT JOIN store_nodes n ON TRUE" + on +
                                               " WHERE g.key = 'vector_generation'", params));
    if (r.size() == 0) return Status::DataLoss("store_meta has no vector_generation");
    STRATA_ASSIGN_OR_RETURN(int64_t generation, r.Int(0, 0));
    auto index_lock = ReadIndex();
    if (stale != nullptr && generation > index_generation_) {
      *stale = true;
      return std::vector<ScoredUri>();
    }
    std::vector<std::tuple<float, std::string, bool>> scored;
    Vector v(query.size());
    for (int i = 0; i < r.size(); ++i) {
      if (r.IsNull(i, 1)) continue;
      STRATA_ASSIGN_OR_RETURN(int64_t id, r.Int(i, 1));
      if (!index_->Get(id, v.data())) continue;
      STRATA_ASSIGN_OR_RETURN(std::string uri, r.Text(i, 2));
      STRATA_ASSIGN_OR_RETURN(std::string is_dir, r.Text(i, 3));
      scored.emplace_back(Dot(query, v), std::move(uri), is_dir == "t");
    }
    return TopByCosine(std::move(scored), limit);
  }

  // Vectors computed before a write takes the lock: the cached ones, then the rest from the embedder.
  Result<Prepared> PreEmbed(std::vector<std::string> texts, const std::vector<Uri>& new_dirs) {
    Prepared out;
    std::vector<std::string> missing;
    {
      STRATA_ASSIGN_OR_RETURN(Lease c, Take());
      for (const Uri& dir : new_dirs) {
        STRATA_ASSIGN_OR_RETURN(std::optional<Row> existing, FindStored(*c, dir));
        if (existing) continue;
        Node n;
        n.uri = dir;
        n.is_dir = true;
        texts.push_back(EmbeddingText(n));
      }
      std::sort(texts.begin(), texts.end());
      texts.erase(std::unique(texts.begin(), texts.end()), texts.end());
      std::vector<std::string> keys;
      for (const std::string& text : texts) keys.push_back(HashHex(model_ + '\0' + text));
      STRATA_ASSIGN_OR_RETURN(VectorsByKey cached, CacheLookup(*c, keys));
      for (size_t i = 0; i < texts.size(); ++i) {
        auto it = cached.find(keys[i]);
        if (it != cached.end()) {
          out[texts[i]] = std::move(it->second);
        } else {
          missing.push_back(texts[i]);
        }
      }
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<Vector> fresh, EmbedInBatches(missing));
    for (size_t j = 0; j < missing.size(); ++j) out[missing[j]] = std::move(fresh[j]);
    return out;
  }

  // The cached vectors of `keys` (of the right size), by key.
  Result<VectorsByKey> CacheLookup(pg::Conn& c, const std::vector<std::string>& keys) {
    std::unordered_map<std::string, Vector> out;
    if (keys.empty()) return out;
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, c.Exec("SELECT key, vec FROM store_embedding_cache WHERE key = ANY($1::text[])",
                                               {ArrayLiteral(keys)}));
    const size_t want_bytes = 4 * static_cast<size_t>(embedder_->dimension());
    for (int i = 0; i < r.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(std::string key, r.Text(i, 0));
      STRATA_ASSIGN_OR_RETURN(std::string blob, r.Bytes(i, 1));
      if (blob.size() == want_bytes) out.emplace(std::move(key), BlobVector(blob));
    }
    return out;
  }

  Result<std::vector<Vector>> EmbedInBatches(const std::vector<std::string>& texts) {
    std::vector<Vector> out;
    out.reserve(texts.size());
    const size_t want = static_cast<size_t>(embedder_->dimension());
    for (size_t start = 0; start < texts.size(); start += embedder_->max_batch()) {
      size_t n = std::min(embedder_->max_batch(), texts.size() - start);
      STRATA_ASSIGN_OR_RETURN(std::vector<Vector> fresh,
                              embedder_->Embed(std::span<const std::string>(texts).subspan(start, n)));
      if (fresh.size() != n) {
        return Status::Internal("embedder returned " + std::to_string(fresh.size()) + " vectors for " +
                                std::to_string(n) + " texts");
      }
      for (Vector& v : fresh) {
        if (v.size() != want) {
          return Status::InvalidArgument("embedder " + model_ + " returned a vector of " + std::to_string(v.size()) +
                                         " dimensions, expected " + std::to_string(want));
        }
        out.push_back(std::move(v));
      }
    }
    return out;
  }

  // Writes the plan's rows with their full-text vectors and embeddings (inside the write transaction).
  // Uncounts the lexemes of the rows with `ids` (about to be rewritten or removed); returns those now at zero
  // as an array value for kDropUncountedTermsSql, nullopt when none is.
  static Result<std::optional<std::string>> UncountTerms(pg::Conn& c, const std::vector<int64_t>& ids) {
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, c.Exec(std::string(kUncountTermsSql), {IdArray(ids)}));
    if (r.size() != 1 || r.IsNull(0, 0)) return std::optional<std::string>();
    STRATA_ASSIGN_OR_RETURN(std::string zero, r.Text(0, 0));
    return std::optional<std::string>(std::move(zero));
  }

  Status Apply(pg::Conn& c, Plan& plan, const Prepared* prepared = nullptr) {
    if (plan.rows.empty()) return Status::Ok();
    std::vector<std::string> texts(plan.rows.size()), hashes(plan.rows.size());
    std::vector<int64_t> existing;
    for (const Row& row : plan.rows) {
      if (row.id != 0) existing.push_back(row.id);
    }
    std::unordered_map<int64_t, std::string> old_hashes;
    std::optional<std::string> uncounted;  // Lexemes the rewritten rows alone held (kUncountTermsSql).
    if (!existing.empty()) {
      STRATA_ASSIGN_OR_RETURN(uncounted, UncountTerms(c, existing));
      STRATA_ASSIGN_OR_RETURN(pg::Rows r, c.Exec("SELECT node_id, text_hash FROM store_vectors WHERE node_id = "
                                                 "ANY($1::bigint[])", {IdArray(existing)}));
      for (int i = 0; i < r.size(); ++i) {
        STRATA_ASSIGN_OR_RETURN(int64_t id, r.Int(i, 0));
        STRATA_ASSIGN_OR_RETURN(old_hashes[id], r.Text(i, 1));
      }
    }
    std::vector<size_t> to_embed;
    for (size_t i = 0; i < plan.rows.size(); ++i) {
      texts[i] = EmbeddingText(plan.rows[i].node);
      hashes[i] = HashHex(texts[i]);
      auto it = old_hashes.find(plan.rows[i].id);
      if (plan.rows[i].id != 0 && it != old_hashes.end() && it->second == hashes[i]) continue;
      to_embed.push_back(i);
    }
    // Vectors: prepared before the lock, else cached, else embedded now (a kept hand-written layer).
    std::vector<Vector> vectors(to_embed.size());
    std::vector<std::string> keys;
    for (size_t i : to_embed) keys.push_back(HashHex(model_ + '\0' + texts[i]));
    std::vector<size_t> missing;
    std::unordered_map<std::string, Vector> cached;
    {
      std::vector<std::string> lookup;
      for (size_t j = 0; j < to_embed.size(); ++j) {
        if (prepared != nullptr && prepared->contains(texts[to_embed[j]])) continue;
        lookup.push_back(keys[j]);
      }
      STRATA_ASSIGN_OR_RETURN(cached, CacheLookup(c, lookup));
    }
    std::vector<std::string> missing_texts;
    for (size_t j = 0; j < to_embed.size(); ++j) {
      const std::string& text = texts[to_embed[j]];
      if (prepared != nullptr) {
        if (auto it = prepared->find(text); it != prepared->end() && it->second.size() == size_t(embedder_->dimension())) {
          vectors[j] = it->second;
          continue;
        }
      }
      if (auto it = cached.find(keys[j]); it != cached.end()) {
        vectors[j] = it->second;
        continue;
      }
      missing.push_back(j);
      missing_texts.push_back(text);
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<Vector> fresh, EmbedInBatches(missing_texts));
    for (size_t k = 0; k < missing.size(); ++k) vectors[missing[k]] = std::move(fresh[k]);

    for (Row& row : plan.rows) {
      const Node& n = row.node;
      std::vector<pg::Param> params =
          FtsParams(MakeFtsRow(n.uri.name(), n.is_dir, row.derived, n.abstract_text, n.overview, n.content));
      for (pg::Param p : {pg::Param(n.uri.str()), pg::Param(n.uri.Parent().str()), pg::Param(n.uri.name()),
                          pg::Param(n.is_dir ? "t" : "f"), pg::Param(std::string(ContextTypeName(n.type))),
                          pg::Param(n.category), pg::Param(n.abstract_text), pg::Param(n.overview),
                          pg::Param(n.content), pg::Param(n.metadata),
                          pg::Param(IsSuperseded(n.metadata) ? "t" : "f"), pg::Param(row.derived),
                          pg::Param(n.created_ms), pg::Param(n.updated_ms)}) {
        params.push_back(std::move(p));
      }
      if (row.id == 0) {
        STRATA_ASSIGN_OR_RETURN(
            pg::Rows r,
            c.Exec("INSERT INTO store_nodes(uri, parent, name, is_dir, type, category, abstract, overview, content, "
                   "metadata, superseded, derived, created_ms, updated_ms, fts) VALUES ($5, $6, $7, $8, $9, $10, $11, "
                   "$12, $13, $14, $15, $16, $17, $18, " + std::string(kFtsSql) + ") RETURNING id",
                   params));
        STRATA_ASSIGN_OR_RETURN(row.id, r.Int(0, 0));
      } else {
        params.emplace_back(row.id);
        STRATA_RETURN_IF_ERROR(
            c.Exec("UPDATE store_nodes SET uri = $5, parent = $6, name = $7, is_dir = $8, type = $9, category = $10, "
                   "abstract = $11, overview = $12, content = $13, metadata = $14, superseded = $15, derived = $16, "
                   "created_ms = $17, updated_ms = $18, fts = " + std::string(kFtsSql) + " WHERE id = $19",
                   params)
                .status()
                .WithContext(n.uri.str()));
      }
    }
    std::vector<int64_t> written;
    for (const Row& row : plan.rows) written.push_back(row.id);
    if (!written.empty()) STRATA_RETURN_IF_ERROR(c.Exec(std::string(kCountTermsSql), {IdArray(written)}).status());
    if (uncounted) STRATA_RETURN_IF_ERROR(c.Exec(std::string(kDropUncountedTermsSql), {*uncounted}).status());
    if (to_embed.empty()) return Status::Ok();
    STRATA_RETURN_IF_ERROR(BumpGeneration(c, &plan));
    for (size_t j = 0; j < to_embed.size(); ++j) {
      const Row& row = plan.rows[to_embed[j]];
      std::string blob = pg::ByteaHex(VectorBlob(vectors[j]));
      STRATA_RETURN_IF_ERROR(c.Exec("INSERT INTO store_embedding_cache(key, vec) VALUES ($1, $2::bytea) "
                                    "ON CONFLICT (key) DO UPDATE SET vec = EXCLUDED.vec",
                                    {keys[j], blob})
                                 .status());
      STRATA_RETURN_IF_ERROR(c.Exec("INSERT INTO store_vectors(node_id, text_hash, vec, generation) VALUES "
                                    "($1, $2, $3::bytea, $4) ON CONFLICT (node_id) DO UPDATE SET text_hash = "
                                    "EXCLUDED.text_hash, vec = EXCLUDED.vec, generation = EXCLUDED.generation",
                                    {row.id, hashes[to_embed[j]], blob, plan.generation})
                                 .status());
      plan.upserts.emplace_back(row.id, std::move(vectors[j]));
    }
    return Status::Ok();
  }

  // A store indexed with another word layout (before kLexemeLayout: PostgreSQL's `english` parser, which
  // kept `config.yaml` whole) gets every full-text row computed again, in one transaction under the write
  // lock; the first instance to open it does the work, the others find it done.
  Status RefillFullTextIfStale() {
    {
      STRATA_ASSIGN_OR_RETURN(Lease c, Take());
      STRATA_ASSIGN_OR_RETURN(std::string layout, MetaGet(*c, "fts_layout"));
      if (layout == kLexemeLayout) return Status::Ok();
    }
    std::lock_guard write(write_mu_);
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    pg::Txn txn(*c);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    STRATA_RETURN_IF_ERROR(c->Exec("SELECT " + std::string(kWriteLock)).status());
    STRATA_ASSIGN_OR_RETURN(std::string layout, MetaGet(*c, "fts_layout"));
    if (layout == kLexemeLayout) return txn.Commit();
    for (int64_t after = 0;;) {
      STRATA_ASSIGN_OR_RETURN(pg::Rows r, c->Exec("SELECT id, name, is_dir, derived, abstract, overview, content "
                                                  "FROM store_nodes WHERE id > $1 ORDER BY id LIMIT 500",
                                                  {after}));
      if (r.size() == 0) break;
      for (int i = 0; i < r.size(); ++i) {
        STRATA_ASSIGN_OR_RETURN(after, r.Int(i, 0));
        STRATA_ASSIGN_OR_RETURN(std::string name, r.Text(i, 1));
        STRATA_ASSIGN_OR_RETURN(std::string is_dir, r.Text(i, 2));
        STRATA_ASSIGN_OR_RETURN(int64_t derived, r.Int(i, 3));
        STRATA_ASSIGN_OR_RETURN(std::string abstract_text, r.Text(i, 4));
        STRATA_ASSIGN_OR_RETURN(std::string overview, r.Text(i, 5));
        STRATA_ASSIGN_OR_RETURN(std::string content, r.Text(i, 6));
        std::vector<pg::Param> params =
            FtsParams(MakeFtsRow(name, is_dir == "t", derived, abstract_text, overview, content));
        params.emplace_back(after);
        STRATA_RETURN_IF_ERROR(
            c->Exec("UPDATE store_nodes SET fts = " + std::string(kFtsSql) + " WHERE id = $5", params).status());
      }
    }
    // The vocabulary of the new layout only (migration 4 filled it from the old one).
    STRATA_RETURN_IF_ERROR(c->Exec("DELETE FROM store_terms").status());
    STRATA_RETURN_IF_ERROR(c->Exec("INSERT INTO store_terms(term, docs) SELECT word, ndoc FROM ts_stat('SELECT fts "
                                   "FROM store_nodes')")
                               .status());
    STRATA_RETURN_IF_ERROR(c->Exec("INSERT INTO store_meta(key, value) VALUES ('fts_layout', $1) ON CONFLICT (key) "
                                   "DO UPDATE SET value = EXCLUDED.value",
                                   {kLexemeLayout})
                               .status());
    return txn.Commit();
  }

  // Recomputes vectors whose text changed (or all, for a new model) in one transaction. write_mu_ held.
  Status ReindexLocked(bool all) {
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    pg::Txn txn(*c);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    STRATA_RETURN_IF_ERROR(c->Exec("SELECT " + std::string(kWriteLock)).status());
    if (all) {
      // Another instance opened with this model while we waited for the lock: it re-embedded everything.
      STRATA_ASSIGN_OR_RETURN(std::string stored_model, MetaGet(*c, "embed_model"));
      if (stored_model == model_) all = false;
    }
    Plan plan;
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, c->Exec("SELECT " + std::string(kNodeColumns) +
                                                ", v.text_hash FROM store_nodes n LEFT JOIN store_vectors v ON "
                                                "v.node_id = n.id"));
    for (int i = 0; i < r.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(Row row, ReadRow(r, i));
      STRATA_ASSIGN_OR_RETURN(std::string hash, r.Text(i, 13));
      if (all || hash != HashHex(EmbeddingText(row.node))) plan.Put(std::move(row));
    }
    if (all) STRATA_RETURN_IF_ERROR(c->Exec("DELETE FROM store_vectors").status());
    if (!all) {  // Recomputing stale vectors is for the store's own model: a stale instance must not relabel it.
      STRATA_ASSIGN_OR_RETURN(std::string stored_model, MetaGet(*c, "embed_model"));
      STRATA_RETURN_IF_ERROR(CheckEmbedModel(stored_model, model_));
      if (plan.rows.empty()) return Status::Ok();  // Every vector current: nothing to write or announce.
    }
    // The store's model first: the vectors written below are checked against it (BumpGeneration).
    STRATA_RETURN_IF_ERROR(
        c->Exec("UPDATE store_meta SET value = $1 WHERE key = 'embed_model'", {model_}).status());
    STRATA_RETURN_IF_ERROR(Apply(*c, plan));
    STRATA_RETURN_IF_ERROR(BumpGeneration(*c, &plan));
    STRATA_RETURN_IF_ERROR(txn.Commit());
    auto index_lock = WriteIndex();
    index_generation_ = -1;  // Rebuilt whole before the next vector search.
    return Status::Ok();
  }

  // Takes the notifications that arrived; returns the newest generation of this schema they announce (-1:
  // none). A lost connection is noticed by the next search.
  int64_t DrainNotifications() {
    std::lock_guard listen(listener_mu_);
    Result<std::vector<std::string>> notes = listener_->TakeNotifications();
    return notes.ok() ? NewestAnnounced(*notes) : -1;
  }

  // The newest generation of this schema's store among notification payloads ("<schema> <generation>");
  // -1 when none is this schema's.
  int64_t NewestAnnounced(const std::vector<std::string>& payloads) const {
    int64_t newest = -1;
    for (const std::string& payload : payloads) {
      if (payload.size() <= schema_.size() || payload.compare(0, schema_.size(), schema_) != 0 ||
          payload[schema_.size()] != ' ') {
        continue;  // Another schema's store.
      }
      newest = std::max<int64_t>(newest, std::strtoll(payload.c_str() + schema_.size() + 1, nullptr, 10));
    }
    return newest;
  }

  // Brings the index up to the database's generation: applies what the notifications announce (or, when
  // the listening connection was lost, whatever changed), or rebuilds it when it has never been built.
  Status EnsureIndexCurrent(bool force) {
    bool sync = force;
    {
      std::lock_guard listen(listener_mu_);
      Result<std::vector<std::string>> notes = listener_->TakeNotifications();
      if (!notes.ok()) {
        // Reconnect and listen again; whatever was announced meanwhile is found by comparing generations.
        STRATA_RETURN_IF_ERROR(listener_->Listen(kChannel));
        sync = true;
      } else {
        auto index_lock = ReadIndex();
        if (NewestAnnounced(*notes) > index_generation_ || index_generation_ < 0) sync = true;
      }
      if (listener_->connects() != listener_connects_) {
        listener_connects_ = listener_->connects();
        sync = true;
      }
    }
    if (!sync) return Status::Ok();
    auto index_lock = WriteIndex();
    if (!index_ || index_generation_ == -1) {
      if (options_.index_snapshots) {
        Status loaded = LoadSnapshotLocked();
        if (loaded.ok()) {
          int64_t applied = 0;
          STRATA_RETURN_IF_ERROR(CatchUpLocked(&applied));
          // A start that caught up a long way (a bulk load since the snapshot) saves where it got to, so
          // that the next instance does not repeat it.
          if (options_.snapshot_after_bulk > 0 && applied >= options_.snapshot_after_bulk) {
            RequestSnapshot(/*whatever_counted=*/true);
          }
          return Status::Ok();
        }
        // No snapshot, or one that cannot be used (then it is replaced after this build): from the table.
        index_.reset();
        index_generation_ = -1;
        snapshot_generation_ = -1;
      }
      return RebuildIndexLocked();
    }
    return CatchUpLocked();
  }

  // Applies the vector rows and removals of the generations after index_generation_. index_mu_ held.
  Status CatchUpLocked(int64_t* applied = nullptr) {
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    pg::Txn txn(*c);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    STRATA_RETURN_IF_ERROR(c->Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY").status());
    STRATA_ASSIGN_OR_RETURN(int64_t generation, ReadGeneration(*c));
    if (index_generation_ == -2) index_generation_ = indexed_through_;
    if (generation == index_generation_) return Status::Ok();
    STRATA_ASSIGN_OR_RETURN(std::string stored_model, MetaGet(*c, "embed_model"));
    STRATA_RETURN_IF_ERROR(CheckEmbedModel(stored_model, model_));
    STRATA_ASSIGN_OR_RETURN(pg::Rows removed, c->Exec("SELECT node_id FROM store_vector_removals WHERE generation > $1",
                                                      {index_generation_}));
    for (int i = 0; i < removed.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(int64_t id, removed.Int(i, 0));
      index_->Remove(id);
    }
    int64_t loaded = 0;
    STRATA_RETURN_IF_ERROR(LoadVectors(*c, index_generation_, index_.get(), &loaded));
    index_generation_ = generation;
    indexed_through_ = generation;
    NoteIndexChanges(removed.size() + loaded);
    if (applied != nullptr) *applied = removed.size() + loaded;
    return txn.Commit();
  }

  // Adds the vectors written after generation `after` to `index`.
  Status LoadVectors(pg::Conn& c, int64_t after, VectorIndex* index, int64_t* loaded = nullptr) {
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, c.Exec("SELECT node_id, vec FROM store_vectors WHERE generation > $1", {after}));
    const size_t want_bytes = 4 * static_cast<size_t>(embedder_->dimension());
    VectorBatch batch(index);
    if (loaded != nullptr) *loaded = r.size();
    for (int i = 0; i < r.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(int64_t id, r.Int(i, 0));
      STRATA_ASSIGN_OR_RETURN(std::string blob, r.Bytes(i, 1));
      if (blob.size() != want_bytes) continue;  // Another model's: re-embedded by Reindex.
      STRATA_RETURN_IF_ERROR(batch.AddBytes(id, blob));
    }
    return batch.Flush();
  }

  // index_mu_ held exclusively.
  Status RebuildIndexLocked() {
    auto index = std::make_unique<VectorIndex>(IndexParams());
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    pg::Txn txn(*c);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    STRATA_RETURN_IF_ERROR(c->Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY").status());
    STRATA_ASSIGN_OR_RETURN(int64_t generation, ReadGeneration(*c));
    STRATA_ASSIGN_OR_RETURN(std::string stored_model, MetaGet(*c, "embed_model"));
    STRATA_RETURN_IF_ERROR(CheckEmbedModel(stored_model, model_));
    STRATA_RETURN_IF_ERROR(LoadVectors(*c, -1, index.get()));
    STRATA_RETURN_IF_ERROR(txn.Commit());
    index_ = std::move(index);
    index_generation_ = generation;
    indexed_through_ = generation;
    // Built whole from the table: the next instance should not have to.
    if (options_.index_snapshots && index_->size() > 0) RequestSnapshot(/*whatever_counted=*/true);
    return Status::Ok();
  }

  // ---- Vector index snapshots (docs/formats/postgres.md) ----

  // Counts vectors added, replaced or removed in the index since the newest snapshot; asks for a new one
  // after options_.snapshot_every of them. index_mu_ held exclusively.
  void NoteIndexChanges(int64_t n) {
    changed_since_snapshot_ += n;
    if (options_.index_snapshots && options_.snapshot_every > 0 && changed_since_snapshot_ >= options_.snapshot_every) {
      RequestSnapshot();
    }
  }

  // Asks the snapshot thread for a save: after snapshot_every counted changes (a request that is stale by
  // the time it runs, the count already saved, is dropped), or `whatever_counted` (a build from the table,
  // a long catch-up, a bulk load's Flush).
  void RequestSnapshot(bool whatever_counted = false) {
    std::lock_guard lock(snapshot_mu_);
    if (snapshot_stop_) return;
    if (whatever_counted) snapshot_forced_ = true;
    if (!snapshot_thread_.joinable()) {
      try {
        snapshot_thread_ = std::thread([this] { SnapshotLoop(); });
      } catch (const std::system_error& e) {
        snapshot_status_ = Status::ResourceExhausted(std::string("vector index snapshot: no thread: ") + e.what());
        return;  // Asked again after the next build or changes.
      }
    }
    snapshot_due_ = true;
    snapshot_cv_.notify_all();
  }

  // Saves a snapshot whenever one is asked for, off the thread that asked (a search must not wait for it).
  void SnapshotLoop() {
    std::unique_lock lock(snapshot_mu_);
    while (true) {
      snapshot_cv_.wait(lock, [&] { return snapshot_due_ || snapshot_stop_; });
      if (snapshot_stop_) return;
      snapshot_due_ = false;
      snapshot_busy_ = true;
      const bool forced = std::exchange(snapshot_forced_, false);
      lock.unlock();
      Status saved = SaveSnapshot(forced);
      lock.lock();
      snapshot_busy_ = false;
      snapshot_status_ = saved;
      snapshot_cv_.notify_all();
    }
  }

  // Forgets the changes counted towards a snapshot (`changes` and `written` of them) once one is saved or
  // another instance's covers them.
  void ForgetCountedChanges(int64_t changes, int64_t written) {
    auto index_lock = WriteIndex();
    changed_since_snapshot_ = std::max<int64_t>(0, changed_since_snapshot_ - changes);
    written_since_snapshot_ = std::max<int64_t>(0, written_since_snapshot_ - written);
  }

  // How many vectors were stamped or removed after generation `after`, counted up to `cap` (the change feed's
  // own rows: what a snapshot of `after` lacks).
  Result<int64_t> ChangesAfter(pg::Conn& c, int64_t after, int64_t cap) {
    STRATA_ASSIGN_OR_RETURN(
        pg::Rows r, c.Exec("SELECT (SELECT count(*) FROM (SELECT 1 FROM store_vectors WHERE generation > $1 LIMIT $2) v) "
                           "+ (SELECT count(*) FROM (SELECT 1 FROM store_vector_removals WHERE generation > $1 LIMIT $2) r)",
                           {after, cap}));
    return r.Int(0, 0);
  }

  // The generation of the newest snapshot of this model's index (-1: none).
  Result<int64_t> NewestSnapshotGeneration(pg::Conn& c) {
    STRATA_ASSIGN_OR_RETURN(
        pg::Rows newest,
        c.Exec("SELECT coalesce(max(generation), -1) FROM store_index_snapshots WHERE model = $1 AND dim = $2",
               {model_, embedder_->dimension()}));
    return newest.Int(0, 0);
  }

  // Writes the index as it is now to a scratch file (searches go on; writes wait), then stores it with its
  // generation in one transaction that also drops the older snapshots. Skipped, its counted changes
  // forgotten, when another instance is saving one or saved one since this instance's baseline: with N
  // instances each counted the others' changes too and uploaded the whole graph, N uploads where one does.
  Status SaveSnapshot(bool forced) {
    ScratchFile file;
    STRATA_RETURN_IF_ERROR(file.error);
    int64_t generation = -1, live = 0, changes = 0, written = 0;
    {
      auto index_lock = ReadIndex();
      if (!index_ || index_generation_ < 0) return Status::Ok();  // Nothing consistent to save yet.
      generation = index_generation_;
      changes = changed_since_snapshot_;
      written = written_since_snapshot_;
    }
    // Asked for by the count while a save ran, which took those changes: nothing is due now (each change
    // past the threshold asked again, and a second whole graph followed the first).
    if (!forced && (options_.snapshot_every <= 0 || changes < options_.snapshot_every)) return Status::Ok();
    {
      // Asked first, before the graph is written out (seconds at scale, writes waiting): whether the newest
      // snapshot, whoever saved it, already holds this generation, or all but fewer than snapshot_every
      // changes of it. An instance counts what it catches up from the others too: without this, each of N
      // instances uploaded the whole graph per snapshot_every changes, N uploads where one serves.
      STRATA_ASSIGN_OR_RETURN(Lease c, Take());
      STRATA_ASSIGN_OR_RETURN(int64_t newest, NewestSnapshotGeneration(*c));
      bool covered = newest >= generation;
      if (!covered && !forced && newest >= 0) {
        STRATA_ASSIGN_OR_RETURN(int64_t since, ChangesAfter(*c, newest, options_.snapshot_every));
        covered = since < options_.snapshot_every;
      }
      if (covered) {
        ForgetCountedChanges(changes, written);
        return Status::Ok();
      }
    }
    {
      auto index_lock = ReadIndex();
      if (!index_ || index_generation_ < 0) return Status::Ok();
      generation = index_generation_;
      live = static_cast<int64_t>(index_->size());
      STRATA_RETURN_IF_ERROR(index_->SaveGraph(file.path));
    }
    std::error_code ec;
    const uintmax_t bytes = std::filesystem::file_size(file.path, ec);
    if (ec) return Status::Internal("vector index snapshot: the scratch file vanished: " + ec.message());
    STRATA_ASSIGN_OR_RETURN(Lease c, Take());
    pg::Txn txn(*c);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    STRATA_ASSIGN_OR_RETURN(pg::Rows locked, c->Exec(kSnapshotLock));
    STRATA_ASSIGN_OR_RETURN(std::string got_lock, locked.Text(0, 0));
    if (got_lock != "t") {
      // Another instance is saving one, of about this generation (both are caught up): these changes are its
      // (asking again at once spun).
      ForgetCountedChanges(changes, 0);
      return Status::Ok();
    }
    STRATA_ASSIGN_OR_RETURN(int64_t newest_generation, NewestSnapshotGeneration(*c));
    if (newest_generation < generation) {
      STRATA_ASSIGN_OR_RETURN(
          pg::Rows id_row,
          c->Exec("INSERT INTO store_index_snapshots(generation, model, dim, live, bytes, created_ms) "
                  "VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
                  {generation, model_, embedder_->dimension(), live, static_cast<int64_t>(bytes), NowMs()}));
      STRATA_ASSIGN_OR_RETURN(int64_t id, id_row.Int(0, 0));
      std::ifstream in(file.path, std::ios::binary);
      std::string chunk(kSnapshotChunkBytes, '\0');
      uintmax_t sent = 0;
      for (int seq = 0; sent < bytes; ++seq) {
        size_t n = static_cast<size_t>(std::min<uintmax_t>(kSnapshotChunkBytes, bytes - sent));
        if (!in.read(chunk.data(), static_cast<std::streamsize>(n))) {
          return Status::Internal("vector index snapshot: cannot read the scratch file");
        }
        const pg::Param params[] = {id, seq, pg::Param::Binary(chunk.substr(0, n))};
        STRATA_RETURN_IF_ERROR(
            c->Exec("INSERT INTO store_index_snapshot_chunks(snapshot_id, seq, data) VALUES ($1, $2, $3)", params)
                .status());
        sent += n;
      }
      STRATA_RETURN_IF_ERROR(c->Exec("DELETE FROM store_index_snapshots WHERE id <> $1", {id}).status());
    }
    STRATA_RETURN_IF_ERROR(txn.Commit());
    ForgetCountedChanges(changes, written);
    return Status::Ok();
  }

  // Loads the newest snapshot of this model's index into index_ at its generation (the caller then catches
  // up from the change feed). kNotFound when there is none; kDataLoss when it is damaged. index_mu_ held
  // exclusively.
  Status LoadSnapshotLocked() {
    ScratchFile file;
    STRATA_RETURN_IF_ERROR(file.error);
    int64_t generation = -1;
    {
      STRATA_ASSIGN_OR_RETURN(Lease c, Take());
      pg::Txn txn(*c);
      STRATA_RETURN_IF_ERROR(txn.Begin());
      STRATA_RETURN_IF_ERROR(c->Exec("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY").status());
      STRATA_ASSIGN_OR_RETURN(
          pg::Rows head, c->Exec("SELECT id, generation, bytes FROM store_index_snapshots WHERE model = $1 AND "
                                 "dim = $2 ORDER BY generation DESC LIMIT 1",
                                 {model_, embedder_->dimension()}));
      if (head.size() == 0) return Status::NotFound("no snapshot of the vector index");
      STRATA_ASSIGN_OR_RETURN(int64_t id, head.Int(0, 0));
      STRATA_ASSIGN_OR_RETURN(generation, head.Int(0, 1));
      STRATA_ASSIGN_OR_RETURN(int64_t bytes, head.Int(0, 2));
      STRATA_ASSIGN_OR_RETURN(int64_t current, ReadGeneration(*c));
      if (generation > current) {
        return Status::DataLoss("vector index snapshot " + std::to_string(id) + " is of generation " +
                                std::to_string(generation) + ", past the database's " + std::to_string(current));
      }
      std::ofstream out(file.path, std::ios::binary | std::ios::trunc);
      int64_t got = 0;
      for (int seq = 0; got < bytes; ++seq) {
        const pg::Param params[] = {id, seq};
        STRATA_ASSIGN_OR_RETURN(
            pg::Rows r, c->ExecBinary("SELECT data FROM store_index_snapshot_chunks WHERE snapshot_id = $1 AND seq = $2",
                                      params));
        if (r.size() == 0) break;
        STRATA_ASSIGN_OR_RETURN(std::string_view data, r.Raw(0, 0));
        out.write(data.data(), static_cast<std::streamsize>(data.size()));
        got += static_cast<int64_t>(data.size());
      }
      out.close();
      if (!out || got != bytes) {
        return Status::DataLoss("vector index snapshot " + std::to_string(id) + " holds " + std::to_string(got) +
                                " of its " + std::to_string(bytes) + " bytes");
      }
      STRATA_RETURN_IF_ERROR(txn.Commit());
    }
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<VectorIndex> index, VectorIndex::LoadGraph(file.path, IndexParams()));
    index_ = std::move(index);
    index_generation_ = generation;
    indexed_through_ = generation;
    snapshot_generation_ = generation;
    changed_since_snapshot_ = 0;
    return Status::Ok();
  }

  std::string url_;
  std::string schema_;  // current_schema() of the store's connections.
  PgStoreOptions options_;
  std::shared_ptr<Embedder> embedder_;
  std::string model_;

  std::mutex pool_mu_;
  std::vector<std::unique_ptr<pg::Conn>> idle_;  // Guarded by pool_mu_.

  // One write transaction at a time from this process (the advisory lock orders instances).
  std::mutex write_mu_;
  std::set<std::string> ensured_;  // Scope roots whose presets are known complete. Guarded by write_mu_.

  std::mutex listener_mu_;
  std::unique_ptr<pg::Conn> listener_;  // LISTENs on kChannel. Guarded by listener_mu_.
  uint64_t listener_connects_ = 0;      // Guarded by listener_mu_.

  // Searched under index_mu_ shared (ReadIndex); changed under it exclusive (WriteIndex). A writer waiting
  // holds index_turn_, so readers arriving after it wait instead of keeping it out (glibc prefers readers).
  std::mutex index_turn_;
  std::shared_mutex index_mu_;
  std::unique_ptr<VectorIndex> index_;
  // The generation index_ reflects; -1: to be rebuilt whole; -2: a local write skipped a generation, so the
  // index is caught up from indexed_through_ (the last generation it had fully applied).
  int64_t index_generation_ = -1;
  int64_t indexed_through_ = -1;
  // The snapshot index_ was loaded from (-1: built from the table); vectors changed in index_ since the
  // newest snapshot. Guarded by index_mu_.
  int64_t snapshot_generation_ = -1;

  int64_t changed_since_snapshot_ = 0;
  int64_t unindexed_written_ = 0;  // Vectors written while no index was built (a bulk load's; index_mu_).
  int64_t written_since_snapshot_ = 0;  // Of those, written by this instance (Flush saves a snapshot for them).

  // The thread that saves snapshots, started on the first request.
  std::mutex snapshot_mu_;
  std::condition_variable snapshot_cv_;
  bool snapshot_due_ = false;   // Guarded by snapshot_mu_.
  bool snapshot_forced_ = false;  // Guarded by snapshot_mu_: a due save not decided by the count (RequestSnapshot).
  bool snapshot_busy_ = false;  // Guarded by snapshot_mu_.
  bool snapshot_stop_ = false;  // Guarded by snapshot_mu_.
  Status snapshot_status_;      // The last save's. Guarded by snapshot_mu_.
  std::thread snapshot_thread_;

  QueryVectorCache query_cache_;
};

}  // namespace

Result<std::unique_ptr<ContextStore>> OpenPgStore(const std::string& url, PgStoreOptions options) {
  auto store = std::make_unique<PgStore>(url, std::move(options));
  STRATA_RETURN_IF_ERROR(store->Open().WithContext("context store " + pg::RedactUrl(url)));
  return std::unique_ptr<ContextStore>(std::move(store));
}

}  // namespace strata::memory
