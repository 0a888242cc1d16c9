// Tokenizer benchmarks: single-thread encode throughput per input file and encoding, batch throughput on
// 2 threads, vocabulary load time and memory. Inputs: files named on the command line via
// STRATA_TOKENIZER_BENCH_FILES (colon-separated); bench/run_tokenizer_bench.sh prepares them and runs
// the npm peers on the same files. See docs/PERFORMANCE.md.
#include <benchmark/benchmark.h>

#include <chrono>
#include <map>
#include <cstdlib>
#include <fstream>
#include <sstream>

#include "strata/tokenizer/encoding.h"

namespace strata::tokenizer {
namespace {

std::vector<std::pair<std::string, std::string>>& Files() {
  static std::vector<std::pair<std::string, std::string>> files;
  return files;
}

std::shared_ptr<const Encoding> Get(const std::string& name) {
  static std::map<std::string, std::shared_ptr<const Encoding>> cache;
  auto& e = cache[name];
  if (!e) e = *Encoding::Load(name);
  return e;
}

void BM_Encode(benchmark::State& state, std::string encoding, size_t file) {
  auto enc = Get(encoding);
  const std::string& text = Files()[file].second;
  size_t tokens = 0;
  for (auto _ : state) {
    std::vector<Token> ids = enc->Encode(text);
    tokens = ids.size();
    benchmark::DoNotOptimize(ids.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(text.size() * state.iterations()));
  state.counters["tokens"] = static_cast<double>(tokens);
}

void BM_EncodeBatch2Threads(benchmark::State& state, std::string encoding, size_t file) {
  auto enc = Get(encoding);
  const std::string& text = Files()[file].second;
  std::vector<std::string_view> chunks;  // ~16 KiB documents, cut at line ends.
  for (size_t pos = 0; pos < text.size();) {
    size_t end = std::min(text.size(), pos + (16 << 10));
    size_t nl = text.find('\n', end);
    end = nl == std::string::npos ? text.size() : nl + 1;
    chunks.emplace_back(text.data() + pos, end - pos);
    pos = end;
  }
  for (auto _ : state) {
    auto out = enc->EncodeBatch(chunks, 2);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(static_cast<int64_t>(text.size() * state.iterations()));
}

}  // namespace
}  // namespace strata::tokenizer

int main(int argc, char** argv) {
  using namespace strata::tokenizer;
  const char* list = std::getenv("STRATA_TOKENIZER_BENCH_FILES");
  if (list == nullptr) {
    std::fprintf(stderr, "set STRATA_TOKENIZER_BENCH_FILES=file1:file2:... (bench/run_tokenizer_bench.sh does)\n");
    return 2;
  }
  std::stringstream ss(list);
  for (std::string path; std::getline(ss, path, ':');) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream content;
    content << in.rdbuf();
    std::string name = path.substr(path.rfind('/') + 1);
    Files().emplace_back(name, content.str());
  }
  for (const char* encoding : {"cl100k_base", "o200k_base"}) {
    auto loaded = Encoding::Load(encoding);  // Builds the mapped image if it is not there yet.
    if (!loaded.ok()) {
      std::fprintf(stderr, "%s\n", loaded.status().ToString().c_str());
      return 1;
    }
    auto start = std::chrono::steady_clock::now();
    auto mapped = Encoding::Load(encoding);
    double map_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::string json_path = Encoding::SearchPath().back() + "/" + encoding + ".json";
    std::ifstream in(json_path, std::ios::binary);
    std::stringstream json;
    json << in.rdbuf();
    start = std::chrono::steady_clock::now();
    auto parsed = Encoding::FromTiktokenJson(encoding, json.str());
    double json_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    std::printf("%s: %zu ids; load %.2f ms from the mapped image, %.0f ms from the npm JSON; %.1f MiB of tables\n",
                encoding, (*loaded)->vocab_size(), map_ms, json_ms,
                static_cast<double>((*loaded)->memory_bytes()) / (1 << 20));
    for (size_t f = 0; f < Files().size(); ++f) {
      benchmark::RegisterBenchmark((std::string("Encode/") + encoding + "/" + Files()[f].first).c_str(), BM_Encode,
                                   std::string(encoding), f)->Unit(benchmark::kMillisecond);
      benchmark::RegisterBenchmark((std::string("EncodeBatch2Threads/") + encoding + "/" + Files()[f].first).c_str(),
                                   BM_EncodeBatch2Threads, std::string(encoding), f)
          ->Unit(benchmark::kMillisecond)->UseRealTime();
    }
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
