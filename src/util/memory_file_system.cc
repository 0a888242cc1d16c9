#include "strata/util/memory_file_system.h"

#include <algorithm>
#include <cstring>

#include "strata/util/path.h"

namespace strata {

struct MemoryFileSystem::Node {
  std::string data;     // Current bytes.
  std::string durable;  // Bytes as of the last successful Sync.
  bool locked = false;
};

namespace {

using Node = MemoryFileSystem::Node;

class MemorySequentialFile final : public SequentialFile {
 public:
  explicit MemorySequentialFile(std::string data) : data_(std::move(data)) {}
  Result<size_t> Read(char* buf, size_t n) override {
    size_t got = std::min(n, data_.size() - pos_);
    std::memcpy(buf, data_.data() + pos_, got);
    pos_ += got;
    return got;
  }

 private:
  std::string data_;  // A snapshot taken at open: concurrent writers do not disturb a reader.
  size_t pos_ = 0;
};

class MemoryRandomAccessFile final : public RandomAccessFile {
 public:
  explicit MemoryRandomAccessFile(std::string data) : data_(std::move(data)) {}
  Result<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override {
    if (offset >= data_.size()) return size_t{0};
    size_t got = std::min<uint64_t>(n, data_.size() - offset);
    std::memcpy(buf, data_.data() + offset, got);
    return got;
  }

 private:
  std::string data_;
};

}  // namespace

class MemoryWritableFile final : public WritableFile {
 public:
  MemoryWritableFile(MemoryFileSystem* fs, std::string path, std::shared_ptr<Node> node, bool locked)
      : WritableFile(std::move(path)), fs_(fs), node_(std::move(node)), locked_(locked) {}
  ~MemoryWritableFile() override { (void)Close(); }

  Status Append(std::string_view data) override {
    std::lock_guard<std::mutex> lock(fs_->mu_);
    if (!node_) return Status::FailedPrecondition("append to closed file " + path());
    size_t allowed = fs_->AllowWrite(path(), data.size());
    node_->data.append(data.substr(0, allowed));
    if (allowed < data.size()) {
      return Status::ResourceExhausted("write " + path() + ": injected torn write after " +
                                       std::to_string(allowed) + " of " + std::to_string(data.size()) + " bytes");
    }
    return Status::Ok();
  }

  Status Sync() override {
    std::lock_guard<std::mutex> lock(fs_->mu_);
    if (!node_) return Status::FailedPrecondition("sync of closed file " + path());
    Status s = fs_->CheckSync(path());
    if (!s.ok()) return s;
    node_->durable = node_->data;
    ++fs_->sync_count_;
    return Status::Ok();
  }

  Status Truncate(uint64_t size) override {
    std::lock_guard<std::mutex> lock(fs_->mu_);
    if (!node_) return Status::FailedPrecondition("truncate of closed file " + path());
    node_->data.resize(std::min<uint64_t>(size, node_->data.size()));
    return Status::Ok();
  }

  Status Close() override {
    std::lock_guard<std::mutex> lock(fs_->mu_);
    if (!node_) return Status::FailedPrecondition("file already closed: " + path());
    if (locked_) node_->locked = false;
    node_.reset();
    return Status::Ok();
  }

 private:
  MemoryFileSystem* fs_;
  std::shared_ptr<Node> node_;  // Null once closed. The inode outlives renames and removals.
  bool locked_;
};

MemoryFileSystem::MemoryFileSystem() { dirs_.insert("."); dirs_.insert("/"); }
MemoryFileSystem::~MemoryFileSystem() = default;

Result<std::unique_ptr<SequentialFile>> MemoryFileSystem::NewSequentialFile(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound("open " + path + ": No such file or directory");
  return std::unique_ptr<SequentialFile>(new MemorySequentialFile(it->second->data));
}

Result<std::unique_ptr<RandomAccessFile>> MemoryFileSystem::NewRandomAccessFile(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound("open " + path + ": No such file or directory");
  return std::unique_ptr<RandomAccessFile>(new MemoryRandomAccessFile(it->second->data));
}

Result<std::unique_ptr<WritableFile>> MemoryFileSystem::NewWritableFile(const std::string& path,
                                                                        WritableFileOptions options) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dirs_.count(Dirname(path))) return Status::NotFound("open " + path + ": No such file or directory");
  auto it = files_.find(path);
  if (it != files_.end() && options.mode == WritableFileOptions::Mode::kCreateNew) {
    return Status::AlreadyExists("file already exists: " + path);
  }
  std::shared_ptr<Node> node;
  if (it == files_.end()) {
    node = std::make_shared<Node>();
    files_[path] = node;
  } else {
    node = it->second;
  }
  if (options.lock) {
    if (node->locked) {
      return Status::Unavailable(path + " is locked by another writer (another strata process or "
                                        "ContextLog has it open); retry when it has finished");
    }
    node->locked = true;
  }
  if (options.mode == WritableFileOptions::Mode::kTruncate) node->data.clear();
  return std::unique_ptr<WritableFile>(new MemoryWritableFile(this, path, node, options.lock));
}

Result<bool> MemoryFileSystem::FileExists(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  return files_.count(path) > 0;
}

Result<uint64_t> MemoryFileSystem::GetFileSize(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound("stat " + path + ": No such file or directory");
  return static_cast<uint64_t>(it->second->data.size());
}

Result<uint64_t> MemoryFileSystem::GetFileId(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound("stat " + path + ": No such file or directory");
  return static_cast<uint64_t>(reinterpret_cast<uintptr_t>(it->second.get()));
}

Status MemoryFileSystem::RenameFile(const std::string& from, const std::string& to) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(from);
  if (it == files_.end()) return Status::NotFound("rename " + from + ": No such file or directory");
  if (!dirs_.count(Dirname(to))) return Status::NotFound("rename to " + to + ": No such file or directory");
  std::shared_ptr<Node> node = it->second;
  files_.erase(it);
  files_[to] = std::move(node);
  return Status::Ok();
}

Status MemoryFileSystem::LinkFile(const std::string& from, const std::string& to) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(from);
  if (it == files_.end()) return Status::NotFound("link " + from + ": No such file or directory");
  if (files_.count(to)) return Status::AlreadyExists("file already exists: " + to);
  files_[to] = it->second;
  return Status::Ok();
}

Status MemoryFileSystem::RemoveFile(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  if (files_.erase(path) == 0) return Status::NotFound("unlink " + path + ": No such file or directory");
  return Status::Ok();
}

Result<std::vector<std::string>> MemoryFileSystem::ListDirectory(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dirs_.count(dir)) return Status::NotFound("opendir " + dir + ": No such file or directory");
  std::vector<std::string> names;
  for (const auto& [path, node] : files_) {
    if (Dirname(path) == dir) names.push_back(Basename(path));
  }
  return names;
}

Status MemoryFileSystem::CreateDirectories(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string d = dir;
  while (!d.empty() && d != "." && d != "/") {
    dirs_.insert(d);
    d = Dirname(d);
  }
  return Status::Ok();
}

Status MemoryFileSystem::SyncDirectory(const std::string& dir) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!dirs_.count(dir)) return Status::NotFound("open directory " + dir + ": No such file or directory");
  STRATA_RETURN_IF_ERROR(CheckSync(dir));
  for (auto it = durable_.begin(); it != durable_.end();) {
    it = Dirname(it->first) == dir ? durable_.erase(it) : std::next(it);
  }
  for (const auto& [path, node] : files_) {
    if (Dirname(path) == dir) durable_[path] = node;
  }
  return Status::Ok();
}

Result<std::string> MemoryFileSystem::GetContents(const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = files_.find(path);
  if (it == files_.end()) return Status::NotFound("no file " + path);
  return it->second->data;
}

void MemoryFileSystem::SetFileDurably(const std::string& path, std::string_view data) {
  std::lock_guard<std::mutex> lock(mu_);
  std::string d = Dirname(path);
  while (!d.empty() && d != "." && d != "/") {
    dirs_.insert(d);
    d = Dirname(d);
  }
  auto node = std::make_shared<Node>();
  node->data = std::string(data);
  node->durable = node->data;
  files_[path] = node;
  durable_[path] = node;
}

int MemoryFileSystem::sync_count() const {
  std::lock_guard<std::mutex> lock(mu_);
  return sync_count_;
}

void MemoryFileSystem::CrashLocked(const std::function<size_t(const std::string&, size_t)>& keep_unsynced) {
  files_ = durable_;
  std::set<Node*> seen;
  for (const auto& [path, node] : files_) {
    if (!seen.insert(node.get()).second) continue;
    node->locked = false;
    const std::string& cur = node->data;
    if (keep_unsynced && cur.size() > node->durable.size() && cur.compare(0, node->durable.size(), node->durable) == 0) {
      size_t tail = cur.size() - node->durable.size();
      size_t keep = std::min(tail, keep_unsynced(path, tail));
      node->durable.append(cur, node->durable.size(), keep);
    }
    node->data = node->durable;
  }
}

void FaultInjectionFileSystem::FailNextSyncs(int n) {
  std::lock_guard<std::mutex> lock(mu_);
  failing_syncs_ = n;
}

void FaultInjectionFileSystem::FailSyncAt(int n) {
  std::lock_guard<std::mutex> lock(mu_);
  fail_sync_at_ = n;
}

void FaultInjectionFileSystem::SetWriteBudget(int64_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  write_budget_ = bytes;
}

void FaultInjectionFileSystem::SimulateCrash(
    const std::function<size_t(const std::string&, size_t)>& keep_unsynced) {
  std::lock_guard<std::mutex> lock(mu_);
  CrashLocked(keep_unsynced);
  failing_syncs_ = 0;
  fail_sync_at_ = -1;
  write_budget_ = -1;
}

size_t FaultInjectionFileSystem::AllowWrite(const std::string& path, size_t n) {
  (void)path;
  if (write_budget_ < 0) return n;
  size_t allowed = std::min<uint64_t>(n, static_cast<uint64_t>(write_budget_));
  write_budget_ -= static_cast<int64_t>(allowed);
  if (allowed < n) write_budget_ = 0;
  return allowed;
}

Status FaultInjectionFileSystem::CheckSync(const std::string& path) {
  if (fail_sync_at_ >= 0 && fail_sync_at_-- == 0) {
    return Status::DataLoss("fsync " + path + ": Input/output error (injected)");
  }
  if (failing_syncs_ > 0) {
    --failing_syncs_;
    return Status::DataLoss("fdatasync " + path + ": Input/output error (injected)");
  }
  return Status::Ok();
}

}  // namespace strata
