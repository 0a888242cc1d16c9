// WalkPaths: the files of a tree, with .gitignore-style rules, a size limit and links never followed.
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ingest_internal.h"
#include "strata/ingest/ingest.h"

namespace strata::ingest {
namespace internal {

// One step of the match: literal characters, classes and "?" here; each "*" tries its continuations
// through `recurse` (which remembers failures).
template <typename Recurse>
bool MatchHere(std::string_view pattern, std::string_view text, const Recurse& recurse) {
  size_t p = 0, t = 0;
  while (p < pattern.size()) {
    char c = pattern[p];
    if (c == '*') {
      bool across = p + 1 < pattern.size() && pattern[p + 1] == '*';
      size_t rest = p + (across ? 2 : 1);
      if (across && rest < pattern.size() && pattern[rest] == '/') {
        // "**/": zero or more whole segments.
        std::string_view after = pattern.substr(rest + 1);
        for (size_t at = t;; ) {
          if (recurse(after, text.substr(at))) return true;
          size_t slash = text.find('/', at);
          if (slash == std::string_view::npos) return false;
          at = slash + 1;
        }
      }
      for (size_t at = t; at <= text.size(); ++at) {
        if (recurse(pattern.substr(rest), text.substr(at))) return true;
        if (at < text.size() && text[at] == '/' && !across) return false;
      }
      return false;
    }
    if (t >= text.size()) return false;
    if (c == '?') {
      if (text[t] == '/') return false;
      ++p, ++t;
      continue;
    }
    if (c == '[') {
      size_t close = pattern.find(']', p + 2);
      if (close != std::string_view::npos) {
        bool negate = pattern[p + 1] == '!' || pattern[p + 1] == '^';
        bool hit = false;
        for (size_t i = p + (negate ? 2 : 1); i < close; ++i) {
          if (i + 2 < close && pattern[i + 1] == '-') {
            hit = hit || (text[t] >= pattern[i] && text[t] <= pattern[i + 2]);
            i += 2;
          } else {
            hit = hit || text[t] == pattern[i];
          }
        }
        if (hit == negate || text[t] == '/') return false;
        p = close + 1, ++t;
        continue;
      }
    }
    if (c == '\\' && p + 1 < pattern.size()) c = pattern[++p];
    if (text[t] != c) return false;
    ++p, ++t;
  }
  return t == text.size();
}

namespace {

// The matcher below, remembering the (pattern, text) positions that failed: without it a pattern of many
// stars ("*a*a*a*a*b") backtracks exponentially on a long name.
struct Matcher {
  std::string_view pattern, text;
  std::vector<bool> failed;  // (p, t) -> known not to match, for suffixes of both.

  bool Match(size_t p0, size_t t0);
};

}  // namespace

// '*' and '?' within one segment, '[...]' classes, '**' across segments.
bool GlobMatch(std::string_view pattern, std::string_view text) {
  Matcher m{pattern, text, std::vector<bool>((pattern.size() + 1) * (text.size() + 1), false)};
  return m.Match(0, 0);
}

bool Matcher::Match(size_t p0, size_t t0) {
  const size_t key = p0 * (text.size() + 1) + t0;
  if (failed[key]) return false;
  bool hit = [&] {
    std::string_view pat = pattern.substr(p0);
    std::string_view txt = text.substr(t0);
    return MatchHere(pat, txt, [&](std::string_view rest_pattern, std::string_view rest_text) {
      return Match(pattern.size() - rest_pattern.size(), text.size() - rest_text.size());
    });
  }();
  if (!hit) failed[key] = true;
  return hit;
}

void IgnoreRules::AddFile(std::string_view text, const std::string& base) {
  std::istringstream in{std::string(text)};
  std::string line;
  while (std::getline(in, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    while (!line.empty() && line.back() == ' ' && (line.size() < 2 || line[line.size() - 2] != '\\')) line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    Rule r;
    r.base = base;
    if (line[0] == '!') {
      r.negate = true;
      line.erase(0, 1);
    } else if (line[0] == '\\' && line.size() > 1 && (line[1] == '#' || line[1] == '!')) {
      line.erase(0, 1);
    }
    if (!line.empty() && line.back() == '/') {
      r.dir_only = true;
      line.pop_back();
    }
    if (line.empty()) continue;
    // A slash anywhere but at the end anchors the pattern to the ignore file's directory.
    r.anchored = line.find('/') != std::string::npos;
    if (line[0] == '/') line.erase(0, 1);
    r.pattern = line;
    rules_.push_back(std::move(r));
  }
}

bool IgnoreRules::Ignored(const std::string& path, bool is_dir) const {
  bool ignored = false;
  for (const Rule& r : rules_) {
    if (r.dir_only && !is_dir) continue;
    std::string_view rel = path;
    if (!r.base.empty()) {
      if (path.size() <= r.base.size() || path.compare(0, r.base.size(), r.base) != 0 || path[r.base.size()] != '/') {
        continue;
      }
      rel.remove_prefix(r.base.size() + 1);
    }
    bool hit = r.anchored ? GlobMatch(r.pattern, rel)
                          : GlobMatch(r.pattern, rel.substr(rel.find_last_of('/') == std::string_view::npos
                                                                  ? 0
                                                                  : rel.find_last_of('/') + 1));
    if (hit) ignored = !r.negate;
  }
  return ignored;
}

}  // namespace internal

namespace {

namespace fs = std::filesystem;

std::string ReadSmall(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

struct Walker {
  const WalkOptions& options;
  AddReport* report;
  std::vector<SourceFile>* out;
  internal::IgnoreRules rules;

  void Skip(const std::string& rel, std::string reason) { report->skipped.push_back({rel, std::move(reason)}); }

  // `rel` is the path below the added tree ("" for its root directory).
  void Directory(const fs::path& dir, const std::string& rel) {
    for (const char* name : {".gitignore", ".strataignore"}) {
      std::error_code ec;
      fs::path f = dir / name;
      if (fs::is_regular_file(fs::symlink_status(f, ec))) rules.AddFile(ReadSmall(f), rel);
    }
    std::vector<fs::directory_entry> entries;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) entries.push_back(*it);
    if (ec) {
      Skip(rel.empty() ? "." : rel, "unreadable: " + ec.message());
      return;
    }
    std::sort(entries.begin(), entries.end(),
              [](const auto& a, const auto& b) { return a.path().filename() < b.path().filename(); });
    for (const fs::directory_entry& e : entries) {
      std::string name = e.path().filename().string();
      if (name.empty() || name[0] == '.') continue;  // .git, .venv, dot files: not the tree's content.
      std::string child = rel.empty() ? name : rel + "/" + name;
      Entry(e.path(), child);
    }
  }

  void Entry(const fs::path& p, const std::string& rel) {
    struct stat st;
    if (lstat(p.c_str(), &st) != 0) {
      Skip(rel, std::string("unreadable: ") + std::strerror(errno));
      return;
    }
    bool is_dir = S_ISDIR(st.st_mode);
    if (rules.Ignored(rel, is_dir)) return;
    if (S_ISLNK(st.st_mode)) {
      Skip(rel, "link (links are not followed)");
    } else if (is_dir) {
      Directory(p, rel);
    } else if (!S_ISREG(st.st_mode)) {
      Skip(rel, "not a regular file");
    } else if (st.st_size > options.max_file_bytes) {
      Skip(rel, "too large (" + std::to_string(st.st_size) + " bytes; the limit is " +
                    std::to_string(options.max_file_bytes) + ")");
    } else {
      out->push_back({rel, "", p.string(), static_cast<int64_t>(st.st_size)});
    }
  }
};

}  // namespace

Result<std::vector<SourceFile>> WalkPaths(std::span<const std::string> paths, const WalkOptions& options,
                                          AddReport* report) {
  std::vector<SourceFile> out;
  for (const std::string& path : paths) {
    // A link named as an argument is followed (as `cp -H` and `find -H` do): `~/notes` is often one, and
    // skipping it would mirror an empty tree, removing every file an earlier add of it brought. Links
    // inside the tree are not followed.
    struct stat st;
    if (stat(path.c_str(), &st) != 0) {
      return Status::NotFound("cannot add " + path + ": " + std::strerror(errno));
    }
    Walker walker{options, report, &out, {}};
    fs::path p(path);
    std::error_code ec;
    fs::path target = fs::canonical(p, ec);  // Files are read without following links: read the target.
    if (ec) return Status::NotFound("cannot add " + path + ": " + ec.message());
    if (S_ISDIR(st.st_mode)) {
      walker.Directory(target, "");
    } else {
      std::string name = p.filename().string();
      if (name.empty() || name[0] == '.') {
        return Status::InvalidArgument("cannot add " + path + ": a name starting with '.' is not a node name");
      }
      walker.Entry(target, name);
    }
  }
  // Two arguments may name the same relative path: the later one wins, as it would on disk, and the file it
  // replaces (another file, not the same one named twice) is reported skipped, naming the one added.
  std::stable_sort(out.begin(), out.end(), [](const SourceFile& a, const SourceFile& b) { return a.path < b.path; });
  std::vector<SourceFile> unique;
  for (SourceFile& f : out) {
    if (!unique.empty() && unique.back().path == f.path) {
      if (report != nullptr && unique.back().disk != f.disk) {
        report->skipped.push_back({unique.back().disk, "its name " + f.path + " is " + f.disk +
                                                           "'s too, given later: that file is added there"});
      }
      unique.back() = std::move(f);
    } else {
      unique.push_back(std::move(f));
    }
  }
  return unique;
}

}  // namespace strata::ingest
