// Compaction: the trigger, pruning, LLM compaction (single request, map-reduce over a history far larger
// than the compaction window, incremental, failure fallback, cancellation), fidelity of planted facts,
// and the round trip through the context log (kimi-cli record order, rotation, trim).
#include "strata/window/compaction.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "strata/llm/chat_error.h"
#include "strata/llm/scripted.h"
#include "strata/log/context_log.h"
#include "strata/window/assembler.h"
#include "session/pipeline_stage.h"
#include "test_util.h"

namespace strata::window {
namespace {

using llm::ScriptedProvider;
using llm::ScriptedReply;

ScriptedReply Text(std::string text) { return testing::TextReply(std::move(text)); }

// A stand-in summarizer: answers with every FACT-n token it was shown, in order of first appearance.
ScriptedProvider::Responder EchoFacts() {
  return [](const ScriptedProvider::Request& request) {
    std::string prompt = request.history.back().ExtractText();
    static const std::regex fact("FACT-[0-9]+");
    std::set<std::string> seen;
    std::string out = "Facts:";
    for (auto it = std::sregex_iterator(prompt.begin(), prompt.end(), fact); it != std::sregex_iterator(); ++it) {
      if (seen.insert(it->str()).second) out += " " + it->str();
    }
    return Text(out);
  };
}

// A conversation of `turns` user turns; turn i plants FACT-i and runs a tool call with a bulky result.
std::vector<Message> Conversation(int turns, size_t result_bytes = 200) {
  std::vector<Message> h;
  for (int i = 0; i < turns; ++i) {
    h.push_back(Message::User("Turn " + std::to_string(i) + ": remember FACT-" + std::to_string(i) + "."));
    Message call = Message::Assistant("Looking it up.");
    call.tool_calls = {{ToolCall{.id = "call_" + std::to_string(i), .function = {"search", "{\"q\":\"x\"}"}}}};
    h.push_back(call);
    h.push_back(Message::ToolResult("call_" + std::to_string(i), std::string(result_bytes, 'r')));
    h.push_back(Message::Assistant("Done with turn " + std::to_string(i) + "."));
  }
  return h;
}

TEST(ShouldCompact, FiresOnTheRatioOrTheHeadroomWhicheverComesFirst) {
  EXPECT_FALSE(ShouldCompact(8499, 10000));
  EXPECT_TRUE(ShouldCompact(8500, 10000));
  EXPECT_NE(ShouldCompact(8500, 10000)->find("85%"), std::string::npos);
  EXPECT_FALSE(ShouldCompact(5000, 10000, {.ratio = 0.9, .reserved_headroom = 4000}));
  EXPECT_TRUE(ShouldCompact(6000, 10000, {.ratio = 0.9, .reserved_headroom = 4000}));
  EXPECT_FALSE(ShouldCompact(100, 0));
}

TEST(Prune, ReplacesOldToolOutputAndThinkingKeepingTheNewestAndEveryGroup) {
  std::vector<Message> h = Conversation(3, 500);
  h[1].content.insert(h[1].content.begin(), ThinkPart{"secret reasoning", "sig"});
  std::vector<Message> original = h;
  PruneStats stats = Prune(&h, {.keep_recent = 4});
  EXPECT_EQ(stats.tool_results, 2u);  // Turns 0 and 1; turn 2 is among the newest four.
  EXPECT_EQ(stats.thinking, 1u);
  EXPECT_EQ(h[2].ExtractText(), "[tool output pruned: 500 characters]");
  EXPECT_EQ(h[2].tool_call_id, original[2].tool_call_id);
  EXPECT_EQ(h[1].tool_calls, original[1].tool_calls);
  EXPECT_EQ(std::get<ThinkPart>(h[1].content[0]).think, "[thinking pruned]");
  EXPECT_FALSE(std::get<ThinkPart>(h[1].content[0]).encrypted);
  EXPECT_EQ(h[10], original[10]);  // The newest tool result is intact.
  // Pruning again changes nothing.
  std::vector<Message> once = h;
  stats = Prune(&h, {.keep_recent = 4});
  EXPECT_EQ(stats.tool_results + stats.thinking, 0u);
  EXPECT_EQ(h, once);
}

TEST(Compact, FoldsTheOlderTurnsIntoOneSummaryAndKeepsTheRecentOnesVerbatim) {
  ScriptedProvider provider("summarizer", std::vector<ScriptedReply>{Text("The user planted facts 0-2.")});
  std::vector<Message> h = Conversation(5);
  auto r = Compact(provider, h, {.keep_recent_turns = 2, .instruction = "keep the facts"});
  ASSERT_OK(r);
  EXPECT_EQ(r->llm_calls, 1);
  EXPECT_EQ(r->chunks, 1);
  EXPECT_EQ(r->compacted, 12u);
  EXPECT_EQ(r->kept, 8u);
  ASSERT_EQ(r->messages.size(), 9u);
  EXPECT_EQ(SummaryOf(r->messages[0]).value_or(""), "The user planted facts 0-2.");
  EXPECT_EQ(r->messages[1], h[12]);  // Turn 3's user message starts the kept tail.
  EXPECT_LT(r->tokens_after, r->tokens_before);
  // The model saw the older turns (with tool calls and results) and the focus, not the kept ones.
  auto requests = provider.requests();
  ASSERT_EQ(requests.size(), 1u);
  std::string prompt = requests[0].history[0].ExtractText();
  EXPECT_NE(prompt.find("FACT-0"), std::string::npos);
  EXPECT_NE(prompt.find("-> calls search({\"q\":\"x\"}) [call_2]"), std::string::npos);
  EXPECT_NE(prompt.find("Focus: keep the facts"), std::string::npos);
  EXPECT_EQ(prompt.find("FACT-3"), std::string::npos);
}

TEST(Compact, NeverSplitsAToolGroupWhenTheKeptTailIsCapped) {
  // One long turn of many tool calls: the tail cap cuts inside the turn, but only between groups.
  std::vector<Message> h = {Message::User("do everything")};
  for (int i = 0; i < 40; ++i) {
    Message call = Message::Assistant("");
    call.tool_calls = {{ToolCall{.id = "c" + std::to_string(i), .function = {"f", "{}"}}},
                       {ToolCall{.id = "d" + std::to_string(i), .function = {"g", "{}"}}}};
    h.push_back(call);
    h.push_back(Message::ToolResult("c" + std::to_string(i), std::string(400, 'x')));
    h.push_back(Message::ToolResult("d" + std::to_string(i), std::string(400, 'y')));
  }
  ScriptedProvider provider("s", EchoFacts());
  auto r = Compact(provider, h, {.keep_recent_turns = 1, .max_kept_fraction = 0.1, .compaction_window = 20'000});
  ASSERT_OK(r);
  ASSERT_GT(r->compacted, 0u);
  ASSERT_GE(r->messages.size(), 2u);
  const Message& first_kept = r->messages[1];
  EXPECT_TRUE(first_kept.tool_calls.has_value()) << "the kept tail must start at a group's call";
  CharRatioEstimator chars;
  HistoryIndex index(&chars);
  std::span<const Message> kept = std::span<const Message>(r->messages).subspan(1);
  index.Sync(kept);
  for (const HistoryUnit& u : index.units()) EXPECT_EQ(u.state, HistoryUnit::State::kOk);
}

TEST(Compact, MapReducesAHistoryFarLargerThanTheCompactionWindowWithoutLosingFacts) {
  ScriptedProvider provider("s", EchoFacts());
  std::vector<Message> h = Conversation(300, 2000);  // ~150k tokens counted as chars / 4.
  CompactionOptions options{.keep_recent_turns = 2, .compaction_window = 8'000, .reserve_for_summary = 1'000};
  auto r = Compact(provider, h, options);
  ASSERT_OK(r);
  EXPECT_FALSE(r->pruned_fallback) << r->llm_error.ToString();
  EXPECT_GT(r->chunks, 10);
  EXPECT_GT(r->llm_calls, r->chunks);  // Map calls plus at least one reduce.
  // Every request fit the compaction window with the reserve left free.
  CharRatioEstimator chars;
  for (const auto& request : provider.requests()) {
    Message system = Message::System(request.system_prompt);
    int64_t tokens = chars.CountMessages({&system, 1}) + chars.CountMessages(request.history);
    EXPECT_LE(tokens, options.compaction_window - options.reserve_for_summary);
  }
  // Fidelity: every fact planted in a compacted turn reaches the summary.
  std::string summary = SummaryOf(r->messages[0]).value_or("") + " ";
  for (int i = 0; i < 298; ++i) {
    EXPECT_NE(summary.find("FACT-" + std::to_string(i) + " "), std::string::npos) << i;
  }
}

TEST(Compact, ASecondCompactionSummarisesOnlyWhatCameAfterTheFirst) {
  ScriptedProvider provider("s", std::vector<ScriptedReply>{Text("S1: facts 0-2"), Text("S2: facts 0-5")});
  std::vector<Message> h = Conversation(5);
  auto first = Compact(provider, h, {});
  ASSERT_OK(first);
  std::vector<Message> next = first->messages;
  std::vector<Message> more = Conversation(8);
  next.insert(next.end(), more.begin() + 20, more.end());  // Turns 5-7 happen.
  auto second = Compact(provider, next, {});
  ASSERT_OK(second);
  EXPECT_TRUE(second->incremental);
  EXPECT_EQ(SummaryOf(second->messages[0]).value_or(""), "S2: facts 0-5");
  std::string prompt = provider.requests()[1].history[0].ExtractText();
  EXPECT_NE(prompt.find("S1: facts 0-2"), std::string::npos);  // The earlier summary, updated...
  EXPECT_NE(prompt.find("FACT-3"), std::string::npos);         // ...with the turns after it...
  EXPECT_EQ(prompt.find("FACT-0"), std::string::npos);         // ...and not the ones it already covers.
  EXPECT_EQ(prompt.find("FACT-7"), std::string::npos);         // The kept turns are not summarised.
}

TEST(Compact, TooFewTurnsIsNotAnError) {
  ScriptedProvider provider("s", std::vector<ScriptedReply>{});
  std::vector<Message> h = Conversation(2);
  auto r = Compact(provider, h, {.keep_recent_turns = 2});
  ASSERT_OK(r);
  EXPECT_EQ(r->compacted, 0u);
  EXPECT_EQ(r->messages, h);
  EXPECT_EQ(r->llm_calls, 0);
}

TEST(Compact, FallsBackToPruningWhenTheModelFailsAndSaysSo) {
  ScriptedReply failure;
  failure.error = llm::HttpStatusError(500, R"({"error":{"message":"overloaded"}})");
  ScriptedProvider provider("s", std::vector<ScriptedReply>{failure});
  std::vector<Message> h = Conversation(6, 1000);
  auto r = Compact(provider, h, {});
  ASSERT_OK(r);
  EXPECT_TRUE(r->pruned_fallback);
  EXPECT_NE(r->llm_error.message().find("overloaded"), std::string::npos) << r->llm_error.ToString();
  EXPECT_EQ(r->messages.size(), h.size());
  EXPECT_GT(r->prune_stats.tool_results, 0u);
  EXPECT_LT(r->tokens_after, r->tokens_before);
  // Without the fallback, the error is returned.
  ScriptedProvider again("s", std::vector<ScriptedReply>{failure});
  auto strict = Compact(again, h, {.prune_on_failure = false});
  EXPECT_FALSE(strict.ok());
}

TEST(Compact, CancellationIsAnErrorNotAFallback) {
  ScriptedProvider provider("s", EchoFacts());
  Canceller cancel;
  cancel.Cancel();
  auto r = Compact(provider, Conversation(6), {.generate = {.cancel = &cancel}});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kCancelled);
}

TEST(WriteCompaction, RoundTripsThroughTheContextLogInKimiCliOrder) {
  testing::TempDir dir;
  std::string path = dir.File("context.jsonl");
  std::vector<Message> h = Conversation(5);
  {
    auto log = ContextLog::Open(path);
    ASSERT_OK(log->Restore());
    ASSERT_OK(log->WriteSystemPrompt("You are careful."));
    ASSERT_OK(log->Append(h));
    ASSERT_OK(log->UpdateTokenCount(5000));
    ScriptedProvider provider("s", std::vector<ScriptedReply>{Text("summary of turns 0-2")});
    auto r = Compact(provider, log->history(), {});
    ASSERT_OK(r);
    auto rotation = WriteCompaction(log.get(), *r, 321);
    ASSERT_OK(rotation);
    EXPECT_EQ(*rotation, dir.File("context_1.jsonl"));
    EXPECT_EQ(log->history(), r->messages);
    EXPECT_EQ(log->token_count(), 321);
    // The log in memory keeps its system prompt too (Rewrite is given the log's own).
    EXPECT_EQ(log->system_prompt().value_or(""), "You are careful.");
    ASSERT_OK(log->Close());
  }
  // The file reads back the same, in the order kimi-cli writes a compacted context.
  std::string text = testing::ReadFileOrDie(path);
  EXPECT_EQ(text.find("{\"role\": \"_system_prompt\""), 0u) << text.substr(0, 200);
  size_t checkpoint = text.find("{\"role\": \"_checkpoint\", \"id\": 0}");
  size_t summary = text.find("Previous context has been compacted");
  size_t usage = text.find("{\"role\": \"_usage\", \"token_count\": 321}");
  ASSERT_NE(checkpoint, std::string::npos);
  ASSERT_NE(summary, std::string::npos);
  ASSERT_NE(usage, std::string::npos);
  EXPECT_LT(checkpoint, summary);
  EXPECT_LT(summary, usage);
  auto log = ContextLog::Open(path);
  ASSERT_OK(log->Restore());
  EXPECT_EQ(log->history().size(), 9u);
  EXPECT_EQ(SummaryOf(log->history()[0]).value_or(""), "summary of turns 0-2");
  EXPECT_EQ(log->system_prompt().value_or(""), "You are careful.");
  EXPECT_EQ(log->n_checkpoints(), 1);
  // Nothing was lost: the rotation still holds the whole conversation.
  auto old = ContextLog::Open(dir.File("context_1.jsonl"), {.read_only = true});
  ASSERT_OK(old->Restore());
  EXPECT_EQ(old->history(), h);
  // And the compacted log can be reverted to its checkpoint like any other.
  ASSERT_OK(log->RevertTo(0));
  EXPECT_TRUE(log->history().empty());
}

TEST(Trim, KeepsTheNewestMessagesAsWholeGroupsAndArchivesTheRest) {
  testing::TempDir dir;
  std::string path = dir.File("context.jsonl");
  std::vector<Message> h = Conversation(3);  // 12 messages; [9]=call? no: 8 user, 9 call, 10 result, 11 answer
  auto log = ContextLog::Open(path);
  ASSERT_OK(log->Restore());
  ASSERT_OK(log->Append(h));
  // Keeping 2 would start at the tool result (index 10): the cut moves forward to the next unit.
  auto rotation = Trim(log.get(), 2);
  ASSERT_OK(rotation);
  ASSERT_EQ(log->history().size(), 1u);
  EXPECT_EQ(log->history()[0], h[11]);
  // Keeping 3 starts at the call: its result comes along.
  auto log2 = ContextLog::Open(dir.File("b.jsonl"));
  ASSERT_OK(log2->Restore());
  ASSERT_OK(log2->Append(h));
  ASSERT_OK(Trim(log2.get(), 3));
  EXPECT_EQ(log2->history(), std::vector<Message>(h.begin() + 9, h.end()));
  auto archive = ContextLog::Open(*rotation, {.read_only = true});
  ASSERT_OK(archive->Restore());
  EXPECT_EQ(archive->history(), h);
}

}  // namespace
}  // namespace strata::window
