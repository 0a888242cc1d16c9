// LogWriter: appends complete lines to a log file under a durability policy, holding the file's writer lock.
//
// Policies (DurabilityOptions::policy), default kAlways:
//   kNone   - write(2) only: survives a process crash, not a power loss (unless write_buffer_bytes
//             buffers appends in memory; then a process crash can lose the buffer).
//   kBatch  - group commit: appends within `batch_window_micros` (or until `batch_max_bytes`) share one
//             fdatasync; a background thread syncs a window that received no further append. A power loss
//             can lose at most one window of acknowledged appends.
//   kAlways - every Append returns only after fdatasync: acknowledged means durable.
// Any failed write or fsync poisons the writer: every later call fails with kFailedPrecondition, because
// after a failed fsync the kernel may have dropped the dirty pages and the file's state is unknown. Reopen
// and restore the log to continue.
//
// Thread safety: all methods are thread-safe (one internal mutex; appends are serialised).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>

#include "strata/util/clock.h"
#include "strata/util/file_system.h"
#include "strata/util/status.h"

namespace strata {

enum class Durability { kNone, kBatch, kAlways };

// Returns "none", "batch" or "always"; ParseDurability is its inverse (kInvalidArgument otherwise).
std::string_view DurabilityName(Durability d);
Result<Durability> ParseDurability(std::string_view name);

struct DurabilityOptions {
  Durability policy = Durability::kAlways;
  // kBatch: the longest an acknowledged append may stay unsynced.
  int64_t batch_window_micros = 10'000;
  // kBatch: unsynced bytes that force a sync before the window closes.
  uint64_t batch_max_bytes = 4u << 20;
  // kBatch: run a background thread that syncs idle windows. Off only in tests that drive time by hand.
  bool batch_background_sync = true;
  // kNone only: collect appends in memory and write(2) them once this many bytes are pending (0: write
  // every append through at once, the default). Pending bytes are written by Sync(), Close() and before any
  // truncation; a process crash loses them, and other processes do not see them until then.
  size_t write_buffer_bytes = 0;
};

class LogWriter {
 public:
  // Opens `path` for appending (creating it, and making its name durable, if missing) and takes its writer
  // lock. Fails with kUnavailable if another writer holds the lock.
  static Result<std::unique_ptr<LogWriter>> Open(FileSystem* fs, const std::string& path,
                                                 DurabilityOptions options, Clock* clock);
  // Wraps an already-open, already-locked file of `size` bytes; `display_path` names it in errors.
  static std::unique_ptr<LogWriter> Adopt(std::unique_ptr<WritableFile> file, std::string display_path,
                                          uint64_t size, DurabilityOptions options, Clock* clock);

  ~LogWriter();
  LogWriter(const LogWriter&) = delete;  // Owns a file handle, a lock and maybe a thread.
  LogWriter& operator=(const LogWriter&) = delete;

  // Appends `lines` (one or more complete '\n'-terminated lines) in one write, then applies the policy.
  // A write that fails (disk full) leaves no partial record: the file is cut back to its previous end and
  // the error returned; the writer stays usable unless that cut fails too (then it is poisoned).
  Status Append(std::string_view lines);
  // Makes everything appended durable now.
  Status Sync();
  // Cuts the file to `size` bytes and makes the cut durable.
  Status Truncate(uint64_t size);
  // Syncs (unless kNone) and releases the file and its lock. Returns the poison status if poisoned.
  Status Close();
  // Poisons the writer from outside (e.g. a directory fsync failed after the file was swapped in).
  void MarkPoisoned(const Status& cause);

  // Returns the file size as written through this writer.
  uint64_t size() const;
  bool poisoned() const;
  const std::string& path() const { return path_; }

 private:
  LogWriter(std::unique_ptr<WritableFile> file, std::string path, uint64_t size, DurabilityOptions options,
            Clock* clock);
  Status SyncLocked();
  Status FlushLocked();  // Writes the user-space buffer.
  // Cuts the file back to `good_size` after a failed write and returns `cause` (poisoned if cutting fails).
  Status RollBackLocked(uint64_t good_size, const Status& cause);
  Status Poison(Status cause);
  void BackgroundLoop();

  const std::string path_;
  const DurabilityOptions options_;
  Clock* const clock_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::unique_ptr<WritableFile> file_;  // Guarded by mu_. Null once closed.
  uint64_t size_ = 0;                   // Guarded by mu_. Includes buffered bytes.
  std::string buffer_;                  // Guarded by mu_. Appends not yet written (kNone buffering).
  uint64_t unsynced_bytes_ = 0;         // Guarded by mu_.
  int64_t first_unsynced_micros_ = 0;   // Guarded by mu_.
  Status poison_;                       // Guarded by mu_. Non-OK once poisoned.
  bool stop_ = false;                   // Guarded by mu_.
  std::once_flag join_once_;            // Close may race with Close: join the thread once.
  std::thread background_;              // Runs BackgroundLoop for kBatch.
};

}  // namespace strata
