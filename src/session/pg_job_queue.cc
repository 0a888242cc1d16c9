// The job queue on PostgreSQL: the same contract as the SQLite queue (job_queue.h), shared by every
// Strata instance on the database. A claim takes the oldest runnable job with FOR UPDATE SKIP LOCKED, so
// instances never claim one job twice and never wait for each other; a claimed job carries a lease, and a
// job whose instance died is claimable again once its lease expires. Jobs of one key still run in order:
// a job is runnable only when no older job of its key is pending or running, which holds across instances
// because the older job's row is either locked by its claimer (and still pending in our snapshot) or
// already running. Times are the database server's clock (unless a test gives a clock), so instances on
// machines whose clocks disagree still agree on when a lease ran out.
#include <algorithm>
#include <mutex>

#include "pg.h"
#include "session_common.h"
#include "strata/session/job_queue.h"

namespace strata::session {
namespace {

// Version i+1 of the schema is kMigrations[i]; never edit a step once released, add one.
constexpr std::string_view kMigrations[] = {
    R"sql(
CREATE TABLE jobs(
  id BIGSERIAL PRIMARY KEY,
  kind TEXT NOT NULL,
  key TEXT NOT NULL,
  payload TEXT NOT NULL,
  state TEXT NOT NULL,
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT NOT NULL DEFAULT '',
  created_ms BIGINT NOT NULL,
  updated_ms BIGINT NOT NULL,
  not_before_ms BIGINT NOT NULL DEFAULT 0,
  lease_until_ms BIGINT NOT NULL DEFAULT 0);
CREATE INDEX jobs_by_state ON jobs(state, id);
CREATE INDEX jobs_by_key ON jobs(key, id);
-- One live copy of a job: an identical job enqueued by two instances at once is added once.
CREATE UNIQUE INDEX jobs_live ON jobs(kind, key, md5(payload)) WHERE state IN ('pending', 'running');
)sql",
    // 2: the claim a running job is held under (Renew, Complete and Fail check it).
    R"sql(
ALTER TABLE jobs ADD COLUMN claim BIGINT NOT NULL DEFAULT 0;
)sql",
};

// Claim's choice: the oldest due pending job with no older pending or running job of its key.
constexpr std::string_view kPickSql =
    "SELECT id FROM jobs j WHERE state = 'pending' AND not_before_ms <= $1 AND NOT EXISTS ("
    "SELECT 1 FROM jobs e WHERE e.key = j.key AND e.id < j.id AND e.state IN ('pending', 'running'))";
constexpr std::string_view kPickOrder = " ORDER BY id LIMIT 1 FOR UPDATE SKIP LOCKED";

constexpr std::string_view kColumns =
    "id, kind, key, payload, state, attempts, last_error, created_ms, updated_ms, not_before_ms, lease_until_ms, claim";

Status LostClaim(int64_t id, std::string_view what) {
  return Status::Aborted("job " + std::to_string(id) + ": cannot " + std::string(what) +
                         ": this instance no longer holds it (its lease expired and another instance claimed it, or "
                         "it was removed with its session)");
}

Result<Job> ReadJob(const pg::Rows& rows, int row) {
  Job job;
  STRATA_ASSIGN_OR_RETURN(job.id, rows.Int(row, 0));
  STRATA_ASSIGN_OR_RETURN(job.kind, rows.Text(row, 1));
  STRATA_ASSIGN_OR_RETURN(job.key, rows.Text(row, 2));
  STRATA_ASSIGN_OR_RETURN(job.payload, rows.Text(row, 3));
  STRATA_ASSIGN_OR_RETURN(std::string state, rows.Text(row, 4));
  Result<JobState> parsed = ParseJobState(state);
  if (!parsed.ok()) return Status::DataLoss("job queue: " + parsed.status().message());
  job.state = *parsed;
  STRATA_ASSIGN_OR_RETURN(int64_t attempts, rows.Int(row, 5));
  job.attempts = static_cast<int>(attempts);
  STRATA_ASSIGN_OR_RETURN(job.last_error, rows.Text(row, 6));
  STRATA_ASSIGN_OR_RETURN(job.created_ms, rows.Int(row, 7));
  STRATA_ASSIGN_OR_RETURN(job.updated_ms, rows.Int(row, 8));
  STRATA_ASSIGN_OR_RETURN(job.not_before_ms, rows.Int(row, 9));
  STRATA_ASSIGN_OR_RETURN(job.lease_until_ms, rows.Int(row, 10));
  STRATA_ASSIGN_OR_RETURN(job.claim, rows.Int(row, 11));
  return job;
}

class PgJobQueue final : public JobQueue {
 public:
  explicit PgJobQueue(JobQueueOptions options) : options_(options) {}

  Status Open(const std::string& url) {
    STRATA_ASSIGN_OR_RETURN(conn_, pg::Conn::Connect(url));
    return pg::Migrate(*conn_, "job_queue", kMigrations);
  }

  Result<int64_t> Enqueue(std::string_view kind, std::string_view key, std::string_view payload) override {
    if (kind.empty()) return Status::InvalidArgument("job queue: a job needs a kind");
    std::lock_guard lock(mu_);
    STRATA_ASSIGN_OR_RETURN(int64_t now, NowMs());
    // Inserted unless an identical live job exists (then its id). That one is looked for first: an insert
    // that conflicts still takes a number from the sequence, so every open that queued its unfinished
    // commits again left a gap, and the same calls gave other task ids than on SQLite. The insert's
    // ON CONFLICT covers another instance enqueuing the same job in between; a race with its completion is
    // retried.
    for (int attempt = 0; attempt < 3; ++attempt) {
      STRATA_ASSIGN_OR_RETURN(pg::Rows same,
                              conn_->Exec("SELECT id FROM jobs WHERE kind = $1 AND key = $2 AND md5(payload) = md5($3) "
                                          "AND payload = $3 AND state IN ('pending', 'running') ORDER BY id LIMIT 1",
                                          {kind, key, payload}));
      if (same.size() > 0) return same.Int(0, 0);
      STRATA_ASSIGN_OR_RETURN(pg::Rows added,
                              conn_->Exec("INSERT INTO jobs(kind, key, payload, state, created_ms, updated_ms) "
                                          "VALUES ($1, $2, $3, 'pending', $4, $4) ON CONFLICT DO NOTHING RETURNING id",
                                          {kind, key, payload, now}));
      if (added.size() > 0) return added.Int(0, 0);
    }
    return Status::Unavailable("job queue: enqueue raced with other instances three times; try again");
  }

  Result<std::optional<Job>> Claim() override { return ClaimWhere(std::nullopt); }
  Result<std::optional<Job>> ClaimOf(std::string_view key) override { return ClaimWhere(key); }

 private:
  Result<std::optional<Job>> ClaimWhere(std::optional<std::string_view> key) {
    std::lock_guard lock(mu_);
    pg::Txn txn(*conn_);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    STRATA_ASSIGN_OR_RETURN(int64_t now, NowMs());
    // Expired leases: their instances are gone.
    STRATA_RETURN_IF_ERROR(
        conn_->Exec("UPDATE jobs SET state = 'pending' WHERE state = 'running' AND lease_until_ms < $1", {now}).status());
    STRATA_ASSIGN_OR_RETURN(
        pg::Rows pick,
        key ? conn_->Exec(std::string(kPickSql) + " AND j.key = $2" + std::string(kPickOrder), {now, std::string(*key)})
            : conn_->Exec(std::string(kPickSql) + std::string(kPickOrder), {now}));
    if (pick.size() == 0) {
      STRATA_RETURN_IF_ERROR(txn.Commit());
      return std::optional<Job>();
    }
    STRATA_ASSIGN_OR_RETURN(int64_t id, pick.Int(0, 0));
    STRATA_ASSIGN_OR_RETURN(
        pg::Rows claimed,
        conn_->Exec("UPDATE jobs SET state = 'running', attempts = attempts + 1, updated_ms = $2, lease_until_ms = $3, "
                    "claim = 1 + floor(random() * 9007199254740990)::bigint WHERE id = $1 RETURNING " +
                        std::string(kColumns),
                    {id, now, now + static_cast<int64_t>(options_.lease.count())}));
    STRATA_ASSIGN_OR_RETURN(Job job, ReadJob(claimed, 0));
    STRATA_RETURN_IF_ERROR(txn.Commit());
    return std::optional<Job>(std::move(job));
  }

 public:

  Status Renew(const Job& job) override {
    std::lock_guard lock(mu_);
    STRATA_ASSIGN_OR_RETURN(int64_t now, NowMs());
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, conn_->Exec("UPDATE jobs SET lease_until_ms = $3, updated_ms = $4 "
                                                    "WHERE id = $1 AND claim = $2 AND state = 'running'",
                                                    {job.id, job.claim, now + static_cast<int64_t>(options_.lease.count()), now}));
    if (r.affected() == 0) return LostClaim(job.id, "renew its lease");
    return Status::Ok();
  }

  Status Complete(const Job& job) override {
    std::lock_guard lock(mu_);
    STRATA_ASSIGN_OR_RETURN(int64_t now, NowMs());
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, conn_->Exec("UPDATE jobs SET state = 'done', last_error = '', updated_ms = $3 "
                                                    "WHERE id = $1 AND claim = $2 AND state = 'running'",
                                                    {job.id, job.claim, now}));
    if (r.affected() == 0) return LostClaim(job.id, "complete it");
    return Status::Ok();
  }

  Status Fail(const Job& job, const Status& error, bool retryable) override {
    std::lock_guard lock(mu_);
    int64_t id = job.id;
    pg::Txn txn(*conn_);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    STRATA_ASSIGN_OR_RETURN(pg::Rows get, conn_->Exec("SELECT attempts FROM jobs WHERE id = $1 AND claim = $2 AND "
                                                      "state = 'running' FOR UPDATE",
                                                      {id, job.claim}));
    if (get.size() == 0) return LostClaim(id, "record its failure");
    STRATA_ASSIGN_OR_RETURN(int64_t attempts, get.Int(0, 0));
    STRATA_ASSIGN_OR_RETURN(int64_t now, NowMs());
    bool dead = !retryable || attempts >= options_.max_attempts;
    int64_t delay = options_.initial_backoff.count();
    for (int64_t i = 1; i < attempts && delay < options_.max_backoff.count(); ++i) delay *= 2;
    delay = std::min<int64_t>(delay, options_.max_backoff.count());
    STRATA_RETURN_IF_ERROR(conn_->Exec("UPDATE jobs SET state = $2, last_error = $3, updated_ms = $4, not_before_ms = $5 "
                                       "WHERE id = $1",
                                       {id, dead ? "dead" : "pending", internal::StorableError(error), now, dead ? int64_t{0} : now + delay})
                               .status());
    return txn.Commit();
  }

  Status Release(const Job& job, const Status& why) override {
    std::lock_guard lock(mu_);
    STRATA_ASSIGN_OR_RETURN(int64_t now, NowMs());
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, conn_->Exec("UPDATE jobs SET state = 'pending', attempts = GREATEST(attempts - 1, 0), "
                                                    "last_error = $3, updated_ms = $4, not_before_ms = 0 "
                                                    "WHERE id = $1 AND claim = $2 AND state = 'running'",
                                                    {job.id, job.claim, internal::StorableError(why), now}));
    if (r.affected() == 0) return LostClaim(job.id, "give it back");
    return Status::Ok();
  }

  Status Retry(int64_t id) override {
    std::lock_guard lock(mu_);
    STRATA_ASSIGN_OR_RETURN(int64_t now, NowMs());
    // A dead job whose identical twin is live already goes (the twin does the work), as on SQLite; the twin
    // may also be enqueued between the two statements (jobs_live refuses the update): then it goes too.
    auto remove_for_twin = [&]() -> Result<bool> {
      STRATA_ASSIGN_OR_RETURN(pg::Rows gone,
                              conn_->Exec("DELETE FROM jobs d WHERE d.id = $1 AND d.state = 'dead' AND EXISTS (SELECT 1 "
                                          "FROM jobs j WHERE j.kind = d.kind AND j.key = d.key AND j.payload = d.payload "
                                          "AND j.state IN ('pending', 'running'))",
                                          {id}));
      return gone.affected() > 0;
    };
    STRATA_ASSIGN_OR_RETURN(bool removed, remove_for_twin());
    if (removed) return Status::Ok();
    Result<pg::Rows> r = conn_->Exec("UPDATE jobs SET state = 'pending', attempts = 0, not_before_ms = 0, updated_ms = $2 "
                                     "WHERE id = $1 AND state = 'dead'",
                                     {id, now});
    if (!r.ok() && r.status().code() == StatusCode::kAlreadyExists) {
      STRATA_ASSIGN_OR_RETURN(removed, remove_for_twin());
      if (removed) return Status::Ok();
      return Status::FailedPrecondition("job " + std::to_string(id) + ": an identical job is queued; try again");
    }
    STRATA_RETURN_IF_ERROR(r.status());
    return ExpectChanged(*r, id, "retry (only dead jobs are retried)");
  }

  Status Expedite(std::string_view key) override {
    std::lock_guard lock(mu_);
    return conn_->Exec("UPDATE jobs SET not_before_ms = 0 WHERE key = $1 AND state = 'pending'", {key}).status();
  }

  Status RemoveKey(std::string_view key) override {
    std::lock_guard lock(mu_);
    return conn_->Exec("DELETE FROM jobs WHERE key = $1", {key}).status();
  }

  Status ReleaseRunning() override {
    std::lock_guard lock(mu_);
    return conn_->Exec("UPDATE jobs SET state = 'pending' WHERE state = 'running'").status();
  }

  // The ids' sequence: its last value (NULL until first used), or the largest id held if larger.
  Result<int64_t> LastId() override {
    std::lock_guard lock(mu_);
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, conn_->Exec("SELECT GREATEST(COALESCE(pg_sequence_last_value("
                                                   "pg_get_serial_sequence('jobs', 'id')::regclass), 0), "
                                                   "COALESCE((SELECT max(id) FROM jobs), 0))"));
    return r.Int(0, 0);
  }

  Status SkipIdsThrough(int64_t id) override {
    std::lock_guard lock(mu_);
    // setval(seq, n) makes the next id n + 1; never moves the sequence back.
    return conn_->Exec("SELECT setval(s::regclass, GREATEST($1::BIGINT, "
                       "COALESCE(pg_sequence_last_value(s::regclass), 0), 1)) "
                       "FROM pg_get_serial_sequence('jobs', 'id') AS s",
                       {id}).status();
  }

  Result<std::optional<Job>> Get(int64_t id) override {
    std::lock_guard lock(mu_);
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, conn_->Exec("SELECT " + std::string(kColumns) + " FROM jobs WHERE id = $1", {id}));
    if (r.size() == 0) return std::optional<Job>();
    STRATA_ASSIGN_OR_RETURN(Job job, ReadJob(r, 0));
    return std::optional<Job>(std::move(job));
  }

  Result<std::vector<Job>> List(std::optional<JobState> state, std::optional<std::string> key) override {
    std::lock_guard lock(mu_);
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, conn_->Exec("SELECT " + std::string(kColumns) +
                                                        " FROM jobs WHERE ($1 = '' OR state = $1) AND ($2 = 0 OR key = $3) "
                                                        "ORDER BY id",
                                                    {std::string(state ? JobStateName(*state) : ""),
                                                     int64_t{key.has_value()}, key.value_or("")}));
    std::vector<Job> out;
    out.reserve(static_cast<size_t>(r.size()));
    for (int i = 0; i < r.size(); ++i) {
      STRATA_ASSIGN_OR_RETURN(Job job, ReadJob(r, i));
      out.push_back(std::move(job));
    }
    return out;
  }

 private:
  // Milliseconds since the epoch by the database server's clock: every instance reads the same one (one
  // machine's clock ahead of another's took over the other's jobs before their leases ran out), or by the
  // clock the options give (tests). mu_ held.
  Result<int64_t> NowMs() {
    if (options_.clock != nullptr) return options_.clock->WallMicros() / 1000;
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, conn_->Exec("SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint"));
    return r.Int(0, 0);
  }

  static Status ExpectChanged(const pg::Rows& r, int64_t id, std::string_view what) {
    if (r.affected() > 0) return Status::Ok();
    return Status::FailedPrecondition("job " + std::to_string(id) + ": cannot " + std::string(what) +
                                      " from its current state");
  }

  JobQueueOptions options_;
  std::mutex mu_;  // Guards conn_ (one libpq connection).
  std::unique_ptr<pg::Conn> conn_;
};

}  // namespace

Result<std::unique_ptr<JobQueue>> OpenPgJobQueue(const std::string& url, JobQueueOptions options) {
  auto queue = std::make_unique<PgJobQueue>(options);
  STRATA_RETURN_IF_ERROR(queue->Open(url).WithContext("job queue " + pg::RedactUrl(url)));
  return std::unique_ptr<JobQueue>(std::move(queue));
}

}  // namespace strata::session
