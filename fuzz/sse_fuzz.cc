// Fuzz target: the SSE parser. Any byte stream parses, and feeding it whole or byte by byte (or in two
// pieces split at a data-chosen point) yields the same events.
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "strata/llm/sse.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  auto run = [&](size_t piece) {
    strata::llm::SseParser parser;
    std::vector<strata::llm::SseEvent> events;
    auto collect = [&](const strata::llm::SseEvent& e) { events.push_back(e); };
    for (size_t pos = 0; pos < text.size(); pos += piece) parser.Feed(text.substr(pos, piece), collect);
    parser.Finish(collect, true);
    return events;
  };
  auto whole = run(text.size() + 1);
  if (run(1) != whole) std::abort();
  if (size > 0 && run(1 + data[0] % 7) != whole) std::abort();
  return 0;
}
