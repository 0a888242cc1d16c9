// `strata window assemble` on the budget conformance cases, `strata context compact|trim`, and automatic
// compaction in `strata chat`, run as a user would run them.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "conformance/conformance_cases.h"
#include "strata/log/context_log.h"
#include "strata/message/message_json.h"
#include "strata/tokenizer/message_counter.h"
#include "strata/window/compaction.h"
#include "test_util.h"

namespace strata {
namespace {

using Json = nlohmann::ordered_json;
using testing::CliRun;
using testing::RunStrata;
using testing::TempDir;

TEST(WindowCli, AssembleMatchesTheBudgetCasesBetterBehaviour) {
  for (const Json& c : testing::LoadBudgetCases()) {
    SCOPED_TRACE(c["id"].get<std::string>());
    Json input = c["input"];
    std::string max = "--max-tokens=" + std::to_string(input["max_tokens"].get<int64_t>());
    input.erase("max_tokens");
    CliRun run = RunStrata({"window", "assemble", max}, input.dump());
    Json out = Json::parse(run.out, nullptr, false);
    ASSERT_FALSE(out.is_discarded()) << run.out << run.err;
    const Json& want = c.contains("better_behaviour") ? c["better_behaviour"] : c["expected"];
    if (want.contains("error")) {
      EXPECT_EQ(run.exit_code, 1);
      EXPECT_EQ(out["error"], want["error"]);
      EXPECT_NE(run.err.find("invalid budget"), std::string::npos) << run.err;
      continue;
    }
    ASSERT_EQ(run.exit_code, 0) << run.err;
    EXPECT_EQ(out["included_record_indices"], want["included_record_indices"]);
    EXPECT_EQ(out["summary_included"], want["summary_included"]);
    EXPECT_LE(out["total_tokens"].get<int64_t>(), out["budget"].get<int64_t>());
    // The messages are the summary (when included) and the included records, in order.
    size_t expected_messages = want["included_record_indices"].size() + (want["summary_included"] ? 1 : 0);
    EXPECT_EQ(out["messages"].size(), expected_messages);
  }
}

TEST(WindowCli, CountsWithTheTokenizerAndReportsWhatItDropped) {
  Json input = {{"system_prompt", "You are terse."},
                {"summary", "The user is planning a trip to Lisbon."},
                {"records",
                 {{{"role", "user"}, {"content", "Find hotels"}},
                  {{"role", "assistant"},
                   {"content", ""},
                   {"tool_calls", {{{"id", "c1"}, {"name", "search"}, {"arguments", {{"q", "hotels"}}}}}}},
                  {{"role", "user"}, {"content", "never mind"}},
                  {{"role", "tool"}, {"content", "3 hotels"}, {"tool_call_id", "c1"}},
                  {{"role", "assistant"}, {"content", "OK."}}}}};
  CliRun run = RunStrata({"window", "assemble", "--max-tokens", "200", "--reserve", "50"}, input.dump());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  Json out = Json::parse(run.out);
  EXPECT_EQ(out["included_record_indices"], Json({0, 2, 4}));
  EXPECT_EQ(out["budget"], 150);
  EXPECT_EQ(out["messages"][0]["role"], "system");
  EXPECT_EQ(out["messages"][0]["content"], "You are terse.");
  EXPECT_EQ(out["messages"][1]["content"], "The user is planning a trip to Lisbon.");
  EXPECT_EQ(out["warnings"], Json({"orphan_tool_result", "incomplete_tool_group"}));
  EXPECT_EQ(out["warning_details"][0]["record_index"], 3);
  // The total is what o200k_base counts for exactly the messages sent.
  auto sent = ParseMessages(out["messages"].dump());
  ASSERT_OK(sent);
  auto encoding = tokenizer::Encoding::Load("o200k_base");
  ASSERT_OK(encoding);
  EXPECT_EQ(out["total_tokens"].get<int64_t>(), tokenizer::EncodingMessageCounter(*encoding).CountMessages(*sent));
  // A smaller window leaves the summary out and flags it.
  run = RunStrata({"window", "assemble", "--max-tokens", "60", "--reserve", "40"}, input.dump());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  out = Json::parse(run.out);
  EXPECT_EQ(out["summary_included"], false);
  EXPECT_EQ(out["summary_over_budget"], true);
  EXPECT_EQ(out["warnings"][0], "summary_over_budget");
}

TEST(WindowCli, BadInputNamesWhatIsWrong) {
  CliRun run = RunStrata({"window", "assemble", "--max-tokens", "10"}, R"({"records":[{"role":"user","content":"x"}], "token_counts":[1,2]})");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("token_counts: 2 counts for 1 records"), std::string::npos) << run.err;
  run = RunStrata({"window", "assemble"}, R"({"records":[]})");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("--max-tokens is required"), std::string::npos) << run.err;
  run = RunStrata({"window", "assemble", "--max-tokens", "10"}, R"({"records":[{"role":"robot","content":"x"}]})");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("records"), std::string::npos) << run.err;
  run = RunStrata({"window", "assemble", "--max-tokens", "10", "--reserve", "20"}, R"({"records":[]})");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("\"error\":\"invalid_budget\""), std::string::npos) << run.out;
  // A wrongly typed field in a flat tool call is an error naming it, not an abort.
  run = RunStrata({"window", "assemble", "--max-tokens", "100"},
                  R"({"records":[{"role":"assistant","content":"","tool_calls":[{"id":5,"name":"f","arguments":{}}]}]})");
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("id"), std::string::npos) << run.err;
}

// A script whose replies are numbered answers, then the summaries.
std::string Script(int answers, const std::vector<std::string>& extra = {}) {
  Json replies = Json::array();
  for (int i = 0; i < answers; ++i) replies.push_back({{"text", "answer " + std::to_string(i)}});
  for (const std::string& e : extra) replies.push_back({{"text", e}});
  return Json{{"replies", replies}}.dump();
}

std::string Turns(int n) {
  std::string out;
  const char* words[] = {"apple", "river", "stone", "cloud", "maple", "orbit", "lantern", "pixel", "harbor"};
  for (int i = 0; i < n; ++i) {
    out += "turn " + std::to_string(i) + " FACT-" + std::to_string(i) + ":";
    for (int k = 0; k < 60; ++k) out += std::string(" ") + words[(i * 7 + k * 3) % 9];
    out += "\n";
  }
  return out;
}

TEST(ContextCli, CompactSummarisesWithTheConfiguredProviderAndKeepsTheOldLog) {
  TempDir dir;
  std::string session = dir.File("ctx.jsonl");
  testing::WriteFileOrDie(dir.File("chat.json"), Script(6));
  ASSERT_EQ(RunStrata({"chat", "--script", dir.File("chat.json"), "--session", session, "--system", "Be brief."},
                      Turns(6))
                .exit_code,
            0);
  testing::WriteFileOrDie(dir.File("summary.json"), Script(0, {"The user planted FACT-0 to FACT-3."}));
  CliRun run = RunStrata({"context", "compact", session, "--script", dir.File("summary.json"), "--instruction",
                          "keep every FACT"},
                         "");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  Json out = Json::parse(run.out);
  EXPECT_EQ(out["compacted"], 8);
  EXPECT_EQ(out["kept"], 4);
  EXPECT_EQ(out["llm_calls"], 1);
  EXPECT_EQ(out["pruned_fallback"], false);
  EXPECT_EQ(out["rotation"], dir.File("ctx_1.jsonl"));
  EXPECT_LT(out["tokens_after"].get<int64_t>(), out["tokens_before"].get<int64_t>());
  auto log = ContextLog::Open(session);
  ASSERT_OK(log->Restore());
  ASSERT_EQ(log->history().size(), 5u);
  EXPECT_EQ(window::SummaryOf(log->history()[0]).value_or(""), "The user planted FACT-0 to FACT-3.");
  EXPECT_EQ(log->system_prompt().value_or(""), "Be brief.");
  EXPECT_GT(log->token_count(), 0);
  // A model failure falls back to pruning and says so.
  testing::WriteFileOrDie(dir.File("fail.json"),
                          R"({"replies":[{"error":{"kind":"http_status","status":500,"message":"down"}}]})");
  run = RunStrata({"context", "compact", dir.File("ctx_1.jsonl"), "--script", dir.File("fail.json")}, "");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  out = Json::parse(run.out);
  EXPECT_EQ(out["pruned_fallback"], true);
  EXPECT_NE(run.err.find("pruned"), std::string::npos) << run.err;
}

TEST(ContextCli, TrimArchivesTheOlderMessages) {
  TempDir dir;
  std::string session = dir.File("ctx.jsonl");
  testing::WriteFileOrDie(dir.File("chat.json"), Script(3));
  ASSERT_EQ(RunStrata({"chat", "--script", dir.File("chat.json"), "--session", session}, Turns(3)).exit_code, 0);
  CliRun run = RunStrata({"context", "trim", session, "2"}, "");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(Json::parse(run.out), Json({{"kept", 2}, {"archived", 4}, {"rotation", dir.File("ctx_1.jsonl")}}));
}

TEST(ChatCli, CompactsAutomaticallyWhenTheWindowFillsAndKeepsTheFacts) {
  TempDir dir;
  std::string session = dir.File("ctx.jsonl");
  // Replies for 12 turns; the summary requests are answered by the replies in between.
  testing::WriteFileOrDie(dir.File("chat.json"), Script(40));
  CliRun run = RunStrata({"chat", "--script", dir.File("chat.json"), "--session", session, "--max-context", "1000",
                          "--reserve", "50"},
                         Turns(12) + "/tokens\n/compact keep the facts\n");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("[compacted ("), std::string::npos) << run.err;
  auto log = ContextLog::Open(session);
  ASSERT_OK(log->Restore());
  ASSERT_FALSE(log->history().empty());
  EXPECT_TRUE(window::SummaryOf(log->history()[0]).has_value());
  EXPECT_LE(log->token_count_with_pending(), 1000);
  // The whole conversation is still on disk in the rotations.
  EXPECT_TRUE(std::filesystem::exists(dir.File("ctx_1.jsonl")));
}

// A context file that is a directory read as an empty context (exit 0), and one that is a FIFO blocked an
// append forever: both are refused, naming what the path is.
TEST(ContextCli, APathThatIsNotARegularFileIsRefused) {
  testing::TempDir dir;
  std::filesystem::create_directory(dir.File("ctx.jsonl"));
  CliRun shown = RunStrata({"context", "show", dir.File("ctx.jsonl")}, "");
  EXPECT_NE(shown.exit_code, 0);
  EXPECT_NE(shown.err.find("is not a regular file (a directory)"), std::string::npos) << shown.err;
  ASSERT_EQ(::mkfifo(dir.File("fifo.jsonl").c_str(), 0600), 0);
  CliRun appended = RunStrata({"context", "append", dir.File("fifo.jsonl")}, R"({"role": "user", "content": "hi"})");
  EXPECT_NE(appended.exit_code, 0);
  EXPECT_NE(appended.err.find("is not a regular file (a FIFO)"), std::string::npos) << appended.err;
}

}  // namespace
}  // namespace strata
