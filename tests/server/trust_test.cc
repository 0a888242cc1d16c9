// Issue 28, at the boundary: what an attacker with a user key of the account can learn or take through
// `strata serve`. A session id reused after a delete inherits nothing; another user's session answers
// exactly as a missing one; no response names a path on the server; a POST without a length is answered
// at once.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <regex>
#include <set>
#include <thread>

#include "server/server_fixture.h"
#include "session/pipeline_stage.h"
#include "strata/engine/agent_tools.h"
#include "strata/engine/engine.h"

namespace strata::server {
namespace {

// The body of an error with its request id blanked: two answers are "the same" when these are equal.
std::string WithoutRequestId(const Reply& r) {
  Json body = r.body;
  if (body.is_object() && body.contains("error") && body["error"].is_object()) body["error"].erase("request_id");
  return std::to_string(r.status) + " " + body.dump();
}

// A JSON-RPC tools/call to /mcp.
std::string McpCall(const std::string& tool, const Json& arguments) {
  return Json{{"jsonrpc", "2.0"}, {"id", 7}, {"method", "tools/call"}, {"params", {{"name", tool}, {"arguments", arguments}}}}
      .dump();
}

class TrustTest : public ServerTest {
 protected:
  // Writes each {uri, content} with the root key.
  void WriteNotes(const std::vector<std::pair<std::string, std::string>>& notes) {
    for (const auto& [uri, text] : notes) {
      ASSERT_EQ(Call("POST", "/api/v1/fs/write", kRootKey, Json{{"uri", uri}, {"content", text}}.dump()).status, 200)
          << uri;
    }
  }

  // Session `id` of `user` committed twice before the server starts: the first commit's phase 2 ran (a
  // memory of the user and one of the shared agent scope), the second's failed for good (a dead job whose
  // error the model gave).
  void CommitTwiceOffline(const std::string& user, const std::string& id) {
    Stop();
    testing::WriteFileOrDie(dir_.File("script.json"), R"({"replies": [
        {"text": "About tea."},
        {"text": "{\"memories\": [{\"category\": \"preferences\", \"key\": \"drink\", \"content\": \"Prefers green tea.\"}, {\"category\": \"cases\", \"key\": \"brew\", \"content\": \"Brewing tea for a user: ask about sugar first.\"}]}"},
        {"error": {"kind": "http_status", "status": 401, "message": "the key was revoked"}}]})");
    {
      auto engine = Engine::Open({.data_dir = dir_.File("data"),
                                  .provider = {.provider = "scripted", .script = dir_.File("script.json")}});
      ASSERT_OK(engine);
      ASSERT_OK((*engine)->CreateSession(user, "barista", id));
      ASSERT_OK((*engine)->AddMessages(id, std::vector{Message::User("I like green tea, no sugar.")}));
      auto first = (*engine)->Commit(id, {.wait = true});
      ASSERT_OK(first);
      ASSERT_OK(first->phase2);
      ASSERT_OK((*engine)->AddMessages(id, std::vector{Message::User("And oolong on Sundays.")}));
      auto second = (*engine)->Commit(id, {.wait = true});
      ASSERT_OK(second);
      ASSERT_FALSE(second->phase2.ok());
    }
    server_options_.run_worker = false;
    Start();
  }
};

// What failed for good could be queued again over HTTP one session at a time only: the in-process and CLI
// retry of everything (the dead jobs of no session among it) had no route.
TEST_F(TrustTest, TheRootKeyRetriesEverythingThatFailedForGood) {
  CommitTwiceOffline("alice", "S");
  std::string alice = Issue("alice");
  Reply refused = Call("POST", "/api/v1/admin/retry", alice, "{}");
  EXPECT_EQ(refused.status, 403) << refused.raw;
  ASSERT_EQ(Call("GET", "/api/v1/tasks?state=dead", kRootKey).body["result"].size(), 1u);
  Reply retried = Call("POST", "/api/v1/admin/retry", kRootKey, "{}");
  ASSERT_EQ(retried.status, 200) << retried.raw;
  EXPECT_EQ(retried.body["result"]["requeued"], 1) << retried.raw;
  EXPECT_EQ(Call("GET", "/api/v1/tasks?state=dead", kRootKey).body["result"].size(), 0u);
  EXPECT_EQ(Call("GET", "/api/v1/tasks?state=pending", alice).body["result"].size(), 1u);
}

TEST_F(TrustTest, AReusedSessionIdInheritsNothingOfTheDeletedSession) {
  CommitTwiceOffline("alice", "S");
  std::string alice = Issue("alice");
  std::string bob = Issue("bob");
  Reply before = Call("GET", "/api/v1/tasks?session=S", alice);
  ASSERT_EQ(before.status, 200) << before.raw;
  ASSERT_EQ(before.body["result"].size(), 2u) << before.raw;
  std::vector<int64_t> old_tasks;
  for (const Json& t : before.body["result"]) old_tasks.push_back(t["id"].get<int64_t>());
  Reply dead = Call("GET", "/api/v1/tasks?state=dead", alice);
  ASSERT_EQ(dead.body["result"].size(), 1u) << dead.raw;

  ASSERT_EQ(Call("DELETE", "/api/v1/sessions/S?force=true", alice).status, 200);
  // Deleting retired the session's jobs: nobody lists them any more, not even the root key.
  Reply all = Call("GET", "/api/v1/tasks", kRootKey);
  ASSERT_EQ(all.status, 200);
  EXPECT_EQ(all.body["result"].size(), 0u) << all.raw;

  ASSERT_EQ(Call("POST", "/api/v1/sessions", bob, R"({"id": "S"})").status, 200);
  Reply tasks = Call("GET", "/api/v1/tasks", bob);
  EXPECT_EQ(tasks.body["result"].size(), 0u) << tasks.raw;
  EXPECT_EQ(Call("GET", "/api/v1/tasks?session=S", bob).body["result"].size(), 0u);
  for (int64_t id : old_tasks) {
    EXPECT_EQ(Call("GET", "/api/v1/tasks/" + std::to_string(id), bob).status, 404);
    EXPECT_EQ(Call("GET", "/api/v1/tasks/" + std::to_string(id), kRootKey).status, 404);
  }
  Reply status = Call("GET", "/api/v1/sessions/S/status", bob);
  ASSERT_EQ(status.status, 200) << status.raw;
  EXPECT_EQ(status.body["result"]["jobs"].size(), 0u) << status.raw;
  EXPECT_EQ(status.body["result"]["archives"].size(), 0u) << status.raw;
  Reply retried = Call("POST", "/api/v1/sessions/S/retry", bob, "{}");
  ASSERT_EQ(retried.status, 200) << retried.raw;
  EXPECT_EQ(retried.body["result"]["requeued"], 0);
  EXPECT_EQ(retried.raw.find("revoked"), std::string::npos);
  // The shared memory alice's commit made: bob sees the change, never as made by "his" session S.
  Reply changes = Call("GET", "/api/v1/memories/changes?under=" + Q("strata://agent/barista"), bob);
  ASSERT_EQ(changes.status, 200) << changes.raw;
  ASSERT_EQ(changes.body["result"].size(), 1u) << changes.raw;
  EXPECT_EQ(changes.body["result"][0]["source"], "") << changes.raw;
  EXPECT_EQ(changes.body["result"][0]["session"], "") << changes.raw;
  // The audit trail keeps what happened, linked to no live session.
  Reply history = Call("GET", "/api/v1/memories/changes?under=" + Q("strata://user/alice"), kRootKey);
  ASSERT_EQ(history.body["result"].size(), 1u) << history.raw;
  EXPECT_EQ(history.body["result"][0]["source"].get<std::string>().rfind("S@", 0), 0u) << history.raw;
  EXPECT_EQ(history.body["result"][0]["session"], "") << history.raw;
  // Nothing of the first session's own scope either.
  EXPECT_EQ(Call("GET", "/api/v1/fs/ls?uri=" + Q("strata://session/S/history"), bob).status, 404);
}

// A session deleted while its phase 2 runs: the worker's job is gone with it, so it can neither finish it
// nor leave a dead job behind (whose error would name the server's files). Then a session is made again
// under its id (`by_fork`: another user's session forked onto it), and starts clean.
void DeleteDuringPhaseTwoThenMakeAgain(bool by_fork) {
  testing::TempDir dir;
  std::unique_ptr<Engine> engine;
  std::atomic<int> calls{0};
  llm::ScriptedProvider model("scripted", [&](const llm::ScriptedProvider::Request& req) -> llm::ScriptedReply {
    ++calls;
    std::string prompt = req.history.empty() ? "" : req.history[0].ExtractText();
    if (prompt.find("long-term memory") != std::string::npos) {
      // Extraction: the session is deleted now, while its phase 2 is on the way.
      EXPECT_OK(engine->DeleteSession("doomed", /*force=*/true));
      return testing::TextReply(R"({"memories": [{"category": "events", "key": "trip", "content": "Went to Oslo."}]})");
    }
    return testing::TextReply("A trip to Oslo.");
  });
  auto opened = Engine::Open({.data_dir = dir.File("data"), .model = &model});
  ASSERT_OK(opened);
  engine = std::move(*opened);
  ASSERT_OK(engine->CreateSession("alice", "", "doomed"));
  ASSERT_OK(engine->AddMessages("doomed", std::vector{Message::User("I went to Oslo.")}));
  ASSERT_OK(engine->Commit("doomed", {}));
  auto work = engine->Work();
  ASSERT_OK(work);
  EXPECT_EQ(work->completed, 0);
  EXPECT_GE(calls.load(), 2);
  auto jobs = (*engine->queue())->List(std::nullopt);
  ASSERT_OK(jobs);
  EXPECT_TRUE(jobs->empty()) << jobs->size() << " job(s) left, the first: " << (*jobs)[0].last_error;
  // What a delete interrupted after the session was gone leaves in its scope (staged: the delete above
  // removed it).
  ASSERT_OK(engine->Write("strata://session/doomed/history/archive_001", "alice's transcript"));
  // A new session of that id starts clean: made new, or forked (the fork inherited the scope, and the
  // other user's transcript in it).
  if (by_fork) {
    ASSERT_OK(engine->CreateSession("bob", "", "bobs"));
    ASSERT_OK(engine->AddMessages("bobs", std::vector{Message::User("Hello.")}));
    ASSERT_OK(engine->Fork("bobs", "doomed", std::nullopt));
  } else {
    ASSERT_OK(engine->CreateSession("bob", "", "doomed"));
  }
  auto status = engine->GetSessionStatus("doomed");
  ASSERT_OK(status);
  EXPECT_TRUE(status->jobs.empty());
  EXPECT_TRUE(status->archives.empty());
  EXPECT_EQ(engine->Stat("strata://session/doomed/history/archive_001").status().code(), StatusCode::kNotFound);
}

TEST(SessionDeletedDuringPhaseTwo, LeavesNoJobAndNoErrorAndAMadeAgainSessionStartsClean) {
  DeleteDuringPhaseTwoThenMakeAgain(/*by_fork=*/false);
}

TEST(SessionDeletedDuringPhaseTwo, ASessionForkedOntoItsIdStartsClean) {
  DeleteDuringPhaseTwoThenMakeAgain(/*by_fork=*/true);
}

TEST_F(TrustTest, AnotherUsersSessionAnswersExactlyAsAMissingOne) {
  std::string alice = Issue("alice");
  std::string bob = Issue("bob");
  ASSERT_EQ(Call("POST", "/api/v1/sessions", alice, R"({"id": "mine"})").status, 200);
  ASSERT_EQ(Call("POST", "/api/v1/sessions/mine/messages", alice, R"({"role": "user", "content": "hello"})").status, 200);
  int compared = 0;
  auto same = [&](const std::string& method, const std::string& path_of, const std::string& body_of) {
    // Arguments are read before the session is looked for (as in process): each route gets valid ones.
    auto fill = [](std::string text, const std::string& id) {
      for (size_t at; (at = text.find("{id}")) != std::string::npos;) text.replace(at, 4, id);
      for (size_t at; (at = text.find("{archive}")) != std::string::npos;) text.replace(at, 9, "1");
      return text;
    };
    Reply foreign = Call(method, fill(path_of, "mine"), bob, fill(body_of, "mine"));
    Reply missing = Call(method, fill(path_of, "nothere"), bob, fill(body_of, "nothere"));
    std::string a = WithoutRequestId(foreign), b = WithoutRequestId(missing);
    // The missing session's id appears where the foreign one's did: compare with the ids swapped back.
    for (size_t at; (at = b.find("nothere")) != std::string::npos;) b.replace(at, 7, "mine");
    EXPECT_EQ(a, b) << method << " " << path_of;
    bool mcp = path_of == "/mcp";
    EXPECT_TRUE(mcp ? foreign.raw.find("no session mine") != std::string::npos : foreign.status == 404)
        << method << " " << path_of << ": " << foreign.raw;
    EXPECT_EQ(foreign.raw.find("hello"), std::string::npos);
    ++compared;
  };
  // Every route under /api/v1/sessions/{id}, as the server lists them.
  for (const auto& [method, path, takes] : server_->Routes()) {
    if (path.rfind("/api/v1/sessions/{id}", 0) != 0) continue;
    bool query = method == "GET" && takes && std::ranges::count(*takes, "query") > 0;
    same(method, path + (query ? "?query=x" : ""),
         OnlyTaken(method, path, R"({"role": "user", "content": "x", "checkpoint": 0, "prompt": "p", "id": "fork-{id}", "tokens": 5})"));
  }
  EXPECT_GE(compared, 14);
  same("GET", "/api/v1/tasks?session={id}", "");
  same("POST", "/api/v1/search/find", R"({"query": "hello", "session": "{id}"})");
  same("POST", "/mcp", McpCall("search", {{"query", "hello"}, {"session", "{id}"}}));
  same("POST", "/mcp", McpCall("get_context", {{"session", "{id}"}}));
  same("POST", "/mcp", McpCall("commit_session", {{"session", "{id}"}}));
}

// A session route checks the caller's access, then acts: another request may delete the session in between
// and another user make one under its id. The route acts on the incarnation it checked, so the newcomer's
// session is not read, written, committed, forked or deleted by the first caller (it was, by id).
TEST_F(TrustTest, ASessionMadeAgainBetweenTheAccessCheckAndTheCallIsNotActedOn) {
  Stop();
  std::atomic<bool> armed{false};
  std::string alice, bob;
  engine_options_.after_session_check = [&](std::string_view sid) {
    if (sid != "S" || !armed.exchange(false)) return;
    EXPECT_EQ(Call("DELETE", "/api/v1/sessions/S?force=true", alice).status, 200);
    EXPECT_EQ(Call("POST", "/api/v1/sessions", bob, R"({"id": "S"})").status, 200);
    EXPECT_EQ(Call("POST", "/api/v1/sessions/S/messages", bob, R"({"role": "user", "content": "bob's secret"})").status,
              200);
  };
  Start();
  alice = Issue("alice");
  bob = Issue("bob");
  int routes = 0;
  for (const auto& [method, path, takes] : server_->Routes()) {
    if (path.rfind("/api/v1/sessions/{id}", 0) != 0) continue;
    ASSERT_EQ(Call("POST", "/api/v1/sessions", alice, R"({"id": "S"})").status, 200) << path;
    ASSERT_EQ(Call("POST", "/api/v1/sessions/S/messages", alice, R"({"role": "user", "content": "alice's note"})").status,
              200);
    std::string url = path;
    url.replace(url.find("{id}"), 4, "S");
    if (size_t at = url.find("{archive}"); at != std::string::npos) url.replace(at, 9, "1");
    if (method == "GET" && takes && std::ranges::count(*takes, "query") > 0) url += "?query=x";
    armed = true;
    Reply r = Call(method, url, alice,
                   OnlyTaken(method, path, R"({"role": "user", "content": "x", "checkpoint": 0, "prompt": "p", "id": "fork-S", "tokens": 5})"));
    EXPECT_FALSE(armed) << method << " " << path << ": the route did not check the session";
    EXPECT_EQ(r.status, 404) << method << " " << path << ": " << r.raw;
    EXPECT_EQ(r.raw.find("secret"), std::string::npos) << method << " " << path << ": " << r.raw;
    // Bob's session is as he left it, and no fork of it was made for alice.
    Reply his = Call("GET", "/api/v1/sessions/S/messages", bob);
    ASSERT_EQ(his.status, 200) << method << " " << path << ": " << his.raw;
    ASSERT_EQ(his.body["result"].size(), 1u) << method << " " << path << ": " << his.raw;
    EXPECT_NE(his.raw.find("bob's secret"), std::string::npos) << his.raw;
    EXPECT_EQ(Call("GET", "/api/v1/sessions/fork-S", kRootKey).status, 404) << method << " " << path;
    ASSERT_EQ(Call("DELETE", "/api/v1/sessions/S?force=true", kRootKey).status, 200);
    ++routes;
  }
  EXPECT_GE(routes, 14);
  // The other front ends that act on a session: find with a session, the session's tasks, and MCP's tools.
  // Each answers as for a missing session (or with nothing of bob's), and bob's session is untouched.
  struct Other {
    std::string path, body;
  };
  const std::vector<Other> others = {
      {"/api/v1/search/find", R"({"query": "secret", "session": "S"})"},
      {"/api/v1/tasks?session=S", ""},
      {"/mcp", McpCall("search", {{"query", "secret"}, {"session", "S"}})},
      {"/mcp", McpCall("get_context", {{"session", "S"}})},
      {"/mcp", McpCall("commit_session", {{"session", "S"}})},
  };
  for (const Other& other : others) {
    ASSERT_EQ(Call("POST", "/api/v1/sessions", alice, R"({"id": "S"})").status, 200) << other.body;
    ASSERT_EQ(Call("POST", "/api/v1/sessions/S/messages", alice, R"({"role": "user", "content": "alice's note"})").status,
              200);
    armed = true;
    Reply r = Call(other.body.empty() ? "GET" : "POST", other.path, alice, other.body);
    EXPECT_FALSE(armed) << other.path << " " << other.body << ": it did not check the session";
    EXPECT_EQ(r.raw.find("secret"), std::string::npos) << other.body << ": " << r.raw;
    if (other.path == "/mcp") {
      EXPECT_EQ(r.status, 200) << r.raw;
      EXPECT_TRUE(r.body["result"].value("isError", false)) << other.body << ": " << r.raw;
      EXPECT_NE(r.raw.find("no session S"), std::string::npos) << other.body << ": " << r.raw;
    } else if (other.body.empty()) {
      EXPECT_EQ(r.status, 200) << r.raw;  // Alice's session's tasks: none (bob's commits are his).
      EXPECT_EQ(r.body["result"], Json::array()) << r.raw;
    } else {
      EXPECT_EQ(r.status, 404) << other.body << ": " << r.raw;
    }
    Reply his = Call("GET", "/api/v1/sessions/S", bob);
    ASSERT_EQ(his.status, 200) << other.body << ": " << his.raw;
    EXPECT_EQ(his.body["result"]["stats"]["messages"], 1) << other.body << ": " << his.raw;
    EXPECT_EQ(his.body["result"]["stats"]["commits"], 0) << other.body << ": " << his.raw;
    ASSERT_EQ(Call("DELETE", "/api/v1/sessions/S?force=true", kRootKey).status, 200);
  }
  Stop();  // The hook refers to this test's locals.
}

// Every route and MCP tool, fed bad ids, URIs and bodies by a user key and by the root key: no answer
// names where the server keeps its data (nor the temporary directory it imports through).
TEST_F(TrustTest, NoResponseNamesAPathOnTheServer) {
  std::string alice = Issue("alice");
  ASSERT_EQ(Call("POST", "/api/v1/sessions", alice, R"({"id": "mine"})").status, 200);
  // Damage one session on disk, so that reading it fails with the file's own error.
  ASSERT_EQ(Call("POST", "/api/v1/sessions", kRootKey, R"({"id": "broken", "user": "alice"})").status, 200);
  testing::WriteFileOrDie(dir_.File("data/sessions/broken/session.json"), R"({"id": "broken", "user": 7})");
  const std::string data = dir_.File("data");
  const std::string root = dir_.path();
  std::vector<std::string> ids = {"mine", "broken", "nothere", "a@b", std::string(200, 'x')};
  std::vector<std::string> uris = {"strata://user/alice/x", "strata://session/broken", "strata://user/../etc",
                                   "/etc/passwd", "strata://resources/" + std::string(5000, 'a'),
                                   "strata://user/bob/secret"};
  std::vector<std::string> bodies = {"", "{", "[]", "null", R"({"uri": 5})"};
  for (const std::string& uri : uris) {
    bodies.push_back(Json{{"uri", uri}, {"under", uri}, {"from", uri}, {"to", uri}, {"scope", uri}, {"content", "x"},
                          {"query", "x"}, {"pattern", "*"}, {"text", "x"}, {"agent", "a"}, {"skill_md", "x"},
                          {"id", "t"}, {"role", "user"}}
                         .dump());
  }
  // An import whose files are refused: its errors and "skipped" entries name paths within the tree only.
  bodies.push_back(R"({"uri": "strata://resources/imp", "files": [{"path": "a/.meta.json", "content": "[1]"},
                       {"path": "a/b.md", "content": "\u00ff"}, {"path": "../up", "content": "x"}]})");
  bodies.push_back(R"({"uri": "strata://resources/imp2", "files": [{"path": "a/.meta.json", "content": "[1]"},
                       {"path": "a/.abstract.md", "content": "ok"}]})");
  int asked = 0;
  auto check = [&](const std::string& method, const std::string& path, const std::string& key, const std::string& body) {
    Reply r = Call(method, path, key, body);
    ++asked;
    EXPECT_EQ(r.raw.find(root), std::string::npos) << method << " " << path << " " << body.substr(0, 200) << " -> " << r.raw;
    EXPECT_EQ(r.raw.find("/tmp/"), std::string::npos) << method << " " << path << " -> " << r.raw;
  };
  for (const auto& [method, templ, takes] : server_->Routes()) {
    if (templ == "/api/v1/events" || templ == "/api/v1/tasks/{id}/events" || templ == "/v1/chat/completions" ||
        templ == "/v1/messages") {
      continue;  // Streams, and the model endpoints (they need an upstream): covered by their own tests.
    }
    for (const std::string& id : ids) {
      std::string path = templ;
      if (size_t at = path.find("{id}"); at != std::string::npos) path.replace(at, 4, id);
      if (size_t at = path.find("{name}"); at != std::string::npos) path.replace(at, 6, id);
      for (const std::string& key : {alice, std::string(kRootKey)}) {
        if (method == "GET") {
          for (const std::string& uri : uris) {
            std::string query;
            for (const auto& [name, value] : {std::pair{"uri", uri}, {"under", uri}, {"session", id}}) {
              if (!takes || std::ranges::count(*takes, name) > 0) query += (query.empty() ? "?" : "&") + (name + ("=" + Q(value)));
            }
            check(method, path + query, key, "");
          }
        } else if (method == "POST" || method == "DELETE") {
          if (templ == "/api/v1/admin/keys" || path.find("/admin/keys/") != std::string::npos) continue;
          // Each body as sent (an unknown member is refused first) and with only the members the route takes.
          for (const std::string& body : bodies) {
            check(method, path, key, body);
            if (std::string only = OnlyTaken(method, templ, body); only != body) check(method, path, key, only);
          }
        }
      }
      if (templ.find("{id}") == std::string::npos && templ.find("{name}") == std::string::npos) break;
    }
  }
  // Each tool with the arguments it takes (MCP refuses any other before the tool runs).
  Reply listed = Call("POST", "/mcp", alice, R"({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})");
  std::map<std::string, std::vector<std::string>> arguments;
  for (const Json& tool : listed.body["result"]["tools"]) {
    for (const auto& [name, schema] : tool["inputSchema"]["properties"].items()) arguments[tool["name"]].push_back(name);
  }
  for (const std::string tool : {"find", "search", "read", "list", "tree", "grep", "glob", "write", "edit", "forget",
                                 "remember", "get_context", "commit_session", "count_tokens"}) {
    ASSERT_TRUE(arguments.count(tool)) << tool << " is not listed: " << listed.raw;
    for (const std::string& uri : uris) {
      for (const std::string& id : ids) {
        const Json every = {{"uri", uri},      {"under", uri},      {"session", id}, {"query", "x"}, {"pattern", "*"},
                            {"content", "x"}, {"old_text", "a"}, {"new_text", "b"}, {"text", "x"}};
        Json args = Json::object();
        for (const auto& [name, value] : every.items()) {
          if (std::ranges::count(arguments[tool], name) > 0) args[name] = value;
        }
        check("POST", "/mcp", alice, McpCall(tool, args));
      }
    }
  }
  EXPECT_GT(asked, 1500);
}

// Rendering a prompt names templates, never the directories they live in: an unknown id lists the known
// ones, a broken file is named by its file name alone.
TEST_F(TrustTest, RenderingAPromptNamesNoDirectory) {
  Stop();
  const std::string prompts = dir_.File("my-prompts");
  std::filesystem::create_directories(prompts);
  testing::WriteFileOrDie(prompts + "/broken.yaml", "metadata: [unclosed\n");
  engine_options_.prompt_dirs = {prompts};
  Start();
  // The directories the server's engine searches: the same options on a data directory of its own.
  EngineOptions probe_options = engine_options_;
  probe_options.data_dir = dir_.File("probe");
  auto probe = Engine::Open(probe_options);
  ASSERT_OK(probe);
  const std::vector<std::string> search_path = (*probe)->PromptSearchPath();
  ASSERT_GE(search_path.size(), 2u);
  std::string alice = Issue("alice");
  for (const std::string id : {"nothere", "broken", "summarize", "../../etc/passwd"}) {
    Reply r = Call("POST", "/api/v1/prompts/render", alice, Json{{"id", id}, {"variables", Json::object()}}.dump());
    EXPECT_EQ(r.raw.find(prompts), std::string::npos) << id << " -> " << r.raw;
    EXPECT_EQ(r.raw.find(dir_.path()), std::string::npos) << id << " -> " << r.raw;
    for (const std::string& dir : search_path) {
      EXPECT_EQ(r.raw.find(dir), std::string::npos) << id << " names " << dir << ": " << r.raw;
    }
  }
  Reply unknown = Call("POST", "/api/v1/prompts/render", alice, R"({"id": "nothere"})");
  EXPECT_EQ(unknown.status, 404) << unknown.raw;
  EXPECT_NE(unknown.raw.find("known: "), std::string::npos) << unknown.raw;
  EXPECT_NE(unknown.raw.find("summarize"), std::string::npos) << unknown.raw;
}

// Every answer carries a request id, the 404 of a route that does not exist included.
TEST_F(TrustTest, AnUnknownRouteAnswersWithARequestId) {
  Reply r = Call("GET", "/api/v1/nothing-here", kRootKey);
  EXPECT_EQ(r.status, 404);
  ASSERT_TRUE(r.body.contains("error")) << r.raw;
  std::string id = r.body["error"].value("request_id", "");
  EXPECT_FALSE(id.empty()) << r.raw;
  EXPECT_EQ(id, r.request_id);
  EXPECT_NE(r.raw.find("not_found"), std::string::npos) << r.raw;
}

// A task id is a whole positive number: "1abc" is not task 1.
TEST_F(TrustTest, ATaskIdWithTrailingCharactersIsRefused) {
  for (const std::string id : {"1abc", "0", "-1", "1.5", "99999999999999999999999"}) {
    Reply r = Call("GET", "/api/v1/tasks/" + id, kRootKey);
    EXPECT_EQ(r.status, 400) << id << " -> " << r.raw;
    EXPECT_NE(r.raw.find("not a positive integer"), std::string::npos) << r.raw;
  }
}

// X-Strata-Account is the root key's to choose; a user key naming another account is refused, not answered
// quietly from its own account.
TEST_F(TrustTest, AUserKeyCannotChooseAnotherAccount) {
  std::string alice = Issue("alice");
  Reply r = Call("GET", "/api/v1/fs/ls", alice, "", {{"X-Strata-Account", "other"}});
  EXPECT_EQ(r.status, 403) << r.raw;
  EXPECT_NE(r.raw.find("X-Strata-Account"), std::string::npos) << r.raw;
  Reply own = Call("GET", "/api/v1/fs/ls", alice, "", {{"X-Strata-Account", "default"}});
  Reply plain = Call("GET", "/api/v1/fs/ls", alice);
  EXPECT_NE(own.status, 403) << own.raw;
  EXPECT_EQ(WithoutRequestId(own), WithoutRequestId(plain));
}

// RFC 9112 §6.3: a request with neither Content-Length nor Transfer-Encoding has no body. `curl -X POST URL`
// sends one; it is answered at once, not after the server's read timeout (a minute here).
TEST_F(TrustTest, APostWithoutALengthHasNoBodyAndIsAnsweredAtOnce) {
  Stop();
  server_options_.http.read_timeout = std::chrono::seconds(60);
  Start();
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  timeval wait{10, 0};  // Far below the server's read timeout.
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &wait, sizeof wait);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port_));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  std::string request = "POST /api/v1/tokens/count HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " +
                        std::string(kRootKey) + "\r\n\r\n";
  ASSERT_EQ(::send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  std::string answer;
  char buf[4096];
  while (answer.find("\r\n\r\n") == std::string::npos) {
    ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    answer.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  ASSERT_FALSE(answer.empty()) << "no answer within 10 s: the server waited for a body that was never coming";
  // Read as an empty body: the required text is missing.
  EXPECT_EQ(answer.rfind("HTTP/1.1 400", 0), 0u) << answer;
}

}  // namespace
}  // namespace strata::server

namespace strata::server {
namespace {

// Hits as URIs, in order, from each front end's answer.
std::vector<std::string> HitUris(const Json& hits) {
  std::vector<std::string> out;
  for (const Json& h : hits) out.push_back(h["uri"].get<std::string>());
  return out;
}
std::vector<std::string> ToolUris(const std::string& text) {
  std::vector<std::string> out;
  for (size_t at = 0; (at = text.find("strata://", at)) != std::string::npos;) {
    size_t end = text.find(' ', at);
    out.push_back(text.substr(at, end - at));
    at = end;
  }
  return out;
}

// Issue 29: one question, one answer. The same queries and token budgets through HTTP's search/find, the MCP
// search tool and the chat's find tool give the same hits in the same order: each is Engine::Find for the
// caller (a user: its own scope and the shared ones, ranked together), counting tokens one way.
TEST_F(TrustTest, FindGivesTheSameHitsOverHttpMcpAndTheAgentTool) {
  std::string alice = Issue("alice");
  std::string bob = Issue("bob");
  const std::vector<std::pair<std::string, std::string>> notes = {
      {"strata://user/alice/memories/preferences/editor", "Alice edits code in Helix with relative line numbers."},
      {"strata://user/alice/memories/events/trip", "Alice flew to Lisbon for a conference on editors in May."},
      {"strata://resources/guides/testing", "Run scripts/test before pushing; it builds and runs every test."},
      {"strata://resources/guides/editors", "The team's editor settings live in .editorconfig at the root."},
      {"strata://agent/coder/memories/patterns/review", "Reviewers ask for a test with every bug fix."},
      {"strata://user/bob/memories/preferences/editor", "Bob edits code in Emacs with evil mode."},
  };
  ASSERT_NO_FATAL_FAILURE(WriteNotes(notes));
  // More than any front end's default limit matches "editor settings".
  for (int i = 0; i < 12; ++i) {
    Json note = {{"uri", "strata://resources/tips/editor-" + std::to_string(i)},
                 {"content", "Editor settings tip " + std::to_string(i) + ": keep one setting per line."}};
    ASSERT_EQ(Call("POST", "/api/v1/fs/write", kRootKey, note.dump()).status, 200);
  }
  // A coding agent writes a note to the shared resources through MCP, then finds it (issue 29's example).
  Reply wrote = Call("POST", "/mcp", alice,
                     McpCall("write", {{"uri", "strata://resources/notes/deploy"},
                                       {"content", "Deploys go out on Tuesdays after the freeze is lifted."}}));
  ASSERT_EQ(wrote.status, 200) << wrote.raw;
  ASSERT_EQ(wrote.raw.find("isError\":true"), std::string::npos) << wrote.raw;

  auto opened = Engine::Open({.data_dir = dir_.File("data")});
  ASSERT_OK(opened);
  tools::Toolset toolset;
  ASSERT_OK(AddAgentTools(opened->get(), {.user = "alice", .files = false}, &toolset));

  int compared = 0;
  for (const std::string query : {"which editor does alice use", "deploys on tuesday", "how do I test a bug fix",
                                  "editor settings"}) {
    for (int64_t budget : {0, 12, 30}) {
      for (bool default_limit : {false, true}) {
        SCOPED_TRACE(query + ", budget " + std::to_string(budget) + (default_limit ? ", the default limit" : ""));
        Json args = {{"query", query}};
        if (!default_limit) args["limit"] = 7;
        if (budget > 0) args["token_budget"] = budget;
        Reply http = Call("POST", "/api/v1/search/find", alice, args.dump());
        ASSERT_EQ(http.status, 200) << http.raw;
        Reply mcp = Call("POST", "/mcp", alice, McpCall("search", args));
        ASSERT_EQ(mcp.status, 200) << mcp.raw;
        Json structured = mcp.body["result"]["structuredContent"];
        Canceller never;
        tools::ToolOutput out = const_cast<tools::Tool*>(toolset.Find("find"))->Call(args.dump(), never);
        std::string tool_text;
        for (const ContentPart& part : out.content) {
          if (const auto* t = std::get_if<TextPart>(&part)) tool_text += t->text;
        }
        std::vector<std::string> over_http = HitUris(http.body["result"]["hits"]);
        EXPECT_EQ(HitUris(structured["hits"]), over_http);
        EXPECT_EQ(ToolUris(tool_text), over_http) << tool_text;
        EXPECT_EQ(structured["tokens"], http.body["result"]["tokens"]);
        for (const std::string& uri : over_http) EXPECT_EQ(uri.find("/user/bob"), std::string::npos) << uri;
        if (budget > 0) {
          EXPECT_LE(http.body["result"]["tokens"].get<int64_t>(), budget);
        } else if (query == "editor settings") {
          EXPECT_EQ(over_http.size(), default_limit ? FindRequest{}.limit : 7u);
        }
        ++compared;
      }
    }
  }
  EXPECT_EQ(compared, 24);
  // The note written through MCP is found by a find without `under`: the user's find reaches the shared
  // resources, not only its own scope.
  Reply deploy = Call("POST", "/mcp", alice, McpCall("find", {{"query", "when do deploys go out"}}));
  ASSERT_EQ(deploy.status, 200);
  EXPECT_EQ(deploy.body["result"]["structuredContent"]["hits"][0]["uri"], "strata://resources/notes/deploy") << deploy.raw;
  // Glob and grep without `under` cover the same places.
  Reply grep = Call("GET", "/api/v1/fs/grep?pattern=edit", alice);
  ASSERT_EQ(grep.status, 200);
  std::set<std::string> grepped;
  for (const Json& m : grep.body["result"]) grepped.insert(m["uri"].get<std::string>());
  EXPECT_TRUE(grepped.count("strata://user/alice/memories/preferences/editor"));
  EXPECT_TRUE(grepped.count("strata://resources/guides/editors"));
  EXPECT_FALSE(grepped.count("strata://user/bob/memories/preferences/editor"));
}

// What one front end takes every other takes, and what one refuses every other refuses: a find's bounds and
// defaults are the engine's (FindRequest, FindAssist), and MCP's and the agent tool's schemas are built
// from them (views::FindArgumentsSchema). The agent tool refused a limit over 50 and a token budget of 0,
// MCP's search a budget of 0, and only the CLI could filter by type (HTTP dropped "type" unread).
TEST_F(TrustTest, EveryFrontEndTakesAndRefusesTheSameFindArguments) {
  std::string alice = Issue("alice");
  ASSERT_NO_FATAL_FAILURE(WriteNotes({
      {"strata://user/alice/memories/preferences/tea", "Alice drinks green tea in the morning."},
      {"strata://resources/guides/tea", "Brewing green tea: water at 80 degrees, two minutes."},
      {"strata://user/bob/memories/preferences/tea", "Bob drinks black tea."}}));
  auto opened = Engine::Open({.data_dir = dir_.File("data")});
  ASSERT_OK(opened);
  tools::Toolset toolset;
  ASSERT_OK(AddAgentTools(opened->get(), {.user = "alice", .files = false}, &toolset));

  struct Case {
    Json args;
    bool taken;
    const char* names;  // What a refusal must name.
  };
  const int64_t max = static_cast<int64_t>(FindRequest::kMaxLimit);
  const std::vector<Case> cases = {
      {{{"query", "green tea"}}, true, ""},
      {{{"query", "green tea"}, {"limit", 51}}, true, ""},
      {{{"query", "green tea"}, {"limit", max}}, true, ""},
      {{{"query", "green tea"}, {"token_budget", 0}}, true, ""},
      {{{"query", "green tea"}, {"type", "memory"}}, true, ""},
      {{{"query", "green tea"}, {"type", "resource"}}, true, ""},
      {{{"query", "green tea"}, {"under", "strata://resources"}}, true, ""},
      {{{"query", "green tea"}, {"limit", 1.0}}, true, ""},  // JSON Schema's integer takes 1.0, so does everyone.
      {{{"query", "green tea"}, {"limit", 2.5}}, false, "limit"},
      {{{"query", "green tea"}, {"limit", 0}}, false, "limit"},
      {{{"query", "green tea"}, {"limit", max + 1}}, false, "limit"},
      {{{"query", "green tea"}, {"token_budget", -1}}, false, "token_budget"},
      // Out of an integer's range: MCP and the agent tool used their defaults (no budget, 10 hits).
      {{{"query", "green tea"}, {"token_budget", 1e300}}, false, "token_budget"},
      {{{"query", "green tea"}, {"limit", 1e300}}, false, "limit"},
      {{{"query", "green tea"}, {"type", "memories"}}, false, "memories"},
      {{{"query", "green tea"}, {"under", "strata://user/bob"}}, false, "strata://user/bob"},
      {{{"query", 42}}, false, "query"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args.dump());
    Reply http = Call("POST", "/api/v1/search/find", alice, c.args.dump());
    Reply mcp = Call("POST", "/mcp", alice, McpCall("search", c.args));
    ASSERT_EQ(mcp.status, 200) << mcp.raw;
    ASSERT_TRUE(mcp.body.contains("result")) << "a tool's bad arguments are its result, not a JSON-RPC error: " << mcp.raw;
    tools::ToolResult tool = toolset.Handle({.id = "c1", .function = {.name = "find", .arguments = c.args.dump()}},
                                            Canceller{});
    std::string tool_text;
    for (const ContentPart& part : tool.message.content) {
      if (const auto* t = std::get_if<TextPart>(&part)) tool_text += t->text;
    }
    const Json& result = mcp.body["result"];
    if (c.taken) {
      ASSERT_EQ(http.status, 200) << http.raw;
      EXPECT_FALSE(result["isError"].get<bool>()) << mcp.raw;
      EXPECT_FALSE(tool.is_error) << tool_text;
      std::vector<std::string> over_http = HitUris(http.body["result"]["hits"]);
      EXPECT_FALSE(over_http.empty());
      EXPECT_EQ(HitUris(result["structuredContent"]["hits"]), over_http);
      EXPECT_EQ(ToolUris(tool_text), over_http) << tool_text;
      if (c.args.contains("limit")) {
        EXPECT_EQ(over_http.size(), std::min<size_t>(2, static_cast<size_t>(c.args["limit"].get<double>())));
      }
      if (c.args.contains("type")) {
        const std::string kind = c.args["type"] == "memory" ? "/memories/" : "strata://resources/";
        for (const std::string& uri : over_http) EXPECT_NE(uri.find(kind), std::string::npos) << uri;
      }
    } else {
      EXPECT_TRUE(http.status == 400 || http.status == 403) << http.raw;
      std::string http_message = http.body["error"]["message"].get<std::string>();
      EXPECT_NE(http_message.find(c.names), std::string::npos) << http_message;
      EXPECT_TRUE(result["isError"].get<bool>()) << mcp.raw;
      std::string mcp_message = result["content"][0]["text"].get<std::string>();
      EXPECT_NE(mcp_message.find(c.names), std::string::npos) << mcp_message;
      EXPECT_TRUE(tool.is_error) << tool_text;
      EXPECT_NE(tool_text.find(c.names), std::string::npos) << tool_text;
    }
  }
  // "type" in HTTP's query string, as query and limit may be.
  Reply typed = Call("POST", "/api/v1/search/find?type=memory", alice, Json{{"query", "green tea"}}.dump());
  ASSERT_EQ(typed.status, 200) << typed.raw;
  EXPECT_EQ(HitUris(typed.body["result"]["hits"]), std::vector<std::string>{"strata://user/alice/memories/preferences/tea"});
  // Glob answers with the same node records over HTTP and MCP (MCP gave bare URIs).
  Reply http_glob = Call("GET", "/api/v1/fs/glob?pattern=**/tea", alice);
  ASSERT_EQ(http_glob.status, 200) << http_glob.raw;
  Reply mcp_glob = Call("POST", "/mcp", alice, McpCall("glob", {{"pattern", "**/tea"}}));
  ASSERT_EQ(mcp_glob.status, 200) << mcp_glob.raw;
  EXPECT_EQ(mcp_glob.body["result"]["structuredContent"]["nodes"], http_glob.body["result"]);
  EXPECT_EQ(http_glob.body["result"].size(), 2u) << http_glob.raw;
}

// A user's key lists its own scope by default: before the user's first write that scope does not exist, and
// ls, tree and MCP's list and tree answered 404 "strata://user/carol does not exist" while find, grep and
// glob answered empty. Now every front end answers empty; a directory below a scope that is not there is
// still named as missing.
TEST_F(TrustTest, ANewUsersOwnScopeListsEmptyOnEveryFrontEnd) {
  std::string carol = Issue("carol");
  for (const char* path : {"/api/v1/fs/ls", "/api/v1/fs/tree", "/api/v1/fs/ls?uri=strata%3A%2F%2Fuser%2Fcarol"}) {
    Reply r = Call("GET", path, carol);
    EXPECT_EQ(r.status, 200) << path << ": " << r.raw;
    EXPECT_EQ(r.body["result"], Json::array()) << path;
  }
  for (const char* tool : {"list", "tree"}) {
    Reply r = Call("POST", "/mcp", carol, McpCall(tool, Json::object()));
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.raw.find("isError\":true"), std::string::npos) << r.raw;
    EXPECT_EQ(r.body["result"]["structuredContent"]["nodes"], Json::array()) << r.raw;
  }
  Reply below = Call("GET", "/api/v1/fs/ls?uri=" + Q("strata://user/carol/memories"), carol);
  EXPECT_EQ(below.status, 404) << below.raw;
  auto engine = Engine::Open({.data_dir = dir_.File("data"), .read_only = true});
  ASSERT_OK(engine);
  auto listed = (*engine)->List("strata://user/nobody");
  ASSERT_OK(listed);
  EXPECT_TRUE(listed->empty());
}

// MCP's list and tree take the limit their schema states (1 to 1000), not HTTP's 0 for "no limit": a limit
// outside it is refused naming the argument and the bound (the arguments are checked against the tool's
// schema before the call), and a limit within it cuts the listing and says so.
TEST_F(TrustTest, McpListingLimitsOutsideTheSchemaAreRefusedByName) {
  std::string alice = Issue("alice");
  for (const char* name : {"a", "b", "c"}) {
    Reply w = Call("POST", "/mcp", alice,
                   McpCall("write", {{"uri", std::string("strata://user/alice/memories/events/") + name},
                                     {"content", std::string("event ") + name}}));
    ASSERT_EQ(w.status, 200) << w.raw;
    ASSERT_EQ(w.raw.find("isError\":true"), std::string::npos) << w.raw;
  }
  for (const char* tool : {"list", "tree"}) {
    for (int64_t limit : {int64_t{0}, int64_t{-3}, int64_t{1001}}) {
      Reply r = Call("POST", "/mcp", alice, McpCall(tool, {{"uri", "strata://user/alice/memories/events"}, {"limit", limit}}));
      ASSERT_EQ(r.status, 200) << r.raw;
      EXPECT_NE(r.raw.find("isError\":true"), std::string::npos) << tool << " " << limit << ": " << r.raw;
      const std::string bound = limit < 1 ? " is less than the minimum 1" : " is greater than the maximum 1000";
      EXPECT_NE(r.raw.find("$.limit: " + std::to_string(limit) + bound), std::string::npos)
          << tool << " " << limit << ": " << r.raw;
    }
    Reply cut = Call("POST", "/mcp", alice, McpCall(tool, {{"uri", "strata://user/alice/memories/events"}, {"limit", 2}}));
    ASSERT_EQ(cut.status, 200) << cut.raw;
    EXPECT_EQ(cut.body["result"]["structuredContent"]["nodes"].size(), 2u) << cut.raw;
    EXPECT_EQ(cut.body["result"]["structuredContent"]["truncated"], true) << cut.raw;
    Reply all = Call("POST", "/mcp", alice, McpCall(tool, {{"uri", "strata://user/alice/memories/events"}, {"limit", 1000}}));
    ASSERT_EQ(all.status, 200) << all.raw;
    EXPECT_EQ(all.body["result"]["structuredContent"]["nodes"].size(), 3u) << all.raw;
    EXPECT_FALSE(all.body["result"]["structuredContent"].contains("truncated")) << all.raw;
  }
}

// A bad argument on a session that is not there (or is another user's) is the argument's error, as the
// Engine gives it in process: HTTP and MCP looked for the session first and answered 404, so one call got
// two answers. A missing session with good arguments is still 404.
TEST_F(TrustTest, ABadArgumentOnAMissingSessionIsTheArgumentsErrorEverywhere) {
  std::string alice = Issue("alice");
  auto engine = Engine::Open({.data_dir = dir_.File("data"), .read_only = true});
  ASSERT_OK(engine);
  auto in_process = [&](const SessionContextOptions& o) {
    Result<SessionContext> ctx = (*engine)->AssembleSession("nobody-here", o);
    EXPECT_EQ(ctx.status().code(), StatusCode::kInvalidArgument) << ctx.status().ToString();
    return ctx.status().message();
  };
  struct Case {
    std::string method, path, body, message;
  };
  const std::vector<Case> cases = {
      {"POST", "/api/v1/sessions/nobody-here/revert", R"({"checkpoint": -1})", CheckCheckpointArg(-1).message()},
      {"POST", "/api/v1/sessions/nobody-here/fork", R"({"checkpoint": -2})", CheckCheckpointArg(-2).message()},
      {"POST", "/api/v1/sessions/nobody-here/usage", R"({"tokens": -5})", CheckUsageArg(-5).message()},
      {"GET", "/api/v1/sessions/nobody-here/context?encoding=nope", "", in_process({.encoding = "nope"})},
      {"GET", "/api/v1/sessions/nobody-here/context?max_context_tokens=100&reserve_for_reply=100", "",
       in_process({.max_context_tokens = 100, .reserve_for_reply = 100})},
  };
  for (const Case& c : cases) {
    ASSERT_FALSE(c.message.empty()) << c.path;
    Reply r = Call(c.method, c.path, alice, c.body);
    EXPECT_EQ(r.status, 400) << c.path << ": " << r.raw;
    EXPECT_EQ(r.body["error"].value("message", ""), c.message) << c.path << ": " << r.raw;
  }
  // (MCP's schema refuses an unknown encoding itself; a reserve not below the window passes it.)
  Reply mcp = Call("POST", "/mcp", alice,
                   McpCall("get_context", {{"session", "nobody-here"}, {"max_context_tokens", 100}, {"reserve_for_reply", 100}}));
  ASSERT_EQ(mcp.status, 200) << mcp.raw;
  EXPECT_NE(mcp.raw.find("isError\":true"), std::string::npos) << mcp.raw;
  EXPECT_NE(mcp.body["result"]["content"][0].value("text", "").find(
                in_process({.max_context_tokens = 100, .reserve_for_reply = 100})),
            std::string::npos)
      << mcp.raw;
  // Good arguments on a missing session: not found, as before.
  EXPECT_EQ(Call("POST", "/api/v1/sessions/nobody-here/revert", alice, R"({"checkpoint": 0})").status, 404);
  EXPECT_EQ(Call("GET", "/api/v1/sessions/nobody-here/context", alice).status, 404);
}

// Remember on a server with no usable model (its default provider has no key): the same four calls by
// three users through HTTP, MCP and the agent's tool get the same changes — the first stored through the
// pipeline (nothing similar to ask the model about), the rest kept as written where dedup or extraction
// needed the model, the same text kept once — where MCP used to keep what HTTP refused.
TEST_F(TrustTest, RememberWithoutAModelIsAnsweredAlikeByEveryFrontEnd) {
  // The default provider with no key, whatever this machine's environment and config file hold.
  Stop();
  testing::WriteFileOrDie(dir_.File("empty-config.json"), "{}");
  engine_options_.provider = {.provider = "openai", .api_key_env = "STRATA_TEST_UNSET_KEY_VARIABLE",
                              .config_file = dir_.File("empty-config.json")};
  Start();
  struct Ask {
    std::string text, category;
  };
  const std::vector<Ask> asks = {{"Takes coffee black, no sugar.", "preferences"},
                                 {"Takes coffee black, no sugar.", "preferences"},
                                 {"Takes coffee black, no sugar, not even at work.", "preferences"},
                                 {"Takes coffee black, no sugar, not even at work.", "preferences"},
                                 {"Reads on the train every morning.", ""}};
  // Each change as "action uri: reason" with the user's name replaced by U.
  auto line = [](std::string user, const std::string& action, std::string uri, std::string reason) {
    for (std::string* s : {&uri, &reason}) {
      for (size_t at; (at = s->find(user)) != std::string::npos;) s->replace(at, user.size(), "U");
    }
    return action + " " + uri + ": " + reason;
  };
  auto lines_of = [&](const std::string& user, const Json& changes) {
    std::vector<std::string> out;
    for (const Json& c : changes) out.push_back(line(user, c["action"], c["uri"], c["reason"]));
    return out;
  };
  std::vector<std::vector<std::string>> over_http, over_mcp, by_tool;
  std::string alice = Issue("alice");
  for (const Ask& a : asks) {
    Json body = {{"scope", "strata://user/alice"}, {"text", a.text}};
    if (!a.category.empty()) body["category"] = a.category;
    Reply r = Call("POST", "/api/v1/memories/remember", alice, body.dump());
    ASSERT_EQ(r.status, 200) << r.raw;
    over_http.push_back(lines_of("alice", r.body["result"]));
  }
  std::string bob = Issue("bob");
  for (const Ask& a : asks) {
    Json args = {{"text", a.text}};
    if (!a.category.empty()) args["category"] = a.category;
    Reply r = Call("POST", "/mcp", bob, McpCall("remember", args));
    ASSERT_EQ(r.status, 200) << r.raw;
    ASSERT_EQ(r.raw.find("isError\":true"), std::string::npos) << r.raw;
    over_mcp.push_back(lines_of("bob", r.body["result"]["structuredContent"]["changes"]));
  }
  auto opened = Engine::Open({.data_dir = dir_.File("data"), .provider = engine_options_.provider});
  ASSERT_OK(opened);
  tools::Toolset toolset;
  ASSERT_OK(AddAgentTools(opened->get(), {.user = "carol", .files = false}, &toolset));
  for (const Ask& a : asks) {
    Json args = {{"text", a.text}};
    if (!a.category.empty()) args["category"] = a.category;
    Canceller never;
    tools::ToolOutput out = const_cast<tools::Tool*>(toolset.Find("remember"))->Call(args.dump(), never);
    ASSERT_FALSE(out.content.empty());
    const auto* said = std::get_if<TextPart>(&out.content[0]);
    ASSERT_NE(said, nullptr);
    std::vector<std::string> lines;
    std::string text = said->text;
    for (size_t at; (at = text.find("carol")) != std::string::npos;) text.replace(at, 5, "U");
    for (size_t start = 0, end; (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
      lines.push_back(text.substr(start, end - start));
    }
    by_tool.push_back(lines);
  }
  EXPECT_EQ(over_mcp, over_http);
  EXPECT_EQ(by_tool, over_http);
  ASSERT_EQ(over_http.size(), 5u);
  for (const auto& changes : over_http) ASSERT_EQ(changes.size(), 1u);
  EXPECT_EQ(over_http[0][0].rfind("create strata://user/U/memories/preferences/", 0), 0u) << over_http[0][0];
  // The same text again needs no model to be a duplicate (it was kept a second time as written).
  const std::string first = over_http[0][0].substr(7, over_http[0][0].find(": ") - 7);
  EXPECT_EQ(over_http[1][0], "skip " + first + ": the same text is kept already");
  EXPECT_EQ(over_http[2][0].rfind("create strata://user/U/memories/preferences/note-", 0), 0u) << over_http[2][0];
  EXPECT_NE(over_http[2][0].find("kept as written, without deduplication: no API key"), std::string::npos)
      << over_http[2][0];
  EXPECT_EQ(over_http[3][0].rfind("skip strata://user/U/memories/preferences/note-", 0), 0u) << over_http[3][0];
  EXPECT_EQ(over_http[4][0].rfind("create strata://user/U/memories/notes/note-", 0), 0u) << over_http[4][0];
  // A kept note has its history: created once, by a remember call.
  std::string note = over_http[4][0].substr(7, over_http[4][0].find(": ", 7) - 7);
  note.replace(note.find("/U/"), 3, "/alice/");
  Reply history = Call("GET", "/api/v1/memories/history?uri=" + Q(note), alice);
  ASSERT_EQ(history.status, 200) << history.raw;
  ASSERT_EQ(history.body["result"].size(), 1u) << history.raw;
  EXPECT_EQ(history.body["result"][0]["action"], "create");
  EXPECT_EQ(history.body["result"][0]["source"].get<std::string>().rfind("remember#", 0), 0u) << history.raw;
  // Not a user or agent scope, or nothing to keep: refused, with or without a model.
  EXPECT_EQ(Call("POST", "/api/v1/memories/remember", kRootKey,
                 Json{{"scope", "strata://resources/notes"}, {"text", "x"}}.dump()).status, 400);
  EXPECT_EQ(Call("POST", "/api/v1/memories/remember", alice,
                 Json{{"scope", "strata://user/alice"}, {"text", "   "}}.dump()).status, 400);
}

// An empty URI where one is required gets the same words over HTTP and MCP ("must not be empty"; MCP said
// it was missing); an absent one is "required" in both.
TEST_F(TrustTest, AnEmptyOrMissingUriIsRefusedInTheSameWordsOverHttpAndMcp) {
  std::string alice = Issue("alice");
  Reply http_empty = Call("GET", "/api/v1/fs/read?uri=", alice);
  Reply mcp_empty = Call("POST", "/mcp", alice, McpCall("read", {{"uri", ""}}));
  EXPECT_EQ(http_empty.status, 400) << http_empty.raw;
  EXPECT_NE(http_empty.raw.find("must not be empty"), std::string::npos) << http_empty.raw;
  EXPECT_TRUE(mcp_empty.body["result"]["isError"].get<bool>()) << mcp_empty.raw;
  EXPECT_NE(mcp_empty.raw.find("must not be empty"), std::string::npos) << mcp_empty.raw;
  Reply http_missing = Call("POST", "/api/v1/fs/write", alice, R"({"content": "x"})");
  Reply mcp_missing = Call("POST", "/mcp", alice, McpCall("write", {{"content", "x"}}));
  EXPECT_TRUE(mcp_missing.body["result"]["isError"].get<bool>()) << mcp_missing.raw;
  EXPECT_NE(http_missing.raw.find("\\\"uri\\\" is required"), std::string::npos) << http_missing.raw;
  // (Absent, MCP's schema refuses it first, in the schema's words.)
  EXPECT_NE(mcp_missing.raw.find("required property \\\"uri\\\""), std::string::npos) << mcp_missing.raw;
}

// One bad input, one answer. A level out of range was refused in other words by the CLI and taken by the
// engine itself (a C++ or Python caller got what the store made of level 7); an empty URI was "must start
// with strata://" in process where HTTP says "must not be empty"; MCP's remember with an empty text said
// to give a text.
TEST_F(TrustTest, ABadLevelUriOrTextIsRefusedInTheSameWordsInProcessOverHttpAndMcp) {
  std::string alice = Issue("alice");
  const std::string note = "strata://user/alice/notes/tea";
  ASSERT_EQ(Call("POST", "/api/v1/fs/write", alice, Json{{"uri", note}, {"content", "Green tea."}}.dump()).status, 200);
  auto opened = Engine::Open({.data_dir = dir_.File("data")});
  ASSERT_OK(opened);
  Engine& engine = **opened;
  auto http_message = [](const Reply& r) {
    EXPECT_EQ(r.status, 400) << r.raw;
    return r.body.is_object() && r.body.contains("error") ? r.body["error"]["message"].get<std::string>() : r.raw;
  };
  auto mcp_message = [](const Reply& r) -> std::string {
    EXPECT_EQ(r.status, 200) << r.raw;
    if (!r.body.is_object() || !r.body.contains("result")) return r.raw;
    EXPECT_TRUE(r.body["result"]["isError"].get<bool>()) << r.raw;
    // MCP's text names the status code first.
    std::string text = r.body["result"]["content"][0]["text"].get<std::string>();
    const std::string code = "invalid_argument: ";
    EXPECT_EQ(text.rfind(code, 0), 0u) << text;
    return text.rfind(code, 0) == 0 ? text.substr(code.size()) : text;
  };
  auto in_process = [](const Status& s) {
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << s.ToString();
    return std::string(s.message());
  };

  const std::string level_words = "\"level\" must be 0 (abstract), 1 (overview) or 2 (content), not 7";
  EXPECT_EQ(http_message(Call("GET", "/api/v1/fs/read?uri=" + Q(note) + "&level=7", alice)), level_words);
  EXPECT_EQ(in_process(engine.Read(note, static_cast<memory::Level>(7)).status()), level_words);
  EXPECT_EQ(in_process(engine.Read(note, static_cast<memory::Level>(-1)).status()),
            "\"level\" must be 0 (abstract), 1 (overview) or 2 (content), not -1");
  EXPECT_EQ(in_process(memory::LevelOf(int64_t{1} << 32).status()),
            "\"level\" must be 0 (abstract), 1 (overview) or 2 (content), not 4294967296");
  ASSERT_OK(engine.Read(note, memory::Level::kContent));
  // MCP's resources carry the level in their URI: the same words (it said "level must be 0, 1 or 2, not
  // \"7\"" and refused -1 as not an integer).
  for (const auto& [level, words] : std::vector<std::pair<std::string, std::string>>{
           {"7", level_words},
           {"-1", "\"level\" must be 0 (abstract), 1 (overview) or 2 (content), not -1"},
           {"x", "\"level\" must be an integer"}}) {
    Reply resource = Call("POST", "/mcp", alice,
                          Json{{"jsonrpc", "2.0"}, {"id", 8}, {"method", "resources/read"},
                               {"params", {{"uri", note + "?level=" + level}}}}.dump());
    const std::string quoted = Json(words).dump();
    EXPECT_NE(resource.raw.find(quoted.substr(1, quoted.size() - 2)), std::string::npos) << level << ": " << resource.raw;
    Reply http = Call("GET", "/api/v1/fs/read?uri=" + Q(note) + "&level=" + level, alice);
    EXPECT_EQ(http_message(http), words) << level;
  }

  EXPECT_EQ(http_message(Call("GET", "/api/v1/fs/read?uri=", alice)), "\"uri\" must not be empty");
  EXPECT_EQ(mcp_message(Call("POST", "/mcp", alice, McpCall("read", {{"uris", {note, ""}}}))),
            "\"uris\"[1] must not be empty");
  EXPECT_EQ(in_process(engine.Read("", memory::Level::kContent).status()), "\"uri\" must not be empty");
  EXPECT_EQ(in_process(engine.Stat("").status()), "\"uri\" must not be empty");
  EXPECT_EQ(in_process(engine.Export("", dir_.File("export")).status()), "\"uri\" must not be empty");
  Reply http_mv = Call("POST", "/api/v1/fs/mv", alice, Json{{"from", note}, {"to", ""}}.dump());
  EXPECT_EQ(http_message(http_mv), "\"to\" must not be empty");
  EXPECT_EQ(in_process(engine.Move(note, "")), "\"to\" must not be empty");
  EXPECT_EQ(in_process(engine.Move("", note)), "\"from\" must not be empty");

  const std::string text_words = "remember: the text is empty";
  Reply http_remember =
      Call("POST", "/api/v1/memories/remember", alice, Json{{"scope", "strata://user/alice"}, {"text", " "}}.dump());
  EXPECT_EQ(http_message(http_remember), text_words);
  EXPECT_EQ(mcp_message(Call("POST", "/mcp", alice, McpCall("remember", {{"text", " "}}))), text_words);
  EXPECT_EQ(mcp_message(Call("POST", "/mcp", alice, McpCall("remember", {{"text", ""}}))), text_words);
  EXPECT_EQ(in_process(engine.Remember("strata://user/alice", "", "").status()), text_words);
  EXPECT_EQ(in_process(engine.Remember("", "Green tea.", "").status()), "\"scope\" must not be empty");
  // Neither a text nor messages: MCP says which to give.
  EXPECT_EQ(mcp_message(Call("POST", "/mcp", alice, McpCall("remember", Json::object()))),
            "give \"text\" or \"messages\"");
  // Nothing above touched the note.
  EXPECT_EQ(*engine.Read(note, memory::Level::kContent), "Green tea.");
}

// A session's context through HTTP and MCP: the same window by default (the server's --window), the same
// reply reserve by default (the engine's: 4,096, at most a quarter of a small window), the same view.
TEST_F(TrustTest, TheContextOfASessionIsTheSameOverHttpAndMcp) {
  Stop();
  server_options_.upstream_context_tokens = 32'000;
  Start();
  std::string alice = Issue("alice");
  ASSERT_EQ(Call("POST", "/api/v1/sessions", alice, R"({"id": "s"})").status, 200);
  ASSERT_EQ(Call("POST", "/api/v1/sessions/s/messages", alice,
                 R"({"messages": [{"role": "user", "content": "Plan a trip to Kyoto."}, {"role": "assistant", "content": "Sure."}]})")
                .status,
            200);
  ASSERT_EQ(Call("POST", "/api/v1/fs/write", kRootKey,
                 Json{{"uri", "strata://user/alice/memories/travel/kyoto"}, {"content", "Alice loves temples in Kyoto."}}.dump())
                .status,
            200);
  // MCP's get_context takes what HTTP's context route takes (it had no memory_limit, query, encoding or
  // system prompt, and refused a window under 256 that HTTP assembled).
  for (const Json& args : {Json::object(), Json{{"max_context_tokens", 4000}},
                           Json{{"max_context_tokens", 4000}, {"reserve_for_reply", 100}},
                           Json{{"max_context_tokens", 200}}, Json{{"memory_limit", 0}},
                           Json{{"memory_limit", 2}, {"query", "temples"}}, Json{{"encoding", "cl100k_base"}},
                           Json{{"system_prompt", "Be brief."}}}) {
    SCOPED_TRACE(args.dump());
    std::string query;
    for (const auto& [k, v] : args.items()) {
      query += "&" + k + "=" + (v.is_string() ? v.get<std::string>() : std::to_string(v.get<int64_t>()));
    }
    for (size_t at = query.find(' '); at != std::string::npos; at = query.find(' ')) query.replace(at, 1, "%20");
    Reply http = Call("GET", "/api/v1/sessions/s/context?" + query.substr(query.empty() ? 0 : 1), alice);
    ASSERT_EQ(http.status, 200) << http.raw;
    Json mcp_args = args;
    mcp_args["session"] = "s";
    Reply mcp = Call("POST", "/mcp", alice, McpCall("get_context", mcp_args));
    ASSERT_EQ(mcp.status, 200) << mcp.raw;
    EXPECT_EQ(mcp.body["result"]["structuredContent"], http.body["result"]) << mcp.raw;
    if (args.contains("query")) {
      EXPECT_EQ(http.body["result"]["memories"].size(), 1u) << http.raw;
    }
  }
  // The same refusal of a memory limit over the engine's bound.
  Reply too_many = Call("GET", "/api/v1/sessions/s/context?memory_limit=101", alice);
  EXPECT_EQ(too_many.status, 400) << too_many.raw;
  Reply mcp_too_many = Call("POST", "/mcp", alice, McpCall("get_context", {{"session", "s"}, {"memory_limit", 101}}));
  EXPECT_TRUE(mcp_too_many.body["result"]["isError"].get<bool>()) << mcp_too_many.raw;
  EXPECT_NE(mcp_too_many.raw.find("memory_limit"), std::string::npos) << mcp_too_many.raw;
  // A window or reserve out of an integer's range is refused by both, naming it (MCP assembled the default).
  for (const std::string member : {"max_context_tokens", "reserve_for_reply"}) {
    Reply http = Call("GET", "/api/v1/sessions/s/context?" + member + "=1e300", alice);
    EXPECT_EQ(http.status, 400) << http.raw;
    EXPECT_NE(http.raw.find(member), std::string::npos) << http.raw;
    Reply mcp = Call("POST", "/mcp", alice, McpCall("get_context", {{"session", "s"}, {member, 1e300}}));
    EXPECT_TRUE(mcp.body["result"]["isError"].get<bool>()) << mcp.raw;
    EXPECT_NE(mcp.raw.find("\\\"" + member + "\\\" must be an integer"), std::string::npos) << mcp.raw;
  }
  // remember takes a text or messages: both was the messages alone, the text dropped without a word.
  Reply both = Call("POST", "/mcp", alice,
                    McpCall("remember", {{"text", "I prefer aisle seats"},
                                         {"messages", Json::array({{{"role", "user"}, {"content", "hi"}}})}}));
  EXPECT_TRUE(both.body["result"]["isError"].get<bool>()) << both.raw;
  EXPECT_NE(both.raw.find("not both"), std::string::npos) << both.raw;
  Reply whole = Call("GET", "/api/v1/sessions/s/context", alice);
  EXPECT_EQ(whole.body["result"]["window"], 32000) << whole.raw;
  EXPECT_EQ(whole.body["result"]["budget"], 32000 - 4096) << whole.raw;
  Reply small = Call("GET", "/api/v1/sessions/s/context?max_context_tokens=4000", alice);
  EXPECT_EQ(small.body["result"]["budget"], 3000) << small.raw;
}

// A client holding a checkpoint from before a commit (the server's idle commit, another client's) must not
// revert the next conversation to the checkpoint that took its id.
TEST_F(TrustTest, AStaleCheckpointIsRefusedOverHttpOnceItsIdMarksAnotherPoint) {
  std::string alice = Issue("alice");
  ASSERT_EQ(Call("POST", "/api/v1/sessions", alice, R"({"id": "s"})").status, 200);
  auto add = [&](const std::string& text) {
    return Call("POST", "/api/v1/sessions/s/messages", alice, Json{{"messages", {{{"role", "user"}, {"content", text}}}}}.dump());
  };
  ASSERT_EQ(add("first").status, 200);
  Reply old = Call("POST", "/api/v1/sessions/s/checkpoints", alice, "{}");
  ASSERT_EQ(old.status, 200) << old.raw;
  EXPECT_EQ(old.body["result"]["checkpoint"], 0);
  EXPECT_EQ(old.body["result"]["messages"], 1);
  const std::string tag = old.body["result"]["tag"];
  Reply log = Call("GET", "/api/v1/sessions/s/log", alice);
  EXPECT_EQ(log.body["result"]["checkpoints"][0]["tag"], tag) << log.raw;

  ASSERT_EQ(add("second").status, 200);
  ASSERT_EQ(Call("POST", "/api/v1/sessions/s/commit", alice, "{}").status, 200);
  ASSERT_EQ(add("third").status, 200);
  Reply now = Call("POST", "/api/v1/sessions/s/checkpoints", alice, "{}");
  ASSERT_EQ(now.status, 200) << now.raw;
  EXPECT_EQ(now.body["result"]["checkpoint"], 0);
  EXPECT_EQ(now.body["result"]["messages"], 1);
  EXPECT_NE(now.body["result"]["tag"], tag);
  ASSERT_EQ(add("fourth").status, 200);

  Reply stale = Call("POST", "/api/v1/sessions/s/revert", alice, Json{{"checkpoint", 0}, {"tag", tag}}.dump());
  EXPECT_EQ(stale.status, 409) << stale.raw;
  EXPECT_NE(stale.raw.find("checkpoint 0 of session s is no longer the one tagged"), std::string::npos) << stale.raw;
  Reply stale_fork = Call("POST", "/api/v1/sessions/s/fork", alice, Json{{"id", "t"}, {"checkpoint", 0}, {"tag", tag}}.dump());
  EXPECT_EQ(stale_fork.status, 409) << stale_fork.raw;
  EXPECT_EQ(Call("POST", "/api/v1/sessions/s/fork", alice, Json{{"id", "t"}, {"tag", tag}}.dump()).status, 400);
  EXPECT_EQ(Call("POST", "/api/v1/sessions/s/fork", alice, Json{{"id", "t"}, {"checkpoint", -1}}.dump()).status, 400);
  EXPECT_EQ(Call("GET", "/api/v1/sessions/t", alice).status, 404);
  EXPECT_EQ(Call("GET", "/api/v1/sessions/s/messages", alice).body["result"].size(), 2u);
  Reply current = Call("POST", "/api/v1/sessions/s/revert", alice, Json{{"checkpoint", 0}, {"tag", now.body["result"]["tag"]}}.dump());
  ASSERT_EQ(current.status, 200) << current.raw;
  EXPECT_EQ(Call("GET", "/api/v1/sessions/s/messages", alice).body["result"].size(), 1u);
}

// Agents editing one memory at once through MCP's edit: every edit lands (each writes only over the content
// it read, and reads again when another got in first), where the last writer used to erase the others'.
TEST_F(TrustTest, ConcurrentMcpEditsOfOneMemoryAllLand) {
  std::string alice = Issue("alice");
  const std::string uri = "strata://user/alice/memories/plans/week";
  const std::vector<std::string> days = {"mon", "tue", "wed", "thu", "fri", "sat"};
  std::string text;
  for (const std::string& d : days) text += d + ": free. ";
  ASSERT_EQ(Call("POST", "/api/v1/fs/write", alice, Json{{"uri", uri}, {"content", text}}.dump()).status, 200);
  std::vector<std::thread> agents;
  std::vector<Reply> replies(days.size());
  for (size_t i = 0; i < days.size(); ++i) {
    agents.emplace_back([&, i] {
      Json call = Json::parse(McpCall("edit", {{"uri", uri}, {"old_text", days[i] + ": free."}, {"new_text", days[i] + ": busy."}}));
      call["id"] = 100 + static_cast<int>(i);  // Requests in flight at once need ids of their own.
      replies[i] = Call("POST", "/mcp", alice, call.dump());
    });
  }
  for (std::thread& t : agents) t.join();
  for (const Reply& r : replies) {
    ASSERT_EQ(r.status, 200) << r.raw;
    EXPECT_EQ(r.raw.find("isError\":true"), std::string::npos) << r.raw;
    EXPECT_NE(r.raw.find("\"replaced\":1"), std::string::npos) << r.raw;
  }
  Reply read = Call("GET", "/api/v1/fs/read?uri=" + Q(uri), alice);
  ASSERT_EQ(read.status, 200) << read.raw;
  std::string want;
  for (const std::string& d : days) want += d + ": busy. ";
  EXPECT_EQ(read.body["result"]["content"], want);
  // A directory has no content to edit, whatever its listing holds (the answer was "not found" or "occurs N
  // times", as the listing went).
  for (const std::string old_text : {"week", "zzz"}) {
    Reply dir = Call("POST", "/mcp", alice,
                     McpCall("edit", {{"uri", "strata://user/alice/memories/plans"}, {"old_text", old_text}, {"new_text", "x"}}));
    ASSERT_EQ(dir.status, 200) << dir.raw;
    EXPECT_NE(dir.raw.find("is a directory; only leaves have content"), std::string::npos) << old_text << ": " << dir.raw;
  }
}

// A commit through MCP is a commit like one over HTTP: counted, and the worker woken for it (its phase 2
// runs at once, not at the worker's next 2-second round).
TEST_F(TrustTest, AnMcpCommitIsCountedAndWakesTheWorkerAsOverHttp) {
  std::string alice = Issue("alice");
  ASSERT_EQ(Call("POST", "/api/v1/sessions", alice, R"({"id": "s"})").status, 200);
  ASSERT_EQ(Call("POST", "/api/v1/sessions/s/messages", alice, R"({"role": "user", "content": "I like tea."})").status, 200);
  Reply committed = Call("POST", "/mcp", alice, McpCall("commit_session", {{"session", "s"}}));
  ASSERT_EQ(committed.status, 200) << committed.raw;
  ASSERT_EQ(committed.raw.find("isError\":true"), std::string::npos) << committed.raw;
  Reply remembered = Call("POST", "/mcp", alice,
                          McpCall("remember", {{"messages", Json::array({{{"role", "user"}, {"content", "I like oolong."}}})}}));
  ASSERT_EQ(remembered.status, 200) << remembered.raw;
  Reply metrics = Call("GET", "/metrics", kRootKey);
  ASSERT_EQ(metrics.status, 200);
  EXPECT_NE(metrics.raw.find("strata_commits_total{outcome=\"accepted\"} 2"), std::string::npos) << metrics.raw;
}

// Model help for find (FindAssist) is the same request through HTTP and MCP: the same searches, the same
// reranked hits, its cost reported, and a wrongly typed member named.
TEST_F(TrustTest, FindWithModelHelpIsTheSameOverHttpAndMcp) {
  Stop();
  // Static: it must outlive the server even when an assertion ends the test early.
  static llm::ScriptedProvider model("scripted", [](const llm::ScriptedProvider::Request& req) -> llm::ScriptedReply {
    std::string prompt = req.history.empty() ? "" : req.history[0].ExtractText();
    if (prompt.find("\"queries\"") != std::string::npos) return testing::TextReply(R"({"queries": ["night train Vienna"]})");
    return testing::TextReply(R"({"ranking": [1, 0]})");
  });
  engine_options_.model = &model;
  Start();
  std::string alice = Issue("alice");
  ASSERT_NO_FATAL_FAILURE(WriteNotes({
      {"strata://user/alice/memories/events/train", "Alice took the night train to Vienna in March."},
      {"strata://user/alice/memories/events/flight", "Alice flew to Lisbon for a conference in May."},
      {"strata://user/alice/memories/preferences/seat", "Alice books aisle seats when she travels."}}));
  Json args = {{"query", "How did Alice travel to Austria?"}, {"rewrite", true}, {"rerank", true}, {"limit", 3}};
  Reply http = Call("POST", "/api/v1/search/find", alice, args.dump());
  ASSERT_EQ(http.status, 200) << http.raw;
  Reply mcp = Call("POST", "/mcp", alice, McpCall("find", args));
  ASSERT_EQ(mcp.status, 200) << mcp.raw;
  const Json& over_http = http.body["result"];
  const Json& over_mcp = mcp.body["result"]["structuredContent"];
  EXPECT_EQ(over_http["queries"], Json::array({"night train Vienna"})) << http.raw;
  EXPECT_EQ(HitUris(over_mcp["hits"]), HitUris(over_http["hits"]));
  EXPECT_EQ(over_mcp["queries"], over_http["queries"]);
  EXPECT_EQ(over_http["model"]["calls"], 2) << http.raw;
  EXPECT_FALSE(over_http["model"].contains("error")) << http.raw;
  EXPECT_EQ(over_mcp["model"]["calls"], 2) << mcp.raw;
  // Without help the same question asks no model and reports no cost.
  Reply plain = Call("POST", "/api/v1/search/find", alice, Json{{"query", "How did Alice travel to Austria?"}}.dump());
  ASSERT_EQ(plain.status, 200);
  EXPECT_FALSE(plain.body["result"].contains("model")) << plain.raw;
  Reply wrong = Call("POST", "/api/v1/search/find", alice, Json{{"query", "x"}, {"rerank", "yes"}}.dump());
  EXPECT_EQ(wrong.status, 400) << wrong.raw;
  EXPECT_NE(wrong.raw.find("\\\"rerank\\\""), std::string::npos) << wrong.raw;
  Stop();
  engine_options_.model = nullptr;
}

}  // namespace
}  // namespace strata::server
