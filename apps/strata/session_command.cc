// `strata session ...` and the model-backed `strata memory remember|history|consolidate`: sessions, their
// two-phase commit and the memory pipeline (docs/sessions.md), through the engine. Everything lives under
// --data DIR: the context store, sessions/, queue.db (phase-2 jobs) and audit.db (the memory audit trail).
#include <CLI/CLI.hpp>
#include <iostream>
#include <memory>

#include "cli_util.h"
#include "commands.h"
#include "provider_flags.h"
#include "strata/engine/engine.h"
#include "strata/engine/views.h"
#include "strata/message/message_json.h"

namespace strata::cli {
namespace {

using views::Json;

struct SessionArgs {
  std::string data = "strata-data";
  std::string embedder;  // Empty: the store's own (EngineOptions::embedder).
  std::vector<std::string> prompt_dirs;
  ProviderSettings provider;
  std::string id, user, agent, text, role = "user", message, scope, category, uri, to, focus, encoding = "o200k_base";
  bool wait = false, force = false, commit = false;
  std::string file, format, tag;
  int archive = 0;
  int64_t checkpoint = -1, max_tokens = 128'000, tokens = 0;
  std::optional<int64_t> reserve;  // Unset: the engine's default (DefaultReplyReserve).
  // Whether the text was given at all: an empty one given is that text, not a request to read stdin.
  CLI::Option* add_text = nullptr;
  CLI::Option* remember_text = nullptr;
};

Result<std::unique_ptr<Engine>> OpenEngine(const SessionArgs& a) {
  return Engine::Open({.data_dir = a.data,
                       .embedder = a.embedder,
                       .provider = a.provider,
                       .on_model_retry = WarnRetry,
                       .prompt_dirs = a.prompt_dirs});
}

void Print(const Json& j) { std::cout << views::Dump(j) << "\n"; }

Status RunSession(const std::string& cmd, const SessionArgs& a) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, OpenEngine(a));
  if (cmd == "new") {
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, engine->CreateSession(a.user, a.agent, a.id));
    Print(views::SessionView(info));
    return Status::Ok();
  }
  if (cmd == "import") {
    STRATA_ASSIGN_OR_RETURN(session::ChatExportFormat format, session::ParseChatExportFormat(a.format));
    STRATA_ASSIGN_OR_RETURN(session::ChatExport exported, session::ReadChatExport(a.file, format));
    STRATA_ASSIGN_OR_RETURN(ChatImportReport report, engine->ImportConversations(exported, a.user, a.agent, a.commit));
    Print(views::ChatImportView(report));
    std::cerr << "imported " << report.imported.size() << ", unchanged " << report.unchanged.size() << ", skipped "
              << report.skipped.size() << "\n";
    return Status::Ok();
  }
  if (cmd == "list") {
    STRATA_ASSIGN_OR_RETURN(auto all, engine->ListSessions());
    for (const auto& s : all) Print(views::SessionView(s));
    return Status::Ok();
  }
  if (cmd == "add") {
    std::vector<Message> messages;
    if (a.add_text->count() > 0) {
      if (a.role != "user" && a.role != "assistant") {
        return Status::InvalidArgument("--role must be user or assistant, got '" + a.role + "'");
      }
      messages.push_back(a.role == "assistant" ? Message::Assistant(a.text) : Message::User(a.text));
    } else {
      std::string json = a.message;
      if (json.empty() || json == "-") {
        STRATA_ASSIGN_OR_RETURN(json, ReadStdin());
      }
      STRATA_ASSIGN_OR_RETURN(messages, ParseMessages(json));
    }
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, engine->AddMessages(a.id, messages));
    Print(views::SessionView(info));
    return Status::Ok();
  }
  if (cmd == "show") {
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, engine->GetSession(a.id));
    STRATA_ASSIGN_OR_RETURN(std::vector<Message> messages, engine->SessionMessages(a.id));
    Print(views::SessionView(info, &messages));
    return Status::Ok();
  }
  if (cmd == "status") {
    STRATA_ASSIGN_OR_RETURN(SessionStatus status, engine->GetSessionStatus(a.id));
    Print(views::SessionStatusView(status));
    return Status::Ok();
  }
  if (cmd == "commit") {
    STRATA_ASSIGN_OR_RETURN(CommitOutcome outcome, engine->Commit(a.id, {.wait = a.wait}));
    Print(views::CommitView(a.id, outcome));
    return outcome.phase2;
  }
  if (cmd == "diff") {
    STRATA_ASSIGN_OR_RETURN(session::CommitDiff diff, engine->ArchiveDiff(a.id, a.archive));
    Print(views::CommitDiffView(diff));
    return Status::Ok();
  }
  if (cmd == "work") {
    STRATA_ASSIGN_OR_RETURN(WorkReport report, engine->Work());
    Print({{"completed", report.completed}, {"dead", report.dead}, {"pending", report.pending}});
    return Status::Ok();
  }
  if (cmd == "retry") {
    STRATA_ASSIGN_OR_RETURN(int requeued, engine->Retry(a.id));
    Print({{"requeued", requeued}});
    return Status::Ok();
  }
  if (cmd == "checkpoint") {
    STRATA_ASSIGN_OR_RETURN(session::CheckpointInfo checkpoint, engine->Checkpoint(a.id));
    Print(views::CheckpointView(a.id, checkpoint));
    return Status::Ok();
  }
  if (cmd == "system-prompt") {
    STRATA_RETURN_IF_ERROR(engine->SetSystemPrompt(a.id, a.text));
    Print({{"session", a.id}, {"system_prompt", a.text}});
    return Status::Ok();
  }
  if (cmd == "usage") {
    STRATA_RETURN_IF_ERROR(engine->RecordUsage(a.id, a.tokens));
    Print({{"session", a.id}, {"tokens", a.tokens}});
    return Status::Ok();
  }
  if (cmd == "log") {
    STRATA_ASSIGN_OR_RETURN(session::SessionLog log, engine->GetSessionLog(a.id));
    for (const std::string& damaged : log.damage) std::fprintf(stderr, "warning: %s\n", damaged.c_str());
    Print(views::SessionLogView(a.id, log));
    return Status::Ok();
  }
  if (cmd == "revert") {
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, engine->Revert(a.id, {a.checkpoint, a.tag}));
    Print(views::SessionView(info));
    return Status::Ok();
  }
  if (cmd == "fork") {
    std::optional<session::CheckpointRef> at;
    if (a.checkpoint >= 0) {
      at = session::CheckpointRef{a.checkpoint, a.tag};
    } else if (!a.tag.empty()) {
      return Status::InvalidArgument("--tag names a checkpoint: give it with --at");
    }
    STRATA_ASSIGN_OR_RETURN(session::SessionInfo info, engine->Fork(a.id, a.to, at));
    Print(views::SessionView(info));
    return Status::Ok();
  }
  if (cmd == "compact") {
    STRATA_ASSIGN_OR_RETURN(SessionCompaction done, engine->CompactSession(a.id, a.focus));
    Print(views::CompactionView(done));
    return Status::Ok();
  }
  if (cmd == "context") {
    SessionContextOptions o;
    o.max_context_tokens = a.max_tokens;
    o.reserve_for_reply = a.reserve;
    o.encoding = a.encoding;
    STRATA_ASSIGN_OR_RETURN(SessionContext ctx, engine->AssembleSession(a.id, o));
    Print(views::SessionContextView(a.id, ctx));
    return Status::Ok();
  }
  if (cmd == "delete") {
    STRATA_RETURN_IF_ERROR(engine->DeleteSession(a.id, a.force));
    Print({{"deleted", a.id}});
    return Status::Ok();
  }
  return Status::Internal("unknown session command " + cmd);
}

Status RunMemory(const std::string& cmd, const SessionArgs& a) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, OpenEngine(a));
  if (cmd == "history") {
    STRATA_ASSIGN_OR_RETURN(auto entries, engine->MemoryHistory(a.uri));
    for (const auto& e : entries) {
      Result<std::optional<session::SessionInfo>> live = engine->AuditSession(e);
      Print(views::AuditEntryView(e, live.ok() && live->has_value() ? (*live)->id : ""));
    }
    return Status::Ok();
  }
  std::vector<session::MemoryChange> changes;
  if (cmd == "remember") {
    std::string text = a.text;
    if (a.remember_text->count() == 0 || text == "-") {
      STRATA_ASSIGN_OR_RETURN(text, ReadStdin());
    }
    STRATA_ASSIGN_OR_RETURN(changes, engine->Remember(a.scope, text, a.category));
  } else {
    STRATA_ASSIGN_OR_RETURN(changes, engine->Consolidate(a.uri));
  }
  Print(views::ChangesView(changes));
  return Status::Ok();
}

void AddCommon(CLI::App* cmd, SessionArgs* a, bool model, bool data = true) {
  if (data) {
    cmd->add_option("--data", a->data, "Data directory or postgres:// URL (default ./strata-data)");
    if (model) cmd->add_option("--embedder", a->embedder, kEmbedderHelp);
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
  cmd->add_option("--data", a->data, "Data directory or postgres:// URL (default ./strata-data)");
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
  CLI::App* import = sub("import", "Import a chat export's conversations as sessions of --user", false);
  import->add_option("FILE", a->file, "conversations.json, context.jsonl or a JSONL file")->required();
  import->add_option("--format", a->format, "chatgpt, claude, kimi or openai-jsonl")->required();
  import->add_option("--user", a->user, "Whose sessions they become")->required();
  import->add_option("--agent", a->agent, "Owner agent id");
  import->add_flag("--commit", a->commit, "Commit each imported session (phase 2 queued: its memories)");
  CLI::App* add = sub("add", "Append messages (JSON from MESSAGE or stdin, or --text)", false);
  add->add_option("ID", a->id)->required();
  add->add_option("MESSAGE", a->message, "A message object or array (default: stdin)");
  a->add_text = add->add_option("--text", a->text, "A plain text message instead");
  add->add_option("--role", a->role, "Role of --text: user (default) or assistant");
  sub("show", "Print a session's record and current messages", false)->add_option("ID", a->id)->required();
  sub("status", "Print a session's archives and phase-2 jobs", false)->add_option("ID", a->id)->required();
  CLI::App* commit = sub("commit", "Archive the current messages and queue phase 2", true);
  commit->add_option("ID", a->id)->required();
  commit->add_flag("--wait", a->wait, "Run this session's phase 2 now and print what it changed (other sessions' jobs are left to the workers)");
  CLI::App* diff = sub("diff", "Print what phase 2 changed for one archive (as commit --wait prints it)", false);
  diff->add_option("ID", a->id)->required();
  diff->add_option("ARCHIVE", a->archive, "The archive's number (a commit's \"archive\")")->required()->check(Positive());
  sub("work", "Run queued phase-2 jobs (summaries, extraction, dedup)", true);
  sub("checkpoint", "Mark the current end of a session's messages; prints the checkpoint's id and tag", false)
      ->add_option("ID", a->id)->required();
  sub("log", "Print a session's current log: messages, checkpoints, usage marks, system prompt, rotations", false)
      ->add_option("ID", a->id)->required();
  CLI::App* prompt = sub("system-prompt", "Set the system prompt of a session's log", false);
  prompt->add_option("ID", a->id)->required();
  prompt->add_option("PROMPT", a->text)->required();
  CLI::App* usage = sub("usage", "Record the context size a provider reported (a usage mark)", false);
  usage->add_option("ID", a->id)->required();
  usage->add_option("TOKENS", a->tokens)->required()->check(NonNegative());
  CLI::App* revert = sub("revert", "Drop a checkpoint and every message after it (the old log is kept)", false);
  revert->add_option("ID", a->id)->required();
  revert->add_option("CHECKPOINT", a->checkpoint)->required()->check(NonNegative());
  revert->add_option("--tag", a->tag, "Only if the checkpoint still has this tag (as `session checkpoint` printed it)");
  CLI::App* fork = sub("fork", "Copy a session (owners, system prompt, messages) into a new one", false);
  fork->add_option("ID", a->id)->required();
  fork->add_option("--to", a->to, "The new session's id (default: generated)");
  fork->add_option("--at", a->checkpoint, "Copy only the messages before this checkpoint")->check(NonNegative());
  fork->add_option("--tag", a->tag, "With --at: only if that checkpoint still has this tag");
  CLI::App* compact = sub("compact", "Fold older messages into a summary with the model, keeping the newest turns", true);
  compact->add_option("ID", a->id)->required();
  compact->add_option("--focus", a->focus, "What the summary must keep");
  CLI::App* context = sub("context", "The assembled window for a budget, with tokens per section and per message", true);
  context->add_option("ID", a->id)->required();
  context->add_option("--max-tokens", a->max_tokens, "The model's window (default 128000)")->check(Positive());
  context->add_option("--reserve", a->reserve, "Tokens kept for the reply (default 4096, at most a quarter of the window)")->check(NonNegative());
  context->add_option("--encoding", a->encoding, "o200k_base (default), cl100k_base or chars");
  CLI::App* del = sub("delete", "Delete a session (refused while phase 2 is pending, unless --force)", false);
  del->add_option("ID", a->id)->required();
  del->add_flag("--force", a->force, "Delete even while phase 2 is pending");
  sub("retry", "Queue failed archives and dead phase-2 jobs again (of session ID, or all)", false)
      ->add_option("ID", a->id, "Session (default: every session)");

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
  a->remember_text = remember->add_option("TEXT", a->text, "The fact (default: stdin)");
  remember->add_option("--category", a->category, "Category (default: the model decides)");
  msub("history", "The audit trail of one memory", false)->add_option("URI", a->uri)->required();
  msub("consolidate", "Merge near-duplicate memories under URI", true)->add_option("URI", a->uri)->required();
}

}  // namespace strata::cli
