// Two Strata instances on one PostgreSQL database (two Engines with connections of their own): each piece
// of phase-2 work is done once. The same fact committed through both at the same moment is stored once
// (the other decision recorded as a skip); a phase 2 longer than the job lease is never claimed twice.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "pg_test_util.h"
#include "session/pipeline_stage.h"
#include "strata/engine/engine.h"
#include "test_util.h"

namespace strata {
namespace {

using testing::Stage;
using testing::StageOf;
using testing::TextReply;

// Both instances' extractions wait here for each other (at most `wait`), so that their dedup-and-apply
// steps start together; `met` tells whether they did.
class Rendezvous {
 public:
  void Arrive(std::chrono::milliseconds wait) {
    std::unique_lock lock(mu_);
    if (++arrived_ == 2) {
      met_ = true;
      cv_.notify_all();
      return;
    }
    cv_.wait_for(lock, wait, [&] { return met_; });
  }
  bool met() {
    std::lock_guard lock(mu_);
    return met_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int arrived_ = 0;
  bool met_ = false;
};

class FleetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto url = testing::NewPostgresDatabase();
    ASSERT_OK(url);
    url_ = *url;
  }
  std::unique_ptr<Engine> OpenInstance(llm::ChatProvider* model, std::chrono::milliseconds lease) {
    EngineOptions o{.data_dir = url_, .model = model, .ignore_prompt_env = true,
                    .shipped_prompts_dir = STRATA_PROMPTS_DIR};
    o.queue.lease = lease;
    auto engine = Engine::Open(o);
    EXPECT_OK(engine);
    return engine.ok() ? std::move(*engine) : nullptr;
  }
  std::string url_;
};

TEST_F(FleetTest, TheSameFactCommittedThroughTwoInstancesAtOnceIsStoredOnce) {
  Rendezvous both_extracted;
  std::atomic<int> dedup_calls{0};
  auto respond = [&](const llm::ScriptedProvider::Request& req) -> llm::ScriptedReply {
    Stage stage = StageOf(req);
    std::string prompt = req.history[0].ExtractText();
    if (stage == Stage::kExtract) {
      both_extracted.Arrive(std::chrono::seconds(20));
      // Each session states the fact in its own words, under its own key: only dedup can see they agree.
      bool first = prompt.find("first session") != std::string::npos;
      std::string key = first ? "peanuts-1" : "peanuts-2";
      std::string content = first ? "Alice is allergic to peanuts." : "Alice is allergic to peanuts; they make her ill.";
      return TextReply(R"({"memories": [{"category": "events", "key": ")" + key +
                       R"(", "abstract": "Allergic to peanuts", "content": ")" + content + R"("}]})");
    }
    if (stage == Stage::kDedup) {
      ++dedup_calls;
      return TextReply(R"({"decision": "skip", "reason": "the same allergy is already known"})");
    }
    return TextReply("Alice mentioned her peanut allergy.");
  };
  llm::ScriptedProvider model_a("a", respond), model_b("b", respond);
  std::unique_ptr<Engine> a = OpenInstance(&model_a, std::chrono::seconds(60));
  std::unique_ptr<Engine> b = OpenInstance(&model_b, std::chrono::seconds(60));
  ASSERT_TRUE(a && b);
  ASSERT_OK(a->CreateSession("alice", "", "s-a"));
  ASSERT_OK(b->CreateSession("alice", "", "s-b"));
  ASSERT_OK(a->AddMessages("s-a", std::vector{Message::User("In this first session: I am allergic to peanuts.")}));
  ASSERT_OK(b->AddMessages("s-b", std::vector{Message::User("Second session here. Peanuts make me ill.")}));
  ASSERT_OK(a->Commit("s-a", {}));
  ASSERT_OK(b->Commit("s-b", {}));
  // Each instance works the shared queue; each claims one of the two jobs (the other's is held by its
  // extraction), and both reach dedup together.
  Result<WorkReport> work_a = Status::Internal("not run"), work_b = Status::Internal("not run");
  std::thread ta([&] { work_a = a->Work(); });
  std::thread tb([&] { work_b = b->Work(); });
  ta.join();
  tb.join();
  ASSERT_OK(work_a);
  ASSERT_OK(work_b);
  EXPECT_EQ(work_a->completed + work_b->completed, 2);
  EXPECT_TRUE(both_extracted.met()) << "the two phase 2s did not run at the same time";
  auto events = a->List("strata://user/alice/memories/events");
  ASSERT_OK(events);
  EXPECT_EQ(events->size(), 1u) << "the fact was stored " << events->size() << " times";
  EXPECT_EQ(dedup_calls.load(), 1);
  auto changes = b->RecentMemoryChanges("strata://user/alice", 10);
  ASSERT_OK(changes);
  int created = 0, skipped = 0;
  for (const session::AuditEntry& e : *changes) {
    created += e.action == session::MemoryAction::kCreate;
    skipped += e.action == session::MemoryAction::kSkip;
  }
  EXPECT_EQ(created, 1);
  EXPECT_EQ(skipped, 1) << "the second commit's decision is in the audit trail";
}

TEST_F(FleetTest, APhaseTwoLongerThanTheLeaseIsNeverRunTwice) {
  std::atomic<int> extractions{0};
  std::atomic<bool> finished{false};
  auto respond = [&](const llm::ScriptedProvider::Request& req) -> llm::ScriptedReply {
    Stage stage = StageOf(req);
    if (stage == Stage::kExtract) {
      ++extractions;
      std::this_thread::sleep_for(std::chrono::milliseconds(1500));  // Five leases.
      return TextReply(R"({"memories": [{"category": "events", "key": "slow", "content": "A slow fact."}]})");
    }
    return TextReply("A slow conversation.");
  };
  llm::ScriptedProvider model_a("a", respond), model_b("b", respond);
  const auto lease = std::chrono::milliseconds(300);
  std::unique_ptr<Engine> a = OpenInstance(&model_a, lease);
  std::unique_ptr<Engine> b = OpenInstance(&model_b, lease);
  ASSERT_TRUE(a && b);
  ASSERT_OK(a->CreateSession("alice", "", "slow"));
  ASSERT_OK(a->AddMessages("slow", std::vector{Message::User("Something slow to remember.")}));
  auto committed = a->Commit("slow", {});
  ASSERT_OK(committed);
  Result<WorkReport> work_a = Status::Internal("not run");
  std::thread ta([&] {
    work_a = a->Work();
    finished = true;
  });
  // The other instance keeps asking for work all along: an expired lease would hand it the job.
  int b_completed = 0;
  while (!finished.load()) {
    auto work_b = b->Work();
    ASSERT_OK(work_b);
    b_completed += work_b->completed;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ta.join();
  ASSERT_OK(work_a);
  EXPECT_EQ(work_a->completed + b_completed, 1);
  EXPECT_EQ(extractions.load(), 1) << "the job was claimed again while its phase 2 ran";
  auto job = (*a->queue())->Get(committed->ticket.job_id);
  ASSERT_OK(job);
  ASSERT_TRUE(job->has_value());
  EXPECT_EQ((*job)->state, session::JobState::kDone);
  EXPECT_EQ((*job)->attempts, 1);
  EXPECT_EQ(a->List("strata://user/alice/memories/events")->size(), 1u);
}

}  // namespace
}  // namespace strata
