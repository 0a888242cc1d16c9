// Which model to call, and how: the resolution every front end shares (the CLI's flags, the server's
// config, a program embedding Strata).
//
// Each setting is taken from the first place that has it:
//   1. ProviderSettings (what the caller chose: command-line flags, a request)
//   2. the config file: ProviderSettings::config_file, else $STRATA_CONFIG, else ~/.config/strata/config.json
//      when it exists — a JSON object {"provider", "model", "base_url", "api_key_env", "api_key", "options",
//      "system_prompt", "session", "max_context_tokens", "mcpServers"}; a wrongly typed member is an error
//      naming it
//   3. the provider's preset (llm::FindProviderPreset: base URL, key variable, default model, options)
//   4. the API key: the environment variable (settings, config, then the preset's), then the config's "api_key"
// With no provider anywhere it is "openai". `script` (or provider "scripted") answers from a script file
// instead of a model; `replay` answers from recorded exchanges; `record` records them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "strata/llm/provider.h"
#include "strata/util/status.h"

namespace strata {

struct ProviderSettings {
  std::string provider;     // openai | openai-responses | kimi | deepseek | ollama | vllm | llamacpp | anthropic | gemini | scripted
  std::string model;
  std::string base_url;
  std::string api_key_env;  // The environment variable holding the key.
  std::string options;      // Provider options, a JSON object (docs/providers.md).
  std::string config_file;  // Explicit config file (else $STRATA_CONFIG, else ~/.config/strata/config.json).
  std::string script;       // Scripted replies (llm/scripted.h) instead of a model.
  std::string record;       // Append every HTTP exchange to this file.
  std::string replay;       // Answer from a recording instead of the network.
  bool no_stream = false;
};

// The config file's contents, every member checked for its type.
struct ConfigFile {
  std::string path;  // Empty when there was none.
  std::string provider, model, base_url, api_key_env, api_key, system_prompt, session;
  std::string options;  // The "options" object as JSON text; empty when absent.
  // {"mcpServers": {...}} as JSON text when the file has that member (tools/mcp_client.h parses it).
  std::string mcp_servers;
  std::optional<int64_t> max_context_tokens;
};

// Reads the config file named by `explicit_path`, $STRATA_CONFIG or the default location. A missing default
// file is an empty config; a missing named one is kNotFound; anything but a JSON object, or a member of the
// wrong type, is kInvalidArgument naming the file and the member.
Result<ConfigFile> LoadConfigFile(const std::string& explicit_path);

// Builds the provider from the settings, the config and the preset (see above).
Result<std::unique_ptr<llm::ChatProvider>> MakeProvider(const ProviderSettings& settings, const ConfigFile& config,
                                                        llm::RetryCallback on_retry = {});

// The HTTP endpoint the settings name (kind, model, base URL, key, options, transport for --record and
// --replay), without building a provider: what a proxy forwards to. kInvalidArgument for a scripted one.
Result<llm::ProviderConfig> ResolveProviderConfig(const ProviderSettings& settings, const ConfigFile& config);

}  // namespace strata
