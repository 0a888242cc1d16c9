// The audit log on PostgreSQL: the same contract as the SQLite log (audit.h), shared by every Strata
// instance on the database. Entries get their ids from one sequence, so "newest first" is the order in
// which instances recorded them.
#include <algorithm>
#include <mutex>

#include "pg.h"
#include "session_common.h"
#include "strata/session/audit.h"

namespace strata::session {
namespace {

// Version i+1 of the schema is kMigrations[i]; never edit a step once released, add one.
constexpr std::string_view kMigrations[] = {
    R"sql(
CREATE TABLE audit(
  id BIGSERIAL PRIMARY KEY,
  uri TEXT NOT NULL,
  action TEXT NOT NULL,
  source TEXT NOT NULL,
  at_ms BIGINT NOT NULL,
  reason TEXT NOT NULL,
  before TEXT NOT NULL,
  after TEXT NOT NULL,
  abstract TEXT NOT NULL,
  overview TEXT NOT NULL,
  category TEXT NOT NULL);
CREATE INDEX audit_by_uri ON audit(uri, id);
CREATE INDEX audit_by_source ON audit(source, id);
-- Prefix scans (the newest changes under a URI) use the index with the C collation.
CREATE INDEX audit_by_uri_prefix ON audit(uri text_pattern_ops, id);
)sql",
};

constexpr std::string_view kColumns = "id, uri, action, source, at_ms, reason, before, after, abstract, overview, category";

class PgAuditLog final : public AuditLog {
 public:
  Status Open(const std::string& url) {
    STRATA_ASSIGN_OR_RETURN(conn_, pg::Conn::Connect(url));
    return pg::Migrate(*conn_, "audit", kMigrations);
  }

  Status Record(std::vector<AuditEntry>& entries) override {
    std::lock_guard lock(mu_);
    pg::Txn txn(*conn_);
    STRATA_RETURN_IF_ERROR(txn.Begin());
    for (AuditEntry& e : entries) {
      internal::MakeStorable(e);
      STRATA_ASSIGN_OR_RETURN(
          pg::Rows r,
          conn_->Exec("INSERT INTO audit(uri, action, source, at_ms, reason, before, after, abstract, overview, category) "
                      "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) RETURNING id",
                      {e.uri, MemoryActionName(e.action), e.source, e.at_ms, e.reason, e.before, e.after, e.abstract_text,
                       e.overview, e.category}));
      STRATA_ASSIGN_OR_RETURN(e.id, r.Int(0, 0));
    }
    return txn.Commit();
  }

  Result<std::vector<AuditEntry>> BySource(std::string_view source) override {
    return Select("WHERE source = $1 ORDER BY id", {source});
  }
  Result<std::vector<AuditEntry>> History(std::string_view uri) override {
    return Select("WHERE uri = $1 ORDER BY id", {uri});
  }
  Result<std::vector<AuditEntry>> Recent(std::string_view under, size_t limit) override {
    std::string prefix(under);
    if (!prefix.empty() && prefix.back() != '/') prefix += '/';
    // LIKE with the prefix's wildcards escaped: the index on text_pattern_ops serves it.
    std::string pattern;
    for (char c : prefix) {
      if (c == '%' || c == '_' || c == '\\') pattern += '\\';
      pattern += c;
    }
    pattern += '%';
    return Select("WHERE uri = $1 OR uri LIKE $2 ORDER BY id DESC LIMIT $3",
                  {under, pattern, static_cast<int64_t>(std::min<size_t>(limit, 1u << 20))});
  }

 private:
  Result<std::vector<AuditEntry>> Select(const std::string& where, std::initializer_list<pg::Param> params) {
    std::lock_guard lock(mu_);
    STRATA_ASSIGN_OR_RETURN(pg::Rows r, conn_->Exec("SELECT " + std::string(kColumns) + " FROM audit " + where, params));
    std::vector<AuditEntry> out;
    out.reserve(static_cast<size_t>(r.size()));
    for (int i = 0; i < r.size(); ++i) {
      AuditEntry e;
      STRATA_ASSIGN_OR_RETURN(e.id, r.Int(i, 0));
      STRATA_ASSIGN_OR_RETURN(e.uri, r.Text(i, 1));
      STRATA_ASSIGN_OR_RETURN(std::string action, r.Text(i, 2));
      Result<MemoryAction> parsed = ParseMemoryAction(action);
      if (!parsed.ok()) return Status::DataLoss("audit entry " + std::to_string(e.id) + ": " + parsed.status().message());
      e.action = *parsed;
      STRATA_ASSIGN_OR_RETURN(e.source, r.Text(i, 3));
      STRATA_ASSIGN_OR_RETURN(e.at_ms, r.Int(i, 4));
      STRATA_ASSIGN_OR_RETURN(e.reason, r.Text(i, 5));
      STRATA_ASSIGN_OR_RETURN(e.before, r.Text(i, 6));
      STRATA_ASSIGN_OR_RETURN(e.after, r.Text(i, 7));
      STRATA_ASSIGN_OR_RETURN(e.abstract_text, r.Text(i, 8));
      STRATA_ASSIGN_OR_RETURN(e.overview, r.Text(i, 9));
      STRATA_ASSIGN_OR_RETURN(e.category, r.Text(i, 10));
      out.push_back(std::move(e));
    }
    return out;
  }

  std::mutex mu_;  // Guards conn_ (one libpq connection).
  std::unique_ptr<pg::Conn> conn_;
};

}  // namespace

Result<std::unique_ptr<AuditLog>> OpenPgAuditLog(const std::string& url) {
  auto log = std::make_unique<PgAuditLog>();
  STRATA_RETURN_IF_ERROR(log->Open(url).WithContext("audit log " + pg::RedactUrl(url)));
  return std::unique_ptr<AuditLog>(std::move(log));
}

}  // namespace strata::session
