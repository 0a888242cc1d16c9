// McpClient (tools/mcp_client.h) against servers that misbehave on purpose (a Python script playing a
// stdio server), against `strata mcp` and `strata serve`'s /mcp, and its config parser. The official SDK's
// server is exercised through `strata chat` in tests/tools/mcp_chat_test.mjs.
#include "strata/tools/mcp_client.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <cerrno>

#include <nlohmann/json.hpp>
#include <thread>

#include "llm/loopback_server.h"
#include "strata/engine/agent_tools.h"
#include "strata/json/json_writer.h"
#include "strata/server/server.h"
#include "test_util.h"

namespace strata::tools {
namespace {

using Json = nlohmann::json;
using std::chrono::milliseconds;

// A stdio MCP server whose behaviour the first argument picks. It logs the notifications it receives to
// the file named by $FAKE_MCP_LOG.
constexpr const char* kFakeServer = R"PY(
import json, os, signal, sys, time
mode = sys.argv[1]
log = open(os.environ["FAKE_MCP_LOG"], "a")
def send(m):
    sys.stdout.write(json.dumps(m) + "\n"); sys.stdout.flush()
if mode == "exit":
    sys.stderr.buffer.write(b"fatal: \xff\xfe no API key\x1b[31m\n"); sys.stderr.flush(); sys.exit(3)
for line in sys.stdin:
    m = json.loads(line)
    if "id" not in m:
        log.write(line); log.flush(); continue
    method, i, params = m["method"], m["id"], m.get("params", {})
    if method == "initialize":
        if mode == "silent": continue
        if mode == "garbage": print("debug: starting up", flush=True)
        version = "1999-01-01" if mode == "old" else "2025-06-18"
        send({"jsonrpc": "2.0", "id": i, "result": {"protocolVersion": version, "capabilities": {"tools": {}},
              "serverInfo": {"name": "fake", "version": "9"}, "instructions": "be nice"}})
        if mode == "deaf":
            time.sleep(120)  # Never reads its input again.
    elif method == "tools/list":
        if mode == "ping":
            send({"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
            reply = json.loads(sys.stdin.readline())
            if reply != {"jsonrpc": "2.0", "id": "srv-1", "result": {}}:
                send({"jsonrpc": "2.0", "id": i, "error": {"code": -1, "message": "bad ping reply %r" % reply}}); continue
            send({"jsonrpc": "2.0", "id": "srv-2", "method": "sampling/createMessage", "params": {}})
            reply = json.loads(sys.stdin.readline())
            if reply.get("error", {}).get("code") != -32601:
                send({"jsonrpc": "2.0", "id": i, "error": {"code": -1, "message": "bad refusal %r" % reply}}); continue
        if mode == "wrongtype":
            send({"jsonrpc": "2.0", "id": i, "result": {"tools": "nope"}}); continue
        if params.get("cursor") == "p2":
            send({"jsonrpc": "2.0", "id": i, "result": {"tools": [
                {"name": "dotted.name", "description": "Has a dot.", "inputSchema": {"type": "object"}},
                {"name": "echo", "description": "A second tool of the same name."}]}})
        else:
            send({"jsonrpc": "2.0", "id": i, "result": {"tools": [
                {"name": "echo", "title": "Echo", "inputSchema": {"type": "object", "properties": {"x": {"type": "integer"}}}}],
                "nextCursor": "p2"}})
    elif method == "tools/call":
        name, args = params["name"], params.get("arguments", {})
        if name in ("echo", "dotted.name"):
            send({"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": json.dumps(args)}]}})
        elif name == "rpcerror":
            send({"jsonrpc": "2.0", "id": i, "error": {"code": -32602, "message": "bad x"}})
        elif name == "wrongtype":
            send({"jsonrpc": "2.0", "id": i, "result": {"content": "text"}})
        elif name == "mixed":
            send({"jsonrpc": "2.0", "id": i, "result": {"isError": True, "content": [
                {"type": "audio", "data": "AAAA", "mimeType": "audio/wav"},
                {"type": "resource", "resource": {"uri": "file:///a.txt", "text": "inside"}},
                {"type": "resource_link", "uri": "file:///b.txt", "name": "b"},
                {"type": "hologram", "x": 1}]}})
        elif name == "structured":
            send({"jsonrpc": "2.0", "id": i, "result": {"content": [], "structuredContent": {"n": 1}}})
        elif name == "crash":
            sys.stderr.write("crashing now\n"); sys.stderr.flush(); os._exit(7)
        elif name == "huge":
            sys.stdout.write("x" * 200000); sys.stdout.flush()
        elif name == "hang":
            pass
        elif name == "deep":
            sys.stdout.write('{"jsonrpc": "2.0", "id": %d, "result": ' % i + "[" * 100000 + "]" * 100000 + "}\n")
            sys.stdout.flush()
        elif name == "escape":
            os.setpgid(0, os.getpgid(os.getppid()))  # Leaves the process group the client signals...
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # ...ignores SIGTERM...
            send({"jsonrpc": "2.0", "id": i, "result": {"content": [{"type": "text", "text": str(os.getpid())}]}})
            while True:
                time.sleep(1)  # ...and end of input.
        elif name == "media":
            send({"jsonrpc": "2.0", "id": i, "result": {"content": [
                {"type": "image", "data": "PHN2Zz4=", "mimeType": "image/svg+xml"},
                {"type": "image", "data": "not base64!", "mimeType": "image/png"},
                {"type": "image", "data": "iVBORw0KGgo=", "mimeType": "IMAGE/PNG"},
                {"type": "audio", "data": "", "mimeType": "audio/wav"}]}})
)PY";

class McpClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::WriteFileOrDie(dir_.File("fake.py"), kFakeServer);
    setenv("FAKE_MCP_LOG", dir_.File("notifications.log").c_str(), 1);
  }

  McpServerConfig Fake(const std::string& mode, milliseconds timeout = milliseconds(10'000)) {
    return {.name = "fake", .command = "python3", .args = {dir_.File("fake.py"), mode}, .timeout = timeout};
  }

  std::unique_ptr<McpClient> Connect(const std::string& mode, McpClientOptions options = {}) {
    auto client = McpClient::Connect(Fake(mode), std::move(options));
    EXPECT_OK(client);
    return client.ok() ? std::move(*client) : nullptr;
  }

  std::string Notifications() { return testing::ReadFileOrDie(dir_.File("notifications.log")); }

  testing::TempDir dir_;
};

std::string Text(const ToolOutput& out) {
  std::string text;
  for (const ContentPart& p : out.content) {
    if (const auto* t = std::get_if<TextPart>(&p)) text += t->text;
  }
  return text;
}

TEST_F(McpClientTest, HandshakeListsEveryPageAndCallsTools) {
  auto client = Connect("normal");
  ASSERT_NE(client, nullptr);
  EXPECT_EQ(client->server_name(), "fake");
  EXPECT_EQ(client->server_version(), "9");
  EXPECT_EQ(client->protocol_version(), "2025-06-18");
  EXPECT_EQ(client->instructions(), "be nice");
  auto tools = client->ListTools();
  ASSERT_OK(tools);
  ASSERT_EQ(tools->size(), 3u);
  EXPECT_EQ((*tools)[0].name, "echo");
  EXPECT_EQ((*tools)[0].title, "Echo");
  EXPECT_EQ(Json::parse((*tools)[0].input_schema)["properties"]["x"]["type"], "integer");
  EXPECT_EQ((*tools)[1].name, "dotted.name");
  EXPECT_EQ((*tools)[2].input_schema, R"({"type":"object"})");  // None given.
  auto out = client->CallTool("echo", R"({"x": 7})");
  ASSERT_OK(out);
  EXPECT_FALSE(out->is_error);
  EXPECT_EQ(Json::parse(Text(*out)), Json({{"x", 7}}));
  client.reset();  // Ends the session: the server sees end of input and exits.
  EXPECT_NE(Notifications().find("notifications/initialized"), std::string::npos);
}

TEST_F(McpClientTest, ResultContentBecomesMessageParts) {
  auto client = Connect("normal");
  ASSERT_NE(client, nullptr);
  auto out = client->CallTool("mixed", "{}");
  ASSERT_OK(out);
  EXPECT_TRUE(out->is_error);
  ASSERT_EQ(out->content.size(), 4u);
  const auto* audio = std::get_if<MediaPart>(&out->content[0]);
  ASSERT_NE(audio, nullptr);
  EXPECT_EQ(audio->kind, MediaKind::kAudio);
  EXPECT_EQ(audio->url, "data:audio/wav;base64,AAAA");
  EXPECT_EQ(std::get<TextPart>(out->content[1]).text, "inside");
  EXPECT_EQ(std::get<TextPart>(out->content[2]).text, "[resource link: file:///b.txt (b)]");
  EXPECT_NE(std::get<TextPart>(out->content[3]).text.find("hologram"), std::string::npos);
  auto structured = client->CallTool("structured", "{}");
  ASSERT_OK(structured);
  EXPECT_EQ(Text(*structured), R"({"n":1})");
}

TEST_F(McpClientTest, ServerErrorsAreStatusesNamingTheServer) {
  auto client = Connect("normal");
  ASSERT_NE(client, nullptr);
  auto rpc = client->CallTool("rpcerror", "{}");
  EXPECT_EQ(rpc.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(rpc.status().message().find("MCP server \"fake\": tools/call failed: bad x (JSON-RPC error -32602)"),
            std::string::npos)
      << rpc.status().ToString();
  auto wrong = client->CallTool("wrongtype", "{}");
  EXPECT_EQ(wrong.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(wrong.status().message().find("\"content\" is a string, not an array"), std::string::npos);
  EXPECT_EQ(client->CallTool("echo", "[1]").status().code(), StatusCode::kInvalidArgument);
  // The client still works after each.
  EXPECT_OK(client->CallTool("echo", "{}"));
}

TEST_F(McpClientTest, ToolsListOfTheWrongTypeIsAnError) {
  auto client = Connect("wrongtype");
  ASSERT_NE(client, nullptr);
  auto tools = client->ListTools();
  EXPECT_EQ(tools.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(tools.status().message().find("\"tools\" is a string, not an array"), std::string::npos);
}

TEST_F(McpClientTest, RequestsOfTheServerAreAnsweredOrRefused) {
  auto client = Connect("ping");
  ASSERT_NE(client, nullptr);
  EXPECT_OK(client->ListTools());  // The fake fails tools/list unless both answers were right.
}

TEST_F(McpClientTest, LinesThatAreNotJsonRpcAreTolerated) {
  auto client = Connect("garbage");
  ASSERT_NE(client, nullptr);
  EXPECT_OK(client->CallTool("echo", "{}"));
}

TEST_F(McpClientTest, AServerThatExitsAtOnceIsUnavailableAndQuoted) {
  auto client = McpClient::Connect(Fake("exit"));
  ASSERT_EQ(client.status().code(), StatusCode::kUnavailable);
  const std::string& m = client.status().message();
  EXPECT_NE(m.find("MCP server \"fake\": the server closed its output (it exited with status 3)"), std::string::npos) << m;
  EXPECT_NE(m.find("fatal: "), std::string::npos) << m;
  EXPECT_NE(m.find(" no API key"), std::string::npos) << m;
  EXPECT_TRUE(json::IsValidUtf8(m)) << "invalid bytes from the server are replaced";
  EXPECT_EQ(m.find('\x1b'), std::string::npos) << "no terminal escapes from the server";
}

TEST_F(McpClientTest, AProgramThatDoesNotExistIsUnavailable) {
  auto client = McpClient::Connect({.name = "ghost", .command = dir_.File("no-such-program")});
  EXPECT_EQ(client.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(client.status().message().find("cannot start"), std::string::npos) << client.status().ToString();
}

TEST_F(McpClientTest, ASilentServerTimesOut) {
  auto client = McpClient::Connect(Fake("silent", milliseconds(300)));
  EXPECT_EQ(client.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(client.status().message().find("initialize got no answer within 0.3 s"), std::string::npos)
      << client.status().ToString();
}

TEST_F(McpClientTest, AnUnknownProtocolRevisionIsRefused) {
  auto client = McpClient::Connect(Fake("old"));
  EXPECT_EQ(client.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(client.status().message().find("1999-01-01"), std::string::npos);
}

TEST_F(McpClientTest, AServerThatDiesDuringACallIsNamedWithItsExit) {
  auto client = Connect("normal");
  ASSERT_NE(client, nullptr);
  auto out = client->CallTool("crash", "{}");
  EXPECT_EQ(out.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(out.status().message().find("exited with status 7"), std::string::npos) << out.status().ToString();
  EXPECT_NE(out.status().message().find("crashing now"), std::string::npos) << out.status().ToString();
  EXPECT_EQ(client->CallTool("echo", "{}").status().code(), StatusCode::kUnavailable);
}

TEST_F(McpClientTest, AnOversizedMessageEndsTheConnection) {
  auto client = Connect("normal", {.max_message_bytes = 1 << 16});
  ASSERT_NE(client, nullptr);
  auto out = client->CallTool("huge", "{}");
  EXPECT_EQ(out.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(out.status().message().find("a message of more than 65536 bytes"), std::string::npos)
      << out.status().ToString();
}

TEST_F(McpClientTest, CancellingACallTellsTheServer) {
  auto client = Connect("normal");
  ASSERT_NE(client, nullptr);
  Canceller cancel;
  std::thread canceller([&] {
    std::this_thread::sleep_for(milliseconds(100));
    cancel.Cancel();
  });
  auto out = client->CallTool("hang", "{}", &cancel);
  canceller.join();
  EXPECT_EQ(out.status().code(), StatusCode::kCancelled);
  client.reset();
  std::string log = Notifications();
  EXPECT_NE(log.find("notifications/cancelled"), std::string::npos) << log;
  EXPECT_NE(log.find("cancelled by the client"), std::string::npos) << log;
}

TEST_F(McpClientTest, ACallThatOutlastsTheTimeoutIsCancelledOnTheServer) {
  // The timeout covers the handshake too: long enough for the fake server's interpreter to start on a
  // loaded machine (a sanitizer build beside a benchmark), short enough that the hang is what trips it.
  auto client = McpClient::Connect(Fake("normal", milliseconds(2000)));
  ASSERT_OK(client);
  auto out = (*client)->CallTool("hang", "{}");
  EXPECT_EQ(out.status().code(), StatusCode::kDeadlineExceeded);
  client->reset();
  EXPECT_NE(Notifications().find("timed out"), std::string::npos);
}

TEST_F(McpClientTest, AServerThatStopsReadingCannotHangTheClient) {
  auto client = McpClient::Connect(Fake("deaf", milliseconds(2000)));
  ASSERT_OK(client);
  // A megabyte of arguments fills the pipe: the write waits for room until the deadline, then gives up;
  // a line cut short cannot be finished, so the server is stopped.
  std::string big = R"({"x": ")" + std::string(1 << 20, 'a') + R"("})";
  auto out = (*client)->CallTool("echo", big);
  EXPECT_EQ(out.status().code(), StatusCode::kDeadlineExceeded) << out.status().ToString();
  EXPECT_NE(out.status().message().find("sending tools/call: the server stopped reading its input"), std::string::npos)
      << out.status().ToString();
  client->reset();  // Returns: nothing waits on the deaf server.
}

TEST_F(McpClientTest, AServerThatLeavesItsProcessGroupIsStillStopped) {
  auto client = Connect("normal");
  ASSERT_NE(client, nullptr);
  auto out = client->CallTool("escape", "{}");
  ASSERT_OK(out);
  pid_t pid = static_cast<pid_t>(std::stol(Text(*out)));
  ASSERT_EQ(::kill(pid, 0), 0);
  client.reset();  // End of input and SIGTERM are ignored and the group is gone: SIGKILL to the pid.
  EXPECT_EQ(::kill(pid, 0), -1);
  EXPECT_EQ(errno, ESRCH);
}

TEST_F(McpClientTest, AnswersNestedTooDeepAreRefusedNotRecursedInto) {
  auto client = McpClient::Connect(Fake("normal", milliseconds(1500)));
  ASSERT_OK(client);
  auto out = (*client)->CallTool("deep", "{}");
  EXPECT_EQ(out.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(out.status().message().find("JSON nested deeper than 256 levels"), std::string::npos)
      << out.status().ToString();
  EXPECT_OK((*client)->CallTool("echo", "{}"));
}

TEST_F(McpClientTest, MediaAModelWouldRefuseIsDescribedInstead) {
  auto client = Connect("normal");
  ASSERT_NE(client, nullptr);
  auto out = client->CallTool("media", "{}");
  ASSERT_OK(out);
  ASSERT_EQ(out->content.size(), 4u);
  EXPECT_EQ(std::get<TextPart>(out->content[0]).text, "[image (image/svg+xml, 6 bytes) not shown: a type models do not take]");
  EXPECT_EQ(std::get<TextPart>(out->content[1]).text, "[image (image/png, 8 bytes) not shown: its data is not base64]");
  EXPECT_EQ(std::get<MediaPart>(out->content[2]).url, "data:image/png;base64,iVBORw0KGgo=");
  EXPECT_NE(std::get<TextPart>(out->content[3]).text.find("its data is not base64"), std::string::npos);
}

TEST_F(McpClientTest, ToolsJoinAToolsetRenamedWhereNeeded) {
  auto client = Connect("normal");
  ASSERT_NE(client, nullptr);
  Toolset toolset;
  ASSERT_OK(toolset.Add(MakeTool({"echo", "the local one"}, [](std::string_view, const Canceller&) {
    return ToolOutput::Text("local");
  })));
  std::vector<std::string> warnings;
  auto added = AddMcpTools(std::shared_ptr<McpClient>(std::move(client)), &toolset, &warnings);
  ASSERT_OK(added);
  EXPECT_EQ(*added, (std::vector<std::string>{"fake__echo", "dotted_name"}));
  ASSERT_EQ(warnings.size(), 3u);
  EXPECT_NE(warnings[0].find("\"echo\" is offered to the model as \"fake__echo\" (the name was taken)"), std::string::npos);
  EXPECT_NE(warnings[1].find("\"dotted.name\" is offered to the model as \"dotted_name\""), std::string::npos);
  EXPECT_NE(warnings[2].find("tool \"echo\" left out: the name \"fake__echo\" is taken"), std::string::npos)
      << warnings[2];

  Canceller never;
  ToolCall call{.id = "c1", .function = {.name = "fake__echo", .arguments = R"({"x": 5})"}};
  ToolResult result = toolset.Handle(call, never);
  EXPECT_FALSE(result.is_error);
  EXPECT_EQ(std::get<TextPart>(result.message.content[0]).text, R"({"x": 5})");
  // The toolset checks the server's schema before the call goes out.
  call.function.arguments = R"({"x": "five"})";
  result = toolset.Handle(call, never);
  EXPECT_TRUE(result.is_error);
  // A server failure is a tool result the model can read.
  ToolCall dotted{.id = "c2", .function = {.name = "dotted_name", .arguments = "{}"}};
  EXPECT_FALSE(toolset.Handle(dotted, never).is_error);
}

TEST(McpClient, TalksToStrataMcpOverStdio) {
  testing::TempDir dir;
  auto client = McpClient::Connect(
      {.name = "strata", .command = STRATA_CLI, .args = {"mcp", "--data", dir.File("data"), "--user", "alice"}});
  ASSERT_OK(client);
  EXPECT_EQ((*client)->server_name(), "strata");
  EXPECT_EQ((*client)->protocol_version(), "2025-11-25");
  auto tools = (*client)->ListTools();
  ASSERT_OK(tools);
  EXPECT_GE(tools->size(), 15u);
  auto wrote = (*client)->CallTool("write", R"({"uri": "strata://user/alice/memories/prefs/editor", "content": "tabs"})");
  ASSERT_OK(wrote);
  EXPECT_FALSE(wrote->is_error) << Text(*wrote);
  auto read = (*client)->CallTool("read", R"({"uri": "strata://user/alice/memories/prefs/editor"})");
  ASSERT_OK(read);
  EXPECT_NE(Text(*read).find("tabs"), std::string::npos) << Text(*read);
  auto unknown = (*client)->CallTool("no_such_tool", "{}");
  EXPECT_TRUE(!unknown.ok() || unknown->is_error);
}

TEST(McpClient, TalksToStrataServeOverStreamableHttp) {
  testing::TempDir dir;
  auto server = server::Server::Open({.data_dir = dir.File("data")},
                                     {.listen = "127.0.0.1:0", .root_key = "root-key-for-mcp-client-test",
                                      .read_root_key_from_env = false});
  ASSERT_OK(server);
  auto port = (*server)->Bind();
  ASSERT_OK(port);
  std::thread serving([&] { (void)(*server)->Serve(); });
  std::string url = "http://127.0.0.1:" + std::to_string(*port) + "/mcp";
  {
    auto refused = McpClient::Connect({.name = "remote", .url = url});
    EXPECT_EQ(refused.status().code(), StatusCode::kPermissionDenied) << refused.status().ToString();
    EXPECT_NE(refused.status().message().find("HTTP 401"), std::string::npos) << refused.status().ToString();
    auto client = McpClient::Connect(
        {.name = "remote", .url = url, .headers = {{"Authorization", "Bearer root-key-for-mcp-client-test"}}});
    ASSERT_OK(client);
    EXPECT_EQ((*client)->server_name(), "strata");
    auto health = (*client)->CallTool("health", "{}");
    ASSERT_OK(health);
    EXPECT_NE(Text(*health).find("\"alive\": true"), std::string::npos) << Text(*health);
  }
  (*server)->Shutdown();
  serving.join();
}

TEST(McpClient, HttpAnswersThatAreNotJsonRpcAreErrors) {
  std::string body;
  int status = 200;
  std::string type = "application/json";
  testing::HttpTestServer fake([&](const httplib::Request&, httplib::Response& res) {
    res.status = status;
    res.set_content(body, type);
  });
  McpServerConfig config{.name = "web", .url = fake.url("/mcp"), .timeout = milliseconds(2000)};
  body = "<html>oops</html>";
  auto c = McpClient::Connect(config);
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("the answer is not JSON: <html>oops</html>"), std::string::npos)
      << c.status().ToString();
  body = R"({"jsonrpc":"2.0","id":99,"result":{}})";
  c = McpClient::Connect(config);
  EXPECT_NE(c.status().message().find("carries no response to request 1"), std::string::npos) << c.status().ToString();
  type = "text/event-stream";
  body = "event: message\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\"}\n\n";
  c = McpClient::Connect(config);
  EXPECT_NE(c.status().message().find("the event stream ended"), std::string::npos) << c.status().ToString();
  status = 500;
  body = "internal";
  c = McpClient::Connect(config);
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("initialize: HTTP 500: internal"), std::string::npos) << c.status().ToString();
}

// A small Streamable HTTP server for the client's HTTP paths: `handle` answers POST, GET and DELETE.
class FakeHttpMcp {
 public:
  using Handler = std::function<void(const httplib::Request&, httplib::Response&)>;
  explicit FakeHttpMcp(Handler handle) : port_(server_.bind_to_any_port("127.0.0.1")) {
    server_.Post(".*", handle);
    server_.Get(".*", handle);
    server_.Delete(".*", handle);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(milliseconds(1));
  }
  ~FakeHttpMcp() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_) + "/mcp"; }

 private:
  httplib::Server server_;
  int port_;
  std::thread thread_;
};

// Answers initialize (naming a new session each time) and notifications; hands tools/call to `call`.
void ServeBasics(const httplib::Request& req, httplib::Response& res, std::atomic<int>* sessions,
                 const std::function<void(const Json&, httplib::Response&)>& call) {
  Json m = Json::parse(req.body, nullptr, false);
  if (req.method != "POST" || m.is_discarded()) {
    res.status = 405;
    return;
  }
  std::string method = m.value("method", "");
  if (method == "initialize") {
    res.set_header("Mcp-Session-Id", "s" + std::to_string(++*sessions));
    res.set_content(Json{{"jsonrpc", "2.0"}, {"id", m["id"]},
                         {"result", {{"protocolVersion", "2025-11-25"}, {"capabilities", {{"tools", Json::object()}}},
                                     {"serverInfo", {{"name", "web"}, {"version", "1"}}}}}}.dump(),
                    "application/json");
  } else if (!m.contains("id")) {
    res.status = 202;
  } else {
    call(m, res);
  }
}

TEST(McpClient, ALostHttpSessionIsInitializedAgainAndTheCallRepeated) {
  std::atomic<int> sessions{0};
  std::atomic<int> calls_without_version{0};
  FakeHttpMcp server([&](const httplib::Request& req, httplib::Response& res) {
    ServeBasics(req, res, &sessions, [&](const Json& m, httplib::Response& r) {
      if (req.get_header_value("MCP-Protocol-Version") != "2025-11-25") ++calls_without_version;
      if (req.get_header_value("Mcp-Session-Id") == "s1") {  // The server restarted and forgot session s1.
        r.status = 404;
        return;
      }
      r.set_content(Json{{"jsonrpc", "2.0"}, {"id", m["id"]},
                         {"result", {{"content", {{{"type", "text"}, {"text", req.get_header_value("Mcp-Session-Id")}}}}}}}
                        .dump(),
                    "application/json");
    });
  });
  auto client = McpClient::Connect({.name = "web", .url = server.url()});
  ASSERT_OK(client);
  auto out = (*client)->CallTool("anything", "{}");
  ASSERT_OK(out);
  EXPECT_EQ(Text(*out), "s2");
  EXPECT_EQ(sessions.load(), 2);
  EXPECT_EQ(calls_without_version.load(), 0);
}

TEST(McpClient, AnEndlessEventIsCutAtTheMessageLimit) {
  std::atomic<int> sessions{0};
  FakeHttpMcp server([&](const httplib::Request& req, httplib::Response& res) {
    ServeBasics(req, res, &sessions, [&](const Json&, httplib::Response& r) {
      r.set_chunked_content_provider("text/event-stream", [](size_t offset, httplib::DataSink& sink) {
        if (offset > (8u << 20)) {
          sink.done();
          return true;
        }
        std::string line = "data: " + std::string(4000, 'x') + "\n";  // Never a blank line: one endless event.
        return sink.write(line.data(), line.size());
      });
    });
  });
  auto client = McpClient::Connect({.name = "web", .url = server.url()}, {.max_message_bytes = 1 << 20});
  ASSERT_OK(client);
  auto out = (*client)->CallTool("anything", "{}");
  EXPECT_EQ(out.status().code(), StatusCode::kResourceExhausted) << out.status().ToString();
  EXPECT_NE(out.status().message().find("an event exceeds 1048576 bytes"), std::string::npos);
}

TEST(McpClient, AnEventStreamEndedEarlyIsResumedFromTheLastEvent) {
  std::atomic<int> sessions{0};
  std::string resumed_from;
  std::mutex mu;
  FakeHttpMcp server([&](const httplib::Request& req, httplib::Response& res) {
    if (req.method == "GET") {  // The resumption: the answer, after the event the client names.
      std::lock_guard lock(mu);
      resumed_from = req.get_header_value("Last-Event-ID");
      res.set_content("id: e2\ndata: {\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{\"content\":[{\"type\":\"text\",\"text\":\"late\"}]}}\n\n",
                      "text/event-stream");
      return;
    }
    ServeBasics(req, res, &sessions, [&](const Json&, httplib::Response& r) {
      // A priming event with an id and a retry delay, then the server closes the stream (2025-11-25).
      r.set_content("id: e1\nretry: 20\ndata: \n\n", "text/event-stream");
    });
  });
  auto client = McpClient::Connect({.name = "web", .url = server.url()});
  ASSERT_OK(client);
  auto out = (*client)->CallTool("slow", "{}");
  ASSERT_OK(out);
  EXPECT_EQ(Text(*out), "late");
  std::lock_guard lock(mu);
  EXPECT_EQ(resumed_from, "e1");
}

TEST(McpServersConfig, ParsesTheMcpServersObject) {
  auto servers = ParseMcpServers(R"({"mcpServers": {
      "files": {"command": "npx", "args": ["-y", "srv"], "env": {"K": "V"}, "cwd": "/tmp", "timeout": 2.5},
      "docs": {"url": "https://example.com/mcp", "headers": {"Authorization": "Bearer x"}, "transport": "http"}}})",
                                 "mcp.json");
  ASSERT_OK(servers);
  ASSERT_EQ(servers->size(), 2u);
  const McpServerConfig& docs = (*servers)[0].name == "docs" ? (*servers)[0] : (*servers)[1];
  const McpServerConfig& files = (*servers)[0].name == "files" ? (*servers)[0] : (*servers)[1];
  EXPECT_EQ(files.command, "npx");
  EXPECT_EQ(files.args, (std::vector<std::string>{"-y", "srv"}));
  EXPECT_EQ(files.env, (std::vector<std::pair<std::string, std::string>>{{"K", "V"}}));
  EXPECT_EQ(files.cwd, "/tmp");
  EXPECT_EQ(files.timeout, milliseconds(2500));
  EXPECT_EQ(docs.url, "https://example.com/mcp");
  EXPECT_EQ(docs.headers, (llm::HttpHeaders{{"Authorization", "Bearer x"}}));
  // The inner object alone is accepted too.
  EXPECT_OK(ParseMcpServers(R"({"a": {"command": "x"}})", "flag"));
}

TEST(McpServersConfig, ErrorsNameTheServerAndTheMember) {
  auto error = [](const char* text) { return ParseMcpServers(text, "mcp.json").status().message(); };
  EXPECT_EQ(error("{"), "mcp.json: MCP configuration is not valid JSON");
  EXPECT_EQ(error(R"({"mcpServers": []})"), "mcp.json: \"mcpServers\" must be an object, not an array");
  EXPECT_EQ(error(R"({"mcpServers": {"a": {"command": "x", "args": ["ok", 3]}}})"),
            "mcp.json: mcpServers.a.args[1] must be a string, not an integer");
  EXPECT_EQ(error(R"({"mcpServers": {"a": {"command": "x", "url": "http://h"}}})"),
            "mcp.json: mcpServers.a needs exactly one of \"command\" (a program to start) and \"url\"");
  EXPECT_EQ(error(R"({"mcpServers": {"a": {}}})"),
            "mcp.json: mcpServers.a needs exactly one of \"command\" (a program to start) and \"url\"");
  EXPECT_NE(error(R"({"mcpServers": {"a": {"url": "http://h", "transport": "sse"}}})").find("\"sse\" is not supported"),
            std::string::npos);
  EXPECT_EQ(error(R"({"mcpServers": {"a": {"url": "ftp://h"}}})"),
            "mcp.json: mcpServers.a.url must be an http:// or https:// URL, not \"ftp://h\"");
  EXPECT_EQ(error(R"({"mcpServers": {"a": {"command": "x", "env": {"K": 1}}}})"),
            "mcp.json: mcpServers.a.env.K must be a string, not an integer");
  EXPECT_EQ(error(R"({"mcpServers": {"a": {"command": "x", "timeout": -1}}})"),
            "mcp.json: mcpServers.a.timeout must be a number of seconds in [0.001, 86400]");
  EXPECT_NE(error(R"({"mcpServers": {"a": {"url": "http://h", "type": "sse"}}})").find("mcpServers.a.type \"sse\" is not supported"),
            std::string::npos);
}

// ---- The built-in agent tools' file reading ----

class AgentFileToolsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto engine = Engine::Open({.data_dir = dir_.File("data")});
    ASSERT_OK(engine);
    engine_ = std::move(*engine);
    ASSERT_OK(AddAgentTools(engine_.get(), {.memory = false}, &toolset_));
  }
  ToolResult Read(const std::string& file, const std::string& extra = "") {
    Canceller never;
    return toolset_.Handle({.id = "c", .function = {.name = "read_file",
                                                      .arguments = R"({"path": ")" + file + "\"" + extra + "}"}},
                           never);
  }
  static std::string TextOf(const ToolResult& r) { return std::get<TextPart>(r.message.content[0]).text; }

  testing::TempDir dir_;
  std::unique_ptr<Engine> engine_;
  Toolset toolset_;
};

TEST_F(AgentFileToolsTest, LinesAreNumberedWhateverTheirEndings) {
  testing::WriteFileOrDie(dir_.File("crlf.txt"), "one\r\ntwo\r\nthree");  // CRLF, no final newline.
  ToolResult r = Read(dir_.File("crlf.txt"));
  ASSERT_FALSE(r.is_error) << TextOf(r);
  EXPECT_EQ(TextOf(r).substr(0, TextOf(r).find("(")), "     1\tone\n     2\ttwo\n     3\tthree\n");
  EXPECT_NE(TextOf(r).find("End of file reached."), std::string::npos);
  r = Read(dir_.File("crlf.txt"), R"(, "line_offset": 2, "n_lines": 1)");
  EXPECT_EQ(TextOf(r).substr(0, TextOf(r).find("(")), "     2\ttwo\n");
  EXPECT_NE(TextOf(r).find("continue with line_offset 3"), std::string::npos);
  r = Read(dir_.File("crlf.txt"), R"(, "line_offset": 9)");
  EXPECT_EQ(TextOf(r), "(The file has 3 lines; none from line 9.)");
  testing::WriteFileOrDie(dir_.File("empty.txt"), "");
  EXPECT_EQ(TextOf(Read(dir_.File("empty.txt"))), "(The file is empty.)");
}

TEST_F(AgentFileToolsTest, AnEndlessLineCostsABlockNotItsSize) {
  testing::WriteFileOrDie(dir_.File("long.txt"), std::string(8 << 20, 'x') + "\nshort\n");
  ToolResult r = Read(dir_.File("long.txt"));
  ASSERT_FALSE(r.is_error) << TextOf(r);
  EXPECT_NE(TextOf(r).find("     1\t" + std::string(2000, 'x') + " ...\n     2\tshort\n"), std::string::npos);
  EXPECT_NE(TextOf(r).find("were cut"), std::string::npos);
}

TEST_F(AgentFileToolsTest, OnlyTheLinesAskedForAreJudged) {
  testing::WriteFileOrDie(dir_.File("mixed.txt"), "fine\nalso fine\nbad \xff byte\n");
  ToolResult r = Read(dir_.File("mixed.txt"), R"(, "n_lines": 2)");
  EXPECT_FALSE(r.is_error) << TextOf(r);
  r = Read(dir_.File("mixed.txt"));
  EXPECT_TRUE(r.is_error);
  EXPECT_NE(TextOf(r).find("is not UTF-8 text (an invalid byte on line 3)"), std::string::npos);
  testing::WriteFileOrDie(dir_.File("nul.bin"), std::string("a\0b", 3));
  EXPECT_NE(TextOf(Read(dir_.File("nul.bin"))).find("not a text file"), std::string::npos);
  EXPECT_NE(TextOf(Read(dir_.File("missing.txt"))).find("does not exist"), std::string::npos);
  EXPECT_NE(TextOf(Read(dir_.path())).find("is a directory"), std::string::npos);
}

}  // namespace
}  // namespace strata::tools
