// Internals of the ingestion module shared by its files and its tests.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "strata/ingest/ingest.h"

namespace strata::ingest::internal {

// .gitignore patterns: '*' and '?' within a segment, "[a-z]" classes, "**" across segments.
bool GlobMatch(std::string_view pattern, std::string_view text);

// The rules of the ignore files met so far, each relative to its file's directory (`base`, "" for the top).
// The last rule that matches decides; "!pattern" re-includes; "dir/" matches directories only; a pattern
// with a slash (other than at its end) is anchored to its file's directory, one without matches a name at
// any depth.
class IgnoreRules {
 public:
  void AddFile(std::string_view text, const std::string& base);
  bool Ignored(const std::string& path, bool is_dir) const;

 private:
  struct Rule {
    std::string base, pattern;
    bool negate = false, dir_only = false, anchored = false;
  };
  std::vector<Rule> rules_;
};

// One unit of structure the chunker keeps whole when it can: a paragraph, a definition, a row, a page's
// paragraph. `cut_before` marks a boundary a chunk never spans (a page, a top-level heading).
struct Block {
  std::string text;
  std::string name;
  int64_t begin = -1, end = -1;
  int page = 0;
  bool cut_before = false;
};

// Packs blocks into chunks of at most `max_tokens` (a longer block is cut at lines, then characters).
// `prefix` (a CSV header) starts every chunk.
// Blocks packed together are joined by `separator` (a blank line; a line break for CSV rows).
std::vector<Chunk> PackBlocks(const std::vector<Block>& blocks, int64_t max_tokens, const std::string& prefix = "",
                              std::string_view separator = "\n\n");

// HTML and PDF to text (html.cc, pdf.cc). The HTML's text comes as Markdown-like blocks (headings as "# ").
Result<Extracted> ExtractHtml(std::string_view bytes, const ExtractOptions& options);
Result<Extracted> ExtractPdf(std::string_view bytes, const ExtractOptions& options);
// Markdown (or the Markdown-like text of an HTML page) as blocks: sections by headings, then paragraphs.
std::vector<Block> MarkdownBlocks(std::string_view text, std::string* title, bool keep_ranges);

}  // namespace strata::ingest::internal
