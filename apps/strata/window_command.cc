// `strata window assemble`: budgeted context assembly on a JSON description of the history.
//
// stdin: {"system_prompt"?, "pinned"?: [messages], "summary"?, "summary_tokens"?, "records": [...],
//         "token_counts"?: [...], "reserved_tokens"?, "max_tokens"?}
// Records are messages (kosong JSON); tool calls may also be written flat, {"id","name","arguments"}
// with arguments as an object. Explicit token_counts override the tokenizer per record.
// stdout: {"included_record_indices", "summary_included", "summary_over_budget", "budget", "total_tokens",
//          "messages", "warnings": [codes], "warning_details": [{"code","message","record_index"}]}
// An impossible budget: {"error":"invalid_budget","message":...} and exit 1.
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli_util.h"
#include "commands.h"
#include "strata/json/checked.h"
#include "strata/engine/views.h"
#include "strata/json/json_writer.h"
#include "strata/message/message_json.h"
#include "strata/window/assembler.h"

namespace strata::cli {
namespace {

using Json = nlohmann::ordered_json;

struct WindowArgs {
  std::optional<int64_t> max_tokens;
  int64_t reserve = 0;
  std::string encoding = "o200k_base";
};

// Accepts flat tool calls ({"id","name","arguments": object|string}) besides kosong's shape.
void NormaliseToolCalls(Json* record) {
  auto it = record->find("tool_calls");
  if (it == record->end() || !it->is_array()) return;
  for (Json& call : *it) {
    if (!call.is_object() || call.contains("function") || !call.contains("name")) continue;
    Json arguments = call.value("arguments", Json());
    Json function{{"name", call["name"]},
                  {"arguments", arguments.is_string() || arguments.is_null() ? arguments : Json(arguments.dump())}};
    // Types are left as given: the message parser reports a wrong one with its path.
    Json id = call.contains("id") ? call["id"] : Json("");
    call = Json{{"type", "function"}, {"id", std::move(id)}, {"function", std::move(function)}};
  }
}

Result<std::vector<Message>> MessagesFrom(const Json& input, const char* key) {
  auto it = input.find(key);
  if (it == input.end() || it->is_null()) return std::vector<Message>{};
  if (!it->is_array()) return Status::InvalidArgument(std::string(key) + ": expected a list of messages");
  Json list = *it;
  for (Json& record : list) {
    if (record.is_object()) NormaliseToolCalls(&record);
  }
  auto parsed = ParseMessages(list.dump());
  if (!parsed.ok()) return parsed.status().WithContext(key);
  return parsed;
}

Result<int64_t> IntField(const Json& input, const char* key, int64_t fallback) {
  auto it = input.find(key);
  if (it == input.end() || it->is_null()) return fallback;
  if (!it->is_number_integer()) return Status::InvalidArgument(std::string(key) + ": expected an integer");
  return it->get<int64_t>();
}

int RunAssemble(const WindowArgs& args) {
  auto text = ReadStdin();
  if (!text.ok()) return Fail(text.status());
  Json input = strata::json::ParseOrDiscard<Json>(*text);
  if (input.is_discarded() || !input.is_object()) {
    std::string why = input.is_discarded() ? json::DescribeSyntaxError(*text) : "not an object";
    return Fail(Status::InvalidArgument("stdin: expected a JSON object {\"records\":[...],...}: " + why));
  }
  auto records = MessagesFrom(input, "records");
  if (!records.ok()) return Fail(records.status());
  auto pinned = MessagesFrom(input, "pinned");
  if (!pinned.ok()) return Fail(pinned.status());

  window::AssembleOptions options;
  options.pinned = std::move(*pinned);
  auto max_tokens = IntField(input, "max_tokens", 0);
  auto reserved = IntField(input, "reserved_tokens", 0);
  if (!max_tokens.ok()) return Fail(max_tokens.status());
  if (!reserved.ok()) return Fail(reserved.status());
  if (args.max_tokens) *max_tokens = *args.max_tokens;  // The flag wins.
  if (!args.max_tokens && !input.contains("max_tokens")) {
    return Fail(Status::InvalidArgument("--max-tokens is required (or \"max_tokens\" in the input)"));
  }
  options.max_context_tokens = *max_tokens;
  options.reserve_for_reply = args.reserve;
  options.reserved_tokens = *reserved;
  if (auto it = input.find("system_prompt"); it != input.end() && !it->is_null()) {
    if (!it->is_string()) return Fail(Status::InvalidArgument("system_prompt: expected a string"));
    options.system_prompt = it->get<std::string>();
  }
  if (auto it = input.find("summary"); it != input.end() && !it->is_null()) {
    if (!it->is_string()) return Fail(Status::InvalidArgument("summary: expected a string or null"));
    options.summary = it->get<std::string>();
  }
  if (input.contains("summary_tokens") && !input["summary_tokens"].is_null()) {
    auto st = IntField(input, "summary_tokens", 0);
    if (!st.ok()) return Fail(st.status());
    options.summary_tokens = *st;
  }

  // Per-record counts: explicit ones (token_counts, or token_counts_full when token_counts is a counting
  // rule rather than numbers), else the tokenizer.
  const MessageTokenCounter* counter = LoadCounter(args.encoding);
  window::HistoryIndex index(counter);
  Json counts = input.value("token_counts", Json());
  if (!counts.is_array() && input.contains("token_counts_full")) counts = input["token_counts_full"];
  if (counts.is_array()) {
    if (counts.size() != records->size()) {
      return Fail(Status::InvalidArgument("token_counts: " + std::to_string(counts.size()) + " counts for " +
                                          std::to_string(records->size()) + " records"));
    }
    for (size_t i = 0; i < counts.size(); ++i) {
      if (!counts[i].is_number_integer() || counts[i].get<int64_t>() < 0) {
        return Fail(Status::InvalidArgument("token_counts[" + std::to_string(i) + "]: expected a non-negative integer"));
      }
      index.Append((*records)[i], counts[i].get<int64_t>());
    }
  } else {
    index.Sync(*records);
  }

  auto assembly = window::Assemble(*records, index, options, *counter);
  if (!assembly.ok()) {
    if (assembly.status().code() != StatusCode::kInvalidArgument) return Fail(assembly.status());
    Json out{{"error", "invalid_budget"}, {"message", assembly.status().message()}};
    std::cout << out.dump() << "\n";
    Fail(assembly.status());
    return 1;
  }
  std::cout << views::AssemblyJson(*records, *assembly, options) << "\n";
  return 0;
}

}  // namespace

void AddWindowCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<WindowArgs>();
  CLI::App* cmd = app.add_subcommand("window", "Context window: budgeted assembly");
  cmd->require_subcommand(1);
  CLI::App* assemble = cmd->add_subcommand(
      "assemble", "stdin {system_prompt?, summary?, summary_tokens?, records, token_counts?} -> what to send");
  assemble->add_option("--max-tokens", args->max_tokens, "The context window in tokens");
  assemble->add_option("--reserve", args->reserve, "Tokens kept free for the reply")->capture_default_str();
  assemble->add_option("--encoding", args->encoding, "Tokenizer: o200k_base, cl100k_base, or chars (characters / 4)")
      ->check(CLI::IsMember(CounterChoices()))
      ->capture_default_str();
  assemble->callback([args, exit_code] { *exit_code = RunAssemble(*args); });
}

}  // namespace strata::cli
