#include "strata/util/memory_file_system.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <future>
#include <thread>

#include "test_util.h"

namespace strata {
namespace {

TEST(MemoryFileSystemTest, UnsyncedBytesAndNamesVanishInACrash) {
  FaultInjectionFileSystem fs;
  ASSERT_OK(fs.CreateDirectories("d"));
  {
    auto f = fs.NewWritableFile("d/a", {});
    ASSERT_OK(f);
    ASSERT_OK((*f)->Append("durable"));
    ASSERT_OK((*f)->Sync());
    ASSERT_OK((*f)->Append("-lost"));
  }
  ASSERT_OK(fs.SyncDirectory("d"));
  {
    auto f = fs.NewWritableFile("d/b", {});  // Name never made durable.
    ASSERT_OK(f);
    ASSERT_OK((*f)->Append("x"));
    ASSERT_OK((*f)->Sync());
  }
  fs.SimulateCrash();
  EXPECT_EQ(*fs.GetContents("d/a"), "durable");
  EXPECT_FALSE(*fs.FileExists("d/b"));
}

TEST(MemoryFileSystemTest, CrashCanKeepAPrefixOfTheUnsyncedTail) {
  FaultInjectionFileSystem fs;
  fs.SetFileDurably("f", "abc");
  {
    auto f = fs.NewWritableFile("f", {});
    ASSERT_OK(f);
    ASSERT_OK((*f)->Append("defgh"));
  }
  fs.SimulateCrash([](const std::string&, size_t n) { return n - 2; });
  EXPECT_EQ(*fs.GetContents("f"), "abcdef");
}

TEST(MemoryFileSystemTest, FailedSyncAndTornWrite) {
  FaultInjectionFileSystem fs;
  auto f = fs.NewWritableFile("f", {});
  ASSERT_OK(f);
  fs.FailNextSyncs(1);
  ASSERT_OK((*f)->Append("abc"));
  EXPECT_EQ((*f)->Sync().code(), StatusCode::kDataLoss);
  EXPECT_OK((*f)->Sync());
  fs.SetWriteBudget(2);
  EXPECT_FALSE((*f)->Append("xyz").ok());
  EXPECT_EQ(*fs.GetContents("f"), "abcxy");
}

TEST(MemoryFileSystemTest, LockIsExclusiveAndReleasedOnClose) {
  MemoryFileSystem fs;
  auto a = fs.NewWritableFile("f", {.lock = true});
  ASSERT_OK(a);
  auto b = fs.NewWritableFile("f", {.lock = true});
  EXPECT_EQ(b.status().code(), StatusCode::kUnavailable);
  ASSERT_OK((*a)->Close());
  EXPECT_OK(fs.NewWritableFile("f", {.lock = true}));
}

TEST(MemoryFileSystemTest, HardLinkSharesContentAndSurvivesRenameOver) {
  MemoryFileSystem fs;
  fs.SetFileDurably("live", "old");
  ASSERT_OK(fs.LinkFile("live", "backup"));
  EXPECT_EQ(fs.LinkFile("live", "backup").code(), StatusCode::kAlreadyExists);
  fs.SetFileDurably("tmp", "new");
  ASSERT_OK(fs.RenameFile("tmp", "live"));
  EXPECT_EQ(*fs.GetContents("live"), "new");
  EXPECT_EQ(*fs.GetContents("backup"), "old");
}

TEST(PosixFileSystemTest, SecondLockIsRefused) {
  testing::TempDir dir;
  FileSystem* fs = PosixFileSystem();
  auto a = fs->NewWritableFile(dir.File("f"), {.lock = true});
  ASSERT_OK(a);
  auto b = fs->NewWritableFile(dir.File("f"), {.lock = true});
  ASSERT_EQ(b.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(b.status().message().find("locked by another writer"), std::string::npos);
  auto names = fs->ListDirectory(dir.path());
  ASSERT_OK(names);
  EXPECT_EQ(*names, std::vector<std::string>{"f"});
  EXPECT_EQ(fs->NewSequentialFile(dir.File("missing")).status().code(), StatusCode::kNotFound);
}

// A lock waited for on a file that its holder then removed, while another made a new file at the path and
// locked that (a session deleted and made again under its id by another process): getting the old file's
// lock once its holder let go held nothing, and two processes both held "the" lock.
TEST(PosixFileSystemTest, ALockIsOnTheFileThePathNamesNotOneRemovedWhileWaiting) {
  testing::TempDir dir;
  FileSystem* fs = PosixFileSystem();
  const std::string path = dir.File("session.lock");
  auto first = fs->LockFile(path, std::chrono::milliseconds(0));
  ASSERT_OK(first);
  auto waiter = std::async(std::launch::async, [&] { return fs->LockFile(path, std::chrono::milliseconds(1500)); });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // Either way the waiter must not win (below).
  ASSERT_EQ(::unlink(path.c_str()), 0);
  auto second = fs->LockFile(path, std::chrono::milliseconds(0));  // The new file at the path.
  ASSERT_OK(second);
  first->reset();  // The removed file's holder lets go.
  auto waited = waiter.get();
  EXPECT_EQ(waited.status().code(), StatusCode::kUnavailable) << "took the removed file's lock";
  second->reset();
  EXPECT_OK(fs->LockFile(path, std::chrono::milliseconds(0)));
}

}  // namespace
}  // namespace strata

namespace strata {
namespace {

// Concurrent atomic writes of one file (two processes updating a session's record) each use a temporary
// file of their own: every write succeeds, readers always see one whole version, nothing is left behind.
TEST(WriteFileAtomically, ConcurrentWritersOfOneFileAllSucceed) {
  testing::TempDir dir;
  std::string path = dir.File("session.json");
  FileSystem& fs = *PosixFileSystem();
  std::vector<std::thread> writers;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t) {
    writers.emplace_back([&, t] {
      std::string version(1000, static_cast<char>('a' + t));
      for (int i = 0; i < 50; ++i) {
        if (!fs.WriteFileAtomically(path, version).ok()) failures++;
        auto read = fs.ReadFileToString(path);
        if (!read.ok() || read->size() != 1000 || read->find_first_not_of((*read)[0]) != std::string::npos) failures++;
      }
    });
  }
  for (auto& w : writers) w.join();
  EXPECT_EQ(failures.load(), 0);
  auto names = fs.ListDirectory(dir.path());
  ASSERT_OK(names);
  EXPECT_EQ(*names, std::vector<std::string>{"session.json"});
}

}  // namespace
}  // namespace strata
