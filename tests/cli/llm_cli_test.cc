// `strata provider request|parse-stream` on every provider conformance case, and `strata chat` holding a
// conversation with an OpenAI-compatible endpoint (the loopback server) end to end: the binary is run as a
// user would run it, with piped stdin.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "conformance/conformance_cases.h"
#include "llm/loopback_server.h"
#include "strata/log/context_log.h"
#include "strata/tokenizer/registry.h"
#include "test_util.h"

namespace strata {
namespace {

using Json = nlohmann::ordered_json;
using testing::LoadCases;
using testing::LoopbackServer;
using testing::CliRun;
using testing::RunStrata;
using testing::TempDir;

void RunRequestCases(const std::string& area) {
  for (const Json& c : LoadCases(area)) {
    SCOPED_TRACE(c["id"].get<std::string>());
    const Json& input = c["input"];
    Json stdin_json{{"system_prompt", input.value("system_prompt", "")},
                    {"tools", input.value("tools", Json::array())},
                    {"history", input.value("history", Json::array())}};
    if (input.contains("provider_options")) stdin_json["options"] = input["provider_options"];
    std::vector<std::string> args = {"provider", "request", "--provider", input["provider"].get<std::string>()};
    if (input.contains("model")) args.insert(args.end(), {"--model", input["model"].get<std::string>()});
    CliRun run = RunStrata(args, stdin_json.dump());
    if (c["expected"].contains("error")) {
      // A request that cannot be built: one line on stderr naming what is wrong, a non-zero exit.
      EXPECT_NE(run.exit_code, 0) << run.out;
      for (const Json& needle : c["expected"].value("message_contains", Json::array())) {
        EXPECT_NE(run.err.find(needle.get<std::string>()), std::string::npos) << run.err;
      }
      continue;
    }
    ASSERT_EQ(run.exit_code, 0) << run.err;
    Json actual = Json::parse(run.out, nullptr, false);
    ASSERT_FALSE(actual.is_discarded()) << run.out;
    EXPECT_EQ(testing::SubsetMismatch(c["expected"]["body"], actual,
                                      c.value("exact_keys", std::vector<std::string>{})),
              "")
        << run.out;
    for (const Json& key : c["expected"].value("absent_keys", Json::array())) {
      EXPECT_FALSE(actual.contains(key.get<std::string>())) << key;
    }
  }
}

// `tokens count` takes every counter the other front ends count with, "chars" (kimi-cli's ratio) included; it
// was refused there alone. Encoding and decoding stay BPE only.
TEST(TokensCli, CountTakesEveryCounterTheOtherFrontEndsTake) {
  const std::string text = "hello world, how are you";
  for (const char* name : {"o200k_base", "cl100k_base", "chars"}) {
    testing::CliRun counted = testing::RunStrata({"tokens", "count", "--encoding", name}, text);
    ASSERT_EQ(counted.exit_code, 0) << name << ": " << counted.err;
    EXPECT_EQ(counted.out, std::to_string(tokenizer::CountText(name, text)) + "\n") << name;
  }
  testing::CliRun encoded = testing::RunStrata({"tokens", "encode", "--encoding", "chars"}, text);
  EXPECT_NE(encoded.exit_code, 0);
  EXPECT_NE(encoded.err.find("chars not in"), std::string::npos) << encoded.err;
}

// Without the vocabulary `tokens count` counts characters / 4 and warns in the words HTTP, MCP and Python
// give; it failed alone among the front ends. Encoding has nothing to fall back on and still fails.
TEST(TokensCli, CountWithoutTheVocabularyWarnsAsTheOtherFrontEndsDo) {
  testing::TempDir empty;
  const std::vector<std::string> env = {"STRATA_VOCAB_DIR=" + empty.path(), "STRATA_NPM_CACHE=", "HOME=" + empty.path()};
  const std::string text = "hello world, how are you";
  testing::CliRun counted = testing::RunStrata({"tokens", "count"}, text, env);
  ASSERT_EQ(counted.exit_code, 0) << counted.err;
  EXPECT_EQ(counted.out, std::to_string((text.size() + 3) / 4) + "\n");
  EXPECT_NE(counted.err.find("strata: warning: the o200k_base vocabulary is not installed here"), std::string::npos)
      << counted.err;
  testing::CliRun encoded = testing::RunStrata({"tokens", "encode"}, text, env);
  EXPECT_NE(encoded.exit_code, 0);
  EXPECT_NE(encoded.err.find("o200k_base"), std::string::npos) << encoded.err;
}

TEST(ProviderCli, RequestBodiesMatchTheConformanceCases) {
  RunRequestCases("request_openai");
  RunRequestCases("request_anthropic");
  RunRequestCases("request_gemini");
}

void RunStreamCases(const std::string& area, const std::string& default_provider) {
  for (const Json& c : LoadCases(area)) {
    SCOPED_TRACE(c["id"].get<std::string>());
    const Json& input = c["input"];
    std::vector<std::string> args = {"provider", "parse-stream", "--provider",
                                     input.value("provider", default_provider)};
    if (input.contains("provider_options")) args.insert(args.end(), {"--options", input["provider_options"].dump()});
    std::string body;
    if (input.contains("response")) {
      args.push_back("--non-stream");
      body = input["response"].dump();
    } else {
      body = testing::SseFromCase(input);
    }
    CliRun run = RunStrata(args, body);
    Json actual = Json::parse(run.out, nullptr, false);
    ASSERT_FALSE(actual.is_discarded()) << run.out << run.err;
    const Json& expected = c["expected"];
    if (expected.contains("error")) {
      EXPECT_EQ(run.exit_code, 1) << run.err;
      ASSERT_TRUE(actual.contains("error")) << run.out;
      for (const Json& needle : expected.value("message_contains", Json::array())) {
        EXPECT_NE(actual["message"].get<std::string>().find(needle.get<std::string>()), std::string::npos)
            << run.out;
      }
      continue;
    }
    ASSERT_EQ(run.exit_code, 0) << run.err;
    Json want = expected;
    for (const Json& key : c.value("informative_keys", Json::array())) want.erase(key.get<std::string>());
    EXPECT_EQ(nlohmann::json::parse(want.dump()), nlohmann::json::parse(actual.dump())) << run.out;
  }
}

TEST(ProviderCli, ParsedStreamsMatchTheConformanceCases) {
  RunStreamCases("stream_openai", "kimi");
  RunStreamCases("stream_anthropic", "anthropic");
}

TEST(ProviderCli, BadInputIsAClearErrorNamingWhere) {
  CliRun run = RunStrata({"provider", "request", "--provider", "openai"}, R"({"history":[{"role":"usr"}]})");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("history"), std::string::npos) << run.err;
  run = RunStrata({"provider", "request", "--provider", "nosuch"}, "{}");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("nosuch"), std::string::npos) << run.err;
  run = RunStrata({"provider", "request", "--provider", "openai"}, "{not json");
  EXPECT_EQ(run.exit_code, 2);
  EXPECT_NE(run.err.find("stdin"), std::string::npos) << run.err;
  run = RunStrata({"provider", "parse-stream", "--provider", "openai"}, "data: {\"choices\":[}\n\n");
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.out.find("\"error\":\"invalid_response\""), std::string::npos) << run.out;
}

std::string OpenAIText(const std::string& id, const std::string& text, int prompt_tokens) {
  Json delta{{"id", id}, {"choices", {{{"index", 0}, {"delta", {{"role", "assistant"}, {"content", text}}}}}}};
  Json finish{{"id", id}, {"choices", {{{"index", 0}, {"delta", Json::object()}, {"finish_reason", "stop"}}}}};
  Json usage{{"id", id}, {"choices", Json::array()},
             {"usage", {{"prompt_tokens", prompt_tokens}, {"completion_tokens", 5}}}};
  return "data: " + delta.dump() + "\n\ndata: " + finish.dump() + "\n\ndata: " + usage.dump() +
         "\n\ndata: [DONE]\n\n";
}

LoopbackServer::Reply Streamed(std::string body) {
  LoopbackServer::Reply reply;
  reply.chunks = LoopbackServer::Split(body, 7);  // Small pieces: events split anywhere.
  return reply;
}

std::vector<Message> Restore(const std::string& path) {
  auto log = ContextLog::Open(path);
  EXPECT_OK(log->Restore());
  return log->history();
}

TEST(ChatCli, HoldsAConversationWithAnOpenAICompatibleEndpoint) {
  LoopbackServer server;
  server.Enqueue(Streamed(OpenAIText("c1", "Hello Ada.", 20)));
  server.Enqueue(Streamed(OpenAIText("c2", "Your name is Ada.", 41)));
  TempDir dir;
  std::string session = dir.File("ctx.jsonl");
  CliRun run = RunStrata({"chat", "--provider", "openai", "--base-url", server.base_url(), "--model", "local-model",
                          "--session", session, "--system", "Be brief."},
                         "My name is Ada.\nWhat is my name?\n/tokens\n", {"OPENAI_API_KEY=sk-loopback"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("Hello Ada."), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("Your name is Ada."), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("tokens: "), std::string::npos) << run.out;

  // The second request carries the whole conversation so far, with the key and the system prompt.
  auto received = server.received();
  ASSERT_EQ(received.size(), 2u);
  EXPECT_EQ(received[1].path, "/v1/chat/completions");
  EXPECT_EQ(received[1].headers.find("Authorization")->second, "Bearer sk-loopback");
  Json body = Json::parse(received[1].body);
  EXPECT_EQ(body["model"], "local-model");
  ASSERT_EQ(body["messages"].size(), 4u) << body.dump();
  EXPECT_EQ(body["messages"][0]["role"], "system");
  EXPECT_EQ(body["messages"][0]["content"], "Be brief.");
  EXPECT_EQ(body["messages"][1]["content"], "My name is Ada.");
  EXPECT_EQ(body["messages"][2]["role"], "assistant");
  EXPECT_EQ(body["messages"][2]["content"], "Hello Ada.");
  EXPECT_EQ(body["messages"][3]["content"], "What is my name?");

  // The conversation is in the context log, with the provider's usage.
  std::vector<Message> history = Restore(session);
  ASSERT_EQ(history.size(), 4u);
  EXPECT_EQ(history[3].role, Role::kAssistant);
  auto log = ContextLog::Open(session);
  ASSERT_OK(log->Restore());
  EXPECT_EQ(log->token_count(), 46);
  EXPECT_EQ(log->n_checkpoints(), 2);
  EXPECT_EQ(log->system_prompt().value_or(""), "Be brief.");
}

TEST(ChatCli, ResumesASessionAndUndoesTheLastTurn) {
  LoopbackServer server;
  server.Enqueue(Streamed(OpenAIText("c1", "One.", 10)));
  server.Enqueue(Streamed(OpenAIText("c2", "Two.", 20)));
  server.Enqueue(Streamed(OpenAIText("c3", "Three.", 30)));
  TempDir dir;
  std::string session = dir.File("ctx.jsonl");
  std::vector<std::string> args = {"chat", "--provider", "openai", "--base-url", server.base_url(), "--session",
                                   session};
  ASSERT_EQ(RunStrata(args, "first\nsecond\n", {"OPENAI_API_KEY=k"}).exit_code, 0);
  ASSERT_EQ(Restore(session).size(), 4u);
  // A new process resumes the log, undoes the last turn, and the next request has only the first turn.
  CliRun run = RunStrata(args, "/undo\nthird\n", {"OPENAI_API_KEY=k"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("reverted"), std::string::npos) << run.out;
  auto received = server.received();
  ASSERT_EQ(received.size(), 3u);
  Json body = Json::parse(received[2].body);
  ASSERT_EQ(body["messages"].size(), 3u) << body.dump();
  EXPECT_EQ(body["messages"][0]["content"], "first");
  EXPECT_EQ(body["messages"][2]["content"], "third");
  std::vector<Message> history = Restore(session);
  ASSERT_EQ(history.size(), 4u);
  // /clear empties the log but keeps the old one as a rotation.
  run = RunStrata(args, "/clear\n", {"OPENAI_API_KEY=k"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(Restore(session).empty());
  EXPECT_EQ(Restore(dir.File("ctx_2.jsonl")).size(), 4u);
}

TEST(ChatCli, AFailedTurnIsReportedAndLeavesTheLogRestorable) {
  LoopbackServer server;
  LoopbackServer::Reply error;
  error.status = 401;
  error.content_type = "application/json";
  error.chunks = {R"({"error":{"message":"Incorrect API key provided","type":"invalid_request_error"}})"};
  server.Enqueue(error);
  TempDir dir;
  std::string session = dir.File("ctx.jsonl");
  CliRun run = RunStrata({"chat", "--provider", "openai", "--base-url", server.base_url(), "--session", session},
                         "hello\n", {"OPENAI_API_KEY=bad"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("Incorrect API key provided"), std::string::npos) << run.err;
  EXPECT_EQ(server.hits(), 1);  // 401 is not retried.
  // The user's turn is kept (it can be answered later); nothing else was written.
  std::vector<Message> history = Restore(session);
  ASSERT_EQ(history.size(), 1u);
  EXPECT_EQ(history[0].role, Role::kUser);
}

TEST(ChatCli, UnknownToolCallsBecomeResultsAndTheModelIsCalledAgain) {
  LoopbackServer server;
  Json call{{"id", "c1"},
            {"choices",
             {{{"index", 0},
               {"delta",
                {{"tool_calls",
                  {{{"index", 0}, {"id", "call_1"}, {"type", "function"},
                    {"function", {{"name", "search"}, {"arguments", "{\"q\":\"x\"}"}}}}}}}},
               {"finish_reason", "tool_calls"}}}}};
  server.Enqueue(Streamed("data: " + call.dump() + "\n\ndata: [DONE]\n\n"));
  server.Enqueue(Streamed(OpenAIText("c2", "I have no tools.", 30)));
  TempDir dir;
  std::string session = dir.File("ctx.jsonl");
  CliRun run = RunStrata({"chat", "--provider", "openai", "--base-url", server.base_url(), "--session", session},
                         "find x\n", {"OPENAI_API_KEY=k"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("I have no tools."), std::string::npos);
  std::vector<Message> history = Restore(session);
  ASSERT_EQ(history.size(), 4u);  // user, assistant(tool call), tool result, assistant
  EXPECT_EQ(history[2].role, Role::kTool);
  EXPECT_EQ(history[2].tool_call_id.value_or(""), "call_1");
  Json second = Json::parse(server.received()[1].body);
  EXPECT_EQ(second["messages"][2]["role"], "tool");
  EXPECT_NE(second["messages"][2]["content"].dump().find("search"), std::string::npos) << second.dump();
}

TEST(ChatCli, RecordsAConversationAndReplaysItOffline) {
  TempDir dir;
  std::string recording = dir.File("rec.jsonl");
  {
    LoopbackServer server;
    server.Enqueue(Streamed(OpenAIText("c1", "Recorded answer.", 10)));
    CliRun run = RunStrata({"chat", "--provider", "openai", "--base-url", server.base_url(), "--session",
                            dir.File("a.jsonl"), "--record", recording},
                           "question\n", {"OPENAI_API_KEY=sk-secret"});
    ASSERT_EQ(run.exit_code, 0) << run.err;
  }
  std::string recorded = testing::ReadFileOrDie(recording);
  EXPECT_EQ(recorded.find("sk-secret"), std::string::npos) << "keys must not be recorded";
  // The server is gone: the replay answers the same question, and refuses a different one.
  CliRun run = RunStrata({"chat", "--provider", "openai", "--base-url", "http://127.0.0.1:9/v1", "--session",
                          dir.File("b.jsonl"), "--replay", recording},
                         "question\n", {"OPENAI_API_KEY=k"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.out.find("Recorded answer."), std::string::npos) << run.out;
  run = RunStrata({"chat", "--provider", "openai", "--base-url", "http://127.0.0.1:9/v1", "--session",
                   dir.File("c.jsonl"), "--replay", recording},
                  "another question\n", {"OPENAI_API_KEY=k"});
  EXPECT_EQ(run.exit_code, 1);
  EXPECT_NE(run.err.find("replay"), std::string::npos) << run.err;
}

}  // namespace
}  // namespace strata
