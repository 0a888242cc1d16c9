// Fuzz target: reading documents and code into chunks (ingest/ingest.h) — files are untrusted. The first
// byte picks the kind (Markdown, text, HTML, PDF, code, JSON, YAML, CSV), the rest is the file. Any input
// is read or refused with an error; a chunk is never empty and never names pages it does not have.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "strata/ingest/ingest.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  using strata::ingest::FileKind;
  static constexpr FileKind kKinds[] = {FileKind::kMarkdown, FileKind::kText, FileKind::kHtml, FileKind::kPdf,
                                        FileKind::kCode,     FileKind::kJson, FileKind::kYaml, FileKind::kCsv};
  static constexpr const char* kNames[] = {"a.md", "a.txt", "a.html", "a.pdf", "a.py", "a.json", "a.yaml", "a.csv"};
  const size_t k = data[0] % 8;
  std::string_view bytes(reinterpret_cast<const char*>(data + 1), size - 1);
  (void)strata::ingest::KindOf(kNames[k], bytes);
  auto extracted = strata::ingest::Extract(kKinds[k], kNames[k], bytes, {.chunk_tokens = 48});
  if (!extracted.ok()) return 0;
  for (const auto& c : extracted->chunks) {
    if (c.text.empty()) std::abort();
    if (c.page_first < 0 || c.page_last < c.page_first) std::abort();
    if (c.begin > c.end || c.end > static_cast<int64_t>(bytes.size())) std::abort();
  }
  return 0;
}
