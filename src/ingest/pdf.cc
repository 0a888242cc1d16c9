// PDF text through poppler (Debian's libpoppler-cpp): each page's text, paragraphs within a page, chunks
// never across pages so that each names the pages it came from.
#include <poppler-document.h>
#include <poppler-global.h>
#include <poppler-page.h>

#include <memory>
#include <mutex>
#include <string>

#include "ingest_internal.h"
#include "strata/json/json_writer.h"

namespace strata::ingest::internal {
namespace {

void Quiet(const std::string&, void*) {}  // poppler's complaints about a damaged file: the reason is ours.

std::string Utf8(const poppler::ustring& s) {
  poppler::byte_array bytes = s.to_utf8();
  return std::string(bytes.begin(), bytes.end());
}

}  // namespace

Result<Extracted> ExtractPdf(std::string_view bytes, const ExtractOptions& options) {
  static std::once_flag init;
  std::call_once(init, [] { poppler::set_debug_error_function(Quiet, nullptr); });
  if (bytes.size() > static_cast<size_t>(INT32_MAX)) return Status::InvalidArgument("too large for the PDF reader");
  std::unique_ptr<poppler::document> doc(
      poppler::document::load_from_raw_data(bytes.data(), static_cast<int>(bytes.size())));
  if (!doc) return Status::InvalidArgument("not a PDF that poppler can read (damaged or not a PDF)");
  if (doc->is_locked()) return Status::InvalidArgument("an encrypted PDF (locked with a password)");
  Extracted out;
  out.kind = FileKind::kPdf;
  out.title = json::ReplaceInvalidUtf8(Utf8(doc->get_title()));
  std::vector<Block> blocks;
  const int pages = doc->pages();
  for (int i = 0; i < pages; ++i) {
    std::unique_ptr<poppler::page> page(doc->create_page(i));
    if (!page) continue;
    std::string text = json::ReplaceInvalidUtf8(Utf8(page->text()));
    for (char& c : text) c = c == '\f' ? '\n' : c;
    // Paragraphs: runs of non-blank lines.
    size_t at = 0;
    std::string paragraph;
    auto flush = [&] {
      size_t end = paragraph.find_last_not_of(" \n\r\t");
      if (end != std::string::npos) {
        Block b;
        b.text = paragraph.substr(0, end + 1);
        b.page = i + 1;
        b.name = "page " + std::to_string(i + 1);
        blocks.push_back(std::move(b));
      }
      paragraph.clear();
    };
    while (at <= text.size()) {
      size_t nl = text.find('\n', at);
      std::string_view line = std::string_view(text).substr(at, (nl == std::string::npos ? text.size() : nl) - at);
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) {
        flush();
      } else {
        if (!paragraph.empty()) paragraph += "\n";
        paragraph += line;
      }
      if (nl == std::string::npos) break;
      at = nl + 1;
    }
    flush();
  }
  out.chunks = PackBlocks(blocks, options.chunk_tokens);
  for (Chunk& c : out.chunks) {
    c.name = c.page_first == c.page_last ? "page " + std::to_string(c.page_first)
                                         : "pages " + std::to_string(c.page_first) + "-" + std::to_string(c.page_last);
  }
  if (out.chunks.empty()) return Status::InvalidArgument("no text in it (a scanned PDF has only images)");
  return out;
}

}  // namespace strata::ingest::internal
