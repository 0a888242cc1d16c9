#include "strata/prompt/prompt_library.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>
#include <system_error>
#include <utility>

namespace strata::prompt {
namespace {

namespace fs = std::filesystem;

// What the scan learned about one file: the id it declares, or why it cannot be loaded.
struct ScannedFile {
  std::string id;  // metadata.id when `error` is OK, else the file name without extension.
  std::string path;
  Status error;
};

bool IsTemplateFile(const fs::path& p) {
  std::string ext = p.extension().string();
  return ext == ".yaml" || ext == ".yml";
}

// Appends the template files under `dir` (recursively, sorted) to `files`; problems go to `errors`.
// A directory that does not exist contributes nothing and is not an error.
void ListTemplateFiles(const std::string& dir, std::vector<std::string>& files, std::vector<Status>& errors) {
  std::error_code ec;
  fs::file_status st = fs::status(dir, ec);
  if (!fs::exists(st)) return;
  if (!fs::is_directory(st)) {
    errors.push_back(Status::InvalidArgument("prompt directory " + dir + " is not a directory"));
    return;
  }
  size_t first = files.size();
  fs::recursive_directory_iterator it(dir, fs::directory_options::skip_permission_denied, ec);
  if (ec) {
    errors.push_back(Status::Internal("prompt directory " + dir + " cannot be listed: " + ec.message()));
    return;
  }
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    const fs::path& p = it->path();
    bool hidden = p.filename().string().starts_with('.');
    std::error_code type_ec;
    if (it->is_directory(type_ec)) {
      if (hidden) it.disable_recursion_pending();  // .git, editor state: never templates.
      continue;
    }
    if (hidden || !IsTemplateFile(p) || !it->is_regular_file(type_ec)) continue;
    files.push_back(p.string());
  }
  if (ec) {
    errors.push_back(Status::Internal("prompt directory " + dir + " cannot be listed: " + ec.message()));
  }
  std::sort(files.begin() + static_cast<std::ptrdiff_t>(first), files.end());
}

// Reads just enough of `path` to learn its id; the template itself is compiled later, by Get.
ScannedFile ScanFile(const std::string& path) {
  ScannedFile f{fs::path(path).stem().string(), path, Status::Ok()};
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    // Same message as PromptTemplate::FromFile, so the error does not depend on when it was found.
    f.error = Status::NotFound("prompt template " + path + " cannot be read");
    return f;
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    YAML::Node root = YAML::Load(text.str());
    if (root.IsMap()) {
      YAML::Node meta = root["metadata"];
      if (meta.IsMap()) {
        YAML::Node id = meta["id"];
        if (id.IsScalar() && !id.Scalar().empty()) {
          f.id = id.Scalar();
          return f;
        }
      }
    }
  } catch (const std::exception& e) {  // YAML::Exception, or bad_alloc on a huge file.
    f.error = Status::InvalidArgument("schema_invalid: " + path + ": not valid YAML: " + e.what());
    return f;
  }
  // No usable metadata.id: let the real loader say what is wrong, in its own words.
  Result<PromptTemplate> loaded = PromptTemplate::FromYaml(text.str(), path);
  if (loaded.ok()) {
    f.id = loaded->id();  // An id the loader accepts but we did not read as text (e.g. a number).
  } else {
    f.error = loaded.status();
  }
  return f;
}

std::string Join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) out += (i == 0 ? "" : std::string(sep)) + parts[i];
  return out;
}

}  // namespace

PromptLibrary::PromptLibrary(std::vector<std::string> directories, PromptLibraryOptions options)
    : directories_(std::move(directories)), options_(options) {}

void PromptLibrary::EnsureIndexLocked() {
  if (index_ready_) return;
  std::set<std::string> ids;
  for (const std::string& dir : directories_) {
    std::vector<std::string> files;
    ListTemplateFiles(dir, files, errors_);
    std::map<std::string, std::vector<std::string>> declared;  // id → files in this directory.
    std::map<std::string, ScannedFile> broken;                 // file stem → first broken file.
    for (const std::string& file : files) {
      ScannedFile f = ScanFile(file);
      if (f.error.ok()) {
        declared[f.id].push_back(f.path);
      } else {
        errors_.push_back(f.error);
        broken.try_emplace(f.id, std::move(f));
      }
    }
    for (const auto& [id, paths] : declared) {
      ids.insert(id);
      IndexEntry entry{paths.front(), Status::Ok()};
      if (paths.size() > 1) {
        entry.error = Status::InvalidArgument("prompt id '" + id + "' is declared by " + std::to_string(paths.size()) +
                                              " files in " + dir + ": " + Join(paths, ", ") + "; keep one");
        errors_.push_back(entry.error);
      }
      index_.try_emplace(id, std::move(entry));  // An earlier directory keeps its entry: it overrides.
    }
    for (auto& [stem, f] : broken) {
      if (declared.count(stem) != 0) continue;  // A file in the same directory declares the id: it wins.
      index_.try_emplace(stem, IndexEntry{f.path, f.error});
    }
  }
  ids_.assign(ids.begin(), ids.end());
  index_ready_ = true;
}

Status PromptLibrary::NotFound(std::string_view id) const {
  if (directories_.empty()) return Status::NotFound("prompt '" + std::string(id) + "' not found: no directories configured");
  std::vector<std::string> dirs;
  for (const std::string& d : directories_) {
    std::error_code ec;
    dirs.push_back(fs::is_directory(d, ec) ? d : d + " (missing)");
  }
  return Status::NotFound("prompt '" + std::string(id) + "' not found in " + Join(dirs, ", ") +
                          " (searched *.yaml and *.yml recursively for metadata.id)");
}

std::optional<PromptLibrary::FileStamp> PromptLibrary::Stat(const std::string& path) {
  std::error_code ec;
  FileStamp stamp;
  stamp.mtime = fs::last_write_time(path, ec);
  if (ec) return std::nullopt;
  stamp.size = fs::file_size(path, ec);
  if (ec) return std::nullopt;
  return stamp;
}

Result<std::shared_ptr<const PromptTemplate>> PromptLibrary::Get(std::string_view id) {
  std::string path;
  uint64_t generation = 0;
  std::optional<CacheEntry> cached;
  {
    std::lock_guard<std::mutex> lock(mu_);
    EnsureIndexLocked();
    if (auto c = cache_.find(id); c != cache_.end()) {
      if (!options_.check_mtime) return c->second.prompt;
      cached = c->second;
    }
    auto e = index_.find(id);
    if (e == index_.end()) return NotFound(id);
    if (!e->second.error.ok()) return e->second.error;
    path = e->second.path;
    generation = generation_;
  }
  // Stat before reading: an edit made while the file is read then shows as a change on the next check.
  std::optional<FileStamp> stamp = Stat(path);
  if (cached && stamp && cached->path == path && cached->stamp == *stamp) return cached->prompt;

  Result<PromptTemplate> loaded = PromptTemplate::FromFile(path);
  if (!loaded.ok()) return loaded.status();
  if (loaded->id() != id) {
    return Status::FailedPrecondition("prompt '" + std::string(id) + "': " + path + " now declares id '" +
                                      loaded->id() + "'; Clear() rescans the directories");
  }
  auto prompt = std::make_shared<const PromptTemplate>(std::move(loaded).value());

  std::lock_guard<std::mutex> lock(mu_);
  if (generation != generation_) return prompt;  // Invalidated or cleared meanwhile: serve, do not cache.
  CacheEntry entry{prompt, path, stamp.value_or(FileStamp{})};
  auto [it, inserted] = cache_.try_emplace(std::string(id), entry);
  if (inserted) return prompt;
  // Another caller loaded it meanwhile: share its pointer unless ours is of a newer file.
  if (!options_.check_mtime || (it->second.path == path && it->second.stamp == entry.stamp)) return it->second.prompt;
  it->second = std::move(entry);
  return prompt;
}

Result<std::string> PromptLibrary::Render(std::string_view id, const Value& vars) {
  Result<std::shared_ptr<const PromptTemplate>> prompt = Get(id);
  if (!prompt.ok()) return prompt.status();
  return (*prompt)->Render(vars);
}

void PromptLibrary::Invalidate(std::string_view id) {
  std::lock_guard<std::mutex> lock(mu_);
  if (auto c = cache_.find(id); c != cache_.end()) cache_.erase(c);
  ++generation_;
}

void PromptLibrary::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  cache_.clear();
  index_.clear();
  ids_.clear();
  errors_.clear();
  index_ready_ = false;
  ++generation_;
}

std::vector<std::string> PromptLibrary::Ids() {
  std::lock_guard<std::mutex> lock(mu_);
  EnsureIndexLocked();
  return ids_;
}

std::vector<Status> PromptLibrary::Errors() {
  std::lock_guard<std::mutex> lock(mu_);
  EnsureIndexLocked();
  return errors_;
}

}  // namespace strata::prompt
