// Fuzz target: the MCP server's JSON-RPC framing (server/mcp.h) over stdio. Any bytes on stdin give, on
// stdout, only complete lines, each a JSON-RPC 2.0 object: a result, or an error with an integer code and
// a message. Nothing escapes, nothing hangs, and the server still answers a ping afterwards.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "strata/engine/engine.h"
#include "strata/server/mcp.h"

namespace {

// The engine's data directory, removed when the process exits normally (a run that crashes leaves it, to look at).
const std::string& DataDir() {
  static const std::string dir =
      (std::filesystem::temp_directory_path() / ("strata-mcp-fuzz-" + std::to_string(::getpid()))).string();
  return dir;
}

strata::Engine* TheEngine() {
  static strata::Engine* engine = [] {
    auto opened = strata::Engine::Open({.data_dir = DataDir()});
    if (!opened.ok()) std::abort();
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(DataDir(), ec);
    });
    return opened->release();  // Never closed: its directory is removed at exit.
  }();
  return engine;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string input(reinterpret_cast<const char*>(data), size);
  input += "\n{\"jsonrpc\": \"2.0\", \"id\": \"last-ping\", \"method\": \"ping\"}\n";
  std::FILE* in = fmemopen(input.data(), input.size(), "r");
  char* out_buf = nullptr;
  size_t out_size = 0;
  std::FILE* out = open_memstream(&out_buf, &out_size);
  if (in == nullptr || out == nullptr) std::abort();
  strata::Status served = strata::server::ServeMcpStdio(TheEngine(), {.user = "fuzz", .max_message_bytes = 1 << 16}, in, out);
  std::fclose(in);
  std::fclose(out);
  std::string_view written(out_buf, out_size);
  if (!served.ok()) std::abort();
  if (!written.empty() && written.back() != '\n') std::abort();  // Only whole lines.
  bool pinged = false;
  size_t start = 0;
  while (start < written.size()) {
    size_t nl = written.find('\n', start);
    auto j = nlohmann::json::parse(written.substr(start, nl - start), nullptr, false);
    start = nl + 1;
    if (!j.is_object() || j.value("jsonrpc", "") != "2.0") std::abort();
    if (j.contains("method")) continue;  // A progress notification.
    if (j.contains("error")) {
      const auto& e = j["error"];
      if (!e.is_object() || !e.contains("code") || !e["code"].is_number_integer() || !e.contains("message") ||
          !e["message"].is_string() || e["message"].get<std::string>().empty()) {
        std::abort();
      }
    } else if (!j.contains("result")) {
      std::abort();
    }
    if (j.value("id", nlohmann::json()) == "last-ping" && j.contains("result")) pinged = true;
  }
  if (!pinged) std::abort();  // The server still answers after whatever came before.
  std::free(out_buf);
  return 0;
}
