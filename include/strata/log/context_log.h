// ContextLog: a durable, append-only conversation log, on-disk compatible with kimi-cli's `context.jsonl`.
//
// The file is a sequence of JSON lines: messages (kosong JSON), `{"role": "_usage", "token_count": N}`
// marks of the provider-reported context size, `{"role": "_checkpoint", "id": N}` revert points and
// `{"role": "_system_prompt", "content": "..."}` (docs/formats/context-log.md). kimi-cli can restore files
// written here and vice versa.
//
// Beyond kimi-cli:
//   - Restore never aborts on one bad line: it skips it and reports file, line and byte offset
//     (restore_report()). A torn tail is detected, and before the next append it is cut off and its bytes
//     kept in `<file>.torn-N`.
//   - Writes follow a durability policy (log_writer.h; default kAlways) and a failed fsync poisons the log.
//   - One writer per file: the first mutation (or Restore) takes the file's lock; a second ContextLog or
//     process gets kUnavailable instead of interleaving lines.
//   - RevertTo and Clear keep the old file as `<stem>_N<ext>` via a hard link (no copy, no moment without a
//     live file) and rebuild state from offsets recorded at restore time, without re-parsing what they keep.
//   - Mutations on an existing, non-empty file require Restore() first (kFailedPrecondition), so checkpoint
//     ids and token counts never restart from zero over old data. WriteSystemPrompt is the exception, as
//     in kimi-cli (it migrates legacy files before they are restored).
//
// Thread safety: not thread-safe; one ContextLog per file, used from one thread at a time.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "strata/log/log_reader.h"
#include "strata/log/log_writer.h"
#include "strata/message/message.h"
#include "strata/message/token_estimator.h"
#include "strata/util/clock.h"
#include "strata/util/file_system.h"
#include "strata/util/status.h"

namespace strata {

struct ContextLogOptions {
  FileSystem* fs = nullptr;  // Default: PosixFileSystem(). Borrowed; must outlive the log.
  Clock* clock = nullptr;    // Default: SystemClock(). Borrowed.
  // Estimates messages after the last usage mark. Default: DefaultTokenEstimator() (kimi-cli's chars/4).
  const MessageTokenCounter* estimator = nullptr;  // Borrowed.
  DurabilityOptions durability;
  // Never take the lock or write; mutations fail with kFailedPrecondition. For inspection (`show`).
  bool read_only = false;
};

// What Restore() found.
struct RestoreReport {
  ScanSummary scan;
  uint64_t unknown_records = 0;  // Internal records of a newer format, kept in the file but not interpreted.
};

// What ReplayContext() found: the state Restore() would rebuild, without the history itself.
struct ContextReplay {
  uint64_t messages = 0;                 // Messages passed to the callback.
  int64_t token_count = 0;               // The last usage mark (0 if none).
  int64_t token_count_with_pending = 0;  // Plus the estimate of the messages after it.
  int64_t n_checkpoints = 0;
  std::optional<std::string> system_prompt;
  RestoreReport report;
};

// Reads the context file at `path` once, in file order, and passes each message of the history to
// `on_message` without keeping it: for readers that only pass the history on, such as `strata context
// show`. The messages after the last usage mark are counted as they pass (`estimator`, default
// DefaultTokenEstimator(); its tally keeps numbers, not messages, for every counter Strata ships), so
// memory stays bounded whatever the file's size. The same rules as Restore() (damaged lines skipped and
// reported); a missing file is an empty context. Takes no lock and writes nothing. An error from
// `on_message` stops the replay and is returned.
Result<ContextReplay> ReplayContext(FileSystem* fs, const std::string& path,
                                    const std::function<Status(const Message&)>& on_message,
                                    const MessageTokenCounter* estimator = nullptr);

class ContextLog {
 public:
  // Prepares a log for `path`. Touches nothing on disk.
  static std::unique_ptr<ContextLog> Open(std::string path, ContextLogOptions options = {});
  ~ContextLog();
  ContextLog(const ContextLog&) = delete;  // Owns the file's writer lock.
  ContextLog& operator=(const ContextLog&) = delete;

  // Replays the file into memory. Returns false if the file is missing or empty. Fails with
  // kFailedPrecondition if the log was already restored or modified, kUnavailable if another writer holds
  // the file. Damaged lines are skipped and listed in restore_report().
  Result<bool> Restore();

  // Appends one message, or a batch written with one write and one sync.
  Status Append(const Message& message);
  Status Append(std::span<const Message> messages);
  // As above, moving the messages into the history instead of copying them.
  Status Append(Message&& message);
  Status Append(std::vector<Message>&& messages);
  // Records the provider-reported token count of the whole context (a `_usage` record). A count past 2^53 - 1
  // (what the log's readers keep) is kInvalidArgument.
  Status UpdateTokenCount(int64_t token_count);
  // Appends `messages` with a usage mark of `token_count` after the first `counted` of them, in one write and
  // one sync: a step's reply, the provider's count of the context up to and including it, then the tool
  // results no provider has counted yet (they stay pending, as kimi-cli writes them).
  Status AppendWithTokenCount(std::span<const Message> messages, size_t counted, int64_t token_count);
  // Writes a `_checkpoint` record and, if `add_user_message`, the user message
  // `<system>CHECKPOINT n</system>`. Returns the new checkpoint's id.
  Result<int64_t> Checkpoint(bool add_user_message);
  // Drops checkpoint `id` and everything after it. The old file is kept as `<stem>_N<ext>` (N = highest
  // existing + 1). An unknown id is kNotFound and touches nothing.
  Status RevertTo(int64_t id);
  // Empties the context; the old file is kept as `<stem>_N<ext>`.
  Status Clear();
  // Replaces the whole content in one atomic step: the system prompt (none if nullopt), checkpoint 0 when
  // `checkpoint`, `messages`, and a usage mark when `token_count` is set. These are the records kimi-cli
  // writes after a clear when it compacts, but never half-written: the new content is built beside the
  // live file and renamed over it, and the old file is kept as a rotation `<stem>_N<ext>` whose path is
  // returned.
  Result<std::string> Rewrite(const std::optional<std::string>& system_prompt, std::span<const Message> messages,
                              std::optional<int64_t> token_count, bool checkpoint = true);
  // Makes `prompt` the first line's `_system_prompt` record (replacing one already there), via temp file
  // and atomic rename.
  Status WriteSystemPrompt(std::string_view prompt);
  // Makes everything written durable now (useful with kNone / kBatch).
  Status Sync();
  // Syncs and releases the file lock. Later mutations reacquire it, and fail with kFailedPrecondition if
  // another writer changed the file in between (restore it in a new ContextLog then).
  Status Close();

  const std::vector<Message>& history() const { return history_; }
  // Returns the last recorded `_usage` value (0 if none).
  int64_t token_count() const { return token_count_; }
  // Returns token_count() plus the estimate for messages appended after the last usage mark.
  int64_t token_count_with_pending() const;
  int64_t n_checkpoints() const { return next_checkpoint_id_; }
  // The live checkpoints in file order, each with how many messages of history() come before it.
  struct CheckpointPosition {
    int64_t id;
    size_t messages;
  };
  std::vector<CheckpointPosition> checkpoints() const;
  // The live usage marks (`_usage` records) in file order, each with how many messages and how many live
  // checkpoints come before it (a mark and a checkpoint after the same message are ordered by the latter).
  struct UsagePosition {
    size_t messages;
    int64_t tokens;
    size_t checkpoints;
  };
  std::vector<UsagePosition> usage_marks() const;
  const std::optional<std::string>& system_prompt() const { return system_prompt_; }
  const RestoreReport& restore_report() const { return report_; }
  const std::string& path() const { return path_; }

 private:
  struct CheckpointMark {
    int64_t id;
    uint64_t offset;          // Byte offset of the `_checkpoint` line.
    size_t history_size;      // Messages before it.
    int64_t token_count;      // token_count_ just before it.
    size_t pending_begin;     // pending_begin_ just before it.
    int64_t next_id_before;   // next_checkpoint_id_ just before it.
  };
  struct PromptMark {
    uint64_t offset;
    std::string prompt;
  };
  struct UsageMark {
    uint64_t offset;  // Byte offset of the `_usage` line.
    size_t history_size;
    int64_t tokens;
    size_t checkpoints_before;  // Live checkpoints before it in the file.
  };

  ContextLog(std::string path, ContextLogOptions options);
  // Validates, serialises and writes `messages` (one write); the caller then adds them to history_.
  Status WriteMessages(std::span<const Message> messages);
  // Opens the writer (taking the file lock) if it is not open.
  Status EnsureLocked();
  // EnsureLocked, refuses unrestored existing content, and repairs the tail (cuts a torn tail into
  // `<file>.torn-N`, adds a missing final newline) so the next line never glues onto damage.
  Status PrepareAppend();
  // Keeps the current file as a rotation and swaps in a file holding its first `keep_bytes` followed by
  // `append`. Sets `*swapped` once the new file is in place (state must then follow it, even if a later
  // step fails) and `*rotation` (if given) to the rotation's path.
  // `holes` are ranges inside the first `keep_bytes` (sorted, disjoint) that the new file leaves out.
  Status RotateAndRebuild(uint64_t keep_bytes, bool* swapped, std::string_view append = {},
                          std::string* rotation = nullptr,
                          std::span<const std::pair<uint64_t, uint64_t>> holes = {});
  // Makes `file` (of `size` bytes, renamed over path_) the writer's file; a failed directory sync poisons it.
  void AdoptSwappedFile(std::unique_ptr<WritableFile> file, uint64_t size, const Status& dir_sync);
  // Clears all restored state.
  void ResetState();
  void InvalidatePending() { pending_cache_.reset(); }

  const std::string path_;
  ContextLogOptions options_;

  std::vector<Message> history_;
  int64_t token_count_ = 0;
  size_t pending_begin_ = 0;  // history_[pending_begin_..] came after the last usage mark.
  mutable std::optional<int64_t> pending_cache_;
  int64_t next_checkpoint_id_ = 0;
  std::optional<std::string> system_prompt_;
  std::vector<CheckpointMark> checkpoints_;  // In file order.
  std::vector<PromptMark> prompts_;          // `_system_prompt` records in file order.
  std::vector<UsageMark> usages_;            // `_usage` records in file order.
  // Lines of the live file that hold no record (blank or damaged), {offset, length with '\n'}, in file
  // order: a revert leaves them out of the new file, as kimi-cli's does (the rotation keeps them).
  std::vector<std::pair<uint64_t, uint64_t>> skipped_;

  bool restored_ = false;
  bool modified_ = false;
  bool foreign_bytes_ = false;  // The file had content this log neither restored nor wrote.
  // Non-OK once a write failed in a way that leaves the file's state unknown: every later mutation fails
  // until a new ContextLog restores the file.
  Status broken_;
  // Identity and size of the file when Close() released it; a later mutation checks nobody changed it.
  std::optional<std::pair<uint64_t, uint64_t>> closed_at_;
  RestoreReport report_;
  // Tail repair owed before the next append (from Restore's scan).
  std::optional<Damage> torn_tail_;
  bool missing_newline_ = false;
  std::unique_ptr<LogWriter> writer_;  // Holds the lock while open.
};

}  // namespace strata
