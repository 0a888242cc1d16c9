#include "strata/engine/views.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "strata/engine/engine.h"
#include "strata/json/checked.h"
#include "strata/json/json_writer.h"
#include "strata/message/message_json.h"
#include "strata/window/compaction.h"
#include "strata/util/base64.h"

namespace strata::views {

std::string Dump(const Json& j, int indent) { return j.dump(indent, ' ', false, Json::error_handler_t::replace); }


bool IsSuperseded(const memory::Node& node) {
  if (node.metadata.find("valid_to") == std::string::npos) return false;  // Cheap test first.
  Json meta = strata::json::ParseOrDiscard<Json>(node.metadata);
  const Json* valid_to = json::Field(meta, "valid_to");
  return valid_to != nullptr && !valid_to->is_null();
}

Json NodeView(const memory::Node& n) {
  Json j = {{"uri", n.uri.str()},
            {"is_dir", n.is_dir},
            {"type", std::string(memory::ContextTypeName(n.type))},
            {"category", n.category},
            {"abstract", n.abstract_text},
            {"size", n.size},
            {"created_ms", n.created_ms},
            {"updated_ms", n.updated_ms}};
  if (IsSuperseded(n)) j["superseded"] = true;
  return j;
}

Json NodeDetailView(const memory::Node& n, const std::vector<memory::Relation>& relations) {
  Json j = NodeView(n);
  j["overview"] = n.overview;
  Json meta = strata::json::ParseOrDiscard<Json>(n.metadata);
  j["metadata"] = meta.is_discarded() ? Json::object() : std::move(meta);
  j["relations"] = Json::array();
  for (const memory::Relation& r : relations) {
    j["relations"].push_back({{"from", r.from.str()}, {"to", r.to.str()}, {"reason", r.reason}});
  }
  return j;
}

Json HitView(const memory::Hit& h) {
  return {{"uri", h.uri.str()},
          {"level", static_cast<int>(h.level)},
          {"score", h.score},
          {"abstract", h.abstract_text},
          {"reason", h.reason},
          {"tokens", h.tokens}};
}

Json GrepMatchView(const memory::GrepMatch& m) {
  return {{"uri", m.uri.str()}, {"line", m.line}, {"text", m.text}, {"superseded", m.superseded}};
}

Json FindResultView(const FindResult& r) {
  Json hits = Json::array();
  for (const memory::Hit& h : r.hits) hits.push_back(HitView(h));
  Json out = {{"hits", std::move(hits)}, {"tokens", r.tokens}};
  if (!r.searched.empty()) out["searched"] = r.searched;
  if (!r.queries.empty()) out["queries"] = r.queries;
  if (r.model) {
    Json model = {{"calls", r.model->calls}, {"input_tokens", r.model->input_tokens},
                  {"output_tokens", r.model->output_tokens}, {"ms", r.model->ms}};
    if (!r.model->error.empty()) model["error"] = r.model->error;
    out["model"] = std::move(model);
  }
  return out;
}

namespace {

// A boolean member of a request; absent or null keeps `*out`, another type is an error naming it.
Status ReadFlag(const nlohmann::json& args, const char* name, bool* out) {
  const nlohmann::json* f = json::Field(args, name);
  if (f == nullptr || f->is_null()) return Status::Ok();
  if (!f->is_boolean()) return Status::InvalidArgument(std::string("\"") + name + "\" must be true or false");
  *out = f->get<bool>();
  return Status::Ok();
}

}  // namespace

Status ReadFindOptions(const nlohmann::json& args, FindRequest* request) {
  if (!args.is_object()) return Status::Ok();
  if (const nlohmann::json* type = json::Field(args, "type"); type != nullptr && !type->is_null()) {
    if (!type->is_string()) return Status::InvalidArgument("\"type\" must be \"resource\", \"memory\" or \"skill\"");
    STRATA_ASSIGN_OR_RETURN(request->tuning.type, memory::ParseContextType(type->get<std::string>()));
  }
  FindAssist* out = &request->assist;
  STRATA_RETURN_IF_ERROR(ReadFlag(args, "rewrite", &out->rewrite));
  STRATA_RETURN_IF_ERROR(ReadFlag(args, "rerank", &out->rerank));
  using Bound = Result<size_t> (*)(int64_t);
  for (auto [name, count, bound] : {std::tuple{"max_queries", &out->max_queries, Bound{&MaxQueriesArg}},
                                    std::tuple{"rerank_candidates", &out->rerank_candidates, Bound{&RerankCandidatesArg}}}) {
    const nlohmann::json* f = json::Field(args, name);
    if (f == nullptr || f->is_null()) continue;
    std::optional<int64_t> v = json::WholeNumber(*f);
    if (!v) return Status::InvalidArgument(std::string("\"") + name + "\" must be a whole number");
    STRATA_ASSIGN_OR_RETURN(*count, bound(*v));
  }
  return Status::Ok();
}

Json FindArgumentsSchema(bool session, bool model_help) {
  auto integer = [](int64_t low, std::optional<size_t> high, const std::string& description) {
    Json j = {{"type", "integer"}, {"minimum", low}};
    if (high) j["maximum"] = *high;
    j["description"] = description;
    return j;
  };
  auto text = [](const char* description) { return Json{{"type", "string"}, {"description", description}}; };
  auto flag = [](const char* description) { return Json{{"type", "boolean"}, {"description", description}}; };
  const FindRequest defaults;
  Json p = {{"query", text("What to look for, in natural language")},
            {"under", text("Only below this URI (default: everything you can reach)")},
            {"limit", integer(1, FindRequest::kMaxLimit,
                              "At most this many results (default " + std::to_string(defaults.limit) + ")")},
            {"token_budget", integer(0, std::nullopt, "Tokens the returned abstracts may take in all (0: no budget)")},
            {"type", {{"type", "string"},
                      {"enum", {memory::ContextTypeName(memory::ContextType::kResource),
                                memory::ContextTypeName(memory::ContextType::kMemory),
                                memory::ContextTypeName(memory::ContextType::kSkill)}},
                      {"description", "Only nodes of this type (default: all)"}}}};
  if (session) {
    p["session"] = text("A session id of yours: a short follow-up is searched with the session's newest request");
  }
  if (model_help) {
    p["rewrite"] = flag("Let the server's model rewrite the question into the searches that find its parts "
                        "(needs a configured model; off by default)");
    p["rerank"] = flag("Let the server's model order the best candidates by how well they answer "
                       "(needs a configured model; off by default)");
    p["max_queries"] = integer(1, FindAssist::kMaxQueries,
                               "With rewrite: at most this many searches (default " +
                                   std::to_string(defaults.assist.max_queries) + ")");
    p["rerank_candidates"] = integer(static_cast<int64_t>(FindAssist::kMinRerankCandidates),
                                     FindAssist::kMaxRerankCandidates,
                                     "With rerank: how many of the best candidates the model orders (default " +
                                         std::to_string(defaults.assist.rerank_candidates) + ")");
  }
  return Json{{"type", "object"}, {"properties", std::move(p)}, {"required", {"query"}}, {"additionalProperties", false}};
}

// Members in alphabetical order: the order these views have always been printed in.
Json SessionView(const session::SessionInfo& s, const std::vector<Message>* messages) {
  Json j = {{"abstract", s.abstract_text}, {"agent", s.agent}, {"contexts", s.contexts}, {"created_ms", s.created_ms},
            {"id", s.id}};
  if (messages != nullptr) {
    Json list = Json::array();
    for (const Message& m : *messages) list.push_back(Json::parse(MessageToJson(m)));
    j["messages"] = std::move(list);
  }
  j["overview"] = s.overview;
  if (!s.source.empty()) j["source"] = s.source;
  j["stats"] = {{"commits", s.stats.commits},
                {"contexts_used", s.stats.contexts_used},
                {"memories_extracted", s.stats.memories_extracted},
                {"messages", s.stats.messages},
                {"skills_used", s.stats.skills_used},
                {"tokens", s.stats.tokens},
                {"turns", s.stats.turns}};
  if (!s.title.empty()) j["title"] = s.title;
  j["updated_ms"] = s.updated_ms;
  j["user"] = s.user;
  return j;
}

Json ChatImportView(const ChatImportReport& r) {
  Json imported = Json::array();
  for (const ChatImportReport::Imported& i : r.imported) {
    Json j = Json::object();
    if (i.archive > 0) j["archive"] = i.archive;
    if (i.continued) j["continued"] = true;
    j["messages"] = i.messages;
    j["session"] = i.session;
    j["source"] = i.source;
    j["title"] = i.title;
    imported.push_back(std::move(j));
  }
  Json skipped = Json::array();
  for (const session::SkippedConversation& s : r.skipped) skipped.push_back({{"reason", s.reason}, {"where", s.where}});
  return {{"imported", std::move(imported)}, {"unchanged", r.unchanged}, {"skipped", std::move(skipped)}};
}

namespace {
Json SkippedView(const std::vector<memory::SkippedPath>& list) {
  Json skipped = Json::array();
  for (const memory::SkippedPath& s : list) skipped.push_back({{"path", s.path}, {"reason", s.reason}});
  return skipped;
}
}  // namespace

Json ImportReportView(const memory::ImportReport& r) {
  return {{"directories", r.directories}, {"leaves", r.leaves}, {"relations", r.relations},
          {"skipped", SkippedView(r.skipped)}};
}

Json ExportReportView(const memory::ExportReport& r) {
  return {{"directories", r.directories}, {"leaves", r.leaves}, {"relations", r.relations}, {"removed", r.removed}};
}

Json AddReportView(const ingest::AddReport& r) {
  Json skipped = SkippedView(r.skipped);
  return {{"added", r.added},       {"updated", r.updated},       {"unchanged", r.unchanged}, {"removed", r.removed},
          {"skipped", std::move(skipped)}, {"chunks", r.chunks}, {"bytes", r.bytes}, {"queued", r.queued}};
}

Result<ingest::AddOptions> ReadAddOptions(const nlohmann::json& args) {
  ingest::AddOptions out;
  out.remove_missing = false;  // Requests carry files, not trees: removal only when asked.
  STRATA_RETURN_IF_ERROR(ReadFlag(args, "remove_missing", &out.remove_missing));
  STRATA_RETURN_IF_ERROR(ReadFlag(args, "summarize", &out.summarize));
  // Read as every integer member is (16.0 is 16; 2^64 or 5.5 is refused as not an integer, never wrapped).
  STRATA_ASSIGN_OR_RETURN(out.extract.chunk_tokens, json::CheckedIntOr(args, "chunk_tokens", out.extract.chunk_tokens));
  return out;
}

Result<std::vector<ingest::SourceFile>> ReadSourceFiles(const nlohmann::json& args) {
  const nlohmann::json* files = json::Field(args, "files");
  if (files == nullptr || !files->is_array()) {
    return Status::InvalidArgument("\"files\" must be an array of {\"path\", \"content\", \"encoding\"?}");
  }
  // As MCP's schema says: an empty list adds nothing, and with remove_missing it removed everything an earlier
  // add brought (a client's empty selection emptied the resource).
  if (files->empty()) return Status::InvalidArgument("\"files\" needs at least 1 item: no file given");
  std::vector<ingest::SourceFile> out;
  std::map<std::string, size_t> seen;  // Path → the index that first had it.
  for (size_t i = 0; i < files->size(); ++i) {
    const nlohmann::json& f = (*files)[i];
    const std::string where = "files[" + std::to_string(i) + "]";
    const nlohmann::json* path = json::Field(f, "path");
    const nlohmann::json* content = json::Field(f, "content");
    if (path == nullptr || !path->is_string() || content == nullptr || !content->is_string()) {
      return Status::InvalidArgument(where + " must be {\"path\": string, \"content\": string}");
    }
    // A misspelt member is refused, not ignored: "encodng": "base64" stored the base64 text as the document.
    for (const auto& [key, value] : f.items()) {
      if (key != "path" && key != "content" && key != "encoding") {
        return Status::InvalidArgument(where + ": unknown member " + json::QuoteForError(key, 40) +
                                       " (a file takes path, content and encoding)");
      }
    }
    std::string p = path->get<std::string>();
    // A plain relative path: its segments become node names (no "." or "..", no leading '/', no control
    // characters). Every such mistake refuses the request, naming the file, as a path a tree cannot hold.
    const std::string wrapped = "/" + p + "/";
    if (p.empty() || p.front() == '/' || p.back() == '/' || p.find("//") != std::string::npos ||
        p.find('\\') != std::string::npos || wrapped.find("/../") != std::string::npos ||
        wrapped.find("/./") != std::string::npos ||
        std::any_of(p.begin(), p.end(), [](char ch) { return static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f; })) {
      return Status::InvalidArgument(where + ".path must be a relative path like \"docs/guide.md\", not " +
                                     json::QuoteForError(p, 80));
    }
    if (auto [it, fresh] = seen.emplace(p, i); !fresh) {
      return Status::InvalidArgument(where + ".path " + json::QuoteForError(p, 80) + " is files[" +
                                     std::to_string(it->second) + "]'s too: each file once");
    }
    ingest::SourceFile file{p, content->get<std::string>(), "", 0};
    const nlohmann::json* given = json::Field(f, "encoding");
    if (given != nullptr && !given->is_null() && !given->is_string()) {
      return Status::InvalidArgument(where + ".encoding must be \"utf-8\" or \"base64\"");
    }
    std::string encoding = json::StringOr(f, "encoding", "");
    if (encoding == "base64") {
      bool ok = true;
      file.bytes = Base64Decode(file.bytes, &ok);
      if (!ok) return Status::InvalidArgument(where + ".content is not base64");
    } else if (!encoding.empty() && encoding != "utf-8") {
      return Status::InvalidArgument(where + ".encoding must be \"utf-8\" or \"base64\", not " + json::QuoteForError(encoding, 40));
    }
    file.size = static_cast<int64_t>(file.bytes.size());
    out.push_back(std::move(file));
  }
  return out;
}

Json ArchiveView(const session::ArchiveInfo& a) {
  Json j = {{"archive", a.number}};
  if (!a.error.empty()) j["error"] = a.error;
  j["messages"] = a.messages;
  if (!a.notes.empty()) j["notes"] = a.notes;
  j["state"] = std::string(session::ArchiveStateName(a.state));
  return j;
}

Json JobView(const session::Job& job) {
  Json j = {{"attempts", job.attempts}, {"created_ms", job.created_ms}, {"id", job.id}, {"key", job.key}, {"kind", job.kind}};
  if (job.kind == session::kCommitJobKind) j["session"] = session::SessionIdOfRef(job.key);
  if (!job.last_error.empty()) j["last_error"] = job.last_error;
  if (job.not_before_ms > 0) j["not_before_ms"] = job.not_before_ms;
  Json payload = strata::json::ParseOrDiscard<Json>(job.payload);
  j["payload"] = payload.is_discarded() ? Json(job.payload) : std::move(payload);
  j["state"] = std::string(session::JobStateName(job.state));
  j["updated_ms"] = job.updated_ms;
  return j;
}

Json AuditEntryView(const session::AuditEntry& e, std::string_view session) {
  return {{"action", std::string(session::MemoryActionName(e.action))},
          {"after", e.after},
          {"at_ms", e.at_ms},
          {"before", e.before},
          {"reason", e.reason},
          {"session", std::string(session)},
          {"source", e.source},
          {"uri", e.uri}};
}

Json CompactionView(const SessionCompaction& done) {
  Json out = {{"compacted", done.compacted},       {"kept", done.kept},
              {"pruned_fallback", done.pruned_fallback}, {"session", SessionView(done.session)},
              {"summary", done.summary},           {"tokens_after", done.tokens_after},
              {"tokens_before", done.tokens_before}};
  if (!done.llm_error.empty()) out["llm_error"] = done.llm_error;
  return out;
}

Json ChangesView(const std::vector<session::MemoryChange>& changes) {
  Json out = Json::array();
  for (const auto& c : changes) out.push_back({{"action", std::string(session::MemoryActionName(c.action))}, {"reason", c.reason}, {"uri", c.uri}});
  return out;
}

Json SessionStatusView(const SessionStatus& status) {
  Json archives = Json::array(), jobs = Json::array();
  for (const session::ArchiveInfo& a : status.archives) archives.push_back(ArchiveView(a));
  for (const session::Job& j : status.jobs) jobs.push_back(JobView(j));
  return {{"archives", std::move(archives)}, {"jobs", std::move(jobs)}, {"session", status.session}};
}

Json CommitView(const std::string& session, const CommitOutcome& outcome) {
  Json out = {{"archive", outcome.ticket.archive}};
  if (outcome.diff) out["diff"] = CommitDiffView(*outcome.diff);
  if (!outcome.phase2.ok()) out["error"] = outcome.phase2.message();
  out["messages"] = outcome.ticket.messages;
  out["session"] = session;
  if (outcome.state) out["state"] = std::string(session::ArchiveStateName(*outcome.state));
  out["task_id"] = outcome.ticket.job_id;
  return out;
}

Json CommitDiffView(const session::CommitDiff& diff) {
  return {{"archive", diff.archive},
          {"candidates", diff.candidates},
          {"changes", ChangesView(diff.changes)},
          {"session", diff.session},
          {"summary", diff.summary}};
}

std::string AssemblyJson(std::span<const Message> records, const window::Assembly& a,
                         const window::AssembleOptions& options) {
  std::string out = "{\"included_record_indices\":[";
  for (size_t i = 0; i < a.included.size(); ++i) out += (i ? "," : "") + std::to_string(a.included[i]);
  out += std::string("],\"summary_included\":") + (a.summary_included ? "true" : "false") +
         ",\"summary_over_budget\":" + (a.summary_over_budget ? "true" : "false") +
         ",\"budget\":" + std::to_string(a.budget) + ",\"total_tokens\":" + std::to_string(a.total_tokens) +
         ",\"messages\":[";
  bool first = true;
  if (!options.system_prompt.empty()) {
    AppendMessageJson(Message::System(options.system_prompt), &out);
    first = false;
  }
  for (const Message& m : window::AssembledMessages(records, a, options)) {
    if (!first) out += ",";
    AppendMessageJson(m, &out);
    first = false;
  }
  out += "],\"warnings\":[";
  for (size_t i = 0; i < a.warnings.size(); ++i) {
    if (i > 0) out += ",";
    json::AppendString(&out, window::WarningCodeName(a.warnings[i].code));
  }
  out += "],\"warning_details\":[";
  for (size_t i = 0; i < a.warnings.size(); ++i) {
    const window::AssemblyWarning& w = a.warnings[i];
    out += i ? ",{\"code\":" : "{\"code\":";
    json::AppendString(&out, window::WarningCodeName(w.code));
    out += ",\"message\":";
    json::AppendString(&out, w.message);
    out += ",\"record_index\":" + (w.index ? std::to_string(*w.index) : std::string("null")) + "}";
  }
  out += "]}";
  return out;
}

Json SessionContextView(const std::string& session, const SessionContext& ctx) {
  const std::vector<Message>& messages = ctx.history;
  Json memories = Json::array(), listed = Json::array(), warnings = ctx.warnings;
  for (const memory::Hit& h : ctx.memories) memories.push_back(views::HitView(h));
  for (size_t i = 0; i < messages.size() && i < ctx.message_tokens.size(); ++i) {
    listed.push_back({{"index", i},
                      {"tokens", ctx.message_tokens[i]},
                      {"included", static_cast<bool>(ctx.included[i])},
                      {"message", json::ParseOrDiscard<Json>(MessageToJson(messages[i]))}});
  }
  const SessionContext::Sections& t = ctx.tokens;
  return Json{{"session", session},
              {"encoding", ctx.encoding},
              {"window", ctx.window},
              {"budget", ctx.budget},
              {"total_tokens", ctx.total_tokens},
              {"sections", {{"system", t.system}, {"memories", t.memories}, {"pinned", t.pinned},
                            {"summary", t.summary}, {"history", t.history}, {"reserved", t.reserved},
                            {"reply", t.reply}}},
              {"system_prompt", ctx.system_prompt},
              {"memories", memories},
              {"summary_included", ctx.summary_included},
              {"messages", listed},
              {"warnings", warnings}};
}

Json CheckpointView(const std::string& session, const session::CheckpointInfo& checkpoint) {
  return Json{{"session", session}, {"checkpoint", checkpoint.id}, {"messages", checkpoint.messages},
              {"tag", checkpoint.tag}};
}

Json SessionLogView(const std::string& session, const session::SessionLog& log) {
  Json messages = Json::array(), checkpoints = Json::array();
  for (const Message& m : log.messages) messages.push_back(json::ParseOrDiscard<Json>(MessageToJson(m)));
  for (const session::CheckpointInfo& cp : log.checkpoints) {
    checkpoints.push_back({{"id", cp.id}, {"messages", cp.messages}, {"tag", cp.tag}});
  }
  Json usage_marks = Json::array();
  for (const session::UsageMarkInfo& u : log.usage_marks) usage_marks.push_back({{"messages", u.messages}, {"tokens", u.tokens}, {"checkpoints_before", u.checkpoints}});
  return Json{{"session", session},
              {"system_prompt", log.system_prompt ? Json(*log.system_prompt) : Json()},
              {"messages", messages},
              {"checkpoints", checkpoints},
              {"usage_tokens", log.usage_tokens},
              {"usage_marks", usage_marks},
              // The first message is a compaction's summary of the turns before it.
              {"summary", !log.messages.empty() && window::SummaryOf(log.messages.front()).has_value()},
              {"rotations", log.rotations},
              {"damage", log.damage}};
}

}  // namespace strata::views
