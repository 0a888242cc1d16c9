// Provider settings shared by the commands that call a model (`strata chat`, `strata context compact`):
// flags, then a JSON config file (--config, $STRATA_CONFIG or ~/.config/strata/config.json:
// {"provider","model","base_url","api_key_env","api_key","options","system_prompt","session",
// "max_context_tokens"}), then the provider preset (base URL, key variable, default model).
#pragma once

#include <CLI/CLI.hpp>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "strata/llm/provider.h"
#include "strata/util/status.h"

namespace strata::cli {

struct ProviderFlags {
  std::string provider;
  std::string model;
  std::string base_url;
  std::string api_key_env;
  std::string options;
  std::string config;
  std::string script;
  std::string record;
  std::string replay;
  bool no_stream = false;
};

// Adds --provider, --model, --base-url, --api-key-env, --options, --config, --script, --record, --replay,
// --no-stream to `cmd`.
void AddProviderFlags(CLI::App* cmd, ProviderFlags* flags);

// Reads the config file (an empty object when there is none and none was named).
Result<nlohmann::json> LoadConfig(const ProviderFlags& flags);

// Returns the value of `flag` if set, else the config's string `key`, else "".
std::string Pick(const std::string& flag, const nlohmann::json& config, const char* key);

// Builds the provider: the scripted one for --script, else an HTTP provider.
Result<std::unique_ptr<llm::ChatProvider>> MakeProvider(const ProviderFlags& flags, const nlohmann::json& config);

}  // namespace strata::cli
