// Skills: SKILL.md files, YAML front matter followed by a Markdown body, parsed and written back.
//
//   ---
//   name: pdf-tools                      required; 1..64 of [a-z0-9-], no leading/trailing '-', no "--"
//   description: "Extract text ..."      required; not blank, at most 1024 characters (code points)
//   tools: [Read, "Bash(git add:*)"]     optional list of strings; `allowed-tools` may instead be a list
//                                        or one string of names separated by spaces and/or commas
//                                        (a space inside parentheses does not separate)
//   license: MIT                         optional string
//   version: "1.2"                       optional string (a plain 1.2 is kept as the text "1.2")
//   metadata: {author: jane}             optional mapping, kept as JSON text
//   anything-else: ...                   kept in `extra_json`
//   ---
//   # Markdown body, kept byte for byte
//
// The file may start with a UTF-8 BOM and use CRLF line endings; the delimiters are lines holding exactly
// `---` (trailing spaces allowed). Plain YAML scalars inside metadata/extra follow the YAML 1.2 core
// schema for null, true/false and decimal numbers; everything else is a string. Errors are kInvalidArgument
// whose message starts with "<where>:<line>:" (1-based line in the file) and names the field and the rule.
//
// Round trip: for every Skill s that ParseSkill returned (or that ValidateSkill accepts and whose JSON
// fields are compact as nlohmann::ordered_json::dump() writes them), ParseSkill(SerializeSkill(s)) == s.
//
// Trust: a hostile file cannot make the parser throw or expand YAML aliases without bound
// (kMaxSkillFrontMatterNodes), but the body is not inspected; callers that show it to a model decide
// what to trust.
//
// Thread safety: Skill is a value type; the functions are pure apart from LoadSkillFile's read.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "strata/util/status.h"

namespace strata::memory {

// Every member has an initialiser so designated initialisers may name only the fields they set.
struct Skill {
  std::string name{};
  std::string description{};
  std::vector<std::string> tools{};  // Empty: the key is absent.
  std::string metadata_json = "{}";  // A JSON object; "{}" when absent.
  std::string license{};             // Empty: absent.
  std::string version{};             // Empty: absent.
  std::string extra_json = "{}";     // Unknown front-matter keys, in file order, as a JSON object.
  std::string body{};                // Everything after the closing `---` line.

  friend bool operator==(const Skill&, const Skill&) = default;
};

// Limits from the Agent Skills format; exceeding one is a parse or validation error.
inline constexpr size_t kMaxSkillNameLength = 64;
inline constexpr size_t kMaxSkillDescriptionLength = 1024;  // In Unicode code points.
// Keys and values the front matter may hold once YAML aliases are expanded; more is a parse error, so a
// small file of nested aliases ("billion laughs") cannot exhaust memory.
inline constexpr size_t kMaxSkillFrontMatterNodes = 100000;

// Parses SKILL.md `text`; `where` names its source in errors (a path). Returns kInvalidArgument for a
// missing or unterminated front matter, a YAML syntax error (with its line and column), a missing or
// invalid name (naming the rule broken), a missing, blank or too long description, a field of the wrong
// type ("tools: expected a list of strings, got a mapping"), a key given twice, or a string that is not
// UTF-8 or holds a Unicode noncharacter.
Result<Skill> ParseSkill(std::string_view text, std::string_view where = "SKILL.md");

// Reads and parses `path`: a SKILL.md file, or a directory containing one. Returns kNotFound when
// the file does not exist, kInternal when it cannot be read, or ParseSkill's errors (naming the path).
Result<Skill> LoadSkillFile(const std::string& path);

// Returns the first rule `skill` breaks, or OK: the rules ParseSkill applies (including that every string
// in the front matter is UTF-8 without Unicode noncharacters, which yaml-cpp's emitter would replace), and
// metadata_json and extra_json must hold JSON objects, extra_json without a key this format defines.
Status ValidateSkill(const Skill& skill);

// Writes `skill` as SKILL.md text: front matter with name, description, then license, version, tools,
// metadata and the extra keys, each only when non-empty, string values double-quoted by yaml-cpp's
// emitter (the name and keys stay plain when no YAML reader could take them for another type); then
// "---\n" and the body. Fields that ValidateSkill rejects are written as given when they are strings;
// a metadata_json/extra_json that is not a JSON object, and extra keys this format defines, are omitted.
std::string SerializeSkill(const Skill& skill);

}  // namespace strata::memory
