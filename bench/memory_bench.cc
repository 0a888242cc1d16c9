// Context-store figures: ingestion rate, find latency (p50/p99), vector index
// rebuild time, and recall@5/@10 on a labelled synthetic set. Usage:
// strata_memory_bench N [DIR | postgres://URL]. Prints one JSON object. On PostgreSQL the database must be
// empty; STRATA_BENCH_QUERIES_ONLY=1 skips the ingest and the recall runs and measures find throughput on a
// database an earlier run filled (several such processes at once: several instances);
// STRATA_BENCH_INGEST_ONLY=1 only fills the store (for the session benchmark at that size).
// On PostgreSQL "rebuild_ms" is a new instance's first vector search: loading the newest index snapshot and
// catching up, or (STRATA_BENCH_NO_SNAPSHOTS=1) building the index from the table.
// STRATA_BENCH_FIND="name=value,..." sets FindOptions for every find (find_settings.h), e.g. to measure what a
// step of Find is worth on this set.
//
// The corpus: N leaves in 100 topic directories (each with an abstract naming
// its topic's 8 words). A leaf holds 3 of its topic's words and 30 filler words
// from a 5000-word vocabulary. Every 50th leaf is a labelled fact that also
// holds two key words made of random syllables, unique to it. Each fact is asked
// for three ways, and the labelled answer is exactly that one leaf:
//   exact — both key words as written, plus a topic word;
//   typo  — both key words with two inner letters swapped, plus two topic words:
//           full text cannot match them, so only the vector side (character
//           trigrams) and the topic directory can;
//   partial — one key word with a suffix added ("-s"), the other left out, plus
//           one topic word.
// Recall is reported per kind and overall.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <atomic>
#include <filesystem>
#include <thread>
#include <random>
#include <string>
#include <vector>

#include "find_settings.h"
#include "store_corpus.h"
#include "strata/memory/retrieval.h"
#include "strata/memory/pg_store.h"
#include "strata/memory/sqlite_store.h"

using namespace strata;
using namespace strata::memory;
using SteadyClock = std::chrono::steady_clock;

namespace {

double Ms(SteadyClock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); }

}  // namespace

int main(int argc, char **argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 10000;
  std::string dir = argc > 2 ? argv[2] : "/tmp/strata-memory-bench";
  const bool pg = dir.rfind("postgres", 0) == 0;
  const bool queries_only = std::getenv("STRATA_BENCH_QUERIES_ONLY") != nullptr;
  // STRATA_BENCH_QUERY_CAP=K: at most K queries per throughput measurement (100k nodes take long).
  const size_t query_cap = std::getenv("STRATA_BENCH_QUERY_CAP") != nullptr
                               ? static_cast<size_t>(std::atol(std::getenv("STRATA_BENCH_QUERY_CAP")))
                               : SIZE_MAX;
  // STRATA_BENCH_FIND="name=value,...": FindOptions for every find (find_settings.h).
  FindOptions find{.limit = 10};
  if (const char *settings = std::getenv("STRATA_BENCH_FIND")) {
    Status s = bench::ApplyFindSettings(find, settings);
    if (!s.ok()) return std::fprintf(stderr, "%s\n", s.ToString().c_str()), 2;
  }
  auto with_fusion = [&](Fusion f) {
    FindOptions o = find;
    o.fusion = f;
    return o;
  };
  if (!pg && !queries_only) std::filesystem::remove_all(dir);
  auto open_store = [&]() -> Result<std::unique_ptr<ContextStore>> {
    // STRATA_BENCH_NO_SNAPSHOTS=1: a new PostgreSQL instance builds its index from the table (as before
    // snapshots existed) instead of loading the newest snapshot.
    if (pg) return OpenPgStore(dir, {.index_snapshots = std::getenv("STRATA_BENCH_NO_SNAPSHOTS") == nullptr});
    return OpenSqliteStore(dir, {.synchronous_full = false});
  };
  std::mt19937 rng(42);
  const int topics = bench::StoreCorpus::kTopics;
  auto topic_word = bench::StoreCorpus::TopicWord;
  using Fact = bench::StoreFact;
  bench::StoreCorpus corpus = bench::StoreCorpus::Make(rng, 0, n);
  std::vector<Fact>& facts = corpus.facts;
  std::vector<std::pair<Uri, std::string>>& leaves = corpus.leaves;
  auto opened = open_store();
  if (!opened.ok()) return std::fprintf(stderr, "%s\n", opened.status().ToString().c_str()), 1;
  auto &store = **opened;
  if (queries_only) {
    std::vector<std::string> mix;
    for (const Fact &f : facts) mix.push_back(f.key1 + " " + f.key2 + " " + topic_word(f.topic, 2));
    auto first0 = SteadyClock::now();
    (void)Find(store, mix[0], find);  // Builds the vector index, or loads PostgreSQL's snapshot of it.
    const double first_find_ms = Ms(SteadyClock::now() - first0);
    auto stats = store.GetStats();
    const int64_t snapshot = stats.ok() ? stats->index_snapshot_generation : -1;
    std::vector<double> times;
    auto t0 = SteadyClock::now();
    for (size_t i = 0; i < std::min(mix.size() * 4, query_cap); ++i) {
      auto q0 = SteadyClock::now();
      if (!Find(store, mix[i % mix.size()], find).ok()) return 1;
      times.push_back(Ms(SteadyClock::now() - q0));
    }
    double qps = static_cast<double>(times.size()) / (Ms(SteadyClock::now() - t0) / 1000);
    std::sort(times.begin(), times.end());
    std::printf("{\"nodes\": %d, \"first_find_ms\": %.0f, \"index_from_snapshot\": %s, \"find_qps\": %.0f, "
                "\"find_p50_ms\": %.2f, \"find_p99_ms\": %.2f}\n",
                n, first_find_ms, snapshot >= 0 ? "true" : "false", qps, times[times.size() / 2],
                times[std::min(times.size() - 1, times.size() * 99 / 100)]);
    return 0;
  }
  for (int t = 0; t < topics; ++t) {
    (void)store.Mkdir(*Uri::Parse(bench::StoreCorpus::TopicUri(t)), {.abstract_text = bench::StoreCorpus::TopicAbstract(t)});
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
  if (std::getenv("STRATA_BENCH_INGEST_ONLY") != nullptr) {  // A store of N nodes for another benchmark.
    std::printf("{\"nodes\": %d, \"ingest_nodes_per_s\": %.0f}\n", n, n / (ingest_ms / 1000));
    return 0;
  }

  auto typo = [](std::string w) {
    std::swap(w[w.size() / 2], w[w.size() / 2 + 1]);
    return w;
  };
  const char *kKinds[] = {"exact", "typo", "partial"};
  const bool verbose = std::getenv("STRATA_BENCH_VERBOSE") != nullptr;  // Lists the misses on stderr.
  // The default fusion (relative score) and reciprocal rank fusion, on the same store and queries.
  const Fusion kFusions[] = {Fusion::kRelativeScore, Fusion::kReciprocalRank};
  std::vector<double> latencies;  // Of the default fusion.
  int hit5[2][3] = {}, hit10[2][3] = {};
  for (int mode = 0; mode < 2; ++mode) {
    for (const Fact &f : facts) {
      std::string queries[3] = {
          f.key1 + " " + f.key2 + " " + topic_word(f.topic, 2),
          typo(f.key1) + " " + typo(f.key2) + " " + topic_word(f.topic, 1) + " " + topic_word(f.topic, 5),
          f.key1 + "s " + topic_word(f.topic, 3),
      };
      for (int kind = 0; kind < 3; ++kind) {
        auto t0 = SteadyClock::now();
        auto hits = Find(store, queries[kind], with_fusion(kFusions[mode]));
        if (mode == 0) latencies.push_back(Ms(SteadyClock::now() - t0));
        if (!hits.ok()) return std::fprintf(stderr, "%s\n", hits.status().ToString().c_str()), 1;
        if (verbose && mode == 0 &&
            std::none_of(hits->begin(), hits->begin() + std::min<size_t>(5, hits->size()),
                         [&](const Hit &h) { return h.uri.str() == f.uri; })) {
          std::fprintf(stderr, "miss (%s): %s -> %s; got %s\n", kKinds[kind], queries[kind].c_str(), f.uri.c_str(),
                       hits->empty() ? "nothing" : (*hits)[0].uri.str().c_str());
        }
        for (size_t k = 0; k < hits->size(); ++k) {
          if ((*hits)[k].uri.str() == f.uri) {
            hit5[mode][kind] += k < 5;
            hit10[mode][kind] += 1;
          }
        }
      }
    }
  }
  std::sort(latencies.begin(), latencies.end());
  auto pct = [&](double p) {
    return latencies[std::min(latencies.size() - 1, static_cast<size_t>(p * latencies.size()))];
  };
  // Throughput of the same queries from 1 and from 2 threads (this machine has 2 cores): reads share the
  // store (each on its own connection), so the second thread should add close to a second core's worth.
  std::vector<std::string> mix;
  for (const Fact &f : facts) mix.push_back(f.key1 + " " + f.key2 + " " + topic_word(f.topic, 2));
  auto throughput = [&](int threads) {
    std::atomic<size_t> next{0};
    auto t0 = SteadyClock::now();
    std::vector<std::thread> pool;
    size_t total = std::min(mix.size() * 4, query_cap);
    for (int t = 0; t < threads; ++t) {
      pool.emplace_back([&] {
        for (size_t i = next++; i < total; i = next++) (void)Find(store, mix[i % mix.size()], find);
      });
    }
    for (auto &th : pool) th.join();
    return static_cast<double>(total) / (Ms(SteadyClock::now() - t0) / 1000);
  };
  double qps1 = throughput(1), qps2 = throughput(2);
  (void)store.Flush();  // SQLite: saves the index file; PostgreSQL: waits for the index snapshot.
  opened->reset();  // Saves the index; removing it forces the rebuild measured
                    // below.
  if (!pg) std::filesystem::remove(dir + "/vectors.hnsw");
  auto t1 = SteadyClock::now();
  auto reopened = open_store();
  if (!reopened.ok()) return 1;
  // PostgreSQL: each instance builds its index from the table on the first vector search.
  if (pg && !Find(**reopened, mix[0], find).ok()) return 1;
  double rebuild_ms = Ms(SteadyClock::now() - t1);
  double q = static_cast<double>(facts.size());
  auto recall = [&](int mode) {
    std::string out;
    char buf[160];
    std::snprintf(buf, sizeof buf, "\"recall_at_5\": %.3f, \"recall_at_10\": %.3f",
                  (hit5[mode][0] + hit5[mode][1] + hit5[mode][2]) / (3 * q),
                  (hit10[mode][0] + hit10[mode][1] + hit10[mode][2]) / (3 * q));
    out += buf;
    for (int kind = 0; kind < 3; ++kind) {
      std::snprintf(buf, sizeof buf, ", \"%s_recall_at_5\": %.3f, \"%s_recall_at_10\": %.3f", kKinds[kind],
                    hit5[mode][kind] / q, kKinds[kind], hit10[mode][kind] / q);
      out += buf;
    }
    return out;
  };
  std::printf(
      "{\"nodes\": %d, \"ingest_nodes_per_s\": %.0f, \"find_p50_ms\": %.2f, \"find_p99_ms\": %.2f, "
      "\"find_qps_1_thread\": %.0f, \"find_qps_2_threads\": %.0f, "
      "\"rebuild_ms\": %.0f, \"queries\": %zu, %s, \"rrf\": {%s}}\n",
      n, n / (ingest_ms / 1000), pct(0.5), pct(0.99), qps1, qps2, rebuild_ms, latencies.size(), recall(0).c_str(),
      recall(1).c_str());
  return 0;
}
