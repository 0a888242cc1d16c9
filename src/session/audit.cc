#include "strata/session/audit.h"

#include <algorithm>
#include <mutex>

#include "session_common.h"
#include "sqlite_db.h"

namespace strata::session {
namespace {

using sqlite::Db;
using sqlite::Stmt;
using sqlite::Txn;

constexpr std::string_view kSchema = R"sql(
CREATE TABLE IF NOT EXISTS audit(
  id INTEGER PRIMARY KEY,
  uri TEXT NOT NULL,
  action TEXT NOT NULL,
  source TEXT NOT NULL,
  at_ms INTEGER NOT NULL,
  reason TEXT NOT NULL,
  before TEXT NOT NULL,
  after TEXT NOT NULL,
  abstract TEXT NOT NULL,
  overview TEXT NOT NULL,
  category TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS audit_by_uri ON audit(uri, id);
CREATE INDEX IF NOT EXISTS audit_by_source ON audit(source, id);
)sql";

constexpr std::string_view kColumns =
    "id, uri, action, source, at_ms, reason, before, after, abstract, overview, category";

class SqliteAuditLog final : public AuditLog {
 public:
  Status Open(const std::string& path, bool read_only) {
    if (read_only) {
      Status opened = db_.OpenReadOnly(path);
      if (opened.code() != StatusCode::kNotFound) return opened;
      // None yet: an empty one in memory.
      STRATA_RETURN_IF_ERROR(db_.Open(":memory:"));
      return db_.Exec(kSchema);
    }
    STRATA_RETURN_IF_ERROR(db_.OpenDurable(path));
    return db_.Exec(kSchema);
  }

  Status Record(std::vector<AuditEntry>& entries) override {
    std::lock_guard lock(mu_);
    Txn txn(db_);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    Stmt ins(db_,
             "INSERT INTO audit(uri, action, source, at_ms, reason, before, after, abstract, overview, category) "
             "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    for (AuditEntry& e : entries) {
      internal::MakeStorable(e);
      ins.Reset().Bind(1, e.uri).Bind(2, MemoryActionName(e.action)).Bind(3, e.source).Bind(4, e.at_ms).Bind(5, e.reason);
      STRATA_RETURN_IF_ERROR(ins.Bind(6, e.before)
                                 .Bind(7, e.after)
                                 .Bind(8, e.abstract_text)
                                 .Bind(9, e.overview)
                                 .Bind(10, e.category)
                                 .Run());
      e.id = sqlite3_last_insert_rowid(db_.get());
    }
    return txn.Commit();
  }

  Result<std::vector<AuditEntry>> BySource(std::string_view source) override { return Select("source", source); }
  Result<std::vector<AuditEntry>> History(std::string_view uri) override { return Select("uri", uri); }

  Result<std::vector<AuditEntry>> Recent(std::string_view under, size_t limit) override {
    std::string exact(under), prefix(under);
    if (!prefix.empty() && prefix.back() != '/') prefix += '/';
    std::lock_guard lock(mu_);
    Stmt s(db_, "SELECT " + std::string(kColumns) +
                    " FROM audit WHERE uri = ?1 OR substr(uri, 1, length(?2)) = ?2 ORDER BY id DESC LIMIT ?3");
    s.Bind(1, exact);
    s.Bind(2, prefix);
    s.Bind(3, static_cast<int64_t>(std::min<size_t>(limit, 1u << 20)));
    return Rows(s);
  }

 private:
  Result<std::vector<AuditEntry>> Select(std::string_view column, std::string_view value) {
    std::lock_guard lock(mu_);
    Stmt s(db_, "SELECT " + std::string(kColumns) + " FROM audit WHERE " + std::string(column) + " = ?1 ORDER BY id");
    s.Bind(1, value);
    return Rows(s);
  }

  // Reads every row of `s` (columns kColumns). Called with mu_ held.
  Result<std::vector<AuditEntry>> Rows(Stmt& s) {
    std::vector<AuditEntry> out;
    while (true) {
      STRATA_ASSIGN_OR_RETURN(bool row, s.Step());
      if (!row) break;
      Result<MemoryAction> action = ParseMemoryAction(s.Text(2));
      if (!action.ok()) return Status::DataLoss("audit entry " + std::to_string(s.Int(0)) + ": " + action.status().message());
      out.push_back({s.Int(0), s.Text(1), *action, s.Text(3), s.Int(4), s.Text(5), s.Text(6), s.Text(7), s.Text(8),
                     s.Text(9), s.Text(10)});
    }
    return out;
  }

  std::mutex mu_;
  Db db_;
};

}  // namespace

std::string_view MemoryActionName(MemoryAction action) {
  switch (action) {
    case MemoryAction::kCreate: return "create";
    case MemoryAction::kMerge: return "merge";
    case MemoryAction::kSupersede: return "supersede";
    case MemoryAction::kSkip: return "skip";
  }
  return "create";
}

Result<MemoryAction> ParseMemoryAction(std::string_view name) {
  for (MemoryAction a : {MemoryAction::kCreate, MemoryAction::kMerge, MemoryAction::kSupersede, MemoryAction::kSkip}) {
    if (MemoryActionName(a) == name) return a;
  }
  return Status::InvalidArgument("unknown memory action '" + std::string(name.substr(0, 40)) +
                                 "' (create, merge, supersede or skip)");
}

Result<std::unique_ptr<AuditLog>> OpenAuditLog(const std::string& path, bool read_only) {
  auto log = std::make_unique<SqliteAuditLog>();
  STRATA_RETURN_IF_ERROR(log->Open(path, read_only).WithContext("audit log " + path));
  return std::unique_ptr<AuditLog>(std::move(log));
}

}  // namespace strata::session
