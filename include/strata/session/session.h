// Sessions: conversations owned by a user and an agent, kept on disk, committed into long-term memory.
//
// Layout under `<data>/sessions/<id>/` (docs/formats/session.md):
//   session.json                 id, owners, times, stats, live L0/L1 summary (replaced atomically)
//   messages.jsonl               the current messages: a context log (kimi-cli's context.jsonl format, so
//                                crash-safe appends, usage marks, checkpoints and a system prompt record)
//   messages_N.jsonl             earlier versions of it, kept by reverts and compactions (rotations)
//   history/archive_NNN/         one per commit, numbered from 001, never overwritten:
//     messages.jsonl             the archived messages (moved here by one rename)
//     state.json                 {"state": "archived" | ... | "done" | "failed", "error"?, "notes"?: [...]}
//
// Commit() is phase 1 of the two-phase commit: it moves the current messages into the next archive at once
// (a rename, so a crash leaves them either current or archived, never both or neither), records the archive
// and enqueues phase 2 on the durable job queue (kind "session.commit", key = session id, so the archives
// of one session are processed in order). Open() recovers what a crash interrupted: an archive without
// state.json gets one, and every archive not done has its phase-2 job (enqueueing is idempotent).
//
// Messages carry parts: text, tool calls and results, and context references — a registered content part
// {"type": "context_ref", "uri": "strata://...", "kind": "memory" | "resource" | "skill"} naming a context the
// turn used; they feed the session's stats and, in phase 2, the relations of what it produced.
//
// Thread safety: safe from several threads. Operations on one session are serialised (a lock per session);
// operations on different sessions run in parallel. Processes sharing a data directory take turns through
// session.lock; a process keeps a session's log cached between operations (releasing the log file's own
// lock) and reads it again when session.json shows another process changed it.
//
// OpenPgSessions keeps the same sessions in PostgreSQL instead (docs/formats/postgres.md, "Sessions"): the
// log is an append-only table of records per session and log version, and every operation is one
// transaction that first locks the session's row, so Strata instances sharing the database take turns.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "strata/message/message.h"
#include "strata/session/job_queue.h"
#include "strata/util/clock.h"
#include "strata/util/file_system.h"
#include "strata/util/status.h"

namespace strata::session {

inline constexpr std::string_view kContextRefPartType = "context_ref";
inline constexpr std::string_view kCommitJobKind = "session.commit";

// Registers the context_ref part type (idempotent; called by OpenSessions).
Status RegisterContextRefPart();
// A context_ref part for `uri` (validated) of `kind` ("memory", "resource" or "skill").
Result<ContentPart> ContextRef(std::string_view uri, std::string_view kind);

struct SessionStats {
  int64_t messages = 0;
  int64_t turns = 0;          // User messages.
  int64_t tokens = 0;         // Estimated (characters / 4) unless usage was reported.
  int64_t contexts_used = 0;  // Distinct context URIs referenced.
  int64_t skills_used = 0;    // Of those, skills.
  int64_t memories_extracted = 0;
  int64_t commits = 0;
  int64_t revisions = 0;      // Changes to the current log other than appended messages (checkpoints,
                              // usage marks, system prompts, reverts, compactions).
  bool operator==(const SessionStats&) const = default;
};

struct SessionInfo {
  std::string id;
  // Made at random when the session is created: a session deleted and created again under the same id is
  // another incarnation, and inherits nothing of the first (its jobs and audit entries name the
  // incarnation they belong to: SessionRef). "" for sessions created before incarnations were kept.
  std::string incarnation;
  std::string user;   // Owner user id ("" if none).
  std::string agent;  // Owner agent id ("" if none).
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  SessionStats stats;
  std::vector<std::string> contexts;  // Distinct context URIs referenced, in first-use order.
  std::string abstract_text;          // L0: one line about the live conversation.
  std::string overview;               // L1: a paragraph.
  // Where an imported conversation came from (SetOrigin): its title in the tool it came from and that
  // export's id for it (chat_export.h, e.g. "chatgpt-<id>"); both "" for a session begun here.
  std::string title;
  std::string source;
};

// What SetOrigin records of an imported conversation.
struct SessionOrigin {
  std::string title;
  std::string source;
  int64_t created_ms = 0;  // > 0: replaces the session's times (those of the import) with the original's.
  int64_t updated_ms = 0;
};

enum class ArchiveState { kArchived, kSummarized, kExtracted, kDone, kFailed };
std::string_view ArchiveStateName(ArchiveState state);

struct ArchiveInfo {
  int number = 0;
  std::string dir;  // The archive's directory (OpenSessions); empty on PostgreSQL, where it is rows.
  ArchiveState state = ArchiveState::kArchived;
  int64_t messages = 0;
  std::string error;  // Why phase 2 failed (kFailed), for `strata session status`.
  std::vector<std::string> notes;  // What happened on the way, e.g. a model reply that had to be asked again.
};

struct CommitTicket {
  int archive = 0;       // The archive number phase 1 created.
  int64_t job_id = 0;    // The phase-2 job.
  int64_t messages = 0;  // How many messages were archived.
};

// A checkpoint in the current messages: `messages` of them come before it. Ids follow kimi-cli's log
// (numbered from 0 within the current messages), so one id names different checkpoints over a session's
// life: a commit or a compaction starts again at 0, and a revert frees the ids it drops. `tag` is a digest
// of the session's incarnation, its commits, the id and the messages before it: a revert given the tag
// restores exactly the messages its holder saw before that checkpoint, or refuses.
struct CheckpointInfo {
  int64_t id = 0;
  int64_t messages = 0;
  std::string tag;
};

// Which checkpoint to revert or fork at: `id`, and when `tag` is given, only while that id still names the
// checkpoint with that tag (kFailedPrecondition otherwise), so that a client holding an id from before a
// commit, revert or compaction cannot cut the log at another point.
struct CheckpointRef {
  int64_t id = 0;
  std::string tag;  // Empty: whichever checkpoint has the id now.
};

// A provider-reported context size (a usage mark) recorded after `messages` messages.
struct UsageMarkInfo {
  int64_t messages = 0;
  int64_t tokens = 0;
  int64_t checkpoints = 0;  // Checkpoints before it (orders a mark and a checkpoint at one position).
};

// The current messages as their log holds them.
struct SessionLog {
  std::optional<std::string> system_prompt;
  std::vector<Message> messages;
  std::vector<CheckpointInfo> checkpoints;  // In order.
  int64_t usage_tokens = 0;                 // The last provider-reported context size (0: none).
  std::vector<UsageMarkInfo> usage_marks;   // Every live usage mark, in order.
  std::vector<std::string> rotations;       // Earlier versions of the log kept by reverts and compactions.
  // Lines of the log that could not be read and were skipped, "FILE line L (byte O): reason" (FILE relative
  // to the data directory); empty when none (always on PostgreSQL, where a damaged row is kDataLoss).
  std::vector<std::string> damage;
};

struct SessionsOptions {
  FileSystem* fs = nullptr;   // Default: PosixFileSystem(). Borrowed.
  Clock* clock = nullptr;     // Default: SystemClock(). Borrowed.
  JobQueue* queue = nullptr;  // Where phase 2 is enqueued. Borrowed; required.
  // How long an operation waits for another process that holds the session (session.lock) before failing
  // with kUnavailable.
  std::chrono::milliseconds lock_wait{10'000};
  // Only read (--read-only; the file backend): nothing is created or recovered on open, logs are read
  // without their writer lock, and every change fails.
  bool read_only = false;
  // PostgreSQL only: the most connections kept open (operations on different sessions run in parallel
  // on them); an operation that finds them all busy waits for one.
  int pg_connections = 4;
};

class Sessions {
 public:
  virtual ~Sessions() = default;
  // Creates a session; `id` is generated (time + random) when empty, and so is its incarnation when none
  // is given (a copy made by strata migrate passes the original's, "" for a session made before
  // incarnations were kept). Errors: bad id, already exists.
  virtual Result<SessionInfo> Create(std::string_view user, std::string_view agent, std::string_view id = "",
                                     std::optional<std::string_view> incarnation = std::nullopt) = 0;
  virtual Result<SessionInfo> Get(std::string_view id) = 0;
  virtual Result<std::vector<SessionInfo>> List() = 0;
  // Appends one message (validated), updating stats and the live summary.
  virtual Status Add(std::string_view id, const Message& message) = 0;
  // Appends messages in one write and one sync: all of them or none.
  virtual Status Add(std::string_view id, std::span<const Message> messages) = 0;
  // Records the provider-reported size of the whole context (a usage mark in the log).
  virtual Status RecordUsage(std::string_view id, int64_t tokens) = 0;
  // Makes `prompt` the session's system prompt (the log's first record).
  virtual Status SetSystemPrompt(std::string_view id, std::string_view prompt) = 0;
  // Marks the current end of the messages as a checkpoint to revert to; returns it (checkpoints are
  // numbered from 0 within the current messages and end at a commit, which archives them).
  virtual Result<CheckpointInfo> Checkpoint(std::string_view id) = 0;
  // The current messages with their checkpoints, usage mark, system prompt and rotations; the checkpoints'
  // tags only with `tags` (they cost a pass over the messages as JSON).
  virtual Result<SessionLog> Log(std::string_view id, bool tags) = 0;
  Result<SessionLog> Log(std::string_view id) { return Log(id, /*tags=*/true); }
  // Drops checkpoint `checkpoint` and every message after it. The previous log is kept as a rotation
  // (`messages_N.jsonl`). Errors: unknown checkpoint (kNotFound); a tag the checkpoint no longer has
  // (kFailedPrecondition).
  virtual Result<SessionInfo> Revert(std::string_view id, const CheckpointRef& checkpoint) = 0;
  // Replaces the current messages (a compaction): checkpoint 0, `messages`, and a usage mark of
  // `token_count` when given, in one atomic step; the previous log is kept as a rotation. With `expected`,
  // only if the current messages are still exactly those (kFailedPrecondition otherwise: something was
  // appended or reverted while the caller computed the replacement).
  virtual Result<SessionInfo> Replace(std::string_view id, std::span<const Message> messages,
                                      std::optional<int64_t> token_count,
                                      const std::vector<Message>* expected = nullptr) = 0;
  // A new session `new_id` (generated when empty) with the same owners, system prompt and current messages
  // (those before `checkpoint` when given, checked as Revert checks it). The source is unchanged.
  virtual Result<SessionInfo> Fork(std::string_view id, std::string_view new_id,
                                   const std::optional<CheckpointRef>& checkpoint) = 0;
  // The current (not yet committed) messages.
  virtual Result<std::vector<Message>> Messages(std::string_view id) = 0;
  // Deletes the session: its messages, archives, state and phase-2 jobs (memories already extracted stay;
  // their audit entries stay too, naming an incarnation no session has any more). Refused with
  // kFailedPrecondition while phase 2 of an archive is pending, unless `force` (a running job's worker then
  // can no longer complete it, and stops).
  virtual Status Delete(std::string_view id, bool force) = 0;
  // Phase 1 (see above). Errors: unknown session; nothing to commit (kFailedPrecondition).
  virtual Result<CommitTicket> Commit(std::string_view id) = 0;
  virtual Result<std::vector<ArchiveInfo>> Archives(std::string_view id) = 0;
  // The messages of one archive.
  virtual Result<std::vector<Message>> ArchiveMessages(std::string_view id, int archive) = 0;
  // Adds `count` to the session's memories_extracted (phase 2, once per archive).
  virtual Status RecordExtracted(std::string_view id, int64_t count) = 0;
  // Records where an imported session came from: its title and source, and its original times when given
  // (a later change moves updated_ms on as usual). Its log and archives are untouched.
  virtual Status SetOrigin(std::string_view id, const SessionOrigin& origin) = 0;
  // Adds a note to the archive's state (kept across state changes): phase 2 records model retries here.
  virtual Status AddArchiveNote(std::string_view id, int archive, std::string_view note) = 0;
  // Queues phase 2 of an archive that is not done (again): for retrying a failed archive.
  virtual Result<int64_t> EnqueueArchive(std::string_view id, int archive) = 0;
  // Adds archive `number` (the next one; kInvalidArgument otherwise) holding `messages` with its state, error
  // and notes, as a copy of another deployment's archive (strata migrate): counted as a commit. Phase 2 is not
  // queued: the copier queues an unfinished one (EnqueueArchive) once its files (WriteArchiveFile) and the
  // audit log are in place, since a worker already serving the destination would run it without them (an
  // archive past its summary failed for want of summary.md; one before it was extracted a second time).
  virtual Status ImportArchive(std::string_view id, int number, std::span<const Message> messages, ArchiveState state,
                               std::string_view error, const std::vector<std::string>& notes) = 0;
  // Phase 2's resumable work for an archive, by name ("summary.md", "candidates.json", "diff.json"): kept
  // beside the archive (files in its directory; rows on PostgreSQL). Read gives nullopt when not written.
  virtual Result<std::optional<std::string>> ReadArchiveFile(std::string_view id, int archive, std::string_view name) = 0;
  virtual Status WriteArchiveFile(std::string_view id, int archive, std::string_view name, std::string_view content) = 0;
  // Records phase 2's progress in the archive's state.json (used by the commit worker).
  virtual Status SetArchiveState(std::string_view id, int archive, ArchiveState state, std::string_view error) = 0;
};

// Opens the sessions under `<data_dir>/sessions`, recovering interrupted commits (see above).
Result<std::unique_ptr<Sessions>> OpenSessions(const std::string& data_dir, SessionsOptions options);

// Opens the sessions kept in the PostgreSQL database at `url` (tables sessions, session_records,
// session_archives ...; docs/formats/postgres.md), creating or migrating the tables, and recovering
// interrupted commits: every archive whose phase 2 is not done or failed has its job enqueued.
// `options.fs` is unused; `lock_wait` bounds the wait for another instance's lock on a session row.
// Errors: kInvalidArgument for a malformed URL or a missing queue, kUnavailable when the server cannot be
// reached, kFailedPrecondition for tables newer than this program.
Result<std::unique_ptr<Sessions>> OpenPgSessions(const std::string& url, SessionsOptions options);

// ---- Session references ----
// A reference names one incarnation of a session: "<id>@<incarnation>", or "<id>" for a session without an
// incarnation. Phase-2 jobs are keyed by it and audit entries name it as their source, so nothing a deleted
// session left behind belongs to a new session with the same id. Every Sessions method that takes an
// `id` accepts a reference too: the call then applies only to that incarnation, and any other (a newer
// session of the same id) is kNotFound, exactly as a session that does not exist.
std::string SessionRef(const SessionInfo& info);
struct ParsedSessionRef {
  std::string id;
  std::string incarnation;  // "" when the reference has none.
  bool exact = false;       // It named an incarnation ("<id>@<incarnation>").
};
// Splits and validates a reference (or a plain id). kInvalidArgument naming what is wrong.
Result<ParsedSessionRef> ParseSessionRef(std::string_view ref);
// True if the stored reference `ref` names `info`'s incarnation: the same id and the same incarnation
// ("<id>" alone names only a session without one).
bool RefersTo(std::string_view ref, const SessionInfo& info);
// The id of the session a stored reference names ("" if it is malformed).
std::string SessionIdOfRef(std::string_view ref);
// The one answer for a session that does not exist, another user's session and another incarnation of one:
// kNotFound "no session <id>", the same bytes whatever the reason, naming no path.
Status NoSuchSession(std::string_view id);
// The key of `info`'s phase-2 jobs in the queue (its reference).
inline std::string CommitJobKey(const SessionInfo& info) { return SessionRef(info); }

// "archive_NNN": the directory (and context) name of archive `number`.
std::string ArchiveName(int number);

// Names of archive files: 1-64 of [a-z0-9_.-], not starting with '.'.
Status ValidateArchiveFileName(std::string_view name);

// Session ids: 1-128 of [A-Za-z0-9_.-], not starting with '.' (the URI scope-id rules).
Status ValidateSessionId(std::string_view id);

}  // namespace strata::session
