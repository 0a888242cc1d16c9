// Internal: who a request acts as, and that identity as the engine sees a caller. The rules of who may
// reach what are the Engine's (engine.h, "Who may reach what"); the server and MCP only say who is asking:
//   root   the key from the configuration or $STRATA_ROOT_KEY (never stored): every account, and issuing
//          and revoking keys;
//   admin  everything in its account;
//   user   Reach::User: its own user scope, its own sessions and their scopes, and the account's shared
//          strata://resources and strata://agent scopes.
#pragma once

#include <algorithm>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

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

// An integer given as text (a query parameter, MCP's ?level=): the words every front end gives for one that
// is not one, naming `name`.
Result<int64_t> IntegerText(const std::string& text, std::string_view name);

// `message` without the server's data directory in it: "/srv/strata/sessions/a/messages.jsonl" becomes
// "sessions/a/messages.jsonl". Every error a client sees passes through this (HTTP's envelope, MCP's
// results), so no response names where the server keeps its files, whichever layer wrote the message.
inline std::string WithoutDataDir(std::string message, const std::string& data_dir) {
  if (data_dir.empty() || data_dir.starts_with("postgres")) return message;
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(data_dir, ec).lexically_normal();
  std::vector<std::string> prefixes;
  for (const std::filesystem::path& p : {std::filesystem::weakly_canonical(absolute, ec), absolute,
                                         std::filesystem::path(data_dir)}) {
    std::string text = p.string();
    while (text.size() > 1 && text.back() == '/') text.pop_back();
    if (!text.empty() && text != "/") prefixes.push_back(text + "/");
  }
  // The longest first: the directory as given ("strata-data/") is also the tail of its absolute form.
  std::sort(prefixes.begin(), prefixes.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  // Only where a path starts (not "strata://resources/strata-data/x", nor "my-strata-data/x").
  auto starts_path = [&](size_t at) {
    return at == 0 || std::string_view(" \t\n\"'(=:,[").find(message[at - 1]) != std::string_view::npos;
  };
  for (const std::string& prefix : prefixes) {
    for (size_t at = message.find(prefix); at != std::string::npos; at = message.find(prefix, at)) {
      if (starts_path(at)) {
        message.erase(at, prefix.size());
      } else {
        ++at;
      }
    }
  }
  return message;
}

// A view with WithoutDataDir applied to its error members ("error", "last_error": a phase-2 failure kept in
// the queue or an archive, a commit's phase 2), at any depth. Only those members: stored text is the
// caller's and is never rewritten.
template <typename J>
J WithoutDataDirInErrors(J view, const std::string& data_dir) {
  if (view.is_object()) {
    for (auto it = view.begin(); it != view.end(); ++it) {
      if ((it.key() == "error" || it.key() == "last_error") && it.value().is_string()) {
        it.value() = WithoutDataDir(it.value().template get<std::string>(), data_dir);
      } else if (it.value().is_structured()) {
        it.value() = WithoutDataDirInErrors(std::move(it.value()), data_dir);
      }
    }
  } else if (view.is_array()) {
    for (auto& item : view) item = WithoutDataDirInErrors(std::move(item), data_dir);
  }
  return view;
}

}  // namespace strata::server
