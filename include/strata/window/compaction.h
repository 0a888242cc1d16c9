// Compaction: keeping a long conversation inside the window without losing what matters.
//
//   ShouldCompact()  the trigger: a ratio of the window (default 0.85) or a reserved headroom, whichever
//                    fires first, checked against the provider-reported count plus the pending estimate.
//   Prune()          without a model: replaces old tool results and thinking by short placeholders,
//                    keeping the newest messages intact.
//   Compact()        with a model: folds the older part of the history into a summary and keeps the most
//                    recent turns verbatim (never splitting a tool-call group). The summary requests are
//                    themselves budgeted: the older part is rendered to text, cut into chunks that fit the
//                    compaction model's window, summarised chunk by chunk (map) and merged (reduce,
//                    recursively while the partial summaries do not fit), so a history of any length can be
//                    compacted, including one that already fills the window. Incremental: when the history
//                    starts with the summary of an earlier compaction, only what came after it is
//                    summarised, together with that summary. If a model call fails, the history is pruned
//                    instead and the result says so.
//   WriteCompaction()  writes the result to a context log the way kimi-cli does (system prompt,
//                    checkpoint, messages, usage after a clear), as one atomic replacement: the previous
//                    file is kept as a rotation.
//   Trim()           non-destructive trim: the live log keeps the newest messages (whole tool groups), the
//                    older ones stay readable in the rotation the old file becomes.
//
// Thread safety: functions are thread-safe for distinct arguments; Compact() calls the provider from the
// calling thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "strata/llm/provider.h"
#include "strata/log/context_log.h"
#include "strata/message/message.h"
#include "strata/message/token_estimator.h"
#include "strata/util/status.h"

namespace strata::window {

struct CompactionTrigger {
  double ratio = 0.85;            // Compact when tokens >= ratio * window.
  int64_t reserved_headroom = 0;  // Or when tokens + headroom >= window (0: this check is off).
};

// Returns why compaction is due ("62000 tokens >= 85% of 72000"), or nullopt if it is not.
std::optional<std::string> ShouldCompact(int64_t context_tokens, int64_t max_context_tokens,
                                         const CompactionTrigger& trigger = {});

struct PruneOptions {
  size_t keep_recent = 8;         // The newest messages are left intact.
  bool tool_results = true;       // Replace older tool results' text...
  size_t min_tool_result_chars = 200;  // ...when longer than this (in code points).
  bool thinking = true;           // Drop older thinking parts (a placeholder stays).
};

struct PruneStats {
  size_t tool_results = 0;   // Tool results replaced.
  size_t thinking = 0;       // Thinking parts replaced.
  int64_t chars_removed = 0;
};

// Prunes `history` in place. Placeholders: "[tool output pruned: N characters]" for a tool result,
// "[thinking pruned]" for a thinking part (its signature is dropped with it). Tool-call ids, names and
// arguments are never touched, so every group stays valid.
PruneStats Prune(std::vector<Message>* history, const PruneOptions& options = {});

// The marker that opens a summary message: a user message whose first text part is exactly this, and
// whose second is the summary (the shape kimi-cli gives compacted context).
inline constexpr std::string_view kSummaryMarker =
    "<system>Previous context has been compacted. Here is the compaction output:</system>";

// Builds the summary message, and recognises one (returning its summary text).
Message MakeSummaryMessage(std::string summary);
std::optional<std::string> SummaryOf(const Message& message);

struct CompactionOptions {
  size_t keep_recent_turns = 2;    // User turns (a user message and what follows) kept verbatim.
  double max_kept_fraction = 0.3;  // ...but at most this share of compaction_window (cut at a unit boundary).
  std::string instruction;         // Optional focus for the summary ("keep the file paths").
  int64_t compaction_window = 128'000;  // The compaction model's context window, in tokens.
  int64_t reserve_for_summary = 4'096;  // Room left in each summary request for the model's answer.
  const MessageTokenCounter* counter = nullptr;  // Default: DefaultTokenEstimator().
  bool prune_on_failure = true;    // When a model call fails, prune instead (else return the error).
  PruneOptions prune;              // For the fallback.
  llm::GenerateOptions generate;   // Cancellation of the model calls.
};

struct CompactionResult {
  std::vector<Message> messages;  // The new history: the summary message, then the kept messages.
  std::string summary;            // "" when the fallback pruned instead.
  size_t compacted = 0;           // Older messages folded into the summary.
  size_t kept = 0;                // Messages kept verbatim.
  int llm_calls = 0;
  int chunks = 0;                 // Pieces the older history was cut into (1 = it fit one request).
  bool incremental = false;       // An earlier summary was updated rather than written anew.
  bool pruned_fallback = false;   // The model failed; the history was pruned instead (see llm_error).
  Status llm_error;
  PruneStats prune_stats;
  int64_t tokens_before = 0;      // Counted with options.counter.
  int64_t tokens_after = 0;
};

// Compacts `history`. Nothing to compact (too few turns) returns the history unchanged with compacted = 0.
// Fails only when the model fails and prune_on_failure is off, or on cancellation.
Result<CompactionResult> Compact(llm::ChatProvider& provider, std::span<const Message> history,
                                 const CompactionOptions& options = {});

// Replaces `log`'s content with the compacted history: system prompt (the log's, if it has one),
// checkpoint 0, the messages, and a usage mark of `token_count`. The previous file is kept as a rotation
// whose path is returned.
Result<std::string> WriteCompaction(ContextLog* log, const CompactionResult& result, int64_t token_count);

// Keeps the newest `keep_recent` messages in `log` (fewer if that would split a tool-call group: the cut
// moves forward to the next group boundary), and the system prompt. Returns the rotation that holds the
// whole previous log. Nothing is deleted.
Result<std::string> Trim(ContextLog* log, size_t keep_recent);

}  // namespace strata::window
