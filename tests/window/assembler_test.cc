// Budgeted assembly: the budget conformance cases (better_behaviour where a case has one), properties over
// random histories and budgets (rapidcheck), the incremental index, and the tokenizer-backed counts.
#include "strata/window/assembler.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "conformance/conformance_cases.h"
#include "strata/tokenizer/message_counter.h"
#include "test_util.h"

namespace strata::window {
namespace {

using Json = nlohmann::ordered_json;

Message FromCaseRecord(const Json& r) {
  Message m;
  std::string role = r.value("role", "user");
  m.role = role == "assistant" ? Role::kAssistant : role == "tool" ? Role::kTool : role == "system" ? Role::kSystem
                                                                                                     : Role::kUser;
  m.content.push_back(TextPart{r.value("content", "")});
  if (r.contains("tool_calls")) {
    m.tool_calls.emplace();
    for (const Json& c : r["tool_calls"]) {
      m.tool_calls->push_back(ToolCall{.id = c["id"], .function = {c["name"], c["arguments"].dump()}});
    }
  }
  if (r.contains("tool_call_id")) m.tool_call_id = r["tool_call_id"].get<std::string>();
  return m;
}

TEST(BudgetConformance, EveryCaseSelectsTheBetterBehaviour) {
  CharRatioEstimator chars;  // Only the summary would be counted; every case gives its tokens.
  for (const Json& c : testing::LoadBudgetCases()) {
    SCOPED_TRACE(c["id"].get<std::string>());
    const Json& in = c["input"];
    std::vector<Message> records;
    for (const Json& r : in["records"]) records.push_back(FromCaseRecord(r));
    Json counts = in["token_counts"].is_array() ? in["token_counts"] : in["token_counts_full"];
    ASSERT_TRUE(counts.is_array());
    HistoryIndex index(&chars);
    for (size_t i = 0; i < records.size(); ++i) index.Append(records[i], counts[i].get<int64_t>());
    AssembleOptions options;
    options.max_context_tokens = in["max_tokens"];
    options.reserved_tokens = in.value("reserved_tokens", 0);
    if (in["summary"].is_string()) options.summary = in["summary"].get<std::string>();
    options.summary_tokens = in.value("summary_tokens", 0);
    auto a = Assemble(records, index, options, chars);
    const Json& want = c.contains("better_behaviour") ? c["better_behaviour"] : c["expected"];
    if (want.contains("error")) {
      ASSERT_FALSE(a.ok());
      EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(a.status().message().find("invalid budget"), std::string::npos);
      continue;
    }
    ASSERT_OK(a);
    EXPECT_EQ(a->included, want["included_record_indices"].get<std::vector<size_t>>());
    EXPECT_EQ(a->summary_included, want["summary_included"].get<bool>());
    EXPECT_LE(a->total_tokens, a->budget);
  }
}

// --- Properties over random histories ---------------------------------------------------------------

struct RandomHistory {
  std::vector<Message> messages;
  std::vector<int64_t> tokens;
};

RandomHistory GenHistory() {
  RandomHistory h;
  int steps = *rc::gen::inRange(0, 40);
  int next_id = 0;
  auto add = [&](Message m) {
    h.messages.push_back(std::move(m));
    h.tokens.push_back(*rc::gen::inRange<int64_t>(0, 60));
  };
  for (int s = 0; s < steps; ++s) {
    switch (*rc::gen::inRange(0, 6)) {
      case 0: add(Message::User("u")); break;
      case 1: add(Message::Assistant("a")); break;
      case 2: add(Message::ToolResult("orphan" + std::to_string(next_id++), "r")); break;
      default: {  // A tool group: complete, partial, with extra or duplicate results, or interrupted.
        Message call = Message::Assistant("");
        call.tool_calls.emplace();
        int n = *rc::gen::inRange(1, 4);
        std::vector<std::string> ids;
        for (int k = 0; k < n; ++k) {
          ids.push_back("c" + std::to_string(next_id++));
          call.tool_calls->push_back(ToolCall{.id = ids.back(), .function = {"f", "{}"}});
        }
        add(std::move(call));
        int answered = *rc::gen::inRange(0, n + 1);
        for (int k = 0; k < answered; ++k) add(Message::ToolResult(ids[static_cast<size_t>(k)], "r"));
        if (*rc::gen::inRange(0, 4) == 0) add(Message::ToolResult(*rc::gen::element(std::string("stray"), ids[0]), "x"));
      }
    }
  }
  return h;
}

bool HasCalls(const Message& m) { return m.tool_calls && !m.tool_calls->empty(); }

RC_GTEST_PROP(AssemblerProperty, NeverOverBudgetNeverSplitsAToolGroup, ()) {
  RandomHistory h = GenHistory();
  CharRatioEstimator chars;
  HistoryIndex index(&chars);
  for (size_t i = 0; i < h.messages.size(); ++i) index.Append(h.messages[i], h.tokens[i]);
  AssembleOptions options;
  options.max_context_tokens = *rc::gen::inRange<int64_t>(0, 600);
  options.reserve_for_reply = *rc::gen::inRange<int64_t>(0, options.max_context_tokens + 1);
  options.reserved_tokens = *rc::gen::inRange<int64_t>(0, 120);
  if (*rc::gen::arbitrary<bool>()) {
    options.summary = "summary";
    options.summary_tokens = *rc::gen::inRange<int64_t>(0, 150);
  }
  auto a = Assemble(h.messages, index, options, chars);
  int64_t budget = options.max_context_tokens - options.reserve_for_reply;
  if (options.reserved_tokens > budget) {
    RC_ASSERT(!a.ok());
    RC_ASSERT(a.status().code() == StatusCode::kInvalidArgument);
    return;
  }
  RC_ASSERT(a.ok());
  RC_ASSERT(a->budget == budget);
  RC_ASSERT(a->total_tokens <= budget);
  int64_t sum = options.reserved_tokens + (a->summary_included ? *options.summary_tokens : 0);
  for (size_t i : a->included) sum += h.tokens[i];
  RC_ASSERT(sum == a->total_tokens);
  RC_ASSERT(std::is_sorted(a->included.begin(), a->included.end()));
  RC_ASSERT(std::adjacent_find(a->included.begin(), a->included.end()) == a->included.end());
  if (options.summary && !a->summary_included) RC_ASSERT(a->summary_over_budget);

  // Every included tool result belongs to the included call right before it; every included call has all
  // its ids answered exactly once by the included results that follow it.
  std::set<size_t> in(a->included.begin(), a->included.end());
  for (size_t k = 0; k < a->included.size(); ++k) {
    const Message& m = h.messages[a->included[k]];
    if (HasCalls(m)) {
      std::multiset<std::string> want, got;
      for (const ToolCall& c : *m.tool_calls) want.insert(c.id);
      for (size_t j = k + 1; j < a->included.size() && h.messages[a->included[j]].role == Role::kTool; ++j) {
        got.insert(*h.messages[a->included[j]].tool_call_id);
      }
      RC_ASSERT(want == got);
    }
    if (m.role == Role::kTool) {
      size_t j = k;
      while (j > 0 && h.messages[a->included[j - 1]].role == Role::kTool) --j;
      RC_ASSERT(j > 0);
      RC_ASSERT(HasCalls(h.messages[a->included[j - 1]]));
      // The owner is the message right before the first result in the original history too.
      RC_ASSERT(a->included[j - 1] + 1 == a->included[j] || h.messages[a->included[j - 1] + 1].role == Role::kTool);
    }
  }

  // Contiguity: no sendable unit newer than the oldest selected one is left out, and the sendable unit
  // just older than the selection (if any) would not have fit.
  if (!a->included.empty()) {
    size_t oldest = a->included.front();
    int64_t left = budget - sum;  // What was still free when the scan stopped.
    const HistoryUnit* older = nullptr;
    for (const HistoryUnit& u : index.units()) {
      if (u.state != HistoryUnit::State::kOk) continue;
      if (u.begin < oldest) older = &u;
      if (u.begin >= oldest) {
        for (size_t i = u.begin; i < u.end; ++i) {
          bool unmatched = std::find(u.unmatched.begin(), u.unmatched.end(), i) != u.unmatched.end();
          RC_ASSERT(in.count(i) == (unmatched ? 0u : 1u));
        }
      }
    }
    if (older != nullptr) RC_ASSERT(older->tokens > left);
  }
}

RC_GTEST_PROP(AssemblerProperty, IncrementalIndexMatchesAFreshOneAcrossReverts, ()) {
  RandomHistory h = GenHistory();
  CharRatioEstimator chars;
  HistoryIndex incremental(&chars);
  // Grow, cut back (as a revert would) and grow again, in random steps.
  size_t n = 0;
  for (int round = 0; round < 6 && !h.messages.empty(); ++round) {
    n = *rc::gen::inRange<size_t>(0, h.messages.size() + 1);
    incremental.Sync(std::span<const Message>(h.messages).first(n));
  }
  incremental.Sync(h.messages);
  HistoryIndex fresh(&chars);
  fresh.Sync(h.messages);
  RC_ASSERT(incremental.size() == fresh.size());
  RC_ASSERT(incremental.units().size() == fresh.units().size());
  for (size_t i = 0; i < fresh.units().size(); ++i) {
    const HistoryUnit& x = incremental.units()[i];
    const HistoryUnit& y = fresh.units()[i];
    RC_ASSERT(x.begin == y.begin);
    RC_ASSERT(x.end == y.end);
    RC_ASSERT(x.state == y.state);
    RC_ASSERT(x.unmatched == y.unmatched);
    RC_ASSERT(x.tokens == y.tokens);
  }
}

// --- Examples ----------------------------------------------------------------------------------------

class AssemblerTest : public ::testing::Test {
 protected:
  Result<Assembly> Run(const std::vector<Message>& history, const std::vector<int64_t>& tokens,
                       const AssembleOptions& options) {
    index_.Reset();
    for (size_t i = 0; i < history.size(); ++i) index_.Append(history[i], tokens[i]);
    return Assemble(history, index_, options, chars_);
  }
  CharRatioEstimator chars_;
  HistoryIndex index_{&chars_};
};

TEST_F(AssemblerTest, ImpossibleBudgetsNameTheReason) {
  std::vector<Message> h = {Message::User("hi")};
  auto a = Run(h, {1}, {.max_context_tokens = 100, .reserve_for_reply = 101});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("reserve_for_reply (101) exceeds max_context_tokens (100)"), std::string::npos);
  a = Run(h, {1}, {.max_context_tokens = 100, .reserved_tokens = 90, .system_prompt = std::string(80, 'x')});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("more than the budget of 100"), std::string::npos) << a.status().message();
  a = Run(h, {1}, {.max_context_tokens = 100, .reserve_for_reply = -1});
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("reserve_for_reply is negative"), std::string::npos);
}

TEST_F(AssemblerTest, OrderIsSystemPinnedSummaryThenNewestHistory) {
  std::vector<Message> h = {Message::User("old"), Message::Assistant("older answer"), Message::User("new")};
  AssembleOptions options{.max_context_tokens = 1000,
                          .system_prompt = "sys",
                          .pinned = {Message::User("pinned fact")},
                          .summary = "what happened before"};
  auto a = Run(h, {600, 400, 100}, options);
  ASSERT_OK(a);
  EXPECT_EQ(a->included, (std::vector<size_t>{1, 2}));
  std::vector<Message> sent = AssembledMessages(h, *a, options);
  ASSERT_EQ(sent.size(), 4u);
  EXPECT_EQ(sent[0].ExtractText(), "pinned fact");
  EXPECT_EQ(sent[1].role, Role::kSystem);
  EXPECT_EQ(sent[1].ExtractText(), "what happened before");
  EXPECT_EQ(sent[2].ExtractText(), "older answer");
  EXPECT_EQ(sent[3].ExtractText(), "new");
  // The fixed parts were counted by the counter (chars / 4): "sys" 0, "pinned fact" 2, the summary 5.
  EXPECT_EQ(a->fixed_tokens, 2);
  EXPECT_EQ(a->summary_tokens, 5);
  EXPECT_EQ(a->total_tokens, 2 + 5 + 500);
}

TEST_F(AssemblerTest, ASummaryThatDoesNotFitIsLeftOutAndFlagged) {
  std::vector<Message> h = {Message::User("a"), Message::User("b")};
  auto a = Run(h, {10, 10}, {.max_context_tokens = 50, .summary = "s", .summary_tokens = 60});
  ASSERT_OK(a);
  EXPECT_FALSE(a->summary_included);
  EXPECT_TRUE(a->summary_over_budget);
  EXPECT_EQ(a->included, (std::vector<size_t>{0, 1}));
  ASSERT_FALSE(a->warnings.empty());
  EXPECT_EQ(a->warnings[0].code, AssemblyWarning::Code::kSummaryOverBudget);
}

TEST_F(AssemblerTest, AnOversizedNewestMessageIsReportedNotSilentlyDropped) {
  std::vector<Message> h = {Message::User("a"), Message::User("huge")};
  auto a = Run(h, {10, 500}, {.max_context_tokens = 100});
  ASSERT_OK(a);
  EXPECT_TRUE(a->included.empty());
  ASSERT_EQ(a->warnings.size(), 1u);
  EXPECT_EQ(a->warnings[0].code, AssemblyWarning::Code::kNewestOverBudget);
  EXPECT_EQ(a->warnings[0].index, 1u);
}

TEST_F(AssemblerTest, ResultsThatAnswerNoCallOfTheirGroupAreDroppedFromIt) {
  Message call = Message::Assistant("");
  call.tool_calls = {{ToolCall{.id = "a", .function = {"f", "{}"}}}};
  std::vector<Message> h = {Message::User("go"), call, Message::ToolResult("a", "ra"),
                            Message::ToolResult("zzz", "stray"), Message::ToolResult("a", "again")};
  auto a = Run(h, {1, 1, 1, 1, 1}, {.max_context_tokens = 100});
  ASSERT_OK(a);
  EXPECT_EQ(a->included, (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(a->total_tokens, 3);
  int unmatched = 0;
  for (const auto& w : a->warnings) unmatched += w.code == AssemblyWarning::Code::kUnmatchedToolResult;
  EXPECT_EQ(unmatched, 2);
}

TEST(AssemblerTokenizer, CountsToolCallArgumentsWithTheRealTokenizer) {
  auto encoding = tokenizer::Encoding::Load("o200k_base");
  ASSERT_OK(encoding);
  tokenizer::EncodingMessageCounter counter(*encoding);
  Message call = Message::Assistant("");
  call.tool_calls = {{ToolCall{.id = "c1", .function = {"search", R"({"query":")" + std::string(400, 'q') + "\"}"}}}};
  std::vector<Message> h = {Message::User("search for hotels"), call, Message::ToolResult("c1", "8 hotels"),
                            Message::Assistant("Found 8 hotels")};
  HistoryIndex index(&counter);
  index.Sync(h);
  EXPECT_GT(index.tokens(1), 40);  // The arguments count (content-only counting would say 0).
  int64_t tail = index.tokens(3);
  auto a = Assemble(h, index, {.max_context_tokens = tail + 5}, counter);
  ASSERT_OK(a);
  EXPECT_EQ(a->included, (std::vector<size_t>{3}));  // The group does not fit: dropped whole.
  EXPECT_LE(a->total_tokens, a->budget);
  EXPECT_EQ(a->total_tokens, counter.CountMessages(std::span<const Message>(h).subspan(3)));
}

}  // namespace
}  // namespace strata::window
