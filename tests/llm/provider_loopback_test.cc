// The HTTP provider against a loopback server speaking each vendor's wire format: streaming (split into
// small chunks, slowly), non-streamed bodies, retries (429 + Retry-After, 5xx), errors (4xx with the
// provider's message, malformed JSON, truncated streams, connection resets, refused connections,
// idle timeouts), cancellation, and recording/replay.
#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "llm/loopback_server.h"
#include "strata/json/json_writer.h"
#include "strata/llm/chat_error.h"
#include "strata/llm/generate.h"
#include "strata/llm/provider.h"
#include "strata/llm/scripted.h"
#include "test_util.h"

namespace strata::llm {
namespace {

using testing::LoopbackServer;
using namespace std::chrono_literals;

std::string Sse(std::initializer_list<std::string> payloads, bool named = false) {
  std::string out;
  for (const std::string& p : payloads) {
    if (named) {
      size_t start = p.find("\"type\":\"") + 8;
      out += "event: " + p.substr(start, p.find('"', start) - start) + "\n";
    }
    out += "data: " + p + "\n\n";
  }
  return out;
}

const std::string kOpenAIStream = Sse({
    R"({"id":"chat-1","choices":[{"index":0,"delta":{"role":"assistant","content":"Hel"}}]})",
    R"({"id":"chat-1","choices":[{"index":0,"delta":{"content":"lo"}}]})",
    R"({"id":"chat-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"add","arguments":"{\"a\":"}}]}}]})",
    R"({"id":"chat-1","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"1}"}}]}}]})",
    R"({"id":"chat-1","choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]})",
    R"({"id":"chat-1","choices":[],"usage":{"prompt_tokens":14,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":4}}})",
    "[DONE]"});

const std::string kAnthropicStream = Sse(
    {R"({"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":10,"output_tokens":1,"cache_read_input_tokens":4,"cache_creation_input_tokens":2}}})",
     R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})",
     R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}})",
     R"({"type":"content_block_stop","index":0})",
     R"({"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"call_1","name":"add","input":{}}})",
     R"({"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\":1}"}})",
     R"({"type":"content_block_stop","index":1})",
     R"({"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":3}})",
     R"({"type":"message_stop"})"},
    /*named=*/true);

const std::string kResponsesStream = Sse(
    {R"({"type":"response.created","response":{"id":"resp_1"}})",
     R"({"type":"response.output_text.delta","output_index":0,"delta":"Hel"})",
     R"({"type":"response.output_text.delta","output_index":0,"delta":"lo"})",
     R"({"type":"response.output_item.added","output_index":1,"item":{"type":"function_call","call_id":"call_1","name":"add","arguments":""}})",
     R"({"type":"response.function_call_arguments.delta","output_index":1,"delta":"{\"a\":1}"})",
     R"({"type":"response.completed","response":{"id":"resp_1","usage":{"input_tokens":14,"input_tokens_details":{"cached_tokens":4},"output_tokens":3}}})"},
    /*named=*/true);

const std::string kGeminiStream = Sse(
    {R"({"candidates":[{"content":{"role":"model","parts":[{"text":"Hello"}]}}],"responseId":"g-1"})",
     R"({"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"add","args":{"a":1}},"thoughtSignature":"sig"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":14,"candidatesTokenCount":1,"thoughtsTokenCount":2,"cachedContentTokenCount":4},"responseId":"g-1"})"});

ProviderConfig Config(ProviderKind kind, const LoopbackServer& server) {
  ProviderConfig config;
  config.kind = kind;
  config.model = "test-model";
  config.base_url = server.base_url();
  config.api_key = "sk-test";
  config.retry.initial_backoff = 1ms;
  config.retry.max_backoff = 5ms;
  config.http.idle_timeout = 5s;
  return config;
}

std::unique_ptr<ChatProvider> MustProvider(ProviderConfig config) {
  auto provider = NewHttpProvider(std::move(config));
  EXPECT_OK(provider);
  return std::move(*provider);
}

std::vector<Message> Hello() { return {Message::User("hi")}; }

std::string KindOf(const Status& status) {
  auto info = ChatErrorOf(status);
  return info ? std::string(ChatErrorKindName(info->kind)) : "(not a chat error: " + status.ToString() + ")";
}

struct FormatCase {
  ProviderKind kind;
  const std::string* stream;
  std::string path;
  std::string auth_header;
  int64_t output_tokens;
};

TEST(ProviderLoopback, StreamsEveryWireFormatInSmallSlowChunks) {
  const FormatCase cases[] = {
      {ProviderKind::kOpenAIChat, &kOpenAIStream, "/v1/chat/completions", "Authorization", 3},
      {ProviderKind::kKimi, &kOpenAIStream, "/v1/chat/completions", "Authorization", 3},
      {ProviderKind::kAnthropic, &kAnthropicStream, "/v1/messages", "x-api-key", 3},
      {ProviderKind::kOpenAIResponses, &kResponsesStream, "/v1/responses", "Authorization", 3},
      {ProviderKind::kGemini, &kGeminiStream, "/v1/models/test-model:streamGenerateContent", "x-goog-api-key", 3},
  };
  for (const FormatCase& c : cases) {
    SCOPED_TRACE(std::string(ProviderKindName(c.kind)));
    LoopbackServer server;
    server.Enqueue({.chunks = LoopbackServer::Split(*c.stream, 7), .delay = 1ms});
    auto provider = MustProvider(Config(c.kind, server));
    std::vector<ToolCall> completed;
    int parts = 0;
    auto result = Generate(*provider, "Be brief.", {}, Hello(),
                           {.on_part = [&](const StreamedPart&) { ++parts; },
                            .on_tool_call = [&](const ToolCall& call) { completed.push_back(call); }});
    ASSERT_OK(result);
    EXPECT_EQ(result->message.ExtractText(), "Hello");
    ASSERT_TRUE(result->message.tool_calls.has_value());
    ASSERT_EQ(result->message.tool_calls->size(), 1u);
    const ToolCall& call = result->message.tool_calls->front();
    EXPECT_EQ(call.function.name, "add");
    EXPECT_EQ(call.function.arguments, R"({"a":1})");
    ASSERT_EQ(completed.size(), 1u);
    EXPECT_EQ(completed[0].function.arguments, R"({"a":1})");
    EXPECT_GE(parts, 2);
    ASSERT_TRUE(result->usage.has_value());
    EXPECT_EQ(result->usage->input_other, 10);
    EXPECT_EQ(result->usage->input_cache_read, 4);
    EXPECT_EQ(result->usage->output, c.output_tokens);
    EXPECT_FALSE(result->id.empty());
    auto received = server.received();
    ASSERT_EQ(received.size(), 1u);
    EXPECT_EQ(received[0].path, c.path);
    EXPECT_TRUE(received[0].headers.count(c.auth_header)) << c.auth_header;
  }
}

TEST(ProviderLoopback, ReadsNonStreamedBodies) {
  LoopbackServer server;
  server.Enqueue({.content_type = "application/json",
                  .chunks = {R"({"id":"ns-1","choices":[{"index":0,"message":{"role":"assistant","content":"Done.",
                              "reasoning_content":"Think."},"finish_reason":"stop"}],
                              "usage":{"prompt_tokens":5,"completion_tokens":2,"cached_tokens":1}})"}});
  ProviderConfig config = Config(ProviderKind::kKimi, server);
  config.stream = false;
  auto provider = MustProvider(config);
  auto result = Generate(*provider, "", {}, Hello());
  ASSERT_OK(result);
  EXPECT_EQ(result->id, "ns-1");
  EXPECT_EQ(result->message.ExtractText(), "Done.");
  ASSERT_EQ(result->message.content.size(), 2u);
  EXPECT_EQ(std::get<ThinkPart>(result->message.content[0]).think, "Think.");
  EXPECT_EQ(result->usage, (TokenUsage{.input_other = 4, .output = 2, .input_cache_read = 1}));
  EXPECT_EQ(server.received()[0].body.find("\"stream\""), std::string::npos);
}

TEST(ProviderLoopback, RetriesRateLimitsAndServerErrorsHonouringRetryAfter) {
  LoopbackServer server;
  server.Enqueue({.status = 429, .content_type = "application/json", .headers = {{"Retry-After", "0.05"}},
                  .chunks = {R"({"error":{"message":"slow down"}})"}});
  server.Enqueue({.status = 500, .content_type = "application/json", .chunks = {R"({"error":{"message":"oops"}})"}});
  server.Enqueue({.chunks = {kOpenAIStream}});
  ProviderConfig config = Config(ProviderKind::kOpenAIChat, server);
  std::vector<std::pair<std::string, std::chrono::milliseconds>> retries;
  config.on_retry = [&](int, const Status& error, std::chrono::milliseconds delay) {
    retries.emplace_back(error.message(), delay);
  };
  auto provider = MustProvider(config);
  auto result = Generate(*provider, "", {}, Hello());
  ASSERT_OK(result);
  EXPECT_EQ(server.hits(), 3);
  ASSERT_EQ(retries.size(), 2u);
  EXPECT_EQ(retries[0].first, "HTTP 429: slow down");
  EXPECT_GE(retries[0].second, 50ms);  // Retry-After wins over the 1 ms backoff.
  EXPECT_EQ(retries[1].first, "HTTP 500: oops");
  EXPECT_LT(retries[1].second, 50ms);
}

TEST(ProviderLoopback, GivesUpAfterMaxAttempts) {
  LoopbackServer server;
  server.Enqueue({.status = 503, .content_type = "application/json", .chunks = {R"({"error":{"message":"busy"}})"}});
  ProviderConfig config = Config(ProviderKind::kAnthropic, server);
  config.retry.max_attempts = 3;
  auto provider = MustProvider(config);
  auto result = Generate(*provider, "", {}, Hello());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(KindOf(result.status()), "http_status");
  EXPECT_EQ(ChatErrorOf(result.status())->http_status, 503);
  EXPECT_EQ(result.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(server.hits(), 3);
}

TEST(ProviderLoopback, ClientErrorsAreNotRetriedAndCarryTheProviderMessage) {
  LoopbackServer server;
  server.Enqueue({.status = 400, .content_type = "application/json",
                  .chunks = {R"({"error":{"message":"model not supported","type":"invalid_request_error"}})"}});
  auto provider = MustProvider(Config(ProviderKind::kKimi, server));
  auto result = Generate(*provider, "", {}, Hello());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ChatErrorOf(result.status())->provider_message, "model not supported");
  EXPECT_FALSE(IsRetryable(result.status()));
  EXPECT_EQ(server.hits(), 1);
}

TEST(ProviderLoopback, RetryAfterBeyondTheLimitIsNotWaitedFor) {
  LoopbackServer server;
  server.Enqueue({.status = 429, .content_type = "application/json", .headers = {{"Retry-After", "3600"}},
                  .chunks = {R"({"error":{"message":"quota"}})"}});
  auto provider = MustProvider(Config(ProviderKind::kOpenAIChat, server));
  auto result = Generate(*provider, "", {}, Hello());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(ChatErrorOf(result.status())->retry_after, std::chrono::milliseconds(3600 * 1000));
  EXPECT_EQ(server.hits(), 1);
}

TEST(ProviderLoopback, MalformedJsonIsAnInvalidResponse) {
  LoopbackServer server;
  server.Enqueue({.chunks = {"data: {\"id\":\"x\",\"choices\":[{\"delta\":{\"content\":\"a\"}}]}\n\ndata: {not json\n\n"}});
  auto provider = MustProvider(Config(ProviderKind::kOpenAIChat, server));
  auto result = Generate(*provider, "", {}, Hello());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(KindOf(result.status()), "invalid_response");
  EXPECT_NE(result.status().message().find("{not json"), std::string::npos) << result.status().message();
}

TEST(ProviderLoopback, ATruncatedStreamIsAnInvalidResponse) {
  LoopbackServer server;
  // Ends cleanly, but before finish_reason / [DONE].
  server.Enqueue({.chunks = {"data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"}}]}\n\n"}});
  auto provider = MustProvider(Config(ProviderKind::kOpenAIChat, server));
  auto result = Generate(*provider, "", {}, Hello());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(KindOf(result.status()), "invalid_response");
}

TEST(ProviderLoopback, AConnectionResetMidStreamIsAConnectionError) {
  LoopbackServer server;
  server.Enqueue({.chunks = LoopbackServer::Split(kAnthropicStream.substr(0, kAnthropicStream.find("content_block_stop")), 50),
                  .reset = true});
  auto provider = MustProvider(Config(ProviderKind::kAnthropic, server));
  int parts = 0;
  auto result = Generate(*provider, "", {}, Hello(), {.on_part = [&](const StreamedPart&) { ++parts; }});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(KindOf(result.status()), "connection") << result.status().ToString();
  EXPECT_TRUE(IsRetryable(result.status()));
  EXPECT_GE(parts, 1);  // The parts before the reset were delivered.
}

TEST(ProviderLoopback, ARefusedConnectionIsRetriedThenReported) {
  int port;
  {
    LoopbackServer server;  // Take a free port, then close it.
    port = std::stoi(server.base_url().substr(17));
  }
  ProviderConfig config;
  config.kind = ProviderKind::kOpenAIChat;
  config.model = "m";
  config.base_url = "http://127.0.0.1:" + std::to_string(port) + "/v1";
  config.retry.max_attempts = 2;
  config.retry.initial_backoff = 1ms;
  int retries = 0;
  config.on_retry = [&](int, const Status&, std::chrono::milliseconds) { ++retries; };
  auto provider = MustProvider(config);
  auto result = Generate(*provider, "", {}, Hello());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(KindOf(result.status()), "connection");
  EXPECT_EQ(retries, 1);
}

TEST(ProviderLoopback, AStalledServerHitsTheIdleTimeout) {
  LoopbackServer server;
  server.Enqueue({.chunks = {kOpenAIStream}, .delay = 1s});
  ProviderConfig config = Config(ProviderKind::kOpenAIChat, server);
  config.http.idle_timeout = 200ms;
  config.retry.max_attempts = 1;
  auto provider = MustProvider(config);
  auto result = Generate(*provider, "", {}, Hello());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(KindOf(result.status()), "timeout");
  EXPECT_EQ(result.status().code(), StatusCode::kDeadlineExceeded);
}

TEST(ProviderLoopback, CancellationStopsARunningStream) {
  LoopbackServer server;
  std::vector<std::string> chunks;
  for (int i = 0; i < 100; ++i) {
    chunks.push_back("data: {\"id\":\"x\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w" + std::to_string(i) +
                     " \"}}]}\n\n");
  }
  server.Enqueue({.chunks = chunks, .delay = 50ms});
  auto provider = MustProvider(Config(ProviderKind::kOpenAIChat, server));
  Canceller cancel;
  int parts = 0;
  std::thread canceller;
  auto result = Generate(*provider, "", {}, Hello(), {.on_part = [&](const StreamedPart&) {
                           if (++parts == 2) canceller = std::thread([&cancel] { cancel.Cancel(); });
                         }},
                         {.cancel = &cancel});
  canceller.join();
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kCancelled);
  EXPECT_LT(parts, 100);
}

TEST(ProviderLoopback, AReplyWithNothingInItIsAnEmptyResponse) {
  LoopbackServer server;
  server.Enqueue({.chunks = {Sse({R"({"id":"x","choices":[{"index":0,"delta":{"reasoning_content":"hmm"}}]})",
                                  R"({"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]})"})}});
  auto provider = MustProvider(Config(ProviderKind::kKimi, server));
  auto result = Generate(*provider, "", {}, Hello());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(KindOf(result.status()), "empty_response");
  EXPECT_TRUE(IsRetryable(result.status()));
}

// Every format's stop reason is read: a refused prompt is a content_filter error and a reply filtered on its
// way out an empty_response, both naming the provider's reason (it named none), and a reply cut at the token
// limit is returned with its reason. (All
// four were read only as "complete": a cut or filtered reply passed for a whole one.)
TEST(ProviderLoopback, StopReasonsAreReadAndABlockedReplyNamesWhy) {
  struct Case {
    ProviderKind kind;
    std::string stream;
    std::string want;   // The stop reason, or the words the error must hold.
    std::string error;  // The error's kind; "" for a reply.
  };
  const std::vector<Case> cases = {
      {ProviderKind::kOpenAIChat, Sse({R"({"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"content_filter"}]})", "[DONE]"}),
       "content_filter", "empty_response"},
      {ProviderKind::kOpenAIChat, Sse({R"({"id":"x","choices":[{"index":0,"delta":{"content":"This answer is cut"}}]})",
                                       R"({"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"length"}]})", "[DONE]"}),
       "length", ""},
      {ProviderKind::kGemini, Sse({R"({"candidates":[{"finishReason":"SAFETY"}],"responseId":"g"})"}), "SAFETY", "empty_response"},
      {ProviderKind::kGemini, Sse({R"({"promptFeedback":{"blockReason":"SAFETY"},"responseId":"g"})"}),
       "prompt blocked: SAFETY", "content_filter"},
      {ProviderKind::kGemini, Sse({R"({"candidates":[{"content":{"role":"model","parts":[{"text":"cut"}]},"finishReason":"MAX_TOKENS"}]})"}),
       "MAX_TOKENS", ""},
      {ProviderKind::kAnthropic,
       Sse({R"({"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}})",
            R"({"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}})",
            R"({"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"cut"}})",
            R"({"type":"content_block_stop","index":0})",
            R"({"type":"message_delta","delta":{"stop_reason":"max_tokens"},"usage":{"output_tokens":3}})",
            R"({"type":"message_stop"})"},
           true),
       "max_tokens", ""},
      {ProviderKind::kOpenAIResponses,
       Sse({R"({"type":"response.incomplete","response":{"id":"r","status":"incomplete","incomplete_details":{"reason":"content_filter"}}})"},
           true),
       "content_filter", "empty_response"},
      {ProviderKind::kOpenAIResponses,
       Sse({R"({"type":"response.output_text.delta","output_index":0,"delta":"cut"})",
            R"({"type":"response.incomplete","response":{"id":"r","status":"incomplete","incomplete_details":{"reason":"max_output_tokens"}}})"},
           true),
       "max_output_tokens", ""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.stream);
    LoopbackServer server;
    server.Enqueue({.chunks = {c.stream}});
    auto provider = MustProvider(Config(c.kind, server));
    auto result = Generate(*provider, "", {}, Hello());
    if (!c.error.empty()) {
      // A refused prompt is refused again; a reply filtered on its way out may pass another time.
      ASSERT_FALSE(result.ok());
      EXPECT_EQ(KindOf(result.status()), c.error);
      EXPECT_EQ(IsRetryable(result.status()), c.error == "empty_response");
      EXPECT_NE(result.status().message().find(c.want), std::string::npos) << result.status().ToString();
      EXPECT_EQ(server.received().size(), 1u) << "Generate does not retry by itself";
    } else {
      ASSERT_OK(result);
      EXPECT_EQ(result->stop_reason, c.want);
      EXPECT_EQ(StopKindOf(result->stop_reason), StopKind::kLength);
      EXPECT_NE(result->message.ExtractText().find("cut"), std::string::npos) << "the text is kept";
    }
  }
  EXPECT_EQ(StopKindOf("stop"), StopKind::kEnd);
  EXPECT_EQ(StopKindOf(""), StopKind::kEnd);
  EXPECT_EQ(StopKindOf("MALFORMED_FUNCTION_CALL: bad args"), StopKind::kOther);
  EXPECT_EQ(StopKindOf("refusal"), StopKind::kFiltered);
}

// A tool call that only the end of a reply cut at the token limit completed is not run: its result tells the
// model why (it was run, and the model got a JSON parse error). A call completed before the cut runs.
TEST(ProviderLoopback, AToolCallCutAtTheTokenLimitIsNotRun) {
  LoopbackServer server;
  server.Enqueue({.chunks = {Sse({
      R"({"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"add","arguments":"{\"a\":1}"}}]}}]})",
      R"({"id":"x","choices":[{"index":0,"delta":{"tool_calls":[{"index":1,"id":"call_2","type":"function","function":{"name":"add","arguments":"{\"a\":"}}]}}]})",
      R"({"id":"x","choices":[{"index":0,"delta":{},"finish_reason":"length"}]})", "[DONE]"})}});
  auto provider = MustProvider(Config(ProviderKind::kOpenAIChat, server));
  std::vector<std::string> ran, cut;
  auto result = Generate(*provider, "", {}, Hello(),
                         {.on_tool_call = [&](const ToolCall& call) { ran.push_back(call.id); },
                          .on_cut_tool_call = [&](const ToolCall& call) { cut.push_back(call.id); }});
  ASSERT_OK(result);
  EXPECT_EQ(ran, std::vector<std::string>{"call_1"});
  EXPECT_EQ(cut, std::vector<std::string>{"call_2"});
  ASSERT_EQ(result->message.tool_calls->size(), 2u);
  // Cut right after the call's name, before any argument: cut too (it ran with no arguments).
  LoopbackServer named_only;
  named_only.Enqueue({.chunks = {Sse({
      R"({"id":"y","choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_3","type":"function","function":{"name":"list_directory"}}]}}]})",
      R"({"id":"y","choices":[{"index":0,"delta":{},"finish_reason":"length"}]})", "[DONE]"})}});
  auto bare = MustProvider(Config(ProviderKind::kOpenAIChat, named_only));
  ran.clear();
  cut.clear();
  ASSERT_OK(Generate(*bare, "", {}, Hello(),
                     {.on_tool_call = [&](const ToolCall& call) { ran.push_back(call.id); },
                      .on_cut_tool_call = [&](const ToolCall& call) { cut.push_back(call.id); }})
                .status());
  EXPECT_TRUE(ran.empty());
  EXPECT_EQ(cut, std::vector<std::string>{"call_3"});
}

// An error the provider sends inside a 200 response says so: no request returned the status it stands for.
TEST(ProviderLoopback, AnErrorInsideAResponseIsNotCalledAnHttpStatus) {
  LoopbackServer server;
  server.Enqueue({.chunks = {Sse({R"({"error":{"message":"upstream exploded","type":"server_error"}})"})}});
  auto provider = MustProvider(Config(ProviderKind::kOpenAIChat, server));
  auto result = Generate(*provider, "", {}, Hello());
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(),
            "openai: error in a response the server answered with 200: upstream exploded");
  EXPECT_EQ(ChatErrorOf(result.status())->http_status, 500);  // What it is classified as.
}

TEST(ProviderLoopback, MidStreamErrorEventsAreProviderErrors) {
  LoopbackServer server;
  server.Enqueue({.chunks = {Sse({R"({"type":"message_start","message":{"id":"m","usage":{"input_tokens":1}}})",
                                  R"({"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}})"},
                                 true)}});
  auto provider = MustProvider(Config(ProviderKind::kAnthropic, server));
  auto result = Generate(*provider, "", {}, Hello());
  ASSERT_FALSE(result.ok());
  auto info = ChatErrorOf(result.status());
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->http_status, 529);
  EXPECT_EQ(info->provider_message, "Overloaded");
  EXPECT_TRUE(IsRetryable(result.status()));
}

TEST(ProviderLoopback, RecordsAndReplaysExchanges) {
  std::string path = ::testing::TempDir() + "/strata_recording.jsonl";
  std::filesystem::remove(path);
  LoopbackServer server;
  server.Enqueue({.chunks = {kOpenAIStream}});
  ProviderConfig config = Config(ProviderKind::kOpenAIChat, server);
  config.transport = RecordingTransport(CurlTransport(), path);
  auto live = Generate(*MustProvider(config), "sys", {}, Hello());
  ASSERT_OK(live);
  std::string recording = testing::ReadFileOrDie(path);
  EXPECT_EQ(recording.find("sk-test"), std::string::npos) << "keys must never be recorded";

  auto replay = ReplayTransport(path, /*check_requests=*/true, /*chunk_bytes=*/5);
  ASSERT_OK(replay);
  config.transport = *replay;
  auto replayed = Generate(*MustProvider(config), "sys", {}, Hello());
  ASSERT_OK(replayed);
  EXPECT_EQ(replayed->message, live->message);
  EXPECT_EQ(replayed->usage, live->usage);
  // A different request does not match the recording.
  config.transport = *ReplayTransport(path, true);
  auto mismatch = Generate(*MustProvider(config), "another system prompt", {}, Hello());
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("differs"), std::string::npos);
}

TEST(ProviderConfigTest, RejectsUnusableConfigurations) {
  ProviderConfig config;
  config.model = "m";
  EXPECT_EQ(NewHttpProvider(config).status().code(), StatusCode::kInvalidArgument);  // No base URL.
  config.base_url = "ftp://x";
  EXPECT_EQ(NewHttpProvider(config).status().code(), StatusCode::kInvalidArgument);
  config.base_url = "http://localhost/v1";
  config.options = R"({"reasoning_efort":"high"})";
  auto bad = NewHttpProvider(config);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("reasoning_efort"), std::string::npos) << bad.status().message();
}

TEST(RetryPolicyTest, BackoffGrowsExponentiallyUpToTheCap) {
  RetryPolicy policy{.initial_backoff = 100ms, .max_backoff = 1000ms, .multiplier = 2.0};
  EXPECT_EQ(policy.BaseDelay(1), 100ms);
  EXPECT_EQ(policy.BaseDelay(2), 200ms);
  EXPECT_EQ(policy.BaseDelay(4), 800ms);
  EXPECT_EQ(policy.BaseDelay(5), 1000ms);
}

TEST(ChatError, ParsesRetryAfterSecondsAndDates) {
  auto now = std::chrono::system_clock::from_time_t(1445412480);  // Wed, 21 Oct 2015 07:28:00 GMT
  EXPECT_EQ(ParseRetryAfter("2", now), std::chrono::milliseconds(2000));
  EXPECT_EQ(ParseRetryAfter(" 0.5 ", now), std::chrono::milliseconds(500));
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2015 07:28:30 GMT", now), std::chrono::milliseconds(30000));
  EXPECT_EQ(ParseRetryAfter("soon", now), std::nullopt);
  EXPECT_EQ(ExtractProviderErrorMessage(R"([{"error":{"code":429,"message":"quota","status":"X"}}])"), "quota");
  EXPECT_EQ(ExtractProviderErrorMessage("<html>bad gateway</html>"), "<html>bad gateway</html>");
}

// A provider's error body is cut for the message between characters: a cut inside one made the message
// invalid UTF-8 (Python's binding could not even raise it as the Strata error).
TEST(ChatError, ALongErrorBodyIsCutBetweenCharacters) {
  std::string body;
  for (int i = 0; i < 200; ++i) body += "\xE4\xB8\xAD";  // 600 bytes of U+4E2D.
  const std::string message = ExtractProviderErrorMessage(body);
  EXPECT_TRUE(json::IsValidUtf8(message)) << message;
  EXPECT_EQ(message, body.substr(0, 300) + "...");  // 300 is a boundary here: 100 whole characters.
  const std::string shifted = ExtractProviderErrorMessage("x" + body);
  EXPECT_TRUE(json::IsValidUtf8(shifted)) << shifted;
  EXPECT_EQ(shifted, "x" + body.substr(0, 297) + "...");
}

}  // namespace
}  // namespace strata::llm
