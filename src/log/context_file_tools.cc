#include "strata/log/context_file_tools.h"

#include <algorithm>

#include "record_format.h"
#include "strata/json/json_writer.h"
#include "strata/util/path.h"

namespace strata {

Result<ScanSummary> CheckContextFile(FileSystem* fs, const std::string& path, LogFormat format) {
  return ScanLog(fs, path, format, nullptr);
}

namespace {

void AppendDamage(std::string* out, const Damage& d) {
  *out += "{\"line\":" + std::to_string(d.line) + ",\"offset\":" + std::to_string(d.offset) +
          ",\"length\":" + std::to_string(d.length) + ",\"kind\":";
  json::AppendString(out, DamageKindName(d.kind));
  *out += ",\"reason\":";
  json::AppendString(out, d.reason);
  *out += "}";
}

}  // namespace

std::string ScanSummaryToJson(const std::string& path, const ScanSummary& summary) {
  std::string out = "{\"file\":";
  json::AppendString(&out, json::ReplaceInvalidUtf8(path));  // A file name may be any bytes.
  out += ",\"size\":" + std::to_string(summary.size) + ",\"lines\":" + std::to_string(summary.lines) +
         ",\"records\":" + std::to_string(summary.records) + ",\"ok\":" + (summary.damaged() ? "false" : "true") +
         ",\"missing_final_newline\":" + (summary.missing_final_newline ? "true" : "false") + ",\"torn_tail\":";
  if (summary.torn_tail) {
    AppendDamage(&out, *summary.torn_tail);
  } else {
    out += "null";
  }
  out += ",\"damage\":[";
  for (size_t i = 0; i < summary.damage.size(); ++i) {
    if (i > 0) out += ",";
    AppendDamage(&out, summary.damage[i]);
  }
  out += "]}";
  return out;
}

Result<RepairResult> RepairContextFile(FileSystem* fs, const std::string& path, LogFormat format) {
  // Lock first so nothing appends between the scan and the swap.
  STRATA_ASSIGN_OR_RETURN(bool exists, fs->FileExists(path));
  if (!exists) return Status::NotFound("no context file at " + path);
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> lock,
                          fs->NewWritableFile(path, {.mode = WritableFileOptions::Mode::kAppend, .lock = true}));
  RepairResult result;
  STRATA_ASSIGN_OR_RETURN(result.before, ScanLog(fs, path, format, nullptr));
  std::vector<Damage> cut;
  for (const Damage& d : result.before.damage) {
    if (d.kind != DamageKind::kInvalidUtf8) cut.push_back(d);
  }
  if (cut.empty() && !result.before.missing_final_newline) return result;

  // Keep the original under a rotation name.
  std::string dir = Dirname(path);
  STRATA_ASSIGN_OR_RETURN(std::string backup, record_format::LinkToNextRotation(fs, path));

  // Copy the good byte ranges (everything between damaged lines) into a locked temp file, then swap it in.
  std::string tmp = path + ".tmp";
  auto undo = [&](Status cause) {
    (void)fs->RemoveFile(tmp);
    (void)fs->RemoveFile(backup);
    return cause;
  };
  auto file = fs->NewWritableFile(tmp, {.mode = WritableFileOptions::Mode::kTruncate, .lock = true});
  if (!file.ok()) return undo(file.status());
  uint64_t pos = 0;
  Status s;
  for (const Damage& d : cut) {
    if (d.offset > pos) s = fs->CopyRange(path, pos, d.offset - pos, file->get());
    if (!s.ok()) return undo(s);
    bool terminated = !(result.before.torn_tail && d.offset == result.before.torn_tail->offset);
    uint64_t span = d.length + (terminated ? 1 : 0);
    pos = d.offset + span;
    ++result.removed_lines;
    result.removed_bytes += span;
  }
  if (result.before.size > pos) s = fs->CopyRange(path, pos, result.before.size - pos, file->get());
  if (s.ok() && result.before.missing_final_newline) s = (*file)->Append("\n");
  if (s.ok()) s = (*file)->Sync();
  if (s.ok()) s = fs->RenameFile(tmp, path);
  if (!s.ok()) return undo(s);
  STRATA_RETURN_IF_ERROR(fs->SyncDirectory(dir));
  result.backup = backup;
  return result;
}

}  // namespace strata
