#include "record_format.h"

#include <algorithm>

#include "strata/json/json_writer.h"
#include "strata/log/log_reader.h"
#include "strata/util/path.h"

namespace strata::record_format {

Status CheckTokenCount(int64_t token_count) {
  if (token_count < 0) {
    return Status::InvalidArgument("token count must be non-negative, got " + std::to_string(token_count));
  }
  if (token_count > kMaxRecordValue) {
    return Status::InvalidArgument("token count " + std::to_string(token_count) +
                                   " is too large: a log holds counts up to 2^53 - 1");
  }
  return Status::Ok();
}

std::string UsageLine(int64_t token_count) {
  return "{\"role\": \"_usage\", \"token_count\": " + std::to_string(token_count) + "}\n";
}

std::string CheckpointLine(int64_t id) { return "{\"role\": \"_checkpoint\", \"id\": " + std::to_string(id) + "}\n"; }

std::string SystemPromptLine(std::string_view prompt) {
  std::string line = "{\"role\": \"_system_prompt\", \"content\": ";
  json::AppendString(&line, prompt, json::StringStyle::kAsciiEscape);
  line += "}\n";
  return line;
}

std::string LinearUsageLine(int64_t token_count) {
  return "{\"role\":\"_usage\",\"token_count\":" + std::to_string(token_count) + "}\n";
}

Result<uint64_t> SystemPromptFirstLineLength(FileSystem* fs, const std::string& path, uint64_t size) {
  if (size == 0) return uint64_t{0};
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<SequentialFile> file, fs->NewSequentialFile(path));
  LineReader reader(std::move(file), 1 << 16);
  LogLine line;
  STRATA_ASSIGN_OR_RETURN(bool any, reader.Next(&line));
  if (!any) return uint64_t{0};
  RecordParser parser(LogFormat::kContext);
  LogRecord record;
  bool replaced = false;
  if (!parser.Parse(line, &record, &replaced).ok() || record.kind != LogRecord::Kind::kSystemPrompt) {
    return uint64_t{0};
  }
  return static_cast<uint64_t>(line.text.size() + (line.terminated ? 1 : 0));
}

Result<std::string> LinkToNextRotation(FileSystem* fs, const std::string& path) {
  std::string dir = Dirname(path);
  auto [stem, ext] = SplitExtension(Basename(path));
  STRATA_ASSIGN_OR_RETURN(std::vector<std::string> names, fs->ListDirectory(dir));
  int64_t highest = 0;
  std::string prefix = stem + "_";
  for (const std::string& name : names) {
    if (name.size() <= prefix.size() + ext.size() || name.compare(0, prefix.size(), prefix) != 0 ||
        name.compare(name.size() - ext.size(), ext.size(), ext) != 0) {
      continue;
    }
    std::string digits = name.substr(prefix.size(), name.size() - prefix.size() - ext.size());
    if (!digits.empty() && digits.size() <= 12 &&
        std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      highest = std::max<int64_t>(highest, std::stoll(digits));
    }
  }
  for (int64_t n = highest + 1; n <= highest + 10000; ++n) {
    std::string candidate = JoinPath(dir, prefix + std::to_string(n) + ext);
    Status linked = fs->LinkFile(path, candidate);
    if (linked.ok()) return candidate;
    if (linked.code() != StatusCode::kAlreadyExists) return linked;  // Taken: try the next number.
  }
  return Status::ResourceExhausted("no free rotation name for " + path);
}

Status SaveTornTail(FileSystem* fs, const std::string& path, uint64_t offset, uint64_t length) {
  for (int n = 1; n < 10000; ++n) {
    auto file = fs->NewWritableFile(path + ".torn-" + std::to_string(n), {.mode = WritableFileOptions::Mode::kCreateNew});
    if (!file.ok()) {
      if (file.status().code() == StatusCode::kAlreadyExists) continue;  // Taken: try the next number.
      return file.status().WithContext("saving torn tail of " + path);
    }
    std::string torn = path + ".torn-" + std::to_string(n);
    Status saved = fs->CopyRange(path, offset, length, file->get());
    if (saved.ok()) saved = (*file)->Sync();
    if (saved.ok()) saved = (*file)->Close();
    if (!saved.ok()) {
      // Leave no empty or partial copy behind (a full disk would otherwise gain one per attempt).
      file->reset();
      (void)fs->RemoveFile(torn);
      return saved.WithContext("saving torn tail of " + path + " to " + torn);
    }
    return fs->SyncDirectory(Dirname(path));
  }
  return Status::ResourceExhausted("no free .torn-N name for " + path);
}

}  // namespace strata::record_format
