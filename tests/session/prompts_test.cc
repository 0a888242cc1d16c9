// The prompt templates shipped in prompts/ load, validate and render what the pipeline relies on.
#include <gtest/gtest.h>

#include "strata/prompt/prompt_library.h"
#include "strata/prompt/value.h"
#include "test_util.h"

namespace strata::prompt {
namespace {

Value Vars(std::string_view json) {
  auto v = Value::FromJson(json);
  EXPECT_TRUE(v.ok()) << v.status().ToString();
  return v.ok() ? *v : Value();
}

TEST(ShippedPrompts, EveryTemplateLoads) {
  PromptLibrary library({STRATA_PROMPTS_DIR});
  auto errors = library.Errors();
  EXPECT_TRUE(errors.empty()) << ::testing::PrintToString(errors);
  auto ids = library.Ids();
  for (const char* id : {"session.summarize", "memory.extract", "memory.dedup", "find.rewrite", "find.rerank",
                          "resource.summarize"}) {
    EXPECT_NE(std::find(ids.begin(), ids.end(), id), ids.end()) << id;
  }
}

TEST(ShippedPrompts, RenderWithTheirVariables) {
  PromptLibrary library({STRATA_PROMPTS_DIR});
  auto summary = library.Render("session.summarize", Vars(R"({"transcript": "[user] hi\n[assistant] hello"})"));
  ASSERT_OK(summary);
  EXPECT_NE(summary->find("at most 200 words"), std::string::npos) << *summary;
  EXPECT_NE(summary->find("[user] hi"), std::string::npos);
  EXPECT_EQ(summary->find("Earlier in this session"), std::string::npos);

  auto extract = library.Render("memory.extract", Vars(R"({"transcript": "[user] I prefer aisle seats", "categories": [
               {"name": "preferences", "owner": "user", "mode": "merge", "description": "How the user likes things"},
               {"name": "events", "owner": "user", "mode": "append", "description": "Things that happened"}]})"));
  ASSERT_OK(extract);
  EXPECT_NE(extract->find("- preferences (user, merge): How the user likes things"), std::string::npos) << *extract;
  EXPECT_NE(extract->find("Write each memory in the language the user used."), std::string::npos);
  EXPECT_NE(extract->find("{\"memories\": []}"), std::string::npos);

  auto dedup = library.Render("memory.dedup", Vars(R"({"candidate": {"category": "preferences", "key": "seat",
      "abstract": "aisle", "content": "Prefers aisle seats"}, "existing": [{"index": 0,
      "uri": "strata://user/a/memories/preferences/seat", "abstract": "window", "content": "Prefers window seats",
      "similarity": 0.876}]})"));
  ASSERT_OK(dedup);
  EXPECT_NE(dedup->find("[0] strata://user/a/memories/preferences/seat (similarity 0.88)"), std::string::npos)
      << *dedup;
  // Required variables are enforced.
  EXPECT_FALSE(library.Render("memory.dedup", Vars(R"({"candidate": {}})")).ok());

  auto rewrite = library.Render("find.rewrite", Vars(R"({"query": "When did Ann move?", "max_queries": 2})"));
  ASSERT_OK(rewrite);
  EXPECT_NE(rewrite->find("up to\n2 short searches"), std::string::npos) << *rewrite;
  EXPECT_NE(rewrite->find("Question: When did Ann move?"), std::string::npos);
  auto rerank = library.Render("find.rerank", Vars(R"({"query": "q", "passages": [
      {"index": 0, "uri": "strata://resources/a", "text": "first"}, {"index": 1, "uri": "strata://resources/b",
      "text": "second"}]})"));
  ASSERT_OK(rerank);
  EXPECT_NE(rerank->find("[1] strata://resources/b\nsecond"), std::string::npos) << *rerank;
  EXPECT_FALSE(library.Render("find.rerank", Vars(R"({"query": "q"})")).ok());
}

}  // namespace
}  // namespace strata::prompt
