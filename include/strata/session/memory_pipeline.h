// Phase 2 of a session commit, and "remember this now": turning conversations into long-term memories.
//
// ProcessArchive(session, n) runs, resuming from the archive's state:
//   archived   → summarise (template session.summarize) and store the archive as a context at
//                strata://session/<id>/history/archive_NNN (transcript = L2, summary = L0/L1) → summarized
//   summarized → extract candidates (template memory.extract), parsed robustly (ExtractModelJson); a reply
//                that does not parse or validate is shown its error and asked again; if it still fails the
//                archive is marked failed with the reason and the error returned — never success with
//                nothing extracted (an explicit {"memories": []} is a valid "nothing to remember")
//                → candidates.json → extracted
//   extracted  → for each candidate in order: dedup, record the decision in the audit log, apply it to the
//                store, link the memory to the archive and the contexts the session used; refresh the L1 of
//                every directory that changed (its description, then "Currently N entries:" and their
//                abstracts) → diff.json → done
//
// Dedup: the candidate's nearest current memories in its category directory (vector search, cosine ≥
// similarity_threshold, at most max_similar) are shown to the model (template memory.dedup), which answers
// create / merge (into one of them, with the merged text) / skip, plus per-existing actions merge or delete.
// With no similar memory the candidate is created without a model call. The rules for bad answers:
//   R1 a reply that does not parse twice → create (never lose a fact; consolidation can merge later)
//   R2 an index outside the list is ignored
//   R3 "merge" without a valid merge_into → the first "merge" action's index, else create
//   R4 "skip" never deletes: its delete actions are ignored (a duplicate cannot contradict)
//   R5 "create" with merge actions → merge into the first of them
//   R6 "merge" without text → the candidate's content is appended to the target's
//   R7 an existing memory both merged and deleted is only merged
// Deleted (contradicted) and merged-away memories are superseded, not erased: they stay in the store with
// metadata valid_to and superseded_by and drop out of find and dedup; every change is in the audit log.
//
// Categories (DefaultCategories): user profile, preferences, entities (merge: one record per key) and
// events (append); agent cases (append) and patterns (merge). A merge category's memory lives at
// <dir>/<key>; an append category's at <dir>/<key>-<hash of content>, so a redo writes the same URI.
//
// Thread safety: one ProcessArchive per session at a time (the job queue orders them); different sessions
// may run concurrently. Memories of one owner (a user or an agent) are changed by one caller at a time: the
// dedup-and-apply step of each candidate of ProcessArchive, Remember and Consolidate holds the owners it
// writes to (PipelineOptions::owner_locks: across processes and instances when the engine gives locks of
// that reach), so two sessions of the same user, even on two instances, cannot store one fact twice or
// lose each other's merges.
//
// RunPending renews the lease of the job it runs while the job's work goes on (a third of the lease at a
// time), so a phase 2 longer than the lease is never claimed by a second worker; a worker that loses its
// claim anyway (it stalled past the lease, or the session was deleted) stops the job's work and changes
// nothing of the job's state.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "strata/llm/provider.h"
#include "strata/memory/store.h"
#include "strata/prompt/prompt_library.h"
#include "strata/session/audit.h"
#include "strata/session/job_queue.h"
#include "strata/session/owner_locks.h"
#include "strata/session/session.h"
#include "strata/util/cancel.h"
#include "strata/util/clock.h"
#include "strata/util/file_system.h"

namespace strata::session {

// Whose memories a category holds: strata://user/<id>/memories/… or strata://agent/<id>/memories/….
enum class Owner { kUser, kAgent };
std::string_view OwnerName(Owner owner);  // "user", "agent" (the URI kind)

struct CategorySpec {
  std::string name;
  Owner owner = Owner::kUser;
  bool merge = false;
  std::string description;
};
std::vector<CategorySpec> DefaultCategories();

// Work of another kind the job queue carries (a resource's summaries: engine/files.cc), run by the same
// worker as phase 2: its lease kept, a failure retried unless it cannot get better (kNotFound, kDataLoss,
// kFailedPrecondition, kInternal).
using JobHandler = std::function<Status(const Job& job, const Canceller* cancel)>;

struct PipelineOptions {
  std::vector<CategorySpec> categories = DefaultCategories();
  // Cosine at or above which an existing memory is shown to the model as possibly the same. The local
  // hashed embedder gives related texts 0.3-0.6; a real embedding model rather 0.6-0.9.
  double similarity_threshold = 0.3;
  size_t max_similar = 5;
  int parse_attempts = 2;  // Model calls per JSON answer (the later ones see the parse error).
  std::string language;    // For the extraction prompt; empty = the conversation's language.
  Clock* clock = nullptr;    // Audit times and validity stamps. Default: SystemClock(). Borrowed.
  // Who may write an owner's memories now (owner_locks.h). Borrowed; default: locks of this pipeline's own,
  // which serialise the threads of this process only.
  OwnerLocks* owner_locks = nullptr;
  // Handlers of the queue's other job kinds, by kind; a job of a kind without one fails for good.
  std::map<std::string, JobHandler, std::less<>> job_handlers;
};

// What one archive's phase 2 changed.
struct MemoryChange {
  MemoryAction action = MemoryAction::kCreate;
  std::string uri;
  std::string reason;
  // False: decided but not carried out (the memory it was to merge into changed while it was decided, or a
  // supersession decided with such a merge); the reason says so.
  bool applied = true;
};
struct CommitDiff {
  std::string session;
  int archive = 0;
  std::string summary;
  int candidates = 0;
  std::vector<MemoryChange> changes;
  std::string ToJson() const;
};

// What a finished archive's phase 2 changed, read from the diff.json it left (no model, no work): kNotFound
// for an archive the session does not have, kFailedPrecondition while phase 2 has not finished it (the
// message names its state), kDataLoss when the file is missing or unreadable.
Result<CommitDiff> ReadCommitDiff(Sessions& sessions, std::string_view session, int archive);

class MemoryPipeline {
 public:
  // All borrowed; they must outlive the pipeline.
  MemoryPipeline(Sessions& sessions, memory::ContextStore& store, llm::ChatProvider& model,
                 prompt::PromptLibrary& prompts, AuditLog& audit, PipelineOptions options = {});

  // Every model call it makes can be cancelled through `cancel` (then kCancelled; the archive resumes
  // where it stopped on the next run).
  Result<CommitDiff> ProcessArchive(std::string_view session, int archive, const Canceller* cancel = nullptr);

  // Runs queued phase-2 jobs until none is runnable, `max_jobs` ran, or `cancel` is set; returns how many
  // succeeded. A failure is reported to the queue (retryable unless the input itself is bad or the model
  // refused for good, e.g. HTTP 401) and does not stop the run; a job that ends dead marks its archive
  // failed with the reason, so it is not queued again until retried (Engine::Retry). A job whose session
  // is gone (deleted, or created again under its id: another incarnation) is removed unrun.
  Result<int> RunPending(JobQueue& queue, int max_jobs = 1 << 30, const Canceller* cancel = nullptr);
  // The same for the jobs of one key (one session; the queue's other jobs are left to the workers), ending
  // after job `through` has run, or sooner when none of the key can be claimed (one waits out a backoff,
  // or another worker runs it): a caller waiting for its own commit does not run everybody's.
  Result<int> RunPendingOf(JobQueue& queue, std::string_view key, int64_t through, const Canceller* cancel = nullptr);

  // "Remember this now": `text` about `scope` (strata://user/<id> or strata://agent/<id>) goes through the
  // same dedup. With `category` empty the model picks it (template memory.extract); if it finds nothing to
  // remember, that is an error saying so.
  Result<std::vector<MemoryChange>> Remember(std::string_view scope, std::string_view text,
                                             std::string_view category = "", const Canceller* cancel = nullptr);

  // Merges near-duplicates that slipped through, under `under` (a memories directory or a scope), on
  // demand: each current memory is deduplicated against its category's others.
  Result<std::vector<MemoryChange>> Consolidate(std::string_view under, const Canceller* cancel = nullptr);

 private:
  struct Candidate;
  Result<std::string> Summarize(std::string_view session, int archive, const std::string& transcript);
  Result<std::vector<Candidate>> Extract(const std::string& transcript, const std::string& summary,
                                         const SessionInfo& info, std::string* error);
  // Decides `candidate` (asking the model when similar memories exist) and applies the decision.
  // `still_wanted`, when given, is asked after the model answered and before anything is written: an error
  // from it (the session was deleted meanwhile) is returned and nothing is written.
  Result<std::vector<MemoryChange>> Apply(const Candidate& candidate, const std::string& source,
                                          const std::vector<std::string>& links,
                                          const std::function<Status()>& still_wanted = nullptr);
  // Renders `prompt_id`, asks the model, and returns the JSON object in its reply once `check` (if any)
  // accepts it; a reply that does not parse or check is shown its error and asked again, up to
  // parse_attempts. Fails with kUnavailable "<what> failed after N attempts: ..." (last error in
  // `last_error`, and *unusable set: the model answered, unusably), or with the model's error.
  using JsonCheck = std::function<Status(std::string_view json)>;
  Result<std::string> CallForJson(std::string_view prompt_id, const prompt::Value& vars, std::string_view what,
                                  const JsonCheck& check, std::string* last_error, bool* unusable = nullptr);
  // Carries out decided `entries`, first or (`replaying`) again after a crash or a failed later candidate. A
  // merge is written only over the content it was decided on (its `before`, checked under the write lock),
  // and a create run again only where nothing is: a memory merged into, edited or removed since keeps that
  // later state, and the entry's reason says so. What was written once already is not written again. A merge
  // that cannot be written the first time is not applied (MemoryChange::applied), nor are the supersessions
  // decided with it.
  Status Replay(std::vector<MemoryChange>& changes, const std::vector<AuditEntry>& entries,
                const std::vector<std::string>& links, bool replaying);
  Status RefreshDirectory(const memory::Uri& dir);
  int64_t NowMs() const;
  // Holds the memories of `owners` ("user/<id>", "agent/<id>") for the caller's scope.
  Result<std::unique_ptr<OwnerLocks::Held>> LockOwners(std::vector<std::string> owners);
  // One claimed job: its work with the lease renewed; Complete or Fail as it ended.
  Result<bool> RunJob(JobQueue& queue, const Job& job, const Canceller* cancel);

  Sessions& sessions_;
  memory::ContextStore& store_;
  llm::ChatProvider& model_;
  prompt::PromptLibrary& prompts_;
  AuditLog& audit_;
  PipelineOptions options_;
  std::unique_ptr<OwnerLocks> own_locks_;  // When options_.owner_locks is not given.
};

}  // namespace strata::session
