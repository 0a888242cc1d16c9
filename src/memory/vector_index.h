// An HNSW index (hnswlib, inner product over unit vectors = cosine) keyed by node id, with a save/load
// format that records the database generation and embedding model it reflects (docs/formats/context-store.md).
// Searches may run concurrently with each other; every change needs the caller to exclude all other calls
// (the store holds its lock exclusively to change the index, shared to search).
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "strata/util/status.h"

namespace strata::memory {

struct VectorIndexParams {
  int dim = 0;
  int m = 16;
  int ef_construction = 100;
  int ef_search = 64;
  // For UpsertBatch: 1 (the default) inserts on the calling thread; more (0: every core) uses hnswlib's
  // concurrent insertion, which is opt-in: it takes element locks in a data-dependent order (TSan reports
  // lock-order inversions inside hnswlib 0.6.2) and draws levels from an unguarded generator.
  int threads = 1;
};

class VectorIndex {
 public:
  explicit VectorIndex(VectorIndexParams params);
  ~VectorIndex();
  VectorIndex(const VectorIndex&) = delete;  // Owns the graph.
  VectorIndex& operator=(const VectorIndex&) = delete;

  // Adds or replaces the vector of `id`.
  Status Upsert(int64_t id, const float* v);
  // Upserts ids[i] with the `params().dim` floats at vectors + i * dim for every i; ids the index does not
  // hold yet are inserted by up to `params().threads` threads at once (see VectorIndexParams::threads).
  Status UpsertBatch(std::span<const int64_t> ids, const float* vectors);
  // Forgets `id` (no-op if absent).
  void Remove(int64_t id);
  // Copies the vector of `id` (params().dim floats) into `out`; false when the index has none.
  bool Get(int64_t id, float* out) const;
  // Returns up to `k` (id, cosine similarity) pairs, best first.
  Result<std::vector<std::pair<int64_t, float>>> Search(const float* query, size_t k) const;
  // Live (not removed) entries.
  size_t size() const { return live_; }
  const VectorIndexParams& params() const { return params_; }

  // Writes `path`.meta: the generation and model the graph at `path` is of, its dimension and live count
  // (via a temporary file and rename). A saver writes the graph with SaveGraph to a file of its own, removes
  // the old meta, renames the graph into place, then writes this: a crash in between leaves no meta, read as
  // missing.
  Status SaveMeta(const std::string& path, int64_t generation, const std::string& model) const;
  // Writes only the graph to `path` (hnswlib's format), and reads such a file back: the PostgreSQL store
  // keeps these in the database as snapshots (docs/formats/postgres.md). LoadGraph is kDataLoss when the
  // file is not a graph of `params.dim` dimensions.
  Status SaveGraph(const std::string& path) const;
  static Result<std::unique_ptr<VectorIndex>> LoadGraph(const std::string& path, VectorIndexParams params);
  // Loads an index saved for exactly `generation` and `model`; kNotFound when missing, kFailedPrecondition
  // when stale, kDataLoss when unreadable.
  static Result<std::unique_ptr<VectorIndex>> Load(const std::string& path, int64_t generation,
                                                   const std::string& model, VectorIndexParams params);
  // The generation an index saved at `path` is of (kNotFound when none is, kDataLoss when its meta is
  // unreadable): a store that logs its vector changes loads an older one and catches up.
  static Result<int64_t> SavedGeneration(const std::string& path);

 private:
  struct Impl;
  VectorIndexParams params_;
  std::unique_ptr<Impl> impl_;
  size_t live_ = 0;
};

// 1 − a·b by each distance kernel this CPU can run ("sse", "avx2", "avx512"), for the tests.
std::vector<std::pair<std::string, float>> DotDistanceByKernel(const float* a, const float* b, size_t dim);

// Vectors gathered for VectorIndex::UpsertBatch and inserted `batch` at a time: rebuilding from a table
// streams its rows through one of these without holding them all.
class VectorBatch {
 public:
  explicit VectorBatch(VectorIndex* index, size_t batch = 1 << 16) : index_(index), batch_(batch) {}
  // Adds the vector of `id` as the index's dimension's floats in native byte order.
  Status AddBytes(int64_t id, std::string_view bytes);
  Status Add(int64_t id, const float* v) {
    return AddBytes(id, {reinterpret_cast<const char*>(v), static_cast<size_t>(index_->params().dim) * sizeof(float)});
  }
  // Inserts what is gathered.
  Status Flush();

 private:
  VectorIndex* index_;
  size_t batch_;
  std::vector<int64_t> ids_;
  std::vector<float> floats_;
};

}  // namespace strata::memory
