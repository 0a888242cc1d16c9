// The model endpoints: POST /v1/chat/completions (OpenAI) and POST /v1/messages (Anthropic), in front of
// the configured upstream of the same format. Without a session header a request passes through as it
// is (its tokens counted exactly); with X-Strata-Session the client sends only its new turn, and the
// request is assembled from the session (Engine::AssembleSession: system prompt, recalled memories,
// summary, newest history, tool groups whole), forwarded, and the reply logged as it streams back.
#include <strings.h>

#include <algorithm>

#include "server_impl.h"
#include "strata/engine/provider_config.h"
#include "strata/llm/http.h"
#include "strata/llm/wire.h"
#include "strata/message/message_json.h"

namespace strata::server {

namespace {

bool Speaks(Dialect dialect, llm::ProviderKind kind) {
  if (dialect == Dialect::kAnthropic) return kind == llm::ProviderKind::kAnthropic;
  return kind == llm::ProviderKind::kOpenAIChat || kind == llm::ProviderKind::kKimi;
}

std::string_view DialectName(Dialect dialect) {
  return dialect == Dialect::kAnthropic ? "Anthropic Messages" : "OpenAI chat completions";
}

Result<ModelRequest> ParseRequest(Dialect dialect, const Json& body) {
  const Json* messages = json::Field(body, "messages");
  if (messages == nullptr || !messages->is_array() || messages->empty()) {
    return Status::InvalidArgument("\"messages\" must be a non-empty array");
  }
  ModelRequest out;
  if (dialect == Dialect::kAnthropic) {
    const Json* system = json::Field(body, "system");
    STRATA_ASSIGN_OR_RETURN(out.turn, llm::ParseAnthropicRequestMessages(
                                          messages->dump(), system != nullptr ? system->dump() : "", &out.system));
    return out;
  }
  Json rest = Json::array();
  for (const Json& m : *messages) {
    std::string role = json::StringOr(m, "role");
    if (role != "system" && role != "developer") {
      rest.push_back(m);
      continue;
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<Message> system, ParseMessages(Json::array({m}).dump()));
    if (!out.system.empty()) out.system += "\n\n";
    out.system += system.empty() ? "" : system[0].ExtractText("\n");
  }
  if (!rest.empty()) {
    STRATA_ASSIGN_OR_RETURN(out.turn, ParseMessages(rest.dump()));
  }
  return out;
}

}  // namespace

Result<Json> Server::Impl::ModelEndpoint(Call& c, Dialect dialect) {
  STRATA_ASSIGN_OR_RETURN(const ConfigFile* config, c.engine->config());
  STRATA_ASSIGN_OR_RETURN(llm::ProviderConfig upstream, ResolveProviderConfig(engine_options.provider, *config));
  if (!Speaks(dialect, upstream.kind)) {
    return Status::FailedPrecondition(std::string(c.req.path) + " forwards " + std::string(DialectName(dialect)) +
                                      " requests to an upstream of that format; the configured provider speaks " +
                                      std::string(llm::ProviderKindName(upstream.kind)));
  }
  std::string session_id = c.req.Header("x-strata-session");
  // Without a session the request passes through as it is: one Strata cannot read (a block type it does
  // not know) is still forwarded, only its tokens are not counted.
  Result<ModelRequest> parsed = ParseRequest(dialect, c.body);
  if (!parsed.ok() && (!session_id.empty() || parsed.status().message().find("\"messages\"") == 0)) {
    return parsed.status();
  }
  const Json* stream_flag = json::Field(c.body, "stream");
  bool stream = stream_flag != nullptr && stream_flag->is_boolean() && stream_flag->get<bool>();
  Json forward = c.body;
  if (json::StringOr(forward, "model").empty()) forward["model"] = upstream.model;
  std::string model = forward["model"].get<std::string>();

  int64_t prompt_tokens = -1;
  std::shared_ptr<StreamSlot> slot;
  if (stream) {
    STRATA_ASSIGN_OR_RETURN(slot, TakeStreamSlot());
  }
  const MessageTokenCounter& counter = Engine::Counter("o200k_base");
  PendingCommit pending;
  std::shared_ptr<SessionTurn> turn_guard;
  if (!session_id.empty()) {
    // One turn at a time per session: two interleaved turns would log U1 U2 A1 A2.
    STRATA_ASSIGN_OR_RETURN(turn_guard, BeginTurn(c.engine, session_id));
    STRATA_ASSIGN_OR_RETURN(pending, AssembleForSession(c, session_id, *parsed, upstream, &forward, &prompt_tokens));
  } else if (parsed.ok()) {
    prompt_tokens = counter.CountMessages(parsed->turn);
    if (!parsed->system.empty()) {
      Message system = Message::System(parsed->system);
      prompt_tokens += counter.CountMessages({&system, 1});
    }
  }

  llm::HttpRequest request;
  request.url = upstream.base_url + llm::RequestPath(upstream.kind, model, stream);
  request.headers = llm::RequestHeaders(upstream, stream);
  if (dialect == Dialect::kAnthropic) {
    // The client's API version and beta features are its own choice.
    for (const char* name : {"anthropic-version", "anthropic-beta"}) {
      std::string value = c.req.Header(name);
      if (value.empty()) continue;
      std::erase_if(request.headers, [&](const auto& h) { return strcasecmp(h.first.c_str(), name) == 0; });
      request.headers.emplace_back(name, value);
    }
  }
  request.body = forward.dump();
  std::shared_ptr<llm::HttpTransport> transport = upstream.transport ? upstream.transport : llm::CurlTransport();
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<llm::HttpResponse> response, transport->Send(request, upstream.http, nullptr));
  // The turn joins the session only once the upstream has taken the request: a refused request can be
  // retried without logging the turn twice.
  if (!session_id.empty() && response->status() < 400 && !pending.turn.empty()) {
    STRATA_RETURN_IF_ERROR(c.engine->AddMessages(session_id, pending.turn).status());
  }

  c.raw = true;
  if (prompt_tokens >= 0) c.res.headers.emplace_back("X-Strata-Prompt-Tokens", std::to_string(prompt_tokens));
  if (!session_id.empty()) c.res.headers.emplace_back("X-Strata-Session", session_id);
  c.res.status = response->status();
  std::string content_type(response->header("content-type"));
  c.res.content_type = content_type.empty() ? "application/json" : content_type;
  if (std::string id(response->header("request-id")); !id.empty()) c.res.headers.emplace_back("request-id", id);
  Engine* engine = c.engine;
  if (response->status() >= 400 || !stream) {
    // A whole body: the upstream's error (already in the client's format) or a non-streamed reply.
    STRATA_ASSIGN_OR_RETURN(std::string body, llm::ReadAll(*response));
    if (response->status() < 400 && !session_id.empty()) LogReply(engine, session_id, upstream, false, body, pending);
    c.res.body = std::move(body);
    return Json();
  }
  // Streamed: each chunk goes to the client as it arrives; the whole stream is decoded for the log at the end.
  std::shared_ptr<llm::HttpResponse> live(std::move(response));
  // The last chunk is held back until the reply is in the session's log, so a client that sends its next
  // turn as soon as the stream ends finds the previous reply there.
  c.res.stream = [this, live, engine, session_id, upstream, slot, pending, turn_guard](const ChunkWriter& write) {
    constexpr size_t kMaxLoggedReply = 16 << 20;  // A longer reply is passed on but not logged.
    std::string all, chunk, held;
    bool too_long = false;
    while (!shut_down.load()) {
      Result<bool> more = live->Read(&chunk);
      if (!more.ok() || !*more) break;
      if (!session_id.empty() && !too_long) {
        all += chunk;
        too_long = all.size() > kMaxLoggedReply;
      }
      if (!held.empty() && !write(held)) return;  // The client went away: nothing of the reply is logged.
      held.swap(chunk);
    }
    if (!session_id.empty() && !too_long) LogReply(engine, session_id, upstream, true, all, pending);
    if (too_long) std::fprintf(stderr, "strata serve: session %s: a reply over 16 MiB was not logged\n", session_id.c_str());
    if (turn_guard) turn_guard->Release();  // The client may send its next turn as soon as it has this.
    if (!held.empty()) write(held);
  };
  return Json();
}

Result<PendingCommit> Server::Impl::AssembleForSession(Call& c, const std::string& session_id,
                                                       const ModelRequest& parsed,
                                                       const llm::ProviderConfig& upstream, Json* forward,
                                                       int64_t* prompt_tokens) {
  Result<session::SessionInfo> info = c.engine->GetSession(session_id);
  if (!info.ok() && info.status().code() == StatusCode::kNotFound) {
    std::string user = c.id.role == Role::kUser ? c.id.user : c.req.Header("x-strata-user");
    info = c.engine->CreateSession(user, c.req.Header("x-strata-agent"), session_id);
  }
  if (!info.ok()) return info.status();
  if (c.id.role == Role::kUser && info->user != c.id.user) return Status::NotFound("no session " + session_id);
  STRATA_RETURN_IF_ERROR(CheckRefs(c, parsed.turn));
  {
    std::lock_guard lock(idle_mu);  // A session with a turn in progress is not idle.
    idle.erase({c.engine, session_id});
  }

  SessionContextOptions o;
  o.max_context_tokens = options.upstream_context_tokens;
  if (std::string header = c.req.Header("x-strata-max-context"); !header.empty()) {
    char* end = nullptr;
    errno = 0;
    long long v = std::strtoll(header.c_str(), &end, 10);
    if (*end != '\0' || v <= 0 || errno == ERANGE) {
      return Status::InvalidArgument("X-Strata-Max-Context must be a positive integer");
    }
    o.max_context_tokens = v;
  }
  int64_t reserve = json::IntOr(c.body, "max_completion_tokens", json::IntOr(c.body, "max_tokens", 4096));
  o.reserve_for_reply = std::clamp<int64_t>(reserve, 0, o.max_context_tokens / 2);
  if (!parsed.system.empty()) o.system_prompt = parsed.system;  // Else the session's own.
  o.pending = parsed.turn;
  if (const Json* tools = json::Field(c.body, "tools"); tools != nullptr) {
    o.reserved_tokens = tokenizer::CountText(tokenizer::kDefaultEncoding, tools->dump());
  }
  STRATA_ASSIGN_OR_RETURN(SessionContext ctx, c.engine->AssembleSession(session_id, o));
  if (!ctx.history.empty() && !ctx.included.back()) {
    return Status::InvalidArgument("the new turn does not fit in the upstream's window (" +
                                   std::to_string(ctx.budget) + " tokens after the reply reserve, with " +
                                   std::to_string(ctx.total_tokens) + " taken by the system prompt and memories)");
  }
  llm::ChatRequest request;
  request.model = json::StringOr(*forward, "model");
  request.system_prompt = ctx.system_prompt;
  request.history = std::move(ctx.messages);
  request.options = upstream.options;
  STRATA_ASSIGN_OR_RETURN(std::string wire, llm::BuildRequestBody(upstream.kind, request));
  STRATA_ASSIGN_OR_RETURN(Json built, json::ParseUntrusted<Json>(wire, "assembled request"));
  (*forward)["messages"] = built["messages"];
  if (upstream.kind == llm::ProviderKind::kAnthropic) {
    if (const Json* system = json::Field(built, "system"); system != nullptr) {
      (*forward)["system"] = *system;
    } else {
      forward->erase("system");
    }
  }
  *prompt_tokens = ctx.total_tokens;

  PendingCommit out;
  out.turn = parsed.turn;
  for (size_t i = 0; i < ctx.history.size(); ++i) {
    out.tokens += ctx.message_tokens[i];
    out.turns += ctx.history[i].role == strata::Role::kUser ? 1 : 0;
  }
  return out;
}

void Server::Impl::LogReply(Engine* engine, const std::string& session_id, const llm::ProviderConfig& upstream,
                            bool streamed, std::string_view body, const PendingCommit& pending) {
  Result<llm::DecodedResponse> reply = streamed ? llm::DecodeSseText(upstream.kind, upstream.options, body)
                                                : llm::DecodeResponseBody(upstream.kind, upstream.options, body);
  if (!reply.ok()) {
    std::fprintf(stderr, "strata serve: session %s: the reply was not logged: %s\n", session_id.c_str(),
                 reply.status().ToString().c_str());
    return;
  }
  Status added = engine->AddMessages(session_id, std::vector<Message>{reply->message}).status();
  if (!added.ok()) {
    std::fprintf(stderr, "strata serve: session %s: %s\n", session_id.c_str(), added.ToString().c_str());
    return;
  }
  if (reply->usage) (void)engine->RecordUsage(session_id, reply->usage->total());
  BumpRevision(engine);
  // A reply that calls tools opens a group its results will close in the next turn: committing now would
  // archive the calls and orphan the results. The commit waits for a reply without calls.
  if (reply->message.tool_calls && !reply->message.tool_calls->empty()) return;
  const MessageTokenCounter& counter = Engine::Counter("o200k_base");
  int64_t tokens = pending.tokens + counter.CountMessages({&reply->message, 1});
  bool due = (options.commit_after_tokens > 0 && tokens >= options.commit_after_tokens) ||
             (options.commit_after_turns > 0 && pending.turns >= options.commit_after_turns);
  if (due) {
    CommitNow(engine, session_id);
  } else {
    NoteActivity(engine, session_id);
  }
}

Result<std::shared_ptr<Server::Impl::SessionTurn>> Server::Impl::BeginTurn(Engine* engine, const std::string& session_id) {
  std::lock_guard lock(idle_mu);
  if (!busy.insert({engine, session_id}).second) {
    return Status::FailedPrecondition("session " + session_id + " already has a turn in progress; send the next "
                                      "turn when its reply has ended");
  }
  return std::make_shared<SessionTurn>(this, engine, session_id);
}

Server::Impl::SessionTurn::~SessionTurn() { Release(); }

void Server::Impl::SessionTurn::Release() {
  std::lock_guard lock(impl->idle_mu);
  if (released) return;
  released = true;
  impl->busy.erase({engine, session_id});
}

void Server::Impl::CommitNow(Engine* engine, const std::string& session_id) {
  {
    std::lock_guard lock(idle_mu);
    idle.erase({engine, session_id});
  }
  if (engine->Commit(session_id, {.wait = false}).ok()) {
    metrics.Commit("accepted");
    BumpRevision(engine);
    WakeWorker();
  }
}

void Server::Impl::NoteActivity(Engine* engine, const std::string& session_id) {
  if (options.commit_after_idle.count() <= 0) return;
  std::lock_guard lock(idle_mu);
  idle[{engine, session_id}] = std::chrono::steady_clock::now();
}

void Server::Impl::CommitIdleSessions() {
  if (options.commit_after_idle.count() <= 0) return;
  std::vector<std::pair<Engine*, std::string>> due;
  auto now = std::chrono::steady_clock::now();
  {
    std::lock_guard lock(idle_mu);
    for (auto it = idle.begin(); it != idle.end();) {
      if (now - it->second >= options.commit_after_idle) {
        due.push_back(it->first);
        it = idle.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (const auto& [engine, session_id] : due) {
    if (engine->Commit(session_id, {.wait = false}).ok()) {
      metrics.Commit("accepted_idle");
      BumpRevision(engine);
    }
  }
}

}  // namespace strata::server
