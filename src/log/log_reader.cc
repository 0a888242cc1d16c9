#include "strata/log/log_reader.h"

#include <simdjson.h>

#include <algorithm>
#include <cstring>

#include "json_dom.h"
#include "record_format.h"
#include "message_json_internal.h"
#include "strata/json/json_writer.h"

namespace strata {

static_assert(kLinePadding >= simdjson::SIMDJSON_PADDING, "lines must carry simdjson's padding");

LineReader::LineReader(std::unique_ptr<SequentialFile> file, size_t chunk_bytes, size_t max_line_bytes)
    : file_(std::move(file)),
      max_chunk_(std::max<size_t>(chunk_bytes, 4096)),
      max_line_(std::max<size_t>(max_line_bytes, 16)),
      // Start small (most logs are small) and double the read size per refill up to max_chunk_.
      buf_(new char[std::min<size_t>(max_chunk_, 64 << 10) + kLinePadding]),
      cap_(std::min<size_t>(max_chunk_, 64 << 10)) {
  std::memset(buf_.get(), 0, kLinePadding);
}

Result<bool> LineReader::Next(LogLine* line) {
  size_t scan_from = begin_;
  while (true) {
    const char* nl = static_cast<const char*>(std::memchr(buf_.get() + scan_from, '\n', end_ - scan_from));
    if (nl != nullptr) {
      size_t len = static_cast<size_t>(nl - (buf_.get() + begin_));
      // A line whose end came in the same read that passed the limit is as long as one that did not
      // (a 270 MiB line was read whole under a 256 MiB limit).
      const bool too_long = len > max_line_;
      *line = LogLine{too_long ? std::string_view() : std::string_view(buf_.get() + begin_, len), base_ + begin_,
                      ++line_no_, true, too_long, len};
      begin_ += len + 1;
      return true;
    }
    if (eof_) {
      if (begin_ == end_) return false;
      std::memset(buf_.get() + end_, 0, kLinePadding);
      size_t len = end_ - begin_;
      const bool too_long = len > max_line_;
      *line = LogLine{too_long ? std::string_view() : std::string_view(buf_.get() + begin_, len), base_ + begin_,
                      ++line_no_, false, too_long, len};
      begin_ = end_;
      return true;
    }
    if (end_ - begin_ > max_line_) return SkipLongLine(line);
    // Need more bytes: move the partial line to the front, growing the buffer if it is already full.
    size_t pending = end_ - begin_;
    if (begin_ > 0) {
      std::memmove(buf_.get(), buf_.get() + begin_, pending);
      base_ += begin_;
      begin_ = 0;
      end_ = pending;
    }
    if (end_ == cap_ || (cap_ < max_chunk_ && end_ < cap_ / 2)) {
      // Full (a line longer than the buffer), or mostly consumed while still below the read-ahead size.
      size_t new_cap = end_ == cap_ ? cap_ * 2 : std::min(cap_ * 2, max_chunk_);
      std::unique_ptr<char[]> bigger(new char[new_cap + kLinePadding]);
      std::memcpy(bigger.get(), buf_.get(), end_);
      buf_ = std::move(bigger);
      cap_ = new_cap;
    }
    scan_from = end_;
    STRATA_ASSIGN_OR_RETURN(size_t got, file_->Read(buf_.get() + end_, cap_ - end_));
    if (got == 0) eof_ = true;
    end_ += got;
    std::memset(buf_.get() + end_, 0, kLinePadding);
  }
}

Result<bool> LineReader::SkipLongLine(LogLine* line) {
  // Discard the line chunk by chunk up to its newline (or the end of the file), keeping only its extent.
  uint64_t offset = base_ + begin_;
  uint64_t length = end_ - begin_;
  uint64_t next = base_ + end_;  // File offset of the next byte to read.
  bool terminated = false;
  while (true) {
    STRATA_ASSIGN_OR_RETURN(size_t got, file_->Read(buf_.get(), cap_));
    if (got == 0) {
      eof_ = true;
      base_ = next;
      begin_ = end_ = 0;
      break;
    }
    const char* nl = static_cast<const char*>(std::memchr(buf_.get(), '\n', got));
    if (nl != nullptr) {
      size_t len = static_cast<size_t>(nl - buf_.get());
      length += len;
      base_ = next;
      begin_ = len + 1;
      end_ = got;
      terminated = true;
      break;
    }
    length += got;
    next += got;
  }
  std::memset(buf_.get() + end_, 0, kLinePadding);
  *line = LogLine{std::string_view(), offset, ++line_no_, terminated, true, length};
  return true;
}

std::string_view DamageKindName(DamageKind kind) {
  switch (kind) {
    case DamageKind::kInvalidJson: return "invalid_json";
    case DamageKind::kInvalidRecord: return "invalid_record";
    case DamageKind::kInvalidUtf8: return "invalid_utf8_replaced";
    case DamageKind::kTornTail: return "torn_tail";
  }
  return "damage";
}

std::string Damage::ToString() const {
  return "line " + std::to_string(line) + " (byte " + std::to_string(offset) + "): " + reason;
}

bool ScanSummary::damaged() const {
  for (const Damage& d : damage) {
    if (d.kind != DamageKind::kInvalidUtf8) return true;
  }
  return false;
}

struct RecordParser::Impl {
  LogFormat format;
  simdjson::dom::parser parser;
  std::string scratch;  // Holds a line whose UTF-8 had to be repaired.
};

RecordParser::RecordParser(LogFormat format) : impl_(new Impl{format, simdjson::dom::parser(), std::string()}) {}
RecordParser::~RecordParser() = default;

namespace {

using simdjson::dom::element;
using simdjson::dom::element_type;

// Counts and ids beyond 2^53 are not plausible and would overflow later arithmetic (id + 1, count + pending).
using record_format::kMaxRecordValue;

Status ReadNonNegative(element v, std::string_view what, int64_t* out) {
  if (v.type() == element_type::INT64 && v.get_int64().value_unsafe() > kMaxRecordValue) {
    return Status::InvalidArgument(std::string(what) + " is too large: " + std::to_string(v.get_int64().value_unsafe()));
  }
  if (v.type() == element_type::INT64 && v.get_int64().value_unsafe() >= 0) {
    *out = v.get_int64().value_unsafe();
    return Status::Ok();
  }
  if (v.type() == element_type::UINT64) {
    return Status::InvalidArgument(std::string(what) + " is too large");
  }
  return Status::InvalidArgument(std::string(what) + ": expected a non-negative integer, got " +
                                 std::string(json::TypeName(v)));
}

Status ParseContextRecord(element root, LogRecord* out) {
  if (root.type() != element_type::OBJECT) {
    return Status::InvalidArgument("expected a JSON object, got " + std::string(json::TypeName(root)));
  }
  simdjson::dom::object obj = json::AsObject(root);
  std::string_view role;
  for (auto field : obj) {
    if (field.key == "role" && field.value.type() == element_type::STRING) role = field.value.get_string().value_unsafe();
  }
  if (role.empty() || role[0] != '_') {
    out->kind = LogRecord::Kind::kMessage;
    return internal::MessageFromElement(root, &out->message);
  }
  auto field_of = [&](std::string_view key, element* v) {
    bool found = false;
    for (auto field : obj) {
      if (field.key == key) {
        *v = field.value;
        found = true;  // Last duplicate wins, as in Python's json module.
      }
    }
    return found;
  };
  element v;
  if (role == "_usage") {
    if (!field_of("token_count", &v)) return Status::InvalidArgument("_usage record without token_count");
    out->kind = LogRecord::Kind::kUsage;
    return ReadNonNegative(v, "_usage.token_count", &out->value);
  }
  if (role == "_checkpoint") {
    if (!field_of("id", &v)) return Status::InvalidArgument("_checkpoint record without id");
    out->kind = LogRecord::Kind::kCheckpoint;
    return ReadNonNegative(v, "_checkpoint.id", &out->value);
  }
  if (role == "_system_prompt") {
    if (!field_of("content", &v)) return Status::InvalidArgument("_system_prompt record without content");
    if (v.type() != element_type::STRING) {
      return Status::InvalidArgument("_system_prompt.content: expected string, got " + std::string(json::TypeName(v)));
    }
    out->kind = LogRecord::Kind::kSystemPrompt;
    out->text.assign(v.get_string().value_unsafe());
    return Status::Ok();
  }
  out->kind = LogRecord::Kind::kUnknownInternal;
  out->text.assign(role);
  return Status::Ok();
}

Status ParseLinearRecord(element root, LogRecord* out) {
  if (root.type() != element_type::OBJECT) {
    return Status::InvalidArgument("expected a JSON object, got " + std::string(json::TypeName(root)));
  }
  // kosong treats any line with a token_count key as a usage mark.
  for (auto field : json::AsObject(root)) {
    if (field.key == "token_count") {
      out->kind = LogRecord::Kind::kUsage;
      return ReadNonNegative(field.value, "token_count", &out->value);
    }
  }
  out->kind = LogRecord::Kind::kMessage;
  return internal::MessageFromElement(root, &out->message);
}

}  // namespace

Status RecordParser::Parse(const LogLine& line, LogRecord* out, bool* utf8_replaced) {
  *utf8_replaced = false;
  element root;
  auto error = impl_->parser.parse(line.text.data(), line.text.size(), false).get(root);
  if (error == simdjson::UTF8_ERROR) {
    impl_->scratch = json::ReplaceInvalidUtf8(line.text);
    impl_->scratch.append(kLinePadding, '\0');
    error = impl_->parser.parse(impl_->scratch.data(), impl_->scratch.size() - kLinePadding, false).get(root);
    *utf8_replaced = true;
  }
  if (error != simdjson::SUCCESS && line.text.find("\\u") != std::string_view::npos) {
    // A lone surrogate escape (half of an emoji cut in two): JSON's grammar allows it and kimi-cli (Python's
    // json) reads it; simdjson refuses the line. It is read as U+FFFD, as invalid UTF-8 is.
    const std::string_view current =
        *utf8_replaced ? std::string_view(impl_->scratch).substr(0, impl_->scratch.size() - kLinePadding) : line.text;
    std::string repaired = json::ReplaceLoneSurrogateEscapes(current);
    if (repaired != current) {
      impl_->scratch = std::move(repaired);
      impl_->scratch.append(kLinePadding, '\0');
      element again;
      if (impl_->parser.parse(impl_->scratch.data(), impl_->scratch.size() - kLinePadding, false).get(again) ==
          simdjson::SUCCESS) {
        root = again;
        error = simdjson::SUCCESS;
        *utf8_replaced = true;
      }
    }
  }
  if (error != simdjson::SUCCESS) {
    std::string detail = json::DescribeSyntaxError(*utf8_replaced ? std::string_view(impl_->scratch).substr(0, impl_->scratch.size() - kLinePadding) : line.text);
    if (detail.empty()) detail = std::string("invalid JSON: ") + simdjson::error_message(error);
    return Status::InvalidArgument(detail);
  }
  return impl_->format == LogFormat::kContext ? ParseContextRecord(root, out) : ParseLinearRecord(root, out);
}

namespace {

bool IsBlank(std::string_view s) {
  for (char c : s) {
    if (c != ' ' && c != '\t' && c != '\r' && c != '\f' && c != '\v') return false;
  }
  return true;
}

}  // namespace

Result<ScanSummary> ScanLog(FileSystem* fs, const std::string& path, LogFormat format, const RecordVisitor& visit) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, fs->NewSequentialFile(path));
  LineReader reader(std::move(file));
  RecordParser parser(format);
  ScanSummary summary;
  LogLine line;
  LogRecord record;
  while (true) {
    STRATA_ASSIGN_OR_RETURN(bool more, reader.Next(&line));
    if (!more) break;
    ++summary.lines;
    summary.size = line.offset + line.length + (line.terminated ? 1 : 0);
    if (line.too_long) {
      Damage d{line.terminated ? DamageKind::kInvalidRecord : DamageKind::kTornTail, line.number, line.offset,
               line.length, "line of " + std::to_string(line.length) + " bytes exceeds the " +
                                std::to_string(kMaxLineBytes) + "-byte limit for one record"};
      if (!line.terminated) summary.torn_tail = d;
      if (line.terminated) summary.skipped.emplace_back(line.offset, line.length + 1);
      summary.damage.push_back(std::move(d));
      continue;
    }
    if (IsBlank(line.text)) {
      if (!line.terminated) {
        summary.missing_final_newline = true;
        summary.blank_tail.emplace(line.offset, line.length);
      } else {
        summary.skipped.emplace_back(line.offset, line.length + 1);
      }
      continue;
    }
    bool replaced = false;
    Status s = parser.Parse(line, &record, &replaced);
    if (!s.ok()) {
      Damage d{line.terminated ? (s.message().rfind("invalid JSON", 0) == 0 ? DamageKind::kInvalidJson
                                                                             : DamageKind::kInvalidRecord)
                               : DamageKind::kTornTail,
               line.number, line.offset, line.text.size(), s.message()};
      if (line.number == 1 && line.text.starts_with("\xEF\xBB\xBF")) {
        // An editor's byte-order mark, which kimi-cli refuses too: said, rather than only the JSON error.
        d.reason = "the line begins with a UTF-8 byte-order mark (EF BB BF), which is not JSON: " + d.reason;
      }
      if (!line.terminated) {
        d.reason = "torn tail (last line has no newline and is not a complete record): " + d.reason;
        summary.torn_tail = d;
      } else {
        summary.skipped.emplace_back(line.offset, line.text.size() + 1);
      }
      summary.damage.push_back(std::move(d));
      continue;
    }
    if (replaced) {
      summary.damage.push_back(Damage{DamageKind::kInvalidUtf8, line.number, line.offset, line.text.size(),
                                      "text that is not Unicode (invalid UTF-8, a lone surrogate escape) replaced by U+FFFD; the record was kept"});
    }
    if (!line.terminated) summary.missing_final_newline = true;
    ++summary.records;
    if (visit) STRATA_RETURN_IF_ERROR(visit(line, record));
  }
  return summary;
}

}  // namespace strata
