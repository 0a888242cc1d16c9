// The store at scale (issue 31): strata_scale_bench N DIR [--threads T]. Fills a SQLite store at DIR (or a
// PostgreSQL one when DIR is a postgres:// URL of an empty database) with N leaves of the synthetic store corpus (store_corpus.h) in batches of 1000 and prints one JSON object:
//   ingest_nodes_per_s         overall, and the slowest tenth of the run (sustained);
//   rebuild_s                  reopening with the vector index file removed (the index built from the table;
//                              PostgreSQL: a new instance that reads no snapshot), to its first vector search;
//   warm_start_s               PostgreSQL: a new instance's first vector search, from the newest snapshot
//                              (--no-cold: only this one, rebuild_s null);
//   index_recall_at_10         the share of the graph's 10 nearest nodes that are as near as the 10th of an
//                              exact scan of every vector (ties count), over 200 query vectors (the facts'
//                              queries, embedded);
//   find_p50_ms, find_p99_ms   in-process Find (limit 10) of 1000 fact queries (after 100 to warm up), and
//   find_cpu_ms                the process's CPU time (user + system) per query;
//   peak_rss_mb, disk_mb.
// T (default 0: every core) is the vector index's insertion threads; --m, --ef-construction and --ef-search
// set the graph's parameters (the store's defaults otherwise). --reuse keeps a store an earlier run
// filled (the ingest figures are then absent); --find-only reuses its store and index and runs only the
// find loop (for profiling); --sweep-ef A,B,... reuses them and prints recall@10 and find for each ef.
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
#include "strata/memory/pg_store.h"
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
Result<FindFigures> MeasureFind(ContextStore& store, const std::vector<bench::StoreFact>& facts, bool as_user) {
  FindOptions find{.limit = 10};
  // A user's find (Engine::ReachRoots): its own scope and the shared ones, ranked together.
  if (as_user) {
    for (const char* root : {"strata://user/bench", "strata://resources", "strata://agent"}) {
      find.roots.push_back(*Uri::Parse(root));
    }
  }
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
  SearchFilter filter{.current_only = true, .roots = find.roots};
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

// The index's recall@10: the share of its 10 nearest that are as near as the exact scan's 10th (`kth`).
Result<double> IndexRecall(ContextStore& store, const std::vector<Vector>& queries, const std::vector<float>& kth) {
  size_t found = 0, wanted = 0;
  for (size_t q = 0; q < queries.size(); ++q) {
    STRATA_ASSIGN_OR_RETURN(std::vector<ScoredUri> graph, store.VectorNeighbours(queries[q], {}, 10));
    for (const ScoredUri& hit : graph) found += hit.score >= kth[q] - 1e-5f;
    wanted += 10;
  }
  return wanted ? static_cast<double>(found) / wanted : 0.0;
}

// The facts' queries (up to 200, spread over the corpus), for the recall figures.
std::vector<std::string> RecallQueries(const std::vector<bench::StoreFact>& facts) {
  std::vector<std::string> out;
  for (size_t i = 0; i < facts.size() && out.size() < 200; i += std::max<size_t>(1, facts.size() / 200)) {
    out.push_back(bench::StoreCorpus::ExactQuery(facts[i]));
  }
  return out;
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
  bool as_user = false;   // --as-user: find as a user does (its scope and the shared ones as roots).
  bool find_only = false;  // --find-only: an earlier run's store and index, only the find loop (for profiling).
  std::vector<int> sweep;  // --sweep-ef A,B,...: an earlier run's store and index searched with each ef.
  bool no_cold = false;    // --no-cold: PostgreSQL, no instance that builds its index from the table.
  SqliteStoreOptions defaults;
  int m = defaults.hnsw_m, ef_construction = defaults.hnsw_ef_construction, ef_search = defaults.hnsw_ef_search;
  for (int i = 3; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) threads = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--m") == 0 && i + 1 < argc) m = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--ef-construction") == 0 && i + 1 < argc) ef_construction = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--ef-search") == 0 && i + 1 < argc) ef_search = std::atoi(argv[++i]);
    if (std::strcmp(argv[i], "--no-cold") == 0) no_cold = true;
    if (std::strcmp(argv[i], "--as-user") == 0) as_user = true;
    if (std::strcmp(argv[i], "--reuse") == 0) reuse = std::filesystem::exists(dir + "/strata.db");
    if (std::strcmp(argv[i], "--find-only") == 0) find_only = reuse = std::filesystem::exists(dir + "/strata.db");
    if (std::strcmp(argv[i], "--sweep-ef") == 0 && i + 1 < argc) {
      for (const char* p = argv[++i]; *p != 0; p = std::strchr(p, ',') ? std::strchr(p, ',') + 1 : "") {
        sweep.push_back(std::atoi(p));
      }
      reuse = std::filesystem::exists(dir + "/strata.db");
    }
  }
  // DIR postgres://… or postgresql://…: a PostgreSQL store (a new, empty database) instead.
  const bool pg = dir.rfind("postgres", 0) == 0;
  if (pg) reuse = find_only = false, sweep.clear();
  if (!reuse && !pg) std::filesystem::remove_all(dir);
  SqliteStoreOptions options{.synchronous_full = false};
  options.index_threads = threads;
  options.hnsw_m = m;
  options.hnsw_ef_construction = ef_construction;
  options.hnsw_ef_search = ef_search;
  auto open = [&](bool snapshots) -> Result<std::unique_ptr<ContextStore>> {
    if (!pg) return OpenSqliteStore(dir, options);
    return OpenPgStore(dir, {.hnsw_m = m,
                             .hnsw_ef_construction = ef_construction,
                             .hnsw_ef_search = ef_search,
                             .index_threads = threads,
                             .index_snapshots = snapshots});
  };
  auto opened = open(true);
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
    if (pg && i == 0) {
      // The writing instance also searches, as an instance of a fleet serves both: it holds its index from
      // here on (each batch inserted into it, as on SQLite) and saves snapshots of it (every
      // snapshot_every changes, and at Flush), which the new instances below start from.
      auto first = (*opened)->EmbedTexts(std::vector<std::string>{"warm"});
      if (!first.ok()) return Fail(first.status());
      if (auto r = (*opened)->VectorNeighbours((*first)[0], {}, 10); !r.ok()) return Fail(r.status());
    }
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
  if (!sweep.empty()) {
    // The saved index searched with each ef: recall@10 and find against the same exact scan.
    opened->reset();
    std::vector<float> kth;
    std::vector<Vector> queries;
    for (int ef : sweep) {
      options.hnsw_ef_search = ef;
      auto store = OpenSqliteStore(dir, options);
      if (!store.ok()) return Fail(store.status());
      if (kth.empty()) {
        auto embedded = (*store)->EmbedTexts(RecallQueries(facts));
        if (!embedded.ok()) return Fail(embedded.status());
        queries = std::move(*embedded);
        auto exact = ExactKth(dir + "/strata.db", queries, 10);
        if (!exact.ok()) return Fail(exact.status());
        kth = std::move(*exact);
      }
      auto recall = IndexRecall(**store, queries, kth);
      if (!recall.ok()) return Fail(recall.status());
      auto find = MeasureFind(**store, facts, as_user);
      if (!find.ok()) return Fail(find.status());
      std::printf("{\"nodes\": %d, \"ef_search\": %d, \"index_recall_at_10\": %.3f, \"find_p50_ms\": %.2f, "
                  "\"find_p99_ms\": %.2f, \"find_cpu_ms\": %.2f}\n",
                  n, ef, *recall, find->p50_ms, find->p99_ms, find->cpu_ms);
      std::fflush(stdout);
    }
    return 0;
  }
  if (find_only) {
    auto find = MeasureFind(**opened, facts, as_user);
    if (!find.ok()) return Fail(find.status());
    std::printf("{\"nodes\": %d, \"find_p50_ms\": %.2f, \"find_p99_ms\": %.2f, \"find_cpu_ms\": %.2f}\n", n,
                find->p50_ms, find->p99_ms, find->cpu_ms);
    return 0;
  }
  if (Status s = (*opened)->Flush(); !s.ok()) return Fail(s);
  opened->reset();  // Saves the index (SQLite) or its snapshot (PostgreSQL).
  const uint64_t disk = pg ? 0 : DiskBytes(dir);

  // Rebuild: a store opened without its saved index (SQLite: the index file removed; PostgreSQL: a new
  // instance that does not read snapshots) builds it from the table, here on its first vector search.
  std::vector<std::string> warm = {bench::StoreCorpus::ExactQuery(facts[0])};
  auto first_search = [&](bool snapshots) -> Result<std::pair<double, std::unique_ptr<ContextStore>>> {
    auto t0 = SteadyClock::now();
    STRATA_ASSIGN_OR_RETURN(std::unique_ptr<ContextStore> store, open(snapshots));
    STRATA_ASSIGN_OR_RETURN(std::vector<Vector> vectors, store->EmbedTexts(warm));
    STRATA_RETURN_IF_ERROR(store->VectorNeighbours(vectors[0], {}, 10).status());
    return std::make_pair(Seconds(SteadyClock::now() - t0), std::move(store));
  };
  if (!pg) {
    std::filesystem::remove(dir + "/vectors.hnsw");
    std::filesystem::remove(dir + "/vectors.hnsw.meta");
  }
  // (--no-cold, PostgreSQL: only the warm start is measured.)
  auto rebuilt = pg && no_cold ? first_search(true) : first_search(false);
  if (!rebuilt.ok()) return Fail(rebuilt.status());
  const double rebuild_s = pg && no_cold ? -1 : rebuilt->first;
  // PostgreSQL: a new instance's first search with the newest snapshot (the warm start).
  double warm_start_s = -1;
  if (pg) {
    rebuilt->second.reset();
    auto warmed = first_search(true);
    if (!warmed.ok()) return Fail(warmed.status());
    warm_start_s = warmed->first;
    auto stats = warmed->second->GetStats();
    if (!stats.ok()) return Fail(stats.status());
    if (stats->index_snapshot_generation < 0) return Fail(Status::Internal("the new instance found no snapshot"));
    rebuilt = std::move(warmed);
  }
  ContextStore& store = *rebuilt->second;

  // The index's recall@10 against an exact scan.
  // (PostgreSQL builds the same graph from the same vectors: its recall is SQLite's, not measured again.)
  double recall = -1;
  if (!pg) {
    auto query_vectors = store.EmbedTexts(RecallQueries(facts));
    if (!query_vectors.ok()) return Fail(query_vectors.status());
    auto kth = ExactKth(dir + "/strata.db", *query_vectors, 10);
    if (!kth.ok()) return Fail(kth.status());
    auto measured = IndexRecall(store, *query_vectors, *kth);
    if (!measured.ok()) return Fail(measured.status());
    recall = *measured;
  }

  auto find = MeasureFind(store, facts, as_user);
  if (!find.ok()) return Fail(find.status());
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto figure = [](bool known, double v, const char* format) {
    if (!known) return std::string("null");
    char text[64];
    std::snprintf(text, sizeof text, format, v);
    return std::string(text);
  };
  std::printf(
      "{\"backend\": \"%s\", \"nodes\": %d, \"ingest_nodes_per_s\": %s, \"ingest_slowest_tenth_nodes_per_s\": %s, "
      "\"rebuild_s\": %s, \"warm_start_s\": %s, \"index_recall_at_10\": %s, \"find_p50_ms\": %.2f, "
      "\"find_p99_ms\": %.2f, \"find_cpu_ms\": %.2f, \"peak_rss_mb\": %.0f, \"disk_mb\": %s, \"index_threads\": %d, "
      "\"m\": %d, \"ef_construction\": %d, \"ef_search\": %d}\n",
      pg ? "postgresql" : "sqlite", n, figure(!reuse, n / ingest_s, "%.0f").c_str(),
      figure(!reuse, slowest_rate, "%.0f").c_str(), figure(rebuild_s >= 0, rebuild_s, "%.1f").c_str(), figure(pg, warm_start_s, "%.2f").c_str(),
      figure(recall >= 0, recall, "%.3f").c_str(), find->p50_ms,
      find->p99_ms, find->cpu_ms, usage.ru_maxrss / 1024.0, figure(!pg, disk / 1048576.0, "%.0f").c_str(), threads,
      m, ef_construction, ef_search);
  return 0;
}
