// Linear context storage, compatible with kosong's `LinearStorage` protocol: an ordered list of messages
// plus the last known token count. MemoryLinearStorage keeps it in memory; JsonlLinearStorage also appends
// each change to a JSONL file (messages as kosong JSON, marks as `{"role":"_usage","token_count":N}`).
// Other backends (SQLite, PostgreSQL) implement the same interface. LinearContext is the facade agents use.
//
// JsonlLinearStorage shares ContextLog's recovery and durability: damaged lines are skipped and reported,
// a torn tail is cut (kept in `<file>.torn-N`) before the next append, and one writer holds the file lock.
//
// Thread safety: not thread-safe; use one instance from one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "strata/log/log_reader.h"
#include "strata/log/log_writer.h"
#include "strata/message/message.h"
#include "strata/util/file_system.h"
#include "strata/util/status.h"

namespace strata {

class LinearStorage {
 public:
  virtual ~LinearStorage() = default;
  // Loads persisted state. Returns false if there was nothing to load. Fails with kFailedPrecondition if
  // the storage already holds messages ("already modified").
  virtual Result<bool> Restore() = 0;
  virtual const std::vector<Message>& messages() const = 0;
  // Returns the last marked token count (0 if never marked).
  virtual int64_t token_count() const = 0;
  virtual Status AppendMessage(const Message& message) = 0;
  virtual Status MarkTokenCount(int64_t token_count) = 0;
};

// Messages in memory only; Restore() has nothing to load.
class MemoryLinearStorage final : public LinearStorage {
 public:
  Result<bool> Restore() override;
  const std::vector<Message>& messages() const override { return messages_; }
  int64_t token_count() const override { return token_count_; }
  Status AppendMessage(const Message& message) override;
  Status MarkTokenCount(int64_t token_count) override;

 private:
  std::vector<Message> messages_;
  int64_t token_count_ = 0;
};

struct JsonlLinearStorageOptions {
  FileSystem* fs = nullptr;  // Default: PosixFileSystem(). Borrowed.
  Clock* clock = nullptr;    // Default: SystemClock(). Borrowed.
  DurabilityOptions durability;
};

class JsonlLinearStorage final : public LinearStorage {
 public:
  explicit JsonlLinearStorage(std::string path, JsonlLinearStorageOptions options = {});
  ~JsonlLinearStorage() override;

  Result<bool> Restore() override;
  const std::vector<Message>& messages() const override { return messages_; }
  int64_t token_count() const override { return token_count_; }
  Status AppendMessage(const Message& message) override;
  Status MarkTokenCount(int64_t token_count) override;
  // Syncs and releases the file lock.
  Status Close();
  // Returns what Restore() found (damaged lines, torn tail).
  const ScanSummary& restore_summary() const { return summary_; }

 private:
  Status Write(const std::string& line);

  std::string path_;
  JsonlLinearStorageOptions options_;
  std::vector<Message> messages_;
  int64_t token_count_ = 0;
  ScanSummary summary_;
  bool tail_checked_ = false;  // Torn tail / missing newline handled (or known absent).
  std::unique_ptr<LogWriter> writer_;
};

// The facade: history plus token marks over any LinearStorage (borrowed; must outlive the context).
class LinearContext {
 public:
  explicit LinearContext(LinearStorage* storage) : storage_(storage) {}
  const std::vector<Message>& history() const { return storage_->messages(); }
  int64_t token_count() const { return storage_->token_count(); }
  Status AddMessage(const Message& message) { return storage_->AppendMessage(message); }
  Status MarkTokenCount(int64_t token_count) { return storage_->MarkTokenCount(token_count); }

 private:
  LinearStorage* storage_;
};

}  // namespace strata
