#include "strata/engine/keys.h"

#include <map>
#include <mutex>
#include <optional>

#include "sqlite_db.h"
#include "strata/json/checked.h"

#include <openssl/evp.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <tuple>

#include "pg.h"
#include "strata/memory/uri.h"
#include "strata/util/random.h"
#include "strata/util/clock.h"

namespace strata {

std::string_view KeyRoleName(KeyRole role) {
  switch (role) {
    case KeyRole::kRoot: return "root";
    case KeyRole::kAdmin: return "admin";
    case KeyRole::kUser: return "user";
  }
  return "user";
}

Result<KeyRole> ParseKeyRole(std::string_view name) {
  if (name == "admin") return KeyRole::kAdmin;
  if (name == "user") return KeyRole::kUser;
  return Status::InvalidArgument("role must be \"admin\" or \"user\", not \"" + std::string(name.substr(0, 40)) + "\"");
}

std::string Sha256Hex(std::string_view text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned int i = 0; i < len; ++i) {
    out += kHex[digest[i] >> 4];
    out += kHex[digest[i] & 15];
  }
  return out;
}

namespace {

int64_t NowMs() { return SystemClock()->WallMicros() / 1000; }

constexpr char kSchema[] = R"(
CREATE TABLE IF NOT EXISTS api_keys (
  id TEXT PRIMARY KEY,
  secret_sha256 TEXT NOT NULL UNIQUE,
  account TEXT NOT NULL,
  user TEXT NOT NULL,
  role TEXT NOT NULL,
  created_ms INTEGER NOT NULL
);)";

// Version i+1 of the PostgreSQL schema is kPgMigrations[i].
constexpr std::string_view kPgMigrations[] = {R"sql(
CREATE TABLE api_keys(
  id TEXT PRIMARY KEY,
  secret_sha256 TEXT NOT NULL UNIQUE,
  account TEXT NOT NULL,
  "user" TEXT NOT NULL,
  role TEXT NOT NULL,
  created_ms BIGINT NOT NULL);
)sql"};

Result<KeyInfo> ReadKey(const pg::Rows& r, int i) {
  KeyInfo info;
  STRATA_ASSIGN_OR_RETURN(info.id, r.Text(i, 0));
  STRATA_ASSIGN_OR_RETURN(info.account, r.Text(i, 1));
  STRATA_ASSIGN_OR_RETURN(info.user, r.Text(i, 2));
  STRATA_ASSIGN_OR_RETURN(std::string role, r.Text(i, 3));
  auto parsed = ParseKeyRole(role);
  if (!parsed.ok()) return Status::DataLoss("api_keys: key " + info.id + " has an unknown role");
  info.role = *parsed;
  STRATA_ASSIGN_OR_RETURN(info.created_ms, r.Int(i, 4));
  return info;
}

constexpr std::string_view kPgColumns = "id, account, \"user\", role, created_ms";

// One implementation for both backends: SQLite (keys cached in memory, the file being this process's) or
// PostgreSQL (read on every call, the table being shared by instances).
class KeyTable final : public KeyStore {
 public:
  static Result<std::unique_ptr<KeyStore>> OpenSqlite(const std::string& path, bool read_only) {
    auto store = std::unique_ptr<KeyTable>(new KeyTable());
    store->read_only_ = read_only;
    store->db_ = std::make_unique<sqlite::Db>();
    Status opened = read_only ? store->db_->OpenReadOnly(path) : store->db_->OpenDurable(path);
    if (read_only && opened.code() == StatusCode::kNotFound) {
      opened = store->db_->Open(":memory:");  // No keys issued yet: none until another process makes the file.
      if (opened.ok()) opened = store->db_->Exec(kSchema);
      store->not_yet_ = path;
    } else if (opened.ok() && !read_only) {
      opened = store->db_->Exec(kSchema);
    }
    STRATA_RETURN_IF_ERROR(opened.WithContext("API keys"));
    std::lock_guard lock(store->mu_);
    STRATA_RETURN_IF_ERROR(store->RefreshLocked());
    return std::unique_ptr<KeyStore>(std::move(store));
  }

  static Result<std::unique_ptr<KeyStore>> OpenPg(const std::string& url, bool read_only) {
    auto store = std::unique_ptr<KeyTable>(new KeyTable());
    store->read_only_ = read_only;
    STRATA_ASSIGN_OR_RETURN(store->pg_, pg::Conn::Connect(url));
    STRATA_RETURN_IF_ERROR(pg::Migrate(*store->pg_, "api_keys", kPgMigrations));
    return std::unique_ptr<KeyStore>(std::move(store));
  }

  Result<std::optional<KeyInfo>> Find(std::string_view secret) override {
    std::string hash = Sha256Hex(secret);
    std::lock_guard lock(mu_);
    if (pg_) {
      STRATA_ASSIGN_OR_RETURN(pg::Rows r, pg_->Exec("SELECT " + std::string(kPgColumns) +
                                                    " FROM api_keys WHERE secret_sha256 = $1", {hash}));
      if (r.size() == 0) return std::optional<KeyInfo>();
      STRATA_ASSIGN_OR_RETURN(KeyInfo info, ReadKey(r, 0));
      return std::optional<KeyInfo>(std::move(info));
    }
    // A refresh that fails (the file busy or unreadable for a moment) leaves the keys last read: a key
    // check must not fail for it.
    (void)RefreshLocked();
    auto it = cache_.find(hash);
    if (it == cache_.end()) return std::optional<KeyInfo>();
    return std::optional<KeyInfo>(it->second);
  }

  Result<std::pair<KeyInfo, std::string>> Issue(const std::string& account, const std::string& user, KeyRole role) override {
    if (role == KeyRole::kRoot) return Status::InvalidArgument("the root key comes from the configuration, not from Issue");
    STRATA_RETURN_IF_ERROR(memory::ValidateScopeId(account, "account"));
    STRATA_RETURN_IF_ERROR(memory::ValidateScopeId(user, "user"));
    if (read_only_) return Status::FailedPrecondition("issuing a key refused: the data is open read-only (--read-only)");
    STRATA_ASSIGN_OR_RETURN(std::string secret_hex, RandomHex(24));
    STRATA_ASSIGN_OR_RETURN(std::string id, RandomHex(6));
    std::string secret = "sk-strata-" + secret_hex;
    KeyInfo info{id, account, user, role, NowMs()};
    std::string hash = Sha256Hex(secret);
    std::lock_guard lock(mu_);
    if (pg_) {
      STRATA_RETURN_IF_ERROR(pg_->Exec("INSERT INTO api_keys(id, secret_sha256, account, \"user\", role, created_ms) "
                                       "VALUES ($1, $2, $3, $4, $5, $6)",
                                       {id, hash, account, user, KeyRoleName(role), info.created_ms})
                                 .status());
      return std::make_pair(info, secret);
    }
    sqlite::Stmt ins(*db_, "INSERT INTO api_keys(id, secret_sha256, account, user, role, created_ms) VALUES (?,?,?,?,?,?)");
    ins.Bind(1, id).Bind(2, hash).Bind(3, account).Bind(4, user).Bind(5, KeyRoleName(role)).Bind(6, info.created_ms);
    STRATA_RETURN_IF_ERROR(ins.Run());
    cache_[hash] = info;
    return std::make_pair(info, secret);
  }

  Result<std::vector<KeyInfo>> List(const std::string& account) override {
    std::lock_guard lock(mu_);
    std::vector<KeyInfo> out;
    if (pg_) {
      STRATA_ASSIGN_OR_RETURN(pg::Rows r, pg_->Exec("SELECT " + std::string(kPgColumns) + " FROM api_keys WHERE $1 = '' "
                                                    "OR account = $1 ORDER BY created_ms, id", {account}));
      for (int i = 0; i < r.size(); ++i) {
        STRATA_ASSIGN_OR_RETURN(KeyInfo info, ReadKey(r, i));
        out.push_back(std::move(info));
      }
      return out;
    }
    STRATA_RETURN_IF_ERROR(RefreshLocked());
    for (const auto& [hash, info] : cache_) {
      if (account.empty() || info.account == account) out.push_back(info);
    }
    // As PostgreSQL lists them: by creation, then id (keys made in one millisecond came in the map's order).
    std::sort(out.begin(), out.end(), [](const KeyInfo& a, const KeyInfo& b) {
      return std::tie(a.created_ms, a.id) < std::tie(b.created_ms, b.id);
    });
    return out;
  }

  Status Revoke(const std::string& id) override {
    if (read_only_) return Status::FailedPrecondition("revoking a key refused: the data is open read-only (--read-only)");
    std::lock_guard lock(mu_);
    if (pg_) {
      STRATA_ASSIGN_OR_RETURN(pg::Rows r, pg_->Exec("DELETE FROM api_keys WHERE id = $1", {id}));
      if (r.affected() == 0) return Status::NotFound("no API key " + json::QuoteForError(id, 40));
      return Status::Ok();
    }
    sqlite::Stmt del(*db_, "DELETE FROM api_keys WHERE id = ?");
    del.Bind(1, id);
    STRATA_RETURN_IF_ERROR(del.Run());
    // Another process may have issued the key: the row deleted is what says whether it existed.
    const bool deleted = sqlite3_changes(db_->get()) > 0;
    std::erase_if(cache_, [&](const auto& entry) { return entry.second.id == id; });
    if (!deleted) return Status::NotFound("no API key " + json::QuoteForError(id, 40));
    return Status::Ok();
  }

 private:
  KeyTable() = default;

  // Reads every key again when the file changed since the cache was filled: another process on the same
  // data directory (a second `strata serve`, `strata keys` from a shell) issued or revoked one. SQLite's
  // data_version changes with every commit of another connection, and reading it costs no I/O; without
  // this, a key revoked by one process stayed valid in the other until it restarted.
  Status RefreshLocked() {
    // A read-only instance started before any key was issued reads the file once another process made it:
    // it refused every key until it restarted.
    if (!not_yet_.empty()) {
      auto made = std::make_unique<sqlite::Db>();
      if (made->OpenReadOnly(not_yet_).ok()) {
        db_ = std::move(made);
        not_yet_.clear();
        cache_version_.reset();
      }
    }
    sqlite::Stmt version(*db_, "PRAGMA data_version");
    STRATA_ASSIGN_OR_RETURN(bool has, version.Step());
    const int64_t now = has ? version.Int(0) : -1;
    if (cache_version_ && *cache_version_ == now) return Status::Ok();
    std::map<std::string, KeyInfo> fresh;
    sqlite::Stmt all(*db_, "SELECT id, secret_sha256, account, user, role, created_ms FROM api_keys");
    while (true) {
      STRATA_ASSIGN_OR_RETURN(bool row, all.Step());
      if (!row) break;
      auto role = ParseKeyRole(all.Text(4));
      if (!role.ok()) return Status::DataLoss("API keys: key " + all.Text(0) + " has an unknown role");
      fresh[all.Text(1)] = KeyInfo{all.Text(0), all.Text(2), all.Text(3), *role, all.Int(5)};
    }
    cache_ = std::move(fresh);
    cache_version_ = now;
    return Status::Ok();
  }

  std::mutex mu_;  // Guards db_, not_yet_, pg_, cache_ and cache_version_.
  std::unique_ptr<sqlite::Db> db_;
  std::string not_yet_;  // Read-only: the keys file that did not exist yet (db_ is an empty one in memory).
  std::unique_ptr<pg::Conn> pg_;          // Set: the keys live in PostgreSQL and cache_ is unused.
  std::map<std::string, KeyInfo> cache_;  // SHA-256 of the secret → key; all keys (few).
  std::optional<int64_t> cache_version_;  // PRAGMA data_version when cache_ was read.
  bool read_only_ = false;
};

}  // namespace

Result<std::unique_ptr<KeyStore>> OpenKeyStore(const std::string& path, bool read_only) {
  return KeyTable::OpenSqlite(path, read_only);
}

Result<std::unique_ptr<KeyStore>> OpenPgKeyStore(const std::string& url, bool read_only) {
  return KeyTable::OpenPg(url, read_only);
}

}  // namespace strata
