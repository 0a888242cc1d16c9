// `strata chat`: an agent chat that streams replies and keeps the conversation in a durable context log.
// The turn loop is the library's (strata/engine/conversation.h); this file reads lines, handles the
// slash commands and prints. With stdin not a terminal, every line is one user turn and the program exits
// at end of input (exit code 1 if a turn failed).
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <thread>

#include "cli_util.h"
#include "commands.h"
#include "provider_flags.h"
#include "strata/engine/engine.h"

namespace strata::cli {
namespace {

struct ChatArgs {
  ProviderSettings provider;
  std::string session;
  bool show_thinking = false;
  ConversationOptions conversation;
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
  ChatLoop(Conversation& conversation, bool show_thinking, int max_steps, bool interactive)
      : c_(conversation), show_thinking_(show_thinking), max_steps_(max_steps), interactive_(interactive) {}

  int Run() {
    if (interactive_) {
      std::cerr << "strata chat — " << c_.provider().name() << " / " << c_.provider().model() << ", session "
                << c_.log().path() << " (" << c_.log().history().size() << " messages). /help for commands.\n";
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
                   "/tokens              context size in tokens\n/quit\n";
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
  bool show_thinking_;
  int max_steps_;
  bool interactive_;
  bool failed_ = false;
};

int RunChat(ChatArgs args) {
  auto engine = Engine::Open({.provider = args.provider, .on_model_retry = WarnRetry});
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
  auto conversation = (*engine)->OpenConversation(args.session, args.conversation);
  if (!conversation.ok()) return Fail(conversation.status());

  bool interactive = isatty(STDIN_FILENO) != 0;
  ChatLoop chat(**conversation, args.show_thinking, args.conversation.max_steps, interactive);
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
  cmd->add_option("--max-steps", args->conversation.max_steps, "Most model calls per user turn")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-context", args->conversation.max_context,
                  "The model's context window in tokens: requests are assembled to fit it and the conversation "
                  "is compacted when it fills (0 = send everything, never compact)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--reserve", args->conversation.reserve_for_reply, "Tokens kept free for the reply")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--compact-ratio", args->conversation.compact_ratio,
                  "Compact when the context reaches this share of the window")
      ->check(CLI::Range(0.1, 1.0))
      ->capture_default_str();
  cmd->callback([args, exit_code] { *exit_code = RunChat(*args); });
}

}  // namespace strata::cli
