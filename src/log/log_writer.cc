#include "strata/log/log_writer.h"

#include <chrono>

#include "strata/util/path.h"

namespace strata {

std::string_view DurabilityName(Durability d) {
  switch (d) {
    case Durability::kNone: return "none";
    case Durability::kBatch: return "batch";
    case Durability::kAlways: return "always";
  }
  return "always";
}

Result<Durability> ParseDurability(std::string_view name) {
  if (name == "none") return Durability::kNone;
  if (name == "batch") return Durability::kBatch;
  if (name == "always") return Durability::kAlways;
  return Status::InvalidArgument("unknown durability policy \"" + std::string(name) +
                                 "\" (expected none, batch or always)");
}

Result<std::unique_ptr<LogWriter>> LogWriter::Open(FileSystem* fs, const std::string& path,
                                                   DurabilityOptions options, Clock* clock) {
  STRATA_ASSIGN_OR_RETURN(bool existed, fs->FileExists(path));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file,
                          fs->NewWritableFile(path, {.mode = WritableFileOptions::Mode::kAppend, .lock = true}));
  if (!existed) STRATA_RETURN_IF_ERROR(fs->SyncDirectory(Dirname(path)));
  STRATA_ASSIGN_OR_RETURN(uint64_t size, fs->GetFileSize(path));
  return Adopt(std::move(file), path, size, options, clock);
}

std::unique_ptr<LogWriter> LogWriter::Adopt(std::unique_ptr<WritableFile> file, std::string display_path,
                                            uint64_t size, DurabilityOptions options, Clock* clock) {
  return std::unique_ptr<LogWriter>(new LogWriter(std::move(file), std::move(display_path), size, options, clock));
}

LogWriter::LogWriter(std::unique_ptr<WritableFile> file, std::string path, uint64_t size,
                     DurabilityOptions options, Clock* clock)
    : path_(std::move(path)), options_(options), clock_(clock ? clock : SystemClock()), file_(std::move(file)),
      size_(size) {
  if (options_.policy == Durability::kBatch && options_.batch_background_sync) {
    background_ = std::thread([this] { BackgroundLoop(); });
  }
}

LogWriter::~LogWriter() { (void)Close(); }

Status LogWriter::Poison(Status cause) {
  poison_ = Status::FailedPrecondition("log writer for " + path_ +
                                       " is poisoned by an earlier failure; reopen and restore the log (" +
                                       cause.ToString() + ")");
  return cause;
}

Status LogWriter::RollBackLocked(uint64_t good_size, const Status& cause) {
  // A write that failed part-way (ENOSPC, EIO) may have left a partial record: cut the file back to the
  // last complete line so the log stays a sequence of whole lines and later appends are not glued to it.
  Status cut = file_->Truncate(good_size);
  if (cut.ok()) cut = file_->Sync();
  size_ = good_size;
  if (!cut.ok()) {
    return Poison(Status(cause.code(), cause.message() + "; cutting the partial record failed too: " + cut.message()));
  }
  return cause;
}

Status LogWriter::FlushLocked() {
  if (buffer_.empty()) return Status::Ok();
  uint64_t good_size = size_ - buffer_.size();
  Status s = file_->Append(buffer_);
  buffer_.clear();
  // Buffered lines were acknowledged without a durability promise; losing them poisons the writer.
  if (!s.ok()) return Poison(RollBackLocked(good_size, s));
  return Status::Ok();
}

Status LogWriter::SyncLocked() {
  STRATA_RETURN_IF_ERROR(FlushLocked());
  if (unsynced_bytes_ == 0) return Status::Ok();
  Status s = file_->Sync();
  if (!s.ok()) return Poison(s);
  unsynced_bytes_ = 0;
  return Status::Ok();
}

Status LogWriter::Append(std::string_view lines) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!poison_.ok()) return poison_;
  if (!file_) return Status::FailedPrecondition("log writer for " + path_ + " is closed");
  if (options_.policy == Durability::kNone && options_.write_buffer_bytes > 0) {
    buffer_.append(lines);
    size_ += lines.size();
    unsynced_bytes_ += lines.size();
    return buffer_.size() >= options_.write_buffer_bytes ? FlushLocked() : Status::Ok();
  }
  Status s = file_->Append(lines);
  // Nothing of this call was acknowledged: once the partial record is cut off, the log is as it was and
  // the writer stays usable (a full disk may have room again).
  if (!s.ok()) return RollBackLocked(size_, s);
  size_ += lines.size();
  bool window_opened = unsynced_bytes_ == 0;
  if (window_opened) first_unsynced_micros_ = clock_->NowMicros();
  unsynced_bytes_ += lines.size();
  switch (options_.policy) {
    case Durability::kNone: return Status::Ok();
    case Durability::kAlways: return SyncLocked();
    case Durability::kBatch:
      if (unsynced_bytes_ >= options_.batch_max_bytes ||
          clock_->NowMicros() - first_unsynced_micros_ >= options_.batch_window_micros) {
        return SyncLocked();
      }
      lock.unlock();
      if (window_opened) cv_.notify_one();  // The flusher only needs to learn when a window opens.
      return Status::Ok();
  }
  return Status::Ok();
}

Status LogWriter::Sync() {
  std::lock_guard<std::mutex> lock(mu_);
  if (!poison_.ok()) return poison_;
  if (!file_) return Status::FailedPrecondition("log writer for " + path_ + " is closed");
  STRATA_RETURN_IF_ERROR(FlushLocked());
  if (unsynced_bytes_ == 0) {
    // Still sync: the caller may have written through another path (e.g. a truncation).
    Status s = file_->Sync();
    if (!s.ok()) return Poison(s);
    return Status::Ok();
  }
  return SyncLocked();
}

Status LogWriter::Truncate(uint64_t size) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!poison_.ok()) return poison_;
  if (!file_) return Status::FailedPrecondition("log writer for " + path_ + " is closed");
  STRATA_RETURN_IF_ERROR(FlushLocked());
  Status s = file_->Truncate(size);
  if (!s.ok()) return Poison(s);
  s = file_->Sync();
  if (!s.ok()) return Poison(s);
  size_ = size;
  unsynced_bytes_ = 0;
  return Status::Ok();
}

Status LogWriter::Close() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  std::call_once(join_once_, [this] {
    if (background_.joinable()) background_.join();
  });
  std::lock_guard<std::mutex> lock(mu_);
  if (!file_) return poison_;
  Status result;
  if (poison_.ok()) result = options_.policy == Durability::kNone ? FlushLocked() : SyncLocked();
  Status closed = file_->Close();
  file_.reset();
  if (!poison_.ok()) return poison_;
  return result.ok() ? closed : result;
}

void LogWriter::MarkPoisoned(const Status& cause) {
  std::lock_guard<std::mutex> lock(mu_);
  if (poison_.ok()) (void)Poison(cause);
}

uint64_t LogWriter::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return size_;
}

bool LogWriter::poisoned() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !poison_.ok();
}

void LogWriter::BackgroundLoop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    cv_.wait(lock, [&] { return stop_ || (unsynced_bytes_ > 0 && poison_.ok() && file_); });
    if (stop_) break;
    int64_t due = first_unsynced_micros_ + options_.batch_window_micros - clock_->NowMicros();
    if (due > 0) {
      cv_.wait_for(lock, std::chrono::microseconds(due), [&] { return stop_; });
      if (stop_) break;
    }
    if (unsynced_bytes_ > 0 && poison_.ok() && file_) (void)SyncLocked();
  }
}

}  // namespace strata
