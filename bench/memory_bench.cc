// Context-store figures: ingestion rate, find latency (p50/p99), vector index
// rebuild time, and recall@5/@10 on a labelled synthetic set. Usage:
// strata_memory_bench N [DIR]. Prints one JSON object.
//
// The corpus: N leaves in 100 topic directories (each with an abstract naming
// its topic). A leaf holds 3 of its topic's 8 words and 30 filler words from a
// 5000-word vocabulary. Every 50th leaf is a labelled fact with a unique word.
// A query names a fact by its unique word *misspelled* (last two letters
// swapped) plus two topic words: the full-text index cannot match the
// misspelling, so a hit needs the vector side (character trigrams) or the topic
// directory — the labelled answer is exactly one leaf.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "strata/memory/retrieval.h"
#include "strata/memory/sqlite_store.h"

using namespace strata;
using namespace strata::memory;
using SteadyClock = std::chrono::steady_clock;

namespace {

std::string Word(std::mt19937 &rng, const char *prefix, int n) {
  return prefix + std::to_string(rng() % static_cast<unsigned>(n));
}

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 10000;
  std::string dir = argc > 2 ? argv[2] : "/tmp/strata-memory-bench";
  std::filesystem::remove_all(dir);
  std::mt19937 rng(42);
  const int topics = 100;
  auto topic_word = [](int t, int k) {
    static const char *kSyll[] = {"ka", "lo", "mi", "ne", "ru", "sa", "to", "vi", "ze", "po"};
    return std::string(kSyll[t % 10]) + kSyll[(t / 10) % 10] + kSyll[k % 10] + "ium";
  };
  struct Fact {
    std::string uri, unique;
    int topic;
  };
  std::vector<Fact> facts;
  std::vector<std::pair<Uri, std::string>> leaves;
  for (int i = 0; i < n; ++i) {
    int t = static_cast<int>(rng() % topics);
    std::string text;
    for (int k = 0; k < 3; ++k) text += topic_word(t, static_cast<int>(rng() % 8)) + " ";
    for (int k = 0; k < 30; ++k) text += Word(rng, "w", 5000) + " ";
    std::string uri = "strata://resources/topic" + std::to_string(t) + "/n" + std::to_string(i);
    if (i % 50 == 0) {
      std::string unique = "q" + std::to_string(i) + "xenolith";
      text += unique;
      facts.push_back({uri, unique, t});
    }
    leaves.emplace_back(*Uri::Parse(uri), text);
  }
  auto opened = OpenSqliteStore(dir, {.synchronous_full = false});
  if (!opened.ok()) return std::fprintf(stderr, "%s\n", opened.status().ToString().c_str()), 1;
  auto &store = **opened;
  for (int t = 0; t < topics; ++t) {
    std::string words;
    for (int k = 0; k < 8; ++k) words += topic_word(t, k) + " ";
    (void)store.Mkdir(*Uri::Parse("strata://resources/topic" + std::to_string(t)),
                      {.abstract_text = "Topic " + std::to_string(t) + ": " + words});
  }
  auto start = SteadyClock::now();
  for (size_t i = 0; i < leaves.size(); i += 1000) {
    std::vector<std::pair<Uri, std::string>> batch(
        leaves.begin() + static_cast<std::ptrdiff_t>(i),
        leaves.begin() + static_cast<std::ptrdiff_t>(std::min(leaves.size(), i + 1000)));
    Status s = store.WriteBatch(batch, {});
    if (!s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 1;
  }
  double ingest_ms = Ms(SteadyClock::now() - start);
  (void)store.Flush();

  std::vector<double> latencies;
  int hit5 = 0, hit10 = 0;
  for (const Fact &f : facts) {
    std::string typo = f.unique;
    std::swap(typo[typo.size() - 1], typo[typo.size() - 2]);
    std::string query = typo + " " + topic_word(f.topic, 1) + " " + topic_word(f.topic, 5);
    auto t0 = SteadyClock::now();
    auto hits = Find(store, query, {.limit = 10});
    latencies.push_back(Ms(SteadyClock::now() - t0));
    if (!hits.ok()) return std::fprintf(stderr, "%s\n", hits.status().ToString().c_str()), 1;
    for (size_t k = 0; k < hits->size(); ++k) {
      if ((*hits)[k].uri.str() == f.uri) {
        hit5 += k < 5;
        hit10 += 1;
      }
    }
  }
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double p) {
    return latencies[std::min(latencies.size() - 1, static_cast<size_t>(p * latencies.size()))];
  };
  opened->reset();  // Saves the index; removing it forces the rebuild measured
                    // below.
  std::filesystem::remove(dir + "/vectors.hnsw");
  auto t1 = SteadyClock::now();
  auto reopened = OpenSqliteStore(dir, {.synchronous_full = false});
  double rebuild_ms = Ms(SteadyClock::now() - t1);
  if (!reopened.ok()) return 1;
  std::printf(
      "{\"nodes\": %d, \"ingest_nodes_per_s\": %.0f, \"find_p50_ms\": "
      "%.2f, \"find_p99_ms\": %.2f, "
      "\"rebuild_ms\": %.0f, \"queries\": %zu, \"recall_at_5\": %.3f, "
      "\"recall_at_10\": %.3f}\n",
      n, n / (ingest_ms / 1000), pct(0.5), pct(0.99), rebuild_ms, facts.size(),
      static_cast<double>(hit5) / static_cast<double>(facts.size()),
      static_cast<double>(hit10) / static_cast<double>(facts.size()));
  return 0;
}
