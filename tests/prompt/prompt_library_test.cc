// PromptLibrary: lookup by id across directories, override order, lazy error reporting, caching and
// invalidation.
#include "strata/prompt/prompt_library.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include "test_util.h"

namespace strata::prompt {
namespace {

namespace fs = std::filesystem;

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

// Returns a valid template YAML with `id` whose text is `text` followed by the variable `who`.
std::string TemplateYaml(const std::string& id, const std::string& text) {
  return "metadata:\n  id: \"" + id + "\"\n  name: n\n  description: d\n  version: \"1\"\n  language: en\n" +
         "  category: c\nvariables:\n  - name: who\n    type: string\n    description: w\n    required: true\n" +
         "template: \"" + text + " {{ who }}\"\n";
}

// Writes `data` to `dir`/`rel`, creating parent directories.
std::string Put(const std::string& dir, const std::string& rel, const std::string& data) {
  fs::path p = fs::path(dir) / rel;
  fs::create_directories(p.parent_path());
  testing::WriteFileOrDie(p.string(), data);
  return p.string();
}

Value Vars() {
  auto v = Value::FromJson(R"({"who": "Ada"})");
  EXPECT_TRUE(v.ok());
  return *v;
}

TEST(PromptLibrary, FindsTemplatesByIdRecursivelyInYamlAndYmlFiles) {
  testing::TempDir dir;
  Put(dir.path(), "a/b/greeting.yaml", TemplateYaml("greet.hello", "Hello"));
  Put(dir.path(), "bye.yml", TemplateYaml("greet.bye", "Bye"));
  Put(dir.path(), "notes.txt", TemplateYaml("ignored.txt", "x"));
  Put(dir.path(), ".hidden/h.yaml", TemplateYaml("ignored.hidden", "x"));
  PromptLibrary library({dir.path()});

  auto hello = library.Get("greet.hello");
  ASSERT_OK(hello);
  EXPECT_EQ((*hello)->id(), "greet.hello");
  auto text = library.Render("greet.bye", Vars());
  ASSERT_OK(text);
  EXPECT_EQ(*text, "Bye Ada");
  EXPECT_EQ(library.Ids(), (std::vector<std::string>{"greet.bye", "greet.hello"}));
  EXPECT_TRUE(library.Errors().empty());
}

TEST(PromptLibrary, EarlierDirectoryOverridesLaterOne) {
  testing::TempDir user, shipped;
  Put(user.path(), "mine.yaml", TemplateYaml("summarize", "User"));
  Put(shipped.path(), "summarize.yaml", TemplateYaml("summarize", "Shipped"));
  Put(shipped.path(), "other.yaml", TemplateYaml("other", "Other"));

  PromptLibrary library({user.path(), shipped.path()});
  EXPECT_EQ(*library.Render("summarize", Vars()), "User Ada");
  EXPECT_EQ(*library.Render("other", Vars()), "Other Ada");  // Falls through to the shipped directory.
  EXPECT_EQ(library.Ids(), (std::vector<std::string>{"other", "summarize"}));

  PromptLibrary reversed({shipped.path(), user.path()});
  EXPECT_EQ(*reversed.Render("summarize", Vars()), "Shipped Ada");
}

TEST(PromptLibrary, DuplicateIdInOneDirectoryIsAnErrorNamingBothPaths) {
  testing::TempDir dir, later;
  std::string a = Put(dir.path(), "a.yaml", TemplateYaml("dup", "A"));
  std::string b = Put(dir.path(), "sub/b.yaml", TemplateYaml("dup", "B"));
  Put(dir.path(), "fine.yaml", TemplateYaml("fine", "Fine"));
  Put(later.path(), "dup.yaml", TemplateYaml("dup", "Later"));  // Must not silently win.
  PromptLibrary library({dir.path(), later.path()});

  auto got = library.Get("dup");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(got.status().message(), a));
  EXPECT_TRUE(Contains(got.status().message(), b));
  EXPECT_TRUE(Contains(got.status().message(), "'dup'"));
  EXPECT_OK(library.Get("fine"));
  ASSERT_EQ(library.Errors().size(), 1u);
  EXPECT_EQ(library.Errors()[0], got.status());
}

TEST(PromptLibrary, SameIdInDifferentDirectoriesIsNotAnError) {
  testing::TempDir one, two;
  Put(one.path(), "x.yaml", TemplateYaml("x", "One"));
  Put(two.path(), "x.yaml", TemplateYaml("x", "Two"));
  PromptLibrary library({one.path(), two.path()});
  EXPECT_OK(library.Get("x"));
  EXPECT_TRUE(library.Errors().empty());
}

TEST(PromptLibrary, BrokenFileIsReportedOnlyWhenRequested) {
  testing::TempDir dir;
  std::string broken = Put(dir.path(), "broken.yaml", "metadata: [unclosed\n  id: broken\n");
  std::string no_template = Put(dir.path(), "no_template.yaml",
                                "metadata: {id: nt, name: n, description: d, version: '1', language: en, category: c}\n");
  Put(dir.path(), "good.yaml", TemplateYaml("good", "Good"));
  PromptLibrary library({dir.path()});

  EXPECT_OK(library.Get("good"));  // The broken files do not get in the way.
  EXPECT_EQ(library.Ids(), (std::vector<std::string>{"good", "nt"}));

  auto bad = library.Get("broken");  // Filed under its file name: its id could not be read.
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(PromptErrorKind(bad.status()), "schema_invalid") << bad.status().ToString();
  EXPECT_TRUE(Contains(bad.status().message(), broken));
  EXPECT_TRUE(Contains(bad.status().message(), "not valid YAML"));
  EXPECT_TRUE(Contains(bad.status().message(), "line"));

  auto nt = library.Get("nt");  // Valid YAML with an id, but no template: the loader's own error.
  ASSERT_FALSE(nt.ok());
  EXPECT_EQ(PromptErrorKind(nt.status()), "schema_invalid");
  EXPECT_TRUE(Contains(nt.status().message(), no_template));
  EXPECT_TRUE(Contains(nt.status().message(), "template: field required"));

  std::vector<Status> errors = library.Errors();  // Only scan-time problems: the YAML syntax error.
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_TRUE(Contains(errors[0].message(), broken));
}

TEST(PromptLibrary, BrokenOverrideShadowsTheShippedTemplate) {
  testing::TempDir user, shipped;
  Put(user.path(), "summarize.yaml", "metadata: {id: summarize\n");
  Put(shipped.path(), "s.yaml", TemplateYaml("summarize", "Shipped"));
  PromptLibrary library({user.path(), shipped.path()});
  auto got = library.Get("summarize");
  ASSERT_FALSE(got.ok());
  EXPECT_TRUE(Contains(got.status().message(), user.path()));
}

TEST(PromptLibrary, BrokenFileLosesToAFileDeclaringItsNameInTheSameDirectory) {
  testing::TempDir dir;
  Put(dir.path(), "x.yaml", "{{{ not yaml");
  Put(dir.path(), "y.yaml", TemplateYaml("x", "Declared"));
  PromptLibrary library({dir.path()});
  EXPECT_EQ(*library.Render("x", Vars()), "Declared Ada");
  EXPECT_EQ(library.Errors().size(), 1u);
}

TEST(PromptLibrary, CacheReturnsTheSamePointer) {
  testing::TempDir dir;
  Put(dir.path(), "t.yaml", TemplateYaml("t", "T"));
  PromptLibrary library({dir.path()});
  auto first = library.Get("t");
  auto second = library.Get("t");
  ASSERT_OK(first);
  ASSERT_OK(second);
  EXPECT_EQ(first->get(), second->get());
}

TEST(PromptLibrary, ConcurrentFirstGetsShareOnePointer) {
  testing::TempDir dir;
  Put(dir.path(), "t.yaml", TemplateYaml("t", "T"));
  PromptLibrary library({dir.path()});
  std::vector<const PromptTemplate*> seen(8);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < seen.size(); ++i) {
    threads.emplace_back([&, i] {
      auto got = library.Get("t");
      seen[i] = got.ok() ? got->get() : nullptr;
    });
  }
  for (std::thread& t : threads) t.join();
  const PromptTemplate* cached = library.Get("t")->get();
  ASSERT_NE(cached, nullptr);
  for (const PromptTemplate* p : seen) EXPECT_NE(p, nullptr);
  // Racing loads may each return their own copy, but the cache settles on exactly one.
  EXPECT_EQ(library.Get("t")->get(), cached);
}

TEST(PromptLibrary, ConcurrentGetsInvalidatesAndClearsStayConsistent) {
  testing::TempDir dir;
  Put(dir.path(), "a.yaml", TemplateYaml("a", "A"));
  Put(dir.path(), "b.yaml", TemplateYaml("b", "B"));
  PromptLibrary library({dir.path()}, {.check_mtime = true});
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        if ((i + t) % 17 == 0) library.Clear();
        if ((i + t) % 5 == 0) library.Invalidate((i % 2) != 0 ? "a" : "b");
        auto out = library.Render((i % 2) != 0 ? "a" : "b", Vars());
        if (!out.ok() || *out != ((i % 2) != 0 ? "A Ada" : "B Ada")) ++failures;
        if (library.Ids().size() != 2) ++failures;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
}

TEST(PromptLibrary, InvalidateReloadsAnEditedFile) {
  testing::TempDir dir;
  std::string path = Put(dir.path(), "t.yaml", TemplateYaml("t", "Old"));
  PromptLibrary library({dir.path()});
  auto old_prompt = library.Get("t");
  ASSERT_OK(old_prompt);

  Put(dir.path(), "t.yaml", TemplateYaml("t", "New"));
  EXPECT_EQ(*library.Render("t", Vars()), "Old Ada");  // Cached until invalidated.
  library.Invalidate("t");
  EXPECT_EQ(*library.Render("t", Vars()), "New Ada");
  EXPECT_NE(library.Get("t")->get(), old_prompt->get());
  EXPECT_EQ(*(*old_prompt)->Render(Vars()), "Old Ada");  // Callers keep what they hold.
  library.Invalidate("never-loaded");                     // Harmless.
}

TEST(PromptLibrary, EditThatChangesTheIdIsReportedAfterInvalidate) {
  testing::TempDir dir;
  std::string path = Put(dir.path(), "t.yaml", TemplateYaml("t", "T"));
  PromptLibrary library({dir.path()});
  ASSERT_OK(library.Get("t"));
  Put(dir.path(), "t.yaml", TemplateYaml("renamed", "T"));
  library.Invalidate("t");
  auto got = library.Get("t");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(Contains(got.status().message(), "'renamed'"));
  library.Clear();
  EXPECT_OK(library.Get("renamed"));
  EXPECT_EQ(library.Get("t").status().code(), StatusCode::kNotFound);
}

TEST(PromptLibrary, ClearRescansForNewFiles) {
  testing::TempDir dir;
  Put(dir.path(), "a.yaml", TemplateYaml("a", "A"));
  PromptLibrary library({dir.path()});
  auto a = library.Get("a");
  ASSERT_OK(a);
  EXPECT_EQ(library.Get("b").status().code(), StatusCode::kNotFound);

  Put(dir.path(), "more/b.yaml", TemplateYaml("b", "B"));
  EXPECT_EQ(library.Get("b").status().code(), StatusCode::kNotFound);  // The index is kept until Clear.
  library.Clear();
  EXPECT_EQ(*library.Render("b", Vars()), "B Ada");
  EXPECT_NE(library.Get("a")->get(), a->get());  // The cache was dropped too.
  EXPECT_EQ(library.Ids(), (std::vector<std::string>{"a", "b"}));
}

TEST(PromptLibrary, CheckMtimeReloadsAChangedFile) {
  testing::TempDir dir;
  std::string path = Put(dir.path(), "t.yaml", TemplateYaml("t", "Old"));
  PromptLibrary library({dir.path()}, {.check_mtime = true});
  auto first = library.Get("t");
  ASSERT_OK(first);
  EXPECT_EQ(library.Get("t")->get(), first->get());  // Unchanged file: same pointer.

  Put(dir.path(), "t.yaml", TemplateYaml("t", "Newer"));
  fs::last_write_time(path, fs::last_write_time(path) + std::chrono::seconds(5));  // Beat coarse clocks.
  EXPECT_EQ(*library.Render("t", Vars()), "Newer Ada");
  auto second = library.Get("t");
  EXPECT_NE(second->get(), first->get());
  EXPECT_EQ(library.Get("t")->get(), second->get());

  PromptLibrary no_check({dir.path()});  // The default serves the cache whatever the file does.
  auto cached = no_check.Get("t");
  Put(dir.path(), "t.yaml", TemplateYaml("t", "Newest!"));
  fs::last_write_time(path, fs::last_write_time(path) + std::chrono::seconds(5));
  EXPECT_EQ(no_check.Get("t")->get(), cached->get());
}

TEST(PromptLibrary, CheckMtimeReportsARemovedFile) {
  testing::TempDir dir;
  std::string path = Put(dir.path(), "t.yaml", TemplateYaml("t", "T"));
  PromptLibrary library({dir.path()}, {.check_mtime = true});
  ASSERT_OK(library.Get("t"));
  fs::remove(path);
  auto got = library.Get("t");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(got.status().message(), path));
}

TEST(PromptLibrary, NotFoundNamesTheDirectoriesSearched) {
  testing::TempDir one;
  std::string missing = one.File("does-not-exist");
  PromptLibrary library({one.path(), missing});
  auto got = library.Get("nope");
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(got.status().message(), "'nope'"));
  EXPECT_TRUE(Contains(got.status().message(), one.path() + ","));
  EXPECT_TRUE(Contains(got.status().message(), missing + " (missing)"));
  EXPECT_TRUE(library.Errors().empty());  // A missing directory is not an error.

  PromptLibrary empty({});
  EXPECT_TRUE(Contains(empty.Get("x").status().message(), "no directories"));
}

TEST(PromptLibrary, RenderKeepsThePromptErrorKinds) {
  testing::TempDir dir;
  Put(dir.path(), "t.yaml", TemplateYaml("t", "T"));
  PromptLibrary library({dir.path()});
  auto out = library.Render("t", Value(Dict{}));
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(PromptErrorKind(out.status()), "missing_required") << out.status().ToString();
}

TEST(PromptLibrary, AFileInPlaceOfADirectoryIsReported) {
  testing::TempDir dir;
  std::string file = Put(dir.path(), "plain.yaml", TemplateYaml("t", "T"));
  PromptLibrary library({file});
  ASSERT_EQ(library.Errors().size(), 1u);
  EXPECT_TRUE(Contains(library.Errors()[0].message(), file));
}

}  // namespace
}  // namespace strata::prompt
