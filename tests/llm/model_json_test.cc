// ExtractModelJson: JSON found in prose and code fences, repaired slips, errors that say where.
#include "strata/llm/model_json.h"

#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "test_util.h"

namespace strata::llm {
namespace {

using Json = nlohmann::json;

Json Extract(std::string_view reply, JsonShape want = JsonShape::kAny) {
  auto text = ExtractModelJson(reply, want);
  EXPECT_TRUE(text.ok()) << text.status().ToString() << "\nreply: " << reply;
  if (!text.ok()) return Json();
  return Json::parse(*text);
}

TEST(ModelJson, PlainJsonIsReturnedAsWritten) {
  auto text = ExtractModelJson(R"({"a": [1, 2.5, "x"], "b": null})");
  ASSERT_OK(text);
  EXPECT_EQ(*text, R"({"a": [1, 2.5, "x"], "b": null})");
}

TEST(ModelJson, FindsJsonInCodeFencesAndProse) {
  EXPECT_EQ(Extract("Here you go:\n```json\n{\"memories\": []}\n```\nAnything else?"), Json({{"memories", Json::array()}}));
  EXPECT_EQ(Extract("Sure!\n```\n[1, 2]\n```"), Json({1, 2}));
  EXPECT_EQ(Extract("I found these: {\"k\": \"v\"} — hope that helps."), Json({{"k", "v"}}));
  // Braces inside strings do not end the value; an apostrophe in the prose is not a string.
  EXPECT_EQ(Extract("Here's the result: {\"text\": \"a } b { c\", \"n\": 1} that's all"),
            Json({{"text", "a } b { c"}, {"n", 1}}));
  // A fence that does not hold JSON is skipped for the next candidate.
  EXPECT_EQ(Extract("```python\nprint(1)\n```\nResult: {\"ok\": true}"), Json({{"ok", true}}));
}

TEST(ModelJson, ShapeSelectsTheCandidate) {
  EXPECT_EQ(Extract("[1] then {\"a\": 1}", JsonShape::kObject), Json({{"a", 1}}));
  EXPECT_EQ(Extract("{\"a\": 1} then [2]", JsonShape::kArray), Json({2}));
  auto wrong = ExtractModelJson("[1, 2]", JsonShape::kObject);
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("array, not a JSON object"), std::string::npos) << wrong.status().ToString();
}

TEST(ModelJson, RepairsTheUsualSlips) {
  EXPECT_EQ(Extract("{\"a\": [1, 2, ], \"b\": {\"c\": 3,},}"), Json({{"a", {1, 2}}, {"b", {{"c", 3}}}}));
  EXPECT_EQ(Extract("{'name': 'O\\'Brien', 'ok': True, 'none': None, 'no': False}"),
            Json({{"name", "O'Brien"}, {"ok", true}, {"none", nullptr}, {"no", false}}));
  EXPECT_EQ(Extract("{\"a\": 1, // the first\n /* more */ \"b\": 2}"), Json({{"a", 1}, {"b", 2}}));
  EXPECT_EQ(Extract("{\"text\": \"line one\nline two\ttab\"}"), Json({{"text", "line one\nline two\ttab"}}));
  // A string with a double quote inside single quotes keeps it.
  EXPECT_EQ(Extract("{'q': 'say \"hi\"'}"), Json({{"q", "say \"hi\""}}));
}

TEST(ModelJson, CjkTextAndFullWidthDelimiters) {
  // CJK text inside strings is untouched, full-width punctuation inside strings too.
  EXPECT_EQ(Extract("```json\n{\"content\": \"用户喜欢简洁的代码注释，不要废话：谢谢\"}\n```"),
            Json({{"content", "用户喜欢简洁的代码注释，不要废话：谢谢"}}));
  // Full-width delimiters and curly quotes used as JSON syntax are made ASCII.
  EXPECT_EQ(Extract("结果如下：｛“类别”：“偏好”，“内容”：“喜欢绿茶”，｝"),
            Json({{"类别", "偏好"}, {"内容", "喜欢绿茶"}}));
  EXPECT_EQ(Extract("{\"a\"：1，\"b\"：[2，3]}"), Json({{"a", 1}, {"b", {2, 3}}}));
}

TEST(ModelJson, WordsLikeTrueInsideStringsAreKept) {
  EXPECT_EQ(Extract("{\"s\": \"True or None, [x,]\", \"t\": True,}"), Json({{"s", "True or None, [x,]"}, {"t", true}}));
  // An identifier that merely starts like a literal is left alone (and then fails to parse, honestly).
  EXPECT_FALSE(ExtractModelJson("{\"a\": Nonesuch}").ok());
}

TEST(ModelJson, ErrorsSayWhatAndWhere) {
  auto none = ExtractModelJson("I could not find any memories worth keeping.");
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(none.status().message().find("no JSON"), std::string::npos) << none.status().ToString();

  auto bad = ExtractModelJson("Result:\n{\"memories\": [\n  {\"content\": \"x\" \"category\": \"events\"}\n]}");
  ASSERT_FALSE(bad.ok());
  std::string m(bad.status().message());
  EXPECT_NE(m.find("line 2"), std::string::npos) << m;       // Where the value starts in the reply.
  EXPECT_NE(m.find("line 2, column"), std::string::npos) << m;
  EXPECT_NE(m.find("\"category\""), std::string::npos) << m;  // The snippet shows the spot.

  auto truncated = ExtractModelJson("{\"memories\": [{\"content\": \"cut off");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("does not parse"), std::string::npos) << truncated.status().ToString();
}

TEST(ModelJson, RepairNeverChangesStringContent) {
  // Random strings with every troublesome character survive a round trip through repair.
  const std::string pieces[] = {",", "]", "}", "True", "None", "//", "/*", "'", "\\\"", "，", "：", "“", "”", "中文",
                                " ", "x"};
  std::mt19937 rng(7);
  for (int round = 0; round < 500; ++round) {
    std::string value;
    for (int k = 0; k < 8; ++k) value += pieces[rng() % std::size(pieces)];
    Json expected = {{"k", value}, {"n", {1, 2}}};
    std::string dumped = expected.dump();
    EXPECT_EQ(Json::parse(RepairJson(dumped)), expected) << dumped;
    auto text = ExtractModelJson("prose " + dumped + " prose");
    ASSERT_OK(text);
    EXPECT_EQ(Json::parse(*text), expected) << dumped;
  }
}

}  // namespace
}  // namespace strata::llm

namespace strata::llm {
namespace {

// A number too large for a double is an error naming it, not an exception out of the parser (found by
// fuzz/model_json_fuzz.cc).
TEST(ModelJson, NumberOutOfRangeIsAnErrorNotAnException) {
  auto out = ExtractModelJson(R"({"score": 3333e3333})");
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out.status().message().find("cannot be read"), std::string::npos) << out.status().message();
  // A fence inside a string of a reply that is all JSON stays text.
  auto whole = ExtractModelJson("{\"note\": \"use ```json\\n{}\\n``` fences\"}", JsonShape::kObject);
  ASSERT_TRUE(whole.ok()) << whole.status().ToString();
  EXPECT_NE(whole->find("note"), std::string::npos);
}

}  // namespace
}  // namespace strata::llm
