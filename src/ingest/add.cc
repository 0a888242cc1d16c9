// AddFiles: files into the store as directories of ordered chunks, only what changed written
// (docs/formats/ingest.md).
#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "ingest_internal.h"
#include "strata/ingest/ingest.h"
#include "strata/json/checked.h"
#include "strata/memory/hash.h"
#include "strata/util/utf8.h"

namespace strata::ingest {
namespace {

using Json = nlohmann::json;
using memory::Uri;

constexpr size_t kAbstractBytes = 200;

std::string FirstLine(std::string_view text) {
  size_t start = text.find_first_not_of(" \t\r\n#-*>");
  if (start == std::string_view::npos) return "";
  text.remove_prefix(start);
  std::string line(text.substr(0, text.find('\n')));
  return line.substr(0, Utf8Prefix(line, kAbstractBytes));
}

std::string Cut(std::string s, size_t bytes) {
  s.resize(Utf8Prefix(s, bytes));
  return s;
}

// "0007-install-on-debian": the chunk's place, then its name made a path segment.
std::string ChunkSegment(size_t index, const std::string& name) {
  char number[16];
  std::snprintf(number, sizeof number, "%04zu", index + 1);
  std::string slug;
  for (unsigned char c : name) {
    if (std::isalnum(c)) {
      slug += static_cast<char>(std::tolower(c));
    } else if (!slug.empty() && slug.back() != '-') {
      slug += '-';
    }
    if (slug.size() >= 48) break;
  }
  while (!slug.empty() && slug.back() == '-') slug.pop_back();
  return slug.empty() ? number : std::string(number) + "-" + slug;
}

Json MetadataOf(const memory::Node& node) {
  Json j = json::ParseOrDiscard<Json>(node.metadata);
  return j.is_object() ? j : Json::object();
}

// The "ingest" member of a node added from a file ("source" set), or null.
const Json* IngestOf(const Json& metadata) {
  const Json* ingest = json::Field(metadata, "ingest");
  return ingest != nullptr && ingest->is_object() && json::Field(*ingest, "source") != nullptr ? ingest : nullptr;
}

Result<std::string> ReadDisk(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open");
  std::stringstream s;
  s << in.rdbuf();
  if (in.bad()) return Status::DataLoss("read error");
  return s.str();
}

Result<Uri> UriOf(const Uri& root, const std::string& path) {
  Uri uri = root;
  size_t at = 0;
  while (at <= path.size()) {
    size_t slash = path.find('/', at);
    std::string segment = path.substr(at, slash == std::string::npos ? std::string::npos : slash - at);
    STRATA_ASSIGN_OR_RETURN(uri, uri.Child(segment));
    if (slash == std::string::npos) break;
    at = slash + 1;
  }
  return uri;
}

}  // namespace

Status AddFiles(memory::ContextStore& store, const Uri& root, std::span<const SourceFile> files,
                const AddOptions& options, AddReport* report) {
  std::set<std::string> present;                // Paths of this add (read or not).
  std::set<std::string> changed_dirs;           // Folders whose L0/L1 are written again.
  auto touch = [&](const Uri& file_uri) {
    for (Uri d = file_uri.Parent(); d.str().size() >= root.str().size(); d = d.Parent()) {
      changed_dirs.insert(d.str());
      if (d.str() == root.str()) break;
    }
  };
  for (const SourceFile& f : files) {
    present.insert(f.path);
    Result<Uri> uri = UriOf(root, f.path);
    if (!uri.ok()) {
      report->skipped.push_back({f.path, "not a node name: " + std::string(uri.status().message())});
      continue;
    }
    std::string bytes = f.bytes;
    if (!f.disk.empty()) {
      Result<std::string> read = ReadDisk(f.disk);
      if (!read.ok()) {
        report->skipped.push_back({f.path, "unreadable: " + std::string(read.status().message())});
        continue;
      }
      bytes = std::move(*read);
    }
    report->bytes += static_cast<int64_t>(bytes.size());
    const std::string hash = memory::HashHex(bytes);
    Result<memory::Node> existing = store.Stat(*uri);
    if (!existing.ok() && existing.status().code() != StatusCode::kNotFound) return existing.status();
    if (existing.ok()) {
      const Json existing_meta = MetadataOf(*existing);
      const Json* ingest = IngestOf(existing_meta);
      if (ingest == nullptr) {
        report->skipped.push_back({f.path, uri->str() + " holds a node that was not added from a file; not replaced"});
        continue;
      }
      if (json::StringOr(*ingest, "hash") == hash) {
        report->unchanged.push_back(f.path);
        continue;
      }
    }
    std::optional<FileKind> kind = KindOf(f.path, bytes);
    if (!kind) {
      report->skipped.push_back({f.path, "binary"});
      continue;
    }
    Result<Extracted> extracted = Extract(*kind, f.path, bytes, options.extract);
    if (!extracted.ok()) {
      report->skipped.push_back({f.path, std::string(FileKindName(*kind)) + ": " + std::string(extracted.status().message())});
      continue;
    }
    if (existing.ok()) STRATA_RETURN_IF_ERROR(store.Remove(*uri, /*recursive=*/true).status());
    // The file: a directory of ordered chunks, its L0 the title or first line, its L1 the outline.
    const Extracted& e = *extracted;
    std::string first = FirstLine(e.chunks[0].text);
    std::string abstract_text = Cut(f.path + ": " + (e.title.empty() ? first : e.title), kAbstractBytes);
    std::string overview = std::string(FileKindName(e.kind)) + ", " + std::to_string(bytes.size()) + " bytes, " +
                           std::to_string(e.chunks.size()) + (e.chunks.size() == 1 ? " chunk" : " chunks");
    std::string last_name;
    for (const Chunk& c : e.chunks) {
      if (c.name.empty() || c.name == last_name || overview.size() > 1500) continue;
      overview += (last_name.empty() ? ": " : "; ") + c.name;
      last_name = c.name;
    }
    Json file_meta = {{"ordered", true},
                      {"ingest", {{"source", f.path}, {"root", root.str()}, {"hash", hash}, {"bytes", bytes.size()},
                                  {"kind", FileKindName(e.kind)}, {"chunks", e.chunks.size()}}}};
    if (!e.title.empty()) file_meta["ingest"]["title"] = e.title;
    STRATA_RETURN_IF_ERROR(store.Mkdir(*uri, {.abstract_text = abstract_text,
                                             .overview = Cut(overview, 2000),
                                             .metadata = file_meta.dump(-1, ' ', false, Json::error_handler_t::replace)}));
    std::vector<std::pair<Uri, std::string>> leaves;
    std::vector<memory::WriteOptions> leaf_options;
    for (size_t i = 0; i < e.chunks.size(); ++i) {
      const Chunk& c = e.chunks[i];
      STRATA_ASSIGN_OR_RETURN(Uri leaf, uri->Child(ChunkSegment(i, c.name)));
      Json meta = {{"source", f.path}, {"chunk", i}, {"hash", memory::HashHex(c.text)}};
      if (!c.name.empty()) meta["name"] = c.name;
      if (c.begin >= 0) meta["bytes"] = {c.begin, c.end};
      if (c.page_first > 0) meta["pages"] = {c.page_first, c.page_last};
      std::string line = FirstLine(c.text);
      leaves.emplace_back(std::move(leaf), c.text);
      leaf_options.push_back({.abstract_text = Cut(c.name.empty() ? line : c.name + ": " + line, kAbstractBytes),
                              .metadata = Json{{"ingest", meta}}.dump(-1, ' ', false, Json::error_handler_t::replace)});
    }
    STRATA_RETURN_IF_ERROR(store.WriteBatch(leaves, leaf_options));
    report->chunks += static_cast<int64_t>(e.chunks.size());
    (existing.ok() ? report->updated : report->added).push_back(f.path);
    touch(*uri);
  }
  // Files added before that this tree no longer has.
  if (options.remove_missing) {
    Result<std::vector<memory::Node>> all = store.List(root, {.recursive = true});
    if (!all.ok() && all.status().code() != StatusCode::kNotFound) return all.status();
    for (const memory::Node& n : all.ok() ? *all : std::vector<memory::Node>{}) {
      if (!n.is_dir) continue;
      const Json meta = MetadataOf(n);
      const Json* ingest = IngestOf(meta);
      if (ingest == nullptr || json::Field(*ingest, "hash") == nullptr) continue;
      // Only what an add of this same root brought: another add's files below it are its own.
      std::string source = json::StringOr(*ingest, "source");
      if (json::StringOr(*ingest, "root") != root.str()) continue;
      Result<Uri> expected = UriOf(root, source);
      if (present.count(source) || !expected.ok() || expected->str() != n.uri.str()) continue;
      Result<int64_t> removed = store.Remove(n.uri, /*recursive=*/true);
      if (!removed.ok() && removed.status().code() != StatusCode::kNotFound) return removed.status();
      report->removed.push_back(source);
      touch(n.uri);
    }
  }
  // Folders, deepest first: L0 "<folder>/: N files, M folders", L1 their children's abstracts.
  std::vector<std::string> dirs(changed_dirs.begin(), changed_dirs.end());
  std::sort(dirs.begin(), dirs.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const std::string& d : dirs) {
    STRATA_ASSIGN_OR_RETURN(Uri dir, Uri::Parse(d));
    Result<std::vector<memory::Node>> children = store.List(dir);
    if (!children.ok()) {
      if (children.status().code() == StatusCode::kNotFound) continue;
      return children.status();
    }
    Result<memory::Node> self = store.Stat(dir);
    if (!self.ok()) continue;
    const Json meta = MetadataOf(*self);
    if (IngestOf(meta) != nullptr && json::Field(*IngestOf(meta), "hash") != nullptr) continue;  // A file.
    // A scope root, or a directory someone described: its own L0/L1 stay.
    if (dir.is_scope_root() || dir.is_kind_dir() || dir.is_root()) continue;
    if (IngestOf(meta) == nullptr && !self->abstract_text.empty()) continue;
    int files_here = 0, folders = 0;
    std::string overview;
    for (const memory::Node& c : *children) {
      const Json child_meta = MetadataOf(c);
      const Json* ingest = IngestOf(child_meta);
      bool is_file = ingest != nullptr && json::Field(*ingest, "hash") != nullptr;
      (is_file ? files_here : folders) += c.is_dir ? 1 : 0;
      if (overview.size() < 3000) {
        overview += (overview.empty() ? "" : "\n") + std::string(c.uri.name()) + (c.is_dir && !is_file ? "/" : "") +
                    ": " + c.abstract_text;
      }
    }
    std::string name = dir.name().empty() ? dir.str() : std::string(dir.name());
    std::string abstract_text = name + "/: " + std::to_string(files_here) + (files_here == 1 ? " file" : " files") +
                                (folders > 0 ? ", " + std::to_string(folders) + (folders == 1 ? " folder" : " folders") : "");
    Json dir_meta = meta;
    dir_meta["ingest"] = {{"source", ""}, {"folder", true}};
    STRATA_RETURN_IF_ERROR(store.Mkdir(dir, {.abstract_text = abstract_text,
                                            .overview = Cut(overview, 3000),
                                            .metadata = dir_meta.dump(-1, ' ', false, Json::error_handler_t::replace)}));
  }
  return Status::Ok();
}

}  // namespace strata::ingest
