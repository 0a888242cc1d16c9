#include "provider_flags.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cli_util.h"
#include "strata/llm/scripted.h"

namespace strata::cli {

using Json = nlohmann::json;

void AddProviderFlags(CLI::App* cmd, ProviderFlags* flags) {
  cmd->add_option("--provider", flags->provider,
                  "openai | openai-responses | kimi | deepseek | ollama | vllm | llamacpp | anthropic | gemini | "
                  "scripted");
  cmd->add_option("--model", flags->model, "Model (default: config, then the provider's default)");
  cmd->add_option("--base-url", flags->base_url, "API base URL, e.g. http://localhost:11434/v1");
  cmd->add_option("--api-key-env", flags->api_key_env, "Environment variable holding the API key");
  cmd->add_option("--options", flags->options, "Provider options as a JSON object (docs/providers.md)");
  cmd->add_option("--config", flags->config, "Config file (JSON)");
  cmd->add_option("--script", flags->script, "Reply from a script instead of a model (offline demos, tests)");
  cmd->add_option("--record", flags->record, "Append every HTTP exchange to FILE (JSONL, no request headers)");
  cmd->add_option("--replay", flags->replay, "Answer from exchanges recorded with --record instead of the network");
  cmd->add_flag("--no-stream", flags->no_stream, "Ask for whole responses instead of streams");
}

Result<Json> LoadConfig(const ProviderFlags& flags) {
  std::string path = flags.config;
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

std::string Pick(const std::string& flag, const Json& config, const char* key) {
  if (!flag.empty()) return flag;
  auto it = config.find(key);
  return it != config.end() && it->is_string() ? it->get<std::string>() : std::string();
}

Result<std::unique_ptr<llm::ChatProvider>> MakeProvider(const ProviderFlags& flags, const Json& config) {
  std::string name = Pick(flags.provider, config, "provider");
  if (!flags.script.empty() || name == "scripted") {
    if (flags.script.empty()) return Status::InvalidArgument("--provider scripted needs --script FILE");
    std::ifstream in(flags.script);
    if (!in) return Status::NotFound("script " + flags.script + " cannot be read");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto scripted = llm::ScriptedProvider::FromJson(text);
    if (!scripted.ok()) return scripted.status().WithContext("script " + flags.script);
    return std::unique_ptr<llm::ChatProvider>(std::move(*scripted));
  }
  if (name.empty()) name = "openai";
  STRATA_ASSIGN_OR_RETURN(llm::ProviderPreset preset, llm::FindProviderPreset(name));
  llm::ProviderConfig pc;
  pc.kind = preset.kind;
  pc.name = name;
  pc.model = Pick(flags.model, config, "model");
  if (pc.model.empty()) pc.model = preset.default_model;
  pc.base_url = Pick(flags.base_url, config, "base_url");
  if (pc.base_url.empty()) pc.base_url = preset.base_url;
  std::string key_env = Pick(flags.api_key_env, config, "api_key_env");
  if (key_env.empty()) key_env = preset.api_key_env;
  if (const char* key = std::getenv(key_env.c_str())) pc.api_key = key;
  if (pc.api_key.empty()) pc.api_key = Pick("", config, "api_key");
  pc.options = preset.options;
  if (auto it = config.find("options"); it != config.end() && it->is_object()) pc.options = it->dump();
  if (!flags.options.empty()) pc.options = flags.options;
  pc.stream = !flags.no_stream;
  if (!flags.replay.empty()) {
    STRATA_ASSIGN_OR_RETURN(pc.transport, llm::ReplayTransport(flags.replay));
  } else if (!flags.record.empty()) {
    pc.transport = llm::RecordingTransport(llm::CurlTransport(), flags.record);
  }
  pc.on_retry = [](int attempt, const Status& error, std::chrono::milliseconds delay) {
    Warn("attempt " + std::to_string(attempt) + " failed (" + error.message() + "); retrying in " +
         std::to_string(delay.count()) + " ms");
  };
  return llm::NewHttpProvider(std::move(pc));
}

}  // namespace strata::cli
