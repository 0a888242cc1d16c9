// `strata memory …` and `strata skill …`: the context store from the command line, through the engine.
// `--data DIR` selects the store (default ./strata-data); `--embedder SPEC` the embedder (default: the
// store's own, local for a new store; see memory/embedder.h).
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli_util.h"
#include "commands.h"
#include "provider_flags.h"
#include "strata/engine/engine.h"
#include "strata/engine/views.h"

namespace strata::cli {
namespace {

using views::Json;

struct MemoryArgs {
  std::string data = "strata-data";
  std::string embedder;  // Empty: the store's own (EngineOptions::embedder).
  std::string agent = "default";
  std::string uri, uri2, file, reason, query, dir, under = "strata://", type;
  // write/mkdir: unset derives the layer; given, even empty, it is kept as given (as over HTTP and MCP).
  std::optional<std::string> abstract_text, overview, category;
  int level = 2;
  // find --limit: the engine checks its bounds (signed, so that -1 is refused as -1, not as 2^64 - 1).
  int64_t limit = static_cast<int64_t>(FindRequest{}.limit);
  bool recursive = false, json = false, ignore_case = false, read_only = false, ordered = false;
  std::vector<std::string> paths;
  FindAssist assist;        // find --rewrite/--rerank.
  // find --max-queries/--rerank-candidates: signed, so that -1 is the engine's refusal, not a parse error.
  int64_t max_queries = static_cast<int64_t>(FindAssist{}.max_queries);
  int64_t rerank_candidates = static_cast<int64_t>(FindAssist{}.rerank_candidates);
  int64_t chunk_tokens = 512, max_file_mb = 20;  // add.
  bool keep_missing = false, summarize = false;
  ProviderSettings provider;  // The model they use.
};

Result<std::unique_ptr<Engine>> OpenEngine(const MemoryArgs &a) {
  return Engine::Open({.data_dir = a.data,
                       .embedder = a.embedder,
                       .provider = a.provider,
                       .on_model_retry = WarnRetry,
                       .read_only = a.read_only});
}

Result<std::string> ReadInput(const std::string &file) {
  if (file.empty() || file == "-") return ReadStdin();
  std::ifstream in(file, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + file);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

Status Run(const std::string &cmd, const MemoryArgs &a, Engine &engine) {
  // Unset: the whole store for a listing and an export (as HTTP's listing without a uri). A node's own
  // operations need it named (`rm -r ""` or `read ""` meant the root): the engine refuses "" for them in
  // the words of every front end.
  std::string uri = a.uri;
  if (uri.empty() && (cmd == "ls" || cmd == "tree" || cmd == "export")) uri = "strata://";
  if (cmd == "write") {
    STRATA_ASSIGN_OR_RETURN(std::string content, ReadInput(a.file));
    memory::WriteOptions o{.abstract_text = a.abstract_text, .overview = a.overview, .category = a.category};
    if (!a.type.empty()) {
      STRATA_ASSIGN_OR_RETURN(o.type, memory::ParseContextType(a.type));
    }
    return engine.Write(uri, content, o);
  }
  if (cmd == "mkdir") {
    memory::WriteOptions o{.abstract_text = a.abstract_text, .overview = a.overview};
    if (a.ordered) o.metadata = std::string(memory::kOrderedMetadata);
    return engine.Mkdir(uri, o);
  }
  if (cmd == "read") {
    STRATA_ASSIGN_OR_RETURN(memory::Level level, memory::LevelOf(a.level));
    STRATA_ASSIGN_OR_RETURN(std::string text, engine.Read(uri, level));
    std::cout << text;
    return Status::Ok();
  }
  if (cmd == "ls" || cmd == "tree") {
    STRATA_ASSIGN_OR_RETURN(memory::Uri base, memory::Uri::Parse(uri));
    STRATA_ASSIGN_OR_RETURN(auto nodes, engine.List(uri, {.recursive = cmd == "tree"}));
    if (cmd == "tree" && !a.json) {
      // Drawn by indentation, so each directory's children right after it: in URI order "d-x" and "d.y"
      // come between "d" and "d/x" ('-' and '.' sort before '/'), and d's child was drawn under d.y.
      auto segment_order = [](char p, char q) {
        auto rank = [](char c) { return c == '/' ? 0 : static_cast<int>(static_cast<unsigned char>(c)) + 1; };
        return rank(p) < rank(q);
      };
      std::stable_sort(nodes.begin(), nodes.end(), [&](const memory::Node &x, const memory::Node &y) {
        const std::string &p = x.uri.str(), &q = y.uri.str();
        return std::lexicographical_compare(p.begin(), p.end(), q.begin(), q.end(), segment_order);
      });
    }
    for (const memory::Node &n : nodes) {
      if (a.json) {
        std::cout << views::Dump(views::NodeView(n)) << "\n";
        continue;
      }
      std::string indent;
      if (cmd == "tree") {
        std::string rel = n.uri.str().substr(base.is_root() ? memory::Uri::kPrefix.size() : base.str().size() + 1);
        indent.assign(2 * static_cast<size_t>(std::count(rel.begin(), rel.end(), '/')), ' ');
      }
      std::cout << indent << n.uri.name() << (n.is_dir ? "/" : "") << (n.abstract_text.empty() ? "" : "  — ")
                << n.abstract_text << (views::IsSuperseded(n) ? "  [superseded]" : "") << "\n";
    }
    return Status::Ok();
  }
  if (cmd == "stat") {
    STRATA_ASSIGN_OR_RETURN(memory::Node n, engine.Stat(uri));
    STRATA_ASSIGN_OR_RETURN(auto rels, engine.Relations(uri));
    std::cout << views::Dump(views::NodeDetailView(n, rels), 2) << "\n";
    return Status::Ok();
  }
  if (cmd == "rm") {
    STRATA_ASSIGN_OR_RETURN(int64_t n, engine.Remove(uri, a.recursive));
    std::cerr << "removed " << n << " node" << (n == 1 ? "" : "s") << "\n";
    return Status::Ok();
  }
  if (cmd == "mv") return engine.Move(uri, a.uri2);
  if (cmd == "link") return engine.Link(uri, a.uri2, a.reason);
  if (cmd == "unlink") return engine.Unlink(uri, a.uri2);
  if (cmd == "glob") {
    STRATA_ASSIGN_OR_RETURN(auto nodes, engine.Glob(a.query, a.under));
    for (const auto &n : nodes) std::cout << n.uri.str() << "\n";
    return Status::Ok();
  }
  if (cmd == "grep") {
    STRATA_ASSIGN_OR_RETURN(auto matches, engine.Grep(a.query, a.under, a.ignore_case));
    for (const auto &m : matches) {
      std::cout << m.uri.str() << ":" << m.line << ":" << m.text << (m.superseded ? "  [superseded]" : "") << "\n";
    }
    return Status::Ok();
  }
  if (cmd == "find") {
    // As every front end asks it (Engine::Find for a caller), with the CLI's own reach: everything.
    STRATA_ASSIGN_OR_RETURN(size_t limit, FindLimitArg(a.limit));
    FindRequest request{.query = a.query, .under = a.under == "strata://" ? "" : a.under, .limit = limit};
    if (!a.type.empty()) {
      STRATA_ASSIGN_OR_RETURN(request.tuning.type, memory::ParseContextType(a.type));
    }
    request.assist = a.assist;
    STRATA_ASSIGN_OR_RETURN(request.assist.max_queries, MaxQueriesArg(a.max_queries));
    STRATA_ASSIGN_OR_RETURN(request.assist.rerank_candidates, RerankCandidatesArg(a.rerank_candidates));
    STRATA_ASSIGN_OR_RETURN(FindResult found, engine.Find(request));
    for (const auto &h : found.hits) {
      if (a.json) {
        std::cout << views::Dump(views::HitView(h)) << "\n";  // One hit per line, as HTTP's "hits" holds them.
      } else {
        char score[32];  // Rounded, as the JSON views' readers print it (it was cut: 1.02162 printed 1.021).
        std::snprintf(score, sizeof score, "%.3f", h.score);
        std::cout << score << "  " << h.uri.str() << "  " << h.abstract_text << "\n";
      }
    }
    for (const std::string &q : found.queries) std::cerr << "also searched: " << q << "\n";
    if (found.model) {
      std::cerr << "model: " << found.model->calls << " calls, " << found.model->input_tokens << " input and "
                << found.model->output_tokens << " output tokens, " << static_cast<int64_t>(found.model->ms) << " ms"
                << (found.model->error.empty() ? "" : "; not used: " + found.model->error) << "\n";
    }
    return Status::Ok();
  }
  if (cmd == "add") {
    ingest::AddOptions options{
        .extract = {.chunk_tokens = a.chunk_tokens}, .remove_missing = !a.keep_missing, .summarize = a.summarize};
    if (a.max_file_mb < 1) return Status::InvalidArgument("--max-file-mb must be at least 1");
    STRATA_ASSIGN_OR_RETURN(ingest::AddReport report,
                            engine.AddResources(a.paths, a.uri, options, {.max_file_bytes = a.max_file_mb << 20}));
    std::cout << views::Dump(views::AddReportView(report), 2) << "\n";
    std::cerr << "added " << report.added.size() << ", updated " << report.updated.size() << ", unchanged "
              << report.unchanged.size() << ", removed " << report.removed.size() << ", skipped "
              << report.skipped.size() << " (" << report.chunks << " chunks written"
              << (report.queued > 0 ? ", " + std::to_string(report.queued) + " summaries queued" : "") << ")\n";
    return Status::Ok();
  }
  if (cmd == "export") {
    STRATA_ASSIGN_OR_RETURN(auto report, engine.Export(uri.empty() ? "strata://" : uri, a.dir));
    std::cerr << "exported " << report.directories << " directories, " << report.leaves << " leaves, "
              << report.relations << " relations to " << a.dir
              << (report.removed > 0 ? " (" + std::to_string(report.removed) + " files of an earlier export removed)" : "")
              << "\n";
    return Status::Ok();
  }
  if (cmd == "import") {
    STRATA_ASSIGN_OR_RETURN(auto report, engine.Import(a.dir, a.uri.empty() ? "strata://resources" : a.uri));
    for (const auto &s : report.skipped) Warn("skipped " + s.path + ": " + s.reason);
    std::cerr << "imported " << report.directories << " directories, " << report.leaves << " leaves, "
              << report.relations << " relations\n";
    return Status::Ok();
  }
  if (cmd == "check") {
    STRATA_ASSIGN_OR_RETURN(auto problems, engine.Check());
    for (const auto &p : problems) std::cout << p << "\n";
    if (!problems.empty()) return Status::DataLoss(std::to_string(problems.size()) + " problems found");
    std::cout << "ok\n";
    return Status::Ok();
  }
  if (cmd == "reindex") return engine.Reindex();
  return Status::Internal("unknown memory command " + cmd);
}

Status RunSkill(const std::string &cmd, const MemoryArgs &a, Engine &engine) {
  if (cmd == "add") {
    for (const std::string &path : a.paths) {
      STRATA_ASSIGN_OR_RETURN(std::string uri, engine.AddSkill(a.agent, path));
      std::cout << uri << "\n";
    }
    return Status::Ok();
  }
  if (cmd == "list") {
    STRATA_ASSIGN_OR_RETURN(auto nodes, engine.ListSkills(a.agent));
    for (const auto &n : nodes) std::cout << n.uri.name() << "\t" << n.abstract_text << "\n";
    return Status::Ok();
  }
  // show: the SKILL.md as stored.
  STRATA_ASSIGN_OR_RETURN(std::string md, engine.ShowSkill(a.agent, a.query));
  std::cout << md;
  return Status::Ok();
}

}  // namespace

using StoreCommand = Status (*)(const std::string &cmd, const MemoryArgs &a, Engine &engine);

// Adds subcommand `name` to `parent`; it opens the engine from `a` and runs `run`.
CLI::App *AddStoreSubcommand(CLI::App *parent, const std::shared_ptr<MemoryArgs> &a, int *exit_code, StoreCommand run,
                             const char *name, const char *help) {
  CLI::App *s = parent->add_subcommand(name, help);
  s->callback([a, exit_code, run, name = std::string(name)] {
    auto engine = OpenEngine(*a);
    Status st = engine.ok() ? run(name, *a, **engine) : engine.status();
    *exit_code = st.ok() ? 0 : Fail(st);
  });
  return s;
}

void AddMemoryCommand(CLI::App &app, int *exit_code) {
  auto a = std::make_shared<MemoryArgs>();
  CLI::App *cmd = app.add_subcommand("memory", "The context store: skills, memories and resources by URI");
  cmd->require_subcommand(1);
  cmd->add_option("--data", a->data, "Data directory or postgres:// URL (default ./strata-data)");
  cmd->add_option("--embedder", a->embedder, kEmbedderHelp);
  cmd->add_flag("--read-only", a->read_only, "Only read the data (a read-only volume works); every change is refused");
  auto sub = [&](const char *name, const char *help) { return AddStoreSubcommand(cmd, a, exit_code, Run, name, help); };
  CLI::App *w = sub("write", "Write a leaf's content from FILE or stdin");
  w->add_option("URI", a->uri)->required();
  w->add_option("FILE", a->file, "Content file, or - for stdin (default)");
  w->add_option("--abstract", a->abstract_text, "L0 (default: derived from the content)");
  w->add_option("--overview", a->overview, "L1 (default: derived from the content)");
  w->add_option("--type", a->type, "resource, memory or skill (default: from the URI)")->check(NotEmpty());
  w->add_option("--category", a->category);
  CLI::App *mk = sub("mkdir", "Create a directory (and parents), optionally with its L0/L1");
  mk->add_option("URI", a->uri)->required();
  mk->add_option("--abstract", a->abstract_text);
  mk->add_option("--overview", a->overview);
  mk->add_flag("--ordered", a->ordered,
               "Its children are a sequence (a conversation's turns, a document's chunks): find counts a hit's "
               "neighbours in it");
  CLI::App *r = sub("read", "Print one layer of a node");
  r->add_option("URI", a->uri)->required();
  r->add_option("--level", a->level, "0 abstract, 1 overview, 2 content (default)")->check(NotEmpty());
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
  f->add_option("--type", a->type)->check(NotEmpty());
  f->add_flag("--json", a->json, "One JSON hit per line");
  f->add_flag("--rewrite", a->assist.rewrite, "Let the model rewrite the question into the searches for its parts");
  f->add_flag("--rerank", a->assist.rerank, "Let the model order the best candidates by how well they answer");
  f->add_option("--max-queries", a->max_queries, "Searches the model may write (1-8)");
  f->add_option("--rerank-candidates", a->rerank_candidates, "Candidates the model orders (2-100)");
  AddProviderFlags(f, &a->provider);
  CLI::App *add = sub("add", "Add documents and code (files, directories) as resources below --uri");
  add->add_option("PATH", a->paths, "Files and directories (a directory's files are mirrored below --uri)")->required();
  add->add_option("--uri", a->uri, "Where they go, e.g. strata://resources/docs")->required();
  add->add_option("--chunk-tokens", a->chunk_tokens, "Tokens per chunk at most (default 512)");
  add->add_option("--max-file-mb", a->max_file_mb, "Larger files are skipped (default 20)");
  add->add_flag("--keep-missing", a->keep_missing, "Keep what an earlier add brought from files no longer there");
  add->add_flag("--summarize", a->summarize,
                "Queue a model summary of each added or changed file (run by `strata session work` or the server)");
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
  skill->add_option("--data", a->data, "Data directory or postgres:// URL (default ./strata-data)");
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
