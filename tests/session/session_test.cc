// Sessions: messages and stats, phase 1 of commit (archive + enqueue), numbering, crash recovery; on both
// backends ("sqlite": directories of context logs with the SQLite job queue; "postgres": tables with the
// PostgreSQL job queue on the same database), plus what only PostgreSQL has (instances sharing a database).
#include "strata/session/session.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <thread>

#include "pg.h"
#include "pg_test_util.h"
#include "strata/message/message_json.h"
#include "test_util.h"

namespace strata::session {
namespace {

class SessionTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (Pg()) {
      auto url = testing::NewPostgresDatabase();
      ASSERT_OK(url);
      url_ = *url;
    }
    auto q = Pg() ? OpenPgJobQueue(url_, {.clock = &clock_}) : OpenJobQueue(dir_.File("queue.db"), {.clock = &clock_});
    ASSERT_OK(q);
    queue_ = std::move(*q);
    Reopen();
  }
  bool Pg() const { return GetParam() == "postgres"; }
  // Sessions over the same storage (another process or instance).
  Result<std::unique_ptr<Sessions>> Open() {
    SessionsOptions options{.clock = &clock_, .queue = queue_.get()};
    return Pg() ? OpenPgSessions(url_, options) : OpenSessions(dir_.path(), options);
  }
  void Reopen() {
    sessions_.reset();
    auto s = Open();
    ASSERT_OK(s);
    sessions_ = std::move(*s);
  }
  std::vector<Job> Jobs() { return *queue_->List(std::nullopt); }
  // Runs `sql` on the test database (PostgreSQL only) and returns the first column of the first row.
  std::string Sql(const std::string& sql) {
    auto conn = pg::Conn::Connect(url_);
    EXPECT_TRUE(conn.ok()) << conn.status().ToString();
    if (!conn.ok()) return "";
    auto rows = (*conn)->Exec(sql);
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() && rows->size() > 0 ? *rows->Text(0, 0) : "";
  }

  testing::TempDir dir_;
  std::string url_;
  ManualClock clock_;
  std::unique_ptr<JobQueue> queue_;
  std::unique_ptr<Sessions> sessions_;
};

INSTANTIATE_TEST_SUITE_P(Backends, SessionTest, ::testing::Values("sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// An imported session's origin (title, source, original times) is kept on both backends, across opens, and
// a later change moves updated_ms on as usual.
TEST_P(SessionTest, OriginIsKeptAndLaterChangesMoveUpdatedTime) {
  ASSERT_OK(sessions_->Create("alice", "", "imp"));
  ASSERT_OK(sessions_->Add("imp", Message::User("Boil time for spaghetti?")));
  ASSERT_OK(sessions_->SetOrigin("imp", {.title = "Pasta \xF0\x9F\x8D\x9D", .source = "chatgpt-c1",
                                         .created_ms = 1'700'000'000'000, .updated_ms = 1'700'000'500'000}));
  Reopen();
  auto info = sessions_->Get("imp");
  ASSERT_OK(info);
  EXPECT_EQ(info->title, "Pasta \xF0\x9F\x8D\x9D");
  EXPECT_EQ(info->source, "chatgpt-c1");
  EXPECT_EQ(info->created_ms, 1'700'000'000'000);
  EXPECT_EQ(info->updated_ms, 1'700'000'500'000);
  EXPECT_EQ(info->stats.messages, 1);
  clock_.Advance(1'000'000);
  ASSERT_OK(sessions_->Add("imp", Message::Assistant("9 to 10 minutes.")));
  info = sessions_->Get("imp");
  ASSERT_OK(info);
  EXPECT_EQ(info->updated_ms, clock_.WallMicros() / 1000);  // The change's time, not the original's.
  EXPECT_EQ(info->created_ms, 1'700'000'000'000);
  EXPECT_EQ(info->title, "Pasta \xF0\x9F\x8D\x9D");
  // Zero times leave the session's own.
  ASSERT_OK(sessions_->SetOrigin("imp", {.title = "Renamed"}));
  EXPECT_EQ(sessions_->Get("imp")->created_ms, 1'700'000'000'000);
  EXPECT_EQ(sessions_->SetOrigin("nope", {.title = "x"}).code(), StatusCode::kNotFound);
  // A session begun here has neither.
  ASSERT_OK(sessions_->Create("alice", "", "plain"));
  EXPECT_EQ(sessions_->Get("plain")->title, "");
  EXPECT_EQ(sessions_->Get("plain")->source, "");
}

TEST_P(SessionTest, MessagesStatsAndLiveSummary) {
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

// A NUL in a message is kept in the message on both backends; the session's one-line abstract and overview
// show it as U+FFFD on both (PostgreSQL's showed U+FFFD, SQLite's the NUL).
TEST_P(SessionTest, ANulInAMessageIsSummarisedAlikeOnEveryBackend) {
  ASSERT_OK(sessions_->Create("alice", "", "s1"));
  const Message nul = Message::User(std::string("tea\0coffee", 10));
  ASSERT_OK(sessions_->Add("s1", nul));
  Reopen();
  auto got = sessions_->Get("s1");
  ASSERT_OK(got);
  EXPECT_EQ(got->abstract_text, "tea\xEF\xBF\xBD" "coffee");
  EXPECT_NE(got->overview.find("latest request: tea\xEF\xBF\xBD" "coffee"), std::string::npos) << got->overview;
  auto messages = sessions_->Messages("s1");
  ASSERT_OK(messages);
  ASSERT_EQ(messages->size(), 1u);
  EXPECT_EQ((*messages)[0], nul);
}

// Free text a session keeps beside its messages (its origin's title and source, an archive's files, notes
// and error) is untrusted: a model's summary, an import's title. A NUL or bytes that are not UTF-8 in it read
// back as U+FFFD on both backends. (PostgreSQL replaced them; the file store kept them in archive files, and
// a note or error that was not UTF-8 threw out of its JSON writer.)
TEST_P(SessionTest, FreeTextIsKeptAlikeOnEveryBackend) {
  const std::string bad = std::string("a\0b", 3) + "\xFF" + "c";
  const std::string shown = "a\xEF\xBF\xBD" "b\xEF\xBF\xBD" "c";
  ASSERT_OK(sessions_->Create("alice", "", "s"));
  ASSERT_OK(sessions_->Add("s", Message::User("x")));
  ASSERT_OK(sessions_->SetOrigin("s", {.title = "title " + bad, .source = "source " + bad}));
  ASSERT_OK(sessions_->Commit("s"));
  ASSERT_OK(sessions_->WriteArchiveFile("s", 1, "summary.md", "summary " + bad));
  ASSERT_OK(sessions_->AddArchiveNote("s", 1, "note " + bad));
  ASSERT_OK(sessions_->SetArchiveState("s", 1, ArchiveState::kFailed, "error " + bad));
  Reopen();
  auto info = sessions_->Get("s");
  ASSERT_OK(info);
  EXPECT_EQ(info->title, "title " + shown);
  EXPECT_EQ(info->source, "source " + shown);
  auto file = sessions_->ReadArchiveFile("s", 1, "summary.md");
  ASSERT_OK(file);
  ASSERT_TRUE(file->has_value());
  EXPECT_EQ(**file, "summary " + shown);
  auto archives = sessions_->Archives("s");
  ASSERT_OK(archives);
  ASSERT_EQ(archives->size(), 1u);
  EXPECT_EQ((*archives)[0].error, "error " + shown);
  ASSERT_EQ((*archives)[0].notes.size(), 1u);
  EXPECT_EQ((*archives)[0].notes[0], "note " + shown);
}

// Another process deletes a session and creates one with the same id (another incarnation), with as many
// messages as the first had: this process, which kept the first's log open, serves the second's messages
// only, and appends to them. (It served the first owner's messages to the second and refused every append.)
TEST_P(SessionTest, ASessionCreatedAgainByAnotherProcessShowsOnlyItsOwnMessages) {
  auto other = Open();
  ASSERT_OK(other);
  ASSERT_OK(sessions_->Create("alice", "", "w2"));
  ASSERT_OK(sessions_->Add("w2", Message::User("alice secret: my PIN is 4321")));
  ASSERT_EQ(sessions_->Messages("w2")->size(), 1u);  // This process now holds the log open.
  ASSERT_OK((*other)->Delete("w2", /*force=*/true));
  ASSERT_OK((*other)->Create("zed", "", "w2"));
  ASSERT_OK((*other)->Add("w2", Message::User("zed hello")));
  auto seen = sessions_->Messages("w2");
  ASSERT_OK(seen);
  ASSERT_EQ(seen->size(), 1u);
  EXPECT_EQ((*seen)[0].ExtractText(), "zed hello");
  EXPECT_EQ(sessions_->Get("w2")->user, "zed");
  ASSERT_OK(sessions_->Add("w2", Message::Assistant("hi zed")));
  auto both = (*other)->Messages("w2");
  ASSERT_OK(both);
  ASSERT_EQ(both->size(), 2u);
  EXPECT_EQ((*both)[1].ExtractText(), "hi zed");
}

// A line of messages.jsonl damaged on disk (by hand, by a tool that rewrites the file) is skipped and
// reported, naming the file within the data directory and the line; the process that kept the log open
// reads the new file rather than refusing every append until it restarts. (The line vanished silently,
// and every append was refused as "changed by another writer", naming the server's absolute path.)
TEST(FileSessionsTest, ADamagedLineIsSkippedAndReportedAndAppendsGoOn) {
  testing::TempDir dir;
  ManualClock clock;
  auto queue = OpenJobQueue(dir.File("queue.db"), {.clock = &clock});
  ASSERT_OK(queue);
  auto sessions = OpenSessions(dir.path(), {.clock = &clock, .queue = queue->get()});
  ASSERT_OK(sessions);
  ASSERT_OK((*sessions)->Create("alice", "", "kk"));
  for (const char* text : {"k1", "k2", "k3", "k4"}) ASSERT_OK((*sessions)->Add("kk", Message::User(text)));
  ASSERT_EQ((*sessions)->Messages("kk")->size(), 4u);
  // Line 3 cut short, written as a new file (what sed -i does).
  const std::string path = dir.File("sessions/kk/messages.jsonl");
  std::string text = testing::ReadFileOrDie(path);
  std::vector<std::string> lines;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    lines.push_back(text.substr(at, end - at));
    at = end + 1;
  }
  ASSERT_EQ(lines.size(), 4u);
  lines[2] = lines[2].substr(0, lines[2].size() / 2);
  testing::WriteFileOrDie(path + ".tmp", lines[0] + "\n" + lines[1] + "\n" + lines[2] + "\n" + lines[3] + "\n");
  std::filesystem::rename(path + ".tmp", path);
  auto log = (*sessions)->Log("kk", false);
  ASSERT_OK(log);
  ASSERT_EQ(log->messages.size(), 3u);
  EXPECT_EQ(log->messages[2].ExtractText(), "k4");
  ASSERT_EQ(log->damage.size(), 1u);
  EXPECT_EQ(log->damage[0].rfind("sessions/kk/messages.jsonl line 3 (byte ", 0), 0u) << log->damage[0];
  ASSERT_OK((*sessions)->Add("kk", Message::Assistant("k5")));
  EXPECT_EQ((*sessions)->Messages("kk")->back().ExtractText(), "k5");
  EXPECT_EQ((*sessions)->Log("kk", false)->damage.size(), 1u);  // The line is still in the file.
  // A revert writes a new file (the damaged one kept as a rotation): nothing damaged is live any more.
  auto checkpoint = (*sessions)->Checkpoint("kk");
  ASSERT_OK(checkpoint);
  ASSERT_OK((*sessions)->Add("kk", Message::User("k6")));
  ASSERT_OK((*sessions)->Revert("kk", {checkpoint->id, checkpoint->tag}));
  auto reverted = (*sessions)->Log("kk", false);
  ASSERT_OK(reverted);
  EXPECT_EQ(reverted->messages.size(), 4u);
  EXPECT_TRUE(reverted->damage.empty()) << reverted->damage[0];
}

TEST_P(SessionTest, BadInputIsRejectedByName) {
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

TEST_P(SessionTest, CommitArchivesAtOnceAndEnqueuesPhaseTwo) {
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
  if (!Pg()) {
    EXPECT_TRUE(std::filesystem::exists(dir_.File("sessions/s1/history/archive_001/messages.jsonl")));
  }
  auto jobs = Jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].id, ticket->job_id);
  EXPECT_EQ(jobs[0].kind, kCommitJobKind);
  std::string ref = SessionRef(*sessions_->Get("s1"));
  EXPECT_EQ(jobs[0].key, ref);
  EXPECT_EQ(jobs[0].key.rfind("s1@", 0), 0u);
  EXPECT_EQ(jobs[0].payload, R"({"archive":1,"incarnation":")" + ref.substr(3) + R"(","session":"s1"})");
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
  // Numbers are never reused, even if an archive (its directory, its row) is removed by hand.
  if (Pg()) {
    Sql("DELETE FROM session_archives WHERE session_id = 's1' AND number = 1");
  } else {
    std::filesystem::remove_all(dir_.File("sessions/s1/history/archive_001"));
  }
  ASSERT_OK(sessions_->Add("s1", Message::User("third")));
  EXPECT_EQ(sessions_->Commit("s1")->archive, 3);
}

TEST_P(SessionTest, StateOfPhaseTwoIsRecorded) {
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

TEST_P(SessionTest, ACrashInsidePhaseOneIsFinishedOnOpen) {
  ASSERT_OK(sessions_->Create("a", "", "s"));
  ASSERT_OK(sessions_->Add("s", Message::User("remember: my cat is called Miso")));
  ASSERT_OK(sessions_->Add("s", Message::Assistant("Got it.")));
  int next_archive = 2;
  if (Pg()) {
    // Phase 1 is one transaction, then the enqueue: what a crash between the two leaves is an archive
    // without its job.
    ASSERT_OK(sessions_->Commit("s"));
    sessions_.reset();
    Sql("DELETE FROM jobs");
    ASSERT_TRUE(Jobs().empty());
  } else {
    sessions_.reset();
    // What a crash right after the rename leaves: the archive has the messages, no state, no job.
    std::filesystem::create_directories(dir_.File("sessions/s/history/archive_001"));
    std::filesystem::rename(dir_.File("sessions/s/messages.jsonl"),
                            dir_.File("sessions/s/history/archive_001/messages.jsonl"));
    // And a crash before the rename of a second commit: an empty archive directory.
    std::filesystem::create_directories(dir_.File("sessions/s/history/archive_002"));
    next_archive = 3;
  }
  Reopen();
  auto archives = sessions_->Archives("s");
  ASSERT_OK(archives);
  ASSERT_EQ(archives->size(), 1u) << "the empty directory is not an archive";
  EXPECT_EQ((*archives)[0].messages, 2);
  auto jobs = Jobs();
  ASSERT_EQ(jobs.size(), 1u);
  // Keyed and described by the session's reference: this incarnation of "s", not the id alone.
  std::string incarnation = sessions_->Get("s")->incarnation;
  ASSERT_EQ(incarnation.size(), 16u);
  EXPECT_EQ(jobs[0].key, "s@" + incarnation);
  EXPECT_EQ(jobs[0].payload, R"({"archive":1,"incarnation":")" + incarnation + R"(","session":"s"})");
  EXPECT_TRUE(sessions_->Messages("s")->empty());
  EXPECT_EQ(sessions_->Get("s")->stats.commits, 1) << "the commit the crash cut short is counted";
  // Opening again does not enqueue twice; a finished archive is not enqueued at all.
  Reopen();
  EXPECT_EQ(Jobs().size(), 1u);
  ASSERT_OK(queue_->Complete(queue_->Claim()->value()));
  ASSERT_OK(sessions_->SetArchiveState("s", 1, ArchiveState::kDone, ""));
  Reopen();
  EXPECT_EQ(Jobs().size(), 1u);
  // The next commit takes the next free number.
  ASSERT_OK(sessions_->Add("s", Message::User("more")));
  EXPECT_EQ(sessions_->Commit("s")->archive, next_archive);
}

TEST_P(SessionTest, RevertToACheckpointDropsWhatCameAfterAndKeepsTheOldLog) {
  ASSERT_OK(sessions_->Create("alice", "coder", "s1"));
  ASSERT_OK(sessions_->Add("s1", Message::User("first")));
  auto cp = sessions_->Checkpoint("s1");
  ASSERT_OK(cp);
  EXPECT_EQ(cp->id, 0);
  std::vector<Message> more = {Message::Assistant("reply"), Message::User("second")};
  ASSERT_OK(sessions_->Add("s1", std::span<const Message>(more)));
  ASSERT_EQ(sessions_->Get("s1")->stats.messages, 3);

  // An unknown checkpoint changes nothing.
  auto bad = sessions_->Revert("s1", {7});
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_NE(bad.status().message().find("no checkpoint 7"), std::string::npos) << bad.status().ToString();
  EXPECT_EQ(sessions_->Messages("s1")->size(), 3u);

  auto reverted = sessions_->Revert("s1", {cp->id});
  ASSERT_OK(reverted);
  EXPECT_EQ(reverted->stats.messages, 1);
  EXPECT_EQ(reverted->stats.turns, 1);
  auto log = sessions_->Log("s1");
  ASSERT_OK(log);
  ASSERT_EQ(log->messages.size(), 1u);
  EXPECT_EQ(log->messages[0].ExtractText(), "first");
  EXPECT_TRUE(log->checkpoints.empty());
  ASSERT_EQ(log->rotations.size(), 1u);
  EXPECT_EQ(log->rotations[0], "messages_1.jsonl");
  // The old log, kept whole.
  if (Pg()) {
    EXPECT_EQ(Sql("SELECT count(*) FROM session_records r JOIN session_rotations t ON t.session_id = r.session_id "
                  "AND t.version = r.version WHERE t.number = 1 AND r.kind = 'message'"),
              "3");
  } else {
    std::string old = testing::ReadFileOrDie(dir_.File("sessions/s1/" + log->rotations[0]));
    EXPECT_NE(old.find("second"), std::string::npos);
  }
  // What this process cached and a fresh reader agree.
  Reopen();
  EXPECT_EQ(sessions_->Messages("s1")->size(), 1u);
  EXPECT_EQ(sessions_->Get("s1")->stats.messages, 1);
}

// The system prompt is the session's, not the committed messages': it was the first record of the log a
// commit archives, and the next conversation (the model endpoints' turns, context, a fork) had none.
TEST_P(SessionTest, ACommitKeepsTheSystemPrompt) {
  ASSERT_OK(sessions_->Create("alice", "", "s1"));
  ASSERT_OK(sessions_->SetSystemPrompt("s1", "You are PIRATE bot."));
  ASSERT_OK(sessions_->Add("s1", Message::User("Ahoy.")));
  ASSERT_OK(sessions_->Commit("s1"));
  auto log = sessions_->Log("s1");
  ASSERT_OK(log);
  EXPECT_TRUE(log->messages.empty());
  EXPECT_EQ(log->system_prompt.value_or("(none)"), "You are PIRATE bot.");
  ASSERT_OK(sessions_->Add("s1", Message::User("Again.")));
  ASSERT_OK(sessions_->Commit("s1"));
  ASSERT_OK(sessions_->Add("s1", Message::User("Third.")));
  auto fork = sessions_->Fork("s1", "s2", std::nullopt);
  ASSERT_OK(fork);
  for (const char* id : {"s1", "s2"}) {
    auto after = sessions_->Log(id);
    ASSERT_OK(after);
    EXPECT_EQ(after->system_prompt.value_or("(none)"), "You are PIRATE bot.") << id;
    EXPECT_EQ(after->messages.size(), 1u) << id;
  }
  Reopen();
  EXPECT_EQ(sessions_->Log("s1")->system_prompt.value_or("(none)"), "You are PIRATE bot.");
  ASSERT_EQ(sessions_->ArchiveMessages("s1", 2)->size(), 1u);
  if (!Pg()) {
    // A commit that stopped between its two renames: the next log, prompt and all, is put in place.
    std::filesystem::rename(dir_.File("sessions/s1/messages.jsonl"), dir_.File("sessions/s1/messages.next.jsonl"));
    sessions_.reset();
    {
      // Read-only, it is read as it will be finished, and left as it is.
      auto reader = OpenSessions(dir_.path(), {.clock = &clock_, .queue = queue_.get(), .read_only = true});
      ASSERT_OK(reader);
      EXPECT_EQ((*reader)->Log("s1")->system_prompt.value_or("(none)"), "You are PIRATE bot.");
      EXPECT_TRUE(std::filesystem::exists(dir_.File("sessions/s1/messages.next.jsonl")));
    }
    Reopen();
    EXPECT_EQ(sessions_->Log("s1")->system_prompt.value_or("(none)"), "You are PIRATE bot.");
    EXPECT_FALSE(std::filesystem::exists(dir_.File("sessions/s1/messages.next.jsonl")));
  }
}

TEST_P(SessionTest, ForkCopiesOwnersPromptAndMessagesUpToACheckpoint) {
  ASSERT_OK(sessions_->Create("alice", "coder", "s1"));
  ASSERT_OK(sessions_->SetSystemPrompt("s1", "You are terse."));
  ASSERT_OK(sessions_->Add("s1", Message::User("one")));
  auto cp = sessions_->Checkpoint("s1");
  ASSERT_OK(cp);
  ASSERT_OK(sessions_->Add("s1", Message::User("two")));
  auto fork = sessions_->Fork("s1", "s2", CheckpointRef{cp->id});
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
  EXPECT_EQ(sessions_->Fork("s1", "s3", CheckpointRef{9}).status().code(), StatusCode::kNotFound);
}

// A fork is a session of its own: deleted and forked again under the same id, it is another incarnation, and
// a checkpoint's tag from the first fork names nothing in the second. (A fork once had no incarnation on the
// file backend, so every fork under one id was the same one to tags, audit links and jobs.)
TEST_P(SessionTest, AForkMadeAgainUnderTheSameIdIsAnotherIncarnation) {
  ASSERT_OK(sessions_->Create("alice", "coder", "src"));
  ASSERT_OK(sessions_->Add("src", Message::User("hi")));
  auto first = sessions_->Fork("src", "f", std::nullopt);
  ASSERT_OK(first);
  EXPECT_EQ(first->incarnation.size(), 16u);
  EXPECT_EQ(sessions_->Get("f")->incarnation, first->incarnation);
  EXPECT_NE(first->incarnation, sessions_->Get("src")->incarnation);
  auto old_mark = sessions_->Checkpoint("f");
  ASSERT_OK(old_mark);
  ASSERT_OK(sessions_->Delete("f", /*force=*/true));
  auto second = sessions_->Fork("src", "f", std::nullopt);
  ASSERT_OK(second);
  EXPECT_NE(second->incarnation, first->incarnation);
  auto new_mark = sessions_->Checkpoint("f");
  ASSERT_OK(new_mark);
  EXPECT_EQ(new_mark->id, old_mark->id);
  EXPECT_NE(new_mark->tag, old_mark->tag);
  EXPECT_EQ(sessions_->Revert("f", CheckpointRef{old_mark->id, old_mark->tag}).status().code(),
            StatusCode::kFailedPrecondition);
}

// Checkpoint ids follow kimi-cli's log and are given again after a revert, a commit or a compaction; a
// client holding an id from before must not cut the log at the point that now has it.
TEST_P(SessionTest, ACheckpointsTagRefusesTheCheckpointThatReusedItsId) {
  ASSERT_OK(sessions_->Create("alice", "coder", "s1"));
  ASSERT_OK(sessions_->Add("s1", Message::User("one")));
  auto zero = sessions_->Checkpoint("s1");
  ASSERT_OK(zero);
  ASSERT_OK(sessions_->Add("s1", Message::User("two")));
  auto one = sessions_->Checkpoint("s1");
  ASSERT_OK(one);
  EXPECT_EQ(zero->messages, 1);
  EXPECT_EQ(one->messages, 2);
  EXPECT_EQ(zero->tag.size(), 32u);
  EXPECT_NE(zero->tag, one->tag);
  // The log lists the same tags, and a reader that opens the session afresh computes them alike.
  Reopen();
  auto log = sessions_->Log("s1");
  ASSERT_OK(log);
  ASSERT_EQ(log->checkpoints.size(), 2u);
  EXPECT_EQ(log->checkpoints[0].tag, zero->tag);
  EXPECT_EQ(log->checkpoints[1].tag, one->tag);

  // Revert to checkpoint 0 with its tag; a new checkpoint 0 now marks a later point.
  ASSERT_OK(sessions_->Revert("s1", {zero->id, zero->tag}));
  ASSERT_OK(sessions_->Add("s1", Message::User("three")));
  auto again = sessions_->Checkpoint("s1");
  ASSERT_OK(again);
  EXPECT_EQ(again->id, 0);
  EXPECT_NE(again->tag, zero->tag);
  ASSERT_OK(sessions_->Add("s1", Message::User("four")));
  // The old tag is refused and changes nothing; the old checkpoint 1 is gone.
  Result<SessionInfo> stale = sessions_->Revert("s1", {zero->id, zero->tag});
  EXPECT_EQ(stale.status().code(), StatusCode::kFailedPrecondition) << stale.status().ToString();
  EXPECT_NE(stale.status().message().find("checkpoint 0 of session s1"), std::string::npos) << stale.status().ToString();
  EXPECT_EQ(sessions_->Messages("s1")->size(), 3u);
  EXPECT_EQ(sessions_->Fork("s1", "copy", CheckpointRef{zero->id, zero->tag}).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(sessions_->Get("copy").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(sessions_->Revert("s1", {one->id, one->tag}).status().code(), StatusCode::kNotFound);
  // The current tag works for a fork and a revert; an id alone still means whichever checkpoint has it.
  ASSERT_OK(sessions_->Fork("s1", "copy", CheckpointRef{again->id, again->tag}));
  EXPECT_EQ(sessions_->Messages("copy")->size(), 2u);
  ASSERT_OK(sessions_->Revert("s1", {again->id}));
  EXPECT_EQ(sessions_->Messages("s1")->size(), 2u);

  // A commit starts the ids again: checkpoint 0 before any message has another tag in the next log, even
  // though the messages before it (none) are the same.
  ASSERT_OK(sessions_->Create("alice", "coder", "s2"));
  auto first = sessions_->Checkpoint("s2");
  ASSERT_OK(first);
  ASSERT_OK(sessions_->Add("s2", Message::User("before the commit")));
  ASSERT_OK(sessions_->Commit("s2"));
  auto next = sessions_->Checkpoint("s2");
  ASSERT_OK(next);
  EXPECT_EQ(next->id, first->id);
  EXPECT_EQ(next->messages, first->messages);
  EXPECT_NE(next->tag, first->tag);
  ASSERT_OK(sessions_->Add("s2", Message::User("after the commit")));
  EXPECT_EQ(sessions_->Revert("s2", {first->id, first->tag}).status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(sessions_->Messages("s2")->size(), 1u);

  // A compaction restarts the ids too. A tag stands for the messages before its checkpoint: checkpoint 0
  // before the summary has the same (none) as before the compaction, so its tag still holds; checkpoint 1
  // after the summary does not have checkpoint 1's messages.
  auto one_before = sessions_->Checkpoint("s2");
  ASSERT_OK(one_before);
  EXPECT_EQ(one_before->id, 1);
  ASSERT_OK(sessions_->Replace("s2", std::vector<Message>{Message::User("summary")}, std::nullopt));
  ASSERT_OK(sessions_->Add("s2", Message::User("after the compaction")));
  auto one_after = sessions_->Checkpoint("s2");
  ASSERT_OK(one_after);
  EXPECT_EQ(one_after->id, 1);
  EXPECT_EQ(sessions_->Revert("s2", {one_before->id, one_before->tag}).status().code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(sessions_->Messages("s2")->size(), 2u);
  auto compacted = sessions_->Log("s2");
  ASSERT_OK(compacted);
  ASSERT_EQ(compacted->checkpoints.size(), 2u);
  EXPECT_EQ(compacted->checkpoints[0].tag, next->tag);
  ASSERT_OK(sessions_->Revert("s2", {next->id, next->tag}));
  EXPECT_TRUE(sessions_->Messages("s2")->empty());
}

TEST_P(SessionTest, ReplaceSwapsTheMessagesAtomicallyAndRecordsUsage) {
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

TEST_P(SessionTest, AnotherInstanceSeesRevertsEvenWhenTheCountMatches) {
  // Two Sessions on one directory stand for two processes: each caches the log it last used.
  auto other = Open();
  ASSERT_OK(other);
  ASSERT_OK(sessions_->Create("alice", "", "s1"));
  ASSERT_OK(sessions_->Add("s1", Message::User("a")));
  auto cp = sessions_->Checkpoint("s1");
  ASSERT_OK(cp);
  ASSERT_OK(sessions_->Add("s1", Message::User("b")));
  ASSERT_EQ((*other)->Messages("s1")->size(), 2u);  // `other` caches [a, b].
  ASSERT_OK(sessions_->Revert("s1", {cp->id}));
  ASSERT_OK(sessions_->Add("s1", Message::User("c")));  // Two messages again: [a, c].
  auto seen = (*other)->Messages("s1");
  ASSERT_OK(seen);
  ASSERT_EQ(seen->size(), 2u);
  EXPECT_EQ((*seen)[1].ExtractText(), "c");
  // And `other` can append after it (the log file's own lock is not held between operations).
  ASSERT_OK((*other)->Add("s1", Message::User("d")));
  EXPECT_EQ(sessions_->Messages("s1")->size(), 3u);
}

TEST_P(SessionTest, DeleteWaitsForPhaseTwoUnlessForced) {
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
  EXPECT_EQ(sessions_->Archives("s1").status().code(), StatusCode::kNotFound);
  if (Pg()) {
    EXPECT_EQ(Sql("SELECT (SELECT count(*) FROM session_records) + (SELECT count(*) FROM session_archives) + "
                  "(SELECT count(*) FROM session_rotations)"),
              "0");
  } else {
    EXPECT_FALSE(std::filesystem::exists(dir_.File("sessions/s1")));
  }
  // The id can be used again, and a forced delete removes a session with pending work.
  ASSERT_OK(sessions_->Create("alice", "", "s1"));
  ASSERT_OK(sessions_->Add("s1", Message::User("b")));
  ASSERT_OK(sessions_->Commit("s1"));
  ASSERT_OK(sessions_->Delete("s1", true));
  EXPECT_EQ(sessions_->Messages("s1").status().code(), StatusCode::kNotFound);
  Reopen();  // Recovery skips what was deleted.
  EXPECT_TRUE(sessions_->List()->empty());
}

// A worker marks a job dead, then its archive failed. An open between the two found an unfinished archive
// and queued it again: phase 2 ran twice. An archive whose job is dead waits for `session retry`.
TEST_P(SessionTest, AnOpenDoesNotQueueAnArchiveWhoseJobJustDied) {
  ASSERT_OK(sessions_->Create("alice", "", "s1"));
  ASSERT_OK(sessions_->Add("s1", Message::User("a")));
  ASSERT_OK(sessions_->Commit("s1"));
  auto claimed = queue_->Claim();
  ASSERT_OK(claimed);
  ASSERT_TRUE(claimed->has_value());
  ASSERT_OK(queue_->Fail(**claimed, Status::FailedPrecondition("no model"), /*retryable=*/false));
  Reopen();  // The archive is still "archived": the window between the two (or a crash in it).
  std::vector<Job> jobs = Jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].state, JobState::kDead);
  // The open finishes the interrupted step: the archive is failed, with the job's reason.
  auto archives = sessions_->Archives("s1");
  ASSERT_OK(archives);
  ASSERT_EQ(archives->size(), 1u);
  EXPECT_EQ((*archives)[0].state, ArchiveState::kFailed);
  EXPECT_NE((*archives)[0].error.find("no model"), std::string::npos) << (*archives)[0].error;
  // Retried (the job and the archive, as `session retry` does), it runs again: once.
  ASSERT_OK(queue_->Retry(jobs[0].id));
  ASSERT_OK(sessions_->SetArchiveState("s1", 1, ArchiveState::kArchived, ""));
  Reopen();
  jobs = Jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].state, JobState::kPending);
}

TEST_P(SessionTest, CheckpointsUsageMarksAndThePromptKeepTheirPlacesThroughRevertAndCommit) {
  ASSERT_OK(sessions_->Create("alice", "", "s1"));
  ASSERT_OK(sessions_->Add("s1", Message::User("m1")));
  EXPECT_EQ(sessions_->Checkpoint("s1")->id, 0);
  ASSERT_OK(sessions_->RecordUsage("s1", 10));
  ASSERT_OK(sessions_->Add("s1", Message::Assistant("m2")));
  EXPECT_EQ(sessions_->Checkpoint("s1")->id, 1);
  ASSERT_OK(sessions_->SetSystemPrompt("s1", "first prompt"));
  ASSERT_OK(sessions_->RecordUsage("s1", 20));
  ASSERT_OK(sessions_->Add("s1", Message::User("m3")));
  ASSERT_OK(sessions_->SetSystemPrompt("s1", "second prompt"));
  ASSERT_OK(sessions_->SetSystemPrompt("s1", "second prompt"));  // The same again changes nothing.
  EXPECT_EQ(sessions_->Get("s1")->stats.revisions, 6);
  auto log = sessions_->Log("s1");
  ASSERT_OK(log);
  EXPECT_EQ(log->system_prompt.value_or(""), "second prompt");
  ASSERT_EQ(log->checkpoints.size(), 2u);
  EXPECT_EQ(log->checkpoints[1].id, 1);
  EXPECT_EQ(log->checkpoints[1].messages, 2);
  ASSERT_EQ(log->usage_marks.size(), 2u);
  EXPECT_EQ(log->usage_marks[0].messages, 1);
  EXPECT_EQ(log->usage_marks[0].tokens, 10);
  EXPECT_EQ(log->usage_marks[0].checkpoints, 1);
  EXPECT_EQ(log->usage_marks[1].messages, 2);
  EXPECT_EQ(log->usage_marks[1].checkpoints, 2);
  EXPECT_EQ(log->usage_tokens, 20);

  // Back to checkpoint 1: the mark after it goes, the prompt (the log's first record) stays, and the
  // next checkpoint takes the number again.
  ASSERT_OK(sessions_->Revert("s1", {1}));
  log = sessions_->Log("s1");
  ASSERT_OK(log);
  EXPECT_EQ(log->system_prompt.value_or(""), "second prompt");
  EXPECT_EQ(log->messages.size(), 2u);
  ASSERT_EQ(log->checkpoints.size(), 1u);
  ASSERT_EQ(log->usage_marks.size(), 1u);
  EXPECT_EQ(log->usage_tokens, 10);
  EXPECT_EQ(log->rotations, std::vector<std::string>{"messages_1.jsonl"});
  EXPECT_EQ(sessions_->Checkpoint("s1")->id, 1);
  ASSERT_OK(sessions_->Revert("s1", {0}));
  EXPECT_EQ(sessions_->Checkpoint("s1")->id, 0);
  EXPECT_EQ(sessions_->Log("s1")->rotations, (std::vector<std::string>{"messages_1.jsonl", "messages_2.jsonl"}));

  // A commit archives the whole log: the next one starts with the prompt alone, rotations stay and go on
  // counting.
  auto ticket = sessions_->Commit("s1");
  ASSERT_OK(ticket);
  EXPECT_EQ(ticket->messages, 1);
  log = sessions_->Log("s1");
  ASSERT_OK(log);
  EXPECT_TRUE(log->messages.empty());
  EXPECT_TRUE(log->checkpoints.empty());
  EXPECT_TRUE(log->usage_marks.empty());
  EXPECT_EQ(log->usage_tokens, 0);
  EXPECT_EQ(log->system_prompt.value_or("(none)"), "second prompt");
  EXPECT_EQ(sessions_->Checkpoint("s1")->id, 0);
  ASSERT_OK(sessions_->Add("s1", Message::User("m4")));
  ASSERT_OK(sessions_->Revert("s1", {0}));
  EXPECT_EQ(sessions_->Log("s1")->rotations.size(), 3u);
  EXPECT_EQ(sessions_->Log("s1")->rotations.back(), "messages_3.jsonl");
  auto info = sessions_->Get("s1");
  ASSERT_OK(info);
  EXPECT_EQ(info->stats.messages, 1) << "m1 is archived; m2, m3 and m4 were reverted";
  EXPECT_EQ(info->stats.commits, 1);
  // And a fresh reader agrees.
  Reopen();
  EXPECT_EQ(sessions_->Log("s1")->checkpoints.size(), 0u);
  EXPECT_EQ(sessions_->Log("s1")->rotations.size(), 3u);
}

TEST_P(SessionTest, NotesAndRetriesOfPhaseTwo) {
  ASSERT_OK(sessions_->Create("a", "", "s"));
  ASSERT_OK(sessions_->Add("s", Message::User("x")));
  ASSERT_OK(sessions_->Commit("s"));
  ASSERT_OK(sessions_->AddArchiveNote("s", 1, "asked again: the reply was not JSON"));
  ASSERT_OK(sessions_->SetArchiveState("s", 1, ArchiveState::kFailed, "gave up"));
  ASSERT_OK(sessions_->AddArchiveNote("s", 1, "second note"));
  auto archives = sessions_->Archives("s");
  ASSERT_OK(archives);
  ASSERT_EQ(archives->size(), 1u);
  EXPECT_EQ((*archives)[0].notes,
            (std::vector<std::string>{"asked again: the reply was not JSON", "second note"}));
  EXPECT_EQ((*archives)[0].error, "gave up");
  EXPECT_EQ(sessions_->AddArchiveNote("s", 2, "x").code(), StatusCode::kNotFound);
  EXPECT_EQ(sessions_->AddArchiveNote("nope", 1, "x").code(), StatusCode::kNotFound);
  // A failed archive can be queued again; a done one cannot.
  ASSERT_OK(queue_->Complete(queue_->Claim()->value()));
  auto again = sessions_->EnqueueArchive("s", 1);
  ASSERT_OK(again);
  EXPECT_EQ(Jobs().size(), 2u);
  EXPECT_EQ(sessions_->EnqueueArchive("s", 7).status().code(), StatusCode::kNotFound);
  ASSERT_OK(sessions_->SetArchiveState("s", 1, ArchiveState::kDone, ""));
  EXPECT_EQ(sessions_->EnqueueArchive("s", 1).status().code(), StatusCode::kFailedPrecondition);
  archives = sessions_->Archives("s");
  ASSERT_OK(archives);
  EXPECT_EQ((*archives)[0].notes.size(), 2u) << "notes are kept across state changes";
  EXPECT_EQ((*archives)[0].error, "");
  ASSERT_OK(sessions_->RecordExtracted("s", 3));
  ASSERT_OK(sessions_->RecordExtracted("s", 2));
  EXPECT_EQ(sessions_->Get("s")->stats.memories_extracted, 5);
  EXPECT_EQ(sessions_->RecordExtracted("nope", 1).code(), StatusCode::kNotFound);
}

TEST_P(SessionTest, ImportedArchivesTakeTheNextNumberAndLeaveTheLiveLogAlone) {
  ASSERT_OK(sessions_->Create("alice", "", "s1"));
  ASSERT_OK(sessions_->Add("s1", Message::User("live one")));
  auto cp = sessions_->Checkpoint("s1");
  ASSERT_OK(cp);
  ASSERT_OK(sessions_->Add("s1", Message::User("live two")));
  std::vector<Message> old = {Message::User("imported"), Message::Assistant("reply")};
  EXPECT_EQ(sessions_->ImportArchive("s1", 2, old, ArchiveState::kDone, "", {}).code(), StatusCode::kInvalidArgument);
  ASSERT_OK(sessions_->ImportArchive("s1", 1, old, ArchiveState::kDone, "", {"a note"}));
  ASSERT_OK(sessions_->ImportArchive("s1", 2, old, ArchiveState::kFailed, "it broke", {}));
  ASSERT_OK(
      sessions_->ImportArchive("s1", 3, std::span<const Message>(old).first(1), ArchiveState::kSummarized, "", {}));
  auto archives = sessions_->Archives("s1");
  ASSERT_OK(archives);
  ASSERT_EQ(archives->size(), 3u);
  EXPECT_EQ((*archives)[0].state, ArchiveState::kDone);
  EXPECT_EQ((*archives)[0].notes, std::vector<std::string>{"a note"});
  EXPECT_EQ((*archives)[1].error, "it broke");
  EXPECT_EQ((*archives)[2].messages, 1);
  EXPECT_EQ(*sessions_->ArchiveMessages("s1", 1), old);
  // Nothing is queued by the import: a worker serving this deployment would have run phase 2 before the
  // copier wrote the archive's files and the audit log. The copier queues it when they are in place.
  EXPECT_TRUE(Jobs().empty());
  ASSERT_OK(sessions_->EnqueueArchive("s1", 3));
  auto jobs = Jobs();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0].payload, R"({"archive":3,"incarnation":")" + sessions_->Get("s1")->incarnation + R"(","session":"s1"})");
  EXPECT_EQ(sessions_->Get("s1")->stats.commits, 3);
  // The live log is untouched, and what changes it next does not collide with the imported archives.
  EXPECT_EQ(sessions_->Messages("s1")->size(), 2u);
  ASSERT_OK(sessions_->Revert("s1", {cp->id}));
  ASSERT_OK(sessions_->Replace("s1", old, 5));
  EXPECT_EQ(*sessions_->ArchiveMessages("s1", 3), std::vector<Message>{old[0]});
  auto ticket = sessions_->Commit("s1");
  ASSERT_OK(ticket);
  EXPECT_EQ(ticket->archive, 4);
  EXPECT_EQ(*sessions_->ArchiveMessages("s1", 4), old);
  EXPECT_EQ(*sessions_->ArchiveMessages("s1", 1), old);
  Reopen();
  EXPECT_EQ(sessions_->Archives("s1")->size(), 4u);
  EXPECT_TRUE(sessions_->Messages("s1")->empty());
}

// ---- PostgreSQL only: instances sharing one database ----

class PgSessionsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto url = testing::NewPostgresDatabase();
    ASSERT_OK(url);
    url_ = *url;
    auto q = OpenPgJobQueue(url_, {.clock = &clock_});
    ASSERT_OK(q);
    queue_ = std::move(*q);
    a_ = OpenOrDie();
    b_ = OpenOrDie();
  }
  std::unique_ptr<Sessions> OpenOrDie() {
    auto s = OpenPgSessions(url_, {.clock = &clock_, .queue = queue_.get()});
    EXPECT_TRUE(s.ok()) << s.status().ToString();
    return s.ok() ? std::move(*s) : nullptr;
  }
  void Sql(const std::string& sql) {
    auto conn = pg::Conn::Connect(url_);
    ASSERT_OK(conn);
    ASSERT_OK((*conn)->ExecScript(sql));
  }
  static std::vector<std::string> Texts(const std::vector<Message>& messages) {
    std::vector<std::string> out;
    for (const Message& m : messages) out.push_back(m.ExtractText());
    return out;
  }

  std::string url_;
  ManualClock clock_;
  std::unique_ptr<JobQueue> queue_;
  std::unique_ptr<Sessions> a_, b_;  // Two instances: each keeps the logs it used in memory.
};

TEST_F(PgSessionsTest, TwoInstancesSeeEachOthersAppendsRevertsAndCommits) {
  ASSERT_OK(a_->Create("alice", "coder", "s1"));
  ASSERT_OK(a_->Add("s1", Message::User("one")));
  EXPECT_EQ(Texts(*b_->Messages("s1")), std::vector<std::string>{"one"});  // b caches [one].
  auto cp = b_->Checkpoint("s1");
  ASSERT_OK(cp);
  ASSERT_OK(b_->Add("s1", Message::User("two")));
  ASSERT_OK(b_->SetSystemPrompt("s1", "Be brief."));
  auto log = a_->Log("s1");
  ASSERT_OK(log);
  EXPECT_EQ(Texts(log->messages), (std::vector<std::string>{"one", "two"}));
  EXPECT_EQ(log->checkpoints.size(), 1u);
  EXPECT_EQ(log->system_prompt.value_or(""), "Be brief.");
  ASSERT_OK(a_->Revert("s1", {cp->id}));
  ASSERT_OK(a_->Add("s1", Message::User("three")));  // [one, three]: as many messages as b last saw.
  EXPECT_EQ(Texts(*b_->Messages("s1")), (std::vector<std::string>{"one", "three"}));
  EXPECT_EQ(b_->Log("s1")->rotations, std::vector<std::string>{"messages_1.jsonl"});
  EXPECT_EQ(b_->Get("s1")->stats.messages, 2);
  std::vector<Message> compacted = {Message::User("summary")};
  ASSERT_OK(b_->Replace("s1", compacted, 7, nullptr));
  auto current = a_->Messages("s1");
  ASSERT_OK(current);
  EXPECT_EQ(*current, compacted);  // a reads them again: they are b's compaction.
  ASSERT_OK(a_->Replace("s1", compacted, 7, &*current));
  std::vector<Message> old = {Message::User("one"), Message::User("three")};
  EXPECT_EQ(a_->Replace("s1", compacted, 7, &old).status().code(), StatusCode::kFailedPrecondition);
  auto ticket = b_->Commit("s1");
  ASSERT_OK(ticket);
  EXPECT_TRUE(a_->Messages("s1")->empty());
  EXPECT_EQ(Texts(*a_->ArchiveMessages("s1", ticket->archive)), std::vector<std::string>{"summary"});
  ASSERT_OK(a_->Add("s1", Message::User("four")));
  EXPECT_EQ(b_->Commit("s1")->archive, 2);
  EXPECT_EQ(a_->Get("s1")->stats.commits, 2);
  // A session one instance deletes is gone for the other, and its id can be taken again.
  ASSERT_OK(a_->Add("s1", Message::User("five")));  // a keeps [five] in memory.
  ASSERT_OK(b_->Delete("s1", /*force=*/true));
  EXPECT_EQ(a_->Messages("s1").status().code(), StatusCode::kNotFound);
  ASSERT_OK(b_->Create("bob", "", "s1"));
  auto fresh = a_->Messages("s1");
  ASSERT_OK(fresh);
  EXPECT_TRUE(fresh->empty()) << "the log a kept of the deleted session is not the new one's";
  EXPECT_EQ(a_->Get("s1")->user, "bob");
}

TEST_F(PgSessionsTest, ConcurrentAppendsFromTwoInstancesLoseNothingAndKeepEachWritersOrder) {
  ASSERT_OK(a_->Create("alice", "", "s1"));
  constexpr int kPerWriter = 40;
  // Two instances, and two threads on one of them: each writer appends its own numbered messages.
  struct Writer {
    Sessions* sessions;
    std::string name;
  };
  std::vector<Writer> writers = {{a_.get(), "a"}, {b_.get(), "b"}, {b_.get(), "c"}};
  std::vector<std::thread> threads;
  std::vector<Status> failures(writers.size());
  for (size_t w = 0; w < writers.size(); ++w) {
    threads.emplace_back([&, w] {
      for (int i = 0; i < kPerWriter; ++i) {
        std::vector<Message> batch = {Message::User(writers[w].name + "-" + std::to_string(i))};
        if (i % 5 == 0) batch.push_back(Message::Assistant(writers[w].name + "-" + std::to_string(i) + "+"));
        Status s = writers[w].sessions->Add("s1", std::span<const Message>(batch));
        if (!s.ok()) {
          failures[w] = s;
          return;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const Status& s : failures) ASSERT_OK(s);
  auto messages = a_->Messages("s1");
  ASSERT_OK(messages);
  constexpr size_t kEach = kPerWriter + kPerWriter / 5;
  ASSERT_EQ(messages->size(), writers.size() * kEach);
  std::map<std::string, std::vector<std::string>> seen;
  for (const std::string& text : Texts(*messages)) seen[text.substr(0, 1)].push_back(text);
  for (const Writer& w : writers) {
    std::vector<std::string> expected;
    for (int i = 0; i < kPerWriter; ++i) {
      expected.push_back(w.name + "-" + std::to_string(i));
      if (i % 5 == 0) expected.push_back(w.name + "-" + std::to_string(i) + "+");
    }
    EXPECT_EQ(seen[w.name], expected) << "writer " << w.name << ": its messages in its order, batches whole";
  }
  for (size_t i = 0; i < messages->size(); ++i) {
    std::string text = (*messages)[i].ExtractText();
    if (text.back() != '+') continue;
    ASSERT_GT(i, 0u);
    EXPECT_EQ((*messages)[i - 1].ExtractText() + "+", text) << "a batch is appended whole";
  }
  EXPECT_EQ(b_->Get("s1")->stats.messages, static_cast<int64_t>(writers.size() * kEach));
  EXPECT_EQ(b_->Messages("s1")->size(), writers.size() * kEach);
}

TEST_F(PgSessionsTest, DamagedRowsAreDataLossNamingTheSessionAndTheRecord) {
  ASSERT_OK(a_->Create("alice", "", "s1"));
  ASSERT_OK(a_->Create("alice", "", "s2"));
  ASSERT_OK(a_->Add("s1", Message::User("fine")));
  ASSERT_OK(a_->Add("s1", Message::User("about to be damaged")));
  ASSERT_OK(a_->Add("s2", Message::User("untouched")));
  ASSERT_OK(a_->Commit("s2"));
  Sql("UPDATE session_records SET body = 'garbage{' WHERE session_id = 's1' AND seq = 2");
  auto fresh = OpenOrDie();  // Nothing cached: it reads the rows.
  ASSERT_NE(fresh, nullptr);
  auto messages = fresh->Messages("s1");
  EXPECT_EQ(messages.status().code(), StatusCode::kDataLoss) << messages.status().ToString();
  EXPECT_NE(messages.status().message().find("session s1"), std::string::npos) << messages.status().ToString();
  EXPECT_NE(messages.status().message().find("seq 2"), std::string::npos) << messages.status().ToString();
  EXPECT_EQ(fresh->Add("s1", Message::User("x")).code(), StatusCode::kDataLoss);
  EXPECT_EQ(fresh->Messages("s2")->size(), 0u);  // Other sessions are unaffected.

  Sql("UPDATE session_records SET kind = 'message', value = NULL, body = NULL WHERE session_id = 's2'");
  EXPECT_EQ(fresh->ArchiveMessages("s2", 1).status().code(), StatusCode::kDataLoss);
  Sql("UPDATE session_archives SET state = 'sideways' WHERE session_id = 's2'");
  auto archives = fresh->Archives("s2");
  EXPECT_EQ(archives.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(archives.status().message().find("sideways"), std::string::npos) << archives.status().ToString();

  Sql("UPDATE sessions SET user_id = '../etc', contexts = '{\"not\": \"a list\"}' WHERE id = 's2'");
  auto got = fresh->Get("s2");
  EXPECT_EQ(got.status().code(), StatusCode::kDataLoss) << got.status().ToString();
  auto listed = fresh->List();
  ASSERT_OK(listed);
  ASSERT_EQ(listed->size(), 1u) << "a damaged session is left out of the list, as a damaged session.json is";
  EXPECT_EQ((*listed)[0].id, "s1");
  // Opening again survives all of it (s2's archive no longer has a state to resume).
  EXPECT_NE(OpenOrDie(), nullptr);
}

TEST_F(PgSessionsTest, AnInstanceHoldingTheSessionMakesOthersWaitThenFailRetryably) {
  ASSERT_OK(a_->Create("alice", "", "s1"));
  auto impatient =
      OpenPgSessions(url_, {.clock = &clock_, .queue = queue_.get(), .lock_wait = std::chrono::milliseconds(200)});
  ASSERT_OK(impatient);
  auto holder = pg::Conn::Connect(url_);
  ASSERT_OK(holder);
  ASSERT_OK((*holder)->ExecScript("BEGIN; SELECT 1 FROM sessions WHERE id = 's1' FOR UPDATE"));
  Status waited = (*impatient)->Add("s1", Message::User("x"));
  EXPECT_EQ(waited.code(), StatusCode::kUnavailable) << waited.ToString();
  EXPECT_OK((*impatient)->Messages("s1"));  // Readers take no lock.
  ASSERT_OK((*holder)->ExecScript("ROLLBACK"));
  ASSERT_OK((*impatient)->Add("s1", Message::User("x")));
  EXPECT_EQ(a_->Messages("s1")->size(), 1u);
}

TEST_F(PgSessionsTest, ABatchLargerThanOneStatementIsAppendedWhole) {
  ASSERT_OK(a_->Create("alice", "", "s1"));
  std::vector<Message> batch;
  for (int i = 0; i < 2345; ++i) batch.push_back(Message::User("m" + std::to_string(i)));
  ASSERT_OK(a_->Add("s1", std::span<const Message>(batch)));
  EXPECT_EQ(*b_->Messages("s1"), batch);
  // One bad message anywhere in the batch refuses it all.
  batch.push_back(Message::User(std::string("bad \xff")));
  Status refused = a_->Add("s1", std::span<const Message>(batch));
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument) << refused.ToString();
  EXPECT_EQ(b_->Messages("s1")->size(), 2345u);
}

}  // namespace
}  // namespace strata::session
