// The fixture of the server tests: `strata serve` in process on a loopback port, with a root key, and a
// client for its JSON API (server_test.cc, trust_test.cc).
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "strata/server/server.h"
#include "test_util.h"

namespace strata::server {

using Json = nlohmann::json;
constexpr char kRootKey[] = "root-key-for-tests-0123456789";

struct Reply {
  int status = 0;
  Json body;
  std::string raw;
  std::string request_id;
};

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override { Start(); }
  void TearDown() override { Stop(); }

  // Tests change these before Start() (Stop() first when the server runs).
  EngineOptions engine_options_;
  ServerOptions server_options_{.listen = "127.0.0.1:0", .root_key = kRootKey, .read_root_key_from_env = false};

  void Start() {
    EngineOptions engine = engine_options_;
    engine.data_dir = dir_.File("data");
    auto server = Server::Open(engine, server_options_);
    ASSERT_OK(server);
    server_ = std::move(*server);
    auto port = server_->Bind();
    ASSERT_OK(port);
    port_ = *port;
    thread_ = std::thread([this] { served_ = server_->Serve(); });
  }
  void Stop() {
    if (!server_) return;
    server_->Shutdown();
    thread_.join();
    server_.reset();
  }

  Reply Call(const std::string& method, const std::string& path, const std::string& key, const std::string& body = "",
             const httplib::Headers& extra = {}) {
    httplib::Client client("127.0.0.1", port_);
    httplib::Headers headers = extra;
    if (!key.empty()) headers.emplace("Authorization", "Bearer " + key);
    httplib::Result r = method == "GET"      ? client.Get(path, headers)
                        : method == "DELETE" ? client.Delete(path, headers, body, "application/json")
                                             : client.Post(path, headers, body, "application/json");
    Reply out;
    if (!r) return out;
    out.status = r->status;
    out.raw = r->body;
    out.body = Json::parse(r->body, nullptr, false);
    out.request_id = r->get_header_value("X-Request-Id");
    return out;
  }
  std::string Issue(const std::string& user, const std::string& account = "default", const std::string& role = "user") {
    Reply r = Call("POST", "/api/v1/admin/keys", kRootKey,
                   Json{{"account", account}, {"user", user}, {"role", role}}.dump());
    EXPECT_EQ(r.status, 200) << r.raw;
    return r.body["result"]["key"].get<std::string>();
  }
  static std::string Q(const std::string& s) { return httplib::detail::encode_query_param(s); }
  // `body` with only the members the route `method templ` takes, when it is an object and the route checks
  // them: the others are refused before the route runs, and the route's own answer is what a test looks at.
  std::string OnlyTaken(const std::string& method, const std::string& templ, const std::string& body) const {
    Json parsed = Json::parse(body, nullptr, false);
    if (!parsed.is_object()) return body;
    for (const Server::RouteInfo& r : server_->Routes()) {
      if (r.method != method || r.name != templ || !r.takes) continue;
      Json out = Json::object();
      for (const auto& [name, value] : parsed.items()) {
        if (std::find(r.takes->begin(), r.takes->end(), name) != r.takes->end()) out[name] = value;
      }
      return out.dump();
    }
    return body;
  }

  testing::TempDir dir_;
  std::unique_ptr<Server> server_;
  std::thread thread_;
  Status served_;
  int port_ = 0;
};

}  // namespace strata::server
