// Fuzz target: importing a Markdown tree (docs/formats/markdown-tree.md) — files people edit by hand, so
// untrusted. The input describes a small tree: entries separated by "\n@@\n", each "relative/path\n" then
// the file's bytes (.md contents, sidecars, .meta.json, .relations.jsonl). Any tree imports or fails with
// an error, and afterwards the store's indexes still match its content.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <string_view>

#include "strata/memory/markdown_io.h"
#include "strata/memory/sqlite_store.h"

namespace {

namespace fs = std::filesystem;

struct Env {
  fs::path root;
  std::unique_ptr<strata::memory::ContextStore> store;
};

Env& Global() {
  static Env* env = [] {
    auto* e = new Env;
    e->root = fs::temp_directory_path() / ("strata-fuzz-import-" + std::to_string(::getpid()));
    fs::remove_all(e->root);
    fs::create_directories(e->root / "store");
    auto store = strata::memory::OpenSqliteStore((e->root / "store").string(), {.synchronous_full = false});
    if (!store.ok()) std::abort();
    e->store = std::move(*store);
    std::atexit([] { fs::remove_all(Global().root); });
    return e;
  }();
  return *env;
}

// Keeps a path inside the tree: no absolute paths, no "..", no empty segments.
std::string Sanitize(std::string_view path) {
  std::string out;
  size_t start = 0;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    std::string_view seg = path.substr(start, end - start);
    if (!seg.empty() && seg != "." && seg != ".." && seg.find('\0') == std::string_view::npos && seg.size() < 100) {
      if (!out.empty()) out += '/';
      out += seg;
    }
    start = end + 1;
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (16u << 10)) return 0;
  Env& env = Global();
  fs::path tree = env.root / "tree";
  std::error_code ec;
  fs::remove_all(tree, ec);
  fs::create_directories(tree);
  std::string_view input(reinterpret_cast<const char*>(data), size);
  int files = 0;
  size_t pos = 0;
  while (pos < input.size() && files < 32) {
    size_t next = input.find("\n@@\n", pos);
    std::string_view entry = input.substr(pos, next == std::string_view::npos ? std::string_view::npos : next - pos);
    pos = next == std::string_view::npos ? input.size() : next + 4;
    size_t nl = entry.find('\n');
    std::string rel = Sanitize(entry.substr(0, nl));
    if (rel.empty()) continue;
    fs::path file = tree / rel;
    fs::create_directories(file.parent_path(), ec);
    if (ec || fs::is_directory(file, ec)) continue;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    if (nl != std::string_view::npos) out << entry.substr(nl + 1);
    ++files;
  }
  auto under = strata::memory::Uri::Parse("strata://resources/fuzz");
  auto report = strata::memory::ImportMarkdown(*env.store, tree.string(), *under);
  if (!report.ok() && report.status().message().empty()) std::abort();
  auto problems = env.store->Check();
  if (!problems.ok() || !problems->empty()) std::abort();  // Whatever was imported is consistently indexed.
  (void)env.store->Remove(*under, true);
  return 0;
}
