// Engine::BeginTurn and Turn (engine/turn.h): the memory-managed turn the model endpoints serve.
#include "strata/engine/turn.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <span>

#include "engine_impl.h"
#include "guard.h"
#include "strata/engine/engine.h"
#include "strata/json/json_writer.h"
#include "strata/tokenizer/registry.h"
#include "strata/util/clock.h"
#include "strata/window/compaction.h"

namespace strata {

using engine_internal::Guard;

namespace {

// A tool call's arguments as JSON text compared by value ({"x": [1, 2]} is {"x":[1,2]}), else as written.
bool SameArguments(const std::optional<std::string>& a, const std::optional<std::string>& b) {
  const std::string& x = a ? *a : std::string();
  const std::string& y = b ? *b : std::string();
  if (x == y) return true;
  nlohmann::json jx = nlohmann::json::parse(x, nullptr, false), jy = nlohmann::json::parse(y, nullptr, false);
  return !jx.is_discarded() && !jy.is_discarded() && jx == jy;
}

// Whether `sent` (a message a client sent back) is `logged` (as the session holds it): what a client echoes
// of a reply differs in form (no thinking, arguments spaced otherwise, content null or ""), not in its words,
// calls or the call it answers.
bool SameMessage(const Message& sent, const Message& logged) {
  if (sent.role != logged.role || sent.ExtractText() != logged.ExtractText() ||
      sent.tool_call_id.value_or("") != logged.tool_call_id.value_or("")) {
    return false;
  }
  // The same words with another image or file are another message.
  auto media = [](const Message& m) {
    std::vector<std::pair<MediaKind, std::string_view>> out;
    for (const ContentPart& part : m.content) {
      if (const auto* p = std::get_if<MediaPart>(&part)) out.emplace_back(p->kind, p->url);
    }
    return out;
  };
  if (media(sent) != media(logged)) return false;
  const size_t calls = sent.tool_calls ? sent.tool_calls->size() : 0;
  if (calls != (logged.tool_calls ? logged.tool_calls->size() : 0)) return false;
  for (size_t i = 0; i < calls; ++i) {
    const ToolCall& a = (*sent.tool_calls)[i];
    const ToolCall& b = (*logged.tool_calls)[i];
    if (a.id != b.id || a.function.name != b.function.name || !SameArguments(a.function.arguments, b.function.arguments)) {
      return false;
    }
  }
  return true;
}

// How many of the turn's first messages the session holds already: a client that sends the whole
// conversation every time (the SDKs' tool runners do) repeats the session's messages before its new ones.
// `anchor` is what must be repeated, whole and in order, just before the new ones: the session's live
// messages (after a compaction's summary, the ones after it), or, when a commit left none, the newest
// archive's last messages. Older messages may come before it only when something (a summary, an archive)
// stands for them; otherwise the anchor must open the turn. 0 when the turn does not repeat it.
size_t RepeatedPrefix(std::span<const Message> turn, std::span<const Message> anchor, bool older_allowed) {
  if (anchor.empty() || turn.size() < anchor.size()) return 0;
  auto repeats_at = [&](size_t start) {
    for (size_t i = 0; i < anchor.size(); ++i) {
      if (!SameMessage(turn[start + i], anchor[i])) return false;
    }
    return true;
  };
  if (!older_allowed) return repeats_at(0) ? anchor.size() : 0;
  for (size_t start = turn.size() - anchor.size() + 1; start-- > 0;) {
    if (repeats_at(start)) return start + anchor.size();
  }
  return 0;
}

}  // namespace

Result<std::unique_ptr<Turn>> Engine::BeginTurn(std::string_view session, TurnRequest request) {
  return Guard("turn", [&]() -> Result<std::unique_ptr<Turn>> {
    STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "a turn"));
    STRATA_RETURN_IF_ERROR(session::ValidateSessionId(session));
    // A system message among the new ones is the turn's system prompt, never a message of the log: every
    // front end's turn alike (the model endpoints split the request's before; Python's was logged, archived
    // and sent again as history).
    std::vector<Message> conversational;
    for (Message& m : request.turn) {
      if (m.role != Role::kSystem) {
        conversational.push_back(std::move(m));
        continue;
      }
      if (!request.system.empty()) request.system += "\n\n";
      request.system += m.ExtractText("\n");
    }
    request.turn = std::move(conversational);
    if (request.turn.empty()) return Status::InvalidArgument("a turn needs at least one new message");
    STRATA_RETURN_IF_ERROR(tokenizer::ValidateCounterName(request.encoding));
    std::string id(session);
    // Another user's session is not there, busy or not: checked before the lock, so that a user can neither
    // learn that it is busy nor hold it (and again below, once held).
    if (!request.reach.everything()) {
      // A user named for the turn (X-Strata-User, Python's user=) that is not the caller's own: refused as the
      // session routes refuse it, not ignored (the session was made for the caller's user instead).
      if (!request.user.empty() && request.user != request.reach.user) {
        return Status::PermissionDenied("this caller makes and turns sessions for user " + request.reach.user +
                                        " only, not for user " + json::QuoteForError(request.user, 64));
      }
      if (Result<session::SessionInfo> seen = GetSession(id); seen.ok() && seen->user != request.reach.user) {
        return session::NoSuchSession(id);
      }
    }
    // One turn at a time per session, in every instance; released by the Turn (Finish, Release or its
    // destructor).
    const std::string busy = "session " + id + " already has a turn in progress (here or in another instance) or "
                             "is being committed; send the next turn when its reply has ended";
    STRATA_ASSIGN_OR_RETURN(auto held, impl_->HoldSession(id, busy));
    STRATA_RETURN_IF_ERROR(impl_->turns.Begin(id, std::move(held)));
    auto turn = std::unique_ptr<Turn>(new Turn());
    turn->engine_ = this;
    turn->session_ = id;
    turn->encoding_ = request.encoding;
    Result<session::SessionInfo> info = GetSession(id);
    if (!info.ok() && info.status().code() == StatusCode::kNotFound && request.create) {
      // An admin that names neither a user nor an agent turns as the default user (CreateSession).
      info = CreateSession(request.reach.everything() ? request.user : request.reach.user, request.agent, id);
    }
    if (!info.ok()) return info.status();
    if (!request.reach.everything() && info->user != request.reach.user) return session::NoSuchSession(id);
    turn->ref_ = session::SessionRef(*info);
    STRATA_RETURN_IF_ERROR(CheckRefs(request.reach, request.turn));
    STRATA_ASSIGN_OR_RETURN(session::Sessions * sessions, impl_->Sessions());
    STRATA_ASSIGN_OR_RETURN(std::vector<Message> logged, sessions->Messages(turn->ref_));
    // The whole conversation sent again (as the SDKs' tool runners and most chat clients do): only what
    // follows the session's own messages is new. It was all logged and sent upstream again.
    const bool summarised = !logged.empty() && window::SummaryOf(logged.front()).has_value();
    std::span<const Message> live(logged);
    if (summarised) live = live.subspan(1);
    // A system message the log holds (an append's, or one an older begin_turn logged) is never among what a
    // client sends back as the conversation (a turn's are its system prompt): the anchor goes without it.
    auto is_system = [](const Message& m) { return m.role == Role::kSystem; };
    auto without_system = [&](std::span<const Message> from) {
      std::vector<Message> out;
      std::remove_copy_if(from.begin(), from.end(), std::back_inserter(out), is_system);
      return out;
    };
    std::span<const Message> said = live;
    std::vector<Message> said_storage;  // Copied only when the log holds a system message.
    if (std::any_of(live.begin(), live.end(), is_system)) {
      said_storage = without_system(live);
      said = said_storage;
    }
    std::vector<Message> archived_tail;  // After a commit left no live message: the newest archive's last.
    if (said.empty() && info->stats.commits > 0 && request.turn.size() > 2) {
      Result<std::vector<session::ArchiveInfo>> archives = sessions->Archives(turn->ref_);
      if (archives.ok() && !archives->empty()) {
        Result<std::vector<Message>> last = sessions->ArchiveMessages(turn->ref_, archives->back().number);
        if (last.ok()) {
          std::vector<Message> spoken = without_system(*last);
          if (spoken.size() >= 2) {
            archived_tail.assign(spoken.end() - static_cast<std::ptrdiff_t>(std::min<size_t>(spoken.size(), 4)),
                                 spoken.end());
          }
        }
      }
    }
    const std::span<const Message> anchor = said.empty() ? std::span<const Message>(archived_tail) : said;
    const bool older_allowed = summarised || info->stats.commits > 0;
    if (const size_t repeated = RepeatedPrefix(request.turn, anchor, older_allowed); repeated > 0) {
      if (repeated < request.turn.size()) {
        request.turn.erase(request.turn.begin(), request.turn.begin() + static_cast<std::ptrdiff_t>(repeated));
      } else if (!said.empty()) {
        // Nothing new: the same turn again (its reply never came, or a prefill to go on from), as the session
        // holds it, so that below it is neither logged nor sent twice.
        request.turn.assign(live.begin(), live.end());
      } else {
        return Status::InvalidArgument("the turn repeats the conversation the session committed already and adds "
                                       "no message after it");
      }
    }
    // A tool result must answer a call the session (or the turn, before it) holds: the window would leave it
    // out, and the turn was refused as if it did not fit.
    for (size_t i = 0; i < request.turn.size(); ++i) {
      const Message& m = request.turn[i];
      if (m.role != strata::Role::kTool) continue;
      const std::string call = m.tool_call_id.value_or("");
      auto answers = [&](const Message& earlier) {
        return earlier.role == strata::Role::kAssistant && earlier.tool_calls &&
               std::any_of(earlier.tool_calls->begin(), earlier.tool_calls->end(),
                           [&](const ToolCall& c) { return c.id == call; });
      };
      if (std::none_of(logged.begin(), logged.end(), answers) &&
          std::none_of(request.turn.begin(), request.turn.begin() + static_cast<std::ptrdiff_t>(i), answers)) {
        return Status::InvalidArgument("the turn's message " + std::to_string(i) + " is a tool result for " +
                                       json::QuoteForError(call, 64) +
                                       ", a call that no assistant message of the session or the turn made");
      }
    }
    // The same turn again, after one the model took but whose reply never came (the stream broke, the
    // client retried): the session ends with it already, and it is not logged or sent twice. A session that
    // ends with a reply has had its answer, unless the turn itself ends with an assistant's words (a
    // prefill the model was to go on from).
    const bool logged_already =
        !request.turn.empty() && logged.size() >= request.turn.size() &&
        (logged.back().role != strata::Role::kAssistant || request.turn.back().role == strata::Role::kAssistant) &&
        std::equal(request.turn.begin(), request.turn.end(), logged.end() - static_cast<std::ptrdiff_t>(request.turn.size()));
    SessionContextOptions o;
    o.max_context_tokens = request.max_context_tokens;
    o.reserve_for_reply = request.reserve_for_reply;
    o.reserved_tokens = request.reserved_tokens;
    if (!request.system.empty()) o.system_prompt = request.system;
    if (!logged_already) o.pending = request.turn;
    o.memory_limit = request.memory_limit;
    o.encoding = request.encoding;
    STRATA_ASSIGN_OR_RETURN(SessionContext ctx, AssembleSession(turn->ref_, o));
    if (!ctx.history.empty() && !ctx.included.back()) {
      return Status::InvalidArgument("the new turn does not fit in the model's window (" + std::to_string(ctx.budget) +
                                     " tokens after the reply reserve, with " + std::to_string(ctx.total_tokens) +
                                     " taken by the system prompt and memories)");
    }
    for (size_t i = 0; i < ctx.history.size(); ++i) {
      turn->tokens_ += ctx.message_tokens[i];
      turn->turns_ += ctx.history[i].role == strata::Role::kUser ? 1 : 0;
    }
    turn->context_ = std::make_unique<SessionContext>(std::move(ctx));
    turn->turn_ = std::move(request.turn);
    turn->accepted_ = logged_already;
    return turn;
  });
}

Turn::~Turn() { Release(); }

// The turn's own writes go straight to its session: it holds the session's lock, which Engine::AddMessages
// would wait for.
Status Turn::AppendOwn(std::span<const Message> messages) {
  return engine_internal::Guard("turn append", [&]() -> Status {
    STRATA_ASSIGN_OR_RETURN(session::Sessions * s, engine_->impl_->Sessions());
    return s->Add(ref_, messages);
  });
}

Status Turn::Accept() {
  if (accepted_) return Status::Ok();
  STRATA_RETURN_IF_ERROR(AppendOwn(turn_));
  accepted_ = true;
  return Status::Ok();
}

Result<TurnOutcome> Turn::Finish(const Message& reply, std::optional<TokenUsage> usage) {
  if (released_) return Status::FailedPrecondition("the turn of session " + session_ + " has ended already");
  Status accepted = Accept();
  if (!accepted.ok()) {
    Release();
    return accepted;
  }
  Status added = AppendOwn(std::vector<Message>{reply});
  if (!added.ok()) {
    Release();
    return added;
  }
  if (usage) {
    (void)engine_internal::Guard("turn usage", [&]() -> Status {
      STRATA_ASSIGN_OR_RETURN(session::Sessions * s, engine_->impl_->Sessions());
      return s->RecordUsage(ref_, usage->total());
    });
  }
  TurnOutcome out;
  out.uncommitted_tokens = tokens_ + tokenizer::CounterFor(encoding_).CountMessages({&reply, 1});
  out.uncommitted_turns = turns_;
  const CommitPolicy& policy = engine_->options().commit_policy;
  // A reply that calls tools opens a group its results close in the next turn: committing now would archive
  // the calls and orphan the results. The commit waits for a reply without calls.
  bool calls = reply.tool_calls && !reply.tool_calls->empty();
  bool due = !calls && ((policy.after_tokens > 0 && out.uncommitted_tokens >= policy.after_tokens) ||
                        (policy.after_turns > 0 && out.uncommitted_turns >= policy.after_turns));
  released_ = true;
  engine_->impl_->turns.End(session_, /*idle=*/!calls && !due && policy.after_idle.count() > 0, ref_);
  if (due) {
    Result<CommitOutcome> committed = engine_->Commit(ref_, {.wait = false});
    if (committed.ok()) {
      out.committed = true;
      out.job_id = committed->ticket.job_id;
    }
  }
  return out;
}

void Turn::Release() {
  if (released_ || engine_ == nullptr) return;
  released_ = true;
  engine_->impl_->turns.End(session_, /*idle=*/false);
}

namespace {

// How many quiet periods a session whose log ends with unanswered tool calls waits for their results before
// an idle commit takes the group for abandoned.
constexpr int64_t kOpenGroupPatience = 6;

// Whether the log's newest assistant message calls tools of which some have no result after it.
bool EndsWithAnOpenToolGroup(std::span<const Message> messages) {
  std::vector<std::string_view> answered;
  for (size_t i = messages.size(); i-- > 0;) {
    const Message& m = messages[i];
    if (m.role == strata::Role::kTool) {
      if (m.tool_call_id) answered.push_back(*m.tool_call_id);
      continue;
    }
    if (m.role != strata::Role::kAssistant || !m.tool_calls) return false;
    return std::any_of(m.tool_calls->begin(), m.tool_calls->end(), [&](const ToolCall& call) {
      return std::find(answered.begin(), answered.end(), call.id) == answered.end();
    });
  }
  return false;
}

}  // namespace

Result<int> Engine::CommitIdleSessions() {
  return Guard("commit idle sessions", [&]() -> Result<int> {
    const CommitPolicy& policy = impl_->options.commit_policy;
    if (policy.after_idle.count() <= 0 || impl_->options.read_only) return 0;
    int committed = 0;
    STRATA_ASSIGN_OR_RETURN(session::Sessions * sessions, impl_->Sessions());
    for (const std::string& ref : impl_->turns.TakeIdle(policy.after_idle)) {
      // The session is held from the look at its last change to the end of phase 1: an append or another
      // instance's turn that came between them was archived with the quiet part, and the live log the
      // client reads next lacked the message it had just added. Held by another (a change, a turn, a
      // commit), it is not idle now: looked at again in a while.
      Result<std::unique_ptr<session::OwnerLocks::Held>> held =
          impl_->HoldSession(ref, "busy", std::chrono::milliseconds(0));
      if (!held.ok()) {
        if (Result<session::ParsedSessionRef> parsed = session::ParseSessionRef(ref); parsed.ok()) {
          impl_->turns.Idle(parsed->id, ref, engine_internal::TurnBook::Clock::now());
        }
        continue;
      }
      // Quiet since this process's last turn of it, but another instance may have served a turn since, or
      // someone appended: the session's own last change decides, and a session changed since is looked at
      // again when it has been quiet long enough. Asked by its incarnation: one deleted and made again
      // under its id since is another session, and not this one's to commit (kNotFound).
      Result<session::SessionInfo> info = GetSession(ref);
      if (!info.ok()) {
        // Gone is gone; a backend that failed for a moment is asked again in a while.
        if (info.status().code() != StatusCode::kNotFound) {
          Result<session::ParsedSessionRef> parsed = session::ParseSessionRef(ref);
          if (parsed.ok()) impl_->turns.Idle(parsed->id, ref, engine_internal::TurnBook::Clock::now());
        }
        continue;
      }
      const int64_t quiet_ms = std::max<int64_t>(0, SystemClock()->WallMicros() / 1000 - info->updated_ms);
      if (quiet_ms < policy.after_idle.count()) {
        impl_->turns.Idle(info->id, ref, engine_internal::TurnBook::Clock::now() - std::chrono::milliseconds(quiet_ms));
        continue;
      }
      // A reply whose tool calls are not all answered yet (another instance's turn, its tools still at work):
      // committing would archive the calls and orphan the results to come, as Turn::Finish knows for its own
      // turns. Looked at again after another quiet period; a group still open after kOpenGroupPatience quiet
      // periods is taken for abandoned (its client gone) and committed as it is.
      Result<std::vector<Message>> messages = SessionMessages(ref);
      if (!messages.ok()) {  // Asked again in a while, as for the session above.
        impl_->turns.Idle(info->id, ref, engine_internal::TurnBook::Clock::now());
        continue;
      }
      if (EndsWithAnOpenToolGroup(*messages) && quiet_ms < kOpenGroupPatience * policy.after_idle.count()) {
        impl_->turns.Idle(info->id, ref, engine_internal::TurnBook::Clock::now());
        continue;
      }
      // Phase 1 of that incarnation, as Commit runs it, under the hold taken above.
      if (sessions->Commit(ref).ok()) ++committed;
    }
    return committed;
  });
}

}  // namespace strata
