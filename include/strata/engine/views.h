// One JSON view per public type: what the CLI prints and what the server returns, built in one place so
// the two can never disagree. Each function turns a library value into a JSON object (members in a fixed
// order); none reads anything but its arguments.
//
//   NodeView          {"uri","is_dir","type","category","abstract","size","created_ms","updated_ms"} plus
//                     "superseded": true for a memory that a newer one replaced (metadata "valid_to")
//   NodeDetailView    NodeView + "overview", "metadata" (object), "relations": [{"from","to","reason"}]
//   HitView           {"uri","level","score","abstract","reason","tokens"}
//   FindResultView    {"hits":[HitView],"tokens","searched"?,"queries"?,"model"?}: Engine::Find for a caller, as
//                     every front end returns it; "model" {"calls","input_tokens","output_tokens","ms","error"?}
//                     when model help was asked for (FindAssist)
//   GrepMatchView     {"uri","line","text","superseded"}
//   SessionView       {"abstract","agent","contexts","created_ms","id",["messages",]"overview","source"?,
//                     "stats":{...},"title"?,"updated_ms","user"}: "source" and "title" for an imported one
//   ArchiveView       {"archive","error"?,"messages","notes"?,"state"}
//   SessionStatusView {"archives":[ArchiveView],"jobs":[JobView],"session"}
//   CommitView        {"archive","diff"?,"error"?,"messages","session","state"?,"task_id"}: "diff" and "state"
//                     when phase 2 ran in the call (wait), "error" when it did not finish
//   ChatImportView    {"imported":[{"archive"?,"messages","session","source","title"}],"unchanged":[id],
//                     "skipped":[{"reason","where"}]}: a chat export's import (Engine::ImportConversations)
//   AddReportView     {"added","updated","unchanged","removed":[path],"skipped":[{"path","reason"}],"chunks",
//                     "bytes","queued"}: documents and code added as resources (Engine::AddResources)
//   ImportReportView  {"directories","leaves","relations","skipped":[{"path","reason"}]}: a Markdown tree
//                     imported (Engine::Import, Engine::ImportFiles); an export's report without "skipped"
//   JobView           {"attempts","created_ms","id","key","kind","last_error"?,"not_before_ms"?,"payload",
//                     "session"?,"state","updated_ms"}
//   AuditEntryView    {"action","after","at_ms","before","reason","session","source","uri"}: "session" the live
//                     session the entry came from (Engine::AuditSession; "" for none), which the caller looks up
//   CompactionView    {"compacted","kept","llm_error"?,"pruned_fallback","session":SessionView,"summary",
//                     "tokens_after","tokens_before"}: Engine::CompactSession
//   ChangesView       [{"action","reason","uri"}]
//   SessionContextView  a session's assembled window: {"session","encoding","window","budget","total_tokens",
//                     "sections":{...},"system_prompt","memories","summary_included","messages":[{"index",
//                     "tokens","included","message"}],"warnings"}
//   CheckpointView    {"session","checkpoint","messages","tag"}: Engine::Checkpoint (pass the tag back to revert
//                     or fork at this checkpoint only)
//   SessionLogView    {"session","system_prompt","messages","checkpoints":[{"id","messages","tag"}],
//                     "usage_tokens","usage_marks","summary","rotations","damage"}
//   AssemblyJson      the assembled window as `strata window assemble` prints it (a string, byte-exact)
#pragma once

#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "strata/ingest/ingest.h"
#include "strata/memory/retrieval.h"
#include "strata/memory/store.h"
#include "strata/message/message.h"
#include "strata/session/audit.h"
#include "strata/session/job_queue.h"
#include "strata/session/memory_pipeline.h"
#include "strata/session/session.h"
#include "strata/window/assembler.h"

namespace strata {
struct SessionContext;
struct FindResult;
struct FindRequest;
struct ChatImportReport;
struct CommitOutcome;
struct SessionStatus;
struct SessionCompaction;
}  // namespace strata

namespace strata::views {

using Json = nlohmann::ordered_json;

// Returns `j` as JSON text (indented by `indent` spaces, or compact for -1). Never throws: a string that is
// not valid UTF-8 (stored before writes were checked) is written with U+FFFD in place of its bad bytes.
std::string Dump(const Json& j, int indent = -1);

Json NodeView(const memory::Node& node);
Json NodeDetailView(const memory::Node& node, const std::vector<memory::Relation>& relations);
Json HitView(const memory::Hit& hit);
Json FindResultView(const FindResult& result);
// The reverse for a find's filter and model help, from HTTP's body or MCP's arguments: "type" ("resource",
// "memory" or "skill": only nodes of that type), "rewrite" and "rerank" (booleans), "max_queries" and
// "rerank_candidates" (integers); a member of the wrong type is an error naming it. Absent members keep
// `out`'s values.
Status ReadFindOptions(const nlohmann::json& args, FindRequest* out);
// The JSON Schema (an object, no other members) of a find's arguments as MCP's find and search and the agent
// tool's find announce them: "query" (required), "under", "limit" (1-FindRequest::kMaxLimit, default
// FindRequest's), "token_budget" (0 or more, 0 no budget), "type"; with `session` also "session"; with
// `model_help` "rewrite", "rerank", "max_queries" and "rerank_candidates" (FindAssist's bounds). Every bound
// and default is the engine's, so that no front end refuses what another takes.
Json FindArgumentsSchema(bool session, bool model_help);
Json GrepMatchView(const memory::GrepMatch& match);
// With `messages`, the session's current messages are included (kosong JSON).
Json SessionView(const session::SessionInfo& info, const std::vector<Message>* messages = nullptr);
Json ArchiveView(const session::ArchiveInfo& archive);
Json SessionStatusView(const SessionStatus& status);
Json CommitView(const std::string& session, const CommitOutcome& outcome);
Json ChatImportView(const ChatImportReport& report);
Json AddReportView(const ingest::AddReport& report);
Json ImportReportView(const memory::ImportReport& report);
Json ExportReportView(const memory::ExportReport& report);
// Files carried in a request (HTTP's POST /api/v1/resources, MCP's add_resource): "files": [{"path",
// "content", "encoding"?: "base64"}]; a member of the wrong type or a path that is not a plain relative one
// is an error naming it.
Result<std::vector<ingest::SourceFile>> ReadSourceFiles(const nlohmann::json& args);
// The options of such an add: "remove_missing" and "summarize" (booleans, default false), "chunk_tokens".
Result<ingest::AddOptions> ReadAddOptions(const nlohmann::json& args);
Json JobView(const session::Job& job);
Json AuditEntryView(const session::AuditEntry& entry, std::string_view session);
Json CompactionView(const SessionCompaction& done);
Json ChangesView(const std::vector<session::MemoryChange>& changes);
Json CommitDiffView(const session::CommitDiff& diff);
Json SessionContextView(const std::string& session, const SessionContext& context);
Json CheckpointView(const std::string& session, const session::CheckpointInfo& checkpoint);
Json SessionLogView(const std::string& session, const session::SessionLog& log);

// Whether a node is a memory superseded by a newer one (its metadata has "valid_to").
bool IsSuperseded(const memory::Node& node);

// {"included_record_indices","summary_included","summary_over_budget","budget","total_tokens","messages",
//  "warnings","warning_details"}: the system prompt (if any) and the assembled messages of `records`.
std::string AssemblyJson(std::span<const Message> records, const window::Assembly& assembly,
                         const window::AssembleOptions& options);

}  // namespace strata::views
