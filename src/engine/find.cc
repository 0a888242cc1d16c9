// Engine operations that answer for a caller: who may reach what (Reach), and find, glob and grep over
// what the caller may read. HTTP, MCP, the agent tools and the CLI all call these, so one question gets one
// answer whichever way it is asked.
#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>

#include "guard.h"
#include "strata/engine/engine.h"
#include "strata/json/checked.h"
#include "strata/memory/uri.h"
#include "strata/tokenizer/registry.h"

namespace strata {

using engine_internal::Guard;
using memory::Uri;

namespace {

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

// Each hit's tokens: its abstract as raw text, in one counter (the same for every front end).
void CountHitTokens(std::vector<memory::Hit>& hits, std::string_view encoding) {
  for (memory::Hit& h : hits) h.tokens = tokenizer::CountText(encoding, h.abstract_text);
}

// The places a search for `reach` below `under` ("" = everything it may read) covers.
Result<std::vector<Uri>> SearchPlaces(Engine& engine, const Reach& reach, std::string_view under) {
  if (!under.empty()) {
    STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(under));
    STRATA_RETURN_IF_ERROR(engine.CheckAccess(reach, uri.str()));
    return std::vector<Uri>{uri};
  }
  std::vector<Uri> roots = Engine::ReachRoots(reach);
  if (roots.empty()) roots.push_back(Uri::Root());
  return roots;
}

}  // namespace

// ---- Who may reach what ----

std::vector<Uri> Engine::ReachRoots(const Reach& reach) {
  if (reach.everything()) return {};
  std::vector<Uri> out;
  for (std::string text : {"strata://user/" + reach.user, std::string("strata://resources"), std::string("strata://agent")}) {
    Result<Uri> uri = Uri::Parse(text);
    if (uri.ok()) out.push_back(*uri);
  }
  return out;
}

Status Engine::CheckSessionAccess(const Reach& reach, std::string_view id) {
  return Guard("session access", [&]() -> Status {
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, GetSession(id));
    if (!reach.everything() && info.user != reach.user) return session::NoSuchSession(info.id);
    return Status::Ok();
  });
}

Status Engine::CheckJobAccess(const Reach& reach, const session::Job& job) {
  if (reach.everything()) return Status::Ok();
  return Guard("task access", [&]() -> Status {
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, JobSession(job));
    if (info.user != reach.user) return session::NoSuchSession(info.id);
    return Status::Ok();
  });
}

Status Engine::CheckAccess(const Reach& reach, std::string_view text) {
  if (reach.everything()) return Status::Ok();
  return Guard("access", [&]() -> Status {
    STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(text));
    std::string_view kind = uri.kind();
    auto deny = [&] {
      return Status::PermissionDenied("this identity reaches strata://user/" + reach.user +
                                      ", its own sessions, strata://resources and strata://agent; not " + uri.str());
    };
    if (kind == "resources" || kind == "agent") return Status::Ok();
    if (kind == "user") return uri.scope_id() == reach.user ? Status::Ok() : deny();
    if (kind == "session") {
      if (uri.scope_id().empty()) return deny();
      return CheckSessionAccess(reach, uri.scope_id()).ok() ? Status::Ok() : deny();
    }
    return deny();  // The root and the kind directories list every user.
  });
}

Status Engine::CheckRefs(const Reach& reach, std::span<const Message> messages) {
  if (reach.everything()) return Status::Ok();
  for (const Message& m : messages) {
    for (const ContentPart& part : m.content) {
      const auto* custom = std::get_if<CustomPart>(&part);
      if (custom == nullptr || custom->type != session::kContextRefPartType) continue;
      auto j = json::ParseOrDiscard<nlohmann::json>(custom->json);
      STRATA_RETURN_IF_ERROR(CheckAccess(reach, json::StringOr(j, "uri")));
    }
  }
  return Status::Ok();
}

Status Engine::CheckWholeScope(const Reach& reach, std::string_view text) {
  if (reach.everything()) return Status::Ok();
  STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(text));
  if (uri.is_root() || uri.is_kind_dir() || uri.is_scope_root()) {
    return Status::PermissionDenied("a user cannot remove or move " + uri.str() + " as a whole");
  }
  return Status::Ok();
}

// ---- Find, glob and grep ----

Result<std::vector<memory::Hit>> Engine::Find(std::string_view query, const memory::FindOptions& options) {
  return Guard("find", [&]() -> Result<std::vector<memory::Hit>> {
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * s, store());
    STRATA_ASSIGN_OR_RETURN(std::vector<memory::Hit> hits, memory::Find(*s, std::string(query), options));
    CountHitTokens(hits, tokenizer::kDefaultEncoding);
    return hits;
  });
}

Result<FindResult> Engine::Find(const FindRequest& request) {
  return Guard("find", [&]() -> Result<FindResult> {
    if (request.limit < 1 || request.limit > 1000) return Status::InvalidArgument("\"limit\" must be between 1 and 1000");
    if (request.token_budget < 0) return Status::InvalidArgument("\"token_budget\" must not be negative");
    STRATA_RETURN_IF_ERROR(tokenizer::ValidateCounterName(request.encoding));
    memory::FindOptions options = request.tuning;
    options.limit = request.limit;
    options.under = Uri::Root();
    options.roots.clear();
    STRATA_ASSIGN_OR_RETURN(std::vector<Uri> places, SearchPlaces(*this, request.reach, request.under));
    if (places.size() == 1) {
      options.under = places[0];
    } else {
      options.roots = std::move(places);
    }
    FindResult out;
    std::string searched = request.query;
    if (!request.session.empty()) {
      STRATA_RETURN_IF_ERROR(CheckSessionAccess(request.reach, request.session));
      STRATA_ASSIGN_OR_RETURN(std::vector<Message> messages, SessionMessages(request.session));
      searched = SessionAwareQuery(request.query, messages);
      if (searched != request.query) out.searched = searched;
    }
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * s, store());
    STRATA_ASSIGN_OR_RETURN(std::vector<memory::Hit> hits, memory::Find(*s, searched, options));
    CountHitTokens(hits, request.encoding);
    for (memory::Hit& h : hits) {
      if (request.token_budget > 0 && out.tokens + h.tokens > request.token_budget) break;
      out.tokens += h.tokens;
      out.hits.push_back(std::move(h));
    }
    return out;
  });
}

Result<std::vector<memory::Node>> Engine::Glob(std::string_view pattern, std::string_view under, const Reach& reach) {
  return Guard("glob", [&]() -> Result<std::vector<memory::Node>> {
    STRATA_ASSIGN_OR_RETURN(std::vector<Uri> places, SearchPlaces(*this, reach, under));
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * s, store());
    std::vector<memory::Node> out;
    for (const Uri& place : places) {
      Result<std::vector<memory::Node>> nodes = s->Glob(pattern, place);
      // A readable scope with nothing in it yet has nothing to match (with no `under`, it was not named).
      if (!nodes.ok() && under.empty() && nodes.status().code() == StatusCode::kNotFound) continue;
      STRATA_RETURN_IF_ERROR(nodes.status());
      for (memory::Node& n : *nodes) out.push_back(std::move(n));
    }
    return out;
  });
}

Result<std::vector<memory::GrepMatch>> Engine::Grep(std::string_view needle, std::string_view under, bool ignore_case,
                                                   const Reach& reach) {
  return Guard("grep", [&]() -> Result<std::vector<memory::GrepMatch>> {
    STRATA_ASSIGN_OR_RETURN(std::vector<Uri> places, SearchPlaces(*this, reach, under));
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * s, store());
    std::vector<memory::GrepMatch> out;
    for (const Uri& place : places) {
      Result<std::vector<memory::GrepMatch>> found = s->Grep(needle, place, ignore_case);
      if (!found.ok() && under.empty() && found.status().code() == StatusCode::kNotFound) continue;
      STRATA_RETURN_IF_ERROR(found.status());
      for (memory::GrepMatch& m : *found) {
        if (out.size() >= 1000) break;  // As one store grep stops.
        out.push_back(std::move(m));
      }
    }
    return out;
  });
}

}  // namespace strata
