// Crash simulation: a power loss at every byte of an append, and at every sync of a revert, must lose at
// most the record being written, and the next append must be clean.
#include <gtest/gtest.h>

#include "strata/log/context_log.h"
#include "strata/log/linear_storage.h"
#include "strata/message/message_json.h"
#include "strata/util/memory_file_system.h"
#include "test_util.h"

namespace strata {
namespace {

constexpr char kPath[] = "d/context.jsonl";

std::string Line(const Message& m) { return MessageToJson(m) + "\n"; }

class CrashTest : public ::testing::Test {
 protected:
  void SetUp() override {
    base_ = {Message::User("你好, are you there?"), Message::Assistant("Yes — ready.")};
    for (const Message& m : base_) base_bytes_ += Line(m);
  }
  std::unique_ptr<ContextLog> Open(FaultInjectionFileSystem* fs, Durability policy = Durability::kNone) {
    ContextLogOptions options;
    options.fs = fs;
    options.durability.policy = policy;
    return ContextLog::Open(kPath, options);
  }
  std::vector<Message> base_;
  std::string base_bytes_;
};

TEST_F(CrashTest, CrashAtEveryByteOfAnAppendLosesOnlyTheTornRecord) {
  Message torn = Message::Assistant("a reply with 中文 and a tool call");
  torn.tool_calls = std::vector<ToolCall>{ToolCall{"c1", {"search", "{\"q\":\"x\"}"}, std::nullopt, std::nullopt}};
  const std::string torn_line = Line(torn);
  Message next = Message::User("next");
  for (size_t k = 0; k <= torn_line.size(); ++k) {
    SCOPED_TRACE("crash after " + std::to_string(k) + " of " + std::to_string(torn_line.size()) + " bytes");
    FaultInjectionFileSystem fs;
    fs.SetFileDurably(kPath, base_bytes_);
    {
      auto log = Open(&fs);
      ASSERT_OK(log->Restore());
      ASSERT_OK(log->Append(torn));
    }
    fs.SimulateCrash([&](const std::string&, size_t) { return k; });

    // A complete JSON record survives even without its newline; anything shorter is a torn tail.
    bool record_survives = k >= torn_line.size() - 1;
    std::vector<Message> expected = base_;
    if (record_survives) expected.push_back(torn);
    {
      auto log = Open(&fs);
      ASSERT_OK(log->Restore());
      EXPECT_EQ(log->history(), expected);
      bool has_torn_tail = k > 0 && !record_survives;
      EXPECT_EQ(log->restore_report().scan.torn_tail.has_value(), has_torn_tail);
      ASSERT_OK(log->Append(next));
      ASSERT_OK(log->Sync());
    }
    expected.push_back(next);
    std::string expected_bytes = base_bytes_ + (record_survives ? torn_line : "") + Line(next);
    EXPECT_EQ(*fs.GetContents(kPath), expected_bytes) << "the next append is clean";
    bool backup = k > 0 && !record_survives;
    EXPECT_EQ(*fs.FileExists(std::string(kPath) + ".torn-1"), backup);
    if (backup) {
      EXPECT_EQ(*fs.GetContents(std::string(kPath) + ".torn-1"), torn_line.substr(0, k));
    }
    auto log = Open(&fs);
    ASSERT_OK(log->Restore());
    EXPECT_EQ(log->history(), expected);
    EXPECT_TRUE(log->restore_report().scan.damage.empty());
  }
}

TEST_F(CrashTest, TornWriteThenCrashUnderAlwaysPolicy) {
  const std::string line = Line(Message::User("partial"));
  for (size_t k = 0; k < line.size(); ++k) {
    SCOPED_TRACE(k);
    FaultInjectionFileSystem fs;
    fs.SetFileDurably(kPath, base_bytes_);
    {
      auto log = Open(&fs, Durability::kAlways);
      ASSERT_OK(log->Restore());
      fs.SetWriteBudget(static_cast<int64_t>(k));
      Status failed = log->Append(Message::User("partial"));
      EXPECT_FALSE(failed.ok());
      // The disk is still full: the next append fails the same way. The writer is not poisoned, because
      // the partial record was cut off.
      EXPECT_EQ(log->Append(Message::User("more")).code(), failed.code());
    }
    fs.SimulateCrash([](const std::string&, size_t n) { return n; });  // Even if every written byte landed.
    auto log = Open(&fs, Durability::kAlways);
    ASSERT_OK(log->Restore());
    EXPECT_EQ(log->history().size(), base_.size()) << "no partial record is left to restore";
    EXPECT_TRUE(log->restore_report().scan.damage.empty());
    ASSERT_OK(log->Append(Message::User("after")));
    auto again = Open(&fs, Durability::kAlways);
    ASSERT_OK(log->Close());
    ASSERT_OK(again->Restore());
    EXPECT_TRUE(again->restore_report().scan.damage.empty());
    EXPECT_EQ(again->history().back(), Message::User("after"));
  }
}

// A full disk: the failed append leaves no partial record (before, every later open found a torn tail and
// tried to copy it to .torn-N on the same full disk), and once there is room the same writer goes on.
TEST_F(CrashTest, FailedAppendOnAFullDiskLeavesNoPartialRecord) {
  const std::string line = Line(Message::User("partial"));
  for (size_t k = 1; k < line.size(); k += 7) {
    SCOPED_TRACE(k);
    FaultInjectionFileSystem fs;
    fs.SetFileDurably(kPath, base_bytes_);
    auto log = Open(&fs, Durability::kAlways);
    ASSERT_OK(log->Restore());
    fs.SetWriteBudget(static_cast<int64_t>(k));
    EXPECT_FALSE(log->Append(Message::User("partial")).ok());
    auto contents = fs.GetContents(kPath);
    ASSERT_OK(contents);
    EXPECT_EQ(*contents, base_bytes_) << "the torn bytes are cut off at once";
    fs.SetWriteBudget(-1);  // Space again.
    ASSERT_OK(log->Append(Message::User("after")));
    ASSERT_OK(log->Close());
    auto again = Open(&fs, Durability::kAlways);
    ASSERT_OK(again->Restore());
    EXPECT_TRUE(again->restore_report().scan.damage.empty());
    EXPECT_EQ(again->history().size(), base_.size() + 1);
    EXPECT_EQ(again->history().back(), Message::User("after"));
    auto names = fs.ListDirectory("d");
    ASSERT_OK(names);
    for (const std::string& name : *names) EXPECT_EQ(name.find(".torn"), std::string::npos) << name;
  }
}

TEST_F(CrashTest, AcknowledgedAppendsSurviveUnderAlwaysPolicy) {
  FaultInjectionFileSystem fs;
  ASSERT_OK(fs.CreateDirectories("d"));
  ASSERT_OK(fs.SyncDirectory("d"));
  {
    auto log = Open(&fs, Durability::kAlways);
    ASSERT_OK(log->Restore());
    ASSERT_OK(log->Append(base_));  // Creates the file: its name must be made durable too.
    ASSERT_OK(log->UpdateTokenCount(42));
  }
  fs.SimulateCrash();
  auto log = Open(&fs);
  ASSERT_OK(log->Restore());
  EXPECT_EQ(log->history(), base_);
  EXPECT_EQ(log->token_count(), 42);
}

TEST_F(CrashTest, RevertFailingAtAnySyncLeavesOldOrNewStateNeverNeither) {
  for (int fail_at = 0; fail_at < 8; ++fail_at) {
    SCOPED_TRACE("sync " + std::to_string(fail_at) + " fails");
    FaultInjectionFileSystem fs;
    ASSERT_OK(fs.CreateDirectories("d"));
    std::vector<Message> before_revert, after_revert;
    {
      auto log = Open(&fs, Durability::kAlways);
      ASSERT_OK(log->Restore());
      ASSERT_OK(log->Append(base_[0]));
      ASSERT_OK(log->Checkpoint(false));
      ASSERT_OK(log->Append(base_[1]));
      ASSERT_OK(fs.SyncDirectory("d"));
      before_revert = log->history();
      after_revert = {base_[0]};
      fs.FailSyncAt(fail_at);
      Status s = log->RevertTo(0);
      (void)s;  // It may fail or succeed depending on where the fault lands.
    }
    fs.SimulateCrash();
    auto log = Open(&fs);
    ASSERT_OK(log->Restore());
    EXPECT_TRUE(log->history() == before_revert || log->history() == after_revert)
        << "history has " << log->history().size() << " messages";
    EXPECT_TRUE(log->restore_report().scan.damage.empty());
  }
}

TEST_F(CrashTest, RewriteFailingAtAnySyncLeavesOldOrNewContextNeverAMix) {
  std::vector<Message> compacted = {Message::User("<summary>"), Message::Assistant("kept")};
  for (int fail_at = 0; fail_at < 8; ++fail_at) {
    SCOPED_TRACE("sync " + std::to_string(fail_at) + " fails");
    FaultInjectionFileSystem fs;
    ASSERT_OK(fs.CreateDirectories("d"));
    std::vector<Message> before;
    {
      auto log = Open(&fs, Durability::kAlways);
      ASSERT_OK(log->Restore());
      ASSERT_OK(log->WriteSystemPrompt("sys"));
      ASSERT_OK(log->Append(base_));
      ASSERT_OK(log->UpdateTokenCount(99));
      ASSERT_OK(fs.SyncDirectory("d"));
      before = log->history();
      fs.FailSyncAt(fail_at);
      (void)log->Rewrite(std::string("sys"), compacted, 7).status();  // May fail, depending on the fault.
    }
    fs.SimulateCrash();
    auto log = Open(&fs);
    ASSERT_OK(log->Restore());
    EXPECT_TRUE(log->history() == before || log->history() == compacted)
        << "history has " << log->history().size() << " messages";
    if (log->history() == compacted) {
      EXPECT_EQ(log->token_count(), 7);
      EXPECT_EQ(log->n_checkpoints(), 1);
    } else {
      EXPECT_EQ(log->token_count(), 99);
    }
    EXPECT_EQ(log->system_prompt().value_or(""), "sys");
    EXPECT_TRUE(log->restore_report().scan.damage.empty());
  }
}

TEST(LinearStorageCrashTest, TornTailIsCutBeforeAppending) {
  FaultInjectionFileSystem fs;
  fs.SetFileDurably("h.jsonl", "{\"role\":\"user\",\"content\":\"abc\"}\n{\"role\":\"_usage\",\"token_co");
  JsonlLinearStorage storage("h.jsonl", {.fs = &fs});
  ASSERT_OK(storage.Restore());
  EXPECT_TRUE(storage.restore_summary().torn_tail.has_value());
  ASSERT_OK(storage.MarkTokenCount(7));
  EXPECT_EQ(*fs.GetContents("h.jsonl"), "{\"role\":\"user\",\"content\":\"abc\"}\n{\"role\":\"_usage\",\"token_count\":7}\n");
  EXPECT_EQ(*fs.GetContents("h.jsonl.torn-1"), "{\"role\":\"_usage\",\"token_co");
}

}  // namespace
}  // namespace strata
