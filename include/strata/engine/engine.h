// strata::Engine — start here. One object that owns everything Strata keeps for an agent (the context
// store, sessions, the phase-2 job queue, the memory audit log, prompt templates, tokenizers and the model
// provider) and offers every operation on it. The `strata` CLI, the HTTP and MCP servers, and any C++
// program embedding Strata hold an Engine and call the same code; none of them adds logic of its own.
//
//   auto engine = strata::Engine::Open({.data_dir = "strata-data"});          // Result<unique_ptr<Engine>>
//   (*engine)->Write("strata://resources/notes/build", "Run scripts/test before pushing.");
//   auto hits = (*engine)->Find("how do I test", {.limit = 5});               // hybrid, hierarchical
//   auto s = (*engine)->CreateSession("alice", "coder");                     // a session ...
//   (*engine)->AddMessages(s->id, {Message::User("I prefer tabs.")});        // ... its messages ...
//   (*engine)->Commit(s->id, {.wait = true});                                // ... into long-term memory
//
// What lives where under the data directory (docs/formats/): strata.db + vectors.hnsw (the context store),
// sessions/ (one directory per session), queue.db (phase-2 jobs), audit.db (every memory change),
// worker.lock (held by the process running phase 2). On PostgreSQL (data_dir = postgres://…) the same parts
// are tables in that database, and every instance runs phase 2: claims skip each other's jobs.
//
// Components open on first use, so a command that only lists sessions never loads the vector index or
// needs a model. Every entry point returns a Status or Result: errors name what is wrong and where, and no
// exception escapes (an unexpected one becomes kInternal naming the operation).
//
// Threading (docs/ARCHITECTURE.md, "Threading"):
// - One Engine serves many threads at once. Components are opened once, under a lock, on first use.
// - The context store runs reads in parallel with each other; writes to it are serialised. Embedding
//   happens before a write takes the store's lock, so no lock is held across an embedder call.
// - Session operations lock the session they touch, not all sessions. Phase 2 of two sessions runs
//   concurrently unless they share an owner: a user's (or agent's) memories are merged by one job at a time.
// - No engine lock is held across a model call.
// - Several processes may share one data directory (a CLI beside a server): SQLite waits for the write
//   lock up to busy_timeout instead of failing. Phase 2 has one owner per data directory at a time: the
//   process holding worker.lock; another process asking to run it gets kUnavailable naming the holder.
// - Long pipeline calls take a Canceller.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/engine/conversation.h"
#include "strata/engine/keys.h"
#include "strata/engine/provider_config.h"
#include "strata/engine/reach.h"
#include "strata/engine/turn.h"
#include "strata/ingest/ingest.h"
#include "strata/memory/markdown_io.h"
#include "strata/memory/retrieval.h"
#include "strata/memory/store.h"
#include "strata/message/message.h"
#include "strata/message/token_estimator.h"
#include "strata/prompt/prompt_library.h"
#include "strata/session/audit.h"
#include "strata/session/chat_export.h"
#include "strata/session/job_queue.h"
#include "strata/session/memory_pipeline.h"
#include "strata/session/session.h"
#include "strata/util/cancel.h"
#include "strata/util/status.h"

namespace strata {

struct EngineOptions {
  // Where everything is kept: a directory (SQLite and files, the embedded default), or a PostgreSQL URL
  // (postgres://… or postgresql://…): the store, sessions, queue and audit log as tables in that database,
  // shared by every Strata instance that opens it (docs/formats/postgres.md).
  std::string data_dir = "strata-data";
  // The embedder: "local[:DIM]", "openai:MODEL", "ollama:MODEL", "gemini:MODEL" (memory/embedder.h); one
  // other than the store's re-embeds every node. Empty (the default): the store's own — the local embedder of
  // its dimension, or refused (kFailedPrecondition naming the model) for a remote model — and "local" for a
  // new store: a CLI run or a second instance without --embedder never re-embeds a store served with
  // another model …
  std::string embedder;
  // … or this one, when set (tests, programs with their own).
  std::shared_ptr<memory::Embedder> embedder_instance;
  // The model for summaries, extraction and dedup (provider_config.h) …
  ProviderSettings provider;
  // … or this one, when set. Borrowed; must outlive the engine.
  llm::ChatProvider* model = nullptr;
  llm::RetryCallback on_model_retry;
  // Prompt template directories, searched before the shipped ones (an id found earlier wins): these, then
  // $STRATA_PROMPTS (unless ignore_prompt_env), then the shipped templates.
  std::vector<std::string> prompt_dirs;
  bool ignore_prompt_env = false;
  // The shipped templates; empty: found beside the program (<bin>/../share/strata/prompts, as installed
  // and as built), then $STRATA_HOME/share/strata/prompts.
  std::string shipped_prompts_dir;
  session::PipelineOptions pipeline;
  session::JobQueueOptions queue;
  // How long a writer waits for another process's lock on a database before failing with kUnavailable.
  std::chrono::milliseconds busy_timeout{10'000};
  // How long an add of documents waits for another (here or in another process, which may be embedding a
  // whole tree) before failing with kUnavailable. A model's summary of a file, once asked, waits for adds
  // without this cap (up to an hour): failing there would ask the model again on the job's retry.
  std::chrono::milliseconds ingest_wait{30'000};
  // When sessions served turn by turn (BeginTurn) are committed into long-term memory.
  CommitPolicy commit_policy;
  // Only read (--read-only): serve a data directory on a read-only volume, or one nobody may change through
  // this engine. Its databases are opened read-only (immutable where the directory cannot be written),
  // nothing is created, migrated, recovered or saved, phase 2 does not run, and every operation that would
  // change the data fails with kFailedPrecondition naming the mode. On PostgreSQL the engine refuses the
  // same operations (the connections themselves are the usual ones).
  bool read_only = false;
  // Tests only: called after CheckSessionAccess let a caller use a session, with the id as given, on the
  // caller's thread (several at once), to stage what another request may do between a front end's check
  // and its call (delete the session and make another under its id).
  std::function<void(std::string_view session)> after_session_check;
};

// Model help for one find (off by default; needs the engine's model). Without a model, find answers from
// the store alone; with one, the question can be rewritten into the searches that find its parts, and the
// best candidates ordered by how well they answer it (docs/memory.md, "Model help").
struct FindAssist {
  // The model writes up to `max_queries` searches for the question (one per fact a multi-part question
  // joins, in the words stored text likely uses); they are searched together with the question itself.
  bool rewrite = false;
  // The model orders the best `rerank_candidates` hits by how well they answer; those it names come first,
  // in its order, the others after them in their own.
  bool rerank = false;
  static constexpr size_t kMaxQueries = 8, kMinRerankCandidates = 2, kMaxRerankCandidates = 100;
  size_t max_queries = 3;         // 1-kMaxQueries.
  size_t rerank_candidates = 20;  // kMinRerankCandidates-kMaxRerankCandidates.
};

// What the model help of one find cost.
struct FindModelCost {
  int calls = 0;              // Model calls, a retry after an unusable reply included.
  int64_t input_tokens = 0;   // As the provider reported them (0 when it did not).
  int64_t output_tokens = 0;
  double ms = 0;              // Wall time spent waiting for the model.
  // Why the model's help was left out ("" when it was used): find then answered from the store alone.
  std::string error;
};

// A find for a caller: what HTTP's search/find, MCP's find and search, the agent tools and the CLI ask.
struct FindRequest {
  std::string query;
  // Below this URI only; "" (the default): everything the caller may reach, ranked together.
  std::string under;
  static constexpr size_t kMaxLimit = 1000;
  size_t limit = 10;  // 1-kMaxLimit: every front end's default and bounds (their schemas are built from these).
  // A session of the caller's: a short follow-up (under eight words, "and the second one?") is searched
  // together with the session's newest user message before it.
  std::string session;
  // > 0: only the best hits whose abstracts fit in this many tokens (counted in `encoding`, raw text).
  int64_t token_budget = 0;
  std::string encoding = "o200k_base";  // tokenizer/registry.h's names.
  Reach reach;
  // Retrieval weights and filters (memory/retrieval.h); its under, roots and limit come from the above.
  memory::FindOptions tuning;
  FindAssist assist;
};

// A find's `limit`, its model help's `max_queries` and `rerank_candidates`, and a context's `memory_limit` as a
// front end reads them (an integer of any sign), refused outside their bounds with the one message HTTP,
// Python and the engine give (MCP's and the agent tool's schemas hold the same bounds).
Result<size_t> FindLimitArg(int64_t value);
Result<size_t> MaxQueriesArg(int64_t value);
Result<size_t> RerankCandidatesArg(int64_t value);
Result<size_t> MemoryLimitArg(int64_t value);

struct FindResult {
  std::vector<memory::Hit> hits;  // Best first, each with its tokens (Hit::tokens).
  int64_t tokens = 0;             // Their sum.
  std::string searched;           // The text searched, when a session made it differ from the query.
  std::vector<std::string> queries;     // The model's searches, searched besides it (FindAssist::rewrite).
  std::optional<FindModelCost> model;   // Present when model help was asked for.
};

// A file of a Markdown tree carried in memory (Engine::ExportFiles, ImportFiles).
struct TreeFile {
  std::string path;  // Relative, "/"-separated, no "." or ".." segments.
  std::string content;
};
struct ExportedTree {
  memory::ExportReport report;
  std::vector<TreeFile> files;  // Sorted by path.
};

// What Engine::Commit did.
struct CommitOutcome {
  session::CommitTicket ticket;
  // With wait: the archive's state after phase 2 ran, and what it changed when it finished.
  std::optional<session::ArchiveState> state;
  std::optional<session::CommitDiff> diff;
  // With wait: why phase 2 did not finish (ok when it did or when not waiting). The commit itself (phase 1)
  // succeeded either way: the messages are archived and the job is queued.
  Status phase2;
};

// A session's archives and phase-2 jobs.
struct SessionStatus {
  std::string session;
  std::vector<session::ArchiveInfo> archives;
  std::vector<session::Job> jobs;
};

struct WorkReport {
  int completed = 0;
  size_t pending = 0;
  size_t dead = 0;
};

// The reply reserve when none is given: 4,096 tokens, and at most a quarter of a smaller window.
int64_t DefaultReplyReserve(int64_t window);

// What Engine::AssembleSession builds: a session's window for a budget.
struct SessionContextOptions {
  int64_t max_context_tokens = 128'000;  // The model's window.
  // Kept free for the answer; unset: DefaultReplyReserve(max_context_tokens), the same for every front end.
  std::optional<int64_t> reserve_for_reply;
  int64_t reserved_tokens = 0;           // Sent beside the messages (tool schemas and the like).
  std::optional<std::string> system_prompt;  // Default: the session's own (its log's system prompt record).
  std::vector<Message> pinned;           // Always sent, after the system prompt.
  std::vector<Message> pending;          // A new turn not yet in the session, assembled as its newest messages.
  // What to recall memories for (the owner's user scope): default the newest user message's text.
  std::string query;
  static constexpr size_t kMaxMemoryLimit = 100;
  size_t memory_limit = 5;               // 0: recall nothing; at most kMaxMemoryLimit.
  std::string encoding = "o200k_base";   // Engine::Counter's names.
};

// A revert's or fork's checkpoint id, a usage mark's token count and a context's options, refused with the
// words the Engine's own calls use. Every front end checks them before it looks for the session (HTTP's and
// MCP's access check), so a bad argument on a missing session is the argument's error everywhere, as in
// process.
Status CheckCheckpointArg(int64_t id);
Status CheckUsageArg(int64_t tokens);
Status CheckSessionContextOptions(const SessionContextOptions& options);

struct SessionContext {
  std::string system_prompt;       // As sent: the system prompt followed by the recalled memories.
  std::vector<Message> messages;   // As sent after it: pinned, the summary, the selected history.
  std::vector<memory::Hit> memories;  // Recalled for the query (those shown in the system prompt).
  int64_t window = 0;              // max_context_tokens.
  int64_t budget = 0;              // window - reserve_for_reply.
  int64_t total_tokens = 0;        // Everything sent; never over budget.
  // Exact tokens per section (together total_tokens, with `reserved`).
  struct Sections {
    int64_t system = 0, memories = 0, pinned = 0, summary = 0, history = 0, reserved = 0, reply = 0;
  } tokens;
  // The session's current messages followed by `pending`, and for each its tokens and whether it is sent.
  std::vector<Message> history;
  std::vector<int64_t> message_tokens;
  std::vector<bool> included;
  bool summary_included = false;   // The history opens with a compaction summary, and it was sent.
  std::vector<std::string> warnings;  // What was left out and why.
  std::string encoding;
};

// What Engine::CompactSession did.
struct SessionCompaction {
  session::SessionInfo session;
  std::string summary;        // "" when the model failed and old tool output was pruned instead.
  size_t compacted = 0;       // Messages folded into the summary.
  size_t kept = 0;            // Kept verbatim.
  bool pruned_fallback = false;
  std::string llm_error;      // Why the model failed (pruned_fallback).
  int64_t tokens_before = 0;  // o200k_base.
  int64_t tokens_after = 0;
};

struct CommitOptions {
  // Run this session's phase 2 now (taking the worker lock: its jobs up to this commit's, no other
  // session's) and report what it changed.
  bool wait = false;
  const Canceller* cancel = nullptr;
};

// What ImportConversations did (`strata session import`, POST /api/v1/sessions/import).
struct ChatImportReport {
  struct Imported {
    std::string session;  // The new session's id.
    std::string title;
    std::string source;   // The export's id for the conversation (SessionInfo::source).
    int64_t messages = 0;
    int archive = 0;      // The archive its commit made (`commit`); 0 when not committed.
    // The conversation had been imported before and went on since: `messages` new ones were appended to its
    // session.
    bool continued = false;
  };
  std::vector<Imported> imported;
  std::vector<std::string> unchanged;  // Sessions imported from the same conversations before.
  std::vector<session::SkippedConversation> skipped;  // The export's own, and conversations refused here.
};

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> Open(EngineOptions options);
  ~Engine();
  Engine(const Engine&) = delete;  // Owns databases, locks and threads.
  Engine& operator=(const Engine&) = delete;

  const EngineOptions& options() const;

  // ---- The context store (URIs: strata://<scope>/<path>, memory/uri.h) ----
  Status Write(std::string_view uri, std::string_view content, const memory::WriteOptions& options = {});
  Status Mkdir(std::string_view uri, const memory::WriteOptions& options = {});
  Result<std::string> Read(std::string_view uri, memory::Level level = memory::Level::kContent);
  Result<memory::Node> Stat(std::string_view uri);
  Result<std::vector<memory::Relation>> Relations(std::string_view uri);
  Result<std::vector<memory::Node>> List(std::string_view uri, const memory::ListOptions& options = {});
  // Glob and grep below `under`; "" means everything `reach` may read (for a user: its scope and the shared
  // ones, in that order).
  Result<std::vector<memory::Node>> Glob(std::string_view pattern, std::string_view under = "",
                                         const Reach& reach = {});
  Result<std::vector<memory::GrepMatch>> Grep(std::string_view needle, std::string_view under = "",
                                              bool ignore_case = false, const Reach& reach = {});
  // Hybrid, hierarchical retrieval (memory/retrieval.h) over the whole store; each hit with its tokens.
  Result<std::vector<memory::Hit>> Find(std::string_view query, const memory::FindOptions& options = {});
  // The same for a caller: its reach, a session's follow-up, a token budget (FindRequest).
  Result<FindResult> Find(const FindRequest& request);
  Result<int64_t> Remove(std::string_view uri, bool recursive);
  Status Move(std::string_view from, std::string_view to);
  Status Link(std::string_view from, std::string_view to, std::string_view reason);
  Status Unlink(std::string_view from, std::string_view to);
  Result<memory::ExportReport> Export(std::string_view uri, const std::string& dir);
  Result<memory::ImportReport> Import(const std::string& dir, std::string_view uri = "strata://resources");
  // The same with the tree in memory, never a path: what a server sends and receives. At most `max_bytes`
  // of files exported (kResourceExhausted beyond); an imported path that is not a plain relative one is
  // kInvalidArgument naming files[i].path.
  Result<ExportedTree> ExportFiles(std::string_view uri, size_t max_bytes);
  Result<memory::ImportReport> ImportFiles(std::span<const TreeFile> files, std::string_view uri);
  // Documents and code as resources (ingest/ingest.h, docs/formats/ingest.md): the files below `paths` on
  // this machine, or files carried in a request, mirrored below `uri` as directories of ordered chunks; only
  // what changed is written, files gone from the tree are removed (options.remove_missing).
  Result<ingest::AddReport> AddResources(std::span<const std::string> paths, std::string_view uri,
                                         const ingest::AddOptions& options = {}, const ingest::WalkOptions& walk = {});
  Result<ingest::AddReport> AddResourceFiles(std::span<const ingest::SourceFile> files, std::string_view uri,
                                             const ingest::AddOptions& options = {});
  Result<std::vector<std::string>> Check();
  Status Reindex();

  // ---- Skills (SKILL.md, stored under strata://agent/<agent>/skills/<name>) ----
  // Validates and stores the SKILL.md at `path` (a file, or a directory holding one); returns its URI.
  Result<std::string> AddSkill(std::string_view agent, const std::string& path);
  // The same from the SKILL.md text itself (what the HTTP and MCP servers receive).
  Result<std::string> AddSkillText(std::string_view agent, std::string_view skill_md);
  Result<std::vector<memory::Node>> ListSkills(std::string_view agent);
  // The skill as SKILL.md text.
  Result<std::string> ShowSkill(std::string_view agent, std::string_view name);

  // ---- Sessions ----
  Result<session::SessionInfo> CreateSession(std::string_view user, std::string_view agent, std::string_view id = "");
  Result<std::vector<session::SessionInfo>> ListSessions();
  Result<session::SessionInfo> GetSession(std::string_view id);
  // Appends messages in order; returns the session afterwards.
  Result<session::SessionInfo> AddMessages(std::string_view id, std::span<const Message> messages);
  Result<std::vector<Message>> SessionMessages(std::string_view id);
  // Deletes a session (session::Sessions::Delete).
  Status DeleteSession(std::string_view id, bool force = false);
  // Turns each conversation of a chat export (session/chat_export.h) into a session of `user` (and `agent`,
  // when given) with its messages, title and original times, and with `commit`, commits it (phase 2 queued).
  // Idempotent: a conversation's session id is derived from the owner and the export's id for it, so one
  // imported before is reported unchanged and not added again; an import a crash cut short is redone. A
  // conversation whose messages are refused is skipped with the reason, and the others are imported.
  Result<ChatImportReport> ImportConversations(const session::ChatExport& exported, std::string_view user,
                                               std::string_view agent = "", bool commit = false);
  // Checkpoints, revert and fork (session::Sessions has the details). A revert keeps the previous log as
  // a rotation; a fork copies the owners, system prompt and messages (up to a checkpoint) to a new session.
  // A checkpoint's id is reused after a commit, revert or compaction; pass its tag back too, and revert and
  // fork act only while that id still has the same messages before it since the last commit.
  Result<session::CheckpointInfo> Checkpoint(std::string_view id);
  Result<session::SessionInfo> Revert(std::string_view id, const session::CheckpointRef& checkpoint);
  Result<session::SessionInfo> Fork(std::string_view id, std::string_view new_id = "",
                                    const std::optional<session::CheckpointRef>& checkpoint = std::nullopt);
  // The current messages with checkpoints, usage mark, system prompt and rotations.
  Result<session::SessionLog> GetSessionLog(std::string_view id);
  Status SetSystemPrompt(std::string_view id, std::string_view prompt);
  // Records the provider-reported size of the session's whole context.
  Status RecordUsage(std::string_view id, int64_t tokens);
  // Folds the older messages into a summary with the engine's model (window/compaction.h), keeping the
  // newest turns; the previous log stays as a rotation. The folded messages reach long-term memory only
  // through the summary: commit first to extract memories from them in full.
  Result<SessionCompaction> CompactSession(std::string_view id, std::string_view focus = "",
                                           const Canceller* cancel = nullptr);
  // The window a model would be sent for this session and budget (window/assembler.h): the system prompt
  // with the owner's recalled memories, pinned messages, the compaction summary, and the newest history
  // that fits (tool groups whole), with exact tokens per section and per message.
  Result<SessionContext> AssembleSession(std::string_view id, const SessionContextOptions& options = {});
  // Phase 1 (archive + queue), then with options.wait phase 2 (see CommitOutcome).
  Result<CommitOutcome> Commit(std::string_view id, const CommitOptions& options = {});
  Result<SessionStatus> GetSessionStatus(std::string_view id);
  // What phase 2 changed for one of the session's archives (its summary, candidates and memory changes), as
  // Commit with wait reports it, for a commit whose phase 2 ran elsewhere (the server's worker). Refused
  // with kFailedPrecondition until that archive is done.
  Result<session::CommitDiff> ArchiveDiff(std::string_view id, int archive);
  // The live session a phase-2 job belongs to: the incarnation its key names (session.h, "Session
  // references"). kNotFound, as for a session that does not exist, when that session was deleted or its id
  // now names another incarnation.
  Result<session::SessionInfo> JobSession(const session::Job& job);
  // The live session whose commit made an audit entry; nullopt when the entry came from remember or
  // consolidation, or when that incarnation of the session is gone (the entry stays, linked to nothing).
  Result<std::optional<session::SessionInfo>> AuditSession(const session::AuditEntry& entry);
  // Begins a turn of session `id` (turn.h): the session (created when missing, for the caller) assembled
  // with the new messages within the window. One turn per session at a time: another is
  // kFailedPrecondition until this one is finished or released.
  Result<std::unique_ptr<Turn>> BeginTurn(std::string_view id, TurnRequest request);
  // Commits the sessions quiet for CommitPolicy::after_idle after a turn; returns how many.
  Result<int> CommitIdleSessions();
  // Runs the queued phase-2 jobs (taking the worker lock).
  Result<WorkReport> Work(const Canceller* cancel = nullptr);
  // Puts failed archives and dead jobs (of one session, or all when `id` is empty: the summaries of files
  // too) back in the queue, after whatever made them fail was fixed. Returns how many jobs were re-queued.
  Result<int> Retry(std::string_view id = "");
  // The queued work (phase-2 commits, document summaries) `reach` may see, newest first: in `state` when
  // given, of session `session`'s live incarnation when not empty (another user's session is not found), at
  // most `limit` (1 to 10,000). Every front end's task listing.
  Result<std::vector<session::Job>> Tasks(const Reach& reach, std::string_view session,
                                          std::optional<session::JobState> state, int64_t limit = 200);
  // One task by id (1 or more), when `reach` may see it; otherwise not found, as a task that does not exist.
  Result<session::Job> Task(const Reach& reach, int64_t id);

  // ---- Memories ----
  // Remembers `text` about a user or agent scope now, through dedup; `category` empty lets the model choose.
  Result<std::vector<session::MemoryChange>> Remember(std::string_view scope, std::string_view text,
                                                      std::string_view category = "",
                                                      const Canceller* cancel = nullptr);
  Result<std::vector<session::AuditEntry>> MemoryHistory(std::string_view uri);
  // The newest `limit` recorded memory changes at or below `under`, newest first.
  Result<std::vector<session::AuditEntry>> RecentMemoryChanges(std::string_view under, size_t limit);
  Result<std::vector<session::MemoryChange>> Consolidate(std::string_view under, const Canceller* cancel = nullptr);

  // ---- Who may reach what (Reach) ----
  // kPermissionDenied naming what `reach` covers, unless it may read and write `uri`.
  Status CheckAccess(const Reach& reach, std::string_view uri);
  // The session `id` exists and `reach` may use it; otherwise NoSuchSession (another user's session is not
  // even said to exist). Returns the reference of the incarnation checked (`<id>@<incarnation>`, see
  // session::SessionRef; the bare id for a session made before incarnations were kept): a front end passes
  // it, not `id`, to the calls that follow, so that a session deleted and made again under the id in between
  // (another user's, perhaps) is not found by them.
  Result<std::string> CheckSessionAccess(const Reach& reach, std::string_view id);
  // `reach` may see the phase-2 job: a job of the live incarnation of one of its sessions (JobSession).
  Status CheckJobAccess(const Reach& reach, const session::Job& job);
  // The context_ref parts of `messages` point only where `reach` may read (phase 2 links memories to them).
  Status CheckRefs(const Reach& reach, std::span<const Message> messages);
  // A user may not remove or move a scope root or kind directory as a whole.
  static Status CheckWholeScope(const Reach& reach, std::string_view uri);
  // Where a search without `under` looks for `reach`: nothing (everything) or its readable scopes.
  static std::vector<memory::Uri> ReachRoots(const Reach& reach);

  // ---- Prompts, tokens, conversations ----
  Result<std::string> RenderPrompt(std::string_view id, const prompt::Value& vars);
  // A token counter for "o200k_base", "cl100k_base" or "chars" (characters / 4); lives as long as the
  // process. A vocabulary that cannot be loaded falls back to characters / 4 and `warning` says so.
  static const MessageTokenCounter& Counter(const std::string& name, std::string* warning = nullptr);
  // Opens a conversation log with the engine's model (conversation.h).
  Result<std::unique_ptr<Conversation>> OpenConversation(const std::string& path, ConversationOptions options,
                                                         const tools::Toolset* tools = nullptr);

  // ---- The parts, for what the operations above do not cover ----
  Result<memory::ContextStore*> store();
  Result<session::Sessions*> sessions();
  Result<session::JobQueue*> queue();
  Result<session::AuditLog*> audit();
  Result<prompt::PromptLibrary*> prompts();
  Result<llm::ChatProvider*> model();
  // The config file the provider settings were resolved with.
  Result<const ConfigFile*> config();
  // API keys, kept on this engine's backend (engine/keys.h).
  Result<KeyStore*> keys();
  // An engine over another account's data, on this engine's backend: "default" is this one's data;
  // another account's is <data>/accounts/<account>, or a schema of its own on PostgreSQL. Nothing above the
  // engine needs to know which.
  Result<std::unique_ptr<Engine>> OpenAccount(std::string_view account) const;
  // Whether `account` has data on this engine's backend (its directory or schema) or an API key: what a
  // read for it may open (opening creates it).
  Result<bool> AccountExists(std::string_view account);
  // The accounts other than "default" this backend holds, sorted: those with API keys, and those with data
  // of their own (a directory under <data>/accounts/, or a schema named after the account on PostgreSQL;
  // an account whose name needed a hashed schema is known by its keys).
  Result<std::vector<std::string>> Accounts();
  // Those of Accounts() whose phase-2 queue holds a job to claim (pending, or running: its worker may have
  // died), read without opening their engines (one query each). What the server's worker opens.
  Result<std::vector<std::string>> AccountsWithWork();

  // The prompt directories in search order (the shipped ones last).
  std::vector<std::string> PromptSearchPath() const;

  struct Impl;  // Opaque.
  friend class Turn;

 private:
  explicit Engine(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Where the shipped prompt templates are: `<dir of this program>/../share/strata/prompts` when it exists,
// else $STRATA_HOME/share/strata/prompts, else "" (none found).
std::string ShippedPromptsDir();

}  // namespace strata
