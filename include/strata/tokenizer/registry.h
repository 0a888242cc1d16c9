// The one place token counters are named: every front end and the engine ask here, so a budget means the
// same number of tokens wherever it is given.
//
//   const MessageTokenCounter& c = tokenizer::CounterFor("o200k_base");   // loaded once per process
//   int64_t n = tokenizer::CountText(tokenizer::kDefaultEncoding, "some text");
//
// Names: "o200k_base" and "cl100k_base" (tiktoken's BPE, exact), and "chars" (kimi-cli's characters / 4).
// An encoding whose vocabulary cannot be loaded counts characters / 4 instead, and `warning` says so
// (naming what to install, never a path on the machine).
//
// Thread safety: all functions are thread-safe; counters live as long as the process.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "strata/message/token_estimator.h"
#include "strata/util/status.h"

namespace strata::tokenizer {

class Encoding;

inline constexpr std::string_view kDefaultEncoding = "o200k_base";

// The names CounterFor accepts, in the order they are listed to users.
std::span<const std::string_view> CounterNames();
// kInvalidArgument naming the choices unless `name` is one of CounterNames() ("encoding ... must be ...").
Status ValidateCounterName(std::string_view name);
// The counter named `name` (validated first: an unknown name is kInvalidArgument).
Result<const MessageTokenCounter*> FindCounter(std::string_view name, std::string* warning = nullptr);
// The counter named `name`, which must be one of CounterNames() (else: characters / 4, with a warning).
const MessageTokenCounter& CounterFor(std::string_view name, std::string* warning = nullptr);
// The BPE encoding named `name`, to encode and decode with: kInvalidArgument for a name that is not an
// encoding ("chars" counts, it does not encode), kUnavailable when its vocabulary is not installed.
Result<std::shared_ptr<const Encoding>> EncodingFor(std::string_view name);
// The tokens of raw `text` (not a message: no per-message overhead) under counter `name`.
int64_t CountText(std::string_view name, std::string_view text, std::string* warning = nullptr);

}  // namespace strata::tokenizer
