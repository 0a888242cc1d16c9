// Sessions on PostgreSQL: the contract of session.h, shared by every Strata instance on the database
// (tables: docs/formats/postgres.md, "Sessions").
//
// A session's log is an append-only table of records (message, checkpoint, usage mark, system prompt)
// keyed by session, log version and sequence number. Appends add records to the live version; a revert
// or a compaction writes a new version (the old one stays, named as a rotation); a commit closes the live
// version by naming it in an archive row and opening an empty one, so phase 1 moves the messages without
// copying them, in one transaction.
//
// Every operation is one transaction that starts by reading the session's row: FOR UPDATE when it changes
// the session (instances take turns, waiting at most SessionsOptions::lock_wait), as a consistent snapshot
// when it only reads. Each change to the live log stores a new value of the sequence session_changes in
// the row; an instance keeps the logs it used in memory and reads one again only when that value moved
// (another instance appended, reverted or committed). Within the process, operations on one session take
// turns on a mutex first, so they do not hold pooled connections while waiting for each other.
//
// Trust boundary: rows are read as untrusted. A damaged row is kDataLoss naming the session, the table
// and the record, never a crash; other sessions are unaffected.
#include <algorithm>
#include <array>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "pg.h"
#include "session_common.h"
#include "strata/json/checked.h"
#include "strata/json/json_writer.h"
#include "strata/memory/uri.h"
#include "strata/message/message_json.h"
#include "strata/session/session.h"

namespace strata::session {
namespace {

using Json = nlohmann::json;
using internal::Account;
using internal::RefreshSummary;
using internal::StorableText;

// Version i+1 of the schema is kMigrations[i]; never edit a step once released, add one.
constexpr std::string_view kMigrations[] = {
    R"sql(
-- Every change to a session's live log takes the next value: instances compare it with the value of the
-- log they hold in memory (never reused, so a deleted and re-created session cannot look unchanged).
CREATE SEQUENCE session_changes;
CREATE TABLE sessions(
  id TEXT PRIMARY KEY,
  user_id TEXT NOT NULL,
  agent_id TEXT NOT NULL,
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL,
  messages BIGINT NOT NULL DEFAULT 0,
  turns BIGINT NOT NULL DEFAULT 0,
  tokens BIGINT NOT NULL DEFAULT 0,
  contexts_used BIGINT NOT NULL DEFAULT 0,
  skills_used BIGINT NOT NULL DEFAULT 0,
  memories_extracted BIGINT NOT NULL DEFAULT 0,
  commits BIGINT NOT NULL DEFAULT 0,
  revisions BIGINT NOT NULL DEFAULT 0,
  contexts TEXT NOT NULL DEFAULT '[]',
  abstract TEXT NOT NULL DEFAULT '',
  overview TEXT NOT NULL DEFAULT '',
  version BIGINT NOT NULL DEFAULT 1,
  last_version BIGINT NOT NULL DEFAULT 1,
  last_rotation BIGINT NOT NULL DEFAULT 0,
  last_archive BIGINT NOT NULL DEFAULT 0,
  change BIGINT NOT NULL DEFAULT nextval('session_changes'));
CREATE TABLE session_records(
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  version BIGINT NOT NULL,
  seq BIGINT NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('message', 'checkpoint', 'usage', 'system')),
  value BIGINT,
  body TEXT,
  PRIMARY KEY (session_id, version, seq));
CREATE TABLE session_rotations(
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  number BIGINT NOT NULL,
  version BIGINT NOT NULL,
  created_ms BIGINT NOT NULL,
  PRIMARY KEY (session_id, number));
CREATE TABLE session_archives(
  session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
  number BIGINT NOT NULL,
  version BIGINT NOT NULL,
  state TEXT NOT NULL,
  error TEXT NOT NULL DEFAULT '',
  messages BIGINT NOT NULL,
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL,
  PRIMARY KEY (session_id, number));
CREATE INDEX session_archives_unfinished ON session_archives(session_id, number)
  WHERE state NOT IN ('done', 'failed');
CREATE TABLE session_archive_notes(
  id BIGSERIAL PRIMARY KEY,
  session_id TEXT NOT NULL,
  archive BIGINT NOT NULL,
  note TEXT NOT NULL,
  at_ms BIGINT NOT NULL,
  FOREIGN KEY (session_id, archive) REFERENCES session_archives(session_id, number) ON DELETE CASCADE);
CREATE INDEX session_archive_notes_by_archive ON session_archive_notes(session_id, archive, id);
-- Phase 2's resumable work per archive (summary.md, candidates.json, diff.json).
CREATE TABLE session_archive_files(
  session_id TEXT NOT NULL,
  archive BIGINT NOT NULL,
  name TEXT NOT NULL,
  content TEXT NOT NULL,
  PRIMARY KEY (session_id, archive, name),
  FOREIGN KEY (session_id, archive) REFERENCES session_archives(session_id, number) ON DELETE CASCADE);
)sql",
    // 2: a session's incarnation (session.h, "Session references"); '' for sessions made before it.
    R"sql(
ALTER TABLE sessions ADD COLUMN incarnation TEXT NOT NULL DEFAULT '';
)sql",
    // 3: where an imported conversation came from (SessionInfo::title, source); '' for sessions begun here.
    R"sql(
ALTER TABLE sessions ADD COLUMN title TEXT NOT NULL DEFAULT '', ADD COLUMN source TEXT NOT NULL DEFAULT '';
)sql",
};

constexpr std::string_view kRowColumns =
    "id, user_id, agent_id, created_ms, updated_ms, messages, turns, tokens, contexts_used, skills_used, "
    "memories_extracted, commits, revisions, contexts, abstract, overview, version, last_version, last_rotation, "
    "last_archive, change, incarnation, title, source";

// A statement carries at most 65535 parameters: batches of records are inserted this many rows at a time.
constexpr size_t kRecordsPerInsert = 1000;
// Logs kept in memory between operations; beyond it the least recently used is dropped (and read from the
// database again when next used).
constexpr size_t kCachedLogs = 256;
// Operations on sessions whose ids hash alike take turns within the process (the database row lock is
// what orders instances).
constexpr size_t kStripes = 64;

std::string JsonText(const Json& j) { return j.dump(-1, ' ', false, Json::error_handler_t::replace); }

std::string RotationName(int64_t number) { return "messages_" + std::to_string(number) + ".jsonl"; }

// A column read as untrusted: a NULL, a non-number or a missing column is kDataLoss naming `where`.
Result<int64_t> IntAt(const pg::Rows& rows, int row, int col, const std::string& where) {
  Result<int64_t> v = rows.Int(row, col);
  if (!v.ok()) return Status::DataLoss(where + ": " + v.status().message());
  return v;
}
Result<std::string> TextAt(const pg::Rows& rows, int row, int col, const std::string& where) {
  if (rows.IsNull(row, col)) return Status::DataLoss(where + ": column " + std::to_string(col) + " is NULL");
  Result<std::string> v = rows.Text(row, col);
  if (!v.ok()) return Status::DataLoss(where + ": " + v.status().message());
  return v;
}

// A sessions row: what SessionInfo says, and where the log stands.
struct Row {
  SessionInfo info;
  int64_t version = 1;        // The live log version.
  int64_t last_version = 1;   // Versions are numbered from 1 and never reused.
  int64_t last_rotation = 0;  // Rotations are numbered from 1 and never reused.
  int64_t last_archive = 0;   // So are archives.
  int64_t change = 0;         // A value of session_changes, new with every change to the live log.
};

Result<Row> ReadRow(const pg::Rows& r, int i) {
  Row row;
  SessionInfo& info = row.info;
  STRATA_ASSIGN_OR_RETURN(info.id, TextAt(r, i, 0, "a row of sessions"));
  const std::string where = "session " + info.id + " (table sessions)";
  if (Status s = ValidateSessionId(info.id); !s.ok()) return Status::DataLoss(where + ": " + s.message());
  STRATA_ASSIGN_OR_RETURN(info.user, TextAt(r, i, 1, where));
  STRATA_ASSIGN_OR_RETURN(info.agent, TextAt(r, i, 2, where));
  // The owners become URIs (strata://user/<id>) in phase 2: an edited id must not get that far.
  for (auto [what, id] : {std::pair{"user", &info.user}, std::pair{"agent", &info.agent}}) {
    if (Status s = internal::ValidateOwnerId(*id, what); !s.ok()) return Status::DataLoss(where + ": " + s.message());
  }
  STRATA_ASSIGN_OR_RETURN(info.created_ms, IntAt(r, i, 3, where));
  STRATA_ASSIGN_OR_RETURN(info.updated_ms, IntAt(r, i, 4, where));
  SessionStats& s = info.stats;
  int col = 5;
  for (int64_t* slot : {&s.messages, &s.turns, &s.tokens, &s.contexts_used, &s.skills_used, &s.memories_extracted,
                        &s.commits, &s.revisions}) {
    STRATA_ASSIGN_OR_RETURN(*slot, IntAt(r, i, col++, where));
  }
  STRATA_ASSIGN_OR_RETURN(std::string contexts, TextAt(r, i, 13, where));
  Json j = json::ParseOrDiscard<Json>(contexts);
  if (!j.is_array()) return Status::DataLoss(where + ": contexts is not a JSON array");
  for (const Json& c : j) {
    if (!c.is_string())
      return Status::DataLoss(where + ": contexts holds a " + std::string(json::TypeName(c)) + ", not a URI");
    info.contexts.push_back(c.get<std::string>());
  }
  STRATA_ASSIGN_OR_RETURN(info.abstract_text, TextAt(r, i, 14, where));
  STRATA_ASSIGN_OR_RETURN(info.overview, TextAt(r, i, 15, where));
  STRATA_ASSIGN_OR_RETURN(row.version, IntAt(r, i, 16, where));
  STRATA_ASSIGN_OR_RETURN(row.last_version, IntAt(r, i, 17, where));
  STRATA_ASSIGN_OR_RETURN(row.last_rotation, IntAt(r, i, 18, where));
  STRATA_ASSIGN_OR_RETURN(row.last_archive, IntAt(r, i, 19, where));
  STRATA_ASSIGN_OR_RETURN(row.change, IntAt(r, i, 20, where));
  STRATA_ASSIGN_OR_RETURN(info.incarnation, TextAt(r, i, 21, where));
  STRATA_ASSIGN_OR_RETURN(info.title, TextAt(r, i, 22, where));
  STRATA_ASSIGN_OR_RETURN(info.source, TextAt(r, i, 23, where));
  if (Status bad = internal::ValidateIncarnation(info.incarnation); !bad.ok()) return Status::DataLoss(where + ": " + bad.message());
  if (row.version < 1 || row.version > row.last_version) {
    return Status::DataLoss(where + ": live log version " + std::to_string(row.version) + " is not one of 1.." +
                            std::to_string(row.last_version));
  }
  return row;
}

// One version of a session's log, replayed from its records the way ContextLog::Restore replays a file.
struct LiveLog {
  struct Mark {
    int64_t id = 0;
    int64_t messages = 0;  // Messages before it.
    int64_t seq = 0;
  };
  struct Usage {
    UsageMarkInfo info;
    int64_t seq = 0;
  };
  int64_t change = -1;  // The sessions.change this state corresponds to.
  int64_t version = 1;
  int64_t next_seq = 1;  // Sequence 0 is kept for the system prompt a new version starts with.
  std::optional<std::string> system_prompt;
  std::vector<Message> messages;
  std::vector<Mark> checkpoints;
  int64_t next_checkpoint = 0;
  int64_t usage_tokens = 0;
  std::vector<Usage> usages;
  std::vector<std::string> rotations;  // Of the session, for Log().
  uint64_t last_used = 0;              // For the cache's eviction.
};

Result<LiveLog> ReadLog(pg::Conn& conn, const std::string& id, int64_t version) {
  STRATA_ASSIGN_OR_RETURN(pg::Rows r, conn.Exec("SELECT seq, kind, value, body FROM session_records "
                                                "WHERE session_id = $1 AND version = $2 ORDER BY seq",
                                                {id, version}));
  LiveLog log;
  log.version = version;
  const std::string table = "session " + id + " (table session_records, version " + std::to_string(version);
  for (int i = 0; i < r.size(); ++i) {
    STRATA_ASSIGN_OR_RETURN(int64_t seq, IntAt(r, i, 0, table + ")"));
    const std::string where = table + ", seq " + std::to_string(seq) + ")";
    STRATA_ASSIGN_OR_RETURN(std::string kind, TextAt(r, i, 1, where));
    if (kind == "message" || kind == "system") {
      STRATA_ASSIGN_OR_RETURN(std::string body, TextAt(r, i, 3, where));
      if (kind == "message") {
        Result<Message> m = ParseMessage(body);
        if (!m.ok()) return Status::DataLoss(where + ": the stored message does not parse: " + m.status().message());
        log.messages.push_back(std::move(*m));
      } else {
        Json j = json::ParseOrDiscard<Json>(body);
        if (!j.is_string()) return Status::DataLoss(where + ": the stored system prompt is not a JSON string");
        log.system_prompt = j.get<std::string>();
      }
    } else if (kind == "checkpoint" || kind == "usage") {
      STRATA_ASSIGN_OR_RETURN(int64_t value, IntAt(r, i, 2, where));
      if (value < 0) return Status::DataLoss(where + ": a " + kind + " of " + std::to_string(value));
      int64_t at = static_cast<int64_t>(log.messages.size());
      if (kind == "checkpoint") {
        log.checkpoints.push_back({value, at, seq});
        log.next_checkpoint = value + 1;
      } else {
        log.usage_tokens = value;
        log.usages.push_back({{at, value, static_cast<int64_t>(log.checkpoints.size())}, seq});
      }
    } else {
      return Status::DataLoss(where + ": unknown record kind '" + kind + "'");
    }
    log.next_seq = std::max(log.next_seq, seq + 1);
  }
  return log;
}

// A record to insert.
struct Record {
  std::string_view kind;
  std::optional<int64_t> value;
  std::optional<std::string> body;
};

Record MessageRecord(const Message& m) { return {"message", std::nullopt, MessageToJson(m)}; }
Record PromptRecord(const std::string& prompt) { return {"system", std::nullopt, JsonText(Json(prompt))}; }

// Inserts `records` into version `version` of session `id`, numbered from `first_seq`.
Status InsertRecords(pg::Conn& conn, const std::string& id, int64_t version, int64_t first_seq,
                     std::span<const Record> records) {
  for (size_t begin = 0; begin < records.size(); begin += kRecordsPerInsert) {
    size_t end = std::min(records.size(), begin + kRecordsPerInsert);
    std::string sql = "INSERT INTO session_records(session_id, version, seq, kind, value, body) VALUES ";
    std::vector<pg::Param> params = {id, version};
    for (size_t i = begin; i < end; ++i) {
      size_t p = params.size();
      sql += (i == begin ? "" : ", ");
      sql += "($1, $2, $" + std::to_string(p + 1) + ", $" + std::to_string(p + 2) + ", $" + std::to_string(p + 3) +
             "::bigint, $" + std::to_string(p + 4) + ")";
      const Record& rec = records[i];
      params.emplace_back(first_seq + static_cast<int64_t>(i));
      params.emplace_back(rec.kind);
      params.push_back(rec.value ? pg::Param(*rec.value) : pg::Param(std::nullopt));
      params.push_back(rec.body ? pg::Param(*rec.body) : pg::Param(std::nullopt));
    }
    STRATA_RETURN_IF_ERROR(conn.Exec(sql, std::span<const pg::Param>(params)).status());
  }
  return Status::Ok();
}

// The records of `messages`, refusing invalid UTF-8 as the file log does.
Result<std::vector<Record>> MessageRecords(std::span<const Message> messages) {
  std::vector<Record> out;
  out.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    std::string bad = FindInvalidUtf8(messages[i]);
    if (!bad.empty()) {
      return Status::InvalidArgument("message " + std::to_string(i) + ": " + bad + " is not valid UTF-8");
    }
    out.push_back(MessageRecord(messages[i]));
  }
  return out;
}

// At most `max` connections, opened when first needed and kept.
class Pool {
 public:
  Pool(std::string url, int max) : url_(std::move(url)), max_(static_cast<size_t>(std::max(1, max))) {}

  // A connection borrowed from the pool until destruction.
  class Lease {
   public:
    Lease(Pool* pool, std::unique_ptr<pg::Conn> conn) : pool_(pool), conn_(std::move(conn)) {}
    Lease(Lease&& other) noexcept : pool_(other.pool_), conn_(std::move(other.conn_)) {}
    Lease& operator=(Lease&&) = delete;
    Lease(const Lease&) = delete;  // Returns its connection once.
    ~Lease() {
      if (conn_) pool_->Return(std::move(conn_));
    }
    pg::Conn& operator*() { return *conn_; }
    pg::Conn* operator->() { return conn_.get(); }

   private:
    Pool* pool_;
    std::unique_ptr<pg::Conn> conn_;
  };

  Result<Lease> Acquire() {
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return !idle_.empty() || open_ < max_; });
      if (!idle_.empty()) {
        std::unique_ptr<pg::Conn> conn = std::move(idle_.back());
        idle_.pop_back();
        return Lease(this, std::move(conn));
      }
      ++open_;
    }
    Result<std::unique_ptr<pg::Conn>> conn = pg::Conn::Connect(url_);
    if (!conn.ok()) {
      std::lock_guard lock(mu_);
      --open_;
      cv_.notify_one();
      return conn.status();
    }
    return Lease(this, std::move(*conn));
  }

 private:
  void Return(std::unique_ptr<pg::Conn> conn) {
    std::lock_guard lock(mu_);
    idle_.push_back(std::move(conn));
    cv_.notify_one();
  }

  const std::string url_;
  const size_t max_;
  std::mutex mu_;  // Guards the two fields below.
  std::condition_variable cv_;
  std::vector<std::unique_ptr<pg::Conn>> idle_;
  size_t open_ = 0;  // Connections idle or lent; at most max_.
};

class PgSessions final : public Sessions {
 public:
  using Sessions::Log;
  PgSessions(const std::string& url, SessionsOptions options)
      : options_(options), pool_(url, options.pg_connections) {
    if (options_.clock == nullptr) options_.clock = SystemClock();
  }

  Status Open() {
    if (options_.queue == nullptr) return Status::InvalidArgument("sessions: a job queue is required");
    STRATA_RETURN_IF_ERROR(RegisterContextRefPart());
    STRATA_ASSIGN_OR_RETURN(Pool::Lease conn, pool_.Acquire());
    STRATA_RETURN_IF_ERROR(pg::Migrate(*conn, "sessions", kMigrations));
    // Phase 1 enqueues after its transaction: a crash in between leaves an archive without its job.
    // Enqueueing is idempotent, so every unfinished archive is enqueued (again).
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, conn->Exec("SELECT a.session_id, a.number, s.incarnation FROM session_archives a "
                                                   "JOIN sessions s ON s.id = a.session_id "
                                                   "WHERE a.state IN ('archived', 'summarized', 'extracted') "
                                                   "ORDER BY a.session_id, a.number"));
    for (int i = 0; i < r.size(); ++i) {
      SessionInfo info;
      STRATA_ASSIGN_OR_RETURN(info.id, TextAt(r, i, 0, "table session_archives"));
      STRATA_ASSIGN_OR_RETURN(int64_t number, IntAt(r, i, 1, "session " + info.id + " (table session_archives)"));
      STRATA_ASSIGN_OR_RETURN(info.incarnation, TextAt(r, i, 2, "session " + info.id + " (table sessions)"));
      // One damaged session must not take the others down: its own operations report the damage.
      if (!ValidateSessionId(info.id).ok() || !internal::ValidateIncarnation(info.incarnation).ok() || number < 1 ||
          number > 999'999'999) {
        continue;
      }
      Result<std::optional<std::string>> failed =
          internal::EnqueueUnfinishedCommit(*options_.queue, info, static_cast<int>(number));
      if (!failed.ok()) return failed.status().WithContext("session " + info.id);
      if (*failed) {
        STRATA_RETURN_IF_ERROR(SetArchiveState(SessionRef(info), static_cast<int>(number), ArchiveState::kFailed, **failed)
                                   .WithContext("session " + info.id));
      }
    }
    return Status::Ok();
  }

  Result<SessionInfo> Create(std::string_view user, std::string_view agent, std::string_view id,
                             std::optional<std::string_view> incarnation) override {
    STRATA_RETURN_IF_ERROR(internal::ValidateOwnerId(user, "user"));
    STRATA_RETURN_IF_ERROR(internal::ValidateOwnerId(agent, "agent"));
    if (incarnation) STRATA_RETURN_IF_ERROR(internal::ValidateIncarnation(*incarnation));
    std::string sid = id.empty() ? internal::NewSessionId(NowMs()) : std::string(id);
    STRATA_RETURN_IF_ERROR(ValidateSessionId(sid));
    STRATA_ASSIGN_OR_RETURN(Pool::Lease conn, pool_.Acquire());
    Row row;
    row.info.id = sid;
    row.info.user = std::string(user);
    row.info.agent = std::string(agent);
    row.info.incarnation = incarnation ? std::string(*incarnation) : internal::NewIncarnation();
    row.info.created_ms = row.info.updated_ms = NowMs();
    STRATA_RETURN_IF_ERROR(InsertRow(*conn, row));
    return row.info;
  }

  Result<SessionInfo> Get(std::string_view id) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(Pool::Lease conn, pool_.Acquire());
    STRATA_ASSIGN_OR_RETURN(Row row, SelectRow(*conn, ref, ""));
    return row.info;
  }

  Result<std::vector<SessionInfo>> List() override {
    STRATA_ASSIGN_OR_RETURN(Pool::Lease conn, pool_.Acquire());
    // Byte order, as the file backend sorts directory names.
    STRATA_ASSIGN_OR_RETURN(
        pg::Rows r, conn->Exec("SELECT " + std::string(kRowColumns) + " FROM sessions ORDER BY id COLLATE \"C\""));
    std::vector<SessionInfo> out;
    for (int i = 0; i < r.size(); ++i) {
      Result<Row> row = ReadRow(r, i);
      if (row.ok()) out.push_back(std::move(row->info));  // A damaged session is reported by its own operations.
    }
    return out;
  }

  Status Add(std::string_view id, const Message& message) override {
    return Add(id, std::span<const Message>(&message, 1));
  }

  Status Add(std::string_view id, std::span<const Message> messages) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    STRATA_ASSIGN_OR_RETURN(std::vector<Record> records, MessageRecords(messages));
    return Write(id, Lock::kUpdate, [&](Op& op) -> Status {
      STRATA_ASSIGN_OR_RETURN(LiveLog * log, LoadLog(op));
      STRATA_RETURN_IF_ERROR(InsertRecords(*op.conn, op.row.info.id, log->version, log->next_seq, records));
      log->next_seq += static_cast<int64_t>(records.size());
      for (const Message& m : messages) {
        log->messages.push_back(m);
        Account(m, op.row.info, +1);
      }
      return SaveRow(op, /*refresh=*/true);
    });
  }

  Status RecordUsage(std::string_view id, int64_t tokens) override {
    if (tokens < 0) return Status::InvalidArgument("a usage mark must be a non-negative token count");
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    return Write(id, Lock::kUpdate, [&](Op& op) -> Status {
      STRATA_ASSIGN_OR_RETURN(LiveLog * log, LoadLog(op));
      Record rec{"usage", tokens, std::nullopt};
      STRATA_RETURN_IF_ERROR(InsertRecords(*op.conn, op.row.info.id, log->version, log->next_seq, {&rec, 1}));
      log->usages.push_back(
          {{static_cast<int64_t>(log->messages.size()), tokens, static_cast<int64_t>(log->checkpoints.size())},
           log->next_seq++});
      log->usage_tokens = tokens;
      op.row.info.stats.revisions += 1;
      return SaveRow(op, /*refresh=*/true);
    });
  }

  Status SetSystemPrompt(std::string_view id, std::string_view prompt) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    return Write(id, Lock::kUpdate, [&](Op& op) -> Status {
      STRATA_ASSIGN_OR_RETURN(LiveLog * log, LoadLog(op));
      if (log->system_prompt && *log->system_prompt == prompt) return Status::Ok();
      size_t bad = 0;
      if (!json::IsValidUtf8(prompt, &bad)) {
        return Status::InvalidArgument("system prompt is not valid UTF-8 at byte " + std::to_string(bad));
      }
      // Appended (the latest system record is the prompt): the previous prompt stays in the table.
      Record rec = PromptRecord(std::string(prompt));
      STRATA_RETURN_IF_ERROR(InsertRecords(*op.conn, op.row.info.id, log->version, log->next_seq, {&rec, 1}));
      log->next_seq += 1;
      log->system_prompt = std::string(prompt);
      op.row.info.stats.revisions += 1;
      return SaveRow(op, /*refresh=*/true);
    });
  }

  Result<CheckpointInfo> Checkpoint(std::string_view id) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    return Write(id, Lock::kUpdate, [&](Op& op) -> Result<CheckpointInfo> {
      STRATA_ASSIGN_OR_RETURN(LiveLog * log, LoadLog(op));
      int64_t checkpoint = log->next_checkpoint;
      Record rec{"checkpoint", checkpoint, std::nullopt};
      STRATA_RETURN_IF_ERROR(InsertRecords(*op.conn, op.row.info.id, log->version, log->next_seq, {&rec, 1}));
      log->checkpoints.push_back({checkpoint, static_cast<int64_t>(log->messages.size()), log->next_seq++});
      log->next_checkpoint = checkpoint + 1;
      op.row.info.stats.revisions += 1;
      STRATA_RETURN_IF_ERROR(SaveRow(op, /*refresh=*/true));
      return CheckpointInfo{checkpoint, static_cast<int64_t>(log->messages.size()),
                            internal::CheckpointTag(op.row.info, checkpoint, internal::PrefixDigests(log->messages).back())};
    });
  }

  Result<SessionLog> Log(std::string_view id, bool tags) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    return Read(id, /*need_log=*/true, [&](Op& op) -> Result<SessionLog> {
      const LiveLog& log = *op.log;
      SessionLog out;
      out.system_prompt = log.system_prompt;
      out.messages = log.messages;
      std::vector<uint64_t> digests;
      if (tags && !log.checkpoints.empty()) digests = internal::PrefixDigests(log.messages);
      for (const LiveLog::Mark& c : log.checkpoints) {
        out.checkpoints.push_back(
            {c.id, c.messages,
             tags ? internal::CheckpointTag(op.row.info, c.id, digests[static_cast<size_t>(c.messages)]) : ""});
      }
      out.usage_tokens = log.usage_tokens;
      for (const LiveLog::Usage& u : log.usages) out.usage_marks.push_back(u.info);
      out.rotations = log.rotations;
      return out;
    });
  }

  Result<SessionInfo> Revert(std::string_view id, const CheckpointRef& checkpoint_ref) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    const int64_t checkpoint = checkpoint_ref.id;
    return Write(id, Lock::kUpdate, [&](Op& op) -> Result<SessionInfo> {
      STRATA_ASSIGN_OR_RETURN(LiveLog * log, LoadLog(op));
      SessionInfo& info = op.row.info;
      auto mark = std::find_if(log->checkpoints.begin(), log->checkpoints.end(),
                               [&](const LiveLog::Mark& m) { return m.id == checkpoint; });
      if (mark == log->checkpoints.end()) {
        return Status::NotFound("session " + info.id + " has no checkpoint " + std::to_string(checkpoint) +
                                " in its current messages (it has " + std::to_string(log->next_checkpoint) +
                                "; a commit archives them)");
      }
      STRATA_RETURN_IF_ERROR(internal::CheckCheckpointTag(
          info, checkpoint_ref, std::span(log->messages).first(static_cast<size_t>(mark->messages))));
      const LiveLog::Mark target = *mark;
      // The new version: the system prompt, then every record before the checkpoint.
      int64_t version = NewVersion(op);
      STRATA_RETURN_IF_ERROR(
          op.conn
              ->Exec("INSERT INTO session_records(session_id, version, seq, kind, value, body) "
                     "SELECT session_id, $3, seq, kind, value, body FROM session_records "
                     "WHERE session_id = $1 AND version = $2 AND seq > 0 AND seq < $4 AND kind <> 'system'",
                     {info.id, log->version, version, target.seq})
              .status());
      if (log->system_prompt) {
        Record rec = PromptRecord(*log->system_prompt);
        STRATA_RETURN_IF_ERROR(InsertRecords(*op.conn, info.id, version, 0, {&rec, 1}));
      }
      STRATA_RETURN_IF_ERROR(KeepAsRotation(op));
      for (size_t i = static_cast<size_t>(target.messages); i < log->messages.size(); ++i) {
        Account(log->messages[i], info, -1);
      }
      log->messages.resize(static_cast<size_t>(target.messages));
      log->checkpoints.erase(mark, log->checkpoints.end());
      std::erase_if(log->usages, [&](const LiveLog::Usage& u) { return u.seq >= target.seq; });
      log->usage_tokens = log->usages.empty() ? 0 : log->usages.back().info.tokens;
      log->next_checkpoint = log->checkpoints.empty() ? 0 : log->checkpoints.back().id + 1;
      log->next_seq = target.seq;
      log->version = version;
      op.row.version = version;
      info.stats.revisions += 1;
      STRATA_RETURN_IF_ERROR(SaveRow(op, /*refresh=*/true));
      return info;
    });
  }

  Result<SessionInfo> Replace(std::string_view id, std::span<const Message> messages,
                              std::optional<int64_t> token_count, const std::vector<Message>* expected) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    return Write(id, Lock::kUpdate, [&](Op& op) -> Result<SessionInfo> {
      STRATA_ASSIGN_OR_RETURN(LiveLog * log, LoadLog(op));
      SessionInfo& info = op.row.info;
      if (expected != nullptr && log->messages != *expected) {
        return Status::FailedPrecondition("session " + info.id +
                                          " changed since its messages were read; read them again");
      }
      if (token_count && *token_count < 0) {
        return Status::InvalidArgument("token count must be non-negative, got " + std::to_string(*token_count));
      }
      // What ContextLog::Rewrite writes: the system prompt, checkpoint 0, the messages, a usage mark.
      STRATA_ASSIGN_OR_RETURN(std::vector<Record> records, MessageRecords(messages));
      records.insert(records.begin(), Record{"checkpoint", 0, std::nullopt});
      if (token_count) records.push_back(Record{"usage", *token_count, std::nullopt});
      int64_t version = NewVersion(op);
      if (log->system_prompt) {
        Record rec = PromptRecord(*log->system_prompt);
        STRATA_RETURN_IF_ERROR(InsertRecords(*op.conn, info.id, version, 0, {&rec, 1}));
      }
      STRATA_RETURN_IF_ERROR(InsertRecords(*op.conn, info.id, version, 1, records));
      STRATA_RETURN_IF_ERROR(KeepAsRotation(op));
      for (const Message& m : log->messages) Account(m, info, -1);
      for (const Message& m : messages) Account(m, info, +1);
      LiveLog next;
      next.version = version;
      next.next_seq = 1 + static_cast<int64_t>(records.size());
      next.system_prompt = log->system_prompt;
      next.messages.assign(messages.begin(), messages.end());
      next.checkpoints.push_back({0, 0, 1});
      next.next_checkpoint = 1;
      if (token_count) {
        next.usage_tokens = *token_count;
        next.usages.push_back({{static_cast<int64_t>(messages.size()), *token_count, 1}, next.next_seq - 1});
      }
      next.rotations = std::move(log->rotations);
      *log = std::move(next);
      op.row.version = version;
      info.stats.revisions += 1;
      STRATA_RETURN_IF_ERROR(SaveRow(op, /*refresh=*/true));
      return info;
    });
  }

  Result<SessionInfo> Fork(std::string_view id, std::string_view new_id,
                           const std::optional<CheckpointRef>& checkpoint) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    // One transaction: the source is read under a share lock (no change to it can slip in) and the fork is
    // created whole, or not at all.
    return Write(id, Lock::kShare, [&](Op& op) -> Result<SessionInfo> {
      STRATA_ASSIGN_OR_RETURN(LiveLog * log, LoadLog(op));
      const SessionInfo& source = op.row.info;
      size_t end = log->messages.size();
      if (checkpoint) {
        auto mark = std::find_if(log->checkpoints.begin(), log->checkpoints.end(),
                                 [&](const LiveLog::Mark& m) { return m.id == checkpoint->id; });
        if (mark == log->checkpoints.end()) {
          return Status::NotFound("session " + source.id + " has no checkpoint " + std::to_string(checkpoint->id) +
                                  " in its current messages");
        }
        end = static_cast<size_t>(mark->messages);
        STRATA_RETURN_IF_ERROR(
            internal::CheckCheckpointTag(source, *checkpoint, std::span(log->messages).first(end)));
      }
      std::string sid = new_id.empty() ? internal::NewSessionId(NowMs()) : std::string(new_id);
      STRATA_RETURN_IF_ERROR(ValidateSessionId(sid));
      Row fork;
      fork.info.id = sid;
      fork.info.user = source.user;
      fork.info.agent = source.agent;
      fork.info.incarnation = internal::NewIncarnation();
      fork.info.created_ms = fork.info.updated_ms = NowMs();
      const std::vector<Message> copied(log->messages.begin(), log->messages.begin() + static_cast<ptrdiff_t>(end));
      for (const Message& m : copied) Account(m, fork.info, +1);
      RefreshSummary(copied, fork.info);
      STRATA_RETURN_IF_ERROR(InsertRow(*op.conn, fork));
      if (log->system_prompt) {
        Record rec = PromptRecord(*log->system_prompt);
        STRATA_RETURN_IF_ERROR(InsertRecords(*op.conn, sid, fork.version, 0, {&rec, 1}));
      }
      STRATA_ASSIGN_OR_RETURN(std::vector<Record> records, MessageRecords(copied));
      STRATA_RETURN_IF_ERROR(InsertRecords(*op.conn, sid, fork.version, 1, records));
      return fork.info;
    });
  }

  Result<std::vector<Message>> Messages(std::string_view id) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    return Read(id, /*need_log=*/true, [&](Op& op) -> Result<std::vector<Message>> { return op.log->messages; });
  }

  Status Delete(std::string_view id, bool force) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    SessionInfo deleted;
    Status removed = Write(id, Lock::kUpdate, [&](Op& op) -> Status {
      const std::string& sid = op.row.info.id;
      if (!force) {
        // Any state but done and failed (a damaged one included) is phase 2 not finished.
        STRATA_ASSIGN_OR_RETURN(pg::Rows pending,
                                op.conn->Exec("SELECT number FROM session_archives WHERE session_id = $1 AND "
                                              "state NOT IN ('done', 'failed') ORDER BY number LIMIT 1",
                                              {sid}));
        if (pending.size() > 0) {
          STRATA_ASSIGN_OR_RETURN(int64_t number, IntAt(pending, 0, 0, "session " + sid + " (table session_archives)"));
          return Status::FailedPrecondition("session " + sid + ": phase 2 of archive " + std::to_string(number) +
                                            " has not finished; wait for it, or delete with force");
        }
      }
      // Records, rotations, archives and notes go with the row (ON DELETE CASCADE).
      STRATA_RETURN_IF_ERROR(op.conn->Exec("DELETE FROM sessions WHERE id = $1", {sid}).status());
      op.log.reset();
      deleted = op.row.info;
      return Status::Ok();
    });
    if (!removed.ok()) return removed;
    // Its phase-2 jobs go with it (a running one's worker can no longer finish it). A crash before this
    // leaves jobs whose session is gone: a worker removes them when it claims them.
    return options_.queue->RemoveKey(CommitJobKey(deleted));
  }

  Result<CommitTicket> Commit(std::string_view id) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    CommitTicket ticket;
    SessionInfo committed_info;
    // The job is enqueued after the transaction (a job must never name an archive that is not there yet),
    // still inside a per-session advisory lock that the commits of all instances take: so the jobs of one
    // session are enqueued in archive order, and phase 2 runs them in that order.
    Status committed = Write(
        id, Lock::kUpdate,
        [&](Op& op) -> Status {
          STRATA_ASSIGN_OR_RETURN(LiveLog * log, LoadLog(op));
          SessionInfo& info = op.row.info;
          int64_t count = static_cast<int64_t>(log->messages.size());
          if (count == 0) return Status::FailedPrecondition("session " + info.id + " has no messages to commit");
          int64_t number = op.row.last_archive + 1;
          int64_t now = NowMs();
          // The one step that moves the messages: the live version becomes the archive's, a new one opens.
          STRATA_RETURN_IF_ERROR(
              op.conn
                  ->Exec("INSERT INTO session_archives(session_id, number, version, state, messages, "
                         "created_ms, updated_ms) VALUES ($1, $2, $3, 'archived', $4, $5, $5)",
                         {info.id, number, log->version, count, now})
                  .status());
          LiveLog next;
          next.version = NewVersion(op);
          // The system prompt is the session's, not the archived messages': the new version starts with it.
          if (log->system_prompt) {
            Record rec = PromptRecord(*log->system_prompt);
            STRATA_RETURN_IF_ERROR(InsertRecords(*op.conn, info.id, next.version, 0, {&rec, 1}));
            next.system_prompt = log->system_prompt;
          }
          next.rotations = std::move(log->rotations);
          *log = std::move(next);
          op.row.version = log->version;
          op.row.last_archive = number;
          info.stats.commits += 1;
          STRATA_RETURN_IF_ERROR(SaveRow(op, /*refresh=*/false));
          ticket.archive = static_cast<int>(number);
          ticket.messages = count;
          committed_info = info;
          return Status::Ok();
        },
        [&]() -> Status {
          STRATA_ASSIGN_OR_RETURN(ticket.job_id, Enqueue(committed_info, ticket.archive));
          return Status::Ok();
        });
    if (!committed.ok()) return committed;
    return ticket;
  }

  Result<std::vector<ArchiveInfo>> Archives(std::string_view id) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    return Read(id, /*need_log=*/false, [&](Op& op) -> Result<std::vector<ArchiveInfo>> {
      const std::string& sid = op.row.info.id;
      STRATA_ASSIGN_OR_RETURN(pg::Rows r, op.conn->Exec("SELECT number, state, error, messages FROM session_archives "
                                                        "WHERE session_id = $1 ORDER BY number",
                                                        {sid}));
      STRATA_ASSIGN_OR_RETURN(pg::Rows notes, op.conn->Exec("SELECT archive, note FROM session_archive_notes "
                                                            "WHERE session_id = $1 ORDER BY id",
                                                            {sid}));
      std::map<int64_t, std::vector<std::string>> notes_of;
      for (int i = 0; i < notes.size(); ++i) {
        const std::string where = "session " + sid + " (table session_archive_notes)";
        STRATA_ASSIGN_OR_RETURN(int64_t archive, IntAt(notes, i, 0, where));
        STRATA_ASSIGN_OR_RETURN(std::string note, TextAt(notes, i, 1, where));
        notes_of[archive].push_back(std::move(note));
      }
      std::vector<ArchiveInfo> out;
      for (int i = 0; i < r.size(); ++i) {
        STRATA_ASSIGN_OR_RETURN(ArchiveInfo a, ReadArchive(r, i, sid));
        a.notes = std::move(notes_of[a.number]);
        out.push_back(std::move(a));
      }
      return out;
    });
  }

  Result<std::vector<Message>> ArchiveMessages(std::string_view id, int archive) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    return Read(id, /*need_log=*/false, [&](Op& op) -> Result<std::vector<Message>> {
      const std::string& sid = op.row.info.id;
      STRATA_ASSIGN_OR_RETURN(pg::Rows r, op.conn->Exec("SELECT version FROM session_archives "
                                                        "WHERE session_id = $1 AND number = $2",
                                                        {sid, archive}));
      if (r.size() == 0) return Status::NotFound("session " + sid + " has no archive " + std::to_string(archive));
      STRATA_ASSIGN_OR_RETURN(
          int64_t version,
          IntAt(r, 0, 0, "session " + sid + " (table session_archives, archive " + std::to_string(archive) + ")"));
      STRATA_ASSIGN_OR_RETURN(LiveLog log, ReadLog(*op.conn, sid, version));
      return std::move(log.messages);
    });
  }

  Status RecordExtracted(std::string_view id, int64_t count) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(Pool::Lease conn, pool_.Acquire());
    // One statement: atomic without the row lock, and the log (and so `change`) is untouched.
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, conn->Exec("UPDATE sessions SET memories_extracted = memories_extracted + $2 "
                                                   "WHERE id = $1 AND ($3 = '' OR incarnation = $3)",
                                                   {ref.id, count, ref.incarnation}));
    if (r.affected() == 0) return NoSuchSession(ref.id);
    return Status::Ok();
  }

  Status SetOrigin(std::string_view id, const SessionOrigin& origin) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(Pool::Lease conn, pool_.Acquire());
    // One statement, like RecordExtracted: the log (and so `change`) is untouched.
    STRATA_ASSIGN_OR_RETURN(
        pg::Rows r,
        conn->Exec("UPDATE sessions SET title = $2, source = $3, "
                   "created_ms = CASE WHEN $4::BIGINT > 0 THEN $4::BIGINT ELSE created_ms END, "
                   "updated_ms = CASE WHEN $5::BIGINT > 0 THEN $5::BIGINT ELSE updated_ms END "
                   "WHERE id = $1 AND ($6 = '' OR incarnation = $6)",
                   {ref.id, StorableText(origin.title), StorableText(origin.source), origin.created_ms, origin.updated_ms,
                    ref.incarnation}));
    if (r.affected() == 0) return NoSuchSession(ref.id);
    return Status::Ok();
  }

  Result<std::optional<std::string>> ReadArchiveFile(std::string_view id, int archive, std::string_view name) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    STRATA_RETURN_IF_ERROR(ValidateArchiveFileName(name));
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(Pool::Lease conn, pool_.Acquire());
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, conn->Exec("SELECT f.content FROM sessions s LEFT JOIN session_archive_files f "
                                                   "ON f.session_id = s.id AND f.archive = $2 AND f.name = $3 "
                                                   "WHERE s.id = $1 AND ($4 = '' OR s.incarnation = $4)",
                                                   {ref.id, archive, name, ref.incarnation}));
    if (r.size() == 0) return NoSuchSession(ref.id);
    if (r.IsNull(0, 0)) return std::optional<std::string>();
    STRATA_ASSIGN_OR_RETURN(std::string content, r.Text(0, 0));
    return std::optional<std::string>(std::move(content));
  }

  Status WriteArchiveFile(std::string_view id, int archive, std::string_view name, std::string_view content) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    STRATA_RETURN_IF_ERROR(ValidateArchiveFileName(name));
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(Pool::Lease conn, pool_.Acquire());
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, conn->Exec("INSERT INTO session_archive_files(session_id, archive, name, content) "
                                                   "SELECT a.session_id, a.number, $3, $4 FROM session_archives a "
                                                   "JOIN sessions s ON s.id = a.session_id WHERE a.session_id = $1 AND "
                                                   "a.number = $2 AND ($5 = '' OR s.incarnation = $5) "
                                                   "ON CONFLICT (session_id, archive, name) DO UPDATE SET content = "
                                                   "EXCLUDED.content",
                                                   {ref.id, archive, name, StorableText(content), ref.incarnation}));
    if (r.affected() == 0) return NoArchive(ref.id, archive);
    return Status::Ok();
  }

  Status AddArchiveNote(std::string_view id, int archive, std::string_view note) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    return Write(id, Lock::kShare, [&](Op& op) -> Status {
      STRATA_ASSIGN_OR_RETURN(pg::Rows r,
                              op.conn->Exec("INSERT INTO session_archive_notes(session_id, archive, note, at_ms) "
                                            "SELECT session_id, number, $3, $4 FROM session_archives "
                                            "WHERE session_id = $1 AND number = $2",
                                            {op.row.info.id, archive, StorableText(note), NowMs()}));
      if (r.affected() == 0) return NoArchive(op.row.info.id, archive);
      return Status::Ok();
    });
  }

  Result<int64_t> EnqueueArchive(std::string_view id, int archive) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    SessionInfo info;
    std::string sid;
    Status enqueueable = Read(id, /*need_log=*/false, [&](Op& op) -> Status {
      sid = op.row.info.id;
      info = op.row.info;
      STRATA_ASSIGN_OR_RETURN(pg::Rows r, op.conn->Exec("SELECT number, state, error, messages FROM session_archives "
                                                        "WHERE session_id = $1 AND number = $2",
                                                        {sid, archive}));
      if (r.size() == 0) return NoArchive(sid, archive);
      STRATA_ASSIGN_OR_RETURN(ArchiveInfo a, ReadArchive(r, 0, sid));
      if (a.state == ArchiveState::kDone) {
        return Status::FailedPrecondition("archive " + std::to_string(archive) + " of session " + sid + " is done");
      }
      return Status::Ok();
    });
    if (!enqueueable.ok()) return enqueueable;
    return Enqueue(info, archive);
  }

  Status ImportArchive(std::string_view id, int number, std::span<const Message> messages, ArchiveState state,
                       std::string_view error, const std::vector<std::string>& notes) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    STRATA_ASSIGN_OR_RETURN(std::vector<Record> records, MessageRecords(messages));
    return Write(
        id, Lock::kUpdate,
        [&](Op& op) -> Status {
          SessionInfo& info = op.row.info;
          if (number != op.row.last_archive + 1) {
            return Status::InvalidArgument("session " + info.id + ": the next archive is " +
                                           std::to_string(op.row.last_archive + 1) + ", not " + std::to_string(number));
          }
          // The archived messages get a version of their own, which never was the live one.
          int64_t version = NewVersion(op);
          STRATA_RETURN_IF_ERROR(InsertRecords(*op.conn, info.id, version, 1, records));
          int64_t now = NowMs();
          STRATA_RETURN_IF_ERROR(op.conn
                                     ->Exec("INSERT INTO session_archives(session_id, number, version, state, error, "
                                            "messages, created_ms, updated_ms) VALUES ($1, $2, $3, $4, $5, $6, $7, $7)",
                                            {info.id, number, version, std::string(ArchiveStateName(state)),
                                             StorableText(error), static_cast<int64_t>(messages.size()), now})
                                     .status());
          for (const std::string& note : notes) {
            STRATA_RETURN_IF_ERROR(op.conn
                                       ->Exec("INSERT INTO session_archive_notes(session_id, archive, note, at_ms) "
                                              "VALUES ($1, $2, $3, $4)",
                                              {info.id, number, StorableText(note), now})
                                       .status());
          }
          op.row.last_archive = number;
          info.stats.commits += 1;
          // The archived messages count in the session's stats, as they did when they were added.
          for (const Message& m : messages) Account(m, info, +1);
          RefreshSummary(std::vector<Message>(messages.begin(), messages.end()), info);
          return SaveRow(op, /*refresh=*/false);
        });
  }

  Status SetArchiveState(std::string_view id, int archive, ArchiveState state, std::string_view error) override {
    STRATA_RETURN_IF_ERROR(ParseSessionRef(id).status());
    return Write(id, Lock::kShare, [&](Op& op) -> Status {
      STRATA_ASSIGN_OR_RETURN(
          pg::Rows r,
          op.conn->Exec("UPDATE session_archives SET state = $3, error = $4, updated_ms = $5 "
                        "WHERE session_id = $1 AND number = $2",
                        {op.row.info.id, archive, std::string(ArchiveStateName(state)), StorableText(error), NowMs()}));
      if (r.affected() == 0) return NoArchive(op.row.info.id, archive);
      return Status::Ok();
    });
  }

 private:
  enum class Lock { kShare, kUpdate };

  // One operation on one session: its connection (inside a transaction), its row and, once LoadLog ran,
  // its live log.
  struct Op {
    pg::Conn* conn = nullptr;
    Row row;
    std::optional<LiveLog> log;
  };

  int64_t NowMs() const { return options_.clock->WallMicros() / 1000; }


  static Status NoArchive(const std::string& id, int archive) {
    return Status::NotFound("session " + id + " has no archive " + std::to_string(archive));
  }

  std::mutex& Stripe(std::string_view id) { return stripes_[std::hash<std::string_view>{}(id) % kStripes]; }

  // The row of the session `ref` names (`lock`: "", " FOR SHARE" or " FOR UPDATE"); kNotFound when there
  // is none, or it is another incarnation.
  Result<Row> SelectRow(pg::Conn& conn, const ParsedSessionRef& ref, std::string_view lock) {
    STRATA_ASSIGN_OR_RETURN(
        pg::Rows r,
        conn.Exec("SELECT " + std::string(kRowColumns) + " FROM sessions WHERE id = $1" + std::string(lock), {ref.id}));
    if (r.size() == 0) return NoSuchSession(ref.id);
    STRATA_ASSIGN_OR_RETURN(Row row, ReadRow(r, 0));
    if (ref.exact && row.info.incarnation != ref.incarnation) return NoSuchSession(ref.id);
    return row;
  }

  // Inserts a new session's row (`row.change` is set); kAlreadyExists when the id is taken.
  Status InsertRow(pg::Conn& conn, Row& row) {
    const SessionInfo& info = row.info;
    const SessionStats& s = info.stats;
    STRATA_ASSIGN_OR_RETURN(
        pg::Rows r,
        conn.Exec(
            "INSERT INTO sessions(id, user_id, agent_id, created_ms, updated_ms, messages, turns, tokens, "
            "contexts_used, skills_used, memories_extracted, commits, revisions, contexts, abstract, overview, "
            "version, last_version, last_rotation, last_archive, incarnation) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, "
            "$9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21) ON CONFLICT (id) DO NOTHING "
            "RETURNING change",
            {info.id,
             info.user,
             info.agent,
             info.created_ms,
             info.updated_ms,
             s.messages,
             s.turns,
             s.tokens,
             s.contexts_used,
             s.skills_used,
             s.memories_extracted,
             s.commits,
             s.revisions,
             JsonText(Json(info.contexts)),
             StorableText(info.abstract_text),
             StorableText(info.overview),
             row.version,
             row.last_version,
             row.last_rotation,
             row.last_archive,
             info.incarnation}));
    if (r.size() == 0) return Status::AlreadyExists("session " + info.id + " already exists");
    STRATA_ASSIGN_OR_RETURN(row.change, r.Int(0, 0));
    return Status::Ok();
  }

  // Writes the row of `op` back, after a change to the session (and, when `refresh`, to its live log, whose
  // summary is rebuilt); the row and the log get the new change value.
  Status SaveRow(Op& op, bool refresh) {
    SessionInfo& info = op.row.info;
    info.updated_ms = NowMs();
    if (refresh && op.log) RefreshSummary(op.log->messages, info);
    info.abstract_text = StorableText(info.abstract_text);
    info.overview = StorableText(info.overview);
    const SessionStats& s = info.stats;
    STRATA_ASSIGN_OR_RETURN(
        pg::Rows r,
        op.conn->Exec(
            "UPDATE sessions SET updated_ms = $2, messages = $3, turns = $4, tokens = $5, contexts_used = $6, "
            "skills_used = $7, memories_extracted = $8, commits = $9, revisions = $10, contexts = $11, "
            "abstract = $12, overview = $13, version = $14, last_version = $15, last_rotation = $16, "
            "last_archive = $17, change = nextval('session_changes') WHERE id = $1 RETURNING change",
            {info.id, info.updated_ms, s.messages, s.turns, s.tokens, s.contexts_used, s.skills_used,
             s.memories_extracted, s.commits, s.revisions, JsonText(Json(info.contexts)), info.abstract_text,
             info.overview, op.row.version, op.row.last_version, op.row.last_rotation, op.row.last_archive}));
    if (r.size() == 0) return Status::Internal("session " + info.id + ": its locked row is gone");
    STRATA_ASSIGN_OR_RETURN(op.row.change, r.Int(0, 0));
    if (op.log) op.log->change = op.row.change;
    return Status::Ok();
  }

  // Names the live version of `op`'s log as the session's next rotation (before a new version replaces it).
  Status KeepAsRotation(Op& op) {
    int64_t number = op.row.last_rotation + 1;
    STRATA_RETURN_IF_ERROR(op.conn
                               ->Exec("INSERT INTO session_rotations(session_id, number, version, created_ms) "
                                      "VALUES ($1, $2, $3, $4)",
                                      {op.row.info.id, number, op.log->version, NowMs()})
                               .status());
    op.row.last_rotation = number;
    op.log->rotations.push_back(RotationName(number));
    return Status::Ok();
  }

  // Allocates the next log version of `op`'s session (written to the row by SaveRow).
  static int64_t NewVersion(Op& op) { return ++op.row.last_version; }

  // The live log of `op`'s session: the one kept in memory when the row says it is current, else read.
  Result<LiveLog*> LoadLog(Op& op) {
    if (!op.log) {
      const std::string& id = op.row.info.id;
      STRATA_ASSIGN_OR_RETURN(LiveLog log, ReadLog(*op.conn, id, op.row.version));
      STRATA_ASSIGN_OR_RETURN(pg::Rows r, op.conn->Exec("SELECT number FROM session_rotations WHERE session_id = $1 "
                                                        "ORDER BY number",
                                                        {id}));
      for (int i = 0; i < r.size(); ++i) {
        STRATA_ASSIGN_OR_RETURN(int64_t number, IntAt(r, i, 0, "session " + id + " (table session_rotations)"));
        log.rotations.push_back(RotationName(number));
      }
      log.change = op.row.change;
      op.log = std::move(log);
    }
    return &*op.log;
  }

  static Result<ArchiveInfo> ReadArchive(const pg::Rows& r, int i, const std::string& id) {
    ArchiveInfo a;
    const std::string table = "session " + id + " (table session_archives";
    STRATA_ASSIGN_OR_RETURN(int64_t number, IntAt(r, i, 0, table + ")"));
    const std::string where = table + ", archive " + std::to_string(number) + ")";
    if (number < 1 || number > 999'999'999) return Status::DataLoss(where + ": not an archive number");
    a.number = static_cast<int>(number);
    STRATA_ASSIGN_OR_RETURN(std::string state, TextAt(r, i, 1, where));
    Result<ArchiveState> parsed = internal::ParseArchiveState(state);
    if (!parsed.ok()) return Status::DataLoss(where + ": " + parsed.status().message());
    a.state = *parsed;
    STRATA_ASSIGN_OR_RETURN(a.error, TextAt(r, i, 2, where));
    STRATA_ASSIGN_OR_RETURN(a.messages, IntAt(r, i, 3, where));
    return a;
  }

  Result<int64_t> Enqueue(const SessionInfo& info, int n) { return internal::EnqueueCommit(*options_.queue, info, n); }

  // Runs `body` on session `id` in one transaction that first locks its row (`lock`), then commits. With
  // `after`, runs it once the transaction committed, still holding a per-session advisory lock that every
  // instance's commits take. The live log is taken from memory if current, and kept there afterwards if
  // the transaction committed.
  template <typename F>
  auto Write(std::string_view id_or_ref, Lock lock, F&& body, std::function<Status()> after = nullptr)
      -> std::invoke_result_t<F, Op&> {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id_or_ref));
    const std::string& id = ref.id;
    std::lock_guard stripe(Stripe(id));
    STRATA_ASSIGN_OR_RETURN(Pool::Lease conn, pool_.Acquire());
    // Released (after the transaction's end, as it is declared first) whatever happens: a session-level
    // advisory lock outlives a rollback.
    struct Unlock {
      pg::Conn* held_on = nullptr;
      std::string session;
      ~Unlock() {
        if (held_on != nullptr) {
          (void)held_on->Exec("SELECT pg_advisory_unlock(hashtext('strata session commit'), hashtext($1))", {session});
        }
      }
    } unlock;
    std::invoke_result_t<F, Op&> result = Status::Internal("unset");
    {
      pg::Txn txn(*conn);
      STRATA_RETURN_IF_ERROR(txn.Begin());
      STRATA_RETURN_IF_ERROR(
          conn->Exec("SELECT set_config('lock_timeout', $1, true)", {std::to_string(options_.lock_wait.count()) + "ms"})
              .status());
      if (after) {
        STRATA_RETURN_IF_ERROR(
            conn->Exec("SELECT pg_advisory_lock(hashtext('strata session commit'), hashtext($1))", {id}).status());
        unlock.held_on = &*conn;
        unlock.session = std::string(id);
      }
      Op op;
      op.conn = &*conn;
      STRATA_ASSIGN_OR_RETURN(op.row, SelectRow(*conn, ref, lock == Lock::kUpdate ? " FOR UPDATE" : " FOR SHARE"));
      op.log = TakeCached(op.row.info.id, op.row.change);
      result = body(op);
      if (!result.ok()) return result;
      STRATA_RETURN_IF_ERROR(txn.Commit());
      if (op.log && op.log->change == op.row.change) PutCached(op.row.info.id, std::move(*op.log));
    }
    if (after) STRATA_RETURN_IF_ERROR(after());
    return result;
  }

  // Runs `body` on session `id` (its row, and its live log when `need_log`) as one consistent snapshot,
  // taking no lock: one statement when the log in memory is current.
  template <typename F>
  auto Read(std::string_view id_or_ref, bool need_log, F&& body) -> std::invoke_result_t<F, Op&> {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id_or_ref));
    std::lock_guard stripe(Stripe(ref.id));
    STRATA_ASSIGN_OR_RETURN(Pool::Lease conn, pool_.Acquire());
    Op op;
    op.conn = &*conn;
    if (need_log) {
      STRATA_ASSIGN_OR_RETURN(op.row, SelectRow(*conn, ref, ""));
      op.log = TakeCached(op.row.info.id, op.row.change);
      if (op.log) {
        auto result = body(op);
        PutCached(op.row.info.id, std::move(*op.log));
        return result;
      }
    }
    pg::Txn txn(*conn);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    STRATA_RETURN_IF_ERROR(conn->ExecScript("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"));
    STRATA_ASSIGN_OR_RETURN(op.row, SelectRow(*conn, ref, ""));
    if (need_log) STRATA_RETURN_IF_ERROR(LoadLog(op).status());
    auto result = body(op);
    if (!result.ok()) return result;
    STRATA_RETURN_IF_ERROR(txn.Commit());
    if (op.log) PutCached(op.row.info.id, std::move(*op.log));
    return result;
  }

  // The log of `id` kept in memory, if it is the one whose change value is `change` (else it is dropped).
  std::optional<LiveLog> TakeCached(const std::string& id, int64_t change) {
    std::lock_guard lock(cache_mu_);
    auto it = cache_.find(id);
    if (it == cache_.end()) return std::nullopt;
    std::optional<LiveLog> out;
    if (it->second.change == change) out = std::move(it->second);
    cache_.erase(it);
    return out;
  }

  void PutCached(const std::string& id, LiveLog log) {
    std::lock_guard lock(cache_mu_);
    log.last_used = ++tick_;
    if (cache_.size() >= kCachedLogs && cache_.find(id) == cache_.end()) {
      auto oldest = std::min_element(cache_.begin(), cache_.end(), [](const auto& a, const auto& b) {
        return a.second.last_used < b.second.last_used;
      });
      cache_.erase(oldest);
    }
    cache_.insert_or_assign(id, std::move(log));
  }

  SessionsOptions options_;
  Pool pool_;
  std::array<std::mutex, kStripes> stripes_;
  std::mutex cache_mu_;  // Guards the two fields below.
  std::map<std::string, LiveLog> cache_;
  uint64_t tick_ = 0;
};

}  // namespace

Result<std::unique_ptr<Sessions>> OpenPgSessions(const std::string& url, SessionsOptions options) {
  auto sessions = std::make_unique<PgSessions>(url, options);
  STRATA_RETURN_IF_ERROR(sessions->Open().WithContext("sessions " + pg::RedactUrl(url)));
  return std::unique_ptr<Sessions>(std::move(sessions));
}

}  // namespace strata::session
