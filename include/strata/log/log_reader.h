// Reading JSONL logs: a line reader that streams a file in chunks, a record parser for the two log formats,
// and a scanner that classifies every line and reports damage instead of aborting.
//
// Recovery rules (docs/formats/context-log.md): blank lines are skipped; a terminated line that is not a
// valid record is damage, reported with its line number and byte offset and skipped; an unterminated last
// line is a torn tail (a crash artefact) unless it parses as a complete record, in which case it is kept
// and only its newline is missing. Bytes that are not valid UTF-8 inside a line are replaced by U+FFFD (as
// kimi-cli's reader does) and reported.
//
// Thread safety: LineReader and RecordParser are not thread-safe; use one per thread.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "strata/message/message.h"
#include "strata/util/file_system.h"
#include "strata/util/status.h"

namespace strata {

struct LogLine {
  std::string_view text;  // Without the '\n'. At least kLinePadding readable bytes follow it in memory.
  uint64_t offset = 0;    // Byte offset of the line's first byte in the file.
  uint64_t number = 0;    // 1-based line number.
  bool terminated = true; // False only for a last line without '\n'.
  // Set for a line longer than the reader's limit: `text` is empty and `length` is the line's true length.
  bool too_long = false;
  uint64_t length = 0;    // Bytes of the line without its '\n' (== text.size() unless too_long).
};

inline constexpr size_t kLinePadding = 64;
// Lines longer than this are reported as damage instead of being held in memory (a message this large is
// not plausible; a file of zeros without newlines is).
inline constexpr size_t kMaxLineBytes = 256u << 20;

class LineReader {
 public:
  explicit LineReader(std::unique_ptr<SequentialFile> file, size_t chunk_bytes = 4u << 20,
                      size_t max_line_bytes = kMaxLineBytes);
  // Reads the next line into `*line` (valid until the next call). Returns false at end of file.
  Result<bool> Next(LogLine* line);

 private:
  Result<bool> SkipLongLine(LogLine* line);

  std::unique_ptr<SequentialFile> file_;
  size_t max_chunk_;    // Largest read; the buffer grows beyond it only for longer lines.
  size_t max_line_;     // Longer lines are skipped (reported too_long), never buffered whole.
  std::unique_ptr<char[]> buf_;
  size_t cap_;          // Usable capacity; kLinePadding more bytes are allocated.
  size_t begin_ = 0;    // First unconsumed byte.
  size_t end_ = 0;      // One past the last byte read.
  uint64_t base_ = 0;   // File offset of buf_[0].
  uint64_t line_no_ = 0;
  bool eof_ = false;
};

// The two on-disk formats that share the line structure.
enum class LogFormat {
  kContext,  // kimi-cli context.jsonl: messages and `_usage` / `_checkpoint` / `_system_prompt` records.
  kLinear,   // kosong linear storage: messages and lines with a `token_count` key.
};

struct LogRecord {
  enum class Kind { kMessage, kUsage, kCheckpoint, kSystemPrompt, kUnknownInternal };
  Kind kind = Kind::kMessage;
  Message message;   // kMessage.
  int64_t value = 0; // kUsage: token count; kCheckpoint: id.
  std::string text;  // kSystemPrompt: the prompt; kUnknownInternal: the role (e.g. "_meta").
};

class RecordParser {
 public:
  explicit RecordParser(LogFormat format);
  ~RecordParser();
  RecordParser(const RecordParser&) = delete;  // Owns a parser's buffers.
  RecordParser& operator=(const RecordParser&) = delete;

  // Parses `line` (which must have kLinePadding readable bytes after its text). Returns kInvalidArgument
  // saying why the line is not a record. Sets `*utf8_replaced` when text that is not Unicode (invalid UTF-8, a
  // lone surrogate escape) had to be replaced by U+FFFD.
  Status Parse(const LogLine& line, LogRecord* out, bool* utf8_replaced);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

enum class DamageKind { kInvalidJson, kInvalidRecord, kInvalidUtf8, kTornTail };
std::string_view DamageKindName(DamageKind kind);

struct Damage {
  DamageKind kind = DamageKind::kInvalidJson;
  uint64_t line = 0;    // 1-based.
  uint64_t offset = 0;  // Byte offset of the line in the file.
  uint64_t length = 0;  // Bytes of the line, without its '\n'.
  std::string reason;
  // Returns "line L (byte O): reason".
  std::string ToString() const;
};

struct ScanSummary {
  uint64_t size = 0;     // Bytes scanned.
  uint64_t lines = 0;    // Lines seen (including blank and damaged ones).
  uint64_t records = 0;  // Records accepted.
  std::vector<Damage> damage;           // In file order; kInvalidUtf8 entries were still accepted.
  bool missing_final_newline = false;   // The last line is a complete record without its '\n'.
  std::optional<Damage> torn_tail;      // Set when the last line is a torn record (also in `damage`).
  // Terminated lines that hold no record (blank, or damaged other than by replaced UTF-8), in file order,
  // each as {offset, length including its '\n'}: what kimi-cli's revert leaves out of the new file.
  std::vector<std::pair<uint64_t, uint64_t>> skipped;
  // The last line when it is blank and has no '\n': {offset, length}. Once a writer ends it with a newline
  // it is a skipped line too.
  std::optional<std::pair<uint64_t, uint64_t>> blank_tail;
  // Returns the offset where the next append must start: the file size, minus a torn tail.
  uint64_t clean_size() const { return torn_tail ? torn_tail->offset : size; }
  // Returns whether anything needs repair (damage other than replaced UTF-8, or a torn tail).
  bool damaged() const;
};

// Scans `path` in `format`, calling `visit` for every accepted record in order. A read error is returned;
// damaged lines are not errors (they are in the summary). A missing file is kNotFound.
using RecordVisitor = std::function<Status(const LogLine& line, LogRecord& record)>;
Result<ScanSummary> ScanLog(FileSystem* fs, const std::string& path, LogFormat format, const RecordVisitor& visit);

}  // namespace strata
