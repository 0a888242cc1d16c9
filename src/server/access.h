// Internal: who a request acts as, and that identity as the engine sees a caller. The rules of who may
// reach what are the Engine's (engine.h, "Who may reach what"); the server and MCP only say who is asking:
//   root   the key from the configuration or $STRATA_ROOT_KEY (never stored): every account, and issuing
//          and revoking keys;
//   admin  everything in its account;
//   user   Reach::User: its own user scope, its own sessions and their scopes, and the account's shared
//          strata://resources and strata://agent scopes.
#pragma once

#include <string>
#include <string_view>

#include "strata/engine/engine.h"
#include "strata/engine/keys.h"

namespace strata::server {

using Role = KeyRole;
inline std::string_view RoleName(Role role) { return KeyRoleName(role); }

// Who a request acts as.
struct Identity {
  std::string account = "default";
  std::string user = "default";
  Role role = Role::kUser;
  std::string key_id;  // "" for the root key and for a server without keys.
};

inline Reach ReachOf(const Identity& who) {
  return who.role == Role::kUser ? Reach::User(who.user) : Reach::Everything();
}

}  // namespace strata::server
