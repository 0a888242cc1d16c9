// API keys for a service built on the engine (`strata serve` is one). A key is a random secret
// ("sk-strata-" and 48 hex digits) shown once when issued; only its SHA-256 is kept, on the engine's own
// backend (keys.db in the data directory, or the api_keys table on PostgreSQL, shared by every instance).
// Each key is bound to an account, a user and a role:
//   admin  everything in its account;
//   user   its own user scope (strata://user/<user>), its own sessions, and the account's shared resources
//          and agent scopes (Reach::User).
// A root key (from a service's configuration, never stored) is the service's business: it is not here.
//
// Thread safety: KeyStore is safe to use from many threads.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/util/status.h"

namespace strata {

enum class KeyRole { kRoot, kAdmin, kUser };
std::string_view KeyRoleName(KeyRole role);
// "admin" or "user" (a root key is never issued); kInvalidArgument otherwise.
Result<KeyRole> ParseKeyRole(std::string_view name);

struct KeyInfo {
  std::string id;  // Public handle (12 hex digits), used to list and revoke.
  std::string account;
  std::string user;
  KeyRole role = KeyRole::kUser;
  int64_t created_ms = 0;
};

// Returns the lower-case hex SHA-256 of `text`.
std::string Sha256Hex(std::string_view text);

class KeyStore {
 public:
  virtual ~KeyStore() = default;
  // The key whose secret is `secret`, or nullopt for an unknown or revoked one.
  virtual Result<std::optional<KeyInfo>> Find(std::string_view secret) = 0;
  // Issues a key; returns its info and the secret (shown once). kFailedPrecondition when read-only.
  virtual Result<std::pair<KeyInfo, std::string>> Issue(const std::string& account, const std::string& user,
                                                        KeyRole role) = 0;
  // The keys of `account` (all when ""), oldest first.
  virtual Result<std::vector<KeyInfo>> List(const std::string& account = "") = 0;
  // kNotFound for an unknown id; kFailedPrecondition when read-only.
  virtual Status Revoke(const std::string& id) = 0;
};

// The key store in the SQLite database at `path` (created unless `read_only`: then a missing file has no
// keys, and issuing or revoking fails naming the mode). Its keys are kept in memory and read again when
// another process (a second server, `strata keys`) changed the file: an issue or a revocation holds in every
// process on the directory at once.
Result<std::unique_ptr<KeyStore>> OpenKeyStore(const std::string& path, bool read_only = false);
// The key store in the PostgreSQL database at `url` (table api_keys; nothing cached, so a key issued or
// revoked through one instance holds on all at once).
Result<std::unique_ptr<KeyStore>> OpenPgKeyStore(const std::string& url, bool read_only = false);

}  // namespace strata
