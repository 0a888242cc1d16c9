// Export a subtree of the store to a plain directory of Markdown files, and import one back, so people can
// read and edit an agent's memory with ordinary tools (docs/formats/markdown-tree.md).
//
//   DIR/<path>/                  a directory node; its L0/L1 in DIR/<path>/.abstract.md and .overview.md
//   DIR/<path>/<name>.md         a leaf's content (L2); "<name>" as is when it already ends in ".md"
//   DIR/<path>/<name>.abstract.md, <name>.overview.md   the leaf's L0 / L1 sidecars
//   DIR/<path>/.meta.json        names, types, categories, metadata and timestamps of the directory and its
//                                children (optional on import: defaults are inferred)
//   DIR/.relations.jsonl         links whose both ends lie inside the exported subtree
//
// Import writes directories and leaves (leaves in batches, one transaction each) below `root`; existing
// leaves are overwritten. Files that cannot be imported (invalid UTF-8, invalid names) are reported and
// skipped; nothing already stored is removed.
#pragma once

#include <string>
#include <vector>

#include "strata/memory/store.h"

namespace strata::memory {

struct ExportReport {
  int64_t directories = 0, leaves = 0, relations = 0;
  int64_t removed = 0;  // Files an earlier export into the directory wrote for what is gone since.
};

// A file or directory left out of an import or an add, and why. `path` is relative to the tree read.
struct SkippedPath {
  std::string path;
  std::string reason;  // "binary", "too large (N bytes; the limit is M)", "a symbolic link, not followed", ...
};

struct ImportReport {
  int64_t directories = 0, leaves = 0, relations = 0;
  std::vector<SkippedPath> skipped;
};

// Writes the subtree at `root` into `dir` (created if missing; existing files with the same names are
// replaced).
Result<ExportReport> ExportMarkdown(ContextStore& store, const Uri& root, const std::string& dir);
// Reads `dir` into the store below `root`.
Result<ImportReport> ImportMarkdown(ContextStore& store, const std::string& dir, const Uri& root);

}  // namespace strata::memory
