// Evidence recall on long real conversations (LoCoMo, docs/PERFORMANCE.md "Retrieval on LoCoMo"), with a
// plain BM25 baseline computed in the same run. Usage:
//   strata_retrieval_bench LOCOMO_DIR [STORE_DIR] [--set name=value ...] [--per-question FILE] [--embedder SPEC]
//                          [--model PROVIDER:MODEL [--assist rewrite|rerank|both|none]] [--pg URL]
// LOCOMO_DIR holds conversation files (*.json, the LoCoMo format: ../shared/benchmarks/locomo-dev/README.md).
// Every turn becomes one leaf, strata://resources/locomo/<file>/session-<N>/turn-<K>, holding
// "<speaker> (<session date>): <text>" and, when a photo was shared, " [shares a photo: <caption>]". Each
// question that has an answer in the conversation (category 1-4) is asked with Find(limit 10, under the
// conversation); recall@k = |evidence among the first k hits| / |evidence|, averaged over questions, overall and
// per category. The baseline scores the same texts with Okapi BM25 (k1 1.2, b 0.75, lowercase [a-z0-9] words,
// no stemming, no stop words), also within the conversation. --set overrides FindOptions fields
// (find_settings.h). --embedder embeds with another embedder than the local one (memory::EmbedderFromSpec, e.g.
// openai:MODEL with STRATA_EMBED_BASE_URL: an embedding service). --model asks through an Engine with that model
// (engine/provider_config.h: the provider's preset base URL and key variable, STRATA_BASE_URL to override;
// scripted:NAME answers from the script file in STRATA_BENCH_SCRIPT, to check the path offline) and
// model help for find (FindAssist; --assist, both by default; none: the Engine's find without help, which must
// equal the store's), once per question, and prints its cost per query. --pg URL writes the conversations to a
// PostgreSQL store at URL (an empty database) instead of a SQLite store in STORE_DIR.
// Prints one JSON object per system, then find latency (each question's fastest of three, in process).
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "find_settings.h"
#include "strata/engine/engine.h"
#include "strata/memory/pg_store.h"
#include "strata/memory/retrieval.h"
#include "strata/memory/sqlite_store.h"

using namespace strata;
using namespace strata::memory;
using strata::Engine;
using strata::EngineOptions;
using Json = nlohmann::json;
using SteadyClock = std::chrono::steady_clock;

namespace {

struct Turn {
  std::string dia_id;
  std::string uri;
  std::string text;
};

struct Question {
  std::string text;
  int category = 0;
  std::vector<std::string> evidence;  // URIs of the turns that hold the answer.
};

struct Conversation {
  std::string name;
  std::string root;  // The directory every turn is under.
  std::vector<Turn> turns;
  std::vector<Question> questions;
};

// Reads one conversation file, checking every field it uses; a malformed file is an error naming the field.
Result<Conversation> LoadConversation(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return Status::NotFound("cannot read " + path.string());
  std::stringstream buf;
  buf << in.rdbuf();
  Json doc = Json::parse(buf.str(), nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return Status::InvalidArgument(path.string() + ": not a JSON object");
  Conversation c;
  c.name = path.stem().string();
  c.root = "strata://resources/locomo/" + c.name;
  std::unordered_map<std::string, std::string> uri_of;
  for (int n = 1;; ++n) {
    std::string key = "session_" + std::to_string(n);
    auto date = doc.find(key + "_date_time");
    if (date == doc.end()) break;
    auto turns = doc.find(key);
    if (turns == doc.end()) continue;  // A date without turns (some files list more dates than sessions).
    if (!turns->is_array() || !date->is_string()) {
      return Status::InvalidArgument(path.string() + ": " + key + " is not a list of turns with a date");
    }
    int k = 0;
    for (const Json& t : *turns) {
      ++k;
      if (!t.is_object() || !t.contains("speaker") || !t["speaker"].is_string() || !t.contains("text") ||
          !t["text"].is_string() || !t.contains("dia_id") || !t["dia_id"].is_string()) {
        return Status::InvalidArgument(path.string() + ": " + key + " turn " + std::to_string(k) +
                                       " lacks a string speaker, text or dia_id");
      }
      Turn turn;
      turn.dia_id = t["dia_id"].get<std::string>();
      turn.uri = c.root + "/session-" + std::to_string(n) + "/turn-" + std::to_string(k);
      turn.text = t["speaker"].get<std::string>() + " (" + date->get<std::string>() + "): " +
                  t["text"].get<std::string>();
      if (t.contains("blip_caption") && t["blip_caption"].is_string()) {
        turn.text += " [shares a photo: " + t["blip_caption"].get<std::string>() + "]";
      }
      uri_of[turn.dia_id] = turn.uri;
      c.turns.push_back(std::move(turn));
    }
  }
  auto qa = doc.find("qa");
  if (qa == doc.end() || !qa->is_array()) return Status::InvalidArgument(path.string() + ": no qa list");
  for (const Json& q : *qa) {
    if (!q.is_object() || !q.contains("question") || !q["question"].is_string() || !q.contains("category") ||
        !q["category"].is_number_integer()) {
      return Status::InvalidArgument(path.string() + ": a qa entry lacks its question or category");
    }
    Question question{q["question"].get<std::string>(), q["category"].get<int>(), {}};
    if (question.category < 1 || question.category > 4) continue;  // 5: adversarial, no answer to find.
    if (q.contains("evidence") && q["evidence"].is_array()) {
      for (const Json& e : q["evidence"]) {
        if (!e.is_string()) continue;
        auto it = uri_of.find(e.get<std::string>());
        if (it != uri_of.end() && std::find(question.evidence.begin(), question.evidence.end(), it->second) ==
                                      question.evidence.end()) {
          question.evidence.push_back(it->second);
        }
      }
    }
    if (!question.evidence.empty()) c.questions.push_back(std::move(question));
  }
  return c;
}

std::vector<std::string> Words(std::string_view text) {
  std::vector<std::string> out;
  std::string w;
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    if (std::isalnum(c) != 0 && c < 0x80) {
      w += static_cast<char>(std::tolower(c));
    } else if (!w.empty()) {
      out.push_back(std::move(w));
      w.clear();
    }
  }
  if (!w.empty()) out.push_back(std::move(w));
  return out;
}

// Okapi BM25 over one conversation's turns (the peer).
class Bm25 {
 public:
  explicit Bm25(const std::vector<Turn>& turns) {
    double total = 0;
    for (const Turn& t : turns) {
      std::unordered_map<std::string, int> tf;
      std::vector<std::string> words = Words(t.text);
      for (const std::string& w : words) ++tf[w];
      for (const auto& [w, n] : tf) ++df_[w];
      lengths_.push_back(static_cast<double>(words.size()));
      total += static_cast<double>(words.size());
      tf_.push_back(std::move(tf));
    }
    avg_ = turns.empty() ? 1 : total / static_cast<double>(turns.size());
  }

  std::vector<size_t> Top(std::string_view query, size_t k) const {
    std::vector<std::string> terms = Words(query);
    std::sort(terms.begin(), terms.end());
    terms.erase(std::unique(terms.begin(), terms.end()), terms.end());
    const double n = static_cast<double>(tf_.size());
    std::vector<std::pair<double, size_t>> scored;
    for (size_t i = 0; i < tf_.size(); ++i) {
      double s = 0;
      for (const std::string& w : terms) {
        auto f = tf_[i].find(w);
        if (f == tf_[i].end()) continue;
        double df = df_.at(w);
        double idf = std::log(1 + (n - df + 0.5) / (df + 0.5));
        double tf = f->second;
        s += idf * tf * (kK1 + 1) / (tf + kK1 * (1 - kB + kB * lengths_[i] / avg_));
      }
      if (s > 0) scored.emplace_back(-s, i);
    }
    std::sort(scored.begin(), scored.end());
    std::vector<size_t> out;
    for (size_t i = 0; i < scored.size() && i < k; ++i) out.push_back(scored[i].second);
    return out;
  }

 private:
  static constexpr double kK1 = 1.2;
  static constexpr double kB = 0.75;
  std::vector<std::unordered_map<std::string, int>> tf_;
  std::unordered_map<std::string, int> df_;
  std::vector<double> lengths_;
  double avg_ = 1;
};

struct Recall {
  std::map<int, std::array<double, 3>> by_category;  // count, recall@5 sum, recall@10 sum

  void Add(int category, const std::vector<std::string>& ranked, const std::vector<std::string>& evidence) {
    double at5 = 0, at10 = 0;
    for (const std::string& e : evidence) {
      auto it = std::find(ranked.begin(), ranked.end(), e);
      if (it == ranked.end()) continue;
      auto rank = it - ranked.begin();
      at5 += rank < 5;
      at10 += rank < 10;
    }
    for (int c : {category, 0}) {
      auto& row = by_category[c];
      row[0] += 1;
      row[1] += at5 / static_cast<double>(evidence.size());
      row[2] += at10 / static_cast<double>(evidence.size());
    }
  }

  std::string ToJson(const char* system) const {
    static const char* kNames[] = {"all", "multi_hop", "temporal", "open_domain", "single_hop"};
    std::string out = std::string("{\"system\": \"") + system + "\"";
    for (const auto& [c, row] : by_category) {
      char buf[160];
      std::snprintf(buf, sizeof buf, ", \"%s\": {\"questions\": %.0f, \"recall@5\": %.3f, \"recall@10\": %.3f}",
                    kNames[c], row[0], row[1] / row[0], row[2] / row[0]);
      out += buf;
    }
    return out + "}";
  }
};

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

int Run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr,
                 "usage: %s LOCOMO_DIR [STORE_DIR] [--set name=value ...] [--per-question FILE] [--embedder SPEC] "
                 "[--model PROVIDER:MODEL [--assist rewrite|rerank|both|none]] [--pg URL]\n",
                 argv[0]);
    return 2;
  }
  std::filesystem::path data = argv[1];
  std::string store_dir = "/tmp/strata-retrieval-bench";
  bool store_dir_given = false;
  std::string per_question_file;
  std::shared_ptr<Embedder> embedder;
  std::string model;
  std::string pg_url;
  FindAssist assist{.rewrite = true, .rerank = true};
  FindOptions options{.limit = 10};
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--set" && i + 1 < argc) {
      Status s = bench::ApplyFindSettings(options, argv[++i]);
      if (!s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 2;
    } else if (arg == "--per-question" && i + 1 < argc) {
      per_question_file = argv[++i];
    } else if (arg == "--embedder" && i + 1 < argc) {
      Result<std::unique_ptr<Embedder>> e = EmbedderFromSpec(argv[++i]);
      if (!e.ok()) return std::fprintf(stderr, "%s\n", e.status().ToString().c_str()), 2;
      embedder = std::move(*e);
    } else if (arg == "--model" && i + 1 < argc) {
      model = argv[++i];
      if (model.find(':') == std::string::npos) return std::fprintf(stderr, "--model: expected PROVIDER:MODEL\n"), 2;
    } else if (arg == "--pg" && i + 1 < argc) {
      pg_url = argv[++i];
    } else if (arg == "--assist" && i + 1 < argc) {
      std::string which = argv[++i];
      if (which != "rewrite" && which != "rerank" && which != "both" && which != "none") {
        return std::fprintf(stderr, "--assist: expected rewrite, rerank, both or none\n"), 2;
      }
      assist.rewrite = which == "rewrite" || which == "both";
      assist.rerank = which == "rerank" || which == "both";
    } else if (arg.starts_with("--") || store_dir_given) {
      // Never taken for the store directory, which is emptied first.
      return std::fprintf(stderr, "unknown or incomplete argument %s (see the usage at the top of retrieval_bench.cc)\n",
                          arg.c_str()),
             2;
    } else {
      store_dir = arg;
      store_dir_given = true;
    }
  }
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(data, ec)) {
    if (entry.path().extension() == ".json") files.push_back(entry.path());
  }
  if (ec || files.empty()) {
    std::fprintf(stderr, "%s: no conversation files (*.json)\n", data.string().c_str());
    return 2;
  }
  std::sort(files.begin(), files.end());
  std::filesystem::remove_all(store_dir);
  // The store alone, or (with --model) an Engine's, asked through the Engine for model help.
  std::unique_ptr<ContextStore> own_store;
  std::unique_ptr<Engine> engine;
  ContextStore* store_ptr = nullptr;
  if (!pg_url.empty() && !model.empty()) return std::fprintf(stderr, "--pg and --model: give one\n"), 2;
  if (model.empty()) {
    auto opened = pg_url.empty() ? OpenSqliteStore(store_dir, {.embedder = embedder, .synchronous_full = false})
                                 : OpenPgStore(pg_url, {.embedder = embedder});
    if (!opened.ok()) return std::fprintf(stderr, "%s\n", opened.status().ToString().c_str()), 1;
    own_store = std::move(*opened);
    store_ptr = own_store.get();
  } else {
    const char* base_url = std::getenv("STRATA_BASE_URL");
    EngineOptions engine_options{.data_dir = store_dir, .embedder_instance = embedder};
    const char* script = std::getenv("STRATA_BENCH_SCRIPT");  // Scripted replies (provider "scripted").
    engine_options.provider = {.provider = model.substr(0, model.find(':')),
                               .model = model.substr(model.find(':') + 1),
                               .base_url = base_url != nullptr ? base_url : "",
                               .script = script != nullptr ? script : ""};
    auto opened = Engine::Open(std::move(engine_options));
    if (!opened.ok()) return std::fprintf(stderr, "%s\n", opened.status().ToString().c_str()), 1;
    engine = std::move(*opened);
    auto engine_store = engine->store();
    if (!engine_store.ok()) return std::fprintf(stderr, "%s\n", engine_store.status().ToString().c_str()), 1;
    store_ptr = *engine_store;
  }
  ContextStore& store = *store_ptr;
  std::vector<Conversation> conversations;
  size_t turns = 0;
  for (const auto& f : files) {
    Result<Conversation> c = LoadConversation(f);
    if (!c.ok()) return std::fprintf(stderr, "%s\n", c.status().ToString().c_str()), 1;
    std::vector<std::pair<Uri, std::string>> leaves;
    std::set<std::string> sessions;
    for (const Turn& t : c->turns) {
      Result<Uri> uri = Uri::Parse(t.uri);
      if (!uri.ok()) return std::fprintf(stderr, "%s\n", uri.status().ToString().c_str()), 1;
      // Each session's turns are a sequence, as a conversation importer marks them (memory/store.h).
      if (sessions.insert(uri->Parent().str()).second) {
        Status s = store.Mkdir(uri->Parent(), {.metadata = std::string(kOrderedMetadata)});
        if (!s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
      }
      leaves.emplace_back(*uri, t.text);
    }
    Status s = store.WriteBatch(leaves, {});
    if (!s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
    turns += c->turns.size();
    conversations.push_back(std::move(*c));
  }
  Recall strata_recall, bm25_recall;
  std::vector<double> times;
  FindModelCost cost;             // Summed over the questions (--model).
  std::vector<double> model_ms;   // Per question.
  int model_errors = 0;
  std::string last_error;
  std::ofstream per_question;
  if (!per_question_file.empty()) per_question.open(per_question_file);
  for (const Conversation& c : conversations) {
    Bm25 bm25(c.turns);
    options.under = *Uri::Parse(c.root);
    for (const Question& q : c.questions) {
      // Each question is asked three times and its fastest time kept: this machine's scheduler noise is
      // larger than the differences worth seeing (recall comes from the first answer; all three are equal).
      Result<std::vector<Hit>> hits = Status::Internal("not run");
      double fastest = 1e18;
      if (engine != nullptr) {  // Once: each ask costs model calls.
        auto t0 = SteadyClock::now();
        FindRequest request{.query = q.text, .under = c.root, .limit = options.limit, .tuning = options, .assist = assist};
        Result<FindResult> found = engine->Find(request);
        fastest = Ms(SteadyClock::now() - t0);
        if (!found.ok()) return std::fprintf(stderr, "%s\n", found.status().ToString().c_str()), 1;
        if (found->model) {
          cost.calls += found->model->calls;
          cost.input_tokens += found->model->input_tokens;
          cost.output_tokens += found->model->output_tokens;
          model_ms.push_back(found->model->ms);
          if (!found->model->error.empty()) ++model_errors, last_error = found->model->error;
        }
        hits = std::move(found->hits);
      }
      for (int attempt = 0; engine == nullptr && attempt < 3; ++attempt) {
        auto t0 = SteadyClock::now();
        Result<std::vector<Hit>> again = Find(store, q.text, options);
        fastest = std::min(fastest, Ms(SteadyClock::now() - t0));
        if (attempt == 0) hits = std::move(again);
      }
      times.push_back(fastest);
      if (!hits.ok()) return std::fprintf(stderr, "%s\n", hits.status().ToString().c_str()), 1;
      std::vector<std::string> ranked;
      for (const Hit& h : *hits) ranked.push_back(h.uri.str());
      strata_recall.Add(q.category, ranked, q.evidence);
      std::vector<std::string> peer;
      for (size_t i : bm25.Top(q.text, 10)) peer.push_back(c.turns[i].uri);
      bm25_recall.Add(q.category, peer, q.evidence);
      if (per_question.is_open()) {
        Json line = {{"conversation", c.name}, {"question", q.text},   {"category", q.category},
                     {"evidence", q.evidence}, {"strata", ranked},     {"bm25", peer}};
        std::vector<std::string> reasons;
        std::vector<double> scores;
        for (const Hit& h : *hits) reasons.push_back(h.reason), scores.push_back(h.score);
        line["reasons"] = reasons;
        line["scores"] = scores;
        line["find_ms"] = fastest;
        per_question << line.dump() << '\n';
      }
    }
  }
  std::sort(times.begin(), times.end());
  std::printf("%s\n%s\n", strata_recall.ToJson("strata").c_str(), bm25_recall.ToJson("bm25").c_str());
  std::printf("{\"conversations\": %zu, \"turns\": %zu, \"questions\": %zu, \"find_p50_ms\": %.2f, \"find_p99_ms\": %.2f}\n",
              conversations.size(), turns, times.size(), times[times.size() / 2],
              times[std::min(times.size() - 1, times.size() * 99 / 100)]);
  if (engine != nullptr) {
    std::sort(model_ms.begin(), model_ms.end());
    const double n = static_cast<double>(times.size());
    Json line = {{"model", model},
                 {"rewrite", assist.rewrite},
                 {"rerank", assist.rerank},
                 {"calls_per_query", cost.calls / n},
                 {"input_tokens_per_query", static_cast<double>(cost.input_tokens) / n},
                 {"output_tokens_per_query", static_cast<double>(cost.output_tokens) / n},
                 {"model_ms_p50", model_ms.empty() ? 0.0 : model_ms[model_ms.size() / 2]},
                 {"queries_without_help", model_errors}};
    if (!last_error.empty()) line["last_error"] = last_error;
    std::printf("%s\n", line.dump(-1, ' ', false, Json::error_handler_t::replace).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return Run(argc, argv); }
