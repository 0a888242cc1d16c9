#include "strata/llm/sse.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

namespace strata::llm {
namespace {

std::vector<SseEvent> ParseChunks(const std::vector<std::string>& chunks, bool* incomplete = nullptr,
                                  bool dispatch_incomplete = false) {
  SseParser parser;
  std::vector<SseEvent> events;
  auto collect = [&](const SseEvent& e) { events.push_back(e); };
  for (const std::string& c : chunks) parser.Feed(c, collect);
  bool left = parser.Finish(collect, dispatch_incomplete);
  if (incomplete) *incomplete = left;
  return events;
}

std::vector<SseEvent> Parse(const std::string& text) { return ParseChunks({text}); }

SseEvent Event(std::string data, std::string type = "message", std::string id = "") {
  SseEvent e;
  e.type = std::move(type);
  e.data = std::move(data);
  e.last_event_id = std::move(id);
  return e;
}

TEST(SseParserTest, DataLinesCommentsAndTypes) {
  auto events = Parse(
      ": keep-alive\n"
      "event: content_block_delta\n"
      "data: {\"a\":1}\n"
      "\n"
      "data:no-space\n"
      "data:  two spaces\n"
      "data\n"
      "\n"
      "data: [DONE]\n\n");
  ASSERT_EQ(events.size(), 3u);
  EXPECT_EQ(events[0], Event("{\"a\":1}", "content_block_delta"));
  EXPECT_EQ(events[1], Event("no-space\n two spaces\n"));
  EXPECT_EQ(events[2], Event("[DONE]"));
}

TEST(SseParserTest, LineEndingsBomIdRetryAndEmptyEvents) {
  auto events = Parse("\xEF\xBB\xBF" "id: 7\r\nretry: 1500\r\nevent: ping\r\n\r\ndata: a\rdata: b\r\rretry: x\n\n");
  ASSERT_EQ(events.size(), 1u) << "an event without data is not dispatched";
  EXPECT_EQ(events[0].data, "a\nb");
  EXPECT_EQ(events[0].type, "message") << "the type is reset after every dispatch attempt";
  EXPECT_EQ(events[0].last_event_id, "7");
  EXPECT_EQ(events[0].retry_ms, 1500) << "an invalid retry is ignored";
}

TEST(SseParserTest, IncompleteLastEventIsDiscardedUnlessAsked) {
  bool incomplete = false;
  EXPECT_TRUE(ParseChunks({"data: done\n\ndata: cut"}, &incomplete).size() == 1);
  EXPECT_TRUE(incomplete);
  auto lenient = ParseChunks({"data: done\n\ndata: cut"}, &incomplete, /*dispatch_incomplete=*/true);
  ASSERT_EQ(lenient.size(), 2u);
  EXPECT_EQ(lenient[1].data, "cut");
}

// The same stream split at every possible byte position, and into random pieces, gives the same events.
TEST(SseParserTest, SplitAnywhereGivesTheSameEvents) {
  const std::string stream =
      "\xEF\xBB\xBF: hi\r\nevent: a\r\ndata: 你好\r\n\r\ndata: x\rdata: y\r\rid: 3\ndata: {\"k\":\"v\"}\n\n:c\n\n";
  auto whole = Parse(stream);
  ASSERT_EQ(whole.size(), 3u);
  for (size_t i = 0; i <= stream.size(); ++i) {
    for (size_t j = i; j <= stream.size(); j += 3) {
      auto split = ParseChunks({stream.substr(0, i), stream.substr(i, j - i), stream.substr(j)});
      ASSERT_EQ(split, whole) << "split at " << i << " and " << j;
    }
  }
  std::mt19937 rng(3);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::string> chunks;
    for (size_t pos = 0; pos < stream.size();) {
      size_t n = 1 + rng() % 5;
      chunks.push_back(stream.substr(pos, n));
      pos += n;
    }
    ASSERT_EQ(ParseChunks(chunks), whole);
  }
}

}  // namespace
}  // namespace strata::llm
