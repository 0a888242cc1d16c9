// Streaming-path benchmarks (docs/PERFORMANCE.md, "LLM streaming"): what the client adds per streamed
// event on top of the network.
//
//   BM_SseParse/<format>       SSE framing only (SseParser), the stream fed in 1 KiB network-sized chunks.
//   BM_DecodeMerge/<format>    SSE + the format's decoder + StreamMerger: DecodeSseText on the whole text.
//   BM_Generate/<format>       the whole client: HttpProvider (request body built, response read through
//                              an in-memory HttpTransport in 1 KiB chunks) + llm::Generate with an on_part
//                              callback, i.e. everything but the socket.
//
// The streams are generated deterministically: a long answer of ~4-byte text deltas (a token each, some
// CJK, some escapes) with two tool calls whose arguments arrive in fragments, as each vendor sends them.
// `--write-streams DIR` writes the OpenAI stream to DIR/openai-stream.sse for the Node peer
// (bench/peers/sse_peers.mjs) and exits.
#include <benchmark/benchmark.h>

#include <cstring>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "strata/llm/generate.h"
#include "strata/llm/provider.h"
#include "strata/llm/sse.h"
#include "strata/llm/wire.h"

namespace strata::llm {
namespace {

using Json = nlohmann::json;

constexpr int kTextEvents = 20'000;
constexpr size_t kChunk = 1024;

// A deterministic token stream: ~4-byte pieces of English, some Chinese, the odd newline and quote.
std::vector<std::string> Tokens(int n) {
  static const char* kPieces[] = {" the", " model", " context", " window", " token", " budget", ",", ".",
                                  " agent", " memory", " 上下文", "窗口", "\n", " \"quoted\"", " code", "()"};
  std::vector<std::string> out;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (int i = 0; i < n; ++i) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    out.push_back(kPieces[x % (sizeof(kPieces) / sizeof(kPieces[0]))]);
  }
  return out;
}

std::vector<std::string> ArgumentFragments() {
  std::string args = R"({"path":"src/llm/wire.cc","query":"retry with exponential backoff","limit":20})";
  std::vector<std::string> out;
  for (size_t i = 0; i < args.size(); i += 6) out.push_back(args.substr(i, 6));
  return out;
}

std::string Data(const Json& payload, const char* event = nullptr) {
  std::string out;
  if (event != nullptr) out += std::string("event: ") + event + "\n";
  return out + "data: " + payload.dump() + "\n\n";
}

struct Stream {
  std::string text;
  int64_t events = 0;
};

Stream OpenAIStream() {
  Stream s;
  auto chunk = [&](Json delta, Json finish = nullptr) {
    Json c{{"id", "chatcmpl-Bx7bench"}, {"object", "chat.completion.chunk"}, {"created", 1764000000},
           {"model", "gpt-4.1-2025-04-14"}, {"service_tier", "default"}, {"system_fingerprint", "fp_b3f1157249"},
           {"choices", {{{"index", 0}, {"delta", std::move(delta)}, {"logprobs", nullptr},
                         {"finish_reason", std::move(finish)}}}}};
    s.text += Data(c);
    s.events++;
  };
  chunk({{"role", "assistant"}, {"content", ""}, {"refusal", nullptr}});
  for (const std::string& t : Tokens(kTextEvents)) chunk({{"content", t}});
  for (int call = 0; call < 2; ++call) {
    chunk({{"tool_calls", {{{"index", call}, {"id", "call_" + std::to_string(call)}, {"type", "function"},
                            {"function", {{"name", "search"}, {"arguments", ""}}}}}}});
    for (const std::string& f : ArgumentFragments()) {
      chunk({{"tool_calls", {{{"index", call}, {"function", {{"arguments", f}}}}}}});
    }
  }
  chunk(Json::object(), "tool_calls");
  s.text += Data(Json{{"id", "chatcmpl-Bx7bench"}, {"object", "chat.completion.chunk"}, {"choices", Json::array()},
                      {"usage", {{"prompt_tokens", 1200}, {"completion_tokens", kTextEvents}}}});
  s.text += "data: [DONE]\n\n";
  s.events += 2;
  return s;
}

Stream AnthropicStream() {
  Stream s;
  auto event = [&](const char* type, Json payload) {
    payload["type"] = type;
    s.text += Data(payload, type);
    s.events++;
  };
  event("message_start", {{"message", {{"id", "msg_bench"}, {"type", "message"}, {"role", "assistant"},
                                       {"model", "claude-sonnet-4-5"}, {"content", Json::array()},
                                       {"usage", {{"input_tokens", 1200}, {"output_tokens", 1}}}}}});
  event("content_block_start", {{"index", 0}, {"content_block", {{"type", "text"}, {"text", ""}}}});
  for (const std::string& t : Tokens(kTextEvents)) {
    event("content_block_delta", {{"index", 0}, {"delta", {{"type", "text_delta"}, {"text", t}}}});
  }
  event("content_block_stop", {{"index", 0}});
  for (int call = 1; call <= 2; ++call) {
    event("content_block_start", {{"index", call},
                                  {"content_block", {{"type", "tool_use"}, {"id", "toolu_" + std::to_string(call)},
                                                     {"name", "search"}, {"input", Json::object()}}}});
    for (const std::string& f : ArgumentFragments()) {
      event("content_block_delta", {{"index", call}, {"delta", {{"type", "input_json_delta"}, {"partial_json", f}}}});
    }
    event("content_block_stop", {{"index", call}});
  }
  event("message_delta", {{"delta", {{"stop_reason", "tool_use"}}}, {"usage", {{"output_tokens", kTextEvents}}}});
  event("message_stop", Json::object());
  return s;
}

Stream ResponsesStream() {
  Stream s;
  auto event = [&](const char* type, Json payload) {
    payload["type"] = type;
    s.text += Data(payload, type);
    s.events++;
  };
  event("response.created", {{"response", {{"id", "resp_bench"}, {"status", "in_progress"}}}});
  event("response.output_item.added",
        {{"output_index", 0}, {"item", {{"type", "message"}, {"id", "msg_1"}, {"role", "assistant"}}}});
  for (const std::string& t : Tokens(kTextEvents)) {
    event("response.output_text.delta",
          {{"item_id", "msg_1"}, {"output_index", 0}, {"content_index", 0}, {"delta", t}});
  }
  for (int call = 1; call <= 2; ++call) {
    event("response.output_item.added",
          {{"output_index", call},
           {"item", {{"type", "function_call"}, {"call_id", "call_" + std::to_string(call)}, {"name", "search"},
                     {"arguments", ""}}}});
    for (const std::string& f : ArgumentFragments()) {
      event("response.function_call_arguments.delta", {{"output_index", call}, {"delta", f}});
    }
  }
  event("response.completed",
        {{"response", {{"id", "resp_bench"}, {"usage", {{"input_tokens", 1200}, {"output_tokens", kTextEvents}}}}}});
  return s;
}

Stream GeminiStream() {
  Stream s;
  auto chunk = [&](Json parts, bool last) {
    Json c{{"candidates", {{{"content", {{"role", "model"}, {"parts", std::move(parts)}}}, {"index", 0}}}},
           {"modelVersion", "gemini-2.5-flash"}, {"responseId", "gem-bench"}};
    if (last) {
      c["candidates"][0]["finishReason"] = "STOP";
      c["usageMetadata"] = {{"promptTokenCount", 1200}, {"candidatesTokenCount", kTextEvents}};
    }
    s.text += Data(c);
    s.events++;
  };
  for (const std::string& t : Tokens(kTextEvents)) chunk(Json::array({{{"text", t}}}), false);
  chunk(Json::array({{{"functionCall", {{"name", "search"}, {"args", {{"path", "src/llm/wire.cc"}}}}}}}), true);
  return s;
}

const Stream& StreamFor(ProviderKind kind) {
  static const Stream openai = OpenAIStream(), anthropic = AnthropicStream(), responses = ResponsesStream(),
                      gemini = GeminiStream();
  switch (kind) {
    case ProviderKind::kAnthropic: return anthropic;
    case ProviderKind::kOpenAIResponses: return responses;
    case ProviderKind::kGemini: return gemini;
    default: return openai;
  }
}

void Report(benchmark::State& state, const Stream& s) {
  state.SetBytesProcessed(static_cast<int64_t>(s.text.size()) * state.iterations());
  state.SetItemsProcessed(s.events * state.iterations());
  state.counters["ns_per_event"] = benchmark::Counter(
      static_cast<double>(s.events) * static_cast<double>(state.iterations()),
      benchmark::Counter::kIsRate | benchmark::Counter::kInvert, benchmark::Counter::kIs1000);
}

void BM_SseParse(benchmark::State& state, ProviderKind kind) {
  const Stream& s = StreamFor(kind);
  for (auto _ : state) {
    SseParser parser;
    int64_t events = 0;
    auto on_event = [&](const SseEvent& e) { events += e.data.empty() ? 0 : 1; };
    for (size_t i = 0; i < s.text.size(); i += kChunk) {
      parser.Feed(std::string_view(s.text).substr(i, kChunk), on_event);
    }
    parser.Finish(on_event);
    if (events != s.events) state.SkipWithError("event count mismatch");
  }
  Report(state, s);
}

void BM_DecodeMerge(benchmark::State& state, ProviderKind kind) {
  const Stream& s = StreamFor(kind);
  for (auto _ : state) {
    auto decoded = DecodeSseText(kind, "{}", s.text);
    if (!decoded.ok()) {
      state.SkipWithError(decoded.status().ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(decoded->message);
  }
  Report(state, s);
}

// Serves one fixed body in 1 KiB chunks, as a socket would hand them over.
class MemoryResponse final : public HttpResponse {
 public:
  explicit MemoryResponse(const std::string* body) : body_(body) {}
  int status() const override { return 200; }
  std::string_view header(std::string_view name) const override {
    return name == "content-type" || name == "Content-Type" ? "text/event-stream" : "";
  }
  Result<bool> Read(std::string* chunk) override {
    if (pos_ >= body_->size()) return false;
    chunk->assign(*body_, pos_, kChunk);
    pos_ += kChunk;
    return true;
  }

 private:
  const std::string* body_;
  size_t pos_ = 0;
};

class MemoryTransport final : public HttpTransport {
 public:
  explicit MemoryTransport(const std::string* body) : body_(body) {}
  Result<std::unique_ptr<HttpResponse>> Send(const HttpRequest& request, const HttpOptions&,
                                             const Canceller*) override {
    benchmark::DoNotOptimize(request.body.data());
    return std::unique_ptr<HttpResponse>(new MemoryResponse(body_));
  }

 private:
  const std::string* body_;
};

void BM_Generate(benchmark::State& state, ProviderKind kind) {
  const Stream& s = StreamFor(kind);
  ProviderConfig config;
  config.kind = kind;
  config.model = "bench-model";
  config.base_url = "http://bench.invalid/v1";
  config.transport = std::make_shared<MemoryTransport>(&s.text);
  auto provider = NewHttpProvider(std::move(config));
  if (!provider.ok()) {
    state.SkipWithError(provider.status().ToString().c_str());
    return;
  }
  std::vector<Message> history = {Message::User("Find where retries are implemented.")};
  size_t text_bytes = 0;
  GenerateCallbacks callbacks;
  callbacks.on_part = [&](const StreamedPart& part) {
    if (const auto* c = std::get_if<ContentPart>(&part)) {
      if (const auto* t = std::get_if<TextPart>(c)) text_bytes += t->text.size();
    }
  };
  for (auto _ : state) {
    auto result = Generate(**provider, "You are a careful coding agent.", {}, history, callbacks);
    if (!result.ok()) {
      state.SkipWithError(result.status().ToString().c_str());
      break;
    }
    benchmark::DoNotOptimize(result->message);
  }
  benchmark::DoNotOptimize(text_bytes);
  Report(state, s);
}

BENCHMARK_CAPTURE(BM_SseParse, openai, ProviderKind::kOpenAIChat)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SseParse, anthropic, ProviderKind::kAnthropic)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SseParse, responses, ProviderKind::kOpenAIResponses)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_SseParse, gemini, ProviderKind::kGemini)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DecodeMerge, openai, ProviderKind::kOpenAIChat)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DecodeMerge, anthropic, ProviderKind::kAnthropic)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DecodeMerge, responses, ProviderKind::kOpenAIResponses)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_DecodeMerge, gemini, ProviderKind::kGemini)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Generate, openai, ProviderKind::kOpenAIChat)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Generate, anthropic, ProviderKind::kAnthropic)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Generate, responses, ProviderKind::kOpenAIResponses)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(BM_Generate, gemini, ProviderKind::kGemini)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace strata::llm

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "--write-streams") == 0) {
    std::ofstream out(std::string(argv[2]) + "/openai-stream.sse", std::ios::binary);
    const auto& s = strata::llm::StreamFor(strata::llm::ProviderKind::kOpenAIChat);
    out << s.text;
    std::cout << s.events << " events, " << s.text.size() << " bytes\n";
    return out ? 0 : 1;
  }
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  return 0;
}
