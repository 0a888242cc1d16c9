#include "strata/util/file_system.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>

#include "strata/util/path.h"

namespace strata {

Result<std::unique_ptr<FileLock>> FileSystem::LockFile(const std::string& path, std::chrono::milliseconds wait) {
  (void)path;
  (void)wait;
  return std::make_unique<FileLock>();
}

Status FileSystem::CopyRange(const std::string& src, uint64_t offset, uint64_t length, WritableFile* dst) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<RandomAccessFile> in, NewRandomAccessFile(src));
  std::string buf(std::min<uint64_t>(length, 1 << 20), '\0');
  while (length > 0) {
    size_t want = static_cast<size_t>(std::min<uint64_t>(length, buf.size()));
    STRATA_ASSIGN_OR_RETURN(size_t got, in->ReadAt(offset, buf.data(), want));
    if (got == 0) return Status::DataLoss("copy from " + src + ": file ended before offset " +
                                          std::to_string(offset + length));
    STRATA_RETURN_IF_ERROR(dst->Append(std::string_view(buf.data(), got)));
    offset += got;
    length -= got;
  }
  return Status::Ok();
}

Result<std::string> FileSystem::ReadFileToString(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, NewSequentialFile(path));
  std::string out;
  char buf[1 << 16];
  while (true) {
    STRATA_ASSIGN_OR_RETURN(size_t n, file->Read(buf, sizeof(buf)));
    if (n == 0) break;
    out.append(buf, n);
  }
  return out;
}

Status FileSystem::WriteFileAtomically(const std::string& path, std::string_view data) {
  // A name of its own per call (process and counter): two writers of the same file, in one process or two,
  // never share a temporary file; the last rename wins, and each reader sees one whole version.
  static std::atomic<uint64_t> counter{0};
  std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(counter++);
  Status written = [&]() -> Status {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                            NewWritableFile(tmp, {.mode = WritableFileOptions::Mode::kTruncate}));
    STRATA_RETURN_IF_ERROR(file->Append(data));
    STRATA_RETURN_IF_ERROR(file->Sync());
    STRATA_RETURN_IF_ERROR(file->Close());
    return RenameFile(tmp, path);
  }();
  if (!written.ok()) {
    (void)RemoveFile(tmp);  // Best effort: nothing half-written is left behind.
    return written;
  }
  return SyncDirectory(Dirname(path));
}

}  // namespace strata
