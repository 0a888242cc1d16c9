#include "strata/message/stream_merge.h"

#include <gtest/gtest.h>

#include "strata/message/message_json.h"
#include "test_util.h"

namespace strata {
namespace {

ToolCall Call(std::string id, std::string name, std::optional<int> index = std::nullopt) {
  ToolCall c;
  c.id = std::move(id);
  c.function.name = std::move(name);
  c.index = index;
  return c;
}

ToolCallPart Frag(std::string s, std::optional<int> index = std::nullopt) { return ToolCallPart{std::move(s), index}; }

TEST(StreamMergeTest, InterleavedIndexedFragmentsAreNeverCrossWired) {
  std::vector<std::string> fired;
  StreamMerger merger([&](const ToolCall& c) { fired.push_back(c.id + "=" + c.function.arguments.value_or("?")); });
  merger.Push(ContentPart{TextPart{"Let me look."}});
  merger.Push(Call("a", "read", 0));
  merger.Push(Frag("{\"path\":", 0));
  merger.Push(Call("b", "grep", 1));
  merger.Push(Frag("{\"q\":", 1));
  merger.Push(Frag("\"x.txt\"}", 0));  // Back to call 0 after call 1 started.
  merger.Push(Frag("\"TODO\"}", 1));
  EXPECT_TRUE(fired.empty()) << "indexed calls stay open while fragments may still arrive";
  auto m = merger.Finish();
  ASSERT_OK(m);
  ASSERT_EQ(m->tool_calls->size(), 2u);
  EXPECT_EQ((*m->tool_calls)[0].function.arguments, "{\"path\":\"x.txt\"}");
  EXPECT_EQ((*m->tool_calls)[1].function.arguments, "{\"q\":\"TODO\"}");
  EXPECT_FALSE((*m->tool_calls)[0].index.has_value()) << "stream indices are not part of the message";
  EXPECT_EQ(fired, (std::vector<std::string>{"a={\"path\":\"x.txt\"}", "b={\"q\":\"TODO\"}"}));
}

TEST(StreamMergeTest, UnindexedCallCompletesWhenTheNextPartArrives) {
  std::vector<std::string> fired;
  StreamMerger merger([&](const ToolCall& c) { fired.push_back(c.id); });
  merger.Push(Call("a", "f"));
  merger.Push(Frag("{}"));
  EXPECT_TRUE(fired.empty());
  merger.Push(Call("b", "g"));
  EXPECT_EQ(fired, std::vector<std::string>{"a"});  // Dispatchable before the stream ends.
  merger.Push(ContentPart{TextPart{"done"}});
  EXPECT_EQ(fired, (std::vector<std::string>{"a", "b"}));
  ASSERT_OK(merger.Finish());
}

TEST(StreamMergeTest, SignedThinkClosesAndMediaNeverMerges) {
  auto m = MergeStream({ContentPart{ThinkPart{"a", std::nullopt}}, ContentPart{ThinkPart{"b", "sig"}},
                        ContentPart{ThinkPart{"c", std::nullopt}}, ContentPart{TextPart{"x"}},
                        ContentPart{MediaPart{MediaKind::kImage, "u", std::nullopt}},
                        ContentPart{MediaPart{MediaKind::kImage, "u", std::nullopt}}, ContentPart{TextPart{"y"}}});
  ASSERT_OK(m);
  ASSERT_EQ(m->content.size(), 6u);
  EXPECT_EQ(std::get<ThinkPart>(m->content[0]), (ThinkPart{"ab", "sig"}));
  EXPECT_EQ(std::get<ThinkPart>(m->content[1]), (ThinkPart{"c", std::nullopt}));
}

TEST(StreamMergeTest, EmptyAndThinkingOnlyStreamsAreRetryableErrors) {
  EXPECT_EQ(MergeStream({}).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(MergeStream({ContentPart{ThinkPart{"hmm", std::nullopt}}}).status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(MergeStream({ContentPart{TextPart{""}}}).status().code(), StatusCode::kUnavailable);
  EXPECT_OK(MergeStream({Call("a", "f")}));
}

}  // namespace
}  // namespace strata
