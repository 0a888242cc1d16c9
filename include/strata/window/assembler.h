// Budgeted context assembly: which messages to send so that the prompt never exceeds the window.
//
// The result is, in order: the system prompt, the pinned messages, the summary (the compressed prefix of
// older history), then the newest history that fits, filled from the newest backwards and sent in original
// order. Rules (docs/window.md has the worked cases):
//
//   * Never over budget: the counted size of everything sent is <= max_context_tokens - reserve_for_reply.
//   * An assistant message with tool calls and the tool results answering it are one unit, kept whole or
//     dropped whole. A group whose calls are not all answered by the tool messages right after it is
//     incomplete and dropped with its partial results; a tool result that no call owns (an orphan) is
//     dropped; a result inside a group whose id answers no call of the owner (or answers one twice) is
//     dropped from the unit. Every drop is reported as a warning.
//   * The selection is one contiguous run of the newest valid units: the scan stops at the first unit that
//     does not fit (older units behind it are never considered, so no gaps appear in the conversation).
//   * Impossible budgets (negative window or reserve, reserve > window, fixed parts larger than the budget)
//     are errors naming the reason. A zero remainder selects nothing. A summary that does not fit is left
//     out and flagged (summary_over_budget) so the caller can re-compact; a newest unit larger than the
//     remainder is reported (newest_over_budget), never silently dropped.
//
// Counting uses a MessageTokenCounter (a real tokenizer: tool-call names and arguments count) and is
// incremental: a HistoryIndex counts each message once and keeps the unit structure as messages are
// appended, so assembling a long history costs time proportional to what is selected.
//
// Thread safety: HistoryIndex is not thread-safe; Assemble() only reads its arguments.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/message/message.h"
#include "strata/message/token_estimator.h"
#include "strata/util/status.h"

namespace strata::window {

// One unit of selection: a message alone, or an assistant message with tool calls plus the tool results
// that answer it (messages [begin, end) of the history).
struct HistoryUnit {
  enum class State {
    kOk,          // Sendable.
    kIncomplete,  // Tool calls not all answered by the results right after them (dropped whole).
    kOpen,        // The newest group, still waiting for results (dropped whole, like kIncomplete).
    kOrphan,      // A tool result with no owning call before it (dropped).
  };
  size_t begin = 0;
  size_t end = 0;
  State state = State::kOk;
  std::vector<size_t> unmatched;  // Results inside [begin, end) that answer no call of the owner (not sent).
  int64_t tokens = 0;             // Sum over the messages that would be sent.
};

// Per-message token counts and the unit structure of a history, maintained incrementally.
class HistoryIndex {
 public:
  // `counter` is borrowed and must outlive the index.
  explicit HistoryIndex(const MessageTokenCounter* counter) : counter_(counter) {}

  // Brings the index up to date with `history`: counts the messages appended since the last call. If
  // `history` is shorter than what was indexed (a revert or clear), the index is cut back first. Messages
  // already indexed must not have changed (call Reset() after rewriting history in place).
  void Sync(std::span<const Message> history);
  // Appends one message with an explicit token count (e.g. provider-reported or given by the caller).
  void Append(const Message& message, int64_t tokens);
  // Forgets everything.
  void Reset();

  size_t size() const { return tokens_.size(); }
  int64_t tokens(size_t i) const { return tokens_[i]; }
  const std::vector<HistoryUnit>& units() const { return units_; }

 private:
  void Index(const Message& message, int64_t tokens);
  void Truncate(size_t n);
  void CloseOpenGroup();

  const MessageTokenCounter* counter_;
  std::vector<int64_t> tokens_;
  std::vector<HistoryUnit> units_;
  // For the newest unit, when it is a group still taking results: its calls' ids and which are answered.
  std::vector<std::string> open_ids_;
  std::vector<bool> open_answered_;
};

struct AssembleOptions {
  int64_t max_context_tokens = 0;
  int64_t reserve_for_reply = 0;  // Kept free for the model's answer.
  int64_t reserved_tokens = 0;    // Already committed elsewhere (tool schemas, a turn sent separately).
  std::string system_prompt;      // "" = none.
  std::optional<int64_t> system_prompt_tokens;  // Overrides counting the system prompt.
  std::vector<Message> pinned;    // Always sent, after the system prompt.
  std::optional<std::string> summary;           // The compressed prefix; "" counts as absent.
  std::optional<int64_t> summary_tokens;        // Overrides counting the summary message.
  Role summary_role = Role::kSystem;            // How the summary is sent.
  size_t first_index = 0;  // The caller's index of history[0] in warnings' text (1 when its log's first
                           // message, a compaction summary, is passed as `summary`). AssemblyWarning::index
                           // stays an index of `history`.
};

struct AssemblyWarning {
  enum class Code {
    kSummaryOverBudget,    // The summary did not fit and was left out: re-compact.
    kNewestOverBudget,     // The newest sendable unit alone exceeds what is left: nothing of history fits.
    kIncompleteToolGroup,  // Dropped: calls without all their results.
    kOrphanToolResult,     // Dropped: a tool result no call owns.
    kUnmatchedToolResult,  // Dropped from a group: answers no call of its owner, or one already answered.
  };
  Code code;
  std::string message;
  std::optional<size_t> index;  // The history index concerned, when there is one.
};

// Returns "summary_over_budget", "newest_over_budget", "incomplete_tool_group", "orphan_tool_result",
// "unmatched_tool_result".
std::string_view WarningCodeName(AssemblyWarning::Code code);

struct Assembly {
  int64_t budget = 0;         // max_context_tokens - reserve_for_reply.
  int64_t fixed_tokens = 0;   // System prompt + pinned + reserved_tokens.
  int64_t summary_tokens = 0; // Counted whether or not it was included.
  bool summary_included = false;
  bool summary_over_budget = false;
  std::vector<size_t> included;  // Ascending indices into the history.
  int64_t history_tokens = 0;    // Of the included messages.
  int64_t total_tokens = 0;      // fixed + summary (if included) + history; never > budget.
  std::vector<AssemblyWarning> warnings;
};

// Selects what to send from `history` (indexed by `index`, which must be in sync with it). `counter`
// counts the system prompt, the pinned messages and the summary unless their counts are given. Fails with
// kInvalidArgument ("invalid budget: ...") when no selection can respect the budget.
Result<Assembly> Assemble(std::span<const Message> history, const HistoryIndex& index,
                          const AssembleOptions& options, const MessageTokenCounter& counter);

// The messages to send after the system prompt: pinned, the summary (if included), the selected history.
std::vector<Message> AssembledMessages(std::span<const Message> history, const Assembly& assembly,
                                       const AssembleOptions& options);

// The summary as the message that carries it (role options.summary_role).
Message SummaryMessage(const AssembleOptions& options);

}  // namespace strata::window
