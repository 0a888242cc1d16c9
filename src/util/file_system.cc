#include "strata/util/file_system.h"

#include <algorithm>

#include "strata/util/path.h"

namespace strata {

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
  std::string tmp = path + ".tmp";
  {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                            NewWritableFile(tmp, {.mode = WritableFileOptions::Mode::kTruncate}));
    STRATA_RETURN_IF_ERROR(file->Append(data));
    STRATA_RETURN_IF_ERROR(file->Sync());
    STRATA_RETURN_IF_ERROR(file->Close());
  }
  STRATA_RETURN_IF_ERROR(RenameFile(tmp, path));
  return SyncDirectory(Dirname(path));
}

}  // namespace strata
