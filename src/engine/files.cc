// Engine operations on a Markdown tree carried in memory (ExportFiles, ImportFiles): what a server sends and
// receives instead of a path. The engine writes it through a private scratch directory of its own choosing.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "engine_impl.h"
#include "sqlite_db.h"
#include "guard.h"
#include "strata/json/checked.h"
#include "strata/json/json_writer.h"
#include "strata/llm/ask_json.h"
#include "strata/util/utf8.h"

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
    // As an add of no files is refused (no tree was written: the error named the server's scratch place).
    STRATA_RETURN_IF_ERROR(engine_internal::NotEmpty(uri, "uri"));  // First, as add: before the scratch tree.
    if (files.empty()) return Status::InvalidArgument("\"files\" needs at least 1 item: no file given");
    STRATA_ASSIGN_OR_RETURN(ScratchDir scratch, ScratchDir::Make(impl_->options.data_dir, impl_->options.read_only));
    STRATA_RETURN_IF_ERROR(WriteTree(files, scratch.path() + "/tree"));
    return Import(scratch.path() + "/tree", uri);
  });
}

namespace {

using Json = nlohmann::json;

// Queues a model summary for every file `report` added or updated below `root`.
Status QueueSummaries(memory::ContextStore& store, session::JobQueue& queue, const memory::Uri& root,
                      ingest::AddReport& report) {
  for (const auto* list : {&report.added, &report.updated}) {
    for (const std::string& path : *list) {
      STRATA_ASSIGN_OR_RETURN(memory::Uri uri, root.Join(path));
      STRATA_ASSIGN_OR_RETURN(memory::Node node, store.Stat(uri));
      Json meta = json::ParseOrDiscard<Json>(node.metadata);
      const Json* ingest = json::Field(meta, "ingest");
      std::string hash = ingest != nullptr ? json::StringOr(*ingest, "hash") : "";
      // The content and how it was cut: the same bytes cut at another size are other chunks.
      const int64_t unrecorded = ingest::ExtractOptions{}.chunk_tokens;  // Files added before it was recorded.
      int64_t chunk_tokens = ingest != nullptr ? json::IntOr(*ingest, "chunk_tokens", unrecorded) : unrecorded;
      Json payload = {{"uri", uri.str()}, {"hash", hash}, {"chunk_tokens", chunk_tokens}};
      STRATA_RETURN_IF_ERROR(queue.Enqueue(ingest::kSummaryJobKind, uri.str(), payload.dump()).status());
      ++report.queued;
    }
  }
  return Status::Ok();
}

// The files added to the store, then (options.summarize) a summary queued for each that changed.
Status AddAndQueue(Engine::Impl& impl, const memory::Uri& root, std::span<const ingest::SourceFile> files,
                   const ingest::AddOptions& options, ingest::AddReport& report) {
  STRATA_ASSIGN_OR_RETURN(memory::ContextStore * store, impl.Store());
  STRATA_RETURN_IF_ERROR(ingest::AddFiles(*store, root, files, options, &report));
  if (!options.summarize) return Status::Ok();
  STRATA_ASSIGN_OR_RETURN(session::JobQueue * queue, impl.Queue());
  return QueueSummaries(*store, *queue, root, report);
}

}  // namespace

namespace engine_internal {

Status SummarizeResource(memory::ContextStore& store, llm::ChatProvider& model, prompt::PromptLibrary& prompts,
                         const session::Job& job, const Canceller* cancel,
                         const std::function<Result<std::unique_ptr<session::OwnerLocks::Held>>()>& hold_ingest) {
  Json payload = json::ParseOrDiscard<Json>(job.payload);
  Result<memory::Uri> uri = memory::Uri::Parse(json::StringOr(payload, "uri"));
  if (!uri.ok()) return Status::DataLoss("summary job " + std::to_string(job.id) + ": its payload names no URI");
  const std::string hash = json::StringOr(payload, "hash");
  // Jobs queued before the payload named the cut have none: their content's hash alone decides.
  const Json* cut = json::Field(payload, "chunk_tokens");
  const std::optional<int64_t> chunk_tokens =
      cut != nullptr && cut->is_number_integer() ? std::optional<int64_t>(cut->get<int64_t>()) : std::nullopt;
  // The file as it is now: gone, or replaced since the job was queued (other content, or the same cut
  // at another size), means nothing to do.
  auto current = [&]() -> Result<std::optional<std::pair<memory::Node, Json>>> {
    Result<memory::Node> node = store.Stat(*uri);
    if (!node.ok() && node.status().code() == StatusCode::kNotFound) return std::optional<std::pair<memory::Node, Json>>();
    STRATA_RETURN_IF_ERROR(node.status());
    Json meta = json::ParseOrDiscard<Json>(node->metadata);
    const Json* ingest = json::Field(meta, "ingest");
    if (ingest == nullptr || !ingest->is_object() || json::StringOr(*ingest, "hash") != hash ||
        (chunk_tokens && json::IntOr(*ingest, "chunk_tokens", ingest::ExtractOptions{}.chunk_tokens) != *chunk_tokens)) {
      return std::optional<std::pair<memory::Node, Json>>();
    }
    return std::optional<std::pair<memory::Node, Json>>(std::make_pair(std::move(*node), std::move(meta)));
  };
  STRATA_ASSIGN_OR_RETURN(auto file, current());
  if (!file) return Status::Ok();
  const Json& ingest = file->second["ingest"];
  STRATA_ASSIGN_OR_RETURN(std::vector<memory::Node> listed, store.List(*uri));
  // The chunks in order (their names begin with their place, but a file may have more than 9,999).
  std::vector<std::pair<int64_t, memory::Node>> chunks;
  for (memory::Node& n : listed) {
    if (n.is_dir) continue;
    Json m = json::ParseOrDiscard<Json>(n.metadata);
    const Json* c = json::Field(m, "ingest");
    chunks.emplace_back(c != nullptr ? json::IntOr(*c, "chunk", 0) : 0, std::move(n));
  }
  std::stable_sort(chunks.begin(), chunks.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  constexpr size_t kShown = 40, kChunkBytes = 1200, kTotalBytes = 32000;
  Json shown = Json::array();
  size_t total = 0;
  for (size_t i = 0; i < chunks.size() && i < kShown && total < kTotalBytes; ++i) {
    STRATA_ASSIGN_OR_RETURN(std::string text, store.Read(chunks[i].second.uri, memory::Level::kContent));
    text = Utf8Cut(std::move(text), kChunkBytes);
    total += text.size();
    Json m = json::ParseOrDiscard<Json>(chunks[i].second.metadata);
    const Json* c = json::Field(m, "ingest");
    shown.push_back({{"index", i}, {"name", c != nullptr ? json::StringOr(*c, "name") : ""}, {"text", text}});
  }
  Json vars = {{"path", json::StringOr(ingest, "source")},
               {"kind", json::StringOr(ingest, "kind")},
               {"title", json::StringOr(ingest, "title")},
               {"chunks", shown},
               {"more", static_cast<int64_t>(chunks.size() - shown.size())}};
  STRATA_ASSIGN_OR_RETURN(prompt::Value value, prompt::Value::FromJson(vars.dump(-1, ' ', false, Json::error_handler_t::replace)));
  STRATA_ASSIGN_OR_RETURN(std::string prompt, prompts.Render("resource.summarize", value));
  std::string abstract_text, overview;
  std::vector<std::pair<size_t, std::string>> chunk_abstracts;
  auto check = [&](std::string_view text) -> Status {
    chunk_abstracts.clear();
    Json j = json::ParseOrDiscard<Json>(text);
    const Json* a = json::Field(j, "abstract");
    const Json* o = json::Field(j, "overview");
    if (a == nullptr || !a->is_string() || a->get_ref<const std::string&>().find_first_not_of(" \n") == std::string::npos) {
      return Status::InvalidArgument("\"abstract\" must be a sentence (a non-empty string)");
    }
    if (o == nullptr || !o->is_string()) return Status::InvalidArgument("\"overview\" must be a string");
    abstract_text = Utf8Cut(a->get<std::string>(), 300);
    overview = Utf8Cut(o->get<std::string>(), 3000);
    const Json* list = json::Field(j, "chunks");
    if (list == nullptr || list->is_null()) return Status::Ok();
    if (!list->is_array()) return Status::InvalidArgument("\"chunks\" must be an array");
    for (const Json& c : *list) {
      const Json* index = json::Field(c, "index");
      const Json* line = json::Field(c, "abstract");
      if (index == nullptr || !index->is_number_integer() || line == nullptr || !line->is_string()) {
        return Status::InvalidArgument("each of \"chunks\" must be {\"index\": integer, \"abstract\": string}");
      }
      int64_t i = index->get<int64_t>();
      if (i < 0 || i >= static_cast<int64_t>(shown.size()) || line->get_ref<const std::string&>().empty()) continue;
      chunk_abstracts.emplace_back(static_cast<size_t>(i), Utf8Cut(line->get<std::string>(), 300));
    }
    return Status::Ok();
  };
  STRATA_RETURN_IF_ERROR(
      llm::AskForJson(model, prompt, "resource summary", check, {.attempts = 2, .cancel = cancel}, nullptr).status());
  // Written only if the file is still the one summarised (a re-add may have replaced it meanwhile), with
  // no add in between (in any process): one could replace the file between the look and the writes.
  STRATA_ASSIGN_OR_RETURN(auto held, hold_ingest());
  STRATA_ASSIGN_OR_RETURN(auto still, current());
  if (!still) return Status::Ok();
  Json meta = still->second;
  meta["ingest"]["summary"] = "model";
  STRATA_RETURN_IF_ERROR(store.Mkdir(*uri, {.abstract_text = abstract_text,
                                           .overview = overview,
                                           .metadata = meta.dump(-1, ' ', false, Json::error_handler_t::replace)}));
  for (const auto& [i, line] : chunk_abstracts) {
    const memory::Uri& chunk = chunks[i].second.uri;
    STRATA_ASSIGN_OR_RETURN(std::string content, store.Read(chunk, memory::Level::kContent));
    STRATA_RETURN_IF_ERROR(store.Write(chunk, content, {.abstract_text = line}));
  }
  // The folders above it list their children's abstracts: this one's is new.
  STRATA_ASSIGN_OR_RETURN(memory::Uri root, memory::Uri::Parse(json::StringOr(meta["ingest"], "root", uri->Parent().str())));
  std::vector<std::string> folders;
  for (memory::Uri d = uri->Parent(); d.str().size() >= root.str().size(); d = d.Parent()) {
    folders.push_back(d.str());
    if (d.str() == root.str() || d.is_root()) break;
  }
  return ingest::DescribeFolders(store, root, folders);
}

}  // namespace engine_internal

Result<ingest::AddReport> Engine::AddResources(std::span<const std::string> paths, std::string_view uri,
                                               const ingest::AddOptions& options, const ingest::WalkOptions& walk) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "add"));
  return Guard("add", [&]() -> Result<ingest::AddReport> {
    STRATA_RETURN_IF_ERROR(engine_internal::NotEmpty(uri, "uri"));  // Before the ingest lock and the walk.
    if (paths.empty()) return Status::InvalidArgument("add: no path given");
    STRATA_ASSIGN_OR_RETURN(auto held, impl_->HoldIngest());
    ingest::AddReport report;
    STRATA_ASSIGN_OR_RETURN(std::vector<ingest::SourceFile> files, ingest::WalkPaths(paths, walk, &report));
    STRATA_ASSIGN_OR_RETURN(memory::Uri root, memory::Uri::Parse(uri));
    ingest::AddOptions add = options;
    add.max_file_bytes = walk.max_file_bytes;
    STRATA_RETURN_IF_ERROR(AddAndQueue(*impl_, root, files, add, report));
    return report;
  });
}

Result<ingest::AddReport> Engine::AddResourceFiles(std::span<const ingest::SourceFile> files, std::string_view uri,
                                                   const ingest::AddOptions& options) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(impl_->options, "add"));
  return Guard("add", [&]() -> Result<ingest::AddReport> {
    STRATA_RETURN_IF_ERROR(engine_internal::NotEmpty(uri, "uri"));
    STRATA_ASSIGN_OR_RETURN(memory::Uri root, memory::Uri::Parse(uri));
    // Carried files name no place on this machine: only their bytes are read.
    for (const ingest::SourceFile& f : files) {
      if (!f.disk.empty()) return Status::InvalidArgument("add: " + f.path + " names a file on disk");
    }
    STRATA_ASSIGN_OR_RETURN(auto held, impl_->HoldIngest());
    ingest::AddReport report;
    STRATA_RETURN_IF_ERROR(AddAndQueue(*impl_, root, files, options, report));
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

Result<bool> Engine::AccountExists(std::string_view account) {
  return Guard("account", [&]() -> Result<bool> {
    STRATA_RETURN_IF_ERROR(memory::ValidateScopeId(account, "account"));
    if (account == "default") return true;
    STRATA_ASSIGN_OR_RETURN(KeyStore * keys, this->keys());
    STRATA_ASSIGN_OR_RETURN(std::vector<KeyInfo> issued, keys->List(std::string(account)));
    if (!issued.empty()) return true;
    if (impl_->postgres) {
      STRATA_ASSIGN_OR_RETURN(std::unique_ptr<pg::Conn> conn, pg::Conn::Connect(impl_->options.data_dir));
      STRATA_ASSIGN_OR_RETURN(pg::Rows rows, conn->Exec("SELECT 1 FROM pg_namespace WHERE nspname = $1",
                                                         {pg::SchemaFor(account)}));
      return rows.size() > 0;
    }
    std::error_code ec;
    return fs::is_directory(impl_->options.data_dir + "/accounts/" + std::string(account), ec);
  });
}

Result<std::vector<std::string>> Engine::Accounts() {
  return Guard("accounts", [&]() -> Result<std::vector<std::string>> {
    std::set<std::string> out;
    STRATA_ASSIGN_OR_RETURN(KeyStore * keys, this->keys());
    STRATA_ASSIGN_OR_RETURN(std::vector<KeyInfo> issued, keys->List());
    for (const KeyInfo& k : issued) out.insert(k.account);
    if (impl_->postgres) {
      STRATA_ASSIGN_OR_RETURN(std::unique_ptr<pg::Conn> conn, pg::Conn::Connect(impl_->options.data_dir));
      STRATA_ASSIGN_OR_RETURN(pg::Rows rows, conn->Exec("SELECT nspname FROM pg_namespace WHERE nspname LIKE 'strata\\_%'"));
      for (int i = 0; i < rows.size(); ++i) {
        STRATA_ASSIGN_OR_RETURN(std::string schema, rows.Text(i, 0));
        std::string account = schema.substr(7);
        // Only a schema that is its account's: "strata_x<16 hex>" is a hashed name, which is no account's.
        if (memory::ValidateScopeId(account, "account").ok() && pg::SchemaFor(account) == schema &&
            !(account.size() == 17 && account[0] == 'x' &&
              account.find_first_not_of("0123456789abcdef", 1) == std::string::npos)) {
          out.insert(account);
        }
      }
    } else {
      std::error_code ec;
      for (fs::directory_iterator it(impl_->options.data_dir + "/accounts", ec), end; !ec && it != end; it.increment(ec)) {
        std::string name = it->path().filename().string();
        if (it->is_directory(ec) && memory::ValidateScopeId(name, "account").ok()) out.insert(name);
      }
    }
    out.erase("default");
    return std::vector<std::string>(out.begin(), out.end());
  });
}

Result<std::vector<std::string>> Engine::AccountsWithWork() {
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> accounts, Accounts());
  return Guard("accounts with work", [&]() -> Result<std::vector<std::string>> {
    std::vector<std::string> out;
    if (accounts.empty()) return out;
    if (impl_->postgres) {
      STRATA_ASSIGN_OR_RETURN(std::unique_ptr<pg::Conn> conn, pg::Conn::Connect(impl_->options.data_dir));
      for (const std::string& account : accounts) {
        // The schema's name is [a-z0-9_] (pg::SchemaFor); an account without a queue yet fails: no work.
        Result<pg::Rows> r = conn->Exec("SELECT 1 FROM \"" + pg::SchemaFor(account) +
                                        "\".jobs WHERE state IN ('pending', 'running') LIMIT 1");
        if (r.ok() && r->size() > 0) out.push_back(account);
      }
      return out;
    }
    for (const std::string& account : accounts) {
      const std::string path = impl_->options.data_dir + "/accounts/" + account + "/queue.db";
      std::error_code ec;
      if (!fs::exists(path, ec)) continue;
      sqlite::Db db;
      if (!db.OpenReadOnly(path).ok()) continue;
      sqlite::Stmt s(db, "SELECT 1 FROM jobs WHERE state IN ('pending', 'running') LIMIT 1");
      Result<bool> row = s.Step();
      if (row.ok() && *row) out.push_back(account);
    }
    return out;
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
