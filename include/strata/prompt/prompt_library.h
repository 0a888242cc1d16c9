// PromptLibrary: prompt templates (prompt_template.h) found by id in an ordered list of directories,
// loaded on first use and cached until invalidated.
//
// Lookup: each directory is scanned recursively for `*.yaml` / `*.yml` files (names starting with '.' are
// skipped, directory symlinks are not followed, a directory that does not exist is skipped). A file's id is
// its `metadata.id`. When several directories declare the same id, the one listed first wins, so a user's
// directory placed before the shipped one overrides shipped templates. Problems are reported lazily, only
// by Get/Render of the id concerned and by Errors(), so one broken file does not break the library:
//   - a file that is not valid YAML or has no `metadata.id` is filed under its file name without extension
//     (`summarize.yaml` → "summarize"); it shadows that id in later directories, so a broken override is
//     reported instead of silently falling back to the shipped template, but a file in the same directory
//     that declares the id wins over it;
//   - two files in one directory declaring the same id make that id an error naming both paths.
// The directory index is built on first use and kept until Clear(). Templates are parsed on first Get and
// cached; errors are not cached (the next Get retries). With `check_mtime`, every Get compares the file's
// modification time and size with those seen when it was loaded and reloads when either changed (an edit
// that keeps both within the file system's timestamp granularity is not seen).
//
// Errors keep PromptTemplate's messages and kinds (PromptErrorKind works on them); an unknown id is
// kNotFound naming the directories searched.
//
// Not a trust boundary: templates are read with the process's permissions and rendered as written.
//
// Thread safety: all methods may be called concurrently. The returned templates are immutable and stay
// valid after Invalidate/Clear (callers share ownership). The scan runs under the library's lock (concurrent
// first callers wait for it); template files are parsed outside it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "strata/prompt/prompt_template.h"
#include "strata/prompt/value.h"
#include "strata/util/status.h"

namespace strata::prompt {

struct PromptLibraryOptions {
  // When true, Get stats the template's file on every call and reloads it when its modification time or
  // size changed since it was loaded. When false (default), a cached template is served until Invalidate
  // or Clear.
  bool check_mtime = false;
};

class PromptLibrary {
 public:
  // Creates a library over `directories`, highest priority first. Nothing is read until first use.
  explicit PromptLibrary(std::vector<std::string> directories, PromptLibraryOptions options = {});
  PromptLibrary(const PromptLibrary&) = delete;  // Owns a mutex and a cache shared by its callers.
  PromptLibrary& operator=(const PromptLibrary&) = delete;

  // Returns the template with `id`, loading and caching it on first use; later calls return the same
  // pointer until Invalidate/Clear (or, with check_mtime, until the file changes). Concurrent first calls
  // may each parse the file; one result is cached and served from then on. Errors: kNotFound for an
  // unknown id (naming the directories searched) or a file removed since the scan; the file's load error
  // (kInvalidArgument "schema_invalid: <path>: ...", "template_error: ...") for a broken file; a duplicate-id
  // error naming both paths; kFailedPrecondition when the file now declares another id (Clear rescans).
  Result<std::shared_ptr<const PromptTemplate>> Get(std::string_view id);

  // Returns Get(id)->Render(vars), or the error of either step unchanged.
  Result<std::string> Render(std::string_view id, const Value& vars);

  // Drops the cached template for `id` (if any); the next Get re-reads its file. Keeps the index.
  void Invalidate(std::string_view id);

  // Drops every cached template and the index; the next call rescans the directories.
  void Clear();

  // Returns every id declared by a file's metadata.id in any directory, sorted, scanning first if needed.
  std::vector<std::string> Ids();

  // Returns the problems the scan finds, in directory order, scanning first if needed: files that are not
  // YAML or declare no metadata.id, duplicate ids, unreadable directories. A file with a usable id whose
  // template is invalid is only reported by Get/Render of that id.
  std::vector<Status> Errors();

  // Returns the directories searched, highest priority first.
  const std::vector<std::string>& directories() const { return directories_; }

 private:
  // What a file looked like when it was loaded; compared under check_mtime.
  struct FileStamp {
    std::filesystem::file_time_type mtime{};
    std::uintmax_t size = 0;
    bool operator==(const FileStamp&) const = default;
  };
  struct IndexEntry {
    std::string path;  // The file that provides the id (for errors: the first file involved).
    Status error;      // Not OK: Get reports this instead of loading.
  };
  struct CacheEntry {
    std::shared_ptr<const PromptTemplate> prompt;
    std::string path;
    FileStamp stamp;
  };

  // Builds index_, ids_ and errors_ from the directories unless index_ready_. Requires mu_.
  void EnsureIndexLocked();
  // Returns the kNotFound error for `id`.
  Status NotFound(std::string_view id) const;
  // Returns the stamp of `path`, or nullopt when it cannot be stat'ed.
  static std::optional<FileStamp> Stat(const std::string& path);

  const std::vector<std::string> directories_;
  const PromptLibraryOptions options_;

  std::mutex mu_;
  // Guarded by mu_. Invariant: when !index_ready_, index_, ids_ and errors_ are empty.
  bool index_ready_ = false;
  std::map<std::string, IndexEntry, std::less<>> index_;
  std::vector<std::string> ids_;  // Sorted, unique.
  std::vector<Status> errors_;
  std::map<std::string, CacheEntry, std::less<>> cache_;
  // Incremented by Invalidate and Clear; a load that started under an older generation is returned to
  // its caller but not cached, so it cannot resurrect a template that was invalidated while it was read.
  uint64_t generation_ = 0;
};

}  // namespace strata::prompt
