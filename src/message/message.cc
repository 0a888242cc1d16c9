#include "strata/message/message.h"

namespace strata {

std::string_view RoleName(Role role) {
  switch (role) {
    case Role::kSystem: return "system";
    case Role::kUser: return "user";
    case Role::kAssistant: return "assistant";
    case Role::kTool: return "tool";
  }
  return "user";
}

std::string_view PartTypeName(const ContentPart& part) {
  struct Visitor {
    std::string_view operator()(const TextPart&) const { return "text"; }
    std::string_view operator()(const ThinkPart&) const { return "think"; }
    std::string_view operator()(const MediaPart& m) const {
      switch (m.kind) {
        case MediaKind::kImage: return "image_url";
        case MediaKind::kAudio: return "audio_url";
        case MediaKind::kVideo: return "video_url";
      }
      return "image_url";
    }
    std::string_view operator()(const CustomPart& c) const { return c.type; }
  };
  return std::visit(Visitor{}, part);
}

std::string Message::ExtractText(std::string_view sep) const {
  std::string out;
  bool first = true;
  for (const ContentPart& part : content) {
    if (const auto* text = std::get_if<TextPart>(&part)) {
      if (!first) out.append(sep);
      out.append(text->text);
      first = false;
    }
  }
  return out;
}

namespace {

Message TextMessage(Role role, std::string text) {
  Message m;
  m.role = role;
  m.content.emplace_back(TextPart{std::move(text)});
  return m;
}

}  // namespace

Message Message::System(std::string text) { return TextMessage(Role::kSystem, std::move(text)); }
Message Message::User(std::string text) { return TextMessage(Role::kUser, std::move(text)); }
Message Message::Assistant(std::string text) { return TextMessage(Role::kAssistant, std::move(text)); }

Message Message::ToolResult(std::string tool_call_id, std::string text) {
  Message m = TextMessage(Role::kTool, std::move(text));
  m.tool_call_id = std::move(tool_call_id);
  return m;
}

}  // namespace strata
