// CopyDeployment / VerifyCopy: a deployment with a store, relations, sessions (checkpoints, usage marks, a
// system prompt, archives in several states) and an audit log is copied from a data directory into
// PostgreSQL and into another directory, verified equal; a change to the copy is then reported.
#include "strata/engine/migrate.h"

#include <gtest/gtest.h>

#include "pg_test_util.h"
#include "test_util.h"

namespace strata {
namespace {

class MigrateTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto from = Engine::Open({.data_dir = from_dir_.path(), .embedder = "local:64"});
    ASSERT_OK(from);
    from_ = std::move(*from);
    std::string to = to_dir_.path();
    if (GetParam() == "postgres") {
      auto url = testing::NewPostgresDatabase();
      ASSERT_OK(url);
      to = *url;
    }
    auto dest = Engine::Open({.data_dir = to, .embedder = "local:64"});
    ASSERT_OK(dest);
    to_ = std::move(*dest);
  }
  testing::TempDir from_dir_, to_dir_;
  std::unique_ptr<Engine> from_, to_;
};

INSTANTIATE_TEST_SUITE_P(Backends, MigrateTest, ::testing::Values("sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

TEST_P(MigrateTest, CopiesEverythingAndVerificationSeesAChange) {
  Engine& e = *from_;
  ASSERT_OK(e.Write("strata://resources/guides/kyoto", "Kyoto in April.\n\nBlossoms peak early.", {.abstract_text = "Kyoto guide"}));
  ASSERT_OK(e.Write("strata://user/alice/notes/seat", "Aisle seat, always.", {.category = "travel", .metadata = std::string(R"({"k":1})")}));
  ASSERT_OK(e.Mkdir("strata://resources/empty", {.abstract_text = "An empty directory", .overview = "Nothing yet."}));
  ASSERT_OK(e.Link("strata://user/alice/notes/seat", "strata://resources/guides/kyoto", "trip"));
  ASSERT_OK(e.CreateSession("alice", "planner", "s1").status());
  ASSERT_OK(e.AddMessages("s1", std::vector<Message>{Message::User("first turn"), Message::Assistant("first answer")}).status());
  auto sessions = e.sessions();
  ASSERT_OK(sessions);
  // An archive whose phase 2 has not run: queued again in the copy.
  ASSERT_OK((*sessions)->Commit("s1").status());
  ASSERT_OK((*sessions)->WriteArchiveFile("s1", 1, "summary.md", "A first turn and its answer."));
  ASSERT_OK((*sessions)->SetSystemPrompt("s1", "Be brief."));
  ASSERT_OK((*sessions)->Add("s1", Message::User("second turn")));
  ASSERT_OK((*sessions)->RecordUsage("s1", 120));
  ASSERT_OK((*sessions)->Checkpoint("s1").status());
  ASSERT_OK((*sessions)->RecordUsage("s1", 130));
  ASSERT_OK((*sessions)->Add("s1", Message::Assistant("second answer")));
  ASSERT_OK((*sessions)->Checkpoint("s1").status());
  ASSERT_OK(e.CreateSession("bob", "", "s2").status());
  // A session made before incarnations were kept (none): copied as it is, not given one.
  ASSERT_OK((*sessions)->Create("carol", "", "s3", std::optional<std::string_view>("")).status());
  auto audit = e.audit();
  ASSERT_OK(audit);
  std::vector<session::AuditEntry> entries(3);
  auto s1 = e.GetSession("s1");
  ASSERT_OK(s1);
  ASSERT_FALSE(s1->incarnation.empty());
  entries[0] = {.uri = "strata://user/alice/notes/seat", .action = session::MemoryAction::kCreate,
                .source = session::SessionRef(*s1) + "#1#0",
                .at_ms = 5, .reason = "new", .after = "Aisle seat, always."};
  entries[1] = {.uri = "strata://user/alice/notes/seat", .action = session::MemoryAction::kMerge, .source = "s1#1#1",
                .at_ms = 6, .reason = "refined", .before = "x", .after = "Aisle seat, always."};
  entries[2] = {.uri = "strata://user/carol/notes/tea", .action = session::MemoryAction::kCreate, .source = "s3#1#0",
                .at_ms = 7, .reason = "new", .after = "Green tea."};
  ASSERT_OK((*audit)->Record(entries));

  // Task ids handed out and gone since (a session deleted with its jobs): clients may still hold them.
  auto source_queue = e.queue();
  ASSERT_OK(source_queue);
  for (int i = 0; i < 3; ++i) {
    const std::string key = "gone-" + std::to_string(i);
    ASSERT_OK((*source_queue)->Enqueue("test", key, "{}").status());
    ASSERT_OK((*source_queue)->RemoveKey(key));
  }
  auto source_last = (*source_queue)->LastId();
  ASSERT_OK(source_last);
  EXPECT_GE(*source_last, 4);

  auto report = CopyDeployment(*from_, *to_);
  ASSERT_OK(report);
  EXPECT_TRUE(report->differences.empty()) << ::testing::PrintToString(report->differences);
  EXPECT_EQ(report->sessions, 3);
  EXPECT_EQ(report->archives, 1);
  EXPECT_EQ(report->messages, 4);
  EXPECT_EQ(report->relations, 1);
  EXPECT_EQ(report->audit_entries, 3);
  // The copy is the same incarnation of s1: the audit entry its commit made still names it.
  auto copied = to_->GetSession("s1");
  ASSERT_OK(copied);
  EXPECT_EQ(copied->incarnation, s1->incarnation);
  auto linked = to_->AuditSession(entries[0]);
  ASSERT_OK(linked);
  ASSERT_TRUE(linked->has_value()) << "the history of a memory lost the session it came from";
  EXPECT_EQ((*linked)->id, "s1");
  auto legacy = to_->AuditSession(entries[2]);
  ASSERT_OK(legacy);
  ASSERT_TRUE(legacy->has_value()) << "a session without an incarnation keeps none";
  EXPECT_EQ((*legacy)->incarnation, "");
  auto log = to_->GetSessionLog("s1");
  ASSERT_OK(log);
  EXPECT_EQ(log->system_prompt, std::optional<std::string>("Be brief."));
  ASSERT_EQ(log->usage_marks.size(), 2u);
  EXPECT_EQ(log->usage_marks[1].checkpoints, 1);
  auto dest_sessions = to_->sessions();
  ASSERT_OK(dest_sessions);
  auto summary = (*dest_sessions)->ReadArchiveFile("s1", 1, "summary.md");
  ASSERT_OK(summary);
  EXPECT_EQ(*summary, std::optional<std::string>("A first turn and its answer."));
  // The unfinished archive has its phase-2 job in the copy.
  auto status = to_->GetSessionStatus("s1");
  ASSERT_OK(status);
  ASSERT_EQ(status->jobs.size(), 1u);
  EXPECT_EQ(status->jobs[0].state, session::JobState::kPending);
  // Under an id the source never handed out: a client's old task id names no job of the copy (the copy's
  // ids began at 1 again, so task 1 of the source was another session's job here).
  EXPECT_GT(status->jobs[0].id, *source_last);
  auto dest_queue = to_->queue();
  ASSERT_OK(dest_queue);
  for (int64_t id = 1; id <= *source_last; ++id) {
    auto job = (*dest_queue)->Get(id);
    ASSERT_OK(job);
    EXPECT_FALSE(job->has_value()) << "task " << id;
  }
  // A second copy is refused; a change to the copy is found by verification.
  EXPECT_EQ(CopyDeployment(*from_, *to_).status().code(), StatusCode::kFailedPrecondition);
  ASSERT_OK(to_->Write("strata://user/alice/notes/seat", "Window seat."));
  ASSERT_OK(to_->AddMessages("s2", std::vector<Message>{Message::User("only in the copy")}).status());
  auto differences = VerifyCopy(*from_, *to_);
  ASSERT_OK(differences);
  EXPECT_EQ(*differences, (std::vector<std::string>{"node differs: strata://user/alice/notes/seat",
                                                     "session stats differ: s2", "messages differ: s2"}));
}

// A copy whose vectors are of another model is a difference (`strata migrate` without --embedder gave the
// copy a new store's local:384, verified all the same: tests/cli/memory_cli_test.cc, MigrateCli).
TEST_P(MigrateTest, ACopyOfAnotherEmbeddingModelIsADifference) {
  ASSERT_OK(from_->Write("strata://resources/guides/kyoto", "Kyoto in April.", {}));
  std::string other = GetParam() == "postgres" ? *testing::NewPostgresDatabase() : to_dir_.File("other");
  auto wider = Engine::Open({.data_dir = other, .embedder = "local:96"});
  ASSERT_OK(wider);
  auto mismatched = CopyDeployment(*from_, **wider);
  ASSERT_OK(mismatched);
  ASSERT_FALSE(mismatched->differences.empty());
  EXPECT_EQ(mismatched->differences[0],
            "the embedding model: local-hash-v1-64 in the source, local-hash-v1-96 in the copy");
}

}  // namespace
}  // namespace strata
