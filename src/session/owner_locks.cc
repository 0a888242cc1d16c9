#include "strata/session/owner_locks.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

#include "pg.h"
#include "strata/memory/hash.h"
#include "strata/util/file_system.h"

namespace strata::session {
namespace {

using std::chrono::milliseconds;

// How long a waiter sleeps between looks at a lock another holds (and at its canceller).
constexpr milliseconds kPoll{20};

std::vector<std::string> SortedUnique(std::vector<std::string> owners) {
  std::sort(owners.begin(), owners.end());
  owners.erase(std::unique(owners.begin(), owners.end()), owners.end());
  return owners;
}

Status CancelledWaiting() { return Status::Cancelled("cancelled while waiting for another writer of these memories"); }

}  // namespace

Status KeyedMutex::Lock(const std::string& key, Clock::time_point deadline, const Canceller* cancel,
                        std::string_view waiting_for) {
  std::unique_lock lock(mu_);
  std::unique_ptr<Slot>& s = slots_[key];
  if (!s) s = std::make_unique<Slot>();
  Slot* slot = s.get();  // Stays while users > 0.
  ++slot->users;
  while (slot->held) {
    if (cancel != nullptr && cancel->cancelled()) {
      Leave(key, slot);
      return Status::Cancelled("cancelled while waiting for " + std::string(waiting_for));
    }
    Clock::time_point now = Clock::now();
    if (now >= deadline) {
      Leave(key, slot);
      return Status::DeadlineExceeded("waited too long for " + std::string(waiting_for));
    }
    slot->cv.wait_until(lock, deadline - now < kPoll ? deadline : now + kPoll);
  }
  slot->held = true;
  return Status::Ok();
}

void KeyedMutex::Unlock(const std::string& key) {
  std::lock_guard lock(mu_);
  auto it = slots_.find(key);
  if (it == slots_.end() || !it->second->held) return;  // Not held: a caller's mistake, harmless here.
  Slot* slot = it->second.get();
  slot->held = false;
  slot->cv.notify_one();
  Leave(key, slot);
}

size_t KeyedMutex::Size() {
  std::lock_guard lock(mu_);
  return slots_.size();
}

void KeyedMutex::Leave(const std::string& key, Slot* slot) {
  if (--slot->users == 0) slots_.erase(key);
}

namespace {

// Runs the functions it was given, in reverse order, when destroyed.
class HeldAll final : public OwnerLocks::Held {
 public:
  void Then(std::function<void()> release) { releases_.push_back(std::move(release)); }
  void VerifiedBy(std::function<Status()> verify) { verify_ = std::move(verify); }
  ~HeldAll() override {
    for (auto it = releases_.rbegin(); it != releases_.rend(); ++it) (*it)();
  }
  Status Verify() override { return verify_ ? verify_() : Status::Ok(); }

 private:
  std::vector<std::function<void()>> releases_;
  std::function<Status()> verify_;
};

// The threads of this process, owner by owner.
class InProcess {
 public:
  Status Lock(const std::vector<std::string>& owners, const Canceller* cancel, HeldAll& held) {
    for (const std::string& owner : owners) {
      STRATA_RETURN_IF_ERROR(
          names_.Lock(owner, KeyedMutex::Clock::time_point::max(), cancel, "another writer of these memories"));
      held.Then([this, owner] { names_.Unlock(owner); });
    }
    return Status::Ok();
  }

 private:
  KeyedMutex names_;
};

class InProcessOwnerLocks final : public OwnerLocks {
 public:
  Result<std::unique_ptr<Held>> Lock(std::vector<std::string> owners, const Canceller* cancel) override {
    auto held = std::make_unique<HeldAll>();
    STRATA_RETURN_IF_ERROR(threads_.Lock(SortedUnique(std::move(owners)), cancel, *held));
    return std::unique_ptr<Held>(std::move(held));
  }

 private:
  InProcess threads_;
};

// Processes sharing a data directory: <dir>/<hash of the owner>.lock, flock(2).
class FileOwnerLocks final : public OwnerLocks {
 public:
  explicit FileOwnerLocks(std::string dir) : dir_(std::move(dir)) {}

  Result<std::unique_ptr<Held>> Lock(std::vector<std::string> owners, const Canceller* cancel) override {
    owners = SortedUnique(std::move(owners));
    auto held = std::make_unique<HeldAll>();
    STRATA_RETURN_IF_ERROR(threads_.Lock(owners, cancel, *held));
    for (const std::string& owner : owners) {
      // Owner ids are URI scope ids (safe in a name), but a hash keeps the name short whatever they are.
      std::string path = dir_ + "/owner-" + memory::HashHex(owner).substr(0, 16) + ".lock";
      while (true) {
        Result<std::unique_ptr<FileLock>> lock = PosixFileSystem()->LockFile(path, kPoll * 5);
        if (lock.ok()) {
          std::shared_ptr<FileLock> kept = std::move(*lock);
          held->Then([kept]() mutable { kept.reset(); });
          break;
        }
        if (lock.status().code() != StatusCode::kUnavailable) return lock.status().WithContext("memory lock");
        if (cancel != nullptr && cancel->cancelled()) return CancelledWaiting();
      }
    }
    return std::unique_ptr<Held>(std::move(held));
  }

 private:
  std::string dir_;
  InProcess threads_;
};

// Instances sharing a PostgreSQL database: a session-level advisory lock per owner (keyed by the schema
// too, so that accounts never wait for each other), taken with pg_try_advisory_lock so a waiter can be
// cancelled. Each holder has a connection of its own for as long as it holds: a lock on a connection the
// instance lost (it died) is released by the server.
class PgOwnerLocks final : public OwnerLocks {
 public:
  explicit PgOwnerLocks(std::string url) : url_(std::move(url)) {}

  Result<std::unique_ptr<Held>> Lock(std::vector<std::string> owners, const Canceller* cancel) override {
    owners = SortedUnique(std::move(owners));
    auto held = std::make_unique<HeldAll>();
    STRATA_RETURN_IF_ERROR(threads_.Lock(owners, cancel, *held));
    if (owners.empty()) return std::unique_ptr<Held>(std::move(held));
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<pg::Conn> conn, Take());
    // Given back when every lock on it is released; a connection whose unlock failed is dropped (its
    // session's locks end with it).
    auto healthy = std::make_shared<bool>(true);
    held->Then([this, conn, healthy] {
      if (*healthy) Give(conn);
    });
    for (const std::string& owner : owners) {
      for (milliseconds pause = milliseconds(2);; pause = std::min(pause * 2, kPoll * 5)) {
        Result<pg::Rows> r = conn->Exec(
            "SELECT pg_try_advisory_lock(hashtext('strata memory owner'), hashtext(current_schema() || '/' || $1))",
            {owner});
        if (!r.ok()) {
          *healthy = false;
          return r.status().WithContext("memory lock");
        }
        STRATA_ASSIGN_OR_RETURN(std::string got, r->Text(0, 0));
        if (got == "t") break;
        if (cancel != nullptr && cancel->cancelled()) return CancelledWaiting();
        std::this_thread::sleep_for(pause);
      }
      held->Then([conn, owner, healthy] {
        Result<pg::Rows> r = conn->Exec(
            "SELECT pg_advisory_unlock(hashtext('strata memory owner'), hashtext(current_schema() || '/' || $1))",
            {owner});
        if (!r.ok()) *healthy = false;
      });
    }
    // A connection that dropped, or was made again since, holds none of the locks taken on it.
    const uint64_t connects = conn->connects();
    held->VerifiedBy([conn, connects, healthy]() -> Status {
      Result<pg::Rows> r = conn->Exec("SELECT 1");
      if (r.ok() && conn->connects() == connects) return Status::Ok();
      *healthy = false;
      return Status::Unavailable("the memory lock was lost with its database connection; the change was not made");
    });
    return std::unique_ptr<Held>(std::move(held));
  }

 private:
  Result<std::shared_ptr<pg::Conn>> Take() {
    {
      std::lock_guard lock(mu_);
      if (!idle_.empty()) {
        std::shared_ptr<pg::Conn> conn = std::move(idle_.back());
        idle_.pop_back();
        return conn;
      }
    }
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<pg::Conn> conn, pg::Conn::Connect(url_));
    return std::shared_ptr<pg::Conn>(std::move(conn));
  }
  void Give(std::shared_ptr<pg::Conn> conn) {
    std::lock_guard lock(mu_);
    if (idle_.size() < 4) idle_.push_back(std::move(conn));
  }

  std::string url_;
  InProcess threads_;
  std::mutex mu_;  // Guards idle_.
  std::vector<std::shared_ptr<pg::Conn>> idle_;
};

}  // namespace

std::unique_ptr<OwnerLocks> NewInProcessOwnerLocks() { return std::make_unique<InProcessOwnerLocks>(); }

Result<std::unique_ptr<OwnerLocks>> OpenFileOwnerLocks(std::string dir) {
  STRATA_RETURN_IF_ERROR(PosixFileSystem()->CreateDirectories(dir).WithContext("memory locks"));
  return std::unique_ptr<OwnerLocks>(std::make_unique<FileOwnerLocks>(std::move(dir)));
}

Result<std::unique_ptr<OwnerLocks>> OpenPgOwnerLocks(const std::string& url) {
  if (!pg::IsPostgresUrl(url)) return Status::InvalidArgument("memory locks: not a PostgreSQL URL");
  return std::unique_ptr<OwnerLocks>(std::make_unique<PgOwnerLocks>(url));
}

}  // namespace strata::session
