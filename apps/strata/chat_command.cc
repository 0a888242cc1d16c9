// `strata chat`: an agent chat that streams replies and keeps the conversation in a durable context log.
//
// Provider settings come from flags, then a config file (--config, $STRATA_CONFIG or
// ~/.config/strata/config.json: {"provider","model","base_url","api_key_env","options","system_prompt",
// "session"}), then the provider preset (base URL, key variable such as OPENAI_API_KEY, default model).
// Each user turn is checkpointed first, so /undo reverts the last turn. With stdin not a terminal, every
// line is one user turn and the program exits at end of input (exit code 1 if a turn failed).
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
#include "strata/llm/chat_error.h"
#include "strata/llm/provider.h"
#include "strata/llm/scripted.h"
#include "strata/log/context_log.h"
#include "strata/tokenizer/encoding.h"
#include "strata/tokenizer/message_counter.h"
#include "strata/tools/step.h"

namespace strata::cli {
namespace {

using Json = nlohmann::json;

struct ChatArgs {
  std::string provider;
  std::string model;
  std::string base_url;
  std::string api_key_env;
  std::string session;
  std::string system_prompt;
  std::string options;
  std::string config;
  std::string script;
  std::string record;
  std::string replay;
  bool no_stream = false;
  bool show_thinking = false;
  int max_steps = 20;
};

std::atomic<bool> g_interrupted{false};
void OnSigint(int) { g_interrupted = true; }

Result<Json> LoadConfig(const ChatArgs& args) {
  std::string path = args.config;
  if (path.empty() && std::getenv("STRATA_CONFIG") != nullptr) path = std::getenv("STRATA_CONFIG");
  bool explicit_path = !path.empty();
  if (path.empty() && std::getenv("HOME") != nullptr) {
    path = std::string(std::getenv("HOME")) + "/.config/strata/config.json";
  }
  if (path.empty() || (!explicit_path && !std::filesystem::exists(path))) return Json::object();
  std::ifstream in(path);
  if (!in) return Status::NotFound("config file " + path + " cannot be read");
  Json config = Json::parse(in, nullptr, false);
  if (config.is_discarded() || !config.is_object()) {
    return Status::InvalidArgument("config file " + path + ": expected a JSON object");
  }
  return config;
}

// Flags win over the config file, which wins over the preset.
Result<std::unique_ptr<llm::ChatProvider>> MakeProvider(ChatArgs* args, const Json& config) {
  auto pick = [&](const std::string& flag, const char* key) {
    if (!flag.empty()) return flag;
    auto it = config.find(key);
    return it != config.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  std::string name = pick(args->provider, "provider");
  if (!args->script.empty() || name == "scripted") {
    if (args->script.empty()) return Status::InvalidArgument("--provider scripted needs --script FILE");
    std::ifstream in(args->script);
    if (!in) return Status::NotFound("script " + args->script + " cannot be read");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    STRATA_ASSIGN_OR_RETURN(auto scripted, llm::ScriptedProvider::FromJson(text));
    return std::unique_ptr<llm::ChatProvider>(std::move(scripted));
  }
  if (name.empty()) name = "openai";
  STRATA_ASSIGN_OR_RETURN(llm::ProviderPreset preset, llm::FindProviderPreset(name));
  llm::ProviderConfig pc;
  pc.kind = preset.kind;
  pc.name = name;
  pc.model = pick(args->model, "model");
  if (pc.model.empty()) pc.model = preset.default_model;
  pc.base_url = pick(args->base_url, "base_url");
  if (pc.base_url.empty()) pc.base_url = preset.base_url;
  std::string key_env = pick(args->api_key_env, "api_key_env");
  if (key_env.empty()) key_env = preset.api_key_env;
  if (const char* key = std::getenv(key_env.c_str())) pc.api_key = key;
  if (pc.api_key.empty()) pc.api_key = pick("", "api_key");
  pc.options = preset.options;
  if (auto it = config.find("options"); it != config.end() && it->is_object()) pc.options = it->dump();
  if (!args->options.empty()) pc.options = args->options;
  pc.stream = !args->no_stream;
  if (!args->replay.empty()) {
    STRATA_ASSIGN_OR_RETURN(pc.transport, llm::ReplayTransport(args->replay));
  } else if (!args->record.empty()) {
    pc.transport = llm::RecordingTransport(llm::CurlTransport(), args->record);
  }
  pc.on_retry = [](int attempt, const Status& error, std::chrono::milliseconds delay) {
    Warn("attempt " + std::to_string(attempt) + " failed (" + error.message() + "); retrying in " +
         std::to_string(delay.count()) + " ms");
  };
  return llm::NewHttpProvider(std::move(pc));
}

std::string DefaultSessionPath() {
  const char* data = std::getenv("XDG_DATA_HOME");
  std::string base = data != nullptr ? data : std::string(std::getenv("HOME") ? std::getenv("HOME") : ".") + "/.local/share";
  return base + "/strata/chat/context.jsonl";
}

class Chat {
 public:
  Chat(ChatArgs args, std::unique_ptr<llm::ChatProvider> provider, std::unique_ptr<ContextLog> log, bool interactive)
      : args_(std::move(args)), provider_(std::move(provider)), log_(std::move(log)), interactive_(interactive) {}

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
      std::cout << "/checkpoint  mark this point\n/undo        revert to the last checkpoint (each turn makes one)\n"
                   "/clear       forget the conversation\n/tokens      context size in tokens\n/quit\n";
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
      const std::vector<Message>& history = log_->history();
      auto result = tools::Step(*provider_, system_prompt, toolset_, history, callbacks, {.cancel = &cancel});
      running_ = nullptr;
      if (printed) std::cout << "\n" << std::flush;
      if (!result.ok()) return FailTurn(result.status());
      if (Status s = log_->Append(result->NewMessages()); !s.ok()) return FailTurn(s);
      if (result->usage) {
        if (Status s = log_->UpdateTokenCount(result->usage->total()); !s.ok()) return FailTurn(s);
      }
      if (result->tool_results.empty()) return true;
    }
    Warn("stopped after " + std::to_string(args_.max_steps) + " steps with tool calls");
    return false;
  }

  ChatArgs args_;
  std::unique_ptr<llm::ChatProvider> provider_;
  std::unique_ptr<ContextLog> log_;
  bool interactive_;
  tools::Toolset toolset_;
  std::atomic<Canceller*> running_{nullptr};
  bool failed_ = false;
};

int RunChat(ChatArgs args) {
  auto config = LoadConfig(args);
  if (!config.ok()) return Fail(config.status());
  auto provider = MakeProvider(&args, *config);
  if (!provider.ok()) return Fail(provider.status());
  if (args.session.empty()) args.session = config->value("session", "");
  if (args.session.empty()) args.session = DefaultSessionPath();
  if (args.system_prompt.empty()) args.system_prompt = config->value("system_prompt", "");
  std::filesystem::path parent = std::filesystem::path(args.session).parent_path();
  if (!parent.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(parent, ec);
  }

  // The pending estimate counts with o200k_base when the vocabulary is available, else chars/4.
  static std::unique_ptr<tokenizer::EncodingMessageCounter> counter;
  ContextLogOptions options;
  if (auto encoding = tokenizer::Encoding::Load("o200k_base"); encoding.ok()) {
    counter = std::make_unique<tokenizer::EncodingMessageCounter>(*encoding);
    options.estimator = counter.get();
  }
  std::unique_ptr<ContextLog> log = ContextLog::Open(args.session, options);
  auto restored = log->Restore();
  if (!restored.ok()) return Fail(restored.status());
  if (!log->system_prompt() && !args.system_prompt.empty()) {
    if (Status s = log->WriteSystemPrompt(args.system_prompt); !s.ok()) return Fail(s);
  }

  bool interactive = isatty(STDIN_FILENO) != 0;
  Chat chat(std::move(args), std::move(*provider), std::move(log), interactive);
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
  cmd->add_option("--provider", args->provider,
                  "openai | openai-responses | kimi | deepseek | ollama | vllm | llamacpp | anthropic | gemini | scripted");
  cmd->add_option("--model", args->model, "Model (default: config, then the provider's default)");
  cmd->add_option("--base-url", args->base_url, "API base URL, e.g. http://localhost:11434/v1");
  cmd->add_option("--api-key-env", args->api_key_env, "Environment variable holding the API key");
  cmd->add_option("--session", args->session, "Context log file (default ~/.local/share/strata/chat/context.jsonl)");
  cmd->add_option("--system", args->system_prompt, "System prompt for a new session");
  cmd->add_option("--options", args->options, "Provider options as a JSON object");
  cmd->add_option("--config", args->config, "Config file (JSON)");
  cmd->add_option("--script", args->script, "Reply from a script instead of a model (offline demos, tests)");
  cmd->add_option("--record", args->record, "Append every HTTP exchange to FILE (JSONL, no request headers)");
  cmd->add_option("--replay", args->replay, "Answer from exchanges recorded with --record instead of the network");
  cmd->add_flag("--no-stream", args->no_stream, "Ask for whole responses instead of streams");
  cmd->add_flag("--show-thinking", args->show_thinking, "Print the model's thinking to stderr");
  cmd->add_option("--max-steps", args->max_steps, "Most model calls per user turn")->check(CLI::PositiveNumber);
  cmd->callback([args, exit_code] { *exit_code = RunChat(*args); });
}

}  // namespace strata::cli
