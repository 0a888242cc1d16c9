#include "strata/engine/conversation.h"

#include <algorithm>
#include <filesystem>

#include "strata/window/assembler.h"
#include "strata/window/compaction.h"

namespace strata {

struct Conversation::Index {
  explicit Index(const MessageTokenCounter* counter) : history(counter) {}
  window::HistoryIndex history;
  size_t pinned = 0;  // Messages pinned before the indexed span when it was last synced.
};

Conversation::Conversation(llm::ChatProvider& provider, const MessageTokenCounter& counter,
                           ConversationOptions options, const tools::Toolset* tools, std::unique_ptr<ContextLog> log)
    : provider_(provider),
      counter_(counter),
      options_(std::move(options)),
      tools_(tools),
      log_(std::move(log)),
      index_(std::make_unique<Index>(&counter)) {
  if (tools_ == nullptr) {
    no_tools_ = std::make_unique<tools::Toolset>();
    tools_ = no_tools_.get();
  }
}

Conversation::~Conversation() = default;

Result<std::unique_ptr<Conversation>> Conversation::Open(const std::string& path, llm::ChatProvider& provider,
                                                         const MessageTokenCounter& counter,
                                                         ConversationOptions options, const tools::Toolset* tools) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
  }
  ContextLogOptions log_options;
  log_options.estimator = &counter;
  std::unique_ptr<ContextLog> log = ContextLog::Open(path, log_options);
  STRATA_RETURN_IF_ERROR(log->Restore().status());
  if (!log->system_prompt() && !options.system_prompt.empty()) {
    STRATA_RETURN_IF_ERROR(log->WriteSystemPrompt(options.system_prompt));
  }
  return std::unique_ptr<Conversation>(new Conversation(provider, counter, std::move(options), tools, std::move(log)));
}

std::string Conversation::system_prompt() const { return log_->system_prompt().value_or(options_.system_prompt); }

void Conversation::Cancel() {
  // Under cancel_mu_, so the turn cannot destroy the Canceller while it is being cancelled.
  std::lock_guard lock(cancel_mu_);
  if (running_ != nullptr) running_->Cancel();
}

Result<TurnResult> Conversation::Turn(std::string_view text, const TurnCallbacks& callbacks) {
  return Turn(Message::User(std::string(text)), callbacks);
}

Result<TurnResult> Conversation::Turn(Message user, const TurnCallbacks& callbacks) {
  std::lock_guard lock(mu_);
  STRATA_RETURN_IF_ERROR(log_->Checkpoint(false).status());
  STRATA_RETURN_IF_ERROR(log_->Append(std::move(user)));
  std::string prompt = system_prompt();
  TurnResult turn;
  auto warn = [&](const std::string& message) {
    if (callbacks.on_warning) callbacks.on_warning(message);
  };
  for (int step = 0; step < options_.max_steps; ++step) {
    std::vector<std::string> warnings;
    Result<std::vector<Message>> messages = AssembledLocked(prompt, &warnings);
    for (const std::string& w : warnings) warn(w);
    if (!messages.ok()) return messages.status();
    Canceller cancel;
    {
      std::lock_guard cancel_lock(cancel_mu_);
      running_ = &cancel;
    }
    tools::StepCallbacks step_callbacks;
    step_callbacks.on_part = callbacks.on_part;
    step_callbacks.on_tool_call = callbacks.on_tool_call;
    step_callbacks.on_tool_result = callbacks.on_tool_result;
    auto result = tools::Step(provider_, prompt, *tools_, *messages, step_callbacks, {.cancel = &cancel});
    {
      std::lock_guard cancel_lock(cancel_mu_);
      running_ = nullptr;
    }
    if (callbacks.on_step_end) callbacks.on_step_end(step);
    if (!result.ok()) return result.status();
    std::vector<Message> added = result->NewMessages();
    // The provider counted the context up to its reply, not the tool results after it: the usage mark goes
    // between them (as kimi-cli writes it), so the results count as pending until the next reply's usage.
    if (result->usage) {
      STRATA_RETURN_IF_ERROR(log_->AppendWithTokenCount(added, 1, result->usage->total()));
    } else {
      STRATA_RETURN_IF_ERROR(log_->Append(std::span<const Message>(added)));
    }
    switch (llm::StopKindOf(result->stop_reason)) {
      case llm::StopKind::kEnd: break;
      case llm::StopKind::kLength:
        warn("the reply was cut at the output token limit (stop reason: " + result->stop_reason + ")");
        break;
      case llm::StopKind::kFiltered:
        warn("the provider stopped the reply early (stop reason: " + result->stop_reason + ")");
        break;
      case llm::StopKind::kOther: warn("the reply ended with the stop reason " + result->stop_reason); break;
    }
    turn.stop_reason = result->stop_reason;
    turn.messages.insert(turn.messages.end(), added.begin(), added.end());
    turn.usage = result->usage;
    turn.steps = step + 1;
    if (result->tool_results.empty()) break;
    if (step + 1 == options_.max_steps) turn.stopped_at_max_steps = true;
  }
  if (turn.stopped_at_max_steps || options_.max_context <= 0) return turn;
  auto due = window::ShouldCompact(log_->token_count_with_pending(), options_.max_context,
                                   {.ratio = options_.compact_ratio, .reserved_headroom = options_.reserve_for_reply});
  if (!due) return turn;
  Result<CompactionReport> report = CompactLocked("", *due);
  if (!report.ok()) {
    warn("automatic compaction failed: " + report.status().message());
  } else {
    if (callbacks.on_compacted) callbacks.on_compacted(*report);
    turn.compaction = std::move(*report);
  }
  return turn;
}

Result<std::vector<Message>> Conversation::Assembled(std::vector<std::string>* warnings) {
  std::lock_guard lock(mu_);
  return AssembledLocked(system_prompt(), warnings);
}

Result<std::vector<Message>> Conversation::AssembledLocked(const std::string& system_prompt,
                                                           std::vector<std::string>* warnings) {
  const std::vector<Message>& history = log_->history();
  if (options_.max_context <= 0) return history;
  window::AssembleOptions options;
  options.max_context_tokens = options_.max_context;
  options.reserve_for_reply = options_.reserve_for_reply;
  options.system_prompt = system_prompt;
  std::span<const Message> rest = history;
  // A compaction's summary (the log's first message) is the assembler's summary, sent as the log holds it:
  // left out with a warning when it does not fit, as for a session (it was pinned, and the turn failed).
  const bool has_summary = !history.empty() && window::SummaryOf(history[0]).has_value();
  if (has_summary) {
    options.summary = history[0].ExtractText();
    options.summary_role = history[0].role;
    options.summary_tokens = counter_.CountMessages({&history[0], 1});
    options.first_index = 1;
    rest = rest.subspan(1);
  }
  if (index_->pinned != (has_summary ? 1u : 0u)) index_->history.Reset();  // The indexed span moved.
  index_->pinned = has_summary ? 1 : 0;
  index_->history.Sync(rest);
  STRATA_ASSIGN_OR_RETURN(window::Assembly a, window::Assemble(rest, index_->history, options, counter_));
  if (warnings != nullptr) {
    for (const window::AssemblyWarning& w : a.warnings) warnings->push_back(w.message);
  }
  // The model must see the newest message (the user's turn, or the tool results it is to act on).
  if (!rest.empty() && (a.included.empty() || a.included.back() != rest.size() - 1)) {
    return Status::ResourceExhausted("the newest message does not fit in the " + std::to_string(a.budget) +
                                     "-token budget after the system prompt and summary; /compact, or raise "
                                     "--max-context");
  }
  std::vector<Message> out = window::AssembledMessages(rest, a, options);
  if (a.summary_included) out[options.pinned.size()] = history[0];  // As the log holds it.
  return out;
}

Result<int64_t> Conversation::Checkpoint() {
  std::lock_guard lock(mu_);
  return log_->Checkpoint(false);
}

Result<std::optional<int64_t>> Conversation::Undo() {
  std::lock_guard lock(mu_);
  int64_t n = log_->n_checkpoints();
  if (n == 0) return std::optional<int64_t>();
  STRATA_RETURN_IF_ERROR(log_->RevertTo(n - 1));
  return std::optional<int64_t>(n - 1);
}

Status Conversation::Clear() {
  std::lock_guard lock(mu_);
  return log_->Clear();
}

Result<CompactionReport> Conversation::Compact(std::string_view focus, std::string_view why) {
  std::lock_guard lock(mu_);
  return CompactLocked(focus, why);
}

Result<CompactionReport> Conversation::CompactLocked(std::string_view focus, std::string_view why) {
  window::CompactionOptions options;
  options.instruction = std::string(focus);
  options.counter = &counter_;
  if (options_.max_context > 0) options.compaction_window = options_.max_context;
  options.reserve_for_summary = std::min<int64_t>(options_.reserve_for_reply, options.compaction_window / 4);
  STRATA_ASSIGN_OR_RETURN(window::CompactionResult r, window::Compact(provider_, log_->history(), options));
  CompactionReport report;
  report.why = std::string(why);
  report.compacted = static_cast<int64_t>(r.compacted);
  report.kept = static_cast<int64_t>(r.kept);
  report.tokens_before = r.tokens_before;
  report.tokens_after = r.tokens_after;
  report.pruned_fallback = r.pruned_fallback;
  report.llm_error = r.llm_error;
  if (r.compacted == 0 && !r.pruned_fallback) {
    report.nothing_to_do = true;
    return report;
  }
  int64_t system_tokens = 0;
  if (log_->system_prompt()) {
    Message system = Message::System(*log_->system_prompt());
    system_tokens = counter_.CountMessages({&system, 1});
  }
  STRATA_ASSIGN_OR_RETURN(report.rotation, window::WriteCompaction(log_.get(), r, r.tokens_after + system_tokens));
  index_->history.Reset();
  return report;
}

Status Conversation::Close() {
  std::lock_guard lock(mu_);
  return log_->Close();
}

}  // namespace strata
