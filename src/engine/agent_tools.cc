#include "strata/engine/agent_tools.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "strata/engine/views.h"
#include "strata/json/checked.h"
#include "strata/memory/uri.h"
#include "strata/util/utf8.h"

namespace strata {
namespace {

using Json = nlohmann::json;
namespace fs = std::filesystem;

constexpr size_t kMaxLineChars = 2000;
constexpr int64_t kMaxLines = 1000;

Json Args(std::string_view arguments) { return json::ParseOrDiscard<Json>(arguments); }

// Reads lines from a file in blocks, keeping at most `keep` bytes of each: a file of one endless line
// costs a block of memory, not its size.
class BoundedLineReader {
 public:
  explicit BoundedLineReader(std::FILE* f) : f_(f) {}

  // Sets `*line` to the next line (without '\n', cut to `keep` bytes; `*cut` says whether it was).
  // Returns false at the end of the file or on a read error (`error()`).
  bool Next(std::string* line, size_t keep, bool* cut) {
    line->clear();
    *cut = false;
    bool any = false;
    while (true) {
      if (pos_ == len_) {
        len_ = std::fread(block_, 1, sizeof block_, f_);
        pos_ = 0;
        if (len_ == 0) return any;
      }
      any = true;
      const char* start = block_ + pos_;
      const char* nl = static_cast<const char*>(std::memchr(start, '\n', len_ - pos_));
      size_t n = nl ? static_cast<size_t>(nl - start) : len_ - pos_;
      size_t room = keep > line->size() ? keep - line->size() : 0;
      line->append(start, std::min(n, room));
      if (n > room) *cut = true;
      pos_ += n + (nl ? 1 : 0);
      if (nl) return true;
    }
  }
  bool error() const { return std::ferror(f_) != 0; }

 private:
  std::FILE* f_;
  char block_[65536];
  size_t pos_ = 0, len_ = 0;
};

tools::ToolOutput ReadFile(std::string_view arguments, const AgentToolsOptions& options, const Canceller& cancel) {
  Json args = Args(arguments);
  std::string path = json::StringOr(args, "path");
  int64_t first = std::max<int64_t>(1, json::IntOr(args, "line_offset", 1));
  int64_t wanted = std::clamp<int64_t>(json::IntOr(args, "n_lines", kMaxLines), 1, kMaxLines);
  if (path.empty()) return tools::ToolOutput::Error("Error: \"path\" is empty.");
  std::string shown_path = json::ReplaceInvalidUtf8(path);
  std::error_code ec;
  fs::file_status st = fs::status(path, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) {
    return tools::ToolOutput::Error("Error: " + shown_path + ": " + ec.message() + ".");
  }
  if (!fs::exists(st)) return tools::ToolOutput::Error("Error: " + shown_path + " does not exist.");
  if (fs::is_directory(st)) {
    return tools::ToolOutput::Error("Error: " + shown_path + " is a directory; list it with list_directory.");
  }
  if (!fs::is_regular_file(st)) return tools::ToolOutput::Error("Error: " + shown_path + " is not a regular file.");
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) return tools::ToolOutput::Error("Error: " + shown_path + " cannot be read: " + std::strerror(errno) + ".");
  BoundedLineReader reader(file.get());
  std::string out, line;
  int64_t number = 0, shown = 0;
  size_t bytes = 0;
  bool truncated_line = false, more = false, cut = false;
  while (reader.Next(&line, kMaxLineChars + 4, &cut)) {
    ++number;
    if (cancel.cancelled()) return tools::ToolOutput::Error("Error: cancelled.");
    if (number < first) continue;
    if (shown == wanted || bytes >= options.max_read_bytes) {
      more = true;
      break;
    }
    if (line.find('\0') != std::string::npos) {
      return tools::ToolOutput::Error("Error: " + shown_path + " is not a text file (a NUL byte on line " +
                                      std::to_string(number) + ").");
    }
    if (line.size() > kMaxLineChars) {
      cut = true;
      line.resize(Utf8Prefix(line, kMaxLineChars));
    }
    if (!cut && !line.empty() && line.back() == '\r') line.pop_back();
    size_t bad = 0;
    if (!json::IsValidUtf8(line, &bad)) {
      return tools::ToolOutput::Error("Error: " + shown_path + " is not UTF-8 text (an invalid byte on line " +
                                      std::to_string(number) + ").");
    }
    if (cut) {
      line += " ...";
      truncated_line = true;
    }
    char label[24];
    std::snprintf(label, sizeof label, "%6lld\t", static_cast<long long>(number));
    out += label;
    out += line;
    out += '\n';
    ++shown;
    bytes += line.size();
  }
  if (reader.error()) return tools::ToolOutput::Error("Error: reading " + shown_path + " failed.");
  std::string note;
  if (number == 0) {
    note = "The file is empty.";
  } else if (shown == 0) {
    note = "The file has " + std::to_string(number) + " line" + (number == 1 ? "" : "s") + "; none from line " +
           std::to_string(first) + ".";
  } else {
    note = std::to_string(shown) + " lines read from " + shown_path + " starting at line " + std::to_string(first) + ".";
    if (more) {
      note += " More lines follow: continue with line_offset " + std::to_string(first + shown) + ".";
    } else {
      note += " End of file reached.";
    }
    if (truncated_line) note += " Lines over " + std::to_string(kMaxLineChars) + " characters were cut (\" ...\").";
  }
  return tools::ToolOutput::Text(out + "(" + note + ")");
}

tools::ToolOutput ListDirectory(std::string_view arguments, const AgentToolsOptions& options) {
  Json args = Args(arguments);
  std::string path = json::StringOr(args, "path", ".");
  if (path.empty()) path = ".";
  std::error_code ec;
  std::string shown_path = json::ReplaceInvalidUtf8(path);
  if (!fs::is_directory(path, ec)) {
    if (ec && ec != std::errc::no_such_file_or_directory) {
      return tools::ToolOutput::Error("Error: " + shown_path + ": " + ec.message() + ".");
    }
    return tools::ToolOutput::Error("Error: " + shown_path + (fs::exists(path, ec) ? " is not a directory." : " does not exist."));
  }
  std::vector<std::string> entries;
  size_t total = 0;
  fs::directory_iterator it(path, fs::directory_options::skip_permission_denied, ec);
  if (ec) return tools::ToolOutput::Error("Error: " + shown_path + " cannot be listed: " + ec.message() + ".");
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    ++total;
    std::string name = json::ReplaceInvalidUtf8(it->path().filename().string());
    std::error_code e2;
    if (it->is_directory(e2)) {
      name += "/";
    } else if (it->is_regular_file(e2)) {
      uintmax_t size = it->file_size(e2);
      if (!e2) name += "  (" + std::to_string(size) + " bytes)";
    }
    entries.push_back(std::move(name));
  }
  std::sort(entries.begin(), entries.end());
  std::string out;
  for (size_t i = 0; i < entries.size() && i < options.max_entries; ++i) out += entries[i] + "\n";
  if (entries.empty()) return tools::ToolOutput::Text("(" + shown_path + " is empty)");
  if (total > options.max_entries) {
    out += "(" + std::to_string(total - options.max_entries) + " more entries not shown)\n";
  }
  return tools::ToolOutput::Text(out);
}

tools::ToolOutput Remember(Engine* engine, std::string_view arguments, const AgentToolsOptions& options,
                           const Canceller& cancel) {
  Json args = Args(arguments);
  std::string text = json::StringOr(args, "text");
  auto done = engine->Remember("strata://user/" + options.user, text, json::StringOr(args, "category"), &cancel);
  if (!done.ok()) return tools::ToolOutput::Error("Error: could not remember it: " + done.status().message());
  if (done->empty()) return tools::ToolOutput::Text("Already known; nothing changed.");
  std::string out;
  for (const session::MemoryChange& c : *done) {
    out += std::string(session::MemoryActionName(c.action)) + " " + c.uri + (c.reason.empty() ? "" : ": " + c.reason) + "\n";
  }
  return tools::ToolOutput::Text(out);
}

tools::ToolOutput Find(Engine* engine, std::string_view arguments, const AgentToolsOptions& options) {
  Json args = Args(arguments);
  FindRequest request;
  // The arguments were checked against views::FindArgumentsSchema, MCP's as well: the engine's defaults and
  // bounds, so that one question gets one answer (and one refusal) from every front end.
  request.query = json::StringOr(args, "query");
  request.under = json::StringOr(args, "under");
  Result<int64_t> asked = json::CheckedIntOr(args, "limit", static_cast<int64_t>(request.limit));
  if (!asked.ok()) return tools::ToolOutput::Error("Error: " + asked.status().message());
  Result<size_t> limit = FindLimitArg(*asked);
  if (!limit.ok()) return tools::ToolOutput::Error("Error: " + limit.status().message());
  request.limit = *limit;
  Result<int64_t> budget = json::CheckedIntOr(args, "token_budget", 0);
  if (!budget.ok()) return tools::ToolOutput::Error("Error: " + budget.status().message());
  request.token_budget = *budget;
  if (Status read = views::ReadFindOptions(args, &request); !read.ok()) {
    return tools::ToolOutput::Error("Error: " + read.message());
  }
  request.reach = Reach::User(options.user);  // The user's own memories and the shared scopes, ranked together.
  Result<FindResult> found = engine->Find(request);
  if (!found.ok()) return tools::ToolOutput::Error("Error: the search failed: " + found.status().message());
  std::string out;
  for (const memory::Hit& h : found->hits) {
    char score[16];
    std::snprintf(score, sizeof score, "%.2f", h.score);
    out += h.uri.str() + " (score " + score + ", " + std::to_string(h.tokens) + " tokens): " + h.abstract_text + "\n";
  }
  if (out.empty()) return tools::ToolOutput::Text("Nothing found for \"" + request.query + "\".");
  return tools::ToolOutput::Text(out + "(read a whole memory with its URI through the memory tools, if available)");
}

}  // namespace

Status AddAgentTools(Engine* engine, const AgentToolsOptions& options, tools::Toolset* toolset) {
  STRATA_RETURN_IF_ERROR(memory::ValidateScopeId(options.user, "user"));
  if (options.files) {
    STRATA_RETURN_IF_ERROR(toolset->Add(tools::MakeTool(
        {"read_file",
         "Read a UTF-8 text file. Returns numbered lines (at most 1000 per call, lines over 2000 characters cut); "
         "use line_offset to continue. Relative paths start at the working directory.",
         R"J({"type":"object","properties":{"path":{"type":"string","description":"The file to read"},)J"
         R"J("line_offset":{"type":"integer","minimum":1,"description":"First line to read (1-based, default 1)"},)J"
         R"J("n_lines":{"type":"integer","minimum":1,"maximum":1000,"description":"How many lines (default 1000)"}},)J"
         R"J("required":["path"],"additionalProperties":false})J"},
        [options](std::string_view a, const Canceller& c) { return ReadFile(a, options, c); })));
    STRATA_RETURN_IF_ERROR(toolset->Add(tools::MakeTool(
        {"list_directory", "List the entries of a directory (subdirectories end with /, files show their size).",
         R"J({"type":"object","properties":{"path":{"type":"string","description":"The directory (default: the working directory)"}},)J"
         R"J("additionalProperties":false})J"},
        [options](std::string_view a, const Canceller&) { return ListDirectory(a, options); })));
  }
  if (options.memory) {
    STRATA_RETURN_IF_ERROR(toolset->Add(tools::MakeTool(
        {"remember",
         "Remember a fact about the user for later conversations (preferences, plans, people, decisions). "
         "Write one self-contained statement; duplicates of what is known are merged.",
         R"J({"type":"object","properties":{"text":{"type":"string","description":"What to remember"},)J"
         R"J("category":{"type":"string","description":"Optional: preferences, entities, events, ..."}},)J"
         R"J("required":["text"],"additionalProperties":false})J"},
        [engine, options](std::string_view a, const Canceller& c) { return Remember(engine, a, options, c); })));
    STRATA_RETURN_IF_ERROR(toolset->Add(tools::MakeTool(
        {"find",
         "Search what is remembered about the user and the shared notes and resources. Returns URIs, scores "
         "and abstracts, best first.",
         views::FindArgumentsSchema(/*session=*/false, /*model_help=*/false).dump()},
        [engine, options](std::string_view a, const Canceller&) { return Find(engine, a, options); })));
  }
  return Status::Ok();
}

}  // namespace strata
