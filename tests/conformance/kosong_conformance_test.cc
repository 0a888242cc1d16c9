// Runs the data-driven cases in ../shared/conformance/kosong/ (areas message_json, stream_merge,
// context_file, linear_storage). A missing directory is a failure, not a skip.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "strata/log/context_log.h"
#include "strata/log/linear_storage.h"
#include "strata/message/message_json.h"
#include "strata/message/stream_merge.h"
#include "conformance/conformance_cases.h"
#include "test_util.h"

namespace strata {
namespace {

using Json = nlohmann::ordered_json;
using testing::LoadCases;
namespace fs = std::filesystem;

std::string Base64Decode(const std::string& in) {
  static const std::string kChars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  int val = 0, bits = -8;
  for (char c : in) {
    size_t pos = kChars.find(c);
    if (pos == std::string::npos) continue;
    val = (val << 6) + static_cast<int>(pos);
    bits += 6;
    if (bits >= 0) {
      out.push_back(static_cast<char>((val >> bits) & 0xFF));
      bits -= 8;
    }
  }
  return out;
}

Json Dump(const Message& m) { return Json::parse(MessageToJson(m)); }

TEST(KosongConformance, MessageJson) {
  for (const Json& c : LoadCases("message_json")) {
    SCOPED_TRACE(c["id"].get<std::string>());
    auto parsed = ParseMessage(c["input"]["message"].dump());
    const Json& expected = c["expected"];
    if (expected.contains("error")) {
      EXPECT_FALSE(parsed.ok());
      EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
      if (expected.contains("message_contains")) {
        for (const auto& needle : expected["message_contains"]) {
          EXPECT_NE(parsed.status().message().find(needle.get<std::string>()), std::string::npos)
              << parsed.status().message();
        }
      }
      continue;
    }
    ASSERT_OK(parsed);
    if (expected.contains("dump_text")) {
      EXPECT_EQ(MessageToJson(*parsed), expected["dump_text"].get<std::string>());
    }
    EXPECT_EQ(Dump(*parsed), expected["dump"]);
    // The dump reads back to the same message.
    auto again = ParseMessage(MessageToJson(*parsed));
    ASSERT_OK(again);
    EXPECT_EQ(*again, *parsed);
  }
}

TEST(KosongConformance, StreamMerge) {
  for (const Json& c : LoadCases("stream_merge")) {
    SCOPED_TRACE(c["id"].get<std::string>());
    std::vector<std::string> order;
    StreamMerger merger([&](const ToolCall& call) { order.push_back(call.id); });
    for (const Json& part : c["input"]["parts"]) {
      auto parsed = ParseStreamedPart(part.dump());
      ASSERT_OK(parsed);
      merger.Push(*parsed);
    }
    auto message = merger.Finish();
    const Json& expected = c["expected"];
    if (expected.contains("error")) {
      ASSERT_FALSE(message.ok());
      EXPECT_EQ(message.status().code(), StatusCode::kUnavailable);  // APIEmptyResponseError: retryable.
      continue;
    }
    ASSERT_OK(message);
    EXPECT_EQ(Json::parse(MessageToJsonContentList(*message)), expected["message"]);
    if (expected.contains("tool_call_order")) {
      EXPECT_EQ(Json(order), expected["tool_call_order"]);
    }
  }
}

Json StateOf(const ContextLog& log) {
  Json history = Json::array();
  for (const Message& m : log.history()) history.push_back(Dump(m));
  return Json{{"history", history},
              {"token_count", log.token_count()},
              {"token_count_with_pending", log.token_count_with_pending()},
              {"n_checkpoints", log.n_checkpoints()},
              {"system_prompt", log.system_prompt() ? Json(*log.system_prompt()) : Json(nullptr)}};
}

std::vector<Message> MessagesOf(const Json& list) {
  std::vector<Message> out;
  for (const Json& m : list) {
    auto parsed = ParseMessage(m.dump());
    EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
    if (parsed.ok()) out.push_back(*parsed);
  }
  return out;
}

void ExpectFileMatches(const std::string& actual, const std::string& expected, const std::string& mode,
                       const std::string& name) {
  SCOPED_TRACE(name);
  if (mode == "bytes") {
    EXPECT_EQ(actual, expected);
    return;
  }
  auto lines = [](const std::string& s) {
    std::vector<Json> out;
    size_t start = 0;
    while (start < s.size()) {
      size_t nl = s.find('\n', start);
      std::string line = s.substr(start, nl == std::string::npos ? std::string::npos : nl - start);
      if (!line.empty()) out.push_back(Json::parse(line));
      if (nl == std::string::npos) break;
      start = nl + 1;
    }
    return out;
  };
  EXPECT_EQ(lines(actual), lines(expected));
}

std::map<std::string, std::string> DirectoryContents(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (const auto& entry : fs::directory_iterator(dir)) {
    out[entry.path().filename().string()] = testing::ReadFileOrDie(entry.path().string());
  }
  return out;
}

TEST(KosongConformance, ContextFile) {
  for (const Json& c : LoadCases("context_file")) {
    SCOPED_TRACE(c["id"].get<std::string>());
    testing::TempDir dir;
    const Json& input = c["input"];
    std::map<std::string, std::string> initial;
    if (input.contains("initial_files")) {
      for (auto& [name, data] : input["initial_files"].items()) initial[name] = data.get<std::string>();
    }
    if (input.contains("initial_files_base64")) {
      for (auto& [name, data] : input["initial_files_base64"].items()) initial[name] = Base64Decode(data.get<std::string>());
    }
    for (const auto& [name, data] : initial) testing::WriteFileOrDie(dir.File(name), data);

    std::string backend = input.value("backend", "context.jsonl");
    auto log = ContextLog::Open(dir.File(backend));
    Json results = Json::array();
    for (const Json& op : input["ops"]) {
      std::string name = op["op"];
      Json result;
      Status status;
      if (name == "restore") {
        auto r = log->Restore();
        status = r.status();
        if (r.ok()) result["return"] = *r;
      } else if (name == "append") {
        status = log->Append(MessagesOf(op["messages"]));
      } else if (name == "checkpoint") {
        status = log->Checkpoint(op.value("add_user_message", false)).status();
      } else if (name == "revert_to") {
        status = log->RevertTo(op["id"].get<int64_t>());
      } else if (name == "clear") {
        status = log->Clear();
      } else if (name == "update_token_count") {
        status = log->UpdateTokenCount(op["n"].get<int64_t>());
      } else if (name == "write_system_prompt") {
        status = log->WriteSystemPrompt(op["prompt"].get<std::string>());
      } else {
        ADD_FAILURE() << "unknown op " << name;
      }
      result["ok"] = status.ok();
      results.push_back(result);
    }
    ASSERT_OK(log->Close());
    const Json& expected = c["expected"];
    if (expected.contains("results")) {
      ASSERT_EQ(results.size(), expected["results"].size());
      for (size_t i = 0; i < results.size(); ++i) {
        SCOPED_TRACE("op " + std::to_string(i));
        EXPECT_EQ(results[i]["ok"], expected["results"][i]["ok"]);
        if (expected["results"][i].contains("return")) {
          EXPECT_EQ(results[i]["return"], expected["results"][i]["return"]);
        }
      }
    }
    if (expected.contains("state")) {
      EXPECT_EQ(StateOf(*log), expected["state"]);
    }
    auto after = DirectoryContents(dir.path());
    if (expected.contains("files")) {
      std::set<std::string> expected_names, actual_names;
      for (auto& [name, data] : expected["files"].items()) {
        expected_names.insert(name);
        ASSERT_TRUE(after.count(name)) << "missing file " << name;
        ExpectFileMatches(after[name], data.get<std::string>(), expected.value("file_compare", "json_lines"), name);
      }
      for (const auto& [name, data] : after) actual_names.insert(name);
      EXPECT_EQ(actual_names, expected_names) << "the directory holds exactly the expected files";
    }
    if (expected.contains("files_unchanged")) {
      for (const Json& name : expected["files_unchanged"]) EXPECT_EQ(after[name.get<std::string>()], initial[name.get<std::string>()]);
    }
  }
}

TEST(KosongConformance, LinearStorage) {
  for (const Json& c : LoadCases("linear_storage")) {
    SCOPED_TRACE(c["id"].get<std::string>());
    testing::TempDir dir;
    const Json& input = c["input"];
    std::string path = dir.File(input["path"].get<std::string>());
    if (input.contains("initial_file")) testing::WriteFileOrDie(path, input["initial_file"].get<std::string>());
    JsonlLinearStorage storage(path);
    LinearContext context(&storage);
    Json results = Json::array();
    for (const Json& op : input["ops"]) {
      std::string name = op["op"];
      Status status;
      if (name == "restore") {
        status = storage.Restore().status();
      } else if (name == "append") {
        status = context.AddMessage(MessagesOf(Json::array({op["message"]}))[0]);
      } else if (name == "mark_token_count") {
        status = context.MarkTokenCount(op["n"].get<int64_t>());
      } else {
        ADD_FAILURE() << "unknown op " << name;
      }
      results.push_back(Json{{"ok", status.ok()}});
    }
    ASSERT_OK(storage.Close());
    const Json& expected = c["expected"];
    if (expected.contains("file")) {
      EXPECT_EQ(testing::ReadFileOrDie(path), expected["file"].get<std::string>());
    }
    if (expected.contains("messages")) {
      Json messages = Json::array();
      for (const Message& m : context.history()) messages.push_back(Dump(m));
      EXPECT_EQ(messages, expected["messages"]);
    }
    if (expected.contains("token_count")) {
      EXPECT_EQ(context.token_count(), expected["token_count"].get<int64_t>());
    }
    if (expected.contains("results")) {
      ASSERT_EQ(results.size(), expected["results"].size());
      for (size_t i = 0; i < results.size(); ++i) EXPECT_EQ(results[i]["ok"], expected["results"][i]["ok"]) << "op " << i;
    }
  }
}

}  // namespace
}  // namespace strata
