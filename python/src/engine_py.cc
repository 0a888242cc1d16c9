// strata.Engine and strata.Turn: the Engine's operations under Python's names. Each method converts its
// arguments, calls one Engine function without the interpreter lock, and returns the JSON view every front
// end returns, as a record of strata.types. No logic of its own lives here.
#include <algorithm>
#include <pybind11/stl.h>

#include <chrono>
#include <cmath>
#include <limits>
#include <mutex>
#include <set>
#include <shared_mutex>

#include "bindings.h"
#include "convert.h"
#include "strata/engine/engine.h"
#include "strata/engine/turn.h"
#include "strata/engine/views.h"
#include "strata/memory/skill.h"
#include "strata/memory/uri.h"
#include "strata/prompt/value.h"

namespace strata::python {

namespace {

using views::Json;

// A turn in progress, shared by its strata.Turn and the engine that must end it before closing.
struct TurnSlot {
  std::mutex mu;
  std::unique_ptr<Turn> turn;  // Null once ended.
};

// The engine a strata.Engine holds. Calls share it (the Engine is thread-safe); close() takes it
// exclusively, ends the turns still open, and destroys it.
struct EngineHandle {
  std::shared_mutex mu;
  std::unique_ptr<Engine> engine;  // Guarded by mu; null after close().
  std::mutex turns_mu;
  std::vector<std::weak_ptr<TurnSlot>> turns;  // Guarded by turns_mu.

  // Runs `f(engine)` without the interpreter lock; kFailedPrecondition after close().
  template <typename F>
  auto Call(F&& f) -> decltype(f(std::declval<Engine&>())) {
    py::gil_scoped_release release;
    std::shared_lock lock(mu);
    if (!engine) return Status::FailedPrecondition("the engine is closed");
    return f(*engine);
  }

  void Close() {
    py::gil_scoped_release release;
    std::unique_lock lock(mu);
    std::vector<std::weak_ptr<TurnSlot>> open;
    {
      std::lock_guard turns_lock(turns_mu);
      open.swap(turns);
    }
    for (auto& weak : open) {
      if (auto slot = weak.lock()) {
        std::lock_guard slot_lock(slot->mu);
        slot->turn.reset();  // Released: the session is free, nothing is logged.
      }
    }
    engine.reset();
  }
};

std::string OptString(const std::optional<std::string>& s) { return s.value_or(""); }

// A checkpoint argument: an id (an int), or the Checkpoint that checkpoint() returned, whose tag is then
// checked unless `tag` is given.
session::CheckpointRef CheckpointArg(py::handle checkpoint, std::optional<std::string> tag) {
  if (!PyLong_Check(checkpoint.ptr()) || PyBool_Check(checkpoint.ptr())) {
    throw py::type_error("checkpoint must be an int (a checkpoint id) or what checkpoint() returned");
  }
  session::CheckpointRef ref{IntArg(checkpoint, "checkpoint"), tag.value_or("")};
  if (!tag && py::hasattr(checkpoint, "tag")) {
    py::object t = checkpoint.attr("tag");
    if (py::isinstance<py::str>(t)) ref.tag = t.cast<std::string>();
  }
  return ref;
}

memory::Level LevelArg(int64_t level) {
  Result<memory::Level> checked = memory::LevelOf(level);
  if (!checked.ok()) Raise(checked.status());
  return *checked;
}

std::vector<Json> NodeViews(const std::vector<memory::Node>& nodes) {
  std::vector<Json> out;
  out.reserve(nodes.size());
  for (const memory::Node& n : nodes) out.push_back(views::NodeView(n));
  return out;
}

std::vector<Json> AuditViews(Engine& engine, const std::vector<session::AuditEntry>& entries) {
  std::vector<Json> out;
  for (const session::AuditEntry& e : entries) {
    Result<std::optional<session::SessionInfo>> live = engine.AuditSession(e);
    out.push_back(views::AuditEntryView(e, live.ok() && live->has_value() ? (*live)->id : ""));
  }
  return out;
}

std::vector<Json> ChangeViews(const std::vector<session::MemoryChange>& changes) {
  std::vector<Json> out;
  for (const Json& c : views::ChangesView(changes)) out.push_back(c);
  return out;
}

// An option of seconds, a real number in [min, max] (as the CLI's range for it): a bool, a string, inf or
// NaN is an error naming the option (inf reached a cast to int64_t, and a lease of 1e300 s expired at once).
std::chrono::milliseconds SecondsArg(py::handle value, const char* name, double min, double max) {
  return std::chrono::milliseconds(static_cast<int64_t>(RealArg(value, name, min, max, " of seconds") * 1000));
}

// An option's flag: True or False (FlagArg; None is not a flag here).
bool BoolArg(py::handle value, const std::string& name) {
  if (value.is_none()) Raise(Status::InvalidArgument("\"" + name + "\" must be True or False, not NoneType"));
  return FlagArg(value, name.c_str(), false);
}

class PyTurn {
 public:
  PyTurn(std::shared_ptr<EngineHandle> handle, std::shared_ptr<TurnSlot> slot, std::string session, Json context)
      : handle_(std::move(handle)), slot_(std::move(slot)), session_(std::move(session)), context_(std::move(context)) {}

  const std::string& session() const { return session_; }
  py::object context() const { return Record("SessionContext", context_); }
  py::list messages() const {
    py::list out;
    for (const Json& m : context_["messages"]) {
      if (m.value("included", false)) out.append(FromJson(m["message"]));
    }
    return out;
  }
  std::string system_prompt() const { return context_.value("system_prompt", ""); }
  bool active() {
    std::lock_guard lock(slot_->mu);
    return slot_->turn != nullptr;
  }

  void Accept() {
    Check(WithTurn([](Turn& t) { return t.Accept(); }));
  }

  py::object Finish(py::handle reply, py::handle usage) {
    Message message = MessageFromPy(reply, "reply");
    std::optional<TokenUsage> u;
    if (!usage.is_none()) u = UsageFromPy(usage);
    Result<TurnOutcome> done = WithTurn([&](Turn& t) -> Result<TurnOutcome> {
      Result<TurnOutcome> r = t.Finish(message, u);
      return r;
    });
    {
      std::lock_guard lock(slot_->mu);
      slot_->turn.reset();
    }
    TurnOutcome o = Check(std::move(done));
    return Record("TurnOutcome", Json{{"committed", o.committed}, {"job_id", o.job_id},
                                      {"uncommitted_tokens", o.uncommitted_tokens},
                                      {"uncommitted_turns", o.uncommitted_turns}});
  }

  void Release() {
    py::gil_scoped_release release;
    std::lock_guard lock(slot_->mu);
    slot_->turn.reset();
  }

 private:
  // Runs `f` on the live turn without the interpreter lock, with the engine held open.
  template <typename F>
  auto WithTurn(F&& f) -> decltype(f(std::declval<Turn&>())) {
    py::gil_scoped_release release;
    std::shared_lock engine_lock(handle_->mu);
    std::lock_guard lock(slot_->mu);
    if (!handle_->engine || !slot_->turn) {
      return Status::FailedPrecondition("the turn of session " + session_ + " has ended");
    }
    return f(*slot_->turn);
  }

  static TokenUsage UsageFromPy(py::handle usage) {
    // {"input_tokens", "output_tokens"} or kosong's {"input_other", "output", "input_cache_read",
    // "input_cache_creation"}, or OpenAI's {"prompt_tokens", "completion_tokens"}.
    if (!PyDict_Check(usage.ptr())) Raise(Status::InvalidArgument("usage must be a dict of token counts"));
    py::dict d = py::reinterpret_borrow<py::dict>(usage);
    static constexpr std::string_view kKnown[] = {"input_tokens", "output_tokens", "input_other", "output",
                                                  "input_cache_read", "input_cache_creation", "prompt_tokens",
                                                  "completion_tokens", "total_tokens"};
    for (auto [key, value] : d) {
      std::string name = py::isinstance<py::str>(key) ? LossyText(key) : LossyText(py::repr(key));
      if (std::find(std::begin(kKnown), std::end(kKnown), name) == std::end(kKnown)) {
        Raise(Status::InvalidArgument("usage has an unknown member '" + name +
                                      "' (known: input_tokens, output_tokens, prompt_tokens, completion_tokens, "
                                      "input_other, output, input_cache_read, input_cache_creation)"));
      }
    }
    // Each a count (a negative one was taken, then refused by the usage mark and dropped in silence), and
    // each below 2^53 (a JSON number's exact range) so that no sum of them overflows.
    auto get = [&](const char* key) -> int64_t {
      if (!d.contains(key)) return 0;
      const std::string name = std::string("usage.") + key;
      const int64_t n = CountArg(d[key], name.c_str());
      if (n >= (int64_t{1} << 53)) {
        Raise(Status::InvalidArgument("\"" + name + "\" must be below 2^53, not " + std::to_string(n)));
      }
      return n;
    };
    TokenUsage u;
    u.input_other = get("input_other") + get("input_tokens") + get("prompt_tokens");
    u.output = get("output") + get("output_tokens") + get("completion_tokens");
    u.input_cache_read = get("input_cache_read");
    u.input_cache_creation = get("input_cache_creation");
    return u;
  }

  std::shared_ptr<EngineHandle> handle_;
  std::shared_ptr<TurnSlot> slot_;
  std::string session_;
  Json context_;
};

class PyEngine {
 public:
  explicit PyEngine(EngineOptions options) : handle_(std::make_shared<EngineHandle>()) {
    std::string data = options.data_dir;
    handle_->engine = Check(NoGil([&] { return Engine::Open(std::move(options)); }));
    data_ = data;
  }

  std::shared_ptr<EngineHandle> handle() const { return handle_; }
  const std::string& data() const { return data_; }
  void Close() { handle_->Close(); }
  bool closed() {
    std::shared_lock lock(handle_->mu);
    return handle_->engine == nullptr;
  }
  bool read_only() {
    return Check(handle_->Call([](Engine& e) -> Result<bool> { return e.options().read_only; }));
  }

  // ---- The store ----
  py::object Write(const std::string& uri, const std::string& content, std::optional<std::string> abstract,
                   std::optional<std::string> overview, std::optional<std::string> category, py::handle metadata,
                   const Flag& overwrite_arg) {
    const bool overwrite = overwrite_arg.Get("overwrite", true);
    memory::WriteOptions o;
    o.abstract_text = std::move(abstract);
    o.overview = std::move(overview);
    o.category = std::move(category);
    if (!metadata.is_none()) {
      if (!PyDict_Check(metadata.ptr())) Raise(Status::InvalidArgument("\"metadata\" must be an object (a dict)"));
      o.metadata = ToJsonText(metadata, "metadata");
    }
    o.overwrite = overwrite;
    return Record("Node", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_RETURN_IF_ERROR(e.Write(uri, content, o));
      STRATA_ASSIGN_OR_RETURN(memory::Node node, e.Stat(uri));
      return views::NodeView(node);
    })));
  }

  py::object Mkdir(const std::string& uri, std::optional<std::string> abstract, std::optional<std::string> overview,
                   const Flag& ordered_arg) {
    const bool ordered = ordered_arg.Get("ordered");
    memory::WriteOptions o;
    o.abstract_text = std::move(abstract);
    o.overview = std::move(overview);
    if (ordered) o.metadata = std::string(memory::kOrderedMetadata);
    return Record("Node", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_RETURN_IF_ERROR(e.Mkdir(uri, o));
      STRATA_ASSIGN_OR_RETURN(memory::Node node, e.Stat(uri));
      return views::NodeView(node);
    })));
  }

  std::string Read(const std::string& uri, const Int& level) {
    memory::Level l = LevelArg(level.Get("level"));
    return Check(handle_->Call([&](Engine& e) { return e.Read(uri, l); }));
  }

  // Integers arrive signed, so that a negative one is the InvalidArgumentError HTTP's Client raises (with
  // HTTP's words), not pybind's TypeError.
  py::object List(const std::string& uri, const Flag& recursive_arg, const Int& limit_arg) {
    const bool recursive = recursive_arg.Get("recursive");
    const int64_t limit = limit_arg.Get("limit");
    if (limit < 0) Raise(Status::InvalidArgument("\"limit\" must be 0 (no limit) or more, not " + std::to_string(limit)));
    bool truncated = false;  // One more is asked for, to say when the limit cut the list (as HTTP and MCP do).
    py::list listed = Records("Node", Check(handle_->Call([&](Engine& e) -> Result<std::vector<Json>> {
      const size_t want = limit > 0 ? static_cast<size_t>(limit) + 1 : 0;
      STRATA_ASSIGN_OR_RETURN(auto nodes, e.List(uri, {.recursive = recursive, .limit = want}));
      if (limit > 0 && nodes.size() > static_cast<size_t>(limit)) {
        nodes.resize(static_cast<size_t>(limit));
        truncated = true;
      }
      return NodeViews(nodes);
    })));
    return NodeList(std::move(listed), truncated);
  }

  py::object Stat(const std::string& uri) {
    return Record("NodeDetail", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(memory::Node node, e.Stat(uri));
      STRATA_ASSIGN_OR_RETURN(auto relations, e.Relations(uri));
      return views::NodeDetailView(node, relations);
    })));
  }

  int64_t Remove(const std::string& uri, const Flag& recursive_arg) {
    const bool recursive = recursive_arg.Get("recursive");
    return Check(handle_->Call([&](Engine& e) { return e.Remove(uri, recursive); }));
  }
  void Move(const std::string& from, const std::string& to) {
    Check(handle_->Call([&](Engine& e) { return e.Move(from, to); }));
  }
  void Link(const std::string& from, const std::string& to, const std::string& reason) {
    Check(handle_->Call([&](Engine& e) { return e.Link(from, to, reason); }));
  }
  void Unlink(const std::string& from, const std::string& to) {
    Check(handle_->Call([&](Engine& e) { return e.Unlink(from, to); }));
  }

  py::list Glob(const std::string& pattern, std::optional<std::string> under, std::optional<std::string> user) {
    Reach reach = ReachOf(user);
    return Records("Node", Check(handle_->Call([&](Engine& e) -> Result<std::vector<Json>> {
      STRATA_ASSIGN_OR_RETURN(auto nodes, e.Glob(pattern, OptString(under), reach));
      return NodeViews(nodes);
    })));
  }

  py::list Grep(const std::string& pattern, std::optional<std::string> under, const Flag& ignore_case_arg,
                std::optional<std::string> user) {
    const bool ignore_case = ignore_case_arg.Get("ignore_case");
    Reach reach = ReachOf(user);
    return Records("GrepMatch", Check(handle_->Call([&](Engine& e) -> Result<std::vector<Json>> {
      STRATA_ASSIGN_OR_RETURN(auto matches, e.Grep(pattern, OptString(under), ignore_case, reach));
      std::vector<Json> out;
      for (const memory::GrepMatch& m : matches) out.push_back(views::GrepMatchView(m));
      return out;
    })));
  }

  py::object Find(const std::string& query, const Int& limit_arg, std::optional<std::string> under,
                  std::optional<std::string> session, const std::optional<Int>& token_budget_arg,
                  std::optional<std::string> user, const Flag& rewrite_arg, const Flag& rerank_arg,
                  const Int& max_queries_arg, const Int& rerank_candidates_arg, std::optional<std::string> type) {
    const bool rewrite = rewrite_arg.Get("rewrite");
    const bool rerank = rerank_arg.Get("rerank");
    const int64_t limit = limit_arg.Get("limit");
    const std::optional<int64_t> token_budget =
        token_budget_arg ? std::optional<int64_t>(token_budget_arg->Get("token_budget")) : std::nullopt;
    const int64_t max_queries = max_queries_arg.Get("max_queries");
    const int64_t rerank_candidates = rerank_candidates_arg.Get("rerank_candidates");
    FindRequest request;
    request.query = query;
    request.under = OptString(under);
    request.limit = Check(FindLimitArg(limit));
    request.session = OptString(session);
    request.token_budget = token_budget.value_or(0);
    request.reach = ReachOf(user);
    request.assist = {.rewrite = rewrite, .rerank = rerank, .max_queries = Check(MaxQueriesArg(max_queries)),
                      .rerank_candidates = Check(RerankCandidatesArg(rerank_candidates))};
    if (type) request.tuning.type = Check(memory::ParseContextType(*type));
    return Record("FindResult", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(FindResult found, e.Find(request));
      return views::FindResultView(found);
    })));
  }

  py::object ExportTree(const std::string& uri, const std::string& dir) {
    memory::ExportReport r = Check(handle_->Call([&](Engine& e) { return e.Export(uri, dir); }));
    return Record("ImportReport", views::ExportReportView(r));
  }
  py::object ImportTree(const std::string& dir, const std::string& uri) {
    memory::ImportReport r = Check(handle_->Call([&](Engine& e) { return e.Import(dir, uri); }));
    return Record("ImportReport", views::ImportReportView(r));
  }

  // ---- Memories ----
  py::list Remember(const std::string& text, const std::string& scope, const std::string& category) {
    return Records("Change", Check(handle_->Call([&](Engine& e) -> Result<std::vector<Json>> {
      STRATA_ASSIGN_OR_RETURN(auto changes, e.Remember(scope, text, category));
      return ChangeViews(changes);
    })));
  }
  py::list History(const std::string& uri) {
    return Records("AuditEntry", Check(handle_->Call([&](Engine& e) -> Result<std::vector<Json>> {
      STRATA_ASSIGN_OR_RETURN(auto entries, e.MemoryHistory(uri));
      return AuditViews(e, entries);
    })));
  }
  py::list Changes(const std::string& under, const Int& limit_arg) {
    const int64_t limit = limit_arg.Get("limit");
    if (limit < 1 || limit > 1000) Raise(Status::InvalidArgument("\"limit\" must be between 1 and 1000"));
    return Records("AuditEntry", Check(handle_->Call([&](Engine& e) -> Result<std::vector<Json>> {
      STRATA_ASSIGN_OR_RETURN(auto entries, e.RecentMemoryChanges(under, static_cast<size_t>(limit)));
      return AuditViews(e, entries);
    })));
  }
  py::list Consolidate(const std::string& under) {
    return Records("Change", Check(handle_->Call([&](Engine& e) -> Result<std::vector<Json>> {
      STRATA_ASSIGN_OR_RETURN(auto changes, e.Consolidate(under));
      return ChangeViews(changes);
    })));
  }

  // ---- Sessions ----
  py::object CreateSession(const std::string& user, std::optional<std::string> id, std::optional<std::string> agent) {
    return Record("Session", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, e.CreateSession(user, OptString(agent), OptString(id)));
      return views::SessionView(info);
    })));
  }
  py::object AddResources(const std::vector<std::string>& paths, const std::string& uri, const Int& chunk_tokens_arg,
                          const Flag& remove_missing_arg, const Int& max_file_mb_arg, const Flag& summarize_arg) {
    const bool remove_missing = remove_missing_arg.Get("remove_missing", true);
    const bool summarize = summarize_arg.Get("summarize");
    const int64_t chunk_tokens = chunk_tokens_arg.Get("chunk_tokens");
    const int64_t max_file_mb = max_file_mb_arg.Get("max_file_mb");
    if (max_file_mb < 1 || max_file_mb > (int64_t{1} << 40)) {
      Raise(Status::InvalidArgument("max_file_mb must be from 1 to 2^40"));  // MiB shifted to bytes must fit.
    }
    return Record("AddReport", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(ingest::AddReport report,
                              e.AddResources(paths, uri,
                                             {.extract = {.chunk_tokens = chunk_tokens}, .remove_missing = remove_missing,
                                              .summarize = summarize},
                                             {.max_file_bytes = max_file_mb << 20}));
      return views::AddReportView(report);
    })));
  }
  py::object ImportSessions(const std::string& format_name, const std::string& content, const std::string& user,
                            std::optional<std::string> agent, const Flag& commit_arg, const std::string& name) {
    const bool commit = commit_arg.Get("commit");
    return Record("ChatImportReport", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(session::ChatExportFormat format, session::ParseChatExportFormat(format_name));
      STRATA_ASSIGN_OR_RETURN(session::ChatExport exported, session::ParseChatExport(content, format, name));
      STRATA_ASSIGN_OR_RETURN(ChatImportReport report, e.ImportConversations(exported, user, OptString(agent), commit));
      return views::ChatImportView(report);
    })));
  }
  py::object GetSession(const std::string& id, const Flag& messages_arg) {
    const bool messages = messages_arg.Get("messages");
    return Record("Session", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, e.GetSession(id));
      if (!messages) return views::SessionView(info);
      STRATA_ASSIGN_OR_RETURN(std::vector<Message> m, e.SessionMessages(id));
      return views::SessionView(info, &m);
    })));
  }
  py::list ListSessions(std::optional<std::string> user) {
    return Records("Session", Check(handle_->Call([&](Engine& e) -> Result<std::vector<Json>> {
      if (user) STRATA_RETURN_IF_ERROR(memory::ValidateScopeId(*user, "user"));
      STRATA_ASSIGN_OR_RETURN(auto sessions, e.ListSessions());
      std::vector<Json> out;
      for (const session::SessionInfo& s : sessions) {
        if (user && s.user != *user) continue;
        out.push_back(views::SessionView(s));
      }
      return out;
    })));
  }
  py::object AddMessages(const std::string& id, py::handle messages) {
    std::vector<Message> parsed = MessagesFromPy(messages, "messages");
    if (parsed.empty()) Raise(Status::InvalidArgument("no messages given"));
    return Record("Session", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, e.AddMessages(id, parsed));
      return views::SessionView(info);
    })));
  }
  py::list SessionMessages(const std::string& id) {
    return MessagesToPy(Check(handle_->Call([&](Engine& e) { return e.SessionMessages(id); })));
  }
  void DeleteSession(const std::string& id, const Flag& force_arg) {
    const bool force = force_arg.Get("force");
    Check(handle_->Call([&](Engine& e) { return e.DeleteSession(id, force); }));
  }
  py::object Checkpoint(const std::string& id) {
    return Record("Checkpoint", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(session::CheckpointInfo checkpoint, e.Checkpoint(id));
      return views::CheckpointView(id, checkpoint);
    })));
  }
  py::object Revert(const std::string& id, py::handle checkpoint, std::optional<std::string> tag) {
    session::CheckpointRef ref = CheckpointArg(checkpoint, std::move(tag));
    return Record("Session", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, e.Revert(id, ref));
      return views::SessionView(info);
    })));
  }
  py::object Fork(const std::string& id, std::optional<std::string> new_id, py::handle checkpoint,
                  std::optional<std::string> tag) {
    std::optional<session::CheckpointRef> at;
    if (!checkpoint.is_none()) {
      at = CheckpointArg(checkpoint, std::move(tag));
    } else if (tag) {
      Raise(Status::InvalidArgument("tag names a checkpoint: give checkpoint with it"));
    }
    return Record("Session", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, e.Fork(id, OptString(new_id), at));
      return views::SessionView(info);
    })));
  }
  py::object SessionLog(const std::string& id) {
    return Record("SessionLog", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(session::SessionLog log, e.GetSessionLog(id));
      return views::SessionLogView(id, log);
    })));
  }
  void SetSystemPrompt(const std::string& id, const std::string& prompt) {
    Check(handle_->Call([&](Engine& e) { return e.SetSystemPrompt(id, prompt); }));
  }
  void RecordUsage(const std::string& id, const Int& tokens) {
    const int64_t n = tokens.Get("tokens");
    Check(handle_->Call([&](Engine& e) { return e.RecordUsage(id, n); }));
  }
  py::object Context(const std::string& id, const Int& max_context_tokens, const std::optional<Int>& reserve_for_reply,
                     const Int& memory_limit, std::optional<std::string> query, std::optional<std::string> system_prompt,
                     const std::string& encoding) {
    SessionContextOptions o;
    o.max_context_tokens = max_context_tokens.Get("max_context_tokens");
    if (reserve_for_reply) o.reserve_for_reply = reserve_for_reply->Get("reserve_for_reply");
    o.memory_limit = Check(MemoryLimitArg(memory_limit.Get("memory_limit")));
    o.query = OptString(query);
    o.system_prompt = std::move(system_prompt);
    o.encoding = encoding;
    return Record("SessionContext", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(SessionContext ctx, e.AssembleSession(id, o));
      return views::SessionContextView(id, ctx);
    })));
  }
  py::object Commit(const std::string& id, const Flag& wait_arg) {
    const bool wait = wait_arg.Get("wait");
    return Record("CommitOutcome", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(CommitOutcome outcome, e.Commit(id, {.wait = wait}));
      return views::CommitView(id, outcome);
    })));
  }
  py::object Compact(const std::string& id, const std::string& focus) {
    return Record("Compaction", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(SessionCompaction done, e.CompactSession(id, focus));
      return views::CompactionView(done);
    })));
  }
  py::object ArchiveDiff(const std::string& id, const Int& archive_arg) {
    const int64_t archive64 = archive_arg.Get("archive");
    // HTTP's words for the same path segment.
    if (archive64 <= 0) {
      Raise(Status::InvalidArgument("the archive number \"" + std::to_string(archive64) + "\" is not a positive integer"));
    }
    if (archive64 > std::numeric_limits<int>::max()) {
      Raise(Status::NotFound("session " + id + " has no archive " + std::to_string(archive64)));
    }
    const int archive = static_cast<int>(archive64);
    return Record("CommitDiff", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(session::CommitDiff diff, e.ArchiveDiff(id, archive));
      return views::CommitDiffView(diff);
    })));
  }
  py::object SessionStatus(const std::string& id) {
    return Record("SessionStatus", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(strata::SessionStatus status, e.GetSessionStatus(id));
      return views::SessionStatusView(status);
    })));
  }
  int Retry(const std::string& id) {
    return Check(handle_->Call([&](Engine& e) { return e.Retry(id); }));
  }
  py::object Work() {
    return Record("WorkReport", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(WorkReport r, e.Work());
      return Json{{"completed", r.completed}, {"dead", r.dead}, {"pending", r.pending}};
    })));
  }
  py::object Task(const Int& id_arg, std::optional<std::string> user) {
    const int64_t id = id_arg.Get("task_id");
    Reach reach = ReachOf(user);
    return Record("Task", Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(session::Job job, e.Task(reach, id));
      return views::JobView(job);
    })));
  }

  py::list Tasks(std::optional<std::string> session_id, std::optional<std::string> state_name, const Int& limit_arg,
                 std::optional<std::string> user) {
    const int64_t limit = limit_arg.Get("limit");
    Reach reach = ReachOf(user);
    return Records("Task", Check(handle_->Call([&](Engine& e) -> Result<std::vector<Json>> {
      std::optional<session::JobState> state;
      if (state_name && !state_name->empty()) {
        STRATA_ASSIGN_OR_RETURN(state, session::ParseJobState(*state_name));
      }
      STRATA_ASSIGN_OR_RETURN(std::vector<session::Job> jobs, e.Tasks(reach, session_id.value_or(""), state, limit));
      std::vector<Json> out;
      for (const session::Job& job : jobs) out.push_back(views::JobView(job));
      return out;
    })));
  }

  // ---- The memory-managed turn ----
  PyTurn BeginTurn(const std::string& session, py::handle messages, std::optional<std::string> system,
                   const Int& max_context_tokens, const std::optional<Int>& reserve_for_reply, const Int& reserved_tokens,
                   const Int& memory_limit,
                   const std::string& encoding, std::optional<std::string> user, std::optional<std::string> agent,
                   const Flag& create_arg) {
    const bool create = create_arg.Get("create", true);
    TurnRequest request;
    request.turn = MessagesFromPy(messages, "messages");
    request.system = OptString(system);
    request.max_context_tokens = max_context_tokens.Get("max_context_tokens");
    if (reserve_for_reply) request.reserve_for_reply = reserve_for_reply->Get("reserve_for_reply");
    request.reserved_tokens = reserved_tokens.Get("reserved_tokens");
    request.memory_limit = Check(MemoryLimitArg(memory_limit.Get("memory_limit")));
    request.encoding = encoding;
    request.reach = ReachOf(user);
    request.user = OptString(user);
    request.agent = OptString(agent);
    request.create = create;
    auto slot = std::make_shared<TurnSlot>();
    Json context = Check(handle_->Call([&](Engine& e) -> Result<Json> {
      STRATA_ASSIGN_OR_RETURN(slot->turn, e.BeginTurn(session, std::move(request)));
      return views::SessionContextView(session, slot->turn->context());
    }));
    {
      std::lock_guard lock(handle_->turns_mu);
      std::erase_if(handle_->turns, [](const std::weak_ptr<TurnSlot>& w) { return w.expired(); });
      handle_->turns.push_back(slot);
    }
    return PyTurn(handle_, slot, session, std::move(context));
  }
  // The same work as find() or write() done `n` times in C++ with no Python in between (arguments
  // converted once, the JSON view built, no record made): bench/python_bench.py's baseline. Returns
  // nanoseconds per call.
  double CppLoop(const std::string& op, const std::string& arg, const std::string& content, int n) {
    if (n < 1 || (op != "find" && op != "write")) Raise(Status::InvalidArgument("_cpp_loop: op is find or write, n > 0"));
    return Check(handle_->Call([&](Engine& e) -> Result<double> {
      auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < n; ++i) {
        if (op == "find") {
          STRATA_ASSIGN_OR_RETURN(FindResult found, e.Find(FindRequest{.query = arg}));
          Json view = views::FindResultView(found);
        } else {
          std::string uri = arg + std::to_string(i);
          STRATA_RETURN_IF_ERROR(e.Write(uri, content));
          STRATA_ASSIGN_OR_RETURN(memory::Node node, e.Stat(uri));
          Json view = views::NodeView(node);
        }
      }
      return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / n;
    }));
  }

  int CommitIdleSessions() {
    return Check(handle_->Call([](Engine& e) { return e.CommitIdleSessions(); }));
  }

  // ---- Skills and prompts ----
  std::string AddSkill(const std::string& agent, const std::string& path_or_text) {
    // A path is one line naming a file (ending in .md, or holding a '/'); anything else is SKILL.md's text,
    // refused for what is wrong with it exactly as Client.add_skill (HTTP) refuses it ("no front matter"
    // was a missing file here and a missing front matter there).
    const std::string_view s = path_or_text;
    bool text = s.find('\n') != std::string_view::npos || (!s.ends_with(".md") && s.find('/') == std::string_view::npos);
    return Check(handle_->Call([&](Engine& e) {
      return text ? e.AddSkillText(agent, path_or_text) : e.AddSkill(agent, path_or_text);
    }));
  }
  py::list ListSkills(const std::string& agent) {
    return Records("Node", Check(handle_->Call([&](Engine& e) -> Result<std::vector<Json>> {
      STRATA_ASSIGN_OR_RETURN(auto nodes, e.ListSkills(agent));
      return NodeViews(nodes);
    })));
  }
  std::string ShowSkill(const std::string& agent, const std::string& name) {
    return Check(handle_->Call([&](Engine& e) { return e.ShowSkill(agent, name); }));
  }
  std::string RenderPrompt(const std::string& id, py::handle variables, py::kwargs kwargs) {
    py::dict vars;
    if (!variables.is_none()) {
      if (!PyDict_Check(variables.ptr())) Raise(Status::InvalidArgument("variables must be a dict"));
      vars = py::reinterpret_borrow<py::dict>(variables);
      vars = vars.attr("copy")();
    }
    for (auto [k, v] : kwargs) vars[k] = v;
    prompt::Value value = Check(prompt::Value::FromJson(ToJsonText(vars, "variables")));
    return Check(handle_->Call([&](Engine& e) { return e.RenderPrompt(id, value); }));
  }

 private:
  // None: everything. A user id is checked as every other front end checks it: "" reached everyone's data,
  // and "alice/memories" or "." a scope no user has.
  static Reach ReachOf(const std::optional<std::string>& user) {
    if (!user) return Reach::Everything();
    Check(memory::ValidateScopeId(*user, "user"));
    return Reach::User(*user);
  }

  std::shared_ptr<EngineHandle> handle_;
  std::string data_;
};

EngineOptions OptionsFrom(const std::string& data, const std::string& embedder, py::dict kw) {
  EngineOptions o;
  o.data_dir = data;
  o.embedder = embedder;
  for (auto [key, value] : kw) {
    std::string k = py::str(key);
    auto str = [&]() {
      if (!PyUnicode_Check(value.ptr())) Raise(Status::InvalidArgument(k + " must be a string"));
      return value.cast<std::string>();
    };
    if (k == "provider") o.provider.provider = str();
    else if (k == "model") o.provider.model = str();
    else if (k == "base_url") o.provider.base_url = str();
    else if (k == "api_key_env") o.provider.api_key_env = str();
    else if (k == "provider_options") o.provider.options = PyUnicode_Check(value.ptr()) ? str() : ToJsonText(value, "provider_options");
    else if (k == "config_file") o.provider.config_file = str();
    else if (k == "script") o.provider.script = str();
    else if (k == "record") o.provider.record = str();
    else if (k == "replay") o.provider.replay = str();
    else if (k == "read_only") o.read_only = BoolArg(value, k);
    else if (k == "prompt_dirs") {
      if (PyUnicode_Check(value.ptr()) || !py::isinstance<py::sequence>(value)) {
        Raise(Status::InvalidArgument("\"prompt_dirs\" must be a list of directories, not " +
                                      TypeName(value)));
      }
      o.prompt_dirs.clear();
      for (py::handle dir : value) {
        if (!PyUnicode_Check(dir.ptr())) Raise(Status::InvalidArgument("\"prompt_dirs\" must hold strings"));
        o.prompt_dirs.push_back(dir.cast<std::string>());
      }
    }
    else if (k == "ignore_prompt_env") o.ignore_prompt_env = BoolArg(value, k);
    else if (k == "shipped_prompts_dir") o.shipped_prompts_dir = str();
    else if (k == "busy_timeout") o.busy_timeout = SecondsArg(value, "busy_timeout", 0, 86'400);
    else if (k == "commit_after_tokens") o.commit_policy.after_tokens = CountArg(value, "commit_after_tokens");
    else if (k == "commit_after_turns") o.commit_policy.after_turns = CountArg(value, "commit_after_turns");
    else if (k == "commit_after_idle") o.commit_policy.after_idle = SecondsArg(value, "commit_after_idle", 0, 1e12);
    else if (k == "job_lease") o.queue.lease = SecondsArg(value, "job_lease", 1, 86'400);
    else Raise(Status::InvalidArgument("Engine.open() got an unknown option " + k));
  }
  if (o.shipped_prompts_dir.empty()) {
    // The templates installed with the package (pip copies them beside this module).
    py::module_ os_path = py::module_::import("os.path");
    py::object dir = os_path.attr("join")(os_path.attr("dirname")(py::module_::import("strata").attr("__file__")), "prompts");
    if (os_path.attr("isdir")(dir).cast<bool>()) o.shipped_prompts_dir = dir.cast<std::string>();
  }
  return o;
}

}  // namespace

void BindEngine(py::module_& m) {
  py::class_<PyTurn>(m, "Turn", R"doc(
A session's turn in progress (Engine.begin_turn): what to send to the model, within its window.

Use it as a context manager, or call finish() or release() yourself::

    with engine.begin_turn("chat-1", {"role": "user", "content": "And the second one?"}) as turn:
        reply = my_model(turn.system_prompt, turn.messages)   # any model
        turn.accept()                                          # the model took the request
        outcome = turn.finish(reply, usage={"input_tokens": 900, "output_tokens": 40})

A turn the model refused is released without accept(): nothing is logged and it can be sent again.
)doc")
      .def_property_readonly("session", &PyTurn::session, "The session's id.")
      .def_property_readonly("context", &PyTurn::context,
                             "The assembled window (SessionContext): system prompt with recalled memories, messages "
                             "with their tokens, sections, budget and warnings.")
      .def_property_readonly("messages", &PyTurn::messages, "The messages to send, oldest first, the new turn last.")
      .def_property_readonly("system_prompt", &PyTurn::system_prompt,
                             "The system prompt to send, with the memories recalled for this turn.")
      .def_property_readonly("active", &PyTurn::active, "Whether the turn is still open.")
      .def("accept", &PyTurn::Accept, "The model accepted the request: the new messages join the session (once).")
      .def("finish", &PyTurn::Finish, py::arg("reply"), py::arg("usage") = py::none(), R"doc(
Logs the model's reply (a message dict) and its usage, commits the session when the engine's commit policy
says so, and ends the turn. Returns a TurnOutcome (committed, job_id, uncommitted_tokens, uncommitted_turns).
usage: {"input_tokens", "output_tokens"} (or OpenAI's prompt/completion_tokens, or kosong's names).
)doc")
      .def("release", &PyTurn::Release, "Ends the turn without a reply; the session is free again. Idempotent.")
      .def("__enter__", [](PyTurn& t) -> PyTurn& { return t; }, py::return_value_policy::reference)
      .def("__exit__", [](PyTurn& t, py::handle, py::handle, py::handle) { t.Release(); });

  py::class_<PyEngine>(m, "Engine", R"doc(
Strata's engine over one data directory (SQLite and files) or a PostgreSQL database: the store of
URI-addressed memories, resources and skills, sessions and their commits into long-term memory, find,
and the memory-managed turn. Thread-safe: share one Engine between threads.

    engine = strata.Engine.open("strata-data")
    engine.write("strata://resources/notes/build", "Run scripts/test before pushing.")
    for hit in engine.find("how do I test"):
        print(hit.uri, hit.score, hit.abstract)

Every failure raises a strata.StrataError subclass (NotFoundError, InvalidArgumentError, ...).
)doc")
      .def(py::init([](const std::string& data, const std::string& embedder, py::kwargs kw) {
             return std::make_unique<PyEngine>(OptionsFrom(data, embedder, kw));
           }),
           py::arg("data") = "strata-data", py::kw_only(), py::arg("embedder") = "")
      .def_static(
          "open",
          [](const std::string& data, const std::string& embedder, py::kwargs kw) {
            return std::make_unique<PyEngine>(OptionsFrom(data, embedder, kw));
          },
          py::arg("data") = "strata-data", py::kw_only(), py::arg("embedder") = "", R"doc(
Opens the engine over `data`: a directory (created if missing; SQLite and files) or a PostgreSQL URL
(postgresql://...). Options (keywords):

embedder: "local[:DIM]" (no network), "openai:MODEL", "ollama:MODEL", "gemini:MODEL"; one other than the
    store's re-embeds every node. Default: the store's own (a remote model must be named), "local" for a new store.
provider, model, base_url, api_key_env, provider_options (dict), config_file, script, record, replay:
    the model for summaries, memory extraction and dedup (as the CLI's --provider flags).
read_only: only read; every change raises FailedPreconditionError.
commit_after_tokens, commit_after_turns, commit_after_idle (seconds): the commit policy of begin_turn.
busy_timeout (seconds), job_lease (seconds), prompt_dirs (list), ignore_prompt_env.
)doc")
      .def_property_readonly("data", &PyEngine::data, "The data directory or database URL.")
      .def_property_readonly("closed", &PyEngine::closed)
      .def_property_readonly("read_only", &PyEngine::read_only)
      .def("close", &PyEngine::Close,
           "Closes the engine (open turns are released). Later calls raise FailedPreconditionError.")
      .def("__enter__", [](PyEngine& e) -> PyEngine& { return e; }, py::return_value_policy::reference)
      .def("__exit__", [](PyEngine& e, py::handle, py::handle, py::handle) { e.Close(); })
      // The store.
      .def("write", &PyEngine::Write, py::arg("uri"), py::arg("content"), py::kw_only(),
           py::arg("abstract") = py::none(), py::arg("overview") = py::none(), py::arg("category") = py::none(),
           py::arg("metadata") = py::none(), py::arg("overwrite") = true, R"doc(
Writes a leaf at `uri` (parents created), its layers derived from the content unless given:
abstract (L0, one line), overview (L1, a paragraph); content is L2. Returns the Node.
overwrite=False raises AlreadyExistsError when the leaf exists.
)doc")
      .def("mkdir", &PyEngine::Mkdir, py::arg("uri"), py::kw_only(), py::arg("abstract") = py::none(),
           py::arg("overview") = py::none(), py::arg("ordered") = false,
           "Creates a directory (and its parents). ordered=True marks its children as a sequence (a conversation, "
           "a document's chunks): find then counts neighbours as evidence.")
      .def("read", &PyEngine::Read, py::arg("uri"), py::arg("level") = 2,
           "The text of one layer of `uri`: 0 abstract, 1 overview, 2 content (default).")
      .def("ls", &PyEngine::List, py::arg("uri") = "strata://", py::kw_only(), py::arg("recursive") = false,
           py::arg("limit") = 0, "The children of `uri` (list of Node); recursive for the whole subtree.")
      .def("tree", [](PyEngine& e, const std::string& uri, const Int& limit) { return e.List(uri, Flag{py::bool_(true)}, limit); },
           py::arg("uri") = "strata://", py::kw_only(), py::arg("limit") = 0, "The whole subtree below `uri`.")
      .def("stat", &PyEngine::Stat, py::arg("uri"), "A NodeDetail: the node, its overview, metadata and relations.")
      .def("rm", &PyEngine::Remove, py::arg("uri"), py::kw_only(), py::arg("recursive") = false,
           "Removes `uri` (a directory's subtree with recursive=True); returns the number of nodes removed.")
      .def("mv", &PyEngine::Move, py::arg("src"), py::arg("dst"), "Moves a node or subtree.")
      .def("link", &PyEngine::Link, py::arg("src"), py::arg("dst"), py::arg("reason") = "", "Relates two nodes.")
      .def("unlink", &PyEngine::Unlink, py::arg("src"), py::arg("dst"))
      .def("glob", &PyEngine::Glob, py::arg("pattern"), py::arg("under") = py::none(), py::kw_only(),
           py::arg("user") = py::none(),
           "Nodes whose path below `under` matches `pattern` (*, **, ?, [abc]). Without `under`: everything the "
           "caller may read (with `user`, that user's reach).")
      .def("grep", &PyEngine::Grep, py::arg("pattern"), py::arg("under") = py::none(), py::kw_only(),
           py::arg("ignore_case") = false, py::arg("user") = py::none(), "Lines containing `pattern` (list of GrepMatch).")
      .def("find", &PyEngine::Find, py::arg("query"), py::arg("limit") = FindRequest{}.limit, py::arg("under") = py::none(),
           py::arg("session") = py::none(), py::arg("token_budget") = py::none(), py::kw_only(),
           py::arg("user") = py::none(), py::arg("rewrite") = false, py::arg("rerank") = false,
           py::arg("max_queries") = FindAssist{}.max_queries, py::arg("rerank_candidates") = FindAssist{}.rerank_candidates,
           py::arg("type") = py::none(), R"doc(
Hybrid (full text + vector), hierarchical retrieval. Returns a FindResult: iterate it for Hits (uri,
score, abstract, reason, tokens), best first.

under: search below this URI only (default: everything the caller may read, ranked together).
session: a session whose newest request is searched with a short follow-up ("and the second one?").
token_budget: stop adding hits once their tokens would pass it.
type: "resource", "memory" or "skill": only nodes of that type (default: all).
user: search as that user (their scope, the account's agents and shared resources); default: everything.
rewrite, rerank: let the engine's model rewrite the question into searches for its parts, and order the
  best rerank_candidates hits; the result's `queries` and `model` (calls, tokens, ms, error) show it.
)doc")
      .def("export_tree", &PyEngine::ExportTree, py::arg("uri"), py::arg("dir"),
           "Writes the subtree at `uri` to `dir` as Markdown files.")
      .def("import_tree", &PyEngine::ImportTree, py::arg("dir"), py::arg("uri") = "strata://resources",
           "Reads a directory of Markdown files into the store below `uri`.")
      // Memories.
      .def("remember", &PyEngine::Remember, py::arg("text"), py::arg("scope"),
           py::kw_only(), py::arg("category") = "",
           "Extracts memories from `text` into `scope` with the engine's model, deduplicated against what is "
           "there. Returns the changes (list of Change).")
      .def("history", &PyEngine::History, py::arg("uri"), "A memory's history (list of AuditEntry), oldest first.")
      .def("changes", &PyEngine::Changes, py::arg("under") = "strata://", py::arg("limit") = 50,
           "The newest memory changes at or below `under`, newest first.")
      .def("consolidate", &PyEngine::Consolidate, py::arg("under"),
           "Merges duplicate memories below `under` with the engine's model.")
      // Sessions.
      .def("add_resources", &PyEngine::AddResources, py::arg("paths"), py::arg("uri"), py::kw_only(),
           py::arg("chunk_tokens") = 512, py::arg("remove_missing") = true, py::arg("max_file_mb") = 20,
           py::arg("summarize") = false,
           "Files and directories on this machine as resources below `uri` (docs, PDFs, HTML, code: chunked); "
           "only what changed is written (AddReport).")
      .def("import_sessions", &PyEngine::ImportSessions, py::arg("format"), py::arg("content"), py::arg("user"),
           py::kw_only(), py::arg("agent") = py::none(), py::arg("commit") = false, py::arg("name") = "export",
           "A chat export's text (format chatgpt, claude, kimi or openai-jsonl) as sessions of `user`, each with "
           "its title and original times; importing it again adds nothing (ChatImportReport).")
      .def("create_session", &PyEngine::CreateSession, py::arg("user") = "", py::arg("session_id") = py::none(),
           py::arg("agent") = py::none(), "Creates a session (a new id unless given). Returns the Session.")
      .def("get_session", &PyEngine::GetSession, py::arg("session_id"), py::kw_only(), py::arg("messages") = false)
      .def("list_sessions", &PyEngine::ListSessions, py::kw_only(), py::arg("user") = py::none())
      .def("add_messages", &PyEngine::AddMessages, py::arg("session_id"), py::arg("messages"),
           "Appends messages (dicts in OpenAI/kosong shape, or one dict) to a session.")
      .def("messages", &PyEngine::SessionMessages, py::arg("session_id"), "A session's current (uncommitted) messages.")
      .def("delete_session", &PyEngine::DeleteSession, py::arg("session_id"), py::kw_only(), py::arg("force") = false,
           "Deletes a session and retires its pending work (force: even with uncommitted messages).")
      .def("checkpoint", &PyEngine::Checkpoint, py::arg("session_id"))
      .def("revert", &PyEngine::Revert, py::arg("session_id"), py::arg("checkpoint"), py::arg("tag") = py::none())
      .def("fork", &PyEngine::Fork, py::arg("session_id"), py::arg("new_id") = py::none(),
           py::arg("checkpoint") = py::none(), py::arg("tag") = py::none())
      .def("session_log", &PyEngine::SessionLog, py::arg("session_id"))
      .def("set_system_prompt", &PyEngine::SetSystemPrompt, py::arg("session_id"), py::arg("prompt"))
      .def("record_usage", &PyEngine::RecordUsage, py::arg("session_id"), py::arg("tokens"),
           "Records the provider-reported size of the session's context.")
      .def("context", &PyEngine::Context, py::arg("session_id"), py::kw_only(),
           py::arg("max_context_tokens") = SessionContextOptions{}.max_context_tokens, py::arg("reserve_for_reply") = py::none(),
           py::arg("memory_limit") = SessionContextOptions{}.memory_limit, py::arg("query") = py::none(), py::arg("system_prompt") = py::none(),
           py::arg("encoding") = SessionContextOptions{}.encoding,
           "The session's window as it would be sent (SessionContext), with recalled memories and tokens per section.")
      .def("commit", &PyEngine::Commit, py::arg("session_id"), py::kw_only(), py::arg("wait") = false, R"doc(
Archives the session's messages and queues phase 2 (summary, memory extraction, dedup). With wait=True,
phase 2 runs now and the outcome has its state and diff (or an error when it did not finish).
)doc")
      .def("session_status", &PyEngine::SessionStatus, py::arg("session_id"),
           "The session's archives and their phase-2 tasks (SessionStatus).")
      .def("compact", &PyEngine::Compact, py::arg("session_id"), py::kw_only(), py::arg("focus") = "",
           "Folds the session's older messages into a summary with the model, keeping the newest turns (Compaction).")
      .def("archive_diff", &PyEngine::ArchiveDiff, py::arg("session_id"), py::arg("archive"),
           "What phase 2 changed for one of the session's archives (CommitDiff); FailedPreconditionError until it is done.")
      .def("retry", &PyEngine::Retry, py::arg("session_id") = "",
           "Requeues failed phase-2 work (of one session, or all); returns how many tasks.")
      .def("work", &PyEngine::Work, "Runs pending phase-2 work now (WorkReport).")
      .def("task", &PyEngine::Task, py::arg("task_id"), py::kw_only(), py::arg("user") = py::none(),
           "A phase-2 task by id (Task); with `user`, only one of that user's sessions.")
      .def("tasks", &PyEngine::Tasks, py::kw_only(), py::arg("session") = py::none(), py::arg("state") = py::none(),
           py::arg("limit") = 200, py::arg("user") = py::none(),
           "Queued work, newest first (list of Task): of one session, in one state, at most `limit` (1 to 10,000).")
      .def("begin_turn", &PyEngine::BeginTurn, py::arg("session_id"), py::arg("messages"), py::kw_only(),
           py::arg("system") = py::none(), py::arg("max_context_tokens") = SessionContextOptions{}.max_context_tokens,
           py::arg("reserve_for_reply") = py::none(), py::arg("reserved_tokens") = 0, py::arg("memory_limit") = SessionContextOptions{}.memory_limit,
           py::arg("encoding") = SessionContextOptions{}.encoding, py::arg("user") = py::none(), py::arg("agent") = py::none(),
           py::arg("create") = true, R"doc(
Begins a memory-managed turn of a session (created when new): the session's history plus `messages`,
assembled within the window with the memories recalled for it. One turn per session at a time
(FailedPreconditionError otherwise). Returns a Turn; see its help.
)doc")
      .def("_cpp_loop", &PyEngine::CppLoop, py::arg("op"), py::arg("arg"), py::arg("content") = "", py::arg("n") = 1)
      .def("commit_idle_sessions", &PyEngine::CommitIdleSessions,
           "Commits the sessions idle for the commit policy's idle time after a turn; returns how many.")
      // Skills and prompts.
      .def("add_skill", &PyEngine::AddSkill, py::arg("agent"), py::arg("skill"),
           "Adds a skill from SKILL.md's text, or from a path to one (one line ending in .md or holding a '/'); "
           "returns its URI.")
      .def("list_skills", &PyEngine::ListSkills, py::arg("agent"))
      .def("show_skill", &PyEngine::ShowSkill, py::arg("agent"), py::arg("name"))
      .def("render_prompt", &PyEngine::RenderPrompt, py::arg("id"), py::arg("variables") = py::none(),
           "Renders a prompt template (YAML + Jinja2) with `variables` and keyword arguments.");
}

}  // namespace strata::python
