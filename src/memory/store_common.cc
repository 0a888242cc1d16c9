// Store-independent helpers: context types, derived layers, the text a vector is computed from.
#include <algorithm>

#include "strata/memory/store.h"

namespace strata::memory {
namespace {

// Cuts `s` to at most `max` bytes at a UTF-8 character boundary, marking the cut with "...".
std::string CutUtf8(std::string_view s, size_t max) {
  if (s.size() <= max) return std::string(s);
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(s[end]) & 0xc0) == 0x80) --end;
  // Prefer a word boundary in the last fifth.
  size_t space = s.rfind(' ', end);
  if (space != std::string_view::npos && space > max * 4 / 5) end = space;
  return std::string(s.substr(0, end)) + "...";
}

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\r' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

}  // namespace

std::string_view ContextTypeName(ContextType type) {
  switch (type) {
    case ContextType::kMemory: return "memory";
    case ContextType::kSkill: return "skill";
    case ContextType::kResource: break;
  }
  return "resource";
}

Result<ContextType> ParseContextType(std::string_view name) {
  if (name == "resource") return ContextType::kResource;
  if (name == "memory") return ContextType::kMemory;
  if (name == "skill") return ContextType::kSkill;
  return Status::InvalidArgument("unknown context type \"" + std::string(name) + "\" (expected resource, memory or skill)");
}

Result<Level> LevelOf(int64_t number) {
  if (number < 0 || number > 2) {
    return Status::InvalidArgument("\"level\" must be 0 (abstract), 1 (overview) or 2 (content), not " +
                                   std::to_string(number));
  }
  return static_cast<Level>(number);
}

ContextType InferContextType(const Uri& uri) {
  for (std::string_view segment : uri.path()) {
    if (segment == "skills") return ContextType::kSkill;
    if (segment == "memories") return ContextType::kMemory;
  }
  return ContextType::kResource;
}

std::string DeriveAbstract(std::string_view content) {
  std::string_view rest = content;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = Trim(rest.substr(0, nl));
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    while (!line.empty() && (line.front() == '#' || line.front() == '>' || line.front() == '-' || line.front() == '*')) {
      line.remove_prefix(1);
    }
    line = Trim(line);
    if (line.empty() || line == "---") continue;
    return CutUtf8(line, 200);
  }
  return "";
}

std::string DeriveOverview(std::string_view content) {
  std::string_view text = Trim(content);
  if (text.size() <= 800) return std::string(text);
  // Whole paragraphs up to ~800 bytes; at least the first one (cut).
  size_t end = 0;
  for (size_t blank = text.find("\n\n"); blank != std::string_view::npos && blank <= 800;
       blank = text.find("\n\n", blank + 2)) {
    end = blank;
  }
  if (end == 0) return CutUtf8(text, 800);
  return std::string(Trim(text.substr(0, end)));
}

std::string EmbeddingText(const Node& node) {
  std::string text = node.abstract_text;
  if (!node.overview.empty() && node.overview != node.abstract_text) text += "\n" + node.overview;
  if (!node.content.empty() && node.content != node.overview) {
    text += "\n" + CutUtf8(node.content, 2000);
  }
  if (Trim(text).empty()) text = std::string(node.uri.name());
  return text;
}

}  // namespace strata::memory
