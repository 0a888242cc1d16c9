#include "strata/session/session.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <utility>
#include <array>
#include <cstdio>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "strata/json/checked.h"
#include "strata/json/json_writer.h"
#include "strata/log/context_log.h"
#include "strata/memory/hash.h"
#include "strata/memory/uri.h"
#include "strata/message/message_json.h"
#include "strata/message/part_registry.h"
#include "strata/util/utf8.h"
#include "session_common.h"

namespace strata::session {
namespace {

using Json = nlohmann::json;

constexpr std::string_view kArchivePrefix = "archive_";

// The number N of a rotation `messages_N.jsonl` of the current log, or 0.
int RotationNumber(std::string_view name) {
  constexpr std::string_view kStem = "messages_", kExt = ".jsonl";
  if (name.size() <= kStem.size() + kExt.size() || name.substr(0, kStem.size()) != kStem ||
      name.substr(name.size() - kExt.size()) != kExt) {
    return 0;
  }
  std::string_view digits = name.substr(kStem.size(), name.size() - kStem.size() - kExt.size());
  if (digits.size() > 9) return 0;
  int n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + (c - '0');
  }
  return n;
}

// The archive number of a directory name, or 0.
int ArchiveNumber(std::string_view name) {
  if (name.substr(0, kArchivePrefix.size()) != kArchivePrefix) return 0;
  std::string_view digits = name.substr(kArchivePrefix.size());
  if (digits.size() < 3 || digits.size() > 9) return 0;
  int n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + (c - '0');
  }
  return n;
}

Json StatsJson(const SessionStats& s) {
  return {{"messages", s.messages},       {"turns", s.turns},
          {"tokens", s.tokens},           {"contexts_used", s.contexts_used},
          {"skills_used", s.skills_used}, {"memories_extracted", s.memories_extracted},
          {"commits", s.commits},         {"revisions", s.revisions}};
}

SessionStats StatsFromJson(const Json& j) {
  SessionStats s;
  auto get = [&](const char* key) { return j.contains(key) && j[key].is_number_integer() ? j[key].get<int64_t>() : 0; };
  s.messages = get("messages");
  s.turns = get("turns");
  s.tokens = get("tokens");
  s.contexts_used = get("contexts_used");
  s.skills_used = get("skills_used");
  s.memories_extracted = get("memories_extracted");
  s.commits = get("commits");
  s.revisions = get("revisions");
  return s;
}

std::string InfoToJson(const SessionInfo& info) {
  Json j = {{"id", info.id},
            {"user", info.user},
            {"agent", info.agent},
            {"created_ms", info.created_ms},
            {"updated_ms", info.updated_ms},
            {"stats", StatsJson(info.stats)},
            {"contexts", info.contexts},
            {"abstract", info.abstract_text},
            {"overview", info.overview}};
  if (!info.incarnation.empty()) j["incarnation"] = info.incarnation;
  if (!info.title.empty()) j["title"] = info.title;
  if (!info.source.empty()) j["source"] = info.source;
  return j.dump(2) + "\n";
}

// A file Strata wrote itself, edited or damaged: a member of the wrong type is data loss, named.
Status Damaged(const Status& why) { return Status::DataLoss(why.message()); }

Result<SessionInfo> InfoFromJson(std::string_view text, const std::string& where) {
  Json j = strata::json::ParseOrDiscard<Json>(text);
  if (!j.is_object() || !j.contains("id") || !j["id"].is_string()) {
    return Status::DataLoss(where + ": not a session record (expected a JSON object with an \"id\")");
  }
  SessionInfo info;
  info.id = j["id"].get<std::string>();
  for (auto [key, slot] : {std::pair{"user", &info.user}, std::pair{"agent", &info.agent},
                           std::pair{"abstract", &info.abstract_text}, std::pair{"overview", &info.overview},
                           std::pair{"incarnation", &info.incarnation}, std::pair{"title", &info.title},
                           std::pair{"source", &info.source}}) {
    Result<std::string> v = json::OptionalString(j, key, where);
    if (!v.ok()) return Damaged(v.status());
    *slot = std::move(*v);
  }
  // The owners become URIs (strata://user/<id>) in phase 2: an edited id must not get that far.
  for (auto [what, id] : {std::pair{"user", &info.user}, std::pair{"agent", &info.agent}}) {
    if (id->empty()) continue;
    if (Status s = memory::ValidateScopeId(*id, what); !s.ok()) return Damaged(s.WithContext(where));
  }
  // The incarnation becomes part of job keys and audit sources.
  if (Status s = internal::ValidateIncarnation(info.incarnation); !s.ok()) return Damaged(s.WithContext(where));
  info.created_ms = json::IntOr(j, "created_ms", 0);
  info.updated_ms = json::IntOr(j, "updated_ms", 0);
  if (j.contains("stats") && j["stats"].is_object()) info.stats = StatsFromJson(j["stats"]);
  if (j.contains("contexts") && j["contexts"].is_array()) {
    for (const Json& c : j["contexts"]) {
      if (c.is_string()) info.contexts.push_back(c.get<std::string>());
    }
  }
  return info;
}

using internal::Account;
using internal::NewSessionId;
using internal::ParseArchiveState;
using internal::RefreshSummary;
using internal::ValidateOwnerId;

class FileSessions final : public Sessions {
 public:
  using Sessions::Log;
  FileSessions(std::string root, SessionsOptions options) : root_(std::move(root)), options_(options) {
    if (options_.fs == nullptr) options_.fs = PosixFileSystem();
    if (options_.clock == nullptr) options_.clock = SystemClock();
  }

  Status Open() {
    if (options_.queue == nullptr) return Status::InvalidArgument("sessions: a job queue is required");
    STRATA_RETURN_IF_ERROR(RegisterContextRefPart());
    if (options_.read_only) return Status::Ok();  // Nothing to create, nothing to recover (sessions.h).
    STRATA_RETURN_IF_ERROR(fs().CreateDirectories(root_));
    STRATA_ASSIGN_OR_RETURN(std::vector<std::string> ids, fs().ListDirectory(root_));
    for (const std::string& id : ids) {
      if (!ValidateSessionId(id).ok()) continue;
      Result<SessionLock> lock = LockSession(id);
      Status recovered = lock.ok() ? RecoverLocked(id) : lock.status();
      // One damaged session must not take the others down: its own operations report the damage.
      if (!recovered.ok() && recovered.code() != StatusCode::kDataLoss && recovered.code() != StatusCode::kNotFound &&
          recovered.code() != StatusCode::kInvalidArgument) {
        return recovered.WithContext("session " + id);
      }
    }
    return Status::Ok();
  }

  Result<SessionInfo> Create(std::string_view user, std::string_view agent, std::string_view id,
                             std::optional<std::string_view> incarnation) override {
    STRATA_RETURN_IF_ERROR(ValidateOwnerId(user, "user"));
    STRATA_RETURN_IF_ERROR(ValidateOwnerId(agent, "agent"));
    if (incarnation) STRATA_RETURN_IF_ERROR(internal::ValidateIncarnation(*incarnation));
    std::string sid = id.empty() ? NewSessionId(NowMs()) : std::string(id);
    STRATA_RETURN_IF_ERROR(ValidateSessionId(sid));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(sid, /*create=*/true));
    STRATA_ASSIGN_OR_RETURN(bool exists, fs().FileExists(InfoPath(sid)));
    if (exists) return Status::AlreadyExists("session " + sid + " already exists");
    SessionInfo info;
    info.id = sid;
    info.user = std::string(user);
    info.agent = std::string(agent);
    info.incarnation = incarnation ? std::string(*incarnation) : internal::NewIncarnation();
    info.created_ms = info.updated_ms = NowMs();
    STRATA_RETURN_IF_ERROR(fs().CreateDirectories(Dir(sid) + "/history"));
    STRATA_RETURN_IF_ERROR(fs().WriteFileAtomically(InfoPath(sid), InfoToJson(info)));
    return info;
  }

  Result<SessionInfo> Get(std::string_view id) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    return LoadInfo(ref);
  }

  Result<std::vector<SessionInfo>> List() override {
    STRATA_ASSIGN_OR_RETURN(std::vector<std::string> ids, ListOrEmpty(root_));
    std::sort(ids.begin(), ids.end());
    std::vector<SessionInfo> out;
    for (const std::string& id : ids) {
      if (!ValidateSessionId(id).ok()) continue;
      Result<SessionInfo> info = LoadInfo(ParsedSessionRef{id, "", false});
      if (info.ok()) out.push_back(std::move(*info));
    }
    return out;
  }

  Status Add(std::string_view id, const Message& message) override {
    return Add(id, std::span<const Message>(&message, 1));
  }

  Status Add(std::string_view id, std::span<const Message> messages) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    STRATA_ASSIGN_OR_RETURN(ContextLog * log, StorageLocked(info, lock));
    STRATA_RETURN_IF_ERROR(log->Append(messages));
    for (const Message& m : messages) Account(m, info, +1);
    return SaveInfoLocked(info, log);
  }

  Status RecordUsage(std::string_view id, int64_t tokens) override {
    if (tokens < 0) return Status::InvalidArgument("a usage mark must be a non-negative token count");
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    STRATA_ASSIGN_OR_RETURN(ContextLog * log, StorageLocked(info, lock));
    STRATA_RETURN_IF_ERROR(log->UpdateTokenCount(tokens));
    info.stats.revisions += 1;  // Another process holding the log open must read it again.
    return SaveInfoLocked(info, log);
  }

  Status SetSystemPrompt(std::string_view id, std::string_view prompt) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    STRATA_ASSIGN_OR_RETURN(ContextLog * log, StorageLocked(info, lock));
    if (log->system_prompt() && *log->system_prompt() == prompt) return Status::Ok();
    STRATA_RETURN_IF_ERROR(log->WriteSystemPrompt(prompt));
    // Another process holding the log open must read it again.
    info.stats.revisions += 1;
    return SaveInfoLocked(info, log);
  }

  Result<CheckpointInfo> Checkpoint(std::string_view id) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    STRATA_ASSIGN_OR_RETURN(ContextLog * log, StorageLocked(info, lock));
    STRATA_ASSIGN_OR_RETURN(int64_t checkpoint, log->Checkpoint(/*add_user_message=*/false));
    info.stats.revisions += 1;
    STRATA_RETURN_IF_ERROR(SaveInfoLocked(info, log));
    const std::vector<Message>& before = log->history();
    return CheckpointInfo{checkpoint, static_cast<int64_t>(before.size()),
                          internal::CheckpointTag(info, checkpoint, internal::PrefixDigests(before).back())};
  }

  Result<SessionLog> Log(std::string_view id, bool tags) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    STRATA_ASSIGN_OR_RETURN(ContextLog * log, StorageLocked(info, lock));
    SessionLog out;
    out.system_prompt = log->system_prompt();
    out.messages = log->history();
    std::vector<uint64_t> digests;
    if (tags && !log->checkpoints().empty()) digests = internal::PrefixDigests(out.messages);
    for (const ContextLog::CheckpointPosition& c : log->checkpoints()) {
      out.checkpoints.push_back({c.id, static_cast<int64_t>(c.messages),
                                 tags ? internal::CheckpointTag(info, c.id, digests[c.messages]) : ""});
    }
    out.usage_tokens = log->token_count();
    for (const ContextLog::UsagePosition& u : log->usage_marks()) {
      out.usage_marks.push_back({static_cast<int64_t>(u.messages), u.tokens, static_cast<int64_t>(u.checkpoints)});
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<std::string> names, fs().ListDirectory(Dir(info.id)));
    std::vector<std::pair<int, std::string>> rotations;
    for (const std::string& name : names) {
      if (int n = RotationNumber(name); n > 0) rotations.emplace_back(n, name);
    }
    std::sort(rotations.begin(), rotations.end());
    for (auto& [n, name] : rotations) out.rotations.push_back(std::move(name));
    // What the log was read from: after a revert or a compaction replaced the file, the lines reported are
    // in the rotation it kept, not in the live file, and are not reported again.
    if (LiveFileIsTheOneRestored(info.id)) {
      for (const Damage& d : log->restore_report().scan.damage) {
        const char* what = d.kind == DamageKind::kInvalidUtf8 ? "; kept, invalid bytes replaced"
                           : d.kind == DamageKind::kTornTail  ? "; an interrupted write, cut before the next append"
                                                              : "; skipped";
        out.damage.push_back(Shown(MessagesPath(info.id)) + " " + d.ToString() + what);
      }
    }
    return out;
  }

  Result<SessionInfo> Revert(std::string_view id, const CheckpointRef& checkpoint_ref) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    STRATA_ASSIGN_OR_RETURN(ContextLog * log, StorageLocked(info, lock));
    std::vector<Message> before = log->history();
    const int64_t checkpoint = checkpoint_ref.id;
    for (const ContextLog::CheckpointPosition& c : log->checkpoints()) {
      if (c.id != checkpoint) continue;
      STRATA_RETURN_IF_ERROR(internal::CheckCheckpointTag(info, checkpoint_ref, std::span(before).first(c.messages)));
    }
    Status reverted = log->RevertTo(checkpoint);
    if (!reverted.ok()) {
      if (reverted.code() == StatusCode::kNotFound) {
        return Status::NotFound("session " + info.id + " has no checkpoint " + std::to_string(checkpoint) +
                                " in its current messages (it has " + std::to_string(log->n_checkpoints()) +
                                "; a commit archives them)");
      }
      (void)CloseStorageLocked(info.id);
      return reverted;
    }
    for (size_t i = log->history().size(); i < before.size(); ++i) Account(before[i], info, -1);
    info.stats.revisions += 1;
    STRATA_RETURN_IF_ERROR(SaveInfoLocked(info, log));
    return info;
  }

  Result<SessionInfo> Replace(std::string_view id, std::span<const Message> messages,
                              std::optional<int64_t> token_count, const std::vector<Message>* expected) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    STRATA_ASSIGN_OR_RETURN(ContextLog * log, StorageLocked(info, lock));
    std::vector<Message> before = log->history();
    if (expected != nullptr && before != *expected) {
      return Status::FailedPrecondition("session " + info.id + " changed since its messages were read; read them again");
    }
    Result<std::string> rotation = log->Rewrite(log->system_prompt(), messages, token_count, /*checkpoint=*/true);
    if (!rotation.ok()) {
      (void)CloseStorageLocked(info.id);
      return rotation.status();
    }
    for (const Message& m : before) Account(m, info, -1);
    for (const Message& m : messages) Account(m, info, +1);
    info.stats.revisions += 1;
    STRATA_RETURN_IF_ERROR(SaveInfoLocked(info, log));
    return info;
  }

  Result<SessionInfo> Fork(std::string_view id, std::string_view new_id,
                           const std::optional<CheckpointRef>& checkpoint) override {
    SessionInfo source;
    std::optional<std::string> prompt;
    std::vector<Message> messages;
    {
      STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
      STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
      STRATA_ASSIGN_OR_RETURN(source, LoadInfo(ref));
      STRATA_ASSIGN_OR_RETURN(ContextLog * log, StorageLocked(source, lock));
      size_t end = log->history().size();
      if (checkpoint) {
        std::vector<ContextLog::CheckpointPosition> marks = log->checkpoints();
        auto mark = std::find_if(marks.begin(), marks.end(),
                                 [&](const ContextLog::CheckpointPosition& m) { return m.id == checkpoint->id; });
        if (mark == marks.end()) {
          return Status::NotFound("session " + source.id + " has no checkpoint " + std::to_string(checkpoint->id) +
                                  " in its current messages");
        }
        end = mark->messages;
        STRATA_RETURN_IF_ERROR(internal::CheckCheckpointTag(source, *checkpoint, std::span(log->history()).first(end)));
      }
      prompt = log->system_prompt();
      messages.assign(log->history().begin(), log->history().begin() + static_cast<ptrdiff_t>(end));
    }
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, Create(source.user, source.agent, new_id, std::nullopt));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(info.id));
    STRATA_ASSIGN_OR_RETURN(ContextLog * log, StorageLocked(info, lock));
    if (prompt) STRATA_RETURN_IF_ERROR(log->WriteSystemPrompt(*prompt));
    if (!messages.empty()) STRATA_RETURN_IF_ERROR(log->Append(std::span<const Message>(messages)));
    for (const Message& m : messages) Account(m, info, +1);
    STRATA_RETURN_IF_ERROR(SaveInfoLocked(info, log));
    return info;
  }

  Result<std::vector<Message>> Messages(std::string_view id) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    STRATA_ASSIGN_OR_RETURN(ContextLog * log, StorageLocked(info, lock));
    return log->history();
  }

  Status Delete(std::string_view id, bool force) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    if (!force) {
      STRATA_ASSIGN_OR_RETURN(std::vector<ArchiveInfo> archives, ArchivesLocked(info.id));
      for (const ArchiveInfo& a : archives) {
        if (a.state != ArchiveState::kDone && a.state != ArchiveState::kFailed) {
          return Status::FailedPrecondition("session " + info.id + ": phase 2 of archive " + std::to_string(a.number) +
                                            " has not finished; wait for it, or delete with force");
        }
      }
    }
    STRATA_RETURN_IF_ERROR(CloseStorageLocked(info.id));
    // One rename makes the session disappear (names starting with '.' are not session ids); what it held
    // is then removed.
    std::string trash = root_ + "/.deleted";
    STRATA_RETURN_IF_ERROR(fs().CreateDirectories(trash));
    std::string gone = trash + "/" + info.id + "-" + std::to_string(options_.clock->WallMicros());
    STRATA_RETURN_IF_ERROR(fs().RenameFile(Dir(info.id), gone));
    STRATA_RETURN_IF_ERROR(fs().SyncDirectory(root_));
    if (options_.fs == PosixFileSystem()) {
      std::error_code ec;
      std::filesystem::remove_all(gone, ec);  // Best effort: a leftover in .deleted is harmless.
    }
    // Its phase-2 jobs go with it (a running one's worker can no longer finish it). A crash before this
    // leaves jobs whose session is gone: the worker removes them when it claims them.
    return options_.queue->RemoveKey(CommitJobKey(info));
  }

  Result<CommitTicket> Commit(std::string_view id) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    STRATA_ASSIGN_OR_RETURN(ContextLog * log, StorageLocked(info, lock));
    int64_t count = static_cast<int64_t>(log->history().size());
    if (count == 0) return Status::FailedPrecondition("session " + info.id + " has no messages to commit");
    // The system prompt is the session's, not the archived messages': the next log starts with it. Written
    // beside the log first, and put in its place after the archive's rename (Open finishes that step after
    // a crash between the two: NextMessagesPath).
    const std::optional<std::string> prompt = log->system_prompt();
    STRATA_RETURN_IF_ERROR(CloseStorageLocked(info.id));
    if (prompt) {
      (void)fs().RemoveFile(NextMessagesPath(info.id));
      std::unique_ptr<ContextLog> next =
          ContextLog::Open(NextMessagesPath(info.id), ContextLogOptions{.fs = options_.fs, .clock = options_.clock});
      STRATA_RETURN_IF_ERROR(next->Restore().status());
      STRATA_RETURN_IF_ERROR(next->WriteSystemPrompt(*prompt));
      STRATA_RETURN_IF_ERROR(next->Close());
    }
    STRATA_ASSIGN_OR_RETURN(int last, LastArchiveLocked(info.id));
    int number = last + 1;
    std::string dir = ArchiveDir(info.id, number);
    STRATA_RETURN_IF_ERROR(fs().CreateDirectories(dir));
    STRATA_RETURN_IF_ERROR(fs().SyncDirectory(Dir(info.id) + "/history"));
    // The one step that moves the messages: before it they are current, after it archived.
    STRATA_RETURN_IF_ERROR(fs().RenameFile(MessagesPath(info.id), dir + "/messages.jsonl"));
    if (prompt) STRATA_RETURN_IF_ERROR(fs().RenameFile(NextMessagesPath(info.id), MessagesPath(info.id)));
    STRATA_RETURN_IF_ERROR(fs().SyncDirectory(Dir(info.id)));
    STRATA_RETURN_IF_ERROR(fs().SyncDirectory(dir));
    STRATA_RETURN_IF_ERROR(WriteState(info.id, number, ArchiveState::kArchived, "", count));
    info.stats.commits += 1;
    info.updated_ms = NowMs();
    STRATA_RETURN_IF_ERROR(fs().WriteFileAtomically(InfoPath(info.id), InfoToJson(info)));
    STRATA_ASSIGN_OR_RETURN(int64_t job, Enqueue(info, number));
    return CommitTicket{number, job, count};
  }

  Result<std::vector<ArchiveInfo>> Archives(std::string_view id) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    return ArchivesLocked(info.id);
  }

  Result<std::vector<Message>> ArchiveMessages(std::string_view id, int archive) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    std::string path = ArchiveDir(info.id, archive) + "/messages.jsonl";
    STRATA_ASSIGN_OR_RETURN(bool exists, fs().FileExists(path));
    if (!exists) return Status::NotFound("session " + info.id + " has no archive " + std::to_string(archive));
    return ReadArchivedMessages(path);
  }

  Status RecordExtracted(std::string_view id, int64_t count) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    info.stats.memories_extracted += count;
    return fs().WriteFileAtomically(InfoPath(info.id), InfoToJson(info));
  }

  Status SetOrigin(std::string_view id, const SessionOrigin& origin) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    info.title = internal::StorableText(origin.title);
    info.source = internal::StorableText(origin.source);
    if (origin.created_ms > 0) info.created_ms = origin.created_ms;
    if (origin.updated_ms > 0) info.updated_ms = origin.updated_ms;
    return fs().WriteFileAtomically(InfoPath(info.id), InfoToJson(info));
  }

  Status AddArchiveNote(std::string_view id, int archive, std::string_view note) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    STRATA_ASSIGN_OR_RETURN(ArchiveInfo current, ReadArchive(info.id, archive));
    current.notes.emplace_back(note);  // Made storable with the rest by WriteState.
    return WriteState(info.id, archive, current.state, current.error, current.messages, current.notes);
  }

  Result<int64_t> EnqueueArchive(std::string_view id, int archive) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    STRATA_ASSIGN_OR_RETURN(ArchiveInfo a, ReadArchive(info.id, archive));
    if (a.state == ArchiveState::kDone) {
      return Status::FailedPrecondition("archive " + std::to_string(archive) + " of session " + info.id + " is done");
    }
    return Enqueue(info, archive);
  }

  Status ImportArchive(std::string_view id, int number, std::span<const Message> messages, ArchiveState state,
                       std::string_view error, const std::vector<std::string>& notes) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    STRATA_ASSIGN_OR_RETURN(int last, LastArchiveLocked(info.id));
    if (number != last + 1) {
      return Status::InvalidArgument("session " + info.id + ": the next archive is " + std::to_string(last + 1) +
                                     ", not " + std::to_string(number));
    }
    std::string dir = ArchiveDir(info.id, number);
    STRATA_RETURN_IF_ERROR(fs().CreateDirectories(dir));
    {
      std::unique_ptr<ContextLog> log =
          ContextLog::Open(dir + "/messages.jsonl", ContextLogOptions{.fs = options_.fs, .clock = options_.clock});
      STRATA_RETURN_IF_ERROR(log->Restore().status());
      STRATA_RETURN_IF_ERROR(log->Append(messages));
      STRATA_RETURN_IF_ERROR(log->Close());
    }
    STRATA_RETURN_IF_ERROR(fs().SyncDirectory(dir));
    STRATA_RETURN_IF_ERROR(WriteState(info.id, number, state, error, static_cast<int64_t>(messages.size()), notes));
    info.stats.commits += 1;
    // The archived messages count in the session's stats, as they did when they were added.
    for (const Message& m : messages) Account(m, info, +1);
    RefreshSummary(std::vector<Message>(messages.begin(), messages.end()), info);
    info.updated_ms = NowMs();
    return fs().WriteFileAtomically(InfoPath(info.id), InfoToJson(info));
  }

  Result<std::optional<std::string>> ReadArchiveFile(std::string_view id, int archive, std::string_view name) override {
    STRATA_RETURN_IF_ERROR(ValidateArchiveFileName(name));
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    Result<std::string> text = fs().ReadFileToString(ArchiveDir(info.id, archive) + "/" + std::string(name));
    if (!text.ok() && text.status().code() == StatusCode::kNotFound) return std::optional<std::string>();
    STRATA_RETURN_IF_ERROR(text.status());
    return std::optional<std::string>(std::move(*text));
  }

  Status WriteArchiveFile(std::string_view id, int archive, std::string_view name, std::string_view content) override {
    STRATA_RETURN_IF_ERROR(ValidateArchiveFileName(name));
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    STRATA_ASSIGN_OR_RETURN(bool exists, fs().FileExists(ArchiveDir(info.id, archive) + "/state.json"));
    if (!exists) return Status::NotFound("session " + info.id + " has no archive " + std::to_string(archive));
    return fs().WriteFileAtomically(ArchiveDir(info.id, archive) + "/" + std::string(name),
                                    internal::StorableText(content));
  }

  Status SetArchiveState(std::string_view id, int archive, ArchiveState state, std::string_view error) override {
    STRATA_ASSIGN_OR_RETURN(ParsedSessionRef ref, ParseSessionRef(id));
    STRATA_ASSIGN_OR_RETURN(SessionLock lock, LockSession(ref.id));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ref));
    STRATA_ASSIGN_OR_RETURN(ArchiveInfo current, ReadArchive(info.id, archive));
    return WriteState(info.id, archive, state, error, current.messages, current.notes);
  }

 private:
  // Runs a function when destroyed (unless moved from).
  class OnRelease {
   public:
    OnRelease() = default;
    OnRelease(OnRelease&& other) noexcept : f_(std::exchange(other.f_, nullptr)) {}
    OnRelease& operator=(OnRelease&&) = delete;
    ~OnRelease() {
      if (f_) f_();
    }
    void Set(std::function<void()> f) { f_ = std::move(f); }

   private:
    std::function<void()> f_;
  };
  struct SessionLock {
    std::shared_ptr<std::mutex> mu;
    std::unique_lock<std::mutex> lock;
    std::unique_ptr<FileLock> file_lock;
    // Releases the log's own file lock before session.lock is released (members are destroyed in reverse
    // order): the log stays cached, and session.lock alone orders the processes.
    OnRelease release_log;
  };
  FileSystem& fs() { return *options_.fs; }
  int64_t NowMs() const { return options_.clock->WallMicros() / 1000; }
  std::string Dir(std::string_view id) const { return root_ + "/" + std::string(id); }
  std::string InfoPath(std::string_view id) const { return Dir(id) + "/session.json"; }
  std::string MessagesPath(std::string_view id) const { return Dir(id) + "/messages.jsonl"; }
  // The next log a commit prepares (its system prompt), renamed into MessagesPath once the messages moved.
  std::string NextMessagesPath(std::string_view id) const { return Dir(id) + "/messages.next.jsonl"; }

  // A commit that stopped between its two renames left the next log beside an archived one: it is put in
  // place. One that stopped before the first left it beside the live log, which stays: it is removed.
  Status FinishCommitRenameLocked(const std::string& id) {
    STRATA_ASSIGN_OR_RETURN(bool next, fs().FileExists(NextMessagesPath(id)));
    if (!next || options_.read_only) return Status::Ok();
    STRATA_ASSIGN_OR_RETURN(bool live, fs().FileExists(MessagesPath(id)));
    if (live) return fs().RemoveFile(NextMessagesPath(id));
    STRATA_RETURN_IF_ERROR(fs().RenameFile(NextMessagesPath(id), MessagesPath(id)));
    return fs().SyncDirectory(Dir(id));
  }
  std::string ArchiveDir(std::string_view id, int n) const { return Dir(id) + "/history/" + ArchiveName(n); }

  // The session `ref` names; another incarnation of its id is as missing as a session that never was.
  Result<SessionInfo> LoadInfo(const ParsedSessionRef& ref) {
    STRATA_RETURN_IF_ERROR(ValidateSessionId(ref.id));
    std::string path = InfoPath(ref.id);
    STRATA_ASSIGN_OR_RETURN(bool exists, fs().FileExists(path));
    if (!exists) return NoSuchSession(ref.id);
    STRATA_ASSIGN_OR_RETURN(std::string text, fs().ReadFileToString(path));
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, InfoFromJson(text, Shown(path)));
    if (ref.exact && info.incarnation != ref.incarnation) return NoSuchSession(ref.id);
    return info;
  }

  // A path as errors show it: relative to the data directory, never where the server keeps it.
  std::string Shown(const std::string& path) const {
    std::string_view parent = std::string_view(root_).substr(0, root_.rfind('/') + 1);
    return path.starts_with(parent) ? path.substr(parent.size()) : path;
  }

  // What session.json says about the log: another process that appended or committed changed it, and a
  // log this process keeps open is then stale (or, after a commit, an archive). The incarnation too: a
  // session deleted and created again by another process may have the same counts, and the log this
  // process kept open is the first incarnation's (its messages served to the second's owner).
  struct LogSignatureOf {
    std::string incarnation;
    std::array<int64_t, 3> counts;
    bool operator==(const LogSignatureOf&) const = default;
  };
  static LogSignatureOf LogSignature(const SessionInfo& info) {
    return {info.incarnation, {info.stats.commits, info.stats.messages, info.stats.revisions}};
  }

  // The open message storage of a session, as `info` (just loaded) describes it; the caller holds the
  // session's lock. A kept storage whose signature no longer matches is closed and read again.
  Result<ContextLog*> StorageLocked(const SessionInfo& info, SessionLock& lock) {
    const std::string& id = info.id;
    lock.release_log.Set([this, id] {
      std::lock_guard map_lock(map_mu_);
      if (auto it = open_.find(id); it != open_.end()) (void)it->second.storage->Close();
    });
    // The file itself replaced (an edit by hand, a tool that rewrites it) also makes the kept log stale: it
    // would refuse every append as "changed by another writer" until the process restarted.
    const auto file_id = FileIdOf(id);
    {
      std::lock_guard map_lock(map_mu_);
      auto it = open_.find(id);
      if (it != open_.end() && it->second.signature == LogSignature(info) && it->second.file_id == file_id) {
        return it->second.storage.get();
      }
    }
    STRATA_RETURN_IF_ERROR(CloseStorageLocked(id));
    STRATA_RETURN_IF_ERROR(FinishCommitRenameLocked(id));
    // Read-only, a commit stopped between its renames is read as it will be finished: the next log.
    std::string path = MessagesPath(id);
    if (options_.read_only) {
      STRATA_ASSIGN_OR_RETURN(bool live, fs().FileExists(path));
      STRATA_ASSIGN_OR_RETURN(bool next, fs().FileExists(NextMessagesPath(id)));
      if (!live && next) path = NextMessagesPath(id);
    }
    std::unique_ptr<ContextLog> storage = ContextLog::Open(
        path, ContextLogOptions{.fs = options_.fs, .clock = options_.clock, .read_only = options_.read_only});
    STRATA_RETURN_IF_ERROR(storage->Restore().status().WithContext(Shown(path)));
    ContextLog* raw = storage.get();
    std::lock_guard map_lock(map_mu_);
    open_[id] = OpenLog{std::move(storage), LogSignature(info), file_id, file_id};
    return raw;
  }

  // Whether the session's messages file is still the one its open log was restored from (same identity).
  // StorageLocked, which the caller ran just before, checked `file_id` against the file itself.
  bool LiveFileIsTheOneRestored(const std::string& id) {
    std::lock_guard map_lock(map_mu_);
    auto it = open_.find(id);
    return it != open_.end() && it->second.file_id && it->second.restored_from &&
           it->second.restored_from->first == it->second.file_id->first;
  }

  // The identity and size of the session's messages file (nullopt when there is none yet): a file written
  // anew may get the inode of the one it replaced, a file edited in place keeps it.
  std::optional<std::pair<uint64_t, uint64_t>> FileIdOf(const std::string& id) {
    Result<uint64_t> file = fs().GetFileId(MessagesPath(id));
    Result<uint64_t> size = fs().GetFileSize(MessagesPath(id));
    if (!file.ok() || !size.ok()) return std::nullopt;
    return std::make_pair(*file, *size);
  }

  // Records that this process changed the log to what `info` now says (after an append, a revert, a
  // compaction: the file may be a new one).
  void NoteLogSignatureLocked(const SessionInfo& info) {
    const auto file_id = FileIdOf(info.id);
    std::lock_guard map_lock(map_mu_);
    if (auto it = open_.find(info.id); it != open_.end()) {
      it->second.signature = LogSignature(info);
      it->second.file_id = file_id;
    }
  }

  // Saves `info` after a change to the log this process holds open (`log`).
  Status SaveInfoLocked(SessionInfo& info, const ContextLog* log) {
    info.updated_ms = NowMs();
    RefreshSummary(log->history(), info);
    Status saved = fs().WriteFileAtomically(InfoPath(info.id), InfoToJson(info));
    if (saved.ok()) {
      NoteLogSignatureLocked(info);
    } else {
      (void)CloseStorageLocked(info.id);  // session.json lags the log: read it again next time.
    }
    return saved;
  }

  // The messages of an archived log (read-only: an archive is never written again).
  Result<std::vector<Message>> ReadArchivedMessages(const std::string& path) {
    std::unique_ptr<ContextLog> log =
        ContextLog::Open(path, ContextLogOptions{.fs = options_.fs, .clock = options_.clock, .read_only = true});
    STRATA_RETURN_IF_ERROR(log->Restore().status().WithContext(Shown(path)));
    return log->history();
  }

  Status CloseStorageLocked(const std::string& id) {
    std::unique_ptr<ContextLog> storage;
    {
      std::lock_guard map_lock(map_mu_);
      auto it = open_.find(id);
      if (it == open_.end()) return Status::Ok();
      storage = std::move(it->second.storage);
      open_.erase(it);
    }
    return storage->Close();
  }

  // The names in `dir`, or none when it does not exist.
  Result<std::vector<std::string>> ListOrEmpty(const std::string& dir) {
    Result<std::vector<std::string>> names = fs().ListDirectory(dir);
    if (!names.ok() && names.status().code() == StatusCode::kNotFound) return std::vector<std::string>();
    return names;
  }

  // The numbers of the archive directories, ascending (including ones a crash left without messages).
  Result<std::vector<int>> ArchiveNumbers(const std::string& id) {
    STRATA_ASSIGN_OR_RETURN(std::vector<std::string> names, ListOrEmpty(Dir(id) + "/history"));
    std::vector<int> numbers;
    for (const std::string& name : names) {
      if (int n = ArchiveNumber(name); n > 0) numbers.push_back(n);
    }
    std::sort(numbers.begin(), numbers.end());
    return numbers;
  }

  Result<int> LastArchiveLocked(const std::string& id) {
    std::string history = Dir(id) + "/history";
    STRATA_RETURN_IF_ERROR(fs().CreateDirectories(history));
    STRATA_ASSIGN_OR_RETURN(std::vector<std::string> names, fs().ListDirectory(history));
    int last = 0;
    for (const std::string& name : names) last = std::max(last, ArchiveNumber(name));
    return last;
  }

  Status WriteState(const std::string& id, int n, ArchiveState state, std::string_view error, int64_t messages,
                    const std::vector<std::string>& notes = {}) {
    Json j = {{"state", ArchiveStateName(state)}, {"messages", messages}, {"updated_ms", NowMs()}};
    if (!error.empty()) j["error"] = internal::StorableText(error);
    if (!notes.empty()) {
      Json& kept = j["notes"] = Json::array();
      for (const std::string& note : notes) kept.push_back(internal::StorableText(note));
    }
    return fs().WriteFileAtomically(ArchiveDir(id, n) + "/state.json", j.dump() + "\n");
  }

  Result<ArchiveInfo> ReadArchive(const std::string& id, int n) {
    ArchiveInfo a;
    a.number = n;
    a.dir = ArchiveDir(id, n);
    std::string path = a.dir + "/state.json";
    STRATA_ASSIGN_OR_RETURN(bool exists, fs().FileExists(path));
    if (!exists) {
      return Status::NotFound("session " + id + " has no archive " + std::to_string(n) + " (" + Shown(path) + " is missing)");
    }
    STRATA_ASSIGN_OR_RETURN(std::string text, fs().ReadFileToString(path));
    Json j = strata::json::ParseOrDiscard<Json>(text);
    if (!j.is_object() || !j.contains("state") || !j["state"].is_string()) {
      return Status::DataLoss(Shown(path) + ": not an archive state (expected {\"state\": ...})");
    }
    STRATA_ASSIGN_OR_RETURN(a.state, ParseArchiveState(j["state"].get<std::string>()));
    const Json* messages = json::Field(j, "messages");
    if (messages != nullptr && !messages->is_number_integer()) {
      return Status::DataLoss(Shown(path) + ": \"messages\" must be an integer, not " +
                              std::string(json::TypeName(*messages)));
    }
    a.messages = json::IntOr(j, "messages", 0);
    a.error = json::StringOr(j, "error");
    if (const Json* notes = json::Field(j, "notes"); notes != nullptr && notes->is_array()) {
      for (const Json& note : *notes) {
        if (note.is_string()) a.notes.push_back(note.get<std::string>());
      }
    }
    return a;
  }

  Result<std::vector<ArchiveInfo>> ArchivesLocked(const std::string& id) {
    std::vector<ArchiveInfo> out;
    STRATA_ASSIGN_OR_RETURN(std::vector<int> numbers, ArchiveNumbers(id));
    for (int n : numbers) {
      // A directory without messages is a commit that crashed before its rename: not an archive.
      STRATA_ASSIGN_OR_RETURN(bool has_messages, fs().FileExists(ArchiveDir(id, n) + "/messages.jsonl"));
      if (!has_messages) continue;
      STRATA_ASSIGN_OR_RETURN(ArchiveInfo a, ReadArchive(id, n));
      out.push_back(std::move(a));
    }
    return out;
  }

  Result<int64_t> Enqueue(const SessionInfo& info, int n) { return internal::EnqueueCommit(*options_.queue, info, n); }

  // Finishes what a crash interrupted: state for archives that lack it, phase-2 jobs for unfinished ones.
  Status RecoverLocked(const std::string& id) {
    STRATA_ASSIGN_OR_RETURN(SessionInfo info, LoadInfo(ParsedSessionRef{id, "", false}));
    STRATA_RETURN_IF_ERROR(FinishCommitRenameLocked(id));
    STRATA_ASSIGN_OR_RETURN(std::vector<int> numbers, ArchiveNumbers(id));
    int64_t commits = 0;
    for (int n : numbers) {
      std::string dir = ArchiveDir(id, n);
      STRATA_ASSIGN_OR_RETURN(bool has_state, fs().FileExists(dir + "/state.json"));
      STRATA_ASSIGN_OR_RETURN(bool has_messages, fs().FileExists(dir + "/messages.jsonl"));
      if (!has_messages) continue;  // Created, but the crash came before the rename: nothing was moved.
      ++commits;
      if (!has_state) {
        STRATA_ASSIGN_OR_RETURN(std::vector<Message> archived, ReadArchivedMessages(dir + "/messages.jsonl"));
        int64_t count = static_cast<int64_t>(archived.size());
        STRATA_RETURN_IF_ERROR(WriteState(id, n, ArchiveState::kArchived, "", count));
      }
      STRATA_ASSIGN_OR_RETURN(ArchiveInfo a, ReadArchive(id, n));
      if (a.state != ArchiveState::kDone && a.state != ArchiveState::kFailed) {
        STRATA_ASSIGN_OR_RETURN(std::optional<std::string> failed, internal::EnqueueUnfinishedCommit(*options_.queue, info, n));
        if (failed) STRATA_RETURN_IF_ERROR(WriteState(id, n, ArchiveState::kFailed, *failed, a.messages, a.notes));
      }
    }
    // A crash after the rename and before session.json was written left the count one short (checkpoint
    // tags count commits: the next log's checkpoints must not take the last log's tags).
    if (info.stats.commits < commits) {
      info.stats.commits = commits;
      STRATA_RETURN_IF_ERROR(fs().WriteFileAtomically(InfoPath(id), InfoToJson(info)));
    }
    return Status::Ok();
  }

  std::string root_;
  SessionsOptions options_;
  // Operations on one session are serialised by its own mutex (threads of this process) and by a flock on
  // <session>/session.lock (other processes sharing the data directory): an append can never land in a
  // log that another process is committing. Different sessions run in parallel.
  Result<SessionLock> LockSession(std::string_view id, bool create = false) {
    if (!create) {
      // No lock entry for a session that does not exist (ids probed over HTTP would pile up).
      STRATA_ASSIGN_OR_RETURN(bool exists, fs().FileExists(Dir(id) + "/session.json"));
      if (!exists) return NoSuchSession(id);
    }
    std::shared_ptr<std::mutex> m;
    {
      std::lock_guard map_lock(map_mu_);
      std::shared_ptr<std::mutex>& slot = locks_[std::string(id)];
      if (!slot) slot = std::make_shared<std::mutex>();
      m = slot;
    }
    SessionLock held{m, std::unique_lock<std::mutex>(*m), nullptr, {}};
    if (create) STRATA_RETURN_IF_ERROR(fs().CreateDirectories(Dir(id)));
    Result<std::unique_ptr<FileLock>> file_lock = fs().LockFile(Dir(id) + "/session.lock", options_.lock_wait);
    if (create && file_lock.status().code() == StatusCode::kNotFound) {
      // A delete of the id took the directory away while this waited for its lock: make it again.
      STRATA_RETURN_IF_ERROR(fs().CreateDirectories(Dir(id)));
      file_lock = fs().LockFile(Dir(id) + "/session.lock", options_.lock_wait);
    }
    if (!file_lock.ok()) {
      if (file_lock.status().code() == StatusCode::kNotFound) return NoSuchSession(id);
      return file_lock.status();
    }
    held.file_lock = std::move(*file_lock);
    return held;
  }

  std::mutex map_mu_;  // Guards the two maps below (not what they point to).
  std::map<std::string, std::shared_ptr<std::mutex>> locks_;
  struct OpenLog {
    std::unique_ptr<ContextLog> storage;
    LogSignatureOf signature;  // LogSignature of the session when last read or written here.
    std::optional<std::pair<uint64_t, uint64_t>> file_id;  // FileIdOf the messages file then.
    std::optional<std::pair<uint64_t, uint64_t>> restored_from;  // FileIdOf it when the log was restored.
  };
  std::map<std::string, OpenLog> open_;
};

}  // namespace

std::string ArchiveName(int number) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "archive_%03d", number);
  return buf;
}

std::string_view ArchiveStateName(ArchiveState state) {
  switch (state) {
    case ArchiveState::kArchived:
      return "archived";
    case ArchiveState::kSummarized:
      return "summarized";
    case ArchiveState::kExtracted:
      return "extracted";
    case ArchiveState::kDone:
      return "done";
    case ArchiveState::kFailed:
      return "failed";
  }
  return "?";
}

Status ValidateArchiveFileName(std::string_view name) {
  bool ok = !name.empty() && name.size() <= 64 && name.front() != '.';
  for (char c : name) ok = ok && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.' || c == '-');
  if (!ok) return Status::InvalidArgument("bad archive file name \"" + std::string(name.substr(0, 64)) + "\"");
  return Status::Ok();
}

Status ValidateSessionId(std::string_view id) { return memory::ValidateScopeId(id, "session"); }

std::string SessionRef(const SessionInfo& info) {
  return info.incarnation.empty() ? info.id : info.id + "@" + info.incarnation;
}

Result<ParsedSessionRef> ParseSessionRef(std::string_view ref) {
  ParsedSessionRef out;
  size_t at = ref.find('@');
  out.id = std::string(ref.substr(0, at));
  STRATA_RETURN_IF_ERROR(ValidateSessionId(out.id));
  if (at != std::string_view::npos) {
    out.exact = true;
    out.incarnation = std::string(ref.substr(at + 1));
    if (out.incarnation.empty()) return Status::InvalidArgument("session reference: no incarnation after '@'");
    STRATA_RETURN_IF_ERROR(internal::ValidateIncarnation(out.incarnation));
  }
  return out;
}

bool RefersTo(std::string_view ref, const SessionInfo& info) {
  size_t at = ref.find('@');
  std::string_view id = ref.substr(0, at);
  std::string_view incarnation = at == std::string_view::npos ? std::string_view() : ref.substr(at + 1);
  return id == info.id && incarnation == info.incarnation;
}

std::string SessionIdOfRef(std::string_view ref) {
  std::string id(ref.substr(0, ref.find('@')));
  return ValidateSessionId(id).ok() ? id : std::string();
}

Status NoSuchSession(std::string_view id) {
  // Ids reach here validated ([A-Za-z0-9_.-], at most 128 bytes): shown as they are.
  return Status::NotFound("no session " + std::string(id));
}

namespace internal {

std::string StorableText(std::string_view text) {
  std::string out = json::ReplaceInvalidUtf8(text);
  for (size_t at = 0; (at = out.find('\0', at)) != std::string::npos; at += 3) out.replace(at, 1, "\xEF\xBF\xBD");
  return out;
}

std::string StorableError(const Status& error) { return StorableText(error.ToString()); }

void MakeStorable(AuditEntry& entry) {
  for (std::string* text : {&entry.source, &entry.reason, &entry.before, &entry.after, &entry.abstract_text,
                            &entry.overview, &entry.category}) {
    *text = StorableText(*text);
  }
}

namespace {

// The first line of `text`, at most `max` bytes; a NUL shown as U+FFFD, as on every backend (PostgreSQL's
// text cannot hold one; the message itself keeps it).
std::string CutLine(std::string_view text, size_t max) {
  size_t nl = text.find('\n');
  std::string_view trimmed = text.substr(0, nl);
  while (!trimmed.empty() && (trimmed.front() == ' ' || trimmed.front() == '\t')) trimmed.remove_prefix(1);
  std::string line = StorableText(trimmed);
  if (line.size() <= max) return line;
  return line.substr(0, Utf8Prefix(line, max)) + "...";
}

}  // namespace

namespace {

// A user message that opens with a <system>…</system> text part is what the agent put there, not what the
// user said: a compaction's summary (kimi-cli's shape, window::MakeSummaryMessage), a notice.
bool FromTheSystem(const Message& m) {
  if (m.role != Role::kUser || m.content.empty()) return false;
  const auto* first = std::get_if<TextPart>(&m.content[0]);
  return first != nullptr && first->text.starts_with("<system>") && first->text.ends_with("</system>");
}

}  // namespace

void Account(const Message& m, SessionInfo& info, int sign) {
  info.stats.messages += sign;
  if (m.role == Role::kUser && !FromTheSystem(m)) info.stats.turns += sign;
  size_t chars = 0;
  for (const ContentPart& part : m.content) {
    if (const auto* text = std::get_if<TextPart>(&part)) chars += text->text.size();
    if (const auto* custom = std::get_if<CustomPart>(&part);
        sign > 0 && custom != nullptr && custom->type == kContextRefPartType) {
      Json j = strata::json::ParseOrDiscard<Json>(custom->json);
      std::string uri = json::StringOr(j, "uri");
      if (uri.empty() || std::find(info.contexts.begin(), info.contexts.end(), uri) != info.contexts.end()) continue;
      info.contexts.push_back(uri);
      info.stats.contexts_used += 1;
      if (json::StringOr(j, "kind") == "skill") info.stats.skills_used += 1;
    }
  }
  if (m.tool_calls) {
    for (const ToolCall& call : *m.tool_calls)
      chars += call.function.name.size() + call.function.arguments.value_or("").size();
  }
  info.stats.tokens += sign * static_cast<int64_t>((chars + 3) / 4);
}

// Phase 2 writes the model's summary of each archive; this one costs no model call.
void RefreshSummary(const std::vector<Message>& messages, SessionInfo& info) {
  std::string first_user, last_user;
  for (const Message& m : messages) {
    if (m.role != Role::kUser || FromTheSystem(m)) continue;  // A summary is not the session's first request.
    std::string text = m.ExtractText(" ");
    if (text.empty()) continue;
    if (first_user.empty()) first_user = text;
    last_user = text;
  }
  if (!first_user.empty()) info.abstract_text = CutLine(first_user, 160);
  info.overview = std::to_string(info.stats.turns) + " turns, " + std::to_string(info.stats.messages) +
                  " messages (~" + std::to_string(info.stats.tokens) + " tokens) since the session began";
  if (!last_user.empty()) info.overview += "; latest request: " + CutLine(last_user, 300);
  if (!info.contexts.empty()) {
    info.overview += "; contexts used: ";
    for (size_t i = 0; i < info.contexts.size() && i < 8; ++i) info.overview += (i ? ", " : "") + info.contexts[i];
    if (info.contexts.size() > 8) info.overview += ", ...";
  }
  if (!info.overview.empty() && std::string_view(".!?。！？").find(info.overview.back()) == std::string_view::npos) {
    info.overview += ".";
  }
}

std::string NewSessionId(int64_t now_ms) {
  static std::mutex mu;  // Sessions are created from many threads.
  std::lock_guard lock(mu);
  static std::mt19937_64 rng(std::random_device{}());
  char buf[48];
  std::snprintf(buf, sizeof buf, "s%lld-%06llx", static_cast<long long>(now_ms),
                static_cast<unsigned long long>(rng() & 0xFFFFFF));
  return buf;
}

Status ValidateOwnerId(std::string_view id, std::string_view what) {
  return id.empty() ? Status::Ok() : memory::ValidateScopeId(id, what);
}

std::string NewIncarnation() {
  static std::mutex mu;
  std::lock_guard lock(mu);
  static std::mt19937_64 rng(std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32));
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(rng()));
  return buf;
}

std::vector<uint64_t> PrefixDigests(std::span<const Message> messages) {
  std::vector<uint64_t> out;
  out.reserve(messages.size() + 1);
  out.push_back(memory::Hash64(""));
  std::string json;
  for (const Message& m : messages) {
    json.clear();
    AppendMessageJson(m, &json);
    out.push_back(memory::Hash64(json, out.back()));
  }
  return out;
}

std::string CheckpointTag(const SessionInfo& info, int64_t id, uint64_t digest_before) {
  return memory::HashHex(info.incarnation + "\n" + std::to_string(info.stats.commits) + "\n" + std::to_string(id) +
                         "\n" + std::to_string(digest_before));
}

Status CheckCheckpointTag(const SessionInfo& info, const CheckpointRef& ref, std::span<const Message> before) {
  if (ref.tag.empty() || CheckpointTag(info, ref.id, PrefixDigests(before).back()) == ref.tag) return Status::Ok();
  return Status::FailedPrecondition("checkpoint " + std::to_string(ref.id) + " of session " + info.id +
                                    " is no longer the one tagged " + json::QuoteForError(ref.tag, 40) +
                                    ": the session was committed, reverted or compacted since, and the id now "
                                    "marks another point (its log lists the current checkpoints)");
}

Status ValidateIncarnation(std::string_view incarnation) {
  bool ok = incarnation.size() <= 32;
  for (char c : incarnation) ok = ok && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z'));
  if (ok) return Status::Ok();
  return Status::InvalidArgument("a session incarnation is 1-32 of [0-9a-z], not " + json::QuoteForError(incarnation, 40));
}

Result<int64_t> EnqueueCommit(JobQueue& queue, const SessionInfo& info, int archive) {
  Json payload = {{"session", info.id}, {"archive", archive}};
  if (!info.incarnation.empty()) payload["incarnation"] = info.incarnation;
  return queue.Enqueue(kCommitJobKind, CommitJobKey(info), payload.dump());
}

Result<std::optional<std::string>> EnqueueUnfinishedCommit(JobQueue& queue, const SessionInfo& info, int archive) {
  STRATA_ASSIGN_OR_RETURN(std::vector<Job> dead, queue.List(JobState::kDead, CommitJobKey(info)));
  for (const Job& job : dead) {
    if (json::IntOr(json::ParseOrDiscard<Json>(job.payload), "archive", -1) == archive) {
      return std::optional<std::string>(job.last_error.empty() ? "its job failed" : job.last_error);
    }
  }
  STRATA_RETURN_IF_ERROR(EnqueueCommit(queue, info, archive).status());
  return std::optional<std::string>();
}

Result<ArchiveState> ParseArchiveState(std::string_view s) {
  for (ArchiveState st : {ArchiveState::kArchived, ArchiveState::kSummarized, ArchiveState::kExtracted,
                          ArchiveState::kDone, ArchiveState::kFailed}) {
    if (ArchiveStateName(st) == s) return st;
  }
  return Status::DataLoss("unknown archive state '" + std::string(s) + "'");
}

}  // namespace internal


Status RegisterContextRefPart() {
  static const Status registered = RegisterContentPartType(std::string(kContextRefPartType), [](std::string_view json) {
    Json j = strata::json::ParseOrDiscard<Json>(json);
    if (!j.is_object() || !j.contains("uri") || !j["uri"].is_string()) {
      return Status::InvalidArgument("a context_ref part needs a string \"uri\"");
    }
    // The whole URI is checked (no "..", NUL or control characters), not just its prefix: it is stored
    // in the session and linked to memories at commit.
    if (Result<memory::Uri> uri = memory::Uri::Parse(j["uri"].get<std::string>()); !uri.ok()) {
      return uri.status().WithContext("context_ref");
    }
    if (j.contains("kind")) {
      std::string kind = j["kind"].is_string() ? j["kind"].get<std::string>() : "";
      if (kind != "memory" && kind != "resource" && kind != "skill") {
        return Status::InvalidArgument("context_ref kind must be memory, resource or skill");
      }
    }
    return Status::Ok();
  });
  return registered.ok() || registered.code() == StatusCode::kAlreadyExists ? Status::Ok() : registered;
}

Result<ContentPart> ContextRef(std::string_view uri, std::string_view kind) {
  STRATA_RETURN_IF_ERROR(RegisterContextRefPart());
  if (!json::IsValidUtf8(uri) || !json::IsValidUtf8(kind)) {
    return Status::InvalidArgument("a context reference's URI and kind must be valid UTF-8");
  }
  Json j = {{"type", kContextRefPartType}, {"uri", std::string(uri)}, {"kind", std::string(kind)}};
  std::string text = j.dump();
  STRATA_RETURN_IF_ERROR(ValidateCustomPart(kContextRefPartType, text));
  return ContentPart(CustomPart{std::string(kContextRefPartType), text});
}

Result<std::unique_ptr<Sessions>> OpenSessions(const std::string& data_dir, SessionsOptions options) {
  auto sessions = std::make_unique<FileSessions>(data_dir + "/sessions", options);
  STRATA_RETURN_IF_ERROR(sessions->Open());
  return std::unique_ptr<Sessions>(std::move(sessions));
}

}  // namespace strata::session
