// POSIX implementation of the FileSystem seam.
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "strata/util/file_system.h"
#include "strata/util/path.h"

namespace strata {
namespace {

Status ErrnoStatus(std::string_view what, const std::string& path, int err) {
  std::string msg(what);
  msg += " ";
  msg += path;
  msg += ": ";
  msg += std::strerror(err);
  switch (err) {
    case ENOENT: return Status::NotFound(std::move(msg));
    case EEXIST: return Status::AlreadyExists(std::move(msg));
    case EACCES:
    case EPERM:
    case EROFS: return Status::FailedPrecondition(std::move(msg));
    case ENOSPC:
    case EDQUOT:
    case EMFILE:
    case ENFILE: return Status::ResourceExhausted(std::move(msg));
    case EISDIR:
    case ENOTDIR:
    case ENAMETOOLONG:
    case EINVAL: return Status::InvalidArgument(std::move(msg));
    case EWOULDBLOCK: return Status::Unavailable(std::move(msg));
    case EIO: return Status::DataLoss(std::move(msg));
    default: return Status::Internal(std::move(msg));
  }
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(std::string path, int fd) : WritableFile(std::move(path)), fd_(fd) {}
  ~PosixWritableFile() override {
    if (fd_ >= 0) ::close(fd_);  // Also releases the flock.
  }

  Status Append(std::string_view data) override {
    if (fd_ < 0) return Status::FailedPrecondition("append to closed file " + path());
    while (!data.empty()) {
      ssize_t n = ::write(fd_, data.data(), data.size());
      if (n < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("write", path(), errno);
      }
      data.remove_prefix(static_cast<size_t>(n));
    }
    return Status::Ok();
  }

  Status Sync() override {
    if (fd_ < 0) return Status::FailedPrecondition("sync of closed file " + path());
    if (::fdatasync(fd_) != 0) {
      Status s = ErrnoStatus("fdatasync", path(), errno);
      return Status::DataLoss(s.message());
    }
    return Status::Ok();
  }

  Status Truncate(uint64_t size) override {
    if (fd_ < 0) return Status::FailedPrecondition("truncate of closed file " + path());
    if (::ftruncate(fd_, static_cast<off_t>(size)) != 0) return ErrnoStatus("ftruncate", path(), errno);
    return Status::Ok();
  }

  Status Close() override {
    if (fd_ < 0) return Status::FailedPrecondition("file already closed: " + path());
    int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) return ErrnoStatus("close", path(), errno);
    return Status::Ok();
  }

  int fd() const { return fd_; }

 private:
  int fd_;
};

class PosixSequentialFile final : public SequentialFile {
 public:
  PosixSequentialFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixSequentialFile() override { ::close(fd_); }
  Result<size_t> Read(char* buf, size_t n) override {
    while (true) {
      ssize_t got = ::read(fd_, buf, n);
      if (got >= 0) return static_cast<size_t>(got);
      if (errno != EINTR) return ErrnoStatus("read", path_, errno);
    }
  }

 private:
  std::string path_;
  int fd_;
};

class PosixRandomAccessFile final : public RandomAccessFile {
 public:
  PosixRandomAccessFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {}
  ~PosixRandomAccessFile() override { ::close(fd_); }
  Result<size_t> ReadAt(uint64_t offset, char* buf, size_t n) const override {
    size_t total = 0;
    while (total < n) {
      ssize_t got = ::pread(fd_, buf + total, n - total, static_cast<off_t>(offset + total));
      if (got < 0) {
        if (errno == EINTR) continue;
        return ErrnoStatus("pread", path_, errno);
      }
      if (got == 0) break;
      total += static_cast<size_t>(got);
    }
    return total;
  }

 private:
  std::string path_;
  int fd_;
};

class PosixFileLock final : public FileLock {
 public:
  explicit PosixFileLock(int fd) : fd_(fd) {}
  ~PosixFileLock() override { ::close(fd_); }  // Releases the flock.
  PosixFileLock(const PosixFileLock&) = delete;  // Owns the descriptor.
  PosixFileLock& operator=(const PosixFileLock&) = delete;

 private:
  int fd_;
};

class PosixFileSystemImpl final : public FileSystem {
 public:
  Result<std::unique_ptr<FileLock>> LockFile(const std::string& path, std::chrono::milliseconds wait) override {
    auto deadline = std::chrono::steady_clock::now() + wait;
    auto pause = std::chrono::microseconds(200);
    auto timed_out = [&] {
      return Status::Unavailable(path + " stayed locked by another process for " + std::to_string(wait.count()) +
                                 " ms; try again");
    };
    bool reopened = false;
    for (;;) {
      int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
      if (fd < 0 && (errno == EACCES || errno == EROFS)) {
        // A directory this process may only read: lock an existing file read-only (flock does not care);
        // where none exists and none can be made, nobody without write access could exclude anyone either.
        fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT) return std::make_unique<FileLock>();
      }
      if (fd < 0) return ErrnoStatus("open", path, errno);
      while (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        if (err == EINTR) continue;
        if (err != EWOULDBLOCK) {
          ::close(fd);
          return ErrnoStatus("flock", path, err);
        }
        if (std::chrono::steady_clock::now() >= deadline) {
          ::close(fd);
          return timed_out();
        }
        std::this_thread::sleep_for(pause);
        pause = std::min<std::chrono::microseconds>(pause * 2, std::chrono::milliseconds(20));
      }
      // The lock is on the file that was opened, which the path may no longer name: the holder removed it
      // (a session deleted) and another made a new one there (the session made again under its id) and
      // locked that. Holding the old file excludes nobody: open the path again.
      struct stat held, named;
      if (::fstat(fd, &held) == 0 && ::stat(path.c_str(), &named) == 0 && held.st_dev == named.st_dev &&
          held.st_ino == named.st_ino) {
        return std::unique_ptr<FileLock>(new PosixFileLock(fd));
      }
      ::close(fd);
      // Once at least, whatever the deadline: nobody held the file this one replaced.
      if (reopened && std::chrono::steady_clock::now() >= deadline) return timed_out();
      reopened = true;
    }
  }

  Result<std::unique_ptr<SequentialFile>> NewSequentialFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open", path, errno);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return std::unique_ptr<SequentialFile>(new PosixSequentialFile(path, fd));
  }

  Result<std::unique_ptr<RandomAccessFile>> NewRandomAccessFile(const std::string& path) override {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open", path, errno);
    return std::unique_ptr<RandomAccessFile>(new PosixRandomAccessFile(path, fd));
  }

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                        WritableFileOptions options) override {
    int flags = O_WRONLY | O_CREAT | O_CLOEXEC;
    switch (options.mode) {
      case WritableFileOptions::Mode::kAppend: flags |= O_APPEND; break;
      case WritableFileOptions::Mode::kTruncate: flags |= O_TRUNC; break;
      case WritableFileOptions::Mode::kCreateNew: flags |= O_EXCL; break;
    }
    // A lock must be on the file that the path names *after* we hold it: another process may have renamed
    // a new file over the path between our open() and flock(). Retry until both agree.
    for (int attempt = 0; attempt < 16; ++attempt) {
      int fd = ::open(path.c_str(), flags, 0644);
      if (fd < 0) {
        if (errno == EEXIST) return Status::AlreadyExists("file already exists: " + path);
        return ErrnoStatus("open", path, errno);
      }
      if (!options.lock) return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
      if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        ::close(fd);
        if (err == EWOULDBLOCK) {
          return Status::Unavailable(path + " is locked by another writer (another strata process or "
                                            "ContextLog has it open); retry when it has finished");
        }
        return ErrnoStatus("flock", path, err);
      }
      struct stat by_fd, by_name;
      if (::fstat(fd, &by_fd) == 0 && ::stat(path.c_str(), &by_name) == 0 && by_fd.st_ino == by_name.st_ino &&
          by_fd.st_dev == by_name.st_dev) {
        return std::unique_ptr<WritableFile>(new PosixWritableFile(path, fd));
      }
      ::close(fd);  // Replaced under us; lock the file that is there now.
      flags &= ~O_TRUNC;
    }
    return Status::Unavailable("could not lock " + path + ": it keeps being replaced by another process");
  }

  Result<bool> FileExists(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) == 0) {
      if (S_ISREG(st.st_mode)) return true;
      // A directory read as missing made `context show DIR` an empty context, and a FIFO blocked an append.
      return Status::FailedPrecondition(path + " is not a regular file (" +
                                        (S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a device or socket") + ")");
    }
    if (errno == ENOENT || errno == ENOTDIR) return false;
    return ErrnoStatus("stat", path, errno);
  }

  Result<uint64_t> GetFileSize(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat", path, errno);
    return static_cast<uint64_t>(st.st_size);
  }

  Result<uint64_t> GetFileId(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus("stat", path, errno);
    return static_cast<uint64_t>(st.st_ino) ^ (static_cast<uint64_t>(st.st_dev) << 48);
  }

  Status RenameFile(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) return ErrnoStatus("rename to " + to + " from", from, errno);
    return Status::Ok();
  }

  Status LinkFile(const std::string& from, const std::string& to) override {
    if (::link(from.c_str(), to.c_str()) != 0) {
      if (errno == EEXIST) return Status::AlreadyExists("file already exists: " + to);
      return ErrnoStatus("link to " + to + " from", from, errno);
    }
    return Status::Ok();
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus("unlink", path, errno);
    return Status::Ok();
  }

  Result<std::vector<std::string>> ListDirectory(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return ErrnoStatus("opendir", dir, errno);
    std::vector<std::string> names;
    while (struct dirent* entry = ::readdir(d)) {
      std::string_view name(entry->d_name);
      if (name == "." || name == "..") continue;
      names.emplace_back(name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

  Status CreateDirectories(const std::string& dir) override {
    if (dir.empty() || dir == "." || dir == "/") return Status::Ok();
    struct stat st;
    if (::stat(dir.c_str(), &st) == 0) {
      if (S_ISDIR(st.st_mode)) return Status::Ok();
      return Status::InvalidArgument("not a directory: " + dir);
    }
    STRATA_RETURN_IF_ERROR(CreateDirectories(Dirname(dir)));
    if (::mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST) return ErrnoStatus("mkdir", dir, errno);
    return Status::Ok();
  }

  Status SyncDirectory(const std::string& dir) override {
    int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return ErrnoStatus("open directory", dir, errno);
    int rc = ::fsync(fd);
    int err = errno;
    ::close(fd);
    if (rc != 0) return Status::DataLoss(ErrnoStatus("fsync directory", dir, err).message());
    return Status::Ok();
  }

  Status CopyRange(const std::string& src, uint64_t offset, uint64_t length, WritableFile* dst) override {
    auto* posix_dst = dynamic_cast<PosixWritableFile*>(dst);
    if (posix_dst == nullptr || posix_dst->fd() < 0) return FileSystem::CopyRange(src, offset, length, dst);
    int in = ::open(src.c_str(), O_RDONLY | O_CLOEXEC);
    if (in < 0) return ErrnoStatus("open", src, errno);
    // copy_file_range copies inside the kernel, and shares extents (reflink) on file systems that can
    // (XFS, btrfs). It refuses O_APPEND destinations; those, and old kernels, take the read/write path.
    loff_t in_off = static_cast<loff_t>(offset);
    while (length > 0) {
      ssize_t n = ::copy_file_range(in, &in_off, posix_dst->fd(), nullptr, static_cast<size_t>(length), 0);
      if (n > 0) {
        length -= static_cast<uint64_t>(n);
        continue;
      }
      if (n == 0) {
        ::close(in);
        return Status::DataLoss("copy from " + src + ": file ended before offset " + std::to_string(in_off + length));
      }
      if (errno == EINTR) continue;
      break;  // EXDEV, EBADF (O_APPEND), EINVAL, ENOSYS, EOPNOTSUPP: fall back below.
    }
    ::close(in);
    if (length == 0) return Status::Ok();
    return FileSystem::CopyRange(src, static_cast<uint64_t>(in_off), length, dst);
  }
};

}  // namespace

FileSystem* PosixFileSystem() {
  static PosixFileSystemImpl* fs = new PosixFileSystemImpl();  // Never destroyed.
  return fs;
}

}  // namespace strata
