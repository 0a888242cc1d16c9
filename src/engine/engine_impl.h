// Internal to the engine: what an Engine holds (engine.h's Engine::Impl), shared by the files that implement
// its operations (engine.cc, find.cc, session_window.cc, turn.cc). Never installed.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "pg.h"
#include "strata/engine/engine.h"
#include "strata/memory/embedder.h"
#include "strata/memory/pg_store.h"
#include "strata/memory/sqlite_store.h"
#include "strata/session/owner_locks.h"
#include "turn_book.h"

namespace strata {
namespace engine_internal {

// An exclusive, non-blocking flock on a file that records the holder's pid. Held until destroyed.
class WorkerLock {
 public:
  ~WorkerLock() {
    if (fd_ >= 0) {
      (void)::ftruncate(fd_, 0);
      ::close(fd_);  // Releases the lock.
    }
  }
  Status Acquire(const std::string& path) {
    if (fd_ >= 0) return Status::Ok();
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0) return Status::Internal("cannot open " + path + ": " + std::strerror(errno));
    if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      char buf[32] = {0};
      ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
      ::close(fd);
      std::string pid = n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
      while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
      if (err != EWOULDBLOCK) return Status::Internal("cannot lock " + path + ": " + std::strerror(err));
      return Status::Unavailable("phase 2 of this data directory is being run by another process" +
                                 (pid.empty() ? std::string() : " (pid " + pid + ")") + ", which holds " + path +
                                 "; it will process the queue: follow it with `strata session status ID`");
    }
    std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) < 0) {
      // The pid is only informational; the lock is what counts.
    }
    fd_ = fd;
    return Status::Ok();
  }

 private:
  int fd_ = -1;
};

// Runs one kSummaryJobKind job (src/engine/files.cc): the model's L0/L1 for an added file and its chunks.
// `hold_ingest` is held while it looks at the file again and writes (Engine::Impl::HoldIngest).
Status SummarizeResource(memory::ContextStore& store, llm::ChatProvider& model, prompt::PromptLibrary& prompts,
                         const session::Job& job, const Canceller* cancel,
                         const std::function<Result<std::unique_ptr<session::OwnerLocks::Held>>()>& hold_ingest);

}  // namespace engine_internal

struct Engine::Impl {
  EngineOptions options;
  bool postgres = false;  // options.data_dir is a PostgreSQL URL.

  std::mutex open_mu;  // Guards the lazily opened parts below (held only while one opens).
  std::unique_ptr<session::JobQueue> queue;
  std::unique_ptr<session::Sessions> sessions;
  std::unique_ptr<memory::ContextStore> store;
  std::unique_ptr<session::AuditLog> audit;
  std::unique_ptr<prompt::PromptLibrary> prompts;
  std::optional<ConfigFile> config;
  std::unique_ptr<llm::ChatProvider> owned_model;
  llm::ChatProvider* model = nullptr;
  std::unique_ptr<session::OwnerLocks> owner_locks;  // Across processes (flock) or instances (PostgreSQL).
  std::unique_ptr<session::OwnerLocks> turn_locks;   // "turn/<session>", the same way: see HoldSession.
  std::unique_ptr<session::MemoryPipeline> pipeline;

  std::mutex worker_mu;  // One phase-2 run at a time in this process; worker_lock across processes.
  engine_internal::WorkerLock worker_lock;
  engine_internal::TurnBook turns;
  // A session's changes in this process, one at a time (HoldForChange): by session id.
  session::KeyedMutex change_queue;
  std::unique_ptr<KeyStore> keys;  // Sessions served turn by turn (BeginTurn): who is busy, who is idle.

  std::string Path(const char* name) const { return options.data_dir + "/" + name; }

  Result<session::JobQueue*> Queue() {
    std::lock_guard lock(open_mu);
    return QueueLocked();
  }
  Result<session::JobQueue*> QueueLocked() {
    if (!queue) {
      if (postgres) {
        STRATA_ASSIGN_OR_RETURN(queue, session::OpenPgJobQueue(options.data_dir, options.queue));
      } else {
        session::JobQueueOptions o = options.queue;
        o.read_only = o.read_only || options.read_only;
        STRATA_ASSIGN_OR_RETURN(queue, session::OpenJobQueue(Path("queue.db"), o));
      }
    }
    return queue.get();
  }
  Result<session::Sessions*> Sessions() {
    std::lock_guard lock(open_mu);
    return SessionsLocked();
  }
  Result<session::Sessions*> SessionsLocked() {
    if (!sessions) {
      STRATA_ASSIGN_OR_RETURN(session::JobQueue * q, QueueLocked());
      session::SessionsOptions o{.queue = q, .lock_wait = options.busy_timeout, .read_only = options.read_only};
      if (postgres) {
        STRATA_ASSIGN_OR_RETURN(sessions, session::OpenPgSessions(options.data_dir, o));
      } else {
        STRATA_ASSIGN_OR_RETURN(sessions, session::OpenSessions(options.data_dir, o));
      }
    }
    return sessions.get();
  }
  Result<memory::ContextStore*> Store() {
    std::lock_guard lock(open_mu);
    return StoreLocked();
  }
  Result<memory::ContextStore*> StoreLocked() {
    if (!store) {
      std::shared_ptr<memory::Embedder> embedder = options.embedder_instance;
      // None chosen: the store keeps its own model (EngineOptions::embedder).
      const bool keep = !embedder && options.embedder.empty();
      if (!embedder) {
        STRATA_ASSIGN_OR_RETURN(std::unique_ptr<memory::Embedder> e,
                                memory::EmbedderFromSpec(keep ? "local" : options.embedder));
        embedder = std::move(e);
      }
      if (postgres) {
        STRATA_ASSIGN_OR_RETURN(store, memory::OpenPgStore(options.data_dir, {.embedder = std::move(embedder),
                                                                              .keep_stored_model = keep}));
      } else {
        memory::SqliteStoreOptions o{.embedder = std::move(embedder), .keep_stored_model = keep,
                                     .busy_timeout = options.busy_timeout, .read_only = options.read_only};
        STRATA_ASSIGN_OR_RETURN(store, memory::OpenSqliteStore(options.data_dir, std::move(o)));
      }
    }
    return store.get();
  }
  // A session made under a given id (new or forked) starts with its own scope empty: what an earlier
  // session of that id left in strata://session/<id> (a delete interrupted after the session was gone, a
  // phase 2 that wrote as it was deleted) is not its own, and its new owner could have read it.
  Status ClearSessionScope(const std::string& id) {
    STRATA_ASSIGN_OR_RETURN(memory::Uri scope, memory::Uri::Parse("strata://session/" + id));
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * s, Store());
    Result<int64_t> removed = s->Remove(scope, /*recursive=*/true);
    if (!removed.ok() && removed.status().code() != StatusCode::kNotFound) return removed.status();
    return Status::Ok();
  }
  Result<session::AuditLog*> Audit() {
    std::lock_guard lock(open_mu);
    return AuditLocked();
  }
  Result<session::AuditLog*> AuditLocked() {
    if (!audit) {
      if (postgres) {
        STRATA_ASSIGN_OR_RETURN(audit, session::OpenPgAuditLog(options.data_dir));
      } else {
        STRATA_ASSIGN_OR_RETURN(audit, session::OpenAuditLog(Path("audit.db"), options.read_only));
      }
    }
    return audit.get();
  }
  std::vector<std::string> PromptDirs() const {
    std::vector<std::string> dirs = options.prompt_dirs;
    if (!options.ignore_prompt_env) {
      if (const char* extra = std::getenv("STRATA_PROMPTS"); extra != nullptr && *extra != '\0') dirs.push_back(extra);
    }
    std::string shipped = options.shipped_prompts_dir.empty() ? ShippedPromptsDir() : options.shipped_prompts_dir;
    if (!shipped.empty()) dirs.push_back(shipped);
    return dirs;
  }
  prompt::PromptLibrary* PromptsLocked() {
    if (!prompts) prompts = std::make_unique<prompt::PromptLibrary>(PromptDirs());
    return prompts.get();
  }
  Result<const ConfigFile*> ConfigLocked() {
    if (!config) {
      STRATA_ASSIGN_OR_RETURN(config, LoadConfigFile(options.provider.config_file));
    }
    return &*config;
  }
  Result<llm::ChatProvider*> ModelLocked() {
    if (model != nullptr) return model;
    if (options.model != nullptr) return model = options.model;
    STRATA_ASSIGN_OR_RETURN(const ConfigFile* c, ConfigLocked());
    STRATA_ASSIGN_OR_RETURN(owned_model, MakeProvider(options.provider, *c, options.on_model_retry));
    return model = owned_model.get();
  }
  // The locks by which one writer at a time decides an owner's memories (EngineOptions::pipeline's, or the
  // engine's own): phase 2, remember (with a model or without) and consolidation. open_mu held.
  Result<session::OwnerLocks*> MemoryLocksLocked() {
    if (options.pipeline.owner_locks != nullptr) return options.pipeline.owner_locks;
    if (!owner_locks) {
      STRATA_ASSIGN_OR_RETURN(owner_locks, OpenOwnerLocks());
    }
    return owner_locks.get();
  }
  Result<session::OwnerLocks*> MemoryLocks() {
    std::lock_guard lock(open_mu);
    return MemoryLocksLocked();
  }
  Result<session::MemoryPipeline*> Pipeline() {
    std::lock_guard lock(open_mu);
    if (!pipeline) {
      STRATA_ASSIGN_OR_RETURN(session::Sessions * s, SessionsLocked());
      STRATA_ASSIGN_OR_RETURN(memory::ContextStore * st, StoreLocked());
      STRATA_ASSIGN_OR_RETURN(session::AuditLog * a, AuditLocked());
      STRATA_ASSIGN_OR_RETURN(llm::ChatProvider * m, ModelLocked());
      // Memories of one owner are decided by one writer at a time across every process on the data
      // directory, or every instance on the database.
      session::PipelineOptions pipeline_options = options.pipeline;
      STRATA_ASSIGN_OR_RETURN(pipeline_options.owner_locks, MemoryLocksLocked());
      prompt::PromptLibrary* library = PromptsLocked();
      pipeline_options.job_handlers.emplace(
          std::string(ingest::kSummaryJobKind), [this, st, m, library](const session::Job& job, const Canceller* cancel) {
            return engine_internal::SummarizeResource(*st, *m, *library, job, cancel,
                                                      [this, cancel] { return HoldIngest(cancel, kSummaryIngestWait); });
          });
      pipeline = std::make_unique<session::MemoryPipeline>(*s, *st, *m, *PromptsLocked(), *a, pipeline_options);
    }
    return pipeline.get();
  }

  // A summary the model has given waits this long for an add to end before it is written (or its job, with
  // the model's answer lost, is retried): a shutdown ends the wait sooner, and the job's lease is renewed.
  static constexpr std::chrono::hours kSummaryIngestWait{1};

  // Locks by name across every process on the data directory (a flock under <data>/locks) or every
  // instance on the database (advisory locks).
  Result<std::unique_ptr<session::OwnerLocks>> OpenOwnerLocks() {
    if (postgres) return session::OpenPgOwnerLocks(options.data_dir);
    return session::OpenFileOwnerLocks(Path("locks"));
  }
  // The named locks of turns ("turn/<session>") and adds ("ingest"), opened when first needed. open_mu held.
  Result<session::OwnerLocks*> NamedLocksLocked() {
    if (!turn_locks) {
      STRATA_ASSIGN_OR_RETURN(turn_locks, OpenOwnerLocks());
    }
    return turn_locks.get();
  }
  // One add of documents at a time, in every process on the data directory or instance on the database,
  // and no summary written in the middle of one: an add replaces a file in several steps (its old chunks
  // removed, the new ones written, its hash recorded last), and two adds of one file at once (a server's
  // and the CLI's) left chunks of the older version that the recorded hash then kept for good. Waits up
  // to `wait` (EngineOptions::ingest_wait unless given) for another add (which may embed a whole tree), then
  // is kUnavailable.
  Result<std::unique_ptr<session::OwnerLocks::Held>> HoldIngest(const Canceller* cancel = nullptr,
                                                                std::optional<std::chrono::milliseconds> wait = {}) {
    return HoldNamed(
        "ingest", wait.value_or(options.ingest_wait), [] { return false; },
        [] {
          return Status::Unavailable("another add of documents (here or in another process) is in progress; "
                                     "try again when it has ended");
        },
        cancel);
  }

  // Holds session `ref`'s turn lock: one turn (BeginTurn to its end) or one commit of a session at a time,
  // in this process and in every other on the data directory or database (a flock, or an advisory lock
  // released if the instance dies). Waits up to `wait` for another holder — a change (HoldForChange) holds
  // it for a moment only — then is kFailedPrecondition saying `busy`: two instances let turns interleave
  // (U1 U2 A1 A2), and a commit in the middle of a turn archived its request and left the reply alone in
  // the live log. Turns and commits wait half a second (a concurrent append is not "a turn in progress", and
  // an idle commit is not lost to one); a turn of this process in progress is refused at once.
  Result<std::unique_ptr<session::OwnerLocks::Held>> HoldSession(
      std::string_view ref, const std::string& busy, std::chrono::milliseconds wait = std::chrono::milliseconds(500)) {
    Result<session::ParsedSessionRef> parsed = session::ParseSessionRef(ref);
    const std::string id = parsed.ok() ? parsed->id : std::string(ref);
    // A turn of this process holds it (for as long as its model takes): no use waiting. Another process's
    // turn is waited for as a change would be, then refused.
    return HoldNamed("turn/" + id, wait, [&] { return turns.Busy(id); }, [&] { return Status::FailedPrecondition(busy); });
  }

  // Holds the named lock `name` (NamedLocksLocked), polling for up to `wait` while another holds it, or
  // until `give_up` says to; then the status `refused` makes. A `cancel` that fires ends the wait too.
  Result<std::unique_ptr<session::OwnerLocks::Held>> HoldNamed(const std::string& name, std::chrono::milliseconds wait,
                                                               const std::function<bool()>& give_up,
                                                               const std::function<Status()>& refused,
                                                               const Canceller* cancel = nullptr) {
    session::OwnerLocks* locks = nullptr;
    {
      std::lock_guard lock(open_mu);
      STRATA_ASSIGN_OR_RETURN(locks, NamedLocksLocked());
    }
    const auto deadline = std::chrono::steady_clock::now() + wait;
    for (auto pause = std::chrono::milliseconds(1);; pause = std::min(pause * 2, std::chrono::milliseconds(20))) {
      Canceller no_wait;  // Cancelled already: the lock is taken if free, refused if held.
      no_wait.Cancel();
      Result<std::unique_ptr<session::OwnerLocks::Held>> held = locks->Lock({name}, &no_wait);
      if (held.ok() || held.status().code() != StatusCode::kCancelled) return held;
      if (give_up() || std::chrono::steady_clock::now() >= deadline) return refused();
      if (cancel != nullptr && cancel->cancelled()) return Status::Cancelled("cancelled while waiting for " + name);
      std::this_thread::sleep_for(pause);
    }
  }

  // Holds session `ref` for one change made outside a turn — an append, a revert, a checkpoint, the system
  // prompt, usage, a compaction's replacement, an import — so that none lands in the middle of a turn (an
  // append between a turn's request and its reply, a revert that left the reply alone) or of a commit's
  // phase 1. Other changes hold it for a moment each: they are waited for, up to ten seconds in all (many
  // writers of one session queue); a turn or commit still holding it then is kFailedPrecondition, naming
  // `what`. A turn's own writes do not come here.
  Result<std::unique_ptr<session::OwnerLocks::Held>> HoldForChange(std::string_view ref, std::string_view what) {
    const std::string id = session::SessionIdOfRef(ref);
    const std::string busy =
        "session " + id + " has a turn or a commit in progress; " + std::string(what) + " when it has ended";
    if (turns.Busy(id)) return Status::FailedPrecondition(busy);
    // The changes of this process queue by session (polling the lock, 32 writers of one session made an
    // unlucky one wait many rounds); the lock is then mostly free, or another process's.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    if (Status queued = change_queue.Lock(id, deadline); !queued.ok()) return Status::FailedPrecondition(busy);
    auto held = std::make_unique<ChangeHeld>();
    held->queue = &change_queue;
    held->id = id;
    STRATA_ASSIGN_OR_RETURN(held->inner, HoldSession(ref, busy, std::chrono::duration_cast<std::chrono::milliseconds>(
                                                                    deadline - std::chrono::steady_clock::now())));
    return std::unique_ptr<session::OwnerLocks::Held>(std::move(held));
  }
  // What HoldForChange holds: the session's turn lock, then (released after it) its place in the queue.
  struct ChangeHeld final : session::OwnerLocks::Held {
    session::KeyedMutex* queue = nullptr;
    std::string id;
    std::unique_ptr<session::OwnerLocks::Held> inner;
    ~ChangeHeld() override {
      inner.reset();
      queue->Unlock(id);
    }
  };


  // Takes this process's worker lock and the data directory's; jobs left running are then abandoned ones
  // (their worker died: it no longer holds the lock), so they go back to pending at once. On PostgreSQL
  // every instance works the queue at once: claims skip each other's jobs, and a dead instance's jobs
  // become claimable when their lease expires.
  Result<std::unique_lock<std::mutex>> BecomeWorker() {
    std::unique_lock lock(worker_mu);
    if (postgres) return lock;
    STRATA_RETURN_IF_ERROR(worker_lock.Acquire(Path("worker.lock")));
    STRATA_ASSIGN_OR_RETURN(session::JobQueue * q, Queue());
    STRATA_RETURN_IF_ERROR(q->ReleaseRunning());
    return lock;
  }
};

}  // namespace strata
