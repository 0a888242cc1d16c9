// PostgreSQL for the tests: a server (the cluster in $STRATA_TEST_PG_DIR, which ctest's pg_cluster fixture
// starts, else a throwaway cluster this process starts once with tests/pg_cluster.sh and stops at exit)
// and a fresh database per caller, so tests running in parallel processes never see each other's rows.
#pragma once

#include <string>

#include "strata/util/status.h"

namespace strata::testing {

// The URL of a new, empty database on the test server. Fails (never skips) when no server can be had:
// the PostgreSQL backend's tests are part of the suite.
Result<std::string> NewPostgresDatabase();

// A cluster of one test's own (started in a temporary directory, stopped at destruction), for tests that
// restart the server: the shared one serves tests running in parallel.
class OwnPostgres {
 public:
  OwnPostgres();
  ~OwnPostgres();
  OwnPostgres(const OwnPostgres&) = delete;  // Owns a running server.
  OwnPostgres& operator=(const OwnPostgres&) = delete;
  // Non-OK when the cluster could not be started.
  const Status& status() const { return status_; }
  // The server's maintenance database.
  const std::string& url() const { return url_; }
  // pg_ctl restart: connections drop, committed rows stay.
  Status Restart();

 private:
  std::string dir_;
  std::string url_;
  Status status_;
};

}  // namespace strata::testing
