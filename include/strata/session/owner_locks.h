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

#include <memory>
#include <string>
#include <vector>

#include "strata/util/cancel.h"
#include "strata/util/status.h"

namespace strata::session {

class OwnerLocks {
 public:
  // Held until destroyed.
  class Held {
   public:
    virtual ~Held() = default;
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
