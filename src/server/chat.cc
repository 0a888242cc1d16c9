// The model endpoints: POST /v1/chat/completions (OpenAI) and POST /v1/messages (Anthropic), in front of
// the configured upstream of the same format. Without a session header a request passes through as it
// is (its tokens counted exactly); with X-Strata-Session the client sends only its new turn, and the
// engine serves it (Engine::BeginTurn: the session assembled with recalled memories, summary, newest
// history, tool groups whole; the turn logged once the upstream accepts it; the reply logged and the session
// committed by policy). This file holds only the dialects, the streaming and HTTP.
#include <strings.h>

#include <algorithm>

#include "server_impl.h"
#include "strata/engine/provider_config.h"
#include "strata/llm/http.h"
#include "strata/llm/wire.h"
#include "strata/message/message_json.h"

namespace strata::server {

namespace {

// A model request's messages as Strata messages, and its system prompt (OpenAI: the system and developer
// messages; Anthropic: "system").
struct ModelRequest {
  std::string system;
  std::vector<Message> turn;
};

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

void Server::Impl::AddModelRoutes() {
  // Read-only as routes: a pass-through request changes nothing; a session's turn announces its own changes.
  Add(Route("POST", "/v1/chat/completions", [this](Call& c) { return ModelEndpoint(c, Dialect::kOpenAI); }).Errors(Dialect::kOpenAI).ReadOnly());
  Add(Route("POST", "/v1/messages", [this](Call& c) { return ModelEndpoint(c, Dialect::kAnthropic); }).Errors(Dialect::kAnthropic).ReadOnly());
}

// The reply to a turn, decoded from the upstream's body (streamed or not), handed to the engine, which logs
// it and commits by policy; what changed is announced to viewers, and a commit wakes the worker.
void Server::Impl::FinishTurn(Engine* engine, Turn& turn, const llm::ProviderConfig& upstream, bool streamed,
                              std::string_view body) {
  Result<llm::DecodedResponse> reply = streamed ? llm::DecodeSseText(upstream.kind, upstream.options, body)
                                                : llm::DecodeResponseBody(upstream.kind, upstream.options, body);
  if (!reply.ok()) {
    std::fprintf(stderr, "strata serve: session %s: the reply was not logged: %s\n", turn.session().c_str(),
                 reply.status().ToString().c_str());
    turn.Release();
    return;
  }
  Result<TurnOutcome> done = turn.Finish(reply->message, reply->usage);
  if (!done.ok()) {
    std::fprintf(stderr, "strata serve: session %s: %s\n", turn.session().c_str(), done.status().ToString().c_str());
    return;
  }
  BumpRevision(engine);
  if (done->committed) {
    metrics.Commit("accepted");
    WakeWorker();
  }
}

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
  // A session-mode turn: the engine assembles it (memories, summary, newest history, tool groups whole);
  // the server only writes it in the upstream's format over the client's own body.
  std::shared_ptr<Turn> turn;
  if (!session_id.empty()) {
    TurnRequest request;
    request.turn = parsed->turn;
    request.system = parsed->system;
    request.max_context_tokens = options.upstream_context_tokens;
    if (std::string header = c.req.Header("x-strata-max-context"); !header.empty()) {
      char* end = nullptr;
      errno = 0;
      long long v = std::strtoll(header.c_str(), &end, 10);
      if (*end != '\0' || v <= 0 || errno == ERANGE) {
        return Status::InvalidArgument("X-Strata-Max-Context must be a positive integer");
      }
      request.max_context_tokens = v;
    }
    // The reply the client asked room for (at most half the window); none asked: the engine's default.
    const Json* asked = json::Field(c.body, "max_completion_tokens");
    if (asked == nullptr || !asked->is_number_integer()) asked = json::Field(c.body, "max_tokens");
    if (asked != nullptr && asked->is_number_integer()) {
      request.reserve_for_reply = std::clamp<int64_t>(asked->get<int64_t>(), 0, request.max_context_tokens / 2);
    }
    if (const Json* tools = json::Field(c.body, "tools"); tools != nullptr) {
      request.reserved_tokens = tokenizer::CountText(tokenizer::kDefaultEncoding, tools->dump());
    }
    request.reach = ReachOf(c.id);
    request.user = c.req.Header("x-strata-user");
    request.agent = c.req.Header("x-strata-agent");
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Turn> begun, c.engine->BeginTurn(session_id, std::move(request)));
    turn = std::move(begun);
    const SessionContext& ctx = turn->context();
    llm::ChatRequest assembled;
    assembled.model = model;
    assembled.system_prompt = ctx.system_prompt;
    assembled.history = ctx.messages;
    assembled.options = upstream.options;
    STRATA_ASSIGN_OR_RETURN(std::string wire, llm::BuildRequestBody(upstream.kind, assembled));
    STRATA_ASSIGN_OR_RETURN(Json built, json::ParseUntrusted<Json>(wire, "assembled request"));
    forward["messages"] = built["messages"];
    if (upstream.kind == llm::ProviderKind::kAnthropic) {
      if (const Json* system = json::Field(built, "system"); system != nullptr) {
        forward["system"] = *system;
      } else {
        forward.erase("system");
      }
    }
    prompt_tokens = ctx.total_tokens;
  } else if (parsed.ok()) {
    const MessageTokenCounter& counter = tokenizer::CounterFor(tokenizer::kDefaultEncoding);
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
  Engine* engine = c.engine;
  if (turn && response->status() < 400) {
    STRATA_RETURN_IF_ERROR(turn->Accept());
    BumpRevision(engine);
  }

  c.raw = true;
  if (prompt_tokens >= 0) c.res.headers.emplace_back("X-Strata-Prompt-Tokens", std::to_string(prompt_tokens));
  if (turn) c.res.headers.emplace_back("X-Strata-Session", session_id);
  c.res.status = response->status();
  std::string content_type(response->header("content-type"));
  c.res.content_type = content_type.empty() ? "application/json" : content_type;
  if (std::string id(response->header("request-id")); !id.empty()) c.res.headers.emplace_back("request-id", id);
  if (response->status() >= 400 || !stream) {
    // A whole body: the upstream's error (already in the client's format) or a non-streamed reply.
    STRATA_ASSIGN_OR_RETURN(std::string body, llm::ReadAll(*response));
    if (turn && response->status() < 400) FinishTurn(engine, *turn, upstream, false, body);
    c.res.body = std::move(body);
    return Json();
  }
  // Streamed: each chunk goes to the client as it arrives; the whole stream is decoded for the log at the end.
  std::shared_ptr<llm::HttpResponse> live(std::move(response));
  // The last chunk is held back until the reply is in the session's log, so a client that sends its next
  // turn as soon as the stream ends finds the previous reply there (the turn ends before it goes out).
  c.res.stream = [this, live, engine, upstream, slot, turn](const ChunkWriter& write) {
    constexpr size_t kMaxLoggedReply = 16 << 20;  // A longer reply is passed on but not logged.
    std::string all, chunk, held;
    bool too_long = false;
    while (!shut_down.load()) {
      Result<bool> more = live->Read(&chunk);
      if (!more.ok() || !*more) break;
      if (turn && !too_long) {
        all += chunk;
        too_long = all.size() > kMaxLoggedReply;
      }
      if (!held.empty() && !write(held)) return;  // The client went away: nothing of the reply is logged.
      held.swap(chunk);
    }
    if (turn && !too_long) FinishTurn(engine, *turn, upstream, true, all);
    if (turn && too_long) {
      std::fprintf(stderr, "strata serve: session %s: a reply over 16 MiB was not logged\n", turn->session().c_str());
      turn->Release();
    }
    if (!held.empty()) write(held);
  };
  return Json();
}

}  // namespace strata::server
