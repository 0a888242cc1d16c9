// Shared by the modules that keep state in PostgreSQL (session: the job queue and the audit log), through
// the internal target strata_pg_internal; never installed. A thin RAII layer over libpq: a connection that
// reconnects after the server went away, statements with text parameters, results read with checked
// accessors, transactions that roll back unless committed, and versioned schema migrations.
//
// Every error is a Status naming the statement and the server's message, with its code chosen by what the
// caller does next: the server unreachable, restarting or a serialization failure is kUnavailable (retry
// later); a unique violation is kAlreadyExists; bad data is kInvalidArgument; a full disk is
// kResourceExhausted; the rest kInternal. A statement is never retried here: after a lost connection its
// outcome is unknown, so the call fails and the next one reconnects.
//
// Thread safety: a Conn is one libpq connection, used by one thread at a time (callers hold a mutex).
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/util/status.h"

struct pg_conn;
struct pg_result;

namespace strata::pg {

// True when `data` names a PostgreSQL database (postgres:// or postgresql:// URLs) rather than a directory.
bool IsPostgresUrl(std::string_view data);

// A bytea literal for a text parameter: "\\x" and the bytes in hex.
std::string ByteaHex(std::string_view bytes);

// `url` with its search_path set to `schema` (created by EnsureSchema), so that every table a component
// makes lives in that schema: one database holds many Strata accounts side by side. `schema` must be a
// plain identifier ([a-z0-9_], at most 63 bytes; SchemaFor makes one).
std::string WithSchema(std::string_view url, std::string_view schema);
// The schema of an account: "strata_" and the id when it is lower-case letters, digits and '_' (and short
// enough), else "strata_" and a hash of it.
std::string SchemaFor(std::string_view account);
// CREATE SCHEMA IF NOT EXISTS `schema` on the database at `url`.
Status EnsureSchema(const std::string& url, std::string_view schema);

// Returns `url` with any password replaced by "***", for messages and logs.
std::string RedactUrl(std::string_view url);

// One statement parameter, sent as text (or SQL NULL).
class Param {
 public:
  Param(std::string_view text) : value_(std::string(text)) {}  // NOLINT: implicit by design.
  Param(const char* text) : value_(std::string(text)) {}       // NOLINT
  Param(const std::string& text) : value_(text) {}             // NOLINT
  Param(int64_t v) : value_(std::to_string(v)) {}              // NOLINT
  Param(int v) : value_(std::to_string(v)) {}                  // NOLINT
  Param(std::nullopt_t) {}                                     // NOLINT
  // A bytea parameter sent as its bytes (the binary format: no hex doubling, NUL bytes allowed).
  static Param Binary(std::string bytes) {
    Param p(std::move(bytes));
    p.binary_ = true;
    return p;
  }
  const std::optional<std::string>& value() const { return value_; }
  bool binary() const { return binary_; }

 private:
  std::optional<std::string> value_;
  bool binary_ = false;
};

// The rows of a statement. Accessors check the row, the column and the value: a NULL or a non-number where
// a number is expected is kDataLoss naming the column, never undefined behaviour.
class Rows {
 public:
  Rows() = default;
  explicit Rows(pg_result* result, std::string statement);
  ~Rows();
  Rows(Rows&& other) noexcept;
  Rows& operator=(Rows&& other) noexcept;
  Rows(const Rows&) = delete;  // Owns the libpq result.
  Rows& operator=(const Rows&) = delete;

  int size() const;
  // Rows changed by an INSERT/UPDATE/DELETE (PQcmdTuples).
  int64_t affected() const;
  bool IsNull(int row, int col) const;
  Result<std::string> Text(int row, int col) const;
  Result<int64_t> Int(int row, int col) const;
  Result<double> Double(int row, int col) const;
  // A bytea column (sent in the hex format) as its bytes.
  Result<std::string> Bytes(int row, int col) const;
  // A column of rows asked for in the binary format (Conn::ExecBinary) as the bytes the server sent, valid
  // while the Rows live: a bytea's bytes, with no decoding.
  Result<std::string_view> Raw(int row, int col) const;

 private:
  Status Check(int row, int col) const;
  pg_result* result_ = nullptr;
  std::string statement_;  // Its head, for error messages.
};

class Conn {
 public:
  // How long a connect waits for the server when neither the URL (connect_timeout=N) nor PGCONNECT_TIMEOUT
  // says.
  static constexpr std::chrono::seconds kDefaultConnectTimeout{10};

  // Connects to `url` (a postgres:// URL or a libpq connection string). kUnavailable when the server cannot
  // be reached or does not answer within the connect timeout, kInvalidArgument for a malformed URL.
  static Result<std::unique_ptr<Conn>> Connect(const std::string& url);
  ~Conn();
  Conn(const Conn&) = delete;  // Owns the connection.
  Conn& operator=(const Conn&) = delete;

  // Runs one statement with `params` ($1, $2, ...).
  Result<Rows> Exec(std::string_view sql, std::initializer_list<Param> params = {});
  Result<Rows> Exec(std::string_view sql, std::span<const Param> params);
  // The same with every column of the result in PostgreSQL's binary format: read them with Rows::Raw
  // (large bytea values arrive as they are stored, half the size of hex).
  Result<Rows> ExecBinary(std::string_view sql, std::span<const Param> params);
  // Runs a script of statements without parameters (schema changes).
  Status ExecScript(std::string_view sql);

  const std::string& url() const { return url_; }
  // How many times the connection was (re)established: a listener compares it to learn that notifications
  // may have been lost while it was down.
  uint64_t connects() const { return connects_; }

  // LISTEN on `channel` (an identifier).
  Status Listen(std::string_view channel);
  // The payloads of the notifications received since the last call, without blocking or sending anything.
  // kUnavailable when the connection is down (notifications may have been lost: the caller resynchronises
  // and listens again).
  Result<std::vector<std::string>> TakeNotifications();

 private:
  explicit Conn(std::string url) : url_(std::move(url)) {}
  // Makes sure the connection is up: resets a connection that dropped (server restart) outside a
  // transaction.
  Status Ensure();
  Status Fail(pg_result* result, std::string_view sql);
  Result<Rows> Run(std::string_view sql, std::span<const Param> params, int result_format);

  std::string url_;
  pg_conn* conn_ = nullptr;
  bool in_transaction_ = false;
  uint64_t connects_ = 0;
  friend class Txn;
};

// BEGIN on Begin(), ROLLBACK on destruction unless Commit() succeeded.
class Txn {
 public:
  explicit Txn(Conn& conn) : conn_(conn) {}
  ~Txn();
  Txn(const Txn&) = delete;  // Scoped to one block.
  Txn& operator=(const Txn&) = delete;
  Status Begin();
  Status Commit();

 private:
  Conn& conn_;
  bool open_ = false;
};

// Brings `component`'s tables to the newest version: applies the `steps` (step i makes version i+1) not yet
// recorded in strata_migrations, each in the transaction that records it, under an advisory lock so that
// instances starting together apply each step once. A database newer than `steps` is kFailedPrecondition.
Status Migrate(Conn& conn, std::string_view component, std::span<const std::string_view> steps);

}  // namespace strata::pg
