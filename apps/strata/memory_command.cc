// `strata memory …` and `strata skill …`: the context store from the command
// line. `--data DIR` selects the store (default ./strata-data); `--embedder
// SPEC` the embedder (default local; see memory/embedder.h).
#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.h"
#include "commands.h"
#include "strata/memory/markdown_io.h"
#include "strata/memory/retrieval.h"
#include "strata/memory/skill.h"
#include "strata/memory/sqlite_store.h"

namespace strata::cli {
namespace {

using Json = nlohmann::ordered_json;

struct MemoryArgs {
  std::string data = "strata-data";
  std::string embedder = "local";
  std::string agent = "default";
  std::string uri, uri2, file, abstract_text, overview, reason, query, dir, under = "strata://", type, category;
  int level = 2;
  size_t limit = 10;
  bool recursive = false, json = false, ignore_case = false;
  std::vector<std::string> paths;
};

Result<std::unique_ptr<memory::ContextStore>> OpenStore(const MemoryArgs &a) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<memory::Embedder> embedder, memory::EmbedderFromSpec(a.embedder));
  return memory::OpenSqliteStore(a.data, {.embedder = std::move(embedder)});
}

Result<std::string> ReadInput(const std::string &file) {
  if (file.empty() || file == "-") return ReadStdin();
  std::ifstream in(file, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Json NodeJson(const memory::Node &n) {
  return {{"uri", n.uri.str()},
          {"is_dir", n.is_dir},
          {"type", std::string(memory::ContextTypeName(n.type))},
          {"category", n.category},
          {"abstract", n.abstract_text},
          {"size", n.size},
          {"created_ms", n.created_ms},
          {"updated_ms", n.updated_ms}};
}

// Runs `body` with an open store and the parsed URI; reports errors uniformly.
template <typename F>
int WithStore(const MemoryArgs &a, F body) {
  auto store = OpenStore(a);
  if (!store.ok()) return Fail(store.status());
  Status s = body(**store);
  return s.ok() ? 0 : Fail(s);
}

Status Run(const std::string &cmd, const MemoryArgs &a, memory::ContextStore &store) {
  using memory::Uri;
  Uri uri = Uri::Root();
  if (!a.uri.empty()) {
    STRATA_ASSIGN_OR_RETURN(uri, Uri::Parse(a.uri));
  }
  if (cmd == "write") {
    STRATA_ASSIGN_OR_RETURN(std::string content, ReadInput(a.file));
    memory::WriteOptions o;
    if (!a.abstract_text.empty()) o.abstract_text = a.abstract_text;
    if (!a.overview.empty()) o.overview = a.overview;
    if (!a.category.empty()) o.category = a.category;
    if (!a.type.empty()) {
      STRATA_ASSIGN_OR_RETURN(o.type, memory::ParseContextType(a.type));
    }
    return store.Write(uri, content, o);
  }
  if (cmd == "mkdir") {
    memory::WriteOptions o;
    if (!a.abstract_text.empty()) o.abstract_text = a.abstract_text;
    if (!a.overview.empty()) o.overview = a.overview;
    return store.Mkdir(uri, o);
  }
  if (cmd == "read") {
    if (a.level < 0 || a.level > 2) return Status::InvalidArgument("--level must be 0, 1 or 2");
    STRATA_ASSIGN_OR_RETURN(std::string text, store.Read(uri, static_cast<memory::Level>(a.level)));
    std::cout << text;
    return Status::Ok();
  }
  if (cmd == "ls" || cmd == "tree") {
    STRATA_ASSIGN_OR_RETURN(auto nodes, store.List(uri, {.recursive = cmd == "tree"}));
    for (const memory::Node &n : nodes) {
      if (a.json) {
        std::cout << NodeJson(n).dump() << "\n";
        continue;
      }
      std::string indent;
      if (cmd == "tree") {
        std::string rel = n.uri.str().substr(uri.is_root() ? memory::Uri::kPrefix.size() : uri.str().size() + 1);
        indent.assign(2 * static_cast<size_t>(std::count(rel.begin(), rel.end(), '/')), ' ');
      }
      std::cout << indent << n.uri.name() << (n.is_dir ? "/" : "") << (n.abstract_text.empty() ? "" : "  — ")
                << n.abstract_text << "\n";
    }
    return Status::Ok();
  }
  if (cmd == "stat") {
    STRATA_ASSIGN_OR_RETURN(memory::Node n, store.Stat(uri));
    Json j = NodeJson(n);
    j["overview"] = n.overview;
    j["metadata"] = Json::parse(n.metadata, nullptr, false);
    STRATA_ASSIGN_OR_RETURN(auto rels, store.Relations(uri));
    j["relations"] = Json::array();
    for (const auto &r : rels)
      j["relations"].push_back({{"from", r.from.str()}, {"to", r.to.str()}, {"reason", r.reason}});
    std::cout << j.dump(2) << "\n";
    return Status::Ok();
  }
  if (cmd == "rm") {
    STRATA_ASSIGN_OR_RETURN(int64_t n, store.Remove(uri, a.recursive));
    std::cerr << "removed " << n << " node" << (n == 1 ? "" : "s") << "\n";
    return Status::Ok();
  }
  if (cmd == "mv" || cmd == "link" || cmd == "unlink") {
    STRATA_ASSIGN_OR_RETURN(Uri to, Uri::Parse(a.uri2));
    if (cmd == "mv") return store.Move(uri, to);
    if (cmd == "link") return store.Link(uri, to, a.reason);
    return store.Unlink(uri, to);
  }
  if (cmd == "glob") {
    STRATA_ASSIGN_OR_RETURN(Uri under, Uri::Parse(a.under));
    STRATA_ASSIGN_OR_RETURN(auto nodes, store.Glob(a.query, under));
    for (const auto &n : nodes) std::cout << n.uri.str() << "\n";
    return Status::Ok();
  }
  if (cmd == "grep") {
    STRATA_ASSIGN_OR_RETURN(Uri under, Uri::Parse(a.under));
    STRATA_ASSIGN_OR_RETURN(auto matches, store.Grep(a.query, under, a.ignore_case));
    for (const auto &m : matches) std::cout << m.uri.str() << ":" << m.line << ":" << m.text << "\n";
    return Status::Ok();
  }
  if (cmd == "find") {
    memory::FindOptions o{.limit = a.limit};
    STRATA_ASSIGN_OR_RETURN(o.under, Uri::Parse(a.under));
    if (!a.type.empty()) {
      STRATA_ASSIGN_OR_RETURN(o.type, memory::ParseContextType(a.type));
    }
    STRATA_ASSIGN_OR_RETURN(auto hits, memory::Find(store, a.query, o));
    for (const auto &h : hits) {
      if (a.json) {
        std::cout << Json{{"uri", h.uri.str()},
                          {"level", static_cast<int>(h.level)},
                          {"score", h.score},
                          {"abstract", h.abstract_text},
                          {"reason", h.reason}}
                         .dump()
                  << "\n";
      } else {
        std::cout << std::to_string(h.score).substr(0, 5) << "  " << h.uri.str() << "  " << h.abstract_text << "\n";
      }
    }
    return Status::Ok();
  }
  if (cmd == "export") {
    STRATA_ASSIGN_OR_RETURN(auto report, memory::ExportMarkdown(store, uri, a.dir));
    std::cerr << "exported " << report.directories << " directories, " << report.leaves << " leaves, "
              << report.relations << " relations to " << a.dir << "\n";
    return Status::Ok();
  }
  if (cmd == "import") {
    if (a.uri.empty()) uri = *memory::Uri::Parse("strata://resources");
    STRATA_ASSIGN_OR_RETURN(auto report, memory::ImportMarkdown(store, a.dir, uri));
    for (const auto &s : report.skipped) Warn("skipped " + s);
    std::cerr << "imported " << report.directories << " directories, " << report.leaves << " leaves, "
              << report.relations << " relations\n";
    return Status::Ok();
  }
  if (cmd == "check") {
    STRATA_ASSIGN_OR_RETURN(auto problems, store.Check());
    for (const auto &p : problems) std::cout << p << "\n";
    if (!problems.empty()) return Status::DataLoss(std::to_string(problems.size()) + " problems found");
    std::cout << "ok\n";
    return Status::Ok();
  }
  if (cmd == "reindex") return store.Reindex();
  return Status::Internal("unknown memory command " + cmd);
}

Status RunSkill(const std::string &cmd, const MemoryArgs &a, memory::ContextStore &store) {
  STRATA_ASSIGN_OR_RETURN(memory::Uri skills, memory::Uri::Parse("strata://agent/" + a.agent + "/skills"));
  if (cmd == "add") {
    for (const std::string &path : a.paths) {
      STRATA_ASSIGN_OR_RETURN(memory::Skill skill, memory::LoadSkillFile(path));
      STRATA_ASSIGN_OR_RETURN(memory::Uri uri, skills.Child(skill.name));
      Json meta = {{"tools", skill.tools}, {"skill_md", memory::SerializeSkill(skill)}};
      STRATA_RETURN_IF_ERROR(store.Write(
          uri, skill.body,
          {.abstract_text = skill.description, .type = memory::ContextType::kSkill, .metadata = meta.dump()}));
      std::cout << uri.str() << "\n";
    }
    return Status::Ok();
  }
  if (cmd == "list") {
    STRATA_RETURN_IF_ERROR(store.Mkdir(skills, {}));
    STRATA_ASSIGN_OR_RETURN(auto nodes, store.List(skills));
    for (const auto &n : nodes) std::cout << n.uri.name() << "\t" << n.abstract_text << "\n";
    return Status::Ok();
  }
  // show: the SKILL.md as stored.
  STRATA_ASSIGN_OR_RETURN(memory::Uri uri, skills.Child(a.query));
  STRATA_ASSIGN_OR_RETURN(memory::Node node, store.Stat(uri));
  Json meta = Json::parse(node.metadata, nullptr, false);
  if (meta.is_object() && meta.contains("skill_md") && meta["skill_md"].is_string()) {
    std::cout << meta["skill_md"].get<std::string>();
  } else {
    std::cout << node.content;
  }
  return Status::Ok();
}

}  // namespace

using StoreCommand = Status (*)(const std::string &cmd, const MemoryArgs &a, memory::ContextStore &store);

// Adds subcommand `name` to `parent`; it opens the store from `a` and runs `run`.
CLI::App *AddStoreSubcommand(CLI::App *parent, const std::shared_ptr<MemoryArgs> &a, int *exit_code, StoreCommand run,
                             const char *name, const char *help) {
  CLI::App *s = parent->add_subcommand(name, help);
  s->callback([a, exit_code, run, name = std::string(name)] {
    *exit_code = WithStore(*a, [&](memory::ContextStore &store) { return run(name, *a, store); });
  });
  return s;
}

void AddMemoryCommand(CLI::App &app, int *exit_code) {
  auto a = std::make_shared<MemoryArgs>();
  CLI::App *cmd = app.add_subcommand("memory", "The context store: skills, memories and resources by URI");
  cmd->require_subcommand(1);
  cmd->add_option("--data", a->data, "Store directory (default ./strata-data)");
  cmd->add_option("--embedder", a->embedder, "local[:DIM], openai:MODEL, ollama:MODEL, gemini:MODEL");
  auto sub = [&](const char *name, const char *help) { return AddStoreSubcommand(cmd, a, exit_code, Run, name, help); };
  CLI::App *w = sub("write", "Write a leaf's content from FILE or stdin");
  w->add_option("URI", a->uri)->required();
  w->add_option("FILE", a->file, "Content file, or - for stdin (default)");
  w->add_option("--abstract", a->abstract_text, "L0 (default: derived from the content)");
  w->add_option("--overview", a->overview, "L1 (default: derived from the content)");
  w->add_option("--type", a->type, "resource, memory or skill (default: from the URI)");
  w->add_option("--category", a->category);
  CLI::App *mk = sub("mkdir", "Create a directory (and parents), optionally with its L0/L1");
  mk->add_option("URI", a->uri)->required();
  mk->add_option("--abstract", a->abstract_text);
  mk->add_option("--overview", a->overview);
  CLI::App *r = sub("read", "Print one layer of a node");
  r->add_option("URI", a->uri)->required();
  r->add_option("--level", a->level, "0 abstract, 1 overview, 2 content (default)");
  for (const char *name : {"ls", "tree"}) {
    CLI::App *l = sub(name, name == std::string("ls") ? "List a directory" : "List a subtree");
    l->add_option("URI", a->uri)->default_val("strata://");
    l->add_flag("--json", a->json, "One JSON object per line");
  }
  sub("stat", "Print a node's fields and relations as JSON")->add_option("URI", a->uri)->required();
  CLI::App *rm = sub("rm", "Remove a node (-r for a directory with entries)");
  rm->add_option("URI", a->uri)->required();
  rm->add_flag("-r,--recursive", a->recursive);
  for (const char *name : {"mv", "link", "unlink"}) {
    CLI::App *m = sub(name, name == std::string("mv") ? "Move a node and its subtree" : "Link / unlink two nodes");
    m->add_option("FROM", a->uri)->required();
    m->add_option("TO", a->uri2)->required();
    if (name == std::string("link")) m->add_option("--reason", a->reason);
  }
  CLI::App *g = sub("glob", "Nodes whose path below --under matches PATTERN (*, ?, **, [..])");
  g->add_option("PATTERN", a->query)->required();
  g->add_option("--under", a->under);
  CLI::App *gr = sub("grep", "Lines of leaves containing TEXT");
  gr->add_option("TEXT", a->query)->required();
  gr->add_option("--under", a->under);
  gr->add_flag("-i,--ignore-case", a->ignore_case);
  CLI::App *f = sub("find", "Hybrid, hierarchical retrieval");
  f->add_option("QUERY", a->query)->required();
  f->add_option("--under", a->under);
  f->add_option("--limit", a->limit);
  f->add_option("--type", a->type);
  f->add_flag("--json", a->json);
  CLI::App *ex = sub("export", "Export a subtree as Markdown files");
  ex->add_option("DIR", a->dir)->required();
  ex->add_option("--uri", a->uri, "Subtree (default: everything)");
  CLI::App *im = sub("import", "Import a Markdown tree below --uri");
  im->add_option("DIR", a->dir)->required();
  im->add_option("--uri", a->uri, "Where to import (default strata://resources)");
  sub("check", "Verify that the indexes match the content");
  sub("reindex", "Recompute stale vectors and rebuild the vector index");

  CLI::App *skill = app.add_subcommand("skill", "SKILL.md skills stored as skill contexts");
  skill->require_subcommand(1);
  skill->add_option("--data", a->data, "Store directory (default ./strata-data)");
  skill->add_option("--agent", a->agent, "Agent id whose skills/ directory holds them (default: default)");
  auto skill_sub = [&](const char *name, const char *help) {
    return AddStoreSubcommand(skill, a, exit_code, RunSkill, name, help);
  };
  skill_sub("add", "Validate and store SKILL.md files (or directories holding one)")
      ->add_option("PATH", a->paths)
      ->required();
  skill_sub("list", "List stored skills with their descriptions");
  skill_sub("show", "Print a stored skill as SKILL.md")->add_option("NAME", a->query)->required();
}

}  // namespace strata::cli
