// Offline inspection and repair of context files (`strata context check|repair`).
//
// Thread safety: functions are thread-safe; RepairContextFile takes the file's writer lock.
#pragma once

#include <optional>
#include <string>

#include "strata/log/log_reader.h"
#include "strata/util/file_system.h"
#include "strata/util/status.h"

namespace strata {

// Scans `path` (kimi-cli context format unless `format` says otherwise) and reports every damaged line and
// a torn tail. Never writes. A missing file is kNotFound.
Result<ScanSummary> CheckContextFile(FileSystem* fs, const std::string& path, LogFormat format = LogFormat::kContext);

// Returns `summary` as a JSON object: {"file","size","lines","records","ok","missing_final_newline",
// "torn_tail":{...}|null,"damage":[{"line","offset","length","kind","reason"}]}.
std::string ScanSummaryToJson(const std::string& path, const ScanSummary& summary);

struct RepairResult {
  ScanSummary before;                 // What was found.
  std::optional<std::string> backup;  // The rotated copy of the original (`<stem>_N<ext>`), if anything changed.
  uint64_t removed_lines = 0;
  uint64_t removed_bytes = 0;
};

// Rewrites `path` without its damaged lines and torn tail (adding a missing final newline), keeping the
// original as `<stem>_N<ext>`. A clean file is left untouched (no backup). The rewrite is atomic: temp
// file, fsync, rename, fsync of the directory. Fails with kUnavailable if another writer holds the file.
Result<RepairResult> RepairContextFile(FileSystem* fs, const std::string& path, LogFormat format = LogFormat::kContext);

}  // namespace strata
