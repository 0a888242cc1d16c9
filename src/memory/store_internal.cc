#include "store_internal.h"

#include "vector_index.h"

#include <algorithm>
#include <charconv>
#include <cstring>
#include <unordered_map>
#include <libstemmer.h>
#include <sqlite3.h>
#include <nlohmann/json.hpp>

#include "fts_text.h"
#include "strata/json/checked.h"
#include "strata/json/json_writer.h"
#include "strata/memory/presets.h"

namespace strata::memory::internal {
namespace {

std::string_view KindDirAbstract(std::string_view kind) {
  if (kind == "user") return "Users' spaces, one directory per user id.";
  if (kind == "agent") return "Agents' spaces, one directory per agent id.";
  if (kind == "session") return "Sessions, one directory per session id.";
  return "";
}

Status CheckMetadata(const std::optional<std::string>& metadata) {
  if (!metadata) return Status::Ok();
  // What is wrong, and where (a metadata nested too deeply was "must be a JSON object").
  STRATA_ASSIGN_OR_RETURN(nlohmann::json parsed, strata::json::ParseUntrusted<nlohmann::json>(*metadata, "metadata"));
  if (!parsed.is_object()) {
    return Status::InvalidArgument("metadata must be a JSON object, got " + json::QuoteForError(*metadata, 80));
  }
  return Status::Ok();
}

// Everything stored as text must be valid UTF-8: the store's readers (JSON views, full text, export) take
// it as such, and a stored invalid byte would fail every later read of the node.
// One text field of a node or a link: valid UTF-8 and no NUL.
Status CheckTextField(std::string_view field, std::string_view text) {
  size_t bad = 0;
  if (!json::IsValidUtf8(text, &bad)) {
    return Status::InvalidArgument(std::string(field) + " is not valid UTF-8 (byte " + std::to_string(bad) + ")");
  }
  // Valid UTF-8, but no text column of PostgreSQL holds it: refused alike on every backend (SQLite stored it).
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    return Status::InvalidArgument(std::string(field) + " holds a NUL character (byte " + std::to_string(nul) +
                                   "), which no node's text may hold");
  }
  return Status::Ok();
}

Status CheckText(std::string_view content, const WriteOptions& o) {
  STRATA_RETURN_IF_ERROR(CheckTextField("content", content));
  if (o.abstract_text) STRATA_RETURN_IF_ERROR(CheckTextField("abstract (L0)", *o.abstract_text));
  if (o.overview) STRATA_RETURN_IF_ERROR(CheckTextField("overview (L1)", *o.overview));
  if (o.category) STRATA_RETURN_IF_ERROR(CheckTextField("category", *o.category));
  return Status::Ok();
}

// A glob compiled to a small NFA and run over the path one byte at a time, keeping the set of live states:
// O(|pattern| x |path|) in the worst case whatever the pattern (no backtracking), O(|pattern|) memory.
//   `*`   any bytes but '/' (within one segment)     `?`      one byte but '/'
//   `**`  any bytes, '/' included                     `**/`    zero or more whole segments (any bytes up
//                                                               to and with a '/', or nothing)
//   `[...]` one byte of a set (ranges a-z; `!` or `^` first negates); an unclosed `[` is literal.
class GlobProgram {
 public:
  explicit GlobProgram(std::string_view pattern) {
    for (size_t i = 0; i < pattern.size();) {
      Op op;
      if (pattern.compare(i, 3, "**/") == 0) {
        // Zero or more whole segments: an entry state that may skip them all, and a loop that must end
        // on a '/' it reads itself.
        op.kind = Op::kDirsEntry;
        ops_.push_back(op);
        op.kind = Op::kDirsLoop;
        i += 3;
      } else if (pattern.compare(i, 2, "**") == 0) {
        op.kind = Op::kAnything;
        i += 2;
      } else if (pattern[i] == '*') {
        op.kind = Op::kSegment;
        ++i;
      } else if (pattern[i] == '?') {
        op.kind = Op::kOne;
        ++i;
      } else if (size_t close = pattern.find(']', i + 1); pattern[i] == '[' && close != std::string_view::npos) {
        op.kind = Op::kSet;
        std::string_view set = pattern.substr(i + 1, close - i - 1);
        op.negate = !set.empty() && (set.front() == '!' || set.front() == '^');
        if (op.negate) set.remove_prefix(1);
        for (size_t k = 0; k < set.size(); ++k) {
          if (k + 2 < set.size() && set[k + 1] == '-') {
            for (int b = static_cast<unsigned char>(set[k]); b <= static_cast<unsigned char>(set[k + 2]); ++b) op.Add(b);
            k += 2;
          } else {
            op.Add(static_cast<unsigned char>(set[k]));
          }
        }
        i = close + 1;
      } else {
        op.kind = Op::kByte;
        op.byte = pattern[i];
        ++i;
      }
      ops_.push_back(op);
    }
  }

  bool Match(std::string_view path) const {
    size_t n = ops_.size();
    std::vector<char> live(n + 1, 0), next(n + 1, 0);
    live[0] = 1;
    Close(live);
    for (char ch : path) {
      std::fill(next.begin(), next.end(), 0);
      bool any = false;
      for (size_t s = 0; s < n; ++s) {
        if (!live[s]) continue;
        const Op& op = ops_[s];
        switch (op.kind) {
          case Op::kDirsEntry:
            break;  // Reads nothing itself: its edges are in Close.
          case Op::kDirsLoop:
            next[s] = 1;                   // Stays, whatever the byte...
            if (ch == '/') next[s + 1] = 1;  // ...or ends the segments just read.
            break;
          case Op::kAnything:
            next[s] = 1;  // Stays.
            break;
          case Op::kSegment:
            if (ch != '/') next[s] = 1;
            break;
          case Op::kOne:
            if (ch != '/') next[s + 1] = 1;
            break;
          case Op::kSet:
            if (op.Has(static_cast<unsigned char>(ch)) != op.negate) next[s + 1] = 1;
            break;
          case Op::kByte:
            if (ch == op.byte) next[s + 1] = 1;
            break;
        }
      }
      Close(next);
      for (char v : next) any = any || v;
      if (!any) return false;
      live.swap(next);
    }
    return live[n] != 0;
  }

 private:
  struct Op {
    enum Kind { kByte, kOne, kSet, kSegment, kAnything, kDirsEntry, kDirsLoop } kind = kByte;
    char byte = 0;
    bool negate = false;
    uint64_t bits[4] = {0, 0, 0, 0};
    void Add(int b) { bits[b >> 6] |= uint64_t{1} << (b & 63); }
    bool Has(int b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  };

  // Adds the states reachable without reading a byte: past a star (it may match nothing), and from the
  // entry of a "**/" into its loop and past it as a whole. Edges only go forward, so one pass in order
  // reaches every one.
  void Close(std::vector<char>& states) const {
    for (size_t s = 0; s < ops_.size(); ++s) {
      if (!states[s]) continue;
      const Op& op = ops_[s];
      if (op.kind == Op::kSegment || op.kind == Op::kAnything || op.kind == Op::kDirsEntry) states[s + 1] = 1;
      if (op.kind == Op::kDirsEntry) states[s + 2] = 1;
    }
  }

  std::vector<Op> ops_;
};

void SetLayer(const std::optional<std::string>& given, std::string derived_value, int64_t flag,
              std::string* layer, int64_t* derived) {
  if (given) {
    *layer = *given;
    *derived &= ~flag;
  } else if (layer->empty() || (*derived & flag) != 0) {
    // Keep a layer someone wrote by hand; re-derive one that was derived.
    *layer = std::move(derived_value);
    *derived |= flag;
  }
}

// Keeps the preset bookkeeping of a scope root when its metadata is replaced.
std::string MergePresetVersion(const std::string& old_json, const std::string& new_json) {
  auto old_value = strata::json::ParseOrDiscard<nlohmann::json>(old_json);
  auto new_value = strata::json::ParseOrDiscard<nlohmann::json>(new_json);
  if (old_value.is_object() && old_value.contains("preset_version")) new_value["preset_version"] = old_value["preset_version"];
  return new_value.dump();
}

Result<std::optional<Row>> FindPlannedOrStored(const Plan& plan, const Uri& uri, const FindFn& find) {
  if (const Row* row = plan.Find(uri)) return std::optional<Row>(*row);
  return find(uri);
}

Status PlanPresets(const Uri& root, int64_t now, const FindFn& find, Plan* plan) {
  STRATA_ASSIGN_OR_RETURN(std::optional<Row> root_row, FindPlannedOrStored(*plan, root, find));
  auto meta = strata::json::ParseOrDiscard<nlohmann::json>(root_row->node.metadata);
  if (!meta.is_object()) meta = nlohmann::json::object();
  int version = meta.contains("preset_version") && meta["preset_version"].is_number_integer()
                    ? meta["preset_version"].get<int>() : 0;
  if (version < kPresetVersion) {
    for (const PresetDirectory& preset : PresetDirectories(root.kind())) {
      STRATA_ASSIGN_OR_RETURN(Uri u, root.Join(preset.path));
      STRATA_ASSIGN_OR_RETURN(std::optional<Row> row, FindPlannedOrStored(*plan, u, find));
      if (row && !row->node.is_dir) continue;  // A file where a preset directory would go is left alone.
      if (!row) {
        Row fresh;
        fresh.node = {.uri = u, .is_dir = true, .type = InferContextType(u), .created_ms = now, .updated_ms = now};
        row = std::move(fresh);
      }
      // Existing summaries are never overwritten; empty ones get the preset's.
      if (row->node.abstract_text.empty()) row->node.abstract_text = preset.abstract_text;
      if (row->node.overview.empty()) row->node.overview = preset.overview;
      if (u == root) {
        meta["preset_version"] = kPresetVersion;
        row->node.metadata = meta.dump();
      }
      plan->Put(std::move(*row));
    }
  }
  plan->ensured.push_back(root.str());
  return Status::Ok();
}

}  // namespace

void Plan::Put(Row row) {
  auto it = by_uri.find(row.node.uri.str());
  if (it != by_uri.end()) {
    rows[it->second] = std::move(row);
  } else {
    by_uri.emplace(row.node.uri.str(), rows.size());
    rows.push_back(std::move(row));
  }
}

const Row* Plan::Find(const Uri& uri) const {
  auto it = by_uri.find(uri.str());
  return it == by_uri.end() ? nullptr : &rows[it->second];
}

void Plan::Merge(Plan other) {
  for (auto& u : other.upserts) upserts.push_back(std::move(u));
  for (auto& e : other.ensured) ensured.push_back(std::move(e));
  generation = std::max(generation, other.generation);
}

Status CheckEmbedModel(std::string_view stored, std::string_view mine) {
  if (stored == mine) return Status::Ok();
  return Status::FailedPrecondition(
      "the store's vectors are now embedded with " + json::QuoteForError(stored, 80) +
      " (another instance with another embedder re-embedded them), and this one embeds with " +
      json::QuoteForError(mine, 80) + ": give every instance on one store the same embedder, then restart this one");
}

const WriteOptions& OptionOf(const std::vector<WriteOptions>& options, size_t i) {
  static const WriteOptions kDefaults;
  return options.empty() ? kDefaults : options.size() == 1 ? options[0] : options[i];
}


Status ValidateLeaves(const std::vector<std::pair<Uri, std::string>>& leaves, const std::vector<WriteOptions>& options) {
  if (options.size() != leaves.size() && options.size() > 1) {
    return Status::InvalidArgument("WriteBatch: " + std::to_string(options.size()) + " options for " +
                                   std::to_string(leaves.size()) + " leaves");
  }
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Uri& uri = leaves[i].first;
    if (uri.is_root() || uri.is_kind_dir() || uri.is_scope_root()) {
      return Status::InvalidArgument(uri.str() + " is a scope directory; write leaves below it, e.g. " +
                                     (uri.is_root() ? std::string("strata://resources/notes") : uri.str() + "/notes"));
    }
    STRATA_RETURN_IF_ERROR(CheckMetadata(OptionOf(options, i).metadata).WithContext(uri.str()));
    STRATA_RETURN_IF_ERROR(CheckText(leaves[i].second, OptionOf(options, i)).WithContext(uri.str()));
  }
  return Status::Ok();
}

Status ValidateMkdir(const Uri& uri, const WriteOptions& o) {
  if (uri.is_root()) return Status::InvalidArgument("strata:// is the namespace root, not a directory to create");
  STRATA_RETURN_IF_ERROR(CheckMetadata(o.metadata).WithContext(uri.str()));
  return CheckText("", o).WithContext(uri.str());
}

std::vector<std::string> PredictedTexts(const std::vector<std::pair<Uri, std::string>>& leaves,
                                        const std::vector<WriteOptions>& options) {
  std::vector<std::string> predicted;
  for (size_t i = 0; i < leaves.size(); ++i) {
    // A URI longer than a store creates is refused unless its node is old: not embedded ahead (a remote
    // embedder's call for a refused write); an old one is embedded under the lock, as an unpredicted text is.
    if (leaves[i].first.str().size() > Uri::kMaxStoredBytes) continue;
    Node n;
    n.uri = leaves[i].first;
    n.content = leaves[i].second;
    n.abstract_text = OptionOf(options, i).abstract_text.value_or(DeriveAbstract(n.content));
    n.overview = OptionOf(options, i).overview.value_or(DeriveOverview(n.content));
    predicted.push_back(EmbeddingText(n));
  }
  return predicted;
}

std::string MkdirText(const Uri& uri, const WriteOptions& o) {
  Node self;
  self.uri = uri;
  self.is_dir = true;
  self.abstract_text = o.abstract_text.value_or("");
  self.overview = o.overview.value_or("");
  return EmbeddingText(self);
}

std::vector<Uri> AncestorsOf(const std::vector<std::pair<Uri, std::string>>& nodes) {
  std::vector<Uri> out;
  std::set<std::string> seen;
  for (const auto& [uri, content] : nodes) {
    for (Uri dir = uri.Parent(); !dir.is_root() && !dir.is_kind_dir(); dir = dir.Parent()) {
      if (!seen.insert(dir.str()).second) break;  // Its ancestors are in already.
      out.push_back(dir);
    }
  }
  return out;
}

Status PlanLeaves(const std::vector<std::pair<Uri, std::string>>& leaves, const std::vector<WriteOptions>& options,
                  int64_t now, const std::set<std::string>& ensured, const FindFn& find, Plan* plan) {
  for (size_t i = 0; i < leaves.size(); ++i) {
    const auto& [uri, content] = leaves[i];
    const WriteOptions& o = OptionOf(options, i);
    STRATA_ASSIGN_OR_RETURN(std::optional<Row> existing, FindPlannedOrStored(*plan, uri, find));
    if (!existing) STRATA_RETURN_IF_ERROR(CheckStoredLength(uri));  // One stored before the limit stays writable.
    if (existing && existing->node.is_dir) {
      return Status::FailedPrecondition(uri.str() + " is a directory; only leaves have content");
    }
    if (existing && !o.overwrite) return Status::AlreadyExists(uri.str() + " already exists");
    if (o.expect_content && (!existing || existing->node.content != *o.expect_content)) {
      return Status::Aborted(uri.str() + (existing ? " changed" : " was removed") +
                             " since it was read; read it again and retry");
    }
    if (!o.create_parents) {
      STRATA_ASSIGN_OR_RETURN(std::optional<Row> parent, FindPlannedOrStored(*plan, uri.Parent(), find));
      if (!parent && !uri.Parent().is_scope_root()) {
        return Status::NotFound("parent " + uri.Parent().str() + " of " + uri.str() + " does not exist");
      }
    }
    STRATA_RETURN_IF_ERROR(PlanDirectories(uri.Parent(), now, ensured, find, plan));
    Row row = existing ? *existing : Row{};
    Node& node = row.node;
    if (!existing) {
      node.uri = uri;
      node.created_ms = now;
      node.type = InferContextType(uri);
    }
    node.content = content;
    node.updated_ms = now;
    if (o.type) node.type = *o.type;
    if (o.category) node.category = *o.category;
    if (o.metadata) node.metadata = *o.metadata;
    SetLayer(o.abstract_text, DeriveAbstract(content), kAbstractDerived, &node.abstract_text, &row.derived);
    SetLayer(o.overview, DeriveOverview(content), kOverviewDerived, &node.overview, &row.derived);
    plan->Put(std::move(row));
  }
  return Status::Ok();
}

Status PlanMkdir(const Uri& uri, const WriteOptions& o, int64_t now, const std::set<std::string>& ensured,
                 const FindFn& find, Plan* plan) {
  if (uri.str().size() > Uri::kMaxStoredBytes) {  // A new one only: one stored before the limit stays writable.
    STRATA_ASSIGN_OR_RETURN(std::optional<Row> existing, FindPlannedOrStored(*plan, uri, find));
    if (!existing) STRATA_RETURN_IF_ERROR(CheckStoredLength(uri));
  }
  STRATA_RETURN_IF_ERROR(PlanDirectories(uri, now, ensured, find, plan));
  if (o.abstract_text || o.overview || o.category || o.metadata || o.type) {
    STRATA_ASSIGN_OR_RETURN(std::optional<Row> row, FindPlannedOrStored(*plan, uri, find));
    if (o.abstract_text) row->node.abstract_text = *o.abstract_text;
    if (o.overview) row->node.overview = *o.overview;
    if (o.category) row->node.category = *o.category;
    if (o.metadata) row->node.metadata = MergePresetVersion(row->node.metadata, *o.metadata);
    if (o.type) row->node.type = *o.type;
    row->node.updated_ms = now;
    plan->Put(std::move(*row));
  }
  return Status::Ok();
}

Status PlanDirectories(const Uri& dir, int64_t now, const std::set<std::string>& ensured, const FindFn& find, Plan* plan) {
  std::vector<Uri> chain;
  for (Uri u = dir; !u.is_root(); u = u.Parent()) chain.push_back(u);
  std::reverse(chain.begin(), chain.end());
  for (const Uri& u : chain) {
    STRATA_ASSIGN_OR_RETURN(std::optional<Row> row, FindPlannedOrStored(*plan, u, find));
    if (row && !row->node.is_dir) {
      return Status::FailedPrecondition(u.str() + " is a file, so nothing can be created below it");
    }
    const bool made = !row;
    if (made) {
      Row fresh;
      fresh.node = {.uri = u, .is_dir = true, .type = InferContextType(u), .created_ms = now, .updated_ms = now};
      if (u.is_kind_dir()) fresh.node.abstract_text = std::string(KindDirAbstract(u.kind()));
      plan->Put(std::move(fresh));
    }
    // `ensured` is this process's memory: a root made now was removed since (by another process, or another
    // instance on PostgreSQL), and its presets went with it.
    if (u.is_scope_root() && (made || !ensured.contains(u.str()))) {
      STRATA_RETURN_IF_ERROR(PlanPresets(u, now, find, plan));
    }
  }
  return Status::Ok();
}

int64_t CharCount(std::string_view text) {
  int64_t n = 0;
  for (char c : text) n += (static_cast<unsigned char>(c) & 0xc0) != 0x80;
  return n;
}

std::string_view TypeOfPlace(std::string_view uri) {
  Result<Uri> parsed = Uri::Parse(uri);
  return ContextTypeName(parsed.ok() ? InferContextType(*parsed) : ContextType::kResource);
}

Status KeepStoredModel(bool keep, std::string_view stored_model, std::shared_ptr<Embedder>& embedder,
                       std::string& model) {
  if (!keep || stored_model == model) return Status::Ok();
  STRATA_ASSIGN_OR_RETURN(embedder, EmbedderForStore(embedder, stored_model));
  model = embedder->model_id();
  return Status::Ok();
}

Result<std::shared_ptr<Embedder>> EmbedderForStore(std::shared_ptr<Embedder> given, std::string_view stored_model) {
  if (stored_model.empty() || stored_model == given->model_id()) return given;
  constexpr std::string_view kLocal = "local-hash-v1-";
  if (stored_model.starts_with(kLocal)) {
    int dim = 0;
    std::string_view digits = stored_model.substr(kLocal.size());
    auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), dim);
    if (ec == std::errc() && end == digits.data() + digits.size() && dim >= 16 && dim <= 65536) {
      std::shared_ptr<Embedder> local = NewLocalHashedEmbedder(dim);
      if (local->model_id() == stored_model) return local;
    }
  }
  return Status::FailedPrecondition(
      "this store's vectors were made by the embedding model " + json::QuoteForError(stored_model, 80) +
      " and no embedder was chosen: open it with that model's embedder (--embedder, e.g. openai:MODEL), or "
      "name another embedder to re-embed every node with it");
}

Status ValidateLink(const Uri& from, const Uri& to, std::string_view reason) {
  if (from.is_root() || to.is_root()) return Status::InvalidArgument("cannot link strata://: the root is not a node");
  if (from == to) return Status::InvalidArgument("cannot link " + from.str() + " to itself");
  // SQLite kept any bytes, and an export of the link then failed; PostgreSQL refused them by its own words.
  return CheckTextField("the link's reason", reason).WithContext("link " + from.str() + " -> " + to.str());
}

Status ValidateMove(const Uri& from, const Uri& to) {
  for (const Uri* u : {&from, &to}) {
    if (u->is_root() || u->is_kind_dir() || u->is_scope_root()) {
      return Status::InvalidArgument("cannot move " + std::string(u == &from ? "from " : "to ") + u->str() +
                                     ": scope roots and kind directories stay in place");
    }
  }
  if (from.Contains(to)) return Status::InvalidArgument("cannot move " + from.str() + " into itself (" + to.str() + ")");
  return Status::Ok();
}

Status CheckMovedBounds(const Uri& from, const Uri& to, int64_t deepest, int64_t longest) {
  auto slashes = [](const std::string& s) { return static_cast<int64_t>(std::count(s.begin(), s.end(), '/')); };
  const int64_t segments = deepest - slashes(from.str()) + slashes(to.str()) - 1;  // "strata://" holds two.
  const int64_t bytes = longest - static_cast<int64_t>(from.str().size()) + static_cast<int64_t>(to.str().size());
  if (segments > static_cast<int64_t>(Uri::kMaxSegments)) {
    return Status::InvalidArgument("cannot move " + from.str() + " to " + to.str() + ": a URI below it would have " +
                                   std::to_string(segments) + " segments; at most " +
                                   std::to_string(Uri::kMaxSegments) + " are allowed");
  }
  if (bytes > static_cast<int64_t>(Uri::kMaxStoredBytes)) {
    return Status::InvalidArgument("cannot move " + from.str() + " to " + to.str() + ": a URI below it would be " +
                                   std::to_string(bytes) + " bytes; at most " + std::to_string(Uri::kMaxStoredBytes) +
                                   " are allowed");
  }
  return Status::Ok();
}

std::string DirectoryLayer(const Uri& uri, Level level, const std::vector<Node>& children) {
  if (level == Level::kAbstract) {
    std::string out = std::string(uri.name()) + ": " + std::to_string(children.size()) + " entries";
    for (size_t i = 0; i < children.size() && i < 5; ++i) out += (i == 0 ? " (" : ", ") + std::string(children[i].uri.name());
    if (!children.empty()) out += children.size() > 5 ? ", ...)" : ")";
    return out;
  }
  std::string out;
  for (const Node& child : children) {
    out += "- " + std::string(child.uri.name()) + (child.is_dir ? "/" : "") +
           (child.abstract_text.empty() ? "" : ": " + child.abstract_text) + "\n";
  }
  return out;
}

bool GrepLines(const Uri& uri, const std::string& content, const std::string& wanted, bool ignore_case,
               bool superseded, size_t limit, std::vector<GrepMatch>* out) {
  std::string haystack = ignore_case ? AsciiLower(content) : content;
  if (haystack.find(wanted) == std::string::npos) return true;
  int line = 1;
  for (size_t start = 0; start <= content.size();) {
    size_t nl = content.find('\n', start);
    size_t end = nl == std::string::npos ? content.size() : nl;
    if (std::string_view(haystack).substr(start, end - start).find(wanted) != std::string_view::npos) {
      out->push_back({uri, line, content.substr(start, end - start), superseded});
      if (limit != 0 && out->size() >= limit) return false;
    }
    if (nl == std::string::npos) break;
    start = nl + 1;
    ++line;
  }
  return true;
}

bool GlobMatch(std::string_view pattern, std::string_view path) { return GlobProgram(pattern).Match(path); }

Result<std::vector<Node>> GlobNodes(ContextStore& store, std::string_view pattern, const Uri& under) {
  STRATA_RETURN_IF_ERROR(ValidateGlob(pattern));
  STRATA_ASSIGN_OR_RETURN(std::vector<Node> all, store.List(under, {.recursive = true}));
  GlobProgram program(pattern);  // Compiled once for the whole subtree.
  std::vector<Node> out;
  size_t prefix = under.is_root() ? Uri::kPrefix.size() : under.str().size() + 1;
  for (Node& node : all) {
    if (program.Match(std::string_view(node.uri.str()).substr(prefix))) out.push_back(std::move(node));
  }
  return out;
}

Status CheckQueryDimension(const Vector& query, int dimension) {
  if (static_cast<int>(query.size()) == dimension) return Status::Ok();
  return Status::InvalidArgument("query vector has " + std::to_string(query.size()) + " dimensions, the store " +
                                 std::to_string(dimension));
}

Result<std::vector<ScoredUri>> TopByCosine(std::vector<std::tuple<float, std::string, bool>> scored, size_t limit) {
  size_t n = std::min(limit, scored.size());
  std::partial_sort(scored.begin(), scored.begin() + static_cast<std::ptrdiff_t>(n), scored.end(),
                    [](const auto& a, const auto& b) { return std::get<0>(a) > std::get<0>(b); });
  std::vector<ScoredUri> out;
  for (size_t i = 0; i < n; ++i) {
    STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(std::get<1>(scored[i])));
    float sim = std::get<0>(scored[i]);
    out.push_back({uri, std::get<2>(scored[i]), sim, "cosine " + std::to_string(sim).substr(0, 5)});
  }
  return out;
}

std::optional<std::string> StoredLayer(const Node& node, Level level) {
  if (!node.is_dir) {
    return level == Level::kAbstract ? node.abstract_text : level == Level::kOverview ? node.overview : node.content;
  }
  if (level == Level::kAbstract && !node.abstract_text.empty()) return node.abstract_text;
  if (level == Level::kOverview && !node.overview.empty()) return node.overview;
  return std::nullopt;
}

Status ValidateGlob(std::string_view pattern) {
  if (pattern.empty()) return Status::InvalidArgument("glob: empty pattern");
  if (pattern.size() > kMaxGlobPattern) {
    return Status::InvalidArgument("glob: the pattern is " + std::to_string(pattern.size()) + " bytes; at most " +
                                   std::to_string(kMaxGlobPattern) + " are allowed");
  }
  return Status::Ok();
}

FtsRow MakeFtsRow(std::string_view name, bool is_dir, int64_t derived, std::string_view abstract_text,
                  std::string_view overview, std::string_view content) {
  bool leaf = !is_dir;
  return {FtsText(name), leaf && (derived & kAbstractDerived) ? std::string() : FtsText(abstract_text),
          leaf && (derived & kOverviewDerived) ? std::string() : FtsText(overview), FtsText(content)};
}

PorterStemmer::PorterStemmer() : stemmer_(sb_stemmer_new("porter", "UTF_8")) {}

PorterStemmer::~PorterStemmer() {
  if (stemmer_ != nullptr) sb_stemmer_delete(stemmer_);
}

std::string PorterStemmer::Stem(std::string_view word) {
  if (stemmer_ == nullptr || word.empty()) return std::string(word);
  const sb_symbol* out =
      sb_stemmer_stem(stemmer_, reinterpret_cast<const sb_symbol*>(word.data()), static_cast<int>(word.size()));
  if (out == nullptr) return std::string(word);  // Out of memory: the word as it is.
  return {reinterpret_cast<const char*>(out), static_cast<size_t>(sb_stemmer_length(stemmer_))};
}

namespace {

// kFtsTokenizer of a private in-memory SQLite database (one per thread: a tokenizer is not thread-safe).
class EmbeddedTokenizer {
 public:
  EmbeddedTokenizer() {
    if (sqlite3_open(":memory:", &db_) != SQLITE_OK) return;
    fts5_api* api = nullptr;
    sqlite3_stmt* stmt = nullptr;
    if (sqlite3_prepare_v2(db_, "SELECT fts5(?1)", -1, &stmt, nullptr) == SQLITE_OK) {
      sqlite3_bind_pointer(stmt, 1, &api, "fts5_api_ptr", nullptr);
      sqlite3_step(stmt);
    }
    sqlite3_finalize(stmt);
    if (api == nullptr || api->iVersion < 2) return;
    // "porter unicode61 remove_diacritics 2": the wrapper's name, then its arguments.
    std::vector<std::string> words;
    std::string spec(kFtsTokenizer);
    for (size_t start = 0; start < spec.size();) {
      size_t end = std::min(spec.find(' ', start), spec.size());
      words.push_back(spec.substr(start, end - start));
      start = end + 1;
    }
    std::vector<const char*> args;
    for (size_t i = 1; i < words.size(); ++i) args.push_back(words[i].c_str());
    void* user = nullptr;
    if (api->xFindTokenizer(api, words[0].c_str(), &user, &methods_) != SQLITE_OK) return;
    if (methods_.xCreate(user, args.data(), static_cast<int>(args.size()), &tokenizer_) != SQLITE_OK) {
      tokenizer_ = nullptr;
    }
  }
  ~EmbeddedTokenizer() {
    if (tokenizer_ != nullptr) methods_.xDelete(tokenizer_);
    if (db_ != nullptr) sqlite3_close(db_);
  }
  EmbeddedTokenizer(const EmbeddedTokenizer&) = delete;  // Owns the database and the tokenizer.
  EmbeddedTokenizer& operator=(const EmbeddedTokenizer&) = delete;

  // The tokens of `text` joined by spaces; false when SQLite's FTS5 is not available.
  bool Tokenize(std::string_view text, std::string* out) {
    if (tokenizer_ == nullptr) return false;
    auto on_token = [](void* ctx, int flags, const char* token, int bytes, int, int) -> int {
      if ((flags & FTS5_TOKEN_COLOCATED) != 0 || bytes <= 0) return SQLITE_OK;
      auto* joined = static_cast<std::string*>(ctx);
      if (!joined->empty()) joined->push_back(' ');
      joined->append(token, static_cast<size_t>(bytes));
      return SQLITE_OK;
    };
    return methods_.xTokenize(tokenizer_, out, FTS5_TOKENIZE_DOCUMENT, text.data(), static_cast<int>(text.size()),
                              on_token) == SQLITE_OK;
  }

 private:
  sqlite3* db_ = nullptr;
  fts5_tokenizer methods_{};
  Fts5Tokenizer* tokenizer_ = nullptr;
};

}  // namespace

std::string LexemeText(std::string_view text, size_t max_bytes) {
  if (text.size() > max_bytes) {
    size_t cut = max_bytes;
    while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
    text = text.substr(0, cut);
  }
  std::string spaced = FtsText(text);
  thread_local EmbeddedTokenizer tokenizer;
  std::string out;
  out.reserve(spaced.size());
  if (tokenizer.Tokenize(spaced, &out)) return out;
  // No FTS5 in this SQLite (the embedded store could not work either): ASCII case folding and Porter's
  // stemmer, which agree with it on ASCII text.
  out.clear();
  thread_local PorterStemmer stemmer;
  std::string word;
  auto flush = [&] {
    if (word.empty()) return;
    for (char& c : word) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    if (!out.empty()) out += ' ';
    out += word.size() >= 3 && word.size() <= 64 ? stemmer.Stem(word) : word;
    word.clear();
  };
  for (size_t i = 0; i < spaced.size();) {
    size_t start = i;
    char32_t cp = NextCodePoint(spaced, &i);
    bool cjk = IsCjk(cp);
    if (IsWordChar(cp) && !cjk) {
      word.append(spaced, start, i - start);
      continue;
    }
    flush();
    if (cjk) {
      word.append(spaced, start, i - start);
      flush();
    }
  }
  flush();
  return out;
}

std::string PorterStemmer::MatchingWord(std::string_view text, std::string_view term, std::string_view stem) {
  // A Porter stem is a prefix of its word but for the last letter ("happi" for "happy"): only words that
  // start like it are stemmed.
  std::string_view prefix = std::string_view(stem).substr(0, stem.size() > 1 ? stem.size() - 1 : stem.size());
  auto word_char = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || static_cast<unsigned char>(c) >= 0x80;
  };
  for (size_t i = 0; i < text.size();) {
    if (!word_char(text[i])) {
      ++i;
      continue;
    }
    size_t end = i;
    while (end < text.size() && word_char(text[end])) ++end;
    std::string_view word = text.substr(i, end - i);
    if (word.starts_with(prefix) && word != term && Stem(word) == stem) return std::string(word);
    i = end;
  }
  return "";
}

namespace {

bool RespellableLexeme(std::string_view lexeme) {
  if (lexeme.size() < 4 || lexeme.size() > 64) return false;
  return std::all_of(lexeme.begin(), lexeme.end(), [](char c) { return c >= 'a' && c <= 'z'; });
}

// Optimal string alignment distance of `a` and `b`, or `most` + 1 once it must exceed `most`.
size_t SpellingDistance(std::string_view a, std::string_view b, size_t most) {
  if ((a.size() > b.size() ? a.size() - b.size() : b.size() - a.size()) > most) return most + 1;
  // Three rows of the dynamic programme: two back (for swaps), one back, this one.
  std::vector<size_t> two(b.size() + 1), one(b.size() + 1), row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) one[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    size_t best = row[0];
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({one[j] + 1, row[j - 1] + 1, one[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) row[j] = std::min(row[j], two[j - 2] + 1);
      best = std::min(best, row[j]);
    }
    if (best > most) return most + 1;
    std::swap(two, one);
    std::swap(one, row);
  }
  return std::min(one[b.size()], most + 1);
}

}  // namespace

std::vector<std::string> NearestLexemes(std::string_view word, std::string_view lexeme,
                                        std::span<const std::string> held) {
  std::vector<std::string> nearest;
  // Both forms are compared: a slip can change what the stemmer strips ("torunament" is read as "toruna",
  // far from "tournament", which is held whole), and the stem is nearer when the word is inflected.
  std::string_view forms[2] = {lexeme, word};
  size_t most[2];
  bool any = false;
  for (int f = 0; f < 2; ++f) {
    most[f] = !RespellableLexeme(forms[f]) ? 0 : forms[f].size() >= 8 ? 2 : 1;
    any = any || most[f] > 0;
  }
  if (!any) return nearest;
  std::vector<std::pair<size_t, std::string_view>> found;
  for (const std::string& h : held) {
    if (h == lexeme || h == word || !RespellableLexeme(h)) continue;
    size_t best = SIZE_MAX;
    for (int f = 0; f < 2; ++f) {
      if (most[f] == 0) continue;
      size_t d = SpellingDistance(forms[f], h, most[f]);
      if (d <= most[f]) best = std::min(best, d);
    }
    if (best != SIZE_MAX) found.emplace_back(best, h);
  }
  std::sort(found.begin(), found.end());
  found.erase(std::unique(found.begin(), found.end()), found.end());
  // Those a query can search by (SearchableWord) and that are not stop words ("iwth" is not "with": queries
  // leave stop words out); of those, the nearest.
  size_t nearest_distance = SIZE_MAX;
  for (const auto& [d, h] : found) {
    if (nearest.size() == 3 || d > nearest_distance) break;
    std::string searchable = SearchableWord(h);
    if (searchable.empty() || IsStopWord(h) || IsStopWord(searchable)) continue;
    nearest_distance = d;
    nearest.emplace_back(h);
  }
  return nearest;
}

std::string SearchableWord(std::string_view lexeme) {
  for (std::string_view ending : {"", "e", "s", "ing", "ed", "er", "es", "ly"}) {
    std::string word = std::string(lexeme) + std::string(ending);
    if (LexemeText(word) == lexeme) return word;
  }
  return "";
}

Result<std::vector<Respelling>> Respell(const std::vector<std::string>& terms, const NearbyLexemes& nearby) {
  std::vector<RespellAsk> asks;
  std::vector<std::string> searched;  // The lexemes the query searches already, respellings included.
  for (const std::string& t : terms) searched.push_back(LexemeText(t));
  for (size_t k = 0; k < terms.size(); ++k) {
    const std::string& t = terms[k];
    std::string word = AsciiLower(t);
    const std::string& lexeme = searched[k];
    // A stop word is searched only in a query of nothing else, and then as it is ("would" is not "world").
    if (IsStopWord(word) || (!RespellableLexeme(lexeme) && !RespellableLexeme(word))) continue;
    auto asked_already = [&](const RespellAsk& a) { return a.lexeme == lexeme; };
    if (lexeme.size() < 2 || std::any_of(asks.begin(), asks.end(), asked_already)) continue;
    // Candidates are as long as a form they can be within 2 edits of (the list is cut after kRespellCandidates
    // in byte order: without this a large store's "re" range would end before "res").
    const size_t shorter = std::min(word.size(), lexeme.size());
    RespellAsk ask{.word = t,
                   .lexeme = lexeme,
                   .ranges = {},
                   .shortest = shorter - std::min<size_t>(2, shorter),
                   .longest = std::max(word.size(), lexeme.size()) + 2};
    const std::string prefixes[] = {lexeme.substr(0, 2), {lexeme[1], lexeme[0]}};
    for (const std::string& lo : prefixes) {
      if (!ask.ranges.empty() && lo == ask.ranges.front().first) break;  // "aa": one range.
      std::string hi = lo;
      ++hi.back();  // A letter: the next byte ends the range.
      ask.ranges.emplace_back(lo, std::move(hi));
    }
    asks.push_back(std::move(ask));
  }
  std::vector<Respelling> out;
  if (asks.empty()) return out;
  STRATA_ASSIGN_OR_RETURN(std::vector<std::vector<std::string>> found, nearby(asks));
  if (found.size() != asks.size()) return Status::Internal("respelling: the store answered for another count of words");
  for (size_t i = 0; i < asks.size(); ++i) {
    for (std::string& n : NearestLexemes(AsciiLower(asks[i].word), asks[i].lexeme, found[i])) {
      // Searched once: a respelling that another query word is read as ("torunament tournament"), or that an
      // earlier slip was respelt to, adds nothing.
      if (std::find(searched.begin(), searched.end(), n) != searched.end()) continue;
      searched.push_back(n);
      std::string word = SearchableWord(n);
      out.push_back({asks[i].word, std::move(n), std::move(word)});
    }
  }
  return out;
}

std::pair<std::string, int> LexicalDetail(const std::vector<std::string>& terms, FtsRow row,
                                          std::string_view abstract_text, std::string_view overview,
                                          std::span<const Respelling> respelt) {
  std::string detail;
  int level = 3;
  static constexpr const char* kColumns[] = {"name", "abstract", "overview", "content"};
  static constexpr int kLevels[] = {0, 0, 1, 2};
  // Which layers hold each term: the indexed text, except for a leaf's derived layers (not indexed,
  // MakeFtsRow), whose short text is converted here; the content is never converted again.
  if (row.abstract_text.empty()) row.abstract_text = FtsText(abstract_text);
  if (row.overview.empty()) row.overview = FtsText(overview);
  std::string* layers[4] = {&row.name, &row.abstract_text, &row.overview, &row.content};
  for (std::string* layer : layers) *layer = AsciiLower(*layer);
  // A term the index matched through its stem ("researching" for "research") is shown with the word it matched.
  thread_local PorterStemmer stemmer;
  thread_local std::unordered_map<std::string, std::string> stems;  // Terms recur in every hit of a query.
  // Each term with its label: the term itself, or the word asked for a respelt lexeme.
  std::vector<std::pair<std::string_view, std::string_view>> labelled;
  for (const std::string& t : terms) labelled.emplace_back(t, t);
  for (const Respelling& r : respelt) labelled.emplace_back(r.asked, r.word);
  for (size_t k = 0; k < labelled.size(); ++k) {
    const auto [label, t] = labelled[k];
    const bool respelling = k >= terms.size();
    std::string where;
    for (int c = 0; c < 4; ++c) {
      if (!FtsContainsTerm(*layers[c], t)) continue;
      where += std::string(where.empty() ? "" : "+") + kColumns[c];
      level = std::min(level, kLevels[c]);
    }
    std::string matched;  // When the term itself is in no layer: the first word the index matched by its stem.
    if (where.empty()) {
      if (stems.size() > 4096) stems.clear();
      auto [it, inserted] = stems.try_emplace(std::string(t));
      if (inserted) it->second = stemmer.Stem(t);
      for (int c = 0; c < 4; ++c) {
        std::string word = stemmer.MatchingWord(*layers[c], t, it->second);
        if (word.empty()) continue;
        where += std::string(where.empty() ? "" : "+") + kColumns[c];
        if (matched.empty()) matched = std::move(word);
        level = std::min(level, kLevels[c]);
      }
    }
    if (where.empty()) continue;
    if (respelling && matched.empty()) matched = t;
    detail += (detail.empty() ? "" : ", ") + std::string(label) + " (" + where +
              (matched.empty() ? "" : ": \"" + matched + "\"") + (respelling ? ", respelt)" : ")");
  }
  if (detail.empty()) return {"a word sharing a stem with the query", 2};
  return {detail, level == 3 ? 2 : level};
}

bool IsSuperseded(std::string_view metadata) {
  auto parsed = strata::json::ParseOrDiscard<nlohmann::json>(metadata);
  if (!parsed.is_object()) return false;
  auto it = parsed.find("valid_to");
  return it != parsed.end() && !it->is_null();
}

std::string VectorBlob(const Vector& v) { return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4); }

Vector BlobVector(std::string_view blob) {
  Vector v(blob.size() / 4);
  std::memcpy(v.data(), blob.data(), v.size() * 4);
  return v;
}

Status IndexUpserts(VectorIndex& index, const std::vector<std::pair<int64_t, Vector>>& upserts) {
  if (upserts.empty()) return Status::Ok();
  const size_t dim = static_cast<size_t>(index.params().dim);
  std::vector<int64_t> ids;
  std::vector<float> floats;
  ids.reserve(upserts.size());
  floats.reserve(upserts.size() * dim);
  for (const auto& [id, v] : upserts) {
    if (v.size() != dim) {
      return Status::Internal("vector of " + std::to_string(v.size()) + " dimensions for an index of " +
                              std::to_string(dim));
    }
    ids.push_back(id);
    floats.insert(floats.end(), v.begin(), v.end());
  }
  return index.UpsertBatch(ids, floats.data());
}

std::pair<std::string, std::string> DescendantRange(const Uri& uri) {
  if (uri.is_root()) return {std::string(Uri::kPrefix), "strata:/0"};
  return {uri.str() + "/", uri.str() + "0"};
}

Result<std::vector<Vector>> QueryVectorCache::Embed(Embedder& embedder, std::span<const std::string> texts) {
  std::vector<Vector> out(texts.size());
  std::vector<std::string> missing;
  std::vector<size_t> where;
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < texts.size(); ++i) {
      auto it = cache_.find(texts[i]);
      if (it != cache_.end()) {
        out[i] = it->second;
      } else {
        missing.push_back(texts[i]);
        where.push_back(i);
      }
    }
  }
  if (missing.empty()) return out;
  STRATA_ASSIGN_OR_RETURN(std::vector<Vector> fresh, embedder.Embed(missing));
  if (fresh.size() != missing.size()) {
    return Status::Internal("embedder returned " + std::to_string(fresh.size()) + " vectors for " +
                            std::to_string(missing.size()) + " texts");
  }
  std::lock_guard lock(mu_);
  if (cache_.size() > 4096) cache_.clear();
  for (size_t j = 0; j < fresh.size(); ++j) {
    cache_[missing[j]] = fresh[j];
    out[where[j]] = std::move(fresh[j]);
  }
  return out;
}

}  // namespace strata::memory::internal
