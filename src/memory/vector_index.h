// An HNSW index (hnswlib, inner product over unit vectors = cosine) keyed by node id, with a save/load
// format that records the database generation and embedding model it reflects (docs/formats/context-store.md).
// Not thread-safe: the store serialises calls.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "strata/util/status.h"

namespace strata::memory {

struct VectorIndexParams {
  int dim = 0;
  int m = 16;
  int ef_construction = 100;
  int ef_search = 64;
};

class VectorIndex {
 public:
  explicit VectorIndex(VectorIndexParams params);
  ~VectorIndex();
  VectorIndex(const VectorIndex&) = delete;  // Owns the graph.
  VectorIndex& operator=(const VectorIndex&) = delete;

  // Adds or replaces the vector of `id`.
  Status Upsert(int64_t id, const float* v);
  // Forgets `id` (no-op if absent).
  void Remove(int64_t id);
  // Copies the vector of `id` (params().dim floats) into `out`; false when the index has none.
  bool Get(int64_t id, float* out) const;
  // Returns up to `k` (id, cosine similarity) pairs, best first.
  Result<std::vector<std::pair<int64_t, float>>> Search(const float* query, size_t k) const;
  // Live (not removed) entries.
  size_t size() const { return live_; }
  const VectorIndexParams& params() const { return params_; }

  // Writes the graph to `path` (via a temporary file and rename) and `path`.meta with the generation and
  // model; the meta file is removed first so a crash in between reads as stale.
  Status Save(const std::string& path, int64_t generation, const std::string& model) const;
  // Loads an index saved for exactly `generation` and `model`; kNotFound when missing, kFailedPrecondition
  // when stale, kDataLoss when unreadable.
  static Result<std::unique_ptr<VectorIndex>> Load(const std::string& path, int64_t generation,
                                                   const std::string& model, VectorIndexParams params);

 private:
  struct Impl;
  VectorIndexParams params_;
  std::unique_ptr<Impl> impl_;
  // Search sets the graph's ef before searching: concurrent searches (readers share the store's lock)
  // take turns on the graph.
  mutable std::mutex search_mu_;
  size_t live_ = 0;
};

}  // namespace strata::memory
