// The engine at library level: the store, sessions and memory operations every front end calls, the
// conversation turn loop, the JSON views, provider resolution, and untrusted input (wrongly typed model
// replies, damaged session files) that must come back as errors, never as a dead process.
#include "strata/engine/engine.h"
#include "strata/llm/chat_error.h"
#include "strata/window/compaction.h"
#include "strata/engine/keys.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <mutex>
#include <nlohmann/json.hpp>

#include "strata/engine/views.h"
#include "strata/llm/scripted.h"
#include "session/pipeline_stage.h"
#include "strata/session/owner_locks.h"
#include "test_util.h"

namespace strata {
namespace {

using Json = nlohmann::json;

llm::ScriptedReply Text(std::string text) { return testing::TextReply(std::move(text)); }

llm::ScriptedReply Call(std::string id, std::string name, std::string arguments) {
  llm::ScriptedReply r;
  ToolCall call;
  call.id = std::move(id);
  call.function.name = std::move(name);
  call.function.arguments = std::move(arguments);
  r.parts.push_back(std::move(call));
  return r;
}

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

using testing::Stage;
using testing::StageOf;

constexpr const char* kSeat =
    R"({"memories": [{"category": "preferences", "key": "seat_preference", "abstract": "Prefers aisle seats",
        "content": "Alice prefers aisle seats on long flights."}]})";

// An engine over a temporary data directory whose model answers by pipeline stage.
class EngineTest : public ::testing::Test {
 protected:
  void SetUp() override { Reopen(); }

  void Reopen() {
    engine_.reset();
    model_ = std::make_unique<llm::ScriptedProvider>("scripted", [this](const llm::ScriptedProvider::Request& req) {
      Stage stage = StageOf(req);
      if (on_call_) on_call_(stage);
      if (stage == Stage::kSummary) return summary_;
      if (stage == Stage::kExtract) return Next(extraction_queue_, extraction_);
      if (stage == Stage::kDedup) {
        ++dedup_calls_;
        return Next(dedup_queue_, dedup_);
      }
      return other_;
    });
    auto e = Engine::Open({.data_dir = dir_.path(), .model = model_.get(), .ignore_prompt_env = true,
                           .shipped_prompts_dir = STRATA_PROMPTS_DIR});
    ASSERT_OK(e);
    engine_ = std::move(*e);
  }

  // The first queued reply, else the standing one.
  llm::ScriptedReply Next(std::vector<llm::ScriptedReply>& queue, const llm::ScriptedReply& standing) {
    std::lock_guard lock(mu_);
    if (queue.empty()) return standing;
    llm::ScriptedReply r = queue.front();
    queue.erase(queue.begin());
    return r;
  }

  session::ArchiveInfo Archive(const std::string& session, int n) {
    auto status = engine_->GetSessionStatus(session);
    EXPECT_OK(status);
    for (const auto& a : status.ok() ? status->archives : std::vector<session::ArchiveInfo>{}) {
      if (a.number == n) return a;
    }
    ADD_FAILURE() << "no archive " << n;
    return {};
  }

  testing::TempDir dir_;
  llm::ScriptedReply summary_ = Text("Alice talked about travel.");
  llm::ScriptedReply extraction_ = Text(kSeat);
  llm::ScriptedReply dedup_ = Text(R"({"decision": "create", "reason": "new"})");
  llm::ScriptedReply other_ = Text("?");  // Every other call (a compaction's summary, a chat).
  std::function<void(Stage)> on_call_;  // Runs before each model reply.
  std::mutex mu_;
  std::vector<llm::ScriptedReply> extraction_queue_;  // Answered first, in order.
  std::vector<llm::ScriptedReply> dedup_queue_;
  std::atomic<int> dedup_calls_{0};
  std::unique_ptr<llm::ScriptedProvider> model_;
  std::unique_ptr<Engine> engine_;
};

// Two processes on one data directory (two `strata serve`, or a server and `strata keys` in a shell) share
// its keys file: a key one issues is accepted by the other at once, and a key one revokes is refused by the
// other at once. (Each read the file once when it opened: a revoked key stayed valid in the other process
// until it restarted, and revoking there a key issued here answered "no API key".)
TEST(KeyStoreTest, TwoProcessesOnOneFileSeeEachOthersIssuesAndRevocations) {
  testing::TempDir dir;
  auto a = OpenKeyStore(dir.File("keys.db"));
  auto b = OpenKeyStore(dir.File("keys.db"));
  ASSERT_OK(a);
  ASSERT_OK(b);
  auto issued = (*a)->Issue("default", "zed", KeyRole::kUser);
  ASSERT_OK(issued);
  auto found = (*b)->Find(issued->second);
  ASSERT_OK(found);
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->user, "zed");
  EXPECT_EQ((*b)->List("default")->size(), 1u);
  ASSERT_OK((*b)->Revoke(issued->first.id));
  found = (*a)->Find(issued->second);
  ASSERT_OK(found);
  EXPECT_FALSE(found->has_value());
  EXPECT_TRUE((*a)->List("default")->empty());
  EXPECT_EQ((*a)->Revoke(issued->first.id).code(), StatusCode::kNotFound);
  // A key the other issued is revoked here.
  auto second = (*b)->Issue("default", "amy", KeyRole::kAdmin);
  ASSERT_OK(second);
  ASSERT_OK((*a)->Revoke(second->first.id));
  found = (*b)->Find(second->second);
  ASSERT_OK(found);
  EXPECT_FALSE(found->has_value());
}

// A read-only process (`strata serve --read-only`) opened before any key was issued accepts the keys another
// process issues later: it held an empty table in memory and refused every key until it restarted.
TEST(KeyStoreTest, AReadOnlyProcessStartedBeforeTheFirstKeySeesItWhenIssued) {
  testing::TempDir dir;
  auto reader = OpenKeyStore(dir.File("keys.db"), /*read_only=*/true);
  ASSERT_OK(reader);
  auto none = (*reader)->Find("no-such-secret");
  ASSERT_OK(none);
  EXPECT_FALSE(none->has_value());
  auto writer = OpenKeyStore(dir.File("keys.db"));
  ASSERT_OK(writer);
  auto issued = (*writer)->Issue("default", "zed", KeyRole::kUser);
  ASSERT_OK(issued);
  auto found = (*reader)->Find(issued->second);
  ASSERT_OK(found);
  ASSERT_TRUE(found->has_value()) << "the read-only process never read the keys file made after it opened";
  EXPECT_EQ((*found)->user, "zed");
  EXPECT_EQ((*reader)->List("default")->size(), 1u);
}

// An empty URI is everything to a listing, as to every front end's (Python's ls("") was an error while HTTP,
// MCP and the CLI listed everything), and no subtree to an export or an import, as over HTTP (Python's
// exported everything, and imported into strata://resources).
TEST_F(EngineTest, AnEmptyUriListsEverythingAndNamesNoSubtreeToExportOrImport) {
  ASSERT_OK(engine_->Write("strata://resources/docs/a", "alpha"));
  auto everything = engine_->List("", {.recursive = true});
  ASSERT_OK(everything);
  auto root = engine_->List("strata://", {.recursive = true});
  ASSERT_OK(root);
  EXPECT_EQ(everything->size(), root->size());
  EXPECT_FALSE(everything->empty());
  ASSERT_OK(engine_->RecentMemoryChanges("", 5));
  testing::TempDir out;
  Result<memory::ExportReport> exported = engine_->Export("", out.path());
  EXPECT_EQ(exported.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(exported.status().message().find("must not be empty"), std::string::npos) << exported.status().message();
  EXPECT_EQ(engine_->Import(out.path(), "").status().code(), StatusCode::kInvalidArgument);
  EXPECT_OK(engine_->Export("strata://resources", out.path()));
}

// An empty append is refused by the Engine itself, so the CLI answers as HTTP, MCP and Python do; it was
// taken there, and touched the session (its idle commit put off) with nothing added.
TEST_F(EngineTest, AnEmptyAppendIsRefusedAndLeavesTheSessionAlone) {
  auto made = engine_->CreateSession("alice", "", "quiet");
  ASSERT_OK(made);
  auto added = engine_->AddMessages("quiet", std::span<const Message>());
  EXPECT_EQ(added.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(added.status().message().find("no messages given"), std::string::npos) << added.status().message();
  EXPECT_EQ(engine_->GetSession("quiet")->updated_ms, made->updated_ms);
}

// The newest message left out of a session's window is explained by what it is: a tool result that answers
// no call is named as such, not as a message over the budget (26 tokens of 123,904 were "over budget").
TEST_F(EngineTest, TheNewestMessageLeftOutIsExplainedByWhatItIs) {
  ASSERT_OK(engine_->CreateSession("alice", "", "orphan"));
  ASSERT_OK(engine_->AddMessages("orphan", std::vector{Message::User("What is the weather?"),
                                                       Message::ToolResult("call-9", "sunny")}));
  auto ctx = engine_->AssembleSession("orphan", {.max_context_tokens = 8000});
  ASSERT_OK(ctx);
  std::string warnings;
  for (const std::string& w : ctx->warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("answers no call"), std::string::npos) << warnings;
  EXPECT_EQ(warnings.find("does not fit"), std::string::npos) << warnings;
}

// A compaction's summary is the window's summary, not a pinned message: one that does not fit is left out
// with a warning (pinned, it made the request an invalid budget), and warnings number messages as the log
// does (they counted from after the summary).
TEST_F(EngineTest, ASummaryThatDoesNotFitIsLeftOutAndWarningsCountItsPlace) {
  ASSERT_OK(engine_->CreateSession("alice", "", "compacted"));
  const std::string summary = "Alice planned a long trip to Kyoto with many details about temples and trains";
  Message call = Message::Assistant("");
  call.tool_calls = std::vector<ToolCall>{{.id = "call-1", .function = {"lookup", "{}"}}};
  ASSERT_OK(engine_->AddMessages("compacted", std::vector{window::MakeSummaryMessage(summary), Message::User("hi"),
                                                          Message::Assistant("hello"), call}));
  auto tight = engine_->AssembleSession("compacted", {.max_context_tokens = 30, .reserve_for_reply = 0});
  ASSERT_OK(tight);
  EXPECT_FALSE(tight->summary_included);
  EXPECT_FALSE(tight->included[0]);
  std::string warnings;
  for (const std::string& w : tight->warnings) warnings += w + "\n";
  EXPECT_NE(warnings.find("the summary"), std::string::npos) << warnings;
  // The call without its result is the log's message 3 (after the summary), as `included` numbers it.
  EXPECT_NE(warnings.find("message 3: tool calls without all their results"), std::string::npos) << warnings;
  EXPECT_FALSE(tight->included[3]);
  auto roomy = engine_->AssembleSession("compacted", {.max_context_tokens = 8000, .reserve_for_reply = 0});
  ASSERT_OK(roomy);
  EXPECT_TRUE(roomy->summary_included);
  ASSERT_FALSE(roomy->messages.empty());
  EXPECT_EQ(roomy->messages[0], window::MakeSummaryMessage(summary)) << "sent as the log holds it";
  // The summary is not a turn of the user's, nor the session's first request (its abstract read
  // "<system>Previous context has been compacted…").
  auto info = engine_->GetSession("compacted");
  ASSERT_OK(info);
  EXPECT_EQ(info->stats.turns, 1);
  EXPECT_EQ(info->abstract_text, "hi");
}

// After a commit the live log starts afresh, and the window carries the conversation on in the newest
// archive's summary (phase 2's), so a model does not lose it at each commit: the next turn was sent
// with nothing of what came before.
TEST_F(EngineTest, AfterACommitTheWindowCarriesTheArchivesSummary) {
  ASSERT_OK(engine_->CreateSession("alice", "", "carried"));
  ASSERT_OK(engine_->AddMessages("carried", std::vector{Message::User("I am planning a trip to Kyoto."),
                                                        Message::Assistant("Lovely.")}));
  auto before = engine_->AssembleSession("carried", {.max_context_tokens = 8000});
  ASSERT_OK(before);
  EXPECT_FALSE(before->summary_included);
  ASSERT_OK(engine_->Commit("carried", {.wait = true}));
  ASSERT_OK(engine_->AddMessages("carried", std::vector{Message::User("Which temples first?")}));
  auto after = engine_->AssembleSession("carried", {.max_context_tokens = 8000});
  ASSERT_OK(after);
  EXPECT_TRUE(after->summary_included);
  ASSERT_EQ(after->messages.size(), 2u);
  EXPECT_EQ(window::SummaryOf(after->messages[0]).value_or(""), "Alice talked about travel.");
  EXPECT_EQ(after->messages[1].ExtractText(), "Which temples first?");
  EXPECT_GT(after->tokens.summary, 0);
  ASSERT_EQ(after->history.size(), 1u) << "the log itself is not changed";
  // A window too small for it leaves it out, the newest message first.
  auto tight = engine_->AssembleSession("carried", {.max_context_tokens = 25, .reserve_for_reply = 0});
  ASSERT_OK(tight);
  EXPECT_FALSE(tight->summary_included);
  EXPECT_EQ(tight->messages.back().ExtractText(), "Which temples first?");
}

// A compaction whose model failed and whose fallback pruned nothing leaves the session as it was: it was
// rewritten anyway, every checkpoint moved to message 0, and a revert to one then removed the whole
// conversation.
TEST_F(EngineTest, ACompactionThatChangesNothingLeavesTheLogAndItsCheckpoints) {
  ASSERT_OK(engine_->CreateSession("alice", "", "keep"));
  std::vector<Message> four;
  for (int i = 0; i < 4; ++i) four.push_back(i % 2 == 0 ? Message::User("question " + std::to_string(i)) : Message::Assistant("answer"));
  ASSERT_OK(engine_->AddMessages("keep", four));
  auto checkpoint = engine_->Checkpoint("keep");
  ASSERT_OK(checkpoint);
  for (int i = 0; i < 8; ++i) {
    ASSERT_OK(engine_->AddMessages("keep", std::vector{i % 2 == 0 ? Message::User("more " + std::to_string(i)) : Message::Assistant("ok")}));
  }
  other_.error = Status::Unavailable("model down (HTTP 503)");
  auto compacted = engine_->CompactSession("keep");
  ASSERT_OK(compacted);
  EXPECT_TRUE(compacted->pruned_fallback);
  auto log = engine_->GetSessionLog("keep");
  ASSERT_OK(log);
  EXPECT_TRUE(log->rotations.empty()) << "not rewritten";
  ASSERT_EQ(log->checkpoints.size(), 1u);
  EXPECT_EQ(log->checkpoints[0].messages, 4);
  ASSERT_OK(engine_->Revert("keep", {checkpoint->id}));
  EXPECT_EQ(engine_->SessionMessages("keep")->size(), 4u);
}

// A caller's metadata is nested at most 64 levels (an export puts it two levels deeper, and it must read
// back); the refusal names the depth and writes nothing.
TEST_F(EngineTest, MetadataDeeperThanSixtyFourLevelsIsRefusedNamingTheDepth) {
  auto nested = [](int levels) { return std::string(levels, '[') + "1" + std::string(levels, ']'); };
  std::string deep = "{\"a\": " + nested(64) + "}";  // 65 levels.
  Status refused = engine_->Write("strata://resources/deep", "x", {.metadata = deep});
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.message().find("nested deeper than 64 levels"), std::string::npos) << refused.ToString();
  EXPECT_EQ(engine_->Mkdir("strata://resources/deeper", {.metadata = deep}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine_->Stat("strata://resources/deep").status().code(), StatusCode::kNotFound);
  ASSERT_OK(engine_->Write("strata://resources/deep", "x", {.metadata = "{\"a\": " + nested(63) + "}"}));
}

// The root exists for every operation that names it: it is listed, so it is a directory to stat and read
// (empty layers), not "strata:// does not exist".
TEST_F(EngineTest, TheRootIsADirectoryForStatAndReadAsForList) {
  ASSERT_OK(engine_->Write("strata://resources/a", "x"));
  ASSERT_FALSE(engine_->List("strata://")->empty());
  auto root = engine_->Stat("strata://");
  ASSERT_OK(root);
  EXPECT_TRUE(root->is_dir);
  EXPECT_TRUE(root->uri.is_root());
  auto text = engine_->Read("strata://", memory::Level::kOverview);
  ASSERT_OK(text);
  EXPECT_EQ(*text, "");
  EXPECT_EQ(engine_->Stat("strata://resources/nowhere").status().code(), StatusCode::kNotFound);
}

TEST_F(EngineTest, StoreOperationsWorkThroughUriStrings) {
  ASSERT_OK(engine_->Write("strata://resources/notes/build", "Run scripts/test before pushing.\n\nIt builds all."));
  auto text = engine_->Read("strata://resources/notes/build");
  ASSERT_OK(text);
  EXPECT_EQ(*text, "Run scripts/test before pushing.\n\nIt builds all.");
  auto abstract = engine_->Read("strata://resources/notes/build", memory::Level::kAbstract);
  ASSERT_OK(abstract);
  EXPECT_EQ(*abstract, "Run scripts/test before pushing.");
  auto list = engine_->List("strata://resources/notes");
  ASSERT_OK(list);
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].uri.str(), "strata://resources/notes/build");
  auto hits = engine_->Find("how do I test before pushing", {.limit = 3});
  ASSERT_OK(hits);
  ASSERT_FALSE(hits->empty());
  EXPECT_EQ((*hits)[0].uri.str(), "strata://resources/notes/build");
  ASSERT_OK(engine_->Move("strata://resources/notes/build", "strata://resources/notes/testing"));
  EXPECT_EQ(engine_->Stat("strata://resources/notes/build").status().code(), StatusCode::kNotFound);
  auto grep = engine_->Grep("scripts/test", "strata://resources");
  ASSERT_OK(grep);
  ASSERT_EQ(grep->size(), 1u);
  EXPECT_EQ((*grep)[0].uri.str(), "strata://resources/notes/testing");
  // A bad URI is an error naming it, from every operation.
  Status bad = engine_->Write("strata://resources/../etc", "x");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find(".."), std::string::npos) << bad.message();
}

// A session that names neither a user nor an agent is the default user's: it was nobody's, and its commit
// then failed for good in phase 2 ("has neither a user nor an agent"), while a turn's session was "default".
TEST_F(EngineTest, ASessionOfNobodyIsTheDefaultUsers) {
  auto info = engine_->CreateSession("", "", "s-nobody");
  ASSERT_OK(info);
  EXPECT_EQ(info->user, "default");
  EXPECT_EQ(info->agent, "");
  auto agents = engine_->CreateSession("", "coder", "s-agent");
  ASSERT_OK(agents);
  EXPECT_EQ(agents->user, "") << "an agent's session stays the agent's";
  EXPECT_EQ(agents->agent, "coder");
}

// grep under a place that does not exist is not_found, as glob, ls and find are, not "no matches".
TEST_F(EngineTest, GrepUnderAPlaceThatDoesNotExistIsNotFound) {
  ASSERT_OK(engine_->Write("strata://resources/notes/lamp", "An old brass lantern."));
  auto missing = engine_->Grep("lantern", "strata://resources/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("strata://resources/nope"), std::string::npos) << missing.status().message();
  auto none = engine_->Grep("candle", "strata://resources/notes");
  ASSERT_OK(none);
  EXPECT_TRUE(none->empty());
  auto leaf = engine_->Grep("brass", "strata://resources/notes/lamp");
  ASSERT_OK(leaf);
  EXPECT_EQ(leaf->size(), 1u);
  // A scope with nothing in it yet is not there either, for grep as for glob.
  EXPECT_EQ(engine_->Grep("candle", "strata://user/alice").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->Glob("*", "strata://user/alice").status().code(), StatusCode::kNotFound);
  auto everywhere = engine_->Grep("candle", "");  // Not named: every scope, none missing.
  ASSERT_OK(everywhere);
  EXPECT_TRUE(everywhere->empty());
}

TEST_F(EngineTest, CommitWaitTurnsASessionIntoMemories) {
  auto s = engine_->CreateSession("alice", "helper", "s1");
  ASSERT_OK(s);
  std::vector<Message> messages = {Message::User("I always want an aisle seat."), Message::Assistant("Noted.")};
  auto added = engine_->AddMessages("s1", messages);
  ASSERT_OK(added);
  EXPECT_EQ(added->stats.messages, 2);
  auto outcome = engine_->Commit("s1", {.wait = true});
  ASSERT_OK(outcome);
  ASSERT_OK(outcome->phase2);
  ASSERT_TRUE(outcome->diff.has_value());
  ASSERT_EQ(outcome->diff->changes.size(), 1u);
  EXPECT_EQ(outcome->diff->changes[0].uri, "strata://user/alice/memories/preferences/seat_preference");
  auto memory = engine_->Read("strata://user/alice/memories/preferences/seat_preference");
  ASSERT_OK(memory);
  EXPECT_EQ(*memory, "Alice prefers aisle seats on long flights.");
  auto history = engine_->MemoryHistory("strata://user/alice/memories/preferences/seat_preference");
  ASSERT_OK(history);
  ASSERT_EQ(history->size(), 1u);
  EXPECT_EQ((*history)[0].action, session::MemoryAction::kCreate);
}

// Commit with wait runs its own session's jobs, up to its own: another session's queued phase 2 is the
// workers' (a server's, `strata session work`), not the caller's, whose model and time it would take.
TEST_F(EngineTest, CommitWaitRunsOnlyItsOwnSessionsJobs) {
  ASSERT_OK(engine_->CreateSession("bob", "", "queued"));
  ASSERT_OK(engine_->AddMessages("queued", std::vector<Message>{Message::User("I always want a window seat.")}));
  ASSERT_OK(engine_->Commit("queued"));
  ASSERT_OK(engine_->CreateSession("alice", "", "s1"));
  ASSERT_OK(engine_->AddMessages("s1", std::vector<Message>{Message::User("I always want an aisle seat.")}));
  auto outcome = engine_->Commit("s1", {.wait = true});
  ASSERT_OK(outcome);
  ASSERT_OK(outcome->phase2);
  EXPECT_EQ(outcome->state, session::ArchiveState::kDone);
  auto other = engine_->GetSessionStatus("queued");
  ASSERT_OK(other);
  ASSERT_EQ(other->jobs.size(), 1u);
  EXPECT_EQ(other->jobs[0].state, session::JobState::kPending);
  ASSERT_EQ(other->archives.size(), 1u);
  EXPECT_EQ(other->archives[0].state, session::ArchiveState::kArchived);
  auto work = engine_->Work();  // The worker's turn: the other session's job runs now.
  ASSERT_OK(work);
  EXPECT_EQ(work->completed, 1);
  other = engine_->GetSessionStatus("queued");
  ASSERT_OK(other);
  EXPECT_EQ(other->archives[0].state, session::ArchiveState::kDone);
}

// A commit whose phase 2 ran elsewhere (the server's worker, `strata session work`) is reported by
// ArchiveDiff exactly as Commit with wait reports it; before it is done, and from a damaged diff.json, an
// error naming the archive, never a made-up diff.
TEST_F(EngineTest, ArchiveDiffReportsWhatCommitWaitReportedOnceTheArchiveIsDone) {
  ASSERT_OK(engine_->CreateSession("alice", "", "waited"));
  ASSERT_OK(engine_->AddMessages("waited", std::vector<Message>{Message::User("I always want an aisle seat.")}));
  auto waited = engine_->Commit("waited", {.wait = true});
  ASSERT_OK(waited);
  ASSERT_TRUE(waited->diff.has_value());
  auto read_back = engine_->ArchiveDiff("waited", 1);
  ASSERT_OK(read_back);
  EXPECT_EQ(views::CommitDiffView(*read_back), views::CommitDiffView(*waited->diff));

  ASSERT_OK(engine_->CreateSession("alice", "", "later"));
  ASSERT_OK(engine_->AddMessages("later", std::vector<Message>{Message::User("I always want a window seat.")}));
  ASSERT_OK(engine_->Commit("later"));
  Status early = engine_->ArchiveDiff("later", 1).status();
  EXPECT_EQ(early.code(), StatusCode::kFailedPrecondition) << early.ToString();
  EXPECT_NE(early.message().find("session later archive 1 is archived"), std::string::npos) << early.message();
  EXPECT_EQ(engine_->ArchiveDiff("later", 2).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(engine_->ArchiveDiff("nobody", 1).status().code(), StatusCode::kNotFound);
  extraction_ = Text(R"({"memories": [{"category": "preferences", "key": "window", "abstract": "Window seats",
                          "content": "Alice wants a window seat."}]})");
  auto work = engine_->Work();
  ASSERT_OK(work);
  EXPECT_EQ(work->completed, 1);
  auto done = engine_->ArchiveDiff("later", 1);
  ASSERT_OK(done);
  EXPECT_EQ(done->session, "later");
  EXPECT_EQ(done->summary, "Alice talked about travel.");
  ASSERT_EQ(done->changes.size(), 1u);
  EXPECT_EQ(done->changes[0].uri, "strata://user/alice/memories/preferences/window");

  const std::string file = Archive("later", 1).dir + "/diff.json";
  ASSERT_TRUE(std::filesystem::exists(file)) << file;
  for (const char* damaged : {"[1, 2]", "{\"changes\": 5}", "{\"changes\": [{\"action\": \"explode\"}]}",
                              "{\"changes\": [7]}", "not json"}) {
    SCOPED_TRACE(damaged);
    WriteFile(file, damaged);
    Status s = engine_->ArchiveDiff("later", 1).status();
    EXPECT_EQ(s.code(), StatusCode::kDataLoss) << s.ToString();
    EXPECT_NE(s.message().find("session later archive 1"), std::string::npos) << s.message();
  }
  std::filesystem::remove(file);
  EXPECT_EQ(engine_->ArchiveDiff("later", 1).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(*engine_->Read("strata://user/alice/memories/preferences/seat_preference"),
            "Alice prefers aisle seats on long flights.")
      << "reading a damaged diff changes nothing stored";
}

// A deployment without its prompts (a program copied away from share/strata/prompts) keeps a remembered text
// as written, as it does without a model: it was refused ("prompt 'memory.extract' not found", 404).
TEST_F(EngineTest, RememberWithoutThePipelinesPromptsKeepsTheTextAsWritten) {
  testing::TempDir empty;
  auto e = Engine::Open({.data_dir = dir_.File("other"), .model = model_.get(), .ignore_prompt_env = true,
                         .shipped_prompts_dir = empty.path()});
  ASSERT_OK(e);
  auto kept = (*e)->Remember("strata://user/alice", "Alice likes green tea.");
  ASSERT_OK(kept);
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_NE(kept->front().reason.find("kept as written, without deduplication: prompt 'memory.extract' not found"),
            std::string::npos)
      << kept->front().reason;
  EXPECT_EQ(*(*e)->Read(kept->front().uri), "Alice likes green tea.");
  // The same words with other blanks at their ends are the same text: skipped, not a second note.
  for (const char* again : {"Alice likes green tea.\n", "  Alice likes green tea.  "}) {
    auto same = (*e)->Remember("strata://user/alice", again);
    ASSERT_OK(same);
    ASSERT_EQ(same->size(), 1u);
    EXPECT_EQ(same->front().action, session::MemoryAction::kSkip) << again;
    EXPECT_EQ(same->front().uri, kept->front().uri);
  }
}

// The model's own refusal (a 400 for a prompt it will not take, a 404 for a wrong model name, a 429) is not
// the caller's mistake: remember keeps the text as written whatever the code (a 400 or 404 lost it and came
// back as the caller's own invalid_argument / not_found), and consolidation names the model.
TEST_F(EngineTest, TheModelsRefusalIsNotTheCallersErrorAndRememberKeepsTheText) {
  for (int code : {400, 404, 429}) {
    SCOPED_TRACE(code);
    llm::ScriptedReply refused;
    refused.error = llm::HttpStatusError(code, R"({"error":{"message":"no such model"}})");
    extraction_ = refused;
    const std::string text = "Alice keeps bees, code " + std::to_string(code) + ".";
    auto kept = engine_->Remember("strata://user/alice", text);
    ASSERT_OK(kept);
    ASSERT_EQ(kept->size(), 1u);
    EXPECT_NE(kept->front().reason.find("kept as written"), std::string::npos) << kept->front().reason;
    EXPECT_EQ(*engine_->Read(kept->front().uri), text);
  }
  ASSERT_OK(engine_->Write("strata://user/alice/memories/preferences/a", "Alice prefers aisle seats on flights."));
  ASSERT_OK(engine_->Write("strata://user/alice/memories/preferences/b", "Alice prefers aisle seats on long flights."));
  dedup_.error = llm::HttpStatusError(404, R"({"error":{"message":"model not found"}})");
  auto consolidated = engine_->Consolidate("strata://user/alice");
  ASSERT_FALSE(consolidated.ok());
  EXPECT_EQ(consolidated.status().code(), StatusCode::kFailedPrecondition) << consolidated.status().ToString();
  EXPECT_NE(consolidated.status().message().find("the model refused the request"), std::string::npos)
      << consolidated.status().ToString();
}

// Remember without a model holds the owner's memories as phase 2 and consolidation do, in every process:
// two at once both found the note missing and both logged a create.
TEST_F(EngineTest, RememberWithoutAModelWaitsForTheOwnersOtherWriter) {
  llm::ScriptedReply down;
  down.error = Status::Unavailable("the model is overloaded (HTTP 503)");
  extraction_ = down;
  auto locks = session::OpenFileOwnerLocks(dir_.path() + "/locks");
  ASSERT_OK(locks);
  auto held = (*locks)->Lock({"user/alice"});  // Another process decides alice's memories.
  ASSERT_OK(held);
  auto waiting = std::async(std::launch::async, [&] { return engine_->Remember("strata://user/alice", "Alice likes green tea."); });
  EXPECT_EQ(waiting.wait_for(std::chrono::milliseconds(300)), std::future_status::timeout)
      << "remember wrote while another process held alice's memories";
  held->reset();
  auto kept = waiting.get();
  ASSERT_OK(kept);
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ(kept->front().action, session::MemoryAction::kCreate);
}

// Remember with a model that fails: before anything was remembered the text is kept as written (the same
// answer every front end gives); after part of it was, the error names what was made and nothing is kept
// twice.
TEST_F(EngineTest, RememberKeepsTheTextOnlyWhenTheModelFailedBeforeAnythingWasRemembered) {
  llm::ScriptedReply down;
  down.error = Status::Unavailable("the model is overloaded (HTTP 503)");
  extraction_ = down;
  auto kept = engine_->Remember("strata://user/alice", "Alice likes green tea.");
  ASSERT_OK(kept);
  ASSERT_EQ(kept->size(), 1u);
  EXPECT_EQ(kept->front().uri.rfind("strata://user/alice/memories/notes/note-", 0), 0u) << kept->front().uri;
  EXPECT_NE(kept->front().reason.find("without deduplication: "), std::string::npos) << kept->front().reason;
  EXPECT_NE(kept->front().reason.find("overloaded"), std::string::npos) << kept->front().reason;
  // A model whose answers are not JSON has failed too, not the caller: it was a 400 blaming the request, and
  // nothing was kept.
  extraction_ = Text("Hello, Alice.");
  auto garbled = engine_->Remember("strata://user/alice", "Alice's cat is named Tom.");
  ASSERT_OK(garbled);
  ASSERT_EQ(garbled->size(), 1u);
  EXPECT_NE(garbled->front().reason.find("memory extraction failed after 2 attempts: the model's replies could not be used"),
            std::string::npos)
      << garbled->front().reason;
  EXPECT_EQ(*engine_->Read(garbled->front().uri), "Alice's cat is named Tom.");
  ASSERT_OK(engine_->Remove(garbled->front().uri, false));
  // Two facts; the first is stored, the dedup of the second (similar to the first) fails.
  extraction_ = Text(R"({"memories": [
      {"category": "preferences", "key": "seat_preference", "abstract": "Prefers aisle seats", "content": "Alice prefers aisle seats on long flights."},
      {"category": "preferences", "key": "seat_short", "abstract": "Prefers aisle seats", "content": "Alice prefers aisle seats on long flights too."}]})");
  dedup_ = down;
  auto partial = engine_->Remember("strata://user/alice", "Alice prefers aisle seats on long flights.");
  ASSERT_FALSE(partial.ok());
  EXPECT_EQ(partial.status().code(), StatusCode::kAborted) << partial.status().ToString();
  EXPECT_NE(partial.status().message().find("1 change(s) were made: strata://user/alice/memories/preferences/seat_preference"),
            std::string::npos)
      << partial.status().message();
  auto notes = engine_->List("strata://user/alice/memories/notes");
  ASSERT_OK(notes);
  EXPECT_EQ(notes->size(), 1u) << "only the first text was kept as written";
}

// A blank text is refused before any model sees it (the model here would extract a memory from anything),
// and before the scope is looked at: one answer for it from every path through Remember.
TEST_F(EngineTest, RememberRefusesABlankTextWithOrWithoutAModel) {
  auto shared = engine_->Remember("strata://resources", " ");
  ASSERT_FALSE(shared.ok());
  EXPECT_NE(shared.status().message().find("the text is empty"), std::string::npos) << shared.status().message();
  for (const char* blank : {"", "   ", "\n\t "}) {
    auto refused = engine_->Remember("strata://user/alice", blank);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(refused.status().message().find("the text is empty"), std::string::npos) << refused.status().message();
  }
  auto memories = engine_->List("strata://user/alice/memories", {.recursive = true});
  EXPECT_TRUE(!memories.ok() || std::none_of(memories->begin(), memories->end(),
                                              [](const memory::Node& n) { return !n.is_dir; }));
}

// Text that is not UTF-8 is refused naming the byte, with or without a model (with one it reached the
// model's prompt renderer and came back an internal error).
TEST_F(EngineTest, RememberRefusesTextThatIsNotUtf8) {
  auto refused = engine_->Remember("strata://user/alice", "my PIN is \xFF\xFE");
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << refused.status().ToString();
  EXPECT_EQ(refused.status().message(), "remember: the text is not valid UTF-8 (byte 10)");
}

// A dedup reply whose fields have the wrong types must not end the process: it is read by the documented
// rules (an unusable decision keeps the candidate as new).
TEST_F(EngineTest, WronglyTypedDedupRepliesAreReadByTheRulesNotThrown) {
  ASSERT_OK(engine_->Write("strata://user/alice/memories/preferences/seat_preference",
                           "Alice prefers aisle seats on long flights and short ones."));
  for (const char* reply : {R"({"decision": 1})", R"({"decision": "merge", "merge_into": "0", "content": 7})",
                            R"({"decision": "create", "actions": [{"index": 0, "action": 1}, {"index": "0"}]})",
                            R"({"decision": ["skip"], "reason": {"why": 1}})", R"([1, 2, 3])"}) {
    SCOPED_TRACE(reply);
    dedup_ = Text(reply);
    // Another text each time: the same text again is a duplicate without asking the model.
    auto changes = engine_->Remember("strata://user/alice",
                                     "Alice prefers aisle seats on long flights, " + std::string(reply), "preferences");
    ASSERT_OK(changes);
    ASSERT_FALSE(changes->empty());
  }
  EXPECT_GE(dedup_calls_, 5);  // Each reply was really read: the memories were similar enough to ask.
}

TEST_F(EngineTest, WronglyTypedExtractionIsRetriedThenFailsTheArchiveWithTheReason) {
  extraction_ = Text(R"({"memories": [{"category": 5, "content": ["x"]}]})");
  ASSERT_OK(engine_->CreateSession("alice", "", "s1"));
  ASSERT_OK(engine_->AddMessages("s1", std::vector<Message>{Message::User("hello")}));
  auto outcome = engine_->Commit("s1", {.wait = true});
  ASSERT_OK(outcome);
  EXPECT_FALSE(outcome->phase2.ok());
  EXPECT_NE(outcome->phase2.message().find("category"), std::string::npos) << outcome->phase2.message();
}

// A reply the model had to be asked for again is visible afterwards: in the archive's notes (session
// status) and in the memory's audit trail (memory history).
TEST_F(EngineTest, ModelRetriesAreRecordedInStatusAndHistory) {
  extraction_queue_ = {Text("Sorry, I cannot produce JSON today.")};
  ASSERT_OK(engine_->Write("strata://user/alice/memories/preferences/seat_preference",
                           "Alice prefers aisle seats on long flights and short ones."));
  dedup_queue_ = {Text(R"({"decision": "merge", "merge_into": 0)")};  // Truncated: asked again.
  dedup_ = Text(R"({"decision": "merge", "merge_into": 0, "content": "Alice prefers aisle seats.", "reason": "same"})");
  ASSERT_OK(engine_->CreateSession("alice", "", "s1"));
  ASSERT_OK(engine_->AddMessages("s1", std::vector<Message>{Message::User("I always want an aisle seat.")}));
  auto outcome = engine_->Commit("s1", {.wait = true});
  ASSERT_OK(outcome);
  ASSERT_OK(outcome->phase2);
  session::ArchiveInfo a = Archive("s1", 1);
  ASSERT_EQ(a.notes.size(), 1u);
  EXPECT_NE(a.notes[0].find("extraction"), std::string::npos) << a.notes[0];
  EXPECT_NE(a.notes[0].find("asked again"), std::string::npos) << a.notes[0];
  EXPECT_EQ(views::ArchiveView(a)["notes"].size(), 1u);
  auto history = engine_->MemoryHistory("strata://user/alice/memories/preferences/seat_preference");
  ASSERT_OK(history);
  ASSERT_FALSE(history->empty());
  EXPECT_EQ(history->back().action, session::MemoryAction::kMerge);
  EXPECT_NE(history->back().reason.find("model asked again"), std::string::npos) << history->back().reason;
}

// Cancelling phase 2 leaves the commit standing and the job queued; the next run finishes it.
TEST_F(EngineTest, CancelledPhaseTwoStaysQueuedAndResumes) {
  Canceller cancel;
  on_call_ = [&](Stage stage) {
    if (stage == Stage::kSummary) cancel.Cancel();
  };
  ASSERT_OK(engine_->CreateSession("alice", "", "s1"));
  ASSERT_OK(engine_->AddMessages("s1", std::vector<Message>{Message::User("I always want an aisle seat.")}));
  auto outcome = engine_->Commit("s1", {.wait = true, .cancel = &cancel});
  ASSERT_OK(outcome);  // Phase 1 happened.
  EXPECT_EQ(outcome->phase2.code(), StatusCode::kCancelled) << outcome->phase2.ToString();
  EXPECT_EQ(Archive("s1", 1).state, session::ArchiveState::kArchived);
  on_call_ = nullptr;
  auto status = engine_->GetSessionStatus("s1");
  ASSERT_OK(status);
  ASSERT_EQ(status->jobs.size(), 1u);
  EXPECT_EQ(status->jobs[0].state, session::JobState::kPending);
  ASSERT_OK((*engine_->queue())->Expedite(status->jobs[0].key));  // Skip the retry backoff.
  auto work = engine_->Work();
  ASSERT_OK(work);
  EXPECT_EQ(work->completed, 1);
  EXPECT_EQ(Archive("s1", 1).state, session::ArchiveState::kDone);
}

// A model configuration that cannot be used (here a script that is not one) fails phase 2, not the commit:
// phase 1 has archived the messages by then, and an error raised lost the archive's number and the task's
// id (a second commit found nothing to commit).
TEST_F(EngineTest, APhase2ThatCannotRunHereIsTheOutcomesNotTheCommits) {
  testing::TempDir dir;
  testing::WriteFileOrDie(dir.File("script.json"), "not a script");
  auto opened = Engine::Open({.data_dir = dir.File("data"),
                              .provider = {.provider = "scripted", .script = dir.File("script.json")}});
  ASSERT_OK(opened);
  Engine& engine = **opened;
  ASSERT_OK(engine.CreateSession("alice", "", "s1"));
  ASSERT_OK(engine.AddMessages("s1", std::vector<Message>{Message::User("I always want an aisle seat.")}));
  auto outcome = engine.Commit("s1", {.wait = true});
  ASSERT_OK(outcome);
  EXPECT_EQ(outcome->ticket.archive, 1);
  EXPECT_GT(outcome->ticket.job_id, 0);
  EXPECT_FALSE(outcome->phase2.ok());
  EXPECT_NE(outcome->phase2.message().find("script"), std::string::npos) << outcome->phase2.ToString();
  // The job waits for a configuration that works.
  auto status = engine.GetSessionStatus("s1");
  ASSERT_OK(status);
  ASSERT_EQ(status->jobs.size(), 1u);
  EXPECT_EQ(status->jobs[0].id, outcome->ticket.job_id);
  EXPECT_EQ(status->jobs[0].state, session::JobState::kPending);
}

TEST_F(EngineTest, APermanentModelErrorFailsTheArchiveOnceAndRetryRequeuesIt) {
  summary_.error = Status::FailedPrecondition("HTTP 401: invalid api key");
  ASSERT_OK(engine_->CreateSession("alice", "", "s1"));
  ASSERT_OK(engine_->AddMessages("s1", std::vector<Message>{Message::User("I always want an aisle seat.")}));
  auto outcome = engine_->Commit("s1", {.wait = true});
  ASSERT_OK(outcome);
  EXPECT_EQ(outcome->phase2.code(), StatusCode::kUnavailable);
  EXPECT_NE(outcome->phase2.message().find("401"), std::string::npos) << outcome->phase2.message();
  session::ArchiveInfo a = Archive("s1", 1);
  EXPECT_EQ(a.state, session::ArchiveState::kFailed);
  EXPECT_NE(a.error.find("401"), std::string::npos);

  // Reopening does not queue it again (it would only fail again) ...
  Reopen();
  auto status = engine_->GetSessionStatus("s1");
  ASSERT_OK(status);
  ASSERT_EQ(status->jobs.size(), 1u);
  EXPECT_EQ(status->jobs[0].state, session::JobState::kDead);
  // ... until the cause is fixed and the user asks.
  summary_ = Text("Alice talked about travel.");
  auto requeued = engine_->Retry("s1");
  ASSERT_OK(requeued);
  EXPECT_EQ(*requeued, 1);
  auto work = engine_->Work();
  ASSERT_OK(work);
  EXPECT_EQ(work->completed, 1);
  EXPECT_EQ(Archive("s1", 1).state, session::ArchiveState::kDone);
  EXPECT_OK(engine_->Stat("strata://user/alice/memories/preferences/seat_preference").status());
}

TEST_F(EngineTest, DamagedSessionFilesAreErrorsNamingTheFileAndLeaveOtherSessionsWorking) {
  ASSERT_OK(engine_->CreateSession("alice", "", "good"));
  ASSERT_OK(engine_->CreateSession("bob", "", "bad"));
  ASSERT_OK(engine_->AddMessages("bad", std::vector<Message>{Message::User("hi")}));
  ASSERT_OK(engine_->Commit("bad"));
  std::string info = dir_.File("sessions/bad/session.json");
  Json j = Json::parse(ReadFile(info));
  j["user"] = 1;
  WriteFile(info, j.dump());
  WriteFile(dir_.File("sessions/bad/history/archive_001/state.json"), R"({"state": "archived", "messages": "x"})");
  Reopen();
  auto got = engine_->GetSession("bad");
  EXPECT_EQ(got.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("session.json"), std::string::npos) << got.status().message();
  EXPECT_NE(got.status().message().find("\"user\""), std::string::npos) << got.status().message();
  // The other session is untouched by the damage.
  auto good = engine_->AddMessages("good", std::vector<Message>{Message::User("still here")});
  ASSERT_OK(good);
  EXPECT_EQ(good->stats.messages, 1);
  auto list = engine_->ListSessions();
  ASSERT_OK(list);
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].id, "good");
}

TEST_F(EngineTest, DamagedCandidatesFileFailsTheArchiveInsteadOfTheProcess) {
  ASSERT_OK(engine_->CreateSession("alice", "", "s1"));
  ASSERT_OK(engine_->AddMessages("s1", std::vector<Message>{Message::User("hi")}));
  auto outcome = engine_->Commit("s1");
  ASSERT_OK(outcome);
  std::string dir = dir_.File("sessions/s1/history/archive_001");
  WriteFile(dir + "/summary.md", "A summary.");
  WriteFile(dir + "/candidates.json", R"([{"category": 1, "content": "x", "dir": "strata://user/alice/memories/x"}])");
  auto work = engine_->Work();
  ASSERT_OK(work);
  EXPECT_EQ(work->completed, 0);
  EXPECT_EQ(work->dead, 1u);
  session::ArchiveInfo a = Archive("s1", 1);
  EXPECT_EQ(a.state, session::ArchiveState::kFailed);
  EXPECT_NE(a.error.find("candidates.json"), std::string::npos) << a.error;
}

TEST_F(EngineTest, PhaseTwoHasOneOwnerPerDataDirectory) {
  auto other = Engine::Open({.data_dir = dir_.path(), .model = model_.get(), .ignore_prompt_env = true,
                             .shipped_prompts_dir = STRATA_PROMPTS_DIR});
  ASSERT_OK(other);
  ASSERT_OK(engine_->Work().status());  // This engine now holds the worker lock (as a server would).
  auto second = (*other)->Work();
  EXPECT_EQ(second.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(second.status().message().find("worker.lock"), std::string::npos) << second.status().message();
  EXPECT_NE(second.status().message().find("pid"), std::string::npos) << second.status().message();
  engine_.reset();  // Releases it.
  EXPECT_OK((*other)->Work().status());
}

TEST_F(EngineTest, SkillsRoundTripAsSkillMd) {
  std::string path = dir_.File("SKILL.md");
  WriteFile(path, "---\nname: deploy\ndescription: Deploys the service to staging.\n---\n# Deploy\nRun make deploy.\n");
  auto uri = engine_->AddSkill("default", path);
  ASSERT_OK(uri);
  EXPECT_EQ(*uri, "strata://agent/default/skills/deploy");
  auto list = engine_->ListSkills("default");
  ASSERT_OK(list);
  ASSERT_EQ(list->size(), 1u);
  EXPECT_EQ((*list)[0].abstract_text, "Deploys the service to staging.");
  auto md = engine_->ShowSkill("default", "deploy");
  ASSERT_OK(md);
  EXPECT_NE(md->find("name: deploy"), std::string::npos);
  EXPECT_NE(md->find("Run make deploy."), std::string::npos);
  // A write over the skill's node (fs write, MCP's edit) changes what the skill says: its old SKILL.md was
  // served, secret and all, to every agent.
  ASSERT_OK(engine_->Write("strata://agent/default/skills/deploy", "# Deploy\nRun make release.\n"));
  md = engine_->ShowSkill("default", "deploy");
  ASSERT_OK(md);
  EXPECT_EQ(*md, "---\nname: deploy\ndescription: \"Deploys the service to staging.\"\n---\n# Deploy\nRun make release.\n");
}

// ls, tree and grep tell a superseded memory from its successor.
TEST_F(EngineTest, SupersededMemoriesAreMarkedInListingsAndGrep) {
  ASSERT_OK(engine_->Write("strata://user/alice/memories/preferences/seat", "Alice prefers window seats.",
                           {.metadata = R"({"valid_to": 5, "superseded_by": "strata://user/alice/memories/preferences/seat2"})"}));
  ASSERT_OK(engine_->Write("strata://user/alice/memories/preferences/seat2", "Alice prefers aisle seats."));
  auto list = engine_->List("strata://user/alice/memories/preferences");
  ASSERT_OK(list);
  ASSERT_EQ(list->size(), 2u);
  EXPECT_TRUE(views::IsSuperseded((*list)[0]));
  EXPECT_FALSE(views::IsSuperseded((*list)[1]));
  EXPECT_EQ(views::NodeView((*list)[0])["superseded"], true);
  auto grep = engine_->Grep("prefers", "strata://user/alice");
  ASSERT_OK(grep);
  ASSERT_EQ(grep->size(), 2u);
  EXPECT_TRUE((*grep)[0].superseded);
  EXPECT_FALSE((*grep)[1].superseded);
}

TEST(EngineViews, SupersededMemoriesAreMarked) {
  memory::Node n;
  n.uri = *memory::Uri::Parse("strata://user/a/memories/preferences/x");
  n.metadata = R"({"valid_from": 1})";
  EXPECT_FALSE(views::NodeView(n).contains("superseded"));
  n.metadata = R"({"valid_to": 5, "superseded_by": "strata://user/a/memories/preferences/y"})";
  EXPECT_EQ(views::NodeView(n)["superseded"], true);
  n.metadata = "not json";
  EXPECT_FALSE(views::IsSuperseded(n));
}

TEST(EngineProviderConfig, WronglyTypedConfigMembersAreNamed) {
  testing::TempDir dir;
  std::string path = dir.File("config.json");
  WriteFile(path, R"({"provider": "ollama", "model": 5})");
  auto config = LoadConfigFile(path);
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(config.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(config.status().message().find("\"model\" must be a string"), std::string::npos) << config.status().message();
  WriteFile(path, R"({"provider": "ollama", "model": "llama3.2", "options": {"temperature": 0}, "max_context_tokens": 8000})");
  config = LoadConfigFile(path);
  ASSERT_OK(config);
  EXPECT_EQ(config->max_context_tokens, 8000);
  auto provider = MakeProvider({.base_url = "http://127.0.0.1:9/v1"}, *config);
  ASSERT_OK(provider);
  EXPECT_EQ((*provider)->name(), "ollama");
  EXPECT_EQ((*provider)->model(), "llama3.2");  // The config's model, over the preset's.
  provider = MakeProvider({.provider = "openai", .model = "gpt-x", .base_url = "http://127.0.0.1:9/v1"}, *config);
  ASSERT_OK(provider);
  EXPECT_EQ((*provider)->model(), "gpt-x");  // Flags win.
  EXPECT_EQ(LoadConfigFile(dir.File("missing.json")).status().code(), StatusCode::kNotFound);
  // A directory, or text that is not JSON, is refused naming what is wrong and where (a directory threw out
  // as an internal error; bad JSON said only "expected a JSON object").
  std::filesystem::create_directory(dir.File("config.d"));
  auto is_dir = LoadConfigFile(dir.File("config.d"));
  EXPECT_EQ(is_dir.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(is_dir.status().message().find("is a directory"), std::string::npos) << is_dir.status().message();
  testing::WriteFileOrDie(dir.File("broken.json"), "{\"provider\": \"openai\",, }");
  auto broken = LoadConfigFile(dir.File("broken.json"));
  EXPECT_EQ(broken.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(broken.status().message().find("byte"), std::string::npos) << broken.status().message();
}

// A hosted service without a key can only refuse (HTTP 401): the request fails at once, as permanently,
// naming the variable to set, instead of a network round trip and its retries (phase 2 of a server with no
// key configured waited on them for every commit). A local server or another base URL may need no key.
TEST(EngineProviderConfig, AHostedServiceWithoutAKeyFailsAtOnceNamingTheKey) {
  const char* saved = std::getenv("OPENAI_API_KEY");
  std::string restore = saved != nullptr ? saved : "";
  unsetenv("OPENAI_API_KEY");
  ConfigFile none;
  auto resolved = ResolveProviderConfig({.provider = "openai"}, none);
  ASSERT_OK(resolved);
  EXPECT_NE(resolved->missing_key.find("set OPENAI_API_KEY"), std::string::npos) << resolved->missing_key;
  auto provider = MakeProvider({.provider = "openai"}, none);
  ASSERT_OK(provider);
  std::vector<Message> history = {Message::User("hi")};
  auto started = (*provider)->Generate("", {}, history, {});
  ASSERT_FALSE(started.ok());
  EXPECT_EQ(started.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(started.status().message().find("no API key for the openai provider"), std::string::npos)
      << started.status().message();
  EXPECT_EQ(ResolveProviderConfig({}, none)->missing_key, resolved->missing_key) << "openai is the default";
  // A credential given as an extra header stands in for the key: the request is made (here to a closed port).
  llm::ProviderConfig with_header = *resolved;
  with_header.headers = {{"Authorization", "Bearer sk-from-a-header"}};
  with_header.base_url = "http://127.0.0.1:9/v1";
  with_header.retry.max_attempts = 1;
  auto headed = llm::NewHttpProvider(with_header);
  ASSERT_OK(headed);
  auto sent = (*headed)->Generate("", {}, history, {});
  ASSERT_FALSE(sent.ok());
  EXPECT_NE(sent.status().code(), StatusCode::kFailedPrecondition) << sent.status().ToString();
  EXPECT_EQ(ResolveProviderConfig({.provider = "openai", .base_url = "http://127.0.0.1:8080/v1"}, none)->missing_key, "");
  EXPECT_EQ(ResolveProviderConfig({.provider = "ollama"}, none)->missing_key, "");
  EXPECT_NE(ResolveProviderConfig({.provider = "anthropic"}, none)->missing_key.find("ANTHROPIC_API_KEY"),
            std::string::npos);
  ConfigFile keyed;
  keyed.api_key = "sk-test";
  EXPECT_EQ(ResolveProviderConfig({.provider = "openai"}, keyed)->missing_key, "");
  setenv("OPENAI_API_KEY", "sk-env", 1);
  EXPECT_EQ(ResolveProviderConfig({.provider = "openai"}, none)->missing_key, "");
  if (saved != nullptr) {
    setenv("OPENAI_API_KEY", restore.c_str(), 1);
  } else {
    unsetenv("OPENAI_API_KEY");
  }
}

// ---- Conversation: the turn loop at library level ----

class ConversationTest : public ::testing::Test {
 protected:
  const MessageTokenCounter& counter_ = Engine::Counter("chars");
  testing::TempDir dir_;
};

TEST_F(ConversationTest, TurnsUndoClearAndResumeAcrossOpens) {
  llm::ScriptedProvider model("m", std::vector<llm::ScriptedReply>{Text("Hello!"), Text("Paris."), Text("Again.")});
  std::string path = dir_.File("chat/context.jsonl");
  {
    auto c = Conversation::Open(path, model, counter_, {.system_prompt = "Be brief."});
    ASSERT_OK(c);
    std::string streamed;
    TurnCallbacks callbacks;
    callbacks.on_part = [&](const StreamedPart& p) {
      if (const auto* part = std::get_if<ContentPart>(&p)) {
        if (const auto* t = std::get_if<TextPart>(part)) streamed += t->text;
      }
    };
    auto turn = (*c)->Turn("hi", callbacks);
    ASSERT_OK(turn);
    EXPECT_EQ(streamed, "Hello!");
    EXPECT_EQ(turn->steps, 1);
    ASSERT_OK((*c)->Turn("Capital of France?").status());
    EXPECT_EQ((*c)->log().history().size(), 4u);
    // The second request carried the whole history and the system prompt.
    auto requests = model.requests();
    ASSERT_EQ(requests.size(), 2u);
    EXPECT_EQ(requests[1].system_prompt, "Be brief.");
    EXPECT_EQ(requests[1].history.size(), 3u);
    auto undone = (*c)->Undo();
    ASSERT_OK(undone);
    EXPECT_EQ(**undone, 1);
    EXPECT_EQ((*c)->log().history().size(), 2u);
    ASSERT_OK((*c)->Close());
  }
  auto c = Conversation::Open(path, model, counter_);
  ASSERT_OK(c);
  EXPECT_EQ((*c)->log().history().size(), 2u);  // Resumed from the log.
  EXPECT_EQ((*c)->system_prompt(), "Be brief.");
  ASSERT_OK((*c)->Clear());
  EXPECT_TRUE((*c)->log().history().empty());
  auto nothing = (*c)->Undo();
  ASSERT_OK(nothing);
  EXPECT_FALSE(nothing->has_value());
}

TEST_F(ConversationTest, ToolCallsAreAnsweredAndTheModelCalledAgainUntilItStops) {
  llm::ScriptedProvider model("m", std::vector<llm::ScriptedReply>{Call("c1", "nope", "{}"), Text("Done.")});
  auto c = Conversation::Open(dir_.File("t.jsonl"), model, counter_);
  ASSERT_OK(c);
  std::vector<std::string> calls;
  TurnCallbacks callbacks;
  callbacks.on_tool_call = [&](const ToolCall& call) { calls.push_back(call.function.name); };
  auto turn = (*c)->Turn("use a tool", callbacks);
  ASSERT_OK(turn);
  EXPECT_EQ(turn->steps, 2);
  EXPECT_EQ(calls, std::vector<std::string>{"nope"});
  // assistant(call), tool(result), assistant(text)
  ASSERT_EQ(turn->messages.size(), 3u);
  EXPECT_EQ(turn->messages[1].role, Role::kTool);
  EXPECT_NE(turn->messages[1].ExtractText().find("nope"), std::string::npos);
  EXPECT_EQ(turn->messages[2].ExtractText(), "Done.");
}

// The provider's usage counts the context up to its reply, not the tool results after it: the mark goes
// between them (as kimi-cli writes it), so a large tool output counts as pending until the next reply. (It
// went after the results, and a 9,000-token file read was counted as already included.)
TEST_F(ConversationTest, TheUsageMarkGoesBeforeTheToolResults) {
  llm::ScriptedReply call = Call("c1", "nope", "{}");
  call.usage = TokenUsage{.input_other = 40, .output = 2};
  llm::ScriptedReply done = Text("Done.");
  done.usage = TokenUsage{.input_other = 60, .output = 3};
  llm::ScriptedProvider model("m", std::vector<llm::ScriptedReply>{call, done});
  std::string path = dir_.File("usage.jsonl");
  auto c = Conversation::Open(path, model, counter_);
  ASSERT_OK(c);
  ASSERT_OK((*c)->Turn("use a tool").status());
  // user, assistant(call), tool, assistant: the marks after the call (2 messages) and after the last reply.
  auto marks = (*c)->log().usage_marks();
  ASSERT_EQ(marks.size(), 2u);
  EXPECT_EQ(marks[0].messages, 2u);
  EXPECT_EQ(marks[0].tokens, 42);
  EXPECT_EQ(marks[1].messages, 4u);
  std::string text = testing::ReadFileOrDie(path);
  EXPECT_LT(text.find("\"token_count\": 42"), text.find("\"role\": \"tool\""))
      << "the mark is written before the tool result:\n" << text;
  ASSERT_OK((*c)->Close());
  // Read back from the file, the same.
  auto again = Conversation::Open(path, model, counter_);
  ASSERT_OK(again);
  ASSERT_EQ((*again)->log().usage_marks().size(), 2u);
  EXPECT_EQ((*again)->log().usage_marks()[0].messages, 2u);
}

// A reply cut at the output token limit, or stopped by the provider, is kept and the caller warned, naming the
// provider's reason (it was stored as if whole, without a word).
TEST_F(ConversationTest, AReplyCutShortIsKeptWithAWarningNamingWhy) {
  llm::ScriptedReply cut = Text("It was the best of");
  cut.stop_reason = "length";
  llm::ScriptedReply recited = Text("It was");
  recited.stop_reason = "RECITATION";
  llm::ScriptedProvider model("m", std::vector<llm::ScriptedReply>{cut, recited, Text("Whole.")});
  auto c = Conversation::Open(dir_.File("cut.jsonl"), model, counter_);
  ASSERT_OK(c);
  std::vector<std::string> warnings;
  TurnCallbacks callbacks;
  callbacks.on_warning = [&](const std::string& w) { warnings.push_back(w); };
  auto first = (*c)->Turn("tell me", callbacks);
  ASSERT_OK(first);
  EXPECT_EQ(first->stop_reason, "length");
  ASSERT_OK((*c)->Turn("again", callbacks).status());
  ASSERT_OK((*c)->Turn("once more", callbacks).status());
  EXPECT_EQ(warnings, (std::vector<std::string>{
                          "the reply was cut at the output token limit (stop reason: length)",
                          "the provider stopped the reply early (stop reason: RECITATION)"}));
  EXPECT_EQ((*c)->log().history()[1].ExtractText(), "It was the best of");
}

TEST_F(ConversationTest, StopsAfterMaxStepsOfToolCalls) {
  llm::ScriptedProvider model("m", std::vector<llm::ScriptedReply>{Call("c1", "a", "{}"), Call("c2", "a", "{}")});
  auto c = Conversation::Open(dir_.File("t.jsonl"), model, counter_, {.max_steps = 2});
  ASSERT_OK(c);
  auto turn = (*c)->Turn("loop");
  ASSERT_OK(turn);
  EXPECT_TRUE(turn->stopped_at_max_steps);
  EXPECT_EQ(turn->steps, 2);
}

TEST_F(ConversationTest, RefusesToSendAPromptWithoutTheNewestMessage) {
  llm::ScriptedProvider model("m", std::vector<llm::ScriptedReply>{Text("never")});
  auto c = Conversation::Open(dir_.File("t.jsonl"), model, counter_, {.max_context = 60, .reserve_for_reply = 10});
  ASSERT_OK(c);
  auto turn = (*c)->Turn(std::string(1000, 'x'));
  EXPECT_EQ(turn.status().code(), StatusCode::kResourceExhausted);
  EXPECT_NE(turn.status().message().find("newest message"), std::string::npos);
  EXPECT_TRUE(model.requests().empty());
}

TEST_F(ConversationTest, CompactsAutomaticallyWhenTheWindowFills) {
  // Each reply is long enough that a few turns pass the trigger; the summariser's reply is recognisable.
  llm::ScriptedProvider model("m", [](const llm::ScriptedProvider::Request& req) {
    std::string prompt = req.history.empty() ? "" : req.history.back().ExtractText();
    if (req.system_prompt.find("summar") != std::string::npos || prompt.find("ummar") != std::string::npos) {
      return Text("SUMMARY: the user counted.");
    }
    return Text(std::string(300, 'r'));
  });
  auto c = Conversation::Open(dir_.File("t.jsonl"), model, counter_, {.max_context = 600, .reserve_for_reply = 50});
  ASSERT_OK(c);
  std::optional<CompactionReport> seen;
  TurnCallbacks callbacks;
  callbacks.on_compacted = [&](const CompactionReport& r) { seen = r; };
  for (int i = 0; i < 8 && !seen; ++i) {
    auto turn = (*c)->Turn("count " + std::to_string(i) + " " + std::string(100, 'u'), callbacks);
    ASSERT_OK(turn);
  }
  ASSERT_TRUE(seen.has_value());
  EXPECT_GT(seen->compacted, 0);
  EXPECT_LT(seen->tokens_after, seen->tokens_before);
  EXPECT_FALSE(seen->rotation.empty());
  auto next = (*c)->Assembled();
  ASSERT_OK(next);
  ASSERT_FALSE(next->empty());
  EXPECT_NE((*next)[0].ExtractText().find("SUMMARY"), std::string::npos);
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Files a user hands to the CLI (chat scripts, recordings, Markdown trees) with wrongly typed fields are
// errors naming the field, not an exception out of the JSON library.
TEST(UntrustedInput, WronglyTypedScriptFieldsAreNamed) {
  for (const auto& [script, expect] : std::vector<std::pair<std::string, std::string>>{
           {R"({"replies": [{"text": "x", "usage": {"output": "5"}}]})", "\"output\" must be an integer"},
           {R"({"replies": [{"text": "x", "id": 7}]})", "\"id\" must be a string"},
           {R"({"replies": [{"error": {"kind": 1}}]})", "\"kind\" must be a string"},
           {R"({"replies": [{"error": {"status": "401"}}]})", "\"status\" must be an integer"},
           {R"({"model": 3, "replies": [{"text": 5}]})", "script: \"model\" must be a string"},
           {R"({"model": 1, "replies": [{"text": "x"}]})", "script: \"model\" must be a string, not an integer"},
           {R"({"model": ["m"], "replies": []})", "\"model\" must be a string"},
           {R"({"replies": {"text": "x"}})", "expected a list of replies"},
           {R"({"replies": [{"text": "x", "parts": {}}]})", "parts: expected a list"},
           {R"({"replies": [{"text": 5}]})", "text: expected a string"}}) {
    SCOPED_TRACE(script);
    auto provider = llm::ScriptedProvider::FromJson(script);
    ASSERT_FALSE(provider.ok());
    EXPECT_EQ(provider.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(provider.status().message().find(expect), std::string::npos) << provider.status().message();
  }
}

TEST(UntrustedInput, WronglyTypedRecordingIsNamed) {
  testing::TempDir dir;
  WriteFile(dir.File("rec.jsonl"), R"({"request": {}, "status": "200", "response": "data: {}\n\n"})" "\n");
  auto replay = llm::ReplayTransport(dir.File("rec.jsonl"));
  ASSERT_FALSE(replay.ok());
  EXPECT_NE(replay.status().message().find("\"status\" must be an integer"), std::string::npos)
      << replay.status().message();
}

TEST(UntrustedInput, ImportedRelationWithANumericReasonIsStillLinked) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.File("tree/notes"));
  WriteFile(dir.File("tree/notes/a.md"), "A");
  WriteFile(dir.File("tree/notes/b.md"), "B");
  WriteFile(dir.File("tree/.relations.jsonl"), R"({"from": "notes/a", "to": "notes/b", "reason": 5})" "\n");
  auto engine = Engine::Open({.data_dir = dir.File("data")});
  ASSERT_OK(engine);
  auto report = (*engine)->Import(dir.File("tree"), "strata://resources/imported");
  ASSERT_OK(report);
  EXPECT_EQ(report->relations, 1);
  auto relations = (*engine)->Relations("strata://resources/imported/notes/a");
  ASSERT_OK(relations);
  ASSERT_EQ(relations->size(), 1u);
  EXPECT_EQ((*relations)[0].reason, "");
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Every file under `dir` with its size and modification time: what a read-only engine must leave as it is.
// (A WAL reader on a directory it may write shares the writers' -shm and -wal beside each database: SQLite's
// own companions, which hold no data of their own once empty; they are left out.)
std::map<std::string, std::pair<uintmax_t, std::filesystem::file_time_type>> Snapshot(const std::string& dir) {
  std::map<std::string, std::pair<uintmax_t, std::filesystem::file_time_type>> out;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    std::string path = e.path().string();
    if (path.ends_with("-shm") || (path.ends_with("-wal") && e.file_size() == 0)) continue;
    out[path] = {e.is_regular_file() ? e.file_size() : 0, e.last_write_time()};
  }
  return out;
}

// --read-only (issue 28): everything reads as before, every change is refused naming the mode, and not one
// file of the data directory is created, changed or removed.
TEST(EngineReadOnly, ReadsEverythingAndChangesNothing) {
  testing::TempDir dir;
  const std::string data = dir.File("data");
  testing::WriteFileOrDie(dir.File("script.json"), R"({"replies": [{"text": "Trips."},
      {"text": "{\"memories\": [{\"category\": \"preferences\", \"key\": \"seat\", \"content\": \"Likes the aisle seat.\"}]}"}]})");
  {
    auto engine = Engine::Open({.data_dir = data, .provider = {.provider = "scripted", .script = dir.File("script.json")}});
    ASSERT_OK(engine);
    ASSERT_OK((*engine)->Write("strata://resources/guide/trains", "Night trains leave from platform 9."));
    ASSERT_OK((*engine)->CreateSession("alice", "", "trip"));
    ASSERT_OK((*engine)->AddMessages("trip", std::vector{Message::User("I like the aisle seat.")}));
    ASSERT_OK((*engine)->Commit("trip", {.wait = true}));
    ASSERT_OK((*engine)->AddMessages("trip", std::vector{Message::User("And a window on day trains.")}));
  }
  auto before = Snapshot(data);
  {
    auto engine = Engine::Open({.data_dir = data, .read_only = true});
    ASSERT_OK(engine);
    Engine& e = **engine;
    EXPECT_EQ(*e.Read("strata://resources/guide/trains"), "Night trains leave from platform 9.");
    auto hits = e.Find("which platform do night trains use", {.limit = 3});
    ASSERT_OK(hits);
    ASSERT_FALSE(hits->empty());
    EXPECT_EQ((*hits)[0].uri.str(), "strata://resources/guide/trains");
    EXPECT_EQ(e.Glob("**/trains", "strata://resources")->size(), 1u);
    EXPECT_EQ(e.Grep("platform", "strata://resources")->size(), 1u);
    EXPECT_EQ(e.List("strata://user/alice/memories/preferences")->size(), 1u);
    EXPECT_EQ(e.ListSessions()->size(), 1u);
    EXPECT_EQ(e.SessionMessages("trip")->size(), 1u);
    auto status = e.GetSessionStatus("trip");
    ASSERT_OK(status);
    EXPECT_EQ(status->archives.size(), 1u);
    EXPECT_EQ(status->jobs.size(), 1u);
    EXPECT_EQ(e.MemoryHistory("strata://user/alice/memories/preferences/seat")->size(), 1u);
    ASSERT_OK(e.AssembleSession("trip", {.max_context_tokens = 8000, .encoding = "chars"}));
    std::vector<std::pair<std::string, Status>> refused = {
        {"write", e.Write("strata://resources/guide/buses", "x")},
        {"rm", e.Remove("strata://resources/guide/trains", false).status()},
        {"mv", e.Move("strata://resources/guide", "strata://resources/g2")},
        {"session new", e.CreateSession("bob", "", "b").status()},
        {"session add", e.AddMessages("trip", std::vector{Message::User("x")}).status()},
        {"session commit", e.Commit("trip").status()},
        {"session delete", e.DeleteSession("trip", true)},
        {"session revert", e.Revert("trip", {0}).status()},
        {"remember", e.Remember("strata://user/alice", "x", "preferences").status()},
        {"phase 2 (session work)", e.Work().status()},
        {"reindex", e.Reindex()},
    };
    for (const auto& [what, s] : refused) {
      EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition) << what << ": " << s.ToString();
      EXPECT_NE(s.message().find(what + " refused: the data is open read-only (--read-only)"), std::string::npos)
          << s.ToString();
    }
  }
  EXPECT_EQ(Snapshot(data), before) << "a read-only engine changed the data directory";
  // A directory with nothing in it yet reads as empty, and is not created.
  auto empty = Engine::Open({.data_dir = dir.File("none"), .read_only = true});
  ASSERT_OK(empty);
  EXPECT_EQ((*empty)->Read("strata://resources/x").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE((*empty)->ListSessions()->empty());
  ASSERT_OK((*empty)->Find("anything"));
  EXPECT_FALSE(std::filesystem::exists(dir.File("none")));
}

}  // namespace
}  // namespace strata
