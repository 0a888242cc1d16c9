// Registration of the `strata` subcommands. Each Add*Command attaches its subcommand to `app` and returns
// the slot where the command's exit code is written when it runs.
#pragma once

#include <CLI/CLI.hpp>

namespace strata::cli {

void AddContextCommand(CLI::App& app, int* exit_code);
void AddTokensCommand(CLI::App& app, int* exit_code);
void AddProviderCommand(CLI::App& app, int* exit_code);
void AddChatCommand(CLI::App& app, int* exit_code);
void AddWindowCommand(CLI::App& app, int* exit_code);
void AddPromptCommand(CLI::App& app, int* exit_code);
void AddMemoryCommand(CLI::App& app, int* exit_code);  // Also `strata skill`.
// `strata session`; needs AddMemoryCommand first: it adds remember/history/consolidate to `strata memory`.
void AddSessionCommand(CLI::App& app, int* exit_code);
void AddServeCommand(CLI::App& app, int* exit_code);
void AddMcpCommand(CLI::App& app, int* exit_code);
void AddMigrateCommand(CLI::App& app, int* exit_code);

}  // namespace strata::cli
