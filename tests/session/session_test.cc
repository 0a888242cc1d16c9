// Sessions: messages and stats, phase 1 of commit (archive + enqueue), numbering, crash recovery.
#include "strata/session/session.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "strata/message/message_json.h"
#include "test_util.h"

namespace strata::session {
namespace {

class SessionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto q = OpenJobQueue(dir_.File("queue.db"), {.clock = &clock_});
    ASSERT_OK(q);
    queue_ = std::move(*q);
    Reopen();
  }
  void Reopen() {
    sessions_.reset();
    auto s = OpenSessions(dir_.path(), {.clock = &clock_, .queue = queue_.get()});
    ASSERT_OK(s);
    sessions_ = std::move(*s);
  }
  std::vector<Job> Jobs() { return *queue_->List(std::nullopt); }

  testing::TempDir dir_;
  ManualClock clock_;
  std::unique_ptr<JobQueue> queue_;
  std::unique_ptr<Sessions> sessions_;
};

TEST_F(SessionTest, MessagesStatsAndLiveSummary) {
  auto info = sessions_->Create("alice", "coder", "s1");
  ASSERT_OK(info);
  EXPECT_EQ(info->user, "alice");
  ASSERT_OK(sessions_->Add("s1", Message::User("Help me plan a trip to Kyoto in April.\nBudget is tight.")));
  auto ref = ContextRef("strata://user/alice/memories/preferences/travel", "memory");
  auto skill = ContextRef("strata://agent/coder/skills/itinerary", "skill");
  ASSERT_OK(ref);
  ASSERT_OK(skill);
  Message answer = Message::Assistant("Here is a plan.");
  answer.content.push_back(*ref);
  answer.content.push_back(*skill);
  answer.content.push_back(*ref);  // The same context twice counts once.
  ASSERT_OK(sessions_->Add("s1", answer));
  ASSERT_OK(sessions_->Add("s1", Message::User("Add a day in Nara.")));
  auto got = sessions_->Get("s1");
  ASSERT_OK(got);
  EXPECT_EQ(got->stats.messages, 3);
  EXPECT_EQ(got->stats.turns, 2);
  EXPECT_EQ(got->stats.contexts_used, 2);
  EXPECT_EQ(got->stats.skills_used, 1);
  EXPECT_GT(got->stats.tokens, 10);
  EXPECT_EQ(got->abstract_text, "Help me plan a trip to Kyoto in April.");
  EXPECT_NE(got->overview.find("latest request: Add a day in Nara."), std::string::npos) << got->overview;
  EXPECT_NE(got->overview.find("strata://agent/coder/skills/itinerary"), std::string::npos);
  // Messages survive a restart, context references included.
  Reopen();
  auto messages = sessions_->Messages("s1");
  ASSERT_OK(messages);
  ASSERT_EQ(messages->size(), 3u);
  EXPECT_EQ((*messages)[1], answer);
}

TEST_F(SessionTest, BadInputIsRejectedByName) {
  EXPECT_EQ(sessions_->Create("bob", "", "../etc").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sessions_->Create("bob", "", ".hidden").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(sessions_->Create("b o b", "", "ok").status().code(), StatusCode::kInvalidArgument);
  ASSERT_OK(sessions_->Create("bob", "", "s"));
  EXPECT_EQ(sessions_->Create("bob", "", "s").status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(sessions_->Add("nope", Message::User("x")).code(), StatusCode::kNotFound);
  EXPECT_FALSE(ContextRef("http://example.com", "memory").ok());
  EXPECT_FALSE(ContextRef("strata://resources/x", "bogus").ok());
  // A context_ref without a uri does not parse as a message part.
  EXPECT_FALSE(ParseMessage(R"({"role":"user","content":[{"type":"context_ref","kind":"memory"}]})").ok());
  auto generated = sessions_->Create("", "");
  ASSERT_OK(generated);
  EXPECT_OK(ValidateSessionId(generated->id));
}

TEST_F(SessionTest, CommitArchivesAtOnceAndEnqueuesPhaseTwo) {
  ASSERT_OK(sessions_->Create("alice", "", "s1"));
  EXPECT_EQ(sessions_->Commit("s1").status().code(), StatusCode::kFailedPrecondition);  // Nothing to commit.
  ASSERT_OK(sessions_->Add("s1", Message::User("I prefer window seats.")));
  ASSERT_OK(sessions_->Add("s1", Message::Assistant("Noted.")));
  auto ticket = sessions_->Commit("s1");
  ASSERT_OK(ticket);
  EXPECT_EQ(ticket->archive, 1);
  EXPECT_EQ(ticket->messages, 2);
  EXPECT_TRUE(sessions_->Messages("s1")->empty());  // The current conversation starts afresh.
  auto archived = sessions_->ArchiveMessages("s1", 1);
  ASSERT_OK(archived);
  ASSERT_EQ(archived->size(), 2u);
  EXPECT_EQ((*archived)[0].ExtractText(), "I prefer window seats.");
  EXPECT_TRUE(std::filesystem::exists(dir_.File("sessions/s1/history/archive_001/messages.jsonl")));
  auto jobs = Jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].id, ticket->job_id);
  EXPECT_EQ(jobs[0].kind, kCommitJobKind);
  EXPECT_EQ(jobs[0].key, "s1");
  EXPECT_EQ(jobs[0].payload, R"({"archive":1,"session":"s1"})");
  ASSERT_OK(sessions_->Add("s1", Message::User("And aisle seats on night trains.")));
  auto second = sessions_->Commit("s1");
  ASSERT_OK(second);
  EXPECT_EQ(second->archive, 2);
  auto archives = sessions_->Archives("s1");
  ASSERT_OK(archives);
  ASSERT_EQ(archives->size(), 2u);
  EXPECT_EQ((*archives)[0].state, ArchiveState::kArchived);
  EXPECT_EQ((*archives)[1].messages, 1);
  EXPECT_EQ(sessions_->Get("s1")->stats.commits, 2);
  // Numbers are never reused, even if an archive directory is removed by hand.
  std::filesystem::remove_all(dir_.File("sessions/s1/history/archive_001"));
  ASSERT_OK(sessions_->Add("s1", Message::User("third")));
  EXPECT_EQ(sessions_->Commit("s1")->archive, 3);
}

TEST_F(SessionTest, StateOfPhaseTwoIsRecorded) {
  ASSERT_OK(sessions_->Create("a", "", "s"));
  ASSERT_OK(sessions_->Add("s", Message::User("x")));
  ASSERT_OK(sessions_->Commit("s"));
  ASSERT_OK(sessions_->SetArchiveState("s", 1, ArchiveState::kFailed, "model reply did not parse twice"));
  auto archives = sessions_->Archives("s");
  ASSERT_OK(archives);
  EXPECT_EQ((*archives)[0].state, ArchiveState::kFailed);
  EXPECT_EQ((*archives)[0].error, "model reply did not parse twice");
  EXPECT_EQ(sessions_->SetArchiveState("s", 9, ArchiveState::kDone, "").code(), StatusCode::kNotFound);
}

TEST_F(SessionTest, ACrashInsidePhaseOneIsFinishedOnOpen) {
  ASSERT_OK(sessions_->Create("a", "", "s"));
  ASSERT_OK(sessions_->Add("s", Message::User("remember: my cat is called Miso")));
  ASSERT_OK(sessions_->Add("s", Message::Assistant("Got it.")));
  sessions_.reset();
  // What a crash right after the rename leaves: the archive has the messages, no state, no job.
  std::filesystem::create_directories(dir_.File("sessions/s/history/archive_001"));
  std::filesystem::rename(dir_.File("sessions/s/messages.jsonl"),
                          dir_.File("sessions/s/history/archive_001/messages.jsonl"));
  // And a crash before the rename of a second commit: an empty archive directory.
  std::filesystem::create_directories(dir_.File("sessions/s/history/archive_002"));
  Reopen();
  auto archives = sessions_->Archives("s");
  ASSERT_OK(archives);
  ASSERT_EQ(archives->size(), 1u) << "the empty directory is not an archive";
  EXPECT_EQ((*archives)[0].messages, 2);
  auto jobs = Jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].payload, R"({"archive":1,"session":"s"})");
  // Opening again does not enqueue twice; a finished archive is not enqueued at all.
  Reopen();
  EXPECT_EQ(Jobs().size(), 1u);
  ASSERT_OK(queue_->Complete(queue_->Claim()->value().id));
  ASSERT_OK(sessions_->SetArchiveState("s", 1, ArchiveState::kDone, ""));
  Reopen();
  EXPECT_EQ(Jobs().size(), 1u);
  // The next commit takes the next free number.
  ASSERT_OK(sessions_->Add("s", Message::User("more")));
  EXPECT_EQ(sessions_->Commit("s")->archive, 3);
}


TEST_F(SessionTest, RevertToACheckpointDropsWhatCameAfterAndKeepsTheOldLog) {
  ASSERT_OK(sessions_->Create("alice", "coder", "s1"));
  ASSERT_OK(sessions_->Add("s1", Message::User("first")));
  auto cp = sessions_->Checkpoint("s1");
  ASSERT_OK(cp);
  EXPECT_EQ(*cp, 0);
  std::vector<Message> more = {Message::Assistant("reply"), Message::User("second")};
  ASSERT_OK(sessions_->Add("s1", std::span<const Message>(more)));
  ASSERT_EQ(sessions_->Get("s1")->stats.messages, 3);

  // An unknown checkpoint changes nothing.
  auto bad = sessions_->Revert("s1", 7);
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("no checkpoint 7"), std::string::npos) << bad.status().ToString();
  EXPECT_EQ(sessions_->Messages("s1")->size(), 3u);

  auto reverted = sessions_->Revert("s1", *cp);
  ASSERT_OK(reverted);
  EXPECT_EQ(reverted->stats.messages, 1);
  EXPECT_EQ(reverted->stats.turns, 1);
  auto log = sessions_->Log("s1");
  ASSERT_OK(log);
  ASSERT_EQ(log->messages.size(), 1u);
  EXPECT_EQ(log->messages[0].ExtractText(), "first");
  EXPECT_TRUE(log->checkpoints.empty());
  ASSERT_EQ(log->rotations.size(), 1u);
  // The old log, kept whole.
  std::string old = testing::ReadFileOrDie(dir_.File("sessions/s1/" + log->rotations[0]));
  EXPECT_NE(old.find("second"), std::string::npos);
  // What this process cached and a fresh reader agree.
  Reopen();
  EXPECT_EQ(sessions_->Messages("s1")->size(), 1u);
  EXPECT_EQ(sessions_->Get("s1")->stats.messages, 1);
}

TEST_F(SessionTest, ForkCopiesOwnersPromptAndMessagesUpToACheckpoint) {
  ASSERT_OK(sessions_->Create("alice", "coder", "s1"));
  ASSERT_OK(sessions_->SetSystemPrompt("s1", "You are terse."));
  ASSERT_OK(sessions_->Add("s1", Message::User("one")));
  auto cp = sessions_->Checkpoint("s1");
  ASSERT_OK(cp);
  ASSERT_OK(sessions_->Add("s1", Message::User("two")));
  auto fork = sessions_->Fork("s1", "s2", *cp);
  ASSERT_OK(fork);
  EXPECT_EQ(fork->id, "s2");
  EXPECT_EQ(fork->user, "alice");
  EXPECT_EQ(fork->agent, "coder");
  EXPECT_EQ(fork->stats.messages, 1);
  auto log = sessions_->Log("s2");
  ASSERT_OK(log);
  ASSERT_EQ(log->messages.size(), 1u);
  EXPECT_EQ(log->messages[0].ExtractText(), "one");
  EXPECT_EQ(log->system_prompt.value_or(""), "You are terse.");
  EXPECT_EQ(sessions_->Messages("s1")->size(), 2u);  // The source is unchanged.
  // A whole fork with a generated id; a fork onto an existing id or from a missing checkpoint fails.
  auto whole = sessions_->Fork("s1", "", std::nullopt);
  ASSERT_OK(whole);
  EXPECT_NE(whole->id, "s1");
  EXPECT_EQ(sessions_->Messages(whole->id)->size(), 2u);
  EXPECT_EQ(sessions_->Fork("s1", "s2", std::nullopt).status().code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(sessions_->Fork("s1", "s3", 9).status().code(), StatusCode::kNotFound);
}

TEST_F(SessionTest, ReplaceSwapsTheMessagesAtomicallyAndRecordsUsage) {
  ASSERT_OK(sessions_->Create("alice", "", "s1"));
  ASSERT_OK(sessions_->SetSystemPrompt("s1", "Be brief."));
  for (int i = 0; i < 4; ++i) ASSERT_OK(sessions_->Add("s1", Message::User("turn " + std::to_string(i))));
  ASSERT_OK(sessions_->RecordUsage("s1", 1234));
  EXPECT_EQ(sessions_->Log("s1")->usage_tokens, 1234);
  EXPECT_EQ(sessions_->RecordUsage("s1", -1).code(), StatusCode::kInvalidArgument);
  std::vector<Message> compacted = {Message::User("summary of turns 0-2"), Message::User("turn 3")};
  auto info = sessions_->Replace("s1", compacted, 50);
  ASSERT_OK(info);
  EXPECT_EQ(info->stats.messages, 2);
  auto log = sessions_->Log("s1");
  ASSERT_OK(log);
  EXPECT_EQ(log->messages, compacted);
  EXPECT_EQ(log->usage_tokens, 50);
  EXPECT_EQ(log->system_prompt.value_or(""), "Be brief.");  // Kept, in memory and on disk.
  ASSERT_EQ(log->checkpoints.size(), 1u);  // The rewrite opens with checkpoint 0, as kimi-cli's does.
  EXPECT_EQ(log->rotations.size(), 1u);
  // A replacement computed from messages that have changed since is refused, and changes nothing.
  std::vector<Message> stale = {Message::User("turn 0")};
  EXPECT_EQ(sessions_->Replace("s1", stale, std::nullopt, &stale).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(sessions_->Log("s1")->messages, compacted);
  // A commit archives the compacted messages; the archive reads back.
  auto ticket = sessions_->Commit("s1");
  ASSERT_OK(ticket);
  EXPECT_EQ(*sessions_->ArchiveMessages("s1", ticket->archive), compacted);
}

TEST_F(SessionTest, AnotherInstanceSeesRevertsEvenWhenTheCountMatches) {
  // Two Sessions on one directory stand for two processes: each caches the log it last used.
  auto other = OpenSessions(dir_.path(), {.clock = &clock_, .queue = queue_.get()});
  ASSERT_OK(other);
  ASSERT_OK(sessions_->Create("alice", "", "s1"));
  ASSERT_OK(sessions_->Add("s1", Message::User("a")));
  auto cp = sessions_->Checkpoint("s1");
  ASSERT_OK(cp);
  ASSERT_OK(sessions_->Add("s1", Message::User("b")));
  ASSERT_EQ((*other)->Messages("s1")->size(), 2u);  // `other` caches [a, b].
  ASSERT_OK(sessions_->Revert("s1", *cp));
  ASSERT_OK(sessions_->Add("s1", Message::User("c")));  // Two messages again: [a, c].
  auto seen = (*other)->Messages("s1");
  ASSERT_OK(seen);
  ASSERT_EQ(seen->size(), 2u);
  EXPECT_EQ((*seen)[1].ExtractText(), "c");
  // And `other` can append after it (the log file's own lock is not held between operations).
  ASSERT_OK((*other)->Add("s1", Message::User("d")));
  EXPECT_EQ(sessions_->Messages("s1")->size(), 3u);
}

TEST_F(SessionTest, DeleteWaitsForPhaseTwoUnlessForced) {
  ASSERT_OK(sessions_->Create("alice", "", "s1"));
  ASSERT_OK(sessions_->Add("s1", Message::User("a")));
  ASSERT_OK(sessions_->Commit("s1"));
  Status refused = sessions_->Delete("s1", /*force=*/false);
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition) << refused.ToString();
  EXPECT_OK(sessions_->Get("s1"));
  ASSERT_OK(sessions_->SetArchiveState("s1", 1, ArchiveState::kDone, ""));
  ASSERT_OK(sessions_->Delete("s1", false));
  EXPECT_EQ(sessions_->Get("s1").status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(sessions_->List()->empty());
  EXPECT_FALSE(std::filesystem::exists(dir_.File("sessions/s1")));
  // The id can be used again, and a forced delete removes a session with pending work.
  ASSERT_OK(sessions_->Create("alice", "", "s1"));
  ASSERT_OK(sessions_->Add("s1", Message::User("b")));
  ASSERT_OK(sessions_->Commit("s1"));
  ASSERT_OK(sessions_->Delete("s1", true));
  EXPECT_EQ(sessions_->Messages("s1").status().code(), StatusCode::kNotFound);
  Reopen();  // Recovery skips what was deleted.
  EXPECT_TRUE(sessions_->List()->empty());
}

}  // namespace
}  // namespace strata::session
