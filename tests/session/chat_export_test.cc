// Chat histories exported by other tools (session/chat_export.h). The fixtures are written here from the
// formats' public descriptions (docs/formats/chat-exports.md), not taken from anyone's export.
#include "strata/session/chat_export.h"

#include <gtest/gtest.h>

#include <fstream>

#include "strata/engine/engine.h"
#include "strata/engine/views.h"
#include "test_util.h"

namespace strata::session {
namespace {

std::vector<std::string> Texts(const ImportedConversation& c) {
  std::vector<std::string> out;
  for (const Message& m : c.messages) {
    out.push_back(std::string(m.role == Role::kUser ? "user: " : m.role == Role::kAssistant ? "assistant: " : "system: ") +
                  m.ExtractText());
  }
  return out;
}

// Two conversations as ChatGPT exports them: the first edited (the user's first question and its answer are an
// abandoned branch), with a hidden system message at the top; the second with an image, a reasoning recap
// and no title. Then a conversation whose mapping is not an object, one whose parents form a cycle, and one
// without any visible text.
constexpr const char* kChatGpt = R"json([
 {"id":"c1","conversation_id":"c1","title":"Pasta","create_time":1768425500.1,"update_time":1768425600.9,
  "current_node":"a2",
  "mapping":{
   "client-created-root":{"id":"client-created-root","message":null,"parent":null,"children":["s1"]},
   "s1":{"id":"s1","parent":"client-created-root","children":["u1","u2"],
     "message":{"id":"s1","author":{"role":"system","name":null,"metadata":{}},"create_time":null,
       "content":{"content_type":"text","parts":[""]},"weight":0,
       "metadata":{"is_visually_hidden_from_conversation":true},"recipient":"all"}},
   "u1":{"id":"u1","parent":"s1","children":["a1"],
     "message":{"id":"u1","author":{"role":"user"},"create_time":1768425501.2,
       "content":{"content_type":"text","parts":["Boil time for penne?"]},"recipient":"all"}},
   "a1":{"id":"a1","parent":"u1","children":[],
     "message":{"id":"a1","author":{"role":"assistant"},"create_time":1768425505.0,
       "content":{"content_type":"text","parts":["About 11 minutes."]},"recipient":"all"}},
   "u2":{"id":"u2","parent":"s1","children":["t1"],
     "message":{"id":"u2","author":{"role":"user"},"create_time":1768425550.0,
       "content":{"content_type":"text","parts":["Boil time for spaghetti?"]},"recipient":"all"}},
   "t1":{"id":"t1","parent":"u2","children":["a2"],
     "message":{"id":"t1","author":{"role":"assistant"},"create_time":1768425551.0,
       "content":{"content_type":"code","language":"python","text":"print(9)"},"recipient":"python"}},
   "a2":{"id":"a2","parent":"t1","children":[],
     "message":{"id":"a2","author":{"role":"assistant"},"create_time":1768425555.0,
       "content":{"content_type":"text","parts":["9 to 10 minutes."]},"recipient":"all"}}}},
 {"id":"c2","title":null,"create_time":1768500000.0,"current_node":"b3",
  "mapping":{
   "r":{"id":"r","message":null,"parent":null,"children":["b1"]},
   "b1":{"id":"b1","parent":"r","children":["b2"],"message":{"id":"b1","author":{"role":"user"},
     "content":{"content_type":"multimodal_text","parts":[{"content_type":"image_asset_pointer",
       "asset_pointer":"sediment://file_0001","size_bytes":6543},"What is this?"]},"recipient":"all"}},
   "b2":{"id":"b2","parent":"b1","children":["b3"],"message":{"id":"b2","author":{"role":"assistant"},
     "content":{"content_type":"reasoning_recap","content":"Thought for 6s"},"recipient":"all"}},
   "b3":{"id":"b3","parent":"b2","children":[],"message":{"id":"b3","author":{"role":"assistant"},
     "content":{"content_type":"text","parts":["A code editor's panel."]},"recipient":"all"}}}},
 {"id":"c3","title":"Broken","mapping":"not a tree"},
 {"id":"c4","title":"Loop","current_node":"x",
  "mapping":{"x":{"parent":"y","message":{"author":{"role":"user"},"content":{"content_type":"text","parts":["x"]}}},
             "y":{"parent":"x","message":{"author":{"role":"assistant"},"content":{"content_type":"text","parts":["y"]}}}}},
 {"id":"c5","title":"Hidden only","current_node":"h",
  "mapping":{"h":{"parent":null,"message":{"author":{"role":"system"},"content":{"content_type":"text","parts":["sys"]}}}}},
 42
])json";

TEST(ChatExportTest, ChatGptKeepsTheCurrentBranchsVisibleTextAndSkipsWhatItCannotRead) {
  auto parsed = ParseChatExport(kChatGpt, ChatExportFormat::kChatGpt, "conversations.json");
  ASSERT_OK(parsed);
  ASSERT_EQ(parsed->conversations.size(), 3u);
  const ImportedConversation& pasta = parsed->conversations[0];
  EXPECT_EQ(pasta.source_id, "chatgpt-c1");
  EXPECT_EQ(pasta.title, "Pasta");
  EXPECT_EQ(pasta.created_ms, 1768425500100);
  EXPECT_EQ(pasta.updated_ms, 1768425600900);
  EXPECT_EQ(Texts(pasta), (std::vector<std::string>{"user: Boil time for spaghetti?", "assistant: 9 to 10 minutes."}));
  const ImportedConversation& image = parsed->conversations[1];
  EXPECT_EQ(image.title, "");
  EXPECT_EQ(Texts(image), (std::vector<std::string>{"user: What is this?", "assistant: A code editor's panel."}));
  // The cycle ends the walk: both messages once, in order from the first reached parent.
  EXPECT_EQ(Texts(parsed->conversations[2]), (std::vector<std::string>{"assistant: y", "user: x"}));
  ASSERT_EQ(parsed->skipped.size(), 3u);
  EXPECT_EQ(parsed->skipped[0].where, "conversations.json[2] (Broken)");
  EXPECT_NE(parsed->skipped[0].reason.find("\"mapping\" is not an object"), std::string::npos);
  EXPECT_EQ(parsed->skipped[1].where, "conversations.json[4] (Hidden only)");
  EXPECT_NE(parsed->skipped[1].reason.find("no user or assistant text"), std::string::npos);
  EXPECT_EQ(parsed->skipped[2].where, "conversations.json[5]");
  EXPECT_NE(parsed->skipped[2].reason.find("not an object"), std::string::npos);
  // The whole file must be an array of conversations.
  EXPECT_EQ(ParseChatExport("{\"a\": 1}", ChatExportFormat::kChatGpt, "c.json").status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_NE(ParseChatExport("[{", ChatExportFormat::kChatGpt, "c.json").status().message().find("c.json: invalid JSON at byte 2"),
            std::string::npos);
}

TEST(ChatExportTest, ClaudeReadsBlocksOrTextFollowsTheChainAndNamesAttachments) {
  constexpr const char* kClaude = R"json([
   {"uuid":"d1","name":"Mint care","created_at":"2026-01-06T21:03:50.592817Z","updated_at":"2026-01-06T21:14:03Z",
    "chat_messages":[
     {"uuid":"m1","sender":"human","text":"My mint is wilting","content":[{"type":"text","text":"My mint is wilting"}],
      "created_at":"2026-01-06T21:03:55Z","attachments":[{"file_name":"notes.txt","extracted_content":"watered daily"}]},
     {"uuid":"m2","sender":"assistant","text":"","content":[
       {"type":"thinking","thinking":"Likely overwatering."},
       {"type":"tool_use","id":"toolu_01","name":"web_search","input":{"query":"mint wilting"}},
       {"type":"tool_result","tool_use_id":"toolu_01","content":[{"type":"text","text":"search results"}]},
       {"type":"text","text":"Check for standing water."}],"created_at":"2026-01-06T21:04:00Z"}]},
   {"uuid":"d2","name":"","created_at":"2025-03-01T10:00:00.000000+00:00",
    "chat_messages":[{"uuid":"m3","sender":"human","text":"","content":[]}]},
   {"uuid":"d3","name":"Edited","created_at":"2025-03-02T10:00:00Z",
    "chat_messages":[
     {"uuid":"e1","parent_message_uuid":"00000000-0000-4000-8000-000000000000","sender":"human","text":"First try",
      "content":[],"created_at":"2025-03-02T10:00:00Z"},
     {"uuid":"e2","parent_message_uuid":"e1","sender":"assistant","text":"Answer one","created_at":"2025-03-02T10:00:05Z"},
     {"uuid":"e3","parent_message_uuid":"00000000-0000-4000-8000-000000000000","sender":"human","text":"Second try",
      "created_at":"2025-03-02T10:01:00Z"},
     {"uuid":"e4","parent_message_uuid":"e3","sender":"assistant","text":"Answer two","created_at":"2025-03-02T10:01:05Z"}]},
   {"name":"No id","chat_messages":[]}
  ])json";
  auto parsed = ParseChatExport(kClaude, ChatExportFormat::kClaude, "conversations.json");
  ASSERT_OK(parsed);
  ASSERT_EQ(parsed->conversations.size(), 2u);
  const ImportedConversation& mint = parsed->conversations[0];
  EXPECT_EQ(mint.source_id, "claude-d1");
  EXPECT_EQ(mint.title, "Mint care");
  EXPECT_EQ(mint.created_ms, 1767733430592);
  EXPECT_EQ(Texts(mint), (std::vector<std::string>{"user: My mint is wilting\n[attached: notes.txt]",
                                                   "assistant: Check for standing water."}));
  // Edits sit side by side; the newest chain is the conversation.
  EXPECT_EQ(Texts(parsed->conversations[1]), (std::vector<std::string>{"user: Second try", "assistant: Answer two"}));
  ASSERT_EQ(parsed->skipped.size(), 2u);
  EXPECT_NE(parsed->skipped[0].reason.find("no user or assistant text"), std::string::npos);
  EXPECT_EQ(parsed->skipped[1].where, "conversations.json[3] (No id)");
  EXPECT_NE(parsed->skipped[1].reason.find("no \"uuid\""), std::string::npos);
  // Parent links that form a cycle end the chain where it repeats (it was skipped as having no text).
  auto cycle = ParseChatExport(
      R"([{"uuid":"u4","name":"cycle","chat_messages":[{"uuid":"a","sender":"human","text":"A","parent_message_uuid":"b"},)"
      R"({"uuid":"b","sender":"assistant","text":"B","parent_message_uuid":"a"}]}])",
      ChatExportFormat::kClaude, "cyc.json");
  ASSERT_OK(cycle);
  ASSERT_EQ(cycle->conversations.size(), 1u);
  EXPECT_EQ(Texts(cycle->conversations[0]), (std::vector<std::string>{"user: A", "assistant: B"}));
}

TEST(ChatExportTest, OpenAiJsonlIsOneConversationOrOnePerLineWithContentIds) {
  constexpr const char* kMessages =
      "{\"role\":\"system\",\"content\":\"Be brief.\"}\n"
      "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hi\"}]}\n"
      "\n"
      "not json\n"
      "{\"role\":\"assistant\",\"content\":\"Hello.\"}\n"
      "{\"messages\":[{\"role\":\"user\",\"content\":\"Q\"},{\"role\":\"assistant\",\"content\":\"A\"}]}\n"
      "{\"messages\":\"nope\"}\n";
  auto parsed = ParseChatExport(kMessages, ChatExportFormat::kOpenAiJsonl, "chats.jsonl");
  ASSERT_OK(parsed);
  ASSERT_EQ(parsed->conversations.size(), 2u);
  EXPECT_EQ(Texts(parsed->conversations[0]), (std::vector<std::string>{"user: Q", "assistant: A"}));
  EXPECT_EQ(Texts(parsed->conversations[1]),
            (std::vector<std::string>{"system: Be brief.", "user: Hi", "assistant: Hello."}));
  ASSERT_EQ(parsed->skipped.size(), 2u);
  EXPECT_EQ(parsed->skipped[0].where, "chats.jsonl line 4");
  EXPECT_EQ(parsed->skipped[1].where, "chats.jsonl line 7");
  // The same conversation has the same id (imports are idempotent by it); another has another.
  auto again = ParseChatExport(kMessages, ChatExportFormat::kOpenAiJsonl, "copy.jsonl");
  ASSERT_OK(again);
  EXPECT_EQ(again->conversations[1].source_id, parsed->conversations[1].source_id);
  EXPECT_NE(parsed->conversations[0].source_id, parsed->conversations[1].source_id);
  EXPECT_EQ(parsed->conversations[0].source_id.rfind("jsonl-", 0), 0u);
}

// A lone surrogate escape (half of an emoji cut in two) is allowed by JSON's grammar and refused by JSON
// readers: it refused the whole export. It is read as U+FFFD, and every conversation is kept; escaped
// backslashes and whole pairs are left as they are. A byte-order mark before a JSON Lines file is not its
// first line's damage.
TEST(ChatExportTest, ALoneSurrogateOrAByteOrderMarkCostsNoConversation) {
  const std::string convo = R"({"id":"ID","title":"T","current_node":"n","mapping":{"n":{"id":"n","parent":null,)"
                            R"("message":{"author":{"role":"user"},"content":{"content_type":"text","parts":["TEXT"]}}}}})";
  auto with = [&](std::string id, std::string text) {
    std::string c = convo;
    c.replace(c.find("ID"), 2, id);
    c.replace(c.find("TEXT"), 4, text);
    return c;
  };
  const std::string bytes = "[" + with("c1", "cut emoji \\ud83d here") + "," + with("c2", "whole \\ud83d\\ude00 pair") +
                            "," + with("c3", "a backslash \\\\ud83d, not an escape") + "]";
  auto parsed = ParseChatExport(bytes, ChatExportFormat::kChatGpt, "conversations.json");
  ASSERT_OK(parsed);
  ASSERT_EQ(parsed->conversations.size(), 3u);
  EXPECT_EQ(Texts(parsed->conversations[0]), std::vector<std::string>{"user: cut emoji \xEF\xBF\xBD here"});
  EXPECT_EQ(Texts(parsed->conversations[1]), std::vector<std::string>{"user: whole \xF0\x9F\x98\x80 pair"});
  EXPECT_EQ(Texts(parsed->conversations[2]), std::vector<std::string>{"user: a backslash \\ud83d, not an escape"});
  auto jsonl = ParseChatExport("\xEF\xBB\xBF{\"role\":\"user\",\"content\":\"hi \\ud83d\"}\n{\"role\":\"assistant\",\"content\":\"hello\"}\n",
                               ChatExportFormat::kOpenAiJsonl, "o.jsonl");
  ASSERT_OK(jsonl);
  EXPECT_TRUE(jsonl->skipped.empty()) << jsonl->skipped[0].reason;
  ASSERT_EQ(jsonl->conversations.size(), 1u);
  EXPECT_EQ(Texts(jsonl->conversations[0]), (std::vector<std::string>{"user: hi \xEF\xBF\xBD", "assistant: hello"}));
}

// An export is untrusted: JSON nested deep enough to overflow the stack of a recursive copy or dump is
// refused with the depth and where it was found, in every format, never crashing the process.
TEST(ChatExportTest, DeeplyNestedJsonIsAClearErrorInEveryFormat) {
  const std::string deep = std::string(200000, '[') + std::string(200000, ']');
  for (ChatExportFormat format : {ChatExportFormat::kChatGpt, ChatExportFormat::kClaude}) {
    for (const std::string& text : {deep, "{\"conversations\": " + deep + "}"}) {
      auto parsed = ParseChatExport(text, format, "export.json");
      ASSERT_FALSE(parsed.ok());
      EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
      EXPECT_NE(parsed.status().message().find("export.json: JSON nested deeper than 256 levels at byte"),
                std::string::npos)
          << parsed.status().message();
    }
  }
  const std::string lines = "{\"messages\": " + deep + "}\n{\"messages\": [{\"role\": \"user\", \"content\": \"Q\"}]}\n";
  auto jsonl = ParseChatExport(lines, ChatExportFormat::kOpenAiJsonl, "chats.jsonl");
  ASSERT_OK(jsonl);
  ASSERT_EQ(jsonl->conversations.size(), 1u) << "the good line is still read";
  ASSERT_EQ(jsonl->skipped.size(), 1u);
  EXPECT_EQ(jsonl->skipped[0].where, "chats.jsonl line 1");
  EXPECT_NE(jsonl->skipped[0].reason.find("nested deeper than"), std::string::npos) << jsonl->skipped[0].reason;
}

TEST(ChatExportTest, KimiContextKeepsItsSystemPromptAndMessagesAndReportsDamage) {
  strata::testing::TempDir tmp;
  const std::string path = tmp.File("context.jsonl");
  std::ofstream(path) << "{\"role\":\"_system_prompt\",\"content\":\"You are Kimi.\"}\n"
                      << "{\"role\":\"user\",\"content\":\"Plan the trip\"}\n"
                      << "{\"role\":\"_checkpoint\",\"id\":0}\n"
                      << "{\"role\":\"assistant\",\"content\":\"Day one: the coast.\"}\n"
                      << "{\"role\":\"_usage\",\"token_count\":42}\n"
                      << "{broken\n";
  auto read = ReadChatExport(path, ChatExportFormat::kKimi);
  ASSERT_OK(read);
  ASSERT_EQ(read->conversations.size(), 1u);
  EXPECT_EQ(Texts(read->conversations[0]), (std::vector<std::string>{"system: You are Kimi.", "user: Plan the trip",
                                                                    "assistant: Day one: the coast."}));
  EXPECT_EQ(read->conversations[0].source_id.rfind("kimi-", 0), 0u);
  ASSERT_EQ(read->skipped.size(), 1u);
  EXPECT_NE(read->skipped[0].where.find("context.jsonl line 6"), std::string::npos) << read->skipped[0].where;
  EXPECT_EQ(ReadChatExport(tmp.File("missing.jsonl"), ChatExportFormat::kKimi).status().code(), StatusCode::kNotFound);
}

TEST(ChatExportTest, FormatNamesAndIsoTimes) {
  for (const char* name : {"chatgpt", "claude", "kimi", "openai-jsonl"}) {
    auto format = ParseChatExportFormat(name);
    ASSERT_OK(format);
    EXPECT_EQ(ChatExportFormatName(*format), name);
  }
  EXPECT_NE(ParseChatExportFormat("gemini").status().message().find("expected chatgpt, claude"), std::string::npos);
  int64_t ms = 7;
  EXPECT_TRUE(ParseIsoTimeMs("1970-01-01T00:00:00Z", &ms));
  EXPECT_EQ(ms, 0);
  EXPECT_TRUE(ParseIsoTimeMs("2000-02-29T12:00:00+02:00", &ms));
  EXPECT_EQ(ms, 951818400000);
  EXPECT_TRUE(ParseIsoTimeMs("1969-12-31T23:59:59", &ms));
  EXPECT_EQ(ms, -1000);
  EXPECT_TRUE(ParseIsoTimeMs("2025-03-01T10:00:00.000000+00:00", &ms));
  EXPECT_EQ(ms, 1740823200000);
  for (const char* bad : {"", "2025-03-01", "2025-13-01T00:00:00Z", "2025-03-01T10:00:00Zjunk", "2025-03-01T10:00:00+5",
                          "yyyy-mm-ddThh:mm:ssZ"}) {
    EXPECT_FALSE(ParseIsoTimeMs(bad, &ms)) << bad;
  }
}

// ---- Engine::ImportConversations: the conversations become sessions, once ----

std::vector<std::string> SessionTexts(Engine& engine, const std::string& id) {
  auto messages = engine.SessionMessages(id);
  EXPECT_TRUE(messages.ok()) << messages.status().ToString();
  ImportedConversation c;
  if (messages.ok()) c.messages = *messages;
  return Texts(c);
}

TEST(ChatImportTest, EachConversationBecomesASessionOnceWithItsTitleAndTimes) {
  testing::TempDir dir;
  auto opened = Engine::Open({.data_dir = dir.File("data")});
  ASSERT_OK(opened);
  Engine& engine = **opened;
  auto exported = ParseChatExport(kChatGpt, ChatExportFormat::kChatGpt, "conversations.json");
  ASSERT_OK(exported);
  auto report = engine.ImportConversations(*exported, "alice");
  ASSERT_OK(report);
  ASSERT_EQ(report->imported.size(), 3u);
  EXPECT_EQ(report->skipped.size(), 3u);  // The export's own, passed on.
  EXPECT_TRUE(report->unchanged.empty());
  const std::string pasta = report->imported[0].session;
  EXPECT_EQ(pasta.rfind("chatgpt-", 0), 0u) << pasta;
  EXPECT_EQ(report->imported[0].messages, 2);
  auto info = engine.GetSession(pasta);
  ASSERT_OK(info);
  EXPECT_EQ(info->user, "alice");
  EXPECT_EQ(info->title, "Pasta");
  EXPECT_EQ(info->source, "chatgpt-c1");
  EXPECT_EQ(info->created_ms, 1768425500100);
  EXPECT_EQ(info->updated_ms, 1768425600900);
  EXPECT_EQ(SessionTexts(engine, pasta),
            (std::vector<std::string>{"user: Boil time for spaghetti?", "assistant: 9 to 10 minutes."}));
  auto view = views::SessionView(*info);
  EXPECT_EQ(view["title"], "Pasta");
  EXPECT_EQ(view["created_ms"], 1768425500100);

  // Again: nothing added, every conversation named as imported before.
  auto again = engine.ImportConversations(*exported, "alice");
  ASSERT_OK(again);
  EXPECT_TRUE(again->imported.empty());
  ASSERT_EQ(again->unchanged.size(), 3u);
  EXPECT_EQ(again->unchanged[0], pasta);
  auto all = engine.ListSessions();
  ASSERT_OK(all);
  EXPECT_EQ(all->size(), 3u);

  // Another user's import of the same export is theirs: other sessions.
  auto bobs = engine.ImportConversations(*exported, "bob");
  ASSERT_OK(bobs);
  ASSERT_EQ(bobs->imported.size(), 3u);
  EXPECT_NE(bobs->imported[0].session, pasta);

  // A session of that id that alice began by hand (no origin) is hers: never deleted, whatever its age; the
  // import steps over it to the conversation's next id. (It was taken for an import cut short and, two
  // minutes after its last change, deleted with its messages and archives.)
  ASSERT_OK(engine.DeleteSession(pasta, /*force=*/true));
  ASSERT_OK(engine.CreateSession("alice", "", pasta));
  ASSERT_OK(engine.AddMessages(pasta, std::vector<Message>{Message::User("my own note: the code is 4711")}));
  ASSERT_OK((*engine.sessions())->SetOrigin(pasta, {.created_ms = 1'000, .updated_ms = 2'000}));  // Long ago.
  auto beside = engine.ImportConversations(*exported, "alice");
  ASSERT_OK(beside);
  ASSERT_EQ(beside->imported.size(), 1u);
  EXPECT_NE(beside->imported[0].session, pasta);
  EXPECT_EQ(SessionTexts(engine, pasta), (std::vector<std::string>{"user: my own note: the code is 4711"}));
  // And the next import finds the conversation at that id, not a third copy.
  auto stepped = engine.ImportConversations(*exported, "alice");
  ASSERT_OK(stepped);
  EXPECT_TRUE(stepped->imported.empty());
  EXPECT_EQ(stepped->unchanged.size(), 3u);
  ASSERT_OK(engine.DeleteSession(beside->imported[0].session, /*force=*/true));

  // An import a crash cut short (the session made and marked as being imported, its origin never recorded)
  // is left alone while it may still be running, and done again, whole, once it is older than that.
  ASSERT_OK(engine.DeleteSession(pasta, /*force=*/true));
  ASSERT_OK(engine.CreateSession("alice", "", pasta));
  ASSERT_OK((*engine.sessions())->SetOrigin(pasta, {.title = "Pasta", .source = "importing chatgpt-c1"}));
  ASSERT_OK(engine.AddMessages(pasta, std::vector<Message>{Message::User("Boil time for spaghetti?")}));
  auto running = engine.ImportConversations(*exported, "alice");
  ASSERT_OK(running);
  EXPECT_TRUE(running->imported.empty());
  EXPECT_NE(running->skipped.back().reason.find("being imported by another call"), std::string::npos);
  ASSERT_OK((*engine.sessions())->SetOrigin(pasta, {.title = "Pasta", .source = "importing chatgpt-c1",
                                                    .created_ms = 1'000, .updated_ms = 2'000}));  // Long ago.
  auto redone = engine.ImportConversations(*exported, "alice");
  ASSERT_OK(redone);
  ASSERT_EQ(redone->imported.size(), 1u);
  EXPECT_EQ(redone->imported[0].session, pasta);
  EXPECT_EQ(redone->unchanged.size(), 2u);
  EXPECT_EQ(SessionTexts(engine, pasta).size(), 2u);
  EXPECT_EQ(engine.GetSession(pasta)->title, "Pasta");

  // A session of that id that is another user's is left alone, and the import takes another id
  // (AnotherUsersSessionOnTheImportsIdDoesNotBlockIt).
  ASSERT_OK(engine.DeleteSession(pasta, /*force=*/true));
  ASSERT_OK(engine.CreateSession("carol", "", pasta));
  auto taken = engine.ImportConversations(*exported, "alice");
  ASSERT_OK(taken);
  ASSERT_EQ(taken->imported.size(), 1u);
  EXPECT_NE(taken->imported[0].session, pasta);
  EXPECT_EQ(engine.GetSession(pasta)->user, "carol");
  EXPECT_TRUE(SessionTexts(engine, pasta).empty());

  EXPECT_EQ(engine.ImportConversations(*exported, "").status().code(), StatusCode::kInvalidArgument);
}

// A conversation id holding a NUL (stored as U+FFFD, as every backend keeps free text) is the same
// conversation on the next import: the raw id never matched its stored form, and every re-import made another
// copy until the ids ran out. A user name that is no id is refused whatever the export holds (an export
// with nothing to import let it through).
TEST(ChatImportTest, AnIdWithANulIsImportedOnceAndABadUserIsRefusedAlways) {
  testing::TempDir dir;
  auto opened = Engine::Open({.data_dir = dir.File("data")});
  ASSERT_OK(opened);
  Engine& engine = **opened;
  const std::string chatgpt = R"json([{"id": "abc\u0000def", "title": "t", "current_node": "n1", "mapping": {
      "r": {"id": "r", "message": null, "parent": null, "children": ["n1"]},
      "n1": {"id": "n1", "parent": "r", "children": [], "message": {"author": {"role": "user"},
             "content": {"content_type": "text", "parts": ["hello"]}}}}}])json";
  const std::string claude = R"json([{"uuid": "u\u0000v", "name": "c", "chat_messages": [
      {"sender": "human", "text": "hello", "created_at": "2026-01-01T00:00:00Z"}]}])json";
  for (auto [text, format] : {std::pair{chatgpt, ChatExportFormat::kChatGpt}, std::pair{claude, ChatExportFormat::kClaude}}) {
    auto exported = ParseChatExport(text, format, "conversations.json");
    ASSERT_OK(exported);
    ASSERT_EQ(exported->conversations.size(), 1u);
    auto first = engine.ImportConversations(*exported, "alice");
    ASSERT_OK(first);
    ASSERT_EQ(first->imported.size(), 1u);
    auto again = engine.ImportConversations(*exported, "alice");
    ASSERT_OK(again);
    EXPECT_TRUE(again->imported.empty()) << again->imported[0].session;
    EXPECT_EQ(again->unchanged.size(), 1u);
  }
  auto sessions = engine.ListSessions();
  ASSERT_OK(sessions);
  EXPECT_EQ(sessions->size(), 2u);
  auto nothing = ParseChatExport("[]", ChatExportFormat::kChatGpt, "empty.json");
  ASSERT_OK(nothing);
  EXPECT_EQ(engine.ImportConversations(*nothing, "Bad User").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(engine.ImportConversations(*nothing, "alice", "bad agent").status().code(), StatusCode::kInvalidArgument);
}

TEST(ChatImportTest, CommittedImportsQueueTheirMemoriesAndKeepTheirOriginAcrossOpens) {
  testing::TempDir dir;
  auto exported = ParseChatExport(kChatGpt, ChatExportFormat::kChatGpt, "conversations.json");
  ASSERT_OK(exported);
  std::string id;
  {
    auto opened = Engine::Open({.data_dir = dir.File("data")});
    ASSERT_OK(opened);
    auto report = (*opened)->ImportConversations(*exported, "alice", "", /*commit=*/true);
    ASSERT_OK(report);
    ASSERT_EQ(report->imported.size(), 3u);
    id = report->imported[0].session;
    EXPECT_EQ(report->imported[0].archive, 1);
    auto status = (*opened)->GetSessionStatus(id);
    ASSERT_OK(status);
    ASSERT_EQ(status->archives.size(), 1u);
    EXPECT_EQ(status->archives[0].messages, 2);
    ASSERT_EQ(status->jobs.size(), 1u);  // Phase 2 queued: the memories come when a worker runs it.
  }
  auto reopened = Engine::Open({.data_dir = dir.File("data")});
  ASSERT_OK(reopened);
  auto info = (*reopened)->GetSession(id);
  ASSERT_OK(info);
  EXPECT_EQ(info->title, "Pasta");
  EXPECT_EQ(info->created_ms, 1768425500100);
  EXPECT_EQ(info->updated_ms, 1768425600900);  // The commit's change is the import's, not a later one.
  auto again = (*reopened)->ImportConversations(*exported, "alice", "", /*commit=*/true);
  ASSERT_OK(again);
  EXPECT_EQ(again->unchanged.size(), 3u);
  EXPECT_EQ((*reopened)->GetSessionStatus(id)->archives.size(), 1u);  // Not committed twice.
}

// An import's session id can be worked out by anyone: another user who took it first made the import skip
// the conversation every time. It steps over to an id of its own, and finds it again when imported again.
TEST(ChatImportTest, AnotherUsersSessionOnTheImportsIdDoesNotBlockIt) {
  testing::TempDir dir;
  ImportedConversation c{.source_id = "chatgpt-trip", .title = "Trip", .created_ms = 1'000, .updated_ms = 2'000};
  c.messages = {Message::User("Where to in May?"), Message::Assistant("Lisbon.")};
  ChatExport exported{{c}, {}};
  std::string usual;
  {
    auto scratch = Engine::Open({.data_dir = dir.File("scratch")});
    ASSERT_OK(scratch);
    auto report = (*scratch)->ImportConversations(exported, "alice");
    ASSERT_OK(report);
    ASSERT_EQ(report->imported.size(), 1u);
    usual = report->imported[0].session;
  }
  auto opened = Engine::Open({.data_dir = dir.File("data")});
  ASSERT_OK(opened);
  Engine& engine = **opened;
  ASSERT_OK(engine.CreateSession("bob", "", usual));
  ASSERT_OK(engine.AddMessages(usual, std::vector<Message>{Message::User("bob's own words")}));
  auto report = engine.ImportConversations(exported, "alice");
  ASSERT_OK(report);
  ASSERT_EQ(report->imported.size(), 1u) << (report->skipped.empty() ? "" : report->skipped[0].reason);
  const std::string id = report->imported[0].session;
  EXPECT_NE(id, usual);
  EXPECT_EQ(engine.GetSession(id)->user, "alice");
  EXPECT_EQ(SessionTexts(engine, id), (std::vector<std::string>{"user: Where to in May?", "assistant: Lisbon."}));
  EXPECT_EQ(SessionTexts(engine, usual), std::vector<std::string>{"user: bob's own words"}) << "bob's session untouched";
  EXPECT_EQ(engine.ImportConversations(exported, "alice")->unchanged, std::vector<std::string>{id});
  // Bob's session gone, the import is still found where it went, not copied to the id freed.
  ASSERT_OK(engine.DeleteSession(usual, /*force=*/true));
  auto later = engine.ImportConversations(exported, "alice");
  ASSERT_OK(later);
  EXPECT_TRUE(later->imported.empty());
  EXPECT_EQ(later->unchanged, std::vector<std::string>{id});
}

// A conversation exported again after it went on gets its new messages (it was reported unchanged and kept
// its old ones), committed or not; one that no longer starts as the session does is named, not merged.
TEST(ChatImportTest, AConversationThatWentOnGetsItsNewMessages) {
  testing::TempDir dir;
  auto opened = Engine::Open({.data_dir = dir.File("data")});
  ASSERT_OK(opened);
  Engine& engine = **opened;
  auto conversation = [](std::vector<std::string> texts, int64_t updated) {
    ImportedConversation c{.source_id = "chatgpt-trip", .title = "Trip", .created_ms = 1'000, .updated_ms = updated};
    for (size_t i = 0; i < texts.size(); ++i) {
      c.messages.push_back(i % 2 == 0 ? Message::User(texts[i]) : Message::Assistant(texts[i]));
    }
    return c;
  };
  ChatExport first{{conversation({"Where to in May?", "Lisbon."}, 2'000)}, {}};
  auto report = engine.ImportConversations(first, "alice");
  ASSERT_OK(report);
  ASSERT_EQ(report->imported.size(), 1u);
  const std::string id = report->imported[0].session;
  ChatExport later{{conversation({"Where to in May?", "Lisbon.", "And in June?", "Porto."}, 3'000)}, {}};
  auto again = engine.ImportConversations(later, "alice");
  ASSERT_OK(again);
  ASSERT_EQ(again->imported.size(), 1u);
  EXPECT_TRUE(again->imported[0].continued);
  EXPECT_EQ(again->imported[0].messages, 2);
  EXPECT_EQ(SessionTexts(engine, id).size(), 4u);
  EXPECT_EQ(engine.GetSession(id)->updated_ms, 3'000);
  EXPECT_EQ(engine.ImportConversations(later, "alice")->unchanged, std::vector<std::string>{id});
  // Committed, then on again: the archived messages count as held, and the new ones are committed too.
  ASSERT_OK(engine.Commit(id, {}));
  ChatExport longer{{conversation({"Where to in May?", "Lisbon.", "And in June?", "Porto.", "July?", "Faro."}, 4'000)}, {}};
  auto committed = engine.ImportConversations(longer, "alice", "", /*commit=*/true);
  ASSERT_OK(committed);
  ASSERT_EQ(committed->imported.size(), 1u);
  EXPECT_EQ(committed->imported[0].messages, 2);
  EXPECT_EQ(committed->imported[0].archive, 2);
  EXPECT_EQ(engine.ImportConversations(longer, "alice")->unchanged.size(), 1u);
  // Another conversation under the same id (or one edited at its start) is named, not merged.
  ChatExport edited{{conversation({"Where to in May?", "Lisbon.", "And in June?", "Porto.", "July?", "Algarve.", "Aug?"}, 5'000)},
                    {}};
  ASSERT_OK(engine.AddMessages(id, std::vector<Message>{Message::User("a turn of my own")}));
  auto diverged = engine.ImportConversations(edited, "alice");
  ASSERT_OK(diverged);
  EXPECT_TRUE(diverged->imported.empty());
  ASSERT_EQ(diverged->skipped.size(), 1u);
  EXPECT_NE(diverged->skipped[0].reason.find("not merged"), std::string::npos) << diverged->skipped[0].reason;
  // Turns of the session's own, committed since, are compared too (they were counted as the conversation's).
  ASSERT_OK(engine.AddMessages(id, std::vector<Message>{Message::Assistant("my own reply")}));
  ASSERT_OK(engine.Commit(id, {}));
  ChatExport eight{{conversation({"Where to in May?", "Lisbon.", "And in June?", "Porto.", "July?", "Faro.", "Aug?", "Braga."}, 6'000)},
                   {}};
  auto archived = engine.ImportConversations(eight, "alice");
  ASSERT_OK(archived);
  EXPECT_TRUE(archived->imported.empty());
  EXPECT_TRUE(archived->unchanged.empty());
  ASSERT_EQ(archived->skipped.size(), 1u);
}

TEST(ChatImportTest, KimiContextBytesParseWithoutAFile) {
  auto parsed = ParseChatExport("{\"role\":\"user\",\"content\":\"Plan the trip\"}\n"
                                "{\"role\":\"assistant\",\"content\":\"Sure.\"}\n",
                                ChatExportFormat::kKimi, "uploads/context.jsonl");
  ASSERT_OK(parsed);
  ASSERT_EQ(parsed->conversations.size(), 1u);
  EXPECT_EQ(Texts(parsed->conversations[0]), (std::vector<std::string>{"user: Plan the trip", "assistant: Sure."}));
}

}  // namespace
}  // namespace strata::session
