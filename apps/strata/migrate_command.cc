// `strata migrate --from DIR --to postgres://…`: copies a deployment between backends and verifies the copy
// (strata/engine/migrate.h).
#include <iostream>

#include "cli_util.h"
#include "commands.h"
#include "strata/engine/migrate.h"

namespace strata::cli {
namespace {

struct MigrateArgs {
  std::string from;
  std::string to;
  std::string embedder;  // Empty: the store's own (EngineOptions::embedder).
};

Status RunMigrate(const MigrateArgs& a) {
  if (a.from == a.to) return Status::InvalidArgument("--from and --to name the same place: " + a.from);
  STRATA_ASSIGN_OR_RETURN(auto from, Engine::Open({.data_dir = a.from, .embedder = a.embedder}));
  // Without --embedder the copy's vectors are of the source's own model, not of a new store's default.
  EngineOptions to_options{.data_dir = a.to, .embedder = a.embedder};
  if (a.embedder.empty()) {
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * source, from->store());
    to_options.embedder_instance = source->embedder();
  }
  STRATA_ASSIGN_OR_RETURN(auto to, Engine::Open(std::move(to_options)));
  STRATA_ASSIGN_OR_RETURN(MigrationReport report, CopyDeployment(*from, *to, [](std::string_view line) {
                            std::cerr << "strata migrate: " << line << std::endl;
                          }));
  std::cout << "copied " << report.nodes << " nodes, " << report.relations << " relations, " << report.sessions
            << " sessions (" << report.messages << " messages, " << report.archives << " archives), "
            << report.audit_entries << " audit entries\n";
  if (!report.differences.empty()) {
    for (const std::string& d : report.differences) std::cout << "  difference: " << d << "\n";
    return Status::DataLoss("the copy differs from the source in " + std::to_string(report.differences.size()) +
                            " places (listed above); the source is unchanged");
  }
  std::cout << "verified: the copy matches the source\n";
  return Status::Ok();
}

}  // namespace

void AddMigrateCommand(CLI::App& app, int* exit_code) {
  auto a = std::make_shared<MigrateArgs>();
  CLI::App* cmd = app.add_subcommand(
      "migrate", "Copy a deployment to another backend (e.g. a data directory to PostgreSQL) and verify the copy");
  cmd->add_option("--from", a->from, "Source: a data directory or postgres:// URL")->required();
  cmd->add_option("--to", a->to, "Destination (must be empty): a postgres:// URL or a data directory")->required();
  cmd->add_option("--embedder", a->embedder, "The embedder both use: local[:DIM], openai:MODEL, ... (default: the source's own, for both)");
  cmd->callback([a, exit_code] {
    Status s = RunMigrate(*a);
    *exit_code = s.ok() ? 0 : Fail(s);
  });
}

}  // namespace strata::cli
