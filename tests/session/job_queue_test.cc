// JobQueue: ordering per key, backoff, bounded retries, dead letters, leases, durability across reopen.
#include "strata/session/job_queue.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <thread>
#include <tuple>

#include "pg.h"
#include "pg_test_util.h"
#include "sqlite_test_util.h"
#include "test_util.h"

namespace strata::session {
namespace {

// Every test runs on both backends: SQLite (a file) and PostgreSQL (a fresh database on the test server).
class JobQueueTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "postgres") {
      auto url = testing::NewPostgresDatabase();
      ASSERT_OK(url);
      url_ = *url;
    }
    Reopen();
  }
  // A queue over the same storage (another connection: another process or instance).
  Result<std::unique_ptr<JobQueue>> Open() {
    JobQueueOptions options{.max_attempts = 3,
                            .initial_backoff = std::chrono::milliseconds(1000),
                            .max_backoff = std::chrono::milliseconds(3000),
                            .lease = std::chrono::milliseconds(60'000),
                            .clock = &clock_};
    return GetParam() == "postgres" ? OpenPgJobQueue(url_, options) : OpenJobQueue(dir_.File("queue.db"), options);
  }
  void Reopen() {
    queue_.reset();
    auto q = Open();
    ASSERT_OK(q);
    queue_ = std::move(*q);
  }
  Job ClaimOrDie() {
    auto job = queue_->Claim();
    EXPECT_TRUE(job.ok() && job->has_value()) << (job.ok() ? "nothing runnable" : job.status().ToString());
    return job.ok() && job->has_value() ? **job : Job{};
  }
  bool NothingRunnable() {
    auto job = queue_->Claim();
    return job.ok() && !job->has_value();
  }
  testing::TempDir dir_;
  std::string url_;
  ManualClock clock_;
  std::unique_ptr<JobQueue> queue_;
};

INSTANTIATE_TEST_SUITE_P(Backends, JobQueueTest, ::testing::Values("sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST_P(JobQueueTest, JobsOfOneKeyRunInOrderOthersInParallel) {
  auto a1 = queue_->Enqueue("commit", "session-a", "1");
  auto a2 = queue_->Enqueue("commit", "session-a", "2");
  auto b1 = queue_->Enqueue("commit", "session-b", "1");
  ASSERT_OK(a1);
  ASSERT_OK(a2);
  ASSERT_OK(b1);
  Job first = ClaimOrDie();
  EXPECT_EQ(first.id, *a1);
  EXPECT_EQ(first.attempts, 1);
  EXPECT_EQ(first.state, JobState::kRunning);
  Job second = ClaimOrDie();  // a2 waits for a1; b1 does not.
  EXPECT_EQ(second.id, *b1);
  EXPECT_TRUE(NothingRunnable());
  ASSERT_OK(queue_->Complete(first));
  EXPECT_EQ(ClaimOrDie().id, *a2);
}

// ClaimOf takes only the named key's jobs, in the key's order; the other keys' jobs stay for Claim.
TEST_P(JobQueueTest, AClaimOfOneKeyLeavesTheOthers) {
  auto b1 = queue_->Enqueue("commit", "session-b", "1");
  auto a1 = queue_->Enqueue("commit", "session-a", "1");
  auto a2 = queue_->Enqueue("commit", "session-a", "2");
  ASSERT_OK(b1);
  ASSERT_OK(a1);
  ASSERT_OK(a2);
  auto first = queue_->ClaimOf("session-a");
  ASSERT_OK(first);
  ASSERT_TRUE(first->has_value());
  EXPECT_EQ((*first)->id, *a1);
  auto blocked = queue_->ClaimOf("session-a");  // a2 waits for a1.
  ASSERT_OK(blocked);
  EXPECT_FALSE(blocked->has_value());
  auto none = queue_->ClaimOf("session-c");
  ASSERT_OK(none);
  EXPECT_FALSE(none->has_value());
  ASSERT_OK(queue_->Complete(**first));
  auto second = queue_->ClaimOf("session-a");
  ASSERT_OK(second);
  ASSERT_TRUE(second->has_value());
  EXPECT_EQ((*second)->id, *a2);
  EXPECT_EQ(ClaimOrDie().id, *b1);
}

// LastId counts ids handed out and removed since; SkipIdsThrough moves the next id past a given one, never
// back, and holds across a reopen (the migration's guarantee that a copied deployment reuses no task id).
TEST_P(JobQueueTest, IdsCanBeSkippedButNeverGoBack) {
  EXPECT_EQ(*queue_->LastId(), 0);
  auto first = queue_->Enqueue("k", "a", "{}");
  ASSERT_OK(first);
  ASSERT_OK(queue_->RemoveKey("a"));
  EXPECT_EQ(*queue_->LastId(), *first);
  ASSERT_OK(queue_->SkipIdsThrough(41));
  EXPECT_EQ(*queue_->LastId(), 41);
  ASSERT_OK(queue_->SkipIdsThrough(7));  // Smaller: nothing moves back.
  Reopen();
  auto next = queue_->Enqueue("k", "b", "{}");
  ASSERT_OK(next);
  EXPECT_EQ(*next, 42);
  EXPECT_EQ(*queue_->LastId(), 42);
}

TEST_P(JobQueueTest, IdenticalPendingJobIsNotAddedTwice) {
  auto a = queue_->Enqueue("commit", "s", "archive_001");
  auto again = queue_->Enqueue("commit", "s", "archive_001");
  ASSERT_OK(a);
  ASSERT_OK(again);
  EXPECT_EQ(*a, *again);
  ASSERT_OK(queue_->Complete(ClaimOrDie()));
  auto after_done = queue_->Enqueue("commit", "s", "archive_001");  // Done jobs do not absorb new ones.
  ASSERT_OK(after_done);
  EXPECT_NE(*after_done, *a);
  EXPECT_FALSE(queue_->Enqueue("", "s", "x").ok());
  // A job absorbed by its twin takes no id: the next one is the next number on both backends (PostgreSQL's
  // insert that conflicted took one from its sequence).
  for (int i = 0; i < 3; ++i) ASSERT_EQ(*queue_->Enqueue("commit", "s", "archive_001"), *after_done);
  auto next = queue_->Enqueue("commit", "s", "archive_002");
  ASSERT_OK(next);
  EXPECT_EQ(*next, *after_done + 1);
}

TEST_P(JobQueueTest, RetryableFailuresBackOffThenGoDead) {
  auto id = queue_->Enqueue("commit", "s", "p");
  ASSERT_OK(id);
  ASSERT_OK(queue_->Fail(ClaimOrDie(), Status::Unavailable("model overloaded"), true));
  EXPECT_TRUE(NothingRunnable());  // Backing off for 1 s.
  clock_.Advance(999'000);
  EXPECT_TRUE(NothingRunnable());
  clock_.Advance(1'000);
  Job second = ClaimOrDie();
  EXPECT_EQ(second.attempts, 2);
  ASSERT_OK(queue_->Fail(second, Status::Unavailable("again"), true));
  clock_.Advance(1'999'000);  // Second backoff: 2 s.
  EXPECT_TRUE(NothingRunnable());
  clock_.Advance(1'000);
  Job third = ClaimOrDie();
  ASSERT_OK(queue_->Fail(third, Status::Unavailable("still"), true));  // The third and last attempt.
  auto job = queue_->Get(*id);
  ASSERT_OK(job);
  EXPECT_EQ((*job)->state, JobState::kDead);
  EXPECT_NE((*job)->last_error.find("still"), std::string::npos);
  clock_.Advance(100'000'000);
  EXPECT_TRUE(NothingRunnable());
  // A fix later: the dead job is retried from scratch.
  ASSERT_OK(queue_->Retry(*id));
  EXPECT_EQ(ClaimOrDie().attempts, 1);
  EXPECT_FALSE(queue_->Retry(*id).ok());  // Only dead jobs.
}

// A dead job whose identical twin is queued again (a session reopened after it died, before its state said
// so) is removed by a retry, on both backends, and the retry of the others goes on: SQLite queued a second
// copy (both ran), PostgreSQL refused, and a retry of everything stopped at it.
TEST_P(JobQueueTest, RetryingADeadJobWhoseTwinIsQueuedLeavesOneCopy) {
  auto dead = queue_->Enqueue("commit", "s", "1");
  ASSERT_OK(dead);
  ASSERT_OK(queue_->Fail(ClaimOrDie(), Status::InvalidArgument("bad"), false));
  auto twin = queue_->Enqueue("commit", "s", "1");
  ASSERT_OK(twin);
  ASSERT_NE(*twin, *dead);
  ASSERT_OK(queue_->Retry(*dead));
  EXPECT_FALSE((*queue_->Get(*dead)).has_value());
  auto live = queue_->List(JobState::kPending);
  ASSERT_OK(live);
  ASSERT_EQ(live->size(), 1u);
  EXPECT_EQ((*live)[0].id, *twin);
  // Without a twin, a retry still queues the dead job again.
  auto other = queue_->Enqueue("commit", "t", "1");
  ASSERT_OK(other);
  Job claimed = ClaimOrDie();
  if (claimed.id != *other) {  // The twin came first; let it finish.
    ASSERT_OK(queue_->Complete(claimed));
    claimed = ClaimOrDie();
  }
  ASSERT_EQ(claimed.id, *other);
  ASSERT_OK(queue_->Fail(claimed, Status::InvalidArgument("bad"), false));
  // Live jobs that differ from it in kind, key or payload only are not its twins.
  std::vector<int64_t> others;
  for (auto [kind, key, payload] : {std::tuple{"summary", "t", "1"}, {"commit", "u", "1"}, {"commit", "t", "2"}}) {
    auto added = queue_->Enqueue(kind, key, payload);
    ASSERT_OK(added);
    others.push_back(*added);
  }
  ASSERT_OK(queue_->Retry(*other));
  EXPECT_EQ((*queue_->Get(*other))->state, JobState::kPending);
  for (int64_t id : others) EXPECT_EQ((*queue_->Get(id))->state, JobState::kPending) << id;
}

// A job given back by a worker that is shutting down is pending at once and has spent no attempt: five
// rolling restarts during one job's work made it dead.
TEST_P(JobQueueTest, AJobGivenBackAtShutdownSpendsNoAttempt) {
  auto id = queue_->Enqueue("commit", "s", "1");
  ASSERT_OK(id);
  for (int restart = 0; restart < 8; ++restart) {
    Job job = ClaimOrDie();
    EXPECT_EQ(job.attempts, 1);
    ASSERT_OK(queue_->Release(job, Status::Cancelled("shutting down")));
    auto after = queue_->Get(*id);
    ASSERT_OK(after);
    ASSERT_TRUE(after->has_value());
    EXPECT_EQ((*after)->state, JobState::kPending);
    EXPECT_EQ((*after)->attempts, 0);
    EXPECT_NE((*after)->last_error.find("shutting down"), std::string::npos) << (*after)->last_error;
    // Given back twice, or by a claim that no longer holds it: refused, nothing changed.
    EXPECT_EQ(queue_->Release(job, Status::Cancelled("again")).code(), StatusCode::kAborted);
  }
  Job job = ClaimOrDie();  // At once: no backoff.
  ASSERT_OK(queue_->Fail(job, Status::Unavailable("model down"), true));
  EXPECT_EQ((*queue_->Get(*id))->attempts, 1);  // A real failure still counts.
}

// An error holding a NUL (a provider's message) is recorded as every backend keeps free text: PostgreSQL
// refused the update, so the job stayed running, was taken again when its lease ran out, and never died.
TEST_P(JobQueueTest, AnErrorHoldingANulIsRecordedAndTheJobMovesOn) {
  using namespace std::string_literals;
  auto id = queue_->Enqueue("commit", "s", "1");
  ASSERT_OK(id);
  ASSERT_OK(queue_->Release(ClaimOrDie(), Status::Cancelled("stopping\0 now"s)));
  EXPECT_EQ((*queue_->Get(*id))->last_error, "cancelled: stopping\xEF\xBF\xBD now");
  ASSERT_OK(queue_->Fail(ClaimOrDie(), Status::InvalidArgument("bad request\0 near token"s), false));
  auto dead = queue_->Get(*id);
  ASSERT_OK(dead);
  EXPECT_EQ((*dead)->state, JobState::kDead);
  EXPECT_EQ((*dead)->last_error, "invalid_argument: bad request\xEF\xBF\xBD near token");
}

TEST_P(JobQueueTest, PermanentErrorsGoDeadAtOnceAndNeverBlockTheKey) {
  auto bad = queue_->Enqueue("commit", "s", "1");
  auto next = queue_->Enqueue("commit", "s", "2");
  ASSERT_OK(bad);
  ASSERT_OK(next);
  ASSERT_OK(queue_->Fail(ClaimOrDie(), Status::InvalidArgument("archive unreadable"), false));
  auto dead = queue_->List(JobState::kDead);
  ASSERT_OK(dead);
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ((*dead)[0].id, *bad);
  EXPECT_EQ(ClaimOrDie().id, *next);  // The dead letter does not hold the session back.
}

TEST_P(JobQueueTest, ExpiredLeasesAndRestartsHandTheJobBack) {
  auto id = queue_->Enqueue("commit", "s", "p");
  ASSERT_OK(id);
  ClaimOrDie();
  EXPECT_TRUE(NothingRunnable());
  clock_.Advance(60'001'000);  // The worker vanished; its lease ran out.
  Job again = ClaimOrDie();
  EXPECT_EQ(again.id, *id);
  EXPECT_EQ(again.attempts, 2);
  // A crash: the only worker restarts and releases what it held.
  Reopen();
  EXPECT_TRUE(NothingRunnable());
  ASSERT_OK(queue_->ReleaseRunning());
  EXPECT_EQ(ClaimOrDie().id, *id);
  Job unknown;
  unknown.id = *id + 100;
  EXPECT_EQ(queue_->Complete(unknown).code(), StatusCode::kAborted);
}

// A worker whose lease ran out while another claimed the job can no longer renew, complete or fail it:
// each is refused as kAborted and changes nothing, so the job runs to its end under the new claim only.
TEST_P(JobQueueTest, OnlyTheClaimThatHoldsAJobMayRenewCompleteOrFailIt) {
  auto id = queue_->Enqueue("commit", "s", "p");
  ASSERT_OK(id);
  Job first = ClaimOrDie();
  EXPECT_NE(first.claim, 0);
  EXPECT_EQ(first.lease_until_ms - first.updated_ms, 60'000);
  // Renewing moves the lease on: a worker alive past the first lease keeps its job.
  clock_.Advance(50'000'000);
  ASSERT_OK(queue_->Renew(first));
  clock_.Advance(50'000'000);  // 100 s after the claim, 50 s after the renewal.
  EXPECT_TRUE(NothingRunnable());
  // Now it stalls: the lease runs out and a second worker claims the job.
  clock_.Advance(60'001'000);
  auto other = Open();
  ASSERT_OK(other);
  auto taken = (*other)->Claim();
  ASSERT_OK(taken);
  ASSERT_TRUE(taken->has_value());
  Job second = **taken;
  EXPECT_EQ(second.id, first.id);
  EXPECT_NE(second.claim, first.claim);
  EXPECT_EQ(queue_->Renew(first).code(), StatusCode::kAborted);
  Status late = queue_->Complete(first);
  EXPECT_EQ(late.code(), StatusCode::kAborted);
  EXPECT_NE(late.message().find("no longer holds it"), std::string::npos) << late.ToString();
  EXPECT_EQ(queue_->Fail(first, Status::Unavailable("late"), false).code(), StatusCode::kAborted);
  auto job = queue_->Get(*id);
  ASSERT_OK(job);
  EXPECT_EQ((*job)->state, JobState::kRunning);  // Untouched by the stale worker.
  EXPECT_EQ((*job)->claim, second.claim);
  EXPECT_TRUE((*job)->last_error.empty());
  ASSERT_OK((*other)->Complete(second));
  EXPECT_EQ((*queue_->Get(*id))->state, JobState::kDone);
  EXPECT_EQ((*other)->Complete(second).code(), StatusCode::kAborted);  // Not twice either.
}

// A deleted session's jobs go with it, whatever their state; a worker running one can no longer finish it.
TEST_P(JobQueueTest, RemoveKeyTakesEveryJobOfTheKey) {
  ASSERT_OK(queue_->Enqueue("commit", "s@1", "a"));
  ASSERT_OK(queue_->Enqueue("commit", "s@1", "b"));
  ASSERT_OK(queue_->Enqueue("commit", "s@2", "a"));
  Job running = ClaimOrDie();
  ASSERT_EQ(running.key, "s@1");
  ASSERT_OK(queue_->RemoveKey("s@1"));
  EXPECT_EQ(queue_->Complete(running).code(), StatusCode::kAborted);
  auto left = queue_->List(std::nullopt);
  ASSERT_OK(left);
  ASSERT_EQ(left->size(), 1u);
  EXPECT_EQ((*left)[0].key, "s@2");
  EXPECT_TRUE(queue_->List(std::nullopt, std::string("s@1"))->empty());
}

TEST_P(JobQueueTest, ConcurrentWorkersClaimEachJobOnce) {
  for (int i = 0; i < 40; ++i) ASSERT_OK(queue_->Enqueue("k", "key" + std::to_string(i % 8), std::to_string(i)));
  std::mutex mu;
  std::multiset<int64_t> seen;
  std::map<std::string, int> running;   // Guarded by mu.
  std::map<std::string, int64_t> last;  // Guarded by mu.
  // Each worker has a queue of its own (its own connection), as separate processes or instances do.
  std::vector<std::unique_ptr<JobQueue>> queues;
  for (int w = 0; w < 4; ++w) {
    auto q = Open();
    ASSERT_OK(q);
    queues.push_back(std::move(*q));
  }
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&, queue = queues[w].get()] {
      while (true) {
        auto job = queue->Claim();
        if (!job.ok()) continue;  // Busy: try again.
        if (!job->has_value()) {
          auto pending = queue->List(JobState::kPending);
          if (pending.ok() && pending->empty()) return;
          std::this_thread::yield();
          continue;
        }
        {
          std::lock_guard lock(mu);
          seen.insert((*job)->id);
          // Jobs of one key run one at a time, in order, whichever worker claims them.
          EXPECT_EQ(running[(*job)->key]++, 0) << "two jobs of " << (*job)->key << " at once";
          EXPECT_GT((*job)->id, last[(*job)->key]) << "out of order in " << (*job)->key;
          last[(*job)->key] = (*job)->id;
        }
        std::this_thread::yield();
        {
          std::lock_guard lock(mu);
          running[(*job)->key]--;
        }
        EXPECT_OK(queue->Complete(**job));
      }
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(seen.size(), 40u);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 40u);
  EXPECT_EQ(queue_->List(JobState::kDone)->size(), 40u);
}

// A job's id is never given again: not after the newest job was removed with its session (a client still
// following that task must not be shown another session's job), and not after reopening.
TEST_P(JobQueueTest, AnIdIsNeverGivenAgainAfterItsJobIsRemoved) {
  auto first = queue_->Enqueue("commit", "a@1", "1");
  ASSERT_OK(first);
  auto newest = queue_->Enqueue("commit", "b@1", "1");
  ASSERT_OK(newest);
  ASSERT_OK(queue_->RemoveKey("b@1"));
  auto next = queue_->Enqueue("commit", "c@1", "1");
  ASSERT_OK(next);
  EXPECT_GT(*next, *newest);
  ASSERT_OK(queue_->RemoveKey("c@1"));
  Reopen();
  auto after_reopen = queue_->Enqueue("commit", "d@1", "1");
  ASSERT_OK(after_reopen);
  EXPECT_GT(*after_reopen, *next);
  auto gone = queue_->Get(*newest);
  ASSERT_OK(gone);
  EXPECT_FALSE(gone->has_value());
}

// A queue written before ids were AUTOINCREMENT is rebuilt on open with every job kept as it was.
TEST(SqliteJobQueue, AQueueFromBeforeAutoincrementIsRebuiltKeepingItsJobs) {
  testing::TempDir dir;
  ASSERT_OK(testing::SqliteRows(
      dir.File("queue.db"),
      "CREATE TABLE jobs(id INTEGER PRIMARY KEY, kind TEXT NOT NULL, key TEXT NOT NULL, payload TEXT NOT NULL, state "
      "TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT '', created_ms INTEGER "
      "NOT NULL, updated_ms INTEGER NOT NULL, not_before_ms INTEGER NOT NULL DEFAULT 0, lease_until_ms INTEGER NOT "
      "NULL DEFAULT 0); INSERT INTO jobs(id, kind, key, payload, state, attempts, last_error, created_ms, "
      "updated_ms) VALUES (7, 'commit', 's@1', '1', 'dead', 3, 'model down', 10, 20), (9, 'commit', 's@1', '2', "
      "'pending', 0, '', 30, 30);"));
  auto queue = OpenJobQueue(dir.File("queue.db"), {});
  ASSERT_OK(queue);
  auto dead = (*queue)->Get(7);
  ASSERT_OK(dead);
  ASSERT_TRUE(dead->has_value());
  EXPECT_EQ((*dead)->state, JobState::kDead);
  EXPECT_EQ((*dead)->last_error, "model down");
  EXPECT_EQ((*dead)->attempts, 3);
  ASSERT_OK((*queue)->RemoveKey("s@1"));
  auto next = (*queue)->Enqueue("commit", "t@1", "1");
  ASSERT_OK(next);
  EXPECT_EQ(*next, 10) << "after the largest id the old table held, although that job is gone";
  queue->reset();
  auto schema = testing::SqliteRows(dir.File("queue.db"), "SELECT sql FROM sqlite_master WHERE name = 'jobs'");
  ASSERT_OK(schema);
  ASSERT_EQ(schema->size(), 1u);
  EXPECT_NE((*schema)[0].find("AUTOINCREMENT"), std::string::npos) << (*schema)[0];
}

// Processes opening a queue from before claims were kept, at once (a server and CLI commands after an
// upgrade): each looked for the column and added it, and all but the first failed to open.
TEST(SqliteJobQueue, AQueueFromBeforeClaimsOpenedByManyAtOnceOpensForEveryOne) {
  for (int round = 0; round < 10; ++round) {
    testing::TempDir dir;
    ASSERT_OK(testing::SqliteRows(
        dir.File("queue.db"),
        "CREATE TABLE jobs(id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, key TEXT NOT NULL, payload "
        "TEXT NOT NULL, state TEXT NOT NULL, attempts INTEGER NOT NULL DEFAULT 0, last_error TEXT NOT NULL DEFAULT "
        "'', created_ms INTEGER NOT NULL, updated_ms INTEGER NOT NULL, not_before_ms INTEGER NOT NULL DEFAULT 0, "
        "lease_until_ms INTEGER NOT NULL DEFAULT 0); INSERT INTO jobs(kind, key, payload, state, created_ms, "
        "updated_ms) VALUES ('commit', 's@1', '1', 'pending', 10, 10);"));
    std::vector<std::thread> openers;
    std::vector<Status> opened(4);
    for (size_t i = 0; i < opened.size(); ++i) {
      openers.emplace_back([&, i] { opened[i] = OpenJobQueue(dir.File("queue.db"), {}).status(); });
    }
    for (std::thread& t : openers) t.join();
    for (const Status& status : opened) ASSERT_TRUE(status.ok()) << "round " << round << ": " << status.message();
  }
}

// A database restart (pg_ctl restart) drops the connection: the call that finds it gone fails as
// unavailable, the next one reconnects, and nothing acknowledged before is lost.
TEST(PgJobQueue, ReconnectsAfterADatabaseRestartWithoutLosingJobs) {
  testing::OwnPostgres server;
  ASSERT_OK(server.status());
  auto queue = OpenPgJobQueue(server.url());
  ASSERT_OK(queue);
  std::vector<int64_t> ids;
  for (int i = 0; i < 5; ++i) {
    auto id = (*queue)->Enqueue("commit", "s" + std::to_string(i), "p");
    ASSERT_OK(id);
    ids.push_back(*id);
  }
  ASSERT_OK(server.Restart());
  Result<std::vector<Job>> listed = (*queue)->List(std::nullopt);
  if (!listed.ok()) {
    EXPECT_EQ(listed.status().code(), StatusCode::kUnavailable) << listed.status().ToString();
    listed = (*queue)->List(std::nullopt);
  }
  ASSERT_OK(listed);
  ASSERT_EQ(listed->size(), ids.size());
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_EQ((*listed)[i].id, ids[i]);
  EXPECT_OK((*queue)->Enqueue("commit", "after", "p"));
}

// Without a clock of its own the queue keeps the database server's time: instances on machines whose clocks
// disagree compare one clock's leases (one whose clock ran ahead took over the others' jobs early). Here the
// database's clock is a day ahead of this machine's (clock_timestamp() shadowed in the test database).
TEST(PgJobQueue, LeasesAreKeptInTheDatabaseServersTime) {
  auto url = testing::NewPostgresDatabase();
  ASSERT_OK(url);
  {
    auto setup = pg::Conn::Connect(*url);
    ASSERT_OK(setup);
    ASSERT_OK((*setup)->Exec("CREATE FUNCTION public.clock_timestamp() RETURNS timestamptz LANGUAGE sql AS "
                             "$$ SELECT pg_catalog.clock_timestamp() + interval '1 day' $$"));
    ASSERT_OK((*setup)->Exec("DO $$ BEGIN EXECUTE format('ALTER DATABASE %I SET search_path = public, pg_catalog', "
                             "current_database()); END $$"));
  }
  auto queue = OpenPgJobQueue(*url, {.lease = std::chrono::milliseconds(90'000)});
  ASSERT_OK(queue);
  const int64_t day = 24 * 3600 * 1000;
  auto here_ms = [] { return SystemClock()->WallMicros() / 1000; };
  const int64_t before = here_ms();
  ASSERT_OK((*queue)->Enqueue("commit", "s", "p"));
  auto job = (*queue)->Claim();
  ASSERT_OK(job);
  ASSERT_TRUE(job->has_value());
  const int64_t after = here_ms();
  EXPECT_GE((*job)->updated_ms, before + day);
  EXPECT_LE((*job)->updated_ms, after + day);
  EXPECT_EQ((*job)->lease_until_ms - (*job)->updated_ms, 90'000);
  // Renewed and failed: every time written is the server's.
  ASSERT_OK((*queue)->Renew(**job));
  ASSERT_OK((*queue)->Fail(**job, Status::Unavailable("model down"), /*retryable=*/true));
  auto failed = (*queue)->Get((*job)->id);
  ASSERT_OK(failed);
  ASSERT_TRUE(failed->has_value());
  EXPECT_GE((*failed)->updated_ms, after + day - 1000);
  EXPECT_LE((*failed)->updated_ms, here_ms() + day);
  EXPECT_GT((*failed)->not_before_ms, (*failed)->updated_ms);  // The backoff, from the server's now.
  // Not runnable before its backoff by the server's clock (this machine's is a day behind).
  auto again = (*queue)->Claim();
  ASSERT_OK(again);
  EXPECT_FALSE(again->has_value());
}

TEST(PgJobQueue, ABadUrlOrAnUnreachableServerIsAClearError) {
  auto bad = OpenPgJobQueue("postgresql://strata@/db?host=/nonexistent-dir&connect_timeout=2");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kUnavailable) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("cannot connect"), std::string::npos) << bad.status().ToString();
  auto malformed = OpenPgJobQueue("postgresql://strata:secret@/db?nonsense_option=1");
  ASSERT_FALSE(malformed.ok());
  EXPECT_EQ(malformed.status().message().find("secret"), std::string::npos) << "no password in messages";
}

}  // namespace
}  // namespace strata::session
