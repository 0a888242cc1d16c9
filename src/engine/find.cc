// Engine operations that answer for a caller: who may reach what (Reach), and find, glob and grep over
// what the caller may read. HTTP, MCP, the agent tools and the CLI all call these, so one question gets one
// answer whichever way it is asked.
#include <algorithm>
#include <cctype>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>

#include "engine_impl.h"
#include "guard.h"
#include "strata/engine/engine.h"
#include "strata/json/checked.h"
#include "strata/llm/ask_json.h"
#include "strata/memory/uri.h"
#include "strata/prompt/prompt_library.h"
#include "strata/tokenizer/registry.h"
#include "strata/util/utf8.h"

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
    return query + "\n" + Utf8Cut(std::move(text), 400);
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


// ---- Model help (FindAssist) ----

using Json = nlohmann::json;

// One model question of a find's help, with its cost added to `cost`.
Result<std::string> AskModel(llm::ChatProvider& model, prompt::PromptLibrary& prompts, std::string_view prompt_id,
                             const Json& vars, std::string_view what, const llm::JsonCheck& check,
                             FindModelCost& cost) {
  auto value = prompt::Value::FromJson(vars.dump(-1, ' ', false, Json::error_handler_t::replace));
  if (!value.ok()) return value.status();
  STRATA_ASSIGN_OR_RETURN(std::string prompt, prompts.Render(prompt_id, *value));
  llm::JsonAsk ask;
  auto start = std::chrono::steady_clock::now();
  Result<std::string> json = llm::AskForJson(model, prompt, what, check, {.attempts = 2}, &ask);
  cost.ms += std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  cost.calls += ask.calls;
  cost.input_tokens += ask.usage.input();
  cost.output_tokens += ask.usage.output;
  return json;
}

// The model's searches for `query`: {"queries": [string...]}, at most `max`, none empty, none repeated, none
// equal to the query, each cut to 400 bytes.
Result<std::vector<std::string>> RewriteQuery(llm::ChatProvider& model, prompt::PromptLibrary& prompts,
                                              const std::string& query, size_t max, FindModelCost& cost) {
  std::vector<std::string> out;
  auto check = [&](std::string_view text) -> Status {
    out.clear();
    Json j = json::ParseOrDiscard<Json>(text);
    const Json* queries = json::Field(j, "queries");
    if (queries == nullptr || !queries->is_array()) return Status::InvalidArgument("the object has no \"queries\" array");
    std::set<std::string> seen = {query};
    for (size_t i = 0; i < queries->size(); ++i) {
      const Json& q = (*queries)[i];
      if (!q.is_string()) return Status::InvalidArgument("queries[" + std::to_string(i) + "] is not a string");
      std::string search = Utf8Cut(q.get<std::string>(), 400);
      if (search.find_first_not_of(" \t\r\n") == std::string::npos || !seen.insert(search).second) continue;
      if (out.size() < max) out.push_back(std::move(search));
    }
    return Status::Ok();
  };
  STRATA_RETURN_IF_ERROR(AskModel(model, prompts, "find.rewrite", {{"query", query}, {"max_queries", max}},
                                  "query rewriting", check, cost)
                             .status());
  return out;
}

// The model's order of `hits` for `query`: {"ranking": [index...]} best first. Indices out of range or
// repeated are passed over; hits it leaves out follow those it names, in their own order.
Status RerankHits(llm::ChatProvider& model, prompt::PromptLibrary& prompts, memory::ContextStore& store,
                  const std::string& query, std::vector<memory::Hit>& hits, size_t candidates, FindModelCost& cost) {
  const size_t n = std::min(candidates, hits.size());
  Json passages = Json::array();
  for (size_t i = 0; i < n; ++i) {
    const memory::Hit& h = hits[i];
    Result<std::string> text = store.Read(h.uri, h.is_dir ? memory::Level::kOverview : memory::Level::kContent);
    passages.push_back({{"index", i}, {"uri", h.uri.str()}, {"text", Utf8Cut(text.ok() ? *text : h.abstract_text, 600)}});
  }
  std::vector<size_t> order;
  auto check = [&](std::string_view text) -> Status {
    order.clear();
    Json j = json::ParseOrDiscard<Json>(text);
    const Json* ranking = json::Field(j, "ranking");
    if (ranking == nullptr || !ranking->is_array()) return Status::InvalidArgument("the object has no \"ranking\" array");
    std::vector<bool> taken(n, false);
    for (const Json& r : *ranking) {
      if (!r.is_number_integer()) continue;
      int64_t i = r.get<int64_t>();
      if (i < 0 || i >= static_cast<int64_t>(n) || taken[i]) continue;
      taken[i] = true;
      order.push_back(static_cast<size_t>(i));
    }
    if (order.empty() && n > 0 && !ranking->empty()) {
      return Status::InvalidArgument("\"ranking\" names none of the passages 0-" + std::to_string(n - 1));
    }
    for (size_t i = 0; i < n; ++i) {
      if (!taken[i]) order.push_back(i);
    }
    return Status::Ok();
  };
  STRATA_RETURN_IF_ERROR(
      AskModel(model, prompts, "find.rerank", {{"query", query}, {"passages", passages}}, "reranking", check, cost)
          .status());
  std::vector<memory::Hit> ranked;
  ranked.reserve(hits.size());
  for (size_t i : order) ranked.push_back(std::move(hits[i]));
  for (size_t i = n; i < hits.size(); ++i) ranked.push_back(std::move(hits[i]));
  hits = std::move(ranked);
  return Status::Ok();
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

Result<std::string> Engine::CheckSessionAccess(const Reach& reach, std::string_view id) {
  Result<std::string> ref = Guard("session access", [&]() -> Result<std::string> {
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, GetSession(id));
    if (!reach.everything() && info.user != reach.user) return session::NoSuchSession(info.id);
    return session::SessionRef(info);
  });
  if (ref.ok() && impl_->options.after_session_check) impl_->options.after_session_check(id);
  return ref;
}

Status Engine::CheckJobAccess(const Reach& reach, const session::Job& job) {
  if (reach.everything()) return Status::Ok();
  // A document's summary belongs to whoever may read the document (its key is the file's URI).
  if (job.kind == ingest::kSummaryJobKind) return CheckAccess(reach, job.key);
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
      // By id: a store URI names no incarnation, so a node under strata://session/<id> is reached by whoever
      // may use the session of that id when the call is made.
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

namespace {
Result<size_t> BoundedArg(std::string_view name, int64_t value, int64_t low, size_t high) {
  if (value < low || static_cast<uint64_t>(value) > high) {
    return Status::InvalidArgument("\"" + std::string(name) + "\" must be between " + std::to_string(low) + " and " +
                                   std::to_string(high) + ", not " + std::to_string(value));
  }
  return static_cast<size_t>(value);
}
int64_t AsInt(size_t value) { return static_cast<int64_t>(std::min<size_t>(value, INT64_MAX)); }
}  // namespace

Result<size_t> FindLimitArg(int64_t value) { return BoundedArg("limit", value, 1, FindRequest::kMaxLimit); }
Result<size_t> MaxQueriesArg(int64_t value) { return BoundedArg("max_queries", value, 1, FindAssist::kMaxQueries); }
Result<size_t> RerankCandidatesArg(int64_t value) {
  return BoundedArg("rerank_candidates", value, FindAssist::kMinRerankCandidates, FindAssist::kMaxRerankCandidates);
}
Result<size_t> MemoryLimitArg(int64_t value) {
  return BoundedArg("memory_limit", value, 0, SessionContextOptions::kMaxMemoryLimit);
}

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
    STRATA_RETURN_IF_ERROR(FindLimitArg(AsInt(request.limit)).status());
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
      STRATA_ASSIGN_OR_RETURN(std::string ref, CheckSessionAccess(request.reach, request.session));
      STRATA_ASSIGN_OR_RETURN(std::vector<Message> messages, SessionMessages(ref));
      searched = SessionAwareQuery(request.query, messages);
      if (searched != request.query) out.searched = searched;
    }
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * s, store());
    const FindAssist& assist = request.assist;
    std::vector<std::string> queries = {searched};
    llm::ChatProvider* helper = nullptr;
    prompt::PromptLibrary* library = nullptr;
    // Checked whether or not help is asked for: a value is refused alike by every front end and its schema.
    STRATA_RETURN_IF_ERROR(MaxQueriesArg(AsInt(assist.max_queries)).status());
    STRATA_RETURN_IF_ERROR(RerankCandidatesArg(AsInt(assist.rerank_candidates)).status());
    if (assist.rewrite || assist.rerank) {
      Result<llm::ChatProvider*> m = model();
      if (!m.ok()) {
        return Status::FailedPrecondition("find: rewrite and rerank need a model, and this engine has none (" +
                                          std::string(m.status().message()) + ")");
      }
      helper = *m;
      STRATA_ASSIGN_OR_RETURN(library, prompts());
      out.model.emplace();
    }
    // The model's help is help: when it fails, find answers from the store and says why.
    auto note = [&](const Status& failed) {
      if (!out.model->error.empty()) out.model->error += "; ";
      out.model->error += failed.ToString();
    };
    if (assist.rewrite) {
      Result<std::vector<std::string>> more = RewriteQuery(*helper, *library, searched, assist.max_queries, *out.model);
      if (more.ok()) {
        out.queries = *more;
        queries.insert(queries.end(), more->begin(), more->end());
      } else {
        note(more.status());
      }
    }
    if (assist.rerank) options.limit = std::max(options.limit, assist.rerank_candidates);
    STRATA_ASSIGN_OR_RETURN(std::vector<memory::Hit> hits, memory::Find(*s, queries, options));
    if (assist.rerank && hits.size() > 1) {
      Status reranked = RerankHits(*helper, *library, *s, searched, hits, assist.rerank_candidates, *out.model);
      if (!reranked.ok()) note(reranked);
    }
    if (hits.size() > request.limit) hits.resize(request.limit);
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
      if (found->empty() && !under.empty() && !s->Stat(place).ok()) {
        // Nothing matched under a place the caller named: one that does not exist is an error, as it is
        // for glob, ls and find, not "no matches".
        STRATA_RETURN_IF_ERROR(s->List(place, {.limit = 1}).status().WithContext("grep"));
      }
      for (memory::GrepMatch& m : *found) {
        if (out.size() >= 1000) break;  // As one store grep stops.
        out.push_back(std::move(m));
      }
    }
    return out;
  });
}

}  // namespace strata
