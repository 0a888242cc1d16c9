#include "strata/engine/engine.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <type_traits>
#include <nlohmann/json.hpp>

#include "engine_impl.h"
#include "guard.h"
#include "strata/json/checked.h"
#include "strata/json/json_writer.h"
#include "strata/llm/chat_error.h"
#include "strata/memory/embedder.h"
#include "strata/memory/skill.h"
#include "pg.h"
#include "strata/memory/pg_store.h"
#include "strata/memory/sqlite_store.h"
#include "strata/session/owner_locks.h"
#include "strata/tokenizer/registry.h"
#include "strata/util/ascii.h"
#include "strata/util/clock.h"

namespace strata {
namespace {

using Json = nlohmann::json;
using engine_internal::Guard;
using engine_internal::NotEmpty;

bool IsDir(const std::string& path) {
  std::error_code ec;
  return !path.empty() && std::filesystem::is_directory(path, ec);
}

}  // namespace

std::string ShippedPromptsDir() {
  std::error_code ec;
  std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    std::filesystem::path dir = exe.parent_path().parent_path() / "share" / "strata" / "prompts";
    if (IsDir(dir.string())) return dir.string();
  }
  if (const char* home = std::getenv("STRATA_HOME"); home != nullptr && *home != '\0') {
    std::string dir = std::string(home) + "/share/strata/prompts";
    if (IsDir(dir)) return dir;
  }
  return "";
}


Engine::Engine(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Engine::~Engine() = default;

Result<std::unique_ptr<Engine>> Engine::Open(EngineOptions options) {
  return Guard("open engine", [&]() -> Result<std::unique_ptr<Engine>> {
    if (options.data_dir.empty()) return Status::InvalidArgument("engine: the data directory is empty");
    // Messages that front ends parse before touching the sessions may carry context_ref parts.
    STRATA_RETURN_IF_ERROR(session::RegisterContextRefPart());
    auto impl = std::make_unique<Impl>();
    impl->options = std::move(options);
    impl->postgres = pg::IsPostgresUrl(impl->options.data_dir);
    return std::unique_ptr<Engine>(new Engine(std::move(impl)));
  });
}

const EngineOptions& Engine::options() const { return impl_->options; }

Result<memory::ContextStore*> Engine::store() { return impl_->Store(); }
Result<session::Sessions*> Engine::sessions() { return impl_->Sessions(); }
Result<session::JobQueue*> Engine::queue() { return impl_->Queue(); }
Result<session::AuditLog*> Engine::audit() { return impl_->Audit(); }
Result<prompt::PromptLibrary*> Engine::prompts() {
  std::lock_guard lock(impl_->open_mu);
  return impl_->PromptsLocked();
}
Result<llm::ChatProvider*> Engine::model() {
  std::lock_guard lock(impl_->open_mu);
  return impl_->ModelLocked();
}
Result<const ConfigFile*> Engine::config() {
  std::lock_guard lock(impl_->open_mu);
  return impl_->ConfigLocked();
}
std::vector<std::string> Engine::PromptSearchPath() const { return impl_->PromptDirs(); }

// ---- The context store ----

namespace {
// Runs `body(store, uri)` on the engine's store with `text`, the argument `name`, parsed as a URI.
template <typename F>
auto WithUri(Engine::Impl& impl, std::string_view what, std::string_view text, F&& body,
             std::string_view name = "uri") {
  using R = std::invoke_result_t<F, memory::ContextStore&, const memory::Uri&>;
  return Guard(what, [&]() -> R {
    STRATA_RETURN_IF_ERROR(NotEmpty(text, name));
    STRATA_ASSIGN_OR_RETURN(memory::Uri uri, memory::Uri::Parse(text));
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * store, impl.Store());
    return body(*store, uri);
  });
}
}  // namespace

namespace {

// Metadata a caller writes is nested at most this deep: an export puts it in a directory's .meta.json, two
// levels down, and what was written must read back (metadata 254 levels deep was taken over HTTP, and its
// directory's .meta.json was then skipped whole on import, with every sibling's metadata). The store itself
// takes any depth, so that an import or a migration of older, deeper metadata still copies it.
constexpr size_t kMaxMetadataDepth = 64;

Status CheckMetadataDepth(const memory::WriteOptions& options) {
  if (!options.metadata) return Status::Ok();
  if (size_t deep = json::FindTooDeep(*options.metadata, kMaxMetadataDepth); deep != std::string_view::npos) {
    return Status::InvalidArgument("metadata is nested deeper than " + std::to_string(kMaxMetadataDepth) +
                                   " levels (at byte " + std::to_string(deep) + ")");
  }
  return Status::Ok();
}

}  // namespace

Status Engine::Write(std::string_view uri, std::string_view content, const memory::WriteOptions& options) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "write"));
  STRATA_RETURN_IF_ERROR(CheckMetadataDepth(options));
  return WithUri(*impl_, "write", uri, [&](memory::ContextStore& s, const memory::Uri& u) {
    return s.Write(u, content, options);
  });
}

Status Engine::Mkdir(std::string_view uri, const memory::WriteOptions& options) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "mkdir"));
  STRATA_RETURN_IF_ERROR(CheckMetadataDepth(options));
  return WithUri(*impl_, "mkdir", uri, [&](memory::ContextStore& s, const memory::Uri& u) { return s.Mkdir(u, options); });
}

// The root (strata://) is the directory every listing starts from: it exists, holds the scopes, and has no
// layers of its own. (A listing of it answered while stat and read said it did not exist.)
Result<std::string> Engine::Read(std::string_view uri, memory::Level level) {
  return WithUri(*impl_, "read", uri, [&](memory::ContextStore& s, const memory::Uri& u) -> Result<std::string> {
    STRATA_RETURN_IF_ERROR(memory::LevelOf(static_cast<int64_t>(level)).status());
    if (u.is_root()) return std::string();
    return s.Read(u, level);
  });
}

Result<memory::Node> Engine::Stat(std::string_view uri) {
  return WithUri(*impl_, "stat", uri, [&](memory::ContextStore& s, const memory::Uri& u) -> Result<memory::Node> {
    if (u.is_root()) return memory::Node{.uri = u, .is_dir = true};
    return s.Stat(u);
  });
}

Result<std::vector<memory::Relation>> Engine::Relations(std::string_view uri) {
  return WithUri(*impl_, "relations", uri,
                 [&](memory::ContextStore& s, const memory::Uri& u) { return s.Relations(u); });
}

Result<std::vector<memory::Node>> Engine::List(std::string_view uri, const memory::ListOptions& options) {
  // "" is everything, as an unset URI is to every front end's listing (HTTP, MCP, the CLI).
  return WithUri(*impl_, "list", uri.empty() ? std::string_view("strata://") : uri, [&](memory::ContextStore& s, const memory::Uri& u) -> Result<std::vector<memory::Node>> {
    // A limit past any listing is none, for every front end: the largest, plus the one each asks for to
    // tell a cut list, was more than SQL's integers hold, refused in different words by each backend.
    memory::ListOptions o = options;
    if (o.limit >= (size_t{1} << 40)) o.limit = 0;
    Result<std::vector<memory::Node>> nodes = s.List(u, o);
    // A scope comes into being with its first write: listing one with nothing in it yet (a user's own, the
    // default of every front end for a user's key) is an empty answer, as searching it is (docs/memory.md).
    if (!nodes.ok() && nodes.status().code() == StatusCode::kNotFound && (u.is_scope_root() || u.is_kind_dir())) {
      return std::vector<memory::Node>{};
    }
    return nodes;
  });
}


Result<int64_t> Engine::Remove(std::string_view uri, bool recursive) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "rm"));
  return WithUri(*impl_, "rm", uri,
                 [&](memory::ContextStore& s, const memory::Uri& u) { return s.Remove(u, recursive); });
}

namespace {
template <typename F>
Status WithTwoUris(Engine::Impl& impl, std::string_view what, std::string_view from, std::string_view to, F&& body) {
  return WithUri(
      impl, what, from,
      [&](memory::ContextStore& s, const memory::Uri& f) -> Status {
        STRATA_RETURN_IF_ERROR(NotEmpty(to, "to"));
        STRATA_ASSIGN_OR_RETURN(memory::Uri t, memory::Uri::Parse(to));
        return body(s, f, t);
      },
      "from");
}
}  // namespace

Status Engine::Move(std::string_view from, std::string_view to) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "mv"));
  return WithTwoUris(*impl_, "mv", from, to,
                     [](memory::ContextStore& s, const memory::Uri& f, const memory::Uri& t) { return s.Move(f, t); });
}

Status Engine::Link(std::string_view from, std::string_view to, std::string_view reason) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "link"));
  return WithTwoUris(*impl_, "link", from, to, [&](memory::ContextStore& s, const memory::Uri& f, const memory::Uri& t) {
    return s.Link(f, t, reason);
  });
}

Status Engine::Unlink(std::string_view from, std::string_view to) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "unlink"));
  return WithTwoUris(*impl_, "unlink", from, to,
                     [](memory::ContextStore& s, const memory::Uri& f, const memory::Uri& t) { return s.Unlink(f, t); });
}

// An export or an import names its subtree: "" is refused (WithUri), as over HTTP (it exported everything
// here, and imported into strata://resources).
Result<memory::ExportReport> Engine::Export(std::string_view uri, const std::string& dir) {
  return WithUri(*impl_, "export", uri,
                 [&](memory::ContextStore& s, const memory::Uri& u) { return memory::ExportMarkdown(s, u, dir); });
}

Result<memory::ImportReport> Engine::Import(const std::string& dir, std::string_view uri) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "import"));
  return WithUri(*impl_, "import", uri,
                 [&](memory::ContextStore& s, const memory::Uri& u) { return memory::ImportMarkdown(s, dir, u); });
}

Result<std::vector<std::string>> Engine::Check() {
  return Guard("check", [&]() -> Result<std::vector<std::string>> {
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * store, impl_->Store());
    return store->Check();
  });
}

Status Engine::Reindex() {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "reindex"));
  return Guard("reindex", [&]() -> Status {
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * store, impl_->Store());
    return store->Reindex();
  });
}

// ---- Skills ----

namespace {
// An agent's skills directory; `agent` is an id, as everywhere it names a scope ("helper/memories" put a
// skill at strata://agent/helper/memories/skills, which no agent's listing showed).
Result<memory::Uri> SkillsDir(std::string_view agent) {
  STRATA_RETURN_IF_ERROR(memory::ValidateScopeId(agent, "agent"));
  return memory::Uri::Parse("strata://agent/" + std::string(agent) + "/skills");
}
}  // namespace

namespace {

// Whether `node` is a skill StoreSkill wrote: a leaf whose metadata holds its SKILL.md.
bool IsStoredSkill(const memory::Node& node) {
  return !node.is_dir && !json::StringOr(strata::json::ParseOrDiscard<Json>(node.metadata), "skill_md").empty();
}

// Stores `skill` under strata://agent/<agent>/skills/<name>; returns its URI.
Result<std::string> StoreSkill(memory::ContextStore& store, const memory::Uri& skills, const memory::Skill& skill) {
  STRATA_ASSIGN_OR_RETURN(memory::Uri uri, skills.Child(skill.name));
  Json meta = {{"tools", skill.tools}, {"skill_md", memory::SerializeSkill(skill)}};
  STRATA_RETURN_IF_ERROR(store.Write(
      uri, skill.body, {.abstract_text = skill.description, .type = memory::ContextType::kSkill, .metadata = meta.dump()}));
  return uri.str();
}

}  // namespace

Result<std::string> Engine::AddSkill(std::string_view agent, const std::string& path) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "skill add"));
  return Guard("skill add", [&]() -> Result<std::string> {
    STRATA_ASSIGN_OR_RETURN(memory::Uri skills, SkillsDir(agent));
    STRATA_ASSIGN_OR_RETURN(memory::Skill skill, memory::LoadSkillFile(path));
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * store, impl_->Store());
    return StoreSkill(*store, skills, skill);
  });
}

Result<std::string> Engine::AddSkillText(std::string_view agent, std::string_view skill_md) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "skill add"));
  return Guard("skill add", [&]() -> Result<std::string> {
    STRATA_ASSIGN_OR_RETURN(memory::Uri skills, SkillsDir(agent));
    STRATA_ASSIGN_OR_RETURN(memory::Skill skill, memory::ParseSkill(skill_md));
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * store, impl_->Store());
    return StoreSkill(*store, skills, skill);
  });
}

Result<std::vector<memory::Node>> Engine::ListSkills(std::string_view agent) {
  return Guard("skill list", [&]() -> Result<std::vector<memory::Node>> {
    STRATA_ASSIGN_OR_RETURN(memory::Uri skills, SkillsDir(agent));
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * store, impl_->Store());
    Result<std::vector<memory::Node>> listed = store->List(skills);
    if (!listed.ok() && listed.status().code() == StatusCode::kNotFound) return std::vector<memory::Node>();
    STRATA_RETURN_IF_ERROR(listed.status());
    // A skill is a leaf stored from a SKILL.md; a directory or a text written there some other way is not.
    std::erase_if(*listed, [](const memory::Node& n) { return !IsStoredSkill(n); });
    return listed;
  });
}

Result<std::string> Engine::ShowSkill(std::string_view agent, std::string_view name) {
  return Guard("skill show", [&]() -> Result<std::string> {
    STRATA_ASSIGN_OR_RETURN(memory::Uri skills, SkillsDir(agent));
    STRATA_ASSIGN_OR_RETURN(memory::Uri uri, skills.Child(name));
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * store, impl_->Store());
    STRATA_ASSIGN_OR_RETURN(memory::Node node, store->Stat(uri));
    if (!IsStoredSkill(node)) {
      // Not found, as skill list does not list it.
      return Status::NotFound(uri.str() + " is not a skill: " +
                              (node.is_dir ? "a directory" : "no SKILL.md was stored there (skill add stores one)"));
    }
    std::string md = json::StringOr(strata::json::ParseOrDiscard<Json>(node.metadata), "skill_md");
    // The leaf's text is the skill's body: one written over it since (a write or an edit of the node) is
    // what the skill says now. Its old SKILL.md was served, so an edit that took a secret or a wrong step
    // out of the instructions reached no agent.
    Result<memory::Skill> stored = memory::ParseSkill(md);
    if (stored.ok() && stored->body != node.content) {
      stored->body = node.content;
      md = memory::SerializeSkill(*stored);
    }
    return md;
  });
}

// ---- Sessions ----

Result<session::SessionInfo> Engine::CreateSession(std::string_view user, std::string_view agent, std::string_view id) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "session new"));
  return Guard("session new", [&]() -> Result<session::SessionInfo> {
    STRATA_ASSIGN_OR_RETURN(session::Sessions * s, impl_->Sessions());
    // A session of nobody could never be committed (phase 2 needs an owner for its memories): one that
    // names neither a user nor an agent is the default user's, on every front end.
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info,
                            s->Create(user.empty() && agent.empty() ? std::string_view("default") : user, agent, id));
    if (!id.empty()) STRATA_RETURN_IF_ERROR(impl_->ClearSessionScope(info.id));
    return info;
  });
}

Result<session::SessionInfo> Engine::JobSession(const session::Job& job) {
  return Guard("task session", [&]() -> Result<session::SessionInfo> {
    std::string id = session::SessionIdOfRef(job.key);
    if (job.kind != session::kCommitJobKind || id.empty()) return Status::NotFound("task " + std::to_string(job.id) + " belongs to no session");
    STRATA_ASSIGN_OR_RETURN(session::Sessions * s, impl_->Sessions());
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, s->Get(id));
    if (!session::RefersTo(job.key, info)) return session::NoSuchSession(id);
    return info;
  });
}

Result<std::optional<session::SessionInfo>> Engine::AuditSession(const session::AuditEntry& entry) {
  return Guard("audit session", [&]() -> Result<std::optional<session::SessionInfo>> {
    std::string_view ref = std::string_view(entry.source).substr(0, entry.source.find('#'));
    std::string id = session::SessionIdOfRef(ref);
    if (id.empty() || ref == "remember" || ref == "consolidate") return std::optional<session::SessionInfo>();
    STRATA_ASSIGN_OR_RETURN(session::Sessions * s, impl_->Sessions());
    Result<session::SessionInfo> info = s->Get(id);
    if (!info.ok() && info.status().code() == StatusCode::kNotFound) return std::optional<session::SessionInfo>();
    STRATA_RETURN_IF_ERROR(info.status());
    if (!session::RefersTo(ref, *info)) return std::optional<session::SessionInfo>();
    return std::optional<session::SessionInfo>(std::move(*info));
  });
}

Result<std::vector<session::SessionInfo>> Engine::ListSessions() {
  return Guard("session list", [&]() -> Result<std::vector<session::SessionInfo>> {
    STRATA_ASSIGN_OR_RETURN(session::Sessions * s, impl_->Sessions());
    return s->List();
  });
}

Result<session::SessionInfo> Engine::GetSession(std::string_view id) {
  return Guard("session show", [&]() -> Result<session::SessionInfo> {
    STRATA_ASSIGN_OR_RETURN(session::Sessions * s, impl_->Sessions());
    return s->Get(id);
  });
}

Result<session::SessionInfo> Engine::AddMessages(std::string_view id, std::span<const Message> messages) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "session add"));
  return Guard("session add", [&]() -> Result<session::SessionInfo> {
    // Every front end refuses it alike; an empty append would still touch the session (and put off its
    // idle commit).
    if (messages.empty()) return Status::InvalidArgument("no messages given");
    STRATA_ASSIGN_OR_RETURN(session::Sessions * s, impl_->Sessions());
    STRATA_ASSIGN_OR_RETURN(auto held, impl_->HoldForChange(id, "add messages"));
    STRATA_RETURN_IF_ERROR(s->Add(id, messages));
    return s->Get(id);
  });
}

Result<std::vector<Message>> Engine::SessionMessages(std::string_view id) {
  return Guard("session messages", [&]() -> Result<std::vector<Message>> {
    STRATA_ASSIGN_OR_RETURN(session::Sessions * s, impl_->Sessions());
    return s->Messages(id);
  });
}

Result<CommitOutcome> Engine::Commit(std::string_view id, const CommitOptions& options) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "session commit"));
  return Guard("session commit", [&]() -> Result<CommitOutcome> {
    STRATA_ASSIGN_OR_RETURN(session::Sessions * s, impl_->Sessions());
    CommitOutcome out;
    {
      // Not in the middle of a turn (here or in another instance): its request would be archived and its
      // reply left alone in the live log. No turn begins while phase 1 runs.
      STRATA_ASSIGN_OR_RETURN(auto held, impl_->HoldSession(id, "session " + session::SessionIdOfRef(id) +
                                                                    " has a turn or a commit in progress; commit "
                                                                    "when it has ended"));
      STRATA_ASSIGN_OR_RETURN(out.ticket, s->Commit(id));
    }
    if (!options.wait) return out;
    // Phase 1 stands whatever comes next: a phase 2 that cannot run here (no usable model configuration) is
    // the outcome's, as a worker held elsewhere is. Raised, it lost the archive's number and the task's id,
    // and a second commit found nothing to commit.
    Result<session::MemoryPipeline*> pipeline = impl_->Pipeline();
    if (!pipeline.ok()) {
      out.phase2 = pipeline.status();
      return out;
    }
    auto worker = impl_->BecomeWorker();
    if (!worker.ok()) {
      out.phase2 = worker.status();
      return out;
    }
    STRATA_ASSIGN_OR_RETURN(session::JobQueue * queue, impl_->Queue());
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, s->Get(id));
    // The caller is waiting for this session: its jobs run now even if a backoff after an earlier failure
    // would have them wait.
    STRATA_RETURN_IF_ERROR(queue->Expedite(session::CommitJobKey(info)));
    Status ran = (*pipeline)->RunPendingOf(*queue, session::CommitJobKey(info), out.ticket.job_id, options.cancel).status();
    if (!ran.ok()) {
      out.phase2 = ran;  // Cancelled, or the queue failed: phase 1 stands, the job waits in the queue.
      return out;
    }
    STRATA_ASSIGN_OR_RETURN(auto archives, s->Archives(id));
    for (const session::ArchiveInfo& a : archives) {
      if (a.number != out.ticket.archive) continue;
      out.state = a.state;
      if (a.state != session::ArchiveState::kDone) {
        std::string why = a.error;
        if (why.empty()) {
          STRATA_ASSIGN_OR_RETURN(std::optional<session::Job> job, queue->Get(out.ticket.job_id));
          if (job && job->state == session::JobState::kRunning) {
            why = "another worker (a server, another instance) is running it now";
          } else if (job && !job->last_error.empty()) {
            why = job->last_error + "; it will be retried by `strata session work`";
          }
        }
        if (why.empty()) why = "it will be retried by `strata session work`";
        out.phase2 = Status::Unavailable("phase 2 of archive " + std::to_string(a.number) + " did not finish: " + why);
        return out;
      }
    }
    STRATA_ASSIGN_OR_RETURN(session::CommitDiff diff, (*pipeline)->ProcessArchive(id, out.ticket.archive, options.cancel));
    out.diff = std::move(diff);
    return out;
  });
}

Result<SessionStatus> Engine::GetSessionStatus(std::string_view id) {
  return Guard("session status", [&]() -> Result<SessionStatus> {
    STRATA_ASSIGN_OR_RETURN(session::Sessions * s, impl_->Sessions());
    STRATA_ASSIGN_OR_RETURN(session::JobQueue * q, impl_->Queue());
    SessionStatus out;
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, s->Get(id));
    out.session = info.id;
    STRATA_ASSIGN_OR_RETURN(out.archives, s->Archives(session::SessionRef(info)));
    STRATA_ASSIGN_OR_RETURN(out.jobs, q->List(std::nullopt, session::CommitJobKey(info)));
    return out;
  });
}

Result<session::CommitDiff> Engine::ArchiveDiff(std::string_view id, int archive) {
  return Guard("session archive diff", [&]() -> Result<session::CommitDiff> {
    if (archive <= 0) {  // HTTP's words for the same path segment.
      return Status::InvalidArgument("the archive number " + json::QuoteForError(std::to_string(archive), 40) +
                                     " is not a positive integer");
    }
    STRATA_ASSIGN_OR_RETURN(session::Sessions * s, impl_->Sessions());
    return session::ReadCommitDiff(*s, id, archive);
  });
}

Result<WorkReport> Engine::Work(const Canceller* cancel) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "phase 2 (session work)"));
  return Guard("session work", [&]() -> Result<WorkReport> {
    STRATA_ASSIGN_OR_RETURN(session::MemoryPipeline * pipeline, impl_->Pipeline());
    STRATA_ASSIGN_OR_RETURN(auto worker, impl_->BecomeWorker());
    STRATA_ASSIGN_OR_RETURN(session::JobQueue * q, impl_->Queue());
    WorkReport report;
    STRATA_ASSIGN_OR_RETURN(report.completed, pipeline->RunPending(*q, 1 << 30, cancel));
    STRATA_ASSIGN_OR_RETURN(auto pending, q->List(session::JobState::kPending));
    STRATA_ASSIGN_OR_RETURN(auto dead, q->List(session::JobState::kDead));
    report.pending = pending.size();
    report.dead = dead.size();
    return report;
  });
}

Result<std::vector<session::Job>> Engine::Tasks(const Reach& reach, std::string_view session,
                                                std::optional<session::JobState> state, int64_t limit) {
  return Guard("tasks", [&]() -> Result<std::vector<session::Job>> {
    if (limit < 1 || limit > 10'000) return Status::InvalidArgument("\"limit\" must be between 1 and 10000");
    std::optional<std::string> key;
    if (!session.empty()) {
      // This incarnation's jobs only: their key is its reference (session::CommitJobKey).
      STRATA_ASSIGN_OR_RETURN(key, CheckSessionAccess(reach, session));
    }
    STRATA_ASSIGN_OR_RETURN(session::JobQueue * queue, impl_->Queue());
    STRATA_ASSIGN_OR_RETURN(std::vector<session::Job> jobs, queue->List(state, key));
    std::sort(jobs.begin(), jobs.end(), [](const session::Job& a, const session::Job& b) { return a.id > b.id; });
    std::vector<session::Job> out;
    for (session::Job& job : jobs) {
      if (static_cast<int64_t>(out.size()) >= limit) break;
      if (CheckJobAccess(reach, job).ok()) out.push_back(std::move(job));
    }
    return out;
  });
}

Result<session::Job> Engine::Task(const Reach& reach, int64_t id) {
  return Guard("task", [&]() -> Result<session::Job> {
    if (id <= 0) return Status::InvalidArgument("the task id \"" + std::to_string(id) + "\" is not a positive integer");
    STRATA_ASSIGN_OR_RETURN(session::JobQueue * queue, impl_->Queue());
    STRATA_ASSIGN_OR_RETURN(std::optional<session::Job> job, queue->Get(id));
    // Another user's task is answered as one that does not exist.
    if (!job || !CheckJobAccess(reach, *job).ok()) return Status::NotFound("no task " + std::to_string(id));
    return std::move(*job);
  });
}

Result<int> Engine::Retry(std::string_view id) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "session retry"));
  return Guard("session retry", [&]() -> Result<int> {
    STRATA_ASSIGN_OR_RETURN(session::Sessions * s, impl_->Sessions());
    STRATA_ASSIGN_OR_RETURN(session::JobQueue * q, impl_->Queue());
    std::vector<session::SessionInfo> targets;
    if (id.empty()) {
      STRATA_ASSIGN_OR_RETURN(targets, s->List());
    } else {
      STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, s->Get(id));
      targets.push_back(std::move(info));
    }
    int requeued = 0;
    for (const session::SessionInfo& info : targets) {
      STRATA_ASSIGN_OR_RETURN(std::vector<session::Job> dead,
                              q->List(session::JobState::kDead, session::CommitJobKey(info)));
      for (const session::Job& job : dead) {
        if (job.kind != session::kCommitJobKind) continue;
        STRATA_RETURN_IF_ERROR(q->Retry(job.id));
        ++requeued;
      }
      // A failed archive with no job left (its job finished as failed before jobs could be retried) gets one.
      STRATA_ASSIGN_OR_RETURN(std::vector<session::ArchiveInfo> archives, s->Archives(session::SessionRef(info)));
      for (const session::ArchiveInfo& a : archives) {
        if (a.state != session::ArchiveState::kFailed) continue;
        STRATA_ASSIGN_OR_RETURN(std::vector<session::Job> jobs, q->List(std::nullopt, session::CommitJobKey(info)));
        bool queued = false;
        for (const session::Job& job : jobs) {
          Json payload = strata::json::ParseOrDiscard<Json>(job.payload);
          queued = queued || ((job.state == session::JobState::kPending || job.state == session::JobState::kRunning) &&
                              json::IntOr(payload, "archive", -1) == a.number);
        }
        if (queued) continue;
        STRATA_RETURN_IF_ERROR(s->EnqueueArchive(session::SessionRef(info), a.number).status());
        ++requeued;
      }
    }
    if (!id.empty()) return requeued;
    // The jobs of no session (a file's summary by the model) are revived with all.
    STRATA_ASSIGN_OR_RETURN(std::vector<session::Job> dead, q->List(session::JobState::kDead));
    for (const session::Job& job : dead) {
      if (job.kind == session::kCommitJobKind) continue;
      STRATA_RETURN_IF_ERROR(q->Retry(job.id));
      ++requeued;
    }
    return requeued;
  });
}

// ---- Memories ----

namespace {

int64_t NowMs() { return SystemClock()->WallMicros() / 1000; }

// "remember#<ms>-<random>#0": the audit source of one remember call kept without a model (as the
// pipeline's own remember names its calls).
std::string KeptNoteSource() {
  static std::mutex mu;
  std::lock_guard lock(mu);
  static std::mt19937_64 rng(std::random_device{}());
  char token[17];
  std::snprintf(token, sizeof token, "%016llx", static_cast<unsigned long long>(rng()));
  return "remember#" + std::to_string(NowMs()) + "-" + token + "#0";
}

}  // namespace

namespace engine_internal {

Status ModelRefusal(Status status) {
  std::optional<llm::ChatErrorInfo> info = llm::ChatErrorOf(status);
  if (!info || (status.code() != StatusCode::kInvalidArgument && status.code() != StatusCode::kNotFound)) {
    return status;
  }
  return Status::FailedPrecondition("the model refused the request: " + std::string(status.message()));
}

}  // namespace engine_internal

Result<std::vector<session::MemoryChange>> Engine::Remember(std::string_view scope, std::string_view text,
                                                           std::string_view category, const Canceller* cancel) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "remember"));
  return Guard("remember", [&]() -> Result<std::vector<session::MemoryChange>> {
    // Refused before any model sees it, with or without one: every front end gives this answer.
    STRATA_RETURN_IF_ERROR(NotEmpty(scope, "scope"));
    if (text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
      return Status::InvalidArgument("remember: the text is empty");
    }
    if (size_t bad = 0; !json::IsValidUtf8(text, &bad)) {
      return Status::InvalidArgument("remember: the text is not valid UTF-8 (byte " + std::to_string(bad) + ")");
    }
    Status why;
    if (Result<session::MemoryPipeline*> p = impl_->Pipeline(); p.ok()) {
      Result<std::vector<session::MemoryChange>> changes = (*p)->Remember(scope, text, category, cancel);
      if (changes.ok()) return changes;
      why = changes.status();
    } else {
      why = p.status();
    }
    // No model to deduplicate with (none configured, unavailable, or it found nothing to remember): every
    // front end keeps the text as written rather than lose it, and says so in the change's reason.
    // Any answer of the model's but a cancellation (a 400 for a wrong model name, a 429) is one it could not
    // be used for, as a missing one: the text is kept the same way whatever the code.
    const bool models = llm::ChatErrorOf(why).has_value() && why.code() != StatusCode::kCancelled;
    if (why.code() != StatusCode::kFailedPrecondition && why.code() != StatusCode::kUnavailable && !models) {
      return why;
    }
    STRATA_ASSIGN_OR_RETURN(memory::Uri scope_uri, memory::Uri::Parse(scope));
    if ((scope_uri.kind() != "user" && scope_uri.kind() != "agent") || !scope_uri.is_scope_root()) {
      return Status::InvalidArgument("remember: '" + std::string(scope) +
                                     "' is not a user or agent scope (strata://user/<id> or strata://agent/<id>)");
    }
    std::string cat = category.empty() ? "notes" : std::string(category);
    if (!memory::ValidateScopeId(cat, "category").ok()) cat = "notes";
    // Held as phase 2, remember and consolidation hold the owner's memories (the same locks, in every process
    // or instance), for as long as they do: two of these at once both read "not kept yet" and both logged a
    // create, and a consolidation could decide against the note while it was written.
    STRATA_ASSIGN_OR_RETURN(session::OwnerLocks * locks, impl_->MemoryLocks());
    STRATA_ASSIGN_OR_RETURN(auto held,
                            locks->Lock({std::string(scope_uri.kind()) + "/" + std::string(scope_uri.scope_id())}, cancel));
    // Named by the text without the blanks at its ends, as the pipeline compares texts: "x" and "x\n" are
    // one note.
    const std::string_view kept = StripAsciiWhitespace(text);
    char name[32];
    std::snprintf(name, sizeof name, "note-%012llx",
                  static_cast<unsigned long long>(std::hash<std::string_view>{}(kept) & 0xffffffffffffULL));
    session::MemoryChange change{session::MemoryAction::kCreate, scope_uri.str() + "/memories/" + cat + "/" + name,
                                 "kept as written, without deduplication: " + why.message()};
    Result<std::string> before = Read(change.uri);
    if (before.ok() && StripAsciiWhitespace(*before) == kept) {
      change.action = session::MemoryAction::kSkip;
      change.reason = "already kept as written";
      return std::vector<session::MemoryChange>{change};
    }
    STRATA_RETURN_IF_ERROR(held->Verify());  // A lock lost with its connection: another may be deciding.
    STRATA_RETURN_IF_ERROR(Write(change.uri, text));
    STRATA_ASSIGN_OR_RETURN(session::AuditLog * audit, impl_->Audit());
    std::vector<session::AuditEntry> entry(1);
    entry[0].uri = change.uri;
    entry[0].action = before.ok() ? session::MemoryAction::kMerge : session::MemoryAction::kCreate;
    entry[0].source = KeptNoteSource();
    entry[0].at_ms = NowMs();
    entry[0].reason = change.reason;
    entry[0].before = before.ok() ? *before : "";
    entry[0].after = std::string(text);
    entry[0].category = cat;
    STRATA_RETURN_IF_ERROR(audit->Record(entry));
    change.action = entry[0].action;
    return std::vector<session::MemoryChange>{change};
  });
}

Result<std::vector<session::AuditEntry>> Engine::MemoryHistory(std::string_view uri) {
  return Guard("memory history", [&]() -> Result<std::vector<session::AuditEntry>> {
    STRATA_RETURN_IF_ERROR(NotEmpty(uri, "uri"));
    STRATA_ASSIGN_OR_RETURN(session::AuditLog * audit, impl_->Audit());
    STRATA_ASSIGN_OR_RETURN(memory::Uri u, memory::Uri::Parse(uri));
    return audit->History(u.str());
  });
}

Result<std::vector<session::AuditEntry>> Engine::RecentMemoryChanges(std::string_view under, size_t limit) {
  return Guard("recent memory changes", [&]() -> Result<std::vector<session::AuditEntry>> {
    STRATA_ASSIGN_OR_RETURN(session::AuditLog * audit, impl_->Audit());
    STRATA_ASSIGN_OR_RETURN(memory::Uri u, memory::Uri::Parse(under.empty() ? std::string_view("strata://") : under));
    return audit->Recent(u.str(), limit);
  });
}

Result<std::vector<session::MemoryChange>> Engine::Consolidate(std::string_view under, const Canceller* cancel) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "consolidate"));
  return Guard("consolidate", [&]() -> Result<std::vector<session::MemoryChange>> {
    STRATA_RETURN_IF_ERROR(NotEmpty(under, "under"));
    STRATA_ASSIGN_OR_RETURN(session::MemoryPipeline * p, impl_->Pipeline());
    return engine_internal::ModelRefusal(p->Consolidate(under, cancel));
  });
}

// ---- Prompts, tokens, conversations ----

Result<std::string> Engine::RenderPrompt(std::string_view id, const prompt::Value& vars) {
  return Guard("render prompt", [&]() -> Result<std::string> {
    STRATA_ASSIGN_OR_RETURN(prompt::PromptLibrary * library, prompts());
    Result<std::string> text = library->Render(id, vars);
    if (text.ok()) return text;
    // Front ends serve this answer to callers who must not learn the server's paths: the templates this
    // engine knows and the file's name, never the directory it lives in (`strata prompt list` shows those).
    if (text.status().code() == StatusCode::kNotFound) {
      std::vector<std::string> ids = library->Ids();
      std::string quoted = json::QuoteForError(id, 80);
      if (std::find(ids.begin(), ids.end(), id) == ids.end()) {
        std::string known;
        for (const std::string& k : ids) known += (known.empty() ? "" : ", ") + k;
        return Status::NotFound("no prompt template " + quoted +
                                (known.empty() ? " (none are installed)" : " (known: " + known + ")"));
      }
    }
    std::string message(text.status().message());
    for (const std::string& dir : library->directories()) {
      std::string prefix = dir.empty() || dir.back() == '/' ? dir : dir + "/";
      for (size_t at; !prefix.empty() && (at = message.find(prefix)) != std::string::npos;) {
        message.erase(at, prefix.size());
      }
      for (size_t at; !dir.empty() && (at = message.find(dir)) != std::string::npos;) {
        message.replace(at, dir.size(), "the prompt directory");
      }
    }
    return Status(text.status().code(), message);
  });
}

const MessageTokenCounter& Engine::Counter(const std::string& name, std::string* warning) {
  return tokenizer::CounterFor(name, warning);
}

Result<std::unique_ptr<Conversation>> Engine::OpenConversation(const std::string& path, ConversationOptions options,
                                                               const tools::Toolset* tools) {
  return Guard("open conversation", [&]() -> Result<std::unique_ptr<Conversation>> {
    STRATA_ASSIGN_OR_RETURN(llm::ChatProvider * m, model());
    return Conversation::Open(path, *m, Counter("o200k_base"), std::move(options), tools);
  });
}

}  // namespace strata
