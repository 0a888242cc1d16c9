// FileSystem: the operating-system seam for everything Strata stores in files.
//
// Production code receives a FileSystem* (default: PosixFileSystem()) so tests can run in memory and inject
// faults (memory_file_system.h). Handles are not thread-safe; a FileSystem is safe to share between threads.
//
// Durability contract (what the in-memory model enforces and what POSIX gives):
//   - bytes appended to a file survive a crash only after WritableFile::Sync();
//   - a created, renamed, linked or removed name survives a crash only after SyncDirectory() of its directory.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/util/status.h"

namespace strata {

// An open file being written. Not thread-safe. Closing (or destroying) releases its lock, if any.
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  WritableFile(const WritableFile&) = delete;  // Owns an OS handle.
  WritableFile& operator=(const WritableFile&) = delete;

  // Appends all of `data` at the end of the file. A failure may leave a prefix of `data` written.
  virtual Status Append(std::string_view data) = 0;
  // Makes every byte appended so far durable (fdatasync). A failure means durability is unknown.
  virtual Status Sync() = 0;
  // Cuts the file to `size` bytes; later appends continue at the new end.
  virtual Status Truncate(uint64_t size) = 0;
  // Releases the handle (and its lock). Further calls fail with kFailedPrecondition.
  virtual Status Close() = 0;
  // Returns the path the file was opened with.
  const std::string& path() const { return path_; }

 protected:
  explicit WritableFile(std::string path) : path_(std::move(path)) {}

 private:
  std::string path_;
};

// A file read front to back.
class SequentialFile {
 public:
  virtual ~SequentialFile() = default;
  // Reads up to `n` bytes into `buf`; returns the count, 0 at end of file.
  virtual Result<size_t> Read(char* buf, size_t n) = 0;
};

// A file read at arbitrary offsets.
class RandomAccessFile {
 public:
  virtual ~RandomAccessFile() = default;
  // Reads up to `n` bytes at `offset`; returns the count (short only at end of file).
  virtual Result<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const = 0;
};

struct WritableFileOptions {
  enum class Mode {
    kAppend,     // Create if missing, keep existing bytes, write at the end.
    kTruncate,   // Create if missing, discard existing bytes.
    kCreateNew,  // Fail with kAlreadyExists if the file exists (atomic name reservation).
  };
  Mode mode = Mode::kAppend;
  // Takes an exclusive advisory lock held until Close(). If another handle (in this or another process)
  // holds it, opening fails with kUnavailable naming the path. The lock follows the file, not the name:
  // a file renamed over the locked path is a different file.
  bool lock = false;
};

// An exclusive advisory lock on a file, released when destroyed.
class FileLock {
 public:
  virtual ~FileLock() = default;
};

class FileSystem {
 public:
  virtual ~FileSystem() = default;

  // Takes an exclusive advisory lock on `path` (created empty if missing), waiting up to `wait` while
  // another holder (another process, or another handle in this one) has it; kUnavailable naming the path
  // when the wait runs out. The POSIX file system uses flock(2); the default, for file systems that live
  // inside one process, returns a lock that excludes nothing (callers serialise their own threads).
  virtual Result<std::unique_ptr<FileLock>> LockFile(const std::string& path, std::chrono::milliseconds wait);

  virtual Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) = 0;
  virtual Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) = 0;
  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                                WritableFileOptions options) = 0;
  // Returns whether `path` names an existing regular file; kFailedPrecondition when it names something else
  // (a directory, FIFO, socket or device), which no caller may read as a file or as missing.
  virtual Result<bool> FileExists(const std::string& path) = 0;
  virtual Result<uint64_t> GetFileSize(const std::string& path) = 0;
  // Returns an identifier of the file `path` names now (its inode): equal ids mean the same file, so a
  // file replaced by rename gets a new id.
  virtual Result<uint64_t> GetFileId(const std::string& path) = 0;
  // Renames `from` to `to`, atomically replacing `to` if it exists.
  virtual Status RenameFile(const std::string& from, const std::string& to) = 0;
  // Makes `to` a second name of `from` (hard link). Fails with kAlreadyExists if `to` exists.
  virtual Status LinkFile(const std::string& from, const std::string& to) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;
  // Returns the names (not paths) of the files in `dir`, sorted.
  virtual Result<std::vector<std::string>> ListDirectory(const std::string& dir) = 0;
  virtual Status CreateDirectories(const std::string& dir) = 0;
  // Makes the names in `dir` durable (fsync of the directory).
  virtual Status SyncDirectory(const std::string& dir) = 0;
  // Appends bytes [offset, offset+length) of the file at `src` to `dst`. The default reads and appends;
  // the POSIX file system copies inside the kernel.
  virtual Status CopyRange(const std::string& src, uint64_t offset, uint64_t length, WritableFile* dst);

  // Returns the whole file.
  Result<std::string> ReadFileToString(const std::string& path);
  // Replaces `path` with `data` atomically and durably: temp file, fsync, rename, fsync of the directory.
  Status WriteFileAtomically(const std::string& path, std::string_view data);
};

// Returns the process-wide POSIX file system. Never null; never freed.
FileSystem* PosixFileSystem();

}  // namespace strata
