#include "strata/memory/skill.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>

#include "strata/json/json_writer.h"

namespace strata::memory {
namespace {

using Json = nlohmann::ordered_json;  // Keeps the file's key order, so a round trip keeps it too.

constexpr std::string_view kBom = "\xEF\xBB\xBF";
constexpr std::array<std::string_view, 7> kKnownKeys = {"name",     "description", "tools",  "allowed-tools",
                                                        "metadata", "license",     "version"};
constexpr int kFirstYamlLine = 2;  // The front matter's first line is the file's second (after `---`).

bool IsKnownKey(std::string_view key) {
  for (std::string_view k : kKnownKeys) {
    if (k == key) return true;
  }
  return false;
}

Status Error(std::string_view where, int line, const std::string& what) {
  return Status::InvalidArgument(std::string(where) + ":" + std::to_string(line) + ": " + what);
}

bool IsContinuationByte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

size_t CodePoints(std::string_view s) {
  size_t n = 0;
  for (char c : s) n += IsContinuationByte(c) ? 0 : 1;
  return n;
}

// Returns `s` in single quotes, cut to about 60 bytes (at a character boundary) so messages stay short.
std::string Quote(std::string_view s) {
  constexpr size_t kMax = 60;
  if (s.size() <= kMax) return "'" + std::string(s) + "'";
  size_t cut = kMax;
  while (cut > 0 && IsContinuationByte(s[cut])) --cut;
  return "'" + std::string(s.substr(0, cut)) + "...'";
}

bool IsBlank(std::string_view s) { return s.find_first_not_of(" \t\r\n") == std::string_view::npos; }

// Returns why `s` cannot pass through yaml-cpp's emitter unchanged: bytes that are not UTF-8 (strictly:
// no overlong forms or surrogates), or a Unicode noncharacter (U+FDD0..U+FDEF, U+xFFFE, U+xFFFF), which
// the emitter replaces with U+FFFD. Returns nullopt when `s` is fine.
std::optional<std::string> EncodingProblem(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : (c >> 3) == 0x1E ? 4 : 0;
    char32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
    bool valid = len != 0 && i + len <= s.size();
    for (size_t k = 1; valid && k < len; ++k) {
      valid = IsContinuationByte(s[i + k]);
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    }
    static constexpr char32_t kMinForLength[] = {0, 0, 0x80, 0x800, 0x10000};
    if (!valid || cp < kMinForLength[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(c));
      return "byte " + std::to_string(i) + " (" + hex + ") starts no valid UTF-8 character";
    }
    if ((cp >= 0xFDD0 && cp <= 0xFDEF) || (cp & 0xFFFE) == 0xFFFE) {
      char code[16];
      std::snprintf(code, sizeof code, "U+%04X", static_cast<unsigned>(cp));
      return std::string(code) + " at byte " + std::to_string(i) + " is a Unicode noncharacter, which SKILL.md cannot carry";
    }
    i += len;
  }
  return std::nullopt;
}

std::optional<std::string> NameProblem(std::string_view name) {
  if (name.empty()) return "name: must not be empty";
  std::string shown = "name " + Quote(name) + ": ";
  size_t chars = CodePoints(name);
  if (chars > kMaxSkillNameLength) {
    return shown + std::to_string(chars) + " characters, at most " + std::to_string(kMaxSkillNameLength) + " allowed";
  }
  size_t position = 0;
  for (size_t i = 0; i < name.size(); ++i) {
    if (IsContinuationByte(name[i])) continue;
    ++position;
    char c = name[i];
    if ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-') continue;
    size_t end = i + 1;
    while (end < name.size() && IsContinuationByte(name[end])) ++end;
    std::string ch(name.substr(i, end - i));
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7F) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "\\x%02X", static_cast<unsigned>(static_cast<unsigned char>(c)));
      ch = hex;
    }
    return shown + "character '" + ch + "' at position " + std::to_string(position) +
           " is not allowed; use lowercase letters a-z, digits and hyphens";
  }
  if (name.front() == '-' || name.back() == '-') return shown + "must not start or end with a hyphen";
  if (name.find("--") != std::string_view::npos) return shown + "must not contain consecutive hyphens ('--')";
  return std::nullopt;
}

std::optional<std::string> DescriptionProblem(std::string_view description) {
  if (description.empty()) return "description: must not be empty";
  if (IsBlank(description)) return "description: must not be blank";
  size_t chars = CodePoints(description);
  if (chars > kMaxSkillDescriptionLength) {
    return "description: " + std::to_string(chars) + " characters, at most " +
           std::to_string(kMaxSkillDescriptionLength) + " allowed";
  }
  return std::nullopt;
}

std::string TypeName(const YAML::Node& node) {
  switch (node.Type()) {
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Scalar: return "a string (" + Quote(node.Scalar()) + ")";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a mapping";
    default: return "nothing";
  }
}

int LineOf(const YAML::Node& node) {
  YAML::Mark mark = node.Mark();
  return mark.line >= 0 ? kFirstYamlLine + mark.line : 1;
}

// A line of `text` starting at `pos`, without its terminator; `next` is set to where the next line starts.
std::string_view LineAt(std::string_view text, size_t pos, size_t& next) {
  size_t nl = text.find('\n', pos);
  next = nl == std::string_view::npos ? text.size() : nl + 1;
  return text.substr(pos, (nl == std::string_view::npos ? text.size() : nl) - pos);
}

bool IsDelimiter(std::string_view line) {
  size_t end = line.find_last_not_of(" \t\r");
  return end != std::string_view::npos && line.substr(0, end + 1) == "---";
}

// Returns true for a plain scalar that is a decimal number in JSON's grammar, optionally with a '+'.
bool IsJsonNumber(std::string_view s) {
  size_t i = 0;
  auto digits = [&] {
    size_t start = i;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    return i > start;
  };
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  if (i < s.size() && s[i] == '0') {
    ++i;
  } else if (!digits()) {
    return false;
  }
  if (i < s.size() && s[i] == '.') {
    ++i;
    if (!digits()) return false;
  }
  if (i < s.size() && (s[i] == 'e' || s[i] == 'E')) {
    ++i;
    if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
    if (!digits()) return false;
  }
  return i == s.size();
}

// Converts a YAML value to JSON. Quoted scalars are strings; plain ones resolve to null (yaml-cpp already
// did), true/false, a decimal number, or else a string. `path` names the value in errors.
Result<Json> ToJson(const YAML::Node& node, const std::string& path, std::string_view where) {
  switch (node.Type()) {
    case YAML::NodeType::Scalar: {
      const std::string& s = node.Scalar();
      const std::string& tag = node.Tag();
      if (tag == "!" || tag == "tag:yaml.org,2002:str") return Json(s);
      if (s == "true" || s == "True" || s == "TRUE") return Json(true);
      if (s == "false" || s == "False" || s == "FALSE") return Json(false);
      if (IsJsonNumber(s)) {
        Json number = Json::parse(s[0] == '+' ? s.substr(1) : s, nullptr, /*allow_exceptions=*/false);
        if (number.is_number() && (!number.is_number_float() || std::isfinite(number.get<double>()))) return number;
      }
      return Json(s);
    }
    case YAML::NodeType::Sequence: {
      Json list = Json::array();
      for (size_t i = 0; i < node.size(); ++i) {
        STRATA_ASSIGN_OR_RETURN(Json item, ToJson(node[i], path + "[" + std::to_string(i) + "]", where));
        list.push_back(std::move(item));
      }
      return list;
    }
    case YAML::NodeType::Map: {
      Json object = Json::object();
      for (const auto& kv : node) {
        if (!kv.first.IsScalar()) {
          return Error(where, LineOf(kv.first), path + ": keys must be strings, got " + TypeName(kv.first));
        }
        const std::string& key = kv.first.Scalar();
        if (object.contains(key)) return Error(where, LineOf(kv.first), path + ": key '" + key + "' is given twice");
        STRATA_ASSIGN_OR_RETURN(object[key], ToJson(kv.second, path + "." + key, where));
      }
      return object;
    }
    default: return Json(nullptr);
  }
}

// Returns the text of an optional string field; null reads as "" (absent).
Result<std::string> StringField(const YAML::Node& value, const std::string& key, int line, std::string_view where) {
  if (value.IsNull()) return std::string();
  if (!value.IsScalar()) return Error(where, line, key + ": expected a string, got " + TypeName(value));
  return value.Scalar();
}

Result<std::vector<std::string>> ToolList(const YAML::Node& value, const std::string& key, std::string_view where) {
  std::vector<std::string> tools;
  for (size_t i = 0; i < value.size(); ++i) {
    const YAML::Node& item = value[i];
    std::string at = key + "[" + std::to_string(i) + "]";
    if (!item.IsScalar()) return Error(where, LineOf(item), at + ": expected a string, got " + TypeName(item));
    if (IsBlank(item.Scalar())) return Error(where, LineOf(item), at + ": must not be empty");
    tools.push_back(item.Scalar());
  }
  return tools;
}

// Splits "Read, Write Bash(git add:*)" at spaces and commas outside parentheses.
std::vector<std::string> SplitTools(std::string_view text) {
  std::vector<std::string> tools;
  std::string current;
  int depth = 0;
  for (char c : text) {
    if (c == '(') ++depth;
    if (c == ')' && depth > 0) --depth;
    if (depth == 0 && (c == ' ' || c == ',' || c == '\t' || c == '\n' || c == '\r')) {
      if (!current.empty()) tools.push_back(std::move(current));
      current.clear();
    } else {
      current += c;
    }
  }
  if (!current.empty()) tools.push_back(std::move(current));
  return tools;
}

Result<std::string> Dump(const Json& json, const std::string& key, int line, std::string_view where) {
  try {
    return json.dump();
  } catch (const Json::exception& e) {  // Invalid UTF-8 in a string.
    return Error(where, line, key + ": " + e.what());
  }
}

// Returns an error for the first key or value in `node` that EncodingProblem rejects, or when the tree,
// with aliases expanded, holds more than `budget` nodes. Runs before any other walk, so it bounds them all.
Status CheckScalars(const YAML::Node& node, std::string_view where, size_t& budget) {
  if (budget == 0) {
    return Error(where, LineOf(node), "front matter expands to more than " + std::to_string(kMaxSkillFrontMatterNodes) +
                                          " values (aliases repeating a large value?)");
  }
  --budget;
  if (node.IsScalar()) {
    if (auto problem = EncodingProblem(node.Scalar())) return Error(where, LineOf(node), Quote(node.Scalar()) + ": " + *problem);
  } else if (node.IsSequence()) {
    for (const YAML::Node& item : node) STRATA_RETURN_IF_ERROR(CheckScalars(item, where, budget));
  } else if (node.IsMap()) {
    for (const auto& kv : node) {
      STRATA_RETURN_IF_ERROR(CheckScalars(kv.first, where, budget));
      STRATA_RETURN_IF_ERROR(CheckScalars(kv.second, where, budget));
    }
  }
  return Status::Ok();
}

// Returns the first EncodingProblem among the strings and keys of `json`, prefixed with its path.
std::optional<std::string> JsonEncodingProblem(const Json& json, const std::string& path) {
  if (json.is_string()) {
    if (auto problem = EncodingProblem(json.get_ref<const std::string&>())) return path + ": " + *problem;
  } else if (json.is_array()) {
    for (size_t i = 0; i < json.size(); ++i) {
      if (auto problem = JsonEncodingProblem(json[i], path + "[" + std::to_string(i) + "]")) return problem;
    }
  } else if (json.is_object()) {
    for (const auto& [key, value] : json.items()) {
      if (auto problem = EncodingProblem(key)) return path + ": key " + Quote(key) + ": " + *problem;
      if (auto problem = JsonEncodingProblem(value, path + "." + key)) return problem;
    }
  }
  return std::nullopt;
}

Result<Skill> FromFrontMatter(const YAML::Node& root, std::string_view where) {
  size_t budget = kMaxSkillFrontMatterNodes;
  STRATA_RETURN_IF_ERROR(CheckScalars(root, where, budget));
  if (!root.IsNull() && !root.IsMap()) {
    return Error(where, LineOf(root), "front matter: expected a mapping of keys (name, description, ...), got " +
                                          TypeName(root));
  }
  Skill skill;
  Json extra = Json::object();
  std::map<std::string, int> lines;  // Key → line, for duplicates and the checks after the loop.
  for (const auto& kv : root) {
    const YAML::Node& value = kv.second;
    int line = LineOf(kv.first);
    if (!kv.first.IsScalar()) return Error(where, line, "front matter keys must be strings, got " + TypeName(kv.first));
    const std::string& key = kv.first.Scalar();
    if (auto [it, inserted] = lines.emplace(key, line); !inserted) {
      return Error(where, line, "'" + key + "' is given twice (first at line " + std::to_string(it->second) + ")");
    }
    if (key == "name") {
      STRATA_ASSIGN_OR_RETURN(skill.name, StringField(value, key, line, where));
    } else if (key == "description") {
      STRATA_ASSIGN_OR_RETURN(skill.description, StringField(value, key, line, where));
    } else if (key == "license") {
      STRATA_ASSIGN_OR_RETURN(skill.license, StringField(value, key, line, where));
    } else if (key == "version") {
      STRATA_ASSIGN_OR_RETURN(skill.version, StringField(value, key, line, where));
    } else if (key == "tools" || key == "allowed-tools") {
      if (lines.count("tools") != 0 && lines.count("allowed-tools") != 0) {
        return Error(where, line, "both 'tools' and 'allowed-tools' are given; keep one");
      }
      if (value.IsNull()) continue;
      if (value.IsSequence()) {
        STRATA_ASSIGN_OR_RETURN(skill.tools, ToolList(value, key, where));
      } else if (key == "allowed-tools" && value.IsScalar()) {
        skill.tools = SplitTools(value.Scalar());
      } else {
        return Error(where, line,
                     key + ": expected a list of strings" +
                         (key == "allowed-tools" ? " or a space/comma separated string" : "") + ", got " +
                         TypeName(value));
      }
    } else if (key == "metadata") {
      if (value.IsNull()) continue;
      if (!value.IsMap()) return Error(where, line, "metadata: expected a mapping, got " + TypeName(value));
      STRATA_ASSIGN_OR_RETURN(Json metadata, ToJson(value, key, where));
      STRATA_ASSIGN_OR_RETURN(skill.metadata_json, Dump(metadata, key, line, where));
    } else {
      STRATA_ASSIGN_OR_RETURN(extra[key], ToJson(value, key, where));
    }
  }
  if (!extra.empty()) {
    STRATA_ASSIGN_OR_RETURN(skill.extra_json, Dump(extra, "front matter", 1, where));
  }
  for (const char* required : {"name", "description"}) {
    if (lines.count(required) == 0) return Error(where, 1, "front matter has no '" + std::string(required) + "' (required)");
  }
  if (auto problem = NameProblem(skill.name)) return Error(where, lines["name"], *problem);
  if (auto problem = DescriptionProblem(skill.description)) return Error(where, lines["description"], *problem);
  return skill;
}

// Returns true when `s` reads back as the same string when written as a plain YAML scalar by anyone
// (YAML 1.1 or 1.2): an identifier that is not a boolean or null word.
bool IsSafePlain(std::string_view s) {
  if (s.empty()) return false;
  char c0 = s.front();
  if (!((c0 >= 'a' && c0 <= 'z') || (c0 >= 'A' && c0 <= 'Z') || c0 == '_')) return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-')) return false;
  }
  std::string lower;
  for (char c : s) lower += (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  for (std::string_view word : {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}) {
    if (lower == word) return false;
  }
  return true;
}

void EmitString(YAML::Emitter& out, const std::string& s) {
  if (IsSafePlain(s)) {
    out << s;
  } else {
    out << YAML::DoubleQuoted << s;
  }
}

void EmitJson(YAML::Emitter& out, const Json& json) {
  switch (json.type()) {
    case Json::value_t::object:
      out << YAML::BeginMap;
      for (const auto& [key, value] : json.items()) {
        out << YAML::Key;
        EmitString(out, key);
        out << YAML::Value;
        EmitJson(out, value);
      }
      out << YAML::EndMap;
      break;
    case Json::value_t::array:
      out << YAML::BeginSeq;
      for (const Json& item : json) EmitJson(out, item);
      out << YAML::EndSeq;
      break;
    case Json::value_t::string: out << YAML::DoubleQuoted << json.get_ref<const std::string&>(); break;
    case Json::value_t::boolean: out << (json.get<bool>() ? "true" : "false"); break;
    case Json::value_t::null: out << YAML::Null; break;
    default: out << json.dump(); break;  // Numbers, in JSON's spelling, which ToJson reads back as numbers.
  }
}

}  // namespace

Result<Skill> ParseSkill(std::string_view text, std::string_view where) {
  if (text.starts_with(kBom)) text.remove_prefix(kBom.size());
  // yaml-cpp reads any bytes, and the body is kept as it is: a file that is not UTF-8 is refused whole,
  // naming the line (its skill node could not be stored, nor its metadata written).
  if (size_t bad = 0; !json::IsValidUtf8(text, &bad)) {
    const int line = 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<ptrdiff_t>(bad), '\n'));
    return Error(where, line, "not valid UTF-8 (byte " + std::to_string(bad) + " of the file)");
  }
  if (text.empty()) return Error(where, 1, "missing front matter: the file is empty; a SKILL.md starts with a '---' line");
  size_t next = 0;
  std::string_view first = LineAt(text, 0, next);
  if (!IsDelimiter(first)) {
    return Error(where, 1, "missing front matter: the first line must be '---', got " + Quote(first));
  }
  size_t front_begin = next;
  size_t front_end = std::string_view::npos;
  size_t body_begin = text.size();
  int line = 2;
  for (size_t pos = front_begin; pos < text.size(); pos = next, ++line) {
    if (IsDelimiter(LineAt(text, pos, next))) {
      front_end = pos;
      body_begin = next;
      break;
    }
  }
  if (front_end == std::string_view::npos) {
    return Error(where, 1, "unterminated front matter: no closing '---' line after the opening one (read " +
                               std::to_string(line - 1) + " lines)");
  }
  std::string front;
  std::string_view raw = text.substr(front_begin, front_end - front_begin);
  for (size_t i = 0; i < raw.size(); ++i) {
    if (raw[i] == '\r' && i + 1 < raw.size() && raw[i + 1] == '\n') continue;  // CRLF → LF.
    front += raw[i];
  }
  // YAML forbids raw control characters (they must be escaped, as "\0"), and yaml-cpp drops a raw NUL
  // from a plain scalar without a word: refuse them rather than store a changed value.
  int control_line = kFirstYamlLine;
  for (char c : front) {
    if (c == '\n') ++control_line;
    unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 && c != '\n' && c != '\t') {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", static_cast<unsigned>(u));
      return Error(where, control_line, std::string("front matter holds the control character ") + hex +
                                            " (write it escaped in a double-quoted string, e.g. \"\\0\")");
    }
  }
  try {
    YAML::Node root = YAML::Load(front);
    Result<Skill> skill = FromFrontMatter(root, where);
    if (skill.ok()) skill->body = std::string(text.substr(body_begin));
    return skill;
  } catch (const YAML::ParserException& e) {
    int error_line = e.mark.line >= 0 ? kFirstYamlLine + e.mark.line : 1;
    return Status::InvalidArgument(std::string(where) + ":" + std::to_string(error_line) + ":" +
                                   std::to_string(e.mark.column + 1) + ": front matter is not valid YAML: " + e.msg);
  } catch (const std::exception& e) {  // Other YAML::Exception, or bad_alloc.
    return Error(where, 1, std::string("front matter cannot be read: ") + e.what());
  }
}

Result<Skill> LoadSkillFile(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  bool is_dir = fs::is_directory(path, ec);
  std::string file = is_dir ? (fs::path(path) / "SKILL.md").string() : path;
  if (!fs::exists(file, ec)) {
    return Status::NotFound(is_dir ? "skill directory " + path + " has no SKILL.md" : "skill file " + path + " does not exist");
  }
  std::ifstream in(file, std::ios::binary);
  if (!in) return Status::Internal("skill file " + file + " cannot be opened");
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::Internal("skill file " + file + " cannot be read");
  return ParseSkill(text.str(), file);
}

Status ValidateSkill(const Skill& skill) {
  if (auto problem = NameProblem(skill.name)) return Status::InvalidArgument(*problem);
  if (auto problem = DescriptionProblem(skill.description)) return Status::InvalidArgument(*problem);
  for (size_t i = 0; i < skill.tools.size(); ++i) {
    if (IsBlank(skill.tools[i])) return Status::InvalidArgument("tools[" + std::to_string(i) + "]: must not be empty");
  }
  std::vector<std::pair<std::string, const std::string*>> texts = {
      {"description", &skill.description}, {"license", &skill.license}, {"version", &skill.version}};
  for (size_t i = 0; i < skill.tools.size(); ++i) texts.emplace_back("tools[" + std::to_string(i) + "]", &skill.tools[i]);
  for (const auto& [field, text] : texts) {
    if (auto problem = EncodingProblem(*text)) return Status::InvalidArgument(field + ": " + *problem);
  }
  Json metadata = Json::parse(skill.metadata_json, nullptr, /*allow_exceptions=*/false);
  if (!metadata.is_object()) return Status::InvalidArgument("metadata_json: not a JSON object: " + Quote(skill.metadata_json));
  if (auto problem = JsonEncodingProblem(metadata, "metadata")) return Status::InvalidArgument(*problem);
  Json extra = Json::parse(skill.extra_json, nullptr, /*allow_exceptions=*/false);
  if (!extra.is_object()) return Status::InvalidArgument("extra_json: not a JSON object: " + Quote(skill.extra_json));
  for (const auto& [key, value] : extra.items()) {
    if (IsKnownKey(key)) return Status::InvalidArgument("extra_json: key '" + key + "' is a SKILL.md field; set it directly");
  }
  if (auto problem = JsonEncodingProblem(extra, "extra")) return Status::InvalidArgument(*problem);
  return Status::Ok();
}

std::string SerializeSkill(const Skill& skill) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value;
  EmitString(out, skill.name);
  out << YAML::Key << "description" << YAML::Value << YAML::DoubleQuoted << skill.description;
  if (!skill.license.empty()) out << YAML::Key << "license" << YAML::Value << YAML::DoubleQuoted << skill.license;
  if (!skill.version.empty()) out << YAML::Key << "version" << YAML::Value << YAML::DoubleQuoted << skill.version;
  if (!skill.tools.empty()) {
    out << YAML::Key << "tools" << YAML::Value << YAML::BeginSeq;
    for (const std::string& tool : skill.tools) out << YAML::DoubleQuoted << tool;
    out << YAML::EndSeq;
  }
  Json metadata = Json::parse(skill.metadata_json, nullptr, /*allow_exceptions=*/false);
  if (metadata.is_object() && !metadata.empty()) {
    out << YAML::Key << "metadata" << YAML::Value;
    EmitJson(out, metadata);
  }
  Json extra = Json::parse(skill.extra_json, nullptr, /*allow_exceptions=*/false);
  if (extra.is_object()) {
    for (const auto& [key, value] : extra.items()) {
      if (IsKnownKey(key)) continue;  // Would be read back as that field, or clash with it.
      out << YAML::Key;
      EmitString(out, key);
      out << YAML::Value;
      EmitJson(out, value);
    }
  }
  out << YAML::EndMap;
  return "---\n" + std::string(out.c_str(), out.size()) + "\n---\n" + skill.body;
}

}  // namespace strata::memory
