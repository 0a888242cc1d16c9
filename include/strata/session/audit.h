// The memory audit trail: every change the memory pipeline makes, recorded before it is applied.
//
// Each decision about one extracted candidate is written as a batch of entries (one transaction) before the
// store is touched, keyed by its source ("<session>#<archive>#<candidate>"). A crash after the batch is
// committed replays the recorded operations (all idempotent) instead of asking the model again, so a redo
// never duplicates; a crash before it asks again. The trail is also the history of each memory: what it
// said before and after every change, when, why and from which conversation.
//
// Thread safety: all methods are safe from several threads.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/util/status.h"

namespace strata::session {

// What happened to a memory. Stored and shown by name: "create", "merge", "supersede", "skip".
enum class MemoryAction { kCreate, kMerge, kSupersede, kSkip };
std::string_view MemoryActionName(MemoryAction action);
Result<MemoryAction> ParseMemoryAction(std::string_view name);

struct AuditEntry {
  int64_t id = 0;
  std::string uri;  // The memory changed.
  MemoryAction action = MemoryAction::kCreate;
  std::string source;  // "<session>#<archive>#<candidate>" or "remember#<ms>-<random>#0".
  int64_t at_ms = 0;
  std::string reason;  // The model's reason, or the rule that decided.
  std::string before;  // Content before (empty for create).
  std::string after;   // Content after (the superseded memory's content for supersede).
  std::string abstract_text;
  std::string overview;
  std::string category;
};

class AuditLog {
 public:
  virtual ~AuditLog() = default;
  // Records `entries` in one transaction; fills their ids.
  virtual Status Record(std::vector<AuditEntry>& entries) = 0;
  // The entries of one source, in order (empty if it was never decided).
  virtual Result<std::vector<AuditEntry>> BySource(std::string_view source) = 0;
  // The history of one memory, oldest first.
  virtual Result<std::vector<AuditEntry>> History(std::string_view uri) = 0;
  // The newest `limit` entries for `under` or a memory below it (`under` is a URI; one ending in "/" is a
  // plain prefix), newest first.
  virtual Result<std::vector<AuditEntry>> Recent(std::string_view under, size_t limit) = 0;
};

// With `read_only`, the database is only read (opened read-only, immutable on a read-only volume; none at
// `path` reads as an empty log) and Record fails.
Result<std::unique_ptr<AuditLog>> OpenAuditLog(const std::string& path, bool read_only = false);
// Opens the audit log in the PostgreSQL database at `url` (postgres://...), creating or migrating its table.
Result<std::unique_ptr<AuditLog>> OpenPgAuditLog(const std::string& url);

}  // namespace strata::session
