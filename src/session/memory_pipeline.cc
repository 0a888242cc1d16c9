#include "strata/session/memory_pipeline.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "strata/memory/hash.h"
#include "strata/json/checked.h"
#include "strata/llm/ask_json.h"
#include "strata/llm/chat_error.h"
#include "strata/llm/generate.h"
#include "strata/memory/uri.h"
#include "strata/prompt/value.h"
#include "strata/util/ascii.h"
#include "strata/util/clock.h"
#include "strata/util/file_system.h"
#include "strata/util/utf8.h"
#include "session_common.h"

namespace strata::session {

using Json = nlohmann::json;
using memory::Uri;

// The cancellation token of the pipeline call running on this thread (ProcessArchive, Remember,
// Consolidate), passed to every model call it makes.
thread_local const Canceller* t_cancel = nullptr;

class CancelScope {
 public:
  explicit CancelScope(const Canceller* cancel) : outer_(t_cancel) { t_cancel = cancel; }
  ~CancelScope() { t_cancel = outer_; }
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

 private:
  const Canceller* outer_;
};

// The value, nullopt when it does not exist, or the error: an I/O failure is never taken for "not there".
template <typename T>
Result<std::optional<T>> IfExists(Result<T> r) {
  if (r.ok()) return std::optional<T>(std::move(*r));
  if (r.status().code() == StatusCode::kNotFound) return std::optional<T>();
  return r.status();
}

struct MemoryPipeline::Candidate {
  std::string category;
  std::string key;
  std::string abstract_text;
  std::string overview;
  std::string content;
  Uri dir = Uri::Root();         // The category directory it belongs in.
  bool merge = false;            // The category merges (one record per key).
  std::optional<Uri> fixed_uri;  // Where "create" writes, when the candidate already has a home (consolidation).
};

namespace {

constexpr size_t kToolOutputCut = 2000;
// A directory's L1 after a commit: its description, then this marker and its current entries.
constexpr std::string_view kCurrentMarker = "Currently ";
constexpr size_t kListedChildren = 20;


std::string Slug(std::string_view key) {
  std::string out;
  for (char c : key) {
    unsigned char u = static_cast<unsigned char>(c);
    if (u >= 0x80 || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_') {
      out += c;
    } else if (c >= 'A' && c <= 'Z') {
      out += static_cast<char>(c - 'A' + 'a');
    } else if (!out.empty() && out.back() != '_') {
      out += '_';
    }
  }
  while (!out.empty() && out.back() == '_') out.pop_back();
  out.resize(Utf8Prefix(out, 100));
  return out.empty() ? "memory" : out;
}

// The archive as the model reads it: one "[role] text" block per message, tool calls and context
// references named, long tool output cut.
std::string Transcript(const std::vector<Message>& messages) {
  std::string out;
  for (const Message& m : messages) {
    std::string text = m.ExtractText("\n");
    if (m.role == Role::kTool && text.size() > kToolOutputCut) {
      const size_t kept = Utf8Prefix(text, kToolOutputCut);  // Never inside a character.
      text = text.substr(0, kept) + " [... " + std::to_string(text.size() - kept) + " bytes cut]";
    }
    out += "[" + std::string(RoleName(m.role)) + "] " + text + "\n";
    for (const ContentPart& part : m.content) {
      const auto* custom = std::get_if<CustomPart>(&part);
      if (custom == nullptr || custom->type != kContextRefPartType) continue;
      Json j = strata::json::ParseOrDiscard<Json>(custom->json);
      if (j.is_object()) out += "[used " + json::StringOr(j, "kind", "context") + " " + json::StringOr(j, "uri") + "]\n";
    }
    if (m.tool_calls) {
      for (const ToolCall& call : *m.tool_calls) {
        out += "[calls " + call.function.name + "(" + call.function.arguments.value_or("") + ")]\n";
      }
    }
  }
  return out;
}

std::vector<std::string> ContextUris(const std::vector<Message>& messages) {
  std::vector<std::string> out;
  for (const Message& m : messages) {
    for (const ContentPart& part : m.content) {
      const auto* custom = std::get_if<CustomPart>(&part);
      if (custom == nullptr || custom->type != kContextRefPartType) continue;
      Json j = strata::json::ParseOrDiscard<Json>(custom->json);
      std::string uri = json::StringOr(j, "uri");
      if (!uri.empty() && std::find(out.begin(), out.end(), uri) == out.end()) out.push_back(uri);
    }
  }
  return out;
}

// Removes the archive node phase 2 wrote at `uri` for a session deleted while it wrote (best effort: the
// new session's CreateSession and delete clear the scope too). Only while it holds `transcript`: a new
// session's own archive under the same name is its own. The history directory goes with it when empty (a
// race left open: the newcomer's own phase 2 between its Mkdir of it and its write would re-create it
// without its ordered mark).
void TakeBackArchive(memory::ContextStore& store, const Uri& uri, std::string_view transcript) {
  Result<std::string> held = store.Read(uri, memory::Level::kContent);
  if (held.ok() && *held == transcript) (void)store.Remove(uri, /*recursive=*/false);
  Result<int64_t> left = store.Count({.under = uri.Parent(), .parent = uri.Parent()}, 1);
  if (left.ok() && *left == 0) (void)store.Remove(uri.Parent(), /*recursive=*/false);
}

// Where a candidate of `category` goes for the session `info`, and whether the category merges by key:
// strata://<owner kind>/<owner id>/memories/<category>. InvalidArgument (naming `where`) for a category not
// listed, or one whose owner this session has none of.
Result<std::pair<Uri, bool>> CandidatePlace(const std::vector<CategorySpec>& categories, const std::string& category,
                                            const SessionInfo& info, const std::string& where) {
  auto spec = std::find_if(categories.begin(), categories.end(), [&](const CategorySpec& s) { return s.name == category; });
  if (spec == categories.end()) {
    return Status::InvalidArgument(where + ".category \"" + category + "\" is not one of the categories listed");
  }
  const std::string& owner_id = spec->owner == Owner::kUser ? info.user : info.agent;
  if (owner_id.empty()) {
    return Status::InvalidArgument(where + ".category \"" + category + "\" belongs to the " +
                                   std::string(OwnerName(spec->owner)) + ", and this session has none");
  }
  STRATA_ASSIGN_OR_RETURN(Uri dir, Uri::Parse("strata://" + std::string(OwnerName(spec->owner)) + "/" + owner_id +
                                             "/memories/" + category));
  return std::pair{dir, spec->merge};
}

prompt::Value ToValue(const Json& j) {
  auto v = prompt::Value::FromJson(j.dump(-1, ' ', false, Json::error_handler_t::replace));
  return v.ok() ? *v : prompt::Value();
}

std::string FirstLine(std::string_view text) {
  size_t start = text.find_first_not_of(" \t\r\n");
  if (start == std::string_view::npos) return "";
  text.remove_prefix(start);
  return std::string(text.substr(0, text.find('\n')));
}

Json Metadata(std::string_view existing) {
  Json j = strata::json::ParseOrDiscard<Json>(existing);
  return j.is_object() ? j : Json::object();
}

}  // namespace

std::string_view OwnerName(Owner owner) { return owner == Owner::kUser ? "user" : "agent"; }

std::vector<CategorySpec> DefaultCategories() {
  return {{"profile", Owner::kUser, true, "stable facts about the user: role, background, skills, language"},
          {"preferences", Owner::kUser, true, "how the user likes things done"},
          {"entities", Owner::kUser, true, "people, projects, tools and places the user mentions"},
          {"events", Owner::kUser, false, "things that happened, with dates"},
          {"cases", Owner::kAgent, false, "problems the agent solved and how"},
          {"patterns", Owner::kAgent, true, "reusable ways of working the agent learned"}};
}

std::string CommitDiff::ToJson() const {
  Json changes_json = Json::array();
  for (const MemoryChange& c : changes)
    changes_json.push_back({{"action", MemoryActionName(c.action)}, {"uri", c.uri}, {"reason", c.reason}});
  return Json{{"session", session},
              {"archive", archive},
              {"summary", summary},
              {"candidates", candidates},
              {"changes", changes_json}}
      .dump(2, ' ', false, Json::error_handler_t::replace);  // A reason may quote a model's broken reply.
}

MemoryPipeline::MemoryPipeline(Sessions& sessions, memory::ContextStore& store, llm::ChatProvider& model,
                               prompt::PromptLibrary& prompts, AuditLog& audit, PipelineOptions options)
    : sessions_(sessions),
      store_(store),
      model_(model),
      prompts_(prompts),
      audit_(audit),
      options_(std::move(options)) {
  if (options_.clock == nullptr) options_.clock = SystemClock();
  if (options_.owner_locks == nullptr) {
    own_locks_ = NewInProcessOwnerLocks();
    options_.owner_locks = own_locks_.get();
  }
}

int64_t MemoryPipeline::NowMs() const { return options_.clock->WallMicros() / 1000; }

Result<std::unique_ptr<OwnerLocks::Held>> MemoryPipeline::LockOwners(std::vector<std::string> owners) {
  return options_.owner_locks->Lock(std::move(owners), t_cancel);
}

namespace {

// One of the pipeline's own prompts: a missing one is the deployment's fault (no prompt directory was
// found), not the caller's: kFailedPrecondition, as for a missing model, so that remember keeps the text as
// written instead of refusing it (a relocated binary could not remember at all).
Result<std::string> RenderOwn(prompt::PromptLibrary& prompts, std::string_view id, const prompt::Value& vars) {
  Result<std::string> text = prompts.Render(id, vars);
  if (!text.ok() && text.status().code() == StatusCode::kNotFound) {
    return Status::FailedPrecondition(std::string(text.status().message()) +
                                      " (the shipped prompts are looked for in share/strata/prompts beside the "
                                      "program's bin/, then under $STRATA_HOME)");
  }
  return text;
}

}  // namespace

Result<std::string> MemoryPipeline::CallForJson(std::string_view prompt_id, const prompt::Value& vars,
                                                std::string_view what, const JsonCheck& check,
                                                std::string* last_error, bool* unusable) {
  STRATA_ASSIGN_OR_RETURN(std::string prompt, RenderOwn(prompts_, prompt_id, vars));
  llm::JsonAsk ask;
  Result<std::string> json =
      llm::AskForJson(model_, prompt, what, check, {.attempts = options_.parse_attempts, .cancel = t_cancel}, &ask);
  *last_error = ask.last_error;
  if (unusable != nullptr) *unusable = ask.unusable;
  return json;
}

Result<std::string> MemoryPipeline::Summarize(std::string_view session, int archive, const std::string& transcript) {
  std::string previous;
  if (archive > 1) {
    auto prev = Uri::Parse("strata://session/" + std::string(session) + "/history/" + ArchiveName(archive - 1));
    if (prev.ok()) {
      STRATA_ASSIGN_OR_RETURN(std::optional<std::string> text, IfExists(store_.Read(*prev, memory::Level::kOverview)));
      if (text) previous = *text;
    }
  }
  STRATA_ASSIGN_OR_RETURN(
      std::string prompt,
      RenderOwn(prompts_, "session.summarize", ToValue({{"transcript", transcript}, {"previous_summary", previous}})));
  std::vector<Message> history = {Message::User(prompt)};
  STRATA_ASSIGN_OR_RETURN(llm::GenerateResult reply, llm::Generate(model_, "", {}, history, {}, {.cancel = t_cancel}));
  std::string summary = reply.message.ExtractText();
  if (FirstLine(summary).empty()) return Status::InvalidArgument("the model returned an empty summary");
  return summary;
}

Result<std::vector<MemoryPipeline::Candidate>> MemoryPipeline::Extract(const std::string& transcript,
                                                                       const std::string& summary,
                                                                       const SessionInfo& info, std::string* error) {
  Json categories = Json::array();
  for (const CategorySpec& c : options_.categories) {
    if ((c.owner == Owner::kUser && info.user.empty()) || (c.owner == Owner::kAgent && info.agent.empty())) continue;
    categories.push_back(
        {{"name", c.name}, {"owner", OwnerName(c.owner)}, {"mode", c.merge ? "merge" : "append"}, {"description", c.description}});
  }
  if (categories.empty()) return Status::FailedPrecondition("session " + info.id + " has neither a user nor an agent");
  Json vars = {
      {"transcript", transcript}, {"summary", summary}, {"categories", categories}, {"language", options_.language}};
  std::vector<Candidate> out;
  auto check = [&](std::string_view text) -> Status {
    out.clear();
    Json j = Json::parse(text);
    if (!j.contains("memories") || !j["memories"].is_array()) {
      return Status::InvalidArgument("the object has no \"memories\" array");
    }
    for (size_t i = 0; i < j["memories"].size(); ++i) {
      const Json& m = j["memories"][i];
      std::string where = "memories[" + std::to_string(i) + "]";
      if (!m.is_object()) return Status::InvalidArgument(where + " is not an object");
      auto text_of = [&](const char* key) {
        return m.contains(key) && m[key].is_string() ? m[key].get<std::string>() : std::string();
      };
      Candidate c;
      c.category = text_of("category");
      c.key = text_of("key");
      c.abstract_text = text_of("abstract");
      c.overview = text_of("overview");
      c.content = text_of("content");
      if (c.content.empty()) c.content = c.overview.empty() ? c.abstract_text : c.overview;
      STRATA_ASSIGN_OR_RETURN(auto place, CandidatePlace(options_.categories, c.category, info, where));
      if (c.content.empty()) return Status::InvalidArgument(where + " has no content");
      std::tie(c.dir, c.merge) = place;
      out.push_back(std::move(c));
    }
    return Status::Ok();
  };
  STRATA_RETURN_IF_ERROR(CallForJson("memory.extract", ToValue(vars), "memory extraction", check, error).status());
  return out;
}

Status MemoryPipeline::Replay(std::vector<MemoryChange>& changes, const std::vector<AuditEntry>& entries,
                              const std::vector<std::string>& links, bool replaying) {
  // Set when a merge of this plan could not be written the first time: the supersessions decided with it
  // (the memories it absorbed) are not carried out either, or their text would be in no current memory.
  bool dropped = false;
  auto say = [&](std::string_view why) {
    std::string& reason = changes.back().reason;
    reason += std::string(reason.empty() ? "" : " ") + std::string(why);
  };
  auto leave = [&]() {
    say(replaying ? "(not written again: the memory was changed or removed since this was decided)"
                  : "(not applied: the memory changed while this was decided)");
    if (!replaying) {
      changes.back().applied = false;
      dropped = true;
    }
  };
  for (const AuditEntry& e : entries) {
    changes.push_back({e.action, e.uri, e.reason});
    STRATA_ASSIGN_OR_RETURN(Uri uri, Uri::Parse(e.uri));
    if (e.action == MemoryAction::kCreate || e.action == MemoryAction::kMerge) {
      Json meta = Json::object();
      STRATA_ASSIGN_OR_RETURN(std::optional<memory::Node> existing, IfExists(store_.Stat(uri)));
      // Written once already: its text is there (a merge whose text is not what it was decided on).
      const bool written_before = existing && existing->content == e.after &&
                                  (e.action == MemoryAction::kMerge ? existing->content != e.before : replaying);
      // A merge decided on content that is no longer there (removed, edited, merged into by a later job,
      // superseded), or a create run again over a memory changed since (edited, merged into): that later
      // state stands.
      if (!written_before && ((e.action == MemoryAction::kMerge && (!existing || existing->content != e.before)) ||
                              (e.action == MemoryAction::kCreate && replaying && existing))) {
        leave();
        continue;
      }
      if (existing) meta = Metadata(existing->metadata);
      meta.erase("valid_to");
      meta.erase("superseded_by");
      if (!meta.contains("valid_from")) meta["valid_from"] = e.at_ms;
      meta["updated_by"] = e.source;
      if (!meta.contains("key") && !e.category.empty()) meta["source"] = e.source;
      memory::WriteOptions w;
      if (!e.abstract_text.empty()) w.abstract_text = e.abstract_text;
      if (!e.overview.empty()) w.overview = e.overview;
      w.type = memory::ContextType::kMemory;
      w.category = e.category;
      w.metadata = meta.dump();
      if (e.action == MemoryAction::kMerge) w.expect_content = e.before;
      if (!written_before) {
        Status written = store_.Write(uri, e.after, w);
        if (written.code() == StatusCode::kAborted) {  // Changed between the look above and the write.
          leave();
          continue;
        }
        STRATA_RETURN_IF_ERROR(written);
      }
      for (const std::string& link : links) {
        auto target = Uri::Parse(link);
        if (!target.ok()) continue;
        STRATA_ASSIGN_OR_RETURN(std::optional<memory::Node> linked, IfExists(store_.Stat(*target)));
        if (!linked) continue;  // A context since removed is not an error.
        STRATA_RETURN_IF_ERROR(store_.Link(uri, *target, e.action == MemoryAction::kCreate ? "extracted from" : "updated from"));
      }
    } else if (e.action == MemoryAction::kSupersede) {
      if (dropped) {
        changes.back().applied = false;
        say("(not applied: the merge it was decided with was not)");
        continue;
      }
      STRATA_ASSIGN_OR_RETURN(std::optional<memory::Node> existing, IfExists(store_.Stat(uri)));
      if (!existing) continue;  // Removed by hand since: nothing left to mark.
      Json meta = Metadata(existing->metadata);
      if (meta.contains("valid_to")) continue;
      meta["valid_to"] = e.at_ms;
      meta["superseded_by"] = e.reason;
      memory::WriteOptions w;
      w.metadata = meta.dump();
      STRATA_RETURN_IF_ERROR(store_.Write(uri, existing->content, w));
    }
  }
  return Status::Ok();
}

Result<std::vector<MemoryChange>> MemoryPipeline::Apply(const Candidate& c, const std::string& source,
                                                        const std::vector<std::string>& links,
                                                        const std::function<Status()>& still_wanted) {
  STRATA_ASSIGN_OR_RETURN(std::vector<AuditEntry> recorded, audit_.BySource(source));
  std::vector<MemoryChange> changes;
  if (!recorded.empty()) {  // Decided before a crash or a failure: redo that, where nothing came since.
    STRATA_RETURN_IF_ERROR(Replay(changes, recorded, links, /*replaying=*/true));
    return changes;
  }
  // The nearest current memories of its category.
  std::vector<std::string> texts = {c.abstract_text + "\n" + c.content};
  STRATA_ASSIGN_OR_RETURN(std::vector<memory::Vector> qv, store_.EmbedTexts(texts));
  memory::SearchFilter filter{.under = c.dir, .leaves_only = true, .current_only = true};
  std::vector<memory::ScoredUri> similar;
  STRATA_ASSIGN_OR_RETURN(std::optional<memory::Node> dir_node, IfExists(store_.Stat(c.dir)));
  if (dir_node) {
    STRATA_ASSIGN_OR_RETURN(similar, store_.VectorNeighbours(qv[0], filter, options_.max_similar * 2));
  }
  std::vector<memory::Node> existing;
  std::vector<double> similarity;
  for (const memory::ScoredUri& s : similar) {
    if (s.score < options_.similarity_threshold || existing.size() >= options_.max_similar) continue;
    if (c.fixed_uri && s.uri == *c.fixed_uri) continue;  // Consolidation: the memory itself is not its duplicate.
    STRATA_ASSIGN_OR_RETURN(std::optional<memory::Node> node, IfExists(store_.Stat(s.uri)));
    if (!node) continue;
    existing.push_back(std::move(*node));
    similarity.push_back(s.score);
  }
  Uri create_uri = c.dir;
  if (c.fixed_uri) {
    create_uri = *c.fixed_uri;
  } else {
    const std::string slug = Slug(c.key.empty() ? c.abstract_text : c.key);
    STRATA_ASSIGN_OR_RETURN(create_uri, c.dir.Child(c.merge ? slug : slug + "-" + memory::HashHex(c.content).substr(0, 8)));
  }
  int64_t now = NowMs();
  std::vector<AuditEntry> plan;
  auto create = [&](std::string reason) -> Status {
    STRATA_ASSIGN_OR_RETURN(std::optional<memory::Node> prior, IfExists(store_.Stat(create_uri)));
    if (prior && c.merge) {  // Same key in a merge category: an update of that record.
      plan.push_back({0, create_uri.str(), MemoryAction::kMerge, source, now, std::move(reason), prior->content, c.content,
                      c.abstract_text, c.overview, c.category});
    } else {
      plan.push_back({0, create_uri.str(), MemoryAction::kCreate, source, now, std::move(reason), "", c.content, c.abstract_text,
                      c.overview, c.category});
    }
    return Status::Ok();
  };
  // The same text kept already needs no model to call it a duplicate (without one, it was kept a second time
  // as written).
  auto same = std::find_if(existing.begin(), existing.end(), [&](const memory::Node& n) {
    return StripAsciiWhitespace(n.content) == StripAsciiWhitespace(c.content);
  });
  if (same != existing.end() && !StripAsciiWhitespace(c.content).empty()) {
    plan.push_back({0, same->uri.str(), MemoryAction::kSkip, source, now, "the same text is kept already",
                    same->content, same->content, "", "", c.category});
  } else if (existing.empty()) {
    STRATA_RETURN_IF_ERROR(create("no similar memory"));
  } else {
    Json list = Json::array();
    for (size_t i = 0; i < existing.size(); ++i) {
      list.push_back({{"index", i},
                      {"uri", existing[i].uri.str()},
                      {"abstract", existing[i].abstract_text},
                      {"content", existing[i].content},
                      {"similarity", similarity[i]}});
    }
    Json candidate = {{"category", c.category}, {"key", c.key}, {"abstract", c.abstract_text}, {"content", c.content}};
    std::string error;
    bool unusable = false;
    Result<std::string> answer = CallForJson("memory.dedup", ToValue({{"candidate", candidate}, {"existing", list}}),
                                             "memory dedup", {}, &error, &unusable);
    // R1 is for replies that never parsed; an unreachable model is the job's failure, retried later.
    if (!answer.ok() && !unusable) return answer.status();
    if (!answer.ok()) {
      STRATA_RETURN_IF_ERROR(create("R1: the dedup reply did not parse (" + error + "); kept as new"));
    } else {
      Json d = Json::parse(*answer);
      std::string decision = json::StringOr(d, "decision");
      std::string reason = json::StringOr(d, "reason");
      if (!error.empty()) {  // Kept in the audit trail: the first reply had to be asked again.
        reason += std::string(reason.empty() ? "" : " ") + "[model asked again after: " + error + "]";
      }
      auto valid = [&](const Json& v) {
        return v.is_number_integer() && v.get<int64_t>() >= 0 &&
               v.get<int64_t>() < static_cast<int64_t>(existing.size());
      };
      std::vector<int> merges, deletes;
      if (d.contains("actions") && d["actions"].is_array()) {
        for (const Json& a : d["actions"]) {
          if (!a.is_object() || !a.contains("index") || !valid(a["index"])) continue;  // R2
          int index = static_cast<int>(a["index"].get<int64_t>());
          std::string action = json::StringOr(a, "action");
          if (action == "merge") merges.push_back(index);
          if (action == "delete") deletes.push_back(index);
        }
      }
      // R7: merged wins over deleted.
      std::erase_if(deletes, [&](int i) { return std::find(merges.begin(), merges.end(), i) != merges.end(); });
      int target = -1;
      if (decision == "merge") {
        target = d.contains("merge_into") && valid(d["merge_into"]) ? static_cast<int>(d["merge_into"].get<int64_t>())
                 : merges.empty()                                   ? -1
                                                                    : merges[0];  // R3
      } else if (decision == "create" && !merges.empty()) {
        target = merges[0];  // R5
        decision = "merge";
      }
      if (decision == "skip") {
        plan.push_back({0, existing[0].uri.str(), MemoryAction::kSkip, source, now,
                        reason.empty() ? "duplicate of an existing memory" : reason, existing[0].content,
                        existing[0].content, "", "", c.category});
        deletes.clear();  // R4
        merges.clear();
      } else if (decision == "merge" && target >= 0) {
        const memory::Node& t = existing[static_cast<size_t>(target)];
        std::string merged = json::StringOr(d, "content");
        if (merged.empty()) merged = t.content + "\n" + c.content;  // R6
        plan.push_back(
            {0, t.uri.str(), MemoryAction::kMerge, source, now, reason, t.content, merged, c.abstract_text, c.overview, c.category});
        for (int m : merges) {
          if (m == target) continue;
          plan.push_back({0, existing[static_cast<size_t>(m)].uri.str(), MemoryAction::kSupersede, source, now, t.uri.str(),
                          existing[static_cast<size_t>(m)].content, existing[static_cast<size_t>(m)].content, "", "",
                          c.category});
        }
      } else {
        STRATA_RETURN_IF_ERROR(create(decision == "create" ? reason : "R3: merge without a target; kept as new"));
      }
      for (int del : deletes) {
        const memory::Node& t = existing[static_cast<size_t>(del)];
        if (!plan.empty() && plan[0].uri == t.uri.str()) continue;
        plan.push_back({0, t.uri.str(), MemoryAction::kSupersede, source, now, plan.empty() ? "" : plan[0].uri, t.content, t.content,
                        "", "", c.category});
      }
    }
  }
  if (still_wanted) STRATA_RETURN_IF_ERROR(still_wanted());
  STRATA_RETURN_IF_ERROR(audit_.Record(plan));
  STRATA_RETURN_IF_ERROR(Replay(changes, plan, links, /*replaying=*/false));
  return changes;
}

Status MemoryPipeline::RefreshDirectory(const Uri& dir) {
  STRATA_ASSIGN_OR_RETURN(memory::Node node, store_.Stat(dir));
  STRATA_ASSIGN_OR_RETURN(std::vector<memory::Node> children, store_.List(dir));
  // The directory's own description (the preset's, or what a person wrote) stays first.
  std::string description = node.overview;
  if (size_t at = description.find(kCurrentMarker); at != std::string::npos) description.resize(at);
  while (!description.empty() && (description.back() == '\n' || description.back() == ' ')) description.pop_back();
  std::vector<const memory::Node*> current;
  for (const memory::Node& child : children) {
    if (child.is_dir || !Metadata(child.metadata).contains("valid_to")) current.push_back(&child);
  }
  std::string listing = std::string(kCurrentMarker) + std::to_string(current.size()) + " entries";
  listing += current.empty() ? "." : ":";
  for (size_t i = 0; i < current.size() && i < kListedChildren; ++i) {
    listing += "\n- " + std::string(current[i]->uri.name()) +
               (current[i]->abstract_text.empty() ? "" : ": " + current[i]->abstract_text);
  }
  if (current.size() > kListedChildren) listing += "\n- ...";
  memory::WriteOptions w;
  w.overview = description.empty() ? listing : description + "\n\n" + listing;
  return store_.Mkdir(dir, w);
}

Result<CommitDiff> ReadCommitDiff(Sessions& sessions, std::string_view session, int archive) {
  STRATA_ASSIGN_OR_RETURN(SessionInfo info, sessions.Get(session));
  STRATA_ASSIGN_OR_RETURN(std::vector<ArchiveInfo> archives, sessions.Archives(session));
  auto it = std::find_if(archives.begin(), archives.end(), [&](const ArchiveInfo& a) { return a.number == archive; });
  const std::string where = "session " + info.id + " archive " + std::to_string(archive);
  if (it == archives.end()) return Status::NotFound("session " + info.id + " has no archive " + std::to_string(archive));
  if (it->state != ArchiveState::kDone) {
    return Status::FailedPrecondition(where + " is " + std::string(ArchiveStateName(it->state)) +
                                      ": what phase 2 changed is known once it is done");
  }
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> text, sessions.ReadArchiveFile(session, archive, "diff.json"));
  if (!text) return Status::DataLoss(where + " is done but its diff.json is missing");
  Json j = strata::json::ParseOrDiscard<Json>(*text);
  if (!j.is_object()) return Status::DataLoss(where + ": diff.json is not a JSON object");
  CommitDiff diff;
  diff.session = info.id;
  diff.archive = archive;
  diff.summary = json::StringOr(j, "summary");
  diff.candidates = static_cast<int>(std::clamp<int64_t>(json::IntOr(j, "candidates", 0), 0, INT32_MAX));
  if (const Json* changes = json::Field(j, "changes"); changes != nullptr) {
    if (!changes->is_array()) return Status::DataLoss(where + ": diff.json's \"changes\" is not an array");
    for (const Json& c : *changes) {
      Result<MemoryAction> action = ParseMemoryAction(json::StringOr(c, "action"));
      if (!action.ok()) return Status::DataLoss(where + ": diff.json: " + action.status().message());
      diff.changes.push_back({*action, json::StringOr(c, "uri"), json::StringOr(c, "reason")});
    }
  }
  return diff;
}

Result<CommitDiff> MemoryPipeline::ProcessArchive(std::string_view session, int archive, const Canceller* cancel) {
  CancelScope scope(cancel);
  STRATA_ASSIGN_OR_RETURN(SessionInfo info, sessions_.Get(session));
  STRATA_ASSIGN_OR_RETURN(std::vector<ArchiveInfo> archives, sessions_.Archives(session));
  auto it = std::find_if(archives.begin(), archives.end(), [&](const ArchiveInfo& a) { return a.number == archive; });
  if (it == archives.end())
    return Status::NotFound("session " + info.id + " has no archive " + std::to_string(archive));
  ArchiveInfo a = *it;
  if (a.state == ArchiveState::kDone) return ReadCommitDiff(sessions_, session, archive);
  // Phase 2's resumable work lives beside the archive (Sessions::ReadArchiveFile).
  const std::string where = "session " + info.id + " archive " + std::to_string(archive) + " ";
  auto read_file = [&](std::string_view name) { return sessions_.ReadArchiveFile(session, archive, name); };
  auto write_file = [&](std::string_view name, std::string_view content) {
    return sessions_.WriteArchiveFile(session, archive, name, content);
  };
  CommitDiff diff;
  diff.session = info.id;
  diff.archive = archive;
  STRATA_ASSIGN_OR_RETURN(std::vector<Message> messages, sessions_.ArchiveMessages(session, archive));
  std::string transcript = Transcript(messages);
  std::vector<std::string> contexts = ContextUris(messages);
  STRATA_ASSIGN_OR_RETURN(Uri archive_uri,
                          Uri::Parse("strata://session/" + info.id + "/history/" + ArchiveName(archive)));
  // A session deleted (or deleted and begun again on its id) while phase 2 ran: nothing more is written
  // under its scope or remembered from it.
  auto same_session = [&]() -> Status {
    Result<SessionInfo> now = sessions_.Get(session);
    if (now.ok() && SessionRef(*now) == SessionRef(info)) return Status::Ok();
    if (!now.ok() && now.status().code() != StatusCode::kNotFound) return now.status();
    return Status::NotFound("session " + info.id + " was deleted while phase 2 ran; nothing more is remembered from it");
  };

  // 1. Summary.
  std::string summary;
  if (a.state == ArchiveState::kArchived || a.state == ArchiveState::kFailed) {
    STRATA_ASSIGN_OR_RETURN(std::optional<std::string> done, read_file("summary.md"));
    if (done) {
      summary = *done;
    } else {
      STRATA_ASSIGN_OR_RETURN(summary, Summarize(info.id, archive, transcript));
      STRATA_RETURN_IF_ERROR(write_file("summary.md", summary));
    }
    memory::WriteOptions w{.abstract_text = FirstLine(summary),
                           .overview = summary,
                           .type = memory::ContextType::kResource,
                           .category = "session_archive"};
    // Nothing is written under the scope of a session deleted since phase 2 began: a new session given its
    // id must find that scope empty (Engine::CreateSession also clears what a race left there).
    STRATA_RETURN_IF_ERROR(same_session());
    // A session's archives are a sequence (its conversation in order): neighbours are evidence there.
    STRATA_RETURN_IF_ERROR(store_.Mkdir(archive_uri.Parent(), {.metadata = std::string(memory::kOrderedMetadata)}));
    STRATA_RETURN_IF_ERROR(store_.Write(archive_uri, transcript, w));
    // The write embeds before it takes the store's lock (seconds with a remote embedder): a session deleted
    // and begun again on its id meanwhile, maybe by another user, must not find this transcript in its scope.
    if (Status still = same_session(); !still.ok()) {
      TakeBackArchive(store_, archive_uri, transcript);
      return still;
    }
    STRATA_RETURN_IF_ERROR(sessions_.SetArchiveState(session, archive, ArchiveState::kSummarized, ""));
  } else {
    STRATA_ASSIGN_OR_RETURN(std::optional<std::string> saved_summary, read_file("summary.md"));
    if (!saved_summary) return Status::DataLoss(where + "is past its summary, but summary.md is missing");
    summary = std::move(*saved_summary);
  }
  diff.summary = summary;

  // 2. Extraction.
  std::vector<Candidate> candidates;
  STRATA_ASSIGN_OR_RETURN(std::optional<std::string> saved, read_file("candidates.json"));
  if (saved) {
    Json j = strata::json::ParseOrDiscard<Json>(*saved);
    if (!j.is_array()) return Status::DataLoss(where + "candidates.json: not a JSON array of candidates");
    for (size_t i = 0; i < j.size(); ++i) {
      const Json& m = j[i];
      std::string at = where + "candidates.json[" + std::to_string(i) + "]";
      if (!m.is_object()) return Status::DataLoss(at + ": not an object");
      Candidate c;
      for (auto [key, slot] : {std::pair{"category", &c.category}, std::pair{"key", &c.key},
                               std::pair{"abstract", &c.abstract_text}, std::pair{"overview", &c.overview},
                               std::pair{"content", &c.content}}) {
        Result<std::string> v = json::OptionalString(m, key, at);
        if (!v.ok()) return Status::DataLoss(v.status().message());
        *slot = std::move(*v);
      }
      // The place is the category's for this session's owner, as extraction decided it: a file edited or
      // damaged on disk must not send memories into another owner's scope (or to a place no memory can be).
      Result<std::pair<Uri, bool>> place = CandidatePlace(options_.categories, c.category, info, at);
      if (!place.ok()) return Status::DataLoss(place.status().message());
      std::tie(c.dir, c.merge) = *place;
      if (std::string saved_dir = json::StringOr(m, "dir"); saved_dir != c.dir.str()) {
        return Status::DataLoss(at + ".dir is " + json::QuoteForError(saved_dir, 120) + ", but category \"" + c.category +
                                "\" of this session goes to " + c.dir.str());
      }
      candidates.push_back(std::move(c));
    }
  } else {
    std::string error;
    Result<std::vector<Candidate>> extracted = Extract(transcript, summary, info, &error);
    if (!extracted.ok()) {
      if (extracted.status().code() == StatusCode::kCancelled) return extracted.status();
      (void)sessions_.SetArchiveState(session, archive, ArchiveState::kFailed, extracted.status().message());
      return extracted.status();
    }
    candidates = std::move(*extracted);
    if (!error.empty()) {
      STRATA_RETURN_IF_ERROR(sessions_.AddArchiveNote(
          session, archive, "extraction: the model's first reply could not be used (" + error + "); it was asked again"));
    }
    Json j = Json::array();
    for (const Candidate& c : candidates) {
      j.push_back({{"category", c.category},
                   {"key", c.key},
                   {"abstract", c.abstract_text},
                   {"overview", c.overview},
                   {"content", c.content},
                   {"merge", c.merge},
                   {"dir", c.dir.str()}});
    }
    STRATA_RETURN_IF_ERROR(write_file("candidates.json", j.dump(2)));
    STRATA_RETURN_IF_ERROR(sessions_.SetArchiveState(session, archive, ArchiveState::kExtracted, ""));
  }
  diff.candidates = static_cast<int>(candidates.size());

  // 3. Dedup and apply, in order; the audit log makes each step replayable. While a candidate is decided
  // and applied, the owners' memories are held against other sessions' phase 2, remember and
  // consolidation (on other instances too). The source names this incarnation of the session.
  std::vector<std::string> owners;
  if (!info.user.empty()) owners.push_back("user/" + info.user);
  if (!info.agent.empty()) owners.push_back("agent/" + info.agent);
  std::vector<std::string> links = {archive_uri.str()};
  links.insert(links.end(), contexts.begin(), contexts.end());
  // A session deleted (or deleted and begun again on its id) while the model decided a candidate leaves no
  // memory: its delete returned before this worker's next lease renewal would have noticed (same_session).
  for (size_t i = 0; i < candidates.size(); ++i) {
    std::string source = SessionRef(info) + "#" + std::to_string(archive) + "#" + std::to_string(i);
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<OwnerLocks::Held> held, LockOwners(owners));
    // The decision is written only while the owners are still held (a lock lost with its connection lets
    // another instance decide against the same memories), and the session is still the one it came from.
    auto still_wanted = [&]() -> Status {
      STRATA_RETURN_IF_ERROR(held->Verify());
      return same_session();
    };
    STRATA_ASSIGN_OR_RETURN(std::vector<MemoryChange> changes, Apply(candidates[i], source, links, still_wanted));
    diff.changes.insert(diff.changes.end(), changes.begin(), changes.end());
  }
  // The directories that changed describe their current memories in their L1 (which is what the
  // hierarchical search scores a directory by).
  std::set<std::string> touched;
  for (const MemoryChange& c : diff.changes) {
    if (c.action != MemoryAction::kSkip) touched.insert(Uri::Parse(c.uri)->Parent().str());
  }
  if (!touched.empty()) {
    // Under the owners' locks: another worker's refresh of the same directory, reading its list before this
    // archive's memories and writing after, left them out of the listing.
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<OwnerLocks::Held> held, LockOwners(owners));
    for (const std::string& dir : touched) STRATA_RETURN_IF_ERROR(RefreshDirectory(*Uri::Parse(dir)));
  }
  STRATA_RETURN_IF_ERROR(write_file("diff.json", diff.ToJson()));
  // Counted before "done" is written: a crash in between counts again on the redo (an overcount of one
  // archive's memories in a statistic, never a lost memory).
  int64_t extracted = std::count_if(diff.changes.begin(), diff.changes.end(),
                                    [](const MemoryChange& c) {
                                      return c.applied && (c.action == MemoryAction::kCreate || c.action == MemoryAction::kMerge);
                                    });
  STRATA_RETURN_IF_ERROR(sessions_.RecordExtracted(session, extracted));
  STRATA_RETURN_IF_ERROR(sessions_.SetArchiveState(session, archive, ArchiveState::kDone, ""));
  return diff;
}

Result<int> MemoryPipeline::RunPending(JobQueue& queue, int max_jobs, const Canceller* cancel) {
  int succeeded = 0;
  for (int i = 0; i < max_jobs; ++i) {
    if (cancel != nullptr && cancel->cancelled()) return Status::Cancelled("phase 2 cancelled");
    STRATA_ASSIGN_OR_RETURN(std::optional<Job> job, queue.Claim());
    if (!job) break;
    Result<bool> done = RunJob(queue, *job, cancel);
    if (!done.ok()) return done.status();
    if (*done) ++succeeded;
  }
  return succeeded;
}

Result<int> MemoryPipeline::RunPendingOf(JobQueue& queue, std::string_view key, int64_t through,
                                         const Canceller* cancel) {
  int succeeded = 0;
  while (true) {
    if (cancel != nullptr && cancel->cancelled()) return Status::Cancelled("phase 2 cancelled");
    STRATA_ASSIGN_OR_RETURN(std::optional<Job> job, queue.ClaimOf(key));
    if (!job) break;
    Result<bool> done = RunJob(queue, *job, cancel);
    if (!done.ok()) return done.status();
    if (*done) ++succeeded;
    if (job->id >= through) break;
  }
  return succeeded;
}

namespace {

// Renews a claimed job's lease every third of it while the job's work runs (the worker is alive and the
// work goes on); cancels `lost` once the claim is gone, so the work stops.
class LeaseKeeper {
 public:
  LeaseKeeper(JobQueue& queue, const Job& job, Canceller* lost) {
    int64_t lease_ms = std::max<int64_t>(job.lease_until_ms - job.updated_ms, 3);
    auto every = std::chrono::milliseconds(lease_ms / 3);
    thread_ = std::thread([this, &queue, job, lost, every] {
      while (!stop_.SleepFor(every)) {
        Status renewed = queue.Renew(job);
        if (renewed.code() == StatusCode::kAborted) {
          lost->Cancel();
          return;
        }
        // Another failure (the database is unreachable a moment): the next renewal tries again, well
        // within the lease.
      }
    });
  }
  ~LeaseKeeper() {
    stop_.Cancel();
    thread_.join();
  }
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

 private:
  Canceller stop_;
  std::thread thread_;
};

// A job's work that stopped because its worker was told to stop (a shutdown), not because its claim was lost
// or the work failed.
bool ShuttingDown(const Status& s, const Canceller* cancel) {
  return s.code() == StatusCode::kCancelled && cancel != nullptr && cancel->cancelled();
}

}  // namespace

Result<bool> MemoryPipeline::RunJob(JobQueue& queue, const Job& job, const Canceller* cancel) {
  // A claim this worker lost (kAborted) ends the job's turn here: whoever holds the job now decides.
  auto settle = [](Status s) -> Result<bool> {
    if (s.ok()) return true;
    if (s.code() == StatusCode::kAborted) return false;
    return s;
  };
  if (job.kind != kCommitJobKind) {
    auto handler = options_.job_handlers.find(job.kind);
    if (handler == options_.job_handlers.end()) {
      STRATA_ASSIGN_OR_RETURN(bool settled, settle(queue.Fail(job, Status::InvalidArgument("no worker runs jobs of kind " + job.kind), false)));
      (void)settled;
      return false;
    }
    Canceller job_cancel;
    ScopedCancelCallback forward(cancel, [&job_cancel] { job_cancel.Cancel(); });
    Status done = Status::Internal("not run");
    {
      LeaseKeeper keeper(queue, job, &job_cancel);
      try {
        done = handler->second(job, &job_cancel);
      } catch (const std::exception& e) {  // A bug; the job must not stay running for ever.
        done = Status::Internal(std::string(job.kind) + " failed unexpectedly: " + e.what());
      }
    }
    if (done.ok()) return settle(queue.Complete(job));
    if (ShuttingDown(done, cancel)) {
      STRATA_ASSIGN_OR_RETURN(bool released, settle(queue.Release(job, done)));
      (void)released;
      return done;
    }
    StatusCode code = done.code();
    bool permanent = code == StatusCode::kNotFound || code == StatusCode::kDataLoss ||
                     code == StatusCode::kFailedPrecondition || code == StatusCode::kInternal;
    STRATA_ASSIGN_OR_RETURN(bool still_held, settle(queue.Fail(job, done, !permanent)));
    (void)still_held;
    return false;
  }
  Json payload = strata::json::ParseOrDiscard<Json>(job.payload);
  int64_t archive = json::IntOr(payload, "archive", -1);
  std::string session = SessionIdOfRef(job.key);
  if (session.empty() || archive < 0 || archive > (1 << 30)) {
    STRATA_ASSIGN_OR_RETURN(bool settled, settle(queue.Fail(job, Status::InvalidArgument("not a session commit job"), false)));
    (void)settled;
    return false;
  }
  // The job belongs to one incarnation of its session (its key is the session's reference): a deleted
  // session, or a new one given the same id since, has nothing to do with it.
  // (A session that cannot be read is left to ProcessArchive, which fails the job naming the damage.)
  Result<SessionInfo> owner = sessions_.Get(session);
  bool gone = owner.ok() ? !RefersTo(job.key, *owner) : owner.status().code() == StatusCode::kNotFound;
  if (gone) {
    STRATA_RETURN_IF_ERROR(queue.RemoveKey(job.key));
    return false;
  }
  Canceller job_cancel;  // The caller's cancel, or a lost claim.
  ScopedCancelCallback forward(cancel, [&job_cancel] { job_cancel.Cancel(); });
  Result<CommitDiff> diff = Status::Internal("not run");
  {
    LeaseKeeper keeper(queue, job, &job_cancel);
    try {
      diff = ProcessArchive(job.key, static_cast<int>(archive), &job_cancel);
    } catch (const std::exception& e) {  // A bug; the job must not stay running for ever.
      diff = Status::Internal(std::string("phase 2 failed unexpectedly: ") + e.what());
    }
  }
  if (diff.ok()) return settle(queue.Complete(job));
  if (ShuttingDown(diff.status(), cancel)) {  // Resumes where it stopped at the next start, no attempt spent.
    STRATA_ASSIGN_OR_RETURN(bool released, settle(queue.Release(job, diff.status())));
    (void)released;
    return diff.status();
  }
  // Bad or missing input cannot get better by waiting, nor can a model that refuses the request for good
  // (HTTP 401/403 are kFailedPrecondition); model and parse failures may.
  StatusCode code = diff.status().code();
  bool permanent = code == StatusCode::kNotFound || code == StatusCode::kDataLoss ||
                   code == StatusCode::kFailedPrecondition || code == StatusCode::kInternal;
  STRATA_ASSIGN_OR_RETURN(bool still_held, settle(queue.Fail(job, diff.status(), !permanent)));
  if (!still_held) return false;  // Removed with its session, or another worker has it now.
  STRATA_ASSIGN_OR_RETURN(std::optional<Job> after, queue.Get(job.id));
  if (after && after->state == JobState::kDead) {
    // Recorded once, with the reason; the archive waits for an explicit retry instead of being queued on
    // every open. (It may be gone: that is why the job failed.)
    (void)sessions_.SetArchiveState(job.key, static_cast<int>(archive), ArchiveState::kFailed, diff.status().message());
  }
  return false;
}

Result<std::vector<MemoryChange>> MemoryPipeline::Remember(std::string_view scope, std::string_view text,
                                                           std::string_view category, const Canceller* cancel) {
  CancelScope cancel_scope(cancel);
  STRATA_ASSIGN_OR_RETURN(Uri scope_uri, Uri::Parse(scope));
  std::string kind(scope_uri.kind());
  if ((kind != "user" && kind != "agent") || !scope_uri.is_scope_root()) {
    return Status::InvalidArgument("remember: '" + std::string(scope) +
                                   "' is not a user or agent scope (strata://user/<id> or strata://agent/<id>)");
  }
  if (FirstLine(text).empty()) return Status::InvalidArgument("remember: the text is empty");
  SessionInfo who;
  who.id = "remember";
  (kind == "user" ? who.user : who.agent) = std::string(scope_uri.scope_id());
  std::vector<Candidate> candidates;
  if (category.empty()) {
    std::string error;
    STRATA_ASSIGN_OR_RETURN(candidates, Extract("[user] " + std::string(text), "", who, &error));
    if (candidates.empty()) {
      return Status::FailedPrecondition(
          "the model found nothing to remember in that text; pass a category to store "
          "it anyway");
    }
  } else {
    auto spec = std::find_if(options_.categories.begin(), options_.categories.end(),
                             [&](const CategorySpec& s) { return s.name == category && OwnerName(s.owner) == kind; });
    if (spec == options_.categories.end()) {
      return Status::InvalidArgument("remember: '" + std::string(category) + "' is not a " + kind + " category");
    }
    Candidate c;
    c.category = spec->name;
    c.abstract_text = FirstLine(text);
    c.content = std::string(text);
    c.key = c.abstract_text;
    c.merge = spec->merge;
    c.dir = *Uri::Parse("strata://" + kind + "/" + std::string(scope_uri.scope_id()) + "/memories/" + spec->name);
    candidates.push_back(std::move(c));
  }
  std::vector<MemoryChange> out;
  // The source names this call alone: a time plus a random token, since two calls in one millisecond (or on
  // two instances) must not share one, or the second would be taken for a replay of the first and dropped.
  const std::string call = std::to_string(NowMs()) + "-" + internal::NewIncarnation();
  for (size_t i = 0; i < candidates.size(); ++i) {
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<OwnerLocks::Held> held,
                            LockOwners({kind + "/" + std::string(scope_uri.scope_id())}));
    std::string source = "remember#" + call + "#" + std::to_string(i);
    Result<std::vector<MemoryChange>> changes = Apply(candidates[i], source, {}, [&] { return held->Verify(); });
    if (!changes.ok() && !out.empty()) {
      // Part of the text is remembered already: say what, and not as the failure of a missing model (which
      // Engine::Remember answers by keeping the whole text as written).
      std::string made;
      for (const MemoryChange& c : out) made += (made.empty() ? "" : ", ") + c.uri;
      return Status::Aborted("remember: " + changes.status().message() + " (after " + std::to_string(out.size()) +
                             " change(s) were made: " + made + ")");
    }
    STRATA_RETURN_IF_ERROR(changes.status());
    out.insert(out.end(), changes->begin(), changes->end());
  }
  return out;
}

namespace {
// What an earlier version wrote as `superseded_by` of a memory it set aside while deciding it.
constexpr std::string_view kConsolidating = "consolidation in progress";
}  // namespace

Result<std::vector<MemoryChange>> MemoryPipeline::Consolidate(std::string_view under, const Canceller* cancel) {
  CancelScope cancel_scope(cancel);
  STRATA_ASSIGN_OR_RETURN(Uri root, Uri::Parse(under));
  std::vector<MemoryChange> out;
  int64_t stamp = NowMs();
  const std::string call = std::to_string(stamp) + "-" + internal::NewIncarnation();  // As in Remember.
  int n = 0;
  for (const CategorySpec& spec : options_.categories) {
    // Every category directory at or below `root`.
    STRATA_ASSIGN_OR_RETURN(std::vector<memory::Node> dirs, store_.Glob("**/memories/" + spec.name, root));
    if (root.name() == spec.name && root.Parent().name() == "memories") {
      STRATA_ASSIGN_OR_RETURN(std::optional<memory::Node> self, IfExists(store_.Stat(root)));
      if (self) dirs.push_back(*self);
    }
    for (const memory::Node& dir : dirs) {
      STRATA_ASSIGN_OR_RETURN(std::unique_ptr<OwnerLocks::Held> held,
                              LockOwners({std::string(dir.uri.kind()) + "/" + std::string(dir.uri.scope_id())}));
      STRATA_ASSIGN_OR_RETURN(std::vector<memory::Node> leaves, store_.List(dir.uri));
      for (const memory::Node& leaf : leaves) {
        if (leaf.is_dir) continue;
        // An earlier step may have superseded or removed it.
        STRATA_ASSIGN_OR_RETURN(std::optional<memory::Node> current, IfExists(store_.Stat(leaf.uri)));
        if (!current) continue;
        Json meta = Metadata(current->metadata);
        if (json::StringOr(meta, "superseded_by") == kConsolidating) {
          // Set aside by a consolidation that ended before deciding it (an earlier version hid each memory
          // while deciding it, and an error or a crash left it hidden for good): current again.
          meta.erase("valid_to");
          meta.erase("superseded_by");
          memory::WriteOptions restore;
          restore.metadata = meta.dump();
          STRATA_RETURN_IF_ERROR(store_.Write(leaf.uri, current->content, restore));
        } else if (meta.contains("valid_to")) {
          continue;
        }
        // Decided against the others as if it were new (Apply leaves it out of its own similar ones); nothing
        // is set aside before the decision, so an error or a crash leaves it as it was.
        Candidate c;
        c.category = spec.name;
        c.key = leaf.uri.name();
        c.abstract_text = current->abstract_text;
        c.overview = current->overview;
        c.content = current->content;
        c.dir = dir.uri;
        c.merge = spec.merge;
        c.fixed_uri = leaf.uri;
        std::string source = "consolidate#" + call + "#" + std::to_string(n++);
        STRATA_ASSIGN_OR_RETURN(std::vector<MemoryChange> changes, Apply(c, source, {}, [&] { return held->Verify(); }));
        bool kept = std::any_of(changes.begin(), changes.end(), [&](const MemoryChange& ch) {
          return ch.uri == leaf.uri.str() && (ch.action == MemoryAction::kCreate || ch.action == MemoryAction::kMerge);
        });
        // A merge into another that could not be written (that one changed meanwhile) absorbed nothing.
        kept = kept || std::any_of(changes.begin(), changes.end(), [](const MemoryChange& ch) { return !ch.applied; });
        if (!kept) {
          // Merged into another or skipped as a duplicate: superseded by what absorbed it.
          meta["valid_to"] = stamp;
          meta["superseded_by"] = changes.empty() ? "" : changes[0].uri;
          memory::WriteOptions hide;
          hide.metadata = meta.dump();
          STRATA_RETURN_IF_ERROR(store_.Write(leaf.uri, current->content, hide));
          std::vector<AuditEntry> entry = {{0, leaf.uri.str(), MemoryAction::kSupersede, source, stamp,
                                            changes.empty() ? "" : changes[0].uri, current->content, current->content,
                                            "", "", spec.name}};
          STRATA_RETURN_IF_ERROR(audit_.Record(entry));
          out.push_back({MemoryAction::kSupersede, leaf.uri.str(), json::StringOr(meta, "superseded_by")});
        }
        for (const MemoryChange& ch : changes) {
          if (ch.uri != leaf.uri.str() || ch.action != MemoryAction::kCreate) out.push_back(ch);
        }
      }
    }
  }
  return out;
}

}  // namespace strata::session
