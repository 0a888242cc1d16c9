// AddFiles: files into the store as directories of ordered chunks, only what changed written
// (docs/formats/ingest.md).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "ingest_internal.h"
#include "strata/ingest/ingest.h"
#include "strata/json/checked.h"
#include "strata/json/json_writer.h"
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


// The first line of a chunk that is not a heading (a heading is already the chunk's name).
std::string FirstBodyLine(std::string_view text) {
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    std::string_view line = text.substr(at, nl == std::string_view::npos ? std::string_view::npos : nl - at);
    size_t start = line.find_first_not_of(" \t\r");
    if (start != std::string_view::npos && line[start] != '#') return FirstLine(line);
    if (nl == std::string_view::npos) break;
    at = nl + 1;
  }
  return FirstLine(text);
}

// "0007-on-debian": the chunk's place, then the most specific part of its name ("Install > On Debian": the
// last heading) made a path segment.
std::string ChunkSegment(size_t index, const std::string& full_name) {
  char number[16];
  std::snprintf(number, sizeof number, "%04zu", index + 1);
  std::string_view name = full_name;
  name = name.substr(0, name.find(" … "));
  size_t last = name.rfind(" > ");
  if (last != std::string_view::npos) name.remove_prefix(last + 3);
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

// The "ingest" member of a node an add wrote (a file or a folder), or null.
const Json* IngestOf(const Json& metadata) {
  const Json* ingest = json::Field(metadata, "ingest");
  return ingest != nullptr && ingest->is_object() && json::Field(*ingest, "source") != nullptr ? ingest : nullptr;
}

// True for the directory of a file an add wrote (finished or cut short), not a folder.
bool IsFile(const Json* ingest) {
  return ingest != nullptr && !json::StringOr(*ingest, "source").empty() && !json::BoolOr(*ingest, "folder", false);
}

// Reads a file the walk found, as it is now: never through a link (it may have become one since), never a
// FIFO or device, never more than `max_bytes`.
Result<std::string> ReadDisk(const std::string& path, int64_t max_bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return Status::NotFound(std::strerror(errno));
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Status::FailedPrecondition("not a regular file");
  }
  if (st.st_size > max_bytes) {
    ::close(fd);
    return Status::ResourceExhausted("too large (" + std::to_string(st.st_size) + " bytes; the limit is " +
                                     std::to_string(max_bytes) + ")");
  }
  std::string out(static_cast<size_t>(st.st_size), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = ::read(fd, out.data() + got, out.size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  ::close(fd);
  out.resize(got);
  return out;
}

// Removes what an add wrote for the file at `file` (added from `source`): its chunk leaves, then the file's
// directory when nothing else is below it. Anything else below it — another file added at a path under it,
// a note someone wrote there — stays, and the directory becomes a folder holding it. Returns whether the
// directory went.
Result<bool> RemoveFileNodes(memory::ContextStore& store, const Uri& file, const std::string& source) {
  // The recorded hash goes first: removals stopped partway (a crash, a refused write) must not leave a
  // directory that still says its file is whole, or an add of the old content would call it unchanged.
  STRATA_ASSIGN_OR_RETURN(memory::Node dir, store.Stat(file));
  Json dir_meta = MetadataOf(dir);
  if (Json* recorded = dir_meta.contains("ingest") ? &dir_meta["ingest"] : nullptr;
      recorded != nullptr && recorded->is_object() && recorded->contains("hash")) {
    recorded->erase("hash");
    STRATA_RETURN_IF_ERROR(
        store.Mkdir(file, {.metadata = dir_meta.dump(-1, ' ', false, Json::error_handler_t::replace)}));
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<memory::Node> children, store.List(file));
  size_t kept = 0;
  for (const memory::Node& c : children) {
    const Json meta = MetadataOf(c);
    const Json* ingest = IngestOf(meta);
    if (c.is_dir || ingest == nullptr || json::StringOr(*ingest, "source") != source || !json::Field(*ingest, "chunk")) {
      ++kept;
      continue;
    }
    Result<int64_t> removed = store.Remove(c.uri, /*recursive=*/false);
    if (!removed.ok() && removed.status().code() != StatusCode::kNotFound) return removed.status();
  }
  if (kept == 0) {
    Result<int64_t> removed = store.Remove(file, /*recursive=*/true);
    if (!removed.ok() && removed.status().code() != StatusCode::kNotFound) return removed.status();
    return true;
  }
  // "file" lets the file come back into its directory (a folder of any other origin is never replaced).
  STRATA_RETURN_IF_ERROR(
      store.Mkdir(file, {.metadata = Json{{"ingest", {{"source", ""}, {"folder", true}, {"file", source}}}}.dump()}));
  return false;
}

// What stops a file at `file` with chunks at `chunks` from being written, in words, or "": a leaf among the
// directories between `root` and it, or a chunk's place held by anything but this file's own chunk (added
// from `source`, when `was_file`). `known_dirs` remembers the directories already seen.
Result<std::string> Clash(memory::ContextStore& store, const Uri& root, const Uri& file, const std::vector<Uri>& chunks,
                          const std::string& source, bool was_file, std::set<std::string>* known_dirs) {
  std::vector<Uri> above;
  for (Uri d = file.Parent(); d.str().size() > root.str().size() && !known_dirs->count(d.str()); d = d.Parent()) {
    above.push_back(d);
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<std::optional<memory::Node>> dirs, store.StatMany(above));
  for (size_t i = 0; i < dirs.size(); ++i) {
    if (dirs[i] && !dirs[i]->is_dir) return above[i].str() + " is a leaf, not a directory";
    if (dirs[i]) known_dirs->insert(above[i].str());
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<std::optional<memory::Node>> held, store.StatMany(chunks));
  for (size_t i = 0; i < held.size(); ++i) {
    if (!held[i]) continue;
    const Json meta = MetadataOf(*held[i]);
    const Json* ingest = IngestOf(meta);
    bool own_chunk = was_file && !held[i]->is_dir && ingest != nullptr && json::Field(*ingest, "chunk") != nullptr &&
                     json::StringOr(*ingest, "source") == source;
    if (!own_chunk) return chunks[i].str() + ", the place of its chunk " + std::to_string(i + 1) + ", holds another node";
  }
  return std::string();
}

// A folder an add made and nobody changed since: no metadata but the add's mark, no links. Only such a one
// goes when emptied (DescribeFolders) or when a file takes its place (EmptiedFolder): someone made the others.
Result<bool> UntouchedAddFolder(memory::ContextStore& store, const memory::Node& n) {
  const Json m = MetadataOf(n);
  const Json* i = IngestOf(m);
  if (!n.is_dir || i == nullptr || !json::BoolOr(*i, "folder", false) || m.size() != 1) return false;
  STRATA_ASSIGN_OR_RETURN(std::vector<memory::Relation> links, store.Relations(n.uri));
  return links.empty();
}

// A folder an add of `root` made at the path of a file the tree now has (a directory replaced by a file of
// its name). With remove_missing, the files the folder held that this add no longer has are removed (they are
// reported removed); when nothing but empty folders the adds made is left, the folder goes and the file takes
// its place. Returns whether it went. Without remove_missing, or when anything else is below it, it stays
// (and the file is skipped). Before, the folder stayed for good, and what it held was never removed.
Result<bool> EmptiedFolder(memory::ContextStore& store, const memory::Node& folder, const Uri& root,
                           const std::set<std::string>& every_path, const AddOptions& options, AddReport* report,
                           std::vector<Uri>* removed) {
  // Only a folder an add made and nobody changed since (no metadata but the add's mark, no links), as
  // DescribeFolders removes an emptied one.
  STRATA_ASSIGN_OR_RETURN(bool ours, UntouchedAddFolder(store, folder));
  if (!options.remove_missing || !ours) return false;
  STRATA_ASSIGN_OR_RETURN(std::vector<memory::Node> below, store.List(folder.uri, {.recursive = true}));
  for (const memory::Node& n : below) {
    const Json m = MetadataOf(n);
    const Json* i = IngestOf(m);
    if (!n.is_dir || !IsFile(i) || json::StringOr(*i, "root") != root.str()) continue;
    std::string source = json::StringOr(*i, "source");
    if (every_path.count(source)) continue;
    STRATA_RETURN_IF_ERROR(RemoveFileNodes(store, n.uri, source).status());
    report->removed.push_back(source);
    removed->push_back(n.uri);
  }
  STRATA_ASSIGN_OR_RETURN(below, store.List(folder.uri, {.recursive = true}));
  for (const memory::Node& n : below) {
    STRATA_ASSIGN_OR_RETURN(bool empty_folder, UntouchedAddFolder(store, n));
    if (!empty_folder) return false;  // A leaf, a file, or a directory someone made or linked: it stays.
  }
  STRATA_RETURN_IF_ERROR(store.Remove(folder.uri, /*recursive=*/true).status());
  return true;
}

}  // namespace

Status AddFiles(memory::ContextStore& store, const Uri& root, std::span<const SourceFile> files,
                const AddOptions& options, AddReport* report) {
  if (options.extract.chunk_tokens < kMinChunkTokens || options.extract.chunk_tokens > kMaxChunkTokens) {
    return Status::InvalidArgument("\"chunk_tokens\" must be between " + std::to_string(kMinChunkTokens) + " and " +
                                   std::to_string(kMaxChunkTokens) + ", not " + std::to_string(options.extract.chunk_tokens));
  }
  std::set<std::string> present;                // Paths of this add (read or not).
  std::set<std::string> changed_dirs;           // Folders whose L0/L1 are written again.
  auto touch = [&](const Uri& file_uri) {
    for (Uri d = file_uri.Parent(); d.str().size() >= root.str().size(); d = d.Parent()) {
      changed_dirs.insert(d.str());
      if (d.str() == root.str()) break;
    }
  };
  std::set<std::string> known_dirs;  // Directories seen to be directories (Clash).
  std::set<std::string> every_path;  // Every path of this add.
  for (const SourceFile& f : files) every_path.insert(f.path);
  for (const SourceFile& f : files) {
    present.insert(f.path);
    Result<Uri> uri = root.Join(f.path);
    if (!uri.ok()) {
      report->skipped.push_back({f.path, "not a node name: " + std::string(uri.status().message())});
      continue;
    }
    std::string bytes = f.bytes;
    if (!f.disk.empty()) {
      Result<std::string> read = ReadDisk(f.disk, options.max_file_bytes);
      if (!read.ok()) {
        report->skipped.push_back({f.path, (read.status().code() == StatusCode::kResourceExhausted ? "" : "unreadable: ") +
                                               std::string(read.status().message())});
        continue;
      }
      bytes = std::move(*read);
    } else if (static_cast<int64_t>(bytes.size()) > options.max_file_bytes) {
      report->skipped.push_back({f.path, "too large (" + std::to_string(bytes.size()) + " bytes; the limit is " +
                                             std::to_string(options.max_file_bytes) + ")"});
      continue;
    }
    report->bytes += static_cast<int64_t>(bytes.size());
    const std::string hash = memory::HashHex(bytes);
    Result<memory::Node> existing = store.Stat(*uri);
    if (!existing.ok() && existing.status().code() != StatusCode::kNotFound) return existing.status();
    bool was_file = false;  // An earlier add wrote this file: it is updated (or unchanged).
    std::string old_source = f.path;  // The path that add had it from (another root's add named it otherwise).
    if (existing.ok() && existing->is_dir) {
      std::vector<Uri> emptied;
      STRATA_ASSIGN_OR_RETURN(bool replaced, EmptiedFolder(store, *existing, root, every_path, options, report, &emptied));
      for (const Uri& gone : emptied) {
        touch(gone);                     // Their folders are described again,
        changed_dirs.insert(gone.str());  // and a file's directory that stays (a folder now) too.
      }
      if (replaced) existing = Status::NotFound("replaced");  // A folder the tree now has this file in place of.
    }
    if (existing.ok()) {
      const Json existing_meta = MetadataOf(*existing);
      const Json* ingest = IngestOf(existing_meta);
      // A removed file's directory that kept what was below it takes the file back; any other folder or node
      // (a chunk of another file, a note) is not replaced.
      bool file_dir = existing->is_dir && IsFile(ingest);
      bool left_by_file = existing->is_dir && ingest != nullptr && json::StringOr(*ingest, "file") == f.path;
      if (!file_dir && !left_by_file) {
        std::string what = existing->is_dir ? "a folder"
                           : ingest != nullptr ? "a chunk of " + json::QuoteForError(json::StringOr(*ingest, "source"), 200)
                                               : "written otherwise";
        report->skipped.push_back({f.path, uri->str() + " holds a node that was not added from a file (" + what +
                                               "); not replaced"});
        continue;
      }
      was_file = file_dir;
      if (was_file) {
        old_source = json::StringOr(*ingest, "source");
        // Unchanged: the same bytes, cut at the same size (a file added before sizes were recorded was cut at
        // the default), from the same path of the same root.
        if (json::StringOr(*ingest, "hash") == hash &&
            json::IntOr(*ingest, "chunk_tokens", ExtractOptions{}.chunk_tokens) == options.extract.chunk_tokens &&
            old_source == f.path && json::StringOr(*ingest, "root", root.str()) == root.str()) {
          report->unchanged.push_back(f.path);
          continue;
        }
      }
    }
    // A file that holds no text now (binary, empty, nothing but markup) is skipped, and what an earlier add
    // took from it removed: find must not answer with text the file no longer has.
    auto skip_changed = [&](std::string reason) -> Status {
      report->skipped.push_back({f.path, std::move(reason)});
      if (!was_file) return Status::Ok();
      STRATA_ASSIGN_OR_RETURN(bool went, RemoveFileNodes(store, *uri, old_source));
      if (!went) changed_dirs.insert(uri->str());
      report->removed.push_back(f.path);
      touch(*uri);
      return Status::Ok();
    };
    std::optional<FileKind> kind = KindOf(f.path, bytes);
    if (!kind) {
      STRATA_RETURN_IF_ERROR(skip_changed("binary"));
      continue;
    }
    Result<Extracted> extracted = Extract(*kind, f.path, bytes, options.extract);
    if (!extracted.ok()) {
      STRATA_RETURN_IF_ERROR(skip_changed(std::string(FileKindName(*kind)) + ": " + std::string(extracted.status().message())));
      continue;
    }
    const Extracted& e = *extracted;
    // Every chunk's URI first: one past a URI's bounds (a deep path, a long heading) skips the file before
    // anything of it is written, where it stopped the add halfway.
    std::vector<Uri> chunk_uris;
    Status named;
    for (size_t i = 0; i < e.chunks.size() && named.ok(); ++i) {
      Result<Uri> leaf = uri->Child(ChunkSegment(i, e.chunks[i].name));
      if (Status kept = leaf.ok() ? memory::CheckStoredLength(*leaf) : Status::Ok(); !kept.ok()) {
        leaf = kept;  // A store would refuse it.
      }
      if (leaf.ok()) chunk_uris.push_back(std::move(*leaf));
      named = leaf.status();
    }
    if (!named.ok()) {
      STRATA_RETURN_IF_ERROR(skip_changed("not a node name for its chunks: " + std::string(named.message())));
      continue;
    }
    // Nothing of the file may land on another node: a directory above it that is a leaf (a chunk of a file
    // added at a shorter path), or a chunk's place held by something that is not this file's own chunk (a
    // file added at that path). Either stopped the add halfway, the file's old chunks already removed.
    STRATA_ASSIGN_OR_RETURN(std::string clash, Clash(store, root, *uri, chunk_uris, old_source, was_file, &known_dirs));
    if (!clash.empty()) {
      report->skipped.push_back({f.path, clash + "; not added"});
      continue;
    }
    // A changed file's old chunks go; what else is below it (a file added at a path under it, a note) stays.
    if (was_file) STRATA_RETURN_IF_ERROR(RemoveFileNodes(store, *uri, old_source).status());
    // The file: a directory of ordered chunks, its L0 the title or first line, its L1 the outline.
    std::string first = FirstLine(e.chunks[0].text);
    std::string abstract_text = Utf8Cut(f.path + ": " + (e.title.empty() ? first : e.title), kAbstractBytes);
    std::string overview = std::string(FileKindName(e.kind)) + ", " + std::to_string(bytes.size()) + " bytes, " +
                           std::to_string(e.chunks.size()) + (e.chunks.size() == 1 ? " chunk" : " chunks");
    std::string last_name;
    for (const Chunk& c : e.chunks) {
      if (c.name.empty() || c.name == last_name || overview.size() > 1500) continue;
      overview += (last_name.empty() ? ": " : "; ") + c.name;
      last_name = c.name;
    }
    // The hash is recorded last: a file whose chunks were not all written (a crash, a refused write) has
    // none, and the next add writes it again instead of calling it unchanged.
    Json file_meta = {{"ordered", true},
                      {"ingest", {{"source", f.path}, {"root", root.str()}, {"bytes", bytes.size()},
                                  {"kind", FileKindName(e.kind)}, {"chunks", e.chunks.size()},
                                  {"chunk_tokens", options.extract.chunk_tokens}}}};
    if (!e.title.empty()) file_meta["ingest"]["title"] = e.title;
    STRATA_RETURN_IF_ERROR(store.Mkdir(*uri, {.abstract_text = abstract_text,
                                             .overview = Utf8Cut(overview, 2000),
                                             .metadata = file_meta.dump(-1, ' ', false, Json::error_handler_t::replace)}));
    std::vector<std::pair<Uri, std::string>> leaves;
    std::vector<memory::WriteOptions> leaf_options;
    for (size_t i = 0; i < e.chunks.size(); ++i) {
      const Chunk& c = e.chunks[i];
      Uri leaf = std::move(chunk_uris[i]);
      Json meta = {{"source", f.path}, {"chunk", i}, {"hash", memory::HashHex(c.text)}};
      if (!c.name.empty()) meta["name"] = c.name;
      if (c.begin >= 0) meta["bytes"] = {c.begin, c.end};
      if (c.page_first > 0) meta["pages"] = {c.page_first, c.page_last};
      std::string line = c.name.empty() ? FirstLine(c.text) : FirstBodyLine(c.text);
      leaves.emplace_back(std::move(leaf), c.text);
      leaf_options.push_back({.abstract_text = Utf8Cut(c.name.empty() ? line : c.name + ": " + line, kAbstractBytes),
                              .metadata = Json{{"ingest", meta}}.dump(-1, ' ', false, Json::error_handler_t::replace)});
    }
    STRATA_RETURN_IF_ERROR(store.WriteBatch(leaves, leaf_options));
    file_meta["ingest"]["hash"] = hash;
    STRATA_RETURN_IF_ERROR(
        store.Mkdir(*uri, {.metadata = file_meta.dump(-1, ' ', false, Json::error_handler_t::replace)}));
    report->chunks += static_cast<int64_t>(e.chunks.size());
    (was_file ? report->updated : report->added).push_back(f.path);
    touch(*uri);
  }
  // Files added before that this tree no longer has. What the walk skipped (unreadable, too large, a link
  // now) is still there: it and everything below it stays.
  auto skipped_now = [&](const std::string& source) {
    for (const SkippedFile& s : report->skipped) {
      if (s.path == "." || source == s.path ||
          (source.size() > s.path.size() && source.compare(0, s.path.size(), s.path) == 0 &&
           source[s.path.size()] == '/')) {
        return true;  // "." is an added directory that could not be read: everything it held stays.
      }
    }
    return false;
  };
  if (options.remove_missing) {
    Result<std::vector<memory::Node>> all = store.List(root, {.recursive = true});
    if (!all.ok() && all.status().code() != StatusCode::kNotFound) return all.status();
    for (const memory::Node& n : all.ok() ? *all : std::vector<memory::Node>{}) {
      if (!n.is_dir) continue;
      const Json meta = MetadataOf(n);
      const Json* ingest = IngestOf(meta);
      if (!IsFile(ingest)) continue;
      // Only what an add of this same root brought: another add's files below it are its own.
      std::string source = json::StringOr(*ingest, "source");
      if (json::StringOr(*ingest, "root") != root.str()) continue;
      Result<Uri> expected = root.Join(source);
      if (present.count(source) || skipped_now(source) || !expected.ok() || expected->str() != n.uri.str()) continue;
      STRATA_ASSIGN_OR_RETURN(bool went, RemoveFileNodes(store, n.uri, source));
      if (!went) changed_dirs.insert(n.uri.str());  // A folder now, described with the rest.
      report->removed.push_back(source);
      touch(n.uri);
    }
  }
  return DescribeFolders(store, root, std::vector<std::string>(changed_dirs.begin(), changed_dirs.end()));
}

Status DescribeFolders(memory::ContextStore& store, const Uri& root, const std::vector<std::string>& folder_uris) {
  // Folders, deepest first: L0 "<folder>/: N files, M folders", L1 their children's abstracts.
  std::vector<std::string> dirs = folder_uris;
  std::sort(dirs.begin(), dirs.end(), [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  for (const std::string& d : dirs) {
    if (d != root.str() && d.rfind(root.str() + "/", 0) != 0) continue;  // Only below the add's root.
    STRATA_ASSIGN_OR_RETURN(Uri dir, Uri::Parse(d));
    Result<std::vector<memory::Node>> children = store.List(dir);
    if (!children.ok()) {
      if (children.status().code() == StatusCode::kNotFound) continue;
      return children.status();
    }
    Result<memory::Node> self = store.Stat(dir);
    if (!self.ok()) continue;
    const Json meta = MetadataOf(*self);
    if (IsFile(IngestOf(meta))) continue;  // A file.
    // A folder an add described that no longer holds anything (its files were removed) goes too: the tree
    // is mirrored. Not the add's root, nor a directory that carries anything but the add's own mark (other
    // metadata, links): someone made that one. Its parent, shallower, is described after it.
    if (children->empty() && dir.str() != root.str()) {
      STRATA_ASSIGN_OR_RETURN(bool untouched, UntouchedAddFolder(store, *self));
      if (untouched) {
        Result<int64_t> removed = store.Remove(dir, /*recursive=*/false);
        if (!removed.ok() && removed.status().code() != StatusCode::kNotFound) return removed.status();
        continue;
      }
    }
    // A scope root, or a directory someone described: its own L0/L1 stay.
    if (dir.is_scope_root() || dir.is_kind_dir() || dir.is_root()) continue;
    if (IngestOf(meta) == nullptr && !self->abstract_text.empty()) continue;
    int files_here = 0, folders = 0;
    std::string overview;
    for (const memory::Node& c : *children) {
      const Json child_meta = MetadataOf(c);
      const Json* ingest = IngestOf(child_meta);
      bool is_file = IsFile(ingest);
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
    Json folder = {{"source", ""}, {"folder", true}};
    if (const Json* ingest = IngestOf(meta); ingest != nullptr && !json::StringOr(*ingest, "file").empty()) {
      folder["file"] = json::StringOr(*ingest, "file");  // A removed file's directory (RemoveFileNodes).
    }
    dir_meta["ingest"] = std::move(folder);
    STRATA_RETURN_IF_ERROR(store.Mkdir(dir, {.abstract_text = abstract_text,
                                            .overview = Utf8Cut(overview, 3000),
                                            .metadata = dir_meta.dump(-1, ' ', false, Json::error_handler_t::replace)}));
  }
  return Status::Ok();
}

}  // namespace strata::ingest
