// `strata provider request|parse-stream`: the wire formats without the network.
//
//   request       stdin {"system_prompt","tools","history","options"[, "model"]} -> the exact JSON body
//   parse-stream  stdin: the raw SSE text of a response (or, with --non-stream, a JSON body)
//                 -> {"id","message","usage"}; a provider error -> {"error":"<kind>","message":...}, exit 1
#include <iostream>
#include <nlohmann/json.hpp>

#include "cli_util.h"
#include "commands.h"
#include "strata/json/checked.h"
#include "strata/json/json_writer.h"
#include "strata/llm/chat_error.h"
#include "strata/llm/provider.h"
#include "strata/llm/wire.h"
#include "strata/message/message_json.h"

namespace strata::cli {
namespace {

using Json = nlohmann::ordered_json;

struct ProviderArgs {
  std::string provider;
  std::string model;
  std::string options;
  bool non_stream = false;
};

// The provider's wire format and the options its preset implies (overridden by explicit ones).
Result<llm::ProviderKind> KindFor(const std::string& name) {
  if (auto preset = llm::FindProviderPreset(name); preset.ok()) return preset->kind;
  return llm::ParseProviderKind(name);
}

Result<std::vector<llm::ToolDeclaration>> ToolsFromJson(const Json& tools) {
  std::vector<llm::ToolDeclaration> out;
  if (tools.is_null()) return out;
  if (!tools.is_array()) return Status::InvalidArgument("tools: expected a list");
  for (size_t i = 0; i < tools.size(); ++i) {
    const Json* t = &tools[i];
    std::string where = "tools[" + std::to_string(i) + "]";
    if (!t->is_object()) return Status::InvalidArgument(where + ": expected an object");
    if (t->contains("function") && (*t)["function"].is_object()) t = &(*t)["function"];  // OpenAI style
    if (!t->contains("name") || !(*t)["name"].is_string()) {
      return Status::InvalidArgument(where + ".name: expected a string");
    }
    auto description = json::OptionalString(*t, "description", where);
    if (!description.ok()) return description.status();
    const Json* parameters = json::Field(*t, "parameters");
    if (parameters != nullptr && !parameters->is_null() && !parameters->is_object()) {
      return Status::InvalidArgument(where + ".parameters: expected an object (a JSON Schema), not " +
                                     std::string(json::TypeName(*parameters)));
    }
    llm::ToolDeclaration d{(*t)["name"].get<std::string>(), *description,
                           parameters == nullptr || parameters->is_null() ? "{}" : parameters->dump()};
    out.push_back(std::move(d));
  }
  return out;
}

int RunRequest(const ProviderArgs& args) {
  auto input_text = ReadStdin();
  if (!input_text.ok()) return Fail(input_text.status());
  Json input = strata::json::ParseOrDiscard<Json>(*input_text);
  if (input.is_discarded() || !input.is_object()) {
    std::string why = input.is_discarded() ? json::DescribeSyntaxError(*input_text) : "not an object";
    return Fail(Status::InvalidArgument("stdin: expected a JSON object {\"system_prompt\",\"tools\",\"history\","
                                        "\"options\"}: " + why));
  }
  // --provider wins; else the input may name it (conformance cases carry "provider").
  std::string provider = args.provider;
  if (provider.empty() && input.contains("provider") && input["provider"].is_string()) {
    provider = input["provider"].get<std::string>();
  }
  if (provider.empty()) return Fail(Status::InvalidArgument("--provider is required (or \"provider\" in the input)"));
  auto kind = KindFor(provider);
  if (!kind.ok()) return Fail(kind.status());
  llm::ChatRequest request;
  request.stream = !args.non_stream;
  request.model = args.model;
  if (request.model.empty() && input.contains("model")) {
    if (!input["model"].is_string()) return Fail(Status::InvalidArgument("model: expected a string"));
    request.model = input["model"].get<std::string>();
  }
  if (request.model.empty()) {
    if (auto preset = llm::FindProviderPreset(provider); preset.ok()) request.model = preset->default_model;
  }
  if (input.contains("system_prompt") && !input["system_prompt"].is_null()) {
    if (!input["system_prompt"].is_string()) return Fail(Status::InvalidArgument("system_prompt: expected a string"));
    request.system_prompt = input["system_prompt"].get<std::string>();
  }
  auto tools = ToolsFromJson(input.value("tools", Json()));
  if (!tools.ok()) return Fail(tools.status());
  request.tools = std::move(*tools);
  auto history = ParseMessages(input.value("history", Json::array()).dump());
  if (!history.ok()) return Fail(history.status().WithContext("history"));
  request.history = std::move(*history);
  // "provider_options" is the conformance cases' name for the same thing.
  Json options = input.value("options", input.value("provider_options", Json()));
  if (!args.options.empty()) {
    options = strata::json::ParseOrDiscard<Json>(args.options);
    if (options.is_discarded()) {
      return Fail(Status::InvalidArgument("--options: not valid JSON: " + json::DescribeSyntaxError(args.options)));
    }
  }
  if (!options.is_null() && !options.is_object()) {
    return Fail(Status::InvalidArgument("options: expected a JSON object, got " + options.dump()));
  }
  if (!options.is_null()) request.options = options.dump();
  auto body = llm::BuildRequestBody(*kind, request);
  if (!body.ok()) return Fail(body.status());
  std::cout << *body << "\n";
  return 0;
}

int RunParseStream(const ProviderArgs& args) {
  if (args.provider.empty()) return Fail(Status::InvalidArgument("--provider is required"));
  auto kind = KindFor(args.provider);
  if (!kind.ok()) return Fail(kind.status());
  auto input = ReadStdin();
  if (!input.ok()) return Fail(input.status());
  std::string options = args.options.empty() ? "{}" : args.options;
  if (args.options.empty()) {
    if (auto preset = llm::FindProviderPreset(args.provider); preset.ok()) options = preset->options;
  }
  auto decoded = args.non_stream ? llm::DecodeResponseBody(*kind, options, *input)
                                 : llm::DecodeSseText(*kind, options, *input);
  if (!decoded.ok()) {
    auto info = llm::ChatErrorOf(decoded.status());
    if (!info) return Fail(decoded.status());  // Not the response's fault (e.g. bad options).
    Json out{{"error", llm::ChatErrorKindName(info->kind)}, {"message", decoded.status().message()}};
    if (info->http_status != 0) out["status"] = info->http_status;
    std::cout << out.dump(-1, ' ', false, Json::error_handler_t::replace) << "\n";
    return 1;
  }
  std::string out = "{\"id\":";
  json::AppendString(&out, decoded->id);
  out += ",\"message\":";
  AppendMessageJson(decoded->message, &out);
  out += ",\"usage\":";
  if (decoded->usage) {
    const TokenUsage& u = *decoded->usage;
    out += "{\"input_other\":" + std::to_string(u.input_other) + ",\"output\":" + std::to_string(u.output) +
           ",\"input_cache_read\":" + std::to_string(u.input_cache_read) +
           ",\"input_cache_creation\":" + std::to_string(u.input_cache_creation) + "}";
  } else {
    out += "null";
  }
  std::cout << out << "}\n";
  return 0;
}

}  // namespace

void AddProviderCommand(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<ProviderArgs>();
  CLI::App* cmd = app.add_subcommand("provider", "Provider wire formats: build request bodies, parse responses");
  cmd->require_subcommand(1);
  auto common = [&](CLI::App* sub) {
    sub->add_option("--provider", args->provider,
                    "kimi | openai | openai-responses | anthropic | gemini (or deepseek, ollama, vllm, llamacpp)");
    sub->add_option("--options", args->options, "Provider options as a JSON object");
    sub->add_flag("--non-stream", args->non_stream, "A non-streamed request / a JSON response body");
  };
  CLI::App* request = cmd->add_subcommand("request", "stdin {system_prompt,tools,history,options} -> request body");
  common(request);
  request->add_option("--model", args->model, "Model name (default: the input's \"model\", else the preset's)");
  request->callback([args, exit_code] { *exit_code = RunRequest(*args); });
  CLI::App* parse = cmd->add_subcommand("parse-stream", "stdin: raw SSE (or JSON) response -> {id,message,usage}");
  common(parse);
  parse->callback([args, exit_code] { *exit_code = RunParseStream(*args); });
}

}  // namespace strata::cli
