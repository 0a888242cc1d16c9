// Internal: the exact bytes of the log's non-message records, shared by the context log, the linear
// storage and the file tools.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "strata/util/file_system.h"
#include "strata/util/status.h"

namespace strata::record_format {

// The largest token count or checkpoint id a record holds (2^53 - 1, the integers every JSON reader keeps
// exact): readers call a larger one damage, so writers refuse to write one.
constexpr int64_t kMaxRecordValue = (int64_t{1} << 53) - 1;

// kInvalidArgument naming `token_count` unless it is 0 ... kMaxRecordValue.
Status CheckTokenCount(int64_t token_count);

// kimi-cli writes its internal records with Python's json.dumps defaults: ", " and ": " separators and
// ASCII-only strings.
std::string UsageLine(int64_t token_count);        // {"role": "_usage", "token_count": N}\n
std::string CheckpointLine(int64_t id);            // {"role": "_checkpoint", "id": N}\n
std::string SystemPromptLine(std::string_view p);  // {"role": "_system_prompt", "content": "..."}\n

// kosong's linear storage writes its usage mark compactly: {"role":"_usage","token_count":N}\n
std::string LinearUsageLine(int64_t token_count);

// Returns the length (with its '\n', if it has one) of the first line of `path` if that line is a
// `_system_prompt` record, else 0. `size` is the file size (0 means no file content).
Result<uint64_t> SystemPromptFirstLineLength(FileSystem* fs, const std::string& path, uint64_t size);

// Keeps the current `path` under the next rotation name `<stem>_N<ext>` (N = highest existing + 1) as a
// hard link, and returns that name. The name is claimed atomically (link fails if it exists; the next N is
// tried), so concurrent rotations never share a number. The caller syncs the directory.
Result<std::string> LinkToNextRotation(FileSystem* fs, const std::string& path);

// Copies bytes [offset, offset+length) of `path` into a new `<path>.torn-N` (first free N), durably, so a
// torn tail can be cut without deleting anything the user wrote.
Status SaveTornTail(FileSystem* fs, const std::string& path, uint64_t offset, uint64_t length);

}  // namespace strata::record_format
