// Engine operations on a Markdown tree carried in memory (ExportFiles, ImportFiles): what a server sends and
// receives instead of a path. The engine writes it through a private scratch directory of its own choosing.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>

#include "engine_impl.h"
#include "guard.h"
#include "strata/json/json_writer.h"

namespace strata {

using engine_internal::Guard;

namespace {

namespace fs = std::filesystem;

// A private directory under <data>/tmp (on PostgreSQL or read-only data: under the system's temporary
// directory), removed with everything in it when destroyed.
class ScratchDir {
 public:
  static Result<ScratchDir> Make(const std::string& data_dir, bool read_only) {
    static std::atomic<uint64_t> counter{0};
    std::error_code ec;
    // On PostgreSQL there is no data directory, and a read-only one cannot be written: a directory of this
    // user's in the system's temporary one, which must be its own (another user could otherwise read or
    // swap what is exported through it).
    bool pg = pg::IsPostgresUrl(data_dir) || read_only;
    fs::path base = pg ? fs::temp_directory_path() / ("strata-scratch-" + std::to_string(::geteuid()))
                       : fs::path(data_dir) / "tmp";
    fs::create_directories(base, ec);
    if (pg && !ec) {
      struct stat st {};
      if (::lstat(base.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) || st.st_uid != ::geteuid()) {
        std::fprintf(stderr, "strata: the scratch directory %s is not this user's own\n", base.c_str());
        return Status::PermissionDenied("the scratch directory is not this user's own (the log says where)");
      }
      fs::permissions(base, fs::perms::owner_all, fs::perm_options::replace, ec);
    }
    static const uint64_t salt = std::random_device{}() * 0x9E3779B97F4A7C15ULL;
    fs::path dir = base / ("tree-" + std::to_string(::getpid()) + "-" + std::to_string(salt ^ ++counter));
    if (ec || !fs::create_directory(dir, ec) || ec) {
      // The place is the operator's business: the log says where, an error only what.
      std::fprintf(stderr, "strata: cannot create a scratch directory in %s: %s\n", base.c_str(), ec.message().c_str());
      return Status::Internal("cannot create a scratch directory: " + ec.message());
    }
    fs::permissions(dir, fs::perms::owner_all, fs::perm_options::replace, ec);  // Exports are private.
    return ScratchDir(dir.string());
  }
  ScratchDir(ScratchDir&& other) noexcept : path_(std::exchange(other.path_, "")) {}
  ScratchDir& operator=(ScratchDir&&) = delete;
  ~ScratchDir() {
    std::error_code ec;
    if (!path_.empty()) fs::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

 private:
  explicit ScratchDir(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// The regular files under `root`, paths relative and sorted; at most `max_bytes` in all.
Result<std::vector<TreeFile>> ReadTree(const std::string& root, size_t max_bytes) {
  std::vector<std::string> paths;
  std::error_code ec;
  if (!fs::exists(root, ec)) return std::vector<TreeFile>();
  for (fs::recursive_directory_iterator it(root, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->is_regular_file(ec)) paths.push_back(fs::relative(it->path(), root, ec).generic_string());
  }
  if (ec) return Status::Internal("reading the export: " + ec.message());
  std::sort(paths.begin(), paths.end());
  std::vector<TreeFile> out;
  size_t total = 0;
  for (const std::string& rel : paths) {
    std::ifstream in(fs::path(root) / rel, std::ios::binary);
    std::string content((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    total += content.size();
    if (total > max_bytes) {
      return Status::ResourceExhausted("the export is larger than " + std::to_string(max_bytes >> 20) +
                                       " MiB; export a smaller subtree");
    }
    out.push_back({rel, std::move(content)});
  }
  return out;
}

// Writes `files` under `root`. Paths must be relative, without "." or ".." segments, empty segments,
// backslashes or control characters.
Status WriteTree(std::span<const TreeFile> files, const std::string& root) {
  for (size_t i = 0; i < files.size(); ++i) {
    std::string where = "files[" + std::to_string(i) + "]";
    const std::string& rel = files[i].path;
    bool bad = rel.empty() || rel.size() > 1024 || rel.front() == '/' || rel.back() == '/';
    for (unsigned char ch : rel) bad = bad || ch < 0x20 || ch == 0x7f || ch == '\\';
    for (size_t start = 0; !bad && start <= rel.size();) {
      size_t slash = rel.find('/', start);
      std::string_view segment(rel.data() + start, (slash == std::string::npos ? rel.size() : slash) - start);
      bad = segment.empty() || segment == "." || segment == "..";
      if (slash == std::string::npos) break;
      start = slash + 1;
    }
    if (bad) return Status::InvalidArgument(where + ".path " + json::QuoteForError(rel, 120) + " must be a plain relative path");
    fs::path target = fs::path(root) / rel;
    std::error_code ec;
    fs::create_directories(target.parent_path(), ec);
    if (ec) {
      return Status::InvalidArgument(where + ".path " + json::QuoteForError(rel, 120) +
                                     " cannot be made (a file of the tree stands where a directory of it would): " +
                                     ec.message());
    }
    if (fs::exists(target, ec)) {
      return Status::InvalidArgument(where + ".path " + json::QuoteForError(rel, 120) + " is given twice");
    }
    std::ofstream out(target, std::ios::binary);
    out << files[i].content;
    if (!out) return Status::InvalidArgument(where + ".path " + json::QuoteForError(rel, 120) + " cannot be written");
  }
  return Status::Ok();
}

}  // namespace

Result<ExportedTree> Engine::ExportFiles(std::string_view uri, size_t max_bytes) {
  return Guard("export", [&]() -> Result<ExportedTree> {
    STRATA_ASSIGN_OR_RETURN(ScratchDir scratch, ScratchDir::Make(impl_->options.data_dir, impl_->options.read_only));
    ExportedTree out;
    STRATA_ASSIGN_OR_RETURN(out.report, Export(uri, scratch.path() + "/tree"));
    STRATA_ASSIGN_OR_RETURN(out.files, ReadTree(scratch.path() + "/tree", max_bytes));
    return out;
  });
}

Result<memory::ImportReport> Engine::ImportFiles(std::span<const TreeFile> files, std::string_view uri) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "import"));
  return Guard("import", [&]() -> Result<memory::ImportReport> {
    STRATA_ASSIGN_OR_RETURN(ScratchDir scratch, ScratchDir::Make(impl_->options.data_dir, impl_->options.read_only));
    STRATA_RETURN_IF_ERROR(WriteTree(files, scratch.path() + "/tree"));
    return Import(scratch.path() + "/tree", uri);
  });
}

Result<ingest::AddReport> Engine::AddResources(std::span<const std::string> paths, std::string_view uri,
                                               const ingest::AddOptions& options, const ingest::WalkOptions& walk) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "add"));
  return Guard("add", [&]() -> Result<ingest::AddReport> {
    if (paths.empty()) return Status::InvalidArgument("add: no path given");
    ingest::AddReport report;
    STRATA_ASSIGN_OR_RETURN(std::vector<ingest::SourceFile> files, ingest::WalkPaths(paths, walk, &report));
    STRATA_ASSIGN_OR_RETURN(memory::Uri root, memory::Uri::Parse(uri));
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * store, impl_->Store());
    STRATA_RETURN_IF_ERROR(ingest::AddFiles(*store, root, files, options, &report));
    return report;
  });
}

Result<ingest::AddReport> Engine::AddResourceFiles(std::span<const ingest::SourceFile> files, std::string_view uri,
                                                   const ingest::AddOptions& options) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "add"));
  return Guard("add", [&]() -> Result<ingest::AddReport> {
    STRATA_ASSIGN_OR_RETURN(memory::Uri root, memory::Uri::Parse(uri));
    // Carried files name no place on this machine: only their bytes are read.
    for (const ingest::SourceFile& f : files) {
      if (!f.disk.empty()) return Status::InvalidArgument("add: " + f.path + " names a file on disk");
    }
    ingest::AddReport report;
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * store, impl_->Store());
    STRATA_RETURN_IF_ERROR(ingest::AddFiles(*store, root, files, options, &report));
    return report;
  });
}

Result<std::unique_ptr<Engine>> Engine::OpenAccount(std::string_view account) const {
  return Guard("open account", [&]() -> Result<std::unique_ptr<Engine>> {
    STRATA_RETURN_IF_ERROR(memory::ValidateScopeId(account, "account"));
    EngineOptions o = impl_->options;
    if (account != "default") {
      if (impl_->postgres) {
        // Each account's tables live in a schema of its own in the one database.
        std::string schema = pg::SchemaFor(account);
        if (!o.read_only) STRATA_RETURN_IF_ERROR(pg::EnsureSchema(o.data_dir, schema));
        o.data_dir = pg::WithSchema(o.data_dir, schema);
      } else {
        o.data_dir = o.data_dir + "/accounts/" + std::string(account);
      }
    }
    return Engine::Open(std::move(o));
  });
}

Result<KeyStore*> Engine::keys() {
  std::lock_guard lock(impl_->open_mu);
  if (!impl_->keys) {
    if (impl_->postgres) {
      STRATA_ASSIGN_OR_RETURN(impl_->keys, OpenPgKeyStore(impl_->options.data_dir, impl_->options.read_only));
    } else {
      if (!impl_->options.read_only) {
        std::error_code ec;
        fs::create_directories(impl_->options.data_dir, ec);
      }
      STRATA_ASSIGN_OR_RETURN(impl_->keys, OpenKeyStore(impl_->Path("keys.db"), impl_->options.read_only));
    }
  }
  return impl_->keys.get();
}

}  // namespace strata
