// Find with model help (FindAssist): the model's searches are searched with the question, its ranking
// orders the candidates, what it cost is reported, and a model that fails or answers nonsense leaves the
// store's own answer standing.
#include <gtest/gtest.h>

#include <mutex>
#include <nlohmann/json.hpp>

#include "strata/engine/engine.h"
#include "strata/engine/views.h"
#include "strata/llm/scripted.h"
#include "session/pipeline_stage.h"
#include "test_util.h"

namespace strata {
namespace {

using testing::Stage;
using testing::StageOf;

llm::ScriptedReply Reply(std::string text, int64_t input = 0, int64_t output = 0) {
  llm::ScriptedReply r = testing::TextReply(std::move(text));
  if (input > 0) r.usage = TokenUsage{.input_other = input, .output = output};
  return r;
}

std::vector<std::string> Uris(const std::vector<memory::Hit>& hits) {
  std::vector<std::string> out;
  for (const memory::Hit& h : hits) out.push_back(h.uri.str());
  return out;
}

class FindAssistTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model_ = std::make_unique<llm::ScriptedProvider>("scripted", [this](const llm::ScriptedProvider::Request& req) {
      std::lock_guard lock(mu_);
      Stage stage = StageOf(req);
      prompts_.push_back(req.history.empty() ? "" : req.history[0].ExtractText());
      if (stage == Stage::kRewrite) return rewrite_;
      if (stage == Stage::kRerank) return rerank_;
      return Reply("?");
    });
    auto e = Engine::Open({.data_dir = dir_.path(), .model = model_.get(), .ignore_prompt_env = true,
                           .shipped_prompts_dir = STRATA_PROMPTS_DIR});
    ASSERT_OK(e);
    engine_ = std::move(*e);
    for (const auto& [name, text] : std::vector<std::pair<std::string, std::string>>{
             {"pets", "Rex the beagle chews slippers every morning before the walk."},
             {"garden", "The tomatoes in the north bed need water twice a week in July."},
             {"seats", "Alice books aisle seats on long flights and window seats on short ones."},
             {"car", "The car's winter tyres are stored in the garage loft."},
             {"trains", "Alice takes the night train to Vienna and books a seat in the quiet coach."}}) {
      ASSERT_OK(engine_->Write("strata://resources/notes/" + name, text));
    }
  }

  FindRequest Request(std::string query) {
    FindRequest r;
    r.query = std::move(query);
    r.under = "strata://resources/notes";
    return r;
  }

  testing::TempDir dir_;
  std::mutex mu_;
  llm::ScriptedReply rewrite_ = Reply(R"({"queries": []})");
  llm::ScriptedReply rerank_ = Reply(R"({"ranking": []})");
  std::vector<std::string> prompts_;
  std::unique_ptr<llm::ScriptedProvider> model_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(FindAssistTest, TheModelsSearchesAreSearchedWithTheQuestion) {
  rewrite_ = Reply(R"({"queries": ["beagle chews slippers", "  ", "beagle chews slippers", 
                                    "Which dog ruins footwear?", "dog walk morning"]})", 120, 30);
  FindRequest request = Request("Which dog ruins footwear?");
  request.assist = {.rewrite = true, .max_queries = 3};
  auto found = engine_->Find(request);
  ASSERT_OK(found);
  // Blank, repeated and the question itself are not searches of their own.
  EXPECT_EQ(found->queries, (std::vector<std::string>{"beagle chews slippers", "dog walk morning"}));
  ASSERT_FALSE(found->hits.empty());
  EXPECT_EQ(found->hits[0].uri.str(), "strata://resources/notes/pets");
  ASSERT_TRUE(found->model.has_value());
  EXPECT_EQ(found->model->calls, 1);
  EXPECT_EQ(found->model->input_tokens, 120);
  EXPECT_EQ(found->model->output_tokens, 30);
  EXPECT_EQ(found->model->error, "");
  ASSERT_EQ(prompts_.size(), 1u);
  EXPECT_NE(prompts_[0].find("Question: Which dog ruins footwear?"), std::string::npos) << prompts_[0];
  // The view every front end returns carries the searches and the cost.
  nlohmann::json view = views::FindResultView(*found);
  EXPECT_EQ(view["queries"].size(), 2u);
  EXPECT_EQ(view["model"]["calls"], 1);
  EXPECT_FALSE(view["model"].contains("error"));
}

TEST_F(FindAssistTest, TheModelsRankingOrdersTheCandidates) {
  FindRequest request = Request("Alice seat");
  request.limit = 5;
  auto plain = engine_->Find(request);
  ASSERT_OK(plain);
  ASSERT_GE(plain->hits.size(), 2u);
  EXPECT_FALSE(plain->model.has_value());  // No help asked for, no model called.
  EXPECT_TRUE(prompts_.empty());
  std::vector<std::string> before = Uris(plain->hits);
  // The model names the last candidate first, then the first; an index out of range, a repeat and a
  // string are passed over; the ones it left out follow in their own order.
  const size_t last = before.size() - 1;
  rerank_ = Reply(R"({"ranking": [)" + std::to_string(last) + R"(, 99, "x", 0, 0]})");
  request.assist.rerank = true;
  auto reranked = engine_->Find(request);
  ASSERT_OK(reranked);
  std::vector<std::string> expected = {before[last], before[0]};
  for (size_t i = 1; i < last; ++i) expected.push_back(before[i]);
  EXPECT_EQ(Uris(reranked->hits), expected);
  EXPECT_EQ(reranked->model->calls, 1);
  // The model saw each candidate's text under its index.
  ASSERT_EQ(prompts_.size(), 1u);
  EXPECT_NE(prompts_[0].find("[0] " + before[0]), std::string::npos) << prompts_[0];
  EXPECT_NE(prompts_[0].find("Alice books aisle seats"), std::string::npos) << prompts_[0];
  // The limit holds after reranking: the model orders more candidates than are returned.
  request.limit = 1;
  auto one = engine_->Find(request);
  ASSERT_OK(one);
  ASSERT_EQ(one->hits.size(), 1u);
  EXPECT_EQ(one->hits[0].uri.str(), before[last]);
}

TEST_F(FindAssistTest, UnusableRepliesLeaveTheStoresAnswerAndSayWhy) {
  FindRequest request = Request("Alice seat");
  auto plain = engine_->Find(request);
  ASSERT_OK(plain);
  rewrite_ = Reply("I would search for seats.");
  rerank_ = Reply(R"({"ranking": "all of them"})");
  request.assist = {.rewrite = true, .rerank = true};
  auto found = engine_->Find(request);
  ASSERT_OK(found);
  EXPECT_EQ(Uris(found->hits), Uris(plain->hits));
  EXPECT_TRUE(found->queries.empty());
  EXPECT_EQ(found->model->calls, 4);  // Each question asked again once, with the reason.
  EXPECT_NE(found->model->error.find("query rewriting failed after 2 attempts"), std::string::npos)
      << found->model->error;
  EXPECT_NE(found->model->error.find("reranking failed after 2 attempts"), std::string::npos) << found->model->error;
  EXPECT_NE(found->model->error.find("\"ranking\""), std::string::npos) << found->model->error;
}

TEST_F(FindAssistTest, AModelErrorLeavesTheStoresAnswer) {
  FindRequest request = Request("Alice seat");
  auto plain = engine_->Find(request);
  ASSERT_OK(plain);
  rerank_.error = Status::Unavailable("the model's server is down");
  request.assist.rerank = true;
  auto found = engine_->Find(request);
  ASSERT_OK(found);
  EXPECT_EQ(Uris(found->hits), Uris(plain->hits));
  EXPECT_NE(found->model->error.find("the model's server is down"), std::string::npos) << found->model->error;
}

TEST_F(FindAssistTest, HelpNeedsAModelAndSaneSizes) {
  testing::TempDir other;
  auto bare = Engine::Open({.data_dir = other.path(), .provider = {.provider = "no-such-vendor"}});
  ASSERT_OK(bare);
  ASSERT_OK((*bare)->Write("strata://resources/a", "some text"));
  FindRequest request = Request("text");
  request.under = "";
  EXPECT_OK((*bare)->Find(request));  // Without help, no model is needed.
  request.assist.rerank = true;
  auto refused = (*bare)->Find(request);
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("need a model"), std::string::npos) << refused.status().ToString();
  EXPECT_NE(refused.status().message().find("no-such-vendor"), std::string::npos) << refused.status().ToString();
  request = Request("text");
  request.assist = {.rewrite = true, .max_queries = 0};
  EXPECT_EQ(engine_->Find(request).status().code(), StatusCode::kInvalidArgument);
  request.assist = {.rerank = true, .rerank_candidates = 1000};
  EXPECT_EQ(engine_->Find(request).status().code(), StatusCode::kInvalidArgument);
}

TEST_F(FindAssistTest, TheRequestMembersAreReadStrictly) {
  FindRequest request;
  ASSERT_OK(views::ReadFindOptions(nlohmann::json{{"rewrite", true}, {"rerank_candidates", 30}, {"type", "skill"}},
                                   &request));
  EXPECT_TRUE(request.assist.rewrite);
  EXPECT_FALSE(request.assist.rerank);
  EXPECT_EQ(request.assist.rerank_candidates, 30u);
  EXPECT_EQ(request.tuning.type, memory::ContextType::kSkill);
  Status wrong = views::ReadFindOptions(nlohmann::json{{"rerank", "yes"}}, &request);
  EXPECT_EQ(wrong.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(wrong.message().find("\"rerank\""), std::string::npos);
  EXPECT_FALSE(views::ReadFindOptions(nlohmann::json{{"max_queries", -2}}, &request).ok());
  EXPECT_FALSE(views::ReadFindOptions(nlohmann::json{{"max_queries", 2.5}}, &request).ok());
  EXPECT_FALSE(views::ReadFindOptions(nlohmann::json{{"type", "memories"}}, &request).ok());
  EXPECT_FALSE(views::ReadFindOptions(nlohmann::json{{"type", 1}}, &request).ok());
}

}  // namespace
}  // namespace strata
