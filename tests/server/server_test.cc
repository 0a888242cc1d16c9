// `strata serve` over real HTTP on loopback: the envelope, keys, per-user and per-account isolation by
// every route (crafted URIs included), graceful shutdown, and the OpenAPI document against the routes.
#include "strata/server/server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <yaml-cpp/yaml.h>

#include <atomic>
#include <mutex>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <thread>

#include "server/access.h"
#include "server/server_fixture.h"
#include "session/pipeline_stage.h"
#include "test_util.h"

namespace strata::server {
namespace {

TEST_F(ServerTest, EveryResponseIsOneEnvelopeWithARequestId) {
  Reply health = Call("GET", "/health", "");
  EXPECT_EQ(health.status, 200);
  EXPECT_EQ(health.body["status"], "ok");
  EXPECT_EQ(health.body["result"]["alive"], true);
  EXPECT_FALSE(health.request_id.empty());
  Reply echoed = Call("GET", "/health", "", "", {{"X-Request-Id", "trace-42"}});
  EXPECT_EQ(echoed.request_id, "trace-42");

  Reply no_stream = Call("GET", "/mcp", kRootKey);
  EXPECT_EQ(no_stream.status, 405);
  EXPECT_EQ(no_stream.body["error"]["request_id"], no_stream.request_id) << no_stream.raw;

  Reply no_route = Call("GET", "/api/v1/nothing", kRootKey);
  EXPECT_EQ(no_route.status, 404);
  EXPECT_EQ(no_route.body["status"], "error");
  EXPECT_EQ(no_route.body["error"]["code"], "not_found");

  Reply bad_json = Call("POST", "/api/v1/fs/write", kRootKey, "{\"uri\": ");
  EXPECT_EQ(bad_json.status, 400);
  EXPECT_EQ(bad_json.body["error"]["code"], "invalid_argument");
  EXPECT_NE(bad_json.body["error"]["message"].get<std::string>().find("request body: invalid JSON"), std::string::npos);
  // A member of the wrong type is refused, naming it, and writes nothing (an abstract of 7 was dropped).
  for (const char* member : {"abstract", "overview", "category"}) {
    Json body = {{"uri", "strata://resources/typed"}, {"content", "text"}, {member, 7}};
    Reply typed = Call("POST", "/api/v1/fs/write", kRootKey, body.dump());
    EXPECT_EQ(typed.status, 400) << typed.raw;
    EXPECT_NE(typed.body["error"]["message"].get<std::string>().find(std::string("\"") + member + "\" must be a string"),
              std::string::npos) << typed.raw;
  }
  EXPECT_EQ(Call("GET", "/api/v1/fs/stat?uri=strata://resources/typed", kRootKey).status, 404);
  EXPECT_EQ(bad_json.body["error"]["request_id"], bad_json.request_id);
  // A true or false of the wrong type is refused, naming it: "overwrite": "false" overwrote the node.
  ASSERT_EQ(Call("POST", "/api/v1/fs/write", kRootKey, R"({"uri": "strata://resources/kept", "content": "ORIGINAL"})").status,
            200);
  for (const char* value : {R"("false")", "0", "null"}) {
    Reply typed = Call("POST", "/api/v1/fs/write", kRootKey,
                       std::string(R"({"uri": "strata://resources/kept", "content": "CLOBBERED", "overwrite": )") + value + "}");
    if (std::string(value) == "null") {  // Absent: the default (overwrite).
      EXPECT_EQ(typed.status, 200) << typed.raw;
      continue;
    }
    EXPECT_EQ(typed.status, 400) << typed.raw;
    EXPECT_NE(typed.raw.find("\\\"overwrite\\\" must be true or false"), std::string::npos) << typed.raw;
  }
  Reply kept = Call("GET", "/api/v1/fs/read?uri=strata://resources/kept", kRootKey);
  EXPECT_EQ(kept.body["result"]["content"], "CLOBBERED") << kept.raw;  // Only the null one wrote.
  EXPECT_EQ(Call("GET", "/api/v1/fs/ls?uri=strata://resources&recursive=yes", kRootKey).status, 400);
  EXPECT_EQ(Call("DELETE", "/api/v1/fs?uri=strata://resources/kept&recursive=maybe", kRootKey).status, 400);
  EXPECT_EQ(Call("GET", "/api/v1/fs/read?uri=strata://resources/kept", kRootKey).status, 200);

  std::string deep(100000, '[');
  Reply too_deep = Call("POST", "/api/v1/fs/write", kRootKey, deep);
  EXPECT_EQ(too_deep.status, 400);
  EXPECT_NE(too_deep.raw.find("nested deeper"), std::string::npos) << too_deep.raw;

  for (const char* body : {R"("strata://resources/a")", "null", "42", "[1, 2]"}) {  // A list only where messages go.
    Reply scalar = Call("POST", "/api/v1/fs/write", kRootKey, body);
    EXPECT_EQ(scalar.status, 400) << scalar.raw;
    EXPECT_NE(scalar.raw.find("request body: must be a JSON object"), std::string::npos) << scalar.raw;
  }
  Reply missing = Call("POST", "/api/v1/fs/write", kRootKey, R"({"uri": "strata://resources/a"})");
  EXPECT_EQ(missing.status, 400);
  EXPECT_NE(missing.raw.find("\\\"content\\\" is required"), std::string::npos) << missing.raw;

  Reply huge = Call("POST", "/api/v1/fs/write", kRootKey, std::string(9 << 20, ' '));
  EXPECT_EQ(huge.status, 413);
  EXPECT_EQ(huge.body["error"]["code"], "resource_exhausted");
  EXPECT_FALSE(huge.request_id.empty());
  EXPECT_EQ(huge.body["error"]["request_id"], huge.request_id) << huge.raw;
  // The model endpoints answer it in their SDKs' shapes (Anthropic's ContentTooLargeError read no type).
  Reply anthropic = Call("POST", "/v1/messages", kRootKey, std::string(9 << 20, ' '));
  EXPECT_EQ(anthropic.status, 413);
  EXPECT_EQ(anthropic.body["type"], "error") << anthropic.raw.substr(0, 300);
  EXPECT_EQ(anthropic.body["error"]["type"], "request_too_large");  // Anthropic's own type for it.
  EXPECT_FALSE(anthropic.request_id.empty());
  Reply openai = Call("POST", "/v1/chat/completions", kRootKey, std::string(9 << 20, ' '));
  EXPECT_EQ(openai.status, 413);
  EXPECT_NE(openai.body["error"]["message"].get<std::string>().find("larger than the server accepts"), std::string::npos)
      << openai.raw.substr(0, 300);

  // `curl -d` labels its body a form: a 60 KB JSON body sent that way is still a JSON body (httplib's own
  // form reading refused anything over 8 KiB).
  httplib::Client client("127.0.0.1", port_);
  std::string content(60000, 'x');
  auto form = client.Post("/api/v1/fs/write", {{"Authorization", std::string("Bearer ") + kRootKey}},
                          Json{{"uri", "strata://resources/big"}, {"content", content}}.dump(),
                          "application/x-www-form-urlencoded");
  ASSERT_TRUE(form);
  EXPECT_EQ(form->status, 200) << form->body;
}

// No response names where the server keeps its files: a message from any layer loses the data directory,
// absolute or as given.
TEST(WithoutDataDirTest, ErrorsNameFilesWithinTheDataDirectoryOnly) {
  EXPECT_EQ(server::WithoutDataDir("context /srv/strata/sessions/a/messages.jsonl was changed by another writer",
                                   "/srv/strata"),
            "context sessions/a/messages.jsonl was changed by another writer");
  EXPECT_EQ(server::WithoutDataDir("/srv/strata/x and /srv/strata/y", "/srv/strata/"), "x and y");
  const std::string cwd = std::filesystem::current_path().string();
  EXPECT_EQ(server::WithoutDataDir("open " + cwd + "/strata-data/keys.db: locked", "strata-data"), "open keys.db: locked");
  EXPECT_EQ(server::WithoutDataDir("open strata-data/keys.db: locked", "strata-data"), "open keys.db: locked");
  EXPECT_EQ(server::WithoutDataDir("/srv/strata-other/a", "/srv/strata"), "/srv/strata-other/a");
  EXPECT_EQ(server::WithoutDataDir("no strata://resources/strata-data/x or my-strata-data/y", "strata-data"),
            "no strata://resources/strata-data/x or my-strata-data/y");
  EXPECT_EQ(server::WithoutDataDir("postgresql:///strata/x", "postgresql:///strata"), "postgresql:///strata/x");
  // In a view, only the error members: a task's last_error, an archive's error; stored text stays as written.
  Json view = {{"last_error", "cannot write /srv/strata/sessions/a/history/archive_001/summary.md"},
               {"content", "notes on /srv/strata/x"},
               {"archives", Json::array({{{"error", "open /srv/strata/y failed"}}})}};
  Json shown = server::WithoutDataDirInErrors(view, "/srv/strata");
  EXPECT_EQ(shown["last_error"], "cannot write sessions/a/history/archive_001/summary.md");
  EXPECT_EQ(shown["content"], "notes on /srv/strata/x");
  EXPECT_EQ(shown["archives"][0]["error"], "open y failed");
}

// A port in use is refused: with httplib's default SO_REUSEPORT a second server bound it without an error and
// the kernel shared the requests between the two.
TEST_F(ServerTest, ASecondServerCannotListenOnAPortInUse) {
  EngineOptions engine = engine_options_;
  engine.data_dir = dir_.File("other");
  ServerOptions options = server_options_;
  options.listen = "127.0.0.1:" + std::to_string(port_);
  auto second = Server::Open(engine, options);
  ASSERT_OK(second);
  auto bound = (*second)->Bind();
  ASSERT_FALSE(bound.ok()) << "bound port " << *bound << " again";
  EXPECT_EQ(bound.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(bound.status().message().find(std::to_string(port_)), std::string::npos) << bound.status().message();
  EXPECT_EQ(Call("GET", "/health", "").status, 200) << "the first still answers";
}

// A query-string value may hold '=' (RFC 3986): it is split at the first one. (A grep for "x=5" searched for
// "5", and a read of .../a=b read the URI "b".) Percent-encoding still decodes.
TEST_F(ServerTest, QueryStringValuesMayHoldEqualsSigns) {
  for (const auto& [uri, content] : std::vector<std::pair<std::string, std::string>>{
           {"strata://resources/t3/a=b", "the node named a=b"},
           {"strata://resources/t3/one", "retries: x=5 here"},
           {"strata://resources/t3/two", "retries: 5 there"}}) {
    ASSERT_EQ(Call("POST", "/api/v1/fs/write", kRootKey, Json{{"uri", uri}, {"content", content}}.dump()).status, 200);
  }
  Reply read = Call("GET", "/api/v1/fs/read?uri=strata://resources/t3/a=b", kRootKey);
  EXPECT_EQ(read.status, 200) << read.raw;
  EXPECT_EQ(read.body["result"]["content"], "the node named a=b") << read.raw;
  Reply grep = Call("GET", "/api/v1/fs/grep?pattern=x=5&under=strata://resources/t3", kRootKey);
  ASSERT_EQ(grep.status, 200) << grep.raw;
  ASSERT_EQ(grep.body["result"].size(), 1u) << grep.raw;
  EXPECT_EQ(grep.body["result"][0]["uri"], "strata://resources/t3/one");
  // (The test client sends a '+' as %2B; curl's + for a space decodes too, by hand.)
  Reply encoded = Call("GET", "/api/v1/fs/grep?pattern=x%3D5%20here&under=strata%3A%2F%2Fresources%2Ft3", kRootKey);
  ASSERT_EQ(encoded.status, 200) << encoded.raw;
  EXPECT_EQ(encoded.body["result"].size(), 1u) << encoded.raw;
}

// A chat export posted as text becomes the caller's sessions, once; a user key imports for its own user only.
TEST_F(ServerTest, AChatExportBecomesTheCallersSessionsOnce) {
  std::string alice = Issue("alice");
  const std::string claude = R"json([{"uuid": "u-1", "name": "Trip", "created_at": "2026-01-06T21:03:50Z",
      "updated_at": "2026-01-06T22:00:00Z", "chat_messages": [
        {"uuid": "m1", "sender": "human", "text": "Plan three days in Kyoto."},
        {"uuid": "m2", "sender": "assistant", "text": "Day one: Fushimi Inari at dawn."}]},
      {"uuid": "u-2", "name": "Empty", "chat_messages": []}])json";
  Json body = {{"format", "claude"}, {"content", claude}, {"name", "conversations.json"}};
  Reply first = Call("POST", "/api/v1/sessions/import", alice, body.dump());
  ASSERT_EQ(first.status, 200) << first.raw;
  const Json& r = first.body["result"];
  ASSERT_EQ(r["imported"].size(), 1u) << first.raw;
  EXPECT_EQ(r["imported"][0]["title"], "Trip");
  EXPECT_EQ(r["imported"][0]["messages"], 2);
  ASSERT_EQ(r["skipped"].size(), 1u);
  EXPECT_NE(r["skipped"][0]["where"].get<std::string>().find("conversations.json[1]"), std::string::npos) << first.raw;
  std::string id = r["imported"][0]["session"];
  Reply session = Call("GET", "/api/v1/sessions/" + id, alice);
  ASSERT_EQ(session.status, 200) << session.raw;
  EXPECT_EQ(session.body["result"]["user"], "alice");
  EXPECT_EQ(session.body["result"]["title"], "Trip");
  EXPECT_EQ(session.body["result"]["created_ms"], 1767733430000);
  EXPECT_EQ(session.body["result"]["messages"].size(), 2u);
  Reply second = Call("POST", "/api/v1/sessions/import", alice, body.dump());
  ASSERT_EQ(second.status, 200);
  EXPECT_TRUE(second.body["result"]["imported"].empty());
  EXPECT_EQ(second.body["result"]["unchanged"], Json::array({id}));
  // Not for another user; not in an unknown format; not without the text.
  body["user"] = "bob";
  EXPECT_EQ(Call("POST", "/api/v1/sessions/import", alice, body.dump()).status, 403);
  Reply format = Call("POST", "/api/v1/sessions/import", alice, Json{{"format", "gpt"}, {"content", "[]"}}.dump());
  EXPECT_EQ(format.status, 400);
  EXPECT_NE(format.raw.find("openai-jsonl"), std::string::npos) << format.raw;
  EXPECT_EQ(Call("POST", "/api/v1/sessions/import", alice, Json{{"format", "claude"}, {"content", 5}}.dump()).status, 400);
  EXPECT_EQ(Call("POST", "/api/v1/sessions/import", alice, Json{{"format", "claude"}, {"content", "{"}}.dump()).status, 400);
  // The root key imports for the user it names.
  Reply root = Call("POST", "/api/v1/sessions/import", kRootKey,
                    Json{{"format", "claude"}, {"content", claude}, {"user", "bob"}}.dump());
  ASSERT_EQ(root.status, 200) << root.raw;
  EXPECT_NE(root.body["result"]["imported"][0]["session"], id);
}

// Documents carried in a request become the caller's resources, over HTTP and MCP alike; a file sent again
// unchanged is not written again; a PDF travels as base64.
TEST_F(ServerTest, DocumentsPostedAsFilesBecomeResourcesOnce) {
  std::string alice = Issue("alice");
  testing::TempDir tmp;
  ASSERT_EQ(std::system(("printf '.PP\\nThe orchard ledger lists every Bramley tree.\\n' | groff -ms -Tpdf > " +
                         tmp.File("ledger.pdf") + " 2>/dev/null").c_str()),
            0);
  std::ifstream in(tmp.File("ledger.pdf"), std::ios::binary);
  std::string pdf((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  static constexpr char kB64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string b64;
  for (size_t i = 0; i < pdf.size(); i += 3) {
    uint32_t n = static_cast<uint8_t>(pdf[i]) << 16;
    if (i + 1 < pdf.size()) n |= static_cast<uint8_t>(pdf[i + 1]) << 8;
    if (i + 2 < pdf.size()) n |= static_cast<uint8_t>(pdf[i + 2]);
    b64 += kB64[(n >> 18) & 63];
    b64 += kB64[(n >> 12) & 63];
    b64 += i + 1 < pdf.size() ? kB64[(n >> 6) & 63] : '=';
    b64 += i + 2 < pdf.size() ? kB64[n & 63] : '=';
  }
  Json body = {{"uri", "strata://user/alice/docs"},
               {"files", {{{"path", "guide/intro.md"}, {"content", "# Intro\n\nPrune apple trees in February.\n"}},
                          {{"path", "ledger.pdf"}, {"content", b64}, {"encoding", "base64"}}}}};
  Reply first = Call("POST", "/api/v1/resources", alice, body.dump());
  ASSERT_EQ(first.status, 200) << first.raw;
  EXPECT_EQ(first.body["result"]["added"], Json::array({"guide/intro.md", "ledger.pdf"})) << first.raw;
  EXPECT_GT(first.body["result"]["chunks"].get<int64_t>(), 1);
  Reply found = Call("POST", "/api/v1/search/find", alice, Json{{"query", "Bramley ledger"}}.dump());
  ASSERT_EQ(found.status, 200);
  EXPECT_EQ(found.body["result"]["hits"][0]["uri"].get<std::string>().rfind("strata://user/alice/docs/ledger.pdf/", 0), 0u)
      << found.raw;
  // The same files through MCP: unchanged, nothing written.
  Json call = {{"jsonrpc", "2.0"}, {"id", 3}, {"method", "tools/call"},
               {"params", {{"name", "add_resource"}, {"arguments", body}}}};
  Reply mcp = Call("POST", "/mcp", alice, call.dump());
  ASSERT_EQ(mcp.status, 200) << mcp.raw;
  const Json& structured = mcp.body["result"]["structuredContent"];
  EXPECT_EQ(structured["unchanged"], Json::array({"guide/intro.md", "ledger.pdf"})) << mcp.raw;
  EXPECT_EQ(structured["chunks"], 0);
  // Not in another user's scope; not with bad base64 or a path that climbs out.
  body["uri"] = "strata://user/bob/docs";
  EXPECT_EQ(Call("POST", "/api/v1/resources", alice, body.dump()).status, 403);
  Reply bad = Call("POST", "/api/v1/resources", alice,
                   Json{{"uri", "strata://user/alice/docs"},
                        {"files", {{{"path", "x.pdf"}, {"content", "%%%"}, {"encoding", "base64"}}}}}.dump());
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.raw.find("files[0].content is not base64"), std::string::npos) << bad.raw;
  // A path a tree cannot hold refuses the request, naming the file, whichever the mistake (a climb was
  // skipped inside a 200 while "a//b" was a 400); so does a path given twice (reported added and updated).
  for (const char* path : {"../../x.md", "a/./c.md", "a//b.md", "tab\tname.md", "/abs.md", "trail/"}) {
    Reply refused = Call("POST", "/api/v1/resources", alice,
                         Json{{"uri", "strata://user/alice/docs"}, {"files", {{{"path", "ok.md"}, {"content", "x"}},
                                                                              {{"path", path}, {"content", "x"}}}}}.dump());
    EXPECT_EQ(refused.status, 400) << path << ": " << refused.raw;
    EXPECT_NE(refused.raw.find("files[1].path must be a relative path"), std::string::npos) << refused.raw;
  }
  Reply twice = Call("POST", "/api/v1/resources", alice,
                     Json{{"uri", "strata://user/alice/docs"}, {"files", {{{"path", "dup.md"}, {"content", "one"}},
                                                                          {{"path", "dup.md"}, {"content", "two"}}}}}.dump());
  EXPECT_EQ(twice.status, 400) << twice.raw;
  EXPECT_NE(twice.raw.find("files[1].path \\\"dup.md\\\" is files[0]'s too"), std::string::npos) << twice.raw;
  EXPECT_EQ(Call("GET", "/api/v1/fs/stat?uri=" + Q("strata://user/alice/docs/ok.md"), alice).status, 404) << "nothing added";
  EXPECT_EQ(Call("POST", "/api/v1/resources", alice, Json{{"uri", "strata://user/alice/docs"}, {"files", 3}}.dump()).status, 400);
  // No file at all is refused as MCP's schema refuses it: with remove_missing it removed every file an earlier
  // add brought.
  Reply none = Call("POST", "/api/v1/resources", alice,
                    Json{{"uri", "strata://user/alice/docs"}, {"files", Json::array()}, {"remove_missing", true}}.dump());
  EXPECT_EQ(none.status, 400) << none.raw;
  EXPECT_NE(none.raw.find("\\\"files\\\" needs at least 1 item"), std::string::npos) << none.raw;
  EXPECT_EQ(Call("GET", "/api/v1/fs/stat?uri=" + Q("strata://user/alice/docs/guide/intro.md"), alice).status, 200);
  // So is an import of no file (it was 404 naming the server's scratch directory).
  Reply no_tree = Call("POST", "/api/v1/fs/import", alice, Json{{"uri", "strata://user/alice/docs"}, {"files", Json::array()}}.dump());
  EXPECT_EQ(no_tree.status, 400) << no_tree.raw;
  EXPECT_NE(no_tree.raw.find("\\\"files\\\" needs at least 1 item"), std::string::npos) << no_tree.raw;
  EXPECT_EQ(no_tree.raw.find("tree-"), std::string::npos) << no_tree.raw;
  // A misspelt member of a file is refused, naming it, on both routes that take files (it was ignored, and
  // "encodng": "base64" stored the base64 text as the document).
  for (const char* route : {"/api/v1/resources", "/api/v1/fs/import"}) {
    Reply misspelt = Call("POST", route, alice,
                          Json{{"uri", "strata://user/alice/docs"},
                               {"files", {{{"path", "pic.md"}, {"content", "IyBTZWNyZXQ="}, {"encodng", "base64"}}}}}.dump());
    EXPECT_EQ(misspelt.status, 400) << route << ": " << misspelt.raw;
    EXPECT_NE(misspelt.raw.find("files[0]: unknown member \\\"encodng\\\""), std::string::npos) << misspelt.raw;
  }
  EXPECT_EQ(Call("GET", "/api/v1/fs/stat?uri=" + Q("strata://user/alice/docs/pic.md"), alice).status, 404);
  // chunk_tokens is read as every integer member: 16.0 is 16, and a number past 64 bits is named so (it was
  // wrapped: 2^64 - 1 was "not -1").
  for (const char* raw : {"18446744073709551615", "18446744073709551621", "9223372036854775808"}) {
    Reply wide = Call("POST", "/api/v1/resources", alice,
                      std::string(R"({"uri": "strata://user/alice/docs", "files": [{"path": "w.md", "content": "# W"}], "chunk_tokens": )") +
                          raw + "}");
    EXPECT_EQ(wide.status, 400) << raw << ": " << wide.raw;
    EXPECT_NE(wide.raw.find("\\\"chunk_tokens\\\" must be an integer of at most 64 bits"), std::string::npos) << wide.raw;
  }
  Reply sixteen = Call("POST", "/api/v1/resources", alice,
                       R"({"uri": "strata://user/alice/docs", "files": [{"path": "s.md", "content": "# S"}], "chunk_tokens": 16.0})");
  EXPECT_EQ(sixteen.status, 200) << sixteen.raw;
}

TEST_F(ServerTest, KeysAreRequiredAndIssuedByTheRootKey) {
  Reply none = Call("GET", "/api/v1/fs/ls", "");
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(none.body["error"]["code"], "unauthenticated");
  EXPECT_EQ(Call("GET", "/api/v1/fs/ls", "sk-strata-not-a-key").status, 401);
  std::string alice = Issue("alice");
  Reply negative = Call("GET", "/api/v1/fs/ls?limit=-5", alice);
  EXPECT_EQ(negative.status, 400) << "a negative limit is an error, not \"no limit\"";
  EXPECT_EQ(negative.body["error"]["message"], "\"limit\" must be 0 (no limit) or more, not -5") << negative.raw;
  // The largest limit is no limit (one more than it was asked of the store: SQL's integers cannot hold it).
  for (const char* route : {"/api/v1/fs/ls", "/api/v1/fs/tree"}) {
    Reply largest = Call("GET", std::string(route) + "?limit=9223372036854775807", alice);
    EXPECT_EQ(largest.status, 200) << route << ": " << largest.raw;
  }
  EXPECT_EQ(alice.rfind("sk-strata-", 0), 0u);
  // X-API-Key works as well as the bearer header.
  httplib::Client client("127.0.0.1", port_);
  auto r = client.Get("/api/v1/sessions", httplib::Headers{{"X-API-Key", alice}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  // Only the root key manages keys; a revoked key stops working.
  EXPECT_EQ(Call("POST", "/api/v1/admin/keys", alice, R"({"user": "mallory", "role": "admin"})").status, 403);
  Reply listed = Call("GET", "/api/v1/admin/keys", kRootKey);
  ASSERT_EQ(listed.body["result"].size(), 1u);
  std::string id = listed.body["result"][0]["id"];
  EXPECT_EQ(listed.raw.find(alice), std::string::npos) << "secrets are never listed";
  EXPECT_EQ(Call("DELETE", "/api/v1/admin/keys/" + id, kRootKey).status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/sessions", alice).status, 401);
  // Keys survive a restart (only their hashes are stored).
  std::string bob = Issue("bob");
  Stop();
  Start();
  EXPECT_EQ(Call("GET", "/api/v1/sessions", bob).status, 200);
}

TEST_F(ServerTest, AUserCannotReachAnotherUsersContextsByAnyRoute) {
  std::string alice = Issue("alice");
  std::string bob = Issue("bob");
  const std::string secret = "strata://user/alice/memories/profile/secret";
  ASSERT_EQ(Call("POST", "/api/v1/fs/write", alice,
                 Json{{"uri", secret}, {"content", "Alice's passport number is X123"}}.dump()).status, 200);
  ASSERT_EQ(Call("POST", "/api/v1/fs/write", bob,
                 Json{{"uri", "strata://user/bob/memories/profile/note"}, {"content", "Bob likes passports"}}.dump())
                .status, 200);
  // Alice reads her own.
  EXPECT_EQ(Call("GET", "/api/v1/fs/read?uri=" + Q(secret), alice).status, 200);

  // Bob, by every route and every spelling of the URI.
  for (const std::string& uri : {secret, std::string("viking://user/alice/memories/profile/secret"),
                                 std::string("strata://user/alice"), std::string("strata://user"),
                                 std::string("strata://"), std::string("strata://user/alice/")}) {
    SCOPED_TRACE(uri);
    for (const char* path : {"/api/v1/fs/read?uri=", "/api/v1/fs/stat?uri=", "/api/v1/fs/ls?uri=",
                                    "/api/v1/fs/tree?uri=", "/api/v1/memories/history?uri="}) {
      Reply r = Call("GET", std::string(path) + Q(uri), bob);
      EXPECT_EQ(r.status, 403) << path << " " << r.raw;
      EXPECT_EQ(r.raw.find("X123"), std::string::npos);
    }
    EXPECT_EQ(Call("GET", "/api/v1/fs/glob?pattern=**&under=" + Q(uri), bob).status, 403);
    EXPECT_EQ(Call("GET", "/api/v1/fs/grep?pattern=passport&under=" + Q(uri), bob).status, 403);
    EXPECT_EQ(Call("POST", "/api/v1/search/find", bob, Json{{"query", "passport"}, {"under", uri}}.dump()).status, 403);
    EXPECT_EQ(Call("DELETE", "/api/v1/fs?recursive=true&uri=" + Q(uri), bob).status, 403);
  }
  for (const std::string& uri : {secret, std::string("strata://user/alice/memories/new")}) {
    EXPECT_EQ(Call("POST", "/api/v1/fs/write", bob, Json{{"uri", uri}, {"content", "overwrite"}}.dump()).status, 403);
    EXPECT_EQ(Call("POST", "/api/v1/fs/mkdir", bob, Json{{"uri", uri + "dir"}}.dump()).status, 403);
  }
  // Percent-encoding decodes to the same URI and is refused the same way.
  Reply encoded = Call("GET", "/api/v1/fs/read?uri=strata%3A%2F%2Fuser%2F%61lice%2Fmemories%2Fprofile%2Fsecret", bob);
  EXPECT_EQ(encoded.status, 403) << encoded.raw;
  // '..' is not a path step: the URI is invalid.
  EXPECT_EQ(Call("GET", "/api/v1/fs/read?uri=" + Q("strata://user/bob/../alice/memories/profile/secret"), bob).status,
            400);
  // Moving, linking or remembering across users.
  EXPECT_EQ(Call("POST", "/api/v1/fs/mv", bob,
                 Json{{"from", secret}, {"to", "strata://user/bob/memories/stolen"}}.dump()).status, 403);
  EXPECT_EQ(Call("POST", "/api/v1/fs/link", bob,
                 Json{{"from", "strata://user/bob/memories/profile/note"}, {"to", secret}}.dump()).status, 403);
  EXPECT_EQ(Call("POST", "/api/v1/memories/remember", bob,
                 Json{{"scope", "strata://user/alice"}, {"text", "Alice owes Bob"}}.dump()).status, 403);
  // Without `under`, a user's searches cover the user's own scope only.
  Reply find = Call("POST", "/api/v1/search/find", bob, R"({"query": "passport"})");
  ASSERT_EQ(find.status, 200) << find.raw;
  EXPECT_EQ(find.raw.find("alice"), std::string::npos) << find.raw;
  EXPECT_NE(find.raw.find("strata://user/bob/memories/profile/note"), std::string::npos) << find.raw;
  Reply grep = Call("GET", "/api/v1/fs/grep?pattern=passport", bob);
  ASSERT_EQ(grep.status, 200);
  EXPECT_EQ(grep.raw.find("alice"), std::string::npos) << grep.raw;
  // Alice's memory is untouched.
  Reply after = Call("GET", "/api/v1/fs/read?uri=" + Q(secret), alice);
  EXPECT_EQ(after.body["result"]["content"], "Alice's passport number is X123");
}

// Found in review: what the store returns or keeps must not reveal another user's URIs either.
TEST_F(ServerTest, RelationsAndReferencesNeverRevealAnotherUsersUris) {
  std::string alice = Issue("alice");
  std::string bob = Issue("bob");
  ASSERT_EQ(Call("POST", "/api/v1/fs/write", alice,
                 Json{{"uri", "strata://resources/doc"}, {"content", "shared doc"}}.dump()).status, 200);
  ASSERT_EQ(Call("POST", "/api/v1/fs/write", alice,
                 Json{{"uri", "strata://user/alice/memories/plan"}, {"content", "secret plan"}}.dump()).status, 200);
  ASSERT_EQ(Call("POST", "/api/v1/fs/link", alice,
                 Json{{"from", "strata://user/alice/memories/plan"}, {"to", "strata://resources/doc"}}.dump()).status, 200);
  Reply as_alice = Call("GET", "/api/v1/fs/stat?uri=" + Q("strata://resources/doc"), alice);
  EXPECT_NE(as_alice.raw.find("strata://user/alice/memories/plan"), std::string::npos) << as_alice.raw;
  Reply as_bob = Call("GET", "/api/v1/fs/stat?uri=" + Q("strata://resources/doc"), bob);
  ASSERT_EQ(as_bob.status, 200);
  EXPECT_EQ(as_bob.raw.find("alice"), std::string::npos) << as_bob.raw;
  // A context_ref into another user's scope is refused before it is stored (phase 2 would link to it).
  ASSERT_EQ(Call("POST", "/api/v1/sessions", bob, R"({"id": "b1"})").status, 200);
  Reply ref = Call("POST", "/api/v1/sessions/b1/messages", bob,
                   R"({"role": "user", "content": [{"type": "context_ref", "uri": "strata://user/alice/memories/plan"}]})");
  EXPECT_EQ(ref.status, 403) << ref.raw;
  // A user key cannot remove a shared scope as a whole, and an empty required URI is not "everything".
  EXPECT_EQ(Call("DELETE", "/api/v1/fs?recursive=true&uri=" + Q("strata://resources"), bob).status, 403);
  EXPECT_EQ(Call("DELETE", "/api/v1/fs?recursive=true&uri=", kRootKey).status, 400);
  EXPECT_EQ(Call("GET", "/api/v1/fs/read?uri=" + Q("strata://resources/doc"), alice).status, 200);
}

TEST_F(ServerTest, CrossOriginRequestsAreRefused) {
  EXPECT_EQ(Call("GET", "/api/v1/fs/ls", kRootKey, "", {{"Origin", "http://evil.example"}}).status, 403);
  std::string same = "http://127.0.0.1:" + std::to_string(port_);
  EXPECT_EQ(Call("GET", "/api/v1/fs/ls", kRootKey, "", {{"Origin", same}}).status, 200);
}

TEST(ServerOpen, WithoutKeysOnlyLoopbackHostNamesAreAnswered) {
  testing::TempDir dir;
  auto server = Server::Open({.data_dir = dir.File("data")}, {.listen = "127.0.0.1:0", .read_root_key_from_env = false});
  ASSERT_OK(server);
  auto port = (*server)->Bind();
  ASSERT_OK(port);
  std::thread serving([&] { (void)(*server)->Serve(); });
  httplib::Client client("127.0.0.1", *port);
  auto fine = client.Get("/api/v1/fs/ls");
  ASSERT_TRUE(fine);
  EXPECT_EQ(fine->status, 200);
  auto rebound = client.Get("/api/v1/fs/ls", httplib::Headers{{"Host", "attacker.example:8420"}});
  ASSERT_TRUE(rebound);
  EXPECT_EQ(rebound->status, 403) << "DNS rebinding: a page of attacker.example resolved to 127.0.0.1";
  // Names that only look like loopback addresses are names an attacker may own and resolve to 127.0.0.1.
  for (const char* host : {"127.evil.example:8420", "127.0.0.1.nip.io", "localhost.evil.example", "0x7f.example"}) {
    auto named = client.Get("/api/v1/fs/ls", httplib::Headers{{"Host", host}, {"Origin", std::string("http://") + host}});
    ASSERT_TRUE(named);
    EXPECT_EQ(named->status, 403) << host;
  }
  for (const char* host : {"127.0.0.1:1", "127.1.2.3", "localhost:8420", "LOCALHOST", "[::1]:8420"}) {
    auto loopback = client.Get("/api/v1/fs/ls", httplib::Headers{{"Host", host}});
    ASSERT_TRUE(loopback);
    EXPECT_EQ(loopback->status, 200) << host;
  }
  (*server)->Shutdown();
  serving.join();
}

// An absent encoding is the default; "" names none and is refused, as MCP's schema, Python and the CLI refuse
// it (HTTP counted it as o200k_base).
TEST_F(ServerTest, AnEmptyEncodingIsRefusedNotTakenForTheDefault) {
  std::string alice = Issue("alice");
  Reply absent = Call("POST", "/api/v1/tokens/count", alice, R"({"text": "hello"})");
  ASSERT_EQ(absent.status, 200) << absent.raw;
  EXPECT_EQ(absent.body["result"]["encoding"], "o200k_base");
  Reply empty = Call("POST", "/api/v1/tokens/count", alice, R"({"text": "hello", "encoding": ""})");
  EXPECT_EQ(empty.status, 400) << empty.raw;
  // Text and messages at once: the text was dropped without a word (no other front end can give both).
  Reply both = Call("POST", "/api/v1/tokens/count", alice,
                    R"({"text": "a", "messages": [{"role": "user", "content": "hello there"}]})");
  EXPECT_EQ(both.status, 400) << both.raw;
  EXPECT_NE(both.raw.find("not both"), std::string::npos) << both.raw;
  // Variables that are not an object were dropped (the render then missed a variable, or went on without).
  Reply listed = Call("POST", "/api/v1/prompts/render", alice, R"({"id": "resource.summarize", "vars": [1]})");
  EXPECT_EQ(listed.status, 400) << listed.raw;
  EXPECT_NE(listed.raw.find("\\\"vars\\\" must be an object"), std::string::npos) << listed.raw;
  ASSERT_EQ(Call("POST", "/api/v1/sessions", alice, R"({"id": "enc"})").status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/sessions/enc/context?encoding=", alice).status, 400);
  EXPECT_EQ(Call("GET", "/api/v1/sessions/enc/context", alice).status, 200);
}

// A body is one message, {"message": ...} or {"messages": [...]}: a body holding two of them was answered
// 200 with one of them logged and the other dropped without a word.
TEST_F(ServerTest, AnAppendGivenTwoSetsOfMessagesIsRefusedNotHalfTaken) {
  std::string alice = Issue("alice");
  ASSERT_EQ(Call("POST", "/api/v1/sessions", alice, R"({"id": "two"})").status, 200);
  Reply both = Call("POST", "/api/v1/sessions/two/messages", alice,
                    R"({"message": {"role": "user", "content": "KEEP ME"}, "messages": [{"role": "user", "content": "other"}]})");
  EXPECT_EQ(both.status, 400) << both.raw;
  EXPECT_NE(both.raw.find("not both"), std::string::npos) << both.raw;
  Reply mixed = Call("POST", "/api/v1/sessions/two/messages", alice,
                     R"({"role": "user", "content": "KEEP ME", "messages": [{"role": "user", "content": "other"}]})");
  EXPECT_EQ(mixed.status, 400) << mixed.raw;
  EXPECT_NE(mixed.raw.find("or \\\"messages\\\", not both"), std::string::npos) << mixed.raw;
  EXPECT_EQ(Call("POST", "/api/v1/sessions/two/messages", alice, R"({"messages": []})").status, 400);
  EXPECT_EQ(Call("GET", "/api/v1/sessions/two/messages", alice).body["result"].size(), 0u) << "nothing was logged";
  for (const char* body : {R"({"role": "user", "content": "a"})", R"({"message": {"role": "user", "content": "b"}})",
                           R"({"messages": [{"role": "user", "content": "c"}]})", R"([{"role": "user", "content": "d"}])"}) {
    EXPECT_EQ(Call("POST", "/api/v1/sessions/two/messages", alice, body).status, 200) << body;
  }
  EXPECT_EQ(Call("GET", "/api/v1/sessions/two/messages", alice).body["result"].size(), 4u);
}

TEST_F(ServerTest, SessionsAreVisibleToTheirOwnerOnly) {
  std::string alice = Issue("alice");
  std::string bob = Issue("bob");
  ASSERT_EQ(Call("POST", "/api/v1/sessions", alice, R"({"id": "trip"})").status, 200);
  EXPECT_EQ(Call("POST", "/api/v1/sessions", bob, R"({"id": "b1", "user": "alice"})").status, 403);
  Reply added = Call("POST", "/api/v1/sessions/trip/messages", alice,
                     R"({"messages": [{"role": "user", "content": "I fly to Kyoto in April."},
                                     {"role": "assistant", "content": "Noted."}]})");
  ASSERT_EQ(added.status, 200) << added.raw;
  EXPECT_EQ(added.body["result"]["stats"]["messages"], 2);
  for (const auto& [method, path] : std::vector<std::pair<std::string, std::string>>{
           {"GET", "/api/v1/sessions/trip"}, {"GET", "/api/v1/sessions/trip/messages"},
           {"POST", "/api/v1/sessions/trip/messages"}, {"POST", "/api/v1/sessions/trip/commit"},
           {"GET", "/api/v1/sessions/trip/status"}, {"POST", "/api/v1/sessions/trip/checkpoints"},
           {"GET", "/api/v1/sessions/trip/log"}, {"POST", "/api/v1/sessions/trip/revert"},
           {"POST", "/api/v1/sessions/trip/fork"}, {"POST", "/api/v1/sessions/trip/compact"},
           {"POST", "/api/v1/sessions/trip/system-prompt"}, {"GET", "/api/v1/sessions/trip/context"},
           {"GET", "/api/v1/sessions/trip/archives/1/diff"}, {"DELETE", "/api/v1/sessions/trip"}}) {
    std::string templ = std::regex_replace(std::regex_replace(path, std::regex("/trip"), "/{id}"), std::regex("/1/"), "/{archive}/");
    Reply r = Call(method, path, bob,
                   OnlyTaken(method, templ, R"({"role": "user", "content": "hijack", "checkpoint": 0, "prompt": "x"})"));
    EXPECT_EQ(r.status, 404) << method << " " << path << " " << r.raw;
  }
  Reply listed = Call("GET", "/api/v1/sessions", bob);
  EXPECT_TRUE(listed.body["result"].empty()) << listed.raw;
  EXPECT_EQ(Call("GET", "/api/v1/fs/ls?uri=" + Q("strata://session/trip"), bob).status, 403);
  // The commit returns at once with a task the owner (only) can follow.
  Reply commit = Call("POST", "/api/v1/sessions/trip/commit", alice, "{}");
  ASSERT_EQ(commit.status, 200) << commit.raw;
  int64_t task = commit.body["result"]["task_id"];
  EXPECT_EQ(commit.body["result"]["messages"], 2);
  EXPECT_EQ(Call("GET", "/api/v1/tasks/" + std::to_string(task), alice).status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/tasks/" + std::to_string(task), bob).status, 404);
  Reply messages = Call("GET", "/api/v1/sessions/trip/messages", alice);
  EXPECT_TRUE(messages.body["result"].empty()) << "committed messages are archived";
  // Phase 2 has not run (this server has no model): the archive has no diff yet, which is not a missing one.
  Reply early = Call("GET", "/api/v1/sessions/trip/archives/1/diff", alice);
  EXPECT_EQ(early.status, 409) << early.raw;
  EXPECT_NE(early.body["error"]["message"].get<std::string>().find("archive 1 is"), std::string::npos) << early.raw;
}

TEST_F(ServerTest, CheckpointsRevertForkAndTheAssembledContextOverHttp) {
  std::string alice = Issue("alice");
  ASSERT_EQ(Call("POST", "/api/v1/sessions", alice, R"({"id": "s1"})").status, 200);
  ASSERT_EQ(Call("POST", "/api/v1/sessions/s1/system-prompt", alice, R"({"prompt": "You plan trips."})").status, 200);
  ASSERT_EQ(Call("POST", "/api/v1/sessions/s1/messages", alice, R"({"role": "user", "content": "Plan Kyoto."})").status, 200);
  Reply cp = Call("POST", "/api/v1/sessions/s1/checkpoints", alice, "{}");
  ASSERT_EQ(cp.status, 200) << cp.raw;
  EXPECT_EQ(cp.body["result"]["checkpoint"], 0);
  std::string long_reply(3000, 'x');
  for (int i = 0; i < 3; ++i) {
    std::string text = "Day " + std::to_string(i) + ": " + std::string(400, 'a' + i) + " temples.";
    ASSERT_EQ(Call("POST", "/api/v1/sessions/s1/messages", alice,
                   Json{{"messages", {{{"role", "assistant"}, {"content", text}}, {{"role", "user"}, {"content", "more"}}}}}.dump())
                  .status, 200);
  }
  Reply log = Call("GET", "/api/v1/sessions/s1/log", alice);
  ASSERT_EQ(log.status, 200) << log.raw;
  EXPECT_EQ(log.body["result"]["messages"].size(), 7u);
  EXPECT_EQ(log.body["result"]["system_prompt"], "You plan trips.");
  ASSERT_EQ(log.body["result"]["checkpoints"].size(), 1u);
  EXPECT_EQ(log.body["result"]["checkpoints"][0]["messages"], 1);

  // The context for a roomy window: everything, and the sections add up to the total.
  auto context = [&](int window) {
    Reply r = Call("GET", "/api/v1/sessions/s1/context?max_context_tokens=" + std::to_string(window) +
                              "&reserve_for_reply=100", alice);
    EXPECT_EQ(r.status, 200) << r.raw;
    return r.body["result"];
  };
  Json wide = context(100000);
  const Json& t = wide["sections"];
  EXPECT_GT(t["system"].get<int64_t>(), 0);
  EXPECT_EQ(t["system"].get<int64_t>() + t["memories"].get<int64_t>() + t["pinned"].get<int64_t>() +
                t["summary"].get<int64_t>() + t["history"].get<int64_t>() + t["reserved"].get<int64_t>(),
            wide["total_tokens"].get<int64_t>());
  int64_t history = 0, sent = 0;
  for (const Json& m : wide["messages"]) {
    if (m["included"]) history += m["tokens"].get<int64_t>(), sent += 1;
  }
  EXPECT_EQ(sent, 7);
  EXPECT_EQ(history, t["history"].get<int64_t>());
  // A window that holds only the newest messages cuts the older ones, never the newest, never over budget.
  Json narrow = context(static_cast<int>(t["system"].get<int64_t>() + 100 + 260));
  EXPECT_LE(narrow["total_tokens"].get<int64_t>(), narrow["budget"].get<int64_t>());
  ASSERT_EQ(narrow["messages"].size(), 7u);
  EXPECT_FALSE(narrow["messages"][0]["included"]);
  EXPECT_TRUE(narrow["messages"][6]["included"]);
  EXPECT_TRUE(wide["warnings"].empty()) << wide["warnings"];
  size_t left_out = 0;
  for (const Json& m : narrow["messages"]) left_out += m["included"] ? 0 : 1;
  ASSERT_FALSE(narrow["warnings"].empty()) << "what was left out is said";
  EXPECT_EQ(narrow["warnings"].back().get<std::string>().rfind(std::to_string(left_out) + " of 7 messages left out", 0), 0u)
      << narrow["warnings"];
  // A bad budget is a clear error.
  Reply bad = Call("GET", "/api/v1/sessions/s1/context?max_context_tokens=10&reserve_for_reply=100", alice);
  EXPECT_EQ(bad.status, 400) << bad.raw;

  // Fork at the checkpoint, then revert the original to it.
  Reply fork = Call("POST", "/api/v1/sessions/s1/fork", alice, R"({"id": "s2", "checkpoint": 0})");
  ASSERT_EQ(fork.status, 200) << fork.raw;
  EXPECT_EQ(fork.body["result"]["user"], "alice");
  EXPECT_EQ(Call("GET", "/api/v1/sessions/s2/messages", alice).body["result"].size(), 1u);
  EXPECT_EQ(Call("POST", "/api/v1/sessions/s1/revert", alice, R"({"checkpoint": 5})").status, 404);
  Reply reverted = Call("POST", "/api/v1/sessions/s1/revert", alice, R"({"checkpoint": 0})");
  ASSERT_EQ(reverted.status, 200) << reverted.raw;
  EXPECT_EQ(reverted.body["result"]["stats"]["messages"], 1);
  Reply after = Call("GET", "/api/v1/sessions/s1/log", alice);
  EXPECT_EQ(after.body["result"]["messages"].size(), 1u);
  EXPECT_EQ(after.body["result"]["rotations"].size(), 1u);
  // One message is too little to compact: nothing changes.
  Reply compact = Call("POST", "/api/v1/sessions/s1/compact", alice, "{}");
  ASSERT_EQ(compact.status, 200) << compact.raw;
  EXPECT_EQ(compact.body["result"]["compacted"], 0);
  EXPECT_EQ(Call("GET", "/api/v1/sessions/s1/log", alice).body["result"]["messages"].size(), 1u);
  // Delete: the session and what is stored under its scope go, so a new session given its id later
  // (perhaps by another user) inherits nothing.
  ASSERT_EQ(Call("POST", "/api/v1/fs/write", alice, R"({"uri": "strata://session/s2/history/archive_001", "content": "transcript"})").status, 200);
  EXPECT_EQ(Call("DELETE", "/api/v1/sessions/s2", alice).status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/sessions/s2", alice).status, 404);
  EXPECT_EQ(Call("GET", "/api/v1/fs/stat?uri=" + Q("strata://session/s2/history/archive_001"), kRootKey).status, 404);
  std::string bob = Issue("bob");
  ASSERT_EQ(Call("POST", "/api/v1/sessions", bob, R"({"id": "s2"})").status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/fs/read?uri=" + Q("strata://session/s2/history/archive_001"), bob).status, 404);
}

TEST_F(ServerTest, ExportAndImportCarryTheTreeInTheRequestAndTheResponse) {
  std::string alice = Issue("alice");
  std::string bob = Issue("bob");
  ASSERT_EQ(Call("POST", "/api/v1/fs/write", alice,
                 R"({"uri": "strata://user/alice/memories/tea", "content": "Alice drinks green tea."})").status, 200);
  Reply exported = Call("GET", "/api/v1/fs/export?uri=" + Q("strata://user/alice/memories"), alice);
  ASSERT_EQ(exported.status, 200) << exported.raw;
  const Json& files = exported.body["result"]["files"];
  ASSERT_FALSE(files.empty());
  bool found = false;
  for (const Json& f : files) found = found || f["content"].get<std::string>().find("green tea") != std::string::npos;
  EXPECT_TRUE(found) << exported.raw;
  EXPECT_EQ(Call("GET", "/api/v1/fs/export?uri=" + Q("strata://user/alice/memories"), bob).status, 403);

  // The same files, imported elsewhere in alice's scope, read back.
  Reply imported = Call("POST", "/api/v1/fs/import", alice,
                        Json{{"uri", "strata://user/alice/copy"}, {"files", files}}.dump());
  ASSERT_EQ(imported.status, 200) << imported.raw;
  EXPECT_GE(imported.body["result"]["leaves"].get<int>(), 1);
  Reply read = Call("GET", "/api/v1/fs/grep?pattern=green&under=" + Q("strata://user/alice/copy"), alice);
  ASSERT_EQ(read.status, 200) << read.raw;
  EXPECT_EQ(read.body["result"].size(), 1u) << read.raw;
  // What is left out is reported as an add reports it: {"path", "reason"}.
  Reply partly = Call("POST", "/api/v1/fs/import", alice,
                      Json{{"uri", "strata://user/alice/partly"},
                           {"files", {{{"path", "ok.md"}, {"content", "fine"}}, {{"path", "d/.meta.json"}, {"content", "[1]"}}}}}
                          .dump());
  ASSERT_EQ(partly.status, 200) << partly.raw;
  const Json& skipped = partly.body["result"]["skipped"];
  ASSERT_EQ(skipped.size(), 1u) << partly.raw;
  EXPECT_EQ(skipped[0]["path"], "d/.meta.json") << partly.raw;
  EXPECT_EQ(skipped[0]["reason"], "not a JSON object (ignored)") << partly.raw;
  // Bob cannot import into alice's scope, and no path leaves the tree.
  EXPECT_EQ(Call("POST", "/api/v1/fs/import", bob, Json{{"uri", "strata://user/alice/x"}, {"files", files}}.dump()).status, 403);
  for (const char* path : {"../escape.md", "/etc/passwd", "a/../../b.md", "a//b.md", "a\\b.md", ""}) {
    Reply r = Call("POST", "/api/v1/fs/import", alice,
                   Json{{"uri", "strata://user/alice/y"}, {"files", {{{"path", path}, {"content", "x"}}}}}.dump());
    EXPECT_EQ(r.status, 400) << path << " " << r.raw;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_.File("escape.md")));
  EXPECT_FALSE(std::filesystem::exists(dir_.File("data/tmp/escape.md")));
}

TEST_F(ServerTest, SkillsAndSessionAwareFind) {
  std::string alice = Issue("alice");
  std::string skill = "---\nname: deploy\ndescription: How to deploy the service safely\n---\nRun the canary first.\n";
  Reply added = Call("POST", "/api/v1/skills", alice, Json{{"agent", "coder"}, {"skill_md", skill}}.dump());
  ASSERT_EQ(added.status, 200) << added.raw;
  EXPECT_EQ(added.body["result"]["uri"], "strata://agent/coder/skills/deploy");
  Reply listed = Call("GET", "/api/v1/skills?agent=coder", alice);
  ASSERT_EQ(listed.status, 200) << listed.raw;
  EXPECT_EQ(listed.body["result"].size(), 1u);
  Reply shown = Call("GET", "/api/v1/skills/deploy?agent=coder", alice);
  ASSERT_EQ(shown.status, 200) << shown.raw;
  EXPECT_NE(shown.body["result"]["skill_md"].get<std::string>().find("Run the canary first."), std::string::npos);
  Reply bad = Call("POST", "/api/v1/skills", alice, Json{{"agent", "coder"}, {"skill_md", "no front matter"}}.dump());
  EXPECT_EQ(bad.status, 400) << bad.raw;

  // A short follow-up is searched with the session's newest user message.
  ASSERT_EQ(Call("POST", "/api/v1/fs/write", alice,
                 R"({"uri": "strata://user/alice/memories/kyoto", "content": "Alice's Kyoto hotel is near Gion."})").status, 200);
  ASSERT_EQ(Call("POST", "/api/v1/sessions", alice, R"({"id": "trip"})").status, 200);
  ASSERT_EQ(Call("POST", "/api/v1/sessions/trip/messages", alice,
                 R"({"role": "user", "content": "Where is my Kyoto hotel?"})").status, 200);
  Reply plain = Call("POST", "/api/v1/search/find", alice, R"({"query": "and near it?", "under": "strata://user/alice"})");
  Reply aware = Call("POST", "/api/v1/search/find", alice,
                     R"({"query": "and near it?", "under": "strata://user/alice", "session": "trip"})");
  ASSERT_EQ(aware.status, 200) << aware.raw;
  EXPECT_EQ(aware.body["result"]["searched"], "and near it?\nWhere is my Kyoto hotel?");
  ASSERT_FALSE(aware.body["result"]["hits"].empty()) << aware.raw;
  EXPECT_EQ(aware.body["result"]["hits"][0]["uri"], "strata://user/alice/memories/kyoto");
  EXPECT_FALSE(plain.body["result"].contains("searched"));
  std::string bob = Issue("bob");
  EXPECT_EQ(Call("POST", "/api/v1/search/find", bob, R"({"query": "x", "session": "trip"})").status, 404);
}

TEST_F(ServerTest, AccountsKeepTheirDataApart) {
  std::string acme = Issue("ann", "acme", "admin");
  std::string globex = Issue("gus", "globex", "admin");
  ASSERT_EQ(Call("POST", "/api/v1/fs/write", acme,
                 Json{{"uri", "strata://resources/plans"}, {"content", "acme launch plan"}}.dump()).status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/fs/read?uri=" + Q("strata://resources/plans"), acme).status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/fs/read?uri=" + Q("strata://resources/plans"), globex).status, 404);
  Reply find = Call("POST", "/api/v1/search/find", globex, R"({"query": "launch plan"})");
  EXPECT_EQ(find.raw.find("acme"), std::string::npos) << find.raw;
  EXPECT_EQ(Call("GET", "/api/v1/fs/read?uri=" + Q("strata://resources/plans"), kRootKey).status, 404)
      << "the root key works in the default account unless it names another";
  EXPECT_EQ(Call("GET", "/api/v1/fs/read?uri=" + Q("strata://resources/plans"), kRootKey, "",
                 {{"X-Strata-Account", "acme"}}).status, 200);
  EXPECT_TRUE(std::filesystem::exists(dir_.File("data/accounts/acme")));
  // A read in an account nobody made (a typo) is 404 and makes nothing; a write makes it, and a key alone
  // is enough for a read (globex has a key).
  Reply typo = Call("GET", "/api/v1/fs/ls", kRootKey, "", {{"X-Strata-Account", "acmee"}});
  EXPECT_EQ(typo.status, 404) << typo.raw;
  EXPECT_NE(typo.raw.find("no account"), std::string::npos) << typo.raw;
  EXPECT_FALSE(std::filesystem::exists(dir_.File("data/accounts/acmee")));
  EXPECT_EQ(Call("GET", "/api/v1/fs/ls", kRootKey, "", {{"X-Strata-Account", "globex"}}).status, 200);
  ASSERT_EQ(Call("POST", "/api/v1/fs/write", kRootKey, Json{{"uri", "strata://resources/x"}, {"content", "x"}}.dump(),
                 {{"X-Strata-Account", "initech"}}).status, 200);
  EXPECT_EQ(Call("GET", "/api/v1/fs/ls", kRootKey, "", {{"X-Strata-Account", "initech"}}).status, 200);
  // Only a GET: a POST that changes nothing (find) or a turn through the model endpoints may begin one.
  EXPECT_EQ(Call("POST", "/api/v1/search/find", kRootKey, R"({"query": "x"})", {{"X-Strata-Account", "hooli"}}).status,
            200);
}

TEST_F(ServerTest, ShutdownAnswersRequestsInFlightAndLosesNoAcknowledgedWrite) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> writers;
  std::mutex mu;
  std::vector<std::string> acknowledged;
  for (int w = 0; w < 4; ++w) {
    writers.emplace_back([&, w] {
      for (int i = 0; !stop.load() && i < 400; ++i) {
        std::string uri = "strata://resources/load/w" + std::to_string(w) + "-" + std::to_string(i);
        Reply r = Call("POST", "/api/v1/fs/write", kRootKey, Json{{"uri", uri}, {"content", "note " + uri}}.dump());
        if (r.status == 200) {
          std::lock_guard lock(mu);
          acknowledged.push_back(uri);
        } else if (r.status != 0) {
          ADD_FAILURE() << "a request in flight got " << r.status << " " << r.raw;
        }
      }
    });
  }
  while (true) {
    std::lock_guard lock(mu);
    if (acknowledged.size() >= 40) break;
  }
  Stop();
  stop = true;
  for (auto& t : writers) t.join();
  EXPECT_OK(served_);
  auto engine = Engine::Open({.data_dir = dir_.File("data")});
  ASSERT_OK(engine);
  for (const std::string& uri : acknowledged) EXPECT_TRUE((*engine)->Stat(uri).ok()) << uri;
  auto check = (*engine)->Check();
  ASSERT_OK(check);
  EXPECT_TRUE(check->empty());
}

TEST_F(ServerTest, TheViewerIsServedWithoutAKeyAndWithAStrictPolicy) {
  httplib::Client client("127.0.0.1", port_);
  auto index = client.Get("/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_NE(index->get_header_value("Content-Type").find("text/html"), std::string::npos);
  EXPECT_NE(index->body.find("viewer/app.js"), std::string::npos);
  std::string policy = index->get_header_value("Content-Security-Policy");
  EXPECT_NE(policy.find("script-src 'self'"), std::string::npos) << policy;
  EXPECT_NE(policy.find("frame-ancestors 'none'"), std::string::npos) << policy;
  EXPECT_EQ(index->get_header_value("X-Content-Type-Options"), "nosniff");
  auto script = client.Get("/viewer/app.js");
  ASSERT_TRUE(script);
  EXPECT_EQ(script->status, 200);
  EXPECT_NE(script->get_header_value("Content-Type").find("text/javascript"), std::string::npos);
  EXPECT_EQ(Call("GET", "/viewer/missing.js", "").status, 404);
  EXPECT_EQ(Call("GET", "/viewer/..%2Fkeys.db", "").status, 400);  // An encoded '/' is refused before routing.
  // The data stays behind the key.
  EXPECT_EQ(Call("GET", "/api/v1/sessions", "").status, 401);
}

// Reads the change stream until `events` events have arrived; returns their data lines.
// The data of the first `events` events of the stream at `path` (read for 20 s at most).
std::vector<std::string> ReadChanges(int port, const std::string& key, size_t events, const std::function<void()>& after_first,
                                     const std::string& path = "/api/v1/events") {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(std::chrono::seconds(10));
  std::vector<std::string> data;
  std::string buffer;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  client.Get(path, {{"Authorization", "Bearer " + key}}, [&](const char* bytes, size_t n) {
    if (std::chrono::steady_clock::now() > until) return false;
    buffer.append(bytes, n);
    size_t end;
    while ((end = buffer.find("\n\n")) != std::string::npos) {
      std::string block = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (size_t at = block.find("data: "); at != std::string::npos) {
        data.push_back(block.substr(at + 6));
        if (data.size() == 1) after_first();
      }
    }
    return data.size() < events;
  });
  return data;
}

TEST_F(ServerTest, TheChangeStreamAnnouncesWritesButNotReads) {
  std::string alice = Issue("alice");
  std::string other = Issue("carol", "acme");
  ASSERT_EQ(Call("POST", "/api/v1/fs/write", alice, R"({"uri": "strata://user/alice/memories/notes/a", "content": "x"})").status, 200);
  std::vector<std::string> seen = ReadChanges(port_, alice, 2, [&] {
    // A read-only POST and a GET first: no event for them. Another account's write: none either.
    EXPECT_EQ(Call("POST", "/api/v1/search/find", alice, R"({"query": "x"})").status, 200);
    EXPECT_EQ(Call("GET", "/api/v1/fs/ls", alice).status, 200);
    // MCP messages that write nothing (a ping, a listing, a read tool): none either.
    for (const char* message : {R"({"jsonrpc": "2.0", "id": 1, "method": "ping"})",
                                R"({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})",
                                R"({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "find", "arguments": {"query": "x"}}})"}) {
      EXPECT_EQ(Call("POST", "/mcp", alice, message, {{"MCP-Protocol-Version", "2025-11-25"}}).status, 200);
    }
    EXPECT_EQ(Call("POST", "/api/v1/fs/write", other, R"({"uri": "strata://user/carol/memories/notes/b", "content": "y"})").status, 200);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    // A write through an MCP tool is announced as one over HTTP is.
    Reply wrote = Call("POST", "/mcp", alice,
                       R"({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "write", "arguments":
                           {"uri": "strata://user/alice/memories/notes/c", "content": "z"}}})",
                       {{"MCP-Protocol-Version", "2025-11-25"}});
    EXPECT_EQ(wrote.body["result"]["isError"], false) << wrote.raw;
  });
  ASSERT_EQ(seen.size(), 2u);
  Json first = Json::parse(seen[0]), second = Json::parse(seen[1]);
  EXPECT_EQ(second["revision"].get<int64_t>(), first["revision"].get<int64_t>() + 1)
      << "exactly one change (alice's MCP write) between the two events";
}

// A viewer remembers the last revision it saw and refetches when the next one differs. A restarted server
// (or another instance) numbers its own: it must not meet the viewer's last revision after as many changes.
// (Each process counted from 0, so three writes after a restart announced the revision seen before it.)
TEST_F(ServerTest, ARestartedServerDoesNotRepeatTheRevisionAViewerLastSaw) {
  std::string alice = Issue("alice");
  auto revision = [&] {
    std::vector<std::string> seen = ReadChanges(port_, alice, 1, [] {});
    return seen.empty() ? int64_t{-1} : Json::parse(seen[0])["revision"].get<int64_t>();
  };
  auto write = [&](int i) {
    ASSERT_EQ(Call("POST", "/api/v1/fs/write", alice,
                   Json{{"uri", "strata://user/alice/memories/notes/n" + std::to_string(i)}, {"content", "x"}}.dump())
                  .status,
              200);
  };
  const int64_t at_start = revision();
  for (int i = 0; i < 3; ++i) write(i);
  const int64_t before = revision();
  EXPECT_EQ(before, at_start + 3);
  Stop();
  Start();
  // The restarted server's revision is not a few changes short of the one the viewer saw last (it was: as
  // many changes as before the restart announced that same number, and the viewer did not refetch).
  const int64_t restarted = revision();
  EXPECT_TRUE(restarted > before || before - restarted > 1'000'000) << before << " then " << restarted;
  for (int i = 3; i < 6; ++i) write(i);
  EXPECT_EQ(revision(), restarted + 3);
  EXPECT_LT(restarted + 3, int64_t{1} << 53);  // Exact in JavaScript.
}

// A stream opened with a key that is revoked since ends with an error: it kept announcing the account's
// changes for up to an hour.
TEST_F(ServerTest, TheChangeStreamOfARevokedKeyEnds) {
  Reply issued = Call("POST", "/api/v1/admin/keys", kRootKey, R"({"user": "carol"})");
  ASSERT_EQ(issued.status, 200) << issued.raw;
  const std::string key = issued.body["result"]["key"], id = issued.body["result"]["id"];
  auto started = std::chrono::steady_clock::now();
  std::vector<std::string> seen = ReadChanges(port_, key, 10, [&] {
    EXPECT_EQ(Call("DELETE", "/api/v1/admin/keys/" + id, kRootKey).status, 200);
  });
  // The first change, the revocation's (a change of the account), then the error: the stream ended.
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(Json::parse(seen[2])["code"], "unauthenticated") << seen[2];
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
}

// A task's progress stream ends when its key is revoked, as the change stream does: it went on for up to an
// hour, job views and errors included.
TEST_F(ServerTest, TheTaskStreamOfARevokedKeyEnds) {
  Stop();
  server_options_.run_worker = false;  // The job stays pending (another instance's worker would run it).
  Start();
  Reply issued = Call("POST", "/api/v1/admin/keys", kRootKey, R"({"user": "sam"})");
  ASSERT_EQ(issued.status, 200) << issued.raw;
  const std::string key = issued.body["result"]["key"], id = issued.body["result"]["id"];
  ASSERT_EQ(Call("POST", "/api/v1/sessions", key, R"({"id": "ss1"})").status, 200);
  ASSERT_EQ(Call("POST", "/api/v1/sessions/ss1/messages", key,
                 R"({"messages": [{"role": "user", "content": "I like tea."}]})").status, 200);
  Reply committed = Call("POST", "/api/v1/sessions/ss1/commit", key);
  ASSERT_EQ(committed.status, 200) << committed.raw;
  const int64_t task = committed.body["result"]["task_id"];
  auto started = std::chrono::steady_clock::now();
  std::vector<std::string> seen = ReadChanges(port_, key, 100, [&] {
    EXPECT_EQ(Call("DELETE", "/api/v1/admin/keys/" + id, kRootKey).status, 200);
  }, "/api/v1/tasks/" + std::to_string(task) + "/events");
  ASSERT_GE(seen.size(), 2u);
  EXPECT_EQ(Json::parse(seen.back())["code"], "unauthenticated") << "the stream went on after its key was revoked: "
                                                                  << seen.back();
  EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(10));
}

// Phase 2 of an account no request has opened since the server started (its job was queued before a
// restart, or by an instance that died) is worked all the same: the worker walked only the accounts opened
// since start, and the job waited until some request for the account happened to come.
TEST_F(ServerTest, EveryAccountsQueueIsWorkedWithoutARequestForIt) {
  static llm::ScriptedProvider model("scripted", [](const llm::ScriptedProvider::Request&) -> llm::ScriptedReply {
    return testing::TextReply(R"({"memories": []})");  // A summary and an extraction of nothing.
  });
  Stop();
  {
    auto main = Engine::Open({.data_dir = dir_.File("data")});
    ASSERT_OK(main);
    auto acme = (*main)->OpenAccount("acme");
    ASSERT_OK(acme);
    ASSERT_OK((*acme)->CreateSession("alice", "", "queued"));
    ASSERT_OK((*acme)->AddMessages("queued", std::vector<Message>{Message::User("I like tea."), Message::Assistant("Noted.")}));
    ASSERT_OK((*acme)->Commit("queued", {.wait = false}));
    auto queued = (*main)->AccountsWithWork();
    ASSERT_OK(queued);
    EXPECT_EQ(*queued, std::vector<std::string>{"acme"}) << "its job waits to be claimed";
  }
  engine_options_.model = &model;
  server_options_.worker_poll = std::chrono::milliseconds(20);
  Start();
  auto main = Engine::Open({.data_dir = dir_.File("data")});
  ASSERT_OK(main);
  auto acme = (*main)->OpenAccount("acme");
  ASSERT_OK(acme);
  std::string state;
  for (int i = 0; i < 500 && state != "done"; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto status = (*acme)->GetSessionStatus("queued");
    ASSERT_OK(status);
    ASSERT_EQ(status->archives.size(), 1u);
    state = std::string(session::ArchiveStateName(status->archives[0].state));
  }
  EXPECT_EQ(state, "done") << "no request for acme was made; the worker found its queue";
  auto accounts = (*main)->Accounts();
  ASSERT_OK(accounts);
  EXPECT_EQ(*accounts, std::vector<std::string>{"acme"});
  // The archive is done a moment before its job is marked done.
  Result<std::vector<std::string>> with_work = std::vector<std::string>{"?"};
  for (int i = 0; i < 250 && with_work.ok() && !with_work->empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    with_work = (*main)->AccountsWithWork();
  }
  ASSERT_OK(with_work);
  EXPECT_TRUE(with_work->empty()) << "acme's job is done";
}

// A shutdown stops a consolidation in flight at its next model call: it asked the model about every memory
// first (one call each, under the owner's lock), and the shutdown waited for all of it.
TEST_F(ServerTest, AShutdownStopsAConsolidationInFlight) {
  Stop();
  constexpr int kMemories = 12;
  {
    auto engine = Engine::Open({.data_dir = dir_.File("data")});
    ASSERT_OK(engine);
    for (int i = 0; i < kMemories; ++i) {
      ASSERT_OK((*engine)->Write("strata://user/alice/memories/preferences/seat_" + std::to_string(i),
                                 "Alice prefers aisle seats on flight " + std::to_string(i) + "."));
    }
  }
  // Static, with what it reaches: they must outlive the server when an assertion ends the test early.
  static std::atomic<int> dedup_calls{0};
  static std::function<void()> on_first;
  dedup_calls = 0;
  static llm::ScriptedProvider model("scripted", [](const llm::ScriptedProvider::Request& req) {
    if (testing::StageOf(req) == testing::Stage::kDedup && dedup_calls++ == 0) {
      on_first();
      std::this_thread::sleep_for(std::chrono::milliseconds(200));  // The shutdown begins meanwhile.
    }
    return testing::TextReply(R"({"decision": "create"})");
  });
  // Set before the server starts, and the stopper handed over under a mutex: the request's sockets are no
  // ordering ThreadSanitizer sees.
  std::mutex stopper_mu;
  std::thread stopper;
  on_first = [&] {
    std::lock_guard lock(stopper_mu);
    stopper = std::thread([this] { server_->Shutdown(); });
  };
  engine_options_.model = &model;
  Start();
  std::string alice = Issue("alice");
  Reply r = Call("POST", "/api/v1/memories/consolidate", alice, R"({"under": "strata://user/alice"})");
  {
    std::lock_guard lock(stopper_mu);
    if (stopper.joinable()) stopper.join();
  }
  thread_.join();
  server_.reset();
  EXPECT_GE(dedup_calls.load(), 1);
  EXPECT_LT(dedup_calls.load(), 3) << "the consolidation went on asking after the shutdown began";
  if (r.status != 0) {
    EXPECT_NE(r.status, 200) << r.raw;  // Not answered as if it had consolidated everything.
  }
}

// Two MCP clients of one key each number their requests from 0: each initialize gives a session of its own,
// and request ids are the client's within it. The second client's id 7 was refused while the first's ran,
// and its cancellation of 7 cancelled the first's request.
TEST_F(ServerTest, McpRequestIdsAreEachSessionsOwn) {
  // Static, with what it waits for: they must outlive the server when an assertion ends the test early.
  static std::atomic<int> asked{0};
  static std::atomic<bool> released{false};
  static llm::ScriptedProvider model("scripted", [](const llm::ScriptedProvider::Request&) -> llm::ScriptedReply {
    ++asked;
    // The first client's find waits in its model call until the test lets it go.
    for (int i = 0; i < 3000 && !released.load(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
    return testing::TextReply(R"({"queries": ["tea"]})");
  });
  struct Release {
    ~Release() { released = true; }
  } release_on_exit;
  Stop();
  engine_options_.model = &model;
  Start();
  const std::string alice = Issue("alice");
  auto post = [&](const std::string& session, const std::string& body) {
    httplib::Client client("127.0.0.1", port_);
    client.set_read_timeout(std::chrono::seconds(30));
    httplib::Headers headers = {{"Authorization", "Bearer " + alice}, {"MCP-Protocol-Version", "2025-11-25"}};
    if (!session.empty()) headers.emplace("Mcp-Session-Id", session);
    return client.Post("/mcp", headers, body, "application/json");
  };
  const std::string init = R"({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
                               "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}})";
  auto first_init = post("", init), second_init = post("", init);
  ASSERT_TRUE(first_init && second_init);
  const std::string one = first_init->get_header_value("Mcp-Session-Id"), two = second_init->get_header_value("Mcp-Session-Id");
  ASSERT_EQ(one.size(), 32u) << first_init->body;
  ASSERT_NE(one, two);
  std::future<httplib::Result> slow = std::async(std::launch::async, [&] {
    return post(one, R"({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                        "params": {"name": "find", "arguments": {"query": "tea", "rewrite": true}}})");
  });
  for (int i = 0; i < 500 && asked.load() == 0; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  ASSERT_EQ(asked.load(), 1) << "the first client's find is in its model call";
  auto same_id = post(two, R"({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                               "params": {"name": "count_tokens", "arguments": {"text": "hello"}}})");
  ASSERT_TRUE(same_id);
  EXPECT_EQ(Json::parse(same_id->body)["result"]["isError"], false) << same_id->body;
  auto cancel = post(two, R"({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 7}})");
  ASSERT_TRUE(cancel);
  EXPECT_EQ(cancel->status, 202);
  released = true;
  httplib::Result first = slow.get();
  ASSERT_TRUE(first);
  Json answered = Json::parse(first->body);
  EXPECT_FALSE(answered.contains("error")) << "the other session's cancellation was its own: " << first->body;
  EXPECT_EQ(answered["result"]["isError"], false) << first->body;
  Stop();
  engine_options_.model = nullptr;
}

TEST_F(ServerTest, TasksAndMemoryChangesAreListedWithinTheCallersScope) {
  std::string alice = Issue("alice");
  std::string bob = Issue("bob");
  for (const auto& [user, key] : {std::pair{"alice", alice}, std::pair{"bob", bob}}) {
    ASSERT_EQ(Call("POST", "/api/v1/sessions", key, Json{{"id", std::string(user) + "-s"}}.dump()).status, 200);
    ASSERT_EQ(Call("POST", "/api/v1/sessions/" + std::string(user) + "-s/messages", key,
                   R"({"role": "user", "content": "I prefer tea."})").status, 200);
    ASSERT_EQ(Call("POST", "/api/v1/sessions/" + std::string(user) + "-s/commit", key, "{}").status, 200);
  }
  Reply mine = Call("GET", "/api/v1/tasks", alice);
  ASSERT_EQ(mine.status, 200) << mine.raw;
  ASSERT_EQ(mine.body["result"].size(), 1u) << mine.raw;
  EXPECT_EQ(mine.body["result"][0]["session"], "alice-s");
  EXPECT_EQ(mine.body["result"][0]["key"].get<std::string>().rfind("alice-s@", 0), 0u);
  EXPECT_EQ(mine.body["result"][0]["kind"], "session.commit");
  Reply all = Call("GET", "/api/v1/tasks", kRootKey);
  EXPECT_EQ(all.body["result"].size(), 2u) << all.raw;
  EXPECT_GT(all.body["result"][0]["id"].get<int64_t>(), all.body["result"][1]["id"].get<int64_t>()) << "newest first";
  EXPECT_EQ(Call("GET", "/api/v1/tasks?session=bob-s", alice).status, 404);
  EXPECT_EQ(Call("GET", "/api/v1/tasks?state=lost", alice).status, 400);
  EXPECT_EQ(Call("POST", "/api/v1/sessions/bob-s/retry", alice, "{}").status, 404);
  Reply retried = Call("POST", "/api/v1/sessions/alice-s/retry", alice, "{}");
  EXPECT_EQ(retried.status, 200) << retried.raw;

}

TEST_F(ServerTest, MemoryChangesStayWithinTheCallersScope) {
  // Memories of two users, made by commits with a scripted model (the server itself has none).
  Stop();
  {
    testing::WriteFileOrDie(dir_.File("script.json"), R"({"replies": [
        {"text": "Alice and tea."}, {"text": "{\"memories\": [{\"category\": \"preferences\", \"key\": \"drink\", \"content\": \"Alice prefers tea.\"}]}"},
        {"text": "Bob and coffee."}, {"text": "{\"memories\": [{\"category\": \"cases\", \"key\": \"brew\", \"content\": \"Brewing coffee for a user: ask about milk first.\"}, {\"category\": \"preferences\", \"key\": \"drink\", \"content\": \"Bob prefers coffee.\"}]}"}]})");
    auto engine = Engine::Open({.data_dir = dir_.File("data"), .provider = {.provider = "scripted", .script = dir_.File("script.json")}});
    ASSERT_OK(engine);
    for (const std::string user : {"alice", "bob"}) {
      ASSERT_OK((*engine)->CreateSession(user, "barista", user + "-s"));
      ASSERT_OK((*engine)->AddMessages(user + "-s", std::vector{Message::User("About drinks.")}));
      ASSERT_OK((*engine)->Commit(user + "-s", {.wait = true}));
    }
  }
  Start();
  std::string alice = Issue("alice");
  // What alice's commit changed, as the in-process Commit with wait reported it.
  Reply diff = Call("GET", "/api/v1/sessions/alice-s/archives/1/diff", alice);
  ASSERT_EQ(diff.status, 200) << diff.raw;
  EXPECT_EQ(diff.body["result"]["summary"], "Alice and tea.");
  EXPECT_EQ(diff.body["result"]["candidates"], 1);
  ASSERT_EQ(diff.body["result"]["changes"].size(), 1u) << diff.raw;
  EXPECT_EQ(diff.body["result"]["changes"][0]["uri"], "strata://user/alice/memories/preferences/drink");
  EXPECT_EQ(diff.body["result"]["changes"][0]["action"], "create");
  EXPECT_EQ(Call("GET", "/api/v1/sessions/bob-s/archives/1/diff", alice).status, 404);
  EXPECT_EQ(Call("GET", "/api/v1/sessions/alice-s/archives/2/diff", alice).status, 404);
  EXPECT_EQ(Call("GET", "/api/v1/sessions/alice-s/archives/99999999999/diff", alice).status, 404);
  for (const char* bad : {"0", "-1", "x", "1.5"}) {
    EXPECT_EQ(Call("GET", "/api/v1/sessions/alice-s/archives/" + std::string(bad) + "/diff", alice).status, 400) << bad;
  }
  EXPECT_EQ(Call("GET", "/api/v1/memories/changes?under=" + Q("strata://user/bob"), alice).status, 403);
  Reply own = Call("GET", "/api/v1/memories/changes", alice);
  ASSERT_EQ(own.status, 200) << own.raw;
  ASSERT_EQ(own.body["result"].size(), 1u) << own.raw;
  EXPECT_EQ(own.body["result"][0]["uri"], "strata://user/alice/memories/preferences/drink");
  EXPECT_EQ(own.body["result"][0]["action"], "create");
  std::string alice_ref = session::SessionRef(*(*Engine::Open({.data_dir = dir_.File("data")}))->GetSession("alice-s"));
  EXPECT_EQ(own.body["result"][0]["source"], alice_ref + "#1#0");
  EXPECT_EQ(own.body["result"][0]["session"], "alice-s");
  Reply all = Call("GET", "/api/v1/memories/changes?limit=1", kRootKey);
  ASSERT_EQ(all.body["result"].size(), 1u) << all.raw;
  EXPECT_EQ(all.body["result"][0]["uri"], "strata://user/bob/memories/preferences/drink") << "newest first";
  EXPECT_EQ(Call("GET", "/api/v1/memories/changes", kRootKey).body["result"].size(), 3u);
  // A shared (agent) memory made by bob's commit: alice sees the change, not bob's session.
  Reply shared = Call("GET", "/api/v1/memories/changes?under=" + Q("strata://agent/barista"), alice);
  ASSERT_EQ(shared.status, 200) << shared.raw;
  ASSERT_EQ(shared.body["result"].size(), 1u) << shared.raw;
  EXPECT_EQ(shared.body["result"][0]["source"], "") << shared.raw;
  std::string brew = shared.body["result"][0]["uri"].get<std::string>();
  EXPECT_EQ(Call("GET", "/api/v1/memories/history?uri=" + Q(brew), alice).body["result"][0]["source"], "");
  Json bob_entry = Call("GET", "/api/v1/memories/history?uri=" + Q(brew), kRootKey).body["result"][0];
  EXPECT_EQ(bob_entry["source"].get<std::string>().rfind("bob-s@", 0), 0u) << bob_entry;
  EXPECT_EQ(bob_entry["session"], "bob-s");
  EXPECT_EQ(Call("GET", "/api/v1/memories/changes?under=" + Q("strata://user/al"), kRootKey).body["result"].size(), 0u)
      << "a prefix of a name is not its parent";
}

TEST_F(ServerTest, TheOpenApiDocumentListsExactlyTheRoutesServed) {
  YAML::Node doc = YAML::LoadFile(std::string(STRATA_SOURCE_DIR) + "/docs/api/openapi.yaml");
  std::set<std::pair<std::string, std::string>> documented;
  for (const auto& path : doc["paths"]) {
    for (const auto& op : path.second) {
      std::string method = op.first.as<std::string>();
      if (method == "parameters") continue;
      for (char& ch : method) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      documented.insert({method, path.first.as<std::string>()});
      EXPECT_TRUE(op.second["responses"]) << method << " " << path.first.as<std::string>() << " has no responses";
    }
  }
  std::set<std::pair<std::string, std::string>> served;
  for (const auto& r : server_->Routes()) served.insert({r.method, r.name});
  for (const auto& r : served) EXPECT_TRUE(documented.count(r)) << "undocumented: " << r.first << " " << r.second;
  for (const auto& r : documented) EXPECT_TRUE(served.count(r)) << "documented, not served: " << r.first << " " << r.second;
}

// The names a route takes (its query parameters and the members of its body) are the ones the OpenAPI
// document lists for it: the server refuses any other, so a member missing from the document would be
// refused to a client that read it there.
TEST_F(ServerTest, EachRouteTakesWhatTheOpenApiDocumentLists) {
  YAML::Node doc = YAML::LoadFile(std::string(STRATA_SOURCE_DIR) + "/docs/api/openapi.yaml");
  // The property names of a schema, through $ref and allOf/oneOf/anyOf.
  std::function<void(const YAML::Node&, std::set<std::string>*)> properties = [&](const YAML::Node& schema,
                                                                                    std::set<std::string>* out) {
    if (!schema) return;
    if (schema["$ref"]) {
      std::string ref = schema["$ref"].as<std::string>();
      properties(doc["components"]["schemas"][ref.substr(ref.rfind('/') + 1)], out);
      return;
    }
    for (const char* k : {"allOf", "oneOf", "anyOf"}) {
      for (const auto& sub : schema[k]) properties(sub, out);
    }
    for (const auto& p : schema["properties"]) out->insert(p.first.as<std::string>());
  };
  size_t checked = 0;
  for (const Server::RouteInfo& r : server_->Routes()) {
    if (!r.takes) continue;
    ++checked;
    std::string method = r.method;
    for (char& ch : method) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    YAML::Node op = doc["paths"][r.name][method];
    ASSERT_TRUE(op) << r.method << " " << r.name;
    std::set<std::string> documented;
    for (const YAML::Node& params : {doc["paths"][r.name]["parameters"], op["parameters"]}) {
      for (const auto& p : params) {
        if (p["in"].as<std::string>() == "query") documented.insert(p["name"].as<std::string>());
      }
    }
    properties(op["requestBody"]["content"]["application/json"]["schema"], &documented);
    std::set<std::string> takes(r.takes->begin(), r.takes->end());
    EXPECT_EQ(takes, documented) << r.method << " " << r.name;
  }
  EXPECT_GE(checked, 40u) << "the JSON API's routes check their names";
}

TEST_F(ServerTest, ANameARouteDoesNotTakeIsRefusedNamingIt) {
  // A misspelt flag was ignored: "overwite": false overwrote the node.
  ASSERT_EQ(Call("POST", "/api/v1/fs/write", kRootKey, R"({"uri":"strata://resources/n","content":"one"})").status, 200);
  Reply typo = Call("POST", "/api/v1/fs/write", kRootKey,
                    R"({"uri":"strata://resources/n","content":"two","overwite":false})");
  EXPECT_EQ(typo.status, 400) << typo.raw;
  std::string said = typo.body["error"]["message"];
  EXPECT_NE(said.find("unknown body member \"overwite\""), std::string::npos) << said;
  EXPECT_NE(said.find("takes uri, content, abstract, overview, category, metadata, overwrite"), std::string::npos) << said;
  EXPECT_EQ(Call("GET", "/api/v1/fs/read?uri=" + Q("strata://resources/n"), kRootKey).body["result"]["content"], "one")
      << "nothing was written";
  Reply query = Call("GET", "/api/v1/fs/ls?uri=" + Q("strata://resources") + "&limt=1", kRootKey);
  EXPECT_EQ(query.status, 400) << query.raw;
  EXPECT_NE(query.body["error"]["message"].get<std::string>().find("unknown query parameter \"limt\""),
            std::string::npos)
      << query.raw;
  // An id no session can have is named as such, as in process, not answered "no route" (404).
  Reply bad_id = Call("GET", "/api/v1/sessions/caf%C3%A9/messages", kRootKey);
  EXPECT_EQ(bad_id.status, 400) << bad_id.raw;
  EXPECT_NE(bad_id.raw.find("may contain only letters"), std::string::npos) << bad_id.raw;
  // An encoded '/' in an id was decoded before routing: "s1%2Fstatus" answered session s1's status.
  ASSERT_EQ(Call("POST", "/api/v1/sessions", kRootKey, R"({"id":"enc"})").status, 200);
  for (const char* path : {"/api/v1/sessions/enc%2Fstatus", "/api/v1/sessions/enc%2flog?limit=1", "/api/v1/tasks/1%2F"}) {
    Reply slash = Call("GET", path, kRootKey);
    EXPECT_EQ(slash.status, 400) << path << ": " << slash.raw;
    EXPECT_NE(slash.raw.find("holds an encoded '/'"), std::string::npos) << slash.raw;
    EXPECT_FALSE(slash.body["error"].value("request_id", "").empty()) << "every answer has a request id: " << slash.raw;
  }
  EXPECT_EQ(Call("GET", "/api/v1/sessions/a%2Fb/messages/more", kRootKey).status, 400);  // No route, but why said.
  EXPECT_NE(Call("GET", "/api/v1/sessions/enc%2Fstatus", kRootKey).raw.find(R"(\"enc/status\")"), std::string::npos);
  EXPECT_EQ(Call("GET", "/api/v1/sessions/enc%2Estatus", kRootKey).status, 404);  // Another escape: read as it was.
  EXPECT_EQ(Call("GET", "/api/v1/fs/read?uri=" + Q("strata://resources/n"), kRootKey).status, 200);  // %2F in a query.
  EXPECT_EQ(Call("GET", "/viewer/..", "").status, 404);
  Reply signed_id = Call("GET", "/api/v1/tasks/+5", kRootKey);  // strtoll took a sign and blanks: task 5.
  EXPECT_EQ(signed_id.status, 400) << signed_id.raw;
  EXPECT_EQ(Call("DELETE", "/api/v1/admin/keys/%20x", kRootKey).status, 404);
  // A parameter given twice: only the first was read, silently.
  Reply twice = Call("GET", "/api/v1/fs/read?uri=" + Q("strata://resources/n") + "&level=0&level=2", kRootKey);
  EXPECT_EQ(twice.status, 400) << twice.raw;
  EXPECT_EQ(twice.body["error"]["message"], "query parameter \"level\" is given more than once") << twice.raw;
  Reply none = Call("GET", "/api/v1/sessions?user=bob", kRootKey);
  EXPECT_EQ(none.status, 400) << none.raw;
  EXPECT_NE(none.raw.find("takes none"), std::string::npos) << none.raw;
  // The names it takes, by query or body, and a list of messages as the body, still pass.
  EXPECT_EQ(Call("GET", "/api/v1/fs/ls?uri=" + Q("strata://resources") + "&limit=1&recursive=true", kRootKey).status, 200);
  ASSERT_EQ(Call("POST", "/api/v1/sessions", kRootKey, R"({"id":"s1","user":"bob"})").status, 200);
  EXPECT_EQ(Call("POST", "/api/v1/sessions/s1/messages", kRootKey, R"([{"role":"user","content":"hi"}])").status, 200);
}

// An option a route reads from its JSON body only was taken in the query string and dropped without a word:
// "?max_queries=99" answered 200 where the body's 99 is refused, "?remove_missing=true" removed nothing.
TEST_F(ServerTest, AnOptionReadFromTheBodyOnlyIsRefusedInTheQueryString) {
  const std::string files = R"("files":[{"path":"a.md","content":"# A\n\nalpha"}])";
  struct Case {
    const char* path;
    std::string body;
    const char* name;
  };
  const Case cases[] = {
      {"/api/v1/search/find?max_queries=99", R"({"query":"alpha"})", "max_queries"},
      {"/api/v1/search/find?rewrite=true", R"({"query":"alpha"})", "rewrite"},
      {"/api/v1/resources?remove_missing=true", R"({"uri":"strata://resources/docs",)" + files + "}", "remove_missing"},
      {"/api/v1/resources?chunk_tokens=5", R"({"uri":"strata://resources/docs",)" + files + "}", "chunk_tokens"},
      {"/api/v1/sessions/import?commit=true", R"({"format":"chatgpt","content":"[]"})", "commit"},
      {"/api/v1/prompts/render?vars=x", R"({"id":"memory.extract"})", "vars"},
  };
  for (const Case& c : cases) {
    Reply r = Call("POST", c.path, kRootKey, c.body);
    EXPECT_EQ(r.status, 400) << c.path << ": " << r.raw;
    const std::string said = r.body["error"].value("message", "");
    EXPECT_NE(said.find("query parameter \"" + std::string(c.name) + "\""), std::string::npos) << said;
    EXPECT_NE(said.find("JSON body"), std::string::npos) << said;
  }
  // Nothing was added by the refused requests; in the body the same options are read.
  EXPECT_EQ(Call("GET", "/api/v1/fs/stat?uri=" + Q("strata://resources/docs"), kRootKey).status, 404);
  Reply added = Call("POST", "/api/v1/resources", kRootKey,
                     R"({"uri":"strata://resources/docs","remove_missing":true,)" + files + "}");
  EXPECT_EQ(added.status, 200) << added.raw;
  Reply too_many = Call("POST", "/api/v1/search/find", kRootKey, R"({"query":"alpha","max_queries":99})");
  EXPECT_EQ(too_many.status, 400) << too_many.raw;
}

// A SIGTERM right after start (before the listening loop runs) still stops the server: httplib's stop()
// alone did nothing then, and Serve listened for good.
TEST(ServerOpen, AShutdownBeforeServeRunsStillStopsIt) {
  testing::TempDir dir;
  auto server = Server::Open({.data_dir = dir.File("data")}, {.listen = "127.0.0.1:0", .read_root_key_from_env = false});
  ASSERT_OK(server);
  ASSERT_OK((*server)->Bind());
  (*server)->Shutdown();
  std::promise<Status> served;
  std::future<Status> done = served.get_future();
  std::thread serving([&] { served.set_value((*server)->Serve()); });
  ASSERT_EQ(done.wait_for(std::chrono::seconds(20)), std::future_status::ready) << "Serve did not return";
  EXPECT_OK(done.get());
  serving.join();
}

TEST(ServerOpen, ARemoteAddressWithoutAKeyIsRefused) {
  testing::TempDir dir;
  auto server = Server::Open({.data_dir = dir.File("data")},
                             {.listen = "0.0.0.0:0", .read_root_key_from_env = false});
  ASSERT_OK(server);
  auto bound = (*server)->Bind();
  ASSERT_FALSE(bound.ok());
  EXPECT_EQ(bound.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(bound.status().message().find("without a root key"), std::string::npos);
  EXPECT_FALSE(Server::Open({.data_dir = dir.File("data")}, {.listen = "localhost"}).ok());
}

}  // namespace
}  // namespace strata::server
