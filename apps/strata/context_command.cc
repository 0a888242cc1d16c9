// `strata context ...`: one process per operation on a kimi-cli compatible context file.
#include <iostream>
#include <string>

#include "cli_util.h"
#include "commands.h"
#include "strata/json/json_writer.h"
#include "strata/log/context_file_tools.h"
#include "strata/log/context_log.h"
#include "strata/message/message_json.h"
#include "provider_flags.h"
#include "strata/window/compaction.h"

namespace strata::cli {
namespace {

struct ContextArgs {
  std::string file;
  std::string input = "-";
  int64_t number = 0;
  bool user_message = false;
  std::string durability = "always";
  std::string tokenizer = "o200k_base";
  // compact
  ProviderSettings provider;
  std::string instruction;
  int64_t window = 128'000;
  int64_t keep_turns = 2;
};

// Opens and restores FILE, reporting skipped damage as warnings.
void WarnDamage(const std::string& file, const ScanSummary& scan) {
  for (const Damage& d : scan.damage) {
    Warn(file + ": " + d.ToString() + (d.kind == DamageKind::kInvalidUtf8 ? "" : " (skipped)"));
  }
}

Result<std::unique_ptr<ContextLog>> OpenRestored(const ContextArgs& args, bool read_only) {
  ContextLogOptions options;
  options.read_only = read_only;
  STRATA_ASSIGN_OR_RETURN(options.durability.policy, ParseDurability(args.durability));
  options.durability.batch_background_sync = false;  // One operation per process: Close() syncs.
  // The pending estimate (messages after the last usage mark) uses a real tokenizer when one is available.
  options.estimator = LoadCounter(args.tokenizer);
  std::unique_ptr<ContextLog> log = ContextLog::Open(args.file, options);
  STRATA_ASSIGN_OR_RETURN(bool restored, log->Restore());
  (void)restored;
  WarnDamage(args.file, log->restore_report().scan);
  return log;
}

// Runs `op` on the restored log, then closes it (which syncs) and prints `result_json` on success.
template <typename Op>
int Mutate(const ContextArgs& args, Op op) {
  auto log = OpenRestored(args, /*read_only=*/false);
  if (!log.ok()) return Fail(log.status());
  Result<std::string> out = op(**log);
  if (!out.ok()) return Fail(out.status());
  Status closed = (*log)->Close();
  if (!closed.ok()) return Fail(closed);
  std::cout << *out << "\n";
  return 0;
}

// Prints {history, token_count, token_count_with_pending, n_checkpoints, system_prompt}, streaming the history: each message goes out as it is read, in
// blocks of a megabyte, so a log of any size is shown in bounded memory. On a read error the output stops
// short and the exit status says so.
int RunShow(const ContextArgs& args) {
  const MessageTokenCounter* estimator = LoadCounter(args.tokenizer);
  std::string out = "{\"history\":[";
  out.reserve(2 << 20);
  bool first = true;
  auto flush = [&out] {
    std::cout.write(out.data(), static_cast<std::streamsize>(out.size()));
    out.clear();
  };
  auto replay = ReplayContext(
      PosixFileSystem(), args.file,
      [&](const Message& m) -> Status {
        if (!first) out.push_back(',');
        first = false;
        AppendMessageJson(m, &out);
        if (out.size() >= (1 << 20)) flush();
        return Status::Ok();
      },
      estimator);
  if (!replay.ok()) {
    flush();
    std::cout << std::endl;
    return Fail(replay.status());
  }
  WarnDamage(args.file, replay->report.scan);
  out += "],\"token_count\":" + std::to_string(replay->token_count) +
         ",\"token_count_with_pending\":" + std::to_string(replay->token_count_with_pending) +
         ",\"n_checkpoints\":" + std::to_string(replay->n_checkpoints) + ",\"system_prompt\":";
  if (replay->system_prompt) {
    json::AppendString(&out, *replay->system_prompt);
  } else {
    out += "null";
  }
  out += "}\n";
  flush();
  std::cout.flush();
  return 0;
}

int RunAppend(const ContextArgs& args) {
  std::string text;
  if (args.input == "-") {
    auto in = ReadStdin();
    if (!in.ok()) return Fail(in.status());
    text = std::move(*in);
  } else {
    text = args.input;
  }
  auto messages = ParseMessages(text);
  if (!messages.ok()) return Fail(messages.status());
  return Mutate(args, [&](ContextLog& log) -> Result<std::string> {
    STRATA_RETURN_IF_ERROR(log.Append(*messages));
    return "{\"appended\":" + std::to_string(messages->size()) + ",\"history_length\":" +
           std::to_string(log.history().size()) + "}";
  });
}

int RunCheck(const ContextArgs& args) {
  auto summary = CheckContextFile(PosixFileSystem(), args.file);
  if (!summary.ok()) return Fail(summary.status());
  std::cout << ScanSummaryToJson(args.file, *summary) << "\n";
  return summary->damaged() ? 1 : 0;
}

int RunRepair(const ContextArgs& args) {
  auto result = RepairContextFile(PosixFileSystem(), args.file);
  if (!result.ok()) return Fail(result.status());
  std::string out = "{\"file\":";
  json::AppendString(&out, json::ReplaceInvalidUtf8(args.file));  // A file name may be any bytes.
  out += ",\"repaired\":" + std::string(result->backup ? "true" : "false") + ",\"backup\":";
  if (result->backup) {
    json::AppendString(&out, json::ReplaceInvalidUtf8(*result->backup));
  } else {
    out += "null";
  }
  out += ",\"removed_lines\":" + std::to_string(result->removed_lines) +
         ",\"removed_bytes\":" + std::to_string(result->removed_bytes) + "}";
  std::cout << out << "\n";
  return 0;
}

int RunCompact(const ContextArgs& args) {
  auto config = LoadConfigFile(args.provider.config_file);
  if (!config.ok()) return Fail(config.status());
  auto provider = MakeProvider(args.provider, *config, WarnRetry);
  if (!provider.ok()) return Fail(provider.status());
  return Mutate(args, [&](ContextLog& log) -> Result<std::string> {
    window::CompactionOptions options;
    options.instruction = args.instruction;
    options.compaction_window = args.window;
    options.reserve_for_summary = std::min<int64_t>(4096, args.window / 4);
    options.keep_recent_turns = static_cast<size_t>(args.keep_turns);
    options.counter = LoadCounter(args.tokenizer);
    STRATA_ASSIGN_OR_RETURN(window::CompactionResult r, window::Compact(**provider, log.history(), options));
    std::string out = "{\"compacted\":" + std::to_string(r.compacted) + ",\"kept\":" + std::to_string(r.kept) +
                      ",\"tokens_before\":" + std::to_string(r.tokens_before) +
                      ",\"tokens_after\":" + std::to_string(r.tokens_after) +
                      ",\"llm_calls\":" + std::to_string(r.llm_calls) + ",\"chunks\":" + std::to_string(r.chunks) +
                      ",\"incremental\":" + (r.incremental ? "true" : "false") +
                      ",\"pruned_fallback\":" + (r.pruned_fallback ? "true" : "false");
    if (r.pruned_fallback) {
      out += ",\"llm_error\":";
      json::AppendString(&out, r.llm_error.message());
      Warn("the summary model failed (" + r.llm_error.message() + "); pruned old tool output instead");
    }
    if (r.compacted == 0 && !r.pruned_fallback) return out + ",\"rotation\":null}";
    int64_t tokens = r.tokens_after;
    if (log.system_prompt()) {
      Message system = Message::System(*log.system_prompt());
      tokens += options.counter->CountMessages({&system, 1});
    }
    STRATA_ASSIGN_OR_RETURN(std::string rotation, window::WriteCompaction(&log, r, tokens));
    out += ",\"rotation\":";
    json::AppendString(&out, rotation);
    return out + "}";
  });
}

}  // namespace

void AddContextCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ContextArgs>();
  CLI::App* context = app.add_subcommand("context", "Operate on a kimi-cli compatible context.jsonl file");
  context->require_subcommand(1);
  context->add_option("--durability", args->durability, "Sync policy for writes: none, batch or always")
      ->check(CLI::IsMember({"none", "batch", "always"}))
      ->capture_default_str();
  context->add_option("--tokenizer", args->tokenizer,
                      "Counter for token_count_with_pending: o200k_base, cl100k_base, or chars (kimi-cli's chars/4)")
      ->check(CLI::IsMember(CounterChoices()))
      ->capture_default_str();

  auto add = [&](const char* name, const char* help) {
    CLI::App* sub = context->add_subcommand(name, help);
    sub->add_option("FILE", args->file, "The context file")->required();
    return sub;
  };

  add("show", "Print {history, token_count, token_count_with_pending, n_checkpoints, system_prompt}")
      ->callback([=] { *exit_code = RunShow(*args); });

  CLI::App* append = add("append", "Append one message object or an array of them (one batch)");
  append->add_option("JSON", args->input, "The message JSON, or - for stdin (the default)");
  append->callback([=] { *exit_code = RunAppend(*args); });

  CLI::App* usage = add("usage", "Record the provider-reported token count");
  usage->add_option("N", args->number, "Token count")->required()->check(NonNegative());
  usage->callback([=] {
    *exit_code = Mutate(*args, [&](ContextLog& log) -> Result<std::string> {
      STRATA_RETURN_IF_ERROR(log.UpdateTokenCount(args->number));
      return "{\"token_count\":" + std::to_string(log.token_count()) + "}";
    });
  });

  CLI::App* checkpoint = add("checkpoint", "Add a checkpoint; prints its id");
  checkpoint->add_flag("--user-message", args->user_message, "Also add the user message <system>CHECKPOINT n</system>");
  checkpoint->callback([=] {
    *exit_code = Mutate(*args, [&](ContextLog& log) -> Result<std::string> {
      STRATA_ASSIGN_OR_RETURN(int64_t id, log.Checkpoint(args->user_message));
      return "{\"checkpoint\":" + std::to_string(id) + "}";
    });
  });

  CLI::App* revert = add("revert", "Drop checkpoint ID and everything after it (old file kept as <stem>_N.jsonl)");
  revert->add_option("ID", args->number, "Checkpoint id")->required();
  revert->callback([=] {
    *exit_code = Mutate(*args, [&](ContextLog& log) -> Result<std::string> {
      STRATA_RETURN_IF_ERROR(log.RevertTo(args->number));
      return "{\"reverted_to\":" + std::to_string(args->number) + ",\"history_length\":" +
             std::to_string(log.history().size()) + ",\"n_checkpoints\":" + std::to_string(log.n_checkpoints()) + "}";
    });
  });

  add("clear", "Empty the context (old file kept as <stem>_N.jsonl)")->callback([=] {
    *exit_code = Mutate(*args, [&](ContextLog& log) -> Result<std::string> {
      STRATA_RETURN_IF_ERROR(log.Clear());
      return std::string("{\"cleared\":true}");
    });
  });

  CLI::App* prompt = add("system-prompt", "Set the system prompt record (first line), atomically");
  prompt->add_option("TEXT", args->input, "The prompt, or - for stdin")->required();
  prompt->callback([=] {
    std::string text = args->input;
    if (text == "-") {
      auto in = ReadStdin();
      if (!in.ok()) {
        *exit_code = Fail(in.status());
        return;
      }
      text = std::move(*in);
    }
    *exit_code = Mutate(*args, [&](ContextLog& log) -> Result<std::string> {
      STRATA_RETURN_IF_ERROR(log.WriteSystemPrompt(text));
      return std::string("{\"system_prompt_set\":true}");
    });
  });

  CLI::App* compact = add("compact", "Summarise the older conversation with a model and rewrite the log "
                                     "(old file kept as <stem>_N.jsonl)");
  AddProviderFlags(compact, &args->provider);
  compact->add_option("--instruction", args->instruction, "What the summary should focus on");
  compact->add_option("--window", args->window, "The compaction model's context window in tokens")
      ->check(Positive())
      ->capture_default_str();
  compact->add_option("--keep-turns", args->keep_turns, "Recent user turns kept verbatim")
      ->check(NonNegative())
      ->capture_default_str();
  compact->callback([=] { *exit_code = RunCompact(*args); });

  CLI::App* trim = add("trim", "Keep only the newest N messages (whole tool groups); the old file is kept as "
                               "<stem>_N.jsonl, so nothing is deleted");
  trim->add_option("N", args->number, "Messages to keep")->required()->check(NonNegative());
  trim->callback([=] {
    *exit_code = Mutate(*args, [&](ContextLog& log) -> Result<std::string> {
      size_t before = log.history().size();
      STRATA_ASSIGN_OR_RETURN(std::string rotation, window::Trim(&log, static_cast<size_t>(args->number)));
      std::string out = "{\"kept\":" + std::to_string(log.history().size()) +
                        ",\"archived\":" + std::to_string(before - log.history().size()) + ",\"rotation\":";
      json::AppendString(&out, rotation);
      return out + "}";
    });
  });

  add("check", "Report damaged lines and a torn tail as JSON; exit 1 when damage is found")
      ->callback([=] { *exit_code = RunCheck(*args); });
  add("repair", "Cut damage out into a rotated backup, leaving a clean restorable file")
      ->callback([=] { *exit_code = RunRepair(*args); });
}

}  // namespace strata::cli
