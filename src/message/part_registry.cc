#include "strata/message/part_registry.h"

#include <mutex>
#include <shared_mutex>
#include <utility>

namespace strata {
namespace {

constexpr std::string_view kBuiltIn[] = {"text", "think", "image_url", "audio_url", "video_url"};

struct Registry {
  Registry() {
    // Anthropic's redacted thinking: an opaque `data` blob that must be sent back unchanged. Registered
    // from the start so conversation logs holding it always parse.
    types.emplace_back("redacted_thinking", [](std::string_view part_json) {
      if (part_json.find("\"data\":\"") == std::string_view::npos) {
        return Status::InvalidArgument("redacted_thinking needs a string \"data\"");
      }
      return Status::Ok();
    });
    // A file the model reads: OpenAI chat's "file" part ({"file": {"file_id" | "file_data", "filename"}}) and
    // Anthropic's "document" block ({"source": ...}), kept and sent back as they came.
    types.emplace_back("file", [](std::string_view part_json) {
      if (part_json.find("\"file\":{") == std::string_view::npos) return Status::InvalidArgument("file needs an object \"file\"");
      return Status::Ok();
    });
    types.emplace_back("document", [](std::string_view part_json) {
      if (part_json.find("\"source\":{") == std::string_view::npos) {
        return Status::InvalidArgument("document needs an object \"source\"");
      }
      return Status::Ok();
    });
  }
  std::shared_mutex mu;
  std::vector<std::pair<std::string, ContentPartValidator>> types;  // Guarded by mu.
};

Registry& GlobalRegistry() {
  static Registry* registry = new Registry();  // Never destroyed.
  return *registry;
}

bool IsBuiltIn(std::string_view type) {
  for (std::string_view b : kBuiltIn) {
    if (b == type) return true;
  }
  return false;
}

}  // namespace

Status RegisterContentPartType(std::string type, ContentPartValidator validator) {
  if (type.empty()) return Status::InvalidArgument("content part type must not be empty");
  if (IsBuiltIn(type)) return Status::FailedPrecondition("content part type \"" + type + "\" is built in");
  Registry& r = GlobalRegistry();
  std::unique_lock lock(r.mu);
  for (const auto& [name, v] : r.types) {
    if (name == type) return Status::AlreadyExists("content part type \"" + type + "\" is already registered");
  }
  r.types.emplace_back(std::move(type), std::move(validator));
  return Status::Ok();
}

bool IsKnownContentPartType(std::string_view type) {
  if (IsBuiltIn(type)) return true;
  Registry& r = GlobalRegistry();
  std::shared_lock lock(r.mu);
  for (const auto& [name, v] : r.types) {
    if (name == type) return true;
  }
  return false;
}

std::vector<std::string> KnownContentPartTypes() {
  std::vector<std::string> out(std::begin(kBuiltIn), std::end(kBuiltIn));
  Registry& r = GlobalRegistry();
  std::shared_lock lock(r.mu);
  for (const auto& [name, v] : r.types) out.push_back(name);
  return out;
}

Status ValidateCustomPart(std::string_view type, std::string_view part_json) {
  ContentPartValidator validator;
  {
    Registry& r = GlobalRegistry();
    std::shared_lock lock(r.mu);
    bool found = false;
    for (const auto& [name, v] : r.types) {
      if (name == type) {
        validator = v;
        found = true;
        break;
      }
    }
    if (!found) return Status::InvalidArgument("unknown content part type \"" + std::string(type) + "\"");
  }
  // Called without the lock: a validator may itself consult the registry.
  return validator ? validator(part_json) : Status::Ok();
}

}  // namespace strata
