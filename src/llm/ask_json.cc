#include "strata/llm/ask_json.h"

#include <vector>

#include "strata/llm/generate.h"
#include "strata/llm/model_json.h"

namespace strata::llm {

Result<std::string> AskForJson(ChatProvider& model, const std::string& prompt, std::string_view what,
                               const JsonCheck& check, const AskOptions& options, JsonAsk* ask) {
  JsonAsk local;
  JsonAsk& out = ask != nullptr ? *ask : local;
  std::vector<Message> history = {Message::User(prompt)};
  for (int attempt = 1;; ++attempt) {
    ++out.calls;
    STRATA_ASSIGN_OR_RETURN(GenerateResult reply, Generate(model, "", {}, history, {}, {.cancel = options.cancel}));
    if (reply.usage) {
      out.usage.input_other += reply.usage->input_other;
      out.usage.input_cache_read += reply.usage->input_cache_read;
      out.usage.input_cache_creation += reply.usage->input_cache_creation;
      out.usage.output += reply.usage->output;
    }
    Result<std::string> json = ExtractModelJson(reply.message.ExtractText(), JsonShape::kObject);
    Status problem = json.ok() ? (check ? check(*json) : Status::Ok()) : json.status();
    if (problem.ok()) return json;
    out.last_error = std::string(problem.message());
    if (attempt >= options.attempts) {
      out.unusable = true;
      // The model's failure, not the caller's: a request the caller may send again, as for an unreachable
      // model (not a 400 blaming its arguments).
      return Status::Unavailable(std::string(what) + " failed after " + std::to_string(attempt) +
                                 " attempts: the model's replies could not be used: " + out.last_error);
    }
    history.push_back(reply.message);
    history.push_back(Message::User("Your reply could not be used: " + out.last_error +
                                    "\nReply again with only the JSON, exactly in the format asked for."));
  }
}

}  // namespace strata::llm
