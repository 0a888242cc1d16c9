// A session served turn by turn, with its memory managed: what the OpenAI- and Anthropic-compatible model
// endpoints of `strata serve` do for a client that sends only its new turn, available to any program in
// process (Engine::BeginTurn).
//
//   TurnRequest request{.turn = {Message::User("And the second one?")}, .max_context_tokens = 128'000};
//   auto turn = engine->BeginTurn("chat-1", std::move(request));     // one turn per session at a time
//   const SessionContext& ctx = (*turn)->context();                  // what to send, within the window:
//   ... send ctx.system_prompt and ctx.messages to any model ...     //   memories recalled, tool groups whole
//   (*turn)->Accept();                                               // the model took it: the turn is logged
//   auto outcome = (*turn)->Finish(reply, usage);                    // the reply is logged, usage recorded,
//                                                                    //   the session committed by policy
//
// A turn the model refused (its request failed) is never logged, so it can be sent again. A reply that
// calls tools opens a group its results close in the next turn, so no commit happens until a reply without
// calls. Sessions that went quiet after a turn are committed by Engine::CommitIdleSessions, which a
// server's worker calls now and then.
//
// Thread safety: a Turn is used by one thread at a time (it may move between threads, as a streamed reply
// does); turns of different sessions run in parallel.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "strata/engine/reach.h"
#include "strata/message/message.h"
#include "strata/util/status.h"

namespace strata {

class Engine;
struct SessionContext;

// When a session served turn by turn is committed into long-term memory (EngineOptions::commit_policy):
// once its uncommitted messages reach `after_tokens` tokens or `after_turns` user turns, or once it has been
// idle `after_idle` after a turn. 0 turns a measure off.
struct CommitPolicy {
  int64_t after_tokens = 24'000;
  int64_t after_turns = 40;
  std::chrono::milliseconds after_idle{std::chrono::minutes(10)};
};

struct TurnRequest {
  // The new messages: a user message, or tool results and the next question. A system message among them
  // is added to `system`, never logged.
  std::vector<Message> turn;
  std::string system;         // The system prompt to send; "" = the session's own (its log's record).
  int64_t max_context_tokens = 128'000;  // The model's window.
  std::optional<int64_t> reserve_for_reply;  // Kept free for the answer (unset: DefaultReplyReserve).
  int64_t reserved_tokens = 0;           // Sent beside the messages (the tools' schemas and the like).
  size_t memory_limit = 5;  // Memories recalled into the system prompt (0: none; at most SessionContextOptions::kMaxMemoryLimit).
  std::string encoding = "o200k_base";   // tokenizer/registry.h's names.
  // Who asks: another user's session is not found (as if it did not exist), and a session this turn
  // creates is theirs.
  Reach reach;
  bool create = true;  // A session that does not exist yet is created, owned by `user` (a user reach's own).
  std::string user, agent;  // An admin's turn that names neither: the user "default" (phase 2 needs an owner).
};

struct TurnOutcome {
  bool committed = false;       // Phase 1 of a commit ran (the policy was met); phase 2 is queued.
  int64_t job_id = 0;           // Its phase-2 job.
  int64_t uncommitted_tokens = 0;  // The session's uncommitted messages, reply included.
  int64_t uncommitted_turns = 0;
};

class Turn {
 public:
  ~Turn();  // Ends the turn (Release) if it was not finished.
  Turn(const Turn&) = delete;
  Turn& operator=(const Turn&) = delete;

  const std::string& session() const { return session_; }
  // What to send: the system prompt with recalled memories, and the messages within the window (the new
  // turn last), with tokens per section.
  const SessionContext& context() const { return *context_; }

  // The model accepted the request: the new messages join the session (once; later calls do nothing). A
  // turn that repeats the session's last, unanswered messages (a retry after a reply that never came) has
  // them logged already: they are neither logged nor sent twice.
  Status Accept();
  // The model's reply: appended (after the turn, which Accept appends if it has not), its usage recorded as
  // the session's context size, and the session committed when the policy says so. Ends the turn.
  Result<TurnOutcome> Finish(const Message& reply, std::optional<TokenUsage> usage = std::nullopt);
  // Ends the turn without a reply (the model refused, the client went away): the session is free for the
  // next turn. Idempotent.
  void Release();

 private:
  friend class Engine;
  Turn() = default;
  Status AppendOwn(std::span<const Message> messages);
  Engine* engine_ = nullptr;
  std::string session_;
  // The session's incarnation ("id@incarnation"): what the turn appends to and commits. A session deleted
  // and created again meanwhile (another process, another user) is not this one, and refuses them.
  std::string ref_;
  std::unique_ptr<SessionContext> context_;
  std::vector<Message> turn_;
  std::string encoding_;
  int64_t tokens_ = 0;  // The uncommitted messages' tokens with the turn (not yet the reply).
  int64_t turns_ = 0;
  bool accepted_ = false;
  bool released_ = false;
};

}  // namespace strata
