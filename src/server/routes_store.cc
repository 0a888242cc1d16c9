// The store routes (docs/api/openapi.yaml): fs/* and search/find. Every URI is checked against the caller
// (the Engine's rules) before the engine is called; export and import carry the tree in the body.
#include "server_impl.h"

namespace strata::server {

void Server::Impl::AddStoreRoutes() {
  // ---- The store ----
  auto list = [this](bool recursive) {
    return [this, recursive](Call& c) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", false));
      STRATA_ASSIGN_OR_RETURN(int64_t limit, c.IntArg("limit", 0));
      if (limit < 0) return Status::InvalidArgument("\"limit\" must be 0 (no limit) or more, not " + std::to_string(limit));
      STRATA_ASSIGN_OR_RETURN(bool asked_recursive, c.BoolArg("recursive"));
      // One more than the limit is asked for, to say when the list was cut (as MCP's list and tree do).
      const size_t want = limit > 0 ? static_cast<size_t>(limit) + 1 : 0;
      STRATA_ASSIGN_OR_RETURN(auto nodes, c.engine->List(uri.str(), {.recursive = recursive || asked_recursive,
                                                                     .limit = want}));
      if (limit > 0 && nodes.size() > static_cast<size_t>(limit)) {
        nodes.resize(static_cast<size_t>(limit));
        c.res.headers.emplace_back("X-Strata-Truncated", "true");
      }
      Json out = Json::array();
      for (const memory::Node& n : nodes) out.push_back(views::NodeView(n));
      return out;
    };
  };
  Add(Route("GET", "/api/v1/fs/ls", list(false)).Takes("uri recursive limit"));
  Add(Route("GET", "/api/v1/fs/tree", list(true)).Takes("uri limit"));
  Add(Route("GET", "/api/v1/fs/stat", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri"));
    STRATA_ASSIGN_OR_RETURN(memory::Node node, c.engine->Stat(uri.str()));
    STRATA_ASSIGN_OR_RETURN(auto relations, c.engine->Relations(uri.str()));
    // A relation names both its ends: one the caller cannot reach is left out (it would reveal another
    // user's memory or session).
    std::erase_if(relations, [&](const memory::Relation& r) {
      return !CheckUri(c, r.from).ok() || !CheckUri(c, r.to).ok();
    });
    return views::NodeDetailView(node, relations);
  }).Takes("uri"));
  Add(Route("GET", "/api/v1/fs/read", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri"));
    STRATA_ASSIGN_OR_RETURN(int64_t level, c.IntArg("level", 2));
    STRATA_ASSIGN_OR_RETURN(memory::Level checked, memory::LevelOf(level));
    STRATA_ASSIGN_OR_RETURN(std::string text, c.engine->Read(uri.str(), checked));
    return Json{{"uri", uri.str()}, {"level", level}, {"content", text}};
  }).Takes("uri level"));
  Add(Route("POST", "/api/v1/fs/write", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri"));
    STRATA_ASSIGN_OR_RETURN(std::string content, c.Arg("content"));
    memory::WriteOptions o;
    STRATA_ASSIGN_OR_RETURN(o.abstract_text, c.OptString("abstract"));
    STRATA_ASSIGN_OR_RETURN(o.overview, c.OptString("overview"));
    STRATA_ASSIGN_OR_RETURN(o.category, c.OptString("category"));
    if (const Json* m = json::Field(c.body, "metadata"); m != nullptr && !m->is_null()) {
      if (!m->is_object()) return Status::InvalidArgument("\"metadata\" must be an object");
      o.metadata = m->dump();
    }
    STRATA_ASSIGN_OR_RETURN(o.overwrite, c.BoolArg("overwrite", true));
    STRATA_RETURN_IF_ERROR(c.engine->Write(uri.str(), content, o));
    STRATA_ASSIGN_OR_RETURN(memory::Node node, c.engine->Stat(uri.str()));
    return views::NodeView(node);
  }).Takes("uri content abstract overview category metadata overwrite").BodyOnly("metadata"));
  Add(Route("POST", "/api/v1/fs/mkdir", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri"));
    memory::WriteOptions o;
    STRATA_ASSIGN_OR_RETURN(o.abstract_text, c.OptString("abstract"));
    STRATA_ASSIGN_OR_RETURN(o.overview, c.OptString("overview"));
    // "ordered": its children form a sequence (a conversation, a document's chunks): neighbours count.
    STRATA_ASSIGN_OR_RETURN(bool ordered, c.BoolArg("ordered"));
    if (ordered) o.metadata = std::string(memory::kOrderedMetadata);
    STRATA_RETURN_IF_ERROR(c.engine->Mkdir(uri.str(), o));
    STRATA_ASSIGN_OR_RETURN(memory::Node node, c.engine->Stat(uri.str()));
    return views::NodeView(node);
  }).Takes("uri abstract overview ordered"));
  Add(Route("POST", "/api/v1/fs/mv", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri from, UriArg(c, "from"));
    STRATA_ASSIGN_OR_RETURN(Uri to, UriArg(c, "to"));
    STRATA_RETURN_IF_ERROR(CheckWholeScope(c, from));
    STRATA_RETURN_IF_ERROR(c.engine->Move(from.str(), to.str()));
    return Json{{"from", from.str()}, {"to", to.str()}};
  }).Takes("from to"));
  Add(Route("DELETE", "/api/v1/fs", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri"));
    STRATA_RETURN_IF_ERROR(CheckWholeScope(c, uri));
    STRATA_ASSIGN_OR_RETURN(bool recursive, c.BoolArg("recursive"));
    STRATA_ASSIGN_OR_RETURN(int64_t removed, c.engine->Remove(uri.str(), recursive));
    return Json{{"removed", removed}};
  }).Takes("uri recursive"));
  Add(Route("POST", "/api/v1/fs/link", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri from, UriArg(c, "from"));
    STRATA_ASSIGN_OR_RETURN(Uri to, UriArg(c, "to"));
    STRATA_ASSIGN_OR_RETURN(std::string reason, c.Arg("reason", false));
    STRATA_RETURN_IF_ERROR(c.engine->Link(from.str(), to.str(), reason));
    return Json{{"from", from.str()}, {"to", to.str()}, {"reason", reason}};
  }).Takes("from to reason"));
  Add(Route("POST", "/api/v1/fs/unlink", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri from, UriArg(c, "from"));
    STRATA_ASSIGN_OR_RETURN(Uri to, UriArg(c, "to"));
    STRATA_RETURN_IF_ERROR(c.engine->Unlink(from.str(), to.str()));
    return Json{{"from", from.str()}, {"to", to.str()}};
  }).Takes("from to"));
  // Without `under`: everything the caller may read (a user: its scope and the shared ones).
  Add(Route("GET", "/api/v1/fs/glob", [](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string pattern, c.Arg("pattern"));
    STRATA_ASSIGN_OR_RETURN(std::string under, c.Arg("under", false));
    STRATA_ASSIGN_OR_RETURN(auto nodes, c.engine->Glob(pattern, under, ReachOf(c.id)));
    Json out = Json::array();
    for (const memory::Node& n : nodes) out.push_back(views::NodeView(n));
    return out;
  }).Takes("pattern under"));
  Add(Route("GET", "/api/v1/fs/grep", [](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string pattern, c.Arg("pattern"));
    STRATA_ASSIGN_OR_RETURN(std::string under, c.Arg("under", false));
    STRATA_ASSIGN_OR_RETURN(bool ignore_case, c.BoolArg("ignore_case"));
    STRATA_ASSIGN_OR_RETURN(auto matches, c.engine->Grep(pattern, under, ignore_case, ReachOf(c.id)));
    Json out = Json::array();
    for (const memory::GrepMatch& m : matches) out.push_back(views::GrepMatchView(m));
    return out;
  }).Takes("pattern under ignore_case"));
  // Export and import carry the Markdown tree in the request and the response (never a path on the server):
  // {"files": [{"path": "relative/path", "content": "..."}]}.
  Add(Route("GET", "/api/v1/fs/export", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri"));
    STRATA_ASSIGN_OR_RETURN(ExportedTree tree, c.engine->ExportFiles(uri.str(), options.http.max_body_bytes * 8));
    Json files = Json::array();
    for (TreeFile& f : tree.files) files.push_back({{"path", std::move(f.path)}, {"content", std::move(f.content)}});
    Json out = {{"uri", uri.str()}};
    out.update(views::ExportReportView(tree.report));
    out["files"] = std::move(files);
    return out;
  }).Takes("uri"));
  // Documents and code as resources (Engine::AddResourceFiles): {"uri", "files": [{"path", "content",
  // "encoding"?}], "remove_missing"?, "chunk_tokens"?}.
  Add(Route("POST", "/api/v1/resources", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri"));
    STRATA_ASSIGN_OR_RETURN(std::vector<ingest::SourceFile> files, views::ReadSourceFiles(c.body));
    STRATA_ASSIGN_OR_RETURN(ingest::AddOptions add, views::ReadAddOptions(c.body));
    STRATA_ASSIGN_OR_RETURN(ingest::AddReport report, c.engine->AddResourceFiles(files, uri.str(), add));
    Json out = views::AddReportView(report);
    out["uri"] = uri.str();
    return out;
  }).Takes("uri").BodyOnly("files chunk_tokens remove_missing summarize"));
  Add(Route("POST", "/api/v1/fs/import", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri"));
    const Json* files = json::Field(c.body, "files");
    if (files == nullptr || !files->is_array()) return Status::InvalidArgument("\"files\" must be an array of {path, content}");
    std::vector<TreeFile> tree;
    for (size_t i = 0; i < files->size(); ++i) {
      const Json* path = json::Field((*files)[i], "path");
      const Json* content = json::Field((*files)[i], "content");
      if (path == nullptr || !path->is_string() || content == nullptr || !content->is_string()) {
        return Status::InvalidArgument("files[" + std::to_string(i) + "] must be {\"path\": string, \"content\": string}");
      }
      for (const auto& [key, value] : (*files)[i].items()) {
        if (key != "path" && key != "content") {
          return Status::InvalidArgument("files[" + std::to_string(i) + "]: unknown member " + json::QuoteForError(key, 40) +
                                         " (a file takes path and content)");
        }
      }
      tree.push_back({path->get<std::string>(), content->get<std::string>()});
    }
    STRATA_ASSIGN_OR_RETURN(memory::ImportReport report, c.engine->ImportFiles(tree, uri.str()));
    Json out = {{"uri", uri.str()}};
    out.update(views::ImportReportView(report));
    return out;
  }).Takes("uri").BodyOnly("files"));
  Add(Route("POST", "/api/v1/search/find", [](Call& c) -> Result<Json> {
    FindRequest request;
    STRATA_ASSIGN_OR_RETURN(request.query, c.Arg("query"));
    STRATA_ASSIGN_OR_RETURN(request.under, c.Arg("under", false));
    STRATA_ASSIGN_OR_RETURN(int64_t limit, c.IntArg("limit", static_cast<int64_t>(request.limit)));
    STRATA_ASSIGN_OR_RETURN(request.limit, FindLimitArg(limit));
    STRATA_ASSIGN_OR_RETURN(request.token_budget, c.IntArg("token_budget", 0));
    STRATA_ASSIGN_OR_RETURN(request.session, c.Arg("session", false));
    STRATA_RETURN_IF_ERROR(views::ReadFindOptions(c.body, &request));
    // "type" may come in the query string as query and limit may (the body's is read above).
    if (auto type = c.req.Query("type")) {
      STRATA_ASSIGN_OR_RETURN(request.tuning.type, memory::ParseContextType(*type));
    }
    request.reach = ReachOf(c.id);
    STRATA_ASSIGN_OR_RETURN(FindResult found, c.engine->Find(request));
    return views::FindResultView(found);
  }).Takes("query type under limit token_budget session").BodyOnly("rewrite rerank max_queries rerank_candidates").ReadOnly());
}

}  // namespace strata::server
