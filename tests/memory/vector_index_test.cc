// The vector index on its own: the batch insert on several threads means what one-at-a-time upserts mean,
// and the distance function chosen for this CPU is the inner product.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>

#include "memory/vector_index.h"
#include "test_util.h"

namespace strata::memory {
namespace {

std::vector<float> RandomUnit(std::mt19937& rng, int dim) {
  std::normal_distribution<float> normal;
  std::vector<float> v(static_cast<size_t>(dim));
  double norm = 0;
  for (float& x : v) {
    x = normal(rng);
    norm += static_cast<double>(x) * x;
  }
  for (float& x : v) x = static_cast<float>(x / std::sqrt(norm));
  return v;
}

float Dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return static_cast<float>(s);
}

// Every distance kernel this CPU runs is 1 − the dot product, for every length (the tails included).
TEST(VectorDistanceTest, EveryKernelIsOneMinusTheDotProduct) {
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> value(-1, 1);
  size_t kernels = 0;
  for (size_t dim = 1; dim <= 100; ++dim) {
    std::vector<float> a(dim), b(dim);
    for (size_t i = 0; i < dim; ++i) a[i] = value(rng), b[i] = value(rng);
    double dot = 0;
    for (size_t i = 0; i < dim; ++i) dot += static_cast<double>(a[i]) * b[i];
    auto by_kernel = DotDistanceByKernel(a.data(), b.data(), dim);
    kernels = std::max(kernels, by_kernel.size());
    for (const auto& [name, distance] : by_kernel) EXPECT_NEAR(distance, 1.0 - dot, 1e-4) << name << ", dim " << dim;
  }
  EXPECT_GE(kernels, 1u);
}

// Concurrent insertion is opt-in (VectorIndexParams::threads): hnswlib 0.6.2 takes element locks in a
// data-dependent order, which ThreadSanitizer reports, so its build checks the one-thread path only.
#if defined(__SANITIZE_THREAD__)
constexpr int kInsertThreads = 1;
#else
constexpr int kInsertThreads = 4;
#endif

// A dimension that is not a multiple of any vector width exercises the tails too.
class VectorIndexTest : public ::testing::TestWithParam<int> {};

TEST_P(VectorIndexTest, BatchOnThreadsMeansWhatUpsertsOneAtATimeMean) {
  const int dim = GetParam();
  std::mt19937 rng(3);
  VectorIndex index({.dim = dim, .m = 12, .ef_construction = 64, .ef_search = 64, .threads = kInsertThreads});
  std::map<int64_t, std::vector<float>> truth;
  // Some ids first one at a time; then batches mixing new ids, ids already held, an id given twice (the
  // last wins) and a removed id coming back.
  for (int64_t id = 0; id < 50; ++id) {
    truth[id] = RandomUnit(rng, dim);
    ASSERT_OK(index.Upsert(id, truth[id].data()));
  }
  index.Remove(7);
  truth.erase(7);
  for (int round = 0; round < 3; ++round) {
    std::vector<int64_t> ids;
    std::vector<float> flat;
    auto add = [&](int64_t id) {
      std::vector<float> v = RandomUnit(rng, dim);
      ids.push_back(id);
      flat.insert(flat.end(), v.begin(), v.end());
      truth[id] = v;
    };
    for (int i = 0; i < 600; ++i) add(1000 * (round + 1) + i);
    add(3);                      // Held already.
    add(7);                      // Removed, back again.
    add(1000 * (round + 1) + 5);  // Twice in one batch.
    ASSERT_OK(index.UpsertBatch(ids, flat.data()));
  }
  EXPECT_EQ(index.size(), truth.size());
  std::vector<float> got(static_cast<size_t>(dim));
  for (const auto& [id, v] : truth) {
    ASSERT_TRUE(index.Get(id, got.data())) << id;
    ASSERT_EQ(got, v) << id;
  }
  // Every vector finds itself first, with similarity equal to its dot product with itself (1); the
  // similarities of the others are their dot products with the query.
  int self_first = 0;
  for (const auto& [id, v] : truth) {
    auto hits = index.Search(v.data(), 5);
    ASSERT_OK(hits);
    ASSERT_FALSE(hits->empty());
    self_first += (*hits)[0].first == id;
    for (const auto& [hit, similarity] : *hits) {
      ASSERT_NEAR(similarity, Dot(v, truth.at(hit)), 1e-4) << id << " -> " << hit;
    }
  }
  EXPECT_GE(self_first, static_cast<int>(truth.size() * 99 / 100));
}

// The graph alone (what PostgreSQL keeps as a snapshot) reads back with its live count, deletions
// included; a graph of another dimension, or bytes that are no graph, are refused.
TEST_P(VectorIndexTest, AGraphSavedAloneLoadsBackAndAnotherDimensionIsRefused) {
  const int dim = GetParam();
  testing::TempDir dir;
  std::mt19937 rng(9);
  VectorIndexParams params{.dim = dim, .m = 8, .ef_construction = 32, .ef_search = 32};
  VectorIndex index(params);
  std::vector<std::vector<float>> vectors;
  for (int64_t id = 0; id < 100; ++id) {
    vectors.push_back(RandomUnit(rng, dim));
    ASSERT_OK(index.Upsert(id, vectors.back().data()));
  }
  for (int64_t id = 0; id < 10; ++id) index.Remove(id);
  const std::string path = dir.File("graph.hnsw");
  ASSERT_OK(index.SaveGraph(path));
  auto loaded = VectorIndex::LoadGraph(path, params);
  ASSERT_OK(loaded);
  EXPECT_EQ((*loaded)->size(), 90u);
  auto hits = (*loaded)->Search(vectors[50].data(), 1);
  ASSERT_OK(hits);
  ASSERT_EQ(hits->size(), 1u);
  EXPECT_EQ((*hits)[0].first, 50);
  std::vector<float> out(static_cast<size_t>(dim));
  EXPECT_FALSE((*loaded)->Get(3, out.data()));  // Removed before the save.
  (*loaded)->Remove(60);
  EXPECT_EQ((*loaded)->size(), 89u);

  VectorIndexParams other = params;
  other.dim = dim + 16;
  EXPECT_EQ(VectorIndex::LoadGraph(path, other).status().code(), StatusCode::kDataLoss);
  testing::WriteFileOrDie(dir.File("junk.hnsw"), "not a graph");
  EXPECT_EQ(VectorIndex::LoadGraph(dir.File("junk.hnsw"), params).status().code(), StatusCode::kDataLoss);
  EXPECT_EQ(VectorIndex::LoadGraph(dir.File("missing.hnsw"), params).status().code(), StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(Dimensions, VectorIndexTest, ::testing::Values(384, 37));

}  // namespace
}  // namespace strata::memory
