// Copying a deployment from one backend to another (`strata migrate --from DIR --to postgres://…`).
//
// CopyDeployment reads everything through the source engine's interfaces and writes it through the
// destination's, so any pair of backends works: the store (every node with its layers, type, category and
// metadata; relations), the sessions (owners, system prompt, the current messages with their checkpoints and
// usage marks in file order, and every archive with its messages, state, error, notes and phase 2's files),
// and the audit log (at most 2^20 entries; a longer log is refused). An archive whose phase 2 had not finished is queued again in the destination; a finished or failed
// one is not. Then VerifyCopy compares the two and lists every difference, the embedding model included: open
// the destination with the source's embedder (`strata migrate` does so unless --embedder names one).
//
// Not carried over: creation and update times (the destination stamps its own), earlier versions of a log
// kept by reverts and compactions (rotations), and the job queue's history. The destination must be empty
// (kFailedPrecondition otherwise): a copy is never merged into existing data.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/engine/engine.h"

namespace strata {

struct MigrationReport {
  int64_t nodes = 0;          // Store nodes copied (directories included).
  int64_t relations = 0;
  int64_t sessions = 0;
  int64_t messages = 0;       // Current and archived.
  int64_t archives = 0;
  int64_t audit_entries = 0;
  std::vector<std::string> differences;  // What VerifyCopy found; empty when the copy is faithful.
};

// Copies `from` into the empty `to`, then verifies the copy (report.differences). `progress` (optional)
// hears one line per stage.
Result<MigrationReport> CopyDeployment(Engine& from, Engine& to,
                                       const std::function<void(std::string_view)>& progress = nullptr);

// Compares everything CopyDeployment copies; returns the differences (at most 100, then a count).
Result<std::vector<std::string>> VerifyCopy(Engine& from, Engine& to);

}  // namespace strata
