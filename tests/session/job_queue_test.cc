// JobQueue: ordering per key, backoff, bounded retries, dead letters, leases, durability across reopen.
#include "strata/session/job_queue.h"

#include <gtest/gtest.h>

#include <set>
#include <thread>

#include "test_util.h"

namespace strata::session {
namespace {

class JobQueueTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }
  void Reopen() {
    queue_.reset();
    auto q = OpenJobQueue(dir_.File("queue.db"), {.max_attempts = 3,
                                                  .initial_backoff = std::chrono::milliseconds(1000),
                                                  .max_backoff = std::chrono::milliseconds(3000),
                                                  .lease = std::chrono::milliseconds(60'000),
                                                  .clock = &clock_});
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
  ManualClock clock_;
  std::unique_ptr<JobQueue> queue_;
};

TEST_F(JobQueueTest, JobsOfOneKeyRunInOrderOthersInParallel) {
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
  ASSERT_OK(queue_->Complete(first.id));
  EXPECT_EQ(ClaimOrDie().id, *a2);
}

TEST_F(JobQueueTest, IdenticalPendingJobIsNotAddedTwice) {
  auto a = queue_->Enqueue("commit", "s", "archive_001");
  auto again = queue_->Enqueue("commit", "s", "archive_001");
  ASSERT_OK(a);
  ASSERT_OK(again);
  EXPECT_EQ(*a, *again);
  ASSERT_OK(queue_->Complete(ClaimOrDie().id));
  auto after_done = queue_->Enqueue("commit", "s", "archive_001");  // Done jobs do not absorb new ones.
  ASSERT_OK(after_done);
  EXPECT_NE(*after_done, *a);
  EXPECT_FALSE(queue_->Enqueue("", "s", "x").ok());
}

TEST_F(JobQueueTest, RetryableFailuresBackOffThenGoDead) {
  auto id = queue_->Enqueue("commit", "s", "p");
  ASSERT_OK(id);
  ASSERT_OK(queue_->Fail(ClaimOrDie().id, Status::Unavailable("model overloaded"), true));
  EXPECT_TRUE(NothingRunnable());  // Backing off for 1 s.
  clock_.Advance(999'000);
  EXPECT_TRUE(NothingRunnable());
  clock_.Advance(1'000);
  Job second = ClaimOrDie();
  EXPECT_EQ(second.attempts, 2);
  ASSERT_OK(queue_->Fail(second.id, Status::Unavailable("again"), true));
  clock_.Advance(1'999'000);  // Second backoff: 2 s.
  EXPECT_TRUE(NothingRunnable());
  clock_.Advance(1'000);
  Job third = ClaimOrDie();
  ASSERT_OK(queue_->Fail(third.id, Status::Unavailable("still"), true));  // The third and last attempt.
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

TEST_F(JobQueueTest, PermanentErrorsGoDeadAtOnceAndNeverBlockTheKey) {
  auto bad = queue_->Enqueue("commit", "s", "1");
  auto next = queue_->Enqueue("commit", "s", "2");
  ASSERT_OK(bad);
  ASSERT_OK(next);
  ASSERT_OK(queue_->Fail(ClaimOrDie().id, Status::InvalidArgument("archive unreadable"), false));
  auto dead = queue_->List(JobState::kDead);
  ASSERT_OK(dead);
  ASSERT_EQ(dead->size(), 1u);
  EXPECT_EQ((*dead)[0].id, *bad);
  EXPECT_EQ(ClaimOrDie().id, *next);  // The dead letter does not hold the session back.
}

TEST_F(JobQueueTest, ExpiredLeasesAndRestartsHandTheJobBack) {
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
  EXPECT_FALSE(queue_->Complete(*id + 100).ok());
}

TEST_F(JobQueueTest, ConcurrentWorkersClaimEachJobOnce) {
  for (int i = 0; i < 40; ++i) ASSERT_OK(queue_->Enqueue("k", "key" + std::to_string(i % 8), std::to_string(i)));
  std::mutex mu;
  std::multiset<int64_t> seen;
  std::vector<std::thread> workers;
  for (int w = 0; w < 4; ++w) {
    workers.emplace_back([&] {
      while (true) {
        auto job = queue_->Claim();
        if (!job.ok()) continue;  // Busy: try again.
        if (!job->has_value()) {
          auto pending = queue_->List(JobState::kPending);
          if (pending.ok() && pending->empty()) return;
          std::this_thread::yield();
          continue;
        }
        {
          std::lock_guard lock(mu);
          seen.insert((*job)->id);
        }
        EXPECT_OK(queue_->Complete((*job)->id));
      }
    });
  }
  for (auto& t : workers) t.join();
  EXPECT_EQ(seen.size(), 40u);
  EXPECT_EQ(std::set<int64_t>(seen.begin(), seen.end()).size(), 40u);
  EXPECT_EQ(queue_->List(JobState::kDone)->size(), 40u);
}

}  // namespace
}  // namespace strata::session
