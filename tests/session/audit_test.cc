// AuditLog on both backends: ids in order, by source, by memory, and the newest changes under a URI
// (a prefix of a name is not its parent; LIKE wildcards in a URI are literal).
#include "strata/session/audit.h"

#include <gtest/gtest.h>

#include "pg_test_util.h"
#include "test_util.h"

namespace strata::session {
namespace {

class AuditLogTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    Result<std::unique_ptr<AuditLog>> log = Status::Internal("unset");
    if (GetParam() == "postgres") {
      auto url = testing::NewPostgresDatabase();
      ASSERT_OK(url);
      log = OpenPgAuditLog(*url);
    } else {
      log = OpenAuditLog(dir_.File("audit.db"));
    }
    ASSERT_OK(log);
    log_ = std::move(*log);
  }
  static AuditEntry Entry(std::string uri, MemoryAction action, std::string source) {
    AuditEntry e;
    e.uri = std::move(uri);
    e.action = action;
    e.source = std::move(source);
    e.at_ms = 1000;
    e.reason = "because";
    e.after = "text of " + e.uri;
    return e;
  }
  static std::vector<std::string> Uris(const std::vector<AuditEntry>& entries) {
    std::vector<std::string> out;
    for (const AuditEntry& e : entries) out.push_back(e.uri);
    return out;
  }
  testing::TempDir dir_;
  std::unique_ptr<AuditLog> log_;
};

INSTANTIATE_TEST_SUITE_P(Backends, AuditLogTest, ::testing::Values("sqlite", "postgres"),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });

// A model's reason (or a category) holding a NUL or bytes that are not UTF-8 is kept as every backend keeps
// free text, U+FFFD in their place: PostgreSQL refused the whole record, and remember and phase 2 with it.
TEST_P(AuditLogTest, AReasonHoldingANulOrBadBytesIsKeptAlikeOnEveryBackend) {
  using namespace std::string_literals;
  std::vector<AuditEntry> entries = {Entry("strata://user/alice/memories/preferences/seat", MemoryAction::kSkip, "s#1#0")};
  entries[0].reason = "same fact\0 again \xff"s;
  entries[0].category = "pref\0"s;
  ASSERT_OK(log_->Record(entries));
  auto history = log_->History("strata://user/alice/memories/preferences/seat");
  ASSERT_OK(history);
  ASSERT_EQ(history->size(), 1u);
  EXPECT_EQ((*history)[0].reason, "same fact\xEF\xBF\xBD again \xEF\xBF\xBD");
  EXPECT_EQ((*history)[0].category, "pref\xEF\xBF\xBD");
}

TEST_P(AuditLogTest, RecordsAndReadsBackBySourceMemoryAndScope) {
  std::vector<AuditEntry> first = {Entry("strata://user/alice/memories/preferences/seat", MemoryAction::kCreate, "s#1#0"),
                                   Entry("strata://user/al/memories/x", MemoryAction::kCreate, "s#1#1"),
                                   Entry("strata://user/a_b/memories/y", MemoryAction::kCreate, "s#1#2")};
  ASSERT_OK(log_->Record(first));
  EXPECT_LT(first[0].id, first[1].id);
  EXPECT_LT(first[1].id, first[2].id);
  std::vector<AuditEntry> second = {Entry("strata://user/alice/memories/preferences/seat", MemoryAction::kMerge, "s#2#0"),
                                    Entry("strata://user/aXb/memories/z", MemoryAction::kSupersede, "s#2#1")};
  second[0].before = "text before";
  ASSERT_OK(log_->Record(second));

  auto by_source = log_->BySource("s#1#1");
  ASSERT_OK(by_source);
  EXPECT_EQ(Uris(*by_source), std::vector<std::string>{"strata://user/al/memories/x"});
  auto history = log_->History("strata://user/alice/memories/preferences/seat");
  ASSERT_OK(history);
  ASSERT_EQ(history->size(), 2u);
  EXPECT_EQ((*history)[0].action, MemoryAction::kCreate);
  EXPECT_EQ((*history)[1].action, MemoryAction::kMerge);
  EXPECT_EQ((*history)[1].before, "text before");
  EXPECT_EQ((*history)[1].reason, "because");

  auto alice = log_->Recent("strata://user/alice", 10);
  ASSERT_OK(alice);
  EXPECT_EQ(Uris(*alice), (std::vector<std::string>{"strata://user/alice/memories/preferences/seat",
                                                   "strata://user/alice/memories/preferences/seat"}))
      << "strata://user/al is not under strata://user/alice's prefix, nor the reverse";
  auto underscore = log_->Recent("strata://user/a_b", 10);
  ASSERT_OK(underscore);
  EXPECT_EQ(Uris(*underscore), std::vector<std::string>{"strata://user/a_b/memories/y"}) << "_ is no wildcard";
  auto exact = log_->Recent("strata://user/al/memories/x", 10);
  ASSERT_OK(exact);
  EXPECT_EQ(exact->size(), 1u);
  auto everything = log_->Recent("strata://", 3);
  ASSERT_OK(everything);
  EXPECT_EQ(Uris(*everything), (std::vector<std::string>{"strata://user/aXb/memories/z",
                                                        "strata://user/alice/memories/preferences/seat",
                                                        "strata://user/a_b/memories/y"}))
      << "newest first, at most the limit";
}

}  // namespace
}  // namespace strata::session
