// Who a caller is, as far as the engine cares (engine.h, "Who may reach what").
#pragma once

#include <string>
#include <utility>

namespace strata {

// What a caller may reach. Everything (the default: a program embedding the engine, the CLI, an admin's
// key), or one user of the data: that user's own scope (strata://user/<user>), its own sessions and their
// scopes (strata://session/<id>), and the shared scopes strata://resources and strata://agent. The rules
// are the Engine's (CheckAccess, CheckSessionAccess ...), so every front end applies the same ones.
struct Reach {
  std::string user;  // "" = everything.
  static Reach Everything() { return {}; }
  static Reach User(std::string user) { return {std::move(user)}; }
  bool everything() const { return user.empty(); }
};

}  // namespace strata
