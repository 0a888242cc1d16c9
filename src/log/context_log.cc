#include "strata/log/context_log.h"

#include <algorithm>

#include "record_format.h"
#include "strata/json/json_writer.h"
#include "strata/message/message_json.h"
#include "strata/util/path.h"

namespace strata {

std::unique_ptr<ContextLog> ContextLog::Open(std::string path, ContextLogOptions options) {
  return std::unique_ptr<ContextLog>(new ContextLog(std::move(path), options));
}

ContextLog::ContextLog(std::string path, ContextLogOptions options) : path_(std::move(path)), options_(options) {
  if (options_.fs == nullptr) options_.fs = PosixFileSystem();
  if (options_.clock == nullptr) options_.clock = SystemClock();
  if (options_.estimator == nullptr) options_.estimator = DefaultTokenEstimator();
}

ContextLog::~ContextLog() { (void)Close(); }

Status ContextLog::EnsureLocked() {
  if (options_.read_only) {
    return Status::FailedPrecondition("context " + path_ + " was opened read-only");
  }
  if (!broken_.ok()) return broken_;
  if (writer_) {
    if (writer_->poisoned()) {
      broken_ = Status::FailedPrecondition("context " + path_ + " had a failed write or fsync; its state on disk is " +
                                           "unknown: open a new ContextLog and Restore() it");
      return broken_;
    }
    return Status::Ok();
  }
  STRATA_ASSIGN_OR_RETURN(writer_, LogWriter::Open(options_.fs, path_, options_.durability, options_.clock));
  if (closed_at_) {
    auto id = options_.fs->GetFileId(path_);
    if (!id.ok() || *id != closed_at_->first || writer_->size() != closed_at_->second) {
      writer_.reset();
      broken_ = Status::FailedPrecondition("context " + path_ + " was changed by another writer since this " +
                                           "ContextLog closed it: open a new ContextLog and Restore() it");
      return broken_;
    }
    closed_at_.reset();
  }
  if (!restored_ && writer_->size() > 0) foreign_bytes_ = true;
  return Status::Ok();
}

void ContextLog::ResetState() {
  history_.clear();
  token_count_ = 0;
  pending_begin_ = 0;
  next_checkpoint_id_ = 0;
  system_prompt_.reset();
  checkpoints_.clear();
  prompts_.clear();
  usages_.clear();
  skipped_.clear();
  report_ = RestoreReport();
  torn_tail_.reset();
  missing_newline_ = false;
  InvalidatePending();
}

Status ContextLog::PrepareAppend() {
  STRATA_RETURN_IF_ERROR(EnsureLocked());
  if (foreign_bytes_) {
    return Status::FailedPrecondition("context " + path_ + " already holds " + std::to_string(writer_->size()) +
                                      " bytes that were not restored; call Restore() before writing to it");
  }
  if (torn_tail_) {
    // Keep the torn bytes in a side file before cutting them, so nothing the user wrote is deleted.
    uint64_t size = writer_->size();
    uint64_t torn_len = size > torn_tail_->offset ? size - torn_tail_->offset : 0;
    STRATA_RETURN_IF_ERROR(record_format::SaveTornTail(options_.fs, path_, torn_tail_->offset, torn_len));
    STRATA_RETURN_IF_ERROR(writer_->Truncate(torn_tail_->offset));
    torn_tail_.reset();
  }
  if (missing_newline_) {
    STRATA_RETURN_IF_ERROR(writer_->Append("\n"));
    missing_newline_ = false;
    // A blank last line just ended: it is now a line a revert leaves out.
    if (report_.scan.blank_tail && writer_->size() == report_.scan.blank_tail->first + report_.scan.blank_tail->second + 1) {
      skipped_.emplace_back(report_.scan.blank_tail->first, report_.scan.blank_tail->second + 1);
    }
    report_.scan.blank_tail.reset();
  }
  return Status::Ok();
}

Result<bool> ContextLog::Restore() {
  if (restored_) return Status::FailedPrecondition("context " + path_ + " was already restored");
  if (modified_) return Status::FailedPrecondition("context " + path_ + " is already modified; restore a fresh ContextLog");
  STRATA_ASSIGN_OR_RETURN(bool exists, options_.fs->FileExists(path_));
  if (!exists) {
    restored_ = true;
    return false;
  }
  // Hold the lock while reading so no other writer appends under us.
  if (!options_.read_only) STRATA_RETURN_IF_ERROR(EnsureLocked());
  ResetState();  // WriteSystemPrompt may have run before: the file is the whole truth.

  auto visit = [this](const LogLine& line, LogRecord& record) -> Status {
    switch (record.kind) {
      case LogRecord::Kind::kMessage:
        history_.push_back(std::move(record.message));
        break;
      case LogRecord::Kind::kUsage:
        token_count_ = record.value;
        pending_begin_ = history_.size();
        usages_.push_back(UsageMark{line.offset, history_.size(), record.value, checkpoints_.size()});
        break;
      case LogRecord::Kind::kCheckpoint:
        checkpoints_.push_back(
            CheckpointMark{record.value, line.offset, history_.size(), token_count_, pending_begin_, next_checkpoint_id_});
        next_checkpoint_id_ = record.value + 1;
        break;
      case LogRecord::Kind::kSystemPrompt:
        system_prompt_ = record.text;
        prompts_.push_back(PromptMark{line.offset, std::move(record.text)});
        break;
      case LogRecord::Kind::kUnknownInternal:
        ++report_.unknown_records;
        break;
    }
    return Status::Ok();
  };
  // Reserve for the most messages the file could hold at a realistic minimum line size: capacity that is
  // never used is never touched, so it costs address space, not memory, and it spares the history the
  // repeated reallocation (and page faults) of growing one message at a time.
  STRATA_ASSIGN_OR_RETURN(uint64_t size, options_.fs->GetFileSize(path_));
  history_.reserve(static_cast<size_t>(std::min<uint64_t>(size / 256 + 16, 1u << 20)));
  auto scan = ScanLog(options_.fs, path_, LogFormat::kContext, visit);
  if (!scan.ok()) {
    ResetState();
    return scan.status();
  }
  report_.scan = std::move(*scan);
  skipped_ = report_.scan.skipped;
  restored_ = true;
  foreign_bytes_ = false;
  torn_tail_ = report_.scan.torn_tail;
  missing_newline_ = report_.scan.missing_final_newline && !torn_tail_;
  InvalidatePending();
  return report_.scan.size > 0;
}

Result<ContextReplay> ReplayContext(FileSystem* fs, const std::string& path,
                                    const std::function<Status(const Message&)>& on_message,
                                    const MessageTokenCounter* estimator) {
  if (fs == nullptr) fs = PosixFileSystem();
  if (estimator == nullptr) estimator = DefaultTokenEstimator();
  std::unique_ptr<MessageTokenCounter::Tally> pending = estimator->NewTally();
  // Messages since the last usage mark wait here and are counted only when they pass 16 MiB of lines or
  // the file ends: most of them are followed by a usage mark, and then need no counting at all.
  constexpr size_t kUncountedBytes = 16 << 20;
  std::vector<Message> uncounted;
  size_t uncounted_bytes = 0;
  auto count_uncounted = [&] {
    for (const Message& m : uncounted) pending->Add(m);
    uncounted.clear();
    uncounted_bytes = 0;
  };
  ContextReplay out;
  STRATA_ASSIGN_OR_RETURN(bool exists, fs->FileExists(path));
  if (!exists) return out;
  // The rules of Restore()'s visitor, less the offsets and marks only a writer needs.
  auto visit = [&](const LogLine& line, LogRecord& record) -> Status {
    switch (record.kind) {
      case LogRecord::Kind::kMessage:
        ++out.messages;
        STRATA_RETURN_IF_ERROR(on_message(record.message));
        uncounted.push_back(std::move(record.message));
        uncounted_bytes += line.text.size();
        if (uncounted_bytes > kUncountedBytes) count_uncounted();
        break;
      case LogRecord::Kind::kUsage:
        out.token_count = record.value;
        uncounted.clear();
        uncounted_bytes = 0;
        pending->Reset();
        break;
      case LogRecord::Kind::kCheckpoint:
        out.n_checkpoints = record.value + 1;
        break;
      case LogRecord::Kind::kSystemPrompt:
        out.system_prompt = std::move(record.text);
        break;
      case LogRecord::Kind::kUnknownInternal:
        ++out.report.unknown_records;
        break;
    }
    return Status::Ok();
  };
  STRATA_ASSIGN_OR_RETURN(out.report.scan, ScanLog(fs, path, LogFormat::kContext, visit));
  count_uncounted();
  out.token_count_with_pending = out.token_count + pending->Total();
  return out;
}

namespace {

// Validates `messages` and appends their lines to `*lines`.
// `first` is the caller's index of messages[0], for the error.
Status SerializeMessages(std::span<const Message> messages, std::string* lines, size_t first = 0) {
  for (size_t i = 0; i < messages.size(); ++i) {
    std::string bad = FindInvalidUtf8(messages[i]);
    if (!bad.empty()) {
      return Status::InvalidArgument("message " + std::to_string(first + i) + ": " + bad + " is not valid UTF-8");
    }
    AppendMessageJson(messages[i], lines);
    lines->push_back('\n');
  }
  return Status::Ok();
}

}  // namespace

Status ContextLog::WriteMessages(std::span<const Message> messages) {
  std::string lines;
  STRATA_RETURN_IF_ERROR(SerializeMessages(messages, &lines));
  STRATA_RETURN_IF_ERROR(PrepareAppend());
  STRATA_RETURN_IF_ERROR(writer_->Append(lines));
  modified_ = true;
  InvalidatePending();
  return Status::Ok();
}

Status ContextLog::Append(const Message& message) { return Append(std::span<const Message>(&message, 1)); }

Status ContextLog::Append(std::span<const Message> messages) {
  if (messages.empty()) return Status::Ok();
  if (messages.data() >= history_.data() && messages.data() < history_.data() + history_.size()) {
    // The messages live in history_ itself, which the insert below may reallocate: copy them first.
    return Append(std::vector<Message>(messages.begin(), messages.end()));
  }
  STRATA_RETURN_IF_ERROR(WriteMessages(messages));
  history_.insert(history_.end(), messages.begin(), messages.end());
  return Status::Ok();
}

Status ContextLog::Append(Message&& message) {
  STRATA_RETURN_IF_ERROR(WriteMessages(std::span<const Message>(&message, 1)));
  history_.push_back(std::move(message));
  return Status::Ok();
}

Status ContextLog::Append(std::vector<Message>&& messages) {
  if (messages.empty()) return Status::Ok();
  STRATA_RETURN_IF_ERROR(WriteMessages(messages));
  history_.insert(history_.end(), std::make_move_iterator(messages.begin()), std::make_move_iterator(messages.end()));
  return Status::Ok();
}

Status ContextLog::UpdateTokenCount(int64_t token_count) {
  return AppendWithTokenCount({}, 0, token_count);
}

Status ContextLog::AppendWithTokenCount(std::span<const Message> messages, size_t counted, int64_t token_count) {
  STRATA_RETURN_IF_ERROR(record_format::CheckTokenCount(token_count));
  if (counted > messages.size()) {
    return Status::InvalidArgument("a usage mark after message " + std::to_string(counted) + " of " +
                                   std::to_string(messages.size()));
  }
  // Copies first when the messages live in history_ itself, which the inserts below may reallocate.
  std::vector<Message> copy;
  if (!messages.empty() && messages.data() >= history_.data() && messages.data() < history_.data() + history_.size()) {
    copy.assign(messages.begin(), messages.end());
    messages = copy;
  }
  std::string lines;
  STRATA_RETURN_IF_ERROR(SerializeMessages(messages.first(counted), &lines));
  const uint64_t usage_at = lines.size();
  lines += record_format::UsageLine(token_count);
  STRATA_RETURN_IF_ERROR(SerializeMessages(messages.subspan(counted), &lines, counted));
  STRATA_RETURN_IF_ERROR(PrepareAppend());
  const uint64_t offset = writer_->size() + usage_at;
  STRATA_RETURN_IF_ERROR(writer_->Append(lines));
  history_.insert(history_.end(), messages.begin(), messages.begin() + static_cast<std::ptrdiff_t>(counted));
  usages_.push_back(UsageMark{offset, history_.size(), token_count, checkpoints_.size()});
  token_count_ = token_count;
  pending_begin_ = history_.size();
  history_.insert(history_.end(), messages.begin() + static_cast<std::ptrdiff_t>(counted), messages.end());
  modified_ = true;
  InvalidatePending();
  return Status::Ok();
}

std::vector<ContextLog::UsagePosition> ContextLog::usage_marks() const {
  std::vector<UsagePosition> out;
  out.reserve(usages_.size());
  for (const UsageMark& m : usages_) out.push_back({m.history_size, m.tokens, m.checkpoints_before});
  return out;
}

std::vector<ContextLog::CheckpointPosition> ContextLog::checkpoints() const {
  std::vector<CheckpointPosition> out;
  out.reserve(checkpoints_.size());
  for (const CheckpointMark& m : checkpoints_) out.push_back({m.id, m.history_size});
  return out;
}

Result<int64_t> ContextLog::Checkpoint(bool add_user_message) {
  STRATA_RETURN_IF_ERROR(PrepareAppend());
  int64_t id = next_checkpoint_id_;
  if (id > record_format::kMaxRecordValue) {
    return Status::FailedPrecondition("checkpoint ids are used up: the next would be " + std::to_string(id) +
                                      ", past the largest a log holds (2^53 - 1)");
  }
  std::string lines = record_format::CheckpointLine(id);
  Message marker = Message::User("<system>CHECKPOINT " + std::to_string(id) + "</system>");
  if (add_user_message) {
    AppendMessageJson(marker, &lines);
    lines.push_back('\n');
  }
  uint64_t offset = writer_->size();
  STRATA_RETURN_IF_ERROR(writer_->Append(lines));
  checkpoints_.push_back(CheckpointMark{id, offset, history_.size(), token_count_, pending_begin_, next_checkpoint_id_});
  next_checkpoint_id_ = id + 1;
  if (add_user_message) history_.push_back(std::move(marker));
  modified_ = true;
  InvalidatePending();
  return id;
}

void ContextLog::AdoptSwappedFile(std::unique_ptr<WritableFile> file, uint64_t size, const Status& dir_sync) {
  (void)writer_->Close();  // The old file is complete and synced (or already poisoned).
  writer_ = LogWriter::Adopt(std::move(file), path_, size, options_.durability, options_.clock);
  if (!dir_sync.ok()) {
    // The new file is live but its name may not survive a crash: nothing more may be written on top.
    writer_->MarkPoisoned(dir_sync);
    broken_ = Status::FailedPrecondition("context " + path_ + ": directory sync failed after replacing the file (" +
                                         dir_sync.ToString() + "); open a new ContextLog and Restore() it");
  }
}

Status ContextLog::RotateAndRebuild(uint64_t keep_bytes, bool* swapped, std::string_view append,
                                    std::string* rotation_out,
                                    std::span<const std::pair<uint64_t, uint64_t>> holes) {
  *swapped = false;
  STRATA_RETURN_IF_ERROR(writer_->Sync());
  // 1. Keep the current file under a rotation name: a hard link, so the old bytes are never copied and
  //    there is no moment without a live file.
  STRATA_ASSIGN_OR_RETURN(std::string rotation, record_format::LinkToNextRotation(options_.fs, path_));
  if (rotation_out != nullptr) *rotation_out = rotation;
  // 2. Build the new live file beside it, locked before it becomes visible, then swap it in.
  std::string tmp = path_ + ".tmp";
  auto undo = [&](Status cause) {
    (void)options_.fs->RemoveFile(tmp);
    (void)options_.fs->RemoveFile(rotation);
    return cause;
  };
  auto file = options_.fs->NewWritableFile(tmp, {.mode = WritableFileOptions::Mode::kTruncate, .lock = true});
  if (!file.ok()) return undo(file.status());
  uint64_t kept = 0;
  uint64_t from = 0;
  for (size_t i = 0; i <= holes.size(); ++i) {
    uint64_t to = i < holes.size() ? std::min(holes[i].first, keep_bytes) : keep_bytes;
    if (to > from) {
      Status copied = options_.fs->CopyRange(path_, from, to - from, file->get());
      if (!copied.ok()) return undo(copied);
      kept += to - from;
    }
    if (i < holes.size()) from = std::max(from, std::min(holes[i].first + holes[i].second, keep_bytes));
  }
  if (!append.empty()) {
    Status appended = (*file)->Append(append);
    if (!appended.ok()) return undo(appended);
  }
  Status synced = (*file)->Sync();
  if (!synced.ok()) return undo(synced);
  Status renamed = options_.fs->RenameFile(tmp, path_);
  if (!renamed.ok()) return undo(renamed);
  // From here on the new file is the live one, whatever else fails.
  *swapped = true;
  Status dir_sync = options_.fs->SyncDirectory(Dirname(path_));
  AdoptSwappedFile(std::move(*file), kept + append.size(), dir_sync);
  torn_tail_.reset();
  missing_newline_ = false;
  return dir_sync;
}

Status ContextLog::RevertTo(int64_t id) {
  if (id < 0 || id >= next_checkpoint_id_) {
    return Status::NotFound("checkpoint " + std::to_string(id) + " does not exist in " + path_ + " (it has " +
                            std::to_string(next_checkpoint_id_) + " checkpoint" +
                            (next_checkpoint_id_ == 1 ? "" : "s") + ")");
  }
  auto mark = std::find_if(checkpoints_.begin(), checkpoints_.end(),
                           [id](const CheckpointMark& m) { return m.id == id; });
  if (mark == checkpoints_.end()) {
    return Status::NotFound("checkpoint " + std::to_string(id) + " has no record in " + path_);
  }
  STRATA_RETURN_IF_ERROR(PrepareAppend());
  CheckpointMark target = *mark;
  // Like kimi-cli, the new file holds only the kept prefix's records: blank and damaged lines before the
  // checkpoint stay in the rotation but not in the live file.
  std::vector<std::pair<uint64_t, uint64_t>> holes;
  for (const auto& range : skipped_) {
    if (range.first >= target.offset) break;
    holes.push_back(range);
  }
  bool swapped = false;
  Status rotated = RotateAndRebuild(target.offset, &swapped, {}, nullptr, holes);
  if (!swapped) return rotated;
  skipped_.clear();
  if (!holes.empty()) {
    // Every kept record moves back by the bytes of the holes before it.
    auto shifted = [&holes](uint64_t offset) {
      uint64_t removed = 0;
      for (const auto& [at, length] : holes) {
        if (at >= offset) break;
        removed += length;
      }
      return offset - removed;
    };
    for (CheckpointMark& m : checkpoints_) m.offset = shifted(m.offset);
    for (PromptMark& m : prompts_) m.offset = shifted(m.offset);
    for (UsageMark& m : usages_) m.offset = shifted(m.offset);
    target.offset = shifted(target.offset);
  }
  history_.resize(target.history_size);
  token_count_ = target.token_count;
  pending_begin_ = std::min(target.pending_begin, history_.size());
  next_checkpoint_id_ = target.next_id_before;
  checkpoints_.erase(checkpoints_.begin() + (mark - checkpoints_.begin()), checkpoints_.end());
  while (!prompts_.empty() && prompts_.back().offset >= target.offset) prompts_.pop_back();
  while (!usages_.empty() && usages_.back().offset >= target.offset) usages_.pop_back();
  system_prompt_ = prompts_.empty() ? std::nullopt : std::optional<std::string>(prompts_.back().prompt);
  modified_ = true;
  InvalidatePending();
  return rotated;
}

Status ContextLog::Clear() {
  STRATA_RETURN_IF_ERROR(PrepareAppend());
  bool swapped = false;
  Status rotated = RotateAndRebuild(0, &swapped);
  if (!swapped) return rotated;
  RestoreReport report = std::move(report_);
  ResetState();
  report_ = std::move(report);
  modified_ = true;
  return rotated;
}

Result<std::string> ContextLog::Rewrite(const std::optional<std::string>& system_prompt_arg,
                                        std::span<const Message> messages_arg, std::optional<int64_t> token_count,
                                        bool checkpoint) {
  // Copies first: callers pass this log's own system_prompt() (and may pass its history), which the
  // rebuild below resets.
  const std::optional<std::string> system_prompt = system_prompt_arg;
  const std::vector<Message> messages(messages_arg.begin(), messages_arg.end());
  if (token_count) STRATA_RETURN_IF_ERROR(record_format::CheckTokenCount(*token_count));
  size_t bad = 0;
  if (system_prompt && !json::IsValidUtf8(*system_prompt, &bad)) {
    return Status::InvalidArgument("system prompt is not valid UTF-8 at byte " + std::to_string(bad));
  }
  std::string content;
  if (system_prompt) content += record_format::SystemPromptLine(*system_prompt);
  uint64_t checkpoint_offset = content.size();
  if (checkpoint) content += record_format::CheckpointLine(0);
  STRATA_RETURN_IF_ERROR(SerializeMessages(messages, &content));
  uint64_t usage_offset = content.size();
  if (token_count) content += record_format::UsageLine(*token_count);
  STRATA_RETURN_IF_ERROR(PrepareAppend());
  bool swapped = false;
  std::string rotation;
  Status rotated = RotateAndRebuild(0, &swapped, content, &rotation);
  if (!swapped) return rotated;
  RestoreReport report = std::move(report_);
  ResetState();
  report_ = std::move(report);
  if (system_prompt) {
    prompts_.push_back(PromptMark{0, *system_prompt});
    system_prompt_ = *system_prompt;
  }
  if (checkpoint) {
    checkpoints_.push_back(CheckpointMark{0, checkpoint_offset, 0, 0, 0, 0});
    next_checkpoint_id_ = 1;
  }
  history_.assign(messages.begin(), messages.end());
  if (token_count) {
    token_count_ = *token_count;
    pending_begin_ = history_.size();
    usages_.push_back(UsageMark{usage_offset, history_.size(), *token_count, checkpoints_.size()});
  }
  modified_ = true;
  InvalidatePending();
  STRATA_RETURN_IF_ERROR(rotated);
  return rotation;
}

Status ContextLog::WriteSystemPrompt(std::string_view prompt) {
  size_t bad = 0;
  if (!json::IsValidUtf8(prompt, &bad)) {
    return Status::InvalidArgument("system prompt is not valid UTF-8 at byte " + std::to_string(bad));
  }
  STRATA_RETURN_IF_ERROR(EnsureLocked());
  STRATA_RETURN_IF_ERROR(writer_->Sync());
  uint64_t size = writer_->size();
  // Replace an existing first-line prompt record instead of stacking a second one.
  STRATA_ASSIGN_OR_RETURN(uint64_t skip, record_format::SystemPromptFirstLineLength(options_.fs, path_, size));
  std::string line = record_format::SystemPromptLine(prompt);
  std::string tmp = path_ + ".tmp";
  auto file = options_.fs->NewWritableFile(tmp, {.mode = WritableFileOptions::Mode::kTruncate, .lock = true});
  if (!file.ok()) return file.status();
  auto fail = [&](Status cause) {
    (void)options_.fs->RemoveFile(tmp);
    return cause;
  };
  Status s = (*file)->Append(line);
  if (s.ok() && size > skip) s = options_.fs->CopyRange(path_, skip, size - skip, file->get());
  if (s.ok()) s = (*file)->Sync();
  if (s.ok()) s = options_.fs->RenameFile(tmp, path_);
  if (!s.ok()) return fail(s);
  Status dir_sync = options_.fs->SyncDirectory(Dirname(path_));
  uint64_t new_size = line.size() + (size - skip);
  AdoptSwappedFile(std::move(*file), new_size, dir_sync);
  if (skip == size) missing_newline_ = false;  // The replaced first line was the whole (unterminated) file.

  // Every recorded offset moves by the size difference of the first line.
  int64_t delta = static_cast<int64_t>(line.size()) - static_cast<int64_t>(skip);
  if (skip > 0 && !prompts_.empty() && prompts_.front().offset == 0) prompts_.erase(prompts_.begin());
  for (CheckpointMark& m : checkpoints_) m.offset = static_cast<uint64_t>(static_cast<int64_t>(m.offset) + delta);
  for (PromptMark& m : prompts_) m.offset = static_cast<uint64_t>(static_cast<int64_t>(m.offset) + delta);
  for (UsageMark& m : usages_) m.offset = static_cast<uint64_t>(static_cast<int64_t>(m.offset) + delta);
  if (torn_tail_) torn_tail_->offset = static_cast<uint64_t>(static_cast<int64_t>(torn_tail_->offset) + delta);
  for (auto& range : skipped_) range.first = static_cast<uint64_t>(static_cast<int64_t>(range.first) + delta);
  prompts_.insert(prompts_.begin(), PromptMark{0, std::string(prompt)});
  system_prompt_ = prompts_.back().prompt;
  return dir_sync;
}

Status ContextLog::Sync() {
  if (!writer_) return Status::Ok();
  return writer_->Sync();
}

Status ContextLog::Close() {
  if (!writer_) return Status::Ok();
  bool poisoned = writer_->poisoned();
  uint64_t size = writer_->size();
  Status s = writer_->Close();
  writer_.reset();
  if (poisoned || !s.ok()) {
    if (broken_.ok()) {
      broken_ = Status::FailedPrecondition("context " + path_ + " had a failed write or fsync (" + s.ToString() +
                                           "); open a new ContextLog and Restore() it");
    }
    return s.ok() ? broken_ : s;
  }
  auto id = options_.fs->GetFileId(path_);
  if (id.ok()) closed_at_ = std::make_pair(*id, size);
  return s;
}

int64_t ContextLog::token_count_with_pending() const {
  if (!pending_cache_) {
    std::span<const Message> pending(history_);
    pending_cache_ = token_count_ + options_.estimator->CountMessages(pending.subspan(std::min(pending_begin_, history_.size())));
  }
  return *pending_cache_;
}

}  // namespace strata
