// The API routes (docs/api/openapi.yaml): service, store, sessions, tasks, memories, prompts, tokens, keys.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <random>

#include "server_impl.h"
#include "strata/server/mcp.h"
#include "strata/message/message_json.h"
#include "strata/prompt/value.h"

namespace strata::server {

namespace {

namespace fs = std::filesystem;

// A private directory under <data>/tmp, removed with everything in it when destroyed.
class ScratchDir {
 public:
  static Result<ScratchDir> Make(const std::string& data_dir, bool read_only) {
    static std::atomic<uint64_t> counter{0};
    std::error_code ec;
    // On PostgreSQL there is no data directory, and a read-only one cannot be written: a directory of this
    // user's in the system's temporary one, which must be its own (another user could otherwise read or
    // swap what is exported through it).
    bool pg = pg::IsPostgresUrl(data_dir) || read_only;
    fs::path base = pg ? fs::temp_directory_path() / ("strata-scratch-" + std::to_string(::geteuid()))
                       : fs::path(data_dir) / "tmp";
    fs::create_directories(base, ec);
    if (pg && !ec) {
      struct stat st {};
      if (::lstat(base.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
        std::fprintf(stderr, "strata serve: the scratch directory %s is not this user's own\n", base.c_str());
        return Status::PermissionDenied("the server's scratch directory is not its own user's; see the server's log");
      }
      fs::permissions(base, fs::perms::owner_all, fs::perm_options::replace, ec);
    }
    static const uint64_t salt = std::random_device{}() * 0x9E3779B97F4A7C15ULL;
    fs::path dir = base / ("http-" + std::to_string(::getpid()) + "-" + std::to_string(salt ^ ++counter));
    if (ec || !fs::create_directory(dir, ec) || ec) {
      // The place is the server's business: its log says where, the client only what.
      std::fprintf(stderr, "strata serve: cannot create a scratch directory in %s: %s\n", base.c_str(), ec.message().c_str());
      return Status::Internal("the server cannot create a scratch directory: " + ec.message());
    }
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);  // Exports are private.
    return ScratchDir(dir.string());
  }
  ScratchDir(ScratchDir&& other) noexcept : path_(std::exchange(other.path_, "")) {}
  ScratchDir& operator=(ScratchDir&&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// The regular files under `root` as [{"path", "content"}], paths relative and sorted; at most `max_bytes`.
Result<Json> ReadTree(const std::string& root, size_t max_bytes) {
  std::vector<std::string> paths;
  std::error_code ec;
  if (!fs::exists(root, ec)) return Json::array();
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) paths.push_back(fs::relative(it->path(), root, ec).generic_string());
  }
  if (ec) return Status::Internal("reading the export: " + ec.message());
  std::sort(paths.begin(), paths.end());
  Json out = Json::array();
  size_t total = 0;
  for (const std::string& rel : paths) {
    std::ifstream in(fs::path(root) / rel, std::ios::binary);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    total += content.size();
    if (total > max_bytes) {
      return Status::ResourceExhausted("the export is larger than " + std::to_string(max_bytes >> 20) +
                                       " MiB; export a smaller subtree");
    }
    out.push_back({{"path", rel}, {"content", std::move(content)}});
  }
  return out;
}

// Writes `files` ([{"path", "content"}]) under `root`. Paths must be relative, without "." or ".."
// segments, empty segments, backslashes or control characters.
Status WriteTree(const Json& files, const std::string& root) {
  for (size_t i = 0; i < files.size(); ++i) {
    const Json& f = files[i];
    std::string where = "files[" + std::to_string(i) + "]";
    const Json* path = json::Field(f, "path");
    const Json* content = json::Field(f, "content");
    if (path == nullptr || !path->is_string() || content == nullptr || !content->is_string()) {
      return Status::InvalidArgument(where + " must be {\"path\": string, \"content\": string}");
    }
    const std::string& rel = path->get_ref<const std::string&>();
    bool bad = rel.empty() || rel.size() > 1024 || rel.front() == '/' || rel.back() == '/';
    for (unsigned char ch : rel) bad = bad || ch < 0x20 || ch == 0x7f || ch == '\\';
    for (size_t start = 0; !bad && start <= rel.size();) {
      size_t slash = rel.find('/', start);
      std::string_view segment(rel.data() + start, (slash == std::string::npos ? rel.size() : slash) - start);
      bad = segment.empty() || segment == "." || segment == "..";
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    if (bad) return Status::InvalidArgument(where + ".path " + json::QuoteForError(rel, 120) + " must be a plain relative path");
    fs::path target = fs::path(root) / rel;
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    if (ec) {
      return Status::InvalidArgument(where + ".path " + json::QuoteForError(rel, 120) +
                                     " cannot be made (a file of the tree stands where a directory of it would): " +
                                     ec.message());
    }
    if (fs::exists(target, ec)) {
      return Status::InvalidArgument(where + ".path " + json::QuoteForError(rel, 120) + " is given twice");
    }
    std::ofstream out(target, std::ios::binary);
    out << content->get_ref<const std::string&>();
    if (!out) return Status::InvalidArgument(where + ".path " + json::QuoteForError(rel, 120) + " cannot be written");
  }
  return Status::Ok();
}

}  // namespace


// An audit entry as a caller may see it: a shared memory (agent, resources) changed by another user's
// commit does not name that user's session to a user key ("<session>#<archive>#<n>" becomes "").
Json Server::Impl::AuditView(Call& c, const session::AuditEntry& e) {
  Json view = views::AuditEntryView(e);
  // The source names one incarnation of a session: linked only while that very session lives (a new
  // session given a deleted one's id is not it), and shown to a user key only when the session is its own.
  Result<std::optional<session::SessionInfo>> live = c.engine->AuditSession(e);
  bool linked = live.ok() && live->has_value();
  bool from_session = e.source.rfind("remember#", 0) != 0 && e.source.rfind("consolidate#", 0) != 0;
  view["session"] = linked ? (*live)->id : "";
  if (c.id.role == Role::kUser && from_session && !(linked && (*live)->user == c.id.user)) {
    view["source"] = "";
    view["session"] = "";
  }
  return view;
}

// Builds the route table; every route here is in docs/api/openapi.yaml (ServerTest checks both ways).
void Server::Impl::AddRoutes() {
  auto add = [this](std::string method, std::string pattern, std::string name, Api api, bool needs_key = true,
                    std::optional<Dialect> errors = std::nullopt) {
    routes.push_back({std::move(method), std::move(pattern), std::move(name), std::move(api), needs_key, errors});
  };
  constexpr const char* kId = "([A-Za-z0-9_.-]+)";
  const std::string sid = kId;

  // ---- Service ----
  add("GET", "/health", "/health", [](Call&) -> Result<Json> { return Json{{"alive", true}}; }, false);
  add("GET", "/ready", "/ready", [this](Call&) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Engine * engine, EngineFor("default"));
    STRATA_RETURN_IF_ERROR(engine->store().status());
    STRATA_RETURN_IF_ERROR(engine->sessions().status());
    return Json{{"ready", true}};
  }, false);
  add("GET", "/metrics", "/metrics", [this](Call& c) -> Result<Json> {
    if (c.id.role != Role::kRoot) return Status::PermissionDenied("metrics cover every account: they need the root key");
    std::map<std::string, int64_t> queue;
    for (Engine* engine : OpenEngines()) {
      auto q = engine->queue();
      if (!q.ok()) continue;
      auto jobs = (*q)->List(std::nullopt);
      if (!jobs.ok()) continue;
      for (const session::Job& j : *jobs) queue[std::string(session::JobStateName(j.state))] += 1;
    }
    // Written directly: Prometheus reads text, not the JSON envelope.
    c.res.content_type = "text/plain; version=0.0.4";
    c.res.body = metrics.Text(queue);
    c.raw = true;
    return Json();
  });

  // ---- The store ----
  auto list = [this](bool recursive) {
    return [this, recursive](Call& c) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", false, false));
      STRATA_ASSIGN_OR_RETURN(int64_t limit, c.IntArg("limit", 0));
      STRATA_ASSIGN_OR_RETURN(auto nodes, c.engine->List(uri.str(), {.recursive = recursive || c.BoolArg("recursive"),
                                                                     .limit = static_cast<size_t>(std::max<int64_t>(0, limit))}));
      Json out = Json::array();
      for (const memory::Node& n : nodes) out.push_back(views::NodeView(n));
      return out;
    };
  };
  add("GET", "/api/v1/fs/ls", "/api/v1/fs/ls", list(false));
  add("GET", "/api/v1/fs/tree", "/api/v1/fs/tree", list(true));
  add("GET", "/api/v1/fs/stat", "/api/v1/fs/stat", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", false));
    STRATA_ASSIGN_OR_RETURN(memory::Node node, c.engine->Stat(uri.str()));
    STRATA_ASSIGN_OR_RETURN(auto relations, c.engine->Relations(uri.str()));
    // A relation names both its ends: one the caller cannot reach is left out (it would reveal another
    // user's memory or session).
    std::erase_if(relations, [&](const memory::Relation& r) {
      return !CheckUri(c, r.from, false).ok() || !CheckUri(c, r.to, false).ok();
    });
    return views::NodeDetailView(node, relations);
  });
  add("GET", "/api/v1/fs/read", "/api/v1/fs/read", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", false));
    STRATA_ASSIGN_OR_RETURN(int64_t level, c.IntArg("level", 2));
    if (level < 0 || level > 2) return Status::InvalidArgument("\"level\" must be 0 (abstract), 1 (overview) or 2 (content)");
    STRATA_ASSIGN_OR_RETURN(std::string text, c.engine->Read(uri.str(), static_cast<memory::Level>(level)));
    return Json{{"uri", uri.str()}, {"level", level}, {"content", text}};
  });
  add("POST", "/api/v1/fs/write", "/api/v1/fs/write", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", true));
    STRATA_ASSIGN_OR_RETURN(std::string content, c.Arg("content"));
    memory::WriteOptions o;
    o.abstract_text = c.OptString("abstract");
    o.overview = c.OptString("overview");
    o.category = c.OptString("category");
    if (const Json* m = json::Field(c.body, "metadata"); m != nullptr && !m->is_null()) {
      if (!m->is_object()) return Status::InvalidArgument("\"metadata\" must be an object");
      o.metadata = m->dump();
    }
    o.overwrite = json::BoolOr(c.body, "overwrite", true);
    STRATA_RETURN_IF_ERROR(c.engine->Write(uri.str(), content, o));
    STRATA_ASSIGN_OR_RETURN(memory::Node node, c.engine->Stat(uri.str()));
    return views::NodeView(node);
  });
  add("POST", "/api/v1/fs/mkdir", "/api/v1/fs/mkdir", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", true));
    memory::WriteOptions o;
    o.abstract_text = c.OptString("abstract");
    o.overview = c.OptString("overview");
    // "ordered": its children form a sequence (a conversation, a document's chunks): neighbours count.
    if (c.BoolArg("ordered")) o.metadata = std::string(memory::kOrderedMetadata);
    STRATA_RETURN_IF_ERROR(c.engine->Mkdir(uri.str(), o));
    STRATA_ASSIGN_OR_RETURN(memory::Node node, c.engine->Stat(uri.str()));
    return views::NodeView(node);
  });
  add("POST", "/api/v1/fs/mv", "/api/v1/fs/mv", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri from, UriArg(c, "from", true));
    STRATA_ASSIGN_OR_RETURN(Uri to, UriArg(c, "to", true));
    STRATA_RETURN_IF_ERROR(CheckWholeScope(c, from));
    STRATA_RETURN_IF_ERROR(c.engine->Move(from.str(), to.str()));
    return Json{{"from", from.str()}, {"to", to.str()}};
  });
  add("DELETE", "/api/v1/fs", "/api/v1/fs", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", true));
    STRATA_RETURN_IF_ERROR(CheckWholeScope(c, uri));
    STRATA_ASSIGN_OR_RETURN(int64_t removed, c.engine->Remove(uri.str(), c.BoolArg("recursive")));
    return Json{{"removed", removed}};
  });
  add("POST", "/api/v1/fs/link", "/api/v1/fs/link", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri from, UriArg(c, "from", true));
    STRATA_ASSIGN_OR_RETURN(Uri to, UriArg(c, "to", false));
    STRATA_ASSIGN_OR_RETURN(std::string reason, c.Arg("reason", false));
    STRATA_RETURN_IF_ERROR(c.engine->Link(from.str(), to.str(), reason));
    return Json{{"from", from.str()}, {"to", to.str()}, {"reason", reason}};
  });
  add("POST", "/api/v1/fs/unlink", "/api/v1/fs/unlink", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri from, UriArg(c, "from", true));
    STRATA_ASSIGN_OR_RETURN(Uri to, UriArg(c, "to", false));
    STRATA_RETURN_IF_ERROR(c.engine->Unlink(from.str(), to.str()));
    return Json{{"from", from.str()}, {"to", to.str()}};
  });
  // Without `under`: everything the caller may read (a user: its scope and the shared ones).
  add("GET", "/api/v1/fs/glob", "/api/v1/fs/glob", [](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string pattern, c.Arg("pattern"));
    STRATA_ASSIGN_OR_RETURN(std::string under, c.Arg("under", false));
    STRATA_ASSIGN_OR_RETURN(auto nodes, c.engine->Glob(pattern, under, ReachOf(c.id)));
    Json out = Json::array();
    for (const memory::Node& n : nodes) out.push_back(views::NodeView(n));
    return out;
  });
  add("GET", "/api/v1/fs/grep", "/api/v1/fs/grep", [](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string pattern, c.Arg("pattern"));
    STRATA_ASSIGN_OR_RETURN(std::string under, c.Arg("under", false));
    STRATA_ASSIGN_OR_RETURN(auto matches, c.engine->Grep(pattern, under, c.BoolArg("ignore_case"), ReachOf(c.id)));
    Json out = Json::array();
    for (const memory::GrepMatch& m : matches) out.push_back(views::GrepMatchView(m));
    return out;
  });
  // Export and import carry the Markdown tree in the request and the response (never a path on the server):
  // {"files": [{"path": "relative/path", "content": "..."}]}.
  add("GET", "/api/v1/fs/export", "/api/v1/fs/export", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", false));
    STRATA_ASSIGN_OR_RETURN(ScratchDir scratch, ScratchDir::Make(engine_options.data_dir, engine_options.read_only));
    STRATA_ASSIGN_OR_RETURN(memory::ExportReport report, c.engine->Export(uri.str(), scratch.path() + "/tree"));
    STRATA_ASSIGN_OR_RETURN(Json files, ReadTree(scratch.path() + "/tree", options.http.max_body_bytes * 8));
    return Json{{"uri", uri.str()}, {"directories", report.directories}, {"leaves", report.leaves},
                {"relations", report.relations}, {"files", std::move(files)}};
  });
  add("POST", "/api/v1/fs/import", "/api/v1/fs/import", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", true));
    const Json* files = json::Field(c.body, "files");
    if (files == nullptr || !files->is_array()) return Status::InvalidArgument("\"files\" must be an array of {path, content}");
    STRATA_ASSIGN_OR_RETURN(ScratchDir scratch, ScratchDir::Make(engine_options.data_dir, engine_options.read_only));
    STRATA_RETURN_IF_ERROR(WriteTree(*files, scratch.path() + "/tree"));
    STRATA_ASSIGN_OR_RETURN(memory::ImportReport report, c.engine->Import(scratch.path() + "/tree", uri.str()));
    return Json{{"uri", uri.str()}, {"directories", report.directories}, {"leaves", report.leaves},
                {"relations", report.relations}, {"skipped", report.skipped}};
  });
  add("POST", "/api/v1/search/find", "/api/v1/search/find", [](Call& c) -> Result<Json> {
    FindRequest request;
    STRATA_ASSIGN_OR_RETURN(request.query, c.Arg("query"));
    STRATA_ASSIGN_OR_RETURN(request.under, c.Arg("under", false));
    STRATA_ASSIGN_OR_RETURN(int64_t limit, c.IntArg("limit", 10));
    if (limit < 1 || limit > 1000) return Status::InvalidArgument("\"limit\" must be between 1 and 1000");
    request.limit = static_cast<size_t>(limit);
    STRATA_ASSIGN_OR_RETURN(request.token_budget, c.IntArg("token_budget", 0));
    STRATA_ASSIGN_OR_RETURN(request.session, c.Arg("session", false));
    request.reach = ReachOf(c.id);
    STRATA_ASSIGN_OR_RETURN(FindResult found, c.engine->Find(request));
    return views::FindResultView(found);
  });

  // ---- Sessions ----
  add("POST", "/api/v1/sessions", "/api/v1/sessions", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string user, c.Arg("user", false));
    STRATA_ASSIGN_OR_RETURN(std::string agent, c.Arg("agent", false));
    STRATA_ASSIGN_OR_RETURN(std::string id, c.Arg("id", false));
    if (c.id.role == Role::kUser) {
      if (!user.empty() && user != c.id.user) {
        return Status::PermissionDenied("this key creates sessions for user " + c.id.user + " only");
      }
      user = c.id.user;
    }
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, c.engine->CreateSession(user, agent, id));
    return views::SessionView(info);
  });
  add("GET", "/api/v1/sessions", "/api/v1/sessions", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(auto sessions, c.engine->ListSessions());
    Json out = Json::array();
    for (const session::SessionInfo& s : sessions) {
      if (c.id.role == Role::kUser && s.user != c.id.user) continue;
      out.push_back(views::SessionView(s));
    }
    return out;
  });
  add("GET", "/api/v1/sessions/" + sid, "/api/v1/sessions/{id}", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, c.engine->GetSession(id));
    STRATA_ASSIGN_OR_RETURN(std::vector<Message> messages, c.engine->SessionMessages(id));
    return views::SessionView(info, &messages);
  });
  add("POST", "/api/v1/sessions/" + sid + "/messages", "/api/v1/sessions/{id}/messages", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    // {"message": {...}}, {"messages": [...]}, or the message or array itself.
    const Json* given = json::Field(c.body, "messages");
    if (given == nullptr) given = json::Field(c.body, "message");
    const Json& payload = given != nullptr ? *given : c.body;
    STRATA_ASSIGN_OR_RETURN(std::vector<Message> messages, ParseMessages(payload.dump()));
    if (messages.empty()) return Status::InvalidArgument("no messages given");
    STRATA_RETURN_IF_ERROR(CheckRefs(c, messages));
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, c.engine->AddMessages(id, messages));
    return views::SessionView(info);
  });
  add("GET", "/api/v1/sessions/" + sid + "/messages", "/api/v1/sessions/{id}/messages", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(std::vector<Message> messages, c.engine->SessionMessages(id));
    Json out = Json::array();
    for (const Message& m : messages) out.push_back(Json::parse(MessageToJson(m)));
    return out;
  });
  add("POST", "/api/v1/sessions/" + sid + "/commit", "/api/v1/sessions/{id}/commit", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(CommitOutcome outcome, c.engine->Commit(id, {.wait = false}));
    metrics.Commit("accepted");
    WakeWorker();
    return Json{{"task_id", outcome.ticket.job_id}, {"archive", outcome.ticket.archive},
                {"messages", outcome.ticket.messages}};
  });
  add("GET", "/api/v1/sessions/" + sid + "/status", "/api/v1/sessions/{id}/status", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(SessionStatus status, c.engine->GetSessionStatus(id));
    Json archives = Json::array(), jobs = Json::array();
    for (const auto& a : status.archives) archives.push_back(views::ArchiveView(a));
    for (const auto& j : status.jobs) jobs.push_back(views::JobView(j));
    return Json{{"session", status.session}, {"archives", archives}, {"jobs", jobs}};
  });

  add("DELETE", "/api/v1/sessions/" + sid, "/api/v1/sessions/{id}", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    STRATA_RETURN_IF_ERROR(c.engine->DeleteSession(id, c.BoolArg("force")));
    return Json{{"deleted", id}};
  });
  add("POST", "/api/v1/sessions/" + sid + "/retry", "/api/v1/sessions/{id}/retry", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(int requeued, c.engine->Retry(id));
    WakeWorker();
    return Json{{"session", id}, {"requeued", requeued}};
  });
  add("POST", "/api/v1/sessions/" + sid + "/checkpoints", "/api/v1/sessions/{id}/checkpoints", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(int64_t checkpoint, c.engine->Checkpoint(id));
    return Json{{"checkpoint", checkpoint}};
  });
  add("GET", "/api/v1/sessions/" + sid + "/log", "/api/v1/sessions/{id}/log", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(session::SessionLog log, c.engine->GetSessionLog(id));
    return views::SessionLogView(id, log);
  });
  add("POST", "/api/v1/sessions/" + sid + "/revert", "/api/v1/sessions/{id}/revert", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(int64_t checkpoint, c.IntArg("checkpoint", -1));
    if (checkpoint < 0) return Status::InvalidArgument("\"checkpoint\" (a checkpoint id, 0 or more) is required");
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, c.engine->Revert(id, checkpoint));
    return views::SessionView(info);
  });
  add("POST", "/api/v1/sessions/" + sid + "/fork", "/api/v1/sessions/{id}/fork", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(std::string new_id, c.Arg("id", false));
    STRATA_ASSIGN_OR_RETURN(int64_t checkpoint, c.IntArg("checkpoint", -1));
    std::optional<int64_t> at;
    if (checkpoint >= 0) at = checkpoint;
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, c.engine->Fork(id, new_id, at));
    return views::SessionView(info);
  });
  add("POST", "/api/v1/sessions/" + sid + "/system-prompt", "/api/v1/sessions/{id}/system-prompt", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(std::string prompt, c.Arg("prompt"));
    STRATA_RETURN_IF_ERROR(c.engine->SetSystemPrompt(id, prompt));
    return Json{{"session", id}, {"system_prompt", prompt}};
  });
  add("POST", "/api/v1/sessions/" + sid + "/compact", "/api/v1/sessions/{id}/compact", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(std::string focus, c.Arg("focus", false));
    STRATA_ASSIGN_OR_RETURN(SessionCompaction done, c.engine->CompactSession(id, focus));
    Json out = {{"session", views::SessionView(done.session)}, {"compacted", done.compacted}, {"kept", done.kept},
                {"summary", done.summary}, {"pruned_fallback", done.pruned_fallback},
                {"tokens_before", done.tokens_before}, {"tokens_after", done.tokens_after}};
    if (!done.llm_error.empty()) out["llm_error"] = done.llm_error;
    return out;
  });
  add("GET", "/api/v1/sessions/" + sid + "/context", "/api/v1/sessions/{id}/context", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_RETURN_IF_ERROR(CheckSession(c, id));
    SessionContextOptions o;
    STRATA_ASSIGN_OR_RETURN(o.max_context_tokens, c.IntArg("max_context_tokens", options.upstream_context_tokens));
    STRATA_ASSIGN_OR_RETURN(o.reserve_for_reply, c.IntArg("reserve_for_reply", std::min<int64_t>(4096, o.max_context_tokens / 4)));
    STRATA_ASSIGN_OR_RETURN(int64_t memory_limit, c.IntArg("memory_limit", 5));
    if (memory_limit < 0 || memory_limit > 100) return Status::InvalidArgument("\"memory_limit\" must be between 0 and 100");
    o.memory_limit = static_cast<size_t>(memory_limit);
    STRATA_ASSIGN_OR_RETURN(o.query, c.Arg("query", false));
    STRATA_ASSIGN_OR_RETURN(std::string encoding, c.Arg("encoding", false));
    if (!encoding.empty()) o.encoding = encoding;
    if (auto prompt = c.req.Query("system_prompt")) o.system_prompt = *prompt;
    STRATA_ASSIGN_OR_RETURN(SessionContext ctx, c.engine->AssembleSession(id, o));
    return views::SessionContextView(id, ctx);
  });

  // ---- Background tasks (phase-2 jobs) ----
  auto task_of = [this](Call& c) -> Result<session::Job> {
    char* end = nullptr;
    long long task = std::strtoll(c.req.path_params.at(0).c_str(), &end, 10);
    STRATA_ASSIGN_OR_RETURN(session::JobQueue * queue, c.engine->queue());
    STRATA_ASSIGN_OR_RETURN(std::optional<session::Job> job, queue->Get(task));
    if (!job || !c.engine->CheckJobAccess(ReachOf(c.id), *job).ok()) {
      return Status::NotFound("no task " + c.req.path_params.at(0));
    }
    return *job;
  };
  // Every phase-2 job the caller may see (a user key: its own sessions'), newest first; ?session= and
  // ?state= (pending, running, done, dead) narrow it.
  add("GET", "/api/v1/tasks", "/api/v1/tasks", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string session_id, c.Arg("session", false));
    STRATA_ASSIGN_OR_RETURN(std::string state_name, c.Arg("state", false));
    STRATA_ASSIGN_OR_RETURN(int64_t limit, c.IntArg("limit", 200));
    if (limit < 1 || limit > 10000) return Status::InvalidArgument("\"limit\" must be between 1 and 10000");
    std::optional<session::JobState> state;
    if (!state_name.empty()) {
      STRATA_ASSIGN_OR_RETURN(state, session::ParseJobState(state_name));
    }
    std::optional<std::string> key;
    if (!session_id.empty()) {
      STRATA_RETURN_IF_ERROR(CheckSession(c, session_id));
      STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, c.engine->GetSession(session_id));
      key = session::CommitJobKey(info);  // This incarnation's jobs only.
    }
    STRATA_ASSIGN_OR_RETURN(session::JobQueue * queue, c.engine->queue());
    STRATA_ASSIGN_OR_RETURN(std::vector<session::Job> jobs, queue->List(state, key));
    std::sort(jobs.begin(), jobs.end(), [](const session::Job& a, const session::Job& b) { return a.id > b.id; });
    Json out = Json::array();
    for (const session::Job& job : jobs) {
      if (static_cast<int64_t>(out.size()) >= limit) break;
      if (!c.engine->CheckJobAccess(ReachOf(c.id), job).ok()) continue;
      out.push_back(views::JobView(job));
    }
    return out;
  });
  add("GET", "/api/v1/tasks/([0-9]+)", "/api/v1/tasks/{id}", [task_of](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(session::Job job, task_of(c));
    return views::JobView(job);
  });
  add("GET", "/api/v1/tasks/([0-9]+)/events", "/api/v1/tasks/{id}/events", [this, task_of](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(session::Job first, task_of(c));
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<StreamSlot> slot, TakeStreamSlot());
    Engine* engine = c.engine;
    int64_t task = first.id;
    c.res.content_type = "text/event-stream";
    c.res.headers.emplace_back("Cache-Control", "no-cache");
    c.raw = true;
    c.res.stream = [this, engine, task, slot](const ChunkWriter& write) {
      std::string last;
      for (int i = 0; i < 36000 && !shut_down.load(); ++i) {  // An hour at most.
        auto queue = engine->queue();
        if (!queue.ok()) break;
        auto job = (*queue)->Get(task);
        if (!job.ok() || !*job) break;
        std::string state(session::JobStateName((*job)->state));
        std::string view = views::Dump(views::JobView(**job));
        if (view != last) {
          if (!write("event: task\ndata: " + view + "\n\n")) break;
          last = view;
        } else if (i % 50 == 0 && !write(": keep-alive\n\n")) {
          break;
        }
        if (state == "done" || state == "dead") break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
      write("event: end\ndata: {}\n\n");
    };
    return Json();
  });

  // ---- Memories, prompts, tokens ----
  add("POST", "/api/v1/memories/remember", "/api/v1/memories/remember", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri scope, UriArg(c, "scope", true));
    STRATA_ASSIGN_OR_RETURN(std::string text, c.Arg("text"));
    STRATA_ASSIGN_OR_RETURN(std::string category, c.Arg("category", false));
    STRATA_ASSIGN_OR_RETURN(auto changes, c.engine->Remember(scope.str(), text, category));
    return views::ChangesView(changes);
  });
  // The newest memory changes at or below `under` (default: all the caller can reach), newest first.
  add("GET", "/api/v1/memories/changes", "/api/v1/memories/changes", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri under, UriArg(c, "under", false, false));
    STRATA_ASSIGN_OR_RETURN(int64_t limit, c.IntArg("limit", 50));
    if (limit < 1 || limit > 1000) return Status::InvalidArgument("\"limit\" must be between 1 and 1000");
    STRATA_ASSIGN_OR_RETURN(auto entries, c.engine->RecentMemoryChanges(under.str(), static_cast<size_t>(limit)));
    Json out = Json::array();
    for (const auto& e : entries) {
      // Everything below the root reaches other users' memories: an admin sees them, a user key never
      // gets here with the root (UriArg gives it its own scope), but an entry is checked all the same.
      auto uri = Uri::Parse(e.uri);
      if (!uri.ok() || !CheckUri(c, *uri, false).ok()) continue;
      out.push_back(AuditView(c, e));
    }
    return out;
  });
  add("GET", "/api/v1/memories/history", "/api/v1/memories/history", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(c, "uri", false));
    STRATA_ASSIGN_OR_RETURN(auto entries, c.engine->MemoryHistory(uri.str()));
    Json out = Json::array();
    for (const auto& e : entries) out.push_back(AuditView(c, e));
    return out;
  });
  add("POST", "/api/v1/memories/consolidate", "/api/v1/memories/consolidate", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Uri under, UriArg(c, "under", true));
    STRATA_ASSIGN_OR_RETURN(auto changes, c.engine->Consolidate(under.str()));
    return views::ChangesView(changes);
  });
  // ---- Skills (strata://agent/<agent>/skills/<name>) ----
  add("GET", "/api/v1/skills", "/api/v1/skills", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string agent, c.Arg("agent"));
    STRATA_ASSIGN_OR_RETURN(auto skills, c.engine->ListSkills(agent));
    Json out = Json::array();
    for (const memory::Node& n : skills) out.push_back(views::NodeView(n));
    return out;
  });
  add("GET", "/api/v1/skills/" + sid, "/api/v1/skills/{name}", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string agent, c.Arg("agent"));
    STRATA_ASSIGN_OR_RETURN(std::string md, c.engine->ShowSkill(agent, c.req.path_params.at(0)));
    return Json{{"agent", agent}, {"name", c.req.path_params.at(0)}, {"skill_md", md}};
  });
  add("POST", "/api/v1/skills", "/api/v1/skills", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string agent, c.Arg("agent"));
    STRATA_ASSIGN_OR_RETURN(std::string md, c.Arg("skill_md"));
    STRATA_ASSIGN_OR_RETURN(std::string uri, c.engine->AddSkillText(agent, md));
    return Json{{"uri", uri}};
  });
  add("POST", "/api/v1/prompts/render", "/api/v1/prompts/render", [](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string id, c.Arg("id"));
    const Json* vars = json::Field(c.body, "vars");
    STRATA_ASSIGN_OR_RETURN(prompt::Value values, prompt::Value::FromJson(vars == nullptr ? "{}" : vars->dump()));
    STRATA_ASSIGN_OR_RETURN(std::string text, c.engine->RenderPrompt(id, values));
    return Json{{"id", id}, {"text", text}};
  });
  add("POST", "/api/v1/tokens/count", "/api/v1/tokens/count", [](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string encoding, c.Arg("encoding", false));
    if (encoding.empty()) encoding = tokenizer::kDefaultEncoding;
    STRATA_ASSIGN_OR_RETURN(const MessageTokenCounter* counter, tokenizer::FindCounter(encoding));
    Json out = {{"encoding", encoding}};
    std::string warning;
    if (const Json* messages = json::Field(c.body, "messages"); messages != nullptr) {
      // A whole request's messages, counted the way the context window counts them.
      STRATA_ASSIGN_OR_RETURN(std::vector<Message> parsed, ParseMessages(messages->dump()));
      out["tokens"] = tokenizer::CounterFor(encoding, &warning).CountMessages(parsed);
    } else {
      STRATA_ASSIGN_OR_RETURN(std::string text, c.Arg("text"));
      out["tokens"] = tokenizer::CountText(encoding, text, &warning);
    }
    (void)counter;
    if (!warning.empty()) out["warning"] = warning;
    return out;
  });

  // ---- The memory-managing OpenAI-compatible endpoint ----
  add("POST", "/v1/chat/completions", "/v1/chat/completions", [this](Call& c) { return ModelEndpoint(c, Dialect::kOpenAI); },
      true, Dialect::kOpenAI);
  add("POST", "/v1/messages", "/v1/messages", [this](Call& c) { return ModelEndpoint(c, Dialect::kAnthropic); },
      true, Dialect::kAnthropic);

  // ---- MCP, Streamable HTTP (include/strata/server/mcp.h) ----
  // Each POST carries one JSON-RPC message: a request is answered with its response as JSON; a
  // notification or a response is accepted with 202. The server opens no SSE streams of its own (GET is
  // 405), as the transport allows. A notifications/cancelled reaches a request of the same key in flight.
  add("POST", "/mcp", "/mcp", [this](Call& c) -> Result<Json> {
    c.raw = true;
    if (std::string version = c.req.Header("mcp-protocol-version"); !version.empty()) {
      bool known = false;
      for (const char* v : {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"}) known = known || version == v;
      if (!known) return Status::InvalidArgument("unsupported MCP-Protocol-Version " + json::QuoteForError(version, 40));
    }
    std::string owner = c.id.key_id + "|" + c.id.account + "|" + c.id.user + "|";
    if (auto cancelled = McpHandler::CancelledId(c.req.body)) {
      std::lock_guard lock(mcp_mu);
      if (auto it = mcp_in_flight.find(owner + *cancelled); it != mcp_in_flight.end()) it->second->Cancel();
    }
    std::optional<std::string> id = McpHandler::RequestId(c.req.body);
    auto cancel = std::make_shared<Canceller>();
    if (id) {
      std::lock_guard lock(mcp_mu);
      mcp_in_flight[owner + *id] = cancel;
    }
    McpHandler handler(c.engine, c.id, options.http.max_body_bytes);
    std::optional<std::string> reply = handler.Handle(c.req.body, cancel.get());
    if (id) {
      std::lock_guard lock(mcp_mu);
      mcp_in_flight.erase(owner + *id);
    }
    if (!reply && id) {
      // Cancelled: HTTP still needs an answer to the POST; it is the JSON-RPC "request cancelled" error.
      reply = R"({"jsonrpc":"2.0","id":)" + *id + R"(,"error":{"code":-32800,"message":"request cancelled"}})";
    }
    if (!reply) {
      c.res.status = 202;
      c.res.body.clear();
      return Json();
    }
    c.res.status = 200;
    c.res.content_type = "application/json";
    c.res.body = std::move(*reply);
    return Json();
  });
  routes.back().parse_body = false;
  add("GET", "/mcp", "/mcp", [](Call& c) -> Result<Json> {
    c.raw = true;
    c.res.status = 405;
    c.res.headers.emplace_back("Allow", "POST");
    c.res.body = R"({"status":"error","error":{"code":"invalid_argument","message":"this MCP server opens no SSE stream; POST JSON-RPC messages to /mcp"}})";
    return Json();
  });

  // ---- Keys (root only) ----
  auto root_only = [](Call& c) -> Status {
    return c.id.role == Role::kRoot ? Status::Ok() : Status::PermissionDenied("managing keys needs the root key");
  };
  add("POST", "/api/v1/admin/keys", "/api/v1/admin/keys", [this, root_only](Call& c) -> Result<Json> {
    STRATA_RETURN_IF_ERROR(root_only(c));
    if (!keys->has_root_key()) return Status::FailedPrecondition("this server has no root key; keys cannot be issued");
    STRATA_ASSIGN_OR_RETURN(std::string account, c.Arg("account", false));
    STRATA_ASSIGN_OR_RETURN(std::string user, c.Arg("user"));
    STRATA_ASSIGN_OR_RETURN(std::string role_name, c.Arg("role", false));
    STRATA_ASSIGN_OR_RETURN(Role role, ParseRole(role_name.empty() ? "user" : role_name));
    STRATA_ASSIGN_OR_RETURN(auto issued, keys->Issue(account.empty() ? "default" : account, user, role));
    return Json{{"id", issued.first.id}, {"account", issued.first.account}, {"user", issued.first.user},
                {"role", std::string(RoleName(issued.first.role))}, {"key", issued.second}};
  });
  add("GET", "/api/v1/admin/keys", "/api/v1/admin/keys", [this, root_only](Call& c) -> Result<Json> {
    STRATA_RETURN_IF_ERROR(root_only(c));
    STRATA_ASSIGN_OR_RETURN(auto issued_keys, keys->List());
    Json out = Json::array();
    for (const KeyInfo& k : issued_keys) {
      out.push_back({{"id", k.id}, {"account", k.account}, {"user", k.user},
                     {"role", std::string(RoleName(k.role))}, {"created_ms", k.created_ms}});
    }
    return out;
  });
  add("DELETE", "/api/v1/admin/keys/" + sid, "/api/v1/admin/keys/{id}", [this, root_only](Call& c) -> Result<Json> {
    STRATA_RETURN_IF_ERROR(root_only(c));
    STRATA_RETURN_IF_ERROR(keys->Revoke(c.req.path_params.at(0)));
    return Json{{"revoked", c.req.path_params.at(0)}};
  });

  AddViewerRoutes();

  // POSTs that change nothing: they do not tell open viewers to refresh.
  for (RouteSpec& r : routes) {
    if (r.name == "/api/v1/search/find" || r.name == "/api/v1/tokens/count" || r.name == "/api/v1/prompts/render") {
      r.read_only = true;
    }
  }
}

}  // namespace strata::server
