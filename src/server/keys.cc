#include "keys.h"

#include <openssl/evp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>

#include "pg.h"
#include "strata/memory/uri.h"

namespace strata::server {

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kRoot: return "root";
    case Role::kAdmin: return "admin";
    case Role::kUser: return "user";
  }
  return "user";
}

Result<Role> ParseRole(std::string_view name) {
  if (name == "admin") return Role::kAdmin;
  if (name == "user") return Role::kUser;
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

Result<std::string> RandomHex(size_t bytes) {
  std::ifstream in("/dev/urandom", std::ios::binary);
  std::string raw(bytes, '\0');
  if (!in.read(raw.data(), static_cast<std::streamsize>(bytes))) return Status::Internal("cannot read /dev/urandom");
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char c : raw) {
    out += kHex[c >> 4];
    out += kHex[c & 15];
  }
  return out;
}

int64_t NowMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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
  auto parsed = ParseRole(role);
  if (!parsed.ok()) return Status::DataLoss("api_keys: key " + info.id + " has an unknown role");
  info.role = *parsed;
  STRATA_ASSIGN_OR_RETURN(info.created_ms, r.Int(i, 4));
  return info;
}

constexpr std::string_view kPgColumns = "id, account, \"user\", role, created_ms";

}  // namespace

KeyStore::~KeyStore() = default;

Status KeyStore::SetRootKey(std::string root_key) {
  if (root_key.empty()) return Status::Ok();
  if (root_key.size() < 16) return Status::InvalidArgument("the root key must be at least 16 characters long");
  root_key_hash_ = Sha256Hex(root_key);
  return Status::Ok();
}

Result<std::unique_ptr<KeyStore>> KeyStore::OpenPg(const std::string& url, std::string root_key) {
  std::unique_ptr<KeyStore> store(new KeyStore());
  STRATA_RETURN_IF_ERROR(store->SetRootKey(std::move(root_key)));
  STRATA_ASSIGN_OR_RETURN(store->pg_, pg::Conn::Connect(url));
  STRATA_RETURN_IF_ERROR(pg::Migrate(*store->pg_, "api_keys", kPgMigrations));
  return store;
}

Result<std::unique_ptr<KeyStore>> KeyStore::Open(const std::string& path, std::string root_key, bool read_only) {
  std::unique_ptr<KeyStore> store(new KeyStore());
  STRATA_RETURN_IF_ERROR(store->SetRootKey(std::move(root_key)));
  store->read_only_ = read_only;
  Status opened = read_only ? store->db_.OpenReadOnly(path) : store->db_.OpenDurable(path);
  if (read_only && opened.code() == StatusCode::kNotFound) {
    opened = store->db_.Open(":memory:");  // No keys issued yet: none but the root key.
    if (opened.ok()) opened = store->db_.Exec(kSchema);
  } else if (opened.ok() && !read_only) {
    opened = store->db_.Exec(kSchema);
  }
  STRATA_RETURN_IF_ERROR(opened);
  sqlite::Stmt all(store->db_, "SELECT id, secret_sha256, account, user, role, created_ms FROM api_keys");
  while (true) {
    STRATA_ASSIGN_OR_RETURN(bool row, all.Step());
    if (!row) break;
    auto role = ParseRole(all.Text(4));
    if (!role.ok()) return Status::DataLoss(path + ": key " + all.Text(0) + " has an unknown role");
    store->cache_[all.Text(1)] = KeyInfo{all.Text(0), all.Text(2), all.Text(3), *role, all.Int(5)};
  }
  return store;
}

Result<Identity> KeyStore::Authenticate(std::string_view key) {
  if (key.empty()) return Status::Unauthenticated("an API key is required (Authorization: Bearer KEY or X-API-Key)");
  std::string hash = Sha256Hex(key);
  if (!root_key_hash_.empty() && hash == root_key_hash_) return Identity{"default", "default", Role::kRoot, ""};
  std::lock_guard lock(mu_);
  if (pg_) {
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, pg_->Exec("SELECT " + std::string(kPgColumns) +
                                                  " FROM api_keys WHERE secret_sha256 = $1", {hash}));
    if (r.size() == 0) return Status::Unauthenticated("the API key is not valid (unknown or revoked)");
    STRATA_ASSIGN_OR_RETURN(KeyInfo info, ReadKey(r, 0));
    return Identity{info.account, info.user, info.role, info.id};
  }
  auto it = cache_.find(hash);
  if (it == cache_.end()) return Status::Unauthenticated("the API key is not valid (unknown or revoked)");
  return Identity{it->second.account, it->second.user, it->second.role, it->second.id};
}

Result<std::pair<KeyInfo, std::string>> KeyStore::Issue(const std::string& account, const std::string& user, Role role) {
  if (role == Role::kRoot) return Status::InvalidArgument("the root key comes from the configuration, not from Issue");
  STRATA_RETURN_IF_ERROR(memory::ValidateScopeId(account, "account"));
  STRATA_RETURN_IF_ERROR(memory::ValidateScopeId(user, "user"));
  STRATA_ASSIGN_OR_RETURN(std::string secret_hex, RandomHex(24));
  STRATA_ASSIGN_OR_RETURN(std::string id, RandomHex(6));
  std::string secret = "sk-strata-" + secret_hex;
  KeyInfo info{id, account, user, role, NowMs()};
  std::string hash = Sha256Hex(secret);
  if (read_only_) return Status::FailedPrecondition("issuing a key refused: the data is open read-only (--read-only)");
  std::lock_guard lock(mu_);
  if (pg_) {
    STRATA_RETURN_IF_ERROR(pg_->Exec("INSERT INTO api_keys(id, secret_sha256, account, \"user\", role, created_ms) "
                                     "VALUES ($1, $2, $3, $4, $5, $6)",
                                     {id, hash, account, user, RoleName(role), info.created_ms})
                               .status());
    return std::make_pair(info, secret);
  }
  sqlite::Stmt ins(db_, "INSERT INTO api_keys(id, secret_sha256, account, user, role, created_ms) VALUES (?,?,?,?,?,?)");
  ins.Bind(1, id).Bind(2, hash).Bind(3, account).Bind(4, user).Bind(5, RoleName(role)).Bind(6, info.created_ms);
  STRATA_RETURN_IF_ERROR(ins.Run());
  cache_[hash] = info;
  return std::make_pair(info, secret);
}

Result<std::vector<KeyInfo>> KeyStore::List(const std::string& account) {
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
  for (const auto& [hash, info] : cache_) {
    if (account.empty() || info.account == account) out.push_back(info);
  }
  std::sort(out.begin(), out.end(), [](const KeyInfo& a, const KeyInfo& b) { return a.created_ms < b.created_ms; });
  return out;
}

Status KeyStore::Revoke(const std::string& id) {
  if (read_only_) return Status::FailedPrecondition("revoking a key refused: the data is open read-only (--read-only)");
  std::lock_guard lock(mu_);
  if (pg_) {
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, pg_->Exec("DELETE FROM api_keys WHERE id = $1", {id}));
    if (r.affected() == 0) return Status::NotFound("no API key " + id);
    return Status::Ok();
  }
  sqlite::Stmt del(db_, "DELETE FROM api_keys WHERE id = ?");
  del.Bind(1, id);
  STRATA_RETURN_IF_ERROR(del.Run());
  for (auto it = cache_.begin(); it != cache_.end(); ++it) {
    if (it->second.id == id) {
      cache_.erase(it);
      return Status::Ok();
    }
  }
  return Status::NotFound("no API key " + id);
}

}  // namespace strata::server
