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
TEST(ProviderConformance, StreamAnthropic) { RunStreamCases("stream_anthropic", "anthropic"); }

}  // namespace
}  // namespace strata::llm
