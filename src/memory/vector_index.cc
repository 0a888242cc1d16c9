#include "vector_index.h"

#include <pthread.h>

#include <cstring>

// hnswlib 0.6.2's SSE code prefetches one element past the end of a full upper-layer neighbour list (a
// heap over-read ASan reports once a graph has full lists above layer 0); without it hnswlib is plain C++,
// and the distance it would have vectorised is ours below (SSE, AVX2 or AVX-512, chosen at run time).
#define NO_MANUAL_VECTORIZATION
#include <hnswlib/hnswlib.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace strata::memory {
namespace {

// Inner-product distance (1 - a·b) for hnswlib, with the widest vector unit the CPU has chosen at run time:
// the build targets baseline x86-64, where hnswlib's own functions use SSE only. Two accumulators hide the
// latency of the fused multiply-adds; the tail is summed plainly.
__attribute__((target("avx512f"))) float DotDistanceAvx512(const void* a, const void* b, const void* dim_ptr) {
  const float* x = static_cast<const float*>(a);
  const float* y = static_cast<const float*>(b);
  size_t dim = *static_cast<const size_t*>(dim_ptr);
  __m512 s0 = _mm512_setzero_ps(), s1 = _mm512_setzero_ps();
  size_t i = 0;
  for (; i + 32 <= dim; i += 32) {
    s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), s0);
    s1 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i + 16), _mm512_loadu_ps(y + i + 16), s1);
  }
  for (; i + 16 <= dim; i += 16) s0 = _mm512_fmadd_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i), s0);
  // (_mm512_reduce_add_ps trips GCC 12's -Wuninitialized inside its own header.)
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, _mm512_add_ps(s0, s1));
  float sum = 0;
  for (float lane : lanes) sum += lane;
  for (; i < dim; ++i) sum += x[i] * y[i];
  return 1.0f - sum;
}

__attribute__((target("avx2,fma"))) float DotDistanceAvx2(const void* a, const void* b, const void* dim_ptr) {
  const float* x = static_cast<const float*>(a);
  const float* y = static_cast<const float*>(b);
  size_t dim = *static_cast<const size_t*>(dim_ptr);
  __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
  size_t i = 0;
  for (; i + 16 <= dim; i += 16) {
    s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
    s1 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i + 8), _mm256_loadu_ps(y + i + 8), s1);
  }
  for (; i + 8 <= dim; i += 8) s0 = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), s0);
  __m256 s = _mm256_add_ps(s0, s1);
  __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
  h = _mm_add_ps(h, _mm_movehl_ps(h, h));
  h = _mm_add_ss(h, _mm_shuffle_ps(h, h, 1));
  float sum = _mm_cvtss_f32(h);
  for (; i < dim; ++i) sum += x[i] * y[i];
  return 1.0f - sum;
}

// SSE2, which every x86-64 CPU has.
float DotDistanceSse(const void* a, const void* b, const void* dim_ptr) {
  const float* x = static_cast<const float*>(a);
  const float* y = static_cast<const float*>(b);
  size_t dim = *static_cast<const size_t*>(dim_ptr);
  __m128 s0 = _mm_setzero_ps(), s1 = _mm_setzero_ps();
  size_t i = 0;
  for (; i + 8 <= dim; i += 8) {
    s0 = _mm_add_ps(s0, _mm_mul_ps(_mm_loadu_ps(x + i), _mm_loadu_ps(y + i)));
    s1 = _mm_add_ps(s1, _mm_mul_ps(_mm_loadu_ps(x + i + 4), _mm_loadu_ps(y + i + 4)));
  }
  alignas(16) float lanes[4];
  _mm_store_ps(lanes, _mm_add_ps(s0, s1));
  float sum = lanes[0] + lanes[1] + lanes[2] + lanes[3];
  for (; i < dim; ++i) sum += x[i] * y[i];
  return 1.0f - sum;
}

// hnswlib's inner-product space with the widest distance function above that the CPU runs.
class DotSpace : public hnswlib::SpaceInterface<float> {
 public:
  explicit DotSpace(size_t dim) : dim_(dim) {
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f")) {
      dist_ = DotDistanceAvx512;
    } else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
      dist_ = DotDistanceAvx2;
    } else {
      dist_ = DotDistanceSse;
    }
  }
  size_t get_data_size() override { return dim_ * sizeof(float); }
  hnswlib::DISTFUNC<float> get_dist_func() override { return dist_; }
  void* get_dist_func_param() override { return &dim_; }

 private:
  size_t dim_;
  hnswlib::DISTFUNC<float> dist_;
};

// hnswlib 0.6.2's loading constructor leaves num_deleted_ uninitialised and then adds the deleted elements
// it reads to it: count them again. Returns the count.
size_t RecountDeleted(hnswlib::HierarchicalNSW<float>& graph) {
  size_t deleted = 0;
  for (size_t i = 0; i < graph.cur_element_count; ++i) deleted += graph.isMarkedDeleted(static_cast<hnswlib::tableint>(i));
  graph.num_deleted_ = deleted;
  return deleted;
}

// hnswlib's locks are std::mutex, whose destructor does nothing, so ThreadSanitizer never learns that
// a graph's locks died with it; their lock-order history outlives them and is blamed on the next graph
// that reuses the memory. Under TSan, tell it (pthread_mutex_destroy on an unlocked mutex) before the
// memory goes; elsewhere this is nothing.
void ForgetLocks([[maybe_unused]] std::vector<std::mutex>& locks) {
#if defined(__SANITIZE_THREAD__)
  for (std::mutex& m : locks) pthread_mutex_destroy(m.native_handle());
#endif
}

#if defined(__SANITIZE_THREAD__)
// VisitedListPool's mutex is private: reached through a mirror of its layout (ThreadSanitizer builds only;
// the size check stops a hnswlib whose layout differs).
struct VisitedListPoolLayout {
  std::deque<hnswlib::VisitedList*> pool;
  std::mutex poolguard;
  int numelements;
};
static_assert(sizeof(VisitedListPoolLayout) == sizeof(hnswlib::VisitedListPool));
void ForgetPoolLock(hnswlib::VisitedListPool* pool) {
  if (pool != nullptr) pthread_mutex_destroy(reinterpret_cast<VisitedListPoolLayout*>(pool)->poolguard.native_handle());
}
#endif

void ForgetGraphLocks([[maybe_unused]] hnswlib::HierarchicalNSW<float>* graph) {
#if defined(__SANITIZE_THREAD__)
  if (graph == nullptr) return;
  ForgetLocks(graph->link_list_locks_);
  ForgetLocks(graph->link_list_update_locks_);
  pthread_mutex_destroy(graph->global.native_handle());
  pthread_mutex_destroy(graph->cur_element_count_guard_.native_handle());
  ForgetPoolLock(graph->visited_list_pool_);
#endif
}

struct GraphDeleter {
  void operator()(hnswlib::HierarchicalNSW<float>* graph) const {
    ForgetGraphLocks(graph);
    delete graph;
  }
};
using Graph = std::unique_ptr<hnswlib::HierarchicalNSW<float>, GraphDeleter>;

// hnswlib's resizeIndex replaces the per-element locks and the visited-list pool.
void Resize(hnswlib::HierarchicalNSW<float>& graph, size_t max_elements) {
  ForgetLocks(graph.link_list_locks_);
#if defined(__SANITIZE_THREAD__)
  ForgetPoolLock(graph.visited_list_pool_);
#endif
  graph.resizeIndex(max_elements);
}

}  // namespace

std::vector<std::pair<std::string, float>> DotDistanceByKernel(const float* a, const float* b, size_t dim) {
  std::vector<std::pair<std::string, float>> out = {{"sse", DotDistanceSse(a, b, &dim)}};
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) out.emplace_back("avx2", DotDistanceAvx2(a, b, &dim));
  if (__builtin_cpu_supports("avx512f")) out.emplace_back("avx512", DotDistanceAvx512(a, b, &dim));
  return out;
}

struct VectorIndex::Impl {
  explicit Impl(int dim) : space(static_cast<size_t>(dim)) {}
  DotSpace space;
  Graph graph;
};

VectorIndex::VectorIndex(VectorIndexParams params) : params_(params), impl_(std::make_unique<Impl>(params.dim)) {
  impl_->graph = Graph(new hnswlib::HierarchicalNSW<float>(&impl_->space, 1024, static_cast<size_t>(params.m),
                                                           static_cast<size_t>(params.ef_construction)));
  impl_->graph->setEf(static_cast<size_t>(params.ef_search));
}

VectorIndex::~VectorIndex() = default;

Status VectorIndex::Upsert(int64_t id, const float* v) {
  auto& g = *impl_->graph;
  try {
    bool existed = g.label_lookup_.count(static_cast<hnswlib::labeltype>(id)) != 0;
    bool was_deleted = existed && g.isMarkedDeleted(g.label_lookup_[static_cast<hnswlib::labeltype>(id)]);
    // A graph loaded from an empty file has capacity 0, and resizeIndex(0) would free its storage.
    if (!existed && g.cur_element_count >= g.max_elements_) Resize(g, std::max<size_t>(1024, g.max_elements_ * 2));
    g.addPoint(v, static_cast<hnswlib::labeltype>(id));
    if (!existed || was_deleted) ++live_;
  } catch (const std::exception& e) {
    return Status::Internal(std::string("vector index: ") + e.what());
  }
  return Status::Ok();
}

Status VectorIndex::UpsertBatch(std::span<const int64_t> ids, const float* vectors) {
  auto& g = *impl_->graph;
  const size_t dim = static_cast<size_t>(params_.dim);
  // Ids the graph holds already are replaced one at a time (hnswlib repairs their links); new ones are
  // inserted by `threads` threads into room made beforehand, as hnswlib allows.
  // The last vector of an id given twice wins, as it would one call at a time.
  std::unordered_map<int64_t, size_t> last;
  last.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) last[ids[i]] = i;
  std::vector<size_t> fresh;
  fresh.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (last[ids[i]] != i) continue;
    if (g.label_lookup_.count(static_cast<hnswlib::labeltype>(ids[i])) != 0) {
      STRATA_RETURN_IF_ERROR(Upsert(ids[i], vectors + i * dim));
    } else {
      fresh.push_back(i);
    }
  }
  if (fresh.empty()) return Status::Ok();
  try {
    if (g.cur_element_count + fresh.size() > g.max_elements_) {
      Resize(g, std::max(g.cur_element_count + fresh.size(), g.max_elements_ + g.max_elements_ / 2));
    }
  } catch (const std::exception& e) {
    return Status::ResourceExhausted(std::string("vector index: cannot grow: ") + e.what());
  }
  std::atomic<size_t> next{0};
  std::atomic<bool> failed{false};
  std::string error;
  std::mutex error_mu;
  auto work = [&] {
    for (size_t k = next++; k < fresh.size() && !failed; k = next++) {
      size_t i = fresh[k];
      try {
        g.addPoint(vectors + i * dim, static_cast<hnswlib::labeltype>(ids[i]));
      } catch (const std::exception& e) {
        std::lock_guard lock(error_mu);
        if (!failed.exchange(true)) error = e.what();
      }
    }
  };
  int threads = params_.threads > 0 ? params_.threads : static_cast<int>(std::thread::hardware_concurrency());
  size_t n_threads = std::clamp<size_t>(static_cast<size_t>(std::max(1, threads)), 1, 1 + fresh.size() / 256);
  std::vector<std::thread> pool;
  try {
    for (size_t t = 1; t < n_threads; ++t) pool.emplace_back(work);
  } catch (const std::system_error&) {
    // No more threads to be had: the ones started and this one share the rest.
  }
  work();
  for (std::thread& t : pool) t.join();
  // Every id inserted counts as live, also when a sibling failed: they are in the graph.
  live_ += static_cast<size_t>(std::count_if(fresh.begin(), fresh.end(), [&](size_t i) {
    return g.label_lookup_.count(static_cast<hnswlib::labeltype>(ids[i])) != 0;
  }));
  if (failed) return Status::Internal("vector index: " + error);
  return Status::Ok();
}

Status VectorBatch::AddBytes(int64_t id, std::string_view bytes) {
  const size_t dim = static_cast<size_t>(index_->params().dim);
  if (bytes.size() != dim * sizeof(float)) {
    return Status::InvalidArgument("vector of " + std::to_string(bytes.size()) + " bytes for an index of " +
                                   std::to_string(dim) + " dimensions");
  }
  ids_.push_back(id);
  floats_.resize(floats_.size() + dim);
  std::memcpy(floats_.data() + floats_.size() - dim, bytes.data(), bytes.size());
  return ids_.size() >= batch_ ? Flush() : Status::Ok();
}

Status VectorBatch::Flush() {
  Status s = ids_.empty() ? Status::Ok() : index_->UpsertBatch(ids_, floats_.data());
  ids_.clear();
  floats_.clear();
  return s;
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
  try {
    // hnswlib searches with max(ef, k) candidates itself, so concurrent searches need not change ef.
    auto heap = impl_->graph->searchKnn(query, std::min(k, live_));
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

Status VectorIndex::SaveGraph(const std::string& path) const {
  try {
    impl_->graph->saveIndex(path);
  } catch (const std::exception& e) {
    return Status::Internal("vector index save " + path + ": " + e.what());
  }
  return Status::Ok();
}

namespace {

// Checks the header of a graph file written by hnswlib 0.6.2's saveIndex against `dim` and the file's size
// before hnswlib reads it: hnswlib trusts the sizes it reads, and its exceptions are kept for what cannot
// be seen from the header (an exception unwinding through instrumented frames also confuses
// ThreadSanitizer's stacks).
Status CheckGraphFile(const std::string& path, int dim) {
  std::error_code ec;
  const uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (ec) return Status::NotFound("vector index " + path + " is missing");
  struct Header {
    uint64_t offset_level0, max_elements, cur_elements, size_per_element, label_offset, offset_data;
    int32_t max_level;
    uint32_t enterpoint;
    uint64_t max_m, max_m0, m;
    double mult;
    uint64_t ef_construction;
  } h{};
  static_assert(sizeof(Header) == 96);
  std::ifstream in(path, std::ios::binary);
  auto bad = [&](const std::string& why) {
    return Status::DataLoss("vector index " + path + " is not a graph of " + std::to_string(dim) +
                            " dimensions: " + why);
  };
  if (bytes < sizeof(Header) || !in.read(reinterpret_cast<char*>(&h), sizeof h)) return bad("too short");
  const uint64_t links0 = h.max_m0 * sizeof(hnswlib::tableint) + sizeof(hnswlib::linklistsizeint);
  const uint64_t data = static_cast<uint64_t>(dim) * sizeof(float);
  if (h.m < 2 || h.m > 4096 || h.max_m0 < h.m || h.max_m0 > 8192 || h.max_m != h.m) return bad("bad degree");
  if (h.offset_level0 != 0 || h.offset_data != links0 || h.label_offset != links0 + data ||
      h.size_per_element != links0 + data + sizeof(hnswlib::labeltype)) {
    return bad("element layout");
  }
  if (h.cur_elements > (bytes - sizeof(Header)) / h.size_per_element || h.cur_elements > h.max_elements) {
    return bad("more elements than the file holds");
  }
  if (h.cur_elements > 0 && (h.enterpoint >= h.cur_elements || h.max_level < 0 || h.max_level > 64)) {
    return bad("entry point");
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<VectorIndex>> VectorIndex::LoadGraph(const std::string& path, VectorIndexParams params) {
  std::error_code ec;
  uintmax_t bytes = std::filesystem::file_size(path, ec);
  if (ec) return Status::NotFound("vector index " + path + " is missing");
  STRATA_RETURN_IF_ERROR(CheckGraphFile(path, params.dim));
  auto index = std::make_unique<VectorIndex>(params);
  try {
    // hnswlib takes the vector size from the space, not the file: a graph saved with another dimension
    // shows as an element layout that does not add up.
    Graph graph(new hnswlib::HierarchicalNSW<float>(&index->impl_->space, path, false, 0));
    const size_t want_data = static_cast<size_t>(params.dim) * sizeof(float);
    if (graph->data_size_ != want_data || graph->offsetData_ != graph->size_links_level0_ ||
        graph->label_offset_ != graph->size_links_level0_ + want_data ||
        graph->size_data_per_element_ != graph->size_links_level0_ + want_data + sizeof(hnswlib::labeltype) ||
        graph->cur_element_count * graph->size_data_per_element_ > bytes) {
      return Status::DataLoss("vector index " + path + " is not a graph of " + std::to_string(params.dim) +
                              " dimensions");
    }
    graph->setEf(static_cast<size_t>(params.ef_search));
    index->live_ = graph->cur_element_count - RecountDeleted(*graph);
    index->impl_->graph = std::move(graph);
  } catch (const std::exception& e) {
    return Status::DataLoss("vector index " + path + ": " + e.what());
  }
  return index;
}

Status VectorIndex::SaveMeta(const std::string& path, int64_t generation, const std::string& model) const {
  std::error_code ec;
  std::ofstream meta(path + ".meta.tmp", std::ios::trunc);
  meta << "strata-vector-index 1\ngeneration " << generation << "\nmodel " << model << "\ndim " << params_.dim
       << "\nlive " << live_ << "\n";
  meta.close();
  if (!meta) return Status::Internal("vector index save: cannot write " + path + ".meta.tmp");
  std::filesystem::rename(path + ".meta.tmp", path + ".meta", ec);
  if (ec) return Status::Internal("vector index save: rename " + path + ".meta: " + ec.message());
  return Status::Ok();
}

namespace {

// What a saved index's meta file says (SaveMeta's format); kNotFound when the index is missing.
struct SavedMeta {
  int64_t generation = -1;
  std::string model;
  int dim = 0;
};

Result<SavedMeta> ReadMeta(const std::string& path) {
  std::ifstream meta(path + ".meta");
  if (!meta || !std::filesystem::exists(path)) return Status::NotFound("vector index " + path + " is missing");
  std::string magic, key;
  int version = 0;
  size_t live = 0;  // Informational: a loaded graph is counted from itself.
  SavedMeta out;
  meta >> magic >> version >> key >> out.generation >> key >> out.model >> key >> out.dim >> key >> live;
  if (!meta || magic != "strata-vector-index" || version != 1 || out.generation < 0) {
    return Status::DataLoss("vector index " + path + ".meta is unreadable");
  }
  return out;
}

}  // namespace

Result<int64_t> VectorIndex::SavedGeneration(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(SavedMeta meta, ReadMeta(path));
  return meta.generation;
}

Result<std::unique_ptr<VectorIndex>> VectorIndex::Load(const std::string& path, int64_t generation,
                                                       const std::string& model, VectorIndexParams params) {
  STRATA_ASSIGN_OR_RETURN(SavedMeta saved, ReadMeta(path));
  if (saved.generation != generation || saved.model != model || saved.dim != params.dim) {
    return Status::FailedPrecondition("vector index " + path + " is stale (generation " +
                                      std::to_string(saved.generation) + ", database at " + std::to_string(generation) +
                                      ")");
  }
  STRATA_RETURN_IF_ERROR(CheckGraphFile(path, params.dim));
  auto index = std::make_unique<VectorIndex>(params);
  try {
    index->impl_->graph = Graph(new hnswlib::HierarchicalNSW<float>(&index->impl_->space, path, false, 0));
    index->impl_->graph->setEf(static_cast<size_t>(params.ef_search));
    // Counted from the graph, not taken from the meta: a save by another process may replace the graph
    // between the meta's read and the graph's (then newer than its meta, and the catch-up from the meta's
    // generation applies again what it holds), and the meta's count was the older graph's.
    index->live_ = index->impl_->graph->cur_element_count - RecountDeleted(*index->impl_->graph);
  } catch (const std::exception& e) {
    return Status::DataLoss("vector index " + path + ": " + e.what());
  }
  return index;
}

}  // namespace strata::memory
