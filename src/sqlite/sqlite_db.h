// Shared by the modules that keep SQLite databases (memory: the context store; session: the job queue and
// the audit log), through the internal target strata_sqlite_internal; never installed.
// A thin RAII layer over the SQLite C API: a connection, prepared statements, IMMEDIATE transactions.
// Every error becomes a Status naming the statement and SQLite's message; SQLITE_BUSY is kUnavailable.
#pragma once

#include <sqlite3.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <thread>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "strata/util/status.h"

namespace strata::sqlite {

class Db {
 public:
  Db() = default;
  ~Db() {
    for (auto& [sql, stmt] : cache_) sqlite3_finalize(stmt);
    if (db_ != nullptr) sqlite3_close_v2(db_);
  }
  Db(const Db&) = delete;  // Owns the connection.
  Db& operator=(const Db&) = delete;

  Status Open(const std::string& path) {
    int rc = sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                             nullptr);
    path_ = path;
    if (rc != SQLITE_OK) return Error(rc, "open " + path);
    sqlite3_extended_result_codes(db_, 1);
    return Status::Ok();
  }

  // Opens the existing database at `path` only to read it (--read-only). Where this process may write
  // beside it, a read-only connection (a WAL reader still shares -shm with writers); on a read-only volume,
  // where that fails, an immutable one: SQLite then takes no locks and reads neither -wal nor -shm, so the
  // files must not change while it is open (what a read-only volume guarantees). kNotFound when the
  // database does not exist.
  Status OpenReadOnly(const std::string& path, int busy_timeout_ms = 5000) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return Status::NotFound("no database " + path);
    path_ = path;
    // A reader of a WAL database maps -shm beside it, which it must be able to create: only where the
    // directory can be written.
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    bool immutable = ::access(parent.empty() ? "." : parent.c_str(), W_OK) != 0;
    std::string uri = "file:" + UriPath(path) + (immutable ? "?immutable=1" : "?mode=ro");
    int rc = sqlite3_open_v2(uri.c_str(), &db_, SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) return Error(rc, "open " + path + " read-only");
    sqlite3_extended_result_codes(db_, 1);
    sqlite3_busy_timeout(db_, busy_timeout_ms);
    return Exec("PRAGMA query_only=1");
  }

  // Opens the in-memory database `name`, shared by every connection of this process that opens the same
  // name (a read-only store with nothing on disk: its readers must see its one empty schema).
  Status OpenSharedMemory(const std::string& name) {
    std::string uri = "file:" + UriPath(name) + "?mode=memory&cache=shared";
    path_ = "";
    int rc = sqlite3_open_v2(uri.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_URI |
                                                    SQLITE_OPEN_NOMUTEX, nullptr);
    if (rc != SQLITE_OK) return Error(rc, "open an in-memory database");
    sqlite3_extended_result_codes(db_, 1);
    return Status::Ok();
  }

  // `path` as the path part of a file: URI (percent-encoding what a URI would read otherwise).
  static std::string UriPath(const std::string& path) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    std::string out;
    for (unsigned char c : path) {
      if (c == '%' || c == '?' || c == '#' || c < 0x20 || c >= 0x7f) {
        out += '%';
        out += kHex[c >> 4];
        out += kHex[c & 15];
      } else {
        out += static_cast<char>(c);
      }
    }
    return out;
  }

  // Returns why this process cannot write the database at `path` (its directory or the file is read-only),
  // or "" when it can. SQLite needs to write beside the database (WAL, -shm) even to read it.
  static std::string ReadOnlyReason(const std::string& path) {
    if (path.empty()) return "";
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    std::string dir = parent.empty() ? "." : parent.string();
    if (::access(dir.c_str(), W_OK) != 0 && errno != ENOENT) {
      return "the data directory " + dir + " is not writable by this process (" + std::strerror(errno) +
             "); Strata writes beside its databases even to read them (SQLite WAL), unless opened with --read-only";
    }
    if (::access(path.c_str(), W_OK) != 0 && errno != ENOENT) {
      return path + " is not writable by this process (" + std::strerror(errno) + ")";
    }
    return "";
  }

  // Opens `path` for a durable single-file store: creates its directory, WAL journal, synchronous=FULL,
  // and waits up to `busy_timeout_ms` for other connections' locks.
  Status OpenDurable(const std::string& path, int busy_timeout_ms = 5000) {
    std::error_code ec;
    std::filesystem::path parent = std::filesystem::path(path).parent_path();
    if (!parent.empty()) std::filesystem::create_directories(parent, ec);
    if (ec) return Status::Internal("cannot create " + parent.string() + ": " + ec.message());
    STRATA_RETURN_IF_ERROR(Open(path));
    sqlite3_busy_timeout(db_, busy_timeout_ms);
    STRATA_RETURN_IF_ERROR(EnableWal(busy_timeout_ms));
    return Exec("PRAGMA synchronous=FULL");
  }

  // Switches the database to WAL. Changing the journal mode needs the database to itself, and SQLite
  // answers "database is locked" at once, without its busy handler, while another connection is opening
  // or using it (several processes opening a new data directory together): retried until `timeout_ms`.
  Status EnableWal(int timeout_ms) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
    for (int attempt = 0;; ++attempt) {
      Status s = Exec("PRAGMA journal_mode=WAL");
      if (s.ok() || s.code() != StatusCode::kUnavailable || std::chrono::steady_clock::now() >= deadline) return s;
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(2 + attempt, 25)));
    }
  }

  sqlite3* get() const { return db_; }

  // Prepared statements are kept for reuse, keyed by their SQL (a search prepares the same dozen statements
  // every time, and preparing costs more than running them). Take() hands out a kept statement (or prepares
  // one) for the caller alone; Give() resets it and keeps it, up to kMaxCached. *rc is the prepare's result.
  sqlite3_stmt* Take(std::string_view sql, int* rc) {
    if (auto it = cache_.find(std::string(sql)); it != cache_.end()) {
      sqlite3_stmt* stmt = it->second;
      cache_.erase(it);
      *rc = SQLITE_OK;
      return stmt;
    }
    sqlite3_stmt* stmt = nullptr;
    *rc = sqlite3_prepare_v3(db_, sql.data(), static_cast<int>(sql.size()), SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
    return stmt;
  }
  void Give(std::string sql, sqlite3_stmt* stmt) {
    if (stmt == nullptr) return;
    sqlite3_reset(stmt);
    sqlite3_clear_bindings(stmt);
    if (cache_.size() >= kMaxCached) {
      for (auto& [text, kept] : cache_) sqlite3_finalize(kept);
      cache_.clear();
    }
    if (!cache_.emplace(std::move(sql), stmt).second) sqlite3_finalize(stmt);  // The same SQL used twice at once.
  }

  // Runs one or more statements without results.
  Status Exec(std::string_view sql) {
    char* message = nullptr;
    int rc = sqlite3_exec(db_, std::string(sql).c_str(), nullptr, nullptr, &message);
    if (rc == SQLITE_OK) return Status::Ok();
    std::string text = message != nullptr ? message : sqlite3_errstr(rc);
    sqlite3_free(message);
    return WithAccess(rc, MakeStatus(rc, std::string(sql.substr(0, 80)) + ": " + text));
  }

  // Runs one statement without results through the statement cache (BEGIN, COMMIT: run on every read).
  Status ExecOne(std::string_view sql) {
    int rc = SQLITE_OK;
    sqlite3_stmt* stmt = Take(sql, &rc);
    if (rc != SQLITE_OK) {
      sqlite3_finalize(stmt);
      return Error(rc, "prepare " + std::string(sql.substr(0, 80)));
    }
    while ((rc = sqlite3_step(stmt)) == SQLITE_ROW) {
    }
    Status status = rc == SQLITE_DONE ? Status::Ok() : Error(rc, sql.substr(0, 80));
    Give(std::string(sql), stmt);
    return status;
  }

  Status Error(int rc, std::string_view what) const {
    std::string message = std::string(what) + ": " + (db_ != nullptr ? sqlite3_errmsg(db_) : sqlite3_errstr(rc));
    return WithAccess(rc, MakeStatus(rc, std::move(message)));
  }

  // A failure to open or write that comes from missing write access says so (kFailedPrecondition), rather
  // than SQLite's "unable to open database file".
  Status WithAccess(int rc, Status status) const {
    int primary = rc & 0xff;
    if (primary != SQLITE_CANTOPEN && primary != SQLITE_READONLY && primary != SQLITE_PERM &&
        primary != SQLITE_IOERR) {
      return status;
    }
    std::string why = ReadOnlyReason(path_);
    if (why.empty()) return status;
    return Status::FailedPrecondition(why + " [" + status.message() + "]");
  }

  static Status MakeStatus(int rc, std::string message) {
    int primary = rc & 0xff;
    std::string text = "sqlite: " + message;
    if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) return Status::Unavailable(text + " (database is busy)");
    if (primary == SQLITE_FULL) return Status::ResourceExhausted(text);
    if (primary == SQLITE_CORRUPT || primary == SQLITE_NOTADB || primary == SQLITE_IOERR) return Status::DataLoss(text);
    if (primary == SQLITE_CONSTRAINT) return Status::AlreadyExists(text);
    return Status::Internal(text);
  }

 private:
  static constexpr size_t kMaxCached = 64;
  sqlite3* db_ = nullptr;
  std::string path_;  // As opened; for error messages.
  std::unordered_map<std::string, sqlite3_stmt*> cache_;  // Statements not in use, by SQL.
};

class Stmt {
 public:
  Stmt(Db& db, std::string_view sql) : db_(&db), sql_(sql) { stmt_ = db.Take(sql_, &rc_); }
  ~Stmt() {
    if (rc_ == SQLITE_OK) {
      db_->Give(std::move(sql_), stmt_);
    } else {
      sqlite3_finalize(stmt_);
    }
  }
  Stmt(const Stmt&) = delete;  // Owns the statement.
  Stmt& operator=(const Stmt&) = delete;

  Status status() const { return rc_ == SQLITE_OK ? Status::Ok() : db_->Error(rc_, "prepare " + Head()); }

  Stmt& Bind(int i, std::string_view text) {
    sqlite3_bind_text(stmt_, i, text.data(), static_cast<int>(text.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Stmt& Bind(int i, int64_t v) {
    sqlite3_bind_int64(stmt_, i, v);
    return *this;
  }
  Stmt& BindBlob(int i, const void* data, size_t n) {
    sqlite3_bind_blob(stmt_, i, data, static_cast<int>(n), SQLITE_TRANSIENT);
    return *this;
  }

  // Returns true when a row is available, false when done.
  Result<bool> Step() {
    if (rc_ != SQLITE_OK) return status();
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return db_->Error(rc, Head());
  }
  // Runs a statement that returns no rows.
  Status Run() {
    Result<bool> r = Step();
    if (!r.ok()) return r.status();
    return Status::Ok();
  }
  Stmt& Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return *this;
  }

  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::string Text(int col) const {
    const auto* p = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, col));
    return p == nullptr ? std::string() : std::string(p, static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
  }
  double Double(int col) const { return sqlite3_column_double(stmt_, col); }
  std::string_view Blob(int col) const {
    const void* p = sqlite3_column_blob(stmt_, col);
    return p == nullptr ? std::string_view()
                        : std::string_view(static_cast<const char*>(p), static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
  }

 private:
  std::string Head() const { return std::string(sql_.substr(0, 80)); }
  Db* db_;
  std::string sql_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_ = SQLITE_OK;
};

// BEGIN IMMEDIATE on construction (Begin()), ROLLBACK on destruction unless Commit() succeeded.
class Txn {
 public:
  explicit Txn(Db& db) : db_(db) {}
  ~Txn() { if (open_) (void)db_.ExecOne("ROLLBACK"); }
  Txn(const Txn&) = delete;  // Scoped to one block.
  Txn& operator=(const Txn&) = delete;

  Status Begin() {
    STRATA_RETURN_IF_ERROR(db_.ExecOne("BEGIN IMMEDIATE"));
    open_ = true;
    return Status::Ok();
  }
  Status Commit() {
    STRATA_RETURN_IF_ERROR(db_.ExecOne("COMMIT"));
    open_ = false;
    return Status::Ok();
  }

 private:
  Db& db_;
  bool open_ = false;
};

}  // namespace strata::sqlite
