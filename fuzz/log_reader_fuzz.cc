// Fuzz target: the log reader and recovery. For any file content: restore never fails on content, and after
// one append a fresh restore sees the old history plus the new message with no damage left at the tail.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "strata/log/context_log.h"
#include "strata/log/linear_storage.h"
#include "strata/util/memory_file_system.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view content(reinterpret_cast<const char*>(data), size);
  strata::MemoryFileSystem fs;
  fs.SetFileDurably("c.jsonl", content);
  strata::ContextLogOptions options;
  options.fs = &fs;
  options.durability.policy = strata::Durability::kNone;
  std::vector<strata::Message> expected;
  {
    auto log = strata::ContextLog::Open("c.jsonl", options);
    auto restored = log->Restore();
    if (!restored.ok()) std::abort();  // Content alone must never make restore fail.
    expected = log->history();
    if (!log->Append(strata::Message::User("fuzz")).ok()) std::abort();
    expected.push_back(strata::Message::User("fuzz"));
  }
  auto log = strata::ContextLog::Open("c.jsonl", options);
  if (!log->Restore().ok()) std::abort();
  if (log->history() != expected) std::abort();
  if (log->restore_report().scan.torn_tail) std::abort();

  strata::JsonlLinearStorage linear("c.jsonl", {.fs = &fs});
  if (!linear.Restore().ok()) std::abort();
  return 0;
}
