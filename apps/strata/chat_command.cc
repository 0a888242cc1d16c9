// `strata chat`: an agent chat that streams replies and keeps the conversation in a durable context log.
//
// Provider settings: provider_flags.h. Each user turn is checkpointed first, so /undo reverts the last
// turn. Every request is assembled within the window (window/assembler.h: the summary of an earlier
// compaction pinned, then the newest history that fits), and after a turn that brings the context to the
// trigger (window/compaction.h) the conversation is compacted and the log rewritten; /compact does it on
// demand. With stdin not a terminal, every line is one user turn and the program exits at end of input
// (exit code 1 if a turn failed).
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <thread>

#include "cli_util.h"
#include "commands.h"
#include "provider_flags.h"
#include "strata/llm/chat_error.h"
#include "strata/llm/provider.h"
#include "strata/llm/scripted.h"
#include "strata/log/context_log.h"
#include "strata/tokenizer/encoding.h"
#include "strata/tokenizer/message_counter.h"
#include "strata/tools/step.h"
#include "strata/window/assembler.h"
#include "strata/window/compaction.h"

namespace strata::cli {
namespace {

using Json = nlohmann::json;

struct ChatArgs {
  ProviderFlags provider;
  std::string session;
  std::string system_prompt;
  bool show_thinking = false;
  int max_steps = 20;
  int64_t max_context = 0;
  int64_t reserve_for_reply = 4096;
  double compact_ratio = 0.85;
};

std::atomic<bool> g_interrupted{false};
void OnSigint(int) { g_interrupted = true; }

std::string DefaultSessionPath() {
  const char* data = std::getenv("XDG_DATA_HOME");
  std::string base = data != nullptr ? data : std::string(std::getenv("HOME") ? std::getenv("HOME") : ".") + "/.local/share";
  return base + "/strata/chat/context.jsonl";
}

class Chat {
 public:
  Chat(ChatArgs args, std::unique_ptr<llm::ChatProvider> provider, std::unique_ptr<ContextLog> log,
       const MessageTokenCounter* counter, bool interactive)
      : args_(std::move(args)),
        provider_(std::move(provider)),
        log_(std::move(log)),
        counter_(counter),
        index_(counter),
        interactive_(interactive) {}

  int Run() {
    if (interactive_) {
      std::cerr << "strata chat — " << provider_->name() << " / " << provider_->model() << ", session "
                << log_->path() << " (" << log_->history().size() << " messages). /help for commands.\n";
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
    Status closed = log_->Close();
    if (!closed.ok()) return Fail(closed);
    return failed_ ? 1 : 0;
  }

  // Cancels the running generation (from the SIGINT watcher).
  void Interrupt() {
    if (Canceller* c = running_.load()) c->Cancel();
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
      auto id = log_->Checkpoint(false);
      if (!id.ok()) return Report(id.status());
      std::cout << "checkpoint " << *id << "\n";
    } else if (cmd == "/undo") {
      int64_t n = log_->n_checkpoints();
      if (n == 0) {
        std::cout << "nothing to undo\n";
      } else if (Status s = log_->RevertTo(n - 1); !s.ok()) {
        return Report(s);
      } else {
        std::cout << "reverted to checkpoint " << n - 1 << " (" << log_->history().size() << " messages)\n";
      }
    } else if (cmd == "/clear") {
      if (Status s = log_->Clear(); !s.ok()) return Report(s);
      std::cout << "cleared\n";
    } else if (cmd == "/compact") {
      std::string focus = line.size() > cmd.size() ? line.substr(cmd.size() + 1) : "";
      if (Status s = CompactNow(focus, "on request"); !s.ok()) return Report(s);
    } else if (cmd == "/tokens") {
      std::cout << "tokens: " << log_->token_count_with_pending() << " (last reported by the provider: "
                << log_->token_count() << ", messages: " << log_->history().size() << ")\n";
    } else {
      std::cout << "unknown command " << cmd << " (/help lists them)\n";
    }
    std::cout << std::flush;
    return true;
  }

  static bool FailTurn(const Status& status) {
    Fail(status);
    return false;
  }

  bool Report(const Status& status) {
    Fail(status);
    failed_ = true;
    return true;
  }

  // One user turn: steps until the model stops calling tools. Returns false if it failed.
  bool Turn(const std::string& text) {
    if (Status s = log_->Checkpoint(false).status(); !s.ok()) return FailTurn(s);
    if (Status s = log_->Append(Message::User(text)); !s.ok()) return FailTurn(s);
    std::string system_prompt = log_->system_prompt().value_or(args_.system_prompt);
    for (int step = 0; step < args_.max_steps; ++step) {
      Canceller cancel;
      running_ = &cancel;
      bool printed = false;
      tools::StepCallbacks callbacks;
      callbacks.on_part = [&](const StreamedPart& part) {
        const auto* content = std::get_if<ContentPart>(&part);
        if (content == nullptr) return;
        if (const auto* t = std::get_if<TextPart>(content)) {
          std::cout << t->text << std::flush;
          printed = printed || !t->text.empty();
        } else if (const auto* think = std::get_if<ThinkPart>(content); think && args_.show_thinking) {
          std::cerr << think->think << std::flush;
        }
      };
      callbacks.on_tool_call = [](const ToolCall& call) {
        std::cerr << "[tool call] " << call.function.name << " " << call.function.arguments.value_or("") << "\n";
      };
      auto messages = Assembled(system_prompt);
      if (!messages.ok()) {
        running_ = nullptr;
        return FailTurn(messages.status());
      }
      auto result = tools::Step(*provider_, system_prompt, toolset_, *messages, callbacks, {.cancel = &cancel});
      running_ = nullptr;
      if (printed) std::cout << "\n" << std::flush;
      if (!result.ok()) return FailTurn(result.status());
      if (Status s = log_->Append(result->NewMessages()); !s.ok()) return FailTurn(s);
      if (result->usage) {
        if (Status s = log_->UpdateTokenCount(result->usage->total()); !s.ok()) return FailTurn(s);
      }
      if (result->tool_results.empty()) return MaybeCompact();
    }
    Warn("stopped after " + std::to_string(args_.max_steps) + " steps with tool calls");
    return false;
  }

  // The messages to send: the whole history, or with --max-context the part that fits (an earlier
  // compaction's summary pinned first).
  Result<std::vector<Message>> Assembled(const std::string& system_prompt) {
    const std::vector<Message>& history = log_->history();
    if (args_.max_context <= 0) return history;
    window::AssembleOptions options;
    options.max_context_tokens = args_.max_context;
    options.reserve_for_reply = args_.reserve_for_reply;
    options.system_prompt = system_prompt;
    std::span<const Message> rest = history;
    if (!history.empty() && window::SummaryOf(history[0])) {
      options.pinned.push_back(history[0]);
      rest = rest.subspan(1);
    }
    if (indexed_pinned_ != options.pinned.size()) index_.Reset();  // The indexed span moved.
    indexed_pinned_ = options.pinned.size();
    index_.Sync(rest);
    STRATA_ASSIGN_OR_RETURN(window::Assembly a, window::Assemble(rest, index_, options, *counter_));
    for (const window::AssemblyWarning& w : a.warnings) Warn(w.message);
    // The model must see the newest message (the user's turn, or the tool results it is to act on).
    if (!rest.empty() && (a.included.empty() || a.included.back() != rest.size() - 1)) {
      return Status::ResourceExhausted("the newest message does not fit in the " + std::to_string(a.budget) +
                                       "-token budget after the system prompt and summary; /compact, or raise "
                                       "--max-context");
    }
    return window::AssembledMessages(rest, a, options);
  }

  bool MaybeCompact() {
    if (args_.max_context <= 0) return true;
    auto due = window::ShouldCompact(log_->token_count_with_pending(), args_.max_context,
                                     {.ratio = args_.compact_ratio, .reserved_headroom = args_.reserve_for_reply});
    if (!due) return true;
    Status s = CompactNow("", *due);
    if (!s.ok()) Warn("automatic compaction failed: " + s.message());
    return true;
  }

  Status CompactNow(const std::string& focus, const std::string& why) {
    window::CompactionOptions options;
    options.instruction = focus;
    options.counter = counter_;
    if (args_.max_context > 0) options.compaction_window = args_.max_context;
    options.reserve_for_summary = std::min<int64_t>(args_.reserve_for_reply, options.compaction_window / 4);
    STRATA_ASSIGN_OR_RETURN(window::CompactionResult r, window::Compact(*provider_, log_->history(), options));
    if (r.compacted == 0 && !r.pruned_fallback) {
      std::cerr << "[compaction: nothing older than the recent turns to compact]\n";
      return Status::Ok();
    }
    if (r.pruned_fallback) Warn("the summary model failed (" + r.llm_error.message() + "); pruned old tool output instead");
    int64_t system_tokens = 0;
    if (log_->system_prompt()) {
      Message system = Message::System(*log_->system_prompt());
      system_tokens = counter_->CountMessages({&system, 1});
    }
    STRATA_ASSIGN_OR_RETURN(std::string rotation, window::WriteCompaction(log_.get(), r, r.tokens_after + system_tokens));
    index_.Reset();
    std::cerr << "[compacted (" << why << "): " << r.compacted << " messages into a summary, " << r.kept
              << " kept; " << r.tokens_before << " -> " << r.tokens_after << " tokens; previous log kept as "
              << rotation << "]\n";
    return Status::Ok();
  }

  ChatArgs args_;
  std::unique_ptr<llm::ChatProvider> provider_;
  std::unique_ptr<ContextLog> log_;
  const MessageTokenCounter* counter_;
  window::HistoryIndex index_;
  size_t indexed_pinned_ = 0;
  bool interactive_;
  tools::Toolset toolset_;
  std::atomic<Canceller*> running_{nullptr};
  bool failed_ = false;
};

int RunChat(ChatArgs args) {
  auto config = LoadConfig(args.provider);
  if (!config.ok()) return Fail(config.status());
  auto provider = MakeProvider(args.provider, *config);
  if (!provider.ok()) return Fail(provider.status());
  if (args.session.empty()) args.session = Pick("", *config, "session");
  if (args.session.empty()) args.session = DefaultSessionPath();
  if (args.system_prompt.empty()) args.system_prompt = Pick("", *config, "system_prompt");
  if (args.max_context == 0) {
    if (auto it = config->find("max_context_tokens"); it != config->end() && it->is_number_integer()) {
      args.max_context = it->get<int64_t>();
    }
  }
  std::filesystem::path parent = std::filesystem::path(args.session).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
  }

  // Counting (the pending estimate, assembly, compaction) uses o200k_base when the vocabulary is
  // available, else characters / 4.
  const MessageTokenCounter* count_with = LoadCounter("o200k_base");
  ContextLogOptions options;
  options.estimator = count_with;
  std::unique_ptr<ContextLog> log = ContextLog::Open(args.session, options);
  auto restored = log->Restore();
  if (!restored.ok()) return Fail(restored.status());
  if (!log->system_prompt() && !args.system_prompt.empty()) {
    if (Status s = log->WriteSystemPrompt(args.system_prompt); !s.ok()) return Fail(s);
  }

  bool interactive = isatty(STDIN_FILENO) != 0;
  Chat chat(std::move(args), std::move(*provider), std::move(log), count_with, interactive);
  std::signal(SIGINT, OnSigint);
  std::atomic<bool> done{false};
  std::thread watcher([&] {
    while (!done) {
      if (g_interrupted.exchange(false)) chat.Interrupt();
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
  cmd->add_option("--system", args->system_prompt, "System prompt for a new session");
  cmd->add_flag("--show-thinking", args->show_thinking, "Print the model's thinking to stderr");
  cmd->add_option("--max-steps", args->max_steps, "Most model calls per user turn")->check(CLI::PositiveNumber);
  cmd->add_option("--max-context", args->max_context,
                  "The model's context window in tokens: requests are assembled to fit it and the conversation "
                  "is compacted when it fills (0 = send everything, never compact)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--reserve", args->reserve_for_reply, "Tokens kept free for the reply")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--compact-ratio", args->compact_ratio, "Compact when the context reaches this share of the window")
      ->check(CLI::Range(0.1, 1.0))
      ->capture_default_str();
  cmd->callback([args, exit_code] { *exit_code = RunChat(*args); });
}

}  // namespace strata::cli
