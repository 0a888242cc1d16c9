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

}  // namespace
}  // namespace strata::session
