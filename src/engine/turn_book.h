// Internal to the engine: which sessions have a turn in progress (Engine::BeginTurn: one at a time per
// session, so two interleaved turns can never log U1 U2 A1 A2) and which went quiet after a turn (when, for
// CommitPolicy::after_idle). Thread-safe.
#pragma once

#include <chrono>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "strata/util/status.h"

namespace strata::engine_internal {

class TurnBook {
 public:
  using Clock = std::chrono::steady_clock;

  // Marks `session` busy; kFailedPrecondition when a turn of it is in progress already.
  Status Begin(const std::string& session) {
    std::lock_guard lock(mu_);
    if (!busy_.insert(session).second) {
      return Status::FailedPrecondition("session " + session + " already has a turn in progress; send the next "
                                        "turn when its reply has ended");
    }
    idle_.erase(session);  // A session with a turn in progress is not idle.
    return Status::Ok();
  }
  // Ends the turn; with `idle_since`, the session is quiet from then on (a commit may wait for it).
  void End(const std::string& session, bool idle) {
    std::lock_guard lock(mu_);
    busy_.erase(session);
    if (idle) {
      idle_[session] = Clock::now();
    } else {
      idle_.erase(session);
    }
  }
  // The sessions quiet for at least `after` (and not busy), which are no longer tracked.
  std::vector<std::string> TakeIdle(std::chrono::milliseconds after) {
    std::lock_guard lock(mu_);
    std::vector<std::string> out;
    auto now = Clock::now();
    for (auto it = idle_.begin(); it != idle_.end();) {
      if (now - it->second >= after && !busy_.count(it->first)) {
        out.push_back(it->first);
        it = idle_.erase(it);
      } else {
        ++it;
      }
    }
    return out;
  }

 private:
  std::mutex mu_;
  std::set<std::string> busy_;                     // Guarded by mu_.
  std::map<std::string, Clock::time_point> idle_;  // Guarded by mu_.
};

}  // namespace strata::engine_internal
