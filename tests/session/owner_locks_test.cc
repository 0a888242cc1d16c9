// Named locks of one process (KeyedMutex) and the in-process owner locks built on them: one holder at a
// time, deadlines, cancellation, and no name kept once nobody holds or waits for it.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "pg.h"
#include "pg_test_util.h"
#include "strata/session/owner_locks.h"
#include "test_util.h"

namespace strata::session {
namespace {

using namespace std::chrono_literals;
using Clock = KeyedMutex::Clock;

TEST(KeyedMutexTest, OneHolderAtATimeAndNoNameKeptAfter) {
  KeyedMutex m;
  int inside = 0;
  int most = 0;
  int rounds = 0;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        ASSERT_TRUE(m.Lock("session-1").ok());
        int now = ++inside;  // Guarded by the named lock alone.
        most = std::max(most, now);
        ++rounds;
        --inside;
        m.Unlock("session-1");
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(most, 1);
  EXPECT_EQ(rounds, 1600);
  EXPECT_EQ(m.Size(), 0u);
}

TEST(KeyedMutexTest, ManyNamesLeaveNothingBehind) {
  KeyedMutex m;
  for (int i = 0; i < 100000; ++i) {
    std::string key = "session-" + std::to_string(i);
    ASSERT_TRUE(m.Lock(key).ok());
    m.Unlock(key);
  }
  EXPECT_EQ(m.Size(), 0u);
}

TEST(KeyedMutexTest, AWaiterGivesUpAtItsDeadlineOrWhenCancelledAndLeavesNoName) {
  KeyedMutex m;
  ASSERT_TRUE(m.Lock("a").ok());
  auto start = Clock::now();
  Status late = m.Lock("a", start + 60ms, nullptr, "the test's holder");
  EXPECT_EQ(late.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(std::string(late.message()).find("the test's holder"), std::string::npos) << late.message();
  EXPECT_GE(Clock::now() - start, 60ms);

  Canceller cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(30ms);
    cancel.Cancel();
  });
  Status cancelled = m.Lock("a", Clock::time_point::max(), &cancel);
  canceller.join();
  EXPECT_EQ(cancelled.code(), StatusCode::kCancelled);
  EXPECT_EQ(m.Size(), 1u);  // "a", still held.
  m.Unlock("a");
  EXPECT_EQ(m.Size(), 0u);
  m.Unlock("a");  // Not held: nothing happens.
  EXPECT_EQ(m.Size(), 0u);
}

TEST(KeyedMutexTest, AnUnlockWakesTheNextWaiterAndOtherNamesDoNotWait) {
  KeyedMutex m;
  ASSERT_TRUE(m.Lock("a").ok());
  ASSERT_TRUE(m.Lock("b", Clock::now() + 10ms).ok());  // Another name is free at once.
  std::atomic<bool> got{false};
  std::thread waiter([&] {
    ASSERT_TRUE(m.Lock("a", Clock::now() + 5s).ok());
    got = true;
    m.Unlock("a");
  });
  std::this_thread::sleep_for(30ms);
  EXPECT_FALSE(got.load());
  EXPECT_EQ(m.Size(), 2u);
  m.Unlock("a");
  waiter.join();
  EXPECT_TRUE(got.load());
  m.Unlock("b");
  EXPECT_EQ(m.Size(), 0u);
}

TEST(OwnerLocksTest, AHolderOfOneOwnerKeepsTheOtherThreadsOut) {
  std::unique_ptr<OwnerLocks> locks = NewInProcessOwnerLocks();
  Result<std::unique_ptr<OwnerLocks::Held>> first = locks->Lock({"user/a", "agent/b"});
  ASSERT_TRUE(first.ok()) << first.status().message();
  Canceller cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(50ms);
    cancel.Cancel();
  });
  Result<std::unique_ptr<OwnerLocks::Held>> second = locks->Lock({"agent/b"}, &cancel);
  canceller.join();
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kCancelled);
  EXPECT_NE(std::string(second.status().message()).find("writer of these memories"), std::string::npos);
  first->reset();
  Result<std::unique_ptr<OwnerLocks::Held>> third = locks->Lock({"agent/b", "user/a"});
  EXPECT_TRUE(third.ok());
}

// A lock lost with its PostgreSQL connection (the server ended it: an idle timeout, a proxy, a failover) is
// released by the server, and another instance may take it: the holder hears of it before it writes.
TEST(PgOwnerLocksTest, ALockLostWithItsConnectionIsSaidToBeLost) {
  auto url = testing::NewPostgresDatabase();
  ASSERT_OK(url);
  auto locks = OpenPgOwnerLocks(*url);
  ASSERT_OK(locks);
  auto held = (*locks)->Lock({"user/a"});
  ASSERT_OK(held);
  EXPECT_OK((*held)->Verify());
  auto admin = pg::Conn::Connect(*url);
  ASSERT_OK(admin);
  ASSERT_OK((*admin)->Exec("SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' AND granted "
                           "AND pid <> pg_backend_pid() AND database = (SELECT oid FROM pg_database WHERE datname = "
                           "current_database())"));
  auto others = OpenPgOwnerLocks(*url);
  ASSERT_OK(others);
  auto taken = (*others)->Lock({"user/a"});  // Another instance holds it now.
  ASSERT_OK(taken);
  EXPECT_EQ((*held)->Verify().code(), StatusCode::kUnavailable);
  EXPECT_OK((*taken)->Verify());
  held->reset();  // Its release touches nobody else's lock.
  EXPECT_OK((*taken)->Verify());
}

}  // namespace
}  // namespace strata::session
