// Engine::ImportConversations: chat exports (session/chat_export.h) become sessions of a user.
#include <algorithm>

#include "engine_impl.h"
#include "guard.h"
#include "strata/engine/engine.h"
#include "strata/memory/hash.h"
#include "strata/util/clock.h"

namespace strata {

using engine_internal::Guard;

namespace {

// The session an imported conversation becomes: derived from its owners and the export's id for it, so the
// same conversation imported again for the same owner names the same session, and another user's import of
// the same export names another. "<format>-<20 hex digits>", e.g. "chatgpt-3f0c…". Anyone can work the id
// out, so an id taken by another user's session is stepped over: `attempt` 1, 2, ... name the next ones.
std::string ImportedSessionId(std::string_view user, std::string_view agent, const std::string& source, int attempt) {
  std::string prefix = source.substr(0, source.find('-'));
  if (prefix.empty() || prefix.size() > 12) prefix = "import";
  std::string key = std::string(user) + '\0' + std::string(agent) + '\0' + source;
  if (attempt > 0) key += '\0' + std::to_string(attempt);
  return prefix + "-" + memory::HashHex(key).substr(0, 20);
}

constexpr int kImportIdAttempts = 8;

// The origin an import records the moment it creates a session (under the session's change lock), replaced
// by the conversation's own source when it finishes: a session with it is an import begun here, which one cut
// short may take over. A session without any origin is one begun here by hand, never an import's to delete.
std::string ImportingSource(const std::string& source) { return "importing " + source; }

int64_t NowMsForImport() { return SystemClock()->WallMicros() / 1000; }

// A conversation imported before, in an export again, with its session held (no turn, append or other
// import between the comparison and the append): unchanged when the session holds exactly its messages
// (those its commits archived, then its live ones); continued when it holds the start of it — the
// conversation went on after it was exported — the new messages appended and returned for the caller to
// commit and report; skipped, saying why, when it holds other messages (turns added to the session since).
Result<std::optional<ChatImportReport::Imported>> ContinueImport(session::Sessions& sessions,
                                                                 const session::SessionInfo& existing,
                                                                 const session::ImportedConversation& c,
                                                                 const std::string& where, ChatImportReport* report) {
  const std::string ref = session::SessionRef(existing);
  std::vector<Message> held;
  STRATA_ASSIGN_OR_RETURN(std::vector<session::ArchiveInfo> archives, sessions.Archives(ref));
  std::sort(archives.begin(), archives.end(), [](const auto& a, const auto& b) { return a.number < b.number; });
  for (const session::ArchiveInfo& a : archives) {
    STRATA_ASSIGN_OR_RETURN(std::vector<Message> archived, sessions.ArchiveMessages(ref, a.number));
    held.insert(held.end(), std::make_move_iterator(archived.begin()), std::make_move_iterator(archived.end()));
  }
  STRATA_ASSIGN_OR_RETURN(std::vector<Message> live, sessions.Messages(ref));
  held.insert(held.end(), std::make_move_iterator(live.begin()), std::make_move_iterator(live.end()));
  const bool start = held.size() <= c.messages.size() && std::equal(held.begin(), held.end(), c.messages.begin());
  if (start && held.size() == c.messages.size()) {
    report->unchanged.push_back(existing.id);
    return std::optional<ChatImportReport::Imported>();
  }
  if (!start) {
    report->skipped.push_back({where, "session " + existing.id + " holds an earlier import of this conversation and " +
                                          "other messages than the start of the " + std::to_string(c.messages.size()) +
                                          " it has now: not merged (delete the session to import it again)"});
    return std::optional<ChatImportReport::Imported>();
  }
  std::span<const Message> added(c.messages.begin() + static_cast<std::ptrdiff_t>(held.size()), c.messages.end());
  if (Status appended = sessions.Add(ref, added); !appended.ok()) {
    if (appended.code() != StatusCode::kInvalidArgument) return appended;
    report->skipped.push_back({where, std::string(appended.message())});
    return std::optional<ChatImportReport::Imported>();
  }
  return std::optional(
      ChatImportReport::Imported{existing.id, c.title, c.source_id, static_cast<int64_t>(added.size()), 0, true});
}

}  // namespace

Result<ChatImportReport> Engine::ImportConversations(const session::ChatExport& exported, std::string_view user,
                                                     std::string_view agent, bool commit) {
  STRATA_RETURN_IF_ERROR(engine_internal::Writable(options(), "session import"));
  return Guard("session import", [&]() -> Result<ChatImportReport> {
    if (user.empty()) return Status::InvalidArgument("session import: a user is needed (whose sessions they become)");
    // Checked before the export's content decides whether a session is made (an export with nothing to
    // import let any user name through).
    STRATA_RETURN_IF_ERROR(memory::ValidateScopeId(user, "user"));
    if (!agent.empty()) STRATA_RETURN_IF_ERROR(memory::ValidateScopeId(agent, "agent"));
    STRATA_ASSIGN_OR_RETURN(session::Sessions * sessions, this->sessions());
    ChatImportReport report;
    report.skipped = exported.skipped;
    for (const session::ImportedConversation& c : exported.conversations) {
      const std::string where = c.source_id + (c.title.empty() ? "" : " (" + c.title + ")");
      // This user's session of the conversation, wherever it is among the ids (one taken when it was
      // imported may be free since: a second copy must not go there), else the first free id.
      std::string id;
      Result<session::SessionInfo> existing = Status::NotFound("");
      std::string free_id;
      for (int attempt = 0; attempt < kImportIdAttempts; ++attempt) {
        std::string candidate = ImportedSessionId(user, agent, c.source_id, attempt);
        Result<session::SessionInfo> got = sessions->Get(candidate);
        if (!got.ok()) {
          if (got.status().code() != StatusCode::kNotFound) return got.status();
          if (free_id.empty()) free_id = candidate;
          continue;
        }
        if (got->user == user && got->source.empty()) {
          // No origin yet: an import creating it this moment records its marker under the session's change
          // lock, so read it again under that lock; still none, it is the user's own, and stepped over.
          auto held = impl_->HoldForChange(candidate, "import a conversation");
          if (!held.ok()) continue;
          got = sessions->Get(candidate);
          if (!got.ok()) {
            if (got.status().code() != StatusCode::kNotFound) return got.status();
            if (free_id.empty()) free_id = candidate;
            continue;
          }
        }
        if (got->user == user && (got->source == c.source_id || got->source == ImportingSource(c.source_id))) {
          id = std::move(candidate);
          existing = std::move(got);
          break;
        }
      }
      if (id.empty()) {
        if (free_id.empty()) {
          report.skipped.push_back({where, "the session ids of this conversation's import are taken"});
          continue;
        }
        id = free_id;
      }
      if (existing.ok()) {
        if (existing->source == c.source_id && existing->user == user) {
          const std::string ref = session::SessionRef(*existing);
          std::optional<ChatImportReport::Imported> continued;
          {
            STRATA_ASSIGN_OR_RETURN(auto held, impl_->HoldForChange(ref, "import it again"));
            STRATA_ASSIGN_OR_RETURN(continued, ContinueImport(*sessions, *existing, c, where, &report));
          }
          if (continued) {
            if (commit) {
              STRATA_ASSIGN_OR_RETURN(CommitOutcome committed, Commit(ref, {}));
              continued->archive = committed.ticket.archive;
            }
            STRATA_RETURN_IF_ERROR(sessions->SetOrigin(
                ref, {.title = c.title, .source = c.source_id, .created_ms = c.created_ms, .updated_ms = c.updated_ms}));
            report.imported.push_back(std::move(*continued));
          }
          continue;
        }
        // The search above took only this conversation's import or one marked as being imported: created,
        // but its origin never recorded (the last step): an import cut short, done again — unless it changed
        // in the last two minutes, when another import of it may still be running.
        if (existing->updated_ms > NowMsForImport() - 120'000) {
          report.skipped.push_back({where, "session " + id + " is being imported by another call; try again later"});
          continue;
        }
        STRATA_RETURN_IF_ERROR(DeleteSession(session::SessionRef(*existing), /*force=*/true));
      } else if (existing.status().code() != StatusCode::kNotFound) {
        return existing.status();
      }
      Result<session::SessionInfo> created = Status::Unavailable("");
      {
        // Created and marked as an import under the session's change lock (see ImportingSource).
        auto held = impl_->HoldForChange(id, "import a conversation");
        if (!held.ok()) {
          report.skipped.push_back({where, std::string(held.status().message())});
          continue;
        }
        created = CreateSession(user, agent, id);
        if (created.ok()) {
          Status marked = sessions->SetOrigin(session::SessionRef(*created),
                                              {.title = c.title, .source = ImportingSource(c.source_id)});
          if (!marked.ok()) {
            // Unmarked, it would pass for the user's own session forever: it goes, as it came.
            (void)DeleteSession(session::SessionRef(*created), /*force=*/true);
            return marked;
          }
        }
      }
      if (!created.ok()) {
        if (created.status().code() != StatusCode::kAlreadyExists) return created.status();
        report.skipped.push_back({where, "another import created session " + id + " at the same time"});
        continue;
      }
      // Everything below names this incarnation: a concurrent import that replaced the session is not touched.
      const std::string ref = session::SessionRef(*created);
      Result<session::SessionInfo> added = AddMessages(ref, c.messages);
      if (!added.ok()) {
        // A message the log refuses: the conversation is skipped, not half imported.
        (void)DeleteSession(ref, /*force=*/true);
        if (added.status().code() != StatusCode::kInvalidArgument) return added.status();
        report.skipped.push_back({where, std::string(added.status().message())});
        continue;
      }
      ChatImportReport::Imported done{id, c.title, c.source_id, static_cast<int64_t>(c.messages.size()), 0};
      if (commit) {
        STRATA_ASSIGN_OR_RETURN(CommitOutcome committed, Commit(ref, {}));
        done.archive = committed.ticket.archive;
      }
      // Last: a session with its origin recorded is a finished import (see above), and its times are the
      // conversation's, not this run's.
      STRATA_RETURN_IF_ERROR(sessions->SetOrigin(
          ref,
          {.title = c.title, .source = c.source_id, .created_ms = c.created_ms, .updated_ms = c.updated_ms}));
      report.imported.push_back(std::move(done));
    }
    return report;
  });
}

}  // namespace strata
