// The `strata` command-line program: a thin adapter over the library. Each subcommand parses its
// arguments, calls the library, prints JSON to stdout and reports failures as one line on stderr with the
// exit code of the error's StatusCode (see strata/util/status.h).
#include <CLI/CLI.hpp>

#include <iostream>

#include "cli_util.h"
#include "commands.h"

int main(int argc, char** argv) {
  CLI::App app{"strata - a context engine for LLM agents: durable conversation logs, token budgets, memory"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "strata 0.1.0");
  int exit_code = 0;
  strata::cli::AddContextCommand(app, &exit_code);
  strata::cli::AddTokensCommand(app, &exit_code);
  strata::cli::AddProviderCommand(app, &exit_code);
  strata::cli::AddChatCommand(app, &exit_code);
  strata::cli::AddWindowCommand(app, &exit_code);
  strata::cli::AddPromptCommand(app, &exit_code);
  strata::cli::AddMemoryCommand(app, &exit_code);
  strata::cli::AddSessionCommand(app, &exit_code);
  strata::cli::AddServeCommand(app, &exit_code);
  strata::cli::AddMcpCommand(app, &exit_code);
  strata::cli::AddMigrateCommand(app, &exit_code);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int rc = app.exit(e);
    // CLI11 uses 0 for --help; any other parse problem is a usage error.
    return rc == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    // The library reports errors as Status; an exception reaching here is a bug, reported as one line.
    return strata::cli::Fail(strata::Status::Internal(std::string("unexpected error: ") + e.what()));
  } catch (...) {
    return strata::cli::Fail(strata::Status::Internal("unexpected error"));
  }
  return exit_code;
}
