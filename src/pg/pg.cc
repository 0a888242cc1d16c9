#include "pg.h"

#include <libpq-fe.h>

#include <charconv>
#include <cstdlib>
#include <cstring>

namespace strata::pg {
namespace {

std::string Head(std::string_view sql) {
  std::string out(sql.substr(0, 80));
  for (char& c : out) {
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  }
  return out;
}

std::string Trim(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// The Status for a failed statement, by its SQLSTATE.
Status FromSqlState(const char* state, std::string message) {
  std::string_view code = state == nullptr ? "" : state;
  std::string_view cls = code.substr(0, std::min<size_t>(2, code.size()));
  if (cls == "08" || code == "57P01" || code == "57P02" || code == "57P03" || code == "40001" || code == "40P01" ||
      code == "55P03" || code.empty()) {
    return Status::Unavailable(std::move(message));
  }
  if (code == "23505") return Status::AlreadyExists(std::move(message));
  if (cls == "22" || cls == "23") return Status::InvalidArgument(std::move(message));
  if (cls == "53") return Status::ResourceExhausted(std::move(message));
  if (cls == "XX") return Status::DataLoss(std::move(message));
  return Status::Internal(std::move(message));
}

}  // namespace

bool IsPostgresUrl(std::string_view data) {
  return data.rfind("postgres://", 0) == 0 || data.rfind("postgresql://", 0) == 0;
}

std::string RedactUrl(std::string_view url) {
  std::string out(url);
  // password=... as a query parameter or a conninfo keyword.
  for (size_t at = out.find("password="); at != std::string::npos; at = out.find("password=", at + 1)) {
    size_t start = at + 9;
    size_t end = out.find_first_of("& ", start);
    out.replace(start, (end == std::string::npos ? out.size() : end) - start, "***");
  }
  size_t scheme = out.find("://");
  if (scheme == std::string::npos) return out;
  size_t at = out.find('@', scheme + 3);
  if (at == std::string::npos) return out;
  size_t colon = out.find(':', scheme + 3);
  if (colon == std::string::npos || colon > at) return out;
  return out.substr(0, colon + 1) + "***" + out.substr(at);
}

// ---- Rows ----

Rows::Rows(pg_result* result, std::string statement) : result_(result), statement_(std::move(statement)) {}
Rows::~Rows() {
  if (result_ != nullptr) PQclear(result_);
}
Rows::Rows(Rows&& other) noexcept : result_(other.result_), statement_(std::move(other.statement_)) {
  other.result_ = nullptr;
}
Rows& Rows::operator=(Rows&& other) noexcept {
  if (this != &other) {
    if (result_ != nullptr) PQclear(result_);
    result_ = other.result_;
    statement_ = std::move(other.statement_);
    other.result_ = nullptr;
  }
  return *this;
}

int Rows::size() const { return result_ == nullptr ? 0 : PQntuples(result_); }

int64_t Rows::affected() const {
  if (result_ == nullptr) return 0;
  const char* n = PQcmdTuples(result_);
  int64_t v = 0;
  if (n == nullptr || *n == '\0') return 0;
  std::from_chars(n, n + std::strlen(n), v);
  return v;
}

Status Rows::Check(int row, int col) const {
  if (result_ == nullptr || row < 0 || row >= PQntuples(result_) || col < 0 || col >= PQnfields(result_)) {
    return Status::Internal("postgres: " + statement_ + ": no row " + std::to_string(row) + " column " +
                            std::to_string(col));
  }
  return Status::Ok();
}

bool Rows::IsNull(int row, int col) const { return Check(row, col).ok() && PQgetisnull(result_, row, col) != 0; }

Result<std::string> Rows::Text(int row, int col) const {
  STRATA_RETURN_IF_ERROR(Check(row, col));
  if (PQgetisnull(result_, row, col) != 0) return std::string();
  return std::string(PQgetvalue(result_, row, col), static_cast<size_t>(PQgetlength(result_, row, col)));
}

Result<std::string_view> Rows::Raw(int row, int col) const {
  STRATA_RETURN_IF_ERROR(Check(row, col));
  if (PQgetisnull(result_, row, col) != 0) {
    const char* name = PQfname(result_, col);
    return Status::DataLoss("postgres: " + statement_ + ": column " + (name ? name : "?") + " is NULL");
  }
  return std::string_view(PQgetvalue(result_, row, col), static_cast<size_t>(PQgetlength(result_, row, col)));
}

Result<int64_t> Rows::Int(int row, int col) const {
  STRATA_RETURN_IF_ERROR(Check(row, col));
  const char* name = PQfname(result_, col);
  if (PQgetisnull(result_, row, col) != 0) {
    return Status::DataLoss("postgres: " + statement_ + ": column " + (name ? name : "?") + " is NULL");
  }
  const char* text = PQgetvalue(result_, row, col);
  size_t n = static_cast<size_t>(PQgetlength(result_, row, col));
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text, text + n, v);
  if (ec != std::errc() || end != text + n) {
    return Status::DataLoss("postgres: " + statement_ + ": column " + (name ? name : "?") + " is not an integer");
  }
  return v;
}

Result<double> Rows::Double(int row, int col) const {
  STRATA_RETURN_IF_ERROR(Check(row, col));
  const char* name = PQfname(result_, col);
  if (PQgetisnull(result_, row, col) != 0) {
    return Status::DataLoss("postgres: " + statement_ + ": column " + (name ? name : "?") + " is NULL");
  }
  const char* text = PQgetvalue(result_, row, col);
  char* end = nullptr;
  double v = std::strtod(text, &end);
  if (end == text || *end != '\0') {
    return Status::DataLoss("postgres: " + statement_ + ": column " + (name ? name : "?") + " is not a number");
  }
  return v;
}

Result<std::string> Rows::Bytes(int row, int col) const {
  STRATA_ASSIGN_OR_RETURN(std::string text, Text(row, col));
  const char* name = PQfname(result_, col);
  auto bad = [&] {
    return Status::DataLoss("postgres: " + statement_ + ": column " + (name ? name : "?") + " is not hex bytea");
  };
  if (text.empty()) return std::string();
  if (text.size() % 2 != 0 || text.compare(0, 2, "\\x") != 0) return bad();
  auto nibble = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out((text.size() - 2) / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    int hi = nibble(text[2 + 2 * i]), lo = nibble(text[3 + 2 * i]);
    if (hi < 0 || lo < 0) return bad();
    out[i] = static_cast<char>(hi << 4 | lo);
  }
  return out;
}

std::string ByteaHex(std::string_view bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "\\x";
  out.reserve(2 + bytes.size() * 2);
  for (unsigned char c : bytes) {
    out.push_back(kHex[c >> 4]);
    out.push_back(kHex[c & 15]);
  }
  return out;
}

std::string WithSchema(std::string_view url, std::string_view schema) {
  std::string out(url);
  if (IsPostgresUrl(url)) {
    out += url.find('?') == std::string_view::npos ? '?' : '&';
    return out + "options=-csearch_path%3D" + std::string(schema);
  }
  return out + " options='-csearch_path=" + std::string(schema) + "'";
}

std::string SchemaFor(std::string_view account) {
  bool plain = !account.empty() && account.size() <= 40;
  for (char c : account) plain = plain && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
  if (plain) return "strata_" + std::string(account);
  uint64_t h = 1469598103934665603ull;  // FNV-1a: stable across builds and machines.
  for (unsigned char c : account) h = (h ^ c) * 1099511628211ull;
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out = "strata_x";
  for (int shift = 60; shift >= 0; shift -= 4) out += kHex[(h >> shift) & 15];
  return out;
}

Status EnsureSchema(const std::string& url, std::string_view schema) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Conn> conn, Conn::Connect(url));
  // Concurrent CREATE SCHEMA IF NOT EXISTS can still collide on the catalog's unique index: serialise.
  Txn txn(*conn);
  STRATA_RETURN_IF_ERROR(txn.Begin());
  STRATA_RETURN_IF_ERROR(conn->Exec("SELECT pg_advisory_xact_lock(hashtext('strata schemas'))").status());
  STRATA_RETURN_IF_ERROR(conn->ExecScript("CREATE SCHEMA IF NOT EXISTS " + std::string(schema)));
  return txn.Commit();
}

// ---- Conn ----

Result<std::unique_ptr<Conn>> Conn::Connect(const std::string& url) {
  std::unique_ptr<Conn> conn(new Conn(url));
  char* error = nullptr;
  PQconninfoOption* parsed = PQconninfoParse(url.c_str(), &error);
  if (parsed == nullptr) {
    std::string why = error != nullptr ? Trim(error) : "malformed";
    PQfreemem(error);
    return Status::InvalidArgument("postgres: the connection string " + RedactUrl(url) + " is invalid: " + why);
  }
  PQconninfoFree(parsed);
  STRATA_RETURN_IF_ERROR(conn->Ensure());
  return conn;
}

Conn::~Conn() {
  if (conn_ != nullptr) PQfinish(conn_);
}

Status Conn::Ensure() {
  if (conn_ != nullptr && PQstatus(conn_) == CONNECTION_OK) return Status::Ok();
  if (in_transaction_) {
    return Status::Unavailable("postgres: the connection to " + RedactUrl(url_) + " was lost inside a transaction");
  }
  if (conn_ == nullptr) {
    // A server that accepts the connection but never answers (a host that drops packets, a stopped
    // process behind a live port) would hold a connect forever: libpq waits without a limit unless told.
    // kDefaultConnectTimeout applies unless the URL or PGCONNECT_TIMEOUT says otherwise (later keywords
    // override earlier ones, and an explicit keyword overrides the environment).
    const char* from_env = std::getenv("PGCONNECT_TIMEOUT");
    const bool default_timeout = from_env == nullptr || *from_env == '\0';
    const std::string timeout = std::to_string(kDefaultConnectTimeout.count());
    const char* keywords[] = {"connect_timeout", "dbname", nullptr};
    const char* values[] = {timeout.c_str(), url_.c_str(), nullptr};
    conn_ = PQconnectdbParams(default_timeout ? keywords : keywords + 1, default_timeout ? values : values + 1,
                              /*expand_dbname=*/1);
  } else {
    PQreset(conn_);
  }
  if (conn_ == nullptr) return Status::Internal("postgres: out of memory connecting to " + RedactUrl(url_));
  if (PQstatus(conn_) != CONNECTION_OK) {
    return Status::Unavailable("postgres: cannot connect to " + RedactUrl(url_) + ": " + Trim(PQerrorMessage(conn_)));
  }
  // Messages of notices (CREATE TABLE IF NOT EXISTS ... "already exists, skipping") are not for our users.
  PQsetNoticeProcessor(conn_, [](void*, const char*) {}, nullptr);
  // Rows::Bytes reads bytea in the hex format, whatever the database or role defaults to.
  if (pg_result* r = PQexec(conn_, "SET bytea_output = 'hex'"); r != nullptr) PQclear(r);
  ++connects_;
  return Status::Ok();
}

Status Conn::Listen(std::string_view channel) {
  return ExecScript("LISTEN " + std::string(channel));
}

Result<std::vector<std::string>> Conn::TakeNotifications() {
  if (conn_ == nullptr || PQstatus(conn_) != CONNECTION_OK || PQconsumeInput(conn_) == 0) {
    return Status::Unavailable("postgres: the listening connection to " + RedactUrl(url_) + " is down");
  }
  std::vector<std::string> out;
  while (PGnotify* n = PQnotifies(conn_)) {
    out.emplace_back(n->extra != nullptr ? n->extra : "");
    PQfreemem(n);
  }
  return out;
}

Status Conn::Fail(pg_result* result, std::string_view sql) {
  std::string message = "postgres: " + Head(sql) + ": ";
  const char* state = nullptr;
  if (result != nullptr) {
    state = PQresultErrorField(result, PG_DIAG_SQLSTATE);
    message += Trim(PQresultErrorMessage(result));
  } else {
    message += Trim(PQerrorMessage(conn_));
  }
  // Copy the state before the result is freed.
  std::string code = state == nullptr ? "" : state;
  if (result != nullptr) PQclear(result);
  if (PQstatus(conn_) != CONNECTION_OK) return Status::Unavailable(message + " (connection lost; the next call reconnects)");
  return FromSqlState(code.empty() ? "XX000" : code.c_str(), message);
}

Result<Rows> Conn::Exec(std::string_view sql, std::initializer_list<Param> params) {
  return Exec(sql, std::span<const Param>(params.begin(), params.size()));
}

Result<Rows> Conn::Exec(std::string_view sql, std::span<const Param> params) { return Run(sql, params, 0); }

Result<Rows> Conn::ExecBinary(std::string_view sql, std::span<const Param> params) { return Run(sql, params, 1); }

Result<Rows> Conn::Run(std::string_view sql, std::span<const Param> params, int result_format) {
  STRATA_RETURN_IF_ERROR(Ensure());
  std::vector<const char*> values;
  std::vector<int> lengths, formats;
  values.reserve(params.size());
  bool any_binary = false;
  for (size_t i = 0; i < params.size(); ++i) {
    const Param& p = params[i];
    // A text parameter ends at its first NUL: refuse it rather than store less than was given.
    if (!p.binary() && p.value() && p.value()->find('\0') != std::string::npos) {
      return Status::InvalidArgument("postgres: " + Head(sql) + ": parameter $" + std::to_string(i + 1) +
                                     " contains a NUL character, which PostgreSQL text cannot hold");
    }
    values.push_back(p.value() ? p.value()->data() : nullptr);
    lengths.push_back(p.value() ? static_cast<int>(p.value()->size()) : 0);
    formats.push_back(p.binary() ? 1 : 0);
    any_binary = any_binary || p.binary();
  }
  std::string text(sql);
  pg_result* result = PQexecParams(conn_, text.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                                   any_binary ? lengths.data() : nullptr, any_binary ? formats.data() : nullptr,
                                   result_format);
  ExecStatusType status = result == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(result);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) return Fail(result, sql);
  return Rows(result, Head(sql));
}

Status Conn::ExecScript(std::string_view sql) {
  STRATA_RETURN_IF_ERROR(Ensure());
  std::string text(sql);
  pg_result* result = PQexec(conn_, text.c_str());
  ExecStatusType status = result == nullptr ? PGRES_FATAL_ERROR : PQresultStatus(result);
  if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) return Fail(result, sql);
  PQclear(result);
  return Status::Ok();
}

// ---- Txn ----

Txn::~Txn() {
  if (!open_) return;
  conn_.in_transaction_ = false;
  if (conn_.conn_ != nullptr && PQstatus(conn_.conn_) == CONNECTION_OK) {
    pg_result* r = PQexec(conn_.conn_, "ROLLBACK");
    if (r != nullptr) PQclear(r);
  }
}

Status Txn::Begin() {
  STRATA_RETURN_IF_ERROR(conn_.ExecScript("BEGIN"));
  open_ = true;
  conn_.in_transaction_ = true;
  return Status::Ok();
}

Status Txn::Commit() {
  Status s = conn_.ExecScript("COMMIT");
  open_ = false;
  conn_.in_transaction_ = false;
  return s;
}

// ---- Migrations ----

Status Migrate(Conn& conn, std::string_view component, std::span<const std::string_view> steps) {
  Txn txn(conn);
  STRATA_RETURN_IF_ERROR(txn.Begin());
  // The lock comes first: two instances creating the bookkeeping table at once would collide.
  STRATA_RETURN_IF_ERROR(conn.Exec("SELECT pg_advisory_xact_lock(hashtext('strata migrations'))").status());
  STRATA_RETURN_IF_ERROR(conn.ExecScript(
      "CREATE TABLE IF NOT EXISTS strata_migrations(component TEXT PRIMARY KEY, version INTEGER NOT NULL, "
      "applied_ms BIGINT NOT NULL)"));
  STRATA_ASSIGN_OR_RETURN(Rows current, conn.Exec("SELECT version FROM strata_migrations WHERE component = $1",
                                                  {std::string_view(component)}));
  int64_t version = 0;
  if (current.size() > 0) {
    STRATA_ASSIGN_OR_RETURN(version, current.Int(0, 0));
  }
  if (version > static_cast<int64_t>(steps.size())) {
    return Status::FailedPrecondition("postgres: the " + std::string(component) + " tables are at version " +
                                      std::to_string(version) + ", newer than this program knows (" +
                                      std::to_string(steps.size()) + "): run a newer Strata");
  }
  for (size_t i = static_cast<size_t>(version); i < steps.size(); ++i) {
    STRATA_RETURN_IF_ERROR(conn.ExecScript(steps[i]).WithContext(std::string(component) + " migration " +
                                                                 std::to_string(i + 1)));
  }
  if (static_cast<size_t>(version) < steps.size()) {
    STRATA_RETURN_IF_ERROR(conn.Exec("INSERT INTO strata_migrations(component, version, applied_ms) VALUES ($1, $2, "
                                     "(extract(epoch from clock_timestamp()) * 1000)::bigint) ON CONFLICT (component) "
                                     "DO UPDATE SET version = EXCLUDED.version, applied_ms = EXCLUDED.applied_ms",
                                     {std::string_view(component), static_cast<int64_t>(steps.size())})
                                   .status());
  }
  return txn.Commit();
}

}  // namespace strata::pg
