#include "strata/session/job_queue.h"

#include <algorithm>
#include <functional>
#include <mutex>
#include <random>

#include "session_common.h"
#include "sqlite_db.h"

namespace strata::session {
namespace {

// Over a dead job `jobs` row: an identical job (kind, key, payload) is pending or running (Retry).
constexpr const char* kLiveTwinSql =
    "EXISTS (SELECT 1 FROM jobs j WHERE j.kind = jobs.kind AND j.key = jobs.key AND j.payload = jobs.payload AND "
    "j.state IN ('pending', 'running'))";

using sqlite::Db;
using sqlite::Stmt;
using sqlite::Txn;

// AUTOINCREMENT: a job's id is never given again, also after the newest job was removed with its session
// (a plain INTEGER PRIMARY KEY takes the largest id + 1, so a client following task 42 could be shown
// another session's job 42). Queues made before are rebuilt on open (RebuildWithAutoincrement).
constexpr std::string_view kJobsTable = R"sql(
CREATE TABLE IF NOT EXISTS %s(
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  kind TEXT NOT NULL,
  key TEXT NOT NULL,
  payload TEXT NOT NULL,
  state TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT NOT NULL DEFAULT '',
  created_ms INTEGER NOT NULL,
  updated_ms INTEGER NOT NULL,
  not_before_ms INTEGER NOT NULL DEFAULT 0,
  lease_until_ms INTEGER NOT NULL DEFAULT 0,
  claim INTEGER NOT NULL DEFAULT 0);
)sql";
constexpr std::string_view kJobsIndexes = R"sql(
CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs(state, id);
CREATE INDEX IF NOT EXISTS jobs_by_key ON jobs(key, id);
)sql";

std::string JobsTable(std::string_view name) {
  std::string sql(kJobsTable);
  sql.replace(sql.find("%s"), 2, name);
  return sql;
}
std::string Schema() { return JobsTable("jobs") + std::string(kJobsIndexes); }

constexpr std::string_view kColumns =
    "id, kind, key, payload, state, attempts, last_error, created_ms, updated_ms, not_before_ms, lease_until_ms, claim";

// A claim token: random, never 0 (a job never claimed has claim 0).
int64_t NewClaim() {
  static std::mutex mu;
  std::lock_guard lock(mu);
  static std::mt19937_64 rng(std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32));
  int64_t claim = 0;
  while (claim == 0) claim = static_cast<int64_t>(rng() >> 1);
  return claim;
}

Status LostClaim(int64_t id, std::string_view what) {
  return Status::Aborted("job " + std::to_string(id) + ": cannot " + std::string(what) +
                         ": this worker no longer holds it (its lease expired and another worker claimed it, or it "
                         "was removed with its session)");
}

class SqliteJobQueue final : public JobQueue {
 public:
  explicit SqliteJobQueue(JobQueueOptions options) : options_(options) {
    if (options_.clock == nullptr) options_.clock = SystemClock();
  }

  Status Open(const std::string& path) {
    constexpr const char* kHasClaim = "SELECT 1 FROM pragma_table_info('jobs') WHERE name = 'claim'";
    if (options_.read_only) {
      Status opened = db_.OpenReadOnly(path);
      if (opened.code() == StatusCode::kNotFound) {
        STRATA_RETURN_IF_ERROR(db_.Open(":memory:"));  // None yet: an empty queue.
        return db_.Exec(Schema());
      }
      STRATA_RETURN_IF_ERROR(opened);
      // A queue made before claims were kept is read as it is (nothing here may add the column).
      Stmt has(db_, kHasClaim);
      STRATA_ASSIGN_OR_RETURN(bool has_claim, has.Step());
      if (!has_claim) columns_ = std::string(kColumns.substr(0, kColumns.rfind("claim"))) + "0";
      return Status::Ok();
    }
    STRATA_RETURN_IF_ERROR(db_.OpenDurable(path));
    STRATA_RETURN_IF_ERROR(db_.Exec(Schema()));
    // Queues made before claims were kept gain the column (their running jobs hold claim 0 until reclaimed),
    // looked for and added in one write transaction: two processes opening such a queue at once both added
    // it, and the second failed to open ("duplicate column name").
    STRATA_RETURN_IF_ERROR(MigrateOnce(kHasClaim, [&] {
      return db_.Exec("ALTER TABLE jobs ADD COLUMN claim INTEGER NOT NULL DEFAULT 0");
    }));
    // A queue made before its ids were AUTOINCREMENT gets its table copied into one that is. Ids continue
    // after the largest kept; one removed before this ran, if it was the largest, can still be given.
    return MigrateOnce("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'jobs' AND sql LIKE '%AUTOINCREMENT%'",
                       [&] {
                         std::string columns(kColumns);
                         return db_.Exec("DROP TABLE IF EXISTS jobs_rebuilt;" + JobsTable("jobs_rebuilt") +
                                         "INSERT INTO jobs_rebuilt(" + columns + ") SELECT " + columns +
                                         " FROM jobs; DROP TABLE jobs; ALTER TABLE jobs_rebuilt RENAME TO jobs;" +
                                         std::string(kJobsIndexes));
                       });
  }

  // Runs `migrate` in one write transaction unless `done` (a query with a row once it ran) says it ran,
  // looked at before and again inside: another process may open the same queue at the same time, and the
  // second finds it done.
  Status MigrateOnce(const char* done, const std::function<Status()>& migrate) {
    auto ran = [&]() -> Result<bool> {
      Stmt sql(db_, done);
      return sql.Step();
    };
    STRATA_ASSIGN_OR_RETURN(bool already, ran());
    if (already) return Status::Ok();
    Txn txn(db_);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    STRATA_ASSIGN_OR_RETURN(already, ran());
    if (already) return Status::Ok();
    STRATA_RETURN_IF_ERROR(migrate());
    return txn.Commit();
  }

  Result<int64_t> Enqueue(std::string_view kind, std::string_view key, std::string_view payload) override {
    if (kind.empty()) return Status::InvalidArgument("job queue: a job needs a kind");
    std::lock_guard lock(mu_);
    Txn txn(db_);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    Stmt same(db_,
              "SELECT id FROM jobs WHERE kind = ?1 AND key = ?2 AND payload = ?3 AND state IN ('pending', 'running')");
    same.Bind(1, kind).Bind(2, key).Bind(3, payload);
    STRATA_ASSIGN_OR_RETURN(bool exists, same.Step());
    if (exists) return same.Int(0);
    int64_t now = NowMs();
    Stmt ins(
        db_,
        "INSERT INTO jobs(kind, key, payload, state, created_ms, updated_ms) VALUES (?1, ?2, ?3, 'pending', ?4, ?4)");
    STRATA_RETURN_IF_ERROR(ins.Bind(1, kind).Bind(2, key).Bind(3, payload).Bind(4, now).Run());
    int64_t id = sqlite3_last_insert_rowid(db_.get());
    STRATA_RETURN_IF_ERROR(txn.Commit());
    return id;
  }

  Result<std::optional<Job>> Claim() override { return ClaimWhere(std::nullopt); }
  Result<std::optional<Job>> ClaimOf(std::string_view key) override { return ClaimWhere(key); }

 private:
  Result<std::optional<Job>> ClaimWhere(std::optional<std::string_view> key) {
    std::lock_guard lock(mu_);
    Txn txn(db_);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    int64_t now = NowMs();
    // Expired leases: their workers are gone.
    Stmt expire(db_, "UPDATE jobs SET state = 'pending' WHERE state = 'running' AND lease_until_ms < ?1");
    STRATA_RETURN_IF_ERROR(expire.Bind(1, now).Run());
    Stmt pick(db_, "SELECT " + std::string(kColumns) +
                       " FROM jobs j WHERE state = 'pending' AND not_before_ms <= ?1 AND NOT EXISTS ("
                       "SELECT 1 FROM jobs e WHERE e.key = j.key AND e.id < j.id AND e.state IN ('pending', 'running')"
                       ")" + std::string(key ? " AND j.key = ?2" : "") + " ORDER BY id LIMIT 1");
    pick.Bind(1, now);
    if (key) pick.Bind(2, *key);
    STRATA_ASSIGN_OR_RETURN(bool row, pick.Step());
    if (!row) return std::optional<Job>();
    STRATA_ASSIGN_OR_RETURN(Job job, ReadJob(pick));
    job.state = JobState::kRunning;
    job.attempts += 1;
    job.updated_ms = now;
    job.lease_until_ms = now + options_.lease.count();
    job.claim = NewClaim();
    Stmt claim(db_,
               "UPDATE jobs SET state = 'running', attempts = ?2, updated_ms = ?3, lease_until_ms = ?4, claim = ?5 "
               "WHERE id = ?1");
    STRATA_RETURN_IF_ERROR(claim.Bind(1, job.id)
                               .Bind(2, int64_t{job.attempts})
                               .Bind(3, now)
                               .Bind(4, job.lease_until_ms)
                               .Bind(5, job.claim)
                               .Run());
    STRATA_RETURN_IF_ERROR(txn.Commit());
    return std::optional<Job>(std::move(job));
  }

 public:

  Status Renew(const Job& job) override {
    std::lock_guard lock(mu_);
    int64_t now = NowMs();
    Stmt s(db_, "UPDATE jobs SET lease_until_ms = ?3, updated_ms = ?4 WHERE id = ?1 AND claim = ?2 AND state = 'running'");
    STRATA_RETURN_IF_ERROR(s.Bind(1, job.id).Bind(2, job.claim).Bind(3, now + options_.lease.count()).Bind(4, now).Run());
    if (sqlite3_changes(db_.get()) == 0) return LostClaim(job.id, "renew its lease");
    return Status::Ok();
  }

  Status Complete(const Job& job) override {
    std::lock_guard lock(mu_);
    Stmt s(db_, "UPDATE jobs SET state = 'done', last_error = '', updated_ms = ?3 "
                "WHERE id = ?1 AND claim = ?2 AND state = 'running'");
    STRATA_RETURN_IF_ERROR(s.Bind(1, job.id).Bind(2, job.claim).Bind(3, NowMs()).Run());
    if (sqlite3_changes(db_.get()) == 0) return LostClaim(job.id, "complete it");
    return Status::Ok();
  }

  Status Fail(const Job& job, const Status& error, bool retryable) override {
    std::lock_guard lock(mu_);
    int64_t id = job.id;
    Txn txn(db_);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    Stmt get(db_, "SELECT attempts FROM jobs WHERE id = ?1 AND claim = ?2 AND state = 'running'");
    STRATA_ASSIGN_OR_RETURN(bool row, get.Bind(1, id).Bind(2, job.claim).Step());
    if (!row) return LostClaim(id, "record its failure");
    int attempts = static_cast<int>(get.Int(0));
    int64_t now = NowMs();
    bool dead = !retryable || attempts >= options_.max_attempts;
    int64_t delay = options_.initial_backoff.count();
    for (int i = 1; i < attempts && delay < options_.max_backoff.count(); ++i) delay *= 2;
    delay = std::min<int64_t>(delay, options_.max_backoff.count());
    Stmt upd(db_, "UPDATE jobs SET state = ?2, last_error = ?3, updated_ms = ?4, not_before_ms = ?5 WHERE id = ?1");
    upd.Bind(1, id).Bind(2, dead ? "dead" : "pending").Bind(3, internal::StorableError(error)).Bind(4, now);
    STRATA_RETURN_IF_ERROR(upd.Bind(5, dead ? int64_t{0} : now + delay).Run());
    return txn.Commit();
  }

  Status Release(const Job& job, const Status& why) override {
    std::lock_guard lock(mu_);
    Stmt s(db_, "UPDATE jobs SET state = 'pending', attempts = MAX(attempts - 1, 0), last_error = ?3, updated_ms = ?4, "
                "not_before_ms = 0 WHERE id = ?1 AND claim = ?2 AND state = 'running'");
    STRATA_RETURN_IF_ERROR(s.Bind(1, job.id).Bind(2, job.claim).Bind(3, internal::StorableError(why)).Bind(4, NowMs()).Run());
    if (sqlite3_changes(db_.get()) == 0) return LostClaim(job.id, "give it back");
    return Status::Ok();
  }

  Status Retry(int64_t id) override {
    std::lock_guard lock(mu_);
    Txn txn(db_);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    Stmt twin(db_, std::string("DELETE FROM jobs WHERE id = ?1 AND state = 'dead' AND ") + kLiveTwinSql);
    STRATA_RETURN_IF_ERROR(twin.Bind(1, id).Run());
    if (sqlite3_changes(db_.get()) == 0) {
      Stmt s(db_,
             "UPDATE jobs SET state = 'pending', attempts = 0, not_before_ms = 0, updated_ms = ?2 WHERE id = ?1 AND "
             "state = 'dead'");
      STRATA_RETURN_IF_ERROR(s.Bind(1, id).Bind(2, NowMs()).Run());
      STRATA_RETURN_IF_ERROR(ExpectChanged(id, "retry (only dead jobs are retried)"));
    }
    return txn.Commit();
  }

  Status Expedite(std::string_view key) override {
    std::lock_guard lock(mu_);
    Stmt s(db_, "UPDATE jobs SET not_before_ms = 0 WHERE key = ?1 AND state = 'pending'");
    return s.Bind(1, key).Run();
  }

  Status RemoveKey(std::string_view key) override {
    std::lock_guard lock(mu_);
    Stmt s(db_, "DELETE FROM jobs WHERE key = ?1");
    return s.Bind(1, key).Run();
  }

  Status ReleaseRunning() override {
    std::lock_guard lock(mu_);
    return db_.Exec("UPDATE jobs SET state = 'pending' WHERE state = 'running'");
  }

  // AUTOINCREMENT keeps the largest id ever given in sqlite_sequence (no row until the first insert).
  Result<int64_t> LastId() override {
    std::lock_guard lock(mu_);
    Stmt s(db_, "SELECT max(COALESCE((SELECT seq FROM sqlite_sequence WHERE name = 'jobs'), 0), "
                "COALESCE((SELECT max(id) FROM jobs), 0))");
    STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
    return row ? s.Int(0) : int64_t{0};
  }

  Status SkipIdsThrough(int64_t id) override {
    std::lock_guard lock(mu_);
    Txn txn(db_);  // Rolled back unless committed, also when COMMIT itself fails.
    STRATA_RETURN_IF_ERROR(txn.Begin());
    Stmt update(db_, "UPDATE sqlite_sequence SET seq = max(seq, ?1) WHERE name = 'jobs'");
    STRATA_RETURN_IF_ERROR(update.Bind(1, id).Run());
    if (sqlite3_changes(db_.get()) == 0) {
      Stmt insert(db_, "INSERT INTO sqlite_sequence(name, seq) VALUES ('jobs', ?1)");
      STRATA_RETURN_IF_ERROR(insert.Bind(1, id).Run());
    }
    return txn.Commit();
  }

  Result<std::optional<Job>> Get(int64_t id) override {
    std::lock_guard lock(mu_);
    Stmt s(db_, "SELECT " + columns_ + " FROM jobs WHERE id = ?1");
    STRATA_ASSIGN_OR_RETURN(bool row, s.Bind(1, id).Step());
    if (!row) return std::optional<Job>();
    STRATA_ASSIGN_OR_RETURN(Job job, ReadJob(s));
    return std::optional<Job>(std::move(job));
  }

  Result<std::vector<Job>> List(std::optional<JobState> state, std::optional<std::string> key) override {
    std::lock_guard lock(mu_);
    Stmt s(db_, "SELECT " + columns_ +
                    " FROM jobs WHERE (?1 = '' OR state = ?1) AND (?2 = 0 OR key = ?3) ORDER BY id");
    s.Bind(1, std::string(state ? JobStateName(*state) : "")).Bind(2, int64_t{key.has_value()});
    s.Bind(3, key.value_or(""));
    std::vector<Job> out;
    while (true) {
      STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      STRATA_ASSIGN_OR_RETURN(Job job, ReadJob(s));
      out.push_back(std::move(job));
    }
    return out;
  }

 private:
  int64_t NowMs() const { return options_.clock->WallMicros() / 1000; }

  Status ExpectChanged(int64_t id, std::string_view what) {
    if (sqlite3_changes(db_.get()) > 0) return Status::Ok();
    return Status::FailedPrecondition("job " + std::to_string(id) + ": cannot " + std::string(what) +
                                      " from its current state");
  }

  static Result<Job> ReadJob(const Stmt& s) {
    Job job;
    job.id = s.Int(0);
    job.kind = s.Text(1);
    job.key = s.Text(2);
    job.payload = s.Text(3);
    Result<JobState> state = ParseJobState(s.Text(4));
    if (!state.ok()) return Status::DataLoss("job queue: " + state.status().message());
    job.state = *state;
    job.attempts = static_cast<int>(s.Int(5));
    job.last_error = s.Text(6);
    job.created_ms = s.Int(7);
    job.updated_ms = s.Int(8);
    job.not_before_ms = s.Int(9);
    job.lease_until_ms = s.Int(10);
    job.claim = s.Int(11);
    return job;
  }

  JobQueueOptions options_;
  std::string columns_ = std::string(kColumns);  // What ReadJob reads.
  std::mutex mu_;
  Db db_;
};

}  // namespace

std::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kPending:
      return "pending";
    case JobState::kRunning:
      return "running";
    case JobState::kDone:
      return "done";
    case JobState::kDead:
      return "dead";
  }
  return "?";
}

Result<JobState> ParseJobState(std::string_view name) {
  for (JobState state : {JobState::kPending, JobState::kRunning, JobState::kDone, JobState::kDead}) {
    if (JobStateName(state) == name) return state;
  }
  return Status::InvalidArgument("unknown job state '" + std::string(name.substr(0, 40)) +
                                 "' (pending, running, done or dead)");
}

Result<std::unique_ptr<JobQueue>> OpenJobQueue(const std::string& path, JobQueueOptions options) {
  auto queue = std::make_unique<SqliteJobQueue>(options);
  STRATA_RETURN_IF_ERROR(queue->Open(path).WithContext("job queue " + path));
  return std::unique_ptr<JobQueue>(std::move(queue));
}

}  // namespace strata::session
