#include "strata/log/linear_storage.h"

#include "record_format.h"
#include "strata/message/message_json.h"

namespace strata {

Result<bool> MemoryLinearStorage::Restore() {
  if (!messages_.empty()) return Status::FailedPrecondition("the storage is already modified");
  return false;
}

Status MemoryLinearStorage::AppendMessage(const Message& message) {
  messages_.push_back(message);
  return Status::Ok();
}

Status MemoryLinearStorage::MarkTokenCount(int64_t token_count) {
  STRATA_RETURN_IF_ERROR(record_format::CheckTokenCount(token_count));
  token_count_ = token_count;
  return Status::Ok();
}

JsonlLinearStorage::JsonlLinearStorage(std::string path, JsonlLinearStorageOptions options)
    : path_(std::move(path)), options_(options) {
  if (options_.fs == nullptr) options_.fs = PosixFileSystem();
  if (options_.clock == nullptr) options_.clock = SystemClock();
}

JsonlLinearStorage::~JsonlLinearStorage() { (void)Close(); }

Result<bool> JsonlLinearStorage::Restore() {
  if (!messages_.empty()) return Status::FailedPrecondition("the storage " + path_ + " is already modified");
  STRATA_ASSIGN_OR_RETURN(bool exists, options_.fs->FileExists(path_));
  if (!exists) return false;
  auto visit = [this](const LogLine&, LogRecord& record) -> Status {
    if (record.kind == LogRecord::Kind::kUsage) {
      token_count_ = record.value;
    } else if (record.kind == LogRecord::Kind::kMessage) {
      messages_.push_back(std::move(record.message));
    }
    return Status::Ok();
  };
  STRATA_ASSIGN_OR_RETURN(summary_, ScanLog(options_.fs, path_, LogFormat::kLinear, visit));
  tail_checked_ = false;
  return summary_.size > 0;
}

Status JsonlLinearStorage::Write(const std::string& line) {
  if (!writer_) {
    STRATA_ASSIGN_OR_RETURN(writer_, LogWriter::Open(options_.fs, path_, options_.durability, options_.clock));
    if (!tail_checked_ && writer_->size() != summary_.size) {
      // Never restored, or changed since the scan (another writer may have repaired and extended it):
      // rescan under the lock so only a tail that is torn now is ever cut.
      STRATA_ASSIGN_OR_RETURN(summary_, ScanLog(options_.fs, path_, LogFormat::kLinear, nullptr));
    }
  }
  if (!tail_checked_) {
    if (summary_.torn_tail) {
      STRATA_RETURN_IF_ERROR(record_format::SaveTornTail(options_.fs, path_, summary_.torn_tail->offset,
                                                         writer_->size() - summary_.torn_tail->offset));
      STRATA_RETURN_IF_ERROR(writer_->Truncate(summary_.torn_tail->offset));
    } else if (summary_.missing_final_newline) {
      STRATA_RETURN_IF_ERROR(writer_->Append("\n"));
    }
    tail_checked_ = true;
  }
  return writer_->Append(line);
}

Status JsonlLinearStorage::AppendMessage(const Message& message) {
  std::string bad = FindInvalidUtf8(message);
  if (!bad.empty()) return Status::InvalidArgument("message: " + bad + " is not valid UTF-8");
  std::string line;
  AppendMessageJson(message, &line);
  line.push_back('\n');
  STRATA_RETURN_IF_ERROR(Write(line));
  messages_.push_back(message);
  return Status::Ok();
}

Status JsonlLinearStorage::MarkTokenCount(int64_t token_count) {
  STRATA_RETURN_IF_ERROR(record_format::CheckTokenCount(token_count));
  STRATA_RETURN_IF_ERROR(Write(record_format::LinearUsageLine(token_count)));
  token_count_ = token_count;
  return Status::Ok();
}

Status JsonlLinearStorage::Close() {
  if (!writer_) return Status::Ok();
  Status s = writer_->Close();
  writer_.reset();
  return s;
}

}  // namespace strata
