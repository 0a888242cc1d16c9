// Engine operations on a session's current messages as a context window: checkpoints, revert, fork,
// compaction, and the assembled window with its tokens per section.
#include <algorithm>

#include "engine_impl.h"
#include "guard.h"
#include "strata/util/ascii.h"
#include "strata/engine/engine.h"
#include "strata/memory/uri.h"
#include "strata/tokenizer/registry.h"
#include "strata/window/assembler.h"
#include "strata/window/compaction.h"

namespace strata {

using engine_internal::Guard;

namespace {

// Runs `body` with the engine's sessions, guarded.
template <typename F>
auto WithSessions(Engine& engine, std::string_view what, F&& body) -> decltype(body(std::declval<session::Sessions&>())) {
  return Guard(what, [&]() -> decltype(body(std::declval<session::Sessions&>())) {
    STRATA_ASSIGN_OR_RETURN(session::Sessions * s, engine.sessions());
    return body(*s);
  });
}


}  // namespace

Status Engine::DeleteSession(std::string_view id, bool force) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(Engine::options(), "session delete"));
  return WithSessions(*this, "session delete", [&](session::Sessions& s) -> Status {
    // Not in the middle of a turn or a commit's phase 1, unless forced: the turn's reply was lost while its
    // client was told it had been kept.
    std::unique_ptr<session::OwnerLocks::Held> held;
    if (!force) {
      STRATA_ASSIGN_OR_RETURN(held, impl_->HoldForChange(id, "delete it (or force it)"));
    }
    STRATA_RETURN_IF_ERROR(s.Delete(id, force));
    // What phase 2 stored under the session's own scope (its archived transcripts) goes with it: a new
    // session given the same id later must not inherit it.
    STRATA_ASSIGN_OR_RETURN(memory::Uri scope, memory::Uri::Parse("strata://session/" + session::SessionIdOfRef(id)));
    Result<int64_t> removed = Remove(scope.str(), /*recursive=*/true);
    if (!removed.ok() && removed.status().code() != StatusCode::kNotFound) return removed.status();
    return Status::Ok();
  });
}

Result<session::CheckpointInfo> Engine::Checkpoint(std::string_view id) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(Engine::options(), "session checkpoint"));
  return WithSessions(*this, "session checkpoint", [&](session::Sessions& s) -> Result<session::CheckpointInfo> {
    STRATA_ASSIGN_OR_RETURN(auto held, impl_->HoldForChange(id, "take a checkpoint"));
    return s.Checkpoint(id);
  });
}

// Checkpoint ids are 0 or more: a negative one is a mistake in the request (every front end's words), not a
// checkpoint that does not exist.
Status CheckCheckpointArg(int64_t id) {
  if (id >= 0) return Status::Ok();
  return Status::InvalidArgument("\"checkpoint\" must be a checkpoint id, 0 or more, not " + std::to_string(id));
}

// The session stores refuse the same (a store is also used without an Engine).
Status CheckUsageArg(int64_t tokens) {
  if (tokens >= 0) return Status::Ok();
  return Status::InvalidArgument("a usage mark must be a non-negative token count");
}

Result<session::SessionInfo> Engine::Revert(std::string_view id, const session::CheckpointRef& checkpoint) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(Engine::options(), "session revert"));
  STRATA_RETURN_IF_ERROR(CheckCheckpointArg(checkpoint.id));
  return WithSessions(*this, "session revert", [&](session::Sessions& s) -> Result<session::SessionInfo> {
    STRATA_ASSIGN_OR_RETURN(auto held, impl_->HoldForChange(id, "revert"));
    return s.Revert(id, checkpoint);
  });
}

Result<session::SessionInfo> Engine::Fork(std::string_view id, std::string_view new_id,
                                          const std::optional<session::CheckpointRef>& checkpoint) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(Engine::options(), "session fork"));
  if (checkpoint) STRATA_RETURN_IF_ERROR(CheckCheckpointArg(checkpoint->id));
  return WithSessions(*this, "session fork", [&](session::Sessions& s) -> Result<session::SessionInfo> {
    // A whole fork is not taken in the middle of a turn: it copied the turn's request without its reply.
    // (One up to a checkpoint copies what was before it.)
    std::unique_ptr<session::OwnerLocks::Held> held;
    if (!checkpoint) {
      STRATA_ASSIGN_OR_RETURN(held, impl_->HoldForChange(id, "fork it whole (or at a checkpoint)"));
    }
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo made, s.Fork(id, new_id, checkpoint));
    if (!new_id.empty()) {  // As CreateSession does.
      Status cleared = impl_->ClearSessionScope(made.id);
      if (!cleared.ok()) return cleared.WithContext("session " + made.id + " was forked, but its own scope not cleared");
    }
    return made;
  });
}

Result<session::SessionLog> Engine::GetSessionLog(std::string_view id) {
  return WithSessions(*this, "session log", [&](session::Sessions& s) { return s.Log(id); });
}

Status Engine::SetSystemPrompt(std::string_view id, std::string_view prompt) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(Engine::options(), "session system prompt"));
  return WithSessions(*this, "session system prompt", [&](session::Sessions& s) -> Status {
    STRATA_ASSIGN_OR_RETURN(auto held, impl_->HoldForChange(id, "set the system prompt"));
    return s.SetSystemPrompt(id, prompt);
  });
}

Status Engine::RecordUsage(std::string_view id, int64_t tokens) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(Engine::options(), "session usage"));
  STRATA_RETURN_IF_ERROR(CheckUsageArg(tokens));
  return WithSessions(*this, "session usage", [&](session::Sessions& s) -> Status {
    STRATA_ASSIGN_OR_RETURN(auto held, impl_->HoldForChange(id, "record usage"));
    return s.RecordUsage(id, tokens);
  });
}

Result<SessionCompaction> Engine::CompactSession(std::string_view id, std::string_view focus, const Canceller* cancel) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(Engine::options(), "session compact"));
  return Guard("session compact", [&]() -> Result<SessionCompaction> {
    STRATA_ASSIGN_OR_RETURN(session::Sessions * s, sessions());
    // One incarnation throughout: the summary of one session must not replace the log of another made
    // under its id while the model was at work.
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, s->Get(id));
    const std::string ref = session::SessionRef(info);
    STRATA_ASSIGN_OR_RETURN(std::vector<Message> history, s->Messages(ref));
    STRATA_ASSIGN_OR_RETURN(llm::ChatProvider * provider, model());
    window::CompactionOptions options;
    options.instruction = std::string(focus);
    options.counter = &Counter("o200k_base");
    options.generate.cancel = cancel;
    STRATA_ASSIGN_OR_RETURN(window::CompactionResult result,
                            engine_internal::ModelRefusal(window::Compact(*provider, history, options)));
    SessionCompaction out;
    out.summary = result.summary;
    out.compacted = result.compacted;
    out.kept = result.kept;
    out.pruned_fallback = result.pruned_fallback;
    if (!result.llm_error.ok()) out.llm_error = result.llm_error.message();
    out.tokens_before = result.tokens_before;
    out.tokens_after = result.tokens_after;
    // Too little to compact, or a fallback (the model failed) whose pruning changed nothing: the log, its
    // checkpoints and their tags stay as they are (a rewrite put every checkpoint at message 0, and a revert
    // to one then removed the whole conversation).
    if ((result.compacted == 0 && !result.pruned_fallback) || result.messages == history) {
      STRATA_ASSIGN_OR_RETURN(out.session, s->Get(ref));
      return out;
    }
    // Messages appended (or a revert) while the model was summarising would be lost by the replacement:
    // it happens only if the log is still what was summarised, checked under the session's lock.
    STRATA_ASSIGN_OR_RETURN(auto held, impl_->HoldForChange(ref, "compact"));
    Result<session::SessionInfo> replaced = s->Replace(ref, result.messages, std::nullopt, &history);
    if (!replaced.ok() && replaced.status().code() == StatusCode::kFailedPrecondition) {
      return Status::FailedPrecondition("session " + info.id +
                                        " changed while it was being compacted; compact again");
    }
    STRATA_ASSIGN_OR_RETURN(out.session, std::move(replaced));
    return out;
  });
}

int64_t DefaultReplyReserve(int64_t window) { return std::min<int64_t>(4'096, window / 4); }

Status CheckSessionContextOptions(const SessionContextOptions& options) {
  STRATA_RETURN_IF_ERROR(tokenizer::ValidateCounterName(options.encoding));
  if (options.max_context_tokens <= 0) return Status::InvalidArgument("the window must be a positive number of tokens");
  STRATA_RETURN_IF_ERROR(MemoryLimitArg(static_cast<int64_t>(std::min<size_t>(options.memory_limit, INT64_MAX))).status());
  const int64_t reserve = options.reserve_for_reply.value_or(DefaultReplyReserve(options.max_context_tokens));
  if (reserve < 0 || reserve >= options.max_context_tokens) {
    return Status::InvalidArgument("the reply reserve (" + std::to_string(reserve) +
                                   ") must be at least 0 and less than the window (" +
                                   std::to_string(options.max_context_tokens) + ")");
  }
  // Checked before any arithmetic with it (room = window - reserve - reserved overflowed for -2^63).
  if (options.reserved_tokens < 0 || options.reserved_tokens > options.max_context_tokens) {
    return Status::InvalidArgument("the tokens sent beside the messages (" + std::to_string(options.reserved_tokens) +
                                   ") must be at least 0 and at most the window (" +
                                   std::to_string(options.max_context_tokens) + ")");
  }
  return Status::Ok();
}

Result<SessionContext> Engine::AssembleSession(std::string_view id, const SessionContextOptions& options) {
  return Guard("session context", [&]() -> Result<SessionContext> {
    STRATA_RETURN_IF_ERROR(CheckSessionContextOptions(options));
    const int64_t reserve = options.reserve_for_reply.value_or(DefaultReplyReserve(options.max_context_tokens));
    STRATA_ASSIGN_OR_RETURN(session::Sessions * s, sessions());
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, s->Get(id));
    // The log of the session just read (its incarnation): one deleted and made again in between is
    // another's, whose messages would go out with this one's owner's memories.
    STRATA_ASSIGN_OR_RETURN(session::SessionLog log, s->Log(session::SessionRef(info), /*tags=*/false));
    std::vector<Message> history = std::move(log.messages);
    history.insert(history.end(), options.pending.begin(), options.pending.end());

    SessionContext out;
    out.encoding = options.encoding;
    std::string system = options.system_prompt ? *options.system_prompt : log.system_prompt.value_or("");

    // What the owner's memories say about the newest request.
    std::string query = options.query;
    for (auto m = history.rbegin(); query.empty() && m != history.rend(); ++m) {
      if (m->role == Role::kUser && !window::SummaryOf(*m)) query = m->ExtractText(" ");
    }
    const MessageTokenCounter& counter = Counter(options.encoding);
    auto count_one = [&](const Message& m) { return counter.CountMessages({&m, 1}); };
    // Memories go in the system prompt only as far as they leave room for the reply, the pinned messages,
    // the tools and the newest message: recalled whole, they made a turn that fit an invalid budget (400).
    std::string sent_system = system;
    if (options.memory_limit > 0 && !query.empty() && !info.user.empty()) {
      STRATA_ASSIGN_OR_RETURN(memory::Uri under, memory::Uri::Parse("strata://user/" + info.user));
      memory::FindOptions find;
      find.under = under;
      find.limit = options.memory_limit;
      Result<std::vector<memory::Hit>> hits = Find(query, find);
      if (!hits.ok()) {
        out.warnings.push_back("memories were not recalled: " + hits.status().message());
      } else {
        int64_t room = options.max_context_tokens - reserve - options.reserved_tokens;
        for (const Message& m : options.pinned) room -= count_one(m);
        // The newest messages that must go: the turn being sent (all of it), else the newest message with the
        // tool calls its results answer.
        size_t newest = options.pending.empty() ? std::min<size_t>(history.size(), 1) : options.pending.size();
        while (newest < history.size() && history[history.size() - newest].role == Role::kTool) ++newest;
        for (size_t i = history.size() - newest; i < history.size(); ++i) room -= count_one(history[i]);
        const std::string head =
            (system.empty() ? "" : system + "\n\n") + "What you remember about this user (from earlier sessions):";
        // The prompt counted once, each line by itself (counting the whole prompt again for each line was
        // quadratic in a long system prompt).
        const int64_t empty = count_one(Message::System(""));
        int64_t used = count_one(Message::System(head));
        std::string block;
        size_t left_out = 0;
        for (memory::Hit& h : *hits) {
          if (h.is_dir || h.abstract_text.empty()) continue;
          const std::string line = "\n- " + h.abstract_text;
          const int64_t cost = count_one(Message::System(line)) - empty + 1;  // +1: a merge across the joint.
          if (used + cost > room) {
            ++left_out;
            continue;
          }
          used += cost;
          block += line;
          out.memories.push_back(std::move(h));
        }
        if (!block.empty()) sent_system = head + block;
        if (left_out > 0) {
          out.warnings.push_back(std::to_string(left_out) + " recalled " + (left_out == 1 ? "memory" : "memories") +
                                 " left out: no room in the window beside the system prompt, the reply reserve and the "
                                 "newest message");
        }
      }
    }

    window::AssembleOptions ao;
    ao.max_context_tokens = options.max_context_tokens;
    ao.reserve_for_reply = reserve;
    ao.reserved_tokens = options.reserved_tokens;
    ao.system_prompt = sent_system;
    ao.pinned = options.pinned;
    std::span<const Message> rest = history;
    // A compaction's summary (the log's first message) is the assembler's summary, not a pinned message:
    // one that does not fit is left out with summary_over_budget, as docs/window.md says (pinned, it made
    // the whole request an invalid budget). It is sent as the log holds it.
    const bool has_summary = !history.empty() && window::SummaryOf(history[0]).has_value();
    if (has_summary) {
      ao.summary = history[0].ExtractText();
      ao.summary_role = history[0].role;
      ao.summary_tokens = count_one(history[0]);
      ao.first_index = 1;
      rest = rest.subspan(1);
    }
    // After a commit the live log starts afresh: the newest archive's summary (phase 2's) is the window's
    // summary until a compaction writes one, so the model does not lose the conversation at each commit
    // (by policy every 40 turns, 24k tokens or 10 idle minutes). An archive phase 2 has not summarised yet
    // gives way to the one before it.
    std::optional<Message> archived_summary;
    if (!has_summary && info.stats.commits > 0) {
      const std::string ref = session::SessionRef(info);  // The incarnation read above, as for the log.
      Result<std::vector<session::ArchiveInfo>> archives = s->Archives(ref);
      for (size_t i = archives.ok() ? archives->size() : 0, tried = 0; i-- > 0 && tried < 3; ++tried) {
        Result<std::optional<std::string>> text = s->ReadArchiveFile(ref, (*archives)[i].number, "summary.md");
        if (!text.ok() || !*text || StripAsciiWhitespace(**text).empty()) continue;
        archived_summary = window::MakeSummaryMessage(std::string(StripAsciiWhitespace(**text)));
        ao.summary = archived_summary->ExtractText();
        ao.summary_role = archived_summary->role;
        ao.summary_tokens = count_one(*archived_summary);
        break;
      }
    }
    window::HistoryIndex index(&counter);
    index.Sync(rest);
    STRATA_ASSIGN_OR_RETURN(window::Assembly a, window::Assemble(rest, index, ao, counter));

    if (!system.empty()) out.tokens.system = count_one(Message::System(system));
    if (!sent_system.empty()) out.tokens.memories = count_one(Message::System(sent_system)) - out.tokens.system;
    for (const Message& m : options.pinned) out.tokens.pinned += count_one(m);
    if (a.summary_included) out.tokens.summary = a.summary_tokens;
    out.tokens.history = a.history_tokens;
    out.tokens.reserved = options.reserved_tokens;
    out.tokens.reply = reserve;
    out.window = options.max_context_tokens;
    out.budget = a.budget;
    out.total_tokens = a.total_tokens;
    out.summary_included = a.summary_included;

    out.message_tokens.assign(history.size(), 0);
    out.included.assign(history.size(), false);
    size_t offset = has_summary ? 1 : 0;
    if (has_summary) {
      out.message_tokens[0] = a.summary_tokens;
      out.included[0] = a.summary_included;
    }
    for (size_t i = 0; i < rest.size(); ++i) out.message_tokens[i + offset] = index.tokens(i);
    for (size_t i : a.included) out.included[i + offset] = true;
    for (const window::AssemblyWarning& w : a.warnings) out.warnings.push_back(w.message);
    // Counted over the log as `messages` lists it, the summary too (summary_over_budget says when it alone
    // was left out).
    if (a.included.size() < rest.size()) {
      const size_t kept = static_cast<size_t>(std::count(out.included.begin(), out.included.end(), true));
      out.warnings.push_back(std::to_string(history.size() - kept) + " of " + std::to_string(history.size()) +
                             " messages left out: the newest that fit the " + std::to_string(a.budget) +
                             "-token budget (after the system prompt, memories and summary) are sent, each tool call "
                             "with its results or not at all");
    }
    if (!rest.empty() && (a.included.empty() || a.included.back() != rest.size() - 1)) {
      // The assembler says why when the newest was left out for what it is (a tool result that answers no
      // call, calls without their results) or for its size: the budget is named only when nothing else is
      // (the system prompt and memories took it all). It blamed the budget for an orphan result of 26 tokens.
      const bool explained = std::any_of(a.warnings.begin(), a.warnings.end(), [&](const window::AssemblyWarning& w) {
        using Code = window::AssemblyWarning::Code;
        return (w.code == Code::kNewestOverBudget || w.code == Code::kOrphanToolResult ||
                w.code == Code::kIncompleteToolGroup) &&
               w.index && (a.included.empty() || *w.index > a.included.back());
      });
      if (!explained) {
        out.warnings.push_back("the newest message does not fit in the " + std::to_string(a.budget) +
                               "-token budget after the system prompt, memories and summary");
      }
    }
    out.system_prompt = std::move(sent_system);
    out.messages = window::AssembledMessages(rest, a, ao);
    if (a.summary_included) {  // As the log (or the archive's summary message) holds it.
      out.messages[ao.pinned.size()] = archived_summary ? *archived_summary : history[0];
    }
    out.history = std::move(history);  // `rest` points into it: last.
    return out;
  });
}

}  // namespace strata
