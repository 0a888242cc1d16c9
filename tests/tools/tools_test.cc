#include <gtest/gtest.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "strata/llm/chat_error.h"
#include "strata/llm/scripted.h"
#include "strata/tools/json_schema.h"
#include "strata/tools/step.h"
#include "strata/tools/typed_tool.h"
#include "test_util.h"

namespace strata::tools {
namespace {

using namespace std::chrono_literals;

TEST(JsonSchemaTest, AcceptsValidAndNamesWhereInvalidIs) {
  auto schema = JsonSchema::Parse(R"({
    "type":"object",
    "properties":{
      "path":{"type":"string","minLength":1},
      "mode":{"enum":["smart","full"]},
      "limit":{"type":"integer","minimum":1,"maximum":100},
      "tags":{"type":"array","items":{"type":"string"},"maxItems":2},
      "opt":{"anyOf":[{"type":"string"},{"type":"null"}]},
      "ref":{"$ref":"#/$defs/point"}
    },
    "required":["path"],
    "additionalProperties":false,
    "$defs":{"point":{"type":"object","properties":{"x":{"type":"number"}},"required":["x"]}}})");
  ASSERT_OK(schema);
  EXPECT_OK(schema->Validate(R"({"path":"a","mode":"full","limit":3.0,"tags":["x"],"opt":null,"ref":{"x":1.5}})"));
  struct Bad {
    const char* instance;
    const char* message;
  } cases[] = {
      {R"({})", "$: missing required property \"path\""},
      {R"({"path":""})", "$.path: shorter than 1 characters"},
      {R"({"path":"a","limit":"3"})", "$.limit: expected integer, got string"},
      {R"({"path":"a","limit":2.5})", "$.limit: expected integer, got number"},
      {R"({"path":"a","limit":101})", "$.limit: 101 is greater than the maximum 100"},
      {R"({"path":"a","mode":"x"})", "$.mode: \"x\" is not one of [\"smart\",\"full\"]"},
      {R"({"path":"a","tags":["x",1]})", "$.tags[1]: expected string, got integer"},
      {R"({"path":"a","tags":["x","y","z"]})", "$.tags: allows at most 2 items, got 3"},
      {R"({"path":"a","ref":{}})", "$.ref: missing required property \"x\""},
      {R"({"path":"a","extra":1})", "$.extra: unknown property (allowed: limit, mode, opt, path, ref, tags)"},
      {R"({"path":"a","opt":3})", "$.opt: matches none of the allowed alternatives (first: $.opt: expected string, got integer)"},
  };
  for (const Bad& c : cases) {
    Status s = schema->Validate(c.instance);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.instance;
    EXPECT_EQ(s.message(), c.message) << c.instance;
  }
  EXPECT_NE(schema->Validate("{\"path\":").message().find("not valid JSON"), std::string::npos);
  EXPECT_FALSE(JsonSchema::Parse("[1]").ok());
}

struct Point {
  double x = 0;
  double y = 0;
  static constexpr auto kFields = std::make_tuple(Field("x", &Point::x), Field("y", &Point::y));
};

struct DrawParams {
  std::string label;
  std::optional<int> width;
  std::vector<Point> points;
  bool closed = false;
  static constexpr auto kFields =
      std::make_tuple(Field("label", &DrawParams::label, "Shown on the shape"), Field("width", &DrawParams::width),
                      Field("points", &DrawParams::points), Field("closed", &DrawParams::closed));
};

TEST(TypedToolTest, GeneratesTheSchemaAndParsesArguments) {
  nlohmann::json schema = nlohmann::json::parse(SchemaFor<DrawParams>());
  EXPECT_EQ(schema["properties"]["label"], (nlohmann::json{{"type", "string"}, {"description", "Shown on the shape"}}));
  EXPECT_EQ(schema["properties"]["width"]["type"], "integer");
  EXPECT_EQ(schema["properties"]["points"]["items"]["properties"]["x"]["type"], "number");
  EXPECT_EQ(schema["required"], (nlohmann::json{"label", "points", "closed"}));  // width is optional
  EXPECT_EQ(schema["additionalProperties"], false);

  auto params = ParseParams<DrawParams>(R"({"label":"tri","points":[{"x":1,"y":2},{"x":3,"y":4.5}],"closed":true})");
  ASSERT_OK(params);
  EXPECT_EQ(params->label, "tri");
  EXPECT_FALSE(params->width.has_value());
  ASSERT_EQ(params->points.size(), 2u);
  EXPECT_EQ(params->points[1].y, 4.5);
  EXPECT_TRUE(params->closed);
}

Toolset MakeToolset() {
  Toolset toolset;
  EXPECT_OK(toolset.Add(MakeTypedTool<Point>("norm1", "Manhattan norm", [](const Point& p, const Canceller&) {
    return ToolOutput::Text(std::to_string(static_cast<int>(std::abs(p.x) + std::abs(p.y))));
  })));
  EXPECT_OK(toolset.Add(MakeTool({"explode", "Always throws", R"({"type":"object","properties":{}})"},
                                 [](std::string_view, const Canceller&) -> ToolOutput {
                                   throw std::runtime_error("kaboom");
                                 })));
  return toolset;
}

ToolCall Call(std::string id, std::string name, std::string arguments) {
  return ToolCall{.id = std::move(id), .function = {std::move(name), std::move(arguments)}};
}

TEST(ToolsetTest, EveryFailureBecomesAResultTheModelCanRead) {
  Toolset toolset = MakeToolset();
  Canceller cancel;
  ToolResult ok = toolset.Handle(Call("c1", "norm1", R"({"x":3,"y":-4})"), cancel);
  EXPECT_FALSE(ok.is_error);
  EXPECT_EQ(ok.message.ExtractText(), "7");
  EXPECT_EQ(ok.message.role, Role::kTool);
  EXPECT_EQ(ok.message.tool_call_id, "c1");

  struct Case {
    ToolCall call;
    const char* contains;
  } cases[] = {
      {Call("c2", "nope", "{}"), "tool \"nope\" not found. Available tools: norm1, explode"},
      {Call("c3", "norm1", R"({"x":3)"), "invalid arguments for tool \"norm1\": not valid JSON"},
      {Call("c4", "norm1", R"({"x":"3","y":1})"), "$.x: expected number, got string"},
      {Call("c5", "norm1", R"({"x":1,"y":1,"z":1})"), "$.z: unknown property"},
      {Call("c6", "explode", ""), "tool \"explode\" failed: kaboom"},
  };
  for (const Case& c : cases) {
    ToolResult r = toolset.Handle(c.call, cancel);
    EXPECT_TRUE(r.is_error) << c.contains;
    EXPECT_EQ(r.message.tool_call_id, c.call.id);
    EXPECT_NE(r.message.ExtractText().find(c.contains), std::string::npos) << r.message.ExtractText();
  }
  EXPECT_EQ(toolset.Add(MakeTool({"norm1", "", "{}"}, nullptr)).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(toolset.Add(MakeTool({"bad", "", "{"}, nullptr)).code(), StatusCode::kInvalidArgument);
}

// Two tools that each wait for the other to start: they only finish if Step runs them concurrently.
TEST(StepTest, RunsParallelToolCallsConcurrentlyAndReturnsResultsInCallOrder) {
  std::mutex mu;
  std::condition_variable cv;
  int started = 0;
  auto rendezvous = [&](std::string name) {
    return MakeTool({name, "", R"({"type":"object"})"}, [&, name](std::string_view, const Canceller&) {
      std::unique_lock lock(mu);
      ++started;
      cv.notify_all();
      bool both = cv.wait_for(lock, 10s, [&] { return started == 2; });
      return both ? ToolOutput::Text(name + " done") : ToolOutput::Error("ran alone");
    });
  };
  Toolset toolset;
  ASSERT_OK(toolset.Add(rendezvous("a")));
  ASSERT_OK(toolset.Add(rendezvous("b")));
  llm::ScriptedReply reply;
  reply.parts = {ContentPart(TextPart{"Running both."}), Call("ca", "a", "{}"), Call("cb", "b", "{}")};
  llm::ScriptedProvider provider("m", {reply});
  std::vector<std::string> reported;
  std::mutex reported_mu;
  auto result = Step(provider, "", toolset, std::vector<Message>{Message::User("go")},
                     {.on_tool_result = [&](const ToolResult& r) {
                       std::lock_guard lock(reported_mu);
                       reported.push_back(r.call.id);
                     }});
  ASSERT_OK(result);
  ASSERT_EQ(result->tool_results.size(), 2u);
  EXPECT_EQ(result->tool_results[0].message.ExtractText(), "a done");
  EXPECT_EQ(result->tool_results[1].message.ExtractText(), "b done");
  EXPECT_EQ(reported.size(), 2u);
  std::vector<Message> added = result->NewMessages();
  ASSERT_EQ(added.size(), 3u);
  EXPECT_EQ(added[0].role, Role::kAssistant);
  EXPECT_EQ(added[2].tool_call_id, "cb");
  // The provider saw the toolset's declarations.
  ASSERT_EQ(provider.requests().size(), 1u);
  EXPECT_EQ(provider.requests()[0].tools.size(), 2u);
}

TEST(StepTest, AFailedStreamCancelsRunningTools) {
  std::atomic<bool> saw_cancel{false};
  std::atomic<bool> started{false};
  Toolset toolset;
  ASSERT_OK(toolset.Add(MakeTool({"wait", "", "{}"}, [&](std::string_view, const Canceller& cancel) {
    started = true;
    bool cancelled = cancel.SleepFor(10s);
    saw_cancel = cancelled;
    return ToolOutput::Text("finished");
  })));
  llm::ScriptedReply reply;
  // The call completes when the text after it arrives; once the tool runs, the stream fails.
  reply.parts = {Call("w1", "wait", "{}"), ContentPart(TextPart{"a"}), ContentPart(TextPart{"b"})};
  reply.stream_error = llm::ConnectionError("reset by peer");
  llm::ScriptedProvider provider("m", {reply});
  auto on_part = [&](const StreamedPart& part) {
    const auto* content = std::get_if<ContentPart>(&part);
    if (content != nullptr && std::get<TextPart>(*content).text == "b") {
      while (!started) std::this_thread::yield();
    }
  };
  auto result = Step(provider, "", toolset, std::vector<Message>{Message::User("go")}, {.on_part = on_part});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().message(), "reset by peer");
  EXPECT_TRUE(started.load());
  EXPECT_TRUE(saw_cancel.load());
}

TEST(StepTest, CancellingTheStepCancelsTools) {
  Canceller cancel;
  std::atomic<bool> started{false};
  std::atomic<bool> saw_cancel{false};
  Toolset toolset;
  ASSERT_OK(toolset.Add(MakeTool({"wait", "", "{}"}, [&](std::string_view, const Canceller& c) {
    started = true;
    saw_cancel = c.SleepFor(10s);
    return ToolOutput::Text("finished");
  })));
  llm::ScriptedReply reply;
  reply.parts = {Call("w1", "wait", "{}"), ContentPart(TextPart{"a"}), ContentPart(TextPart{"b"})};
  llm::ScriptedProvider provider("m", {reply});
  auto on_part = [&](const StreamedPart& part) {
    const auto* content = std::get_if<ContentPart>(&part);
    // Parts fire before they are merged: "a" dispatches the call, so wait at "b".
    if (content == nullptr || std::get<TextPart>(*content).text != "b") return;
    while (!started) std::this_thread::yield();  // The tool is running: the user presses Ctrl-C.
    cancel.Cancel();
  };
  auto result = Step(provider, "", toolset, std::vector<Message>{Message::User("go")}, {.on_part = on_part},
                     {.cancel = &cancel});
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.status().code(), StatusCode::kCancelled);
  EXPECT_TRUE(saw_cancel.load());
}

}  // namespace
}  // namespace strata::tools
