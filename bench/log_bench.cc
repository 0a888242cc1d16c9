// Context-log benchmarks: restore throughput (vs. a straightforward nlohmann-json reader), append
// throughput per durability policy, revert time near the end of logs of different sizes, and one cold
// restore in a fresh process with its peak memory (`--cold`, `--cold-peer`). Data: a generated ~100 MB kimi-cli style log (bench_data.h) under
// $STRATA_BENCH_DIR (default /tmp/strata-bench). See docs/PERFORMANCE.md.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "bench_data.h"
#include "strata/log/context_log.h"
#include "strata/message/message_json.h"

namespace strata::bench {
namespace {

constexpr uint64_t kLogBytes = 100ull << 20;

std::string BenchDir() {
  const char* env = std::getenv("STRATA_BENCH_DIR");
  std::string dir = env ? env : "/tmp/strata-bench";
  std::filesystem::create_directories(dir);
  return dir;
}

struct BigLog {
  std::string path;
  uint64_t bytes = 0;
  uint64_t messages = 0;
};

const BigLog& Log100MB() {
  static BigLog* log = [] {
    auto* l = new BigLog;
    l->path = BenchDir() + "/context-100mb.jsonl";
    l->bytes = EnsureContextLog(l->path, kLogBytes, &l->messages);
    return l;
  }();
  return *log;
}

void BM_Restore_Strata(benchmark::State& state) {
  const BigLog& log = Log100MB();
  for (auto _ : state) {
    auto ctx = ContextLog::Open(log.path, {.read_only = true});
    auto restored = ctx->Restore();
    if (!restored.ok() || ctx->history().size() != log.messages) state.SkipWithError("restore failed");
    benchmark::DoNotOptimize(ctx->history().data());
    state.PauseTiming();  // Freeing the restored history is not part of restoring it.
    ctx.reset();
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(log.bytes * state.iterations()));
  state.SetItemsProcessed(static_cast<int64_t>(log.messages * state.iterations()));
}
BENCHMARK(BM_Restore_Strata)->Unit(benchmark::kMillisecond)->UseRealTime();

// Peer: what a straightforward C++ implementation does - getline + nlohmann::json::parse per line.
void BM_Restore_NlohmannPeer(benchmark::State& state) {
  const BigLog& log = Log100MB();
  for (auto _ : state) {
    std::ifstream in(log.path);
    std::string line;
    std::vector<nlohmann::json> history;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      nlohmann::json j = nlohmann::json::parse(line);
      if (j.value("role", "").rfind('_', 0) != 0) history.push_back(std::move(j));
    }
    if (history.size() != log.messages) state.SkipWithError("peer restore disagrees");
    benchmark::DoNotOptimize(history.data());
    state.PauseTiming();
    history = {};
    state.ResumeTiming();
  }
  state.SetBytesProcessed(static_cast<int64_t>(log.bytes * state.iterations()));
  state.SetItemsProcessed(static_cast<int64_t>(log.messages * state.iterations()));
}
BENCHMARK(BM_Restore_NlohmannPeer)->Unit(benchmark::kMillisecond)->UseRealTime();

// Appends one realistic message per iteration to a fresh log on the real file system.
void BM_Append(benchmark::State& state) {
  Durability policy = static_cast<Durability>(state.range(0));
  std::string path = BenchDir() + "/append-" + std::string(DurabilityName(policy)) + ".jsonl";
  std::filesystem::remove(path);
  std::mt19937_64 rng(7);
  std::vector<Message> messages;
  for (int t = 0; messages.size() < 1000; ++t) {
    for (Message& m : MakeTurn(rng, t)) messages.push_back(std::move(m));
  }
  uint64_t bytes_per_round = 0;
  for (const Message& m : messages) bytes_per_round += MessageToJson(m).size() + 1;
  ContextLogOptions options;
  options.durability.policy = policy;
  if (state.range(1) > 0) options.durability.write_buffer_bytes = static_cast<size_t>(state.range(1));
  auto ctx = ContextLog::Open(path, options);
  if (!ctx->Restore().ok()) state.SkipWithError("restore failed");
  // The agent hands each new message over (moved); copies are made outside the timed region, in rounds.
  std::vector<Message> round;
  size_t i = 0;
  for (auto _ : state) {
    if (i == round.size()) {
      state.PauseTiming();
      round = messages;
      i = 0;
      state.ResumeTiming();
    }
    if (!ctx->Append(std::move(round[i++])).ok()) state.SkipWithError("append failed");
  }
  if (!ctx->Close().ok()) state.SkipWithError("close failed");
  state.SetItemsProcessed(state.iterations());
  state.SetBytesProcessed(static_cast<int64_t>(bytes_per_round * state.iterations() / messages.size()));
  state.SetLabel(std::string(DurabilityName(policy)) + (state.range(1) > 0 ? "+buffer" : ""));
  std::filesystem::remove(path);
}
BENCHMARK(BM_Append)
    ->Args({static_cast<int>(Durability::kNone), 0})
    ->Args({static_cast<int>(Durability::kNone), 64 << 10})
    ->Args({static_cast<int>(Durability::kBatch), 0})
    ->Args({static_cast<int>(Durability::kAlways), 0})
    ->Unit(benchmark::kMicrosecond)->UseRealTime();

// Peer for the `always` policy: the raw cost of one write(2) of a message-sized line plus fdatasync, with
// no log at all. An `always` append should cost about this much.
void BM_WriteFdatasyncPeer(benchmark::State& state) {
  std::string path = BenchDir() + "/fdatasync-peer.bin";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
  std::string line(420, 'x');
  line.back() = '\n';
  for (auto _ : state) {
    if (::write(fd, line.data(), line.size()) != static_cast<ssize_t>(line.size()) || ::fdatasync(fd) != 0) {
      state.SkipWithError("write/fdatasync failed");
    }
  }
  ::close(fd);
  std::filesystem::remove(path);
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_WriteFdatasyncPeer)->Unit(benchmark::kMicrosecond)->UseRealTime();

// Reverts to a checkpoint 10 messages before the end of a log whose kept prefix is range(0) MB.
void BM_RevertNearEnd(benchmark::State& state) {
  uint64_t prefix = static_cast<uint64_t>(state.range(0)) << 20;
  std::string dir = BenchDir() + "/revert-" + std::to_string(state.range(0));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  uint64_t messages = 0;
  std::string source = BenchDir() + "/prefix-" + std::to_string(state.range(0)) + "mb.jsonl";
  EnsureContextLog(source, prefix, &messages);
  std::string path = dir + "/context.jsonl";
  std::filesystem::copy_file(source, path);
  auto ctx = ContextLog::Open(path);
  if (!ctx->Restore().ok()) state.SkipWithError("restore failed");
  std::mt19937_64 rng(9);
  std::vector<Message> tail;
  while (tail.size() < 10) {
    for (Message& m : MakeTurn(rng, 0)) tail.push_back(std::move(m));
  }
  tail.resize(10);
  for (auto _ : state) {
    state.PauseTiming();
    auto id = ctx->Checkpoint(true);
    if (!id.ok() || !ctx->Append(tail).ok()) state.SkipWithError("setup failed");
    state.ResumeTiming();
    if (!ctx->RevertTo(*id).ok()) state.SkipWithError("revert failed");
    state.PauseTiming();
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      if (entry.path().filename() != "context.jsonl") std::filesystem::remove(entry.path());
    }
    state.ResumeTiming();
  }
  state.counters["prefix_MB"] = static_cast<double>(state.range(0));
  std::filesystem::remove_all(dir);
}
BENCHMARK(BM_RevertNearEnd)->Arg(1)->Arg(10)->Arg(100)->Unit(benchmark::kMillisecond)->UseRealTime()->Iterations(5);

// One cold restore in this (fresh) process: time, throughput and peak RSS. With `peer`, the nlohmann-json
// reader instead of Strata's.
int MeasureCold(bool peer) {
  const BigLog& log = Log100MB();
  struct rusage before;
  ::getrusage(RUSAGE_SELF, &before);
  auto start = std::chrono::steady_clock::now();
  size_t restored = 0;
  std::unique_ptr<ContextLog> ctx;
  std::vector<nlohmann::json> history;
  if (peer) {
    std::ifstream in(log.path);
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty()) continue;
      nlohmann::json j = nlohmann::json::parse(line);
      if (j.value("role", "").rfind('_', 0) != 0) history.push_back(std::move(j));
    }
    restored = history.size();
  } else {
    ctx = ContextLog::Open(log.path, {.read_only = true});
    if (!ctx->Restore().ok()) return 1;
    restored = ctx->history().size();
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  struct rusage after;
  ::getrusage(RUSAGE_SELF, &after);
  double file_mb = static_cast<double>(log.bytes) / (1 << 20);
  double peak_mb = static_cast<double>(after.ru_maxrss) / 1024;
  double base_mb = static_cast<double>(before.ru_maxrss) / 1024;
  std::printf("%s cold restore of %.1f MB, %zu messages: %.0f ms = %.0f MB/s, %.0f messages/s; "
              "peak RSS %.1f MB (%.1f before) = %.2fx the file size\n",
              peer ? "nlohmann peer" : "strata", file_mb, restored, seconds * 1000, file_mb / seconds,
              static_cast<double>(restored) / seconds, peak_mb, base_mb, (peak_mb - base_mb) / file_mb);
  return restored == log.messages ? 0 : 1;
}

}  // namespace
}  // namespace strata::bench

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--cold") return strata::bench::MeasureCold(false);
    if (std::string(argv[i]) == "--cold-peer") return strata::bench::MeasureCold(true);
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
