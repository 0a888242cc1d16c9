#include "access.h"

#include <cctype>
#include <nlohmann/json.hpp>

#include "strata/json/checked.h"

namespace strata::server {

Status CheckSessionAccess(Engine& engine, const Identity& who, std::string_view id) {
  STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, engine.GetSession(id));
  if (who.role == Role::kUser && info.user != who.user) return session::NoSuchSession(info.id);
  return Status::Ok();
}

Status CheckJobAccess(Engine& engine, const Identity& who, const session::Job& job) {
  if (who.role != Role::kUser) return Status::Ok();
  STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, engine.JobSession(job));
  if (info.user != who.user) return session::NoSuchSession(info.id);
  return Status::Ok();
}

Status CheckUriAccess(Engine& engine, const Identity& who, const memory::Uri& uri) {
  if (who.role != Role::kUser) return Status::Ok();
  std::string_view kind = uri.kind();
  auto deny = [&] {
    return Status::PermissionDenied("this identity reaches strata://user/" + who.user +
                                    ", its own sessions, strata://resources and strata://agent; not " + uri.str());
  };
  if (kind == "resources" || kind == "agent") return Status::Ok();
  if (kind == "user") return uri.scope_id() == who.user ? Status::Ok() : deny();
  if (kind == "session") {
    if (uri.scope_id().empty()) return deny();
    return CheckSessionAccess(engine, who, uri.scope_id()).ok() ? Status::Ok() : deny();
  }
  return deny();  // The root and the kind directories list every user.
}

Status CheckRefsAccess(Engine& engine, const Identity& who, const std::vector<Message>& messages) {
  for (const Message& m : messages) {
    for (const ContentPart& part : m.content) {
      const auto* custom = std::get_if<CustomPart>(&part);
      if (custom == nullptr || custom->type != "context_ref") continue;
      auto j = json::ParseOrDiscard<nlohmann::json>(custom->json);
      STRATA_ASSIGN_OR_RETURN(memory::Uri uri, memory::Uri::Parse(json::StringOr(j, "uri")));
      STRATA_RETURN_IF_ERROR(CheckUriAccess(engine, who, uri));
    }
  }
  return Status::Ok();
}

Status CheckWholeScopeAccess(const Identity& who, const memory::Uri& uri) {
  if (who.role == Role::kUser && (uri.is_root() || uri.is_kind_dir() || uri.is_scope_root())) {
    return Status::PermissionDenied("a user cannot remove or move " + uri.str() + " as a whole");
  }
  return Status::Ok();
}

// The query a find with a session searches for: a short query (under eight words) is joined by the
// session's newest user message that is not the query itself, cut to 400 bytes.
std::string SessionAwareQuery(const std::string& query, const std::vector<Message>& messages) {
  size_t words = 0;
  bool in_word = false;
  for (unsigned char ch : query) {
    bool space = std::isspace(ch) != 0;
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  if (words >= 8) return query;
  for (auto m = messages.rbegin(); m != messages.rend(); ++m) {
    if (m->role != strata::Role::kUser) continue;
    std::string text = m->ExtractText(" ");
    if (text.empty() || text == query) continue;
    if (text.size() > 400) {
      size_t cut = 400;
      while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
      text.resize(cut);
    }
    return query + "\n" + text;
  }
  return query;
}

}  // namespace strata::server
