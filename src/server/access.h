// Internal: a request's identity as the engine sees a caller. The rules of who may reach what are the
// Engine's (engine.h, "Who may reach what"); the server and MCP only say who is asking:
//   root, admin  everything in the account (root: every account);
//   user         Reach::User: its own user scope, its own sessions and their scopes, and the account's
//                shared strata://resources and strata://agent scopes.
#pragma once

#include "keys.h"
#include "strata/engine/engine.h"

namespace strata::server {

inline Reach ReachOf(const Identity& who) {
  return who.role == Role::kUser ? Reach::User(who.user) : Reach::Everything();
}

}  // namespace strata::server
