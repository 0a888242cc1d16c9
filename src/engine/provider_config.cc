#include "strata/engine/provider_config.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>

#include "strata/json/checked.h"
#include "strata/llm/scripted.h"

namespace strata {

using Json = nlohmann::json;

Result<ConfigFile> LoadConfigFile(const std::string& explicit_path) {
  std::string path = explicit_path;
  if (path.empty() && std::getenv("STRATA_CONFIG") != nullptr) path = std::getenv("STRATA_CONFIG");
  bool named = !path.empty();
  if (path.empty() && std::getenv("HOME") != nullptr) path = std::string(std::getenv("HOME")) + "/.config/strata/config.json";
  ConfigFile config;
  std::error_code ec;
  if (path.empty() || (!named && !std::filesystem::exists(path, ec))) return config;
  // A directory opens as a stream whose first read throws (it escaped as an "internal" error); a pipe
  // (`--config <(...)`) is read as a file is.
  if (std::filesystem::is_directory(path, ec)) return Status::InvalidArgument("config file " + path + " is a directory");
  std::ifstream in(path);
  if (!in) return Status::NotFound("config file " + path + " cannot be read");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Result<Json> parsed = strata::json::ParseUntrusted<Json>(text, "config file " + path);
  if (!parsed.ok()) return parsed.status();  // Says where the JSON goes wrong.
  Json j = std::move(*parsed);
  if (!j.is_object()) return Status::InvalidArgument("config file " + path + ": expected a JSON object");
  config.path = path;
  std::string where = "config file " + path;
  struct Member {
    const char* key;
    std::string* slot;
  };
  for (Member m : {Member{"provider", &config.provider}, Member{"model", &config.model},
                   Member{"base_url", &config.base_url}, Member{"api_key_env", &config.api_key_env},
                   Member{"api_key", &config.api_key}, Member{"system_prompt", &config.system_prompt},
                   Member{"session", &config.session}}) {
    STRATA_ASSIGN_OR_RETURN(*m.slot, json::OptionalString(j, m.key, where));
  }
  if (const Json* options = json::Field(j, "options"); options != nullptr && !options->is_null()) {
    if (!options->is_object()) {
      return Status::InvalidArgument(where + ": \"options\" must be an object, not " + std::string(json::TypeName(*options)));
    }
    config.options = options->dump();
  }
  if (const Json* servers = json::Field(j, "mcpServers"); servers != nullptr && !servers->is_null()) {
    if (!servers->is_object()) {
      return Status::InvalidArgument(where + ": \"mcpServers\" must be an object, not " +
                                     std::string(json::TypeName(*servers)));
    }
    config.mcp_servers = Json{{"mcpServers", *servers}}.dump(-1, ' ', false, Json::error_handler_t::replace);
  }
  if (const Json* max = json::Field(j, "max_context_tokens"); max != nullptr && !max->is_null()) {
    STRATA_ASSIGN_OR_RETURN(config.max_context_tokens, json::RequireInt(j, "max_context_tokens", where));
  }
  return config;
}

namespace {
const std::string& First(const std::string& a, const std::string& b) { return a.empty() ? b : a; }
}  // namespace

Result<std::unique_ptr<llm::ChatProvider>> MakeProvider(const ProviderSettings& settings, const ConfigFile& config,
                                                        llm::RetryCallback on_retry) {
  std::string name = First(settings.provider, config.provider);
  if (!settings.script.empty() || name == "scripted") {
    if (settings.script.empty()) return Status::InvalidArgument("--provider scripted needs --script FILE");
    std::ifstream in(settings.script);
    if (!in) return Status::NotFound("script " + settings.script + " cannot be read");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto scripted = llm::ScriptedProvider::FromJson(text);
    if (!scripted.ok()) return scripted.status().WithContext("script " + settings.script);
    return std::unique_ptr<llm::ChatProvider>(std::move(*scripted));
  }
  STRATA_ASSIGN_OR_RETURN(llm::ProviderConfig pc, ResolveProviderConfig(settings, config));
  pc.on_retry = std::move(on_retry);
  return llm::NewHttpProvider(std::move(pc));
}

Result<llm::ProviderConfig> ResolveProviderConfig(const ProviderSettings& settings, const ConfigFile& config) {
  std::string name = First(settings.provider, config.provider);
  if (!settings.script.empty() || name == "scripted") {
    return Status::InvalidArgument("a scripted provider has no HTTP endpoint");
  }
  if (name.empty()) name = "openai";
  STRATA_ASSIGN_OR_RETURN(llm::ProviderPreset preset, llm::FindProviderPreset(name));
  llm::ProviderConfig pc;
  pc.kind = preset.kind;
  pc.name = name;
  pc.model = First(First(settings.model, config.model), preset.default_model);
  pc.base_url = First(First(settings.base_url, config.base_url), preset.base_url);
  std::string key_env = First(First(settings.api_key_env, config.api_key_env), preset.api_key_env);
  if (const char* key = key_env.empty() ? nullptr : std::getenv(key_env.c_str())) pc.api_key = key;
  if (pc.api_key.empty()) pc.api_key = config.api_key;
  pc.options = First(First(settings.options, config.options), preset.options);
  pc.stream = !settings.no_stream;
  if (!settings.replay.empty()) {
    STRATA_ASSIGN_OR_RETURN(pc.transport, llm::ReplayTransport(settings.replay));
  } else if (!settings.record.empty()) {
    pc.transport = llm::RecordingTransport(llm::CurlTransport(), settings.record);
  }
  // A hosted service (the preset's own https endpoint) refuses every request without a key; a local server
  // or another base URL may not need one.
  if (pc.api_key.empty() && settings.replay.empty() && pc.base_url == preset.base_url &&
      preset.base_url.starts_with("https://")) {
    pc.missing_key = "no API key for the " + name + " provider (" + pc.base_url + "): set " +
                     (key_env.empty() ? std::string("api_key") : key_env) +
                     ", or api_key in the config file, or choose another provider";
  }
  return pc;
}

}  // namespace strata
