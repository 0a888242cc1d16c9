// Context-window benchmarks (docs/PERFORMANCE.md, "Context window"):
//
//   BM_Assemble/window128k/N  select what to send from an N-message history whose counts are cached in a
//                             HistoryIndex: 128k-token window, 4k reserve, system prompt (the normal case:
//                             the newest ~1k messages fit).
//   BM_Assemble/everything/N  the same with a window so large that all N messages fit (the worst case).
//   BM_AssembleMessages/N     BM_Assemble plus copying the selected messages out (AssembledMessages).
//   BM_AppendOne              appending one message to a cached history: counting it with o200k_base and
//                             updating the index (HistoryIndex::Sync), averaged over a growing history.
//   BM_NaiveRecount/N         the peer: the approach without an index (Stello's): count every message with
//                             the same tokenizer on each assembly, sanitise tool groups, then scan.
//
//   --fidelity                the compaction-fidelity check: facts planted in every turn of a long
//                             conversation, compaction through map-reduce with an extractive stand-in
//                             summarizer (ScriptedProvider echoing the FACT-n tokens it is shown), then
//                             the next request assembled and sent to a scripted agent model: how many
//                             planted facts that model receives.
//
// Histories are generated: user questions, assistant answers, and tool groups (1-3 parallel calls with
// JSON arguments and results of 100-1500 bytes), English with some Chinese and code.
#include <benchmark/benchmark.h>

#include <cstring>
#include <iostream>
#include <map>
#include <random>
#include <regex>
#include <set>

#include "strata/llm/generate.h"
#include "strata/llm/scripted.h"
#include "strata/tokenizer/message_counter.h"
#include "strata/window/compaction.h"
#include "strata/window/assembler.h"

namespace strata::window {
namespace {

const tokenizer::EncodingMessageCounter& Counter() {
  static auto* counter = [] {
    auto encoding = tokenizer::Encoding::Load("o200k_base");
    if (!encoding.ok()) {
      fprintf(stderr, "%s\n", encoding.status().ToString().c_str());
      std::abort();
    }
    return new tokenizer::EncodingMessageCounter(*encoding);
  }();
  return *counter;
}

std::string Words(std::mt19937_64& rng, size_t bytes) {
  static const char* kWords[] = {"the", "context", "window", "agent", "memory", "tool", "result", "file",
                                 "function", "returns", "error", "budget", "上下文", "窗口", "记忆", "if (x) {",
                                 "return y;", "}", "\n", "path/to/module.cc"};
  std::string out;
  while (out.size() < bytes) {
    out += kWords[rng() % (sizeof(kWords) / sizeof(kWords[0]))];
    out += ' ';
  }
  return out;
}

std::vector<Message> MakeHistory(size_t n) {
  std::mt19937_64 rng(42);
  std::vector<Message> h;
  int id = 0;
  while (h.size() < n) {
    h.push_back(Message::User(Words(rng, 40 + rng() % 200)));
    if (rng() % 2 == 0) {
      Message call = Message::Assistant(Words(rng, 30));
      call.tool_calls.emplace();
      size_t calls = 1 + rng() % 3;
      for (size_t k = 0; k < calls; ++k) {
        call.tool_calls->push_back(ToolCall{.id = "call_" + std::to_string(id++),
                                            .function = {"read_file", "{\"path\":\"src/" + Words(rng, 20) + "\"}"}});
      }
      std::vector<Message> results;
      for (const ToolCall& c : *call.tool_calls) results.push_back(Message::ToolResult(c.id, Words(rng, 100 + rng() % 1400)));
      h.push_back(std::move(call));
      for (Message& r : results) h.push_back(std::move(r));
    }
    h.push_back(Message::Assistant(Words(rng, 60 + rng() % 400)));
  }
  h.resize(n);
  return h;
}

struct Indexed {
  std::vector<Message> history;
  HistoryIndex index{&Counter()};
};

const Indexed& History(size_t n) {
  static std::map<size_t, Indexed*> cache;
  Indexed*& slot = cache[n];
  if (slot == nullptr) {
    slot = new Indexed;
    slot->history = MakeHistory(n);
    slot->index.Sync(slot->history);
  }
  return *slot;
}

AssembleOptions Options(int64_t window) {
  AssembleOptions o;
  o.max_context_tokens = window;
  o.reserve_for_reply = 4096;
  o.system_prompt = "You are a careful coding agent. Work in small verified steps.";
  o.system_prompt_tokens = 16;
  return o;
}

void BM_Assemble(benchmark::State& state, int64_t window) {
  const Indexed& h = History(static_cast<size_t>(state.range(0)));
  AssembleOptions options = Options(window);
  size_t selected = 0;
  for (auto _ : state) {
    auto a = Assemble(h.history, h.index, options, Counter());
    selected = a->included.size();
    benchmark::DoNotOptimize(a);
  }
  state.counters["selected"] = static_cast<double>(selected);
}

void BM_AssembleMessages(benchmark::State& state) {
  const Indexed& h = History(static_cast<size_t>(state.range(0)));
  AssembleOptions options = Options(128'000);
  for (auto _ : state) {
    auto a = Assemble(h.history, h.index, options, Counter());
    std::vector<Message> sent = AssembledMessages(h.history, *a, options);
    benchmark::DoNotOptimize(sent.data());
  }
}

void BM_AppendOne(benchmark::State& state) {
  std::vector<Message> pool = MakeHistory(200'000);
  std::vector<Message> history;
  history.reserve(pool.size());
  HistoryIndex index(&Counter());
  size_t i = 0;
  for (auto _ : state) {
    if (i == pool.size()) {
      state.PauseTiming();
      history.clear();
      index.Reset();
      i = 0;
      state.ResumeTiming();
    }
    history.push_back(pool[i++]);
    index.Sync(history);
  }
  benchmark::DoNotOptimize(index.size());
}

// The peer: no index. Every assembly counts every message, drops broken tool groups, then scans.
std::vector<size_t> NaiveAssemble(std::span<const Message> h, int64_t budget) {
  std::vector<int64_t> tokens(h.size());
  for (size_t i = 0; i < h.size(); ++i) tokens[i] = Counter().CountMessages(h.subspan(i, 1));
  std::vector<std::pair<size_t, size_t>> units;  // Valid [begin, end) ranges.
  for (size_t i = 0; i < h.size();) {
    if (h[i].role == Role::kTool) {
      ++i;
      continue;
    }
    if (h[i].tool_calls && !h[i].tool_calls->empty()) {
      size_t j = i + 1;
      while (j < h.size() && h[j].role == Role::kTool) ++j;
      if (j - i - 1 == h[i].tool_calls->size()) units.emplace_back(i, j);
      i = j;
      continue;
    }
    units.emplace_back(i, i + 1);
    ++i;
  }
  std::vector<size_t> out;
  int64_t used = 0;
  for (auto it = units.rbegin(); it != units.rend(); ++it) {
    int64_t t = 0;
    for (size_t k = it->first; k < it->second; ++k) t += tokens[k];
    if (used + t > budget) break;
    used += t;
    for (size_t k = it->second; k-- > it->first;) out.push_back(k);
  }
  std::reverse(out.begin(), out.end());
  return out;
}

void BM_NaiveRecount(benchmark::State& state) {
  const Indexed& h = History(static_cast<size_t>(state.range(0)));
  for (auto _ : state) {
    auto selected = NaiveAssemble(h.history, 128'000 - 4096 - 16);
    benchmark::DoNotOptimize(selected.data());
  }
}

BENCHMARK_CAPTURE(BM_Assemble, window128k, 128'000)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK_CAPTURE(BM_Assemble, everything, int64_t{1} << 40)
    ->Arg(1'000)
    ->Arg(10'000)
    ->Arg(100'000)
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AssembleMessages)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AppendOne)->Iterations(100'000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_NaiveRecount)->Arg(1'000)->Arg(10'000)->Arg(100'000)->Unit(benchmark::kMillisecond);

}  // namespace

int Fidelity() {
  constexpr int kTurns = 400;
  std::mt19937_64 rng(7);
  std::vector<Message> history;
  for (int i = 0; i < kTurns; ++i) {
    history.push_back(Message::User("Please note FACT-" + std::to_string(i) + " and then " + Words(rng, 300)));
    Message call = Message::Assistant("Checking.");
    call.tool_calls = {{ToolCall{.id = "c" + std::to_string(i), .function = {"read_file", "{\"path\":\"a.cc\"}"}}}};
    history.push_back(call);
    history.push_back(Message::ToolResult("c" + std::to_string(i), Words(rng, 1500)));
    history.push_back(Message::Assistant(Words(rng, 200)));
  }
  const auto& counter = Counter();
  llm::ScriptedProvider summarizer("extractive", [](const llm::ScriptedProvider::Request& request) {
    static const std::regex fact("FACT-[0-9]+");
    std::string prompt = request.history.back().ExtractText();
    std::set<std::string> seen;
    std::string out = "Facts noted:";
    for (auto it = std::sregex_iterator(prompt.begin(), prompt.end(), fact); it != std::sregex_iterator(); ++it) {
      if (seen.insert(it->str()).second) out += " " + it->str();
    }
    llm::ScriptedReply r;
    r.parts.push_back(ContentPart(TextPart{out}));
    return r;
  });
  CompactionOptions options{.keep_recent_turns = 2, .compaction_window = 16'000, .reserve_for_summary = 2'000,
                            .counter = &counter};
  auto start = std::chrono::steady_clock::now();
  auto r = Compact(summarizer, history, options);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  if (!r.ok() || r->pruned_fallback) {
    std::cerr << (r.ok() ? r->llm_error.ToString() : r.status().ToString()) << "\n";
    return 1;
  }
  // The next turn: assemble within a 32k window and send it to the agent model.
  std::vector<Message> next = r->messages;
  next.push_back(Message::User("What facts did I ask you to note?"));
  AssembleOptions assemble{.max_context_tokens = 32'000, .reserve_for_reply = 4'096};
  assemble.pinned.push_back(next[0]);
  std::span<const Message> rest = std::span<const Message>(next).subspan(1);
  HistoryIndex index(&counter);
  index.Sync(rest);
  auto a = Assemble(rest, index, assemble, counter);
  if (!a.ok()) {
    std::cerr << a.status().ToString() << "\n";
    return 1;
  }
  std::vector<Message> sent = AssembledMessages(rest, *a, assemble);
  llm::ScriptedProvider agent("agent", [](const llm::ScriptedProvider::Request&) {
    llm::ScriptedReply reply;
    reply.parts.push_back(ContentPart(TextPart{"ok"}));
    return reply;
  });
  (void)llm::Generate(agent, "", {}, sent);
  std::string received;
  std::vector<llm::ScriptedProvider::Request> requests = agent.requests();
  for (const Message& m : requests.at(0).history) received += m.ExtractText() + " ";
  int present = 0;
  for (int i = 0; i < kTurns; ++i) present += received.find("FACT-" + std::to_string(i) + " ") != std::string::npos;
  std::cout << "turns " << kTurns << ", history " << r->tokens_before << " tokens (o200k_base)\n"
            << "compaction: " << r->chunks << " chunks, " << r->llm_calls << " model calls, " << r->compacted
            << " messages folded, " << r->kept << " kept, " << r->tokens_after << " tokens after, " << ms
            << " ms (Strata's own time: the stand-in model answers instantly)\n"
            << "next request: " << a->total_tokens << " of " << a->budget << " tokens\n"
            << "facts planted " << kTurns << ", facts the model receives " << present << " ("
            << 100.0 * present / kTurns << "%)\n";
  return present == kTurns ? 0 : 1;
}

}  // namespace strata::window

int main(int argc, char** argv) {
  if (argc == 2 && std::strcmp(argv[1], "--fidelity") == 0) return strata::window::Fidelity();
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
