// Many threads on one Engine: finds, writes, reads, lists, session adds, commits and phase-2 runs at once.
// Run under ThreadSanitizer by scripts/test (the `tsan` preset); in the other builds it checks the same
// outcome: nothing lost, nothing duplicated, indexes consistent.
#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <set>
#include <thread>

#include "strata/engine/engine.h"
#include "strata/llm/scripted.h"
#include "session/pipeline_stage.h"
#include "test_util.h"

namespace strata {
namespace {

llm::ScriptedReply Text(std::string text) { return testing::TextReply(std::move(text)); }

// A model that summarises, extracts one fact per archive (named after the first user message, so every
// archive yields a distinct memory) and answers dedup with "create".
llm::ScriptedReply Answer(const llm::ScriptedProvider::Request& req) {
  std::string prompt = req.history.empty() ? "" : req.history[0].ExtractText();
  if (prompt.find("Summarise the conversation") != std::string::npos) return Text("A conversation.");
  if (prompt.find("You maintain an agent's long-term memory") != std::string::npos) {
    size_t at = prompt.find("fact-");
    std::string key = at == std::string::npos ? "none" : prompt.substr(at, prompt.find_first_of(" .\n", at) - at);
    return Text(R"({"memories": [{"category": "events", "key": ")" + key + R"(", "abstract": "Event )" + key +
                R"(", "content": "The user reported )" + key + R"(."}]})");
  }
  return Text(R"({"decision": "create", "reason": "new"})");
}

TEST(EngineStress, ManyThreadsOnOneEngineLoseNothing) {
  testing::TempDir dir;
  llm::ScriptedProvider model("scripted", Answer);
  auto opened = Engine::Open({.data_dir = dir.path(), .model = &model, .ignore_prompt_env = true,
                              .shipped_prompts_dir = STRATA_PROMPTS_DIR});
  ASSERT_OK(opened);
  Engine& engine = **opened;
  constexpr int kThreads = 6;
  constexpr int kRounds = 8;
  std::atomic<int> failures{0};
  std::mutex mu;
  std::vector<std::string> errors;
  auto check = [&](const Status& s, const char* what) {
    if (s.ok()) return;
    failures++;
    std::lock_guard lock(mu);
    errors.push_back(std::string(what) + ": " + s.ToString());
  };

  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::string session = "s" + std::to_string(t);
      // Two users share threads' sessions, so phase 2 of different sessions merges into one owner's memories.
      check(engine.CreateSession(t % 2 == 0 ? "alice" : "bob", "", session).status(), "create session");
      for (int r = 0; r < kRounds; ++r) {
        std::string uri = "strata://resources/t" + std::to_string(t) + "/doc" + std::to_string(r);
        check(engine.Write(uri, "Document " + std::to_string(r) + " of thread " + std::to_string(t) + " about caching."),
              "write");
        check(engine.Find("caching document", {.limit = 5}).status(), "find");
        check(engine.Read(uri).status(), "read");
        check(engine.List("strata://resources").status(), "list");
        std::vector<Message> turn = {Message::User("fact-" + std::to_string(t) + "-" + std::to_string(r) + " happened."),
                                     Message::Assistant("Noted.")};
        check(engine.AddMessages(session, turn).status(), "add");
        if (r % 2 == 1) {
          auto outcome = engine.Commit(session, {.wait = r % 4 == 3});
          check(outcome.status(), "commit");
          if (outcome.ok()) check(outcome->phase2, "phase 2");
        }
        if (r == kRounds / 2) check(engine.Work().status(), "work");
      }
    });
  }
  for (std::thread& th : threads) th.join();
  ASSERT_EQ(failures.load(), 0) << ::testing::PrintToString(errors);

  auto work = engine.Work();
  ASSERT_OK(work);
  EXPECT_EQ(work->pending, 0u);
  EXPECT_EQ(work->dead, 0u);
  // Every write is there, every session kept its counts, every archive is done and yielded its memory.
  for (int t = 0; t < kThreads; ++t) {
    for (int r = 0; r < kRounds; ++r) {
      EXPECT_OK(engine.Stat("strata://resources/t" + std::to_string(t) + "/doc" + std::to_string(r)).status());
    }
    auto info = engine.GetSession("s" + std::to_string(t));
    ASSERT_OK(info);
    EXPECT_EQ(info->stats.messages, 2 * kRounds);
    EXPECT_EQ(info->stats.commits, kRounds / 2);
    auto status = engine.GetSessionStatus("s" + std::to_string(t));
    ASSERT_OK(status);
    ASSERT_EQ(status->archives.size(), static_cast<size_t>(kRounds / 2));
    for (const auto& a : status->archives) EXPECT_EQ(a.state, session::ArchiveState::kDone) << a.error;
  }
  std::set<std::string> memories;
  for (const char* user : {"alice", "bob"}) {
    auto events = engine.List(std::string("strata://user/") + user + "/memories/events");
    ASSERT_OK(events);
    for (const auto& n : *events) memories.insert(n.uri.str());
  }
  // One memory per archive: each archive's fact names its first user message.
  EXPECT_EQ(memories.size(), static_cast<size_t>(kThreads * kRounds / 2));
  auto problems = engine.Check();
  ASSERT_OK(problems);
  EXPECT_TRUE(problems->empty()) << ::testing::PrintToString(*problems);
}

}  // namespace
}  // namespace strata
