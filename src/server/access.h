// Internal: who may reach what — the one set of rules behind the HTTP routes and the MCP tools.
//   root, admin  everything in the account (root: every account);
//   user         its own user scope (strata://user/<user>), its own sessions (and their strata://session/
//                scopes), and the account's shared strata://resources and strata://agent scopes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "keys.h"
#include "strata/engine/engine.h"
#include "strata/memory/uri.h"
#include "strata/util/status.h"

namespace strata::server {

// The session `id` exists and `who` may use it. Another user's session is kNotFound (not even said to exist).
Status CheckSessionAccess(Engine& engine, const Identity& who, std::string_view id);
// `who` may see the phase-2 job `job`: an admin any; a user only a job of the live incarnation of one of
// its own sessions (Engine::JobSession), never one a deleted session left or one of another user's.
Status CheckJobAccess(Engine& engine, const Identity& who, const session::Job& job);
// `who` may read or write `uri` (kPermissionDenied naming what the identity reaches).
Status CheckUriAccess(Engine& engine, const Identity& who, const memory::Uri& uri);
// The context_ref parts of `messages` point only where `who` may read: phase 2 links memories to them, and
// a link names both ends.
Status CheckRefsAccess(Engine& engine, const Identity& who, const std::vector<Message>& messages);
// A user may not remove or move a scope root or kind directory in one call.
Status CheckWholeScopeAccess(const Identity& who, const memory::Uri& uri);

// Shared by find (HTTP) and search (MCP): the query a session-aware find searches for — a short query
// (under eight words) joined by the session's newest user message that is not the query itself.
std::string SessionAwareQuery(const std::string& query, const std::vector<Message>& messages);

}  // namespace strata::server
