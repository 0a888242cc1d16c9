#include "strata/message/message_json.h"

#include <gtest/gtest.h>

#include "strata/message/part_registry.h"
#include "strata/message/token_estimator.h"
#include "test_util.h"

namespace strata {
namespace {

TEST(MessageJsonTest, NullArgumentsSurviveARoundTrip) {
  // kosong drops `arguments: null` on dump and then rejects the line on read; Strata reads it back as null.
  auto m = ParseMessage(R"({"role":"assistant","content":[],"tool_calls":[{"type":"function","id":"c1","function":{"name":"noargs","arguments":null}}]})");
  ASSERT_OK(m);
  std::string dumped = MessageToJson(*m);
  EXPECT_EQ(dumped, R"({"role":"assistant","content":[],"tool_calls":[{"type":"function","id":"c1","function":{"name":"noargs"}}]})");
  auto back = ParseMessage(dumped);
  ASSERT_OK(back);
  EXPECT_FALSE((*back->tool_calls)[0].function.arguments.has_value());
  EXPECT_EQ(*back, *m);
}

TEST(MessageJsonTest, EmptyArgumentsStayDistinctFromNull) {
  auto m = ParseMessage(R"({"role":"assistant","content":null,"tool_calls":[{"id":"c","function":{"name":"f","arguments":""}}]})");
  ASSERT_OK(m);
  EXPECT_EQ((*m->tool_calls)[0].function.arguments, std::optional<std::string>(""));
  EXPECT_EQ(MessageToJson(*m), R"({"role":"assistant","content":[],"tool_calls":[{"type":"function","id":"c","function":{"name":"f","arguments":""}}]})");
}

TEST(MessageJsonTest, AllPartTypesRoundTrip) {
  const char* text = R"({"role":"user","name":"bob","content":[{"type":"text","text":"a\nb"},{"type":"think","think":"hm","encrypted":"sig"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAA","id":null}},{"type":"audio_url","audio_url":{"url":"https://a/b.mp3","id":"f1"}},{"type":"video_url","video_url":{"url":"https://v","id":null}}],"tool_call_id":"t","partial":true})";
  auto m = ParseMessage(text);
  ASSERT_OK(m);
  EXPECT_EQ(MessageToJson(*m), text);
  EXPECT_EQ(m->ExtractText("|"), "a\nb");
}

TEST(MessageJsonTest, ErrorsNameThePathInsideTheMessage) {
  auto unknown = ParseMessage(R"({"role":"user","content":[{"type":"text","text":"x"},{"type":"hologram","id":"f"}]})");
  ASSERT_FALSE(unknown.ok());
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("content[1].type"), std::string::npos) << unknown.status().message();
  EXPECT_NE(unknown.status().message().find("\"hologram\""), std::string::npos);
  // A file part (OpenAI's) is kept as it came; one without its "file" object is refused, naming the part.
  const std::string file = R"({"role":"user","content":[{"type":"file","file":{"file_id":"file-1","filename":"a.pdf"}}]})";
  auto kept = ParseMessage(file);
  ASSERT_OK(kept);
  EXPECT_NE(MessageToJson(*kept).find(R"("file":{"file_id":"file-1","filename":"a.pdf"})"), std::string::npos)
      << MessageToJson(*kept);
  auto bare = ParseMessage(R"({"role":"user","content":[{"type":"file","file_id":"f"}]})");
  ASSERT_FALSE(bare.ok());
  EXPECT_NE(bare.status().message().find("content[0]: file needs an object \"file\""), std::string::npos)
      << bare.status().message();
  // An image's detail is kept when given, and written only then.
  auto detailed = ParseMessage(R"({"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png","detail":"high"}}]})");
  ASSERT_OK(detailed);
  EXPECT_EQ(std::get<MediaPart>(detailed->content[0]).detail, "high");
  EXPECT_NE(MessageToJson(*detailed).find(R"("detail":"high")"), std::string::npos) << MessageToJson(*detailed);
  auto plain = ParseMessage(R"({"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/a.png"}}]})");
  ASSERT_OK(plain);
  EXPECT_EQ(MessageToJson(*plain).find("detail"), std::string::npos);

  auto wrong = ParseMessage(R"({"role":"user","content":[{"type":"text","text":5}]})");
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("content[0].text: expected string, got integer"), std::string::npos)
      << wrong.status().message();

  EXPECT_FALSE(ParseMessage(R"({"role":"robot","content":"x"})").ok());
  EXPECT_FALSE(ParseMessage(R"({"content":"x"})").ok());
  EXPECT_FALSE(ParseMessage(R"({"role":"user"})").ok());
  EXPECT_FALSE(ParseMessage(R"({"role":"assistant","content":"","tool_calls":[{"type":"web","id":"1","function":{"name":"f"}}]})").ok());
  auto syntax = ParseMessage(R"({"role":"user","content":"x")");
  ASSERT_FALSE(syntax.ok());
  EXPECT_NE(syntax.status().message().find("invalid JSON at byte"), std::string::npos) << syntax.status().message();
}

TEST(MessageJsonTest, ArrayInputNamesTheBadIndex) {
  auto many = ParseMessages(R"([{"role":"user","content":"a"},{"role":"user","content":3}])");
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("index 1"), std::string::npos) << many.status().message();
  auto one = ParseMessages(R"({"role":"user","content":"a"})");
  ASSERT_OK(one);
  EXPECT_EQ(one->size(), 1u);
}

TEST(MessageJsonTest, RegisteredPartTypeIsKeptVerbatim) {
  ASSERT_OK(RegisterContentPartType("file_ref", [](std::string_view json) {
    return json.find("\"file_id\"") == std::string_view::npos ? Status::InvalidArgument("file_ref needs file_id")
                                                               : Status::Ok();
  }));
  EXPECT_EQ(RegisterContentPartType("file_ref").code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(RegisterContentPartType("text").code(), StatusCode::kFailedPrecondition);
  auto m = ParseMessage(R"({"role":"user","content":[{"type":"file_ref", "file_id":"f1","meta":{"n":1.50}}]})");
  ASSERT_OK(m);
  EXPECT_EQ(MessageToJson(*m), R"({"role":"user","content":[{"type":"file_ref","file_id":"f1","meta":{"n":1.5}}]})");
  auto invalid = ParseMessage(R"({"role":"user","content":[{"type":"file_ref"}]})");
  ASSERT_FALSE(invalid.ok());
  EXPECT_NE(invalid.status().message().find("file_ref needs file_id"), std::string::npos);
}

TEST(MessageJsonTest, ExtrasAreCanonicalised) {
  auto m = ParseMessage(R"({"role":"assistant","content":"","tool_calls":[{"id":"1","function":{"name":"f","arguments":"{}"},"extras":{ "sig" : "é", "n": null }}]})");
  ASSERT_OK(m);
  EXPECT_EQ(*(*m->tool_calls)[0].extras, R"({"sig":"é","n":null})");
}

TEST(MessageJsonTest, InvalidUtf8IsFoundBeforeWriting) {
  Message m = Message::User("ok");
  EXPECT_EQ(FindInvalidUtf8(m), "");
  m.content.push_back(TextPart{"bad\xff"});
  EXPECT_EQ(FindInvalidUtf8(m), "content[1].text: byte 3");
}

TEST(TokenEstimatorTest, MatchesKimiCharsOverFour) {
  std::vector<Message> messages = {Message::User("Old message 1"), Message::Assistant("Old reply 1")};
  EXPECT_EQ(DefaultTokenEstimator()->CountMessages(messages), 6);  // (13 + 11) / 4, summed before dividing.
  EXPECT_EQ(CountCodePoints("世界!"), 3);
}

}  // namespace
}  // namespace strata
