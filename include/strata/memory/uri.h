// Context URIs: `strata://<scope>/<path>`, the one address of every skill, memory and resource.
//
//   strata://resources/docs/api_reference
//   strata://user/alice/memories/preferences/coding_style
//   strata://agent/helper/skills/file_operations
//   strata://session/2026-11-23-a/history/archive_001
//
// Scopes: `resources`, and `user/<id>`, `agent/<id>`, `session/<id>` whose root is the id's directory.
// `viking://` is accepted as an alias on input; URIs are always written with `strata://`. A trailing `/`
// is dropped. Ids are 1..128 of [A-Za-z0-9_.-] not starting with '.'; path segments are 1..255 bytes of
// valid UTF-8 without control characters, '/', '\\', or a leading '.', and not "." or "..". A URI has at
// most kMaxSegments segments and kMaxBytes bytes.
//
// The namespace tree: `strata://` (virtual root) → `strata://user` (kind directory) → `strata://user/alice`
// (scope root) → children. `strata://resources` is both kind directory and scope root.
//
// Thread safety: Uri is a value type.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "strata/util/status.h"

namespace strata::memory {

class Uri {
 public:
  // Parses and validates `text`; errors name the offending segment and the rule it breaks.
  static Result<Uri> Parse(std::string_view text);
  // The virtual root `strata://`.
  static Uri Root() { return Uri(); }

  // The canonical text, e.g. "strata://user/alice/memories".
  const std::string& str() const { return text_; }
  // "resources", "user", "agent", "session", or "" for the root.
  std::string_view kind() const;
  // The scope's id ("alice"), or "" for resources and the root.
  std::string_view scope_id() const;
  // Path segments after the scope root (empty at or above the scope root).
  std::vector<std::string_view> path() const;
  // Returns the last segment ("" for the root).
  std::string_view name() const;

  bool is_root() const { return text_ == kPrefix; }
  // True for `strata://user`, `strata://agent`, `strata://session` (directories of scope roots).
  bool is_kind_dir() const;
  // True for the scope root (`strata://resources`, `strata://user/alice`, ...).
  bool is_scope_root() const;
  // The scope root's URI (itself for a scope root); the root for the root and kind directories.
  Uri scope_root() const;

  // Returns the parent; the root's parent is the root.
  Uri Parent() const;
  // Appends one validated segment.
  Result<Uri> Child(std::string_view segment) const;
  // Appends a relative path ("a/b"), validating every segment.
  Result<Uri> Join(std::string_view relative) const;
  // True if `other` is this URI or below it.
  bool Contains(const Uri& other) const;

  bool operator==(const Uri&) const = default;
  auto operator<=>(const Uri&) const = default;

  static constexpr std::string_view kPrefix = "strata://";
  static constexpr std::string_view kAliasPrefix = "viking://";
  // Longer or deeper URIs are rejected by Parse (kInvalidArgument).
  static constexpr size_t kMaxBytes = 4096;
  static constexpr size_t kMaxSegments = 128;
  // A node a store writes (or moves to) has a URI of at most this many bytes, on every backend: PostgreSQL's
  // indexes hold a node's parent and its URI in one entry of at most 2,704 bytes, and refused a longer one
  // that SQLite took (a store that then could not be migrated). Longer URIs are still read and named.
  static constexpr size_t kMaxStoredBytes = 1024;

 private:
  Uri() : text_(kPrefix) {}
  explicit Uri(std::string text) : text_(std::move(text)) {}
  std::string text_;
};

// Checks one path segment; `where` names it in the error.
Status ValidateSegment(std::string_view segment, std::string_view where);
// Checks a user / agent / session id.
Status ValidateScopeId(std::string_view id, std::string_view where);
// kInvalidArgument naming `uri` when it is longer than a node a store creates may be (Uri::kMaxStoredBytes).
Status CheckStoredLength(const Uri& uri);

}  // namespace strata::memory
