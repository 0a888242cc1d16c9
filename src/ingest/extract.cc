// File kinds, and each kind cut into chunks at its structure boundaries (ingest.h).
#include <algorithm>
#include <array>
#include <cctype>
#include <nlohmann/json.hpp>
#include <regex>

#include "ingest_internal.h"
#include "strata/ingest/ingest.h"
#include "strata/json/checked.h"
#include "strata/json/json_writer.h"
#include "strata/tokenizer/registry.h"
#include "strata/util/ascii.h"
#include "strata/util/utf8.h"

namespace strata::ingest {

using internal::Block;

std::string_view FileKindName(FileKind kind) {
  switch (kind) {
    case FileKind::kMarkdown: return "markdown";
    case FileKind::kText: return "text";
    case FileKind::kHtml: return "html";
    case FileKind::kPdf: return "pdf";
    case FileKind::kCode: return "code";
    case FileKind::kJson: return "json";
    case FileKind::kYaml: return "yaml";
    case FileKind::kCsv: return "csv";
  }
  return "text";
}

namespace {

constexpr size_t kMaxNameBytes = 200;
const std::string kEmpty;

int64_t Tokens(std::string_view text) { return tokenizer::CountText(tokenizer::kDefaultEncoding, text); }

std::string Extension(std::string_view path) {
  std::string_view name = path.substr(path.find_last_of('/') == std::string_view::npos ? 0 : path.find_last_of('/') + 1);
  size_t dot = name.find_last_of('.');
  if (dot == std::string_view::npos || dot == 0) return "";
  return AsciiLower(name.substr(dot + 1));
}

// A line of `text` with its byte range (without the newline).
struct Line {
  std::string_view text;
  int64_t begin = 0, end = 0;
};

std::vector<Line> Lines(std::string_view text) {
  std::vector<Line> out;
  size_t at = 0;
  while (at < text.size()) {
    size_t nl = text.find('\n', at);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view line = text.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out.push_back({line, static_cast<int64_t>(at), static_cast<int64_t>(at + line.size())});
    if (nl == std::string_view::npos) break;
    at = nl + 1;
  }
  return out;
}

bool Blank(std::string_view line) { return line.find_first_not_of(" \t\f\v") == std::string_view::npos; }

// Paragraphs: runs of non-blank lines.
std::vector<Block> Paragraphs(std::string_view text, int page = 0, bool keep_ranges = true) {
  std::vector<Block> out;
  std::vector<Line> lines = Lines(text);
  size_t i = 0;
  while (i < lines.size()) {
    if (Blank(lines[i].text)) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < lines.size() && !Blank(lines[j].text)) ++j;
    Block b;
    b.begin = keep_ranges ? lines[i].begin : -1;
    b.end = keep_ranges ? lines[j - 1].end : -1;
    b.text = std::string(text.substr(lines[i].begin, lines[j - 1].end - lines[i].begin));
    b.page = page;
    out.push_back(std::move(b));
    i = j;
  }
  return out;
}

// ---- Source code: top-level definitions ----

// The definition a top-level line starts, by language family ("" when none).
std::string DefinitionName(std::string_view ext, std::string_view line) {
  if (line.empty() || std::isspace(static_cast<unsigned char>(line[0])) || line.size() > 400) return "";
  static const std::regex kPython(R"(^(?:async\s+)?(def|class)\s+([A-Za-z_]\w*))");
  static const std::regex kJs(
      R"(^(?:export\s+)?(?:default\s+)?(?:declare\s+)?(?:abstract\s+)?(?:async\s+)?(function\*?|class|interface|type|enum|const|let|var)\s+([A-Za-z_$][\w$]*))");
  static const std::regex kGo(R"(^(func|type)\s+(?:\([^)]*\)\s*)?([A-Za-z_]\w*))");
  static const std::regex kRust(
      R"(^(?:pub(?:\([^)]*\))?\s+)?(?:async\s+)?(?:unsafe\s+)?(?:const\s+)?(fn|struct|enum|trait|impl|mod|union|macro_rules!)\s*(?:<[^>]*>\s*)?([A-Za-z_][\w:]*))");
  static const std::regex kRuby(R"(^(def|class|module)\s+([A-Za-z_][\w.:]*))");
  static const std::regex kShell(R"(^(?:function\s+)?([A-Za-z_][\w-]*)\s*\(\s*\)\s*\{?\s*$)");
  static const std::regex kCType(R"(^(?:template\s*<.*>\s*)?(class|struct|enum(?:\s+class)?|union)\s+([A-Za-z_]\w*)[^;]*$)");
  static const std::regex kCFunction(R"(^[A-Za-z_][\w:<>,\s\*&~]*?[\s\*&]([A-Za-z_~][\w:~]*)\s*\([^;]*$)");
  static const std::regex kJava(
      R"(^(?:(?:public|private|protected|static|final|abstract|sealed|data|open|internal)\s+)*(class|interface|enum|record|object|fun)\s+([A-Za-z_]\w*))");
  std::string s(line);
  std::smatch m;
  auto named = [&](const std::regex& re, int kind_group, int name_group) -> std::string {
    if (!std::regex_search(s, m, re)) return "";
    std::string kind = kind_group > 0 ? m[kind_group].str() : "function";
    return kind + " " + m[name_group].str();
  };
  if (ext == "py" || ext == "pyi") return named(kPython, 1, 2);
  if (ext == "js" || ext == "mjs" || ext == "cjs" || ext == "jsx" || ext == "ts" || ext == "tsx" || ext == "mts" ||
      ext == "cts" || ext == "vue" || ext == "svelte") {
    return named(kJs, 1, 2);
  }
  if (ext == "go") return named(kGo, 1, 2);
  if (ext == "rs") return named(kRust, 1, 2);
  if (ext == "rb") return named(kRuby, 1, 2);
  if (ext == "sh" || ext == "bash" || ext == "zsh") return named(kShell, 0, 1);
  if (ext == "java" || ext == "kt" || ext == "kts" || ext == "scala" || ext == "cs" || ext == "swift") {
    return named(kJava, 1, 2);
  }
  if (ext == "c" || ext == "h" || ext == "cc" || ext == "cpp" || ext == "cxx" || ext == "hh" || ext == "hpp" ||
      ext == "hxx" || ext == "m" || ext == "mm") {
    if (line[0] == '#' || line[0] == '{' || line[0] == '}' || line.rfind("//", 0) == 0 || line.rfind("/*", 0) == 0 ||
        line.rfind("namespace", 0) == 0 || line.rfind("using ", 0) == 0 || line.rfind("typedef", 0) == 0 ||
        line.rfind("extern \"C\"", 0) == 0 || line.rfind("return", 0) == 0) {
      return "";
    }
    std::string t = named(kCType, 1, 2);
    if (!t.empty()) return t;
    // The function pattern backtracks: only short lines that could be one are tried.
    if (line.size() > 200 || line.find('(') == std::string_view::npos) return "";
    return named(kCFunction, 0, 1);
  }
  // Other languages: a line that opens a block at the top level.
  return "";
}

// A comment or decorator line that belongs to the definition after it.
bool Leading(std::string_view line) {
  size_t at = line.find_first_not_of(" \t");
  if (at == std::string_view::npos) return false;
  std::string_view t = line.substr(at);
  return t[0] == '#' || t[0] == '@' || t.rfind("//", 0) == 0 || t.rfind("/*", 0) == 0 || t[0] == '*' ||
         t.rfind("--", 0) == 0 || t.rfind("///", 0) == 0 || t.rfind("\"\"\"", 0) == 0;
}

std::vector<Block> CodeBlocks(std::string_view ext, std::string_view text) {
  std::vector<Line> lines = Lines(text);
  std::vector<std::pair<size_t, std::string>> starts;  // First line (comments included) and name.
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string name = DefinitionName(ext, lines[i].text);
    if (name.empty()) continue;
    size_t first = i;
    while (first > 0 && Leading(lines[first - 1].text) && (starts.empty() || first - 1 > starts.back().first)) --first;
    starts.emplace_back(first, std::move(name));
  }
  std::vector<Block> out;
  auto add = [&](size_t from, size_t to, std::string name) {  // Lines [from, to).
    while (from < to && Blank(lines[from].text)) ++from;
    while (to > from && Blank(lines[to - 1].text)) --to;
    if (from >= to) return;
    Block b;
    b.begin = lines[from].begin;
    b.end = lines[to - 1].end;
    b.text = std::string(text.substr(b.begin, b.end - b.begin));
    b.cut_before = !name.empty();  // Every definition starts a chunk: a hit is one definition.
    b.name = std::move(name);
    out.push_back(std::move(b));
  };
  if (starts.empty()) return Paragraphs(text);
  add(0, starts[0].first, "");
  for (size_t k = 0; k < starts.size(); ++k) {
    add(starts[k].first, k + 1 < starts.size() ? starts[k + 1].first : lines.size(), starts[k].second);
  }
  return out;
}

// ---- JSON, YAML, CSV ----

std::vector<Block> JsonBlocks(std::string_view text) {
  nlohmann::json j = json::ParseOrDiscard<nlohmann::json>(text);
  if (j.is_discarded()) return Paragraphs(text);  // Not JSON after all (JSON Lines, a fragment): as text.
  std::vector<Block> out;
  if (j.is_object()) {
    for (auto it = j.begin(); it != j.end(); ++it) {
      out.push_back({json::QuoteForError(it.key(), 200) + ": " + it.value().dump(2, ' ', false,
                                                                                  nlohmann::json::error_handler_t::replace),
                     it.key()});
    }
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i) {
      out.push_back({j[i].dump(2, ' ', false, nlohmann::json::error_handler_t::replace), "[" + std::to_string(i) + "]"});
    }
  } else {
    out.push_back({j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace), ""});
  }
  return out;
}

std::vector<Block> YamlBlocks(std::string_view text) {
  std::vector<Line> lines = Lines(text);
  std::vector<Block> out;
  size_t start = 0;
  std::string name;
  bool cut = false;
  auto flush = [&](size_t to) {
    size_t from = start;
    while (from < to && Blank(lines[from].text)) ++from;
    size_t end = to;
    while (end > from && Blank(lines[end - 1].text)) --end;
    if (from < end) {
      Block b;
      b.begin = lines[from].begin;
      b.end = lines[end - 1].end;
      b.text = std::string(text.substr(b.begin, b.end - b.begin));
      b.name = name;
      b.cut_before = cut;
      out.push_back(std::move(b));
      cut = false;
    }
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    std::string_view l = lines[i].text;
    bool document = l.rfind("---", 0) == 0;
    bool key = !l.empty() && !std::isspace(static_cast<unsigned char>(l[0])) && l[0] != '#' && l[0] != '-' &&
               l.find(':') != std::string_view::npos;
    bool item = l.rfind("- ", 0) == 0;
    if (!document && !key && !item) continue;
    flush(i);
    start = document ? i + 1 : i;
    name = key ? std::string(l.substr(0, l.find(':'))) : "";
    cut = cut || document;  // A new document starts a chunk.
  }
  flush(lines.size());
  return out;
}

// CSV rows (a quoted field may hold line breaks); the header is returned apart.
std::vector<Block> CsvBlocks(std::string_view text, std::string* header) {
  std::vector<Block> out;
  size_t at = 0;
  int row = 0;
  while (at < text.size()) {
    bool quoted = false;
    size_t end = at;
    while (end < text.size() && (quoted || text[end] != '\n')) {
      if (text[end] == '"') quoted = !quoted;
      ++end;
    }
    std::string_view line = text.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!Blank(line)) {
      if (row == 0) {
        *header = std::string(line);
      } else {
        out.push_back({std::string(line), "row " + std::to_string(row + 1), static_cast<int64_t>(at),
                       static_cast<int64_t>(at + line.size())});
      }
      ++row;
    }
    at = end + 1;
  }
  return out;
}

std::string Joined(const std::vector<const Block*>& blocks, std::string_view separator) {
  std::string out;
  for (const Block* b : blocks) {
    if (!out.empty()) out += separator;
    out += b->text;
  }
  return out;
}

}  // namespace

namespace internal {

std::vector<Block> MarkdownBlocks(std::string_view text, std::string* title, bool keep_ranges) {
  std::vector<Line> lines = Lines(text);
  std::vector<Block> out;
  std::vector<std::pair<int, std::string>> path;  // Heading level and text, outermost first.
  std::string fence;
  size_t i = 0;
  int pending_level = 0;
  int64_t pending_begin = -1;
  std::string pending_heading;
  auto heading_path = [&] {
    std::string s;
    for (const auto& [level, h] : path) s += (s.empty() ? "" : " > ") + h;
    return s;
  };
  while (i < lines.size()) {
    std::string_view l = lines[i].text;
    if (fence.empty() && !Blank(l)) {
      size_t hashes = 0;
      while (hashes < l.size() && hashes < 7 && l[hashes] == '#') ++hashes;
      if (hashes >= 1 && hashes <= 6 && (hashes == l.size() || l[hashes] == ' ' || l[hashes] == '\t')) {
        std::string h(l.substr(hashes));
        h.erase(0, h.find_first_not_of(" \t"));
        while (!h.empty() && (h.back() == '#' || h.back() == ' ')) h.pop_back();
        while (!path.empty() && path.back().first >= static_cast<int>(hashes)) path.pop_back();
        path.emplace_back(static_cast<int>(hashes), h);
        if (title != nullptr && title->empty() && !h.empty()) *title = h;
        if (!pending_heading.empty()) {  // A heading with nothing under it before the next one.
          out.push_back({pending_heading, heading_path(), keep_ranges ? pending_begin : -1,
                         keep_ranges ? pending_begin + static_cast<int64_t>(pending_heading.size()) : -1, 0,
                         pending_level <= 2});
        }
        pending_heading = std::string(l);
        pending_level = static_cast<int>(hashes);
        pending_begin = lines[i].begin;
        ++i;
        continue;
      }
    }
    if (Blank(l)) {
      ++i;
      continue;
    }
    // A paragraph (a fenced block is one, blank lines and all).
    size_t j = i;
    while (j < lines.size()) {
      std::string_view t = lines[j].text;
      std::string_view trimmed = t.substr(std::min(t.find_first_not_of(' '), t.size()));
      if (trimmed.rfind("```", 0) == 0 || trimmed.rfind("~~~", 0) == 0) {
        std::string marker(trimmed.substr(0, 3));
        fence = fence.empty() ? marker : (fence == marker ? "" : fence);
      } else if (fence.empty() && (Blank(t) || (j > i && t.rfind('#', 0) == 0))) {
        break;
      }
      ++j;
    }
    Block b;
    int64_t begin = pending_heading.empty() ? lines[i].begin : pending_begin;
    int64_t end = lines[j - 1].end;
    b.text = std::string(text.substr(begin, end - begin));  // The heading, the lines between, the paragraph.
    b.name = heading_path();
    b.begin = keep_ranges ? begin : -1;
    b.end = keep_ranges ? end : -1;
    b.cut_before = !pending_heading.empty() && pending_level <= 2;
    out.push_back(std::move(b));
    pending_heading.clear();
    i = j;
  }
  if (!pending_heading.empty()) {
    out.push_back({pending_heading, heading_path(), keep_ranges ? pending_begin : -1,
                   keep_ranges ? pending_begin + static_cast<int64_t>(pending_heading.size()) : -1, 0, pending_level <= 2});
  }
  return out;
}

std::vector<Chunk> PackBlocks(const std::vector<Block>& blocks, int64_t max_tokens, const std::string& given_prefix,
                              std::string_view separator) {
  std::vector<Chunk> out;
  // A prefix (a CSV header) that would take more than half of every chunk heads none.
  int64_t prefix_tokens = given_prefix.empty() ? 0 : Tokens(given_prefix.substr(0, Utf8Prefix(given_prefix, 64 * max_tokens))) + 1;
  const std::string& prefix = prefix_tokens * 2 > max_tokens ? kEmpty : given_prefix;
  if (prefix.empty()) prefix_tokens = 0;
  const int64_t budget = std::max<int64_t>(16, max_tokens - prefix_tokens);
  std::vector<const Block*> current;
  int64_t current_tokens = 0;
  // A chunk's name: its blocks' names, the first and the last of them when there are several.
  auto emit = [&](std::string text, const std::vector<const Block*>& parts, int64_t begin, int64_t end) {
    Chunk c;
    c.text = prefix.empty() ? std::move(text) : prefix + "\n" + text;
    std::vector<const std::string*> names;
    for (const Block* b : parts) {
      if (!b->name.empty() && (names.empty() || *names.back() != b->name)) names.push_back(&b->name);
    }
    c.name = names.empty() ? "" : names.size() == 1 ? *names[0] : *names.front() + " … " + *names.back();
    c.name.resize(Utf8Prefix(c.name, kMaxNameBytes));  // A heading or key may be as long as the file.
    c.begin = begin;
    c.end = end;
    c.page_first = parts.front()->page;
    c.page_last = parts.back()->page;
    out.push_back(std::move(c));
  };
  auto flush = [&] {
    if (current.empty()) return;
    emit(Joined(current, separator), current, current.front()->begin, current.back()->end);
    current.clear();
    current_tokens = 0;
  };
  for (const Block& b : blocks) {
    int64_t tokens = Tokens(b.text);
    if (tokens > budget) {
      flush();
      // Too long alone: cut at lines, and a line that is too long alone at characters. Each piece is the
      // block's text from its first to its last character (the blank lines inside it kept).
      std::vector<Line> lines = Lines(b.text);
      const std::vector<const Block*> self = {&b};
      int64_t piece_tokens = 0, piece_begin = -1, piece_end = 0;
      auto cut = [&] {
        if (piece_begin < 0) return;
        emit(b.text.substr(piece_begin, piece_end - piece_begin), self, b.begin < 0 ? -1 : b.begin + piece_begin,
             b.begin < 0 ? -1 : b.begin + piece_end);
        piece_begin = -1;
        piece_tokens = 0;
      };
      for (const Line& line : lines) {
        std::string_view rest = line.text;
        int64_t offset = line.begin;
        while (!rest.empty()) {
          // At most a window of the line is tokenized at a time (a token is rarely longer than 16 bytes), so a
          // line of megabytes costs linear time; a window over the budget is halved until it fits.
          const size_t window = static_cast<size_t>(budget) * 16;
          std::string_view part = rest.substr(0, std::max<size_t>(1, Utf8Prefix(rest, window)));
          int64_t t = Tokens(part);
          while (part.size() > 1 && t > budget) {
            part = part.substr(0, std::max<size_t>(1, Utf8Prefix(part, part.size() / 2)));
            t = Tokens(part);
          }
          if (piece_tokens + t + 1 > budget) cut();
          if (piece_begin < 0) piece_begin = offset;
          piece_tokens += t + 1;
          piece_end = offset + static_cast<int64_t>(part.size());
          offset += static_cast<int64_t>(part.size());
          rest.remove_prefix(part.size());
        }
      }
      cut();
      continue;
    }
    if (!current.empty() && (b.cut_before || b.page != current.back()->page || current_tokens + tokens + 1 > budget)) {
      flush();
    }
    current.push_back(&b);
    current_tokens += tokens + 1;
  }
  flush();
  return out;
}

}  // namespace internal

std::optional<FileKind> KindOf(std::string_view path, std::string_view bytes) {
  if (bytes.rfind("%PDF-", 0) == 0) return FileKind::kPdf;
  std::string_view head = bytes.substr(0, 8192);
  if (head.find('\0') != std::string_view::npos) return std::nullopt;  // Binary (UTF-16 text included).
  static const std::array<std::pair<const char*, FileKind>, 19> kByExtension = {{
      {"md", FileKind::kMarkdown}, {"markdown", FileKind::kMarkdown}, {"mdown", FileKind::kMarkdown},
      {"mkd", FileKind::kMarkdown}, {"html", FileKind::kHtml}, {"htm", FileKind::kHtml}, {"xhtml", FileKind::kHtml},
      {"pdf", FileKind::kPdf}, {"json", FileKind::kJson}, {"geojson", FileKind::kJson}, {"yaml", FileKind::kYaml},
      {"yml", FileKind::kYaml}, {"csv", FileKind::kCsv}, {"tsv", FileKind::kCsv}, {"txt", FileKind::kText},
      {"text", FileKind::kText}, {"rst", FileKind::kText}, {"adoc", FileKind::kText}, {"org", FileKind::kText}}};
  static const std::array<const char*, 46> kCode = {
      "py", "pyi", "js", "mjs", "cjs", "jsx", "ts", "tsx", "mts", "cts", "go", "rs", "c", "h", "cc", "cpp",
      "cxx", "hh", "hpp", "hxx", "java", "kt", "kts", "scala", "cs", "rb", "php", "swift", "m", "mm", "sh",
      "bash", "zsh", "lua", "pl", "pm", "r", "sql", "cmake", "el", "hs", "ml", "ex", "exs", "dart", "vue"};
  std::string ext = Extension(path);
  for (const auto& [e, kind] : kByExtension) {
    if (ext == e) return kind == FileKind::kPdf ? std::optional<FileKind>() : kind;  // Not "%PDF-": damaged.
  }
  for (const char* e : kCode) {
    if (ext == e) return FileKind::kCode;
  }
  std::string lower = AsciiLower(head.substr(0, 512));
  size_t start = lower.find_first_not_of(" \t\r\n\xEF\xBB\xBF");
  if (start != std::string::npos && (lower.compare(start, 14, "<!doctype html") == 0 || lower.compare(start, 5, "<html") == 0)) {
    return FileKind::kHtml;
  }
  // Anything else is text when its first bytes mostly are (a man page, a README, a Makefile).
  size_t control = 0;
  for (unsigned char c : head) control += (c < 0x20 && c != '\n' && c != '\r' && c != '\t' && c != '\f') ? 1 : 0;
  if (control * 50 > head.size()) return std::nullopt;
  return FileKind::kText;
}

Result<Extracted> Extract(FileKind kind, std::string_view path, std::string_view bytes, const ExtractOptions& options) {
  if (options.chunk_tokens < kMinChunkTokens || options.chunk_tokens > kMaxChunkTokens) {
    return Status::InvalidArgument("chunk_tokens must be between " + std::to_string(kMinChunkTokens) + " and " +
                                   std::to_string(kMaxChunkTokens) + ", not " + std::to_string(options.chunk_tokens));
  }
  if (kind == FileKind::kPdf) return internal::ExtractPdf(bytes, options);
  if (kind == FileKind::kHtml) return internal::ExtractHtml(bytes, options);
  std::string text = json::ReplaceInvalidUtf8(bytes);
  std::string_view body = text;
  if (body.rfind("\xEF\xBB\xBF", 0) == 0) body.remove_prefix(3);  // Byte ranges stay the file's.
  const int64_t shift = static_cast<int64_t>(text.size() - body.size());
  Extracted out;
  out.kind = kind;
  std::vector<Block> blocks;
  std::string header;
  switch (kind) {
    case FileKind::kMarkdown: blocks = internal::MarkdownBlocks(body, &out.title, true); break;
    case FileKind::kCode: blocks = CodeBlocks(Extension(path), body); break;
    case FileKind::kJson: blocks = JsonBlocks(body); break;
    case FileKind::kYaml: blocks = YamlBlocks(body); break;
    case FileKind::kCsv: blocks = CsvBlocks(body, &header); break;
    default: blocks = Paragraphs(body); break;
  }
  // Byte ranges are the file's only when its text needed no repair (invalid UTF-8 replaced by U+FFFD moves them).
  const bool exact = text.size() == bytes.size();
  for (Block& b : blocks) {
    if (!exact) {
      b.begin = b.end = -1;
    } else if (b.begin >= 0) {
      b.begin += shift, b.end += shift;
    }
  }
  out.chunks = internal::PackBlocks(blocks, options.chunk_tokens, header, kind == FileKind::kCsv ? "\n" : "\n\n");
  if (out.chunks.empty() && !header.empty()) {
    out.chunks.push_back({header, "header", exact ? shift : -1, exact ? shift + static_cast<int64_t>(header.size()) : -1});
  }
  if (out.chunks.empty()) return Status::InvalidArgument("no text in it");
  return out;
}

}  // namespace strata::ingest
