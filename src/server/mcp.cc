#include "strata/server/mcp.h"

#include <algorithm>
#include <cctype>
#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>
#include <variant>
#include <vector>

#include "access.h"
#include "strata/engine/views.h"
#include "strata/engine/agent_tools.h"
#include "strata/json/checked.h"
#include "strata/memory/uri.h"
#include "strata/message/message_json.h"
#include "strata/prompt/value.h"
#include "strata/tokenizer/registry.h"
#include "strata/tools/json_schema.h"
#include "strata/util/random.h"

namespace strata::server {
namespace {

using Json = nlohmann::ordered_json;
using memory::Uri;

// JSON-RPC 2.0 error codes.
constexpr int kParseError = -32700;
constexpr int kInvalidRequest = -32600;
constexpr int kMethodNotFound = -32601;
constexpr int kInvalidParams = -32602;
constexpr int kInternalError = -32603;
constexpr int kResourceNotFound = -32002;  // MCP: resources/read of an unknown URI.

constexpr const char* kSupportedVersions[] = {"2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"};

}  // namespace

// Defined in server.cc: exact token counts by encoding name.

namespace {

// A failure that becomes a JSON-RPC error.
struct RpcError {
  int code;
  std::string message;
};

Json ErrorResponse(const Json& id, int code, const std::string& message) {
  return Json{{"jsonrpc", "2.0"}, {"id", id}, {"error", {{"code", code}, {"message", message}}}};
}

// A tools/call result that reports a failure: "CODE: message" as its text, isError set.
Json ToolError(const Status& status) {
  return Json{{"content", Json::array({{{"type", "text"},
                                         {"text", std::string(StatusCodeName(status.code())) + ": " + status.message()}}})},
              {"isError", true}};
}

// ---- Tools ----

struct Tool {
  std::string name;
  std::string title;
  std::string description;
  Json schema;  // inputSchema
  bool read_only = false;  // Announced as readOnlyHint, and the only tools a read-only server offers.
  tools::JsonSchema validator;
};

Json Prop(const char* type, const char* description) { return Json{{"type", type}, {"description", description}}; }

Json Object(Json properties, std::vector<std::string> required = {}) {
  Json schema = {{"type", "object"}, {"properties", std::move(properties)}, {"additionalProperties", false}};
  if (!required.empty()) schema["required"] = required;
  return schema;
}

std::vector<Tool> MakeTools() {
  Json uri = Prop("string", "A Strata URI, e.g. strata://user/alice/memories/preferences/editor");
  Json under = Prop("string", "Only below this URI (default: everything you can reach)");
  Json limit = {{"type", "integer"}, {"minimum", 1}, {"maximum", 1000},
                {"description", "At most this many nodes (default 200; the result says \"truncated\" when more were left)"}};
  Json level = {{"type", "integer"}, {"minimum", 0}, {"maximum", 2},
                {"description", "0: the one-line abstract (L0), 1: the overview (L1), 2: the full content (L2, default)"}};
  Json session = Prop("string", "A session id of yours");
  Json encodings = Json::array();
  for (std::string_view name : tokenizer::CounterNames()) encodings.push_back(std::string(name));
  std::vector<Tool> out = {
      {"find", "Find", "Hybrid (full-text + vector), hierarchical retrieval over memories, resources and skills. Returns "
                       "the best URIs with scores, one-line abstracts and why each matched; read a hit for more.",
       views::FindArgumentsSchema(/*session=*/false, /*model_help=*/true)},
      {"search", "Search with context", "Like find, but aware of a session: a short follow-up is searched together with "
                                        "the session's newest request.",
       views::FindArgumentsSchema(/*session=*/true, /*model_help=*/true)},
      {"read", "Read", "Read one or more URIs at a level of detail (L0 abstract, L1 overview, L2 content).",
       Object({{"uri", uri}, {"uris", {{"type", "array"}, {"items", {{"type", "string"}}}, {"maxItems", 50},
                                       {"description", "Several URIs at once"}}},
               {"level", level}})},
      {"list", "List", "The children of a directory URI, with their abstracts.", Object({{"uri", uri}, {"limit", limit}})},
      {"tree", "Tree", "Everything below a URI, recursively.", Object({{"uri", uri}, {"limit", limit}})},
      {"grep", "Grep", "Lines containing a text, below a URI.",
       Object({{"pattern", Prop("string", "The text to look for")}, {"under", under},
               {"ignore_case", Prop("boolean", "Match regardless of case")}},
              {"pattern"})},
      {"glob", "Glob", "The nodes whose URIs match a glob pattern below a URI (`*`, `?` in a segment, `**` across, `[abc]`).",
       Object({{"pattern", Prop("string", "e.g. memories/**/editor*")}, {"under", under}}, {"pattern"})},
      {"write", "Write", "Create or replace the content at a URI (directories are created as needed).",
       Object({{"uri", uri}, {"content", Prop("string", "The full content (L2)")},
               {"abstract", Prop("string", "A one-line abstract (L0); derived when absent")},
               {"overview", Prop("string", "An overview (L1); derived when absent")},
               {"category", Prop("string", "A memory's category, e.g. preferences (default: from the URI)")},
               {"metadata", {{"type", "object"}, {"description", "Metadata kept with the node"}}},
               {"overwrite", Prop("boolean", "Replace an existing node (default true; false refuses to)")}},
              {"uri", "content"})},
      {"edit", "Edit", "Replace an exact piece of text in the content at a URI. The old text must occur exactly once "
                       "unless replace_all is set.",
       Object({{"uri", uri}, {"old_text", Prop("string", "The exact text to replace")},
               {"new_text", Prop("string", "What to put instead")},
               {"replace_all", Prop("boolean", "Replace every occurrence")}},
              {"uri", "old_text", "new_text"})},
      {"forget", "Forget", "Remove a URI (with recursive, a directory and everything below it).",
       Object({{"uri", uri}, {"recursive", Prop("boolean", "Remove a directory with its contents")}}, {"uri"})},
      {"add_resource", "Add documents", "Add documents or code as resources: each file (Markdown, text, HTML, PDF as "
                                        "base64, source code, JSON, YAML, CSV) becomes a directory of chunks under the "
                                        "URI that find searches; a file sent again unchanged is left as it is.",
       Object({{"uri", Prop("string", "Where the files go, e.g. strata://resources/docs")},
               {"files", {{"type", "array"}, {"minItems", 1}, {"maxItems", 1000},
                          {"items", Object({{"path", Prop("string", "A relative path, e.g. guide/install.md")},
                                            {"content", Prop("string", "The file's text, or its bytes in base64")},
                                            {"encoding", {{"type", "string"}, {"enum", {"utf-8", "base64"}}}}},
                                           {"path", "content"})}}},
               {"remove_missing", Prop("boolean", "Remove what an earlier add to this URI brought from files not sent now")},
               {"summarize", Prop("boolean", "Queue the server's model to summarise each added file")},
               {"chunk_tokens", {{"type", "integer"}, {"minimum", ingest::kMinChunkTokens},
                                 {"maximum", ingest::kMaxChunkTokens},
                                 {"description", "The most tokens a chunk holds (default 512)"}}}},
              {"uri", "files"})},
      {"remember", "Remember", "Remember something about you for later sessions: a text (deduplicated against what is "
                               "already known, merged or superseded when the model decides so), or the messages of a "
                               "conversation (committed into memory in the background).",
       Object({{"text", Prop("string", "A fact, preference or event to remember")},
               {"category", Prop("string", "e.g. preferences, profile, events (default: the model chooses)")},
               {"messages", {{"type", "array"}, {"items", {{"type", "object"}}}, {"minItems", 1},
                             {"description", "Messages ({role, content}) to commit into memory"}}}})},
      {"get_context", "Get context", "The assembled context window of a session for a token budget: the system prompt "
                                     "with recalled memories, the summary and the newest history that fits, with tokens "
                                     "per section.",
       Object({{"session", session},
               {"max_context_tokens", {{"type", "integer"}, {"minimum", 1}, {"description", "The window (default: the server's, 128000 unless set)"}}},
               {"reserve_for_reply", {{"type", "integer"}, {"minimum", 0}, {"description", "Tokens kept for the reply (default 4096, at most a quarter of the window)"}}},
               {"memory_limit", {{"type", "integer"}, {"minimum", 0},
                                 {"maximum", SessionContextOptions::kMaxMemoryLimit},
                                 {"description", "Memories to recall (default " +
                                                     std::to_string(SessionContextOptions{}.memory_limit) + ", 0: none)"}}},
               {"query", Prop("string", "What to recall memories for (default: the newest user message)")},
               {"system_prompt", Prop("string", "The system prompt to assemble with (default: the session's own)")},
               {"encoding", {{"type", "string"}, {"enum", encodings}, {"description", "How tokens are counted (default o200k_base)"}}}},
              {"session"})},
      {"commit_session", "Commit session", "Archive a session's messages and extract memories from them in the background.",
       Object({{"session", session}}, {"session"})},
      {"count_tokens", "Count tokens", "Exact token count of a text (tiktoken-compatible).",
       Object({{"text", Prop("string", "The text")},
               {"encoding", {{"type", "string"}, {"enum", encodings},
                             {"description", "Default " + std::string(tokenizer::kDefaultEncoding)}}}},
              {"text"})},
      {"health", "Health", "Whether Strata is up, and who you are to it.", Object(Json::object())},
  };
  // Every other tool writes (a tool added later is a writer until listed here: a client may run a tool
  // announced as read-only without asking).
  for (const char* reader : {"find", "search", "read", "list", "tree", "grep", "glob", "get_context", "count_tokens",
                             "health"}) {
    for (Tool& t : out) {
      if (t.name == reader) t.read_only = true;
    }
  }
  for (Tool& t : out) t.validator = *tools::JsonSchema::Parse(t.schema.dump());
  return out;
}

const std::vector<Tool>& Tools() {
  static const std::vector<Tool>* tools = new std::vector<Tool>(MakeTools());
  return *tools;
}

// A node's URI as a resource URI: '%', '?' and '#' in its names are percent-encoded, so that a name holding
// "?level=0" is never read as the query of another node's URI.
std::string ResourceUriOf(const Uri& uri) {
  std::string out;
  for (char c : uri.str()) {
    if (c == '%') {
      out += "%25";
    } else if (c == '?') {
      out += "%3F";
    } else if (c == '#') {
      out += "%23";
    } else {
      out += c;
    }
  }
  return out;
}

// A resource URI: strata://... (percent-encoded as ResourceUriOf writes it; a client may send a plain one)
// with an optional ?level=0|1|2, the level to read.
Result<std::pair<Uri, memory::Level>> ResourceUri(const std::string& text) {
  std::string base = text.substr(0, text.find('?'));
  memory::Level level = memory::Level::kContent;
  if (base.size() < text.size()) {
    std::string query = text.substr(base.size() + 1);
    if (!query.starts_with("level=")) {
      return Status::InvalidArgument("a resource URI takes only ?level=0|1|2, not ?" + json::QuoteForError(query, 40) +
                                     " (a '?' in a node's name is written %3F)");
    }
    // Read as HTTP reads ?level=, in the words of every front end.
    STRATA_ASSIGN_OR_RETURN(int64_t number, IntegerText(query.substr(6), "level"));
    STRATA_ASSIGN_OR_RETURN(level, memory::LevelOf(number));
  }
  std::string decoded;
  for (size_t i = 0; i < base.size(); ++i) {
    if (base[i] == '%' && i + 2 < base.size() && std::isxdigit(static_cast<unsigned char>(base[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(base[i + 2]))) {
      decoded += static_cast<char>(std::stoi(base.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      decoded += base[i];
    }
  }
  STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(decoded));
  return std::make_pair(uri, level);
}

constexpr size_t kResourcesPerPage = 500;

}  // namespace

struct McpHandler::Impl {
  Engine* engine;
  McpCaller who;
  size_t max_message_bytes;

  Status CheckUri(const Uri& uri) { return engine->CheckAccess(who.reach, uri.str()); }

  // The URI argument `name` (checked against the identity), or the identity's default scope when absent.
  Result<Uri> UriArg(const Json& args, const char* name, bool required) {
    std::string text = json::StringOr(args, name);
    if (text.empty()) {
      // HTTP's words: absent is "required", present and empty "must not be empty".
      if (required && json::Field(args, name) != nullptr) {
        return Status::InvalidArgument(std::string("\"") + name + "\" must not be empty");
      }
      if (required) return Status::InvalidArgument(std::string("\"") + name + "\" is required");
      return !who.reach.everything() ? Uri::Parse("strata://user/" + who.user) : Uri::Root();
    }
    STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(text));
    STRATA_RETURN_IF_ERROR(CheckUri(uri));
    return uri;
  }

  // find and search: Engine::Find for this caller (search also reads the session and a token budget).
  Result<Json> Find(const Json& args, bool session_aware) {
    FindRequest request;
    request.query = json::StringOr(args, "query");
    request.under = json::StringOr(args, "under");
    // Types and bounds were checked against FindArgumentsSchema; the engine checks the bounds again.
    STRATA_ASSIGN_OR_RETURN(int64_t limit, json::CheckedIntOr(args, "limit", static_cast<int64_t>(request.limit)));
    STRATA_ASSIGN_OR_RETURN(request.limit, FindLimitArg(limit));
    STRATA_ASSIGN_OR_RETURN(request.token_budget, json::CheckedIntOr(args, "token_budget", 0));
    if (session_aware) request.session = json::StringOr(args, "session");
    STRATA_RETURN_IF_ERROR(views::ReadFindOptions(args, &request));
    request.reach = who.reach;
    STRATA_ASSIGN_OR_RETURN(FindResult found, engine->Find(request));
    return views::FindResultView(found);
  }

  Result<Json> Read(const Json& args) {
    std::vector<std::string> uris;
    if (const Json* one = json::Field(args, "uri"); one != nullptr && one->is_string()) {
      if (one->get<std::string>().empty()) return Status::InvalidArgument("\"uri\" must not be empty");
      uris.push_back(one->get<std::string>());
    }
    if (const Json* many = json::Field(args, "uris"); many != nullptr) {
      if (!many->is_array()) return Status::InvalidArgument("\"uris\" must be an array of URIs");
      for (size_t i = 0; i < many->size(); ++i) {
        const Json& u = (*many)[i];
        const std::string where = "\"uris\"[" + std::to_string(i) + "]";
        if (!u.is_string()) return Status::InvalidArgument(where + " must be a string");
        if (u.get<std::string>().empty()) return Status::InvalidArgument(where + " must not be empty");
        uris.push_back(u.get<std::string>());
      }
    }
    if (uris.empty()) return Status::InvalidArgument("give \"uri\" or \"uris\"");
    STRATA_ASSIGN_OR_RETURN(int64_t level_number, json::CheckedIntOr(args, "level", 2));
    STRATA_ASSIGN_OR_RETURN(memory::Level level, memory::LevelOf(level_number));
    Json out = Json::array();
    for (const std::string& text : uris) {
      STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(text));
      STRATA_RETURN_IF_ERROR(CheckUri(uri));
      STRATA_ASSIGN_OR_RETURN(std::string content, engine->Read(uri.str(), level));
      out.push_back({{"uri", uri.str()}, {"level", static_cast<int>(level)}, {"content", content}});
    }
    return Json{{"results", out}};
  }

  Result<Json> Remember(const Json& args, const Canceller* cancel) {
    Uri scope = *Uri::Parse("strata://user/" + who.user);
    const Json* messages = json::Field(args, "messages");
    if (messages != nullptr && json::Field(args, "text") != nullptr) {
      // One of them: committing the messages dropped the text without a word.
      return Status::InvalidArgument("give \"text\" or \"messages\", not both");
    }
    if (messages != nullptr) {
      STRATA_ASSIGN_OR_RETURN(std::vector<Message> parsed, ParseMessages(messages->dump()));
      STRATA_RETURN_IF_ERROR(engine->CheckRefs(who.reach, parsed));
      STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, engine->CreateSession(who.user, "", ""));
      const std::string ref = session::SessionRef(info);
      STRATA_RETURN_IF_ERROR(engine->AddMessages(ref, parsed).status());
      STRATA_ASSIGN_OR_RETURN(CommitOutcome outcome, engine->Commit(ref, {.wait = false}));
      if (who.on_commit) who.on_commit();
      return Json{{"session", info.id}, {"task_id", outcome.ticket.job_id}, {"messages", outcome.ticket.messages},
                  {"note", "committed; memories are extracted in the background"}};
    }
    // Absent, one of the two is missing; present and empty (or blank), the engine refuses the text in the
    // words of every front end.
    if (json::Field(args, "text") == nullptr) return Status::InvalidArgument("give \"text\" or \"messages\"");
    std::string text = json::StringOr(args, "text");
    STRATA_ASSIGN_OR_RETURN(std::vector<session::MemoryChange> changes,
                            engine->Remember(scope.str(), text, json::StringOr(args, "category"), cancel));
    Json out = {{"changes", views::ChangesView(changes)}};
    if (!changes.empty()) out["uri"] = changes.front().uri;
    return out;
  }

  Result<Json> GetContext(const Json& args) {
    std::string sid = json::StringOr(args, "session");
    // The defaults and the answer of GET /api/v1/sessions/{id}/context: the server's window, the engine's
    // reply reserve, the same view; its arguments read before the session is looked for, as there.
    SessionContextOptions o;
    STRATA_ASSIGN_OR_RETURN(o.max_context_tokens, json::CheckedIntOr(args, "max_context_tokens", who.window));
    if (const Json* r = json::Field(args, "reserve_for_reply"); r != nullptr && !r->is_null()) {
      STRATA_ASSIGN_OR_RETURN(o.reserve_for_reply, json::CheckedIntOr(args, "reserve_for_reply", 0));
    }
    STRATA_ASSIGN_OR_RETURN(int64_t memory_limit,
                            json::CheckedIntOr(args, "memory_limit", static_cast<int64_t>(o.memory_limit)));
    STRATA_ASSIGN_OR_RETURN(o.memory_limit, MemoryLimitArg(memory_limit));
    o.query = json::StringOr(args, "query");
    if (const Json* p = json::Field(args, "system_prompt"); p != nullptr && p->is_string()) o.system_prompt = p->get<std::string>();
    o.encoding = json::StringOr(args, "encoding", o.encoding);
    STRATA_RETURN_IF_ERROR(CheckSessionContextOptions(o));
    STRATA_ASSIGN_OR_RETURN(std::string ref, engine->CheckSessionAccess(who.reach, sid));
    STRATA_ASSIGN_OR_RETURN(SessionContext ctx, engine->AssembleSession(ref, o));
    return views::SessionContextView(sid, ctx);
  }

  Result<Json> Edit(const Json& args) {
    STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(args, "uri", true));
    std::string old_text = json::StringOr(args, "old_text"), new_text = json::StringOr(args, "new_text");
    if (old_text.empty()) return Status::InvalidArgument("\"old_text\" must not be empty");
    bool all = json::BoolOr(args, "replace_all", false);
    // A directory's text is its listing: the old text was looked for there first, so the answer depended on
    // it (not found, occurs N times) instead of saying what the write would.
    STRATA_ASSIGN_OR_RETURN(memory::Node node, engine->Stat(uri.str()));
    if (node.is_dir) return Status::FailedPrecondition(uri.str() + " is a directory; only leaves have content");
    // Read, replace, write only if nobody wrote in between (WriteOptions::expect_content); else again, on
    // what that writer left: two agents' edits of one memory both land.
    for (int attempt = 0;; ++attempt) {
      STRATA_ASSIGN_OR_RETURN(std::string content, engine->Read(uri.str(), memory::Level::kContent));
      size_t replaced = 0;
      STRATA_ASSIGN_OR_RETURN(std::string edited, Replace(uri, content, old_text, new_text, all, &replaced));
      Status written = engine->Write(uri.str(), edited, {.expect_content = content});
      if (written.code() == StatusCode::kAborted && attempt < 50) continue;
      STRATA_RETURN_IF_ERROR(written);
      return Json{{"uri", uri.str()}, {"replaced", replaced}};
    }
  }

  static size_t Occurrences(const std::string& content, const std::string& text) {
    size_t count = 0;
    for (size_t at = content.find(text); at != std::string::npos; at = content.find(text, at + text.size())) ++count;
    return count;
  }

  // `content` with `old_text` replaced by `new_text` (once, where it occurs once, or everywhere with `all`);
  // `*replaced` says how many times.
  static Result<std::string> Replace(const Uri& uri, const std::string& content, const std::string& old_text,
                                     const std::string& new_text, bool all, size_t* replaced) {
    size_t count = Occurrences(content, old_text);
    if (count == 0) return Status::NotFound("the old text does not occur in " + uri.str());
    if (count > 1 && !all) {
      return Status::InvalidArgument("the old text occurs " + std::to_string(count) + " times in " + uri.str() +
                                     "; give more context to make it unique, or set replace_all");
    }
    std::string out;
    size_t from = 0;
    for (size_t at = content.find(old_text); at != std::string::npos; at = content.find(old_text, from)) {
      out.append(content, from, at - from);
      out += new_text;
      from = at + old_text.size();
      if (!all) break;
    }
    out.append(content, from, std::string::npos);
    *replaced = all ? count : 1;
    return out;
  }

  Result<Json> RunTool(const std::string& name, const Json& args, const Canceller* cancel) {
    if (name == "health") {
      // What the identity reaches, since "default" names two: stdio without --user is the user default (its
      // scope and the shared ones), a server without keys the open account (everything).
      Json reach = who.reach.everything()
                       ? Json("everything")
                       : Json::array({"strata://user/" + who.user, "strata://resources", "strata://agent"});
      return Json{{"alive", true}, {"user", who.user}, {"account", who.account}, {"reach", reach},
                  {"protocol", kMcpProtocolVersion}};
    }
    if (name == "find") return Find(args, false);
    if (name == "search") return Find(args, true);
    if (name == "read") return Read(args);
    if (name == "list" || name == "tree") {
      STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(args, "uri", false));
      // A model's listing is bounded (200 by default); one more is asked for, to say when it was cut.
      STRATA_ASSIGN_OR_RETURN(int64_t asked, json::CheckedIntOr(args, "limit", 200));
      const size_t limit = static_cast<size_t>(std::max<int64_t>(asked, 0));
      STRATA_ASSIGN_OR_RETURN(auto nodes, engine->List(uri.str(), {.recursive = name == "tree", .limit = limit + 1}));
      const bool truncated = nodes.size() > limit;
      if (truncated) nodes.resize(limit);
      Json out = Json::array();
      for (const memory::Node& n : nodes) out.push_back(views::NodeView(n));
      Json result = {{"uri", uri.str()}, {"nodes", out}};
      if (truncated) result["truncated"] = true;
      return result;
    }
    if (name == "grep") {
      STRATA_ASSIGN_OR_RETURN(auto matches, engine->Grep(json::StringOr(args, "pattern"), json::StringOr(args, "under"),
                                                         json::BoolOr(args, "ignore_case", false), who.reach));
      Json out = Json::array();
      for (const memory::GrepMatch& m : matches) out.push_back(views::GrepMatchView(m));
      return Json{{"matches", out}};
    }
    if (name == "glob") {
      STRATA_ASSIGN_OR_RETURN(auto nodes,
                              engine->Glob(json::StringOr(args, "pattern"), json::StringOr(args, "under"), who.reach));
      // The node records HTTP's glob returns (MCP's structured content must be an object).
      Json out = Json::array();
      for (const memory::Node& n : nodes) out.push_back(views::NodeView(n));
      return Json{{"nodes", out}};
    }
    if (name == "write") {
      STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(args, "uri", true));
      memory::WriteOptions o;
      if (const Json* m = json::Field(args, "metadata"); m != nullptr && m->is_object()) o.metadata = m->dump();
      o.overwrite = json::BoolOr(args, "overwrite", true);
      for (auto [key, slot] : {std::pair{"abstract", &o.abstract_text}, std::pair{"overview", &o.overview},
                               std::pair{"category", &o.category}}) {
        const Json* v = json::Field(args, key);
        if (v == nullptr || v->is_null()) continue;
        if (!v->is_string()) return Status::InvalidArgument(std::string("\"") + key + "\" must be a string");
        *slot = v->get<std::string>();
      }
      STRATA_RETURN_IF_ERROR(engine->Write(uri.str(), json::StringOr(args, "content"), o));
      STRATA_ASSIGN_OR_RETURN(memory::Node node, engine->Stat(uri.str()));
      return views::NodeView(node);
    }
    if (name == "edit") return Edit(args);
    if (name == "forget") {
      STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(args, "uri", true));
      STRATA_RETURN_IF_ERROR(Engine::CheckWholeScope(who.reach, uri.str()));
      STRATA_ASSIGN_OR_RETURN(int64_t removed, engine->Remove(uri.str(), json::BoolOr(args, "recursive", false)));
      return Json{{"removed", removed}};
    }
    if (name == "add_resource") {
      STRATA_ASSIGN_OR_RETURN(Uri uri, UriArg(args, "uri", true));
      STRATA_ASSIGN_OR_RETURN(std::vector<ingest::SourceFile> files, views::ReadSourceFiles(args));
      STRATA_ASSIGN_OR_RETURN(ingest::AddOptions options, views::ReadAddOptions(args));
      STRATA_ASSIGN_OR_RETURN(ingest::AddReport report, engine->AddResourceFiles(files, uri.str(), options));
      Json out = views::AddReportView(report);
      out["uri"] = uri.str();
      return out;
    }
    if (name == "remember") return Remember(args, cancel);
    if (name == "get_context") return GetContext(args);
    if (name == "commit_session") {
      std::string sid = json::StringOr(args, "session");
      STRATA_ASSIGN_OR_RETURN(std::string ref, engine->CheckSessionAccess(who.reach, sid));
      STRATA_ASSIGN_OR_RETURN(CommitOutcome outcome, engine->Commit(ref, {.wait = false}));
      if (who.on_commit) who.on_commit();
      return views::CommitView(sid, outcome);
    }
    if (name == "count_tokens") {
      std::string encoding = json::StringOr(args, "encoding", std::string(tokenizer::kDefaultEncoding));
      STRATA_RETURN_IF_ERROR(tokenizer::ValidateCounterName(encoding));
      std::string warning;
      Json out = {{"encoding", encoding}, {"tokens", tokenizer::CountText(encoding, json::StringOr(args, "text"), &warning)}};
      if (!warning.empty()) out["warning"] = warning;
      return out;
    }
    return Status::NotFound("no tool " + name);
  }

  // ---- Resources and prompts ----

  // Every leaf of the scopes the identity reaches, a page of kResourcesPerPage at a time: `nextCursor`
  // ("<scope> <last URI>") names where the next page starts.
  Result<Json> ListResources(const Json& params) {
    std::vector<std::string> roots;
    if (!who.reach.everything()) {
      roots = {"strata://user/" + who.user, "strata://resources", "strata://agent"};
    } else {
      roots = {"strata://user", "strata://resources", "strata://agent"};
    }
    size_t first = 0;
    std::string after;
    if (const Json* cursor = json::Field(params, "cursor"); cursor != nullptr && !cursor->is_null()) {
      std::string text = cursor->is_string() ? cursor->get<std::string>() : "";
      size_t space = text.find(' ');
      if (space == 1 && text[0] >= '0' && text[0] < static_cast<char>('0' + roots.size())) {
        first = static_cast<size_t>(text[0] - '0');
        after = text.substr(2);
      }
      if (after.empty() || !after.starts_with(roots[first] + "/")) {
        return Status::InvalidArgument("\"cursor\" is not one that resources/list gave");
      }
    }
    Json out = Json::array();
    for (size_t r = first; r < roots.size(); ++r, after.clear()) {
      while (true) {
        auto nodes = engine->List(roots[r], {.recursive = true, .limit = 1000, .after = after});
        if (!nodes.ok()) break;  // A scope with nothing in it yet.
        for (const memory::Node& n : *nodes) {
          after = n.uri.str();
          if (n.is_dir) continue;
          out.push_back({{"uri", ResourceUriOf(n.uri)}, {"name", std::string(n.uri.name())},
                         {"description", n.abstract_text}, {"mimeType", "text/markdown"}});
          if (out.size() == kResourcesPerPage) {
            return Json{{"resources", std::move(out)}, {"nextCursor", std::to_string(r) + " " + after}};
          }
        }
        if (nodes->size() < 1000) break;
      }
    }
    return Json{{"resources", std::move(out)}};
  }

  Result<Json> ReadResource(const Json& params) {
    STRATA_ASSIGN_OR_RETURN(auto target, ResourceUri(json::StringOr(params, "uri")));
    STRATA_RETURN_IF_ERROR(CheckUri(target.first));
    STRATA_ASSIGN_OR_RETURN(std::string content, engine->Read(target.first.str(), target.second));
    return Json{{"contents", Json::array({{{"uri", json::StringOr(params, "uri")}, {"mimeType", "text/markdown"},
                                            {"text", content}}})}};
  }

  Result<Json> ListPrompts() {
    Json out = Json::array();
    STRATA_ASSIGN_OR_RETURN(prompt::PromptLibrary * library, engine->prompts());
    for (const std::string& id : library->Ids()) {
      auto t = library->Get(id);
      if (!t.ok()) continue;
      Json arguments = Json::array();
      for (const prompt::PromptVariable& v : (*t)->variables()) {
        arguments.push_back({{"name", v.name}, {"description", v.description},
                             {"required", v.required && !v.default_value}});
      }
      out.push_back({{"name", id}, {"title", (*t)->name()}, {"description", (*t)->description()}, {"arguments", arguments}});
    }
    // Skills of the agents, as prompts named skill:<agent>/<name>.
    auto agents = engine->List("strata://agent", {});
    if (agents.ok()) {
      for (const memory::Node& agent : *agents) {
        auto skills = engine->ListSkills(agent.uri.name());
        if (!skills.ok()) continue;
        for (const memory::Node& s : *skills) {
          out.push_back({{"name", "skill:" + std::string(agent.uri.name()) + "/" + std::string(s.uri.name())},
                         {"description", s.abstract_text}, {"arguments", Json::array()}});
        }
      }
    }
    return Json{{"prompts", out}};
  }

  Result<Json> GetPrompt(const Json& params) {
    std::string name = json::StringOr(params, "name");
    if (name.rfind("skill:", 0) == 0) {
      std::string rest = name.substr(6);
      size_t slash = rest.find('/');
      if (slash == std::string::npos) return Status::InvalidArgument("a skill prompt is named skill:<agent>/<name>");
      STRATA_ASSIGN_OR_RETURN(std::string md, engine->ShowSkill(rest.substr(0, slash), rest.substr(slash + 1)));
      return Json{{"description", "The skill " + rest},
                  {"messages", Json::array({{{"role", "user"}, {"content", {{"type", "text"}, {"text", md}}}}})}};
    }
    Json vars = Json::object();
    if (const Json* a = json::Field(params, "arguments"); a != nullptr && a->is_object()) vars = *a;
    STRATA_ASSIGN_OR_RETURN(prompt::Value values, prompt::Value::FromJson(vars.dump()));
    STRATA_ASSIGN_OR_RETURN(std::string text, engine->RenderPrompt(name, values));
    return Json{{"messages", Json::array({{{"role", "user"}, {"content", {{"type", "text"}, {"text", text}}}}})}};
  }

  // ---- Dispatch ----

  // The result of request `method`, or an RpcError.
  std::variant<Json, RpcError> Dispatch(const std::string& method, const Json& params, const Canceller* cancel,
                                        const std::function<void(double, const std::string&)>& progress) {
    auto failed = [this](const Status& s) -> std::variant<Json, RpcError> {
      int code = s.code() == StatusCode::kInvalidArgument ? kInvalidParams
                 : s.code() == StatusCode::kNotFound      ? kResourceNotFound
                                                          : kInternalError;
      return RpcError{code, WithoutDataDir(s.message(), engine->options().data_dir)};
    };
    if (method == "initialize") {
      std::string asked = json::StringOr(params, "protocolVersion");
      std::string version(kMcpProtocolVersion);
      if (McpKnownVersion(asked)) version = asked;
      return Json{{"protocolVersion", version},
                  {"capabilities", {{"tools", {{"listChanged", false}}},
                                    {"resources", {{"listChanged", false}, {"subscribe", false}}},
                                    {"prompts", {{"listChanged", false}}},
                                    {"logging", Json::object()}}},
                  {"serverInfo", {{"name", "strata"}, {"title", "Strata context engine"}, {"version", "0.1.0"}}},
                  {"instructions", "Strata keeps your long-term memory and context. Use find or search before "
                                   "answering from memory, read hits at level 0/1/2 as needed, and remember what "
                                   "the user tells you about themselves."}};
    }
    if (method == "ping") return Json::object();
    if (method == "logging/setLevel") return Json::object();
    if (method == "tools/list") {
      Json tools = Json::array();
      for (const Tool& t : Tools()) {
        // Data served read-only offers only the tools that read (calling a writer is refused all the same).
        if (!t.read_only && engine->options().read_only) continue;
        tools.push_back({{"name", t.name}, {"title", t.title}, {"description", t.description}, {"inputSchema", t.schema},
                         {"annotations", {{"readOnlyHint", t.read_only}, {"openWorldHint", false}}}});
      }
      return Json{{"tools", tools}};
    }
    if (method == "tools/call") {
      std::string name = json::StringOr(params, "name");
      auto tool = std::find_if(Tools().begin(), Tools().end(), [&](const Tool& t) { return t.name == name; });
      if (tool == Tools().end()) return RpcError{kInvalidParams, "unknown tool " + json::QuoteForError(name, 80)};
      Json args = Json::object();
      if (const Json* a = json::Field(params, "arguments"); a != nullptr && !a->is_null()) args = *a;
      // Arguments the schema refuses are the tool's error, which the model can read and correct (SEP-1303,
      // MCP 2025-11-25), as are those the engine refuses below: one kind of answer for one kind of mistake.
      if (Status valid = tool->validator.Validate(args.dump()); !valid.ok()) {
        return ToolError(Status::InvalidArgument("invalid arguments for " + name + ": " + valid.message()));
      }
      if (progress) progress(0, "running " + name);
      Result<Json> result = RunTool(name, args, cancel);
      if (progress) progress(1, "done");
      if (cancel != nullptr && cancel->cancelled()) return RpcError{kInternalError, "cancelled"};
      // A failure of the tool itself is a result the model can read and act on.
      if (!result.ok()) {
        return ToolError(Status(result.status().code(),
                                WithoutDataDir(result.status().message(), engine->options().data_dir)));
      }
      if (!tool->read_only && who.on_change) who.on_change();
      // structuredContent must be an object: a list is wrapped as {"result": [...]}.
      Json structured = result->is_object() ? *result : Json{{"result", *result}};
      return Json{{"content", Json::array({{{"type", "text"}, {"text", views::Dump(*result, 2)}}})},
                  {"structuredContent", std::move(structured)}, {"isError", false}};
    }
    if (method == "resources/list") {
      Result<Json> r = ListResources(params);
      return r.ok() ? std::variant<Json, RpcError>(*r) : failed(r.status());
    }
    if (method == "resources/templates/list") {
      return Json{{"resourceTemplates",
                   Json::array({{{"uriTemplate", "strata://{+path}"}, {"name", "strata-node"},
                                 {"description", "A node of the context store, its full content (L2)"}, {"mimeType", "text/markdown"}},
                                {{"uriTemplate", "strata://{+path}?level={level}"}, {"name", "strata-node-level"},
                                 {"description", "A node at a level: 0 abstract, 1 overview, 2 content"},
                                 {"mimeType", "text/markdown"}}})}};
    }
    if (method == "resources/read") {
      Result<Json> r = ReadResource(params);
      if (!r.ok() && r.status().code() == StatusCode::kPermissionDenied) return RpcError{kInvalidParams, r.status().message()};
      return r.ok() ? std::variant<Json, RpcError>(*r) : failed(r.status());
    }
    if (method == "prompts/list") {
      Result<Json> r = ListPrompts();
      return r.ok() ? std::variant<Json, RpcError>(*r) : failed(r.status());
    }
    if (method == "prompts/get") {
      Result<Json> r = GetPrompt(params);
      return r.ok() ? std::variant<Json, RpcError>(*r) : failed(r.status());
    }
    if (method == "resources/subscribe" || method == "resources/unsubscribe" || method == "completion/complete") {
      return RpcError{kMethodNotFound, method + " is not supported by this server"};
    }
    return RpcError{kMethodNotFound, "unknown method " + json::QuoteForError(method, 80)};
  }
};

McpHandler::McpHandler(Engine* engine, McpCaller caller, size_t max_message_bytes)
    : impl_(new Impl{engine, std::move(caller), max_message_bytes}) {}

McpHandler::~McpHandler() = default;

std::optional<std::string> McpHandler::Handle(std::string_view message, const Canceller* cancel, const Notify& notify) {
  Json request_id;  // Known once the message is read: every answer, even to a failure, echoes it.
  try {
    if (message.size() > impl_->max_message_bytes) {
      return views::Dump(ErrorResponse(nullptr, kInvalidRequest,
                                       "the message is " + std::to_string(message.size()) + " bytes; at most " +
                                           std::to_string(impl_->max_message_bytes) + " are accepted"));
    }
    Result<Json> parsed = json::ParseUntrusted<Json>(message, "JSON-RPC message");
    if (!parsed.ok()) return views::Dump(ErrorResponse(nullptr, kParseError, parsed.status().message()));
    const Json& m = *parsed;
    if (m.is_array()) {
      return views::Dump(
          ErrorResponse(nullptr, kInvalidRequest, "batches are not part of MCP 2025-11-25; send one message at a time"));
    }
    if (!m.is_object() || json::StringOr(m, "jsonrpc") != "2.0") {
      return views::Dump(ErrorResponse(nullptr, kInvalidRequest, "not a JSON-RPC 2.0 message (expected an object with \"jsonrpc\": \"2.0\")"));
    }
    const Json* id = json::Field(m, "id");
    const Json* method = json::Field(m, "method");
    if (method == nullptr) return std::nullopt;  // A response to us (we send no requests): ignored.
    if (!method->is_string()) {
      return views::Dump(ErrorResponse(id != nullptr ? *id : Json(), kInvalidRequest, "\"method\" must be a string"));
    }
    if (id == nullptr) return std::nullopt;  // A notification: initialized, cancelled (the transport's), ...
    if (id->is_string() || id->is_number_integer()) request_id = *id;
    if (!id->is_string() && !id->is_number_integer()) {
      return views::Dump(ErrorResponse(nullptr, kInvalidRequest, "\"id\" must be a string or an integer"));
    }
    Json params = Json::object();
    if (const Json* p = json::Field(m, "params"); p != nullptr && !p->is_null()) {
      if (!p->is_object()) return views::Dump(ErrorResponse(*id, kInvalidParams, "\"params\" must be an object"));
      params = *p;
    }
    std::function<void(double, const std::string&)> progress;
    if (const Json* meta = json::Field(params, "_meta"); meta != nullptr && notify) {
      if (const Json* token = json::Field(*meta, "progressToken"); token != nullptr) {
        Json t = *token;
        progress = [notify, t](double value, const std::string& text) {
          notify(views::Dump(Json{{"jsonrpc", "2.0"}, {"method", "notifications/progress"},
                                  {"params", {{"progressToken", t}, {"progress", value}, {"total", 1}, {"message", text}}}}));
        };
      }
    }
    auto outcome = impl_->Dispatch(method->get<std::string>(), params, cancel, progress);
    if (cancel != nullptr && cancel->cancelled()) return std::nullopt;  // The client no longer wants an answer.
    if (auto* error = std::get_if<RpcError>(&outcome)) return views::Dump(ErrorResponse(*id, error->code, error->message));
    return views::Dump(Json{{"jsonrpc", "2.0"}, {"id", *id}, {"result", std::move(std::get<Json>(outcome))}});
  } catch (const std::exception& e) {
    return views::Dump(ErrorResponse(request_id, kInternalError, std::string("unexpected error: ") + e.what()));
  } catch (...) {
    return views::Dump(ErrorResponse(request_id, kInternalError, "unexpected error"));
  }
}

std::optional<std::string> McpHandler::RequestId(std::string_view message) {
  Json m = json::ParseOrDiscard<Json>(message);
  const Json* id = json::Field(m, "id");
  if (id == nullptr || json::Field(m, "method") == nullptr) return std::nullopt;
  return id->dump();
}

std::optional<std::string> McpHandler::CancelledId(std::string_view message) {
  Json m = json::ParseOrDiscard<Json>(message);
  if (json::StringOr(m, "method") != "notifications/cancelled") return std::nullopt;
  const Json* params = json::Field(m, "params");
  const Json* id = params != nullptr ? json::Field(*params, "requestId") : nullptr;
  if (id == nullptr) return std::nullopt;
  return id->dump();
}

// ---- Transports ----

bool McpKnownVersion(std::string_view version) {
  for (const char* v : kSupportedVersions) {
    if (version == v) return true;
  }
  return false;
}

std::shared_ptr<Canceller> McpInFlight::Begin(const std::string& client, const std::string& id) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = requests_.try_emplace({client, id});
  if (!inserted) return nullptr;
  it->second = std::make_shared<Canceller>();
  return it->second;
}

void McpInFlight::End(const std::string& client, const std::string& id) {
  std::lock_guard lock(mu_);
  requests_.erase({client, id});
}

void McpInFlight::Cancel(const std::string& client, const std::string& id) {
  std::lock_guard lock(mu_);
  if (auto it = requests_.find({client, id}); it != requests_.end()) it->second->Cancel();
}

size_t McpInFlight::size() {
  std::lock_guard lock(mu_);
  return requests_.size();
}

Result<McpHttpReply> McpHttpTransport::Post(Engine* engine, const McpCaller& caller, const std::string& caller_id,
                                            std::string_view protocol_version, std::string_view session,
                                            std::string_view body) {
  if (!protocol_version.empty() && !McpKnownVersion(protocol_version)) {
    return Status::InvalidArgument("unsupported MCP-Protocol-Version " + json::QuoteForError(protocol_version, 40));
  }
  // Session ids are visible ASCII (MCP, Streamable HTTP); ours are 32 hex digits.
  if (session.size() > 128 || std::any_of(session.begin(), session.end(), [](char ch) { return ch < 0x21 || ch > 0x7e; })) {
    return Status::InvalidArgument("Mcp-Session-Id must be at most 128 visible ASCII characters");
  }
  std::string new_session;
  if (Json message = json::ParseOrDiscard<Json>(body); json::StringOr(message, "method") == "initialize") {
    STRATA_ASSIGN_OR_RETURN(new_session, RandomHex(16));
    session = new_session;
  }
  const std::string client = caller_id + "|" + std::string(session);
  if (auto cancelled = McpHandler::CancelledId(body)) in_flight_.Cancel(client, *cancelled);
  std::optional<std::string> id = McpHandler::RequestId(body);
  std::shared_ptr<Canceller> cancel;
  if (id) {
    cancel = in_flight_.Begin(client, *id);
    if (cancel == nullptr) {
      return McpHttpReply{200,
                          views::Dump(ErrorResponse(json::ParseOrDiscard<Json>(*id), kInvalidRequest,
                                                    "request id " + *id + " is already in use by a request in flight")),
                          ""};
    }
  }
  McpHandler handler(engine, caller, max_message_bytes_);
  ScopedCancelCallback on_shutdown(cancel ? shutdown_ : nullptr, [&cancel] { cancel->Cancel(); });
  std::optional<std::string> reply = handler.Handle(body, cancel.get());
  if (id) in_flight_.End(client, *id);
  if (!reply && id) {
    // Cancelled: HTTP still needs an answer to the POST; it is the JSON-RPC "request cancelled" error.
    reply = R"({"jsonrpc":"2.0","id":)" + *id + R"(,"error":{"code":-32800,"message":"request cancelled"}})";
  }
  if (!reply) return McpHttpReply{202, "", ""};
  return McpHttpReply{200, std::move(*reply), new_session};
}

// ---- stdio ----

Status ServeMcpStdio(Engine* engine, const McpStdioOptions& options, std::FILE* in, std::FILE* out) {
  STRATA_RETURN_IF_ERROR(memory::ValidateScopeId(options.user, "user"));
  McpHandler handler(engine, McpCaller{.reach = Reach::User(options.user), .user = options.user},
                     options.max_message_bytes);
  // Shared with the request threads, which are detached: the last of them may still release the lock
  // after this function has seen `running` reach zero.
  struct State {
    std::mutex out_mu;
    std::FILE* out;
    std::mutex mu;
    std::condition_variable cv;
    int running = 0;
    McpInFlight in_flight;  // One client: the process on the other end of the pipe.
    void Send(const std::string& message) {
      std::lock_guard lock(out_mu);
      std::fwrite(message.data(), 1, message.size(), out);
      std::fputc('\n', out);
      std::fflush(out);
    }
  };
  auto state = std::make_shared<State>();
  state->out = out;
  McpHandler::Notify send = [state](const std::string& message) { state->Send(message); };

  auto dispatch = [&](std::string message) {
    if (auto cancelled = McpHandler::CancelledId(message)) {
      state->in_flight.Cancel("", *cancelled);
      return;
    }
    std::optional<std::string> id = McpHandler::RequestId(message);
    if (!id) {  // A notification, or something no request id can be read from: answered (if at all) at once.
      if (auto reply = handler.Handle(message, nullptr, send)) state->Send(*reply);
      return;
    }
    std::shared_ptr<Canceller> cancel;
    {
      std::unique_lock lock(state->mu);
      state->cv.wait(lock, [&] { return state->running < options.max_in_flight; });
      cancel = state->in_flight.Begin("", *id);
      if (cancel == nullptr) {
        lock.unlock();
        state->Send(views::Dump(ErrorResponse(json::ParseOrDiscard<Json>(*id), kInvalidRequest,
                                              "request id " + *id + " is already in use by a request in flight")));
        return;
      }
      ++state->running;
    }
    std::thread([state, &handler, send, message = std::move(message), id = *id, cancel] {
      if (auto reply = handler.Handle(message, cancel.get(), send)) state->Send(*reply);
      state->in_flight.End("", id);
      std::lock_guard lock(state->mu);
      --state->running;
      state->cv.notify_all();
    }).detach();
  };

  std::string line;
  bool too_long = false;
  for (int ch; (ch = std::fgetc(in)) != EOF;) {
    if (ch != '\n') {
      if (line.size() < options.max_message_bytes) {
        line.push_back(static_cast<char>(ch));
      } else {
        too_long = true;
      }
      continue;
    }
    if (too_long) {
      state->Send(views::Dump(ErrorResponse(nullptr, kInvalidRequest,
                                            "a message over " + std::to_string(options.max_message_bytes) +
                                                " bytes was skipped")));
    } else if (!line.empty() && line != "\r") {
      dispatch(std::move(line));
    }
    line.clear();
    too_long = false;
  }
  if (!line.empty() && !too_long) dispatch(std::move(line));
  // Input ended: what is in flight still answers (a script may pipe requests in and read the answers).
  std::unique_lock lock(state->mu);
  state->cv.wait(lock, [&] { return state->running == 0; });
  return Status::Ok();
}

}  // namespace strata::server
