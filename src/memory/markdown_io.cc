#include "strata/memory/markdown_io.h"

#include "strata/json/checked.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <optional>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "strata/json/json_writer.h"
#include "strata/memory/hash.h"
#include "strata/util/utf8.h"

namespace strata::memory {
namespace {

// Names compared with runs of digits as numbers: "turn-2" < "turn-10"; otherwise bytewise.
bool NaturalLess(std::string_view a, std::string_view b) {
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (digit(a[i]) && digit(b[j])) {
      size_t ei = i, ej = j;
      while (ei < a.size() && digit(a[ei])) ++ei;
      while (ej < b.size() && digit(b[ej])) ++ej;
      std::string_view x = a.substr(i, ei - i), y = b.substr(j, ej - j);
      while (x.size() > 1 && x[0] == '0') x.remove_prefix(1);
      while (y.size() > 1 && y[0] == '0') y.remove_prefix(1);
      if (x.size() != y.size()) return x.size() < y.size();
      if (x != y) return x < y;
      i = ei;
      j = ej;
    } else {
      if (a[i] != b[j]) return static_cast<unsigned char>(a[i]) < static_cast<unsigned char>(b[j]);
      ++i;
      ++j;
    }
  }
  if ((a.size() - i) != (b.size() - j)) return a.size() - i < b.size() - j;
  return a < b;  // Equal but for leading zeros: a total order all the same.
}

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

constexpr std::string_view kAbstractSuffix = ".abstract.md";
constexpr std::string_view kOverviewSuffix = ".overview.md";

// How a path in the tree is named in errors and skipped entries: relative to the tree's root (the user
// named the root; a server imports through a scratch directory whose place is nobody's business).
std::string Shown(const fs::path& path, const fs::path& root) {
  std::string rel = path.lexically_relative(root).generic_string();
  return rel.empty() || rel == "." ? "the tree's root" : rel;
}

// Export and import never follow a symbolic link inside the tree: a link planted in an export target would
// make Strata overwrite a file outside it, and a link in an imported tree would pull outside files (or a
// loop) into the store. Files are opened with O_NOFOLLOW, so there is no window between check and use.
Status WriteText(const fs::path& path, std::string_view text, const fs::path& root) {
  const std::string shown = Shown(path, root);
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (errno == ELOOP) return Status::FailedPrecondition(shown + " is a symbolic link; export does not write through links");
    return Status::Internal("cannot write " + shown + ": " + std::strerror(errno));
  }
  size_t done = 0;
  while (done < text.size()) {
    ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int err = errno;
      ::close(fd);
      return Status::Internal("cannot write " + shown + ": " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::close(fd) != 0) return Status::Internal("cannot write " + shown + ": " + std::strerror(errno));
  return Status::Ok();
}

// Reads a regular file, not through a symbolic link: kNotFound when it is missing, kFailedPrecondition
// when it is a link or not a regular file.
Result<std::string> ReadText(const fs::path& path, const fs::path& root) {
  const std::string shown = Shown(path, root);
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    if (errno == ELOOP) return Status::FailedPrecondition(shown + ": a symbolic link, not followed");
    if (errno == ENOENT || errno == ENOTDIR) return Status::NotFound("cannot read " + shown);
    return Status::Internal("cannot read " + shown + ": " + std::strerror(errno));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::FailedPrecondition(shown + ": not a regular file");
  }
  std::string out;
  char buf[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int err = errno;
      ::close(fd);
      return Status::Internal("cannot read " + shown + ": " + std::strerror(err));
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  return out;
}

// Creates `path` (a directory of the export) unless it exists as a directory; refuses a symbolic link.
Status MakeExportDir(const fs::path& path, const fs::path& root) {
  std::error_code ec;
  fs::file_status st = fs::symlink_status(path, ec);
  if (fs::is_symlink(st)) {
    return Status::FailedPrecondition("export: " + Shown(path, root) + " is a symbolic link; export does not write through links");
  }
  if (fs::is_directory(st)) return Status::Ok();
  fs::create_directory(path, ec);
  if (ec) return Status::Internal("export: cannot create " + Shown(path, root) + ": " + ec.message());
  return Status::Ok();
}

// `parent`'s child `name`, refused as a store would refuse it when its URI is longer than a node's may be
// (Uri::kMaxStoredBytes): skipped, where the write stopped the import halfway.
Result<Uri> StoredChild(const Uri& parent, std::string_view name) {
  STRATA_ASSIGN_OR_RETURN(Uri child, parent.Child(name));
  if (child.str().size() <= Uri::kMaxStoredBytes) return child;
  return Status::InvalidArgument("its URI would be " + std::to_string(child.str().size()) +
                                 " bytes; a node's URI is at most " + std::to_string(Uri::kMaxStoredBytes));
}

// Notes `path` as left out for `reason`, which may name the path first already (a status of ReadText's).
void Skip(std::vector<SkippedPath>* skipped, const std::string& path, std::string_view reason) {
  if (reason.starts_with(path) && reason.substr(path.size()).starts_with(": ")) reason.remove_prefix(path.size() + 2);
  skipped->push_back({path, std::string(reason)});
}

std::string NotUtf8(size_t bad) { return "not UTF-8 text (invalid byte at offset " + std::to_string(bad) + ")"; }

// A sidecar layer (.abstract.md, .overview.md) when present; a linked or unreadable one is noted.
std::optional<std::string> ReadSidecar(const fs::path& path, const fs::path& root, std::vector<SkippedPath>* skipped) {
  Result<std::string> text = ReadText(path, root);
  if (text.ok()) {
    size_t bad = 0;
    if (json::IsValidUtf8(*text, &bad)) return std::move(*text);
    Skip(skipped, Shown(path, root), NotUtf8(bad));
    return std::nullopt;
  }
  if (text.status().code() != StatusCode::kNotFound) Skip(skipped, Shown(path, root), text.status().message());
  return std::nullopt;
}

std::string LeafFileName(std::string_view name) {
  return std::string(name).ends_with(".md") ? std::string(name) : std::string(name) + ".md";
}

// The longest stem a leaf's files may have: the stem with ".abstract.md" or ".overview.md" (12 bytes) must be
// a file name the file system takes (255 bytes).
constexpr size_t kMaxStemBytes = 255 - 12;

// The files of the leaves named `names` (one directory's, in name order) beside its subdirectories `dirs`:
// LeafFileName when it is free, else a stem of its own (the name cut short, "~" and a hash of the name), so
// that no two leaves share a file or a sidecar ("note" and "note.md"), no leaf's file passes for another's
// sidecar ("x.abstract" beside "x"), none is hidden (a leading '.'), and none passes the name limit. The
// directory's .meta.json maps each file back to its leaf.
std::map<std::string, std::string> LeafFiles(const std::vector<std::string>& names, const std::set<std::string>& dirs) {
  std::set<std::string> taken(dirs.begin(), dirs.end());
  auto free = [&](const std::string& stem) {
    return !stem.empty() && stem.front() != '.' && stem.size() <= kMaxStemBytes && !stem.ends_with(".abstract") &&
           !stem.ends_with(".overview") && !taken.contains(stem + ".md") &&
           !taken.contains(stem + std::string(kAbstractSuffix)) && !taken.contains(stem + std::string(kOverviewSuffix));
  };
  std::map<std::string, std::string> out;
  for (const std::string& name : names) {
    std::string file = LeafFileName(name);
    std::string stem = file.substr(0, file.size() - 3);
    for (int attempt = 0; !free(stem); ++attempt) {
      std::string tag = "~" + HashHex(name + (attempt == 0 ? "" : "#" + std::to_string(attempt))).substr(0, 8);
      std::string base = name.front() == '.' ? "_" + name : name;
      stem = Utf8Cut(base, kMaxStemBytes - tag.size()) + tag;
    }
    file = stem + ".md";
    for (std::string_view suffix : {std::string_view(".md"), kAbstractSuffix, kOverviewSuffix}) taken.insert(stem + std::string(suffix));
    out[name] = file;
  }
  return out;
}

Json NodeMeta(const Node& node, const std::string& file) {
  Json meta = {{"name", std::string(node.uri.name())}, {"type", std::string(ContextTypeName(node.type))},
               {"category", node.category}, {"created_ms", node.created_ms}, {"updated_ms", node.updated_ms}};
  meta["metadata"] = strata::json::ParseOrDiscard<Json>(node.metadata);
  if (meta["metadata"].is_discarded()) meta["metadata"] = Json::object();
  if (!node.is_dir) meta["file"] = file;
  return meta;
}

// A path as a key that does not depend on how it was spelt ("sp/", "./sp", "sp//x", ".", "/abs/sp"): absolute,
// normal, without a trailing separator.
std::string PathKey(const fs::path& p) {
  std::error_code ec;
  fs::path absolute = fs::absolute(p, ec);
  std::string s = (ec ? p : absolute).lexically_normal().string();
  while (s.size() > 1 && s.back() == '/') s.pop_back();
  return s;
}

struct EarlierFile {
  fs::path path;
  bool own_sidecar = false;  // A directory's own .abstract.md / .overview.md.
};

// What each .meta.json of an export of `root` into `top` records in "export" for its directory `d`: the
// subtree, and the directory's place below `top` ("" for `top` itself).
Json ExportRecord(const Uri& root, const fs::path& top, const fs::path& d) {
  std::string place = fs::path(PathKey(d)).lexically_relative(PathKey(top)).string();
  if (place == ".") place.clear();
  return {{"uri", root.str()}, {"path", place}};
}

// The files an earlier export of the same subtree wrote below `dir`, as its .meta.json files list them (a
// leaf's file and sidecars; each directory's own .meta.json and sidecars), deepest first. Only directories
// whose .meta.json records that export (ExportRecord: the subtree's URI and the directory's place below
// `dir`) count: another export nested inside (even of the same subtree), an export of another subtree into
// the same directory, a tree from before the record or the user's own are not this one's. Only plain file names are taken from those untrusted files, and links are not
// followed: nothing outside what an export writes is ever named.
std::vector<EarlierFile> EarlierExportFiles(const fs::path& dir, const Uri& root) {
  std::vector<EarlierFile> out;
  std::error_code ec;
  if (!fs::is_directory(fs::symlink_status(dir, ec))) return out;
  std::vector<fs::path> dirs = {dir};
  // An export writes no directory whose name starts with '.': .git and the like are not walked. A directory
  // that cannot be read is passed over, the walk goes on.
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  for (fs::recursive_directory_iterator end; !ec && it != end; it.increment(ec)) {
    std::error_code entry_ec;
    if (!it->is_directory(entry_ec) || it->is_symlink(entry_ec)) continue;
    if (it->path().filename().string().starts_with('.')) {
      it.disable_recursion_pending();
      continue;
    }
    dirs.push_back(it->path());
  }
  std::sort(dirs.begin(), dirs.end(), [](const fs::path& a, const fs::path& b) { return a.string() > b.string(); });
  for (const fs::path& d : dirs) {
    // Read as every untrusted file of the tree is: a link, a pipe or a device is not this export's .meta.json
    // (a pipe opened by a stream waited for a writer forever).
    Result<std::string> text = ReadText(d / ".meta.json", dir);
    if (!text.ok()) continue;
    Json meta = strata::json::ParseOrDiscard<Json>(*text);
    const Json* record = json::Field(meta, "export");
    if (record == nullptr || *record != ExportRecord(root, dir, d)) continue;
    const Json* children = json::Field(meta, "children");
    if (children != nullptr && children->is_object()) {
      for (const auto& [name, child] : children->items()) {
        const std::string file = json::StringOr(child, "file");
        if (!file.ends_with(".md") || file.size() <= 3 || file.find('/') != std::string::npos || file.front() == '.') continue;
        const std::string stem = file.substr(0, file.size() - 3);
        for (const std::string& f : {file, stem + std::string(kAbstractSuffix), stem + std::string(kOverviewSuffix)}) {
          out.push_back({d / f});
        }
      }
    }
    out.push_back({d / ".abstract.md", true});
    out.push_back({d / ".overview.md", true});
    out.push_back({d / ".meta.json"});
    if (PathKey(d) == PathKey(dir)) out.push_back({d / ".relations.jsonl"});
    out.push_back({d});  // Removed only once empty.
  }
  return out;
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
  // A URI below the root as a path relative to it ("" for the root itself: a link may end there too).
  auto relative = [&](const Uri& uri) { return uri == root ? std::string() : std::string(uri.str()).substr(prefix); };
  auto local_path = [&](const Uri& uri) { return uri == root ? fs::path(dir) : fs::path(dir) / relative(uri); };
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) {
    // The caller's path, not a bug of ours: a file where the directory should be, a missing permission.
    return Status(ec == std::errc::not_a_directory || ec == std::errc::file_exists ? StatusCode::kInvalidArgument
                                                                                  : StatusCode::kFailedPrecondition,
                  "export: cannot create the directory " + dir + ": " + ec.message());
  }
  // What an earlier export into `dir` wrote: whatever this one does not write again is removed at the end (a
  // deleted leaf's file left there came back with the next import).
  const std::vector<EarlierFile> earlier = EarlierExportFiles(dir, root);
  std::set<std::string> written;  // PathKey of every file and directory this export writes.
  auto write = [&](const fs::path& path, std::string_view text) {
    written.insert(PathKey(path));
    return WriteText(path, text, dir);
  };
  written.insert(PathKey(dir));
  // Each local directory's .meta.json, by PathKey (the root's own entry and its leaves' must be one entry
  // however the directory was spelt: "out/" lost the root's children), and the path it is written at.
  std::map<std::string, Json> dir_meta;
  std::map<std::string, fs::path> dir_at;
  // Each directory's leaf files, chosen together (LeafFiles).
  std::map<std::string, std::vector<std::string>> leaf_names;
  std::map<std::string, std::set<std::string>> dir_names;
  for (const Node& n : nodes) {
    if (n.uri == root) continue;
    if (n.is_dir) {
      dir_names[n.uri.Parent().str()].insert(std::string(n.uri.name()));
    } else {
      leaf_names[n.uri.Parent().str()].push_back(std::string(n.uri.name()));
    }
  }
  std::map<std::string, std::map<std::string, std::string>> leaf_files;
  for (auto& [parent, names] : leaf_names) {
    std::sort(names.begin(), names.end());
    leaf_files[parent] = LeafFiles(names, dir_names[parent]);
  }
  for (const Node& listed : nodes) {
    STRATA_ASSIGN_OR_RETURN(Node node, store.Stat(listed.uri));
    fs::path path = local_path(node.uri);
    if (node.is_dir) {
      STRATA_RETURN_IF_ERROR(MakeExportDir(path, dir));
      written.insert(PathKey(path));
      if (!node.abstract_text.empty()) STRATA_RETURN_IF_ERROR(write(path / ".abstract.md", node.abstract_text));
      if (!node.overview.empty()) STRATA_RETURN_IF_ERROR(write(path / ".overview.md", node.overview));
      dir_meta[PathKey(path)]["self"] = NodeMeta(node, "");
      dir_at.emplace(PathKey(path), path);
      ++report.directories;
    } else {
      fs::path parent = path.parent_path();
      // Named when it was listed; a directory there then (a concurrent change) has no file name of its own.
      const auto& files = leaf_files[node.uri.Parent().str()];
      auto named = files.find(std::string(node.uri.name()));
      if (named == files.end()) {
        return Status::Aborted("export: " + node.uri.str() + " changed while it was exported; export again");
      }
      const std::string file = named->second;
      STRATA_RETURN_IF_ERROR(write(parent / file, node.content));
      std::string stem = file.substr(0, file.size() - 3);
      STRATA_RETURN_IF_ERROR(write(parent / (stem + std::string(kAbstractSuffix)), node.abstract_text));
      STRATA_RETURN_IF_ERROR(write(parent / (stem + std::string(kOverviewSuffix)), node.overview));
      dir_meta[PathKey(parent)]["children"][std::string(node.uri.name())] = NodeMeta(node, file);
      dir_at.emplace(PathKey(parent), parent);
      ++report.leaves;
    }
  }
  for (auto& [key, meta] : dir_meta) {
    const fs::path& at = dir_at.at(key);
    meta["export"] = ExportRecord(root, dir, at);  // Whose files these are, for the next export here.
    STRATA_RETURN_IF_ERROR(write(at / ".meta.json", meta.dump(2, ' ', false, Json::error_handler_t::replace) + "\n"));
  }
  std::string relations;
  for (const Node& node : nodes) {
    STRATA_ASSIGN_OR_RETURN(std::vector<Relation> rels, store.Relations(node.uri));
    for (const Relation& r : rels) {
      if (!(r.from == node.uri) || !root.Contains(r.to)) continue;  // Each link once, from its source.
      Json line = {{"from", relative(r.from)}, {"to", relative(r.to)},
                   {"reason", r.reason}, {"created_ms", r.created_ms}};
      // A link a store kept before reasons were checked may hold bytes that are not UTF-8: shown as U+FFFD.
      relations += line.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
      ++report.relations;
    }
  }
  if (!relations.empty()) STRATA_RETURN_IF_ERROR(write(fs::path(dir) / ".relations.jsonl", relations));
  // The earlier export's files this one did not write again: its leaves deleted since, and their directories
  // once empty (a directory still holding files of the user's own is kept).
  for (const EarlierFile& e : earlier) {
    const fs::path& old = e.path;
    if (written.contains(PathKey(old))) continue;
    // A directory still exported keeps its own sidecars: the export writes one only when the node has that
    // layer, and one there now is the user's (an overview written by hand, which import reads).
    if (e.own_sidecar && written.contains(PathKey(old.parent_path()))) continue;
    fs::file_status st = fs::symlink_status(old, ec);
    if (ec || !fs::exists(st)) continue;
    if (fs::is_directory(st)) {
      if (fs::is_empty(old, ec) && !ec) fs::remove(old, ec);
    } else if (fs::is_regular_file(st) && fs::remove(old, ec)) {
      ++report.removed;
    }
    ec.clear();
  }
  return report;
}

Result<ImportReport> ImportMarkdown(ContextStore& store, const std::string& dir, const Uri& root) {
  std::error_code dir_ec;
  if (!fs::is_directory(dir, dir_ec)) return Status::NotFound("import: " + dir + " is not a directory");
  const fs::path top(dir);
  auto shown = [&](const fs::path& p) { return Shown(p, top); };
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
    auto text = ReadSidecar(d / ".meta.json", top, &report.skipped);
    if (!text) return Json::object();
    // Deeper than a request may be: what an export wrote (metadata of up to 64 levels, two levels down)
    // reads back, and so does a store's older, deeper metadata.
    Result<Json> meta = strata::json::ParseUntrusted<Json>(*text, shown(d / ".meta.json"), 2 * json::kMaxJsonDepth);
    if (!meta.ok()) {
      Skip(&report.skipped, shown(d / ".meta.json"), meta.status().message() + " (ignored)");
      return Json::object();
    }
    if (!meta->is_object()) {
      Skip(&report.skipped, shown(d / ".meta.json"), "not a JSON object (ignored)");
      return Json::object();
    }
    return *meta;
  };
  // A node's metadata deeper than a store keeps (a sidecar may be read two levels deeper) is left out, and
  // said: the store refused it with the node, after the nodes before it were written.
  auto apply_meta = [&](const Json& meta, WriteOptions* o, const fs::path& sidecar) {
    if (!meta.is_object()) return;
    if (meta.contains("type") && meta["type"].is_string()) {
      auto type = ParseContextType(meta["type"].get<std::string>());
      if (type.ok()) o->type = *type;
    }
    if (meta.contains("category") && meta["category"].is_string()) o->category = meta["category"].get<std::string>();
    if (meta.contains("metadata") && meta["metadata"].is_object()) {
      std::string text = meta["metadata"].dump(-1, ' ', false, Json::error_handler_t::replace);
      if (size_t deep = json::FindTooDeep(text, json::kMaxJsonDepth); deep != std::string_view::npos) {
        Skip(&report.skipped, shown(sidecar),
             "a node's metadata is nested deeper than " + std::to_string(json::kMaxJsonDepth) + " levels (ignored)");
        return;
      }
      o->metadata = std::move(text);
    }
  };
  // Depth-first, directories before their files, in name order (deterministic).
  std::vector<std::pair<fs::path, Uri>> stack = {{fs::path(dir), root}};
  while (!stack.empty()) {
    auto [path, uri] = stack.back();
    stack.pop_back();
    Json meta = read_meta(path);
    if (!uri.is_root() && !uri.is_kind_dir()) {
      WriteOptions o;
      o.abstract_text = ReadSidecar(path / ".abstract.md", top, &report.skipped);
      o.overview = ReadSidecar(path / ".overview.md", top, &report.skipped);
      if (meta.contains("self")) apply_meta(meta["self"], &o, path / ".meta.json");
      STRATA_RETURN_IF_ERROR(flush());
      STRATA_RETURN_IF_ERROR(store.Mkdir(uri, o).WithContext("import " + shown(path)));
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
    for (fs::directory_iterator it(path, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(*it);
    if (ec) return Status::Internal("import: cannot list " + shown(path) + ": " + ec.message());
    // Written in natural order ("turn-2" before "turn-10"): write order is what Find takes for neighbours.
    std::sort(entries.begin(), entries.end(), [](const fs::directory_entry& a, const fs::directory_entry& b) {
      return NaturalLess(a.path().filename().string(), b.path().filename().string());
    });
    std::vector<std::pair<fs::path, Uri>> subdirs;
    // The node names this directory's entries took, and the file that took each: "note" and "note.md" are
    // both leaf "note", and the later one would overwrite the earlier while both were counted.
    std::map<std::string, std::string> taken;
    auto claim = [&](const std::string& name, const fs::path& file) {
      auto [it, fresh] = taken.emplace(name, file.filename().string());
      if (!fresh) {
        Skip(&report.skipped, shown(file), "its node name " + name + " is " + it->second + "'s, imported there");
      }
      return fresh;
    };
    for (const auto& e : entries) {
      std::string file = e.path().filename().string();
      if (file.starts_with('.')) continue;  // Sidecars and hidden files.
      fs::file_status st = e.symlink_status(ec);
      if (ec) {
        Skip(&report.skipped, shown(e.path()), ec.message());
        ec.clear();
        continue;
      }
      if (fs::is_symlink(st)) {
        Skip(&report.skipped, shown(e.path()), "a symbolic link, not followed");
        continue;
      }
      if (fs::is_directory(st)) {
        auto child = StoredChild(uri, file);
        if (!child.ok()) {
          Skip(&report.skipped, shown(e.path()), child.status().message());
          continue;
        }
        if (!claim(file, e.path())) continue;
        subdirs.emplace_back(e.path(), *child);
        continue;
      }
      if (!fs::is_regular_file(st)) {
        Skip(&report.skipped, shown(e.path()), "not a regular file (a pipe, socket or device)");
        continue;
      }
      if (file.ends_with(kAbstractSuffix) || file.ends_with(kOverviewSuffix)) {
        std::string_view suffix = file.ends_with(kAbstractSuffix) ? kAbstractSuffix : kOverviewSuffix;
        std::string base = file.substr(0, file.size() - suffix.size()) + ".md";
        if (fs::exists(fs::symlink_status(path / base, ec)) || by_file.contains(base)) continue;  // A leaf's sidecar.
      }
      std::string name = file;
      Json child_meta;
      if (auto it = by_file.find(file); it != by_file.end()) {
        name = it->second.first;
        child_meta = it->second.second;
      } else if (file.ends_with(".md")) {
        name = file.substr(0, file.size() - 3);
      }
      auto child = StoredChild(uri, name);
      if (!child.ok() || child->is_scope_root() || child->is_kind_dir() || uri.is_root()) {
        Skip(&report.skipped, shown(e.path()), child.ok() ? "a file cannot be a scope" : child.status().message());
        continue;
      }
      if (!claim(name, e.path())) continue;
      Result<std::string> read = ReadText(e.path(), top);
      if (!read.ok()) {
        if (read.status().code() == StatusCode::kInternal) return read.status().WithContext("import");
        Skip(&report.skipped, shown(e.path()), read.status().message());  // Replaced by a link since it was listed.
        continue;
      }
      std::string content = std::move(*read);
      size_t bad = 0;
      if (!json::IsValidUtf8(content, &bad)) {
        Skip(&report.skipped, shown(e.path()), NotUtf8(bad));
        continue;
      }
      WriteOptions o;
      std::string stem = file.ends_with(".md") ? file.substr(0, file.size() - 3) : file;
      o.abstract_text = ReadSidecar(path / (stem + std::string(kAbstractSuffix)), top, &report.skipped);
      o.overview = ReadSidecar(path / (stem + std::string(kOverviewSuffix)), top, &report.skipped);
      apply_meta(child_meta, &o, path / ".meta.json");
      leaves.emplace_back(*child, std::move(content));
      leaf_options.push_back(std::move(o));
      if (leaves.size() >= 500) STRATA_RETURN_IF_ERROR(flush());
    }
    STRATA_RETURN_IF_ERROR(flush());
    for (auto it = subdirs.rbegin(); it != subdirs.rend(); ++it) stack.push_back(*it);
  }
  auto relations = ReadSidecar(top / ".relations.jsonl", top, &report.skipped);
  if (relations) {
    std::istringstream lines(*relations);
    std::string line;
    int number = 0;
    while (std::getline(lines, line)) {
      ++number;
      if (line.empty()) continue;
      Json r = strata::json::ParseOrDiscard<Json>(line);
      std::string where = "line " + std::to_string(number);
      if (r.is_discarded() || !r.contains("from") || !r.contains("to") || !r["from"].is_string() || !r["to"].is_string()) {
        Skip(&report.skipped, ".relations.jsonl", where + ": expected {\"from\", \"to\", \"reason\"}");
        continue;
      }
      auto from = root.Join(r["from"].get<std::string>());
      auto to = root.Join(r["to"].get<std::string>());
      if (!from.ok() || !to.ok()) {
        Skip(&report.skipped, ".relations.jsonl", where + ": " + (from.ok() ? to.status() : from.status()).message());
        continue;
      }
      Status linked = store.Link(*from, *to, json::StringOr(r, "reason"));
      if (!linked.ok()) {
        Skip(&report.skipped, ".relations.jsonl", where + ": " + linked.message());
        continue;
      }
      ++report.relations;
    }
  }
  return report;
}

}  // namespace strata::memory
