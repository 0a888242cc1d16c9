// `strata memory …` and `strata skill …` against a store in a temporary
// directory.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "strata/engine/engine.h"
#include "test_util.h"

namespace strata::testing {
namespace {

class MemoryCli : public ::testing::Test {
 protected:
  CliRun Memory(std::vector<std::string> args, const std::string &input = "") {
    args.insert(args.begin(), {"memory", "--data", dir_.File("data")});
    return RunStrata(args, input);
  }
  TempDir dir_;
};

TEST_F(MemoryCli, AddMirrorsATreeAndReportsWhatChanged) {
  std::string tree = dir_.File("tree");
  std::filesystem::create_directories(tree + "/notes");
  WriteFileOrDie(tree + "/notes/plan.md", "# Plan\n\nShip the importer on Friday.\n");
  WriteFileOrDie(tree + "/tool.py", "def ship():\n    return 'friday'\n");
  CliRun first = Memory({"add", tree, "--uri", "strata://resources/project"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_NE(first.out.find("\"notes/plan.md\""), std::string::npos) << first.out;
  EXPECT_NE(first.err.find("added 2, updated 0, unchanged 0, removed 0, skipped 0"), std::string::npos) << first.err;
  CliRun found = Memory({"find", "when do we ship the importer", "--under", "strata://resources/project"});
  EXPECT_EQ(found.out.find("strata://resources/project/notes/plan.md/0001-plan", 7), 7u) << found.out;
  CliRun again = Memory({"add", tree, "--uri", "strata://resources/project"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("added 0, updated 0, unchanged 2, removed 0, skipped 0 (0 chunks written)"), std::string::npos)
      << again.err;
  CliRun missing = Memory({"add", dir_.File("nope"), "--uri", "strata://resources/project"});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.err.find("nope"), std::string::npos) << missing.err;
}

// The CLI asks as every other front end asks: an empty layer given is kept as given (HTTP, MCP and Python
// store "" as a hand-written layer; the CLI took it for "not given" and derived one), and find's model-help
// counts out of range are the engine's invalid_argument (-1 was a parse error of the CLI's own).
TEST_F(MemoryCli, AnEmptyLayerAndAnOutOfRangeCountAreReadAsOverHttp) {
  ASSERT_EQ(Memory({"write", "strata://resources/t", "--abstract", "", "--category", ""}, "Alice likes tea.").exit_code, 0);
  CliRun stat = Memory({"stat", "strata://resources/t"});
  ASSERT_EQ(stat.exit_code, 0) << stat.err;
  nlohmann::json node = nlohmann::json::parse(stat.out);
  EXPECT_EQ(node["abstract"], "") << stat.out;
  ASSERT_EQ(Memory({"write", "strata://resources/u"}, "Bob likes tea.").exit_code, 0);
  EXPECT_EQ(nlohmann::json::parse(Memory({"stat", "strata://resources/u"}).out)["abstract"], "Bob likes tea.");
  for (const char* option : {"--max-queries", "--rerank-candidates"}) {
    for (const char* value : {"-1", "999"}) {
      CliRun bad = Memory({"find", "tea", option, value});
      EXPECT_EQ(bad.exit_code, 2) << option << " " << value;
      EXPECT_NE(bad.err.find("must be between"), std::string::npos) << bad.err;
      EXPECT_NE(bad.err.find(std::string("not ") + value), std::string::npos) << bad.err;
    }
  }
}

TEST_F(MemoryCli, WriteReadListFindMoveRemove) {
  CliRun w = Memory({"write", "strata://user/alice/memories/preferences/editor", "--abstract", "Editor preference"},
                    "Alice edits in Vim with two-space indents.");
  ASSERT_EQ(w.exit_code, 0) << w.err;
  CliRun r = Memory({"read", "viking://user/alice/memories/preferences/editor"});
  EXPECT_EQ(r.out, "Alice edits in Vim with two-space indents.");
  EXPECT_EQ(Memory({"read", "strata://user/alice/memories/preferences/editor", "--level", "0"}).out,
            "Editor preference");
  CliRun ls = Memory({"ls", "strata://user/alice/memories"});
  EXPECT_NE(ls.out.find("preferences/"), std::string::npos) << ls.out;
  EXPECT_NE(ls.out.find("events/"), std::string::npos);
  CliRun find = Memory({"find", "which editor does alice use", "--json"});
  ASSERT_EQ(find.exit_code, 0) << find.err;
  EXPECT_EQ(find.out.find("{\"uri\":\"strata://user/alice/memories/preferences/editor\""), 0u) << find.out;
  // Printed plainly, the score is the JSON's rounded to three places (it was cut: 1.02162 printed 1.021).
  CliRun plain = Memory({"find", "which editor does alice use"});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  char rounded[32];
  std::snprintf(rounded, sizeof rounded, "%.3f",
                nlohmann::json::parse(find.out.substr(0, find.out.find('\n')))["score"].get<double>());
  EXPECT_EQ(plain.out.rfind(std::string(rounded) + "  strata://user/alice/memories/preferences/editor", 0), 0u)
      << plain.out;
  // A misspelt scope is an error that names it, not an empty answer.
  CliRun misspelt = Memory({"find", "which editor does alice use", "--under", "strata://user/alice/memorys"});
  EXPECT_NE(misspelt.exit_code, 0);
  EXPECT_NE(misspelt.err.find("strata://user/alice/memorys"), std::string::npos) << misspelt.err;
  ASSERT_EQ(
      Memory({"mv", "strata://user/alice/memories/preferences/editor", "strata://user/alice/memories/preferences/vim"})
          .exit_code,
      0);
  EXPECT_EQ(Memory({"grep", "Vim"}).out,
            "strata://user/alice/memories/preferences/vim:1:Alice edits in Vim "
            "with two-space indents.\n");
  CliRun rm_dir = Memory({"rm", "strata://user/alice/memories"});
  EXPECT_NE(rm_dir.exit_code, 0);
  EXPECT_NE(rm_dir.err.find("remove it recursively"), std::string::npos) << rm_dir.err;
  EXPECT_EQ(Memory({"check"}).out, "ok\n");
  CliRun bad = Memory({"read", "strata://people/x"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown scope \"people\""), std::string::npos) << bad.err;
  EXPECT_NE(Memory({"read", "strata://resources/missing"}).err.find("does not exist"), std::string::npos);
  // An empty URI is refused for a node's own operations (it meant the root); a listing without one lists it.
  for (std::vector<std::string> args : {std::vector<std::string>{"read", ""}, {"stat", ""}, {"rm", "-r", ""}}) {
    CliRun empty = Memory(args);
    EXPECT_EQ(empty.exit_code, 2) << args[0];
    EXPECT_NE(empty.err.find("\"uri\" must not be empty"), std::string::npos) << empty.err;
  }
  EXPECT_NE(Memory({"ls", ""}).out.find("user/"), std::string::npos);
  // An option given an empty value is refused, not read as level 0 or as no type.
  for (std::vector<std::string> args : {std::vector<std::string>{"read", "strata://user/alice/memories/preferences/vim",
                                                                 "--level", ""},
                                        {"find", "editor", "--type", ""}}) {
    CliRun empty = Memory(args);
    EXPECT_NE(empty.exit_code, 0) << args[0];
    EXPECT_NE(empty.err.find("must not be empty"), std::string::npos) << empty.err;
  }
}

// The tree is drawn by indentation, so a directory's children come right after it: in URI order "d-x" and
// "d.y" sort between "d" and "d/x", and d's child was drawn under d.y.
TEST_F(MemoryCli, TreeDrawsEachChildUnderItsOwnParent) {
  for (const char *uri : {"strata://resources/t/d/x", "strata://resources/t/d-x", "strata://resources/t/d.y",
                          "strata://resources/t/d0"}) {
    ASSERT_EQ(Memory({"write", uri}, "text").exit_code, 0) << uri;
  }
  CliRun tree = Memory({"tree", "strata://resources/t"});
  ASSERT_EQ(tree.exit_code, 0) << tree.err;
  EXPECT_EQ(tree.out, "d/\n  x  — text\nd-x  — text\nd.y  — text\nd0  — text\n");
}

TEST_F(MemoryCli, ExportEditImport) {
  ASSERT_EQ(Memory({"write", "strata://resources/notes/todo"}, "buy milk").exit_code, 0);
  ASSERT_EQ(Memory({"export", dir_.File("md"), "--uri", "strata://resources/notes"}).exit_code, 0);
  EXPECT_EQ(ReadFileOrDie(dir_.File("md/todo.md")), "buy milk");
  WriteFileOrDie(dir_.File("md/todo.md"), "buy oat milk");
  ASSERT_EQ(Memory({"import", dir_.File("md"), "--uri", "strata://resources/notes"}).exit_code, 0);
  EXPECT_EQ(Memory({"read", "strata://resources/notes/todo"}).out, "buy oat milk");
}

TEST_F(MemoryCli, SkillsAreValidatedStoredAndShownBack) {
  std::string skill =
      "---\nname: pdf-tools\ndescription: Extract text and "
      "tables from PDF files.\n---\n# Use\nRun it.\n";
  WriteFileOrDie(dir_.File("SKILL.md"), skill);
  CliRun add = RunStrata({"skill", "--data", dir_.File("data"), "add", dir_.File("SKILL.md")}, "");
  ASSERT_EQ(add.exit_code, 0) << add.err;
  EXPECT_EQ(add.out, "strata://agent/default/skills/pdf-tools\n");
  CliRun list = RunStrata({"skill", "--data", dir_.File("data"), "list"}, "");
  EXPECT_EQ(list.out, "pdf-tools\tExtract text and tables from PDF files.\n");
  CliRun show = RunStrata({"skill", "--data", dir_.File("data"), "show", "pdf-tools"}, "");
  EXPECT_NE(show.out.find("name: pdf-tools"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("# Use\nRun it.\n"), std::string::npos);
  WriteFileOrDie(dir_.File("BAD.md"), "---\nname: Bad Name\ndescription: x\n---\n");
  CliRun bad = RunStrata({"skill", "--data", dir_.File("data"), "add", dir_.File("BAD.md")}, "");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("BAD.md"), std::string::npos) << bad.err;
  // A directory or a text written under skills/ some other way is not a skill: not listed, not shown.
  ASSERT_EQ(Memory({"mkdir", "strata://agent/default/skills/Bad_Name"}).exit_code, 0);
  ASSERT_EQ(Memory({"write", "strata://agent/default/skills/fake"}, "just text").exit_code, 0);
  EXPECT_EQ(RunStrata({"skill", "--data", dir_.File("data"), "list"}, "").out, list.out);
  for (const char *name : {"Bad_Name", "fake"}) {
    CliRun not_skill = RunStrata({"skill", "--data", dir_.File("data"), "show", name}, "");
    EXPECT_NE(not_skill.exit_code, 0) << name;
    EXPECT_NE(not_skill.err.find("is not a skill"), std::string::npos) << not_skill.err;
  }
}

// Several processes writing to one new data directory at once (a CLI beside a server): each waits for
// the others' locks instead of failing with "database is locked", and every write is kept.
TEST_F(MemoryCli, ConcurrentProcessesOnOneNewStoreAllSucceed) {
  constexpr int kProcesses = 4, kWrites = 4;
  std::vector<std::thread> threads;
  std::vector<std::string> failures(kProcesses);
  for (int p = 0; p < kProcesses; ++p) {
    threads.emplace_back([&, p] {
      for (int w = 0; w < kWrites; ++w) {
        std::string uri = "strata://resources/p" + std::to_string(p) + "/w" + std::to_string(w);
        CliRun run = Memory({"write", uri}, "written by process " + std::to_string(p));
        if (run.exit_code != 0) failures[p] += uri + ": " + run.err;
      }
    });
  }
  for (auto &t : threads) t.join();
  for (int p = 0; p < kProcesses; ++p) EXPECT_EQ(failures[p], "") << "process " << p;
  CliRun tree = Memory({"tree", "strata://resources", "--json"});
  ASSERT_EQ(tree.exit_code, 0) << tree.err;
  size_t leaves = 0;
  for (size_t at = tree.out.find("\"is_dir\":false"); at != std::string::npos; at = tree.out.find("\"is_dir\":false", at + 1)) {
    ++leaves;
  }
  EXPECT_EQ(leaves, static_cast<size_t>(kProcesses * kWrites)) << tree.out;
  EXPECT_EQ(Memory({"check"}).exit_code, 0);
}

// `strata migrate` without --embedder gives the copy the source's embedding model: it gave a new store's
// local:384 and re-embedded everything (and said "verified").
TEST(MigrateCli, WithoutAnEmbedderTheCopyKeepsTheSourcesModel) {
  TempDir dir;
  {
    auto source = Engine::Open({.data_dir = dir.File("from"), .embedder = "local:64"});
    ASSERT_OK(source);
    ASSERT_OK((*source)->Write("strata://resources/guides/kyoto", "Kyoto in April.", {}));
  }
  CliRun run = RunStrata({"migrate", "--from", dir.File("from"), "--to", dir.File("to")}, "");
  ASSERT_EQ(run.exit_code, 0) << run.err << run.out;
  EXPECT_NE(run.out.find("verified"), std::string::npos) << run.out;
  auto copy = Engine::Open({.data_dir = dir.File("to")});
  ASSERT_OK(copy);
  auto store = (*copy)->store();
  ASSERT_OK(store);
  EXPECT_EQ((*store)->embedder()->model_id(), "local-hash-v1-64");
}

}  // namespace
}  // namespace strata::testing
