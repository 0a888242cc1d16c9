#include "vector_index.h"

#include <cstring>

#include <hnswlib/hnswlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace strata::memory {

struct VectorIndex::Impl {
  explicit Impl(int dim) : space(static_cast<size_t>(dim)) {}
  hnswlib::InnerProductSpace space;
  std::unique_ptr<hnswlib::HierarchicalNSW<float>> graph;
};

VectorIndex::VectorIndex(VectorIndexParams params) : params_(params), impl_(std::make_unique<Impl>(params.dim)) {
  impl_->graph = std::make_unique<hnswlib::HierarchicalNSW<float>>(
      &impl_->space, 1024, static_cast<size_t>(params.m), static_cast<size_t>(params.ef_construction));
  impl_->graph->setEf(static_cast<size_t>(params.ef_search));
}

VectorIndex::~VectorIndex() = default;

Status VectorIndex::Upsert(int64_t id, const float* v) {
  auto& g = *impl_->graph;
  try {
    bool existed = g.label_lookup_.count(static_cast<hnswlib::labeltype>(id)) != 0;
    bool was_deleted = existed && g.isMarkedDeleted(g.label_lookup_[static_cast<hnswlib::labeltype>(id)]);
    // A graph loaded from an empty file has capacity 0, and resizeIndex(0) would free its storage.
    if (!existed && g.cur_element_count >= g.max_elements_) g.resizeIndex(std::max<size_t>(1024, g.max_elements_ * 2));
    g.addPoint(v, static_cast<hnswlib::labeltype>(id));
    if (!existed || was_deleted) ++live_;
  } catch (const std::exception& e) {
    return Status::Internal(std::string("vector index: ") + e.what());
  }
  return Status::Ok();
}

void VectorIndex::Remove(int64_t id) {
  auto& g = *impl_->graph;
  auto it = g.label_lookup_.find(static_cast<hnswlib::labeltype>(id));
  if (it == g.label_lookup_.end() || g.isMarkedDeleted(it->second)) return;
  g.markDelete(static_cast<hnswlib::labeltype>(id));
  --live_;
}

bool VectorIndex::Get(int64_t id, float* out) const {
  auto& g = *impl_->graph;
  auto it = g.label_lookup_.find(static_cast<hnswlib::labeltype>(id));
  if (it == g.label_lookup_.end() || g.isMarkedDeleted(it->second)) return false;
  std::memcpy(out, g.getDataByInternalId(it->second), static_cast<size_t>(params_.dim) * sizeof(float));
  return true;
}

Result<std::vector<std::pair<int64_t, float>>> VectorIndex::Search(const float* query, size_t k) const {
  std::vector<std::pair<int64_t, float>> out;
  if (live_ == 0 || k == 0) return out;
  std::lock_guard lock(search_mu_);
  try {
    auto& g = *impl_->graph;
    g.setEf(std::max(static_cast<size_t>(params_.ef_search), k));
    auto heap = g.searchKnn(query, std::min(k, live_));
    out.resize(heap.size());
    for (size_t i = heap.size(); i-- > 0;) {  // The heap pops the farthest first.
      out[i] = {static_cast<int64_t>(heap.top().second), 1.0f - heap.top().first};
      heap.pop();
    }
  } catch (const std::exception& e) {
    return Status::Internal(std::string("vector index search: ") + e.what());
  }
  return out;
}

Status VectorIndex::Save(const std::string& path, int64_t generation, const std::string& model) const {
  std::error_code ec;
  std::filesystem::remove(path + ".meta", ec);
  try {
    impl_->graph->saveIndex(path + ".tmp");
  } catch (const std::exception& e) {
    return Status::Internal("vector index save " + path + ": " + e.what());
  }
  std::filesystem::rename(path + ".tmp", path, ec);
  if (ec) return Status::Internal("vector index save: rename " + path + ": " + ec.message());
  std::ofstream meta(path + ".meta.tmp", std::ios::trunc);
  meta << "strata-vector-index 1\ngeneration " << generation << "\nmodel " << model << "\ndim " << params_.dim
       << "\nlive " << live_ << "\n";
  meta.close();
  if (!meta) return Status::Internal("vector index save: cannot write " + path + ".meta.tmp");
  std::filesystem::rename(path + ".meta.tmp", path + ".meta", ec);
  if (ec) return Status::Internal("vector index save: rename " + path + ".meta: " + ec.message());
  return Status::Ok();
}

Result<std::unique_ptr<VectorIndex>> VectorIndex::Load(const std::string& path, int64_t generation,
                                                       const std::string& model, VectorIndexParams params) {
  std::ifstream meta(path + ".meta");
  if (!meta || !std::filesystem::exists(path)) return Status::NotFound("vector index " + path + " is missing");
  std::string magic, key, saved_model;
  int version = 0, dim = 0;
  int64_t saved_generation = -1;
  size_t live = 0;
  meta >> magic >> version >> key >> saved_generation >> key >> saved_model >> key >> dim >> key >> live;
  if (!meta || magic != "strata-vector-index" || version != 1) {
    return Status::DataLoss("vector index " + path + ".meta is unreadable");
  }
  if (saved_generation != generation || saved_model != model || dim != params.dim) {
    return Status::FailedPrecondition("vector index " + path + " is stale (generation " +
                                      std::to_string(saved_generation) + ", database at " + std::to_string(generation) +
                                      ")");
  }
  auto index = std::make_unique<VectorIndex>(params);
  try {
    index->impl_->graph = std::make_unique<hnswlib::HierarchicalNSW<float>>(&index->impl_->space, path, false, 0);
    index->impl_->graph->setEf(static_cast<size_t>(params.ef_search));
  } catch (const std::exception& e) {
    return Status::DataLoss("vector index " + path + ": " + e.what());
  }
  index->live_ = live;
  return index;
}

}  // namespace strata::memory
