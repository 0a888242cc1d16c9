// Runs the provider wire-format cases in ../shared/conformance/kosong/: request_openai, request_anthropic,
// request_gemini (request bodies, "subset" matching with exact_keys) and stream_openai, stream_anthropic
// (recorded responses -> id, usage and merged message). Each case goes through the same entry points as
// `strata provider request|parse-stream`.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "conformance/conformance_cases.h"
#include "strata/llm/chat_error.h"
#include "strata/llm/wire.h"
#include "strata/message/message_json.h"
#include "test_util.h"

namespace strata::llm {
namespace {

using Json = nlohmann::ordered_json;
using testing::LoadCases;
using testing::SseFromCase;
using testing::SubsetMismatch;
using testing::UsageJson;

ChatRequest RequestFromCase(const Json& input) {
  ChatRequest request;
  request.model = input.value("model", "");
  request.system_prompt = input.value("system_prompt", "");
  for (const Json& tool : input.value("tools", Json::array())) {
    request.tools.push_back({tool.value("name", ""), tool.value("description", ""),
                             tool.value("parameters", Json::object()).dump()});
  }
  auto history = ParseMessages(input.value("history", Json::array()).dump());
  EXPECT_OK(history);
  if (history.ok()) request.history = *history;
  if (input.contains("provider_options")) request.options = input["provider_options"].dump();
  return request;
}

void RunRequestCases(const std::string& area) {
  for (const Json& c : LoadCases(area)) {
    SCOPED_TRACE(c["id"].get<std::string>());
    const Json& input = c["input"];
    auto kind = ParseProviderKind(input["provider"].get<std::string>());
    ASSERT_OK(kind);
    auto body = BuildRequestBody(*kind, RequestFromCase(input));
    if (c["expected"].contains("error")) {
      ASSERT_FALSE(body.ok()) << "expected an error, got " << *body;
      for (const Json& needle : c["expected"].value("message_contains", Json::array())) {
        EXPECT_NE(body.status().message().find(needle.get<std::string>()), std::string::npos)
            << body.status().ToString();
      }
      continue;
    }
    ASSERT_OK(body);
    Json actual = Json::parse(*body);
    std::vector<std::string> exact = c.value("exact_keys", std::vector<std::string>{});
    EXPECT_EQ(SubsetMismatch(c["expected"]["body"], actual, exact), "") << *body;
    for (const Json& key : c["expected"].value("absent_keys", Json::array())) {
      EXPECT_FALSE(actual.contains(key.get<std::string>())) << key;
    }
  }
}

TEST(ProviderConformance, RequestOpenAI) { RunRequestCases("request_openai"); }
TEST(ProviderConformance, RequestAnthropic) { RunRequestCases("request_anthropic"); }
TEST(ProviderConformance, RequestGemini) { RunRequestCases("request_gemini"); }

void RunStreamCases(const std::string& area, const std::string& default_provider) {
  for (const Json& c : LoadCases(area)) {
    SCOPED_TRACE(c["id"].get<std::string>());
    const Json& input = c["input"];
    auto kind = ParseProviderKind(input.value("provider", default_provider));
    ASSERT_OK(kind);
    std::string options = input.contains("provider_options") ? input["provider_options"].dump() : "{}";
    Result<DecodedResponse> decoded = input.contains("response")
                                          ? DecodeResponseBody(*kind, options, input["response"].dump())
                                          : DecodeSseText(*kind, options, SseFromCase(input));
    const Json& expected = c["expected"];
    if (expected.contains("error")) {
      ASSERT_FALSE(decoded.ok()) << "expected an error";
      for (const Json& needle : expected.value("message_contains", Json::array())) {
        EXPECT_NE(decoded.status().message().find(needle.get<std::string>()), std::string::npos)
            << decoded.status().ToString();
      }
      continue;
    }
    ASSERT_OK(decoded);
    Json actual{{"id", decoded->id}, {"usage", UsageJson(decoded->usage)},
                {"message", Json::parse(MessageToJson(decoded->message))}};
    Json want = expected;
    for (const Json& key : c.value("informative_keys", Json::array())) want.erase(key.get<std::string>());
    EXPECT_EQ(nlohmann::json::parse(want.dump()), nlohmann::json::parse(actual.dump())) << actual.dump();
  }
}

TEST(ProviderConformance, StreamOpenAI) { RunStreamCases("stream_openai", "kimi"); }

// A reply holding an integer past 64 bits is valid JSON: it was refused whole as "not valid JSON" (simdjson
// has no place for it). Usage counts that are not counts (1e300, -5, more cached than prompt tokens) are
// ignored, not turned into INT64_MIN or a negative count that failed the turn later; a usage whose prompt
// count is not one is no usage at all (it became a usage mark saying the context cost nothing).
TEST(ProviderResponses, BigIntegersAreReadAndUsageThatIsNotACountIsIgnored) {
  auto decoded = DecodeResponseBody(
      ProviderKind::kOpenAIChat, "{}",
      R"({"id": "c1", "object": "chat.completion", "seed": 123456789012345678901234567890,
          "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {"role": "assistant", "content": null,
            "tool_calls": [{"id": "t1", "type": "function", "function": {"name": "f",
              "arguments": "{\"n\": 123456789012345678901234567890}"}}]}}],
          "usage": {"prompt_tokens": 1e300, "completion_tokens": -5, "prompt_tokens_details": {"cached_tokens": 7}}})");
  ASSERT_OK(decoded);
  ASSERT_TRUE(decoded->message.tool_calls.has_value());
  EXPECT_EQ(decoded->message.tool_calls->at(0).function.arguments.value_or(""), "{\"n\": 123456789012345678901234567890}");
  EXPECT_FALSE(decoded->usage.has_value());
  auto clamped = DecodeResponseBody(
      ProviderKind::kOpenAIChat, "{}",
      R"({"id": "c2", "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "x"}}],
          "usage": {"prompt_tokens": 10, "completion_tokens": -5, "prompt_tokens_details": {"cached_tokens": 15}}})");
  ASSERT_OK(clamped);
  ASSERT_TRUE(clamped->usage.has_value());
  EXPECT_EQ(clamped->usage->input_other, 0);
  EXPECT_EQ(clamped->usage->output, 0);
  EXPECT_EQ(clamped->usage->input_cache_read, 10) << "cached tokens beyond the prompt count";
  auto anthropic = DecodeResponseBody(
      ProviderKind::kAnthropic, "{}",
      R"({"id": "m1", "type": "message", "role": "assistant", "stop_reason": "tool_use",
          "content": [{"type": "tool_use", "id": "u1", "name": "f", "input": {"n": 99999999999999999999999}}],
          "usage": {"input_tokens": 12, "output_tokens": 3}})");
  ASSERT_OK(anthropic);
  ASSERT_TRUE(anthropic->message.tool_calls.has_value());
  EXPECT_NE(anthropic->message.tool_calls->at(0).function.arguments.value_or("").find("\"n\""), std::string::npos);
  EXPECT_EQ(anthropic->usage->input_other, 12);
  // Not JSON at all is still refused, saying where.
  auto broken = DecodeResponseBody(ProviderKind::kOpenAIChat, "{}", R"({"id": "c1", "choices": [)");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.status().message().find("not valid JSON"), std::string::npos) << broken.status().message();
  EXPECT_NE(broken.status().message().find("byte"), std::string::npos) << broken.status().message();
}
TEST(ProviderConformance, StreamAnthropic) { RunStreamCases("stream_anthropic", "anthropic"); }

}  // namespace
}  // namespace strata::llm
