#include "strata/memory/markdown_io.h"

#include "strata/json/checked.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "strata/json/json_writer.h"

namespace strata::memory {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr std::string_view kAbstractSuffix = ".abstract.md";
constexpr std::string_view kOverviewSuffix = ".overview.md";

Status WriteText(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) return Status::Internal("cannot write " + path.string());
  return Status::Ok();
}

Result<std::string> ReadText(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot read " + path.string());
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string LeafFileName(std::string_view name) {
  return std::string(name).ends_with(".md") ? std::string(name) : std::string(name) + ".md";
}

Json NodeMeta(const Node& node) {
  Json meta = {{"name", std::string(node.uri.name())}, {"type", std::string(ContextTypeName(node.type))},
               {"category", node.category}, {"created_ms", node.created_ms}, {"updated_ms", node.updated_ms}};
  meta["metadata"] = Json::parse(node.metadata, nullptr, false);
  if (meta["metadata"].is_discarded()) meta["metadata"] = Json::object();
  if (!node.is_dir) meta["file"] = LeafFileName(node.uri.name());
  return meta;
}

}  // namespace

Result<ExportReport> ExportMarkdown(ContextStore& store, const Uri& root, const std::string& dir) {
  ExportReport report;
  std::vector<Node> nodes;
  if (!root.is_root()) {
    STRATA_ASSIGN_OR_RETURN(Node top, store.Stat(root));
    if (!top.is_dir) return Status::InvalidArgument("export: " + root.str() + " is a file; export its directory");
    nodes.push_back(top);
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<Node> below, store.List(root, {.recursive = true}));
  for (Node& n : below) nodes.push_back(std::move(n));
  size_t prefix = root.is_root() ? Uri::kPrefix.size() : root.str().size() + 1;
  auto local_path = [&](const Uri& uri) {
    return uri == root ? fs::path(dir) : fs::path(dir) / std::string(uri.str()).substr(prefix);
  };
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) return Status::Internal("export: cannot create " + dir + ": " + ec.message());
  std::map<std::string, Json> dir_meta;  // Local directory path → its .meta.json.
  for (const Node& listed : nodes) {
    STRATA_ASSIGN_OR_RETURN(Node node, store.Stat(listed.uri));
    fs::path path = local_path(node.uri);
    if (node.is_dir) {
      fs::create_directories(path, ec);
      if (ec) return Status::Internal("export: cannot create " + path.string() + ": " + ec.message());
      if (!node.abstract_text.empty()) STRATA_RETURN_IF_ERROR(WriteText(path / ".abstract.md", node.abstract_text));
      if (!node.overview.empty()) STRATA_RETURN_IF_ERROR(WriteText(path / ".overview.md", node.overview));
      dir_meta[path.string()]["self"] = NodeMeta(node);
      ++report.directories;
    } else {
      fs::path parent = path.parent_path();
      std::string file = LeafFileName(node.uri.name());
      STRATA_RETURN_IF_ERROR(WriteText(parent / file, node.content));
      std::string stem = file.substr(0, file.size() - 3);
      STRATA_RETURN_IF_ERROR(WriteText(parent / (stem + std::string(kAbstractSuffix)), node.abstract_text));
      STRATA_RETURN_IF_ERROR(WriteText(parent / (stem + std::string(kOverviewSuffix)), node.overview));
      dir_meta[parent.string()]["children"][std::string(node.uri.name())] = NodeMeta(node);
      ++report.leaves;
    }
  }
  for (const auto& [path, meta] : dir_meta) STRATA_RETURN_IF_ERROR(WriteText(fs::path(path) / ".meta.json", meta.dump(2) + "\n"));
  std::string relations;
  for (const Node& node : nodes) {
    STRATA_ASSIGN_OR_RETURN(std::vector<Relation> rels, store.Relations(node.uri));
    for (const Relation& r : rels) {
      if (!(r.from == node.uri) || !root.Contains(r.to)) continue;  // Each link once, from its source.
      Json line = {{"from", std::string(r.from.str()).substr(prefix)}, {"to", std::string(r.to.str()).substr(prefix)},
                   {"reason", r.reason}, {"created_ms", r.created_ms}};
      relations += line.dump() + "\n";
      ++report.relations;
    }
  }
  if (!relations.empty()) STRATA_RETURN_IF_ERROR(WriteText(fs::path(dir) / ".relations.jsonl", relations));
  return report;
}

Result<ImportReport> ImportMarkdown(ContextStore& store, const std::string& dir, const Uri& root) {
  if (!fs::is_directory(dir)) return Status::NotFound("import: " + dir + " is not a directory");
  ImportReport report;
  std::vector<std::pair<Uri, std::string>> leaves;
  std::vector<WriteOptions> leaf_options;
  auto flush = [&]() -> Status {
    if (leaves.empty()) return Status::Ok();
    STRATA_RETURN_IF_ERROR(store.WriteBatch(leaves, leaf_options));
    report.leaves += static_cast<int64_t>(leaves.size());
    leaves.clear();
    leaf_options.clear();
    return Status::Ok();
  };
  auto read_meta = [&](const fs::path& d) {
    auto text = ReadText(d / ".meta.json");
    if (!text.ok()) return Json::object();
    Json meta = Json::parse(*text, nullptr, false);
    if (meta.is_discarded() || !meta.is_object()) {
      report.skipped.push_back((d / ".meta.json").string() + ": not a JSON object (ignored)");
      return Json::object();
    }
    return meta;
  };
  auto apply_meta = [](const Json& meta, WriteOptions* o) {
    if (!meta.is_object()) return;
    if (meta.contains("type") && meta["type"].is_string()) {
      auto type = ParseContextType(meta["type"].get<std::string>());
      if (type.ok()) o->type = *type;
    }
    if (meta.contains("category") && meta["category"].is_string()) o->category = meta["category"].get<std::string>();
    if (meta.contains("metadata") && meta["metadata"].is_object()) o->metadata = meta["metadata"].dump();
  };
  // Depth-first, directories before their files, in name order (deterministic).
  std::vector<std::pair<fs::path, Uri>> stack = {{fs::path(dir), root}};
  while (!stack.empty()) {
    auto [path, uri] = stack.back();
    stack.pop_back();
    Json meta = read_meta(path);
    if (!uri.is_root() && !uri.is_kind_dir()) {
      WriteOptions o;
      auto abstract_text = ReadText(path / ".abstract.md");
      auto overview = ReadText(path / ".overview.md");
      if (abstract_text.ok()) o.abstract_text = *abstract_text;
      if (overview.ok()) o.overview = *overview;
      if (meta.contains("self")) apply_meta(meta["self"], &o);
      STRATA_RETURN_IF_ERROR(flush());
      STRATA_RETURN_IF_ERROR(store.Mkdir(uri, o).WithContext("import " + path.string()));
      ++report.directories;
    }
    // Map file names back to node names through the children's metadata.
    std::map<std::string, std::pair<std::string, Json>> by_file;
    if (meta.contains("children") && meta["children"].is_object()) {
      for (const auto& [name, child] : meta["children"].items()) {
        std::string file = child.contains("file") && child["file"].is_string() ? child["file"].get<std::string>()
                                                                              : LeafFileName(name);
        by_file[file] = {name, child};
      }
    }
    std::vector<fs::directory_entry> entries;
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(path, ec)) entries.push_back(e);
    if (ec) return Status::Internal("import: cannot list " + path.string() + ": " + ec.message());
    std::sort(entries.begin(), entries.end());
    std::vector<std::pair<fs::path, Uri>> subdirs;
    for (const auto& e : entries) {
      std::string file = e.path().filename().string();
      if (file.starts_with('.')) continue;  // Sidecars and hidden files.
      if (e.is_directory()) {
        auto child = uri.Child(file);
        if (!child.ok()) {
          report.skipped.push_back(e.path().string() + ": " + child.status().message());
          continue;
        }
        subdirs.emplace_back(e.path(), *child);
        continue;
      }
      if (!e.is_regular_file()) continue;
      if (file.ends_with(kAbstractSuffix) || file.ends_with(kOverviewSuffix)) {
        std::string_view suffix = file.ends_with(kAbstractSuffix) ? kAbstractSuffix : kOverviewSuffix;
        std::string base = file.substr(0, file.size() - suffix.size()) + ".md";
        if (fs::exists(path / base) || by_file.contains(base)) continue;  // A sidecar of a leaf beside it.
      }
      std::string name = file;
      Json child_meta;
      if (auto it = by_file.find(file); it != by_file.end()) {
        name = it->second.first;
        child_meta = it->second.second;
      } else if (file.ends_with(".md")) {
        name = file.substr(0, file.size() - 3);
      }
      auto child = uri.Child(name);
      if (!child.ok() || child->is_scope_root() || child->is_kind_dir() || uri.is_root()) {
        report.skipped.push_back(e.path().string() + ": " + (child.ok() ? "a file cannot be a scope" : child.status().message()));
        continue;
      }
      STRATA_ASSIGN_OR_RETURN(std::string content, ReadText(e.path()));
      size_t bad = 0;
      if (!json::IsValidUtf8(content, &bad)) {
        report.skipped.push_back(e.path().string() + ": not UTF-8 text (invalid byte at offset " + std::to_string(bad) + ")");
        continue;
      }
      WriteOptions o;
      std::string stem = file.ends_with(".md") ? file.substr(0, file.size() - 3) : file;
      auto abstract_text = ReadText(path / (stem + std::string(kAbstractSuffix)));
      auto overview = ReadText(path / (stem + std::string(kOverviewSuffix)));
      if (abstract_text.ok()) o.abstract_text = *abstract_text;
      if (overview.ok()) o.overview = *overview;
      apply_meta(child_meta, &o);
      leaves.emplace_back(*child, std::move(content));
      leaf_options.push_back(std::move(o));
      if (leaves.size() >= 500) STRATA_RETURN_IF_ERROR(flush());
    }
    STRATA_RETURN_IF_ERROR(flush());
    for (auto it = subdirs.rbegin(); it != subdirs.rend(); ++it) stack.push_back(*it);
  }
  auto relations = ReadText(fs::path(dir) / ".relations.jsonl");
  if (relations.ok()) {
    std::istringstream lines(*relations);
    std::string line;
    int number = 0;
    while (std::getline(lines, line)) {
      ++number;
      if (line.empty()) continue;
      Json r = Json::parse(line, nullptr, false);
      std::string where = ".relations.jsonl line " + std::to_string(number);
      if (r.is_discarded() || !r.contains("from") || !r.contains("to") || !r["from"].is_string() || !r["to"].is_string()) {
        report.skipped.push_back(where + ": expected {\"from\", \"to\", \"reason\"}");
        continue;
      }
      auto from = root.Join(r["from"].get<std::string>());
      auto to = root.Join(r["to"].get<std::string>());
      if (!from.ok() || !to.ok()) {
        report.skipped.push_back(where + ": " + (from.ok() ? to.status() : from.status()).message());
        continue;
      }
      Status linked = store.Link(*from, *to, json::StringOr(r, "reason"));
      if (!linked.ok()) {
        report.skipped.push_back(where + ": " + linked.message());
        continue;
      }
      ++report.relations;
    }
  }
  return report;
}

}  // namespace strata::memory
