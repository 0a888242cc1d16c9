// A durable work queue in one SQLite database: background jobs survive crashes, run in order per key,
// retry with backoff a bounded number of times, and end in a dead-letter list instead of blocking.
//
//   Enqueue(kind, key, payload)   a pending job; an identical pending/running job (same kind, key and
//                                 payload) is not added twice, so a redo after a crash cannot duplicate.
//   Claim()                       the oldest runnable job, marked running with a lease. Runnable: pending,
//                                 due (not_before passed), and no older pending or running job with the same
//                                 key — jobs of one key (one session) run in order. Dead and done jobs never
//                                 block later ones.
//   ClaimOf(key)                  the same, among the jobs of `key` only (a caller waiting for one session).
//   Renew(job)                    extends the claim's lease (its worker is alive and making progress).
//   Complete(job)
//   Fail(job, error, retryable)   a retryable failure returns it to pending after a backoff (1 s, 2 s, … up
//                                 to max_backoff); a permanent one, or the last allowed attempt, makes it
//                                 dead with the error kept.
//   RemoveKey(key)                every job of `key`, whatever its state (its session was deleted).
//
// A claim is a random token stored with the job: Renew, Complete and Fail act only while the job is still
// running under the claim the caller holds. A worker whose lease expired (and whose job another worker
// claimed since), or whose job was removed, gets kAborted and changes nothing, so a job is never
// finished twice or by someone who no longer holds it.
//   Retry(id)                     a dead job back to pending with its attempts reset (after a fix); one
//                                 whose identical twin is pending or running already is removed instead
//                                 (the twin does the work): two copies ran, or the retry failed.
//   Expedite(key)                 the pending jobs of `key` due now (someone is waiting for them).
//
// A job whose lease expired (its worker died) is claimable again. ReleaseRunning() returns every running
// job to pending at once: for a worker that knows it is the only one (it holds the data directory's lock),
// so that a crash is resumed at start-up rather than after the lease.
//
// Thread safety: all methods are safe from several threads; several processes may share one file.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "strata/util/clock.h"
#include "strata/util/status.h"

namespace strata::session {

enum class JobState { kPending, kRunning, kDone, kDead };
std::string_view JobStateName(JobState state);
// The state named `name` ("pending", "running", "done", "dead"); kInvalidArgument otherwise.
Result<JobState> ParseJobState(std::string_view name);

struct Job {
  int64_t id = 0;
  std::string kind;
  std::string key;
  std::string payload;
  JobState state = JobState::kPending;
  int attempts = 0;        // Attempts started so far.
  std::string last_error;  // Status::ToString() of the last failure.
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  int64_t not_before_ms = 0;
  int64_t lease_until_ms = 0;  // While running: when another worker may claim it.
  int64_t claim = 0;           // The claim that last took it (Claim fills it; 0 if never claimed).
};

struct JobQueueOptions {
  int max_attempts = 5;
  std::chrono::milliseconds initial_backoff{1000};
  std::chrono::milliseconds max_backoff{300'000};
  std::chrono::milliseconds lease{600'000};  // A running job not finished within this is claimable again.
  // Default: SystemClock(); on PostgreSQL the database server's clock, which every instance shares.
  // Borrowed.
  Clock* clock = nullptr;
  // Only read (SQLite: opened read-only, immutable on a read-only volume; none yet reads as empty). Every
  // change fails.
  bool read_only = false;
};

class JobQueue {
 public:
  virtual ~JobQueue() = default;
  virtual Result<int64_t> Enqueue(std::string_view kind, std::string_view key, std::string_view payload) = 0;
  virtual Result<std::optional<Job>> Claim() = 0;
  virtual Result<std::optional<Job>> ClaimOf(std::string_view key) = 0;
  // The three below take the job as Claim returned it; kAborted when its claim is no longer held.
  virtual Status Renew(const Job& job) = 0;
  virtual Status Complete(const Job& job) = 0;
  virtual Status Fail(const Job& job, const Status& error, bool retryable) = 0;
  // Gives the job back untried (its worker is shutting down): pending at once, this attempt not counted,
  // `why` kept as its last error. Rolling restarts must not use up a job's attempts.
  virtual Status Release(const Job& job, const Status& why) = 0;
  virtual Status RemoveKey(std::string_view key) = 0;
  virtual Status Retry(int64_t id) = 0;
  virtual Status Expedite(std::string_view key) = 0;
  virtual Status ReleaseRunning() = 0;
  virtual Result<std::optional<Job>> Get(int64_t id) = 0;
  // Jobs in `state` (all when nullopt), oldest first; optionally only those of `key`.
  virtual Result<std::vector<Job>> List(std::optional<JobState> state, std::optional<std::string> key = {}) = 0;
  // The largest id this queue has handed out (0 when none), removed jobs included.
  virtual Result<int64_t> LastId() = 0;
  // Makes every id handed out from now on larger than `id` (a copied deployment's clients hold the old
  // queue's task ids: none may name another job in the copy). A smaller `id` changes nothing.
  virtual Status SkipIdsThrough(int64_t id) = 0;
};

// Opens (creating if needed) the queue database at `path`.
Result<std::unique_ptr<JobQueue>> OpenJobQueue(const std::string& path, JobQueueOptions options = {});
// Opens the queue in the PostgreSQL database at `url` (postgres://...), creating or migrating its table;
// every instance on the database shares it (claims with FOR UPDATE SKIP LOCKED, leases).
Result<std::unique_ptr<JobQueue>> OpenPgJobQueue(const std::string& url, JobQueueOptions options = {});

}  // namespace strata::session
