// Internal: API keys for `strata serve`. A key is a random secret ("sk-strata-" and 48 hex digits) shown
// once when issued; only its SHA-256 is stored (keys.db in the data directory). Each key is bound to an
// account, a user and a role:
//   root   the key from the configuration or $STRATA_ROOT_KEY (never stored): every account, and issuing
//          and revoking keys;
//   admin  everything in its account;
//   user   its own user scope (strata://user/<user>), its own sessions, and the account's shared
//          resources and agent scopes.
// Thread safety: KeyStore is safe to use from many threads.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "sqlite_db.h"
#include "strata/util/status.h"

namespace strata::pg {
class Conn;
}

namespace strata::server {

enum class Role { kRoot, kAdmin, kUser };

std::string_view RoleName(Role role);
Result<Role> ParseRole(std::string_view name);

// Who a request acts as.
struct Identity {
  std::string account = "default";
  std::string user = "default";
  Role role = Role::kUser;
  std::string key_id;  // "" for the root key and for a server without keys.
};

struct KeyInfo {
  std::string id;  // Public handle (12 hex digits), used to list and revoke.
  std::string account;
  std::string user;
  Role role = Role::kUser;
  int64_t created_ms = 0;
};

// Returns the lower-case hex SHA-256 of `text`.
std::string Sha256Hex(std::string_view text);

class KeyStore {
 public:
  // Opens (creating) `path`. `root_key` empty: no root key. `read_only`: only reads the keys there (none
  // when there is no file), and issuing or revoking fails naming the mode.
  static Result<std::unique_ptr<KeyStore>> Open(const std::string& path, std::string root_key, bool read_only = false);
  // Keeps the keys in the PostgreSQL database at `url` (table api_keys), shared by every instance: a key
  // issued or revoked through one is known to all at once (nothing is cached).
  static Result<std::unique_ptr<KeyStore>> OpenPg(const std::string& url, std::string root_key);
  ~KeyStore();

  bool has_root_key() const { return !root_key_hash_.empty(); }

  // Returns the identity `key` stands for; kUnauthenticated for an unknown or revoked key.
  Result<Identity> Authenticate(std::string_view key);
  // Issues a key; returns its info and the secret (shown once).
  Result<std::pair<KeyInfo, std::string>> Issue(const std::string& account, const std::string& user, Role role);
  Result<std::vector<KeyInfo>> List(const std::string& account = "");
  Status Revoke(const std::string& id);

 private:
  KeyStore() = default;
  Status SetRootKey(std::string root_key);
  std::mutex mu_;  // Guards db_, pg_ and cache_.
  sqlite::Db db_;
  std::unique_ptr<pg::Conn> pg_;  // Set: the keys live in PostgreSQL and cache_ is unused.
  std::map<std::string, KeyInfo> cache_;  // SHA-256 of the secret → key; all keys (few).
  std::string root_key_hash_;
  bool read_only_ = false;
};

}  // namespace strata::server
