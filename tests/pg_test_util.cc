#include "pg_test_util.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "pg.h"

namespace strata::testing {
namespace {

std::string Shell(const std::string& command, int* rc) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) {
    *rc = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  *rc = pclose(p);
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

struct Server {
  std::string url;  // The server's maintenance database (postgres).
  std::string dir;  // The cluster's directory.
  bool ours = false;
};

std::string Script() { return std::string(STRATA_SOURCE_DIR) + "/tests/pg_cluster.sh"; }

Result<Server> TheServer() {
  static std::once_flag once;
  static Server server;
  static Status status;
  std::call_once(once, [] {
    if (const char* dir = std::getenv("STRATA_TEST_PG_DIR"); dir != nullptr && *dir != '\0') {
      server.dir = dir;
      server.url = "postgresql://strata@/postgres?host=" + server.dir;
      return;
    }
    char templ[] = "/tmp/strata-pg-XXXXXX";
    if (mkdtemp(templ) == nullptr) {
      status = Status::Internal("cannot make a directory for the test cluster");
      return;
    }
    server.dir = templ;
    int rc = 0;
    server.url = Shell("bash " + Script() + " start " + server.dir + " 2>&1", &rc);
    if (rc != 0) {
      status = Status::Unavailable("cannot start a PostgreSQL test cluster: " + server.url);
      return;
    }
    server.ours = true;
    std::atexit([] {
      int ignored = 0;
      Shell("bash " + Script() + " stop " + server.dir + " 2>&1", &ignored);
    });
  });
  if (!status.ok()) return status;
  return server;
}

}  // namespace

Result<std::string> NewPostgresDatabase() {
  STRATA_ASSIGN_OR_RETURN(Server server, TheServer());
  static std::atomic<int> counter{0};
  std::string name = "t_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
  STRATA_ASSIGN_OR_RETURN(auto admin, pg::Conn::Connect(server.url));
  STRATA_RETURN_IF_ERROR(admin->ExecScript("DROP DATABASE IF EXISTS " + name));
  STRATA_RETURN_IF_ERROR(admin->ExecScript("CREATE DATABASE " + name));
  // The server URL names the maintenance database as its path ("/postgres"): swap in the new one.
  std::string url = server.url;
  size_t path = url.find("/postgres");
  if (path == std::string::npos) return Status::Internal("the test server URL names no database: " + url);
  return url.replace(path, 9, "/" + name);
}

OwnPostgres::OwnPostgres() {
  char templ[] = "/tmp/strata-pg-own-XXXXXX";
  if (mkdtemp(templ) == nullptr) {
    status_ = Status::Internal("cannot make a directory for a test cluster");
    return;
  }
  dir_ = templ;
  int rc = 0;
  url_ = Shell("bash " + Script() + " start " + dir_ + " 2>&1", &rc);
  if (rc != 0) status_ = Status::Unavailable("cannot start a PostgreSQL test cluster: " + url_);
}

OwnPostgres::~OwnPostgres() {
  int ignored = 0;
  if (!dir_.empty()) Shell("bash " + Script() + " stop " + dir_ + " 2>&1", &ignored);
}

Status OwnPostgres::Restart() {
  int rc = 0;
  std::string out = Shell("bash " + Script() + " restart " + dir_ + " 2>&1", &rc);
  if (rc != 0) return Status::Internal("pg_ctl restart failed: " + out);
  return Status::Ok();
}

}  // namespace strata::testing
