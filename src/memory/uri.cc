#include "strata/memory/uri.h"

#include <algorithm>

#include "strata/json/json_writer.h"

namespace strata::memory {
namespace {

std::string Quote(std::string_view s) { return json::QuoteForError(s); }

bool IsKind(std::string_view s) { return s == "user" || s == "agent" || s == "session"; }

std::vector<std::string_view> Split(std::string_view rest) {
  std::vector<std::string_view> out;
  while (!rest.empty()) {
    size_t slash = rest.find('/');
    out.push_back(rest.substr(0, slash));
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
  return out;
}

// Segments of the URI after "strata://".
std::vector<std::string_view> Segments(const std::string& text) {
  return Split(std::string_view(text).substr(Uri::kPrefix.size()));
}

}  // namespace

Status ValidateSegment(std::string_view segment, std::string_view where) {
  auto bad = [&](std::string_view rule) {
    return Status::InvalidArgument(std::string(where) + ": path segment " + Quote(segment) + " " +
                                   std::string(rule));
  };
  if (segment.empty()) return bad("is empty (two '/' in a row?)");
  if (segment.size() > 255) return bad("is longer than 255 bytes");
  if (segment == "." || segment == "..") return bad("is a relative reference ('.' and '..' are not allowed)");
  if (segment.front() == '.') return bad("starts with '.' (reserved for sidecar files)");
  size_t bad_offset = 0;
  if (!json::IsValidUtf8(segment, &bad_offset)) return bad("is not valid UTF-8");
  for (unsigned char c : segment) {
    if (c < 0x20 || c == 0x7f) return bad("contains a control character");
    if (c == '/' || c == '\\') return bad("contains '/' or '\\'");
  }
  return Status::Ok();
}

Status CheckStoredLength(const Uri& uri) {
  if (uri.str().size() <= Uri::kMaxStoredBytes) return Status::Ok();
  return Status::InvalidArgument("URI " + json::QuoteForError(uri.str(), 80) + " is " + std::to_string(uri.str().size()) +
                                 " bytes; a node's URI is at most " + std::to_string(Uri::kMaxStoredBytes));
}

Status ValidateScopeId(std::string_view id, std::string_view where) {
  auto bad = [&](std::string_view rule) {
    return Status::InvalidArgument(std::string(where) + ": id " + Quote(id) + " " + std::string(rule));
  };
  if (id.empty()) return bad("is empty");
  if (id.size() > 128) return bad("is longer than 128 characters");
  if (id.front() == '.') return bad("starts with '.'");
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-' ||
              c == '.';
    if (!ok) return bad("may contain only letters, digits, '_', '-' and '.'");
  }
  return Status::Ok();
}

Result<Uri> Uri::Parse(std::string_view text) {
  std::string_view rest = text;
  if (rest.starts_with(kPrefix)) {
    rest.remove_prefix(kPrefix.size());
  } else if (rest.starts_with(kAliasPrefix)) {
    rest.remove_prefix(kAliasPrefix.size());
  } else {
    return Status::InvalidArgument("URI " + Quote(text) +
                                   " must start with strata:// (or viking://), e.g. strata://user/alice/memories");
  }
  while (rest.ends_with('/')) rest.remove_suffix(1);
  Uri uri;
  if (rest.empty()) return uri;
  // Bounded before anything is split: every ancestor of a URI is built as a string (directories are
  // created on write), so a 30,000-segment URI would cost quadratic time.
  if (text.size() > kMaxBytes) {
    return Status::InvalidArgument("URI " + Quote(text) + " is longer than " + std::to_string(kMaxBytes) + " bytes");
  }
  std::vector<std::string_view> segs = Split(rest);
  std::string where = "URI " + Quote(text);
  if (segs.size() > kMaxSegments) {
    return Status::InvalidArgument(where + " has " + std::to_string(segs.size()) + " segments; at most " +
                                   std::to_string(kMaxSegments) + " are allowed");
  }
  if (segs[0] != "resources" && !IsKind(segs[0])) {
    return Status::InvalidArgument(where + ": unknown scope " + Quote(segs[0]) +
                                   " (expected resources, user/<id>, agent/<id> or session/<id>)");
  }
  size_t first_path = 1;
  if (IsKind(segs[0]) && segs.size() > 1) {
    STRATA_RETURN_IF_ERROR(ValidateScopeId(segs[1], where));
    first_path = 2;
  }
  for (size_t i = first_path; i < segs.size(); ++i) STRATA_RETURN_IF_ERROR(ValidateSegment(segs[i], where));
  uri.text_.append(rest);
  return uri;
}

std::string_view Uri::kind() const {
  if (is_root()) return "";
  std::string_view rest = std::string_view(text_).substr(kPrefix.size());
  return rest.substr(0, rest.find('/'));
}

std::string_view Uri::scope_id() const {
  std::vector<std::string_view> segs = Segments(text_);
  if (segs.size() < 2 || !IsKind(segs[0])) return "";
  return segs[1];
}

std::vector<std::string_view> Uri::path() const {
  if (is_root()) return {};
  std::vector<std::string_view> segs = Segments(text_);
  size_t skip = segs[0] == "resources" ? 1 : 2;
  if (segs.size() <= skip) return {};
  return {segs.begin() + static_cast<std::ptrdiff_t>(skip), segs.end()};
}

std::string_view Uri::name() const {
  if (is_root()) return "";
  return std::string_view(text_).substr(text_.rfind('/') + 1);
}

bool Uri::is_kind_dir() const {
  if (is_root()) return false;
  std::vector<std::string_view> segs = Segments(text_);
  return segs.size() == 1 && IsKind(segs[0]);
}

bool Uri::is_scope_root() const {
  if (is_root()) return false;
  std::vector<std::string_view> segs = Segments(text_);
  return segs[0] == "resources" ? segs.size() == 1 : segs.size() == 2;
}

Uri Uri::scope_root() const {
  if (is_root() || is_kind_dir()) return Root();
  std::vector<std::string_view> segs = Segments(text_);
  size_t keep = segs[0] == "resources" ? 1 : 2;
  std::string out(kPrefix);
  for (size_t i = 0; i < keep; ++i) {
    if (i > 0) out += '/';
    out.append(segs[i]);
  }
  return Uri(std::move(out));
}

Uri Uri::Parent() const {
  if (is_root()) return *this;
  size_t slash = text_.rfind('/');
  if (slash < kPrefix.size()) return Root();
  return Uri(text_.substr(0, slash));
}

Result<Uri> Uri::Child(std::string_view segment) const {
  if (is_root()) return Parse(std::string(kPrefix) + std::string(segment));
  if (is_kind_dir()) {
    STRATA_RETURN_IF_ERROR(ValidateScopeId(segment, text_));
  } else {
    STRATA_RETURN_IF_ERROR(ValidateSegment(segment, text_));
  }
  // The bounds Parse holds every URI to: a child past them was stored, and every later Parse of it (a find
  // over the scope, a check, an export) failed.
  std::string child = text_ + "/" + std::string(segment);
  if (child.size() > kMaxBytes) {
    return Status::InvalidArgument("URI " + Quote(child) + " is longer than " + std::to_string(kMaxBytes) + " bytes");
  }
  size_t segments = static_cast<size_t>(std::count(child.begin() + static_cast<ptrdiff_t>(kPrefix.size()), child.end(), '/')) + 1;
  if (segments > kMaxSegments) {
    return Status::InvalidArgument("URI " + Quote(child) + " has " + std::to_string(segments) + " segments; at most " +
                                   std::to_string(kMaxSegments) + " are allowed");
  }
  return Uri(std::move(child));
}

Result<Uri> Uri::Join(std::string_view relative) const {
  Uri out = *this;
  while (relative.starts_with('/')) relative.remove_prefix(1);
  while (relative.ends_with('/')) relative.remove_suffix(1);
  if (relative.empty()) return out;
  for (std::string_view seg : Split(relative)) {
    STRATA_ASSIGN_OR_RETURN(out, out.Child(seg));
  }
  return out;
}

bool Uri::Contains(const Uri& other) const {
  if (is_root()) return true;
  return other.text_ == text_ || (other.text_.starts_with(text_) && other.text_[text_.size()] == '/');
}

}  // namespace strata::memory
