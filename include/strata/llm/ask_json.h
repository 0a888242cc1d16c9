// AskForJson(): one question to a model whose answer must be a JSON object, asked again (with the reason)
// when the reply cannot be used. The memory pipeline (extraction, dedup) and find's model help (rewrite,
// rerank) ask their questions through it, so a retry reads the same everywhere.
//
//   llm::JsonAsk ask;
//   auto json = llm::AskForJson(model, prompt, check, {.attempts = 2}, &ask);
//   // ask.calls, ask.usage: what it cost; ask.last_error: why a reply was refused, if one was.
//
// Thread safety: as the provider's Generate.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "strata/llm/provider.h"

namespace strata::llm {

// Checks a parsed candidate (valid JSON object text); an error is shown to the model on the next attempt.
using JsonCheck = std::function<Status(std::string_view json)>;

struct AskOptions {
  int attempts = 2;                    // Model calls at most (the later ones see the previous error).
  const Canceller* cancel = nullptr;
};

// What one AskForJson cost and met, accumulated across its attempts.
struct JsonAsk {
  int calls = 0;
  TokenUsage usage;         // Summed over the calls whose provider reported usage.
  std::string last_error;   // Why the last refused reply was refused ("" when the first was used).
  bool unusable = false;    // Every attempt was answered and none could be used (the kUnavailable below).
};

// Returns the JSON object found in the model's reply (ExtractModelJson) once `check` accepts it. After
// `attempts` refused replies: kUnavailable "<what> failed after N attempts: ...: <reason>". Provider errors
// are returned as they are (chat_error.h). `ask` may be null.
Result<std::string> AskForJson(ChatProvider& model, const std::string& prompt, std::string_view what,
                               const JsonCheck& check, const AskOptions& options, JsonAsk* ask);

}  // namespace strata::llm
