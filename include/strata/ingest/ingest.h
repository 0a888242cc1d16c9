// Documents and code brought into the context store as resources (`strata memory add PATH... --uri URI`,
// POST /api/v1/resources, MCP add_resource): each file becomes a directory node under the URI, mirroring
// the source tree, whose children are the file's chunks in order. docs/formats/ingest.md has the layout.
//
//   ingest::AddReport report;
//   auto files = ingest::WalkPaths({"./docs"}, {}, &report);           // ignore files, size limit, links
//   auto done = ingest::AddFiles(store, root, *files, {}, &report);     // only what changed is written
//
// Kinds (by extension, then by content): Markdown, plain text, HTML (libxml2's parser; scripts and styles
// dropped), PDF (poppler; page numbers kept), source code (cut at top-level definitions), JSON, YAML and CSV
// (structure kept). Chunks are cut at structure boundaries — headings, paragraphs, definitions, pages, top-
// level members, rows — and hold at most `chunk_tokens` tokens (o200k_base) unless one unit alone is longer,
// which is then cut at lines and, failing that, at characters.
//
// Files are untrusted: one that cannot be read (binary, malformed PDF, not text) is skipped with the reason,
// never a crash, and the others are added. Links are never followed.
//
// Thread safety: the functions are thread-safe, but two AddFiles of one root at once may interleave their
// writes of the same file: Engine::AddResources serialises the adds of one engine.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/memory/markdown_io.h"
#include "strata/memory/store.h"
#include "strata/util/status.h"

namespace strata::ingest {

enum class FileKind { kMarkdown, kText, kHtml, kPdf, kCode, kJson, kYaml, kCsv };
std::string_view FileKindName(FileKind kind);  // "markdown", "text", "html", "pdf", "code", "json", "yaml", "csv"

// One file to add: `path` relative to the added tree ('/'-separated), its bytes, or (when `disk` is not
// empty) the file to read them from when it is added.
struct SourceFile {
  std::string path;
  std::string bytes;
  std::string disk;
  int64_t size = 0;
};

using SkippedFile = memory::SkippedPath;

// What one add did, by file (paths relative to the added tree).
struct AddReport {
  std::vector<std::string> added, updated, unchanged, removed;
  std::vector<SkippedFile> skipped;
  int64_t chunks = 0;  // Written now.
  int64_t bytes = 0;   // Of the files read.
  int64_t queued = 0;  // Model summaries queued (AddOptions::summarize).
};

struct WalkOptions {
  int64_t max_file_bytes = 20 << 20;
};

// The files below `paths`: a directory's files mirrored at their path below it (recursively), a file at its
// name. Entries whose name starts with '.' are passed over (.git, .venv: not the tree's content); the rules
// of each directory's `.gitignore` and `.strataignore` apply below it. A link named in `paths` is followed;
// links within the tree, files over the limit and special files are skipped with the reason. kNotFound when
// a path does not exist.
Result<std::vector<SourceFile>> WalkPaths(std::span<const std::string> paths, const WalkOptions& options,
                                          AddReport* report);

// The bounds of ExtractOptions::chunk_tokens: an add with another size is refused before it reads a file.
inline constexpr int64_t kMinChunkTokens = 16;
inline constexpr int64_t kMaxChunkTokens = 100'000;

struct ExtractOptions {
  int64_t chunk_tokens = 512;  // Within [kMinChunkTokens, kMaxChunkTokens].
};

struct Chunk {
  std::string text;
  std::string name;        // The heading path ("Install > Debian"), the definition ("class Parser"), "rows 2-41".
  int64_t begin = -1;      // Byte range in the source file, when the kind has one (not HTML or PDF).
  int64_t end = -1;
  int page_first = 0;      // PDF pages, 1-based; 0 otherwise.
  int page_last = 0;
};

struct Extracted {
  FileKind kind = FileKind::kText;
  std::string title;       // A document's title (HTML <title>, the first heading), "" when none.
  std::vector<Chunk> chunks;
};

// The kind of a file from its name, then its first bytes; nullopt for a file that is not text (binary).
std::optional<FileKind> KindOf(std::string_view path, std::string_view bytes);

// Reads `bytes` as `kind` and cuts it into chunks. kInvalidArgument naming what is wrong for a file that
// cannot be read as its kind (a damaged PDF, nothing but markup).
Result<Extracted> Extract(FileKind kind, std::string_view path, std::string_view bytes, const ExtractOptions& options);

struct AddOptions {
  ExtractOptions extract;
  // Files added before below `root` whose paths are not among these files are removed (the tree is
  // mirrored). Off: only add and update.
  bool remove_missing = true;
  // Queue a model summary (L0/L1 of the file and its chunks) for every file added or updated, run by the
  // engine's worker like phase 2 (Engine::AddResources); the heuristic layers stand until it arrives.
  bool summarize = false;
  // Larger files are skipped (the walk's limit, checked again when a file is read).
  int64_t max_file_bytes = 20 << 20;
};

// The job that summarises one added file with the model: its key is the file's URI, its payload
// {"uri", "hash", "chunk_tokens"} (the content and the cut it was queued for: a job for a file replaced
// since does nothing).
inline constexpr std::string_view kSummaryJobKind = "resource.summarize";

// Adds `files` below `root`: a file whose content hash is the one stored is left as it is; a changed one is
// replaced whole; directories get heuristic L0/L1 (their files and subdirectories) bottom-up.
Status AddFiles(memory::ContextStore& store, const memory::Uri& root, std::span<const SourceFile> files,
                const AddOptions& options, AddReport* report);

// Writes the heuristic L0/L1 of the folders `dirs` below (or at) `root`, deepest first: L0 "<name>/: N files,
// M folders", L1 each child's name and abstract. A scope root, a kind directory and a directory someone gave
// its own L0 are left as they are.
Status DescribeFolders(memory::ContextStore& store, const memory::Uri& root, const std::vector<std::string>& dirs);

}  // namespace strata::ingest
