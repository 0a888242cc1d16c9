#include "strata/log/linear_storage.h"

#include <gtest/gtest.h>

#include "strata/util/memory_file_system.h"
#include "test_util.h"

namespace strata {
namespace {

TEST(LinearStorageTest, MemoryAndJsonlBehaveAlikeBehindTheInterface) {
  MemoryFileSystem fs;
  MemoryLinearStorage memory;
  JsonlLinearStorage jsonl("h.jsonl", {.fs = &fs});
  for (LinearStorage* storage : std::vector<LinearStorage*>{&memory, &jsonl}) {
    LinearContext context(storage);
    ASSERT_OK(storage->Restore());
    ASSERT_OK(context.AddMessage(Message::User("a")));
    ASSERT_OK(context.MarkTokenCount(3));
    ASSERT_OK(context.AddMessage(Message::Assistant("b")));
    EXPECT_EQ(context.history().size(), 2u);
    EXPECT_EQ(context.token_count(), 3);
    EXPECT_EQ(storage->Restore().status().code(), StatusCode::kFailedPrecondition);
    EXPECT_EQ(context.MarkTokenCount(-1).code(), StatusCode::kInvalidArgument);
  }
  ASSERT_OK(jsonl.Close());
  JsonlLinearStorage reread("h.jsonl", {.fs = &fs});
  auto restored = reread.Restore();
  ASSERT_OK(restored);
  EXPECT_TRUE(*restored);
  EXPECT_EQ(reread.messages(), memory.messages());
  EXPECT_EQ(reread.token_count(), 3);
}

TEST(LinearStorageTest, AnyLineWithTokenCountIsAUsageMark) {
  MemoryFileSystem fs;
  fs.SetFileDurably("h.jsonl", "{\"role\":\"user\",\"content\":\"a\"}\n{\"token_count\":9}\n\n");
  JsonlLinearStorage storage("h.jsonl", {.fs = &fs});
  ASSERT_OK(storage.Restore());
  EXPECT_EQ(storage.token_count(), 9);
  EXPECT_EQ(storage.messages().size(), 1u);
}

}  // namespace
}  // namespace strata
