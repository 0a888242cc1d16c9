// Preset directories: the skeleton every scope starts with, each directory with its own L0/L1.
//
//   strata://user/<id>/memories/{profile,preferences,entities,events}
//   strata://agent/<id>/memories/{cases,patterns}, strata://agent/<id>/skills, strata://agent/<id>/instructions
//   strata://resources
//   strata://session/<id>
//
// The store creates them when a scope is first used and again whenever the preset version stored on the
// scope root is older than kPresetVersion, so spaces created before a preset changed gain the new
// directories; existing directories and their summaries are never overwritten.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace strata::memory {

inline constexpr int kPresetVersion = 1;

struct PresetDirectory {
  std::string path;  // Relative to the scope root; "" is the root itself.
  std::string abstract_text;
  std::string overview;
};

// Returns the preset directories of a scope kind ("user", "agent", "resources", "session"), parents first.
const std::vector<PresetDirectory>& PresetDirectories(std::string_view kind);

}  // namespace strata::memory
