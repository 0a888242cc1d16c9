#include "provider_flags.h"

#include "cli_util.h"

namespace strata::cli {

void AddProviderFlags(CLI::App* cmd, ProviderSettings* flags) {
  cmd->add_option("--provider", flags->provider,
                  "openai | openai-responses | kimi | deepseek | ollama | vllm | llamacpp | anthropic | gemini | "
                  "scripted");
  cmd->add_option("--model", flags->model, "Model (default: config, then the provider's default)");
  cmd->add_option("--base-url", flags->base_url, "API base URL, e.g. http://localhost:11434/v1");
  cmd->add_option("--api-key-env", flags->api_key_env, "Environment variable holding the API key");
  cmd->add_option("--options", flags->options, "Provider options as a JSON object (docs/providers.md)");
  cmd->add_option("--config", flags->config_file, "Config file (JSON)");
  cmd->add_option("--script", flags->script, "Reply from a script instead of a model (offline demos, tests)");
  cmd->add_option("--record", flags->record, "Append every HTTP exchange to FILE (JSONL, no request headers)");
  cmd->add_option("--replay", flags->replay, "Answer from exchanges recorded with --record instead of the network");
  cmd->add_flag("--no-stream", flags->no_stream, "Ask for whole responses instead of streams");
}

void WarnRetry(int attempt, const Status& error, std::chrono::milliseconds delay) {
  Warn("attempt " + std::to_string(attempt) + " failed (" + error.message() + "); retrying in " +
       std::to_string(delay.count()) + " ms");
}

}  // namespace strata::cli
