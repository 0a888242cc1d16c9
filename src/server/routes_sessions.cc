// The session routes (docs/api/openapi.yaml): sessions/* and the phase-2 tasks. Another user's session
// answers exactly as a missing one (the Engine's CheckSessionAccess). A route reads and checks its arguments
// before it looks for the session, as the Engine's calls do (CheckCheckpointArg and the like), so that a bad
// argument is refused alike by every front end whether or not the session is there.
#include <cerrno>
#include <thread>

#include "server_impl.h"
#include "strata/message/message_json.h"

namespace strata::server {
namespace {

// A path segment that must be a positive integer ("the task id", "the archive number").
Result<int64_t> PositivePathInt(const std::string& text, std::string_view what) {
  char* end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  // Digits only: strtoll also takes leading blanks and a sign ("/tasks/%0A5" was task 5).
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos || *end != '\0' || errno != 0 ||
      value <= 0) {
    return Status::InvalidArgument(std::string(what) + " " + json::QuoteForError(text, 40) + " is not a positive integer");
  }
  return value;
}

}  // namespace

void Server::Impl::AddSessionRoutes() {
  // ---- Sessions ----
  Add(Route("POST", "/api/v1/sessions", [](Call& c) -> Result<Json> {
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
  }).Takes("id user agent"));
  // A chat export's conversations as sessions (Engine::ImportConversations): {"format", "content" (the
  // export file's text), "name"?, "user"?, "agent"?, "commit"?}. A user key imports for its own user.
  Add(Route("POST", "/api/v1/sessions/import", [](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string format_name, c.Arg("format"));
    STRATA_ASSIGN_OR_RETURN(session::ChatExportFormat format, session::ParseChatExportFormat(format_name));
    const Json* content = json::Field(c.body, "content");
    if (content == nullptr || !content->is_string()) {
      return Status::InvalidArgument("\"content\" must be the export file's text (a string)");
    }
    STRATA_ASSIGN_OR_RETURN(std::string name, c.Arg("name", false));
    STRATA_ASSIGN_OR_RETURN(std::string user, c.Arg("user", false));
    STRATA_ASSIGN_OR_RETURN(std::string agent, c.Arg("agent", false));
    const Json* commit = json::Field(c.body, "commit");
    if (commit != nullptr && !commit->is_boolean()) return Status::InvalidArgument("\"commit\" must be true or false");
    if (c.id.role == Role::kUser) {
      if (!user.empty() && user != c.id.user) {
        return Status::PermissionDenied("this key imports sessions for user " + c.id.user + " only");
      }
      user = c.id.user;
    }
    STRATA_ASSIGN_OR_RETURN(session::ChatExport exported,
                            session::ParseChatExport(content->get_ref<const std::string&>(), format,
                                                     name.empty() ? "export" : name));
    STRATA_ASSIGN_OR_RETURN(ChatImportReport report,
                            c.engine->ImportConversations(exported, user, agent, commit != nullptr && commit->get<bool>()));
    return views::ChatImportView(report);
  }).Takes("format content name user agent commit").BodyOnly("content commit"));
  Add(Route("GET", "/api/v1/sessions", [](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(auto sessions, c.engine->ListSessions());
    Json out = Json::array();
    for (const session::SessionInfo& s : sessions) {
      if (c.id.role == Role::kUser && s.user != c.id.user) continue;
      out.push_back(views::SessionView(s));
    }
    return out;
  }));
  Add(Route("GET", "/api/v1/sessions/{id}", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_ASSIGN_OR_RETURN(const std::string ref, CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, c.engine->GetSession(ref));
    STRATA_ASSIGN_OR_RETURN(std::vector<Message> messages, c.engine->SessionMessages(ref));
    return views::SessionView(info, &messages);
  }));
  Add(Route("POST", "/api/v1/sessions/{id}/messages", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    // {"message": {...}}, {"messages": [...]}, or the message or array itself.
    // One of the three, never two: a body holding two would otherwise lose one without a word.
    const Json* many = json::Field(c.body, "messages");
    const Json* one = json::Field(c.body, "message");
    if (many != nullptr && one != nullptr) return Status::InvalidArgument("give \"message\" or \"messages\", not both");
    const Json* given = many != nullptr ? many : one;
    if (given != nullptr && c.body.size() > 1) {
      return Status::InvalidArgument(std::string("give a message's fields (role, content ...) or \"") +
                                     (many != nullptr ? "messages" : "message") + "\", not both");
    }
    const Json& payload = given != nullptr ? *given : c.body;
    STRATA_ASSIGN_OR_RETURN(std::vector<Message> messages, ParseMessages(payload.dump()));
    if (messages.empty()) return Status::InvalidArgument("no messages given");
    STRATA_ASSIGN_OR_RETURN(const std::string ref, CheckSession(c, id));
    STRATA_RETURN_IF_ERROR(CheckRefs(c, messages));
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, c.engine->AddMessages(ref, messages));
    return views::SessionView(info);
  }).BodyOnly("messages message role content name tool_calls tool_call_id partial").ListBody());
  Add(Route("GET", "/api/v1/sessions/{id}/messages", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_ASSIGN_OR_RETURN(const std::string ref, CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(std::vector<Message> messages, c.engine->SessionMessages(ref));
    Json out = Json::array();
    for (const Message& m : messages) out.push_back(Json::parse(MessageToJson(m)));
    return out;
  }));
  Add(Route("POST", "/api/v1/sessions/{id}/commit", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_ASSIGN_OR_RETURN(const std::string ref, CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(CommitOutcome outcome, c.engine->Commit(ref, {.wait = false}));
    metrics.Commit("accepted");
    WakeWorker();
    return WithoutDataDirInErrors(views::CommitView(id, outcome), engine_options.data_dir);
  }));
  Add(Route("GET", "/api/v1/sessions/{id}/status", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_ASSIGN_OR_RETURN(const std::string ref, CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(SessionStatus status, c.engine->GetSessionStatus(ref));
    return WithoutDataDirInErrors(views::SessionStatusView(status), engine_options.data_dir);
  }));

  // What phase 2 changed for one archive (Engine::ArchiveDiff): what Commit with wait returns in process.
  Add(Route("GET", "/api/v1/sessions/{id}/archives/{archive}/diff", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_ASSIGN_OR_RETURN(int64_t archive, PositivePathInt(c.req.path_params.at(1), "the archive number"));
    if (archive > INT32_MAX) return Status::NotFound("session " + id + " has no archive " + c.req.path_params.at(1));
    STRATA_ASSIGN_OR_RETURN(const std::string ref, CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(session::CommitDiff diff, c.engine->ArchiveDiff(ref, static_cast<int>(archive)));
    return views::CommitDiffView(diff);
  }));

  Add(Route("DELETE", "/api/v1/sessions/{id}", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_ASSIGN_OR_RETURN(bool force, c.BoolArg("force"));
    STRATA_ASSIGN_OR_RETURN(const std::string ref, CheckSession(c, id));
    STRATA_RETURN_IF_ERROR(c.engine->DeleteSession(ref, force));
    return Json{{"deleted", id}};
  }).Takes("force"));
  // Everything of the account that failed for good (Engine::Retry("")), as `strata session retry` without an
  // id: every session's failed archives and dead jobs, and the dead jobs of no session (a file's summary by the
  // model), which no other route reaches. Every user's work: the root key's.
  Add(Route("POST", "/api/v1/admin/retry", [](Call& c) -> Result<Json> {
    if (c.id.role != Role::kRoot) {
      return Status::PermissionDenied("retrying every session's work needs the root key; a user key retries its own "
                                      "session's (POST /api/v1/sessions/{id}/retry)");
    }
    STRATA_ASSIGN_OR_RETURN(int requeued, c.engine->Retry(""));
    return Json{{"requeued", requeued}};
  }));
  Add(Route("POST", "/api/v1/sessions/{id}/retry", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_ASSIGN_OR_RETURN(const std::string ref, CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(int requeued, c.engine->Retry(ref));
    WakeWorker();
    return Json{{"session", id}, {"requeued", requeued}};
  }));
  Add(Route("POST", "/api/v1/sessions/{id}/checkpoints", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_ASSIGN_OR_RETURN(const std::string ref, CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(session::CheckpointInfo checkpoint, c.engine->Checkpoint(ref));
    return views::CheckpointView(id, checkpoint);
  }));
  Add(Route("GET", "/api/v1/sessions/{id}/log", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_ASSIGN_OR_RETURN(const std::string ref, CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(session::SessionLog log, c.engine->GetSessionLog(ref));
    return views::SessionLogView(id, log);
  }));
  Add(Route("POST", "/api/v1/sessions/{id}/revert", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_ASSIGN_OR_RETURN(std::optional<int64_t> checkpoint, c.OptIntArg("checkpoint"));
    if (!checkpoint) return Status::InvalidArgument("\"checkpoint\" (a checkpoint id, 0 or more) is required");
    STRATA_RETURN_IF_ERROR(CheckCheckpointArg(*checkpoint));
    STRATA_ASSIGN_OR_RETURN(std::string tag, c.Arg("tag", false));
    STRATA_ASSIGN_OR_RETURN(const std::string ref, CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, c.engine->Revert(ref, {*checkpoint, tag}));
    return views::SessionView(info);
  }).Takes("checkpoint tag"));
  Add(Route("POST", "/api/v1/sessions/{id}/fork", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_ASSIGN_OR_RETURN(std::string new_id, c.Arg("id", false));
    STRATA_ASSIGN_OR_RETURN(std::optional<int64_t> checkpoint, c.OptIntArg("checkpoint"));
    STRATA_ASSIGN_OR_RETURN(std::string tag, c.Arg("tag", false));
    std::optional<session::CheckpointRef> at;
    if (checkpoint) {
      STRATA_RETURN_IF_ERROR(CheckCheckpointArg(*checkpoint));
      at = session::CheckpointRef{*checkpoint, tag};
    } else if (!tag.empty()) {
      return Status::InvalidArgument("\"tag\" names a checkpoint: give \"checkpoint\" with it");
    }
    STRATA_ASSIGN_OR_RETURN(const std::string ref, CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, c.engine->Fork(ref, new_id, at));
    return views::SessionView(info);
  }).Takes("id checkpoint tag"));
  Add(Route("POST", "/api/v1/sessions/{id}/system-prompt", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_ASSIGN_OR_RETURN(std::string prompt, c.Arg("prompt"));
    STRATA_ASSIGN_OR_RETURN(const std::string ref, CheckSession(c, id));
    STRATA_RETURN_IF_ERROR(c.engine->SetSystemPrompt(ref, prompt));
    return Json{{"session", id}, {"system_prompt", prompt}};
  }).Takes("prompt"));
  // A usage mark: the provider-reported tokens of the session's whole context (Engine::RecordUsage), as the
  // CLI's `session usage` and Python's record_usage write it.
  Add(Route("POST", "/api/v1/sessions/{id}/usage", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_ASSIGN_OR_RETURN(std::optional<int64_t> tokens, c.OptIntArg("tokens"));
    if (!tokens) return Status::InvalidArgument("\"tokens\" is required");
    STRATA_RETURN_IF_ERROR(CheckUsageArg(*tokens));
    STRATA_ASSIGN_OR_RETURN(const std::string ref, CheckSession(c, id));
    STRATA_RETURN_IF_ERROR(c.engine->RecordUsage(ref, *tokens));
    return Json{{"session", id}, {"tokens", *tokens}};
  }).Takes("tokens"));
  Add(Route("POST", "/api/v1/sessions/{id}/compact", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    STRATA_ASSIGN_OR_RETURN(std::string focus, c.Arg("focus", false));
    STRATA_ASSIGN_OR_RETURN(const std::string ref, CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(SessionCompaction done, c.engine->CompactSession(ref, focus));
    return views::CompactionView(done);
  }).Takes("focus"));
  Add(Route("GET", "/api/v1/sessions/{id}/context", [this](Call& c) -> Result<Json> {
    const std::string& id = c.req.path_params.at(0);
    SessionContextOptions o;
    STRATA_ASSIGN_OR_RETURN(o.max_context_tokens, c.IntArg("max_context_tokens", options.upstream_context_tokens));
    STRATA_ASSIGN_OR_RETURN(o.reserve_for_reply, c.OptIntArg("reserve_for_reply"));
    STRATA_ASSIGN_OR_RETURN(int64_t memory_limit, c.IntArg("memory_limit", static_cast<int64_t>(o.memory_limit)));
    STRATA_ASSIGN_OR_RETURN(o.memory_limit, MemoryLimitArg(memory_limit));
    STRATA_ASSIGN_OR_RETURN(o.query, c.Arg("query", false));
    STRATA_ASSIGN_OR_RETURN(std::optional<std::string> encoding, c.OptString("encoding"));
    if (encoding) o.encoding = *encoding;  // "" is refused by the Engine, as from every front end.
    if (auto prompt = c.req.Query("system_prompt")) o.system_prompt = *prompt;
    STRATA_RETURN_IF_ERROR(CheckSessionContextOptions(o));
    STRATA_ASSIGN_OR_RETURN(const std::string ref, CheckSession(c, id));
    STRATA_ASSIGN_OR_RETURN(SessionContext ctx, c.engine->AssembleSession(ref, o));
    return views::SessionContextView(id, ctx);
  }).Takes("max_context_tokens reserve_for_reply encoding query memory_limit system_prompt"));

  // ---- Background tasks (phase-2 jobs) ----
  auto task_of = [](Call& c) -> Result<session::Job> {
    STRATA_ASSIGN_OR_RETURN(int64_t task, PositivePathInt(c.req.path_params.at(0), "the task id"));
    return c.engine->Task(ReachOf(c.id), task);
  };
  // Every phase-2 job the caller may see (a user key: its own sessions'), newest first; ?session= and
  // ?state= (pending, running, done, dead) narrow it.
  Add(Route("GET", "/api/v1/tasks", [this](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string session_id, c.Arg("session", false));
    STRATA_ASSIGN_OR_RETURN(std::string state_name, c.Arg("state", false));
    STRATA_ASSIGN_OR_RETURN(int64_t limit, c.IntArg("limit", 200));
    std::optional<session::JobState> state;
    if (!state_name.empty()) {
      STRATA_ASSIGN_OR_RETURN(state, session::ParseJobState(state_name));
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<session::Job> jobs, c.engine->Tasks(ReachOf(c.id), session_id, state, limit));
    Json out = Json::array();
    for (const session::Job& job : jobs) out.push_back(views::JobView(job));
    return WithoutDataDirInErrors(std::move(out), engine_options.data_dir);
  }).Takes("session state limit"));
  Add(Route("GET", "/api/v1/tasks/{id}", [this, task_of](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(session::Job job, task_of(c));
    return WithoutDataDirInErrors(views::JobView(job), engine_options.data_dir);
  }));
  Add(Route("GET", "/api/v1/tasks/{id}/events", [this, task_of](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(session::Job first, task_of(c));
    STRATA_ASSIGN_OR_RETURN(std::shared_ptr<StreamSlot> slot, TakeStreamSlot());
    Engine* engine = c.engine;
    int64_t task = first.id;
    c.res.content_type = "text/event-stream";
    c.res.headers.emplace_back("Cache-Control", "no-cache");
    c.raw = true;
    // The key, and its right to the task, are checked again every five seconds: a stream opened with a key
    // revoked since ends (it went on for up to an hour, job views and errors included).
    auto request = std::make_shared<HttpRequest>(c.req);
    c.res.stream = [this, engine, task, slot, request](const ChunkWriter& write) {
      std::string last;
      for (int i = 0; i < 36000 && !shut_down.load(); ++i) {  // An hour at most.
        auto queue = engine->queue();
        if (!queue.ok()) break;
        auto job = (*queue)->Get(task);
        if (!job.ok() || !*job) break;
        if (i > 0 && i % 50 == 0) {
          std::optional<std::string> refused = StreamRefusal(*request, [&](const Identity& who) {
            return engine->CheckJobAccess(ReachOf(who), **job);
          });
          if (refused) {
            write(*refused);
            return;
          }
        }
        std::string state(session::JobStateName((*job)->state));
        std::string view = views::Dump(WithoutDataDirInErrors(views::JobView(**job), engine_options.data_dir));
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
  }));
}

}  // namespace strata::server
