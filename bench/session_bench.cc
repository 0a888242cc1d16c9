// Session figures (docs/PERFORMANCE.md, "Sessions"): what a commit costs around the model calls, and how many
// duplicates survive when the same facts are committed again in other words.
//
// The model is a ScriptedProvider answering at once, so the times are Strata's own: archiving, transcript,
// prompt rendering, JSON extraction, embedding, vector search, audit log, store writes and links. It reads
// the facts planted in the conversation ("FACT <n>: <text>") and extracts each as an `events` memory (append:
// a new record per item, so only dedup can prevent duplicates); as the dedup judge it says "skip" exactly
// when one of the memories it is shown carries the same fact tag — the model recognising the same fact.
// Duplicates that survive are therefore the ones the vector pre-filter did not show it.
//
// Usage: strata_session_bench [MESSAGES] [FACTS] [DIR | postgres://URL]   (defaults 200, 40,
// /tmp/strata-session-bench; a PostgreSQL database must hold no sessions; STRATA_BENCH_REUSE=1 keeps a
// directory's store)
// Prints one JSON object.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <string>
#include <vector>

#include "strata/llm/scripted.h"
#include "strata/memory/pg_store.h"
#include "strata/memory/sqlite_store.h"
#include "strata/session/memory_pipeline.h"

using namespace strata;
using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

namespace {

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

// Two phrasings of each fact; the tag [fN] lets the scripted judge recognise the fact, not the words.
std::string Phrase(int n, int variant) {
  static const char* kSubjects[] = {"the Berlin office",   "the data team",     "Project Falcon",  "the mobile app",
                                    "the billing service", "the design review", "the Lisbon trip", "the hiring plan"};
  static const char* kVerbs[] = {"moved to",   "was postponed until", "was approved on",
                                 "shipped on", "was reviewed on",     "started on"};
  std::string subject = kSubjects[n % 8];
  std::string date = std::to_string(1 + n % 28) + " " + (n % 2 ? "March" : "October") + " 2026";
  std::string verb = kVerbs[n % 6];
  if (variant == 0) return subject + " " + verb + " " + date + " [f" + std::to_string(n) + "]";
  return "On " + date + ", " + subject + " " + verb.substr(0, verb.find(' ')) + " (noted again) [f" +
         std::to_string(n) + "]";
}

llm::ScriptedReply Text(std::string text) {
  llm::ScriptedReply r;
  r.parts.push_back(ContentPart(TextPart{std::move(text)}));
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  int n_messages = argc > 1 ? std::atoi(argv[1]) : 200;
  int n_facts = argc > 2 ? std::atoi(argv[2]) : 40;
  std::string dir = argc > 3 ? argv[3] : "/tmp/strata-session-bench";
  const bool pg = dir.rfind("postgres", 0) == 0;
  // STRATA_BENCH_REUSE=1: commit into a store another benchmark filled (the commit cost at that size).
  if (!pg && std::getenv("STRATA_BENCH_REUSE") == nullptr) std::filesystem::remove_all(dir);
  auto queue = pg ? session::OpenPgJobQueue(dir) : session::OpenJobQueue(dir + "/queue.db");
  auto sessions = !queue.ok() ? queue.status()
                  : pg       ? session::OpenPgSessions(dir, {.queue = queue->get()})
                             : session::OpenSessions(dir, {.queue = queue->get()});
  auto store = pg ? memory::OpenPgStore(dir) : memory::OpenSqliteStore(dir, {});
  auto audit = pg ? session::OpenPgAuditLog(dir) : session::OpenAuditLog(dir + "/audit.db");
  if (!queue.ok() || !sessions.ok() || !store.ok() || !audit.ok()) {
    std::fprintf(stderr, "cannot open the data directory %s\n", dir.c_str());
    return 1;
  }
  int model_calls = 0;
  const std::regex fact_line(R"(FACT (\d+): ([^\n]*))");
  const std::regex tag(R"(\[f(\d+)\])");
  llm::ScriptedProvider model("scripted", [&](const llm::ScriptedProvider::Request& req) {
    ++model_calls;
    std::string prompt = req.history.empty() ? "" : req.history[0].ExtractText();
    if (prompt.find("Summarise the conversation") != std::string::npos) return Text("A planning conversation.");
    if (prompt.find("You maintain an agent's long-term memory") != std::string::npos) {
      Json memories = Json::array();
      for (auto it = std::sregex_iterator(prompt.begin(), prompt.end(), fact_line); it != std::sregex_iterator();
           ++it) {
        std::string text = (*it)[2];
        memories.push_back({{"category", "events"}, {"key", "event"}, {"abstract", text}, {"content", text}});
      }
      return Text(Json{{"memories", memories}}.dump());
    }
    // The dedup judge: the candidate's tag against the tags of the memories shown.
    size_t shown_at = prompt.find("Existing memories:");
    std::smatch m;
    std::string head = prompt.substr(0, shown_at);
    std::string candidate_tag = std::regex_search(head, m, tag) ? m[1].str() : "";
    std::string shown = prompt.substr(shown_at);
    int index = 0;
    for (auto it = std::sregex_iterator(shown.begin(), shown.end(), tag); it != std::sregex_iterator(); ++it, ++index) {
      if ((*it)[1].str() == candidate_tag) {
        return Text(R"({"decision": "skip", "reason": "same fact"})");
      }
    }
    return Text(R"({"decision": "create", "reason": "a different fact"})");
  });
  prompt::PromptLibrary prompts({STRATA_SHIPPED_PROMPTS_DIR});
  session::MemoryPipeline pipeline(**sessions, **store, model, prompts, **audit);
  if (!(*sessions)->Create("alice", "helper", "bench").ok()) return 1;

  // Two commits of the same facts, phrased differently; the first also measures the cost.
  double phase1_ms[2] = {}, phase2_ms[2] = {};
  int calls[2] = {};
  for (int round = 0; round < 2; ++round) {
    for (int i = 0; i < n_messages; ++i) {
      std::string text;
      if (i % 2 == 0) {
        int fact = (i / 2) % std::max(1, n_facts);
        text = (i / 2) < n_facts ? "FACT " + std::to_string(fact) + ": " + Phrase(fact, round)
                                 : "Could you check the calendar for next week, turn " + std::to_string(i) + "?";
      } else {
        text = "Sure — I looked at it and updated the notes accordingly (turn " + std::to_string(i) + ").";
      }
      Message m = i % 2 == 0 ? Message::User(text) : Message::Assistant(text);
      if (!(*sessions)->Add("bench", m).ok()) return 1;
    }
    int before = model_calls;
    auto t0 = SteadyClock::now();
    auto ticket = (*sessions)->Commit("bench");
    phase1_ms[round] = Ms(SteadyClock::now() - t0);
    if (!ticket.ok()) return std::fprintf(stderr, "%s\n", ticket.status().ToString().c_str()), 1;
    auto t1 = SteadyClock::now();
    auto ran = pipeline.RunPending(**queue);
    phase2_ms[round] = Ms(SteadyClock::now() - t1);
    if (!ran.ok() || *ran != 1) {
      std::fprintf(stderr, "phase 2 failed: %s\n", ran.ok() ? "no job completed" : ran.status().ToString().c_str());
      return 1;
    }
    calls[round] = model_calls - before;
  }
  // Duplicates: current `events` memories per fact tag beyond the first.
  auto leaves = (*store)->List(*memory::Uri::Parse("strata://user/alice/memories/events"));
  if (!leaves.ok()) return 1;
  std::map<std::string, int> per_fact;
  int records = 0;
  for (const memory::Node& leaf : *leaves) {
    auto node = (*store)->Stat(leaf.uri);
    if (!node.ok() || Json::parse(node->metadata).contains("valid_to")) continue;
    std::smatch m;
    if (std::regex_search(node->content, m, tag)) per_fact[m[1].str()]++;
    ++records;
  }
  int duplicates = records - static_cast<int>(per_fact.size());
  std::printf(
      "{\"messages\": %d, \"facts\": %d, \"phase1_ms\": %.2f, \"phase2_ms\": %.1f, \"phase2_model_calls\": %d, "
      "\"phase2_ms_per_call\": %.2f, \"recommit_phase2_ms\": %.1f, \"recommit_model_calls\": %d, "
      "\"records_after_recommit\": %d, \"distinct_facts\": %zu, \"duplicates\": %d, \"duplicate_rate\": %.3f}\n",
      n_messages, n_facts, phase1_ms[0], phase2_ms[0], calls[0], phase2_ms[0] / std::max(1, calls[0]), phase2_ms[1],
      calls[1], records, per_fact.size(), duplicates, per_fact.empty() ? 0.0 : double(duplicates) / per_fact.size());
  return 0;
}
