// `strata session …` and `strata memory remember|history` end to end, with a scripted model.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace strata::testing {
namespace {

using Json = nlohmann::json;

class SessionCli : public ::testing::Test {
 protected:
  CliRun Session(std::vector<std::string> args, const std::string& input = "") {
    args.insert(args.begin(), "session");
    args.insert(args.end(), {"--data", dir_.File("data")});
    return RunStrata(args, input);
  }
  TempDir dir_;
};

TEST_F(SessionCli, ImportReadsAnExportFileOnceAndCommitsWhenAsked) {
  WriteFileOrDie(dir_.File("chat.jsonl"),
                 "{\"messages\": [{\"role\": \"user\", \"content\": \"I take the aisle seat.\"}, "
                 "{\"role\": \"assistant\", \"content\": \"Noted.\"}]}\n"
                 "{\"messages\": \"broken\"}\n");
  CliRun first = Session({"import", dir_.File("chat.jsonl"), "--format", "openai-jsonl", "--user", "alice", "--commit"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  Json r = Json::parse(first.out);
  ASSERT_EQ(r["imported"].size(), 1u) << first.out;
  EXPECT_EQ(r["imported"][0]["archive"], 1);
  EXPECT_EQ(r["skipped"].size(), 1u) << first.out;
  EXPECT_NE(first.err.find("imported 1, unchanged 0, skipped 1"), std::string::npos) << first.err;
  std::string id = r["imported"][0]["session"];
  Json status = Json::parse(Session({"status", id}).out);
  EXPECT_EQ(status["archives"][0]["messages"], 2);
  CliRun again = Session({"import", dir_.File("chat.jsonl"), "--format", "openai-jsonl", "--user", "alice"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(Json::parse(again.out)["unchanged"], Json::array({id}));
  CliRun missing = Session({"import", dir_.File("nope.json"), "--format", "chatgpt", "--user", "alice"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("nope.json"), std::string::npos) << missing.err;
  CliRun bad = Session({"import", dir_.File("chat.jsonl"), "--format", "bard", "--user", "alice"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("chatgpt"), std::string::npos) << bad.err;
}

TEST_F(SessionCli, NewAddCommitStatusHistory) {
  ASSERT_EQ(Session({"new", "--user", "alice", "--id", "s1"}).exit_code, 0);
  CliRun add = Session({"add", "s1", "--text", "I always take the aisle seat."});
  ASSERT_EQ(add.exit_code, 0) << add.err;
  EXPECT_EQ(Json::parse(add.out)["stats"]["turns"], 1);
  CliRun add_json = Session({"add", "s1"}, R"({"role": "assistant", "content": "Noted."})");
  ASSERT_EQ(add_json.exit_code, 0) << add_json.err;
  WriteFileOrDie(dir_.File("script.json"), R"({"replies": [
      {"text": "Alice talked about seats.\n\nAisle."},
      {"text": "{\"memories\": [{\"category\": \"preferences\", \"key\": \"seat\", \"abstract\": \"Aisle seats\", \"content\": \"Alice prefers aisle seats.\"}]}"}]})");
  CliRun commit = Session({"commit", "s1", "--wait", "--script", dir_.File("script.json")});
  ASSERT_EQ(commit.exit_code, 0) << commit.err;
  Json c = Json::parse(commit.out);
  EXPECT_EQ(c["archive"], 1);
  EXPECT_EQ(c["state"], "done");
  EXPECT_EQ(c["diff"]["changes"][0]["uri"], "strata://user/alice/memories/preferences/seat");
  CliRun diff = Session({"diff", "s1", "1"});
  ASSERT_EQ(diff.exit_code, 0) << diff.err;
  EXPECT_EQ(Json::parse(diff.out), c["diff"]) << "the archive's diff, read back, is what commit --wait printed";
  CliRun no_archive = Session({"diff", "s1", "2"});
  EXPECT_NE(no_archive.exit_code, 0);
  EXPECT_NE(no_archive.err.find("session s1 has no archive 2"), std::string::npos) << no_archive.err;
  Json status = Json::parse(Session({"status", "s1"}).out);
  EXPECT_EQ(status["archives"][0]["state"], "done");
  EXPECT_EQ(status["jobs"][0]["state"], "done");
  Json show = Json::parse(Session({"show", "s1"}).out);
  EXPECT_EQ(show["stats"]["memories_extracted"], 1);
  EXPECT_TRUE(show["messages"].empty());
  CliRun history = RunStrata(
      {"memory", "--data", dir_.File("data"), "history", "strata://user/alice/memories/preferences/seat"}, "");
  ASSERT_EQ(history.exit_code, 0) << history.err;
  EXPECT_EQ(Json::parse(history.out)["action"], "create");
  EXPECT_EQ(Json::parse(history.out)["session"], "s1") << "the session it came from, as HTTP and Python show it";
  // Nothing left to commit; an unknown session is named.
  EXPECT_NE(Session({"commit", "s1"}).exit_code, 0);
  CliRun unknown = Session({"show", "nope"});
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.err.find("no session nope"), std::string::npos) << unknown.err;
}

// `--text ''` is an empty message given, not a request to read stdin (it read stdin, and appended what it
// held as JSON messages).
TEST_F(SessionCli, AnEmptyTextIsThatTextNotStdin) {
  ASSERT_EQ(Session({"new", "--user", "alice", "--id", "s1"}).exit_code, 0);
  CliRun add = Session({"add", "s1", "--text", ""}, R"({"role": "assistant", "content": "from stdin"})");
  ASSERT_EQ(add.exit_code, 0) << add.err;
  Json show = Json::parse(Session({"show", "s1"}).out);
  ASSERT_EQ(show["messages"].size(), 1u) << show.dump();
  EXPECT_EQ(show["messages"][0]["role"], "user") << show.dump();
  EXPECT_EQ(show.dump().find("from stdin"), std::string::npos) << show.dump();
}

TEST_F(SessionCli, CheckpointRevertForkCompactAndContext) {
  ASSERT_EQ(Session({"new", "--user", "alice", "--id", "s1"}).exit_code, 0);
  ASSERT_EQ(Session({"add", "s1", "--text", "Plan a week in Kyoto."}).exit_code, 0);
  CliRun cp = Session({"checkpoint", "s1"});
  ASSERT_EQ(cp.exit_code, 0) << cp.err;
  EXPECT_EQ(Json::parse(cp.out)["checkpoint"], 0);
  const std::string tag = Json::parse(cp.out)["tag"];
  EXPECT_EQ(Json::parse(Session({"log", "s1"}).out)["checkpoints"][0]["tag"], tag) << "the same tag in the log";
  for (int i = 1; i <= 4; ++i) {
    ASSERT_EQ(Session({"add", "s1", "--role", "assistant", "--text", "Day " + std::to_string(i) + ": temples."}).exit_code, 0);
    ASSERT_EQ(Session({"add", "s1", "--text", "And day " + std::to_string(i + 1) + "?"}).exit_code, 0);
  }
  CliRun fork = Session({"fork", "s1", "--to", "s2", "--at", "0"});
  ASSERT_EQ(fork.exit_code, 0) << fork.err;
  EXPECT_EQ(Json::parse(fork.out)["stats"]["messages"], 1);
  // Compaction folds the older turns into a summary with the (scripted) model.
  WriteFileOrDie(dir_.File("summary.json"), R"({"replies": [{"text": "Kyoto week: days 1-2 planned (temples)."}]})");
  CliRun compact = Session({"compact", "s1", "--script", dir_.File("summary.json")});
  ASSERT_EQ(compact.exit_code, 0) << compact.err;
  Json c = Json::parse(compact.out);
  EXPECT_GT(c["compacted"].get<int>(), 0) << compact.out;
  EXPECT_EQ(c["summary"], "Kyoto week: days 1-2 planned (temples).");
  EXPECT_EQ(c["session"]["id"], "s1") << "the session view, as over HTTP";
  CliRun context = Session({"context", "s1", "--max-tokens", "2000", "--reserve", "100"});
  ASSERT_EQ(context.exit_code, 0) << context.err;
  Json ctx = Json::parse(context.out);
  EXPECT_TRUE(ctx["summary_included"]);
  EXPECT_GT(ctx["sections"]["summary"].get<int>(), 0);
  EXPECT_EQ(ctx["sections"]["summary"].get<int>() + ctx["sections"]["history"].get<int>(), ctx["total_tokens"].get<int>());
  // Without --reserve the engine's default, as over HTTP and MCP: at most a quarter of a small window.
  CliRun small = Session({"context", "s1", "--max-tokens", "2000"});
  ASSERT_EQ(small.exit_code, 0) << small.err;
  EXPECT_EQ(Json::parse(small.out)["budget"], 1500) << small.out;
  Json log = Json::parse(Session({"log", "s1"}).out);
  EXPECT_EQ(log["rotations"].size(), 1u);  // The log before compaction is kept.
  // A compaction writes checkpoint 0 before the summary (as kimi-cli does): the first checkpoint's tag
  // (after the first message) is refused for it, and the log stays; the id alone empties the log.
  CliRun stale = Session({"revert", "s1", "0", "--tag", tag});
  EXPECT_NE(stale.exit_code, 0);
  EXPECT_NE(stale.err.find("checkpoint 0 of session s1 is no longer the one tagged"), std::string::npos) << stale.err;
  EXPECT_GT(Json::parse(Session({"show", "s1"}).out)["messages"].size(), 0u);
  CliRun revert = Session({"revert", "s1", "0"});
  ASSERT_EQ(revert.exit_code, 0) << revert.err;
  EXPECT_EQ(Json::parse(Session({"show", "s1"}).out)["messages"].size(), 0u);
  CliRun missing = Session({"revert", "s1", "7"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("no checkpoint 7"), std::string::npos) << missing.err;
  // A short reason, not CLI11's "not in range 0.000000 to" and the 309 digits of DBL_MAX.
  CliRun negative = Session({"revert", "s1", "--", "-1"});
  EXPECT_NE(negative.exit_code, 0);
  EXPECT_NE(negative.err.find("must be 0 or more, not -1"), std::string::npos) << negative.err;
  EXPECT_LT(negative.err.size(), 300u) << negative.err;
  ASSERT_EQ(Session({"delete", "s2"}).exit_code, 0);
  EXPECT_NE(Session({"show", "s2"}).exit_code, 0);
}

TEST_F(SessionCli, AFailedPhaseTwoIsReportedNotHidden) {
  ASSERT_EQ(Session({"new", "--user", "bob", "--id", "s"}).exit_code, 0);
  ASSERT_EQ(Session({"add", "s", "--text", "remember my birthday is May 3"}).exit_code, 0);
  WriteFileOrDie(dir_.File("bad.json"),
                 R"({"replies": [{"text": "Summary."}, {"text": "no json here"}, {"text": "still none"}]})");
  CliRun commit = Session({"commit", "s", "--wait", "--script", dir_.File("bad.json")});
  EXPECT_NE(commit.exit_code, 0);
  EXPECT_NE(commit.err.find("memory extraction failed"), std::string::npos) << commit.err;
  Json status = Json::parse(Session({"status", "s"}).out);
  EXPECT_EQ(status["archives"][0]["state"], "failed");
  EXPECT_EQ(status["jobs"][0]["state"], "pending");  // Retried later by `strata session work`.
}

// A model that refuses for good (HTTP 401) fails the archive once, with the reason; after the key is
// fixed, `session retry` queues it again and `session work` finishes it.
TEST_F(SessionCli, APermanentModelErrorIsRetriedOnRequest) {
  ASSERT_EQ(Session({"new", "--user", "dana", "--id", "s"}).exit_code, 0);
  ASSERT_EQ(Session({"add", "s", "--text", "I prefer the window seat."}).exit_code, 0);
  WriteFileOrDie(dir_.File("denied.json"),
                 R"({"replies": [{"error": {"kind": "http_status", "status": 401, "message": "invalid api key"}}]})");
  CliRun commit = Session({"commit", "s", "--wait", "--script", dir_.File("denied.json")});
  EXPECT_EQ(commit.exit_code, 5) << commit.err;
  EXPECT_NE(commit.err.find("invalid api key"), std::string::npos) << commit.err;
  Json status = Json::parse(Session({"status", "s"}).out);
  EXPECT_EQ(status["archives"][0]["state"], "failed");
  EXPECT_NE(status["archives"][0]["error"].get<std::string>().find("invalid api key"), std::string::npos);
  EXPECT_EQ(status["jobs"][0]["state"], "dead");
  CliRun retry = Session({"retry", "s"});
  ASSERT_EQ(retry.exit_code, 0) << retry.err;
  EXPECT_EQ(Json::parse(retry.out)["requeued"], 1);
  WriteFileOrDie(dir_.File("good.json"), R"({"replies": [{"text": "Dana talked about seats."},
      {"text": "{\"memories\": [{\"category\": \"preferences\", \"key\": \"seat\", \"content\": \"Dana prefers the window seat.\"}]}"}]})");
  CliRun work = Session({"work", "--script", dir_.File("good.json")});
  ASSERT_EQ(work.exit_code, 0) << work.err;
  EXPECT_EQ(Json::parse(work.out)["completed"], 1);
  status = Json::parse(Session({"status", "s"}).out);
  EXPECT_EQ(status["archives"][0]["state"], "done");
}

TEST_F(SessionCli, RememberWithACategory) {
  CliRun r = RunStrata({"memory", "--data", dir_.File("data"), "remember", "strata://user/carol",
                        "Carol is allergic to peanuts.", "--category", "profile", "--script", dir_.File("none.json")},
                       "");
  // The script file does not exist: a clear error before anything is written.
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("none.json"), std::string::npos) << r.err;
  WriteFileOrDie(dir_.File("empty.json"), R"({"replies": [{"text": "{}"}]})");
  CliRun ok = RunStrata({"memory", "--data", dir_.File("data"), "remember", "strata://user/carol",
                         "Carol is allergic to peanuts.", "--category", "profile", "--script", dir_.File("empty.json")},
                        "");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  Json changes = Json::parse(ok.out);
  ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(changes[0]["action"], "create");
}

}  // namespace
}  // namespace strata::testing
