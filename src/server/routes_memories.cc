// The memory routes (docs/api/openapi.yaml): remember, the audit trail (changes, history), consolidation,
// and skills.
#include "server_impl.h"

namespace strata::server {

// An audit entry as a caller may see it: a shared memory (agent, resources) changed by another user's
// commit does not name that user's session to a user key ("<session>#<archive>#<n>" becomes "").
Json Server::Impl::AuditView(Call& c, const session::AuditEntry& e) {
  // The source names one incarnation of a session: linked only while that very session lives (a new
  // session given a deleted one's id is not it), and shown to a user key only when the session is its own.
  Result<std::optional<session::SessionInfo>> live = c.engine->AuditSession(e);
  bool linked = live.ok() && live->has_value();
  bool from_session = e.source.rfind("remember#", 0) != 0 && e.source.rfind("consolidate#", 0) != 0;
  Json view = views::AuditEntryView(e, linked ? (*live)->id : "");
  if (c.id.role == Role::kUser && from_session && !(linked && (*live)->user == c.id.user)) {
    view["source"] = "";
    view["session"] = "";
  }
  return view;
}

void Server::Impl::AddMemoryRoutes() {
  // ---- Memories, prompts, tokens ----
  Add(Route("POST", "/api/v1/memories/remember", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri scope, UriArg(c, "scope"));
    STRATA_ASSIGN_OR_RETURN(std::string text, c.Arg("text"));
    STRATA_ASSIGN_OR_RETURN(std::string category, c.Arg("category", false));
    STRATA_ASSIGN_OR_RETURN(auto changes, c.engine->Remember(scope.str(), text, category, &shutdown_cancel));
    return views::ChangesView(changes);
  }).Takes("text scope category"));
  // The newest memory changes at or below `under` (default: all the caller can reach), newest first.
  Add(Route("GET", "/api/v1/memories/changes", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri under, UriArg(c, "under", false));
    STRATA_ASSIGN_OR_RETURN(int64_t limit, c.IntArg("limit", 50));
    if (limit < 1 || limit > 1000) return Status::InvalidArgument("\"limit\" must be between 1 and 1000");
    STRATA_ASSIGN_OR_RETURN(auto entries, c.engine->RecentMemoryChanges(under.str(), static_cast<size_t>(limit)));
    Json out = Json::array();
    for (const auto& e : entries) {
      // Everything below the root reaches other users' memories: an admin sees them, a user key never
      // gets here with the root (UriArg gives it its own scope), but an entry is checked all the same.
      auto uri = Uri::Parse(e.uri);
      if (!uri.ok() || !CheckUri(c, *uri).ok()) continue;
      out.push_back(AuditView(c, e));
    }
    return out;
  }).Takes("under limit"));
  Add(Route("GET", "/api/v1/memories/history", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri"));
    STRATA_ASSIGN_OR_RETURN(auto entries, c.engine->MemoryHistory(uri.str()));
    Json out = Json::array();
    for (const auto& e : entries) out.push_back(AuditView(c, e));
    return out;
  }).Takes("uri"));
  Add(Route("POST", "/api/v1/memories/consolidate", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri under, UriArg(c, "under"));
    STRATA_ASSIGN_OR_RETURN(auto changes, c.engine->Consolidate(under.str(), &shutdown_cancel));
    return views::ChangesView(changes);
  }).Takes("under"));
  // ---- Skills (strata://agent/<agent>/skills/<name>) ----
  Add(Route("GET", "/api/v1/skills", [](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string agent, c.Arg("agent"));
    STRATA_ASSIGN_OR_RETURN(auto skills, c.engine->ListSkills(agent));
    Json out = Json::array();
    for (const memory::Node& n : skills) out.push_back(views::NodeView(n));
    return out;
  }).Takes("agent"));
  Add(Route("GET", "/api/v1/skills/{name}", [](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string agent, c.Arg("agent"));
    STRATA_ASSIGN_OR_RETURN(std::string md, c.engine->ShowSkill(agent, c.req.path_params.at(0)));
    return Json{{"agent", agent}, {"name", c.req.path_params.at(0)}, {"skill_md", md}};
  }).Takes("agent"));
  Add(Route("POST", "/api/v1/skills", [](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string agent, c.Arg("agent"));
    STRATA_ASSIGN_OR_RETURN(std::string md, c.Arg("skill_md"));
    STRATA_ASSIGN_OR_RETURN(std::string uri, c.engine->AddSkillText(agent, md));
    return Json{{"uri", uri}};
  }).Takes("agent skill_md"));
}

}  // namespace strata::server
