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

// Validators with short errors, for options that CLI11 would read as its default when empty, or describe
// with the whole range of a double ("not in range 0.000000 to 17976931348623157…").
CLI::Validator NotEmpty();     // "must not be empty"
CLI::Validator NonNegative();  // a number, 0 or more
CLI::Validator Positive();     // a number more than 0

}  // namespace strata::cli
