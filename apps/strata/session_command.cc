// `strata session ...` and the model-backed `strata memory remember|history|consolidate`: sessions, their
// two-phase commit and the memory pipeline (docs/sessions.md). Everything lives under --data DIR: the
// context store, sessions/, queue.db (phase-2 jobs) and audit.db (the memory audit trail).
#include <CLI/CLI.hpp>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "provider_flags.h"
#include "strata/memory/embedder.h"
#include "strata/memory/sqlite_store.h"
#include "strata/message/message_json.h"
#include "strata/session/memory_pipeline.h"

namespace strata::cli {
namespace {

using Json = nlohmann::json;

struct SessionArgs {
  std::string data = "strata-data";
  std::string embedder = "local";
  std::vector<std::string> prompt_dirs;
  ProviderFlags provider;
  std::string id, user, agent, text, role = "user", message, scope, category, uri;
  bool wait = false;
};

// Everything a command may need, opened on demand.
struct Env {
  std::unique_ptr<session::JobQueue> queue;
  std::unique_ptr<session::Sessions> sessions;
  std::unique_ptr<memory::ContextStore> store;
  std::unique_ptr<session::AuditLog> audit;
  std::unique_ptr<llm::ChatProvider> model;
  std::unique_ptr<prompt::PromptLibrary> prompts;
  std::unique_ptr<session::MemoryPipeline> pipeline;
};

Status OpenBasics(const SessionArgs& a, Env& env) {
  STRATA_ASSIGN_OR_RETURN(env.queue, session::OpenJobQueue(a.data + "/queue.db"));
  STRATA_ASSIGN_OR_RETURN(env.sessions, session::OpenSessions(a.data, {.queue = env.queue.get()}));
  return Status::Ok();
}

Status OpenPipeline(const SessionArgs& a, Env& env) {
  if (!env.queue) STRATA_RETURN_IF_ERROR(OpenBasics(a, env));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<memory::Embedder> embedder, memory::EmbedderFromSpec(a.embedder));
  STRATA_ASSIGN_OR_RETURN(env.store, memory::OpenSqliteStore(a.data, {.embedder = std::move(embedder)}));
  STRATA_ASSIGN_OR_RETURN(env.audit, session::OpenAuditLog(a.data + "/audit.db"));
  STRATA_ASSIGN_OR_RETURN(Json config, LoadConfig(a.provider));
  STRATA_ASSIGN_OR_RETURN(env.model, MakeProvider(a.provider, config));
  // Earlier directories override later ones: --prompts, then $STRATA_PROMPTS, then the shipped templates.
  std::vector<std::string> dirs = a.prompt_dirs;
  if (const char* extra = std::getenv("STRATA_PROMPTS"); extra != nullptr && *extra != '\0') dirs.push_back(extra);
  dirs.push_back(STRATA_SHIPPED_PROMPTS_DIR);
  env.prompts = std::make_unique<prompt::PromptLibrary>(dirs);
  env.pipeline =
      std::make_unique<session::MemoryPipeline>(*env.sessions, *env.store, *env.model, *env.prompts, *env.audit);
  return Status::Ok();
}

Json InfoJson(const session::SessionInfo& s) {
  return {{"id", s.id},
          {"user", s.user},
          {"agent", s.agent},
          {"abstract", s.abstract_text},
          {"overview", s.overview},
          {"contexts", s.contexts},
          {"stats",
           {{"messages", s.stats.messages},
            {"turns", s.stats.turns},
            {"tokens", s.stats.tokens},
            {"contexts_used", s.stats.contexts_used},
            {"skills_used", s.stats.skills_used},
            {"memories_extracted", s.stats.memories_extracted},
            {"commits", s.stats.commits}}}};
}

Json ChangesJson(const std::vector<session::MemoryChange>& changes) {
  Json out = Json::array();
  for (const auto& c : changes) out.push_back({{"action", c.action}, {"uri", c.uri}, {"reason", c.reason}});
  return out;
}

Status RunSession(const std::string& cmd, const SessionArgs& a) {
  Env env;
  STRATA_RETURN_IF_ERROR(OpenBasics(a, env));
  session::Sessions& sessions = *env.sessions;
  if (cmd == "new") {
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, sessions.Create(a.user, a.agent, a.id));
    std::cout << InfoJson(info).dump() << "\n";
    return Status::Ok();
  }
  if (cmd == "list") {
    STRATA_ASSIGN_OR_RETURN(auto all, sessions.List());
    for (const auto& s : all) std::cout << InfoJson(s).dump() << "\n";
    return Status::Ok();
  }
  if (cmd == "add") {
    std::vector<Message> messages;
    if (!a.text.empty()) {
      Message m = a.role == "assistant" ? Message::Assistant(a.text) : Message::User(a.text);
      if (a.role != "user" && a.role != "assistant") {
        return Status::InvalidArgument("--role must be user or assistant, got '" + a.role + "'");
      }
      messages.push_back(std::move(m));
    } else {
      std::string json = a.message;
      if (json.empty() || json == "-") {
        STRATA_ASSIGN_OR_RETURN(json, ReadStdin());
      }
      STRATA_ASSIGN_OR_RETURN(messages, ParseMessages(json));
    }
    for (const Message& m : messages) STRATA_RETURN_IF_ERROR(sessions.Add(a.id, m));
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, sessions.Get(a.id));
    std::cout << InfoJson(info).dump() << "\n";
    return Status::Ok();
  }
  if (cmd == "show") {
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, sessions.Get(a.id));
    STRATA_ASSIGN_OR_RETURN(std::vector<Message> messages, sessions.Messages(a.id));
    Json out = InfoJson(info);
    out["messages"] = Json::array();
    for (const Message& m : messages) out["messages"].push_back(Json::parse(MessageToJson(m)));
    std::cout << out.dump() << "\n";
    return Status::Ok();
  }
  if (cmd == "status") {
    STRATA_ASSIGN_OR_RETURN(auto archives, sessions.Archives(a.id));
    STRATA_ASSIGN_OR_RETURN(auto jobs, env.queue->List(std::nullopt, a.id));
    Json out = {{"session", a.id}, {"archives", Json::array()}, {"jobs", Json::array()}};
    for (const auto& ar : archives) {
      Json j = {{"archive", ar.number}, {"state", session::ArchiveStateName(ar.state)}, {"messages", ar.messages}};
      if (!ar.error.empty()) j["error"] = ar.error;
      out["archives"].push_back(j);
    }
    for (const auto& job : jobs) {
      Json j = {{"id", job.id},
                {"state", session::JobStateName(job.state)},
                {"attempts", job.attempts},
                {"payload", Json::parse(job.payload, nullptr, false)}};
      if (!job.last_error.empty()) j["last_error"] = job.last_error;
      out["jobs"].push_back(j);
    }
    std::cout << out.dump() << "\n";
    return Status::Ok();
  }
  if (cmd == "commit") {
    STRATA_ASSIGN_OR_RETURN(session::CommitTicket ticket, sessions.Commit(a.id));
    Json out = {{"session", a.id}, {"archive", ticket.archive}, {"messages", ticket.messages}, {"job", ticket.job_id}};
    if (a.wait) {
      STRATA_RETURN_IF_ERROR(OpenPipeline(a, env));
      STRATA_RETURN_IF_ERROR(env.pipeline->RunPending(*env.queue).status());
      STRATA_ASSIGN_OR_RETURN(auto archives, sessions.Archives(a.id));
      for (const auto& ar : archives) {
        if (ar.number != ticket.archive) continue;
        out["state"] = session::ArchiveStateName(ar.state);
        if (ar.state != session::ArchiveState::kDone) {
          std::cout << out.dump() << "\n";
          return Status::Unavailable("phase 2 of archive " + std::to_string(ar.number) + " did not finish: " +
                                     (ar.error.empty() ? "it will be retried by `strata session work`" : ar.error));
        }
      }
      STRATA_ASSIGN_OR_RETURN(session::CommitDiff diff, env.pipeline->ProcessArchive(a.id, ticket.archive));
      out["diff"] = Json::parse(diff.ToJson());
    }
    std::cout << out.dump() << "\n";
    return Status::Ok();
  }
  if (cmd == "work") {
    STRATA_RETURN_IF_ERROR(OpenPipeline(a, env));
    STRATA_RETURN_IF_ERROR(env.queue->ReleaseRunning());  // The only worker: a crash's jobs are ours to resume.
    STRATA_ASSIGN_OR_RETURN(int done, env.pipeline->RunPending(*env.queue));
    STRATA_ASSIGN_OR_RETURN(auto pending, env.queue->List(session::JobState::kPending));
    STRATA_ASSIGN_OR_RETURN(auto dead, env.queue->List(session::JobState::kDead));
    std::cout << Json{{"completed", done}, {"pending", pending.size()}, {"dead", dead.size()}}.dump() << "\n";
    return Status::Ok();
  }
  return Status::Internal("unknown session command " + cmd);
}

Status RunMemory(const std::string& cmd, const SessionArgs& a) {
  Env env;
  if (cmd == "history") {
    STRATA_ASSIGN_OR_RETURN(env.audit, session::OpenAuditLog(a.data + "/audit.db"));
    STRATA_ASSIGN_OR_RETURN(memory::Uri uri, memory::Uri::Parse(a.uri));
    STRATA_ASSIGN_OR_RETURN(auto entries, env.audit->History(uri.str()));
    for (const auto& e : entries) {
      std::cout << Json{{"at_ms", e.at_ms},   {"action", e.action}, {"source", e.source},
                        {"reason", e.reason}, {"before", e.before}, {"after", e.after}}
                       .dump()
                << "\n";
    }
    return Status::Ok();
  }
  STRATA_RETURN_IF_ERROR(OpenPipeline(a, env));
  std::vector<session::MemoryChange> changes;
  if (cmd == "remember") {
    std::string text = a.text;
    if (text.empty() || text == "-") {
      STRATA_ASSIGN_OR_RETURN(text, ReadStdin());
    }
    STRATA_ASSIGN_OR_RETURN(changes, env.pipeline->Remember(a.scope, text, a.category));
  } else {
    STRATA_ASSIGN_OR_RETURN(changes, env.pipeline->Consolidate(a.uri));
  }
  std::cout << ChangesJson(changes).dump() << "\n";
  return Status::Ok();
}

void AddCommon(CLI::App* cmd, SessionArgs* a, bool model, bool data = true) {
  if (data) {
    cmd->add_option("--data", a->data, "Data directory (default ./strata-data)");
    if (model) cmd->add_option("--embedder", a->embedder, "local[:DIM], openai:MODEL, ollama:MODEL, gemini:MODEL");
  }
  if (!model) return;
  cmd->add_option("--prompts", a->prompt_dirs, "Template directories that override the shipped ones (by id)");
  AddProviderFlags(cmd, &a->provider);
}

}  // namespace

void AddSessionCommand(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<SessionArgs>();
  CLI::App* cmd = app.add_subcommand("session", "Sessions: messages, two-phase commit into long-term memory");
  cmd->require_subcommand(1);
  cmd->add_option("--data", a->data, "Data directory (default ./strata-data)");
  auto sub = [&](const char* name, const char* help, bool model) {
    CLI::App* s = cmd->add_subcommand(name, help);
    AddCommon(s, a.get(), model);
    s->callback([a, exit_code, name = std::string(name)] {
      Status st = RunSession(name, *a);
      *exit_code = st.ok() ? 0 : Fail(st);
    });
    return s;
  };
  CLI::App* n = sub("new", "Create a session", false);
  n->add_option("--user", a->user, "Owner user id");
  n->add_option("--agent", a->agent, "Owner agent id");
  n->add_option("--id", a->id, "Session id (default: generated)");
  sub("list", "List sessions", false);
  CLI::App* add = sub("add", "Append messages (JSON from MESSAGE or stdin, or --text)", false);
  add->add_option("ID", a->id)->required();
  add->add_option("MESSAGE", a->message, "A message object or array (default: stdin)");
  add->add_option("--text", a->text, "A plain text message instead");
  add->add_option("--role", a->role, "Role of --text: user (default) or assistant");
  sub("show", "Print a session's record and current messages", false)->add_option("ID", a->id)->required();
  sub("status", "Print a session's archives and phase-2 jobs", false)->add_option("ID", a->id)->required();
  CLI::App* commit = sub("commit", "Archive the current messages and queue phase 2", true);
  commit->add_option("ID", a->id)->required();
  commit->add_flag("--wait", a->wait, "Run phase 2 now and print what it changed");
  sub("work", "Run queued phase-2 jobs (summaries, extraction, dedup)", true);

  // `strata memory --data DIR --embedder SPEC remember ...`: the memory command's own options apply.
  CLI::App* mem = app.get_subcommand("memory");
  auto msub = [&](const char* name, const char* help, bool model) {
    CLI::App* s = mem->add_subcommand(name, help);
    AddCommon(s, a.get(), model, /*data=*/false);
    s->callback([a, mem, exit_code, name = std::string(name)] {
      if (mem->get_option("--data")->count() > 0) a->data = mem->get_option("--data")->as<std::string>();
      if (mem->get_option("--embedder")->count() > 0) a->embedder = mem->get_option("--embedder")->as<std::string>();
      Status st = RunMemory(name, *a);
      *exit_code = st.ok() ? 0 : Fail(st);
    });
    return s;
  };
  CLI::App* remember = msub("remember", "Remember TEXT about a user or agent now, through dedup", true);
  remember->add_option("SCOPE", a->scope, "strata://user/<id> or strata://agent/<id>")->required();
  remember->add_option("TEXT", a->text, "The fact (default: stdin)");
  remember->add_option("--category", a->category, "Category (default: the model decides)");
  msub("history", "The audit trail of one memory", false)->add_option("URI", a->uri)->required();
  msub("consolidate", "Merge near-duplicate memories under URI", true)->add_option("URI", a->uri)->required();
}

}  // namespace strata::cli
