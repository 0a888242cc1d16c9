// Who may change an owner's memories now. The dedup-and-apply step of phase 2, remember and consolidation
// each read an owner's current memories, may ask the model whether a new one repeats them, and then write:
// two of them deciding against the same memories at once would both create the same fact. They hold the
// owners they write to ("user/<id>", "agent/<id>") for exactly that step, one candidate at a time, so no
// lock outlives a decision.
//
// Three scopes, each including the ones before it:
//   NewInProcessOwnerLocks()   threads of one process (one Engine);
//   OpenFileOwnerLocks(dir)    and other processes sharing a data directory: a flock per owner in `dir`;
//   OpenPgOwnerLocks(url)      and other instances sharing a PostgreSQL database: an advisory lock per owner,
//                              held on a connection of its own (released if the instance dies).
//
// Thread safety: all are safe from many threads.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "strata/util/cancel.h"
#include "strata/util/status.h"

namespace strata::session {

// Named locks that the threads of one process take in turn: the in-process part of every OwnerLocks, and a
// session's queue of changes (Engine::Impl::HoldForChange). A name is kept only while a thread holds it or
// waits for it, so a server that has seen a million sessions keeps none of theirs. Thread-safe.
class KeyedMutex {
 public:
  using Clock = std::chrono::steady_clock;
  // Takes `key`, waiting for whoever holds it: kDeadlineExceeded at `deadline`, kCancelled (naming
  // `waiting_for`) when `cancel` fires (looked at every 20 ms).
  Status Lock(const std::string& key, Clock::time_point deadline = Clock::time_point::max(),
              const Canceller* cancel = nullptr, std::string_view waiting_for = "another holder");
  // Gives `key` back; it must be held by the caller.
  void Unlock(const std::string& key);
  // How many names are held or waited for.
  size_t Size();

 private:
  struct Slot {
    std::condition_variable cv;
    bool held = false;
    int users = 0;  // Threads holding or waiting for it.
  };
  void Leave(const std::string& key, Slot* slot);  // mu_ held.

  std::mutex mu_;  // Guards everything below and every slot.
  std::map<std::string, std::unique_ptr<Slot>> slots_;
};

class OwnerLocks {
 public:
  // Held until destroyed.
  class Held {
   public:
    virtual ~Held() = default;
    // Whether every lock is still held: kUnavailable when one was lost without a word (on PostgreSQL, the
    // connection holding it dropped — an idle timeout, a proxy, a failover — and the server released it,
    // so another instance may hold it now). Checked right before the writes the lock guards.
    virtual Status Verify() { return Status::Ok(); }
  };
  virtual ~OwnerLocks() = default;
  // Holds `owners` (sorted and de-duplicated here, so two callers never wait for each other in opposite
  // orders), waiting for whoever holds them; kCancelled when `cancel` fires while waiting.
  virtual Result<std::unique_ptr<Held>> Lock(std::vector<std::string> owners, const Canceller* cancel = nullptr) = 0;
};

std::unique_ptr<OwnerLocks> NewInProcessOwnerLocks();
Result<std::unique_ptr<OwnerLocks>> OpenFileOwnerLocks(std::string dir);
Result<std::unique_ptr<OwnerLocks>> OpenPgOwnerLocks(const std::string& url);

}  // namespace strata::session
