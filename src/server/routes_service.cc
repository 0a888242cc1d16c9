// The service routes (docs/api/openapi.yaml): health and readiness, metrics, API keys, token counting,
// prompt rendering, and MCP over Streamable HTTP.
#include "server_impl.h"
#include "strata/message/message_json.h"
#include "strata/prompt/value.h"

namespace strata::server {

void Server::Impl::AddServiceRoutes() {
  // ---- Service ----
  Add(Route("GET", "/health", [](Call&) -> Result<Json> { return Json{{"alive", true}}; }).NoKey());
  Add(Route("GET", "/ready", [this](Call&) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(Engine * engine, EngineFor("default"));
    STRATA_RETURN_IF_ERROR(engine->store().status());
    STRATA_RETURN_IF_ERROR(engine->sessions().status());
    return Json{{"ready", true}};
  }).NoKey());
  Add(Route("GET", "/metrics", [this](Call& c) -> Result<Json> {
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
  }));

  Add(Route("POST", "/api/v1/prompts/render", [](Call& c) -> Result<Json> {
    STRATA_ASSIGN_OR_RETURN(std::string id, c.Arg("id"));
    const Json* vars = json::Field(c.body, "vars");
    if (vars != nullptr && vars->is_null()) vars = nullptr;
    // Anything but an object was dropped without a word ("[1]" rendered as no variables).
    if (vars != nullptr && !vars->is_object()) {
      return Status::InvalidArgument("\"vars\" must be an object of the template's variables, not " +
                                     std::string(json::TypeName(*vars)));
    }
    STRATA_ASSIGN_OR_RETURN(prompt::Value values, prompt::Value::FromJson(vars == nullptr ? "{}" : vars->dump()));
    STRATA_ASSIGN_OR_RETURN(std::string text, c.engine->RenderPrompt(id, values));
    return Json{{"id", id}, {"text", text}};
  }).Takes("id").BodyOnly("vars").ReadOnly());
  Add(Route("POST", "/api/v1/tokens/count", [](Call& c) -> Result<Json> {
    // Absent is the default; "" is no encoding's name, refused as every other front end refuses it.
    STRATA_ASSIGN_OR_RETURN(std::optional<std::string> given, c.OptString("encoding"));
    std::string encoding = given.value_or(std::string(tokenizer::kDefaultEncoding));
    STRATA_ASSIGN_OR_RETURN(const MessageTokenCounter* counter, tokenizer::FindCounter(encoding));
    Json out = {{"encoding", encoding}};
    std::string warning;
    const Json* messages = json::Field(c.body, "messages");
    // One of the two: with both, the text was dropped without a word.
    if (messages != nullptr && json::Field(c.body, "text") != nullptr) {
      return Status::InvalidArgument("give \"text\" or \"messages\", not both");
    }
    if (messages != nullptr) {
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
  }).Takes("text messages encoding").BodyOnly("messages").ReadOnly());


  // ---- MCP, Streamable HTTP (McpHttpTransport, include/strata/server/mcp.h) ----
  Add(Route("POST", "/mcp", [this](Call& c) -> Result<Json> {
    c.raw = true;
    McpCaller caller{.reach = c.reach(), .user = c.id.user, .account = c.id.account,
                     .window = options.upstream_context_tokens, .on_commit = [this] {
                       metrics.Commit("accepted");
                       WakeWorker();
                     },
                     .on_change = [this, engine = c.engine] { BumpRevision(engine); }};
    std::string client = c.id.key_id + "|" + c.id.account + "|" + c.id.user;
    STRATA_ASSIGN_OR_RETURN(McpHttpReply reply, mcp->Post(c.engine, caller, client, c.req.Header("mcp-protocol-version"),
                                                          c.req.Header("mcp-session-id"), c.req.body));
    c.res.status = reply.status;
    if (!reply.session_id.empty()) c.res.headers.emplace_back("Mcp-Session-Id", reply.session_id);
    c.res.content_type = "application/json";
    c.res.body = std::move(reply.body);
    return Json();
  }).RawBody().ReadOnly());  // A tool that writes announces its change (McpCaller::on_change).
  Add(Route("GET", "/mcp", [](Call& c) -> Result<Json> {
    c.raw = true;
    c.res.status = 405;
    c.res.headers.emplace_back("Allow", "POST");
    std::string request_id;  // Set by Dispatch before the route runs.
    for (const auto& [name, value] : c.res.headers) {
      if (name == "X-Request-Id") request_id = value;
    }
    c.res.body = views::Dump(Json{{"status", "error"},
                                  {"error", {{"code", "invalid_argument"},
                                             {"message", "this MCP server opens no SSE stream; POST JSON-RPC messages to /mcp"},
                                             {"request_id", request_id}}}});
    return Json();
  }));

  // ---- Keys (root only) ----
  auto root_only = [](Call& c) -> Status {
    return c.id.role == Role::kRoot ? Status::Ok() : Status::PermissionDenied("managing keys needs the root key");
  };
  Add(Route("POST", "/api/v1/admin/keys", [this, root_only](Call& c) -> Result<Json> {
    STRATA_RETURN_IF_ERROR(root_only(c));
    if (!has_keys()) return Status::FailedPrecondition("this server has no root key; keys cannot be issued");
    STRATA_ASSIGN_OR_RETURN(std::string account, c.Arg("account", false));
    STRATA_ASSIGN_OR_RETURN(std::string user, c.Arg("user"));
    STRATA_ASSIGN_OR_RETURN(std::string role_name, c.Arg("role", false));
    STRATA_ASSIGN_OR_RETURN(Role role, ParseKeyRole(role_name.empty() ? "user" : role_name));
    STRATA_ASSIGN_OR_RETURN(auto issued, keys->Issue(account.empty() ? "default" : account, user, role));
    return Json{{"id", issued.first.id}, {"account", issued.first.account}, {"user", issued.first.user},
                {"role", std::string(RoleName(issued.first.role))}, {"key", issued.second}};
  }).Takes("account user role"));
  Add(Route("GET", "/api/v1/admin/keys", [this, root_only](Call& c) -> Result<Json> {
    STRATA_RETURN_IF_ERROR(root_only(c));
    STRATA_ASSIGN_OR_RETURN(auto issued_keys, keys->List());
    Json out = Json::array();
    for (const KeyInfo& k : issued_keys) {
      out.push_back({{"id", k.id}, {"account", k.account}, {"user", k.user},
                     {"role", std::string(RoleName(k.role))}, {"created_ms", k.created_ms}});
    }
    return out;
  }));
  Add(Route("DELETE", "/api/v1/admin/keys/{id}", [this, root_only](Call& c) -> Result<Json> {
    STRATA_RETURN_IF_ERROR(root_only(c));
    STRATA_RETURN_IF_ERROR(keys->Revoke(c.req.path_params.at(0)));
    return Json{{"revoked", c.req.path_params.at(0)}};
  }));
}

}  // namespace strata::server
