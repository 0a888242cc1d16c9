#include "strata/log/context_log.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>
#include <tuple>
#include <thread>

#include "strata/log/context_file_tools.h"
#include "strata/message/message_json.h"
#include "strata/util/memory_file_system.h"
#include "test_util.h"

namespace strata {
namespace {

class ContextLogTest : public ::testing::Test {
 protected:
  std::unique_ptr<ContextLog> Open(ContextLogOptions options = {}) {
    options.fs = &fs_;
    return ContextLog::Open("ctx/context.jsonl", options);
  }
  std::string Contents(const std::string& path = "ctx/context.jsonl") { return fs_.GetContents(path).value(); }

  void SetUp() override { ASSERT_OK(fs_.CreateDirectories("ctx")); }
  FaultInjectionFileSystem fs_;
};

// ReplayContext (the streaming reader of `strata context show`) must find what Restore finds: the same
// messages in order, token count, pending messages, checkpoints, system prompt and damage, on logs that
// mix every record kind with damage.
TEST_F(ContextLogTest, ReplayFindsWhatRestoreFinds) {
  std::mt19937 rng(11);
  for (int iter = 0; iter < 200; ++iter) {
    std::string file;
    size_t lines = rng() % 40;
    for (size_t i = 0; i < lines; ++i) {
      switch (rng() % 9) {
        case 0: file += "{\"role\": \"_usage\", \"token_count\": " + std::to_string(rng() % 1000) + "}\n"; break;
        case 1: file += "{\"role\": \"_checkpoint\", \"id\": " + std::to_string(i) + "}\n"; break;
        case 2: file += "{\"role\": \"_system_prompt\", \"content\": \"p" + std::to_string(i) + "\"}\n"; break;
        case 3: file += "not json\n"; break;
        case 4: file += "\n"; break;
        case 5: file += "{\"role\": \"_meta\", \"x\": 1}\n"; break;
        default:
          file += "{\"role\":\"user\",\"content\":\"m" + std::to_string(i) + std::string(rng() % 30, 'x') + "\"}\n";
      }
    }
    if (rng() % 3 == 0) file += "{\"role\":\"user\",\"con";  // A torn tail.
    fs_.SetFileDurably("ctx/context.jsonl", file);
    auto log = Open({.read_only = true});
    ASSERT_OK(log->Restore());
    std::vector<Message> seen;
    auto replay = ReplayContext(&fs_, "ctx/context.jsonl", [&](const Message& m) {
      seen.push_back(m);
      return Status::Ok();
    });
    ASSERT_OK(replay);
    EXPECT_EQ(seen, log->history());
    EXPECT_EQ(replay->messages, log->history().size());
    EXPECT_EQ(replay->token_count, log->token_count());
    EXPECT_EQ(replay->token_count_with_pending, log->token_count_with_pending());
    EXPECT_EQ(replay->n_checkpoints, log->n_checkpoints());
    EXPECT_EQ(replay->system_prompt, log->system_prompt());
    EXPECT_EQ(replay->report.scan.damage.size(), log->restore_report().scan.damage.size());
    EXPECT_EQ(replay->report.unknown_records, log->restore_report().unknown_records);
  }
  auto missing = ReplayContext(&fs_, "ctx/none.jsonl", [](const Message&) { return Status::Ok(); });
  ASSERT_OK(missing);
  EXPECT_EQ(missing->messages, 0u);
  fs_.SetFileDurably("ctx/context.jsonl", "{\"role\":\"user\",\"content\":\"a\"}\n{\"role\":\"user\",\"content\":\"b\"}\n");
  int calls = 0;
  auto stopped = ReplayContext(&fs_, "ctx/context.jsonl", [&](const Message&) {
    ++calls;
    return Status::Cancelled("enough");
  });
  EXPECT_EQ(stopped.status().code(), StatusCode::kCancelled);
  EXPECT_EQ(calls, 1);
}

// More than 16 MiB of messages after the last usage mark are counted in steps as they pass (memory stays
// bounded); the total must be what Restore counts, the rounding of kimi-cli's characters / 4 included.
TEST_F(ContextLogTest, ReplayCountsALongUnmarkedTailInSteps) {
  std::string file = "{\"role\": \"_usage\", \"token_count\": 7}\n";
  std::string line = "{\"role\":\"user\",\"content\":\"" + std::string(1021, 'x') + "\"}\n";  // 1,021 characters: 255.25 tokens.
  for (int i = 0; i < 20000; ++i) file += line;
  fs_.SetFileDurably("ctx/context.jsonl", file);
  auto log = Open({.read_only = true});
  ASSERT_OK(log->Restore());
  auto replay = ReplayContext(&fs_, "ctx/context.jsonl", [](const Message&) { return Status::Ok(); });
  ASSERT_OK(replay);
  EXPECT_EQ(replay->token_count_with_pending, log->token_count_with_pending());
  EXPECT_EQ(replay->token_count_with_pending, 7 + 20000 * 1021 / 4);
}

// A blank last line without its newline becomes a blank line when the next append ends it; a revert then
// leaves it out like any other, as kimi-cli's revert does.
TEST_F(ContextLogTest, ABlankLastLineEndedByAnAppendIsLeftOutByARevert) {
  std::string checkpoint0 = "{\"role\": \"_checkpoint\", \"id\": 0}\n";
  std::string a = "{\"role\":\"user\",\"content\":\"a\"}\n";
  fs_.SetFileDurably("ctx/context.jsonl", checkpoint0 + a + "   ");
  auto log = Open();
  ASSERT_OK(log->Restore());
  ASSERT_OK(log->Append(Message::User("b")));
  ASSERT_OK(log->Checkpoint(false));
  ASSERT_OK(log->Append(Message::User("c")));
  ASSERT_OK(log->RevertTo(1));
  EXPECT_EQ(Contents(), checkpoint0 + a + "{\"role\":\"user\",\"content\":\"b\"}\n");
  ASSERT_EQ(log->history().size(), 2u);
}

TEST_F(ContextLogTest, RestoreSkipsDamageAndReportsLineAndOffset) {
  std::string good1 = "{\"role\":\"user\",\"content\":\"a\"}\n";
  std::string bad = "{\"role\":\"user\",\"content\":\n";
  std::string bad_record = "{\"role\":\"user\",\"content\":[{\"type\":\"nope\"}]}\n";
  std::string good2 = "{\"role\":\"assistant\",\"content\":\"b\"}\n";
  fs_.SetFileDurably("ctx/context.jsonl", good1 + bad + "\n" + bad_record + good2);
  auto log = Open();
  auto restored = log->Restore();
  ASSERT_OK(restored);
  EXPECT_TRUE(*restored);
  ASSERT_EQ(log->history().size(), 2u);
  const auto& damage = log->restore_report().scan.damage;
  ASSERT_EQ(damage.size(), 2u);
  EXPECT_EQ(damage[0].line, 2u);
  EXPECT_EQ(damage[0].offset, good1.size());
  EXPECT_EQ(damage[0].kind, DamageKind::kInvalidJson);
  EXPECT_EQ(damage[1].line, 4u);
  EXPECT_EQ(damage[1].kind, DamageKind::kInvalidRecord);
  EXPECT_NE(damage[1].reason.find("content[0].type"), std::string::npos) << damage[1].reason;
  EXPECT_FALSE(log->restore_report().scan.torn_tail.has_value());
  // Middle damage is left in place: appending does not rewrite the file.
  ASSERT_OK(log->Append(Message::User("c")));
  EXPECT_EQ(Contents(), good1 + bad + "\n" + bad_record + good2 + "{\"role\":\"user\",\"content\":\"c\"}\n");
}

TEST_F(ContextLogTest, TornTailIsCutIntoABackupBeforeTheNextAppend) {
  std::string good = "{\"role\":\"user\",\"content\":\"a\"}\n";
  fs_.SetFileDurably("ctx/context.jsonl", good + "{\"role\":\"assis");
  auto log = Open();
  ASSERT_OK(log->Restore());
  ASSERT_TRUE(log->restore_report().scan.torn_tail.has_value());
  EXPECT_EQ(log->restore_report().scan.torn_tail->offset, good.size());
  EXPECT_EQ(Contents(), good + "{\"role\":\"assis") << "restore alone changes nothing";
  ASSERT_OK(log->Append(Message::Assistant("b")));
  EXPECT_EQ(Contents(), good + "{\"role\":\"assistant\",\"content\":\"b\"}\n");
  EXPECT_EQ(Contents("ctx/context.jsonl.torn-1"), "{\"role\":\"assis");
}

TEST_F(ContextLogTest, CompleteLastRecordWithoutNewlineIsKept) {
  fs_.SetFileDurably("ctx/context.jsonl", "{\"role\":\"user\",\"content\":\"a\"}");
  auto log = Open();
  ASSERT_OK(log->Restore());
  EXPECT_EQ(log->history().size(), 1u);
  ASSERT_OK(log->UpdateTokenCount(5));
  EXPECT_EQ(Contents(), "{\"role\":\"user\",\"content\":\"a\"}\n{\"role\": \"_usage\", \"token_count\": 5}\n");
}

TEST_F(ContextLogTest, SecondWriterIsRefused) {
  auto first = Open();
  ASSERT_OK(first->Restore());
  ASSERT_OK(first->Append(Message::User("a")));
  auto second = Open();
  auto r = second->Restore();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("locked"), std::string::npos);
  ASSERT_OK(first->Close());
  auto third = Open();
  ASSERT_OK(third->Restore());
  EXPECT_EQ(third->history().size(), 1u);
}

TEST_F(ContextLogTest, RestoreTwiceOrAfterWritingIsRefused) {
  auto log = Open();
  ASSERT_OK(log->Restore());
  EXPECT_EQ(log->Restore().status().code(), StatusCode::kFailedPrecondition);
  auto other = ContextLog::Open("ctx/other.jsonl", {.fs = &fs_});
  ASSERT_OK(other->Append(Message::User("x")));
  EXPECT_EQ(other->Restore().status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(ContextLogTest, WritingToUnrestoredContentIsRefused) {
  fs_.SetFileDurably("ctx/context.jsonl", "{\"role\": \"_checkpoint\", \"id\": 0}\n");
  auto log = Open();
  Status s = log->Checkpoint(false).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("Restore()"), std::string::npos);
  EXPECT_EQ(Contents(), "{\"role\": \"_checkpoint\", \"id\": 0}\n");
}

TEST_F(ContextLogTest, RevertKeepsPrefixAndRotatesWithoutCopyingTheBackup) {
  auto log = Open();
  ASSERT_OK(log->Restore());
  ASSERT_OK(log->WriteSystemPrompt("sys"));
  ASSERT_OK(log->Append(Message::User("one")));
  ASSERT_OK(log->UpdateTokenCount(10));
  ASSERT_EQ(*log->Checkpoint(true), 0);
  ASSERT_OK(log->Append(Message::Assistant("two")));
  ASSERT_OK(log->WriteSystemPrompt("sys2"));  // Shifts every offset; revert must still cut at the right byte.
  ASSERT_EQ(*log->Checkpoint(false), 1);
  ASSERT_OK(log->Append(Message::User("three")));
  std::string before = Contents();

  EXPECT_EQ(log->RevertTo(7).code(), StatusCode::kNotFound);
  EXPECT_EQ(Contents(), before);
  EXPECT_FALSE(*fs_.FileExists("ctx/context_1.jsonl")) << "a failed revert touches nothing";

  ASSERT_OK(log->RevertTo(1));
  EXPECT_EQ(Contents("ctx/context_1.jsonl"), before);
  EXPECT_EQ(log->history().size(), 3u);
  EXPECT_EQ(log->n_checkpoints(), 1);
  EXPECT_EQ(log->token_count(), 10);
  EXPECT_EQ(log->system_prompt(), "sys2");
  EXPECT_EQ(Contents(), before.substr(0, before.find("{\"role\": \"_checkpoint\", \"id\": 1}")));

  ASSERT_OK(log->RevertTo(0));
  EXPECT_EQ(log->history().size(), 1u);
  EXPECT_EQ(log->n_checkpoints(), 0);
  EXPECT_TRUE(*fs_.FileExists("ctx/context_2.jsonl"));

  // The state rebuilt from offsets equals what a fresh restore reads.
  ASSERT_OK(log->Close());
  auto fresh = Open();
  ASSERT_OK(fresh->Restore());
  EXPECT_EQ(fresh->history(), log->history());
  EXPECT_EQ(fresh->token_count(), log->token_count());
  EXPECT_EQ(fresh->n_checkpoints(), log->n_checkpoints());
  EXPECT_EQ(fresh->system_prompt(), log->system_prompt());
  EXPECT_EQ(fresh->token_count_with_pending(), log->token_count_with_pending());
}

// Usage marks keep their positions through appends, a system prompt that shifts every offset, a revert
// (which drops the marks after its checkpoint), a rewrite and a fresh restore.
TEST_F(ContextLogTest, UsageMarksKeepTheirPositions) {
  using Marks = std::vector<std::tuple<size_t, int64_t, size_t>>;
  auto marks = [](const ContextLog& log) {
    Marks out;
    for (const auto& u : log.usage_marks()) out.emplace_back(u.messages, u.tokens, u.checkpoints);
    return out;
  };
  auto log = Open();
  ASSERT_OK(log->Restore());
  ASSERT_OK(log->Append(Message::User("one")));
  ASSERT_OK(log->UpdateTokenCount(10));
  ASSERT_OK(log->WriteSystemPrompt("a system prompt long enough to move every later byte"));
  ASSERT_EQ(*log->Checkpoint(false), 0);
  ASSERT_OK(log->Append(Message::Assistant("two")));
  ASSERT_OK(log->Append(Message::User("three")));
  ASSERT_OK(log->UpdateTokenCount(30));
  EXPECT_EQ(marks(*log), (Marks{{1, 10, 0}, {3, 30, 1}}));
  {
    auto copy = ContextLog::Open("ctx/context.jsonl", {.fs = &fs_, .read_only = true});
    ASSERT_OK(copy->Restore());
    EXPECT_EQ(marks(*copy), marks(*log)) << "a restore reads the same marks";
  }
  ASSERT_OK(log->RevertTo(0));
  EXPECT_EQ(marks(*log), (Marks{{1, 10, 0}}));
  ASSERT_OK(log->UpdateTokenCount(12));
  EXPECT_EQ(marks(*log), (Marks{{1, 10, 0}, {1, 12, 0}})) << "checkpoint 0 went with the revert";
  ASSERT_OK(log->Close());
  auto fresh = Open();
  ASSERT_OK(fresh->Restore());
  EXPECT_EQ(marks(*fresh), marks(*log));
  std::vector<Message> kept = {Message::User("summary"), Message::User("four")};
  ASSERT_OK(fresh->Rewrite(fresh->system_prompt(), kept, 7, true).status());
  EXPECT_EQ(marks(*fresh), (Marks{{2, 7, 1}}));
  ASSERT_OK(fresh->Rewrite(std::nullopt, kept, std::nullopt, false).status());
  EXPECT_EQ(marks(*fresh), Marks{});
}

TEST_F(ContextLogTest, ClearRotatesAndLeavesAnEmptyFile) {
  auto log = Open();
  ASSERT_OK(log->Restore());
  ASSERT_OK(log->Append(Message::User("x")));
  ASSERT_OK(log->Checkpoint(false));
  ASSERT_OK(log->Clear());
  EXPECT_EQ(Contents(), "");
  EXPECT_EQ(Contents("ctx/context_1.jsonl"), "{\"role\":\"user\",\"content\":\"x\"}\n{\"role\": \"_checkpoint\", \"id\": 0}\n");
  EXPECT_TRUE(log->history().empty());
  EXPECT_EQ(log->n_checkpoints(), 0);
  ASSERT_EQ(*log->Checkpoint(false), 0);
}

TEST_F(ContextLogTest, WriteSystemPromptReplacesTheFirstLineRecord) {
  auto log = Open();
  ASSERT_OK(log->WriteSystemPrompt("first"));
  ASSERT_OK(log->Append(Message::User("u")));
  ASSERT_OK(log->WriteSystemPrompt("second 助手"));
  EXPECT_EQ(Contents(), "{\"role\": \"_system_prompt\", \"content\": \"second \\u52a9\\u624b\"}\n{\"role\":\"user\",\"content\":\"u\"}\n");
  EXPECT_EQ(log->system_prompt(), "second 助手");
}

TEST_F(ContextLogTest, FailedFsyncPoisonsTheLog) {
  auto log = Open();
  ASSERT_OK(log->Restore());
  ASSERT_OK(log->Append(Message::User("a")));
  fs_.FailNextSyncs(1);
  Status failed = log->Append(Message::User("b"));
  EXPECT_EQ(failed.code(), StatusCode::kDataLoss);
  EXPECT_EQ(log->history().size(), 1u) << "a failed append is not in memory";
  Status after = log->Append(Message::User("c"));
  EXPECT_EQ(after.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(after.message().find("Restore()"), std::string::npos) << after.message();
}

TEST_F(ContextLogTest, InvalidInputCostsNothing) {
  auto log = Open();
  ASSERT_OK(log->Restore());
  ASSERT_OK(log->Append(Message::User("a")));
  std::string before = Contents();
  Message bad = Message::User("bad \xff");
  Status s = log->Append(std::vector<Message>{Message::User("fine"), bad});
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("message 1: content[0].text: byte 4"), std::string::npos) << s.message();
  EXPECT_EQ(log->UpdateTokenCount(-1).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(Contents(), before);
  EXPECT_EQ(log->history().size(), 1u);
}

TEST_F(ContextLogTest, BatchPolicyGroupsSyncsByWindow) {
  ManualClock clock;
  ContextLogOptions options;
  options.clock = &clock;
  options.durability = {.policy = Durability::kBatch, .batch_window_micros = 1000, .batch_background_sync = false};
  auto log = Open(options);
  ASSERT_OK(log->Restore());
  int base = fs_.sync_count();
  for (int i = 0; i < 5; ++i) ASSERT_OK(log->Append(Message::User("m")));
  EXPECT_EQ(fs_.sync_count(), base) << "appends inside one window share a sync";
  clock.Advance(1500);
  ASSERT_OK(log->Append(Message::User("m")));
  EXPECT_EQ(fs_.sync_count(), base + 1);
  ASSERT_OK(log->Close());
  EXPECT_EQ(fs_.sync_count(), base + 1) << "nothing left to sync";
}

TEST_F(ContextLogTest, WriteBufferHoldsAppendsUntilSyncOrClose) {
  ContextLogOptions options;
  options.durability = {.policy = Durability::kNone, .write_buffer_bytes = 1 << 20};
  auto log = Open(options);
  ASSERT_OK(log->Restore());
  ASSERT_OK(log->Append(Message::User("a")));
  ASSERT_OK(log->Checkpoint(false));
  EXPECT_EQ(Contents(), "") << "buffered, not yet written";
  ASSERT_OK(log->Sync());
  EXPECT_EQ(Contents(), "{\"role\":\"user\",\"content\":\"a\"}\n{\"role\": \"_checkpoint\", \"id\": 0}\n");
  ASSERT_OK(log->Append(Message::User("b")));
  ASSERT_OK(log->RevertTo(0));  // Rotation flushes first, so the backup is complete.
  EXPECT_EQ(Contents("ctx/context_1.jsonl"),
            "{\"role\":\"user\",\"content\":\"a\"}\n{\"role\": \"_checkpoint\", \"id\": 0}\n{\"role\":\"user\",\"content\":\"b\"}\n");
  ASSERT_OK(log->Append(Message::User("c")));
  ASSERT_OK(log->Close());
  EXPECT_EQ(Contents(), "{\"role\":\"user\",\"content\":\"a\"}\n{\"role\":\"user\",\"content\":\"c\"}\n");
}

TEST_F(ContextLogTest, BatchBackgroundThreadSyncsAnIdleWindow) {
  ContextLogOptions options;
  options.durability = {.policy = Durability::kBatch, .batch_window_micros = 2000};
  auto log = Open(options);
  ASSERT_OK(log->Restore());
  int base = fs_.sync_count();
  ASSERT_OK(log->Append(Message::User("a")));
  // No further append arrives: the flusher must sync on its own. Poll (generously) instead of sleeping a
  // fixed time so a loaded machine cannot make this flaky.
  for (int i = 0; i < 5000 && fs_.sync_count() == base; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  EXPECT_EQ(fs_.sync_count(), base + 1);
}

TEST_F(ContextLogTest, ReadOnlyNeverWrites) {
  fs_.SetFileDurably("ctx/context.jsonl", "{\"role\":\"user\",\"content\":\"a\"}\n{\"broken");
  auto log = Open({.read_only = true});
  ASSERT_OK(log->Restore());
  EXPECT_EQ(log->Append(Message::User("b")).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(Contents(), "{\"role\":\"user\",\"content\":\"a\"}\n{\"broken");
}

TEST_F(ContextLogTest, RepairCutsDamageIntoARotatedBackup) {
  std::string a = "{\"role\":\"user\",\"content\":\"a\"}\n";
  std::string b = "{\"role\":\"user\",\"content\":\"b\"}\n";
  std::string original = a + "garbage\n" + b + "{\"role\":\"us";
  fs_.SetFileDurably("ctx/context.jsonl", original);
  auto check = CheckContextFile(&fs_, "ctx/context.jsonl");
  ASSERT_OK(check);
  EXPECT_TRUE(check->damaged());
  auto repaired = RepairContextFile(&fs_, "ctx/context.jsonl");
  ASSERT_OK(repaired);
  EXPECT_EQ(repaired->removed_lines, 2u);
  EXPECT_EQ(repaired->backup, "ctx/context_1.jsonl");
  EXPECT_EQ(Contents(), a + b);
  EXPECT_EQ(Contents("ctx/context_1.jsonl"), original);
  auto again = CheckContextFile(&fs_, "ctx/context.jsonl");
  ASSERT_OK(again);
  EXPECT_FALSE(again->damaged());
  auto noop = RepairContextFile(&fs_, "ctx/context.jsonl");
  ASSERT_OK(noop);
  EXPECT_FALSE(noop->backup.has_value()) << "a clean file is left alone";
}

TEST_F(ContextLogTest, InvalidUtf8IsReplacedLikeKimiCli) {
  fs_.SetFileDurably("ctx/context.jsonl", "{\"role\":\"user\",\"content\":\"a\xff\"}\n");
  auto log = Open();
  ASSERT_OK(log->Restore());
  ASSERT_EQ(log->history().size(), 1u);
  EXPECT_EQ(log->history()[0].ExtractText(), "a\xEF\xBF\xBD");
  ASSERT_EQ(log->restore_report().scan.damage.size(), 1u);
  EXPECT_EQ(log->restore_report().scan.damage[0].kind, DamageKind::kInvalidUtf8);
}

// A lone surrogate escape (half of an emoji cut in two) is valid JSON that kimi-cli reads; simdjson refused the
// line. It is kept with U+FFFD, reported as replaced text; a whole pair and an escaped backslash are as written.
TEST_F(ContextLogTest, ALoneSurrogateEscapeIsReplacedNotDamage) {
  fs_.SetFileDurably("ctx/context.jsonl",
                     "{\"role\":\"user\",\"content\":\"cut \\ud83d\"}\n"
                     "{\"role\":\"user\",\"content\":\"pair \\ud83d\\ude00 and \\\\ud83d\"}\n");
  auto log = Open();
  ASSERT_OK(log->Restore());
  ASSERT_EQ(log->history().size(), 2u);
  EXPECT_EQ(log->history()[0].ExtractText(), "cut \xEF\xBF\xBD");
  EXPECT_EQ(log->history()[1].ExtractText(), "pair \xF0\x9F\x98\x80 and \\ud83d");
  ASSERT_EQ(log->restore_report().scan.damage.size(), 1u);
  EXPECT_EQ(log->restore_report().scan.damage[0].kind, DamageKind::kInvalidUtf8);
  EXPECT_EQ(log->restore_report().scan.damage[0].line, 1u);
}

TEST_F(ContextLogTest, UnknownInternalRecordsAreKeptAndCounted) {
  fs_.SetFileDurably("ctx/context.jsonl", "{\"role\": \"_meta\", \"x\": 1}\n{\"role\":\"user\",\"content\":\"a\"}\n");
  auto log = Open();
  ASSERT_OK(log->Restore());
  EXPECT_EQ(log->history().size(), 1u);
  EXPECT_EQ(log->restore_report().unknown_records, 1u);
  EXPECT_FALSE(log->restore_report().scan.damaged());
}

TEST(LineReaderTest, OverlongLinesAreSkippedNotBuffered) {
  MemoryFileSystem fs;
  std::string long_line(5000, 'x');
  fs.SetFileDurably("f", "short\n" + long_line + "\nend\n" + long_line);
  LineReader reader(*fs.NewSequentialFile("f"), 4096, 100);
  std::vector<std::tuple<std::string, uint64_t, uint64_t, bool, bool>> seen;
  LogLine line;
  while (*reader.Next(&line)) {
    seen.emplace_back(std::string(line.text), line.offset, line.length, line.terminated, line.too_long);
  }
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0], std::make_tuple(std::string("short"), 0u, 5u, true, false));
  EXPECT_EQ(seen[1], std::make_tuple(std::string(), 6u, 5000u, true, true));
  EXPECT_EQ(seen[2], std::make_tuple(std::string("end"), 5007u, 3u, true, false));
  EXPECT_EQ(seen[3], std::make_tuple(std::string(), 5011u, 5000u, false, true));
  // A line past the limit whose end arrives in the same read is too long as well (the buffer had grown
  // past the limit for the line before: a 270 MiB line passed a 256 MiB limit).
  fs.SetFileDurably("g", std::string(150, 'y') + "\n" + std::string(130, 'z') + "\nok\n" + std::string(120, 'w'));
  LineReader wide(*fs.NewSequentialFile("g"), 4096, 100);
  seen.clear();
  while (*wide.Next(&line)) seen.emplace_back(std::string(line.text), line.offset, line.length, line.terminated, line.too_long);
  ASSERT_EQ(seen.size(), 4u);
  EXPECT_EQ(seen[0], std::make_tuple(std::string(), 0u, 150u, true, true));
  EXPECT_EQ(seen[1], std::make_tuple(std::string(), 151u, 130u, true, true));
  EXPECT_EQ(seen[2], std::make_tuple(std::string("ok"), 282u, 2u, true, false));
  EXPECT_EQ(seen[3], std::make_tuple(std::string(), 285u, 120u, false, true));
}

// A byte-order mark an editor put before the first line makes it damage, as in kimi-cli; the reason says so.
TEST_F(ContextLogTest, AByteOrderMarkIsNamedInTheDamagesReason) {
  fs_.SetFileDurably("ctx/context.jsonl",
                     "\xEF\xBB\xBF{\"role\": \"_system_prompt\", \"content\": \"P\"}\n{\"role\":\"user\",\"content\":\"hi\"}\n");
  auto log = Open();
  ASSERT_OK(log->Restore());
  ASSERT_EQ(log->restore_report().scan.damage.size(), 1u);
  EXPECT_NE(log->restore_report().scan.damage[0].reason.find("byte-order mark"), std::string::npos)
      << log->restore_report().scan.damage[0].reason;
  EXPECT_EQ(log->history().size(), 1u);
}

TEST_F(ContextLogTest, ImplausibleCountsAreDamageNotOverflow) {
  fs_.SetFileDurably("ctx/context.jsonl",
                     "{\"role\": \"_checkpoint\", \"id\": 9223372036854775807}\n{\"role\": \"_usage\", \"token_count\": 9223372036854775807}\n");
  auto log = Open();
  ASSERT_OK(log->Restore());
  EXPECT_EQ(log->n_checkpoints(), 0);
  EXPECT_EQ(log->token_count(), 0);
  EXPECT_EQ(log->restore_report().scan.damage.size(), 2u);
}

// What the reader calls damage is never written: a token count past 2^53 - 1, or a checkpoint id past it, is
// refused and the file is untouched (the writer wrote them, and the next read dropped them as damage).
TEST_F(ContextLogTest, ValuesTheReaderRefusesAreNotWritten) {
  fs_.SetFileDurably("ctx/context.jsonl", "{\"role\": \"_checkpoint\", \"id\": 9007199254740991}\n");
  auto log = Open();
  ASSERT_OK(log->Restore());
  EXPECT_EQ(log->n_checkpoints(), int64_t{1} << 53);  // Ids 0 ... 2^53 - 1 used.
  std::string before = Contents();
  auto next = log->Checkpoint(false);
  EXPECT_EQ(next.status().code(), StatusCode::kFailedPrecondition) << next.status().ToString();
  Status big = log->UpdateTokenCount(int64_t{1} << 53);
  EXPECT_EQ(big.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(big.message().find("too large"), std::string::npos) << big.message();
  EXPECT_EQ(log->AppendWithTokenCount(std::vector<Message>{Message::User("a")}, 1, int64_t{1} << 53).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(log->AppendWithTokenCount(std::vector<Message>{Message::User("a")}, 2, 5).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(Contents(), before);
  ASSERT_OK(log->UpdateTokenCount((int64_t{1} << 53) - 1));
  log.reset();  // Releases the writer lock.
  auto reread = Open();
  ASSERT_OK(reread->Restore());
  EXPECT_TRUE(reread->restore_report().scan.damage.empty());
  EXPECT_EQ(reread->token_count(), (int64_t{1} << 53) - 1);
}

TEST_F(ContextLogTest, AppendingAMessageFromTheHistoryItself) {
  auto log = Open();
  ASSERT_OK(log->Restore());
  ASSERT_OK(log->Append(Message::User("echo")));
  for (int i = 0; i < 5; ++i) ASSERT_OK(log->Append(log->history().back()));  // Aliases history_.
  EXPECT_EQ(log->history(), std::vector<Message>(6, Message::User("echo")));
}

TEST_F(ContextLogTest, RestoreAfterWriteSystemPromptDoesNotDoubleCount) {
  fs_.SetFileDurably("ctx/context.jsonl", "{\"role\":\"user\",\"content\":\"old\"}\n");
  auto log = Open();
  ASSERT_OK(log->WriteSystemPrompt("A"));
  ASSERT_OK(log->Restore());
  ASSERT_OK(log->WriteSystemPrompt("B"));
  EXPECT_EQ(log->system_prompt(), "B");
  EXPECT_EQ(Contents(), "{\"role\": \"_system_prompt\", \"content\": \"B\"}\n{\"role\":\"user\",\"content\":\"old\"}\n");
}

TEST_F(ContextLogTest, FailedSyncIsNotForgottenByClose) {
  auto log = Open();
  ASSERT_OK(log->Restore());
  ASSERT_OK(log->Append(Message::User("a")));
  fs_.FailNextSyncs(1);
  EXPECT_FALSE(log->Append(Message::User("b")).ok());
  EXPECT_FALSE(log->Close().ok());
  Status after = log->Append(Message::User("c"));
  EXPECT_EQ(after.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(after.message().find("Restore()"), std::string::npos) << after.message();
}

TEST_F(ContextLogTest, DirectorySyncFailureAfterSwapKeepsWriterOnTheLiveFile) {
  for (int fail_at = 0; fail_at < 4; ++fail_at) {
    SCOPED_TRACE(fail_at);
    FaultInjectionFileSystem fs;
    ASSERT_OK(fs.CreateDirectories("ctx"));
    auto log = ContextLog::Open("ctx/c.jsonl", {.fs = &fs});
    ASSERT_OK(log->Restore());
    ASSERT_OK(log->Append(Message::User("a")));
    ASSERT_OK(log->Checkpoint(false));
    ASSERT_OK(log->Append(Message::User("b")));
    fs.FailSyncAt(fail_at);
    Status reverted = log->RevertTo(0);
    // Whatever failed, nothing may be written to the rotation afterwards, and whatever the log accepts must
    // be what a fresh restore of the live file reads.
    std::string backup = fs.GetContents("ctx/c_1.jsonl").ok() ? *fs.GetContents("ctx/c_1.jsonl") : "";
    Status appended = log->Append(Message::User("c"));
    EXPECT_EQ(fs.GetContents("ctx/c_1.jsonl").ok() ? *fs.GetContents("ctx/c_1.jsonl") : "", backup);
    if (appended.ok()) {
      ASSERT_OK(log->Close());
      auto fresh = ContextLog::Open("ctx/c.jsonl", {.fs = &fs});
      ASSERT_OK(fresh->Restore());
      EXPECT_EQ(fresh->history(), log->history()) << reverted.ToString();
    } else {
      // The failure (of the revert, or of this append's own sync) must stick until a new restore.
      EXPECT_EQ(log->Append(Message::User("d")).code(), StatusCode::kFailedPrecondition) << appended.ToString();
    }
  }
}

TEST_F(ContextLogTest, ChangesByAnotherWriterAfterCloseAreDetected) {
  auto a = Open();
  ASSERT_OK(a->Restore());
  ASSERT_OK(a->Append(Message::User("a")));
  ASSERT_OK(a->Checkpoint(false));
  ASSERT_OK(a->Close());
  {
    auto b = Open();
    ASSERT_OK(b->Restore());
    ASSERT_OK(b->WriteSystemPrompt("shifts every offset"));
  }
  EXPECT_EQ(a->RevertTo(0).code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(Contents().find("shifts every offset"), std::string::npos);
}

TEST(ContextLogPosixTest, TwoLogsOnOneRealFileConflict) {
  testing::TempDir dir;
  auto a = ContextLog::Open(dir.File("c.jsonl"));
  ASSERT_OK(a->Append(Message::User("x")));
  auto b = ContextLog::Open(dir.File("c.jsonl"));
  EXPECT_EQ(b->Restore().status().code(), StatusCode::kUnavailable);
  ASSERT_OK(a->Checkpoint(false));
  ASSERT_OK(a->RevertTo(0));  // Swaps in a new file, locked before it becomes visible.
  auto c = ContextLog::Open(dir.File("c.jsonl"));
  EXPECT_EQ(c->Restore().status().code(), StatusCode::kUnavailable);
  ASSERT_OK(a->Close());
  auto d = ContextLog::Open(dir.File("c.jsonl"));
  ASSERT_OK(d->Restore());
  EXPECT_EQ(d->history().size(), 1u);
}

}  // namespace
}  // namespace strata
