// The store at scale (issue 31): strata_scale_bench N DIR [--threads T]. Fills a SQLite store at DIR with
// N leaves of the synthetic store corpus (store_corpus.h) in batches of 1000 and prints one JSON object:
//   ingest_nodes_per_s         overall, and the slowest tenth of the run (sustained);
//   rebuild_s                  reopening with the vector index file removed (the index built from the table);
//   index_recall_at_10         the share of the graph's 10 nearest nodes that are as near as the 10th of an
//                              exact scan of every vector (ties count), over 200 query vectors (the facts'
//                              queries, embedded);
//   find_p50_ms, find_p99_ms   in-process Find (limit 10) of 1000 fact queries (after 100 to warm up), and
//   find_cpu_ms                the process's CPU time (user + system) per query;
//   peak_rss_mb, disk_mb.
// T (default 0: every core) is the vector index's insertion threads; --m, --ef-construction and --ef-search
// set the graph's parameters (the store's defaults otherwise). --reuse keeps a store an earlier run
// filled (the ingest figures are then absent); --find-only reuses its store and index and runs only the
// find loop (for profiling).
#include <sqlite3.h>
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <queue>
#include <random>
#include <string>
#include <vector>

#include "store_corpus.h"
#include "strata/memory/retrieval.h"
#include "strata/memory/sqlite_store.h"

using namespace strata;
using namespace strata::memory;
using SteadyClock = std::chrono::steady_clock;

namespace {

double Seconds(SteadyClock::duration d) { return std::chrono::duration<double>(d).count(); }

int Fail(const Status& s) {
  std::fprintf(stderr, "%s\n", s.ToString().c_str());
  return 1;
}

// The similarity of the k-th nearest node to each query, by scanning every vector in the database.
Result<std::vector<float>> ExactKth(const std::string& db_path, const std::vector<Vector>& queries, size_t k) {
  sqlite3* db = nullptr;
  if (sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) != SQLITE_OK) {
    sqlite3_close(db);
    return Status::Unavailable("cannot open " + db_path);
  }
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db, "SELECT vec FROM vectors", -1, &s, nullptr);
  std::vector<std::priority_queue<float, std::vector<float>, std::greater<>>> best(queries.size());
  while (s != nullptr && sqlite3_step(s) == SQLITE_ROW) {
    const float* v = static_cast<const float*>(sqlite3_column_blob(s, 0));
    size_t dim = static_cast<size_t>(sqlite3_column_bytes(s, 0)) / sizeof(float);
    for (size_t q = 0; q < queries.size(); ++q) {
      if (queries[q].size() != dim) continue;
      float dot = 0;
      for (size_t i = 0; i < dim; ++i) dot += queries[q][i] * v[i];
      if (best[q].size() < k || dot > best[q].top()) {
        best[q].push(dot);
        if (best[q].size() > k) best[q].pop();
      }
    }
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  std::vector<float> out(queries.size(), -2.0f);
  for (size_t q = 0; q < queries.size(); ++q) {
    if (!best[q].empty()) out[q] = best[q].top();
  }
  return out;
}

struct FindFigures {
  double p50_ms, p99_ms, cpu_ms;  // Wall-clock percentiles; CPU time (user + system) per query.
};

double CpuSeconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_utime.tv_sec + usage.ru_stime.tv_sec + (usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6;
}

// In-process Find (limit 10) of 1000 fact queries, after 100 to warm the caches.
Result<FindFigures> MeasureFind(ContextStore& store, const std::vector<bench::StoreFact>& facts) {
  FindOptions find{.limit = 10};
  for (size_t i = 0; i < 100; ++i) {
    STRATA_RETURN_IF_ERROR(Find(store, bench::StoreCorpus::ExactQuery(facts[(i * 104729) % facts.size()]), find).status());
  }
  std::vector<double> ms;
  const double cpu0 = CpuSeconds();
  for (size_t i = 0; i < 1000; ++i) {
    auto q0 = SteadyClock::now();
    auto hits = Find(store, bench::StoreCorpus::ExactQuery(facts[(i * 7919) % facts.size()]), find);
    if (!hits.ok()) return hits.status();
    ms.push_back(Seconds(SteadyClock::now() - q0) * 1000);
  }
  const double cpu_ms = (CpuSeconds() - cpu0) * 1000 / 1000;
  // The two global lists alone, on the same queries (the rest of a find is the difference).
  SearchFilter filter{.current_only = true};
  double lexical_ms = 0, vector_ms = 0;
  for (size_t i = 0; i < 1000; ++i) {
    std::string query = bench::StoreCorpus::ExactQuery(facts[(i * 7919) % facts.size()]);
    auto q0 = SteadyClock::now();
    STRATA_RETURN_IF_ERROR(store.Lexical(query, filter, find.lexical_candidates).status());
    auto q1 = SteadyClock::now();
    std::vector<std::string> texts = {query};
    STRATA_ASSIGN_OR_RETURN(std::vector<Vector> qv, store.EmbedTexts(texts));
    auto q2 = SteadyClock::now();
    STRATA_RETURN_IF_ERROR(store.VectorNeighbours(qv[0], filter, find.vector_candidates).status());
    lexical_ms += Seconds(q1 - q0);
    vector_ms += Seconds(SteadyClock::now() - q2);
  }
  std::fprintf(stderr, "per find: lexical list %.2f ms, vector list %.2f ms (of %.2f ms)\n", lexical_ms, vector_ms,
               cpu_ms);
  std::sort(ms.begin(), ms.end());
  return FindFigures{ms[ms.size() / 2], ms[ms.size() * 99 / 100], cpu_ms};
}

uint64_t DiskBytes(const std::string& dir) {
  uint64_t total = 0;
  for (const auto& e : std::filesystem::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) total += e.file_size();
  }
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return std::fprintf(stderr, "usage: strata_scale_bench N DIR [--threads T]\n"), 2;
  const int n = std::atoi(argv[1]);
  const std::string dir = argv[2];
  int threads = 0;
  bool reuse = false;
  bool find_only = false;  // --find-only: an earlier run's store and index, only the find loop (for profiling).
  SqliteStoreOptions defaults;
  int m = defaults.hnsw_m, ef_construction = defaults.hnsw_ef_construction, ef_search = defaults.hnsw_ef_search;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--m") == 0 && i + 1 < argc) m = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--ef-construction") == 0 && i + 1 < argc) ef_construction = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--ef-search") == 0 && i + 1 < argc) ef_search = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--reuse") == 0) reuse = std::filesystem::exists(dir + "/strata.db");
    if (std::strcmp(argv[i], "--find-only") == 0) find_only = reuse = std::filesystem::exists(dir + "/strata.db");
  }
  if (!reuse) std::filesystem::remove_all(dir);
  SqliteStoreOptions options{.synchronous_full = false};
  options.index_threads = threads;
  options.hnsw_m = m;
  options.hnsw_ef_construction = ef_construction;
  options.hnsw_ef_search = ef_search;
  auto opened = OpenSqliteStore(dir, options);
  if (!opened.ok()) return Fail(opened.status());
  for (int t = 0; t < bench::StoreCorpus::kTopics && !reuse; ++t) {
    Status s = (*opened)->Mkdir(*Uri::Parse(bench::StoreCorpus::TopicUri(t)),
                                {.abstract_text = bench::StoreCorpus::TopicAbstract(t)});
    if (!s.ok()) return Fail(s);
  }
  // Ingest, timed per tenth of the run.
  std::mt19937 rng(42);
  std::vector<bench::StoreFact> facts;
  const int batch = 1000;
  const int tenth = std::max(batch, n / 10 / batch * batch);
  double slowest_rate = 1e18;
  auto start = SteadyClock::now();
  auto slice_start = start;
  for (int i = 0; i < n; i += batch) {
    bench::StoreCorpus part = bench::StoreCorpus::Make(rng, i, std::min(batch, n - i));
    for (auto& f : part.facts) facts.push_back(std::move(f));
    if (reuse) continue;
    Status s = (*opened)->WriteBatch(part.leaves, {});
    if (!s.ok()) return Fail(s);
    int done = i + static_cast<int>(part.leaves.size());
    if (done % tenth == 0 || done == n) {
      auto now = SteadyClock::now();
      int in_slice = done % tenth == 0 ? tenth : done % tenth;
      slowest_rate = std::min(slowest_rate, in_slice / Seconds(now - slice_start));
      std::fprintf(stderr, "%d nodes, %.0f nodes/s in the last slice\n", done, in_slice / Seconds(now - slice_start));
      slice_start = now;
    }
  }
  const double ingest_s = Seconds(SteadyClock::now() - start);
  if (find_only) {
    auto find = MeasureFind(**opened, facts);
    if (!find.ok()) return Fail(find.status());
    std::printf("{\"nodes\": %d, \"find_p50_ms\": %.2f, \"find_p99_ms\": %.2f, \"find_cpu_ms\": %.2f}\n", n,
                find->p50_ms, find->p99_ms, find->cpu_ms);
    return 0;
  }
  if (Status s = (*opened)->Flush(); !s.ok()) return Fail(s);
  opened->reset();  // Saves the index.
  const uint64_t disk = DiskBytes(dir);

  // Rebuild: the index file removed, the store reopened (it builds the index from the table on open).
  std::filesystem::remove(dir + "/vectors.hnsw");
  std::filesystem::remove(dir + "/vectors.hnsw.meta");
  auto t0 = SteadyClock::now();
  auto reopened = OpenSqliteStore(dir, options);
  if (!reopened.ok()) return Fail(reopened.status());
  ContextStore& store = **reopened;
  std::vector<std::string> warm = {bench::StoreCorpus::ExactQuery(facts[0])};
  auto warm_vectors = store.EmbedTexts(warm);
  if (!warm_vectors.ok()) return Fail(warm_vectors.status());
  if (auto r = store.VectorNeighbours((*warm_vectors)[0], {}, 10); !r.ok()) return Fail(r.status());
  const double rebuild_s = Seconds(SteadyClock::now() - t0);

  // The index's recall@10 against an exact scan.
  std::vector<std::string> query_texts;
  for (size_t i = 0; i < facts.size() && query_texts.size() < 200; i += std::max<size_t>(1, facts.size() / 200)) {
    query_texts.push_back(bench::StoreCorpus::ExactQuery(facts[i]));
  }
  auto query_vectors = store.EmbedTexts(query_texts);
  if (!query_vectors.ok()) return Fail(query_vectors.status());
  auto kth = ExactKth(dir + "/strata.db", *query_vectors, 10);
  if (!kth.ok()) return Fail(kth.status());
  size_t found = 0, wanted = 0;
  for (size_t q = 0; q < query_vectors->size(); ++q) {
    auto graph = store.VectorNeighbours((*query_vectors)[q], {}, 10);
    if (!graph.ok()) return Fail(graph.status());
    for (const ScoredUri& hit : *graph) found += hit.score >= (*kth)[q] - 1e-5f;
    wanted += 10;
  }

  auto find = MeasureFind(store, facts);
  if (!find.ok()) return Fail(find.status());
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  std::printf(
      "{\"nodes\": %d, \"ingest_nodes_per_s\": %s, \"ingest_slowest_tenth_nodes_per_s\": %s, "
      "\"rebuild_s\": %.1f, \"index_recall_at_10\": %.3f, \"find_p50_ms\": %.2f, \"find_p99_ms\": %.2f, "
      "\"find_cpu_ms\": %.2f, "
      "\"peak_rss_mb\": %.0f, \"disk_mb\": %.0f, \"index_threads\": %d, \"m\": %d, \"ef_construction\": %d, "
      "\"ef_search\": %d}\n",
      n, reuse ? "null" : std::to_string(static_cast<int64_t>(n / ingest_s)).c_str(),
      reuse ? "null" : std::to_string(static_cast<int64_t>(slowest_rate)).c_str(), rebuild_s, wanted ? static_cast<double>(found) / wanted : 0.0, find->p50_ms,
      find->p99_ms, find->cpu_ms, usage.ru_maxrss / 1024.0, disk / 1048576.0, threads, m, ef_construction,
      ef_search);
  return 0;
}
