// `strata prompt render TEMPLATE.yaml|ID [--dir DIR]... [--vars FILE.json] [--var k=v]...`: validates the
// variables and prints exactly the rendered text (no newline added). An ID is looked up among the *.yaml
// files of the --dir directories (default: $STRATA_PROMPT_DIR, then ./prompts).
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli_util.h"
#include "commands.h"
#include "strata/prompt/prompt_template.h"

namespace strata::cli {
namespace {

struct PromptArgs {
  std::string name;
  std::vector<std::string> dirs;
  std::string vars_file;
  std::vector<std::string> vars;
};

Result<prompt::PromptTemplate> Find(const PromptArgs& args) {
  if (std::filesystem::is_regular_file(args.name)) return prompt::PromptTemplate::FromFile(args.name);
  std::vector<std::string> dirs = args.dirs;
  if (dirs.empty()) {
    if (const char* env = std::getenv("STRATA_PROMPT_DIR")) dirs.push_back(env);
    dirs.push_back("prompts");
  }
  for (const std::string& dir : dirs) {
    std::error_code ec;
    for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
      std::string ext = it->path().extension().string();
      if (!it->is_regular_file() || (ext != ".yaml" && ext != ".yml")) continue;
      auto t = prompt::PromptTemplate::FromFile(it->path().string());
      if (t.ok() && t->id() == args.name) return t;
    }
  }
  std::string searched;
  for (const std::string& d : dirs) searched += (searched.empty() ? "" : ", ") + d;
  return Status::NotFound("no template file or id '" + args.name + "' (searched " + searched + ")");
}

int RunRender(const PromptArgs& args) {
  auto t = Find(args);
  if (!t.ok()) return Fail(t.status());
  prompt::Value vars{prompt::Dict{}};
  if (!args.vars_file.empty()) {
    std::ifstream in(args.vars_file, std::ios::binary);
    if (!in) return Fail(Status::NotFound("--vars " + args.vars_file + " cannot be read"));
    std::stringstream s;
    s << in.rdbuf();
    auto parsed = prompt::Value::FromJson(s.str());
    if (!parsed.ok()) return Fail(parsed.status().WithContext("--vars " + args.vars_file));
    if (!parsed->is_dict()) return Fail(Status::InvalidArgument("--vars " + args.vars_file + ": expected a JSON object"));
    vars = *parsed;
  }
  for (const std::string& kv : args.vars) {
    size_t eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) return Fail(Status::InvalidArgument("--var " + kv + ": expected NAME=VALUE"));
    vars.Set(prompt::Value(kv.substr(0, eq)), prompt::Value(kv.substr(eq + 1)));
  }
  auto out = t->Render(vars);
  if (!out.ok()) return Fail(out.status());
  std::cout << *out << std::flush;
  return 0;
}

}  // namespace

void AddPromptCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<PromptArgs>();
  CLI::App* cmd = app.add_subcommand("prompt", "YAML + Jinja2 prompt templates");
  cmd->require_subcommand(1);
  CLI::App* render = cmd->add_subcommand("render", "Validate the variables and print the rendered text");
  render->add_option("TEMPLATE", args->name, "A template file, or a template id to look up in --dir")->required();
  render->add_option("--dir", args->dirs, "Directories of *.yaml templates (default $STRATA_PROMPT_DIR, ./prompts)");
  render->add_option("--vars", args->vars_file, "Variables as a JSON object file");
  render->add_option("--var", args->vars, "NAME=VALUE (a string), repeatable; wins over --vars");
  render->callback([args, exit_code] { *exit_code = RunRender(*args); });
}

}  // namespace strata::cli
