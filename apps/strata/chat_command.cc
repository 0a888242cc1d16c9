// `strata chat`: an agent chat that streams replies and keeps the conversation in a durable context log.
// The turn loop is the library's (strata/engine/conversation.h); this file reads lines, handles the
// slash commands and prints. With stdin not a terminal, every line is one user turn and the program exits
// at end of input (exit code 1 if a turn failed).
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <iterator>
#include <optional>
#include <thread>

#include "cli_util.h"
#include "commands.h"
#include "provider_flags.h"
#include "strata/engine/agent_tools.h"
#include "strata/engine/engine.h"
#include "strata/tools/mcp_client.h"

namespace strata::cli {
namespace {

struct ChatArgs {
  ProviderSettings provider;
  std::string session;
  bool show_thinking = false;
  ConversationOptions conversation;
  std::string data = "strata-data";
  std::string user = "default";
  bool no_tools = false;
  std::vector<std::string> mcp_config_files;
  std::vector<std::string> mcp_configs;
};

std::atomic<bool> g_interrupted{false};
void OnSigint(int) { g_interrupted = true; }

std::string DefaultSessionPath() {
  const char* data = std::getenv("XDG_DATA_HOME");
  std::string base = data != nullptr ? data : std::string(std::getenv("HOME") ? std::getenv("HOME") : ".") + "/.local/share";
  return base + "/strata/chat/context.jsonl";
}

void PrintCompaction(const CompactionReport& r) {
  if (r.nothing_to_do) {
    std::cerr << "[compaction: nothing older than the recent turns to compact]\n";
    return;
  }
  if (r.pruned_fallback) Warn("the summary model failed (" + r.llm_error.message() + "); pruned old tool output instead");
  std::cerr << "[compacted (" << r.why << "): " << r.compacted << " messages into a summary, " << r.kept
            << " kept; " << r.tokens_before << " -> " << r.tokens_after << " tokens; previous log kept as "
            << r.rotation << "]\n";
}

class ChatLoop {
 public:
  ChatLoop(Conversation& conversation, const tools::Toolset& toolset, bool show_thinking, int max_steps,
           bool interactive)
      : c_(conversation),
        toolset_(toolset),
        show_thinking_(show_thinking),
        max_steps_(max_steps),
        interactive_(interactive) {}

  int Run() {
    if (interactive_) {
      std::cerr << "strata chat — " << c_.provider().name() << " / " << c_.provider().model() << ", session "
                << c_.log().path() << " (" << c_.log().history().size() << " messages, " << toolset_.size()
                << " tools). /help for commands.\n";
    }
    std::string line;
    while (Prompt(), std::getline(std::cin, line)) {
      if (line.empty()) continue;
      if (line[0] == '/') {
        if (!Command(line)) break;
        continue;
      }
      if (!Turn(line)) failed_ = true;
    }
    Status closed = c_.Close();
    if (!closed.ok()) return Fail(closed);
    return failed_ ? 1 : 0;
  }

 private:
  void Prompt() const {
    if (interactive_) std::cerr << "> " << std::flush;
  }

  // Returns false to quit.
  bool Command(const std::string& line) {
    std::string cmd = line.substr(0, line.find(' '));
    if (cmd == "/quit" || cmd == "/exit") return false;
    if (cmd == "/help") {
      std::cout << "/checkpoint          mark this point\n"
                   "/undo                revert to the last checkpoint (each turn makes one)\n"
                   "/clear               forget the conversation\n"
                   "/compact [focus]     summarise the older conversation now\n"
                   "/tokens              context size in tokens\n"
                   "/tools               the tools the model can call\n/quit\n";
    } else if (cmd == "/checkpoint") {
      auto id = c_.Checkpoint();
      if (!id.ok()) return Report(id.status());
      std::cout << "checkpoint " << *id << "\n";
    } else if (cmd == "/undo") {
      auto reverted = c_.Undo();
      if (!reverted.ok()) return Report(reverted.status());
      if (!*reverted) {
        std::cout << "nothing to undo\n";
      } else {
        std::cout << "reverted to checkpoint " << **reverted << " (" << c_.log().history().size() << " messages)\n";
      }
    } else if (cmd == "/clear") {
      if (Status s = c_.Clear(); !s.ok()) return Report(s);
      std::cout << "cleared\n";
    } else if (cmd == "/compact") {
      std::string focus = line.size() > cmd.size() ? line.substr(cmd.size() + 1) : "";
      auto report = c_.Compact(focus);
      if (!report.ok()) return Report(report.status());
      PrintCompaction(*report);
    } else if (cmd == "/tools") {
      if (toolset_.size() == 0) std::cout << "no tools\n";
      for (const llm::ToolDeclaration& d : toolset_.declarations()) {
        std::cout << d.name << "  " << d.description.substr(0, d.description.find('\n')) << "\n";
      }
    } else if (cmd == "/tokens") {
      std::cout << "tokens: " << c_.log().token_count_with_pending() << " (last reported by the provider: "
                << c_.log().token_count() << ", messages: " << c_.log().history().size() << ")\n";
    } else {
      std::cout << "unknown command " << cmd << " (/help lists them)\n";
    }
    std::cout << std::flush;
    return true;
  }

  bool Report(const Status& status) {
    Fail(status);
    failed_ = true;
    return true;
  }

  // One user turn. Returns false if it failed.
  bool Turn(const std::string& text) {
    bool printed = false;
    TurnCallbacks callbacks;
    callbacks.on_part = [&](const StreamedPart& part) {
      const auto* content = std::get_if<ContentPart>(&part);
      if (content == nullptr) return;
      if (const auto* t = std::get_if<TextPart>(content)) {
        std::cout << t->text << std::flush;
        printed = printed || !t->text.empty();
      } else if (const auto* think = std::get_if<ThinkPart>(content); think && show_thinking_) {
        std::cerr << think->think << std::flush;
      }
    };
    callbacks.on_tool_call = [](const ToolCall& call) {
      std::cerr << "[tool call] " << call.function.name << " " << call.function.arguments.value_or("") << "\n";
    };
    callbacks.on_tool_result = [](const tools::ToolResult& result) {
      std::string shown;
      for (const ContentPart& part : result.message.content) {
        if (const auto* t = std::get_if<TextPart>(&part)) shown += t->text;
      }
      // A server's text on our terminal: one line, no control characters (escape sequences), whole characters.
      if (shown.size() > 200) {
        size_t cut = 200;
        while (cut > 0 && (static_cast<unsigned char>(shown[cut]) & 0xC0) == 0x80) --cut;
        shown = shown.substr(0, cut) + "...";
      }
      for (char& ch : shown) ch = static_cast<unsigned char>(ch) < 0x20 || ch == 0x7F ? ' ' : ch;
      std::cerr << "[tool " << (result.is_error ? "error" : "result") << "] " << result.call.function.name << ": "
                << shown << "\n";
    };
    callbacks.on_step_end = [&](int) {
      if (printed) std::cout << "\n" << std::flush;
      printed = false;
    };
    callbacks.on_warning = [](const std::string& message) { Warn(message); };
    callbacks.on_compacted = PrintCompaction;
    auto result = c_.Turn(text, callbacks);
    if (!result.ok()) {
      Fail(result.status());
      return false;
    }
    if (result->stopped_at_max_steps) {
      Warn("stopped after " + std::to_string(max_steps_) + " steps with tool calls");
      return false;
    }
    return true;
  }

  Conversation& c_;
  const tools::Toolset& toolset_;
  bool show_thinking_;
  int max_steps_;
  bool interactive_;
  bool failed_ = false;
};

// Connects to the MCP servers of the config file and the flags and adds their tools. A server that cannot
// be reached is a warning: the chat goes on without its tools.
Status AddMcpServers(const ChatArgs& args, const ConfigFile& config, tools::Toolset* toolset) {
  std::vector<tools::McpServerConfig> servers;
  auto add = [&](std::string_view text, std::string_view where) -> Status {
    STRATA_ASSIGN_OR_RETURN(auto parsed, tools::ParseMcpServers(text, where));
    servers.insert(servers.end(), parsed.begin(), parsed.end());
    return Status::Ok();
  };
  if (!config.mcp_servers.empty()) STRATA_RETURN_IF_ERROR(add(config.mcp_servers, "config file " + config.path));
  for (const std::string& file : args.mcp_config_files) {
    std::ifstream in(file);
    if (!in) return Status::NotFound("MCP config file " + file + " cannot be read");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    STRATA_RETURN_IF_ERROR(add(text, "MCP config file " + file));
  }
  for (const std::string& text : args.mcp_configs) STRATA_RETURN_IF_ERROR(add(text, "--mcp-config"));
  // Servers start (npx may take seconds) and shake hands at the same time; their tools join in config order.
  std::vector<std::optional<Result<std::unique_ptr<tools::McpClient>>>> clients(servers.size());
  std::vector<std::thread> connecting;
  for (size_t i = 0; i < servers.size(); ++i) {
    connecting.emplace_back([&, i] { clients[i] = tools::McpClient::Connect(servers[i]); });
  }
  for (std::thread& t : connecting) t.join();
  for (auto& client : clients) {
    if (!(*client).ok()) {
      Warn((*client).status().message() + " (continuing without its tools)");
      continue;
    }
    std::vector<std::string> warnings;
    auto added = tools::AddMcpTools(std::shared_ptr<tools::McpClient>(std::move(**client)), toolset, &warnings);
    for (const std::string& w : warnings) Warn(w);
    if (!added.ok()) Warn(added.status().message() + " (continuing without its tools)");
  }
  return Status::Ok();
}

int RunChat(ChatArgs args) {
  auto engine = Engine::Open({.data_dir = args.data, .provider = args.provider, .on_model_retry = WarnRetry});
  if (!engine.ok()) return Fail(engine.status());
  auto config = (*engine)->config();
  if (!config.ok()) return Fail(config.status());
  if (args.session.empty()) args.session = (*config)->session;
  if (args.session.empty()) args.session = DefaultSessionPath();
  if (args.conversation.system_prompt.empty()) args.conversation.system_prompt = (*config)->system_prompt;
  if (args.conversation.max_context == 0 && (*config)->max_context_tokens) {
    args.conversation.max_context = *(*config)->max_context_tokens;
  }
  // Counting (the pending estimate, assembly, compaction) uses o200k_base when the vocabulary is
  // available, else characters / 4.
  LoadCounter("o200k_base");
  tools::Toolset toolset;  // Outlives the conversation, which borrows it.
  if (!args.no_tools) {
    Status added = AddAgentTools(engine->get(), {.user = args.user}, &toolset);
    if (!added.ok()) return Fail(added);
  }
  if (Status s = AddMcpServers(args, **config, &toolset); !s.ok()) return Fail(s);
  auto conversation = (*engine)->OpenConversation(args.session, args.conversation, &toolset);
  if (!conversation.ok()) return Fail(conversation.status());

  bool interactive = isatty(STDIN_FILENO) != 0;
  ChatLoop chat(**conversation, toolset, args.show_thinking, args.conversation.max_steps, interactive);
  std::signal(SIGINT, OnSigint);
  std::atomic<bool> done{false};
  Conversation* c = conversation->get();
  std::thread watcher([&] {
    while (!done) {
      if (g_interrupted.exchange(false)) c->Cancel();
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  int rc = chat.Run();
  done = true;
  watcher.join();
  return rc;
}

}  // namespace

void AddChatCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ChatArgs>();
  CLI::App* cmd = app.add_subcommand("chat", "Chat with a model; the conversation lives in a durable context log");
  AddProviderFlags(cmd, &args->provider);
  cmd->add_option("--session", args->session, "Context log file (default ~/.local/share/strata/chat/context.jsonl)");
  cmd->add_option("--system", args->conversation.system_prompt, "System prompt for a new session");
  cmd->add_flag("--show-thinking", args->show_thinking, "Print the model's thinking to stderr");
  cmd->add_option("--data", args->data, "Data directory or postgres:// URL for the memory tools (default ./strata-data)");
  cmd->add_option("--user", args->user, "Whose memories the remember and find tools reach (default: default)");
  cmd->add_flag("--no-tools", args->no_tools, "No built-in tools (read_file, list_directory, remember, find)");
  cmd->add_option("--mcp-config-file", args->mcp_config_files,
                  "A JSON file of MCP servers ({\"mcpServers\": {NAME: {command, args, env} or {url, headers}}}) "
                  "whose tools the model can call; repeatable (the config file's \"mcpServers\" are used too)");
  cmd->add_option("--mcp-config", args->mcp_configs, "MCP servers as JSON text, as in --mcp-config-file; repeatable");
  cmd->add_option("--max-steps", args->conversation.max_steps, "Most model calls per user turn")
      ->check(Positive());
  cmd->add_option("--max-context", args->conversation.max_context,
                  "The model's context window in tokens: requests are assembled to fit it and the conversation "
                  "is compacted when it fills (0 = send everything, never compact)")
      ->check(NonNegative());
  cmd->add_option("--reserve", args->conversation.reserve_for_reply, "Tokens kept free for the reply")
      ->check(NonNegative())
      ->capture_default_str();
  cmd->add_option("--compact-ratio", args->conversation.compact_ratio,
                  "Compact when the context reaches this share of the window")
      ->check(CLI::Range(0.1, 1.0))
      ->capture_default_str();
  cmd->callback([args, exit_code] { *exit_code = RunChat(*args); });
}

}  // namespace strata::cli
