// Hostile input at library level (issue 20): each test names what once broke. The same scenarios run
// against the real program in tests/cli/hostile_probe.sh.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "strata/engine/engine.h"
#include "strata/json/checked.h"
#include "strata/json/json_writer.h"
#include "strata/memory/skill.h"
#include "strata/memory/uri.h"
#include "strata/message/message_json.h"
#include "test_util.h"

namespace strata {
namespace {

namespace fs = std::filesystem;

void WriteFile(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

std::string Deep(size_t levels, const std::string& open, const std::string& close) {
  std::string s;
  for (size_t i = 0; i < levels; ++i) s += open;
  for (size_t i = 0; i < levels; ++i) s += close;
  return s;
}

TEST(HostileInput, ASyntaxErrorInAHugeStringIsReportedInFewBytes) {
  std::string text = "{\"content\": \"" + std::string(5'000'000, 'x');  // Unterminated: nlohmann echoed it all.
  std::string why = json::DescribeSyntaxError(text);
  EXPECT_LT(why.size(), 300u) << why.substr(0, 300);
  EXPECT_NE(why.find("(5000001 bytes)"), std::string::npos) << why;
}

TEST(HostileInput, QuoteForErrorEscapesControlCharactersAndSaysTheLength) {
  EXPECT_EQ(json::QuoteForError("a\nb"), "\"a\\nb\"");
  std::string quoted = json::QuoteForError(std::string(1000, 'y'), 20);
  EXPECT_LT(quoted.size(), 50u);
  EXPECT_NE(quoted.find("(1000 bytes)"), std::string::npos);
}

TEST(HostileInput, JsonNestedTooDeepIsRefusedBeforeParsing) {
  EXPECT_EQ(json::FindTooDeep(Deep(256, "[", "]")), std::string_view::npos);
  EXPECT_EQ(json::FindTooDeep(Deep(257, "[", "]")), 256u);
  EXPECT_EQ(json::FindTooDeep("[\"[[[[[[\"]", 2), std::string_view::npos) << "brackets inside strings do not count";
  auto parsed = json::ParseUntrusted(Deep(100'000, "{\"a\":", "}"), "request body");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("request body: JSON nested deeper than 256 levels"), std::string::npos)
      << parsed.status().message();
  EXPECT_TRUE(json::ParseOrDiscard<nlohmann::json>(Deep(100'000, "[", "]")).is_discarded());
  // Messages (simdjson) and model replies say the same.
  EXPECT_FALSE(ParseMessages(Deep(100'000, "[", "]")).ok());
}

// The parser takes a NUL for the end of its input: what followed one was ignored (a body with garbage after a
// NUL was written; a second MCP message on one line was never answered).
TEST(HostileInput, ANulByteIsNeverTheEndOfJson) {
  std::string body = std::string("{\"uri\":\"strata://resources/a\"}") + '\0' + "{\"garbage\":";
  auto parsed = json::ParseUntrusted(body, "request body");
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(parsed.status().message().find("request body: a NUL byte at byte 30"), std::string::npos)
      << parsed.status().message();
  EXPECT_TRUE(json::ParseOrDiscard<nlohmann::json>(body).is_discarded());
  auto escaped = json::ParseUntrusted("{\"a\":\"x\\u0000y\"}", "request body");  // An escaped NUL is a character.
  ASSERT_TRUE(escaped.ok()) << escaped.status().message();
  EXPECT_EQ((*escaped)["a"].get<std::string>(), std::string("x\0y", 3));
}

TEST(HostileInput, UrisAreBoundedAndErrorsAboutThemAreOneLine) {
  std::string many = "strata://resources";
  for (int i = 0; i < 30'000; ++i) many += "/a";
  auto long_uri = memory::Uri::Parse(many);
  ASSERT_FALSE(long_uri.ok());
  EXPECT_LT(long_uri.status().message().size(), 200u);
  std::string deep = "strata://resources";
  for (int i = 0; i < 200; ++i) deep += "/a";
  auto deep_uri = memory::Uri::Parse(deep);
  ASSERT_FALSE(deep_uri.ok());
  EXPECT_NE(deep_uri.status().message().find("has 201 segments; at most 128"), std::string::npos) << deep_uri.status().message();
  auto newline = memory::Uri::Parse("strata://resources/a\nb");
  ASSERT_FALSE(newline.ok());
  EXPECT_EQ(newline.status().message().find('\n'), std::string::npos) << newline.status().message();
}

class HostileEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    auto e = Engine::Open({.data_dir = dir_.File("data")});
    ASSERT_OK(e);
    engine_ = std::move(*e);
  }
  testing::TempDir dir_;
  std::unique_ptr<Engine> engine_;
};

TEST_F(HostileEngine, TextThatIsNotUtf8IsNotStored) {
  Status content = engine_->Write("strata://resources/notes/latin1", "caf\xe9");
  EXPECT_EQ(content.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(content.message().find("content is not valid UTF-8 (byte 3)"), std::string::npos) << content.message();
  Status abstract = engine_->Write("strata://resources/notes/b", "fine", {.abstract_text = std::string("\xff")});
  EXPECT_NE(abstract.message().find("abstract (L0) is not valid UTF-8"), std::string::npos) << abstract.message();
  Status dir = engine_->Mkdir("strata://resources/d", {.overview = std::string("\xc3")});
  EXPECT_NE(dir.message().find("overview (L1) is not valid UTF-8"), std::string::npos) << dir.message();
  EXPECT_EQ(engine_->Stat("strata://resources/notes/latin1").status().code(), StatusCode::kNotFound);
}

TEST_F(HostileEngine, ContextRefUrisAreCheckedWhole) {
  ASSERT_OK(engine_->CreateSession("u", "a", "s"));
  for (const char* uri : {"strata://resources/../etc", "strata://resources/a\\u0000b", "strata://nowhere/x"}) {
    std::string json = std::string(R"({"role": "user", "content": [{"type": "context_ref", "uri": ")") + uri + "\"}]}";
    auto messages = ParseMessages(json);
    EXPECT_FALSE(messages.ok()) << uri;
  }
  auto fine = ParseMessages(R"({"role": "user", "content": [{"type": "context_ref", "uri": "strata://resources/a"}]})");
  ASSERT_OK(fine);
  ASSERT_OK(engine_->AddMessages("s", *fine));
}

TEST_F(HostileEngine, ASessionOwnerEditedIntoAPathIsDataLoss) {
  ASSERT_OK(engine_->CreateSession("alice", "a", "s"));
  std::string path = dir_.File("data/sessions/s/session.json");
  auto j = nlohmann::json::parse(testing::ReadFileOrDie(path));
  j["user"] = "../bob";
  WriteFile(path, j.dump());
  auto info = engine_->GetSession("s");
  ASSERT_FALSE(info.ok());
  EXPECT_EQ(info.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(info.status().message().find("session.json"), std::string::npos) << info.status().message();
}

TEST_F(HostileEngine, ImportNeverFollowsSymbolicLinks) {
  fs::create_directories(dir_.File("outside"));
  fs::create_directories(dir_.File("tree/sub"));
  WriteFile(dir_.File("outside/secret.md"), "secret outside the tree");
  WriteFile(dir_.File("outside/abstract"), "stolen");
  WriteFile(dir_.File("tree/sub/ok.md"), "inside");
  fs::create_symlink(dir_.File("outside/secret.md"), dir_.File("tree/linked.md"));
  fs::create_directory_symlink(dir_.File("outside"), dir_.File("tree/linked_dir"));
  fs::create_directory_symlink(".", dir_.File("tree/sub/loop"));
  fs::create_symlink(dir_.File("outside/abstract"), dir_.File("tree/sub/.abstract.md"));
  auto report = engine_->Import(dir_.File("tree"), "strata://resources/tree");
  ASSERT_OK(report);
  EXPECT_EQ(report->leaves, 1);
  EXPECT_EQ(report->skipped.size(), 4u);
  std::set<std::string> paths;
  for (const memory::SkippedPath& s : report->skipped) {
    paths.insert(s.path);
    EXPECT_EQ(s.reason, "a symbolic link, not followed") << s.path;
  }
  EXPECT_EQ(paths, (std::set<std::string>{"linked.md", "linked_dir", "sub/loop", "sub/.abstract.md"}));
  auto grep = engine_->Grep("outside the tree");
  ASSERT_OK(grep);
  EXPECT_TRUE(grep->empty());
  auto abstract = engine_->Read("strata://resources/tree/sub", memory::Level::kAbstract);
  ASSERT_OK(abstract);
  EXPECT_EQ(abstract->find("stolen"), std::string::npos);
}

TEST_F(HostileEngine, ExportNeverWritesThroughSymbolicLinks) {
  ASSERT_OK(engine_->Write("strata://resources/tree/ok", "inside"));
  fs::create_directories(dir_.File("outside"));
  fs::create_directories(dir_.File("target"));
  WriteFile(dir_.File("outside/victim.md"), "precious");
  fs::create_symlink(dir_.File("outside/victim.md"), dir_.File("target/ok.md"));
  auto through_file = engine_->Export("strata://resources/tree", dir_.File("target"));
  ASSERT_FALSE(through_file.ok());
  EXPECT_NE(through_file.status().message().find("symbolic link"), std::string::npos);
  EXPECT_EQ(testing::ReadFileOrDie(dir_.File("outside/victim.md")), "precious");
  fs::create_directories(dir_.File("target2"));
  fs::create_directory_symlink(dir_.File("outside"), dir_.File("target2/tree"));
  auto through_dir = engine_->Export("strata://resources", dir_.File("target2"));
  ASSERT_FALSE(through_dir.ok());
  EXPECT_FALSE(fs::exists(dir_.File("outside/ok.md")));
}

TEST(HostileInput, SkillFrontMatterWithARawControlCharacterIsRefused) {
  auto skill = memory::ParseSkill(std::string("---\nname: nul\ndescription: has a \0 raw nul\n---\nbody\n", 48), "SKILL.md");
  ASSERT_FALSE(skill.ok()) << "yaml-cpp dropped the NUL and stored a changed description";
  EXPECT_NE(skill.status().message().find("SKILL.md:3"), std::string::npos) << skill.status().message();
  auto escaped = memory::ParseSkill("---\nname: nul\ndescription: \"has a \\0 nul\"\n---\nbody\n", "SKILL.md");
  ASSERT_OK(escaped);
  EXPECT_EQ(escaped->description, std::string("has a \0 nul", 11));
}

}  // namespace
}  // namespace strata
