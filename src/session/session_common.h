// What the two Sessions backends (session.cc: directories of context logs; pg_sessions.cc: PostgreSQL)
// compute the same way, so that they report the same stats, summaries, ids and errors. Internal to the
// session module; never installed.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "strata/message/message.h"
#include "strata/session/audit.h"
#include "strata/session/session.h"
#include "strata/util/status.h"

namespace strata::session::internal {

// Adds (sign +1) or takes back (-1, for messages a revert or compaction removed) what `m` contributes to
// `info`'s stats. Contexts once used stay counted.
void Account(const Message& m, SessionInfo& info, int sign);

// Rebuilds the live L0/L1 of `info` from the current `messages` and its stats: what the conversation
// opened with and where it is now (no model call).
void RefreshSummary(const std::vector<Message>& messages, SessionInfo& info);

// Free text kept beside the messages (an origin's title and source, an archive's files, notes and error) as
// every backend keeps it: a NUL and bytes that are not UTF-8 become U+FFFD (PostgreSQL's text can hold
// neither; messages are JSON, which escapes a NUL, and are checked as UTF-8 when added).
std::string StorableText(std::string_view text);
// A job's error (JobQueue::Fail, Release) and an audit entry's free text, kept the same way: a model's
// error or reason holding a NUL failed the write on PostgreSQL only (the job left running until its lease
// ran out, again and again; remember and phase 2 refused).
std::string StorableError(const Status& error);
void MakeStorable(AuditEntry& entry);

// Returns a new session id made of `now_ms` and 24 random bits ("s1700000000000-a1b2c3"). Thread-safe.
std::string NewSessionId(int64_t now_ms);

// Checks an owner id: optional; when given it follows the URI scope-id rules (it becomes strata://user/<id>).
Status ValidateOwnerId(std::string_view id, std::string_view what);

// A new session incarnation: 64 random bits as 16 hex digits. Thread-safe.
std::string NewIncarnation();
// "" or 1-32 of [0-9a-z] (it becomes part of job keys and audit sources).
Status ValidateIncarnation(std::string_view incarnation);
// Queues phase 2 of `archive` of `info` under the session's reference (CommitJobKey); payload
// {"session", "archive", "incarnation"?}. Idempotent, as JobQueue::Enqueue is.
Result<int64_t> EnqueueCommit(JobQueue& queue, const SessionInfo& info, int archive);
// For an unfinished archive found on open: the last error of a dead job of it, or nullopt when it has none
// and EnqueueCommit queued it. A worker marks the job dead, then the archive failed: an open in between
// queued a second job that ran phase 2 again; and a crash in between left the archive looking in progress.
// The caller records the archive as failed with the error (it waits for `session retry`).
Result<std::optional<std::string>> EnqueueUnfinishedCommit(JobQueue& queue, const SessionInfo& info, int archive);

// Checkpoint tags (CheckpointInfo). The digest of a run of messages chains each message's JSON into the
// digest of those before it, so that every prefix's digest comes from one pass: PrefixDigests(m)[i] is
// the digest of m[0, i). The tag of checkpoint `id` of `info`'s current messages is 32 hex digits of
// memory::HashHex over the incarnation, the commits, the id and the digest of the messages before it.
// Both backends compute it alike, so a tag survives `strata migrate`.
std::vector<uint64_t> PrefixDigests(std::span<const Message> messages);
std::string CheckpointTag(const SessionInfo& info, int64_t id, uint64_t digest_before);
// Ok when `ref` has no tag or checkpoint `ref.id` (with `before` before it) still has `ref.tag`;
// kFailedPrecondition naming the session and the checkpoint otherwise.
Status CheckCheckpointTag(const SessionInfo& info, const CheckpointRef& ref, std::span<const Message> before);

// Returns the state named `s` ("archived", ..., "failed"); anything else is kDataLoss.
Result<ArchiveState> ParseArchiveState(std::string_view s);

}  // namespace strata::session::internal
