// The provider flags shared by the commands that call a model (`strata chat`, `strata context compact`,
// `strata session commit --wait`, `strata memory remember`, ...). Resolution (flags → config file → preset
// → environment key) is the library's: strata/engine/provider_config.h.
#pragma once

#include <CLI/CLI.hpp>
#include <chrono>

#include "strata/engine/provider_config.h"

namespace strata::cli {

// Adds --provider, --model, --base-url, --api-key-env, --options, --config, --script, --record, --replay,
// --no-stream to `cmd`.
void AddProviderFlags(CLI::App* cmd, ProviderSettings* flags);

// What --embedder takes, for every command that has it.
inline constexpr const char* kEmbedderHelp =
    "local[:DIM], openai:MODEL, ollama:MODEL, gemini:MODEL (default: the store's own; local for a new store; "
    "another re-embeds every node)";

// Prints "strata: warning: attempt N failed (...); retrying in D ms" before a model request is retried.
void WarnRetry(int attempt, const Status& error, std::chrono::milliseconds delay);

}  // namespace strata::cli
