// The model endpoints: POST /v1/chat/completions (OpenAI) and POST /v1/messages (Anthropic), in front of
// the configured upstream of the same format. Without a session header a request passes through as it
// is (its tokens counted exactly); with X-Strata-Session the client sends only its new turn, and the
// engine serves it (Engine::BeginTurn: the session assembled with recalled memories, summary, newest
// history, tool groups whole; the turn logged once the upstream accepts it; the reply logged and the session
// committed by policy). This file holds only the dialects, the streaming and HTTP.
#include <strings.h>

#include <algorithm>
#include <utility>

#include "server_impl.h"
#include "strata/engine/provider_config.h"
#include "strata/llm/chat_error.h"
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

// `message` with OpenAI's input_audio parts ({"data", "format"}) as the audio_url parts (a data: URL) of
// Strata's message model, which the OpenAI wire writes back as input_audio.
Json WithAudioAsUrls(const Json& message) {
  const Json* content = json::Field(message, "content");
  if (content == nullptr || !content->is_array()) return message;
  Json out = message;
  for (Json& part : out["content"]) {
    const Json* audio = json::Field(part, "input_audio");
    if (json::StringOr(part, "type") != "input_audio" || audio == nullptr || !audio->is_object()) continue;
    std::string format = json::StringOr(*audio, "format");
    std::string media_type = format == "mp3" ? "audio/mpeg" : "audio/" + format;
    part = Json{{"type", "audio_url"}, {"audio_url", {{"url", "data:" + media_type + ";base64," + json::StringOr(*audio, "data")}}}};
  }
  return out;
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
      rest.push_back(WithAudioAsUrls(m));
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

namespace {

// A server-sent event that the dialect's SDKs raise as an error: OpenAI's streams carry {"error": {...}} as
// data, Anthropic's an `error` event.
// The upstream's response headers that reach the client as they were: retry and rate-limit hints (OpenAI's
// and Anthropic's names).
constexpr std::string_view kUpstreamHintHeaders[] = {
    "retry-after",
    "retry-after-ms",
    "x-ratelimit-limit-requests",
    "x-ratelimit-limit-tokens",
    "x-ratelimit-remaining-requests",
    "x-ratelimit-remaining-tokens",
    "x-ratelimit-reset-requests",
    "x-ratelimit-reset-tokens",
    "anthropic-ratelimit-requests-limit",
    "anthropic-ratelimit-requests-remaining",
    "anthropic-ratelimit-requests-reset",
    "anthropic-ratelimit-tokens-limit",
    "anthropic-ratelimit-tokens-remaining",
    "anthropic-ratelimit-tokens-reset",
    "anthropic-ratelimit-input-tokens-limit",
    "anthropic-ratelimit-input-tokens-remaining",
    "anthropic-ratelimit-input-tokens-reset",
    "anthropic-ratelimit-output-tokens-limit",
    "anthropic-ratelimit-output-tokens-remaining",
    "anthropic-ratelimit-output-tokens-reset",
};

// The end of the server-sent event that starts at `from` in `s` (past its blank line, "\n\n" or
// "\r\n\r\n"), or npos when it is not whole yet.
size_t SseEventEnd(std::string_view s, size_t from) {
  size_t lf = s.find("\n\n", from), crlf = s.find("\r\n\r\n", from);
  return std::min(lf == std::string_view::npos ? lf : lf + 2, crlf == std::string_view::npos ? crlf : crlf + 4);
}

// Splits a stream of server-sent events into what may go to the client now and what is held: the events
// from the first that ends the stream (OpenAI's `data: [DONE]`, Anthropic's message_stop) on, and an event
// not yet whole.
class StreamEnds {
 public:
  // Takes the next bytes; returns those to write now.
  std::string Feed(std::string_view bytes) {
    pending_ += bytes;
    std::string out;
    size_t start = 0;
    for (size_t end; (end = SseEventEnd(pending_, start)) != std::string::npos;) {
      std::string_view event = std::string_view(pending_).substr(start, end - start);
      if (held_.empty() && !Ends(event)) {
        out += event;
      } else {
        held_ += event;
      }
      start = end;
    }
    pending_.erase(0, start);
    return out;
  }
  // What was held, and what was never a whole event.
  std::string Rest() {
    std::string out = std::move(held_) + std::move(pending_);
    held_.clear();
    pending_.clear();
    return out;
  }

 private:
  static bool Ends(std::string_view event) {
    for (size_t at = 0; at < event.size();) {
      size_t nl = event.find('\n', at);
      std::string_view line = event.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (line == "data: [DONE]" || line == "data:[DONE]" || line == "event: message_stop" ||
          line == "event:message_stop" || line.starts_with("data: {\"type\":\"message_stop\"") ||
          line.starts_with("data: {\"type\": \"message_stop\"")) {
        return true;
      }
      if (nl == std::string_view::npos) break;
      at = nl + 1;
    }
    return false;
  }
  std::string pending_, held_;
};

std::string StreamErrorEvent(Dialect dialect, const std::string& message) {
  if (dialect == Dialect::kAnthropic) {
    Json event = {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", message}}}};
    return "event: error\ndata: " + event.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
  }
  Json event = {{"error", {{"message", message}, {"type", "server_error"}, {"param", nullptr}, {"code", "stream_broken"}}}};
  return "data: " + event.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n\n";
}

// Drops the usage-only chunks ("choices": [] with "usage") of an OpenAI stream whose client did not ask for
// them: a session's turn asks the upstream for its usage (the session's usage mark), and a client must not
// receive chunks it did not ask for (`chunk.choices[0]` would fail on them). Events are passed on whole as
// soon as they are complete.
class UsageChunkFilter {
 public:
  std::string Feed(std::string_view in) {
    pending_ += in;
    std::string out;
    size_t start = 0;
    while (true) {
      size_t end = SseEventEnd(pending_, start);
      if (end == std::string::npos) break;
      std::string_view event(pending_.data() + start, end - start);
      if (!UsageOnly(event)) out += event;
      start = end;
    }
    pending_.erase(0, start);
    return out;
  }
  std::string Flush() { return std::exchange(pending_, std::string()); }

 private:
  static bool UsageOnly(std::string_view event) {
    if (event.rfind("data:", 0) != 0) return false;
    Json data = json::ParseOrDiscard<Json>(event.substr(5));
    const Json* choices = json::Field(data, "choices");
    return choices != nullptr && choices->is_array() && choices->empty() && json::Field(data, "usage") != nullptr;
  }

  std::string pending_;
};

// Anthropic's limit on cache_control breakpoints in one request.
constexpr int kMaxCacheBreakpoints = 4;

// Calls `visit` on each place a cache breakpoint may be in the request member `j`: the blocks of a tools or
// system array, and of a message's content (a tool_result's own content blocks too) in a messages array. A
// "cache_control" member deeper (in a tool's schema, a tool call's input) is the client's data, not a mark.
template <typename J, typename F>
void ForEachCacheable(J* j, F&& visit) {
  if (j == nullptr || !j->is_array()) return;
  for (auto& item : *j) {
    if (!item.is_object()) continue;
    visit(item);
    auto content = item.find("content");
    if (content == item.end() || !content->is_array()) continue;
    for (auto& block : *content) {
      if (!block.is_object()) continue;
      visit(block);
      auto inner = block.find("content");
      if (inner == block.end() || !inner->is_array()) continue;
      for (auto& part : *inner) {
        if (part.is_object()) visit(part);
      }
    }
  }
}

// The cache_control breakpoints of the request member `j` (null: none).
int CacheBreakpoints(const Json* j) {
  int n = 0;
  ForEachCacheable(j, [&](const Json& block) { n += block.contains("cache_control") ? 1 : 0; });
  return n;
}

void DropCacheBreakpoints(Json* j) {
  ForEachCacheable(j, [](Json& block) { block.erase("cache_control"); });
}

}  // namespace

// The reply to a turn, decoded from the upstream's body (streamed or not), handed to the engine, which logs
// it and commits by policy; what changed is announced to viewers, and a commit wakes the worker.
// A reply that cannot be read whole (a stream that ended before the upstream marked it complete, a line that
// is not JSON: invalid_response) is not logged, and the error says so: the caller tells the client, which
// must not take it for a whole reply either. Any other reply that is not logged (empty, blocked by the
// upstream's filter, or the upstream's own error event) is what the upstream answered: the client gets it as
// it is. A reply that did not end normally (cut at the token limit, stopped by a filter) is logged as the
// client got it, and the server's log says why it ended.
Status Server::Impl::FinishTurn(Engine* engine, Turn& turn, const llm::ProviderConfig& upstream, bool streamed,
                                std::string_view body) {
  Result<llm::DecodedResponse> reply = streamed ? llm::DecodeSseText(upstream.kind, upstream.options, body)
                                                : llm::DecodeResponseBody(upstream.kind, upstream.options, body);
  if (!reply.ok()) {
    std::fprintf(stderr, "strata serve: session %s: the reply was not logged: %s\n", turn.session().c_str(),
                 reply.status().ToString().c_str());
    turn.Release();
    const std::optional<llm::ChatErrorInfo> kind = llm::ChatErrorOf(reply.status());
    if (kind && kind->kind != llm::ChatErrorKind::kInvalidResponse) return Status::Ok();
    return Status(reply.status().code(), "the upstream's reply could not be read whole, and session " +
                                             turn.session() + " did not log it: " + reply.status().message());
  }
  if (llm::StopKindOf(reply->stop_reason) != llm::StopKind::kEnd) {
    std::fprintf(stderr, "strata serve: session %s: the reply ended with the stop reason %s (logged as sent)\n",
                 turn.session().c_str(), reply->stop_reason.c_str());
  }
  Result<TurnOutcome> done = turn.Finish(reply->message, reply->usage);
  if (!done.ok()) {
    std::fprintf(stderr, "strata serve: session %s: %s\n", turn.session().c_str(), done.status().ToString().c_str());
    return Status::Ok();  // The reply is whole; logging it failed (the server's own trouble, in its log).
  }
  BumpRevision(engine);
  if (done->committed) {
    metrics.Commit("accepted");
    WakeWorker();
  }
  return Status::Ok();
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
  bool strip_usage = false;  // Usage-only chunks asked for by Strata, not the client (UsageChunkFilter).
  if (!session_id.empty()) {
    // A session logs one reply: several choices would be logged as one (streamed, their deltas run together).
    if (const Json* n = json::Field(c.body, "n"); n != nullptr && !n->is_null() && !(n->is_number_integer() && *n == 1)) {
      return Status::InvalidArgument("\"n\" must be 1 with X-Strata-Session: a session logs one reply, not " + n->dump());
    }
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
    assembled.stream = stream;
    STRATA_ASSIGN_OR_RETURN(std::string wire, llm::BuildRequestBody(upstream.kind, assembled));
    STRATA_ASSIGN_OR_RETURN(Json built, json::ParseUntrusted<Json>(wire, "assembled request"));
    forward["messages"] = built["messages"];
    // The reply's usage is the session's usage mark; OpenAI streams it only when asked, which the provider
    // does unless its `stream_usage` is false (an upstream that refuses stream_options).
    if (const Json* usage = json::Field(built, "stream_options"); stream && usage != nullptr && usage->is_object()) {
      Json& stream_options = forward["stream_options"];
      if (!stream_options.is_object()) stream_options = Json::object();
      strip_usage = !(json::Field(stream_options, "include_usage") != nullptr && stream_options["include_usage"] == true);
      stream_options["include_usage"] = true;
    }
    if (upstream.kind == llm::ProviderKind::kAnthropic) {
      if (const Json* system = json::Field(built, "system"); system != nullptr) {
        forward["system"] = *system;
      } else {
        forward.erase("system");
      }
      // Anthropic takes at most four cache breakpoints: the client's own (on its tools) come first, and
      // Strata's (the last message, then the system prompt) are dropped where they would pass the limit.
      auto breakpoints = [&] {
        return CacheBreakpoints(json::Field(forward, "tools")) + CacheBreakpoints(json::Field(forward, "messages")) +
               CacheBreakpoints(json::Field(forward, "system"));
      };
      for (const char* ours : {"messages", "system"}) {
        if (breakpoints() > kMaxCacheBreakpoints && forward.contains(ours)) DropCacheBreakpoints(&forward[ours]);
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
  request.body = views::Dump(forward);
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
  // The upstream's back-off hints, which the SDKs read (retry-after) and clients budget by.
  for (std::string_view name : kUpstreamHintHeaders) {
    if (std::string_view value = response->header(name); !value.empty()) {
      c.res.headers.emplace_back(std::string(name), std::string(value));
    }
  }
  if (response->status() >= 400 || !stream) {
    // A whole body: the upstream's error (already in the client's format) or a non-streamed reply.
    STRATA_ASSIGN_OR_RETURN(std::string body, llm::ReadAll(*response));
    if (turn && response->status() < 400) STRATA_RETURN_IF_ERROR(FinishTurn(engine, *turn, upstream, false, body));
    c.res.body = std::move(body);
    return Json();
  }
  // Streamed: each event goes to the client as it arrives; the whole stream is decoded for the log at the end.
  std::shared_ptr<llm::HttpResponse> live(std::move(response));
  // The stream's end ([DONE], message_stop) is held back until the reply is in the session's log, so a client
  // that sends its next turn as soon as the stream ends finds the previous reply there (the turn ends before
  // it goes out). Every other event goes out at once: holding each chunk until the next arrived kept text the
  // model had written from the client while the model paused (reasoning, building a tool call).
  // An upstream may answer a streamed request with a whole JSON body: no comment or SSE error event may be
  // put into that, and the reply is logged from it as a whole.
  std::string type = c.res.content_type;
  std::transform(type.begin(), type.end(), type.begin(), [](unsigned char ch) { return std::tolower(ch); });
  const bool sse = type.find("text/event-stream") != std::string::npos;
  c.res.stream = [this, live, engine, upstream, slot, turn, dialect, strip_usage, sse](const ChunkWriter& write) {
    constexpr std::chrono::seconds kSignOfLife{2};
    constexpr size_t kMaxLoggedReply = 16 << 20;  // A longer reply is passed on but not logged.
    std::string all, chunk, held;
    bool too_long = false;
    UsageChunkFilter filter;
    StreamEnds ends;
    while (!shut_down.load()) {
      Result<bool> more = live->ReadFor(&chunk, kSignOfLife);
      if (!more.ok()) {
        // The upstream's stream broke: the client is told in its dialect's own error event (its SDK raises),
        // not given a clean end it would take for the whole reply. Nothing of the reply is logged; the
        // turn, logged already, is not logged again when the client retries it (Engine::BeginTurn).
        if (turn) turn->Release();
        if (!sse) return;  // A body cut short: the client sees the connection end before it.
        held = ends.Rest();
        if (!held.empty() && !write(held)) return;
        write(StreamErrorEvent(dialect, "the upstream's stream broke before the reply ended: " +
                                            std::string(more.status().message())));
        return;
      }
      if (!*more) break;
      if (chunk.empty()) {
        // The upstream is silent (a model reasoning, or building a long tool call). An SSE comment, which
        // every client skips, is the only way to learn that the client went away (a write to a closed
        // connection fails, at the latest the second): its session is free again within seconds, not at
        // the upstream's next word. It also keeps idle-timing proxies from cutting the stream.
        if (sse && !write(": keep-alive\n\n")) return;
        continue;
      }
      if (turn && !too_long) {
        all += chunk;
        too_long = all.size() > kMaxLoggedReply;
      }
      if (strip_usage) {
        chunk = filter.Feed(chunk);
        if (chunk.empty()) continue;
      }
      std::string now = ends.Feed(chunk);
      if (!now.empty() && !write(now)) return;  // The client went away: nothing of the reply is logged.
    }
    held = ends.Rest();
    if (strip_usage) held += filter.Flush();
    if (turn && !too_long) {
      if (Status finished = FinishTurn(engine, *turn, upstream, sse, all); !finished.ok()) {
        // Instead of the last chunk, which may hold the stream's clean end ([DONE], message_stop) that the
        // client's SDK would stop at without reading the error; a whole body is cut instead (its client
        // would take it for a reply the session holds).
        if (sse) write(StreamErrorEvent(dialect, std::string(finished.message())));
        return;
      }
    }
    if (turn && too_long) {
      std::fprintf(stderr, "strata serve: session %s: a reply over 16 MiB was not logged\n", turn->session().c_str());
      turn->Release();
    }
    if (!held.empty()) write(held);
  };
  return Json();
}

}  // namespace strata::server
