#include "strata/engine/migrate.h"

#include <algorithm>
#include <map>

#include "guard.h"

namespace strata {
namespace {

using memory::Node;
using memory::Uri;

constexpr size_t kBatch = 256;
// The files phase 2 keeps beside an archive (memory_pipeline.cc).
constexpr std::string_view kArchiveFiles[] = {"summary.md", "candidates.json", "diff.json"};
// Audit entries read at once; a log longer than this is refused rather than cut (the log cannot be paged).
constexpr size_t kMaxAuditEntries = size_t{1} << 20;
constexpr size_t kMaxDifferences = 100;

// The options that recreate `node`'s layers: a layer equal to the one derived from the content is left to be
// derived again (so it keeps following the content), any other is written as given.
memory::WriteOptions OptionsOf(const Node& node) {
  memory::WriteOptions o;
  if (node.is_dir || node.abstract_text != memory::DeriveAbstract(node.content)) o.abstract_text = node.abstract_text;
  if (node.is_dir || node.overview != memory::DeriveOverview(node.content)) o.overview = node.overview;
  o.type = node.type;
  o.category = node.category;
  o.metadata = node.metadata;
  return o;
}

Status CopyStore(memory::ContextStore& from, memory::ContextStore& to, MigrationReport* report) {
  STRATA_ASSIGN_OR_RETURN(std::vector<Node> nodes, from.List(Uri::Root(), {.recursive = true}));
  std::vector<std::pair<Uri, std::string>> leaves;
  std::vector<memory::WriteOptions> options;
  auto flush = [&]() -> Status {
    if (leaves.empty()) return Status::Ok();
    STRATA_RETURN_IF_ERROR(to.WriteBatch(leaves, options));
    leaves.clear();
    options.clear();
    return Status::Ok();
  };
  for (const Node& listed : nodes) {
    if (listed.is_dir) {
      // Scope roots and kind directories are made by the store itself; their layers are copied all the same.
      STRATA_RETURN_IF_ERROR(flush());
      if (!listed.uri.is_kind_dir()) {
        memory::WriteOptions o = OptionsOf(listed);
        STRATA_RETURN_IF_ERROR(to.Mkdir(listed.uri, o).WithContext(listed.uri.str()));
      }
    } else {
      STRATA_ASSIGN_OR_RETURN(Node node, from.Stat(listed.uri));
      options.push_back(OptionsOf(node));
      leaves.emplace_back(node.uri, std::move(node.content));
      if (leaves.size() >= kBatch) STRATA_RETURN_IF_ERROR(flush());
    }
    ++report->nodes;
  }
  STRATA_RETURN_IF_ERROR(flush());
  for (const Node& node : nodes) {
    STRATA_ASSIGN_OR_RETURN(std::vector<memory::Relation> relations, from.Relations(node.uri));
    for (const memory::Relation& r : relations) {
      if (r.from != node.uri) continue;  // Each link once, from its source.
      STRATA_RETURN_IF_ERROR(to.Link(r.from, r.to, r.reason));
      ++report->relations;
    }
  }
  return Status::Ok();
}

// Replays a log's records in file order: at each position the checkpoints and usage marks recorded there
// (a mark after the checkpoints that precede it), then the next run of messages.
Status CopyLog(session::Sessions& to, const std::string& id, const session::SessionLog& log) {
  if (log.system_prompt) STRATA_RETURN_IF_ERROR(to.SetSystemPrompt(id, *log.system_prompt));
  size_t next_checkpoint = 0, next_mark = 0;
  int64_t checkpoints_done = 0;
  const int64_t n = static_cast<int64_t>(log.messages.size());
  for (int64_t position = 0; position <= n; ++position) {
    while (true) {
      bool checkpoint_here = next_checkpoint < log.checkpoints.size() &&
                             log.checkpoints[next_checkpoint].messages == position;
      bool mark_here = next_mark < log.usage_marks.size() && log.usage_marks[next_mark].messages == position;
      if (mark_here && (!checkpoint_here || log.usage_marks[next_mark].checkpoints <= checkpoints_done)) {
        STRATA_RETURN_IF_ERROR(to.RecordUsage(id, log.usage_marks[next_mark++].tokens));
      } else if (checkpoint_here) {
        STRATA_RETURN_IF_ERROR(to.Checkpoint(id).status());
        ++next_checkpoint;
        ++checkpoints_done;
      } else {
        break;
      }
    }
    if (position == n) break;
    // The messages up to the next position with a record, in one append.
    int64_t end = n;
    if (next_checkpoint < log.checkpoints.size()) end = std::min(end, log.checkpoints[next_checkpoint].messages);
    if (next_mark < log.usage_marks.size()) end = std::min(end, log.usage_marks[next_mark].messages);
    end = std::max(end, position + 1);
    STRATA_RETURN_IF_ERROR(to.Add(id, std::span<const Message>(log.messages).subspan(
                                          static_cast<size_t>(position), static_cast<size_t>(end - position))));
    position = end - 1;
  }
  return Status::Ok();
}

// Queues phase 2 of every archive of `to` that had not finished (ImportArchive queues none).
Status QueueUnfinished(session::Sessions& to) {
  STRATA_ASSIGN_OR_RETURN(std::vector<session::SessionInfo> sessions, to.List());
  for (const session::SessionInfo& info : sessions) {
    STRATA_ASSIGN_OR_RETURN(std::vector<session::ArchiveInfo> archives, to.Archives(session::SessionRef(info)));
    for (const session::ArchiveInfo& a : archives) {
      if (a.state == session::ArchiveState::kDone || a.state == session::ArchiveState::kFailed) continue;
      STRATA_RETURN_IF_ERROR(to.EnqueueArchive(session::SessionRef(info), a.number)
                                 .status()
                                 .WithContext("session " + info.id + " archive " + std::to_string(a.number)));
    }
  }
  return Status::Ok();
}

Status CopySessions(session::Sessions& from, session::Sessions& to, MigrationReport* report) {
  STRATA_ASSIGN_OR_RETURN(std::vector<session::SessionInfo> sessions, from.List());
  for (const session::SessionInfo& info : sessions) {
    // The same incarnation: the audit entries copied below name it as their source (SessionRef), and a copy
    // under a new one would no longer be the session they came from.
    STRATA_RETURN_IF_ERROR(
        to.Create(info.user, info.agent, info.id, std::optional<std::string_view>(info.incarnation))
            .status()
            .WithContext("session " + info.id));
    STRATA_ASSIGN_OR_RETURN(std::vector<session::ArchiveInfo> archives, from.Archives(info.id));
    for (const session::ArchiveInfo& archive : archives) {
      STRATA_ASSIGN_OR_RETURN(std::vector<Message> messages, from.ArchiveMessages(info.id, archive.number));
      STRATA_RETURN_IF_ERROR(
          to.ImportArchive(info.id, archive.number, messages, archive.state, archive.error, archive.notes)
              .WithContext("session " + info.id + " archive " + std::to_string(archive.number)));
      // Phase 2's resumable work: an archive past its summary (or done) needs it to resume (or to report).
      for (std::string_view name : kArchiveFiles) {
        STRATA_ASSIGN_OR_RETURN(std::optional<std::string> file, from.ReadArchiveFile(info.id, archive.number, name));
        if (file) STRATA_RETURN_IF_ERROR(to.WriteArchiveFile(info.id, archive.number, name, *file));
      }
      report->messages += static_cast<int64_t>(messages.size());
      ++report->archives;
    }
    if (info.stats.memories_extracted > 0) {
      STRATA_RETURN_IF_ERROR(to.RecordExtracted(info.id, info.stats.memories_extracted));
    }
    STRATA_ASSIGN_OR_RETURN(session::SessionLog log, from.Log(info.id, /*tags=*/false));
    STRATA_RETURN_IF_ERROR(CopyLog(to, info.id, log).WithContext("session " + info.id));
    // Last, as the copy's writes moved its times: the original's times, title and source.
    STRATA_RETURN_IF_ERROR(to.SetOrigin(info.id, {.title = info.title,
                                                  .source = info.source,
                                                  .created_ms = info.created_ms,
                                                  .updated_ms = info.updated_ms}));
    report->messages += static_cast<int64_t>(log.messages.size());
    ++report->sessions;
  }
  return Status::Ok();
}

Status CopyAudit(session::AuditLog& from, session::AuditLog& to, MigrationReport* report) {
  STRATA_ASSIGN_OR_RETURN(std::vector<session::AuditEntry> entries, from.Recent(Uri::kPrefix, kMaxAuditEntries));
  if (entries.size() >= kMaxAuditEntries) {
    return Status::FailedPrecondition("the audit log holds " + std::to_string(kMaxAuditEntries) +
                                 " entries or more; strata migrate copies at most that many");
  }
  std::reverse(entries.begin(), entries.end());  // Oldest first: the copy keeps their order.
  for (size_t start = 0; start < entries.size(); start += kBatch) {
    std::vector<session::AuditEntry> batch(entries.begin() + static_cast<std::ptrdiff_t>(start),
                                           entries.begin() + static_cast<std::ptrdiff_t>(std::min(entries.size(), start + kBatch)));
    STRATA_RETURN_IF_ERROR(to.Record(batch));
  }
  report->audit_entries = static_cast<int64_t>(entries.size());
  return Status::Ok();
}

class Differences {
 public:
  void Add(std::string what) {
    if (list_.size() < kMaxDifferences) list_.push_back(std::move(what));
    ++count_;
  }
  std::vector<std::string> Take() {
    if (count_ > list_.size()) list_.push_back("... and " + std::to_string(count_ - list_.size()) + " more");
    return std::move(list_);
  }

 private:
  std::vector<std::string> list_;
  size_t count_ = 0;
};

Status VerifyStore(memory::ContextStore& from, memory::ContextStore& to, Differences* diff) {
  STRATA_ASSIGN_OR_RETURN(std::vector<Node> a, from.List(Uri::Root(), {.recursive = true}));
  STRATA_ASSIGN_OR_RETURN(std::vector<Node> b, to.List(Uri::Root(), {.recursive = true}));
  std::map<std::string, const Node*> copied;
  for (const Node& n : b) copied[n.uri.str()] = &n;
  for (const Node& n : a) {
    auto it = copied.find(n.uri.str());
    if (it == copied.end()) {
      diff->Add("missing node " + n.uri.str());
      continue;
    }
    const Node& c = *it->second;
    copied.erase(it);
    if (n.is_dir != c.is_dir || n.type != c.type || n.category != c.category || n.abstract_text != c.abstract_text ||
        n.overview != c.overview || n.metadata != c.metadata || n.size != c.size) {
      diff->Add("node differs: " + n.uri.str());
      continue;
    }
    if (!n.is_dir) {
      STRATA_ASSIGN_OR_RETURN(std::string x, from.Read(n.uri, memory::Level::kContent));
      STRATA_ASSIGN_OR_RETURN(std::string y, to.Read(n.uri, memory::Level::kContent));
      if (x != y) diff->Add("content differs: " + n.uri.str());
    }
    STRATA_ASSIGN_OR_RETURN(std::vector<memory::Relation> ra, from.Relations(n.uri));
    STRATA_ASSIGN_OR_RETURN(std::vector<memory::Relation> rb, to.Relations(n.uri));
    bool same = ra.size() == rb.size();
    for (size_t i = 0; same && i < ra.size(); ++i) {
      same = ra[i].from == rb[i].from && ra[i].to == rb[i].to && ra[i].reason == rb[i].reason;
    }
    if (!same) diff->Add("relations differ: " + n.uri.str());
  }
  for (const auto& [uri, node] : copied) diff->Add("extra node " + uri);
  return Status::Ok();
}

Status VerifySessions(session::Sessions& from, session::Sessions& to, Differences* diff) {
  STRATA_ASSIGN_OR_RETURN(std::vector<session::SessionInfo> sessions, from.List());
  STRATA_ASSIGN_OR_RETURN(std::vector<session::SessionInfo> copies, to.List());
  if (copies.size() != sessions.size()) {
    diff->Add("sessions: " + std::to_string(sessions.size()) + " in the source, " + std::to_string(copies.size()) +
              " in the copy");
  }
  for (const session::SessionInfo& info : sessions) {
    Result<session::SessionInfo> copy = to.Get(info.id);
    if (!copy.ok()) {
      diff->Add("missing session " + info.id);
      continue;
    }
    if (copy->user != info.user || copy->agent != info.agent) diff->Add("session owners differ: " + info.id);
    if (copy->incarnation != info.incarnation) diff->Add("session incarnations differ: " + info.id);
    const session::SessionStats& x = info.stats;
    const session::SessionStats& y = copy->stats;
    // Revisions (reverts, compactions) are not replayed; everything else the stats count is.
    if (x.messages != y.messages || x.turns != y.turns || x.tokens != y.tokens || x.contexts_used != y.contexts_used ||
        x.skills_used != y.skills_used || x.memories_extracted != y.memories_extracted || x.commits != y.commits ||
        info.contexts != copy->contexts) {
      diff->Add("session stats differ: " + info.id);
    }
    STRATA_ASSIGN_OR_RETURN(session::SessionLog a, from.Log(info.id));
    STRATA_ASSIGN_OR_RETURN(session::SessionLog b, to.Log(info.id));
    if (a.system_prompt != b.system_prompt) diff->Add("system prompt differs: " + info.id);
    if (a.messages != b.messages) diff->Add("messages differ: " + info.id);
    bool checkpoints = a.checkpoints.size() == b.checkpoints.size();
    for (size_t i = 0; checkpoints && i < a.checkpoints.size(); ++i) {
      checkpoints = a.checkpoints[i].id == b.checkpoints[i].id && a.checkpoints[i].messages == b.checkpoints[i].messages &&
                    a.checkpoints[i].tag == b.checkpoints[i].tag;
    }
    if (!checkpoints) diff->Add("checkpoints differ: " + info.id);
    bool marks = a.usage_marks.size() == b.usage_marks.size();
    for (size_t i = 0; marks && i < a.usage_marks.size(); ++i) {
      marks = a.usage_marks[i].messages == b.usage_marks[i].messages && a.usage_marks[i].tokens == b.usage_marks[i].tokens &&
              a.usage_marks[i].checkpoints == b.usage_marks[i].checkpoints;
    }
    if (!marks) diff->Add("usage marks differ: " + info.id);
    STRATA_ASSIGN_OR_RETURN(std::vector<session::ArchiveInfo> xa, from.Archives(info.id));
    STRATA_ASSIGN_OR_RETURN(std::vector<session::ArchiveInfo> xb, to.Archives(info.id));
    if (xa.size() != xb.size()) {
      diff->Add("archives differ: " + info.id);
      continue;
    }
    for (size_t i = 0; i < xa.size(); ++i) {
      if (xa[i].number != xb[i].number || xa[i].state != xb[i].state || xa[i].error != xb[i].error ||
          xa[i].notes != xb[i].notes) {
        diff->Add("archive state differs: " + info.id + " #" + std::to_string(xa[i].number));
        continue;
      }
      for (std::string_view name : kArchiveFiles) {
        STRATA_ASSIGN_OR_RETURN(std::optional<std::string> fa, from.ReadArchiveFile(info.id, xa[i].number, name));
        STRATA_ASSIGN_OR_RETURN(std::optional<std::string> fb, to.ReadArchiveFile(info.id, xb[i].number, name));
        if (fa != fb) diff->Add("archive " + std::string(name) + " differs: " + info.id + " #" + std::to_string(xa[i].number));
      }
      STRATA_ASSIGN_OR_RETURN(std::vector<Message> ma, from.ArchiveMessages(info.id, xa[i].number));
      STRATA_ASSIGN_OR_RETURN(std::vector<Message> mb, to.ArchiveMessages(info.id, xb[i].number));
      if (ma != mb) diff->Add("archived messages differ: " + info.id + " #" + std::to_string(xa[i].number));
    }
  }
  return Status::Ok();
}

Status VerifyAudit(session::AuditLog& from, session::AuditLog& to, Differences* diff) {
  STRATA_ASSIGN_OR_RETURN(std::vector<session::AuditEntry> a, from.Recent(Uri::kPrefix, kMaxAuditEntries));
  STRATA_ASSIGN_OR_RETURN(std::vector<session::AuditEntry> b, to.Recent(Uri::kPrefix, kMaxAuditEntries));
  if (a.size() != b.size()) {
    diff->Add("audit log: " + std::to_string(a.size()) + " entries in the source, " + std::to_string(b.size()) +
              " in the copy");
    return Status::Ok();
  }
  for (size_t i = 0; i < a.size(); ++i) {
    const session::AuditEntry& x = a[i];
    const session::AuditEntry& y = b[i];
    if (x.uri != y.uri || x.action != y.action || x.source != y.source || x.at_ms != y.at_ms || x.reason != y.reason ||
        x.before != y.before || x.after != y.after) {
      diff->Add("audit entry differs: " + x.uri + " (" + x.source + ")");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<std::string>> VerifyCopy(Engine& from, Engine& to) {
  return engine_internal::Guard("verify copy", [&]() -> Result<std::vector<std::string>> {
    Differences diff;
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * sa, from.store());
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * sb, to.store());
    // Vectors of another model answer another find (and a store refuses a model it was not written with).
    if (std::string ma = sa->embedder()->model_id(), mb = sb->embedder()->model_id(); ma != mb) {
      diff.Add("the embedding model: " + ma + " in the source, " + mb + " in the copy");
    }
    STRATA_RETURN_IF_ERROR(VerifyStore(*sa, *sb, &diff));
    STRATA_ASSIGN_OR_RETURN(session::Sessions * xa, from.sessions());
    STRATA_ASSIGN_OR_RETURN(session::Sessions * xb, to.sessions());
    STRATA_RETURN_IF_ERROR(VerifySessions(*xa, *xb, &diff));
    STRATA_ASSIGN_OR_RETURN(session::AuditLog * aa, from.audit());
    STRATA_ASSIGN_OR_RETURN(session::AuditLog * ab, to.audit());
    STRATA_RETURN_IF_ERROR(VerifyAudit(*aa, *ab, &diff));
    return diff.Take();
  });
}

Result<MigrationReport> CopyDeployment(Engine& from, Engine& to,
                                       const std::function<void(std::string_view)>& progress) {
  return engine_internal::Guard("copy deployment", [&]() -> Result<MigrationReport> {
    auto say = [&](std::string_view line) {
      if (progress) progress(line);
    };
    MigrationReport report;
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * source_store, from.store());
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore * dest_store, to.store());
    STRATA_ASSIGN_OR_RETURN(session::Sessions * source_sessions, from.sessions());
    STRATA_ASSIGN_OR_RETURN(session::Sessions * dest_sessions, to.sessions());
    STRATA_ASSIGN_OR_RETURN(session::AuditLog * source_audit, from.audit());
    STRATA_ASSIGN_OR_RETURN(session::AuditLog * dest_audit, to.audit());
    STRATA_ASSIGN_OR_RETURN(memory::ContextStore::Stats dest_stats, dest_store->GetStats());
    STRATA_ASSIGN_OR_RETURN(std::vector<session::SessionInfo> dest_list, dest_sessions->List());
    STRATA_ASSIGN_OR_RETURN(std::vector<session::AuditEntry> dest_entries, dest_audit->Recent(Uri::kPrefix, 1));
    if (dest_stats.leaves > 0 || !dest_list.empty() || !dest_entries.empty()) {
      return Status::FailedPrecondition("the destination already holds data (" + std::to_string(dest_stats.leaves) +
                                        " leaves, " + std::to_string(dest_list.size()) +
                                        " sessions): a copy goes into an empty deployment");
    }
    // Clients hold the source's task ids: the copy's queue hands out none of them again (a job queued
    // again below, or a later commit, would answer to an old id and show another session's work).
    STRATA_ASSIGN_OR_RETURN(session::JobQueue * source_queue, from.queue());
    STRATA_ASSIGN_OR_RETURN(session::JobQueue * dest_queue, to.queue());
    STRATA_ASSIGN_OR_RETURN(int64_t last_task, source_queue->LastId());
    STRATA_RETURN_IF_ERROR(dest_queue->SkipIdsThrough(last_task).WithContext("task ids"));
    say("copying the store");
    STRATA_RETURN_IF_ERROR(CopyStore(*source_store, *dest_store, &report).WithContext("store"));
    say("copying " + std::to_string(report.nodes) + " nodes done; copying sessions");
    STRATA_RETURN_IF_ERROR(CopySessions(*source_sessions, *dest_sessions, &report).WithContext("sessions"));
    say("copying the audit log");
    STRATA_RETURN_IF_ERROR(CopyAudit(*source_audit, *dest_audit, &report).WithContext("audit log"));
    // Phase 2 of the archives that had not finished, queued last: a worker already serving the destination
    // finds each with its files and the decisions taken so far.
    STRATA_RETURN_IF_ERROR(QueueUnfinished(*dest_sessions).WithContext("sessions"));
    say("verifying the copy");
    STRATA_ASSIGN_OR_RETURN(report.differences, VerifyCopy(from, to));
    return report;
  });
}

}  // namespace strata
