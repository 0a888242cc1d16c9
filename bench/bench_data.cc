#include "bench_data.h"

#include <sys/stat.h>

#include <cstdio>
#include <fstream>

#include "strata/message/message_json.h"

namespace strata::bench {
namespace {

const char* kEnglish[] = {
    "The importer reads the header row before checking whether the file is empty, so an empty upload raises.",
    "I will run the test suite again with the verbose flag to see which assertion fails first.",
    "Refactor the retry loop so that it honours Retry-After and caps the backoff at thirty seconds.",
    "The migration adds a nullable column first and backfills it in batches of ten thousand rows.",
    "Let me check the configuration file and the environment variables the service actually sees.",
};
const char* kChinese[] = {
    "这个函数在文件为空时会抛出异常，我们需要先检查表头是否存在。",
    "请把重试逻辑改成指数退避，并且遵守服务端返回的 Retry-After 头。",
    "测试通过了，但是覆盖率报告显示错误处理分支没有被执行到。",
    "我先读取配置文件，再确认环境变量是否正确传递给了子进程。",
};
const char* kCode[] = {
    "def load(path):\n    with open(path, newline='') as f:\n        rows = list(csv.reader(f))\n    return rows[1:] if rows else []\n",
    "for (size_t i = 0; i < n; ++i) {\n  if (buf[i] == '\\n') ++lines;\n}\n",
    "SELECT id, created_at FROM events WHERE user_id = $1 ORDER BY created_at DESC LIMIT 50;\n",
};

std::string Pick(std::mt19937_64& rng, int n_parts) {
  std::string out;
  for (int i = 0; i < n_parts; ++i) {
    switch (rng() % 4) {
      case 0:
      case 1: out += kEnglish[rng() % std::size(kEnglish)]; break;
      case 2: out += kChinese[rng() % std::size(kChinese)]; break;
      case 3: out += kCode[rng() % std::size(kCode)]; break;
    }
    out += ' ';
  }
  return out;
}

}  // namespace

std::vector<Message> MakeTurn(std::mt19937_64& rng, int turn) {
  std::vector<Message> out;
  out.push_back(Message::User(Pick(rng, 1 + static_cast<int>(rng() % 3))));
  Message assistant;
  assistant.role = Role::kAssistant;
  assistant.content.push_back(ThinkPart{Pick(rng, 2), std::nullopt});
  assistant.content.push_back(TextPart{Pick(rng, 1)});
  int calls = 1 + static_cast<int>(rng() % 2);
  assistant.tool_calls.emplace();
  for (int c = 0; c < calls; ++c) {
    std::string id = "call_" + std::to_string(turn) + "_" + std::to_string(c);
    assistant.tool_calls->push_back(
        ToolCall{id, {c == 0 ? "read_file" : "grep", "{\"path\":\"src/module_" + std::to_string(rng() % 100) + ".py\",\"limit\":200}"},
                 std::nullopt, std::nullopt});
  }
  out.push_back(assistant);
  for (int c = 0; c < calls; ++c) {
    out.push_back(Message::ToolResult((*assistant.tool_calls)[c].id, Pick(rng, 3 + static_cast<int>(rng() % 6))));
  }
  out.push_back(Message::Assistant(Pick(rng, 2)));
  return out;
}

uint64_t EnsureContextLog(const std::string& path, uint64_t target_bytes, uint64_t* messages) {
  struct stat st;
  std::string count_path = path + ".count";
  if (::stat(path.c_str(), &st) == 0 && static_cast<uint64_t>(st.st_size) >= target_bytes) {
    std::ifstream in(count_path);
    if (in >> *messages) return static_cast<uint64_t>(st.st_size);
  }
  std::mt19937_64 rng(42);
  std::string buf;
  uint64_t written = 0;
  *messages = 0;
  FILE* f = std::fopen(path.c_str(), "wb");
  buf = "{\"role\": \"_system_prompt\", \"content\": \"You are a coding agent.\"}\n";
  for (int turn = 0; written + buf.size() < target_bytes; ++turn) {
    buf += "{\"role\": \"_checkpoint\", \"id\": " + std::to_string(turn) + "}\n";
    for (const Message& m : MakeTurn(rng, turn)) {
      AppendMessageJson(m, &buf);
      buf += '\n';
      ++*messages;
    }
    buf += "{\"role\": \"_usage\", \"token_count\": " + std::to_string(1000 + turn * 350) + "}\n";
    if (buf.size() > (1 << 20)) {
      std::fwrite(buf.data(), 1, buf.size(), f);
      written += buf.size();
      buf.clear();
    }
  }
  std::fwrite(buf.data(), 1, buf.size(), f);
  written += buf.size();
  std::fclose(f);
  std::ofstream(count_path) << *messages;
  return written;
}

}  // namespace strata::bench
