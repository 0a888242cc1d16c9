#include "strata/window/assembler.h"

#include <algorithm>

namespace strata::window {
namespace {

bool HasToolCalls(const Message& m) { return m.role == Role::kAssistant && m.tool_calls && !m.tool_calls->empty(); }

// `base` is the caller's index of history[0] (AssembleOptions::first_index).
std::string Describe(const HistoryUnit& unit, size_t base) {
  if (unit.end - unit.begin == 1) return "message " + std::to_string(base + unit.begin);
  return "messages " + std::to_string(base + unit.begin) + "-" + std::to_string(base + unit.end - 1);
}

}  // namespace

std::string_view WarningCodeName(AssemblyWarning::Code code) {
  switch (code) {
    case AssemblyWarning::Code::kSummaryOverBudget: return "summary_over_budget";
    case AssemblyWarning::Code::kNewestOverBudget: return "newest_over_budget";
    case AssemblyWarning::Code::kIncompleteToolGroup: return "incomplete_tool_group";
    case AssemblyWarning::Code::kOrphanToolResult: return "orphan_tool_result";
    case AssemblyWarning::Code::kUnmatchedToolResult: return "unmatched_tool_result";
  }
  return "unknown";
}

void HistoryIndex::CloseOpenGroup() {
  if (!units_.empty() && units_.back().state == HistoryUnit::State::kOpen) {
    units_.back().state = HistoryUnit::State::kIncomplete;
  }
  open_ids_.clear();
  open_answered_.clear();
}

void HistoryIndex::Index(const Message& message, int64_t tokens) {
  size_t i = tokens_.size();
  tokens_.push_back(tokens);
  if (message.role == Role::kTool) {
    if (open_ids_.empty()) {  // No group is taking results: an orphan.
      units_.push_back(HistoryUnit{.begin = i, .end = i + 1, .state = HistoryUnit::State::kOrphan, .tokens = tokens});
      return;
    }
    HistoryUnit& group = units_.back();
    group.end = i + 1;
    const std::string& id = message.tool_call_id.value_or("");
    size_t match = open_ids_.size();
    for (size_t j = 0; j < open_ids_.size(); ++j) {
      if (!open_answered_[j] && open_ids_[j] == id) {
        match = j;
        break;
      }
    }
    if (match == open_ids_.size()) {
      group.unmatched.push_back(i);
      return;
    }
    open_answered_[match] = true;
    group.tokens += tokens;
    if (std::all_of(open_answered_.begin(), open_answered_.end(), [](bool b) { return b; })) {
      group.state = HistoryUnit::State::kOk;  // Complete; later extra results are unmatched.
    }
    return;
  }
  CloseOpenGroup();
  if (HasToolCalls(message)) {
    units_.push_back(HistoryUnit{.begin = i, .end = i + 1, .state = HistoryUnit::State::kOpen, .tokens = tokens});
    for (const ToolCall& call : *message.tool_calls) open_ids_.push_back(call.id);
    open_answered_.assign(open_ids_.size(), false);
  } else {
    units_.push_back(HistoryUnit{.begin = i, .end = i + 1, .state = HistoryUnit::State::kOk, .tokens = tokens});
  }
}

void HistoryIndex::Append(const Message& message, int64_t tokens) { Index(message, tokens); }

void HistoryIndex::Reset() {
  tokens_.clear();
  units_.clear();
  open_ids_.clear();
  open_answered_.clear();
}

void HistoryIndex::Sync(std::span<const Message> history) {
  if (history.size() < tokens_.size()) {
    // Cut back to the last unit that starts with a non-tool message before the new end, and re-index
    // from there (reusing the counts): that rebuilds the open-group state exactly.
    size_t n = history.size();
    size_t k = units_.size();
    while (k > 0) {
      const HistoryUnit& u = units_[k - 1];
      if (u.begin < n && history[u.begin].role != Role::kTool) break;
      --k;
    }
    size_t start = k > 0 ? units_[k - 1].begin : 0;
    std::vector<int64_t> saved(tokens_.begin() + static_cast<ptrdiff_t>(start),
                               tokens_.begin() + static_cast<ptrdiff_t>(n));
    units_.erase(units_.begin() + static_cast<ptrdiff_t>(k > 0 ? k - 1 : 0), units_.end());
    tokens_.resize(start);
    open_ids_.clear();
    open_answered_.clear();
    for (size_t i = start; i < n; ++i) Index(history[i], saved[i - start]);
  }
  for (size_t i = tokens_.size(); i < history.size(); ++i) {
    Index(history[i], counter_->CountMessages(history.subspan(i, 1)));
  }
}

Message SummaryMessage(const AssembleOptions& options) {
  Message m;
  m.role = options.summary_role;
  m.content.push_back(TextPart{options.summary.value_or("")});
  return m;
}

Result<Assembly> Assemble(std::span<const Message> history, const HistoryIndex& index,
                          const AssembleOptions& options, const MessageTokenCounter& counter) {
  auto invalid = [](std::string why) { return Status::InvalidArgument("invalid budget: " + why); };
  if (options.max_context_tokens < 0) {
    return invalid("max_context_tokens is negative (" + std::to_string(options.max_context_tokens) + ")");
  }
  if (options.reserve_for_reply < 0) {
    return invalid("reserve_for_reply is negative (" + std::to_string(options.reserve_for_reply) + ")");
  }
  if (options.reserved_tokens < 0) {
    return invalid("reserved_tokens is negative (" + std::to_string(options.reserved_tokens) + ")");
  }
  if (options.reserve_for_reply > options.max_context_tokens) {
    return invalid("reserve_for_reply (" + std::to_string(options.reserve_for_reply) +
                   ") exceeds max_context_tokens (" + std::to_string(options.max_context_tokens) + ")");
  }
  if (index.size() != history.size()) {
    return Status::FailedPrecondition("history index covers " + std::to_string(index.size()) +
                                      " messages but the history has " + std::to_string(history.size()) +
                                      " (call HistoryIndex::Sync first)");
  }
  Assembly a;
  a.budget = options.max_context_tokens - options.reserve_for_reply;
  a.fixed_tokens = options.reserved_tokens;
  if (!options.system_prompt.empty()) {
    Message system = Message::System(options.system_prompt);
    a.fixed_tokens += options.system_prompt_tokens.value_or(counter.CountMessages({&system, 1}));
  }
  a.fixed_tokens += counter.CountMessages(options.pinned);
  if (a.fixed_tokens > a.budget) {
    return invalid("the system prompt, pinned messages and reserved tokens take " + std::to_string(a.fixed_tokens) +
                   " tokens, more than the budget of " + std::to_string(a.budget) + " (max_context_tokens " +
                   std::to_string(options.max_context_tokens) + " - reserve_for_reply " +
                   std::to_string(options.reserve_for_reply) + ")");
  }

  int64_t remaining = a.budget - a.fixed_tokens;
  if (options.summary && !options.summary->empty()) {
    if (options.summary_tokens) {
      a.summary_tokens = *options.summary_tokens;
    } else {
      Message summary = SummaryMessage(options);
      a.summary_tokens = counter.CountMessages({&summary, 1});
    }
    if (a.summary_tokens <= remaining) {
      a.summary_included = true;
      remaining -= a.summary_tokens;
    } else {
      a.summary_over_budget = true;
      a.warnings.push_back({AssemblyWarning::Code::kSummaryOverBudget,
                            "the summary (" + std::to_string(a.summary_tokens) + " tokens) does not fit in the " +
                                std::to_string(remaining) + " tokens left; it was left out: compact again",
                            std::nullopt});
    }
  }

  std::vector<const HistoryUnit*> chosen;
  if (remaining > 0) {
    const std::vector<HistoryUnit>& units = index.units();
    for (auto it = units.rbegin(); it != units.rend(); ++it) {
      const HistoryUnit& u = *it;
      if (u.state == HistoryUnit::State::kOrphan) {
        a.warnings.push_back({AssemblyWarning::Code::kOrphanToolResult,
                              Describe(u, options.first_index) + ": a tool result that answers no call before it; not sent", u.begin});
        continue;
      }
      if (u.state != HistoryUnit::State::kOk) {
        a.warnings.push_back({AssemblyWarning::Code::kIncompleteToolGroup,
                              Describe(u, options.first_index) + ": tool calls without all their results; the group is not sent",
                              u.begin});
        continue;
      }
      if (a.history_tokens + u.tokens > remaining) {
        if (chosen.empty()) {
          a.warnings.push_back({AssemblyWarning::Code::kNewestOverBudget,
                                "the newest " + Describe(u, options.first_index) + " takes " + std::to_string(u.tokens) +
                                    " tokens, more than the " + std::to_string(remaining) +
                                    " left for history; no history is sent",
                                u.begin});
        }
        break;
      }
      a.history_tokens += u.tokens;
      chosen.push_back(&u);
      for (size_t i : u.unmatched) {
        a.warnings.push_back({AssemblyWarning::Code::kUnmatchedToolResult,
                              "message " + std::to_string(options.first_index + i) + ": a tool result whose id (" +
                                  history[i].tool_call_id.value_or("") +
                                  ") answers no call of its group, or one already answered; not sent",
                              i});
      }
    }
  }
  for (auto it = chosen.rbegin(); it != chosen.rend(); ++it) {
    const HistoryUnit& u = **it;
    for (size_t i = u.begin; i < u.end; ++i) {
      if (std::find(u.unmatched.begin(), u.unmatched.end(), i) == u.unmatched.end()) a.included.push_back(i);
    }
  }
  a.total_tokens = a.fixed_tokens + (a.summary_included ? a.summary_tokens : 0) + a.history_tokens;
  return a;
}

std::vector<Message> AssembledMessages(std::span<const Message> history, const Assembly& assembly,
                                       const AssembleOptions& options) {
  std::vector<Message> out;
  out.reserve(options.pinned.size() + 1 + assembly.included.size());
  out.insert(out.end(), options.pinned.begin(), options.pinned.end());
  if (assembly.summary_included) out.push_back(SummaryMessage(options));
  for (size_t i : assembly.included) out.push_back(history[i]);
  return out;
}

}  // namespace strata::window
