// In-memory file systems for tests: MemoryFileSystem, and FaultInjectionFileSystem which adds failed
// fsyncs, torn writes and crashes that drop what was never made durable.
//
// The model follows the durability contract in file_system.h: each file (inode) has its current bytes and
// its durable bytes (as of its last Sync); each directory has its current names and its durable names (as of
// its last SyncDirectory). SimulateCrash() turns durable state into current state, so a test can check
// exactly what a real power loss could leave behind.
//
// Thread safety: all methods are safe to call concurrently; handles are not.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "strata/util/file_system.h"

namespace strata {

class MemoryFileSystem : public FileSystem {
 public:
  MemoryFileSystem();
  ~MemoryFileSystem() override;

  Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) override;
  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) override;
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                        WritableFileOptions options) override;
  Result<bool> FileExists(const std::string& path) override;
  Result<uint64_t> GetFileSize(const std::string& path) override;
  Result<uint64_t> GetFileId(const std::string& path) override;
  Status RenameFile(const std::string& from, const std::string& to) override;
  Status LinkFile(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Result<std::vector<std::string>> ListDirectory(const std::string& dir) override;
  Status CreateDirectories(const std::string& dir) override;
  Status SyncDirectory(const std::string& dir) override;

  // Test helpers. Each returns/sets the current bytes of `path` directly (no durability involved, except
  // SetFileDurably, which also makes the bytes and the name durable).
  Result<std::string> GetContents(const std::string& path);
  void SetFileDurably(const std::string& path, std::string_view data);

  // Returns the number of successful WritableFile::Sync calls so far.
  int sync_count() const;

  struct Node;  // One inode; public only so handles in the .cc can name it.

 protected:
  // Hooks for FaultInjectionFileSystem, called with the lock held.
  // Returns how many of `n` bytes a write may store; fewer means a torn write that then fails.
  virtual size_t AllowWrite(const std::string& path, size_t n) { (void)path; return n; }
  // Returns a non-OK status to make this Sync fail.
  virtual Status CheckSync(const std::string& path) { (void)path; return Status::Ok(); }

  // Replaces current state by durable state. `keep_unsynced(path, n)` may keep a prefix of the `n` unsynced
  // bytes that were appended after the last Sync (a crash in the middle of writeback).
  void CrashLocked(const std::function<size_t(const std::string&, size_t)>& keep_unsynced);

  mutable std::mutex mu_;

 private:
  friend class MemoryWritableFile;
  std::map<std::string, std::shared_ptr<Node>> files_;    // Current names. Guarded by mu_.
  std::map<std::string, std::shared_ptr<Node>> durable_;  // Names as of the last SyncDirectory.
  std::set<std::string> dirs_;                            // Guarded by mu_.
  int sync_count_ = 0;                                    // Guarded by mu_.
};

class FaultInjectionFileSystem final : public MemoryFileSystem {
 public:
  // Makes the next `n` Sync calls fail (like an EIO from fdatasync). Counting applies to every file.
  void FailNextSyncs(int n);
  // Makes the sync (file or directory) that comes `n` syncs from now fail (0 = the next one), once.
  void FailSyncAt(int n);
  // Lets only `bytes` more bytes be written in total; the write that crosses the limit stores a prefix
  // (torn write) and fails, and every later write fails. Negative: unlimited (the default).
  void SetWriteBudget(int64_t bytes);
  // Simulates a power loss: every name and byte that was not made durable is gone, except that
  // `keep_unsynced(path, n)` bytes of each file's unsynced appended tail may survive. Open handles must have
  // been destroyed; locks are released.
  void SimulateCrash(const std::function<size_t(const std::string&, size_t)>& keep_unsynced = nullptr);

 protected:
  size_t AllowWrite(const std::string& path, size_t n) override;
  Status CheckSync(const std::string& path) override;

 private:
  int failing_syncs_ = 0;      // Guarded by mu_.
  int fail_sync_at_ = -1;      // Guarded by mu_.
  int64_t write_budget_ = -1;  // Guarded by mu_.
};

}  // namespace strata
