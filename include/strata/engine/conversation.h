// Conversation: the agent turn loop over a durable context log (kimi-cli's context.jsonl), the program
// that `strata chat` is a thin adapter over and that the server's chat endpoints run.
//
// A turn: checkpoint (so Undo() reverts exactly this turn), append the user message, then steps until the
// model stops calling tools (at most max_steps): each request is assembled within max_context tokens
// (window/assembler.h: an earlier compaction's summary pinned, then the newest history that fits; the
// newest message must fit or the turn fails with kResourceExhausted rather than send a prompt without it),
// the step's messages and the provider's usage mark are appended. After a turn that brings the context to
// the trigger (window/compaction.h: compact_ratio of the window, or less than reserve_for_reply left), the
// older turns are summarised with the same provider and the log is rewritten atomically (the previous file
// stays as a rotation). max_context = 0 sends the whole history and never compacts.
//
// Thread safety: one operation at a time (calls are serialised); Cancel() may be called from any thread
// and cancels the generation in progress.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "strata/llm/provider.h"
#include "strata/log/context_log.h"
#include "strata/message/message.h"
#include "strata/message/token_estimator.h"
#include "strata/tools/step.h"
#include "strata/tools/tool.h"
#include "strata/util/cancel.h"
#include "strata/util/status.h"

namespace strata {

struct ConversationOptions {
  std::string system_prompt;  // Written to a log that has none.
  int max_steps = 20;         // Model calls per user turn.
  int64_t max_context = 0;    // The model's window in tokens (0: send everything, never compact).
  int64_t reserve_for_reply = 4096;
  double compact_ratio = 0.85;
};

// What a compaction did (Compact(), or automatically after a turn).
struct CompactionReport {
  std::string why;           // "on request", or the trigger's explanation.
  bool nothing_to_do = false;  // Too few turns: the log is unchanged.
  int64_t compacted = 0;     // Messages folded into the summary.
  int64_t kept = 0;
  int64_t tokens_before = 0;
  int64_t tokens_after = 0;
  bool pruned_fallback = false;  // The model failed (llm_error); old tool output was pruned instead.
  Status llm_error;
  std::string rotation;      // Where the previous log was kept.
};

struct TurnCallbacks {
  std::function<void(const StreamedPart&)> on_part;       // Streamed text and thinking.
  std::function<void(const ToolCall&)> on_tool_call;      // As each call completes.
  // As each tool finishes, on the tool's thread (calls are serialised; tools/step.h).
  std::function<void(const tools::ToolResult&)> on_tool_result;
  std::function<void(const std::string&)> on_warning;     // Assembly warnings, failed automatic compaction.
  std::function<void(int step)> on_step_end;              // After each model call returns (or fails).
  std::function<void(const CompactionReport&)> on_compacted;
};

struct TurnResult {
  std::vector<Message> messages;  // Everything the turn appended after the user message.
  int steps = 0;
  std::optional<TokenUsage> usage;  // Of the last step.
  std::string stop_reason;          // The provider's, for the last step (llm::StopKindOf says what it means).
  bool stopped_at_max_steps = false;  // The model was still calling tools after max_steps steps.
  std::optional<CompactionReport> compaction;  // An automatic compaction after the turn.
};

class Conversation {
 public:
  // Opens (restoring) the log at `path`, creating its directory. `provider` and `counter` are borrowed and
  // must outlive the conversation; `tools` may be null (no tools: every call gets "unknown tool").
  static Result<std::unique_ptr<Conversation>> Open(const std::string& path, llm::ChatProvider& provider,
                                                    const MessageTokenCounter& counter,
                                                    ConversationOptions options = {},
                                                    const tools::Toolset* tools = nullptr);
  ~Conversation();

  // One user turn (see above). Errors: the log's, the model's (after its retries), kResourceExhausted when
  // the newest message cannot fit, kCancelled. A failed automatic compaction is a warning, not an error.
  Result<TurnResult> Turn(Message user, const TurnCallbacks& callbacks = {});
  Result<TurnResult> Turn(std::string_view text, const TurnCallbacks& callbacks = {});

  // Marks this point; returns the checkpoint id.
  Result<int64_t> Checkpoint();
  // Reverts to the last checkpoint (each turn makes one); returns its id, nullopt when there is none.
  Result<std::optional<int64_t>> Undo();
  // Forgets the conversation (the old log is kept as a rotation).
  Status Clear();
  // Summarises the older conversation now; `focus` is an instruction to the summariser.
  Result<CompactionReport> Compact(std::string_view focus, std::string_view why = "on request");
  // The messages the next request would carry (the whole history without max_context).
  Result<std::vector<Message>> Assembled(std::vector<std::string>* warnings = nullptr);
  // Cancels the generation in progress, if any.
  void Cancel();
  Status Close();

  const ContextLog& log() const { return *log_; }
  const llm::ChatProvider& provider() const { return provider_; }
  std::string system_prompt() const;

 private:
  Conversation(llm::ChatProvider& provider, const MessageTokenCounter& counter, ConversationOptions options,
               const tools::Toolset* tools, std::unique_ptr<ContextLog> log);
  Result<std::vector<Message>> AssembledLocked(const std::string& system_prompt, std::vector<std::string>* warnings);
  Result<CompactionReport> CompactLocked(std::string_view focus, std::string_view why);

  llm::ChatProvider& provider_;
  const MessageTokenCounter& counter_;
  ConversationOptions options_;
  const tools::Toolset* tools_;
  std::unique_ptr<tools::Toolset> no_tools_;
  std::unique_ptr<ContextLog> log_;
  struct Index;
  std::unique_ptr<Index> index_;  // The assembler's incremental token index.
  std::mutex mu_;  // One operation at a time.
  std::mutex cancel_mu_;  // Guards running_ (Cancel() comes from other threads).
  Canceller* running_ = nullptr;
};

}  // namespace strata
