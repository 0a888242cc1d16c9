// Internal to the engine: which sessions have a turn in progress (Engine::BeginTurn: one at a time per
// session, so two interleaved turns can never log U1 U2 A1 A2) and which went quiet after a turn (when, for
// CommitPolicy::after_idle). Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <memory>
#include <string>
#include <vector>

#include "strata/session/owner_locks.h"
#include "strata/util/status.h"

namespace strata::engine_internal {

class TurnBook {
 public:
  using Clock = std::chrono::steady_clock;

  // Marks `session` busy, keeping `held` (its turn lock across instances) until End; kFailedPrecondition
  // when a turn of it is in progress already.
  Status Begin(const std::string& session, std::unique_ptr<session::OwnerLocks::Held> held = nullptr) {
    std::lock_guard lock(mu_);
    if (!busy_.emplace(session, std::move(held)).second) {
      return Status::FailedPrecondition("session " + session + " already has a turn in progress; send the next "
                                        "turn when its reply has ended");
    }
    idle_.erase(session);  // A session with a turn in progress is not idle.
    return Status::Ok();
  }
  // Ends the turn and releases its lock; with `idle`, the session is quiet from then on (a commit may wait
  // for it): tracked as `ref`, its incarnation (session::SessionRef), so that a session deleted and made
  // again under its id is never committed as the one that went quiet.
  void End(const std::string& session, bool idle, const std::string& ref = "") {
    std::unique_ptr<session::OwnerLocks::Held> released;  // Released after mu_ (an unlock may do I/O).
    std::lock_guard lock(mu_);
    if (auto it = busy_.find(session); it != busy_.end()) {
      released = std::move(it->second);
      busy_.erase(it);
    }
    if (idle) {
      idle_[session] = {Clock::now(), ref.empty() ? session : ref};
    } else {
      idle_.erase(session);
    }
  }
  // Whether a turn of `session` is in progress in this process.
  bool Busy(const std::string& session) {
    std::lock_guard lock(mu_);
    return busy_.contains(session);
  }
  // Tracks `session` (its incarnation `ref`) as quiet since `since` (not when a turn of it is in progress).
  void Idle(const std::string& session, const std::string& ref, Clock::time_point since) {
    std::lock_guard lock(mu_);
    if (!busy_.contains(session)) idle_[session] = {since, ref};
  }
  // The sessions quiet for at least `after` (and not busy), as their refs, which are no longer tracked.
  std::vector<std::string> TakeIdle(std::chrono::milliseconds after) {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    auto now = Clock::now();
    for (auto it = idle_.begin(); it != idle_.end();) {
      if (now - it->second.since >= after && !busy_.contains(it->first)) {
        out.push_back(it->second.ref);
        it = idle_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<session::OwnerLocks::Held>> busy_;  // Guarded by mu_.
  struct Quiet {
    Clock::time_point since;
    std::string ref;
  };
  std::map<std::string, Quiet> idle_;  // By session id. Guarded by mu_.
};

}  // namespace strata::engine_internal
