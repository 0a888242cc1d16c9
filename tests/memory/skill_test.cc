// SKILL.md parsing and serialising: the fields, every error with the place and rule it names, CRLF/BOM
// input, the allowed-tools forms, and the round trip ParseSkill(SerializeSkill(s)) == s (examples and a
// rapidcheck property).
#include "strata/memory/skill.h"

#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <filesystem>
#include <ostream>
#include <nlohmann/json.hpp>

#include "test_util.h"

namespace strata::memory {

// Prints a Skill in failure messages (found by ADL).
void PrintTo(const Skill& s, std::ostream* os) {
  nlohmann::json j = {{"name", s.name},       {"description", s.description}, {"tools", s.tools},
                      {"metadata_json", s.metadata_json}, {"license", s.license},  {"version", s.version},
                      {"extra_json", s.extra_json},     {"body", s.body}};
  *os << j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

namespace {

::testing::AssertionResult Contains(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" does not contain \"" << part << "\"";
}

// Parses `text` as "dir/SKILL.md", expects it to fail, and returns the message.
std::string ErrorOf(const std::string& text) {
  Result<Skill> skill = ParseSkill(text, "dir/SKILL.md");
  EXPECT_FALSE(skill.ok()) << "parsed: " << text;
  if (skill.ok()) return "";
  EXPECT_EQ(skill.status().code(), StatusCode::kInvalidArgument);
  return skill.status().message();
}

std::string WithFront(const std::string& front, const std::string& body = "Body\n") {
  return "---\n" + front + "---\n" + body;
}

TEST(Skill, ParsesEveryField) {
  auto skill = ParseSkill(
      "---\n"
      "name: pdf-tools\n"
      "description: Extract text and tables from PDF files. Use when working with PDFs.\n"
      "license: Apache-2.0\n"
      "version: 1.0\n"
      "allowed-tools: Read Bash(pdftotext:*) Write\n"
      "metadata:\n"
      "  author: jane\n"
      "  tags: [pdf, \"text\"]\n"
      "  priority: 2\n"
      "  ratio: 0.5\n"
      "  draft: false\n"
      "  zip: 007\n"
      "  empty: ~\n"
      "x-custom: hello\n"
      "---\n"
      "# PDF tools\n\nBody text.\n");
  ASSERT_OK(skill);
  EXPECT_EQ(skill->name, "pdf-tools");
  EXPECT_EQ(skill->description, "Extract text and tables from PDF files. Use when working with PDFs.");
  EXPECT_EQ(skill->license, "Apache-2.0");
  EXPECT_EQ(skill->version, "1.0");  // As written, not the float 1.
  EXPECT_EQ(skill->tools, (std::vector<std::string>{"Read", "Bash(pdftotext:*)", "Write"}));
  EXPECT_EQ(skill->metadata_json,
            R"({"author":"jane","tags":["pdf","text"],"priority":2,"ratio":0.5,"draft":false,"zip":"007","empty":null})");
  EXPECT_EQ(skill->extra_json, R"({"x-custom":"hello"})");
  EXPECT_EQ(skill->body, "# PDF tools\n\nBody text.\n");
  EXPECT_OK(ValidateSkill(*skill));
}

TEST(Skill, OptionalFieldsDefaultToEmpty) {
  auto skill = ParseSkill(WithFront("name: a\ndescription: b\n", ""));
  ASSERT_OK(skill);
  EXPECT_EQ(*skill, (Skill{.name = "a", .description = "b"}));
  EXPECT_EQ(skill->metadata_json, "{}");
  EXPECT_EQ(skill->extra_json, "{}");
}

TEST(Skill, MultiLineDescriptionsAndIndentedDelimiters) {
  auto skill = ParseSkill(WithFront("name: a\ndescription: |\n  line one\n  ---\n  line three\n", "---\nbody"));
  ASSERT_OK(skill);
  EXPECT_EQ(skill->description, "line one\n---\nline three\n");
  EXPECT_EQ(skill->body, "---\nbody");  // Only the first unindented `---` closes the front matter.
}

TEST(Skill, AcceptsCrlfAndBom) {
  std::string text = "\xEF\xBB\xBF---\r\nname: crlf\r\ndescription: \"two\r\n  lines\"\r\nlicense: MIT  \r\n---  \r\n"
                     "Body\r\nline 2\r\n";
  auto skill = ParseSkill(text, "w");
  ASSERT_OK(skill);
  EXPECT_EQ(skill->name, "crlf");
  EXPECT_EQ(skill->description, "two lines");
  EXPECT_EQ(skill->license, "MIT");
  EXPECT_EQ(skill->body, "Body\r\nline 2\r\n");  // The body is kept byte for byte.

  std::string bad = "\xEF\xBB\xBF---\r\ndescription: d\r\nname: Bad\r\n---\r\n";
  EXPECT_TRUE(Contains(ErrorOf(bad), "dir/SKILL.md:3: name 'Bad'"));  // Lines still count from 1.
}

TEST(Skill, MissingOrUnterminatedFrontMatter) {
  EXPECT_TRUE(Contains(ErrorOf(""), "dir/SKILL.md:1: missing front matter: the file is empty"));
  std::string no_front = ErrorOf("# Title\nname: x\n");
  EXPECT_TRUE(Contains(no_front, "dir/SKILL.md:1: missing front matter"));
  EXPECT_TRUE(Contains(no_front, "'# Title'"));
  EXPECT_TRUE(Contains(ErrorOf("\n---\nname: x\n---\n"), ":1: missing front matter"));
  std::string open = ErrorOf("---\nname: x\ndescription: y\n");
  EXPECT_TRUE(Contains(open, "dir/SKILL.md:1: unterminated front matter"));
  EXPECT_TRUE(Contains(open, "closing '---'"));
  EXPECT_TRUE(Contains(ErrorOf("---"), "unterminated front matter"));
}

TEST(Skill, YamlSyntaxErrorNamesLineAndColumn) {
  std::string error = ErrorOf(WithFront("name: a\ndescription: b: c\n"));
  EXPECT_TRUE(Contains(error, "dir/SKILL.md:3:")) << error;
  EXPECT_TRUE(Contains(error, "front matter is not valid YAML"));
  error = ErrorOf(WithFront("name: a\ndescription: b\ntags: [x,\n  y\n"));
  EXPECT_TRUE(Contains(error, "not valid YAML")) << error;
}

TEST(Skill, FrontMatterMustBeAMapping) {
  EXPECT_TRUE(Contains(ErrorOf(WithFront("- a\n- b\n")), "dir/SKILL.md:2: front matter: expected a mapping"));
  EXPECT_TRUE(Contains(ErrorOf(WithFront("just text\n")), "got a string ('just text')"));
  EXPECT_TRUE(Contains(ErrorOf("---\n---\n"), "dir/SKILL.md:1: front matter has no 'name' (required)"));
}

TEST(Skill, NameRules) {
  auto name_error = [](const std::string& name) { return ErrorOf(WithFront("name: " + name + "\ndescription: d\n")); };
  EXPECT_TRUE(Contains(ErrorOf(WithFront("description: d\n")), ":1: front matter has no 'name' (required)"));
  EXPECT_TRUE(Contains(name_error("\"\""), "dir/SKILL.md:2: name: must not be empty"));
  EXPECT_TRUE(Contains(name_error("PDF"), "dir/SKILL.md:2: name 'PDF': character 'P' at position 1 is not allowed"));
  EXPECT_TRUE(Contains(name_error("pdf_tools"), "character '_' at position 4"));
  EXPECT_TRUE(Contains(name_error("café-x"), "character 'é' at position 4"));
  EXPECT_TRUE(Contains(name_error("\"a\\tb\""), "character '\\x09' at position 2"));
  EXPECT_TRUE(Contains(name_error("-pdf"), "name '-pdf': must not start or end with a hyphen"));
  EXPECT_TRUE(Contains(name_error("pdf-"), "must not start or end with a hyphen"));
  EXPECT_TRUE(Contains(name_error("pdf--tools"), "must not contain consecutive hyphens ('--')"));
  EXPECT_TRUE(Contains(name_error(std::string(65, 'a')), "65 characters, at most 64 allowed"));
  EXPECT_OK(ParseSkill(WithFront("name: " + std::string(64, 'a') + "\ndescription: d\n")));
  EXPECT_OK(ParseSkill(WithFront("name: 0-9a\ndescription: d\n")));
  EXPECT_TRUE(Contains(name_error("[a, b]"), "dir/SKILL.md:2: name: expected a string, got a list"));
}

TEST(Skill, DescriptionRules) {
  EXPECT_TRUE(Contains(ErrorOf(WithFront("name: a\n")), "dir/SKILL.md:1: front matter has no 'description' (required)"));
  EXPECT_TRUE(Contains(ErrorOf(WithFront("name: a\ndescription:\n")), "dir/SKILL.md:3: description: must not be empty"));
  EXPECT_TRUE(Contains(ErrorOf(WithFront("name: a\ndescription: \"  \\n \"\n")), "description: must not be blank"));
  EXPECT_TRUE(Contains(ErrorOf(WithFront("name: a\ndescription: " + std::string(1025, 'x') + "\n")),
                       "description: 1025 characters, at most 1024 allowed"));
  std::string accents;
  for (int i = 0; i < 1024; ++i) accents += "é";  // 2048 bytes, 1024 characters: allowed.
  EXPECT_OK(ParseSkill(WithFront("name: a\ndescription: " + accents + "\n")));
  EXPECT_TRUE(Contains(ErrorOf(WithFront("name: a\ndescription: {x: 1}\n")), "description: expected a string, got a mapping"));
}

TEST(Skill, WrongTypesNameTheFieldAndWhatWasFound) {
  const std::string head = "name: a\ndescription: d\n";
  EXPECT_TRUE(Contains(ErrorOf(WithFront(head + "tools:\n  x: 1\n")),
                       "dir/SKILL.md:4: tools: expected a list of strings, got a mapping"));
  EXPECT_TRUE(Contains(ErrorOf(WithFront(head + "tools: Read Write\n")),
                       "tools: expected a list of strings, got a string ('Read Write')"));
  EXPECT_TRUE(Contains(ErrorOf(WithFront(head + "tools:\n  - Read\n  - [x]\n")),
                       "dir/SKILL.md:6: tools[1]: expected a string, got a list"));
  EXPECT_TRUE(Contains(ErrorOf(WithFront(head + "tools: [Read, \"\"]\n")), "tools[1]: must not be empty"));
  EXPECT_TRUE(Contains(ErrorOf(WithFront(head + "allowed-tools: {a: b}\n")),
                       "allowed-tools: expected a list of strings or a space/comma separated string, got a mapping"));
  EXPECT_TRUE(Contains(ErrorOf(WithFront(head + "metadata: [a]\n")), "dir/SKILL.md:4: metadata: expected a mapping, got a list"));
  EXPECT_TRUE(Contains(ErrorOf(WithFront(head + "metadata: text\n")), "metadata: expected a mapping, got a string ('text')"));
  EXPECT_TRUE(Contains(ErrorOf(WithFront(head + "license: [MIT]\n")), "license: expected a string, got a list"));
  EXPECT_TRUE(Contains(ErrorOf(WithFront(head + "version: {major: 1}\n")), "version: expected a string, got a mapping"));
  EXPECT_TRUE(Contains(ErrorOf(WithFront(head + "name: b\n")), "dir/SKILL.md:4: 'name' is given twice (first at line 2)"));
  EXPECT_TRUE(Contains(ErrorOf(WithFront(head + "metadata:\n  k: 1\n  k: 2\n")), "dir/SKILL.md:6: metadata: key 'k' is given twice"));
  EXPECT_TRUE(Contains(ErrorOf(WithFront(head + "tools: [a]\nallowed-tools: b\n")),
                       "dir/SKILL.md:5: both 'tools' and 'allowed-tools' are given; keep one"));
}

TEST(Skill, AllowedToolsForms) {
  const std::string head = "name: a\ndescription: d\n";
  auto tools = [&](const std::string& line) {
    auto skill = ParseSkill(WithFront(head + line));
    EXPECT_OK(skill);
    return skill.ok() ? skill->tools : std::vector<std::string>{"<error>"};
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(tools("allowed-tools: Read Write\n"), (V{"Read", "Write"}));
  EXPECT_EQ(tools("allowed-tools: Read,Write\n"), (V{"Read", "Write"}));
  EXPECT_EQ(tools("allowed-tools: \"Read, Write,  Bash(git add:*) ,Edit\"\n"), (V{"Read", "Write", "Bash(git add:*)", "Edit"}));
  EXPECT_EQ(tools("allowed-tools: [Read, \"Bash(git status)\"]\n"), (V{"Read", "Bash(git status)"}));
  EXPECT_EQ(tools("allowed-tools:\n  - Read\n  - Grep\n"), (V{"Read", "Grep"}));
  EXPECT_EQ(tools("allowed-tools:\n"), V{});
  EXPECT_EQ(tools("allowed-tools: \" , \"\n"), V{});
  EXPECT_EQ(tools("tools: [Read, Write]\n"), (V{"Read", "Write"}));

  auto skill = ParseSkill(WithFront(head + "allowed-tools: Read Write\n"));
  ASSERT_OK(skill);
  std::string text = SerializeSkill(*skill);  // Written back as the canonical `tools` list.
  EXPECT_TRUE(Contains(text, "tools:\n  - \"Read\"\n  - \"Write\"\n"));
  EXPECT_EQ(*ParseSkill(text), *skill);
}

TEST(Skill, SerializesInAStableReadableForm) {
  Skill skill{.name = "pdf-tools",
              .description = "Extract text: tables, \"quotes\" and 'more'",
              .tools = {"Read", "Bash(git add:*)"},
              .metadata_json = R"({"author":"jane","n":2,"ok":true,"none":null,"list":[1,"x"]})",
              .license = "MIT",
              .version = "1.0",
              .extra_json = R"({"x-custom":"v","1st":"numeric key"})",
              .body = "# Body\n"};
  EXPECT_EQ(SerializeSkill(skill),
            "---\n"
            "name: pdf-tools\n"
            "description: \"Extract text: tables, \\\"quotes\\\" and 'more'\"\n"
            "license: \"MIT\"\n"
            "version: \"1.0\"\n"
            "tools:\n"
            "  - \"Read\"\n"
            "  - \"Bash(git add:*)\"\n"
            "metadata:\n"
            "  author: \"jane\"\n"
            "  \"n\": 2\n"  // A bare n is a boolean to YAML 1.1 readers.
            "  ok: true\n"
            "  none: ~\n"
            "  list:\n"
            "    - 1\n"
            "    - \"x\"\n"
            "x-custom: \"v\"\n"
            "\"1st\": \"numeric key\"\n"
            "---\n"
            "# Body\n");
  EXPECT_EQ(*ParseSkill(SerializeSkill(skill)), skill);
  Skill minimal{.name = "a", .description = "d"};
  EXPECT_EQ(SerializeSkill(minimal), "---\nname: a\ndescription: \"d\"\n---\n");
}

TEST(Skill, RoundTripsTrickyExamples) {
  std::vector<Skill> skills = {
      {.name = "a", .description = "d"},
      {.name = "unicode-1", .description = "Résumé 日本語 🙂 — naïve «quotes»", .tools = {"Ünï", "ツール"},
       .license = "© 2026", .body = "Ünïcödé body 🙂\n"},
      {.name = "quotes", .description = "She said \"hi\" and 'bye' \\ back\\slash", .version = "'1'"},
      {.name = "colons", .description = "key: value # not a comment: - [x] {y} & * ! | > % @ `",
       .license = "a: b", .version = "1.0"},
      {.name = "multi-line", .description = "line one\nline two\n\n  indented\ttab\n", .body = "---\nnot front\n---\n"},
      {.name = "yaml-words", .description = "null", .tools = {"true", "~", "-", "123", "0x1F"}, .license = "no",
       .version = "1.10"},
      {.name = "spaces", .description = "  leading and trailing  ", .body = "\r\nCRLF body\r\n"},
      {.name = "control", .description = "bell\a cr\r lf\n del\x7F nel\xC2\x85 ls\xE2\x80\xA8 end"},
      {.name = "json-fields", .description = "d",
       .metadata_json = R"({"nested":{"a":[1,2.5,-3,1e+100,true,null,"s"]},"":"empty key","key: x":"v"})",
       .extra_json = R"({"x-list":["a",{"b":"c"}],"x-null":null,"x-num":-0.0,"x-empty":{},"x-arr":[]})"},
      {.name = "body-only-newlines", .description = "d", .body = "\n\n\n"},
  };
  for (const Skill& skill : skills) {
    SCOPED_TRACE(skill.name);
    ASSERT_OK(ValidateSkill(skill));
    std::string text = SerializeSkill(skill);
    auto back = ParseSkill(text);
    ASSERT_OK(back);
    EXPECT_EQ(*back, skill) << text;
    EXPECT_EQ(SerializeSkill(*back), text);
  }
}

TEST(Skill, ValidateSkillNamesTheBrokenRule) {
  Skill ok{.name = "a", .description = "d"};
  EXPECT_OK(ValidateSkill(ok));
  auto message = [](Skill s) { return ValidateSkill(s).message(); };
  EXPECT_TRUE(Contains(message({.name = "A", .description = "d"}), "name 'A': character 'A'"));
  EXPECT_TRUE(Contains(message({.name = "a", .description = ""}), "description: must not be empty"));
  EXPECT_TRUE(Contains(message({.name = "a", .description = "d", .tools = {" "}}), "tools[0]: must not be empty"));
  EXPECT_TRUE(Contains(message({.name = "a", .description = "d", .metadata_json = "[1]"}), "metadata_json: not a JSON object"));
  EXPECT_TRUE(Contains(message({.name = "a", .description = "d", .extra_json = "{"}), "extra_json: not a JSON object"));
  EXPECT_TRUE(Contains(message({.name = "a", .description = "d", .extra_json = R"({"name":"x"})"}),
                       "extra_json: key 'name' is a SKILL.md field"));
  // Serialising never emits what would clash with a field.
  std::string text = SerializeSkill({.name = "a", .description = "d", .extra_json = R"({"name":"x","k":1})"});
  EXPECT_EQ(ParseSkill(text)->extra_json, R"({"k":1})");
}

TEST(Skill, StringsYamlCannotCarryAreRejectedNotMangled) {
  // yaml-cpp's emitter writes U+FFFD for noncharacters and broken UTF-8, so a round trip could not hold.
  EXPECT_TRUE(Contains(ValidateSkill({.name = "a", .description = "x\xEF\xBF\xBEy"}).message(),
                       "description: U+FFFE at byte 1 is a Unicode noncharacter"));
  EXPECT_TRUE(Contains(ValidateSkill({.name = "a", .description = "d", .tools = {"\xEF\xB7\x90"}}).message(),
                       "tools[0]: U+FDD0 at byte 0"));
  EXPECT_TRUE(Contains(ValidateSkill({.name = "a", .description = "d", .license = "ok\xC3("}).message(),
                       "license: byte 2 (0xC3) starts no valid UTF-8 character"));
  EXPECT_TRUE(Contains(ValidateSkill({.name = "a", .description = "d", .version = "\xED\xA0\x80"}).message(),
                       "version: byte 0 (0xED)"));  // A surrogate.
  EXPECT_TRUE(Contains(ValidateSkill({.name = "a", .description = "d", .metadata_json = R"({"k":["\uffff"]})"}).message(),
                       "metadata.k[0]: U+FFFF"));
  EXPECT_TRUE(Contains(ValidateSkill({.name = "a", .description = "d", .extra_json = R"({"\ufdef":1})"}).message(),
                       "extra: key"));
  EXPECT_TRUE(Contains(ErrorOf(WithFront("name: a\ndescription: \"x\\uFFFE\"\n")),
                       "dir/SKILL.md:3: 'x\xEF\xBF\xBE': U+FFFE at byte 1 is a Unicode noncharacter"));
  EXPECT_OK(ValidateSkill({.name = "a", .description = "\xF0\x9F\x99\x82 \xEF\xBF\xBD \xF4\x8F\xBF\xBD"}));
}

// A file that is not UTF-8 anywhere, the body included, is refused naming its line (the body was kept as
// it was, and storing the skill then failed in a JSON writer: an internal error instead of the file's).
TEST(Skill, AFileThatIsNotUtf8IsRefusedNamingTheLine) {
  EXPECT_EQ(ErrorOf(WithFront("name: a\ndescription: d\n", "Body\nsecond \xFF line\n")),
            "dir/SKILL.md:6: not valid UTF-8 (byte 43 of the file)");
  EXPECT_TRUE(Contains(ErrorOf(WithFront("name: a\ndescription: caf\xC3\n")), "dir/SKILL.md:3: not valid UTF-8"));
  EXPECT_OK(ParseSkill(WithFront("name: a\ndescription: caf\xC3\xA9\n", "\xE4\xB8\xAD\n"), "dir/SKILL.md"));
}

TEST(Skill, AliasBombIsRejected) {
  std::string front = "name: a\ndescription: d\nl0: &l0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 9; ++i) {  // 10^9 values once expanded.
    std::string prev = "*l" + std::to_string(i - 1);
    front += "l" + std::to_string(i) + ": &l" + std::to_string(i) + " [" + prev;
    for (int k = 0; k < 9; ++k) front += ", " + prev;
    front += "]\n";
  }
  EXPECT_TRUE(Contains(ErrorOf(WithFront(front)), "front matter expands to more than 100000 values"));
  EXPECT_OK(ParseSkill(WithFront("name: a\ndescription: d\nbase: &b {k: v}\ncopy: *b\n")));
}

TEST(Skill, LoadSkillFileAcceptsAFileOrItsDirectory) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.File("pdf-tools"));
  std::string path = dir.File("pdf-tools/SKILL.md");
  testing::WriteFileOrDie(path, WithFront("name: pdf-tools\ndescription: d\n"));
  auto from_dir = LoadSkillFile(dir.File("pdf-tools"));
  ASSERT_OK(from_dir);
  EXPECT_EQ(from_dir->name, "pdf-tools");
  auto from_file = LoadSkillFile(path);
  ASSERT_OK(from_file);
  EXPECT_EQ(*from_file, *from_dir);

  auto missing_dir = LoadSkillFile(dir.path());
  EXPECT_EQ(missing_dir.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(missing_dir.status().message(), dir.path() + " has no SKILL.md"));
  auto missing_file = LoadSkillFile(dir.File("nope.md"));
  EXPECT_EQ(missing_file.status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Contains(missing_file.status().message(), dir.File("nope.md")));

  testing::WriteFileOrDie(path, WithFront("name: Bad\ndescription: d\n"));
  EXPECT_TRUE(Contains(LoadSkillFile(dir.File("pdf-tools")).status().message(), path + ":2: name 'Bad'"));
}

// Pieces that stress quoting, line structure and encoding.
const std::vector<std::string>& Pieces() {
  static const std::vector<std::string> pieces = {
      "a", "Z", "7", " ", "  ", "\n", "\r\n", "\t", ":", ": ", " #", "#", "-", "- ", "---", "\n---\n", "...",
      "'", "\"", "\\", "{", "}", "[", "]", ",", "&", "*", "!", "|", ">", "%", "@", "`", "?", "~", "null", "true",
      "no", "1.0", "0x1F", "é", "日本", "🙂", "«»", "\xC2\x85", "\xE2\x80\xA8", "\x01", "\x7F", "word", "Bash(x:*)",
      "\xEF\xBB\xBF", std::string(1, '\0'), "\xF4\x8F\xBF\xBD", "\xEF\xBF\xBD"};
  return pieces;
}

rc::Gen<std::string> Text(int max_pieces) {
  return rc::gen::map(rc::gen::container<std::vector<std::string>>(rc::gen::elementOf(Pieces())),
                      [max_pieces](const std::vector<std::string>& parts) {
                        std::string out;
                        for (size_t i = 0; i < parts.size() && i < static_cast<size_t>(max_pieces); ++i) out += parts[i];
                        return out;
                      });
}

rc::Gen<std::string> Name() {
  return rc::gen::map(rc::gen::nonEmpty(rc::gen::container<std::vector<std::string>>(
                          rc::gen::nonEmpty(rc::gen::container<std::string>(
                              rc::gen::oneOf(rc::gen::inRange('a', static_cast<char>('z' + 1)), rc::gen::inRange('0', static_cast<char>('9' + 1))))))),
                      [](const std::vector<std::string>& segments) {
                        std::string name;
                        for (const std::string& s : segments) {
                          if (name.size() + s.size() + 1 > kMaxSkillNameLength) break;
                          name += (name.empty() ? "" : "-") + s;
                        }
                        return name.empty() ? std::string("x") : name;
                      });
}

nlohmann::ordered_json JsonValue(int depth) {
  switch (*rc::gen::inRange(0, depth > 0 ? 8 : 6)) {
    case 0: return *Text(6);
    case 1: return *rc::gen::arbitrary<int64_t>();
    case 2: {
      double d = *rc::gen::arbitrary<double>();
      return std::isfinite(d) ? nlohmann::ordered_json(d) : nlohmann::ordered_json(0.25);
    }
    case 3: return *rc::gen::arbitrary<bool>();
    case 4: return nullptr;
    case 5: return *Text(3);
    case 6: {
      nlohmann::ordered_json list = nlohmann::ordered_json::array();
      for (int i = *rc::gen::inRange(0, 4); i > 0; --i) list.push_back(JsonValue(depth - 1));
      return list;
    }
    default: {
      nlohmann::ordered_json object = nlohmann::ordered_json::object();
      for (int i = *rc::gen::inRange(0, 4); i > 0; --i) object[*Text(3)] = JsonValue(depth - 1);
      return object;
    }
  }
}

RC_GTEST_PROP(Skill, RoundTripsRandomSkills, ()) {
  Skill skill;
  skill.name = *Name();
  skill.description = "d" + *Text(60);  // Never blank.
  for (int i = *rc::gen::inRange(0, 4); i > 0; --i) skill.tools.push_back("t" + *Text(4));
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();
  for (int i = *rc::gen::inRange(0, 4); i > 0; --i) metadata[*Text(3)] = JsonValue(2);
  skill.metadata_json = metadata.dump();
  skill.license = *Text(5);
  skill.version = *Text(3);
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  for (int i = *rc::gen::inRange(0, 3); i > 0; --i) extra["x-" + *Text(3)] = JsonValue(2);
  skill.extra_json = extra.dump();
  skill.body = *Text(40);
  RC_ASSERT(ValidateSkill(skill).ok());

  std::string text = SerializeSkill(skill);
  Result<Skill> back = ParseSkill(text, "generated");
  RC_ASSERT(back.ok());
  RC_ASSERT(*back == skill);
}

}  // namespace
}  // namespace strata::memory
