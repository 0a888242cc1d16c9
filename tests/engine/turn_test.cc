// Engine::BeginTurn at library level: what the OpenAI- and Anthropic-compatible endpoints of `strata serve`
// do for a client that sends only its new turn, driven here without HTTP — one turn per session, the turn
// logged only once the model took it, memories recalled into the system prompt, the window kept, tool-call
// groups never split by a commit, the commit policy (tokens, turns, idle), and who may reach which session.
#include "strata/engine/turn.h"

#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <thread>

#include "strata/engine/engine.h"
#include "pg_test_util.h"
#include "strata/session/session.h"
#include "test_util.h"

namespace strata {
namespace {

Message CallingReply(const std::string& id) {
  Message m = Message::Assistant("");
  ToolCall call;
  call.id = id;
  call.function.name = "find";
  call.function.arguments = R"({"query": "seat"})";
  m.tool_calls = std::vector<ToolCall>{call};
  return m;
}

// About `words` tokens of text.
std::string Words(int words) {
  std::string out;
  for (int i = 0; i < words; ++i) out += i % 2 == 0 ? " alpha" : " beta";
  return out;
}

class TurnTest : public ::testing::Test {
 protected:
  // A whole turn of session `id` ("hi", "hello"), ended.
  void Greet(const std::string& id) {
    auto turn = engine_->BeginTurn(id, Ask("hi"));
    ASSERT_OK(turn);
    ASSERT_OK((*turn)->Finish(Message::Assistant("hello")));
  }
  void Open(CommitPolicy policy) {
    engine_.reset();
    auto e = Engine::Open({.data_dir = dir_.path(), .commit_policy = policy});
    ASSERT_OK(e);
    engine_ = std::move(*e);
  }
  void SetUp() override { Open({.after_tokens = 0, .after_turns = 0, .after_idle = std::chrono::milliseconds(0)}); }

  TurnRequest Ask(const std::string& text, const std::string& user = "alice") {
    TurnRequest r;
    r.turn = {Message::User(text)};
    r.reach = Reach::User(user);
    r.max_context_tokens = 8'000;
    r.reserve_for_reply = 1'000;
    return r;
  }

  std::vector<Message> Log(const std::string& session) {
    auto messages = engine_->SessionMessages(session);
    EXPECT_OK(messages);
    return messages.ok() ? *messages : std::vector<Message>{};
  }

  testing::TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(TurnTest, TheTurnIsLoggedOnlyOnceTheModelTookIt) {
  {
    auto turn = engine_->BeginTurn("chat-1", Ask("Which seat do I like?"));
    ASSERT_OK(turn);
    // What to send ends with the new turn; the session exists, owned by the caller, and logs nothing yet.
    const SessionContext& ctx = (*turn)->context();
    ASSERT_FALSE(ctx.messages.empty());
    EXPECT_EQ(ctx.messages.back().ExtractText(""), "Which seat do I like?");
    auto info = engine_->GetSession("chat-1");
    ASSERT_OK(info);
    EXPECT_EQ(info->user, "alice");
    EXPECT_TRUE(Log("chat-1").empty());
    // The model refused (the turn goes out of scope unfinished): nothing is logged.
  }
  EXPECT_TRUE(Log("chat-1").empty());

  auto turn = engine_->BeginTurn("chat-1", Ask("Which seat do I like?"));
  ASSERT_OK(turn);
  ASSERT_OK((*turn)->Accept());
  ASSERT_OK((*turn)->Accept());  // Once only.
  ASSERT_EQ(Log("chat-1").size(), 1u);
  TokenUsage usage;
  usage.input_other = 1'200;
  usage.output = 34;
  auto outcome = (*turn)->Finish(Message::Assistant("The aisle."), usage);
  ASSERT_OK(outcome);
  EXPECT_FALSE(outcome->committed);
  std::vector<Message> log = Log("chat-1");
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].role, Role::kUser);
  EXPECT_EQ(log[1].ExtractText(""), "The aisle.");
  auto full = engine_->GetSessionLog("chat-1");
  ASSERT_OK(full);
  EXPECT_EQ(full->usage_tokens, 1'234);
  // A finished turn cannot be finished again.
  EXPECT_EQ((*turn)->Finish(Message::Assistant("again")).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Log("chat-1").size(), 2u);

  // The next turn sees the history before it.
  auto next = engine_->BeginTurn("chat-1", Ask("And on short flights?"));
  ASSERT_OK(next);
  ASSERT_EQ((*next)->context().messages.size(), 3u);
  EXPECT_EQ((*next)->context().messages[1].ExtractText(""), "The aisle.");
}

TEST_F(TurnTest, OneTurnPerSessionAtATime) {
  auto first = engine_->BeginTurn("chat-1", Ask("one"));
  ASSERT_OK(first);
  auto second = engine_->BeginTurn("chat-1", Ask("two"));
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("already has a turn in progress"), std::string::npos);
  // Another session is free.
  EXPECT_OK(engine_->BeginTurn("chat-2", Ask("three")));
  // A turn that failed to begin leaves its session free.
  EXPECT_FALSE(engine_->BeginTurn("chat-3", Ask(Words(10'000))).ok());
  EXPECT_OK(engine_->BeginTurn("chat-3", Ask("short")));
  (*first)->Release();
  (*first)->Release();  // Idempotent.
  EXPECT_OK(engine_->BeginTurn("chat-1", Ask("two")));
}

// A system message among a turn's new messages is the turn's system prompt, never a message of the log, on
// every front end: Python's begin_turn logged it (archived with the session and sent again as history),
// where the model endpoints had split it off.
TEST_F(TurnTest, ASystemMessageInTheTurnIsItsSystemPromptNotLogged) {
  TurnRequest request = Ask("hello");
  request.turn.insert(request.turn.begin(), Message::System("You are terse."));
  auto turn = engine_->BeginTurn("chat-sys", request);
  ASSERT_OK(turn);
  EXPECT_EQ((*turn)->context().system_prompt.rfind("You are terse.", 0), 0u) << (*turn)->context().system_prompt;
  ASSERT_OK((*turn)->Finish(Message::Assistant("Hi.")));
  std::vector<Message> log = Log("chat-sys");
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].role, Role::kUser);
  EXPECT_EQ(log[1].role, Role::kAssistant);
  // A session whose log holds a system message (an append's, or an older build's turn) is still matched
  // when the client sends the whole conversation again: its history was logged again whole.
  ASSERT_OK(engine_->AddMessages("chat-sys", std::vector{Message::System("Logged as a message.")}));
  ASSERT_OK(engine_->AddMessages("chat-sys", std::vector{Message::User("again"), Message::Assistant("Yes.")}));
  TurnRequest whole = Ask("hello");
  whole.turn = {Message::System("You are terse."), Message::User("hello"), Message::Assistant("Hi."),
                Message::User("again"), Message::Assistant("Yes."), Message::User("and now?")};
  auto resent = engine_->BeginTurn("chat-sys", whole);
  ASSERT_OK(resent);
  ASSERT_OK((*resent)->Finish(Message::Assistant("Now.")));
  log = Log("chat-sys");
  ASSERT_EQ(log.size(), 7u) << "only the new question and its reply were added";
  EXPECT_EQ(log[5].ExtractText(""), "and now?");
  // A turn of system messages alone has no new message.
  TurnRequest only = Ask("x");
  only.turn = {Message::System("Only this.")};
  EXPECT_EQ(engine_->BeginTurn("chat-sys", only).status().code(), StatusCode::kInvalidArgument);
}

// A session is not deleted from under its turn: the delete was taken, and the turn's reply then lost (its
// client over HTTP was told the reply had been kept). Forced, it goes, and the turn finds it gone.
TEST_F(TurnTest, ASessionIsNotDeletedOrForkedWholeInTheMiddleOfATurn) {
  auto turn = engine_->BeginTurn("chat-1", Ask("one"));
  ASSERT_OK(turn);
  ASSERT_OK((*turn)->Accept());
  Status refused = engine_->DeleteSession("chat-1", /*force=*/false);
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("has a turn or a commit in progress; delete it (or force it)"), std::string::npos)
      << refused.message();
  // Nor forked whole, which copied the request without its reply.
  EXPECT_EQ(engine_->Fork("chat-1", "copy", std::nullopt).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_OK((*turn)->Finish(Message::Assistant("two")));
  EXPECT_EQ(Log("chat-1").size(), 2u);
  ASSERT_OK(engine_->Fork("chat-1", "copy", std::nullopt));
  EXPECT_EQ(Log("copy").size(), 2u);

  auto next = engine_->BeginTurn("chat-1", Ask("three"));
  ASSERT_OK(next);
  ASSERT_OK((*next)->Accept());
  ASSERT_OK(engine_->DeleteSession("chat-1", /*force=*/true));
  EXPECT_EQ((*next)->Finish(Message::Assistant("four")).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->GetSession("chat-1").status().code(), StatusCode::kNotFound);
}

// Two instances on the same data (two `strata serve` on one directory or one PostgreSQL database): a turn
// in one makes the other refuse a turn and a commit of that session until it ends, and a commit in the
// middle of a turn is refused in its own instance too. (Each instance checked only its own turns: two
// turns interleaved as U1 U2 A1 A2, and an idle commit in one archived the other's request and left its
// reply alone in the live log.)
void ExpectOneTurnOrCommitOfASessionAtATime(Engine& a, Engine& b) {
  auto ask = [](const std::string& text) {
    TurnRequest r;
    r.turn = {Message::User(text)};
    r.reach = Reach::User("alice");
    r.max_context_tokens = 8'000;
    r.reserve_for_reply = 1'000;
    return r;
  };
  auto first = a.BeginTurn("shared", ask("U1 via A"));
  ASSERT_OK(first);
  ASSERT_OK((*first)->Accept());  // The request is logged while the model answers.
  auto second = b.BeginTurn("shared", ask("U2 via B"));
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("already has a turn in progress"), std::string::npos)
      << second.status().ToString();
  for (Engine* engine : {&b, &a}) {
    auto commit = engine->Commit("shared", {.wait = false});
    EXPECT_EQ(commit.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(commit.status().message().find("has a turn or a commit in progress; commit when it has ended"),
              std::string::npos) << commit.status().ToString();
  }
  EXPECT_OK(b.BeginTurn("other", ask("another session is free")));
  ASSERT_OK((*first)->Finish(Message::Assistant("A1")));
  auto messages = b.SessionMessages("shared");
  ASSERT_OK(messages);
  ASSERT_EQ(messages->size(), 2u);
  EXPECT_EQ((*messages)[1].ExtractText(""), "A1");
  // Ended: the other instance takes the next turn, and a commit archives whole turns.
  auto next = b.BeginTurn("shared", ask("U2 via B"));
  ASSERT_OK(next);
  ASSERT_OK((*next)->Finish(Message::Assistant("A2")));
  ASSERT_OK(a.Commit("shared", {.wait = false}));
  auto sessions = b.sessions();
  ASSERT_OK(sessions);
  auto archived = (*sessions)->ArchiveMessages("shared", 1);
  ASSERT_OK(archived);
  ASSERT_EQ(archived->size(), 4u);
  EXPECT_EQ((*archived)[3].ExtractText(""), "A2");
  EXPECT_TRUE(b.SessionMessages("shared")->empty());
}

// An admin's turn (the root key, a server without keys) that names neither a user nor an agent creates a
// session of the user "default": a session of nobody failed every phase 2 ("has neither a user nor an agent").
// Changes made outside the turn wait for it: an append landed between a turn's request and its reply, and a
// revert in the middle of a turn left the reply alone in the log. Two such changes only wait for each other.
TEST_F(TurnTest, ChangesToASessionWaitForItsTurn) {
  ASSERT_OK(engine_->CreateSession("alice", "", "chat-1"));
  auto turn = engine_->BeginTurn("chat-1", Ask("Which seat do I like?"));
  ASSERT_OK(turn);
  ASSERT_OK((*turn)->Accept());
  std::vector<Message> appended = {Message::User("appended meanwhile")};
  auto added = engine_->AddMessages("chat-1", appended);
  EXPECT_EQ(added.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(added.status().message().find("has a turn or a commit in progress; add messages when it has ended"),
            std::string::npos)
      << added.status().message();
  EXPECT_EQ(engine_->Revert("chat-1", {.id = 0}).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine_->Checkpoint("chat-1").status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine_->SetSystemPrompt("chat-1", "new").code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(engine_->RecordUsage("chat-1", 5).code(), StatusCode::kFailedPrecondition);
  ASSERT_OK((*turn)->Finish(Message::Assistant("The aisle.")));
  std::vector<Message> log = Log("chat-1");
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[1].ExtractText(""), "The aisle.");
  // Once it has ended, and many appends at once: each waits its moment, none is refused.
  std::vector<std::thread> writers;
  std::atomic<int> refused{0};
  for (int i = 0; i < 8; ++i) {
    writers.emplace_back([&, i] {
      std::vector<Message> one = {Message::User("note " + std::to_string(i))};
      if (!engine_->AddMessages("chat-1", one).ok()) ++refused;
    });
  }
  for (std::thread& t : writers) t.join();
  EXPECT_EQ(refused.load(), 0);
  EXPECT_EQ(Log("chat-1").size(), 10u);
  EXPECT_OK(engine_->Checkpoint("chat-1"));
}

// A retry after a reply that never came (the stream broke) sends the same turn: the session ends with it
// already, unanswered, and it is logged and sent once.
TEST_F(TurnTest, ATurnRetriedAfterItsReplyNeverCameIsLoggedOnce) {
  {
    auto turn = engine_->BeginTurn("chat-1", Ask("What is 2+2?"));
    ASSERT_OK(turn);
    ASSERT_OK((*turn)->Accept());
    (*turn)->Release();  // The upstream's stream broke: no reply.
  }
  ASSERT_EQ(Log("chat-1").size(), 1u);
  auto retry = engine_->BeginTurn("chat-1", Ask("What is 2+2?"));
  ASSERT_OK(retry);
  const SessionContext& ctx = (*retry)->context();
  ASSERT_EQ(ctx.messages.size(), 1u) << "sent once";
  ASSERT_OK((*retry)->Finish(Message::Assistant("4")));
  std::vector<Message> log = Log("chat-1");
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0].ExtractText(""), "What is 2+2?");
  EXPECT_EQ(log[1].ExtractText(""), "4");
  // Asked again once answered, the same words are a new turn.
  auto again = engine_->BeginTurn("chat-1", Ask("What is 2+2?"));
  ASSERT_OK(again);
  ASSERT_OK((*again)->Finish(Message::Assistant("Still 4")));
  EXPECT_EQ(Log("chat-1").size(), 4u);
  // A turn that ends with a prefill (the assistant's first words, Anthropic's way) is retried the same way.
  TurnRequest prefilled = Ask("Name a colour.");
  prefilled.turn.push_back(Message::Assistant("The colour is"));
  {
    auto turn = engine_->BeginTurn("chat-2", prefilled);
    ASSERT_OK(turn);
    ASSERT_OK((*turn)->Accept());
    (*turn)->Release();
  }
  auto retried = engine_->BeginTurn("chat-2", prefilled);
  ASSERT_OK(retried);
  EXPECT_EQ((*retried)->context().messages.size(), 2u) << "the prefill is sent once";
  ASSERT_OK((*retried)->Finish(Message::Assistant(" blue")));
  std::vector<Message> colours = Log("chat-2");
  ASSERT_EQ(colours.size(), 3u);
  EXPECT_EQ(colours[1].ExtractText(""), "The colour is");
  EXPECT_EQ(colours[2].ExtractText(""), " blue");
}

// A tool result must answer a call: one that answers none was refused as if the 5-token turn did not fit.
// A client that sends the whole conversation each time (the SDKs' tool runners do) repeats the session's
// messages before its new ones: only the new ones are logged and sent, whatever form the client gives its
// echo of the replies (arguments spaced otherwise, no thinking). Each turn logged the whole history again.
TEST_F(TurnTest, TheWholeConversationSentAgainLogsOnlyWhatIsNew) {
  auto first = engine_->BeginTurn("resend", Ask("Look up the weather in Kyoto."));
  ASSERT_OK(first);
  Message call = Message::Assistant("");
  call.content.push_back(ThinkPart{.think = "The user wants weather.", .encrypted = "sig"});
  call.tool_calls = std::vector<ToolCall>{{.id = "call-1", .function = {"weather", R"({"city": "Kyoto"})"}}};
  ASSERT_OK((*first)->Finish(call));
  // The client echoes the call its own way and adds the tool's result: one new message.
  Message echoed = Message::Assistant("");
  echoed.tool_calls = std::vector<ToolCall>{{.id = "call-1", .function = {"weather", R"({"city":"Kyoto"})"}}};
  TurnRequest again = Ask("Look up the weather in Kyoto.");
  again.turn.push_back(echoed);
  again.turn.push_back(Message::ToolResult("call-1", "Sunny, 21 C"));
  auto second = engine_->BeginTurn("resend", again);
  ASSERT_OK(second);
  const SessionContext& ctx = (*second)->context();
  ASSERT_EQ(ctx.messages.size(), 3u) << "sent upstream once each";
  ASSERT_OK((*second)->Finish(Message::Assistant("It is sunny in Kyoto.")));
  std::vector<Message> log = Log("resend");
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[2].role, Role::kTool);
  EXPECT_EQ(log[3].ExtractText(), "It is sunny in Kyoto.");
  // The same unanswered turn again, the whole conversation with it: not logged twice.
  TurnRequest nothing = again;
  nothing.turn.push_back(Message::Assistant("It is sunny in Kyoto."));
  TurnRequest third = nothing;
  third.turn.push_back(Message::User("And tomorrow?"));
  {
    auto broken = engine_->BeginTurn("resend", third);
    ASSERT_OK(broken);
    ASSERT_OK((*broken)->Accept());  // The model took it; its reply never came.
  }
  auto retried = engine_->BeginTurn("resend", third);
  ASSERT_OK(retried);
  ASSERT_OK((*retried)->Finish(Message::Assistant("Rain.")));
  log = Log("resend");
  ASSERT_EQ(log.size(), 6u);
  EXPECT_EQ(log[4].ExtractText(), "And tomorrow?");
  // A client that sends only its new turn is read as before, even when its words repeat an earlier turn's.
  auto only_new = engine_->BeginTurn("resend", Ask("Look up the weather in Kyoto."));
  ASSERT_OK(only_new);
  ASSERT_OK((*only_new)->Finish(Message::Assistant("Still sunny.")));
  EXPECT_EQ(Log("resend").size(), 8u);
}

// The whole conversation sent again after a commit (the live log empty, or holding only what came after it)
// is anchored on what the session holds last: it was logged again whole, and by the commit policy every turn
// then committed. A message with the same words but another image is another message.
TEST_F(TurnTest, TheWholeConversationSentAgainAfterACommitLogsOnlyWhatIsNew) {
  auto say = [&](std::vector<Message> whole, const std::string& reply) {
    TurnRequest r = Ask("unused");
    r.turn = std::move(whole);
    auto turn = engine_->BeginTurn("after", r);
    EXPECT_OK(turn);
    if (turn.ok()) EXPECT_OK((*turn)->Finish(Message::Assistant(reply)));
  };
  std::vector<Message> whole = {Message::User("hello")};
  say(whole, "hi");
  whole.push_back(Message::Assistant("hi"));
  whole.push_back(Message::User("how are you"));
  say(whole, "fine");
  ASSERT_OK(engine_->Commit("after", {}));
  whole.push_back(Message::Assistant("fine"));
  whole.push_back(Message::User("third"));
  say(whole, "ok3");
  EXPECT_EQ(Log("after").size(), 2u) << "only the third turn and its reply";
  whole.push_back(Message::Assistant("ok3"));
  whole.push_back(Message::User("fourth"));
  say(whole, "ok4");
  std::vector<Message> log = Log("after");
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[2].ExtractText(), "fourth");
  // The same words with another image: a new message, not the one the session holds.
  auto picture = [&](const std::string& url) {
    Message m = Message::User("What is this?");
    m.content.push_back(MediaPart{MediaKind::kImage, url});
    TurnRequest r = Ask("unused");
    r.turn = {m};
    return engine_->BeginTurn("pictures", r);
  };
  {
    auto cat = picture("https://example.com/cat.png");
    ASSERT_OK(cat);
    ASSERT_OK((*cat)->Accept());  // Its reply never came.
  }
  auto turn = picture("https://example.com/dog.png");
  ASSERT_OK(turn);
  const Message& sent = (*turn)->context().messages.back();
  ASSERT_EQ(sent.content.size(), 2u);
  EXPECT_EQ(std::get<MediaPart>(sent.content[1]).url, "https://example.com/dog.png");
}

TEST_F(TurnTest, AToolResultThatAnswersNoCallIsRefusedNamingIt) {
  TurnRequest r = Ask("");
  r.turn = {Message::ToolResult("call_nope", "Sunny")};
  auto orphan = engine_->BeginTurn("chat-1", r);
  ASSERT_FALSE(orphan.ok());
  EXPECT_EQ(orphan.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(orphan.status().message().find("a tool result for \"call_nope\", a call that no assistant message"),
            std::string::npos)
      << orphan.status().message();
  // The call in the session, or earlier in the same turn, is answered.
  auto first = engine_->BeginTurn("chat-1", Ask("Weather?"));
  ASSERT_OK(first);
  ASSERT_OK((*first)->Finish(CallingReply("call_1")));
  r.turn = {Message::ToolResult("call_1", "Sunny")};
  auto answered = engine_->BeginTurn("chat-1", r);
  ASSERT_OK(answered);
  (*answered)->Release();
  r.turn = {CallingReply("call_2"), Message::ToolResult("call_2", "Rain")};
  EXPECT_OK(engine_->BeginTurn("chat-2", r));
}

TEST_F(TurnTest, AnAdminsTurnThatNamesNoOwnerBelongsToTheDefaultUser) {
  TurnRequest request = Ask("hello");
  request.reach = Reach::Everything();
  auto turn = engine_->BeginTurn("by-admin", std::move(request));
  ASSERT_OK(turn);
  ASSERT_OK((*turn)->Finish(Message::Assistant("hi")));
  EXPECT_EQ(engine_->GetSession("by-admin")->user, "default");
  request = Ask("hello");
  request.reach = Reach::Everything();
  request.agent = "helper";  // Named: the agent's, and no user.
  ASSERT_OK(engine_->BeginTurn("by-agent", std::move(request)));
  EXPECT_EQ(engine_->GetSession("by-agent")->user, "");
  EXPECT_EQ(engine_->GetSession("by-agent")->agent, "helper");
}

// A session deleted and created again by another process while a turn of it is in flight is another
// session: the turn's reply is refused, not appended to the new owner's messages.
TEST_F(TurnTest, ATurnNeverWritesIntoTheSessionThatReplacedItsOwn) {
  auto other = Engine::Open({.data_dir = dir_.path()});
  ASSERT_OK(other);
  auto turn = engine_->BeginTurn("swap", Ask("alice asks"));
  ASSERT_OK(turn);
  ASSERT_OK((*turn)->Accept());
  ASSERT_OK((*other)->DeleteSession("swap", /*force=*/true));
  ASSERT_OK((*other)->CreateSession("bob", "", "swap"));
  auto finished = (*turn)->Finish(Message::Assistant("the reply to alice"));
  EXPECT_EQ(finished.status().code(), StatusCode::kNotFound) << finished.status().ToString();
  auto bobs = (*other)->SessionMessages("swap");
  ASSERT_OK(bobs);
  EXPECT_TRUE(bobs->empty());
}

TEST_F(TurnTest, OneTurnOrCommitOfASessionAtATimeAcrossProcessesOnOneDirectory) {
  auto other = Engine::Open({.data_dir = dir_.path()});
  ASSERT_OK(other);
  ExpectOneTurnOrCommitOfASessionAtATime(*engine_, **other);
}

TEST(TurnFleetTest, OneTurnOrCommitOfASessionAtATimeAcrossInstancesOnOneDatabase) {
  auto url = testing::NewPostgresDatabase();
  ASSERT_OK(url);
  auto a = Engine::Open({.data_dir = *url});
  auto b = Engine::Open({.data_dir = *url});
  ASSERT_OK(a);
  ASSERT_OK(b);
  ExpectOneTurnOrCommitOfASessionAtATime(**a, **b);
}

TEST_F(TurnTest, ATurnThatDoesNotFitIsRefusedAndNamesTheWindow) {
  TurnRequest r = Ask(Words(10'000));
  auto turn = engine_->BeginTurn("chat-1", std::move(r));
  ASSERT_EQ(turn.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(turn.status().message().find("does not fit in the model's window"), std::string::npos);
  EXPECT_TRUE(Log("chat-1").empty());
  // And bad requests name what is wrong.
  TurnRequest empty = Ask("x");
  empty.turn.clear();
  EXPECT_EQ(engine_->BeginTurn("chat-1", std::move(empty)).status().code(), StatusCode::kInvalidArgument);
  TurnRequest encoding = Ask("x");
  encoding.encoding = "no_such_encoding";
  EXPECT_NE(engine_->BeginTurn("chat-1", std::move(encoding)).status().message().find("no_such_encoding"),
            std::string::npos);
  EXPECT_EQ(engine_->BeginTurn("bad/id", Ask("x")).status().code(), StatusCode::kInvalidArgument);
  // Tokens sent beside the messages out of range are named before any sum with them (-2^63 overflowed the
  // room left for memories).
  for (int64_t reserved : {std::numeric_limits<int64_t>::min(), int64_t{-1}, std::numeric_limits<int64_t>::max()}) {
    TurnRequest odd = Ask("x");
    odd.reserved_tokens = reserved;
    auto refused = engine_->BeginTurn("chat-1", std::move(odd));
    ASSERT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << reserved;
    EXPECT_NE(refused.status().message().find("the tokens sent beside the messages (" + std::to_string(reserved) + ")"),
              std::string::npos) << refused.status().message();
  }
  EXPECT_TRUE(Log("chat-1").empty());
}

TEST_F(TurnTest, MemoriesOfTheOwnerAreRecalledIntoTheSystemPrompt) {
  ASSERT_OK(engine_->Write("strata://user/alice/memories/preferences/seat", "Alice prefers aisle seats on long flights.",
                           {.abstract_text = "Prefers aisle seats on long flights"}));
  ASSERT_OK(engine_->Write("strata://user/bob/memories/preferences/seat", "Bob prefers window seats on long flights.",
                           {.abstract_text = "Prefers window seats on long flights"}));
  TurnRequest r = Ask("Which seat should I book on long flights?");
  r.system = "You are a travel agent.";
  auto turn = engine_->BeginTurn("chat-1", std::move(r));
  ASSERT_OK(turn);
  const SessionContext& ctx = (*turn)->context();
  EXPECT_EQ(ctx.system_prompt.rfind("You are a travel agent.", 0), 0u) << ctx.system_prompt;
  EXPECT_NE(ctx.system_prompt.find("Prefers aisle seats"), std::string::npos) << ctx.system_prompt;
  EXPECT_EQ(ctx.system_prompt.find("window seats"), std::string::npos) << "another user's memory was recalled";
  EXPECT_GT(ctx.tokens.memories, 0);
  EXPECT_LE(ctx.total_tokens, ctx.budget + ctx.tokens.reply);
}

// Recalled memories fill only the room the window leaves beside the system prompt, the reply reserve and the
// new turn: appended whole, eight of them made a turn that fitted an invalid budget (400).
TEST_F(TurnTest, RecalledMemoriesFitTheWindowOrAreLeftOut) {
  for (int i = 0; i < 8; ++i) {
    const std::string n = std::to_string(i);
    ASSERT_OK(engine_->Write("strata://user/alice/memories/preferences/seat" + n,
                             "Alice prefers aisle seats on long flights, note " + n + ".",
                             {.abstract_text = "Prefers aisle seats on long flights and trains, with legroom, note " + n}));
  }
  TurnRequest r = Ask("Which seat should I book on long flights?");
  r.system = "You are a travel agent.";
  r.max_context_tokens = 120;
  r.reserve_for_reply = 30;
  r.memory_limit = 8;
  auto turn = engine_->BeginTurn("small", std::move(r));
  ASSERT_OK(turn);
  const SessionContext& ctx = (*turn)->context();
  EXPECT_FALSE(ctx.memories.empty()) << "as many as fit are recalled";
  EXPECT_LT(ctx.memories.size(), 8u);
  EXPECT_LE(ctx.total_tokens, ctx.budget + ctx.tokens.reply);
  ASSERT_FALSE(ctx.messages.empty());
  EXPECT_EQ(ctx.messages.back().ExtractText(), "Which seat should I book on long flights?");
  std::string warnings;
  for (const std::string& w : ctx.warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("recalled memories left out"), std::string::npos) << warnings;
}

TEST_F(TurnTest, AnotherUsersSessionIsNotThere) {
  ASSERT_OK(engine_->BeginTurn("chat-1", Ask("mine")));  // Created for alice, then released.
  auto theirs = engine_->BeginTurn("chat-1", Ask("let me in", "bob"));
  TurnRequest no_create = Ask("hello", "bob");
  no_create.create = false;
  auto missing = engine_->BeginTurn("chat-none", std::move(no_create));
  ASSERT_EQ(theirs.status().code(), StatusCode::kNotFound);
  ASSERT_EQ(missing.status().code(), StatusCode::kNotFound);
  // The same answer as for a session that does not exist, but for the id.
  std::string a = theirs.status().message(), b = missing.status().message();
  EXPECT_EQ(a.replace(a.find("chat-1"), 6, "ID"), b.replace(b.find("chat-none"), 9, "ID"));
  // A turn may not carry references to what its caller cannot read.
  TurnRequest ref = Ask("look at this", "bob");
  ref.turn[0].content.push_back(CustomPart{std::string(session::kContextRefPartType),
                                           R"({"type":"context_ref","uri":"strata://user/alice/memories/preferences/seat"})"});
  EXPECT_EQ(engine_->BeginTurn("chat-b", std::move(ref)).status().code(), StatusCode::kPermissionDenied);
}

// A caller limited to one user that names another for its turn (the model endpoint's X-Strata-User) was
// answered with a session of its own user, where the session routes refuse the same request (403).
TEST_F(TurnTest, AUserLimitedCallerNamingAnotherUserIsRefused) {
  TurnRequest other = Ask("hello");
  other.user = "bob";
  auto refused = engine_->BeginTurn("chat-x", std::move(other));
  ASSERT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("user \"bob\""), std::string::npos) << refused.status().ToString();
  EXPECT_EQ(engine_->GetSession("chat-x").status().code(), StatusCode::kNotFound) << "no session was made";
  TurnRequest own = Ask("hello");
  own.user = "alice";  // Its own user, named: as if not named.
  EXPECT_OK(engine_->BeginTurn("chat-y", std::move(own)));
}

TEST_F(TurnTest, AToolCallingReplyIsNeverCommittedAwayFromItsResults) {
  Open({.after_tokens = 0, .after_turns = 1, .after_idle = std::chrono::milliseconds(0)});
  auto turn = engine_->BeginTurn("chat-1", Ask("Which seat do I like?"));
  ASSERT_OK(turn);
  auto calling = (*turn)->Finish(CallingReply("call-1"));
  ASSERT_OK(calling);
  EXPECT_FALSE(calling->committed) << "the calls would be archived without their results";
  EXPECT_EQ(calling->uncommitted_turns, 1);

  TurnRequest results;
  results.turn = {Message::ToolResult("call-1", "aisle")};
  results.reach = Reach::User("alice");
  auto second = engine_->BeginTurn("chat-1", std::move(results));
  ASSERT_OK(second);
  auto answered = (*second)->Finish(Message::Assistant("You like the aisle."));
  ASSERT_OK(answered);
  EXPECT_TRUE(answered->committed);
  EXPECT_GT(answered->job_id, 0);
  auto status = engine_->GetSessionStatus("chat-1");
  ASSERT_OK(status);
  ASSERT_EQ(status->archives.size(), 1u);
  EXPECT_EQ(status->archives[0].messages, 4) << "the call and its result are archived together";
  EXPECT_TRUE(Log("chat-1").empty());
}

TEST_F(TurnTest, TheTokenPolicyCommitsOnceTheSessionHasGrown) {
  Open({.after_tokens = 60, .after_turns = 0, .after_idle = std::chrono::milliseconds(0)});
  auto small = engine_->BeginTurn("chat-1", Ask("hi"));
  ASSERT_OK(small);
  auto first = (*small)->Finish(Message::Assistant("hello"));
  ASSERT_OK(first);
  EXPECT_FALSE(first->committed);
  EXPECT_GT(first->uncommitted_tokens, 0);
  EXPECT_LT(first->uncommitted_tokens, 60);

  auto big = engine_->BeginTurn("chat-1", Ask("Tell me everything about aisle seats, window seats and legroom." + Words(40)));
  ASSERT_OK(big);
  auto second = (*big)->Finish(Message::Assistant("Aisle seats are easier to leave; window seats are quieter."));
  ASSERT_OK(second);
  EXPECT_GE(second->uncommitted_tokens, 60);
  EXPECT_GT(second->uncommitted_tokens, first->uncommitted_tokens);
  EXPECT_TRUE(second->committed);
  EXPECT_EQ(second->uncommitted_turns, 2);
}

TEST_F(TurnTest, IdleSessionsAreCommittedOnceAndBusyOnesNot) {
  Open({.after_tokens = 0, .after_turns = 0, .after_idle = std::chrono::milliseconds(20)});
  for (const char* id : {"quiet", "busy"}) Greet(id);
  auto busy = engine_->BeginTurn("busy", Ask("still here"));  // A turn in progress: not idle.
  ASSERT_OK(busy);
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  auto committed = engine_->CommitIdleSessions();
  ASSERT_OK(committed);
  EXPECT_EQ(*committed, 1);
  auto quiet = engine_->GetSessionStatus("quiet");
  ASSERT_OK(quiet);
  EXPECT_EQ(quiet->archives.size(), 1u);
  auto busy_status = engine_->GetSessionStatus("busy");
  ASSERT_OK(busy_status);
  EXPECT_TRUE(busy_status->archives.empty());
  // Committed once: quiet stays quiet.
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  EXPECT_EQ(*engine_->CommitIdleSessions(), 0);
}

// A quiet session held by another instance (a turn begun there and not finished) is not committed now, and
// is looked at again: when that turn was let go without a reply, nobody else was ever to commit it (the
// commit was refused as busy and the session left this engine's idle book).
TEST_F(TurnTest, AnIdleSessionHeldElsewhereIsLookedAtAgainOnceFree) {
  Open({.after_tokens = 0, .after_turns = 0, .after_idle = std::chrono::milliseconds(20)});
  Greet("chat-1");
  auto other = Engine::Open({.data_dir = dir_.path()});
  ASSERT_OK(other);
  auto elsewhere = (*other)->BeginTurn("chat-1", Ask("still there?"));
  ASSERT_OK(elsewhere);
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  auto held = engine_->CommitIdleSessions();
  ASSERT_OK(held);
  EXPECT_EQ(*held, 0);
  EXPECT_TRUE(engine_->GetSessionStatus("chat-1")->archives.empty());
  (*elsewhere)->Release();
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  auto free = engine_->CommitIdleSessions();
  ASSERT_OK(free);
  EXPECT_EQ(*free, 1);
  auto status = engine_->GetSessionStatus("chat-1");
  ASSERT_OK(status);
  ASSERT_EQ(status->archives.size(), 1u);
  EXPECT_EQ(status->archives[0].messages, 2) << "the turn finished here; the one let go elsewhere added nothing";
}

// The session that went quiet is the one committed: one deleted since and made again under its id (messages
// appended, no turn) is another session, and was committed, its phase 2 run, as if it were the quiet one.
TEST_F(TurnTest, AnIdleSessionDeletedAndMadeAgainIsNotCommittedAsTheQuietOne) {
  Open({.after_tokens = 0, .after_turns = 0, .after_idle = std::chrono::milliseconds(20)});
  Greet("chat-1");
  ASSERT_OK(engine_->DeleteSession("chat-1", /*force=*/false));
  ASSERT_OK(engine_->CreateSession("bob", "", "chat-1"));
  ASSERT_OK(engine_->AddMessages("chat-1", std::vector<Message>{Message::User("a new session"), Message::Assistant("yes")}));
  std::this_thread::sleep_for(std::chrono::milliseconds(40));
  auto committed = engine_->CommitIdleSessions();
  ASSERT_OK(committed);
  EXPECT_EQ(*committed, 0);
  auto status = engine_->GetSessionStatus("chat-1");
  ASSERT_OK(status);
  EXPECT_TRUE(status->archives.empty());
}

// The idle clock is this process's, but the session's last change decides: another instance's turn, or an
// append, since this process's last turn keeps it from being committed (its first turns were archived
// mid-conversation), until it has been quiet for long enough after that change.
TEST_F(TurnTest, ASessionChangedSinceItsLastTurnHereIsNotIdle) {
  // Margins of 600 ms either way, for slow builds (sanitizers) on two cores.
  Open({.after_tokens = 0, .after_turns = 0, .after_idle = std::chrono::milliseconds(1000)});
  Greet("chat-1");
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  // Another instance's turn, written as it writes one (not through this engine's turns).
  auto other = Engine::Open({.data_dir = dir_.path()});
  ASSERT_OK(other);
  ASSERT_OK((*other)->AddMessages("chat-1", std::vector<Message>{Message::User("and then?"), Message::Assistant("then this")}));
  std::this_thread::sleep_for(std::chrono::milliseconds(400));  // 1.1 s after the turn, 0.4 s after the change.
  auto early = engine_->CommitIdleSessions();
  ASSERT_OK(early);
  EXPECT_EQ(*early, 0);
  EXPECT_TRUE(engine_->GetSessionStatus("chat-1")->archives.empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(700));  // 1.1 s after the change.
  auto later = engine_->CommitIdleSessions();
  ASSERT_OK(later);
  EXPECT_EQ(*later, 1);
  auto status = engine_->GetSessionStatus("chat-1");
  ASSERT_OK(status);
  ASSERT_EQ(status->archives.size(), 1u);
  EXPECT_EQ(status->archives[0].messages, 4) << "the whole conversation, archived once";
}

// Another instance's turn ended with a reply that calls tools, and its tools run longer than the idle period:
// the session is quiet, but committing it would archive the calls and leave their results alone in the live
// log. It is committed once every call is answered and the session quiet again; a group left open for six
// quiet periods (its client gone) is committed as it is.
TEST_F(TurnTest, AnIdleCommitDoesNotCutAToolGroupAnotherInstanceOpened) {
  // Sleeps are lower bounds; the one upper bound (the group deferred, not yet six periods quiet) has 400 ms.
  Open({.after_tokens = 0, .after_turns = 0, .after_idle = std::chrono::milliseconds(100)});
  for (const char* id : {"chat-1", "chat-2"}) Greet(id);
  auto other = Engine::Open({.data_dir = dir_.path()});
  ASSERT_OK(other);
  Message two_calls = CallingReply("call-1");
  two_calls.tool_calls->push_back(ToolCall{.id = "call-2", .function = {"find", R"({"query": "aisle"})"}});
  ASSERT_OK((*other)->AddMessages(
      "chat-1", std::vector<Message>{Message::User("find me two seats"), two_calls, Message::ToolResult("call-1", "14C")}));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto open_group = engine_->CommitIdleSessions();
  ASSERT_OK(open_group);
  EXPECT_EQ(*open_group, 1) << "chat-2 only";
  EXPECT_TRUE(engine_->GetSessionStatus("chat-1")->archives.empty());
  ASSERT_OK((*other)->AddMessages("chat-1", std::vector<Message>{Message::ToolResult("call-2", "14D"),
                                                                 Message::Assistant("Seats 14C and 14D are free.")}));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  auto closed = engine_->CommitIdleSessions();
  ASSERT_OK(closed);
  EXPECT_EQ(*closed, 1);
  auto status = engine_->GetSessionStatus("chat-1");
  ASSERT_OK(status);
  ASSERT_EQ(status->archives.size(), 1u);
  EXPECT_EQ(status->archives[0].messages, 7) << "the whole conversation, its tool group whole";
  // A group nobody answers: committed once the session has been quiet for six idle periods.
  Greet("chat-3");
  ASSERT_OK((*other)->AddMessages("chat-3", std::vector<Message>{Message::User("find a seat"), CallingReply("call-9")}));
  std::this_thread::sleep_for(std::chrono::milliseconds(700));
  EXPECT_EQ(*engine_->CommitIdleSessions(), 1);
  EXPECT_EQ(engine_->GetSessionStatus("chat-3")->archives.size(), 1u);
}

TEST_F(TurnTest, AReadOnlyEngineServesNoTurns) {
  ASSERT_OK(engine_->CreateSession("alice", "", "chat-1"));
  engine_.reset();
  auto e = Engine::Open({.data_dir = dir_.path(), .read_only = true});
  ASSERT_OK(e);
  auto turn = (*e)->BeginTurn("chat-1", Ask("hi"));
  EXPECT_FALSE(turn.ok());
  EXPECT_NE(turn.status().message().find("read-only"), std::string::npos) << turn.status().message();
}

}  // namespace
}  // namespace strata
